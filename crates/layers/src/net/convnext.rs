//! ConvNeXt as tables (docs/nets.md §7): ConvNeXt-T and -S at any class count
//! and input size, their names (`convnext-t`, `convnext-t-k1000`,
//! `convnext-s-k1000`, `convnext-t-k10-32x32`), and the `BlockSpec` of each
//! block kind of `crate::blocks_convnext`. Conventions: 4×4/s4 symmetric
//! (left-aligned, pad 0) patchify stem, 2×2/s2 symmetric downsamples, dw 7×7
//! pad 3, every conv with bias, channel LN ε 1e-6, GELU (tanh), layer scale
//! γ₀ = 1e-6 (timm's), head GAP → dense with no head LN (the verified spec:
//! its exact counts, 27,826,282 at K=10, have none). Every ConvNeXt block is
//! a drop-path site: with `NetSpec::chain_with_drop_path` its branch takes a
//! per-example keep input, on the ramp `1 − rate·i/17` over the 18 blocks.

use super::block::{at_least, positive_eps, BlockSpec, BuildCtx, FieldError};
use super::leaves::channels;
use super::sizes::Sizes;
use super::{DenseSpec, GlobalAvgPoolSpec, LayerSpec, NetSpec};
use crate::blocks_convnext::{
    ConvNextBlockSpec, ConvNextDownsampleSpec, ConvNextStemSpec, MlpActivation,
};
use crate::layer::{CertLayer, LayerError};
use crate::ops::conv::Padding;
use crate::ops::pool::PoolBackward;
use ir::TensorType;

/// LN ε of every ConvNeXt norm.
pub const CONVNEXT_LN_EPS: f64 = 1e-6;
/// The layer scale's initial γ (timm's `ls_init_value`).
pub const CONVNEXT_LAYER_SCALE_INIT: f64 = 1e-6;
const PAD: Padding = Padding::Symmetric;

impl BlockSpec for ConvNextStemSpec {
    fn build(&self, input: &TensorType, _: &BuildCtx) -> Result<Box<dyn CertLayer>, LayerError> {
        Ok(Box::new(ConvNextStemSpec::build(self, channels(input)?)?))
    }
    fn validate(&self) -> Result<(), FieldError> {
        at_least("k", self.k, 1)?;
        at_least("stride", self.stride, 1)?;
        at_least("out_ch", self.out_ch, 1)?;
        positive_eps("eps", self.eps)
    }
}

impl BlockSpec for ConvNextDownsampleSpec {
    fn build(&self, input: &TensorType, _: &BuildCtx) -> Result<Box<dyn CertLayer>, LayerError> {
        Ok(Box::new(ConvNextDownsampleSpec::build(
            self,
            channels(input)?,
        )?))
    }
    fn validate(&self) -> Result<(), FieldError> {
        at_least("k", self.k, 1)?;
        at_least("stride", self.stride, 1)?;
        at_least("out_ch", self.out_ch, 1)?;
        positive_eps("eps", self.eps)
    }
}

impl BlockSpec for ConvNextBlockSpec {
    fn build(&self, input: &TensorType, ctx: &BuildCtx) -> Result<Box<dyn CertLayer>, LayerError> {
        let block = self.build_with(channels(input)?, ctx.drop_path, &mut |_, l| l)?;
        Ok(Box::new(block))
    }
    fn validate(&self) -> Result<(), FieldError> {
        at_least("k", self.k, 1)?;
        at_least("expand", self.expand, 1)?;
        positive_eps("eps", self.eps)?;
        if !self.layer_scale_init.is_finite() {
            return Err(FieldError::new(
                "layer_scale_init",
                format!(
                    "layer_scale_init = {}: expected a finite γ₀",
                    self.layer_scale_init
                ),
            ));
        }
        Ok(())
    }
    /// The one residual branch.
    fn drop_path_sites(&self) -> usize {
        1
    }
}

/// A ConvNeXt variant's stage depths and widths.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ConvNextVariant {
    /// `t`, `s`, `b`.
    pub tag: &'static str,
    pub depths: [usize; 4],
    pub dims: [i64; 4],
}

/// ConvNeXt-T: `[3,3,9,3]` at `[96,192,384,768]`.
pub const CONVNEXT_T: ConvNextVariant = ConvNextVariant {
    tag: "t",
    depths: [3, 3, 9, 3],
    dims: [96, 192, 384, 768],
};
/// ConvNeXt-S: `[3,3,27,3]`, T's widths.
pub const CONVNEXT_S: ConvNextVariant = ConvNextVariant {
    tag: "s",
    depths: [3, 3, 27, 3],
    dims: [96, 192, 384, 768],
};
/// ConvNeXt-B: `[3,3,27,3]` at `[128,256,512,1024]`.
pub const CONVNEXT_B: ConvNextVariant = ConvNextVariant {
    tag: "b",
    depths: [3, 3, 27, 3],
    dims: [128, 256, 512, 1024],
};

const VARIANTS: [ConvNextVariant; 3] = [CONVNEXT_T, CONVNEXT_S, CONVNEXT_B];

/// `convnext-{tag}`, then K and input size (`Sizes`).
fn convnext_name(tag: &str, classes: i64, hw: (i64, i64)) -> String {
    Sizes {
        width: None,
        classes,
        hw,
        patch: None,
    }
    .name(&format!("convnext-{tag}"))
}

/// A ConvNeXt: `stem` (4×4/s4 conv 3→d₀ + channel LN), then per stage s
/// `stages.{s}.downsample` (s > 0: LN → 2×2/s2 conv d_{s−1}→d_s) and its
/// blocks `stages.{s}.blocks.{i}`; `gap`; `head` (dense d₃→K). The input
/// needs H, W divisible by 32 for the 7×7-grid geometry of the paper (any
/// size the convs accept builds).
pub fn convnext(v: ConvNextVariant, classes: i64, hw: (i64, i64)) -> NetSpec {
    let mut layers = vec![(
        "stem".to_string(),
        LayerSpec::ConvNextStem(ConvNextStemSpec {
            k: 4,
            stride: 4,
            padding: PAD,
            out_ch: v.dims[0],
            eps: CONVNEXT_LN_EPS,
        }),
    )];
    for (s, (&depth, &dim)) in v.depths.iter().zip(&v.dims).enumerate() {
        if s > 0 {
            layers.push((
                format!("stages.{s}.downsample"),
                LayerSpec::ConvNextDownsample(ConvNextDownsampleSpec {
                    k: 2,
                    stride: 2,
                    padding: PAD,
                    out_ch: dim,
                    eps: CONVNEXT_LN_EPS,
                }),
            ));
        }
        for i in 0..depth {
            layers.push((
                format!("stages.{s}.blocks.{i}"),
                LayerSpec::ConvNextBlock(ConvNextBlockSpec {
                    k: 7,
                    padding: PAD,
                    expand: 4,
                    act: MlpActivation::GeluTanh,
                    eps: CONVNEXT_LN_EPS,
                    layer_scale_init: CONVNEXT_LAYER_SCALE_INIT,
                }),
            ));
        }
    }
    layers.push(("gap".into(), LayerSpec::GlobalAvgPool(GlobalAvgPoolSpec {})));
    layers.push((
        "head".into(),
        LayerSpec::Dense(DenseSpec {
            out_f: classes,
            bias: true,
        }),
    ));
    NetSpec {
        name: convnext_name(v.tag, classes, hw),
        input: (3, hw.0, hw.1),
        classes,
        layers,
        label_smoothing: None,
        pool_backward: PoolBackward::default(),
    }
}

/// ConvNeXt-T (docs/nets.md §7).
pub fn convnext_t(classes: i64, hw: (i64, i64)) -> NetSpec {
    convnext(CONVNEXT_T, classes, hw)
}

/// ConvNeXt-S.
pub fn convnext_s(classes: i64, hw: (i64, i64)) -> NetSpec {
    convnext(CONVNEXT_S, classes, hw)
}

/// ConvNeXt-T and -S at K = 10 and K = 1000, 224² (-B by name only).
pub fn catalog() -> Vec<NetSpec> {
    let mut out = Vec::new();
    for v in [CONVNEXT_T, CONVNEXT_S] {
        for k in [10, 1000] {
            out.push(convnext(v, k, (224, 224)));
        }
    }
    out
}

/// A ConvNeXt by name: `convnext-{t,s,b}`, then `-k{K}` and optionally
/// `-{H}x{W}`. Only the canonical spelling names a net.
pub fn by_name(name: &str) -> Option<NetSpec> {
    let rest = name.strip_prefix("convnext-")?;
    let (tag, rest) = rest.split_at(rest.find('-').unwrap_or(rest.len()));
    let v = VARIANTS.into_iter().find(|v| v.tag == tag)?;
    Sizes::build_named(name, rest, |s| convnext(v, s.classes, s.hw))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// LN sites: every channel-LN γ (`….norm.gamma`).
    fn ln_sites(n: &NetSpec) -> usize {
        n.param_specs()
            .unwrap()
            .iter()
            .filter(|p| p.name.ends_with(".norm.gamma"))
            .count()
    }

    /// The reference project's integers (docs/nets.md §7), not computed here.
    #[test]
    fn parameter_counts_match_the_reference() {
        let t = by_name("convnext-t").unwrap();
        assert_eq!(t.param_count().unwrap(), (180, 27_826_282));
        assert_eq!(ln_sites(&t), 22);
        let t1k = by_name("convnext-t-k1000").unwrap();
        assert_eq!(t1k.param_count().unwrap(), (180, 28_587_592));
        let s1k = by_name("convnext-s-k1000").unwrap();
        assert_eq!(s1k.param_count().unwrap().1, 50_222_152);
        let b1k = by_name("convnext-b-k1000").unwrap();
        assert_eq!(b1k.param_count().unwrap().1, 88_589_416);
        assert!(t.bn_sites().unwrap().is_empty());
    }

    #[test]
    fn names_parse_back_and_only_the_canonical_spelling_names_a_net() {
        let n = by_name("convnext-t-k10-32x64").unwrap();
        assert_eq!((n.input, n.classes), ((3, 32, 64), 10));
        assert_eq!(
            by_name("convnext-s-k1000").unwrap(),
            convnext_s(1000, (224, 224))
        );
        for bad in [
            "convnext-t-k10",
            "convnext-x",
            "convnext-t-1000",
            "convnext-tk1000",
        ] {
            assert!(by_name(bad).is_none(), "{bad}");
        }
    }

    /// 224 → 56 at the stem, 56/28/14/7 at the stages; the stem and the
    /// downsamples are the only strided convs, all symmetric with pad 0.
    #[test]
    fn geometry_is_the_papers() {
        let n = convnext_t(10, (224, 224));
        let chain = n.chain().unwrap();
        let tys = chain.types(&n.input_type(1)).unwrap();
        let at = |name: &str| {
            let i = n.layers.iter().position(|(m, _)| m == name).unwrap();
            tys[i + 1].shape.clone()
        };
        assert_eq!(at("stem"), [1, 96, 56, 56]);
        assert_eq!(at("stages.0.blocks.2"), [1, 96, 56, 56]);
        assert_eq!(at("stages.1.downsample"), [1, 192, 28, 28]);
        assert_eq!(at("stages.2.blocks.8"), [1, 384, 14, 14]);
        assert_eq!(at("stages.3.blocks.2"), [1, 768, 7, 7]);
        assert_eq!(at("head"), [1, 10]);
        let blocks = n
            .layers
            .iter()
            .filter(|(_, l)| l.as_block().drop_path_sites() == 1)
            .count();
        assert_eq!(blocks, 18);
        let ps = n.param_specs().unwrap();
        let p = |name: &str| ps.iter().find(|p| p.name == name).unwrap().ty.shape.clone();
        assert_eq!(p("stem.conv.W"), [96, 3, 4, 4]);
        assert_eq!(p("stages.1.downsample.conv.W"), [192, 96, 2, 2]);
        assert_eq!(p("stages.1.downsample.norm.gamma"), [96]);
        assert_eq!(p("stages.3.blocks.0.dw.W"), [768, 1, 7, 7]);
        assert_eq!(p("stages.3.blocks.0.fc1.W"), [3072, 768, 1, 1]);
        assert_eq!(p("head.W"), [768, 10]);
    }
}
