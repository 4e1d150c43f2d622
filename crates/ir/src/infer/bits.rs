//! Result-type rules of the bit-level and library ops:
//! bitcast_convert (same width, or a trailing dimension gained or consumed),
//! reduce_precision, get_dimension_size, chlo.top_k and triangular_solve,
//! each following its constraints in the StableHLO (or CHLO) specification.

use super::*;

/// `bitcast_convert`: the same number of bits on both sides. Equal element
/// widths keep the shape; a narrower result adds a trailing dimension of
/// `operand width / result width`; a wider result consumes an operand's last
/// dimension of `result width / operand width`.
pub(super) fn bitcast_convert_rule(operand: &TensorType, result: &TensorType) -> Rule<()> {
    let (ow, rw) = (operand.elem.bit_width(), result.elem.bit_width());
    let expected: Vec<i64> = if ow == rw {
        operand.shape.clone()
    } else if operand.elem.is_bool() || result.elem.is_bool() {
        return Err(format!(
            "cannot bitcast between {} and {} (i1 only to itself)",
            operand.elem, result.elem
        ));
    } else if rw < ow {
        let mut s = operand.shape.clone();
        s.push((ow / rw) as i64);
        s
    } else {
        let ratio = (rw / ow) as i64;
        match operand.shape.split_last() {
            Some((&last, rest)) if last == ratio => rest.to_vec(),
            _ => {
                return Err(format!(
                    "operand {operand} must end in a dimension of {ratio} to bitcast to {}",
                    result.elem
                ))
            }
        }
    };
    if result.shape != expected {
        return Err(format!(
            "result shape {:?} does not match {:?} (operand {operand} as {})",
            result.shape, expected, result.elem
        ));
    }
    Ok(())
}

pub(super) fn reduce_precision_rule(
    exponent_bits: i64,
    mantissa_bits: i64,
    ops: &[TensorType],
) -> Rule<TensorType> {
    operand_count(ops, 1)?;
    if !ops[0].elem.is_float() {
        return Err(format!("operand element type {} not allowed", ops[0].elem));
    }
    if !(1..=62).contains(&exponent_bits) {
        return Err(format!("exponent_bits {exponent_bits} must be in 1..=62"));
    }
    if !(0..=62).contains(&mantissa_bits) {
        return Err(format!("mantissa_bits {mantissa_bits} must be in 0..=62"));
    }
    Ok(ops[0].clone())
}

pub(super) fn get_dimension_size_rule(dimension: i64, ops: &[TensorType]) -> Rule<TensorType> {
    operand_count(ops, 1)?;
    if dimension < 0 || dimension as usize >= ops[0].rank() {
        return Err(format!(
            "dimension {dimension} out of range for operand of rank {}",
            ops[0].rank()
        ));
    }
    Ok(TensorType::scalar(ElemType::I32))
}

/// `chlo.top_k`: values and i32 indices, the last dimension cut to `k`.
pub(super) fn top_k_rule(k: i64, ops: &[TensorType]) -> Rule<Vec<TensorType>> {
    operand_count(ops, 1)?;
    let last = *ops[0]
        .shape
        .last()
        .ok_or_else(|| "operand must have rank >= 1".to_string())?;
    if k < 0 || k > last {
        return Err(format!(
            "k = {k} out of range for a last dimension of {last}"
        ));
    }
    let mut shape = ops[0].shape.clone();
    *shape.last_mut().expect("rank >= 1") = k;
    Ok(vec![
        TensorType::new(shape.clone(), ops[0].elem),
        TensorType::new(shape, ElemType::I32),
    ])
}

/// `triangular_solve`: a is `[…, M, M]`, b is `[…, M, N]` (left side) or
/// `[…, N, M]`, the same float type and batch dimensions; the result is b's type.
pub(super) fn triangular_solve_rule(left_side: bool, ops: &[TensorType]) -> Rule<TensorType> {
    operand_count(ops, 2)?;
    let (a, b) = (&ops[0], &ops[1]);
    same_elem("a", a, "b", b)?;
    if !a.elem.is_float() {
        return Err(format!("operand element type {} not allowed", a.elem));
    }
    let r = a.rank();
    if r < 2 || b.rank() != r {
        return Err(format!("a {a} and b {b} must have the same rank >= 2"));
    }
    let m = a.shape[r - 1];
    if a.shape[r - 2] != m {
        return Err(format!("a {a} must be square in its last two dimensions"));
    }
    if a.shape[..r - 2] != b.shape[..r - 2] {
        return Err(format!("batch dimensions of a {a} and b {b} differ"));
    }
    let shared = if left_side {
        b.shape[r - 2]
    } else {
        b.shape[r - 1]
    };
    if shared != m {
        return Err(format!(
            "b {b} must have {m} {} (left_side = {left_side})",
            if left_side { "rows" } else { "columns" }
        ));
    }
    Ok(b.clone())
}
