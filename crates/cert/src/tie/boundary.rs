//! Boundary points: for every constant threshold a decision of the forward or
//! the backward tests against (`compare`, `clamp`, `maximum`, `minimum` with a
//! splat-constant operand), points that put a forward decision's compared
//! quantity just above and just below it. Random points almost never land in
//! the band between a threshold and a slightly moved copy of it (a ReLU6
//! backward masking at 6.06 instead of 6), so these points are where such a
//! backward is refuted.
//!
//! A point is found by Newton's method along one random direction: the
//! forward, cut off at the compared quantity, evaluated over dual numbers
//! gives the element nearest the target and its directional derivative; the
//! point moves until that element sits at `t ± δ`.

use super::points::Point;
use super::Tie;
use den::{eval_func, Dual, EvalOptions, Tensor, Value};
use ir::rng::Rng;
use ir::{BinaryOp, Block, DenseData, Func, FuncResult, Module, Op, OpKind, ValueId};
use std::collections::HashMap;

/// The offset from the threshold, relative to max(1, |t|): well inside a 1 %
/// moved threshold, far above f64 rounding of the compared quantity.
const BOUNDARY_OFFSET: f64 = 1e-3;
const PROBE_FUNC: &str = "__certgrad_boundary_probe";

/// A forward value a decision compares, and a threshold to put it at.
#[derive(Clone, Debug, PartialEq)]
pub(super) struct BoundaryTarget {
    pub value: ValueId,
    pub threshold: f64,
}

/// The forward with its calls inlined (JAX keeps `clip`, `relu`, `_where` in
/// private helpers that take the thresholds as arguments), and the targets
/// in it.
pub(super) struct BoundaryPlan {
    forward: Func,
    pub targets: Vec<BoundaryTarget>,
}

/// The value of `v` when it is a splat constant (through broadcasts, reshapes
/// and converts), from the defining ops of one block.
fn splat(defs: &HashMap<ValueId, &Op>, v: ValueId) -> Option<f64> {
    let op = defs.get(&v)?;
    match &op.kind {
        OpKind::Constant(DenseData::Float(xs)) => {
            let first = *xs.first()?;
            xs.iter()
                .all(|x| x.to_bits() == first.to_bits())
                .then_some(first)
        }
        OpKind::Constant(DenseData::Int(_)) => None,
        OpKind::BroadcastInDim { .. } | OpKind::Reshape | OpKind::Convert => {
            splat(defs, *op.operands.first()?)
        }
        _ => None,
    }
}

/// (compared value, its constant thresholds) of every top-level decision op
/// of `block` with a splat-constant operand.
fn decisions(block: &Block) -> Vec<(ValueId, Vec<f64>)> {
    let defs: HashMap<ValueId, &Op> = block
        .ops
        .iter()
        .flat_map(|op| op.results.iter().map(move |(id, _)| (*id, op)))
        .collect();
    let mut out = Vec::new();
    for op in &block.ops {
        let pair = |a: ValueId, b: ValueId| match (splat(&defs, a), splat(&defs, b)) {
            (None, Some(t)) => Some((a, vec![t])),
            (Some(t), None) => Some((b, vec![t])),
            _ => None,
        };
        let found = match &op.kind {
            OpKind::Compare { .. } | OpKind::Binary(BinaryOp::Maximum | BinaryOp::Minimum) => {
                pair(op.operands[0], op.operands[1])
            }
            OpKind::Clamp => {
                let (lo, x, hi) = (op.operands[0], op.operands[1], op.operands[2]);
                let ts: Vec<f64> = [splat(&defs, lo), splat(&defs, hi)]
                    .into_iter()
                    .flatten()
                    .collect();
                (!ts.is_empty() && splat(&defs, x).is_none()).then_some((x, ts))
            }
            _ => None,
        };
        out.extend(found.filter(|(_, ts)| ts.iter().all(|t| t.is_finite())));
    }
    out
}

/// `f` cut off at `v`: the same body, returning `v` alone.
fn probe_func(f: &Func, v: ValueId, ty: ir::TensorType) -> Func {
    let mut probe = f.clone();
    probe.name = PROBE_FUNC.to_string();
    probe.visibility = ir::Visibility::Private;
    probe.results = vec![FuncResult { ty, attrs: None }];
    if let Some(ret) = probe.body.ops.last_mut() {
        ret.operands = vec![v];
    }
    probe
}

impl Tie<'_> {
    /// Every (forward decision, threshold) pair to probe: each site at its own
    /// constants, and at every constant of the backward's decisions that no
    /// forward decision uses (the moved threshold of a wrong mask).
    pub(super) fn boundary_plan(&self) -> Option<BoundaryPlan> {
        let forward = ir::passes::inline_calls(self.module, self.forward)?;
        let backward = ir::passes::inline_calls(self.module, self.module.func(self.backward)?)?;
        let fwd = decisions(&forward.body);
        let fwd_thresholds: Vec<f64> = fwd.iter().flat_map(|(_, ts)| ts.clone()).collect();
        let bwd_only: Vec<f64> = decisions(&backward.body)
            .into_iter()
            .flat_map(|(_, ts)| ts)
            .filter(|t| !fwd_thresholds.contains(t))
            .collect();
        let float_value = |v: ValueId| {
            forward
                .body
                .ops
                .iter()
                .flat_map(|op| op.results.iter())
                .find(|(id, _)| *id == v)
                .is_some_and(|(_, ty)| ty.elem.is_float())
                || self
                    .forward
                    .params
                    .iter()
                    .any(|p| p.value == v && p.ty.elem.is_float())
        };
        let mut out: Vec<BoundaryTarget> = Vec::new();
        for (value, own) in fwd.into_iter().filter(|(v, _)| float_value(*v)) {
            for threshold in own.into_iter().chain(bwd_only.iter().copied()) {
                let t = BoundaryTarget { value, threshold };
                if !out.contains(&t) {
                    out.push(t);
                }
            }
        }
        Some(BoundaryPlan {
            forward,
            targets: out,
        })
    }

    /// A point near `base` where one element of `target.value` equals
    /// `target.threshold + offset`, by Newton steps along a random direction of
    /// the scaled blocks; `None` when the quantity does not move that way or
    /// the steps do not converge.
    pub(super) fn boundary_point(
        &self,
        plan: &BoundaryPlan,
        base: &Point,
        rng: &mut Rng,
        target: &BoundaryTarget,
        above: bool,
        exact: bool,
    ) -> Option<Point> {
        let params: Vec<(ValueId, ir::TensorType)> = plan
            .forward
            .params
            .iter()
            .map(|p| (p.value, p.ty.clone()))
            .collect();
        let ty = plan
            .forward
            .body
            .ops
            .iter()
            .flat_map(|op| op.results.iter())
            .chain(params.iter())
            .find(|(id, _)| *id == target.value)
            .map(|(_, ty)| ty.clone())?;
        let mut module: Module = self.module.clone();
        module
            .funcs
            .push(probe_func(&plan.forward, target.value, ty));
        let delta = BOUNDARY_OFFSET * target.threshold.abs().max(1.0);
        let goal = target.threshold + if above { delta } else { -delta };
        let direction: Vec<Tensor<f64>> = self
            .blocks
            .iter()
            .map(|b| {
                let shape = super::points::shape_of(&b.ty);
                let n: usize = shape.iter().product();
                let data = (0..n)
                    .map(|_| if b.scaled { rng.normal() } else { 0.0 })
                    .collect();
                Tensor::new(shape, data)
            })
            .collect();
        let opts = EvalOptions {
            fast: false,
            record_margins: false,
            replicas: 1,
        };
        let mut blocks = base.blocks.clone();
        let mut element = None;
        for _ in 0..6 {
            let point: Vec<Value<f64>> = self.to_values(&blocks);
            let inputs = self.jvp_inputs(&point, &direction);
            let ev = eval_func::<Dual<f64>>(&module, PROBE_FUNC, inputs, &opts).ok()?;
            let q = ev.outputs.first()?.as_float()?.clone();
            let k = *element.get_or_insert_with(|| {
                (0..q.len())
                    .filter(|&i| q.data[i].tangent.abs() > 1e-12 && q.data[i].value.is_finite())
                    .min_by(|&i, &j| {
                        (q.data[i].value - goal)
                            .abs()
                            .total_cmp(&(q.data[j].value - goal).abs())
                    })
                    .unwrap_or(usize::MAX)
            });
            let Dual { value, tangent } = q.data.get(k)?.clone();
            if (value - goal).abs() <= 1e-3 * delta {
                let blocks = if exact {
                    blocks.iter().map(|t| t.map(|&x| dyadic(x, 20))).collect()
                } else {
                    blocks
                };
                return Some(Point { blocks });
            }
            if tangent.abs() <= 1e-12 || !tangent.is_finite() {
                return None;
            }
            let s = (goal - value) / tangent;
            for (b, d) in blocks.iter_mut().zip(&direction) {
                for (x, dx) in b.data.iter_mut().zip(&d.data) {
                    *x += s * dx;
                }
            }
        }
        None
    }
}

/// Round to a multiple of 2^-k (exact evidence needs dyadic points).
fn dyadic(x: f64, k: i32) -> f64 {
    let s = 2f64.powi(k);
    (x * s).round() / s
}
