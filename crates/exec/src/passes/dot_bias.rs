//! `dot_general(x, w) + broadcast(b)` as one step: the GEMM adds the bias
//! along the result's last axis in its epilogue (`den::fast::dot_general_bias_into`).

use super::{bias_add_loop, vector_along};
use crate::rewrites::{Planted, Rewrites};
use crate::schedule::{Kind, Step};
use std::collections::HashMap;

/// A loop that only adds a vector broadcast along the last axis to a dot's
/// result — the result read nowhere else, the vector computed before the dot
/// — is folded into the dot, which then writes the sum (one pass over the
/// result less per biased dense layer). The loop need not follow the dot
/// directly: the scheduler often runs a layer's dots (attention's q, k, v)
/// before their bias adds. The dot stays where it is when the bias is
/// computed before it, else it moves to the loop's place (its operands then
/// live until there). Each element is rounded exactly as the add rounds it
/// (the GEMM writes `x·w`, then adds `b`).
pub(crate) fn fold_dot_bias(mut steps: Vec<Step>, outputs: &[usize], on: &Rewrites) -> Vec<Step> {
    let mut reads = HashMap::<usize, usize>::new();
    let mut writer = HashMap::<usize, usize>::new();
    for (i, s) in steps.iter().enumerate() {
        for r in s.kind.reads() {
            *reads.entry(r).or_default() += 1;
        }
        for w in s.kind.writes() {
            writer.insert(w, i);
        }
    }
    let mut gone = vec![false; steps.len()];
    for i in 0..steps.len() {
        let Some((mut dot, sum, bias)) = bias_add(&steps, i, &reads, &writer, outputs) else {
            continue;
        };
        let flops = steps[i].flops;
        if writer.get(&bias).is_some_and(|&w| w > dot) {
            // The bias is computed after the dot: the dot takes the loop's
            // place (`sum`'s writer stays `i`), the loop is dropped from the dot's.
            steps.swap(dot, i);
            gone[dot] = true;
            dot = i;
        } else {
            gone[i] = true;
        }
        let step = &mut steps[dot];
        if let Kind::Dot {
            out, bias: slot, ..
        } = &mut step.kind
        {
            *out = sum;
            *slot = (!on.plants(Planted::DotBiasDropped)).then_some(bias);
        }
        step.flops += flops;
    }
    steps
        .into_iter()
        .zip(gone)
        .filter(|(_, g)| !g)
        .map(|(s, _)| s)
        .collect()
}

/// For the loop at `i` adding a bias to a dot's result: the dot's step, the
/// loop's output slot and the bias slot.
fn bias_add(
    steps: &[Step],
    i: usize,
    reads: &HashMap<usize, usize>,
    writer: &HashMap<usize, usize>,
    outputs: &[usize],
) -> Option<(usize, usize, usize)> {
    let add = bias_add_loop(&steps[i].kind)?;
    let (d, b) = (add.added, add.bias);
    let dot = *writer.get(&d)?;
    let Kind::Dot {
        rhs,
        dims,
        shape,
        bias: None,
        ..
    } = &steps[dot].kind
    else {
        return None;
    };
    let rhs_free = rhs.1.len() - dims.rhs_batch.len() - dims.rhs_contracting.len();
    if dot >= i
        || d == b
        || rhs_free == 0
        || shape.is_empty()
        || add.len != shape.iter().product::<usize>()
        || reads.get(&d) != Some(&1)
        || outputs.contains(&d)
    {
        return None;
    }
    (*add.view == vector_along(shape, shape.len() - 1)).then_some((dot, add.sum, b))
}
