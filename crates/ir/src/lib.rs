//! ir: the StableHLO subset certgrad emits, prints, parses and verifies.
//!
//! The layering inside the crate: `types` (element/tensor types) → `ops` (the op
//! vocabulary with normalised attributes) → `module` (SSA container) → `infer`
//! (result types per op) → `builder`, `verify`, `print`, `parse`.

pub mod builder;
pub mod infer;
pub mod limits;
pub mod literal;
pub mod module;
pub mod ops;
pub mod parse;
pub mod passes;
pub mod print;
pub mod rng;
#[cfg(feature = "testgen")]
pub mod testgen;
pub mod types;
pub mod verify;

pub use builder::FuncBuilder;
pub use infer::{infer_result_types, TypeError};
pub use module::{Block, Func, FuncResult, Module, Op, Param, SrcLoc, ValueId, Visibility};
pub use ops::*;
pub use types::{ElemType, TensorType};
pub use verify::{verify_module, VerifyError};
