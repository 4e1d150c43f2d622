//! TF-RMSProp's momentum of the preconditioned gradient,
//! b' = μ·b + c·∇L/√(s' + ε), with ε by Gauss–Newton from a coarse grid.

use super::lsq::{least_squares, refs, EXACT};

/// `b' ≈ μ·b + c·∇L/√(s' + ε)` exactly, over the concatenated tensors:
/// (μ, c, ε, residual). ε by Gauss–Newton on the linear fit: to first order
/// ∇L/√(s' + ε + δ) is ∇L/√(s' + ε) − δ·∇L/(2·(s' + ε)^{3/2}).
pub(super) fn preconditioned_momentum(
    b_new: &[&[f64]],
    b_old: &[&[f64]],
    grad: &[&[f64]],
    s_new: &[&[f64]],
) -> Option<(f64, f64, f64, f64)> {
    let feature = |eps: f64, slope: bool| -> Vec<Vec<f64>> {
        grad.iter()
            .zip(s_new)
            .map(|(g, s)| {
                g.iter()
                    .zip(*s)
                    .map(|(g, s)| match slope {
                        false => g / (s + eps).sqrt(),
                        true => 0.5 * g / (s + eps).powf(1.5),
                    })
                    .collect()
            })
            .collect()
    };
    let floor = s_new
        .iter()
        .flat_map(|s| s.iter())
        .fold(f64::INFINITY, |m, &s| m.min(s));
    // Start from the best of a coarse grid: the linearisation only holds
    // near ε (TF-RMSProp's ε = 1 is far from 0 when s' is small).
    // (on the largest tensor alone: the grid only picks a start)
    let big = (0..b_new.len()).max_by_key(|&t| b_new[t].len())?;
    let fit_at = |eps: f64| {
        let f: Vec<f64> = grad[big]
            .iter()
            .zip(s_new[big])
            .map(|(g, s)| g / (s + eps).sqrt())
            .collect();
        least_squares(&b_new[big..=big], &[vec![b_old[big]], vec![&f[..]]])
            .map_or(f64::INFINITY, |(_, r)| r)
    };
    let mut eps = [0.0, 1e-10, 1e-8, 1e-6, 1e-4, 1e-3, 1e-2, 0.1, 1.0, 10.0]
        .into_iter()
        .map(|e| (e, fit_at(e)))
        .min_by(|a, b| a.1.total_cmp(&b.1))
        .map_or(0.0, |(e, _)| e);
    for _ in 0..8 {
        let (f1, f2) = (feature(eps, false), feature(eps, true));
        match least_squares(b_new, &[b_old.to_vec(), refs(&f1), refs(&f2)]) {
            Some((c, r)) if c[1] != 0.0 && r > EXACT * 1e-3 => {
                // Stay where every s' + ε is positive.
                eps = (eps + c[2] / c[1]).max(0.5 * (eps - floor));
            }
            _ => break,
        }
    }
    let f1 = feature(eps, false);
    let (c, r) = least_squares(b_new, &[b_old.to_vec(), refs(&f1)])?;
    (r <= EXACT && eps.is_finite()).then_some((c[0], c[1], eps, r))
}
