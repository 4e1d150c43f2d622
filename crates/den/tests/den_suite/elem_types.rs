//! Every tensor in its own element type, against values worked out by hand
//! from the StableHLO spec and IEEE 754: [`den::Ieee`] computes f64 in f64,
//! rounds f32 / bf16 / f16 results once per op; i1 is boolean (add = or,
//! multiply = and); every integer type wraps in its own width, ui64 is
//! unsigned all the way; integer dot_general, convolution, reduce,
//! reduce_window and select_and_scatter evaluate. Also: ui64 / i16 / ui16
//! literals survive parse → print → parse in the pretty and generic forms.

use den::{eval_func, EvalOptions, Ieee, Value};
use ir::ElemType;

fn parse(src: &str) -> ir::Module {
    let m = ir::parse::parse_module(src, "t.mlir").unwrap_or_else(|e| panic!("{e}\n{src}"));
    ir::verify_module(&m).unwrap_or_else(|e| panic!("{e:?}\n{src}"));
    m
}

fn opts() -> EvalOptions {
    EvalOptions {
        fast: false,
        ..Default::default()
    }
}

/// Outputs of the zero-argument `@main` of `src`, evaluated over `Ieee`.
fn run(src: &str) -> Vec<Value<Ieee>> {
    let m = parse(src);
    eval_func::<Ieee>(&m, "main", vec![], &opts())
        .unwrap_or_else(|e| panic!("{e}\n{src}"))
        .outputs
}

/// `@main` returning the one result of `body` (which defines `%r`).
fn one(body: &str, ty: &str) -> Value<Ieee> {
    let src = format!("func.func @main() -> {ty} {{\n{body}\n  return %r : {ty}\n}}\n");
    run(&src).remove(0)
}

fn floats(v: &Value<Ieee>) -> Vec<f64> {
    v.as_float().unwrap().data.iter().map(|x| x.get()).collect()
}

fn ints(v: &Value<Ieee>) -> Vec<i64> {
    v.as_int().unwrap().data.clone()
}

/// `%r = OP %a, %b` on two constants of type `ty`.
fn binop(op: &str, a: &str, b: &str, ty: &str) -> Value<Ieee> {
    one(
        &format!(
            "  %a = stablehlo.constant dense<{a}> : {ty}\n  \
             %b = stablehlo.constant dense<{b}> : {ty}\n  \
             %r = stablehlo.{op} %a, %b : {ty}"
        ),
        ty,
    )
}

fn bits(xs: &[f64]) -> Vec<u64> {
    xs.iter().map(|x| x.to_bits()).collect()
}

// ---------------------------------------------------------------------------
// Floats.

#[test]
fn f64_constants_keep_f64_range_and_precision() {
    // 1e300 overflows f32 (max ≈ 3.4e38); 5.0001 as f32 is 5.000100135803223.
    let v = one(
        "  %r = stablehlo.constant dense<[1.0e300, 5.0001, -0.0, 4.9406564584124654e-324]> : tensor<4xf64>",
        "tensor<4xf64>",
    );
    assert_eq!(
        bits(&floats(&v)),
        bits(&[1e300, 5.0001, -0.0, f64::from_bits(1)])
    );
    assert_ne!(5.0001f64, 5.0001f32 as f64);
}

#[test]
fn f64_arithmetic_is_f64() {
    // 10000^10 = 1e40 (f32 overflows to inf); the nearest f64 to 10^40.
    let v = binop("power", "10000.0", "10.0", "tensor<f64>");
    assert_eq!(floats(&v), vec![1e40]);
    // 1e300 * 10 = 1e301, exactly the f64 nearest (10 * nearest(1e300) rounds to it).
    assert_eq!(
        floats(&binop("multiply", "1.0e300", "10.0", "tensor<f64>")),
        vec![1e301]
    );
    // 2^53 + 1 is not an f64: it rounds (ties to even) to 2^53; 2^24 + 1 is.
    assert_eq!(
        floats(&binop("add", "9007199254740992.0", "1.0", "tensor<f64>")),
        vec![9007199254740992.0]
    );
    assert_eq!(
        floats(&binop("add", "16777216.0", "1.0", "tensor<f64>")),
        vec![16777217.0]
    );
    // 0.1 + 0.2 in f64 is 0.30000000000000004 (not the f32 0.3 rounding).
    assert_eq!(
        floats(&binop("add", "0.1", "0.2", "tensor<f64>")),
        vec![0.30000000000000004]
    );
}

#[test]
fn f32_results_round_to_f32_after_every_op() {
    // 2^24 + 1 is not an f32: ties to even gives 2^24.
    assert_eq!(
        floats(&binop("add", "16777216.0", "1.0", "tensor<f32>")),
        vec![16777216.0]
    );
    // 1e38 * 10 overflows f32 to +inf (the f64 product 1e39 is finite).
    assert_eq!(
        floats(&binop("multiply", "1.0e38", "10.0", "tensor<f32>")),
        vec![f64::INFINITY]
    );
    // f32(0.1) + f32(0.2) rounds to f32(0.3) = 0.30000001192092896.
    assert_eq!(
        floats(&binop("add", "0.1", "0.2", "tensor<f32>")),
        vec![0.3f32 as f64]
    );
    // 1 / 3 in f32: 0.3333333432674408 (the f32 nearest 1/3).
    assert_eq!(
        floats(&binop("divide", "1.0", "3.0", "tensor<f32>")),
        vec![(1.0f32 / 3.0) as f64]
    );
}

#[test]
fn bf16_rounds_after_each_op_to_nearest_even() {
    // bf16 has 8 significant bits: the ulp of 1 is 2^-7. 1 + 2^-8 is a tie
    // and rounds to even (1); adding 2^-20 afterwards stays 1. In one f32
    // sum, 1 + 2^-8 + 2^-20 would be above the tie and round to 1 + 2^-7.
    let v = one(
        "  %one = stablehlo.constant dense<1.0> : tensor<bf16>\n  \
         %h = stablehlo.constant dense<0.00390625> : tensor<bf16>\n  \
         %t = stablehlo.constant dense<9.5367431640625e-07> : tensor<bf16>\n  \
         %s = stablehlo.add %one, %h : tensor<bf16>\n  \
         %r = stablehlo.add %s, %t : tensor<bf16>",
        "tensor<bf16>",
    );
    assert_eq!(floats(&v), vec![1.0]);
    // 1 + 3·2^-8 is a tie between 1 + 2^-7 (odd) and 1 + 2^-6 (even): 1 + 2^-6.
    assert_eq!(
        floats(&binop("add", "1.0", "0.01171875", "tensor<bf16>")),
        vec![1.015625]
    );
}

#[test]
fn narrow_converts_round_once_from_f64() {
    // 1 + 2^-8 + 2^-40 is just above the bf16 tie between 1 and 1 + 2^-7:
    // correct rounding gives 1 + 2^-7 (rounding the low mantissa bits away
    // first would see an exact tie and give 1).
    let x = 1.0 + 2f64.powi(-8) + 2f64.powi(-40);
    let src = format!(
        "func.func @main() -> (tensor<bf16>, tensor<f16>, tensor<f16>, tensor<f32>) {{\n  \
         %x = stablehlo.constant dense<{x:e}> : tensor<f64>\n  \
         %a = stablehlo.convert %x : (tensor<f64>) -> tensor<bf16>\n  \
         %big = stablehlo.constant dense<[65520.0, 65519.0]> : tensor<2xf64>\n  \
         %h = stablehlo.convert %big : (tensor<2xf64>) -> tensor<2xf16>\n  \
         %h0 = stablehlo.slice %h [0:1] : (tensor<2xf16>) -> tensor<1xf16>\n  \
         %h1 = stablehlo.slice %h [1:2] : (tensor<2xf16>) -> tensor<1xf16>\n  \
         %b0 = stablehlo.reshape %h0 : (tensor<1xf16>) -> tensor<f16>\n  \
         %b1 = stablehlo.reshape %h1 : (tensor<1xf16>) -> tensor<f16>\n  \
         %f = stablehlo.convert %x : (tensor<f64>) -> tensor<f32>\n  \
         return %a, %b0, %b1, %f : tensor<bf16>, tensor<f16>, tensor<f16>, tensor<f32>\n}}\n"
    );
    let out = run(&src);
    assert_eq!(floats(&out[0]), vec![1.0078125]);
    // f16: max finite 65504, the midpoint to the next binade 65520 rounds to inf.
    assert_eq!(floats(&out[1]), vec![f64::INFINITY]);
    assert_eq!(floats(&out[2]), vec![65504.0]);
    assert_eq!(floats(&out[3]), vec![x as f32 as f64]);
}

#[test]
fn signed_zeros_nan_and_infinities_follow_ieee() {
    // maximum(-0, +0) = +0 and minimum(+0, -0) = -0 (spec: +0 > -0 here).
    assert_eq!(
        bits(&floats(&binop("maximum", "-0.0", "0.0", "tensor<f64>"))),
        bits(&[0.0])
    );
    assert_eq!(
        bits(&floats(&binop("minimum", "0.0", "-0.0", "tensor<f64>"))),
        bits(&[-0.0])
    );
    // -0 * 1 = -0; inf - inf = NaN; NaN propagates through maximum.
    assert_eq!(
        bits(&floats(&binop("multiply", "-0.0", "1.0", "tensor<f64>"))),
        bits(&[-0.0])
    );
    assert!(floats(&binop(
        "subtract",
        "0x7FF0000000000000",
        "0x7FF0000000000000",
        "tensor<f64>"
    ))[0]
        .is_nan());
    assert!(floats(&binop(
        "maximum",
        "0x7FF8000000000000",
        "1.0",
        "tensor<f64>"
    ))[0]
        .is_nan());
    // 1 / -0 = -inf.
    assert_eq!(
        floats(&binop("divide", "1.0", "-0.0", "tensor<f64>")),
        vec![f64::NEG_INFINITY]
    );
}

// ---------------------------------------------------------------------------
// Booleans.

#[test]
fn i1_truth_tables_follow_the_spec() {
    // Operands (a, b) over the four combinations: (0,0) (0,1) (1,0) (1,1).
    let a = "[false, false, true, true]";
    let b = "[false, true, false, true]";
    let ty = "tensor<4xi1>";
    let table = |op: &str| ints(&binop(op, a, b, ty));
    assert_eq!(table("add"), vec![0, 1, 1, 1], "add is logical or");
    assert_eq!(
        table("multiply"),
        vec![0, 0, 0, 1],
        "multiply is logical and"
    );
    assert_eq!(table("maximum"), vec![0, 1, 1, 1], "maximum is or");
    assert_eq!(table("minimum"), vec![0, 0, 0, 1], "minimum is and");
    assert_eq!(table("or"), vec![0, 1, 1, 1]);
    assert_eq!(table("and"), vec![0, 0, 0, 1]);
    assert_eq!(table("xor"), vec![0, 1, 1, 0]);
    let not = one(
        &format!("  %a = stablehlo.constant dense<{a}> : {ty}\n  %r = stablehlo.not %a : {ty}"),
        ty,
    );
    assert_eq!(ints(&not), vec![1, 1, 0, 0]);
}

#[test]
fn i1_subtract_is_not_a_boolean_op() {
    // The spec defines subtract on integers and floats, not on i1.
    let src = "func.func @main() -> tensor<i1> {\n  \
        %a = stablehlo.constant dense<true> : tensor<i1>\n  \
        %r = stablehlo.subtract %a, %a : tensor<i1>\n  \
        return %r : tensor<i1>\n}\n";
    let m = ir::parse::parse_module(src, "t.mlir");
    let rejected = match m {
        Err(_) => true,
        Ok(m) => {
            ir::verify_module(&m).is_err()
                && eval_func::<Ieee>(&m, "main", vec![], &opts()).is_err()
        }
    };
    assert!(rejected);
}

// ---------------------------------------------------------------------------
// Integers.

#[test]
fn every_integer_width_wraps_around() {
    let cases: [(&str, &str, &str, &str, i64); 14] = [
        ("add", "127", "1", "i8", -128),
        ("multiply", "-128", "-1", "i8", -128),
        ("subtract", "0", "1", "ui8", 255),
        ("add", "255", "1", "ui8", 0),
        ("add", "32767", "1", "i16", -32768),
        ("subtract", "0", "1", "ui16", 65535),
        ("multiply", "256", "256", "ui16", 0),
        ("add", "2147483647", "1", "i32", i32::MIN as i64),
        ("subtract", "0", "1", "ui32", u32::MAX as i64),
        ("add", "9223372036854775807", "1", "i64", i64::MIN),
        // ui64 values are stored as their bit pattern: u64::MAX is -1.
        ("subtract", "0", "1", "ui64", u64::MAX as i64),
        ("add", "18446744073709551615", "1", "ui64", 0),
        ("multiply", "4294967296", "4294967296", "ui64", 0),
        ("power", "2", "8", "i8", 0),
    ];
    for (op, a, b, ty, want) in cases {
        let v = binop(op, a, b, &format!("tensor<{ty}>"));
        assert_eq!(ints(&v), vec![want], "{op} {a}, {b} : {ty}");
    }
    // negate wraps: -(-128) = -128 in i8; not of ui8 0 is 255.
    let neg = one(
        "  %a = stablehlo.constant dense<-128> : tensor<i8>\n  %r = stablehlo.negate %a : tensor<i8>",
        "tensor<i8>",
    );
    assert_eq!(ints(&neg), vec![-128]);
    let not = one(
        "  %a = stablehlo.constant dense<0> : tensor<ui8>\n  %r = stablehlo.not %a : tensor<ui8>",
        "tensor<ui8>",
    );
    assert_eq!(ints(&not), vec![255]);
}

#[test]
fn ui64_is_unsigned_in_compare_divide_remainder_max_and_convert() {
    let max = "18446744073709551615";
    let ty = "tensor<ui64>";
    let gt = one(
        &format!(
            "  %a = stablehlo.constant dense<{max}> : {ty}\n  \
             %b = stablehlo.constant dense<1> : {ty}\n  \
             %r = stablehlo.compare GT, %a, %b : ({ty}, {ty}) -> tensor<i1>"
        ),
        "tensor<i1>",
    );
    assert_eq!(ints(&gt), vec![1]);
    assert_eq!(ints(&binop("divide", max, "2", ty)), vec![i64::MAX]);
    assert_eq!(ints(&binop("remainder", max, "10", ty)), vec![5]);
    assert_eq!(ints(&binop("maximum", max, "1", ty)), vec![-1]);
    assert_eq!(ints(&binop("minimum", max, "1", ty)), vec![1]);
    let src = format!(
        "func.func @main() -> (tensor<f64>, tensor<ui64>, tensor<i64>, tensor<ui64>) {{\n  \
         %a = stablehlo.constant dense<{max}> : {ty}\n  \
         %f = stablehlo.convert %a : ({ty}) -> tensor<f64>\n  \
         %x = stablehlo.constant dense<1.8e19> : tensor<f64>\n  \
         %u = stablehlo.convert %x : (tensor<f64>) -> {ty}\n  \
         %h = stablehlo.constant dense<9223372036854775808> : {ty}\n  \
         %i = stablehlo.convert %h : ({ty}) -> tensor<i64>\n  \
         %m = stablehlo.constant dense<-1> : tensor<i64>\n  \
         %w = stablehlo.convert %m : (tensor<i64>) -> {ty}\n  \
         return %f, %u, %i, %w : tensor<f64>, {ty}, tensor<i64>, {ty}\n}}\n"
    );
    let out = run(&src);
    // 2^64 − 1 rounds to the f64 2^64.
    assert_eq!(floats(&out[0]), vec![18446744073709551616.0]);
    assert_eq!(ints(&out[1]), vec![18000000000000000000u64 as i64]);
    // 2^63 as i64 wraps to i64::MIN; -1 as ui64 is 2^64 − 1.
    assert_eq!(ints(&out[2]), vec![i64::MIN]);
    assert_eq!(ints(&out[3]), vec![u64::MAX as i64]);
}

#[test]
fn integer_division_by_zero_and_overflow_follow_xla() {
    let ty = "tensor<3xi32>";
    let q = binop("divide", "[7, -7, -2147483648]", "[0, 0, -1]", ty);
    assert_eq!(ints(&q), vec![-1, -1, i32::MIN as i64]);
    let r = binop("remainder", "[7, -7, -2147483648]", "[0, 0, -1]", ty);
    assert_eq!(ints(&r), vec![7, -7, 0]);
    assert_eq!(ints(&binop("divide", "7", "0", "tensor<ui8>")), vec![255]);
    // Truncating division and a remainder with the dividend's sign.
    assert_eq!(ints(&binop("divide", "-7", "2", "tensor<i8>")), vec![-3]);
    assert_eq!(ints(&binop("remainder", "-7", "2", "tensor<i8>")), vec![-1]);
}

#[test]
fn float_to_integer_converts_truncate_and_saturate() {
    let src = "func.func @main() -> (tensor<5xi8>, tensor<3xui16>) {\n  \
        %x = stablehlo.constant dense<[-1.9, 1.9, 300.0, -300.0, 0x7FF8000000000000]> : tensor<5xf64>\n  \
        %a = stablehlo.convert %x : (tensor<5xf64>) -> tensor<5xi8>\n  \
        %y = stablehlo.constant dense<[-5.0, 65535.9, 1.0e10]> : tensor<3xf32>\n  \
        %b = stablehlo.convert %y : (tensor<3xf32>) -> tensor<3xui16>\n  \
        return %a, %b : tensor<5xi8>, tensor<3xui16>\n}\n";
    let out = run(src);
    assert_eq!(ints(&out[0]), vec![-1, 1, 127, -128, 0]);
    assert_eq!(ints(&out[1]), vec![0, 65535, 65535]);
}

#[test]
fn integer_dot_general_accumulates_with_wrap_in_the_result_type() {
    // [100, 100] · [2, 2] = 400: in i8 400 − 512 = −112; in i32 (preferred
    // result type) 400.
    let src = "func.func @main() -> (tensor<i8>, tensor<i32>, tensor<2xi1>) {\n  \
        %a = stablehlo.constant dense<[100, 100]> : tensor<2xi8>\n  \
        %b = stablehlo.constant dense<[2, 2]> : tensor<2xi8>\n  \
        %c = stablehlo.dot_general %a, %b, contracting_dims = [0] x [0] : (tensor<2xi8>, tensor<2xi8>) -> tensor<i8>\n  \
        %d = stablehlo.dot_general %a, %b, contracting_dims = [0] x [0] : (tensor<2xi8>, tensor<2xi8>) -> tensor<i32>\n  \
        %p = stablehlo.constant dense<[[true, true], [true, false]]> : tensor<2x2xi1>\n  \
        %q = stablehlo.constant dense<[true, true]> : tensor<2xi1>\n  \
        %e = stablehlo.dot_general %p, %q, contracting_dims = [1] x [0] : (tensor<2x2xi1>, tensor<2xi1>) -> tensor<2xi1>\n  \
        return %c, %d, %e : tensor<i8>, tensor<i32>, tensor<2xi1>\n}\n";
    let out = run(src);
    assert_eq!(ints(&out[0]), vec![-112]);
    assert_eq!(ints(&out[1]), vec![400]);
    // Boolean: or of ands. Row [1,1]·[1,1] is true (xor-sum would be false).
    assert_eq!(ints(&out[2]), vec![1, 1]);
}

#[test]
fn integer_convolution_wraps_in_the_result_type() {
    // 1-D valid convolution, batch 1, one feature: [1,2,3,4] ⋆ [1,-1] =
    // [-1,-1,-1]; [100,100,100] ⋆ [1,1] = 200 → 200 − 256 = −56 in i8.
    let conv = |ty: &str, n: usize, x: &str, k: &str| {
        let o = n - 1;
        format!(
            "  %x = stablehlo.constant dense<{x}> : tensor<1x1x{n}x{ty}>\n  \
             %k = stablehlo.constant dense<{k}> : tensor<1x1x2x{ty}>\n  \
             %r = stablehlo.convolution(%x, %k) dim_numbers = [b, f, 0]x[o, i, 0]->[b, f, 0], window = {{stride = [1], pad = [[0, 0]], lhs_dilate = [1], rhs_dilate = [1]}} {{batch_group_count = 1 : i64, feature_group_count = 1 : i64}} : (tensor<1x1x{n}x{ty}>, tensor<1x1x2x{ty}>) -> tensor<1x1x{o}x{ty}>"
        )
    };
    let v = one(
        &conv("i32", 4, "[[[1, 2, 3, 4]]]", "[[[1, -1]]]"),
        "tensor<1x1x3xi32>",
    );
    assert_eq!(ints(&v), vec![-1, -1, -1]);
    let v = one(
        &conv("i8", 3, "[[[100, 100, 100]]]", "[[[1, 1]]]"),
        "tensor<1x1x2xi8>",
    );
    assert_eq!(ints(&v), vec![-56, -56]);
}

#[test]
fn integer_reductions_wrap_and_booleans_reduce_with_or() {
    let src = "func.func @main() -> (tensor<i8>, tensor<i1>, tensor<2xui8>) {\n  \
        %x = stablehlo.constant dense<[100, 100, 100]> : tensor<3xi8>\n  \
        %z = stablehlo.constant dense<0> : tensor<i8>\n  \
        %s = stablehlo.reduce(%x init: %z) applies stablehlo.add across dimensions = [0] : (tensor<3xi8>, tensor<i8>) -> tensor<i8>\n  \
        %b = stablehlo.constant dense<[true, true, false]> : tensor<3xi1>\n  \
        %f = stablehlo.constant dense<false> : tensor<i1>\n  \
        %o = stablehlo.reduce(%b init: %f) applies stablehlo.add across dimensions = [0] : (tensor<3xi1>, tensor<i1>) -> tensor<i1>\n  \
        %u = stablehlo.constant dense<[200, 100, 255, 1]> : tensor<4xui8>\n  \
        %uz = stablehlo.constant dense<0> : tensor<ui8>\n  \
        %w = \"stablehlo.reduce_window\"(%u, %uz) ({\n  \
        ^bb0(%p: tensor<ui8>, %q: tensor<ui8>):\n    \
          %t = stablehlo.add %p, %q : tensor<ui8>\n    \
          stablehlo.return %t : tensor<ui8>\n  \
        }) {window_dimensions = array<i64: 2>, window_strides = array<i64: 2>} : (tensor<4xui8>, tensor<ui8>) -> tensor<2xui8>\n  \
        return %s, %o, %w : tensor<i8>, tensor<i1>, tensor<2xui8>\n}\n";
    let out = run(src);
    // 300 − 256 = 44.
    assert_eq!(ints(&out[0]), vec![44]);
    // or(true, true, false) = true (xor would give false).
    assert_eq!(ints(&out[1]), vec![1]);
    // 200 + 100 = 300 → 44; 255 + 1 = 256 → 0.
    assert_eq!(ints(&out[2]), vec![44, 0]);
}

#[test]
fn integer_select_and_scatter_selects_and_accumulates() {
    // Windows [1, 5] and [3, 2] (size 2, stride 2) select their maxima
    // (positions 1 and 2, GE keeps the earlier on ties) and add the source.
    // ui8: 250 + 10 at a shared position wraps to 4.
    let sas = |ty: &str, x: &str, src: &str, n: usize, w: usize, s: usize| {
        let m = src.matches(',').count() + 1;
        format!(
            "  %x = stablehlo.constant dense<{x}> : tensor<{n}x{ty}>\n  \
             %s = stablehlo.constant dense<{src}> : tensor<{m}x{ty}>\n  \
             %i = stablehlo.constant dense<0> : tensor<{ty}>\n  \
             %r = \"stablehlo.select_and_scatter\"(%x, %s, %i) ({{\n  \
             ^bb0(%a: tensor<{ty}>, %b: tensor<{ty}>):\n    \
               %c = stablehlo.compare GE, %a, %b : (tensor<{ty}>, tensor<{ty}>) -> tensor<i1>\n    \
               stablehlo.return %c : tensor<i1>\n  \
             }}, {{\n  \
             ^bb0(%a: tensor<{ty}>, %b: tensor<{ty}>):\n    \
               %c = stablehlo.add %a, %b : tensor<{ty}>\n    \
               stablehlo.return %c : tensor<{ty}>\n  \
             }}) {{window_dimensions = array<i64: {w}>, window_strides = array<i64: {s}>}} : (tensor<{n}x{ty}>, tensor<{m}x{ty}>, tensor<{ty}>) -> tensor<{n}x{ty}>"
        )
    };
    let v = one(
        &sas("i32", "[1, 5, 3, 2]", "[10, 20]", 4, 2, 2),
        "tensor<4xi32>",
    );
    assert_eq!(ints(&v), vec![0, 10, 20, 0]);
    // Overlapping windows [1, 9], [9, 0] (stride 1) both select the 9.
    let v = one(
        &sas("ui8", "[1, 9, 0]", "[250, 10]", 3, 2, 1),
        "tensor<3xui8>",
    );
    assert_eq!(ints(&v), vec![0, 4, 0]);
    // Unsigned order: 200 > 100 as ui8 (as i8 it would be −56 < 100).
    let v = one(&sas("ui8", "[100, 200]", "[7]", 2, 2, 2), "tensor<2xui8>");
    assert_eq!(ints(&v), vec![0, 7]);
}

// ---------------------------------------------------------------------------
// Literals: parse → print → parse.

fn round_trips(src: &str) -> ir::Module {
    let m = parse(src);
    let printed = ir::print::print_module(&m);
    let again = ir::parse::parse_module(&printed, "printed.mlir")
        .unwrap_or_else(|e| panic!("{e}\n{printed}"));
    assert_eq!(m, again, "{printed}");
    again
}

#[test]
fn ui64_i16_ui16_literals_round_trip_in_both_forms() {
    let pretty = "func.func @main() -> (tensor<2xui64>, tensor<2xi16>, tensor<2xui16>) {\n  \
        %a = stablehlo.constant dense<[18446744073709551615, 9223372036854775808]> : tensor<2xui64>\n  \
        %b = stablehlo.constant dense<[-32768, 32767]> : tensor<2xi16>\n  \
        %c = stablehlo.constant dense<[0, 65535]> : tensor<2xui16>\n  \
        return %a, %b, %c : tensor<2xui64>, tensor<2xi16>, tensor<2xui16>\n}\n";
    let generic = "func.func @main() -> (tensor<2xui64>, tensor<2xi16>, tensor<2xui16>) {\n  \
        %a = \"stablehlo.constant\"() <{value = dense<[18446744073709551615, 9223372036854775808]> : tensor<2xui64>}> : () -> tensor<2xui64>\n  \
        %b = \"stablehlo.constant\"() <{value = dense<[-32768, 32767]> : tensor<2xi16>}> : () -> tensor<2xi16>\n  \
        %c = \"stablehlo.constant\"() <{value = dense<[0, 65535]> : tensor<2xui16>}> : () -> tensor<2xui16>\n  \
        \"func.return\"(%a, %b, %c) : (tensor<2xui64>, tensor<2xi16>, tensor<2xui16>) -> ()\n}\n";
    for src in [pretty, generic] {
        let m = round_trips(src);
        let printed = ir::print::print_module(&m);
        assert!(
            printed.contains("18446744073709551615, 9223372036854775808"),
            "{printed}"
        );
        assert!(printed.contains("tensor<2xi16>") && printed.contains("tensor<2xui16>"));
        let out = eval_func::<Ieee>(&m, "main", vec![], &opts())
            .unwrap()
            .outputs;
        assert_eq!(ints(&out[0]), vec![-1, i64::MIN]);
        assert_eq!(ints(&out[1]), vec![-32768, 32767]);
        assert_eq!(ints(&out[2]), vec![0, 65535]);
        assert_eq!(out[2].elem(), ElemType::UI16);
    }
    // Out of range for the type: rejected, not wrapped.
    for bad in [
        "dense<18446744073709551616> : tensor<ui64>",
        "dense<65536> : tensor<ui16>",
        "dense<-32769> : tensor<i16>",
    ] {
        let ty = bad.split(": ").nth(1).unwrap();
        let src = format!(
            "func.func @main() -> {ty} {{\n  %a = stablehlo.constant {bad}\n  return %a : {ty}\n}}\n"
        );
        let ok = ir::parse::parse_module(&src, "t.mlir")
            .map(|m| ir::verify_module(&m).is_ok())
            .unwrap_or(false);
        assert!(!ok, "{bad} was accepted");
    }
}

#[test]
fn i16_hex_blob_sign_extends() {
    // dense<"0x…"> is little-endian: 0xFFFF is -1 as i16, 65535 as ui16.
    let src = "func.func @main() -> (tensor<i16>, tensor<ui16>) {\n  \
        %a = stablehlo.constant dense<\"0xFFFF\"> : tensor<i16>\n  \
        %b = stablehlo.constant dense<\"0xFFFF\"> : tensor<ui16>\n  \
        return %a, %b : tensor<i16>, tensor<ui16>\n}\n";
    let out = run(src);
    assert_eq!(ints(&out[0]), vec![-1]);
    assert_eq!(ints(&out[1]), vec![65535]);
}
