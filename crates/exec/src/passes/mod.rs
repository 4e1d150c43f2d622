//! Rewrites that change how a plan computes, never what it computes: calls
//! inlined, in regions too (`ir::passes::inline_all_calls`), and common subexpressions removed
//! from the function before it is lowered (`cse`),
//! and on the lowered steps, an add-reduction of a loop's result summed by
//! that loop (`sum_in_producer`), adjacent sibling add-reductions merged into one
//! pass (`sibling_reductions`) and a convolution's bias add folded into the
//! convolution (`conv_bias`), batch norm's sums of a convolution's result
//! from moments its kernel takes (`conv_moments`), a dense layer's bias add folded into its dot's
//! GEMM epilogue (`dot_bias`), and the zero-upsampling pad of a strided
//! convolution's VJP moved into its dilation and padding (`conv_upsample`). Transposed convolution operands are read in
//! place while lowering (`compile::kernels`).

mod conv_bias;
mod conv_moments;
mod conv_upsample;
pub(crate) mod cse;
mod dedupe;
mod dot_bias;
mod sibling_reductions;
mod sum_in_producer;

pub(crate) use conv_bias::fold_conv_bias;
pub(crate) use conv_moments::sums_from_conv_moments;
pub(crate) use conv_upsample::fold_conv_upsample;
pub(crate) use dedupe::dedupe_nodes;
pub(crate) use dot_bias::fold_dot_bias;
pub(crate) use ir::passes::inline_all_calls;
pub(crate) use sibling_reductions::merge_sibling_reductions;
pub(crate) use sum_in_producer::sum_reductions_in_producers;

use crate::fused::{Merged, Node, Program, ViewSpec};
use crate::schedule::{Kind, ReduceOut, Step};
use ir::BinaryOp;
use std::collections::HashMap;

/// How many steps read each buffer: a fold may only absorb a value read once.
fn read_counts(steps: &[Step]) -> HashMap<usize, usize> {
    let mut reads = HashMap::<usize, usize>::new();
    for s in steps {
        for r in s.kind.reads() {
            *reads.entry(r).or_default() += 1;
        }
    }
    reads
}

/// A loop whose whole program is `sum = added + view(bias)` and cannot fault:
/// the bias add that `conv_bias` and `dot_bias` fold into their producer.
struct BiasAdd<'a> {
    added: usize,
    bias: usize,
    view: &'a Merged,
    sum: usize,
    len: usize,
}

fn bias_add_loop(kind: &Kind) -> Option<BiasAdd<'_>> {
    let Kind::Loop {
        prog,
        inputs,
        out,
        len,
        ..
    } = kind
    else {
        return None;
    };
    let (load, view, m) = match prog.nodes.as_slice() {
        [Node::Load(l), Node::View(v, m), Node::Binary(BinaryOp::Add, 0, 1)]
        | [Node::View(v, m), Node::Load(l), Node::Binary(BinaryOp::Add, 0, 1)] => (*l, *v, m),
        _ => return None,
    };
    (prog.fault == 0.0).then_some(BiasAdd {
        added: inputs[load],
        bias: inputs[view],
        view: m,
        sum: *out,
        len: *len,
    })
}

/// The view that broadcasts a vector along `axis` of `shape`.
fn vector_along(shape: &[usize], axis: usize) -> Merged {
    let mut strides = vec![0isize; shape.len()];
    strides[axis] = 1;
    ViewSpec {
        shape: shape.to_vec(),
        strides,
        base: 0,
    }
    .merged()
}

/// A merged reduction's step: its program with identical nodes computed
/// once (`dedupe`), the outputs and stores renumbered to match.
fn deduped_reduction(
    nodes: &[Node],
    inputs: Vec<usize>,
    mut outs: Vec<ReduceOut>,
    mut stores: Vec<(usize, usize)>,
    (len, map, out_len): (usize, &Merged, usize),
) -> Kind {
    let (nodes, at) = dedupe_nodes(nodes);
    for o in &mut outs {
        o.node = at[o.node];
    }
    for s in &mut stores {
        s.1 = at[s.1];
    }
    Kind::Reduce {
        prog: Program {
            nodes,
            fault: 0.0,
            stores_first: false,
        },
        inputs,
        outs,
        len,
        map: map.clone(),
        out_len,
        stores,
        store_in_place: None,
    }
}
