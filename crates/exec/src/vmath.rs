//! Vectorisable f32 `exp`, `tanh` and `logistic` for the fused loops,
//! computed in f32 (sixteen AVX-512 lanes) by range reduction and
//! polynomials in fused multiply-adds, with no call and no branch. The
//! generic evaluator computes these as `(x as f64).f() as f32` through libm,
//! one call per element, which no loop vectorises; an earlier f64 twin of
//! that (correctly rounded but for one element in 10⁶) cost two to three
//! times the vector instructions per element, and the loops that hold these
//! functions (GELU's tanh, the softmax's exp, swish's logistic) are bound by
//! their instruction count.
//!
//! Accuracy contract, against the real function at the f32 argument: `exp`
//! within 1 ulp, `tanh` within 2 ulp, `logistic` within 3 ulp, over every
//! f32 of the ranges in the tests (exp [−104, 89], tanh [−12, 12], logistic
//! [−104, 90]). The suite checks every 127th bit pattern of each range; the
//! ignored test `the_contract_holds_on_every_f32` checks every one (`cargo
//! test --release -p exec --lib vmath -- --ignored`; measured maxima 0.870,
//! 1.561 and 2.402 ulp, in 9 minutes on two cores). `cert`'s accuracy
//! hypotheses measure these very functions themselves. NaN in gives NaN out; ±0, the
//! saturation to ±1 (tanh), 0/1 (logistic), the gradual underflow to 0 and
//! the overflow to ∞ (exp) are as in f32. `mul_add` is correctly rounded on
//! every build (FMA in the AVX2/AVX-512 twins, libm's `fmaf` in the
//! baseline), so every twin gives the same bits.

/// 1.5·2²³: adding it rounds an |x| < 2²² to an integer held in the low
/// mantissa bits (round to nearest, no float→int conversion needed).
const ROUND: f32 = 12_582_912.0;
/// ln 2 in two parts: the f32 nearest ln 2, and the rest (r = y − k·ln 2 in
/// two fused multiply-adds is then within 2⁻²⁶ relative of exact).
const LN2_HI: f32 = std::f32::consts::LN_2;
const LN2_LO: f32 = -1.904_654_3e-9;

/// 2ʲ for j in [-126, 127], built from its exponent bits.
#[inline(always)]
fn pow2i(j: i32) -> f32 {
    f32::from_bits(((j + 127) as u32) << 23)
}

/// `(p, k)` with `e^y = p·2ᵏ`, p in [√½, √2], for finite y with |y·log₂e| < 2²²:
/// y = k·ln 2 + r, |r| ≤ ln2/2, and p = 1 + r·(1 + r/2 + … + r⁷/8!) (the
/// Taylor remainder r⁹/9! < 2.9e-10 relative, a bias under 0.005 ulp; Horner
/// in FMAs).
#[inline(always)]
fn exp_parts(y: f32) -> (f32, i32) {
    let t = y.mul_add(std::f32::consts::LOG2_E, ROUND);
    let kf = t - ROUND;
    let k = (t.to_bits() as i32).wrapping_sub(ROUND.to_bits() as i32);
    let r = (-kf).mul_add(LN2_HI, y);
    let r = (-kf).mul_add(LN2_LO, r);
    let mut q: f32 = 1.0 / 40320.0;
    for c in [
        1.0 / 5040.0,
        1.0 / 720.0,
        1.0 / 120.0,
        1.0 / 24.0,
        1.0 / 6.0,
        0.5,
        1.0,
    ] {
        q = q.mul_add(r, c);
    }
    (r.mul_add(q, 1.0), k)
}

/// `exp` in f32.
#[inline(always)]
pub fn exp(x: f32) -> f32 {
    // Below -104 the f32 result is 0, above 89 it is ∞: clamping keeps them
    // and bounds k to [-150, 128].
    let (p, k) = exp_parts(x.clamp(-104.0, 89.0));
    // 2ᵏ in two factors, each a normal float: the first product is exact,
    // the second rounds once (into the subnormals, or to ∞).
    let k1 = k >> 1;
    let e = p * pow2i(k1) * pow2i(k - k1);
    if x.is_nan() {
        x
    } else {
        e
    }
}

/// tanh's Taylor coefficients of a³, a⁵, …, a¹⁹ (2²ⁿ(2²ⁿ−1)B₂ₙ/(2n)!), highest
/// first; at a < 0.55 the next term is about 0.01 ulp (a one-signed
/// truncation error is a bias that sums coherently over a gradient's terms:
/// stopping at a¹⁷, 0.1 ulp, left ViT's worst gradient 1.3–1.6× less accurate).
const TANH_SERIES: [f64; 9] = [
    -443_861_162.0 / 1_856_156_927_625.0,
    6_404_582.0 / 10_854_718_875.0,
    -929_569.0 / 638_512_875.0,
    21_844.0 / 6_081_075.0,
    -1_382.0 / 155_925.0,
    62.0 / 2_835.0,
    -17.0 / 315.0,
    2.0 / 15.0,
    -1.0 / 3.0,
];

/// a + a³·(c₀a¹⁶ + … + c₈) by Horner in a², coefficients highest first.
#[inline(always)]
fn odd_series(a: f32, c: &[f64; 9]) -> f32 {
    let a2 = a * a;
    let mut s = c[0] as f32;
    for &c in &c[1..] {
        s = s.mul_add(a2, c as f32);
    }
    (a * a2).mul_add(s, a)
}

/// `tanh` in f32.
#[inline(always)]
pub fn tanh(x: f32) -> f32 {
    // Beyond 9.1, 1 - tanh < 2.4e-8, under half an ulp of 1: the f32 result
    // is ±1. (A NaN becomes 9.1 here and is restored at the end.)
    let a = x.abs();
    let a = if a < 9.1 { a } else { 9.1 };
    // From 0.55 on 1 − 2/(e²ᵃ + 1) loses at most a bit to cancellation
    // (tanh ≥ ½); below, the odd series.
    let (p, k) = exp_parts(2.0 * a);
    let big = 1.0 - 2.0 / (p * pow2i(k) + 1.0);
    let small = odd_series(a, &TANH_SERIES);
    let t = if a < 0.55 { small } else { big };
    let t = t.copysign(x);
    if x.is_nan() {
        x
    } else {
        t
    }
}

/// `logistic` (the sigmoid) in f32: `1 / (1 + e^-x)` for x ≥ 0 and
/// `e^x / (1 + e^x)` below, so neither side cancels or overflows.
#[inline(always)]
pub fn logistic(x: f32) -> f32 {
    let e = exp(-x.abs());
    let num = if x >= 0.0 { 1.0 } else { e };
    let s = num / (1.0 + e);
    if x.is_nan() {
        x
    } else {
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The largest error of `fast` in ulps of the reference `exact` (in f64)
    /// over every `stride`-th f32 bit pattern of [lo, hi], both signs.
    fn max_ulps(
        lo: f32,
        hi: f32,
        stride: u32,
        fast: impl Fn(f32) -> f32,
        exact: impl Fn(f64) -> f64,
    ) -> f64 {
        let mut worst = 0f64;
        for neg in [false, true] {
            let (a, b) = if neg {
                ((-hi).max(0.0), -lo)
            } else {
                (lo.max(0.0), hi)
            };
            let mut i = a.to_bits();
            while a <= b && i <= b.to_bits() {
                let x = f32::from_bits(i) * if neg { -1.0 } else { 1.0 };
                let y = exact(x as f64);
                if y.is_finite() && (y as f32).is_finite() {
                    let ulp =
                        2f64.powf((y.abs().max(f32::MIN_POSITIVE as f64)).log2().floor() - 23.0);
                    worst = worst.max((fast(x) as f64 - y).abs() / ulp);
                }
                i += stride;
            }
        }
        worst
    }

    /// Every 127th bit pattern: ~12 M arguments per function.
    const STRIDE: u32 = 127;

    /// The accuracy contract (module docs): at most 1, 2 and 3 ulp.
    fn within_the_contract(stride: u32) {
        let e = max_ulps(-104.0, 89.0, stride, exp, f64::exp);
        let t = max_ulps(-12.0, 12.0, stride, tanh, f64::tanh);
        let l = max_ulps(-104.0, 90.0, stride, logistic, sigmoid);
        eprintln!("every {stride}. f32 pattern: exp {e:.3}, tanh {t:.3}, logistic {l:.3} ulp");
        assert!(
            e <= 1.0 && t <= 2.0 && l <= 3.0,
            "exp {e}, tanh {t}, logistic {l} ulp"
        );
    }

    fn sigmoid(x: f64) -> f64 {
        1.0 / (1.0 + (-x).exp())
    }

    #[test]
    fn the_polynomials_keep_the_contract_on_a_sample() {
        within_the_contract(STRIDE);
    }

    /// Every f32 of the three ranges (~3 × 2.2 G arguments: minutes in a
    /// release build, hours in a debug one).
    #[test]
    #[ignore = "exhaustive: run with --release -- --ignored"]
    fn the_contract_holds_on_every_f32() {
        within_the_contract(1);
    }

    #[test]
    fn special_values_are_those_of_f32() {
        assert_eq!(exp(f32::NEG_INFINITY), 0.0);
        assert_eq!(exp(f32::INFINITY), f32::INFINITY);
        assert_eq!(exp(88.8), f32::INFINITY);
        assert_eq!(exp(0.0), 1.0);
        // The gradual underflow: e^-100 ≈ 3.7e-44 is a subnormal.
        assert_eq!(exp(-100.0), (-100f64).exp() as f32);
        assert!(exp(-100.0) > 0.0 && exp(-104.0) == 0.0);
        assert_eq!(tanh(20.0), 1.0);
        assert_eq!(tanh(-20.0), -1.0);
        assert!(tanh(-0.0).is_sign_negative() && tanh(-0.0) == 0.0);
        assert_eq!(logistic(200.0), 1.0);
        assert_eq!(logistic(-200.0), 0.0);
        assert_eq!(logistic(0.0), 0.5);
        for f in [exp, tanh, logistic] {
            assert!(f(f32::NAN).is_nan());
        }
    }

    #[test]
    fn a_wrong_polynomial_term_is_caught() {
        // Negative control: the series' a⁵ coefficient off by 1 % (a
        // plausible typo) must fail the same measurement that passes tanh.
        let mut typo = TANH_SERIES;
        typo[7] *= 1.01;
        let (lo, hi) = (0.05, 0.55);
        assert!(max_ulps(lo, hi, STRIDE, tanh, f64::tanh) <= 2.0);
        assert!(
            max_ulps(
                lo,
                hi,
                STRIDE,
                |x| odd_series(x.abs(), &typo).copysign(x),
                f64::tanh
            ) > 4.0
        );
    }
}
