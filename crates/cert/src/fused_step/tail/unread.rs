//! Carried state no parameter's update reads: an EMA shadow of the
//! weights, fitted as one exponential moving average, and every other such
//! state listed as not checked.

use super::lsq::{relative_least_squares, termwise_residual, EXACT};
use super::{argument_holding, floats, NewStates, StateFit, TailReport};
use crate::fused_step::graph::{Def, Graph};
use crate::fused_step::roles::{ArgRole, Roles};
use den::Value;

/// Carried state that no parameter's update reads. A state whose result
/// carries a parameter of its shape is fitted as an exponential moving
/// average, one (a, b) for all: e' = a·e + b·θ' (the shadow of the updated
/// weights) or e' = a·e + b·θ (of the weights before this step's update).
/// Every other such state is listed as not checked, never left out.
pub(super) fn unread_states(
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
        let passthrough = g.def.get(&g.returned[output]) == Some(&Def::Arg(s));
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
