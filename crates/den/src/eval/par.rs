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

    /// Several indices fail: the error is the first one's, as on one thread.
    #[test]
    fn a_failure_is_the_first_failing_index() {
        let n = 4 * PAR_MIN;
        let bad = [PAR_MIN + 5, 2 * PAR_MIN, 3 * PAR_MIN + 1];
        let got = collect(n, |i| if bad.contains(&i) { Err(i) } else { Ok(i) });
        assert_eq!(got, Err(PAR_MIN + 5));
    }
}
