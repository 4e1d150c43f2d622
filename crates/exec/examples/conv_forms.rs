//! Time per convolution form of a net's train step: renders the step, takes
//! every `stablehlo.convolution` it contains with its operand shapes and
//! attributes, and times den's fast f32 kernel on each distinct one (random
//! operands, best of N calls after a warm-up), grouped by form (forward,
//! input-VJP, weight-VJP; kernel size, stride, spatial size) with GFLOP/s.
//! The profile of `certgrad bench step` names only "stablehlo.convolution";
//! this splits that line.
//!
//! `cargo run --release -p exec --example conv_forms -- [--net resnet34]
//! [--batch 8] [--reps 3] [--ab-layout | --ab-lanes]`
//!
//! `--ab-layout` times every form in both layouts of the implicit GEMM's
//! packed kernel (one-register panels, the default, and row-major, the
//! layout before them), alternating calls in this one process, and prints
//! each form's panels/row-major ratio of best times: on this shared,
//! noisy machine only such paired figures compare. `--ab-lanes` does the
//! same with the f32 lane tiles (output positions in the vector lanes) on
//! and off.

use std::collections::BTreeMap;
use std::time::Instant;

use den::{fast, Tensor};
use ir::{OpKind, TensorType};
use layers::trainstep::{render_step, Optimizer, StepOptions};

/// An A/B switch: what sets configuration B (`true`) or A, and the ratio's name.
type AbSwitch = (fn(bool), &'static str);

/// A distinct convolution: key, calls, lhs / kernel / result shapes, attributes.
type Conv = (
    String,
    usize,
    Vec<usize>,
    Vec<usize>,
    Vec<usize>,
    ir::ConvAttrs,
);

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let opt_val = |name: &str| {
        args.iter()
            .position(|a| a == name)
            .and_then(|i| args.get(i + 1).cloned())
    };
    let net_name = opt_val("--net").unwrap_or_else(|| "resnet34".into());
    let batch: i64 = opt_val("--batch").map_or(8, |b| b.parse().expect("--batch N"));
    let reps: usize = opt_val("--reps").map_or(3, |r| r.parse().expect("--reps N"));
    let ab: Option<AbSwitch> = if args.iter().any(|a| a == "--ab-layout") {
        Some((fast::set_row_major_kernel_layout, "panels/row-major"))
    } else if args.iter().any(|a| a == "--ab-lanes") {
        Some((|b| fast::set_lane_tiles(!b), "lanes/row tiles"))
    } else {
        None
    };
    let ab_layout = ab.is_some();
    let net = layers::net::by_name(&net_name).expect("a built-in net name");
    let r = render_step(
        &net,
        batch,
        &StepOptions::new(Optimizer::parse("sgd").unwrap()),
    )
    .expect("render");
    let func = r.module.func(&r.signature.func).expect("step function");

    let mut types: BTreeMap<usize, TensorType> = BTreeMap::new();
    for p in &func.params {
        types.insert(p.value.index(), p.ty.clone());
    }
    // Distinct convolutions (by their debug text) with their call counts.
    let mut convs: Vec<Conv> = Vec::new();
    for op in &func.body.ops {
        for (v, t) in &op.results {
            types.insert(v.index(), t.clone());
        }
        let OpKind::Convolution(a) = &op.kind else {
            continue;
        };
        let shape = |t: &TensorType| t.shape.iter().map(|&d| d as usize).collect::<Vec<_>>();
        let l = shape(&types[&op.operands[0].index()]);
        let k = shape(&types[&op.operands[1].index()]);
        let o = shape(&op.results[0].1);
        let key = format!("{l:?}{k:?}{o:?}{a:?}");
        match convs.iter_mut().find(|c| c.0 == key) {
            Some(c) => c.1 += 1,
            None => convs.push((key, 1, l, k, o, a.clone())),
        }
    }

    let mut rng = 0x2545_F491_4F6C_DD1Du64;
    let mut fill = |n: usize| -> Vec<f32> {
        (0..n)
            .map(|_| {
                rng ^= rng >> 12;
                rng ^= rng << 25;
                rng ^= rng >> 27;
                ((rng.wrapping_mul(0x2545_F491_4F6C_DD1D) >> 40) as f32) / (1u64 << 24) as f32 - 0.5
            })
            .collect()
    };
    println!(
        "{net_name} sgd step, batch {batch}: {} distinct convolutions",
        convs.len()
    );
    println!(
        "  {:<44} {:>5} {:>9} {:>8} {:>8}",
        "form", "calls", "GFLOP", "ms", "GFLOP/s"
    );
    let (mut total_ms, mut total_gf, mut total_b_ms) = (0.0, 0.0, 0.0);
    let mut by_kind: BTreeMap<&'static str, (f64, f64)> = BTreeMap::new();
    for (_, calls, l, k, o, a) in &convs {
        let d = &a.dims;
        let ko = k[d.kernel_output_feature as usize];
        let macs = o.iter().product::<usize>() * (k.iter().product::<usize>() / ko.max(1));
        let gflop = 2.0 * macs as f64 / 1e9;
        let ksp: Vec<usize> = d.kernel_spatial.iter().map(|&s| k[s as usize]).collect();
        let isp: Vec<usize> = d.input_spatial.iter().map(|&s| l[s as usize]).collect();
        let osp: Vec<usize> = d.output_spatial.iter().map(|&s| o[s as usize]).collect();
        let kind = if a.lhs_dilation.iter().any(|&x| x > 1) {
            "input-VJP (lhs-dilated)"
        } else if a.window_reversal.iter().any(|&x| x) {
            "input-VJP"
        } else if ksp.iter().product::<usize>() > osp.iter().product::<usize>() {
            "weight-VJP"
        } else {
            "forward"
        };
        let form = format!(
            "{kind} k{:?} s{:?} rd{:?} {}→{:?}",
            ksp, a.window_strides, a.rhs_dilation, isp[0], osp
        );
        let lt = Tensor::new(l.clone(), fill(l.iter().product()));
        let kt = Tensor::new(k.clone(), fill(k.iter().product()));
        let run = || fast::convolution(&lt, &kt, a, o);
        let time = |b: bool| {
            if let Some((set_b, _)) = ab {
                set_b(b);
            }
            let t = Instant::now();
            std::hint::black_box(run());
            t.elapsed().as_secs_f64()
        };
        time(false);
        let (mut best, mut best_b) = (f64::INFINITY, f64::INFINITY);
        for _ in 0..reps {
            best = best.min(time(false));
            if ab_layout {
                best_b = best_b.min(time(true));
            }
        }
        if let Some((set_b, _)) = ab {
            set_b(false);
        }
        if ab_layout {
            total_b_ms += best_b * 1e3 * *calls as f64;
        }
        let ms = best * 1e3 * *calls as f64;
        total_ms += ms;
        total_gf += gflop * *calls as f64;
        let e = by_kind.entry(kind).or_default();
        e.0 += ms;
        e.1 += gflop * *calls as f64;
        let ratio = if let Some((_, name)) = ab {
            format!("  {name} {:.3}", best / best_b)
        } else {
            String::new()
        };
        println!(
            "  {form:<44} {calls:>5} {:>9.3} {ms:>8.2} {:>8.1}{ratio}",
            gflop * *calls as f64,
            gflop / best
        );
    }
    for (kind, (ms, gf)) in &by_kind {
        println!(
            "  total {kind:<38} {:>15.3} {ms:>8.2} {:>8.1}",
            gf,
            gf / (ms * 1e-3)
        );
    }
    println!(
        "  total {:<38} {:>15.3} {total_ms:>8.2} {:>8.1}",
        "all",
        total_gf,
        total_gf / (total_ms * 1e-3)
    );
    if let Some((_, name)) = ab {
        println!(
            "  B, same calls: {total_b_ms:.2} ms; {name} {:.3}",
            total_ms / total_b_ms
        );
    }
}
