//! den: the denotation of certgrad's StableHLO subset.
//!
//! One evaluator, generic over the scalar type, follows the StableHLO
//! specification op by op; the same code gives f64/f32/bf16 execution,
//! forward-mode derivatives (dual numbers), exact rational arithmetic and the
//! decision margins the certifier needs. `fast` holds f32 kernels for the heavy
//! ops, which must agree with the generic path. The compiled f32 executor
//! built on these kernels is the `exec` crate.

pub mod eval;
pub mod fast;
pub mod scalar;
pub mod special;
pub mod tensor;
pub mod value;

pub use eval::{eval_func, eval_replicas, EvalError, EvalOptions, Evaluation, Margin, NonFinite};
pub use scalar::{Bf16, Dual, Exact, Ieee, NotExact, Scalar};
pub use tensor::{row_major_strides, Tensor};
pub use value::Value;

/// Reports the running test as skipped: one `SKIPPED: TEST: REASON` line
/// written to the process's stderr itself, past the harness's capture, so it
/// shows in every run (cargo still counts the test as passed; CI counts
/// these lines and lists them after the suite).
#[cfg(test)]
pub(crate) fn skipped(reason: &str) {
    use std::io::Write;
    let thread = std::thread::current();
    let test = thread.name().unwrap_or("(unnamed test)");
    // One write, so that no other output lands inside the line.
    let line = format!("SKIPPED: {test}: {reason}\n");
    let _ = std::io::stderr().write_all(line.as_bytes());
}
