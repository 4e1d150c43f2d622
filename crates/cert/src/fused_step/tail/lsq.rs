//! The least-squares fits every tail form is recognised by: plain and
//! relative (per-element weighted) fits over concatenated tensors, the
//! termwise residual that decides exactness, and the tolerance it is held to.

/// Fits within this relative residual are exact up to f64 rounding.
pub(super) const EXACT: f64 = 1e-9;

/// Least squares `target ≈ Σ_k c_k·features[k]` over the concatenated
/// tensors: the coefficients and max|residual| / max|target|. The normal
/// equations square the features' condition number (a momentum state and
/// the gradient it was built from are nearly parallel), so the features are
/// scaled to unit norm and the solution refined twice on its own residual:
/// an exact fit then shows a residual at f64 rounding, not at 1e-9.
pub(super) fn least_squares(
    target: &[&[f64]],
    features: &[Vec<&[f64]>],
) -> Option<(Vec<f64>, f64)> {
    weighted_least_squares(target, features, false)
}

/// [`least_squares`] with every element weighted by 1/|target| (`relative`):
/// a state's update whose elements span many orders of magnitude (a second
/// moment of large and small gradients) determines its small terms' (the old
/// state's) coefficient only where they matter, relative to the element.
pub(super) fn relative_least_squares(
    target: &[&[f64]],
    features: &[Vec<&[f64]>],
) -> Option<(Vec<f64>, f64)> {
    weighted_least_squares(target, features, true)
}

fn weighted_least_squares(
    target: &[&[f64]],
    features: &[Vec<&[f64]>],
    relative: bool,
) -> Option<(Vec<f64>, f64)> {
    let k = features.len();
    let weight = |v: f64| match relative {
        false => 1.0,
        true if v == 0.0 => 0.0,
        true => 1.0 / (v * v),
    };
    // One pass: the weighted normal matrix Σ w²·fᵢ·fⱼ (its diagonal the
    // features' squared norms).
    let mut a = vec![vec![0.0; k]; k];
    let mut f = vec![0.0; k];
    for (t, part) in target.iter().enumerate() {
        for (e, &v) in part.iter().enumerate() {
            let w2 = weight(v);
            for (i, fi) in f.iter_mut().enumerate() {
                *fi = features[i][t][e];
            }
            for i in 0..k {
                for j in 0..=i {
                    a[i][j] += w2 * f[i] * f[j];
                }
            }
        }
    }
    let norms: Vec<f64> = (0..k)
        .map(|i| a[i][i].sqrt().max(f64::MIN_POSITIVE))
        .collect();
    // The normal matrix of the unit-norm features, symmetric.
    for i in 0..k {
        for j in 0..=i {
            a[i][j] /= norms[i] * norms[j];
            a[j][i] = a[i][j];
        }
    }
    // Coefficients of the unit-norm features, refined on their residual.
    let mut c = vec![0.0; k];
    for _ in 0..3 {
        let mut b = vec![0.0; k];
        for (t, part) in target.iter().enumerate() {
            for (e, &v) in part.iter().enumerate() {
                let w2 = weight(v);
                let fit: f64 = (0..k).map(|i| c[i] * features[i][t][e] / norms[i]).sum();
                let r = w2 * (v - fit);
                for (i, bi) in b.iter_mut().enumerate() {
                    *bi += r * features[i][t][e] / norms[i];
                }
            }
        }
        let step = solve(a.clone(), b)?;
        for (c, d) in c.iter_mut().zip(step) {
            *c += d;
        }
    }
    let c: Vec<f64> = c.iter().zip(&norms).map(|(c, n)| c / n).collect();
    if c.iter().any(|c| !c.is_finite()) {
        return None;
    }
    let mut worst = 0.0f64;
    let mut size = 0.0f64;
    for (t, part) in target.iter().enumerate() {
        for (e, &v) in part.iter().enumerate() {
            let fit: f64 = (0..k).map(|i| c[i] * features[i][t][e]).sum();
            worst = worst.max((v - fit).abs());
            size = size.max(v.abs());
        }
    }
    Some((c, worst / size.max(f64::MIN_POSITIVE)))
}

/// The largest residual of the fit `c` at any element, relative to the
/// size of the terms there (Σ_k |c_k·f_k| + |target|). A state's new value
/// is computed from its terms without cancellation, so an exact form leaves
/// f64 rounding at every element, while a missing small term (an L2
/// coupling beside large gradients) shows where the gradient is small —
/// which a residual relative to the largest element hides.
pub(super) fn termwise_residual(target: &[&[f64]], features: &[Vec<&[f64]>], c: &[f64]) -> f64 {
    let mut worst = 0.0f64;
    for (t, part) in target.iter().enumerate() {
        for (e, &y) in part.iter().enumerate() {
            let terms = features.iter().zip(c).map(|(f, c)| c * f[t][e]);
            let (fit, size) = terms.fold((0.0, y.abs()), |(s, a), x| (s + x, a + x.abs()));
            if size > 0.0 {
                worst = worst.max((y - fit).abs() / size);
            }
        }
    }
    worst
}

/// Gaussian elimination with partial pivoting; `None` when singular.
fn solve(mut a: Vec<Vec<f64>>, mut b: Vec<f64>) -> Option<Vec<f64>> {
    let n = b.len();
    for c in 0..n {
        let p = (c..n).max_by(|&i, &j| a[i][c].abs().total_cmp(&a[j][c].abs()))?;
        if a[p][c].abs() < 1e-300 {
            return None;
        }
        a.swap(c, p);
        b.swap(c, p);
        for r in c + 1..n {
            let f = a[r][c] / a[c][c];
            let pivot = a[c].clone();
            for (x, p) in a[r][c..].iter_mut().zip(&pivot[c..]) {
                *x -= f * p;
            }
            b[r] -= f * b[c];
        }
    }
    let mut x = vec![0.0; n];
    for c in (0..n).rev() {
        x[c] = (b[c] - (c + 1..n).map(|k| a[c][k] * x[k]).sum::<f64>()) / a[c][c];
    }
    Some(x)
}

pub(super) fn refs(f: &[Vec<f64>]) -> Vec<&[f64]> {
    f.iter().map(|v| v.as_slice()).collect()
}
