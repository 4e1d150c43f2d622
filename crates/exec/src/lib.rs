//! exec: certgrad's compiled f32 executor. A function of an `ir::Module` is
//! turned once into a straight-line schedule of steps (fused elementwise loops, fused
//! add-reductions, the fast kernels for convolution / dot_general / pooling,
//! and the generic evaluator for single ops it has no step for), with buffers
//! released by liveness into a size-keyed pool so a repeated run neither keeps
//! every intermediate alive nor re-zeroes fresh pages.
//!
//! It computes what `eval_func::<f32>` computes: elementwise ops are the same
//! f32 operations (bit-identical; exp, tanh and logistic are f32 polynomials
//! within 1, 2 and 3 ulp, see `vmath`); convolutions, dots and sums accumulate in
//! a different order (the fast kernels' agreement bound). Reshape is free
//! (the result shares its operand's buffer); transpose, reverse and
//! broadcast_in_dim are strided reads fused into their consumers. Calls are
//! inlined first, in regions too (`passes::inline`); the regions of `while`,
//! `case` and `if` are compiled into sub-plans that their control step runs
//! (`control`), so a loop body is fused like any function; other ops with
//! regions (sort, scatter, map, …) run one op at a time on the generic
//! evaluator. Only a function whose calls cannot be inlined runs on the
//! generic evaluator (fast kernels) as a whole.
//!
//! [`Plan`] is the API (`plan`); [`ReplicaPlan`] (`replicas`) runs a
//! data-parallel function as R replicas over one plan per stage between its
//! `all_reduce`s, the collectives folded in the host. `compile` lowers a function to a
//! `schedule` of steps, one module per op family; `passes` rewrite the
//! function before lowering and the steps after it; `runtime` runs the
//! steps over a buffer pool (`control` the while/case/if steps); `fused` (elementwise loops) and `pool` (tiling
//! max-pool) are the plan's own kernels, den's fast kernels the others.
//! [`Rewrites`] switches the rewrites off one by one (bisecting a wrong plan).

mod compile;
mod control;
mod fused;
mod passes;
mod plan;
mod pool;
mod replicas;
mod rewrites;
mod runtime;
mod schedule;
pub mod vmath;

pub use plan::{OpTime, Plan, StepTime};
pub use replicas::ReplicaPlan;
pub use rewrites::{Planted, Rewrites};
