//! A dense layer's bias folded into its dot (`passes::fold_dot_bias`): the
//! plan's results agree with the generic evaluator (1e-5 norm-wise, see
//! `dot_layouts::disagreement`) and, the GEMM adding the bias in its
//! epilogue, equal bit for bit the plan that keeps the add a separate loop.
//! Negative control: a dot that forgets its folded bias is refuted.

use super::dot_layouts::{disagreement, run};
use exec::Plan;

/// Two biased dots: a dense `x·Wᵀ + b` (transposed weight, batch of tokens)
/// and a batched head product `q·kᵀ + c` (batch dims, bias on the last axis,
/// its producer scheduled before the dot); `b` is also read by another
/// output, so it must survive the fold. With `keep` the dots' own results are
/// returned too, so their adds stay separate loops.
fn biased(keep: bool) -> String {
    let (extra, extra_ty) = if keep {
        (", %y, %s", ", tensor<2x7x5xf32>, tensor<2x3x4x4xf32>")
    } else {
        ("", "")
    };
    format!(
        r#"module {{
  func.func public @main(%x: tensor<2x7x6xf32>, %w: tensor<5x6xf32>, %b: tensor<5xf32>, %q: tensor<2x3x4x8xf32>, %k: tensor<2x4x3x8xf32>, %c0: tensor<4xf32>) -> (tensor<2x7x5xf32>, tensor<2x3x4x4xf32>, tensor<5xf32>{extra_ty}) {{
    %wt = stablehlo.transpose %w, dims = [1, 0] : (tensor<5x6xf32>) -> tensor<6x5xf32>
    %y = stablehlo.dot_general %x, %wt, contracting_dims = [2] x [0] : (tensor<2x7x6xf32>, tensor<6x5xf32>) -> tensor<2x7x5xf32>
    %bb = stablehlo.broadcast_in_dim %b, dims = [2] : (tensor<5xf32>) -> tensor<2x7x5xf32>
    %z = stablehlo.add %y, %bb : tensor<2x7x5xf32>
    %c = stablehlo.multiply %c0, %c0 : tensor<4xf32>
    %kh = stablehlo.transpose %k, dims = [0, 2, 1, 3] : (tensor<2x4x3x8xf32>) -> tensor<2x3x4x8xf32>
    %s = stablehlo.dot_general %q, %kh, batching_dims = [0, 1] x [0, 1], contracting_dims = [3] x [3] : (tensor<2x3x4x8xf32>, tensor<2x3x4x8xf32>) -> tensor<2x3x4x4xf32>
    %cb = stablehlo.broadcast_in_dim %c, dims = [3] : (tensor<4xf32>) -> tensor<2x3x4x4xf32>
    %t = stablehlo.add %cb, %s : tensor<2x3x4x4xf32>
    %b2 = stablehlo.add %b, %b : tensor<5xf32>
    return %z, %t, %b2{extra} : tensor<2x7x5xf32>, tensor<2x3x4x4xf32>, tensor<5xf32>{extra_ty}
  }}
}}
"#
    )
}

/// Fused loops over a whole dot result (the bias adds left unfolded).
fn bias_loops(listing: &[String]) -> usize {
    listing
        .iter()
        .filter(|l| {
            l.contains("fused(elementwise)") && (l.contains("len 70 ") || l.contains("len 96 "))
        })
        .count()
}

#[test]
fn a_dense_bias_is_added_by_the_dot_bit_for_bit() {
    let (listing, got, want) = run(&biased(false), 21);
    assert_eq!(disagreement(&got, &want), None);
    assert_eq!(bias_loops(&listing), 0, "{}", listing.join("\n"));
    let (kept_listing, kept, _) = run(&biased(true), 21);
    assert_eq!(bias_loops(&kept_listing), 2, "{}", kept_listing.join("\n"));
    for k in 0..3 {
        let (a, b) = (got[k].as_float().unwrap(), kept[k].as_float().unwrap());
        assert!(
            a.data
                .iter()
                .zip(&b.data)
                .all(|(p, q)| p.to_bits() == q.to_bits()),
            "output {k}: the folded bias changes the sums"
        );
    }
}

#[test]
fn a_dot_that_forgets_its_folded_bias_is_refuted() {
    let src = biased(false);
    let (_, _, want) = run(&src, 22);
    let m = ir::parse::parse_module(&src, "dot.mlir").unwrap();
    let mut plan = Plan::compile(&m, "main").unwrap();
    assert!(plan.drop_first_dot_bias_for_tests());
    let x = super::dot_layouts::inputs(&m, 22);
    let bad = plan.run(x).unwrap();
    assert!(
        disagreement(&bad, &want).is_some(),
        "the check does not see a dropped bias"
    );
}
