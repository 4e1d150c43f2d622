//! A strided convolution's VJPs read `dy` zero-upsampled by a `pad` (interior
//! `s − 1`, trailing zeros): the input-VJP as its input, the weight-VJP as
//! its kernel. Three in four of those taps multiply an inserted zero. This
//! pass moves such a pad into the convolution — interior into lhs or rhs
//! dilation, the edges into the padding — so the kernel never sees the zeros
//! (and the upsampled copy is not written). The sums keep every term that is
//! not a product with an inserted zero, so per output they differ from the
//! unfolded ones only in order (within the same `n · eps · Σ|terms|`).

use crate::rewrites::{Planted, Rewrites};
use crate::schedule::{Init, Kind, Step};
use std::collections::HashMap;

/// Folds a zero `pad` into every ungrouped convolution that reads it as its
/// input or kernel (spatial dimensions padded by non-negative amounts, the
/// others untouched); the pad goes when no other step reads it.
pub(crate) fn fold_conv_upsample(steps: Vec<Step>, outputs: &[usize], on: &Rewrites) -> Vec<Step> {
    let mut reads = HashMap::<usize, usize>::new();
    for s in &steps {
        for r in s.kind.reads() {
            *reads.entry(r).or_default() += 1;
        }
    }
    // Which step writes each zero pad's result.
    let pads: HashMap<usize, usize> = steps
        .iter()
        .enumerate()
        .filter_map(|(i, s)| match &s.kind {
            Kind::Pad {
                value: Init::Const(v),
                out,
                ..
            } if v.to_bits() == 0 && !outputs.contains(out) => Some((*out, i)),
            _ => None,
        })
        .collect();
    // Per pad step, how many of its reads were folded away.
    let mut folded = vec![0usize; steps.len()];
    let mut steps = steps;
    for c in 0..steps.len() {
        for kernel_side in [false, true] {
            let slot = match &steps[c].kind {
                Kind::Conv { lhs, rhs, .. } => {
                    if kernel_side {
                        rhs.0
                    } else {
                        lhs.0
                    }
                }
                _ => continue,
            };
            let Some(&p) = pads.get(&slot) else { continue };
            if p >= c {
                continue;
            }
            let Kind::Pad {
                input,
                low,
                interior,
                shape: padded,
                ..
            } = &steps[p].kind
            else {
                continue;
            };
            let (input, low, interior, padded) =
                (input.clone(), low.clone(), interior.clone(), padded.clone());
            let Kind::Conv {
                lhs, rhs, attrs, ..
            } = &mut steps[c].kind
            else {
                continue;
            };
            let operand = if kernel_side { &mut *rhs } else { &mut *lhs };
            if operand.1 != padded || !fold(attrs, kernel_side, &input.1, &low, &interior, &padded)
            {
                continue;
            }
            if on.plants(Planted::ConvUpsampleShifted) {
                let edge = &mut attrs.padding[0];
                *edge = (edge.0 + 1, edge.1 - 1);
            }
            *operand = input;
            folded[p] += 1;
            // The flop count (for the profile's GFLOP/s) scales with the
            // operand's elements: about the taps the kernel now runs.
            let kept = operand.1.iter().product::<usize>() as f64;
            let before = padded.iter().product::<usize>().max(1) as f64;
            steps[c].flops = (steps[c].flops as f64 * kept / before) as u64;
        }
    }
    // A pad whose every read was folded is not needed any more.
    steps
        .into_iter()
        .zip(folded)
        .filter_map(|(s, n)| {
            let unread = n > 0 && s.kind.writes().iter().all(|w| reads.get(w) == Some(&n));
            (!unread).then_some(s)
        })
        .collect()
}

/// Rewrites `attrs` so the convolution reads the unpadded operand (`input`
/// shape) instead of `pad(input, low, interior)` (`padded` shape), on the
/// kernel when `kernel_side`; false (attrs untouched) when it cannot.
fn fold(
    attrs: &mut ir::ConvAttrs,
    kernel_side: bool,
    input: &[usize],
    low: &[i64],
    interior: &[i64],
    padded: &[usize],
) -> bool {
    if attrs.feature_group_count != 1 || attrs.batch_group_count != 1 {
        return false;
    }
    let d = &attrs.dims;
    let spatial: Vec<usize> = if kernel_side {
        &d.kernel_spatial
    } else {
        &d.input_spatial
    }
    .iter()
    .map(|&x| x as usize)
    .collect();
    let nsp = spatial.len();
    let rank = padded.len();
    if input.len() != rank || low.len() != rank || interior.len() != rank {
        return false;
    }
    // high = padded − low − dilated extent.
    let high: Vec<i64> = (0..rank)
        .map(|i| {
            let dilated = if input[i] == 0 {
                0
            } else {
                (input[i] as i64 - 1) * (interior[i] + 1) + 1
            };
            padded[i] as i64 - low[i] - dilated
        })
        .collect();
    for i in 0..rank {
        let is_spatial = spatial.contains(&i);
        if !is_spatial && (low[i] != 0 || high[i] != 0 || interior[i] != 0) {
            return false;
        }
        if is_spatial && (low[i] < 0 || high[i] < 0 || interior[i] < 0 || input[i] == 0) {
            return false;
        }
    }
    let get = |v: &[i64], s: usize| v.get(s).copied().unwrap_or(1);
    for s in 0..nsp {
        let (dil, rev) = if kernel_side {
            (
                get(&attrs.rhs_dilation, s),
                attrs.window_reversal.get(s).copied().unwrap_or(false),
            )
        } else {
            (get(&attrs.lhs_dilation, s), false)
        };
        if dil != 1 || rev {
            return false;
        }
    }
    attrs.padding.resize(nsp, (0, 0));
    for v in [&mut attrs.lhs_dilation, &mut attrs.rhs_dilation] {
        v.resize(nsp, 1);
    }
    for (s, &dim) in spatial.iter().enumerate() {
        let (lo, hi) = attrs.padding[s];
        if kernel_side {
            // Kernel zeros before (after) the taps shift the window's first
            // (last) read: the input padding shrinks by as much.
            attrs.padding[s] = (lo - low[dim], hi - high[dim]);
            attrs.rhs_dilation[s] = interior[dim] + 1;
        } else {
            attrs.padding[s] = (lo + low[dim], hi + high[dim]);
            attrs.lhs_dilation[s] = interior[dim] + 1;
        }
    }
    true
}
