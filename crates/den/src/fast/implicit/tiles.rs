//! The implicit-GEMM tile loops: `acc[r][o] = Σ_k x[rows[r] + k_offset[k]]
//! · V[k][o]` in register tiles of `MR` rows × `NV` features, on AVX-512
//! (`avx512.rs`), compiled for AVX2 + FMA, or portable; every element summed
//! in the reduction's order whatever the tile width and blocking.

use super::layout::Packed;
use super::{avx512, same_type, same_type_mut};
use crate::fast::float::FastFloat;

/// Floats the tile loop runs on: `f32` and `f64`, with the fused multiply-add
/// used when the CPU has one.
pub(crate) trait TileFloat: FastFloat {
    /// Register tile: rows (broadcast input elements) and output features (vector lanes).
    const MR: usize;
    const NV: usize;
    fn fma(a: Self, b: Self, c: Self) -> Self;
}

impl TileFloat for f32 {
    const MR: usize = 6;
    const NV: usize = 16;
    #[inline(always)]
    fn fma(a: Self, b: Self, c: Self) -> Self {
        a.mul_add(b, c)
    }
}

impl TileFloat for f64 {
    const MR: usize = 6;
    const NV: usize = 8;
    #[inline(always)]
    fn fma(a: Self, b: Self, c: Self) -> Self {
        a.mul_add(b, c)
    }
}

/// `acc[r][o] = Σ_k x[rows[r] + k_offset[k]] · V[k0 + k][o]` over all tiles
/// (`acc` in the kernel's layout, `rows.len()` rows); `acc`'s previous
/// contents are overwritten.
pub(super) fn tiles<U: TileFloat>(
    x: &[U],
    rows: &[usize],
    k_offset: &[usize],
    kernel: Packed<'_, U>,
    k0: usize,
    v_block_bytes: usize,
    acc: &mut [U],
) {
    let Packed {
        data: v,
        opad,
        panels,
    } = kernel;
    let block = (v_block_bytes / (opad * std::mem::size_of::<U>())).max(16);
    assert_eq!(rows.len() % U::MR, 0);
    assert_eq!(opad % U::NV, 0);
    assert_eq!(panels.width % U::NV, 0);
    assert_eq!(opad % panels.width, 0);
    assert_eq!(v.len() % opad, 0);
    assert!(k0 + k_offset.len() <= v.len() / opad);
    assert_eq!(acc.len(), rows.len() * opad);
    let max_row = rows.iter().copied().max().unwrap_or(0);
    let max_k = k_offset.iter().copied().max().unwrap_or(0);
    assert!(k_offset.is_empty() || max_row + max_k < x.len());
    if k_offset.is_empty() {
        // An empty sum (no input features): the tile loops would write nothing.
        acc.fill(U::ZERO);
        return;
    }
    #[cfg(target_arch = "x86_64")]
    {
        if avx512::available() {
            // The AVX-512 tiles of element type `$t` when `U` is `$t`.
            macro_rules! avx512_tiles_of {
                ($t:ty, $tiles:path) => {
                    if let (Some(x), Some(v), Some(acc)) = (
                        same_type::<U, $t>(x),
                        same_type::<U, $t>(v),
                        same_type_mut::<U, $t>(acc),
                    ) {
                        let kernel = Packed {
                            data: v,
                            opad,
                            panels,
                        };
                        // SAFETY: the CPU has the features; the asserts above
                        // are the tiles' contract (f64's tile is 6 rows of 8
                        // lanes, f32's 6 rows of 16, so `opad` and the panel
                        // width are multiples of 16 there).
                        unsafe { $tiles(x, rows, k_offset, kernel, k0, block, acc) };
                        return;
                    }
                };
            }
            avx512_tiles_of!(f64, avx512::tiles_f64);
            avx512_tiles_of!(f32, avx512::tiles_f32);
        }
        if std::arch::is_x86_feature_detected!("avx2") && std::arch::is_x86_feature_detected!("fma")
        {
            // SAFETY: the CPU has AVX2 and FMA; the asserts above are `tiles_with`'s contract.
            unsafe { tiles_avx2(x, rows, k_offset, kernel, k0, block, acc) };
            return;
        }
    }
    // SAFETY: the asserts above are `tiles_with`'s contract.
    unsafe { tiles_with::<U, false>(x, rows, k_offset, kernel, k0, block, acc) }
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
pub(super) unsafe fn tiles_avx2<U: TileFloat>(
    x: &[U],
    rows: &[usize],
    k_offset: &[usize],
    kernel: Packed<'_, U>,
    k0: usize,
    block: usize,
    acc: &mut [U],
) {
    // SAFETY: forwarded contract.
    unsafe { tiles_with::<U, true>(x, rows, k_offset, kernel, k0, block, acc) }
}

/// # Safety
/// `rows.len()` is a multiple of `MR`, `opad` and the panel width of `NV`,
/// `V` holds rows `k0..k0 + k_offset.len()`, `acc` is `rows.len()` rows of
/// `opad` in the same layout, and every `rows[r] + k_offset[k]` indexes `x`.
#[inline(always)]
pub(super) unsafe fn tiles_with<U: TileFloat, const FUSED: bool>(
    x: &[U],
    rows: &[usize],
    k_offset: &[usize],
    kernel: Packed<'_, U>,
    k0: usize,
    block: usize,
    acc: &mut [U],
) {
    let Packed {
        data: v,
        opad,
        panels,
    } = kernel;
    let (v_rows, acc_rows) = (v.len() / opad, rows.len());
    for (kb, ks) in k_offset.chunks(block).enumerate() {
        for ot in (0..opad).step_by(U::NV) {
            let vb = &v[panels.at(v_rows, k0 + kb * block, ot)..];
            for (rt, bases) in rows.chunks_exact(U::MR).enumerate() {
                let out = &mut acc[panels.at(acc_rows, rt * U::MR, ot)..];
                // SAFETY: forwarded contract (the tile's bases and this k block).
                unsafe {
                    if U::MR == 6 && U::NV == 16 {
                        tile::<U, 6, 16, FUSED>(x, bases, ks, vb, panels.width, kb > 0, out);
                    } else if U::MR == 6 && U::NV == 8 {
                        tile::<U, 6, 8, FUSED>(x, bases, ks, vb, panels.width, kb > 0, out);
                    } else {
                        unreachable!("tile shape without a kernel");
                    }
                }
            }
        }
    }
}

/// One `MR × NV` register tile: rows `bases`, summed over `ks` with the
/// kernel's rows at `v`, `v[step]`, … and stored to `out`'s rows `0, step,
/// …` (`NV` features each), added to what `out` holds when `accumulate`.
///
/// # Safety
/// As [`tiles_with`]: `step ≥ NV`; `v` holds the `NV` kernel values of row
/// `i` at `i·step` for every `i < ks.len()` (at least
/// `(ks.len() − 1)·step + NV` elements); `bases[r] + k` indexes `x` for
/// every row `r < MR` and every `k` of `ks`.
#[inline(always)]
pub(super) unsafe fn tile<U: TileFloat, const MR: usize, const NV: usize, const FUSED: bool>(
    x: &[U],
    bases: &[usize],
    ks: &[usize],
    v: &[U],
    step: usize,
    accumulate: bool,
    out: &mut [U],
) {
    let mut a = [[U::ZERO; NV]; MR];
    if accumulate {
        for (r, row) in a.iter_mut().enumerate() {
            row.copy_from_slice(&out[r * step..r * step + NV]);
        }
    }
    debug_assert!(step >= NV && bases.len() >= MR);
    debug_assert!(ks.is_empty() || (ks.len() - 1) * step + NV <= v.len());
    debug_assert!(ks
        .iter()
        .max()
        .is_none_or(|&k| { bases[..MR].iter().all(|&b| b + k < x.len()) }));
    let xp: [*const U; MR] = std::array::from_fn(|r| unsafe { x.as_ptr().add(bases[r]) });
    for (i, &k) in ks.iter().enumerate() {
        // SAFETY: row i of v lies inside v (i < ks.len(): the contract), so
        // the pointer never passes v's end; bases[r] + k indexes x.
        let w: [U; NV] = unsafe { *v.as_ptr().add(i * step).cast::<[U; NV]>() };
        for r in 0..MR {
            let xv = unsafe { *xp[r].add(k) };
            for l in 0..NV {
                a[r][l] = if FUSED {
                    U::fma(xv, w[l], a[r][l])
                } else {
                    a[r][l] + xv * w[l]
                };
            }
        }
    }
    for (r, row) in a.iter().enumerate() {
        out[r * step..r * step + NV].copy_from_slice(row);
    }
}

#[cfg(test)]
mod tests {
    use super::super::layout::Panels;
    use super::*;
    use ir::rng::Rng;

    /// The tile loop over panels of 16 features sums every element in the
    /// row-major loop's order (the same bits), wherever the reduction range
    /// starts (`k0`, the reduction-parallel slices) and however the blocks
    /// cut it; and both are the definition, up to rounding.
    #[test]
    fn panel_tiles_are_the_row_major_tiles_bit_for_bit() {
        let mut rng = Rng::new(13);
        for (opad, n_rows, k_total, k0, n_k, block) in [
            (16usize, 6usize, 40usize, 0usize, 40usize, 16usize),
            (48, 12, 300, 100, 150, 64),
            (512, 18, 200, 7, 193, 16),
            (32, 30, 33, 33, 0, 16), // an empty reduction: zeros
        ] {
            let x: Vec<f32> = (0..600).map(|_| rng.signed_unit() as f32).collect();
            let rows: Vec<usize> = (0..n_rows)
                .map(|_| (rng.next_u64() % 250) as usize)
                .collect();
            let k_offset: Vec<usize> = (0..n_k).map(|_| (rng.next_u64() % 300) as usize).collect();
            // V[k][o] as values; packed once per layout.
            let value = |k: usize, o: usize| (((k * 31 + o * 17) % 97) as f32 - 48.0) / 64.0;
            let layouts = [Panels { width: opad }, Panels { width: 16 }];
            let results: Vec<Vec<f32>> = layouts
                .iter()
                .map(|&panels| {
                    let mut v = vec![f32::NAN; k_total * opad];
                    for k in 0..k_total {
                        for o in 0..opad {
                            v[panels.at(k_total, k, o)] = value(k, o);
                        }
                    }
                    let kernel = Packed {
                        data: &v,
                        opad,
                        panels,
                    };
                    let mut acc = vec![f32::NAN; n_rows * opad];
                    // SAFETY: max row 249 + max offset 299 < 600; shapes as the contract.
                    if n_k == 0 {
                        tiles(&x, &rows, &k_offset, kernel, k0, block * opad * 4, &mut acc);
                    } else {
                        unsafe {
                            tiles_with::<f32, true>(
                                &x, &rows, &k_offset, kernel, k0, block, &mut acc,
                            )
                        };
                    }
                    // Back to row-major for the comparison.
                    let mut plain = vec![0.0; n_rows * opad];
                    for r in 0..n_rows {
                        for o in 0..opad {
                            plain[r * opad + o] = acc[panels.at(n_rows, r, o)];
                        }
                    }
                    plain
                })
                .collect();
            let same = results[0]
                .iter()
                .zip(&results[1])
                .all(|(a, b)| a.to_bits() == b.to_bits());
            assert!(
                same,
                "opad {opad}, rows {n_rows}, k0 {k0}, k {n_k}, block {block}"
            );
            for r in 0..n_rows {
                for o in 0..opad {
                    let exact: f64 = (0..n_k)
                        .map(|k| f64::from(x[rows[r] + k_offset[k]]) * f64::from(value(k0 + k, o)))
                        .sum();
                    let got = f64::from(results[0][r * opad + o]);
                    assert!(
                        (got - exact).abs() <= 1e-5 * (1.0 + exact.abs()),
                        "r {r}, o {o}"
                    );
                }
            }
        }
    }
}
