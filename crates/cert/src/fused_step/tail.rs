//! The optimizer tail of a fused step, recognised by fitting: each known
//! tail is linear in its unknown hyper-parameters once ∇L (tied) and the
//! step's outputs are known, so its coefficients are found by least squares
//! over every parameter at once (one learning rate for all) and the tail is
//! recognised only when the fit is exact to f64 rounding. The forms:
//! - SGD: θ' − θ = −lr·∇L, with decoupled weight decay − lr·wd·θ;
//! - a state s carried beside θ (heavy ball, Nesterov): s' = μ·s + c·∇L
//!   (+ d·θ: weight decay coupled into the momentum), then
//!   θ' − θ = −lr·s' or −lr·(∇L + μ·s');
//! - one second-moment state (RMSProp): v' = ρ·v + c·∇L², then
//!   θ' − θ = −lr·∇L/(√v' + ε) or −lr·∇L/√(v' + ε), fitted through its
//!   first order in ε;
//! - two states (Adam/AdamW): m' = β1·m + c1·∇L, v' = β2·v + c2·∇L², then
//!   θ' − θ = −a·m'/(√v' + ε) − b·θ, fitted through its first order in ε
//!   (m'/√v' and m'/v' as features; ε ≪ √v' at the drawn point).
//!
//! A tail none of these fits is reported as not recognised: the gradient is
//! certified, the update is not checked.

use super::graph::Graph;
use super::roles::{ArgRole, Roles};
use den::Value;

/// One parameter at the point: θ, θ' and ∇L (the tied gradient over κ).
pub(crate) struct ParamAtPoint {
    pub arg: usize,
    pub theta: Vec<f64>,
    pub updated: Vec<f64>,
    pub grad: Vec<f64>,
}

/// A state tensor's recognised update.
#[derive(Clone, Debug)]
pub struct StateFit {
    pub arg: usize,
    pub name: String,
    /// `m' = 0.9·m + 0.1·∇L`, or why none fits.
    pub form: String,
    pub fits: bool,
}

#[derive(Clone, Debug)]
pub struct TailReport {
    /// The recognised tail with its measured hyper-parameters, e.g.
    /// `SGD, lr 0.1`; `None` when none fits.
    pub recognised: Option<String>,
    /// Largest residual of the recognised fit over the update's size.
    pub residual: f64,
    pub states: Vec<StateFit>,
    pub note: String,
}

impl TailReport {
    pub(crate) fn not_checked(why: &str) -> Self {
        TailReport {
            recognised: None,
            residual: f64::NAN,
            states: Vec::new(),
            note: format!("update not checked: {why}"),
        }
    }
}

/// Fits within this relative residual are exact up to f64 rounding.
const EXACT: f64 = 1e-9;

/// Least squares `target ≈ Σ_k c_k·features[k]` over the concatenated
/// tensors: the coefficients and max|residual| / max|target|. The normal
/// equations square the features' condition number (a momentum state and
/// the gradient it was built from are nearly parallel), so the features are
/// scaled to unit norm and the solution refined twice on its own residual:
/// an exact fit then shows a residual at f64 rounding, not at 1e-9.
fn least_squares(target: &[&[f64]], features: &[Vec<&[f64]>]) -> Option<(Vec<f64>, f64)> {
    weighted_least_squares(target, features, false)
}

/// [`least_squares`] with every element weighted by 1/|target| (`relative`):
/// a state's update whose elements span many orders of magnitude (a second
/// moment of large and small gradients) determines its small terms' (the old
/// state's) coefficient only where they matter, relative to the element.
fn relative_least_squares(target: &[&[f64]], features: &[Vec<&[f64]>]) -> Option<(Vec<f64>, f64)> {
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
fn termwise_residual(target: &[&[f64]], features: &[Vec<&[f64]>], c: &[f64]) -> f64 {
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

fn floats(v: &Value<f64>) -> &[f64] {
    &v.as_float().expect("a float value").data
}

/// The new value of each state argument the fit reads (the step's result
/// for it, or that result seen through a gate).
type NewStates<'a> = dyn Fn(usize) -> &'a [f64] + 'a;

/// Fit the known tails. `outs`: the step's results at `point`.
///
/// In order: the tails on ∇L itself; then on an accumulated gradient (a
/// state G' = μ·G + c·∇L that the other states and θ' read in place of
/// ∇L); then either of those behind a gate (a scalar argument h with
/// x' = x + h·(x_full − x) for θ and its non-accumulator states: the update
/// applied in proportion, a host's "update on the last micro-batch").
/// Carried state that no parameter's update reads (an EMA shadow, running
/// statistics) is fitted or reported as not checked.
pub(crate) fn fit(
    roles: &Roles,
    g: &Graph,
    point: &[Value<f64>],
    outs: &[Value<f64>],
    params: &[ParamAtPoint],
) -> TailReport {
    if params.is_empty() {
        return TailReport::not_checked("no parameter has a gradient");
    }
    // The states each parameter's update carries elementwise (θ' reads m', v').
    let states: Vec<Vec<usize>> = params
        .iter()
        .map(|p| {
            let out = roles.output_of(p.arg).expect("an updated parameter");
            let mut s: Vec<(usize, usize)> = g
                .carried(g.returned[out])
                .into_iter()
                .filter(|(a, _)| matches!(roles.args[*a].role, ArgRole::State { .. }))
                .collect();
            s.sort_by_key(|&(a, d)| (d, a));
            s.into_iter().map(|(a, _)| a).collect()
        })
        .collect();
    let result =
        |a: usize| -> &[f64] { floats(&outs[roles.output_of(a).expect("a carried state")]) };
    let mut report = fit_states(roles, point, &result, params, &states);
    if report.recognised.is_none() {
        match accumulated_or_gated(roles, point, &result, params, &states) {
            Ok(r) => report = r,
            Err(0) => {}
            Err(tried) => {
                report.note += &format!(
                "; nor on an accumulated gradient or behind a gate ({tried} combination(s) tried)"
            )
            }
        }
    }
    let updates: Vec<(usize, &[f64])> = params
        .iter()
        .map(|p| (p.arg, p.updated.as_slice()))
        .collect();
    unread_states(roles, g, point, &result, &updates, &states, &mut report);
    report
}

/// [`fit`]'s fallbacks: an accumulator state among each parameter's states
/// (tried at every position whose update is exactly μ·G + c·∇L), then a
/// gate (tried at every one-element float hyper-parameter's value), each
/// alone and both together. The first recognised tail, or how many
/// combinations were tried.
fn accumulated_or_gated(
    roles: &Roles,
    point: &[Value<f64>],
    result: &NewStates<'_>,
    params: &[ParamAtPoint],
    states: &[Vec<usize>],
) -> Result<TailReport, usize> {
    let n_states = states[0].len();
    if states.iter().any(|s| s.len() != n_states) {
        return Err(0);
    }
    let old = |a: usize| -> &[f64] { floats(&point[a]) };
    let grad: Vec<&[f64]> = params.iter().map(|p| p.grad.as_slice()).collect();
    // Accumulator positions: G' = μ·G + c·∇L exactly, for one μ and c.
    let mut accumulators: Vec<Option<(usize, String)>> = vec![None];
    for k in 0..n_states {
        let tgt: Vec<&[f64]> = states.iter().map(|s| result(s[k])).collect();
        let prev: Vec<&[f64]> = states.iter().map(|s| old(s[k])).collect();
        let features = [prev, grad.clone()];
        if let Some((c, _)) = relative_least_squares(&tgt, &features) {
            if termwise_residual(&tgt, &features, &c) <= EXACT && c[1] != 0.0 {
                accumulators.push(Some((
                    k,
                    format!(
                        "G' = {:.6}·G + {:.6e}·∇L (accumulated gradient{})",
                        c[0],
                        c[1],
                        argument_holding(roles, point, c[0])
                            .replace(" (the argument", ", μ is the argument")
                            .replace(')', "")
                    ),
                )));
            }
        }
    }
    // Gates: the values of one-element float hyper-parameters.
    let mut gates: Vec<Option<(usize, f64)>> = vec![None];
    for (i, a) in roles.args.iter().enumerate() {
        if a.role == ArgRole::Hyper && a.ty.num_elements() == 1 {
            if let Some(t) = point[i].as_float() {
                let h = t.data[0];
                if h.is_finite() && h != 0.0 && h != 1.0 {
                    gates.push(Some((i, h)));
                }
            }
        }
    }
    for gate in &gates {
        for acc in &accumulators {
            if gate.is_none() && acc.is_none() {
                continue; // the plain fit, already tried
            }
            let acc_k = acc.as_ref().map(|(k, _)| *k);
            let rest: Vec<Vec<usize>> = states
                .iter()
                .map(|s| {
                    s.iter()
                        .enumerate()
                        .filter(|(k, _)| Some(*k) != acc_k)
                        .map(|(_, a)| *a)
                        .collect()
                })
                .collect();
            // Through the gate h: x_full = x + (x' − x)/h.
            let ungate = |new: &[f64], prev: &[f64], h: f64| -> Vec<f64> {
                new.iter().zip(prev).map(|(n, p)| p + (n - p) / h).collect()
            };
            let gated_states: std::collections::HashMap<usize, Vec<f64>> = match gate {
                Some((_, h)) => rest
                    .iter()
                    .flatten()
                    .map(|&a| (a, ungate(result(a), old(a), *h)))
                    .collect(),
                None => Default::default(),
            };
            let view = |a: usize| -> &[f64] {
                gated_states
                    .get(&a)
                    .map_or_else(|| result(a), |v| v.as_slice())
            };
            let inner: Vec<ParamAtPoint> = params
                .iter()
                .zip(states)
                .map(|(p, s)| ParamAtPoint {
                    arg: p.arg,
                    theta: p.theta.clone(),
                    updated: match gate {
                        Some((_, h)) => ungate(&p.updated, &p.theta, *h),
                        None => p.updated.clone(),
                    },
                    grad: match acc_k {
                        Some(k) => result(s[k]).to_vec(),
                        None => p.grad.clone(),
                    },
                })
                .collect();
            let mut r = fit_states(roles, point, &view, &inner, &rest);
            if let Some(t) = r.recognised.take() {
                if acc.is_some() {
                    for st in &mut r.states {
                        st.form = st.form.replace("∇L", "G'");
                    }
                }
                let mut prefix = Vec::new();
                if let Some((k, form)) = acc {
                    prefix.push(format!(
                        "on the accumulated gradient G' (state %{}…)",
                        roles.args[states[0][*k]].name
                    ));
                    r.states.insert(
                        0,
                        StateFit {
                            arg: states[0][*k],
                            name: roles.args[states[0][*k]].name.clone(),
                            form: form.clone(),
                            fits: true,
                        },
                    );
                }
                if let Some((i, h)) = gate {
                    prefix.push(format!(
                        "applied in proportion to the argument %{} ({h:.6} at the point: x' = x + h·(x_full − x) for θ and its moments)",
                        roles.args[*i].name
                    ));
                }
                let text = t.replace("∇L", "G'");
                r.recognised = Some(format!("{text}; {}", prefix.join("; ")));
                return Ok(r);
            }
        }
    }
    Err(gates.len() * accumulators.len() - 1)
}

/// The tails on the given states, with `result` giving each state's new
/// value and `params` θ, θ' and the gradient the states read.
fn fit_states(
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

/// Carried state that no parameter's update reads. A state whose result
/// carries a parameter of its shape is fitted as an exponential moving
/// average, one (a, b) for all: e' = a·e + b·θ' (the shadow of the updated
/// weights) or e' = a·e + b·θ (of the weights before this step's update).
/// Every other such state is listed as not checked, never left out.
fn unread_states(
    roles: &Roles,
    g: &Graph,
    point: &[Value<f64>],
    result: &NewStates<'_>,
    updates: &[(usize, &[f64])],
    states: &[Vec<usize>],
    report: &mut TailReport,
) {
    let read: std::collections::HashSet<usize> = states.iter().flatten().copied().collect();
    let mut shadows: Vec<(usize, usize)> = Vec::new();
    let mut others: Vec<usize> = Vec::new();
    for (s, a) in roles.args.iter().enumerate() {
        let ArgRole::State { output } = a.role else {
            continue;
        };
        // (returned as it came: nothing to check)
        let passthrough = g.def.get(&g.returned[output]) == Some(&super::graph::Def::Arg(s));
        if read.contains(&s) || passthrough {
            continue;
        }
        let mut carried = g.carried(g.returned[output]);
        carried.sort_by_key(|&(a, d)| (d, a));
        let follows = carried.iter().find(|(p, _)| {
            updates.iter().any(|(q, _)| q == p) && roles.args[*p].ty.shape == a.ty.shape
        });
        match follows {
            Some(&(p, _)) => shadows.push((s, p)),
            None => others.push(s),
        }
    }
    let list = |xs: &mut dyn Iterator<Item = usize>| -> String {
        let names: Vec<String> = xs.map(|i| format!("%{}", roles.args[i].name)).collect();
        match names.len() {
            0..=4 => names.join(", "),
            n => format!("{}, … ({n} tensors)", names[..3].join(", ")),
        }
    };
    if !shadows.is_empty() {
        let tgt: Vec<&[f64]> = shadows.iter().map(|&(s, _)| result(s)).collect();
        let old: Vec<&[f64]> = shadows.iter().map(|&(s, _)| floats(&point[s])).collect();
        let updated = |p: usize| {
            updates
                .iter()
                .find(|(q, _)| *q == p)
                .expect("a parameter")
                .1
        };
        let after: Vec<&[f64]> = shadows.iter().map(|&(_, p)| updated(p)).collect();
        let before: Vec<&[f64]> = shadows.iter().map(|&(_, p)| floats(&point[p])).collect();
        let mut form = None;
        for (weights, which) in [
            (after, "θ' (an EMA shadow of the updated weights)"),
            (
                before,
                "θ (an EMA shadow of the weights before this step's update)",
            ),
        ] {
            let features = [old.clone(), weights];
            if let Some((c, _)) = relative_least_squares(&tgt, &features) {
                if termwise_residual(&tgt, &features, &c) <= EXACT {
                    form = Some(format!(
                        "e' = {:.6}·e{} + {:.6e}·{which}",
                        c[0],
                        argument_holding(roles, point, c[0]),
                        c[1]
                    ));
                    break;
                }
            }
        }
        let fits = form.is_some();
        report.states.push(StateFit {
            arg: shadows[0].0,
            name: roles.args[shadows[0].0].name.clone(),
            form: form.unwrap_or_else(|| {
                format!(
                    "update not checked: carries its parameter ({}) but is not a·e + b·θ' nor a·e + b·θ for one a, b",
                    list(&mut shadows.iter().map(|&(s, _)| s))
                )
            }),
            fits,
        });
    }
    if !others.is_empty() {
        report.states.push(StateFit {
            arg: others[0],
            name: roles.args[others[0]].name.clone(),
            form: format!(
                "update not checked: carried state no parameter's update reads ({}; running statistics, counters)",
                list(&mut others.iter().copied())
            ),
            fits: false,
        });
    }
}

/// LAMB's update, per parameter tensor t: θ'ₜ − θₜ = −lr·trustₜ·(s·uₜ +
/// wd·θₜ) with uₜ = m'ₜ/(√v'ₜ + ε) and trustₜ = ‖θₜ‖/‖s·uₜ + wd·θₜ‖, s
/// the bias corrections' common scale. Fitted per tensor as aₜ·uₜ + bₜ·θₜ:
/// ω = bₜ/aₜ (= wd/s) and lr = −aₜ·‖uₜ + ω·θₜ‖/‖θₜ‖ must be one number for
/// every tensor, whatever s. ε from the largest tensor's linear fit on
/// m'/√v' and m'/v'. (lr, ε, ω, residual, tensors with a zero norm).
fn lamb(
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

/// `b' ≈ μ·b + c·∇L/√(s' + ε)` exactly, over the concatenated tensors:
/// (μ, c, ε, residual). ε by Gauss–Newton on the linear fit: to first order
/// ∇L/√(s' + ε + δ) is ∇L/√(s' + ε) − δ·∇L/(2·(s' + ε)^{3/2}).
fn preconditioned_momentum(
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

fn refs(f: &[Vec<f64>]) -> Vec<&[f64]> {
    f.iter().map(|v| v.as_slice()).collect()
}

/// ` (the argument %lr)` when a one-element float hyper-parameter argument
/// holds `x` at the point (a learning rate passed in, not a constant).
fn argument_holding(roles: &Roles, point: &[Value<f64>], x: f64) -> String {
    roles
        .args
        .iter()
        .enumerate()
        .find(|(i, a)| {
            a.role == ArgRole::Hyper
                && a.ty.num_elements() == 1
                && point[*i]
                    .as_float()
                    .is_some_and(|t| (t.data[0] - x).abs() <= 1e-9 * x.abs())
        })
        .map_or(String::new(), |(_, a)| {
            format!(" (the argument %{})", a.name)
        })
}

#[cfg(test)]
mod tests {
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
