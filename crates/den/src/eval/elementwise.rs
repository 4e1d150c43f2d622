//! Elementwise ops: unary and binary arithmetic, logical ops, compare, select,
//! clamp and convert — each following the StableHLO spec for float and integer
//! element types. Float results are rounded with `Scalar::round_to` to the op's
//! result element type.

use super::{bits, par, Decisions, Fail};
use crate::scalar::{NotExact, Scalar};
use crate::tensor::Tensor;
use crate::value::Value;
use ir::{BinaryOp, CompareDirection, CompareType, ElemType, UnaryOp};
use std::cmp::Ordering;

/// Wrap an integer to the range of `elem` (two's complement; i1 keeps the low bit).
pub fn wrap_int(v: i64, elem: ElemType) -> i64 {
    match elem {
        ElemType::I1 => v & 1,
        ElemType::I8 => v as i8 as i64,
        ElemType::UI8 => v as u8 as i64,
        ElemType::I16 => v as i16 as i64,
        ElemType::UI16 => v as u16 as i64,
        ElemType::I32 => v as i32 as i64,
        ElemType::UI32 => v as u32 as i64,
        _ => v,
    }
}

fn map_float<S: Scalar>(
    t: &Tensor<S>,
    elem: ElemType,
    f: impl Fn(&S) -> Result<S, NotExact> + Sync + Send,
) -> Result<Value<S>, Fail> {
    let data = par::collect(t.len(), |i| f(&t.data[i]).map(|y| y.round_to(elem)))?;
    Ok(Value::Float(Tensor::new(t.shape.clone(), data), elem))
}

fn same_shape<A, B>(x: &Tensor<A>, y: &Tensor<B>) -> Result<(), Fail> {
    if x.shape != y.shape {
        return Err(Fail::msg(format!(
            "operand shapes differ: {:?} vs {:?}",
            x.shape, y.shape
        )));
    }
    Ok(())
}

/// A float-to-float function of one element (failing where the scalar
/// cannot represent the result).
type FloatFn<S> = fn(&S) -> Result<S, NotExact>;

/// The function a float-to-float unary op applies to each element (`None`
/// for the ops that are not one: `not`, the class tests, the bit counts).
fn float_unary<S: Scalar>(u: UnaryOp) -> Option<FloatFn<S>> {
    let f: FloatFn<S> = match u {
        UnaryOp::Negate => |x| Ok(x.neg()),
        UnaryOp::Abs => |x| Ok(x.abs()),
        UnaryOp::Sign => |x| Ok(x.sign()),
        UnaryOp::Floor => |x| Ok(x.floor()),
        UnaryOp::Ceil => |x| Ok(x.ceil()),
        UnaryOp::RoundNearestEven => |x| Ok(x.round_nearest_even()),
        UnaryOp::Square => |x| Ok(x.mul(x)),
        UnaryOp::Exponential => S::exp,
        UnaryOp::ExponentialMinusOne => S::expm1,
        UnaryOp::Log => S::log,
        UnaryOp::LogPlusOne => S::log1p,
        UnaryOp::Sqrt => S::sqrt,
        UnaryOp::Rsqrt => S::rsqrt,
        UnaryOp::Cbrt => S::cbrt,
        UnaryOp::Tanh => S::tanh,
        UnaryOp::Logistic => S::logistic,
        UnaryOp::Sine => S::sin,
        UnaryOp::Cosine => S::cos,
        UnaryOp::Erf => S::erf,
        // erfc = 1 − erf; the tail loses relative precision past |x| ≈ 4,
        // where JAX-exported GELU multiplies it by a tiny x anyway.
        UnaryOp::Erfc => |x| Ok(S::one().sub(&x.erf()?)),
        // Bit-level and special functions.
        UnaryOp::RoundNearestAfz => |x| Ok(x.round_nearest_afz()),
        UnaryOp::Tan | UnaryOp::ChloTan => S::tan,
        UnaryOp::ErfInv => S::erf_inv,
        UnaryOp::Lgamma => S::lgamma,
        UnaryOp::Digamma => S::digamma,
        UnaryOp::BesselI1e => S::bessel_i1e,
        UnaryOp::Sinh => S::sinh,
        UnaryOp::Cosh => S::cosh,
        UnaryOp::Asin => S::asin,
        UnaryOp::Acos => S::acos,
        UnaryOp::Atan => S::atan,
        UnaryOp::Asinh => S::asinh,
        UnaryOp::Acosh => S::acosh,
        UnaryOp::Atanh => S::atanh,
        UnaryOp::Not
        | UnaryOp::IsFinite
        | UnaryOp::IsInf
        | UnaryOp::IsNegInf
        | UnaryOp::IsPosInf
        | UnaryOp::Popcnt
        | UnaryOp::CountLeadingZeros => return None,
    };
    Some(f)
}

/// Whether `unary` maps floats to floats of the operand's shape (and so may
/// write over its operand, [`unary_over`]).
pub(crate) fn unary_maps_floats(u: UnaryOp) -> bool {
    float_unary::<f64>(u).is_some()
}

/// [`unary`] of a float operand that dies at this op, its result written
/// over it (as [`binary_over`]); whether every element was finite before
/// (checked only when `check`).
pub(crate) fn unary_over<S: Scalar>(
    u: UnaryOp,
    x: &mut Tensor<S>,
    out: ElemType,
    check: bool,
) -> Result<bool, Fail> {
    let f = float_unary::<S>(u)
        .ok_or_else(|| Fail::msg(format!("{} does not map floats to floats", u.name())))?;
    let finite = par::update(
        &mut x.data,
        |_, v| f(v).map(|y| y.round_to(out)),
        |v| !check || v.all_finite(),
    )?;
    Ok(finite)
}

pub fn unary<S: Scalar>(u: UnaryOp, x: &Value<S>, out: ElemType) -> Result<Value<S>, Fail> {
    match x {
        Value::Float(t, _) => match (float_unary::<S>(u), u) {
            (Some(f), _) => map_float(t, out, f),
            (None, UnaryOp::Not) => Err(Fail::msg("not is defined on integers and booleans only")),
            (None, UnaryOp::IsFinite | UnaryOp::IsInf | UnaryOp::IsNegInf | UnaryOp::IsPosInf) => {
                Ok(float_class(u, t))
            }
            (None, _) => Err(Fail::msg(format!(
                "{} is defined on integers only",
                u.name()
            ))),
        },
        Value::Int(t, e) => {
            let e = *e;
            let r = match u {
                UnaryOp::Negate => t.map(|&x| wrap_int(x.wrapping_neg(), e)),
                // Unsigned values are their own magnitude (and ui64 above 2⁶³
                // must not be read as negative).
                UnaryOp::Abs if e.is_unsigned() => t.clone(),
                UnaryOp::Abs => t.map(|&x| wrap_int(x.wrapping_abs(), e)),
                UnaryOp::Sign if e.is_unsigned() => t.map(|&x| i64::from(x != 0)),
                UnaryOp::Sign => t.map(|&x| x.signum()),
                UnaryOp::Square => t.map(|&x| wrap_int(x.wrapping_mul(x), e)),
                UnaryOp::Not if e == ElemType::I1 => t.map(|&x| 1 - x),
                UnaryOp::Not => t.map(|&x| wrap_int(!x, e)),
                UnaryOp::Popcnt | UnaryOp::CountLeadingZeros if !e.is_bool() => {
                    t.map(|&x| bits::bit_count(u, x, e))
                }
                _ => {
                    return Err(Fail::msg(format!(
                        "{} is not defined on integer type {e}",
                        u.name()
                    )))
                }
            };
            Ok(Value::Int(r, e))
        }
    }
}

/// is_finite / is_inf / is_neg_inf / is_pos_inf of each element, as i1.
fn float_class<S: Scalar>(u: UnaryOp, t: &Tensor<S>) -> Value<S> {
    let inf = S::from_f64(f64::INFINITY).unwrap_or_else(|_| S::zero());
    let neg_inf = inf.neg();
    let holds = |x: &S| -> bool {
        let pos = x.primal_cmp(&inf) == Some(Ordering::Equal);
        let neg = x.primal_cmp(&neg_inf) == Some(Ordering::Equal);
        match u {
            UnaryOp::IsFinite => !x.is_nan() && !pos && !neg,
            UnaryOp::IsInf => pos || neg,
            UnaryOp::IsPosInf => pos,
            _ => neg,
        }
    };
    Value::Int(t.map(|x| holds(x) as i64), ElemType::I1)
}

/// IEEE/spec integer power: negative exponents give 1/xⁿ truncated (an
/// unsigned exponent is never negative, ui64 above 2⁶³ included).
fn int_pow(a: i64, b: i64, elem: ElemType) -> i64 {
    if b < 0 && !elem.is_unsigned() {
        return match a {
            1 => 1,
            -1 => {
                if b % 2 == 0 {
                    1
                } else {
                    -1
                }
            }
            _ => 0,
        };
    }
    let (mut base, mut exp, mut acc) = (a, b as u64, 1i64);
    while exp > 0 {
        if exp & 1 == 1 {
            acc = wrap_int(acc.wrapping_mul(base), elem);
        }
        base = wrap_int(base.wrapping_mul(base), elem);
        exp >>= 1;
    }
    acc
}

/// The spec's boolean (i1) meaning of a binary op: add and maximum are
/// logical or, multiply and minimum logical and; subtract, divide, remainder
/// and power are not defined on booleans.
fn bool_binary(b: BinaryOp, x: i64, y: i64) -> Result<i64, Fail> {
    let (x, y) = (x != 0, y != 0);
    let r = match b {
        BinaryOp::Add | BinaryOp::Maximum | BinaryOp::Or => x | y,
        BinaryOp::Multiply | BinaryOp::Minimum | BinaryOp::And => x & y,
        BinaryOp::Xor => x ^ y,
        BinaryOp::Subtract
        | BinaryOp::Divide
        | BinaryOp::Remainder
        | BinaryOp::Power
        | BinaryOp::ShiftLeft
        | BinaryOp::ShiftRightLogical
        | BinaryOp::ShiftRightArithmetic
        | BinaryOp::Mulhi
        | BinaryOp::Atan2
        | BinaryOp::Polygamma
        | BinaryOp::Zeta
        | BinaryOp::NextAfter => {
            return Err(Fail::msg(format!("{} is not defined on i1", b.name())))
        }
    };
    Ok(i64::from(r))
}

/// A binary op on integers of type `e` (stored sign-extended in i64, ui64 as
/// its bit pattern): two's-complement wrap-around in `e`'s width. Division by
/// zero, which the spec leaves open, follows XLA (what JAX runs): x / 0 is all
/// ones (−1, or the unsigned maximum) and x % 0 is x; MIN / −1 wraps to MIN.
pub(crate) fn int_binary(b: BinaryOp, x: i64, y: i64, e: ElemType) -> Result<i64, Fail> {
    if e == ElemType::I1 {
        return bool_binary(b, x, y);
    }
    let unsigned = e.is_unsigned();
    let r = match b {
        BinaryOp::Add => x.wrapping_add(y),
        BinaryOp::Subtract => x.wrapping_sub(y),
        BinaryOp::Multiply => x.wrapping_mul(y),
        BinaryOp::Divide if y == 0 => -1,
        BinaryOp::Remainder if y == 0 => x,
        BinaryOp::Divide if unsigned => ((x as u64) / (y as u64)) as i64,
        BinaryOp::Divide => x.wrapping_div(y),
        BinaryOp::Remainder if unsigned => ((x as u64) % (y as u64)) as i64,
        BinaryOp::Remainder => x.wrapping_rem(y),
        BinaryOp::Maximum if unsigned => (x as u64).max(y as u64) as i64,
        BinaryOp::Maximum => x.max(y),
        BinaryOp::Minimum if unsigned => (x as u64).min(y as u64) as i64,
        BinaryOp::Minimum => x.min(y),
        BinaryOp::Power => int_pow(x, y, e),
        BinaryOp::And => x & y,
        BinaryOp::Or => x | y,
        BinaryOp::Xor => x ^ y,
        BinaryOp::ShiftLeft | BinaryOp::ShiftRightLogical | BinaryOp::ShiftRightArithmetic => {
            bits::shift(b, x, y, e)
        }
        BinaryOp::Mulhi => bits::mulhi(x, y, e),
        BinaryOp::Atan2 | BinaryOp::Polygamma | BinaryOp::Zeta | BinaryOp::NextAfter => {
            return Err(Fail::msg(format!("{} is defined on floats only", b.name())))
        }
    };
    Ok(wrap_int(r, e))
}

/// A float binary op without decisions (max/min choose by the value, as in
/// [`binary`]).
fn float_binary<S: Scalar>(b: BinaryOp, a: &S, c: &S, out: ElemType) -> Result<S, Fail> {
    Ok(match b {
        BinaryOp::Add => a.add(c),
        BinaryOp::Subtract => a.sub(c),
        BinaryOp::Multiply => a.mul(c),
        BinaryOp::Divide => a.div(c),
        BinaryOp::Remainder => a.rem(c),
        BinaryOp::Power => a.pow(c)?,
        BinaryOp::Maximum => a.max(c),
        BinaryOp::Minimum => a.min(c),
        BinaryOp::And | BinaryOp::Or | BinaryOp::Xor => {
            return Err(Fail::msg("logical ops need integer or boolean operands"))
        }
        BinaryOp::Atan2 => a.atan2(c)?,
        BinaryOp::Polygamma => a.polygamma(c)?,
        BinaryOp::Zeta => a.zeta(c)?,
        BinaryOp::NextAfter => a.next_after(c, out)?,
        BinaryOp::ShiftLeft
        | BinaryOp::ShiftRightLogical
        | BinaryOp::ShiftRightArithmetic
        | BinaryOp::Mulhi => return Err(Fail::msg(format!("{} needs integer operands", b.name()))),
    })
}

pub fn binary<S: Scalar>(
    b: BinaryOp,
    x: &Value<S>,
    y: &Value<S>,
    out: ElemType,
    mut dec: Option<&mut Decisions>,
) -> Result<Value<S>, Fail> {
    match (x, y) {
        (Value::Float(tx, _), Value::Float(ty, _)) if dec.is_none() => {
            same_shape(tx, ty)?;
            // The arithmetic ops one element at a time (no decisions to record).
            let data = par::collect(tx.len(), |i| {
                let (a, c) = (&tx.data[i], &ty.data[i]);
                float_binary(b, a, c, out).map(|r| r.round_to(out))
            })?;
            Ok(Value::Float(Tensor::new(tx.shape.clone(), data), out))
        }
        (Value::Float(tx, _), Value::Float(ty, _)) => {
            same_shape(tx, ty)?;
            let mut data = Vec::with_capacity(tx.len());
            for (i, (a, c)) in tx.data.iter().zip(&ty.data).enumerate() {
                data.push(deciding_binary(b, a, c, i, out, dec.as_deref_mut())?.round_to(out));
            }
            Ok(Value::Float(Tensor::new(tx.shape.clone(), data), out))
        }
        (Value::Int(tx, _), Value::Int(ty, _)) => {
            same_shape(tx, ty)?;
            let data = tx
                .data
                .iter()
                .zip(&ty.data)
                .map(|(&a, &c)| int_binary(b, a, c, out))
                .collect::<Result<Vec<_>, _>>()?;
            Ok(Value::Int(Tensor::new(tx.shape.clone(), data), out))
        }
        _ => Err(Fail::msg("operands mix float and integer types")),
    }
}

/// Element `i` of a float binary op, recording maximum's and minimum's
/// decisions (margin |a − c|, outcome: whether the second operand won).
fn deciding_binary<S: Scalar>(
    b: BinaryOp,
    a: &S,
    c: &S,
    i: usize,
    out: ElemType,
    dec: Option<&mut Decisions>,
) -> Result<S, Fail> {
    if let (Some(d), BinaryOp::Maximum | BinaryOp::Minimum) = (dec, b) {
        d.record(a.gap(c), i);
        let loses = if b == BinaryOp::Maximum {
            Ordering::Less
        } else {
            Ordering::Greater
        };
        d.outcome(usize::from(a.primal_cmp(c) == Some(loses)));
    }
    float_binary(b, a, c, out)
}

/// [`binary`] on float tensors of one shape, its result written over `x`,
/// an operand that dies at this op (`x_first`: it is the first operand),
/// instead of into a fresh tensor: each element is computed by the same
/// function from the same operands, so the result is the same, and a large
/// tensor's allocation and first-touch page faults are saved. Answers
/// whether every element of `x` was finite before (checked only when
/// `check`, else `true`): the caller's record of where non-finite values
/// began reads it, `x` being overwritten.
pub(crate) fn binary_over<S: Scalar>(
    b: BinaryOp,
    x: &mut Tensor<S>,
    y: &Tensor<S>,
    x_first: bool,
    out: ElemType,
    mut dec: Option<&mut Decisions>,
    check: bool,
) -> Result<bool, Fail> {
    same_shape(x, y)?;
    let y = &y.data;
    let old = |v: &S| !check || v.all_finite();
    if dec.is_none() {
        return par::update(
            &mut x.data,
            |i, v| {
                let r = if x_first {
                    float_binary(b, v, &y[i], out)
                } else {
                    float_binary(b, &y[i], v, out)
                };
                r.map(|r| r.round_to(out))
            },
            old,
        );
    }
    // Decisions are recorded in index order, on one thread (as `binary`).
    let mut held = true;
    for (i, v) in x.data.iter_mut().enumerate() {
        held &= old(v);
        let r = if x_first {
            deciding_binary(b, v, &y[i], i, out, dec.as_deref_mut())
        } else {
            deciding_binary(b, &y[i], v, i, out, dec.as_deref_mut())
        }?;
        *v = r.round_to(out);
    }
    Ok(held)
}

/// [`binary_over`] with the other operand a broadcast not materialised:
/// element `i` of it is `src[base_i]` at the strided offsets of `extents`
/// (see `par::update_strided`), the same element the broadcast would hold.
#[allow(clippy::too_many_arguments)]
pub(crate) fn binary_over_strided<S: Scalar>(
    b: BinaryOp,
    x: &mut Tensor<S>,
    (src, extents, strides): (&[S], &[usize], &[isize]),
    x_first: bool,
    out: ElemType,
    dec: Option<&mut Decisions>,
    check: bool,
) -> Result<bool, Fail> {
    let old = |v: &S| !check || v.all_finite();
    let Some(d) = dec else {
        return par::update_strided(
            &mut x.data,
            src,
            extents,
            strides,
            |_, v, c| {
                let r = if x_first {
                    float_binary(b, v, c, out)
                } else {
                    float_binary(b, c, v, out)
                };
                r.map(|r| r.round_to(out))
            },
            old,
        );
    };
    // Decisions are recorded in index order, on one thread (as `binary`).
    let mut held = true;
    let xs = &mut x.data;
    par::walk_strided(extents, strides, |i, o| {
        let (v, c) = (&xs[i], &src[o]);
        held &= old(v);
        let r = if x_first {
            deciding_binary(b, v, c, i, out, Some(&mut *d))
        } else {
            deciding_binary(b, c, v, i, out, Some(&mut *d))
        }?;
        xs[i] = r.round_to(out);
        Ok::<(), Fail>(())
    })?;
    Ok(held)
}

pub(crate) fn direction_holds(dir: CompareDirection, ord: Option<Ordering>) -> bool {
    match ord {
        // Unordered (NaN): every direction is false except NE.
        None => dir == CompareDirection::Ne,
        Some(o) => match dir {
            CompareDirection::Eq => o == Ordering::Equal,
            CompareDirection::Ne => o != Ordering::Equal,
            CompareDirection::Ge => o != Ordering::Less,
            CompareDirection::Gt => o == Ordering::Greater,
            CompareDirection::Le => o != Ordering::Greater,
            CompareDirection::Lt => o == Ordering::Less,
        },
    }
}

/// `compare`: FLOAT (IEEE, the default for floats) or TOTALORDER on floats,
/// SIGNED/UNSIGNED on integers (default from the element type). Every float
/// comparison is a decision with margin |a − b|.
pub fn compare<S: Scalar>(
    dir: CompareDirection,
    ct: Option<CompareType>,
    x: &Value<S>,
    y: &Value<S>,
    mut dec: Option<&mut Decisions>,
) -> Result<Value<S>, Fail> {
    let data = match (x, y) {
        (Value::Float(tx, _), Value::Float(ty, _)) => {
            same_shape(tx, ty)?;
            let total = ct == Some(CompareType::TotalOrder);
            tx.data
                .iter()
                .zip(&ty.data)
                .enumerate()
                .map(|(i, (a, c))| {
                    let ord = if total {
                        Some(a.total_cmp(c))
                    } else {
                        a.primal_cmp(c)
                    };
                    let holds = direction_holds(dir, ord);
                    if let Some(d) = dec.as_deref_mut() {
                        d.record(a.gap(c), i);
                        d.outcome(usize::from(holds));
                    }
                    holds as i64
                })
                .collect()
        }
        (Value::Int(tx, e), Value::Int(ty, _)) => {
            same_shape(tx, ty)?;
            let unsigned = match ct {
                Some(CompareType::Unsigned) => true,
                Some(CompareType::Signed) => false,
                _ => e.is_unsigned(),
            };
            tx.data
                .iter()
                .zip(&ty.data)
                .map(|(&a, &c)| {
                    let ord = if unsigned {
                        (a as u64).cmp(&(c as u64))
                    } else {
                        a.cmp(&c)
                    };
                    direction_holds(dir, Some(ord)) as i64
                })
                .collect()
        }
        _ => return Err(Fail::msg("operands mix float and integer types")),
    };
    Ok(Value::Int(
        Tensor::new(x.shape().to_vec(), data),
        ElemType::I1,
    ))
}

/// Element `i` of a tensor that is either a scalar (broadcast) or full-size.
fn pick<T>(t: &Tensor<T>, i: usize) -> &T {
    if t.data.len() == 1 {
        &t.data[0]
    } else {
        &t.data[i]
    }
}

fn check_scalar_or_same<T>(what: &str, t: &Tensor<T>, shape: &[usize]) -> Result<(), Fail> {
    if t.shape.is_empty() || t.shape == shape {
        Ok(())
    } else {
        Err(Fail::msg(format!(
            "{what} has shape {:?}, expected a scalar or {:?}",
            t.shape, shape
        )))
    }
}

/// `select(pred, on_true, on_false)`; pred is a scalar or has the operands' shape.
pub fn select<S: Scalar>(
    pred: &Value<S>,
    on_true: &Value<S>,
    on_false: &Value<S>,
) -> Result<Value<S>, Fail> {
    let p = pred.as_int().ok_or_else(|| Fail::msg("pred must be i1"))?;
    check_scalar_or_same("pred", p, on_true.shape())?;
    match (on_true, on_false) {
        (Value::Float(t, e), Value::Float(f, _)) => {
            same_shape(t, f)?;
            let data = par::collect_ok(t.len(), |i| {
                if *pick(p, i) != 0 {
                    t.data[i].clone()
                } else {
                    f.data[i].clone()
                }
            });
            Ok(Value::Float(Tensor::new(t.shape.clone(), data), *e))
        }
        (Value::Int(t, e), Value::Int(f, _)) => {
            same_shape(t, f)?;
            let data = (0..t.len())
                .map(|i| {
                    if *pick(p, i) != 0 {
                        t.data[i]
                    } else {
                        f.data[i]
                    }
                })
                .collect();
            Ok(Value::Int(Tensor::new(t.shape.clone(), data), *e))
        }
        _ => Err(Fail::msg(
            "on_true and on_false mix float and integer types",
        )),
    }
}

/// `clamp(min, operand, max)` = min(max(operand, min), max); min/max may be
/// scalars. For floats each element is a decision against both bounds, margin
/// the distance to the nearer bound (ReLU6 is a clamp).
pub fn clamp<S: Scalar>(
    lo: &Value<S>,
    x: &Value<S>,
    hi: &Value<S>,
    mut dec: Option<&mut Decisions>,
) -> Result<Value<S>, Fail> {
    match (lo, x, hi) {
        (Value::Float(l, _), Value::Float(t, e), Value::Float(h, _)) => {
            check_scalar_or_same("min", l, &t.shape)?;
            check_scalar_or_same("max", h, &t.shape)?;
            let data = (0..t.len())
                .map(|i| {
                    let (lv, hv, xv) = (pick(l, i), pick(h, i), &t.data[i]);
                    if let Some(d) = dec.as_deref_mut() {
                        d.record(xv.gap(lv).min(xv.gap(hv)), i);
                        d.outcome(if xv.primal_cmp(lv) == Some(Ordering::Less) {
                            0
                        } else if xv.primal_cmp(hv) == Some(Ordering::Greater) {
                            2
                        } else {
                            1
                        });
                    }
                    xv.max(lv).min(hv).round_to(*e)
                })
                .collect();
            Ok(Value::Float(Tensor::new(t.shape.clone(), data), *e))
        }
        (Value::Int(l, _), Value::Int(t, e), Value::Int(h, _)) => {
            check_scalar_or_same("min", l, &t.shape)?;
            check_scalar_or_same("max", h, &t.shape)?;
            let unsigned = e.is_unsigned();
            let data = (0..t.len())
                .map(|i| {
                    let (lv, hv, xv) = (*pick(l, i), *pick(h, i), t.data[i]);
                    if unsigned {
                        (xv as u64).max(lv as u64).min(hv as u64) as i64
                    } else {
                        xv.max(lv).min(hv)
                    }
                })
                .collect();
            Ok(Value::Int(Tensor::new(t.shape.clone(), data), *e))
        }
        _ => Err(Fail::msg("clamp operands mix float and integer types")),
    }
}

/// `convert`: float→float rounds to the result type; float→int truncates toward
/// zero (saturating; NaN → 0); int→float is exact then rounded; int→int wraps;
/// anything → i1 is `x ≠ 0`.
pub fn convert<S: Scalar>(x: &Value<S>, out: ElemType) -> Result<Value<S>, Fail> {
    Ok(match x {
        Value::Float(t, _) if out.is_float() => Value::Float(
            Tensor::new(
                t.shape.clone(),
                par::collect_ok(t.len(), |i| t.data[i].clone().round_to(out)),
            ),
            out,
        ),
        Value::Float(t, _) if out == ElemType::I1 => {
            Value::Int(t.map(|v| (!v.is_zero()) as i64), out)
        }
        Value::Float(t, _) => {
            let (lo, hi) = int_range(out);
            Value::Int(
                t.map(|v| {
                    let r = v.trunc().to_f64();
                    if r.is_nan() {
                        0
                    } else if out == ElemType::UI64 {
                        // Saturating f64 → u64, stored as the bit pattern.
                        r.clamp(lo, hi) as u64 as i64
                    } else {
                        r.clamp(lo, hi) as i64
                    }
                }),
                out,
            )
        }
        Value::Int(t, e) if out.is_float() => Value::Float(
            t.map(|&v| {
                let s = if *e == ElemType::UI64 && v < 0 {
                    // ui64 above 2⁶³: exact as f64 sums of two halves.
                    S::from_i64((v as u64 >> 1) as i64)
                        .add(&S::from_i64((v as u64 >> 1) as i64))
                        .add(&S::from_i64(v & 1))
                } else {
                    S::from_i64(v)
                };
                s.round_to(out)
            }),
            out,
        ),
        Value::Int(t, _) if out == ElemType::I1 => Value::Int(t.map(|&v| (v != 0) as i64), out),
        Value::Int(t, _) => Value::Int(t.map(|&v| wrap_int(v, out)), out),
    })
}

/// Saturation bounds of an integer type, as f64.
fn int_range(e: ElemType) -> (f64, f64) {
    match e {
        ElemType::I8 => (i8::MIN as f64, i8::MAX as f64),
        ElemType::UI8 => (0.0, u8::MAX as f64),
        ElemType::I16 => (i16::MIN as f64, i16::MAX as f64),
        ElemType::UI16 => (0.0, u16::MAX as f64),
        ElemType::I32 => (i32::MIN as f64, i32::MAX as f64),
        ElemType::UI32 => (0.0, u32::MAX as f64),
        ElemType::UI64 => (0.0, u64::MAX as f64),
        _ => (i64::MIN as f64, i64::MAX as f64),
    }
}
