//! The rendered train step and eval forward: the packed signature, the round
//! trip of the printed text, the bf16 switch, and the drift guard (the step's
//! forward IS the standalone forward; train and eval forwards differ only in
//! the BN world) with its negative controls.

use ir::{ElemType, OpKind};
use layers::net::{by_name, LayerSpec, NetSpec};
use layers::ops::norm::BnWorld;
use layers::trainstep::{
    forward_drift, forward_prefix, render_eval_forward_parts, render_logits_forward,
    render_loss_forward, render_train_step, render_train_step_parts, step_signature, Optimizer,
    SlotKind,
};

#[test]
fn packed_signature_arities_match_the_reference() {
    // REFERENCE §6.1: cifar8 71 inputs / 69 outputs for every optimizer,
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
    let m = render_train_step(&by_name("cifar8-bbn").unwrap(), 2, Optimizer::AdamW, false).unwrap();
    let f = &m.funcs[0];
    assert_eq!(f.name, "cifar8_bbn_adam_train_step");
    assert_eq!((f.params.len(), f.results.len()), (135, 133));
}

#[test]
fn renders_verify_and_round_trip_through_text() {
    let net = by_name("cifar8-bbn").unwrap();
    let mut modules = vec![layers::trainstep::render_eval_forward(&net, 2).unwrap()];
    for opt in Optimizer::ALL {
        for bf16 in [false, true] {
            modules.push(render_train_step(&net, 2, opt, bf16).unwrap());
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
                let step = render_train_step_parts(&net, 2, opt, bf16).unwrap();
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
    let step = forward_prefix(&render_train_step_parts(&net, 2, Optimizer::Sgd, false).unwrap());
    let other = forward_prefix(&render_loss_forward(&drifted, 2, false).unwrap());
    assert_ne!(step, other);
}

fn retarget_pool(net: &mut NetSpec, layer: &str) {
    let spec = net
        .layers
        .iter_mut()
        .find(|(n, _)| n == layer)
        .map(|(_, s)| s)
        .expect("layer exists");
    *spec = LayerSpec::MaxPool {
        window: 3,
        stride: 2,
        pad: 1,
    };
}

#[test]
fn train_and_eval_forwards_differ_only_in_the_bn_world() {
    for name in ["cifar8-bbn", "cifar8-bn", "cifar8"] {
        let net = by_name(name).unwrap();
        let step = render_train_step_parts(&net, 2, Optimizer::AdamW, false).unwrap();
        let eval = render_eval_forward_parts(&net, 2).unwrap();
        let drifts = forward_drift(&net, &step, &eval).unwrap();
        assert!(drifts.is_empty(), "{name}: {drifts:?}");
        let bns = net
            .layers
            .iter()
            .filter(|(_, l)| matches!(l, LayerSpec::BatchNorm { .. }))
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

/// Negative control: an eval forward whose pool drifted to 3×3/s2/p1 (the
/// ResNet-stem convention, same output shape) is caught at that layer.
#[test]
fn drift_guard_catches_a_mismatched_pool() {
    let net = by_name("cifar8-bbn").unwrap();
    let step = render_train_step_parts(&net, 2, Optimizer::Nesterov, false).unwrap();
    let mut drifted = net.clone();
    retarget_pool(&mut drifted, "stage3.pool");
    let eval = render_eval_forward_parts(&drifted, 2).unwrap();
    let drifts = forward_drift(&net, &step, &eval).unwrap();
    let layers: Vec<&str> = drifts.iter().map(|d| d.layer.as_str()).collect();
    assert_eq!(layers, ["stage3.pool"], "{drifts:?}");
}

/// Negative controls: an eval forward that kept batch statistics, and a train
/// step rendered in the per-example world for a batch-BN net, are caught at
/// every BN layer.
#[test]
fn drift_guard_catches_a_mismatched_bn_world() {
    let net = by_name("cifar8-bbn").unwrap();
    let step = render_train_step_parts(&net, 2, Optimizer::Sgd, false).unwrap();
    let stale = render_logits_forward(&net, 2, BnWorld::Batch).unwrap();
    let drifts = forward_drift(&net, &step, &stale).unwrap();
    assert_eq!(drifts.len(), 8, "{drifts:?}");
    assert!(drifts.iter().all(|d| d.layer.contains(".bn")));

    let per_example = net.with_bn_world(BnWorld::PerExample);
    let wrong_step = render_train_step_parts(&per_example, 2, Optimizer::Sgd, false).unwrap();
    let eval = render_eval_forward_parts(&net, 2).unwrap();
    let drifts = forward_drift(&net, &wrong_step, &eval).unwrap();
    assert_eq!(drifts.len(), 8, "{drifts:?}");
}

#[test]
fn bf16_switch_converts_every_conv_and_dot_operand() {
    let net = by_name("cifar8-bbn").unwrap();
    let plain = render_train_step(&net, 2, Optimizer::AdamW, false).unwrap();
    let m = render_train_step(&net, 2, Optimizer::AdamW, true).unwrap();
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
