//! ResNet ties: the three residual blocks (identity basic,
//! downsample basic with a 1×1/s2 projection, v1.5 bottleneck with
//! projection) tied to their VJPs at small sizes with negative controls that
//! inject real shape-preserving bugs; the whole-net tie of ResNet-34 and
//! ResNet-50 at a small input for several N, naming every kink site; and every
//! parameter tie of a ResNet train step.
//!
//! The 224² whole-net ties are measured with the release binary
//! (`certgrad certify resnet34 --batch 2`) and are `#[ignore]`d here.

use crate::common::refuted_block;
use cert::net::{certify_net, joint_tie, net_tie_options};
use cert::step::{certify_train_step, StepTieOptions};
use cert::{certify_layer, TieOptions, TieReport};
use ir::{FuncBuilder, TensorType, ValueId};
use layers::blocks::{block_conv, BlockNorm, ResidualBlock};
use layers::combinators::{Chain, Projection, Residual};
use layers::emit::EmitResult;
use layers::net::{
    resnet34, resnet34_width, resnet50, resnet50_width, BasicBlockSpec, LayerSpec, NetSpec,
};
use layers::ops::activation::Relu;
use layers::ops::conv::{Conv2d, Padding};
use layers::ops::norm::{BatchNorm, BnWorld};
use layers::trainstep::{render_step, Optimizer, StepOptions};
use layers::{tie_funcs, CertLayer, Emit, Grads, ReplacedBackward, Saved};

const NORM: BlockNorm = BlockNorm {
    world: BnWorld::Batch,
    eps: 1e-5,
};

fn t(shape: &[i64]) -> TensorType {
    TensorType::f32(shape.to_vec())
}

fn tie(layer: &dyn CertLayer, input: &[i64]) -> TieReport {
    certify_layer(layer, &t(input), &TieOptions::default())
}

fn assert_certified(r: &TieReport) {
    assert!(r.certified(), "{}: {:?}", r.layer, r.verdict);
    assert!(r.points >= 1 && r.min_margin.as_ref().is_some_and(|m| m.margin > 0.0));
}

fn site_names(r: &TieReport) -> Vec<&str> {
    r.site_margins.iter().map(|s| s.site.as_str()).collect()
}

// ---------------------------------------------------------------- blocks

#[test]
fn identity_basic_block_ties_at_batch_1_2_3() {
    let block = ResidualBlock::basic(3, 3, 1, false, NORM).unwrap();
    for (n, h, w) in [(1, 5, 7), (2, 4, 6), (3, 6, 3)] {
        let r = tie(&block, &[n, 3, h, w]);
        assert_certified(&r);
        assert_eq!(r.blocks, 1 + 6, "dx, conv1.W, bn1 γ β, conv2.W, bn2 γ β");
        assert_eq!(
            site_names(&r),
            ["mid_relu.pre_relu", "out_relu.pre_relu"],
            "N={n}"
        );
    }
}

#[test]
fn downsample_basic_block_ties_at_batch_1_2_3() {
    let block = ResidualBlock::basic(2, 4, 2, true, NORM).unwrap();
    for (n, h, w) in [(1, 6, 8), (2, 7, 5), (3, 4, 6)] {
        let r = tie(&block, &[n, 2, h, w]);
        assert_certified(&r);
        let names: Vec<_> = r.block_results.iter().map(|b| b.name.as_str()).collect();
        assert!(names.contains(&"dshortcut.conv.W") && names.contains(&"dshortcut.bn.beta"));
        assert_eq!(
            site_names(&r),
            ["main.mid_relu.pre_relu", "out_relu.pre_relu"],
            "N={n}"
        );
    }
}

#[test]
fn bottleneck_blocks_tie_at_batch_1_2_3() {
    // v1.5 with a strided projection (stages 2–4), the stride-1 projection
    // of stage 1 (64→256), and the identity bottleneck.
    let strided = ResidualBlock::bottleneck(4, 2, 8, 2, true, NORM).unwrap();
    let widen = ResidualBlock::bottleneck(2, 2, 8, 1, true, NORM).unwrap();
    let identity = ResidualBlock::bottleneck(8, 2, 8, 1, false, NORM).unwrap();
    for (n, h, w) in [(1, 6, 4), (2, 5, 7), (3, 4, 4)] {
        let r = tie(&strided, &[n, 4, h, w]);
        assert_certified(&r);
        assert_eq!(
            site_names(&r),
            [
                "main.mid_relu1.pre_relu",
                "main.mid_relu2.pre_relu",
                "out_relu.pre_relu"
            ]
        );
        assert_certified(&tie(&widen, &[n, 2, h, w]));
        assert_certified(&tie(&identity, &[n, 8, h, w]));
    }
}

#[test]
fn an_identity_skip_that_changes_shape_is_refused() {
    let e = ResidualBlock::basic(2, 4, 2, false, NORM).err().unwrap();
    assert!(e.0.contains("project the skip"), "{e}");
}

// ---------------------------------------------- block negative controls

/// The downsample basic block with the projection's conv and BN given, so a
/// control can replace one of their backward maps; its forward is checked
/// equal to the real block's.
fn downsample_with(skip_conv: Box<dyn CertLayer>, skip_bn: Box<dyn CertLayer>) -> ResidualBlock {
    let main = Chain::new()
        .push("conv1", block_conv(3, 2, 2, 4))
        .push("bn1", NORM.bn(4))
        .push("mid_relu", Relu)
        .push("conv2", block_conv(3, 1, 4, 4))
        .push("bn2", NORM.bn(4));
    let mut shortcut = Chain::new();
    shortcut.layers.push(("conv".into(), skip_conv));
    shortcut.layers.push(("bn".into(), skip_bn));
    let real = ResidualBlock::basic(2, 4, 2, true, NORM).unwrap();
    ResidualBlock {
        label: format!("{} (control)", real.label),
        sum: Box::new(Projection {
            main: Box::new(main),
            shortcut: Box::new(shortcut),
        }),
        post: ResidualBlock::relu_after(),
    }
}

fn same_forward(a: &dyn CertLayer, b: &dyn CertLayer, input: &[i64]) {
    let (fa, fb) = (
        tie_funcs(a, &t(input)).unwrap(),
        tie_funcs(b, &t(input)).unwrap(),
    );
    assert_eq!(
        fa.forward, fb.forward,
        "the control changes only the backward"
    );
}

#[test]
fn control_projection_without_its_bn_backward_is_refuted() {
    let input = [2, 2, 6, 4];
    let no_bn_back = ReplacedBackward::new(
        NORM.bn(4),
        "BN backward skipped: dx = dy",
        |l: &BatchNorm, fb: &mut FuncBuilder, x, params: &[ValueId], saved: &Saved, dy| {
            let g = l.backward(fb, x, params, saved, dy)?;
            Ok(Grads {
                dx: dy,
                dparams: g.dparams,
            })
        },
    );
    let control = downsample_with(Box::new(block_conv(1, 2, 2, 4)), Box::new(no_bn_back));
    let real = ResidualBlock::basic(2, 4, 2, true, NORM).unwrap();
    same_forward(&control, &real, &input);
    assert_eq!(refuted_block(&tie(&control, &input)), "dx");
    // The same wrapper with the real backward ties (the wrapper is inert).
    let honest = ReplacedBackward::new(
        NORM.bn(4),
        "real backward",
        |l: &BatchNorm, fb: &mut FuncBuilder, x, params: &[ValueId], saved: &Saved, dy| {
            l.backward(fb, x, params, saved, dy)
        },
    );
    let ok = downsample_with(Box::new(block_conv(1, 2, 2, 4)), Box::new(honest));
    assert_certified(&tie(&ok, &input));
}

#[test]
fn control_projection_dw_from_the_wrong_phase_is_refuted() {
    // The 1×1/s2 projection's weight gradient correlated against the odd
    // phase (XLA-SAME's decimation) while the forward reads the even one;
    // dx keeps the right phase, so only dshortcut.conv.W is wrong.
    let input = [2, 2, 6, 8];
    let odd_phase_dw = ReplacedBackward::new(
        block_conv(1, 2, 2, 4),
        "dW from the odd phase",
        |c: &Conv2d, fb: &mut FuncBuilder, x, params: &[ValueId], _: &Saved, dy| {
            let right = c.geometry(fb.ty(x)).expect("geometry");
            let wrong = Conv2d {
                padding: Padding::XlaSame,
                ..c.clone()
            }
            .geometry(fb.ty(x))
            .expect("geometry");
            let g = c.backward_at(fb, x, params, dy, &right)?;
            let w = c.backward_at(fb, x, params, dy, &wrong)?;
            Ok(Grads {
                dx: g.dx,
                dparams: w.dparams,
            })
        },
    );
    let control = downsample_with(Box::new(odd_phase_dw), Box::new(NORM.bn(4)));
    same_forward(
        &control,
        &ResidualBlock::basic(2, 4, 2, true, NORM).unwrap(),
        &input,
    );
    assert_eq!(refuted_block(&tie(&control, &input)), "dshortcut.conv.W");
}

/// `sum` wrapped so its backward drops the skip's `+ e` from dx.
struct NoSkipInDx(ResidualBlock);

impl CertLayer for NoSkipInDx {
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
    ) -> EmitResult<Saved> {
        self.0.forward(fb, x, params, sites)
    }
    fn backward(
        &self,
        fb: &mut FuncBuilder,
        x: ValueId,
        params: &[ValueId],
        saved: &Saved,
        dy: ValueId,
    ) -> EmitResult<Grads> {
        // The residual's dx is body.back(e) + e with e the out-ReLU's
        // cotangent; subtracting e leaves the body's alone.
        let e = ResidualBlock::out_relu_backward(fb, saved, dy)?;
        let g = self.0.backward(fb, x, params, saved, dy)?;
        let dx = fb.sub(g.dx, e.dx)?;
        Ok(Grads {
            dx,
            dparams: g.dparams,
        })
    }
}

#[test]
fn control_identity_block_without_the_skip_in_dx_is_refuted() {
    let control = NoSkipInDx(ResidualBlock::basic(3, 3, 1, false, NORM).unwrap());
    for n in [1, 2] {
        assert_eq!(refuted_block(&tie(&control, &[n, 3, 5, 4])), "dx", "N={n}");
    }
}

/// `l` whose backward normalises per example while its forward is in the
/// Batch world (docs/conventions.md §8's two-worlds hazard).
fn backward_per_example(l: BatchNorm) -> ReplacedBackward<BatchNorm> {
    ReplacedBackward::new(
        l,
        "backward in the PerExample world",
        |l: &BatchNorm, fb: &mut FuncBuilder, x, params: &[ValueId], saved: &Saved, dy| {
            BatchNorm {
                world: BnWorld::PerExample,
                ..l.clone()
            }
            .backward(fb, x, params, saved, dy)
        },
    )
}

/// A bottleneck's main branch `in_ch → 2 → 2 → 8` (stride in the 3×3) whose
/// bn2 runs its backward in the PerExample world.
fn bottleneck_main_bn2_per_example(in_ch: i64, stride: i64) -> Chain {
    Chain::new()
        .push("conv1", block_conv(1, 1, in_ch, 2))
        .push("bn1", NORM.bn(2))
        .push("mid_relu1", Relu)
        .push("conv2", block_conv(3, stride, 2, 2))
        .push("bn2", backward_per_example(NORM.bn(2)))
        .push("mid_relu2", Relu)
        .push("conv3", block_conv(1, 1, 2, 8))
        .push("bn3", NORM.bn(8))
}

#[test]
fn control_bottleneck_bn_backward_in_the_per_example_world_is_refuted() {
    // docs/conventions.md §8's two-worlds hazard inside a block: the forward's bn2
    // normalises over N·H·W, its backward over H·W of each example.
    let main = bottleneck_main_bn2_per_example(4, 2);
    let shortcut = Chain::new()
        .push("conv", block_conv(1, 2, 4, 8))
        .push("bn", NORM.bn(8));
    let real = ResidualBlock::bottleneck(4, 2, 8, 2, true, NORM).unwrap();
    let control = ResidualBlock {
        label: "bottleneck (bn2 backward per example)".into(),
        sum: Box::new(Projection {
            main: Box::new(main),
            shortcut: Box::new(shortcut),
        }),
        post: ResidualBlock::relu_after(),
    };
    let input = [2, 4, 6, 4];
    same_forward(&control, &real, &input);
    assert_eq!(refuted_block(&tie(&control, &input)), "dx");
    // A Residual (not Projection) identity bottleneck with the same bug.
    let main = bottleneck_main_bn2_per_example(8, 1);
    let control = ResidualBlock {
        label: "identity bottleneck (bn2 backward per example)".into(),
        sum: Box::new(Residual::new(Box::new(main))),
        post: ResidualBlock::relu_after(),
    };
    assert_eq!(refuted_block(&tie(&control, &[3, 8, 4, 5])), "dx");
}

// ------------------------------------------------------------ whole nets

/// The kink sites the smooth-point report must name for a ResNet.
fn assert_resnet_sites(r: &TieReport, net: &NetSpec) {
    let names = site_names(r);
    for want in [
        "stem.pool.pool",
        "stem.relu.pre_relu",
        "stage1.block1.mid_relu.pre_relu",
        "stage1.block1.out_relu.pre_relu",
        "stage2.block1.main.mid_relu.pre_relu",
        "stage4.block3.out_relu.pre_relu",
    ] {
        if net.name.starts_with("resnet50") && want.contains("mid_relu.pre") {
            continue;
        }
        assert!(
            names.contains(&want),
            "{}: no {want} in {names:?}",
            net.name
        );
    }
    // One site per ReLU and pool: stem (2) + 2 per basic block / 3 per bottleneck.
    let blocks = net
        .layers
        .iter()
        .filter(|(_, l)| matches!(l, LayerSpec::BasicBlock(..) | LayerSpec::Bottleneck(..)))
        .count();
    let per = if net.name.starts_with("resnet50") {
        3
    } else {
        2
    };
    assert_eq!(names.len(), 2 + per * blocks, "{names:?}");
    assert!(r
        .site_margins
        .iter()
        .all(|s| s.min > 0.0 && s.decisions > 0));
}

/// The whole-net tie of `net` at N = 2 (probe seed `seed`): certified, whole
/// and per parameter, naming every ResNet kink site. Returns the whole tie's
/// block count.
fn whole_net_ties(net: &NetSpec, seed: u64) -> usize {
    let c = certify_net(net, 2, &net_tie_options(seed)).unwrap();
    eprintln!("{}: {:.2}s", net.name, c.seconds);
    assert!(
        c.certified(),
        "{:?} / {:?}",
        c.whole.verdict,
        c.params.verdict
    );
    assert_resnet_sites(&c.whole, net);
    c.whole.blocks
}

/// ResNet-34's topology at width 8 (every block, projection and kink site of
/// ResNet-34, an eighth of the channels) at N = 1, 2, 3 and three input
/// sizes: the tie does not depend on N or the spatial size.
#[test]
fn resnet34_whole_net_tie_does_not_depend_on_n_or_size() {
    // 64×64 keeps 2×2 at stage 4, so batch BN has more than one element per
    // channel even at N = 1; 32×48 is non-square.
    for (n, hw) in [(1, (64, 64)), (2, (32, 32)), (3, (32, 48))] {
        let net = resnet34_width(10, hw, 8);
        let c = certify_net(&net, n, &net_tie_options(n as u64)).unwrap();
        eprintln!(
            "{} N={n}: whole {:.2}s, params {:.2}s, min margin {:?}",
            net.name, c.whole.seconds, c.params.seconds, c.whole.min_margin
        );
        assert!(c.whole.certified(), "N={n}: {:?}", c.whole.verdict);
        assert!(c.params.certified(), "N={n}: {:?}", c.params.verdict);
        assert_eq!(c.whole.blocks, 111, "dx + 110 parameter tensors");
        assert_eq!(c.params.blocks, 112, "+ the loss target");
        assert!(c.whole.block_results.iter().all(|b| b.probes == 1));
        assert_resnet_sites(&c.whole, &net);
        assert_resnet_sites(&c.params, &net);
    }
}

/// Full width at 32×32 costs about a minute in the test profile (the 21M
/// parameters are sampled and carried as duals); the release binary measures
/// it at 224² (`certgrad certify resnet34 --batch 2`).
#[test]
#[ignore = "heavy: full-width ResNet-34 whole-net tie, ~15-60 s in the test profile"]
fn resnet34_full_width_whole_net_tie_at_a_small_input() {
    assert_eq!(whole_net_ties(&resnet34(10, (32, 32)), 2), 111);
}

#[test]
fn resnet50_whole_net_tie_at_a_small_input() {
    assert_eq!(whole_net_ties(&resnet50_width(10, (32, 32), 8), 5), 162);
}

/// A whole net whose stage-3 identity block drops the skip from dx: the joint
/// tie refutes it and bisection names a block upstream of the bug; a doubled
/// stem dγ is isolated to that one parameter.
#[test]
fn control_whole_net_with_a_wrong_block_backward_is_refuted_and_localised() {
    let net = resnet34_width(10, (32, 32), 8);
    let mut chain = net.chain().unwrap();
    let i = chain
        .layers
        .iter()
        .position(|(n, _)| n == "stage3.block2")
        .unwrap();
    let control = NoSkipInDx(ResidualBlock::basic(32, 32, 1, false, NORM).unwrap());
    chain.layers[i].1 = Box::new(control);
    let r = joint_tie(&chain, &net.input_type(2), &net_tie_options(3));
    // The wrong cotangent flows into dx and every gradient upstream of the
    // block; nothing downstream of it is wrong, so nothing there is named.
    let block = refuted_block(&r);
    assert!(
        ["dx", "dstem.", "dstage1.", "dstage2.", "dstage3.block1."]
            .iter()
            .any(|p| block.starts_with(p)),
        "{block}"
    );
    // A bug in one parameter's gradient is isolated to that parameter.
    let mut chain = net.chain().unwrap();
    let j = chain
        .layers
        .iter()
        .position(|(n, _)| n == "stem.bn")
        .unwrap();
    chain.layers[j].1 = Box::new(ReplacedBackward::new(
        NORM.bn(8),
        "dγ doubled",
        |l: &BatchNorm, fb: &mut FuncBuilder, x, params: &[ValueId], s: &Saved, dy| {
            let g = l.backward(fb, x, params, s, dy)?;
            let twice = fb.scale(g.dparams[0], 2.0)?;
            Ok(Grads {
                dx: g.dx,
                dparams: vec![twice, g.dparams[1]],
            })
        },
    ));
    let r = joint_tie(&chain, &net.input_type(2), &net_tie_options(3));
    assert_eq!(refuted_block(&r), "dstem.bn.gamma");
}

/// The 224² whole-net ties; about a minute each in a
/// release build on 2 cores: run with `cargo test --release -p cert --test
/// resnet_ties -- --ignored`, or `certgrad certify resnet34 --batch 2`.
#[test]
#[ignore = "heavy: ResNet-34/50 at 224², N = 2 (measured with the release binary)"]
fn resnets_whole_net_tie_at_224() {
    for net in [resnet34(10, (224, 224)), resnet50(10, (224, 224))] {
        whole_net_ties(&net, 0);
    }
}

// ----------------------------------------------------------- train step

/// Every parameter tie of the rendered ResNet train steps (AdamW and
/// heavy-ball), on the ResNet-34 / ResNet-50 topologies at width 4:
/// `certify_train_step` evaluates the step and one dual-number forward per
/// parameter tensor on den's generic (not fast) path, which at full width
/// costs seconds per forward (see the ignored test below).
#[test]
fn resnet_train_steps_every_parameter_ties() {
    for (net, tensors) in [
        (resnet34_width(10, (32, 32), 4), 110),
        (resnet50_width(10, (32, 32), 4), 161),
    ] {
        for opt in [Optimizer::AdamW, Optimizer::HeavyBall] {
            let step = render_step(&net, 2, &StepOptions::new(opt)).unwrap().module;
            let r = certify_train_step(&net, 2, opt, &step, &StepTieOptions::default());
            eprintln!("{} {opt:?}: {:.1}s", net.name, r.seconds);
            assert!(r.certified(), "{} {opt:?}: {:?}", net.name, r.verdict);
            assert_eq!(r.blocks.len(), tensors);
        }
    }
}

#[test]
#[ignore = "heavy: full-width ResNet-34 step tie, ~160-200 s (110 generic dual forwards)"]
fn resnet34_full_width_train_step_every_parameter_ties() {
    let net = resnet34(10, (32, 32));
    let step = render_step(&net, 2, &StepOptions::new(Optimizer::AdamW))
        .unwrap()
        .module;
    let r = certify_train_step(&net, 2, Optimizer::AdamW, &step, &StepTieOptions::default());
    eprintln!("{}: {:.1}s", net.name, r.seconds);
    assert!(r.certified(), "{:?}", r.verdict);
    assert_eq!(r.blocks.len(), 110);
}

// ------------------------------------------------------------ eval drift

#[test]
fn resnet_eval_forward_differs_from_train_only_in_its_batch_norms() {
    use cert::net::check_eval_drift;
    let train = resnet34(10, (32, 32));
    let eval = train.with_every_bn_in(BnWorld::Eval);
    let r = check_eval_drift(&train, &eval, 2).unwrap();
    // The stem BN and the 16 blocks switch; stem conv, pool, ReLU, GAP, fc
    // are op-for-op identical.
    assert_eq!(r.bn_layers, 1 + 16);
    assert_eq!(r.identical_layers, train.layers.len() - 17);
    // Controls: a block left in the Batch world, and a block whose projection
    // drifted between the two forwards.
    let mut stale = eval.clone();
    stale.layers[6].1.set_bn_world(BnWorld::Batch);
    let e = check_eval_drift(&train, &stale, 2).unwrap_err();
    assert!(e.0.contains(&train.layers[6].0), "{e}");
    let mut drifted = eval.clone();
    let i = drifted
        .layers
        .iter()
        .position(|(n, _)| n == "stage2.block1")
        .unwrap();
    if let LayerSpec::BasicBlock(BasicBlockSpec { stride, .. }) = &mut drifted.layers[i].1 {
        *stride = 1;
    }
    let e = check_eval_drift(&train, &drifted, 2).unwrap_err();
    assert!(e.0.contains("stage2.block1"), "{e}");
}
