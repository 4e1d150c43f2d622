//! The built-in nets: the cifar8 family (docs/nets.md §2) and ResNet-34/50
//! (docs/nets.md §3) at any class count and input size, and the catalog the CLI
//! names them by.

use super::sizes::Sizes;
use super::*;
use crate::ops::conv::Padding;
use crate::ops::norm::BnWorld;
use crate::ops::pool::PoolBackward;

/// The cifar8 family (docs/nets.md §2): four stages of conv3×3(bias) → [BN] →
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
                LayerSpec::Conv2d(Conv2dSpec {
                    k: 3,
                    stride: 1,
                    padding: Padding::Symmetric,
                    out_ch: **c,
                    bias: true,
                }),
            ));
            if let Some(world) = bn {
                layers.push((
                    format!("{st}.bn{}", i + 1),
                    LayerSpec::BatchNorm(BatchNormSpec { world, eps: 1e-5 }),
                ));
            }
            if i == 1 {
                layers.push((
                    format!("{st}.pool"),
                    LayerSpec::MaxPool(MaxPoolSpec {
                        window: 2,
                        stride: 2,
                        pad: 0,
                    }),
                ));
            }
            layers.push((format!("{conv}.relu"), LayerSpec::Relu(ReluSpec {})));
        }
    }
    layers.push(("flatten".into(), LayerSpec::Flatten(FlattenSpec {})));
    for (i, out_f) in [head, head, 10].iter().enumerate() {
        layers.push((
            format!("dense{}", i + 1),
            LayerSpec::Dense(DenseSpec {
                out_f: *out_f,
                bias: true,
            }),
        ));
        if i < 2 {
            layers.push((format!("dense{}.relu", i + 1), LayerSpec::Relu(ReluSpec {})));
        }
    }
    NetSpec {
        name: name.into(),
        input: (3, 32, 32),
        classes: 10,
        layers,
        label_smoothing: None,
        pool_backward: PoolBackward::default(),
    }
}

/// The ResNet stem (docs/nets.md §3): conv 7×7/s2 symmetric pad 3, bias-free
/// → BN → max pool 3×3/s2 pad 1 → ReLU.
///
/// The pool is emitted before the ReLU, as in `cifar8`: conv→BN→ReLU→pool and
/// conv→BN→pool→ReLU are the same function (ReLU is monotone and the pool is a
/// max, so max∘relu = relu∘max), but pooling the continuous BN output keeps the
/// unique-argmax hypothesis generic. After the ReLU about half the stem units
/// are exactly 0, and a 3×3 window of nine dead units ties at 0 with
/// probability about 2⁻⁹ — at 112² × 64 channels that is hundreds of tied
/// windows at every point, and the smooth-point hypothesis would fail at
/// almost every point.
fn resnet_stem(world: BnWorld, width: i64) -> Vec<(String, LayerSpec)> {
    vec![
        (
            "stem.conv".into(),
            LayerSpec::Conv2d(Conv2dSpec {
                k: 7,
                stride: 2,
                padding: Padding::Symmetric,
                out_ch: width,
                bias: false,
            }),
        ),
        (
            "stem.bn".into(),
            LayerSpec::BatchNorm(BatchNormSpec { world, eps: 1e-5 }),
        ),
        (
            "stem.pool".into(),
            LayerSpec::MaxPool(MaxPoolSpec {
                window: 3,
                stride: 2,
                pad: 1,
            }),
        ),
        ("stem.relu".into(), LayerSpec::Relu(ReluSpec {})),
    ]
}

/// GAP → dense (with bias) to `classes`.
fn resnet_head(classes: i64) -> Vec<(String, LayerSpec)> {
    vec![
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

/// ResNet-34 (docs/nets.md §3) at `classes` outputs and an `hw` input: the
/// stem, `[3, 4, 6, 3]` basic blocks at 64/128/256/512 channels (the first
/// block of stages 2–4: 3×3/s2 and a 1×1/s2 projection + BN skip), GAP, dense.
/// True batch-stat BN, ε 1e-5 (`NetSpec::with_every_bn_in` gives the
/// per-example or eval world). Blocks are named `stage{s}.block{b}` (1-based).
pub fn resnet34(classes: i64, hw: (i64, i64)) -> NetSpec {
    resnet34_width(classes, hw, 64)
}

/// ResNet-34's topology with every width scaled to `width`/64 (stem `width`,
/// stages `width`·1/2/4/8): the same blocks, strides, projections, parameter
/// tensors and kink sites at a fraction of the floats, for tests that must
/// run every block type fast. Named `resnet34-w{width}-…`; `width` 64 is
/// [`resnet34`].
pub fn resnet34_width(classes: i64, hw: (i64, i64), width: i64) -> NetSpec {
    let stages = [(3, width), (4, 2 * width), (6, 4 * width), (3, 8 * width)];
    resnet("resnet34", classes, hw, width, stages, |s, b, ch| {
        let down = s > 0 && b == 0;
        LayerSpec::BasicBlock(BasicBlockSpec {
            out_ch: ch,
            stride: if down { 2 } else { 1 },
            project: down,
            world: BnWorld::Batch,
            eps: 1e-5,
        })
    })
}

/// ResNet-50 v1.5 (docs/nets.md §3): the ResNet-34 stem and head around
/// `[3, 4, 6, 3]` bottlenecks with outputs 256/512/1024/2048 (width out/4).
/// The first block of every stage projects (stage 1: 64→256 at stride 1);
/// stages 2–4 stride in the first block's 3×3 and its projection.
pub fn resnet50(classes: i64, hw: (i64, i64)) -> NetSpec {
    resnet50_width(classes, hw, 64)
}

/// ResNet-50's topology with every width scaled to `width`/64 (stem `width`,
/// bottleneck outputs `width`·4/8/16/32); `width` 64 is [`resnet50`].
pub fn resnet50_width(classes: i64, hw: (i64, i64), width: i64) -> NetSpec {
    let stages = [
        (3, 4 * width),
        (4, 8 * width),
        (6, 16 * width),
        (3, 32 * width),
    ];
    resnet("resnet50", classes, hw, width, stages, |s, b, ch| {
        LayerSpec::Bottleneck(BottleneckSpec {
            mid_ch: ch / 4,
            out_ch: ch,
            stride: if s > 0 && b == 0 { 2 } else { 1 },
            project: b == 0,
            world: BnWorld::Batch,
            eps: 1e-5,
        })
    })
}

/// A ResNet of true batch-stat BN: the stem and head around four stages of
/// (blocks, channels), block `b` of stage `s` (0-based) being `block(s, b,
/// channels)`, named `stage{s}.block{b}` (1-based). The net is named `base`,
/// `-w{width}` unless `width` is 64, then K and input size (`Sizes`).
fn resnet(
    base: &str,
    classes: i64,
    hw: (i64, i64),
    width: i64,
    stages: [(usize, i64); 4],
    block: impl Fn(usize, usize, i64) -> LayerSpec,
) -> NetSpec {
    let mut layers = resnet_stem(BnWorld::Batch, width);
    for (s, (n, ch)) in stages.into_iter().enumerate() {
        for b in 0..n {
            layers.push((format!("stage{}.block{}", s + 1, b + 1), block(s, b, ch)));
        }
    }
    layers.extend(resnet_head(classes));
    let sizes = Sizes {
        width: (width != 64).then_some(width),
        classes,
        hw,
        patch: None,
    };
    NetSpec {
        name: sizes.name(base),
        input: (3, hw.0, hw.1),
        classes,
        layers,
        label_smoothing: None,
        pool_backward: PoolBackward::default(),
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
        resnet34(10, (224, 224)),
        resnet34(1000, (224, 224)),
        resnet50(10, (224, 224)),
        resnet50(1000, (224, 224)),
    ]
    .into_iter()
    .chain(super::mobile::catalog())
    .chain(super::convnext::catalog())
    .chain(super::vit::catalog())
    .collect()
}

/// A built-in net by name. ResNets also take any class count and input size
/// in the naming scheme of `resnet34`: `resnet50-k1000`, `resnet34-k10-64x64`.
pub fn by_name(name: &str) -> Option<NetSpec> {
    if let Some(n) = catalog().into_iter().find(|n| n.name == name) {
        return Some(n);
    }
    if let Some(n) = super::mobile::by_name(name) {
        return Some(n);
    }
    if let Some(n) = super::convnext::by_name(name) {
        return Some(n);
    }
    if let Some(n) = super::vit::by_name(name) {
        return Some(n);
    }
    let (base, rest) = name.split_at(name.find('-')?);
    let build: fn(i64, (i64, i64)) -> NetSpec = match base {
        "resnet34" => resnet34,
        "resnet50" => resnet50,
        _ => return None,
    };
    Sizes::build_named(name, rest, |s| build(s.classes, s.hw))
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

    /// The counts are the reference project's (docs/nets.md §3), not computed
    /// here.
    #[test]
    fn resnet_parameter_counts_match_the_reference() {
        let r34 = by_name("resnet34").unwrap();
        assert_eq!(r34.param_count().unwrap(), (110, 21_289_802));
        assert_eq!(
            by_name("resnet50").unwrap().param_count().unwrap(),
            (161, 23_528_522)
        );
        assert_eq!(
            by_name("resnet50-k1000").unwrap().param_count().unwrap(),
            (161, 25_557_032)
        );
        // 36 and 53 batch norms (stem 1; 2 per identity block, 3 per
        // downsample block; 3 per bottleneck, +1 per projection).
        assert_eq!(r34.bn_sites().unwrap().len(), 36);
        assert_eq!(by_name("resnet50").unwrap().bn_sites().unwrap().len(), 53);
    }

    #[test]
    fn resnet_names_parse_back_and_sizes_shrink_to_the_logits() {
        let n = by_name("resnet34-k10-64x48").unwrap();
        assert_eq!((n.input, n.classes), ((3, 64, 48), 10));
        assert_eq!(n, resnet34(10, (64, 48)));
        assert_eq!(
            by_name("resnet50-k1000").unwrap(),
            resnet50(1000, (224, 224))
        );
        for bad in [
            "resnet34-k10",
            "resnet34-10",
            "resnet34-k0",
            "resnet18-k10",
            "resnet34-k10-64",
        ] {
            assert!(by_name(bad).is_none(), "{bad}");
        }
        // The narrow topology: same tensors and names, fewer floats.
        let narrow = resnet34_width(10, (32, 32), 4);
        assert_eq!(narrow.name, "resnet34-w4-k10-32x32");
        let (a, b) = (
            narrow.param_specs().unwrap(),
            resnet34(10, (32, 32)).param_specs().unwrap(),
        );
        assert_eq!(a.len(), b.len());
        assert!(a.iter().zip(&b).all(|(p, q)| p.name == q.name));
        // Only the parameter layout depends on K, not on the input size.
        let (a, b) = (resnet50(10, (224, 224)), resnet50(10, (64, 64)));
        assert_eq!(a.param_specs().unwrap(), b.param_specs().unwrap());
    }

    #[test]
    fn resnet_geometry_is_the_papers() {
        let n = resnet34(10, (224, 224));
        let stem: Vec<_> = n.layers[..4].iter().map(|(_, l)| l.clone()).collect();
        assert_eq!(
            stem[0],
            LayerSpec::Conv2d(Conv2dSpec {
                k: 7,
                stride: 2,
                padding: Padding::Symmetric,
                out_ch: 64,
                bias: false
            })
        );
        assert_eq!(
            stem[2],
            LayerSpec::MaxPool(MaxPoolSpec {
                window: 3,
                stride: 2,
                pad: 1
            })
        );
        // 224 → 112 (stem) → 56 (pool) → 56, 28, 14, 7.
        let chain = n.chain().unwrap();
        let tys = chain.types(&n.input_type(2)).unwrap();
        let at = |name: &str| {
            let i = n.layers.iter().position(|(m, _)| m == name).unwrap();
            tys[i + 1].shape.clone()
        };
        assert_eq!(at("stem.bn"), [2, 64, 112, 112]);
        assert_eq!(at("stem.relu"), [2, 64, 56, 56]);
        assert_eq!(at("stage1.block3"), [2, 64, 56, 56]);
        assert_eq!(at("stage2.block1"), [2, 128, 28, 28]);
        assert_eq!(at("stage4.block3"), [2, 512, 7, 7]);
        // ResNet-50 v1.5: the stride sits in the 3×3 of the first block.
        let r50 = resnet50(10, (224, 224));
        let ps: Vec<_> = r50.param_specs().unwrap();
        let shape = |name: &str| super::super::param_shape(&ps, name);
        assert_eq!(shape("stage1.block1.shortcut.conv.W"), [256, 64, 1, 1]);
        assert_eq!(shape("stage2.block1.main.conv1.W"), [128, 256, 1, 1]);
        assert_eq!(shape("stage2.block1.main.conv2.W"), [128, 128, 3, 3]);
        assert!(ps.iter().all(|p| p.name != "stage1.block2.shortcut.conv.W"));
        let chain = r50.chain().unwrap();
        let tys = chain.types(&r50.input_type(1)).unwrap();
        let i = r50
            .layers
            .iter()
            .position(|(m, _)| m == "stage4.block3")
            .unwrap();
        assert_eq!(tys[i + 1].shape, [1, 2048, 7, 7]);
    }
}
