//! `certgrad run --margins` through the built binary: the smallest float64
//! decision margin of a ReLU is the distance of its nearest input to 0, and
//! an input exactly on the kink is reported as a tie. `check-vjp --json`
//! reports the same margin per site, with the site's branch coverage.

use std::path::Path;
use std::process::Command;

const RELU: &str = "func.func public @main(%arg0: tensor<3xf32>) -> tensor<3xf32> {
  %cst = stablehlo.constant dense<0.000000e+00> : tensor<3xf32>
  %0 = stablehlo.maximum %arg0, %cst : tensor<3xf32>
  return %0 : tensor<3xf32>
}
";

/// A little-endian f32 vector as a version-1 .npy file.
fn write_npy(path: &Path, xs: &[f32]) {
    let mut header = format!(
        "{{'descr': '<f4', 'fortran_order': False, 'shape': ({},), }}",
        xs.len()
    );
    while (10 + header.len() + 1) % 64 != 0 {
        header.push(' ');
    }
    header.push('\n');
    let mut bytes = b"\x93NUMPY\x01\x00".to_vec();
    bytes.extend_from_slice(&(header.len() as u16).to_le_bytes());
    bytes.extend_from_slice(header.as_bytes());
    for x in xs {
        bytes.extend_from_slice(&x.to_le_bytes());
    }
    std::fs::write(path, bytes).unwrap();
}

/// (nearest non-exact tie, exact ties) of the one deciding op, from `run
/// --margins`.
fn margins_of(xs: &[f32], tag: &str) -> (f64, usize) {
    let dir = std::env::temp_dir().join(format!("certgrad-margins-{}-{tag}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("relu.mlir"), RELU).unwrap();
    write_npy(&dir.join("x.npy"), xs);
    let out = Command::new(env!("CARGO_BIN_EXE_certgrad"))
        .args([
            "run",
            "relu.mlir",
            "--inputs",
            "x.npy",
            "--out",
            "o",
            "--margins",
        ])
        .current_dir(&dir)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout).to_string();
    assert!(
        out.status.success(),
        "{stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    std::fs::remove_dir_all(&dir).ok();
    let row = stdout
        .lines()
        .find(|l| l.contains("stablehlo.maximum"))
        .unwrap_or_else(|| panic!("no margin row in:\n{stdout}"));
    let cells: Vec<&str> = row.split_whitespace().collect();
    (cells[2].parse().unwrap(), cells[4].parse().unwrap())
}

#[test]
fn relu_margin_is_the_nearest_input_distance_to_zero() {
    assert_eq!(margins_of(&[1.0, -0.25, 0.5], "smooth"), (0.25, 0));
}

/// An input exactly on the kink is an exact tie (counted; broken by the
/// op's rule in every precision), and the margin shown is the nearest one
/// that is not exact.
#[test]
fn an_input_on_the_kink_is_an_exact_tie() {
    assert_eq!(margins_of(&[1.0, 0.0, 0.5], "kink"), (0.5, 1));
}

/// The ReLU's VJP: dy where x > 0, else 0.
const RELU_BWD: &str =
    "func.func public @main(%arg0: tensor<3xf32>, %arg1: tensor<3xf32>) -> tensor<3xf32> {
  %cst = stablehlo.constant dense<0.000000e+00> : tensor<3xf32>
  %0 = stablehlo.compare GT, %arg0, %cst : (tensor<3xf32>, tensor<3xf32>) -> tensor<3xi1>
  %1 = stablehlo.select %0, %arg1, %cst : tensor<3xi1>, tensor<3xf32>
  return %1 : tensor<3xf32>
}
";

#[test]
fn check_vjp_json_has_site_margins_and_branch_coverage() {
    let dir = std::env::temp_dir().join(format!("certgrad-vjp-json-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("f.mlir"), RELU).unwrap();
    std::fs::write(dir.join("b.mlir"), RELU_BWD).unwrap();
    write_npy(&dir.join("x.npy"), &[1.5, -0.25, 3.0]);
    let out = Command::new(env!("CARGO_BIN_EXE_certgrad"))
        .args(["check-vjp", "f.mlir", "b.mlir", "--at", "x.npy"])
        .args(["--boundary-points", "0", "--json", "r.json"])
        .current_dir(&dir)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
    let doc: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("r.json")).unwrap()).unwrap();
    std::fs::remove_dir_all(&dir).ok();
    // One decision site, the forward's maximum: nearest input to 0 is -0.25.
    let sites = doc["site_margins"].as_array().unwrap();
    assert_eq!(sites.len(), 1, "{doc}");
    assert_eq!(sites[0]["op"], "stablehlo.maximum");
    assert_eq!(sites[0]["min"], 0.25);
    assert_eq!(sites[0]["argmin"], 1);
    assert_eq!(sites[0]["decisions"], 3);
    // max(x, 0) takes x (first operand) at 1.5 and 3, the 0 at -0.25.
    let cov = doc["branch_coverage"].as_array().unwrap();
    assert_eq!(cov.len(), 1, "{doc}");
    assert_eq!(cov[0]["outcome_counts"], serde_json::json!([2, 1]));
    assert_eq!(cov[0]["never_taken"], serde_json::json!([]));
}
