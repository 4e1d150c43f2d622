//! Elementwise loops of the generic evaluator split over rayon's threads:
//! each element is computed by the same function as on one thread, so the
//! results are bit for bit the sequential ones (and so are the certificates'
//! points, verdicts and margins); only large tensors are split.

use rayon::prelude::*;

/// Below this many elements a loop runs on the calling thread.
pub(crate) const PAR_MIN: usize = 1 << 15;

/// `(0..n).map(f)` collected in index order; for large `n` the elements are
/// computed on rayon's threads. A failure is the sequential loop's: the first
/// failing index's error (a failed parallel pass is rerun in order to find it).
pub(crate) fn collect<T: Send, E: Send>(
    n: usize,
    f: impl Fn(usize) -> Result<T, E> + Sync + Send,
) -> Result<Vec<T>, E> {
    if n < PAR_MIN || rayon::current_num_threads() == 1 {
        return (0..n).map(f).collect();
    }
    let out: Result<Vec<T>, E> = (0..n)
        .into_par_iter()
        .with_min_len(PAR_MIN / 4)
        .map(&f)
        .collect();
    match out {
        Ok(v) => Ok(v),
        Err(_) => (0..n).map(f).collect(),
    }
}

/// `(0..n).map(f)` for an infallible `f`, as [`collect`].
pub(crate) fn collect_ok<T: Send>(n: usize, f: impl Fn(usize) -> T + Sync + Send) -> Vec<T> {
    if n < PAR_MIN || rayon::current_num_threads() == 1 {
        return (0..n).map(f).collect();
    }
    (0..n)
        .into_par_iter()
        .with_min_len(PAR_MIN / 4)
        .map(f)
        .collect()
}

/// The elements of `src` at the offsets `base + Σ_d i_d·strides[d]` for every
/// index `i` of `extents`, in row-major order of `i` (what gathering at
/// `index::strided_offsets(extents, strides, base)` gives, without the offset
/// table): rows of the last dimension are read with its stride, on rayon's
/// threads when there are many elements.
pub(crate) fn strided<T: Clone + Send + Sync>(
    src: &[T],
    extents: &[usize],
    strides: &[isize],
    base: isize,
) -> Vec<T> {
    debug_assert_eq!(extents.len(), strides.len());
    let n: usize = extents.iter().product();
    if n == 0 {
        return Vec::new();
    }
    let rank = extents.len();
    if rank == 0 {
        return vec![src[base as usize].clone()];
    }
    let inner = extents[rank - 1];
    let step = strides[rank - 1];
    // Offset of the first element of row `r` (row-major over the outer dims).
    let row_start = |mut r: usize| -> isize {
        let mut off = base;
        for d in (0..rank - 1).rev() {
            off += (r % extents[d]) as isize * strides[d];
            r /= extents[d];
        }
        off
    };
    let row = move |r: usize| {
        let o = row_start(r);
        (0..inner).map(move |j| src[(o + j as isize * step) as usize].clone())
    };
    let rows = n / inner;
    if n < PAR_MIN || rayon::current_num_threads() == 1 {
        return (0..rows).flat_map(row).collect();
    }
    let rows_per_task = (PAR_MIN / 4).div_ceil(inner).max(1);
    (0..rows)
        .into_par_iter()
        .with_min_len(rows_per_task)
        .flat_map_iter(row)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parallel_loops_are_the_sequential_ones() {
        for n in [0, 1, PAR_MIN - 1, PAR_MIN, 3 * PAR_MIN + 7] {
            let f = |i: usize| (i as f64).sin() * 3.0 + 1.0;
            let want: Vec<f64> = (0..n).map(f).collect();
            assert_eq!(collect_ok(n, f), want);
            assert_eq!(collect::<f64, ()>(n, |i| Ok(f(i))), Ok(want));
        }
    }

    /// The strided read is the gather at the offset table, for transposes,
    /// reversals and broadcasts (zero strides), small and large.
    #[test]
    fn strided_reads_are_the_offset_table_gather() {
        use crate::eval::index::strided_offsets;
        let cases: Vec<(Vec<usize>, Vec<isize>, isize)> = vec![
            (vec![], vec![], 3),
            (vec![2, 3], vec![1, 2], 0),
            (vec![4, 5, 6], vec![-30, 6, -1], 3 * 30 + 5),
            (vec![3, 64, 2, 129], vec![0, 1, 0, 64], 0),
            (vec![64, 129, 7], vec![129 * 7, 1, 129], 0),
            (vec![5, 0, 3], vec![1, 1, 1], 0),
        ];
        for (ext, st, base) in cases {
            let offs = strided_offsets(&ext, &st, base);
            let len = offs.iter().max().map_or(base as usize + 1, |m| m + 1);
            let src: Vec<u64> = (0..len as u64).map(|i| i * 7 + 1).collect();
            let want: Vec<u64> = offs.iter().map(|&o| src[o]).collect();
            assert_eq!(strided(&src, &ext, &st, base), want, "{ext:?} {st:?}");
        }
    }

    /// Several indices fail: the error is the first one's, as on one thread.
    #[test]
    fn a_failure_is_the_first_failing_index() {
        let n = 4 * PAR_MIN;
        let bad = [PAR_MIN + 5, 2 * PAR_MIN, 3 * PAR_MIN + 1];
        let got = collect(n, |i| if bad.contains(&i) { Err(i) } else { Ok(i) });
        assert_eq!(got, Err(PAR_MIN + 5));
    }
}
