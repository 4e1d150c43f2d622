//! `while`, `case` and `if`: each region becomes a sub-plan of its own (a
//! function over the region's arguments and the outer values it reads,
//! lowered by the same builder, so a loop body gets fused loops and kernels
//! like any function), run by one control step per op. An op with a region
//! the builder does not take runs on the generic evaluator instead.

use super::{defined_in, Builder, Def};
use crate::passes::cse;
use crate::rewrites::Rewrites;
use crate::schedule::{Kind, SubArg, SubPlan};
use ir::{Block, Func, FuncResult, Op, OpKind, Param, TensorType, ValueId, Visibility};

/// The values `b` reads (in its ops and their regions) that it does not
/// define, in order of first use.
pub(crate) fn free_values(b: &Block) -> Vec<ValueId> {
    let mut own = Vec::new();
    defined_in(b, &mut own);
    let mut out = Vec::new();
    fn walk(b: &Block, own: &[ValueId], out: &mut Vec<ValueId>) {
        for op in &b.ops {
            for v in &op.operands {
                if !own.contains(v) && !out.contains(v) {
                    out.push(*v);
                }
            }
            for r in &op.regions {
                walk(r, own, out);
            }
        }
    }
    walk(b, &own, &mut out);
    out
}

/// The outer values any region of `op` reads, in order of first use.
pub(crate) fn captured_by(op: &Op) -> Vec<ValueId> {
    let mut out: Vec<ValueId> = Vec::new();
    for r in &op.regions {
        for v in free_values(r) {
            if !out.contains(&v) {
                out.push(v);
            }
        }
    }
    out
}

impl Builder<'_> {
    /// Plans `while` / `case` / `if` as a control step over sub-plans;
    /// `Some(false)` when a region cannot be planned (the op then runs on
    /// the generic evaluator).
    pub(super) fn control(&mut self, op: &Op) -> Option<bool> {
        let captured = captured_by(op);
        let captured_tys: Vec<TensorType> = captured
            .iter()
            .map(|v| self.ty(*v).cloned())
            .collect::<Option<_>>()?;
        let mut subs = Vec::with_capacity(op.regions.len());
        for (k, r) in op.regions.iter().enumerate() {
            let results: Vec<TensorType> = match (&op.kind, k) {
                // The condition returns the i1 that decides.
                (OpKind::While, 0) => match r.ops.last() {
                    Some(ret) => ret
                        .operands
                        .iter()
                        .map(|v| region_type(r, *v))
                        .collect::<Option<_>>()?,
                    None => return Some(false),
                },
                _ => op.results.iter().map(|x| x.1.clone()).collect(),
            };
            match sub_plan(r, &captured, &captured_tys, results, self.rewrites) {
                Some(s) => subs.push(s),
                None => return Some(false),
            }
        }
        let mut reads = Vec::new();
        let operands: Vec<ValueId> = op.operands.clone();
        for &v in operands.iter().chain(&captured) {
            self.materialize(v)?;
            reads.push(self.root[v.index()]);
        }
        let (operand_slots, captured_slots) = reads.split_at(operands.len());
        let results: Vec<usize> = op.results.iter().map(|r| r.0.index()).collect();
        for &r in &results {
            self.defs[r] = Def::Mat;
        }
        let kind = match op.kind {
            OpKind::While => {
                let mut it = subs.into_iter();
                let (Some(cond), Some(body), None) = (it.next(), it.next(), it.next()) else {
                    return Some(false);
                };
                Kind::While {
                    cond: Box::new(cond),
                    body: Box::new(body),
                    state: operand_slots.to_vec(),
                    captured: captured_slots.to_vec(),
                    results,
                }
            }
            OpKind::Case | OpKind::If => {
                let [selector] = operand_slots else {
                    return Some(false);
                };
                if subs.is_empty() || (matches!(op.kind, OpKind::If) && subs.len() != 2) {
                    return Some(false);
                }
                Kind::Branch {
                    selector: *selector,
                    is_if: matches!(op.kind, OpKind::If),
                    branches: subs,
                    captured: captured_slots.to_vec(),
                    results,
                }
            }
            _ => return Some(false),
        };
        let label = format!("{}(sub-plans)", op.kind.name());
        self.push(op, label, 0, kind);
        Some(true)
    }
}

/// The type of `v` as defined in `r` (an argument or an op result).
fn region_type(r: &Block, v: ValueId) -> Option<TensorType> {
    if let Some((_, t)) = r.args.iter().find(|a| a.0 == v) {
        return Some(t.clone());
    }
    r.ops
        .iter()
        .flat_map(|op| &op.results)
        .find(|x| x.0 == v)
        .map(|x| x.1.clone())
}

/// `r` as a function of its arguments and the captured values it reads,
/// lowered; `None` when the builder does not take it.
fn sub_plan(
    r: &Block,
    captured: &[ValueId],
    captured_tys: &[TensorType],
    results: Vec<TensorType>,
    rewrites: Rewrites,
) -> Option<SubPlan> {
    let reads = free_values(r);
    let mut params: Vec<Param> = r
        .args
        .iter()
        .map(|(v, t)| Param {
            value: *v,
            ty: t.clone(),
            attrs: None,
        })
        .collect();
    let mut args: Vec<SubArg> = (0..r.args.len()).map(SubArg::State).collect();
    for (k, (v, t)) in captured.iter().zip(captured_tys).enumerate() {
        if reads.contains(v) {
            params.push(Param {
                value: *v,
                ty: t.clone(),
                attrs: None,
            });
            args.push(SubArg::Captured(k));
        }
    }
    let mut body = Block {
        args: params.iter().map(|p| (p.value, p.ty.clone())).collect(),
        ops: r.ops.clone(),
    };
    match body.ops.last_mut() {
        Some(ret) if matches!(ret.kind, OpKind::Return) => ret.kind = OpKind::FuncReturn,
        _ => return None,
    }
    let func = Func {
        name: "region".into(),
        visibility: Visibility::Private,
        params,
        results: results
            .into_iter()
            .map(|ty| FuncResult { ty, attrs: None })
            .collect(),
        body,
        attrs: None,
    };
    let func = cse::eliminate_common_subexpressions(&func, &rewrites);
    let plan = Builder::new(&func, rewrites)?.build()?;
    for (a, p) in args.iter_mut().zip(&plan.params) {
        if plan.unused_inputs.contains(p) {
            *a = SubArg::Unused;
        }
    }
    Some(SubPlan { plan, args })
}
