//! The fallbacks tried when no tail fits on ∇L itself: an accumulated
//! gradient state read in its place, a gate applying the update in
//! proportion, and both together.

use super::forms::fit_states;
use super::lsq::{relative_least_squares, termwise_residual, EXACT};
use super::{argument_holding, floats, NewStates, ParamAtPoint, StateFit, TailReport};
use crate::fused_step::roles::{ArgRole, Roles};
use den::Value;

/// [`fit`](super::fit)'s fallbacks: an accumulator state among each parameter's states
/// (tried at every position whose update is exactly μ·G + c·∇L), then a
/// gate (tried at every one-element float hyper-parameter's value), each
/// alone and both together. The first recognised tail, or how many
/// combinations were tried.
pub(super) fn accumulated_or_gated(
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
