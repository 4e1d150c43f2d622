//! Non-overlapping 2-D pooling for the f32 plan: `reduce_window` (max/min)
//! and `select_and_scatter` whose windows tile the last two dimensions
//! (window = stride, no padding, no dilation, leading dimensions untouched),
//! the max-pool of cifar8 and its backward. Each output folds its window in
//! the generic evaluator's scan order with its tie and NaN rules, so results
//! are bit-identical; planes run in parallel, in tasks of about
//! [`TASK_ELEMS`] input elements.
//!
//! The 2×2 window (the cifar8 max-pool) has its own loops: two input rows
//! at a time, every output element written once (no fill pass), no
//! data-dependent branch. On x86-64 with AVX2 (chosen at run time) eight
//! windows go per vector ([`simd`]): the same compares, bit selects and the
//! one `init + source` add, lane-wise, so the bits are the portable loop's.

use crate::fused::{max_f32, min_f32};
use rayon::prelude::*;

/// Geometry of a tiling window over `[planes, ih, iw]`.
#[derive(Clone, Debug)]
pub(crate) struct Tiles {
    planes: usize,
    ih: usize,
    iw: usize,
    kh: usize,
    kw: usize,
    oh: usize,
    ow: usize,
}

/// Input elements per parallel task (whole planes, at least one): large
/// enough that a task's work dwarfs its scheduling.
const TASK_ELEMS: usize = 1 << 16;

/// Whether the 2×2 loops run in their AVX2 form.
#[cfg(target_arch = "x86_64")]
fn avx2() -> bool {
    std::arch::is_x86_feature_detected!("avx2")
}

/// Runs `f(first, n, out)` over runs of `n` planes from plane `first`,
/// `out` their output (`len` elements a plane), in parallel tasks of about
/// [`TASK_ELEMS`] input elements (`pin` a plane). When `merge` (the window
/// rows tile the plane rows, so a run of planes is one taller plane) a task
/// is one run, else each plane is.
fn for_planes(
    out: &mut [f32],
    len: usize,
    pin: usize,
    merge: bool,
    f: impl Fn(usize, usize, &mut [f32]) + Sync,
) {
    if len == 0 {
        return;
    }
    let per_task = (TASK_ELEMS / pin.max(1)).max(1);
    let task = |t: usize, o: &mut [f32]| {
        let first = t * per_task;
        if merge {
            f(first, o.len() / len, o);
        } else {
            for (k, op) in o.chunks_mut(len).enumerate() {
                f(first + k, 1, op);
            }
        }
    };
    if out.len() <= len * per_task {
        task(0, out);
    } else {
        out.par_chunks_mut(len * per_task)
            .enumerate()
            .for_each(|(t, o)| task(t, o));
    }
}

/// The 2×2 `reduce_window` of one plane, or of a run of planes whose rows
/// the windows tile (one taller plane): `xp` its input, `o` its output: `f(f(f(f(init, r0[2j]), r0[2j+1]), r1[2j]), r1[2j+1])`,
/// the generic scan order.
#[inline(always)]
fn fold_plane_2x2(
    xp: &[f32],
    iw: usize,
    ow: usize,
    init: f32,
    f: &impl Fn(f32, f32) -> f32,
    o: &mut [f32],
) {
    for (orow, rows) in o.chunks_exact_mut(ow).zip(xp.chunks_exact(2 * iw)) {
        let (r0, r1) = rows.split_at(iw);
        for ((o, a), b) in orow
            .iter_mut()
            .zip(r0.chunks_exact(2))
            .zip(r1.chunks_exact(2))
        {
            *o = f(f(f(f(init, a[0]), a[1]), b[0]), b[1]);
        }
    }
}

/// `b` where `m` is all ones, `a` where it is zero: a bit select, no branch.
#[inline(always)]
fn pick(m: u32, a: f32, b: f32) -> f32 {
    f32::from_bits((b.to_bits() & m) | (a.to_bits() & !m))
}

/// One 2×2 window of `select_and_scatter`, values `v` in scan order: the
/// scan keeps its best while `keep(best, next)` holds and moves to `next`
/// otherwise; the selected position gets `hit`, the other three `init`.
#[inline(always)]
fn scatter_window(v: [f32; 4], hit: f32, init: f32, keep: &impl Fn(f32, f32) -> bool) -> [f32; 4] {
    let moves = |best: f32, next: f32| (!keep(best, next) as u32).wrapping_neg();
    let m1 = moves(v[0], v[1]);
    let best = pick(m1, v[0], v[1]);
    let m2 = moves(best, v[2]);
    let best = pick(m2, best, v[2]);
    let m3 = moves(best, v[3]);
    [
        pick(!(m1 | m2 | m3), init, hit),
        pick(m1 & !(m2 | m3), init, hit),
        pick(m2 & !m3, init, hit),
        pick(m3, init, hit),
    ]
}

/// The 2×2 `select_and_scatter` of one plane (or run of planes, as
/// [`fold_plane_2x2`]): `xp` its input, `sp` its source, `o` its output. Each band of two input rows writes its
/// two output rows once, in the scan order `r0[c], r0[c+1], r1[c], r1[c+1]`;
/// rows and columns no window covers get `init`.
#[inline(always)]
fn scatter_plane_2x2(
    xp: &[f32],
    sp: &[f32],
    iw: usize,
    ow: usize,
    init: f32,
    keep: &impl Fn(f32, f32) -> bool,
    o: &mut [f32],
) {
    let band = 2 * iw;
    let covered = sp.len() / ow * band;
    for ((rows, orows), srow) in xp
        .chunks_exact(band)
        .zip(o[..covered].chunks_exact_mut(band))
        .zip(sp.chunks_exact(ow))
    {
        let (r0, r1) = rows.split_at(iw);
        let (o0, o1) = orows.split_at_mut(iw);
        for (j, &s) in srow.iter().enumerate() {
            let c = 2 * j;
            let w = scatter_window([r0[c], r0[c + 1], r1[c], r1[c + 1]], init + s, init, keep);
            o0[c..c + 2].copy_from_slice(&w[..2]);
            o1[c..c + 2].copy_from_slice(&w[2..]);
        }
        o0[2 * ow..].fill(init);
        o1[2 * ow..].fill(init);
    }
    o[covered..].fill(init);
}

/// `_mm256_cmp_ps` predicates that are Rust's `>=`, `>`, `<=`, `<`, `==`,
/// `!=` on f32 (ordered and quiet; `!=` unordered: true on NaN).
const CMP_GE: i32 = 29;
const CMP_GT: i32 = 30;
const CMP_LE: i32 = 18;
const CMP_LT: i32 = 17;
const CMP_EQ: i32 = 0;
const CMP_NE: i32 = 4;
#[cfg(target_arch = "x86_64")]
const _: () = {
    use std::arch::x86_64::*;
    assert!(CMP_GE == _CMP_GE_OQ && CMP_GT == _CMP_GT_OQ && CMP_LE == _CMP_LE_OQ);
    assert!(CMP_LT == _CMP_LT_OQ && CMP_EQ == _CMP_EQ_OQ && CMP_NE == _CMP_NEQ_UQ);
};

/// The 2×2 loops with AVX2, eight windows per vector. Vectors `v0..v3`
/// hold the four values of eight windows in scan order. Three layouts feed
/// them:
/// - rows of a multiple of 8 windows: 16 columns of a band;
/// - rows of 4 windows: two bands, 8 columns each;
/// - planes 4 wide (2 windows a row): four bands, 32 contiguous values.
///
/// The first two leave the windows in lane order 0, 1, 4, 5, 2, 3, 6, 7
/// (an in-lane deinterleave), the third in order. Remaining bands go to the
/// portable loop.
#[cfg(target_arch = "x86_64")]
mod simd {
    use std::arch::x86_64::*;

    /// Even and odd elements of `a ++ b`, lanes in order 0, 1, 4, 5, 2, 3, 6, 7.
    #[inline]
    #[target_feature(enable = "avx2")]
    fn deinterleave(a: __m256, b: __m256) -> (__m256, __m256) {
        (
            _mm256_shuffle_ps::<0x88>(a, b),
            _mm256_shuffle_ps::<0xDD>(a, b),
        )
    }

    /// Swaps the middle two 64-bit quarters: lane order 0..8 to
    /// 0, 1, 4, 5, 2, 3, 6, 7 and back.
    #[inline]
    #[target_feature(enable = "avx2")]
    fn swap_mid(a: __m256) -> __m256 {
        _mm256_castpd_ps(_mm256_permute4x64_pd::<0xD8>(_mm256_castps_pd(a)))
    }

    /// Eight values from `s[at..at + 8]` (bounds-checked).
    #[inline]
    #[target_feature(enable = "avx2")]
    fn load(s: &[f32], at: usize) -> __m256 {
        let s = &s[at..at + 8];
        // SAFETY: `s` holds 8 values.
        unsafe { _mm256_loadu_ps(s.as_ptr()) }
    }

    /// Stores eight values at `o[at..at + 8]` (bounds-checked).
    #[inline]
    #[target_feature(enable = "avx2")]
    fn store(o: &mut [f32], at: usize, v: __m256) {
        let o = &mut o[at..at + 8];
        // SAFETY: `o` holds 8 values.
        unsafe { _mm256_storeu_ps(o.as_mut_ptr(), v) }
    }

    /// StableHLO `maximum` (`MAX`) or `minimum` lane-wise, as `max_f32` /
    /// `min_f32`: `b` when it is greater (less), when only `b` is NaN, or
    /// when the two are equal and `a` is `-0` (`+0`). `blendv` reads the
    /// top bit, so `eq & a` (`eq & !a`) is the sign condition.
    #[inline]
    #[target_feature(enable = "avx2")]
    fn fold_op<const MAX: bool>(a: __m256, b: __m256) -> __m256 {
        let better = if MAX {
            _mm256_cmp_ps::<_CMP_GT_OQ>(b, a)
        } else {
            _mm256_cmp_ps::<_CMP_LT_OQ>(b, a)
        };
        let a_nan = _mm256_cmp_ps::<_CMP_UNORD_Q>(a, a);
        let b_nan = _mm256_cmp_ps::<_CMP_UNORD_Q>(b, b);
        let eq = _mm256_cmp_ps::<_CMP_EQ_OQ>(a, b);
        let signed = if MAX {
            _mm256_and_ps(eq, a)
        } else {
            _mm256_andnot_ps(a, eq)
        };
        let pick_b = _mm256_or_ps(_mm256_or_ps(better, _mm256_andnot_ps(a_nan, b_nan)), signed);
        _mm256_blendv_ps(a, b, pick_b)
    }

    /// The fold of eight windows from `init`.
    #[inline]
    #[target_feature(enable = "avx2")]
    fn fold8<const MAX: bool>(v: [__m256; 4], init: f32) -> __m256 {
        let acc = fold_op::<MAX>(_mm256_set1_ps(init), v[0]);
        let acc = fold_op::<MAX>(acc, v[1]);
        let acc = fold_op::<MAX>(acc, v[2]);
        fold_op::<MAX>(acc, v[3])
    }

    /// The scatter of eight windows: per scan position, `hit` where it is
    /// selected, else `init` (`scatter_window` lane-wise; `P` is `keep`).
    #[inline]
    #[target_feature(enable = "avx2")]
    fn scatter8<const P: i32>(v: [__m256; 4], hit: __m256, init: __m256) -> [__m256; 4] {
        // `k_i`: the scan keeps its best at the i-th value.
        let k1 = _mm256_cmp_ps::<P>(v[0], v[1]);
        let best = _mm256_blendv_ps(v[1], v[0], k1);
        let k2 = _mm256_cmp_ps::<P>(best, v[2]);
        let best = _mm256_blendv_ps(v[2], best, k2);
        let k3 = _mm256_cmp_ps::<P>(best, v[3]);
        let k23 = _mm256_and_ps(k2, k3);
        [
            _mm256_blendv_ps(init, hit, _mm256_and_ps(k1, k23)),
            _mm256_blendv_ps(init, hit, _mm256_andnot_ps(k1, k23)),
            _mm256_blendv_ps(init, hit, _mm256_andnot_ps(k2, k3)),
            _mm256_blendv_ps(hit, init, k3),
        ]
    }

    /// Window values from two rows: `r0[a..a+8] ++ r0[b..b+8]` and the same
    /// of `r1` (lane order 0, 1, 4, 5, 2, 3, 6, 7).
    #[inline]
    #[target_feature(enable = "avx2")]
    fn gather_rows(r0: &[f32], r1: &[f32], a: usize, b: usize) -> [__m256; 4] {
        let (v0, v1) = deinterleave(load(r0, a), load(r0, b));
        let (v2, v3) = deinterleave(load(r1, a), load(r1, b));
        [v0, v1, v2, v3]
    }

    /// The windows of four 4-wide bands, `x[at..at + 32]`, in order.
    #[inline]
    #[target_feature(enable = "avx2")]
    fn gather_quad(x: &[f32], at: usize) -> [__m256; 4] {
        let (e1, o1) = deinterleave(load(x, at), load(x, at + 8));
        let (e2, o2) = deinterleave(load(x, at + 16), load(x, at + 24));
        [
            _mm256_permute2f128_ps::<0x20>(e1, e2),
            _mm256_permute2f128_ps::<0x20>(o1, o2),
            _mm256_permute2f128_ps::<0x31>(e1, e2),
            _mm256_permute2f128_ps::<0x31>(o1, o2),
        ]
    }

    /// `reduce_window` of one plane, as [`super::fold_plane_2x2`].
    #[target_feature(enable = "avx2")]
    pub(super) fn fold_plane<const MAX: bool>(
        xp: &[f32],
        iw: usize,
        ow: usize,
        init: f32,
        f: &impl Fn(f32, f32) -> f32,
        o: &mut [f32],
    ) {
        let band = 2 * iw;
        let oh = o.len() / ow;
        let done = if ow.is_multiple_of(8) {
            for (orow, rows) in o.chunks_exact_mut(ow).zip(xp.chunks_exact(band)) {
                let (r0, r1) = rows.split_at(iw);
                for j in (0..ow).step_by(8) {
                    let v = gather_rows(r0, r1, 2 * j, 2 * j + 8);
                    store(orow, j, swap_mid(fold8::<MAX>(v, init)));
                }
            }
            oh
        } else if ow == 4 {
            for (k, orows) in o.chunks_exact_mut(8).enumerate() {
                let at = 2 * k * band;
                let v = gather_rows(&xp[at..], &xp[at + iw..], 0, band);
                store(orows, 0, swap_mid(fold8::<MAX>(v, init)));
            }
            oh / 2 * 2
        } else if ow == 2 && iw == 4 {
            for (k, orows) in o.chunks_exact_mut(8).enumerate() {
                store(orows, 0, fold8::<MAX>(gather_quad(xp, 32 * k), init));
            }
            oh / 4 * 4
        } else {
            0
        };
        super::fold_plane_2x2(&xp[done * band..], iw, ow, init, f, &mut o[done * ow..]);
    }

    /// `select_and_scatter` of one plane, as [`super::scatter_plane_2x2`];
    /// `P` is `keep` as an `_mm256_cmp_ps` predicate.
    #[target_feature(enable = "avx2")]
    pub(super) fn scatter_plane<const P: i32>(
        xp: &[f32],
        sp: &[f32],
        iw: usize,
        ow: usize,
        init: f32,
        keep: &impl Fn(f32, f32) -> bool,
        o: &mut [f32],
    ) {
        let band = 2 * iw;
        let oh = sp.len() / ow;
        let iv = _mm256_set1_ps(init);
        let done = if ow.is_multiple_of(8) {
            for ((rows, orows), srow) in xp
                .chunks_exact(band)
                .zip(o.chunks_exact_mut(band))
                .zip(sp.chunks_exact(ow))
            {
                let (r0, r1) = rows.split_at(iw);
                let (o0, o1) = orows.split_at_mut(iw);
                for j in (0..ow).step_by(8) {
                    let (a, b) = (2 * j, 2 * j + 8);
                    let hit = _mm256_add_ps(iv, swap_mid(load(srow, j)));
                    let w = scatter8::<P>(gather_rows(r0, r1, a, b), hit, iv);
                    store(o0, a, _mm256_unpacklo_ps(w[0], w[1]));
                    store(o0, b, _mm256_unpackhi_ps(w[0], w[1]));
                    store(o1, a, _mm256_unpacklo_ps(w[2], w[3]));
                    store(o1, b, _mm256_unpackhi_ps(w[2], w[3]));
                }
                o0[2 * ow..].fill(init);
                o1[2 * ow..].fill(init);
            }
            oh
        } else if ow == 4 {
            for ((k, orows), s) in o
                .chunks_exact_mut(2 * band)
                .take(oh / 2)
                .enumerate()
                .zip(sp.chunks_exact(8))
            {
                let at = 2 * k * band;
                let hit = _mm256_add_ps(iv, swap_mid(load(s, 0)));
                let w = scatter8::<P>(gather_rows(&xp[at..], &xp[at + iw..], 0, band), hit, iv);
                let (o0, o1) = (iw, band + iw);
                store(orows, 0, _mm256_unpacklo_ps(w[0], w[1]));
                store(orows, band, _mm256_unpackhi_ps(w[0], w[1]));
                store(orows, o0, _mm256_unpacklo_ps(w[2], w[3]));
                store(orows, o1, _mm256_unpackhi_ps(w[2], w[3]));
                for r in orows.chunks_exact_mut(iw) {
                    r[8..].fill(init);
                }
            }
            oh / 2 * 2
        } else if ow == 2 && iw == 4 {
            for ((k, orows), s) in o
                .chunks_exact_mut(32)
                .take(oh / 4)
                .enumerate()
                .zip(sp.chunks_exact(8))
            {
                let hit = _mm256_add_ps(iv, load(s, 0));
                let w = scatter8::<P>(gather_quad(xp, 32 * k), hit, iv);
                let (l01, h01) = (
                    _mm256_unpacklo_ps(w[0], w[1]),
                    _mm256_unpackhi_ps(w[0], w[1]),
                );
                let (l23, h23) = (
                    _mm256_unpacklo_ps(w[2], w[3]),
                    _mm256_unpackhi_ps(w[2], w[3]),
                );
                store(orows, 0, _mm256_permute2f128_ps::<0x20>(l01, l23));
                store(orows, 8, _mm256_permute2f128_ps::<0x20>(h01, h23));
                store(orows, 16, _mm256_permute2f128_ps::<0x31>(l01, l23));
                store(orows, 24, _mm256_permute2f128_ps::<0x31>(h01, h23));
            }
            oh / 4 * 4
        } else {
            0
        };
        let (at, s) = (done * band, done * ow);
        super::scatter_plane_2x2(&xp[at..], &sp[s..], iw, ow, init, keep, &mut o[at..]);
    }
}

fn attr(v: &[i64], d: usize, default: i64) -> i64 {
    v.get(d).copied().unwrap_or(default)
}

impl Tiles {
    /// The tiling, when the window attributes describe one.
    pub fn new(
        in_shape: &[usize],
        out_shape: &[usize],
        window: &[i64],
        strides: &[i64],
        padding: &[(i64, i64)],
        dilations: [&[i64]; 2],
    ) -> Option<Tiles> {
        let rank = in_shape.len();
        if rank < 2 || out_shape.len() != rank || window.len() != rank {
            return None;
        }
        for d in 0..rank {
            let (w, s) = (window[d], attr(strides, d, 1));
            let pad = padding.get(d).copied().unwrap_or((0, 0));
            let undilated = dilations.iter().all(|v| attr(v, d, 1) == 1);
            let leading = d + 2 < rank;
            if pad != (0, 0) || !undilated || w < 1 || s != w || (leading && w != 1) {
                return None;
            }
            if out_shape[d] != in_shape[d] / w as usize {
                return None;
            }
        }
        Some(Tiles {
            planes: in_shape[..rank - 2].iter().product(),
            ih: in_shape[rank - 2],
            iw: in_shape[rank - 1],
            kh: window[rank - 2] as usize,
            kw: window[rank - 1] as usize,
            oh: out_shape[rank - 2],
            ow: out_shape[rank - 1],
        })
    }

    /// `reduce_window` with `maximum` (`max`) or `minimum`, from `init`.
    pub fn fold(&self, x: &[f32], init: f32, max: bool, out: &mut [f32]) {
        // Monomorphised per fold op: a function pointer here costs an
        // indirect call per element.
        if max {
            self.fold_with::<true>(x, init, max_f32, out)
        } else {
            self.fold_with::<false>(x, init, min_f32, out)
        }
    }

    /// `MAX`: `f` is `max_f32` (else `min_f32`), for the AVX2 loop.
    fn fold_with<const MAX: bool>(
        &self,
        x: &[f32],
        init: f32,
        f: impl Fn(f32, f32) -> f32 + Sync,
        out: &mut [f32],
    ) {
        let (pin, pout) = (self.ih * self.iw, self.oh * self.ow);
        let (kh, kw, iw, ow) = (self.kh, self.kw, self.iw, self.ow);
        #[cfg(target_arch = "x86_64")]
        let avx2 = avx2();
        let planes = |p: usize, n: usize, o: &mut [f32]| {
            let xp = &x[p * pin..(p + n) * pin];
            if kh == 2 && kw == 2 {
                // The cifar8 max-pool: two input rows in, one output row out.
                #[cfg(target_arch = "x86_64")]
                if avx2 {
                    // SAFETY: the CPU has AVX2.
                    unsafe { simd::fold_plane::<MAX>(xp, iw, ow, init, &f, o) };
                    return;
                }
                fold_plane_2x2(xp, iw, ow, init, &f, o);
                return;
            }
            for (oy, orow) in o.chunks_exact_mut(ow).enumerate() {
                let rows = &xp[oy * kh * iw..(oy + 1) * kh * iw];
                for (ox, o) in orow.iter_mut().enumerate() {
                    let mut acc = init;
                    for ky in 0..kh {
                        let at = ky * iw + ox * kw;
                        for &v in &rows[at..at + kw] {
                            acc = f(acc, v);
                        }
                    }
                    *o = acc;
                }
            }
        };
        for_planes(out, pout, pin, self.ih == kh * self.oh, planes);
    }

    /// `select_and_scatter` with a `compare dir` selector and `add` scatter:
    /// each window's selected position (scan order: keep the current one
    /// while `select(current, next)` holds) receives `init + source`, every
    /// other position `init`.
    pub fn scatter(
        &self,
        x: &[f32],
        src: &[f32],
        init: f32,
        dir: ir::CompareDirection,
        out: &mut [f32],
    ) {
        use ir::CompareDirection as D;
        match dir {
            D::Ge => self.scatter_with::<CMP_GE>(x, src, init, |a, b| a >= b, out),
            D::Gt => self.scatter_with::<CMP_GT>(x, src, init, |a, b| a > b, out),
            D::Le => self.scatter_with::<CMP_LE>(x, src, init, |a, b| a <= b, out),
            D::Lt => self.scatter_with::<CMP_LT>(x, src, init, |a, b| a < b, out),
            D::Eq => self.scatter_with::<CMP_EQ>(x, src, init, |a, b| a == b, out),
            D::Ne => self.scatter_with::<CMP_NE>(x, src, init, |a, b| a != b, out),
        }
    }

    /// `keep` is the selector; `P` the same comparison as an
    /// `_mm256_cmp_ps` predicate, for the AVX2 loop.
    fn scatter_with<const P: i32>(
        &self,
        x: &[f32],
        src: &[f32],
        init: f32,
        keep: impl Fn(f32, f32) -> bool + Sync,
        out: &mut [f32],
    ) {
        let (pin, pout) = (self.ih * self.iw, self.oh * self.ow);
        let (kh, kw, iw, ow) = (self.kh, self.kw, self.iw, self.ow);
        let band = kh * iw;
        #[cfg(target_arch = "x86_64")]
        let avx2 = avx2();
        let planes = |p: usize, n: usize, o: &mut [f32]| {
            let xp = &x[p * pin..(p + n) * pin];
            let sp = &src[p * pout..(p + n) * pout];
            // Rows and columns no window covers (input not a multiple of
            // the window) only ever hold `init`.
            if ow == 0 {
                o.fill(init);
                return;
            }
            if kh == 2 && kw == 2 {
                // Every output element written once, no zero-fill pass.
                #[cfg(target_arch = "x86_64")]
                if avx2 {
                    // SAFETY: the CPU has AVX2.
                    unsafe { simd::scatter_plane::<P>(xp, sp, iw, ow, init, &keep, o) };
                    return;
                }
                scatter_plane_2x2(xp, sp, iw, ow, init, &keep, o);
                return;
            }
            o[sp.len() / ow * band..].fill(init);
            for (oy, srow) in sp.chunks_exact(ow).enumerate() {
                let rows = &xp[oy * band..(oy + 1) * band];
                let orows = &mut o[oy * band..(oy + 1) * band];
                orows.fill(init);
                for (ox, &s) in srow.iter().enumerate() {
                    let first = ox * kw;
                    let mut sel = first;
                    for ky in 0..kh {
                        let row = ky * iw + ox * kw;
                        for i in row..row + kw {
                            if i != first && !keep(rows[sel], rows[i]) {
                                sel = i;
                            }
                        }
                    }
                    orows[sel] = init + s;
                }
            }
        };
        for_planes(out, pin, pin, self.ih == kh * self.oh, planes);
    }

    pub fn out_len(&self) -> usize {
        self.planes * self.oh * self.ow
    }

    pub fn in_len(&self) -> usize {
        self.planes * self.ih * self.iw
    }
}
