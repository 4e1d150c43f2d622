//! Depthwise-family train steps and drift guards: every
//! parameter tie of the rendered AdamW and heavy-ball steps of MobileNetV2,
//! EfficientNet-B0 and MobileNetV4-Conv-M (at width 4, 32²: the same
//! tensors, names and blocks as the paper's nets); the eval forward differs
//! from the train forward only in its batch norms; and one geometry source
//! for every strided site: the NetSpec's padding is what the forward, the
//! backward and the rendered text carry, and they all move with it.

use cert::net::check_eval_drift;
use cert::step::{certify_train_step, StepTieOptions};
use ir::{Module, OpKind};
use layers::net::{
    efficientnet_b0_width, mobilenetv2_width, mobilenetv4_conv_m_width, LayerSpec, NetSpec,
};
use layers::ops::conv::Padding;
use layers::ops::norm::BnWorld;
use layers::trainstep::{render_eval_forward, render_step, Optimizer, StepOptions};

fn nets(hw: (i64, i64), width: i64) -> [(NetSpec, usize); 3] {
    [
        (mobilenetv2_width(10, hw, width), 158),
        (efficientnet_b0_width(10, hw, width), 213),
        (mobilenetv4_conv_m_width(10, hw, width), 233),
    ]
}

#[test]
fn train_steps_every_parameter_ties() {
    for (net, tensors) in nets((32, 32), 4) {
        for opt in [Optimizer::AdamW, Optimizer::HeavyBall] {
            let step = render_step(&net, 2, &StepOptions::new(opt)).unwrap().module;
            let r = certify_train_step(&net, 2, opt, &step, &StepTieOptions::default());
            eprintln!("{} {opt:?}: {:.1}s", net.name, r.seconds);
            assert!(r.certified(), "{} {opt:?}: {:?}", net.name, r.verdict);
            assert_eq!(r.blocks.len(), tensors, "{}", net.name);
        }
    }
}

/// The number of layers holding a batch norm (all but GAP and the dense).
fn bn_layers(net: &NetSpec) -> usize {
    net.layers
        .iter()
        .filter(|(_, l)| l.as_block().bn_world().is_some())
        .count()
}

#[test]
fn eval_forward_differs_from_train_only_in_its_batch_norms() {
    for (train, _) in nets((32, 32), 8) {
        let eval = train.with_every_bn_in(BnWorld::Eval);
        let r = check_eval_drift(&train, &eval, 2).unwrap();
        assert_eq!(r.bn_layers, bn_layers(&train), "{}", train.name);
        assert_eq!(r.identical_layers, 2, "{}: GAP and fc", train.name);
        // A block left in the Batch world is named.
        let mut stale = eval.clone();
        let name = stale.layers[3].0.clone();
        stale.layers[3]
            .1
            .as_block_mut()
            .set_bn_world(BnWorld::Batch);
        let e = check_eval_drift(&train, &stale, 2).unwrap_err();
        assert!(e.0.contains(&name), "{e}");
    }
    // A block whose stride drifted between the two forwards is named.
    let train = mobilenetv2_width(10, (32, 32), 8);
    let mut drifted = train.with_every_bn_in(BnWorld::Eval);
    if let LayerSpec::InvertedResidual(b) = &mut drifted.layers[4].1 {
        assert_eq!(b.stride, 2);
        b.stride = 1;
    }
    let e = check_eval_drift(&train, &drifted, 2).unwrap_err();
    assert!(e.0.contains(&train.layers[4].0), "{e}");
}

/// A convolution's window strides, padding and feature group count.
type ConvSite = (Vec<i64>, Vec<(i64, i64)>, i64);

/// Every convolution of `module`, regions included, in order.
fn convs(module: &Module) -> Vec<ConvSite> {
    fn walk(b: &ir::Block, out: &mut Vec<ConvSite>) {
        for op in &b.ops {
            if let OpKind::Convolution(a) = &op.kind {
                out.push((
                    a.window_strides.clone(),
                    a.padding.clone(),
                    a.feature_group_count,
                ));
            }
            for r in &op.regions {
                walk(r, out);
            }
        }
    }
    let mut out = Vec::new();
    for f in &module.funcs {
        walk(&f.body, &mut out);
    }
    out
}

/// The strided sites of a net: (layer, kernel) of every stride-2 spec.
fn strided_sites(net: &NetSpec) -> Vec<(String, i64)> {
    net.layers
        .iter()
        .filter_map(|(n, l)| {
            let (k, s) = match l {
                LayerSpec::ConvBnAct(b) => (b.k, b.stride),
                LayerSpec::InvertedResidual(b) => (b.k, b.stride),
                LayerSpec::MbConvSe(b) => (b.k, b.stride),
                LayerSpec::FusedMbConv(b) => (b.k, b.stride),
                LayerSpec::Uib(b) => (
                    if b.pre_dw_k > 0 {
                        b.pre_dw_k
                    } else {
                        b.post_dw_k
                    },
                    b.stride,
                ),
                _ => return None,
            };
            (s == 2).then(|| (n.clone(), k))
        })
        .collect()
}

fn set_padding(net: &mut NetSpec, to: Padding) {
    for (_, l) in &mut net.layers {
        match l {
            LayerSpec::ConvBnAct(b) => b.padding = to,
            LayerSpec::InvertedResidual(b) => b.padding = to,
            LayerSpec::MbConvSe(b) => b.padding = to,
            LayerSpec::FusedMbConv(b) => b.padding = to,
            LayerSpec::Uib(b) => b.padding = to,
            _ => {}
        }
    }
}

/// docs/conventions.md §3: at an even input, XLA-SAME stride 2 pads the forward
/// `[p−1, p]` (odd k) and the strided depthwise input VJP `[p+1, p−1]`;
/// symmetric pads `[p, p]` and `[p, p]`. The expected pads are written from
/// the reference's table, not from the conv geometry code.
#[test]
fn every_strided_site_reads_its_padding_from_the_netspec() {
    for (net, _) in nets((64, 64), 8) {
        let sites = strided_sites(&net);
        assert_eq!(sites.len(), 5, "{}: {sites:?}", net.name);
        for padding in [Padding::XlaSame, Padding::Symmetric] {
            let fwd = |p: i64| match padding {
                Padding::XlaSame => (p - 1, p),
                Padding::Symmetric => (p, p),
            };
            let dx = |p: i64| match padding {
                Padding::XlaSame => (p + 1, p - 1),
                Padding::Symmetric => (p, p),
            };
            let mut n = net.clone();
            set_padding(&mut n, padding);
            let step = render_step(&n, 2, &StepOptions::new(Optimizer::AdamW))
                .unwrap()
                .module;
            let eval = render_eval_forward(&n, 2).unwrap().module;
            let text = ir::print::print_module(&step);
            let step = ir::parse::parse_module(&text, "step.mlir").unwrap();
            for module in [&step, &eval] {
                let strided: Vec<_> = convs(module)
                    .into_iter()
                    .filter(|(s, _, _)| s == &[2, 2])
                    .collect();
                // One forward conv per strided site, each with its kernel's pad.
                let mut want: Vec<(i64, i64)> =
                    sites.iter().map(|(_, k)| fwd((k - 1) / 2)).collect();
                let mut got: Vec<(i64, i64)> = strided.iter().map(|(_, p, _)| p[0]).collect();
                want.sort();
                got.sort();
                assert_eq!(got, want, "{} {padding:?}", n.name);
                assert!(strided.iter().all(|(_, p, _)| p[0] == p[1]));
            }
            // The strided depthwise input VJPs (stride-1 grouped convs on the
            // upsampled cotangent) carry the convention's pad.
            // MobileNetV4's blocks.0 is the fused (dense) conv.
            let first_dw = if n.name.starts_with("mobilenetv4") {
                2
            } else {
                1
            };
            let dw_sites: Vec<i64> = sites[first_dw..].iter().map(|(_, k)| *k).collect();
            let grouped: Vec<(i64, i64)> = convs(&step)
                .into_iter()
                .filter(|(s, _, g)| s == &[1, 1] && *g > 1)
                .map(|(_, p, _)| p[0])
                .collect();
            for k in dw_sites {
                let (want, other) = (dx((k - 1) / 2), ((k - 1) / 2 + 1, (k - 1) / 2 - 1));
                assert!(
                    grouped.contains(&want),
                    "{} {padding:?}: no dw input VJP pad {want:?} for k={k} in {grouped:?}",
                    n.name
                );
                // The odd-phase pad appears only under XLA-SAME.
                assert_eq!(
                    grouped.contains(&other),
                    padding == Padding::XlaSame,
                    "{} {padding:?}: k={k}",
                    n.name
                );
            }
        }
    }
}
