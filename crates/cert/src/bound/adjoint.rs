//! adjoint: the first-order a-posteriori bound. [`Adj`] wraps the running
//! error analysis's [`Bnd`] (which still supplies, per element, an enclosure
//! of the exact value and a box bound e on the computed one) and records
//! every scalar operation on a thread-local tape: its operands and an
//! interval enclosure of its partial derivatives over the box, and the
//! bound on its own rounding δ (`Bnd::settle_charged`: u·|v̂| for one
//! rounding, γ·Σ|tᵢ| for an accumulation in any order, the ulp hypothesis
//! for a library function).
//!
//! Why it holds: for every op v = f(a, b) the computed value is
//! v̂ = f(â, b̂) + δ, and f(â, b̂) − f(a, b) = ∂ₐf(ξ)(â − a) + ∂_b f(ξ)(b̂ − b)
//! exactly, with ξ between the exact and computed operands — inside the box,
//! so inside the recorded partial enclosures (products: â b̂ − a b =
//! b̂(â − a) + a(b̂ − b), enclosed by the hull of b and the exact enclosure
//! of a; max/min/abs through [0, 1] or [−1, 1] where the box cannot decide
//! the branch). Unrolled along the tape, Δy = Σₖ Aₖ δₖ with each Aₖ a sum of
//! products of reals from those enclosures, so the interval adjoint Āₖ
//! (one reverse sweep per output element, midpoint–radius arithmetic whose
//! own f64 rounding is absorbed in the radii) gives |Δy| ≤ Σₖ mag(Āₖ)·|δₖ|.
//! The composite adjoint keeps the cancellations (a BN removing a common
//! shift, signs of weights) that the box, which takes |·| at every op,
//! loses; the box enters only through the partials' radii (second order)
//! and where a partial is unbounded: that node becomes a cut whose whole
//! error is its box bound. Rigorous under the same conditions as the box:
//! the transcendental hypotheses and flip-free routing decisions.
//!
//! Cost: one tape node per scalar op (48 bytes) and one sweep over the tape
//! per output element; the driver refuses tapes above a node budget.

use super::interval::{up, widen, Iv};
use super::scalar::{Bnd, Model, WEAK};
use den::{NotExact, Scalar};
use ir::ElemType;
use std::cell::RefCell;
use std::cmp::Ordering;

/// The id of a value with no error (an exact input or constant).
pub const EXACT: u32 = u32::MAX;

/// A midpoint–radius interval [m − r, m + r].
#[derive(Clone, Copy, Debug, PartialEq)]
struct Mr {
    m: f64,
    r: f64,
}

impl Mr {
    fn point(x: f64) -> Mr {
        Mr { m: x, r: 0.0 }
    }

    fn of(iv: Iv) -> Mr {
        if iv.is_point() {
            return Mr::point(iv.lo);
        }
        let m = iv.mid();
        Mr {
            m,
            r: up((iv.hi - m).max(m - iv.lo)),
        }
    }

    fn finite(&self) -> bool {
        self.m.is_finite() && self.r.is_finite()
    }

    /// [0, 1]: a max/min whose branch the box cannot decide.
    const UNIT: Mr = Mr { m: 0.5, r: 0.5 };
}

#[derive(Clone, Copy, Debug)]
struct Node {
    parent: [u32; 2],
    part: [Mr; 2],
    /// Bound on this op's own error δ.
    r: f64,
}

#[derive(Default)]
struct Tape {
    nodes: Vec<Node>,
    limit: usize,
    on: bool,
    overflow: bool,
}

/// A decision the box weighs at a ratio ≤ `WEAK`: its operands' nodes and
/// the exact margin between them.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Weak {
    pub a: u32,
    pub b: u32,
    pub margin: f64,
    pub ratio: f64,
}

thread_local! {
    static TAPE: RefCell<Tape> = RefCell::new(Tape::default());
    static WEAK_DECISIONS: RefCell<Vec<Weak>> = const { RefCell::new(Vec::new()) };
}

/// Take the weak decisions recorded since the last call, in evaluation order.
pub(crate) fn take_weak() -> Vec<Weak> {
    WEAK_DECISIONS.with(|w| std::mem::take(&mut *w.borrow_mut()))
}

/// Start recording on this thread, at most `limit` nodes.
pub(crate) fn start(limit: usize) {
    TAPE.with(|t| {
        *t.borrow_mut() = Tape {
            nodes: Vec::new(),
            limit,
            on: true,
            overflow: false,
        }
    });
}

/// The recorded tape (None: it overflowed).
pub struct Recorded {
    nodes: Vec<Node>,
}

fn finish_tape() -> Option<Recorded> {
    TAPE.with(|t| {
        let t = std::mem::take(&mut *t.borrow_mut());
        (!t.overflow).then_some(Recorded { nodes: t.nodes })
    })
}

/// Stop recording and hand the tape over (None where it overflowed).
pub(crate) fn take() -> Option<Recorded> {
    finish_tape()
}

fn push(parents: [(u32, Mr); 2], r: f64) -> u32 {
    TAPE.with(|t| {
        let mut t = t.borrow_mut();
        if !t.on || t.overflow {
            t.overflow = true;
            return EXACT;
        }
        if t.nodes.len() >= t.limit || t.nodes.len() >= EXACT as usize - 1 {
            t.overflow = true;
            t.nodes = Vec::new();
            return EXACT;
        }
        t.nodes.push(Node {
            parent: [parents[0].0, parents[1].0],
            part: [parents[0].1, parents[1].1],
            r,
        });
        (t.nodes.len() - 1) as u32
    })
}

/// One element of the adjoint analysis: the box analysis's value and its
/// tape node.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Adj<M> {
    pub b: Bnd<M>,
    pub id: u32,
}

impl<M: Model> Adj<M> {
    pub fn exact(x: f64) -> Self {
        Adj {
            b: Bnd::exact(x),
            id: EXACT,
        }
    }

    /// A result `b` of parents with partials, charged `r` for its own rounding.
    fn node(b: Bnd<M>, parents: &[(u32, Mr)], r: f64) -> Self {
        if !b.e.is_finite() || !r.is_finite() {
            // Nothing known: a cut with an unbounded error.
            return Adj {
                b,
                id: push([(EXACT, Mr::point(0.0)); 2], f64::INFINITY),
            };
        }
        let live: Vec<(u32, Mr)> = parents
            .iter()
            .copied()
            .filter(|(p, d)| *p != EXACT && *d != Mr::point(0.0))
            .collect();
        if live.iter().any(|(_, d)| !d.finite()) {
            // A partial without a finite enclosure: the box bounds the whole
            // error of this value (for a pending one, before its rounding).
            return Adj {
                b,
                id: push([(EXACT, Mr::point(0.0)); 2], up(b.e + r)),
            };
        }
        if live.is_empty() && r == 0.0 {
            return Adj { b, id: EXACT };
        }
        let z = (EXACT, Mr::point(0.0));
        let p = [
            live.first().copied().unwrap_or(z),
            live.get(1).copied().unwrap_or(z),
        ];
        Adj { b, id: push(p, r) }
    }

    fn unary(b: Bnd<M>, x: &Self, d: Mr) -> Self {
        Self::node(b, &[(x.id, d)], 0.0)
    }

    fn cut(b: Bnd<M>) -> Self {
        Self::node(b, &[], f64::INFINITY)
    }

    fn settle(self, elem: ElemType, accumulate: bool) -> Self {
        let (b, r) = self.b.settle_charged(elem, accumulate);
        if r == 0.0 && b.e == self.b.e {
            return Adj { b, id: self.id };
        }
        Self::node(b, &[(self.id, Mr::point(1.0))], r)
    }

    /// A function's result with derivative enclosure `d` over the operand's hull.
    fn function(b: Result<Bnd<M>, NotExact>, x: &Self, d: Iv) -> Result<Self, NotExact> {
        let b = b?;
        Ok(Self::unary(b, x, Mr::of(d)))
    }
}

/// `f` over [lo, hi] for a function unimodal with its peak at 0 (sech², σ′):
/// [f(farthest endpoint), f(point nearest 0)], widened by `k` nudges.
fn peaked(h: Iv, f: impl Fn(f64) -> f64, k: usize) -> Iv {
    let near = if h.lo > 0.0 {
        h.lo
    } else if h.hi < 0.0 {
        h.hi
    } else {
        0.0
    };
    let far = if h.lo.abs() > h.hi.abs() { h.lo } else { h.hi };
    let (lo, hi) = widen(f(far), f(near), k);
    Iv {
        lo: lo.max(0.0),
        hi,
    }
}

/// An increasing function's values at the endpoints, widened by `k` nudges.
fn rising(h: Iv, f: impl Fn(f64) -> f64, k: usize) -> Iv {
    let (lo, hi) = widen(f(h.lo), f(h.hi), k);
    Iv { lo, hi }
}

impl<M: Model> Scalar for Adj<M> {
    fn type_name() -> String {
        format!("adjoint<{}>", M::NAME)
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
        self.b.to_f64()
    }
    fn is_zero(&self) -> bool {
        self.b.is_zero()
    }
    fn is_nan(&self) -> bool {
        self.b.is_nan()
    }
    fn all_finite(&self) -> bool {
        self.b.all_finite()
    }

    fn add(&self, o: &Self) -> Self {
        if self.b.exact_zero() {
            return *o;
        }
        if o.b.exact_zero() {
            return *self;
        }
        let one = Mr::point(1.0);
        Self::node(self.b.add(&o.b), &[(self.id, one), (o.id, one)], 0.0)
    }
    fn sub(&self, o: &Self) -> Self {
        if o.b.exact_zero() {
            return *self;
        }
        if self.b.exact_zero() {
            return o.neg();
        }
        Self::node(
            self.b.sub(&o.b),
            &[(self.id, Mr::point(1.0)), (o.id, Mr::point(-1.0))],
            0.0,
        )
    }
    fn mul(&self, o: &Self) -> Self {
        let b = self.b.mul(&o.b);
        if self.b.is_pending() || o.b.is_pending() {
            return Self::cut(b);
        }
        if self.b.exact_zero() || o.b.exact_zero() {
            return Adj { b, id: EXACT };
        }
        for (p, x) in [(o, self), (self, o)] {
            if let Some(s) = p.b.exact_power_of_two() {
                return Self::node(b, &[(x.id, Mr::point(s))], M::eta(ElemType::F32));
            }
        }
        // â b̂ − a b = b̂ (â − a) + a (b̂ − b).
        Self::node(
            b,
            &[(self.id, Mr::of(o.b.hull())), (o.id, Mr::of(self.b.iv))],
            0.0,
        )
    }
    fn div(&self, o: &Self) -> Self {
        let b = self.b.div(&o.b);
        if self.b.is_pending() || o.b.is_pending() {
            return Self::cut(b);
        }
        if let Some(s) = o.b.exact_power_of_two() {
            return Self::node(b, &[(self.id, Mr::point(1.0 / s))], M::eta(ElemType::F32));
        }
        // â/b̂ − a/b = (â − a)/b̂ − a (b̂ − b)/(b b̂).
        let hb = o.b.hull();
        let da = Iv::point(1.0).div(&hb);
        let db = self.b.iv.neg().div(&o.b.iv.mul(&hb));
        Self::node(b, &[(self.id, Mr::of(da)), (o.id, Mr::of(db))], 0.0)
    }
    fn neg(&self) -> Self {
        Self::node(self.b.neg(), &[(self.id, Mr::point(-1.0))], 0.0)
    }
    fn abs(&self) -> Self {
        let b = self.b.abs();
        if self.b.is_pending() {
            return Self::cut(b);
        }
        let h = self.b.hull();
        if h.lo >= 0.0 {
            Adj { b, id: self.id }
        } else if h.hi <= 0.0 {
            Self::unary(b, self, Mr::point(-1.0))
        } else {
            Self::unary(b, self, Mr { m: 0.0, r: 1.0 })
        }
    }
    fn rem(&self, o: &Self) -> Self {
        Self::cut(self.b.rem(&o.b))
    }

    fn primal_cmp(&self, o: &Self) -> Option<Ordering> {
        self.b.primal_cmp(&o.b)
    }
    fn total_cmp(&self, o: &Self) -> Ordering {
        self.b.total_cmp(&o.b)
    }
    fn max(&self, o: &Self) -> Self {
        let b = self.b.max(&o.b);
        if self.b.is_pending() || o.b.is_pending() {
            return Self::cut(b);
        }
        let (ha, ho) = (self.b.hull(), o.b.hull());
        if ha.lo > ho.hi {
            Adj { b, id: self.id }
        } else if ho.lo > ha.hi {
            Adj { b, id: o.id }
        } else {
            // max(â, ô) − max(a, o) = λ(â − a) + (1 − λ)(ô − o), λ ∈ [0, 1].
            Self::node(b, &[(self.id, Mr::UNIT), (o.id, Mr::UNIT)], 0.0)
        }
    }
    fn min(&self, o: &Self) -> Self {
        let b = self.b.min(&o.b);
        if self.b.is_pending() || o.b.is_pending() {
            return Self::cut(b);
        }
        let (ha, ho) = (self.b.hull(), o.b.hull());
        if ha.hi < ho.lo {
            Adj { b, id: self.id }
        } else if ho.hi < ha.lo {
            Adj { b, id: o.id }
        } else {
            Self::node(b, &[(self.id, Mr::UNIT), (o.id, Mr::UNIT)], 0.0)
        }
    }
    fn gap(&self, o: &Self) -> f64 {
        let (g, margin) = self.b.box_gap(&o.b);
        if g <= WEAK && margin > 0.0 {
            WEAK_DECISIONS.with(|w| {
                w.borrow_mut().push(Weak {
                    a: self.id,
                    b: o.id,
                    margin,
                    ratio: g,
                })
            });
        }
        g
    }

    fn sign(&self) -> Self {
        Self::cut(self.b.sign())
    }
    fn floor(&self) -> Self {
        Self::cut(self.b.floor())
    }
    fn ceil(&self) -> Self {
        Self::cut(self.b.ceil())
    }
    fn round_nearest_even(&self) -> Self {
        Self::cut(self.b.round_nearest_even())
    }
    fn trunc(&self) -> Self {
        Self::cut(self.b.trunc())
    }
    fn round_nearest_afz(&self) -> Self {
        Self::cut(self.b.round_nearest_afz())
    }

    fn exp(&self) -> Result<Self, NotExact> {
        let h = self.b.hull();
        Self::function(self.b.exp(), self, rising(h, f64::exp, 3))
    }
    fn log(&self) -> Result<Self, NotExact> {
        let h = self.b.hull();
        Self::function(self.b.log(), self, Iv::point(1.0).div(&h))
    }
    fn rsqrt(&self) -> Result<Self, NotExact> {
        // d/dx x^(−1/2) = −½ x^(−3/2), increasing on x > 0.
        let h = self.b.hull();
        let d = if h.lo > 0.0 {
            rising(h, |x| -0.5 / (x * x.sqrt()), 6)
        } else {
            Iv::ALL
        };
        Self::function(self.b.rsqrt(), self, d)
    }
    fn sqrt(&self) -> Result<Self, NotExact> {
        let h = self.b.hull();
        let d = if h.lo > 0.0 {
            let (lo, hi) = widen(0.5 / h.hi.sqrt(), 0.5 / h.lo.sqrt(), 4);
            Iv { lo, hi }
        } else {
            Iv::ALL
        };
        Self::function(self.b.sqrt(), self, d)
    }
    fn tanh(&self) -> Result<Self, NotExact> {
        let h = self.b.hull();
        let d = peaked(
            h,
            |x| {
                let t = x.tanh();
                1.0 - t * t
            },
            6,
        );
        Self::function(
            self.b.tanh(),
            self,
            Iv {
                hi: d.hi.min(1.0),
                ..d
            },
        )
    }
    fn logistic(&self) -> Result<Self, NotExact> {
        let h = self.b.hull();
        let d = peaked(
            h,
            |x| {
                let s = 1.0 / (1.0 + (-x).exp());
                s * (1.0 - s)
            },
            8,
        );
        Self::function(
            self.b.logistic(),
            self,
            Iv {
                hi: d.hi.min(0.25),
                ..d
            },
        )
    }
    fn expm1(&self) -> Result<Self, NotExact> {
        Ok(Self::cut(self.b.expm1()?))
    }
    fn log1p(&self) -> Result<Self, NotExact> {
        Ok(Self::cut(self.b.log1p()?))
    }
    fn cbrt(&self) -> Result<Self, NotExact> {
        Ok(Self::cut(self.b.cbrt()?))
    }
    fn sin(&self) -> Result<Self, NotExact> {
        Ok(Self::cut(self.b.sin()?))
    }
    fn cos(&self) -> Result<Self, NotExact> {
        Ok(Self::cut(self.b.cos()?))
    }
    fn erf(&self) -> Result<Self, NotExact> {
        Ok(Self::cut(self.b.erf()?))
    }
    fn pow(&self, o: &Self) -> Result<Self, NotExact> {
        Ok(Self::cut(self.b.pow(&o.b)?))
    }
    fn tan(&self) -> Result<Self, NotExact> {
        Ok(Self::cut(self.b.tan()?))
    }
    fn sinh(&self) -> Result<Self, NotExact> {
        Ok(Self::cut(self.b.sinh()?))
    }
    fn cosh(&self) -> Result<Self, NotExact> {
        Ok(Self::cut(self.b.cosh()?))
    }
    fn asin(&self) -> Result<Self, NotExact> {
        Ok(Self::cut(self.b.asin()?))
    }
    fn acos(&self) -> Result<Self, NotExact> {
        Ok(Self::cut(self.b.acos()?))
    }
    fn atan(&self) -> Result<Self, NotExact> {
        Ok(Self::cut(self.b.atan()?))
    }
    fn asinh(&self) -> Result<Self, NotExact> {
        Ok(Self::cut(self.b.asinh()?))
    }
    fn acosh(&self) -> Result<Self, NotExact> {
        Ok(Self::cut(self.b.acosh()?))
    }
    fn atanh(&self) -> Result<Self, NotExact> {
        Ok(Self::cut(self.b.atanh()?))
    }
    fn erf_inv(&self) -> Result<Self, NotExact> {
        Ok(Self::cut(self.b.erf_inv()?))
    }
    fn lgamma(&self) -> Result<Self, NotExact> {
        Ok(Self::cut(self.b.lgamma()?))
    }
    fn digamma(&self) -> Result<Self, NotExact> {
        Ok(Self::cut(self.b.digamma()?))
    }
    fn bessel_i1e(&self) -> Result<Self, NotExact> {
        Ok(Self::cut(self.b.bessel_i1e()?))
    }
    fn bessel_i0e(&self) -> Result<Self, NotExact> {
        Ok(Self::cut(self.b.bessel_i0e()?))
    }
    fn atan2(&self, o: &Self) -> Result<Self, NotExact> {
        Ok(Self::cut(self.b.atan2(&o.b)?))
    }
    fn polygamma(&self, o: &Self) -> Result<Self, NotExact> {
        Ok(Self::cut(self.b.polygamma(&o.b)?))
    }
    fn zeta(&self, o: &Self) -> Result<Self, NotExact> {
        Ok(Self::cut(self.b.zeta(&o.b)?))
    }
    fn next_after(&self, o: &Self, elem: ElemType) -> Result<Self, NotExact> {
        Ok(Self::cut(self.b.next_after(&o.b, elem)?))
    }
    fn reduce_precision(&self, e: u32, m: u32, elem: ElemType) -> Result<Self, NotExact> {
        Ok(Self::cut(self.b.reduce_precision(e, m, elem)?))
    }

    fn round_to(self, elem: ElemType) -> Self {
        self.settle(elem, false)
    }
    fn round_accumulated(self, elem: ElemType) -> Self {
        self.settle(elem, true)
    }
}

/// 2⁻⁵²: a bound on the relative error of one f64 add or multiply, doubled.
const EPS: f64 = f64::EPSILON;

impl Recorded {
    pub fn len(&self) -> usize {
        self.nodes.len()
    }

    pub fn is_empty(&self) -> bool {
        self.nodes.is_empty()
    }

    /// Work arrays for [`Recorded::bound`] (reset by every sweep).
    pub fn scratch(&self) -> Scratch {
        Scratch {
            m: vec![0.0; self.nodes.len()],
            r: vec![0.0; self.nodes.len()],
        }
    }

    /// The first-order bound Σₖ mag(Āₖ)·δₖ on |computed − exact| of the value
    /// recorded as node `out`: one reverse sweep in midpoint–radius
    /// arithmetic (see the module doc; the radii absorb the midpoints' f64
    /// rounding, and a final factor 1 + 10⁻⁶ the radii's own, whose relative
    /// error along any path of ≤ 10⁹ roundings stays below 2.3·10⁻⁷).
    pub fn bound(&self, out: u32, s: &mut Scratch) -> f64 {
        self.bound_of(&[(out, 1.0)], s)
    }

    /// The bound on |Σ wᵢ(ŷᵢ − yᵢ)| over seeds (node, wᵢ): for a decision
    /// between a and b, seeds (a, 1) and (b, −1) bound the computed
    /// difference's error with their shared roundings cancelling.
    pub fn bound_of(&self, seeds: &[(u32, f64)], s: &mut Scratch) -> f64 {
        let live: Vec<(u32, f64)> = seeds.iter().copied().filter(|(n, _)| *n != EXACT).collect();
        let Some(out) = live.iter().map(|(n, _)| *n).max() else {
            return 0.0;
        };
        let (am, ar) = (&mut s.m, &mut s.r);
        for (n, w) in live {
            am[n as usize] += w;
        }
        let mut total = 0.0f64;
        for n in (0..=out as usize).rev() {
            let (m, r) = (am[n], ar[n]);
            if m == 0.0 && r == 0.0 {
                continue;
            }
            am[n] = 0.0;
            ar[n] = 0.0;
            let node = &self.nodes[n];
            if node.r > 0.0 {
                total += (m.abs() + r) * node.r;
            }
            for (&p, &d) in node.parent.iter().zip(&node.part) {
                if p == EXACT {
                    continue;
                }
                let cm = m * d.m;
                let cr = m.abs() * d.r + r * (d.m.abs() + d.r) + EPS * cm.abs();
                let p = p as usize;
                let old = am[p];
                am[p] = old + cm;
                ar[p] += cr + EPS * (old.abs() + cm.abs());
            }
        }
        if total.is_nan() {
            return f64::INFINITY;
        }
        up(total * (1.0 + 1e-6))
    }
}

/// Adjoint work arrays, one entry per tape node.
pub struct Scratch {
    m: Vec<f64>,
    r: Vec<f64>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bound::Ieee754;

    type A = Adj<Ieee754>;

    fn settled(x: A) -> A {
        x.round_to(ElemType::F32)
    }

    #[test]
    fn a_cancelling_chain_is_bounded_by_its_adjoint_not_its_box() {
        // y = (x·w) − (x·w') with w' = w: the two products' errors are the
        // same roundings only in exact arithmetic; each product is rounded
        // once (u·|xw|), the difference once more. The adjoint bound is
        // 2u|xw| + (its rounding of 0): the box bound is the same here, but a
        // second layer z = y·c − y·c cancels exactly in the adjoint
        // (partials c and −c of the same node) while the box doubles.
        start(1000);
        let x = A::exact(1.5);
        let w = A::exact(0.1f32 as f64);
        let p = settled(x.mul(&w));
        let q = settled(p.mul(&A::exact(3.0)));
        let z = settled(q.sub(&settled(p.mul(&A::exact(3.0)))));
        let tape = take().expect("within budget");
        let mut s = tape.scratch();
        let adj = tape.bound(z.id, &mut s);
        // z is exactly 0 whatever p's error: only the two products by 3 and
        // the subtraction round (|3p̂|u each, and u|0|+η).
        let u = 2f64.powi(-24);
        let pm = 1.5 * (0.1f32 as f64) * 3.0;
        assert!(adj >= 2.0 * u * pm, "adjoint {adj}");
        assert!(adj < 2.2 * u * pm + 1e-37, "adjoint {adj}");
        // The box charges p's error twice (3e_p each side).
        assert!(z.b.e > adj * 1.5, "box {} adjoint {adj}", z.b.e);
    }

    #[test]
    fn an_over_budget_tape_is_refused() {
        start(3);
        let mut x = A::exact(1.25);
        for _ in 0..5 {
            x = settled(x.mul(&A::exact(1.1f32 as f64)));
        }
        assert!(take().is_none());
    }
}
