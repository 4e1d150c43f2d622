//! Batch norm's forward and backward (as `layers::ops::norm` emits them, with
//! the ReLU after it) on the plan: values read by several ops — `x − μ`, `x̂`,
//! `γx̂ + β`, the ReLU mask's `select`, `γ·dy` — are recomputed at each use
//! instead of stored, so the pre-BN tensor is read in three forward passes
//! (Σx, Σ(x − μ)², the normalising pass) and two backward passes (the four
//! sums, dx). Recomputing must change no value: the same module with those
//! values also returned (so stored) gives bit-identical results, and both
//! agree with the generic evaluator; a perturbed loop fails that check.
//! When the pre-BN tensor is a convolution's result, Σx and Σ(x − μ)² come
//! from moments the convolution's kernel takes of each plane it writes
//! (`exec::passes::conv_moments`): one forward pass is left.

use super::agreement::{first_disagreement, generic, random_inputs, REL, REL_ELEM};
use den::eval_func;
use exec::Plan;
use ir::{ElemType, TensorType};

const SHAPE: [i64; 4] = [8, 6, 32, 32];

/// BN (batch statistics over [0, 2, 3]) + ReLU forward and the backward from
/// the ReLU output's cotangent `%g`; with `store`, the multiply-read
/// intermediates are outputs too. With `conv`, the pre-BN tensor `%x` is a
/// 3×3 convolution of the input `%u` (3 features) by `%w` instead of an input.
fn bn_module(store: bool, conv: bool) -> String {
    let t = "tensor<8x6x32x32xf32>";
    let v = "tensor<6xf32>";
    let red = |out: &str, arg: &str| {
        format!("{out} = stablehlo.reduce({arg} init: %c0) applies stablehlo.add across dimensions = [0, 2, 3] : ({t}, tensor<f32>) -> {v}")
    };
    let bc = |out: &str, arg: &str| {
        format!("{out} = stablehlo.broadcast_in_dim {arg}, dims = [1] : ({v}) -> {t}")
    };
    let (extra, extra_ty) = if store {
        (
            ", %cen, %xh, %y, %dy, %gh",
            format!(", {t}, {t}, {t}, {t}, {t}"),
        )
    } else {
        ("", String::new())
    };
    let (x_param, x_conv) = if conv {
        (
            "%u: tensor<8x3x32x32xf32>, %w: tensor<6x3x3x3xf32>".to_string(),
            format!("%x = stablehlo.convolution(%u, %w) dim_numbers = [b, f, 0, 1]x[o, i, 0, 1]->[b, f, 0, 1], window = {{stride = [1, 1], pad = [[1, 1], [1, 1]], lhs_dilate = [1, 1], rhs_dilate = [1, 1]}} {{batch_group_count = 1 : i64, feature_group_count = 1 : i64}} : (tensor<8x3x32x32xf32>, tensor<6x3x3x3xf32>) -> {t}"),
        )
    } else {
        (format!("%x: {t}"), String::new())
    };
    format!(
        r#"module {{
  func.func public @main({x_param}, %gamma: {v}, %beta: {v}, %g: {t}) -> ({t}, {t}, {v}, {v}, {v}, {v}{extra_ty}) {{
    {x_conv}
    %c0 = stablehlo.constant dense<0.000000e+00> : tensor<f32>
    %m = stablehlo.constant dense<8.192000e+03> : {v}
    %eps = stablehlo.constant dense<1.000000e-05> : {v}
    %z = stablehlo.constant dense<0.000000e+00> : {t}
    %mt = stablehlo.constant dense<8.192000e+03> : {t}
    {s}
    %mean = stablehlo.divide %s, %m : {v}
    {mb}
    %cen = stablehlo.subtract %x, %mb : {t}
    %sq = stablehlo.multiply %cen, %cen : {t}
    {ss}
    %var = stablehlo.divide %ss, %m : {v}
    %ve = stablehlo.add %var, %eps : {v}
    %istd = stablehlo.rsqrt %ve : {v}
    {ib}
    %xh = stablehlo.multiply %cen, %ib : {t}
    {gb}
    {bb}
    %sc = stablehlo.multiply %xh, %gb : {t}
    %y = stablehlo.add %sc, %bb : {t}
    %r = stablehlo.maximum %y, %z : {t}
    %mask = stablehlo.compare GT, %y, %z, FLOAT : ({t}, {t}) -> tensor<8x6x32x32xi1>
    %dy = stablehlo.select %mask, %g, %z : tensor<8x6x32x32xi1>, {t}
    %gh = stablehlo.multiply %gb, %dy : {t}
    %dyx = stablehlo.multiply %dy, %xh : {t}
    {dgamma}
    {dbeta}
    {sg}
    {sgb}
    %xg = stablehlo.multiply %xh, %gh : {t}
    {sxg}
    {sxgb}
    %mg = stablehlo.multiply %gh, %mt : {t}
    %t1 = stablehlo.subtract %mg, %sgb : {t}
    %xs = stablehlo.multiply %xh, %sxgb : {t}
    %t2 = stablehlo.subtract %t1, %xs : {t}
    %t3 = stablehlo.multiply %ib, %t2 : {t}
    %dx = stablehlo.divide %t3, %mt : {t}
    return %r, %dx, %dgamma, %dbeta, %mean, %var{extra} : {t}, {t}, {v}, {v}, {v}, {v}{extra_ty}
  }}
}}
"#,
        s = red("%s", "%x"),
        mb = bc("%mb", "%mean"),
        ss = red("%ss", "%sq"),
        ib = bc("%ib", "%istd"),
        gb = bc("%gb", "%gamma"),
        bb = bc("%bb", "%beta"),
        dgamma = red("%dgamma", "%dyx"),
        dbeta = red("%dbeta", "%dy"),
        sg = red("%sg", "%gh"),
        sgb = bc("%sgb", "%sg"),
        sxg = red("%sxg", "%xg"),
        sxgb = bc("%sxgb", "%sxg"),
    )
}

fn inputs(conv: bool) -> Vec<den::Value<f32>> {
    let t = TensorType::new(SHAPE.to_vec(), ElemType::F32);
    let v = TensorType::new(vec![6], ElemType::F32);
    if conv {
        let u = TensorType::new(vec![8, 3, 32, 32], ElemType::F32);
        let w = TensorType::new(vec![6, 3, 3, 3], ElemType::F32);
        return random_inputs(&[u, w, v.clone(), v, t], 5);
    }
    random_inputs(&[t.clone(), v.clone(), v, t], 5)
}

/// Fused steps (loops and reductions) over the whole pre-BN tensor.
fn full_passes(plan: &Plan) -> usize {
    let len = format!("len {} ", SHAPE.iter().product::<i64>());
    plan.listing().iter().filter(|l| l.contains(&len)).count()
}

fn compile(store: bool, conv: bool) -> (ir::Module, Plan) {
    let m = ir::parse::parse_module(&bn_module(store, conv), "bn.mlir").unwrap();
    let plan = Plan::compile(&m, "main").unwrap();
    (m, plan)
}

#[test]
fn batch_norm_reads_the_pre_bn_tensor_in_five_passes_with_unchanged_values() {
    let (_, mut stored) = compile(true, false);
    let (m, mut recomputed) = compile(false, false);
    let (a, b) = (full_passes(&recomputed), full_passes(&stored));
    // Forward: Σx, Σ(x − μ)², relu(γx̂ + β); backward: the four sums, dx.
    assert_eq!(a, 5, "{:#?}", recomputed.listing());
    assert!(b > a, "storing the intermediates takes {b} passes");
    let x = inputs(false);
    let got = recomputed.run(x.clone()).unwrap();
    let kept = stored.run(x.clone()).unwrap();
    for (k, (p, q)) in got.iter().zip(&kept).enumerate() {
        let (p, q) = (p.as_float().unwrap(), q.as_float().unwrap());
        assert!(
            p.data
                .iter()
                .zip(&q.data)
                .all(|(u, w)| u.to_bits() == w.to_bits()),
            "output {k} changed when recomputed"
        );
    }
    let want = eval_func(&m, "main", x, &generic()).unwrap().outputs;
    if let Some(e) = first_disagreement(&got, &want, (REL, REL_ELEM)) {
        panic!("{e}");
    }
}

/// Negative control: a perturbed loop of the recomputing plan (its first of
/// two ops or more, `rsqrt(var + ε)`, read by every recomputed `x̂`) fails the
/// same check.
#[test]
fn a_perturbed_batch_norm_pass_fails_the_agreement_check() {
    let (m, mut plan) = compile(false, false);
    let x = inputs(false);
    let want = eval_func(&m, "main", x.clone(), &generic())
        .unwrap()
        .outputs;
    assert!(plan.perturb_first_fused_loop_for_tests(1e-3));
    let got = plan.run(x).unwrap();
    assert!(
        first_disagreement(&got, &want, (REL, REL_ELEM)).is_some(),
        "the perturbed plan passed the agreement check"
    );
}

/// After a convolution, batch norm's Σx and Σ(x − μ)² come from the
/// moments the convolution's kernel takes of each result plane: the pre-BN
/// tensor is read by the normalising pass forward and the two backward
/// passes only, and every output agrees with the generic evaluator.
#[test]
fn batch_norm_after_a_convolution_reads_the_pre_bn_tensor_in_three_passes() {
    let (m, mut plan) = compile(false, true);
    let listing = plan.listing();
    assert_eq!(full_passes(&plan), 3, "{listing:#?}");
    assert_eq!(
        listing
            .iter()
            .filter(|l| l.contains("moments(conv)"))
            .count(),
        2,
        "{listing:#?}"
    );
    let x = inputs(true);
    let got = plan.run(x.clone()).unwrap();
    let want = eval_func(&m, "main", x, &generic()).unwrap().outputs;
    if let Some(e) = first_disagreement(&got, &want, (REL, REL_ELEM)) {
        panic!("{e}");
    }
}

/// Negative control: the statistics from the convolution's moments 0.1 %
/// off (a combination of plane moments that is wrong) fail the same check.
#[test]
fn perturbed_statistics_from_convolution_moments_fail_the_agreement_check() {
    let (m, mut plan) = compile(false, true);
    let x = inputs(true);
    let want = eval_func(&m, "main", x.clone(), &generic())
        .unwrap()
        .outputs;
    assert!(plan.perturb_first_conv_moments_for_tests(1e-3));
    let got = plan.run(x).unwrap();
    assert!(
        first_disagreement(&got, &want, (REL, REL_ELEM)).is_some(),
        "the perturbed plan passed the agreement check"
    );
}
