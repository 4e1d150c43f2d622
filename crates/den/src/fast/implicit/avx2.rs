//! The 16 × 16 f32 block transposition of the implicit-GEMM convolution's
//! scatter and kernel packing on AVX2, for CPUs without AVX-512 (AMD Zen 2/3,
//! most desktop Intel parts): four 8 × 8 register transposes. Pure data
//! movement plus, with a bias, one IEEE add per element — the same bits as
//! the AVX-512 and scalar paths. On such a CPU the scalar transpositions had
//! been ~11 % of a cifar8-bbn batch-32 step.

#[cfg(target_arch = "x86_64")]
use std::arch::x86_64::*;

/// Whether the CPU runs [`transpose16_f32`].
#[cfg(target_arch = "x86_64")]
pub(super) fn available() -> bool {
    std::arch::is_x86_feature_detected!("avx2")
}

/// The 8 × 8 transpose of the rows `r` in registers: lane `i` of result
/// `c` is lane `c` of `r[i]`.
///
/// # Safety
/// The CPU has AVX2.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
#[inline]
unsafe fn transpose8_regs(r: [__m256; 8]) -> [__m256; 8] {
    // t[2g], t[2g+1]: rows 2g and 2g+1 interleaved (columns 0,1 | 4,5 and
    // 2,3 | 6,7 of each 128-bit half).
    let t: [__m256; 8] = std::array::from_fn(|i| {
        let (x, y) = (r[i & !1], r[i | 1]);
        if i % 2 == 0 {
            _mm256_unpacklo_ps(x, y)
        } else {
            _mm256_unpackhi_ps(x, y)
        }
    });
    // s[4h + q]: column q (low half) and q + 4 (high half) of rows 4h..4h+4.
    let s: [__m256; 8] = std::array::from_fn(|i| {
        let (h, q) = (i / 4, i % 4);
        let (x, y) = (t[4 * h + q / 2], t[4 * h + 2 + q / 2]);
        if q % 2 == 0 {
            _mm256_shuffle_ps::<0x44>(x, y)
        } else {
            _mm256_shuffle_ps::<0xee>(x, y)
        }
    });
    std::array::from_fn(|c| {
        let (x, y) = (s[c % 4], s[4 + c % 4]);
        if c < 4 {
            _mm256_permute2f128_ps::<0x20>(x, y)
        } else {
            _mm256_permute2f128_ps::<0x31>(x, y)
        }
    })
}

/// Transposes a 16 × 16 block: row `i` of the block is the 16 floats at
/// `src + i·src_stride`, and column `c` is stored, plus `bias[c]` when
/// given, as 16 floats at `dst + c·dst_stride` for the first `cols` columns
/// (the contract of the AVX-512 `transpose16_f32`).
///
/// # Safety
/// The CPU has AVX2; the 16 source rows of 16 floats are readable, the
/// first `cols` ≤ 16 destination rows of 16 floats writable, and `bias`
/// (when given) holds at least `cols` values.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
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
        // Quadrant (rows 8·rb.., columns 8·cb..) → destination rows 8·cb..,
        // positions 8·rb...
        for cb in 0..2 {
            if 8 * cb >= cols {
                break;
            }
            for rb in 0..2 {
                let r: [__m256; 8] = std::array::from_fn(|i| {
                    _mm256_loadu_ps(src.add((8 * rb + i) * src_stride + 8 * cb))
                });
                let col = transpose8_regs(r);
                for (j, &v) in col.iter().enumerate().take(cols - 8 * cb) {
                    let c = 8 * cb + j;
                    let v = match bias {
                        Some(bias) => _mm256_add_ps(v, _mm256_set1_ps(bias[c])),
                        None => v,
                    };
                    _mm256_storeu_ps(dst.add(c * dst_stride + 8 * rb), v);
                }
            }
        }
    }
}

#[cfg(all(test, target_arch = "x86_64"))]
mod tests {
    /// The block's columns land in the destination's rows, with and without
    /// a bias, for every column count; rows past `cols` are not written.
    #[test]
    fn transposes_a_block_as_defined() {
        if !super::available() {
            crate::skipped("needs AVX2, which this CPU lacks");
            return;
        }
        let (ss, ds) = (19usize, 21usize);
        let src: Vec<f32> = (0..16 * ss).map(|i| i as f32 * 0.5 - 7.25).collect();
        let bias: Vec<f32> = (0..16).map(|c| 0.1 * c as f32 - 0.3).collect();
        for cols in [1usize, 7, 8, 9, 15, 16] {
            for with_bias in [false, true] {
                let mut dst = vec![f32::NAN; 16 * ds];
                let b = with_bias.then_some(&bias[..]);
                // SAFETY: AVX2 is present; src holds 16 rows of ss ≥ 16, dst 16 rows of ds ≥ 16.
                unsafe { super::transpose16_f32(src.as_ptr(), ss, dst.as_mut_ptr(), ds, cols, b) };
                for c in 0..16 {
                    for i in 0..16 {
                        let got = dst[c * ds + i];
                        if c < cols {
                            let x = src[i * ss + c];
                            let want = if with_bias { x + bias[c] } else { x };
                            assert_eq!(got.to_bits(), want.to_bits(), "cols {cols}, c {c}, i {i}");
                        } else {
                            assert!(got.is_nan(), "cols {cols}: row {c} written");
                        }
                    }
                }
            }
        }
    }
}
