//! The depthwise family's blocks (docs/nets.md §4, §5, §6) as CertLayers:
//! conv-BN-activation stages (stems, heads), MobileNetV2's inverted residual,
//! EfficientNet's MBConv with squeeze-excite, the fused-MBConv and
//! MobileNetV4's universal inverted bottleneck (UIB). Each is a `Chain` of
//! per-op layers, wrapped in a `Residual` when its skip rule gives an identity
//! skip, so its backward map is the composition of certified leaf backwards;
//! nothing block-specific is hand-written here.
//!
//! Every convention is a typed field of the block's spec (padding of the
//! k×k convs, activation, BN world and ε, skip rule); none is defaulted.
//! Layers inside a block are named by role (`expand`, `expand_bn`,
//! `expand_act`, `dw`, `dw_bn`, `dw_act`, `se`, `project`, `project_bn`, UIB's
//! `pre_dw…` / `post_dw…`), which scopes their parameters
//! (`blocks.7.dw.W`) and kink sites (`blocks.7.dw_act.relu6_upper`).

pub use crate::block_parts::LayerSwap;
use crate::block_parts::{check_eps, SwapChain};
use crate::blocks::BlockNorm;
use crate::combinators::Residual;
use crate::emit::EmitResult;
use crate::layer::{BlockBn, CertLayer, Grads, LayerError, ParamSpec, Saved, Sites};
use crate::ops::activation::{Relu, Relu6, Swish};
use crate::ops::conv::{Conv2d, DepthwiseConv2d, Padding};
use crate::ops::norm::BnWorld;
use crate::ops::se::SqueezeExcite;
use ir::{FuncBuilder, TensorType, ValueId};
use serde::{Deserialize, Serialize};

/// The pointwise nonlinearity of a block's stages.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Activation {
    /// `max(x, 0)` (MobileNetV4).
    Relu,
    /// `min(max(x, 0), 6)` (MobileNetV2).
    Relu6,
    /// `x·σ(x)` (EfficientNet; MobileNetV4's fused-MBConv stem block).
    Swish,
}

impl Activation {
    /// The activation as a layer.
    pub fn layer(self) -> Box<dyn CertLayer> {
        match self {
            Activation::Relu => Box::new(Relu),
            Activation::Relu6 => Box::new(Relu6),
            Activation::Swish => Box::new(Swish),
        }
    }

    fn word(self) -> &'static str {
        match self {
            Activation::Relu => "relu",
            Activation::Relu6 => "relu6",
            Activation::Swish => "swish",
        }
    }
}

/// When a block adds its input to its output.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SkipRule {
    /// An identity skip iff the block keeps the shape: stride 1 and equal
    /// input and output channels (MobileNetV2, EfficientNet, MobileNetV4).
    IdentityWhenShapeKept,
    /// Never a skip.
    Never,
}

impl SkipRule {
    fn applies(self, stride: i64, in_ch: i64, out_ch: i64) -> bool {
        self == SkipRule::IdentityWhenShapeKept && stride == 1 && in_ch == out_ch
    }
}

/// A built block: its main chain, plain or inside an identity skip. Its
/// `Saved` is the body's own (a Chain's: one child per layer; a Residual's:
/// `[chain]`), so the body's batch-norm paths index it directly.
pub struct MobileBlock {
    /// The block's kind and configuration in words.
    pub label: String,
    pub body: Box<dyn CertLayer>,
    /// Whether `body` is the main chain inside an identity skip.
    pub skip: bool,
}

/// A block's main chain as it is assembled, its batch norms under the
/// block's conventions.
struct Stages<'a> {
    parts: SwapChain<'a>,
    norm: BlockNorm,
}

impl<'a> Stages<'a> {
    /// An empty chain whose batch norms take `world` and `eps`.
    fn new(world: BnWorld, eps: f64, swap: LayerSwap<'a>) -> Self {
        Stages {
            parts: SwapChain::new(swap),
            norm: BlockNorm { world, eps },
        }
    }

    fn push(&mut self, name: &str, layer: Box<dyn CertLayer>) {
        self.parts.push(name, layer);
    }

    /// A bias-free conv (the BN's β is the bias), `k`×`k`/`stride`.
    fn conv(&mut self, name: &str, k: i64, stride: i64, padding: Padding, io: (i64, i64)) {
        let conv = Conv2d {
            k,
            stride,
            padding,
            in_ch: io.0,
            out_ch: io.1,
            bias: false,
        };
        self.push(name, Box::new(conv));
    }

    /// A bias-free depthwise conv over `ch` channels.
    fn dw(&mut self, name: &str, k: i64, stride: i64, padding: Padding, ch: i64) {
        let dw = DepthwiseConv2d {
            k,
            stride,
            padding,
            ch,
            bias: false,
        };
        self.push(name, Box::new(dw));
    }

    fn bn(&mut self, name: &str, ch: i64) {
        let bn = self.norm.bn(ch);
        self.push(name, Box::new(bn));
    }

    fn act(&mut self, name: &str, act: Activation) {
        self.push(name, act.layer());
    }

    /// `prefix`, `prefix_bn`, `prefix_act`: a conv–BN–activation stage.
    fn conv_bn_act(
        &mut self,
        prefix: &str,
        conv: (i64, i64, Padding),
        io: (i64, i64),
        act: Activation,
    ) {
        self.conv(prefix, conv.0, conv.1, conv.2, io);
        self.bn(&format!("{prefix}_bn"), io.1);
        self.act(&format!("{prefix}_act"), act);
    }

    /// `prefix`, `prefix_bn`, `prefix_act`: a depthwise–BN–activation stage.
    fn dw_bn_act(&mut self, prefix: &str, conv: (i64, i64, Padding), ch: i64, act: Activation) {
        self.dw(prefix, conv.0, conv.1, conv.2, ch);
        self.bn(&format!("{prefix}_bn"), ch);
        self.act(&format!("{prefix}_act"), act);
    }

    /// `project`, `project_bn`: the linear 1×1 projection that ends a block.
    fn project(&mut self, padding: Padding, io: (i64, i64)) {
        self.conv("project", 1, 1, padding, io);
        self.bn("project_bn", io.1);
    }

    /// The block, with an identity skip around the chain when `skip`, its
    /// label `config` marked ` +skip` then.
    fn finish(self, config: String, skip: bool) -> MobileBlock {
        let label = format!("{config}{}", if skip { " +skip" } else { "" });
        let body: Box<dyn CertLayer> = if skip {
            Box::new(Residual::new(Box::new(self.parts.chain)))
        } else {
            Box::new(self.parts.chain)
        };
        MobileBlock { label, body, skip }
    }
}

fn check_positive(what: &str, fields: &[(&str, i64)]) -> Result<(), LayerError> {
    let max = crate::net::FIELD_MAX;
    match fields.iter().find(|(_, v)| *v < 1 || *v > max) {
        Some((name, v)) => Err(LayerError(format!(
            "{what}: {name} must be in [1, {max}], got {v}"
        ))),
        None => Ok(()),
    }
}

/// conv k×k/`stride` → BN → activation, bias-free: the nets' stems and
/// 1×1 heads (MobileNetV4's head is two of them).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ConvBnActSpec {
    pub k: i64,
    pub stride: i64,
    pub padding: Padding,
    pub out_ch: i64,
    pub act: Activation,
    pub world: BnWorld,
    pub eps: f64,
}

impl ConvBnActSpec {
    pub fn build(&self, in_ch: i64) -> Result<MobileBlock, LayerError> {
        self.build_with(in_ch, &mut |_, l| l)
    }

    /// Layers `conv`, `bn`, `act`.
    pub fn build_with(&self, in_ch: i64, swap: LayerSwap) -> Result<MobileBlock, LayerError> {
        let what = "conv-bn-act";
        check_positive(
            what,
            &[
                ("k", self.k),
                ("stride", self.stride),
                ("out_ch", self.out_ch),
            ],
        )?;
        check_eps(what, self.eps)?;
        let mut s = Stages::new(self.world, self.eps, swap);
        s.conv(
            "conv",
            self.k,
            self.stride,
            self.padding,
            (in_ch, self.out_ch),
        );
        s.bn("bn", self.out_ch);
        s.act("act", self.act);
        let label = format!(
            "conv{k}×{k}/s{} {:?} {in_ch}→{} bn {}",
            self.stride,
            self.padding,
            self.out_ch,
            self.act.word(),
            k = self.k
        );
        Ok(s.finish(label, false))
    }
}

/// MobileNetV2's inverted residual: [expand 1×1 → BN → act, omitted at
/// `expand` 1] → depthwise k×k/`stride` → BN → act → project 1×1 → BN
/// (linear), + skip by `skip`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct InvertedResidualSpec {
    /// The expansion ratio t: the hidden width is t·in.
    pub expand: i64,
    pub k: i64,
    pub stride: i64,
    /// Of the depthwise conv (the only k×k conv).
    pub padding: Padding,
    pub out_ch: i64,
    pub act: Activation,
    pub skip: SkipRule,
    pub world: BnWorld,
    pub eps: f64,
}

impl InvertedResidualSpec {
    pub fn build(&self, in_ch: i64) -> Result<MobileBlock, LayerError> {
        self.build_with(in_ch, &mut |_, l| l)
    }

    pub fn build_with(&self, in_ch: i64, swap: LayerSwap) -> Result<MobileBlock, LayerError> {
        let what = "inverted residual";
        check_positive(
            what,
            &[
                ("expand", self.expand),
                ("k", self.k),
                ("stride", self.stride),
                ("out_ch", self.out_ch),
            ],
        )?;
        check_eps(what, self.eps)?;
        let mid = in_ch * self.expand;
        let mut s = Stages::new(self.world, self.eps, swap);
        if self.expand != 1 {
            s.conv_bn_act("expand", (1, 1, self.padding), (in_ch, mid), self.act);
        }
        s.dw_bn_act("dw", (self.k, self.stride, self.padding), mid, self.act);
        s.project(self.padding, (mid, self.out_ch));
        let skip = self.skip.applies(self.stride, in_ch, self.out_ch);
        let label = format!(
            "inverted residual t={} dw{k}×{k}/s{} {:?} {in_ch}→{mid}→{} {}",
            self.expand,
            self.stride,
            self.padding,
            self.out_ch,
            self.act.word(),
            k = self.k
        );
        Ok(s.finish(label, skip))
    }
}

/// EfficientNet's MBConv: [expand 1×1 → BN → act if `expand` ≠ 1] →
/// depthwise k×k/`stride` → BN → act → squeeze-excite (reduced width =
/// block input channels / `se_divisor`, at least 1) → project 1×1 → BN, +
/// skip by `skip`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MbConvSeSpec {
    pub expand: i64,
    pub k: i64,
    pub stride: i64,
    pub padding: Padding,
    pub out_ch: i64,
    pub act: Activation,
    /// SE's reduced width is `in_ch / se_divisor` of the BLOCK input
    /// (docs/conventions.md §12: 4), not of the expanded width.
    pub se_divisor: i64,
    pub skip: SkipRule,
    pub world: BnWorld,
    pub eps: f64,
}

impl MbConvSeSpec {
    pub fn build(&self, in_ch: i64) -> Result<MobileBlock, LayerError> {
        self.build_with(in_ch, &mut |_, l| l)
    }

    pub fn build_with(&self, in_ch: i64, swap: LayerSwap) -> Result<MobileBlock, LayerError> {
        let what = "mbconv-se";
        check_positive(
            what,
            &[
                ("expand", self.expand),
                ("k", self.k),
                ("stride", self.stride),
                ("out_ch", self.out_ch),
                ("se_divisor", self.se_divisor),
            ],
        )?;
        check_eps(what, self.eps)?;
        let mid = in_ch * self.expand;
        let reduced = (in_ch / self.se_divisor).max(1);
        let mut s = Stages::new(self.world, self.eps, swap);
        if self.expand != 1 {
            s.conv_bn_act("expand", (1, 1, self.padding), (in_ch, mid), self.act);
        }
        s.dw_bn_act("dw", (self.k, self.stride, self.padding), mid, self.act);
        s.push("se", Box::new(SqueezeExcite { ch: mid, reduced }));
        s.project(self.padding, (mid, self.out_ch));
        let skip = self.skip.applies(self.stride, in_ch, self.out_ch);
        let label = format!(
            "mbconv-se t={} dw{k}×{k}/s{} {:?} {in_ch}→{mid}→{} se r={reduced} {}",
            self.expand,
            self.stride,
            self.padding,
            self.out_ch,
            self.act.word(),
            k = self.k
        );
        Ok(s.finish(label, skip))
    }
}

/// The fused-MBConv: conv k×k/`stride` (in → t·in) → BN → act → project 1×1
/// → BN, + skip by `skip`; at `expand` 1 the k×k conv maps straight to
/// `out_ch` (conv → BN → act, no projection).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FusedMbConvSpec {
    pub expand: i64,
    pub k: i64,
    pub stride: i64,
    pub padding: Padding,
    pub out_ch: i64,
    pub act: Activation,
    pub skip: SkipRule,
    pub world: BnWorld,
    pub eps: f64,
}

impl FusedMbConvSpec {
    pub fn build(&self, in_ch: i64) -> Result<MobileBlock, LayerError> {
        self.build_with(in_ch, &mut |_, l| l)
    }

    pub fn build_with(&self, in_ch: i64, swap: LayerSwap) -> Result<MobileBlock, LayerError> {
        let what = "fused-mbconv";
        check_positive(
            what,
            &[
                ("expand", self.expand),
                ("k", self.k),
                ("stride", self.stride),
                ("out_ch", self.out_ch),
            ],
        )?;
        check_eps(what, self.eps)?;
        let mut s = Stages::new(self.world, self.eps, swap);
        let conv = (self.k, self.stride, self.padding);
        let mid = if self.expand == 1 {
            s.conv_bn_act("fused", conv, (in_ch, self.out_ch), self.act);
            self.out_ch
        } else {
            let mid = in_ch * self.expand;
            s.conv_bn_act("fused", conv, (in_ch, mid), self.act);
            s.project(self.padding, (mid, self.out_ch));
            mid
        };
        let skip = self.skip.applies(self.stride, in_ch, self.out_ch);
        let label = format!(
            "fused-mbconv t={} conv{k}×{k}/s{} {:?} {in_ch}→{mid}→{} {}",
            self.expand,
            self.stride,
            self.padding,
            self.out_ch,
            self.act.word(),
            k = self.k
        );
        Ok(s.finish(label, skip))
    }
}

/// MobileNetV4's universal inverted bottleneck (docs/nets.md §6): [pre-DW
/// k₁×k₁ → BN → act] → expand 1×1 (in → t·in) → BN → act → [post-DW k₂×k₂ →
/// BN → act] → project 1×1 → BN, + skip by `skip`. A DW kernel of 0 omits
/// that DW (ExtraDW: both; IB: post only; ConvNeXt-like: pre only; FFN:
/// neither). The stride sits in the pre-DW if present, else in the post-DW;
/// a strided FFN is rejected.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct UibSpec {
    /// The pre-DW kernel, 0 for none.
    pub pre_dw_k: i64,
    /// The post-DW kernel, 0 for none.
    pub post_dw_k: i64,
    pub expand: i64,
    pub stride: i64,
    pub padding: Padding,
    pub out_ch: i64,
    pub act: Activation,
    pub skip: SkipRule,
    pub world: BnWorld,
    pub eps: f64,
}

impl UibSpec {
    pub fn build(&self, in_ch: i64) -> Result<MobileBlock, LayerError> {
        self.build_with(in_ch, &mut |_, l| l)
    }

    pub fn build_with(&self, in_ch: i64, swap: LayerSwap) -> Result<MobileBlock, LayerError> {
        let what = "uib";
        check_positive(
            what,
            &[
                ("expand", self.expand),
                ("stride", self.stride),
                ("out_ch", self.out_ch),
            ],
        )?;
        for (name, k) in [("pre_dw_k", self.pre_dw_k), ("post_dw_k", self.post_dw_k)] {
            if k < 0 {
                return Err(LayerError(format!(
                    "{what}: {name} must be ≥ 0 (0 omits the DW), got {k}"
                )));
            }
        }
        if self.stride != 1 && self.pre_dw_k == 0 && self.post_dw_k == 0 {
            return Err(LayerError(format!(
                "{what}: stride {} needs a depthwise conv to take it (pre_dw_k and post_dw_k are 0)",
                self.stride
            )));
        }
        check_eps(what, self.eps)?;
        let mid = in_ch * self.expand;
        let (pre_stride, post_stride) = if self.pre_dw_k > 0 {
            (self.stride, 1)
        } else {
            (1, self.stride)
        };
        let mut s = Stages::new(self.world, self.eps, swap);
        if self.pre_dw_k > 0 {
            s.dw_bn_act(
                "pre_dw",
                (self.pre_dw_k, pre_stride, self.padding),
                in_ch,
                self.act,
            );
        }
        s.conv_bn_act("expand", (1, 1, self.padding), (in_ch, mid), self.act);
        if self.post_dw_k > 0 {
            s.dw_bn_act(
                "post_dw",
                (self.post_dw_k, post_stride, self.padding),
                mid,
                self.act,
            );
        }
        s.project(self.padding, (mid, self.out_ch));
        let skip = self.skip.applies(self.stride, in_ch, self.out_ch);
        let label = format!(
            "uib pre-dw {} post-dw {} t={} s{} {:?} {in_ch}→{mid}→{} {}",
            self.pre_dw_k,
            self.post_dw_k,
            self.expand,
            self.stride,
            self.padding,
            self.out_ch,
            self.act.word()
        );
        Ok(s.finish(label, skip))
    }
}

impl CertLayer for MobileBlock {
    fn name(&self) -> String {
        self.label.clone()
    }
    fn output_type(&self, input: &TensorType) -> Result<TensorType, LayerError> {
        self.body.output_type(input)
    }
    fn params(&self, input: &TensorType) -> Vec<ParamSpec> {
        self.body.params(input)
    }
    fn batch_norms(&self) -> Vec<BlockBn> {
        self.body.batch_norms()
    }
    fn forward(
        &self,
        fb: &mut FuncBuilder,
        x: ValueId,
        params: &[ValueId],
        sites: &mut Sites,
    ) -> EmitResult<Saved> {
        self.body.forward(fb, x, params, sites)
    }
    fn backward(
        &self,
        fb: &mut FuncBuilder,
        x: ValueId,
        params: &[ValueId],
        saved: &Saved,
        dy: ValueId,
    ) -> EmitResult<Grads> {
        self.body.backward(fb, x, params, saved, dy)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(b: &MobileBlock, input: &[i64]) -> Vec<String> {
        b.params(&TensorType::f32(input.to_vec()))
            .into_iter()
            .map(|p| p.name)
            .collect()
    }

    #[test]
    fn inverted_residual_skips_only_when_the_shape_is_kept() {
        let ir = |stride, out_ch| InvertedResidualSpec {
            expand: 6,
            k: 3,
            stride,
            padding: Padding::XlaSame,
            out_ch,
            act: Activation::Relu6,
            skip: SkipRule::IdentityWhenShapeKept,
            world: BnWorld::Batch,
            eps: 1e-5,
        };
        assert!(ir(1, 4).build(4).unwrap().skip);
        assert!(!ir(2, 4).build(4).unwrap().skip);
        assert!(!ir(1, 8).build(4).unwrap().skip);
        let never = InvertedResidualSpec {
            skip: SkipRule::Never,
            ..ir(1, 4)
        };
        assert!(!never.build(4).unwrap().skip);
        let b = ir(1, 4).build(4).unwrap();
        assert_eq!(
            names(&b, &[1, 4, 6, 6]),
            [
                "expand.W",
                "expand_bn.gamma",
                "expand_bn.beta",
                "dw.W",
                "dw_bn.gamma",
                "dw_bn.beta",
                "project.W",
                "project_bn.gamma",
                "project_bn.beta"
            ]
        );
        // Paths go through the Residual's one child.
        assert_eq!(b.batch_norms()[0].path, [0, 1]);
        assert_eq!(b.batch_norms()[2].path, [0, 7]);
        assert_eq!(b.batch_norms()[2].name, "project_bn");
        // t = 1: no expand stage.
        let t1 = InvertedResidualSpec {
            expand: 1,
            ..ir(1, 2)
        };
        assert_eq!(names(&t1.build(4).unwrap(), &[1, 4, 6, 6])[0], "dw.W");
    }

    #[test]
    fn uib_places_the_stride_and_omits_absent_depthwise_convs() {
        let uib = |pre, post, stride| UibSpec {
            pre_dw_k: pre,
            post_dw_k: post,
            expand: 2,
            stride,
            padding: Padding::XlaSame,
            out_ch: 6,
            act: Activation::Relu,
            skip: SkipRule::IdentityWhenShapeKept,
            world: BnWorld::Batch,
            eps: 1e-5,
        };
        let input = TensorType::f32(vec![1, 3, 8, 6]);
        let out = |b: &UibSpec| b.build(3).unwrap().output_type(&input).unwrap().shape;
        assert_eq!(out(&uib(3, 5, 2)), [1, 6, 4, 3]);
        assert_eq!(out(&uib(0, 5, 2)), [1, 6, 4, 3]);
        assert_eq!(out(&uib(0, 0, 1)), [1, 6, 8, 6]);
        let ffn = uib(0, 0, 1).build(3).unwrap();
        assert_eq!(ffn.batch_norms().len(), 2);
        assert_eq!(uib(3, 3, 1).build(3).unwrap().batch_norms().len(), 4);
        let e = uib(0, 0, 2).build(3).err().unwrap();
        assert!(e.0.contains("needs a depthwise conv"), "{e}");
        let e = uib(-1, 0, 1).build(3).err().unwrap();
        assert!(e.0.contains("pre_dw_k must be ≥ 0"), "{e}");
    }

    #[test]
    fn mbconv_se_reduces_from_the_block_input() {
        let b = MbConvSeSpec {
            expand: 6,
            k: 5,
            stride: 2,
            padding: Padding::XlaSame,
            out_ch: 8,
            act: Activation::Swish,
            se_divisor: 4,
            skip: SkipRule::IdentityWhenShapeKept,
            world: BnWorld::Batch,
            eps: 1e-5,
        }
        .build(8)
        .unwrap();
        let ps = b.params(&TensorType::f32(vec![1, 8, 8, 8]));
        let w1 = ps.iter().find(|p| p.name == "se.W1").unwrap();
        assert_eq!(w1.ty.shape, [48, 2], "C = 6·8 expanded, r = 8/4");
        let bad = MbConvSeSpec {
            expand: 6,
            k: 5,
            stride: 2,
            padding: Padding::XlaSame,
            out_ch: 8,
            act: Activation::Swish,
            se_divisor: 4,
            skip: SkipRule::IdentityWhenShapeKept,
            world: BnWorld::Batch,
            eps: 0.0,
        };
        assert!(bad.build(8).err().unwrap().0.contains("eps must be > 0"));
    }
}
