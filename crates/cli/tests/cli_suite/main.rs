//! The CLI's integration tests in one binary: each runs the built `certgrad`
//! binary (bench, certify controls, certify-step, check/demo/eval/bound,
//! diff, flags honoured or refused, input errors, run margins and types).
//!
//! One binary per crate instead of one per file: each file below is a module,
//! so its tests are named `FILE::TEST` (`cargo test -p certgrad --test
//! cli_suite FILE::`).

mod bench;
mod certify_controls;
mod certify_step;
mod commands;
mod diff;
mod flags;
mod input_errors;
mod interrupts;
mod run_margins;
mod run_types;
mod train_certify;
