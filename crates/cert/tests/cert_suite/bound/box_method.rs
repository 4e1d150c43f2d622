//! Soundness of `cert::bound`: at many random points of small functions (dot,
//! conv, reduce, batch norm, softmax-CE) and of a tiny net's step, every f32
//! evaluation — the generic evaluator's sequential order, the compiled
//! executor's blocked kernels, and hand-made f32 sums in random orders — lies
//! within the bound of the exact value, and the exact value (den's rational
//! scalar, where the function is rational) within its enclosure. Negative
//! controls: the analysis with the unit roundoff halved, and without the
//! absolute underflow term, is caught failing to contain measured errors.

use super::{exact, f32_runs, module, sample, tiny_net, ELEMENTWISE};
use cert::bound::{analyse, view, HalvedUnit, Ieee754, Model, NoUnderflowTerm};
use den::{Tensor, Value};
use ir::rng::Rng;
use ir::{ElemType, Module};

/// A random f32 tensor of unit scale and magnitudes 2^[−spread, spread].
fn tensor(rng: &mut Rng, shape: &[usize], spread: i32) -> Value<f64> {
    sample(rng, shape, 1.0, spread)
}

/// Checks the bound of `M` at `inputs`: the generic evaluator's and the
/// executor's f32 results within it (and the exact value enclosed when
/// `rational`). Returns how many elements fell outside (0 for a sound model).
fn outside<M: Model>(m: &Module, func: &str, inputs: &[Value<f64>], rational: bool) -> usize {
    let b = analyse::<M>(m, func, inputs, &[]).expect("analysis");
    assert!(b.unsupported.is_empty(), "unsupported: {:?}", b.unsupported);
    let mut bad = 0;
    for runs in f32_runs(m, func, inputs) {
        for (t, c) in b.outputs.iter().zip(&runs) {
            bad += c
                .iter()
                .zip(t.exact.iter().zip(&t.err))
                .filter(|(&c, (iv, &e))| !iv.hull(e).contains(c))
                .count();
        }
    }
    if rational {
        for (t, x) in b.outputs.iter().zip(exact(m, func, inputs)) {
            assert_eq!(
                t.first_not_enclosed(&x),
                None,
                "{}: exact value not enclosed",
                t.name
            );
        }
    }
    bad
}

const DOT: &str = r#"
func.func public @f(%a: tensor<6x40xf32>, %b: tensor<40x5xf32>) -> tensor<6x5xf32> {
  %0 = stablehlo.dot_general %a, %b, contracting_dims = [1] x [0] : (tensor<6x40xf32>, tensor<40x5xf32>) -> tensor<6x5xf32>
  return %0 : tensor<6x5xf32>
}
"#;

const CONV: &str = r#"
func.func public @f(%x: tensor<2x3x6x6xf32>, %w: tensor<4x3x3x3xf32>) -> tensor<2x4x6x6xf32> {
  %0 = stablehlo.convolution(%x, %w) dim_numbers = [b, f, 0, 1]x[o, i, 0, 1]->[b, f, 0, 1], window = {stride = [1, 1], pad = [[1, 1], [1, 1]], lhs_dilate = [1, 1], rhs_dilate = [1, 1]} {batch_group_count = 1 : i64, feature_group_count = 1 : i64} : (tensor<2x3x6x6xf32>, tensor<4x3x3x3xf32>) -> tensor<2x4x6x6xf32>
  return %0 : tensor<2x4x6x6xf32>
}
"#;

const REDUCE: &str = r#"
func.func public @f(%x: tensor<3x50x20xf32>) -> (tensor<3xf32>, tensor<3x20xf32>) {
  %z = stablehlo.constant dense<0.000000e+00> : tensor<f32>
  %0 = stablehlo.reduce(%x init: %z) applies stablehlo.add across dimensions = [1, 2] : (tensor<3x50x20xf32>, tensor<f32>) -> tensor<3xf32>
  %1 = stablehlo.reduce(%x init: %z) applies stablehlo.add across dimensions = [1] : (tensor<3x50x20xf32>, tensor<f32>) -> tensor<3x20xf32>
  return %0, %1 : tensor<3xf32>, tensor<3x20xf32>
}
"#;

/// Batch norm over (batch, h, w) as the renders write it: mean, centred
/// square, rsqrt(var + eps), scale and shift.
const BN: &str = r#"
func.func public @f(%x: tensor<4x3x5x5xf32>, %g: tensor<3xf32>, %b: tensor<3xf32>) -> tensor<4x3x5x5xf32> {
  %z = stablehlo.constant dense<0.000000e+00> : tensor<f32>
  %0 = stablehlo.reduce(%x init: %z) applies stablehlo.add across dimensions = [0, 2, 3] : (tensor<4x3x5x5xf32>, tensor<f32>) -> tensor<3xf32>
  %n = stablehlo.constant dense<1.000000e+02> : tensor<3xf32>
  %1 = stablehlo.divide %0, %n : tensor<3xf32>
  %2 = stablehlo.broadcast_in_dim %1, dims = [1] : (tensor<3xf32>) -> tensor<4x3x5x5xf32>
  %3 = stablehlo.subtract %x, %2 : tensor<4x3x5x5xf32>
  %4 = stablehlo.multiply %3, %3 : tensor<4x3x5x5xf32>
  %5 = stablehlo.reduce(%4 init: %z) applies stablehlo.add across dimensions = [0, 2, 3] : (tensor<4x3x5x5xf32>, tensor<f32>) -> tensor<3xf32>
  %6 = stablehlo.divide %5, %n : tensor<3xf32>
  %eps = stablehlo.constant dense<1.000000e-05> : tensor<3xf32>
  %7 = stablehlo.add %6, %eps : tensor<3xf32>
  %8 = stablehlo.rsqrt %7 : tensor<3xf32>
  %9 = stablehlo.broadcast_in_dim %8, dims = [1] : (tensor<3xf32>) -> tensor<4x3x5x5xf32>
  %10 = stablehlo.multiply %3, %9 : tensor<4x3x5x5xf32>
  %11 = stablehlo.broadcast_in_dim %g, dims = [1] : (tensor<3xf32>) -> tensor<4x3x5x5xf32>
  %12 = stablehlo.broadcast_in_dim %b, dims = [1] : (tensor<3xf32>) -> tensor<4x3x5x5xf32>
  %13 = stablehlo.multiply %10, %11 : tensor<4x3x5x5xf32>
  %14 = stablehlo.add %13, %12 : tensor<4x3x5x5xf32>
  return %14 : tensor<4x3x5x5xf32>
}
"#;

/// Softmax cross-entropy (mean over the batch) and its logit cotangent, in
/// the renders' form.
const SOFTMAX_CE: &str = r#"
func.func public @f(%z: tensor<4x10xf32>, %y: tensor<4x10xf32>) -> (tensor<f32>, tensor<4x10xf32>) {
  %c0 = stablehlo.constant dense<0.000000e+00> : tensor<f32>
  %0 = stablehlo.exponential %z : tensor<4x10xf32>
  %1 = stablehlo.reduce(%0 init: %c0) applies stablehlo.add across dimensions = [1] : (tensor<4x10xf32>, tensor<f32>) -> tensor<4xf32>
  %2 = stablehlo.broadcast_in_dim %1, dims = [0] : (tensor<4xf32>) -> tensor<4x10xf32>
  %3 = stablehlo.log %2 : tensor<4x10xf32>
  %4 = stablehlo.subtract %z, %3 : tensor<4x10xf32>
  %5 = stablehlo.multiply %y, %4 : tensor<4x10xf32>
  %6 = stablehlo.reduce(%5 init: %c0) applies stablehlo.add across dimensions = [0, 1] : (tensor<4x10xf32>, tensor<f32>) -> tensor<f32>
  %c4 = stablehlo.constant dense<4.000000e+00> : tensor<f32>
  %7 = stablehlo.divide %6, %c4 : tensor<f32>
  %8 = stablehlo.negate %7 : tensor<f32>
  %9 = stablehlo.divide %0, %2 : tensor<4x10xf32>
  %10 = stablehlo.subtract %9, %y : tensor<4x10xf32>
  %c4b = stablehlo.constant dense<4.000000e+00> : tensor<4x10xf32>
  %11 = stablehlo.divide %10, %c4b : tensor<4x10xf32>
  return %8, %11 : tensor<f32>, tensor<4x10xf32>
}
"#;

fn onehot(rng: &mut Rng, b: usize, k: usize) -> Value<f64> {
    let mut t = Tensor::filled(vec![b, k], 0.0);
    for i in 0..b {
        t.data[i * k + (rng.next_u64() % k as u64) as usize] = 1.0;
    }
    Value::Float(t, ElemType::F32)
}

#[test]
fn dot_conv_and_reductions_contain_f32_in_both_orders_and_enclose_exact() {
    let (dot, conv, red) = (module(DOT), module(CONV), module(REDUCE));
    for seed in 0..12 {
        let mut rng = Rng::new(seed);
        let spread = (seed % 3) as i32 * 6;
        let a = [
            tensor(&mut rng, &[6, 40], spread),
            tensor(&mut rng, &[40, 5], spread),
        ];
        assert_eq!(
            outside::<Ieee754>(&dot, "f", &a, true),
            0,
            "dot, seed {seed}"
        );
        let c = [
            tensor(&mut rng, &[2, 3, 6, 6], spread),
            tensor(&mut rng, &[4, 3, 3, 3], spread),
        ];
        assert_eq!(
            outside::<Ieee754>(&conv, "f", &c, true),
            0,
            "conv, seed {seed}"
        );
        let r = [tensor(&mut rng, &[3, 50, 20], spread)];
        assert_eq!(
            outside::<Ieee754>(&red, "f", &r, true),
            0,
            "reduce, seed {seed}"
        );
    }
}

/// f32 sums of the terms in `order`, one rounding per add.
fn f32_sum(terms: &[f32], order: &[usize]) -> f32 {
    order.iter().fold(0.0f32, |s, &i| s + terms[i])
}

#[test]
fn a_reduction_bound_holds_for_random_summation_orders_and_pairwise_trees() {
    let red = module(REDUCE);
    for seed in 0..6 {
        let mut rng = Rng::new(100 + seed);
        let x = tensor(&mut rng, &[3, 50, 20], 8);
        let b = analyse::<Ieee754>(&red, "f", std::slice::from_ref(&x), &[]).unwrap();
        let data = x.as_float().unwrap().data.clone();
        for row in 0..3 {
            let terms: Vec<f32> = data[row * 1000..(row + 1) * 1000]
                .iter()
                .map(|&v| v as f32)
                .collect();
            let (iv, e) = (b.outputs[0].exact[row], b.outputs[0].err[row]);
            for _ in 0..20 {
                // A random permutation (Fisher–Yates).
                let mut order: Vec<usize> = (0..terms.len()).collect();
                for i in (1..order.len()).rev() {
                    order.swap(i, (rng.next_u64() % (i as u64 + 1)) as usize);
                }
                let s = f32_sum(&terms, &order) as f64;
                assert!(iv.hull(e).contains(s), "row {row}: {s} outside the bound");
            }
            // A pairwise tree, as vectorised reductions sum.
            let mut level = terms.clone();
            while level.len() > 1 {
                level = level.chunks(2).map(|c| c.iter().sum()).collect();
            }
            assert!(iv.hull(e).contains(level[0] as f64));
        }
    }
}

#[test]
fn batch_norm_and_softmax_ce_contain_f32_in_both_orders() {
    let (bn, ce) = (module(BN), module(SOFTMAX_CE));
    for seed in 0..10 {
        let mut rng = Rng::new(200 + seed);
        let x = [
            tensor(&mut rng, &[4, 3, 5, 5], 2),
            tensor(&mut rng, &[3], 0),
            tensor(&mut rng, &[3], 0),
        ];
        assert_eq!(
            outside::<Ieee754>(&bn, "f", &x, false),
            0,
            "bn, seed {seed}"
        );
        let z = [tensor(&mut rng, &[4, 10], 1), onehot(&mut rng, 4, 10)];
        assert_eq!(
            outside::<Ieee754>(&ce, "f", &z, false),
            0,
            "ce, seed {seed}"
        );
    }
}

#[test]
fn negative_control_the_halved_unit_is_caught_failing_to_contain_f32_errors() {
    let m = module(ELEMENTWISE);
    let mut rng = Rng::new(7);
    let x = [tensor(&mut rng, &[4000], 4), tensor(&mut rng, &[4000], 4)];
    assert_eq!(outside::<Ieee754>(&m, "f", &x, true), 0, "the sound model");
    let caught = outside::<HalvedUnit>(&m, "f", &x, true);
    assert!(caught > 0, "the halved unit contained every error");
}

const TINY_PRODUCTS: &str = r#"
func.func public @f(%a: tensor<200xf32>, %b: tensor<200xf32>) -> tensor<200xf32> {
  %0 = stablehlo.multiply %a, %b : tensor<200xf32>
  return %0 : tensor<200xf32>
}
"#;

#[test]
fn subnormal_results_are_covered_by_the_absolute_term_and_caught_without_it() {
    let m = module(TINY_PRODUCTS);
    let mut rng = Rng::new(11);
    // Products near 2^-140: subnormal f32 results, rounded to 2^-149 steps.
    let small = |rng: &mut Rng| {
        let d = (0..200)
            .map(|_| ((1.0 + rng.normal().abs()) * 2f64.powi(-70)) as f32 as f64)
            .collect();
        Value::Float(Tensor::new(vec![200], d), ElemType::F32)
    };
    let x = [small(&mut rng), small(&mut rng)];
    assert_eq!(outside::<Ieee754>(&m, "f", &x, true), 0);
    assert!(outside::<NoUnderflowTerm>(&m, "f", &x, true) > 0);
}

const RELU_OF_A_ROUNDING_ERROR: &str = r#"
func.func public @f(%a: tensor<3xf32>, %b: tensor<3xf32>, %c: tensor<3xf32>) -> tensor<3xf32> {
  %0 = stablehlo.multiply %a, %b : tensor<3xf32>
  %1 = stablehlo.subtract %0, %c : tensor<3xf32>
  %z = stablehlo.constant dense<0.000000e+00> : tensor<3xf32>
  %2 = stablehlo.maximum %1, %z : tensor<3xf32>
  return %2 : tensor<3xf32>
}
"#;

#[test]
fn a_decision_closer_to_its_kink_than_the_rounding_bound_is_named() {
    let m = module(RELU_OF_A_ROUNDING_ERROR);
    let (a, b) = (1.1f32, 1.3f32);
    let p = a * b; // the f32 product: the exact a·b differs by a rounding error
    assert_ne!(p as f64, a as f64 * b as f64);
    let v = |x: [f32; 3]| {
        Value::Float(
            Tensor::new(vec![3], x.iter().map(|&x| x as f64).collect()),
            ElemType::F32,
        )
    };
    let far = [v([a, 2.0, 0.5]), v([b, 3.0, 0.25]), v([0.0, 1.0, 0.0])];
    let r = analyse::<Ieee754>(&m, "f", &far, &[]).unwrap();
    assert!(r.flip_free(), "{:?}", r.decisions);
    // Element 1: a·b − fl(a·b) is a real, nonzero pre-activation of the
    // size of one rounding: the f32 step computes 0 (or the other branch).
    let near = [v([2.0, a, 0.5]), v([3.0, b, 0.25]), v([1.0, p, 0.0])];
    let r = analyse::<Ieee754>(&m, "f", &near, &[]).unwrap();
    assert!(!r.flip_free());
    let w = r.weakest().unwrap();
    assert_eq!((w.op, w.index), ("stablehlo.maximum", 1));
    assert!(w.ratio < 1.0);
}

/// Every output inside its bound when the report is rigorous; the
/// forward-only outputs (loss, batch statistics: no select reads them)
/// always. Returns whether the report was rigorous.
fn check_net_outputs(r: &cert::bound::BoundReport, runs: &[Vec<f64>]) -> bool {
    let rigorous = r.rigorous();
    for (t, c) in r.outputs.iter().zip(runs) {
        let forward_only = t.name == "loss" || t.name.contains(".batch_");
        if rigorous || forward_only {
            assert_eq!(t.first_outside(c), None, "{}", t.name);
        }
    }
    rigorous
}

#[test]
fn a_tiny_nets_gradients_contain_f32_in_both_orders_where_no_mask_can_flip() {
    let net = tiny_net();
    let mut rigorous = 0;
    for seed in 0..3 {
        let v = view::gradient_view(&net, 3, false, seed).unwrap();
        let r = analyse::<Ieee754>(&v.module, &v.func, &v.inputs, &v.names).unwrap();
        assert!(r.unsupported.is_empty());
        assert_eq!(r.outputs.len(), 1 + net.param_specs().unwrap().len());
        for runs in f32_runs(&v.module, &v.func, &v.inputs) {
            check_net_outputs(&r, &runs);
        }
        rigorous += usize::from(r.rigorous());
        // Every ReLU, pool and mask decision is weighed.
        assert!(r.decision_count() > 0);
        // The loss bound is informative (below 10 % of the loss; measured at
        // these seeds: 2.4 %, 2.3 %, 6.6 %). The worst-case propagation makes
        // the first layers' gradient bounds vacuous at this depth (docs/bound.md).
        assert!(
            r.outputs[0].non_vacuous(0.1),
            "loss bound {:e}",
            r.outputs[0].max_err()
        );
    }
    // Seed 1 is flip-free (smallest ratio 11.7): its gradients are checked.
    assert!(rigorous >= 1, "no seed was rigorous");
    // The whole AdamW step (tail included) at one point.
    let s = view::step_view(&net, 3, layers::trainstep::Optimizer::AdamW, false, 1).unwrap();
    let r = analyse::<Ieee754>(&s.module, &s.func, &s.inputs, &s.names).unwrap();
    check_net_outputs(&r, &super::exec_f32(&s.module, &s.func, &s.inputs));
}

#[test]
fn the_bf16_render_is_bounded_with_bf16_leaves_and_f32_accumulation() {
    // bf16 operands of every conv/dot (u = 2⁻⁸ at each convert), f32 sums.
    let net = tiny_net();
    let v = view::gradient_view(&net, 3, true, 1).unwrap();
    let r = analyse::<Ieee754>(&v.module, &v.func, &v.inputs, &v.names).unwrap();
    let f32 = view::gradient_view(&net, 3, false, 1).unwrap();
    let r32 = analyse::<Ieee754>(&f32.module, &f32.func, &f32.inputs, &f32.names).unwrap();
    for runs in f32_runs(&v.module, &v.func, &v.inputs) {
        check_net_outputs(&r, &runs);
    }
    // The bf16 leaves (u 2¹⁶ times f32's) dominate the loss bound.
    assert!(r.outputs[0].max_err() > 100.0 * r32.outputs[0].max_err());
}
