//! `chlo.top_k`: the k largest entries of each row (the last dimension) in
//! descending order with their i32 indices, as XLA's TopK: floats in total
//! order (NaN above +∞, +0 above −0, −NaN last), equal values by lower index.
//! The order between consecutive selected entries (and the k-th against the
//! first one left out) is a decision whose margin is their gap.

use super::{Decisions, Fail};
use crate::scalar::Scalar;
use crate::tensor::Tensor;
use crate::value::Value;
use ir::ElemType;
use std::cmp::Ordering;

/// The row order: indices of `row` sorted by `cmp` descending, stable.
fn ranked<T>(row: &[T], cmp: impl Fn(&T, &T) -> Ordering) -> Vec<usize> {
    let mut idx: Vec<usize> = (0..row.len()).collect();
    idx.sort_by(|&a, &b| cmp(&row[b], &row[a]));
    idx
}

pub fn top_k<S: Scalar>(
    x: &Value<S>,
    k: i64,
    mut dec: Option<&mut Decisions>,
) -> Result<Vec<Value<S>>, Fail> {
    let shape = x.shape().to_vec();
    let Some(&n) = shape.last() else {
        return Err(Fail::msg("top_k needs an operand of rank >= 1"));
    };
    let k = usize::try_from(k)
        .ok()
        .filter(|&k| k <= n)
        .ok_or_else(|| Fail::msg(format!("top_k: k = {k} out of range for rows of {n}")))?;
    let rows = x.len().checked_div(n).unwrap_or(0);
    let mut out_shape = shape.clone();
    *out_shape.last_mut().expect("rank >= 1") = k;
    let mut indices = Vec::with_capacity(rows * k);
    let values = match x {
        Value::Float(t, e) => {
            let mut vals = Vec::with_capacity(rows * k);
            for r in 0..rows {
                let row = &t.data[r * n..(r + 1) * n];
                let order = ranked(row, |a, b| a.total_cmp(b));
                if let Some(d) = dec.as_deref_mut() {
                    for j in 0..k.min(n.saturating_sub(1)) {
                        let (a, b) = (order[j], order[j + 1]);
                        d.record(row[a].gap(&row[b]), r * k + j);
                        d.outcome(usize::from(a > b));
                    }
                }
                for &i in &order[..k] {
                    vals.push(row[i].clone());
                    indices.push(i as i64);
                }
            }
            Value::Float(Tensor::new(out_shape.clone(), vals), *e)
        }
        Value::Int(t, e) => {
            let unsigned = e.is_unsigned() || e.is_bool();
            let mut vals = Vec::with_capacity(rows * k);
            for r in 0..rows {
                let row = &t.data[r * n..(r + 1) * n];
                let order = ranked(row, |a, b| {
                    if unsigned {
                        (*a as u64).cmp(&(*b as u64))
                    } else {
                        a.cmp(b)
                    }
                });
                for &i in &order[..k] {
                    vals.push(row[i]);
                    indices.push(i as i64);
                }
            }
            Value::Int(Tensor::new(out_shape.clone(), vals), *e)
        }
    };
    Ok(vec![
        values,
        Value::Int(Tensor::new(out_shape, indices), ElemType::I32),
    ])
}
