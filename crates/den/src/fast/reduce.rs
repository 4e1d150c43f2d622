//! Fast f32 `stablehlo.reduce` with a known binary reducer, `reduce_window` and
//! `select_and_scatter` (select by comparison, scatter by addition).
//!
//! Folds visit elements in row-major order of the reduced indices, as the generic
//! evaluator does; only long contiguous additions use eight partial sums (a
//! different but equally accurate order, within the agreement bound).

use rayon::prelude::*;

use super::layout::{compare_f32, dim_index, max_f32, min_f32, WindowTable};
use super::ReduceKind;
use crate::tensor::{row_major_strides, Tensor};

impl ReduceKind {
    /// The reducer `a ⊕ b` with StableHLO semantics for f32.
    #[inline]
    pub fn apply(self, a: f32, b: f32) -> f32 {
        match self {
            ReduceKind::Add => a + b,
            ReduceKind::Mul => a * b,
            ReduceKind::Max => max_f32(a, b),
            ReduceKind::Min => min_f32(a, b),
        }
    }
}

/// `acc ⊕ xs[0] ⊕ xs[1] ⊕ …`.
fn fold_run(kind: ReduceKind, acc: f32, xs: &[f32]) -> f32 {
    const LANES: usize = 8;
    if kind == ReduceKind::Add && xs.len() >= 2 * LANES {
        let mut lanes = [0f32; LANES];
        let chunks = xs.chunks_exact(LANES);
        let tail = chunks.remainder();
        for c in chunks {
            for (l, &x) in lanes.iter_mut().zip(c) {
                *l += x;
            }
        }
        let partial = ((lanes[0] + lanes[1]) + (lanes[2] + lanes[3]))
            + ((lanes[4] + lanes[5]) + (lanes[6] + lanes[7]));
        return tail.iter().fold(acc + partial, |a, &x| a + x);
    }
    xs.iter().fold(acc, |a, &x| kind.apply(a, x))
}

pub(crate) fn reduce(
    input: &Tensor<f32>,
    init: f32,
    kind: ReduceKind,
    dims: &[usize],
    out_shape: &[usize],
) -> Tensor<f32> {
    let rank = input.rank();
    assert!(
        dims.iter().all(|&d| d < rank),
        "reduce dimension out of range"
    );
    let kept: Vec<usize> = (0..rank)
        .filter(|d| !dims.contains(d))
        .map(|d| input.shape[d])
        .collect();
    assert_eq!(kept, out_shape, "reduce result shape");
    let mut out = vec![init; out_shape.iter().product()];
    if input.is_empty() {
        return Tensor::new(out_shape.to_vec(), out);
    }
    // Merge runs of adjacent dimensions with the same role (size-1 dims play none).
    let mut merged: Vec<(usize, bool)> = Vec::new();
    for d in 0..rank {
        let (n, reduced) = (input.shape[d], dims.contains(&d));
        if n == 1 {
            continue;
        }
        match merged.last_mut() {
            Some((m, r)) if *r == reduced => *m *= n,
            _ => merged.push((n, reduced)),
        }
    }
    if merged.is_empty() {
        merged.push((1, false));
    }
    // Output stride of each merged dimension (0 for reduced ones).
    let mut out_strides = vec![0usize; merged.len()];
    let mut s = 1;
    for (i, &(n, reduced)) in merged.iter().enumerate().rev() {
        if !reduced {
            out_strides[i] = s;
            s *= n;
        }
    }
    let (inner, inner_reduced) = *merged.last().expect("non-empty");
    let outer = &merged[..merged.len() - 1];
    let mut counter = vec![0usize; outer.len()];
    for run in input.data.chunks_exact(inner) {
        let base: usize = counter.iter().zip(&out_strides).map(|(c, s)| c * s).sum();
        if inner_reduced {
            out[base] = fold_run(kind, out[base], run);
        } else {
            for (a, &x) in out[base..base + inner].iter_mut().zip(run) {
                *a = kind.apply(*a, x);
            }
        }
        for i in (0..outer.len()).rev() {
            counter[i] += 1;
            if counter[i] < outer[i].0 {
                break;
            }
            counter[i] = 0;
        }
    }
    Tensor::new(out_shape.to_vec(), out)
}

/// Window geometry of one operand dimension.
struct WindowDim {
    table: WindowTable,
    src_stride: usize,
}

impl WindowDim {
    /// True when the window is the single element at the output's own index.
    fn is_identity(&self) -> bool {
        self.table.window == 1
            && self
                .table
                .row(0)
                .iter()
                .enumerate()
                .all(|(o, &i)| i == o as i64)
    }
}

/// Folds the window of one output element over the active dimensions `dims`,
/// visiting window offsets in row-major order; a padding or dilation-hole
/// position contributes `init`, as in the spec's padded operand.
#[allow(clippy::too_many_arguments)]
fn fold_window(
    data: &[f32],
    dims: &[&WindowDim],
    coords: &[usize],
    init: f32,
    kind: ReduceKind,
    offset: usize,
    valid: bool,
    acc: f32,
) -> f32 {
    let Some((d, rest)) = dims.split_first() else {
        return kind.apply(acc, if valid { data[offset] } else { init });
    };
    let (o, rest_coords) = (coords[0], &coords[1..]);
    let mut acc = acc;
    for w in 0..d.table.window {
        let i = d.table.row(w)[o];
        let (ok, off) = if i >= 0 && valid {
            (true, offset + i as usize * d.src_stride)
        } else {
            (false, offset)
        };
        acc = fold_window(data, rest, rest_coords, init, kind, off, ok, acc);
    }
    acc
}

pub(crate) fn reduce_window(
    input: &Tensor<f32>,
    init: f32,
    kind: ReduceKind,
    attrs: &ir::WindowAttrs,
    out_shape: &[usize],
) -> Tensor<f32> {
    let rank = input.rank();
    assert_eq!(out_shape.len(), rank, "reduce_window result rank");
    let get = |v: &[i64], d: usize, default: i64| v.get(d).copied().unwrap_or(default);
    let strides = input.strides();
    let wdims: Vec<WindowDim> = (0..rank)
        .map(|d| WindowDim {
            table: WindowTable::new(
                input.shape[d],
                out_shape[d],
                dim_index(get(&attrs.window_dimensions, d, 1), "window dimension"),
                get(&attrs.window_strides, d, 1),
                get(&attrs.window_dilations, d, 1),
                get(&attrs.base_dilations, d, 1),
                attrs.padding.get(d).map_or(0, |p| p.0),
            ),
            src_stride: strides[d],
        })
        .collect();
    let mut out = vec![init; out_shape.iter().product()];
    if out.is_empty() {
        return Tensor::new(out_shape.to_vec(), out);
    }
    let identity: Vec<bool> = wdims.iter().map(WindowDim::is_identity).collect();
    let active: Vec<&WindowDim> = wdims
        .iter()
        .zip(&identity)
        .filter(|(_, &id)| !id)
        .map(|(w, _)| w)
        .collect();
    let out_strides = row_major_strides(out_shape);
    // Parallel over the outermost output dimension; every element is independent.
    let chunk = out_strides.first().copied().unwrap_or(1).max(1);
    out.par_chunks_mut(chunk)
        .enumerate()
        .for_each(|(c, block)| {
            let mut coords = vec![0usize; rank];
            let mut active_coords = Vec::with_capacity(active.len());
            for (j, slot) in block.iter_mut().enumerate() {
                let flat = c * chunk + j;
                let mut base = 0;
                active_coords.clear();
                for d in 0..rank {
                    coords[d] = (flat / out_strides[d]) % out_shape[d];
                    if identity[d] {
                        base += coords[d] * wdims[d].src_stride;
                    } else {
                        active_coords.push(coords[d]);
                    }
                }
                *slot = fold_window(
                    &input.data,
                    &active,
                    &active_coords,
                    init,
                    kind,
                    base,
                    true,
                    init,
                );
            }
        });
    Tensor::new(out_shape.to_vec(), out)
}

/// The source index selected in one window: the first valid position, replaced by
/// a later one `x` whenever `compare(selected, x, select)` is false. Padding is
/// never selected; `None` when the window holds only padding.
fn select_in_window(
    data: &[f32],
    dims: &[&WindowDim],
    coords: &[usize],
    select: ir::CompareDirection,
    offset: usize,
    best: Option<usize>,
) -> Option<usize> {
    let Some((d, rest)) = dims.split_first() else {
        return match best {
            Some(b) if compare_f32(data[b], data[offset], select) => Some(b),
            _ => Some(offset),
        };
    };
    let (o, rest_coords) = (coords[0], &coords[1..]);
    let mut best = best;
    for w in 0..d.table.window {
        let i = d.table.row(w)[o];
        if i >= 0 {
            best = select_in_window(
                data,
                rest,
                rest_coords,
                select,
                offset + i as usize * d.src_stride,
                best,
            );
        }
    }
    best
}

pub(crate) fn select_and_scatter(
    operand: &Tensor<f32>,
    source: &Tensor<f32>,
    init: f32,
    select: ir::CompareDirection,
    attrs: &ir::ScatterWindowAttrs,
    out_shape: &[usize],
) -> Tensor<f32> {
    let rank = operand.rank();
    assert_eq!(
        out_shape,
        &operand.shape[..],
        "select_and_scatter result shape"
    );
    assert_eq!(source.rank(), rank, "select_and_scatter source rank");
    let get = |v: &[i64], d: usize| v.get(d).copied().unwrap_or(1);
    let strides = operand.strides();
    let wdims: Vec<WindowDim> = (0..rank)
        .map(|d| WindowDim {
            table: WindowTable::new(
                operand.shape[d],
                source.shape[d],
                dim_index(get(&attrs.window_dimensions, d), "window dimension"),
                get(&attrs.window_strides, d),
                1,
                1,
                attrs.padding.get(d).map_or(0, |p| p.0),
            ),
            src_stride: strides[d],
        })
        .collect();
    let mut out = vec![init; operand.len()];
    if out.is_empty() || source.is_empty() {
        return Tensor::new(out_shape.to_vec(), out);
    }
    let identity: Vec<bool> = wdims.iter().map(WindowDim::is_identity).collect();
    // Leading identity dimensions (batch, channels) split the problem into
    // independent blocks: no window crosses them, so scatters never collide.
    let lead = identity.iter().take_while(|&&id| id).count();
    let op_block: usize = operand.shape[lead..].iter().product();
    let src_block: usize = source.shape[lead..].iter().product();
    let src_strides_in_block = row_major_strides(&source.shape[lead..]);
    let active: Vec<&WindowDim> = wdims[lead..]
        .iter()
        .zip(&identity[lead..])
        .filter(|(_, &id)| !id)
        .map(|(w, _)| w)
        .collect();
    let src_shape = &source.shape[lead..];
    out.par_chunks_mut(op_block)
        .zip(operand.data.par_chunks(op_block))
        .zip(source.data.par_chunks(src_block))
        .for_each(|((out_b, op_b), src_b)| {
            let mut active_coords = Vec::with_capacity(active.len());
            for (s, &value) in src_b.iter().enumerate() {
                let mut base = 0;
                active_coords.clear();
                for (k, d) in (lead..rank).enumerate() {
                    let c = (s / src_strides_in_block[k]) % src_shape[k];
                    if identity[d] {
                        base += c * wdims[d].src_stride;
                    } else {
                        active_coords.push(c);
                    }
                }
                if let Some(sel) =
                    select_in_window(op_b, &active, &active_coords, select, base, None)
                {
                    out_b[sel] += value;
                }
            }
        });
    Tensor::new(out_shape.to_vec(), out)
}
