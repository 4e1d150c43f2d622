//! The depthwise family as tables (docs/nets.md §4, §5, §6):
//! MobileNetV2, EfficientNet-B0 and MobileNetV4-Conv-M at any class count,
//! input size and channel width, their names (`mobilenetv2`,
//! `efficientnet-b0-k1000`, `mobilenetv4-conv-m-k10-64x64`), and the
//! `BlockSpec` of each block kind of `crate::blocks_mobile`. All three use
//! true batch-stat BN (ε 1e-5) and bias-free convs before every BN. Their
//! stems pad XLA-SAME (`[0, 1]` at 3×3/s2); after the stem, MobileNetV2's
//! strided depthwise convs pad XLA-SAME too, while EfficientNet-B0's strided
//! depthwise convs and MobileNetV4's fused-MBConv and strided UIB pre-DW
//! convs pad symmetrically (`[p, p]`) — the reference project's nets, as its
//! rendered artifacts pad them (docs/nets.md).

use super::block::{at_least, positive_eps, BlockSpec, BuildCtx, FieldError};
use super::leaves::channels;
use super::sizes::Sizes;
use super::{DenseSpec, GlobalAvgPoolSpec, LayerSpec, NetSpec};
use crate::blocks_mobile::{
    Activation, ConvBnActSpec, FusedMbConvSpec, InvertedResidualSpec, MbConvSeSpec, SkipRule,
    UibSpec,
};
use crate::layer::{CertLayer, LayerError};
use crate::ops::conv::Padding;
use crate::ops::norm::BnWorld;
use crate::ops::pool::PoolBackward;
use ir::TensorType;

/// The conventions every block of the three nets shares.
const WORLD: BnWorld = BnWorld::Batch;
const EPS: f64 = 1e-5;
/// Every stem: XLA-SAME.
const STEM_PAD: Padding = Padding::XlaSame;
/// MobileNetV2's strided blocks.
const MNV2_PAD: Padding = Padding::XlaSame;
/// EfficientNet-B0's and MobileNetV4-Conv-M's strided blocks.
const BLOCK_PAD: Padding = Padding::Symmetric;
const SKIP: SkipRule = SkipRule::IdentityWhenShapeKept;

/// The stem width of all three nets; `width` scales every channel count by
/// `width / STEM`.
const STEM: i64 = 32;

/// A BlockSpec for each payload: build, BN world, field checks.
macro_rules! mobile_block_spec {
    ($t:ty, [$($field:ident),*]) => {
        impl BlockSpec for $t {
            fn build(
                &self,
                input: &TensorType,
                _: &BuildCtx,
            ) -> Result<Box<dyn CertLayer>, LayerError> {
                Ok(Box::new(<$t>::build(self, channels(input)?)?))
            }
            fn bn_world(&self) -> Option<BnWorld> {
                Some(self.world)
            }
            fn set_bn_world(&mut self, world: BnWorld) {
                self.world = world;
            }
            fn validate(&self) -> Result<(), FieldError> {
                $(at_least(stringify!($field), self.$field, 1)?;)*
                positive_eps("eps", self.eps)
            }
        }
    };
}

mobile_block_spec!(ConvBnActSpec, [k, stride, out_ch]);
mobile_block_spec!(InvertedResidualSpec, [expand, k, stride, out_ch]);
mobile_block_spec!(MbConvSeSpec, [expand, k, stride, out_ch, se_divisor]);
mobile_block_spec!(FusedMbConvSpec, [expand, k, stride, out_ch]);

impl BlockSpec for UibSpec {
    fn build(&self, input: &TensorType, _: &BuildCtx) -> Result<Box<dyn CertLayer>, LayerError> {
        Ok(Box::new(UibSpec::build(self, channels(input)?)?))
    }
    fn bn_world(&self) -> Option<BnWorld> {
        Some(self.world)
    }
    fn set_bn_world(&mut self, world: BnWorld) {
        self.world = world;
    }
    fn validate(&self) -> Result<(), FieldError> {
        at_least("pre_dw_k", self.pre_dw_k, 0)?;
        at_least("post_dw_k", self.post_dw_k, 0)?;
        at_least("expand", self.expand, 1)?;
        at_least("stride", self.stride, 1)?;
        at_least("out_ch", self.out_ch, 1)?;
        if self.stride != 1 && self.pre_dw_k == 0 && self.post_dw_k == 0 {
            return Err(FieldError::new(
                "stride",
                format!(
                    "stride = {}: a UIB without depthwise convs (pre_dw_k = post_dw_k = 0) cannot stride",
                    self.stride
                ),
            ));
        }
        positive_eps("eps", self.eps)
    }
}

/// The three nets' bases, as they start a name.
const BASES: [&str; 3] = ["mobilenetv2", "efficientnet-b0", "mobilenetv4-conv-m"];

/// `base`, then `-w{width}` unless full width, K and input size (`Sizes`).
fn mobile_name(base: &str, classes: i64, hw: (i64, i64), width: i64) -> String {
    Sizes {
        width: (width != STEM).then_some(width),
        classes,
        hw,
        patch: None,
    }
    .name(base)
}

/// `ch · width / 32`; the widths offered keep every channel count integral.
fn scaled(ch: i64, width: i64) -> i64 {
    ch * width / STEM
}

fn conv_bn_act(k: i64, stride: i64, out_ch: i64, act: Activation) -> LayerSpec {
    LayerSpec::ConvBnAct(ConvBnActSpec {
        k,
        stride,
        padding: STEM_PAD,
        out_ch,
        act,
        world: WORLD,
        eps: EPS,
    })
}

/// GAP → dense (with bias) to `classes`.
fn head(classes: i64) -> [(String, LayerSpec); 2] {
    [
        ("gap".into(), LayerSpec::GlobalAvgPool(GlobalAvgPoolSpec {})),
        (
            "fc".into(),
            LayerSpec::Dense(DenseSpec {
                out_f: classes,
                bias: true,
            }),
        ),
    ]
}

fn net(
    base: &str,
    classes: i64,
    hw: (i64, i64),
    width: i64,
    layers: Vec<(String, LayerSpec)>,
) -> NetSpec {
    NetSpec {
        name: mobile_name(base, classes, hw, width),
        input: (3, hw.0, hw.1),
        classes,
        layers,
        label_smoothing: None,
        pool_backward: PoolBackward::default(),
    }
}

/// Whether `width` keeps every channel count of the three nets integral.
fn width_ok(width: i64) -> bool {
    matches!(width, 4 | 8 | 16 | 32)
}

/// MobileNetV2 (docs/nets.md §4) at full width.
pub fn mobilenetv2(classes: i64, hw: (i64, i64)) -> NetSpec {
    mobilenetv2_width(classes, hw, STEM)
}

/// MobileNetV2: stem conv 3×3/s2 → BN → ReLU6; the 17 inverted residuals
/// of the `(t, c, n, s)` table (stride in the first block of each row, dw
/// 3×3); head 1×1 → 1280 → BN → ReLU6; GAP; dense. Every channel count is
/// scaled by `width`/32 (4, 8, 16 or 32; 32 is the paper's net). Blocks are
/// `blocks.0` … `blocks.16`.
pub fn mobilenetv2_width(classes: i64, hw: (i64, i64), width: i64) -> NetSpec {
    assert!(
        width_ok(width),
        "mobilenetv2 width {width}: one of 4, 8, 16, 32"
    );
    let table = [
        (1, 16, 1, 1),
        (6, 24, 2, 2),
        (6, 32, 3, 2),
        (6, 64, 4, 2),
        (6, 96, 3, 1),
        (6, 160, 3, 2),
        (6, 320, 1, 1),
    ];
    let mut layers = vec![(
        "stem".to_string(),
        conv_bn_act(3, 2, width, Activation::Relu6),
    )];
    for (t, c, n, s) in table {
        for i in 0..n {
            let b = InvertedResidualSpec {
                expand: t,
                k: 3,
                stride: if i == 0 { s } else { 1 },
                padding: MNV2_PAD,
                out_ch: scaled(c, width),
                act: Activation::Relu6,
                skip: SKIP,
                world: WORLD,
                eps: EPS,
            };
            let name = format!("blocks.{}", layers.len() - 1);
            layers.push((name, LayerSpec::InvertedResidual(b)));
        }
    }
    layers.push((
        "head".into(),
        conv_bn_act(1, 1, scaled(1280, width), Activation::Relu6),
    ));
    layers.extend(head(classes));
    net("mobilenetv2", classes, hw, width, layers)
}

/// EfficientNet-B0 (docs/nets.md §5) at full width.
pub fn efficientnet_b0(classes: i64, hw: (i64, i64)) -> NetSpec {
    efficientnet_b0_width(classes, hw, STEM)
}

/// EfficientNet-B0: stem conv 3×3/s2 → BN → swish; the 16 MBConv-SE blocks
/// of the `(t, c, n, s, k)` table (SE reduced width = block input / 4);
/// head 1×1 → 1280 → BN → swish; GAP; dense (no dropout: the step is
/// deterministic). Channels scaled by `width`/32.
pub fn efficientnet_b0_width(classes: i64, hw: (i64, i64), width: i64) -> NetSpec {
    assert!(
        width_ok(width),
        "efficientnet-b0 width {width}: one of 4, 8, 16, 32"
    );
    let table = [
        (1, 16, 1, 1, 3),
        (6, 24, 2, 2, 3),
        (6, 40, 2, 2, 5),
        (6, 80, 3, 2, 3),
        (6, 112, 3, 1, 5),
        (6, 192, 4, 2, 5),
        (6, 320, 1, 1, 3),
    ];
    let mut layers = vec![(
        "stem".to_string(),
        conv_bn_act(3, 2, width, Activation::Swish),
    )];
    for (t, c, n, s, k) in table {
        for i in 0..n {
            let b = MbConvSeSpec {
                expand: t,
                k,
                stride: if i == 0 { s } else { 1 },
                padding: BLOCK_PAD,
                out_ch: scaled(c, width),
                act: Activation::Swish,
                se_divisor: 4,
                skip: SKIP,
                world: WORLD,
                eps: EPS,
            };
            let name = format!("blocks.{}", layers.len() - 1);
            layers.push((name, LayerSpec::MbConvSe(b)));
        }
    }
    layers.push((
        "head".into(),
        conv_bn_act(1, 1, scaled(1280, width), Activation::Swish),
    ));
    layers.extend(head(classes));
    net("efficientnet-b0", classes, hw, width, layers)
}

/// MobileNetV4-Conv-M (docs/nets.md §6) at full width.
pub fn mobilenetv4_conv_m(classes: i64, hw: (i64, i64)) -> NetSpec {
    mobilenetv4_conv_m_width(classes, hw, STEM)
}

/// MobileNetV4-Conv-M: stem conv 3×3/s2 → BN → ReLU; the fused-MBConv
/// 32→48 (expand 4, k3, s2, swish) as `blocks.0`; the 21 UIBs of the table
/// `(out, expand, stride, pre-DW k, post-DW k)` as `blocks.1` … `blocks.21`;
/// head 1×1 256→960 → BN → ReLU (`head1`) and 1×1 960→1280 → BN → ReLU
/// (`head2`); GAP; dense. Channels scaled by `width`/32.
pub fn mobilenetv4_conv_m_width(classes: i64, hw: (i64, i64), width: i64) -> NetSpec {
    assert!(
        width_ok(width),
        "mobilenetv4-conv-m width {width}: one of 4, 8, 16, 32"
    );
    let mut table = vec![(80, 4, 2, 3, 5), (80, 2, 1, 3, 3), (160, 6, 2, 3, 5)];
    for (e, pre, post) in [
        (4, 3, 3),
        (4, 3, 3),
        (4, 3, 5),
        (4, 3, 3),
        (4, 3, 0),
        (2, 0, 0),
        (4, 3, 0),
    ] {
        table.push((160, e, 1, pre, post));
    }
    table.push((256, 6, 2, 5, 5));
    for (e, pre, post) in [
        (4, 5, 5),
        (4, 3, 5),
        (4, 3, 5),
        (4, 0, 0),
        (4, 3, 0),
        (2, 3, 5),
        (4, 5, 5),
        (4, 0, 0),
        (4, 0, 0),
        (2, 5, 0),
    ] {
        table.push((256, e, 1, pre, post));
    }
    let mut layers = vec![
        (
            "stem".to_string(),
            conv_bn_act(3, 2, width, Activation::Relu),
        ),
        (
            "blocks.0".to_string(),
            LayerSpec::FusedMbConv(FusedMbConvSpec {
                expand: 4,
                k: 3,
                stride: 2,
                padding: BLOCK_PAD,
                out_ch: scaled(48, width),
                act: Activation::Swish,
                skip: SKIP,
                world: WORLD,
                eps: EPS,
            }),
        ),
    ];
    for (out, expand, stride, pre, post) in table {
        let b = UibSpec {
            pre_dw_k: pre,
            post_dw_k: post,
            expand,
            stride,
            padding: BLOCK_PAD,
            out_ch: scaled(out, width),
            act: Activation::Relu,
            skip: SKIP,
            world: WORLD,
            eps: EPS,
        };
        let name = format!("blocks.{}", layers.len() - 1);
        layers.push((name, LayerSpec::Uib(b)));
    }
    layers.push((
        "head1".into(),
        conv_bn_act(1, 1, scaled(960, width), Activation::Relu),
    ));
    layers.push((
        "head2".into(),
        conv_bn_act(1, 1, scaled(1280, width), Activation::Relu),
    ));
    layers.extend(head(classes));
    net("mobilenetv4-conv-m", classes, hw, width, layers)
}

/// The three nets at K = 10 and K = 1000, 224².
pub fn catalog() -> Vec<NetSpec> {
    let mut out = Vec::new();
    for k in [10, 1000] {
        out.push(mobilenetv2(k, (224, 224)));
        out.push(efficientnet_b0(k, (224, 224)));
        out.push(mobilenetv4_conv_m(k, (224, 224)));
    }
    out
}

/// A net of the family by name, in the ResNets' naming scheme: the base,
/// then `-k{K}` and optionally `-{H}x{W}` (`mobilenetv2-k10-64x64`). Only
/// the canonical spelling names a net.
pub fn by_name(name: &str) -> Option<NetSpec> {
    let base = BASES.iter().find(|b| name.starts_with(*b))?;
    let build: fn(i64, (i64, i64)) -> NetSpec = match *base {
        "mobilenetv2" => mobilenetv2,
        "efficientnet-b0" => efficientnet_b0,
        _ => mobilenetv4_conv_m,
    };
    Sizes::build_named(name, &name[base.len()..], |s| build(s.classes, s.hw))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The reference project's integers (docs/nets.md §4, §5, §6), not computed here;
    /// MobileNetV2's tensor count (the reference project states none) is counted by hand:
    /// stem 3 + the t = 1 block 6 + 16 blocks × 9 + head 3 + fc 2 = 158.
    #[test]
    fn parameter_counts_match_the_reference() {
        for (name, tensors, k10, k1000, bns) in [
            ("mobilenetv2", 158, 2_236_682, 3_504_872, 52),
            ("efficientnet-b0", 213, 4_020_358, 5_288_548, 49),
            ("mobilenetv4-conv-m", 233, 8_447_322, 9_715_512, 77),
        ] {
            let n = by_name(name).unwrap();
            assert_eq!(n.param_count().unwrap(), (tensors, k10), "{name}");
            let big = by_name(&format!("{name}-k1000")).unwrap();
            assert_eq!(big.param_count().unwrap(), (tensors, k1000), "{name}");
            assert_eq!(n.bn_sites().unwrap().len(), bns, "{name}");
        }
    }

    #[test]
    fn names_parse_back_and_only_the_canonical_spelling_names_a_net() {
        let n = by_name("mobilenetv4-conv-m-k10-64x48").unwrap();
        assert_eq!((n.input, n.classes), ((3, 64, 48), 10));
        assert_eq!(
            by_name("efficientnet-b0-k1000").unwrap(),
            efficientnet_b0(1000, (224, 224))
        );
        for bad in [
            "mobilenetv2-k10",
            "mobilenetv2-10",
            "efficientnet-b0-k0",
            "mobilenetv3",
            "mobilenetv2x",
        ] {
            assert!(by_name(bad).is_none(), "{bad}");
        }
        assert_eq!(
            mobilenetv2_width(10, (32, 32), 4).name,
            "mobilenetv2-w4-k10-32x32"
        );
    }

    /// The geometry of docs/nets.md §4, §5, §6: 224 → 112 at the stem, 7×7
    /// before the head; the stem XLA-SAME, the strided blocks XLA-SAME in
    /// MobileNetV2 and symmetric in the other two.
    #[test]
    fn geometry_is_the_papers() {
        for (n, blocks) in [
            (mobilenetv2(10, (224, 224)), "XlaSame"),
            (efficientnet_b0(10, (224, 224)), "Symmetric"),
            (mobilenetv4_conv_m(10, (224, 224)), "Symmetric"),
        ] {
            let chain = n.chain().unwrap();
            let tys = chain.types(&n.input_type(1)).unwrap();
            assert_eq!(tys[1].shape[2..], [112, 112], "{}", n.name);
            let gap = n.layers.iter().position(|(m, _)| m == "gap").unwrap();
            assert_eq!(tys[gap].shape[2..], [7, 7], "{}", n.name);
            let strided: Vec<_> = chain
                .layers
                .iter()
                .map(|(_, l)| l.name())
                .filter(|l| l.contains("s2 "))
                .collect();
            assert_eq!(strided.len(), 5, "{}: stem + 4 strided blocks", n.name);
            assert!(strided[0].contains("XlaSame"), "{strided:?}");
            assert!(
                strided[1..].iter().all(|l| l.contains(blocks)),
                "{}: {strided:?}",
                n.name
            );
        }
        let ps = mobilenetv4_conv_m(10, (224, 224)).param_specs().unwrap();
        let shape = |name: &str| super::super::param_shape(&ps, name);
        assert_eq!(shape("blocks.0.fused.W"), [128, 32, 3, 3]);
        assert_eq!(shape("blocks.1.pre_dw.W"), [48, 1, 3, 3]);
        assert_eq!(shape("blocks.1.post_dw.W"), [192, 1, 5, 5]);
        assert_eq!(shape("head1.conv.W"), [960, 256, 1, 1]);
        assert_eq!(shape("head2.conv.W"), [1280, 960, 1, 1]);
        let ps = efficientnet_b0(10, (224, 224)).param_specs().unwrap();
        let w1 = ps.iter().find(|p| p.name == "blocks.1.se.W1").unwrap();
        assert_eq!(w1.ty.shape, [96, 4], "16·6 expanded, SE r = 16/4");
    }
}
