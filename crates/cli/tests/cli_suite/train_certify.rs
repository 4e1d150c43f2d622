//! What `certgrad train` certifies before it trains, through the built
//! binary: by default the trained module itself (the step at the training
//! batch, timed first by a batch-2 twin), and the line after the verdict says
//! so; with `--certify-batch N` below the training batch, the twin at N, and
//! the line says that the trained module was NOT certified. (The negative
//! control, a bug planted in the trained module's backward that the default
//! refutes while its fresh twin certifies, is
//! `train_suite host_loop::the_default_certificate_is_of_the_trained_module`:
//! the binary offers no way to plant one.)

use std::path::{Path, PathBuf};
use std::process::Command;

fn temp(tag: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("certgrad-cli-cert-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// IDX files of `n` one-channel 8×8 images in 4 classes.
fn write_idx(dir: &Path, split: &str, n: u32) {
    let mut im = vec![0, 0, 8, 3];
    for d in [n, 8, 8] {
        im.extend(d.to_be_bytes());
    }
    im.extend((0..n * 64).map(|i| (i * 37 % 251) as u8));
    std::fs::write(dir.join(format!("{split}-images-idx3-ubyte")), im).unwrap();
    let mut lb = vec![0, 0, 8, 1];
    lb.extend(n.to_be_bytes());
    lb.extend((0..n).map(|i| (i % 4) as u8));
    std::fs::write(dir.join(format!("{split}-labels-idx1-ubyte")), lb).unwrap();
}

fn train(d: &Path, run: &str, extra: &[&str]) -> String {
    let tiny = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/nets/tiny.toml");
    let o = Command::new(env!("CARGO_BIN_EXE_certgrad"))
        .arg("train")
        .arg(&tiny)
        .arg("--data")
        .arg(d)
        .args(["--epochs", "1", "--batch", "8", "--quiet", "--out"])
        .arg(d.join(run))
        .args(extra)
        .output()
        .unwrap();
    let out = String::from_utf8_lossy(&o.stdout).into_owned();
    assert!(
        o.status.success(),
        "{out}{}",
        String::from_utf8_lossy(&o.stderr)
    );
    out
}

#[test]
fn train_certifies_the_trained_module_by_default() {
    let d = temp("default");
    write_idx(&d, "train", 16);
    write_idx(&d, "t10k", 8);
    let out = train(&d, "run", &[]);
    let lines: Vec<&str> = out.lines().collect();
    let at = lines
        .iter()
        .position(|l| l.contains("certified the trained module"))
        .unwrap_or_else(|| panic!("no trained-module line in:\n{out}"));
    assert!(
        lines[at].contains("at batch 8"),
        "the training batch: {}",
        lines[at]
    );
    let verdict = lines[at - 1];
    assert!(
        verdict.starts_with("certify: CERTIFIED") && verdict.contains("(batch 8,"),
        "the verdict line above it is the batch-8 tie: {verdict}"
    );
    assert!(
        out.contains("[twin: timing]") && out.contains("(batch 2,"),
        "the batch-2 twin that timed it: {out}"
    );
    assert!(out.contains("checkpoint "), "it trained: {out}");

    // The twin, explicitly: certified, and said NOT to be the trained module.
    let out = train(&d, "run-twin", &["--certify-batch", "2"]);
    let line = out
        .lines()
        .find(|l| l.contains("NOT the trained module"))
        .unwrap_or_else(|| panic!("no twin line in:\n{out}"));
    assert!(line.contains("batch-2 twin"), "{line}");
    assert!(line.contains("--certify-batch 8"), "{line}");
    assert!(!out.contains("certified the trained module"), "{out}");
}
