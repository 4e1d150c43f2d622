//! [`Exact`]: big rationals extended by ±∞, the exact real-number meaning of
//! a module's rational ops (and `NotExact` for the rest).

use super::*;

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
    // The special functions: the rational cases, `NotExact` otherwise.
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
