//! What every block family's builder shares: the layer swap negative
//! controls use to inject one bug into one named layer, the chain that
//! passes each layer through it as a block is assembled, and the field
//! checks of the families' specs.

use crate::combinators::Chain;
use crate::layer::{CertLayer, LayerError};

/// Replaces a block's layer while it is built: `(layer name, layer) → layer`.
/// Negative controls use it to inject one bug into one named layer of a
/// block that is otherwise built by the same code as the real one.
pub type LayerSwap<'a> = &'a mut dyn FnMut(&str, Box<dyn CertLayer>) -> Box<dyn CertLayer>;

/// A block's chain as it is assembled: each layer is pushed under its own
/// name after passing through the swap under its block-wide name
/// (`prefix.name`, or `name` where the prefix is empty).
pub(crate) struct SwapChain<'a> {
    pub chain: Chain,
    prefix: &'static str,
    swap: LayerSwap<'a>,
}

impl<'a> SwapChain<'a> {
    /// An empty chain whose layer names are block-wide as they are.
    pub fn new(swap: LayerSwap<'a>) -> Self {
        Self::with_prefix("", swap)
    }

    /// An empty chain whose layers are named `prefix.name` block-wide.
    pub fn with_prefix(prefix: &'static str, swap: LayerSwap<'a>) -> Self {
        SwapChain {
            chain: Chain::new(),
            prefix,
            swap,
        }
    }

    pub fn push(&mut self, name: &str, layer: Box<dyn CertLayer>) {
        let full = if self.prefix.is_empty() {
            name.to_string()
        } else {
            format!("{}.{name}", self.prefix)
        };
        let layer = (self.swap)(&full, layer);
        self.chain.layers.push((name.into(), layer));
    }
}

/// Every field must be ≥ 1 (`what` names the block in the error).
pub(crate) fn check_positive(what: &str, fields: &[(&str, i64)]) -> Result<(), LayerError> {
    match fields.iter().find(|(_, v)| *v < 1) {
        Some((name, v)) => Err(LayerError(format!("{what}: {name} must be ≥ 1, got {v}"))),
        None => Ok(()),
    }
}

/// A norm's ε must be positive and finite (`what` names the block).
pub(crate) fn check_eps(what: &str, eps: f64) -> Result<(), LayerError> {
    if eps > 0.0 && eps.is_finite() {
        Ok(())
    } else {
        Err(LayerError(format!("{what}: eps must be > 0, got {eps}")))
    }
}
