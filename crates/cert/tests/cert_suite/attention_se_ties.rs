//! Ties of the attention / patch-embedding / SE / elementwise-product ops:
//! every catalog case certified at the evidence level its catalog entry states
//! (exact wherever every op is rational: patch embedding is affine, products
//! of ReLU/affine layers are rational; f64 where exp/logistic make exact
//! arithmetic impossible), and the negative controls the ops carry (realistic
//! shape-preserving backward bugs) refuted, each next to its positive twin at
//! the same shape.

use crate::common::{check_case, check_control, check_controls, checked_control, controls_named};
use cert::{certify_layer, Evidence, TieOptions, TieReport};
use ir::TensorType;
use layers::ops::{attention, se, OpCase};
use std::time::Instant;

fn t(shape: &[i64]) -> TensorType {
    TensorType::f32(shape.to_vec())
}

fn opts() -> TieOptions {
    TieOptions::default()
}

fn assert_certified(r: &TieReport) {
    assert!(r.certified(), "{}: {:?}", r.layer, r.verdict);
    assert_eq!(r.points, opts().points, "{}: too few points", r.layer);
}

#[test]
fn catalog_is_certified_at_expected_evidence() {
    let cases: Vec<OpCase> = attention::catalog()
        .into_iter()
        .chain(se::catalog())
        .collect();
    let families: std::collections::BTreeSet<&str> = cases.iter().map(|c| c.op).collect();
    for fam in [
        "mhsa",
        "patch_embed",
        "squeeze_excite",
        "elementwise_product",
    ] {
        assert!(
            families.contains(fam),
            "family {fam} missing from the catalog"
        );
    }
    let t0 = Instant::now();
    for case in &cases {
        let r = check_case(case);
        assert_certified(&r);
    }
    let total = t0.elapsed().as_secs_f64();
    eprintln!("attention/SE catalog: {} cases in {total:.3}s", cases.len());
    // Time is reported, not asserted: speed is a benchmark's business
    // (`certgrad certify --all-ops`), never a timed test's.
    assert_eq!(check_controls(&cases), 7);
}

#[test]
fn every_family_sees_batch_sizes_one_to_three() {
    let cases: Vec<OpCase> = attention::catalog()
        .into_iter()
        .chain(se::catalog())
        .collect();
    for fam in [
        "mhsa",
        "patch_embed",
        "squeeze_excite",
        "elementwise_product",
    ] {
        let mut ns: Vec<i64> = cases
            .iter()
            .filter(|c| c.op == fam)
            .map(|c| c.input.shape[0])
            .collect();
        ns.sort();
        ns.dedup();
        assert_eq!(ns, vec![1, 2, 3], "{fam}: batch sizes {ns:?}");
    }
}

// ---------------------------------------------------------------------------
// Attention: slips in the attention core's VJP (square T×T score matrices,
// attention.rs).
// ---------------------------------------------------------------------------

#[test]
fn mhsa_positive_twin_is_certified() {
    let cases = attention::catalog();
    let (_, ctl) = controls_named(&cases, "mhsa", "dQ without 1/√d")[0];
    let r = certify_layer(ctl.twin.as_ref(), &ctl.input, &opts());
    assert_certified(&r);
    assert!(matches!(r.evidence, Evidence::F64 { .. }));
    assert!(r.min_margin.is_none(), "attention takes no decisions");
}

#[test]
fn mhsa_missing_inv_sqrt_d_on_dq_is_refuted() {
    // dQ feeds dx (through Wqᵀ), dWq and dbq; dx is checked first.
    checked_control(&attention::catalog(), "mhsa", "dQ without 1/√d");
}

#[test]
fn mhsa_dk_from_untransposed_scores_is_refuted() {
    checked_control(&attention::catalog(), "mhsa", "dK = dS·Q");
}

#[test]
fn mhsa_dv_from_untransposed_probs_is_refuted() {
    checked_control(&attention::catalog(), "mhsa", "dV = P·dO");
}

/// The dK slip is what the refutation above caught, not a side effect of the
/// test harness: evaluated at one point, the slipped backward differs from
/// the correct one in exactly the blocks dK feeds (dx, dWk, dbk).
#[test]
fn mhsa_dk_slip_changes_only_key_blocks() {
    use den::{eval_func, EvalOptions, Tensor, Value};
    let cases = attention::catalog();
    let (_, ctl) = controls_named(&cases, "mhsa", "dK = dS·Q")[0];
    let good = layers::tie_funcs(ctl.twin.as_ref(), &ctl.input).unwrap();
    let bad = layers::tie_funcs(ctl.layer.as_ref(), &ctl.input).unwrap();
    let mut rng = ir::rng::Rng::salted(7, ir::rng::CERT_SALT);
    let mut inputs: Vec<Value<f64>> = Vec::new();
    let mut tys = vec![good.input.clone()];
    tys.extend(good.params.iter().map(|p| p.ty.clone()));
    tys.push(good.output.clone());
    for ty in &tys {
        let shape: Vec<usize> = ty.shape.iter().map(|&d| d as usize).collect();
        let n = shape.iter().product();
        let data = (0..n).map(|_| rng.normal() * 0.5).collect();
        inputs.push(Value::Float(Tensor::new(shape, data), ir::ElemType::F32));
    }
    let run = |f: &layers::TieFuncs| {
        eval_func::<f64>(
            &f.module(),
            "backward",
            inputs.clone(),
            &EvalOptions::default(),
        )
        .unwrap()
        .outputs
    };
    let (g, b) = (run(&good), run(&bad));
    let names = ["dx", "dWq", "dbq", "dWk", "dbk", "dWv", "dbv", "dWo", "dbo"];
    for (i, name) in names.iter().enumerate() {
        let same = g[i].as_float().unwrap().data == b[i].as_float().unwrap().data;
        let expect_same = !matches!(*name, "dx" | "dWk" | "dbk");
        assert_eq!(same, expect_same, "block {name}");
    }
}

// ---------------------------------------------------------------------------
// Patch embedding: positional-embedding gradient not summed over the batch.
// ---------------------------------------------------------------------------

#[test]
fn patch_embed_positive_twin_is_certified_exactly() {
    let cases = attention::catalog();
    let (_, ctl) = controls_named(&cases, "patch_embed", "dpos = dy[0]")[0];
    let r = certify_layer(ctl.twin.as_ref(), &ctl.input, &opts());
    assert_certified(&r);
    assert_eq!(r.evidence, Evidence::Exact);
    assert!(r.failure_bound.unwrap() < 1e-11);
}

#[test]
fn patch_embed_pos_grad_from_first_example_is_refuted() {
    let cases = attention::catalog();
    let (ctl, _, bad) = checked_control(&cases, "patch_embed", "dpos = dy[0]");
    assert_eq!(ctl.input.shape[0], 2);
    assert_eq!(bad.evidence, Evidence::Exact);
}

#[test]
fn patch_embed_pos_slip_is_invisible_at_batch_one() {
    // At N = 1, dy[0] IS the batch sum: the control is only meaningful at N ≥ 2,
    // which is why the refutation above runs at N = 2.
    let cases = attention::catalog();
    let (_, ctl) = controls_named(&cases, "patch_embed", "dpos = dy[0]")[0];
    let r = certify_layer(ctl.layer.as_ref(), &t(&[1, 3, 8, 4]), &opts());
    assert_certified(&r);
}

// ---------------------------------------------------------------------------
// SE: the direct gate⊙dy term dropped from dx (se.rs).
// ---------------------------------------------------------------------------

#[test]
fn se_positive_twin_is_certified() {
    let cases = se::catalog();
    let (_, ctl) = controls_named(&cases, "squeeze_excite", "dx without gate⊙dy")[0];
    let r = certify_layer(ctl.twin.as_ref(), &ctl.input, &opts());
    assert_certified(&r);
    assert!(matches!(r.evidence, Evidence::F64 { .. }));
}

#[test]
fn se_missing_direct_term_is_refuted() {
    checked_control(&se::catalog(), "squeeze_excite", "dx without gate⊙dy");
}

// ---------------------------------------------------------------------------
// Elementwise product: f's branch scaled by f(x) instead of g(x) (se.rs).
// ---------------------------------------------------------------------------

#[test]
fn product_positive_twins_are_certified() {
    let cases = se::catalog();
    let found = controls_named(&cases, "elementwise_product", "f.back(f⊙dy)");
    assert_eq!(found.len(), 2, "relu ⊙ residual[relu], patch ⊙ patch");
    for (i, (_, ctl)) in found.into_iter().enumerate() {
        let r = certify_layer(ctl.twin.as_ref(), &ctl.input, &opts());
        assert_certified(&r);
        assert_eq!(r.evidence, Evidence::Exact);
        if i == 0 {
            // Kink sites are scoped under the factor that owns them.
            let site = &r.min_margin.as_ref().expect("relu decides").site;
            assert!(site == "f.pre_relu" || site == "g.pre_relu", "site {site}");
        }
    }
}

#[test]
fn product_swapped_factors_is_refuted() {
    let cases = se::catalog();
    let found = controls_named(&cases, "elementwise_product", "f.back(f⊙dy)");
    assert_eq!(found.len(), 2, "relu ⊙ residual[relu], patch ⊙ patch");
    for (evidence, ctl) in found {
        let (_, bad) = check_control(evidence, "elementwise_product", ctl);
        assert_eq!(bad.evidence, Evidence::Exact);
    }
}

/// The certified module is the printed one: every catalog case's tie module
/// (incl. the wgrad conv with `[f,b,0,1]x[i,o,0,1]->[f,b,0,1]` dimension numbers
/// and the lhs-dilated transposed conv) verifies and survives print → parse.
#[test]
fn catalog_tie_modules_round_trip_through_text() {
    use ir::parse::parse_module;
    use ir::print::print_module;
    for case in attention::catalog().into_iter().chain(se::catalog()) {
        let funcs = layers::tie_funcs(case.layer.as_ref(), &case.input).unwrap();
        let m = funcs.module();
        ir::verify_module(&m).unwrap_or_else(|e| panic!("{}: {e}", case.config));
        let text = print_module(&m);
        let parsed = parse_module(&text, "tie.mlir")
            .unwrap_or_else(|e| panic!("{}: {e}\n{text}", case.config));
        assert!(parsed == m, "{}: parse(print(m)) != m\n{text}", case.config);
    }
}
