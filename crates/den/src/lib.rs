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
