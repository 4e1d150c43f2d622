//! Training smoke test of ResNet-34: 30 AdamW steps of the
//! rendered, certified train step at 64×64 input, K = 10, on a fixed batch of
//! 8 random images with fixed random labels, so the loss must fall (the net
//! memorises the batch). Parameters are He-normal as the trainer draws them
//! (BN γ = 1, β = 0). Prints the loss and wall time of every step.
//!
//! `cargo run --release -p train --example resnet_smoke -- [STEPS] [BATCH] [HW]`
//! (defaults 30 8 64).

use den::{Tensor, Value};
use exec::Plan;
use ir::rng::{Rng, TRAIN_SALT};
use ir::ElemType;
use layers::net::resnet34;
use layers::trainstep::{render_step, step_signature, Optimizer, SlotKind, StepOptions};
use std::time::Instant;
use train::session::init_values;

fn main() {
    let args: Vec<usize> = std::env::args()
        .skip(1)
        .map(|a| a.parse().expect("usage: resnet_smoke [STEPS] [BATCH] [HW]"))
        .collect();
    let steps = args.first().copied().unwrap_or(30);
    let batch = args.get(1).copied().unwrap_or(8) as i64;
    let hw = args.get(2).copied().unwrap_or(64) as i64;
    let classes = 10;
    let net = resnet34(classes, (hw, hw));
    let opt = Optimizer::AdamW;

    let t0 = Instant::now();
    let module = render_step(&net, batch, &StepOptions::new(opt))
        .expect("render")
        .module;
    let sig = step_signature(&net, batch, opt).expect("signature");
    let render_s = t0.elapsed().as_secs_f64();
    let t0 = Instant::now();
    let mut plan = Plan::compile(&module, &sig.func).expect("plan");
    println!(
        "{}: {} inputs -> {} outputs; rendered in {:.0} ms, plan compiled in {:.0} ms",
        sig.func,
        sig.inputs.len(),
        sig.outputs.len(),
        render_s * 1e3,
        t0.elapsed().as_secs_f64() * 1e3
    );

    // The host state: one f32 buffer per input slot.
    let mut rng = Rng::derived(0, TRAIN_SALT, 0x5e5);
    let specs = net.param_specs().expect("params");
    let mut params = specs.iter();
    let labels: Vec<usize> = (0..batch).map(|_| rng.below(classes as usize)).collect();
    let mut state: Vec<Vec<f32>> = sig
        .inputs
        .iter()
        .map(|s| {
            let n = s.ty.num_elements() as usize;
            match s.kind {
                SlotKind::Images => (0..n).map(|_| rng.normal() as f32).collect(),
                SlotKind::Param => {
                    let p = params.next().expect("one spec per θ slot");
                    assert_eq!(p.ty, s.ty, "{}", s.name);
                    init_values(&p.init, n, &mut rng)
                }
                SlotKind::RunningVar => vec![1.0; n],
                SlotKind::OneHot => {
                    let mut t = vec![0.0; n];
                    for (i, &l) in labels.iter().enumerate() {
                        t[i * classes as usize + l] = 1.0;
                    }
                    t
                }
                _ => vec![0.0; n],
            }
        })
        .collect();
    let pos = |k| sig.input_positions(k);
    let (lr_at, bc1_at, bc2_at) = (
        pos(SlotKind::Lr)[0],
        pos(SlotKind::Bc1)[0],
        pos(SlotKind::Bc2)[0],
    );
    // θ, m, v outputs feed the same inputs back (the packed protocol).
    let feedback: Vec<(usize, usize)> = [SlotKind::Param, SlotKind::M, SlotKind::V]
        .into_iter()
        .flat_map(|k| {
            sig.input_positions(k)
                .into_iter()
                .zip(sig.output_positions(k))
        })
        .collect();
    let loss_at = sig.output_positions(SlotKind::Loss)[0];

    let mut losses = Vec::new();
    let mut times = Vec::new();
    for t in 1..=steps {
        state[lr_at] = vec![1e-3];
        state[bc1_at] = vec![(1.0 - 0.9f64.powi(t as i32)) as f32];
        state[bc2_at] = vec![(1.0 - 0.999f64.powi(t as i32)) as f32];
        let inputs: Vec<Value<f32>> = sig
            .inputs
            .iter()
            .zip(&state)
            .map(|(s, d)| {
                let shape = s.ty.shape.iter().map(|&x| x as usize).collect();
                Value::Float(Tensor::new(shape, d.clone()), ElemType::F32)
            })
            .collect();
        let t0 = Instant::now();
        let outs = plan.run(inputs).expect("step");
        let ms = t0.elapsed().as_secs_f64() * 1e3;
        let mut outs: Vec<Option<Tensor<f32>>> = outs.into_iter().map(|v| v.into_float()).collect();
        let loss = outs[loss_at].as_ref().expect("loss").data[0];
        for &(i, o) in &feedback {
            state[i] = outs[o].take().expect("float output").data;
        }
        println!("step {t:>3}: loss {loss:.4e}  {ms:.0} ms");
        losses.push(loss);
        times.push(ms);
    }
    if losses.is_empty() {
        return;
    }
    let mean_ms = times.iter().skip(1).sum::<f64>() / (times.len().max(2) - 1) as f64;
    let first = losses[0];
    let last = *losses.last().unwrap();
    println!(
        "{}: loss {first:.4e} -> {last:.4e} over {steps} steps (batch {batch}, {hw}×{hw}); {mean_ms:.0} ms/step after the first",
        net.name
    );
    assert!(
        last.is_finite() && last < first,
        "the loss did not fall on a memorisable batch"
    );
}
