//! LAMB's update: a per-tensor trust ratio over Adam's direction plus
//! decoupled weight decay, fitted tensor by tensor with ε by Gauss–Newton.

use super::lsq::{least_squares, EXACT};

/// LAMB's update, per parameter tensor t: θ'ₜ − θₜ = −lr·trustₜ·(s·uₜ +
/// wd·θₜ) with uₜ = m'ₜ/(√v'ₜ + ε) and trustₜ = ‖θₜ‖/‖s·uₜ + wd·θₜ‖, s
/// the bias corrections' common scale. Fitted per tensor as aₜ·uₜ + bₜ·θₜ:
/// ω = bₜ/aₜ (= wd/s) and lr = −aₜ·‖uₜ + ω·θₜ‖/‖θₜ‖ must be one number for
/// every tensor, whatever s. ε from the largest tensor's linear fit on
/// m'/√v' and m'/v'. (lr, ε, ω, residual, tensors with a zero norm).
pub(super) fn lamb(
    target: &[&[f64]],
    m: &[&[f64]],
    v: &[&[f64]],
    theta: &[&[f64]],
) -> Option<(f64, f64, f64, f64, usize)> {
    let map = |t: usize, f: &dyn Fn(f64, f64) -> f64| -> Vec<f64> {
        m[t].iter().zip(v[t]).map(|(&m, &v)| f(m, v)).collect()
    };
    let largest = (0..target.len()).max_by_key(|&t| target[t].len())?;
    let (f1, f2) = (
        map(largest, &|m, v| m / v.sqrt()),
        map(largest, &|m, v| m / v),
    );
    let (c, _) = least_squares(
        &target[largest..=largest],
        &[vec![&f1[..]], vec![&f2[..]], vec![theta[largest]]],
    )?;
    // The linear estimate first (m'/(√v' + ε) ≈ m'/√v' − ε·m'/v').
    let mut eps = if c[0] != 0.0 {
        (-c[1] / c[0]).max(0.0)
    } else {
        0.0
    };
    // Gauss–Newton on ε: u(ε + δ) ≈ u(ε) − δ·m'/(√v' + ε)².
    for _ in 0..4 {
        let u = map(largest, &|m, v| m / (v.sqrt() + eps));
        let du = map(largest, &|m, v| -m / (v.sqrt() + eps).powi(2));
        match least_squares(
            &target[largest..=largest],
            &[vec![&u[..]], vec![&du[..]], vec![theta[largest]]],
        ) {
            Some((c, _)) if c[0] != 0.0 => eps = (eps + c[1] / c[0]).max(0.0),
            _ => break,
        }
    }
    let norm = |x: &[f64]| x.iter().map(|x| x * x).sum::<f64>().sqrt();
    let (mut omega, mut lr, mut worst, mut unit) = (None::<f64>, None::<f64>, 0f64, 0);
    let agrees = |x: f64, y: f64| (x - y).abs() <= 1e-6 * x.abs().max(y.abs());
    for t in 0..target.len() {
        let u = map(t, &|m, v| m / (v.sqrt() + eps));
        let (c, r) = least_squares(&target[t..=t], &[vec![&u[..]], vec![theta[t]]])?;
        worst = worst.max(r);
        if r > EXACT || c[0] == 0.0 {
            return None;
        }
        let w = c[1] / c[0];
        let step: Vec<f64> = u.iter().zip(theta[t]).map(|(u, th)| u + w * th).collect();
        let (nt, ns) = (norm(theta[t]), norm(&step));
        if nt == 0.0 || ns == 0.0 {
            unit += 1;
            continue;
        }
        let l = -c[0] * ns / nt;
        match (omega, lr) {
            (Some(o), Some(x)) if !(agrees(o, w) || (o - w).abs() <= 1e-9) || !agrees(x, l) => {
                return None
            }
            (None, _) => (omega, lr) = (Some(w), Some(l)),
            _ => {}
        }
    }
    Some((lr?, eps, omega?, worst, unit))
}

#[cfg(test)]
mod tests {
    use super::super::lsq::refs;
    use super::*;

    /// Three tensors of a LAMB update (ε 1e-6, ω 0.01, lr 0.05, each
    /// tensor's own trust ratio) are recognised with their lr; the same
    /// update with one tensor's step doubled (a trust ratio computed on the
    /// wrong norm) is not.
    #[test]
    fn lamb_is_recognised_per_tensor_and_a_wrong_trust_ratio_is_not() {
        let mut rng = ir::rng::Rng::new(5);
        let sizes = [40usize, 7, 12];
        let draw = |rng: &mut ir::rng::Rng, n: usize, f: &dyn Fn(f64) -> f64| -> Vec<f64> {
            (0..n).map(|_| f(rng.normal())).collect()
        };
        let m: Vec<Vec<f64>> = sizes
            .iter()
            .map(|&n| draw(&mut rng, n, &|x| 0.1 * x))
            .collect();
        let v: Vec<Vec<f64>> = sizes
            .iter()
            .map(|&n| draw(&mut rng, n, &|x| 0.01 * x * x + 1e-4))
            .collect();
        let theta: Vec<Vec<f64>> = sizes.iter().map(|&n| draw(&mut rng, n, &|x| x)).collect();
        let (eps, omega, lr) = (1e-6, 0.01, 0.05);
        let step = |t: usize, scale: f64| -> Vec<f64> {
            let r: Vec<f64> = (0..sizes[t])
                .map(|i| m[t][i] / (v[t][i].sqrt() + eps) + omega * theta[t][i])
                .collect();
            let norm = |x: &[f64]| x.iter().map(|x| x * x).sum::<f64>().sqrt();
            let trust = norm(&theta[t]) / norm(&r);
            r.iter().map(|r| -scale * lr * trust * r).collect()
        };
        let (m_, v_, t_) = (refs(&m), refs(&v), refs(&theta));
        let right: Vec<Vec<f64>> = (0..3).map(|t| step(t, 1.0)).collect();
        let (got_lr, got_eps, got_omega, _, unit) =
            lamb(&refs(&right), &m_, &v_, &t_).expect("LAMB recognised");
        assert!(
            (got_lr - lr).abs() < 1e-9 && (got_omega - omega).abs() < 1e-9,
            "{got_lr} {got_omega}"
        );
        assert!((got_eps - eps).abs() < 1e-9 && unit == 0, "{got_eps}");
        let wrong: Vec<Vec<f64>> = (0..3)
            .map(|t| step(t, if t == 2 { 2.0 } else { 1.0 }))
            .collect();
        assert!(lamb(&refs(&wrong), &m_, &v_, &t_).is_none());
    }
}
