//! ConvNeXt certified end to end: the block ties (stem, block,
//! downsample, head) at N = 1, 2, 3 on non-square inputs; whole-net ties of
//! a narrow ConvNeXt-T (the T's depths at widths 8…64) at N = 1, 2, 3 and of
//! the real ConvNeXt-T at 32², all kink-free with f64 evidence (the
//! strongest a tanh/rsqrt path allows: exact arithmetic does not apply);
//! every parameter tie of the AdamW step; the four negative
//! controls, each injected into ONE layer of the net (built by the net's own
//! block code) and refuted by the net certificate beside its certified twin;
//! and stochastic depth: the drop-path chain and step certified with the
//! keep scales as fixed inputs, its control refuted, the default render
//! without any keep input.
//!
//! The 224², N = 2 tie is measured with the release binary (`certgrad
//! certify convnext-t --batch 2`).

use crate::common;
use crate::common::refuted_in;
use cert::net::{certify_net, joint_tie, net_tie_options};
use cert::step::{certify_recipe_step, certify_train_step, StepTieOptions};
use cert::tie::Evidence;
use cert::{certify_layer, TieOptions, TieReport};
use ir::{FuncBuilder, TensorType};
use layers::blocks_convnext::{
    ConvNextBlock, ConvNextBlockSpec, ConvNextDownsampleSpec, ConvNextStemSpec, MlpActivation,
};
use layers::blocks_mobile::LayerSwap;
use layers::net::{convnext, convnext_t, ConvNextVariant, LayerSpec, NetSpec, CONVNEXT_T};
use layers::ops::conv::{Conv2d, Padding};
use layers::ops::norm::{affine_backward, standardize, standardize_backward, LayerNorm, LnKind};
use layers::ops::scale::{layer_scale_missing_from_backward, LayerScale};
use layers::trainstep::{render_step, Optimizer, Recipe, SlotKind, StepOptions};
use layers::{CertLayer, Chain, Emit, Grads, ReplacedBackward, Residual};

const SYM: Padding = Padding::Symmetric;

/// ConvNeXt-T's depths and layout at widths 8, 16, 32, 64: the same 180
/// tensors, names and blocks, cheap enough for N = 3 ties in a test.
const NARROW_T: ConvNextVariant = ConvNextVariant {
    tag: "t-narrow",
    depths: CONVNEXT_T.depths,
    dims: [8, 16, 32, 64],
};

fn t(shape: &[i64]) -> TensorType {
    TensorType::f32(shape.to_vec())
}

fn f64_evidence() -> Evidence {
    Evidence::F64 {
        tolerance: TieOptions::default().f64_tolerance,
    }
}

fn tie(layer: &dyn CertLayer, input: &[i64]) -> TieReport {
    certify_layer(layer, &t(input), &TieOptions::default())
}

/// Certified, kink-free, at f64 evidence.
fn smooth_and_certified(r: &TieReport) {
    assert!(r.certified(), "{}: {:?}", r.layer, r.verdict);
    assert!(r.site_margins.is_empty(), "{}: kink sites", r.layer);
    assert_eq!(r.evidence, f64_evidence(), "{}", r.layer);
}

// ------------------------------------------------------------ blocks

fn block_spec() -> ConvNextBlockSpec {
    ConvNextBlockSpec {
        k: 7,
        padding: SYM,
        expand: 4,
        act: MlpActivation::GeluTanh,
        eps: 1e-6,
        layer_scale_init: 1e-6,
    }
}

#[test]
fn stem_ties_at_n_1_2_3() {
    let stem = ConvNextStemSpec {
        k: 4,
        stride: 4,
        padding: SYM,
        out_ch: 3,
        eps: 1e-6,
    }
    .build(2)
    .unwrap();
    for (n, (h, w)) in (1..=3).zip([(8, 12), (12, 8), (8, 4)]) {
        let r = tie(&stem, &[n, 2, h, w]);
        eprintln!("{} N={n} {h}×{w}: {:.2}s", stem.label, r.seconds);
        smooth_and_certified(&r);
    }
}

#[test]
fn convnext_block_ties_at_n_1_2_3() {
    let block = block_spec().build(3).unwrap();
    for (n, (h, w)) in (1..=3).zip([(5, 3), (3, 4), (2, 3)]) {
        let r = tie(&block, &[n, 3, h, w]);
        eprintln!("{} N={n} {h}×{w}: {:.2}s", block.label, r.seconds);
        smooth_and_certified(&r);
        let names: Vec<_> = r.block_results.iter().map(|b| b.name.as_str()).collect();
        for p in [
            "dx",
            "ddw.W",
            "dnorm.gamma",
            "dfc1.W",
            "dfc2.b",
            "dscale.gamma",
        ] {
            assert!(names.contains(&p), "{p} in {names:?}");
        }
    }
}

#[test]
fn downsample_and_head_tie_at_n_1_2_3() {
    let down = ConvNextDownsampleSpec {
        k: 2,
        stride: 2,
        padding: SYM,
        out_ch: 4,
        eps: 1e-6,
    }
    .build(3)
    .unwrap();
    let head = convnext(NARROW_T, 5, (32, 32));
    let i = head.layers.iter().position(|(n, _)| n == "gap").unwrap();
    let head = NetSpec {
        input: (64, 3, 2),
        layers: head.layers[i..].to_vec(),
        ..head
    };
    let head_chain = head.chain().unwrap();
    for (n, (h, w)) in (1..=3).zip([(4, 6), (6, 2), (2, 4)]) {
        let r = tie(&down, &[n, 3, h, w]);
        eprintln!("{} N={n} {h}×{w}: {:.2}s", down.label, r.seconds);
        smooth_and_certified(&r);
        let r = tie(&head_chain, &[n, 64, h, w]);
        eprintln!("head N={n} {h}×{w}: {:.2}s", r.seconds);
        assert!(r.certified(), "head: {:?}", r.verdict);
        assert!(r.site_margins.is_empty());
    }
}

/// The layer-scale op's catalog: bilinear, so its ties are exact; its
/// control (γ missing from dx) is refuted in dx beside its twin.
#[test]
fn layer_scale_ties_exactly_and_its_control_is_refuted() {
    let cases = layers::ops::scale::catalog();
    common::certify_all(&cases);
    assert_eq!(common::check_controls(&cases), 1);
}

// ------------------------------------------------------------ whole nets

#[test]
fn narrow_convnext_t_whole_net_ties_at_n_1_2_3() {
    for (n, hw) in [(1, (64, 64)), (2, (32, 32)), (3, (32, 64))] {
        let net = convnext(NARROW_T, 10, hw);
        let c = certify_net(&net, n, &net_tie_options(n as u64)).unwrap();
        eprintln!("{} N={n}: {:.2}s", net.name, c.seconds);
        assert!(
            c.certified(),
            "N={n}: {:?} / {:?}",
            c.whole.verdict,
            c.params.verdict
        );
        assert_eq!(c.whole.blocks, 1 + 180);
        assert_eq!(c.params.blocks, 2 + 180, "+ the loss target");
        // No ReLU, no max pool: a kink-free net, f64 evidence.
        assert!(c.whole.site_margins.is_empty() && c.params.site_margins.is_empty());
        assert!(c.whole.coverage.is_empty(), "no decision sites");
        assert_eq!(c.whole.evidence, c.params.evidence);
        assert!(matches!(c.whole.evidence, Evidence::F64 { .. }));
    }
}

/// The real ConvNeXt-T (every channel count of the paper's net) at 32².
#[test]
fn convnext_t_full_width_ties_at_32x32() {
    let net = convnext_t(10, (32, 32));
    let c = certify_net(&net, 2, &net_tie_options(2)).unwrap();
    eprintln!("{}: {:.2}s", net.name, c.seconds);
    assert!(
        c.certified(),
        "{:?} / {:?}",
        c.whole.verdict,
        c.params.verdict
    );
    assert_eq!(c.whole.blocks, 1 + 180);
}

#[test]
fn adamw_step_every_parameter_ties() {
    let net = convnext(NARROW_T, 10, (32, 32));
    let step = render_step(&net, 2, &StepOptions::new(Optimizer::AdamW))
        .unwrap()
        .module;
    let r = certify_train_step(&net, 2, Optimizer::AdamW, &step, &StepTieOptions::default());
    eprintln!("{} AdamW step: {:.1}s", net.name, r.seconds);
    assert!(r.certified(), "{:?}", r.verdict);
    assert_eq!(r.blocks.len(), 180);
}

/// No batch norm: the eval forward is the train forward, layer by layer;
/// an eval forward whose block drifted (an LN ε) is named.
#[test]
fn eval_forward_is_the_train_forward() {
    let net = control_net();
    let eval = net.with_every_bn_in(layers::ops::norm::BnWorld::Eval);
    assert_eq!(eval, net);
    let r = cert::net::check_eval_drift(&net, &eval, 2).unwrap();
    assert_eq!(r.bn_layers, 0);
    assert_eq!(r.identical_layers, net.layers.len());
    let mut drifted = eval.clone();
    if let Some(LayerSpec::ConvNextBlock(b)) = drifted.layer_mut("stages.1.blocks.0") {
        b.eps = 1e-5;
    }
    let e = cert::net::check_eval_drift(&net, &drifted, 2).unwrap_err();
    assert!(e.0.contains("stages.1.blocks.0"), "{e}");
}

// ------------------------------------------------------------ controls

/// `net`'s chain with layer `name` rebuilt by its own spec, `swap` editing
/// the block's layers as they are built.
fn rebuilt(net: &NetSpec, name: &str, swap: LayerSwap) -> Chain {
    let mut chain = net.chain().unwrap();
    let tys = chain.types(&net.input_type(1)).unwrap();
    let i = net.layers.iter().position(|(n, _)| n == name).unwrap();
    let in_ch = tys[i].shape[1];
    let block: ConvNextBlock = match &net.layers[i].1 {
        LayerSpec::ConvNextStem(s) => s.build_with(in_ch, swap),
        LayerSpec::ConvNextDownsample(s) => s.build_with(in_ch, swap),
        LayerSpec::ConvNextBlock(s) => s.build_with(in_ch, false, swap),
        other => panic!("{other:?} is not a ConvNeXt block"),
    }
    .unwrap();
    chain.layers[i].1 = Box::new(block);
    chain
}

/// The twin certifies and the control is refuted in one of `blocks` (a
/// prefix match: the bug's cotangent flows into every gradient upstream).
fn twin_and_control(net: &NetSpec, twin: &Chain, control: &Chain, blocks: &[&str], what: &str) {
    let input = net.input_type(2);
    let r = joint_tie(twin, &input, &net_tie_options(1));
    assert!(r.certified(), "{what}: twin: {:?}", r.verdict);
    let r = joint_tie(control, &input, &net_tie_options(1));
    let block = refuted_in(&r.verdict, what);
    assert!(
        blocks.iter().any(|b| block.starts_with(b)),
        "{what}: refuted in {block}, expected one of {blocks:?}"
    );
}

/// Layer `layer` of block `block` replaced by `f(its own layer)`.
fn swap_one(
    net: &NetSpec,
    block: &str,
    layer: &'static str,
    f: impl Fn(Box<dyn CertLayer>) -> Box<dyn CertLayer>,
) -> Chain {
    rebuilt(net, block, &mut |name, l| {
        if name == layer {
            f(l)
        } else {
            l
        }
    })
}

/// A net with a non-square input, so a bug that swaps H and W cannot hide.
fn control_net() -> NetSpec {
    convnext(NARROW_T, 10, (32, 64))
}

/// A conv of the net's block `block` (its layer `conv`), with the fields
/// the block's spec gives it.
fn conv_of(net: &NetSpec, block: &str) -> Conv2d {
    let tys = net.chain().unwrap().types(&net.input_type(1)).unwrap();
    let i = net.layers.iter().position(|(n, _)| n == block).unwrap();
    let in_ch = tys[i].shape[1];
    match &net.layers[i].1 {
        LayerSpec::ConvNextStem(s) => Conv2d {
            k: s.k,
            stride: s.stride,
            padding: s.padding,
            in_ch,
            out_ch: s.out_ch,
            bias: true,
        },
        LayerSpec::ConvNextDownsample(s) => Conv2d {
            k: s.k,
            stride: s.stride,
            padding: s.padding,
            in_ch,
            out_ch: s.out_ch,
            bias: true,
        },
        other => panic!("{other:?}"),
    }
}

/// `conv` with its backward at the default geometry edited by `edit`.
fn conv_at(
    conv: Conv2d,
    label: &str,
    edit: fn(&mut layers::ops::conv::AxisGeometry),
) -> Box<dyn CertLayer> {
    Box::new(ReplacedBackward::new(
        conv,
        label,
        move |c, fb, x, p, _, dy| {
            let mut g = c.geometry(fb.ty(x)).expect("geometry");
            for axis in &mut g {
                edit(axis);
            }
            c.backward_at(fb, x, p, dy, &g)
        },
    ))
}

#[test]
fn control_downsample_weight_vjp_with_its_pad_mirrored_is_refuted() {
    // stages.2.downsample (2×2/s2, pad 0). Its weight VJP in the odd-kernel
    // form — cotangent upsampled to extent s·out with a trailing zero, saved
    // input padded [0, 1] — is right (the twin); with that pad mirrored,
    // [1, 0], dW[kh] reads x[2i + kh − 1]: shape-preserving, wrong.
    let net = control_net();
    let conv = conv_of(&net, "stages.2.downsample");
    let twin = swap_one(&net, "stages.2.downsample", "conv", |_| {
        conv_at(conv.clone(), "wgrad with trailing zero", |g| {
            assert_eq!((g.weight_pad, g.weight_trailing), ((0, 0), 0));
            g.weight_trailing = 1;
            g.weight_pad = (0, 1);
        })
    });
    let control = swap_one(&net, "stages.2.downsample", "conv", |_| {
        conv_at(conv.clone(), "wgrad pad mirrored", |g| {
            g.weight_trailing = 1;
            g.weight_pad = (1, 0);
        })
    });
    twin_and_control(
        &net,
        &twin,
        &control,
        &["dstages.2.downsample.conv.W"],
        "downsample wgrad pad mirrored",
    );
}

#[test]
fn control_stem_input_vjp_reading_right_aligned_windows_is_refuted() {
    // The 4×4/s4 stem reads the left-aligned windows [4i, 4i+3]
    // (docs/conventions.md §4): its input VJP pads the upsampled cotangent [3, 0]. Mirrored,
    // [0, 3], it is the VJP of windows [4i−3, 4i] (right-aligned at 4i).
    let net = control_net();
    let conv = conv_of(&net, "stem");
    let twin = swap_one(&net, "stem", "conv", |_| {
        conv_at(conv.clone(), "real backward", |g| {
            assert_eq!(g.input_pad, (3, 0), "the stride-4 input pad");
        })
    });
    let control = swap_one(&net, "stem", "conv", |_| {
        conv_at(conv.clone(), "windows right-aligned", |g| {
            g.input_pad = (0, 3)
        })
    });
    twin_and_control(&net, &twin, &control, &["dx"], "stem right-aligned windows");
}

/// A channel LN of `ch` whose backward standardizes over the `reduce` dims.
fn ln_backward_over(ch: i64, reduce: &'static [i64], label: &str) -> Box<dyn CertLayer> {
    let ln = LayerNorm {
        dim: ch,
        eps: 1e-6,
        kind: LnKind::Channel,
    };
    Box::new(ReplacedBackward::new(
        ln,
        label,
        move |l: &LayerNorm, fb: &mut FuncBuilder, x, p, _, dy| {
            let s = standardize(fb, x, reduce, l.eps)?;
            let (ghat, dgamma, dbeta) = affine_backward(fb, s.xhat, p[0], dy, 1)?;
            let dx = standardize_backward(fb, &s, ghat, reduce)?;
            Ok(Grads {
                dx,
                dparams: vec![dgamma, dbeta],
            })
        },
    ))
}

#[test]
fn control_channel_ln_backward_reducing_over_w_is_refuted() {
    // stages.1.blocks.1's LN (16 channels): the three-term backward over C
    // (the twin, the formula written out) and over W instead (the bug).
    let net = control_net();
    let twin = swap_one(&net, "stages.1.blocks.1", "norm", |_| {
        ln_backward_over(16, &[1], "backward over C")
    });
    let control = swap_one(&net, "stages.1.blocks.1", "norm", |_| {
        ln_backward_over(16, &[3], "backward over W")
    });
    twin_and_control(
        &net,
        &twin,
        &control,
        &["dx", "dstem.", "dstages.0.", "dstages.1."],
        "channel LN backward over W",
    );
}

#[test]
fn control_layer_scale_missing_from_the_backward_is_refuted() {
    // stages.2.blocks.4's layer scale (32 channels): dx = dy, γ forgotten.
    let net = control_net();
    let ls = LayerScale { ch: 32, init: 1e-6 };
    let twin = swap_one(&net, "stages.2.blocks.4", "scale", |_| {
        Box::new(ReplacedBackward::new(
            ls.clone(),
            "real backward",
            |l, fb, x, p, s, dy| l.backward(fb, x, p, s, dy),
        ))
    });
    let control = swap_one(&net, "stages.2.blocks.4", "scale", |_| {
        Box::new(layer_scale_missing_from_backward(ls.clone()))
    });
    twin_and_control(
        &net,
        &twin,
        &control,
        &["dx", "dstem.", "dstages.0.", "dstages.1.", "dstages.2."],
        "layer scale missing",
    );
}

/// A control rebuilds the net's own block: an inert swap emits the net's
/// forward and backward exactly.
#[test]
fn an_inert_swap_rebuilds_the_nets_own_block() {
    let net = control_net();
    let input = net.input_type(2);
    for block in ["stem", "stages.1.downsample", "stages.3.blocks.2"] {
        let a = rebuilt(&net, block, &mut |_, l| l);
        let b = net.chain().unwrap();
        let (fa, fb) = (
            layers::tie_funcs(&a, &input).unwrap(),
            layers::tie_funcs(&b, &input).unwrap(),
        );
        assert_eq!(fa.forward, fb.forward, "{block}");
        assert_eq!(fa.backward, fb.backward, "{block}");
    }
}

// ------------------------------------------------------------ drop path

fn drop_path_recipe(rate: f64) -> Recipe {
    Recipe {
        drop_path: Some(rate),
        ..Recipe::default()
    }
}

#[test]
fn drop_path_block_and_chain_tie_with_the_keeps_as_inputs() {
    // The block alone: the keep input is a block of the tie (its gradient
    // Σ branch⊙dy is the true VJP, computed and discarded by the render).
    let block = block_spec().build_with(3, true, &mut |_, l| l).unwrap();
    for (n, (h, w)) in (1..=3).zip([(4, 3), (3, 5), (2, 2)]) {
        let r = tie(&block, &[n, 3, h, w]);
        smooth_and_certified(&r);
        assert!(r.block_results.iter().any(|b| b.name == "ddrop_path"));
    }
    // The whole drop-path loss chain of the narrow T.
    let net = convnext(NARROW_T, 10, (32, 32));
    let chain = net.chain_with_loss_drop_path().unwrap();
    let r = joint_tie(&chain, &net.input_type(2), &net_tie_options(3));
    assert!(r.certified(), "{:?}", r.verdict);
    assert_eq!(r.blocks, 1 + 180 + 18 + 1, "dx, θ, 18 keeps, the target");
    let sites = net.drop_path_sites(0.1).unwrap();
    assert_eq!(sites.len(), 18);
    assert_eq!(sites[0].name, "stages.0.blocks.0.drop_path");
    assert_eq!(sites[17].name, "stages.3.blocks.2.drop_path");
    assert!((sites[17].keep - 0.9).abs() < 1e-15 && sites[0].keep == 1.0);
}

/// A drop-path residual whose backward forgets the keep scale on the
/// branch's cotangent (`body.back(dy)` instead of `body.back(keep⊙dy)`).
struct KeepForgotten(Residual);

impl CertLayer for KeepForgotten {
    fn name(&self) -> String {
        format!("{} (keep missing in the backward)", self.0.name())
    }
    fn output_type(&self, input: &TensorType) -> Result<TensorType, layers::LayerError> {
        self.0.output_type(input)
    }
    fn params(&self, input: &TensorType) -> Vec<layers::ParamSpec> {
        self.0.params(input)
    }
    fn forward(
        &self,
        fb: &mut FuncBuilder,
        x: ir::ValueId,
        params: &[ir::ValueId],
        sites: &mut layers::Sites,
    ) -> layers::emit::EmitResult<layers::Saved> {
        self.0.forward(fb, x, params, sites)
    }
    fn backward(
        &self,
        fb: &mut FuncBuilder,
        x: ir::ValueId,
        params: &[ir::ValueId],
        saved: &layers::Saved,
        dy: ir::ValueId,
    ) -> layers::emit::EmitResult<Grads> {
        let right = self.0.backward(fb, x, params, saved, dy)?;
        let (_, body_params) = params.split_last().unwrap();
        let g = self
            .0
            .body
            .backward(fb, x, body_params, &saved.children[0], dy)?;
        let dx = fb.add(g.dx, dy)?;
        let mut dparams = g.dparams;
        dparams.push(*right.dparams.last().unwrap());
        Ok(Grads { dx, dparams })
    }
}

#[test]
fn control_drop_path_backward_without_the_keep_is_refuted() {
    // stages.2.blocks.3 (32 channels) of the drop-path chain: the twin is
    // the block's branch in a fresh drop-path Residual, the control the same
    // with the keep forgotten on the branch's cotangent.
    let net = convnext(NARROW_T, 10, (32, 32));
    let i = net
        .layers
        .iter()
        .position(|(n, _)| n == "stages.2.blocks.3")
        .unwrap();
    let fresh =
        || Residual::with_drop_path(Box::new(block_spec().branch(32, &mut |_, l| l).unwrap()));
    let mut twin = net.chain_with_drop_path().unwrap();
    twin.layers[i].1 = Box::new(fresh());
    let mut control = net.chain_with_drop_path().unwrap();
    control.layers[i].1 = Box::new(KeepForgotten(fresh()));
    twin_and_control(
        &net,
        &twin,
        &control,
        &["dx", "dstem.", "dstages.0.", "dstages.1.", "dstages.2."],
        "drop path without the keep",
    );
}

#[test]
fn drop_path_step_ties_and_the_default_render_has_no_keep_inputs() {
    let net = convnext(NARROW_T, 10, (32, 32));
    let plain = render_step(&net, 2, &StepOptions::new(Optimizer::AdamW)).unwrap();
    assert!(plain
        .signature
        .input_positions(SlotKind::DropPath)
        .is_empty());
    let so = StepOptions {
        recipe: drop_path_recipe(0.1),
        ..StepOptions::new(Optimizer::AdamW)
    };
    let r = render_step(&net, 2, &so).unwrap();
    let dp = r.signature.input_positions(SlotKind::DropPath);
    assert_eq!(dp.len(), 18);
    assert!(dp.iter().all(|&i| r.signature.inputs[i].ty.shape == [2]));
    assert_eq!(r.signature.inputs[dp[0]].name, "dp0");
    assert!(
        r.signature.func.ends_with("_adamsd_train_step"),
        "{}",
        r.signature.func
    );
    assert!(r.text().contains("drop path 0.1"));
    // The plain step's outputs, then the keeps returned unchanged.
    let mut outputs = plain.signature.outputs.clone();
    outputs.extend(dp.iter().map(|&i| r.signature.inputs[i].clone()));
    assert_eq!(r.signature.outputs, outputs);
    let t = certify_recipe_step(&net, 2, &so, &r.module, &StepTieOptions::default());
    eprintln!("{} drop-path step: {:.1}s", net.name, t.seconds);
    assert!(t.certified(), "{:?}", t.verdict);
    assert_eq!(t.blocks.len(), 180);
    // A net without drop-path sites refuses the flag, naming it.
    let resnet = layers::net::by_name("resnet34-k10-32x32").unwrap();
    let e = render_step(&resnet, 2, &so).err().unwrap();
    assert!(e.0.contains("--drop-path"), "{e}");
}
