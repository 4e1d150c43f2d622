//! The text of the extended elementwise and CHLO ops as jax 0.10.2 prints it
//! (pretty form, `as_text()`, and the generic form of `get_asm(
//! print_generic_op_form=True)`): both parse to the same module, which
//! verifies, prints back to text that parses to it again, and prints stably.
//! Ill-typed uses are rejected by the result-type rules, and the ops certgrad
//! refuses (custom_call, the collectives and host transfers, …) give
//! "not supported: <op> at <file>:<line>:<col>".

use ir::parse::parse_module;
use ir::print::print_module;
use ir::{verify_module, OpKind};

/// A function around `body` (which returns `%r…` itself).
fn func(params: &str, results: &str, body: &str) -> String {
    format!(
        "module @jit_f attributes {{mhlo.num_partitions = 1 : i32}} {{\n  func.func public @main({params}) -> ({results}) {{\n{body}\n  }}\n}}\n"
    )
}

const PARAMS: &str = "%arg0: tensor<4xf32>, %arg1: tensor<4xi32>, %arg2: tensor<2xf32>";
const RESULTS: &str = "tensor<4xf32>, tensor<2xf32>, tensor<2xi32>, tensor<4xi32>, tensor<4xi1>, \
                       tensor<4xf32>, tensor<4xf32>, tensor<2x4xui8>, tensor<i32>, tensor<4xi1>";

/// Every new op, pretty form, as JAX prints it (the chlo ops with `: T -> R`).
const PRETTY: &str = r#"    %0 = chlo.erf_inv %arg0 : tensor<4xf32> -> tensor<4xf32>
    %1 = chlo.polygamma %arg0, %arg0 : tensor<4xf32>, tensor<4xf32> -> tensor<4xf32>
    %2 = stablehlo.add %0, %1 : tensor<4xf32>
    %3 = stablehlo.tan %arg0 : tensor<4xf32>
    %4 = stablehlo.atan2 %arg0, %3 : tensor<4xf32>
    %5 = chlo.next_after %arg0, %4 : tensor<4xf32>, tensor<4xf32> -> tensor<4xf32>
    %6 = chlo.bessel_i1e %5 : tensor<4xf32> -> tensor<4xf32>
    %7 = chlo.lgamma %6 : tensor<4xf32> -> tensor<4xf32>
    %8 = chlo.digamma %7 : tensor<4xf32> -> tensor<4xf32>
    %9 = chlo.zeta %8, %2 : tensor<4xf32>, tensor<4xf32> -> tensor<4xf32>
    %10 = chlo.sinh %9 : tensor<4xf32> -> tensor<4xf32>
    %11 = chlo.cosh %10 : tensor<4xf32> -> tensor<4xf32>
    %12 = chlo.asin %11 : tensor<4xf32> -> tensor<4xf32>
    %13 = chlo.acos %12 : tensor<4xf32> -> tensor<4xf32>
    %14 = chlo.atan %13 : tensor<4xf32> -> tensor<4xf32>
    %15 = chlo.asinh %14 : tensor<4xf32> -> tensor<4xf32>
    %16 = chlo.acosh %15 : tensor<4xf32> -> tensor<4xf32>
    %17 = chlo.atanh %16 : tensor<4xf32> -> tensor<4xf32>
    %18 = chlo.tan %17 : tensor<4xf32> -> tensor<4xf32>
    %values, %indices = chlo.top_k(%18, k = 2) : tensor<4xf32> -> (tensor<2xf32>, tensor<2xi32>)
    %19 = stablehlo.shift_right_arithmetic %arg1, %arg1 : tensor<4xi32>
    %20 = stablehlo.shift_left %19, %arg1 : tensor<4xi32>
    %21 = stablehlo.shift_right_logical %20, %arg1 : tensor<4xi32>
    %22 = stablehlo.count_leading_zeros %21 : tensor<4xi32>
    %23 = stablehlo.popcnt %22 : tensor<4xi32>
    %24 = stablehlo.bitcast_convert %arg0 : (tensor<4xf32>) -> tensor<4xi32>
    %25 = stablehlo.add %23, %24 : tensor<4xi32>
    %26 = stablehlo.is_finite %arg0 : (tensor<4xf32>) -> tensor<4xi1>
    %27 = stablehlo.reduce_precision %arg0, format = e5m10 : tensor<4xf32>
    %28 = stablehlo.round_nearest_afz %arg0 : tensor<4xf32>
    %29 = stablehlo.bitcast_convert %arg2 : (tensor<2xf32>) -> tensor<2x4xui8>
    %30 = stablehlo.get_dimension_size %arg0, dim = 0 : (tensor<4xf32>) -> tensor<i32>
    %31 = chlo.is_inf %arg0 : tensor<4xf32> -> tensor<4xi1>
    %32 = chlo.is_neg_inf %arg0 : tensor<4xf32> -> tensor<4xi1>
    %33 = chlo.is_pos_inf %arg0 : tensor<4xf32> -> tensor<4xi1>
    %34 = stablehlo.or %31, %32 : tensor<4xi1>
    %35 = stablehlo.or %34, %33 : tensor<4xi1>
    return %17, %values, %indices, %25, %26, %27, %28, %29, %30, %35 : tensor<4xf32>, tensor<2xf32>, tensor<2xi32>, tensor<4xi32>, tensor<4xi1>, tensor<4xf32>, tensor<4xf32>, tensor<2x4xui8>, tensor<i32>, tensor<4xi1>"#;

/// The same ops in the generic form MLIR prints.
const GENERIC: &str = r#"    %0 = "chlo.erf_inv"(%arg0) : (tensor<4xf32>) -> tensor<4xf32>
    %1 = "chlo.polygamma"(%arg0, %arg0) : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
    %2 = "stablehlo.add"(%0, %1) : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
    %3 = "stablehlo.tan"(%arg0) : (tensor<4xf32>) -> tensor<4xf32>
    %4 = "stablehlo.atan2"(%arg0, %3) : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
    %5 = "chlo.next_after"(%arg0, %4) : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
    %6 = "chlo.bessel_i1e"(%5) : (tensor<4xf32>) -> tensor<4xf32>
    %7 = "chlo.lgamma"(%6) : (tensor<4xf32>) -> tensor<4xf32>
    %8 = "chlo.digamma"(%7) : (tensor<4xf32>) -> tensor<4xf32>
    %9 = "chlo.zeta"(%8, %2) : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
    %10 = "chlo.sinh"(%9) : (tensor<4xf32>) -> tensor<4xf32>
    %11 = "chlo.cosh"(%10) : (tensor<4xf32>) -> tensor<4xf32>
    %12 = "chlo.asin"(%11) : (tensor<4xf32>) -> tensor<4xf32>
    %13 = "chlo.acos"(%12) : (tensor<4xf32>) -> tensor<4xf32>
    %14 = "chlo.atan"(%13) : (tensor<4xf32>) -> tensor<4xf32>
    %15 = "chlo.asinh"(%14) : (tensor<4xf32>) -> tensor<4xf32>
    %16 = "chlo.acosh"(%15) : (tensor<4xf32>) -> tensor<4xf32>
    %17 = "chlo.atanh"(%16) : (tensor<4xf32>) -> tensor<4xf32>
    %18 = "chlo.tan"(%17) : (tensor<4xf32>) -> tensor<4xf32>
    %tk:2 = "chlo.top_k"(%18) <{k = 2 : i64}> : (tensor<4xf32>) -> (tensor<2xf32>, tensor<2xi32>)
    %19 = "stablehlo.shift_right_arithmetic"(%arg1, %arg1) : (tensor<4xi32>, tensor<4xi32>) -> tensor<4xi32>
    %20 = "stablehlo.shift_left"(%19, %arg1) : (tensor<4xi32>, tensor<4xi32>) -> tensor<4xi32>
    %21 = "stablehlo.shift_right_logical"(%20, %arg1) : (tensor<4xi32>, tensor<4xi32>) -> tensor<4xi32>
    %22 = "stablehlo.count_leading_zeros"(%21) : (tensor<4xi32>) -> tensor<4xi32>
    %23 = "stablehlo.popcnt"(%22) : (tensor<4xi32>) -> tensor<4xi32>
    %24 = "stablehlo.bitcast_convert"(%arg0) : (tensor<4xf32>) -> tensor<4xi32>
    %25 = "stablehlo.add"(%23, %24) : (tensor<4xi32>, tensor<4xi32>) -> tensor<4xi32>
    %26 = "stablehlo.is_finite"(%arg0) : (tensor<4xf32>) -> tensor<4xi1>
    %27 = "stablehlo.reduce_precision"(%arg0) <{exponent_bits = 5 : i32, mantissa_bits = 10 : i32}> : (tensor<4xf32>) -> tensor<4xf32>
    %28 = "stablehlo.round_nearest_afz"(%arg0) : (tensor<4xf32>) -> tensor<4xf32>
    %29 = "stablehlo.bitcast_convert"(%arg2) : (tensor<2xf32>) -> tensor<2x4xui8>
    %30 = "stablehlo.get_dimension_size"(%arg0) <{dimension = 0 : i64}> : (tensor<4xf32>) -> tensor<i32>
    %31 = "chlo.is_inf"(%arg0) : (tensor<4xf32>) -> tensor<4xi1>
    %32 = "chlo.is_neg_inf"(%arg0) : (tensor<4xf32>) -> tensor<4xi1>
    %33 = "chlo.is_pos_inf"(%arg0) : (tensor<4xf32>) -> tensor<4xi1>
    %34 = "stablehlo.or"(%31, %32) : (tensor<4xi1>, tensor<4xi1>) -> tensor<4xi1>
    %35 = "stablehlo.or"(%34, %33) : (tensor<4xi1>, tensor<4xi1>) -> tensor<4xi1>
    "func.return"(%17, %tk#0, %tk#1, %25, %26, %27, %28, %29, %30, %35) : (tensor<4xf32>, tensor<2xf32>, tensor<2xi32>, tensor<4xi32>, tensor<4xi1>, tensor<4xf32>, tensor<4xf32>, tensor<2x4xui8>, tensor<i32>, tensor<4xi1>) -> ()"#;

/// Every name the new ops add, so a test can say none was left out.
const NEW_NAMES: [&str; 31] = [
    "chlo.erf_inv",
    "chlo.polygamma",
    "stablehlo.tan",
    "stablehlo.atan2",
    "chlo.next_after",
    "chlo.bessel_i1e",
    "chlo.lgamma",
    "chlo.digamma",
    "chlo.zeta",
    "chlo.sinh",
    "chlo.cosh",
    "chlo.asin",
    "chlo.acos",
    "chlo.atan",
    "chlo.asinh",
    "chlo.acosh",
    "chlo.atanh",
    "chlo.tan",
    "chlo.top_k",
    "stablehlo.shift_right_arithmetic",
    "stablehlo.shift_left",
    "stablehlo.shift_right_logical",
    "stablehlo.count_leading_zeros",
    "stablehlo.popcnt",
    "stablehlo.bitcast_convert",
    "stablehlo.is_finite",
    "stablehlo.reduce_precision",
    "stablehlo.round_nearest_afz",
    "stablehlo.get_dimension_size",
    "chlo.is_inf",
    "chlo.is_neg_inf",
];

fn parse(src: &str) -> ir::Module {
    let m = parse_module(src, "elementwise_chlo.mlir").unwrap_or_else(|e| panic!("{e}\n{src}"));
    verify_module(&m).unwrap_or_else(|e| panic!("{e}\n{src}"));
    m
}

#[test]
fn jax_pretty_and_generic_forms_parse_to_the_same_module() {
    let pretty = parse(&func(PARAMS, RESULTS, PRETTY));
    let generic = parse(&func(PARAMS, RESULTS, GENERIC));
    assert!(pretty == generic, "pretty and generic forms differ");
    let names: Vec<&str> = pretty.funcs[0]
        .body
        .ops
        .iter()
        .map(|op| op.kind.name())
        .collect();
    for n in NEW_NAMES.iter().chain(&["chlo.is_pos_inf"]) {
        assert!(names.contains(n), "{n} missing from the fixture");
    }
}

#[test]
fn printed_text_parses_back_and_prints_stably() {
    let m = parse(&func(PARAMS, RESULTS, PRETTY));
    let text = print_module(&m);
    let again = parse(&text);
    assert!(again == m, "parse(print(m)) != m\n{text}");
    assert_eq!(print_module(&again), text);
    // The spellings JAX uses come back out (value names aside: the printer
    // numbers them afresh).
    let lines: Vec<String> = text.lines().map(anonymous).collect();
    for line in [
        "chlo.erf_inv %arg0 : tensor<4xf32> -> tensor<4xf32>",
        "chlo.polygamma %arg0, %arg0 : tensor<4xf32>, tensor<4xf32> -> tensor<4xf32>",
        "chlo.top_k(%18, k = 2) : tensor<4xf32> -> (tensor<2xf32>, tensor<2xi32>)",
        "stablehlo.is_finite %arg0 : (tensor<4xf32>) -> tensor<4xi1>",
        "stablehlo.reduce_precision %arg0, format = e5m10 : tensor<4xf32>",
        "stablehlo.bitcast_convert %arg2 : (tensor<2xf32>) -> tensor<2x4xui8>",
        "stablehlo.get_dimension_size %arg0, dim = 0 : (tensor<4xf32>) -> tensor<i32>",
        "stablehlo.shift_left %19, %arg1 : tensor<4xi32>",
        "chlo.is_inf %arg0 : tensor<4xf32> -> tensor<4xi1>",
        "stablehlo.tan %arg0 : tensor<4xf32>",
        "chlo.tan %17 : tensor<4xf32> -> tensor<4xf32>",
    ] {
        let line = anonymous(line);
        let found = lines.iter().any(|l| {
            l.split_once(" = ")
                .is_some_and(|(_, rhs)| rhs.trim_end() == line)
        });
        assert!(found, "printed text lacks `{line}`:\n{text}");
    }
}

/// `text` with every value name `%x` shortened to `%`.
fn anonymous(text: &str) -> String {
    let mut out = String::new();
    let mut in_name = false;
    for c in text.chars() {
        if c == '%' {
            in_name = true;
            out.push(c);
        } else if in_name && (c.is_ascii_alphanumeric() || c == '_' || c == '#') {
            continue;
        } else {
            in_name = false;
            out.push(c);
        }
    }
    out
}

/// Op by op, the generic spelling (every attribute in the properties
/// dictionary) parses to the same op kind as its pretty twin.
#[test]
fn each_generic_op_matches_its_pretty_twin() {
    let pretty_lines: Vec<&str> = PRETTY.lines().collect();
    let generic_lines: Vec<&str> = GENERIC.lines().collect();
    assert_eq!(pretty_lines.len(), generic_lines.len());
    let p = parse(&func(PARAMS, RESULTS, PRETTY));
    let g = parse(&func(PARAMS, RESULTS, GENERIC));
    for (i, (a, b)) in p.funcs[0]
        .body
        .ops
        .iter()
        .zip(&g.funcs[0].body.ops)
        .enumerate()
    {
        assert_eq!(
            a.kind, b.kind,
            "op {i}: `{}` vs `{}`",
            pretty_lines[i], generic_lines[i]
        );
        assert_eq!(a.results.len(), b.results.len(), "op {i}");
    }
}

fn type_error(body: &str, params: &str, results: &str) -> String {
    let src = func(params, results, body);
    match parse_module(&src, "bad.mlir") {
        Err(e) => e.to_string(),
        Ok(m) => match verify_module(&m) {
            Err(e) => e.to_string(),
            Ok(()) => panic!("accepted an ill-typed module:\n{src}"),
        },
    }
}

#[test]
fn ill_typed_uses_are_rejected_with_the_reason() {
    let cases = [
        (
            "    %r = stablehlo.is_finite %arg0 : (tensor<4xi32>) -> tensor<4xi1>\n    return %r : tensor<4xi1>",
            "%arg0: tensor<4xi32>",
            "tensor<4xi1>",
            "operand element type i32 not allowed",
        ),
        (
            "    %r = stablehlo.popcnt %arg0 : tensor<4xf32>\n    return %r : tensor<4xf32>",
            "%arg0: tensor<4xf32>",
            "tensor<4xf32>",
            "operand element type f32 not allowed",
        ),
        (
            "    %r = stablehlo.shift_left %arg0, %arg0 : tensor<4xi1>\n    return %r : tensor<4xi1>",
            "%arg0: tensor<4xi1>",
            "tensor<4xi1>",
            "operand element type i1 not allowed",
        ),
        (
            "    %r = stablehlo.atan2 %arg0, %arg0 : tensor<4xi32>\n    return %r : tensor<4xi32>",
            "%arg0: tensor<4xi32>",
            "tensor<4xi32>",
            "operand element type i32 not allowed",
        ),
        (
            "    %r = stablehlo.bitcast_convert %arg0 : (tensor<4xf32>) -> tensor<4xui8>\n    return %r : tensor<4xui8>",
            "%arg0: tensor<4xf32>",
            "tensor<4xui8>",
            "does not match [4, 4]",
        ),
        (
            "    %r = stablehlo.bitcast_convert %arg0 : (tensor<4xf32>) -> tensor<2xf64>\n    return %r : tensor<2xf64>",
            "%arg0: tensor<4xf32>",
            "tensor<2xf64>",
            "must end in a dimension of 2",
        ),
        (
            "    %v, %i = chlo.top_k(%arg0, k = 5) : tensor<4xf32> -> (tensor<5xf32>, tensor<5xi32>)\n    return %v : tensor<5xf32>",
            "%arg0: tensor<4xf32>",
            "tensor<5xf32>",
            "k = 5 out of range for a last dimension of 4",
        ),
        (
            "    %r = stablehlo.get_dimension_size %arg0, dim = 1 : (tensor<4xf32>) -> tensor<i32>\n    return %r : tensor<i32>",
            "%arg0: tensor<4xf32>",
            "tensor<i32>",
            "dimension 1 out of range for operand of rank 1",
        ),
        (
            "    %r = stablehlo.reduce_precision %arg0, format = e0m3 : tensor<4xf32>\n    return %r : tensor<4xf32>",
            "%arg0: tensor<4xf32>",
            "tensor<4xf32>",
            "exponent_bits 0 must be in 1..=62",
        ),
        (
            "    %r = stablehlo.reduce_precision %arg0, format = f8m3 : tensor<4xf32>\n    return %r : tensor<4xf32>",
            "%arg0: tensor<4xf32>",
            "tensor<4xf32>",
            "expected a float format such as e8m7, found f8m3",
        ),
        (
            "    %r = chlo.is_inf %arg0 : tensor<4xf32> -> tensor<4xf32>\n    return %r : tensor<4xf32>",
            "%arg0: tensor<4xf32>",
            "tensor<4xf32>",
            "does not match inferred tensor<4xi1>",
        ),
    ];
    for (body, params, results, want) in cases {
        let e = type_error(body, params, results);
        assert!(e.contains(want), "expected `{want}` in: {e}\n{body}");
    }
}

#[test]
fn rejected_ops_say_not_supported_with_their_position() {
    let pretty = [
        ("%0 = stablehlo.custom_call @Sharding(%arg0) {backend_config = \"\"} : (tensor<4xf32>) -> tensor<4xf32>", "stablehlo.custom_call"),
        ("%0 = stablehlo.all_gather %arg0, dim = 0 : (tensor<4xf32>) -> tensor<8xf32>", "stablehlo.all_gather"),
        ("%0 = stablehlo.after_all : !stablehlo.token", "stablehlo.after_all"),
        ("%0:2 = stablehlo.rng_bit_generator %arg1, algorithm = THREE_FRY : (tensor<2xui64>) -> (tensor<2xui64>, tensor<4xui32>)", "stablehlo.rng_bit_generator"),
    ];
    for (line, name) in pretty {
        let src = format!(
            "module {{\n  func.func @main(%arg0: tensor<4xf32>, %arg1: tensor<2xui64>) -> tensor<4xf32> {{\n    {line}\n    return %arg0 : tensor<4xf32>\n  }}\n}}\n"
        );
        let e = parse_module(&src, "prog.mlir").expect_err(name);
        assert!(e.is_not_supported(), "{e}");
        assert_eq!(
            e.to_string(),
            format!(
                "not supported: {name} at prog.mlir:3:{}",
                line.find(name).unwrap() + 5
            )
        );
    }
    // The generic form of every rejected op, one per line, each at its own position.
    for (k, name) in OpKind::REJECTED_NAMES.iter().enumerate() {
        let pad = " ".repeat(k % 3);
        let src = format!(
            "func.func @main(%arg0: tensor<4xf32>) -> tensor<4xf32> {{\n\n{pad}  %0 = \"{name}\"(%arg0) {{x = 1 : i64}} : (tensor<4xf32>) -> tensor<4xf32>\n  return %arg0 : tensor<4xf32>\n}}\n"
        );
        let e = parse_module(&src, "g.mlir").expect_err(name);
        let col = pad.len() + 8;
        assert_eq!(
            e.to_string(),
            format!("not supported: {name} at g.mlir:3:{col}")
        );
    }
}

#[test]
fn triangular_solve_generic_form_round_trips() {
    let src = func(
        "%arg0: tensor<2x3x3xf32>, %arg1: tensor<2x3x4xf32>",
        "tensor<2x3x4xf32>",
        "    %0 = \"stablehlo.triangular_solve\"(%arg0, %arg1) <{left_side = true, lower = false, transpose_a = #stablehlo<transpose ADJOINT>, unit_diagonal = true}> : (tensor<2x3x3xf32>, tensor<2x3x4xf32>) -> tensor<2x3x4xf32>\n    return %0 : tensor<2x3x4xf32>",
    );
    let m = parse(&src);
    assert_eq!(
        m.funcs[0].body.ops[0].kind,
        OpKind::TriangularSolve {
            left_side: true,
            lower: false,
            unit_diagonal: true,
            transpose_a: ir::TransposeA::Adjoint,
        }
    );
    let text = print_module(&m);
    assert!(
        text.contains("transpose_a = #stablehlo<transpose ADJOINT>"),
        "{text}"
    );
    assert!(parse(&text) == m);
    // b must have M rows on the left side.
    let bad = func(
        "%arg0: tensor<3x3xf32>, %arg1: tensor<4x3xf32>",
        "tensor<4x3xf32>",
        "    %0 = \"stablehlo.triangular_solve\"(%arg0, %arg1) <{left_side = true, lower = true, transpose_a = #stablehlo<transpose NO_TRANSPOSE>, unit_diagonal = false}> : (tensor<3x3xf32>, tensor<4x3xf32>) -> tensor<4x3xf32>\n    return %0 : tensor<4x3xf32>",
    );
    let e = verify_module(&parse_module(&bad, "t.mlir").unwrap()).unwrap_err();
    assert!(e.to_string().contains("must have 3 rows"), "{e}");
}

#[test]
fn mulhi_chlo_and_generic_forms_agree() {
    let t = "tensor<3xi32>";
    let pretty = parse(&func(
        &format!("%arg0: {t}, %arg1: {t}"),
        t,
        &format!("    %0 = chlo.mulhi %arg0, %arg1 : {t}, {t} -> {t}\n    return %0 : {t}"),
    ));
    let generic = parse(&func(
        &format!("%arg0: {t}, %arg1: {t}"),
        t,
        &format!("    %0 = \"chlo.mulhi\"(%arg0, %arg1) : ({t}, {t}) -> {t}\n    return %0 : {t}"),
    ));
    assert!(pretty == generic);
    let text = print_module(&pretty);
    assert!(
        text.contains(&format!("chlo.mulhi %arg0, %arg1 : {t}, {t} -> {t}")),
        "{text}"
    );
    assert!(parse(&text) == pretty);
}

/// An unknown op keeps the "expected a supported op (…)" message, which lists
/// the new names too.
#[test]
fn unknown_ops_list_the_new_names() {
    let e = parse_module(
        "func.func @main(%arg0: tensor<4xf32>) -> tensor<4xf32> {\n  %0 = chlo.bogus %arg0 : tensor<4xf32>\n  return %0 : tensor<4xf32>\n}\n",
        "u.mlir",
    )
    .expect_err("unknown op");
    assert!(!e.is_not_supported());
    for n in NEW_NAMES {
        assert!(e.expected.contains(n), "{n} not listed: {}", e.expected);
    }
}
