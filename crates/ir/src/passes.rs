//! Whole-function IR passes: dead-op pruning, call inlining, bf16 operands
//! for convolution and dot_general, canonical renumbering, and the normalised
//! (renaming-free) text of an op range that compares two emissions of the
//! same computation.

use crate::{Block, ElemType, Func, Module, Op, OpKind, SrcLoc, TensorType, ValueId};
use std::collections::{HashMap, HashSet};

/// Index of the body op that defines `v`.
pub fn defining_op(func: &Func, v: ValueId) -> Option<usize> {
    func.body
        .ops
        .iter()
        .position(|op| op.results.iter().any(|(r, _)| *r == v))
}

/// Every value an op (or an op in its regions) reads.
fn collect_uses(op: &Op, used: &mut HashSet<ValueId>) {
    used.extend(op.operands.iter().copied());
    for r in &op.regions {
        for o in &r.ops {
            collect_uses(o, used);
        }
    }
}

/// Drop top-level ops no result of which is read (a train step's backward
/// also computes the cotangents of the images and of the one-hot target,
/// which the step does not return). Sound because every op certgrad emits is
/// pure.
pub fn prune_dead_ops(func: &mut Func) {
    let mut used = HashSet::new();
    let mut keep = vec![false; func.body.ops.len()];
    for (i, op) in func.body.ops.iter().enumerate().rev() {
        let live = matches!(op.kind, OpKind::FuncReturn | OpKind::Return)
            || op.results.iter().any(|(r, _)| used.contains(r));
        if live {
            keep[i] = true;
            collect_uses(op, &mut used);
        }
    }
    let mut k = keep.into_iter();
    func.body.ops.retain(|_| k.next().unwrap_or(true));
}

/// The bf16 switch: each f32 convolution (ungrouped — depthwise stays f32,
/// docs/conventions.md §19) and dot_general reads bf16 copies of its operands and keeps
/// its f32 result type, so it accumulates in f32. One convert per converted
/// value, placed before its first use.
pub fn bf16_operands(func: &mut Func) {
    let mut next = func.num_values() as u32 + 1_000_000;
    let mut converted: HashMap<ValueId, ValueId> = HashMap::new();
    let types = value_types_any(func);
    let ops = std::mem::take(&mut func.body.ops);
    let mut out = Vec::with_capacity(ops.len());
    for mut op in ops {
        let eligible = match &op.kind {
            OpKind::Convolution(a) => a.feature_group_count == 1 && a.batch_group_count == 1,
            OpKind::DotGeneral { .. } => true,
            _ => false,
        };
        if eligible {
            for x in op.operands.iter_mut() {
                let ty = &types[x];
                if ty.elem != ElemType::F32 {
                    continue;
                }
                let c = *converted.entry(*x).or_insert_with(|| {
                    let id = ValueId(next);
                    next += 1;
                    out.push(Op {
                        kind: OpKind::Convert,
                        operands: vec![*x],
                        results: vec![(id, ty.with_elem(ElemType::BF16))],
                        regions: Vec::new(),
                        extra_attrs: Vec::new(),
                        loc: SrcLoc::default(),
                    });
                    id
                });
                *x = c;
            }
        }
        out.push(op);
    }
    func.body.ops = out;
}

/// Types of every value by id, for ids that need not be canonical.
fn value_types_any(func: &Func) -> HashMap<ValueId, TensorType> {
    let mut out = HashMap::new();
    fn fill(b: &Block, out: &mut HashMap<ValueId, TensorType>) {
        for (v, t) in &b.args {
            out.insert(*v, t.clone());
        }
        for op in &b.ops {
            for r in &op.regions {
                fill(r, out);
            }
            for (v, t) in &op.results {
                out.insert(*v, t.clone());
            }
        }
    }
    fill(&func.body, &mut out);
    out
}

/// `func` with every `func.call` replaced by the callee's body
/// ([`inline_all_calls`]), renumbered into canonical order, so analyses that
/// look at one function see every op (JAX puts `clip`, `relu`, `_where` in
/// private helpers). `None` when a callee is missing or the calls recurse.
pub fn inline_calls(module: &Module, func: &Func) -> Option<Func> {
    let mut f = inline_all_calls(module, func)?;
    renumber(&mut f);
    Some(f)
}

/// Calls nested deeper than this (recursion) leave the function as it is.
const MAX_DEPTH: usize = 64;

/// `f` with every call, at any depth of regions and callees, replaced by the
/// callee's body; `None` when a callee is missing, its arity disagrees or the
/// calls recurse. JAX's `lax.scan` and `fori_loop` bodies call
/// `@closed_call`, `@dynamic_index_in_dim`, … from inside the `while` body:
/// inlined, a loop body is one schedule. Ids of inlined bodies are fresh
/// (above every id of the function) and the function is not renumbered, so
/// the ids its regions capture stay valid ([`inline_calls`] renumbers).
pub fn inline_all_calls(module: &Module, f: &Func) -> Option<Func> {
    let mut next = 0u32;
    max_id(&f.body, &mut next);
    for p in &f.params {
        next = next.max(p.value.0 + 1);
    }
    let mut out = f.clone();
    out.body = expand(module, &f.body, &mut next, 0)?;
    Some(out)
}

/// Raise `m` to one past the largest value id in `b` (regions included):
/// `m` is then an id no value of the block uses.
pub fn max_id(b: &Block, m: &mut u32) {
    for (v, _) in &b.args {
        *m = (*m).max(v.0 + 1);
    }
    for op in &b.ops {
        for r in &op.regions {
            max_id(r, m);
        }
        for (v, _) in &op.results {
            *m = (*m).max(v.0 + 1);
        }
    }
}

/// Uses in `op` and its regions redirected through `replaced`.
fn substitute(op: &mut Op, replaced: &HashMap<ValueId, ValueId>) {
    for v in &mut op.operands {
        if let Some(r) = replaced.get(v) {
            *v = *r;
        }
    }
    for r in &mut op.regions {
        for o in &mut r.ops {
            substitute(o, replaced);
        }
    }
}

/// `b` with ids through `map`, fresh ids for those not in it.
fn remap(b: &Block, map: &mut HashMap<ValueId, ValueId>, next: &mut u32) -> Block {
    fn fresh(v: ValueId, map: &mut HashMap<ValueId, ValueId>, next: &mut u32) -> ValueId {
        *map.entry(v).or_insert_with(|| {
            *next += 1;
            ValueId(*next - 1)
        })
    }
    let args = b
        .args
        .iter()
        .map(|(v, t)| (fresh(*v, map, next), t.clone()))
        .collect();
    let mut ops = Vec::with_capacity(b.ops.len());
    for op in &b.ops {
        let mut o = op.clone();
        o.operands = op.operands.iter().map(|v| fresh(*v, map, next)).collect();
        o.regions = op.regions.iter().map(|r| remap(r, map, next)).collect();
        o.results = op
            .results
            .iter()
            .map(|(v, t)| (fresh(*v, map, next), t.clone()))
            .collect();
        ops.push(o);
    }
    Block { args, ops }
}

/// `b` with its calls (and those of its regions) expanded.
fn expand(module: &Module, b: &Block, next: &mut u32, depth: usize) -> Option<Block> {
    if depth > MAX_DEPTH {
        return None;
    }
    // Call results → the values the inlined body returned.
    let mut replaced: HashMap<ValueId, ValueId> = HashMap::new();
    let mut ops = Vec::with_capacity(b.ops.len());
    for op in &b.ops {
        let mut o = op.clone();
        substitute(&mut o, &replaced);
        o.regions = o
            .regions
            .iter()
            .map(|r| expand(module, r, next, depth))
            .collect::<Option<_>>()?;
        let OpKind::Call { callee } = &o.kind else {
            ops.push(o);
            continue;
        };
        let f = module.func(callee)?;
        if f.params.len() != o.operands.len() {
            return None;
        }
        let mut map: HashMap<ValueId, ValueId> = f
            .params
            .iter()
            .zip(&o.operands)
            .map(|(p, a)| (p.value, *a))
            .collect();
        let body = expand(module, &remap(&f.body, &mut map, next), next, depth + 1)?;
        let (ret, inner) = body.ops.split_last()?;
        if ret.operands.len() != o.results.len() {
            return None;
        }
        ops.extend(inner.iter().cloned());
        for ((r, _), v) in o.results.iter().zip(&ret.operands) {
            replaced.insert(*r, *v);
        }
    }
    Some(Block {
        args: b.args.clone(),
        ops,
    })
}

/// Renumber into canonical order; returns old id → new id (the same walk as
/// `Func::canonicalize`, which is then applied).
pub fn renumber(func: &mut Func) -> HashMap<ValueId, ValueId> {
    fn walk(b: &Block, map: &mut HashMap<ValueId, ValueId>, next: &mut u32) {
        for (v, _) in &b.args {
            map.insert(*v, ValueId(*next));
            *next += 1;
        }
        for op in &b.ops {
            for r in &op.regions {
                walk(r, map, next);
            }
            for (v, _) in &op.results {
                map.insert(*v, ValueId(*next));
                *next += 1;
            }
        }
    }
    let mut map = HashMap::new();
    walk(&func.body, &mut map, &mut 0);
    func.canonicalize();
    map
}

/// The ops of `range` in `func`, each printed with its operands renamed: a
/// value defined inside the range by its position (`%o3#0`), a value in
/// `roles` by its role (`%in`, `%p1`), anything else as `%outside`. Two ranges
/// with equal normalised text compute the same function of their roles.
pub fn normalized_ops(
    func: &Func,
    range: (usize, usize),
    roles: &HashMap<ValueId, String>,
) -> Vec<String> {
    let mut local: HashMap<ValueId, String> = HashMap::new();
    let mut out = Vec::new();
    for (k, op) in func.body.ops[range.0..range.1].iter().enumerate() {
        out.push(normalize_op(op, &format!("o{k}"), roles, &mut local));
    }
    out
}

fn normalize_op(
    op: &Op,
    tag: &str,
    roles: &HashMap<ValueId, String>,
    local: &mut HashMap<ValueId, String>,
) -> String {
    let name = |v: &ValueId, local: &HashMap<ValueId, String>| {
        local
            .get(v)
            .or_else(|| roles.get(v))
            .cloned()
            .unwrap_or_else(|| "%outside".into())
    };
    let operands: Vec<String> = op.operands.iter().map(|v| name(v, local)).collect();
    let mut regions = Vec::new();
    for (ri, r) in op.regions.iter().enumerate() {
        let mut inner = local.clone();
        for (ai, (a, _)) in r.args.iter().enumerate() {
            inner.insert(*a, format!("%{tag}r{ri}a{ai}"));
        }
        let body: Vec<String> = r
            .ops
            .iter()
            .enumerate()
            .map(|(k, o)| normalize_op(o, &format!("{tag}r{ri}o{k}"), roles, &mut inner))
            .collect();
        regions.push(format!("{{{}}}", body.join("; ")));
    }
    let results: Vec<String> = op.results.iter().map(|(_, t)| t.to_string()).collect();
    for (i, (r, _)) in op.results.iter().enumerate() {
        local.insert(*r, format!("%{tag}#{i}"));
    }
    format!(
        "{:?}({}){} -> ({})",
        op.kind,
        operands.join(", "),
        regions.join(""),
        results.join(", ")
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{BinaryOp, FuncBuilder, Visibility};

    /// `f(a, b) = a + b`; with `dead`, an unread `(a·b)²` is built first.
    fn sum(dead: bool) -> Func {
        let mut fb = FuncBuilder::new("f", Visibility::Public);
        let ty = TensorType::f32(vec![2]);
        let a = fb.param(ty.clone());
        let b = fb.param(ty);
        if dead {
            let p = fb.binary(BinaryOp::Multiply, a, b).unwrap();
            fb.binary(BinaryOp::Multiply, p, p).unwrap();
        }
        let s = fb.binary(BinaryOp::Add, a, b).unwrap();
        fb.finish(&[s]).unwrap()
    }

    fn param_roles(f: &Func) -> HashMap<ValueId, String> {
        f.params
            .iter()
            .enumerate()
            .map(|(i, p)| (p.value, format!("%p{i}")))
            .collect()
    }

    #[test]
    fn pruning_then_renumbering_leaves_the_live_function() {
        let mut f = sum(true);
        prune_dead_ops(&mut f);
        assert_eq!(f.body.ops.len(), 2, "the add and the return");
        assert_eq!(defining_op(&f, ValueId(4)), Some(0));
        let map = renumber(&mut f);
        assert_eq!(map[&ValueId(4)], ValueId(2));
        assert_eq!(f, sum(false));
    }

    #[test]
    fn normalized_ops_ignore_numbering_but_not_roles() {
        let plain = sum(false);
        let mut pruned = sum(true);
        prune_dead_ops(&mut pruned);
        let norm = |f: &Func, roles: &HashMap<ValueId, String>| {
            normalized_ops(f, (0, f.body.ops.len()), roles)
        };
        let want = norm(&plain, &param_roles(&plain));
        assert_eq!(norm(&pruned, &param_roles(&pruned)), want);
        // Negative control: the same ops with the two inputs' roles swapped.
        let swapped: HashMap<ValueId, String> = param_roles(&plain)
            .into_iter()
            .map(|(v, r)| (ValueId(1 - v.0), r))
            .collect();
        assert_ne!(norm(&plain, &swapped), want);
    }
}
