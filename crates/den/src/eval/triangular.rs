//! `stablehlo.triangular_solve`: for each batch, the solution x of
//! op(a)·x = b (`left_side`) or x·op(a) = b, with op(a) = a, aᵀ or a's
//! conjugate transpose (aᵀ for real types). Only the `lower` (or upper)
//! triangle of a is read; with `unit_diagonal` its diagonal is taken as ones
//! and not read either. Solved by forward or back substitution in the
//! scalar's own arithmetic, so dual numbers differentiate it and exact
//! rationals solve it exactly.

use super::Fail;
use crate::scalar::Scalar;
use crate::tensor::Tensor;
use crate::value::Value;
use ir::TransposeA;

pub fn triangular_solve<S: Scalar>(
    a: &Value<S>,
    b: &Value<S>,
    left_side: bool,
    lower: bool,
    unit_diagonal: bool,
    transpose_a: TransposeA,
) -> Result<Value<S>, Fail> {
    let (Value::Float(a, _), Value::Float(bt, elem)) = (a, b) else {
        return Err(Fail::msg("triangular_solve needs float operands"));
    };
    let r = a.shape.len();
    if r < 2 || bt.shape.len() != r {
        return Err(Fail::msg("triangular_solve needs operands of rank >= 2"));
    }
    let m = a.shape[r - 1];
    let (rows, cols) = (bt.shape[r - 2], bt.shape[r - 1]);
    if a.shape[r - 2] != m || (if left_side { rows } else { cols }) != m {
        return Err(Fail::msg(format!(
            "triangular_solve: a {:?} does not fit b {:?}",
            a.shape, bt.shape
        )));
    }
    let batches: usize = a.shape[..r - 2].iter().product();
    let transposed = transpose_a != TransposeA::NoTranspose;
    // op(a)[i][j], reading only the stored triangle.
    let entry = |base: usize, i: usize, j: usize| -> S {
        let (p, q) = if transposed { (j, i) } else { (i, j) };
        if p == q && unit_diagonal {
            return S::one();
        }
        let stored = if lower { q <= p } else { q >= p };
        if stored {
            a.data[base + p * m + q].clone()
        } else {
            S::zero()
        }
    };
    // op(a) is lower triangular when exactly one of lower/transposed holds.
    let op_lower = lower != transposed;
    let mut out = bt.data.clone();
    let nb = rows * cols;
    for batch in 0..batches {
        let base_a = batch * m * m;
        let x = &mut out[batch * nb..(batch + 1) * nb];
        // Left: op(a)·x = b column by column. Right: x·op(a) = b is
        // op(a)ᵀ·xᵀ = bᵀ, row by row of x with the roles of i, k swapped.
        let (systems, coeff): (usize, Box<dyn Fn(usize, usize) -> S>) = if left_side {
            (cols, Box::new(|i, k| entry(base_a, i, k)))
        } else {
            (rows, Box::new(|i, k| entry(base_a, k, i)))
        };
        let solve_lower = if left_side { op_lower } else { !op_lower };
        let at = |s: usize, i: usize| {
            if left_side {
                i * cols + s
            } else {
                s * cols + i
            }
        };
        for s in 0..systems {
            let order: Vec<usize> = if solve_lower {
                (0..m).collect()
            } else {
                (0..m).rev().collect()
            };
            for (n, &i) in order.iter().enumerate() {
                let mut acc = x[at(s, i)].clone();
                for &k in &order[..n] {
                    acc = acc.sub(&coeff(i, k).mul(&x[at(s, k)]));
                }
                x[at(s, i)] = acc.div(&coeff(i, i)).round_to(*elem);
            }
        }
    }
    Ok(Value::Float(Tensor::new(bt.shape.clone(), out), *elem))
}
