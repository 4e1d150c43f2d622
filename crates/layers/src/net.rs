//! NetSpec: a net declared once, as data. Its forward chain, parameter layout,
//! eval variant (BN in the Eval world) and — above this crate — certificate,
//! train step and rendered text are all derived from it; no second
//! hand-written copy of a net exists.

use crate::combinators::Chain;
use crate::layer::{CertLayer, LayerError, ParamSpec};
use crate::ops::activation::Relu;
use crate::ops::conv::{Conv2d, Padding};
use crate::ops::dense::{Dense, Flatten, GlobalAvgPool};
use crate::ops::loss::SoftmaxCrossEntropy;
use crate::ops::norm::{BatchNorm, BnWorld};
use crate::ops::pool::MaxPool;
use ir::TensorType;

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
                }),
                LayerSpec::GlobalAvgPool => Box::new(GlobalAvgPool),
                LayerSpec::Flatten => Box::new(Flatten),
                LayerSpec::Dense { out_f, bias } => Box::new(Dense {
                    in_f: *ty.shape.last().unwrap_or(&0),
                    out_f: *out_f,
                    bias: *bias,
                }),
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

    /// The BN world of the net's batch norms, if it has any.
    pub fn bn_world(&self) -> Option<BnWorld> {
        self.layers.iter().find_map(|(_, l)| match l {
            LayerSpec::BatchNorm { world, .. } => Some(*world),
            _ => None,
        })
    }

    /// The same net with every batch norm in `world` (e.g. `Eval` for the eval
    /// forward): the only difference between a train step's forward and the eval
    /// forward.
    pub fn with_bn_world(&self, world: BnWorld) -> NetSpec {
        let mut n = self.clone();
        for (_, l) in &mut n.layers {
            if let LayerSpec::BatchNorm { world: w, .. } = l {
                *w = world;
            }
        }
        n
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

/// The cifar8 family (REFERENCE §4.1): four stages of conv3×3(bias) → [BN] →
/// ReLU, twice, then max pool 2×2/s2; channels 16,16 | 16,16 | 32,32 | 32,32;
/// flatten 128; dense 128→d→ReLU→d→ReLU→10.
///
/// Each stage's pool is emitted before its second ReLU. The function is the
/// same (ReLU is monotone, so max∘relu = relu∘max), but the pool then decides
/// on continuous BN/conv outputs, where ties have measure zero, instead of on
/// ReLU outputs, where a window of four dead units ties at 0 with probability
/// about 1/16 and the unique-argmax hypothesis would fail at almost every
/// point. It also runs the second ReLU on a quarter of the elements.
pub fn cifar8(name: &str, head: i64, bn: Option<BnWorld>) -> NetSpec {
    let mut layers = Vec::new();
    let stages = [(16, 16), (16, 16), (32, 32), (32, 32)];
    for (s, (c1, c2)) in stages.iter().enumerate() {
        let st = format!("stage{}", s + 1);
        for (i, c) in [c1, c2].iter().enumerate() {
            let conv = format!("{st}.conv{}", i + 1);
            layers.push((
                conv.clone(),
                LayerSpec::Conv2d {
                    k: 3,
                    stride: 1,
                    padding: Padding::Symmetric,
                    out_ch: **c,
                    bias: true,
                },
            ));
            if let Some(world) = bn {
                layers.push((
                    format!("{st}.bn{}", i + 1),
                    LayerSpec::BatchNorm { world, eps: 1e-5 },
                ));
            }
            if i == 1 {
                layers.push((
                    format!("{st}.pool"),
                    LayerSpec::MaxPool {
                        window: 2,
                        stride: 2,
                        pad: 0,
                    },
                ));
            }
            layers.push((format!("{conv}.relu"), LayerSpec::Relu));
        }
    }
    layers.push(("flatten".into(), LayerSpec::Flatten));
    for (i, out_f) in [head, head, 10].iter().enumerate() {
        layers.push((
            format!("dense{}", i + 1),
            LayerSpec::Dense {
                out_f: *out_f,
                bias: true,
            },
        ));
        if i < 2 {
            layers.push((format!("dense{}.relu", i + 1), LayerSpec::Relu));
        }
    }
    NetSpec {
        name: name.into(),
        input: (3, 32, 32),
        classes: 10,
        layers,
        label_smoothing: None,
    }
}

/// Every built-in net.
pub fn catalog() -> Vec<NetSpec> {
    vec![
        cifar8("cifar8", 64, None),
        cifar8("cifar8w", 512, None),
        cifar8("cifar8-bn", 64, Some(BnWorld::PerExample)),
        cifar8("cifar8-bbn", 64, Some(BnWorld::Batch)),
        cifar8("cifar8w-bbn", 512, Some(BnWorld::Batch)),
    ]
}

/// A built-in net by name.
pub fn by_name(name: &str) -> Option<NetSpec> {
    catalog().into_iter().find(|n| n.name == name)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cifar8_parameter_counts_match_the_reference() {
        assert_eq!(
            by_name("cifar8").unwrap().param_count().unwrap(),
            (22, 52_858)
        );
        assert_eq!(
            by_name("cifar8w").unwrap().param_count().unwrap().1,
            373_626
        );
        for n in ["cifar8-bn", "cifar8-bbn", "cifar8w-bbn"] {
            assert_eq!(by_name(n).unwrap().param_count().unwrap().0, 38, "{n}");
        }
    }

    #[test]
    fn eval_variant_differs_only_in_the_bn_world() {
        let train = by_name("cifar8-bbn").unwrap();
        let eval = train.with_bn_world(BnWorld::Eval);
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
