//! Depthwise-family whole-net ties: MobileNetV2,
//! EfficientNet-B0 and MobileNetV4-Conv-M certified whole and per parameter
//! at small sizes for N = 1, 2, 3, naming their kink sites; ReLU6's upper
//! branch exercised by the net certificate's own coverage; and negative
//! controls, each injected into ONE layer of a real net (built
//! by the same code as the net's own block) and refuted by the net
//! certificate, beside its certified twin (the same wrapper with the real
//! backward).
//!
//! The 224², N = 2 ties are measured with the release binary (`certgrad
//! certify mobilenetv2 --batch 2`) and are `#[ignore]`d here.

use crate::common::refuted_in;
use cert::net::{certify_net, joint_tie, net_tie_options};
use cert::TieReport;
use ir::{FuncBuilder, TensorType, ValueId};
use layers::blocks_mobile::{LayerSwap, MobileBlock};
use layers::net::{
    efficientnet_b0_width, mobilenetv2_width, mobilenetv4_conv_m_width, LayerSpec, NetSpec,
};
use layers::ops::activation::Relu6;
use layers::ops::conv::{DepthwiseConv2d, Padding};
use layers::ops::norm::{BatchNorm, BnWorld};
use layers::ops::se::SqueezeExcite;
use layers::{CertLayer, Chain, Emit, Grads, ReplacedBackward, Saved};

fn sites(r: &TieReport) -> Vec<&str> {
    r.site_margins.iter().map(|s| s.site.as_str()).collect()
}

/// `net`'s chain with layer `name` rebuilt by its own spec, `swap` editing
/// the block's layers as they are built.
fn rebuilt(net: &NetSpec, name: &str, swap: LayerSwap) -> Chain {
    let mut chain = net.chain().unwrap();
    let tys = chain.types(&net.input_type(1)).unwrap();
    let i = net.layers.iter().position(|(n, _)| n == name).unwrap();
    chain.layers[i].1 = Box::new(rebuild(&net.layers[i].1, tys[i].shape[1], swap));
    chain
}

fn rebuild(spec: &LayerSpec, in_ch: i64, swap: LayerSwap) -> MobileBlock {
    match spec {
        LayerSpec::ConvBnAct(s) => s.build_with(in_ch, swap),
        LayerSpec::InvertedResidual(s) => s.build_with(in_ch, swap),
        LayerSpec::MbConvSe(s) => s.build_with(in_ch, swap),
        LayerSpec::FusedMbConv(s) => s.build_with(in_ch, swap),
        LayerSpec::Uib(s) => s.build_with(in_ch, swap),
        other => panic!("{other:?} is not a depthwise-family block"),
    }
    .unwrap()
}

/// `net`'s chain with every depthwise-family block rebuilt through `swap`.
fn rebuilt_everywhere(net: &NetSpec, swap: LayerSwap) -> Chain {
    let mut chain = net.chain().unwrap();
    let tys = chain.types(&net.input_type(1)).unwrap();
    for (i, (_, spec)) in net.layers.iter().enumerate() {
        if matches!(spec, LayerSpec::GlobalAvgPool(_) | LayerSpec::Dense(_)) {
            continue;
        }
        chain.layers[i].1 = Box::new(rebuild(spec, tys[i].shape[1], swap));
    }
    chain
}

fn certified(r: &TieReport, what: &str) {
    assert!(r.certified(), "{what}: {:?}", r.verdict);
}

/// The twin certifies and the control is refuted in one of `blocks` (a
/// prefix match: the bug's cotangent flows into every gradient upstream).
fn twin_and_control(net: &NetSpec, twin: &Chain, control: &Chain, blocks: &[&str], what: &str) {
    let input = net.input_type(2);
    let r = joint_tie(twin, &input, &net_tie_options(1));
    certified(&r, &format!("{what}: twin"));
    let r = joint_tie(control, &input, &net_tie_options(1));
    let block = refuted_in(&r.verdict, what);
    assert!(
        blocks.iter().any(|b| block.starts_with(b)),
        "{what}: refuted in {block}, expected one of {blocks:?}"
    );
}

// ------------------------------------------------------------ whole nets

/// Every block's kink sites appear, with positive margins.
fn assert_sites(r: &TieReport, want: &[&str]) {
    let names = sites(r);
    for w in want {
        assert!(names.contains(w), "no {w} in {names:?}");
    }
    assert!(r
        .site_margins
        .iter()
        .all(|s| s.min > 0.0 && s.decisions > 0));
}

#[test]
fn mobilenetv2_whole_net_ties_at_n_1_2_3() {
    for (n, hw) in [(1, (64, 64)), (2, (32, 32)), (3, (32, 48))] {
        let net = mobilenetv2_width(10, hw, 8);
        let c = certify_net(&net, n, &net_tie_options(n as u64)).unwrap();
        eprintln!("{} N={n}: {:.2}s", net.name, c.seconds);
        assert!(c.whole.certified(), "N={n}: {:?}", c.whole.verdict);
        assert!(c.params.certified(), "N={n}: {:?}", c.params.verdict);
        assert_eq!(c.whole.blocks, 1 + 158);
        assert_eq!(c.params.blocks, 2 + 158, "+ the loss target");
        // Stem, head, 16 expand stages and 17 dw stages: two corners each.
        assert_eq!(sites(&c.whole).len(), 2 * (1 + 1 + 16 + 17));
        assert_sites(
            &c.whole,
            &[
                "stem.act.relu6_lower",
                "stem.act.relu6_upper",
                "blocks.0.dw_act.relu6_upper",
                "blocks.7.expand_act.relu6_lower",
                "blocks.7.dw_act.relu6_upper",
                "head.act.relu6_upper",
            ],
        );
    }
}

#[test]
fn efficientnet_b0_whole_net_ties_at_n_1_2_3() {
    for (n, hw) in [(1, (64, 64)), (2, (32, 32)), (3, (32, 48))] {
        let net = efficientnet_b0_width(10, hw, 8);
        let c = certify_net(&net, n, &net_tie_options(n as u64)).unwrap();
        eprintln!("{} N={n}: {:.2}s", net.name, c.seconds);
        assert!(
            c.certified(),
            "N={n}: {:?} / {:?}",
            c.whole.verdict,
            c.params.verdict
        );
        assert_eq!(c.whole.blocks, 1 + 213);
        // Swish, sigmoid and SE are smooth: a kink-free net.
        assert!(sites(&c.whole).is_empty(), "{:?}", sites(&c.whole));
    }
}

#[test]
fn mobilenetv4_conv_m_whole_net_ties_at_n_1_2_3() {
    for (n, hw) in [(1, (64, 64)), (2, (32, 32)), (3, (32, 48))] {
        let net = mobilenetv4_conv_m_width(10, hw, 8);
        let c = certify_net(&net, n, &net_tie_options(n as u64)).unwrap();
        eprintln!("{} N={n}: {:.2}s", net.name, c.seconds);
        assert!(
            c.certified(),
            "N={n}: {:?} / {:?}",
            c.whole.verdict,
            c.params.verdict
        );
        assert_eq!(c.whole.blocks, 1 + 233);
        // Stem, two head stages; per UIB its pre-DW (17 of 21), expand (21)
        // and post-DW (13 of 21) ReLUs. The fused block is swish.
        assert_eq!(sites(&c.whole).len(), 3 + 17 + 21 + 13);
        assert_sites(
            &c.whole,
            &[
                "stem.act.pre_relu",
                "blocks.1.pre_dw_act.pre_relu",
                "blocks.1.post_dw_act.pre_relu",
                "blocks.9.expand_act.pre_relu",
                "head1.act.pre_relu",
                "head2.act.pre_relu",
            ],
        );
    }
}

/// Full width at a small input: every channel count of the paper's nets.
#[test]
fn full_width_nets_tie_at_32x32() {
    for net in [
        mobilenetv2_width(10, (32, 32), 32),
        efficientnet_b0_width(10, (32, 32), 32),
        mobilenetv4_conv_m_width(10, (32, 32), 32),
    ] {
        let c = certify_net(&net, 2, &net_tie_options(2)).unwrap();
        eprintln!("{}: {:.2}s", net.name, c.seconds);
        assert!(
            c.certified(),
            "{}: {:?} / {:?}",
            net.name,
            c.whole.verdict,
            c.params.verdict
        );
    }
}

// ------------------------------------------------------------ controls

/// Layer `name` of block `block` of `net` rebuilt by its own spec, with
/// its `dw` replaced by `f(that depthwise conv)`; the conv's fields are the
/// spec's (hidden width = input channels × expansion).
fn with_dw(net: &NetSpec, block: &str, f: impl Fn(DepthwiseConv2d) -> Box<dyn CertLayer>) -> Chain {
    let tys = net.chain().unwrap().types(&net.input_type(1)).unwrap();
    let i = net.layers.iter().position(|(n, _)| n == block).unwrap();
    let (k, stride, padding, expand) = match &net.layers[i].1 {
        LayerSpec::InvertedResidual(s) => (s.k, s.stride, s.padding, s.expand),
        LayerSpec::MbConvSe(s) => (s.k, s.stride, s.padding, s.expand),
        _ => panic!("{block} is not an inverted residual or an MBConv"),
    };
    let dw = DepthwiseConv2d {
        k,
        stride,
        padding,
        ch: tys[i].shape[1] * expand,
        bias: false,
    };
    rebuilt(net, block, &mut |name, layer| {
        if name == "dw" {
            f(dw.clone())
        } else {
            layer
        }
    })
}

/// A real backward through a `ReplacedBackward` (the twin of a control).
fn honest_dw(dw: DepthwiseConv2d) -> Box<dyn CertLayer> {
    Box::new(ReplacedBackward::new(
        dw,
        "real backward",
        |d, fb, x, p, s, dy| d.backward(fb, x, p, s, dy),
    ))
}

#[test]
fn control_strided_depthwise_input_vjp_with_the_weight_vjp_pad_is_refuted() {
    // MobileNetV2's blocks.1 (dw 3×3/s2, XLA-SAME): the input VJP written
    // with the weight VJP's pad direction [p−1, p+1] instead of [p+1, p−1].
    let net = mobilenetv2_width(10, (32, 32), 8);
    let wrong = |dw: DepthwiseConv2d| -> Box<dyn CertLayer> {
        Box::new(ReplacedBackward::new(
            dw,
            "input VJP pad [p−1, p+1]",
            |d, fb, x, p, _, dy| {
                let mut g = d.geometry(fb.ty(x)).expect("geometry");
                for axis in &mut g {
                    assert_eq!(axis.input_pad, (2, 0), "XLA-SAME k=3 input pad");
                    axis.input_pad = axis.weight_pad;
                }
                d.backward_at(fb, x, p, dy, &g)
            },
        ))
    };
    let twin = with_dw(&net, "blocks.1", honest_dw);
    let control = with_dw(&net, "blocks.1", wrong);
    twin_and_control(
        &net,
        &twin,
        &control,
        &["dx", "dstem.", "dblocks.0.", "dblocks.1.expand"],
        "dw input VJP pad",
    );
}

/// blocks.1's depthwise conv (3×3/s2) of `net`, whose forward pads by
/// `forward`, with the backward (input and weight VJPs) of the `backward`
/// convention: the other phase of the strided conv. Refuted beside its twin.
fn other_conventions_backward_is_refuted(
    net: &NetSpec,
    forward: Padding,
    backward: Padding,
    what: &'static str,
) {
    let wrong = move |dw: DepthwiseConv2d| -> Box<dyn CertLayer> {
        Box::new(ReplacedBackward::new(
            dw,
            what,
            move |d, fb, x, p, _, dy| {
                assert_eq!(d.padding, forward, "the forward's padding");
                let other = DepthwiseConv2d {
                    padding: backward,
                    ..d.clone()
                };
                let g = other.geometry(fb.ty(x)).expect("geometry");
                d.backward_at(fb, x, p, dy, &g)
            },
        ))
    };
    let twin = with_dw(net, "blocks.1", honest_dw);
    let control = with_dw(net, "blocks.1", wrong);
    twin_and_control(
        net,
        &twin,
        &control,
        &["dx", "dstem.", "dblocks.0.", "dblocks.1."],
        what,
    );
}

#[test]
fn control_symmetric_backward_under_an_xla_same_forward_is_refuted() {
    // MobileNetV2 pads its strided depthwise convs XLA-SAME (odd phase).
    other_conventions_backward_is_refuted(
        &mobilenetv2_width(10, (32, 32), 8),
        Padding::XlaSame,
        Padding::Symmetric,
        "symmetric backward",
    );
}

#[test]
fn control_xla_same_backward_under_a_symmetric_forward_is_refuted() {
    // EfficientNet-B0 pads them symmetrically ([1, 1] at 3×3).
    other_conventions_backward_is_refuted(
        &efficientnet_b0_width(10, (32, 32), 8),
        Padding::Symmetric,
        Padding::XlaSame,
        "XLA-SAME backward",
    );
}

/// Every ReLU6 of a net replaced by `f()`.
fn swap_relu6(
    f: fn() -> Box<dyn CertLayer>,
) -> impl FnMut(&str, Box<dyn CertLayer>) -> Box<dyn CertLayer> {
    move |_, layer| if layer.name() == "relu6" { f() } else { layer }
}

fn relu6_without_upper_mask() -> Box<dyn CertLayer> {
    Box::new(ReplacedBackward::new(
        Relu6,
        "mask x > 0 only",
        |_, fb: &mut FuncBuilder, x, _, _, dy| {
            let zero = fb.splat_like(0.0, x);
            let pos = fb.cmp(ir::CompareDirection::Gt, x, zero)?;
            Ok(Grads {
                dx: fb.select(pos, dy, zero)?,
                dparams: Vec::new(),
            })
        },
    ))
}

fn relu6_honest() -> Box<dyn CertLayer> {
    Box::new(ReplacedBackward::new(
        Relu6,
        "real backward",
        |l, fb, x, p, s, dy| l.backward(fb, x, p, s, dy),
    ))
}

/// The ReLU6 upper corner's outcome counts over a report's sites: how many
/// decisions took the `6` (second operand of the `min`).
fn upper_branch_taken(r: &TieReport) -> usize {
    r.coverage
        .iter()
        .filter(|c| c.site.ends_with("relu6_upper"))
        .map(|c| c.outcomes.get(1).copied().unwrap_or(0))
        .sum()
}

#[test]
fn control_relu6_backward_without_the_upper_mask_is_refuted_in_the_net() {
    // The requirement: the net certificate's coverage exercises the
    // upper branch (some pre-activation above 6), so the mask that forgets
    // it is seen. At 112², N = 2 the BN outputs of the wide early stages
    // pass 6 at the sampled points.
    let net = mobilenetv2_width(10, (112, 112), 8);
    let twin = rebuilt_everywhere(&net, &mut swap_relu6(relu6_honest));
    let r = joint_tie(&twin, &net.input_type(2), &net_tie_options(1));
    certified(&r, "relu6 twin");
    let taken = upper_branch_taken(&r);
    eprintln!("relu6 upper branch taken {taken} times");
    assert!(taken > 0, "the upper corner was never exercised");
    let control = rebuilt_everywhere(&net, &mut swap_relu6(relu6_without_upper_mask));
    let r = joint_tie(&control, &net.input_type(2), &net_tie_options(1));
    refuted_in(&r.verdict, "relu6 without the upper mask");
}

#[test]
fn control_se_backward_without_the_gate_term_is_refuted() {
    // EfficientNet's blocks.2 SE: dx = through_gate only, `gate⊙dy` lost.
    let net = efficientnet_b0_width(10, (32, 32), 8);
    let tys = net.chain().unwrap().types(&net.input_type(1)).unwrap();
    let i = net
        .layers
        .iter()
        .position(|(n, _)| n == "blocks.2")
        .unwrap();
    let LayerSpec::MbConvSe(spec) = &net.layers[i].1 else {
        panic!("blocks.2 is an MBConv")
    };
    let in_ch = tys[i].shape[1];
    let (ch, reduced) = (in_ch * spec.expand, (in_ch / spec.se_divisor).max(1));
    let swap = |honest: bool| {
        move |name: &str, layer: Box<dyn CertLayer>| -> Box<dyn CertLayer> {
            if name != "se" {
                return layer;
            }
            let se = SqueezeExcite { ch, reduced };
            if honest {
                Box::new(ReplacedBackward::new(
                    se,
                    "real backward",
                    |l, fb, x, p, s, dy| l.backward(fb, x, p, s, dy),
                ))
            } else {
                Box::new(ReplacedBackward::new(
                    se,
                    "without gate⊙dy",
                    |l: &SqueezeExcite, fb: &mut FuncBuilder, x, p: &[ValueId], _: &Saved, dy| {
                        let t = l.backward_terms(fb, x, p, dy)?;
                        Ok(Grads {
                            dx: t.through_gate,
                            dparams: t.dparams,
                        })
                    },
                ))
            }
        }
    };
    let twin = rebuilt(&net, "blocks.2", &mut swap(true));
    let control = rebuilt(&net, "blocks.2", &mut swap(false));
    twin_and_control(
        &net,
        &twin,
        &control,
        &["dx", "dstem.", "dblocks.0.", "dblocks.1.", "dblocks.2."],
        "SE without gate⊙dy",
    );
}

/// A skip block whose backward drops the skip's `+ dy` from dx.
struct SkipDropped(MobileBlock);

impl CertLayer for SkipDropped {
    fn name(&self) -> String {
        format!("{} (skip missing in dx)", self.0.name())
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
        x: ValueId,
        params: &[ValueId],
        sites: &mut layers::Sites,
    ) -> layers::emit::EmitResult<Saved> {
        self.0.forward(fb, x, params, sites)
    }
    fn backward(
        &self,
        fb: &mut FuncBuilder,
        x: ValueId,
        params: &[ValueId],
        saved: &Saved,
        dy: ValueId,
    ) -> layers::emit::EmitResult<Grads> {
        let g = self.0.backward(fb, x, params, saved, dy)?;
        Ok(Grads {
            dx: fb.sub(g.dx, dy)?,
            dparams: g.dparams,
        })
    }
}

#[test]
fn control_one_blocks_skip_gradient_dropped_is_refuted() {
    // MobileNetV4's blocks.4 (a UIB at 160 with the identity skip).
    let net = mobilenetv4_conv_m_width(10, (32, 32), 8);
    let tys = net.chain().unwrap().types(&net.input_type(1)).unwrap();
    let i = net
        .layers
        .iter()
        .position(|(n, _)| n == "blocks.4")
        .unwrap();
    let block = rebuild(&net.layers[i].1, tys[i].shape[1], &mut |_, l| l);
    assert!(block.skip);
    let twin = net.chain().unwrap();
    let mut control = net.chain().unwrap();
    control.layers[i].1 = Box::new(SkipDropped(block));
    twin_and_control(
        &net,
        &twin,
        &control,
        &[
            "dx",
            "dstem.",
            "dblocks.0.",
            "dblocks.1.",
            "dblocks.2.",
            "dblocks.3.",
        ],
        "skip dropped",
    );
}

#[test]
fn control_expand_bn_backward_in_the_per_example_world_is_refuted() {
    // MobileNetV2's blocks.3 expand BN: forward over N·H·W, backward over
    // the H·W of each example (docs/conventions.md §8's two-worlds hazard).
    let net = mobilenetv2_width(10, (32, 32), 8);
    let swap = |honest: bool| {
        move |name: &str, layer: Box<dyn CertLayer>| -> Box<dyn CertLayer> {
            if name != "expand_bn" {
                return layer;
            }
            let ch = layer.params(&TensorType::f32(vec![1, 1, 1, 1]))[0].ty.shape[0];
            let bn = BatchNorm {
                ch,
                world: BnWorld::Batch,
                eps: 1e-5,
            };
            if honest {
                Box::new(ReplacedBackward::new(
                    bn,
                    "real backward",
                    |l, fb, x, p, s, dy| l.backward(fb, x, p, s, dy),
                ))
            } else {
                Box::new(ReplacedBackward::new(
                    bn,
                    "backward per example",
                    |l: &BatchNorm, fb: &mut FuncBuilder, x, p: &[ValueId], s: &Saved, dy| {
                        BatchNorm {
                            world: BnWorld::PerExample,
                            ..l.clone()
                        }
                        .backward(fb, x, p, s, dy)
                    },
                ))
            }
        }
    };
    let twin = rebuilt(&net, "blocks.3", &mut swap(true));
    let control = rebuilt(&net, "blocks.3", &mut swap(false));
    twin_and_control(
        &net,
        &twin,
        &control,
        &[
            "dx",
            "dstem.",
            "dblocks.0.",
            "dblocks.1.",
            "dblocks.2.",
            "dblocks.3.expand",
        ],
        "expand BN per example",
    );
}

/// A block rebuilt through a swap that changes nothing emits the net's own
/// forward and backward (the controls differ from the net in the swapped
/// layer only).
#[test]
fn an_inert_swap_rebuilds_the_nets_own_block() {
    let net = mobilenetv4_conv_m_width(10, (32, 32), 8);
    let a = rebuilt(&net, "blocks.0", &mut |_, l| l);
    let b = net.chain().unwrap();
    let input = net.input_type(2);
    let (fa, fb) = (
        layers::tie_funcs(&a, &input).unwrap(),
        layers::tie_funcs(&b, &input).unwrap(),
    );
    assert_eq!(fa.forward, fb.forward);
    assert_eq!(fa.backward, fb.backward);
}
