//! The elementwise and CHLO ops of the extended op set on the generic evaluator, each
//! against values derived by hand from the spec or from mathematics (known
//! constants, identities, recurrences), with their edge values (NaN, ±0, ±∞,
//! poles, shifts past the bit width); every differentiable op's dual tangent
//! against a central finite difference in f64; the exact scalar's rational
//! cases.
//!
//! Modules are written as the text JAX prints, so the parser is exercised too.

use den::{eval_func, Dual, EvalOptions, Exact, Scalar, Tensor, Value};
use ir::parse::parse_module;
use ir::ElemType;
use std::f64::consts::{E, FRAC_PI_2, FRAC_PI_4, PI};

const EULER_GAMMA: f64 = 0.577_215_664_901_532_9;
/// ζ(3), Apéry's constant.
const APERY: f64 = 1.202_056_903_159_594_3;

fn opts() -> EvalOptions {
    EvalOptions {
        fast: false,
        ..EvalOptions::default()
    }
}

/// `main(%arg0 : T, …)` with `body` (which returns `%r`, or several results).
fn module(params: &[&str], body: &str, results: &str) -> ir::Module {
    let ps: Vec<String> = params
        .iter()
        .enumerate()
        .map(|(i, t)| format!("%arg{i}: {t}"))
        .collect();
    let src = format!(
        "module {{\n  func.func @main({}) -> ({results}) {{\n{body}\n  }}\n}}\n",
        ps.join(", ")
    );
    parse_module(&src, "elementwise_chlo.mlir").unwrap_or_else(|e| panic!("{e}\n{src}"))
}

fn run<S: Scalar>(m: &ir::Module, inputs: Vec<Value<S>>) -> Vec<Value<S>> {
    eval_func(m, "main", inputs, &opts())
        .unwrap_or_else(|e| panic!("{e}"))
        .outputs
}

fn fv(data: &[f64], elem: ElemType) -> Value<f64> {
    Value::Float(Tensor::new(vec![data.len()], data.to_vec()), elem)
}

fn iv(data: &[i64], elem: ElemType) -> Value<f64> {
    Value::Int(Tensor::new(vec![data.len()], data.to_vec()), elem)
}

fn floats<S: Scalar>(v: &Value<S>) -> Vec<f64> {
    v.as_float()
        .expect("a float result")
        .data
        .iter()
        .map(|x| x.to_f64())
        .collect()
}

fn ints<S: Scalar>(v: &Value<S>) -> Vec<i64> {
    v.as_int().expect("an integer result").data.clone()
}

/// `%r = <op> %arg0 : <sig>` on a 1-D f64 vector; returns the floats.
fn unary_f64(op_line: &str, xs: &[f64]) -> Vec<f64> {
    let t = format!("tensor<{}xf64>", xs.len());
    let body = format!("    %r = {}\n    return %r : {t}", op_line.replace("T", &t));
    let m = module(&[&t], &body, &t);
    floats(&run(&m, vec![fv(xs, ElemType::F64)])[0])
}

/// Same-bits equality (NaN equals NaN, −0 differs from +0), else within `tol`
/// relative to max(1, |expected|).
fn assert_close(got: &[f64], want: &[f64], tol: f64, what: &str) {
    assert_eq!(got.len(), want.len(), "{what}: length");
    for (i, (g, w)) in got.iter().zip(want).enumerate() {
        let ok = if w.is_nan() {
            g.is_nan()
        } else if w.is_infinite() || *w == 0.0 {
            g.to_bits() == w.to_bits()
        } else {
            (g - w).abs() <= tol * w.abs().max(1.0)
        };
        assert!(ok, "{what}[{i}]: got {g:e}, want {w:e}");
    }
}

#[test]
fn is_finite_and_the_chlo_inf_predicates() {
    let xs = [
        f64::NAN,
        f64::INFINITY,
        f64::NEG_INFINITY,
        0.0,
        -0.0,
        1e308,
        5e-324,
    ];
    let t = "tensor<7xf64>";
    let b = "tensor<7xi1>";
    let body = format!(
        "    %0 = stablehlo.is_finite %arg0 : ({t}) -> {b}\n\
         \x20   %1 = chlo.is_inf %arg0 : {t} -> {b}\n\
         \x20   %2 = chlo.is_pos_inf %arg0 : {t} -> {b}\n\
         \x20   %3 = chlo.is_neg_inf %arg0 : {t} -> {b}\n\
         \x20   return %0, %1, %2, %3 : {b}, {b}, {b}, {b}"
    );
    let m = module(&[t], &body, &format!("{b}, {b}, {b}, {b}"));
    let out = run(&m, vec![fv(&xs, ElemType::F64)]);
    assert_eq!(ints(&out[0]), [0, 0, 0, 1, 1, 1, 1], "is_finite");
    assert_eq!(ints(&out[1]), [0, 1, 1, 0, 0, 0, 0], "is_inf");
    assert_eq!(ints(&out[2]), [0, 1, 0, 0, 0, 0, 0], "is_pos_inf");
    assert_eq!(ints(&out[3]), [0, 0, 1, 0, 0, 0, 0], "is_neg_inf");
    assert_eq!(out[0].elem(), ElemType::I1);
}

#[test]
fn round_nearest_afz_rounds_ties_away_from_zero() {
    let got = unary_f64(
        "stablehlo.round_nearest_afz %arg0 : T",
        &[
            0.5,
            -0.5,
            1.5,
            2.5,
            -2.5,
            -0.0,
            f64::NAN,
            2.499_999,
            -0.2,
            f64::INFINITY,
        ],
    );
    let want = [
        1.0,
        -1.0,
        2.0,
        3.0,
        -3.0,
        -0.0,
        f64::NAN,
        2.0,
        -0.0,
        f64::INFINITY,
    ];
    assert_close(&got, &want, 0.0, "round_nearest_afz");
}

#[test]
fn trigonometric_and_hyperbolic_values() {
    let tol = 4e-16;
    let tan = unary_f64(
        "stablehlo.tan %arg0 : T",
        &[FRAC_PI_4, 0.0, -0.0, -FRAC_PI_4],
    );
    assert_close(&tan, &[1.0, 0.0, -0.0, -1.0], tol, "tan");
    let ctan = unary_f64("chlo.tan %arg0 : T -> T", &[FRAC_PI_4]);
    assert_close(&ctan, &[1.0], tol, "chlo.tan");
    let sinh = unary_f64("chlo.sinh %arg0 : T -> T", &[1.0, 0.0, -1.0]);
    assert_close(
        &sinh,
        &[(E - 1.0 / E) / 2.0, 0.0, -(E - 1.0 / E) / 2.0],
        tol,
        "sinh",
    );
    let cosh = unary_f64("chlo.cosh %arg0 : T -> T", &[1.0, 0.0, -1.0]);
    assert_close(
        &cosh,
        &[(E + 1.0 / E) / 2.0, 1.0, (E + 1.0 / E) / 2.0],
        tol,
        "cosh",
    );
    let asin = unary_f64("chlo.asin %arg0 : T -> T", &[1.0, 0.5, -1.0, 1.5]);
    assert_close(
        &asin,
        &[FRAC_PI_2, PI / 6.0, -FRAC_PI_2, f64::NAN],
        tol,
        "asin",
    );
    let acos = unary_f64("chlo.acos %arg0 : T -> T", &[0.5, -1.0, 1.0, 2.0]);
    assert_close(&acos, &[PI / 3.0, PI, 0.0, f64::NAN], tol, "acos");
    let atan = unary_f64(
        "chlo.atan %arg0 : T -> T",
        &[1.0, f64::INFINITY, f64::NEG_INFINITY, -0.0],
    );
    assert_close(
        &atan,
        &[FRAC_PI_4, FRAC_PI_2, -FRAC_PI_2, -0.0],
        tol,
        "atan",
    );
    let asinh = unary_f64("chlo.asinh %arg0 : T -> T", &[1.0, -1.0]);
    let a1 = (1.0 + 2f64.sqrt()).ln();
    assert_close(&asinh, &[a1, -a1], tol, "asinh");
    let acosh = unary_f64("chlo.acosh %arg0 : T -> T", &[2.0, 1.0, 0.5]);
    assert_close(
        &acosh,
        &[(2.0 + 3f64.sqrt()).ln(), 0.0, f64::NAN],
        tol,
        "acosh",
    );
    let atanh = unary_f64("chlo.atanh %arg0 : T -> T", &[0.5, 1.0, -1.0, 2.0]);
    assert_close(
        &atanh,
        &[0.5 * 3f64.ln(), f64::INFINITY, f64::NEG_INFINITY, f64::NAN],
        tol,
        "atanh",
    );
}

#[test]
fn erf_inv_inverts_erf() {
    // Where erf itself is accurate (|erf_inv(x)| < 2), the round trip is within
    // 3 ulps of 1: erf_inv is backward stable there.
    let xs = [-0.95, -0.3, 1e-10, 0.1, 0.5, 0.8, 0.99];
    let ys = unary_f64("chlo.erf_inv %arg0 : T -> T", &xs);
    for (x, y) in xs.iter().zip(&ys) {
        let back = den::scalar::erf_f64(*y);
        assert!(
            (back - x).abs() <= 3.0 * f64::EPSILON,
            "erf(erf_inv({x})) = {back}"
        );
    }
    // erf_inv(x) ≈ √π/2·x for tiny x; erf_inv(½) is a known constant (to
    // 4 ulps: the Newton–Halley root is that of the f64 erf).
    assert!((ys[2] - PI.sqrt() / 2.0 * 1e-10).abs() < 1e-25);
    assert!((ys[4] - 0.476_936_276_204_469_9).abs() <= 4.0 * f64::EPSILON * 0.5);
    // Near ±1, where erf's own rounding would hide the error: reference
    // values computed with mpmath at 40 digits.
    let near_one = [0.999_999, 0.999_999_9, -0.999_999_9, 1.0 - 1e-12];
    let ys = unary_f64("chlo.erf_inv %arg0 : T -> T", &near_one);
    let want = [
        3.458_910_737_275_499,
        3.766_562_581_638_470_7,
        -3.766_562_581_638_470_7,
        5.042_031_898_572_696,
    ];
    assert_close(&ys, &want, 2e-16, "erf_inv near 1");
    let edges = unary_f64(
        "chlo.erf_inv %arg0 : T -> T",
        &[1.0, -1.0, 1.5, f64::NAN, 0.0, -0.0],
    );
    let want = [
        f64::INFINITY,
        f64::NEG_INFINITY,
        f64::NAN,
        f64::NAN,
        0.0,
        -0.0,
    ];
    assert_close(&edges, &want, 0.0, "erf_inv edges");
}

#[test]
fn lgamma_at_integers_is_log_factorial() {
    let ns: Vec<f64> = (1..=25).map(|n| n as f64).chain([100.0]).collect();
    let got = unary_f64("chlo.lgamma %arg0 : T -> T", &ns);
    for (n, g) in ns.iter().zip(&got) {
        // log((n−1)!) as a sum of logs.
        let want: f64 = (1..*n as u64).map(|k| (k as f64).ln()).sum();
        assert!(
            (g - want).abs() <= 1e-14 * want.abs().max(1.0),
            "lgamma({n}) = {g}, want {want}"
        );
    }
    assert_eq!(got[0].to_bits(), 0f64.to_bits(), "lgamma(1) = +0");
    assert_eq!(got[1].to_bits(), 0f64.to_bits(), "lgamma(2) = +0");
    // Γ(½) = √π, Γ(−½) = −2√π, Γ(x) ≈ 1/x near 0; poles and ±∞ give +∞.
    let special = unary_f64(
        "chlo.lgamma %arg0 : T -> T",
        &[
            0.5,
            -0.5,
            1e-300,
            0.0,
            -0.0,
            -3.0,
            f64::NEG_INFINITY,
            f64::INFINITY,
            f64::NAN,
        ],
    );
    let inf = f64::INFINITY;
    let want = [
        0.5 * PI.ln(),
        (2.0 * PI.sqrt()).ln(),
        300.0 * 10f64.ln(),
        inf,
        inf,
        inf,
        inf,
        inf,
        f64::NAN,
    ];
    assert_close(&special, &want, 1e-15, "lgamma special values");
}

#[test]
fn digamma_values_follow_the_harmonic_recurrence() {
    let xs: Vec<f64> = (1..=12).map(|n| n as f64).collect();
    let got = unary_f64("chlo.digamma %arg0 : T -> T", &xs);
    let mut harmonic = 0.0;
    for (i, g) in got.iter().enumerate() {
        // ψ(n+1) = −γ + H_n.
        let want = -EULER_GAMMA + harmonic;
        assert!(
            (g - want).abs() <= 1e-15,
            "digamma({}) = {g}, want {want}",
            i + 1
        );
        harmonic += 1.0 / (i + 1) as f64;
    }
    let special = unary_f64(
        "chlo.digamma %arg0 : T -> T",
        &[
            0.5,
            -0.5,
            0.0,
            -1.0,
            f64::INFINITY,
            f64::NEG_INFINITY,
            f64::NAN,
        ],
    );
    let half = -EULER_GAMMA - 2.0 * 2f64.ln();
    // ψ(−½) = ψ(3⁄2) − π·cot(−π/2) = ψ(½) + 2.
    let want = [
        half,
        half + 2.0,
        f64::NAN,
        f64::NAN,
        f64::INFINITY,
        f64::NAN,
        f64::NAN,
    ];
    assert_close(&special, &want, 1e-15, "digamma special values");
}

/// `%r = chlo.<op> %arg0, %arg1 : T, T -> T` on f64 vectors.
fn binary_f64(op: &str, a: &[f64], b: &[f64]) -> Vec<f64> {
    let t = format!("tensor<{}xf64>", a.len());
    let line = if op.starts_with("chlo.") {
        format!("    %r = {op} %arg0, %arg1 : {t}, {t} -> {t}")
    } else {
        format!("    %r = {op} %arg0, %arg1 : {t}")
    };
    let m = module(&[&t, &t], &format!("{line}\n    return %r : {t}"), &t);
    floats(&run(&m, vec![fv(a, ElemType::F64), fv(b, ElemType::F64)])[0])
}

#[test]
fn zeta_and_polygamma_known_values() {
    let inf = f64::INFINITY;
    let nan = f64::NAN;
    let got = binary_f64(
        "chlo.zeta",
        &[2.0, 4.0, 2.0, 3.0, 3.0, 1.0, 0.5, 2.0, 2.0, inf],
        &[1.0, 1.0, 2.0, 0.5, -1.5, 1.0, 1.0, 0.0, -1.0, 2.0],
    );
    let want = [
        PI * PI / 6.0,
        PI.powi(4) / 90.0,
        PI * PI / 6.0 - 1.0,
        // Σ (k+½)⁻³ = (2³ − 1)·ζ(3).
        7.0 * APERY,
        // Two terms with negative bases, then the (k+½) sum.
        -8.0 / 27.0 - 8.0 + 7.0 * APERY,
        inf,
        nan,
        inf,
        inf,
        nan,
    ];
    assert_close(&got, &want, 1e-15, "zeta");

    let got = binary_f64(
        "chlo.polygamma",
        &[0.0, 1.0, 2.0, 3.0, 1.5, -1.0, 1.0],
        &[1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 0.0],
    );
    let want = [
        -EULER_GAMMA,
        PI * PI / 6.0,
        -2.0 * APERY,
        PI.powi(4) / 15.0,
        nan,
        nan,
        inf,
    ];
    assert_close(&got, &want, 1e-15, "polygamma");
}

/// Arguments far out finish in constant time (random modules feed f32
/// extremes): a negative q a million steps from (0, 1), an order of 10³⁸.
#[test]
fn zeta_and_polygamma_far_out() {
    let q = -1e6 - 0.5;
    // Σ over q, q+1, … pairs each negative term with a positive one:
    // ζ(2, q) = 2ζ(2, ½) − ζ(2, 10⁶ + 1.5) = π² − ζ(2, 10⁶ + 1.5), and
    // ζ(2, a) = 1/(a − ½) + O(a⁻³).
    let got = binary_f64("chlo.zeta", &[2.0], &[q]);
    let want = PI * PI - 1.0 / (1e6 + 1.0);
    assert!(
        (got[0] - want).abs() < 1e-12,
        "zeta(2, {q}) = {}, want {want}",
        got[0]
    );
    let huge = binary_f64("chlo.polygamma", &[1e38, 3.0], &[2.0, 1e30]);
    assert_eq!(huge.len(), 2);
}

#[test]
fn bessel_i1e_series_asymptotics_and_symmetry() {
    // I₁(1) = Σ (½)^{2k+1}/(k!(k+1)!) = 0.5651591039924851.
    let i1_at_1 = 0.565_159_103_992_485_1;
    let xs = [
        1.0,
        -1.0,
        0.0,
        -0.0,
        1e-300,
        f64::INFINITY,
        f64::NEG_INFINITY,
        f64::NAN,
    ];
    let got = unary_f64("chlo.bessel_i1e %arg0 : T -> T", &xs);
    let want = [
        i1_at_1 / E,
        -i1_at_1 / E,
        0.0,
        -0.0,
        5e-301,
        0.0,
        -0.0,
        f64::NAN,
    ];
    assert_close(&got, &want, 1e-15, "bessel_i1e");
    // Large x: e^{−x}I₁(x) ≈ (1 − 3/(8x) − 15/(128x²))/√(2πx), next term ~1e-6 relative at 50.
    let x = 50.0;
    let asym = (1.0 - 3.0 / (8.0 * x) - 15.0 / (128.0 * x * x)) / (2.0 * PI * x).sqrt();
    let big = unary_f64("chlo.bessel_i1e %arg0 : T -> T", &[x, 29.999, 30.001]);
    assert!(
        (big[0] - asym).abs() < 1e-7,
        "i1e(50) = {}, asymptotic {asym}",
        big[0]
    );
    // Series below 30, asymptotic above: continuous across the switch.
    assert!(
        (big[1] - big[2]).abs() < 1e-5,
        "jump at 30: {} vs {}",
        big[1],
        big[2]
    );
}

#[test]
fn atan2_quadrants_and_signed_zeros() {
    let inf = f64::INFINITY;
    let got = binary_f64(
        "stablehlo.atan2",
        &[0.0, -0.0, 0.0, -0.0, 1.0, inf, 1.0, -1.0, f64::NAN],
        &[0.0, 0.0, -0.0, -0.0, 0.0, inf, -1.0, -1.0, 1.0],
    );
    let want = [
        0.0,
        -0.0,
        PI,
        -PI,
        FRAC_PI_2,
        FRAC_PI_4,
        3.0 * FRAC_PI_4,
        -3.0 * FRAC_PI_4,
        f64::NAN,
    ];
    assert_close(&got, &want, 4e-16, "atan2");
}

/// `chlo.next_after` on vectors of `elem`.
fn next_after(elem: &str, e: ElemType, a: &[f64], b: &[f64]) -> Vec<f64> {
    let t = format!("tensor<{}x{elem}>", a.len());
    let body =
        format!("    %r = chlo.next_after %arg0, %arg1 : {t}, {t} -> {t}\n    return %r : {t}");
    let m = module(&[&t, &t], &body, &t);
    floats(&run(&m, vec![fv(a, e), fv(b, e)])[0])
}

#[test]
fn next_after_steps_one_value_of_the_element_type() {
    let inf = f64::INFINITY;
    let f32_max = f32::MAX as f64;
    let got = next_after(
        "f32",
        ElemType::F32,
        &[0.0, 0.0, 1.0, 1.0, f64::NAN, 1.0, -0.0, inf, f32_max, -1.0],
        &[1.0, -1.0, 2.0, 0.0, 1.0, 1.0, 0.0, 0.0, inf, -2.0],
    );
    let want = [
        2f64.powi(-149),
        -(2f64.powi(-149)),
        1.0 + 2f64.powi(-23),
        1.0 - 2f64.powi(-24),
        f64::NAN,
        1.0,
        0.0,
        f32_max,
        inf,
        -1.0 - 2f64.powi(-23),
    ];
    assert_close(&got, &want, 0.0, "next_after f32");
    let got = next_after("f64", ElemType::F64, &[1.0, 0.0], &[2.0, -1.0]);
    assert_close(&got, &[1.0 + f64::EPSILON, -5e-324], 0.0, "next_after f64");
    let got = next_after("bf16", ElemType::BF16, &[1.0], &[2.0]);
    assert_close(&got, &[1.0 + 2f64.powi(-7)], 0.0, "next_after bf16");
}

fn reduce_precision_f32(format: &str, xs: &[f64]) -> Vec<f64> {
    let t = format!("tensor<{}xf32>", xs.len());
    let body = format!(
        "    %r = stablehlo.reduce_precision %arg0, format = {format} : {t}\n    return %r : {t}"
    );
    let m = module(&[&t], &body, &t);
    floats(&run(&m, vec![fv(xs, ElemType::F32)])[0])
}

#[test]
fn reduce_precision_to_e8m7_is_bf16_rounding() {
    let xs: Vec<f64> = [
        1.0 + 2f32.powi(-8),       // tie: stays at the even 1.0
        1.0 + 3.0 * 2f32.powi(-8), // tie: up to the even 1 + 2⁻⁶
        1.0 + 2f32.powi(-8) + 2f32.powi(-20),
        -3.265_625_7, // off the bf16 grid
        1e-40,        // an f32 subnormal: rounded in its bits, as bf16 does
        3.4e38,
        f32::MAX,
        f32::INFINITY,
        -0.0,
        65504.0,
    ]
    .iter()
    .map(|&x| x as f64)
    .collect();
    let got = reduce_precision_f32("e8m7", &xs);
    let want: Vec<f64> = xs
        .iter()
        .map(|&x| half::bf16::from_f32(x as f32).to_f32() as f64)
        .collect();
    assert_close(&got, &want, 0.0, "e8m7 vs bf16");
    assert_eq!(got[0], 1.0);
    assert_eq!(got[1], 1.0 + 2f64.powi(-6));
    assert!(
        got[5].is_infinite() && got[6].is_infinite(),
        "overflow to inf"
    );
    let nan = reduce_precision_f32("e8m7", &[f64::NAN]);
    assert!(nan[0].is_nan(), "NaN stays NaN");
}

#[test]
fn reduce_precision_to_e5m10_flushes_below_the_normal_range() {
    // Normal f16 values round as f16 does; 65520 rounds up past f16's max to ∞.
    let xs = [1.0 / 3.0, 1000.1, 65504.0, 65520.0, -2.0f64.powi(-14)];
    let got = reduce_precision_f32("e5m10", &xs);
    let want: Vec<f64> = xs
        .iter()
        .map(|&x| half::f16::from_f32(x as f32).to_f32() as f64)
        .collect();
    assert_close(&got, &want, 0.0, "e5m10 vs f16");
    assert!(got[3].is_infinite());
    // Below f16's smallest normal 2⁻¹⁴ the spec's reduction has no
    // subnormals: ±0 (f16 itself would keep a subnormal).
    let tiny = reduce_precision_f32("e5m10", &[1e-5, -1e-5, 1e-40]);
    assert_close(&tiny, &[0.0, -0.0, 0.0], 0.0, "e5m10 flush");
    // No mantissa bits: 1.5 and 3 are ties between powers of two, to the even exponent.
    let m0 = reduce_precision_f32("e5m0", &[1.5, 3.0, 1.25, 70000.0]);
    assert_close(&m0, &[2.0, 2.0, 1.0, f64::INFINITY], 0.0, "e5m0");
}

#[test]
fn bitcast_convert_reinterprets_bits() {
    // f32 1.0 = 0x3f800000, −2.0 = 0xc0000000.
    let m = module(
        &["tensor<2xf32>"],
        "    %0 = stablehlo.bitcast_convert %arg0 : (tensor<2xf32>) -> tensor<2xi32>\n\
         \x20   %1 = stablehlo.bitcast_convert %arg0 : (tensor<2xf32>) -> tensor<2x4xui8>\n\
         \x20   %2 = stablehlo.bitcast_convert %1 : (tensor<2x4xui8>) -> tensor<2xf32>\n\
         \x20   %3 = stablehlo.bitcast_convert %0 : (tensor<2xi32>) -> tensor<2xui32>\n\
         \x20   return %0, %1, %2, %3 : tensor<2xi32>, tensor<2x4xui8>, tensor<2xf32>, tensor<2xui32>",
        "tensor<2xi32>, tensor<2x4xui8>, tensor<2xf32>, tensor<2xui32>",
    );
    let out = run(&m, vec![fv(&[1.0, -2.0], ElemType::F32)]);
    assert_eq!(ints(&out[0]), [0x3f80_0000, 0xc000_0000u32 as i32 as i64]);
    // Little-endian bytes, the low byte first.
    assert_eq!(ints(&out[1]), [0, 0, 0x80, 0x3f, 0, 0, 0, 0xc0]);
    assert_eq!(out[1].shape(), [2, 4]);
    assert_eq!(floats(&out[2]), [1.0, -2.0]);
    assert_eq!(ints(&out[3]), [0x3f80_0000, 0xc000_0000]);

    // Two i32 halves make one f64: 1.0 = 0x3ff00000_00000000; i64 ↔ f64 ±∞/NaN.
    let m = module(
        &["tensor<1x2xi32>", "tensor<2xi64>", "tensor<1xf64>"],
        "    %0 = stablehlo.bitcast_convert %arg0 : (tensor<1x2xi32>) -> tensor<1xf64>\n\
         \x20   %1 = stablehlo.bitcast_convert %arg1 : (tensor<2xi64>) -> tensor<2xf64>\n\
         \x20   %2 = stablehlo.bitcast_convert %arg2 : (tensor<1xf64>) -> tensor<1xi64>\n\
         \x20   return %0, %1, %2 : tensor<1xf64>, tensor<2xf64>, tensor<1xi64>",
        "tensor<1xf64>, tensor<2xf64>, tensor<1xi64>",
    );
    let halves = Value::Int(Tensor::new(vec![1, 2], vec![0, 0x3ff0_0000]), ElemType::I32);
    let out = run(
        &m,
        vec![
            halves,
            iv(
                &[0x7ff0_0000_0000_0000, 0xfff0_0000_0000_0000u64 as i64],
                ElemType::I64,
            ),
            fv(&[-0.0], ElemType::F64),
        ],
    );
    assert_eq!(floats(&out[0]), [1.0]);
    assert_eq!(floats(&out[1]), [f64::INFINITY, f64::NEG_INFINITY]);
    assert_eq!(ints(&out[2]), [i64::MIN], "−0.0 is the sign bit alone");
}

/// `%r = stablehlo.<op> %arg0, %arg1 : tensor<NxE>` on integers.
fn int_binary(op: &str, elem: &str, e: ElemType, a: &[i64], b: &[i64]) -> Vec<i64> {
    let t = format!("tensor<{}x{elem}>", a.len());
    let body = format!("    %r = stablehlo.{op} %arg0, %arg1 : {t}\n    return %r : {t}");
    let m = module(&[&t, &t], &body, &t);
    ints(&run(&m, vec![iv(a, e), iv(b, e)])[0])
}

fn int_unary(op: &str, elem: &str, e: ElemType, a: &[i64]) -> Vec<i64> {
    let t = format!("tensor<{}x{elem}>", a.len());
    let body = format!("    %r = stablehlo.{op} %arg0 : {t}\n    return %r : {t}");
    let m = module(&[&t], &body, &t);
    ints(&run(&m, vec![iv(a, e)])[0])
}

#[test]
fn shifts_by_the_bit_width_or_more() {
    let i32e = ElemType::I32;
    // Amounts are unsigned: −1 is ≥ 32.
    assert_eq!(
        int_binary(
            "shift_left",
            "i32",
            i32e,
            &[1, 1, -1, 1, 5, 3],
            &[31, 32, 1, -1, 0, 30]
        ),
        [i32::MIN as i64, 0, -2, 0, 5, -(1 << 30)]
    );
    assert_eq!(
        int_binary(
            "shift_right_arithmetic",
            "i32",
            i32e,
            &[-8, -8, 8, -1, i32::MIN as i64],
            &[1, 40, 40, -3, 31]
        ),
        [-4, -1, 0, -1, -1]
    );
    assert_eq!(
        int_binary(
            "shift_right_logical",
            "i32",
            i32e,
            &[-8, -8, 8, i32::MIN as i64],
            &[1, 32, -1, 31]
        ),
        [0x7fff_fffc, 0, 0, 1]
    );
    // ui8: wrap at 8 bits; the arithmetic shift fills with the top bit.
    let u8e = ElemType::UI8;
    assert_eq!(
        int_binary("shift_left", "ui8", u8e, &[255, 1], &[1, 8]),
        [254, 0]
    );
    assert_eq!(
        int_binary("shift_right_arithmetic", "ui8", u8e, &[128, 127], &[1, 9]),
        [192, 0]
    );
    assert_eq!(
        int_binary("shift_right_logical", "ui8", u8e, &[128, 255], &[1, 7]),
        [64, 1]
    );
    // i64 at its full width.
    let i64e = ElemType::I64;
    assert_eq!(
        int_binary("shift_left", "i64", i64e, &[1, 1], &[63, 64]),
        [i64::MIN, 0]
    );
    assert_eq!(
        int_binary(
            "shift_right_arithmetic",
            "i64",
            i64e,
            &[i64::MIN, -1],
            &[64, 63]
        ),
        [-1, -1]
    );
    assert_eq!(
        int_binary("shift_right_logical", "i64", i64e, &[-1, -1], &[63, 64]),
        [1, 0]
    );
}

#[test]
fn popcnt_and_count_leading_zeros_of_edge_values() {
    let i32e = ElemType::I32;
    let edge = [0, -1, 7, i32::MIN as i64, i32::MAX as i64];
    assert_eq!(int_unary("popcnt", "i32", i32e, &edge), [0, 32, 3, 1, 31]);
    assert_eq!(
        int_unary("count_leading_zeros", "i32", i32e, &edge),
        [32, 0, 29, 0, 1]
    );
    assert_eq!(
        int_unary("popcnt", "ui8", ElemType::UI8, &[255, 1, 0]),
        [8, 1, 0]
    );
    assert_eq!(
        int_unary("count_leading_zeros", "ui8", ElemType::UI8, &[0, 1, 128]),
        [8, 7, 0]
    );
    assert_eq!(
        int_unary("count_leading_zeros", "i8", ElemType::I8, &[-1, 1]),
        [0, 7]
    );
    assert_eq!(
        int_unary("popcnt", "i64", ElemType::I64, &[-1, i64::MIN]),
        [64, 1]
    );
    assert_eq!(
        int_unary("count_leading_zeros", "i64", ElemType::I64, &[0, 1, -1]),
        [64, 63, 0]
    );
}

#[test]
fn get_dimension_size_is_an_i32_scalar() {
    let m = module(
        &["tensor<2x3xf32>"],
        "    %r = stablehlo.get_dimension_size %arg0, dim = 1 : (tensor<2x3xf32>) -> tensor<i32>\n\
         \x20   return %r : tensor<i32>",
        "tensor<i32>",
    );
    let x = Value::Float(Tensor::new(vec![2, 3], vec![0.0; 6]), ElemType::F32);
    let out = run(&m, vec![x]);
    assert_eq!(ints(&out[0]), [3]);
    assert_eq!(out[0].elem(), ElemType::I32);
    assert!(out[0].shape().is_empty());
}

#[test]
fn top_k_orders_like_xla() {
    let nan = f64::NAN;
    let xs = [1.0, nan, 3.0, 3.0, -nan, f64::INFINITY, -0.0, 0.0];
    let m = module(
        &["tensor<8xf32>"],
        "    %values, %indices = chlo.top_k(%arg0, k = 8) : tensor<8xf32> -> (tensor<8xf32>, tensor<8xi32>)\n\
         \x20   return %values, %indices : tensor<8xf32>, tensor<8xi32>",
        "tensor<8xf32>, tensor<8xi32>",
    );
    let out = run(&m, vec![fv(&xs, ElemType::F32)]);
    // NaN above +∞, +0 above −0, −NaN last; the tie 3, 3 by lower index.
    assert_eq!(ints(&out[1]), [1, 5, 2, 3, 0, 7, 6, 4]);
    let v = floats(&out[0]);
    assert!(v[0].is_nan() && v[0].is_sign_positive());
    assert_close(
        &v[1..7],
        &[f64::INFINITY, 3.0, 3.0, 1.0, 0.0, -0.0],
        0.0,
        "top_k values",
    );
    assert!(v[7].is_nan() && v[7].is_sign_negative());

    // Rows of a 2×3 operand, k = 2; integers compare by their signedness.
    let m = module(
        &["tensor<2x3xi32>", "tensor<3xui8>"],
        "    %v, %i = chlo.top_k(%arg0, k = 2) : tensor<2x3xi32> -> (tensor<2x2xi32>, tensor<2x2xi32>)\n\
         \x20   %w, %j = chlo.top_k(%arg1, k = 1) : tensor<3xui8> -> (tensor<1xui8>, tensor<1xi32>)\n\
         \x20   return %v, %i, %w, %j : tensor<2x2xi32>, tensor<2x2xi32>, tensor<1xui8>, tensor<1xi32>",
        "tensor<2x2xi32>, tensor<2x2xi32>, tensor<1xui8>, tensor<1xi32>",
    );
    let a = Value::Int(
        Tensor::new(vec![2, 3], vec![5, -1, 5, -7, 0, -2]),
        ElemType::I32,
    );
    let out = run(&m, vec![a, iv(&[1, 255, 7], ElemType::UI8)]);
    assert_eq!(ints(&out[0]), [5, 5, 0, -2]);
    assert_eq!(ints(&out[1]), [0, 2, 1, 2]);
    assert_eq!(out[0].shape(), [2, 2]);
    assert_eq!(ints(&out[2]), [255]);
    assert_eq!(ints(&out[3]), [1]);
}

// ---------------------------------------------------------------------------
// Dual tangents against central finite differences in f64.

/// The tangent of a unary op at x (dual input with tangent 1) and the central
/// difference (f(x+h) − f(x−h))/2h.
fn unary_tangent(op_line: &str, x: f64) -> (f64, f64) {
    let t = "tensor<1xf64>";
    let body = format!("    %r = {}\n    return %r : {t}", op_line.replace("T", t));
    let m = module(&[t], &body, t);
    let dual = Value::Float(Tensor::new(vec![1], vec![Dual::new(x, 1.0)]), ElemType::F64);
    let tangent = run(&m, vec![dual])[0].as_float().unwrap().data[0].tangent;
    let h = 1e-5 * x.abs().max(1.0);
    let f = |x: f64| floats(&run(&m, vec![fv(&[x], ElemType::F64)])[0])[0];
    (tangent, (f(x + h) - f(x - h)) / (2.0 * h))
}

fn assert_tangent(what: &str, (tangent, fd): (f64, f64)) {
    assert!(
        (tangent - fd).abs() <= 1e-7 * fd.abs().max(1.0),
        "{what}: dual tangent {tangent}, central difference {fd}"
    );
}

#[test]
fn dual_tangents_of_unary_ops_match_finite_differences() {
    let cases: [(&str, &[f64]); 15] = [
        ("stablehlo.tan %arg0 : T", &[0.7, -1.2]),
        ("chlo.tan %arg0 : T -> T", &[0.3]),
        ("chlo.sinh %arg0 : T -> T", &[0.8, -2.0]),
        ("chlo.cosh %arg0 : T -> T", &[0.8, -2.0]),
        ("chlo.asin %arg0 : T -> T", &[0.3, -0.9]),
        ("chlo.acos %arg0 : T -> T", &[0.3, -0.9]),
        ("chlo.atan %arg0 : T -> T", &[2.0, -0.4]),
        ("chlo.asinh %arg0 : T -> T", &[-1.5, 3.0]),
        ("chlo.acosh %arg0 : T -> T", &[1.7, 10.0]),
        ("chlo.atanh %arg0 : T -> T", &[0.4, -0.8]),
        ("chlo.erf_inv %arg0 : T -> T", &[0.6, -0.95, 0.0]),
        ("chlo.lgamma %arg0 : T -> T", &[2.5, 0.3, -0.5, 15.0]),
        ("chlo.digamma %arg0 : T -> T", &[1.3, 7.0, -1.5]),
        ("chlo.bessel_i1e %arg0 : T -> T", &[0.7, -2.0, 40.0]),
        ("stablehlo.round_nearest_afz %arg0 : T", &[1.3, -2.7]),
    ];
    for (line, xs) in cases {
        for &x in xs {
            assert_tangent(&format!("{line} at {x}"), unary_tangent(line, x));
        }
    }
    // At 0, e^{−|x|}I₁(x) = x/2 − x|x|/2 + …: the derivative is exactly ½
    // (the |x| kink would bias a finite difference by h/2).
    let (t0, _) = unary_tangent("chlo.bessel_i1e %arg0 : T -> T", 0.0);
    assert_eq!(t0, 0.5);
}

/// The tangent of a binary op at (a, b) along argument `arg` (0 or 1), and
/// the central difference along it.
fn binary_tangent(op: &str, a: f64, b: f64, arg: usize) -> (f64, f64) {
    let t = "tensor<1xf64>";
    let line = if op.starts_with("chlo.") {
        format!("    %r = {op} %arg0, %arg1 : {t}, {t} -> {t}")
    } else {
        format!("    %r = {op} %arg0, %arg1 : {t}")
    };
    let m = module(&[t, t], &format!("{line}\n    return %r : {t}"), t);
    let d =
        |v: f64, dv: f64| Value::Float(Tensor::new(vec![1], vec![Dual::new(v, dv)]), ElemType::F64);
    let f = |a: f64, b: f64| {
        floats(&run(&m, vec![fv(&[a], ElemType::F64), fv(&[b], ElemType::F64)])[0])[0]
    };
    let (da, db) = if arg == 0 { (1.0, 0.0) } else { (0.0, 1.0) };
    let tangent = run(&m, vec![d(a, da), d(b, db)])[0]
        .as_float()
        .unwrap()
        .data[0]
        .tangent;
    let (ha, hb) = (1e-5 * a.abs().max(1.0) * da, 1e-5 * b.abs().max(1.0) * db);
    let h = ha + hb;
    (tangent, (f(a + ha, b + hb) - f(a - ha, b - hb)) / (2.0 * h))
}

#[test]
fn dual_tangents_of_binary_ops_match_finite_differences() {
    for (y, x) in [(0.5, 2.0), (-1.0, -0.3), (3.0, 0.0)] {
        let dy = binary_tangent("stablehlo.atan2", y, x, 0);
        let dx = binary_tangent("stablehlo.atan2", y, x, 1);
        assert_tangent(&format!("atan2 d/dy at ({y}, {x})"), dy);
        assert_tangent(&format!("atan2 d/dx at ({y}, {x})"), dx);
        // The formulas themselves: ∂/∂y = x/(x²+y²), ∂/∂x = −y/(x²+y²).
        let r2 = x * x + y * y;
        assert!((dy.0 - x / r2).abs() < 1e-15 && (dx.0 + y / r2).abs() < 1e-15);
    }
    // Only the continuous argument: polygamma in x, zeta in q.
    for (n, x) in [(1.0, 1.5), (2.0, 0.7), (0.0, 3.0)] {
        let t = binary_tangent("chlo.polygamma", n, x, 1);
        assert_tangent(&format!("polygamma({n}, x) d/dx at {x}"), t);
    }
    for (s, q) in [(3.0, 1.5), (2.0, 4.0)] {
        assert_tangent(
            &format!("zeta({s}, q) d/dq at {q}"),
            binary_tangent("chlo.zeta", s, q, 1),
        );
    }
    // next_after's real-number model is x itself.
    let dx = binary_tangent("chlo.next_after", 1.5, 2.0, 0);
    let dy = binary_tangent("chlo.next_after", 1.5, 2.0, 1);
    assert_eq!((dx.0, dy.0), (1.0, 0.0));
}

/// The finite-difference check must tell a wrong derivative from a right one:
/// tan' = 1 + tan² passes, the planted 1 − tan² is refuted.
#[test]
fn the_tangent_check_refutes_a_wrong_derivative() {
    let x = 0.7f64;
    let (tangent, fd) = unary_tangent("stablehlo.tan %arg0 : T", x);
    assert_tangent("tan", (tangent, fd));
    let wrong = 1.0 - x.tan().powi(2);
    assert!(
        (wrong - fd).abs() > 1e-7 * fd.abs().max(1.0),
        "a wrong derivative {wrong} passed against {fd}"
    );
}

#[test]
fn polygamma_order_has_no_tangent() {
    let t = "tensor<1xf64>";
    let m = module(
        &[t, t],
        &format!("    %r = chlo.polygamma %arg0, %arg1 : {t}, {t} -> {t}\n    return %r : {t}"),
        t,
    );
    let d =
        |v: f64, dv: f64| Value::Float(Tensor::new(vec![1], vec![Dual::new(v, dv)]), ElemType::F64);
    let e = eval_func(&m, "main", vec![d(1.0, 1.0), d(1.5, 0.0)], &opts()).unwrap_err();
    assert!(
        e.to_string()
            .contains("not differentiable in its integer order"),
        "{e}"
    );
}

#[test]
fn integer_bit_ops_carry_no_tangent_and_dual_predicates_read_the_value() {
    let m = module(
        &["tensor<3xf32>"],
        "    %0 = stablehlo.is_finite %arg0 : (tensor<3xf32>) -> tensor<3xi1>\n\
         \x20   %1 = stablehlo.bitcast_convert %arg0 : (tensor<3xf32>) -> tensor<3xi32>\n\
         \x20   %2 = stablehlo.popcnt %1 : tensor<3xi32>\n\
         \x20   return %0, %2 : tensor<3xi1>, tensor<3xi32>",
        "tensor<3xi1>, tensor<3xi32>",
    );
    let x = Value::Float(
        Tensor::new(
            vec![3],
            vec![
                Dual::new(1.0, 5.0),
                Dual::new(f64::INFINITY, 1.0),
                Dual::new(-2.0, 1.0),
            ],
        ),
        ElemType::F32,
    );
    let out = run(&m, vec![x]);
    assert_eq!(out[0].as_int().unwrap().data, [1, 0, 1]);
    // popcnt(0x3f800000) = 7, popcnt(0x7f800000) = 8, popcnt(0xc0000000) = 2.
    assert_eq!(out[1].as_int().unwrap().data, [7, 8, 2]);
}

// ---------------------------------------------------------------------------
// The exact scalar.

fn exact_unary(op_line: &str, x: Exact) -> Result<Exact, String> {
    let t = "tensor<1xf64>";
    let body = format!("    %r = {}\n    return %r : {t}", op_line.replace("T", t));
    let m = module(&[t], &body, t);
    let v = Value::Float(Tensor::new(vec![1], vec![x]), ElemType::F64);
    eval_func(&m, "main", vec![v], &opts())
        .map(|e| e.outputs[0].as_float().unwrap().data[0].clone())
        .map_err(|e| e.to_string())
}

#[test]
fn exact_scalar_rational_cases_and_refusals() {
    let cases = [
        ("chlo.erf_inv %arg0 : T -> T", Exact::int(0), Exact::int(0)),
        ("chlo.lgamma %arg0 : T -> T", Exact::int(1), Exact::int(0)),
        ("chlo.lgamma %arg0 : T -> T", Exact::int(2), Exact::int(0)),
        ("chlo.cosh %arg0 : T -> T", Exact::int(0), Exact::int(1)),
        ("chlo.acos %arg0 : T -> T", Exact::int(1), Exact::int(0)),
        ("chlo.acosh %arg0 : T -> T", Exact::int(1), Exact::int(0)),
        ("stablehlo.tan %arg0 : T", Exact::int(0), Exact::int(0)),
        (
            "chlo.bessel_i1e %arg0 : T -> T",
            Exact::int(0),
            Exact::int(0),
        ),
        (
            "stablehlo.round_nearest_afz %arg0 : T",
            Exact::ratio(5, 2),
            Exact::int(3),
        ),
        (
            "stablehlo.round_nearest_afz %arg0 : T",
            Exact::ratio(-5, 2),
            Exact::int(-3),
        ),
        (
            "stablehlo.round_nearest_afz %arg0 : T",
            Exact::ratio(-7, 3),
            Exact::int(-2),
        ),
    ];
    for (line, x, want) in cases {
        assert_eq!(
            exact_unary(line, x.clone()).unwrap(),
            want,
            "{line} at {x:?}"
        );
    }
    for (line, x) in [
        ("stablehlo.tan %arg0 : T", Exact::ratio(1, 2)),
        ("chlo.digamma %arg0 : T -> T", Exact::int(1)),
        ("chlo.erf_inv %arg0 : T -> T", Exact::ratio(1, 2)),
    ] {
        let e = exact_unary(line, x).unwrap_err();
        assert!(e.contains("irrational"), "{line}: {e}");
    }
    // reduce_precision is exact on values of the element type.
    let e = exact_unary(
        "stablehlo.reduce_precision %arg0, format = e8m7 : T",
        Exact::from_f64(1.0 + 2f64.powi(-8) + 2f64.powi(-9)).unwrap(),
    )
    .unwrap();
    assert_eq!(e, Exact::from_f64(1.0 + 2f64.powi(-7)).unwrap());
}

// ---------------------------------------------------------------------------
// triangular_solve.

/// `stablehlo.triangular_solve` (generic form, as MLIR prints it) of a 3×3 a
/// and b of `b_shape`, over f64.
fn triangular_module(
    b_shape: &str,
    left: bool,
    lower: bool,
    unit: bool,
    transpose: &str,
) -> ir::Module {
    let a = "tensor<3x3xf64>";
    let b = format!("tensor<{b_shape}xf64>");
    let body = format!(
        "    %r = \"stablehlo.triangular_solve\"(%arg0, %arg1) <{{left_side = {left}, lower = {lower}, \
         transpose_a = #stablehlo<transpose {transpose}>, unit_diagonal = {unit}}}> : ({a}, {b}) -> {b}\n\
         \x20   return %r : {b}"
    );
    module(&[a, &b], &body, &b)
}

fn mat(rows: usize, cols: usize, data: &[f64]) -> Value<f64> {
    Value::Float(Tensor::new(vec![rows, cols], data.to_vec()), ElemType::F64)
}

#[test]
fn triangular_solve_by_substitution() {
    let nan = f64::NAN;
    // Lower triangle [[2,0,0],[1,4,0],[−1,3,8]]; the upper triangle holds NaN,
    // which must never be read when lower = true.
    let a_lower = [2.0, nan, nan, 1.0, 4.0, nan, -1.0, 3.0, 8.0];
    let b = [2.0, 4.0, 5.0, 6.0, 7.0, 8.0];
    // Forward substitution by hand: x₁ = b₁/2; x₂ = (b₂ − x₁)/4; x₃ = (b₃ + x₁ − 3x₂)/8.
    let m = triangular_module("3x2", true, true, false, "NO_TRANSPOSE");
    let x = run(&m, vec![mat(3, 3, &a_lower), mat(3, 2, &b)]);
    assert_eq!(floats(&x[0]), [1.0, 2.0, 1.0, 1.0, 0.625, 0.875]);
    // Unit diagonal: the NaN-free diagonal is not read either.
    let mut a_unit = a_lower;
    for i in 0..3 {
        a_unit[i * 4] = nan;
    }
    let m = triangular_module("3x2", true, true, true, "NO_TRANSPOSE");
    let x = run(&m, vec![mat(3, 3, &a_unit), mat(3, 2, &b)]);
    assert_eq!(floats(&x[0]), [2.0, 4.0, 3.0, 2.0, 0.0, 6.0]);
    // Upper triangle (the transpose of the matrix above), back substitution:
    // x₃ = b₃/8; x₂ = (b₂ − 3x₃)/4; x₁ = (b₁ − x₂ + x₃)/2.
    let a_upper = [2.0, 1.0, -1.0, nan, 4.0, 3.0, nan, nan, 8.0];
    let m = triangular_module("3x2", true, false, false, "NO_TRANSPOSE");
    let x = run(&m, vec![mat(3, 3, &a_upper), mat(3, 2, &b)]);
    assert_eq!(floats(&x[0]), [1.140625, 2.125, 0.59375, 0.75, 0.875, 1.0]);
    // TRANSPOSE of the lower triangle is that upper matrix: the same solution;
    // ADJOINT is the same for real types.
    for t in ["TRANSPOSE", "ADJOINT"] {
        let m = triangular_module("3x2", true, true, false, t);
        let x = run(&m, vec![mat(3, 3, &a_lower), mat(3, 2, &b)]);
        assert_eq!(
            floats(&x[0]),
            [1.140625, 2.125, 0.59375, 0.75, 0.875, 1.0],
            "{t}"
        );
    }
    // Right side: x·aᵀ = bᵀ, i.e. a·xᵀ = b, so x is the first solution transposed.
    let bt = [2.0, 5.0, 7.0, 4.0, 6.0, 8.0];
    let m = triangular_module("2x3", false, true, false, "TRANSPOSE");
    let x = run(&m, vec![mat(3, 3, &a_lower), mat(2, 3, &bt)]);
    assert_eq!(floats(&x[0]), [1.0, 1.0, 0.625, 2.0, 1.0, 0.875]);
}

#[test]
fn triangular_solve_is_exact_and_differentiable() {
    let a = [2.0, 0.0, 0.0, 1.0, 4.0, 0.0, -1.0, 3.0, 8.0];
    let b = [2.0, 4.0, 5.0, 6.0, 7.0, 8.0];
    let m = triangular_module("3x2", true, true, false, "NO_TRANSPOSE");
    let ex = |d: &[f64], r, c| {
        Value::Float(
            Tensor::new(
                vec![r, c],
                d.iter().map(|&x| Exact::from_f64(x).unwrap()).collect(),
            ),
            ElemType::F64,
        )
    };
    let x = run(&m, vec![ex(&a, 3, 3), ex(&b, 3, 2)]);
    assert_eq!(x[0].as_float().unwrap().data[4], Exact::ratio(5, 8));
    // Tangent along a[2][1] (the 3 in row 3): x₃ = (b₃ + x₁ − 3x₂)/8, so
    // ∂x₃/∂a₂₁ = −x₂/8 = −1/8 in both columns; x₁, x₂ do not move.
    let dual = |d: &[f64], seed: Option<usize>, r, c| {
        let data = d
            .iter()
            .enumerate()
            .map(|(i, &x)| Dual::new(x, if Some(i) == seed { 1.0 } else { 0.0 }))
            .collect();
        Value::Float(Tensor::new(vec![r, c], data), ElemType::F64)
    };
    let x = run(&m, vec![dual(&a, Some(7), 3, 3), dual(&b, None, 3, 2)]);
    let t: Vec<f64> = x[0]
        .as_float()
        .unwrap()
        .data
        .iter()
        .map(|d| d.tangent)
        .collect();
    assert_eq!(t, [0.0, 0.0, 0.0, 0.0, -0.125, -0.125]);
    // And against a central difference along b₁₁ (entry 0).
    let x = run(&m, vec![dual(&a, None, 3, 3), dual(&b, Some(0), 3, 2)]);
    let t: Vec<f64> = x[0]
        .as_float()
        .unwrap()
        .data
        .iter()
        .map(|d| d.tangent)
        .collect();
    let h = 1e-6;
    let solve = |db: f64| {
        let mut bb = b;
        bb[0] += db;
        floats(&run(&m, vec![mat(3, 3, &a), mat(3, 2, &bb)])[0])
    };
    let (up, down) = (solve(h), solve(-h));
    for i in 0..6 {
        let fd = (up[i] - down[i]) / (2.0 * h);
        assert!(
            (t[i] - fd).abs() < 1e-8,
            "entry {i}: tangent {}, difference {fd}",
            t[i]
        );
    }
}

/// `chlo.mulhi` of `a` and `b`, one-dimensional tensors of the integer type
/// `elem` (spelled `name` in the module text).
fn mulhi(name: &str, elem: ElemType, a: &[i64], b: &[i64]) -> Vec<i64> {
    let t = format!("tensor<{}x{name}>", a.len());
    let m = module(
        &[&t, &t],
        &format!("    %r = chlo.mulhi %arg0, %arg1 : {t}, {t} -> {t}\n    return %r : {t}"),
        &t,
    );
    ints(&run(&m, vec![iv(a, elem), iv(b, elem)])[0])
}

#[test]
fn mulhi_is_the_high_half_of_the_wide_product() {
    // i8: 64·4 = 256 = 0x0100 → 1; −64·4 = −256 = 0xff00 → −1; −64·−4 → 1;
    // 127·127 = 16129 = 0x3f01 → 63; −128·−128 = 16384 = 0x4000 → 64.
    assert_eq!(
        mulhi(
            "i8",
            ElemType::I8,
            &[64, -64, -64, 127, -128],
            &[4, 4, -4, 127, -128]
        ),
        [1, -1, 1, 63, 64]
    );
    // ui8: 255·255 = 65025 = 0xfe01 → 254.
    assert_eq!(mulhi("ui8", ElemType::UI8, &[255], &[255]), [254]);
    // i64: (2⁶²)·4 = 2⁶⁴ → 1; i64::MIN·−1 = 2⁶³ → 0 (high word of 0x8000…0 as 128 bits).
    assert_eq!(
        mulhi("i64", ElemType::I64, &[1 << 62, i64::MIN], &[4, -1]),
        [1, 0]
    );
}
