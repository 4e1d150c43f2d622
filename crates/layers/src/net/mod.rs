//! NetSpec: a net declared once, as data. Its forward chain, parameter layout,
//! eval variant (BN in the Eval world) and — above this crate — certificate,
//! train step and rendered text are all derived from it; no second
//! hand-written copy of a net exists.
//!
//! The model lives here; the file format (TOML/JSON) in `file`, the built-in
//! nets (cifar8 family, ResNet-34/50) in `builtin`, both re-exported.

use crate::blocks::{BlockNorm, ResidualBlock};
use crate::combinators::Chain;
use crate::layer::{CertLayer, LayerError, ParamSpec, Saved};
use crate::ops::activation::Relu;
use crate::ops::conv::{Conv2d, Padding};
use crate::ops::dense::{Dense, Flatten, GlobalAvgPool};
use crate::ops::loss::SoftmaxCrossEntropy;
use crate::ops::norm::{BatchNorm, BnWorld};
use crate::ops::pool::{MaxPool, PoolBackward};
use ir::TensorType;

mod builtin;
mod file;

pub use builtin::{by_name, catalog, cifar8, resnet34, resnet34_width, resnet50, resnet50_width};
pub use file::{resolve, NetFileError};

/// One layer of a net, with every convention explicit. Channel counts of
/// inputs are inferred from the layer before.
#[derive(Clone, Debug, PartialEq)]
pub enum LayerSpec {
    Conv2d {
        k: i64,
        stride: i64,
        padding: Padding,
        out_ch: i64,
        bias: bool,
    },
    BatchNorm {
        world: BnWorld,
        eps: f64,
    },
    Relu,
    MaxPool {
        window: i64,
        stride: i64,
        pad: i64,
    },
    GlobalAvgPool,
    Flatten,
    Dense {
        out_f: i64,
        bias: bool,
    },
    /// ResNet basic block `relu(main(x) + skip(x))`, main = conv3×3/`stride`
    /// → BN → ReLU → conv3×3 → BN (bias-free, symmetric padding). `project`:
    /// the skip is conv1×1/`stride` → BN, else the identity (stride 1, equal
    /// channels). See `crate::blocks::ResidualBlock::basic`.
    BasicBlock {
        out_ch: i64,
        stride: i64,
        project: bool,
        world: BnWorld,
        eps: f64,
    },
    /// ResNet v1.5 bottleneck: conv1×1 (→`mid_ch`) → BN → ReLU → conv3×3/`stride`
    /// → BN → ReLU → conv1×1 (→`out_ch`) → BN, plus the skip as in `BasicBlock`.
    Bottleneck {
        mid_ch: i64,
        out_ch: i64,
        stride: i64,
        project: bool,
        world: BnWorld,
        eps: f64,
    },
}

/// A batch norm of a net, wherever it sits (top level or inside a block).
#[derive(Clone, Debug, PartialEq)]
pub struct BnSite {
    /// Its parameter path without the `.gamma` (`stem.bn`, `stage2.block1.main.bn1`).
    pub name: String,
    pub ch: i64,
    pub world: BnWorld,
    /// Child indices from the chain's `Saved` down to the batch norm's.
    pub path: Vec<usize>,
}

impl BnSite {
    /// The `(mean, var)` this batch norm's forward computed, read from the
    /// `Saved` of the chain it belongs to (`NetSpec::chain` or
    /// `chain_with_loss`: the loss comes last, so paths agree).
    pub fn stats(&self, chain_saved: &Saved) -> Option<(ir::ValueId, ir::ValueId)> {
        let mut s = chain_saved;
        for &i in &self.path {
            s = s.children.get(i)?;
        }
        BatchNorm::saved_stats(s)
    }
}

#[derive(Clone, Debug, PartialEq)]
pub struct NetSpec {
    pub name: String,
    /// Per-example input `(C, H, W)`.
    pub input: (i64, i64, i64),
    pub classes: i64,
    /// Named layers in forward order; names scope parameters and kink sites.
    pub layers: Vec<(String, LayerSpec)>,
    /// Label smoothing α of the loss (target `(1−α)·onehot + α/K`).
    pub label_smoothing: Option<f64>,
    /// The emitted form of every max pool's backward (the function is the
    /// same; IREE cannot lower an overlapping `select_and_scatter`).
    pub pool_backward: PoolBackward,
}

impl NetSpec {
    /// `[B, C, H, W]`.
    pub fn input_type(&self, batch: i64) -> TensorType {
        let (c, h, w) = self.input;
        TensorType::f32(vec![batch, c, h, w])
    }

    /// The forward as a chain of CertLayers (logits out, no loss).
    pub fn chain(&self) -> Result<Chain, LayerError> {
        let mut chain = Chain::new();
        let mut ty = self.input_type(1);
        for (name, spec) in &self.layers {
            let layer: Box<dyn CertLayer> = match spec {
                LayerSpec::Conv2d {
                    k,
                    stride,
                    padding,
                    out_ch,
                    bias,
                } => Box::new(Conv2d {
                    k: *k,
                    stride: *stride,
                    padding: *padding,
                    in_ch: channels(&ty, name)?,
                    out_ch: *out_ch,
                    bias: *bias,
                }),
                LayerSpec::BatchNorm { world, eps } => Box::new(BatchNorm {
                    ch: channels(&ty, name)?,
                    world: *world,
                    eps: *eps,
                }),
                LayerSpec::Relu => Box::new(Relu),
                LayerSpec::MaxPool {
                    window,
                    stride,
                    pad,
                } => Box::new(MaxPool {
                    window: *window,
                    stride: *stride,
                    pad: *pad,
                    backward: self.pool_backward,
                }),
                LayerSpec::GlobalAvgPool => Box::new(GlobalAvgPool),
                LayerSpec::Flatten => Box::new(Flatten),
                LayerSpec::Dense { out_f, bias } => Box::new(Dense {
                    in_f: *ty.shape.last().unwrap_or(&0),
                    out_f: *out_f,
                    bias: *bias,
                }),
                LayerSpec::BasicBlock { .. } | LayerSpec::Bottleneck { .. } => Box::new(
                    spec.block(channels(&ty, name)?)
                        .map_err(|e| LayerError(format!("{}: {name}: {e}", self.name)))?,
                ),
            };
            ty = layer
                .output_type(&ty)
                .map_err(|e| LayerError(format!("{}: {name}: {e}", self.name)))?;
            chain.layers.push((name.clone(), layer));
        }
        if ty.shape != [1, self.classes] {
            return Err(LayerError(format!(
                "{}: the forward ends in {ty}, expected logits [B, {}]",
                self.name, self.classes
            )));
        }
        Ok(chain)
    }

    /// The forward followed by the mean softmax cross-entropy (its `target`
    /// parameter is the one-hot or soft label matrix `[B, K]`).
    pub fn chain_with_loss(&self) -> Result<Chain, LayerError> {
        let mut c = self.chain()?;
        c.layers.push((
            "loss".into(),
            Box::new(SoftmaxCrossEntropy {
                classes: self.classes,
                label_smoothing: self.label_smoothing,
            }),
        ));
        Ok(c)
    }

    /// Trainable parameters in forward order (per layer W then b; BN γ then β).
    pub fn param_specs(&self) -> Result<Vec<ParamSpec>, LayerError> {
        Ok(self.chain()?.params(&self.input_type(1)))
    }

    /// (tensors, floats) of the trainable parameters.
    pub fn param_count(&self) -> Result<(usize, i64), LayerError> {
        let ps = self.param_specs()?;
        Ok((ps.len(), ps.iter().map(|p| p.ty.num_elements()).sum()))
    }

    /// The layer named `name`, to edit a copy of a net (a test's drifted or
    /// switched variant, a sweep's changed stage).
    pub fn layer_mut(&mut self, name: &str) -> Option<&mut LayerSpec> {
        self.layers
            .iter_mut()
            .find(|(n, _)| n == name)
            .map(|(_, spec)| spec)
    }

    /// The BN world of the net's batch norms, if it has any.
    pub fn bn_world(&self) -> Option<BnWorld> {
        self.layers.iter().find_map(|(_, l)| l.bn_world())
    }

    /// The same net with every batch norm — top-level and inside blocks,
    /// per-example ones included — in `world`.
    pub fn with_every_bn_in(&self, world: BnWorld) -> NetSpec {
        let mut n = self.clone();
        for (_, l) in &mut n.layers {
            l.set_bn_world(world);
        }
        n
    }

    /// The same net with its true-batch norms — top level and inside blocks —
    /// put in `world`; per-example batch norm (cifar8-bn) is the same function
    /// at train and eval and keeps its world. With `Eval` this is the net the
    /// eval forward is rendered from: the only difference between a train
    /// step's forward and the eval forward.
    pub fn with_batch_stat_bns_in(&self, world: BnWorld) -> NetSpec {
        let mut n = self.clone();
        for (_, l) in &mut n.layers {
            if l.bn_world() == Some(BnWorld::Batch) {
                l.set_bn_world(world);
            }
        }
        n
    }

    /// The same net with every max pool's backward emitted in `form`.
    pub fn with_pool_backward(&self, form: PoolBackward) -> NetSpec {
        NetSpec {
            pool_backward: form,
            ..self.clone()
        }
    }

    /// Every batch norm of the net in forward (= parameter) order, with where
    /// its statistics sit in the chain's `Saved`. A train step's batch-stat
    /// outputs and running-stat inputs are one per site.
    pub fn bn_sites(&self) -> Result<Vec<BnSite>, LayerError> {
        let chain = self.chain()?;
        let tys = chain.types(&self.input_type(1))?;
        let mut out = Vec::new();
        for (i, ((name, spec), ty)) in self.layers.iter().zip(&tys).enumerate() {
            match spec {
                LayerSpec::BatchNorm { world, .. } => out.push(BnSite {
                    name: name.clone(),
                    ch: ty.shape[1],
                    world: *world,
                    path: vec![i],
                }),
                LayerSpec::BasicBlock { world, .. } | LayerSpec::Bottleneck { world, .. } => {
                    for b in spec.block(channels(ty, name)?)?.bns {
                        let mut path = vec![i];
                        path.extend(b.path);
                        out.push(BnSite {
                            name: format!("{name}.{}", b.name),
                            ch: b.ch,
                            world: *world,
                            path,
                        });
                    }
                }
                _ => {}
            }
        }
        Ok(out)
    }
}

impl LayerSpec {
    /// The BN world of this layer's batch norm(s), if it has any.
    pub fn bn_world(&self) -> Option<BnWorld> {
        match self {
            LayerSpec::BatchNorm { world, .. }
            | LayerSpec::BasicBlock { world, .. }
            | LayerSpec::Bottleneck { world, .. } => Some(*world),
            _ => None,
        }
    }

    /// Put this layer's batch norm(s) in `world`.
    pub fn set_bn_world(&mut self, to: BnWorld) {
        match self {
            LayerSpec::BatchNorm { world, .. }
            | LayerSpec::BasicBlock { world, .. }
            | LayerSpec::Bottleneck { world, .. } => *world = to,
            _ => {}
        }
    }

    /// The block CertLayer of a `BasicBlock` / `Bottleneck` at `in_ch` input
    /// channels (an error for other layers).
    pub fn block(&self, in_ch: i64) -> Result<ResidualBlock, LayerError> {
        match self {
            LayerSpec::BasicBlock {
                out_ch,
                stride,
                project,
                world,
                eps,
            } => ResidualBlock::basic(
                in_ch,
                *out_ch,
                *stride,
                *project,
                BlockNorm {
                    world: *world,
                    eps: *eps,
                },
            ),
            LayerSpec::Bottleneck {
                mid_ch,
                out_ch,
                stride,
                project,
                world,
                eps,
            } => ResidualBlock::bottleneck(
                in_ch,
                *mid_ch,
                *out_ch,
                *stride,
                *project,
                BlockNorm {
                    world: *world,
                    eps: *eps,
                },
            ),
            other => Err(LayerError(format!("{other:?} is not a residual block"))),
        }
    }
}

fn channels(ty: &TensorType, layer: &str) -> Result<i64, LayerError> {
    match ty.shape.as_slice() {
        [_, c, _, _] => Ok(*c),
        _ => Err(LayerError(format!(
            "{layer}: expects an NCHW input, got {ty}"
        ))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_batch_norm_switches_world_and_reads_its_own_stats() {
        let n = resnet34(10, (64, 64)).with_every_bn_in(BnWorld::PerExample);
        let sites = n.bn_sites().unwrap();
        assert!(sites.iter().all(|s| s.world == BnWorld::PerExample));
        assert_eq!(n.bn_world(), Some(BnWorld::PerExample));
        // Each site's path leads to a batch norm whose stats the forward saved,
        // named like its γ parameter.
        let chain = n.chain().unwrap();
        let input = n.input_type(2);
        let params = chain.params(&input);
        let mut fb = ir::FuncBuilder::new("f", ir::Visibility::Public);
        let x = fb.param(input.clone());
        let ps: Vec<_> = params.iter().map(|p| fb.param(p.ty.clone())).collect();
        let saved = chain
            .forward(&mut fb, x, &ps, &mut crate::layer::Sites::default())
            .unwrap();
        let gammas: Vec<_> = params
            .iter()
            .filter_map(|p| p.name.strip_suffix(".gamma"))
            .collect();
        assert_eq!(
            sites.iter().map(|s| s.name.as_str()).collect::<Vec<_>>(),
            gammas
        );
        for s in &sites {
            let (mean, _) = s.stats(&saved).unwrap_or_else(|| panic!("{}", s.name));
            assert_eq!(fb.ty(mean).shape, [2, s.ch], "{}", s.name);
        }
    }

    /// The two world switches differ on a per-example batch norm only.
    #[test]
    fn only_every_bn_switch_moves_a_per_example_batch_norm() {
        let per_example = by_name("cifar8-bn").unwrap();
        let every = per_example.with_every_bn_in(BnWorld::Eval);
        assert_eq!(every.bn_world(), Some(BnWorld::Eval));
        let batch_stat = per_example.with_batch_stat_bns_in(BnWorld::Eval);
        assert_eq!(batch_stat, per_example);
        let bbn = by_name("cifar8-bbn").unwrap();
        assert_eq!(
            bbn.with_batch_stat_bns_in(BnWorld::Eval),
            bbn.with_every_bn_in(BnWorld::Eval)
        );
    }

    #[test]
    fn with_pool_backward_reaches_every_pool() {
        let n = resnet34(10, (64, 64)).with_pool_backward(PoolBackward::ShiftedSums);
        assert_eq!(n.pool_backward, PoolBackward::ShiftedSums);
        let chain = n.chain().unwrap();
        assert!(chain
            .layers
            .iter()
            .any(|(_, l)| l.name().starts_with("maxpool 3×3/s2")));
        assert_ne!(n, resnet34(10, (64, 64)));
    }

    #[test]
    fn eval_variant_differs_only_in_the_bn_world() {
        let train = by_name("cifar8-bbn").unwrap();
        let eval = train.with_every_bn_in(BnWorld::Eval);
        assert_eq!(train.layers.len(), eval.layers.len());
        for ((a, x), (b, y)) in train.layers.iter().zip(&eval.layers) {
            assert_eq!(a, b);
            match (x, y) {
                (
                    LayerSpec::BatchNorm { world: w1, .. },
                    LayerSpec::BatchNorm { world: w2, .. },
                ) => {
                    assert_eq!((*w1, *w2), (BnWorld::Batch, BnWorld::Eval))
                }
                _ => assert_eq!(x, y),
            }
        }
    }
}
