//! den's integration tests in one binary: the generic evaluator's ops and
//! scalars, the fast kernels' agreement with it, replicas and non-finite
//! values.
//!
//! One binary per crate instead of one per file: each file below is a module,
//! so its tests are named `FILE::TEST` (`cargo test -p den --test den_suite
//! FILE::`).

mod common;
mod elem_types;
mod elementwise_chlo_ops;
mod eval_ops;
mod fast_agreement;
mod fast_conv_forms;
mod fast_f64;
mod fast_pool2d;
mod in_place;
mod inline_calls;
mod non_finite;
mod replica;
mod scalars;
mod structured_ops;
