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

mod fallback;
mod forms;
mod lamb;
mod lsq;
mod tf_rmsprop;
mod unread;

use super::graph::Graph;
use super::roles::{ArgRole, Roles};
use den::Value;
use fallback::accumulated_or_gated;
use forms::fit_states;
use unread::unread_states;

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
