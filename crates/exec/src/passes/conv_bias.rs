//! `conv(x, w) + broadcast(b)` as one step: the convolution kernel adds the
//! per-output-feature bias while it writes its result.

use super::{bias_add_loop, read_counts, vector_along};
use crate::rewrites::{Planted, Rewrites};
use crate::schedule::{Kind, Step};
use std::collections::HashMap;

/// `conv(x, w) + broadcast(b)` — a loop adding a per-output-feature vector to
/// a convolution's result right after it, the result read nowhere else —
/// becomes the convolution with a bias: the kernel adds `b` while it writes
/// (one pass over the result less per biased convolution; each element is
/// rounded exactly as the add rounds it).
pub(crate) fn fold_conv_bias(steps: Vec<Step>, outputs: &[usize], on: &Rewrites) -> Vec<Step> {
    let reads = read_counts(&steps);
    let mut out: Vec<Step> = Vec::with_capacity(steps.len());
    for step in steps {
        if let Some(prev) = out.last_mut() {
            if let Some(folded) = conv_with_bias(prev, &step, &reads, outputs, on) {
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
    on: &Rewrites,
) -> Option<Kind> {
    let Kind::Conv {
        lhs,
        rhs,
        attrs,
        out,
        shape,
        bias: None,
        moments: None,
    } = &conv.kind
    else {
        return None;
    };
    let add = bias_add_loop(&add.kind)?;
    let feature = usize::try_from(attrs.dims.output_feature).ok()?;
    if add.added != *out
        || add.len != shape.iter().product::<usize>()
        || feature >= shape.len()
        || reads.get(out) != Some(&1)
        || outputs.contains(out)
        || *add.view != vector_along(shape, feature)
    {
        return None;
    }
    Some(Kind::Conv {
        lhs: lhs.clone(),
        rhs: rhs.clone(),
        attrs: attrs.clone(),
        out: add.sum,
        shape: shape.clone(),
        bias: (!on.plants(Planted::ConvBiasDropped)).then_some(add.bias),
        moments: None,
    })
}
