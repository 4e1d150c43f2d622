//! Identical nodes of a fused program computed once: a node whose op and
//! (renumbered) operands equal an earlier node's is that node. Sibling
//! reductions merged into one pass (`sibling_reductions`) each carry their
//! own copy of what they recompute (batch norm's `x̂` and ReLU mask, see
//! `compile::Builder::recompute`); every node computes the same f32 op on the
//! same operands, so sharing them changes no value.

use crate::fused::Node;

/// `nodes` without repeats, and where each old node went. The last node stays
/// last (a loop's value is its last node's register).
pub(crate) fn dedupe_nodes(nodes: &[Node]) -> (Vec<Node>, Vec<usize>) {
    let mut out: Vec<Node> = Vec::with_capacity(nodes.len());
    let mut at = Vec::with_capacity(nodes.len());
    let last = nodes.len().saturating_sub(1);
    for (j, n) in nodes.iter().enumerate() {
        let n = n.renumbered(&at);
        match out.iter().position(|m| *m == n) {
            Some(k) if j != last => at.push(k),
            _ => {
                out.push(n);
                at.push(out.len() - 1);
            }
        }
    }
    (out, at)
}
