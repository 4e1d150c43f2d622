//! `certgrad certify --op relu6 --controls` through the built binary: the op's
//! cases certify, its negative control (the mask that forgets the upper
//! corner) gets a row that says REFUTED beside its certified twin, and the
//! exit status is 0 because every gate failed where it should.

use std::process::Command;

#[test]
fn relu6_controls_are_refuted_beside_their_certified_twins() {
    let out = Command::new(env!("CARGO_BIN_EXE_certgrad"))
        .args(["certify", "--op", "relu6", "--controls"])
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout).to_string();
    assert!(
        out.status.success(),
        "{stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let row = stdout
        .lines()
        .find(|l| l.contains("mask x > 0 only"))
        .unwrap_or_else(|| panic!("no control row in:\n{stdout}"));
    assert!(row.starts_with("relu6 "), "{row}");
    assert!(row.contains("CERTIFIED exact"), "twin column: {row}");
    assert!(row.contains("REFUTED: dx: "), "{row}");
    assert!(
        stdout.contains("CONTROLS REFUTED: all 1 negative controls refuted"),
        "{stdout}"
    );
    assert!(stdout.contains("CERTIFIED: all 3 ties hold"), "{stdout}");
}

#[test]
fn without_controls_no_control_is_run() {
    let out = Command::new(env!("CARGO_BIN_EXE_certgrad"))
        .args(["certify", "--op", "relu6"])
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout).to_string();
    assert!(out.status.success(), "{stdout}");
    assert!(!stdout.contains("mask x > 0 only"), "{stdout}");
    assert!(!stdout.contains("CONTROLS"), "{stdout}");
}
