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
        match self.primal_cmp(o) {
            None => {
                if self.is_nan() {
                    self.clone()
                } else {
                    o.clone()
                }
            }
            Some(Ordering::Greater) => self.clone(),
            Some(Ordering::Less) => o.clone(),
            Some(Ordering::Equal) => {
                if self.total_cmp(o) == Ordering::Less {
                    o.clone()
                } else {
                    self.clone()
                }
            }
        }
    }

    /// IEEE minimum: NaN propagates, -0 beats +0; exact ties choose the first operand.
    fn min(&self, o: &Self) -> Self {
        match self.primal_cmp(o) {
            None => {
                if self.is_nan() {
                    self.clone()
                } else {
                    o.clone()
                }
            }
            Some(Ordering::Less) => self.clone(),
            Some(Ordering::Greater) => o.clone(),
            Some(Ordering::Equal) => {
                if self.total_cmp(o) == Ordering::Greater {
                    o.clone()
                } else {
                    self.clone()
                }
            }
        }
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

    // Issue 21: trigonometric, hyperbolic and special functions, the bit-level
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

/// A dual number `value + tangent·ε` (ε² = 0): evaluating over it gives the
/// forward-mode derivative J·v along the input tangents, each rule exact in
/// `S`'s arithmetic. Decisions (comparisons, max/min) use the value only.
#[derive(Clone, Debug, PartialEq)]
pub struct Dual<S> {
    pub value: S,
    pub tangent: S,
}

impl<S: Scalar> Dual<S> {
    pub fn new(value: S, tangent: S) -> Self {
        Dual { value, tangent }
    }

    /// A constant: tangent zero.
    pub fn constant(value: S) -> Self {
        Dual {
            value,
            tangent: S::zero(),
        }
    }

    /// `f(value) + f'(value)·tangent·ε` given f(value) and f'(value).
    fn chain(value: S, deriv: S, tangent: &S) -> Self {
        Dual {
            tangent: deriv.mul(tangent),
            value,
        }
    }
}

impl<S: Scalar> Scalar for Dual<S> {
    fn type_name() -> String {
        format!("dual<{}>", S::type_name())
    }
    const MAY_BE_UNDEFINED: bool = S::MAY_BE_UNDEFINED;
    fn zero() -> Self {
        Dual::constant(S::zero())
    }
    fn one() -> Self {
        Dual::constant(S::one())
    }
    fn from_f64(x: f64) -> Result<Self, NotExact> {
        Ok(Dual::constant(S::from_f64(x)?))
    }
    fn from_i64(x: i64) -> Self {
        Dual::constant(S::from_i64(x))
    }
    fn to_f64(&self) -> f64 {
        self.value.to_f64()
    }
    fn is_zero(&self) -> bool {
        self.value.is_zero() && self.tangent.is_zero()
    }
    fn is_nan(&self) -> bool {
        self.value.is_nan()
    }
    fn add(&self, o: &Self) -> Self {
        Dual::new(self.value.add(&o.value), self.tangent.add(&o.tangent))
    }
    fn sub(&self, o: &Self) -> Self {
        Dual::new(self.value.sub(&o.value), self.tangent.sub(&o.tangent))
    }
    fn mul(&self, o: &Self) -> Self {
        Dual::new(
            self.value.mul(&o.value),
            self.tangent.mul(&o.value).add(&self.value.mul(&o.tangent)),
        )
    }
    fn div(&self, o: &Self) -> Self {
        // (a/b)' = (a' b − a b') / b²  =  (a' − q b') / b with q = a/b.
        let q = self.value.div(&o.value);
        let t = self.tangent.sub(&q.mul(&o.tangent)).div(&o.value);
        Dual::new(q, t)
    }
    fn neg(&self) -> Self {
        Dual::new(self.value.neg(), self.tangent.neg())
    }
    fn abs(&self) -> Self {
        if self.value.primal_cmp(&S::zero()) == Some(Ordering::Less) {
            self.neg()
        } else {
            self.clone()
        }
    }
    fn rem(&self, o: &Self) -> Self {
        let k = self.value.div(&o.value).trunc();
        Dual::new(
            self.value.rem(&o.value),
            self.tangent.sub(&o.tangent.mul(&k)),
        )
    }
    fn primal_cmp(&self, o: &Self) -> Option<Ordering> {
        self.value.primal_cmp(&o.value)
    }
    fn total_cmp(&self, o: &Self) -> Ordering {
        self.value.total_cmp(&o.value)
    }
    fn gap(&self, o: &Self) -> f64 {
        self.value.gap(&o.value)
    }
    fn sign(&self) -> Self {
        Dual::constant(self.value.sign())
    }
    fn floor(&self) -> Self {
        Dual::constant(self.value.floor())
    }
    fn ceil(&self) -> Self {
        Dual::constant(self.value.ceil())
    }
    fn round_nearest_even(&self) -> Self {
        Dual::constant(self.value.round_nearest_even())
    }
    fn trunc(&self) -> Self {
        Dual::constant(self.value.trunc())
    }
    fn exp(&self) -> Result<Self, NotExact> {
        let e = self.value.exp()?;
        Ok(Dual::chain(e.clone(), e, &self.tangent))
    }
    fn expm1(&self) -> Result<Self, NotExact> {
        let d = self.value.exp()?;
        Ok(Dual::chain(self.value.expm1()?, d, &self.tangent))
    }
    fn log(&self) -> Result<Self, NotExact> {
        let d = S::one().div(&self.value);
        Ok(Dual::chain(self.value.log()?, d, &self.tangent))
    }
    fn log1p(&self) -> Result<Self, NotExact> {
        let d = S::one().div(&S::one().add(&self.value));
        Ok(Dual::chain(self.value.log1p()?, d, &self.tangent))
    }
    fn sqrt(&self) -> Result<Self, NotExact> {
        let s = self.value.sqrt()?;
        let d = S::one().div(&s.add(&s));
        Ok(Dual::chain(s, d, &self.tangent))
    }
    fn rsqrt(&self) -> Result<Self, NotExact> {
        // d rsqrt(x) = −½ rsqrt(x)³.
        let r = self.value.rsqrt()?;
        let half = S::from_f64(0.5)?;
        let d = r.mul(&r).mul(&r).mul(&half).neg();
        Ok(Dual::chain(r, d, &self.tangent))
    }
    fn cbrt(&self) -> Result<Self, NotExact> {
        let c = self.value.cbrt()?;
        let d = S::one().div(&S::from_i64(3).mul(&c).mul(&c));
        Ok(Dual::chain(c, d, &self.tangent))
    }
    fn tanh(&self) -> Result<Self, NotExact> {
        let t = self.value.tanh()?;
        let d = S::one().sub(&t.mul(&t));
        Ok(Dual::chain(t, d, &self.tangent))
    }
    fn logistic(&self) -> Result<Self, NotExact> {
        let s = self.value.logistic()?;
        let d = s.mul(&S::one().sub(&s));
        Ok(Dual::chain(s, d, &self.tangent))
    }
    fn sin(&self) -> Result<Self, NotExact> {
        let d = self.value.cos()?;
        Ok(Dual::chain(self.value.sin()?, d, &self.tangent))
    }
    fn cos(&self) -> Result<Self, NotExact> {
        let d = self.value.sin()?.neg();
        Ok(Dual::chain(self.value.cos()?, d, &self.tangent))
    }
    fn erf(&self) -> Result<Self, NotExact> {
        // d erf(x) = 2/√π · e^{−x²}.
        let c = S::from_f64(std::f64::consts::FRAC_2_SQRT_PI)?;
        let d = c.mul(&self.value.mul(&self.value).neg().exp()?);
        Ok(Dual::chain(self.value.erf()?, d, &self.tangent))
    }
    fn pow(&self, o: &Self) -> Result<Self, NotExact> {
        // d(a^b) = b·a^(b−1)·da + a^b·ln(a)·db; the log term only when db ≠ 0,
        // so integer powers of negative or zero bases stay defined.
        let p = self.value.pow(&o.value)?;
        let da = o.value.mul(&self.value.pow(&o.value.sub(&S::one()))?);
        let mut t = da.mul(&self.tangent);
        if !o.tangent.is_zero() {
            t = t.add(&p.mul(&self.value.log()?).mul(&o.tangent));
        }
        Ok(Dual::new(p, t))
    }
    // Issue 21 functions: f(v) + f'(v)·t·ε.
    fn tan(&self) -> Result<Self, NotExact> {
        let t = self.value.tan()?;
        let d = S::one().add(&t.mul(&t));
        Ok(Dual::chain(t, d, &self.tangent))
    }
    fn sinh(&self) -> Result<Self, NotExact> {
        let d = self.value.cosh()?;
        Ok(Dual::chain(self.value.sinh()?, d, &self.tangent))
    }
    fn cosh(&self) -> Result<Self, NotExact> {
        let d = self.value.sinh()?;
        Ok(Dual::chain(self.value.cosh()?, d, &self.tangent))
    }
    fn asin(&self) -> Result<Self, NotExact> {
        // 1/√(1 − v²).
        let d = S::one().div(&S::one().sub(&self.value.mul(&self.value)).sqrt()?);
        Ok(Dual::chain(self.value.asin()?, d, &self.tangent))
    }
    fn acos(&self) -> Result<Self, NotExact> {
        let d = S::one()
            .div(&S::one().sub(&self.value.mul(&self.value)).sqrt()?)
            .neg();
        Ok(Dual::chain(self.value.acos()?, d, &self.tangent))
    }
    fn atan(&self) -> Result<Self, NotExact> {
        let d = S::one().div(&S::one().add(&self.value.mul(&self.value)));
        Ok(Dual::chain(self.value.atan()?, d, &self.tangent))
    }
    fn asinh(&self) -> Result<Self, NotExact> {
        let d = S::one().div(&self.value.mul(&self.value).add(&S::one()).sqrt()?);
        Ok(Dual::chain(self.value.asinh()?, d, &self.tangent))
    }
    fn acosh(&self) -> Result<Self, NotExact> {
        // 1/(√(v−1)·√(v+1)): no cancellation in v² − 1 near 1.
        let root = self
            .value
            .sub(&S::one())
            .sqrt()?
            .mul(&self.value.add(&S::one()).sqrt()?);
        Ok(Dual::chain(
            self.value.acosh()?,
            S::one().div(&root),
            &self.tangent,
        ))
    }
    fn atanh(&self) -> Result<Self, NotExact> {
        let d = S::one().div(&S::one().sub(&self.value.mul(&self.value)));
        Ok(Dual::chain(self.value.atanh()?, d, &self.tangent))
    }
    fn erf_inv(&self) -> Result<Self, NotExact> {
        // 1/erf'(y) = √π/2 · e^{y²} at y = erf_inv(v).
        let y = self.value.erf_inv()?;
        let half_sqrt_pi = S::from_f64(std::f64::consts::PI.sqrt() / 2.0)?;
        let d = half_sqrt_pi.mul(&y.mul(&y).exp()?);
        Ok(Dual::chain(y, d, &self.tangent))
    }
    fn lgamma(&self) -> Result<Self, NotExact> {
        let d = self.value.digamma()?;
        Ok(Dual::chain(self.value.lgamma()?, d, &self.tangent))
    }
    fn digamma(&self) -> Result<Self, NotExact> {
        let d = S::one().polygamma(&self.value)?;
        Ok(Dual::chain(self.value.digamma()?, d, &self.tangent))
    }
    fn bessel_i1e(&self) -> Result<Self, NotExact> {
        // (e^{−|x|}I₁)' = i0e(x) − i1e(x)·(sign x + 1/x), ½ at 0.
        let y = self.value.bessel_i1e()?;
        let d = if self.value.is_zero() {
            S::from_f64(0.5)?
        } else {
            let k = self.value.sign().add(&S::one().div(&self.value));
            self.value.bessel_i0e()?.sub(&y.mul(&k))
        };
        Ok(Dual::chain(y, d, &self.tangent))
    }
    fn bessel_i0e(&self) -> Result<Self, NotExact> {
        // (e^{−|x|}I₀)' = i1e(x) − sign(x)·i0e(x).
        let y = self.value.bessel_i0e()?;
        let d = self.value.bessel_i1e()?.sub(&self.value.sign().mul(&y));
        Ok(Dual::chain(y, d, &self.tangent))
    }
    fn round_nearest_afz(&self) -> Self {
        Dual::constant(self.value.round_nearest_afz())
    }
    fn atan2(&self, x: &Self) -> Result<Self, NotExact> {
        // ∂/∂y = x/(x²+y²), ∂/∂x = −y/(x²+y²).
        let (y, xv) = (&self.value, &x.value);
        let r2 = xv.mul(xv).add(&y.mul(y));
        let t = xv.mul(&self.tangent).sub(&y.mul(&x.tangent)).div(&r2);
        Ok(Dual::new(y.atan2(xv)?, t))
    }
    fn polygamma(&self, x: &Self) -> Result<Self, NotExact> {
        if !self.tangent.is_zero() {
            return Err(NotExact(
                "polygamma is not differentiable in its integer order n".into(),
            ));
        }
        let d = self.value.add(&S::one()).polygamma(&x.value)?;
        Ok(Dual::chain(self.value.polygamma(&x.value)?, d, &x.tangent))
    }
    fn zeta(&self, q: &Self) -> Result<Self, NotExact> {
        if !self.tangent.is_zero() {
            return Err(NotExact("zeta's derivative in s is not implemented".into()));
        }
        // ∂ζ(s, q)/∂q = −s·ζ(s+1, q).
        let d = self
            .value
            .mul(&self.value.add(&S::one()).zeta(&q.value)?)
            .neg();
        Ok(Dual::chain(self.value.zeta(&q.value)?, d, &q.tangent))
    }
    /// The real-number model of a one-ulp step is the identity in x.
    fn next_after(&self, o: &Self, elem: ElemType) -> Result<Self, NotExact> {
        Ok(Dual::new(
            self.value.next_after(&o.value, elem)?,
            self.tangent.clone(),
        ))
    }
    /// Like `round_to`: the value is rounded, the tangent kept.
    fn reduce_precision(
        &self,
        exponent_bits: u32,
        mantissa_bits: u32,
        elem: ElemType,
    ) -> Result<Self, NotExact> {
        Ok(Dual::new(
            self.value
                .reduce_precision(exponent_bits, mantissa_bits, elem)?,
            self.tangent.clone(),
        ))
    }
    /// Rounding applies to the value; the tangent is the derivative of the
    /// rounded computation's real-number model.
    fn round_to(self, elem: ElemType) -> Self {
        Dual::new(self.value.round_to(elem), self.tangent)
    }
    fn round_accumulated(self, elem: ElemType) -> Self {
        Dual::new(self.value.round_accumulated(elem), self.tangent)
    }
    fn undefined(&self) -> Option<String> {
        self.value.undefined().or_else(|| self.tangent.undefined())
    }
    fn all_finite(&self) -> bool {
        self.value.all_finite() && self.tangent.all_finite()
    }
}

/// Exact real arithmetic: big rationals extended by ±∞ (so the max-pool
/// pattern `reduce_window max, init −∞` evaluates exactly). Operations whose
/// result is not a real number (∞−∞, 0·∞, x/0) give `Undefined`, which the
/// evaluator reports as an error naming the op. Rounding is the identity: this
/// scalar computes the real-number meaning of the module.
#[derive(Clone, Debug, PartialEq)]
pub enum Exact {
    Finite(BigRational),
    NegInf,
    PosInf,
    /// Not a real number; the reason.
    Undefined(&'static str),
}

impl Exact {
    pub fn int(x: i64) -> Self {
        Exact::Finite(BigRational::from_integer(BigInt::from(x)))
    }

    pub fn ratio(n: i64, d: i64) -> Self {
        Exact::Finite(BigRational::new(BigInt::from(n), BigInt::from(d)))
    }

    pub fn as_rational(&self) -> Option<&BigRational> {
        match self {
            Exact::Finite(r) => Some(r),
            _ => None,
        }
    }

    fn describe(&self) -> String {
        match self {
            Exact::Finite(r) => format!("{}/{}", r.numer(), r.denom()),
            Exact::NegInf => "-inf".into(),
            Exact::PosInf => "+inf".into(),
            Exact::Undefined(why) => format!("undefined ({why})"),
        }
    }

    fn irrational(f: &str, x: &Exact) -> NotExact {
        NotExact(format!("{f} of {} is irrational", x.describe()))
    }

    /// Sign of a non-undefined value: −1, 0, 1.
    fn signum_i(&self) -> i32 {
        match self {
            Exact::Finite(r) => {
                if r.is_zero() {
                    0
                } else if r.is_positive() {
                    1
                } else {
                    -1
                }
            }
            Exact::NegInf => -1,
            Exact::PosInf => 1,
            Exact::Undefined(_) => 0,
        }
    }

    fn inf_of_sign(s: i32) -> Self {
        if s < 0 {
            Exact::NegInf
        } else {
            Exact::PosInf
        }
    }

    /// `f(self)` where f maps the integer `at` to the integer `value` for one
    /// of `points` (f(0) = 0 for tan, …); an irrational result otherwise.
    fn rational_at(&self, f: &str, points: &[(i64, i64)]) -> Result<Exact, NotExact> {
        points
            .iter()
            .find(|(at, _)| *self == Exact::int(*at))
            .map(|(_, value)| Exact::int(*value))
            .ok_or_else(|| Exact::irrational(f, self))
    }

    /// The exact root of a perfect power, if the rational is one.
    fn exact_root(r: &BigRational, n: u32) -> Option<BigRational> {
        let root = |x: &BigInt| -> Option<BigInt> {
            let c = x.nth_root(n);
            (c.pow(n) == *x).then_some(c)
        };
        if n.is_multiple_of(2) && r.is_negative() {
            return None;
        }
        Some(BigRational::new(root(r.numer())?, root(r.denom())?))
    }
}

impl Scalar for Exact {
    fn type_name() -> String {
        "exact".into()
    }
    const MAY_BE_UNDEFINED: bool = true;
    fn zero() -> Self {
        Exact::Finite(BigRational::zero())
    }
    fn one() -> Self {
        Exact::Finite(BigRational::one())
    }
    fn from_f64(x: f64) -> Result<Self, NotExact> {
        if x == f64::NEG_INFINITY {
            Ok(Exact::NegInf)
        } else if x == f64::INFINITY {
            Ok(Exact::PosInf)
        } else {
            BigRational::from_float(x)
                .map(Exact::Finite)
                .ok_or_else(|| NotExact(format!("the constant {x} is not a real number")))
        }
    }
    fn from_i64(x: i64) -> Self {
        Exact::int(x)
    }
    fn to_f64(&self) -> f64 {
        match self {
            Exact::Finite(r) => r.to_f64().unwrap_or(f64::NAN),
            Exact::NegInf => f64::NEG_INFINITY,
            Exact::PosInf => f64::INFINITY,
            Exact::Undefined(_) => f64::NAN,
        }
    }
    fn is_zero(&self) -> bool {
        matches!(self, Exact::Finite(r) if r.is_zero())
    }
    fn is_nan(&self) -> bool {
        matches!(self, Exact::Undefined(_))
    }
    fn add(&self, o: &Self) -> Self {
        use Exact::*;
        match (self, o) {
            (Undefined(w), _) | (_, Undefined(w)) => Undefined(w),
            (Finite(a), Finite(b)) => Finite(a + b),
            (NegInf, PosInf) | (PosInf, NegInf) => Undefined("inf - inf"),
            (NegInf, _) | (_, NegInf) => NegInf,
            (PosInf, _) | (_, PosInf) => PosInf,
        }
    }
    fn sub(&self, o: &Self) -> Self {
        self.add(&o.neg())
    }
    fn mul(&self, o: &Self) -> Self {
        use Exact::*;
        match (self, o) {
            (Undefined(w), _) | (_, Undefined(w)) => Undefined(w),
            (Finite(a), Finite(b)) => Finite(a * b),
            _ => match self.signum_i() * o.signum_i() {
                0 => Undefined("0 * inf"),
                s => Exact::inf_of_sign(s),
            },
        }
    }
    fn div(&self, o: &Self) -> Self {
        use Exact::*;
        match (self, o) {
            (Undefined(w), _) | (_, Undefined(w)) => Undefined(w),
            (_, Finite(b)) if b.is_zero() => Undefined("division by zero"),
            (Finite(a), Finite(b)) => Finite(a / b),
            (Finite(_), _) => Exact::zero(),
            (_, Finite(_)) => Exact::inf_of_sign(self.signum_i() * o.signum_i()),
            _ => Undefined("inf / inf"),
        }
    }
    fn neg(&self) -> Self {
        match self {
            Exact::Finite(r) => Exact::Finite(-r),
            Exact::NegInf => Exact::PosInf,
            Exact::PosInf => Exact::NegInf,
            Exact::Undefined(w) => Exact::Undefined(w),
        }
    }
    fn abs(&self) -> Self {
        match self {
            Exact::Finite(r) => Exact::Finite(r.abs()),
            Exact::NegInf | Exact::PosInf => Exact::PosInf,
            Exact::Undefined(w) => Exact::Undefined(w),
        }
    }
    fn rem(&self, o: &Self) -> Self {
        match (self, o) {
            (Exact::Finite(a), Exact::Finite(b)) if !b.is_zero() => {
                Exact::Finite(a - b * (a / b).trunc())
            }
            (Exact::Finite(_), Exact::NegInf | Exact::PosInf) => self.clone(),
            (Exact::Undefined(w), _) | (_, Exact::Undefined(w)) => Exact::Undefined(w),
            _ => Exact::Undefined("remainder of inf or by zero"),
        }
    }
    fn primal_cmp(&self, o: &Self) -> Option<Ordering> {
        use Exact::*;
        match (self, o) {
            (Undefined(_), _) | (_, Undefined(_)) => None,
            (Finite(a), Finite(b)) => Some(a.cmp(b)),
            (NegInf, NegInf) | (PosInf, PosInf) => Some(Ordering::Equal),
            (NegInf, _) | (_, PosInf) => Some(Ordering::Less),
            (PosInf, _) | (_, NegInf) => Some(Ordering::Greater),
        }
    }
    fn total_cmp(&self, o: &Self) -> Ordering {
        // No signed zeros; undefined values sort last, like positive NaNs.
        match (self.is_nan(), o.is_nan()) {
            (true, true) => Ordering::Equal,
            (true, false) => Ordering::Greater,
            (false, true) => Ordering::Less,
            (false, false) => self.primal_cmp(o).expect("both defined"),
        }
    }
    fn gap(&self, o: &Self) -> f64 {
        match (self, o) {
            (Exact::Finite(a), Exact::Finite(b)) => (a - b).abs().to_f64().unwrap_or(f64::NAN),
            _ => match self.primal_cmp(o) {
                Some(Ordering::Equal) => 0.0,
                Some(_) => f64::INFINITY,
                None => f64::NAN,
            },
        }
    }
    fn sign(&self) -> Self {
        match self {
            Exact::Undefined(w) => Exact::Undefined(w),
            _ => Exact::int(self.signum_i() as i64),
        }
    }
    fn floor(&self) -> Self {
        match self {
            Exact::Finite(r) => Exact::Finite(r.floor()),
            _ => self.clone(),
        }
    }
    fn ceil(&self) -> Self {
        match self {
            Exact::Finite(r) => Exact::Finite(r.ceil()),
            _ => self.clone(),
        }
    }
    fn round_nearest_even(&self) -> Self {
        match self {
            Exact::Finite(r) => {
                let fl = r.floor();
                let frac = r - &fl;
                let half = BigRational::new(BigInt::from(1), BigInt::from(2));
                let up = match frac.cmp(&half) {
                    Ordering::Greater => true,
                    Ordering::Less => false,
                    Ordering::Equal => (fl.numer() % BigInt::from(2)) != BigInt::zero(),
                };
                Exact::Finite(if up { fl + BigRational::one() } else { fl })
            }
            _ => self.clone(),
        }
    }
    fn trunc(&self) -> Self {
        match self {
            Exact::Finite(r) => Exact::Finite(r.trunc()),
            _ => self.clone(),
        }
    }
    fn exp(&self) -> Result<Self, NotExact> {
        match self {
            Exact::Finite(r) if r.is_zero() => Ok(Exact::one()),
            Exact::NegInf => Ok(Exact::zero()),
            Exact::PosInf => Ok(Exact::PosInf),
            _ => Err(Exact::irrational("exp", self)),
        }
    }
    fn expm1(&self) -> Result<Self, NotExact> {
        self.exp()
            .map(|e| e.sub(&Exact::one()))
            .map_err(|_| Exact::irrational("expm1", self))
    }
    fn log(&self) -> Result<Self, NotExact> {
        match self {
            Exact::Finite(r) if r.is_one() => Ok(Exact::zero()),
            Exact::Finite(r) if r.is_zero() => Ok(Exact::NegInf),
            Exact::PosInf => Ok(Exact::PosInf),
            _ => Err(Exact::irrational("log", self)),
        }
    }
    fn log1p(&self) -> Result<Self, NotExact> {
        self.add(&Exact::one())
            .log()
            .map_err(|_| Exact::irrational("log1p", self))
    }
    fn sqrt(&self) -> Result<Self, NotExact> {
        match self {
            Exact::Finite(r) => Exact::exact_root(r, 2)
                .map(Exact::Finite)
                .ok_or_else(|| Exact::irrational("sqrt", self)),
            Exact::PosInf => Ok(Exact::PosInf),
            _ => Err(Exact::irrational("sqrt", self)),
        }
    }
    fn rsqrt(&self) -> Result<Self, NotExact> {
        match self {
            Exact::Finite(r) if !r.is_zero() => Exact::exact_root(r, 2)
                .map(|s| Exact::Finite(s.recip()))
                .ok_or_else(|| Exact::irrational("rsqrt", self)),
            _ => Err(Exact::irrational("rsqrt", self)),
        }
    }
    fn cbrt(&self) -> Result<Self, NotExact> {
        match self {
            Exact::Finite(r) => {
                // cbrt(−x) = −cbrt(x); BigInt::nth_root rounds toward zero.
                let root = Exact::exact_root(&r.abs(), 3)
                    .ok_or_else(|| Exact::irrational("cbrt", self))?;
                Ok(Exact::Finite(if r.is_negative() { -root } else { root }))
            }
            Exact::NegInf | Exact::PosInf => Ok(self.clone()),
            Exact::Undefined(_) => Err(Exact::irrational("cbrt", self)),
        }
    }
    fn tanh(&self) -> Result<Self, NotExact> {
        match self {
            Exact::Finite(r) if r.is_zero() => Ok(Exact::zero()),
            _ => Err(Exact::irrational("tanh", self)),
        }
    }
    fn logistic(&self) -> Result<Self, NotExact> {
        match self {
            Exact::Finite(r) if r.is_zero() => Ok(Exact::ratio(1, 2)),
            _ => Err(Exact::irrational("logistic", self)),
        }
    }
    fn sin(&self) -> Result<Self, NotExact> {
        match self {
            Exact::Finite(r) if r.is_zero() => Ok(Exact::zero()),
            _ => Err(Exact::irrational("sin", self)),
        }
    }
    fn cos(&self) -> Result<Self, NotExact> {
        match self {
            Exact::Finite(r) if r.is_zero() => Ok(Exact::one()),
            _ => Err(Exact::irrational("cos", self)),
        }
    }
    fn erf(&self) -> Result<Self, NotExact> {
        match self {
            Exact::Finite(r) if r.is_zero() => Ok(Exact::zero()),
            _ => Err(Exact::irrational("erf", self)),
        }
    }
    fn pow(&self, o: &Self) -> Result<Self, NotExact> {
        // Integer exponents are exact; others only in trivial cases.
        if let (Exact::Finite(a), Exact::Finite(b)) = (self, o) {
            if b.is_integer() {
                if let Some(k) = b.to_integer().to_i32() {
                    if a.is_zero() && k < 0 {
                        return Err(NotExact(format!("pow of 0 to {k} is not a real number")));
                    }
                    return Ok(Exact::Finite(a.pow(k)));
                }
            }
        }
        Err(NotExact(format!(
            "pow of {} to {} is not known to be rational",
            self.describe(),
            o.describe()
        )))
    }
    // Issue 21 functions: the rational cases, `NotExact` otherwise.
    fn tan(&self) -> Result<Self, NotExact> {
        self.rational_at("tan", &[(0, 0)])
    }
    fn sinh(&self) -> Result<Self, NotExact> {
        self.rational_at("sinh", &[(0, 0)])
    }
    fn cosh(&self) -> Result<Self, NotExact> {
        self.rational_at("cosh", &[(0, 1)])
    }
    fn asin(&self) -> Result<Self, NotExact> {
        self.rational_at("asin", &[(0, 0)])
    }
    fn acos(&self) -> Result<Self, NotExact> {
        self.rational_at("acos", &[(1, 0)])
    }
    fn atan(&self) -> Result<Self, NotExact> {
        self.rational_at("atan", &[(0, 0)])
    }
    fn asinh(&self) -> Result<Self, NotExact> {
        self.rational_at("asinh", &[(0, 0)])
    }
    fn acosh(&self) -> Result<Self, NotExact> {
        self.rational_at("acosh", &[(1, 0)])
    }
    fn atanh(&self) -> Result<Self, NotExact> {
        self.rational_at("atanh", &[(0, 0)])
    }
    fn erf_inv(&self) -> Result<Self, NotExact> {
        self.rational_at("erf_inv", &[(0, 0)])
    }
    fn lgamma(&self) -> Result<Self, NotExact> {
        self.rational_at("lgamma", &[(1, 0), (2, 0)])
    }
    fn digamma(&self) -> Result<Self, NotExact> {
        Err(Exact::irrational("digamma", self))
    }
    fn bessel_i1e(&self) -> Result<Self, NotExact> {
        self.rational_at("bessel_i1e", &[(0, 0)])
    }
    fn bessel_i0e(&self) -> Result<Self, NotExact> {
        self.rational_at("bessel_i0e", &[(0, 1)])
    }
    fn round_nearest_afz(&self) -> Self {
        match self {
            // Half away from zero: trunc(x + sign(x)/2).
            Exact::Finite(r) => {
                let half = BigRational::new(BigInt::from(1), BigInt::from(2));
                Exact::Finite(if r.is_negative() {
                    (r - half).trunc()
                } else {
                    (r + half).trunc()
                })
            }
            _ => self.clone(),
        }
    }
    fn atan2(&self, x: &Self) -> Result<Self, NotExact> {
        // Rational only on the positive x axis.
        if self.is_zero() && x.primal_cmp(&Exact::zero()) == Some(Ordering::Greater) {
            return Ok(Exact::zero());
        }
        Err(NotExact(format!(
            "atan2 of ({}, {}) is not known to be rational",
            self.describe(),
            x.describe()
        )))
    }
    fn polygamma(&self, _x: &Self) -> Result<Self, NotExact> {
        Err(Exact::irrational("polygamma", self))
    }
    fn zeta(&self, _q: &Self) -> Result<Self, NotExact> {
        Err(Exact::irrational("zeta", self))
    }
    fn next_after(&self, _o: &Self, _elem: ElemType) -> Result<Self, NotExact> {
        Err(NotExact(
            "next_after steps between floats; it has no exact real-number meaning".into(),
        ))
    }
    fn reduce_precision(
        &self,
        exponent_bits: u32,
        mantissa_bits: u32,
        elem: ElemType,
    ) -> Result<Self, NotExact> {
        let v = self.to_f64();
        if Exact::from_f64(v).ok().as_ref() != Some(self) {
            return Err(NotExact(format!(
                "reduce_precision of {}, which is not a value of {elem}",
                self.describe()
            )));
        }
        Exact::from_f64(special::reduce_precision(
            v,
            elem,
            exponent_bits,
            mantissa_bits,
        ))
    }
    fn round_to(self, _elem: ElemType) -> Self {
        self
    }
    fn undefined(&self) -> Option<String> {
        match self {
            Exact::Undefined(w) => Some((*w).to_string()),
            _ => None,
        }
    }
}
