//! `certgrad certify --op relu6 --controls` through the built binary: the op's
//! cases certify, its negative control (the mask that forgets the upper
//! corner) gets a row that says REFUTED beside its certified twin, and the
//! exit status is 0 because every gate failed where it should. And
//! `certgrad certify NET --drop-path RATE`: the stochastic-depth render of a
//! narrow ViT-Tiny certifies with its 24 keep inputs, and the flag is refused
//! by name without a net, on a net without drop-path sites, at rate 1.

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

#[test]
fn certify_drop_path_ties_the_keep_inputs_and_refuses_by_name() {
    let run = |args: &[&str]| {
        let out = Command::new(env!("CARGO_BIN_EXE_certgrad"))
            .args(args)
            .output()
            .unwrap();
        let text = format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        (out.status, text)
    };
    let net = "vit-tiny-w12-k10-32x32-p8";
    let (status, text) = run(&["certify", net, "--batch", "2", "--drop-path", "0.1"]);
    assert!(status.success(), "{text}");
    assert!(text.contains("drop path 0.1: 24 keep inputs"), "{text}");
    assert!(text.contains("blocks.0.attn.drop_path"), "{text}");
    assert!(
        text.contains(&format!("CERTIFIED: {net} --drop-path 0.1 at N=2")),
        "{text}"
    );
    for (args, needle) in [
        (
            vec!["certify", "--op", "relu", "--drop-path", "0.1"],
            "--drop-path: certifies a net's stochastic-depth render; give a NET",
        ),
        (
            vec!["certify", "resnet34-k10-32x32", "--drop-path", "0.1"],
            "--drop-path: resnet34-k10-32x32 has no drop-path sites",
        ),
        (
            vec!["certify", net, "--drop-path", "1"],
            "--drop-path: expected a rate in [0, 1), got 1",
        ),
    ] {
        let (status, text) = run(&args);
        assert_eq!(status.code(), Some(2), "{args:?}: {text}");
        assert!(text.contains(needle), "{args:?}: {text}");
        assert!(
            !text.contains("parameter tensors"),
            "refused before the header: {text}"
        );
        assert!(!text.contains("panicked"), "{text}");
    }
}
