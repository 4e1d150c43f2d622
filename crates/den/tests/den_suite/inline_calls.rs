//! `ir::passes::inline_calls` preserves what a function computes: JAX-style
//! helpers (called twice, calling another helper, with a region op inside)
//! expanded in place evaluate to the same values as the calls, and no call
//! is left at the top level.

use den::{eval_func, EvalOptions, Tensor, Value};
use ir::{ElemType, OpKind};

const TEXT: &str = "module {
  func.func public @main(%x: tensor<4xf32>) -> tensor<4xf32> {
    %lo = stablehlo.constant dense<0.0> : tensor<f32>
    %hi = stablehlo.constant dense<6.0> : tensor<f32>
    %a = call @clip(%x, %lo, %hi) : (tensor<4xf32>, tensor<f32>, tensor<f32>) -> tensor<4xf32>
    %b = call @clip(%a, %hi, %hi) : (tensor<4xf32>, tensor<f32>, tensor<f32>) -> tensor<4xf32>
    %c = stablehlo.add %a, %b : tensor<4xf32>
    return %c : tensor<4xf32>
  }
  func.func private @clip(%v: tensor<4xf32>, %l: tensor<f32>, %h: tensor<f32>) -> tensor<4xf32> {
    %0 = stablehlo.broadcast_in_dim %l, dims = [] : (tensor<f32>) -> tensor<4xf32>
    %1 = call @maxer(%0, %v) : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
    %2 = stablehlo.broadcast_in_dim %h, dims = [] : (tensor<f32>) -> tensor<4xf32>
    %3 = stablehlo.minimum %2, %1 : tensor<4xf32>
    return %3 : tensor<4xf32>
  }
  func.func private @maxer(%p: tensor<4xf32>, %q: tensor<4xf32>) -> tensor<4xf32> {
    %z = stablehlo.constant dense<0.0> : tensor<f32>
    %s = stablehlo.reduce(%q init: %z) applies stablehlo.add across dimensions = [0] : (tensor<4xf32>, tensor<f32>) -> tensor<f32>
    %sb = stablehlo.broadcast_in_dim %s, dims = [] : (tensor<f32>) -> tensor<4xf32>
    %m = stablehlo.maximum %p, %q : tensor<4xf32>
    %r = stablehlo.add %m, %sb : tensor<4xf32>
    return %r : tensor<4xf32>
  }
}";

#[test]
fn inlined_helpers_compute_what_the_calls_computed() {
    let mut m = ir::parse::parse_module(TEXT, "t").unwrap();
    let main = m.func("main").unwrap().clone();
    let mut inlined = ir::passes::inline_calls(&m, &main).expect("callees exist");
    assert!(inlined
        .body
        .ops
        .iter()
        .all(|op| !matches!(op.kind, OpKind::Call { .. })));
    inlined.name = "inlined".into();
    m.funcs.push(inlined);
    ir::verify_module(&m).unwrap();
    let opts = EvalOptions {
        fast: false,
        ..Default::default()
    };
    for data in [vec![-1.0, 0.5, 7.0, 3.0], vec![2.0, -3.0, 0.0, 10.0]] {
        let x = Value::Float(Tensor::new(vec![4], data), ElemType::F32);
        let a = eval_func::<f64>(&m, "main", vec![x.clone()], &opts).unwrap();
        let b = eval_func::<f64>(&m, "inlined", vec![x], &opts).unwrap();
        assert_eq!(a.outputs, b.outputs);
    }
}

#[test]
fn a_missing_callee_is_refused() {
    let mut m = ir::parse::parse_module(TEXT, "t").unwrap();
    m.funcs.retain(|f| f.name != "maxer");
    let main = m.func("main").unwrap().clone();
    assert!(ir::passes::inline_calls(&m, &main).is_none());
}
