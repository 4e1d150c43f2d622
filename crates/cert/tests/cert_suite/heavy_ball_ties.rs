//! The heavy-ball tail (docs/training.md §2, the ImageNet recipe: coupled L2
//! `g ← wd·θ + g`, `v' = μ·v + g`, `θ' = θ − lr·v'`, wd 1e-4, μ 0.9) under
//! the train-step tie, with negative controls: decay decoupled from the
//! velocity, the L2 term dropped, and Nesterov's tail under heavy-ball's name.

use crate::common::{refuted_in, tiny};
use cert::step::{certify_train_step, StepTieOptions, StepTieReport};
use cert::Verdict;
use ir::{BinaryOp, Module, Op, OpKind, SrcLoc, ValueId};
use layers::net::{by_name, NetSpec};
use layers::ops::norm::BnWorld;
use layers::trainstep::{
    render_step, step_signature, Optimizer, SlotKind, StepOptions, HEAVY_BALL_MU,
    HEAVY_BALL_WEIGHT_DECAY,
};

const HB: Optimizer = Optimizer::HeavyBall;

fn certify(net: &NetSpec, m: &Module) -> StepTieReport {
    certify_train_step(net, 3, HB, m, &StepTieOptions::default())
}

/// The op defining `v` (top level).
fn def(m: &Module, v: ValueId) -> &Op {
    m.funcs[0]
        .body
        .ops
        .iter()
        .find(|o| o.results.iter().any(|(r, _)| *r == v))
        .expect("defined at top level")
}

fn returned(m: &Module, k: usize) -> ValueId {
    m.funcs[0].body.ops.last().unwrap().operands[k]
}

/// For parameter block `b`: (θ' value, v' value).
fn outputs(net: &NetSpec, m: &Module, b: usize) -> (ValueId, ValueId) {
    let sig = step_signature(net, 3, HB).unwrap();
    (
        returned(m, sig.output_positions(SlotKind::Param)[b]),
        returned(m, sig.output_positions(SlotKind::V)[b]),
    )
}

/// v' = μ·v + (wd·θ + g) → v' = μ·v + g: returns wd·θ's value.
fn drop_l2(m: &mut Module, v_new: ValueId) -> ValueId {
    let add = def(m, v_new);
    assert!(matches!(add.kind, OpKind::Binary(BinaryOp::Add)));
    let g_l2 = def(m, add.operands[1]);
    assert!(matches!(g_l2.kind, OpKind::Binary(BinaryOp::Add)));
    let (wd_theta, g) = (g_l2.operands[0], g_l2.operands[1]);
    let f = &mut m.funcs[0];
    let op = f
        .body
        .ops
        .iter_mut()
        .find(|o| o.results[0].0 == v_new)
        .unwrap();
    op.operands[1] = g;
    wd_theta
}

#[test]
fn heavy_ball_certifies_on_every_bn_world_and_cifar8_bbn() {
    for bn in [None, Some(BnWorld::PerExample), Some(BnWorld::Batch)] {
        let net = tiny(bn);
        let m = render_step(&net, 3, &StepOptions::new(HB)).unwrap().module;
        let r = certify(&net, &m);
        assert!(r.certified(), "{bn:?}: {:?}", r.verdict);
        assert!(r.tail_gap < 1e-12, "{bn:?}: tail gap {:e}", r.tail_gap);
    }
    let net = by_name("cifar8-bbn").unwrap();
    let m = render_step(&net, 2, &StepOptions::new(HB)).unwrap().module;
    let r = certify_train_step(&net, 2, HB, &m, &StepTieOptions::default());
    assert!(r.certified(), "{:?}", r.verdict);
    assert_eq!(r.blocks.len(), 38);
}

/// The rendered tail reads the recipe's constants and names its function
/// apart from Nesterov's.
#[test]
fn heavy_ball_render_has_the_recipe_constants() {
    assert_eq!((HEAVY_BALL_MU, HEAVY_BALL_WEIGHT_DECAY), (0.9, 1e-4));
    assert_eq!(Optimizer::parse("momentum"), Some(HB));
    let net = tiny(None);
    let m = render_step(&net, 3, &StepOptions::new(HB)).unwrap().module;
    assert_eq!(m.funcs[0].name, "tiny_hbmom_train_step");
    let (theta_new, v_new) = outputs(&net, &m, 0);
    let sub = def(&m, theta_new);
    assert!(matches!(sub.kind, OpKind::Binary(BinaryOp::Subtract)));
    let step = def(&m, sub.operands[1]);
    assert_eq!(step.operands[1], v_new, "θ' = θ − lr·v'");
}

/// Negative control: v' = μ·v + g without the coupled L2. θ' and v' stay
/// consistent with each other, so the g recovered (v' − μv − wd·θ) is off by
/// wd·θ, and the gradient tie refutes it.
#[test]
fn heavy_ball_without_l2_is_refuted() {
    let net = tiny(Some(BnWorld::Batch));
    let mut m = render_step(&net, 3, &StepOptions::new(HB)).unwrap().module;
    let (_, v_new) = outputs(&net, &m, 0);
    drop_l2(&mut m, v_new);
    ir::verify_module(&m).unwrap();
    let r = certify(&net, &m);
    assert_eq!(refuted_in(&r.verdict, &m.funcs[0].name), "dconv.W");
}

/// Negative control: decoupled decay, v' = μ·v + g and
/// θ' = θ − lr·v' − lr·wd·θ (AdamW-style decay under heavy-ball).
#[test]
fn heavy_ball_with_decoupled_decay_is_refuted() {
    let net = tiny(None);
    let mut m = render_step(&net, 3, &StepOptions::new(HB)).unwrap().module;
    let (theta_new, v_new) = outputs(&net, &m, 0);
    let wd_theta = drop_l2(&mut m, v_new);
    let lr_b = def(&m, def(&m, theta_new).operands[1]).operands[0];
    let ty = m.funcs[0].value_types()[theta_new.index()].clone();
    let next = m.funcs[0].num_values() as u32 + 10;
    let (decay, decayed) = (ValueId(next), ValueId(next + 1));
    let binary = |op, operands: Vec<ValueId>, result| Op {
        kind: OpKind::Binary(op),
        operands,
        results: vec![(result, ty.clone())],
        regions: Vec::new(),
        extra_attrs: Vec::new(),
        loc: SrcLoc::default(),
    };
    let f = &mut m.funcs[0];
    let ret = f.body.ops.len() - 1;
    f.body.ops.insert(
        ret,
        binary(BinaryOp::Subtract, vec![theta_new, decay], decayed),
    );
    f.body
        .ops
        .insert(ret, binary(BinaryOp::Multiply, vec![lr_b, wd_theta], decay));
    for o in f.body.ops.last_mut().unwrap().operands.iter_mut() {
        if *o == theta_new {
            *o = decayed;
        }
    }
    f.canonicalize();
    ir::verify_module(&m).unwrap();
    let r = certify(&net, &m);
    assert_eq!(refuted_in(&r.verdict, &m.funcs[0].name), "θ' of conv.W");
}

/// Negative control: a Nesterov tail renamed to heavy-ball's function (same
/// signature) is refuted: the guarded distinction of docs/training.md §2.
#[test]
fn nesterov_tail_under_the_heavy_ball_name_is_refuted() {
    let net = tiny(Some(BnWorld::PerExample));
    let mut m = render_step(&net, 3, &StepOptions::new(Optimizer::Nesterov))
        .unwrap()
        .module;
    m.funcs[0].name = step_signature(&net, 3, HB).unwrap().func;
    let r = certify(&net, &m);
    assert!(
        matches!(r.verdict, Verdict::Refuted { .. }),
        "{:?}",
        r.verdict
    );
}
