//! Fast `stablehlo.reduce` (f32/f64) with a known binary reducer, `reduce_window` and
//! `select_and_scatter` (select by comparison, scatter by addition).
//!
//! Folds visit elements in row-major order of the reduced indices, as the generic
//! evaluator does; only long contiguous additions use eight partial sums (a
//! different but equally accurate order, within the agreement bound).
//! Windows over the two innermost dimensions only go to [`super::pool2d`].

use rayon::prelude::*;

use super::float::FastFloat;
use super::layout::{compare_fast, dim_index, max_fast, min_fast, WindowTable};
use super::pool2d::Plane2d;
use super::ReduceKind;
use crate::tensor::{row_major_strides, Tensor};

impl ReduceKind {
    /// The reducer `a ⊕ b` with StableHLO semantics.
    #[inline]
    pub fn apply<T: FastFloat>(self, a: T, b: T) -> T {
        match self {
            ReduceKind::Add => a + b,
            ReduceKind::Mul => a * b,
            ReduceKind::Max => max_fast(a, b),
            ReduceKind::Min => min_fast(a, b),
        }
    }
}

/// `acc ⊕ xs[0] ⊕ xs[1] ⊕ …`.
fn fold_run<T: FastFloat>(kind: ReduceKind, acc: T, xs: &[T]) -> T {
    const LANES: usize = 8;
    if kind == ReduceKind::Add && xs.len() >= 2 * LANES {
        let mut lanes = [T::ZERO; LANES];
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

/// Asserts `dims` are dimensions of `shape` and `out_shape` is `shape`
/// without them (`reduce`'s result shape).
fn assert_reduce_shape(shape: &[usize], dims: &[usize], out_shape: &[usize]) {
    let rank = shape.len();
    assert!(
        dims.iter().all(|&d| d < rank),
        "reduce dimension out of range"
    );
    let kept: Vec<usize> = (0..rank)
        .filter(|d| !dims.contains(d))
        .map(|d| shape[d])
        .collect();
    assert_eq!(kept, out_shape, "reduce result shape");
}

pub(crate) fn reduce<T: FastFloat>(
    input: &Tensor<T>,
    init: T,
    kind: ReduceKind,
    dims: &[usize],
    out_shape: &[usize],
) -> Tensor<T> {
    assert_reduce_shape(&input.shape, dims, out_shape);
    let rank = input.rank();
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
/// visiting window offsets in row-major order: `step(acc, at)` per position,
/// `at` the source offset of the element there (from `offset`), or `None` for
/// a padding or dilation-hole position (the spec's padded operand: `init`).
fn walk_window<A>(
    dims: &[&WindowDim],
    coords: &[usize],
    offset: Option<usize>,
    acc: A,
    step: &impl Fn(A, Option<usize>) -> A,
) -> A {
    let Some((d, rest)) = dims.split_first() else {
        return step(acc, offset);
    };
    let (o, rest_coords) = (coords[0], &coords[1..]);
    let mut acc = acc;
    for w in 0..d.table.window {
        let i = d.table.row(w)[o];
        let at = offset
            .filter(|_| i >= 0)
            .map(|off| off + i as usize * d.src_stride);
        acc = walk_window(rest, rest_coords, at, acc, step);
    }
    acc
}

/// Computes one value per `reduce_window` output element, in parallel over the
/// outermost output dimension: `per_output(active dims, their output coords,
/// source offset of the identity dims)` with the window geometry of `attrs`.
fn map_windows<R: Copy + Send>(
    input_shape: &[usize],
    attrs: &ir::WindowAttrs,
    out_shape: &[usize],
    fill: R,
    per_output: impl Fn(&[&WindowDim], &[usize], usize) -> R + Sync,
) -> Vec<R> {
    let rank = input_shape.len();
    assert_eq!(out_shape.len(), rank, "reduce_window result rank");
    let get = |v: &[i64], d: usize, default: i64| v.get(d).copied().unwrap_or(default);
    let strides = row_major_strides(input_shape);
    let wdims: Vec<WindowDim> = (0..rank)
        .map(|d| WindowDim {
            table: WindowTable::new(
                input_shape[d],
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
    let mut out = vec![fill; out_shape.iter().product()];
    if out.is_empty() {
        return out;
    }
    let identity: Vec<bool> = wdims.iter().map(WindowDim::is_identity).collect();
    let active: Vec<&WindowDim> = wdims
        .iter()
        .zip(&identity)
        .filter(|(_, &id)| !id)
        .map(|(w, _)| w)
        .collect();
    let out_strides = row_major_strides(out_shape);
    // Every element is independent.
    let chunk = out_strides.first().copied().unwrap_or(1).max(1);
    out.par_chunks_mut(chunk)
        .enumerate()
        .for_each(|(c, block)| {
            let mut active_coords = Vec::with_capacity(active.len());
            for (j, slot) in block.iter_mut().enumerate() {
                let flat = c * chunk + j;
                let mut base = 0;
                active_coords.clear();
                for d in 0..rank {
                    let coord = (flat / out_strides[d]) % out_shape[d];
                    if identity[d] {
                        base += coord * wdims[d].src_stride;
                    } else {
                        active_coords.push(coord);
                    }
                }
                *slot = per_output(&active, &active_coords, base);
            }
        });
    out
}

pub(crate) fn reduce_window<T: FastFloat>(
    input: &Tensor<T>,
    init: T,
    kind: ReduceKind,
    attrs: &ir::WindowAttrs,
    out_shape: &[usize],
    buffer: Vec<T>,
) -> Tensor<T> {
    let plane = Plane2d::new(
        &input.shape,
        out_shape,
        &attrs.window_dimensions,
        &attrs.window_strides,
        &attrs.padding,
        [&attrs.base_dilations, &attrs.window_dilations],
    );
    if let Some(p) = plane {
        let out = p.reduce_window(&input.data, init, kind, buffer);
        return Tensor::new(out_shape.to_vec(), out);
    }
    let out = map_windows(
        &input.shape,
        attrs,
        out_shape,
        init,
        |active, coords, base| {
            walk_window(active, coords, Some(base), init, &|acc, at| {
                kind.apply(acc, at.map_or(init, |i| input.data[i]))
            })
        },
    );
    Tensor::new(out_shape.to_vec(), out)
}

/// A max/min fold that remembers where its accumulator came from: `None` for
/// the init value (which padding positions also read), `Some(i)` for source
/// element `i`.
type Chosen<T> = (T, Option<usize>);

/// Whether the max/min fold step `acc ⊕ x` yields `x` rather than `acc`, with
/// the generic evaluator's rule (`Scalar::max`/`min`): a NaN accumulator stays,
/// a NaN element takes over, `+0` beats `-0` for max (`-0` for min), and on an
/// exact tie the accumulator (the earlier element) stays.
#[inline]
pub(crate) fn replaces<T: FastFloat>(kind: ReduceKind, acc: T, x: T) -> bool {
    if acc.is_nan() {
        return false;
    }
    if x.is_nan() {
        return true;
    }
    match kind {
        ReduceKind::Max => x > acc || (x == acc && acc.is_sign_negative() && x.is_sign_positive()),
        ReduceKind::Min => x < acc || (x == acc && acc.is_sign_positive() && x.is_sign_negative()),
        ReduceKind::Add | ReduceKind::Mul => panic!("replaces: {kind:?} is not a selection"),
    }
}

pub(crate) fn reduce_window_choices<T: FastFloat>(
    input: &Tensor<T>,
    init: T,
    kind: ReduceKind,
    attrs: &ir::WindowAttrs,
    out_shape: &[usize],
) -> Vec<Option<usize>> {
    assert!(
        matches!(kind, ReduceKind::Max | ReduceKind::Min),
        "reduce_window_choices needs a max or min reducer"
    );
    map_windows(
        &input.shape,
        attrs,
        out_shape,
        None,
        |active, coords, base| {
            // Each step chooses between the accumulator and the next element
            // by [`replaces`].
            let choose = |acc: Chosen<T>, at: Option<usize>| {
                let next = match at {
                    Some(i) => (input.data[i], Some(i)),
                    None => (init, None),
                };
                if replaces(kind, acc.0, next.0) {
                    next
                } else {
                    acc
                }
            };
            walk_window(active, coords, Some(base), (init, None), &choose).1
        },
    )
}

/// For every output of `reduce` with a max/min reducer: the source element the
/// fold ends on (`None`: the init value), visiting each output's elements in
/// row-major order of the reduced indices as the generic evaluator does.
pub(crate) fn reduce_choices<T: FastFloat>(
    input: &Tensor<T>,
    init: T,
    kind: ReduceKind,
    dims: &[usize],
    out_shape: &[usize],
) -> Vec<Option<usize>> {
    assert!(
        matches!(kind, ReduceKind::Max | ReduceKind::Min),
        "reduce_choices needs a max or min reducer"
    );
    assert_reduce_shape(&input.shape, dims, out_shape);
    let rank = input.rank();
    let mut acc: Vec<Chosen<T>> = vec![(init, None); out_shape.iter().product()];
    // Output stride of every input dimension (0 for reduced ones): memory order
    // visits each output's elements in row-major order of the reduced indices.
    let mut out_strides = vec![0usize; rank];
    let mut s = 1;
    for d in (0..rank).rev() {
        if !dims.contains(&d) {
            out_strides[d] = s;
            s *= input.shape[d];
        }
    }
    let mut counter = vec![0usize; rank];
    let mut at = 0usize;
    for (i, &x) in input.data.iter().enumerate() {
        let slot = &mut acc[at];
        if replaces(kind, slot.0, x) {
            *slot = (x, Some(i));
        }
        for d in (0..rank).rev() {
            counter[d] += 1;
            at += out_strides[d];
            if counter[d] < input.shape[d] {
                break;
            }
            at -= out_strides[d] * counter[d];
            counter[d] = 0;
        }
    }
    acc.into_iter().map(|(_, i)| i).collect()
}

/// The source index selected in one window: the first valid position, replaced by
/// a later one `x` whenever `compare(selected, x, select)` is false. Padding is
/// never selected; `None` when the window holds only padding.
fn select_in_window<T: FastFloat>(
    data: &[T],
    dims: &[&WindowDim],
    coords: &[usize],
    select: ir::CompareDirection,
    offset: usize,
    best: Option<usize>,
) -> Option<usize> {
    let Some((d, rest)) = dims.split_first() else {
        return match best {
            Some(b) if compare_fast(data[b], data[offset], select) => Some(b),
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

pub(crate) fn select_and_scatter<T: FastFloat>(
    operand: &Tensor<T>,
    source: &Tensor<T>,
    init: T,
    select: ir::CompareDirection,
    attrs: &ir::ScatterWindowAttrs,
    out_shape: &[usize],
    buffer: Vec<T>,
) -> Tensor<T> {
    let rank = operand.rank();
    assert_eq!(
        out_shape,
        &operand.shape[..],
        "select_and_scatter result shape"
    );
    assert_eq!(source.rank(), rank, "select_and_scatter source rank");
    let plane = Plane2d::new(
        &operand.shape,
        &source.shape,
        &attrs.window_dimensions,
        &attrs.window_strides,
        &attrs.padding,
        [&[], &[]],
    );
    if let Some(p) = plane {
        let out = p.select_and_scatter(&operand.data, &source.data, init, select, buffer);
        return Tensor::new(out_shape.to_vec(), out);
    }
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
    // An identity dimension of a strided size-1 window reads fewer operand
    // positions than it has (source extent < operand extent): it does not split.
    let lead = (0..rank)
        .take_while(|&d| identity[d] && operand.shape[d] == source.shape[d])
        .count();
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
