//! The block interface: what a net's layer kind must answer (its CertLayer,
//! its batch norms' world, its field checks), so that nothing above
//! `LayerSpec` matches on a kind. Also the shared field checks the kinds use.

use crate::layer::{CertLayer, LayerError};
use crate::ops::norm::BnWorld;
use crate::ops::pool::PoolBackward;
use ir::TensorType;

/// A block kind a net declares: typed conventions in, a CertLayer out. A block answers its own questions, so nothing above matches on its kind.
pub trait BlockSpec {
    /// The CertLayer for an input of type `input` (per-example, batch 1: `[1, C, H, W]` or `[1, F]`).
    fn build(&self, input: &TensorType, ctx: &BuildCtx) -> Result<Box<dyn CertLayer>, LayerError>;
    /// The world of this block's batch norms (None without any, the
    /// default) and how to switch it (nothing to switch by default).
    fn bn_world(&self) -> Option<BnWorld> {
        None
    }
    fn set_bn_world(&mut self, _world: BnWorld) {}
    /// Field checks before anything is built or allocated; the error names the field (`stride`, `eps`, …) and what was expected.
    fn validate(&self) -> Result<(), FieldError>;
    /// How many residual branches of this block take a stochastic-depth keep
    /// input when the net is built with drop path (docs/conventions.md §13); a block
    /// opts in by answering ≥ 1 and wrapping those branches when
    /// `BuildCtx::drop_path` is set. None by default.
    fn drop_path_sites(&self) -> usize {
        0
    }
}

/// What a block's build needs beyond its own fields: the net-wide emission
/// choices.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct BuildCtx {
    /// The emitted form of every max pool's backward.
    pub pool_backward: PoolBackward,
    /// Whether blocks with drop-path sites take their per-example keep inputs
    /// (`NetSpec::chain_with_drop_path`); off for every plain build.
    pub drop_path: bool,
}

/// A field of a block that cannot be right whatever the input.
#[derive(Clone, Debug, PartialEq)]
pub struct FieldError {
    /// The field's path inside the block (`stride`, `main[1].eps`).
    pub field: String,
    /// The whole complaint, field and value included (`stride = 0: expected ≥ 1`).
    pub message: String,
}

impl std::fmt::Display for FieldError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message)
    }
}
impl std::error::Error for FieldError {}

impl FieldError {
    pub fn new(field: &str, message: impl Into<String>) -> Self {
        FieldError {
            field: field.to_string(),
            message: message.into(),
        }
    }

    /// This error seen from a parent that holds the block as entry `index`
    /// (named `name`) of its list `list` (`main`, `layers`).
    pub fn inside(self, list: &str, index: usize, name: &str) -> Self {
        FieldError {
            field: format!("{list}[{index}].{}", self.field),
            message: format!("{list}[{index}] ({name}): {}", self.message),
        }
    }
}

/// `field = value` must be at least `min`.
pub fn at_least(field: &str, value: i64, min: i64) -> Result<(), FieldError> {
    if value < min {
        Err(FieldError::new(
            field,
            format!("{field} = {value}: expected ≥ {min}"),
        ))
    } else if value > FIELD_MAX {
        Err(FieldError::new(
            field,
            format!("{field} = {value}: expected ≤ {FIELD_MAX} (2³¹)"),
        ))
    } else {
        Ok(())
    }
}

/// The largest size field (channels, kernel, stride, extent, classes) a net
/// may declare: products of two such fit in i64, so shape arithmetic cannot
/// overflow before the size limit refuses the net.
pub const FIELD_MAX: i64 = 1 << 31;

/// A batch norm's ε: positive and finite.
pub fn positive_eps(field: &str, eps: f64) -> Result<(), FieldError> {
    if eps > 0.0 && eps.is_finite() {
        Ok(())
    } else {
        Err(FieldError::new(
            field,
            format!("{field} = {eps}: expected a finite ε > 0"),
        ))
    }
}
