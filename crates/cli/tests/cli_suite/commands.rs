//! `check`, `demo`, `eval` and `bound` through the built binary, each with a
//! real assertion on its output and exit status, and its failure where it
//! has one: `check` of a malformed file names file:line and exits 2; `eval`
//! scores a run directory's checkpoint and refuses a directory without one;
//! `bound` of a sum is rigorous with every f32 element inside its bound, and
//! refuses a point of the wrong arity.

use std::path::PathBuf;
use std::process::{Command, Output};

fn certgrad() -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_certgrad"));
    c.env_remove("CERTGRAD_MAX_BYTES");
    c
}

fn text(o: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn temp(tag: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("certgrad-cli-cmd-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

const TWO_FUNCS: &str = "func.func public @main(%x: tensor<2x3xf32>) -> tensor<2x3xf32> {
  %0 = call @relu(%x) : (tensor<2x3xf32>) -> tensor<2x3xf32>
  %1 = stablehlo.multiply %0, %x : tensor<2x3xf32>
  return %1 : tensor<2x3xf32>
}
func.func private @relu(%x: tensor<2x3xf32>) -> tensor<2x3xf32> {
  %c = stablehlo.constant dense<0.0> : tensor<2x3xf32>
  %0 = stablehlo.maximum %x, %c : tensor<2x3xf32>
  return %0 : tensor<2x3xf32>
}
";

#[test]
fn check_prints_functions_and_op_counts_and_names_the_line_of_an_error() {
    let d = temp("check");
    let good = d.join("good.mlir");
    std::fs::write(&good, TWO_FUNCS).unwrap();
    let o = certgrad().arg("check").arg(&good).output().unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    let out = stdout(&o);
    assert!(out.contains("good.mlir: ok (2 functions"), "{out}");
    assert!(out.contains("round trip exact"), "{out}");
    assert!(
        out.contains("func public @main (tensor<2x3xf32>) -> (tensor<2x3xf32>)"),
        "{out}"
    );
    assert!(out.contains("func private @relu"), "{out}");
    let counts: Vec<&str> = out.lines().map(str::trim).collect();
    assert!(counts.contains(&"1  stablehlo.maximum"), "{out}");
    assert!(counts.contains(&"1  stablehlo.multiply"), "{out}");

    // A type mismatch on line 3: the file and the line are named, status 2.
    let bad = d.join("bad.mlir");
    std::fs::write(
        &bad,
        TWO_FUNCS.replace(
            "%1 = stablehlo.multiply %0, %x : tensor<2x3xf32>",
            "%1 = stablehlo.multiply %0, %x : tensor<3x2xf32>",
        ),
    )
    .unwrap();
    let o = certgrad().arg("check").arg(&bad).output().unwrap();
    let e = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    assert!(e.contains("bad.mlir:3"), "{e}");
    assert!(!e.contains("panicked"), "{e}");
    assert!(o.stdout.is_empty(), "{}", stdout(&o));

    // Text that does not parse: named by file:line too.
    let garbled = d.join("garbled.mlir");
    std::fs::write(
        &garbled,
        TWO_FUNCS.replace("stablehlo.maximum", "stablehlo.maximumm"),
    )
    .unwrap();
    let o = certgrad().arg("check").arg(&garbled).output().unwrap();
    let e = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    assert!(e.contains("garbled.mlir:8"), "{e}");
}

#[test]
fn demo_round_trips_and_its_f32_evaluators_agree_with_f64() {
    let o = certgrad().arg("demo").output().unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    let out = stdout(&o);
    assert!(
        out.contains("parsed back, verified, round trip exact"),
        "{out}"
    );
    assert!(out.contains("stablehlo.convolution"), "{out}");
    for label in ["fast f32", "generic f32"] {
        let row = out
            .lines()
            .find(|l| l.starts_with(label))
            .unwrap_or_else(|| panic!("no {label} row in:\n{out}"));
        let rel: f64 = row.split_whitespace().last().unwrap().parse().unwrap();
        assert!(rel < 1e-4, "{label}: relative error {rel} to f64: {row}");
    }
    // It takes no arguments.
    let o = certgrad().args(["demo", "extra"]).output().unwrap();
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
}

#[test]
fn eval_scores_a_runs_checkpoint_and_refuses_a_directory_without_one() {
    let d = temp("eval");
    super::input_errors::write_idx(&d, "train", 16);
    super::input_errors::write_idx(&d, "t10k", 8);
    let tiny =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/nets/tiny.toml");
    let run = d.join("run");
    let o = certgrad()
        .arg("train")
        .arg(&tiny)
        .arg("--data")
        .arg(&d)
        .args(["--optimizer", "sgd", "--epochs", "1", "--batch", "8"])
        .args(["--no-certify", "--quiet", "--out"])
        .arg(&run)
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    let o = certgrad().arg("eval").arg(&run).output().unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    let out = stdout(&o);
    assert!(out.contains("checkpoint.safetensors"), "{out}");
    assert!(out.contains("after epoch 1 (update 2)"), "{out}");
    assert!(out.contains("on 8 examples of"), "{out}");
    let pct: f64 = out
        .split("test accuracy ")
        .nth(1)
        .and_then(|s| s.split('%').next())
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("no accuracy in {out}"));
    assert!((0.0..=100.0).contains(&pct), "{out}");
    // 8 test examples: the accuracy is a multiple of 12.5 %.
    assert!((pct / 12.5 - (pct / 12.5).round()).abs() < 1e-6, "{out}");

    let empty = d.join("empty");
    std::fs::create_dir_all(&empty).unwrap();
    let o = certgrad().arg("eval").arg(&empty).output().unwrap();
    let e = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    assert!(e.contains("empty"), "{e}");
    assert!(!e.contains("panicked"), "{e}");
}

/// A sum of two 3×5 tensors (the bound tests' function).
pub(crate) const SUM: &str = "func.func public @main(%x: tensor<3x5xf32>, %y: tensor<3x5xf32>) -> tensor<f32> {
  %a = stablehlo.add %x, %y : tensor<3x5xf32>
  %c = stablehlo.constant dense<0.0> : tensor<f32>
  %s = stablehlo.reduce(%a init: %c) applies stablehlo.add across dimensions = [0, 1] : (tensor<3x5xf32>, tensor<f32>) -> tensor<f32>
  return %s : tensor<f32>
}
";

#[test]
fn bound_of_a_sum_is_rigorous_and_holds_the_measured_error() {
    let d = temp("bound");
    let f = d.join("sum.mlir");
    std::fs::write(&f, SUM).unwrap();
    let json = d.join("b.json");
    let o = certgrad()
        .arg("bound")
        .arg(&f)
        .arg("--json")
        .arg(&json)
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    let out = stdout(&o);
    assert!(out.contains("@main of"), "{out}");
    assert!(out.contains("no decisions"), "{out}");
    assert!(out.contains("rigorous: YES"), "{out}");
    let j: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    assert_eq!(j["rigorous"], true, "{j}");
    assert_eq!(j["f32_outside_bound"], 0, "{j}");
    let t = &j["tensors"][0];
    assert_eq!(t["elements"], 1, "{j}");
    let (bound, measured) = (
        t["max_bound"].as_f64().unwrap(),
        t["measured_max_abs_f32_minus_f64"].as_f64().unwrap(),
    );
    // 15 additions of standard normals: a bound above what was measured,
    // and far below the value's own size (a few units).
    assert!(bound >= measured && bound > 0.0 && bound < 1e-4, "{j}");

    // Two arguments, one --at file: refused before any analysis.
    let npy = d.join("x.npy");
    std::fs::write(&npy, b"not read").unwrap();
    let o = certgrad()
        .arg("bound")
        .arg(&f)
        .arg("--at")
        .arg(&npy)
        .output()
        .unwrap();
    let e = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    assert!(
        e.contains("@main takes 2 arguments, but 1 --at files were given"),
        "{e}"
    );
}
