//! [`Dual`]: forward-mode derivatives over any inner scalar, every rule
//! (special functions included) exact in the inner scalar's arithmetic.

use super::*;

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
    // The special functions: f(v) + f'(v)·t·ε.
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
