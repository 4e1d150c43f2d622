//! Fast `stablehlo.convolution` (f32/f64): operands are permuted to an internal
//! `[batch, feature, spatial…]` / `[out_feature, in_feature, spatial…]` layout
//! (window reversal applied to the kernel), computed by one of these paths, and
//! the `[batch, feature, spatial…]` result is permuted to the requested layout
//! (no copy when it is that layout). The implicit-GEMM path skips the operand
//! permutes when only the two leading dimensions are swapped (it reads them
//! through strides), so the weight-VJP on untransposed NCHW tensors copies
//! neither operand:
//!
//! * implicit GEMM (`implicit.rs`): every ungrouped convolution without lhs
//!   dilation and with a non-pointwise kernel — all three forms of a train
//!   step's conv layers (forward, input-VJP, weight-VJP on transposed operands);
//! * one GEMM per example for pointwise (1×1, stride 1) convolutions;
//! * for grouped or lhs-dilated convolutions: im2col + GEMM per (example, batch
//!   group, feature group), phase-split im2col for lhs dilation (no multiplies
//!   by the inserted zeros), shifted GEMMs over a padded copy, patch GEMM, or
//!   direct dot products when the kernel is much larger than the output (the
//!   depthwise weight gradient with `batch_group_count`).
//!
//! Padding, base (lhs) dilation and window (rhs) dilation are resolved once per
//! spatial dimension into [`WindowTable`]s, so gathering is table lookups and,
//! for unit-stride rows, plain copies between zero borders.

use rayon::prelude::*;

use super::depthwise::DepthwiseConv;
use super::float::FastFloat;
use super::gemm::{matmul, matmul_add, MatRef};
use super::implicit::ImplicitConv;
use super::layout::{dim_index, permute, WindowTable};
use crate::tensor::{row_major_strides, Tensor};
use std::borrow::Cow;

mod phase;
use phase::{out_spatial_len, phase_classes, phase_task, shifted_gemm, Phase, ShiftGeometry};

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
    /// Per output position of the last spatial dimension: its window as one
    /// contiguous copy, if it is one (patch GEMM gathering).
    last_window_runs: Vec<Option<(usize, usize, usize)>>,
    /// Window dilation of the last spatial dimension (the step of the direct
    /// path's inner dot product along the input row).
    last_rhs_dilation: usize,
    /// Set when the convolution can run as shifted GEMMs over a padded copy
    /// of the input (see [`ShiftGeometry`]).
    shift: Option<ShiftGeometry>,
    /// Per spatial dimension: output positions grouped by which kernel offsets
    /// can land on input elements rather than lhs-dilation holes.
    phases: Vec<Vec<Phase>>,
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

    /// True for the ungrouped weight-gradient pattern (kernel larger than the
    /// output): one GEMM `W [O, I·Kprod] × patches [I·Kprod, out_batch·P]`, tiled
    /// over input features, whose many columns keep the GEMM efficient.
    fn prefers_patch_gemm(&self) -> bool {
        self.batch_groups == 1
            && self.feature_groups == 1
            && !self.kernel_spatial.is_empty()
            && self.kernel_size() > self.out_plane()
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

pub(crate) fn convolution<T: FastFloat>(
    lhs: &Tensor<T>,
    rhs: &Tensor<T>,
    attrs: &ir::ConvAttrs,
    out_shape: &[usize],
    buffer: Vec<T>,
    bias: Option<&[T]>,
    mut moments: Option<&mut [f32]>,
) -> Tensor<T> {
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
    let last_window_runs = tables
        .last()
        .map(|t| (0..t.out_len).map(|o| t.window_run(o)).collect())
        .unwrap_or_default();
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
        last_window_runs,
        last_rhs_dilation: nsp.checked_sub(1).map_or(1, |s| {
            dim_index(attr(&attrs.rhs_dilation, s, 1), "rhs_dilation")
        }),
        last_dense: nsp == 0 || attr(&attrs.lhs_dilation, nsp - 1, 1) == 1,
        shift: None,
        phases: (0..nsp)
            .map(|s| {
                phase_classes(
                    out_spatial_len(out_shape, &out_dims, s),
                    rhs.shape[rhs_perm[2 + s]],
                    attr(&attrs.window_strides, s, 1),
                    attr(&attrs.rhs_dilation, s, 1),
                    attr(&attrs.lhs_dilation, s, 1),
                    attrs.padding.get(s).map_or(0, |p| p.0),
                )
            })
            .collect(),
    };
    let mut plan = plan;
    plan.shift = ShiftGeometry::new(&plan, attrs);
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

    if let Some(b) = bias {
        assert_eq!(b.len(), plan.out_features, "convolution bias length");
    }
    let reversed = attrs.window_reversal.iter().any(|&r| r);
    // The kernel in the logical layout, window reversal applied.
    let rhs_logical = || {
        let rhs_log = permute(&rhs.data, &rhs.shape, &rhs_perm);
        if reversed {
            Cow::Owned(reverse_kernel(&rhs_log, &plan, &attrs.window_reversal))
        } else {
            rhs_log
        }
    };

    // The two operands in the logical layout, each read in place (its
    // leading-dimension strides stored through `lhs_strides` / `rhs_strides`)
    // when only its two leading dimensions are swapped.
    let operands = |lhs_strides: &mut [usize; 2], rhs_strides: &mut [usize; 2]| {
        let lhs_op = match leading_strides(&lhs.shape, &lhs_perm) {
            Some(strides) => {
                *lhs_strides = strides;
                Cow::Borrowed(&lhs.data[..])
            }
            None => permute(&lhs.data, &lhs.shape, &lhs_perm),
        };
        let rhs_op = match leading_strides(&rhs.shape, &rhs_perm).filter(|_| !reversed) {
            Some(strides) => {
                *rhs_strides = strides;
                Cow::Borrowed(&rhs.data[..])
            }
            None => rhs_logical(),
        };
        (lhs_op, rhs_op)
    };
    // The internal result buffer: `buffer` when it has the result's length.
    let output = |buffer: Vec<T>| {
        let len = plan.out_batch * plan.out_features * plan.out_plane();
        if buffer.len() == len {
            buffer
        } else {
            vec![T::ZERO; len]
        }
    };

    let result = if let Some(mut conv) = depthwise_conv(&plan, attrs) {
        // As for the implicit GEMM below: operands whose two leading
        // dimensions are swapped are read in place.
        let (lhs_op, rhs_op) = operands(&mut conv.lhs_strides, &mut conv.rhs_strides);
        let mut out = output(buffer);
        conv.run(&lhs_op, &rhs_op, &mut out);
        add_bias(&mut out, bias, &plan);
        result_moments(&out, &plan, moments);
        out
    } else {
        match implicit_gemm(&plan, attrs) {
            Some(mut conv) => {
                // The implicit kernel reads the two leading dimensions of each
                // operand through strides: no copy when only those are swapped (the
                // weight-VJP's xᵀ and dyᵀ given as NCHW tensors). A reversed kernel
                // is still copied (it is small: the forward's weights).
                let (lhs_op, rhs_op) = operands(&mut conv.lhs_strides, &mut conv.rhs_strides);
                let mut out = output(buffer);
                conv.run(&lhs_op, &rhs_op, &mut out, bias, moments.take());
                out
            }
            None => {
                let mut result = compute(
                    &plan,
                    &permute(&lhs.data, &lhs.shape, &lhs_perm),
                    &rhs_logical(),
                );
                add_bias(&mut result, bias, &plan);
                result_moments(&result, &plan, moments);
                result
            }
        }
    };

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
    let data = match permute(&result, &internal_shape, &to_out) {
        // Already in the requested layout: hand over the buffer without a copy.
        Cow::Borrowed(_) => result,
        Cow::Owned(v) => v,
    };
    Tensor::new(out_shape.to_vec(), data)
}

/// The plane moments of `result [out_batch, out_features, P]` when asked
/// for (see [`super::moments`]), in a pass of their own: the kernels that
/// do not take them while writing.
fn result_moments<T: FastFloat>(result: &[T], plan: &ConvPlan, moments: Option<&mut [f32]>) {
    if let Some(m) = moments {
        let r =
            super::implicit::same_type::<T, f32>(result).expect("plane moments of an f32 result");
        super::moments::plane_moments_par(r, plan.out_plane().max(1), m);
    }
}

/// `result [out_batch, out_features, P] += bias` along the output features.
fn add_bias<T: FastFloat>(result: &mut [T], bias: Option<&[T]>, plan: &ConvPlan) {
    if let Some(bias) = bias {
        let p = plan.out_plane().max(1);
        for (k, plane) in result.chunks_mut(p).enumerate() {
            let b = bias[k % plan.out_features];
            for x in plane {
                *x += b;
            }
        }
    }
}

/// The direct form (see [`DepthwiseConv`]) of the 2-D depthwise convolutions
/// without lhs dilation: feature groups of one input feature each (forward and
/// input-VJP, any channel multiplier), or batch groups without feature groups
/// (the weight-VJP).
fn depthwise_conv(plan: &ConvPlan, attrs: &ir::ConvAttrs) -> Option<DepthwiseConv> {
    let get = |v: &[i64], s: usize| v.get(s).copied().unwrap_or(1);
    let grouped_forward =
        plan.batch_groups == 1 && plan.feature_groups > 1 && plan.group_in_features() == 1;
    let grouped_wgrad = plan.feature_groups == 1 && plan.batch_groups > 1;
    let eligible = DEPTHWISE_ENABLED
        && plan.kernel_spatial.len() == 2
        && (grouped_forward || grouped_wgrad)
        && plan.kernel_size() > 0
        && (0..2).all(|s| get(&attrs.lhs_dilation, s) == 1);
    if !eligible {
        return None;
    }
    // The direct path reads only inside the input: a result extent the
    // attributes do not give would be silently zero-filled, so it is refused.
    for s in 0..2 {
        let (lo, hi) = attrs.padding.get(s).copied().unwrap_or((0, 0));
        let padded = plan.in_spatial[s] as i64 + lo + hi;
        let window = (plan.kernel_spatial[s] as i64 - 1) * get(&attrs.rhs_dilation, s) + 1;
        let stride = get(&attrs.window_strides, s).max(1);
        let expected = if padded >= window {
            (padded - window) / stride + 1
        } else {
            0
        };
        assert_eq!(
            plan.out_spatial[s] as i64, expected,
            "convolution spatial dimension {s}: result shape inconsistent with operands"
        );
    }
    let pair = |v: &[usize]| [v[0], v[1]];
    let attr = |v: &[i64], what| [0, 1].map(|s| dim_index(get(v, s), what));
    let kprod = plan.kernel_size();
    Some(DepthwiseConv {
        out_batch: plan.out_batch,
        out_features: plan.out_features,
        batch_groups: plan.batch_groups,
        feature_groups: plan.feature_groups,
        group_in: plan.group_in_features(),
        in_hw: pair(&plan.in_spatial),
        kernel_hw: pair(&plan.kernel_spatial),
        out_hw: pair(&plan.out_spatial),
        strides: attr(&attrs.window_strides, "window stride"),
        rhs_dilation: attr(&attrs.rhs_dilation, "rhs_dilation"),
        pad_low: [0, 1].map(|s| attrs.padding.get(s).map_or(0, |p| p.0)),
        // The logical layouts; `convolution` sets the strides of operands it
        // does not permute.
        lhs_strides: [plan.in_features * plan.in_plane(), plan.in_plane()],
        rhs_strides: [plan.group_in_features() * kprod, kprod],
    })
}

/// The direct depthwise path's switch (off: those convolutions take the
/// im2col/direct paths of [`compute`]), kept for comparisons.
const DEPTHWISE_ENABLED: bool = true;

/// Element strides of the two leading logical dimensions of an operand whose
/// logical dimension `j` is physical dimension `perm[j]`, when its logical
/// spatial dimensions are its trailing physical ones in order (so only the two
/// leading dimensions may be swapped); otherwise `None`.
fn leading_strides(shape: &[usize], perm: &[usize]) -> Option<[usize; 2]> {
    let trailing = perm.iter().enumerate().skip(2).all(|(j, &d)| d == j);
    let leading = matches!(perm[..2], [0, 1] | [1, 0]);
    let strides = row_major_strides(shape);
    (trailing && leading).then(|| [strides[perm[0]], strides[perm[1]]])
}

/// The implicit-GEMM kernel serves the ungrouped convolutions without lhs
/// dilation. (It was switched off for a while after it moved a batch-32
/// cifar8-bbn step 2.6e-4 away from float64 where the blocked paths were
/// 1.4e-5; that input sits 6.6e-7 from a ReLU kink in float64 — `certgrad run
/// --margins` — and the kernel's result, 1.5e-7 RMS from float64 there
/// (blocked: 7.6e-8), lands on the other side. A 1e-6 random perturbation of
/// the blocked paths' results flips the same decision and gives the same
/// 2.6e-4. The switch stays for comparisons.)
const IMPLICIT_GEMM_ENABLED: bool = true;

/// The implicit-GEMM form of the convolution (see [`ImplicitConv`]) when it
/// applies: ungrouped, no lhs dilation, a spatial kernel that is not pointwise
/// (the pointwise case is a plain GEMM below).
fn implicit_gemm<'a>(plan: &'a ConvPlan, attrs: &ir::ConvAttrs) -> Option<ImplicitConv<'a>> {
    let nsp = plan.kernel_spatial.len();
    let get = |v: &[i64], s: usize| v.get(s).copied().unwrap_or(1);
    let kernel_taps = plan.kernel_size();
    let eligible = IMPLICIT_GEMM_ENABLED
        && nsp > 0
        && plan.batch_groups == 1
        && plan.feature_groups == 1
        && plan.in_features > 0
        && plan.kernel_size() > 0
        && !plan.is_pointwise()
        && (0..nsp).all(|s| get(&attrs.lhs_dilation, s) == 1);
    eligible.then(|| ImplicitConv {
        batch: plan.batch,
        in_features: plan.in_features,
        out_features: plan.out_features,
        in_spatial: &plan.in_spatial,
        kernel_spatial: &plan.kernel_spatial,
        out_spatial: &plan.out_spatial,
        strides: (0..nsp)
            .map(|s| dim_index(get(&attrs.window_strides, s), "window stride"))
            .collect(),
        rhs_dilation: (0..nsp)
            .map(|s| dim_index(get(&attrs.rhs_dilation, s), "rhs_dilation"))
            .collect(),
        padding: (0..nsp)
            .map(|s| attrs.padding.get(s).copied().unwrap_or((0, 0)))
            .collect(),
        // The logical layouts; `convolution` sets the strides of operands it
        // does not permute.
        lhs_strides: [plan.in_features * plan.in_plane(), plan.in_plane()],
        rhs_strides: [plan.in_features * kernel_taps, kernel_taps],
    })
}

/// The kernel `[O, I, K…]` with the spatial dimensions flagged in `reversal` reversed.
fn reverse_kernel<T: FastFloat>(kernel: &[T], plan: &ConvPlan, reversal: &[bool]) -> Vec<T> {
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
fn compute<T: FastFloat>(plan: &ConvPlan, lhs: &[T], rhs: &[T]) -> Vec<T> {
    let p = plan.out_plane();
    let ob = plan.batch_group_out_features();
    let mut result = vec![T::ZERO; plan.out_batch * plan.out_features * p];
    if result.is_empty() {
        return result;
    }
    if plan.prefers_patch_gemm() {
        return patch_gemm(plan, lhs, rhs);
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
    if plan.phases.iter().any(|classes| classes.len() > 1) {
        result
            .par_chunks_mut(ob * p)
            .enumerate()
            .for_each(|(task, block)| {
                let b_out = task / plan.batch_groups;
                let bg = task % plan.batch_groups;
                phase_task(plan, lhs, rhs, bg * plan.out_batch + b_out, bg, block);
            });
        return result;
    }
    if let Some(shift) = &plan.shift {
        let og = plan.group_out_features();
        result.par_chunks_mut(ob * p).enumerate().for_each_init(
            || {
                (
                    vec![T::ZERO; plan.group_in_features() * shift.plane_len],
                    vec![T::ZERO; og * shift.cols],
                )
            },
            |(padded, wide), (task, block)| {
                let b_out = task / plan.batch_groups;
                let bg = task % plan.batch_groups;
                let example = bg * plan.out_batch + b_out;
                for g in 0..plan.feature_groups {
                    shifted_gemm(plan, shift, lhs, rhs, example, bg, g, padded, wide, block);
                }
            },
        );
        return result;
    }
    let col_len = if plan.is_pointwise() {
        0
    } else {
        plan.group_in_features() * plan.kernel_size() * p
    };
    // One task per (output example, batch group): a contiguous [ob, P] block.
    result.par_chunks_mut(ob * p).enumerate().for_each_init(
        || vec![T::ZERO; col_len],
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
fn group_gemm<T: FastFloat>(
    plan: &ConvPlan,
    lhs: &[T],
    rhs: &[T],
    example: usize,
    bg: usize,
    g: usize,
    col: &mut [T],
    block: &mut [T],
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
            if koff.len() == 2 {
                if let Some(run) = plan.runs[1][koff[1]] {
                    fill_plane_rows(plan.tables[0].row(koff[0]), run, in_strides[0], src, row);
                    continue;
                }
            }
            fill_row(plan, &in_strides, &koff, src, 0, 0, row);
        }
    }
    matmul(weights, MatRef::row_major(col, reduction, p), out, p);
}

/// The 2-D im2col row of one kernel offset whose column reads are one contiguous
/// `run` (the common case): output row `oh` reads input row `rows[oh]` (or is
/// zero), its valid columns `lo..hi` copy input columns from `i_lo`.
fn fill_plane_rows<T: FastFloat>(
    rows: &[i64],
    (lo, hi, i_lo): (usize, usize, usize),
    row_stride: usize,
    src: &[T],
    out: &mut [T],
) {
    let width = out.len() / rows.len().max(1);
    for (dst, &ih) in out.chunks_exact_mut(width).zip(rows) {
        if ih < 0 {
            dst.fill(T::ZERO);
            continue;
        }
        let from = ih as usize * row_stride + i_lo;
        for x in &mut dst[..lo] {
            *x = T::ZERO;
        }
        for (d, &v) in dst[lo..hi].iter_mut().zip(&src[from..from + (hi - lo)]) {
            *d = v;
        }
        for x in &mut dst[hi..] {
            *x = T::ZERO;
        }
    }
}

/// Writes the im2col row of kernel offset `koff` for spatial dimensions `dim..`
/// (the output positions of `out`), reading the channel plane `src` from `offset`.
fn fill_row<T: FastFloat>(
    plan: &ConvPlan,
    in_strides: &[usize],
    koff: &[usize],
    src: &[T],
    dim: usize,
    offset: usize,
    out: &mut [T],
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
            out[..lo].fill(T::ZERO);
            out[lo..hi].copy_from_slice(&src[offset + i_lo..offset + i_lo + (hi - lo)]);
            out[hi..].fill(T::ZERO);
        } else {
            for (o, &i) in out.iter_mut().zip(idx) {
                *o = if i >= 0 {
                    src[offset + i as usize]
                } else {
                    T::ZERO
                };
            }
        }
        return;
    }
    let inner: usize = plan.out_spatial[dim + 1..].iter().product();
    for (chunk, &i) in out.chunks_mut(inner.max(1)).zip(idx) {
        if i < 0 {
            chunk.fill(T::ZERO);
        } else {
            let off = offset + i as usize * in_strides[dim];
            fill_row(plan, in_strides, koff, src, dim + 1, off, chunk);
        }
    }
}

/// Direct evaluation of one (example, batch group) block `[ob, P]`: each output is
/// a sum over input features and outer kernel offsets of dot products along the
/// last spatial dimension, whose valid kernel offsets form one contiguous range.
fn direct_task<T: FastFloat>(
    plan: &ConvPlan,
    lhs: &[T],
    rhs: &[T],
    example: usize,
    bg: usize,
    block: &mut [T],
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
                    block[(g * og + o) * p + pf] = T::ZERO;
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
                let mut acc = T::ZERO;
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
fn dot<T: FastFloat>(w: &[T], x: &[T], step: usize) -> T {
    const LANES: usize = 8;
    let mut lanes = [T::ZERO; LANES];
    if step == 1 {
        let x = &x[..w.len()];
        let (wc, xc) = (w.chunks_exact(LANES), x.chunks_exact(LANES));
        let (wt, xt) = (wc.remainder(), xc.remainder());
        for (a, b) in wc.zip(xc) {
            for l in 0..LANES {
                lanes[l] += a[l] * b[l];
            }
        }
        let tail = wt.iter().zip(xt).fold(T::ZERO, |acc, (&a, &b)| acc + a * b);
        return lanes.iter().fold(T::ZERO, |acc, &l| acc + l) + tail;
    }
    w.iter()
        .enumerate()
        .fold(T::ZERO, |acc, (j, &a)| acc + a * x[j * step])
}

/// Bytes of one patch tile: about 4 MB, which keeps a tile's patches and the
/// GEMM's packed copy within a core's share of the last-level cache.
const PATCH_TILE_BYTES: usize = 4 << 20;

/// The ungrouped convolution as `out[o, (b, p)] = Σ_(i, k) W[o, i, k] ·
/// patch[(b, p), (i, k)]`, where row `(b, p)` of the patch matrix is the kernel
/// window of example `b` at output position `p`. The reduction over input features
/// is cut into tiles; threads sum their tiles into private accumulators.
fn patch_gemm<T: FastFloat>(plan: &ConvPlan, lhs: &[T], rhs: &[T]) -> Vec<T> {
    let p = plan.out_plane();
    let o = plan.out_features;
    let kprod = plan.kernel_size();
    let channels = plan.in_features;
    let ncols = plan.out_batch * p;
    let tile = ((PATCH_TILE_BYTES / std::mem::size_of::<T>()) / (ncols * kprod).max(1))
        .clamp(1, channels.max(1));
    let ntiles = channels.div_ceil(tile);
    let plane = plan.in_plane();
    let in_strides = row_major_strides(&plan.in_spatial);
    let out_strides = row_major_strides(&plan.out_spatial);
    let acc = (0..ntiles)
        .into_par_iter()
        .fold(
            || (vec![T::ZERO; o * ncols], Vec::<T>::new()),
            |(mut acc, mut patches), t| {
                let (c0, c1) = (t * tile, ((t + 1) * tile).min(channels));
                let width = (c1 - c0) * kprod;
                patches.resize(ncols * width, T::ZERO);
                for b in 0..plan.out_batch {
                    for pf in 0..p {
                        let row = &mut patches[(b * p + pf) * width..(b * p + pf + 1) * width];
                        let coords: Vec<usize> = out_strides
                            .iter()
                            .zip(&plan.out_spatial)
                            .map(|(&s, &n)| (pf / s) % n)
                            .collect();
                        for c in c0..c1 {
                            let src =
                                &lhs[(b * channels + c) * plane..(b * channels + c + 1) * plane];
                            let dst = &mut row[(c - c0) * kprod..(c - c0 + 1) * kprod];
                            fill_patch(plan, &in_strides, &coords, src, 0, 0, dst);
                        }
                    }
                }
                let weights = MatRef {
                    data: &rhs[c0 * kprod..],
                    rows: o,
                    cols: width,
                    row_stride: channels * kprod,
                    col_stride: 1,
                };
                let cols = MatRef {
                    data: &patches,
                    rows: width,
                    cols: ncols,
                    row_stride: 1,
                    col_stride: width,
                };
                matmul_add(weights, cols, &mut acc, ncols);
                (acc, patches)
            },
        )
        .map(|(acc, _)| acc)
        .reduce(
            || vec![T::ZERO; o * ncols],
            |mut a, b| {
                for (x, y) in a.iter_mut().zip(&b) {
                    *x += *y;
                }
                a
            },
        );
    // [O, (b, p)] → [b, O, p]
    let mut result = vec![T::ZERO; plan.out_batch * o * p];
    for (oi, acc_row) in acc.chunks_exact(ncols.max(1)).enumerate() {
        for b in 0..plan.out_batch {
            result[(b * o + oi) * p..(b * o + oi + 1) * p]
                .copy_from_slice(&acc_row[b * p..(b + 1) * p]);
        }
    }
    result
}

/// Writes the kernel window at output position `coords` of one input plane
/// (kernel offsets in row-major order; padding and dilation holes read zero),
/// for spatial dimensions `dim..`.
fn fill_patch<T: FastFloat>(
    plan: &ConvPlan,
    in_strides: &[usize],
    coords: &[usize],
    src: &[T],
    dim: usize,
    offset: usize,
    out: &mut [T],
) {
    let nsp = plan.kernel_spatial.len();
    if dim == nsp {
        out[0] = src[offset];
        return;
    }
    let table = &plan.tables[dim];
    let inner: usize = plan.kernel_spatial[dim + 1..].iter().product();
    let o = coords[dim];
    if dim + 1 == nsp {
        if let Some((lo, hi, i_lo)) = plan.last_window_runs[o] {
            out[..lo].fill(T::ZERO);
            out[lo..hi].copy_from_slice(&src[offset + i_lo..offset + i_lo + (hi - lo)]);
            out[hi..].fill(T::ZERO);
        } else {
            for (k, x) in out.iter_mut().enumerate() {
                let i = table.row(k)[o];
                *x = if i >= 0 {
                    src[offset + i as usize]
                } else {
                    T::ZERO
                };
            }
        }
        return;
    }
    for (k, chunk) in out.chunks_mut(inner.max(1)).enumerate() {
        let i = table.row(k)[o];
        if i < 0 {
            chunk.fill(T::ZERO);
        } else {
            let off = offset + i as usize * in_strides[dim];
            fill_patch(plan, in_strides, coords, src, dim + 1, off, chunk);
        }
    }
}
