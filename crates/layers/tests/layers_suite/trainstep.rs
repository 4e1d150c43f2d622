//! The rendered train step and eval forward: the packed signature, the round
//! trip of the printed text, the bf16 switch, the step's forward IS the
//! standalone forward (with its negative control), and the eval forward's
//! running-statistic slots. The train/eval drift guard is the certificate's
//! (`crates/cert/tests/cert_suite/eval_drift.rs`).

use ir::{ElemType, Module, OpKind};
use layers::net::{by_name, LayerSpec, MaxPoolSpec, NetSpec};
use layers::ops::norm::BnWorld;
use layers::trainstep::{
    forward_prefix, render_eval_forward, render_loss_forward, render_step, step_signature,
    Optimizer, SlotKind, StepOptions,
};

/// The train step of `net` at `batch` with `opt`, f32 or bf16 conv/dot operands.
fn step(net: &NetSpec, batch: i64, opt: Optimizer, bf16: bool) -> Module {
    let opts = StepOptions {
        bf16,
        ..StepOptions::new(opt)
    };
    render_step(net, batch, &opts).unwrap().module
}

#[test]
fn packed_signature_arities_match_the_reference() {
    // docs/conventions.md §15: cifar8 71 inputs / 69 outputs for every optimizer,
    // cifar8-bn 119 / 117; batch-BN adds 2 running-stat inputs and 2
    // batch-stat outputs per BN layer (8 layers).
    for opt in Optimizer::ALL {
        for (net, ins, outs) in [
            ("cifar8", 71, 69),
            ("cifar8-bn", 119, 117),
            ("cifar8-bbn", 119 + 16, 117 + 16),
        ] {
            let sig = step_signature(&by_name(net).unwrap(), 4, opt).unwrap();
            assert_eq!((sig.inputs.len(), sig.outputs.len()), (ins, outs), "{net}");
            // Host buffer alignment: θ|m|v slots, then (lr|loss), bc1, bc2, then
            // the BN stat slots line up one to one.
            let (i, o) = (&sig.inputs[1..ins - 1], &sig.outputs[..]);
            for (a, b) in i.iter().zip(o) {
                assert_eq!(a.ty, b.ty, "{net}: {} vs {}", a.name, b.name);
            }
        }
    }
    let m = step(&by_name("cifar8-bbn").unwrap(), 2, Optimizer::AdamW, false);
    let f = &m.funcs[0];
    assert_eq!(f.name, "cifar8_bbn_adam_train_step");
    assert_eq!((f.params.len(), f.results.len()), (135, 133));
}

#[test]
fn renders_verify_and_round_trip_through_text() {
    let net = by_name("cifar8-bbn").unwrap();
    let mut modules = vec![render_eval_forward(&net, 2).unwrap().module];
    for opt in Optimizer::ALL {
        for bf16 in [false, true] {
            modules.push(step(&net, 2, opt, bf16));
        }
    }
    for m in modules {
        ir::verify_module(&m).unwrap();
        let text = ir::print::print_module(&m);
        let back = ir::parse::parse_module(&text, "step.mlir").unwrap();
        assert_eq!(back, m, "parse(print(m)) == m for {}", m.funcs[0].name);
    }
}

#[test]
fn step_forward_is_the_standalone_forward() {
    for name in ["cifar8-bbn", "cifar8-bn", "cifar8"] {
        let net = by_name(name).unwrap();
        for bf16 in [false, true] {
            let alone = forward_prefix(&render_loss_forward(&net, 2, bf16).unwrap());
            assert!(alone.len() > 50, "{name}: a real forward");
            for opt in Optimizer::ALL {
                let opts = StepOptions {
                    bf16,
                    ..StepOptions::new(opt)
                };
                let step = render_step(&net, 2, &opts).unwrap();
                assert_eq!(forward_prefix(&step), alone, "{name} {opt:?} bf16={bf16}");
            }
        }
    }
}

/// Negative control of the prefix comparison: a forward whose first pool is a
/// 3×3/s2 pad-1 window (same output shape) is not the step's forward.
#[test]
fn prefix_comparison_catches_a_pool_drift() {
    let net = by_name("cifar8-bbn").unwrap();
    let mut drifted = net.clone();
    retarget_pool(&mut drifted, "stage1.pool");
    let step = forward_prefix(&render_step(&net, 2, &StepOptions::new(Optimizer::Sgd)).unwrap());
    let other = forward_prefix(&render_loss_forward(&drifted, 2, false).unwrap());
    assert_ne!(step, other);
}

fn retarget_pool(net: &mut NetSpec, layer: &str) {
    *net.layer_mut(layer).expect("layer exists") = LayerSpec::MaxPool(MaxPoolSpec {
        window: 3,
        stride: 2,
        pad: 1,
    });
}

/// Only true-batch norms give the eval forward running-statistic inputs.
#[test]
fn eval_forward_reads_running_stats_of_true_batch_norms_only() {
    for name in ["cifar8-bbn", "cifar8-bn", "cifar8"] {
        let net = by_name(name).unwrap();
        let eval = render_eval_forward(&net, 2).unwrap();
        let bns = net
            .layers
            .iter()
            .filter(|(_, l)| matches!(l, LayerSpec::BatchNorm(..)))
            .count();
        let stats = eval.signature.input_positions(SlotKind::RunningMean).len();
        let want = if net.bn_world() == Some(BnWorld::Batch) {
            bns
        } else {
            0
        };
        assert_eq!(stats, want, "{name}: running-stat slots");
    }
}

#[test]
fn bf16_switch_converts_every_conv_and_dot_operand() {
    let net = by_name("cifar8-bbn").unwrap();
    let plain = step(&net, 2, Optimizer::AdamW, false);
    let m = step(&net, 2, Optimizer::AdamW, true);
    let f = &m.funcs[0];
    let tys = f.value_types();
    let (mut heavy, mut converts) = (0, 0);
    for op in &f.body.ops {
        match op.kind {
            OpKind::Convolution(_) | OpKind::DotGeneral { .. } => {
                heavy += 1;
                for x in &op.operands {
                    assert_eq!(tys[x.index()].elem, ElemType::BF16);
                }
                assert_eq!(op.results[0].1.elem, ElemType::F32, "f32 accumulation");
            }
            OpKind::Convert => converts += 1,
            _ => {}
        }
    }
    // 8 convs × (forward, dgrad, wgrad) minus the first conv's dgrad, 3 dense
    // × 3 minus nothing: every one of them converted.
    let plain_heavy = plain.funcs[0]
        .body
        .ops
        .iter()
        .filter(|o| matches!(o.kind, OpKind::Convolution(_) | OpKind::DotGeneral { .. }))
        .count();
    assert_eq!(heavy, plain_heavy);
    assert_eq!(heavy, 8 * 3 - 1 + 3 * 3);
    assert!(converts > 0);
    // Master weights and optimizer state stay f32.
    assert!(f.params.iter().all(|p| p.ty.elem == ElemType::F32));
    assert!(f.results.iter().all(|r| r.ty.elem == ElemType::F32));
}

/// The recipe scalars return unchanged after bc2, as bc1 and bc2 do (the
/// reference project's EMA and accumulation steps return every scalar they
/// take): each such result is the argument itself, in the inputs' order.
#[test]
fn recipe_scalars_are_returned_unchanged_after_bc2() {
    let net = by_name("cifar8").unwrap();
    let mut opts = StepOptions::new(Optimizer::AdamW);
    opts.recipe.ema = Some(0.999);
    opts.recipe.accumulate = Some(4);
    let r = render_step(&net, 4, &opts).unwrap();
    let sig = &r.signature;
    let names = |slots: &[layers::trainstep::Slot], from: SlotKind| -> Vec<String> {
        let at = slots.iter().position(|s| s.kind == from).unwrap();
        slots[at..at + 6].iter().map(|s| s.name.clone()).collect()
    };
    let expect = ["bc1", "bc2", "emad", "oemad", "aup", "akeep"];
    assert_eq!(names(&sig.inputs, SlotKind::Bc1), expect);
    assert_eq!(names(&sig.outputs, SlotKind::Bc1), expect);
    let f = r.func();
    let returned = &f.body.ops.last().unwrap().operands;
    assert_eq!(returned.len(), sig.outputs.len());
    for name in expect {
        let i = sig.inputs.iter().position(|s| s.name == name).unwrap();
        let o = sig.outputs.iter().position(|s| s.name == name).unwrap();
        assert_eq!(
            returned[o], f.params[i].value,
            "{name} is not returned unchanged"
        );
    }
}
