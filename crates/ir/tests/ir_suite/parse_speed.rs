//! Parse speed of large dense constants (real exports carry their weights as
//! one-line `dense<[…]>` literals or hex blobs). Ignored by default — a
//! timing, printed, not asserted:
//! `cargo test -p ir --test ir_suite parse_speed -- --ignored --nocapture`.

use std::time::Instant;

/// A one-line f32 constant of about `mb` MB, JAX's `%e` spelling, as a module.
fn one_line_constant(mb: usize) -> (String, usize) {
    let per = "-1.234567e-01, ".len();
    let n = mb * 1_000_000 / per;
    let mut body = String::with_capacity(n * per + 200);
    body.push_str("func.func @main() -> tensor<");
    body.push_str(&format!("{n}xf32> {{\n  %0 = stablehlo.constant dense<["));
    let mut s = 0x2545_F491u32;
    for i in 0..n {
        s = s.wrapping_mul(1_664_525).wrapping_add(1_013_904_223);
        let mant = 1.0 + f64::from(s >> 8) / f64::from(1u32 << 24) * 8.999_999;
        let sign = if s & 1 == 0 { "-" } else { "" };
        if i > 0 {
            body.push_str(", ");
        }
        body.push_str(&format!("{sign}{mant:.6}e-{:02}", s % 20));
    }
    body.push_str(&format!(
        "]> : tensor<{n}xf32>\n  return %0 : tensor<{n}xf32>\n}}\n"
    ));
    (body, n)
}

fn hex_constant(mb: usize) -> (String, usize) {
    let n = mb * 1_000_000 / 8;
    let mut body =
        format!("func.func @main() -> tensor<{n}xf32> {{\n  %0 = stablehlo.constant dense<\"0x");
    for i in 0..n {
        body.push_str(&format!("{:08X}", (i as f32 * 0.5).to_bits().swap_bytes()));
    }
    body.push_str(&format!(
        "\"> : tensor<{n}xf32>\n  return %0 : tensor<{n}xf32>\n}}\n"
    ));
    (body, n)
}

/// This thread's CPU time in seconds (Linux: /proc/thread-self/schedstat),
/// so a busy shared machine does not count against the parser.
fn cpu_seconds() -> Option<f64> {
    let s = std::fs::read_to_string("/proc/thread-self/schedstat").ok()?;
    let ns: f64 = s.split_whitespace().next()?.parse().ok()?;
    Some(ns / 1e9)
}

fn time(what: &str, text: &str, n: usize) {
    let c0 = cpu_seconds();
    let t0 = Instant::now();
    let m = ir::parse::parse_module(text, "big.mlir").expect("parses");
    let parse = t0.elapsed().as_secs_f64();
    let cpu = c0.and_then(|c| Some(cpu_seconds()? - c));
    let t1 = Instant::now();
    ir::verify::verify_module(&m).expect("verifies");
    let verify = t1.elapsed().as_secs_f64();
    let mb = text.len() as f64 / 1e6;
    let on_cpu = cpu.map_or(String::new(), |c| {
        format!(" (CPU time {c:.3} s = {:.0} MB/s)", mb / c)
    });
    println!(
        "{what}: {mb:.1} MB, {n} elements: parse {parse:.3} s wall = {:.0} MB/s{on_cpu}; \
         verify {verify:.3} s",
        mb / parse
    );
}

#[test]
#[ignore = "a timing; run with --ignored --nocapture"]
fn dense_constant_parse_speed() {
    for mb in [10, 50] {
        let (text, n) = one_line_constant(mb);
        time("decimal list", &text, n);
    }
    let (text, n) = hex_constant(50);
    time("hex blob", &text, n);
}
