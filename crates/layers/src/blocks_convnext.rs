//! ConvNeXt's blocks (docs/conventions.md §4, §10, §12; docs/nets.md §7) as CertLayers:
//! the patchify stem (k×k/s`k` conv with bias → channel LN), the ConvNeXt
//! block (depthwise k×k with bias → channel LN → 1×1 c→t·c → GELU → 1×1
//! t·c→c → layer scale γ, inside an identity skip) and the downsample
//! (channel LN → k×k/s`k` conv with bias). Each is a `Chain` of per-op
//! layers (the block's wrapped in a `Residual`, with its per-example keep
//! scale when the net is built with stochastic depth), so its backward map is the
//! composition of certified leaf backwards; nothing block-specific is
//! hand-written here.
//!
//! Every convention is a typed field (kernel, stride, padding, LN ε, GELU
//! form, layer-scale init); none is defaulted. Layers inside a block are
//! named by role — `conv`, `norm` (stem, downsample); `dw`, `norm`, `fc1`,
//! `act`, `fc2`, `scale` (block) — which scopes their parameters
//! (`stages.2.blocks.4.fc1.W`).

use crate::block_parts::{check_eps, check_positive, LayerSwap, SwapChain};
use crate::combinators::{Chain, LabelledBlock, Residual};
use crate::layer::{CertLayer, LayerError};
use crate::ops::activation::{Gelu, GeluForm};
use crate::ops::conv::{Conv2d, DepthwiseConv2d, Padding};
use crate::ops::norm::{LayerNorm, LnKind};
use crate::ops::scale::LayerScale;
use serde::{Deserialize, Serialize};

/// The MLP nonlinearity of a ConvNeXt block.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum MlpActivation {
    /// GELU, tanh form (docs/conventions.md §9: the form the reference renders).
    GeluTanh,
}

impl MlpActivation {
    fn layer(self) -> Gelu {
        match self {
            MlpActivation::GeluTanh => Gelu {
                form: GeluForm::Tanh,
            },
        }
    }
}

/// A built ConvNeXt block kind: its chain, plain or inside a skip.
pub type ConvNextBlock = LabelledBlock;

/// The channel LN (`norm`) of every ConvNeXt block kind.
fn channel_ln(ch: i64, eps: f64) -> Box<dyn CertLayer> {
    Box::new(LayerNorm {
        dim: ch,
        eps,
        kind: LnKind::Channel,
    })
}

/// The k×k/`stride` conv with bias, `io` channels in → out, of the stem and
/// the downsample, once their fields (with the LN's `eps`) pass the checks.
fn strided_conv(
    what: &str,
    k: i64,
    stride: i64,
    padding: Padding,
    io: (i64, i64),
    eps: f64,
) -> Result<Box<dyn CertLayer>, LayerError> {
    check(what, &[("k", k), ("stride", stride), ("out_ch", io.1)], eps)?;
    Ok(Box::new(Conv2d {
        k,
        stride,
        padding,
        in_ch: io.0,
        out_ch: io.1,
        bias: true,
    }))
}

fn check(what: &str, fields: &[(&str, i64)], eps: f64) -> Result<(), LayerError> {
    check_positive(what, fields)?;
    check_eps(what, eps)
}

/// The patchify stem: conv k×k/`stride` with bias (docs/conventions.md §4: the 4×4/s4
/// symmetric conv reads the left-aligned, pad-0 windows `[4i, 4i+3]`) →
/// channel LN.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ConvNextStemSpec {
    pub k: i64,
    pub stride: i64,
    pub padding: Padding,
    pub out_ch: i64,
    /// The LN's ε.
    pub eps: f64,
}

impl ConvNextStemSpec {
    pub fn build(&self, in_ch: i64) -> Result<ConvNextBlock, LayerError> {
        self.build_with(in_ch, &mut |_, l| l)
    }

    /// Layers `conv`, `norm`.
    pub fn build_with(&self, in_ch: i64, swap: LayerSwap) -> Result<ConvNextBlock, LayerError> {
        let what = "convnext stem";
        let conv = strided_conv(
            what,
            self.k,
            self.stride,
            self.padding,
            (in_ch, self.out_ch),
            self.eps,
        )?;
        let mut p = SwapChain::new(swap);
        p.push("conv", conv);
        p.push("norm", channel_ln(self.out_ch, self.eps));
        Ok(ConvNextBlock {
            label: format!(
                "convnext stem conv{k}×{k}/s{} {:?} {in_ch}→{} +b, ln ε={:e}",
                self.stride,
                self.padding,
                self.out_ch,
                self.eps,
                k = self.k
            ),
            body: Box::new(p.chain),
        })
    }
}

/// The downsample between stages: channel LN → conv k×k/`stride` with bias
/// (docs/nets.md §7: 2×2/s2, symmetric with p = 0, window `[2i, 2i+1]`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ConvNextDownsampleSpec {
    pub k: i64,
    pub stride: i64,
    pub padding: Padding,
    pub out_ch: i64,
    pub eps: f64,
}

impl ConvNextDownsampleSpec {
    pub fn build(&self, in_ch: i64) -> Result<ConvNextBlock, LayerError> {
        self.build_with(in_ch, &mut |_, l| l)
    }

    /// Layers `norm`, `conv`.
    pub fn build_with(&self, in_ch: i64, swap: LayerSwap) -> Result<ConvNextBlock, LayerError> {
        let what = "convnext downsample";
        let conv = strided_conv(
            what,
            self.k,
            self.stride,
            self.padding,
            (in_ch, self.out_ch),
            self.eps,
        )?;
        let mut p = SwapChain::new(swap);
        p.push("norm", channel_ln(in_ch, self.eps));
        p.push("conv", conv);
        Ok(ConvNextBlock {
            label: format!(
                "convnext downsample ln ε={:e}, conv{k}×{k}/s{} {:?} {in_ch}→{} +b",
                self.eps,
                self.stride,
                self.padding,
                self.out_ch,
                k = self.k
            ),
            body: Box::new(p.chain),
        })
    }
}

/// The ConvNeXt block: depthwise k×k (stride 1, `padding`, with bias) →
/// channel LN → 1×1 c→`expand`·c (bias) → activation → 1×1 back to c (bias)
/// → layer scale γ (init `layer_scale_init`) → + skip. Channels are kept.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ConvNextBlockSpec {
    pub k: i64,
    pub padding: Padding,
    pub expand: i64,
    pub act: MlpActivation,
    pub eps: f64,
    pub layer_scale_init: f64,
}

impl ConvNextBlockSpec {
    /// The block with its plain identity skip.
    pub fn build(&self, ch: i64) -> Result<ConvNextBlock, LayerError> {
        self.build_with(ch, false, &mut |_, l| l)
    }

    /// Layers `dw`, `norm`, `fc1`, `act`, `fc2`, `scale` (the branch),
    /// inside the skip; with `drop_path`, the branch is scaled per example
    /// by a keep input (`Residual::with_drop_path`, docs/conventions.md §13) instead.
    pub fn build_with(
        &self,
        ch: i64,
        drop_path: bool,
        swap: LayerSwap,
    ) -> Result<ConvNextBlock, LayerError> {
        let mid = ch * self.expand;
        let body: Box<dyn CertLayer> = Box::new(self.branch(ch, swap)?);
        let body: Box<dyn CertLayer> = Box::new(Residual { body, drop_path });
        Ok(ConvNextBlock {
            label: format!(
                "convnext block dw{k}×{k} {:?} {ch}→{mid}→{ch} {:?} ln ε={:e} γ₀={:e}{}",
                self.padding,
                self.act,
                self.eps,
                self.layer_scale_init,
                if drop_path { " +drop-path" } else { " +skip" },
                k = self.k
            ),
            body,
        })
    }

    /// The residual branch alone: `dw` … `scale` at `ch` channels.
    pub fn branch(&self, ch: i64, swap: LayerSwap) -> Result<Chain, LayerError> {
        let what = "convnext block";
        check(what, &[("k", self.k), ("expand", self.expand)], self.eps)?;
        if !self.layer_scale_init.is_finite() {
            return Err(LayerError(format!(
                "{what}: layer_scale_init must be finite, got {}",
                self.layer_scale_init
            )));
        }
        let mid = ch * self.expand;
        let mut p = SwapChain::new(swap);
        let dw = DepthwiseConv2d {
            k: self.k,
            stride: 1,
            padding: self.padding,
            ch,
            bias: true,
        };
        p.push("dw", Box::new(dw));
        p.push("norm", channel_ln(ch, self.eps));
        let pointwise = |in_ch, out_ch| Conv2d {
            k: 1,
            stride: 1,
            padding: self.padding,
            in_ch,
            out_ch,
            bias: true,
        };
        p.push("fc1", Box::new(pointwise(ch, mid)));
        p.push("act", Box::new(self.act.layer()));
        p.push("fc2", Box::new(pointwise(mid, ch)));
        let ls = LayerScale {
            ch,
            init: self.layer_scale_init,
        };
        p.push("scale", Box::new(ls));
        Ok(p.chain)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ir::TensorType;

    fn block() -> ConvNextBlockSpec {
        ConvNextBlockSpec {
            k: 7,
            padding: Padding::Symmetric,
            expand: 4,
            act: MlpActivation::GeluTanh,
            eps: 1e-6,
            layer_scale_init: 1e-6,
        }
    }

    #[test]
    fn block_params_are_named_by_role_and_keep_the_shape() {
        let b = block().build(8).unwrap();
        let input = TensorType::f32(vec![1, 8, 5, 6]);
        assert_eq!(b.output_type(&input).unwrap(), input);
        let ps: Vec<_> = b
            .params(&input)
            .into_iter()
            .map(|p| (p.name, p.ty.shape))
            .collect();
        let want: Vec<(String, Vec<i64>)> = [
            ("dw.W", vec![8, 1, 7, 7]),
            ("dw.b", vec![8]),
            ("norm.gamma", vec![8]),
            ("norm.beta", vec![8]),
            ("fc1.W", vec![32, 8, 1, 1]),
            ("fc1.b", vec![32]),
            ("fc2.W", vec![8, 32, 1, 1]),
            ("fc2.b", vec![8]),
            ("scale.gamma", vec![8]),
        ]
        .into_iter()
        .map(|(n, s)| (n.to_string(), s))
        .collect();
        assert_eq!(ps, want);
        // Drop path adds one per-example keep input after the branch's.
        let d = block().build_with(8, true, &mut |_, l| l).unwrap();
        let ps = d.params(&TensorType::f32(vec![3, 8, 5, 6]));
        assert_eq!(ps.len(), 10);
        assert_eq!(ps[9].name, "drop_path");
        assert_eq!(ps[9].ty.shape, [3]);
    }

    #[test]
    fn stem_and_downsample_geometry() {
        let stem = ConvNextStemSpec {
            k: 4,
            stride: 4,
            padding: Padding::Symmetric,
            out_ch: 6,
            eps: 1e-6,
        }
        .build(3)
        .unwrap();
        let out = stem
            .output_type(&TensorType::f32(vec![2, 3, 16, 8]))
            .unwrap();
        assert_eq!(out.shape, [2, 6, 4, 2]);
        let down = ConvNextDownsampleSpec {
            k: 2,
            stride: 2,
            padding: Padding::Symmetric,
            out_ch: 12,
            eps: 1e-6,
        }
        .build(6)
        .unwrap();
        let out = down.output_type(&out).unwrap();
        assert_eq!(out.shape, [2, 12, 2, 1]);
        let e = ConvNextBlockSpec {
            eps: 0.0,
            ..block()
        }
        .build(4)
        .err()
        .unwrap();
        assert!(e.0.contains("eps must be > 0"), "{e}");
    }
}
