//! The one error type of the engines: a message meant for the user, carrying
//! the engine's own text (e.g. the PJRT plugin's error message) verbatim.

use std::fmt;

/// An engine failure: what went wrong, in words, with the engine's message.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EngineError(pub String);

impl EngineError {
    pub fn new(msg: impl Into<String>) -> Self {
        EngineError(msg.into())
    }
}

impl fmt::Display for EngineError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for EngineError {}
