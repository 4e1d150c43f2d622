//! The plan's own pooling kernels (tiling max-pool and its select_and_scatter
//! backward) against the generic evaluator, bit for bit: ties keep the first
//! position, NaN wins, +0 beats -0, rows and columns a window does not reach
//! stay at the init value.

use den::{eval_func, EvalOptions, Tensor, Value};
use exec::Plan;
use ir::ElemType;

/// Few distinct levels (many ties), a NaN, signed zeros.
fn data(n: usize, seed: u64) -> Vec<f32> {
    let mut s = seed | 1;
    (0..n)
        .map(|i| {
            s = s
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            match (s >> 60, i) {
                (_, 5) => f32::NAN,
                (_, 9) => -0.0,
                (_, 10) => 0.0,
                (k, _) => (k % 3) as f32 - 1.0,
            }
        })
        .collect()
}

fn same_bits(a: &Value<f32>, b: &Value<f32>) -> bool {
    let (x, y) = (a.as_float().unwrap(), b.as_float().unwrap());
    x.shape == y.shape
        && x.data
            .iter()
            .zip(&y.data)
            .all(|(p, q)| p.to_bits() == q.to_bits() || (p.is_nan() && q.is_nan()))
}

/// Runs the pool module `m` (operand `x`, scattered source `s`) as a plan
/// and asserts both results are the generic evaluator's bit for bit and
/// that both tiled kernels ran; `case` names the case in a failure.
fn assert_tiled_matches_generic(m: &ir::Module, x: Value<f32>, s: Value<f32>, case: &str) {
    let generic = EvalOptions {
        fast: false,
        record_margins: false,
        replicas: 1,
    };
    let want = eval_func(m, "main", vec![x.clone(), s.clone()], &generic)
        .unwrap()
        .outputs;
    let mut plan = Plan::compile(m, "main").unwrap();
    plan.set_profile(true);
    let got = plan.run(vec![x, s]).unwrap();
    for out in 0..2 {
        assert!(
            same_bits(&got[out], &want[out]),
            "{case} output {out}: {:?} vs {:?}",
            got[out],
            want[out]
        );
    }
    let ops: Vec<String> = plan.profile().into_iter().map(|p| p.op).collect();
    let tiled = ops.iter().filter(|o| o.ends_with("(tiled)")).count();
    assert_eq!(tiled, 2, "the tiled kernels did not run: {ops:?}");
}

#[test]
fn tiling_pool_kernels_match_the_generic_evaluator_bit_for_bit() {
    pool_kernels_match(2, &[4, 5]);
}

/// Windows other than 2×2 take the kernels' general path.
#[test]
fn general_tiling_windows_match_the_generic_evaluator_bit_for_bit() {
    pool_kernels_match(3, &[6, 8]);
    pool_kernels_match(1, &[3]);
}

fn pool_kernels_match(k: usize, sizes: &[usize]) {
    for &h in sizes {
        for sel in ["GE", "GT", "LE"] {
            let m = ir::parse::parse_module(
                &pool_module(h, h, k, "maximum", "0xFF800000", sel),
                "pool.mlir",
            )
            .unwrap();
            let oh = h / k;
            for seed in 1..6 {
                let x = Value::Float(
                    Tensor::new(vec![2, 3, h, h], data(2 * 3 * h * h, seed)),
                    ElemType::F32,
                );
                let src: Vec<f32> = (0..2 * 3 * oh * oh)
                    .map(|i| i as f32 * 0.25 - 1.0)
                    .collect();
                let s = Value::Float(Tensor::new(vec![2, 3, oh, oh], src), ElemType::F32);
                assert_tiled_matches_generic(
                    &m,
                    x,
                    s,
                    &format!("window {k} h {h} {sel} seed {seed}"),
                );
            }
        }
    }
}

/// A `[2, 3, h, w]` max- or min-pool (`reducer`, initial value `init`) with
/// a `k`×`k` window and stride, and the `select_and_scatter` with selector
/// `sel` (scattered values added).
fn pool_module(h: usize, w: usize, k: usize, reducer: &str, init: &str, sel: &str) -> String {
    let (oh, ow) = (h / k, w / k);
    format!(
        r#"module {{
  func.func public @main(%arg0: tensor<2x3x{h}x{w}xf32>, %arg1: tensor<2x3x{oh}x{ow}xf32>) -> (tensor<2x3x{oh}x{ow}xf32>, tensor<2x3x{h}x{w}xf32>) {{
    %cst = stablehlo.constant dense<{init}> : tensor<f32>
    %0 = "stablehlo.reduce_window"(%arg0, %cst) <{{window_dimensions = array<i64: 1, 1, {k}, {k}>, window_strides = array<i64: 1, 1, {k}, {k}>}}> ({{
    ^bb0(%arg2: tensor<f32>, %arg3: tensor<f32>):
      %1 = stablehlo.{reducer} %arg2, %arg3 : tensor<f32>
      stablehlo.return %1 : tensor<f32>
    }}) : (tensor<2x3x{h}x{w}xf32>, tensor<f32>) -> tensor<2x3x{oh}x{ow}xf32>
    %cst_0 = stablehlo.constant dense<5.000000e-01> : tensor<f32>
    %2 = "stablehlo.select_and_scatter"(%arg0, %arg1, %cst_0) <{{window_dimensions = array<i64: 1, 1, {k}, {k}>, window_strides = array<i64: 1, 1, {k}, {k}>}}> ({{
    ^bb0(%arg4: tensor<f32>, %arg5: tensor<f32>):
      %3 = stablehlo.compare  {sel}, %arg4, %arg5,  FLOAT : (tensor<f32>, tensor<f32>) -> tensor<i1>
      stablehlo.return %3 : tensor<i1>
    }}, {{
    ^bb0(%arg6: tensor<f32>, %arg7: tensor<f32>):
      %4 = stablehlo.add %arg6, %arg7 : tensor<f32>
      stablehlo.return %4 : tensor<f32>
    }}) : (tensor<2x3x{h}x{w}xf32>, tensor<2x3x{oh}x{ow}xf32>, tensor<f32>) -> tensor<2x3x{h}x{w}xf32>
    return %0, %2 : tensor<2x3x{oh}x{ow}xf32>, tensor<2x3x{h}x{w}xf32>
  }}
}}
"#
    )
}

/// The 2×2 kernels' vector layouts (rows of a multiple of 8 windows, rows
/// of 4, planes 4 wide), their leftover bands and columns, planes merged
/// into one run (even heights) or not (odd), every selector, max and min:
/// bit for bit the generic evaluator, NaNs and signed zeros throughout.
#[test]
fn two_by_two_pool_layouts_match_the_generic_evaluator_bit_for_bit() {
    let shapes = [
        (4, 4),
        (6, 4),
        (7, 4),
        (12, 4),
        (4, 5),
        (8, 8),
        (6, 8),
        (7, 8),
        (8, 9),
        (9, 10),
        (16, 16),
        (17, 17),
        (3, 32),
        (2, 33),
        (2, 34),
        (4, 48),
    ];
    let reducers = [("maximum", "0xFF800000"), ("minimum", "0x7F800000")];
    for (h, w) in shapes {
        for (i, sel) in ["GE", "GT", "LE", "LT", "EQ", "NE"].into_iter().enumerate() {
            let (reducer, init) = reducers[i % 2];
            let m = ir::parse::parse_module(&pool_module(h, w, 2, reducer, init, sel), "pool.mlir")
                .unwrap();
            let (oh, ow) = (h / 2, w / 2);
            for seed in 1..4 {
                let mut xs = data(6 * h * w, seed);
                for (j, v) in xs.iter_mut().enumerate() {
                    match j % 23 {
                        3 => *v = f32::NAN,
                        7 => *v = -0.0,
                        8 | 15 => *v = 0.0,
                        _ => {}
                    }
                }
                let x = Value::Float(Tensor::new(vec![2, 3, h, w], xs), ElemType::F32);
                let src: Vec<f32> = (0..6 * oh * ow).map(|j| j as f32 * 0.25 - 1.0).collect();
                let s = Value::Float(Tensor::new(vec![2, 3, oh, ow], src), ElemType::F32);
                assert_tiled_matches_generic(
                    &m,
                    x,
                    s,
                    &format!("{h}x{w} {reducer} {sel} seed {seed}"),
                );
            }
        }
    }
}

/// A plan moves to another thread (a training loop may own it there).
#[test]
fn a_plan_is_send() {
    fn send<T: Send>() {}
    send::<Plan>();
}
