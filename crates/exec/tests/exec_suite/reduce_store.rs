//! A costly value that a reduction sums and later ops read too (softmax's
//! `exp`) is stored by the reduction's own pass, not computed again by each
//! reader: the plan lists the store, runs one pass fewer, and agrees with the
//! generic evaluator on the row sums, the softmax and the stored value itself
//! (returned as an output), whether the reduction stands alone or is merged
//! with a sibling. A fault in that pass (its value shifted by 1e-3 before it
//! is stored and summed) gives outputs of the same shapes that the
//! comparison rejects.
//!
//! Likewise a loop's result that a kernel reads and a later reduction sums
//! (batch norm's `dx`: the input-VJP convolution's operand and the previous
//! convolution's bias gradient) is summed by the loop that writes it.

use super::agreement::{first_disagreement, generic, random_inputs, REL, REL_ELEM};
use den::eval_func;
use exec::Plan;
use ir::{Module, TensorType};

const SOFTMAX: &str = "func.func public @main(%z: tensor<6x5x7xf32>) -> (tensor<6x5x7xf32>, tensor<6x5xf32>, tensor<6x5xf32>, tensor<6x5x7xf32>) {
  %c = stablehlo.constant dense<1.250000e-01> : tensor<6x5x7xf32>
  %s = stablehlo.multiply %z, %c : tensor<6x5x7xf32>
  %e = stablehlo.exponential %s : tensor<6x5x7xf32>
  %zero = stablehlo.constant dense<0.000000e+00> : tensor<f32>
  %zz = stablehlo.multiply %z, %z : tensor<6x5x7xf32>
  %sq = stablehlo.reduce(%zz init: %zero) applies stablehlo.add across dimensions = [2] : (tensor<6x5x7xf32>, tensor<f32>) -> tensor<6x5xf32>
  %sum = stablehlo.reduce(%e init: %zero) applies stablehlo.add across dimensions = [2] : (tensor<6x5x7xf32>, tensor<f32>) -> tensor<6x5xf32>
  %b = stablehlo.broadcast_in_dim %sum, dims = [0, 1] : (tensor<6x5xf32>) -> tensor<6x5x7xf32>
  %p = stablehlo.divide %e, %b : tensor<6x5x7xf32>
  return %p, %sum, %sq, %e : tensor<6x5x7xf32>, tensor<6x5xf32>, tensor<6x5xf32>, tensor<6x5x7xf32>
}
";

fn module() -> Module {
    let m = ir::parse::parse_module(SOFTMAX, "softmax.mlir").unwrap();
    ir::verify_module(&m).unwrap();
    m
}

fn inputs(m: &Module, seed: u64) -> Vec<den::Value<f32>> {
    let params: Vec<TensorType> = m.funcs[0].params.iter().map(|p| p.ty.clone()).collect();
    random_inputs(&params, seed)
}

/// The plan's disagreement with the generic evaluator, if any: `exp` is the
/// libm value's rounding in both but for an ulp now and then, so 1e-6
/// element-wise and norm-wise.
fn check(plan: &mut Plan, m: &Module, seed: u64) -> Option<String> {
    check_within(plan, m, seed, (1e-6, 1e-6))
}

fn check_within(plan: &mut Plan, m: &Module, seed: u64, bounds: (f64, f64)) -> Option<String> {
    let got = plan.run(inputs(m, seed)).unwrap();
    let want = eval_func::<f32>(m, "main", inputs(m, seed), &generic())
        .unwrap()
        .outputs;
    first_disagreement(&got, &want, bounds)
}

#[test]
fn a_summed_exp_read_again_is_stored_by_the_reduction() {
    let m = module();
    let mut plan = Plan::compile(&m, "main").unwrap();
    let listing = plan.listing();
    let reduces: Vec<&String> = listing.iter().filter(|l| l.contains("reduce")).collect();
    // Both sums (Σe and the sibling Σz²) share one pass, which stores e.
    assert_eq!(reduces.len(), 1, "{listing:#?}");
    assert!(reduces[0].contains("stores"), "{listing:#?}");
    let exps = listing.iter().filter(|l| l.contains("Exponential")).count();
    assert_eq!(exps, 1, "exp computed in more than one step:\n{listing:#?}");
    for seed in 1..4 {
        assert_eq!(check(&mut plan, &m, seed), None, "seed {seed}");
    }
}

#[test]
fn a_fault_in_the_storing_pass_is_caught() {
    let m = module();
    let mut plan = Plan::compile(&m, "main").unwrap();
    assert_eq!(check(&mut plan, &m, 1), None);
    assert!(plan.perturb_first_fused_reduction_for_tests(1e-3));
    let caught = check(&mut plan, &m, 1);
    assert!(caught.is_some(), "the perturbed storing pass passed");
}

/// `d = a·b − c` read by a convolution, then summed per feature.
const SUMMED_AFTER_A_KERNEL: &str = "func.func public @main(%a: tensor<4x6x10x10xf32>, %b: tensor<4x6x10x10xf32>, %c: tensor<4x6x10x10xf32>, %w: tensor<5x6x3x3xf32>) -> (tensor<4x5x10x10xf32>, tensor<6xf32>) {
  %ab = stablehlo.multiply %a, %b : tensor<4x6x10x10xf32>
  %d = stablehlo.subtract %ab, %c : tensor<4x6x10x10xf32>
  %y = stablehlo.convolution(%d, %w) dim_numbers = [b, f, 0, 1]x[o, i, 0, 1]->[b, f, 0, 1], window = {stride = [1, 1], pad = [[1, 1], [1, 1]], lhs_dilate = [1, 1], rhs_dilate = [1, 1]} {batch_group_count = 1 : i64, feature_group_count = 1 : i64} : (tensor<4x6x10x10xf32>, tensor<5x6x3x3xf32>) -> tensor<4x5x10x10xf32>
  %zero = stablehlo.constant dense<0.000000e+00> : tensor<f32>
  %s = stablehlo.reduce(%d init: %zero) applies stablehlo.add across dimensions = [0, 2, 3] : (tensor<4x6x10x10xf32>, tensor<f32>) -> tensor<6xf32>
  return %y, %s : tensor<4x5x10x10xf32>, tensor<6xf32>
}
";

fn summed_after_a_kernel() -> (Module, Plan) {
    let m = ir::parse::parse_module(SUMMED_AFTER_A_KERNEL, "summed.mlir").unwrap();
    ir::verify_module(&m).unwrap();
    let plan = Plan::compile(&m, "main").unwrap();
    (m, plan)
}

#[test]
fn a_loop_result_summed_after_a_kernel_is_summed_by_the_loop() {
    let (m, mut plan) = summed_after_a_kernel();
    let listing = plan.listing();
    // One pass writes d (for the convolution) and sums it.
    let passes: Vec<&String> = listing.iter().filter(|l| l.contains("len 2400 ")).collect();
    assert_eq!(passes.len(), 1, "{listing:#?}");
    assert!(passes[0].contains("stores"), "{listing:#?}");
    // The convolution sums in its own order: the suite's usual bounds.
    for seed in 1..4 {
        let e = check_within(&mut plan, &m, seed, (REL, REL_ELEM));
        assert_eq!(e, None, "seed {seed}");
    }
}

#[test]
fn a_fault_in_the_loop_that_sums_its_result_is_caught() {
    let (m, mut plan) = summed_after_a_kernel();
    assert_eq!(check_within(&mut plan, &m, 1, (REL, REL_ELEM)), None);
    assert!(plan.perturb_first_fused_reduction_for_tests(1e-3));
    let caught = check_within(&mut plan, &m, 1, (REL, REL_ELEM));
    assert!(caught.is_some(), "the perturbed pass passed");
}

/// `Σ c` per feature, and `Σ (e + c)` per feature: the second sum joins the
/// loop `d = e + c`, which stores `d` over `c` (its last reader), and the
/// first sum is merged beside it, reading `c` where it lies. Every read of a
/// chunk must come before the store overwrites it. The shape of a residual
/// block's backward: `dβ = Σ c` and the skip cotangent `c + (main path)`.
fn sum_beside_a_store_over_its_operand(n: usize, f: usize, hw: usize) -> String {
    let flat = f * hw * hw;
    format!(
        "func.func @main(%c: tensor<{n}x{flat}xf32>, %e: tensor<{n}x{flat}xf32>) -> (tensor<{f}xf32>, tensor<{f}xf32>) {{
  %r2 = stablehlo.reshape %c : (tensor<{n}x{flat}xf32>) -> tensor<{n}x{f}x{hw}x{hw}xf32>
  %z = stablehlo.constant dense<0.0> : tensor<f32>
  %sb = stablehlo.reduce(%r2 init: %z) applies stablehlo.add across dimensions = [0, 2, 3] : (tensor<{n}x{f}x{hw}x{hw}xf32>, tensor<f32>) -> tensor<{f}xf32>
  %d = stablehlo.add %e, %c : tensor<{n}x{flat}xf32>
  %r3 = stablehlo.reshape %d : (tensor<{n}x{flat}xf32>) -> tensor<{n}x{f}x{hw}x{hw}xf32>
  %sb2 = stablehlo.reduce(%r3 init: %z) applies stablehlo.add across dimensions = [0, 2, 3] : (tensor<{n}x{f}x{hw}x{hw}xf32>, tensor<f32>) -> tensor<{f}xf32>
  return %sb, %sb2 : tensor<{f}xf32>, tensor<{f}xf32>
}}
"
    )
}

#[test]
fn a_sum_beside_a_store_over_its_operand_reads_the_operand_first() {
    // One chunk; several chunks; enough positions for parallel blocks.
    for (n, f, hw) in [(2, 3, 2), (4, 6, 10), (8, 16, 32)] {
        let text = sum_beside_a_store_over_its_operand(n, f, hw);
        let m = ir::parse::parse_module(&text, "store_over.mlir").unwrap();
        ir::verify_module(&m).unwrap();
        let mut plan = Plan::compile(&m, "main").unwrap();
        let listing = plan.listing();
        // The pattern under test: one pass sums both and stores `d` over `c`.
        let pass: Vec<&String> = listing.iter().filter(|l| l.contains("reduce")).collect();
        assert_eq!(pass.len(), 1, "{listing:#?}");
        assert!(
            pass[0].contains("stores") && pass[0].contains("over input"),
            "{listing:#?}"
        );
        for seed in 1..3 {
            let e = check_within(&mut plan, &m, seed, (REL, REL_ELEM));
            assert_eq!(e, None, "{n}x{f}x{hw}x{hw}, seed {seed}");
        }
    }
}
