//! Crash safety: a run SIGKILLed mid-epoch (a child process: this test binary
//! re-executed in child mode) and resumed from its last checkpoint reproduces,
//! bit for bit, the metrics and final state of the uninterrupted run. A run
//! sent SIGINT mid-epoch checkpoints the update it was at before exiting, so
//! nothing is lost; one interrupted at an epoch's end, likewise; a checkpoint
//! write torn by a kill leaves the previous checkpoint in force.

#[path = "train_suite/common/mod.rs"]
mod common;

use common::*;
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};
use train::{read_metrics, run, Checkpoint, MetricsLine, RunOptions, Session, StepRecord};

const CHILD_ENV: &str = "CERTGRAD_TRAIN_KILL_CHILD";
/// 48 examples / batch 4 = 12 updates an epoch; checkpoints every 5 updates.
/// The child stops responding after update 17 (epoch 2, past the checkpoint
/// at 15 and before the one at 20), with two log lines past the checkpoint.
const HANG_AFTER: u64 = 17;

fn train_in(base: &Path, hang: bool) {
    let mut s = Session::new(tiny_config(&base.join("data"))).unwrap();
    let marker = base.join("hung");
    let mut hook = |r: &StepRecord| {
        if hang && r.step == HANG_AFTER {
            std::fs::write(&marker, b"").unwrap();
            loop {
                std::thread::sleep(Duration::from_secs(1));
            }
        }
    };
    run(
        &mut s,
        &base.join("run"),
        None,
        RunOptions {
            progress: false,
            after_step: Some(&mut hook),
            after_epoch: None,
        },
    )
    .unwrap();
}

/// Child mode only: train until update 17, hang. Ignored in a normal run
/// (it is not a test of its own); the SIGKILL test runs it with `--ignored`.
#[test]
#[ignore = "child process of the SIGKILL test, which runs it"]
fn child_trains_until_killed() {
    if let Ok(base) = std::env::var(CHILD_ENV) {
        train_in(Path::new(&base), true);
    }
}

const INT_CHILD_ENV: &str = "CERTGRAD_TRAIN_SIGINT_CHILD";
/// The SIGINT child waits at update 8 (past the checkpoint at 5) for the signal.
const INTERRUPT_AT: u64 = 8;

/// Child mode only: train with the CLI's SIGINT handler installed; at update
/// 8 mark the spot and wait for SIGINT, which must end the run with a
/// checkpoint and `TrainError::Interrupted`. Ignored in a normal run; the
/// SIGINT test runs it with `--ignored`.
#[test]
#[ignore = "child process of the SIGINT test, which runs it"]
fn child_trains_until_interrupted() {
    let Ok(base) = std::env::var(INT_CHILD_ENV) else {
        return;
    };
    let base = Path::new(&base);
    assert!(train::interrupt::install_sigint_handler());
    let mut s = Session::new(tiny_config(&base.join("data"))).unwrap();
    let marker = base.join("waiting");
    let mut hook = |r: &StepRecord| {
        if r.step == INTERRUPT_AT {
            std::fs::write(&marker, b"").unwrap();
            let t0 = Instant::now();
            while !train::interrupt::requested() {
                assert!(t0.elapsed() < Duration::from_secs(120), "no SIGINT came");
                std::thread::sleep(Duration::from_millis(5));
            }
        }
    };
    let e = run(
        &mut s,
        &base.join("run"),
        None,
        RunOptions {
            progress: false,
            after_step: Some(&mut hook),
            after_epoch: None,
        },
    )
    .expect_err("an interrupted run ends in an error");
    assert!(matches!(e, train::TrainError::Interrupted(_)), "{e:?}");
    assert!(e.message().contains("checkpoint of update 8"), "{e}");
    std::fs::write(base.join("stopped"), e.message()).unwrap();
}

/// Metrics with the wall-clock field zeroed (the only non-deterministic one).
fn metrics(run_dir: &Path) -> Vec<MetricsLine> {
    read_metrics(&run_dir.join("metrics.jsonl"))
        .unwrap()
        .into_iter()
        .map(|l| match l {
            MetricsLine::Epoch(mut e) => {
                e.seconds = 0.0;
                MetricsLine::Epoch(e)
            }
            s => s,
        })
        .collect()
}

#[test]
fn sigkill_mid_epoch_then_resume_reproduces_the_uninterrupted_run() {
    let reference = temp_dir("kill-ref");
    write_quadrant_idx(&reference.join("data").tap_mkdir(), 48, 16);
    train_in(&reference, false);

    let base = temp_dir("kill-child");
    write_quadrant_idx(&base.join("data").tap_mkdir(), 48, 16);
    let mut child = Command::new(std::env::current_exe().unwrap())
        .args([
            "child_trains_until_killed",
            "--exact",
            "--ignored",
            "--test-threads=1",
        ])
        .env(CHILD_ENV, &base)
        .stdout(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let t0 = Instant::now();
    while !base.join("hung").exists() {
        if let Some(st) = child.try_wait().unwrap() {
            panic!("the child exited ({st}) before reaching update {HANG_AFTER}");
        }
        assert!(
            t0.elapsed() < Duration::from_secs(120),
            "the child never got there"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    child.kill().unwrap(); // SIGKILL on Unix
    child.wait().unwrap();

    let run_dir = base.join("run");
    let ck = Checkpoint::read(&train::checkpoint_path(&run_dir)).unwrap();
    assert_eq!(ck.meta_u64("step").unwrap(), 15, "the last checkpoint");
    assert_eq!(ck.meta_u64("batch_in_epoch").unwrap(), 3, "mid-epoch");
    let logged = metrics(&run_dir);
    let steps_logged = logged
        .iter()
        .filter(|l| matches!(l, MetricsLine::Step(_)))
        .count();
    assert_eq!(
        steps_logged as u64, HANG_AFTER,
        "log lines past the checkpoint"
    );

    let (mut s, len) = train::resume(&run_dir).unwrap();
    assert_eq!(s.state.step, 15);
    run(
        &mut s,
        &run_dir,
        Some(len),
        RunOptions {
            progress: false,
            after_step: None,
            after_epoch: None,
        },
    )
    .unwrap();

    let want = metrics(&reference.join("run"));
    let got = metrics(&run_dir);
    assert_eq!(want.len(), 36 + 3);
    assert_eq!(got, want, "the resumed run's metrics differ");
    let a = Checkpoint::read(&train::checkpoint_path(&reference.join("run"))).unwrap();
    let b = Checkpoint::read(&train::checkpoint_path(&run_dir)).unwrap();
    for (name, (shape, data)) in &a.tensors {
        let (s2, d2) = &b.tensors[name];
        assert_eq!(shape, s2);
        let bits = |d: &[f32]| d.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
        assert_eq!(bits(data), bits(d2), "final {name} differs");
    }
    // The resumed child ran only from the checkpoint on; the reference's
    // numbers differ from a run with another seed (the comparison can fail).
    let mut other = tiny_config(&reference.join("data"));
    other.seed += 1;
    let mut o = Session::new(other).unwrap();
    let r = o.train_step().unwrap();
    let MetricsLine::Step(first) = &want[0] else {
        panic!("the log starts with a step")
    };
    assert_ne!(r.loss, first.loss);
}

#[cfg(unix)]
#[test]
fn sigint_mid_epoch_checkpoints_that_update_and_resume_reproduces_the_run() {
    let reference = temp_dir("int-ref");
    write_quadrant_idx(&reference.join("data").tap_mkdir(), 48, 16);
    train_in(&reference, false);

    let base = temp_dir("int-child");
    write_quadrant_idx(&base.join("data").tap_mkdir(), 48, 16);
    let mut child = Command::new(std::env::current_exe().unwrap())
        .args([
            "child_trains_until_interrupted",
            "--exact",
            "--ignored",
            "--test-threads=1",
        ])
        .env(INT_CHILD_ENV, &base)
        .stdout(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let t0 = Instant::now();
    while !base.join("waiting").exists() {
        if let Some(st) = child.try_wait().unwrap() {
            panic!("the child exited ({st}) before update {INTERRUPT_AT}");
        }
        assert!(
            t0.elapsed() < Duration::from_secs(120),
            "the child never got there"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    let sent = Command::new("kill")
        .args(["-INT", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(sent.success());
    let st = child.wait().unwrap();
    assert!(st.success(), "the child did not stop cleanly: {st}");
    let said = std::fs::read_to_string(base.join("stopped")).unwrap();
    assert!(said.contains("--resume"), "{said}");

    let run_dir = base.join("run");
    let ck = Checkpoint::read(&train::checkpoint_path(&run_dir)).unwrap();
    // Update 8, not the periodic checkpoint at 5: nothing was lost.
    assert_eq!(ck.meta_u64("step").unwrap(), INTERRUPT_AT);
    assert_eq!(ck.meta_u64("batch_in_epoch").unwrap(), INTERRUPT_AT);
    let (mut s, len) = train::resume(&run_dir).unwrap();
    assert_eq!(s.state.step, INTERRUPT_AT);
    run(
        &mut s,
        &run_dir,
        Some(len),
        RunOptions {
            progress: false,
            after_step: None,
            after_epoch: None,
        },
    )
    .unwrap();
    assert_eq!(metrics(&run_dir), metrics(&reference.join("run")));
}

#[test]
fn a_checkpoint_write_torn_by_a_kill_leaves_the_previous_one_in_force() {
    // A SIGKILL inside `write_atomic` stops before the rename: what is left
    // is the old checkpoint and a partial `.checkpoint.safetensors.tmp`.
    let base = temp_dir("torn");
    write_quadrant_idx(&base.join("data").tap_mkdir(), 48, 16);
    let run_dir = base.join("run");
    let mut s = Session::new(tiny_config(&base.join("data"))).unwrap();
    // Unwinds out of `run` after update 6 (resume_unwind: no panic message).
    let mut stop_at_6 = |r: &StepRecord| {
        if r.step == 6 {
            std::panic::resume_unwind(Box::new("stop"));
        }
    };
    let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        run(
            &mut s,
            &run_dir,
            None,
            RunOptions {
                progress: false,
                after_step: Some(&mut stop_at_6),
                after_epoch: None,
            },
        )
    }));
    let ck_path = train::checkpoint_path(&run_dir);
    let intact = std::fs::read(&ck_path).unwrap();
    let tmp = run_dir.join(".checkpoint.safetensors.tmp");
    std::fs::write(&tmp, &intact[..intact.len() / 3]).unwrap();
    let (mut s, len) = train::resume(&run_dir).expect("the intact checkpoint resumes");
    assert_eq!(s.state.step, 5);
    run(
        &mut s,
        &run_dir,
        Some(len),
        RunOptions {
            progress: false,
            after_step: None,
            after_epoch: None,
        },
    )
    .unwrap();
    assert!(!tmp.exists(), "the next write replaced the torn temp file");
    let reference = temp_dir("torn-ref");
    write_quadrant_idx(&reference.join("data").tap_mkdir(), 48, 16);
    train_in(&reference, false);
    assert_eq!(metrics(&run_dir), metrics(&reference.join("run")));
}

trait TapMkdir {
    fn tap_mkdir(self) -> Self;
}
impl TapMkdir for std::path::PathBuf {
    fn tap_mkdir(self) -> Self {
        std::fs::create_dir_all(&self).unwrap();
        self
    }
}
