//! dot_general on the plan's kernel path against the generic evaluator
//! (`eval_func`, fast: false — plain loops, an independent implementation):
//! batched products with transposed operands read in place (attention's
//! split heads `[N,T,H,d] → [N,H,T,d]`, a transposed weight), contracting
//! and batch dimensions in various positions, a transpose that reorders the
//! free dimensions (which must not move into the dimension numbers), and
//! batches large enough for the batch-parallel GEMM path. Each agrees within
//! 1e-5 norm-wise and 1e-4 element-wise (relative, floor 1e-3·max|b|).
//! Negative control: a dropped head transpose is refuted by the same check.

use den::{eval_func, EvalOptions, Tensor, Value};
use exec::Plan;

fn uniform(seed: u64) -> impl FnMut() -> f32 {
    let mut s = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    move || {
        s ^= s >> 12;
        s ^= s << 25;
        s ^= s >> 27;
        ((s.wrapping_mul(0x2545_F491_4F6C_DD1D) >> 40) as f32) / (1u64 << 24) as f32 * 2.0 - 1.0
    }
}

pub(crate) fn inputs(m: &ir::Module, seed: u64) -> Vec<Value<f32>> {
    let mut next = uniform(seed);
    m.func("main")
        .expect("@main")
        .params
        .iter()
        .map(|p| {
            let shape: Vec<usize> = p.ty.shape.iter().map(|&d| d as usize).collect();
            let n = shape.iter().product();
            Value::Float(
                Tensor::new(shape, (0..n).map(|_| next()).collect()),
                p.ty.elem,
            )
        })
        .collect()
}

/// Why the plan's outputs differ from the generic evaluator's, if they do.
pub(crate) fn disagreement(a: &[Value<f32>], b: &[Value<f32>]) -> Option<String> {
    for (k, (x, y)) in a.iter().zip(b).enumerate() {
        let (x, y) = (x.as_float().unwrap(), y.as_float().unwrap());
        if x.shape != y.shape {
            return Some(format!("output {k}: shape {:?} vs {:?}", x.shape, y.shape));
        }
        let max = y.data.iter().fold(0f64, |m, &v| m.max((v as f64).abs()));
        let (mut d2, mut n2) = (0f64, 0f64);
        for (i, (&p, &q)) in x.data.iter().zip(&y.data).enumerate() {
            let d = (p as f64 - q as f64).abs();
            if d > 1e-4 * (q as f64).abs().max(1e-3 * max) {
                return Some(format!("output {k} element {i}: {p} vs {q}"));
            }
            d2 += d * d;
            n2 += (q as f64) * (q as f64);
        }
        if d2.sqrt() > 1e-5 * n2.sqrt() {
            return Some(format!(
                "output {k}: norm-wise {:.3e}",
                d2.sqrt() / n2.sqrt()
            ));
        }
    }
    None
}

/// (plan listing, plan outputs, generic evaluator outputs) of `src`'s @main.
pub(crate) fn run(src: &str, seed: u64) -> (Vec<String>, Vec<Value<f32>>, Vec<Value<f32>>) {
    let m = ir::parse::parse_module(src, "dot.mlir").expect("parse");
    let x = inputs(&m, seed);
    let mut plan = Plan::compile(&m, "main").expect("compile");
    let got = plan.run(x.clone()).expect("plan run");
    let opts = EvalOptions {
        fast: false,
        record_margins: false,
        replicas: 1,
    };
    let want = eval_func(&m, "main", x, &opts).expect("eval").outputs;
    (plan.listing(), got, want)
}

/// Attention scores `Q_h·K_hᵀ` from `[N,T,H,d]` queries and keys: both
/// operands split into heads by a transpose, contracting d.
fn scores(n: usize, t: usize, h: usize, d: usize, perm: &str) -> String {
    format!(
        r#"module {{
  func.func public @main(%q: tensor<{n}x{t}x{h}x{d}xf32>, %k: tensor<{n}x{t}x{h}x{d}xf32>) -> tensor<{n}x{h}x{t}x{t}xf32> {{
    %qh = stablehlo.transpose %q, dims = {perm} : (tensor<{n}x{t}x{h}x{d}xf32>) -> tensor<{n}x{h}x{t}x{d}xf32>
    %kh = stablehlo.transpose %k, dims = [0, 2, 1, 3] : (tensor<{n}x{t}x{h}x{d}xf32>) -> tensor<{n}x{h}x{t}x{d}xf32>
    %s = stablehlo.dot_general %qh, %kh, batching_dims = [0, 1] x [0, 1], contracting_dims = [3] x [3] : (tensor<{n}x{h}x{t}x{d}xf32>, tensor<{n}x{h}x{t}x{d}xf32>) -> tensor<{n}x{h}x{t}x{t}xf32>
    return %s : tensor<{n}x{h}x{t}x{t}xf32>
  }}
}}
"#
    )
}

#[test]
fn attention_scores_read_split_heads_in_place() {
    // 16 batches of 16×16×16: the batch-parallel path.
    let (listing, got, want) = run(&scores(4, 16, 4, 16, "[0, 2, 1, 3]"), 1);
    assert_eq!(disagreement(&got, &want), None);
    let copies = listing.iter().filter(|l| l.contains("fused(")).count();
    assert_eq!(
        copies,
        0,
        "a head transpose was copied:\n{}",
        listing.join("\n")
    );
}

#[test]
fn a_dropped_head_transpose_is_refuted() {
    // T = H, so reading Q without its transpose keeps every shape.
    let src = scores(2, 5, 5, 3, "[0, 2, 1, 3]");
    let (_, got, want) = run(&src, 2);
    assert_eq!(disagreement(&got, &want), None);
    let wrong = scores(2, 5, 5, 3, "[0, 1, 2, 3]");
    let (_, bad, _) = run(&wrong, 2);
    assert!(
        disagreement(&bad, &want).is_some(),
        "the check does not see a dropped transpose"
    );
}

#[test]
fn attention_core_products_agree_in_every_contracting_position() {
    // P·V (contract lhs 3 with rhs 2), Pᵀ·dO (2 with 2), dS·K (3 with 2) and a
    // transposed-weight dense (x·Wᵀ) — V, dO and K read through head transposes.
    let src = r#"module {
  func.func public @main(%p: tensor<3x2x7x7xf32>, %v: tensor<3x7x2x4xf32>, %w: tensor<5x4xf32>, %x: tensor<21x4xf32>) -> (tensor<3x2x7x4xf32>, tensor<3x2x7x4xf32>, tensor<21x5xf32>) {
    %vh = stablehlo.transpose %v, dims = [0, 2, 1, 3] : (tensor<3x7x2x4xf32>) -> tensor<3x2x7x4xf32>
    %o = stablehlo.dot_general %p, %vh, batching_dims = [0, 1] x [0, 1], contracting_dims = [3] x [2] : (tensor<3x2x7x7xf32>, tensor<3x2x7x4xf32>) -> tensor<3x2x7x4xf32>
    %g = stablehlo.dot_general %p, %vh, batching_dims = [0, 1] x [0, 1], contracting_dims = [2] x [2] : (tensor<3x2x7x7xf32>, tensor<3x2x7x4xf32>) -> tensor<3x2x7x4xf32>
    %wt = stablehlo.transpose %w, dims = [1, 0] : (tensor<5x4xf32>) -> tensor<4x5xf32>
    %y = stablehlo.dot_general %x, %wt, contracting_dims = [1] x [0] : (tensor<21x4xf32>, tensor<4x5xf32>) -> tensor<21x5xf32>
    return %o, %g, %y : tensor<3x2x7x4xf32>, tensor<3x2x7x4xf32>, tensor<21x5xf32>
  }
}
"#;
    let (listing, got, want) = run(src, 3);
    assert_eq!(disagreement(&got, &want), None);
    let copies = listing.iter().filter(|l| l.contains("fused(")).count();
    assert_eq!(copies, 0, "a transpose was copied:\n{}", listing.join("\n"));
}

#[test]
fn batch_dims_in_the_middle_and_reordered_free_dims_agree() {
    // Batch dimension 1 of the lhs and 2 of the rhs; the rhs is a transpose
    // that swaps its two free dimensions (it cannot be read in place, the
    // result keeps them in operand order), and a product whose batch axis is last in the rhs and whose lhs contracts its first axis.
    let src = r#"module {
  func.func public @main(%a: tensor<4x6x5xf32>, %b: tensor<3x2x6x5xf32>, %c: tensor<5x4x6xf32>) -> (tensor<6x4x2x3xf32>, tensor<6x5x5xf32>) {
    %bt = stablehlo.transpose %b, dims = [1, 0, 2, 3] : (tensor<3x2x6x5xf32>) -> tensor<2x3x6x5xf32>
    %r = stablehlo.dot_general %a, %bt, batching_dims = [1] x [2], contracting_dims = [2] x [3] : (tensor<4x6x5xf32>, tensor<2x3x6x5xf32>) -> tensor<6x4x2x3xf32>
    %s = stablehlo.dot_general %a, %c, batching_dims = [1] x [2], contracting_dims = [0] x [1] : (tensor<4x6x5xf32>, tensor<5x4x6xf32>) -> tensor<6x5x5xf32>
    return %r, %s : tensor<6x4x2x3xf32>, tensor<6x5x5xf32>
  }
}
"#;
    let (_, got, want) = run(src, 4);
    assert_eq!(disagreement(&got, &want), None);
}
