//! The tail forms fitted on the states a parameter's update reads: SGD,
//! heavy-ball and Nesterov momentum, RMSProp, Adam/AdamW (with its bias
//! correction read back), and the TF-RMSProp and LAMB forms built on them.

use super::lamb::lamb;
use super::lsq::{least_squares, refs, relative_least_squares, termwise_residual, EXACT};
use super::tf_rmsprop::preconditioned_momentum;
use super::{argument_holding, floats, NewStates, ParamAtPoint, StateFit, TailReport};
use crate::fused_step::roles::Roles;
use den::Value;

/// The tails on the given states, with `result` giving each state's new
/// value and `params` θ, θ' and the gradient the states read.
pub(super) fn fit_states(
    roles: &Roles,
    point: &[Value<f64>],
    result: &NewStates<'_>,
    params: &[ParamAtPoint],
    states: &[Vec<usize>],
) -> TailReport {
    let delta: Vec<Vec<f64>> = params
        .iter()
        .map(|p| p.updated.iter().zip(&p.theta).map(|(a, b)| a - b).collect())
        .collect();
    let target: Vec<&[f64]> = delta.iter().map(|d| d.as_slice()).collect();
    let grad: Vec<&[f64]> = params.iter().map(|p| p.grad.as_slice()).collect();
    let theta: Vec<&[f64]> = params.iter().map(|p| p.theta.as_slice()).collect();
    let n_states = states[0].len();
    let uniform = states.iter().all(|s| s.len() == n_states);
    let mut report = TailReport {
        recognised: None,
        residual: f64::NAN,
        states: Vec::new(),
        note: String::new(),
    };
    // A weight-decay coefficient whose term moves no update by more than
    // the fit's own tolerance is fitted noise, not a decay.
    let largest = |xs: &[&[f64]]| {
        xs.iter()
            .flat_map(|x| x.iter())
            .fold(0f64, |m, v| m.max(v.abs()))
    };
    let (theta_max, delta_max) = (largest(&theta), largest(&target));
    let decay = |c: f64| {
        if c.abs() * theta_max <= EXACT * delta_max {
            String::new()
        } else {
            format!(", weight decay {:.6e}·θ", -c)
        }
    };
    if n_states == 0 && uniform {
        if let Some((c, r)) = least_squares(&target, &[grad.clone(), theta.clone()]) {
            if r <= EXACT {
                report.recognised = Some(format!(
                    "SGD, lr {:.6e}{}{}",
                    -c[0],
                    argument_holding(roles, point, -c[0]),
                    decay(c[1])
                ));
                report.residual = r;
                return report;
            }
        }
        report.note = "update not checked: θ' − θ is not −lr·∇L (− wd·θ) for one lr".into();
        return report;
    }
    if !uniform {
        report.note =
            "update not checked: the parameters carry different numbers of state tensors".into();
        return report;
    }
    if n_states > 2 {
        report.note = format!(
            "update not checked: each parameter's update reads {n_states} state tensors (known tails read at most 2)"
        );
        return report;
    }
    // The states' own updates, per position k (first moment, second moment).
    let new_state = result;
    let old_state = |a: usize| -> &[f64] { floats(&point[a]) };
    let sq: Vec<Vec<f64>> = params
        .iter()
        .map(|p| p.grad.iter().map(|x| x * x).collect())
        .collect();
    let sq_ref = refs(&sq);
    let mut all_fit = true;
    // Each state's (μ, β) of s' = μ·s + β·feature.
    let mut state_rates = Vec::new();
    // ω of a second moment of ∇L + ω·θ, when one was fitted.
    let mut coupled_l2 = None;
    for k in 0..n_states {
        let tgt: Vec<&[f64]> = states.iter().map(|s| new_state(s[k])).collect();
        let old: Vec<&[f64]> = states.iter().map(|s| old_state(s[k])).collect();
        let mut best: Option<(String, f64)> = None;
        // Without, then with coupled weight decay (an L2 term wd·θ added to
        // the gradient before the momentum).
        'forms: for coupled in [false, true] {
            for (label, feat) in [("∇L", &grad), ("∇L²", &sq_ref)] {
                let mut features = vec![old.clone(), feat.clone()];
                if coupled {
                    features.push(theta.clone());
                }
                if let Some((c, _)) = relative_least_squares(&tgt, &features) {
                    let r = termwise_residual(&tgt, &features, &c);
                    if r <= EXACT {
                        let l2 = if coupled {
                            format!(" + {:.6e}·θ", c[2])
                        } else {
                            String::new()
                        };
                        best = Some((format!("s' = {:.6}·s + {:.6e}·{label}{l2}", c[0], c[1]), r));
                        state_rates.push((c[0], c[1]));
                        break 'forms;
                    }
                }
            }
        }
        // A second moment of the L2-coupled gradient ∇L + ω·θ (TF-RMSProp's
        // g ← g + wd·θ): ω read off the linear fit on ∇L², ∇L·θ and θ²
        // (s' = ρ·s + c·(∇L² + 2ω·∇L·θ + ω²·θ²)), then the exact form
        // s' = ρ·s + c·(∇L + ω·θ)² checked element by element.
        if best.is_none() {
            // (only when no plain form fits: two more parameter-sized arrays)
            let product = |x: &[&[f64]], y: &[&[f64]]| -> Vec<Vec<f64>> {
                x.iter()
                    .zip(y)
                    .map(|(x, y)| x.iter().zip(*y).map(|(x, y)| x * y).collect())
                    .collect()
            };
            let (gt, tt) = (product(&grad, &theta), product(&theta, &theta));
            let omega =
                relative_least_squares(&tgt, &[old.clone(), sq_ref.clone(), refs(&gt), refs(&tt)])
                    .map(|(c, _)| c[2] / (2.0 * c[1]))
                    .filter(|w| w.is_finite());
            if let Some(mut omega) = omega {
                // (∇L + ω·θ)² at ω, and its slope 2·(∇L + ω·θ)·θ.
                let at = |omega: f64, slope: bool| -> Vec<Vec<f64>> {
                    grad.iter()
                        .zip(&theta)
                        .map(|(g, t)| {
                            g.iter()
                                .zip(*t)
                                .map(|(g, t)| match slope {
                                    false => (g + omega * t).powi(2),
                                    true => 2.0 * (g + omega * t) * t,
                                })
                                .collect()
                        })
                        .collect()
                };
                // Gauss–Newton on ω: the linear estimate is only as good as
                // the tiny ω²·θ² term lets it be.
                for _ in 0..3 {
                    let (f, df) = (at(omega, false), at(omega, true));
                    match relative_least_squares(&tgt, &[old.clone(), refs(&f), refs(&df)]) {
                        Some((c, _)) if c[1] != 0.0 => omega += c[2] / c[1],
                        _ => break,
                    }
                }
                let coupled_sq = at(omega, false);
                let features = [old.clone(), refs(&coupled_sq)];
                if let Some((c, _)) = relative_least_squares(&tgt, &features) {
                    let r = termwise_residual(&tgt, &features, &c);
                    if r <= EXACT {
                        best = Some((
                            format!("s' = {:.6}·s + {:.6e}·(∇L + {omega:.6e}·θ)²", c[0], c[1]),
                            r,
                        ));
                        state_rates.push((c[0], c[1]));
                        coupled_l2 = Some(omega);
                    }
                }
            }
        }
        let fits = best.is_some();
        all_fit &= fits;
        report.states.push(StateFit {
            arg: states[0][k],
            name: roles.args[states[0][k]].name.clone(),
            form: best.map_or_else(
                || "not μ·s + c·∇L nor μ·s + c·∇L² for one μ, c".into(),
                |b| b.0,
            ),
            fits,
        });
    }
    // TF-RMSProp: s' = ρ·s + (1 − ρ)·∇L² (fitted above), and a momentum
    // of the preconditioned gradient b' = μ·b + c·∇L/√(s' + ε), which no
    // single-state form fits; θ' = θ − lr·b'.
    let second_moment = |k: usize| report.states[k].fits && report.states[k].form.ends_with('²');
    let tf_rms = (n_states == 2)
        .then(|| {
            [(0, 1), (1, 0)]
                .into_iter()
                .find(|&(ks, kb)| second_moment(ks) && !report.states[kb].fits)
        })
        .flatten();
    if let Some((ks, kb)) = tf_rms {
        let b_new: Vec<&[f64]> = states.iter().map(|s| new_state(s[kb])).collect();
        let b_old: Vec<&[f64]> = states.iter().map(|s| old_state(s[kb])).collect();
        let s_new: Vec<&[f64]> = states.iter().map(|s| new_state(s[ks])).collect();
        let omega = coupled_l2.unwrap_or(0.0);
        let coupled: Vec<Vec<f64>> = grad
            .iter()
            .zip(&theta)
            .map(|(g, t)| g.iter().zip(*t).map(|(g, t)| g + omega * t).collect())
            .collect();
        if let Some((mu, c, eps, r)) =
            preconditioned_momentum(&b_new, &b_old, &refs(&coupled), &s_new)
        {
            if let Some((a, rt)) = least_squares(&target, &[b_new.clone(), theta.clone()]) {
                if rt <= EXACT {
                    let g = match coupled_l2 {
                        Some(w) => format!("(∇L + {w:.6e}·θ)"),
                        None => "∇L".into(),
                    };
                    report.states[kb].form =
                        format!("b' = {mu:.6}·b + {c:.6e}·{g}/√(s' + {eps:.1e})");
                    report.states[kb].fits = true;
                    report.recognised = Some(format!(
                        "TF-RMSProp, θ' = θ − lr·b', lr {:.6e}{}, μ {mu:.6}, ε {eps:.1e}{}{}",
                        -a[0],
                        argument_holding(roles, point, -a[0]),
                        match coupled_l2 {
                            Some(w) => format!(", L2 {w:.6e}·θ coupled into ∇L"),
                            None => String::new(),
                        },
                        decay(a[1])
                    ));
                    report.residual = rt.max(r);
                    return report;
                }
            }
        }
    }
    let s1: Vec<&[f64]> = states.iter().map(|s| new_state(s[0])).collect();
    if all_fit && n_states == 1 {
        if let Some((c, r)) = least_squares(&target, &[s1.clone(), theta.clone()]) {
            if r <= EXACT {
                report.recognised = Some(format!(
                    "heavy-ball momentum, lr {:.6e}{}{}",
                    -c[0],
                    argument_holding(roles, point, -c[0]),
                    decay(c[1])
                ));
                report.residual = r;
                return report;
            }
        }
        // Nesterov, θ' = θ − lr·(∇L + μ·s') with s' = μ·s + β·∇L, is
        // θ − lr·(1 + μβ)·∇L − lr·μ²·s: fitted on ∇L and the old state s,
        // drawn independently of ∇L (s' and ∇L are nearly parallel where s
        // is small, and a fit on them is ill-conditioned).
        let s0: Vec<&[f64]> = states.iter().map(|s| old_state(s[0])).collect();
        let (mu, beta) = state_rates[0];
        if let Some((c, r)) = least_squares(&target, &[grad.clone(), s0, theta.clone()]) {
            let lr = -c[1] / (mu * mu);
            let expected = -lr * (1.0 + mu * beta);
            if r <= EXACT && mu != 0.0 && (c[0] - expected).abs() <= 1e-6 * c[0].abs() {
                report.recognised = Some(format!(
                    "Nesterov momentum, lr {lr:.6e}{}, μ {mu:.6}{}",
                    argument_holding(roles, point, lr),
                    decay(c[2])
                ));
                report.residual = r;
                return report;
            }
        }
        // RMSProp: v' = ρ·v + c·∇L², θ' − θ = −lr·∇L/h(v', ε) with
        // h = √v' + ε or √(v' + ε) (optax). ε is found by Gauss–Newton on
        // the linear fit (to first order, −lr·∇L/h(ε + δ) is
        // −lr·(∇L/h − δ·∇L·h'/h²)), then the form is checked exactly.
        let second_moment = report.states[0].form.ends_with("∇L²");
        type Denominator = fn(f64, f64) -> (f64, f64);
        let forms: [(&str, Denominator); 2] = [
            ("√v' + ε", |v, e| (v.sqrt() + e, 1.0)),
            ("√(v' + ε)", |v, e| {
                ((v + e).sqrt(), 0.5 / (v + e).sqrt())
            }),
        ];
        for (form, h) in forms {
            if !second_moment {
                break;
            }
            let feature = |eps: f64, slope: bool| -> Vec<Vec<f64>> {
                grad.iter()
                    .zip(&s1)
                    .map(|(g, v)| {
                        g.iter()
                            .zip(*v)
                            .map(|(g, v)| {
                                let (d, dd) = h(*v, eps);
                                if slope {
                                    g * dd / (d * d)
                                } else {
                                    g / d
                                }
                            })
                            .collect()
                    })
                    .collect()
            };
            let mut eps = 0.0;
            for _ in 0..4 {
                let (f1, f2) = (feature(eps, false), feature(eps, true));
                match least_squares(&target, &[refs(&f1), refs(&f2), theta.clone()]) {
                    Some((c, _)) if c[0] != 0.0 => eps -= c[1] / c[0],
                    _ => break,
                }
            }
            let f1 = feature(eps, false);
            if let Some((c, r)) = least_squares(&target, &[refs(&f1), theta.clone()]) {
                if r <= EXACT && eps.is_finite() {
                    report.recognised = Some(format!(
                        "RMSProp, θ' = θ − lr·∇L/({form}), lr {:.6e}{}, ε {eps:.1e}{}",
                        -c[0],
                        argument_holding(roles, point, -c[0]),
                        decay(c[1])
                    ));
                    report.residual = r;
                    return report;
                }
            }
        }
    }
    if all_fit && n_states == 2 {
        let s2: Vec<&[f64]> = states.iter().map(|s| new_state(s[1])).collect();
        let f1: Vec<Vec<f64>> = s1
            .iter()
            .zip(&s2)
            .map(|(m, v)| m.iter().zip(*v).map(|(m, v)| m / v.sqrt()).collect())
            .collect();
        let f2: Vec<Vec<f64>> = s1
            .iter()
            .zip(&s2)
            .map(|(m, v)| m.iter().zip(*v).map(|(m, v)| m / v).collect())
            .collect();
        let r1 = refs(&f1);
        let r2 = refs(&f2);
        if let Some((c, r)) = least_squares(&target, &[r1, r2, theta.clone()]) {
            if r <= EXACT {
                let (a, eps) = (-c[0], -c[1] / c[0]);
                report.recognised = Some(format!(
                    "Adam, θ' = θ − {a:.6e}·m'/(√v' + {eps:.1e}){}{}",
                    decay(c[2]),
                    bias_corrected(roles, point, a, eps, state_rates[0].0, state_rates[1].0)
                ));
                report.residual = r;
                return report;
            }
        }
        if let Some((lr, eps, omega, r, unit)) = lamb(&target, &s1, &s2, &theta) {
            report.recognised = Some(format!(
                "LAMB, θ' = θ − lr·‖θ‖/‖u + ω·θ‖·(u + ω·θ) per tensor, u = m'/(√v' + {eps:.1e}), \
                 lr {lr:.6e}{}, ω {omega:.6e} (weight decay over the bias corrections' scale){}",
                argument_holding(roles, point, lr),
                match unit {
                    0 => String::new(),
                    n => format!(" ({n} tensor(s) with a zero norm take trust 1: not checked)"),
                }
            ));
            report.residual = r;
            return report;
        }
    }
    report.note = if all_fit {
        "update not checked: the states fit, but θ' is none of the known forms of them".into()
    } else {
        "update not checked: a state's update is none of the known forms".into()
    };
    report
}

/// Adam's measured step size and ε read back through bias correction: with
/// one integer scalar argument (optax's `count`) holding c, the step is
/// t = c + 1 and a = lr·√(1 − β2ᵗ)/(1 − β1ᵗ), ε_measured = ε·√(1 − β2ᵗ).
/// Empty when there is no single counter to read t from.
fn bias_corrected(
    roles: &Roles,
    point: &[Value<f64>],
    a: f64,
    eps: f64,
    b1: f64,
    b2: f64,
) -> String {
    let counters: Vec<(usize, i64)> = roles
        .args
        .iter()
        .enumerate()
        .filter(|(_, r)| r.ty.num_elements() == 1 && !r.ty.elem.is_float())
        .filter_map(|(i, _)| match &point[i] {
            Value::Int(t, _) => Some((i, t.data[0])),
            _ => None,
        })
        .collect();
    let [(i, c)] = counters[..] else {
        return String::new();
    };
    let t = (c + 1) as i32;
    let root = (1.0 - b2.powi(t)).sqrt();
    format!(
        "; with bias correction at step {t} (counter %{} = {c}, plus one): lr {:.6e}, ε {:.1e}",
        roles.args[i].name,
        a * (1.0 - b1.powi(t)) / root,
        eps / root
    )
}
