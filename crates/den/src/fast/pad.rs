//! Fast `stablehlo.pad` (f32/f64): the result is filled with the padding value
//! and every operand element that lands inside it (at `low + i·(interior + 1)`
//! per dimension; negative `low`/`high` crop) is copied, row by row, in
//! parallel over the result's leading dimension. The values are the operand's
//! own, so the result is exactly the generic evaluator's.

use rayon::prelude::*;

use super::float::FastFloat;
use crate::tensor::{row_major_strides, Tensor};

/// Per dimension, the (operand index, result index) pairs that land inside.
fn landing(n: usize, out: usize, low: i64, interior: i64) -> Vec<(usize, usize)> {
    (0..n)
        .filter_map(|j| {
            let i = low + j as i64 * (interior + 1);
            (0..out as i64).contains(&i).then_some((j, i as usize))
        })
        .collect()
}

pub(crate) fn pad<T: FastFloat>(
    x: &Tensor<T>,
    value: T,
    low: &[i64],
    interior: &[i64],
    out_shape: &[usize],
) -> Tensor<T> {
    let rank = x.rank();
    assert_eq!(out_shape.len(), rank, "pad result rank");
    let len: usize = out_shape.iter().product();
    let mut out = vec![value; len];
    if rank == 0 {
        if let Some(&v) = x.data.first() {
            out[0] = v;
        }
        return Tensor::new(out_shape.to_vec(), out);
    }
    let maps: Vec<Vec<(usize, usize)>> = (0..rank)
        .map(|d| {
            let interior = interior.get(d).copied().unwrap_or(0);
            landing(
                x.shape[d],
                out_shape[d],
                low.get(d).copied().unwrap_or(0),
                interior,
            )
        })
        .collect();
    let (src_strides, out_strides) = (row_major_strides(&x.shape), row_major_strides(out_shape));
    let chunk = out_strides[0].max(1);
    if len > 0 {
        // One task per result index of dimension 0: at most one operand slice lands there.
        let first: Vec<Option<usize>> = {
            let mut f = vec![None; out_shape[0]];
            for &(j, i) in &maps[0] {
                f[i] = Some(j);
            }
            f
        };
        out.par_chunks_mut(chunk)
            .zip(first.par_iter())
            .for_each(|(dst, src)| {
                if let Some(j) = src {
                    copy_in(
                        &x.data,
                        &maps,
                        &src_strides,
                        &out_strides,
                        1,
                        j * src_strides[0],
                        dst,
                    );
                }
            });
    }
    Tensor::new(out_shape.to_vec(), out)
}

/// Copies the landing elements of dimensions `dim..` from `src[from..]` into
/// `dst` (the result block of one index of every dimension before `dim`).
fn copy_in<T: Copy>(
    src: &[T],
    maps: &[Vec<(usize, usize)>],
    src_strides: &[usize],
    out_strides: &[usize],
    dim: usize,
    from: usize,
    dst: &mut [T],
) {
    if dim == maps.len() {
        dst[0] = src[from];
        return;
    }
    if dim + 1 == maps.len() {
        for &(j, i) in &maps[dim] {
            dst[i] = src[from + j];
        }
        return;
    }
    for &(j, i) in &maps[dim] {
        let at = i * out_strides[dim];
        copy_in(
            src,
            maps,
            src_strides,
            out_strides,
            dim + 1,
            from + j * src_strides[dim],
            &mut dst[at..at + out_strides[dim]],
        );
    }
}
