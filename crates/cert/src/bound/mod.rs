//! bound: a rigorous a-posteriori bound on the rounding error of a function
//! (a train step, its gradients, any StableHLO function) at a concrete
//! point, and the mask-flip-free decision. Running error analysis in
//! outward-rounded f64 intervals ([`scalar::Bnd`] through den's generic
//! evaluator): per output element, an enclosure of the exact real value and
//! a bound on |computed − exact| that holds for ANY IEEE evaluation of the
//! text in ANY summation order (certgrad's executor, XLA and IREE alike),
//! given the transcendental accuracy hypotheses of [`hypothesis`].
//!
//! Two methods share the scalar: [`analyse`] (the box: the bound carried
//! forward per element, |·| taken at every op) and [`analyse_adjoint`]
//! (`adjoint`: the first-order composite bound Σₖ |∂y/∂vₖ|·|δₖ| from a
//! recorded tape, the box entering only at second order), which reports the
//! smaller of the two per element.
//!
//! This module owns the drivers, the per-tensor report and the decision
//! summary; `view` builds the gradient function of a net's step and its
//! sample point.

pub mod adjoint;
pub mod hypothesis;
pub mod interval;
pub mod scalar;
pub mod view;

pub use scalar::{Bnd, HalvedUnit, Ieee754, Model, NoUnderflowTerm};

use den::{eval_func, EvalOptions, Tensor, Value};
use interval::Iv;
use ir::Module;
use std::time::Instant;

/// The bound on one output tensor, per element.
#[derive(Clone, Debug)]
pub struct TensorBound {
    pub name: String,
    pub shape: Vec<usize>,
    /// Encloses each element's exact value.
    pub exact: Vec<Iv>,
    /// Bound on |computed − exact| per element.
    pub err: Vec<f64>,
    /// The box method's ‖bound‖₂ (equal to ‖err‖₂ for the box method).
    pub box_norm: f64,
}

impl TensorBound {
    pub fn len(&self) -> usize {
        self.err.len()
    }

    pub fn is_empty(&self) -> bool {
        self.err.is_empty()
    }

    /// The largest element bound.
    pub fn max_err(&self) -> f64 {
        self.err.iter().copied().fold(0.0, f64::max)
    }

    /// ‖bound‖₂ over the elements: bounds ‖computed − exact‖₂.
    pub fn norm_err(&self) -> f64 {
        norm_up(&self.err)
    }

    /// ‖exact‖₂ (of the enclosures' midpoints).
    pub fn norm_value(&self) -> f64 {
        self.exact
            .iter()
            .map(|v| v.mid() * v.mid())
            .sum::<f64>()
            .sqrt()
    }

    /// Non-vacuous: ‖bound‖₂ below `fraction` of ‖value‖₂.
    pub fn non_vacuous(&self, fraction: f64) -> bool {
        self.norm_err() < fraction * self.norm_value()
    }

    /// Zero-valued: at every element the exact enclosure holds 0 and lies
    /// within the (finite) error bound of 0, so the analysis cannot tell the
    /// exact value from 0 at its own resolution. No relative criterion can
    /// apply (no bound is below 10 % of 0): the report lists these apart,
    /// with their absolute bounds, never as non-vacuous. The case met is a
    /// conv bias before a batch BN (its exact gradient is 0: the BN removes
    /// any shift); the analysis does not prove the value IS 0.
    pub fn zero_valued(&self) -> bool {
        !self.is_empty()
            && self
                .exact
                .iter()
                .zip(&self.err)
                .all(|(iv, &e)| e.is_finite() && iv.contains(0.0) && iv.mag() <= e)
    }

    /// The first element whose `computed` value lies outside [lo − e, hi + e]
    /// (None: every computed value is within its bound).
    pub fn first_outside(&self, computed: &[f64]) -> Option<usize> {
        computed
            .iter()
            .zip(self.exact.iter().zip(&self.err))
            .position(|(&c, (iv, &e))| !iv.hull(e).contains(c))
    }

    /// The first element whose exact value (from an exact evaluation) lies
    /// outside its enclosure.
    pub fn first_not_enclosed(&self, exact: &[f64]) -> Option<usize> {
        exact
            .iter()
            .zip(&self.exact)
            .position(|(&x, iv)| !iv.contains(x))
    }
}

/// One decision op's weakest decision: margin / (sum of operand bounds).
#[derive(Clone, Debug, PartialEq)]
pub struct DecisionSite {
    pub op: &'static str,
    pub op_index: usize,
    pub line: Option<u32>,
    /// Flat index (in the op's result) of the weakest decision.
    pub index: usize,
    pub ratio: f64,
    pub decisions: usize,
}

impl DecisionSite {
    /// Rounding cannot flip any decision of this op.
    pub fn flip_free(&self) -> bool {
        self.ratio > 1.0
    }

    /// Whether the op's outcome is used discretely (a compare's i1 feeds a
    /// select; select_and_scatter routes by its choice). maximum/minimum and
    /// max reductions/pools are 1-Lipschitz: their bounds hold through a
    /// flip, so only these decisions condition the bounds.
    pub fn discrete(&self) -> bool {
        matches!(
            self.op,
            "stablehlo.compare" | "stablehlo.select_and_scatter" | "stablehlo.sort"
        )
    }
}

#[derive(Clone, Debug)]
pub struct BoundReport {
    pub func: String,
    pub model: &'static str,
    pub outputs: Vec<TensorBound>,
    /// Every decision op (compare, maximum/minimum, max reductions, pools).
    pub decisions: Vec<DecisionSite>,
    /// Functions without a rule (their results, and what depends on them,
    /// carry vacuous bounds).
    pub unsupported: Vec<&'static str>,
    pub seconds: f64,
    /// "box" or "adjoint" (the adjoint method falls back to the box where
    /// its tape would exceed the node budget; `note` says so).
    pub method: &'static str,
    /// Tape nodes recorded (adjoint method).
    pub tape_nodes: Option<usize>,
    pub note: Option<String>,
}

impl BoundReport {
    /// Every decision is flip-free: the f32 evaluation takes the branches
    /// the exact one takes at this point.
    pub fn flip_free(&self) -> bool {
        self.decisions.iter().all(DecisionSite::flip_free)
    }

    /// The bounds are rigorous: every discretely used decision is
    /// flip-free, so the f32 evaluation routes values as the exact one does
    /// (otherwise they hold only for evaluations taking the exact branches).
    pub fn rigorous(&self) -> bool {
        self.decisions
            .iter()
            .filter(|d| d.discrete())
            .all(DecisionSite::flip_free)
    }

    /// The discretely used decision op with the smallest ratio.
    pub fn weakest_discrete(&self) -> Option<&DecisionSite> {
        self.decisions
            .iter()
            .filter(|d| d.discrete())
            .min_by(|a, b| a.ratio.total_cmp(&b.ratio))
    }

    /// The decision op with the smallest ratio.
    pub fn weakest(&self) -> Option<&DecisionSite> {
        self.decisions
            .iter()
            .min_by(|a, b| a.ratio.total_cmp(&b.ratio))
    }

    pub fn decision_count(&self) -> usize {
        self.decisions.iter().map(|d| d.decisions).sum()
    }
}

/// The point as values of the analysis scalar: float inputs must be values
/// of their element type (they are the point, exactly).
fn lift<S: Clone>(
    inputs: &[Value<f64>],
    exact: impl Fn(f64) -> S,
) -> Result<Vec<Value<S>>, String> {
    let mut vals = Vec::with_capacity(inputs.len());
    for (i, v) in inputs.iter().enumerate() {
        vals.push(match v {
            Value::Float(t, e) => {
                if let Some(j) = t
                    .data
                    .iter()
                    .position(|&x| den::scalar::round_f64_to(x, *e) != x)
                {
                    return Err(format!(
                        "input {i}, element {j}: {} is not a {} value",
                        t.data[j], e
                    ));
                }
                Value::Float(
                    Tensor::new(t.shape.clone(), t.data.iter().map(|&x| exact(x)).collect()),
                    *e,
                )
            }
            Value::Int(t, e) => Value::Int(t.clone(), *e),
        });
    }
    Ok(vals)
}

fn margin_opts() -> EvalOptions {
    EvalOptions {
        fast: false,
        record_margins: true,
        replicas: 1,
    }
}

fn sites(ev_margins: &[den::eval::Margin]) -> Vec<DecisionSite> {
    ev_margins
        .iter()
        .map(|mg| DecisionSite {
            op: mg.op,
            op_index: mg.op_index,
            line: mg.line,
            index: mg.argmin,
            ratio: mg.min,
            decisions: mg.decisions,
        })
        .collect()
}

fn name(names: &[String], i: usize) -> String {
    names
        .get(i)
        .cloned()
        .unwrap_or_else(|| format!("result {i}"))
}

/// Bound `func` of `m` at `inputs` under the float model `M` by the box
/// method. Float inputs must be values of their element type (they are the
/// point, exactly); `names` label the outputs (missing ones are `result i`).
pub fn analyse<M: Model>(
    m: &Module,
    func: &str,
    inputs: &[Value<f64>],
    names: &[String],
) -> Result<BoundReport, String> {
    let t0 = Instant::now();
    let vals = lift(inputs, Bnd::<M>::exact)?;
    let _ = scalar::take_unsupported();
    let ev = eval_func::<Bnd<M>>(m, func, vals, &margin_opts()).map_err(|e| e.to_string())?;
    let unsupported = scalar::take_unsupported();
    let outputs = ev
        .outputs
        .into_iter()
        .enumerate()
        .filter_map(|(i, v)| {
            let t = v.into_float()?;
            let err: Vec<f64> = t.data.iter().map(|b| sane_err(b.e)).collect();
            Some(TensorBound {
                name: name(names, i),
                shape: t.shape.clone(),
                exact: t.data.iter().map(|b| sane_iv(b.iv)).collect(),
                box_norm: norm_up(&err),
                err,
            })
        })
        .collect();
    Ok(BoundReport {
        func: func.to_string(),
        model: M::NAME,
        outputs,
        decisions: sites(&ev.margins),
        unsupported,
        seconds: t0.elapsed().as_secs_f64(),
        method: "box",
        tape_nodes: None,
        note: None,
    })
}

/// At most this many weak decisions (box ratio ≤ 4) are re-weighed by the
/// adjoint method, the weakest first (one tape sweep each).
pub const MAX_REFINED: usize = 4096;

/// The default tape budget of [`analyse_adjoint`]: 8M nodes (384 MB).
pub const DEFAULT_TAPE_NODES: usize = 8_000_000;

/// Bound `func` of `m` at `inputs` under `M` by the adjoint method (module
/// doc of `adjoint`): per element the smaller of the first-order composite
/// bound and the box bound; decisions the box weighs at a ratio ≤ 4 are
/// re-weighed by the adjoint bound of their operands' difference (each
/// under the premise that the earlier routing decisions hold, so by
/// induction along the evaluation all of them). Where the tape would exceed
/// `max_nodes` the report is the box method's, with a `note`.
pub fn analyse_adjoint<M: Model>(
    m: &Module,
    func: &str,
    inputs: &[Value<f64>],
    names: &[String],
    max_nodes: usize,
) -> Result<BoundReport, String> {
    let t0 = Instant::now();
    let vals = lift(inputs, adjoint::Adj::<M>::exact)?;
    let _ = scalar::take_unsupported();
    adjoint::start(max_nodes);
    let _ = adjoint::take_weak();
    let ev = eval_func::<adjoint::Adj<M>>(m, func, vals, &margin_opts());
    let tape = adjoint::take();
    let weak = adjoint::take_weak();
    let ev = ev.map_err(|e| e.to_string())?;
    let unsupported = scalar::take_unsupported();
    let mut scratch = tape.as_ref().map(|t| t.scratch());
    let outputs = ev
        .outputs
        .into_iter()
        .enumerate()
        .filter_map(|(i, v)| {
            let t = v.into_float()?;
            let boxed: Vec<f64> = t.data.iter().map(|a| sane_err(a.b.e)).collect();
            let err = match (&tape, scratch.as_mut()) {
                (Some(tape), Some(s)) => t
                    .data
                    .iter()
                    .map(|a| sane_err(tape.bound(a.id, s)).min(sane_err(a.b.e)))
                    .collect(),
                _ => boxed.clone(),
            };
            Some(TensorBound {
                name: name(names, i),
                shape: t.shape.clone(),
                exact: t.data.iter().map(|a| sane_iv(a.b.iv)).collect(),
                box_norm: norm_up(&boxed),
                err,
            })
        })
        .collect();
    let mut decisions = sites(&ev.margins);
    let mut refined = 0;
    if let (Some(tape), Some(s)) = (&tape, scratch.as_mut()) {
        if !weak.is_empty() {
            // Re-weigh the weakest decisions by the adjoint bound of their
            // operands' difference, then replay the (deterministic) box
            // evaluation with those ratios so each op's record takes them.
            let mut order: Vec<usize> = (0..weak.len()).collect();
            order.sort_by(|&i, &j| weak[i].ratio.total_cmp(&weak[j].ratio));
            let mut ratios = vec![0.0; weak.len()];
            for &i in order.iter().take(MAX_REFINED) {
                let w = weak[i];
                let e = tape.bound_of(&[(w.a, 1.0), (w.b, -1.0)], s);
                ratios[i] = if e == 0.0 {
                    f64::INFINITY
                } else {
                    interval::down(w.margin / e)
                };
                refined += 1;
            }
            let vals = lift(inputs, Bnd::<M>::exact)?;
            scalar::set_refined(Some(ratios.into()));
            let replay = eval_func::<Bnd<M>>(m, func, vals, &margin_opts());
            scalar::set_refined(None);
            decisions = sites(&replay.map_err(|e| e.to_string())?.margins);
        }
    }
    let (method, note) = match &tape {
        Some(_) => (
            "adjoint",
            (weak.len() > refined).then(|| {
                format!(
                    "{} of {} weak decisions re-weighed by the adjoint (the rest keep the box ratio)",
                    refined,
                    weak.len()
                )
            }),
        ),
        None => (
            "box",
            Some(format!(
                "the adjoint tape would exceed {max_nodes} nodes: box bounds reported"
            )),
        ),
    };
    Ok(BoundReport {
        func: func.to_string(),
        model: M::NAME,
        outputs,
        decisions,
        unsupported,
        seconds: t0.elapsed().as_secs_f64(),
        method,
        tape_nodes: tape.as_ref().map(|t| t.len()),
        note,
    })
}

/// A NaN error bound (∞ − ∞, 0·∞ downstream of a vacuous op) bounds
/// nothing: ∞ (`f64::max` and `min` would otherwise drop it as 0).
fn sane_err(e: f64) -> f64 {
    if e.is_nan() {
        f64::INFINITY
    } else {
        e
    }
}

/// A NaN enclosure encloses nothing known: the whole line.
fn sane_iv(iv: Iv) -> Iv {
    if iv.has_nan() {
        Iv::ALL
    } else {
        iv
    }
}

/// ‖x‖₂ rounded up.
fn norm_up(x: &[f64]) -> f64 {
    interval::up(x.iter().map(|e| e * e).sum::<f64>().sqrt() * (1.0 + 1e-12))
}

/// The float outputs of `func` at `inputs` as f64 data: in f64 (the
/// real-number proxy) or in f32 on the generic evaluator (its summation
/// order: sequential, f32 partial sums).
pub fn evaluate_f64(
    m: &Module,
    func: &str,
    inputs: &[Value<f64>],
) -> Result<Vec<Vec<f64>>, String> {
    let opts = EvalOptions {
        fast: false,
        ..Default::default()
    };
    let ev = eval_func::<f64>(m, func, inputs.to_vec(), &opts).map_err(|e| e.to_string())?;
    Ok(ev
        .outputs
        .into_iter()
        .filter_map(|v| v.into_float().map(|t| t.data))
        .collect())
}

/// `func` evaluated in f32 by the generic evaluator (no fast kernels).
pub fn evaluate_f32(
    m: &Module,
    func: &str,
    inputs: &[Value<f64>],
) -> Result<Vec<Vec<f64>>, String> {
    let opts = EvalOptions {
        fast: false,
        ..Default::default()
    };
    let ev = eval_func::<f32>(m, func, to_f32_values(inputs), &opts).map_err(|e| e.to_string())?;
    Ok(ev
        .outputs
        .into_iter()
        .filter_map(|v| {
            v.into_float()
                .map(|t| t.data.iter().map(|&x| x as f64).collect())
        })
        .collect())
}

/// The inputs as f32 values (they are f32 values already).
pub fn to_f32_values(inputs: &[Value<f64>]) -> Vec<Value<f32>> {
    inputs
        .iter()
        .map(|v| match v {
            Value::Float(t, e) => Value::Float(
                Tensor::new(t.shape.clone(), t.data.iter().map(|&x| x as f32).collect()),
                *e,
            ),
            Value::Int(t, e) => Value::Int(t.clone(), *e),
        })
        .collect()
}

/// max |a − b| over two equal-length slices.
pub fn max_abs_diff(a: &[f64], b: &[f64]) -> f64 {
    a.iter()
        .zip(b)
        .map(|(x, y)| (x - y).abs())
        .fold(0.0, f64::max)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn one(lo: f64, hi: f64, e: f64) -> TensorBound {
        TensorBound {
            name: "t".into(),
            shape: vec![1],
            exact: vec![Iv { lo, hi }],
            err: vec![e],
            box_norm: e,
        }
    }

    #[test]
    fn zero_valued_needs_zero_enclosed_within_a_finite_bound() {
        // An exact 0 enclosed to f64 noise, with an f32-sized bound.
        assert!(one(-1e-15, 2e-15, 1e-6).zero_valued());
        // A wide enclosure holding 0 but beyond the bound: vacuous, not zero.
        assert!(!one(-1.0, 1.0, 0.5).zero_valued());
        // A value enclosed away from 0.
        assert!(!one(1e-7, 2e-7, 1e-6).zero_valued());
        // No finite bound.
        assert!(!one(0.0, 0.0, f64::INFINITY).zero_valued());
        // A NaN bound is no bound (reported as ∞, not dropped as 0).
        assert_eq!(sane_err(f64::NAN), f64::INFINITY);
        assert_eq!(
            sane_iv(Iv {
                lo: f64::NAN,
                hi: 1.0
            }),
            Iv::ALL
        );
    }
}
