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

#[cfg(target_arch = "x86_64")]
use super::Packed;

/// Whether the CPU runs [`tiles_f64`].
#[cfg(target_arch = "x86_64")]
pub(super) fn available() -> bool {
    std::arch::is_x86_feature_detected!("avx512f")
        && std::arch::is_x86_feature_detected!("avx2")
        && std::arch::is_x86_feature_detected!("fma")
}

/// `tiles` for f64 (same arguments and contract as `tiles_with`): `acc[r][o]
/// = Σ_k x[rows[r] + k_offset[k]] · V[k0 + k][o]`, blocks of `block`
/// reduction steps accumulated in order, `V` and `acc` in the kernel's
/// panel layout (any width that is a multiple of 8).
///
/// # Safety
/// The CPU has AVX-512F, AVX2 and FMA ([`available`]); `rows.len()` is a
/// multiple of 6, `opad` and the panel width of 8, `V` holds rows `k0..k0 +
/// k_offset.len()`, `acc` is `rows.len()` rows of `opad` in the same layout,
/// and every `rows[r] + k_offset[k]` indexes `x`.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx2,fma")]
pub(super) unsafe fn tiles_f64(
    x: &[f64],
    rows: &[usize],
    k_offset: &[usize],
    kernel: Packed<'_, f64>,
    k0: usize,
    block: usize,
    acc: &mut [f64],
) {
    let Packed {
        data: v,
        opad,
        panels,
    } = kernel;
    debug_assert_eq!(rows.len() % 6, 0);
    debug_assert!(opad % 8 == 0 && panels.width % 8 == 0);
    let (v_rows, acc_rows, step) = (v.len() / opad, rows.len(), panels.width);
    for (kb, ks) in k_offset.chunks(block).enumerate() {
        let k = k0 + kb * block;
        let mut ot = 0;
        while ot < opad {
            let wide = ot + 16 <= opad;
            // The tile's two 8-feature slices of V (one when not wide).
            let second = if wide { ot + 8 } else { ot };
            let vs = [ot, second].map(|o| v[panels.at(v_rows, k, o)..].as_ptr());
            for rt in 0..acc_rows / 6 {
                let bases = &rows[rt * 6..rt * 6 + 6];
                let at = [ot, second].map(|o| panels.at(acc_rows, rt * 6, o));
                let out = [at[0], at[1]].map(|a| acc[a..].as_mut_ptr());
                // SAFETY: forwarded contract (the tile's bases and this k block;
                // each slice has `ks.len()` (V) or 6 (acc) rows of `step`).
                unsafe {
                    if wide {
                        tile16(x, bases, ks, vs, out, step, kb > 0);
                    } else {
                        tile8::<6>(x, bases, ks, vs[0], out[0], step, kb > 0);
                    }
                }
            }
            ot += if wide { 16 } else { 8 };
        }
    }
}

/// `tiles` for f32 (same arguments and contract as [`tiles_f64`], with
/// `opad` and the panel width multiples of 16): 6 × 32 tiles, 12 × 16 and 6
/// × 16 tiles for a last block of 16 features.
///
/// # Safety
/// As [`tiles_f64`], with 16 for 8.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx2,fma")]
pub(super) unsafe fn tiles_f32(
    x: &[f32],
    rows: &[usize],
    k_offset: &[usize],
    kernel: Packed<'_, f32>,
    k0: usize,
    block: usize,
    acc: &mut [f32],
) {
    let Packed {
        data: v,
        opad,
        panels,
    } = kernel;
    debug_assert_eq!(rows.len() % 6, 0);
    debug_assert!(opad % 16 == 0 && panels.width % 16 == 0);
    let (v_rows, acc_rows, step) = (v.len() / opad, rows.len(), panels.width);
    let out_at =
        |acc: &mut [f32], r: usize, o: usize| acc[panels.at(acc_rows, r, o)..].as_mut_ptr();
    for (kb, ks) in k_offset.chunks(block).enumerate() {
        let k = k0 + kb * block;
        let mut ot = 0;
        while ot < opad {
            let wide = ot + 32 <= opad;
            if wide {
                let vs = [ot, ot + 16].map(|o| v[panels.at(v_rows, k, o)..].as_ptr());
                for rt in 0..acc_rows / 6 {
                    let bases = &rows[rt * 6..rt * 6 + 6];
                    let out = [out_at(acc, rt * 6, ot), out_at(acc, rt * 6, ot + 16)];
                    // SAFETY: forwarded contract (the tile's bases and this k block).
                    unsafe { tile32_f32(x, bases, ks, vs, out, step, kb > 0) };
                }
            } else {
                // One vector of features: 12-row tiles, so twelve independent
                // FMA chains hide the FMA latency (six could not: a 16-feature
                // layer ran at ~60 % of the 32-wide tiles' rate), and a 6-row
                // tile for the rest.
                let vs = v[panels.at(v_rows, k, ot)..].as_ptr();
                let pairs = acc_rows / 12;
                for rt in 0..pairs {
                    let bases = &rows[rt * 12..rt * 12 + 12];
                    let out = out_at(acc, rt * 12, ot);
                    // SAFETY: as above.
                    unsafe { tile16_f32::<12>(x, bases, ks, vs, out, step, kb > 0) };
                }
                let r0 = pairs * 12;
                if r0 < acc_rows {
                    let out = out_at(acc, r0, ot);
                    // SAFETY: as above (rows.len() is a multiple of 6).
                    unsafe { tile16_f32::<6>(x, &rows[r0..r0 + 6], ks, vs, out, step, kb > 0) };
                }
            }
            ot += if wide { 32 } else { 16 };
        }
    }
}

/// Defines `$name`, one 6-row tile of two vectors of output features for
/// element type `$t` with the AVX-512 intrinsics given: rows `bases`, summed
/// over `ks` with the two feature slices of V at `v[0]`, `v[1]` (reduction
/// row `j` at `+ j · step`), stored to the accumulator slices `out` (row `r`
/// at `+ r · step`), added to what they hold when `accumulate`.
macro_rules! two_vector_tile {
    ($(#[$doc:meta])* $name:ident: $t:ty, $zero:ident, $load:ident, $set1:ident, $fmadd:ident, $store:ident) => {
        $(#[$doc])*
        #[cfg(target_arch = "x86_64")]
        #[target_feature(enable = "avx512f,avx2,fma")]
        unsafe fn $name(
            x: &[$t],
            bases: &[usize],
            ks: &[usize],
            v: [*const $t; 2],
            out: [*mut $t; 2],
            step: usize,
            accumulate: bool,
        ) {
            // SAFETY: every pointer below stays inside `x`, `v` or `out` by the contract.
            unsafe {
                let mut a = [[$zero(); 2]; 6];
                if accumulate {
                    for (r, row) in a.iter_mut().enumerate() {
                        row[0] = $load(out[0].add(r * step));
                        row[1] = $load(out[1].add(r * step));
                    }
                }
                let xp: [*const $t; 6] = std::array::from_fn(|r| x.as_ptr().add(bases[r]));
                let [mut v0, mut v1] = v;
                for &k in ks {
                    let w0 = $load(v0);
                    let w1 = $load(v1);
                    for r in 0..6 {
                        let xv = $set1(*xp[r].add(k));
                        a[r][0] = $fmadd(xv, w0, a[r][0]);
                        a[r][1] = $fmadd(xv, w1, a[r][1]);
                    }
                    v0 = v0.add(step);
                    v1 = v1.add(step);
                }
                for (r, row) in a.iter().enumerate() {
                    $store(out[0].add(r * step), row[0]);
                    $store(out[1].add(r * step), row[1]);
                }
            }
        }
    };
}

/// Defines `$name::<R>`, one `R`-row tile of one vector of output features
/// for element type `$t`, as [`two_vector_tile`] with one slice.
macro_rules! one_vector_tile {
    ($(#[$doc:meta])* $name:ident: $t:ty, $zero:ident, $load:ident, $set1:ident, $fmadd:ident, $store:ident) => {
        $(#[$doc])*
        #[cfg(target_arch = "x86_64")]
        #[target_feature(enable = "avx512f,avx2,fma")]
        unsafe fn $name<const R: usize>(
            x: &[$t],
            bases: &[usize],
            ks: &[usize],
            v: *const $t,
            out: *mut $t,
            step: usize,
            accumulate: bool,
        ) {
            // SAFETY: every pointer below stays inside `x`, `v` or `out` by the contract.
            unsafe {
                let mut a = [$zero(); R];
                if accumulate {
                    for (r, row) in a.iter_mut().enumerate() {
                        *row = $load(out.add(r * step));
                    }
                }
                let xp: [*const $t; R] = std::array::from_fn(|r| x.as_ptr().add(bases[r]));
                let mut vp = v;
                for &k in ks {
                    let w = $load(vp);
                    for (r, row) in a.iter_mut().enumerate() {
                        *row = $fmadd($set1(*xp[r].add(k)), w, *row);
                    }
                    vp = vp.add(step);
                }
                for (r, row) in a.iter().enumerate() {
                    $store(out.add(r * step), *row);
                }
            }
        }
    };
}

two_vector_tile!(
    /// One 6 × 16 f64 tile (two 8-feature slices).
    ///
    /// # Safety
    /// As [`tiles_f64`]; the slices hold `ks.len()` (V) and 6 (out) rows.
    tile16: f64, _mm512_setzero_pd, _mm512_loadu_pd, _mm512_set1_pd, _mm512_fmadd_pd, _mm512_storeu_pd
);

one_vector_tile!(
    /// One `R` × 8 f64 tile (R = 6: the last 8 features when `opad` is not a
    /// multiple of 16).
    ///
    /// # Safety
    /// As [`tile16`], with `R` rows of `out`.
    tile8: f64, _mm512_setzero_pd, _mm512_loadu_pd, _mm512_set1_pd, _mm512_fmadd_pd, _mm512_storeu_pd
);

two_vector_tile!(
    /// One 6 × 32 f32 tile (two 16-feature slices).
    ///
    /// # Safety
    /// As [`tile16`].
    tile32_f32: f32, _mm512_setzero_ps, _mm512_loadu_ps, _mm512_set1_ps, _mm512_fmadd_ps, _mm512_storeu_ps
);

one_vector_tile!(
    /// One `R` × 16 f32 tile (R = 6 or 12; the last 16 features when `opad`
    /// is not a multiple of 32, or all of them when it is 16).
    ///
    /// # Safety
    /// As [`tile16`], with `R` rows of `out`.
    tile16_f32: f32, _mm512_setzero_ps, _mm512_loadu_ps, _mm512_set1_ps, _mm512_fmadd_ps, _mm512_storeu_ps
);

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
    use crate::fast::implicit::Panels;
    use ir::rng::Rng;

    /// The AVX-512 tiles are the fused AVX2 tiles bit for bit: widths that
    /// are and are not multiples of 16 (the 8-wide last block), reductions
    /// cut into several blocks (accumulating tiles), scattered row bases.
    #[test]
    fn avx512_tiles_are_the_fused_tiles_bit_for_bit() {
        if !available() {
            crate::skipped("needs AVX-512F, AVX2 and FMA, which this CPU lacks");
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
            // Three spare reduction rows before the slice (k0 = 3), so the
            // tiles are seen to start where they are told.
            let v: Vec<f64> = (0..(n_k + 3) * opad).map(|_| rng.normal()).collect();
            // Row-major, and panels of one zmm (8 f64), as the tiles read.
            let nv = 8;
            for panels in [Panels { width: opad }, Panels { width: nv }] {
                let kernel = Packed {
                    data: &v,
                    opad,
                    panels,
                };
                let mut want = vec![f64::NAN; n_rows * opad];
                let mut got = vec![f64::NAN; n_rows * opad];
                // SAFETY: the shapes above meet both kernels' contracts (max row
                // 199 + max offset 299 < 500).
                unsafe {
                    crate::fast::implicit::tiles::tiles_with::<f64, true>(
                        &x, &rows, &k_offset, kernel, 3, block, &mut want,
                    );
                    tiles_f64(&x, &rows, &k_offset, kernel, 3, block, &mut got);
                }
                assert!(
                    want.iter()
                        .zip(&got)
                        .all(|(a, b)| a.to_bits() == b.to_bits()),
                    "opad {opad}, rows {n_rows}, k {n_k}, block {block}, {panels:?}"
                );
            }
        }
    }

    /// The f32 AVX-512 tiles are the fused AVX2 f32 tiles bit for bit: widths
    /// that are and are not multiples of 32 (the 16-wide last block), several
    /// reduction blocks, scattered row bases.
    #[test]
    fn avx512_f32_tiles_are_the_fused_tiles_bit_for_bit() {
        if !available() {
            crate::skipped("needs AVX-512F, AVX2 and FMA, which this CPU lacks");
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
            // Three spare reduction rows before the slice (k0 = 3), so the
            // tiles are seen to start where they are told.
            let v: Vec<f32> = (0..(n_k + 3) * opad).map(|_| rng.normal() as f32).collect();
            // Row-major, and panels of one zmm (16 f32), as the tiles read.
            let nv = 16;
            for panels in [Panels { width: opad }, Panels { width: nv }] {
                let kernel = Packed {
                    data: &v,
                    opad,
                    panels,
                };
                let mut want = vec![f32::NAN; n_rows * opad];
                let mut got = vec![f32::NAN; n_rows * opad];
                // SAFETY: the shapes above meet both kernels' contracts (max row
                // 199 + max offset 299 < 500).
                unsafe {
                    crate::fast::implicit::tiles::tiles_with::<f32, true>(
                        &x, &rows, &k_offset, kernel, 3, block, &mut want,
                    );
                    tiles_f32(&x, &rows, &k_offset, kernel, 3, block, &mut got);
                }
                assert!(
                    want.iter()
                        .zip(&got)
                        .all(|(a, b)| a.to_bits() == b.to_bits()),
                    "opad {opad}, rows {n_rows}, k {n_k}, block {block}, {panels:?}"
                );
            }
        }
    }
}
