//! `certgrad certify-step` on a fused step written here: a linear model with
//! a squared-error loss, its backward and an SGD tail, returning the loss
//! beside a metric that reads the parameters only through a comparison. The
//! correct step is certified (exit 0, the gradient's line and SSA name, the
//! tail and its learning rate); the twin whose weight gradient is transposed
//! (xᵀ·dy written as dyᵀ·x, same shape) is refuted at that parameter (exit
//! status 1) and followed back to the dot_general that computes it from a
//! right cotangent; a step without a loss is a usage error (exit status 2);
//! `--json` writes the verdict and the rows.

use std::path::PathBuf;
use std::process::Command;

/// loss = Σ(x·W + b − t)²/8 (the mean over 4 rows of ½‖·‖²), so
/// ∂loss/∂y = (y − t)/4; W' = W − 0.5·xᵀ·dy, b' = b − 0.5·Σ dy.
fn step(weight_gradient: &str, with_loss: bool) -> String {
    let ret = if with_loss {
        "return %W2, %b2, %loss, %npos : tensor<3x3xf32>, tensor<3xf32>, tensor<f32>, tensor<f32>"
    } else {
        "return %W2, %b2 : tensor<3x3xf32>, tensor<3xf32>"
    };
    let results = if with_loss {
        "(tensor<3x3xf32>, tensor<3xf32>, tensor<f32>, tensor<f32>)"
    } else {
        "(tensor<3x3xf32>, tensor<3xf32>)"
    };
    format!(
        "func.func public @main(%W: tensor<3x3xf32>, %b: tensor<3xf32>, %x: tensor<4x3xf32>, %t: tensor<4x3xf32>) -> {results} {{
  %xw = stablehlo.dot_general %x, %W, contracting_dims = [1] x [0] : (tensor<4x3xf32>, tensor<3x3xf32>) -> tensor<4x3xf32>
  %bb = stablehlo.broadcast_in_dim %b, dims = [1] : (tensor<3xf32>) -> tensor<4x3xf32>
  %y = stablehlo.add %xw, %bb : tensor<4x3xf32>
  %d = stablehlo.subtract %y, %t : tensor<4x3xf32>
  %d2 = stablehlo.multiply %d, %d : tensor<4x3xf32>
  %c0 = stablehlo.constant dense<0.0> : tensor<f32>
  %s = stablehlo.reduce(%d2 init: %c0) applies stablehlo.add across dimensions = [0, 1] : (tensor<4x3xf32>, tensor<f32>) -> tensor<f32>
  %eighth = stablehlo.constant dense<0.125> : tensor<f32>
  %loss = stablehlo.multiply %s, %eighth : tensor<f32>
  %quarter = stablehlo.constant dense<0.25> : tensor<4x3xf32>
  %dy = stablehlo.multiply %d, %quarter : tensor<4x3xf32>
  %dW = {weight_gradient}
  %db = stablehlo.reduce(%dy init: %c0) applies stablehlo.add across dimensions = [0] : (tensor<4x3xf32>, tensor<f32>) -> tensor<3xf32>
  %lrW = stablehlo.constant dense<0.5> : tensor<3x3xf32>
  %uW = stablehlo.multiply %lrW, %dW : tensor<3x3xf32>
  %W2 = stablehlo.subtract %W, %uW : tensor<3x3xf32>
  %lrb = stablehlo.constant dense<0.5> : tensor<3xf32>
  %ub = stablehlo.multiply %lrb, %db : tensor<3xf32>
  %b2 = stablehlo.subtract %b, %ub : tensor<3xf32>
  %zero = stablehlo.constant dense<0.0> : tensor<4x3xf32>
  %pos = stablehlo.compare GT, %y, %zero : (tensor<4x3xf32>, tensor<4x3xf32>) -> tensor<4x3xi1>
  %posf = stablehlo.convert %pos : (tensor<4x3xi1>) -> tensor<4x3xf32>
  %npos = stablehlo.reduce(%posf init: %c0) applies stablehlo.add across dimensions = [0, 1] : (tensor<4x3xf32>, tensor<f32>) -> tensor<f32>
  {ret}
}}
"
    )
}

const XT_DY: &str = "stablehlo.dot_general %x, %dy, contracting_dims = [0] x [0] : (tensor<4x3xf32>, tensor<4x3xf32>) -> tensor<3x3xf32>";
/// dyᵀ·x = (xᵀ·dy)ᵀ: the same shape, the wrong gradient.
const DYT_X: &str = "stablehlo.dot_general %dy, %x, contracting_dims = [0] x [0] : (tensor<4x3xf32>, tensor<4x3xf32>) -> tensor<3x3xf32>";

fn temp_dir(tag: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!(
        "certgrad-certify-step-{}-{tag}",
        std::process::id()
    ));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// `certgrad certify-step` on `text`: exit status and stdout + stderr.
fn certify_step(tag: &str, text: &str, extra: &[&str]) -> (i32, String, PathBuf) {
    let dir = temp_dir(tag);
    let file = dir.join("step.mlir");
    std::fs::write(&file, text).unwrap();
    let o = Command::new(env!("CARGO_BIN_EXE_certgrad"))
        .arg("certify-step")
        .arg(&file)
        .args(extra)
        .current_dir(&dir)
        .output()
        .unwrap();
    let out = format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
    (o.status.code().unwrap_or(-1), out, dir)
}

#[test]
fn a_correct_step_is_certified_with_its_gradient_line_and_learning_rate() {
    let (code, out, dir) = certify_step("ok", &step(XT_DY, true), &["--json", "cert.json"]);
    assert_eq!(code, 0, "{out}");
    // The metric beside the loss reads W only through a comparison.
    assert!(out.contains("loss = result 2 (%loss)"), "{out}");
    // %dW is on line 13 of the text, its SSA name read back.
    assert!(
        out.contains("step.mlir:13:3 %dW stablehlo.dot_general"),
        "{out}"
    );
    assert!(out.contains("SGD, lr 5.000000e-1"), "{out}");
    assert!(out.lines().any(|l| l.starts_with("CERTIFIED")), "{out}");
    let json: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("cert.json")).unwrap()).unwrap();
    assert_eq!(json["verdict"], "certified", "{json}");
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn a_transposed_weight_gradient_is_refuted_at_its_parameter() {
    let (code, out, dir) = certify_step("transposed", &step(DYT_X, true), &[]);
    assert_eq!(code, 1, "{out}");
    assert!(
        out.lines().any(|l| l.starts_with("REFUTED: parameter %W:")),
        "{out}"
    );
    // Followed back: dW itself is wrong, dy (what it reads) is right.
    assert!(
        out.contains("%W's gradient first goes wrong at ")
            && out.contains("step.mlir:13:3 %dW stablehlo.dot_general: the gradient value itself"),
        "{out}"
    );
    assert!(
        out.contains("it reads line 12:3 %dy stablehlo.multiply, which is right"),
        "{out}"
    );
    // b's gradient does not read the bug and stays tied.
    let b_row = out.lines().find(|l| l.contains(" %b ")).unwrap();
    assert!(b_row.ends_with("tied"), "{out}");
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn a_step_without_a_loss_is_a_usage_error_and_loss_must_be_a_scalar() {
    let (code, out, dir) = certify_step("noloss", &step(XT_DY, false), &[]);
    assert_eq!(code, 2, "{out}");
    assert!(out.contains("the step returns no loss"), "{out}");
    std::fs::remove_dir_all(&dir).ok();
    let (code, out, dir) = certify_step("badloss", &step(XT_DY, true), &["--loss", "0"]);
    assert_eq!(code, 2, "{out}");
    assert!(out.contains("not a one-element float loss"), "{out}");
    std::fs::remove_dir_all(&dir).ok();
}
