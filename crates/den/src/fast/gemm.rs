//! The one place that calls the GEMM (`matrixmultiply::sgemm`/`dgemm` through
//! [`FastFloat`]): a bounds-checked wrapper over strided row/column views of
//! slices, and the one place a GEMM is split over threads. matrixmultiply is
//! built without its own thread pool (its `threading` feature spun the
//! calling thread in `sched_yield` while its helper thread, competing with
//! rayon's workers for the same cores, lagged: ~30 % of the main thread's
//! samples on a ViT forward); a large GEMM is cut here into row (or column)
//! blocks run on rayon's threads. Every element of C is the same sum in the
//! same order whichever block computes it (matrixmultiply's k-blocking does
//! not depend on m or n), so the split changes no bit.

use super::float::FastFloat;
use rayon::prelude::*;

/// Least `m·k + k·n` split over two threads: matrixmultiply's own threading
/// heuristic (2¹⁴ per thread), kept so the same GEMMs go parallel as before.
const PAR_GEMM: usize = 1 << 15;

/// Row blocks are multiples of this (the widest micro-kernel's MR), column
/// blocks of [`COL_ALIGN`] (the widest NR). Not matrixmultiply's `mc` (64):
/// cutting attention's 197 rows into 64-multiples gave one thread 128 rows
/// and the other 69; in 16-multiples it is 112 and 85.
const ROW_ALIGN: usize = 16;
const COL_ALIGN: usize = 16;
/// Fewest rows cut into blocks (else columns are cut): the rule of the
/// 64-row alignment, kept so the same GEMMs split the same way round.
const ROW_CUT_MIN: usize = 128;

/// A strided `rows × cols` matrix view of a slice: element `(r, c)` is
/// `data[r * row_stride + c * col_stride]`.
#[derive(Clone, Copy)]
pub(crate) struct MatRef<'a, T> {
    pub data: &'a [T],
    pub rows: usize,
    pub cols: usize,
    pub row_stride: usize,
    pub col_stride: usize,
}

impl<'a, T> MatRef<'a, T> {
    /// A dense row-major `rows × cols` matrix at the start of `data`.
    pub(crate) fn row_major(data: &'a [T], rows: usize, cols: usize) -> Self {
        MatRef {
            data,
            rows,
            cols,
            row_stride: cols,
            col_stride: 1,
        }
    }
}

/// Largest index a strided view touches, plus one (0 for an empty view).
fn extent(rows: usize, cols: usize, rs: usize, cs: usize) -> usize {
    if rows == 0 || cols == 0 {
        0
    } else {
        (rows - 1) * rs + (cols - 1) * cs + 1
    }
}

/// `c = a · b` (overwriting `c`), where `c` is the row-major `a.rows × b.cols`
/// matrix with row stride `c_row_stride` at the start of `c`.
pub(crate) fn matmul<T: FastFloat>(
    a: MatRef<'_, T>,
    b: MatRef<'_, T>,
    c: &mut [T],
    c_row_stride: usize,
) {
    gemm(a, b, c, c_row_stride, false, None);
}

/// `c = a · b + bias` with `bias` (`b.cols` long) added to every row: each
/// block of C gets its bias right after its GEMM, while the block is still in
/// cache, so each element is `(a · b) + bias` rounded once, exactly as a
/// separate add after [`matmul`] rounds it.
pub(crate) fn matmul_bias<T: FastFloat>(
    a: MatRef<'_, T>,
    b: MatRef<'_, T>,
    c: &mut [T],
    c_row_stride: usize,
    bias: &[T],
) {
    assert_eq!(bias.len(), b.cols, "gemm bias length");
    gemm(a, b, c, c_row_stride, false, Some(bias));
}

/// `c += a · b`, with `c` as in [`matmul`].
pub(crate) fn matmul_add<T: FastFloat>(
    a: MatRef<'_, T>,
    b: MatRef<'_, T>,
    c: &mut [T],
    c_row_stride: usize,
) {
    gemm(a, b, c, c_row_stride, true, None);
}

fn gemm<T: FastFloat>(
    a: MatRef<'_, T>,
    b: MatRef<'_, T>,
    c: &mut [T],
    c_row_stride: usize,
    accumulate: bool,
    bias: Option<&[T]>,
) {
    let (m, k, n) = (a.rows, a.cols, b.cols);
    assert_eq!(k, b.rows, "gemm inner dimensions differ");
    assert!(extent(m, k, a.row_stride, a.col_stride) <= a.data.len());
    assert!(extent(k, n, b.row_stride, b.col_stride) <= b.data.len());
    assert!(extent(m, n, c_row_stride, 1) <= c.len());
    if m == 0 || n == 0 {
        return;
    }
    if k == 0 {
        if accumulate {
            return;
        }
        for r in 0..m {
            let row = &mut c[r * c_row_stride..r * c_row_stride + n];
            match bias {
                // `0 + b`, as the separate add rounds it (-0 becomes +0).
                Some(b) => row.iter_mut().zip(b).for_each(|(x, &b)| *x = T::ZERO + b),
                None => row.fill(T::ZERO),
            }
        }
        return;
    }
    let beta = if accumulate { T::ONE } else { T::ZERO };
    let (rows, cols) = split(m, k, n, rayon::current_num_threads());
    let (ap, bp, cp) = (
        SendPtr(a.data.as_ptr() as *mut T),
        SendPtr(b.data.as_ptr() as *mut T),
        SendPtr(c.as_mut_ptr()),
    );
    // One block: rows r0..r1 and columns c0..c1 of C.
    let block = |(r0, r1): (usize, usize), (c0, c1): (usize, usize)| {
        // SAFETY: the asserts above keep every index the views describe inside
        // the slices, so every sub-block's too; `c` is borrowed mutably, so it
        // aliases neither `a` nor `b`, and the blocks of C are disjoint.
        unsafe {
            T::gemm_raw(
                r1 - r0,
                k,
                c1 - c0,
                ap.get().add(r0 * a.row_stride),
                a.row_stride as isize,
                a.col_stride as isize,
                bp.get().add(c0 * b.col_stride),
                b.row_stride as isize,
                b.col_stride as isize,
                beta,
                cp.get().add(r0 * c_row_stride + c0),
                c_row_stride as isize,
            );
            if let Some(bias) = bias {
                for r in r0..r1 {
                    // SAFETY: row `r`, columns c0..c1 of this block of C (in
                    // bounds by the asserts, written by no other block).
                    let row = std::slice::from_raw_parts_mut(
                        cp.get().add(r * c_row_stride + c0),
                        c1 - c0,
                    );
                    for (x, &b) in row.iter_mut().zip(&bias[c0..c1]) {
                        *x += b;
                    }
                }
            }
        }
    };
    match (rows.len(), cols.len()) {
        (1, 1) => block(rows[0], cols[0]),
        (_, 1) => rows.into_par_iter().for_each(|r| block(r, (0, n))),
        _ => cols.into_par_iter().for_each(|c| block((0, m), c)),
    }
}

/// A half-open block `lo..hi` of rows or columns.
type Range = (usize, usize);

/// The row and column blocks of an `m × k × n` GEMM on `threads` threads:
/// one block below [`PAR_GEMM`]; else rows cut into `ROW_ALIGN`-multiples when
/// there are at least [`ROW_CUT_MIN`] of them (each block packs all of B, which is cheap next
/// to its share of the product), else columns into `COL_ALIGN`-multiples.
fn split(m: usize, k: usize, n: usize, threads: usize) -> (Vec<Range>, Vec<Range>) {
    let whole = |len: usize| vec![(0, len)];
    let cut = |len: usize, align: usize| -> Vec<Range> {
        let per = len.div_ceil(threads).div_ceil(align) * align;
        (0..len)
            .step_by(per)
            .map(|lo| (lo, (lo + per).min(len)))
            .collect()
    };
    if threads < 2 || m * k + k * n < PAR_GEMM {
        (whole(m), whole(n))
    } else if m >= ROW_CUT_MIN {
        (cut(m, ROW_ALIGN), whole(n))
    } else if n >= 2 * COL_ALIGN {
        (whole(m), cut(n, COL_ALIGN))
    } else {
        (whole(m), whole(n))
    }
}

/// A raw pointer shared by the blocks of one GEMM (they read A and B and
/// write disjoint parts of C).
#[derive(Clone, Copy)]
struct SendPtr<T>(*mut T);
// SAFETY: see `gemm`: reads only of A and B, disjoint writes to C.
unsafe impl<T> Send for SendPtr<T> {}
unsafe impl<T> Sync for SendPtr<T> {}
impl<T> SendPtr<T> {
    fn get(self) -> *mut T {
        self.0
    }
}

/// `c = a · b` for row-major `a` (`m × k`), `b` (`k × n`), `c` (`m × n`):
/// the GEMM every fast kernel runs, split over rayon's threads as they split
/// it (`certgrad bench gemm` measures it).
pub fn sgemm_row_major(a: &[f32], b: &[f32], c: &mut [f32], m: usize, k: usize, n: usize) {
    assert_eq!(a.len(), m * k, "sgemm: A is not m × k");
    assert_eq!(b.len(), k * n, "sgemm: B is not k × n");
    assert_eq!(c.len(), m * n, "sgemm: C is not m × n");
    matmul(MatRef::row_major(a, m, k), MatRef::row_major(b, k, n), c, n);
}

#[cfg(test)]
mod tests {
    use super::{matmul, matmul_add, split, MatRef};
    use crate::fast::float::FastFloat;

    /// Deterministic values in [-0.5, 0.5).
    fn fill(len: usize, seed: u32) -> Vec<f32> {
        (0..len)
            .map(|i| {
                let h = (i as u32 ^ seed).wrapping_mul(0x9E37_79B9).rotate_left(13);
                (h >> 8) as f32 / (1u32 << 24) as f32 - 0.5
            })
            .collect()
    }

    /// The split GEMM (on a 3-thread pool, so rows and columns are cut) is
    /// bit for bit one unsplit matrixmultiply call and within f32 rounding of
    /// the f64 triple loop: odd sizes on both sides of the threshold, row
    /// splits and column splits, transposed operands (column-major views),
    /// a C row stride wider than n, overwrite and accumulate.
    #[test]
    fn split_gemm_is_the_unsplit_gemm_bit_for_bit() {
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(3)
            .build()
            .unwrap();
        // (m, k, n): small (one block), rows cut, columns cut (m < 128).
        let cases = [
            (7, 5, 9),
            (1576, 48, 73),
            (301, 129, 200),
            (97, 257, 333),
            (40, 700, 101),
            (197, 197, 64),
        ];
        for (case, &(m, k, n)) in cases.iter().enumerate() {
            let (rows, cols) = split(m, k, n, 3);
            if case > 0 {
                assert!(rows.len() * cols.len() > 1, "{m}×{k}×{n} was not split");
            }
            for (ta, tb, accumulate) in [
                (false, false, false),
                (true, false, true),
                (false, true, false),
                (true, true, true),
            ] {
                let ad = fill(m * k, 1 + case as u32);
                let bd = fill(k * n, 7 + case as u32);
                let a = if ta {
                    MatRef {
                        data: &ad,
                        rows: m,
                        cols: k,
                        row_stride: 1,
                        col_stride: m,
                    }
                } else {
                    MatRef::row_major(&ad, m, k)
                };
                let b = if tb {
                    MatRef {
                        data: &bd,
                        rows: k,
                        cols: n,
                        row_stride: 1,
                        col_stride: k,
                    }
                } else {
                    MatRef::row_major(&bd, k, n)
                };
                let rsc = n + 3;
                let c0 = fill(m * rsc, 99);
                let mut got = c0.clone();
                pool.install(|| {
                    if accumulate {
                        matmul_add(a, b, &mut got, rsc)
                    } else {
                        matmul(a, b, &mut got, rsc)
                    }
                });
                let mut want = c0.clone();
                // SAFETY: the same views as above, in bounds; `want` is separate.
                unsafe {
                    <f32 as crate::fast::float::Sealed>::gemm_raw(
                        m,
                        k,
                        n,
                        a.data.as_ptr(),
                        a.row_stride as isize,
                        a.col_stride as isize,
                        b.data.as_ptr(),
                        b.row_stride as isize,
                        b.col_stride as isize,
                        if accumulate { f32::ONE } else { f32::ZERO },
                        want.as_mut_ptr(),
                        rsc as isize,
                    )
                };
                for i in 0..m {
                    for j in 0..rsc {
                        let (g, w) = (got[i * rsc + j], want[i * rsc + j]);
                        assert_eq!(
                            g.to_bits(),
                            w.to_bits(),
                            "{m}×{k}×{n} ({ta},{tb}) C[{i},{j}]: {g} vs {w}"
                        );
                        let exact: f64 = if j >= n {
                            c0[i * rsc + j] as f64
                        } else {
                            let base = if accumulate {
                                c0[i * rsc + j] as f64
                            } else {
                                0.0
                            };
                            base + (0..k)
                                .map(|p| {
                                    let x = if ta { ad[p * m + i] } else { ad[i * k + p] };
                                    let y = if tb { bd[j * k + p] } else { bd[p * n + j] };
                                    x as f64 * y as f64
                                })
                                .sum::<f64>()
                        };
                        assert!(
                            (g as f64 - exact).abs() <= 1e-5 * (1.0 + (k as f64).sqrt()),
                            "{g} vs {exact}"
                        );
                    }
                }
            }
        }
    }
}
