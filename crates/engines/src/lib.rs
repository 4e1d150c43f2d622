//! certgrad's execution engines: one interface over the native executor,
//! XLA through a PJRT plugin, and IREE.

pub mod engine;
pub mod error;
pub mod host;
pub mod iree;
pub mod native;
pub mod npy;
pub mod pjrt;
pub mod select;
