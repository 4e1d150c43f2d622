//! The executor on the structured ops of issue 21, as JAX exports them: a
//! `fori_loop` whose body calls `@closed_call` (the function then runs whole on
//! the generic evaluator, which has the callee), and gather / scatter / sort
//! steps planned one op at a time on the generic evaluator between native
//! steps. Each output is compared with values worked out by hand.

use den::{Tensor, Value};
use exec::Plan;
use ir::ElemType;

fn module(src: &str) -> ir::Module {
    let m = ir::parse::parse_module(src, "t.mlir").unwrap_or_else(|e| panic!("{e}"));
    ir::verify_module(&m).unwrap_or_else(|e| panic!("{e}"));
    m
}

fn f(shape: &[usize], data: Vec<f32>) -> Value<f32> {
    Value::Float(Tensor::new(shape.to_vec(), data), ElemType::F32)
}

fn floats(v: &Value<f32>) -> Vec<f32> {
    v.as_float().expect("float").data.clone()
}

#[test]
fn a_loop_whose_body_calls_a_function_runs() {
    let m = module(
        r#"module {
  func.func public @main(%arg0: tensor<3xf32>) -> tensor<3xf32> {
    %c = stablehlo.constant dense<0> : tensor<i32>
    %0:2 = stablehlo.while(%iterArg = %c, %iterArg_0 = %arg0) : tensor<i32>, tensor<3xf32>
    cond {
      %c_1 = stablehlo.constant dense<3> : tensor<i32>
      %1 = stablehlo.compare  LT, %iterArg, %c_1,  SIGNED : (tensor<i32>, tensor<i32>) -> tensor<i1>
      stablehlo.return %1 : tensor<i1>
    } do {
      %1 = func.call @closed_call(%iterArg_0) : (tensor<3xf32>) -> tensor<3xf32>
      %c_1 = stablehlo.constant dense<1> : tensor<i32>
      %2 = stablehlo.add %iterArg, %c_1 : tensor<i32>
      stablehlo.return %2, %1 : tensor<i32>, tensor<3xf32>
    }
    return %0#1 : tensor<3xf32>
  }
  func.func private @closed_call(%arg0: tensor<3xf32>) -> tensor<3xf32> {
    %cst = stablehlo.constant dense<2.000000e+00> : tensor<f32>
    %0 = stablehlo.broadcast_in_dim %cst, dims = [] : (tensor<f32>) -> tensor<3xf32>
    %1 = stablehlo.multiply %arg0, %0 : tensor<3xf32>
    return %1 : tensor<3xf32>
  }
}"#,
    );
    let mut plan = Plan::compile(&m, "main").expect("compiles");
    let out = plan.run(vec![f(&[3], vec![1.0, -0.5, 3.0])]).expect("runs");
    assert_eq!(floats(&out[0]), vec![8.0, -4.0, 24.0]);
}

#[test]
fn gather_scatter_and_sort_steps_between_native_ones() {
    let m = module(
        r#"module {
  func.func public @main(%arg0: tensor<4x2xf32>) -> (tensor<4x2xf32>, tensor<4x2xf32>) {
    %cst = stablehlo.constant dense<1.000000e+00> : tensor<f32>
    %0 = stablehlo.broadcast_in_dim %cst, dims = [] : (tensor<f32>) -> tensor<4x2xf32>
    %1 = stablehlo.add %arg0, %0 : tensor<4x2xf32>
    %c = stablehlo.constant dense<[[3], [3], [0], [9]]> : tensor<4x1xi32>
    %2 = "stablehlo.gather"(%1, %c) <{dimension_numbers = #stablehlo.gather<offset_dims = [1], collapsed_slice_dims = [0], start_index_map = [0], index_vector_dim = 1>, indices_are_sorted = false, slice_sizes = array<i64: 1, 2>}> : (tensor<4x2xf32>, tensor<4x1xi32>) -> tensor<4x2xf32>
    %3 = "stablehlo.scatter"(%0, %c, %2) <{indices_are_sorted = false, scatter_dimension_numbers = #stablehlo.scatter<update_window_dims = [1], inserted_window_dims = [0], scatter_dims_to_operand_dims = [0], index_vector_dim = 1>, unique_indices = false}> ({
    ^bb0(%a: tensor<f32>, %b: tensor<f32>):
      %4 = stablehlo.add %a, %b : tensor<f32>
      stablehlo.return %4 : tensor<f32>
    }) : (tensor<4x2xf32>, tensor<4x1xi32>, tensor<4x2xf32>) -> tensor<4x2xf32>
    %5 = "stablehlo.sort"(%3) <{dimension = 0 : i64, is_stable = true}> ({
    ^bb0(%a: tensor<f32>, %b: tensor<f32>):
      %6 = stablehlo.compare  GT, %a, %b,  FLOAT : (tensor<f32>, tensor<f32>) -> tensor<i1>
      stablehlo.return %6 : tensor<i1>
    }) : (tensor<4x2xf32>) -> tensor<4x2xf32>
    %7 = stablehlo.multiply %5, %5 : tensor<4x2xf32>
    return %2, %7 : tensor<4x2xf32>, tensor<4x2xf32>
  }
}"#,
    );
    let mut plan = Plan::compile(&m, "main").expect("compiles");
    let x = f(&[4, 2], vec![0., 1., 2., 3., 4., 5., 6., 7.]);
    let out = plan.run(vec![x]).expect("runs");
    // x + 1 = [[1,2],[3,4],[5,6],[7,8]]; rows 3, 3, 0 and 9 → clamped to 3.
    assert_eq!(floats(&out[0]), vec![7., 8., 7., 8., 1., 2., 7., 8.]);
    // The gathered rows scattered back at the raw indices into ones: row 3
    // gets two of them (index 9 is out of bounds, its window skipped), row 0
    // gets (1, 2). Rows [2,3], [1,1], [1,1], [15,17], sorted descending per
    // column:
    // column 0: 15, 2, 1, 1; column 1: 17, 3, 1, 1; then squared.
    assert_eq!(floats(&out[1]), vec![225., 289., 4., 9., 1., 1., 1., 1.]);
}
