//! `Evaluation::first_non_finite`: with margins recorded, the evaluator names
//! the first op that made a non-finite value from finite operands (where an
//! overflow began), skipping constants (a `-inf` init is deliberate) and ops
//! that merely pass a non-finite operand on.

use den::{eval_func, Dual, EvalOptions, Tensor, Value};
use ir::ElemType;

const TEXT: &str = "func.func @main(%x: tensor<3xf32>) -> tensor<3xf32> {
  %ninf = stablehlo.constant dense<0xFF800000> : tensor<3xf32>
  %m = stablehlo.maximum %x, %ninf : tensor<3xf32>
  %e = stablehlo.exponential %m : tensor<3xf32>
  %n = stablehlo.negate %e : tensor<3xf32>
  return %n : tensor<3xf32>
}";

fn recording() -> EvalOptions {
    EvalOptions {
        fast: false,
        record_margins: true,
        replicas: 1,
    }
}

#[test]
fn the_first_overflowing_op_is_named_with_its_line_and_element() {
    let m = ir::parse::parse_module(TEXT, "t").unwrap();
    let x = Value::Float(
        Tensor::new(vec![3], vec![1.0f64, 800.0, 900.0]),
        ElemType::F32,
    );
    let ev = eval_func::<f64>(&m, "main", vec![x.clone()], &recording()).unwrap();
    let at = ev.first_non_finite.expect("exp(800) overflows f64");
    assert_eq!(at.op, "stablehlo.exponential");
    assert_eq!(at.line, Some(4));
    assert_eq!(at.index, 1);
    assert_eq!(at.value, f64::INFINITY);
    // Not recorded when margins are not.
    let plain = EvalOptions {
        record_margins: false,
        ..recording()
    };
    assert!(eval_func::<f64>(&m, "main", vec![x], &plain)
        .unwrap()
        .first_non_finite
        .is_none());
}

#[test]
fn finite_inputs_that_stay_finite_record_nothing() {
    let m = ir::parse::parse_module(TEXT, "t").unwrap();
    let x = Value::Float(Tensor::new(vec![3], vec![1.0f64, -2.0, 3.0]), ElemType::F32);
    let ev = eval_func::<f64>(&m, "main", vec![x], &recording()).unwrap();
    assert!(
        ev.first_non_finite.is_none(),
        "the -inf constant is not counted"
    );
}

/// 1/(1+exp(−z)) at z = −800: the primal is 0 (finite), its tangent
/// −(−inf)/inf² is NaN — the dual number is non-finite at the divide.
#[test]
fn a_finite_primal_with_a_nan_tangent_is_non_finite() {
    let text = "func.func @main(%z: tensor<1xf32>) -> tensor<1xf32> {
  %one = stablehlo.constant dense<1.0> : tensor<1xf32>
  %nz = stablehlo.negate %z : tensor<1xf32>
  %e = stablehlo.exponential %nz : tensor<1xf32>
  %d = stablehlo.add %one, %e : tensor<1xf32>
  %s = stablehlo.divide %one, %d : tensor<1xf32>
  return %s : tensor<1xf32>
}";
    let m = ir::parse::parse_module(text, "t").unwrap();
    let z = Value::Float(
        Tensor::new(vec![1], vec![Dual::new(-800.0f64, 1.0)]),
        ElemType::F32,
    );
    let ev = eval_func::<Dual<f64>>(&m, "main", vec![z], &recording()).unwrap();
    let at = ev.first_non_finite.expect("exp(800) overflows");
    // exp is where it began (its primal is inf); the NaN tangent follows.
    assert_eq!(at.op, "stablehlo.exponential");
    let out = ev.outputs[0].as_float().unwrap().data[0].clone();
    assert_eq!(out.value, 0.0);
    assert!(out.tangent.is_nan());
}
