//! `reduce_window` and `select_and_scatter` whose window moves over the two
//! innermost dimensions only (the NCHW max-pool of the ResNet stem and its
//! backward): every leading dimension is untouched (window 1, stride 1, no
//! padding), nothing is dilated, padding and strides on the two spatial
//! dimensions are arbitrary. Direct strided loops per `[ih, iw]` plane, planes
//! in parallel.
//!
//! The loops visit each window in the row-major window order of the N-d paths
//! in `reduce.rs`, with their fold step (`ReduceKind::apply`, a padding position
//! contributing `init`) and their selection rule (the first valid position,
//! replaced by a later one whenever the selector is false; padding never
//! selected), and scatter each source element in row-major source order — so
//! results are bit-identical to those paths, ties and NaNs included.

use rayon::prelude::*;

use super::float::FastFloat;
use super::layout::{compare_fast, max_fast, min_fast};
use super::ReduceKind;
use ir::CompareDirection;

/// Input elements per parallel task (whole planes, at least one): large
/// enough that a task's work dwarfs its scheduling.
const TASK_ELEMS: usize = 1 << 15;

/// Geometry of a window over the planes `[planes, ih, iw]` of a row-major
/// operand, producing planes `[oh, ow]`.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Plane2d {
    planes: usize,
    ih: usize,
    iw: usize,
    oh: usize,
    ow: usize,
    kh: usize,
    kw: usize,
    sh: usize,
    sw: usize,
    /// Low padding of the two spatial dimensions (may be negative).
    ph: i64,
    pw: i64,
}

fn attr(v: &[i64], d: usize) -> i64 {
    v.get(d).copied().unwrap_or(1)
}

impl Plane2d {
    /// The plane geometry, when the window attributes describe one: `None`
    /// sends the op to the N-d path.
    pub(crate) fn new(
        in_shape: &[usize],
        out_shape: &[usize],
        window: &[i64],
        strides: &[i64],
        padding: &[(i64, i64)],
        dilations: [&[i64]; 2],
    ) -> Option<Plane2d> {
        let rank = in_shape.len();
        if rank < 2 || out_shape.len() != rank {
            return None;
        }
        for d in 0..rank {
            if dilations.iter().any(|v| attr(v, d) != 1) || attr(window, d) < 1 {
                return None;
            }
            let leading = d + 2 < rank;
            let pad = padding.get(d).copied().unwrap_or((0, 0));
            if leading
                && (attr(window, d) != 1
                    || attr(strides, d) != 1
                    || pad != (0, 0)
                    || out_shape[d] != in_shape[d])
            {
                return None;
            }
            if attr(strides, d) < 1 {
                return None;
            }
        }
        let (h, w) = (rank - 2, rank - 1);
        let pad = |d: usize| padding.get(d).map_or(0, |p| p.0);
        Some(Plane2d {
            planes: in_shape[..h].iter().product(),
            ih: in_shape[h],
            iw: in_shape[w],
            oh: out_shape[h],
            ow: out_shape[w],
            kh: attr(window, h) as usize,
            kw: attr(window, w) as usize,
            sh: attr(strides, h) as usize,
            sw: attr(strides, w) as usize,
            ph: pad(h),
            pw: pad(w),
        })
    }

    fn in_plane(&self) -> usize {
        self.ih * self.iw
    }

    fn out_plane(&self) -> usize {
        self.oh * self.ow
    }

    /// Planes per parallel task.
    fn planes_per_task(&self) -> usize {
        (TASK_ELEMS / self.in_plane().max(self.out_plane()).max(1)).max(1)
    }

    /// The first input column of output column `ox`, and whether its whole
    /// window row lies inside the plane (no padding column).
    #[inline]
    fn column(&self, ox: usize) -> (i64, bool) {
        let x0 = (ox * self.sw) as i64 - self.pw;
        (x0, x0 >= 0 && x0 + self.kw as i64 <= self.iw as i64)
    }

    /// The input row of window row `ky` of output row `oy`, if inside the plane.
    #[inline]
    fn row(&self, oy: usize, ky: usize) -> Option<usize> {
        let y = (oy * self.sh + ky) as i64 - self.ph;
        (y >= 0 && y < self.ih as i64).then_some(y as usize)
    }

    /// `reduce_window` of every plane of `x`.
    /// `out`: a buffer to write the result into (any length and contents;
    /// a recycled one saves the fresh pages of a new result).
    pub(crate) fn reduce_window<T: FastFloat>(
        &self,
        x: &[T],
        init: T,
        kind: ReduceKind,
        out: Vec<T>,
    ) -> Vec<T> {
        // One loop per reducer, so the fold step is inlined.
        match kind {
            ReduceKind::Max => self.fold(x, init, max_fast, out),
            ReduceKind::Min => self.fold(x, init, min_fast, out),
            ReduceKind::Add => self.fold(x, init, |a, b| a + b, out),
            ReduceKind::Mul => self.fold(x, init, |a, b| a * b, out),
        }
    }

    fn fold<T: FastFloat>(
        &self,
        x: &[T],
        init: T,
        f: impl Fn(T, T) -> T + Sync,
        mut out: Vec<T>,
    ) -> Vec<T> {
        let (pin, pout) = (self.in_plane(), self.out_plane());
        // Every element is written below.
        out.resize(self.planes * pout, init);
        if out.is_empty() {
            return out;
        }
        let per = self.planes_per_task();
        out.par_chunks_mut(pout * per)
            .enumerate()
            .for_each(|(t, o)| {
                for (k, op) in o.chunks_exact_mut(pout).enumerate() {
                    let p = t * per + k;
                    self.fold_plane(&x[p * pin..(p + 1) * pin], init, &f, op);
                }
            });
        out
    }

    /// The output columns whose whole window row lies inside the plane: a
    /// range `lo..hi` (empty when there is none).
    fn interior_columns(&self) -> (usize, usize) {
        let lo = (0..self.ow)
            .find(|&ox| self.column(ox).1)
            .unwrap_or(self.ow);
        let hi = (lo..self.ow)
            .find(|&ox| !self.column(ox).1)
            .unwrap_or(self.ow);
        (lo, hi)
    }

    /// One plane: `init ⊕ w[0] ⊕ w[1] ⊕ …` over the window in row-major order,
    /// a padding position reading `init`. The interior columns of an output
    /// row advance together, one window position at a time (the same
    /// sequence of steps per output, so the same bits; no branch per element
    /// to mispredict, and a loop the compiler vectorises); the border columns
    /// fold one by one.
    #[inline]
    fn fold_plane<T: FastFloat>(&self, xp: &[T], init: T, f: &impl Fn(T, T) -> T, op: &mut [T]) {
        let (iw, kh, kw) = (self.iw, self.kh, self.kw);
        let (lo, hi) = self.interior_columns();
        for (oy, orow) in op.chunks_exact_mut(self.ow).enumerate() {
            let inner = &mut orow[lo..hi];
            inner.fill(init);
            for ky in (0..kh).filter(|_| lo < hi) {
                let Some(y) = self.row(oy, ky) else {
                    for _ in 0..kw {
                        inner.iter_mut().for_each(|o| *o = f(*o, init));
                    }
                    continue;
                };
                let row = &xp[y * iw..(y + 1) * iw];
                for kx in 0..kw {
                    // Input column of interior output `lo + j`: x0 + j·sw.
                    let x0 = (self.column(lo).0 + kx as i64) as usize;
                    match self.sw {
                        1 => fold_strided::<T, 1>(inner, &row[x0..], f),
                        2 => fold_strided::<T, 2>(inner, &row[x0..], f),
                        sw => {
                            for (j, o) in inner.iter_mut().enumerate() {
                                *o = f(*o, row[x0 + j * sw]);
                            }
                        }
                    }
                }
            }
            for ox in (0..lo).chain(hi..self.ow) {
                let (x0, _) = self.column(ox);
                let mut acc = init;
                for ky in 0..kh {
                    let Some(y) = self.row(oy, ky) else {
                        for _ in 0..kw {
                            acc = f(acc, init);
                        }
                        continue;
                    };
                    let row = &xp[y * iw..(y + 1) * iw];
                    for kx in 0..kw as i64 {
                        let x = x0 + kx;
                        let v = if x >= 0 && x < iw as i64 {
                            row[x as usize]
                        } else {
                            init
                        };
                        acc = f(acc, v);
                    }
                }
                orow[ox] = acc;
            }
        }
    }

    /// `select_and_scatter` (add scatter) of every plane: `x` the operand,
    /// `src` the source (`[planes, oh, ow]`).
    pub(crate) fn select_and_scatter<T: FastFloat>(
        &self,
        x: &[T],
        src: &[T],
        init: T,
        select: CompareDirection,
        out: Vec<T>,
    ) -> Vec<T> {
        // One loop per direction, so the comparison is inlined.
        use CompareDirection as D;
        match select {
            D::Ge => self.scatter(x, src, init, |a, b| compare_fast(a, b, D::Ge), out),
            D::Gt => self.scatter(x, src, init, |a, b| compare_fast(a, b, D::Gt), out),
            D::Le => self.scatter(x, src, init, |a, b| compare_fast(a, b, D::Le), out),
            D::Lt => self.scatter(x, src, init, |a, b| compare_fast(a, b, D::Lt), out),
            D::Eq => self.scatter(x, src, init, |a, b| compare_fast(a, b, D::Eq), out),
            D::Ne => self.scatter(x, src, init, |a, b| compare_fast(a, b, D::Ne), out),
        }
    }

    fn scatter<T: FastFloat>(
        &self,
        x: &[T],
        src: &[T],
        init: T,
        keep: impl Fn(T, T) -> bool + Sync,
        mut out: Vec<T>,
    ) -> Vec<T> {
        let (pin, pout) = (self.in_plane(), self.out_plane());
        out.clear();
        out.resize(self.planes * pin, init);
        if out.is_empty() || pout == 0 {
            return out;
        }
        let per = self.planes_per_task();
        out.par_chunks_mut(pin * per)
            .enumerate()
            .for_each(|(t, o)| {
                for (k, op) in o.chunks_exact_mut(pin).enumerate() {
                    let p = t * per + k;
                    let xp = &x[p * pin..(p + 1) * pin];
                    let sp = &src[p * pout..(p + 1) * pout];
                    self.scatter_plane(xp, sp, &keep, op);
                }
            });
        out
    }

    /// One plane, source elements in row-major order: each window's selected
    /// position (the first valid one, replaced by a later `v` whenever
    /// `keep(selected, v)` is false) accumulates the source value. A source
    /// row's windows are selected first — the interior columns together, one
    /// window position at a time, as [`Self::fold_plane`] — then scattered in
    /// column order.
    #[inline]
    fn scatter_plane<T: FastFloat>(
        &self,
        xp: &[T],
        sp: &[T],
        keep: &impl Fn(T, T) -> bool,
        op: &mut [T],
    ) {
        let (iw, kh, kw) = (self.iw, self.kh, self.kw);
        let (lo, hi) = self.interior_columns();
        // Per output column: the selected input index (`usize::MAX`: no
        // valid position) and its value.
        let mut at = vec![usize::MAX; self.ow];
        let mut best = vec![T::ZERO; self.ow];
        for (oy, srow) in sp.chunks_exact(self.ow).enumerate() {
            let (at_in, best_in) = (&mut at[lo..hi], &mut best[lo..hi]);
            at_in.fill(usize::MAX);
            let mut first = true;
            for ky in (0..kh).filter(|_| lo < hi) {
                let Some(y) = self.row(oy, ky) else {
                    continue;
                };
                for kx in 0..kw {
                    let x0 = (self.column(lo).0 + kx as i64) as usize;
                    let base = y * iw + x0;
                    let sw = self.sw;
                    if first {
                        for (j, (a, b)) in at_in.iter_mut().zip(best_in.iter_mut()).enumerate() {
                            *a = base + j * sw;
                            *b = xp[base + j * sw];
                        }
                        first = false;
                    } else {
                        for (j, (a, b)) in at_in.iter_mut().zip(best_in.iter_mut()).enumerate() {
                            let v = xp[base + j * sw];
                            let moves = !keep(*b, v);
                            *a = if moves { base + j * sw } else { *a };
                            *b = if moves { v } else { *b };
                        }
                    }
                }
            }
            for ox in (0..lo).chain(hi..self.ow) {
                let (x0, _) = self.column(ox);
                let mut sel: Option<(usize, T)> = None;
                for ky in 0..kh {
                    let Some(y) = self.row(oy, ky) else {
                        continue;
                    };
                    let clamp = |v: i64| v.clamp(0, iw as i64) as usize;
                    let (l, h) = (clamp(x0), clamp(x0 + kw as i64));
                    let start = y * iw + l;
                    for (k, &v) in xp[start..start + h.saturating_sub(l)].iter().enumerate() {
                        sel = match sel {
                            Some((b, bv)) if keep(bv, v) => Some((b, bv)),
                            _ => Some((start + k, v)),
                        };
                    }
                }
                at[ox] = sel.map_or(usize::MAX, |(b, _)| b);
            }
            for (&a, &value) in at.iter().zip(srow) {
                if a != usize::MAX {
                    op[a] += value;
                }
            }
        }
    }
}

/// `acc[j] = f(acc[j], row[j · S])` for every `j`: a constant stride, so the
/// compiler vectorises the loads.
#[inline(always)]
fn fold_strided<T: FastFloat, const S: usize>(acc: &mut [T], row: &[T], f: &impl Fn(T, T) -> T) {
    if acc.is_empty() {
        return;
    }
    let row = &row[..(acc.len() - 1) * S + 1];
    for (j, o) in acc.iter_mut().enumerate() {
        *o = f(*o, row[j * S]);
    }
}
