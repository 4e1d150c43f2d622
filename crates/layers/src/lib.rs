//! layers: CertLayers — per op, the forward, the hand-written backward map, the
//! kink sites and the parameters, emitted into the IR — and their combinators.
//! Conventions (padding mode, BN world, GELU form) are typed fields of the op,
//! never defaults.

pub mod block_parts;
pub mod blocks;
pub mod blocks_convnext;
pub mod blocks_mobile;
pub mod blocks_vit;
pub mod combinators;
pub mod droppath;
pub mod emit;
pub mod layer;
pub mod net;
pub mod ops;
pub mod trainstep;

pub use combinators::{compose, Chain, Projection, ReplacedBackward, Residual};
pub use emit::Emit;
pub use layer::{
    tie_funcs, BlockBn, CertLayer, Grads, Init, KinkAt, KinkKind, KinkSite, LayerError, ParamSpec,
    Saved, Sites, TieFuncs,
};
