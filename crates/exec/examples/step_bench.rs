//! Times one cifar8-bbn SGD train step on the generic evaluator with the fast
//! kernels (`eval_func::<f32>`, fast: true) and on the compiled plan
//! (`exec::Plan`), median of N runs after warm-up, and prints the plan's
//! profile.
//!
//! `cargo run --release -p exec --example step_bench -- [--batch 32,128]
//! [--reps N] [--min] [--no-generic] [--serial] [--net NAME] [--optimizer sgd|nesterov|adamw]
//! [--steps N] [--in-order] [--list] [--eval] [--file F.mlir]` (`--eval`:
//! the net's eval forward instead of its train step; `--file`: the `@main` of
//! a StableHLO file instead of a net, on seeded inputs in [-0.5, 0.5); `--steps N` also lists the N slowest
//! steps of the plan, or its first N in execution order; `--list` prints the
//! schedule: every step with its slots and fused program)

use den::{eval_func, EvalOptions, Tensor, Value};
use exec::Plan;
use layers::trainstep::{
    render_eval_forward, render_step, Optimizer, SlotKind, StepOptions, StepSignature,
};
use std::time::Instant;

/// Deterministic inputs of a train step: images and parameters in
/// [-0.5, 0.5), second moments small and positive, one-hot labels.
fn step_inputs(sig: &StepSignature, seed: u64) -> Vec<Value<f32>> {
    let mut s = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    let mut next = move || {
        s ^= s >> 12;
        s ^= s << 25;
        s ^= s >> 27;
        ((s.wrapping_mul(0x2545_F491_4F6C_DD1D) >> 40) as f32) / (1u64 << 24) as f32
    };
    sig.inputs
        .iter()
        .map(|slot| {
            let shape: Vec<usize> = slot.ty.shape.iter().map(|&d| d as usize).collect();
            let n: usize = shape.iter().product();
            let data: Vec<f32> = match slot.kind {
                SlotKind::Lr => vec![0.01; n],
                SlotKind::Bc1 => vec![0.9; n],
                SlotKind::Bc2 => vec![0.99; n],
                SlotKind::V | SlotKind::RunningVar => (0..n).map(|_| 0.01 + next() * 0.1).collect(),
                SlotKind::OneHot => {
                    let classes = *shape.last().unwrap_or(&1);
                    let mut d = vec![0.0; n];
                    for r in 0..n / classes.max(1) {
                        d[r * classes + (next() * classes as f32) as usize % classes] = 1.0;
                    }
                    d
                }
                _ => (0..n).map(|_| next() - 0.5).collect(),
            };
            Value::Float(Tensor::new(shape, data), slot.ty.elem)
        })
        .collect()
}

/// Seeded inputs of a file's function: floats in [-0.5, 0.5), integers 0.
fn file_inputs(module: &ir::Module, func: &str, seed: u64) -> Vec<Value<f32>> {
    let mut s = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    let mut next = move || {
        s ^= s >> 12;
        s ^= s << 25;
        s ^= s >> 27;
        ((s.wrapping_mul(0x2545_F491_4F6C_DD1D) >> 40) as f32) / (1u64 << 24) as f32
    };
    let f = module
        .funcs
        .iter()
        .find(|f| f.name == func)
        .expect("--file: the module has a @main");
    f.params
        .iter()
        .map(|p| {
            let shape: Vec<usize> = p.ty.shape.iter().map(|&d| d as usize).collect();
            let n: usize = shape.iter().product();
            if p.ty.elem.is_float() {
                let data = (0..n).map(|_| next() - 0.5).collect();
                Value::Float(Tensor::new(shape, data), p.ty.elem)
            } else {
                Value::Int(Tensor::new(shape, vec![0; n]), p.ty.elem)
            }
        })
        .collect()
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    v[v.len() / 2]
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let opt_val = |name: &str| {
        args.iter()
            .position(|a| a == name)
            .and_then(|i| args.get(i + 1).cloned())
    };
    let batches: Vec<i64> = opt_val("--batch")
        .unwrap_or_else(|| "32,128".into())
        .split(',')
        .map(|b| b.parse().expect("--batch takes integers, e.g. 32,128"))
        .collect();
    let reps: usize = opt_val("--reps").map_or(10, |r| r.parse().expect("--reps N"));
    let net_name = opt_val("--net").unwrap_or_else(|| "cifar8-bbn".into());
    let opt = Optimizer::parse(&opt_val("--optimizer").unwrap_or_else(|| "sgd".into()))
        .expect("--optimizer sgd|nesterov|adamw");
    let generic = !args.iter().any(|a| a == "--no-generic");
    let serial = args.iter().any(|a| a == "--serial");
    let in_order = args.iter().any(|a| a == "--in-order");
    let list = args.iter().any(|a| a == "--list");
    let eval = args.iter().any(|a| a == "--eval");
    let min_mode = args.iter().any(|a| a == "--min");
    let steps_top: usize = opt_val("--steps").map_or(0, |n| n.parse().expect("--steps N"));
    let net = layers::net::by_name(&net_name).expect("a built-in net name");

    let file = opt_val("--file");
    let batches = if file.is_some() { vec![0] } else { batches };
    for b in batches {
        let (module, func, inputs) = if let Some(path) = &file {
            let text = std::fs::read_to_string(path).expect("--file: a readable .mlir file");
            let module = ir::parse::parse_module(&text, path).unwrap_or_else(|e| panic!("{e}"));
            let inputs = file_inputs(&module, "main", 7);
            println!("== {path} @main ==");
            (module, "main".to_string(), inputs)
        } else {
            let r = if eval {
                render_eval_forward(&net, b).expect("render")
            } else {
                render_step(&net, b, &StepOptions::new(opt)).expect("render")
            };
            let what = if eval {
                "eval forward".into()
            } else {
                format!("{} step", opt.name())
            };
            println!("== {net_name} {what}, batch {b} ==");
            let inputs = step_inputs(&r.signature, 7);
            (r.module, r.signature.func.clone(), inputs)
        };

        let t = Instant::now();
        let mut plan = Plan::compile(&module, &func).expect("compile");
        if list {
            for line in plan.listing() {
                println!("{line}");
            }
        }
        plan.set_parallel(!serial);
        println!(
            "plan: {} (compiled in {:.1} ms)",
            plan.summary(),
            t.elapsed().as_secs_f64() * 1e3
        );

        for _ in 0..2 {
            plan.run(inputs.clone()).expect("plan run");
        }
        let mut times = Vec::new();
        for _ in 0..reps {
            let x = inputs.clone();
            let t = Instant::now();
            plan.run(x).expect("plan run");
            times.push(t.elapsed().as_secs_f64() * 1e3);
        }
        let plan_ms = median(times.clone());
        println!(
            "plan:    median {plan_ms:.1} ms  (min {:.1}, max {:.1}, {reps} runs)",
            times.iter().cloned().fold(f64::INFINITY, f64::min),
            times.iter().cloned().fold(0.0, f64::max)
        );

        if generic {
            let opts = EvalOptions {
                fast: true,
                record_margins: false,
                replicas: 1,
            };
            eval_func(&module, &func, inputs.clone(), &opts).expect("eval");
            let n = reps.clamp(1, 3);
            let mut g = Vec::new();
            for _ in 0..n {
                let x = inputs.clone();
                let t = Instant::now();
                eval_func(&module, &func, x, &opts).expect("eval");
                g.push(t.elapsed().as_secs_f64() * 1e3);
            }
            let gm = median(g);
            println!(
                "eval_func fast: median {gm:.1} ms ({n} runs); plan speed-up {:.2}x",
                gm / plan_ms
            );
        }

        plan.set_profile(true);
        if min_mode {
            // Each step's fastest run: on a shared machine, noise (other
            // tenants, steal) only adds time, so per-step minima compare
            // two builds more steadily than means.
            let mut best: Vec<Option<(String, u64)>> = Vec::new();
            for _ in 0..reps {
                plan.reset_profile();
                plan.run(inputs.clone()).expect("plan run");
                let st = plan.step_profile();
                best.resize(st.len(), None);
                for (b, s) in best.iter_mut().zip(&st) {
                    if b.as_ref().is_none_or(|(_, n)| s.nanos < *n) {
                        *b = Some((s.op.clone(), s.nanos));
                    }
                }
            }
            if steps_top > 0 {
                let st = plan.step_profile();
                for (i, (b, s)) in best.iter().zip(&st).enumerate().take(steps_top) {
                    let ms = b.as_ref().map_or(0.0, |b| b.1 as f64 / 1e6);
                    println!(
                        "  {i:>4} {:<34} {:>9} {:>4} {:>9.3}",
                        s.op, s.elements, s.ops, ms
                    );
                }
            }
            let mut by_op: Vec<(String, u64)> = Vec::new();
            for (op, n) in best.into_iter().flatten() {
                match by_op.iter_mut().find(|(o, _)| *o == op) {
                    Some(e) => e.1 += n,
                    None => by_op.push((op, n)),
                }
            }
            by_op.sort_by_key(|e| std::cmp::Reverse(e.1));
            let total: u64 = by_op.iter().map(|e| e.1).sum();
            println!("per-step minima over {reps} runs, summed by op (ms):");
            for (op, n) in &by_op {
                println!("  {op:<34} {:>9.3}", *n as f64 / 1e6);
            }
            println!("  {:<34} {:>9.3}", "total of minima", total as f64 / 1e6);
            continue;
        }
        plan.reset_profile();
        for _ in 0..reps {
            plan.run(inputs.clone()).expect("plan run");
        }
        let prof = plan.profile();
        let total: u64 = prof.iter().map(|p| p.nanos).sum();
        println!("profile ({reps} runs, per step):");
        println!(
            "  {:<34} {:>7} {:>9} {:>6} {:>9}",
            "op", "calls", "ms", "%", "GFLOP/s"
        );
        for p in &prof {
            let ms = p.nanos as f64 / 1e6 / reps as f64;
            let gf = if p.nanos > 0 {
                p.flops as f64 / p.nanos as f64
            } else {
                0.0
            };
            println!(
                "  {:<34} {:>7} {:>9.2} {:>6.1} {:>9.2}",
                p.op,
                p.calls / reps as u64,
                ms,
                100.0 * p.nanos as f64 / total.max(1) as f64,
                gf
            );
        }
        if steps_top > 0 {
            let mut st = plan.step_profile();
            if !in_order {
                st.sort_by_key(|s| std::cmp::Reverse(s.nanos));
            }
            println!(
                "{} steps (per step): op, line, elements, fused ops, inputs, ms, GB/s",
                if in_order { "first" } else { "slowest" }
            );
            for s in st.iter().take(steps_top) {
                let ms = s.nanos as f64 / 1e6 / reps as f64;
                // Bytes a memory-bound loop must move: each input once, the output once.
                let gbs = (s.inputs + 1) as f64 * s.elements as f64 * 4.0 / (ms * 1e6);
                println!(
                    "  {:<22} {:>6} {:>9} {:>4} {:>3} {:>8.2} {:>6.1}",
                    s.op,
                    s.line.map_or("-".into(), |l| l.to_string()),
                    s.elements,
                    s.ops,
                    s.inputs,
                    ms,
                    gbs
                );
            }
        }
        println!(
            "  {:<34} {:>7} {:>9.2}",
            "total (timed steps)",
            "",
            total as f64 / 1e6 / reps as f64
        );
    }
}
