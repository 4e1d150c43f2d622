//! The epoch loop of a run: updates with a progress bar per epoch, a line of
//! the metrics log per update and per epoch, checkpoints every K updates and
//! at each epoch end, a checkpoint and a stop when interrupted
//! (`crate::interrupt`), and the summary of the finished run.

use super::metrics::{
    log_line, open_metrics, read_epochs, EpochRecord, MetricsLine, StepRecord, METRICS_FILE,
};
use super::Session;
use crate::checkpoint::checkpoint_path;
use crate::error::TrainError;
use std::fs::File;
use std::path::{Path, PathBuf};
use std::time::Instant;

/// How [`run`] reports and what it may be asked to do between steps.
pub struct RunOptions<'a> {
    /// Draw an indicatif progress bar per epoch on stderr.
    pub progress: bool,
    /// Called after each update (and after its checkpoint, if one was due).
    pub after_step: Option<&'a mut dyn FnMut(&StepRecord)>,
    /// Called after each epoch.
    pub after_epoch: Option<&'a mut dyn FnMut(&EpochRecord)>,
}

/// What a finished run reports.
#[derive(Clone, Debug)]
pub struct RunSummary {
    pub epochs: Vec<EpochRecord>,
    pub seconds: f64,
    pub steps: u64,
    pub examples_per_second: f64,
    pub checkpoint: PathBuf,
    pub metrics: PathBuf,
}

fn save(session: &Session, log: &mut File, run_dir: &Path) -> Result<(), TrainError> {
    // The log reaches the disk before the checkpoint that points into it.
    log.sync_data()
        .map_err(|e| TrainError::Run(format!("syncing the metrics log: {e}")))?;
    let len = log.metadata().map(|m| m.len()).unwrap_or(0);
    session
        .to_checkpoint(len)?
        .write_atomic(&checkpoint_path(run_dir))?;
    Ok(())
}

/// The stop on an interrupt: a checkpoint of the state after the last
/// complete update, then the error saying where it is.
fn interrupted(session: &Session, log: &mut File, run_dir: &Path) -> TrainError {
    if let Err(e) = save(session, log, run_dir) {
        return TrainError::Interrupted(format!(
            "interrupted at update {}, but the checkpoint could not be written: {e}",
            session.state.step
        ));
    }
    TrainError::Interrupted(format!(
        "interrupted: checkpoint of update {} (epoch {}, batch {} of {}) written to {}; \
         continue with --resume --out {}",
        session.state.step,
        session.state.epoch + 1,
        session.state.batch_in_epoch,
        session.steps_per_epoch(),
        checkpoint_path(run_dir).display(),
        run_dir.display()
    ))
}

/// Trains `session` to the end of its configured epochs in `run_dir`,
/// checkpointing every `checkpoint_every` updates and at each epoch end.
/// `resumed_metrics_len`: `Some(len)` when the session was restored from the
/// run directory's checkpoint.
pub fn run(
    session: &mut Session,
    run_dir: &Path,
    resumed_metrics_len: Option<u64>,
    mut opts: RunOptions,
) -> Result<RunSummary, TrainError> {
    std::fs::create_dir_all(run_dir)
        .map_err(|e| TrainError::Run(format!("{}: {e}", run_dir.display())))?;
    let mut log = open_metrics(run_dir, resumed_metrics_len)?;
    let t0 = Instant::now();
    let mut examples = 0u64;
    let spe = session.steps_per_epoch();
    let b = session.cfg.batch as u64;
    while session.state.epoch < session.cfg.epochs {
        let e0 = Instant::now();
        let epoch = session.state.epoch;
        let bar = if opts.progress {
            indicatif::ProgressBar::new(spe * b)
        } else {
            indicatif::ProgressBar::hidden()
        };
        bar.set_style(
            indicatif::ProgressStyle::with_template(
                "{prefix} [{bar:28}] {pos}/{len} {msg} {per_sec} ETA {eta}",
            )
            .expect("valid template")
            .progress_chars("=> "),
        );
        bar.set_prefix(format!("epoch {}/{}", epoch + 1, session.cfg.epochs));
        bar.set_position(session.state.batch_in_epoch * b);
        bar.reset_eta();
        while session.state.batch_in_epoch < spe {
            let rec = session.train_step()?;
            examples += b;
            log_line(&mut log, &MetricsLine::Step(rec.clone()))?;
            let st = &session.state;
            let acc = if session.train_logits.is_some() {
                format!(
                    " acc {:.1}%",
                    100.0 * st.correct as f64 / st.seen.max(1) as f64
                )
            } else {
                String::new()
            };
            bar.set_message(format!(
                "loss {:.4}{acc} lr {:.2e}",
                st.loss_sum / st.batch_in_epoch as f64,
                rec.lr
            ));
            bar.inc(b);
            let k = session.cfg.checkpoint_every;
            if k > 0 && rec.step % k == 0 && session.state.batch_in_epoch < spe {
                save(session, &mut log, run_dir)?;
            }
            if let Some(f) = opts.after_step.as_mut() {
                f(&rec);
            }
            if crate::interrupt::requested() {
                return Err(interrupted(session, &mut log, run_dir));
            }
        }
        bar.finish_and_clear();
        let rec = session.finish_epoch(e0.elapsed().as_secs_f64())?;
        log_line(&mut log, &MetricsLine::Epoch(rec.clone()))?;
        save(session, &mut log, run_dir)?;
        if opts.progress {
            eprintln!(
                "epoch {}/{}: train loss {:.4}{}, test acc {:.2}% ({:.1} s)",
                rec.epoch + 1,
                session.cfg.epochs,
                rec.train_loss,
                rec.train_acc
                    .map(|a| format!(", train acc {:.2}%", 100.0 * a))
                    .unwrap_or_default(),
                100.0 * rec.test_acc,
                rec.seconds
            );
        }
        if let Some(f) = opts.after_epoch.as_mut() {
            f(&rec);
        }
        if crate::interrupt::requested() && session.state.epoch < session.cfg.epochs {
            return Err(interrupted(session, &mut log, run_dir));
        }
    }
    let seconds = t0.elapsed().as_secs_f64();
    Ok(RunSummary {
        epochs: read_epochs(&run_dir.join(METRICS_FILE))?,
        seconds,
        steps: session.state.step,
        examples_per_second: examples as f64 / seconds.max(1e-9),
        checkpoint: checkpoint_path(run_dir),
        metrics: run_dir.join(METRICS_FILE),
    })
}
