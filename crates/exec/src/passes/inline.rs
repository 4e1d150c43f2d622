//! Calls inlined everywhere, region bodies included: JAX's `lax.scan` and
//! `fori_loop` bodies call `@closed_call`, `@dynamic_index_in_dim`, … from
//! inside the `while` body, where `ir::passes::inline_calls` leaves them (it
//! flattens the top level only). Inlined, a loop body is one schedule the
//! builder can fuse. Ids of inlined bodies are fresh (above every id of the
//! function); the function is not renumbered, so the ids its regions capture
//! stay valid.

use ir::{Block, Func, Module, Op, OpKind, ValueId};
use std::collections::HashMap;

/// Calls nested deeper than this (recursion) leave the function as it is.
const MAX_DEPTH: usize = 64;

/// `f` with every call, at any depth of regions and callees, replaced by the
/// callee's body; `None` when a callee is missing or the calls recurse.
pub(crate) fn inline_all_calls(module: &Module, f: &Func) -> Option<Func> {
    let mut next = 0u32;
    max_id(&f.body, &mut next);
    for p in &f.params {
        next = next.max(p.value.0 + 1);
    }
    let mut out = f.clone();
    out.body = expand(module, &f.body, &mut next, 0)?;
    Some(out)
}

fn max_id(b: &Block, m: &mut u32) {
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
