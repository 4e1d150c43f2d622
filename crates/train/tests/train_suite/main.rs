//! train's integration tests in one binary: data readers, the host loop,
//! recipes, data parallelism and input checks.
//!
//! One binary per crate instead of one per file: each file below is a module,
//! so its tests are named `FILE::TEST` (`cargo test -p train --test train_suite
//! FILE::`). kill_resume (re-executes its binary by exact test name,
//! SIGKILL/SIGINT, wall-clock waits) and reader_fuzz (process-wide panic hook,
//! wall-clock budget) stay their own binaries.

mod common;
mod data_parallel;
mod data_readers;
mod host_loop;
mod input_checks;
mod recipes;
