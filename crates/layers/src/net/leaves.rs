//! The single-op layer kinds of a net (conv, batch norm, ReLU, max pool,
//! global average pool, flatten, dense): each a payload of typed conventions
//! implementing `BlockSpec`. Input channels and features are inferred from
//! the input type.

use super::block::{at_least, positive_eps, BlockSpec, BuildCtx, FieldError};
use crate::layer::{CertLayer, LayerError};
use crate::ops::activation::Relu;
use crate::ops::conv::{Conv2d, Padding};
use crate::ops::dense::{Dense, Flatten, GlobalAvgPool};
use crate::ops::norm::{BatchNorm, BnWorld};
use crate::ops::pool::MaxPool;
use ir::TensorType;
use serde::{Deserialize, Serialize};

/// The channel count of an NCHW input.
pub fn channels(ty: &TensorType) -> Result<i64, LayerError> {
    match ty.shape.as_slice() {
        [_, c, _, _] => Ok(*c),
        _ => Err(LayerError(format!("expects an NCHW input, got {ty}"))),
    }
}

/// A 2-D convolution `k×k/stride` to `out_ch` channels.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Conv2dSpec {
    pub k: i64,
    pub stride: i64,
    pub padding: Padding,
    pub out_ch: i64,
    pub bias: bool,
}

impl BlockSpec for Conv2dSpec {
    fn build(&self, input: &TensorType, _: &BuildCtx) -> Result<Box<dyn CertLayer>, LayerError> {
        Ok(Box::new(Conv2d {
            k: self.k,
            stride: self.stride,
            padding: self.padding,
            in_ch: channels(input)?,
            out_ch: self.out_ch,
            bias: self.bias,
        }))
    }
    fn validate(&self) -> Result<(), FieldError> {
        at_least("k", self.k, 1)?;
        at_least("stride", self.stride, 1)?;
        at_least("out_ch", self.out_ch, 1)
    }
}

/// Batch norm over the input's channels, in `world`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BatchNormSpec {
    pub world: BnWorld,
    pub eps: f64,
}

impl BlockSpec for BatchNormSpec {
    fn build(&self, input: &TensorType, _: &BuildCtx) -> Result<Box<dyn CertLayer>, LayerError> {
        Ok(Box::new(BatchNorm {
            ch: channels(input)?,
            world: self.world,
            eps: self.eps,
        }))
    }
    fn bn_world(&self) -> Option<BnWorld> {
        Some(self.world)
    }
    fn set_bn_world(&mut self, world: BnWorld) {
        self.world = world;
    }
    fn validate(&self) -> Result<(), FieldError> {
        positive_eps("eps", self.eps)
    }
}

/// A kind without fields: its CertLayer, no batch norms, nothing to check.
macro_rules! fieldless {
    ($(#[$doc:meta])* $spec:ident => $layer:expr) => {
        $(#[$doc])*
        #[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
        #[serde(deny_unknown_fields)]
        pub struct $spec {}

        impl BlockSpec for $spec {
            fn build(&self, _: &TensorType, _: &BuildCtx) -> Result<Box<dyn CertLayer>, LayerError> {
                Ok(Box::new($layer))
            }
            fn validate(&self) -> Result<(), FieldError> {
                Ok(())
            }
        }
    };
}

fieldless!(
    /// `max(x, 0)`.
    ReluSpec => Relu
);
fieldless!(
    /// The spatial mean, `[N, C, H, W] → [N, C]`.
    GlobalAvgPoolSpec => GlobalAvgPool
);
fieldless!(
    /// `[N, …] → [N, ∏…]`.
    FlattenSpec => Flatten
);

/// Max pool `window×window/stride`, padded by `pad` (−∞) on every side.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MaxPoolSpec {
    pub window: i64,
    pub stride: i64,
    pub pad: i64,
}

impl BlockSpec for MaxPoolSpec {
    fn build(&self, _: &TensorType, ctx: &BuildCtx) -> Result<Box<dyn CertLayer>, LayerError> {
        Ok(Box::new(MaxPool {
            window: self.window,
            stride: self.stride,
            pad: self.pad,
            backward: ctx.pool_backward,
        }))
    }
    fn validate(&self) -> Result<(), FieldError> {
        at_least("window", self.window, 1)?;
        at_least("stride", self.stride, 1)?;
        at_least("pad", self.pad, 0)?;
        // A window wholly in the padding would have no input to take a max of.
        if self.pad >= self.window {
            return Err(FieldError::new(
                "pad",
                format!("pad = {}: expected < window ({})", self.pad, self.window),
            ));
        }
        Ok(())
    }
}

/// A dense layer to `out_f` features (the input's last dim in).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DenseSpec {
    pub out_f: i64,
    pub bias: bool,
}

impl BlockSpec for DenseSpec {
    fn build(&self, input: &TensorType, _: &BuildCtx) -> Result<Box<dyn CertLayer>, LayerError> {
        Ok(Box::new(Dense {
            in_f: *input.shape.last().unwrap_or(&0),
            out_f: self.out_f,
            bias: self.bias,
        }))
    }
    fn validate(&self) -> Result<(), FieldError> {
        at_least("out_f", self.out_f, 1)
    }
}
