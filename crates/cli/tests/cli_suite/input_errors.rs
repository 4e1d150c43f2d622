//! The command line refuses bad input with a clear message and status 2 —
//! each case beside its good twin: tensors over the memory limit, malformed
//! limits, zero or NaN flags, `run` with the wrong number of `--inputs`,
//! `--resume` with no checkpoint or with a recipe flag that disagrees with
//! the stored recipe, recipe flags with `render --eval`; and a closed stdout
//! ends the process quietly (no "failed printing to stdout" panic).

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

fn certgrad() -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_certgrad"));
    c.env_remove("CERTGRAD_MAX_BYTES");
    c
}

fn temp(tag: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("certgrad-cli-input-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// Runs and expects status 2 with `needles` in stderr and no panic.
fn refused(c: &mut Command, needles: &[&str]) {
    let o = c.output().unwrap();
    let e = stderr(&o);
    assert_eq!(o.status.code(), Some(2), "status {:?}: {e}", o.status);
    assert!(!e.contains("panicked"), "{e}");
    for n in needles {
        assert!(e.contains(n), "missing {n:?} in: {e}");
    }
}

fn splat(dir: &Path, n: &str) -> PathBuf {
    let t = format!("tensor<{n}xf32>");
    let p = dir.join(format!("splat{n}.mlir"));
    std::fs::write(
        &p,
        format!("func.func @main() -> {t} {{\n  %0 = stablehlo.constant dense<1.0> : {t}\n  return %0 : {t}\n}}\n"),
    )
    .unwrap();
    p
}

#[test]
fn tensors_over_the_memory_limit_are_refused_by_op_and_line() {
    let d = temp("mem");
    let big = splat(&d, "100000000000");
    refused(
        certgrad()
            .args(["run"])
            .arg(&big)
            .arg("--out")
            .arg(d.join("o")),
        &[
            "splat100000000000.mlir",
            "line 2",
            "stablehlo.constant",
            "400.0 GB",
            "--max-memory",
        ],
    );
    // The same program at 1 KiB: 256 floats fit, 257 do not.
    let ok = splat(&d, "256");
    let o = certgrad()
        .args(["--max-memory", "1K", "run"])
        .arg(&ok)
        .arg("--out")
        .arg(d.join("o"))
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", stderr(&o));
    refused(
        certgrad()
            .args(["run", "--max-memory", "1K"])
            .arg(splat(&d, "257"))
            .arg("--out")
            .arg(d.join("o")),
        &[
            "tensor<257xf32> needs 1.0 kB (1028 bytes)",
            "1.0 kB (1024 bytes) per tensor",
        ],
    );
    // Two 200-float constants fit 1 KiB each but not together: the total
    // limit (the bytes live at once) refuses them, naming the peak's op.
    let two = d.join("two.mlir");
    let t = "tensor<200xf32>";
    std::fs::write(
        &two,
        format!("func.func @main() -> ({t}, {t}) {{\n  %0 = stablehlo.constant dense<1.0> : {t}\n  %1 = stablehlo.constant dense<2.0> : {t}\n  return %0, %1 : {t}, {t}\n}}\n"),
    )
    .unwrap();
    refused(
        certgrad()
            .args(["run", "--max-memory", "1K"])
            .arg(&two)
            .arg("--out")
            .arg(d.join("o")),
        &[
            "line 3",
            "1.6 kB (1600 bytes) are live at once",
            "total memory limit",
        ],
    );
    let o = certgrad()
        .args(["run", "--max-memory", "2K"])
        .arg(&two)
        .arg("--out")
        .arg(d.join("o"))
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", stderr(&o));
    // The environment variable, and malformed limits.
    refused(
        certgrad()
            .env("CERTGRAD_MAX_BYTES", "1K")
            .args(["run"])
            .arg(splat(&d, "257"))
            .arg("--out")
            .arg(d.join("o")),
        &["over the memory limit"],
    );
    refused(
        certgrad().env("CERTGRAD_MAX_BYTES", "lots").args(["nets"]),
        &["CERTGRAD_MAX_BYTES=\"lots\""],
    );
    refused(
        certgrad().args(["--max-memory", "0", "nets"]),
        &["--max-memory 0", "positive"],
    );
}

#[test]
fn run_with_the_wrong_number_of_inputs_says_how_many_and_which() {
    let d = temp("arity");
    let f = d.join("add.mlir");
    std::fs::write(
        &f,
        "func.func @main(%a: tensor<2xf32>, %b: tensor<f32>) -> tensor<2xf32> {\n  \
         %0 = stablehlo.broadcast_in_dim %b, dims = [] : (tensor<f32>) -> tensor<2xf32>\n  \
         %1 = stablehlo.add %a, %0 : tensor<2xf32>\n  return %1 : tensor<2xf32>\n}\n",
    )
    .unwrap();
    // A real float32 [2] argument (numpy's version-1 layout, 64-byte header).
    let a = d.join("a.npy");
    let mut header = "{'descr': '<f4', 'fortran_order': False, 'shape': (2,), }".to_string();
    while !(10 + header.len() + 1).is_multiple_of(64) {
        header.push(' ');
    }
    header.push('\n');
    let mut bytes = b"\x93NUMPY\x01\x00".to_vec();
    bytes.extend((header.len() as u16).to_le_bytes());
    bytes.extend(header.as_bytes());
    bytes.extend(1.0f32.to_le_bytes());
    bytes.extend(2.0f32.to_le_bytes());
    std::fs::write(&a, bytes).unwrap();
    let o = certgrad()
        .args(["run"])
        .arg(&f)
        .arg("--inputs")
        .arg(&a)
        .arg("--out")
        .arg(d.join("o"))
        .output()
        .unwrap();
    let e = stderr(&o);
    assert_eq!(o.status.code(), Some(2), "{e}");
    assert!(
        e.contains("@main takes 2 arguments, 1 --inputs given; the first without a file is argument 1: tensor<f32>"),
        "{e}"
    );
    assert!(e.contains("certgrad check"), "{e}");
    assert!(e.len() < 300, "a short message: {e}");
    refused(
        certgrad()
            .args(["run"])
            .arg(&f)
            .args(["--out", "o", "--repeat", "0"]),
        &["--repeat 0"],
    );
}

#[test]
fn zero_and_nan_training_flags_are_refused_by_name() {
    for (args, needle) in [
        (vec!["--steps", "0"], "--steps 0"),
        (vec!["--warmup-epochs", "nan"], "--warmup-epochs NaN"),
        (vec!["--certify-batch", "0"], "--certify-batch 0"),
        (vec!["--lr", "0"], "--lr 0"),
        (vec!["--epochs", "0"], "--epochs 0"),
        (vec!["--limit-train", "0"], "--limit-train 0"),
    ] {
        refused(certgrad().arg("train").args(&args), &[needle]);
    }
    refused(
        certgrad().args(["certify", "cifar8", "--probes", "0"]),
        &["--probes 0"],
    );
    refused(
        certgrad().args(["certify", "cifar8", "--points", "0"]),
        &["--points 0"],
    );
    refused(
        certgrad().args(["certify", "--op", "conv2d", "--shape", "0,3,4,4"]),
        &["--shape", "dimension 0"],
    );
}

#[test]
fn resume_without_a_checkpoint_says_so() {
    let d = temp("resume");
    refused(
        certgrad()
            .args(["train", "--resume", "--out"])
            .arg(d.join("run")),
        &["no checkpoint to resume", "without --resume"],
    );
}

/// Runs and expects status 0, returning stdout.
fn accepted(c: &mut Command) -> String {
    let o = c.output().unwrap();
    assert_eq!(
        o.status.code(),
        Some(0),
        "status {:?}: {}",
        o.status,
        stderr(&o)
    );
    String::from_utf8_lossy(&o.stdout).into_owned()
}

#[test]
fn render_eval_refuses_recipe_flags_by_name() {
    // The eval forward is one function for every recipe: a recipe flag with
    // --eval is refused (it used to render the plain forward silently); the
    // same flag renders the train step, and --eval alone renders.
    let d = temp("evalrecipe");
    for flag in [
        vec!["--ema"],
        vec!["--clip", "1"],
        vec!["--wd-exclude", "norm,bias"],
        vec!["--accumulate", "2"],
        vec!["--loss", "bce"],
        vec!["--weight-decay", "0.01"],
    ] {
        let spelled = match flag.as_slice() {
            ["--ema"] => "--ema 0.9999".to_string(),
            f => f.join(" "),
        };
        refused(
            certgrad()
                .args(["render", "cifar8-bbn", "--batch", "2", "--eval"])
                .args(&flag)
                .arg("-o")
                .arg(d.join("eval.mlir")),
            &[&spelled, "applies to the train step, not to --eval"],
        );
        accepted(
            certgrad()
                .args(["render", "cifar8-bbn", "--batch", "2"])
                .args(&flag)
                .arg("-o")
                .arg(d.join("step.mlir")),
        );
    }
    // The optimizer and the pool backward are train-step choices too.
    for (flag, value) in [("--optimizer", "sgd"), ("--pool-backward", "shifted-sums")] {
        refused(
            certgrad()
                .args([
                    "render",
                    "cifar8-bbn",
                    "--batch",
                    "2",
                    "--eval",
                    flag,
                    value,
                ])
                .arg("-o")
                .arg(d.join("eval.mlir")),
            &[flag, "cannot be used with", "--eval"],
        );
        accepted(
            certgrad()
                .args(["render", "cifar8-bbn", "--batch", "2", flag, value])
                .arg("-o")
                .arg(d.join("step.mlir")),
        );
    }
    assert!(
        !d.join("eval.mlir").exists(),
        "a refused render wrote its file"
    );
    let out = accepted(
        certgrad()
            .args(["render", "cifar8-bbn", "--batch", "2", "--eval", "-o"])
            .arg(d.join("eval.mlir")),
    );
    assert!(out.contains("@cifar8_bbn_fwd_eval"), "{out}");
}

/// IDX files of `n` one-channel 8×8 images in 4 classes (content irrelevant:
/// the runs below only need a checkpoint).
pub(crate) fn write_idx(dir: &Path, split: &str, n: u32) {
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

#[test]
fn resume_refuses_a_recipe_flag_that_disagrees_with_the_stored_recipe() {
    let d = temp("resumerecipe");
    write_idx(&d, "train", 16);
    write_idx(&d, "t10k", 8);
    let tiny = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/nets/tiny.toml");
    let train = |extra: &[&str]| {
        let mut c = certgrad();
        c.arg("train")
            .arg(&tiny)
            .arg("--data")
            .arg(&d)
            .args(["--optimizer", "adamw", "--epochs", "1", "--batch", "8"])
            .args(["--no-certify", "--quiet", "--out"])
            .arg(d.join("run"))
            .args(extra);
        c
    };
    accepted(&mut train(&["--ema", "0.99"]));
    // Flags that repeat the stored recipe, or none, resume (the run is done:
    // nothing is left to train).
    accepted(&mut train(&["--resume", "--ema", "0.99"]));
    accepted(&mut train(&["--resume"]));
    refused(
        &mut train(&["--resume", "--ema", "0.5"]),
        &[
            "--ema 0.5",
            "trained with --ema 0.99",
            "keeps its stored recipe",
        ],
    );
    refused(
        &mut train(&["--resume", "--clip", "1"]),
        &["--clip 1", "no clipping"],
    );
    refused(
        &mut train(&["--resume", "--loss", "bce"]),
        &["--loss bce", "trained with --loss ce"],
    );
    refused(
        &mut train(&["--resume", "--accumulate", "2"]),
        &["--accumulate 2", "no accumulation"],
    );
    refused(
        &mut train(&["--resume", "--drop-path", "0.1"]),
        &["--drop-path 0.1", "no stochastic depth"],
    );
    // The run's other settings too (every call above repeats its data,
    // optimizer, epochs and batch, which resumes): a different one given
    // with --resume is refused by name instead of being ignored.
    for (flag, value, theirs) in [
        ("--crop-pad", "4", "--crop-pad 0"),
        ("--lr", "0.5", "--lr 0.001"),
        ("--seed", "7", "--seed 0"),
        ("--no-flip", "", "no --no-flip"),
    ] {
        let mut args = vec!["--resume", flag];
        if !value.is_empty() {
            args.push(value);
        }
        refused(
            &mut train(&args),
            &[
                flag,
                &format!("trained with {theirs}"),
                "keeps its stored settings",
            ],
        );
    }
}

#[cfg(unix)]
#[test]
fn a_closed_stdout_ends_the_process_quietly() {
    use std::os::unix::process::ExitStatusExt;
    // `certgrad nets | head -0`: whether the reader leaves before or after
    // the (small) listing is written, there is no panic.
    let mut child = certgrad()
        .arg("nets")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    drop(child.stdout.take());
    let o = child.wait_with_output().unwrap();
    let e = stderr(&o);
    assert!(!e.contains("panicked") && !e.contains("Broken pipe"), "{e}");
    // Deterministic: `certgrad fmt` of a module printing ~400 kB, far past a
    // pipe's buffer, so a write must meet the closed pipe.
    let d = temp("pipe");
    let big = splat(&d, "30000");
    let text = std::fs::read_to_string(&big).unwrap().replace(
        "dense<1.0>",
        &format!("dense<[{}]>", vec!["1.25"; 30000].join(", ")),
    );
    std::fs::write(&big, text).unwrap();
    let o = certgrad().arg("fmt").arg(&big).output().unwrap();
    assert!(o.status.success(), "the good twin: {}", stderr(&o));
    assert!(o.stdout.len() > 200_000);
    let mut child = certgrad()
        .arg("fmt")
        .arg(&big)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    drop(child.stdout.take());
    let o = child.wait_with_output().unwrap();
    let e = stderr(&o);
    assert!(e.is_empty(), "quiet: {e}");
    assert_eq!(
        o.status.signal(),
        Some(13),
        "ended by SIGPIPE, as cat is: {:?}",
        o.status
    );
}
