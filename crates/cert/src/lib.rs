//! cert: ties and certificates. A tie checks, on the emitted IR, that a
//! backward map IS the VJP of its forward, with an oracle (dual-number forward
//! mode) that never uses the backward map.

pub mod bound;
pub mod dp;
pub mod drop_path;
pub mod fused_step;
pub mod net;
pub mod pair;
pub mod probe;
pub mod step;
pub mod tie;

pub use net::{certify_net, check_eval_drift, net_tie_options, NetCertificate};
pub use tie::{
    certify_layer, BlockResult, Evidence, MarginReport, SiteCoverage, SiteMargin, TieOptions,
    TieReport, Verdict,
};
