//! Ties of the attention / patch-embedding / SE / elementwise-product ops:
//! every catalog case certified at its expected evidence level, and the
//! negative controls (realistic shape-preserving backward bugs) refuted, each
//! next to its positive twin at the same shape.

use cert::{certify_layer, Evidence, TieOptions, TieReport, Verdict};
use ir::{FuncBuilder, TensorType, ValueId};
use layers::emit::EmitResult;
use layers::ops::activation::Relu;
use layers::ops::attention::{
    head_matmul, softmax_rows_back, HeadTensors, MultiHeadSelfAttention, PatchEmbed,
};
use layers::ops::se::{ElementwiseProduct, SqueezeExcite};
use layers::ops::{attention, se, OpCase};
use layers::{
    CertLayer, Emit, Grads, LayerError, ParamSpec, ReplacedBackward, Residual, Saved, Sites,
};
use std::time::Instant;

fn t(shape: &[i64]) -> TensorType {
    TensorType::f32(shape.to_vec())
}

fn opts() -> TieOptions {
    TieOptions::default()
}

/// The evidence level a case must reach: exact wherever every op is rational
/// (patch embedding is affine; products of ReLU/affine layers are rational),
/// f64 where exp/logistic make exact arithmetic impossible.
fn expected_evidence(case: &OpCase) -> Evidence {
    let smooth = match case.op {
        "patch_embed" => false,
        "mhsa" | "squeeze_excite" => true,
        "elementwise_product" => case.config.contains("squeeze_excite"),
        other => panic!("unexpected op family {other} in this catalog"),
    };
    if smooth {
        Evidence::F64 {
            tolerance: opts().f64_tolerance,
        }
    } else {
        Evidence::Exact
    }
}

fn assert_refuted(r: &TieReport, blocks: &[&str]) {
    match &r.verdict {
        Verdict::Refuted { block, detail } => {
            assert!(
                blocks.contains(&block.as_str()),
                "{}: refuted in block {block}, expected one of {blocks:?} ({detail})",
                r.layer
            );
            eprintln!("{}: REFUTED in {block}: {detail}", r.layer);
        }
        v => panic!("{}: expected a refutation, got {v:?}", r.layer),
    }
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
        let r = certify_layer(case.layer.as_ref(), &case.input, &opts());
        eprintln!(
            "{:<20} {:<58} {:<12} {:.3}s  margin {:?}",
            case.op,
            case.config,
            r.evidence.to_string(),
            r.seconds,
            r.min_margin.as_ref().map(|m| (m.site.clone(), m.margin))
        );
        assert_certified(&r);
        assert_eq!(
            r.evidence,
            expected_evidence(case),
            "{} {}: wrong evidence level",
            case.op,
            case.config
        );
    }
    let total = t0.elapsed().as_secs_f64();
    eprintln!("attention/SE catalog: {} cases in {total:.3}s", cases.len());
    // This share of the whole `--all-ops` catalog's 60 s budget (2 cores); it
    // measures ~1.8 s, so the bound only trips on a real regression.
    assert!(total < 15.0, "attention/SE catalog took {total:.1}s");
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
// Attention: slips in the attention core's VJP (square T×T score matrices).
// ---------------------------------------------------------------------------

/// MHSA whose backward uses a caller-supplied (buggy) attention-core VJP.
struct AttentionWithCore(
    MultiHeadSelfAttention,
    layers::ops::attention::CoreBack,
    &'static str,
);

impl CertLayer for AttentionWithCore {
    fn name(&self) -> String {
        format!("{} ({})", self.0.name(), self.2)
    }
    fn output_type(&self, input: &TensorType) -> Result<TensorType, LayerError> {
        self.0.output_type(input)
    }
    fn params(&self, input: &TensorType) -> Vec<ParamSpec> {
        self.0.params(input)
    }
    fn forward(
        &self,
        fb: &mut FuncBuilder,
        x: ValueId,
        p: &[ValueId],
        s: &mut Sites,
    ) -> EmitResult<Saved> {
        self.0.forward(fb, x, p, s)
    }
    fn backward(
        &self,
        fb: &mut FuncBuilder,
        x: ValueId,
        p: &[ValueId],
        s: &Saved,
        dy: ValueId,
    ) -> EmitResult<Grads> {
        self.0.backward_with_core(fb, x, p, s, dy, self.1)
    }
}

/// The core VJP with the 1/√d applied to dK but forgotten on dQ.
fn core_missing_scale_on_dq(
    fb: &mut FuncBuilder,
    h: &HeadTensors,
    d_out: ValueId,
    c: f64,
) -> EmitResult<(ValueId, ValueId, ValueId)> {
    let dp = head_matmul(fb, d_out, h.v, 3, 3)?;
    let dv = head_matmul(fb, h.p, d_out, 2, 2)?;
    let ds = softmax_rows_back(fb, h.p, dp)?;
    let ds_scaled = fb.scale(ds, c)?;
    let dq = head_matmul(fb, ds, h.k, 3, 2)?; // bug: unscaled dS
    let dk = head_matmul(fb, ds_scaled, h.q, 2, 2)?;
    Ok((dq, dk, dv))
}

/// The core VJP with dK = dS·Q_h (contracting the key axis) instead of dSᵀ·Q_h:
/// it type-checks because the score matrix is square (Tq = Tk).
fn core_dk_untransposed(
    fb: &mut FuncBuilder,
    h: &HeadTensors,
    d_out: ValueId,
    c: f64,
) -> EmitResult<(ValueId, ValueId, ValueId)> {
    let dp = head_matmul(fb, d_out, h.v, 3, 3)?;
    let dv = head_matmul(fb, h.p, d_out, 2, 2)?;
    let ds = softmax_rows_back(fb, h.p, dp)?;
    let ds = fb.scale(ds, c)?;
    let dq = head_matmul(fb, ds, h.k, 3, 2)?;
    let dk = head_matmul(fb, ds, h.q, 3, 2)?; // bug: should contract axis 2
    Ok((dq, dk, dv))
}

/// The core VJP with dV = P·dO instead of Pᵀ·dO (same slip on the value path).
fn core_dv_untransposed(
    fb: &mut FuncBuilder,
    h: &HeadTensors,
    d_out: ValueId,
    c: f64,
) -> EmitResult<(ValueId, ValueId, ValueId)> {
    let dp = head_matmul(fb, d_out, h.v, 3, 3)?;
    let dv = head_matmul(fb, h.p, d_out, 3, 2)?; // bug: should contract axis 2
    let ds = softmax_rows_back(fb, h.p, dp)?;
    let ds = fb.scale(ds, c)?;
    let dq = head_matmul(fb, ds, h.k, 3, 2)?;
    let dk = head_matmul(fb, ds, h.q, 2, 2)?;
    Ok((dq, dk, dv))
}

const MHSA_INPUT: [i64; 3] = [2, 4, 8];

fn mhsa() -> MultiHeadSelfAttention {
    MultiHeadSelfAttention { dim: 8, heads: 2 }
}

#[test]
fn mhsa_positive_twin_is_certified() {
    let r = certify_layer(&mhsa(), &t(&MHSA_INPUT), &opts());
    assert_certified(&r);
    assert!(matches!(r.evidence, Evidence::F64 { .. }));
    assert!(r.min_margin.is_none(), "attention takes no decisions");
}

#[test]
fn mhsa_missing_inv_sqrt_d_on_dq_is_refuted() {
    let bad = AttentionWithCore(mhsa(), core_missing_scale_on_dq, "dQ without 1/√d");
    let r = certify_layer(&bad, &t(&MHSA_INPUT), &opts());
    // dQ feeds dx (through Wqᵀ), dWq and dbq; dx is checked first.
    assert_refuted(&r, &["dx", "dWq", "dbq"]);
}

#[test]
fn mhsa_dk_from_untransposed_scores_is_refuted() {
    let bad = AttentionWithCore(mhsa(), core_dk_untransposed, "dK = dS·Q");
    let r = certify_layer(&bad, &t(&MHSA_INPUT), &opts());
    assert_refuted(&r, &["dx", "dWk", "dbk"]);
}

#[test]
fn mhsa_dv_from_untransposed_probs_is_refuted() {
    let bad = AttentionWithCore(mhsa(), core_dv_untransposed, "dV = P·dO");
    let r = certify_layer(&bad, &t(&MHSA_INPUT), &opts());
    assert_refuted(&r, &["dx", "dWv", "dbv"]);
}

/// The dK slip is what the refutation above caught, not a side effect of the
/// test harness: evaluated at one point, the slipped backward differs from
/// the correct one in exactly the blocks dK feeds (dx, dWk, dbk).
#[test]
fn mhsa_dk_slip_changes_only_key_blocks() {
    use den::{eval_func, EvalOptions, Tensor, Value};
    let good = layers::tie_funcs(&mhsa(), &t(&MHSA_INPUT)).unwrap();
    let bad = layers::tie_funcs(
        &AttentionWithCore(mhsa(), core_dk_untransposed, "dK = dS·Q"),
        &t(&MHSA_INPUT),
    )
    .unwrap();
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

const PATCH_INPUT: [i64; 4] = [2, 3, 8, 4];

fn patch() -> PatchEmbed {
    PatchEmbed {
        patch: 2,
        in_ch: 3,
        dim: 4,
    }
}

/// Patch embedding whose dpos takes example 0's cotangent only (the classic
/// "per-example descriptor at batch N" slip, REFERENCE §3.5).
fn patch_pos_from_first_example(pe: PatchEmbed) -> ReplacedBackward<PatchEmbed> {
    ReplacedBackward::new(pe, "dpos = dy[0]", |l, fb, x, p, s, dy| {
        let mut g = l.backward(fb, x, p, s, dy)?;
        let shape = fb.shape(dy);
        let first = fb.slice(dy, &[0, 0, 0], &[1, shape[1], shape[2]], &[1, 1, 1])?;
        g.dparams[3] = fb.reshape(first, &[shape[1], shape[2]])?;
        Ok(g)
    })
}

#[test]
fn patch_embed_positive_twin_is_certified_exactly() {
    let r = certify_layer(&patch(), &t(&PATCH_INPUT), &opts());
    assert_certified(&r);
    assert_eq!(r.evidence, Evidence::Exact);
    assert!(r.failure_bound.unwrap() < 1e-11);
}

#[test]
fn patch_embed_pos_grad_from_first_example_is_refuted() {
    let r = certify_layer(
        &patch_pos_from_first_example(patch()),
        &t(&PATCH_INPUT),
        &opts(),
    );
    assert_eq!(r.evidence, Evidence::Exact);
    assert_refuted(&r, &["dpos"]);
}

#[test]
fn patch_embed_pos_slip_is_invisible_at_batch_one() {
    // At N = 1, dy[0] IS the batch sum: the control is only meaningful at N ≥ 2,
    // which is why the refutation above runs at N = 2.
    let r = certify_layer(
        &patch_pos_from_first_example(patch()),
        &t(&[1, 3, 8, 4]),
        &opts(),
    );
    assert_certified(&r);
}

// ---------------------------------------------------------------------------
// SE: the direct gate⊙dy term dropped from dx.
// ---------------------------------------------------------------------------

const SE_INPUT: [i64; 4] = [3, 4, 5, 2];

fn se_block() -> SqueezeExcite {
    SqueezeExcite { ch: 4, reduced: 2 }
}

/// SE whose dx keeps only the path through the squeeze and the gate.
fn se_without_direct_term(se: SqueezeExcite) -> ReplacedBackward<SqueezeExcite> {
    ReplacedBackward::new(se, "dx without gate⊙dy", |l, fb, x, p, _, dy| {
        let terms = l.backward_terms(fb, x, p, dy)?;
        Ok(Grads {
            dx: terms.through_gate,
            dparams: terms.dparams,
        })
    })
}

#[test]
fn se_positive_twin_is_certified() {
    let r = certify_layer(&se_block(), &t(&SE_INPUT), &opts());
    assert_certified(&r);
    assert!(matches!(r.evidence, Evidence::F64 { .. }));
}

#[test]
fn se_missing_direct_term_is_refuted() {
    let r = certify_layer(&se_without_direct_term(se_block()), &t(&SE_INPUT), &opts());
    assert_refuted(&r, &["dx"]);
}

// ---------------------------------------------------------------------------
// Elementwise product: f's branch scaled by f(x) instead of g(x).
// ---------------------------------------------------------------------------

/// `f ⊙ g` whose backward feeds f's branch `f(x)⊙dy` (swapped factors).
fn product_swapped_factors(prod: ElementwiseProduct) -> ReplacedBackward<ElementwiseProduct> {
    ReplacedBackward::new(prod, "f.back(f⊙dy)", |l, fb, x, p, s, dy| {
        let n = l.f_param_count(fb.ty(x));
        let fx = s.children[0].output();
        let wrong = fb.mul(fx, dy)?; // bug: should be g(x)⊙dy
        let ga = l.f.backward(fb, x, &p[..n], &s.children[0], wrong)?;
        let gb = l.g.backward(fb, x, &p[n..], &s.children[1], wrong)?;
        let dx = fb.add(ga.dx, gb.dx)?;
        let mut dparams = ga.dparams;
        dparams.extend(gb.dparams);
        Ok(Grads { dx, dparams })
    })
}

fn relu_times_residual() -> ElementwiseProduct {
    ElementwiseProduct {
        f: Box::new(Relu),
        g: Box::new(Residual {
            body: Box::new(Relu),
        }),
    }
}

fn patch_times_patch() -> ElementwiseProduct {
    ElementwiseProduct {
        f: Box::new(patch()),
        g: Box::new(patch()),
    }
}

#[test]
fn product_positive_twins_are_certified() {
    let r = certify_layer(&relu_times_residual(), &t(&[3, 2, 3, 5]), &opts());
    assert_certified(&r);
    assert_eq!(r.evidence, Evidence::Exact);
    // Kink sites are scoped under the factor that owns them.
    let site = &r.min_margin.as_ref().expect("relu decides").site;
    assert!(site == "f.pre_relu" || site == "g.pre_relu", "site {site}");

    let r = certify_layer(&patch_times_patch(), &t(&[2, 3, 4, 6]), &opts());
    assert_certified(&r);
    assert_eq!(r.evidence, Evidence::Exact);
}

#[test]
fn product_swapped_factors_is_refuted() {
    // relu ⊙ (relu + id): f(x) ≠ g(x) wherever x < 0, so f(x)⊙dy ≠ g(x)⊙dy.
    let r = certify_layer(
        &product_swapped_factors(relu_times_residual()),
        &t(&[3, 2, 3, 5]),
        &opts(),
    );
    assert_eq!(r.evidence, Evidence::Exact);
    assert_refuted(&r, &["dx"]);

    // Two patch embeddings with independent parameters: f's parameter
    // gradients see the wrong factor (dx is checked first and is wrong too).
    let r = certify_layer(
        &product_swapped_factors(patch_times_patch()),
        &t(&[2, 3, 4, 6]),
        &opts(),
    );
    assert_eq!(r.evidence, Evidence::Exact);
    assert_refuted(&r, &["dx", "df.W", "df.b", "df.cls", "df.pos"]);
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
