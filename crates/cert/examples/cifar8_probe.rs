//! Timing probe for certifying cifar8-bbn (with its softmax cross-entropy) at a
//! given batch size: `cargo run --release -p cert --example cifar8_probe -- N…
//! [--defaults] [--phases] [--phases-only] [--fast-only]`.
//!
//! For each batch size N it times `cert::certify_layer` with one probe at one
//! point (`--defaults`: the default two probes at three points as well), and
//! with `--phases` breaks one probe down into the evaluations a tie runs — the
//! margin pass (forward over duals, margins recorded), the backward over f64,
//! and the forward over duals with one block's tangent set, for the input and
//! for one parameter — each with the fast kernels on and off, so the gain of
//! `den`'s f64/dual dispatch can be read off whatever the certifier asks for.

use cert::{certify_layer, TieOptions};
use den::{eval_func, Dual, EvalOptions, Tensor, Value};
use ir::{ElemType, TensorType};
use layers::{tie_funcs, CertLayer};
use std::time::Instant;

/// Deterministic normal-ish data (sum of uniforms), enough for timing.
fn data(n: usize, seed: u64) -> Vec<f64> {
    let mut s = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    let mut uniform = move || {
        s ^= s >> 12;
        s ^= s << 25;
        s ^= s >> 27;
        (s.wrapping_mul(0x2545_F491_4F6C_DD1D) >> 11) as f64 / (1u64 << 53) as f64
    };
    (0..n)
        .map(|_| (0..4).map(|_| uniform()).sum::<f64>() - 2.0)
        .collect()
}

fn shape(t: &TensorType) -> Vec<usize> {
    t.shape.iter().map(|&d| d as usize).collect()
}

fn seconds(f: impl FnOnce()) -> f64 {
    let t = Instant::now();
    f();
    t.elapsed().as_secs_f64()
}

/// One probe's evaluations, fast kernels on and off; `block` is the parameter
/// whose tangent the parameter tie sets.
fn phases(layer: &dyn CertLayer, input: &TensorType, block: usize, modes: &[bool]) {
    let funcs = tie_funcs(layer, input).expect("tie functions");
    let module = funcs.module();
    let types: Vec<TensorType> = std::iter::once(funcs.input.clone())
        .chain(funcs.params.iter().map(|p| p.ty.clone()))
        .collect();
    let point: Vec<Tensor<f64>> = types
        .iter()
        .enumerate()
        .map(|(i, t)| {
            let sh = shape(t);
            let n = sh.iter().product();
            Tensor::new(sh, data(n, i as u64 + 1))
        })
        .collect();
    let dual_inputs = |tangent_block: Option<usize>| -> Vec<Value<Dual<f64>>> {
        point
            .iter()
            .enumerate()
            .map(|(i, p)| {
                let t = if Some(i) == tangent_block {
                    data(p.len(), 100 + i as u64)
                } else {
                    vec![0.0; p.len()]
                };
                let d = p
                    .data
                    .iter()
                    .zip(t)
                    .map(|(&v, t)| Dual::new(v, t))
                    .collect();
                Value::Float(Tensor::new(p.shape.clone(), d), ElemType::F32)
            })
            .collect()
    };
    let f64_inputs = || -> Vec<Value<f64>> {
        let mut v: Vec<Value<f64>> = point
            .iter()
            .map(|p| Value::Float(p.clone(), ElemType::F32))
            .collect();
        let out = shape(&funcs.output);
        let n = out.iter().product();
        v.push(Value::Float(Tensor::new(out, data(n, 999)), ElemType::F32));
        v
    };
    for &fast in modes {
        let opts = |record_margins| EvalOptions {
            fast,
            record_margins,
            replicas: 1,
        };
        let margin = seconds(|| {
            eval_func(&module, "forward", dual_inputs(None), &opts(true)).expect("margin pass");
        });
        let backward = seconds(|| {
            eval_func(&module, "backward", f64_inputs(), &opts(false)).expect("backward");
        });
        let jvp_x = seconds(|| {
            eval_func(&module, "forward", dual_inputs(Some(0)), &opts(false)).expect("jvp dx");
        });
        let jvp_p = seconds(|| {
            eval_func(&module, "forward", dual_inputs(Some(block)), &opts(false))
                .expect("jvp param");
        });
        let blocks = types.len();
        println!(
            "  fast={fast:<5} margin pass {margin:.3}s  backward f64 {backward:.3}s  \
             jvp(dx) {jvp_x:.3}s  jvp(d{}) {jvp_p:.3}s  → one probe ≈ {:.2}s ({blocks} blocks)",
            funcs.params[block - 1].name,
            margin + backward + jvp_x + (blocks - 1) as f64 * jvp_p
        );
    }
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let defaults = args.iter().any(|a| a == "--defaults");
    let fast_only = args.iter().any(|a| a == "--fast-only");
    let phases_only = args.iter().any(|a| a == "--phases-only");
    let show_phases = phases_only || args.iter().any(|a| a == "--phases");
    let mut sizes: Vec<i64> = args
        .iter()
        .filter(|a| !a.starts_with("--"))
        .map(|a| a.parse().expect("batch size"))
        .collect();
    if sizes.is_empty() {
        sizes.push(2);
    }
    let spec = layers::net::by_name("cifar8-bbn").expect("cifar8-bbn is in the catalog");
    let chain = spec.chain_with_loss().expect("chain");
    for n in sizes {
        let input = spec.input_type(n);
        let mut runs = vec![(
            "probes 1 points 1",
            TieOptions {
                probes: 1,
                points: 1,
                ..Default::default()
            },
        )];
        if defaults {
            runs.push(("defaults (probes 2 points 3)", TieOptions::default()));
        }
        if phases_only {
            runs.clear();
        }
        for (label, opts) in runs {
            let t = Instant::now();
            let r = certify_layer(&chain, &input, &opts);
            println!(
                "N={n} {label}: {:?}, {} blocks, {} points, evidence {}, {:.2}s (min margin {:?}, kinks {:?})",
                r.verdict,
                r.blocks,
                r.points,
                r.evidence,
                t.elapsed().as_secs_f64(),
                r.min_margin.map(|m| (m.site, m.margin)),
                r.kinks_resampled
            );
        }
        if show_phases {
            // The first BN scale: its tangent enters mid-network.
            let modes: &[bool] = if fast_only { &[true] } else { &[true, false] };
            phases(&chain, &input, 2, modes);
        }
    }
}
