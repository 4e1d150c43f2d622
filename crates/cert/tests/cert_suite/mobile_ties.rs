//! Depthwise-family block ties: every block kind of
//! MobileNetV2, EfficientNet-B0 and MobileNetV4-Conv-M — conv-BN-act stages,
//! the inverted residual, MBConv with squeeze-excite, the fused-MBConv and
//! the UIB in its four forms — tied to its VJP at each stride, with and
//! without the identity skip, at k 3 and 5, at N = 1, 2, 3 on non-square
//! inputs, with the kink sites named per block.

use cert::{certify_layer, TieOptions, TieReport};
use ir::TensorType;
use layers::blocks_mobile::{
    Activation, ConvBnActSpec, FusedMbConvSpec, InvertedResidualSpec, MbConvSeSpec, MobileBlock,
    SkipRule, UibSpec,
};
use layers::ops::conv::Padding;
use layers::ops::norm::BnWorld;
use layers::CertLayer;

const SKIP: SkipRule = SkipRule::IdentityWhenShapeKept;
const XLA: Padding = Padding::XlaSame;

fn t(shape: &[i64]) -> TensorType {
    TensorType::f32(shape.to_vec())
}

fn tie(layer: &dyn CertLayer, input: &[i64]) -> TieReport {
    certify_layer(layer, &t(input), &TieOptions::default())
}

fn assert_certified(r: &TieReport) {
    assert!(r.certified(), "{}: {:?}", r.layer, r.verdict);
    assert!(r.points >= 1 && r.min_margin.as_ref().is_none_or(|m| m.margin > 0.0));
}

fn site_names(r: &TieReport) -> Vec<&str> {
    r.site_margins.iter().map(|s| s.site.as_str()).collect()
}

/// Ties `block` at N = 1, 2, 3 on the three (even, non-square) sizes given;
/// returns the last report.
fn ties_at_every_batch(block: &MobileBlock, ch: i64, sizes: [(i64, i64); 3]) -> TieReport {
    let mut last = None;
    for (n, (h, w)) in (1..=3).zip(sizes) {
        let r = tie(block, &[n, ch, h, w]);
        eprintln!("{} N={n} {h}×{w}: {:.2}s", block.label, r.seconds);
        assert_certified(&r);
        last = Some(r);
    }
    last.unwrap()
}

const SIZES: [(i64, i64); 3] = [(6, 4), (4, 6), (8, 6)];

fn inverted(expand: i64, k: i64, stride: i64, out_ch: i64) -> InvertedResidualSpec {
    InvertedResidualSpec {
        expand,
        k,
        stride,
        padding: XLA,
        out_ch,
        act: Activation::Relu6,
        skip: SKIP,
        world: BnWorld::Batch,
        eps: 1e-5,
    }
}

#[test]
fn conv_bn_act_stages_tie() {
    // The XLA-SAME strided stem and a 1×1 head stage, in each activation.
    for act in [Activation::Relu6, Activation::Swish, Activation::Relu] {
        let stem = ConvBnActSpec {
            k: 3,
            stride: 2,
            padding: XLA,
            out_ch: 3,
            act,
            world: BnWorld::Batch,
            eps: 1e-5,
        }
        .build(2)
        .unwrap();
        let r = ties_at_every_batch(&stem, 2, SIZES);
        let want: &[&str] = match act {
            Activation::Relu6 => &["act.relu6_lower", "act.relu6_upper"],
            Activation::Relu => &["act.pre_relu"],
            Activation::Swish => &[],
        };
        assert_eq!(site_names(&r), want);
        let head = ConvBnActSpec {
            k: 1,
            stride: 1,
            padding: XLA,
            out_ch: 4,
            act,
            world: BnWorld::Batch,
            eps: 1e-5,
        }
        .build(3)
        .unwrap();
        ties_at_every_batch(&head, 3, [(3, 5), (5, 3), (2, 3)]);
    }
}

#[test]
fn inverted_residual_blocks_tie() {
    // t = 1 (no expand, 4→2), strided k3 and k5, stride-1 with the skip.
    let cases = [
        (inverted(1, 3, 1, 2), 4, false),
        (inverted(6, 3, 2, 3), 2, false),
        (inverted(6, 5, 2, 3), 2, false),
        (inverted(6, 3, 1, 2), 2, true),
        (inverted(6, 5, 1, 2), 2, true),
    ];
    for (spec, in_ch, skip) in cases {
        let block = spec.build(in_ch).unwrap();
        assert_eq!(block.skip, skip, "{}", block.label);
        let r = ties_at_every_batch(&block, in_ch, SIZES);
        let mut want = vec!["dw_act.relu6_lower", "dw_act.relu6_upper"];
        if spec.expand != 1 {
            want.splice(0..0, ["expand_act.relu6_lower", "expand_act.relu6_upper"]);
        }
        assert_eq!(site_names(&r), want, "{}", block.label);
        let bns = if spec.expand == 1 { 2 } else { 3 };
        assert_eq!(block.batch_norms().len(), bns);
        assert_eq!(r.blocks, 1 + 3 * bns, "dx, then per BN its conv, γ and β");
    }
}

#[test]
fn mbconv_se_blocks_tie() {
    let mb = |expand, k, stride, out_ch| MbConvSeSpec {
        expand,
        k,
        stride,
        padding: XLA,
        out_ch,
        act: Activation::Swish,
        se_divisor: 4,
        skip: SKIP,
        world: BnWorld::Batch,
        eps: 1e-5,
    };
    let cases = [
        (mb(1, 3, 1, 4), 4, true),
        (mb(1, 3, 1, 2), 4, false),
        (mb(6, 3, 2, 3), 4, false),
        (mb(6, 5, 2, 3), 4, false),
        (mb(6, 5, 1, 4), 4, true),
    ];
    for (spec, in_ch, skip) in cases {
        let block = spec.build(in_ch).unwrap();
        assert_eq!(block.skip, skip, "{}", block.label);
        let r = ties_at_every_batch(&block, in_ch, SIZES);
        // Swish and SE are smooth: no kink sites at all.
        assert!(r.site_margins.is_empty(), "{:?}", site_names(&r));
        let names: Vec<_> = r.block_results.iter().map(|b| b.name.as_str()).collect();
        for p in ["dse.W1", "dse.b1", "dse.W2", "dse.b2", "ddw.W"] {
            assert!(names.contains(&p), "{p} in {names:?}");
        }
    }
}

#[test]
fn fused_mbconv_blocks_tie() {
    let fused = |expand, k, stride, out_ch| FusedMbConvSpec {
        expand,
        k,
        stride,
        padding: XLA,
        out_ch,
        act: Activation::Swish,
        skip: SKIP,
        world: BnWorld::Batch,
        eps: 1e-5,
    };
    let cases = [
        (fused(4, 3, 2, 3), 2, false),
        (fused(4, 5, 2, 3), 2, false),
        (fused(2, 3, 1, 2), 2, true),
        (fused(1, 3, 1, 2), 2, true),
    ];
    for (spec, in_ch, skip) in cases {
        let block = spec.build(in_ch).unwrap();
        assert_eq!(block.skip, skip, "{}", block.label);
        ties_at_every_batch(&block, in_ch, SIZES);
    }
}

#[test]
fn uib_blocks_tie_in_all_four_forms() {
    let uib = |pre, post, stride, out_ch| UibSpec {
        pre_dw_k: pre,
        post_dw_k: post,
        expand: 2,
        stride,
        padding: XLA,
        out_ch,
        act: Activation::Relu,
        skip: SKIP,
        world: BnWorld::Batch,
        eps: 1e-5,
    };
    // ExtraDW strided (3, 5) and with the skip (5, 3); IB strided in the
    // post-DW; ConvNeXt-like; FFN.
    let cases = [
        (uib(3, 5, 2, 3), false, 4),
        (uib(5, 3, 1, 2), true, 4),
        (uib(0, 5, 2, 3), false, 3),
        (uib(0, 3, 1, 2), true, 3),
        (uib(3, 0, 1, 2), true, 3),
        (uib(5, 0, 2, 3), false, 3),
        (uib(0, 0, 1, 2), true, 2),
    ];
    for (spec, skip, bns) in cases {
        let block = spec.build(2).unwrap();
        assert_eq!(block.skip, skip, "{}", block.label);
        assert_eq!(block.batch_norms().len(), bns, "{}", block.label);
        let r = ties_at_every_batch(&block, 2, SIZES);
        let mut want = Vec::new();
        if spec.pre_dw_k > 0 {
            want.push("pre_dw_act.pre_relu");
        }
        want.push("expand_act.pre_relu");
        if spec.post_dw_k > 0 {
            want.push("post_dw_act.pre_relu");
        }
        assert_eq!(site_names(&r), want, "{}", block.label);
    }
}
