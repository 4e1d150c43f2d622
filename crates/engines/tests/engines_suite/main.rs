//! engines' integration tests in one binary: IREE and PJRT against the native
//! executor (each skips loudly when its tools are absent).
//!
//! One binary per crate instead of one per file: each file below is a module,
//! so its tests are named `FILE::TEST` (`cargo test -p engines --test
//! engines_suite FILE::`). npy_fuzz stays its own binary (tests/npy_fuzz.rs):
//! it swaps the process-wide panic hook and runs for a wall-clock budget.

mod iree;
mod pjrt;
