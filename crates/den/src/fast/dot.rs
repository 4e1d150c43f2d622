//! Fast `stablehlo.dot_general` (f32/f64): each operand is viewed as a batched matrix
//! (`lhs [batch…, M, K]`, `rhs [batch…, K, N]`) through strides — the batch
//! dimensions each keep their own stride, so an operand whose batch dimensions
//! are interleaved with its matrix ones (attention's `[B, T, H, D]` read as
//! `[B, H, T, D]`) needs no copy; the row and column groups must each be one
//! strided axis, else the operand is copied into `[batch…, rows…, cols…]`.
//! Each batch is one GEMM into the `[batch…, lhs free…, rhs free…]` result;
//! batches of small GEMMs, or of at least two GEMMs per thread, run in
//! parallel (one GEMM per thread), others one after the other on the GEMM's
//! own threads.

use super::float::FastFloat;
use super::gemm::{matmul, matmul_bias, MatRef};
use super::layout::{dim_index, merged_axis, permute};
use crate::tensor::Tensor;
use rayon::prelude::*;
use std::borrow::Cow;

/// Below this `m·k + k·n` the GEMM runs on one thread (matrixmultiply's own
/// threading heuristic starts at 2¹⁵), so a batch of them is split over threads.
const SMALL_GEMM: usize = 1 << 15;

/// Least batched work (multiply-adds) worth splitting over threads.
const PAR_MIN_MACS: usize = 1 << 16;

/// A tensor viewed as `[batch…, rows, cols]`: one `(size, stride)` per batch
/// dimension, one stride per matrix axis.
struct BatchedView<'a, T: Clone> {
    data: Cow<'a, [T]>,
    batch: Vec<(usize, usize)>,
    row_stride: usize,
    col_stride: usize,
}

impl<T: Clone> BatchedView<'_, T> {
    /// Offset of batch number `i` (row-major over the batch dimensions).
    fn batch_offset(&self, mut i: usize) -> usize {
        let mut off = 0;
        for &(n, s) in self.batch.iter().rev() {
            off += (i % n) * s;
            i /= n;
        }
        off
    }
}

/// Views `t` with dimension groups `batch`, `rows`, `cols` as a batched matrix,
/// copying into that order only when `rows` or `cols` is not one strided axis.
fn batched_view<'a, T: FastFloat>(
    t: &'a Tensor<T>,
    batch: &[usize],
    rows: &[usize],
    cols: &[usize],
) -> BatchedView<'a, T> {
    let strides = t.strides();
    if let (Some(r), Some(c)) = (
        merged_axis(&t.shape, &strides, rows),
        merged_axis(&t.shape, &strides, cols),
    ) {
        return BatchedView {
            data: Cow::Borrowed(&t.data),
            batch: batch
                .iter()
                .filter(|&&d| t.shape[d] != 1)
                .map(|&d| (t.shape[d], strides[d]))
                .collect(),
            row_stride: r.1,
            col_stride: c.1,
        };
    }
    let perm: Vec<usize> = batch.iter().chain(rows).chain(cols).copied().collect();
    let n_rows: usize = rows.iter().map(|&d| t.shape[d]).product();
    let n_cols: usize = cols.iter().map(|&d| t.shape[d]).product();
    let n_batch: usize = batch.iter().map(|&d| t.shape[d]).product();
    BatchedView {
        data: permute(&t.data, &t.shape, &perm),
        batch: vec![(n_batch, n_rows * n_cols)],
        row_stride: n_cols,
        col_stride: 1,
    }
}

/// `dot_general` into `buffer` (any contents; its length must be the
/// result's): every element is overwritten, the GEMMs writing with β = 0, so a
/// reused buffer costs no zeroing and no fresh pages. With `bias` (one value
/// per element of the result's last axis, which must be an rhs free axis) the
/// result is `dot + bias` broadcast along that axis, each GEMM adding it in
/// its epilogue (see [`matmul_bias`]).
pub(crate) fn dot_general<T: FastFloat>(
    lhs: &Tensor<T>,
    rhs: &Tensor<T>,
    dims: &ir::DotDims,
    out_shape: &[usize],
    buffer: Option<Vec<T>>,
    bias: Option<&[T]>,
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
    assert!(
        lb.iter()
            .zip(&rb)
            .all(|(&l, &r)| lhs.shape[l] == rhs.shape[r]),
        "dot_general batch sizes"
    );
    assert_eq!(k, size(rhs, &rc), "dot_general contracting sizes");
    let expected: Vec<usize> = lb
        .iter()
        .chain(&lf)
        .map(|&d| lhs.shape[d])
        .chain(rf.iter().map(|&d| rhs.shape[d]))
        .collect();
    assert_eq!(out_shape, &expected[..], "dot_general result shape");

    let mut out = match buffer {
        Some(b) => {
            assert_eq!(b.len(), nb * m * n, "dot_general output buffer length");
            b
        }
        None => vec![T::ZERO; nb * m * n],
    };
    // The bias along one GEMM row: the rhs free axes, the last one innermost.
    let bias_row: Option<Vec<T>> = bias.map(|b| {
        assert!(!rf.is_empty(), "dot_general bias needs an rhs free axis");
        assert_eq!(Some(&b.len()), out_shape.last(), "dot_general bias length");
        b.iter().copied().cycle().take(n).collect()
    });
    if out.is_empty() || k == 0 {
        // An empty contraction sums nothing: every element is zero (`0 + b`
        // with a bias, rounded as the add rounds it).
        match &bias_row {
            Some(row) => out
                .chunks_mut(n.max(1))
                .for_each(|c| c.iter_mut().zip(row).for_each(|(x, &b)| *x = T::ZERO + b)),
            None => out.fill(T::ZERO),
        }
        return Tensor::new(out_shape.to_vec(), out);
    }
    let a = batched_view(lhs, &lb, &lf, &lc);
    let b = batched_view(rhs, &rb, &rc, &rf);
    let one = |i: usize, c: &mut [T]| {
        let a_mat = MatRef {
            data: &a.data[a.batch_offset(i)..],
            rows: m,
            cols: k,
            row_stride: a.row_stride,
            col_stride: a.col_stride,
        };
        let b_mat = MatRef {
            data: &b.data[b.batch_offset(i)..],
            rows: k,
            cols: n,
            row_stride: b.row_stride,
            col_stride: b.col_stride,
        };
        match &bias_row {
            Some(row) => matmul_bias(a_mat, b_mat, c, n, row),
            None => matmul(a_mat, b_mat, c, n),
        }
    };
    // Whole GEMMs per thread also when each is large but there are at least
    // two per thread: attention's 24 (197×197)·(197×64) products split row-wise
    // one after the other ran at 57 GFLOP/s, the (197×64)·(64×197) ones on
    // this path at 132 (a split GEMM inside still splits; rayon balances).
    let many = nb >= 2 * rayon::current_num_threads();
    if nb > 1 && (m * k + k * n < SMALL_GEMM || many) && nb * m * k * n >= PAR_MIN_MACS {
        out.par_chunks_mut(m * n)
            .enumerate()
            .for_each(|(i, c)| one(i, c));
    } else {
        out.chunks_mut(m * n)
            .enumerate()
            .for_each(|(i, c)| one(i, c));
    }
    Tensor::new(out_shape.to_vec(), out)
}

#[cfg(test)]
mod tests {
    use super::dot_general;
    use crate::tensor::Tensor;

    /// A reused output buffer holding stale values (NaN here) is fully
    /// overwritten: the result is the fresh-buffer one bit for bit and the
    /// naive triple loop's within f32 rounding — on the batched small-GEMM
    /// path (parallel over batches), the large one, and large GEMMs parallel
    /// over batches (five on two or more threads), attention-shaped.
    #[test]
    fn stale_output_buffer_is_overwritten() {
        for (nb, m, k, n) in [(6, 13, 8, 13), (2, 40, 300, 120), (5, 40, 300, 120)] {
            let fill = |len: usize, s: f32| -> Vec<f32> {
                (0..len).map(|i| (i as f32 * s).sin() * 0.5).collect()
            };
            let lhs = Tensor::new(vec![nb, m, k], fill(nb * m * k, 0.37));
            let rhs = Tensor::new(vec![nb, k, n], fill(nb * k * n, 0.91));
            let dims = ir::DotDims {
                lhs_batch: vec![0],
                rhs_batch: vec![0],
                lhs_contracting: vec![2],
                rhs_contracting: vec![1],
            };
            let shape = [nb, m, n];
            let fresh = dot_general(&lhs, &rhs, &dims, &shape, None, None);
            let reused = dot_general(
                &lhs,
                &rhs,
                &dims,
                &shape,
                Some(vec![f32::NAN; nb * m * n]),
                None,
            );
            assert!(fresh
                .data
                .iter()
                .zip(&reused.data)
                .all(|(a, b)| a.to_bits() == b.to_bits()));
            for b in 0..nb {
                // Each batch alone (one GEMM, split or not): the same bits.
                let one = |t: &Tensor<f32>, rows: usize, cols: usize| {
                    let len = rows * cols;
                    Tensor::new(vec![1, rows, cols], t.data[b * len..(b + 1) * len].to_vec())
                };
                let single = dot_general(
                    &one(&lhs, m, k),
                    &one(&rhs, k, n),
                    &dims,
                    &[1, m, n],
                    None,
                    None,
                );
                assert!(single
                    .data
                    .iter()
                    .zip(&reused.data[b * m * n..(b + 1) * m * n])
                    .all(|(a, b)| a.to_bits() == b.to_bits()));
                for i in 0..m {
                    for j in 0..n {
                        let want: f64 = (0..k)
                            .map(|p| {
                                lhs.data[(b * m + i) * k + p] as f64
                                    * rhs.data[(b * k + p) * n + j] as f64
                            })
                            .sum();
                        let got = reused.data[(b * m + i) * n + j] as f64;
                        assert!(
                            (got - want).abs() <= 1e-5 * (1.0 + want.abs()),
                            "{got} vs {want}"
                        );
                    }
                }
            }
        }
    }
}

#[cfg(test)]
mod bias_tests {
    use super::dot_general;
    use crate::tensor::Tensor;

    /// The biased dot is the dot followed by a separate broadcast add, bit
    /// for bit: on the batched small-GEMM path, the row-split large one, with
    /// two rhs free axes (the bias along the inner one) and with an empty
    /// contraction (`0 + -0` is `+0`).
    #[test]
    fn biased_dot_is_dot_then_add_bit_for_bit() {
        let fill = |len: usize, s: f32| -> Vec<f32> {
            (0..len).map(|i| (i as f32 * s).sin() * 0.5).collect()
        };
        // (batch, m, k, rhs free dims)
        let cases: [(usize, usize, usize, &[usize]); 4] = [
            (6, 13, 8, &[13]),
            (1, 300, 200, &[150]),
            (2, 70, 150, &[5, 24]),
            (1, 4, 0, &[3]),
        ];
        for (nb, m, k, rf) in cases {
            let n: usize = rf.iter().product();
            let lhs = Tensor::new(vec![nb, m, k], fill(nb * m * k, 0.37));
            let rhs_shape: Vec<usize> = [nb, k].iter().chain(rf).copied().collect();
            let rhs = Tensor::new(rhs_shape, fill(nb * k * n, 0.91));
            let dims = ir::DotDims {
                lhs_batch: vec![0],
                rhs_batch: vec![0],
                lhs_contracting: vec![2],
                rhs_contracting: vec![1],
            };
            let shape: Vec<usize> = [nb, m].iter().chain(rf).copied().collect();
            let last = *rf.last().unwrap();
            let mut bias = fill(last, 1.3);
            bias[0] = -0.0;
            let plain = dot_general(&lhs, &rhs, &dims, &shape, None, None);
            let biased = dot_general(
                &lhs,
                &rhs,
                &dims,
                &shape,
                Some(vec![f32::NAN; nb * m * n]),
                Some(&bias),
            );
            for (i, (p, b)) in plain.data.iter().zip(&biased.data).enumerate() {
                let want = p + bias[i % last];
                assert_eq!(
                    want.to_bits(),
                    b.to_bits(),
                    "case {nb}x{m}x{k}x{rf:?} at {i}"
                );
            }
        }
    }
}
