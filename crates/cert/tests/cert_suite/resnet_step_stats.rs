//! The batch mean/var outputs of a ResNet train step are each batch norm's
//! own statistics, checked by value in the f64 reference evaluator:
//! the stem BN's against a hand-run 7×7/s2 convolution of the images, and
//! all of them at once by feeding them to the eval forward as running
//! statistics — which then reproduces the batch-statistics forward's logits
//! exactly only if every site got its own BN's mean and var. A swap of two
//! same-width sites' statistics is the negative control.

use den::{eval_func, EvalOptions, Tensor, Value};
use ir::{ElemType, Module};
use layers::net::{resnet34_width, BatchNormSpec, NetSpec};
use layers::ops::norm::BnWorld;
use layers::trainstep::{
    eval_signature, render_eval_forward, render_logits_forward, render_step, step_signature,
    Optimizer, Slot, SlotKind, StepOptions,
};
use std::collections::HashMap;

const BATCH: i64 = 2;

/// A small deterministic generator (xorshift64*), uniform in [-1, 1).
struct Rng(u64);
impl Rng {
    fn next(&mut self) -> f64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        let u = self.0.wrapping_mul(0x2545_F491_4F6C_DD1D) >> 11;
        u as f64 / (1u64 << 52) as f64 - 1.0
    }
}

/// Inputs by slot name: images, θ, running stats, one-hot; m, v, lr zero,
/// bc1 = bc2 = 1.
fn draw(slots: &[Slot], rng: &mut Rng) -> HashMap<String, Tensor<f64>> {
    slots
        .iter()
        .map(|s| {
            let shape: Vec<usize> = s.ty.shape.iter().map(|&d| d as usize).collect();
            let n: usize = shape.iter().product();
            let data: Vec<f64> = match s.kind {
                SlotKind::Images | SlotKind::Param => (0..n).map(|_| rng.next()).collect(),
                SlotKind::RunningMean => (0..n).map(|_| 0.1 * rng.next()).collect(),
                SlotKind::RunningVar => (0..n).map(|_| 1.0 + 0.5 * rng.next().abs()).collect(),
                SlotKind::Bc1 | SlotKind::Bc2 => vec![1.0],
                SlotKind::OneHot => (0..n).map(|i| f64::from(i % shape[1] == 0)).collect(),
                _ => vec![0.0; n],
            };
            (s.name.clone(), Tensor::new(shape, data))
        })
        .collect()
}

fn run(
    m: &Module,
    func: &str,
    slots: &[Slot],
    by_name: &HashMap<String, Tensor<f64>>,
) -> Vec<Tensor<f64>> {
    let inputs = slots
        .iter()
        .map(|s| Value::Float(by_name[&s.name].clone(), ElemType::F32))
        .collect();
    eval_func::<f64>(m, func, inputs, &EvalOptions::default())
        .expect("the rendered function evaluates")
        .outputs
        .into_iter()
        .map(|v| v.into_float().expect("float output"))
        .collect()
}

/// The step's outputs by slot name.
fn step_outputs(
    net: &NetSpec,
    inputs: &HashMap<String, Tensor<f64>>,
) -> HashMap<String, Tensor<f64>> {
    let sig = step_signature(net, BATCH, Optimizer::Sgd).unwrap();
    let step = render_step(net, BATCH, &StepOptions::new(Optimizer::Sgd))
        .unwrap()
        .module;
    let outs = run(&step, &sig.func, &sig.inputs, inputs);
    sig.outputs
        .iter()
        .map(|s| s.name.clone())
        .zip(outs)
        .collect()
}

/// Per-channel (mean, biased var) over N·H·W of the stem convolution
/// (7×7, stride 2, padding 3, no bias; W as [O, I, 7, 7]) run by hand.
fn stem_conv_stats(x: &Tensor<f64>, w: &Tensor<f64>, c: usize, hw: usize) -> Vec<(f64, f64)> {
    let (o, k, s, p) = (w.shape[0], 7usize, 2usize, 3isize);
    assert_eq!(w.shape, [o, c, k, k], "stem conv weight layout");
    let out = (hw + 2 * p as usize - k) / s + 1;
    let mut stats = Vec::new();
    for oc in 0..o {
        let mut vals = Vec::new();
        for n in 0..BATCH as usize {
            for oy in 0..out {
                for ox in 0..out {
                    let mut acc = 0.0;
                    for ic in 0..c {
                        for ky in 0..k {
                            for kx in 0..k {
                                let iy = (oy * s + ky) as isize - p;
                                let ix = (ox * s + kx) as isize - p;
                                if iy < 0 || ix < 0 || iy >= hw as isize || ix >= hw as isize {
                                    continue;
                                }
                                let xi = ((n * c + ic) * hw + iy as usize) * hw + ix as usize;
                                let wi = ((oc * c + ic) * k + ky) * k + kx;
                                acc += x.data[xi] * w.data[wi];
                            }
                        }
                    }
                    vals.push(acc);
                }
            }
        }
        let mean = vals.iter().sum::<f64>() / vals.len() as f64;
        let var = vals.iter().map(|v| (v - mean).powi(2)).sum::<f64>() / vals.len() as f64;
        stats.push((mean, var));
    }
    stats
}

fn close(a: f64, b: f64) -> bool {
    (a - b).abs() <= 1e-9 * (1.0 + b.abs())
}

#[test]
fn stem_batch_stats_are_the_stem_convolutions_channel_statistics() {
    let net = resnet34_width(10, (32, 32), 4);
    let sig = step_signature(&net, BATCH, Optimizer::Sgd).unwrap();
    let inputs = draw(&sig.inputs, &mut Rng(0x5eed_0001));
    let outs = step_outputs(&net, &inputs);
    let want = stem_conv_stats(&inputs["x"], &inputs["stem.conv.W"], 3, 32);
    let (mean, var) = (&outs["stem.bn.batch_mean"], &outs["stem.bn.batch_var"]);
    for (c, (m, v)) in want.iter().enumerate() {
        assert!(
            close(mean.data[c], *m),
            "channel {c}: mean {} vs {m}",
            mean.data[c]
        );
        assert!(
            close(var.data[c], *v),
            "channel {c}: var {} vs {v}",
            var.data[c]
        );
    }
    // The check can fail: the stage-1 BN of the same width has other values.
    let other = &outs["stage1.block1.bn1.batch_mean"];
    assert!((0..want.len()).any(|c| !close(other.data[c], want[c].0)));
}

fn max_abs_diff(a: &Tensor<f64>, b: &Tensor<f64>) -> f64 {
    a.data
        .iter()
        .zip(&b.data)
        .map(|(x, y)| (x - y).abs())
        .fold(0.0, f64::max)
}

#[test]
fn every_sites_batch_stats_turn_the_eval_forward_into_the_batch_forward() {
    let net = resnet34_width(10, (32, 32), 4);
    let sig = step_signature(&net, BATCH, Optimizer::Sgd).unwrap();
    let mut inputs = draw(&sig.inputs, &mut Rng(0x5eed_0002));
    let outs = step_outputs(&net, &inputs);

    // Logits of the forward on batch statistics (the step's own forward).
    let batch_fwd = render_logits_forward(&net, BATCH, BnWorld::Batch).unwrap();
    let esig = eval_signature(&net, BATCH).unwrap();
    let want = run(&batch_fwd.module, &esig.func, &esig.inputs, &inputs).remove(0);

    // The eval forward with every running stat := that site's batch stat.
    let eval = render_eval_forward(&net, BATCH).unwrap().module;
    let sites = net.bn_sites().unwrap();
    assert_eq!(sites.len(), 36);
    for s in &sites {
        for (run_stat, batch_stat) in [("running_mean", "batch_mean"), ("running_var", "batch_var")]
        {
            let v = outs[&format!("{}.{batch_stat}", s.name)].clone();
            inputs.insert(format!("{}.{run_stat}", s.name), v);
        }
    }
    let got = run(&eval, &esig.func, &esig.inputs, &inputs).remove(0);
    let d = max_abs_diff(&got, &want);
    eprintln!("eval forward on the step's batch stats vs batch forward: {d:e}");
    assert!(d < 1e-9, "eval-with-batch-stats vs batch forward: {d:e}");

    // Negative control: two same-width sites (an inner BN and its block
    // sibling) trade statistics; the logits move.
    let (a, b) = ("stage2.block2.bn1", "stage2.block2.bn2");
    for stat in ["running_mean", "running_var"] {
        let ka = format!("{a}.{stat}");
        let kb = format!("{b}.{stat}");
        let ta = inputs[&ka].clone();
        let tb = inputs.insert(kb.clone(), ta).unwrap();
        inputs.insert(ka, tb);
    }
    let swapped = run(&eval, &esig.func, &esig.inputs, &inputs).remove(0);
    let d = max_abs_diff(&swapped, &want);
    eprintln!("with {a} and {b} swapped: {d:e}");
    assert!(d > 1e-4, "swapped statistics left the logits at {d:e}");
}

#[test]
fn the_eval_switch_passes_the_drift_checker_on_a_small_resnet() {
    use cert::net::check_eval_drift;
    use layers::net::LayerSpec;
    let net = resnet34_width(10, (32, 32), 4);
    let eval = net.with_batch_stat_bns_in(BnWorld::Eval);
    let r = check_eval_drift(&net, &eval, BATCH).unwrap();
    // The stem BN and the 16 blocks switch; everything else is identical.
    assert_eq!(r.bn_layers, 1 + 16);
    assert_eq!(r.identical_layers, net.layers.len() - 17);
    // Negative control: the stale switch (top-level batch norms only) leaves
    // every block on batch statistics, and the checker says so.
    let mut stale = net.clone();
    for (_, l) in &mut stale.layers {
        if let LayerSpec::BatchNorm(BatchNormSpec { world, .. }) = l {
            *world = BnWorld::Eval;
        }
    }
    let e = check_eval_drift(&net, &stale, BATCH).unwrap_err();
    eprintln!("stale switch: {e}");
    assert!(e.0.contains("block"), "{e}");
}
