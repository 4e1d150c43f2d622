//! layers' integration tests in one binary: built-in and file nets, MobileNets,
//! ResNet steps, the rendered train step and its data-parallel form.
//!
//! One binary per crate instead of one per file: each file below is a module,
//! so its tests are named `FILE::TEST` (`cargo test -p layers --test
//! layers_suite FILE::`).

mod convnext_nets;
mod dp_render;
mod mobile_nets;
mod net_file_checks;
mod net_files;
mod resnet_step;
mod trainstep;
mod vit_nets;
