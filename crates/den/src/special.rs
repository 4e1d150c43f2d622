//! Special functions in f64 for the CHLO ops JAX leaves in (`erf_inv`,
//! `lgamma`, `digamma`, `polygamma`, `zeta`, `bessel_i1e`), the bit-level float
//! helpers (`next_after`, `reduce_precision`, float ↔ bits per element type) and
//! `round_nearest_afz`.
//!
//! Each function is written from its mathematics — power series, recurrences,
//! reflection formulas, Stirling/Euler–Maclaurin asymptotics with Bernoulli
//! numbers, continued fractions, Newton–Halley refinement — with the edge values
//! (NaN, ±0, ±∞, poles) as JAX/XLA give them.

use crate::scalar::erf_f64;
use ir::ElemType;
use std::f64::consts::PI;

/// Bernoulli numbers B₂, B₄, …, B₁₈.
const BERNOULLI_EVEN: [f64; 9] = [
    1.0 / 6.0,
    -1.0 / 30.0,
    1.0 / 42.0,
    -1.0 / 30.0,
    5.0 / 66.0,
    -691.0 / 2730.0,
    7.0 / 6.0,
    -3617.0 / 510.0,
    43867.0 / 798.0,
];

/// sin(πx), exact at integers (argument reduced modulo 2 first, so large
/// arguments do not lose the phase).
fn sin_pi(x: f64) -> f64 {
    let r = x % 2.0; // in (−2, 2), exact
    if r == r.trunc() {
        return 0.0;
    }
    (PI * r).sin()
}

/// cos(πx)/sin(πx) for a non-integer x.
fn cot_pi(x: f64) -> f64 {
    let r = x % 1.0;
    (PI * r).cos() / (PI * r).sin()
}

/// erfc(x) for x ≥ 0 without cancellation: 1 − erf below 2, and above it the
/// continued fraction erfc(x) = e^{−x²}/√π · 1/(x + ½/(x + 1/(x + 3⁄2/(x + …)))),
/// evaluated backwards from a fixed depth (it converges quickly for x ≥ 2).
fn erfc_nonneg(x: f64) -> f64 {
    if x < 2.0 {
        return 1.0 - erf_f64(x);
    }
    if x > 27.3 {
        return 0.0; // below the smallest subnormal
    }
    let mut tail = x;
    for n in (1..=120).rev() {
        tail = x + (n as f64 / 2.0) / tail;
    }
    (-x * x).exp() / (PI.sqrt() * tail)
}

/// The inverse error function: erf(erf_inv(x)) = x on (−1, 1); ±1 give ±∞,
/// |x| > 1 and NaN give NaN, ±0 stay ±0.
///
/// A closed-form first guess (Winitzki's approximation, relative error about
/// 2·10⁻³) is refined by Halley steps on erf(y) − |x|, written as
/// (1 − |x|) − erfc(y) for |x| > ½ so that values near ±1 keep their precision.
pub fn erf_inv(x: f64) -> f64 {
    if x.is_nan() || x.abs() > 1.0 {
        return f64::NAN;
    }
    if x == 0.0 {
        return x;
    }
    if x.abs() == 1.0 {
        return x * f64::INFINITY;
    }
    let ax = x.abs();
    let a = 0.147;
    let w = ((1.0 - ax) * (1.0 + ax)).ln();
    let t = 2.0 / (PI * a) + w / 2.0;
    let mut y = ((t * t - w / a).sqrt() - t).sqrt();
    let one_minus = 1.0 - ax; // exact for ax ≥ ½ (Sterbenz)
    for _ in 0..8 {
        let residual = if ax <= 0.5 {
            erf_f64(y) - ax
        } else {
            one_minus - erfc_nonneg(y)
        };
        let slope = std::f64::consts::FRAC_2_SQRT_PI * (-y * y).exp();
        if slope == 0.0 {
            break;
        }
        // Halley: erf'' = −2y·erf', so the step is d / (1 + y·d) with d = f/f'.
        let d = residual / slope;
        let step = d / (1.0 + y * d);
        y -= step;
        if step.abs() <= 1e-17 * y.abs() {
            break;
        }
    }
    y.copysign(x)
}

/// ζ(k) − 1 = ζ(k, 2) for k = 2, 3, …, 41, computed once (the Taylor
/// coefficients of lnΓ(1+t) beyond its logarithmic part).
fn zeta_minus_one() -> &'static [f64; 40] {
    static TABLE: std::sync::OnceLock<[f64; 40]> = std::sync::OnceLock::new();
    TABLE.get_or_init(|| std::array::from_fn(|i| zeta(i as f64 + 2.0, 2.0)))
}

/// lnΓ(1+t) for |t| ≤ ½ from the Taylor series
/// lnΓ(1+t) = −ln(1+t) + t(1−γ) + Σ_{k≥2} (−1)ᵏ(ζ(k)−1)tᵏ/k,
/// whose terms fall like (t/2)ᵏ.
fn lgamma_one_plus(t: f64) -> f64 {
    const EULER_GAMMA: f64 = 0.577_215_664_901_532_9;
    let mut sum = 0.0;
    let mut tk = -t; // (−t)ᵏ
    for (i, z) in zeta_minus_one().iter().enumerate() {
        let k = i as f64 + 2.0;
        tk *= -t;
        let term = z * tk / k;
        sum += term;
        if term.abs() <= 1e-18 * sum.abs() {
            break;
        }
    }
    -t.ln_1p() + t * (1.0 - EULER_GAMMA) + sum
}

/// log|Γ(x)|: +∞ at the poles (0, −1, −2, …) and at ±∞, NaN for NaN; +0 at 1 and 2.
///
/// Near 1 (|x−1| ≤ ½) the Taylor series of lnΓ(1+t); below, lnΓ(x) =
/// lnΓ(x+1) − ln x; between 1.5 and 10 the recurrence Γ(x) = (x−1)Γ(x−1) down
/// into that interval (every log term positive, so no cancellation); from 10
/// on the Stirling series (x−½)ln x − x + ½ln 2π + Σ B₂ₖ/(2k(2k−1)x^{2k−1}).
/// Negative x use the reflection Γ(x)Γ(1−x) = π/sin(πx).
pub fn lgamma(x: f64) -> f64 {
    if x.is_nan() {
        return x;
    }
    if x.is_infinite() {
        return f64::INFINITY;
    }
    if x == 1.0 || x == 2.0 {
        return 0.0;
    }
    if x <= 0.0 {
        let s = sin_pi(x);
        if s == 0.0 {
            return f64::INFINITY;
        }
        return PI.ln() - s.abs().ln() - lgamma(1.0 - x);
    }
    if x < 0.5 {
        return lgamma_one_plus(x) - x.ln();
    }
    if x <= 1.5 {
        return lgamma_one_plus(x - 1.0);
    }
    if x < 10.0 {
        // Γ(x) = (x−1)(x−2)…(x−n)·Γ(x−n) with x − n in (0.5, 1.5].
        let mut z = x;
        let mut log_sum = 0.0;
        while z > 1.5 {
            z -= 1.0;
            log_sum += z.ln();
        }
        return log_sum + lgamma_one_plus(z - 1.0);
    }
    let z2 = x * x;
    let mut series = 0.0;
    let mut zpow = x;
    for (k, b) in BERNOULLI_EVEN.iter().enumerate() {
        let two_k = 2.0 * (k as f64 + 1.0);
        series += b / (two_k * (two_k - 1.0) * zpow);
        zpow *= z2;
    }
    (x - 0.5) * x.ln() - x + 0.5 * (2.0 * PI).ln() + series
}

/// ψ(x) = Γ'(x)/Γ(x): NaN at the poles (0, −1, …), at −∞ and for NaN; +∞ at +∞.
///
/// Shifted above 10 with ψ(x+1) = ψ(x) + 1/x, then the asymptotic series
/// ln x − 1/(2x) − Σ B₂ₖ/(2k·x^{2k}); negative x use ψ(1−x) − ψ(x) = π·cot(πx).
pub fn digamma(x: f64) -> f64 {
    if x.is_nan() || x == f64::NEG_INFINITY {
        return f64::NAN;
    }
    if x == f64::INFINITY {
        return x;
    }
    if x <= 0.0 {
        if x == x.trunc() {
            return f64::NAN;
        }
        return digamma(1.0 - x) - PI * cot_pi(x);
    }
    let mut z = x;
    let mut acc = 0.0;
    while z < 10.0 {
        acc -= 1.0 / z;
        z += 1.0;
    }
    let z2 = z * z;
    let mut zpow = z2;
    let mut series = 0.0;
    for (k, b) in BERNOULLI_EVEN.iter().enumerate() {
        let two_k = 2.0 * (k as f64 + 1.0);
        series += b / (two_k * zpow);
        zpow *= z2;
    }
    acc + z.ln() - 0.5 / z - series
}

/// The Hurwitz zeta function ζ(s, q) = Σ_{k≥0} (q+k)^{−s}, with XLA's domain:
/// +∞ at s = 1 and at the poles q = 0, −1, −2, …; NaN for s < 1, infinite
/// arguments, and negative non-integer q with a non-integer s.
///
/// For q > 0 the first terms are summed directly and the rest by
/// Euler–Maclaurin: (q+N)^{1−s}/(s−1) + (q+N)^{−s}/2 +
/// Σⱼ B₂ⱼ/(2j)!·s(s+1)…(s+2j−2)·(q+N)^{−s−2j+1}. A negative q (integer s) is
/// brought into (0, 1) by K = ⌈−q⌉ steps whose terms (−(r+j))^{−s},
/// r = 1 − (q+K), sum to (−1)ˢ(ζ(s, r) − ζ(s, r+K)): constant time for any q.
pub fn zeta(s: f64, q: f64) -> f64 {
    if s.is_nan() || q.is_nan() || s.is_infinite() || q.is_infinite() || s < 1.0 {
        return f64::NAN;
    }
    if s == 1.0 {
        return f64::INFINITY;
    }
    if q <= 0.0 {
        if q == q.trunc() {
            return f64::INFINITY;
        }
        if s != s.trunc() {
            return f64::NAN;
        }
        let k = (-q).ceil();
        let shifted = q + k; // in (0, 1)
        let r = 1.0 - shifted;
        let sign = if s % 2.0 == 0.0 { 1.0 } else { -1.0 };
        return sign * (zeta_positive(s, r) - zeta_positive(s, r + k)) + zeta_positive(s, shifted);
    }
    zeta_positive(s, q)
}

/// ζ(s, q) for s > 1 and q > 0 by Euler–Maclaurin after 12 + s/4 direct terms.
fn zeta_positive(s: f64, q: f64) -> f64 {
    let n_direct = 12 + (s.min(60.0) / 4.0) as usize;
    let mut sum = 0.0;
    for k in 0..n_direct {
        sum += (q + k as f64).powf(-s);
    }
    let a = q + n_direct as f64;
    sum += a.powf(1.0 - s) / (s - 1.0) + 0.5 * a.powf(-s);
    // Term j: B₂ⱼ/(2j)! · s(s+1)…(s+2j−2) · a^{−s−2j+1}.
    let mut rising = s; // s(s+1)…(s+2j−2)
    let mut factorial = 2.0; // (2j)!
    let mut apow = a.powf(-s - 1.0);
    for (j, b) in BERNOULLI_EVEN.iter().enumerate() {
        let term = b / factorial * rising * apow;
        // A huge s overflows the rising factorial while a^{−s} underflows:
        // the tail is then far below the sum already.
        if !term.is_finite() {
            break;
        }
        sum += term;
        if term.abs() <= 1e-17 * sum.abs() {
            break;
        }
        let m = 2.0 * (j as f64 + 1.0); // 2j
        rising *= (s + m - 1.0) * (s + m);
        factorial *= (m + 1.0) * (m + 2.0);
        apow /= a * a;
    }
    sum
}

/// ψ⁽ⁿ⁾(x), the n-th derivative of digamma: ψ for n = 0, and
/// (−1)ⁿ⁺¹·n!·ζ(n+1, x) for integer n ≥ 1; NaN for a negative or
/// non-integer order. (n! overflows f64 past n = 170.)
pub fn polygamma(n: f64, x: f64) -> f64 {
    if n.is_nan() || x.is_nan() || n < 0.0 || n != n.trunc() || n.is_infinite() {
        return f64::NAN;
    }
    if n == 0.0 {
        return digamma(x);
    }
    let mut factorial = 1.0;
    let mut k = 2.0;
    while k <= n.min(171.0) {
        factorial *= k;
        k += 1.0;
    }
    let sign = if n % 2.0 == 0.0 { -1.0 } else { 1.0 };
    sign * factorial * zeta(n + 1.0, x)
}

/// e^{−|x|}·I_ν(x) for ν ∈ {0, 1} and x ≥ 0: the power series
/// Σ (x/2)^{2k+ν}/(k!(k+ν)!) (positive terms) up to 30, the asymptotic expansion
/// 1/√(2πx)·Σ (−1)ᵏ aₖ(ν)/xᵏ with aₖ = Π_{j≤k}(4ν² − (2j−1)²)/(k!·8ᵏ) above.
fn bessel_ie_nonneg(nu: u32, x: f64) -> f64 {
    if x == f64::INFINITY {
        return 0.0;
    }
    if x <= 30.0 {
        let h = x / 2.0;
        let h2 = h * h;
        let mut term = if nu == 0 { 1.0 } else { h };
        let mut sum = term;
        let mut k = 0.0;
        loop {
            k += 1.0;
            term *= h2 / (k * (k + nu as f64));
            sum += term;
            if term <= sum * 1e-17 {
                break;
            }
        }
        return sum * (-x).exp();
    }
    let mu = 4.0 * (nu * nu) as f64;
    let mut term = 1.0;
    let mut sum = 1.0;
    for k in 1..60 {
        let j = 2.0 * k as f64 - 1.0;
        let next = -term * (mu - j * j) / (k as f64 * 8.0 * x);
        if next.abs() >= term.abs() {
            break; // the asymptotic series started to diverge
        }
        term = next;
        sum += term;
        if term.abs() <= 1e-17 * sum.abs() {
            break;
        }
    }
    sum / (2.0 * PI * x).sqrt()
}

/// e^{−|x|}·I₁(x), odd in x (±0 and ±∞ map to ±0).
pub fn bessel_i1e(x: f64) -> f64 {
    if x.is_nan() {
        return x;
    }
    if x == 0.0 {
        return x;
    }
    bessel_ie_nonneg(1, x.abs()).copysign(x)
}

/// e^{−|x|}·I₀(x), even in x (the derivative of `bessel_i1e` needs it).
pub fn bessel_i0e(x: f64) -> f64 {
    if x.is_nan() {
        return x;
    }
    bessel_ie_nonneg(0, x.abs())
}

/// Round half away from zero (`round_nearest_afz`); ±0, ±∞ and NaN stay.
pub fn round_nearest_afz(x: f64) -> f64 {
    x.round()
}

/// Storage layout of a float element type: (exponent bits, mantissa bits).
pub fn float_layout(elem: ElemType) -> Option<(u32, u32)> {
    match elem {
        ElemType::F64 => Some((11, 52)),
        ElemType::F32 => Some((8, 23)),
        ElemType::BF16 => Some((8, 7)),
        ElemType::F16 => Some((5, 10)),
        _ => None,
    }
}

/// The bits of `x` in the float type `elem` (`x` is a value of that type; a
/// value that is not is rounded to it first). NaN becomes the type's quiet NaN
/// with `x`'s sign.
pub fn float_to_bits(x: f64, elem: ElemType) -> u64 {
    match elem {
        ElemType::F64 => x.to_bits(),
        ElemType::F32 => (x as f32).to_bits() as u64,
        ElemType::BF16 => half::bf16::from_f64(x).to_bits() as u64,
        ElemType::F16 => half::f16::from_f64(x).to_bits() as u64,
        _ => x.to_bits(),
    }
}

/// The value of the bit pattern `bits` of the float type `elem`, as f64 (exact).
pub fn float_from_bits(bits: u64, elem: ElemType) -> f64 {
    match elem {
        ElemType::F64 => f64::from_bits(bits),
        ElemType::F32 => f32::from_bits(bits as u32) as f64,
        ElemType::BF16 => half::bf16::from_bits(bits as u16).to_f64(),
        ElemType::F16 => half::f16::from_bits(bits as u16).to_f64(),
        _ => f64::from_bits(bits),
    }
}

/// `chlo.next_after(x, y)` in the float type `elem`: the neighbour of x toward
/// y; y when x = y (so next_after(−0, +0) = +0); NaN when either is NaN; from
/// ±0 the smallest subnormal with y's sign.
pub fn next_after(x: f64, y: f64, elem: ElemType) -> f64 {
    if x.is_nan() || y.is_nan() {
        return f64::NAN;
    }
    if x == y {
        return y;
    }
    let width = elem.bit_width();
    let sign_bit = 1u64 << (width - 1);
    if x == 0.0 {
        let tiny = float_from_bits(1, elem);
        return if y > 0.0 { tiny } else { -tiny };
    }
    let bits = float_to_bits(x, elem);
    // Moving away from zero increments the magnitude bits, toward zero decrements.
    let away = (y > x) == (bits & sign_bit == 0);
    let next = if away { bits + 1 } else { bits - 1 };
    float_from_bits(next, elem)
}

/// `reduce_precision(x, exponent_bits, mantissa_bits)` for x of float type
/// `elem`, on `elem`'s bit pattern as the spec describes: the mantissa is
/// rounded to nearest even at `mantissa_bits` (a carry may bump the exponent);
/// then, if the exponent range is narrower than `elem`'s, values above the
/// reduced range become ±∞ and values at or below its smallest normal
/// exponent become ±0 (no subnormals). NaN stays NaN.
pub fn reduce_precision(x: f64, elem: ElemType, exponent_bits: u32, mantissa_bits: u32) -> f64 {
    let Some((ebits, mbits)) = float_layout(elem) else {
        return x;
    };
    if x.is_nan() {
        return x;
    }
    let width = 1 + ebits + mbits;
    let sign_mask = 1u64 << (width - 1);
    let exp_mask = ((1u64 << ebits) - 1) << mbits;
    let mut bits = float_to_bits(x, elem);
    if mantissa_bits < mbits {
        let shift = mbits - mantissa_bits;
        let last_kept = (bits >> shift) & 1;
        let half_minus_one = (1u64 << (shift - 1)) - 1;
        bits = (bits + last_kept + half_minus_one) & !((1u64 << shift) - 1);
    }
    if exponent_bits < ebits {
        let sign = bits & sign_mask;
        let biased = (bits & exp_mask) >> mbits;
        let bias = (1u64 << (ebits - 1)) - 1;
        let reduced_bias = (1u64 << (exponent_bits - 1)) - 1;
        let max_exp = bias + reduced_bias;
        let min_exp = bias - reduced_bias;
        if biased > max_exp {
            bits = sign | exp_mask; // ±∞
        } else if biased <= min_exp {
            bits = sign; // ±0
        }
    }
    float_from_bits(bits, elem)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn layouts_cover_float_types() {
        for e in ElemType::ALL {
            assert_eq!(float_layout(e).is_some(), e.is_float(), "{e}");
        }
    }
}
