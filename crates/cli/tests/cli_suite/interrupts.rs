//! Ctrl-C while `certgrad train` is still certifying its step: nothing has
//! been trained, so the process ends at once (the default SIGINT action, as
//! before any other long computation), leaves no checkpoint that could be
//! mistaken for progress, and the same command run again trains normally —
//! beside the twin that is not interrupted. (Interrupts mid-epoch and during
//! a checkpoint write are covered in the train crate's kill_resume tests.)

#![cfg(unix)]

use std::io::{BufRead, BufReader};
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

fn temp(tag: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("certgrad-cli-int-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

extern "C" {
    fn kill(pid: i32, sig: i32) -> i32;
    fn signal(signum: i32, handler: usize) -> usize;
}
const SIGINT: i32 = 2;
const SIG_DFL: usize = 0;

/// A training command whose certification takes a few seconds (a batch-32
/// f64 tie) and whose training is one short epoch.
fn train_cmd(run: &std::path::Path) -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_certgrad"));
    c.args([
        "train",
        "--epochs",
        "1",
        "--batch",
        "32",
        "--limit-train",
        "64",
        "--limit-test",
        "64",
        "--certify-batch",
        "32",
        "--quiet",
        "--out",
    ])
    .arg(run);
    c
}

#[test]
fn ctrl_c_while_certifying_ends_at_once_and_leaves_nothing_to_resume() {
    let d = temp("certify");
    let run = d.join("run");
    let mut cmd = train_cmd(&run);
    // A test run in the background of a non-interactive shell (`cargo test
    // &`, `nohup .ci/run &`) starts with SIGINT ignored, and the child
    // would inherit that; the user at a terminal has the default action.
    // SAFETY: `signal` is async-signal-safe, as `pre_exec` requires.
    unsafe {
        cmd.pre_exec(|| {
            signal(SIGINT, SIG_DFL);
            Ok(())
        })
    };
    let mut child = cmd
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // The "step @…" line is printed just before certification starts.
    let mut err = BufReader::new(child.stderr.take().unwrap());
    let mut seen = String::new();
    loop {
        let mut line = String::new();
        if err.read_line(&mut line).unwrap() == 0 {
            panic!("train ended before certifying: {seen}");
        }
        seen.push_str(&line);
        if line.starts_with("step @") {
            break;
        }
    }
    let sent = Instant::now();
    assert_eq!(unsafe { kill(child.id() as i32, SIGINT) }, 0);
    let status = child.wait().unwrap();
    let took = sent.elapsed();
    let mut out = String::new();
    std::io::Read::read_to_string(&mut child.stdout.take().unwrap(), &mut out).unwrap();
    assert!(
        status.signal() == Some(SIGINT) || status.code() == Some(130),
        "ended by Ctrl-C: {status:?}"
    );
    assert!(
        !out.contains("certify:"),
        "certification did not finish: {out}"
    );
    assert!(
        took < Duration::from_secs(5),
        "ended at once, not after {took:?}"
    );
    // Nothing trained, so nothing to resume from — and resume says so.
    let ckpt_files: Vec<_> = std::fs::read_dir(&run)
        .map(|r| {
            r.filter_map(|e| e.ok())
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .filter(|n| n.contains("checkpoint") || n.ends_with(".safetensors"))
                .collect()
        })
        .unwrap_or_default();
    assert!(ckpt_files.is_empty(), "no checkpoint: {ckpt_files:?}");
    let o = Command::new(env!("CARGO_BIN_EXE_certgrad"))
        .args(["train", "--resume", "--out"])
        .arg(&run)
        .output()
        .unwrap();
    let e = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{e}");
    assert!(e.contains("no checkpoint to resume"), "{e}");

    // The twin: the same command, not interrupted, certifies and trains.
    let o = train_cmd(&run).output().unwrap();
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert!(out.contains("certify: CERTIFIED"), "{out}");
}
