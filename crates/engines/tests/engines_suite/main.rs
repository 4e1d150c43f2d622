//! engines' integration tests in one binary: IREE and PJRT against the native
//! executor (each skips loudly when its tools are absent).
//!
//! One binary per crate instead of one per file: each file below is a module,
//! so its tests are named `FILE::TEST` (`cargo test -p engines --test
//! engines_suite FILE::`). npy_fuzz stays its own binary (tests/npy_fuzz.rs):
//! it swaps the process-wide panic hook and runs for a wall-clock budget.

mod iree;
mod pjrt;

/// Reports the running test as skipped: one `SKIPPED: TEST: REASON` line
/// written to the process's stderr itself, past the harness's capture, so it
/// shows in every run (cargo still counts the test as passed; CI counts
/// these lines and lists them after the suite).
pub fn skipped(reason: &str) {
    use std::io::Write;
    let thread = std::thread::current();
    let test = thread.name().unwrap_or("(unnamed test)");
    // One write, so that no other output lands inside the line.
    let line = format!("SKIPPED: {test}: {reason}\n");
    let _ = std::io::stderr().write_all(line.as_bytes());
}
