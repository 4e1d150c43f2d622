//! The ResNet block kinds of a net (docs/nets.md §3): the basic block and
//! the v1.5 bottleneck, each a payload of typed conventions implementing
//! `BlockSpec` and built as a `crate::blocks::ResidualBlock`.

use super::block::{at_least, positive_eps, BlockSpec, BuildCtx, FieldError};
use super::leaves::channels;
use crate::blocks::{BlockNorm, ResidualBlock};
use crate::layer::{CertLayer, LayerError};
use crate::ops::norm::BnWorld;
use ir::TensorType;
use serde::{Deserialize, Serialize};

/// ResNet basic block `relu(main(x) + skip(x))`, main = conv3×3/`stride` →
/// BN → ReLU → conv3×3 → BN (bias-free, symmetric padding). `project`: the
/// skip is conv1×1/`stride` → BN, else the identity (stride 1, equal
/// channels). See `crate::blocks::ResidualBlock::basic`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BasicBlockSpec {
    pub out_ch: i64,
    pub stride: i64,
    pub project: bool,
    pub world: BnWorld,
    pub eps: f64,
}

/// ResNet v1.5 bottleneck: conv1×1 (→`mid_ch`) → BN → ReLU → conv3×3/`stride`
/// → BN → ReLU → conv1×1 (→`out_ch`) → BN, plus the skip as in `BasicBlockSpec`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BottleneckSpec {
    pub mid_ch: i64,
    pub out_ch: i64,
    pub stride: i64,
    pub project: bool,
    pub world: BnWorld,
    pub eps: f64,
}

/// An identity skip cannot stride.
fn identity_skip_stride(project: bool, stride: i64) -> Result<(), FieldError> {
    if !project && stride != 1 {
        return Err(FieldError::new(
            "stride",
            format!("stride = {stride}: an identity skip (project = false) needs stride 1"),
        ));
    }
    Ok(())
}

impl BlockSpec for BasicBlockSpec {
    fn build(&self, input: &TensorType, _: &BuildCtx) -> Result<Box<dyn CertLayer>, LayerError> {
        Ok(Box::new(ResidualBlock::basic(
            channels(input)?,
            self.out_ch,
            self.stride,
            self.project,
            BlockNorm {
                world: self.world,
                eps: self.eps,
            },
        )?))
    }
    fn bn_world(&self) -> Option<BnWorld> {
        Some(self.world)
    }
    fn set_bn_world(&mut self, world: BnWorld) {
        self.world = world;
    }
    fn validate(&self) -> Result<(), FieldError> {
        at_least("out_ch", self.out_ch, 1)?;
        at_least("stride", self.stride, 1)?;
        identity_skip_stride(self.project, self.stride)?;
        positive_eps("eps", self.eps)
    }
}

impl BlockSpec for BottleneckSpec {
    fn build(&self, input: &TensorType, _: &BuildCtx) -> Result<Box<dyn CertLayer>, LayerError> {
        Ok(Box::new(ResidualBlock::bottleneck(
            channels(input)?,
            self.mid_ch,
            self.out_ch,
            self.stride,
            self.project,
            BlockNorm {
                world: self.world,
                eps: self.eps,
            },
        )?))
    }
    fn bn_world(&self) -> Option<BnWorld> {
        Some(self.world)
    }
    fn set_bn_world(&mut self, world: BnWorld) {
        self.world = world;
    }
    fn validate(&self) -> Result<(), FieldError> {
        at_least("mid_ch", self.mid_ch, 1)?;
        at_least("out_ch", self.out_ch, 1)?;
        at_least("stride", self.stride, 1)?;
        identity_skip_stride(self.project, self.stride)?;
        positive_eps("eps", self.eps)
    }
}
