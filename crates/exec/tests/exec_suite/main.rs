//! exec's integration tests in one binary: plan-vs-evaluator agreement, pooling
//! kernels, reductions that store what they sum, slice views and concatenation, structured control flow,
//! all-reduce and the memory limit.
//!
//! One binary per crate instead of one per file: each file below is a module,
//! so its tests are named `FILE::TEST` (`cargo test -p exec --test exec_suite
//! FILE::`).

mod agreement;
mod all_reduce;
mod bn_passes;
mod differential;
mod dot_bias;
mod dot_layouts;
mod generic_step;
mod memory_limit;
mod pool_kernels;
mod reduce_store;
mod slice_concat;
mod structured;
mod uniform_operands;
