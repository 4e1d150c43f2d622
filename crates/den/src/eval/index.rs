//! Index arithmetic shared by the op implementations: row-major enumeration of
//! strided offsets and the window geometry of reduce_window/select_and_scatter.

/// Offsets `base + Σ iₖ·strides[k]` for every multi-index `i` of `extents`, in
/// row-major order. Strides may be negative (reverse) or zero (broadcast).
pub fn strided_offsets(extents: &[usize], strides: &[isize], base: isize) -> Vec<usize> {
    debug_assert_eq!(extents.len(), strides.len());
    let n: usize = extents.iter().product();
    let mut out = Vec::with_capacity(n);
    if n == 0 {
        return out;
    }
    let rank = extents.len();
    let mut idx = vec![0usize; rank];
    let mut off = base;
    for _ in 0..n {
        out.push(off as usize);
        // Odometer increment, keeping `off` in step.
        for d in (0..rank).rev() {
            idx[d] += 1;
            off += strides[d];
            if idx[d] < extents[d] {
                break;
            }
            off -= strides[d] * extents[d] as isize;
            idx[d] = 0;
        }
    }
    out
}

/// Row-major strides of `shape` as `isize`, picked at `dims`.
pub fn strides_at(shape: &[usize], dims: &[usize]) -> Vec<isize> {
    let s = crate::tensor::row_major_strides(shape);
    dims.iter().map(|&d| s[d] as isize).collect()
}

/// The geometry of a window op over one operand: for every output position and
/// every window element (both row-major), the operand offset the element reads,
/// or `None` where it falls on padding or on a hole of the base dilation.
pub struct WindowGeometry {
    out_shape: Vec<usize>,
    window: Vec<usize>,
    /// Per dimension, `table[d][o * window[d] + w]` = the operand offset
    /// contribution of output index `o`, window index `w`, or −1 (padding).
    table: Vec<Vec<isize>>,
}

impl WindowGeometry {
    /// `pad_low` may be negative (crop). `out_shape` is the op's result shape.
    pub fn new(
        operand_shape: &[usize],
        out_shape: &[usize],
        window: &[usize],
        strides: &[usize],
        base_dilation: &[usize],
        window_dilation: &[usize],
        pad_low: &[i64],
    ) -> Self {
        let op_strides = crate::tensor::row_major_strides(operand_shape);
        let rank = operand_shape.len();
        let mut table = Vec::with_capacity(rank);
        for d in 0..rank {
            let mut t = Vec::with_capacity(out_shape[d] * window[d]);
            for o in 0..out_shape[d] {
                for w in 0..window[d] {
                    // Position in the padded, base-dilated operand, then back to
                    // the operand index if it names a real element.
                    let p = (o * strides[d] + w * window_dilation[d]) as i64;
                    let q = p - pad_low[d];
                    let bd = base_dilation[d] as i64;
                    let valid = q >= 0 && q % bd == 0 && q / bd < operand_shape[d] as i64;
                    t.push(if valid {
                        (q / bd) as isize * op_strides[d] as isize
                    } else {
                        -1
                    });
                }
            }
            table.push(t);
        }
        WindowGeometry {
            out_shape: out_shape.to_vec(),
            window: window.to_vec(),
            table,
        }
    }

    pub fn window_len(&self) -> usize {
        self.window.iter().product()
    }

    /// Calls `f(out_flat, offsets)` for every output position, `offsets[w]`
    /// being the operand offset of window element `w` (row-major) or `None`.
    pub fn for_each(&self, mut f: impl FnMut(usize, &[Option<usize>])) {
        let rank = self.out_shape.len();
        let n_out: usize = self.out_shape.iter().product();
        let wlen = self.window_len();
        let mut offs: Vec<Option<usize>> = vec![None; wlen];
        let mut o = vec![0usize; rank];
        let mut w = vec![0usize; rank];
        for out_flat in 0..n_out {
            w.iter_mut().for_each(|x| *x = 0);
            for slot in offs.iter_mut() {
                let mut off = 0isize;
                let mut valid = true;
                for d in 0..rank {
                    let c = self.table[d][o[d] * self.window[d] + w[d]];
                    if c < 0 {
                        valid = false;
                        break;
                    }
                    off += c;
                }
                *slot = valid.then_some(off as usize);
                for d in (0..rank).rev() {
                    w[d] += 1;
                    if w[d] < self.window[d] {
                        break;
                    }
                    w[d] = 0;
                }
            }
            f(out_flat, &offs);
            for d in (0..rank).rev() {
                o[d] += 1;
                if o[d] < self.out_shape[d] {
                    break;
                }
                o[d] = 0;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn strided_offsets_enumerate_row_major() {
        assert_eq!(strided_offsets(&[2, 3], &[3, 1], 0), vec![0, 1, 2, 3, 4, 5]);
        // Transpose of a 2x3: read column-major.
        assert_eq!(strided_offsets(&[3, 2], &[1, 3], 0), vec![0, 3, 1, 4, 2, 5]);
        // Reverse the last dim.
        assert_eq!(
            strided_offsets(&[2, 3], &[3, -1], 2),
            vec![2, 1, 0, 5, 4, 3]
        );
        assert!(strided_offsets(&[2, 0], &[0, 1], 0).is_empty());
        assert_eq!(strided_offsets(&[], &[], 7), vec![7]);
    }

    #[test]
    fn window_geometry_marks_padding() {
        // 1-D operand of 4, window 3, stride 2, pad 1: windows [-1,1], [1,3].
        let g = WindowGeometry::new(&[4], &[2], &[3], &[2], &[1], &[1], &[1]);
        let mut seen = Vec::new();
        g.for_each(|o, offs| seen.push((o, offs.to_vec())));
        assert_eq!(
            seen,
            vec![
                (0, vec![None, Some(0), Some(1)]),
                (1, vec![Some(1), Some(2), Some(3)])
            ]
        );
    }
}
