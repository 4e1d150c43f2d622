//! The bit-level ops on the evaluator's values: integer shifts,
//! `chlo.mulhi`,
//! popcnt and count_leading_zeros within the element's bit width,
//! `bitcast_convert` (same-width and shape-changing, little-endian as XLA's
//! CPU backend lays bytes out), `reduce_precision` and `get_dimension_size`.
//!
//! Integers are stored as i64 (two's complement, unsigned as their value,
//! ui64 as its bit pattern); these functions work on the low `bit_width` bits.

use super::Fail;
use crate::scalar::Scalar;
use crate::special;
use crate::tensor::Tensor;
use crate::value::Value;
use ir::{BinaryOp, ElemType, TensorType, UnaryOp};

fn mask(width: u32) -> u64 {
    if width >= 64 {
        u64::MAX
    } else {
        (1u64 << width) - 1
    }
}

/// The low `width` bits of a stored integer of type `elem`.
pub(crate) fn int_bits(x: i64, elem: ElemType) -> u64 {
    (x as u64) & mask(elem.bit_width())
}

/// The stored integer of type `elem` with bit pattern `bits`: sign-extended
/// for signed types, zero-extended for unsigned and i1.
pub(crate) fn int_from_bits(bits: u64, elem: ElemType) -> i64 {
    let w = elem.bit_width();
    let b = bits & mask(w);
    if elem.is_unsigned() || elem.is_bool() || w >= 64 {
        b as i64
    } else {
        let shift = 64 - w;
        ((b << shift) as i64) >> shift
    }
}

/// shift_left, shift_right_logical, shift_right_arithmetic: the amount is read
/// unsigned, so a negative amount is a huge one; amounts of at least the bit
/// width give 0, except the arithmetic right shift, which fills with the sign.
pub(crate) fn shift(b: BinaryOp, x: i64, amount: i64, elem: ElemType) -> i64 {
    let w = elem.bit_width();
    let bits = int_bits(x, elem);
    let n = int_bits(amount, elem);
    let signed = int_from_bits(bits, ElemType::I64) << (64 - w) >> (64 - w);
    let r = match b {
        BinaryOp::ShiftLeft if n >= w as u64 => 0,
        BinaryOp::ShiftLeft => bits << n,
        BinaryOp::ShiftRightLogical if n >= w as u64 => 0,
        BinaryOp::ShiftRightLogical => bits >> n,
        _ => (signed >> n.min(63)) as u64,
    };
    int_from_bits(r, elem)
}

/// `chlo.mulhi`: the high `width` bits of the exact 2·width-bit product,
/// signed or unsigned by the element type.
pub(crate) fn mulhi(x: i64, y: i64, elem: ElemType) -> i64 {
    let w = elem.bit_width();
    let high = if elem.is_unsigned() {
        let p = int_bits(x, elem) as u128 * int_bits(y, elem) as u128;
        (p >> w) as u64
    } else {
        let sx = int_from_bits(int_bits(x, elem), elem) as i128;
        let sy = int_from_bits(int_bits(y, elem), elem) as i128;
        ((sx * sy) >> w) as u64
    };
    int_from_bits(high, elem)
}

/// popcnt and count_leading_zeros of an integer of type `elem`.
pub(crate) fn bit_count(u: UnaryOp, x: i64, elem: ElemType) -> i64 {
    let w = elem.bit_width();
    let bits = int_bits(x, elem);
    match u {
        UnaryOp::Popcnt => bits.count_ones() as i64,
        _ => (bits.leading_zeros() - (64 - w)) as i64,
    }
}

/// The bit patterns of a value's elements in its element type.
fn element_bits<S: Scalar>(x: &Value<S>) -> Vec<u64> {
    match x {
        Value::Float(t, e) => t
            .data
            .iter()
            .map(|v| special::float_to_bits(v.to_f64(), *e))
            .collect(),
        Value::Int(t, e) => t.data.iter().map(|&v| int_bits(v, *e)).collect(),
    }
}

/// `bitcast_convert` to `result`: the same bits, regrouped when the widths
/// differ (a wider element splits into its low piece first).
pub fn bitcast_convert<S: Scalar>(x: &Value<S>, result: &TensorType) -> Result<Value<S>, Fail> {
    let (ow, rw) = (x.elem().bit_width(), result.elem.bit_width());
    let src = element_bits(x);
    let bits: Vec<u64> = if ow == rw {
        src
    } else if rw < ow {
        let r = ow / rw;
        src.iter()
            .flat_map(|&b| (0..r).map(move |j| (b >> (j * rw)) & mask(rw)))
            .collect()
    } else {
        let r = (rw / ow) as usize;
        src.chunks(r)
            .map(|c| {
                c.iter()
                    .enumerate()
                    .fold(0u64, |acc, (j, &b)| acc | (b << (j as u32 * ow)))
            })
            .collect()
    };
    let shape: Vec<usize> = result.shape.iter().map(|&d| d.max(0) as usize).collect();
    if bits.len() != shape.iter().product::<usize>() {
        return Err(Fail::msg(format!(
            "bitcast_convert of {} elements of {} cannot fill {result}",
            x.len(),
            x.elem()
        )));
    }
    let e = result.elem;
    if e.is_float() {
        let data = bits
            .iter()
            .map(|&b| S::from_f64(special::float_from_bits(b, e)))
            .collect::<Result<Vec<S>, _>>()?;
        Ok(Value::Float(Tensor::new(shape, data), e))
    } else {
        let data = bits.iter().map(|&b| int_from_bits(b, e)).collect();
        Ok(Value::Int(Tensor::new(shape, data), e))
    }
}

/// `reduce_precision` of a float value (its own element type decides the
/// bit layout the rounding works on).
pub fn reduce_precision<S: Scalar>(
    x: &Value<S>,
    exponent_bits: i64,
    mantissa_bits: i64,
) -> Result<Value<S>, Fail> {
    let (Value::Float(t, e), Ok(eb), Ok(mb)) = (
        x,
        u32::try_from(exponent_bits),
        u32::try_from(mantissa_bits),
    ) else {
        return Err(Fail::msg(
            "reduce_precision needs a float operand and non-negative bit counts",
        ));
    };
    if eb == 0 {
        return Err(Fail::msg("reduce_precision needs exponent_bits >= 1"));
    }
    let data = t
        .data
        .iter()
        .map(|v| v.reduce_precision(eb, mb, *e))
        .collect::<Result<Vec<S>, _>>()?;
    Ok(Value::Float(Tensor::new(t.shape.clone(), data), *e))
}

/// `get_dimension_size`: the size of `dimension` as a `tensor<i32>`.
pub fn get_dimension_size<S: Scalar>(x: &Value<S>, dimension: i64) -> Result<Value<S>, Fail> {
    let size = usize::try_from(dimension)
        .ok()
        .and_then(|d| x.shape().get(d))
        .ok_or_else(|| {
            Fail::msg(format!(
                "dimension {dimension} out of range for rank {}",
                x.shape().len()
            ))
        })?;
    Ok(Value::Int(
        Tensor::new(Vec::new(), vec![*size as i64]),
        ElemType::I32,
    ))
}
