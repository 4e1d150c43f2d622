//! ResNet train steps and eval forwards carry every batch norm:
//! one running mean/var input and one batch mean/var output per batch norm —
//! the stem's and every one inside a block — in `bn_sites()` order; the eval
//! forward reads the running statistics of all of them and reduces over no
//! batch axis (the certificate's drift guard seeing the blocks switch world
//! is in `crates/cert/tests/cert_suite/eval_drift.rs`). The expected
//! counts are written out from the architecture by hand, and a stale
//! top-level-only walker (reimplemented here) shows the counts discriminate.

use ir::{Func, OpKind, ValueId};
use layers::net::{resnet34, resnet34_width, resnet50_width, BatchNormSpec, LayerSpec, NetSpec};
use layers::ops::norm::BnWorld;
use layers::trainstep::{
    eval_signature, render_eval_forward, render_logits_forward, render_step, render_train_forward,
    step_signature, Optimizer, SlotKind, StepOptions,
};
use std::collections::HashSet;

/// ResNet-34: stem BN + 16 basic blocks × 2 BNs + 3 projection skips
/// (stages 2–4) × 1 BN. Parameters: stem conv W + BN γ β (3), per block
/// conv1 W, bn1 γ β, conv2 W, bn2 γ β (6 × 16), per projection conv W + BN
/// γ β (3 × 3), fc W b (2).
const R34_BNS: usize = 1 + 16 * 2 + 3;
const R34_PARAMS: usize = 3 + 16 * 6 + 3 * 3 + 2;
/// ResNet-50: stem BN + 16 bottlenecks × 3 BNs + 4 projections (every
/// stage's first block) × 1 BN; per bottleneck 3 convs + 3 BNs = 9 tensors.
const R50_BNS: usize = 1 + 16 * 3 + 4;
const R50_PARAMS: usize = 3 + 16 * 9 + 4 * 3 + 2;

/// Inputs: x, θ|m|v, lr, bc1, bc2, 2 running stats per BN, onehot.
fn want_inputs(params: usize, bns: usize) -> usize {
    1 + 3 * params + 3 + 2 * bns + 1
}
/// Outputs: θ'|m'|v', loss, bc1, bc2, 2 batch stats per BN.
fn want_outputs(params: usize, bns: usize) -> usize {
    3 * params + 3 + 2 * bns
}

fn small_nets() -> [(NetSpec, usize, usize); 2] {
    [
        (resnet34_width(10, (32, 32), 4), R34_PARAMS, R34_BNS),
        (resnet50_width(10, (32, 32), 4), R50_PARAMS, R50_BNS),
    ]
}

/// The walker trainstep used to have: batch-world batch norms at the top
/// level only, blind to the ones inside blocks.
fn stale_top_level_bns(net: &NetSpec) -> Vec<String> {
    net.layers
        .iter()
        .filter(|(_, l)| {
            matches!(
                l,
                LayerSpec::BatchNorm(BatchNormSpec {
                    world: BnWorld::Batch,
                    ..
                })
            )
        })
        .map(|(n, _)| n.clone())
        .collect()
}

fn slot_names(slots: &[layers::trainstep::Slot], kind: SlotKind) -> Vec<String> {
    slots
        .iter()
        .filter(|s| s.kind == kind)
        .map(|s| s.name.clone())
        .collect()
}

#[test]
fn full_resnet34_step_has_407_inputs_and_405_outputs() {
    assert_eq!(want_inputs(R34_PARAMS, R34_BNS), 407);
    assert_eq!(want_outputs(R34_PARAMS, R34_BNS), 405);
    let net = resnet34(10, (224, 224));
    for opt in Optimizer::ALL {
        let sig = step_signature(&net, 2, opt).unwrap();
        assert_eq!((sig.inputs.len(), sig.outputs.len()), (407, 405), "{opt:?}");
    }
    // Negative control: the stale walker finds the stem BN only and would
    // give 337 / 335 — the counts above tell the two apart.
    let stale = stale_top_level_bns(&net);
    assert_eq!(stale, ["stem.bn"]);
    assert_eq!(
        (
            want_inputs(R34_PARAMS, stale.len()),
            want_outputs(R34_PARAMS, stale.len())
        ),
        (337, 335)
    );
}

#[test]
fn small_resnet_steps_have_one_stat_slot_pair_per_bn_site_in_site_order() {
    for (net, params, bns) in small_nets() {
        let sites = net.bn_sites().unwrap();
        assert_eq!(sites.len(), bns, "{}", net.name);
        let site_names: Vec<&str> = sites.iter().map(|s| s.name.as_str()).collect();
        // The first block's BNs sit inside it, under its name.
        assert_eq!(site_names[0], "stem.bn");
        assert!(
            site_names[1].starts_with("stage1.") && site_names[1].ends_with("bn1"),
            "{site_names:?}"
        );
        let step = render_step(&net, 2, &StepOptions::new(Optimizer::HeavyBall))
            .unwrap()
            .module;
        let f = &step.funcs[0];
        assert_eq!(
            (f.params.len(), f.results.len()),
            (want_inputs(params, bns), want_outputs(params, bns)),
            "{}",
            net.name
        );
        let sig = step_signature(&net, 2, Optimizer::HeavyBall).unwrap();
        for (kind, suffix, slots) in [
            (SlotKind::RunningMean, "running_mean", &sig.inputs),
            (SlotKind::RunningVar, "running_var", &sig.inputs),
            (SlotKind::BatchMean, "batch_mean", &sig.outputs),
            (SlotKind::BatchVar, "batch_var", &sig.outputs),
        ] {
            let want: Vec<String> = site_names.iter().map(|n| format!("{n}.{suffix}")).collect();
            assert_eq!(slot_names(slots, kind), want, "{} {suffix}", net.name);
        }
        // Each stat slot is as wide as its BN.
        for (pos, site) in sig
            .input_positions(SlotKind::RunningMean)
            .iter()
            .zip(&sites)
        {
            assert_eq!(sig.inputs[*pos].ty.shape, [site.ch], "{}", site.name);
        }
        // Negative control: the stale walker finds one BN of `bns`.
        let stale = stale_top_level_bns(&net);
        assert_eq!(stale.len(), 1);
        assert_ne!(want_inputs(params, stale.len()), f.params.len());
    }
}

/// `(reduce ops over the batch axis, running-stat params never read)`.
fn batch_reduces_and_unread_params(f: &Func, stat_params: &[usize]) -> (usize, usize) {
    let mut read: HashSet<ValueId> = HashSet::new();
    let mut batch_reduces = 0;
    for op in &f.body.ops {
        read.extend(op.operands.iter().copied());
        if let OpKind::Reduce { dims } = &op.kind {
            let rank = f.value_types()[op.operands[0].index()].shape.len();
            // Over the batch axis of an activation ([N, …], rank ≥ 2).
            if rank >= 2 && dims.contains(&0) {
                batch_reduces += 1;
            }
        }
    }
    let unread = stat_params
        .iter()
        .filter(|&&i| !read.contains(&f.params[i].value))
        .count();
    (batch_reduces, unread)
}

#[test]
fn resnet_eval_forward_reads_every_running_stat_and_no_batch_statistic() {
    for (net, _, bns) in small_nets() {
        let sig = eval_signature(&net, 2).unwrap();
        let mut stats = sig.input_positions(SlotKind::RunningMean);
        stats.extend(sig.input_positions(SlotKind::RunningVar));
        assert_eq!(stats.len(), 2 * bns, "{}", net.name);
        let eval = render_eval_forward(&net, 2).unwrap().module;
        let (reduces, unread) = batch_reduces_and_unread_params(&eval.funcs[0], &stats);
        assert_eq!((reduces, unread), (0, 0), "{}", net.name);
        let text = ir::print::print_module(&eval);
        assert!(!text.contains("dimensions = [0, 2, 3]"), "{}", net.name);

        // Negative control: the same forward left in the Batch world (what
        // the stale switch emitted for every BN inside a block) computes
        // mean and var over the batch of every BN and ignores the stats.
        let stale = render_logits_forward(&net, 2, BnWorld::Batch).unwrap();
        let (reduces, unread) = batch_reduces_and_unread_params(stale.func(), &stats);
        assert_eq!(reduces, 2 * bns, "{}", net.name);
        assert_eq!(unread, 2 * bns, "{}", net.name);
        let text = ir::print::print_module(&stale.module);
        assert!(text.contains("dimensions = [0, 2, 3]"), "{}", net.name);
    }
}

/// The train-mode forward takes x and θ only, reads every θ, and
/// normalises every batch norm by the batch's own statistics (a mean and a
/// variance reduction over the batch per BN); the eval forward, rendered
/// the same way, makes none of those reductions.
#[test]
fn resnet_train_forward_takes_no_running_stat_and_normalises_by_the_batch() {
    for (net, params, bns) in small_nets() {
        let fwd = render_train_forward(&net, 2).unwrap();
        let sig = &fwd.signature;
        assert!(sig.func.ends_with("_fwd"), "{}", sig.func);
        assert_eq!(sig.inputs.len(), 1 + params, "{}", net.name);
        assert!(
            sig.inputs[1..].iter().all(|s| s.kind == SlotKind::Param),
            "{}",
            net.name
        );
        let theta: Vec<usize> = (1..=params).collect();
        let (reduces, unread) = batch_reduces_and_unread_params(fwd.func(), &theta);
        assert_eq!((reduces, unread), (2 * bns, 0), "{}", net.name);
        let eval = render_eval_forward(&net, 2).unwrap();
        let (reduces, _) = batch_reduces_and_unread_params(eval.func(), &theta);
        assert_eq!(reduces, 0, "{}", net.name);
    }
}
