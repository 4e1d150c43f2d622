//! Sizes that cannot be allocated or do not fit: every case must end in an
//! error naming the op and its place (never an overflow panic), and its
//! small twin must still pass.

use ir::limits::{check_module_with, SizeError};
use ir::parse::parse_module;
use ir::verify::verify_module;

fn module(src: &str) -> ir::Module {
    let m = parse_module(src, "t.mlir").expect("parses");
    verify_module(&m).expect("verifies");
    m
}

fn unary(arg: &str, res: &str, body: &str) -> String {
    format!("func.func @main({arg}) -> {res} {{\n  %0 = {body}\n  return %0 : {res}\n}}\n")
}

fn constant(shape: &str) -> String {
    let t = format!("tensor<{shape}xf32>");
    format!(
        "func.func @main() -> {t} {{\n  %0 = stablehlo.constant dense<1.0> : {t}\n  return %0 : {t}\n}}\n"
    )
}

fn refused(src: &str, limit: u64) -> SizeError {
    *check_module_with(&module(src), None, limit).expect_err("over the limit")
}

const GIB16: u64 = 16 << 30;

#[test]
fn a_constant_whose_bytes_overflow_usize_is_refused_by_name() {
    // 3037000499^2 elements fit in i64; their 4-byte count does not fit in u64.
    // The place is the op's: line 2, column 3 (`%0 = …`).
    let e = refused(&constant("3037000499x3037000499"), GIB16);
    assert_eq!((e.op, e.loc), ("stablehlo.constant", Some((2, 3))));
    assert_eq!(e.elements, 3_037_000_499u128 * 3_037_000_499);
    assert_eq!(e.bytes, 4 * 3_037_000_499u128 * 3_037_000_499);
    let text = e.to_string();
    assert!(
        text.contains("more than this machine can address"),
        "{text}"
    );
    assert!(
        text.starts_with(
            "func @main, line 2:3: stablehlo.constant: tensor<3037000499x3037000499xf32> needs"
        ),
        "{text}"
    );
    assert!(check_module_with(&module(&constant("3037x3037")), None, GIB16).is_ok());
}

#[test]
fn a_huge_splat_broadcast_and_pad_are_over_the_limit() {
    let e = refused(&constant("100000000000"), GIB16);
    assert_eq!(e.bytes, 400_000_000_000);
    assert!(
        e.to_string().contains("400.0 GB (400000000000 bytes)"),
        "{e}"
    );
    assert!(
        e.to_string().contains("over the memory limit of 17.2 GB"),
        "{e}"
    );
    let b = unary(
        "%a: tensor<f32>",
        "tensor<1000000x1000000xf32>",
        "stablehlo.broadcast_in_dim %a, dims = [] : (tensor<f32>) -> tensor<1000000x1000000xf32>",
    );
    let e = refused(&b, GIB16);
    assert_eq!(
        (e.op, e.bytes),
        ("stablehlo.broadcast_in_dim", 4_000_000_000_000)
    );
    let p = "func.func @main(%a: tensor<2xf32>, %p: tensor<f32>) -> tensor<4000000000002xf32> {\n  \
             %0 = stablehlo.pad %a, %p, low = [0], high = [4000000000000], interior = [0] : \
             (tensor<2xf32>, tensor<f32>) -> tensor<4000000000002xf32>\n  return %0 : tensor<4000000000002xf32>\n}\n";
    let e = refused(p, GIB16);
    assert_eq!((e.op, e.loc.map(|l| l.0)), ("stablehlo.pad", Some(2)));
    // The twins at a size that fits.
    let small = p
        .replace("4000000000000", "4")
        .replace("4000000000002", "6");
    assert!(check_module_with(&module(&small), None, GIB16).is_ok());
    // A limit is a limit: 64 bytes refuses a 16-element f32 tensor, not a 16-element i8.
    assert!(check_module_with(&module(&constant("16")), None, 64).is_ok());
    assert!(check_module_with(&module(&constant("17")), None, 64).is_err());
    // An evaluator's larger scalar counts: f32 data held as 16-byte duals.
    assert!(check_module_with(&module(&constant("16")), Some(16), 64).is_err());
}

#[test]
fn parameters_are_checked_too() {
    let src = unary(
        "%a: tensor<100000x100000xf32>",
        "tensor<100000x100000xf32>",
        "stablehlo.negate %a : tensor<100000x100000xf32>",
    );
    let e = refused(&src, 1 << 30);
    assert_eq!((e.op, e.loc), ("func.func", None));
}

fn verify_error(src: &str) -> String {
    let m = parse_module(src, "t.mlir").expect("parses");
    verify_module(&m).expect_err("refused").to_string()
}

#[test]
fn derived_dimensions_beyond_i64_are_errors_not_overflows() {
    // low + high overflows i64: before, `attempt to add with overflow` in infer.
    let pad = "func.func @main(%a: tensor<2xf32>, %p: tensor<f32>) -> tensor<4xf32> {\n  \
               %0 = stablehlo.pad %a, %p, low = [5000000000000000000], high = [5000000000000000000], \
               interior = [0] : (tensor<2xf32>, tensor<f32>) -> tensor<4xf32>\n  return %0 : tensor<4xf32>\n}\n";
    let e = verify_error(pad);
    assert!(
        e.contains("stablehlo.pad") && e.contains("beyond 2^63 - 1"),
        "{e}"
    );
    let t = "tensor<4611686018427387904xf32>";
    let concat = format!(
        "func.func @main(%a: {t}) -> {t} {{\n  %0 = stablehlo.concatenate %a, %a, dim = 0 : ({t}, {t}) -> {t}\n  return %0 : {t}\n}}\n"
    );
    let e = verify_error(&concat);
    assert!(
        e.contains("stablehlo.concatenate") && e.contains("beyond 2^63 - 1"),
        "{e}"
    );
    // A huge slice stride: (limit - start + stride - 1) overflowed before.
    let slice = unary(
        "%a: tensor<8xf32>",
        "tensor<1xf32>",
        "stablehlo.slice %a [0:8:9223372036854775807] : (tensor<8xf32>) -> tensor<1xf32>",
    );
    module(&slice);
    // The good twins.
    module(&pad.replace("5000000000000000000", "1"));
    let ok = "tensor<4xf32>";
    module(&format!(
        "func.func @main(%a: tensor<2xf32>) -> {ok} {{\n  %0 = stablehlo.concatenate %a, %a, dim = 0 : (tensor<2xf32>, tensor<2xf32>) -> {ok}\n  return %0 : {ok}\n}}\n"
    ));
}

/// `n` broadcasts of a scalar to 1024×1024 f32 (4 MiB each), all returned
/// (`keep`) or each consumed by the next add (a chain).
fn broadcasts(n: usize, keep: bool) -> String {
    let t = "tensor<1024x1024xf32>";
    let mut body =
        format!("  %0 = stablehlo.broadcast_in_dim %a, dims = [] : (tensor<f32>) -> {t}\n");
    for i in 1..n {
        if keep {
            body += &format!(
                "  %{i} = stablehlo.broadcast_in_dim %a, dims = [] : (tensor<f32>) -> {t}\n"
            );
        } else {
            body += &format!("  %{i} = stablehlo.add %{p}, %{p} : {t}\n", p = i - 1);
        }
    }
    let (vals, tys): (Vec<String>, Vec<&str>) = if keep {
        (0..n).map(|i| (format!("%{i}"), t)).unzip()
    } else {
        (vec![format!("%{}", n - 1)], vec![t])
    };
    format!(
        "func.func @main(%a: tensor<f32>) -> ({}) {{\n{body}  return {} : {}\n}}\n",
        tys.join(", "),
        vals.join(", "),
        tys.join(", ")
    )
}

const MIB4: u128 = 4 << 20;

#[test]
fn many_tensors_under_the_per_tensor_limit_are_refused_when_live_together() {
    use ir::limits::{check_peak_with, peak_live_bytes, SizeKind};
    let limit = 10 << 20;
    // Four 4 MiB tensors all live at the return: 16 MiB + the 4-byte parameter.
    let kept = module(&broadcasts(4, true));
    assert!(
        check_module_with(&kept, None, limit).is_ok(),
        "each tensor fits"
    );
    let peak = peak_live_bytes(&kept, "main", None).unwrap();
    assert_eq!(peak.bytes, 4 * MIB4 + 4);
    let e = *check_peak_with(&kept, None, limit).expect_err("16 MiB live > 10 MiB");
    assert_eq!(e.kind, SizeKind::PeakLive);
    // The peak falls at the fourth broadcast (line 5, column 3).
    assert_eq!((e.op, e.loc), ("stablehlo.broadcast_in_dim", Some((5, 3))));
    let text = e.to_string();
    assert!(text.contains("live at once"), "{text}");
    assert!(text.contains("--max-memory"), "{text}");
    // At 8 bytes per element (an f64 evaluator) the same program holds twice as much.
    assert_eq!(
        peak_live_bytes(&kept, "main", Some(8)).unwrap().bytes,
        8 * MIB4 + 8
    );
    // The twin: a chain of adds frees each input after its use — two live at most.
    let chain = module(&broadcasts(4, false));
    assert_eq!(
        peak_live_bytes(&chain, "main", None).unwrap().bytes,
        2 * MIB4 + 4
    );
    assert!(check_peak_with(&chain, None, limit).is_ok());
}

#[test]
fn a_callees_temporaries_count_at_the_call() {
    use ir::limits::peak_live_bytes;
    let t = "tensor<1024x1024xf32>";
    let src = format!(
        "func.func @main(%a: tensor<f32>) -> {t} {{\n  %0 = func.call @twice(%a) : (tensor<f32>) -> {t}\n  return %0 : {t}\n}}\n\
         func.func private @twice(%b: tensor<f32>) -> {t} {{\n  %0 = stablehlo.broadcast_in_dim %b, dims = [] : (tensor<f32>) -> {t}\n  %1 = stablehlo.add %0, %0 : {t}\n  return %1 : {t}\n}}\n"
    );
    let m = module(&src);
    // Inside @twice two 4 MiB tensors are live at once; the call's own result
    // is counted on top (a conservative overlap), beside the parameter.
    assert_eq!(
        peak_live_bytes(&m, "twice", None).unwrap().bytes,
        2 * MIB4 + 4
    );
    assert_eq!(
        peak_live_bytes(&m, "main", None).unwrap().bytes,
        3 * MIB4 + 4
    );
}
