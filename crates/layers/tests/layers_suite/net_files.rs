//! A net is data: every built-in net (the whole catalog, so nets added to it
//! are covered) written as a TOML and a JSON net file reads back to the same
//! NetSpec and renders byte-identical train steps (every optimizer) and eval
//! forward; nested blocks written with the generic `residual` / `sequential`
//! kinds render what the built-in block kinds render.

use layers::net::{
    catalog, BasicBlockSpec, BatchNormSpec, BottleneckSpec, Conv2dSpec, LayerSpec, NetFormat,
    NetSpec, ReluSpec, ResidualSpec, SequentialSpec,
};
use layers::ops::conv::Padding;
use layers::ops::norm::BnWorld;
use layers::trainstep::{render_eval_forward, render_step, Optimizer, StepOptions};

fn step_text(net: &NetSpec, opt: Optimizer) -> String {
    let r = render_step(net, 2, &StepOptions::new(opt)).unwrap();
    ir::print::print_module(&r.module)
}

fn eval_text(net: &NetSpec) -> String {
    ir::print::print_module(&render_eval_forward(net, 2).unwrap().module)
}

#[test]
fn every_built_in_net_round_trips_through_toml_and_json() {
    let dir = std::env::temp_dir().join(format!("certgrad-net-files-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let nets = catalog();
    assert!(nets.len() >= 9);
    for net in nets {
        let steps: Vec<String> = Optimizer::ALL.iter().map(|&o| step_text(&net, o)).collect();
        let eval = eval_text(&net);
        for ext in ["toml", "json"] {
            let path = dir.join(format!("{}.{ext}", net.name));
            net.write(&path).unwrap();
            let back = NetSpec::load(&path).unwrap_or_else(|e| panic!("{e}"));
            assert_eq!(back, net, "{}", path.display());
            for (&opt, want) in Optimizer::ALL.iter().zip(&steps) {
                assert!(
                    step_text(&back, opt) == *want,
                    "{}: the {} step differs",
                    path.display(),
                    opt.name()
                );
            }
            assert!(eval_text(&back) == eval, "{}: eval differs", path.display());
        }
    }
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn the_file_text_is_the_spec_types_serde_form() {
    let net = layers::net::by_name("resnet34-k10-32x32").unwrap();
    let toml = net.to_text(NetFormat::Toml).unwrap();
    // Each layer a table: its name, its kind as `op`, the kind's fields.
    assert!(toml.contains("[[layers]]\nname = \"stage2.block1\"\nop = \"basic_block\"\nout_ch = 128\nstride = 2\nproject = true\nworld = \"batch\"\n"), "{toml}");
    assert!(toml.contains("label_smoothing = \"none\""), "{toml}");
    let json: serde_json::Value =
        serde_json::from_str(&net.to_text(NetFormat::Json).unwrap()).unwrap();
    assert_eq!(json["layers"][0]["op"], "conv2d");
    assert_eq!(json["layers"][0]["padding"], "symmetric");
    assert_eq!(json["input"], serde_json::json!([3, 32, 32]));
}

fn conv(k: i64, stride: i64, out_ch: i64) -> LayerSpec {
    LayerSpec::Conv2d(Conv2dSpec {
        k,
        stride,
        padding: Padding::Symmetric,
        out_ch,
        bias: false,
    })
}

fn bn() -> LayerSpec {
    LayerSpec::BatchNorm(BatchNormSpec {
        world: BnWorld::Batch,
        eps: 1e-5,
    })
}

fn named(layers: Vec<(&str, LayerSpec)>) -> Vec<(String, LayerSpec)> {
    layers
        .into_iter()
        .map(|(n, l)| (n.to_string(), l))
        .collect()
}

/// The `residual` form of a basic block or bottleneck, written out layer by
/// layer from docs/nets.md §3's description (not from `ResidualBlock`).
fn as_residual(in_ch: i64, spec: &LayerSpec) -> LayerSpec {
    let relu = || LayerSpec::Relu(ReluSpec {});
    let (main, out_ch, stride, project) = match spec {
        LayerSpec::BasicBlock(BasicBlockSpec {
            out_ch,
            stride,
            project,
            ..
        }) => (
            named(vec![
                ("conv1", conv(3, *stride, *out_ch)),
                ("bn1", bn()),
                ("mid_relu", relu()),
                ("conv2", conv(3, 1, *out_ch)),
                ("bn2", bn()),
            ]),
            *out_ch,
            *stride,
            *project,
        ),
        LayerSpec::Bottleneck(BottleneckSpec {
            mid_ch,
            out_ch,
            stride,
            project,
            ..
        }) => (
            named(vec![
                ("conv1", conv(1, 1, *mid_ch)),
                ("bn1", bn()),
                ("mid_relu1", relu()),
                ("conv2", conv(3, *stride, *mid_ch)),
                ("bn2", bn()),
                ("mid_relu2", relu()),
                ("conv3", conv(1, 1, *out_ch)),
                ("bn3", bn()),
            ]),
            *out_ch,
            *stride,
            *project,
        ),
        other => panic!("not a block: {other:?}"),
    };
    let _ = in_ch;
    LayerSpec::Residual(ResidualSpec {
        main,
        shortcut: if project {
            named(vec![("conv", conv(1, stride, out_ch)), ("bn", bn())])
        } else {
            Vec::new()
        },
        post: named(vec![("out_relu", relu())]),
    })
}

#[test]
fn resnets_written_with_generic_residual_blocks_render_the_same_steps() {
    for net in [
        layers::net::resnet34_width(10, (32, 32), 4),
        layers::net::resnet50_width(10, (32, 32), 4),
    ] {
        let mut generic = net.clone();
        let mut blocks = 0;
        for (_, l) in &mut generic.layers {
            if matches!(l, LayerSpec::BasicBlock(_) | LayerSpec::Bottleneck(_)) {
                *l = as_residual(0, l);
                blocks += 1;
            }
        }
        assert_eq!(blocks, 16);
        assert_ne!(generic, net);
        // Through a file and back, so the nested lists are file data too.
        let text = generic.to_text(NetFormat::Toml).unwrap();
        assert!(text.contains("[[layers.main]]"), "{text}");
        let generic = NetSpec::from_text(&text, "generic.toml").unwrap();
        assert_eq!(generic.bn_sites().unwrap(), net.bn_sites().unwrap());
        assert_eq!(generic.param_specs().unwrap(), net.param_specs().unwrap());
        for opt in [Optimizer::AdamW, Optimizer::HeavyBall] {
            assert!(
                step_text(&generic, opt) == step_text(&net, opt),
                "{} {}",
                net.name,
                opt.name()
            );
        }
        assert!(eval_text(&generic) == eval_text(&net), "{}", net.name);
    }
}

#[test]
fn a_sequential_block_scopes_its_layers_under_its_name() {
    let mut net = layers::net::by_name("cifar8-bbn").unwrap();
    // stage1's conv → bn pair as one `sequential` named `stage1`, its
    // layers `conv1`, `bn1`: the parameters are `stage1.conv1.W` … as before.
    let i = net
        .layers
        .iter()
        .position(|(n, _)| n == "stage1.conv1")
        .unwrap();
    let pair: Vec<_> = net.layers.drain(i..i + 2).collect();
    let renamed = pair
        .into_iter()
        .map(|(n, l)| (n.trim_start_matches("stage1.").to_string(), l))
        .collect();
    net.layers.insert(
        i,
        (
            "stage1".into(),
            LayerSpec::Sequential(SequentialSpec { layers: renamed }),
        ),
    );
    let want = layers::net::by_name("cifar8-bbn").unwrap();
    assert_eq!(net.param_specs().unwrap(), want.param_specs().unwrap());
    assert_eq!(
        net.bn_sites().unwrap(),
        want.bn_sites()
            .unwrap()
            .into_iter()
            .map(|mut s| {
                if s.name == "stage1.bn1" {
                    s.path = vec![i, 1];
                } else {
                    s.path[0] -= 1;
                }
                s
            })
            .collect::<Vec<_>>()
    );
    let back = NetSpec::from_text(&net.to_text(NetFormat::Json).unwrap(), "seq.json").unwrap();
    assert_eq!(back, net);
}
