//! Elementwise loops of the generic evaluator split over rayon's threads
//! (into fresh tensors, or in place over an operand that dies, reading a
//! second operand contiguously or at broadcast strides): each element is
//! computed by the same function as on one thread, so the results are bit
//! for bit the sequential ones (and so are the certificates' points,
//! verdicts and margins); only large tensors are split.

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

/// `xs[i] = f(i, &xs[i])` for every `i`, in place (an elementwise op whose
/// result is written over an operand that dies at it); for large `n` on
/// rayon's threads, each element computed by the same `f` as on one thread.
/// Also says whether `old` held for every element before it was overwritten
/// (read in the same pass, since the operand is gone afterwards). A failure
/// is the sequential loop's: the first failing index's error (each task
/// stops at its first failure, and the tasks are read in index order).
pub(crate) fn update<T: Send, E: Send>(
    xs: &mut [T],
    f: impl Fn(usize, &T) -> Result<T, E> + Sync + Send,
    old: impl Fn(&T) -> bool + Sync + Send,
) -> Result<bool, E> {
    let run = |base: usize, xs: &mut [T]| -> Result<bool, E> {
        let mut held = true;
        for (j, x) in xs.iter_mut().enumerate() {
            held &= old(x);
            *x = f(base + j, x)?;
        }
        Ok(held)
    };
    if xs.len() < PAR_MIN || rayon::current_num_threads() == 1 {
        return run(0, xs);
    }
    let chunk = PAR_MIN / 4;
    let parts: Vec<Result<bool, E>> = xs
        .par_chunks_mut(chunk)
        .enumerate()
        .map(|(c, xs)| run(c * chunk, xs))
        .collect();
    let mut held = true;
    for p in parts {
        held &= p?;
    }
    Ok(held)
}

/// [`update`] with a second operand read at strided offsets: `xs[i] =
/// f(i, &xs[i], &src[base_i])` where `base_i = Σ_d i_d·strides[d]` for the
/// row-major index `i` of `extents` (a broadcast read without materialising
/// it, as [`strided`] would). Rows of the last dimension are read with its
/// stride; tasks hold whole rows.
pub(crate) fn update_strided<T: Send, U: Sync, E: Send>(
    xs: &mut [T],
    src: &[U],
    extents: &[usize],
    strides: &[isize],
    f: impl Fn(usize, &T, &U) -> Result<T, E> + Sync + Send,
    old: impl Fn(&T) -> bool + Sync + Send,
) -> Result<bool, E> {
    debug_assert_eq!(extents.len(), strides.len());
    debug_assert_eq!(xs.len(), extents.iter().product::<usize>());
    if xs.is_empty() {
        return Ok(true);
    }
    let rank = extents.len();
    let (inner, step) = match rank {
        0 => (1, 0),
        _ => (extents[rank - 1], strides[rank - 1]),
    };
    let row_start = |mut r: usize| -> isize {
        let mut off = 0isize;
        for d in (0..rank.saturating_sub(1)).rev() {
            off += (r % extents[d]) as isize * strides[d];
            r /= extents[d];
        }
        off
    };
    // Rows `first..` covering `xs` (a whole number of rows).
    let run = |first: usize, xs: &mut [T]| -> Result<bool, E> {
        let mut held = true;
        for (k, row) in xs.chunks_mut(inner).enumerate() {
            let r = first + k;
            let o = row_start(r);
            for (j, x) in row.iter_mut().enumerate() {
                held &= old(x);
                *x = f(r * inner + j, x, &src[(o + j as isize * step) as usize])?;
            }
        }
        Ok(held)
    };
    if xs.len() < PAR_MIN || rayon::current_num_threads() == 1 {
        return run(0, xs);
    }
    let rows_per_task = (PAR_MIN / 4).div_ceil(inner).max(1);
    let parts: Vec<Result<bool, E>> = xs
        .par_chunks_mut(rows_per_task * inner)
        .enumerate()
        .map(|(c, xs)| run(c * rows_per_task, xs))
        .collect();
    let mut held = true;
    for p in parts {
        held &= p?;
    }
    Ok(held)
}

/// Calls `visit(i, base_i)` for every row-major index `i` of `extents` in
/// order, on the calling thread (`base_i` as in [`update_strided`]): for
/// loops that record what they decide in index order.
pub(crate) fn walk_strided<E>(
    extents: &[usize],
    strides: &[isize],
    mut visit: impl FnMut(usize, usize) -> Result<(), E>,
) -> Result<(), E> {
    let n: usize = extents.iter().product();
    if n == 0 {
        return Ok(());
    }
    let rank = extents.len();
    let (inner, step) = match rank {
        0 => (1, 0),
        _ => (extents[rank - 1], strides[rank - 1]),
    };
    for r in 0..n / inner {
        let (mut o, mut q) = (0isize, r);
        for d in (0..rank.saturating_sub(1)).rev() {
            o += (q % extents[d]) as isize * strides[d];
            q /= extents[d];
        }
        for j in 0..inner {
            visit(r * inner + j, (o + j as isize * step) as usize)?;
        }
    }
    Ok(())
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

    /// In place is the collected loop, its check reads every old element,
    /// and a failure is the first failing index's.
    #[test]
    fn updates_in_place_are_the_collected_loop() {
        for n in [0, 1, PAR_MIN - 1, PAR_MIN, 3 * PAR_MIN + 7] {
            let f = |i: usize, x: &f64| Ok::<f64, usize>(x.sin() * 3.0 + i as f64);
            let xs: Vec<f64> = (0..n).map(|i| i as f64 * 0.25).collect();
            let want = collect(n, |i| f(i, &xs[i]));
            let mut got = xs.clone();
            assert_eq!(update(&mut got, f, |x| *x >= 0.0), Ok(true));
            assert_eq!(Ok(got), want);
            let mut got = xs.clone();
            let last = n.checked_sub(1).map(|k| k as f64 * 0.25);
            assert_eq!(update(&mut got, f, |x| Some(*x) != last), Ok(n == 0), "{n}");
        }
        let n = 4 * PAR_MIN;
        let bad = [PAR_MIN + 5, 2 * PAR_MIN, 3 * PAR_MIN + 1];
        let mut xs = vec![0usize; n];
        let got = update(
            &mut xs,
            |i, _| if bad.contains(&i) { Err(i) } else { Ok(i) },
            |_| true,
        );
        assert_eq!(got, Err(PAR_MIN + 5));
    }

    /// The strided update reads what gathering the strided elements first
    /// and updating with them gives, small and large, and fails at the first
    /// failing index.
    #[test]
    fn strided_updates_read_the_gathered_operand() {
        let cases: Vec<(Vec<usize>, Vec<isize>)> = vec![
            (vec![], vec![]),
            (vec![2, 3], vec![1, 0]),
            (vec![32, 64, 7, 9], vec![0, 1, 0, 0]),
            (vec![5, 7000], vec![0, 1]),
            (vec![4, 0, 3], vec![1, 1, 1]),
        ];
        for (ext, st) in cases {
            let n: usize = ext.iter().product();
            let len = 7000;
            let src: Vec<f64> = (0..len).map(|i| i as f64 * 0.5 - 3.0).collect();
            let gathered = strided(&src, &ext, &st, 0);
            let f = |i: usize, x: &f64, y: &f64| Ok::<f64, usize>(x * 3.0 - y + i as f64);
            let xs: Vec<f64> = (0..n).map(|i| (i % 11) as f64).collect();
            let mut want = xs.clone();
            update(&mut want, |i, x| f(i, x, &gathered[i]), |_| true).unwrap();
            let mut got = xs.clone();
            assert_eq!(
                update_strided(&mut got, &src, &ext, &st, f, |_| true),
                Ok(true)
            );
            assert_eq!(got, want, "{ext:?} {st:?}");
        }
        let ext = [4, PAR_MIN];
        let bad = [PAR_MIN + 5, 2 * PAR_MIN, 3 * PAR_MIN + 1];
        let mut xs = vec![0usize; 4 * PAR_MIN];
        let got = update_strided(
            &mut xs,
            &[0u8],
            &ext,
            &[0, 0],
            |i, _, _| if bad.contains(&i) { Err(i) } else { Ok(i) },
            |_| true,
        );
        assert_eq!(got, Err(PAR_MIN + 5));
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
