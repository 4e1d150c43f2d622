//! Outward-rounded f64 interval arithmetic for the rounding-error analysis:
//! every operation computes in f64 round-to-nearest and then nudges the
//! result one f64 step outward (`up`/`down`), so the real result of the same
//! operation on the endpoints is always enclosed. Nudging instead of
//! switching the FPU rounding mode keeps the code portable and leaves the
//! rest of the process (and the f32 evaluations it is compared with) alone.

/// The next f64 toward +∞ (∞ and NaN stay). `f64::next_up` is newer than
/// the workspace's minimum Rust, hence the bit form.
pub fn up(x: f64) -> f64 {
    if x.is_nan() || x == f64::INFINITY {
        return x;
    }
    if x == 0.0 {
        return f64::from_bits(1);
    }
    let b = x.to_bits();
    f64::from_bits(if x > 0.0 { b + 1 } else { b - 1 })
}

/// The next f64 toward −∞.
pub fn down(x: f64) -> f64 {
    -up(-x)
}

/// An upper bound of the real a + b (for bounds, which are ≥ 0).
pub fn add_up(a: f64, b: f64) -> f64 {
    up(a + b)
}

/// An upper bound of the real a · b for a, b ≥ 0 (0 · ∞ = 0: a zero factor
/// is an exact zero here, an infinite one a vacuous bound).
pub fn mul_up(a: f64, b: f64) -> f64 {
    if a == 0.0 || b == 0.0 {
        0.0
    } else {
        up(a * b)
    }
}

/// An upper bound of the real a / b for a ≥ 0, b > 0.
pub fn div_up(a: f64, b: f64) -> f64 {
    if a == 0.0 {
        0.0
    } else {
        up(a / b)
    }
}

/// `k` one-ulp nudges outward. The enclosure of a std f64 library function
/// (exp, ln, tanh, sqrt) takes 3: its result is within 1 ulp of the real
/// value (the libm accuracy the analysis assumes for f64, stated in
/// docs/bound.md), one more covers the rounding of the argument's own arithmetic.
pub fn widen(lo: f64, hi: f64, k: usize) -> (f64, f64) {
    let (mut l, mut h) = (lo, hi);
    for _ in 0..k {
        l = down(l);
        h = up(h);
    }
    (l, h)
}

/// A closed interval [lo, hi] of reals (lo ≤ hi; endpoints may be ±∞).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Iv {
    pub lo: f64,
    pub hi: f64,
}

/// The product of two endpoints with 0 · ±∞ = 0 (an exact zero factor).
fn emul(a: f64, b: f64) -> f64 {
    if a == 0.0 || b == 0.0 {
        0.0
    } else {
        a * b
    }
}

impl Iv {
    pub fn point(x: f64) -> Iv {
        Iv { lo: x, hi: x }
    }

    pub const ALL: Iv = Iv {
        lo: f64::NEG_INFINITY,
        hi: f64::INFINITY,
    };

    pub fn is_point(&self) -> bool {
        self.lo == self.hi
    }

    /// The largest |x| over the interval.
    pub fn mag(&self) -> f64 {
        self.lo.abs().max(self.hi.abs())
    }

    /// The smallest |x| over the interval (0 when it holds 0).
    pub fn mig(&self) -> f64 {
        if self.lo > 0.0 {
            self.lo
        } else if self.hi < 0.0 {
            -self.hi
        } else {
            0.0
        }
    }

    pub fn mid(&self) -> f64 {
        if self.lo == self.hi {
            self.lo
        } else {
            0.5 * self.lo + 0.5 * self.hi
        }
    }

    pub fn add(&self, o: &Iv) -> Iv {
        Iv {
            lo: down(self.lo + o.lo),
            hi: up(self.hi + o.hi),
        }
    }

    pub fn neg(&self) -> Iv {
        Iv {
            lo: -self.hi,
            hi: -self.lo,
        }
    }

    pub fn mul(&self, o: &Iv) -> Iv {
        if *self == Iv::point(0.0) || *o == Iv::point(0.0) {
            return Iv::point(0.0); // an exact zero factor
        }
        let c = [
            emul(self.lo, o.lo),
            emul(self.lo, o.hi),
            emul(self.hi, o.lo),
            emul(self.hi, o.hi),
        ];
        let lo = c.iter().copied().fold(f64::INFINITY, f64::min);
        let hi = c.iter().copied().fold(f64::NEG_INFINITY, f64::max);
        // A product of points that f64 holds exactly needs no nudge.
        if self.is_point() && o.is_point() && exact_product(self.lo, o.lo) {
            return Iv { lo, hi };
        }
        Iv {
            lo: down(lo),
            hi: up(hi),
        }
    }

    /// Division; the whole line when the divisor's interval holds 0.
    pub fn div(&self, o: &Iv) -> Iv {
        if o.lo <= 0.0 && o.hi >= 0.0 {
            return Iv::ALL;
        }
        let c = [
            self.lo / o.lo,
            self.lo / o.hi,
            self.hi / o.lo,
            self.hi / o.hi,
        ];
        let lo = c.iter().copied().fold(f64::INFINITY, f64::min);
        let hi = c.iter().copied().fold(f64::NEG_INFINITY, f64::max);
        Iv {
            lo: down(lo),
            hi: up(hi),
        }
    }

    pub fn max(&self, o: &Iv) -> Iv {
        Iv {
            lo: self.lo.max(o.lo),
            hi: self.hi.max(o.hi),
        }
    }

    pub fn min(&self, o: &Iv) -> Iv {
        Iv {
            lo: self.lo.min(o.lo),
            hi: self.hi.min(o.hi),
        }
    }

    /// [lo − e, hi + e]: where a computed value within e of the enclosed
    /// exact value lies.
    pub fn hull(&self, e: f64) -> Iv {
        Iv {
            lo: down(self.lo - e),
            hi: up(self.hi + e),
        }
    }

    pub fn contains(&self, x: f64) -> bool {
        self.lo <= x && x <= self.hi
    }

    pub fn has_nan(&self) -> bool {
        self.lo.is_nan() || self.hi.is_nan()
    }
}

/// Whether a · b is exact in f64: both are f32 values (24-bit significands,
/// so the product has at most 48 bits) and the product neither overflows nor
/// leaves f64's normal range.
fn exact_product(a: f64, b: f64) -> bool {
    let p = a * b;
    (a as f32 as f64 == a)
        && (b as f32 as f64 == b)
        && p.is_finite()
        && (p == 0.0 && (a == 0.0 || b == 0.0) || p.abs() >= f64::MIN_POSITIVE)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nudges_step_one_ulp_outward() {
        assert_eq!(up(1.0), 1.0 + f64::EPSILON);
        assert_eq!(down(1.0), 1.0 - f64::EPSILON / 2.0);
        assert_eq!(up(0.0), f64::from_bits(1));
        assert_eq!(down(0.0), -f64::from_bits(1));
        assert_eq!(up(-1.0), -1.0 + f64::EPSILON / 2.0);
        assert_eq!(up(f64::INFINITY), f64::INFINITY);
        assert_eq!(down(f64::NEG_INFINITY), f64::NEG_INFINITY);
        assert_eq!(up(f64::MAX), f64::INFINITY);
    }

    #[test]
    fn sums_enclose_the_real_sum() {
        // 0.1 + 0.2 is not 0.3 in f64; the enclosure holds both neighbours of
        // the real sum 0.3000000000000000166533453693773481063544750213623046875.
        let s = Iv::point(0.1).add(&Iv::point(0.2));
        assert!(s.lo < 0.1 + 0.2 && 0.1 + 0.2 <= s.hi);
        assert!(s.lo <= 0.3 && 0.30000000000000004 <= s.hi);
    }

    #[test]
    fn products_of_f32_points_are_exact_and_zero_kills_infinity() {
        let p = Iv::point(3.0).mul(&Iv::point(0.1f32 as f64));
        assert!(p.is_point());
        let z = Iv::point(0.0).mul(&Iv::ALL);
        assert_eq!(z, Iv::point(0.0));
        let q = Iv { lo: -1.0, hi: 2.0 }.mul(&Iv { lo: -3.0, hi: 0.5 });
        assert!(q.lo <= -6.0 && q.hi >= 3.0);
        assert!(Iv { lo: 1.0, hi: 2.0 }.div(&Iv { lo: -1.0, hi: 1.0 }) == Iv::ALL);
    }
}
