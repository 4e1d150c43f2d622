//! Batch norm's two statistics of a convolution's result, `Σ y` and `Σ (y −
//! μ)²` per output feature, from moments the convolution kernel takes while
//! each result plane is in cache: two passes over the pre-BN tensor less.

use super::vector_along;
use crate::fused::Node;
use crate::rewrites::{Planted, Rewrites};
use crate::schedule::{Init, Kind, Step};
use ir::BinaryOp;

/// A per-feature add-reduction of a convolution's result — `Σ y` (a
/// program that only loads it) or `Σ (y − c)²` with `c` a per-feature
/// vector (batch norm's centred sum of squares) — becomes a
/// [`Kind::Moments`] step over per-plane moments the convolution now takes
/// (`Σ y` and `Σ (y − ȳ)²` of each plane, f32; combined per feature in
/// f64). The sums are the same up to the order of summation; the centred
/// one is exact in exact arithmetic for any `c` (no `E[y²] − E[y]²`
/// cancellation). New slots are numbered from `*next_slot`.
pub(crate) fn sums_from_conv_moments(
    mut steps: Vec<Step>,
    next_slot: &mut usize,
    on: &Rewrites,
) -> Vec<Step> {
    let fault = match on.plants(Planted::ConvMomentsScaled) {
        true => 1e-3,
        false => 0.0,
    };
    for c in 0..steps.len() {
        let Kind::Conv {
            attrs, out, shape, ..
        } = &steps[c].kind
        else {
            continue;
        };
        let (Ok(feature), Ok(batch)) = (
            usize::try_from(attrs.dims.output_feature),
            usize::try_from(attrs.dims.output_batch),
        ) else {
            continue;
        };
        if feature >= shape.len() || batch >= shape.len() || shape.iter().product::<usize>() == 0 {
            continue;
        }
        let (y, features) = (*out, shape[feature]);
        let plane = shape.iter().product::<usize>() / (shape[batch] * features).max(1);
        let per_feature = vector_along(shape, feature);
        let mut slot = None;
        for step in &mut steps[c + 1..] {
            let Some((init, centre)) = feature_sum_of(&step.kind, y, features, &per_feature) else {
                continue;
            };
            let Kind::Reduce { outs, .. } = &step.kind else {
                unreachable!("feature_sum_of matched a reduction")
            };
            let moments = *slot.get_or_insert_with(|| {
                *next_slot += 1;
                *next_slot - 1
            });
            step.kind = Kind::Moments {
                moments,
                centre,
                init,
                out: outs[0].slot,
                features,
                plane,
                fault,
            };
            step.label = "moments(conv)".into();
        }
        if let (
            Some(m),
            Kind::Conv {
                moments: to @ None, ..
            },
        ) = (slot, &mut steps[c].kind)
        {
            *to = Some(m);
        }
    }
    steps
}

/// `(init, centre)` when `kind` is a fault-free add-reduction of `y` alone
/// into one value per feature (`features` of them, kept along
/// `per_feature`): `Σ y` (no centre) or `Σ (y − c)²` with `c` read along
/// `per_feature` (its slot).
fn feature_sum_of(
    kind: &Kind,
    y: usize,
    features: usize,
    per_feature: &crate::fused::Merged,
) -> Option<(f32, Option<usize>)> {
    let Kind::Reduce {
        prog,
        inputs,
        outs,
        map,
        out_len,
        stores,
        ..
    } = kind
    else {
        return None;
    };
    let [o] = outs.as_slice() else { return None };
    let Init::Const(init) = o.init else {
        return None;
    };
    if prog.fault != 0.0
        || !stores.is_empty()
        || *out_len != features
        || map != per_feature
        || o.node + 1 != prog.nodes.len()
    {
        return None;
    }
    let is_y = |n: &Node| matches!(n, Node::Load(k) if inputs[*k] == y);
    match prog.nodes.as_slice() {
        [n] if is_y(n) => Some((init, None)),
        [a, b, Node::Binary(BinaryOp::Subtract, i, j), Node::Binary(BinaryOp::Multiply, 2, 2)] => {
            let nodes = [a, b];
            let (&i, &j) = (i, j);
            if i > 1 || j > 1 || i == j || !is_y(nodes[i]) {
                return None;
            }
            match nodes[j] {
                Node::View(k, v) if v == per_feature && inputs[*k] != y => {
                    Some((init, Some(inputs[*k])))
                }
                _ => None,
            }
        }
        _ => None,
    }
}
