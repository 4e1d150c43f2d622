//! The accuracy hypotheses of the transcendental functions: IEEE 754 fixes
//! the basic operations (add, subtract, multiply, divide, square root:
//! correctly rounded) but not exp, log, rsqrt, tanh or logistic,
//! so the analysis assumes that an f32 implementation's result is within
//! the stated number of ulps of the real function at its (computed) argument.
//! Each constant is the measured worst case over a dense sample of f32
//! arguments, for den's f32 functions (the generic evaluator's), for the
//! compiled executor's f32 polynomials (`exec::vmath`: exp, tanh and
//! logistic in its fused loops; its rsqrt and log are den's) and for Rust's
//! std f32 functions (libm), times a margin of at least 2; the tests below
//! are the measurement and fail if any implementation ever exceeds half the
//! constant.
//!
//! Measured (`cargo test -p cert measured_ulps -- --nocapture` prints
//! them; every 257th f32 bit pattern of the range): den's functions 0.500
//! ulp (the f64 result rounded once); the executor's exp 0.823, tanh 1.468,
//! logistic 2.310 ulp; std's f32 exp 0.502, ln 0.796, 1/√x 1.476, tanh
//! 2.093 and the f32 logistic formula 1/(1 + e⁻ˣ) 2.232 ulp.
//! XLA's and IREE's own polynomial approximations are not measured here:
//! the constants are the hypothesis for them.

/// |fexp(x) − eˣ| ≤ EXP_ULPS · ulp(eˣ).
pub const EXP_ULPS: f64 = 4.0;
/// |flog(x) − ln x| ≤ LOG_ULPS · ulp(ln x).
pub const LOG_ULPS: f64 = 4.0;
/// |frsqrt(x) − 1/√x| ≤ RSQRT_ULPS · ulp(1/√x).
pub const RSQRT_ULPS: f64 = 4.0;
/// |ftanh(x) − tanh x| ≤ TANH_ULPS · ulp(tanh x).
pub const TANH_ULPS: f64 = 8.0;
/// |flogistic(x) − σ(x)| ≤ LOGISTIC_ULPS · ulp(σ(x)).
pub const LOGISTIC_ULPS: f64 = 8.0;

#[cfg(test)]
mod tests {
    use super::*;
    use den::Scalar;

    /// The spacing of f32 values at |y| (normal range; subnormals use the
    /// smallest spacing).
    fn ulp32(y: f64) -> f64 {
        let a = y.abs().max(f32::MIN_POSITIVE as f64);
        let e = a.log2().floor();
        2f64.powf(e - 23.0)
    }

    /// Max ulp error of `f` against the f64 reference `exact` over every
    /// `stride`-th f32 bit pattern in [lo, hi].
    fn max_ulps(
        lo: f32,
        hi: f32,
        stride: u32,
        f: impl Fn(f32) -> f32,
        exact: impl Fn(f64) -> f64,
    ) -> f64 {
        let mut worst = 0.0f64;
        let mut visit = |x: f32| {
            let y = exact(x as f64);
            if y.is_finite() && (y as f32).is_finite() {
                let got = f(x) as f64;
                worst = worst.max((got - y).abs() / ulp32(y));
            }
        };
        // Walk the bit patterns of each sign separately (monotone in |x|).
        for (a, b, neg) in [(lo.max(0.0), hi, false), ((-hi).max(0.0), -lo, true)] {
            if a > b {
                continue;
            }
            let (mut i, end) = (a.to_bits(), b.to_bits());
            while i <= end {
                let x = f32::from_bits(i);
                visit(if neg { -x } else { x });
                i = match i.checked_add(stride) {
                    Some(n) => n,
                    None => break,
                };
            }
        }
        worst
    }

    fn logistic64(x: f64) -> f64 {
        1.0 / (1.0 + (-x).exp())
    }

    #[test]
    fn measured_ulps_stay_within_half_of_each_hypothesis() {
        let stride = 257;
        let cases: Vec<(&str, f64, f64, f64)> = vec![
            (
                "exp",
                EXP_ULPS,
                max_ulps(
                    -87.0,
                    88.0,
                    stride,
                    |x| <f32 as Scalar>::exp(&x).unwrap(),
                    f64::exp,
                ),
                max_ulps(-87.0, 88.0, stride, f32::exp, f64::exp),
            ),
            (
                "log",
                LOG_ULPS,
                max_ulps(
                    1e-30,
                    1e30,
                    stride,
                    |x| <f32 as Scalar>::log(&x).unwrap(),
                    f64::ln,
                ),
                max_ulps(1e-30, 1e30, stride, f32::ln, f64::ln),
            ),
            (
                "rsqrt",
                RSQRT_ULPS,
                max_ulps(
                    1e-30,
                    1e30,
                    stride,
                    |x| <f32 as Scalar>::rsqrt(&x).unwrap(),
                    |x| 1.0 / x.sqrt(),
                ),
                max_ulps(1e-30, 1e30, stride, |x| 1.0 / x.sqrt(), |x| 1.0 / x.sqrt()),
            ),
            (
                "tanh",
                TANH_ULPS,
                max_ulps(
                    -20.0,
                    20.0,
                    stride,
                    |x| <f32 as Scalar>::tanh(&x).unwrap(),
                    f64::tanh,
                ),
                max_ulps(-20.0, 20.0, stride, f32::tanh, f64::tanh),
            ),
            (
                "logistic",
                LOGISTIC_ULPS,
                max_ulps(
                    -80.0,
                    80.0,
                    stride,
                    |x| <f32 as Scalar>::logistic(&x).unwrap(),
                    logistic64,
                ),
                max_ulps(
                    -80.0,
                    80.0,
                    stride,
                    |x| 1.0 / (1.0 + (-x).exp()),
                    logistic64,
                ),
            ),
        ];
        for (name, hyp, den_ulps, std_ulps) in cases {
            println!(
                "{name}: den {den_ulps:.3} ulp, std f32 {std_ulps:.3} ulp, hypothesis {hyp} ulp"
            );
            assert!(
                den_ulps <= hyp / 2.0,
                "{name}: den's f32 is {den_ulps} ulp off"
            );
            assert!(
                std_ulps <= hyp / 2.0,
                "{name}: std's f32 is {std_ulps} ulp off"
            );
            // The measurement is not vacuous: both really are inexact.
            assert!(den_ulps > 0.0 && std_ulps > 0.0, "{name}: no rounding seen");
        }
    }

    #[test]
    fn measured_ulps_of_the_executor_stay_within_half_of_each_hypothesis() {
        let stride = 257;
        let cases = [
            (
                "exp",
                EXP_ULPS,
                max_ulps(-87.0, 88.0, stride, exec::vmath::exp, f64::exp),
            ),
            (
                "tanh",
                TANH_ULPS,
                max_ulps(-20.0, 20.0, stride, exec::vmath::tanh, f64::tanh),
            ),
            (
                "logistic",
                LOGISTIC_ULPS,
                max_ulps(-80.0, 80.0, stride, exec::vmath::logistic, logistic64),
            ),
        ];
        for (name, hyp, ulps) in cases {
            println!("{name}: executor {ulps:.3} ulp, hypothesis {hyp} ulp");
            assert!(
                ulps <= hyp / 2.0,
                "{name}: the executor's f32 is {ulps} ulp off"
            );
            assert!(ulps > 0.0, "{name}: no rounding seen");
        }
    }
}
