//! The elementwise ops of fused loops over chunk slices, each the generic
//! evaluator's f32 op (exp, tanh and logistic through `crate::vmath`), with
//! a slice or a uniform scalar for either operand of a binary op ([`Map2`]).

use den::scalar::Scalar;
use ir::{BinaryOp, CompareDirection, UnaryOp};

/// `b` where `pick_b`, else `a`, as a bit mask: no branch, so data-dependent
/// choices (ReLU, max-pool) cost no mispredictions and loops vectorise.
#[inline(always)]
pub(super) fn choose(pick_b: bool, a: f32, b: f32) -> f32 {
    let m = (pick_b as u32).wrapping_neg();
    f32::from_bits((b.to_bits() & m) | (a.to_bits() & !m))
}

/// StableHLO `maximum` as the generic evaluator has it: NaN wins (the first
/// one), `+0` beats `-0`. Branch-free: `b` when it is greater, when only
/// `b` is NaN, or when the two are equal and `a` is negative (`-0` vs `+0`).
#[inline(always)]
pub(crate) fn max_f32(a: f32, b: f32) -> f32 {
    let pick_b = (b > a) | (!a.is_nan() & b.is_nan()) | ((a == b) & a.is_sign_negative());
    choose(pick_b, a, b)
}

/// StableHLO `minimum`: NaN wins (the first one), `-0` beats `+0`.
#[inline(always)]
pub(crate) fn min_f32(a: f32, b: f32) -> f32 {
    let pick_b = (b < a) | (!a.is_nan() & b.is_nan()) | ((a == b) & a.is_sign_positive());
    choose(pick_b, a, b)
}

/// `out[i] = f(x[i])`, monomorphised per op so the loop has no indirect call
/// and can vectorise.
#[inline(always)]
pub(super) fn map1(x: &[f32], out: &mut [f32], f: impl Fn(&f32) -> f32) {
    for (o, x) in out.iter_mut().zip(x) {
        *o = f(x);
    }
}

/// The two operands of a binary op over a chunk: two slices, or one slice
/// and a uniform value (a scalar in the loop instead of a filled register).
pub(super) trait Map2: Copy {
    /// `out[i] = f(x[i], y[i])`, monomorphised per op and operand form.
    fn map(self, out: &mut [f32], f: impl Fn(f32, f32) -> f32);
}

impl Map2 for (&[f32], &[f32]) {
    #[inline(always)]
    fn map(self, out: &mut [f32], f: impl Fn(f32, f32) -> f32) {
        for ((o, &a), &c) in out.iter_mut().zip(self.0).zip(self.1) {
            *o = f(a, c);
        }
    }
}

impl Map2 for (f32, &[f32]) {
    #[inline(always)]
    fn map(self, out: &mut [f32], f: impl Fn(f32, f32) -> f32) {
        for (o, &c) in out.iter_mut().zip(self.1) {
            *o = f(self.0, c);
        }
    }
}

impl Map2 for (&[f32], f32) {
    #[inline(always)]
    fn map(self, out: &mut [f32], f: impl Fn(f32, f32) -> f32) {
        for (o, &a) in out.iter_mut().zip(self.0) {
            *o = f(a, self.1);
        }
    }
}

#[inline(always)]
pub(super) fn unary(u: UnaryOp, x: &[f32], out: &mut [f32]) {
    match u {
        UnaryOp::Negate => map1(x, out, |x| -x),
        UnaryOp::Abs => map1(x, out, |x| x.abs()),
        UnaryOp::Square => map1(x, out, |x| x * x),
        UnaryOp::Sqrt => map1(x, out, |x| f32::sqrt(*x)),
        UnaryOp::Floor => map1(x, out, |x| x.floor()),
        UnaryOp::Ceil => map1(x, out, |x| x.ceil()),
        UnaryOp::Sign => map1(x, out, Scalar::sign),
        UnaryOp::RoundNearestEven => map1(x, out, |x| x.round_ties_even()),
        UnaryOp::Exponential => map1(x, out, |&x| crate::vmath::exp(x)),
        UnaryOp::ExponentialMinusOne => map1(x, out, |x| Scalar::expm1(x).unwrap_or(f32::NAN)),
        UnaryOp::Log => map1(x, out, |x| Scalar::log(x).unwrap_or(f32::NAN)),
        UnaryOp::LogPlusOne => map1(x, out, |x| Scalar::log1p(x).unwrap_or(f32::NAN)),
        UnaryOp::Rsqrt => map1(x, out, |x| Scalar::rsqrt(x).unwrap_or(f32::NAN)),
        UnaryOp::Cbrt => map1(x, out, |x| Scalar::cbrt(x).unwrap_or(f32::NAN)),
        UnaryOp::Tanh => map1(x, out, |&x| crate::vmath::tanh(x)),
        UnaryOp::Logistic => map1(x, out, |&x| crate::vmath::logistic(x)),
        UnaryOp::Sine => map1(x, out, |x| Scalar::sin(x).unwrap_or(f32::NAN)),
        UnaryOp::Cosine => map1(x, out, |x| Scalar::cos(x).unwrap_or(f32::NAN)),
        UnaryOp::Erf => map1(x, out, |x| Scalar::erf(x).unwrap_or(f32::NAN)),
        UnaryOp::Erfc => map1(x, out, |x| 1.0 - Scalar::erf(x).unwrap_or(f32::NAN)),
        // The special functions through the f32 scalar, as the
        // generic evaluator computes them.
        UnaryOp::RoundNearestAfz => map1(x, out, Scalar::round_nearest_afz),
        UnaryOp::Tan | UnaryOp::ChloTan => map1(x, out, |x| Scalar::tan(x).unwrap_or(f32::NAN)),
        UnaryOp::ErfInv => map1(x, out, |x| Scalar::erf_inv(x).unwrap_or(f32::NAN)),
        UnaryOp::Lgamma => map1(x, out, |x| Scalar::lgamma(x).unwrap_or(f32::NAN)),
        UnaryOp::Digamma => map1(x, out, |x| Scalar::digamma(x).unwrap_or(f32::NAN)),
        UnaryOp::BesselI1e => map1(x, out, |x| Scalar::bessel_i1e(x).unwrap_or(f32::NAN)),
        UnaryOp::Sinh => map1(x, out, |x| Scalar::sinh(x).unwrap_or(f32::NAN)),
        UnaryOp::Cosh => map1(x, out, |x| Scalar::cosh(x).unwrap_or(f32::NAN)),
        UnaryOp::Asin => map1(x, out, |x| Scalar::asin(x).unwrap_or(f32::NAN)),
        UnaryOp::Acos => map1(x, out, |x| Scalar::acos(x).unwrap_or(f32::NAN)),
        UnaryOp::Atan => map1(x, out, |x| Scalar::atan(x).unwrap_or(f32::NAN)),
        UnaryOp::Asinh => map1(x, out, |x| Scalar::asinh(x).unwrap_or(f32::NAN)),
        UnaryOp::Acosh => map1(x, out, |x| Scalar::acosh(x).unwrap_or(f32::NAN)),
        UnaryOp::Atanh => map1(x, out, |x| Scalar::atanh(x).unwrap_or(f32::NAN)),
        // Rejected when the plan is compiled (integers only, or an i1 result).
        UnaryOp::Not
        | UnaryOp::Popcnt
        | UnaryOp::CountLeadingZeros
        | UnaryOp::IsFinite
        | UnaryOp::IsInf
        | UnaryOp::IsNegInf
        | UnaryOp::IsPosInf => out.fill(f32::NAN),
    }
}

/// Whether a unary op is fused (float operands and a float result).
pub(crate) fn fusable_unary(u: UnaryOp) -> bool {
    !(u == UnaryOp::Not || u.is_bit_count() || u.is_predicate())
}

/// Whether a binary op is fused (float operands).
pub(crate) fn fusable_binary(b: BinaryOp) -> bool {
    // next_after steps in the element type's spacing, which the f32 kernels
    // do not know: the generic evaluator runs it.
    !(b.is_logical() || b.is_shift() || matches!(b, BinaryOp::NextAfter | BinaryOp::Mulhi))
}

#[inline(always)]
pub(super) fn binary(b: BinaryOp, xy: impl Map2, out: &mut [f32]) {
    match b {
        BinaryOp::Add => xy.map(out, |a, c| a + c),
        BinaryOp::Subtract => xy.map(out, |a, c| a - c),
        BinaryOp::Multiply => xy.map(out, |a, c| a * c),
        BinaryOp::Divide => xy.map(out, |a, c| a / c),
        BinaryOp::Maximum => xy.map(out, max_f32),
        BinaryOp::Minimum => xy.map(out, min_f32),
        BinaryOp::Remainder => xy.map(out, |a, c| Scalar::rem(&a, &c)),
        BinaryOp::Power => xy.map(out, |a, c| Scalar::pow(&a, &c).unwrap_or(f32::NAN)),
        // Inverse trigonometric and special functions.
        BinaryOp::Atan2 => xy.map(out, |a, c| Scalar::atan2(&a, &c).unwrap_or(f32::NAN)),
        BinaryOp::Polygamma => xy.map(out, |a, c| Scalar::polygamma(&a, &c).unwrap_or(f32::NAN)),
        BinaryOp::Zeta => xy.map(out, |a, c| Scalar::zeta(&a, &c).unwrap_or(f32::NAN)),
        // Rejected when the plan is compiled (integers only, or not fused).
        BinaryOp::And
        | BinaryOp::Or
        | BinaryOp::Xor
        | BinaryOp::ShiftLeft
        | BinaryOp::ShiftRightLogical
        | BinaryOp::ShiftRightArithmetic
        | BinaryOp::NextAfter
        | BinaryOp::Mulhi => out.fill(f32::NAN),
    }
}

#[inline(always)]
pub(super) fn compare(d: CompareDirection, total: bool, xy: impl Map2, out: &mut [f32]) {
    use std::cmp::Ordering;
    if total {
        xy.map(out, |a, c| {
            let ord = a.total_cmp(&c);
            let holds = match d {
                CompareDirection::Eq => ord == Ordering::Equal,
                CompareDirection::Ne => ord != Ordering::Equal,
                CompareDirection::Ge => ord != Ordering::Less,
                CompareDirection::Gt => ord == Ordering::Greater,
                CompareDirection::Le => ord != Ordering::Greater,
                CompareDirection::Lt => ord == Ordering::Less,
            };
            holds as u8 as f32
        });
        return;
    }
    match d {
        CompareDirection::Eq => xy.map(out, |a, c| (a == c) as u8 as f32),
        CompareDirection::Ne => xy.map(out, |a, c| (a != c) as u8 as f32),
        CompareDirection::Ge => xy.map(out, |a, c| (a >= c) as u8 as f32),
        CompareDirection::Gt => xy.map(out, |a, c| (a > c) as u8 as f32),
        CompareDirection::Le => xy.map(out, |a, c| (a <= c) as u8 as f32),
        CompareDirection::Lt => xy.map(out, |a, c| (a < c) as u8 as f32),
    }
}

#[cfg(test)]
mod tests {
    use super::{max_f32, min_f32};

    /// The rules spelled out case by case, as the generic evaluator states them.
    fn max_ref(a: f32, b: f32) -> f32 {
        if a.is_nan() {
            a
        } else if b.is_nan() {
            b
        } else if a > b {
            a
        } else if b > a || a.is_sign_negative() {
            b
        } else {
            a
        }
    }

    fn min_ref(a: f32, b: f32) -> f32 {
        if a.is_nan() {
            a
        } else if b.is_nan() {
            b
        } else if a < b {
            a
        } else if b < a || a.is_sign_positive() {
            b
        } else {
            a
        }
    }

    #[test]
    fn branch_free_max_min_keep_nan_and_signed_zero_rules() {
        let nan_a = f32::from_bits(0x7fc0_0001);
        let nan_b = f32::from_bits(0xffc0_0002);
        let vals = [
            0.0,
            -0.0,
            1.0,
            -1.0,
            f32::INFINITY,
            f32::NEG_INFINITY,
            f32::MIN_POSITIVE,
            3.0e38,
            nan_a,
            nan_b,
        ];
        for &a in &vals {
            for &b in &vals {
                assert_eq!(
                    max_f32(a, b).to_bits(),
                    max_ref(a, b).to_bits(),
                    "max({a}, {b})"
                );
                assert_eq!(
                    min_f32(a, b).to_bits(),
                    min_ref(a, b).to_bits(),
                    "min({a}, {b})"
                );
            }
        }
    }
}
