use cert::{certify_layer, TieOptions};
use ir::TensorType;
use layers::ops::conv::{Conv2d, Padding};
use layers::ops::dense::{Dense, Flatten};
use layers::ops::loss::SoftmaxCrossEntropy;
use layers::ops::norm::{BatchNorm, BnWorld};
use layers::ops::pool::MaxPool;
use layers::ops::activation::Relu;
use layers::Chain;

fn main() {
    let n: i64 = std::env::args().nth(1).map(|s| s.parse().unwrap()).unwrap_or(2);
    let mut c = Chain::new();
    let chans = [(3, 16), (16, 16), (16, 16), (16, 16), (16, 32), (32, 32), (32, 32), (32, 32)];
    for (i, (a, b)) in chans.iter().enumerate() {
        c = c.push(format!("conv{i}"), Conv2d { k: 3, stride: 1, padding: Padding::Symmetric, in_ch: *a, out_ch: *b, bias: true });
        c = c.push(format!("bn{i}"), BatchNorm { ch: *b, world: BnWorld::Batch, eps: 1e-5 });
        if i % 2 == 1 {
            c = c.push(format!("pool{i}"), MaxPool { window: 2, stride: 2, pad: 0 });
        }
        c = c.push(format!("relu{i}"), Relu);
    }
    c = c.push("flat", Flatten);
    c = c.push("d1", Dense { in_f: 128, out_f: 64, bias: true }).push("r1", Relu);
    c = c.push("d2", Dense { in_f: 64, out_f: 64, bias: true }).push("r2", Relu);
    c = c.push("d3", Dense { in_f: 64, out_f: 10, bias: true });
    c = c.push("loss", SoftmaxCrossEntropy { classes: 10, label_smoothing: None });
    let opts = TieOptions { probes: 1, points: 1, max_attempts: 4, ..Default::default() };
    let t = std::time::Instant::now();
    let r = certify_layer(&c, &TensorType::f32(vec![n, 3, 32, 32]), &opts);
    println!("N={n}: {:?} blocks {} evidence {} in {:.2}s margin {:?} kinks {:?}", r.verdict, r.blocks, r.evidence, t.elapsed().as_secs_f64(), r.min_margin, r.kinks_resampled);
}
