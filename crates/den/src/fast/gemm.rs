//! The one place that runs a GEMM: a bounds-checked wrapper over strided
//! row/column views of slices. f32 on a CPU with AVX-512 runs den's own
//! kernel (`avx512.rs`: packed 12 × 32 tiles, its own task split, each
//! element one fused multiply-add chain in k order); everything else (f64,
//! and f32 without AVX-512) runs `matrixmultiply::sgemm`/`dgemm` through
//! [`FastFloat`], split here over threads. matrixmultiply is built without
//! its own thread pool (its `threading` feature spun the calling thread in
//! `sched_yield` while its helper thread, competing with rayon's workers for
//! the same cores, lagged: ~30 % of the main thread's samples on a ViT
//! forward); a large GEMM is cut here into row (or column) blocks run on
//! rayon's threads. Either way every element of C is the same sum in the
//! same order whichever block or thread computes it (matrixmultiply's
//! k-blocking does not depend on m or n), so the split changes no bit.

use super::float::FastFloat;
use rayon::prelude::*;

#[cfg(target_arch = "x86_64")]
mod avx512;

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

/// `c += a · b`, with `c` as in [`matmul`] (on the AVX-512 f32 path the
/// multiply-add chain starts from `c`, so `c` is not rounded in separately).
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
    #[cfg(target_arch = "x86_64")]
    if let (Some(a32), Some(b32), Some(c32), true) = (
        as_f32(a),
        as_f32(b),
        super::implicit::same_type_mut::<T, f32>(c),
        avx512::available(),
    ) {
        let bias =
            bias.map(|b| super::implicit::same_type::<T, f32>(b).expect("bias has C's type"));
        avx512::sgemm(a32, b32, c32, c_row_stride, accumulate, bias);
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

/// `m` as an f32 view when `T` is f32.
fn as_f32<'a, T: FastFloat>(m: MatRef<'a, T>) -> Option<MatRef<'a, f32>> {
    Some(MatRef {
        data: super::implicit::same_type::<T, f32>(m.data)?,
        rows: m.rows,
        cols: m.cols,
        row_stride: m.row_stride,
        col_stride: m.col_stride,
    })
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
// SAFETY: see `gemm` (and `avx512::sgemm`): reads only of A and B,
// disjoint writes to C.
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
    use super::{matmul, matmul_add, matmul_bias, split, MatRef};
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

    #[cfg(target_arch = "x86_64")]
    fn avx512() -> bool {
        super::avx512::available()
    }
    #[cfg(not(target_arch = "x86_64"))]
    fn avx512() -> bool {
        false
    }

    /// How A or B is laid out in memory: row-major, column-major (a
    /// transposed operand), or every other element of a row-major buffer
    /// twice as wide (neither stride 1).
    #[derive(Clone, Copy, Debug)]
    enum Layout {
        Rows,
        Cols,
        Strided,
    }

    /// A `rows × cols` view of `data` (filled for the layout's extent).
    fn view(data: &[f32], rows: usize, cols: usize, layout: Layout) -> MatRef<'_, f32> {
        let (row_stride, col_stride) = match layout {
            Layout::Rows => (cols, 1),
            Layout::Cols => (1, rows),
            Layout::Strided => (2 * cols, 2),
        };
        MatRef {
            data,
            rows,
            cols,
            row_stride,
            col_stride,
        }
    }

    fn at(v: &MatRef<'_, f32>, r: usize, c: usize) -> f32 {
        v.data[r * v.row_stride + c * v.col_stride]
    }

    /// What the AVX-512 GEMM promises, element by element: one fused
    /// multiply-add chain over k in order, from zero (from C's value when
    /// accumulating), then `+ bias`.
    fn fma_chain(a: &MatRef<'_, f32>, b: &MatRef<'_, f32>, i: usize, j: usize, start: f32) -> f32 {
        (0..a.cols).fold(start, |s, p| at(a, i, p).mul_add(at(b, p, j), s))
    }

    /// The GEMM on a 3-thread pool (tasks split by rows, by column panels,
    /// or not at all) is bit for bit the same GEMM on one thread, and within
    /// f32 rounding of the f64 triple loop; with AVX-512 each element is
    /// exactly the scalar fused multiply-add chain (plus the bias), else
    /// matrixmultiply's unsplit call. Odd sizes on both sides of the
    /// thresholds, tiles past m and n, reductions over several k blocks,
    /// every operand layout (A read in place, packed from rows, from columns
    /// or strided; B copied, transposed in registers or gathered), a C row
    /// stride wider than n (its extra columns untouched), overwrite,
    /// accumulate and bias.
    #[test]
    fn split_gemm_is_the_unsplit_gemm_bit_for_bit() {
        let pool = |n| {
            rayon::ThreadPoolBuilder::new()
                .num_threads(n)
                .build()
                .unwrap()
        };
        let (three, one) = (pool(3), pool(1));
        // (m, k, n): small (one task), rows cut, panels cut (m < 128),
        // k over two and three blocks, one and many panels.
        let cases = [
            (7, 5, 9),
            (1576, 48, 73),
            (301, 129, 200),
            (97, 257, 333),
            (40, 700, 101),
            (197, 197, 64),
            (197, 64, 197),
            (25, 3, 16),
        ];
        let layouts = [Layout::Rows, Layout::Cols, Layout::Strided];
        for (case, &(m, k, n)) in cases.iter().enumerate() {
            let (rows, cols) = split(m, k, n, 3);
            if (1..6).contains(&case) {
                assert!(rows.len() * cols.len() > 1, "{m}×{k}×{n} was not split");
            }
            for (variant, (la, lb)) in layouts
                .iter()
                .flat_map(|&la| layouts.iter().map(move |&lb| (la, lb)))
                .enumerate()
            {
                // 0: overwrite, 1: accumulate, 2: bias.
                let mode = (variant + case) % 3;
                let ad = fill(2 * m * k, 1 + case as u32);
                let bd = fill(2 * k * n, 7 + case as u32);
                let (a, b) = (view(&ad, m, k, la), view(&bd, k, n, lb));
                let bias = fill(n, 13);
                let rsc = n + 3;
                let c0 = fill(m * rsc, 99);
                let run = |pool: &rayon::ThreadPool| {
                    let mut c = c0.clone();
                    pool.install(|| match mode {
                        0 => matmul(a, b, &mut c, rsc),
                        1 => matmul_add(a, b, &mut c, rsc),
                        _ => matmul_bias(a, b, &mut c, rsc, &bias),
                    });
                    c
                };
                let (got, single) = (run(&three), run(&one));
                let mut want = c0.clone();
                if !avx512() {
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
                            if mode == 1 { f32::ONE } else { f32::ZERO },
                            want.as_mut_ptr(),
                            rsc as isize,
                        )
                    };
                    if mode == 2 {
                        for i in 0..m {
                            for j in 0..n {
                                want[i * rsc + j] += bias[j];
                            }
                        }
                    }
                } else {
                    for i in 0..m {
                        for j in 0..n {
                            let start = if mode == 1 { c0[i * rsc + j] } else { 0.0 };
                            let chain = fma_chain(&a, &b, i, j, start);
                            want[i * rsc + j] = if mode == 2 { chain + bias[j] } else { chain };
                        }
                    }
                }
                for i in 0..m {
                    for j in 0..rsc {
                        let (g, s, w) = (got[i * rsc + j], single[i * rsc + j], want[i * rsc + j]);
                        let what = format!("{m}×{k}×{n} ({la:?},{lb:?}) mode {mode} C[{i},{j}]");
                        assert_eq!(g.to_bits(), s.to_bits(), "{what}: 3 threads {g} vs 1 {s}");
                        assert_eq!(g.to_bits(), w.to_bits(), "{what}: {g} vs reference {w}");
                        let exact: f64 = if j >= n {
                            c0[i * rsc + j] as f64
                        } else {
                            let base = match mode {
                                1 => c0[i * rsc + j] as f64,
                                2 => bias[j] as f64,
                                _ => 0.0,
                            };
                            base + (0..k)
                                .map(|p| at(&a, i, p) as f64 * at(&b, p, j) as f64)
                                .sum::<f64>()
                        };
                        assert!(
                            (g as f64 - exact).abs() <= 1e-5 * (1.0 + (k as f64).sqrt()),
                            "{what}: {g} vs {exact}"
                        );
                    }
                }
            }
        }
    }
}
