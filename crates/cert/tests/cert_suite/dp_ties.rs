//! The data-parallel step (docs/conventions.md §18) against the single-device step of
//! the same NetSpec: the split identity R × B = 1 × R·B (no true-batch BN),
//! the duplicated-batch identity (BN nets), replica agreement, exactly over
//! `FrozenExact` and to rounding in f64 and on the native f32 kernels; with
//! negative controls that inject the real bugs (the sum without ÷R, the
//! collective omitted so each replica applies its own gradient).

use crate::common::{refuted_in, tiny};
use cert::dp::{check_dp_step, DpIdentity, DpOptions, DpReport, FrozenExact};
use cert::Verdict;
use den::Scalar;
use ir::{BinaryOp, DenseData, Module, OpKind};
use layers::net::{by_name, NetSpec};
use layers::ops::norm::BnWorld;
use layers::trainstep::{render_step, Optimizer, StepOptions};

fn dp(opt: Optimizer, replicas: usize) -> StepOptions {
    StepOptions {
        replicas,
        ..StepOptions::new(opt)
    }
}

fn check<S: Scalar>(
    net: &NetSpec,
    batch: i64,
    step: &StepOptions,
    m: &Module,
    identity: DpIdentity,
    opts: &DpOptions,
) -> DpReport {
    check_dp_step::<S>(net, batch, step, m, identity, opts)
}

fn render(net: &NetSpec, batch: i64, step: &StepOptions) -> Module {
    render_step(net, batch, step).unwrap().module
}

fn assert_refuted(r: &DpReport, block_prefix: &str) {
    let block = refuted_in(&r.verdict, &r.func);
    assert!(block.starts_with(block_prefix), "{block}");
}

/// Index of the top-level op defining `v`.
fn def(m: &Module, v: ir::ValueId) -> Option<usize> {
    m.funcs[0]
        .body
        .ops
        .iter()
        .position(|o| o.results.iter().any(|(r, _)| *r == v))
}

/// The ÷R after each all_reduce: (divide op, all_reduce op, divisor constant op).
fn replica_divides(m: &Module) -> Vec<(usize, usize, usize)> {
    let ops = &m.funcs[0].body.ops;
    ops.iter()
        .enumerate()
        .filter(|(_, o)| matches!(o.kind, OpKind::Binary(BinaryOp::Divide)))
        .filter_map(|(i, o)| {
            let a = def(m, o.operands[0])?;
            matches!(ops[a].kind, OpKind::AllReduce { .. })
                .then(|| (i, a, def(m, o.operands[1]).expect("divisor")))
        })
        .collect()
}

fn set_divisor_to_one(m: &mut Module, c: usize, replicas: usize) {
    match &mut m.funcs[0].body.ops[c].kind {
        OpKind::Constant(DenseData::Float(vals)) => {
            assert_eq!(vals, &[replicas as f64], "the divisor is R");
            vals[0] = 1.0;
        }
        k => panic!("divisor is {k:?}"),
    }
}

/// Negative control: the all_reduce sum without ÷R.
fn without_divide(m: &Module, replicas: usize) -> Module {
    let mut m = m.clone();
    let divs = replica_divides(&m);
    assert!(!divs.is_empty());
    for (_, _, c) in divs {
        set_divisor_to_one(&mut m, c, replicas);
    }
    ir::verify_module(&m).unwrap();
    m
}

/// Negative control: no collective; each replica applies its own gradient.
fn without_all_reduce(m: &Module, replicas: usize) -> Module {
    let mut m = m.clone();
    for (d, a, c) in replica_divides(&m) {
        let own = m.funcs[0].body.ops[a].operands[0];
        m.funcs[0].body.ops[d].operands[0] = own;
        set_divisor_to_one(&mut m, c, replicas);
    }
    let f = &mut m.funcs[0];
    f.body
        .ops
        .retain(|o| !matches!(o.kind, OpKind::AllReduce { .. }));
    f.canonicalize();
    ir::verify_module(&m).unwrap();
    assert_eq!(replica_divides(&m).len(), 0);
    m
}

#[test]
fn split_identity_is_exact_for_every_optimizer() {
    for bn in [None, Some(BnWorld::PerExample)] {
        let net = tiny(bn);
        for opt in Optimizer::ALL {
            let step = dp(opt, 2);
            let m = render(&net, 2, &step);
            let r =
                check::<FrozenExact>(&net, 2, &step, &m, DpIdentity::Split, &DpOptions::exact(1));
            assert!(r.certified(), "{bn:?} {opt:?}: {:?}", r.verdict);
            assert!(r.zero_residual && r.max_gap == 0.0, "{bn:?} {opt:?}");
        }
    }
}

/// R = 3 (÷3 is not a power of two) and R = 4, exactly.
#[test]
fn split_identity_is_exact_for_three_and_four_replicas() {
    let net = tiny(None);
    for replicas in [3, 4] {
        let step = dp(Optimizer::AdamW, replicas);
        let m = render(&net, 1, &step);
        let r = check::<FrozenExact>(&net, 1, &step, &m, DpIdentity::Split, &DpOptions::exact(2));
        assert!(r.certified(), "R={replicas}: {:?}", r.verdict);
        assert!(r.zero_residual);
    }
}

/// cifar8 (no BN), 2 replicas × 1 example against 1 × 2: to f64 rounding on
/// the generic evaluator and to f32 rounding on the native fast kernels.
#[test]
fn split_identity_holds_for_cifar8_in_f64_and_f32() {
    let net = by_name("cifar8").unwrap();
    let step = dp(Optimizer::Sgd, 2);
    let m = render(&net, 1, &step);
    let f64_opts = DpOptions {
        fast: false,
        ..DpOptions::rounded(3, 1e-13)
    };
    let r = check::<f64>(&net, 1, &step, &m, DpIdentity::Split, &f64_opts);
    assert!(r.certified(), "f64: {:?}", r.verdict);
    eprintln!("cifar8 split f64: max gap {:.2e} at {}", r.max_gap, r.worst);
    let r = check::<f32>(
        &net,
        1,
        &step,
        &m,
        DpIdentity::Split,
        &DpOptions::rounded(3, 1e-5),
    );
    assert!(r.certified(), "f32: {:?}", r.verdict);
    eprintln!("cifar8 split f32: max gap {:.2e} at {}", r.max_gap, r.worst);
}

/// Duplicated batches on a batch-BN net: exact over FrozenExact, and bit for
/// bit in f32 with 2 replicas ((g + g)/2 = g exactly in binary floating point).
#[test]
fn duplicated_identity_holds_with_batch_bn() {
    let net = tiny(Some(BnWorld::Batch));
    for opt in Optimizer::ALL {
        let step = dp(opt, 2);
        let m = render(&net, 3, &step);
        let r = check::<FrozenExact>(
            &net,
            3,
            &step,
            &m,
            DpIdentity::Duplicated,
            &DpOptions::exact(4),
        );
        assert!(r.certified(), "{opt:?}: {:?}", r.verdict);
        assert!(r.zero_residual);
        let r = check::<f32>(
            &net,
            3,
            &step,
            &m,
            DpIdentity::Duplicated,
            &DpOptions::rounded(4, 1e-6),
        );
        assert!(r.certified() && r.zero_residual, "{opt:?}: {:?}", r.verdict);
    }
}

#[test]
fn cifar8_bbn_duplicated_and_agreement_in_f32() {
    let net = by_name("cifar8-bbn").unwrap();
    let step = dp(Optimizer::AdamW, 2);
    let m = render(&net, 2, &step);
    let opts = DpOptions::rounded(5, 1e-6);
    let r = check::<f32>(&net, 2, &step, &m, DpIdentity::Duplicated, &opts);
    assert!(r.certified() && r.zero_residual, "{:?}", r.verdict);
    let r = check::<f32>(&net, 2, &step, &m, DpIdentity::Agreement, &opts);
    assert!(r.certified(), "{:?}", r.verdict);
}

#[test]
fn split_identity_is_not_claimed_for_batch_bn() {
    let net = tiny(Some(BnWorld::Batch));
    let step = dp(Optimizer::Sgd, 2);
    let m = render(&net, 2, &step);
    let r = check::<f64>(&net, 2, &step, &m, DpIdentity::Split, &DpOptions::exact(0));
    match &r.verdict {
        Verdict::Undecided { reason } => assert!(reason.contains("per replica"), "{reason}"),
        v => panic!("{v:?}"),
    }
}

/// Negative control: the sum without ÷R is refuted by the split identity
/// (exactly and in f32) and by the duplicated-batch identity.
#[test]
fn sum_without_divide_is_refuted() {
    let net = tiny(None);
    let step = dp(Optimizer::Sgd, 2);
    let bad = without_divide(&render(&net, 2, &step), 2);
    let r = check::<FrozenExact>(
        &net,
        2,
        &step,
        &bad,
        DpIdentity::Split,
        &DpOptions::exact(1),
    );
    assert_refuted(&r, "θ' of");
    let r = check::<f32>(
        &net,
        2,
        &step,
        &bad,
        DpIdentity::Split,
        &DpOptions::rounded(1, 1e-5),
    );
    assert_refuted(&r, "θ' of");

    let net = tiny(Some(BnWorld::Batch));
    for opt in [Optimizer::Sgd, Optimizer::AdamW, Optimizer::HeavyBall] {
        let step = dp(opt, 2);
        let bad = without_divide(&render(&net, 3, &step), 2);
        let r = check::<f32>(
            &net,
            3,
            &step,
            &bad,
            DpIdentity::Duplicated,
            &DpOptions::rounded(1, 1e-5),
        );
        assert_refuted(&r, "θ' of");
    }
}

/// Negative control: the collective omitted. Replicas on different data then
/// apply different updates: refuted by the split identity and by replica
/// agreement (the check that covers BN nets). The duplicated identity cannot
/// see it — identical data give identical local gradients — which is why
/// agreement is part of the BN gate.
#[test]
fn omitted_all_reduce_is_refuted() {
    let net = tiny(None);
    let step = dp(Optimizer::Nesterov, 2);
    let bad = without_all_reduce(&render(&net, 2, &step), 2);
    let r = check::<f64>(
        &net,
        2,
        &step,
        &bad,
        DpIdentity::Split,
        &DpOptions::rounded(1, 1e-12),
    );
    assert_refuted(&r, "replica agreement");

    let net = tiny(Some(BnWorld::Batch));
    let step = dp(Optimizer::Sgd, 2);
    let good = render(&net, 3, &step);
    let bad = without_all_reduce(&good, 2);
    let opts = DpOptions::rounded(1, 1e-6);
    let r = check::<f32>(&net, 3, &step, &bad, DpIdentity::Agreement, &opts);
    assert_refuted(&r, "replica agreement");
    let r = check::<f32>(&net, 3, &step, &good, DpIdentity::Agreement, &opts);
    assert!(r.certified(), "{:?}", r.verdict);
    let r = check::<f32>(&net, 3, &step, &bad, DpIdentity::Duplicated, &opts);
    assert!(r.certified(), "blind by construction: {:?}", r.verdict);
}

/// A single-device step handed to the checker is refused by its name.
#[test]
fn a_single_device_step_is_not_a_dp_step() {
    let net = tiny(None);
    let single = render(&net, 2, &StepOptions::new(Optimizer::Sgd));
    let r = check::<f64>(
        &net,
        2,
        &dp(Optimizer::Sgd, 2),
        &single,
        DpIdentity::Split,
        &DpOptions::exact(0),
    );
    match &r.verdict {
        Verdict::Undecided { reason } => assert!(reason.contains("dp2x2"), "{reason}"),
        v => panic!("{v:?}"),
    }
}

/// Measurement, not part of the suite (~36 min over big rationals): cifar8's
/// split identity exactly at 2 × 1 example, and the f64/f32 residuals at
/// 2 × 16. Run with
/// `cargo test --release -p cert --test cert_suite dp_ties -- --ignored --nocapture`.
#[test]
#[ignore = "~36 min on the shared 2-core box: exact rationals through every cifar8 convolution"]
fn cifar8_split_identity_exact_and_batch16_residuals() {
    let net = by_name("cifar8").unwrap();
    let step = dp(Optimizer::Sgd, 2);
    let m16 = render(&net, 16, &step);
    let f64_opts = DpOptions {
        fast: false,
        ..DpOptions::rounded(6, 1e-12)
    };
    let r = check::<f64>(&net, 16, &step, &m16, DpIdentity::Split, &f64_opts);
    assert!(r.certified(), "{:?}", r.verdict);
    eprintln!(
        "cifar8 2x16 vs 1x32 f64: max gap {:.2e} at {} ({:.1} s)",
        r.max_gap, r.worst, r.seconds
    );
    let r = check::<f32>(
        &net,
        16,
        &step,
        &m16,
        DpIdentity::Split,
        &DpOptions::rounded(6, 1e-5),
    );
    assert!(r.certified(), "{:?}", r.verdict);
    eprintln!(
        "cifar8 2x16 vs 1x32 f32 (fast kernels): max gap {:.2e} at {} ({:.1} s)",
        r.max_gap, r.worst, r.seconds
    );
    let m1 = render(&net, 1, &step);
    let r = check::<FrozenExact>(&net, 1, &step, &m1, DpIdentity::Split, &DpOptions::exact(6));
    assert!(r.certified() && r.zero_residual, "{:?}", r.verdict);
    eprintln!(
        "cifar8 2x1 vs 1x2 exact-frozen: zero residual ({:.1} s)",
        r.seconds
    );
}
