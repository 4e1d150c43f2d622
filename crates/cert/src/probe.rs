//! Drawing and reducing the big vectors of joint probes (whole-net and
//! train-step ties): Gaussian draws split over threads yet bit for bit the
//! sequential `Rng::normal` stream, and the f64 inner products of the
//! adjoint identity.
//!
//! A whole net's point and probe hold tens of millions of normals (ResNet-34:
//! 21 M parameters, drawn twice per tie); drawn one by one, Box–Muller's log
//! and cos cost seconds. SplitMix64's k-th output is a function of
//! `state + k·γ` alone, so each thread starts its own stream at its first
//! draw and the values are the sequential ones: points, and so verdicts and
//! margins, do not change.

use ir::rng::Rng;

/// SplitMix64's increment (`Rng::next_u64` adds it once per draw).
const GAMMA: u64 = 0x9E37_79B9_7F4A_7C15;

/// Below this many values one thread draws them all.
const PAR_MIN: usize = 1 << 16;

/// `n` standard normals, exactly the values of `n` calls of `rng.normal()`
/// (two uniform draws each), and `rng` advanced past them.
pub fn normals(rng: &mut Rng, n: usize) -> Vec<f64> {
    let mut out = vec![0.0; n];
    fill_normals(rng, &mut out, |z| z);
    out
}

/// `out[i] = f(z_i)` for the next `out.len()` normals `z_i` of `rng` (as
/// `normals`), `rng` advanced past them.
pub fn fill_normals(rng: &mut Rng, out: &mut [f64], f: impl Fn(f64) -> f64 + Sync) {
    let start = rng.state;
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
    if out.len() < PAR_MIN || threads == 1 {
        for x in out.iter_mut() {
            *x = f(rng.normal());
        }
        return;
    }
    let per = out.len().div_ceil(threads);
    std::thread::scope(|s| {
        for (c, chunk) in out.chunks_mut(per).enumerate() {
            let f = &f;
            s.spawn(move || {
                // Normal i consumes draws 2i and 2i + 1.
                let first = (c * per) as u64;
                let mut r = Rng {
                    state: start.wrapping_add(first.wrapping_mul(2).wrapping_mul(GAMMA)),
                };
                for x in chunk.iter_mut() {
                    *x = f(r.normal());
                }
            });
        }
    });
    rng.state = start.wrapping_add((out.len() as u64).wrapping_mul(2).wrapping_mul(GAMMA));
}

/// `Σ a_i b_i` in f64, in index order (the sequential sum: the identity's
/// figures stay those the tie always printed).
pub fn dot(a: &[f64], b: &[f64]) -> f64 {
    a.iter().zip(b).map(|(x, y)| x * y).sum()
}

/// `Σ |a_i b_i|`, in index order.
pub fn abs_dot(a: &[f64], b: &[f64]) -> f64 {
    a.iter().zip(b).map(|(x, y)| (x * y).abs()).sum()
}

/// One side-by-side evaluation of a joint identity restricted to a set of
/// blocks: `(lhs, rhs, terms)`, the oracle side, the claimed side and the
/// scale the tolerance multiplies.
pub type Restricted = (f64, f64, f64);

/// Finds the block a failed joint identity over blocks `0..n` comes from:
/// halve the candidate set, re-evaluate the identity with tangents on one
/// half only (`restricted`), and follow the half whose own identity fails
/// (the other half's is the difference, by linearity of J·v in v). `whole`
/// is the identity over every block. Returns the block and its identity.
pub fn bisect(
    n: usize,
    whole: Restricted,
    tol: f64,
    mut restricted: impl FnMut(&[usize]) -> Result<Restricted, String>,
) -> Result<(usize, Restricted), String> {
    let mut set: Vec<usize> = (0..n).collect();
    let (mut lhs, mut rhs, mut terms) = whole;
    while set.len() > 1 {
        let right = set.split_off(set.len() / 2);
        let (l1, r1, t1) = restricted(&set)?;
        let (l2, r2) = (lhs - l1, rhs - r1);
        let bad1 = (l1 - r1).abs() > tol * t1;
        // Bigger relative gap wins when both halves exceed the tolerance.
        let rel1 = (l1 - r1).abs() / t1.max(f64::MIN_POSITIVE);
        let rel2 = (l2 - r2).abs() / terms.max(f64::MIN_POSITIVE);
        if bad1 && rel1 >= rel2 {
            (lhs, rhs, terms) = (l1, r1, t1);
        } else {
            set = right;
            (lhs, rhs, terms) = restricted(&set)?;
        }
    }
    Ok((set[0], (lhs, rhs, terms)))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The threaded draw is the sequential stream, and leaves the stream
    /// where the sequential one would be: the next draw agrees too.
    #[test]
    fn threaded_normals_are_the_sequential_stream() {
        for n in [0, 1, 7, PAR_MIN - 1, PAR_MIN, 3 * PAR_MIN + 5] {
            let mut seq = Rng::salted(42, 7);
            let want: Vec<f64> = (0..n).map(|_| seq.normal()).collect();
            let mut par = Rng::salted(42, 7);
            let got = normals(&mut par, n);
            assert!(
                want.iter()
                    .zip(&got)
                    .all(|(a, b)| a.to_bits() == b.to_bits()),
                "n = {n}"
            );
            assert_eq!(got.len(), n);
            assert_eq!(seq.next_u64(), par.next_u64(), "stream position after {n}");
        }
    }

    #[test]
    fn mapped_fill_applies_the_map_to_each_draw() {
        let n = 2 * PAR_MIN + 3;
        let mut seq = Rng::new(9);
        let want: Vec<f64> = (0..n).map(|_| 0.5 * seq.normal() + 1.0).collect();
        let mut out = vec![0.0; n];
        fill_normals(&mut Rng::new(9), &mut out, |z| 0.5 * z + 1.0);
        assert_eq!(want, out);
    }

    /// Bisection over a linear identity with one wrong block finds it, with
    /// the block's own figures.
    #[test]
    fn bisection_isolates_the_one_wrong_block() {
        // Block b's oracle share is b + 1; its claimed share is the same
        // except block 5, which claims 3× its share.
        let n = 11;
        let claimed = |b: usize| if b == 5 { 3.0 * 6.0 } else { (b + 1) as f64 };
        let restricted = |set: &[usize]| -> Result<Restricted, String> {
            let l: f64 = set.iter().map(|&b| (b + 1) as f64).sum();
            let r: f64 = set.iter().map(|&b| claimed(b)).sum();
            Ok((l, r, l + r))
        };
        let whole = restricted(&(0..n).collect::<Vec<_>>()).unwrap();
        let (b, (l, r, _)) = bisect(n, whole, 1e-9, restricted).unwrap();
        assert_eq!((b, l, r), (5, 6.0, 18.0));
    }
}
