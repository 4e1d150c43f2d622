//! cert: ties and certificates. A tie checks, on the emitted IR, that a
//! backward map IS the VJP of its forward, with an oracle (dual-number forward
//! mode) that never uses the backward map.

pub mod rng;
pub mod tie;

pub use tie::{
    certify_layer, Evidence, MarginReport, SiteCoverage, TieOptions, TieReport, Verdict,
};
