//! ir's integration tests in one binary: the parser, printer, type inference,
//! verifier, passes, size limits and structured ops.
//!
//! One binary per crate instead of one per file: each file below is a module,
//! so its tests are named `FILE::TEST` (`cargo test -p ir --test ir_suite
//! FILE::`). parse_fuzz stays its own binary (tests/parse_fuzz.rs): it swaps
//! the process-wide panic hook and runs for a wall-clock budget.

mod elementwise_chlo_syntax;
mod infer;
mod parse;
mod parse_speed;
mod passes;
mod rng_streams;
mod roundtrip;
mod sizes;
mod structured;
