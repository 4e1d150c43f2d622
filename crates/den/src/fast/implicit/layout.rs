//! The operands' layouts around the implicit-GEMM tiles: the zero-padded
//! copy of the input planes the tiles read, their row bases and reduction
//! offsets, the kernel packed as `V[(c, t)][o]` in one-register column panels,
//! and the scatter of the accumulators into the result `[b][o][p]` (16 × 16
//! register transpositions where the CPU has them, the same bits as the
//! scalar loops).

use std::any::TypeId;

use rayon::prelude::*;

use super::tiles::TileFloat;
use super::{avx2, avx512, same_type, same_type_mut, ImplicitConv};
use crate::fast::float::FastFloat;
use crate::tensor::row_major_strides;

/// A register transposition of a 16 × 16 f32 block (the scatter's and the
/// kernel packing's; the contract of `avx512::transpose16_f32`).
pub(super) type Transpose16 = unsafe fn(*const f32, usize, *mut f32, usize, usize, Option<&[f32]>);

/// The transposition the CPU runs, if any: the same bits as the scalar loops.
pub(super) fn transpose16() -> Option<Transpose16> {
    #[cfg(target_arch = "x86_64")]
    {
        if avx512::available() {
            return Some(avx512::transpose16_f32);
        }
        if avx2::available() {
            return Some(avx2::transpose16_f32);
        }
    }
    None
}

/// Copies input feature planes into zero-padded planes: each plane placed at
/// offset `max(pad_low, 0)` of a zero plane of the padded extents (negative
/// padding is applied by the row origins, which skip the cropped elements).
pub(super) struct PlaneCopier {
    /// Element strides of the input's batch and feature dimensions.
    strides: [usize; 2],
    in_plane: usize,
    plane: usize,
    row_len: usize,
    /// Destination offset (within a padded plane) of each input row.
    row_at: Vec<usize>,
}

impl PlaneCopier {
    pub(super) fn new(conv: &ImplicitConv<'_>, padded: &[usize]) -> Self {
        let nsp = conv.nsp();
        let pstrides = row_major_strides(padded);
        let low: Vec<usize> = conv
            .padding
            .iter()
            .map(|&(lo, _)| lo.max(0) as usize)
            .collect();
        let in_plane: usize = conv.in_spatial.iter().product();
        let row_len = conv.in_spatial[nsp - 1];
        let row_shape = &conv.in_spatial[..nsp - 1];
        let row_strides = row_major_strides(row_shape);
        let row_at = (0..in_plane / row_len.max(1))
            .map(|r| {
                low[nsp - 1]
                    + (0..nsp - 1)
                        .map(|s| ((r / row_strides[s]) % row_shape[s] + low[s]) * pstrides[s])
                        .sum::<usize>()
            })
            .collect();
        PlaneCopier {
            strides: conv.lhs_strides,
            in_plane,
            plane: padded.iter().product(),
            row_len,
            row_at,
        }
    }

    /// Fills `x` as `[examples][stride_chans][plane]` with the padded planes of
    /// `examples × chans` (`chans.len() ≤ stride_chans`); everything between
    /// the copied rows is zeroed (the buffer is scratch), so the padding
    /// reads zeros.
    pub(super) fn fill<U: FastFloat>(
        &self,
        lhs: &[U],
        examples: std::ops::Range<usize>,
        chans: std::ops::Range<usize>,
        stride_chans: usize,
        x: &mut [U],
    ) {
        for (bi, b) in examples.enumerate() {
            for (ci, c) in chans.clone().enumerate() {
                let src = &lhs[b * self.strides[0] + c * self.strides[1]..][..self.in_plane];
                let dst = &mut x[(bi * stride_chans + ci) * self.plane..][..self.plane];
                // Rows land at increasing offsets; only the gaps between
                // them (the padding) are zeroed, not the whole plane first.
                let mut done = 0;
                for (&at, row) in self
                    .row_at
                    .iter()
                    .zip(src.chunks_exact(self.row_len.max(1)))
                {
                    dst[done..at].fill(U::ZERO);
                    dst[at..at + self.row_len].copy_from_slice(row);
                    done = at + self.row_len;
                }
                dst[done..].fill(U::ZERO);
            }
        }
    }
}

/// Where the `opad` output-feature columns of the packed kernel `V[k][o]` and
/// of the accumulators `acc[r][o]` lie: in panels of `width` columns, each
/// panel holding all its rows contiguously, so element `(row, o)` of a
/// `rows`-row matrix is at `(o / width) · rows · width + row · width + o %
/// width`. `width = opad` is plain row-major (the tests' reference layout);
/// the tiles read `width = NV` (one vector register), which makes every
/// register tile's slice of `V` and of the accumulators one contiguous run. Row-major slices stride by `opad`: for
/// 512 features (2 KiB) a 128-row slice of `V` fell into two L1 sets and
/// across 64 pages, and ResNet-34's 7 × 7, 512-feature convolutions ran at
/// ~55 % of the rate of its other 3 × 3 convolutions on an AVX2 CPU.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(super) struct Panels {
    pub(super) width: usize,
}

/// See [`set_row_major_kernel_layout`].
static ROW_MAJOR_KERNEL: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// Lays the implicit-GEMM convolution's packed kernel and accumulators out
/// row-major (`true`) instead of in one-register panels (`false`, the
/// default): the layout before panels, kept so a benchmark can compare the
/// two in one process (`conv_forms --ab-layout`). Both give the same bits.
pub fn set_row_major_kernel_layout(row_major: bool) {
    ROW_MAJOR_KERNEL.store(row_major, std::sync::atomic::Ordering::Relaxed);
}

impl Panels {
    /// The layout the tile loops read (AVX-512, AVX2 and portable alike).
    pub(super) fn for_tiles<U: TileFloat>(opad: usize) -> Panels {
        if ROW_MAJOR_KERNEL.load(std::sync::atomic::Ordering::Relaxed) {
            return Panels { width: opad };
        }
        Panels { width: U::NV }
    }

    /// Index of element `(row, o)` of a matrix of `rows` rows.
    #[inline(always)]
    pub(super) fn at(self, rows: usize, row: usize, o: usize) -> usize {
        (o / self.width) * rows * self.width + row * self.width + o % self.width
    }
}

/// The packed kernel: `opad` columns per reduction row, laid out in `panels`.
#[derive(Clone, Copy)]
pub(super) struct Packed<'a, U> {
    pub(super) data: &'a [U],
    pub(super) opad: usize,
    pub(super) panels: Panels,
}

/// The kernel as `V[k][opad]` with `k = (c, t)` (output features padded with
/// zeros) in the layout `panels`, into `v`: element `(o, c, t)` is read at
/// `o · strides[0] + c · strides[1] + t`, `t` ranging over the `taps`
/// contiguous kernel offsets.
pub(super) fn pack_kernel<U: FastFloat>(
    rhs: &[U],
    o: usize,
    strides: [usize; 2],
    taps: usize,
    opad: usize,
    panels: Panels,
    v: &mut [U],
) {
    pack_kernel_with(rhs, o, strides, taps, (opad, panels), v, true)
}

/// [`pack_kernel`], with 16 × 16 blocks transposed in registers only when
/// `vectorise` (the weight-VJP packs the whole output gradient here: the
/// scalar transposition was ~5 % of a cifar8 step).
pub(super) fn pack_kernel_with<U: FastFloat>(
    rhs: &[U],
    o: usize,
    strides: [usize; 2],
    taps: usize,
    (opad, panels): (usize, Panels),
    v: &mut [U],
    vectorise: bool,
) {
    // Blocks of the reduction keep the written lines of V in cache while every
    // output feature's row is read.
    const BLOCK: usize = 256;
    let width = panels.width;
    assert!(width > 0 && opad.is_multiple_of(width) && v.len().is_multiple_of(opad));
    let k_len = v.len() / opad;
    let transpose = transpose16()
        .filter(|_| vectorise && TypeId::of::<U>() == TypeId::of::<f32>() && width % 16 == 0);
    v.par_chunks_mut(k_len.max(1) * width)
        .enumerate()
        .flat_map(|(panel, cols)| {
            cols.par_chunks_mut(BLOCK * width)
                .enumerate()
                .map(move |(blk, dst)| (panel, blk, dst))
        })
        .for_each(|(panel, blk, dst)| {
            let k0 = blk * BLOCK;
            let n = dst.len() / width;
            // The panel's real output features o_lo..o_hi.
            let o_lo = panel * width;
            let o_hi = (o_lo + width).min(o);
            if o_lo + width > o {
                dst.fill(U::ZERO);
            }
            // Output features taken 16 at a time by the register transposition.
            let o_vec = if transpose.is_some() {
                o_lo + o_hi.saturating_sub(o_lo) / 16 * 16
            } else {
                o_lo
            };
            // The block's k range, in runs of one input feature's taps.
            let mut j = 0;
            while j < n {
                let (c, t) = ((k0 + j) / taps, (k0 + j) % taps);
                let len = (taps - t).min(n - j);
                let base = c * strides[1] + t;
                if o_vec > o_lo {
                    let (src, out) = (
                        same_type::<U, f32>(rhs).expect("U is f32"),
                        same_type_mut::<U, f32>(dst).expect("U is f32"),
                    );
                    let len_vec = len / 16 * 16;
                    for o0 in (o_lo..o_vec).step_by(16) {
                        for jj in (0..len_vec).step_by(16) {
                            let at = o0 * strides[0] + base + jj;
                            assert!(at + 15 * strides[0] + 16 <= src.len());
                            assert!((j + jj + 15) * width + o0 - o_lo + 16 <= out.len());
                            // SAFETY: the CPU runs `transpose` (o_vec > o_lo);
                            // the asserts bound the 16 feature rows read and
                            // the 16 k rows written.
                            unsafe {
                                transpose.expect("o_vec > o_lo")(
                                    src.as_ptr().add(at),
                                    strides[0],
                                    out.as_mut_ptr().add((j + jj) * width + o0 - o_lo),
                                    width,
                                    16,
                                    None,
                                )
                            };
                        }
                        for oi in o0..o0 + 16 {
                            let at = oi * strides[0] + base;
                            for jj in len_vec..len {
                                out[(j + jj) * width + oi - o_lo] = src[at + jj];
                            }
                        }
                    }
                }
                for oi in o_vec..o_hi {
                    let at = oi * strides[0] + base;
                    for (jj, &w) in rhs[at..at + len].iter().enumerate() {
                        dst[(j + jj) * width + oi - o_lo] = w;
                    }
                }
                j += len;
            }
        });
}

/// Row bases of `examples` in a padded buffer `[examples][chans][plane]`
/// (window origins `origin` in each plane), padded to whole tiles of `mr`.
pub(super) fn row_bases(
    examples: std::ops::Range<usize>,
    chans: usize,
    plane: usize,
    origin: &[usize],
    mr: usize,
) -> Vec<usize> {
    padded_rows(
        examples.flat_map(|b| origin.iter().map(move |&q| b * chans * plane + q)),
        mr,
    )
}

/// Reduction offsets `(c, t)` of `chans` padded planes: plane `c` plus tap `t`.
pub(super) fn k_offsets(chans: usize, plane: usize, tap_offsets: &[usize]) -> Vec<usize> {
    (0..chans)
        .flat_map(|c| tap_offsets.iter().map(move |&t| c * plane + t))
        .collect()
}

/// Row bases padded to whole tiles (extra rows read the first input element and
/// are discarded).
fn padded_rows(bases: impl Iterator<Item = usize>, mr: usize) -> Vec<usize> {
    let mut rows: Vec<usize> = bases.collect();
    rows.resize(rows.len().div_ceil(mr) * mr, 0);
    rows
}

/// `acc[r][o]` (`opad` columns in `panels`) → `out[b][o][p]` for the real
/// rows, in blocks of positions so the transposed reads stay within a few
/// cache lines. With `bias`, `bias[o]` is added to every element of output
/// feature `o`.
pub(super) fn scatter<U: FastFloat>(
    acc: &[U],
    layout: (usize, Panels),
    o: usize,
    p: usize,
    out: &mut [U],
    bias: Option<&[U]>,
) {
    scatter_with(acc, layout, o, p, out, bias, true)
}

/// [`scatter`], with the register transposition only when `vectorise`.
pub(super) fn scatter_with<U: FastFloat>(
    acc: &[U],
    (opad, panels): (usize, Panels),
    o: usize,
    p: usize,
    out: &mut [U],
    bias: Option<&[U]>,
    vectorise: bool,
) {
    const BLOCK: usize = 16;
    let rows = acc.len() / opad;
    let width = panels.width;
    // Whole 16 × 16 blocks transposed in registers where the CPU has
    // AVX-512 or AVX2 (the scalar transposition below was ~7 % of a cifar8
    // step).
    let mut vector_p = 0;
    if let (Some(acc32), Some(out32), Some(transpose)) = (
        same_type::<U, f32>(acc),
        same_type_mut::<U, f32>(out),
        transpose16().filter(|_| vectorise && width % BLOCK == 0),
    ) {
        vector_p = p / BLOCK * BLOCK;
        let bias32 = bias.map(|b| same_type::<U, f32>(b).expect("bias has the output's type"));
        for b in 0..out32.len() / (o * p) {
            for p0 in (0..vector_p).step_by(BLOCK) {
                for o0 in (0..o).step_by(BLOCK) {
                    let src = &acc32[panels.at(rows, b * p + p0, o0)..];
                    assert!(src.len() >= (BLOCK - 1) * width + BLOCK && o0 + BLOCK <= opad);
                    let cols = (o - o0).min(BLOCK);
                    let at = b * o * p + o0 * p + p0;
                    assert!(at + (cols - 1) * p + BLOCK <= out32.len());
                    // SAFETY: the CPU runs `transpose`; the asserts bound
                    // the 16 source rows of 16 (within one panel: o0 and
                    // the width are multiples of 16) and the `cols`
                    // destination rows of 16 (positions p0..p0 + 16 ≤ p).
                    unsafe {
                        transpose(
                            src.as_ptr(),
                            width,
                            out32.as_mut_ptr().add(at),
                            p,
                            cols,
                            bias32.map(|b| &b[o0..o0 + cols]),
                        )
                    };
                }
            }
        }
    }
    for (b, example) in out.chunks_exact_mut(o * p).enumerate() {
        for p0 in (vector_p..p).step_by(BLOCK) {
            let p1 = (p0 + BLOCK).min(p);
            for oi in 0..o {
                let dst = &mut example[oi * p + p0..oi * p + p1];
                let add = bias.map_or(U::ZERO, |bias| bias[oi]);
                for (j, d) in dst.iter_mut().enumerate() {
                    let a = acc[panels.at(rows, b * p + p0 + j, oi)];
                    *d = if bias.is_some() { a + add } else { a };
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ir::rng::Rng;

    /// The packed kernel with 16 × 16 register transpositions is the scalar
    /// packing bit for bit: feature counts with and without a partial block,
    /// tap runs longer and shorter than 16 and cut by the 256-row blocks,
    /// strided (transposed) kernels as the weight-VJP passes them.
    #[test]
    fn vector_kernel_packing_is_the_scalar_packing_bit_for_bit() {
        let mut rng = Rng::new(12);
        for (o, c, taps, transposed) in [
            (16usize, 3usize, 9usize, false),
            (16, 4, 1024, true),
            (33, 5, 49, false),
            (32, 7, 17, true),
            (8, 2, 300, true),
            (48, 3, 16, false),
        ] {
            let opad = o.div_ceil(16) * 16;
            let rhs: Vec<f32> = (0..o * c * taps)
                .map(|_| rng.signed_unit() as f32)
                .collect();
            // [o][c][taps] as stored, or [c][o][taps] read through strides.
            let strides = if transposed {
                [taps, o * taps]
            } else {
                [c * taps, taps]
            };
            // Row-major (the AVX-512 tiles') and panels of 16 (the others').
            for panels in [Panels { width: opad }, Panels { width: 16 }] {
                let mut want = vec![f32::NAN; c * taps * opad];
                let mut got = vec![f32::NAN; c * taps * opad];
                pack_kernel_with(&rhs, o, strides, taps, (opad, panels), &mut want, false);
                pack_kernel_with(&rhs, o, strides, taps, (opad, panels), &mut got, true);
                let same = want
                    .iter()
                    .zip(&got)
                    .all(|(a, b)| a.to_bits() == b.to_bits());
                assert!(
                    same,
                    "o {o}, c {c}, taps {taps}, transposed {transposed}, {panels:?}"
                );
                for k in 0..c * taps {
                    for oi in 0..opad {
                        let v = if oi < o {
                            rhs[oi * strides[0] + k / taps * strides[1] + k % taps]
                        } else {
                            0.0
                        };
                        let w = want[panels.at(c * taps, k, oi)];
                        assert_eq!(w.to_bits(), v.to_bits(), "k {k}, o {oi}, {panels:?}");
                    }
                }
            }
        }
    }

    /// The register transposition writes what the scalar loop writes, bit
    /// for bit: feature counts below, at and past a block of 16 (a partial
    /// last block of features), position counts with and without a
    /// remainder, several examples, with and without a bias.
    #[test]
    fn vector_scatter_is_the_scalar_scatter_bit_for_bit() {
        let mut rng = Rng::new(11);
        for (o, p, batch) in [
            (16usize, 16usize, 1usize),
            (1, 16, 2),
            (5, 33, 2),
            (16, 1024, 2),
            (17, 17, 3),
            (32, 64, 1),
            (40, 15, 2),
            (64, 49, 2),
        ] {
            let opad = o.div_ceil(16) * 16;
            let acc: Vec<f32> = (0..batch * p * opad)
                .map(|_| rng.signed_unit() as f32)
                .collect();
            let bias: Vec<f32> = (0..o).map(|_| rng.signed_unit() as f32).collect();
            let panel_kinds = [Panels { width: opad }, Panels { width: 16 }];
            for (bias, panels) in [None, Some(&bias[..])]
                .into_iter()
                .flat_map(|b| panel_kinds.map(|k| (b, k)))
            {
                let mut want = vec![f32::NAN; batch * o * p];
                let mut got = vec![f32::NAN; batch * o * p];
                scatter_with(&acc, (opad, panels), o, p, &mut want, bias, false);
                scatter_with(&acc, (opad, panels), o, p, &mut got, bias, true);
                let same = want
                    .iter()
                    .zip(&got)
                    .all(|(a, b)| a.to_bits() == b.to_bits());
                assert!(
                    same,
                    "o {o}, p {p}, batch {batch}, bias {}, {panels:?}",
                    bias.is_some()
                );
                // And the scalar loop is the definition: out[b][o][p] = acc[b·p + p][o] (+ bias[o]).
                for (i, &w) in want.iter().enumerate() {
                    let (b, oi, pi) = (i / (o * p), i / p % o, i % p);
                    let a = acc[panels.at(batch * p, b * p + pi, oi)];
                    let v = bias.map_or(a, |bs| a + bs[oi]);
                    assert_eq!(w.to_bits(), v.to_bits());
                }
            }
        }
    }
}
