//! [`Bnd`]: the scalar of the rounding-error analysis. Run through den's
//! generic evaluator, each element carries an outward-rounded enclosure
//! `iv` of the EXACT real value of the function at the point and a bound `e`
//! on |computed − exact| valid for ANY IEEE evaluation of the same text in
//! ANY summation order, so the computed value lies in `iv.hull(e)`.
//!
//! How the evaluator's contract is used: arithmetic never rounds; the
//! evaluator calls `round_to` after every float op and `round_accumulated`
//! after dot_general, convolution and recognised reductions. So an add or
//! multiply returns a *pending* value (its terms' magnitudes Σ|tᵢ| and their
//! count), and the rounding is charged when it settles: one rounding
//! (u·|result|) for an elementwise op; for an accumulation of k terms the
//! order-independent γ_r·Σ|tᵢ| with r = k − 1 additions plus one product
//! rounding (Higham's bound for any summation tree; fused multiply-adds round
//! less and are covered). Each rounding also adds an absolute term η (the
//! smallest normal of the type: gradual underflow and flush-to-zero both
//! stay within it). Nonlinear functions propagate the operand's error through
//! a bound of the derivative over `iv.hull(e)` and charge the function's own
//! error by a measured accuracy hypothesis (`hypothesis`).
//!
//! Decisions: `gap` returns the margin/bound ratio (the smallest distance
//! between the enclosures over the operands' summed error bounds), so the
//! evaluator's margin records (`record_margins`) name, per decision op, the
//! smallest ratio and where it sits: above 1, rounding cannot flip it.

use super::hypothesis;
use super::interval::{add_up, div_up, mul_up, up, widen, Iv};
use den::{NotExact, Scalar};
use ir::ElemType;
use std::cell::RefCell;
use std::cmp::Ordering;
use std::collections::VecDeque;
use std::fmt::Debug;
use std::marker::PhantomData;

/// The float model the analysis assumes: the unit roundoff and the
/// absolute (underflow) term of each element type.
pub trait Model: Copy + Debug + Default + Send + Sync + 'static {
    const NAME: &'static str;
    /// Unit roundoff u of round-to-nearest in `elem` (|fl(x) − x| ≤ u|x| on
    /// the normal range).
    fn unit(elem: ElemType) -> f64;
    /// The absolute error one rounding may add below the normal range.
    fn eta(elem: ElemType) -> f64;
}

/// IEEE binary32 (and bf16/f16/f64) round-to-nearest: what certgrad's
/// executor, XLA and IREE compute. bf16 keeps f32's exponent range.
#[derive(Clone, Copy, Debug, Default)]
pub struct Ieee754;

impl Model for Ieee754 {
    const NAME: &'static str = "ieee754";
    fn unit(elem: ElemType) -> f64 {
        match elem {
            ElemType::BF16 => 2f64.powi(-8),
            ElemType::F16 => 2f64.powi(-11),
            ElemType::F64 => 2f64.powi(-53),
            _ => 2f64.powi(-24),
        }
    }
    fn eta(elem: ElemType) -> f64 {
        match elem {
            ElemType::F16 => 2f64.powi(-14),
            ElemType::F64 => f64::MIN_POSITIVE,
            _ => 2f64.powi(-126),
        }
    }
}

/// NEGATIVE CONTROL: the unit roundoff halved. Its "bounds" must be caught
/// failing to contain measured f32 errors.
#[derive(Clone, Copy, Debug, Default)]
pub struct HalvedUnit;

impl Model for HalvedUnit {
    const NAME: &'static str = "halved-unit (negative control)";
    fn unit(elem: ElemType) -> f64 {
        Ieee754::unit(elem) / 2.0
    }
    fn eta(elem: ElemType) -> f64 {
        Ieee754::eta(elem)
    }
}

/// NEGATIVE CONTROL: no absolute term. Subnormal results break it.
#[derive(Clone, Copy, Debug, Default)]
pub struct NoUnderflowTerm;

impl Model for NoUnderflowTerm {
    const NAME: &'static str = "no-underflow-term (negative control)";
    fn unit(elem: ElemType) -> f64 {
        Ieee754::unit(elem)
    }
    fn eta(_: ElemType) -> f64 {
        0.0
    }
}

/// Terms of an add/multiply whose rounding has not been charged yet.
#[derive(Clone, Copy, Debug, PartialEq)]
struct Pending {
    /// Σ|tᵢ| over the computed terms (an upper bound).
    acc: f64,
    /// Number of terms.
    terms: u32,
    /// Whether the terms are products (each rounded once more).
    products: bool,
    /// A library function's result (exp, log, …): its error is this many
    /// ulps of |result| (`acc`), not an arithmetic rounding.
    ulps: f64,
}

/// One element of the analysis: see the module doc.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Bnd<M> {
    /// Encloses the exact real value.
    pub iv: Iv,
    /// Bound on |computed − exact| (for a pending value: the error
    /// propagated from its operands, before its own rounding).
    pub e: f64,
    pend: Option<Pending>,
    /// The narrowest element type known to hold the computed value exactly
    /// (rounding to it, or to a wider type, changes nothing).
    fmt: Option<ElemType>,
    _m: PhantomData<M>,
}

/// Decisions whose box ratio is at most this are re-weighed by the adjoint
/// method (the others are decided by the box already).
pub(crate) const WEAK: f64 = 4.0;

thread_local! {
    /// The adjoint method's refined ratios of the weak decisions, in
    /// evaluation order (its second, box-only pass consumes them).
    static REFINED: RefCell<Option<VecDeque<f64>>> = const { RefCell::new(None) };
}

/// Install (or, with None, remove) the refined ratios `gap` consumes.
pub(crate) fn set_refined(q: Option<VecDeque<f64>>) {
    REFINED.with(|r| *r.borrow_mut() = q);
}

thread_local! {
    /// Ops the analysis has no rule for (their results are vacuous).
    static UNSUPPORTED: RefCell<Vec<&'static str>> = const { RefCell::new(Vec::new()) };
}

/// Take (and clear) the names of the functions this thread met that the
/// analysis has no rule for; their results carry a vacuous bound.
pub fn take_unsupported() -> Vec<&'static str> {
    UNSUPPORTED.with(|u| std::mem::take(&mut *u.borrow_mut()))
}

fn unsupported(what: &'static str) {
    UNSUPPORTED.with(|u| {
        let mut u = u.borrow_mut();
        if !u.contains(&what) {
            u.push(what);
        }
    });
}

/// γ_r = r·u / (1 − r·u), rounded up (∞ once r·u ≥ 1).
pub fn gamma(r: u32, u: f64) -> f64 {
    let ru = up(r as f64 * u);
    if ru >= 1.0 {
        f64::INFINITY
    } else {
        div_up(ru, super::interval::down(1.0 - ru))
    }
}

/// The narrowest float type holding `x` exactly.
fn narrowest(x: f64) -> Option<ElemType> {
    if !x.is_finite() {
        return Some(ElemType::BF16);
    }
    if ir::literal::round_to_elem(x, ElemType::BF16) == x {
        Some(ElemType::BF16)
    } else if x as f32 as f64 == x {
        Some(ElemType::F32)
    } else {
        Some(ElemType::F64)
    }
}

/// Whether every value of type `a` is a value of type `b`.
fn fits(a: ElemType, b: ElemType) -> bool {
    use ElemType::*;
    a == b
        || matches!(
            (a, b),
            (BF16, F32) | (BF16, F64) | (F16, F32) | (F16, F64) | (F32, F64)
        )
}

/// The largest finite value of a float type.
fn max_finite(elem: ElemType) -> f64 {
    match elem {
        ElemType::F16 => 65504.0,
        ElemType::F64 => f64::MAX,
        // bf16's largest finite value is below f32's; overflow checks use f32's
        // since a bf16 rounding that overflows is caught by the hull test below.
        _ => f32::MAX as f64,
    }
}

impl<M: Model> Bnd<M> {
    /// An exact input value (must be a value of its element type).
    pub fn exact(x: f64) -> Self {
        Bnd {
            iv: Iv::point(x),
            e: 0.0,
            pend: None,
            fmt: narrowest(x),
            _m: PhantomData,
        }
    }

    /// Nothing is known: the result of an op the analysis has no rule for.
    fn vacuous(what: &'static str) -> Self {
        unsupported(what);
        Bnd {
            iv: Iv::ALL,
            e: f64::INFINITY,
            pend: None,
            fmt: None,
            _m: PhantomData,
        }
    }

    fn settled(iv: Iv, e: f64, fmt: Option<ElemType>) -> Self {
        Bnd {
            iv,
            e,
            pend: None,
            fmt,
            _m: PhantomData,
        }
    }

    fn pending(iv: Iv, e: f64, p: Pending) -> Self {
        Bnd {
            iv,
            e,
            pend: Some(p),
            fmt: None,
            _m: PhantomData,
        }
    }

    /// Where the computed value lies.
    pub fn hull(&self) -> Iv {
        self.iv.hull(self.e)
    }

    /// Exactly zero, computed and real alike.
    pub(crate) fn exact_zero(&self) -> bool {
        self.pend.is_none() && self.e == 0.0 && self.iv.lo == 0.0 && self.iv.hi == 0.0
    }

    /// A settled exact power of two (multiplying by it is exact in binary
    /// floating point, barring underflow).
    pub(crate) fn exact_power_of_two(&self) -> Option<f64> {
        let x = self.iv.lo;
        (self.pend.is_none() && self.e == 0.0 && self.iv.is_point() && x != 0.0 && x.is_finite())
            .then_some(x)
            .filter(|x| {
                let m = x.abs();
                m.log2().fract() == 0.0 && (m.log2().abs() < 100.0)
            })
    }

    /// This value as one term of a sum: (|term| bound, count, products).
    fn as_terms(&self) -> (f64, u32, bool) {
        match self.pend {
            Some(p) => (p.acc, p.terms, p.products),
            None => (add_up(self.iv.mag(), self.e), 1, false),
        }
    }

    /// Charge the pending rounding for a result of type `elem`; with
    /// `accumulate`, the sum is kept in f32 (f64 for f64 results) and
    /// rounded to `elem` once at the end (bf16 leaves, f32 accumulation).
    fn settle(self, elem: ElemType, accumulate: bool) -> Self {
        self.settle_charged(elem, accumulate).0
    }

    /// `settle`, also returning the bound it charged for this rounding
    /// alone (|computed − exact op on the computed operands|; ∞ where the
    /// result may overflow): the adjoint analysis's local error δ.
    pub(crate) fn settle_charged(self, elem: ElemType, accumulate: bool) -> (Self, f64) {
        if !elem.is_float() {
            return (self, 0.0);
        }
        let out = match self.pend {
            None => {
                if self.fmt.is_some_and(|f| fits(f, elem)) {
                    return (self, 0.0);
                }
                // A narrowing conversion: one rounding of the computed value.
                let r = add_up(
                    mul_up(M::unit(elem), add_up(self.iv.mag(), self.e)),
                    M::eta(elem),
                );
                (Self::settled(self.iv, add_up(self.e, r), Some(elem)), r)
            }
            Some(p) => {
                let mag = add_up(self.iv.mag(), self.e);
                let err = if p.ulps > 0.0 {
                    // |f̂(x̂) − f(x̂)| ≤ ulps · ulp(f(x̂)) ≤ ulps · 2u · |f(x̂)|.
                    add_up(mul_up(p.ulps * 2.0 * M::unit(elem), p.acc), M::eta(elem))
                } else {
                    let acc_elem = if accumulate && elem != ElemType::F64 {
                        ElemType::F32
                    } else {
                        elem
                    };
                    let u = M::unit(acc_elem);
                    let rounds = (p.terms - 1) + u32::from(p.products);
                    let mut err = if p.terms == 1 || (p.terms == 2 && !p.products) {
                        // One rounding of the result: u·|computed exact result|.
                        add_up(mul_up(u, mag), M::eta(acc_elem))
                    } else {
                        add_up(
                            mul_up(gamma(rounds, u), p.acc),
                            mul_up(rounds as f64, M::eta(acc_elem)),
                        )
                    };
                    if acc_elem != elem {
                        // The f32 sum rounded once more to the result type.
                        err = add_up(
                            err,
                            add_up(mul_up(M::unit(elem), add_up(mag, err)), M::eta(elem)),
                        );
                    }
                    err
                };
                (Self::settled(self.iv, add_up(self.e, err), Some(elem)), err)
            }
        };
        if add_up(out.0.iv.mag(), out.0.e) > max_finite(elem) {
            // The computed value could overflow: nothing is bounded.
            return (
                Self::settled(out.0.iv, f64::INFINITY, Some(elem)),
                f64::INFINITY,
            );
        }
        out
    }

    /// The box's margin/bound ratio of a decision between `self` and `o`
    /// (see `Scalar::gap` below) and the margin itself.
    pub(crate) fn box_gap(&self, o: &Self) -> (f64, f64) {
        let margin = super::interval::down((self.iv.lo - o.iv.hi).max(o.iv.lo - self.iv.hi));
        let margin = if margin.is_nan() {
            0.0
        } else {
            margin.max(0.0)
        };
        let e = add_up(self.e, o.e);
        if e == 0.0 {
            let both_points = self.iv.is_point() && o.iv.is_point();
            let g = if margin > 0.0 || both_points {
                f64::INFINITY
            } else {
                0.0
            };
            return (g, margin);
        }
        if margin == 0.0 {
            return (0.0, 0.0);
        }
        (super::interval::down(margin / e).max(0.0), margin)
    }

    /// Whether this value's rounding has not been charged yet.
    pub(crate) fn is_pending(&self) -> bool {
        self.pend.is_some()
    }

    /// A monotone function's enclosure `f` of the exact value (std's f64
    /// function at the endpoints, widened), the error through `deriv_max`
    /// (a bound of |f'| over the computed operand's hull), and the result
    /// charged `ulps` of its magnitude `mag_max` (bound of |f| over the hull).
    fn function(&self, iv: Iv, deriv_max: f64, mag_max: f64, ulps: f64) -> Self {
        let (lo, hi) = widen(iv.lo, iv.hi, 3);
        Self::pending(
            Iv { lo, hi },
            mul_up(deriv_max, self.e),
            Pending {
                acc: mag_max,
                terms: 1,
                products: false,
                ulps,
            },
        )
    }

    fn need_settled(&self, what: &'static str) -> Option<Self> {
        self.pend.is_some().then(|| Self::vacuous(what))
    }
}

impl<M: Model> Scalar for Bnd<M> {
    fn type_name() -> String {
        format!("bound<{}>", M::NAME)
    }
    fn zero() -> Self {
        Self::exact(0.0)
    }
    fn one() -> Self {
        Self::exact(1.0)
    }
    fn from_f64(x: f64) -> Result<Self, NotExact> {
        Ok(Self::exact(x))
    }
    fn from_i64(x: i64) -> Self {
        Self::exact(x as f64)
    }
    fn to_f64(&self) -> f64 {
        self.iv.mid()
    }
    fn is_zero(&self) -> bool {
        self.iv.mid() == 0.0
    }
    fn is_nan(&self) -> bool {
        self.iv.has_nan()
    }
    fn all_finite(&self) -> bool {
        self.iv.lo.is_finite() && self.iv.hi.is_finite()
    }

    fn add(&self, o: &Self) -> Self {
        if self.exact_zero() {
            return *o;
        }
        if o.exact_zero() {
            return *self;
        }
        if self.pend.is_some_and(|p| p.ulps > 0.0) || o.pend.is_some_and(|p| p.ulps > 0.0) {
            return Self::vacuous("add of an unrounded function result");
        }
        let (a, ka, pa) = self.as_terms();
        let (b, kb, pb) = o.as_terms();
        Self::pending(
            self.iv.add(&o.iv),
            add_up(self.e, o.e),
            Pending {
                acc: add_up(a, b),
                terms: ka + kb,
                products: pa || pb,
                ulps: 0.0,
            },
        )
    }
    fn sub(&self, o: &Self) -> Self {
        self.add(&o.neg())
    }
    fn mul(&self, o: &Self) -> Self {
        if let Some(v) = self.need_settled("multiply of an unrounded sum") {
            return v;
        }
        if let Some(v) = o.need_settled("multiply of an unrounded sum") {
            return v;
        }
        if self.exact_zero() || o.exact_zero() {
            return Self::exact(0.0);
        }
        for (p, x) in [(o, self), (self, o)] {
            if let Some(s) = p.exact_power_of_two() {
                // Exact scaling; only underflow can round (η).
                let iv = Iv {
                    lo: (x.iv.lo * s).min(x.iv.hi * s),
                    hi: (x.iv.lo * s).max(x.iv.hi * s),
                };
                let e = add_up(mul_up(x.e, s.abs()), M::eta(ElemType::F32));
                return Self::settled(iv, e, x.fmt);
            }
        }
        let (ma, mb) = (self.iv.mag(), o.iv.mag());
        let e = add_up(
            add_up(mul_up(ma, o.e), mul_up(mb, self.e)),
            mul_up(self.e, o.e),
        );
        Self::pending(
            self.iv.mul(&o.iv),
            e,
            Pending {
                acc: mul_up(add_up(ma, self.e), add_up(mb, o.e)),
                terms: 1,
                products: true,
                ulps: 0.0,
            },
        )
    }
    fn div(&self, o: &Self) -> Self {
        if let Some(v) = self.need_settled("divide of an unrounded sum") {
            return v;
        }
        if let Some(v) = o.need_settled("divide of an unrounded sum") {
            return v;
        }
        if let Some(s) = o.exact_power_of_two() {
            let iv = Iv {
                lo: (self.iv.lo / s).min(self.iv.hi / s),
                hi: (self.iv.lo / s).max(self.iv.hi / s),
            };
            let e = add_up(self.e / s.abs(), M::eta(ElemType::F32));
            return Self::settled(iv, up(e), self.fmt);
        }
        let iv = self.iv.div(&o.iv);
        let mig = o.iv.mig();
        if mig <= o.e || !iv.lo.is_finite() || !iv.hi.is_finite() {
            return Self::vacuous("divide by a value that may be 0");
        }
        // |â/b̂ − a/b| = |(â − a)b − a(b̂ − b)| / |b̂ b| ≤ (e_a + |a/b|·e_b)/(|b| − e_b).
        let q = iv.mag();
        let e = div_up(
            add_up(self.e, mul_up(q, o.e)),
            super::interval::down(mig - o.e),
        );
        Self::pending(
            iv,
            e,
            Pending {
                acc: add_up(q, e),
                terms: 1,
                products: true,
                ulps: 0.0,
            },
        )
    }
    fn neg(&self) -> Self {
        Bnd {
            iv: self.iv.neg(),
            ..*self
        }
    }
    fn abs(&self) -> Self {
        if let Some(v) = self.need_settled("abs of an unrounded sum") {
            return v;
        }
        let iv = Iv {
            lo: self.iv.mig(),
            hi: self.iv.mag(),
        };
        Self::settled(iv, self.e, self.fmt)
    }
    fn rem(&self, _: &Self) -> Self {
        Self::vacuous("remainder")
    }

    fn primal_cmp(&self, o: &Self) -> Option<Ordering> {
        if self.iv.has_nan() || o.iv.has_nan() {
            return None;
        }
        if self.iv.hi < o.iv.lo {
            Some(Ordering::Less)
        } else if self.iv.lo > o.iv.hi {
            Some(Ordering::Greater)
        } else {
            // Undecided enclosures: the midpoints choose (`gap` reports 0).
            self.iv.mid().partial_cmp(&o.iv.mid())
        }
    }
    fn total_cmp(&self, o: &Self) -> Ordering {
        self.iv.mid().total_cmp(&o.iv.mid())
    }
    fn max(&self, o: &Self) -> Self {
        if let Some(v) = self
            .need_settled("maximum of an unrounded sum")
            .or_else(|| o.need_settled("maximum of an unrounded sum"))
        {
            return v;
        }
        // |max(â, b̂) − max(a, b)| ≤ max(|â − a|, |b̂ − b|), flips included.
        Self::settled(self.iv.max(&o.iv), self.e.max(o.e), wider(self.fmt, o.fmt))
    }
    fn min(&self, o: &Self) -> Self {
        if let Some(v) = self
            .need_settled("minimum of an unrounded sum")
            .or_else(|| o.need_settled("minimum of an unrounded sum"))
        {
            return v;
        }
        Self::settled(self.iv.min(&o.iv), self.e.max(o.e), wider(self.fmt, o.fmt))
    }
    /// The margin/bound ratio of a decision between `self` and `o`: the
    /// smallest distance between their enclosures over e_self + e_o. Above 1
    /// the exact decision is determined and no computed values within the
    /// bounds decide otherwise; ∞ for two exact equal values (computed =
    /// exact, same decision); 0 where the exact decision itself is open.
    fn gap(&self, o: &Self) -> f64 {
        let (g, margin) = self.box_gap(o);
        if g <= WEAK && margin > 0.0 {
            // The adjoint's second pass: this weak decision's refined ratio.
            if let Some(r) = REFINED.with(|q| q.borrow_mut().as_mut().and_then(|q| q.pop_front())) {
                return g.max(r);
            }
        }
        g
    }

    fn sign(&self) -> Self {
        Self::vacuous("sign")
    }
    fn floor(&self) -> Self {
        Self::vacuous("floor")
    }
    fn ceil(&self) -> Self {
        Self::vacuous("ceil")
    }
    fn round_nearest_even(&self) -> Self {
        Self::vacuous("round_nearest_even")
    }
    fn trunc(&self) -> Self {
        Self::vacuous("trunc")
    }
    fn round_nearest_afz(&self) -> Self {
        Self::vacuous("round_nearest_afz")
    }

    fn exp(&self) -> Result<Self, NotExact> {
        if let Some(v) = self.need_settled("exp") {
            return Ok(v);
        }
        let h = self.hull();
        let top = up(up(h.hi.exp()));
        Ok(self.function(
            Iv {
                lo: self.iv.lo.exp(),
                hi: self.iv.hi.exp(),
            },
            top,
            top,
            hypothesis::EXP_ULPS,
        ))
    }
    fn log(&self) -> Result<Self, NotExact> {
        let h = self.hull();
        if self.pend.is_some() || h.lo <= 0.0 {
            return Ok(Self::vacuous("log of a value that may be ≤ 0"));
        }
        let mag = up(up(h.lo.ln().abs().max(h.hi.ln().abs())));
        Ok(self.function(
            Iv {
                lo: self.iv.lo.ln(),
                hi: self.iv.hi.ln(),
            },
            up(up(1.0 / h.lo)),
            mag,
            hypothesis::LOG_ULPS,
        ))
    }
    fn rsqrt(&self) -> Result<Self, NotExact> {
        let h = self.hull();
        if self.pend.is_some() || h.lo <= 0.0 {
            return Ok(Self::vacuous("rsqrt of a value that may be ≤ 0"));
        }
        let top = up(up(up(1.0 / h.lo.sqrt())));
        // d/dx x^(-1/2) = −½ x^(−3/2): largest at the hull's low end.
        let deriv = up(0.5 * top * up(top * top));
        Ok(self.function(
            Iv {
                lo: 1.0 / self.iv.hi.sqrt(),
                hi: 1.0 / self.iv.lo.sqrt(),
            },
            deriv,
            top,
            hypothesis::RSQRT_ULPS,
        ))
    }
    fn sqrt(&self) -> Result<Self, NotExact> {
        let h = self.hull();
        if self.pend.is_some() || h.lo < 0.0 {
            return Ok(Self::vacuous("sqrt of a value that may be < 0"));
        }
        // |√x̂ − √x| ≤ min(e / (2√min), √e).
        let by_deriv = if h.lo > 0.0 {
            div_up(
                self.e,
                super::interval::down(2.0 * super::interval::down(h.lo.sqrt())),
            )
        } else {
            f64::INFINITY
        };
        let e = by_deriv.min(up(up(self.e.sqrt())));
        let (lo, hi) = widen(self.iv.lo.max(0.0).sqrt(), self.iv.hi.sqrt(), 3);
        // sqrt is correctly rounded (IEEE 754 basic operation): one rounding.
        Ok(Self::pending(
            Iv { lo, hi },
            e,
            Pending {
                acc: up(up(h.hi.sqrt())),
                terms: 1,
                products: false,
                ulps: 0.0,
            },
        ))
    }
    fn tanh(&self) -> Result<Self, NotExact> {
        if let Some(v) = self.need_settled("tanh") {
            return Ok(v);
        }
        let h = self.hull();
        let mag = up(up(h.lo.tanh().abs().max(h.hi.tanh().abs()))).min(1.0);
        Ok(self.function(
            // std's tanh is within a few f64 ulps: 3 more nudges.
            widened(self.iv.lo.tanh(), self.iv.hi.tanh()),
            1.0,
            mag,
            hypothesis::TANH_ULPS,
        ))
    }
    fn logistic(&self) -> Result<Self, NotExact> {
        if let Some(v) = self.need_settled("logistic") {
            return Ok(v);
        }
        let h = self.hull();
        let s = |x: f64| 1.0 / (1.0 + (-x).exp());
        Ok(self.function(
            // exp, add and divide: 3 f64 roundings, 3 more nudges.
            widened(s(self.iv.lo), s(self.iv.hi)),
            0.25,
            up(up(up(s(h.hi)))).min(1.0),
            hypothesis::LOGISTIC_ULPS,
        ))
    }
    fn expm1(&self) -> Result<Self, NotExact> {
        Ok(Self::vacuous("exponential_minus_one"))
    }
    fn log1p(&self) -> Result<Self, NotExact> {
        Ok(Self::vacuous("log_plus_one"))
    }
    fn cbrt(&self) -> Result<Self, NotExact> {
        Ok(Self::vacuous("cbrt"))
    }
    fn sin(&self) -> Result<Self, NotExact> {
        Ok(Self::vacuous("sine"))
    }
    fn cos(&self) -> Result<Self, NotExact> {
        Ok(Self::vacuous("cosine"))
    }
    fn erf(&self) -> Result<Self, NotExact> {
        Ok(Self::vacuous("erf"))
    }
    fn pow(&self, _: &Self) -> Result<Self, NotExact> {
        Ok(Self::vacuous("power"))
    }
    fn tan(&self) -> Result<Self, NotExact> {
        Ok(Self::vacuous("tan"))
    }
    fn sinh(&self) -> Result<Self, NotExact> {
        Ok(Self::vacuous("sinh"))
    }
    fn cosh(&self) -> Result<Self, NotExact> {
        Ok(Self::vacuous("cosh"))
    }
    fn asin(&self) -> Result<Self, NotExact> {
        Ok(Self::vacuous("asin"))
    }
    fn acos(&self) -> Result<Self, NotExact> {
        Ok(Self::vacuous("acos"))
    }
    fn atan(&self) -> Result<Self, NotExact> {
        Ok(Self::vacuous("atan"))
    }
    fn asinh(&self) -> Result<Self, NotExact> {
        Ok(Self::vacuous("asinh"))
    }
    fn acosh(&self) -> Result<Self, NotExact> {
        Ok(Self::vacuous("acosh"))
    }
    fn atanh(&self) -> Result<Self, NotExact> {
        Ok(Self::vacuous("atanh"))
    }
    fn erf_inv(&self) -> Result<Self, NotExact> {
        Ok(Self::vacuous("erf_inv"))
    }
    fn lgamma(&self) -> Result<Self, NotExact> {
        Ok(Self::vacuous("lgamma"))
    }
    fn digamma(&self) -> Result<Self, NotExact> {
        Ok(Self::vacuous("digamma"))
    }
    fn bessel_i1e(&self) -> Result<Self, NotExact> {
        Ok(Self::vacuous("bessel_i1e"))
    }
    fn bessel_i0e(&self) -> Result<Self, NotExact> {
        Ok(Self::vacuous("bessel_i0e"))
    }
    fn atan2(&self, _: &Self) -> Result<Self, NotExact> {
        Ok(Self::vacuous("atan2"))
    }
    fn polygamma(&self, _: &Self) -> Result<Self, NotExact> {
        Ok(Self::vacuous("polygamma"))
    }
    fn zeta(&self, _: &Self) -> Result<Self, NotExact> {
        Ok(Self::vacuous("zeta"))
    }
    fn next_after(&self, _: &Self, _: ElemType) -> Result<Self, NotExact> {
        Ok(Self::vacuous("next_after"))
    }
    fn reduce_precision(&self, _: u32, _: u32, _: ElemType) -> Result<Self, NotExact> {
        Ok(Self::vacuous("reduce_precision"))
    }

    fn round_to(self, elem: ElemType) -> Self {
        self.settle(elem, false)
    }
    fn round_accumulated(self, elem: ElemType) -> Self {
        self.settle(elem, true)
    }
}

/// An enclosure widened by 3 extra nudges (the function's f64 formula has
/// more than one rounding; `Bnd::function` adds its own 3).
fn widened(lo: f64, hi: f64) -> Iv {
    let (lo, hi) = widen(lo, hi, 3);
    Iv { lo, hi }
}

/// The type holding both of two values (max/min return one of them).
fn wider(a: Option<ElemType>, b: Option<ElemType>) -> Option<ElemType> {
    match (a, b) {
        (Some(a), Some(b)) if fits(a, b) => Some(b),
        (Some(a), Some(b)) if fits(b, a) => Some(a),
        _ => None,
    }
}
