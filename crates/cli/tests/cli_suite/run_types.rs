//! `certgrad run` through the built binary keeps every tensor in its own
//! element type: f64 arguments and results travel as float64 .npy and are
//! computed in f64 (the native engine hands such a function to the typed
//! generic evaluator and says so), an f32 function gives the same bits on
//! the native plan and on `--generic`, and integer arguments of every width
//! (ui64 above 2⁶³, i16) are read and written in their own dtype. The native
//! plan's rewrites switch off by name (`--without-rewrite`), the function
//! unchanged.

use std::path::{Path, PathBuf};
use std::process::Command;

/// A version-1 .npy file of `descr` (numpy's dtype string) and `shape`
/// holding the little-endian bytes `data`.
fn write_npy(path: &Path, descr: &str, shape: &[usize], data: &[u8]) {
    let dims = match shape.len() {
        1 => format!("({},)", shape[0]),
        _ => format!(
            "({})",
            shape
                .iter()
                .map(|d| d.to_string())
                .collect::<Vec<_>>()
                .join(", ")
        ),
    };
    let mut header = format!("{{'descr': '{descr}', 'fortran_order': False, 'shape': {dims}, }}");
    while (10 + header.len() + 1) % 64 != 0 {
        header.push(' ');
    }
    header.push('\n');
    let mut bytes = b"\x93NUMPY\x01\x00".to_vec();
    bytes.extend_from_slice(&(header.len() as u16).to_le_bytes());
    bytes.extend_from_slice(header.as_bytes());
    bytes.extend_from_slice(data);
    std::fs::write(path, bytes).unwrap();
}

/// (descr, data bytes) of a version-1 .npy file.
fn read_npy(path: &Path) -> (String, Vec<u8>) {
    let bytes = std::fs::read(path).unwrap();
    assert_eq!(&bytes[..8], b"\x93NUMPY\x01\x00");
    let hlen = u16::from_le_bytes([bytes[8], bytes[9]]) as usize;
    let header = std::str::from_utf8(&bytes[10..10 + hlen]).unwrap();
    let descr = header
        .split("'descr': '")
        .nth(1)
        .unwrap()
        .split('\'')
        .next()
        .unwrap()
        .to_string();
    (descr, bytes[10 + hlen..].to_vec())
}

fn f64s(b: &[u8]) -> Vec<f64> {
    b.chunks_exact(8)
        .map(|w| f64::from_le_bytes(w.try_into().unwrap()))
        .collect()
}

fn f64_bytes(xs: &[f64]) -> Vec<u8> {
    xs.iter().flat_map(|x| x.to_le_bytes()).collect()
}

fn f32_bytes(xs: &[f32]) -> Vec<u8> {
    xs.iter().flat_map(|x| x.to_le_bytes()).collect()
}

fn temp_dir(tag: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("certgrad-run-types-{}-{tag}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// Runs `certgrad run` on `module` with `inputs` (.npy files in `dir`) and
/// `extra` flags; its stdout line.
fn run(dir: &Path, module: &str, inputs: &[&str], out: &str, extra: &[&str]) -> String {
    std::fs::write(dir.join("m.mlir"), module).unwrap();
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_certgrad"));
    cmd.arg("run").arg(dir.join("m.mlir")).arg("--inputs");
    for i in inputs {
        cmd.arg(dir.join(i));
    }
    cmd.arg("--out").arg(dir.join(out)).args(extra);
    let o = cmd.output().unwrap();
    let stdout = String::from_utf8_lossy(&o.stdout).to_string();
    assert!(
        o.status.success(),
        "run failed: {stdout}{}",
        String::from_utf8_lossy(&o.stderr)
    );
    stdout
}

const F64: &str = "func.func public @main(%x: tensor<3xf64>) -> (tensor<3xf64>, tensor<f64>) {
  %one = stablehlo.constant dense<1.000000e+00> : tensor<3xf64>
  %y = stablehlo.multiply %x, %one : tensor<3xf64>
  %a = stablehlo.constant dense<1.000000e+04> : tensor<f64>
  %b = stablehlo.constant dense<1.000000e+01> : tensor<f64>
  %p = stablehlo.power %a, %b : tensor<f64>
  return %y, %p : tensor<3xf64>, tensor<f64>
}
";

#[test]
fn f64_functions_run_in_f64_on_both_paths() {
    let dir = temp_dir("f64");
    let x = [5.0001, 1e300, -0.0];
    write_npy(&dir.join("x.npy"), "<f8", &[3], &f64_bytes(&x));
    for (out, flags, how) in [
        ("native", &[][..], "generic typed evaluator: f64 tensors"),
        ("generic", &["--generic"][..], "generic typed evaluator"),
    ] {
        let line = run(&dir, F64, &["x.npy"], out, flags);
        assert!(line.contains(how), "{line}");
        let (d0, y) = read_npy(&dir.join(out).join("out_0.npy"));
        let (d1, p) = read_npy(&dir.join(out).join("out_1.npy"));
        assert_eq!((d0.as_str(), d1.as_str()), ("<f8", "<f8"));
        let bits = |v: &[f64]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
        // 5.0001 stays 5.0001 (not 5.000100135803223), 1e300 stays finite, −0 stays −0.
        assert_eq!(bits(&f64s(&y)), bits(&x), "{out}");
        // 10000^10 = 1e40, beyond f32's range.
        assert_eq!(f64s(&p), vec![1e40], "{out}");
    }
    std::fs::remove_dir_all(&dir).ok();
}

const F32: &str = "func.func public @main(%x: tensor<4xf32>, %y: tensor<4xf32>) -> (tensor<4xf32>, tensor<4xf32>, tensor<4xi1>) {
  %s = stablehlo.add %x, %y : tensor<4xf32>
  %m = stablehlo.multiply %s, %x : tensor<4xf32>
  %d = stablehlo.divide %m, %y : tensor<4xf32>
  %a = stablehlo.abs %d : tensor<4xf32>
  %q = stablehlo.sqrt %a : tensor<4xf32>
  %c = stablehlo.compare GT, %q, %x : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xi1>
  %mx = stablehlo.maximum %q, %y : tensor<4xf32>
  %r = stablehlo.select %c, %mx, %d : tensor<4xi1>, tensor<4xf32>
  return %r, %q, %c : tensor<4xf32>, tensor<4xf32>, tensor<4xi1>
}
";

#[test]
fn an_f32_function_gives_the_same_bits_native_and_generic() {
    let dir = temp_dir("f32");
    let x = [0.1f32, -3.7, 1.0e30, 7.25];
    let y = [0.2f32, 1.0e-3, 3.0e8, -0.0];
    write_npy(&dir.join("x.npy"), "<f4", &[4], &f32_bytes(&x));
    write_npy(&dir.join("y.npy"), "<f4", &[4], &f32_bytes(&y));
    let native = run(&dir, F32, &["x.npy", "y.npy"], "native", &[]);
    assert!(native.contains("native (exec plan)"), "{native}");
    let generic = run(&dir, F32, &["x.npy", "y.npy"], "generic", &["--generic"]);
    assert!(generic.contains("generic typed evaluator"), "{generic}");
    for i in 0..3 {
        let name = format!("out_{i}.npy");
        let a = read_npy(&dir.join("native").join(&name));
        let b = read_npy(&dir.join("generic").join(&name));
        assert_eq!(a, b, "output {i}");
    }
    // One element by hand: (0.1 + 0.2) · 0.1 / 0.2 in f32, each op rounded.
    let s = 0.1f32 + 0.2f32;
    let d = s * 0.1f32 / 0.2f32;
    let (_, q) = read_npy(&dir.join("generic").join("out_1.npy"));
    assert_eq!(
        f32::from_le_bytes(q[..4].try_into().unwrap()),
        d.abs().sqrt()
    );
    std::fs::remove_dir_all(&dir).ok();
}

const INTS: &str = "func.func public @main(%u: tensor<2xui64>, %h: tensor<2xi16>) -> (tensor<2xui64>, tensor<2xi16>) {
  %one = stablehlo.constant dense<1> : tensor<2xui64>
  %a = stablehlo.add %u, %one : tensor<2xui64>
  %k = stablehlo.constant dense<1> : tensor<2xi16>
  %b = stablehlo.add %h, %k : tensor<2xi16>
  return %a, %b : tensor<2xui64>, tensor<2xi16>
}
";

#[test]
fn integer_arguments_keep_their_dtype_and_wrap() {
    let dir = temp_dir("ints");
    let u: Vec<u8> = [u64::MAX, 1u64 << 63]
        .iter()
        .flat_map(|x| x.to_le_bytes())
        .collect();
    let h: Vec<u8> = [i16::MAX, -5i16]
        .iter()
        .flat_map(|x| x.to_le_bytes())
        .collect();
    write_npy(&dir.join("u.npy"), "<u8", &[2], &u);
    write_npy(&dir.join("h.npy"), "<i2", &[2], &h);
    for (out, flags) in [("native", &[][..]), ("generic", &["--generic"][..])] {
        run(&dir, INTS, &["u.npy", "h.npy"], out, flags);
        let (du, a) = read_npy(&dir.join(out).join("out_0.npy"));
        let (dh, b) = read_npy(&dir.join(out).join("out_1.npy"));
        assert_eq!((du.as_str(), dh.as_str()), ("<u8", "<i2"));
        let a: Vec<u64> = a
            .chunks_exact(8)
            .map(|w| u64::from_le_bytes(w.try_into().unwrap()))
            .collect();
        let b: Vec<i16> = b
            .chunks_exact(2)
            .map(|w| i16::from_le_bytes(w.try_into().unwrap()))
            .collect();
        // 2^64 − 1 + 1 wraps to 0; 2^63 + 1 stays unsigned; i16 max + 1 wraps.
        assert_eq!(a, vec![0, (1u64 << 63) + 1], "{out}");
        assert_eq!(b, vec![i16::MIN, -4], "{out}");
    }
    std::fs::remove_dir_all(&dir).ok();
}

/// Σ c and Σ (e + c) per feature: the second sum joins the loop `e + c`,
/// which stores over `c` beside the first sum (a residual block's backward).
const SUMS: &str = "func.func @main(%c: tensor<2x12xf32>, %e: tensor<2x12xf32>) -> (tensor<3xf32>, tensor<3xf32>) {
  %r2 = stablehlo.reshape %c : (tensor<2x12xf32>) -> tensor<2x3x2x2xf32>
  %z = stablehlo.constant dense<0.0> : tensor<f32>
  %sb = stablehlo.reduce(%r2 init: %z) applies stablehlo.add across dimensions = [0, 2, 3] : (tensor<2x3x2x2xf32>, tensor<f32>) -> tensor<3xf32>
  %d = stablehlo.add %e, %c : tensor<2x12xf32>
  %r3 = stablehlo.reshape %d : (tensor<2x12xf32>) -> tensor<2x3x2x2xf32>
  %sb2 = stablehlo.reduce(%r3 init: %z) applies stablehlo.add across dimensions = [0, 2, 3] : (tensor<2x3x2x2xf32>, tensor<f32>) -> tensor<3xf32>
  return %sb, %sb2 : tensor<3xf32>, tensor<3xf32>
}
";

/// Every rewrite of the native plan can be switched off by name (the
/// output line says which are off), each set computing the sums written by
/// hand; unknown names and the flag beside `--generic` are refused.
#[test]
fn rewrites_switched_off_by_name_compute_the_same_sums() {
    let dir = temp_dir("rewrites");
    let c: Vec<f32> = (0..24).map(|i| i as f32).collect();
    write_npy(&dir.join("c.npy"), "<f4", &[2, 12], &f32_bytes(&c));
    write_npy(
        &dir.join("e.npy"),
        "<f4",
        &[2, 12],
        &f32_bytes(&[100.0; 24]),
    );
    // Feature k of row n holds c[12n + 4k .. 12n + 4k + 4].
    let sb: Vec<f32> = (0..3)
        .map(|k| {
            (0..2)
                .flat_map(|n| (0..4).map(move |j| (12 * n + 4 * k + j) as f32))
                .sum()
        })
        .collect();
    assert_eq!(sb, [60.0, 92.0, 124.0]);
    for off in [
        &[][..],
        &["in_place"][..],
        &["sum_in_producer", "sibling_reductions"][..],
        &[
            "cse",
            "conv_bias",
            "conv_upsample",
            "dot_bias",
            "conv_moments",
        ][..],
    ] {
        let flags: Vec<&str> = off.iter().flat_map(|n| ["--without-rewrite", n]).collect();
        let line = run(&dir, SUMS, &["c.npy", "e.npy"], "out", &flags);
        if !off.is_empty() {
            assert!(line.contains(&format!("without {}", off[0])), "{line}");
        }
        let sums = |k: usize| -> Vec<f32> {
            let (_, b) = read_npy(&dir.join("out").join(format!("out_{k}.npy")));
            b.chunks_exact(4)
                .map(|w| f32::from_le_bytes(w.try_into().unwrap()))
                .collect()
        };
        assert_eq!(sums(0), sb, "Σc without {off:?}");
        let shifted: Vec<f32> = sb.iter().map(|s| s + 800.0).collect();
        assert_eq!(sums(1), shifted, "Σ(e + c) without {off:?}");
    }
    for (flags, says) in [
        (
            &["--without-rewrite", "inplace"][..],
            "unknown rewrite `inplace`",
        ),
        (
            &["--without-rewrite", "cse", "--generic"][..],
            "--generic runs no plan",
        ),
    ] {
        let o = Command::new(env!("CARGO_BIN_EXE_certgrad"))
            .arg("run")
            .arg(dir.join("m.mlir"))
            .args(["--inputs"])
            .arg(dir.join("c.npy"))
            .arg(dir.join("e.npy"))
            .arg("--out")
            .arg(dir.join("refused"))
            .args(flags)
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "{stderr}");
        assert!(stderr.contains(says), "{stderr}");
    }
    std::fs::remove_dir_all(&dir).ok();
}

/// A data-parallel pair: the sum of x over replicas 0 and 1, and 2·x.
const REPLICATED: &str =
    "func.func public @main(%x: tensor<2xf32>) -> (tensor<2xf32>, tensor<2xf32>) {
  %s = \"stablehlo.all_reduce\"(%x) <{replica_groups = dense<[[0, 1]]> : tensor<1x2xi64>}> ({
  ^bb0(%p: tensor<f32>, %q: tensor<f32>):
    %pq = stablehlo.add %p, %q : tensor<f32>
    stablehlo.return %pq : tensor<f32>
  }) : (tensor<2xf32>) -> tensor<2xf32>
  %d = stablehlo.add %x, %x : tensor<2xf32>
  return %s, %d : tensor<2xf32>, tensor<2xf32>
}
";

fn f32s(b: &[u8]) -> Vec<f32> {
    b.chunks_exact(4)
        .map(|w| f32::from_le_bytes(w.try_into().unwrap()))
        .collect()
}

/// `run --replicas 2`: each replica takes its own arguments (replica 0's
/// first) and writes its own outputs, the all_reduce summing over both, on
/// the native engine and on the replica evaluator alike; one set of
/// arguments is every replica's; any other count is refused, naming both.
#[test]
fn replicas_take_their_own_arguments_and_write_their_own_outputs() {
    let dir = temp_dir("replicas");
    write_npy(&dir.join("a.npy"), "<f4", &[2], &f32_bytes(&[1.0, 2.0]));
    write_npy(&dir.join("b.npy"), "<f4", &[2], &f32_bytes(&[10.0, 20.0]));
    let out = |name: &str, r: usize, k: usize| {
        let (descr, data) = read_npy(&dir.join(name).join(format!("replica_{r}/out_{k}.npy")));
        assert_eq!(descr, "<f4");
        f32s(&data)
    };
    for (name, flags) in [("native", &[][..]), ("generic", &["--generic"][..])] {
        let line = run(
            &dir,
            REPLICATED,
            &["a.npy", "b.npy"],
            name,
            &[&["--replicas", "2"], flags].concat(),
        );
        assert!(line.contains("2 outputs × 2 replicas"), "{line}");
        for r in 0..2 {
            assert_eq!(out(name, r, 0), [11.0, 22.0], "{name}, replica {r}");
        }
        assert_eq!(out(name, 0, 1), [2.0, 4.0], "{name}");
        assert_eq!(out(name, 1, 1), [20.0, 40.0], "{name}");
    }
    run(&dir, REPLICATED, &["a.npy"], "shared", &["--replicas", "2"]);
    assert_eq!(out("shared", 1, 0), [2.0, 4.0]);
    let o = Command::new(env!("CARGO_BIN_EXE_certgrad"))
        .arg("run")
        .arg(dir.join("m.mlir"))
        .arg("--inputs")
        .args(["a.npy", "b.npy", "a.npy"].map(|f| dir.join(f)))
        .arg("--out")
        .arg(dir.join("bad"))
        .args(["--replicas", "2"])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(
        err.contains("give 1 file (every") && err.contains("or 2") && err.contains("not 3"),
        "{err}"
    );
    std::fs::remove_dir_all(&dir).ok();
}
