//! Vectorisable f32 `exp`, `tanh` and `logistic` for the fused loops. The
//! generic evaluator computes these as `(x as f64).f() as f32` through libm,
//! one call per element, which no loop vectorises (GELU(tanh) was half of a
//! ViT forward). Here each is evaluated in f64 with no call: range reduction
//! `y = k·ln2 + r` and a degree-11 Taylor polynomial for `e^r` in fused
//! multiply-adds, relative error below 2e-14 before the final rounding to f32. So the f32 result is
//! the generic evaluator's (the correct rounding of the f64 value) except
//! where the true value lies within ~1e-14 relative of a rounding boundary,
//! where it may be the neighbouring float (one ulp, about once in 10⁶
//! elements). NaN in gives NaN out; ±0, the saturation to ±1 (tanh), 0/1
//! (logistic), and the underflow/overflow to 0/∞ (exp) are as in f32.

const LOG2E: f64 = std::f64::consts::LOG2_E;
/// ln 2 in two parts: `k·LN2_HI` is exact for the |k| ≤ 1100 used here.
const LN2_HI: f64 = 6.931_471_803_691_238e-1;
const LN2_LO: f64 = 1.908_214_929_270_587_7e-10;
/// 1.5·2⁵²: adding it rounds an |x| < 2⁵¹ to an integer held in the low
/// mantissa bits (round to nearest, no float→int conversion needed).
const ROUND: f64 = 6_755_399_441_055_744.0;

/// `e^y` for `y` in [-700, 700] (the caller clamps), branch-free.
#[inline(always)]
fn exp_f64(y: f64) -> f64 {
    let t = y * LOG2E + ROUND;
    let kf = t - ROUND;
    let k = t.to_bits().wrapping_sub(ROUND.to_bits()) as i64;
    let r = (y - kf * LN2_HI) - kf * LN2_LO;
    // e^r for |r| ≤ ln2/2: Σ_{n≤11} rⁿ/n! (remainder < 0.35¹²/12! ≈ 7e-15),
    // by Horner in fused multiply-adds: one rounding per step, and the same
    // bits on every path (FMA in the AVX2/AVX-512 twins, libm's correctly
    // rounded `fma` in the baseline build, `fmadd` on aarch64).
    let mut p: f64 = 1.0 / 39_916_800.0;
    for c in [
        1.0 / 3_628_800.0,
        1.0 / 362_880.0,
        1.0 / 40_320.0,
        1.0 / 5_040.0,
        1.0 / 720.0,
        1.0 / 120.0,
        1.0 / 24.0,
        1.0 / 6.0,
        0.5,
        1.0,
        1.0,
    ] {
        p = p.mul_add(r, c);
    }
    p * f64::from_bits(((k + 1023) as u64) << 52)
}

/// `exp` in f32: `e^x` rounded from f64.
#[inline(always)]
pub(crate) fn exp(x: f32) -> f32 {
    // Below -104 the f32 result is 0, above 89 it is ∞: clamping keeps them.
    let e = exp_f64((x as f64).clamp(-104.0, 89.0)) as f32;
    if x.is_nan() {
        x
    } else {
        e
    }
}

/// `tanh` in f32.
#[inline(always)]
pub(crate) fn tanh(x: f32) -> f32 {
    // Beyond 9.1, 1 - tanh < 2.4e-8, under half an ulp of 1: the f32 result is ±1.
    let a = (x as f64).abs().min(9.1);
    let big = 1.0 - 2.0 / (exp_f64(2.0 * a) + 1.0);
    // Small |x|, where 1 - 2/(e+1) cancels: the series to a⁷ (error < a⁹/40).
    let a2 = a * a;
    let small = a * (1.0 + a2 * (-1.0 / 3.0 + a2 * (2.0 / 15.0 + a2 * (-17.0 / 315.0))));
    let t = if a < 1e-2 { small } else { big };
    let t = (t as f32).copysign(x);
    if x.is_nan() {
        x
    } else {
        t
    }
}

/// `logistic` (the sigmoid) in f32: `1 / (1 + e^-x)`.
#[inline(always)]
pub(crate) fn logistic(x: f32) -> f32 {
    // Beyond ±700 the f32 result is exactly 0 or 1 either way.
    let e = exp_f64(-(x as f64).clamp(-700.0, 700.0));
    let s = (1.0 / (1.0 + e)) as f32;
    if x.is_nan() {
        x
    } else {
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Floats spread over the range each function is interesting on, plus
    /// the special values.
    fn samples(lo: f32, hi: f32) -> Vec<f32> {
        let mut v: Vec<f32> = (0..200_001)
            .map(|i| lo + (hi - lo) * i as f32 / 200_000.0)
            .collect();
        for p in -40..=0 {
            let t = 10f32.powi(p);
            v.extend([t, -t, t * 1.37, -t * 2.9]);
        }
        v.extend([0.0, -0.0, f32::MIN_POSITIVE, 1e-45, f32::MAX, f32::MIN]);
        v.extend([f32::INFINITY, f32::NEG_INFINITY]);
        v
    }

    /// Checks `fast` against the f64 libm value rounded to f32: within one
    /// ulp everywhere, equal on all but a few millionths of the samples.
    fn check(name: &str, fast: impl Fn(f32) -> f32, libm: impl Fn(f64) -> f64, lo: f32, hi: f32) {
        let xs = samples(lo, hi);
        let mut differ = 0;
        for &x in &xs {
            let want = libm(x as f64) as f32;
            let got = fast(x);
            if got.to_bits() == want.to_bits() {
                continue;
            }
            let ulp = (got.to_bits() as i64 - want.to_bits() as i64).abs();
            assert!(
                ulp <= 1 && got.is_sign_negative() == want.is_sign_negative(),
                "{name}({x:e}) = {got:e}, libm gives {want:e}"
            );
            differ += 1;
        }
        assert!(
            differ * 100_000 <= xs.len(),
            "{name}: {differ} of {} off by an ulp",
            xs.len()
        );
        assert!(fast(f32::NAN).is_nan(), "{name}(NaN)");
    }

    #[test]
    fn exp_is_libm_exp_rounded_to_f32() {
        check("exp", exp, f64::exp, -110.0, 95.0);
        assert_eq!(exp(f32::NEG_INFINITY), 0.0);
        assert_eq!(exp(f32::INFINITY), f32::INFINITY);
    }

    #[test]
    fn tanh_is_libm_tanh_rounded_to_f32() {
        check("tanh", tanh, f64::tanh, -12.0, 12.0);
        assert!(tanh(-0.0).is_sign_negative() && tanh(-0.0) == 0.0);
    }

    #[test]
    fn logistic_is_the_f64_sigmoid_rounded_to_f32() {
        let reference = |x: f64| {
            if x >= 0.0 {
                1.0 / (1.0 + (-x).exp())
            } else {
                x.exp() / (1.0 + x.exp())
            }
        };
        check("logistic", logistic, reference, -120.0, 40.0);
    }

    #[test]
    fn a_wrong_polynomial_term_is_caught() {
        // Negative control: tanh with its cubic term off by 1 % (a plausible
        // typo) must fail the same comparison.
        let wrong = |x: f32| {
            let a = x as f64;
            (a - a * a * a / 3.03) as f32
        };
        let caught = std::panic::catch_unwind(|| {
            check("tanh-wrong", wrong, f64::tanh, -0.3, 0.3);
        });
        assert!(caught.is_err(), "the comparison passes a wrong tanh");
    }
}
