//! Non-overlapping 2-D pooling for the f32 plan: `reduce_window` (max/min)
//! and `select_and_scatter` whose windows tile the last two dimensions
//! (window = stride, no padding, no dilation, leading dimensions untouched),
//! the max-pool of cifar8 and its backward. Each output folds its window in
//! the generic evaluator's scan order with its tie and NaN rules, so results
//! are bit-identical; planes run in parallel.

use super::fused::{max_f32, min_f32};
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

/// Planes per parallel task.
const PLANES_PER_TASK: usize = 16;

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
            self.fold_with(x, init, max_f32, out)
        } else {
            self.fold_with(x, init, min_f32, out)
        }
    }

    fn fold_with(&self, x: &[f32], init: f32, f: impl Fn(f32, f32) -> f32 + Sync, out: &mut [f32]) {
        let (pin, pout) = (self.ih * self.iw, self.oh * self.ow);
        let (kh, kw, iw, ow) = (self.kh, self.kw, self.iw, self.ow);
        let plane = |p: usize, o: &mut [f32]| {
            let xp = &x[p * pin..(p + 1) * pin];
            for (oy, orow) in o.chunks_exact_mut(ow).enumerate() {
                let rows = &xp[oy * kh * iw..(oy + 1) * kh * iw];
                if kh == 2 && kw == 2 {
                    // The cifar8 max-pool: two input rows in, one output row out.
                    let (r0, r1) = rows.split_at(iw);
                    for ((o, a), b) in orow
                        .iter_mut()
                        .zip(r0.chunks_exact(2))
                        .zip(r1.chunks_exact(2))
                    {
                        *o = f(f(f(f(init, a[0]), a[1]), b[0]), b[1]);
                    }
                    continue;
                }
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
        if pout == 0 {
            return;
        }
        out.par_chunks_mut(pout * PLANES_PER_TASK)
            .enumerate()
            .for_each(|(t, o)| {
                for (k, op) in o.chunks_mut(pout).enumerate() {
                    plane(t * PLANES_PER_TASK + k, op);
                }
            });
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
            D::Ge => self.scatter_with(x, src, init, |a, b| a >= b, out),
            D::Gt => self.scatter_with(x, src, init, |a, b| a > b, out),
            D::Le => self.scatter_with(x, src, init, |a, b| a <= b, out),
            D::Lt => self.scatter_with(x, src, init, |a, b| a < b, out),
            D::Eq => self.scatter_with(x, src, init, |a, b| a == b, out),
            D::Ne => self.scatter_with(x, src, init, |a, b| a != b, out),
        }
    }

    fn scatter_with(
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
        let plane = |p: usize, o: &mut [f32]| {
            let xp = &x[p * pin..(p + 1) * pin];
            let sp = &src[p * pout..(p + 1) * pout];
            // Rows and columns no window covers (input not a multiple of
            // the window) only ever hold `init`.
            if ow == 0 {
                o.fill(init);
                return;
            }
            o[self.oh * band..].fill(init);
            for (oy, srow) in sp.chunks_exact(ow).enumerate() {
                let rows = &xp[oy * band..(oy + 1) * band];
                let orows = &mut o[oy * band..(oy + 1) * band];
                if kh == 2 && kw == 2 {
                    // One pass writes both output rows of the band.
                    let (r0, r1) = rows.split_at(iw);
                    let (o0, o1) = orows.split_at_mut(iw);
                    for (ox, &s) in srow.iter().enumerate() {
                        let c = 2 * ox;
                        let v = [r0[c], r0[c + 1], r1[c], r1[c + 1]];
                        // Branch-free scan: the selection is data-dependent.
                        // The selected value is carried along rather than
                        // re-read by index (a store-forwarding stall).
                        let (mut sel, mut best) = (0usize, v[0]);
                        for (i, &vi) in v.iter().enumerate().skip(1) {
                            let stay = keep(best, vi);
                            sel = if stay { sel } else { i };
                            best = if stay { best } else { vi };
                        }
                        let hit = init + s;
                        let at = |k: usize| if sel == k { hit } else { init };
                        o0[c] = at(0);
                        o0[c + 1] = at(1);
                        o1[c] = at(2);
                        o1[c + 1] = at(3);
                    }
                    o0[2 * ow..].fill(init);
                    o1[2 * ow..].fill(init);
                    continue;
                }
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
        if pin == 0 {
            return;
        }
        out.par_chunks_mut(pin * PLANES_PER_TASK)
            .enumerate()
            .for_each(|(t, o)| {
                for (k, op) in o.chunks_mut(pin).enumerate() {
                    plane(t * PLANES_PER_TASK + k, op);
                }
            });
    }

    pub fn out_len(&self) -> usize {
        self.planes * self.oh * self.ow
    }

    pub fn in_len(&self) -> usize {
        self.planes * self.ih * self.iw
    }
}
