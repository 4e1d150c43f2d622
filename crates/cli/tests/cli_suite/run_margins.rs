//! `certgrad run --margins` through the built binary: the smallest float64
//! decision margin of a ReLU is the distance of its nearest input to 0, and
//! an input exactly on the kink is reported as a tie.

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

/// (margin, ties) of the one deciding op, from `run --margins`.
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

#[test]
fn an_input_on_the_kink_is_a_tie() {
    assert_eq!(margins_of(&[1.0, 0.0, 0.5], "kink"), (0.0, 1));
}
