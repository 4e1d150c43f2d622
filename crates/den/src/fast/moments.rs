//! The first two moments of each plane of a convolution result, taken while
//! the plane is still in cache: batch norm's statistics without a pass of
//! their own over the pre-BN tensor.
//!
//! Plane `i` (its `plane` contiguous elements) gets `out[2i] = Σ x` and
//! `out[2i + 1] = Σ (x − x̄)²` about its own mean `x̄ = Σ x / plane`, both
//! summed in f32 over 32 lanes in an order fixed by the plane length. Plane
//! moments combine exactly into a whole feature's (Chan et al.: `M2 = Σ M2ᵢ +
//! Σ nᵢ (x̄ᵢ − x̄)²`), which the caller does in f64.

use rayon::prelude::*;

/// Lanes of the partial sums: two AVX-512 registers (four AVX ones), so the
/// adds overlap.
const LANES: usize = 32;

/// The moments of every plane of `planes` into `out` (two per plane).
pub(crate) fn plane_moments(planes: &[f32], plane: usize, out: &mut [f32]) {
    assert!(
        plane > 0 && planes.len().is_multiple_of(plane),
        "moments of whole planes"
    );
    assert_eq!(
        out.len(),
        2 * (planes.len() / plane),
        "two moments per plane"
    );
    #[cfg(target_arch = "x86_64")]
    if std::arch::is_x86_feature_detected!("avx512f") {
        // SAFETY: the CPU has AVX-512F.
        unsafe { moments_avx512(planes, plane, out) };
        return;
    }
    #[cfg(target_arch = "x86_64")]
    if std::arch::is_x86_feature_detected!("avx") {
        // SAFETY: the CPU has AVX.
        unsafe { moments_avx(planes, plane, out) };
        return;
    }
    moments(planes, plane, out)
}

/// [`plane_moments`] over many planes, split between threads by planes.
pub(crate) fn plane_moments_par(planes: &[f32], plane: usize, out: &mut [f32]) {
    assert!(plane > 0, "moments of whole planes");
    // About 64 KiB of planes per task.
    let per = (16384 / plane).max(1);
    planes
        .par_chunks(per * plane)
        .zip(out.par_chunks_mut(2 * per))
        .for_each(|(p, o)| plane_moments(p, plane, o));
}

/// [`moments`] on AVX-512 registers: the 32 lanes are two vectors (the
/// compiler had vectorised the lane array two floats at a time), summed in
/// the same order as the portable loop, so the same bits.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f")]
unsafe fn moments_avx512(planes: &[f32], plane: usize, out: &mut [f32]) {
    use std::arch::x86_64::*;
    let whole = plane / LANES * LANES;
    let lanes_of = |a: __m512, b: __m512| {
        let mut l = [0f32; LANES];
        // SAFETY: `l` holds two vectors.
        unsafe {
            _mm512_storeu_ps(l.as_mut_ptr(), a);
            _mm512_storeu_ps(l.as_mut_ptr().add(16), b);
        }
        l
    };
    for (xs, m) in planes.chunks_exact(plane).zip(out.chunks_exact_mut(2)) {
        let p = xs.as_ptr();
        // SAFETY: every load reads 16 floats at i, i + 16 < whole ≤ plane.
        let (mut a, mut b) = (_mm512_setzero_ps(), _mm512_setzero_ps());
        for i in (0..whole).step_by(LANES) {
            unsafe {
                a = _mm512_add_ps(a, _mm512_loadu_ps(p.add(i)));
                b = _mm512_add_ps(b, _mm512_loadu_ps(p.add(i + 16)));
            }
        }
        let sum = xs[whole..]
            .iter()
            .fold(combine(&lanes_of(a, b)), |s, &x| s + x);
        let mean = sum / plane as f32;
        let mv = _mm512_set1_ps(mean);
        let (mut a, mut b) = (_mm512_setzero_ps(), _mm512_setzero_ps());
        for i in (0..whole).step_by(LANES) {
            // SAFETY: as above.
            unsafe {
                let d = _mm512_sub_ps(_mm512_loadu_ps(p.add(i)), mv);
                let e = _mm512_sub_ps(_mm512_loadu_ps(p.add(i + 16)), mv);
                a = _mm512_add_ps(a, _mm512_mul_ps(d, d));
                b = _mm512_add_ps(b, _mm512_mul_ps(e, e));
            }
        }
        let m2 = xs[whole..].iter().fold(combine(&lanes_of(a, b)), |s, &x| {
            s + (x - mean) * (x - mean)
        });
        m[0] = sum;
        m[1] = m2;
    }
}

/// [`moments`] on AVX registers (CPUs without AVX-512): the 32 lanes are
/// four vectors, summed in the portable loop's order, so the same bits.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx")]
unsafe fn moments_avx(planes: &[f32], plane: usize, out: &mut [f32]) {
    use std::arch::x86_64::*;
    let whole = plane / LANES * LANES;
    let lanes_of = |a: [__m256; 4]| {
        let mut l = [0f32; LANES];
        for (q, v) in a.into_iter().enumerate() {
            // SAFETY: `l` holds four vectors.
            unsafe { _mm256_storeu_ps(l.as_mut_ptr().add(8 * q), v) };
        }
        l
    };
    for (xs, m) in planes.chunks_exact(plane).zip(out.chunks_exact_mut(2)) {
        let p = xs.as_ptr();
        let mut a = [_mm256_setzero_ps(); 4];
        for i in (0..whole).step_by(LANES) {
            for (q, acc) in a.iter_mut().enumerate() {
                // SAFETY: reads 8 floats at i + 8q, i + 32 ≤ whole ≤ plane.
                *acc = _mm256_add_ps(*acc, unsafe { _mm256_loadu_ps(p.add(i + 8 * q)) });
            }
        }
        let sum = xs[whole..]
            .iter()
            .fold(combine(&lanes_of(a)), |s, &x| s + x);
        let mean = sum / plane as f32;
        let mv = _mm256_set1_ps(mean);
        let mut a = [_mm256_setzero_ps(); 4];
        for i in (0..whole).step_by(LANES) {
            for (q, acc) in a.iter_mut().enumerate() {
                // SAFETY: as above.
                let d = _mm256_sub_ps(unsafe { _mm256_loadu_ps(p.add(i + 8 * q)) }, mv);
                *acc = _mm256_add_ps(*acc, _mm256_mul_ps(d, d));
            }
        }
        let m2 = xs[whole..]
            .iter()
            .fold(combine(&lanes_of(a)), |s, &x| s + (x - mean) * (x - mean));
        m[0] = sum;
        m[1] = m2;
    }
}

#[inline(always)]
fn moments(planes: &[f32], plane: usize, out: &mut [f32]) {
    for (xs, m) in planes.chunks_exact(plane).zip(out.chunks_exact_mut(2)) {
        let sum = lane_sum(xs, |x| x);
        let mean = sum / plane as f32;
        m[0] = sum;
        m[1] = lane_sum(xs, |x| (x - mean) * (x - mean));
    }
}

/// `Σ f(x)`: `LANES` partial sums over whole chunks, combined by
/// [`combine`], then the tail in order.
#[inline(always)]
fn lane_sum(xs: &[f32], f: impl Fn(f32) -> f32) -> f32 {
    let mut lanes = [0f32; LANES];
    let chunks = xs.chunks_exact(LANES);
    let tail = chunks.remainder();
    for c in chunks {
        for (l, &x) in lanes.iter_mut().zip(c) {
            *l += f(x);
        }
    }
    tail.iter().fold(combine(&lanes), |a, &x| a + f(x))
}

/// The lanes' total: halves added lane by lane (32 → 16 → 8 → 4), then
/// `(r0 + r2) + (r1 + r3)`.
#[inline(always)]
fn combine(lanes: &[f32; LANES]) -> f32 {
    let mut w = [0f32; LANES / 2];
    for (i, h) in w.iter_mut().enumerate() {
        *h = lanes[i] + lanes[i + 16];
    }
    let q: [f32; 8] = std::array::from_fn(|i| w[i] + w[i + 8]);
    let r: [f32; 4] = std::array::from_fn(|i| q[i] + q[i + 4]);
    (r[0] + r[2]) + (r[1] + r[3])
}

#[cfg(test)]
mod tests {
    /// Each plane's sum and centred sum of squares match an f64 evaluation
    /// (planes shorter than, equal to and longer than the lanes, with tails).
    #[test]
    fn moments_match_f64_per_plane() {
        for plane in [1usize, 5, 32, 33, 100, 1024] {
            let n = 3 * plane;
            let xs: Vec<f32> = (0..n)
                .map(|i| ((i * 7919) % 113) as f32 * 0.37 - 20.0 + (i / plane) as f32 * 50.0)
                .collect();
            let mut got = vec![0f32; 6];
            super::plane_moments(&xs, plane, &mut got);
            let mut par = vec![0f32; 6];
            super::plane_moments_par(&xs, plane, &mut par);
            assert_eq!(got, par, "plane {plane}: threads change nothing");
            let mut portable = vec![0f32; 6];
            super::moments(&xs, plane, &mut portable);
            let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
            assert_eq!(
                bits(&got),
                bits(&portable),
                "plane {plane}: the vector path's bits"
            );
            #[cfg(target_arch = "x86_64")]
            if std::arch::is_x86_feature_detected!("avx") {
                let mut avx = vec![0f32; 6];
                // SAFETY: the CPU has AVX.
                unsafe { super::moments_avx(&xs, plane, &mut avx) };
                assert_eq!(
                    bits(&avx),
                    bits(&portable),
                    "plane {plane}: the AVX path's bits"
                );
            }
            for (k, p) in xs.chunks(plane).enumerate() {
                let s: f64 = p.iter().map(|&x| x as f64).sum();
                let m = s / plane as f64;
                let m2: f64 = p.iter().map(|&x| (x as f64 - m).powi(2)).sum();
                assert!(
                    (got[2 * k] as f64 - s).abs() <= 1e-6 * s.abs().max(1.0),
                    "sum {plane}"
                );
                assert!(
                    (got[2 * k + 1] as f64 - m2).abs() <= 1e-5 * m2.max(1.0),
                    "m2 {plane}: {} vs {m2}",
                    got[2 * k + 1]
                );
            }
        }
    }
}
