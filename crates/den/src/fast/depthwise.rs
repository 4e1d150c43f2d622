//! Direct 2-D convolution for the grouped forms whose per-group reduction is
//! short: the depthwise forward and input-VJP (`feature_group_count` = input
//! features, one input feature per group, any channel multiplier) and the
//! depthwise weight-VJP (`batch_group_count` > 1 without feature groups, the
//! "kernel" being the output gradient). Each output plane is a sum over its
//! group's input planes of one plane-by-plane correlation, so no im2col
//! buffer is written and no 1-row GEMM is called per plane.
//!
//! Two loop orders, chosen by shape: when the kernel is small next to the
//! output (forward, input-VJP) every tap adds `w · input row` to an output row
//! (a contiguous multiply-add for unit stride; for larger strides the input
//! plane is first split into its column phases, so the reads are contiguous
//! too); when the kernel is large (weight-VJP: output 3×3, kernel = dy) every
//! output element is a sum of dot products along kernel rows.
//!
//! Each output element sums its terms in (input plane, kernel row, kernel
//! column) order from zero, as the generic evaluator does up to the dot
//! products' partial sums; the order is fixed by the shape, not by threads.

use rayon::prelude::*;

use super::float::FastFloat;
use super::layout::WindowTable;

/// One 2-D grouped convolution in the internal layout: input
/// `[batch][in_features][H][W]`, kernel `[out_features][group_in][KH][KW]`
/// (window reversal applied), result `[out_batch][out_features][OH][OW]`.
/// The two leading dimensions of each operand are read through strides
/// (an operand that swaps them, the weight-VJP's `xᵀ` and `dyᵀ`, is not copied).
pub(crate) struct DepthwiseConv {
    pub out_batch: usize,
    pub out_features: usize,
    pub batch_groups: usize,
    pub feature_groups: usize,
    /// Input features per feature group (the kernel's input-feature extent).
    pub group_in: usize,
    pub in_hw: [usize; 2],
    pub kernel_hw: [usize; 2],
    pub out_hw: [usize; 2],
    pub strides: [usize; 2],
    pub rhs_dilation: [usize; 2],
    pub pad_low: [i64; 2],
    /// Element strides of the input's batch and feature dimensions.
    pub lhs_strides: [usize; 2],
    /// Element strides of the kernel's output- and input-feature dimensions.
    pub rhs_strides: [usize; 2],
}

/// Per output position of one spatial dimension, per kernel offset: the
/// valid range of one dimension. `rows[k][o]` is the input index kernel
/// offset `k` reads at output `o`, or -1.
struct Axis {
    table: WindowTable,
}

impl Axis {
    fn new(input: usize, out: usize, kernel: usize, stride: usize, dil: usize, pad: i64) -> Self {
        Axis {
            table: WindowTable::new(input, out, kernel, stride as i64, dil as i64, 1, pad),
        }
    }
    /// Kernel offset `k`'s valid outputs `lo..hi` and the input index of `lo`
    /// (without lhs dilation the valid outputs of one offset are contiguous).
    fn tap_range(&self, k: usize) -> (usize, usize, usize) {
        let row = self.table.row(k);
        match row.iter().position(|&i| i >= 0) {
            None => (0, 0, 0),
            Some(lo) => {
                let hi = row.iter().rposition(|&i| i >= 0).map_or(lo, |h| h + 1);
                (lo, hi, row[lo] as usize)
            }
        }
    }
    /// Output `o`'s valid kernel offsets `lo..hi` and the input index of `lo`.
    fn window_range(&self, o: usize) -> (usize, usize, usize) {
        let at = |k: usize| self.table.index[k * self.table.out_len + o];
        match (0..self.table.window).find(|&k| at(k) >= 0) {
            None => (0, 0, 0),
            Some(lo) => {
                let hi = (lo..self.table.window)
                    .take_while(|&k| at(k) >= 0)
                    .last()
                    .map_or(lo, |k| k + 1);
                (lo, hi, at(lo) as usize)
            }
        }
    }
}

impl DepthwiseConv {
    fn out_plane(&self) -> usize {
        self.out_hw[0] * self.out_hw[1]
    }

    /// Writes the whole result (`out.len()` = out_batch · out_features · OH · OW).
    pub(crate) fn run<T: FastFloat>(&self, lhs: &[T], rhs: &[T], out: &mut [T]) {
        let p = self.out_plane();
        if p == 0 || out.is_empty() {
            return;
        }
        let [h, w] = self.in_hw;
        let [kh, kw] = self.kernel_hw;
        let [oh, ow] = self.out_hw;
        let rows = Axis::new(
            h,
            oh,
            kh,
            self.strides[0],
            self.rhs_dilation[0],
            self.pad_low[0],
        );
        let cols = Axis::new(
            w,
            ow,
            kw,
            self.strides[1],
            self.rhs_dilation[1],
            self.pad_low[1],
        );
        let per_batch_group = self.out_features / self.batch_groups;
        let per_feature_group = per_batch_group / self.feature_groups;
        let taps_order = kh * kw <= p;
        let (in_plane, k_plane) = (h * w, kh * kw);
        out.par_chunks_mut(p)
            .enumerate()
            .for_each_init(Vec::new, |scratch, (task, plane_out)| {
                let (b_out, o) = (task / self.out_features, task % self.out_features);
                let bg = o / per_batch_group;
                let g = (o % per_batch_group) / per_feature_group;
                let example = bg * self.out_batch + b_out;
                plane_out.fill(T::ZERO);
                for c in 0..self.group_in {
                    let x_at = example * self.lhs_strides[0]
                        + (g * self.group_in + c) * self.lhs_strides[1];
                    let k_at = o * self.rhs_strides[0] + c * self.rhs_strides[1];
                    let x = &lhs[x_at..x_at + in_plane];
                    let k = &rhs[k_at..k_at + k_plane];
                    if taps_order {
                        self.add_by_taps(&rows, &cols, x, k, scratch, plane_out);
                    } else {
                        self.add_by_dots(&rows, &cols, x, k, plane_out);
                    }
                }
            });
    }

    /// `out += x ⋆ k` tap by tap: for each kernel offset, a multiply-add of a
    /// (phase of an) input row into each output row it reaches.
    fn add_by_taps<T: FastFloat>(
        &self,
        rows: &Axis,
        cols: &Axis,
        x: &[T],
        k: &[T],
        scratch: &mut Vec<T>,
        out: &mut [T],
    ) {
        let [h, w] = self.in_hw;
        let [kh, kw] = self.kernel_hw;
        let ow = self.out_hw[1];
        let s = self.strides[1];
        // With column stride s, phase r of an input row holds columns r, r+s, …:
        // tap reads at input column i_lo + j·s become phase (i_lo mod s) from
        // i_lo / s, contiguous.
        let (src, pitch) = if s == 1 {
            (x, w)
        } else {
            let pitch = w.div_ceil(s);
            scratch.clear();
            scratch.resize(h * s * pitch, T::ZERO);
            for (r, row) in x.chunks_exact(w).enumerate() {
                for (c, &v) in row.iter().enumerate() {
                    scratch[(r * s + c % s) * pitch + c / s] = v;
                }
            }
            (&scratch[..], pitch)
        };
        let col_runs: Vec<(usize, usize, usize)> = (0..kw).map(|t| cols.tap_range(t)).collect();
        for (r_out, out_row) in out.chunks_exact_mut(ow).enumerate() {
            for a in 0..kh {
                let ih = rows.table.row(a)[r_out];
                if ih < 0 {
                    continue;
                }
                let ih = ih as usize;
                for (b, &(lo, hi, i_lo)) in col_runs.iter().enumerate() {
                    if lo == hi {
                        continue;
                    }
                    let wt = k[a * kw + b];
                    let from = (ih * s + i_lo % s) * pitch + i_lo / s;
                    let input = &src[from..from + (hi - lo)];
                    for (o, &v) in out_row[lo..hi].iter_mut().zip(input) {
                        *o += wt * v;
                    }
                }
            }
        }
    }

    /// `out += x ⋆ k` output by output: each a sum over kernel rows of a dot
    /// product along the row (the kernel is larger than the output).
    fn add_by_dots<T: FastFloat>(&self, rows: &Axis, cols: &Axis, x: &[T], k: &[T], out: &mut [T]) {
        let w = self.in_hw[1];
        let [kh, kw] = self.kernel_hw;
        let ow = self.out_hw[1];
        let step = self.rhs_dilation[1];
        let col_windows: Vec<(usize, usize, usize)> =
            (0..ow).map(|o| cols.window_range(o)).collect();
        for (r_out, out_row) in out.chunks_exact_mut(ow).enumerate() {
            for (o, &(lo, hi, i_lo)) in out_row.iter_mut().zip(&col_windows) {
                if lo == hi {
                    continue;
                }
                let mut acc = *o;
                for a in 0..kh {
                    let ih = rows.table.row(a)[r_out];
                    if ih < 0 {
                        continue;
                    }
                    let x_row = &x[ih as usize * w + i_lo..];
                    acc += dot(&k[a * kw + lo..a * kw + hi], x_row, step);
                }
                *o = acc;
            }
        }
    }
}

/// `Σ_j w[j] · x[j·step]` with eight independent partial sums (vectorisable).
#[inline]
fn dot<T: FastFloat>(w: &[T], x: &[T], step: usize) -> T {
    const LANES: usize = 8;
    if step != 1 {
        return w
            .iter()
            .enumerate()
            .fold(T::ZERO, |acc, (j, &a)| acc + a * x[j * step]);
    }
    let x = &x[..w.len()];
    let mut lanes = [T::ZERO; LANES];
    let (wc, xc) = (w.chunks_exact(LANES), x.chunks_exact(LANES));
    let (wt, xt) = (wc.remainder(), xc.remainder());
    for (a, b) in wc.zip(xc) {
        for l in 0..LANES {
            lanes[l] += a[l] * b[l];
        }
    }
    let tail = wt.iter().zip(xt).fold(T::ZERO, |acc, (&a, &b)| acc + a * b);
    lanes.iter().fold(T::ZERO, |acc, &l| acc + l) + tail
}
