//! The structured ops on the generic evaluator, each against
//! values worked out by hand from the StableHLO specification: gather (clamped
//! starts, batching dims, index_vector_dim = rank), scatter (duplicates
//! accumulate in order, out-of-bounds windows skipped, an overwriting region,
//! two operands), dynamic_slice / dynamic_update_slice (clamped starts), while
//! (two carried values, margins of its condition, errors placed in the body),
//! case (out-of-range index → last branch), if, sort (stable ties, JAX's
//! NaN/−0 comparator, several operands), argmax as a two-operand reduce, map,
//! optimization_barrier; dual numbers and exact rationals through them.

use den::{eval_func, Dual, EvalOptions, Exact, Scalar, Tensor, Value};
use ir::parse::parse_module;
use ir::*;

fn module(sig: &str, body: &str) -> Module {
    let src = format!("module {{\n  func.func public @main({sig} {{\n{body}\n  }}\n}}\n");
    let m = parse_module(&src, "t.mlir").unwrap_or_else(|e| panic!("{e}\n{src}"));
    verify_module(&m).unwrap_or_else(|e| panic!("{e}\n{src}"));
    m
}

fn opts() -> EvalOptions {
    EvalOptions {
        fast: false,
        record_margins: true,
        replicas: 1,
    }
}

fn run<S: Scalar>(m: &Module, inputs: Vec<Value<S>>) -> den::Evaluation<S> {
    eval_func(m, "main", inputs, &opts()).unwrap_or_else(|e| panic!("{e}"))
}

fn f(shape: &[usize], data: Vec<f64>) -> Value<f64> {
    Value::Float(Tensor::new(shape.to_vec(), data), ElemType::F32)
}

fn i(shape: &[usize], data: Vec<i64>) -> Value<f64> {
    Value::Int(Tensor::new(shape.to_vec(), data), ElemType::I32)
}

fn floats<S: Scalar>(v: &Value<S>) -> Vec<f64> {
    v.as_float()
        .expect("float")
        .data
        .iter()
        .map(|x| x.to_f64())
        .collect()
}

fn ints<S: Scalar>(v: &Value<S>) -> Vec<i64> {
    v.as_int().expect("int").data.clone()
}

/// 0, 1, 2, … as a float tensor.
fn iota(shape: &[usize]) -> Value<f64> {
    let n: usize = shape.iter().product();
    f(shape, (0..n).map(|k| k as f64).collect())
}

const TAKE_ROWS: &str = r#"    %0 = "stablehlo.gather"(%arg0, %arg1) <{dimension_numbers = #stablehlo.gather<offset_dims = [1], collapsed_slice_dims = [0], start_index_map = [0], index_vector_dim = 1>, indices_are_sorted = false, slice_sizes = array<i64: 1, 3>}> : (tensor<4x3xf32>, tensor<4x1xi32>) -> tensor<4x3xf32>
    return %0 : tensor<4x3xf32>"#;

#[test]
fn gather_rows_clamps_out_of_range_starts() {
    let m = module(
        "%arg0: tensor<4x3xf32>, %arg1: tensor<4x1xi32>) -> tensor<4x3xf32>",
        TAKE_ROWS,
    );
    // Starts 7 and -1 clamp to 4 - 1 = 3 and 0.
    let r = run(&m, vec![iota(&[4, 3]), i(&[4, 1], vec![2, 0, 7, -1])]);
    assert_eq!(
        floats(&r.outputs[0]),
        vec![6., 7., 8., 0., 1., 2., 9., 10., 11., 0., 1., 2.]
    );
}

#[test]
fn gather_with_batching_dims_is_take_along_axis() {
    let m = module(
        "%arg0: tensor<4x3xf32>, %arg1: tensor<4x1x1xi32>) -> tensor<4x1xf32>",
        r#"    %0 = "stablehlo.gather"(%arg0, %arg1) <{dimension_numbers = #stablehlo.gather<collapsed_slice_dims = [1], operand_batching_dims = [0], start_indices_batching_dims = [0], start_index_map = [1], index_vector_dim = 2>, indices_are_sorted = false, slice_sizes = array<i64: 1, 1>}> : (tensor<4x3xf32>, tensor<4x1x1xi32>) -> tensor<4x1xf32>
    return %0 : tensor<4x1xf32>"#,
    );
    // Row b reads column idx[b] (5 clamps to 2): x[0,2], x[1,0], x[2,1], x[3,2].
    let r = run(&m, vec![iota(&[4, 3]), i(&[4, 1, 1], vec![2, 0, 1, 5])]);
    assert_eq!(floats(&r.outputs[0]), vec![2., 3., 7., 11.]);
}

#[test]
fn gather_blocks_with_index_vector_dim_at_the_end() {
    // Two 2x2 blocks of a 3x4 operand; start (2, 3) clamps to (1, 2).
    let m = module(
        "%arg0: tensor<3x4xf32>, %arg1: tensor<2x2xi32>) -> tensor<2x2x2xf32>",
        r#"    %0 = "stablehlo.gather"(%arg0, %arg1) <{dimension_numbers = #stablehlo.gather<offset_dims = [1, 2], start_index_map = [0, 1], index_vector_dim = 1>, indices_are_sorted = false, slice_sizes = array<i64: 2, 2>}> : (tensor<3x4xf32>, tensor<2x2xi32>) -> tensor<2x2x2xf32>
    return %0 : tensor<2x2x2xf32>"#,
    );
    let r = run(&m, vec![iota(&[3, 4]), i(&[2, 2], vec![0, 1, 2, 3])]);
    assert_eq!(
        floats(&r.outputs[0]),
        vec![1., 2., 5., 6., 6., 7., 10., 11.]
    );
}

fn scatter_rows(region: &str) -> Module {
    module(
        "%arg0: tensor<4x3xf32>, %arg1: tensor<5x1xi32>, %arg2: tensor<5x3xf32>) -> tensor<4x3xf32>",
        &format!(
            r#"    %0 = "stablehlo.scatter"(%arg0, %arg1, %arg2) <{{indices_are_sorted = false, scatter_dimension_numbers = #stablehlo.scatter<update_window_dims = [1], inserted_window_dims = [0], scatter_dims_to_operand_dims = [0], index_vector_dim = 1>, unique_indices = false}}> ({{
    ^bb0(%a: tensor<f32>, %b: tensor<f32>):
{region}
    }}) : (tensor<4x3xf32>, tensor<5x1xi32>, tensor<5x3xf32>) -> tensor<4x3xf32>
    return %0 : tensor<4x3xf32>"#
        ),
    )
}

fn scatter_inputs() -> Vec<Value<f64>> {
    vec![
        f(&[4, 3], vec![1.0; 12]),
        // Row 2 twice; 4 and -1 put the window outside the result.
        i(&[5, 1], vec![0, 2, 2, 4, -1]),
        f(
            &[5, 3],
            vec![
                1., 2., 3., 10., 20., 30., 100., 200., 300., 7., 7., 7., 8., 8., 8.,
            ],
        ),
    ]
}

#[test]
fn scatter_add_accumulates_duplicates_and_skips_out_of_bounds_windows() {
    let add =
        "      %1 = stablehlo.add %a, %b : tensor<f32>\n      stablehlo.return %1 : tensor<f32>";
    let r = run(&scatter_rows(add), scatter_inputs());
    assert_eq!(
        floats(&r.outputs[0]),
        vec![2., 3., 4., 1., 1., 1., 111., 221., 331., 1., 1., 1.]
    );
    // The same through the region (not the direct add): a subtract region is
    // applied in order, so row 2 is (1 − 10) − 100.
    let sub = "      %1 = stablehlo.subtract %a, %b : tensor<f32>\n      stablehlo.return %1 : tensor<f32>";
    let r = run(&scatter_rows(sub), scatter_inputs());
    assert_eq!(
        floats(&r.outputs[0]),
        vec![0., -1., -2., 1., 1., 1., -109., -219., -329., 1., 1., 1.]
    );
}

#[test]
fn scatter_that_overwrites_keeps_the_last_update() {
    let r = run(
        &scatter_rows("      stablehlo.return %b : tensor<f32>"),
        scatter_inputs(),
    );
    assert_eq!(
        floats(&r.outputs[0]),
        vec![1., 2., 3., 1., 1., 1., 100., 200., 300., 1., 1., 1.]
    );
}

#[test]
fn scatter_of_two_operands_combines_them_together() {
    // (sum, count) pairs: the region adds values and adds 1 to the i32 count.
    let m = module(
        "%arg0: tensor<3xf32>, %arg1: tensor<3xi32>, %arg2: tensor<4x1xi32>, %arg3: tensor<4xf32>, %arg4: tensor<4xi32>) -> (tensor<3xf32>, tensor<3xi32>)",
        r#"    %0:2 = "stablehlo.scatter"(%arg0, %arg1, %arg2, %arg3, %arg4) <{indices_are_sorted = false, scatter_dimension_numbers = #stablehlo.scatter<inserted_window_dims = [0], scatter_dims_to_operand_dims = [0], index_vector_dim = 1>, unique_indices = false}> ({
    ^bb0(%a: tensor<f32>, %n: tensor<i32>, %b: tensor<f32>, %m: tensor<i32>):
      %1 = stablehlo.add %a, %b : tensor<f32>
      %2 = stablehlo.add %n, %m : tensor<i32>
      stablehlo.return %1, %2 : tensor<f32>, tensor<i32>
    }) : (tensor<3xf32>, tensor<3xi32>, tensor<4x1xi32>, tensor<4xf32>, tensor<4xi32>) -> (tensor<3xf32>, tensor<3xi32>)
    return %0#0, %0#1 : tensor<3xf32>, tensor<3xi32>"#,
    );
    let r = run(
        &m,
        vec![
            f(&[3], vec![0.0; 3]),
            i(&[3], vec![0; 3]),
            i(&[4, 1], vec![1, 1, 0, 1]),
            f(&[4], vec![0.5, 0.25, 4.0, 2.0]),
            i(&[4], vec![1; 4]),
        ],
    );
    assert_eq!(floats(&r.outputs[0]), vec![4.0, 2.75, 0.0]);
    assert_eq!(ints(&r.outputs[1]), vec![1, 3, 0]);
}

#[test]
fn scatter_add_wraps_integers() {
    let m = module(
        "%arg0: tensor<2xi8>, %arg1: tensor<2x1xi32>, %arg2: tensor<2xi8>) -> tensor<2xi8>",
        r#"    %0 = "stablehlo.scatter"(%arg0, %arg1, %arg2) <{indices_are_sorted = false, scatter_dimension_numbers = #stablehlo.scatter<inserted_window_dims = [0], scatter_dims_to_operand_dims = [0], index_vector_dim = 1>, unique_indices = false}> ({
    ^bb0(%a: tensor<i8>, %b: tensor<i8>):
      %1 = stablehlo.add %a, %b : tensor<i8>
      stablehlo.return %1 : tensor<i8>
    }) : (tensor<2xi8>, tensor<2x1xi32>, tensor<2xi8>) -> tensor<2xi8>
    return %0 : tensor<2xi8>"#,
    );
    let i8v = |d: Vec<i64>| Value::<f64>::Int(Tensor::new(vec![2], d), ElemType::I8);
    let r = run(
        &m,
        vec![i8v(vec![100, 0]), i(&[2, 1], vec![0, 0]), i8v(vec![20, 10])],
    );
    // 100 + 20 + 10 = 130 wraps to 130 - 256 = -126.
    assert_eq!(ints(&r.outputs[0]), vec![-126, 0]);
}

const DYN: &str = r#"    %0 = stablehlo.dynamic_slice %arg0, %arg1, %arg2, sizes = [2, 2] : (tensor<4x3xf32>, tensor<i32>, tensor<i32>) -> tensor<2x2xf32>
    %1 = stablehlo.dynamic_update_slice %arg0, %arg3, %arg1, %arg2 : (tensor<4x3xf32>, tensor<2x2xf32>, tensor<i32>, tensor<i32>) -> tensor<4x3xf32>
    return %0, %1 : tensor<2x2xf32>, tensor<4x3xf32>"#;

#[test]
fn dynamic_slice_and_update_clamp_their_starts() {
    let m = module(
        "%arg0: tensor<4x3xf32>, %arg1: tensor<i32>, %arg2: tensor<i32>, %arg3: tensor<2x2xf32>) -> (tensor<2x2xf32>, tensor<4x3xf32>)",
        DYN,
    );
    let upd = f(&[2, 2], vec![-1., -2., -3., -4.]);
    // (3, -2) clamps to (2, 0).
    let r = run(
        &m,
        vec![
            iota(&[4, 3]),
            i(&[], vec![3]),
            i(&[], vec![-2]),
            upd.clone(),
        ],
    );
    assert_eq!(floats(&r.outputs[0]), vec![6., 7., 9., 10.]);
    assert_eq!(
        floats(&r.outputs[1]),
        vec![0., 1., 2., 3., 4., 5., -1., -2., 8., -3., -4., 11.]
    );
    // (1, 9) clamps to (1, 1).
    let r = run(
        &m,
        vec![iota(&[4, 3]), i(&[], vec![1]), i(&[], vec![9]), upd],
    );
    assert_eq!(floats(&r.outputs[0]), vec![4., 5., 7., 8.]);
    assert_eq!(
        floats(&r.outputs[1]),
        vec![0., 1., 2., 3., -1., -2., 6., -3., -4., 9., 10., 11.]
    );
}

#[test]
fn while_carries_two_values_and_records_its_condition() {
    // (k, x) = (0, x0); while x < 10.5: x = 2x + k, k += 1.
    let m = module(
        "%arg0: tensor<f32>) -> (tensor<i32>, tensor<f32>)",
        r#"    %c = stablehlo.constant dense<0> : tensor<i32>
    %0:2 = stablehlo.while(%iterArg = %c, %iterArg_0 = %arg0) : tensor<i32>, tensor<f32>
    cond {
      %cst = stablehlo.constant dense<1.050000e+01> : tensor<f32>
      %1 = stablehlo.compare  LT, %iterArg_0, %cst,  FLOAT : (tensor<f32>, tensor<f32>) -> tensor<i1>
      stablehlo.return %1 : tensor<i1>
    } do {
      %cst = stablehlo.constant dense<2.000000e+00> : tensor<f32>
      %1 = stablehlo.multiply %iterArg_0, %cst : tensor<f32>
      %2 = stablehlo.convert %iterArg : (tensor<i32>) -> tensor<f32>
      %3 = stablehlo.add %1, %2 : tensor<f32>
      %c_1 = stablehlo.constant dense<1> : tensor<i32>
      %4 = stablehlo.add %iterArg, %c_1 : tensor<i32>
      stablehlo.return %4, %3 : tensor<i32>, tensor<f32>
    }
    return %0#0, %0#1 : tensor<i32>, tensor<f32>"#,
    );
    // x: 1 → 2 → 5 → 12 (2·5 + 2): three iterations.
    let r = run(&m, vec![f(&[], vec![1.0])]);
    assert_eq!(ints(&r.outputs[0]), vec![3]);
    assert_eq!(floats(&r.outputs[1]), vec![12.0]);
    // The compare ran 4 times (1, 2, 5, 12 against 10.5): the closest is 12.
    let cmp: Vec<_> = r
        .margins
        .iter()
        .filter(|m| m.op == "stablehlo.compare")
        .collect();
    assert_eq!(cmp.len(), 1);
    assert_eq!(cmp[0].decisions, 4);
    assert_eq!(cmp[0].min, 1.5);
    assert_eq!(cmp[0].outcomes, vec![1, 3]);
    assert_eq!(cmp[0].line, Some(7));
    // A loop that never runs returns its initial values.
    let r = run(&m, vec![f(&[], vec![11.0])]);
    assert_eq!(ints(&r.outputs[0]), vec![0]);
    assert_eq!(floats(&r.outputs[1]), vec![11.0]);
}

#[test]
fn an_error_inside_a_while_body_is_placed_there() {
    let m = module(
        "%arg0: tensor<f32>) -> tensor<f32>",
        r#"    %0 = stablehlo.while(%iterArg = %arg0) : tensor<f32>
    cond {
      %cst = stablehlo.constant dense<1.000000e+01> : tensor<f32>
      %1 = stablehlo.compare  LT, %iterArg, %cst,  FLOAT : (tensor<f32>, tensor<f32>) -> tensor<i1>
      stablehlo.return %1 : tensor<i1>
    } do {
      %1 = stablehlo.log %iterArg : tensor<f32>
      %2 = stablehlo.add %iterArg, %1 : tensor<f32>
      stablehlo.return %2 : tensor<f32>
    }
    return %0 : tensor<f32>"#,
    );
    // log 2 is irrational: the exact evaluation fails in the body, at the log.
    let x = Value::Float(Tensor::new(vec![], vec![Exact::int(2)]), ElemType::F32);
    let e = eval_func(&m, "main", vec![x], &opts()).expect_err("log 2 is not exact");
    assert_eq!(e.op, "stablehlo.log");
    assert_eq!(e.line, Some(9));
    assert!(e.message.contains("not exact"), "{e}");
}

const SWITCH: &str = r#"    %0 = "stablehlo.case"(%arg0) ({
      stablehlo.return %arg1 : tensor<2xf32>
    }, {
      %1 = stablehlo.add %arg1, %arg1 : tensor<2xf32>
      stablehlo.return %1 : tensor<2xf32>
    }, {
      %1 = stablehlo.negate %arg1 : tensor<2xf32>
      stablehlo.return %1 : tensor<2xf32>
    }) : (tensor<i32>) -> tensor<2xf32>
    return %0 : tensor<2xf32>"#;

#[test]
fn case_runs_the_chosen_branch_and_the_last_when_out_of_range() {
    let m = module(
        "%arg0: tensor<i32>, %arg1: tensor<2xf32>) -> tensor<2xf32>",
        SWITCH,
    );
    let x = || f(&[2], vec![1.5, -0.0]);
    let out = |k: i64| floats(&run(&m, vec![i(&[], vec![k]), x()]).outputs[0]);
    assert_eq!(out(0), vec![1.5, -0.0]);
    assert_eq!(out(1), vec![3.0, 0.0]);
    assert_eq!(out(2), vec![-1.5, 0.0]);
    assert_eq!(out(3), vec![-1.5, 0.0]);
    assert_eq!(out(-1), vec![-1.5, 0.0]);
    assert!(out(2)[1].is_sign_positive(), "negate(-0) is +0");
}

#[test]
fn if_picks_the_true_or_false_branch() {
    let m = module(
        "%arg0: tensor<i1>, %arg1: tensor<f32>) -> tensor<f32>",
        r#"    %0 = "stablehlo.if"(%arg0) ({
      stablehlo.return %arg1 : tensor<f32>
    }, {
      %1 = stablehlo.negate %arg1 : tensor<f32>
      stablehlo.return %1 : tensor<f32>
    }) : (tensor<i1>) -> tensor<f32>
    return %0 : tensor<f32>"#,
    );
    let p = |b: i64| Value::<f64>::Int(Tensor::new(vec![], vec![b]), ElemType::I1);
    assert_eq!(
        floats(&run(&m, vec![p(1), f(&[], vec![2.0])]).outputs[0]),
        vec![2.0]
    );
    assert_eq!(
        floats(&run(&m, vec![p(0), f(&[], vec![2.0])]).outputs[0]),
        vec![-2.0]
    );
}

#[test]
fn sort_is_stable_on_ties_and_moves_every_operand() {
    let m = module(
        "%arg0: tensor<5xf32>, %arg1: tensor<5xi32>) -> (tensor<5xf32>, tensor<5xi32>)",
        r#"    %0:2 = "stablehlo.sort"(%arg0, %arg1) <{dimension = 0 : i64, is_stable = true}> ({
    ^bb0(%a: tensor<f32>, %b: tensor<f32>, %c: tensor<i32>, %d: tensor<i32>):
      %1 = stablehlo.compare  LT, %a, %b,  FLOAT : (tensor<f32>, tensor<f32>) -> tensor<i1>
      stablehlo.return %1 : tensor<i1>
    }) : (tensor<5xf32>, tensor<5xi32>) -> (tensor<5xf32>, tensor<5xi32>)
    return %0#0, %0#1 : tensor<5xf32>, tensor<5xi32>"#,
    );
    let r = run(
        &m,
        vec![
            f(&[5], vec![3., 1., 2., 1., 3.]),
            i(&[5], vec![0, 1, 2, 3, 4]),
        ],
    );
    assert_eq!(floats(&r.outputs[0]), vec![1., 1., 2., 3., 3.]);
    assert_eq!(ints(&r.outputs[1]), vec![1, 3, 2, 0, 4]);
    // Ties were compared: the comparator's margin is 0.
    let cmp = r
        .margins
        .iter()
        .find(|m| m.op == "stablehlo.compare")
        .expect("margin");
    assert_eq!(cmp.min, 0.0);
    assert!(cmp.ties > 0);
}

#[test]
fn sort_with_jax_comparator_orders_nan_last_and_zeros_as_equal() {
    // jnp.sort's comparator: -0 → +0, NaN → canonical NaN, then TOTALORDER LT.
    let m = module(
        "%arg0: tensor<2x3xf32>) -> tensor<2x3xf32>",
        r#"    %0 = "stablehlo.sort"(%arg0) <{dimension = 1 : i64, is_stable = true}> ({
    ^bb0(%arg1: tensor<f32>, %arg2: tensor<f32>):
      %cst = stablehlo.constant dense<0.000000e+00> : tensor<f32>
      %1 = stablehlo.compare  EQ, %arg1, %cst,  FLOAT : (tensor<f32>, tensor<f32>) -> tensor<i1>
      %2 = stablehlo.select %1, %cst, %arg1 : tensor<i1>, tensor<f32>
      %3 = stablehlo.compare  NE, %arg1, %arg1,  FLOAT : (tensor<f32>, tensor<f32>) -> tensor<i1>
      %cst_1 = stablehlo.constant dense<0x7FC00000> : tensor<f32>
      %4 = stablehlo.select %3, %cst_1, %2 : tensor<i1>, tensor<f32>
      %5 = stablehlo.compare  EQ, %arg2, %cst,  FLOAT : (tensor<f32>, tensor<f32>) -> tensor<i1>
      %6 = stablehlo.select %5, %cst, %arg2 : tensor<i1>, tensor<f32>
      %7 = stablehlo.compare  NE, %arg2, %arg2,  FLOAT : (tensor<f32>, tensor<f32>) -> tensor<i1>
      %8 = stablehlo.select %7, %cst_1, %6 : tensor<i1>, tensor<f32>
      %9 = stablehlo.compare  LT, %4, %8,  TOTALORDER : (tensor<f32>, tensor<f32>) -> tensor<i1>
      stablehlo.return %9 : tensor<i1>
    }) : (tensor<2x3xf32>) -> tensor<2x3xf32>
    return %0 : tensor<2x3xf32>"#,
    );
    let nan = f64::NAN;
    let r = run(
        &m,
        vec![f(
            &[2, 3],
            vec![nan, 1.0, f64::NEG_INFINITY, 0.0, -0.0, -2.0],
        )],
    );
    let out = floats(&r.outputs[0]);
    assert_eq!(&out[..2], &[f64::NEG_INFINITY, 1.0]);
    assert!(out[2].is_nan());
    // +0 and -0 compare equal after normalisation: stable keeps +0 first.
    assert_eq!(out[3], -2.0);
    assert!(out[4] == 0.0 && out[4].is_sign_positive());
    assert!(out[5] == 0.0 && out[5].is_sign_negative());
}

#[test]
fn argmax_is_a_two_operand_reduce() {
    // jnp.argmax(x, axis=1) as jax lowers it (NaN wins, first index on ties).
    let m = module(
        "%arg0: tensor<3x3xf32>) -> (tensor<3xf32>, tensor<3xi32>)",
        r#"    %0 = stablehlo.iota dim = 1 : tensor<3x3xi32>
    %cst = stablehlo.constant dense<0xFF800000> : tensor<f32>
    %c = stablehlo.constant dense<0> : tensor<i32>
    %1:2 = stablehlo.reduce(%arg0 init: %cst), (%0 init: %c) across dimensions = [1] : (tensor<3x3xf32>, tensor<3x3xi32>, tensor<f32>, tensor<i32>) -> (tensor<3xf32>, tensor<3xi32>)
     reducer(%arg1: tensor<f32>, %arg3: tensor<f32>) (%arg2: tensor<i32>, %arg4: tensor<i32>)  {
      %2 = stablehlo.compare  GT, %arg1, %arg3,  FLOAT : (tensor<f32>, tensor<f32>) -> tensor<i1>
      %3 = stablehlo.compare  NE, %arg1, %arg1,  FLOAT : (tensor<f32>, tensor<f32>) -> tensor<i1>
      %4 = stablehlo.or %2, %3 : tensor<i1>
      %5 = stablehlo.compare  EQ, %arg1, %arg3,  FLOAT : (tensor<f32>, tensor<f32>) -> tensor<i1>
      %6 = stablehlo.compare  LT, %arg2, %arg4,  SIGNED : (tensor<i32>, tensor<i32>) -> tensor<i1>
      %7 = stablehlo.and %5, %6 : tensor<i1>
      %8 = stablehlo.or %4, %7 : tensor<i1>
      %9 = stablehlo.select %4, %arg1, %arg3 : tensor<i1>, tensor<f32>
      %10 = stablehlo.select %8, %arg2, %arg4 : tensor<i1>, tensor<i32>
      stablehlo.return %9, %10 : tensor<f32>, tensor<i32>
    }
    return %1#0, %1#1 : tensor<3xf32>, tensor<3xi32>"#,
    );
    let ninf = f64::NEG_INFINITY;
    let r = run(
        &m,
        vec![f(
            &[3, 3],
            vec![1., 3., 3., 0., f64::NAN, 5., ninf, ninf, ninf],
        )],
    );
    let v = floats(&r.outputs[0]);
    assert_eq!(v[0], 3.0);
    assert!(v[1].is_nan());
    assert_eq!(v[2], ninf);
    assert_eq!(ints(&r.outputs[1]), vec![1, 1, 0]);
}

#[test]
fn map_and_optimization_barrier() {
    let m = module(
        "%arg0: tensor<3xf32>, %arg1: tensor<3xf32>) -> (tensor<3xf32>, tensor<3xf32>)",
        r#"    %0 = "stablehlo.map"(%arg0, %arg1) <{dimensions = array<i64: 0>}> ({
    ^bb0(%a: tensor<f32>, %b: tensor<f32>):
      %1 = stablehlo.multiply %a, %b : tensor<f32>
      %2 = stablehlo.add %1, %a : tensor<f32>
      stablehlo.return %2 : tensor<f32>
    }) : (tensor<3xf32>, tensor<3xf32>) -> tensor<3xf32>
    %3:2 = stablehlo.optimization_barrier %0, %arg1 : tensor<3xf32>, tensor<3xf32>
    return %3#0, %3#1 : tensor<3xf32>, tensor<3xf32>"#,
    );
    let r = run(
        &m,
        vec![f(&[3], vec![1., 2., -3.]), f(&[3], vec![4., 0.5, 2.])],
    );
    assert_eq!(floats(&r.outputs[0]), vec![5., 3., -9.]);
    assert_eq!(floats(&r.outputs[1]), vec![4., 0.5, 2.]);
}

fn dual(shape: &[usize], v: &[f64], t: &[f64]) -> Value<Dual<f64>> {
    let data = v.iter().zip(t).map(|(&a, &b)| Dual::new(a, b)).collect();
    Value::Float(Tensor::new(shape.to_vec(), data), ElemType::F32)
}

fn tangents(v: &Value<Dual<f64>>) -> Vec<f64> {
    v.as_float()
        .unwrap()
        .data
        .iter()
        .map(|d| d.tangent)
        .collect()
}

#[test]
fn dual_numbers_move_through_gather_scatter_and_dynamic_slices() {
    let m = module(
        "%arg0: tensor<4x3xf32>, %arg1: tensor<4x1xi32>) -> tensor<4x3xf32>",
        TAKE_ROWS,
    );
    let vals: Vec<f64> = (0..12).map(f64::from).collect();
    let tans: Vec<f64> = (0..12).map(|k| 100.0 + f64::from(k)).collect();
    let idx = Value::Int(Tensor::new(vec![4, 1], vec![3, 3, 0, 9]), ElemType::I32);
    let r = run(&m, vec![dual(&[4, 3], &vals, &tans), idx]);
    assert_eq!(
        tangents(&r.outputs[0]),
        vec![109., 110., 111., 109., 110., 111., 100., 101., 102., 109., 110., 111.]
    );
    // scatter-add: the tangents of duplicate rows add up too.
    let add =
        "      %1 = stablehlo.add %a, %b : tensor<f32>\n      stablehlo.return %1 : tensor<f32>";
    let s = scatter_rows(add);
    let idx = Value::Int(Tensor::new(vec![5, 1], vec![0, 2, 2, 4, -1]), ElemType::I32);
    let upd_t: Vec<f64> = (0..15).map(f64::from).collect();
    let r = run(
        &s,
        vec![
            dual(&[4, 3], &[0.0; 12], &[1.0; 12]),
            idx,
            dual(&[5, 3], &[0.0; 15], &upd_t),
        ],
    );
    assert_eq!(
        tangents(&r.outputs[0]),
        vec![
            1.,
            2.,
            3.,
            1.,
            1.,
            1.,
            1. + 3. + 6.,
            1. + 4. + 7.,
            1. + 5. + 8.,
            1.,
            1.,
            1.
        ]
    );
    let d = module(
        "%arg0: tensor<4x3xf32>, %arg1: tensor<i32>, %arg2: tensor<i32>, %arg3: tensor<2x2xf32>) -> (tensor<2x2xf32>, tensor<4x3xf32>)",
        DYN,
    );
    let at = |k: i64| Value::Int(Tensor::new(vec![], vec![k]), ElemType::I32);
    let r = run(
        &d,
        vec![
            dual(&[4, 3], &vals, &tans),
            at(3),
            at(-2),
            dual(&[2, 2], &[0.0; 4], &[-1., -2., -3., -4.]),
        ],
    );
    assert_eq!(tangents(&r.outputs[0]), vec![106., 107., 109., 110.]);
    assert_eq!(
        tangents(&r.outputs[1]),
        vec![100., 101., 102., 103., 104., 105., -1., -2., 108., -3., -4., 111.]
    );
}

#[test]
fn exact_rationals_through_scatter_and_case() {
    let add =
        "      %1 = stablehlo.add %a, %b : tensor<f32>\n      stablehlo.return %1 : tensor<f32>";
    let s = scatter_rows(add);
    let ex = |shape: &[usize], v: Vec<Exact>| {
        Value::Float(Tensor::new(shape.to_vec(), v), ElemType::F32)
    };
    let idx = Value::Int(Tensor::new(vec![5, 1], vec![1, 1, 1, 1, 1]), ElemType::I32);
    let third = Exact::ratio(1, 3);
    let r = run(
        &s,
        vec![
            ex(&[4, 3], vec![Exact::int(0); 12]),
            idx,
            ex(&[5, 3], vec![third.clone(); 15]),
        ],
    );
    let out = &r.outputs[0].as_float().unwrap().data;
    assert_eq!(out[3], Exact::ratio(5, 3));
    assert_eq!(out[0], Exact::int(0));
    let m = module(
        "%arg0: tensor<i32>, %arg1: tensor<2xf32>) -> tensor<2xf32>",
        SWITCH,
    );
    let k = Value::Int(Tensor::new(vec![], vec![1]), ElemType::I32);
    let r = run(&m, vec![k, ex(&[2], vec![third.clone(), Exact::int(2)])]);
    assert_eq!(
        r.outputs[0].as_float().unwrap().data,
        vec![Exact::ratio(2, 3), Exact::int(4)]
    );
}
