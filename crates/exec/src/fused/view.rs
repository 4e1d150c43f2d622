//! Strided views of a fused loop's inputs: the affine read a view op
//! composes to ([`ViewSpec`]), its merged walk over runs ([`Merged`]: gather,
//! accumulate into a reduction, the uniform-chunk test), and the run sums.

/// An affine read: output multi-index `i` reads source offset
/// `base + Σ i[d]·strides[d]`. Transpose, reverse and broadcast_in_dim are
/// views; composing them only changes strides and base.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct ViewSpec {
    pub shape: Vec<usize>,
    pub strides: Vec<isize>,
    pub base: isize,
}

impl ViewSpec {
    /// The identity view of a row-major buffer of `shape`.
    pub fn identity(shape: &[usize]) -> Self {
        ViewSpec {
            shape: shape.to_vec(),
            strides: den::tensor::row_major_strides(shape)
                .into_iter()
                .map(|s| s as isize)
                .collect(),
            base: 0,
        }
    }

    /// Merged form: size-1 dimensions dropped, adjacent dimensions that walk
    /// the source contiguously fused into one, innermost last.
    pub fn merged(&self) -> Merged {
        let mut dims: Vec<(usize, isize)> = Vec::new();
        for (&n, &s) in self.shape.iter().zip(&self.strides).rev() {
            if n == 1 {
                continue;
            }
            match dims.last_mut() {
                Some((ni, si)) if s == *si * *ni as isize => *ni *= n,
                _ => dims.push((n, s)),
            }
        }
        dims.reverse();
        Merged {
            dims,
            base: self.base,
        }
    }
}

/// A [`ViewSpec`] in merged form, ready to walk.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Merged {
    dims: Vec<(usize, isize)>,
    base: isize,
}

impl Merged {
    /// The innermost runs covering output positions `start..start + len`,
    /// each as (source offset, stride, output position, length). An iterator
    /// rather than a callback: the callers' loop bodies then compile inside
    /// the fused loop's AVX-512/AVX2 twin (an outlined closure was baseline
    /// SSE code, ~8 % of a cifar8-bbn step in batch norm's short runs).
    #[inline(always)]
    pub(super) fn runs(&self, start: usize, len: usize) -> Runs<'_> {
        let rank = self.dims.len();
        let mut walk = Runs {
            view: self,
            idx: [0; MAX_RANK],
            big: if rank > MAX_RANK {
                vec![0; rank]
            } else {
                Vec::new()
            },
            done: 0,
            len,
        };
        let idx = walk.index();
        let mut rest = start;
        for d in (0..rank).rev() {
            idx[d] = rest % self.dims[d].0;
            rest /= self.dims[d].0;
        }
        walk
    }

    /// The one source offset that output positions `start..start + len` all
    /// read, if they do (the chunk lies inside one run of stride 0).
    #[inline(always)]
    pub(super) fn uniform_offset(&self, start: usize, len: usize) -> Option<usize> {
        let Some(&(inner, stride)) = self.dims.last() else {
            return Some(self.base as usize);
        };
        if (stride != 0 && len > 1) || start % inner + len > inner {
            return None;
        }
        let mut rest = start;
        let mut off = self.base;
        for &(n, s) in self.dims.iter().rev() {
            off += (rest % n) as isize * s;
            rest /= n;
        }
        Some(off as usize)
    }

    /// `dst[k] = src[offset of output position start + k]`.
    #[inline(always)]
    pub(super) fn gather(&self, src: &[f32], start: usize, dst: &mut [f32]) {
        for (off, stride, at, n) in self.runs(start, dst.len()) {
            let d = &mut dst[at..at + n];
            if stride == 0 {
                d.fill(src[off as usize]);
            } else if stride == 1 {
                d.copy_from_slice(&src[off as usize..off as usize + n]);
            } else {
                for (k, x) in d.iter_mut().enumerate() {
                    *x = src[(off + k as isize * stride) as usize];
                }
            }
        }
    }
}

/// A run of a view's walk: source offset, stride, first position, length.
pub(super) type Run = (isize, isize, usize, usize);

/// `acc[offset of position at + k] += vals[at + k]` over the runs of a
/// reduction map's walk ([`Merged::runs`]), in position order: the values
/// of a reduction share its map, so one walk per chunk serves them all (the
/// walk's start costs a division per dimension).
#[inline(always)]
pub(super) fn accumulate_runs(acc: &mut [f32], runs: impl IntoIterator<Item = Run>, vals: &[f32]) {
    for (off, stride, at, n) in runs {
        let v = &vals[at..at + n];
        if stride == 0 {
            acc[off as usize] = sum_run(acc[off as usize], v);
        } else if stride == 1 {
            for (a, &x) in acc[off as usize..off as usize + n].iter_mut().zip(v) {
                *a += x;
            }
        } else {
            for (k, &x) in v.iter().enumerate() {
                acc[(off + k as isize * stride) as usize] += x;
            }
        }
    }
}

/// Ranks whose walk index lives on the stack.
const MAX_RANK: usize = 16;

/// The walk of [`Merged::runs`].
pub(super) struct Runs<'a> {
    view: &'a Merged,
    idx: [usize; MAX_RANK],
    /// The index when the rank exceeds `MAX_RANK`.
    big: Vec<usize>,
    done: usize,
    len: usize,
}

impl Runs<'_> {
    /// The walk's multi-index, one entry per merged dimension.
    #[inline(always)]
    fn index(&mut self) -> &mut [usize] {
        let rank = self.view.dims.len();
        if rank <= MAX_RANK {
            &mut self.idx[..rank]
        } else {
            &mut self.big
        }
    }
}

impl Iterator for Runs<'_> {
    type Item = (isize, isize, usize, usize);

    #[inline(always)]
    fn next(&mut self) -> Option<Self::Item> {
        // The view outlives the walk: `dims` does not borrow `self`.
        let view = self.view;
        let dims = &view.dims;
        let Some(&(inner, stride)) = dims.last() else {
            // A rank-0 view: one run over everything, read at the base.
            let n = self.len - self.done;
            self.done = self.len;
            return (n > 0).then_some((view.base, 0, 0, n));
        };
        if self.done >= self.len {
            return None;
        }
        let rank = dims.len();
        let at = self.done;
        let len = self.len;
        let idx = self.index();
        let n = (inner - idx[rank - 1]).min(len - at);
        let off = view.base
            + idx
                .iter()
                .zip(dims)
                .map(|(&i, &(_, s))| i as isize * s)
                .sum::<isize>();
        idx[rank - 1] += n;
        let mut d = rank - 1;
        while idx[d] == dims[d].0 && d > 0 {
            idx[d] = 0;
            d -= 1;
            idx[d] += 1;
        }
        self.done += n;
        Some((off, stride, at, n))
    }
}

/// `acc + Σ xs`, 64 partial sums (four vectors) for runs of 128 and more,
/// added pairwise at the end: a run of 512 is 8 dependent adds per lane
/// rather than 64 at eight lanes (batch norm's per-channel sums over
/// stride-0 runs were bound by that add latency: the accumulation's share
/// of a cifar8-bbn b128 step 8.0 % → 4.7 %).
#[inline(always)]
pub(super) fn sum_run(acc: f32, xs: &[f32]) -> f32 {
    const LANES: usize = 64;
    if xs.len() < 2 * LANES {
        return sum_run8(acc, xs);
    }
    // The lane array indexed in loops is kept on the stack by the compiler
    // (a store and a reload per add, ~15 % of a batch-norm reduction's
    // time); on AVX-512 the same sums run in four registers.
    #[cfg(target_arch = "x86_64")]
    if super::avx512() {
        // SAFETY: the CPU has AVX-512F.
        return unsafe { sum_run_avx512(acc, xs) };
    }
    let mut lanes = [0f32; LANES];
    let chunks = xs.chunks_exact(LANES);
    let tail = chunks.remainder();
    for c in chunks {
        for (l, &x) in lanes.iter_mut().zip(c) {
            *l += x;
        }
    }
    // Pairwise: 64 → 32 → … → 1.
    let mut w = LANES;
    while w > 1 {
        w /= 2;
        for i in 0..w {
            lanes[i] += lanes[i + w];
        }
    }
    tail.iter().fold(acc + lanes[0], |a, &x| a + x)
}

/// [`sum_run`] for runs of 128 and more in four AVX-512 registers (lanes
/// 0–15, 16–31, 32–47, 48–63), halved pairwise in the same order: the same
/// bits.
///
/// # Safety
/// The CPU has AVX-512F.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f")]
unsafe fn sum_run_avx512(acc: f32, xs: &[f32]) -> f32 {
    use std::arch::x86_64::*;
    let chunks = xs.chunks_exact(64);
    let tail = chunks.remainder();
    // SAFETY: each chunk holds 64 floats, read as four vectors.
    let lane0 = unsafe {
        let (mut a, mut b, mut c, mut d) = (
            _mm512_setzero_ps(),
            _mm512_setzero_ps(),
            _mm512_setzero_ps(),
            _mm512_setzero_ps(),
        );
        for x in chunks {
            let p = x.as_ptr();
            a = _mm512_add_ps(a, _mm512_loadu_ps(p));
            b = _mm512_add_ps(b, _mm512_loadu_ps(p.add(16)));
            c = _mm512_add_ps(c, _mm512_loadu_ps(p.add(32)));
            d = _mm512_add_ps(d, _mm512_loadu_ps(p.add(48)));
        }
        // 64 → 32 → 16: lane i takes lane i + 32, then i + 16.
        let a = _mm512_add_ps(_mm512_add_ps(a, c), _mm512_add_ps(b, d));
        // 16 → 8 → 4 → 2 → 1: the low half takes the high half.
        let hi8 = _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(a), 1));
        let v8 = _mm256_add_ps(_mm512_castps512_ps256(a), hi8);
        let v4 = _mm_add_ps(_mm256_castps256_ps128(v8), _mm256_extractf128_ps(v8, 1));
        let v2 = _mm_add_ps(v4, _mm_movehl_ps(v4, v4));
        _mm_cvtss_f32(_mm_add_ss(v2, _mm_shuffle_ps(v2, v2, 1)))
    };
    tail.iter().fold(acc + lane0, |s, &x| s + x)
}

/// `acc + Σ xs`, eight partial sums for runs of 16 and more.
#[inline(always)]
fn sum_run8(acc: f32, xs: &[f32]) -> f32 {
    const LANES: usize = 8;
    if xs.len() < 2 * LANES {
        return xs.iter().fold(acc, |a, &x| a + x);
    }
    let mut lanes = [0f32; LANES];
    let chunks = xs.chunks_exact(LANES);
    let tail = chunks.remainder();
    for c in chunks {
        for (l, &x) in lanes.iter_mut().zip(c) {
            *l += x;
        }
    }
    let partial = ((lanes[0] + lanes[1]) + (lanes[2] + lanes[3]))
        + ((lanes[4] + lanes[5]) + (lanes[6] + lanes[7]));
    tail.iter().fold(acc + partial, |a, &x| a + x)
}

#[cfg(test)]
mod tests {
    use super::ViewSpec;

    /// The runs of a view tile `start..start + len` in order, and each
    /// position reads the offset of its own multi-index — for a rank past
    /// the stack index (17 unmergeable dimensions), a broadcast (stride 0),
    /// a reversal, and starts inside a run and at the last position.
    #[test]
    fn runs_cover_each_position_at_its_own_offset() {
        let mut shapes: Vec<ViewSpec> = vec![
            ViewSpec {
                shape: vec![3, 4, 5],
                strides: vec![1, 0, 3],
                base: 0,
            },
            ViewSpec {
                shape: vec![2, 7],
                strides: vec![7, -1],
                base: 6,
            },
        ];
        // 17 dimensions of 2, strides 3^d: no two merge.
        shapes.push(ViewSpec {
            shape: vec![2; 17],
            strides: (0..17).rev().map(|d| 3isize.pow(d)).collect(),
            base: 0,
        });
        for view in &shapes {
            let total: usize = view.shape.iter().product();
            let offset = |mut p: usize| {
                let mut off = view.base;
                for (&n, &s) in view.shape.iter().zip(&view.strides).rev() {
                    off += (p % n) as isize * s;
                    p /= n;
                }
                off
            };
            let merged = view.merged();
            for (start, len) in [
                (0, total),
                (1, total - 1),
                (total / 3, total / 2),
                (total - 1, 1),
            ] {
                let mut next = 0;
                for (off, stride, at, n) in merged.runs(start, len) {
                    assert_eq!(at, next, "{:?}: runs out of order", view.shape);
                    for k in 0..n {
                        assert_eq!(off + k as isize * stride, offset(start + at + k));
                    }
                    next = at + n;
                }
                assert_eq!(next, len, "{:?} from {start}: positions left", view.shape);
            }
        }
    }

    /// The register-resident lanes sum in the documented order: 64 lane
    /// sums in position order, halved pairwise, then the tail, after `acc`
    /// (a reference written from that description; non-integer values, so
    /// another order would change bits).
    #[test]
    fn sum_run_is_the_64_lane_pairwise_order() {
        let reference = |acc: f32, xs: &[f32]| {
            let mut lanes = [0f32; 64];
            let whole = xs.len() / 64 * 64;
            for (i, &x) in xs[..whole].iter().enumerate() {
                lanes[i % 64] += x;
            }
            let mut w = 64;
            while w > 1 {
                w /= 2;
                for i in 0..w {
                    lanes[i] += lanes[i + w];
                }
            }
            xs[whole..].iter().fold(acc + lanes[0], |a, &x| a + x)
        };
        let mut seed = 0x2545_f491_4f6c_dd1du64;
        for len in [128usize, 129, 191, 512, 1000, 4096] {
            let xs: Vec<f32> = (0..len)
                .map(|_| {
                    seed ^= seed << 13;
                    seed ^= seed >> 7;
                    seed ^= seed << 17;
                    (seed >> 40) as f32 / (1u64 << 24) as f32 * 3.0 - 1.1
                })
                .collect();
            let (got, want) = (super::sum_run(0.37, &xs), reference(0.37, &xs));
            assert_eq!(got.to_bits(), want.to_bits(), "len {len}");
        }
    }

    /// Every run length (the 8- and 64-lane forms, their tails) sums
    /// integers exactly: partial sums stay below 2²⁴, so any order is exact.
    #[test]
    fn sum_run_adds_every_element_once() {
        for len in [0usize, 1, 15, 16, 17, 127, 128, 129, 200, 512, 1000] {
            let xs: Vec<f32> = (0..len).map(|i| ((i * 37) % 101) as f32 - 50.0).collect();
            let want: f32 = 3.0 + xs.iter().map(|&x| x as f64).sum::<f64>() as f32;
            assert_eq!(super::sum_run(3.0, &xs), want, "len {len}");
        }
    }
}
