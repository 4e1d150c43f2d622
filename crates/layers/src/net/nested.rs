//! The composite block kinds of a net file: `sequential` (a named list of
//! layers, run in order) and `residual` (`post(main(x) + shortcut(x))`, the
//! skip an identity when `shortcut` is empty). Any block of the ResNets can
//! be written with them; the built-in `basic_block` and `bottleneck` build
//! the same CertLayers.

use super::block::{BlockSpec, BuildCtx, FieldError};
use super::named::{build_chain, first_bn_world, set_bn_worlds, tables, validate_list, Layers};
use crate::blocks::ResidualBlock;
use crate::combinators::{Projection, Residual};
use crate::layer::{CertLayer, LayerError};
use crate::ops::norm::BnWorld;
use ir::TensorType;
use serde::{Deserialize, Serialize};

/// Layers run in order under the block's name (`block.conv1.W`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SequentialSpec {
    #[serde(with = "tables")]
    pub layers: Layers,
}

impl BlockSpec for SequentialSpec {
    fn build(&self, input: &TensorType, ctx: &BuildCtx) -> Result<Box<dyn CertLayer>, LayerError> {
        Ok(Box::new(build_chain(&self.layers, input, ctx)?.0))
    }
    fn bn_world(&self) -> Option<BnWorld> {
        first_bn_world(&[&self.layers])
    }
    fn set_bn_world(&mut self, world: BnWorld) {
        set_bn_worlds(&mut [&mut self.layers], world)
    }
    fn validate(&self) -> Result<(), FieldError> {
        if self.layers.is_empty() {
            return Err(FieldError::new(
                "layers",
                "layers = []: expected at least one layer",
            ));
        }
        validate_list("layers", &self.layers)
    }
}

/// `post(main(x) + shortcut(x))`. `shortcut = []` is the identity skip
/// (then `main` must keep the input's type); otherwise the skip is that
/// branch (a projection). Parameters and kink sites: `main`'s unprefixed
/// under an identity skip, `main.` / `shortcut.` prefixed under a
/// projection (as torchvision names a ResNet's `downsample`), then `post`'s
/// under their names.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ResidualSpec {
    #[serde(with = "tables")]
    pub main: Layers,
    #[serde(with = "tables")]
    pub shortcut: Layers,
    #[serde(with = "tables")]
    pub post: Layers,
}

impl BlockSpec for ResidualSpec {
    fn build(&self, input: &TensorType, ctx: &BuildCtx) -> Result<Box<dyn CertLayer>, LayerError> {
        fn within(list: &'static str) -> impl Fn(LayerError) -> LayerError {
            move |e| LayerError(format!("{list}: {e}"))
        }
        let (main, main_out) = build_chain(&self.main, input, ctx).map_err(within("main"))?;
        let (sum, label): (Box<dyn CertLayer>, _) = if self.shortcut.is_empty() {
            if &main_out != input {
                return Err(LayerError(format!(
                    "an identity skip (shortcut = []) needs main to keep the input's \
                     type, but main maps {input} to {main_out}; give a shortcut"
                )));
            }
            let sum = Residual::new(Box::new(main));
            (Box::new(sum), "identity skip")
        } else {
            let (shortcut, skip_out) =
                build_chain(&self.shortcut, input, ctx).map_err(within("shortcut"))?;
            if skip_out != main_out {
                return Err(LayerError(format!(
                    "main gives {main_out}, shortcut gives {skip_out}; the branches need \
                     equal types"
                )));
            }
            let sum = Projection {
                main: Box::new(main),
                shortcut: Box::new(shortcut),
            };
            (Box::new(sum), "projection skip")
        };
        let (post, _) = build_chain(&self.post, &main_out, ctx).map_err(within("post"))?;
        Ok(Box::new(ResidualBlock {
            label: format!("residual ({label})"),
            sum,
            post: post.layers,
        }))
    }
    fn bn_world(&self) -> Option<BnWorld> {
        first_bn_world(&[&self.main, &self.shortcut, &self.post])
    }
    fn set_bn_world(&mut self, world: BnWorld) {
        set_bn_worlds(
            &mut [&mut self.main, &mut self.shortcut, &mut self.post],
            world,
        )
    }
    fn validate(&self) -> Result<(), FieldError> {
        if self.main.is_empty() {
            return Err(FieldError::new(
                "main",
                "main = []: expected at least one layer",
            ));
        }
        validate_list("main", &self.main)?;
        validate_list("shortcut", &self.shortcut)?;
        validate_list("post", &self.post)
    }
}
