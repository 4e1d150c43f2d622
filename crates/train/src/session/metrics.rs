//! The metrics log of a run directory, `metrics.jsonl`: one JSON line per
//! update and per epoch, appended as the run goes and cut back on resume to
//! the length the checkpoint recorded.

use super::terr;
use crate::error::TrainError;
use serde::{Deserialize, Serialize};
use std::fs::{File, OpenOptions};
use std::io::Write;
use std::path::Path;

/// One update, as logged.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct StepRecord {
    pub step: u64,
    pub epoch: u64,
    pub lr: f64,
    pub loss: f64,
    /// Correct predictions on the batch (before the update), when scored.
    pub correct: Option<u64>,
}

/// One epoch, as logged.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct EpochRecord {
    pub epoch: u64,
    pub steps: u64,
    pub train_loss: f64,
    pub train_acc: Option<f64>,
    pub test_acc: f64,
    /// Wall time of the epoch (excluded from reproducibility comparisons).
    pub seconds: f64,
}

/// A line of `metrics.jsonl`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum MetricsLine {
    Step(StepRecord),
    Epoch(EpochRecord),
}

pub const METRICS_FILE: &str = "metrics.jsonl";

/// The metrics log of a run directory, positioned for appending: created
/// empty for a fresh run; for a resumed run, cut back to the length the
/// checkpoint recorded (lines written after it belong to updates that are
/// about to be redone).
pub(super) fn open_metrics(run_dir: &Path, resume_len: Option<u64>) -> Result<File, TrainError> {
    let p = run_dir.join(METRICS_FILE);
    let io = |e: std::io::Error| TrainError::Run(format!("{}: {e}", p.display()));
    match resume_len {
        None => File::create(&p).map_err(io),
        Some(len) => {
            let f = OpenOptions::new().append(true).open(&p).map_err(io)?;
            let have = f.metadata().map_err(io)?.len();
            if have < len {
                return terr(format!(
                    "{}: {have} bytes, the checkpoint recorded {len} (the log was truncated)",
                    p.display()
                ));
            }
            f.set_len(len).map_err(io)?;
            Ok(f)
        }
    }
}

pub(super) fn log_line(f: &mut File, line: &MetricsLine) -> Result<u64, TrainError> {
    let mut s = serde_json::to_string(line).map_err(|e| TrainError::Run(e.to_string()))?;
    s.push('\n');
    f.write_all(s.as_bytes())
        .map_err(|e| TrainError::Run(format!("writing the metrics log: {e}")))?;
    Ok(f.metadata().map(|m| m.len()).unwrap_or(0))
}

/// The epoch records of a metrics log.
pub fn read_epochs(path: &Path) -> Result<Vec<EpochRecord>, TrainError> {
    Ok(read_metrics(path)?
        .into_iter()
        .filter_map(|l| match l {
            MetricsLine::Epoch(e) => Some(e),
            _ => None,
        })
        .collect())
}

/// Every line of a metrics log.
pub fn read_metrics(path: &Path) -> Result<Vec<MetricsLine>, TrainError> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| TrainError::Run(format!("{}: {e}", path.display())))?;
    text.lines()
        .enumerate()
        .map(|(i, l)| {
            serde_json::from_str(l)
                .map_err(|e| TrainError::Run(format!("{}:{}: {e}", path.display(), i + 1)))
        })
        .collect()
}
