//! The one place that calls the GEMM (`matrixmultiply::sgemm`/`dgemm` through
//! [`FastFloat`]): a bounds-checked wrapper over strided row/column views of slices.

use super::float::FastFloat;

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
    gemm(a, b, c, c_row_stride, false);
}

/// `c += a · b`, with `c` as in [`matmul`].
pub(crate) fn matmul_add<T: FastFloat>(
    a: MatRef<'_, T>,
    b: MatRef<'_, T>,
    c: &mut [T],
    c_row_stride: usize,
) {
    gemm(a, b, c, c_row_stride, true);
}

fn gemm<T: FastFloat>(
    a: MatRef<'_, T>,
    b: MatRef<'_, T>,
    c: &mut [T],
    c_row_stride: usize,
    accumulate: bool,
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
            c[r * c_row_stride..r * c_row_stride + n].fill(T::ZERO);
        }
        return;
    }
    // SAFETY: the asserts above keep every index the views describe inside the
    // slices; `c` is borrowed mutably, so it aliases neither `a` nor `b`.
    unsafe {
        T::gemm_raw(
            m,
            k,
            n,
            a.data.as_ptr(),
            a.row_stride as isize,
            a.col_stride as isize,
            b.data.as_ptr(),
            b.row_stride as isize,
            b.col_stride as isize,
            if accumulate { T::ONE } else { T::ZERO },
            c.as_mut_ptr(),
            c_row_stride as isize,
        );
    }
}
