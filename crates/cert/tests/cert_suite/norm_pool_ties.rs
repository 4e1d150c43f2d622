//! Ties of the pool, normalization, activation and loss ops (engineer L2's
//! catalog entries): every case certified at the evidence level its catalog
//! entry states, and every negative control its op carries — a
//! shape-preserving backward bug from docs/conventions.md §7–§11 — refuted while its
//! correct twin is certified. The named tests below check single controls and
//! what is particular to them.

use crate::common::{certify_all, check_controls, checked_control};
use cert::{certify_layer, Evidence, TieOptions, TieReport, Verdict};
use ir::TensorType;
use layers::ops::pool::{MaxPool, PoolBackward};
use layers::ops::{activation, loss, norm, pool};
use layers::CertLayer;

fn t(shape: &[i64]) -> TensorType {
    TensorType::f32(shape.to_vec())
}

fn certify(layer: &dyn CertLayer, shape: &[i64]) -> TieReport {
    certify_layer(layer, &t(shape), &TieOptions::default())
}

fn assert_certified(r: &TieReport) {
    assert!(r.certified(), "{} at {}: {:?}", r.layer, r.input, r.verdict);
}

#[test]
fn pool_catalog_is_certified_exactly() {
    let cases = pool::catalog();
    // Every configuration the task names: both geometries, N = 1, 2, 3,
    // non-square and odd inputs.
    let shapes: Vec<&[i64]> = cases.iter().map(|c| &c.input.shape[..]).collect();
    for n in 1..=3 {
        assert!(shapes.iter().any(|s| s[0] == n), "no maxpool case at N={n}");
    }
    assert!(shapes.iter().any(|s| s[2] != s[3] && s[2] % 2 == 1));
    certify_all(&cases);
    assert_eq!(check_controls(&cases), 8);
}

#[test]
fn norm_catalog_is_certified() {
    let cases = norm::catalog();
    certify_all(&cases);
    assert_eq!(check_controls(&cases), 3);
}

#[test]
fn activation_catalog_is_certified() {
    let cases = activation::catalog();
    certify_all(&cases);
    assert_eq!(check_controls(&cases), 3);
}

#[test]
fn loss_catalog_is_certified() {
    let cases = loss::catalog();
    certify_all(&cases);
    // softmax-CE: without 1/B, (p − t)/B; BCE: averaged over B only.
    assert_eq!(check_controls(&cases), 3);
}

/// The whole L2 catalog certifies, every case (its time is reported on
/// stderr; speed is measured by `certgrad certify --all-ops`, not asserted).
#[test]
fn the_whole_l2_catalog_certifies() {
    let mut cases = pool::catalog();
    cases.extend(norm::catalog());
    cases.extend(activation::catalog());
    cases.extend(loss::catalog());
    certify_all(&cases);
}

#[test]
fn pool_kink_site_is_named_and_margin_positive() {
    let p = MaxPool {
        window: 3,
        stride: 2,
        pad: 1,
        backward: PoolBackward::SelectAndScatter,
    };
    let r = certify(&p, &[1, 2, 7, 5]);
    assert_certified(&r);
    let m = r.min_margin.expect("a max pool takes decisions");
    assert_eq!(m.site, "pool");
    assert!(m.margin > 0.0);
}

// ---------------------------------------------------------------------------
// Max pool controls (pool.rs).

#[test]
fn pool_2x2_backward_on_3x3_forward_is_refuted() {
    checked_control(&pool::catalog(), "maxpool", "2×2/s2 backward");
}

#[test]
fn pool_assigning_scatter_is_refuted() {
    checked_control(&pool::catalog(), "maxpool", "assigning scatter");
}

// ---------------------------------------------------------------------------
// Batch norm controls (norm.rs).

#[test]
fn bn_without_mean_term_is_refuted() {
    checked_control(&norm::catalog(), "batchnorm", "without −Σĝ");
}

#[test]
fn bn_per_example_backward_under_batch_forward_is_refuted() {
    checked_control(&norm::catalog(), "batchnorm", "PerExample backward");
}

#[test]
fn bn_eval_running_stat_gradients_are_checked() {
    let (_, twin, _) =
        checked_control(&norm::catalog(), "batchnorm", "zero running-stat gradients");
    assert_eq!(
        twin.blocks, 5,
        "dx, dgamma, dbeta, drunning_mean, drunning_var"
    );
}

// ---------------------------------------------------------------------------
// Activation controls (activation.rs).

#[test]
fn relu6_without_upper_mask_is_refuted() {
    let (_, twin, bad) = checked_control(&activation::catalog(), "relu6", "mask x > 0 only");
    assert_eq!(twin.evidence, Evidence::Exact);
    // The twin's points reach both sides of 6.
    let upper = twin
        .coverage
        .iter()
        .find(|c| c.site == "relu6_upper")
        .expect("the upper corner is a decision site");
    assert!(upper.missing.is_empty(), "{upper:?}");
    // Refuted at a large-scale point, i.e. the first (scale 1) point passed:
    // the bug is invisible below 6.
    match &bad.verdict {
        Verdict::Refuted { detail, .. } => assert!(detail.contains("scale 8"), "{detail}"),
        _ => unreachable!(),
    }
}

#[test]
fn gelu_erf_backward_under_tanh_forward_is_refuted() {
    checked_control(&activation::catalog(), "gelu", "erf-form backward");
}

// ---------------------------------------------------------------------------
// Loss controls (loss.rs).

#[test]
fn ce_cotangent_without_one_over_b_is_refuted() {
    let cases = loss::catalog();
    let (ctl, _, _) = checked_control(&cases, "softmax_ce", "without 1/B");
    // At B = 1 the missing factor is 1: the same map is the VJP there, so the
    // refutation is the 1/B and nothing else.
    assert_certified(&certify(ctl.layer.as_ref(), &[1, 4]));
}

#[test]
fn ce_simplex_only_cotangent_is_refuted_off_the_simplex() {
    checked_control(&loss::catalog(), "softmax_ce", "(p − t)/B");
}
