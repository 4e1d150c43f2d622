//! The tile loops of the implicit-GEMM convolution on AVX-512, for f64 (the
//! certifier's convolutions: f64 and the parts of dual numbers) and f32 (the
//! executor's convolutions; the AVX2 tiles reach half the FMA width that
//! sgemm uses on these CPUs). Register tiles of 6 rows × two zmm of output
//! features (16 f64 or 32 f32; two accumulators per row), with a 6 × one-zmm
//! tile for a last block (8 f64 or 16 f32) — 12 × one-zmm for f32, so a
//! 16-feature layer also keeps twelve FMA chains in flight. Each output element is the same
//! fused multiply-add chain over the reduction, in the same order, as the
//! AVX2 tiles compute it (a tile's width only groups elements), so the
//! results are bit for bit the AVX2 path's.

#[cfg(target_arch = "x86_64")]
use std::arch::x86_64::*;

/// Whether the CPU runs [`tiles_f64`].
#[cfg(target_arch = "x86_64")]
pub(super) fn available() -> bool {
    std::arch::is_x86_feature_detected!("avx512f")
        && std::arch::is_x86_feature_detected!("avx2")
        && std::arch::is_x86_feature_detected!("fma")
}

/// `tiles` for f64 (same arguments and contract): `acc[r][o] = Σ_k
/// x[rows[r] + k_offset[k]] · v[k][o]`, blocks of `block` reduction steps
/// accumulated in order.
///
/// # Safety
/// The CPU has AVX-512F, AVX2 and FMA ([`available`]); `rows.len()` is a
/// multiple of 6, `opad` of 8, `v` is `[k_offset.len()][opad]`, `acc` is
/// `[rows.len()][opad]`, and every `rows[r] + k_offset[k]` indexes `x`.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx2,fma")]
pub(super) unsafe fn tiles_f64(
    x: &[f64],
    rows: &[usize],
    k_offset: &[usize],
    v: &[f64],
    opad: usize,
    block: usize,
    acc: &mut [f64],
) {
    debug_assert_eq!(rows.len() % 6, 0);
    debug_assert_eq!(opad % 8, 0);
    for (kb, ks) in k_offset.chunks(block).enumerate() {
        let vb = &v[kb * block * opad..];
        let mut ot = 0;
        while ot < opad {
            let wide = ot + 16 <= opad;
            for (rt, bases) in rows.chunks_exact(6).enumerate() {
                let out = &mut acc[rt * 6 * opad..(rt + 1) * 6 * opad];
                // SAFETY: forwarded contract (the tile's bases and this k block).
                unsafe {
                    if wide {
                        tile16(x, bases, ks, vb, opad, ot, kb > 0, out);
                    } else {
                        tile8(x, bases, ks, vb, opad, ot, kb > 0, out);
                    }
                }
            }
            ot += if wide { 16 } else { 8 };
        }
    }
}

/// One 6 × 16 tile: rows `bases`, output features `ot..ot + 16`, summed over
/// `ks` and stored to `out` (`[6][opad]`), added to what `out` holds when
/// `accumulate`.
///
/// # Safety
/// As [`tiles_f64`]; `ot + 16 ≤ opad`.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx2,fma")]
#[allow(clippy::too_many_arguments)]
unsafe fn tile16(
    x: &[f64],
    bases: &[usize],
    ks: &[usize],
    v: &[f64],
    opad: usize,
    ot: usize,
    accumulate: bool,
    out: &mut [f64],
) {
    let o = out.as_mut_ptr();
    // SAFETY: every pointer below stays inside `x`, `v` or `out` by the contract.
    unsafe {
        let mut a = [[_mm512_setzero_pd(); 2]; 6];
        if accumulate {
            for (r, row) in a.iter_mut().enumerate() {
                row[0] = _mm512_loadu_pd(o.add(r * opad + ot));
                row[1] = _mm512_loadu_pd(o.add(r * opad + ot + 8));
            }
        }
        let xp: [*const f64; 6] = std::array::from_fn(|r| x.as_ptr().add(bases[r]));
        let mut vp = v.as_ptr().add(ot);
        for &k in ks {
            let w0 = _mm512_loadu_pd(vp);
            let w1 = _mm512_loadu_pd(vp.add(8));
            for r in 0..6 {
                let xv = _mm512_set1_pd(*xp[r].add(k));
                a[r][0] = _mm512_fmadd_pd(xv, w0, a[r][0]);
                a[r][1] = _mm512_fmadd_pd(xv, w1, a[r][1]);
            }
            vp = vp.add(opad);
        }
        for (r, row) in a.iter().enumerate() {
            _mm512_storeu_pd(o.add(r * opad + ot), row[0]);
            _mm512_storeu_pd(o.add(r * opad + ot + 8), row[1]);
        }
    }
}

/// One 6 × 8 tile (the last 8 features when `opad` is not a multiple of 16).
///
/// # Safety
/// As [`tiles_f64`]; `ot + 8 ≤ opad`.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx2,fma")]
#[allow(clippy::too_many_arguments)]
unsafe fn tile8(
    x: &[f64],
    bases: &[usize],
    ks: &[usize],
    v: &[f64],
    opad: usize,
    ot: usize,
    accumulate: bool,
    out: &mut [f64],
) {
    let o = out.as_mut_ptr();
    // SAFETY: as in `tile16`.
    unsafe {
        let mut a = [_mm512_setzero_pd(); 6];
        if accumulate {
            for (r, row) in a.iter_mut().enumerate() {
                *row = _mm512_loadu_pd(o.add(r * opad + ot));
            }
        }
        let xp: [*const f64; 6] = std::array::from_fn(|r| x.as_ptr().add(bases[r]));
        let mut vp = v.as_ptr().add(ot);
        for &k in ks {
            let w = _mm512_loadu_pd(vp);
            for (r, row) in a.iter_mut().enumerate() {
                *row = _mm512_fmadd_pd(_mm512_set1_pd(*xp[r].add(k)), w, *row);
            }
            vp = vp.add(opad);
        }
        for (r, row) in a.iter().enumerate() {
            _mm512_storeu_pd(o.add(r * opad + ot), *row);
        }
    }
}

/// `tiles` for f32 (same arguments and contract as [`tiles_f64`], with
/// `opad` a multiple of 16): 6 × 32 tiles, a 6 × 16 tile for a last block
/// of 16 features.
///
/// # Safety
/// The CPU has AVX-512F, AVX2 and FMA ([`available`]); `rows.len()` is a
/// multiple of 6, `opad` of 16, `v` is `[k_offset.len()][opad]`, `acc` is
/// `[rows.len()][opad]`, and every `rows[r] + k_offset[k]` indexes `x`.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx2,fma")]
pub(super) unsafe fn tiles_f32(
    x: &[f32],
    rows: &[usize],
    k_offset: &[usize],
    v: &[f32],
    opad: usize,
    block: usize,
    acc: &mut [f32],
) {
    debug_assert_eq!(rows.len() % 6, 0);
    debug_assert_eq!(opad % 16, 0);
    for (kb, ks) in k_offset.chunks(block).enumerate() {
        let vb = &v[kb * block * opad..];
        let mut ot = 0;
        while ot < opad {
            let wide = ot + 32 <= opad;
            if wide {
                for (rt, bases) in rows.chunks_exact(6).enumerate() {
                    let out = &mut acc[rt * 6 * opad..(rt + 1) * 6 * opad];
                    // SAFETY: forwarded contract (the tile's bases and this k block).
                    unsafe { tile32_f32(x, bases, ks, vb, opad, ot, kb > 0, out) };
                }
            } else {
                // One vector of features: 12-row tiles, so twelve independent
                // FMA chains hide the FMA latency (six could not: a 16-feature
                // layer ran at ~60 % of the 32-wide tiles' rate), and a 6-row
                // tile for the rest.
                let pairs = rows.len() / 12;
                for (rt, bases) in rows.chunks_exact(12).enumerate() {
                    let out = &mut acc[rt * 12 * opad..(rt + 1) * 12 * opad];
                    // SAFETY: as above.
                    unsafe { tile16_f32::<12>(x, bases, ks, vb, opad, ot, kb > 0, out) };
                }
                let r0 = pairs * 12;
                if r0 < rows.len() {
                    let out = &mut acc[r0 * opad..(r0 + 6) * opad];
                    // SAFETY: as above (rows.len() is a multiple of 6).
                    unsafe { tile16_f32::<6>(x, &rows[r0..r0 + 6], ks, vb, opad, ot, kb > 0, out) };
                }
            }
            ot += if wide { 32 } else { 16 };
        }
    }
}

/// One 6 × 32 f32 tile (as [`tile16`] for f64).
///
/// # Safety
/// As [`tiles_f32`]; `ot + 32 ≤ opad`.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx2,fma")]
#[allow(clippy::too_many_arguments)]
unsafe fn tile32_f32(
    x: &[f32],
    bases: &[usize],
    ks: &[usize],
    v: &[f32],
    opad: usize,
    ot: usize,
    accumulate: bool,
    out: &mut [f32],
) {
    let o = out.as_mut_ptr();
    // SAFETY: every pointer below stays inside `x`, `v` or `out` by the contract.
    unsafe {
        let mut a = [[_mm512_setzero_ps(); 2]; 6];
        if accumulate {
            for (r, row) in a.iter_mut().enumerate() {
                row[0] = _mm512_loadu_ps(o.add(r * opad + ot));
                row[1] = _mm512_loadu_ps(o.add(r * opad + ot + 16));
            }
        }
        let xp: [*const f32; 6] = std::array::from_fn(|r| x.as_ptr().add(bases[r]));
        let mut vp = v.as_ptr().add(ot);
        for &k in ks {
            let w0 = _mm512_loadu_ps(vp);
            let w1 = _mm512_loadu_ps(vp.add(16));
            for r in 0..6 {
                let xv = _mm512_set1_ps(*xp[r].add(k));
                a[r][0] = _mm512_fmadd_ps(xv, w0, a[r][0]);
                a[r][1] = _mm512_fmadd_ps(xv, w1, a[r][1]);
            }
            vp = vp.add(opad);
        }
        for (r, row) in a.iter().enumerate() {
            _mm512_storeu_ps(o.add(r * opad + ot), row[0]);
            _mm512_storeu_ps(o.add(r * opad + ot + 16), row[1]);
        }
    }
}

/// One `R` × 16 f32 tile (R = 6 or 12; the last 16 features when `opad` is
/// not a multiple of 32, or all of them when it is 16).
///
/// # Safety
/// As [`tiles_f32`]; `ot + 16 ≤ opad`, `bases` holds `R` rows.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx2,fma")]
#[allow(clippy::too_many_arguments)]
unsafe fn tile16_f32<const R: usize>(
    x: &[f32],
    bases: &[usize],
    ks: &[usize],
    v: &[f32],
    opad: usize,
    ot: usize,
    accumulate: bool,
    out: &mut [f32],
) {
    let o = out.as_mut_ptr();
    // SAFETY: as in `tile32_f32`.
    unsafe {
        let mut a = [_mm512_setzero_ps(); R];
        if accumulate {
            for (r, row) in a.iter_mut().enumerate() {
                *row = _mm512_loadu_ps(o.add(r * opad + ot));
            }
        }
        let xp: [*const f32; R] = std::array::from_fn(|r| x.as_ptr().add(bases[r]));
        let mut vp = v.as_ptr().add(ot);
        for &k in ks {
            let w = _mm512_loadu_ps(vp);
            for (r, row) in a.iter_mut().enumerate() {
                *row = _mm512_fmadd_ps(_mm512_set1_ps(*xp[r].add(k)), w, *row);
            }
            vp = vp.add(opad);
        }
        for (r, row) in a.iter().enumerate() {
            _mm512_storeu_ps(o.add(r * opad + ot), *row);
        }
    }
}

/// Transposes a 16 × 16 block: row `i` of the block is the 16 floats at
/// `src + i·src_stride` (output positions × features, the tile accumulators'
/// layout), and column `c` is stored, plus `bias[c]` when given, as 16 floats
/// at `dst + c·dst_stride` for the first `cols` columns (the output's
/// `[feature][position]` layout). One IEEE add per element with `bias`, as
/// the scalar path: the same bits.
///
/// # Safety
/// The CPU has AVX-512F; the 16 source rows of 16 floats are readable, the
/// first `cols` ≤ 16 destination rows of 16 floats writable, and `bias`
/// (when given) holds at least `cols` values.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f")]
pub(super) unsafe fn transpose16_f32(
    src: *const f32,
    src_stride: usize,
    dst: *mut f32,
    dst_stride: usize,
    cols: usize,
    bias: Option<&[f32]>,
) {
    // SAFETY: every load and store below is inside the block of the contract.
    unsafe {
        let r: [__m512; 16] = std::array::from_fn(|i| _mm512_loadu_ps(src.add(i * src_stride)));
        let col = transpose16_regs(r);
        for (c, &v) in col.iter().enumerate().take(cols) {
            let v = match bias {
                Some(bias) => _mm512_add_ps(v, _mm512_set1_ps(bias[c])),
                None => v,
            };
            _mm512_storeu_ps(dst.add(c * dst_stride), v);
        }
    }
}

/// The 16 × 16 transpose of the rows `r` in registers: lane `i` of result
/// `c` is lane `c` of `r[i]`.
///
/// # Safety
/// The CPU has AVX-512F.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f")]
#[inline]
pub(crate) unsafe fn transpose16_regs(r: [__m512; 16]) -> [__m512; 16] {
    // Within each 128-bit lane L: a[2k] = rows 2k, 2k+1 interleaved at
    // columns 4L, 4L+1; a[2k+1] at columns 4L+2, 4L+3.
    let a: [__m512; 16] = std::array::from_fn(|i| {
        let (x, y) = (r[i & !1], r[i | 1]);
        if i % 2 == 0 {
            _mm512_unpacklo_ps(x, y)
        } else {
            _mm512_unpackhi_ps(x, y)
        }
    });
    // b[4g + q], lane L: column 4L + q of rows 4g..4g+4.
    let b: [__m512; 16] = std::array::from_fn(|i| {
        let (g, q) = (i / 4, i % 4);
        let x = _mm512_castps_pd(a[4 * g + q / 2]);
        let y = _mm512_castps_pd(a[4 * g + q / 2 + 2]);
        _mm512_castpd_ps(if q % 2 == 0 {
            _mm512_unpacklo_pd(x, y)
        } else {
            _mm512_unpackhi_pd(x, y)
        })
    });
    let mut col = [_mm512_setzero_ps(); 16];
    for q in 0..4 {
        // Lanes (0, 2) and (1, 3) of the four row groups gathered in turn.
        let lo01 = _mm512_shuffle_f32x4::<0x88>(b[q], b[4 + q]);
        let lo23 = _mm512_shuffle_f32x4::<0x88>(b[8 + q], b[12 + q]);
        let hi01 = _mm512_shuffle_f32x4::<0xdd>(b[q], b[4 + q]);
        let hi23 = _mm512_shuffle_f32x4::<0xdd>(b[8 + q], b[12 + q]);
        col[q] = _mm512_shuffle_f32x4::<0x88>(lo01, lo23);
        col[8 + q] = _mm512_shuffle_f32x4::<0xdd>(lo01, lo23);
        col[4 + q] = _mm512_shuffle_f32x4::<0x88>(hi01, hi23);
        col[12 + q] = _mm512_shuffle_f32x4::<0xdd>(hi01, hi23);
    }
    col
}

#[cfg(all(test, target_arch = "x86_64"))]
mod tests {
    use super::*;
    use ir::rng::Rng;

    /// The AVX-512 tiles are the fused AVX2 tiles bit for bit: widths that
    /// are and are not multiples of 16 (the 8-wide last block), reductions
    /// cut into several blocks (accumulating tiles), scattered row bases.
    #[test]
    fn avx512_tiles_are_the_fused_tiles_bit_for_bit() {
        if !available() {
            eprintln!("no AVX-512 on this CPU: nothing to compare");
            return;
        }
        let mut rng = Rng::new(5);
        for (opad, n_rows, n_k, block) in [
            (8, 6, 5, 16),
            (16, 12, 40, 16),
            (24, 18, 33, 16),
            (40, 6, 100, 17),
            (64, 30, 7, 256),
        ] {
            let x: Vec<f64> = (0..500).map(|_| rng.normal()).collect();
            let rows: Vec<usize> = (0..n_rows)
                .map(|_| (rng.next_u64() % 200) as usize)
                .collect();
            let k_offset: Vec<usize> = (0..n_k).map(|_| (rng.next_u64() % 300) as usize).collect();
            let v: Vec<f64> = (0..n_k * opad).map(|_| rng.normal()).collect();
            let mut want = vec![f64::NAN; n_rows * opad];
            let mut got = vec![f64::NAN; n_rows * opad];
            // SAFETY: the shapes above meet both kernels' contracts (max row
            // 199 + max offset 299 < 500).
            unsafe {
                crate::fast::implicit::tiles_with::<f64, true>(
                    &x, &rows, &k_offset, &v, opad, block, &mut want,
                );
                tiles_f64(&x, &rows, &k_offset, &v, opad, block, &mut got);
            }
            assert!(
                want.iter()
                    .zip(&got)
                    .all(|(a, b)| a.to_bits() == b.to_bits()),
                "opad {opad}, rows {n_rows}, k {n_k}, block {block}"
            );
        }
    }

    /// The f32 AVX-512 tiles are the fused AVX2 f32 tiles bit for bit: widths
    /// that are and are not multiples of 32 (the 16-wide last block), several
    /// reduction blocks, scattered row bases.
    #[test]
    fn avx512_f32_tiles_are_the_fused_tiles_bit_for_bit() {
        if !available() {
            eprintln!("no AVX-512 on this CPU: nothing to compare");
            return;
        }
        let mut rng = Rng::new(9);
        for (opad, n_rows, n_k, block) in [
            (16, 6, 5, 16),
            (16, 24, 40, 16),
            (16, 18, 21, 8),
            (48, 30, 33, 16),
            (32, 12, 40, 16),
            (48, 18, 33, 16),
            (80, 6, 100, 17),
            (64, 30, 7, 256),
        ] {
            let x: Vec<f32> = (0..500).map(|_| rng.normal() as f32).collect();
            let rows: Vec<usize> = (0..n_rows)
                .map(|_| (rng.next_u64() % 200) as usize)
                .collect();
            let k_offset: Vec<usize> = (0..n_k).map(|_| (rng.next_u64() % 300) as usize).collect();
            let v: Vec<f32> = (0..n_k * opad).map(|_| rng.normal() as f32).collect();
            let mut want = vec![f32::NAN; n_rows * opad];
            let mut got = vec![f32::NAN; n_rows * opad];
            // SAFETY: the shapes above meet both kernels' contracts (max row
            // 199 + max offset 299 < 500).
            unsafe {
                crate::fast::implicit::tiles_with::<f32, true>(
                    &x, &rows, &k_offset, &v, opad, block, &mut want,
                );
                tiles_f32(&x, &rows, &k_offset, &v, opad, block, &mut got);
            }
            assert!(
                want.iter()
                    .zip(&got)
                    .all(|(a, b)| a.to_bits() == b.to_bits()),
                "opad {opad}, rows {n_rows}, k {n_k}, block {block}"
            );
        }
    }
}
