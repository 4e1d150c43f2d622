//! Layout helpers shared by the fast kernels: dimension permutation of row-major
//! buffers, merging of dimension groups into single strided axes, and the float
//! element operations (IEEE maximum/minimum, comparisons) whose exact semantics the
//! kernels must share with the generic evaluator.

use super::float::FastFloat;
use ir::CompareDirection;
use std::borrow::Cow;

use crate::tensor::row_major_strides;

/// Converts a dimension number from the IR (`i64`) to an index, panicking with the
/// attribute's name when it is negative (the verifier rejects such modules).
pub(crate) fn dim_index(d: i64, what: &str) -> usize {
    usize::try_from(d).unwrap_or_else(|_| panic!("negative {what}: {d}"))
}

/// The row-major buffer of `data` (of `shape`) with its dimensions reordered so
/// that result dimension `i` is source dimension `perm[i]`. Borrows when `perm`
/// keeps the memory order (identity, up to size-1 dimensions).
pub(crate) fn permute<'a, T: Copy>(data: &'a [T], shape: &[usize], perm: &[usize]) -> Cow<'a, [T]> {
    debug_assert_eq!(shape.len(), perm.len());
    let non_trivial: Vec<usize> = perm.iter().copied().filter(|&d| shape[d] != 1).collect();
    if non_trivial.windows(2).all(|w| w[0] < w[1]) {
        return Cow::Borrowed(data);
    }
    let src_strides = row_major_strides(shape);
    let out_shape: Vec<usize> = perm.iter().map(|&d| shape[d]).collect();
    let strides: Vec<usize> = perm.iter().map(|&d| src_strides[d]).collect();
    let mut out = Vec::with_capacity(data.len());
    gather_strided(data, &out_shape, &strides, 0, 0, &mut out);
    Cow::Owned(out)
}

/// Appends the elements of the strided view (`shape`, `strides`, base `offset`) in
/// row-major order, starting at dimension `dim`.
fn gather_strided<T: Copy>(
    data: &[T],
    shape: &[usize],
    strides: &[usize],
    dim: usize,
    offset: usize,
    out: &mut Vec<T>,
) {
    if dim == shape.len() {
        out.push(data[offset]);
        return;
    }
    let (n, s) = (shape[dim], strides[dim]);
    if dim + 1 == shape.len() {
        if s == 1 {
            out.extend_from_slice(&data[offset..offset + n]);
        } else {
            out.extend((0..n).map(|i| data[offset + i * s]));
        }
        return;
    }
    for i in 0..n {
        gather_strided(data, shape, strides, dim + 1, offset + i * s, out);
    }
}

/// Size and stride of the single axis obtained by merging `dims` (in that order)
/// of a tensor with `shape`/`strides`, or `None` when they are not laid out as
/// one regularly strided axis. An empty group is the size-1 axis.
pub(crate) fn merged_axis(
    shape: &[usize],
    strides: &[usize],
    dims: &[usize],
) -> Option<(usize, usize)> {
    let live: Vec<usize> = dims.iter().copied().filter(|&d| shape[d] != 1).collect();
    let size = dims.iter().map(|&d| shape[d]).product();
    match live.last() {
        None => Some((size, 1)),
        Some(&last) => {
            for w in live.windows(2) {
                if strides[w[0]] != strides[w[1]] * shape[w[1]] {
                    return None;
                }
            }
            Some((size, strides[last]))
        }
    }
}

/// StableHLO `maximum`: NaN propagates, and `+0` is above `-0`.
#[inline]
pub(crate) fn max_fast<T: FastFloat>(a: T, b: T) -> T {
    if a.is_nan() || b.is_nan() {
        T::NAN
    } else if a > b {
        a
    } else if b > a {
        b
    } else if a.is_sign_positive() {
        a
    } else {
        b
    }
}

/// StableHLO `minimum`: NaN propagates, and `-0` is below `+0`.
#[inline]
pub(crate) fn min_fast<T: FastFloat>(a: T, b: T) -> T {
    if a.is_nan() || b.is_nan() {
        T::NAN
    } else if a < b {
        a
    } else if b < a {
        b
    } else if a.is_sign_negative() {
        a
    } else {
        b
    }
}

/// StableHLO `compare` with the FLOAT comparison type (IEEE: NaN is unordered).
#[inline]
pub(crate) fn compare_fast<T: FastFloat>(a: T, b: T, dir: CompareDirection) -> bool {
    match dir {
        CompareDirection::Eq => a == b,
        CompareDirection::Ne => a != b,
        CompareDirection::Ge => a >= b,
        CompareDirection::Gt => a > b,
        CompareDirection::Le => a <= b,
        CompareDirection::Lt => a < b,
    }
}

/// Per-dimension map from (output position, window offset) to the source index
/// read there, for windowed ops: position `o*stride + w*window_dilation` of the
/// source after base dilation and padding. `None` marks padding or a dilation hole.
#[derive(Clone, Debug)]
pub(crate) struct WindowTable {
    pub out_len: usize,
    pub window: usize,
    /// `index[w * out_len + o]`: the source index, or -1.
    pub index: Vec<i64>,
}

impl WindowTable {
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn new(
        src_len: usize,
        out_len: usize,
        window: usize,
        stride: i64,
        window_dilation: i64,
        base_dilation: i64,
        pad_low: i64,
    ) -> Self {
        let mut index = Vec::with_capacity(window * out_len);
        for w in 0..window as i64 {
            for o in 0..out_len as i64 {
                let q = o * stride + w * window_dilation - pad_low;
                let valid = q >= 0 && q % base_dilation == 0 && q / base_dilation < src_len as i64;
                index.push(if valid { q / base_dilation } else { -1 });
            }
        }
        WindowTable {
            out_len,
            window,
            index,
        }
    }

    #[inline]
    pub(crate) fn row(&self, w: usize) -> &[i64] {
        &self.index[w * self.out_len..(w + 1) * self.out_len]
    }

    /// For window offset `w`: `Some((o_lo, o_hi, i_lo))` when the valid outputs are
    /// exactly `o_lo..o_hi` and read the consecutive sources `i_lo..`, so a row of
    /// im2col is one copy between zero borders.
    pub(crate) fn unit_run(&self, w: usize) -> Option<(usize, usize, usize)> {
        let row = self.row(w);
        let lo = row.iter().position(|&i| i >= 0)?;
        let hi = row.iter().rposition(|&i| i >= 0)? + 1;
        let i_lo = row[lo];
        row[lo..hi]
            .iter()
            .enumerate()
            .all(|(k, &i)| i == i_lo + k as i64)
            .then_some((lo, hi, i_lo as usize))
    }

    /// For output position `o`: `Some((w_lo, w_hi, i_lo))` when the valid window
    /// offsets are exactly `w_lo..w_hi` and read the consecutive sources `i_lo..`,
    /// so the window along this dimension is one copy between zero borders.
    pub(crate) fn window_run(&self, o: usize) -> Option<(usize, usize, usize)> {
        let at = |w: usize| self.index[w * self.out_len + o];
        let lo = (0..self.window).find(|&w| at(w) >= 0)?;
        let hi = (lo..self.window).rev().find(|&w| at(w) >= 0)? + 1;
        let i_lo = at(lo);
        (lo..hi)
            .all(|w| at(w) == i_lo + (w - lo) as i64)
            .then_some((lo, hi, i_lo as usize))
    }
}
