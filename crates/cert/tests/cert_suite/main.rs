//! cert's integration tests in one binary: leaf, block, whole-net and
//! train-step ties, drift guards and check-vjp pairs, each beside its negative
//! controls.
//!
//! One binary per crate instead of one per file: each file below is a module,
//! so its tests are named `FILE::TEST` (`cargo test -p cert --test cert_suite
//! FILE::`).

mod attention_se_ties;
mod bound;
mod combinators;
mod common;
mod conv_ties;
mod convnext_ties;
mod dp_ties;
mod eval_drift;
mod fused_steps;
mod heavy_ball_ties;
mod mobile_net_ties;
mod mobile_step_drift;
mod mobile_ties;
mod net_file_drift;
mod net_ties;
mod norm_pool_ties;
mod pair_ties;
mod pool_forms;
mod resnet_step_stats;
mod resnet_ties;
mod special_pair;
mod stem_pool_drift;
mod step_ties;
mod structured_pairs;
mod tail_ties;
mod vit_drop_path;
mod vit_ties;
