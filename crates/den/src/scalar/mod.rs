//! The scalar abstraction the generic evaluator is written against, and its
//! implementations: `f64` (the real-number proxy), `f32` (real f32/bf16/f16
//! numerics), [`Bf16`] ("run this module in bf16"), [`Ieee`] (every tensor in
//! its own element type, f64 included: what `certgrad run` computes),
//! [`Dual`] (forward-mode derivatives) and [`Exact`] (big rationals with ±∞).
//!
//! Contract: arithmetic (`add`, `mul`, …) is the scalar's own arithmetic with no
//! rounding to a StableHLO element type; the evaluator calls
//! [`Scalar::round_to`] after every float op with the op's result element type
//! (and [`Scalar::round_accumulated`] after the accumulating ops dot_general,
//! convolution and recognised reductions). Functions that need not be rational
//! return `Err(NotExact)` when the scalar cannot represent their result.

use crate::special;
use ir::ElemType;
use num_bigint::BigInt;
use num_rational::BigRational;
use num_traits::{One, Signed, ToPrimitive, Zero};
use std::cmp::Ordering;
use std::fmt::{self, Debug};

mod dual;
mod exact;

pub use dual::Dual;
pub use exact::Exact;

/// A scalar that cannot represent an op's result exactly (an irrational value,
/// NaN, an infinite constant the scalar does not model).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NotExact(pub String);

impl fmt::Display for NotExact {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for NotExact {}

/// What the evaluator needs from a number. Comparisons, margins and output use
/// the *primal* value (for a dual number, its value part).
pub trait Scalar: Clone + Debug + Send + Sync + 'static {
    /// Short name for messages (`f64`, `dual<f64>`, `exact`).
    fn type_name() -> String;
    /// True when results can be undefined without an error from the op itself
    /// (exact ∞−∞, division by zero); the evaluator then checks every float op's
    /// output with [`Scalar::undefined`].
    const MAY_BE_UNDEFINED: bool = false;

    fn zero() -> Self;
    fn one() -> Self;
    /// A float constant (every f16/bf16/f32/f64 value is a dyadic rational).
    fn from_f64(x: f64) -> Result<Self, NotExact>;
    fn from_i64(x: i64) -> Self;
    /// The primal value, rounded to f64.
    fn to_f64(&self) -> f64;
    fn is_zero(&self) -> bool;
    fn is_nan(&self) -> bool;

    fn add(&self, o: &Self) -> Self;
    fn sub(&self, o: &Self) -> Self;
    fn mul(&self, o: &Self) -> Self;
    fn div(&self, o: &Self) -> Self;
    fn neg(&self) -> Self;
    fn abs(&self) -> Self;
    /// `self - o * trunc(self / o)`: the sign follows the dividend (spec `remainder`).
    fn rem(&self, o: &Self) -> Self;

    /// IEEE comparison of primal values; `None` when a NaN is involved.
    fn primal_cmp(&self, o: &Self) -> Option<Ordering>;
    /// Total order of primal values (-0 < +0, NaN ordered by sign) for
    /// `compare … TOTALORDER`.
    fn total_cmp(&self, o: &Self) -> Ordering;

    /// IEEE maximum: NaN propagates, +0 beats -0; on an exact tie the first
    /// operand is chosen (for a dual number: its tangent).
    fn max(&self, o: &Self) -> Self {
        ieee_extremum(self, o, Ordering::Greater)
    }

    /// IEEE minimum: NaN propagates, -0 beats +0; exact ties choose the first operand.
    fn min(&self, o: &Self) -> Self {
        ieee_extremum(self, o, Ordering::Less)
    }

    /// |primal(self) − primal(o)| as f64: the margin of a decision between them.
    fn gap(&self, o: &Self) -> f64 {
        self.sub(o).to_f64().abs()
    }

    /// -1, ±0 or 1 (NaN stays NaN).
    fn sign(&self) -> Self;
    fn floor(&self) -> Self;
    fn ceil(&self) -> Self;
    fn round_nearest_even(&self) -> Self;
    /// Round toward zero.
    fn trunc(&self) -> Self {
        if self.primal_cmp(&Self::zero()) == Some(Ordering::Less) {
            self.ceil()
        } else {
            self.floor()
        }
    }

    fn exp(&self) -> Result<Self, NotExact>;
    fn expm1(&self) -> Result<Self, NotExact>;
    fn log(&self) -> Result<Self, NotExact>;
    fn log1p(&self) -> Result<Self, NotExact>;
    fn sqrt(&self) -> Result<Self, NotExact>;
    fn rsqrt(&self) -> Result<Self, NotExact>;
    fn cbrt(&self) -> Result<Self, NotExact>;
    fn tanh(&self) -> Result<Self, NotExact>;
    fn logistic(&self) -> Result<Self, NotExact>;
    fn sin(&self) -> Result<Self, NotExact>;
    fn cos(&self) -> Result<Self, NotExact>;
    fn erf(&self) -> Result<Self, NotExact>;
    fn pow(&self, o: &Self) -> Result<Self, NotExact>;

    /// Round an op result to the op's result element type.
    fn round_to(self, elem: ElemType) -> Self;
    /// Round the final value of an accumulating op (dot_general, convolution,
    /// recognised reductions), whose partial sums were kept in the scalar's own
    /// arithmetic.
    fn round_accumulated(self, elem: ElemType) -> Self {
        self.round_to(elem)
    }
    /// Why this value is undefined (exact ∞−∞, 0·∞, division by zero), if it is.
    fn undefined(&self) -> Option<String> {
        None
    }
    /// Whether every component is a finite number (a dual number's tangent
    /// included: an overflow can leave the primal finite and its tangent NaN).
    fn all_finite(&self) -> bool {
        self.to_f64().is_finite()
    }

    // Trigonometric, hyperbolic and special functions, the bit-level
    // float ops. Each default computes on the primal in f64 (`crate::special`
    // or std) and rounds once with `from_f64`: right for the float scalars,
    // which is why f64, f32 and Bf16 keep them. `Dual` overrides every one
    // with its derivative and `Exact` with its rational cases.

    fn tan(&self) -> Result<Self, NotExact> {
        Self::from_f64(self.to_f64().tan())
    }
    fn sinh(&self) -> Result<Self, NotExact> {
        Self::from_f64(self.to_f64().sinh())
    }
    fn cosh(&self) -> Result<Self, NotExact> {
        Self::from_f64(self.to_f64().cosh())
    }
    fn asin(&self) -> Result<Self, NotExact> {
        Self::from_f64(self.to_f64().asin())
    }
    fn acos(&self) -> Result<Self, NotExact> {
        Self::from_f64(self.to_f64().acos())
    }
    fn atan(&self) -> Result<Self, NotExact> {
        Self::from_f64(self.to_f64().atan())
    }
    fn asinh(&self) -> Result<Self, NotExact> {
        Self::from_f64(self.to_f64().asinh())
    }
    fn acosh(&self) -> Result<Self, NotExact> {
        Self::from_f64(self.to_f64().acosh())
    }
    fn atanh(&self) -> Result<Self, NotExact> {
        Self::from_f64(self.to_f64().atanh())
    }
    fn erf_inv(&self) -> Result<Self, NotExact> {
        Self::from_f64(special::erf_inv(self.to_f64()))
    }
    /// log|Γ(x)|.
    fn lgamma(&self) -> Result<Self, NotExact> {
        Self::from_f64(special::lgamma(self.to_f64()))
    }
    fn digamma(&self) -> Result<Self, NotExact> {
        Self::from_f64(special::digamma(self.to_f64()))
    }
    /// e^{−|x|}·I₁(x).
    fn bessel_i1e(&self) -> Result<Self, NotExact> {
        Self::from_f64(special::bessel_i1e(self.to_f64()))
    }
    /// e^{−|x|}·I₀(x) (no op of its own: the derivative of `bessel_i1e`).
    fn bessel_i0e(&self) -> Result<Self, NotExact> {
        Self::from_f64(special::bessel_i0e(self.to_f64()))
    }
    /// Round half away from zero.
    fn round_nearest_afz(&self) -> Self {
        Self::from_f64(special::round_nearest_afz(self.to_f64())).unwrap_or_else(|_| self.clone())
    }
    /// `atan2(self, x)`: the angle of the point (x, self).
    fn atan2(&self, x: &Self) -> Result<Self, NotExact> {
        Self::from_f64(self.to_f64().atan2(x.to_f64()))
    }
    /// `polygamma(self, x)`: the order `self` derivative of digamma at x.
    fn polygamma(&self, x: &Self) -> Result<Self, NotExact> {
        Self::from_f64(special::polygamma(self.to_f64(), x.to_f64()))
    }
    /// Hurwitz `zeta(self, q)`.
    fn zeta(&self, q: &Self) -> Result<Self, NotExact> {
        Self::from_f64(special::zeta(self.to_f64(), q.to_f64()))
    }
    /// The neighbour of `self` toward `o` among the values of float type `elem`.
    fn next_after(&self, o: &Self, elem: ElemType) -> Result<Self, NotExact> {
        Self::from_f64(special::next_after(self.to_f64(), o.to_f64(), elem))
    }
    /// `reduce_precision` of a value of float type `elem`.
    fn reduce_precision(
        &self,
        exponent_bits: u32,
        mantissa_bits: u32,
        elem: ElemType,
    ) -> Result<Self, NotExact> {
        Self::from_f64(special::reduce_precision(
            self.to_f64(),
            elem,
            exponent_bits,
            mantissa_bits,
        ))
    }
}

/// The IEEE maximum (`wins` = `Greater`) or minimum (`wins` = `Less`) of
/// `a` and `b` by their primal values: a NaN propagates (the first NaN
/// operand), the signed zero on the `wins` side of the total order beats the
/// other, and on an exact tie the first operand is chosen.
fn ieee_extremum<S: Scalar>(a: &S, b: &S, wins: Ordering) -> S {
    match a.primal_cmp(b) {
        None => {
            if a.is_nan() {
                a.clone()
            } else {
                b.clone()
            }
        }
        Some(Ordering::Equal) => {
            if a.total_cmp(b) == wins.reverse() {
                b.clone()
            } else {
                a.clone()
            }
        }
        Some(order) => {
            if order == wins {
                a.clone()
            } else {
                b.clone()
            }
        }
    }
}

/// erf in f64: the everywhere-convergent series with positive terms
/// erf(x) = 2/√π · e^{−x²} · Σ 2ⁿ x^{2n+1} / (1·3·…·(2n+1)), which has no
/// cancellation; beyond |x| = 6 erf is ±1 to f64 precision.
pub fn erf_f64(x: f64) -> f64 {
    if x.is_nan() {
        return x;
    }
    let a = x.abs();
    if a >= 6.0 {
        return x.signum();
    }
    if a == 0.0 {
        return x; // ±0
    }
    let x2 = a * a;
    let mut term = a;
    let mut sum = a;
    let mut n = 0.0f64;
    loop {
        n += 1.0;
        term *= 2.0 * x2 / (2.0 * n + 1.0);
        sum += term;
        // Terms grow until n ≈ x², then fall geometrically: stop once negligible.
        if term <= sum * 1e-17 {
            break;
        }
    }
    let r = (std::f64::consts::FRAC_2_SQRT_PI * (-x2).exp() * sum).min(1.0);
    if x < 0.0 {
        -r
    } else {
        r
    }
}

fn logistic_f64(x: f64) -> f64 {
    // Written so neither branch overflows: e^{-|x|} ≤ 1.
    if x >= 0.0 {
        1.0 / (1.0 + (-x).exp())
    } else {
        let e = x.exp();
        e / (1.0 + e)
    }
}

fn rem_f64(a: f64, b: f64) -> f64 {
    // Rust's `%` on floats is fmod: the result takes the dividend's sign.
    a % b
}

fn ieee_cmp_sign_zero(a: f64) -> f64 {
    if a > 0.0 {
        1.0
    } else if a < 0.0 {
        -1.0
    } else {
        a // ±0 and NaN stay as they are
    }
}

impl Scalar for f64 {
    fn type_name() -> String {
        "f64".into()
    }
    fn zero() -> Self {
        0.0
    }
    fn one() -> Self {
        1.0
    }
    fn from_f64(x: f64) -> Result<Self, NotExact> {
        Ok(x)
    }
    fn from_i64(x: i64) -> Self {
        x as f64
    }
    fn to_f64(&self) -> f64 {
        *self
    }
    fn is_zero(&self) -> bool {
        *self == 0.0
    }
    fn is_nan(&self) -> bool {
        f64::is_nan(*self)
    }
    fn add(&self, o: &Self) -> Self {
        self + o
    }
    fn sub(&self, o: &Self) -> Self {
        self - o
    }
    fn mul(&self, o: &Self) -> Self {
        self * o
    }
    fn div(&self, o: &Self) -> Self {
        self / o
    }
    fn neg(&self) -> Self {
        -self
    }
    fn abs(&self) -> Self {
        f64::abs(*self)
    }
    fn rem(&self, o: &Self) -> Self {
        rem_f64(*self, *o)
    }
    fn primal_cmp(&self, o: &Self) -> Option<Ordering> {
        self.partial_cmp(o)
    }
    fn total_cmp(&self, o: &Self) -> Ordering {
        f64::total_cmp(self, o)
    }
    fn sign(&self) -> Self {
        ieee_cmp_sign_zero(*self)
    }
    fn floor(&self) -> Self {
        f64::floor(*self)
    }
    fn ceil(&self) -> Self {
        f64::ceil(*self)
    }
    fn round_nearest_even(&self) -> Self {
        self.round_ties_even()
    }
    fn exp(&self) -> Result<Self, NotExact> {
        Ok(f64::exp(*self))
    }
    fn expm1(&self) -> Result<Self, NotExact> {
        Ok(self.exp_m1())
    }
    fn log(&self) -> Result<Self, NotExact> {
        Ok(self.ln())
    }
    fn log1p(&self) -> Result<Self, NotExact> {
        Ok(self.ln_1p())
    }
    fn sqrt(&self) -> Result<Self, NotExact> {
        Ok(f64::sqrt(*self))
    }
    fn rsqrt(&self) -> Result<Self, NotExact> {
        Ok(1.0 / f64::sqrt(*self))
    }
    fn cbrt(&self) -> Result<Self, NotExact> {
        Ok(f64::cbrt(*self))
    }
    fn tanh(&self) -> Result<Self, NotExact> {
        Ok(f64::tanh(*self))
    }
    fn logistic(&self) -> Result<Self, NotExact> {
        Ok(logistic_f64(*self))
    }
    fn sin(&self) -> Result<Self, NotExact> {
        Ok(f64::sin(*self))
    }
    fn cos(&self) -> Result<Self, NotExact> {
        Ok(f64::cos(*self))
    }
    fn erf(&self) -> Result<Self, NotExact> {
        Ok(erf_f64(*self))
    }
    fn pow(&self, o: &Self) -> Result<Self, NotExact> {
        Ok(self.powf(*o))
    }
    /// f64 is the real-number proxy: no rounding to narrower types.
    fn round_to(self, _elem: ElemType) -> Self {
        self
    }
}

/// f32 rounded to bf16 / f16 (round to nearest even).
fn round_f32_to(x: f32, elem: ElemType) -> f32 {
    match elem {
        ElemType::BF16 => half::bf16::from_f32(x).to_f32(),
        ElemType::F16 => half::f16::from_f32(x).to_f32(),
        _ => x,
    }
}

/// Implements the f32-valued arithmetic shared by `f32` and [`Bf16`]: the
/// non-rational functions are computed in f64 and rounded once to f32.
macro_rules! f32_like_ops {
    ($get:expr, $wrap:expr) => {
        fn zero() -> Self {
            $wrap(0.0)
        }
        fn one() -> Self {
            $wrap(1.0)
        }
        fn from_f64(x: f64) -> Result<Self, NotExact> {
            Ok($wrap(x as f32))
        }
        fn from_i64(x: i64) -> Self {
            $wrap(x as f32)
        }
        fn to_f64(&self) -> f64 {
            $get(self) as f64
        }
        fn is_zero(&self) -> bool {
            $get(self) == 0.0
        }
        fn is_nan(&self) -> bool {
            $get(self).is_nan()
        }
        fn add(&self, o: &Self) -> Self {
            $wrap($get(self) + $get(o))
        }
        fn sub(&self, o: &Self) -> Self {
            $wrap($get(self) - $get(o))
        }
        fn mul(&self, o: &Self) -> Self {
            $wrap($get(self) * $get(o))
        }
        fn div(&self, o: &Self) -> Self {
            $wrap($get(self) / $get(o))
        }
        fn neg(&self) -> Self {
            $wrap(-$get(self))
        }
        fn abs(&self) -> Self {
            $wrap($get(self).abs())
        }
        fn rem(&self, o: &Self) -> Self {
            $wrap($get(self) % $get(o))
        }
        fn primal_cmp(&self, o: &Self) -> Option<Ordering> {
            $get(self).partial_cmp(&$get(o))
        }
        fn total_cmp(&self, o: &Self) -> Ordering {
            $get(self).total_cmp(&$get(o))
        }
        fn gap(&self, o: &Self) -> f64 {
            // The difference of two f32 values is exact in f64.
            ($get(self) as f64 - $get(o) as f64).abs()
        }
        fn sign(&self) -> Self {
            $wrap(ieee_cmp_sign_zero($get(self) as f64) as f32)
        }
        fn floor(&self) -> Self {
            $wrap($get(self).floor())
        }
        fn ceil(&self) -> Self {
            $wrap($get(self).ceil())
        }
        fn round_nearest_even(&self) -> Self {
            $wrap($get(self).round_ties_even())
        }
        fn exp(&self) -> Result<Self, NotExact> {
            Ok($wrap(($get(self) as f64).exp() as f32))
        }
        fn expm1(&self) -> Result<Self, NotExact> {
            Ok($wrap(($get(self) as f64).exp_m1() as f32))
        }
        fn log(&self) -> Result<Self, NotExact> {
            Ok($wrap(($get(self) as f64).ln() as f32))
        }
        fn log1p(&self) -> Result<Self, NotExact> {
            Ok($wrap(($get(self) as f64).ln_1p() as f32))
        }
        fn sqrt(&self) -> Result<Self, NotExact> {
            Ok($wrap($get(self).sqrt()))
        }
        fn rsqrt(&self) -> Result<Self, NotExact> {
            Ok($wrap((1.0 / ($get(self) as f64).sqrt()) as f32))
        }
        fn cbrt(&self) -> Result<Self, NotExact> {
            Ok($wrap(($get(self) as f64).cbrt() as f32))
        }
        fn tanh(&self) -> Result<Self, NotExact> {
            Ok($wrap(($get(self) as f64).tanh() as f32))
        }
        fn logistic(&self) -> Result<Self, NotExact> {
            Ok($wrap(logistic_f64($get(self) as f64) as f32))
        }
        fn sin(&self) -> Result<Self, NotExact> {
            Ok($wrap(($get(self) as f64).sin() as f32))
        }
        fn cos(&self) -> Result<Self, NotExact> {
            Ok($wrap(($get(self) as f64).cos() as f32))
        }
        fn erf(&self) -> Result<Self, NotExact> {
            Ok($wrap(erf_f64($get(self) as f64) as f32))
        }
        fn pow(&self, o: &Self) -> Result<Self, NotExact> {
            Ok($wrap(($get(self) as f64).powf($get(o) as f64) as f32))
        }
    };
}

impl Scalar for f32 {
    fn type_name() -> String {
        "f32".into()
    }
    f32_like_ops!(|x: &f32| *x, |x: f32| x);
    /// f32 arithmetic; results of bf16/f16 ops are rounded to those types.
    fn round_to(self, elem: ElemType) -> Self {
        round_f32_to(self, elem)
    }
}

/// "Run this module in bf16": f32 storage, every float op result rounded to
/// bf16 (f16 for f16 ops), except that dot_general, convolution and recognised
/// reductions accumulate in f32 and round only their final value — and keep it
/// in f32 when the op's result type is f32 (bf16 leaves, f32 accumulate).
#[derive(Clone, Copy, Debug, PartialEq, PartialOrd, Default)]
pub struct Bf16(pub f32);

impl Scalar for Bf16 {
    fn type_name() -> String {
        "bf16".into()
    }
    f32_like_ops!(|x: &Bf16| x.0, Bf16);
    fn round_to(self, elem: ElemType) -> Self {
        match elem {
            ElemType::F16 => Bf16(round_f32_to(self.0, ElemType::F16)),
            _ => Bf16(round_f32_to(self.0, ElemType::BF16)),
        }
    }
    fn round_accumulated(self, elem: ElemType) -> Self {
        match elem {
            ElemType::F32 | ElemType::F64 => self,
            _ => self.round_to(elem),
        }
    }
}

/// "Run this module as the spec defines it": f64 storage, and every float op
/// result rounded to the op's result element type — f64 kept, f32 by `as f32`,
/// bf16/f16 to nearest even straight from f64 (no double rounding through
/// f32). + − × ÷ and sqrt of f32 (bf16, f16) operands computed in f64 and
/// rounded once are the correctly rounded results in the narrow type (f64 has
/// more than 2p+2 bits); the other functions are f64's, rounded once. The
/// accumulating ops (dot_general, convolution, recognised reductions) sum in
/// f64 and round the final value: the spec leaves their order and
/// intermediate precision to the implementation. This is `certgrad run`'s
/// scalar; the certifier's f64 (the real-number proxy, never rounded),
/// [`Dual`] and [`Exact`] stay separate on purpose.
#[derive(Clone, Copy, Debug, PartialEq, PartialOrd, Default)]
pub struct Ieee(pub f64);

impl Ieee {
    /// The f64 value (already rounded to its tensor's element type).
    pub fn get(self) -> f64 {
        self.0
    }
}

/// `x` rounded to the float element type `elem` (f64: unchanged). bf16/f16
/// use `ir::literal::round_to_elem`, which rounds the whole f64 (half's
/// `from_f64` drops the low 32 mantissa bits first, so a value just above a
/// tie would round as the tie).
pub fn round_f64_to(x: f64, elem: ElemType) -> f64 {
    match elem {
        ElemType::F64 => x,
        ElemType::F32 => x as f32 as f64,
        ElemType::BF16 | ElemType::F16 => ir::literal::round_to_elem(x, elem),
        // Integer types are never float op results; keep the value.
        _ => x,
    }
}

/// [`Ieee`]'s arithmetic is f64's: each list names the `Scalar` methods of one
/// signature that delegate (a method added to `Scalar` is one more name).
macro_rules! ieee_delegate {
    (
        unary: [$($u:ident),*],
        binary: [$($b:ident),*],
        fallible: [$($f:ident),*],
        fallible_binary: [$($fb:ident),*],
        predicate: [$($p:ident),*]
    ) => {
        $(fn $u(&self) -> Self { Ieee(<f64 as Scalar>::$u(&self.0)) })*
        $(fn $b(&self, o: &Self) -> Self { Ieee(<f64 as Scalar>::$b(&self.0, &o.0)) })*
        $(fn $f(&self) -> Result<Self, NotExact> { <f64 as Scalar>::$f(&self.0).map(Ieee) })*
        $(fn $fb(&self, o: &Self) -> Result<Self, NotExact> {
            <f64 as Scalar>::$fb(&self.0, &o.0).map(Ieee)
        })*
        $(fn $p(&self) -> bool { <f64 as Scalar>::$p(&self.0) })*
    };
}

impl Scalar for Ieee {
    fn type_name() -> String {
        "ieee".into()
    }
    fn zero() -> Self {
        Ieee(0.0)
    }
    fn one() -> Self {
        Ieee(1.0)
    }
    fn from_f64(x: f64) -> Result<Self, NotExact> {
        Ok(Ieee(x))
    }
    fn from_i64(x: i64) -> Self {
        Ieee(x as f64)
    }
    fn to_f64(&self) -> f64 {
        self.0
    }
    fn primal_cmp(&self, o: &Self) -> Option<Ordering> {
        self.0.partial_cmp(&o.0)
    }
    fn total_cmp(&self, o: &Self) -> Ordering {
        self.0.total_cmp(&o.0)
    }
    fn gap(&self, o: &Self) -> f64 {
        (self.0 - o.0).abs()
    }
    ieee_delegate! {
        unary: [neg, abs, sign, floor, ceil, round_nearest_even, trunc],
        binary: [add, sub, mul, div, rem, max, min],
        fallible: [exp, expm1, log, log1p, sqrt, rsqrt, cbrt, tanh, logistic, sin, cos, erf],
        fallible_binary: [pow],
        predicate: [is_zero, is_nan]
    }
    fn round_to(self, elem: ElemType) -> Self {
        Ieee(round_f64_to(self.0, elem))
    }
}
