//! The one error type of the train crate: a message meant for the user, and
//! which part of training it came from (the data, a checkpoint, or the run
//! itself), so a caller can tell a bad data directory or a torn checkpoint
//! from a failed step without reading the words.

use std::fmt;

/// A training failure: what went wrong, in words, and where.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum TrainError {
    /// Finding, reading or parsing a data set.
    Data(String),
    /// Reading, parsing, writing or restoring a checkpoint.
    Checkpoint(String),
    /// The run: its config, rendering and preparing its functions, the
    /// engine, the step's outputs, the metrics log and the plot.
    Run(String),
    /// Stopped on request (SIGINT) at an update boundary, after writing a
    /// checkpoint: the message says where and how to continue.
    Interrupted(String),
}

impl TrainError {
    /// The message the user reads (the same text [`fmt::Display`] prints).
    pub fn message(&self) -> &str {
        match self {
            TrainError::Data(m)
            | TrainError::Checkpoint(m)
            | TrainError::Run(m)
            | TrainError::Interrupted(m) => m,
        }
    }
}

impl fmt::Display for TrainError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.message())
    }
}

impl std::error::Error for TrainError {}
