//! cert's catalog tests that bound their own wall time (attention/SE,
//! norm/pool/activation/loss), kept out of cert_suite so its load does not
//! count against them.
//!
//! One binary per crate instead of one per file: each file below is a module,
//! so its tests are named `FILE::TEST` (`cargo test -p cert --test cert_timed
//! FILE::`).

mod attention_se_ties;
#[path = "../cert_suite/common/mod.rs"]
mod common;
mod norm_pool_ties;
