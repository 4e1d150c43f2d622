//! The lhs-dilated convolution paths of `conv.rs`: output positions split
//! into phases that share their non-hole kernel offsets (phase-split im2col,
//! no multiplies by inserted zeros), and shifted GEMMs over a padded copy of
//! the input.

use super::*;

pub(super) fn out_spatial_len(out_shape: &[usize], out_dims: &[usize], s: usize) -> usize {
    out_shape[out_dims[2 + s]]
}

/// Output positions of one spatial dimension that share their set of kernel
/// offsets not falling into lhs-dilation holes.
#[derive(Clone, Debug)]
pub(super) struct Phase {
    pub(super) outs: Vec<usize>,
    pub(super) kernel_offsets: Vec<usize>,
}

/// Splits the outputs of one spatial dimension by `(o·stride − pad_low) mod
/// lhs_dilation`: offset `k` can read an input element only when
/// `o·stride + k·rhs_dilation − pad_low` is a multiple of `lhs_dilation`. With
/// `lhs_dilation` 1 there is one phase holding everything.
pub(super) fn phase_classes(
    out_len: usize,
    kernel: usize,
    stride: i64,
    rhs_dilation: i64,
    lhs_dilation: i64,
    pad_low: i64,
) -> Vec<Phase> {
    let ld = lhs_dilation.max(1);
    let mut classes: Vec<Phase> = (0..ld)
        .map(|residue| Phase {
            outs: Vec::new(),
            kernel_offsets: (0..kernel)
                .filter(|&k| (residue + k as i64 * rhs_dilation).rem_euclid(ld) == 0)
                .collect(),
        })
        .collect();
    for o in 0..out_len {
        let residue = (o as i64 * stride - pad_low).rem_euclid(ld);
        classes[residue as usize].outs.push(o);
    }
    classes.retain(|c| !c.outs.is_empty());
    classes
}

/// The transposed-convolution path (some lhs dilation > 1): the outputs are
/// split into phases (one class per spatial dimension), and each phase is an
/// im2col GEMM over only the kernel offsets that can meet input elements, so no
/// multiply is spent on the zeros that lhs dilation inserts.
pub(super) fn phase_task<T: FastFloat>(
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
    let out_strides = row_major_strides(&plan.out_spatial);
    let k_strides = row_major_strides(&plan.kernel_spatial);
    let counts: Vec<usize> = plan.phases.iter().map(Vec::len).collect();
    let combos: usize = counts.iter().product();
    let mut col = Vec::new();
    let mut weights = Vec::new();
    let mut out_sub = Vec::new();
    for combo in 0..combos {
        // The phase of every dimension for this combination.
        let mut rem = combo;
        let mut phase: Vec<&Phase> = Vec::with_capacity(nsp);
        for s in (0..nsp).rev() {
            phase.push(&plan.phases[s][rem % counts[s]]);
            rem /= counts[s];
        }
        phase.reverse();
        let outs: Vec<usize> = phase.iter().map(|ph| ph.outs.len()).collect();
        let ks: Vec<usize> = phase.iter().map(|ph| ph.kernel_offsets.len()).collect();
        let (n_out, n_k): (usize, usize) = (outs.iter().product(), ks.iter().product());
        // Flat output position and kernel offset of each phase member.
        let out_pos = flat_positions(&phase, |ph| &ph.outs, &out_strides);
        let k_pos = flat_positions(&phase, |ph| &ph.kernel_offsets, &k_strides);
        for g in 0..plan.feature_groups {
            let first_channel = example * plan.in_features + g * cg;
            let first_kernel_row = bg * plan.batch_group_out_features() + g * og;
            if n_k == 0 {
                for o in 0..og {
                    for &pos in &out_pos {
                        block[(g * og + o) * p + pos] = T::ZERO;
                    }
                }
                continue;
            }
            // Gathered kernel [og, cg·n_k] and patches [cg·n_k, n_out].
            weights.clear();
            for o in 0..og {
                let row = &rhs[(first_kernel_row + o) * cg * kprod..][..cg * kprod];
                for c in 0..cg {
                    weights.extend(k_pos.iter().map(|&k| row[c * kprod + k]));
                }
            }
            col.clear();
            for c in 0..cg {
                let src = &lhs[(first_channel + c) * plane..(first_channel + c + 1) * plane];
                for kk in 0..n_k {
                    let start = col.len();
                    col.resize(start + n_out, T::ZERO);
                    let mut kidx = vec![0usize; nsp];
                    let mut r = kk;
                    for s in (0..nsp).rev() {
                        kidx[s] = phase[s].kernel_offsets[r % ks[s]];
                        r /= ks[s];
                    }
                    gather_phase(
                        plan,
                        &phase,
                        &kidx,
                        &in_strides,
                        src,
                        0,
                        0,
                        &mut col[start..],
                    );
                }
            }
            out_sub.resize(og * n_out, T::ZERO);
            matmul(
                MatRef::row_major(&weights, og, cg * n_k),
                MatRef::row_major(&col, cg * n_k, n_out),
                &mut out_sub,
                n_out,
            );
            for o in 0..og {
                let dst = &mut block[(g * og + o) * p..(g * og + o + 1) * p];
                for (&pos, &v) in out_pos.iter().zip(&out_sub[o * n_out..(o + 1) * n_out]) {
                    dst[pos] = v;
                }
            }
        }
    }
}

/// Flat (row-major, `strides`) positions of the product of per-dimension index lists.
pub(super) fn flat_positions(
    phase: &[&Phase],
    list: impl Fn(&Phase) -> &Vec<usize>,
    strides: &[usize],
) -> Vec<usize> {
    let mut acc = vec![0usize];
    for (ph, &st) in phase.iter().zip(strides) {
        acc = acc
            .iter()
            .flat_map(|&base| list(ph).iter().map(move |&i| base + i * st))
            .collect();
    }
    acc
}

/// The im2col row of kernel offset `kidx` over the phase's output positions
/// (dimensions `dim..`), reading the channel plane `src` from `offset`.
#[allow(clippy::too_many_arguments)]
pub(super) fn gather_phase<T: FastFloat>(
    plan: &ConvPlan,
    phase: &[&Phase],
    kidx: &[usize],
    in_strides: &[usize],
    src: &[T],
    dim: usize,
    offset: usize,
    out: &mut [T],
) {
    if dim == phase.len() {
        out[0] = src[offset];
        return;
    }
    let idx = plan.tables[dim].row(kidx[dim]);
    let inner = out.len() / phase[dim].outs.len().max(1);
    for (chunk, &o) in out.chunks_mut(inner.max(1)).zip(&phase[dim].outs) {
        let i = idx[o];
        if i < 0 {
            chunk.fill(T::ZERO);
        } else if dim + 1 == phase.len() {
            chunk[0] = src[offset + i as usize];
        } else {
            gather_phase(
                plan,
                phase,
                kidx,
                in_strides,
                src,
                dim + 1,
                offset + i as usize * in_strides[dim],
                chunk,
            );
        }
    }
}

/// Geometry of the shifted-GEMM path, for unit strides, no lhs dilation and
/// non-negative padding. Each channel plane is copied once into a zero-padded
/// buffer; then, for every kernel offset `k`, the im2col row of `k` is the padded
/// buffer itself starting at `shift(k)`, provided outputs are computed on the
/// padded row pitch ("wide" outputs, whose extra columns are discarded). So the
/// convolution is `Kprod` GEMMs `W[:, :, k] [Og, Cg] × padded[:, shift(k)..]`
/// accumulated into `wide [Og, cols]`, and no im2col buffer is written.
#[derive(Clone, Debug)]
pub(super) struct ShiftGeometry {
    /// Row-major strides of the padded spatial extents.
    pub(super) padded_strides: Vec<usize>,
    pub(super) pad_low: Vec<usize>,
    /// Padded plane plus the zero tail that the discarded wide columns read.
    pub(super) plane_len: usize,
    /// Wide output positions: `out[0] · padded_strides[0]`.
    pub(super) cols: usize,
    /// `shift(k)` for every kernel offset (row-major).
    pub(super) shifts: Vec<usize>,
}

impl ShiftGeometry {
    pub(super) fn new(plan: &ConvPlan, attrs: &ir::ConvAttrs) -> Option<Self> {
        let nsp = plan.kernel_spatial.len();
        let get = |v: &[i64], s: usize| v.get(s).copied().unwrap_or(1);
        let eligible = nsp > 0
            && !plan.is_pointwise()
            && plan.group_in_features() >= 8
            && plan.kernel_size() <= 49
            && (0..nsp).all(|s| {
                let (lo, hi) = attrs.padding.get(s).copied().unwrap_or((0, 0));
                get(&attrs.window_strides, s) == 1
                    && get(&attrs.lhs_dilation, s) == 1
                    && lo >= 0
                    && hi >= 0
            });
        if !eligible {
            return None;
        }
        let pad_low: Vec<usize> = (0..nsp).map(|s| attrs.padding[s].0 as usize).collect();
        let padded: Vec<usize> = (0..nsp)
            .map(|s| plan.in_spatial[s] + attrs.padding[s].0 as usize + attrs.padding[s].1 as usize)
            .collect();
        let padded_strides = row_major_strides(&padded);
        let rd: Vec<usize> = (0..nsp)
            .map(|s| get(&attrs.rhs_dilation, s) as usize)
            .collect();
        let k_strides = row_major_strides(&plan.kernel_spatial);
        let shifts: Vec<usize> = (0..plan.kernel_size())
            .map(|kf| {
                (0..nsp)
                    .map(|s| {
                        ((kf / k_strides[s]) % plan.kernel_spatial[s]) * rd[s] * padded_strides[s]
                    })
                    .sum()
            })
            .collect();
        let cols = plan.out_spatial[0] * padded_strides[0];
        let max_shift = shifts.iter().copied().max().unwrap_or(0);
        let plane_len = (cols + max_shift).max(padded.iter().product());
        Some(ShiftGeometry {
            padded_strides,
            pad_low,
            plane_len,
            cols,
            shifts,
        })
    }
}

/// One feature group of one (example, batch group) on the shifted-GEMM path.
#[allow(clippy::too_many_arguments)]
pub(super) fn shifted_gemm<T: FastFloat>(
    plan: &ConvPlan,
    shift: &ShiftGeometry,
    lhs: &[T],
    rhs: &[T],
    example: usize,
    bg: usize,
    g: usize,
    padded: &mut [T],
    wide: &mut [T],
    block: &mut [T],
) {
    let p = plan.out_plane();
    let cg = plan.group_in_features();
    let og = plan.group_out_features();
    let kprod = plan.kernel_size();
    let plane = plan.in_plane();
    let nsp = plan.in_spatial.len();
    let first_channel = example * plan.in_features + g * cg;
    let first_kernel_row = bg * plan.batch_group_out_features() + g * og;
    // Zero-padded copy of the group's channels, one input row at a time.
    let row_len = plan.in_spatial[nsp - 1];
    let rows = plane / row_len.max(1);
    let row_shape = &plan.in_spatial[..nsp - 1];
    let row_strides = row_major_strides(row_shape);
    padded.fill(T::ZERO);
    for c in 0..cg {
        let src = &lhs[(first_channel + c) * plane..(first_channel + c + 1) * plane];
        let dst = &mut padded[c * shift.plane_len..(c + 1) * shift.plane_len];
        for r in 0..rows {
            let mut at = shift.pad_low[nsp - 1];
            for s in 0..nsp - 1 {
                at += ((r / row_strides[s]) % row_shape[s] + shift.pad_low[s])
                    * shift.padded_strides[s];
            }
            dst[at..at + row_len].copy_from_slice(&src[r * row_len..(r + 1) * row_len]);
        }
    }
    let weights = &rhs[first_kernel_row * cg * kprod..];
    for (k, &sh) in shift.shifts.iter().enumerate() {
        let a = MatRef {
            data: &weights[k..],
            rows: og,
            cols: cg,
            row_stride: cg * kprod,
            col_stride: kprod,
        };
        let b = MatRef {
            data: &padded[sh..],
            rows: cg,
            cols: shift.cols,
            row_stride: shift.plane_len,
            col_stride: 1,
        };
        if k == 0 {
            matmul(a, b, wide, shift.cols);
        } else {
            matmul_add(a, b, wide, shift.cols);
        }
    }
    // Keep the real outputs: row-major output rows from the wide pitch.
    let out_row = plan.out_spatial[nsp - 1];
    let out_rows = p / out_row.max(1);
    let out_row_shape = &plan.out_spatial[..nsp - 1];
    let out_row_strides = row_major_strides(out_row_shape);
    for o in 0..og {
        let src = &wide[o * shift.cols..(o + 1) * shift.cols];
        let dst = &mut block[(g * og + o) * p..(g * og + o + 1) * p];
        for r in 0..out_rows {
            let mut at = 0;
            for s in 0..nsp - 1 {
                at += ((r / out_row_strides[s]) % out_row_shape[s]) * shift.padded_strides[s];
            }
            dst[r * out_row..(r + 1) * out_row].copy_from_slice(&src[at..at + out_row]);
        }
    }
}
