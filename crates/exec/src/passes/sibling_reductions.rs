//! Adjacent add-reductions over the same positions as one pass over their
//! inputs.

use super::deduped_reduction;
use crate::rewrites::{Planted, Rewrites};
use crate::schedule::{Kind, ReduceOut, Step};

/// Adjacent add-reductions over the same positions into the same shape,
/// where the later does not read what the earlier writes, become one step:
/// their programs side by side over the union of their inputs, each value
/// summed as before (bit-identical), the inputs read once. The batch-BN
/// backward takes Σdy and Σdy·x̂, then Σγdy and Σx̂·γdy, back to back.
pub(crate) fn merge_sibling_reductions(steps: Vec<Step>, on: &Rewrites) -> Vec<Step> {
    let swapped = on.plants(Planted::SiblingSumsSwapped);
    let mut out: Vec<Step> = Vec::with_capacity(steps.len());
    for step in steps {
        if let Some(prev) = out.last_mut() {
            if let Some(merged) = merge_reductions(prev, &step, swapped) {
                prev.kind = merged;
                prev.flops += step.flops;
                continue;
            }
        }
        out.push(step);
    }
    out
}

/// The two reductions as one, when they can share a pass (`swapped`: a
/// planted bug, each sum returned in the other's slot).
fn merge_reductions(a: &Step, b: &Step, swapped: bool) -> Option<Kind> {
    let (
        Kind::Reduce {
            prog: pa,
            inputs: ia,
            outs: oa,
            len: la,
            map: ma,
            out_len: na,
            stores: sa,
            ..
        },
        Kind::Reduce {
            prog: pb,
            inputs: ib,
            outs: ob,
            len: lb,
            map: mb,
            out_len: nb,
            stores: sb,
            ..
        },
    ) = (&a.kind, &b.kind)
    else {
        return None;
    };
    let written = a.kind.writes();
    if la != lb
        || na != nb
        || ma != mb
        || pa.fault != 0.0
        || pb.fault != 0.0
        || b.kind.reads().iter().any(|r| written.contains(r))
    {
        return None;
    }
    let mut inputs = ia.clone();
    let remap: Vec<usize> = ib
        .iter()
        .map(|s| match inputs.iter().position(|t| t == s) {
            Some(k) => k,
            None => {
                inputs.push(*s);
                inputs.len() - 1
            }
        })
        .collect();
    let shift = pa.nodes.len();
    let mut nodes = pa.nodes.clone();
    nodes.extend(pb.nodes.iter().map(|n| n.shifted(shift, &remap)));
    let mut outs = oa.clone();
    outs.extend(ob.iter().map(|o| ReduceOut {
        node: o.node + shift,
        ..*o
    }));
    if swapped {
        let (first, second) = (outs[0].slot, outs[oa.len()].slot);
        outs[0].slot = second;
        outs[oa.len()].slot = first;
    }
    // What both recompute (batch norm's x̂ and ReLU mask) is computed once.
    let mut stores = sa.clone();
    stores.extend(sb.iter().map(|&(slot, node)| (slot, node + shift)));
    Some(deduped_reduction(
        &nodes,
        inputs,
        outs,
        stores,
        (*la, ma, *na),
    ))
}
