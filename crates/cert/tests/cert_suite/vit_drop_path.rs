//! ViT with stochastic depth (docs/conventions.md §13) certified: each
//! encoder block's two residual branches (attention, MLP) take their own
//! per-example keep input, on the ViT ramp `1 − 0.1·⌊s/2⌋/11`. The keeps are
//! inputs of the step, so the drop-path forward is a deterministic function:
//! the block tie and the whole-net tie take them as tie blocks
//! (`d…drop_path` rows); the net certificate's parameter ties hold them
//! fixed at one host draw (`FixedKeeps`), and the rendered AdamW step ties
//! with them as fixed inputs. Negative control: the MLP branch's backward in
//! block 5 without its keep scale (`body.back(dy)` for `body.back(keep⊙dy)`),
//! REFUTED beside its certified twin, both as a tie block and with the keeps
//! fixed.

use crate::common::refuted_in;
use cert::drop_path::{certificate_masks, certify_net_drop_path};
use cert::net::{joint_tie, net_tie_options};
use cert::step::{certify_recipe_step, StepTieOptions};
use cert::{certify_layer, TieOptions};
use den::{eval_func, EvalOptions, Tensor, Value};
use ir::rng::Rng;
use ir::{ElemType, TensorType};
use layers::blocks_vit::{residual, VitBlock, VitBlockSpec};
use layers::droppath::FixedKeeps;
use layers::net::{vit, LayerSpec, NetSpec, VIT_TINY};
use layers::trainstep::{render_step, Optimizer, Recipe, SlotKind, StepOptions};
use layers::{CertLayer, Chain, Emit, Grads, ReplacedBackward, Residual};

/// The narrow ViT-Tiny of `vit_ties`: the paper's depth, heads and tensors
/// at width 12 (d = 4, MLP 48), patch 8.
fn narrow() -> NetSpec {
    vit(&VIT_TINY, 12, 10, (32, 32), 8)
}

fn block_spec(net: &NetSpec, name: &str) -> VitBlockSpec {
    match &net.layers.iter().find(|(n, _)| n == name).unwrap().1 {
        LayerSpec::VitBlock(s) => s.clone(),
        other => panic!("{other:?} is not a ViT block"),
    }
}

#[test]
fn drop_path_sites_are_both_branches_of_each_block_on_the_vit_ramp() {
    let net = narrow();
    let sites = net.drop_path_sites(0.1).unwrap();
    assert_eq!(sites.len(), 24);
    for (s, site) in sites.iter().enumerate() {
        let branch = if s % 2 == 0 { "attn" } else { "mlp" };
        assert_eq!(site.name, format!("blocks.{}.{branch}.drop_path", s / 2));
        // docs/conventions.md §13, written out: 1 − 0.1·⌊s/2⌋/11.
        let want = 1.0 - 0.1 * (s / 2) as f64 / 11.0;
        assert!((site.keep - want).abs() < 1e-15, "site {s}");
    }
    assert_eq!(sites[23].keep, 0.9);
}

#[test]
fn drop_path_block_ties_at_n_1_2_3() {
    let spec = block_spec(&narrow(), "blocks.0");
    let block = spec.build_with(12, true, &mut |_, l| l).unwrap();
    for (n, t) in [(1, 17), (2, 5), (3, 9)] {
        let r = certify_layer(
            &block,
            &TensorType::f32(vec![n, t, 12]),
            &TieOptions::default(),
        );
        assert!(r.certified(), "N={n} T={t}: {:?}", r.verdict);
        for b in ["dattn.drop_path", "dmlp.drop_path"] {
            assert!(r.block_results.iter().any(|r| r.name == b), "{b}");
        }
    }
}

/// The forward of `layer` at `input` in f64 on `args` (x, then its params).
fn forward_f64(layer: &dyn CertLayer, input: &TensorType, args: &[Tensor<f64>]) -> Vec<f64> {
    let module = layers::tie_funcs(layer, input).unwrap().module();
    let vals = args
        .iter()
        .map(|t| Value::Float(t.clone(), ElemType::F32))
        .collect();
    let ev = eval_func::<f64>(&module, "forward", vals, &EvalOptions::default()).unwrap();
    ev.outputs[0].as_float().unwrap().data.clone()
}

fn random(shape: &[i64], rng: &mut Rng) -> Tensor<f64> {
    let shape: Vec<usize> = shape.iter().map(|&d| d as usize).collect();
    let n = shape.iter().product();
    Tensor::new(shape, (0..n).map(|_| 0.5 * rng.normal()).collect())
}

#[test]
fn keeps_fixed_at_one_are_the_plain_loss_and_keeps_fixed_at_zero_skip_every_branch() {
    // Keep 1 on every site is the plain skip (the loss of the plain chain);
    // keep 0 drops every branch, so the loss is the head on the embedding
    // alone (the chain without its 12 blocks). Both are independent
    // forwards evaluated at the same random point.
    let net = narrow();
    let input = net.input_type(2);
    let plain = net.chain_with_loss().unwrap();
    let mut rng = Rng::new(11);
    let x = random(&input.shape, &mut rng);
    let theta: Vec<Tensor<f64>> = plain
        .params(&input)
        .iter()
        .map(|p| random(&p.ty.shape, &mut rng))
        .collect();
    let args: Vec<Tensor<f64>> = std::iter::once(x.clone())
        .chain(theta.iter().cloned())
        .collect();
    let want = forward_f64(&plain, &input, &args);
    let fixed = |k: f32| FixedKeeps {
        chain: net.chain_with_loss_drop_path().unwrap(),
        keeps: vec![vec![k; 2]; 24],
    };
    let ones = forward_f64(&fixed(1.0), &input, &args);
    assert_eq!(ones.len(), 1);
    assert!(
        (ones[0] - want[0]).abs() <= 1e-12 * want[0].abs(),
        "{ones:?} vs {want:?}"
    );
    // The embedding (4 tensors), then the head and the target: no block.
    let mut skip = Chain::new();
    let mut from_plain = plain.layers.into_iter();
    let (pe_name, pe) = from_plain.next().unwrap();
    skip.layers.push((pe_name, pe));
    skip.layers
        .extend(from_plain.filter(|(n, _)| !n.starts_with("blocks.")));
    let np = skip.params(&input).len();
    assert_eq!(np, 4 + 4 + 1, "patch embed, head norm + fc, target");
    let skip_args: Vec<Tensor<f64>> = std::iter::once(x)
        .chain(theta[..4].iter().cloned())
        .chain(theta[theta.len() - 5..].iter().cloned())
        .collect();
    let want0 = forward_f64(&skip, &input, &skip_args);
    let zeros = forward_f64(&fixed(0.0), &input, &args);
    assert!(
        (zeros[0] - want0[0]).abs() <= 1e-12 * want0[0].abs(),
        "{zeros:?} vs {want0:?}"
    );
    assert!(
        (zeros[0] - want[0]).abs() > 1e-6,
        "the branches matter at this point"
    );
}

#[test]
fn net_certificate_of_the_drop_path_render_certifies() {
    let net = narrow();
    let opts = net_tie_options(2);
    let c = certify_net_drop_path(&net, 2, 0.1, &opts).unwrap();
    eprintln!("{} --drop-path 0.1 N=2: {:.2}s", net.name, c.seconds);
    assert!(c.whole.certified(), "{:?}", c.whole.verdict);
    assert!(c.params.certified(), "{:?}", c.params.verdict);
    assert_eq!(c.whole.blocks, 1 + 200 + 24, "dx, θ, the 24 keeps");
    assert_eq!(
        c.params.blocks,
        1 + 200 + 1,
        "dx, θ, the target: keeps fixed"
    );
    assert!(c.params.site_margins.is_empty());
    // The masks it fixed: 0 or 1/keep per example, on the ramp.
    let masks = certificate_masks(&net, 2, 0.1, opts.seed).unwrap();
    let sites = net.drop_path_sites(0.1).unwrap();
    for (m, s) in masks.iter().zip(&sites) {
        assert!(
            m.iter().all(|&k| k == 0.0 || k == (1.0 / s.keep) as f32),
            "{m:?}"
        );
    }
    // A net without drop-path sites is refused, naming the flag.
    let resnet = layers::net::by_name("resnet34-k10-32x32").unwrap();
    let e = certify_net_drop_path(&resnet, 2, 0.1, &opts).err().unwrap();
    assert!(e.0.contains("--drop-path"), "{e}");
}

/// Block 5 of `net` with drop path, assembled from its two branches; the MLP
/// residual's backward is the real one (`forget = false`) or forgets the
/// keep scale on the branch's cotangent.
fn block5(net: &NetSpec, forget: bool) -> VitBlock {
    let spec = block_spec(net, "blocks.5");
    let (attn, mlp) = spec.branches(12, &mut |_, l| l).unwrap();
    let real = Residual::with_drop_path(Box::new(mlp));
    let mlp: Box<dyn CertLayer> = if forget {
        Box::new(ReplacedBackward::new(
            real,
            "keep missing in the backward",
            |r, fb, x, p, s, dy| {
                let right = r.backward(fb, x, p, s, dy)?;
                let (_, body_params) = p.split_last().unwrap();
                let g = r.body.backward(fb, x, body_params, &s.children[0], dy)?;
                let dx = fb.add(g.dx, dy)?;
                let mut dparams = g.dparams;
                dparams.push(*right.dparams.last().unwrap());
                Ok(Grads { dx, dparams })
            },
        ))
    } else {
        Box::new(real)
    };
    VitBlock {
        label: format!("blocks.5 (forget keep: {forget})"),
        body: Box::new(Chain {
            layers: vec![("attn".into(), residual(attn, true)), ("mlp".into(), mlp)],
        }),
    }
}

fn with_block5(net: &NetSpec, chain: &mut Chain, forget: bool) {
    let i = net
        .layers
        .iter()
        .position(|(n, _)| n == "blocks.5")
        .unwrap();
    chain.layers[i].1 = Box::new(block5(net, forget));
}

#[test]
fn control_mlp_branch_backward_without_the_keep_is_refuted() {
    let net = narrow();
    let input = net.input_type(2);
    let upstream = [
        "dx",
        "dpatch_embed.",
        "dblocks.0.",
        "dblocks.1.",
        "dblocks.2.",
        "dblocks.3.",
        "dblocks.4.",
        "dblocks.5.",
    ];
    // The keeps as tie blocks (the logits tie of the certificate).
    for forget in [false, true] {
        let mut chain = net.chain_with_drop_path().unwrap();
        with_block5(&net, &mut chain, forget);
        let r = joint_tie(&chain, &input, &net_tie_options(1));
        if forget {
            let block = refuted_in(&r.verdict, "keep missing (keeps as tie blocks)");
            assert!(upstream.iter().any(|b| block.starts_with(b)), "{block}");
        } else {
            assert!(r.certified(), "twin: {:?}", r.verdict);
        }
    }
    // The keeps fixed at the certificate's draw (the parameter ties), with
    // block 5's MLP keep 1/keep on both examples so the bug is live.
    let mut masks = certificate_masks(&net, 2, 0.1, 1).unwrap();
    masks[11] = vec![(1.0 / (1.0 - 0.5 / 11.0)) as f32; 2];
    for forget in [false, true] {
        let mut chain = net.chain_with_loss_drop_path().unwrap();
        with_block5(&net, &mut chain, forget);
        let fixed = FixedKeeps {
            chain,
            keeps: masks.clone(),
        };
        let r = joint_tie(&fixed, &input, &net_tie_options(1));
        if forget {
            let block = refuted_in(&r.verdict, "keep missing (keeps fixed)");
            assert!(upstream.iter().any(|b| block.starts_with(b)), "{block}");
        } else {
            assert!(r.certified(), "twin: {:?}", r.verdict);
        }
    }
}

#[test]
fn drop_path_adamw_step_ties_with_the_masks_as_fixed_inputs() {
    let net = narrow();
    let plain = render_step(&net, 2, &StepOptions::new(Optimizer::AdamW)).unwrap();
    let so = StepOptions {
        recipe: Recipe {
            drop_path: Some(0.1),
            ..Recipe::default()
        },
        ..StepOptions::new(Optimizer::AdamW)
    };
    let r = render_step(&net, 2, &so).unwrap();
    let dp = r.signature.input_positions(SlotKind::DropPath);
    assert_eq!(dp.len(), 24);
    assert!(dp.iter().all(|&i| r.signature.inputs[i].ty.shape == [2]));
    assert_eq!(r.signature.inputs[dp[23]].name, "dp23");
    // The plain step's outputs, then the keeps returned unchanged.
    let mut outputs = plain.signature.outputs.clone();
    outputs.extend(dp.iter().map(|&i| r.signature.inputs[i].clone()));
    assert_eq!(r.signature.outputs, outputs);
    let t = certify_recipe_step(&net, 2, &so, &r.module, &StepTieOptions::default());
    eprintln!("{} drop-path AdamW step: {:.1}s", net.name, t.seconds);
    assert!(t.certified(), "{:?}", t.verdict);
    assert_eq!(t.blocks.len(), 200);
}
