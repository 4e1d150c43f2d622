//! `certgrad diff` on pairs built here: a convolution's padding changed, a
//! batch norm's epsilon changed and an activation swapped are each found
//! and named at their op (file, line, the attribute that differs), the
//! padding also behind a rewritten scale the other side never computes; two
//! rewritings of one function (operands commuted, a sum reassociated, a
//! reduction over a transpose) are the same; results without a finite value
//! are undecided; different signatures and usage errors are reported with
//! their exit statuses.

use std::path::{Path, PathBuf};
use std::process::Command;

const CONV: &str = "func.func public @main(%x: tensor<2x3x8x8xf32>, %w: tensor<4x3x3x3xf32>, %g: tensor<4xf32>) -> (tensor<2x4x4x4xf32>, tensor<f32>) {
  %y = stablehlo.convolution(%x, %w) dim_numbers = [b, f, 0, 1]x[o, i, 0, 1]->[b, f, 0, 1], window = {stride = [2, 2], pad = [[1, 1], [1, 1]]} {batch_group_count = 1 : i64, feature_group_count = 1 : i64} : (tensor<2x3x8x8xf32>, tensor<4x3x3x3xf32>) -> tensor<2x4x4x4xf32>
  %gb = stablehlo.broadcast_in_dim %g, dims = [1] : (tensor<4xf32>) -> tensor<2x4x4x4xf32>
  %z = stablehlo.multiply %y, %gb : tensor<2x4x4x4xf32>
  %t = stablehlo.tanh %z : tensor<2x4x4x4xf32>
  %c = stablehlo.constant dense<0.0> : tensor<f32>
  %s = stablehlo.reduce(%t init: %c) applies stablehlo.add across dimensions = [0, 1, 2, 3] : (tensor<2x4x4x4xf32>, tensor<f32>) -> tensor<f32>
  return %t, %s : tensor<2x4x4x4xf32>, tensor<f32>
}
";

/// Batch statistics of `x` per feature: (x − μ)·rsqrt(σ² + ε).
const NORM: &str = "func.func public @main(%x: tensor<4x3xf32>) -> tensor<4x3xf32> {
  %c = stablehlo.constant dense<0.0> : tensor<f32>
  %s = stablehlo.reduce(%x init: %c) applies stablehlo.add across dimensions = [0] : (tensor<4x3xf32>, tensor<f32>) -> tensor<3xf32>
  %q = stablehlo.constant dense<0.25> : tensor<3xf32>
  %m = stablehlo.multiply %s, %q : tensor<3xf32>
  %mb = stablehlo.broadcast_in_dim %m, dims = [1] : (tensor<3xf32>) -> tensor<4x3xf32>
  %d = stablehlo.subtract %x, %mb : tensor<4x3xf32>
  %d2 = stablehlo.multiply %d, %d : tensor<4x3xf32>
  %v = stablehlo.reduce(%d2 init: %c) applies stablehlo.add across dimensions = [0] : (tensor<4x3xf32>, tensor<f32>) -> tensor<3xf32>
  %vm = stablehlo.multiply %v, %q : tensor<3xf32>
  %eps = stablehlo.constant dense<1.000000e-05> : tensor<3xf32>
  %ve = stablehlo.add %vm, %eps : tensor<3xf32>
  %r = stablehlo.rsqrt %ve : tensor<3xf32>
  %rb = stablehlo.broadcast_in_dim %r, dims = [1] : (tensor<3xf32>) -> tensor<4x3xf32>
  %y = stablehlo.multiply %d, %rb : tensor<4x3xf32>
  return %y : tensor<4x3xf32>
}
";

/// Σ (x + y + z) over both axes, written three ways.
const SUM: &str = "func.func public @main(%x: tensor<3x5xf32>, %y: tensor<3x5xf32>, %z: tensor<3x5xf32>) -> tensor<f32> {
  %a = stablehlo.add %x, %y : tensor<3x5xf32>
  %b = stablehlo.add %a, %z : tensor<3x5xf32>
  %c = stablehlo.constant dense<0.0> : tensor<f32>
  %s = stablehlo.reduce(%b init: %c) applies stablehlo.add across dimensions = [0, 1] : (tensor<3x5xf32>, tensor<f32>) -> tensor<f32>
  return %s : tensor<f32>
}
";

const SUM_REWRITTEN: &str = "func.func public @main(%x: tensor<3x5xf32>, %y: tensor<3x5xf32>, %z: tensor<3x5xf32>) -> tensor<f32> {
  %a = stablehlo.add %z, %y : tensor<3x5xf32>
  %b = stablehlo.add %x, %a : tensor<3x5xf32>
  %t = stablehlo.transpose %b, dims = [1, 0] : (tensor<3x5xf32>) -> tensor<5x3xf32>
  %c = stablehlo.constant dense<0.0> : tensor<f32>
  %s = stablehlo.reduce(%t init: %c) applies stablehlo.add across dimensions = [1, 0] : (tensor<5x3xf32>, tensor<f32>) -> tensor<f32>
  return %s : tensor<f32>
}
";

fn temp_dir(tag: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("certgrad-diff-{}-{tag}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// `certgrad diff` of the two texts: exit status and stdout + stderr.
fn diff(dir: &Path, a: &str, b: &str, extra: &[&str]) -> (i32, String) {
    std::fs::write(dir.join("a.mlir"), a).unwrap();
    std::fs::write(dir.join("b.mlir"), b).unwrap();
    let o = Command::new(env!("CARGO_BIN_EXE_certgrad"))
        .arg("diff")
        .arg(dir.join("a.mlir"))
        .arg(dir.join("b.mlir"))
        .args(extra)
        .output()
        .unwrap();
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
    (o.status.code().unwrap_or(-1), text)
}

/// The pair differs, and its report names A's line `line_a` and B's line
/// `line_b` and says what A has where B has something else.
fn assert_parted(tag: &str, a: &str, b: &str, lines: (usize, usize), has: Option<(&str, &str)>) {
    let dir = temp_dir(tag);
    let (code, out) = diff(&dir, a, b, &[]);
    assert_eq!(code, 1, "{out}");
    assert!(out.contains("DIFFERENT"), "{out}");
    assert!(out.contains(&format!("a.mlir:{}:", lines.0)), "{out}");
    assert!(out.contains(&format!("b.mlir:{}:", lines.1)), "{out}");
    if let Some((x, y)) = has {
        assert!(
            out.contains(&format!("A has `{x}` where B has `{y}`")),
            "{out}"
        );
    }
    assert!(out.trim_end().ends_with("verdict: different"), "{out}");
    std::fs::remove_dir_all(&dir).ok();
}

/// The convolution's padding in `CONV`, and the one B has instead.
const PADS: (&str, &str) = ("pad = [[1, 1], [1, 1]]", "pad = [[0, 1], [0, 1]]");

#[test]
fn a_changed_padding_is_named_at_its_convolution() {
    assert_parted(
        "pad",
        CONV,
        &CONV.replace(PADS.0, PADS.1),
        (2, 2),
        Some(PADS),
    );
}

#[test]
fn a_changed_padding_is_found_behind_a_rewritten_scale() {
    // B scales by (2g)·y·½ where A scales by g·y: values A never forms
    // (2g, its broadcast, the product before the ½) lie on B's path from
    // the result back to the convolution whose padding differs.
    let b = CONV.replace(PADS.0, PADS.1).replace(
            "  %gb = stablehlo.broadcast_in_dim %g, dims = [1] : (tensor<4xf32>) -> tensor<2x4x4x4xf32>\n  %z = stablehlo.multiply %y, %gb : tensor<2x4x4x4xf32>\n",
            "  %two = stablehlo.constant dense<2.0> : tensor<4xf32>\n  %g2 = stablehlo.multiply %g, %two : tensor<4xf32>\n  %gb = stablehlo.broadcast_in_dim %g2, dims = [1] : (tensor<4xf32>) -> tensor<2x4x4x4xf32>\n  %z2 = stablehlo.multiply %y, %gb : tensor<2x4x4x4xf32>\n  %half = stablehlo.constant dense<0.5> : tensor<2x4x4x4xf32>\n  %z = stablehlo.multiply %z2, %half : tensor<2x4x4x4xf32>\n",
        );
    assert!(b.contains("%g2"), "the rewrite applied");
    assert_parted("rescaled", CONV, &b, (2, 2), Some(PADS));
}

#[test]
fn a_result_without_finite_values_is_undecided() {
    let dir = temp_dir("nan");
    let nan = "func.func public @main(%x: tensor<3xf32>) -> tensor<3xf32> {
  %q = stablehlo.multiply %x, %x : tensor<3xf32>
  %one = stablehlo.constant dense<1.0> : tensor<3xf32>
  %p = stablehlo.add %q, %one : tensor<3xf32>
  %n = stablehlo.negate %p : tensor<3xf32>
  %l = stablehlo.sqrt %n : tensor<3xf32>
  return %l : tensor<3xf32>
}
";
    let (code, out) = diff(&dir, nan, nan, &[]);
    assert_eq!(code, 3, "{out}");
    assert!(out.contains("no finite value in either"), "{out}");
    assert!(out.contains("verdict: undecided"), "{out}");
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn a_changed_epsilon_is_named_where_it_is_added() {
    let b = NORM.replace("dense<1.000000e-05>", "dense<1.000000e-03>");
    // The constant itself is no computed value: the add that reads it is
    // the first value that parts (line 12 of both).
    assert_parted("eps", NORM, &b, (12, 12), None);
}

#[test]
fn a_swapped_activation_is_named() {
    let b = CONV.replace("stablehlo.tanh %z", "stablehlo.logistic %z");
    assert_parted(
        "activation",
        CONV,
        &b,
        (5, 5),
        Some(("%t = stablehlo.tanh", "%t = stablehlo.logistic")),
    );
}

#[test]
fn rewritings_of_one_function_are_the_same() {
    let dir = temp_dir("same");
    let commuted = CONV.replace("multiply %y, %gb", "multiply %gb, %y");
    for (a, b) in [(CONV, commuted.as_str()), (SUM, SUM_REWRITTEN)] {
        let (code, out) = diff(&dir, a, b, &[]);
        assert_eq!(code, 0, "{out}");
        assert!(out.contains("verdict: same function at 2 points"), "{out}");
        assert!(!out.contains("DIFFERENT"), "{out}");
    }
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn signatures_and_usage_errors_are_reported() {
    let dir = temp_dir("usage");
    let more = SUM.replacen(
        "%z: tensor<3x5xf32>)",
        "%z: tensor<3x5xf32>, %w: tensor<f32>)",
        1,
    );
    let (code, out) = diff(&dir, SUM, &more, &[]);
    assert_eq!(code, 1, "{out}");
    assert!(out.contains("signature: 3 arguments in A, 4 in B"), "{out}");
    assert!(out.contains("verdict: different signatures"), "{out}");
    let (code, out) = diff(&dir, SUM, SUM, &["--func-a", "step"]);
    assert_eq!(code, 2, "{out}");
    assert!(out.contains("no function @step"), "{out}");
    let (code, out) = diff(&dir, SUM, SUM, &["--inputs", "x.npy"]);
    assert_eq!(code, 2, "{out}");
    assert!(out.contains("--inputs: 1 files for 3 arguments"), "{out}");
    std::fs::remove_dir_all(&dir).ok();
}

/// The mean of x over two replicas: all_reduce(x) · ½.
const MEAN: &str = "func.func public @main(%x: tensor<3xf32>) -> tensor<3xf32> {
  %s = \"stablehlo.all_reduce\"(%x) <{replica_groups = dense<[[0, 1]]> : tensor<1x2xi64>}> ({
  ^bb0(%p: tensor<f32>, %q: tensor<f32>):
    %pq = stablehlo.add %p, %q : tensor<f32>
    stablehlo.return %pq : tensor<f32>
  }) : (tensor<3xf32>) -> tensor<3xf32>
  %h = stablehlo.constant dense<0.5> : tensor<3xf32>
  %m = stablehlo.multiply %s, %h : tensor<3xf32>
  return %m : tensor<3xf32>
}
";

/// `--replicas 2`: halving before the all_reduce is the same function; a
/// step that skips the all_reduce (each replica keeps its own x, the mean
/// only when the replicas agree) differs, because each replica's
/// arguments are drawn apart; the input count is checked per replica.
#[test]
fn data_parallel_pairs_are_compared_on_their_replicas() {
    let dir = temp_dir("replicas");
    let halved_first = MEAN
        .replace(
            "\"stablehlo.all_reduce\"(%x)",
            "\"stablehlo.all_reduce\"(%xh)",
        )
        .replace(
            "  %s = ",
            "  %h = stablehlo.constant dense<0.5> : tensor<3xf32>\n  %xh = stablehlo.multiply %h, %x : tensor<3xf32>\n  %s = ",
        )
        .replace(
            "  %h = stablehlo.constant dense<0.5> : tensor<3xf32>\n  %m = stablehlo.multiply %s, %h : tensor<3xf32>\n  return %m",
            "  return %s",
        );
    assert_ne!(halved_first, MEAN);
    let (code, out) = diff(&dir, MEAN, &halved_first, &["--replicas", "2"]);
    assert_eq!(code, 0, "{out}");
    assert!(out.contains("verdict: same function at 2 points"), "{out}");
    let local = MEAN.replace("return %m", "return %x");
    let (code, out) = diff(&dir, MEAN, &local, &["--replicas", "2"]);
    assert_eq!(code, 1, "{out}");
    assert!(out.contains("DIFFERENT"), "{out}");
    assert!(out.contains("not localised on 2 replicas"), "{out}");
    let (code, out) = diff(
        &dir,
        MEAN,
        MEAN,
        &["--replicas", "2", "--inputs", "a.npy", "b.npy", "c.npy"],
    );
    assert_eq!(code, 2, "{out}");
    assert!(
        out.contains("--inputs: 3 files for 1 arguments on 2 replicas"),
        "{out}"
    );
    std::fs::remove_dir_all(&dir).ok();
}
