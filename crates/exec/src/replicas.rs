//! Data-parallel execution on compiled plans: [`ReplicaPlan`] runs one
//! function as R replicas whose `all_reduce`s meet in the host. The function
//! is cut at its collectives into stages (stage k holds the ops that come
//! after k rounds of all_reduce), each stage compiled once into a [`Plan`];
//! a call runs stage k for every replica, folds each all_reduce's operands
//! over the replicas, hands every replica the same result, and goes on.
//!
//! It computes what `den::eval_replicas::<f32>` computes: the fold is the one
//! the replica evaluator does (the group's members in group order, f32 adds),
//! so every replica receives the same bits, and inside a stage the plan
//! computes what `eval_func` does (the plan's agreement bound).
//!
//! The replicas run one after another over one plan per stage: the plan's
//! kernels already use every core, and one plan keeps one buffer pool. An op
//! is placed in the latest stage that can hold it (before the collective
//! that reads it, or with its first reader), so the optimizer tail after the
//! collectives fuses with nothing it was separated from; constants and iotas
//! are copied into every stage that reads them instead of being carried.
//!
//! What it does not take (a collective inside a region, a reducer other than
//! add, replica groups that are not one group of all replicas, non-f32
//! operands, calls that cannot be inlined) is refused at compile time with
//! the reason, and the caller runs the replica evaluator instead.

use crate::passes::inline_all_calls;
use crate::plan::Plan;
use den::{EvalError, Value};
use ir::{Block, ElemType, Func, FuncResult, Module, Op, OpKind, Param, TensorType, ValueId};
use std::collections::{HashMap, HashSet};

/// Where a stage input comes from.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
enum Src {
    /// The function's argument k.
    Param(usize),
    /// A value an earlier stage or collective produced.
    Value(ValueId),
}

struct Stage {
    /// None for a stage without ops (its values only pass through).
    plan: Option<Plan>,
    inputs: Vec<Src>,
    /// The values the stage returns, in its return order.
    outputs: Vec<ValueId>,
}

/// One `all_reduce` (sum) between two stages.
struct Collective {
    operands: Vec<Src>,
    results: Vec<ValueId>,
    /// Replica ids in fold order.
    group: Vec<usize>,
}

/// A function compiled for R replicas (see the module docs).
pub struct ReplicaPlan {
    func: String,
    replicas: usize,
    params: Vec<TensorType>,
    stages: Vec<Stage>,
    /// `barriers[k]`: the collectives between stage k and stage k + 1.
    barriers: Vec<Vec<Collective>>,
    returns: Vec<Src>,
    /// Negative-control switch (feature `fault-injection`): each replica
    /// keeps its own operand instead of the fold.
    #[cfg(feature = "fault-injection")]
    no_fold: bool,
    /// The last reader of each source, as a position in the call's order:
    /// 2k for stage k, 2k + 1 for the collectives after it, 2·stages for
    /// the return.
    last_use: HashMap<Src, usize>,
}

/// Outer values the regions of `op` read.
fn captured(op: &Op) -> Vec<ValueId> {
    fn walk(b: &Block, defined: &mut HashSet<ValueId>, out: &mut Vec<ValueId>) {
        defined.extend(b.args.iter().map(|a| a.0));
        for op in &b.ops {
            for v in &op.operands {
                if !defined.contains(v) && !out.contains(v) {
                    out.push(*v);
                }
            }
            for r in &op.regions {
                walk(r, defined, out);
            }
            defined.extend(op.results.iter().map(|r| r.0));
        }
    }
    let mut out = Vec::new();
    for r in &op.regions {
        walk(r, &mut HashSet::new(), &mut out);
    }
    out
}

fn has_collective(b: &Block) -> bool {
    b.ops.iter().any(|op| {
        matches!(op.kind, OpKind::AllReduce { .. }) || op.regions.iter().any(has_collective)
    })
}

/// The values `op` reads: operands, then captured outer values.
fn reads(op: &Op) -> Vec<ValueId> {
    let mut v = op.operands.clone();
    v.extend(captured(op));
    v
}

impl ReplicaPlan {
    /// Compiles `func` of `module` for `replicas` replicas; the error says
    /// why a function is not taken (the replica evaluator runs it then).
    pub fn compile(module: &Module, func: &str, replicas: usize) -> Result<ReplicaPlan, String> {
        let f = module
            .func(func)
            .ok_or_else(|| format!("no function @{func} in the module"))?;
        den::eval::check_sizes::<f32>(module).map_err(|e| e.to_string())?;
        let mut f = inline_all_calls(module, f).ok_or("calls that cannot be inlined")?;
        f.canonicalize();
        let ops = &f.body.ops;
        let ret = ops
            .last()
            .filter(|op| op.kind == OpKind::FuncReturn)
            .ok_or("a body without a return")?;
        let body = &ops[..ops.len() - 1];
        let types = f.value_types();
        for op in body {
            if matches!(op.kind, OpKind::Call { .. }) {
                return Err("a call that was not inlined".into());
            }
            if op.regions.iter().any(has_collective) {
                return Err(format!("{} with an all_reduce inside", op.kind.name()));
            }
        }

        // Rounds of all_reduce before each value (ASAP): a collective's
        // results come one round after its operands.
        let mut round: HashMap<ValueId, usize> = HashMap::new();
        for op in body {
            let r = reads(op)
                .iter()
                .map(|v| round.get(v).copied().unwrap_or(0))
                .max()
                .unwrap_or(0);
            let r = r + matches!(op.kind, OpKind::AllReduce { .. }) as usize;
            for res in &op.results {
                round.insert(res.0, r);
            }
        }
        let n_stages = 1 + body
            .iter()
            .filter(|op| matches!(op.kind, OpKind::AllReduce { .. }))
            .map(|op| round[&op.results[0].0])
            .max()
            .unwrap_or(0);

        // ALAP placement, from the return backwards: an op goes to the
        // earliest stage among its readers' (a collective of round k reads
        // in stage k − 1, the return in the last stage). Zero-input ops are
        // copied into every reading stage.
        let last = n_stages - 1;
        let mut want: HashMap<ValueId, Vec<usize>> = HashMap::new();
        let need = |v: ValueId, s: usize, want: &mut HashMap<ValueId, Vec<usize>>| {
            let e = want.entry(v).or_default();
            if !e.contains(&s) {
                e.push(s);
            }
        };
        for &v in &ret.operands {
            need(v, last, &mut want);
        }
        let mut placed: Vec<Vec<usize>> = vec![Vec::new(); body.len()];
        for (i, op) in body.iter().enumerate().rev() {
            let readers: Vec<usize> = op
                .results
                .iter()
                .flat_map(|r| want.get(&r.0).cloned().unwrap_or_default())
                .collect();
            if readers.is_empty() {
                continue; // dead
            }
            let stages = match op.kind {
                OpKind::AllReduce { .. } => vec![round[&op.results[0].0] - 1],
                _ if reads(op).is_empty() => {
                    let mut s = readers.clone();
                    s.sort_unstable();
                    s.dedup();
                    s
                }
                _ => vec![*readers.iter().min().expect("a reader")],
            };
            for v in reads(op) {
                for &s in &stages {
                    need(v, s, &mut want);
                }
            }
            placed[i] = stages;
        }

        // Where every value is defined: a parameter, a stage, or a barrier.
        let param_at: HashMap<ValueId, usize> = f
            .params
            .iter()
            .enumerate()
            .map(|(k, p)| (p.value, k))
            .collect();
        let src = |v: ValueId| match param_at.get(&v) {
            Some(&k) => Src::Param(k),
            None => Src::Value(v),
        };

        // The collectives, by barrier.
        let mut barriers: Vec<Vec<Collective>> = (0..last).map(|_| Vec::new()).collect();
        for (i, op) in body.iter().enumerate() {
            let OpKind::AllReduce { replica_groups, .. } = &op.kind else {
                continue;
            };
            if placed[i].is_empty() {
                continue;
            }
            if op.regions.len() != 1 || op.regions[0].as_binary_reducer() != Some(ir::BinaryOp::Add)
            {
                return Err("an all_reduce whose reducer is not add".into());
            }
            let group: Vec<usize> = match replica_groups.as_slice() {
                [] => (0..replicas).collect(),
                [g] => g.iter().map(|&id| id as usize).collect(),
                _ => return Err("all_reduce over more than one replica group".into()),
            };
            let mut sorted = group.clone();
            sorted.sort_unstable();
            if sorted != (0..replicas).collect::<Vec<_>>() {
                return Err(format!(
                    "replica_groups {replica_groups:?} is not one group of the {replicas} replicas"
                ));
            }
            if op
                .results
                .iter()
                .any(|r| r.1.elem != ElemType::F32 || op.operands.len() != op.results.len())
            {
                return Err("an all_reduce of non-f32 values".into());
            }
            barriers[placed[i][0]].push(Collective {
                operands: op.operands.iter().map(|&v| src(v)).collect(),
                results: op.results.iter().map(|r| r.0).collect(),
                group,
            });
        }

        // The stages' functions.
        let mut stages = Vec::with_capacity(n_stages);
        let mut last_use: HashMap<Src, usize> = HashMap::new();
        for s in 0..n_stages {
            let mine: Vec<&Op> = body
                .iter()
                .zip(&placed)
                .filter(|(op, at)| at.contains(&s) && !matches!(op.kind, OpKind::AllReduce { .. }))
                .map(|(op, _)| op)
                .collect();
            let defined: HashSet<ValueId> = mine
                .iter()
                .flat_map(|op| op.results.iter().map(|r| r.0))
                .collect();
            let mut inputs: Vec<ValueId> = Vec::new();
            for op in &mine {
                for v in reads(op) {
                    if !defined.contains(&v) && !inputs.contains(&v) {
                        inputs.push(v);
                    }
                }
            }
            // What leaves the stage: values read later (by a later stage, a
            // collective of this barrier, or the return).
            let mut outputs: Vec<ValueId> = Vec::new();
            for op in &mine {
                // A copied constant is read from its own copy in every
                // stage; only a collective takes it from here.
                let copied = reads(op).is_empty();
                for r in &op.results {
                    let by_barrier = barriers
                        .get(s)
                        .is_some_and(|b| b.iter().any(|c| c.operands.contains(&Src::Value(r.0))));
                    let later = by_barrier
                        || (s == last && ret.operands.contains(&r.0))
                        || (!copied && want.get(&r.0).is_some_and(|w| w.iter().any(|&t| t > s)));
                    if later && !outputs.contains(&r.0) {
                        outputs.push(r.0);
                    }
                }
            }
            for &v in &inputs {
                last_use.insert(src(v), 2 * s);
            }
            let plan = if mine.is_empty() {
                None
            } else {
                let name = format!("stage{s}");
                let mut sf = Func {
                    name: name.clone(),
                    visibility: ir::Visibility::Public,
                    params: inputs
                        .iter()
                        .map(|&v| Param {
                            value: v,
                            ty: types[v.index()].clone(),
                            attrs: None,
                        })
                        .collect(),
                    results: outputs
                        .iter()
                        .map(|&v| FuncResult {
                            ty: types[v.index()].clone(),
                            attrs: None,
                        })
                        .collect(),
                    body: Block {
                        args: inputs
                            .iter()
                            .map(|&v| (v, types[v.index()].clone()))
                            .collect(),
                        ops: mine.iter().map(|op| (*op).clone()).collect(),
                    },
                    attrs: None,
                };
                sf.body.ops.push(Op {
                    kind: OpKind::FuncReturn,
                    operands: outputs.clone(),
                    results: vec![],
                    regions: vec![],
                    extra_attrs: vec![],
                    loc: ret.loc,
                });
                sf.canonicalize();
                let m = Module {
                    name: None,
                    attrs: None,
                    funcs: vec![sf],
                };
                Some(Plan::compile(&m, &name).map_err(|e| e.to_string())?)
            };
            stages.push(Stage {
                plan,
                inputs: inputs.iter().map(|&v| src(v)).collect(),
                outputs,
            });
        }
        for (k, b) in barriers.iter().enumerate() {
            for c in b {
                for &v in &c.operands {
                    let e = last_use.entry(v).or_insert(0);
                    *e = (*e).max(2 * k + 1);
                }
            }
        }
        let returns: Vec<Src> = ret.operands.iter().map(|&v| src(v)).collect();
        for &r in &returns {
            last_use.insert(r, 2 * n_stages);
        }
        Ok(ReplicaPlan {
            func: func.to_string(),
            replicas,
            params: f.params.iter().map(|p| p.ty.clone()).collect(),
            stages,
            barriers,
            returns,
            last_use,
            #[cfg(feature = "fault-injection")]
            no_fold: false,
        })
    }

    /// Stages and collectives, for a one-line description.
    pub fn summary(&self) -> String {
        let collectives: usize = self.barriers.iter().map(Vec::len).sum();
        format!(
            "{} stages around {collectives} all_reduce",
            self.stages.len()
        )
    }

    /// The plans of the stages (for their profiles and listings).
    pub fn stage_plans(&mut self) -> impl Iterator<Item = &mut Plan> {
        self.stages.iter_mut().filter_map(|s| s.plan.as_mut())
    }

    /// Negative-control hook for tests (cargo feature `fault-injection`):
    /// every all_reduce hands each replica its own operand (the one-replica
    /// identity), a shape-preserving bug an agreement check must catch.
    #[cfg(feature = "fault-injection")]
    pub fn skip_the_fold_for_tests(&mut self) {
        self.no_fold = true;
    }

    /// Runs the function as `inputs.len()` replicas (replica r on
    /// `inputs[r]`); the outputs of every replica, in replica order.
    pub fn run(&mut self, inputs: Vec<Vec<Value<f32>>>) -> Result<Vec<Vec<Value<f32>>>, EvalError> {
        let err = |message: String| EvalError {
            func: self.func.clone(),
            op: "func.func",
            line: None,
            message,
        };
        if inputs.len() != self.replicas {
            return Err(err(format!(
                "compiled for {} replicas, given the inputs of {}",
                self.replicas,
                inputs.len()
            )));
        }
        for (r, ins) in inputs.iter().enumerate() {
            if ins.len() != self.params.len() {
                return Err(err(format!(
                    "replica {r}: expected {} inputs, got {}",
                    self.params.len(),
                    ins.len()
                )));
            }
            for (i, (v, p)) in ins.iter().zip(&self.params).enumerate() {
                if v.ty() != *p {
                    return Err(err(format!(
                        "replica {r}: input {i} has type {}, the signature says {p}",
                        v.ty()
                    )));
                }
            }
        }
        let mut params: Vec<Vec<Option<Value<f32>>>> = inputs
            .into_iter()
            .map(|v| v.into_iter().map(Some).collect())
            .collect();
        let mut carried: Vec<HashMap<ValueId, Value<f32>>> =
            (0..self.replicas).map(|_| HashMap::new()).collect();
        for s in 0..self.stages.len() {
            for r in 0..self.replicas {
                let stage = &mut self.stages[s];
                let Some(plan) = stage.plan.as_mut() else {
                    continue;
                };
                let mut args = Vec::with_capacity(stage.inputs.len());
                for &src in &stage.inputs {
                    // A source read for the last time moves into the stage.
                    let last = self.last_use.get(&src).copied() == Some(2 * s);
                    args.push(
                        take(&mut params[r], &mut carried[r], src, last)
                            .ok_or_else(|| err(format!("stage {s}: input {src:?} is missing")))?,
                    );
                }
                let outs = plan.run(args)?;
                for (&v, o) in stage.outputs.iter().zip(outs) {
                    carried[r].insert(v, o);
                }
            }
            if let Some(barrier) = self.barriers.get(s) {
                for c in barrier {
                    #[cfg(feature = "fault-injection")]
                    if self.no_fold {
                        for (&v, &res) in c.operands.iter().zip(&c.results) {
                            for r in 0..self.replicas {
                                let own = fold(&carried, &params, &[r], v)
                                    .ok_or_else(|| err(format!("{v:?} is missing")))?;
                                carried[r].insert(res, own);
                            }
                        }
                        continue;
                    }
                    for (&v, &res) in c.operands.iter().zip(&c.results) {
                        let sum = fold(&carried, &params, &c.group, v)
                            .ok_or_else(|| err(format!("all_reduce operand {v:?} is missing")))?;
                        for map in carried.iter_mut() {
                            map.insert(res, sum.clone());
                        }
                    }
                }
                // Values read by nothing later leave the carry.
                for map in carried.iter_mut() {
                    map.retain(|v, _| {
                        !matches!(self.last_use.get(&Src::Value(*v)), Some(&u) if u <= 2 * s + 1)
                    });
                }
            }
        }
        let returns = self.returns.clone();
        (0..self.replicas)
            .map(|r| {
                returns
                    .iter()
                    .map(|&src| {
                        take(&mut params[r], &mut carried[r], src, false)
                            .ok_or_else(|| err(format!("result {src:?} is missing")))
                    })
                    .collect()
            })
            .collect()
    }
}

fn take(
    params: &mut [Option<Value<f32>>],
    carried: &mut HashMap<ValueId, Value<f32>>,
    src: Src,
    last: bool,
) -> Option<Value<f32>> {
    match (src, last) {
        (Src::Param(k), true) => params.get_mut(k)?.take(),
        (Src::Param(k), false) => params.get(k)?.clone(),
        (Src::Value(v), true) => carried.remove(&v),
        (Src::Value(v), false) => carried.get(&v).cloned(),
    }
}

/// The sum of source `v` over the replicas of `group`, folded in group
/// order (((x₀ + x₁) + x₂) …, in f32): the replica evaluator's fold.
fn fold(
    carried: &[HashMap<ValueId, Value<f32>>],
    params: &[Vec<Option<Value<f32>>>],
    group: &[usize],
    v: Src,
) -> Option<Value<f32>> {
    let get = |r: usize| match v {
        Src::Param(k) => params[r].get(k)?.as_ref(),
        Src::Value(id) => carried[r].get(&id),
    };
    let mut members = group.iter().map(|&r| get(r));
    let mut acc = members.next()??.clone();
    let Value::Float(acc_t, _) = &mut acc else {
        return None;
    };
    for m in members {
        let Value::Float(t, _) = m? else {
            return None;
        };
        if t.data.len() != acc_t.data.len() {
            return None;
        }
        add_into(&mut acc_t.data, &t.data);
    }
    Some(acc)
}

/// a += b elementwise (in parallel chunks for large tensors).
fn add_into(a: &mut [f32], b: &[f32]) {
    use rayon::prelude::*;
    const CHUNK: usize = 1 << 16;
    if a.len() >= 4 * CHUNK {
        a.par_chunks_mut(CHUNK)
            .zip(b.par_chunks(CHUNK))
            .for_each(|(x, y)| x.iter_mut().zip(y).for_each(|(p, q)| *p += *q));
    } else {
        a.iter_mut().zip(b).for_each(|(p, q)| *p += *q);
    }
}
