//! The static schedule of a function body's memory: which values die after
//! which op, which ops may consume a dying operand in place, and which
//! results may be left as views for their one reader; with the block walks
//! the interpreter sizes and indexes by (a block's value-id span, the ops in
//! an op's regions).

use ir::{Block, Op, OpKind};

/// Number of ops in an op's regions, recursively (for pre-order indices).
pub(super) fn region_op_count(op: &Op) -> usize {
    op.regions
        .iter()
        .flat_map(|b| &b.ops)
        .map(|o| 1 + region_op_count(o))
        .sum()
}

pub(super) fn max_value_id(b: &Block) -> usize {
    let mut m = b.args.iter().map(|(v, _)| v.index() + 1).max().unwrap_or(0);
    for op in &b.ops {
        for (v, _) in &op.results {
            m = m.max(v.index() + 1);
        }
        for r in &op.regions {
            m = m.max(max_value_id(r));
        }
    }
    m
}

/// The values `op` reads, its regions' ops included.
fn operands_deep(op: &Op, out: &mut Vec<ir::ValueId>) {
    out.extend(&op.operands);
    for r in &op.regions {
        for o in &r.ops {
            operands_deep(o, out);
        }
    }
}

/// For each op of `block`, the values (env indices) read for the last time
/// by it or its regions, or defined by it and never read. Values a region
/// reads from the enclosing block count as read by the op holding the region.
pub(super) fn drop_schedule(block: &Block) -> Vec<Vec<usize>> {
    let n = max_value_id(block);
    let mut last: Vec<Option<usize>> = vec![None; n];
    let mut reads = Vec::new();
    for (k, op) in block.ops.iter().enumerate() {
        reads.clear();
        operands_deep(op, &mut reads);
        for v in &reads {
            if let Some(l) = last.get_mut(v.index()) {
                *l = Some(k);
            }
        }
        for (v, _) in &op.results {
            last[v.index()].get_or_insert(k);
        }
    }
    let mut drops = vec![Vec::new(); block.ops.len()];
    for (v, l) in last.into_iter().enumerate() {
        if let Some(k) = l {
            drops[k].push(v);
        }
    }
    drops
}

/// Bit `p` set for each operand position `p` (below 8) of `op` whose value
/// dies at `op` (`dying`: its entry of the drop schedule) and is read once
/// by it: an elementwise op may write its result over that value's buffer.
pub(super) fn consumable(op: &Op, dying: &[usize]) -> u8 {
    if !op.regions.is_empty() {
        return 0;
    }
    let mut mask = 0u8;
    for (p, v) in op.operands.iter().enumerate().take(8) {
        let once = op.operands.iter().filter(|w| *w == v).count() == 1;
        if once && dying.contains(&v.index()) {
            mask |= 1 << p;
        }
    }
    mask
}

/// For each op of a function body (`drops`: its drop schedule), whether its
/// result is left as a [`View`](super::View): a broadcast_in_dim or a splat constant of a
/// float type that a binary op reads once (and nothing else reads), whose
/// other operand dies at that op and is no such value itself.
pub(super) fn view_schedule(block: &Block, drops: &[Vec<usize>]) -> Vec<bool> {
    let n = max_value_id(block);
    let (mut count, mut reader, mut def) = (vec![0usize; n], vec![0usize; n], vec![None; n]);
    let mut reads = Vec::new();
    for (k, op) in block.ops.iter().enumerate() {
        reads.clear();
        operands_deep(op, &mut reads);
        for v in &reads {
            if let (Some(c), Some(r)) = (count.get_mut(v.index()), reader.get_mut(v.index())) {
                *c += 1;
                *r = k;
            }
        }
        for (v, _) in &op.results {
            def[v.index()] = Some(k);
        }
    }
    let candidate = |op: &Op| -> Option<(ir::ValueId, usize)> {
        let viewable = match &op.kind {
            OpKind::BroadcastInDim { .. } => true,
            OpKind::Constant(d) => d.len() == 1,
            _ => false,
        };
        let [(v, ty)] = op.results.as_slice() else {
            return None;
        };
        if !viewable || !ty.elem.is_float() || count[v.index()] != 1 {
            return None;
        }
        let j = reader[v.index()];
        let user = &block.ops[j];
        let two = user.operands.len() == 2 && user.regions.is_empty();
        if !matches!(user.kind, OpKind::Binary(_)) || !two {
            return None;
        }
        let other = user.operands[usize::from(user.operands[0] == *v)];
        (other != *v && drops[j].contains(&other.index())).then_some((other, j))
    };
    let first: Vec<Option<(ir::ValueId, usize)>> = block.ops.iter().map(candidate).collect();
    first
        .iter()
        .map(|c| c.is_some_and(|(other, _)| def[other.index()].is_none_or(|d| first[d].is_none())))
        .collect()
}
