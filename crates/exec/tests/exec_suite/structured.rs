//! The executor on the structured ops, as JAX exports them:
//! loops (`fori_loop`, `scan`) whose bodies call `@closed_call` (inlined, the
//! body becomes a sub-plan of fused loops and kernels), `case`/`if` whose
//! branches read outer values, nested loops, and gather / scatter / sort
//! steps planned one op at a time on the generic evaluator between native
//! steps. Outputs are compared with values worked out by hand; JAX's own
//! structured samples (crates/ir/tests/ir_suite/data/structured) with the generic
//! evaluator on random inputs.

use den::{eval_func, EvalOptions, Tensor, Value};
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
    assert_planned(&plan, 1);
    let out = plan.run(vec![f(&[3], vec![1.0, -0.5, 3.0])]).expect("runs");
    assert_eq!(floats(&out[0]), vec![8.0, -4.0, 24.0]);
}

/// The plan lowered the function (calls inlined) with `loops` control steps.
fn assert_planned(plan: &Plan, control_steps: usize) {
    let listing = plan.listing();
    let n = listing.iter().filter(|l| l.contains("(sub-plans)")).count();
    assert_eq!(
        n,
        control_steps,
        "control steps in:\n{}",
        listing.join("\n")
    );
}

fn i(shape: &[usize], data: Vec<i64>, e: ElemType) -> Value<f32> {
    Value::int(Tensor::new(shape.to_vec(), data), e)
}

fn structured(name: &str) -> ir::Module {
    let path = format!(
        "{}/../ir/tests/ir_suite/data/structured/{name}.mlir",
        env!("CARGO_MANIFEST_DIR")
    );
    module(&std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}")))
}

#[test]
fn jax_fori_loop_body_is_a_sub_plan() {
    // for j in 0..3: x = 2x + j, so x ↦ 8x + (0·4 + 1·2 + 2) = 8x + 4.
    let mut plan = Plan::compile(&structured("fori_loop"), "main").unwrap();
    assert_planned(&plan, 1);
    let x: Vec<f32> = (0..12).map(|k| k as f32 * 0.5 - 2.0).collect();
    let want: Vec<f32> = x.iter().map(|v| 8.0 * v + 4.0).collect();
    for _ in 0..2 {
        let out = plan.run(vec![f(&[4, 3], x.clone())]).unwrap();
        assert_eq!(floats(&out[0]), want);
    }
}

#[test]
fn jax_scan_carries_and_stacks() {
    // carry' = carry + x_t, y_t = carry · x_t, carry from 0: the final carry
    // is the column sum, y_0 = 0, y_t = (x_0 + … + x_{t-1}) · x_t.
    let mut plan = Plan::compile(&structured("scan"), "main").unwrap();
    assert_planned(&plan, 1);
    let x = vec![1., 2., 3., 4., 5., 6., -1., 0.5, 2., 0.25, -2., 1.];
    let out = plan.run(vec![f(&[4, 3], x)]).unwrap();
    assert_eq!(floats(&out[0]), vec![4.25, 5.5, 12.0]);
    assert_eq!(
        floats(&out[1]),
        vec![0., 0., 0., 4., 10., 18., -5., 3.5, 18., 1., -15., 11.]
    );
}

#[test]
fn case_and_if_branches_read_outer_values() {
    // switch: clamp(k, 0, 2) picks x, 2x or x + 1 (branches capture x).
    let mut plan = Plan::compile(&structured("switch"), "main").unwrap();
    assert_planned(&plan, 1);
    let x: Vec<f32> = (0..12).map(|k| k as f32 - 5.0).collect();
    for (k, g) in [(-3i64, 0usize), (0, 0), (1, 1), (2, 2), (9, 2)] {
        let out = plan
            .run(vec![i(&[], vec![k], ElemType::I32), f(&[4, 3], x.clone())])
            .unwrap();
        let want: Vec<f32> = x.iter().map(|v| [*v, 2.0 * v, v + 1.0][g]).collect();
        assert_eq!(floats(&out[0]), want, "selector {k}");
    }
    // cond: the i1 converted to a case index: 1 (true) keeps x, 0 negates.
    let mut plan = Plan::compile(&structured("cond"), "main").unwrap();
    assert_planned(&plan, 1);
    for (p, sign) in [(1i64, 1.0f32), (0, -1.0)] {
        let out = plan
            .run(vec![i(&[], vec![p], ElemType::I1), f(&[4, 3], x.clone())])
            .unwrap();
        let want: Vec<f32> = x.iter().map(|v| sign * v).collect();
        assert_eq!(floats(&out[0]), want, "predicate {p}");
    }
}

/// A loop nested in an `if` branch: both regions read outer values (the
/// branch reads `%y`; the inner loop's body reads `%s` from the branch).
const NESTED: &str = r#"module {
  func.func public @main(%p: tensor<i1>, %x: tensor<3xf32>, %y: tensor<3xf32>) -> tensor<3xf32> {
    %r = "stablehlo.if"(%p) ({
      %s = stablehlo.add %y, %y : tensor<3xf32>
      %c0 = stablehlo.constant dense<0> : tensor<i32>
      %w:2 = stablehlo.while(%k = %c0, %acc = %x) : tensor<i32>, tensor<3xf32>
      cond {
        %n = stablehlo.constant dense<2> : tensor<i32>
        %lt = stablehlo.compare LT, %k, %n, SIGNED : (tensor<i32>, tensor<i32>) -> tensor<i1>
        stablehlo.return %lt : tensor<i1>
      } do {
        %one = stablehlo.constant dense<1> : tensor<i32>
        %k1 = stablehlo.add %k, %one : tensor<i32>
        %m = stablehlo.multiply %acc, %s : tensor<3xf32>
        %a = stablehlo.add %m, %y : tensor<3xf32>
        stablehlo.return %k1, %a : tensor<i32>, tensor<3xf32>
      }
      stablehlo.return %w#1 : tensor<3xf32>
    }, {
      %e = stablehlo.exponential %x : tensor<3xf32>
      stablehlo.return %e : tensor<3xf32>
    }) : (tensor<i1>) -> tensor<3xf32>
    %out = stablehlo.subtract %r, %x : tensor<3xf32>
    return %out : tensor<3xf32>
  }
}"#;

#[test]
fn a_loop_inside_a_branch_reads_values_from_both_levels() {
    let m = module(NESTED);
    let mut plan = Plan::compile(&m, "main").unwrap();
    assert_planned(&plan, 1);
    let x = vec![1.0f32, -2.0, 0.5];
    let y = vec![0.5f32, 1.0, -1.0];
    // True branch: acc ↦ acc·2y + y twice, then minus x.
    let want: Vec<f32> = x
        .iter()
        .zip(&y)
        .map(|(&x, &y)| {
            let a = x * (2.0 * y) + y;
            a * (2.0 * y) + y - x
        })
        .collect();
    let out = plan
        .run(vec![
            i(&[], vec![1], ElemType::I1),
            f(&[3], x.clone()),
            f(&[3], y.clone()),
        ])
        .unwrap();
    assert_eq!(floats(&out[0]), want);
    // By hand, element 0 (x = 1, y = 0.5, so 2y = 1): 1·1 + 0.5 = 1.5, then
    // 1.5·1 + 0.5 = 2, minus x: 1.
    assert_eq!(floats(&out[0])[0], 1.0);
    let out = plan
        .run(vec![
            i(&[], vec![0], ElemType::I1),
            f(&[3], x.clone()),
            f(&[3], y),
        ])
        .unwrap();
    let want: Vec<f32> = x.iter().map(|v| v.exp() - v).collect();
    assert_eq!(floats(&out[0]), want);
}

/// Every JAX structured sample, plan against the generic evaluator (fast
/// kernels) on deterministic inputs, twice (the second run reuses buffers).
#[test]
fn jax_structured_samples_agree_with_the_evaluator() {
    let dir = format!(
        "{}/../ir/tests/ir_suite/data/structured",
        env!("CARGO_MANIFEST_DIR")
    );
    let mut names: Vec<String> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".mlir"))
        .collect();
    names.sort();
    assert!(names.len() >= 14, "samples: {names:?}");
    for name in names {
        let m = structured(name.trim_end_matches(".mlir"));
        let main = m.func("main").unwrap();
        let inputs: Vec<Value<f32>> = main
            .params
            .iter()
            .enumerate()
            .map(|(k, p)| {
                let shape: Vec<usize> = p.ty.shape.iter().map(|&d| d as usize).collect();
                let n: usize = shape.iter().product();
                if p.ty.elem.is_float() {
                    let d = (0..n).map(|j| ((j * 7 + k * 3) % 11) as f32 * 0.37 - 1.5);
                    f(&shape, d.collect())
                } else if p.ty.elem == ElemType::I1 {
                    i(&shape, (0..n).map(|j| (j % 2) as i64).collect(), p.ty.elem)
                } else {
                    i(
                        &shape,
                        (0..n).map(|j| (j % 5) as i64 - 1).collect(),
                        p.ty.elem,
                    )
                }
            })
            .collect();
        let opts = EvalOptions::default();
        let want = eval_func(&m, "main", inputs.clone(), &opts)
            .unwrap_or_else(|e| panic!("{name}: {e}"))
            .outputs;
        let mut plan = Plan::compile(&m, "main").unwrap();
        assert!(
            !plan.summary().contains("whole function"),
            "{name}: {}",
            plan.summary()
        );
        for run in 0..2 {
            let got = plan
                .run(inputs.clone())
                .unwrap_or_else(|e| panic!("{name}: {e}"));
            assert_eq!(got, want, "{name}, run {run}");
        }
    }
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

/// The flax GRU classifier's adam train step as JAX exports it
/// (scripts/jax_corpus.py `gru_scan_adam`: `nn.scan` over a `GRUCell`, two
/// `while` loops whose bodies call `@closed_call`, scatter-add of the
/// stacked gradients), on inputs defined by formula: float leaf k, element
/// j is 0.5·sin(0.37·j + 1.3·k) + 0.5 (adam's second moments must not be
/// negative); adam's count 0, labels (0, 1, 2).
fn gru_inputs(m: &ir::Module) -> Vec<Value<f32>> {
    let main = m.func("main").unwrap();
    main.params
        .iter()
        .enumerate()
        .map(|(k, p)| {
            let shape: Vec<usize> = p.ty.shape.iter().map(|&d| d as usize).collect();
            let n: usize = shape.iter().product();
            if p.ty.elem.is_float() {
                let d =
                    (0..n).map(|j| (0.5 * (0.37 * j as f64 + 1.3 * k as f64).sin() + 0.5) as f32);
                f(&shape, d.collect())
            } else {
                i(&shape, (0..n as i64).map(|j| j % 4).collect(), p.ty.elem)
            }
        })
        .collect()
}

fn rel_err(a: &[f32], b: &[f32]) -> f64 {
    let d: f64 = a
        .iter()
        .zip(b)
        .map(|(x, y)| (*x as f64 - *y as f64).powi(2))
        .sum();
    let n: f64 = b.iter().map(|y| (*y as f64).powi(2)).sum();
    (d / n.max(1e-300)).sqrt()
}

#[test]
fn flax_gru_scan_train_step_matches_jax_and_the_evaluator() {
    let path = format!(
        "{}/tests/exec_suite/data/gru_scan_adam.mlir",
        env!("CARGO_MANIFEST_DIR")
    );
    let m = module(&std::fs::read_to_string(path).unwrap());
    let inputs = gru_inputs(&m);
    let mut plan = Plan::compile(&m, "main").unwrap();
    assert_planned(&plan, 2);
    let got = plan.run(inputs.clone()).unwrap();
    assert_eq!(got.len(), 39);
    // JAX 0.10.2 / flax 0.12.8 / optax 0.2.8 on the CPU, same inputs: the
    // loss, the accuracy, adam's count and the first updated parameter.
    let loss = floats(&got[37])[0];
    assert!((loss - 1.443_162).abs() <= 1e-5 * 1.45, "loss {loss}");
    assert_eq!(floats(&got[38]), vec![0.0]);
    assert_eq!(got[12], i(&[], vec![1], ElemType::I32));
    let p0 = [0.499_936_82f32, 0.680_838_5, 0.837_073_1, 0.947_370_35];
    assert!(
        rel_err(&floats(&got[0]), &p0) <= 1e-4,
        "{:?}",
        floats(&got[0])
    );
    // Every output against the generic evaluator (fast kernels).
    let want = eval_func(&m, "main", inputs.clone(), &EvalOptions::default())
        .unwrap()
        .outputs;
    for (k, (a, b)) in got.iter().zip(&want).enumerate() {
        match (a.as_float(), b.as_float()) {
            (Some(x), Some(y)) => {
                let e = rel_err(&x.data, &y.data);
                assert!(e <= 1e-5, "output {k}: norm-wise {e:.1e}");
            }
            _ => assert_eq!(a, b, "output {k}"),
        }
    }
    // A second run (pooled buffers, sub-plans reused) gives the same values.
    assert_eq!(plan.run(inputs).unwrap(), got);
}

/// Negative control for the agreements above: in JAX's scan sample, a fused
/// loop of the loop body perturbed by 1e-2 makes the plan disagree with the
/// evaluator far beyond the 1e-5 they are held to.
#[test]
fn a_perturbed_loop_body_is_caught() {
    let m = structured("scan");
    let x: Vec<f32> = (0..12).map(|k| k as f32 * 0.25 - 1.0).collect();
    let want = eval_func(
        &m,
        "main",
        vec![f(&[4, 3], x.clone())],
        &EvalOptions::default(),
    )
    .unwrap()
    .outputs;
    let mut plan = Plan::compile(&m, "main").unwrap();
    assert_eq!(plan.run(vec![f(&[4, 3], x.clone())]).unwrap(), want);
    assert!(plan.perturb_first_fused_loop_in_a_region_for_tests(1e-2));
    let got = plan.run(vec![f(&[4, 3], x)]).unwrap();
    let worst = got
        .iter()
        .zip(&want)
        .map(|(a, b)| rel_err(&floats(a), &floats(b)))
        .fold(0.0f64, f64::max);
    assert!(worst > 1e-3, "perturbation not visible: {worst:.1e}");
}
