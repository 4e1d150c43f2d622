//! `conv(x, w) + broadcast(b)` as one step: the convolution kernel adds the
//! per-output-feature bias while it writes its result.

use crate::fused::{Node, ViewSpec};
use crate::schedule::{Kind, Step};
use ir::BinaryOp;
use std::collections::HashMap;

/// `conv(x, w) + broadcast(b)` — a loop adding a per-output-feature vector to
/// a convolution's result right after it, the result read nowhere else —
/// becomes the convolution with a bias: the kernel adds `b` while it writes
/// (one pass over the result less per biased convolution; each element is
/// rounded exactly as the add rounds it).
pub(crate) fn fold_conv_bias(steps: Vec<Step>, outputs: &[usize]) -> Vec<Step> {
    let mut reads = HashMap::<usize, usize>::new();
    for s in &steps {
        for r in s.kind.reads() {
            *reads.entry(r).or_default() += 1;
        }
    }
    let mut out: Vec<Step> = Vec::with_capacity(steps.len());
    for step in steps {
        if let Some(prev) = out.last_mut() {
            if let Some(folded) = conv_with_bias(prev, &step, &reads, outputs) {
                prev.kind = folded;
                prev.flops += step.flops;
                continue;
            }
        }
        out.push(step);
    }
    out
}

/// The convolution `conv` with the bias loop `add` folded in, when it is one.
fn conv_with_bias(
    conv: &Step,
    add: &Step,
    reads: &HashMap<usize, usize>,
    outputs: &[usize],
) -> Option<Kind> {
    let Kind::Conv {
        lhs,
        rhs,
        attrs,
        out,
        shape,
        bias: None,
    } = &conv.kind
    else {
        return None;
    };
    let Kind::Loop {
        prog,
        inputs,
        out: sum,
        len,
        ..
    } = &add.kind
    else {
        return None;
    };
    let (load, view, m) = match prog.nodes.as_slice() {
        [Node::Load(l), Node::View(v, m), Node::Binary(BinaryOp::Add, 0, 1)]
        | [Node::View(v, m), Node::Load(l), Node::Binary(BinaryOp::Add, 0, 1)] => (*l, *v, m),
        _ => return None,
    };
    let feature = usize::try_from(attrs.dims.output_feature).ok()?;
    if inputs[load] != *out
        || *len != shape.iter().product::<usize>()
        || feature >= shape.len()
        || reads.get(out) != Some(&1)
        || outputs.contains(out)
        || prog.fault != 0.0
    {
        return None;
    }
    let mut strides = vec![0isize; shape.len()];
    strides[feature] = 1;
    let per_feature = ViewSpec {
        shape: shape.clone(),
        strides,
        base: 0,
    }
    .merged();
    if *m != per_feature {
        return None;
    }
    Some(Kind::Conv {
        lhs: lhs.clone(),
        rhs: rhs.clone(),
        attrs: attrs.clone(),
        out: *sum,
        shape: shape.clone(),
        bias: Some(inputs[view]),
    })
}
