//! Whole-net ties of declared nets (the cifar8 batch-BN net and the example
//! net file), the parameter ties of their loss chains, the train/eval drift
//! guard, and the negative controls that inject shape-preserving bugs inside a
//! net: a BN backward in the wrong world, a backward run at the wrong
//! activation, a pool that drifted between train and eval.

use cert::net::{check_eval_drift, forward_segments};
use cert::{certify_layer, certify_net, net_tie_options, Verdict};
use ir::{FuncBuilder, TensorType, ValueId};
use layers::emit::EmitResult;
use layers::net::{by_name, BatchNormSpec, LayerSpec, MaxPoolSpec, NetSpec};
use layers::ops::norm::{BatchNorm, BnWorld};
use layers::{CertLayer, Chain, Grads, LayerError, ParamSpec, Saved, Sites};

/// The example net file: 3×8×8, two conv stages with true batch BN, a 2×2
/// and a 3×3/s2 pool, a dense head. Small enough for N = 1, 2, 3 in tests.
fn tiny() -> NetSpec {
    let path =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/nets/tiny.toml");
    NetSpec::load(&path).unwrap()
}

fn position(chain: &Chain, name: &str) -> usize {
    chain
        .layers
        .iter()
        .position(|(n, _)| n == name)
        .unwrap_or_else(|| panic!("no layer {name}"))
}

fn refuted_block(v: &Verdict) -> String {
    match v {
        Verdict::Refuted { block, detail } => {
            eprintln!("refuted {block}: {detail}");
            block.clone()
        }
        v => panic!("expected a refutation, got {v:?}"),
    }
}

#[test]
fn cifar8_bbn_whole_net_and_every_parameter_gradient_are_certified_at_n1() {
    let net = by_name("cifar8-bbn").unwrap();
    let c = certify_net(&net, 1, &net_tie_options(0)).unwrap();
    assert!(c.whole.certified(), "{:?}", c.whole.verdict);
    assert!(c.params.certified(), "{:?}", c.params.verdict);
    // dx, 38 parameters, and the loss's target.
    assert_eq!(c.whole.blocks, 39);
    assert_eq!(c.params.blocks, 40);
    let names: Vec<&str> = c
        .params
        .block_results
        .iter()
        .map(|b| b.name.as_str())
        .collect();
    assert_eq!(names[0], "dx");
    assert!(names.contains(&"dstage2.conv1.W"));
    assert!(names.contains(&"dstage4.bn2.beta"));
    assert_eq!(names[39], "dloss.target");
    for b in &c.params.block_results {
        assert_eq!(b.probes, 1, "{}", b.name);
        assert!(
            b.max_rel_discrepancy < 1e-12,
            "{}: {}",
            b.name,
            b.max_rel_discrepancy
        );
    }
    // Every kink site, by its activation name, with a positive margin: 8 conv
    // ReLUs, 4 pools, 2 head ReLUs.
    let sites: Vec<&str> = c
        .params
        .site_margins
        .iter()
        .map(|s| s.site.as_str())
        .collect();
    assert_eq!(sites.len(), 14, "{sites:?}");
    assert!(sites.contains(&"stage2.conv1.relu.pre_relu"));
    assert!(sites.contains(&"stage3.pool.pool"));
    assert!(sites.contains(&"dense2.relu.pre_relu"));
    let pool = c
        .params
        .site_margins
        .iter()
        .find(|s| s.site == "stage3.pool.pool");
    // 32 channels × 4×4 windows at N = 1.
    assert_eq!(pool.unwrap().decisions, 512);
    assert!(c.params.site_margins.iter().all(|s| s.min > 0.0));
}

#[test]
fn the_declared_net_is_certified_at_batch_1_2_3() {
    let net = tiny();
    for n in 1..=3 {
        let c = certify_net(&net, n, &net_tie_options(n as u64)).unwrap();
        assert!(c.whole.certified(), "N={n}: {:?}", c.whole.verdict);
        assert!(c.params.certified(), "N={n}: {:?}", c.params.verdict);
        assert_eq!(c.whole.blocks, 13);
        assert_eq!(c.params.blocks, 14);
        let sites: Vec<&str> = c
            .whole
            .site_margins
            .iter()
            .map(|s| s.site.as_str())
            .collect();
        assert_eq!(
            sites,
            [
                "stage1.pool.pool",
                "stage1.relu.pre_relu",
                "stage2.pool.pool",
                "stage2.relu.pre_relu",
                "dense1.relu.pre_relu"
            ],
            "N={n}"
        );
    }
}

/// A batch norm whose forward is in one world and whose backward is the
/// backward of another: the train-step/eval split of docs/conventions.md §20 moved
/// inside one layer.
struct BnWorldSwap {
    forward: BatchNorm,
    backward_world: BnWorld,
}

impl CertLayer for BnWorldSwap {
    fn name(&self) -> String {
        format!(
            "{} (backward {:?})",
            self.forward.name(),
            self.backward_world
        )
    }
    fn output_type(&self, input: &TensorType) -> Result<TensorType, LayerError> {
        self.forward.output_type(input)
    }
    fn params(&self, input: &TensorType) -> Vec<ParamSpec> {
        self.forward.params(input)
    }
    fn forward(
        &self,
        fb: &mut FuncBuilder,
        x: ValueId,
        p: &[ValueId],
        s: &mut Sites,
    ) -> EmitResult<Saved> {
        self.forward.forward(fb, x, p, s)
    }
    fn backward(
        &self,
        fb: &mut FuncBuilder,
        x: ValueId,
        p: &[ValueId],
        saved: &Saved,
        dy: ValueId,
    ) -> EmitResult<Grads> {
        let other = BatchNorm {
            world: self.backward_world,
            ..self.forward.clone()
        };
        other.backward(fb, x, p, saved, dy)
    }
}

fn with_bn_swapped(mut chain: Chain, at: &str) -> Chain {
    let i = position(&chain, at);
    let LayerSpec::BatchNorm(BatchNormSpec { eps, .. }) = tiny().layers[i].1 else {
        panic!("{at} is not a batch norm");
    };
    let ch = if at.starts_with("stage1") { 4 } else { 8 };
    chain.layers[i].1 = Box::new(BnWorldSwap {
        forward: BatchNorm {
            ch,
            world: BnWorld::Batch,
            eps,
        },
        backward_world: BnWorld::PerExample,
    });
    chain
}

#[test]
fn a_per_example_bn_backward_under_a_batch_bn_forward_is_refuted() {
    let net = tiny();
    for n in [2, 3] {
        let chain = with_bn_swapped(net.chain().unwrap(), "stage2.bn");
        let r = certify_layer(&chain, &net.input_type(n), &net_tie_options(7));
        let block = refuted_block(&r.verdict);
        // The wrong VJP reaches every block upstream of stage2.bn; the input
        // block is checked first.
        assert_eq!(block, "dx", "N={n}");
        // The parameter ties catch it too.
        let mut with_loss = net.chain_with_loss().unwrap();
        let i = position(&with_loss, "stage1.bn");
        let swapped = with_bn_swapped(net.chain().unwrap(), "stage1.bn");
        with_loss.layers[i] = swapped.layers.into_iter().nth(i).unwrap();
        let r = certify_layer(&with_loss, &net.input_type(n), &net_tie_options(7));
        refuted_block(&r.verdict);
    }
    // Discrimination: at N = 1 the batch and the per-example statistics are
    // the same function, so the swap is no bug there and the tie must hold.
    let chain = with_bn_swapped(net.chain().unwrap(), "stage2.bn");
    let r = certify_layer(&chain, &net.input_type(1), &net_tie_options(7));
    assert!(r.certified(), "{:?}", r.verdict);
}

/// A chain that runs the backward of layer `at` at that layer's OUTPUT instead
/// of its input (docs/conventions.md §14: typechecks for endomorphic layers, and is
/// wrong).
struct WrongActivation {
    chain: Chain,
    at: usize,
}

impl CertLayer for WrongActivation {
    fn name(&self) -> String {
        format!("{} (backward {} at its output)", self.chain.name(), self.at)
    }
    fn output_type(&self, input: &TensorType) -> Result<TensorType, LayerError> {
        self.chain.output_type(input)
    }
    fn params(&self, input: &TensorType) -> Vec<ParamSpec> {
        self.chain.params(input)
    }
    fn forward(
        &self,
        fb: &mut FuncBuilder,
        x: ValueId,
        p: &[ValueId],
        s: &mut Sites,
    ) -> EmitResult<Saved> {
        self.chain.forward(fb, x, p, s)
    }
    fn backward(
        &self,
        fb: &mut FuncBuilder,
        x: ValueId,
        params: &[ValueId],
        saved: &Saved,
        dy: ValueId,
    ) -> EmitResult<Grads> {
        let tys = self.chain.types(fb.ty(x)).map_err(|e| ir::TypeError {
            op: "chain",
            message: e.0,
        })?;
        let mut split = Vec::new();
        let mut at = 0;
        for ((_, l), ty) in self.chain.layers.iter().zip(&tys) {
            let n = l.params(ty).len();
            split.push(&params[at..at + n]);
            at += n;
        }
        let mut inputs: Vec<ValueId> = std::iter::once(x)
            .chain(saved.children.iter().map(Saved::output))
            .collect();
        inputs[self.at] = saved.children[self.at].output();
        let mut e = dy;
        let mut grads = vec![Vec::new(); self.chain.layers.len()];
        for i in (0..self.chain.layers.len()).rev() {
            let g =
                self.chain.layers[i]
                    .1
                    .backward(fb, inputs[i], split[i], &saved.children[i], e)?;
            e = g.dx;
            grads[i] = g.dparams;
        }
        Ok(Grads {
            dx: e,
            dparams: grads.concat(),
        })
    }
}

#[test]
fn a_backward_at_the_wrong_activation_is_refuted() {
    let net = tiny();
    let chain = net.chain().unwrap();
    let at = position(&chain, "stage2.bn");
    let wrong = WrongActivation { chain, at };
    let r = certify_layer(&wrong, &net.input_type(2), &net_tie_options(3));
    let block = refuted_block(&r.verdict);
    assert_eq!(block, "dx");
    // The same construction at the correct activation is the chain itself:
    // the control's harness is sound.
    let right = net.chain().unwrap();
    let r = certify_layer(&right, &net.input_type(2), &net_tie_options(3));
    assert!(r.certified(), "{:?}", r.verdict);
}

#[test]
fn the_eval_forward_differs_from_the_train_forward_only_in_batch_norms() {
    for (net, n) in [(tiny(), 3), (by_name("cifar8-bbn").unwrap(), 2)] {
        let eval = net.with_every_bn_in(BnWorld::Eval);
        let r = check_eval_drift(&net, &eval, n).unwrap();
        let bn = net
            .layers
            .iter()
            .filter(|(_, l)| matches!(l, LayerSpec::BatchNorm(..)))
            .count();
        assert_eq!(r.bn_layers, bn, "{}", net.name);
        assert_eq!(r.identical_layers, net.layers.len() - bn, "{}", net.name);
        assert!(r.ops_compared > 0);
    }
}

#[test]
fn the_forward_fold_segments_the_chains_emitted_forward() {
    let net = tiny();
    let s = forward_segments(&net, 2).unwrap();
    assert_eq!(s.segments.len(), net.layers.len());
    // Segments tile the body up to the return.
    assert_eq!(s.segments[0].1, 0);
    for w in s.segments.windows(2) {
        assert_eq!(w[0].2, w[1].1);
    }
    assert_eq!(s.segments.last().unwrap().2, s.func.body.ops.len() - 1);
    let pool = s.segments.iter().find(|x| x.0 == "stage2.pool").unwrap();
    assert_eq!(
        s.func.body.ops[pool.1..pool.2]
            .iter()
            .filter(|o| o.kind.name() == "stablehlo.reduce_window")
            .count(),
        1
    );
}

/// The eval net with one layer replaced (a drifted eval forward).
fn drifted(net: &NetSpec, layer: &str, spec: LayerSpec) -> NetSpec {
    let mut eval = net.with_every_bn_in(BnWorld::Eval);
    let i = eval.layers.iter().position(|(n, _)| n == layer).unwrap();
    eval.layers[i].1 = spec;
    eval
}

#[test]
fn a_pool_that_drifted_between_train_and_eval_is_caught() {
    // 2×2/s2 and 3×3/s2 pad 1 give the same shape on even inputs
    // (docs/conventions.md §20): no type, arity or parameter audit sees the swap.
    let pool3 = LayerSpec::MaxPool(MaxPoolSpec {
        window: 3,
        stride: 2,
        pad: 1,
    });
    for (net, layer) in [
        (tiny(), "stage1.pool"),
        (by_name("cifar8-bbn").unwrap(), "stage4.pool"),
    ] {
        let eval = drifted(&net, layer, pool3.clone());
        assert_eq!(
            net.with_every_bn_in(BnWorld::Eval)
                .chain()
                .unwrap()
                .output_type(&net.input_type(2)),
            eval.chain().unwrap().output_type(&net.input_type(2))
        );
        assert_eq!(
            net.with_every_bn_in(BnWorld::Eval).param_count(),
            eval.param_count()
        );
        let e = check_eval_drift(&net, &eval, 2).unwrap_err();
        eprintln!("{e}");
        assert!(e.0.contains(layer) && e.0.contains("reduce_window"), "{e}");
    }
}

#[test]
fn a_batch_norm_left_in_another_world_is_caught() {
    let net = tiny();
    for world in [BnWorld::PerExample, BnWorld::Batch] {
        let eval = drifted(
            &net,
            "stage2.bn",
            LayerSpec::BatchNorm(BatchNormSpec { world, eps: 1e-5 }),
        );
        let e = check_eval_drift(&net, &eval, 2).unwrap_err();
        assert!(e.0.contains("stage2.bn"), "{e}");
    }
    // The train net compared with itself: no eval switch happened.
    let e = check_eval_drift(&net, &net, 2).unwrap_err();
    assert!(e.0.contains("stage1.bn"), "{e}");
}
