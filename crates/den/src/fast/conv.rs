//! Fast f32 `stablehlo.convolution`: operands are permuted to an internal
//! `[batch, feature, spatial…]` / `[out_feature, in_feature, spatial…]` layout,
//! every (output example, batch group, feature group) becomes one GEMM
//! `W_g [Og, Cg·Kprod] × col [Cg·Kprod, P]` over an im2col buffer, and the
//! `[batch, feature, spatial…]` result is permuted to the requested layout.
//!
//! Padding, base (lhs) dilation and window (rhs) dilation are resolved once per
//! spatial dimension into [`WindowTable`]s, so im2col is table lookups and, for
//! unit-stride rows, plain copies between zero borders.

use rayon::prelude::*;

use super::gemm::{matmul, MatRef};
use super::layout::{dim_index, permute, WindowTable};
use crate::tensor::{row_major_strides, Tensor};

/// Geometry of one convolution in the internal layout.
struct ConvPlan {
    /// Input examples (before batch grouping) and input features.
    batch: usize,
    in_features: usize,
    in_spatial: Vec<usize>,
    /// Kernel spatial extents (after reversal the kernel is a plain correlation).
    kernel_spatial: Vec<usize>,
    out_batch: usize,
    out_features: usize,
    out_spatial: Vec<usize>,
    batch_groups: usize,
    feature_groups: usize,
    tables: Vec<WindowTable>,
    /// Per spatial dimension, per kernel offset: a contiguous copy run, if any.
    runs: Vec<Vec<Option<(usize, usize, usize)>>>,
    /// Window dilation of the last spatial dimension (the step of the direct
    /// path's inner dot product along the input row).
    last_rhs_dilation: usize,
    /// Whether the last spatial dimension has no lhs dilation (so a window's
    /// valid kernel offsets are contiguous and read a regularly strided input row).
    last_dense: bool,
}

impl ConvPlan {
    fn in_plane(&self) -> usize {
        self.in_spatial.iter().product()
    }
    fn kernel_size(&self) -> usize {
        self.kernel_spatial.iter().product()
    }
    fn out_plane(&self) -> usize {
        self.out_spatial.iter().product()
    }
    /// Input features per feature group (= the kernel's input-feature extent).
    fn group_in_features(&self) -> usize {
        self.in_features / self.feature_groups
    }
    /// Output features per batch group.
    fn batch_group_out_features(&self) -> usize {
        self.out_features / self.batch_groups
    }
    /// Output features per (batch group, feature group).
    fn group_out_features(&self) -> usize {
        self.batch_group_out_features() / self.feature_groups
    }

    /// True when the kernel window is much larger than the output (the
    /// weight-gradient pattern): im2col would copy the input many times over for
    /// a GEMM with very few columns, so outputs are computed as direct dot products.
    fn prefers_direct(&self) -> bool {
        !self.kernel_spatial.is_empty()
            && self.last_dense
            && self.kernel_size() >= 8 * self.out_plane()
    }

    /// True when the window reads each output position's own input position
    /// (1×…×1 kernel, stride 1, no padding or dilation): im2col is the identity.
    fn is_pointwise(&self) -> bool {
        self.in_spatial == self.out_spatial
            && self.kernel_spatial.iter().all(|&k| k == 1)
            && self
                .runs
                .iter()
                .zip(&self.out_spatial)
                .all(|(r, &n)| n == 0 || r[0] == Some((0, n, 0)))
    }
}

pub(crate) fn convolution(
    lhs: &Tensor<f32>,
    rhs: &Tensor<f32>,
    attrs: &ir::ConvAttrs,
    out_shape: &[usize],
) -> Tensor<f32> {
    let d = &attrs.dims;
    let nsp = d.input_spatial.len();
    assert_eq!(lhs.rank(), nsp + 2, "convolution lhs rank");
    assert_eq!(rhs.rank(), nsp + 2, "convolution rhs rank");
    assert_eq!(out_shape.len(), nsp + 2, "convolution result rank");

    let lhs_perm: Vec<usize> = [d.input_batch, d.input_feature]
        .iter()
        .chain(&d.input_spatial)
        .map(|&x| dim_index(x, "input dimension"))
        .collect();
    let rhs_perm: Vec<usize> = [d.kernel_output_feature, d.kernel_input_feature]
        .iter()
        .chain(&d.kernel_spatial)
        .map(|&x| dim_index(x, "kernel dimension"))
        .collect();
    let out_dims: Vec<usize> = [d.output_batch, d.output_feature]
        .iter()
        .chain(&d.output_spatial)
        .map(|&x| dim_index(x, "output dimension"))
        .collect();

    let in_spatial: Vec<usize> = lhs_perm[2..].iter().map(|&i| lhs.shape[i]).collect();
    let kernel_spatial: Vec<usize> = rhs_perm[2..].iter().map(|&i| rhs.shape[i]).collect();
    let out_spatial: Vec<usize> = out_dims[2..].iter().map(|&i| out_shape[i]).collect();
    let attr = |v: &[i64], i: usize, default: i64| v.get(i).copied().unwrap_or(default);
    let tables: Vec<WindowTable> = (0..nsp)
        .map(|s| {
            WindowTable::new(
                in_spatial[s],
                out_spatial[s],
                kernel_spatial[s],
                attr(&attrs.window_strides, s, 1),
                attr(&attrs.rhs_dilation, s, 1),
                attr(&attrs.lhs_dilation, s, 1),
                attrs.padding.get(s).map_or(0, |p| p.0),
            )
        })
        .collect();
    let runs = tables
        .iter()
        .map(|t| (0..t.window).map(|w| t.unit_run(w)).collect())
        .collect();
    let plan = ConvPlan {
        batch: lhs.shape[lhs_perm[0]],
        in_features: lhs.shape[lhs_perm[1]],
        in_spatial,
        kernel_spatial,
        out_batch: out_shape[out_dims[0]],
        out_features: out_shape[out_dims[1]],
        out_spatial,
        batch_groups: dim_index(attrs.batch_group_count, "batch_group_count"),
        feature_groups: dim_index(attrs.feature_group_count, "feature_group_count"),
        tables,
        runs,
        last_rhs_dilation: nsp.checked_sub(1).map_or(1, |s| {
            dim_index(attr(&attrs.rhs_dilation, s, 1), "rhs_dilation")
        }),
        last_dense: nsp == 0 || attr(&attrs.lhs_dilation, nsp - 1, 1) == 1,
    };
    let kernel_in = rhs.shape[rhs_perm[1]];
    let kernel_out = rhs.shape[rhs_perm[0]];
    assert!(plan.batch_groups >= 1 && plan.feature_groups >= 1);
    assert_eq!(
        plan.in_features,
        kernel_in * plan.feature_groups,
        "convolution feature groups"
    );
    assert_eq!(kernel_out, plan.out_features, "convolution output features");
    assert_eq!(
        plan.batch,
        plan.out_batch * plan.batch_groups,
        "convolution batch groups"
    );
    assert_eq!(
        plan.out_features % (plan.batch_groups * plan.feature_groups),
        0
    );

    let lhs_log = permute(&lhs.data, &lhs.shape, &lhs_perm);
    let rhs_log = permute(&rhs.data, &rhs.shape, &rhs_perm);
    let rhs_log = if attrs.window_reversal.iter().any(|&r| r) {
        std::borrow::Cow::Owned(reverse_kernel(&rhs_log, &plan, &attrs.window_reversal))
    } else {
        rhs_log
    };

    let result = compute(&plan, &lhs_log, &rhs_log);

    // Internal [batch, feature, spatial…] → requested layout: output dimension
    // out_dims[j] holds internal dimension j.
    let internal_shape: Vec<usize> = [plan.out_batch, plan.out_features]
        .into_iter()
        .chain(plan.out_spatial.iter().copied())
        .collect();
    let mut to_out = vec![0usize; nsp + 2];
    for (j, &od) in out_dims.iter().enumerate() {
        to_out[od] = j;
    }
    let data = permute(&result, &internal_shape, &to_out).into_owned();
    Tensor::new(out_shape.to_vec(), data)
}

/// The kernel `[O, I, K…]` with the spatial dimensions flagged in `reversal` reversed.
fn reverse_kernel(kernel: &[f32], plan: &ConvPlan, reversal: &[bool]) -> Vec<f32> {
    let ks = &plan.kernel_spatial;
    let kprod = plan.kernel_size();
    let kstrides = row_major_strides(ks);
    // source offset of each destination kernel offset
    let map: Vec<usize> = (0..kprod)
        .map(|dst| {
            let mut src = 0;
            for (s, (&n, &st)) in ks.iter().zip(&kstrides).enumerate() {
                let i = (dst / st) % n;
                let i = if reversal.get(s).copied().unwrap_or(false) {
                    n - 1 - i
                } else {
                    i
                };
                src += i * st;
            }
            src
        })
        .collect();
    let mut out = Vec::with_capacity(kernel.len());
    for block in kernel.chunks(kprod.max(1)) {
        out.extend(map.iter().map(|&m| block[m]));
    }
    out
}

/// The convolution in the internal layout: `[out_batch, out_features, P]`.
fn compute(plan: &ConvPlan, lhs: &[f32], rhs: &[f32]) -> Vec<f32> {
    let p = plan.out_plane();
    let ob = plan.batch_group_out_features();
    let mut result = vec![0f32; plan.out_batch * plan.out_features * p];
    if result.is_empty() {
        return result;
    }
    if plan.prefers_direct() {
        result
            .par_chunks_mut(ob * p)
            .enumerate()
            .for_each(|(task, block)| {
                let b_out = task / plan.batch_groups;
                let bg = task % plan.batch_groups;
                direct_task(plan, lhs, rhs, bg * plan.out_batch + b_out, bg, block);
            });
        return result;
    }
    let col_len = if plan.is_pointwise() {
        0
    } else {
        plan.group_in_features() * plan.kernel_size() * p
    };
    // One task per (output example, batch group): a contiguous [ob, P] block.
    result.par_chunks_mut(ob * p).enumerate().for_each_init(
        || vec![0f32; col_len],
        |col, (task, block)| {
            let b_out = task / plan.batch_groups;
            let bg = task % plan.batch_groups;
            let example = bg * plan.out_batch + b_out;
            for g in 0..plan.feature_groups {
                group_gemm(plan, lhs, rhs, example, bg, g, col, block);
            }
        },
    );
    result
}

/// One feature group of one (example, batch group): writes rows `g·Og..` of `block`.
#[allow(clippy::too_many_arguments)]
fn group_gemm(
    plan: &ConvPlan,
    lhs: &[f32],
    rhs: &[f32],
    example: usize,
    bg: usize,
    g: usize,
    col: &mut [f32],
    block: &mut [f32],
) {
    let p = plan.out_plane();
    let cg = plan.group_in_features();
    let og = plan.group_out_features();
    let kprod = plan.kernel_size();
    let plane = plan.in_plane();
    let reduction = cg * kprod;
    let first_channel = example * plan.in_features + g * cg;
    let first_kernel_row = bg * plan.batch_group_out_features() + g * og;
    let weights = MatRef::row_major(&rhs[first_kernel_row * reduction..], og, reduction);
    let out = &mut block[g * og * p..(g + 1) * og * p];
    if plan.is_pointwise() {
        let input = MatRef::row_major(&lhs[first_channel * plane..], cg, p);
        matmul(weights, input, out, p);
        return;
    }
    let kstrides = row_major_strides(&plan.kernel_spatial);
    let in_strides = row_major_strides(&plan.in_spatial);
    let mut koff = vec![0usize; plan.kernel_spatial.len()];
    for c in 0..cg {
        let src = &lhs[(first_channel + c) * plane..(first_channel + c + 1) * plane];
        for k in 0..kprod {
            for (s, o) in koff.iter_mut().enumerate() {
                *o = (k / kstrides[s]) % plan.kernel_spatial[s];
            }
            let row = &mut col[(c * kprod + k) * p..(c * kprod + k + 1) * p];
            fill_row(plan, &in_strides, &koff, src, 0, 0, row);
        }
    }
    matmul(weights, MatRef::row_major(col, reduction, p), out, p);
}

/// Writes the im2col row of kernel offset `koff` for spatial dimensions `dim..`
/// (the output positions of `out`), reading the channel plane `src` from `offset`.
fn fill_row(
    plan: &ConvPlan,
    in_strides: &[usize],
    koff: &[usize],
    src: &[f32],
    dim: usize,
    offset: usize,
    out: &mut [f32],
) {
    let nsp = plan.out_spatial.len();
    if dim == nsp {
        out[0] = src[offset];
        return;
    }
    let table = &plan.tables[dim];
    let idx = table.row(koff[dim]);
    if dim + 1 == nsp {
        if let Some((lo, hi, i_lo)) = plan.runs[dim][koff[dim]] {
            out[..lo].fill(0.0);
            out[lo..hi].copy_from_slice(&src[offset + i_lo..offset + i_lo + (hi - lo)]);
            out[hi..].fill(0.0);
        } else {
            for (o, &i) in out.iter_mut().zip(idx) {
                *o = if i >= 0 {
                    src[offset + i as usize]
                } else {
                    0.0
                };
            }
        }
        return;
    }
    let inner: usize = plan.out_spatial[dim + 1..].iter().product();
    for (chunk, &i) in out.chunks_mut(inner.max(1)).zip(idx) {
        if i < 0 {
            chunk.fill(0.0);
        } else {
            let off = offset + i as usize * in_strides[dim];
            fill_row(plan, in_strides, koff, src, dim + 1, off, chunk);
        }
    }
}

/// Direct evaluation of one (example, batch group) block `[ob, P]`: each output is
/// a sum over input features and outer kernel offsets of dot products along the
/// last spatial dimension, whose valid kernel offsets form one contiguous range.
fn direct_task(
    plan: &ConvPlan,
    lhs: &[f32],
    rhs: &[f32],
    example: usize,
    bg: usize,
    block: &mut [f32],
) {
    let nsp = plan.kernel_spatial.len();
    let p = plan.out_plane();
    let cg = plan.group_in_features();
    let og = plan.group_out_features();
    let kprod = plan.kernel_size();
    let plane = plan.in_plane();
    let in_strides = row_major_strides(&plan.in_spatial);
    let k_strides = row_major_strides(&plan.kernel_spatial);
    let last = &plan.tables[nsp - 1];
    let (k_last, p_last) = (plan.kernel_spatial[nsp - 1], plan.out_spatial[nsp - 1]);
    // Per last-dim output position: valid kernel offsets k_lo..k_hi, reading input i_lo + (k - k_lo)·rd.
    let last_ranges: Vec<(usize, usize, usize)> = (0..p_last)
        .map(|o| {
            let valid = |k: &usize| last.row(*k)[o] >= 0;
            match (0..k_last).find(valid) {
                None => (0, 0, 0),
                Some(lo) => {
                    let hi = (lo..k_last).take_while(valid).last().map_or(lo, |k| k + 1);
                    (lo, hi, last.row(lo)[o] as usize)
                }
            }
        })
        .collect();
    let outer_out: Vec<usize> = plan.out_spatial[..nsp - 1].to_vec();
    let outer_kernel: Vec<usize> = plan.kernel_spatial[..nsp - 1].to_vec();
    let outer_kprod: usize = outer_kernel.iter().product();
    let outer_k_strides = row_major_strides(&outer_kernel);
    let step = plan.last_rhs_dilation;
    for g in 0..plan.feature_groups {
        let first_channel = example * plan.in_features + g * cg;
        let first_kernel_row = bg * plan.batch_group_out_features() + g * og;
        for pf in 0..p {
            let (po_outer, po_last) = (pf / p_last.max(1), pf % p_last.max(1));
            let (k_lo, k_hi, i_lo) = last_ranges[po_last];
            if k_lo == k_hi {
                for o in 0..og {
                    block[(g * og + o) * p + pf] = 0.0;
                }
                continue;
            }
            let mut out_idx = vec![0usize; outer_out.len()];
            let mut rem = po_outer;
            for s in (0..outer_out.len()).rev() {
                out_idx[s] = rem % outer_out[s];
                rem /= outer_out[s];
            }
            // Input and kernel offsets of every valid outer kernel offset.
            let mut pairs: Vec<(usize, usize)> = Vec::with_capacity(outer_kprod);
            'outer: for kf in 0..outer_kprod {
                let (mut in_off, mut k_off) = (i_lo, k_lo);
                for s in 0..outer_out.len() {
                    let k = (kf / outer_k_strides[s]) % outer_kernel[s];
                    let i = plan.tables[s].row(k)[out_idx[s]];
                    if i < 0 {
                        continue 'outer;
                    }
                    in_off += i as usize * in_strides[s];
                    k_off += k * k_strides[s];
                }
                pairs.push((in_off, k_off));
            }
            let len = k_hi - k_lo;
            for o in 0..og {
                let kernel = &rhs[(first_kernel_row + o) * cg * kprod..];
                let mut acc = 0f32;
                for c in 0..cg {
                    let src = &lhs[(first_channel + c) * plane..(first_channel + c + 1) * plane];
                    let w = &kernel[c * kprod..(c + 1) * kprod];
                    for &(in_off, k_off) in &pairs {
                        acc += dot(&w[k_off..k_off + len], &src[in_off..], step);
                    }
                }
                block[(g * og + o) * p + pf] = acc;
            }
        }
    }
}

/// `Σ_j w[j] · x[j·step]` with eight independent partial sums (vectorisable).
#[inline]
fn dot(w: &[f32], x: &[f32], step: usize) -> f32 {
    const LANES: usize = 8;
    let mut lanes = [0f32; LANES];
    if step == 1 {
        let x = &x[..w.len()];
        let (wc, xc) = (w.chunks_exact(LANES), x.chunks_exact(LANES));
        let (wt, xt) = (wc.remainder(), xc.remainder());
        for (a, b) in wc.zip(xc) {
            for l in 0..LANES {
                lanes[l] += a[l] * b[l];
            }
        }
        let tail: f32 = wt.iter().zip(xt).map(|(a, b)| a * b).sum();
        return lanes.iter().sum::<f32>() + tail;
    }
    w.iter().enumerate().map(|(j, a)| a * x[j * step]).sum()
}
