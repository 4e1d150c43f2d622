//! NetSpec: a net declared once, as data. Its forward chain, parameter layout,
//! eval variant (BN in the Eval world) and — above this crate — certificate,
//! train step and rendered text are all derived from it; no second
//! hand-written copy of a net exists.
//!
//! The model lives here: `NetSpec`, `LayerSpec` (one variant per block kind,
//! declared in the `layer_kinds!` list) and the walks that never match on a
//! kind (BN sites, world switches). The block interface is in `block`; the
//! kinds in `leaves` (single ops), `residual` (ResNet blocks) and `nested`
//! (`sequential`, `residual`); layer lists in `named`; the file format
//! (TOML/JSON, the spec types' serde form) in `file`; the checks before a
//! build in `limits`; the built-in nets (cifar8 family, ResNet-34/50) in
//! `builtin`.

use crate::combinators::Chain;
use crate::layer::{CertLayer, LayerError, ParamSpec};
use crate::ops::loss::SoftmaxCrossEntropy;
use crate::ops::norm::BnWorld;
use crate::ops::pool::PoolBackward;
use ir::TensorType;

mod block;

/// The shape of the parameter `name` among `ps` (tests read a built net's
/// parameter shapes by name); panics naming it if there is none.
#[cfg(test)]
fn param_shape(ps: &[ParamSpec], name: &str) -> Vec<i64> {
    ps.iter()
        .find(|p| p.name == name)
        .unwrap_or_else(|| panic!("{name}"))
        .ty
        .shape
        .clone()
}
mod builtin;
mod convnext;
mod file;
mod leaves;
mod limits;
mod mobile;
mod named;
mod nested;
mod residual;
mod sizes;
mod vit;

pub use block::{at_least, positive_eps, BlockSpec, BuildCtx, FieldError, FIELD_MAX};
pub use builtin::{by_name, catalog, cifar8, resnet34, resnet34_width, resnet50, resnet50_width};
pub use convnext::{
    convnext, convnext_s, convnext_t, ConvNextVariant, CONVNEXT_B, CONVNEXT_LAYER_SCALE_INIT,
    CONVNEXT_LN_EPS, CONVNEXT_S, CONVNEXT_T,
};
pub use file::{is_file_arg, resolve, NetFileError, NetFormat};
pub use leaves::{
    channels, BatchNormSpec, Conv2dSpec, DenseSpec, FlattenSpec, GlobalAvgPoolSpec, MaxPoolSpec,
    ReluSpec,
};
pub use limits::SizeLimit;
pub use mobile::{
    efficientnet_b0, efficientnet_b0_width, mobilenetv2, mobilenetv2_width, mobilenetv4_conv_m,
    mobilenetv4_conv_m_width,
};
pub use named::{build_chain, validate_list, Layers};
pub use nested::{ResidualSpec, SequentialSpec};
pub use residual::{BasicBlockSpec, BottleneckSpec};
pub use vit::{vit, vit_tiny, VitConfig, VIT_B, VIT_S, VIT_TINY};

/// A batch norm of a net, wherever it sits (top level or inside a block):
/// its path from the chain's `Saved` (`NetSpec::chain` or `chain_with_loss`:
/// the loss comes last, so paths agree) and its name (`stem.bn`,
/// `stage2.block1.main.bn1`).
pub type BnSite = crate::layer::BlockBn;

/// Declares `LayerSpec`, one variant per block kind, and the one dispatch
/// from a variant to its payload's `BlockSpec`. A new block kind is a
/// payload type implementing `BlockSpec` (+ serde) and one line here.
macro_rules! layer_kinds {
    ($($(#[$doc:meta])* $variant:ident($payload:ty),)*) => {
        /// One layer of a net, with every convention explicit: a block kind
        /// and its payload. Channel counts of inputs are inferred from the
        /// layer before. In a net file, the kind is the `op` field
        /// (snake_case) beside the payload's fields.
        #[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
        #[serde(tag = "op", rename_all = "snake_case")]
        pub enum LayerSpec {
            $($(#[$doc])* $variant($payload),)*
        }

        impl LayerSpec {
            /// The payload, as the block that answers for this layer.
            pub fn as_block(&self) -> &dyn BlockSpec {
                match self {
                    $(LayerSpec::$variant(b) => b,)*
                }
            }
            /// The payload, to switch its world.
            pub fn as_block_mut(&mut self) -> &mut dyn BlockSpec {
                match self {
                    $(LayerSpec::$variant(b) => b,)*
                }
            }
        }
    };
}

layer_kinds! {
    Conv2d(Conv2dSpec),
    BatchNorm(BatchNormSpec),
    Relu(ReluSpec),
    MaxPool(MaxPoolSpec),
    GlobalAvgPool(GlobalAvgPoolSpec),
    Flatten(FlattenSpec),
    Dense(DenseSpec),
    BasicBlock(BasicBlockSpec),
    Bottleneck(BottleneckSpec),
    /// The depthwise family's blocks (`crate::blocks_mobile`, `mobile`).
    ConvBnAct(crate::blocks_mobile::ConvBnActSpec),
    InvertedResidual(crate::blocks_mobile::InvertedResidualSpec),
    MbConvSe(crate::blocks_mobile::MbConvSeSpec),
    FusedMbConv(crate::blocks_mobile::FusedMbConvSpec),
    Uib(crate::blocks_mobile::UibSpec),
    /// ConvNeXt's blocks (`crate::blocks_convnext`, `convnext`).
    #[serde(rename = "convnext_stem")]
    ConvNextStem(crate::blocks_convnext::ConvNextStemSpec),
    #[serde(rename = "convnext_block")]
    ConvNextBlock(crate::blocks_convnext::ConvNextBlockSpec),
    #[serde(rename = "convnext_downsample")]
    ConvNextDownsample(crate::blocks_convnext::ConvNextDownsampleSpec),
    /// The Vision Transformer's blocks (`crate::blocks_vit`, `vit`).
    PatchEmbed(crate::blocks_vit::PatchEmbedSpec),
    VitBlock(crate::blocks_vit::VitBlockSpec),
    VitHead(crate::blocks_vit::VitHeadSpec),
    Sequential(SequentialSpec),
    Residual(ResidualSpec),
}

/// A net. Its file form (docs/nets.md §1) is this struct's serde
/// form: every field required, unknown fields refused.
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NetSpec {
    pub name: String,
    /// Per-example input `(C, H, W)`.
    pub input: (i64, i64, i64),
    pub classes: i64,
    /// Label smoothing α of the loss (target `(1−α)·onehot + α/K`); in a
    /// file, a number or `"none"` (TOML has no null).
    #[serde(with = "smoothing")]
    pub label_smoothing: Option<f64>,
    /// Named layers in forward order; names scope parameters and kink sites.
    #[serde(with = "named::tables")]
    pub layers: Layers,
    /// The emitted form of every max pool's backward (the function is the
    /// same; IREE cannot lower an overlapping `select_and_scatter`): an
    /// emission choice of the command (`--pool-backward`), not part of the
    /// net, so not in its file.
    #[serde(skip)]
    pub pool_backward: PoolBackward,
}

/// `label_smoothing` in a file: α, or `"none"`.
mod smoothing {
    use serde::de::{self, Visitor};
    use serde::{Deserializer, Serializer};

    pub fn serialize<S: Serializer>(a: &Option<f64>, s: S) -> Result<S::Ok, S::Error> {
        match a {
            Some(a) => s.serialize_f64(*a),
            None => s.serialize_str("none"),
        }
    }

    struct Alpha;
    impl Visitor<'_> for Alpha {
        type Value = Option<f64>;
        fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
            f.write_str("a label smoothing α in [0, 1) or \"none\"")
        }
        fn visit_f64<E: de::Error>(self, v: f64) -> Result<Self::Value, E> {
            Ok(Some(v))
        }
        fn visit_i64<E: de::Error>(self, v: i64) -> Result<Self::Value, E> {
            Ok(Some(v as f64))
        }
        fn visit_u64<E: de::Error>(self, v: u64) -> Result<Self::Value, E> {
            Ok(Some(v as f64))
        }
        fn visit_str<E: de::Error>(self, v: &str) -> Result<Self::Value, E> {
            match v {
                "none" => Ok(None),
                _ => Err(E::invalid_value(de::Unexpected::Str(v), &self)),
            }
        }
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Option<f64>, D::Error> {
        d.deserialize_any(Alpha)
    }
}

impl NetSpec {
    /// `[B, C, H, W]`.
    pub fn input_type(&self, batch: i64) -> TensorType {
        let (c, h, w) = self.input;
        TensorType::f32(vec![batch, c, h, w])
    }

    /// The emission choices every block is built with.
    pub fn build_ctx(&self) -> BuildCtx {
        BuildCtx {
            pool_backward: self.pool_backward,
            drop_path: false,
        }
    }

    /// The forward as a chain of CertLayers (logits out, no loss).
    pub fn chain(&self) -> Result<Chain, LayerError> {
        self.logits_chain(&self.build_ctx())
    }

    /// The forward built under `ctx`, checked to end in the net's logits
    /// `[B, classes]`.
    pub(crate) fn logits_chain(&self, ctx: &BuildCtx) -> Result<Chain, LayerError> {
        let (chain, ty) = build_chain(&self.layers, &self.input_type(1), ctx)
            .map_err(|e| LayerError(format!("{}: {e}", self.name)))?;
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
    /// its statistics sit in the chain's `Saved`: the chain's own
    /// `batch_norms()` walk. A train step's batch-stat outputs and
    /// running-stat inputs are one per site.
    pub fn bn_sites(&self) -> Result<Vec<BnSite>, LayerError> {
        Ok(self.chain()?.batch_norms())
    }
}

impl LayerSpec {
    /// The BN world of this layer's batch norm(s), if it has any.
    pub fn bn_world(&self) -> Option<BnWorld> {
        self.as_block().bn_world()
    }

    /// Put this layer's batch norm(s) in `world`.
    pub fn set_bn_world(&mut self, world: BnWorld) {
        self.as_block_mut().set_bn_world(world)
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
                    LayerSpec::BatchNorm(BatchNormSpec { world: w1, .. }),
                    LayerSpec::BatchNorm(BatchNormSpec { world: w2, .. }),
                ) => {
                    assert_eq!((*w1, *w2), (BnWorld::Batch, BnWorld::Eval))
                }
                _ => assert_eq!(x, y),
            }
        }
    }
}
