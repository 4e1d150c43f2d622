//! Fast `stablehlo.dot_general` (f32/f64): each operand is viewed as a batched matrix
//! (`lhs [B, M, K]`, `rhs [B, K, N]`) through strides when its dimension groups
//! allow it (transposed weights need no copy), otherwise through a permuted copy;
//! each batch is one GEMM into the `[batch…, lhs free…, rhs free…]` result.

use super::float::FastFloat;
use super::gemm::{matmul, MatRef};
use super::layout::{dim_index, merged_axis, permute};
use crate::tensor::Tensor;
use std::borrow::Cow;

/// A tensor viewed as `[batch, rows, cols]` with one stride per axis.
struct BatchedView<'a, T: Clone> {
    data: Cow<'a, [T]>,
    batch_stride: usize,
    row_stride: usize,
    col_stride: usize,
}

/// Views `t` with dimension groups `batch`, `rows`, `cols` as a batched matrix,
/// copying into that order only when some group is not one strided axis.
fn batched_view<'a, T: FastFloat>(
    t: &'a Tensor<T>,
    batch: &[usize],
    rows: &[usize],
    cols: &[usize],
) -> BatchedView<'a, T> {
    let strides = t.strides();
    if let (Some(b), Some(r), Some(c)) = (
        merged_axis(&t.shape, &strides, batch),
        merged_axis(&t.shape, &strides, rows),
        merged_axis(&t.shape, &strides, cols),
    ) {
        return BatchedView {
            data: Cow::Borrowed(&t.data),
            batch_stride: b.1,
            row_stride: r.1,
            col_stride: c.1,
        };
    }
    let perm: Vec<usize> = batch.iter().chain(rows).chain(cols).copied().collect();
    let n_rows: usize = rows.iter().map(|&d| t.shape[d]).product();
    let n_cols: usize = cols.iter().map(|&d| t.shape[d]).product();
    BatchedView {
        data: permute(&t.data, &t.shape, &perm),
        batch_stride: n_rows * n_cols,
        row_stride: n_cols,
        col_stride: 1,
    }
}

pub(crate) fn dot_general<T: FastFloat>(
    lhs: &Tensor<T>,
    rhs: &Tensor<T>,
    dims: &ir::DotDims,
    out_shape: &[usize],
) -> Tensor<T> {
    let idx =
        |v: &[i64]| -> Vec<usize> { v.iter().map(|&d| dim_index(d, "dot dimension")).collect() };
    let (lb, rb) = (idx(&dims.lhs_batch), idx(&dims.rhs_batch));
    let (lc, rc) = (idx(&dims.lhs_contracting), idx(&dims.rhs_contracting));
    assert_eq!(lb.len(), rb.len(), "dot_general batch dimension counts");
    assert_eq!(
        lc.len(),
        rc.len(),
        "dot_general contracting dimension counts"
    );
    let free = |rank: usize, b: &[usize], c: &[usize]| -> Vec<usize> {
        (0..rank)
            .filter(|d| !b.contains(d) && !c.contains(d))
            .collect()
    };
    let lf = free(lhs.rank(), &lb, &lc);
    let rf = free(rhs.rank(), &rb, &rc);
    let size = |t: &Tensor<T>, ds: &[usize]| -> usize { ds.iter().map(|&d| t.shape[d]).product() };
    let (nb, m, k, n) = (
        size(lhs, &lb),
        size(lhs, &lf),
        size(lhs, &lc),
        size(rhs, &rf),
    );
    assert_eq!(nb, size(rhs, &rb), "dot_general batch sizes");
    assert_eq!(k, size(rhs, &rc), "dot_general contracting sizes");
    let expected: Vec<usize> = lb
        .iter()
        .chain(&lf)
        .map(|&d| lhs.shape[d])
        .chain(rf.iter().map(|&d| rhs.shape[d]))
        .collect();
    assert_eq!(out_shape, &expected[..], "dot_general result shape");

    let mut out = vec![T::ZERO; nb * m * n];
    if out.is_empty() || k == 0 {
        // An empty contraction sums nothing: every element is zero.
        return Tensor::new(out_shape.to_vec(), out);
    }
    let a = batched_view(lhs, &lb, &lf, &lc);
    let b = batched_view(rhs, &rb, &rc, &rf);
    for i in 0..nb {
        let a_mat = MatRef {
            data: &a.data[i * a.batch_stride..],
            rows: m,
            cols: k,
            row_stride: a.row_stride,
            col_stride: a.col_stride,
        };
        let b_mat = MatRef {
            data: &b.data[i * b.batch_stride..],
            rows: k,
            cols: n,
            row_stride: b.row_stride,
            col_stride: b.col_stride,
        };
        matmul(a_mat, b_mat, &mut out[i * m * n..(i + 1) * m * n], n);
    }
    Tensor::new(out_shape.to_vec(), out)
}
