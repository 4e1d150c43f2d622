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
    pub(crate) fn reduce_window<T: FastFloat>(&self, x: &[T], init: T, kind: ReduceKind) -> Vec<T> {
        // One loop per reducer, so the fold step is inlined.
        match kind {
            ReduceKind::Max => self.fold(x, init, max_fast),
            ReduceKind::Min => self.fold(x, init, min_fast),
            ReduceKind::Add => self.fold(x, init, |a, b| a + b),
            ReduceKind::Mul => self.fold(x, init, |a, b| a * b),
        }
    }

    fn fold<T: FastFloat>(&self, x: &[T], init: T, f: impl Fn(T, T) -> T + Sync) -> Vec<T> {
        let (pin, pout) = (self.in_plane(), self.out_plane());
        let mut out = vec![init; self.planes * pout];
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

    /// One plane: `init ⊕ w[0] ⊕ w[1] ⊕ …` over the window in row-major order,
    /// a padding position reading `init`.
    #[inline]
    fn fold_plane<T: FastFloat>(&self, xp: &[T], init: T, f: &impl Fn(T, T) -> T, op: &mut [T]) {
        let (iw, kh, kw) = (self.iw, self.kh, self.kw);
        for (oy, orow) in op.chunks_exact_mut(self.ow).enumerate() {
            for (ox, o) in orow.iter_mut().enumerate() {
                let (x0, inside) = self.column(ox);
                let mut acc = init;
                for ky in 0..kh {
                    let Some(y) = self.row(oy, ky) else {
                        for _ in 0..kw {
                            acc = f(acc, init);
                        }
                        continue;
                    };
                    let row = &xp[y * iw..(y + 1) * iw];
                    if inside {
                        let x0 = x0 as usize;
                        for &v in &row[x0..x0 + kw] {
                            acc = f(acc, v);
                        }
                    } else {
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
                }
                *o = acc;
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
    ) -> Vec<T> {
        // One loop per direction, so the comparison is inlined.
        use CompareDirection as D;
        match select {
            D::Ge => self.scatter(x, src, init, |a, b| compare_fast(a, b, D::Ge)),
            D::Gt => self.scatter(x, src, init, |a, b| compare_fast(a, b, D::Gt)),
            D::Le => self.scatter(x, src, init, |a, b| compare_fast(a, b, D::Le)),
            D::Lt => self.scatter(x, src, init, |a, b| compare_fast(a, b, D::Lt)),
            D::Eq => self.scatter(x, src, init, |a, b| compare_fast(a, b, D::Eq)),
            D::Ne => self.scatter(x, src, init, |a, b| compare_fast(a, b, D::Ne)),
        }
    }

    fn scatter<T: FastFloat>(
        &self,
        x: &[T],
        src: &[T],
        init: T,
        keep: impl Fn(T, T) -> bool + Sync,
    ) -> Vec<T> {
        let (pin, pout) = (self.in_plane(), self.out_plane());
        let mut out = vec![init; self.planes * pin];
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
    /// `keep(selected, v)` is false) accumulates the source value.
    #[inline]
    fn scatter_plane<T: FastFloat>(
        &self,
        xp: &[T],
        sp: &[T],
        keep: &impl Fn(T, T) -> bool,
        op: &mut [T],
    ) {
        let (iw, kh, kw) = (self.iw, self.kh, self.kw);
        for (oy, srow) in sp.chunks_exact(self.ow).enumerate() {
            for (ox, &value) in srow.iter().enumerate() {
                let (x0, inside) = self.column(ox);
                let mut best: Option<(usize, T)> = None;
                for ky in 0..kh {
                    let Some(y) = self.row(oy, ky) else {
                        continue;
                    };
                    let (lo, hi) = if inside {
                        (x0 as usize, x0 as usize + kw)
                    } else {
                        let clamp = |v: i64| v.clamp(0, iw as i64) as usize;
                        (clamp(x0), clamp(x0 + kw as i64))
                    };
                    let start = y * iw + lo;
                    for (k, &v) in xp[start..start + hi.saturating_sub(lo)].iter().enumerate() {
                        let at = start + k;
                        best = match best {
                            Some((b, bv)) if keep(bv, v) => Some((b, bv)),
                            _ => Some((at, v)),
                        };
                    }
                }
                if let Some((b, _)) = best {
                    op[b] += value;
                }
            }
        }
    }
}
