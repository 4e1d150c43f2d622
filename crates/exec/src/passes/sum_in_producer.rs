//! An add-reduction of a loop's result summed by that loop: the loop stores
//! its value and sums it in the same pass, instead of a later pass reading
//! the whole result back.

use super::deduped_reduction;
use crate::fused::Node;
use crate::rewrites::{Planted, Rewrites};
use crate::schedule::{Init, Kind, Step};
use std::collections::HashMap;

/// A reduction that reads a loop's result element for element (and
/// otherwise only values that exist when the loop runs) joins that loop,
/// which becomes a reduction storing its value. The batch-BN backward's
/// input gradient `dx` is read by the input-VJP convolution and summed for
/// the preceding convolution's bias gradient: one pass over `dx` less per
/// layer. Each sum sees the same values in the same blocks and order as
/// before (bit-identical).
pub(crate) fn sum_reductions_in_producers(steps: Vec<Step>, on: &Rewrites) -> Vec<Step> {
    let wrong_node = on.plants(Planted::SumInProducerSumsTheWrongNode);
    let mut out: Vec<Step> = Vec::with_capacity(steps.len());
    // The step of `out` that writes each slot (every slot is written once).
    let mut writer: HashMap<usize, usize> = HashMap::new();
    for step in steps {
        let joined = producer_of_sum(&out, &writer, &step)
            .and_then(|l| Some((l, joined_kind(&out[l].kind, &step.kind, wrong_node)?)));
        let at = match joined {
            Some((l, kind)) => {
                out[l].kind = kind;
                out[l].label = "fused(reduce)".into();
                out[l].flops += step.flops;
                l
            }
            None => {
                out.push(step);
                out.len() - 1
            }
        };
        for w in out[at].kind.writes() {
            writer.insert(w, at);
        }
    }
    out
}

/// The loop of `steps` whose result the reduction `r` sums: the latest step
/// writing anything `r` reads, so everything else `r` reads exists when it
/// runs.
fn producer_of_sum(steps: &[Step], writer: &HashMap<usize, usize>, r: &Step) -> Option<usize> {
    let Kind::Reduce {
        prog,
        inputs,
        outs,
        len: rlen,
        ..
    } = &r.kind
    else {
        return None;
    };
    let l = r
        .kind
        .reads()
        .iter()
        .filter_map(|s| writer.get(s))
        .copied()
        .max()?;
    let Kind::Loop {
        prog: lp, out, len, ..
    } = &steps[l].kind
    else {
        return None;
    };
    // Position i of the loop's result is only read at position i, and it
    // is no reduction's initial value.
    let element_wise = prog.nodes.iter().all(|n| match n {
        Node::View(k, _) => inputs[*k] != *out,
        _ => true,
    }) && outs
        .iter()
        .all(|o| !matches!(o.init, Init::Slot(s) if s == *out));
    (len == rlen && lp.fault == 0.0 && prog.fault == 0.0 && element_wise).then_some(l)
}

/// Loop `lk` and the reduction `rk` of its result as one reduction.
/// (`wrong_node`: a planted bug, the loop's first node summed for its value.)
fn joined_kind(lk: &Kind, rk: &Kind, wrong_node: bool) -> Option<Kind> {
    let (
        Kind::Loop {
            prog: lp,
            inputs: li,
            out,
            len,
            ..
        },
        Kind::Reduce {
            prog: rp,
            inputs: ri,
            outs,
            map,
            out_len,
            stores,
            ..
        },
    ) = (lk, rk)
    else {
        return None;
    };
    let value = lp.nodes.len() - 1;
    let mut inputs = li.clone();
    let mut input_of = |s: usize| match inputs.iter().position(|t| *t == s) {
        Some(k) => k,
        None => {
            inputs.push(s);
            inputs.len() - 1
        }
    };
    let mut nodes = lp.nodes.clone();
    let mut at = Vec::with_capacity(rp.nodes.len());
    for n in &rp.nodes {
        let n = match n.renumbered(&at) {
            Node::Load(k) if ri[k] == *out => {
                at.push(if wrong_node { 0 } else { value });
                continue;
            }
            Node::Load(k) => Node::Load(input_of(ri[k])),
            Node::View(k, m) => Node::View(input_of(ri[k]), m),
            other => other,
        };
        nodes.push(n);
        at.push(nodes.len() - 1);
    }
    let mut outs = outs.clone();
    for o in &mut outs {
        o.node = at[o.node];
    }
    let mut stores: Vec<(usize, usize)> = stores.iter().map(|&(s, k)| (s, at[k])).collect();
    stores.push((*out, value));
    Some(deduped_reduction(
        &nodes,
        inputs,
        outs,
        stores,
        (*len, map, *out_len),
    ))
}
