//! Soundness and tightness of the adjoint (first-order composite) bound of
//! `cert::bound::analyse_adjoint`: at random points of small functions (a
//! deep dense chain with ReLUs, conv, batch norm, softmax-CE) and of a tiny
//! net's step, every f32 evaluation — the generic evaluator's sequential
//! order and the compiled executor's blocked kernels — lies within the bound
//! of the exact value (den's rational evaluation where the function is
//! rational, the f64 evaluation otherwise); the adjoint bound is far below
//! the box bound where cancellations compose. Negative control: the same
//! analysis with the unit roundoff halved is caught failing on single
//! roundings.

use super::{escapes, f32_runs, module, sample, tiny_net, ELEMENTWISE};
use cert::bound::{
    analyse, analyse_adjoint, evaluate_f64, view, BoundReport, HalvedUnit, Ieee754, Model,
    DEFAULT_TAPE_NODES,
};
use den::Value;
use ir::rng::Rng;
use ir::Module;

/// A random f32 tensor: normal values times `scale`.
fn normal(rng: &mut Rng, shape: &[usize], scale: f64) -> Value<f64> {
    sample(rng, shape, scale, 0)
}

fn adjoint<M: Model>(m: &Module, x: &[Value<f64>]) -> BoundReport {
    let r = analyse_adjoint::<M>(m, "f", x, &[], DEFAULT_TAPE_NODES).expect("analysis");
    assert_eq!(r.method, "adjoint", "{:?}", r.note);
    assert!(r.unsupported.is_empty(), "unsupported: {:?}", r.unsupported);
    r
}

/// Four dense layers with ReLUs: y = W₄ relu(W₃ relu(W₂ relu(W₁ x))).
const MLP: &str = r#"
func.func public @f(%x: tensor<8x32xf32>, %w1: tensor<32x32xf32>, %w2: tensor<32x32xf32>, %w3: tensor<32x32xf32>, %w4: tensor<32x4xf32>) -> tensor<8x4xf32> {
  %z = stablehlo.constant dense<0.000000e+00> : tensor<8x32xf32>
  %0 = stablehlo.dot_general %x, %w1, contracting_dims = [1] x [0] : (tensor<8x32xf32>, tensor<32x32xf32>) -> tensor<8x32xf32>
  %1 = stablehlo.maximum %0, %z : tensor<8x32xf32>
  %2 = stablehlo.dot_general %1, %w2, contracting_dims = [1] x [0] : (tensor<8x32xf32>, tensor<32x32xf32>) -> tensor<8x32xf32>
  %3 = stablehlo.maximum %2, %z : tensor<8x32xf32>
  %4 = stablehlo.dot_general %3, %w3, contracting_dims = [1] x [0] : (tensor<8x32xf32>, tensor<32x32xf32>) -> tensor<8x32xf32>
  %5 = stablehlo.maximum %4, %z : tensor<8x32xf32>
  %6 = stablehlo.dot_general %5, %w4, contracting_dims = [1] x [0] : (tensor<8x32xf32>, tensor<32x4xf32>) -> tensor<8x4xf32>
  return %6 : tensor<8x4xf32>
}
"#;

fn mlp_point(seed: u64) -> Vec<Value<f64>> {
    let mut rng = Rng::new(seed);
    let s = (2.0f64 / 32.0).sqrt();
    vec![
        normal(&mut rng, &[8, 32], 1.0),
        normal(&mut rng, &[32, 32], s),
        normal(&mut rng, &[32, 32], s),
        normal(&mut rng, &[32, 32], s),
        normal(&mut rng, &[32, 4], s),
    ]
}

#[test]
fn a_deep_relu_chain_is_bounded_against_exact_rationals_and_far_below_the_box() {
    let m = module(MLP);
    let mut rigorous = 0;
    for seed in 0..6 {
        let x = mlp_point(seed);
        let r = adjoint::<Ieee754>(&m, &x);
        if !r.rigorous() {
            continue;
        }
        rigorous += 1;
        assert_eq!(escapes(&r, &m, "f", &x, true), 0, "seed {seed}");
        let b = analyse::<Ieee754>(&m, "f", &x, &[]).unwrap();
        // Per element never above the box (it is the smaller of the two) …
        for (a, bx) in r.outputs[0].err.iter().zip(&b.outputs[0].err) {
            assert!(a <= bx);
        }
        // … and well below it after four layers (measured 3–4×).
        assert!(
            r.outputs[0].norm_err() * 2.0 < b.outputs[0].norm_err(),
            "seed {seed}: adjoint {:e}, box {:e}",
            r.outputs[0].norm_err(),
            b.outputs[0].norm_err()
        );
    }
    assert!(rigorous >= 3, "only {rigorous} flip-free points");
}

/// conv (padding 1), batch norm over (batch, h, w), ReLU, a second conv: the
/// box loses the BN's removal of common shifts; the adjoint keeps it.
const CONV_BN_CONV: &str = r#"
func.func public @f(%x: tensor<4x3x6x6xf32>, %w: tensor<4x3x3x3xf32>, %v: tensor<2x4x3x3xf32>) -> tensor<4x2x6x6xf32> {
  %c = stablehlo.convolution(%x, %w) dim_numbers = [b, f, 0, 1]x[o, i, 0, 1]->[b, f, 0, 1], window = {stride = [1, 1], pad = [[1, 1], [1, 1]], lhs_dilate = [1, 1], rhs_dilate = [1, 1]} {batch_group_count = 1 : i64, feature_group_count = 1 : i64} : (tensor<4x3x6x6xf32>, tensor<4x3x3x3xf32>) -> tensor<4x4x6x6xf32>
  %z = stablehlo.constant dense<0.000000e+00> : tensor<f32>
  %0 = stablehlo.reduce(%c init: %z) applies stablehlo.add across dimensions = [0, 2, 3] : (tensor<4x4x6x6xf32>, tensor<f32>) -> tensor<4xf32>
  %n = stablehlo.constant dense<1.440000e+02> : tensor<4xf32>
  %1 = stablehlo.divide %0, %n : tensor<4xf32>
  %2 = stablehlo.broadcast_in_dim %1, dims = [1] : (tensor<4xf32>) -> tensor<4x4x6x6xf32>
  %3 = stablehlo.subtract %c, %2 : tensor<4x4x6x6xf32>
  %4 = stablehlo.multiply %3, %3 : tensor<4x4x6x6xf32>
  %5 = stablehlo.reduce(%4 init: %z) applies stablehlo.add across dimensions = [0, 2, 3] : (tensor<4x4x6x6xf32>, tensor<f32>) -> tensor<4xf32>
  %6 = stablehlo.divide %5, %n : tensor<4xf32>
  %eps = stablehlo.constant dense<1.000000e-05> : tensor<4xf32>
  %7 = stablehlo.add %6, %eps : tensor<4xf32>
  %8 = stablehlo.rsqrt %7 : tensor<4xf32>
  %9 = stablehlo.broadcast_in_dim %8, dims = [1] : (tensor<4xf32>) -> tensor<4x4x6x6xf32>
  %10 = stablehlo.multiply %3, %9 : tensor<4x4x6x6xf32>
  %zz = stablehlo.constant dense<0.000000e+00> : tensor<4x4x6x6xf32>
  %11 = stablehlo.maximum %10, %zz : tensor<4x4x6x6xf32>
  %12 = stablehlo.convolution(%11, %v) dim_numbers = [b, f, 0, 1]x[o, i, 0, 1]->[b, f, 0, 1], window = {stride = [1, 1], pad = [[1, 1], [1, 1]], lhs_dilate = [1, 1], rhs_dilate = [1, 1]} {batch_group_count = 1 : i64, feature_group_count = 1 : i64} : (tensor<4x4x6x6xf32>, tensor<2x4x3x3xf32>) -> tensor<4x2x6x6xf32>
  return %12 : tensor<4x2x6x6xf32>
}
"#;

#[test]
fn conv_batch_norm_conv_contains_f32_in_both_orders_against_f64() {
    let m = module(CONV_BN_CONV);
    let mut rigorous = 0;
    for seed in 0..4 {
        let mut rng = Rng::new(300 + seed);
        let x = vec![
            normal(&mut rng, &[4, 3, 6, 6], 1.0),
            normal(&mut rng, &[4, 3, 3, 3], 0.3),
            normal(&mut rng, &[2, 4, 3, 3], 0.3),
        ];
        let r = adjoint::<Ieee754>(&m, &x);
        if !r.rigorous() {
            continue;
        }
        rigorous += 1;
        assert_eq!(escapes(&r, &m, "f", &x, false), 0, "seed {seed}");
        let b = analyse::<Ieee754>(&m, "f", &x, &[]).unwrap();
        assert!(r.outputs[0].norm_err() < b.outputs[0].norm_err());
    }
    assert!(rigorous >= 2, "only {rigorous} flip-free points");
}

#[test]
fn negative_control_the_adjoint_with_the_halved_unit_is_caught_failing() {
    let m = module(ELEMENTWISE);
    let mut rng = Rng::new(7);
    let x = [
        normal(&mut rng, &[4000], 3.0),
        normal(&mut rng, &[4000], 0.7),
    ];
    assert_eq!(escapes(&adjoint::<Ieee754>(&m, &x), &m, "f", &x, true), 0);
    assert!(escapes(&adjoint::<HalvedUnit>(&m, &x), &m, "f", &x, true) > 0);
    // Through a deep chain the bound sits 10²–10³ above the measured error
    // (worst-case signs and orders), so halving u is not caught there: the
    // control needs single roundings, which do reach u·|x|.
}

#[test]
fn a_tiny_nets_adjoint_gradients_contain_f32_and_beat_the_box() {
    let net = tiny_net();
    // Seed 1 is flip-free (box ratio 11.7).
    let v = view::gradient_view(&net, 3, false, 1).unwrap();
    let r = analyse_adjoint::<Ieee754>(&v.module, &v.func, &v.inputs, &v.names, DEFAULT_TAPE_NODES)
        .unwrap();
    assert_eq!(r.method, "adjoint");
    assert!(r.rigorous());
    let reference = evaluate_f64(&v.module, &v.func, &v.inputs).unwrap();
    for runs in f32_runs(&v.module, &v.func, &v.inputs) {
        for ((t, c), z) in r.outputs.iter().zip(&runs).zip(&reference) {
            for ((&c, &z), &e) in c.iter().zip(z).zip(&t.err) {
                assert!((c - z).abs() <= e + z.abs() * 2f64.powi(-50), "{}", t.name);
            }
        }
    }
    let b = analyse::<Ieee754>(&v.module, &v.func, &v.inputs, &v.names).unwrap();
    let count = |r: &BoundReport| r.outputs.iter().filter(|t| t.non_vacuous(0.1)).count();
    let (na, nb) = (count(&r), count(&b));
    println!(
        "tiny-bbn N=3: non-vacuous adjoint {na}, box {nb} of {}",
        r.outputs.len()
    );
    assert!(na > nb, "adjoint {na} vs box {nb} non-vacuous tensors");
    // The rest are the conv biases before a batch BN, whose exact gradient
    // is 0 (the BN removes any shift): zero-valued, counted neither way.
    for t in r.outputs.iter().filter(|t| !t.non_vacuous(0.1)) {
        assert!(t.zero_valued(), "{} is vacuous", t.name);
        assert!(
            t.name.contains("conv") && t.name.ends_with(".b"),
            "{} is zero-valued",
            t.name
        );
    }
}
