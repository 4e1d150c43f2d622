//! `sort`: several operands sorted together along one dimension by a
//! comparator region, as the StableHLO specification defines it.
//!
//! The order is a stable merge sort driven by the comparator alone (an element
//! moves before an earlier one only when `comparator(later, earlier)` is true),
//! so it never relies on the comparator being a consistent total order — a
//! wrong comparator gives a wrong order, never a panic — and is stable whether
//! or not `is_stable` asks for it (the spec allows any order of equivalent
//! elements when it does not). The comparator's `compare` ops record their
//! margins like any other decision: a near-tie between two keys is a decision
//! the certifier must see.

use super::gather::scalar_at;
use super::Fail;
use crate::scalar::Scalar;
use crate::tensor::{row_major_strides, Tensor};
use crate::value::Value;

/// The comparator on rank-0 values `(lhs0, rhs0, lhs1, rhs1, …)` → i1.
pub type Less<'a, S> = dyn FnMut(Vec<Value<S>>) -> Result<Vec<Value<S>>, Fail> + 'a;

/// Whether the element at offset `a` goes before the one at offset `b`.
fn less<S: Scalar>(
    xs: &[&Value<S>],
    a: usize,
    b: usize,
    cmp: &mut Less<'_, S>,
) -> Result<bool, Fail> {
    let args: Vec<Value<S>> = xs
        .iter()
        .flat_map(|x| [scalar_at(x, a), scalar_at(x, b)])
        .collect();
    match cmp(args)?.as_slice() {
        [Value::Int(t, _)] if t.len() == 1 => Ok(t.data[0] != 0),
        _ => Err(Fail::msg("sort comparator must return one i1 scalar")),
    }
}

/// Stable merge sort of `items` (operand offsets) by the comparator.
fn merge_sort<S: Scalar>(
    xs: &[&Value<S>],
    items: &mut Vec<usize>,
    cmp: &mut Less<'_, S>,
) -> Result<(), Fail> {
    let n = items.len();
    let mut width = 1;
    let mut buf = Vec::with_capacity(n);
    while width < n {
        buf.clear();
        let mut lo = 0;
        while lo < n {
            let mid = (lo + width).min(n);
            let hi = (lo + 2 * width).min(n);
            let (mut i, mut j) = (lo, mid);
            while i < mid && j < hi {
                // Take from the right run only when it is strictly first.
                if less(xs, items[j], items[i], cmp)? {
                    buf.push(items[j]);
                    j += 1;
                } else {
                    buf.push(items[i]);
                    i += 1;
                }
            }
            buf.extend_from_slice(&items[i..mid]);
            buf.extend_from_slice(&items[j..hi]);
            lo = hi;
        }
        std::mem::swap(items, &mut buf);
        width *= 2;
    }
    Ok(())
}

/// `sort(inputs…)` along `dimension` (negative counts from the end).
pub fn sort<S: Scalar>(
    xs: &[&Value<S>],
    dimension: i64,
    cmp: &mut Less<'_, S>,
) -> Result<Vec<Value<S>>, Fail> {
    let shape = xs
        .first()
        .ok_or_else(|| Fail::msg("sort needs at least one operand"))?
        .shape()
        .to_vec();
    if xs.iter().any(|x| x.shape() != shape.as_slice()) {
        return Err(Fail::msg("sort operands differ in shape"));
    }
    let r = shape.len() as i64;
    let d = if dimension < 0 {
        dimension + r
    } else {
        dimension
    };
    if r == 0 {
        return Ok(xs.iter().map(|x| (*x).clone()).collect());
    }
    if d < 0 || d >= r {
        return Err(Fail::msg(format!(
            "sort dimension {dimension} out of range"
        )));
    }
    let d = d as usize;
    let strides = row_major_strides(&shape);
    let n: usize = shape.iter().product();
    let len = shape[d];
    // perm[o] = the source offset of output offset o.
    let mut perm: Vec<usize> = (0..n).collect();
    if len > 0 {
        for base in 0..n {
            // Visit each line once, from the offset whose coordinate along d is 0.
            if !(base / strides[d]).is_multiple_of(len) {
                continue;
            }
            let mut line: Vec<usize> = (0..len).map(|k| base + k * strides[d]).collect();
            merge_sort(xs, &mut line, cmp)?;
            for (k, src) in line.into_iter().enumerate() {
                perm[base + k * strides[d]] = src;
            }
        }
    }
    fn permute<T: Clone>(t: &Tensor<T>, perm: &[usize]) -> Tensor<T> {
        Tensor::new(
            t.shape.clone(),
            perm.iter().map(|&o| t.data[o].clone()).collect(),
        )
    }
    Ok(xs
        .iter()
        .map(|x| match x {
            Value::Float(t, e) => Value::Float(permute(t, &perm), *e),
            Value::Int(t, e) => Value::Int(permute(t, &perm), *e),
        })
        .collect())
}
