//! The implicit-GEMM convolution with output positions in the vector lanes
//! (AVX-512, f32): a register tile is 8 output features × 3 vectors of 16
//! consecutive positions of one output row, so each reduction step loads 3
//! input vectors and broadcasts 8 kernel values for 24 fused multiply-adds.
//! The row tiles (one broadcast input element per row, output features in
//! the lanes) feed a 16-feature layer one FMA per broadcast — cifar8's
//! 16-channel 3 × 3 forms ran at ~50 % of the sgemm peak on one thread —
//! and need their accumulators transposed into `[feature][position]`; these
//! tiles store straight into the result's planes.
//!
//! Each output element is the same chain of fused multiply-adds over the
//! reduction, in the same order and from zero, as the row tiles compute it,
//! and the bias is added once when it is stored, as their scatter does: the
//! same bits.

#[cfg(target_arch = "x86_64")]
use std::arch::x86_64::*;

use super::Packed;

/// Output features per tile.
pub(super) const FEATURES: usize = 8;
/// Position vectors per tile, and the lanes of one.
const VECTORS: usize = 3;
const LANES: usize = 16;

/// Whether positions in lanes may be used (see [`set_lane_tiles`]).
static ON: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(true);

/// Lets the f32 convolutions whose output rows fill vector lanes use tiles
/// of positions × features (`true`, the default where the CPU has AVX-512)
/// or keeps them on the row tiles (`false`): both give the same bits; the
/// switch lets a benchmark compare the two in one process
/// (`conv_forms --ab-lanes`).
pub fn set_lane_tiles(on: bool) {
    ON.store(on, std::sync::atomic::Ordering::Relaxed);
}

/// The output row length when a convolution of this shape runs on lane tiles:
/// f32 with AVX-512, stride 1 along the last spatial dimension (consecutive
/// positions of a row read consecutive inputs), whole tiles of output
/// features, and rows that fill at least ¾ of their vectors' lanes.
pub(super) fn lane_row(
    is_f32: bool,
    strides: &[usize],
    out_spatial: &[usize],
    out_features: usize,
) -> Option<usize> {
    let row = *out_spatial.last()?;
    let lanes = row.div_ceil(LANES) * LANES;
    let fits = is_f32
        && ON.load(std::sync::atomic::Ordering::Relaxed)
        && strides.last() == Some(&1)
        && out_features.is_multiple_of(FEATURES)
        && row > 0
        && 4 * row >= 3 * lanes;
    #[cfg(target_arch = "x86_64")]
    let fits = fits && super::avx512::available();
    #[cfg(not(target_arch = "x86_64"))]
    let fits = false;
    fits.then_some(row)
}

/// One vector of positions: where its first position's window starts in the
/// padded input, where its first output lands in the task's result block
/// (feature 0), and how many of its lanes are positions.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(super) struct LaneVector {
    pub(super) base: usize,
    pub(super) out: usize,
    pub(super) lanes: usize,
}

/// The position vectors of `examples` padded examples of `chans` planes of
/// `plane` elements each, output rows of `row` positions (`origin`: each
/// output position's window origin in one padded example; `p`: positions per
/// output plane; `features`: output features per example of the result).
pub(super) fn lane_vectors(
    examples: usize,
    (chans, plane): (usize, usize),
    origin: &[usize],
    row: usize,
    features: usize,
) -> Vec<LaneVector> {
    let p = origin.len();
    let mut v = Vec::with_capacity(examples * p.div_ceil(LANES));
    for e in 0..examples {
        for r0 in (0..p).step_by(row) {
            for j in (0..row).step_by(LANES) {
                v.push(LaneVector {
                    base: e * chans * plane + origin[r0 + j],
                    out: e * features * p + r0 + j,
                    lanes: LANES.min(row - j),
                });
            }
        }
    }
    v
}

/// `out[vec.out + f·p + i] = Σ_k x[vec.base + i + k_offset[k]] · V[k][f]
/// (+ bias[f])` for every vector, lane `i < vec.lanes` and feature `f`: the
/// task's whole result block `[examples][features][p]`.
///
/// # Panics
/// Unless every vector's reads lie in `x`, its writes in `out`, and the
/// kernel holds `k_offset.len()` rows of whole tiles of features.
pub(super) fn lane_tiles(
    x: &[f32],
    vectors: &[LaneVector],
    k_offset: &[usize],
    kernel: Packed<'_, f32>,
    (features, p): (usize, usize),
    out: &mut [f32],
    bias: Option<&[f32]>,
) {
    let Packed {
        data: v,
        opad,
        panels,
    } = kernel;
    let k_len = k_offset.len();
    assert!(features.is_multiple_of(FEATURES) && features <= opad);
    assert!(panels.width.is_multiple_of(LANES) && opad.is_multiple_of(panels.width));
    assert_eq!(v.len(), k_len * opad, "kernel rows");
    assert!(bias.is_none_or(|b| b.len() >= features));
    let max_k = k_offset.iter().copied().max().unwrap_or(0);
    for vec in vectors {
        assert!((1..=LANES).contains(&vec.lanes));
        assert!(
            vec.base + max_k + vec.lanes <= x.len(),
            "lane reads inside x"
        );
        assert!(
            vec.out + (features - 1) * p + vec.lanes <= out.len(),
            "lane writes inside out"
        );
    }
    if k_len == 0 {
        for vec in vectors {
            for f in 0..features {
                // The row tiles' empty sum is 0, then the bias added: +0 for a −0 bias.
                let b = bias.map_or(0.0, |b| 0.0 + b[f]);
                out[vec.out + f * p..][..vec.lanes].fill(b);
            }
        }
        return;
    }
    #[cfg(target_arch = "x86_64")]
    for f0 in (0..features).step_by(FEATURES) {
        let w = &v[panels.at(k_len, 0, f0)..];
        let bias = bias.map(|b| &b[f0..f0 + FEATURES]);
        let mut tiles = vectors.chunks_exact(VECTORS);
        for t in tiles.by_ref() {
            // SAFETY: the CPU has AVX-512 (`lane_row`); the reads and writes
            // were checked above, the kernel rows by its length.
            unsafe { lane_tile::<VECTORS>(x, t, k_offset, w, panels.width, out, f0 * p, p, bias) };
        }
        let rest = tiles.remainder();
        // SAFETY: as above.
        unsafe {
            match rest.len() {
                1 => lane_tile::<1>(x, rest, k_offset, w, panels.width, out, f0 * p, p, bias),
                2 => lane_tile::<2>(x, rest, k_offset, w, panels.width, out, f0 * p, p, bias),
                _ => {}
            }
        }
    }
}

/// One tile: `P` position vectors × [`FEATURES`] features, the whole
/// reduction. `w` starts at feature `f0`'s kernel row 0; row `k` is `step`
/// floats further.
///
/// # Safety
/// The CPU has AVX-512F and FMA; the reads and writes of [`lane_tiles`]'s
/// checks; `w` holds `k_offset.len()` rows of `step`.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,fma")]
#[allow(clippy::too_many_arguments)]
unsafe fn lane_tile<const P: usize>(
    x: &[f32],
    vectors: &[LaneVector],
    k_offset: &[usize],
    w: &[f32],
    step: usize,
    out: &mut [f32],
    f_out: usize,
    p: usize,
    bias: Option<&[f32]>,
) {
    // SAFETY: every pointer stays inside `x`, `w` or `out` by the contract;
    // masked lanes are neither read nor written.
    unsafe {
        let masks: [__mmask16; P] = std::array::from_fn(|i| {
            let n = vectors[i].lanes;
            ((1u32 << n) - 1) as __mmask16
        });
        let xp: [*const f32; P] = std::array::from_fn(|i| x.as_ptr().add(vectors[i].base));
        let mut acc = [[_mm512_setzero_ps(); P]; FEATURES];
        let mut wp = w.as_ptr();
        for &k in k_offset {
            let xv: [__m512; P] =
                std::array::from_fn(|i| _mm512_maskz_loadu_ps(masks[i], xp[i].add(k)));
            for (f, row) in acc.iter_mut().enumerate() {
                let wf = _mm512_set1_ps(*wp.add(f));
                for (a, &xi) in row.iter_mut().zip(&xv) {
                    *a = _mm512_fmadd_ps(xi, wf, *a);
                }
            }
            wp = wp.add(step);
        }
        let o = out.as_mut_ptr();
        for (f, row) in acc.iter().enumerate() {
            let b = bias.map(|b| _mm512_set1_ps(b[f]));
            for (i, &a) in row.iter().enumerate() {
                let value = match b {
                    Some(b) => _mm512_add_ps(a, b),
                    None => a,
                };
                _mm512_mask_storeu_ps(o.add(vectors[i].out + f_out + f * p), masks[i], value);
            }
        }
    }
}
