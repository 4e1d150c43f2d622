//! The rendered train step and eval forward of a NetSpec (REFERENCE §6): one
//! StableHLO function `x, θ…, m…, v…, lr, bc1, bc2, [running stats], onehot →
//! θ', m', v', loss, bc1, bc2, [batch stats]` whose forward is the NetSpec's
//! `chain_with_loss()` forward, whose gradient is that chain's backward map at
//! dy = 1, followed by the optimizer tail; and the eval forward `x, θ…,
//! running stats → logits` from the same NetSpec in the Eval BN world. No layer
//! logic lives here: the module only wires the CertLayers' emissions together,
//! plus two whole-function passes (dead-op pruning, bf16 operands for
//! conv/dot). The data-parallel step (§6.4: R replicas, one `all_reduce` sum
//! per parameter gradient, then ÷R, before the optimizer tail) is the same
//! render with those two ops inserted. It also owns the drift guard that
//! compares forwards layer by layer.

use crate::emit::Emit;
use crate::layer::{CertLayer, LayerError, Saved, Sites};
use crate::net::{BnSite, LayerSpec, NetSpec};
use crate::ops::norm::{BatchNorm, BnWorld};
use ir::{
    ElemType, Func, FuncBuilder, Module, Op, OpKind, SrcLoc, TensorType, ValueId, Visibility,
};
use std::collections::{HashMap, HashSet};

/// Nesterov momentum μ (cifar8 "mom"): velocity in the v slot.
pub const NESTEROV_MU: f64 = 0.9;
/// AdamW β1.
pub const ADAM_BETA1: f64 = 0.9;
/// AdamW β2.
pub const ADAM_BETA2: f64 = 0.999;
/// AdamW ε (outside the square root).
pub const ADAM_EPS: f64 = 1e-8;
/// AdamW decoupled weight decay, applied to the OLD θ.
pub const ADAMW_WEIGHT_DECAY: f64 = 1e-4;
/// Heavy-ball momentum μ (the R34/R50 ImageNet "mom"): velocity in the v slot.
pub const HEAVY_BALL_MU: f64 = 0.9;
/// Heavy-ball coupled L2 weight decay, added to the gradient before the velocity.
pub const HEAVY_BALL_WEIGHT_DECAY: f64 = 1e-4;

/// The optimizer tail after the gradient (REFERENCE §6.3).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Optimizer {
    /// `θ' = θ − lr·g`; m, v passed through.
    Sgd,
    /// `v' = μ·v + g`, `θ' = θ − lr·(g + μ·v')`; m passed through.
    Nesterov,
    /// `m' = β1·m + (1−β1)·g`, `v' = β2·v + (1−β2)·g²`,
    /// `θ' = θ − lr·(m'/bc1)/(√(v'/bc2) + ε) − lr·wd·θ`.
    AdamW,
    /// Heavy-ball with coupled L2 (the ImageNet recipe, wd 1e-4, μ 0.9):
    /// `g ← wd·θ + g`, `v' = μ·v + g`, `θ' = θ − lr·v'`; m passed through.
    HeavyBall,
}

impl Optimizer {
    pub const ALL: [Optimizer; 4] = [
        Optimizer::Sgd,
        Optimizer::Nesterov,
        Optimizer::AdamW,
        Optimizer::HeavyBall,
    ];

    /// The CLI name: `sgd`, `nesterov`, `adamw`, `momentum` (heavy-ball).
    pub fn name(self) -> &'static str {
        match self {
            Optimizer::Sgd => "sgd",
            Optimizer::Nesterov => "nesterov",
            Optimizer::AdamW => "adamw",
            Optimizer::HeavyBall => "momentum",
        }
    }

    /// Every CLI name, for messages: `sgd, nesterov, adamw, momentum`.
    pub fn names() -> String {
        Self::ALL.map(|o| o.name()).join(", ")
    }

    pub fn parse(s: &str) -> Option<Optimizer> {
        Self::ALL.into_iter().find(|o| o.name() == s)
    }

    /// The variant marker in the function name (`sgd`, `mom`, `adam`,
    /// `hbmom`). The reference marks both momentum tails `mom`; here
    /// heavy-ball gets its own marker so a Nesterov render can never be taken
    /// for a heavy-ball one (same signature, different function).
    pub fn variant(self) -> &'static str {
        match self {
            Optimizer::Sgd => "sgd",
            Optimizer::Nesterov => "mom",
            Optimizer::AdamW => "adam",
            Optimizer::HeavyBall => "hbmom",
        }
    }
}

/// How a train step is rendered.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct StepOptions {
    pub optimizer: Optimizer,
    /// bf16 operands for convolution and dot_general (REFERENCE §6.5).
    pub bf16: bool,
    /// Data-parallel replicas R (REFERENCE §6.4). With R > 1 the batch of the
    /// signature is the per-replica batch; each parameter gradient is summed
    /// over the replicas by one `stablehlo.all_reduce` and divided by R before
    /// the optimizer tail. Everything else is per replica: batch-norm
    /// statistics (and the batch mean/var outputs) are the replica's own, and
    /// the `loss` output is the replica's own mean loss over its B examples
    /// (the host averages the R losses to report the global one).
    pub replicas: usize,
}

impl StepOptions {
    /// A single-device f32 step with `optimizer`.
    pub fn new(optimizer: Optimizer) -> Self {
        StepOptions {
            optimizer,
            bf16: false,
            replicas: 1,
        }
    }
}

/// What a signature slot carries.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SlotKind {
    /// `x [B, C·H·W]`.
    Images,
    Param,
    M,
    V,
    Lr,
    Bc1,
    Bc2,
    RunningMean,
    RunningVar,
    OneHot,
    Loss,
    BatchMean,
    BatchVar,
    Logits,
}

/// One argument or result of a rendered function.
#[derive(Clone, Debug, PartialEq)]
pub struct Slot {
    /// `x`, `stage1.conv1.W`, `stage1.conv1.W.m`, `lr`, `stage1.bn1.running_mean`, …
    pub name: String,
    pub kind: SlotKind,
    pub ty: TensorType,
}

/// The signature of a train step (§6.1), derived from the NetSpec alone; the
/// renderer and the train-step tie both read slot positions from here.
#[derive(Clone, Debug, PartialEq)]
pub struct StepSignature {
    pub func: String,
    pub inputs: Vec<Slot>,
    pub outputs: Vec<Slot>,
}

impl StepSignature {
    /// Positions of the slots of `kind` among the inputs.
    pub fn input_positions(&self, kind: SlotKind) -> Vec<usize> {
        positions(&self.inputs, kind)
    }
    /// Positions of the slots of `kind` among the outputs.
    pub fn output_positions(&self, kind: SlotKind) -> Vec<usize> {
        positions(&self.outputs, kind)
    }
}

fn positions(slots: &[Slot], kind: SlotKind) -> Vec<usize> {
    slots
        .iter()
        .enumerate()
        .filter(|(_, s)| s.kind == kind)
        .map(|(i, _)| i)
        .collect()
}

/// The MLIR symbol of a net: `cifar8-bbn` → `cifar8_bbn`.
pub fn slug(net: &NetSpec) -> String {
    net.name
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '_' })
        .collect()
}

/// The true-batch norms of `net` (top level and inside blocks), in parameter
/// order: the ones with running-stat inputs and batch-stat outputs. The one
/// walker every signature and render reads (a per-example batch norm is the
/// same function at train and eval and has no slots).
pub fn batch_bn_sites(net: &NetSpec) -> Result<Vec<BnSite>, LayerError> {
    Ok(net
        .bn_sites()?
        .into_iter()
        .filter(|s| s.world == BnWorld::Batch)
        .collect())
}

/// The packed train-step signature of `net` at batch `batch` (§6.1).
pub fn step_signature(
    net: &NetSpec,
    batch: i64,
    opt: Optimizer,
) -> Result<StepSignature, LayerError> {
    step_signature_with(net, batch, &StepOptions::new(opt))
}

/// The packed signature of the step `opts` describes, at per-replica batch
/// `batch`: the slots do not depend on R; the function name carries the
/// reference's `dp{B}x{R}` marker when R > 1 (`cifar8_adamdp32x2_train_step`).
pub fn step_signature_with(
    net: &NetSpec,
    batch: i64,
    opts: &StepOptions,
) -> Result<StepSignature, LayerError> {
    let opt = opts.optimizer;
    if opts.replicas == 0 {
        return Err(LayerError(format!(
            "{}: a data-parallel step needs at least 1 replica",
            net.name
        )));
    }
    let (c, h, w) = net.input;
    let params = net.param_specs()?;
    let bns = batch_bn_sites(net)?;
    let scalar = TensorType::f32(Vec::<i64>::new());
    let slot = |name: String, kind, ty: TensorType| Slot { name, kind, ty };
    let mut inputs = vec![slot(
        "x".into(),
        SlotKind::Images,
        TensorType::f32(vec![batch, c * h * w]),
    )];
    let mut outputs = Vec::new();
    for (kind, suffix) in [
        (SlotKind::Param, ""),
        (SlotKind::M, ".m"),
        (SlotKind::V, ".v"),
    ] {
        for p in &params {
            let s = slot(format!("{}{suffix}", p.name), kind, p.ty.clone());
            inputs.push(s.clone());
            outputs.push(s);
        }
    }
    inputs.push(slot("lr".into(), SlotKind::Lr, scalar.clone()));
    outputs.push(slot("loss".into(), SlotKind::Loss, scalar.clone()));
    for (name, kind) in [("bc1", SlotKind::Bc1), ("bc2", SlotKind::Bc2)] {
        inputs.push(slot(name.into(), kind, scalar.clone()));
        outputs.push(slot(name.into(), kind, scalar.clone()));
    }
    for BnSite { name, ch, .. } in &bns {
        let ty = TensorType::f32(vec![*ch]);
        inputs.push(slot(
            format!("{name}.running_mean"),
            SlotKind::RunningMean,
            ty.clone(),
        ));
        inputs.push(slot(
            format!("{name}.running_var"),
            SlotKind::RunningVar,
            ty.clone(),
        ));
        outputs.push(slot(
            format!("{name}.batch_mean"),
            SlotKind::BatchMean,
            ty.clone(),
        ));
        outputs.push(slot(format!("{name}.batch_var"), SlotKind::BatchVar, ty));
    }
    inputs.push(slot(
        "onehot".into(),
        SlotKind::OneHot,
        TensorType::f32(vec![batch, net.classes]),
    ));
    let dp = if opts.replicas > 1 {
        format!("dp{batch}x{}", opts.replicas)
    } else {
        String::new()
    };
    Ok(StepSignature {
        func: format!("{}_{}{dp}_train_step", slug(net), opt.variant()),
        inputs,
        outputs,
    })
}

/// One layer of a rendered forward: where its ops sit and what they read.
#[derive(Clone, Debug, PartialEq)]
pub struct LayerSpan {
    pub name: String,
    pub spec: Option<LayerSpec>,
    /// The layer's input value and its parameter values (function arguments).
    pub input: ValueId,
    pub params: Vec<ValueId>,
    /// Body op indices `[start, end)` the layer's forward emitted.
    pub ops: (usize, usize),
}

/// A rendered function and how it was put together.
#[derive(Clone, Debug)]
pub struct Rendered {
    pub module: Module,
    pub signature: StepSignature,
    /// The forward's layers in order (the loss layer last in a train step).
    pub layers: Vec<LayerSpan>,
    /// The number of leading body ops that are the forward.
    pub forward_ops: usize,
}

impl Rendered {
    pub fn func(&self) -> &Func {
        self.module
            .func(&self.signature.func)
            .expect("rendered function")
    }
}

/// Renders the train step of `net` at batch `batch` with optimizer `opt`; with
/// `bf16`, every convolution and dot_general takes bf16 operands (converted
/// from f32) and accumulates into an f32 result, while master weights,
/// optimizer state and every other op stay f32 (REFERENCE §6.5).
pub fn render_train_step(
    net: &NetSpec,
    batch: i64,
    opt: Optimizer,
    bf16: bool,
) -> Result<Module, LayerError> {
    Ok(render_train_step_parts(net, batch, opt, bf16)?.module)
}

/// [`render_train_step`], with the signature and the forward's layer spans.
pub fn render_train_step_parts(
    net: &NetSpec,
    batch: i64,
    opt: Optimizer,
    bf16: bool,
) -> Result<Rendered, LayerError> {
    let opts = StepOptions {
        bf16,
        ..StepOptions::new(opt)
    };
    render_train_step_parts_with(net, batch, &opts)
}

/// The train step `opts` describes at per-replica batch `batch` (with one
/// replica, [`render_train_step`]).
pub fn render_train_step_with(
    net: &NetSpec,
    batch: i64,
    opts: &StepOptions,
) -> Result<Module, LayerError> {
    Ok(render_train_step_parts_with(net, batch, opts)?.module)
}

/// [`render_train_step_with`], with the signature and the forward's layer spans.
pub fn render_train_step_parts_with(
    net: &NetSpec,
    batch: i64,
    opts: &StepOptions,
) -> Result<Rendered, LayerError> {
    let (opt, bf16, replicas) = (opts.optimizer, opts.bf16, opts.replicas);
    let sig = step_signature_with(net, batch, opts)?;
    let chain = net.chain_with_loss()?;
    let x4_ty = net.input_type(batch);
    let n_theta = net.param_specs()?.len();

    let mut fb = FuncBuilder::new(sig.func.clone(), Visibility::Public);
    let args: Vec<ValueId> = sig.inputs.iter().map(|s| fb.param(s.ty.clone())).collect();
    let at = |kind| -> Vec<ValueId> {
        sig.input_positions(kind)
            .into_iter()
            .map(|i| args[i])
            .collect()
    };
    let (theta, m, v) = (at(SlotKind::Param), at(SlotKind::M), at(SlotKind::V));
    let (lr, bc1, bc2) = (
        at(SlotKind::Lr)[0],
        at(SlotKind::Bc1)[0],
        at(SlotKind::Bc2)[0],
    );
    let onehot = at(SlotKind::OneHot)[0];

    let x4 = fb.reshape(args[0], &x4_ty.shape)?;
    // The loss layer's `target` parameter is the one-hot input.
    let mut chain_params = theta.clone();
    chain_params.push(onehot);
    let saved = chain.forward(&mut fb, x4, &chain_params, &mut Sites::default())?;
    let loss = saved.output();
    let dloss = fb.splat(1.0, TensorType::f32(Vec::<i64>::new()));
    let grads = chain.backward(&mut fb, x4, &chain_params, &saved, dloss)?;
    if grads.dparams.len() != n_theta + 1 {
        return Err(LayerError(format!(
            "{}: the backward returned {} gradients for {} parameters and the target",
            net.name,
            grads.dparams.len(),
            n_theta
        )));
    }

    let mut new_theta = Vec::new();
    let mut new_m = Vec::new();
    let mut new_v = Vec::new();
    for i in 0..n_theta {
        let g = if replicas > 1 {
            replica_mean(&mut fb, grads.dparams[i], replicas)?
        } else {
            grads.dparams[i]
        };
        let (t, mm, vv) = tail(&mut fb, opt, theta[i], m[i], v[i], g, lr, bc1, bc2)?;
        new_theta.push(t);
        new_m.push(mm);
        new_v.push(vv);
    }
    let mut outs: Vec<ValueId> = [new_theta, new_m, new_v].concat();
    outs.extend([loss, bc1, bc2]);
    for site in batch_bn_sites(net)? {
        let (mean, var) = site
            .stats(&saved)
            .ok_or_else(|| LayerError(format!("{}: batch norm saved no statistics", site.name)))?;
        outs.extend([mean, var]);
    }
    let func = fb.finish(&outs)?;

    let mut layer_params = split_params(&chain, &x4_ty, &chain_params)?;
    let spans = spans(
        &func,
        net,
        x4,
        &saved,
        chain.layers.iter().map(|(n, _)| n.clone()),
        &mut layer_params,
    );
    let mut r = finish_render(func, sig, spans, loss, bf16)?;
    if replicas > 1 {
        // What JAX writes for a replicated program; XLA and IREE read the
        // replica count from their own options, this records it in the text.
        r.module.attrs = Some(format!(
            "mhlo.num_partitions = 1 : i32, mhlo.num_replicas = {replicas} : i32"
        ));
    }
    Ok(r)
}

/// The replica mean of a gradient: `all_reduce` (sum over the one replica
/// group `[[0, …, R−1]]`, cross-replica: no channel handle), then ÷R.
fn replica_mean(fb: &mut FuncBuilder, g: ValueId, replicas: usize) -> Result<ValueId, LayerError> {
    let elem = fb.ty(g).elem;
    let sum = fb.binary_region(ir::BinaryOp::Add, elem)?;
    let summed = fb.push(
        OpKind::AllReduce {
            replica_groups: vec![(0..replicas as i64).collect()],
            channel_id: None,
            use_global_device_ids: false,
        },
        &[g],
        vec![sum],
        None,
    )?[0];
    let r = fb.splat_like(replicas as f64, summed);
    Ok(fb.div(summed, r)?)
}

/// The optimizer tail for one parameter: `(θ', m', v')`. The formulas follow
/// REFERENCE §6.3 literally, operation by operation, so a host replaying them
/// in the same order gets the same bits.
#[allow(clippy::too_many_arguments)]
fn tail(
    fb: &mut FuncBuilder,
    opt: Optimizer,
    theta: ValueId,
    m: ValueId,
    v: ValueId,
    g: ValueId,
    lr: ValueId,
    bc1: ValueId,
    bc2: ValueId,
) -> Result<(ValueId, ValueId, ValueId), LayerError> {
    let shape = fb.shape(theta);
    let lr_b = fb.bcast(lr, &[], &shape)?;
    Ok(match opt {
        Optimizer::Sgd => {
            let step = fb.mul(lr_b, g)?;
            (fb.sub(theta, step)?, m, v)
        }
        Optimizer::Nesterov => {
            let mu = fb.splat_like(NESTEROV_MU, theta);
            let mv = fb.mul(mu, v)?;
            let v_new = fb.add(mv, g)?;
            let mu = fb.splat_like(NESTEROV_MU, theta);
            let look = fb.mul(mu, v_new)?;
            let dir = fb.add(g, look)?;
            let step = fb.mul(lr_b, dir)?;
            (fb.sub(theta, step)?, m, v_new)
        }
        Optimizer::AdamW => {
            let b1 = fb.splat_like(ADAM_BETA1, theta);
            let ob1 = fb.splat_like(1.0 - ADAM_BETA1, theta);
            let b2 = fb.splat_like(ADAM_BETA2, theta);
            let ob2 = fb.splat_like(1.0 - ADAM_BETA2, theta);
            let t1 = fb.mul(b1, m)?;
            let t2 = fb.mul(ob1, g)?;
            let m_new = fb.add(t1, t2)?;
            let gg = fb.mul(g, g)?;
            let t3 = fb.mul(b2, v)?;
            let t4 = fb.mul(ob2, gg)?;
            let v_new = fb.add(t3, t4)?;
            let bc1_b = fb.bcast(bc1, &[], &shape)?;
            let bc2_b = fb.bcast(bc2, &[], &shape)?;
            let m_hat = fb.div(m_new, bc1_b)?;
            let v_hat = fb.div(v_new, bc2_b)?;
            let root = fb.unary(ir::UnaryOp::Sqrt, v_hat)?;
            let eps = fb.splat_like(ADAM_EPS, theta);
            let den = fb.add(root, eps)?;
            let upd = fb.div(m_hat, den)?;
            let step = fb.mul(lr_b, upd)?;
            let moved = fb.sub(theta, step)?;
            // Decoupled decay reads the OLD θ (fact 13).
            let wd = fb.splat_like(ADAMW_WEIGHT_DECAY, theta);
            let wd_theta = fb.mul(wd, theta)?;
            let decay = fb.mul(lr_b, wd_theta)?;
            (fb.sub(moved, decay)?, m_new, v_new)
        }
        Optimizer::HeavyBall => {
            // Coupled L2 in the velocity's own form μ·v + g (μ := wd, v := θ).
            let wd = fb.splat_like(HEAVY_BALL_WEIGHT_DECAY, theta);
            let wd_theta = fb.mul(wd, theta)?;
            let g_l2 = fb.add(wd_theta, g)?;
            let mu = fb.splat_like(HEAVY_BALL_MU, theta);
            let mv = fb.mul(mu, v)?;
            let v_new = fb.add(mv, g_l2)?;
            let step = fb.mul(lr_b, v_new)?;
            (fb.sub(theta, step)?, m, v_new)
        }
    })
}

/// Per-layer slices of a chain's flat parameter list.
fn split_params(
    chain: &crate::Chain,
    input: &TensorType,
    params: &[ValueId],
) -> Result<Vec<Vec<ValueId>>, LayerError> {
    let tys = chain.types(input)?;
    let mut at = 0;
    let mut out = Vec::new();
    for ((_, l), ty) in chain.layers.iter().zip(&tys) {
        let n = l.params(ty).len();
        out.push(params[at..at + n].to_vec());
        at += n;
    }
    Ok(out)
}

/// Index of the body op that defines `v`.
fn defining_op(func: &Func, v: ValueId) -> Option<usize> {
    func.body
        .ops
        .iter()
        .position(|op| op.results.iter().any(|(r, _)| *r == v))
}

/// The layer spans of a forward: layer i's ops run from the op after layer
/// i−1's output to the op defining its own output.
fn spans(
    func: &Func,
    net: &NetSpec,
    x4: ValueId,
    saved: &Saved,
    names: impl Iterator<Item = String>,
    layer_params: &mut [Vec<ValueId>],
) -> Vec<LayerSpan> {
    let mut out = Vec::new();
    let mut input = x4;
    let mut start = defining_op(func, x4).map_or(0, |i| i + 1);
    for (i, (name, child)) in names.zip(&saved.children).enumerate() {
        let y = child.output();
        let end = defining_op(func, y).map_or(start, |i| i + 1);
        out.push(LayerSpan {
            spec: net.layers.get(i).map(|(_, s)| s.clone()),
            name,
            input,
            params: std::mem::take(&mut layer_params[i]),
            ops: (start, end),
        });
        input = y;
        start = end;
    }
    out
}

/// Prune, apply the bf16 pass, renumber (keeping the spans' ids valid) and
/// package.
fn finish_render(
    mut func: Func,
    sig: StepSignature,
    mut layers: Vec<LayerSpan>,
    forward_out: ValueId,
    bf16: bool,
) -> Result<Rendered, LayerError> {
    prune_dead_ops(&mut func);
    if bf16 {
        bf16_operands(&mut func);
    }
    let map = renumber(&mut func);
    let forward_out = map[&forward_out];
    for l in &mut layers {
        l.input = map[&l.input];
        for p in &mut l.params {
            *p = map[p];
        }
    }
    // Op positions moved with pruning and the inserted converts; recompute
    // them from the (renumbered) layer inputs and outputs.
    let ends: Vec<ValueId> = layers
        .iter()
        .skip(1)
        .map(|l| l.input)
        .chain(std::iter::once(forward_out))
        .collect();
    let mut start = defining_op(&func, layers[0].input).map_or(0, |i| i + 1);
    for (l, y) in layers.iter_mut().zip(ends) {
        let end = defining_op(&func, y).map_or(start, |i| i + 1);
        l.ops = (start, end);
        start = end;
    }
    let forward_ops = start;
    let module = Module {
        name: None,
        attrs: None,
        funcs: vec![func],
    };
    ir::verify_module(&module)
        .map_err(|e| LayerError(format!("{}: the render does not verify: {e}", sig.func)))?;
    Ok(Rendered {
        module,
        signature: sig,
        layers,
        forward_ops,
    })
}

/// Every value an op (or an op in its regions) reads.
fn collect_uses(op: &Op, used: &mut HashSet<ValueId>) {
    used.extend(op.operands.iter().copied());
    for r in &op.regions {
        for o in &r.ops {
            collect_uses(o, used);
        }
    }
}

/// Drop top-level ops no result of which is read: the chain's backward also
/// computes the cotangent of the images and of the one-hot target, which the
/// step does not return. Every StableHLO op the layers emit is pure.
fn prune_dead_ops(func: &mut Func) {
    let mut used = HashSet::new();
    let mut keep = vec![false; func.body.ops.len()];
    for (i, op) in func.body.ops.iter().enumerate().rev() {
        let live = matches!(op.kind, OpKind::FuncReturn | OpKind::Return)
            || op.results.iter().any(|(r, _)| used.contains(r));
        if live {
            keep[i] = true;
            collect_uses(op, &mut used);
        }
    }
    let mut k = keep.into_iter();
    func.body.ops.retain(|_| k.next().unwrap_or(true));
}

/// The bf16 switch: each f32 convolution (ungrouped — depthwise stays f32,
/// REFERENCE §6.5) and dot_general reads bf16 copies of its operands and keeps
/// its f32 result type, so it accumulates in f32. One convert per converted
/// value, placed before its first use.
fn bf16_operands(func: &mut Func) {
    let mut next = func.num_values() as u32 + 1_000_000;
    let mut converted: HashMap<ValueId, ValueId> = HashMap::new();
    let types = value_types_any(func);
    let ops = std::mem::take(&mut func.body.ops);
    let mut out = Vec::with_capacity(ops.len());
    for mut op in ops {
        let eligible = match &op.kind {
            OpKind::Convolution(a) => a.feature_group_count == 1 && a.batch_group_count == 1,
            OpKind::DotGeneral { .. } => true,
            _ => false,
        };
        if eligible {
            for x in op.operands.iter_mut() {
                let ty = &types[x];
                if ty.elem != ElemType::F32 {
                    continue;
                }
                let c = *converted.entry(*x).or_insert_with(|| {
                    let id = ValueId(next);
                    next += 1;
                    out.push(Op {
                        kind: OpKind::Convert,
                        operands: vec![*x],
                        results: vec![(id, ty.with_elem(ElemType::BF16))],
                        regions: Vec::new(),
                        extra_attrs: Vec::new(),
                        loc: SrcLoc::default(),
                    });
                    id
                });
                *x = c;
            }
        }
        out.push(op);
    }
    func.body.ops = out;
}

/// Types of every value by id, for ids that need not be canonical.
fn value_types_any(func: &Func) -> HashMap<ValueId, TensorType> {
    let mut out = HashMap::new();
    fn fill(b: &ir::Block, out: &mut HashMap<ValueId, TensorType>) {
        for (v, t) in &b.args {
            out.insert(*v, t.clone());
        }
        for op in &b.ops {
            for r in &op.regions {
                fill(r, out);
            }
            for (v, t) in &op.results {
                out.insert(*v, t.clone());
            }
        }
    }
    fill(&func.body, &mut out);
    out
}

/// Renumber into canonical order; returns old id → new id (the same walk as
/// `Func::canonicalize`, which is then applied).
fn renumber(func: &mut Func) -> HashMap<ValueId, ValueId> {
    fn walk(b: &ir::Block, map: &mut HashMap<ValueId, ValueId>, next: &mut u32) {
        for (v, _) in &b.args {
            map.insert(*v, ValueId(*next));
            *next += 1;
        }
        for op in &b.ops {
            for r in &op.regions {
                walk(r, map, next);
            }
            for (v, _) in &op.results {
                map.insert(*v, ValueId(*next));
                *next += 1;
            }
        }
    }
    let mut map = HashMap::new();
    walk(&func.body, &mut map, &mut 0);
    func.canonicalize();
    map
}

/// The signature of the eval forward: `x, θ…, per-BN (running mean, running
/// var) → logits`.
pub fn eval_signature(net: &NetSpec, batch: i64) -> Result<StepSignature, LayerError> {
    let (c, h, w) = net.input;
    let mut inputs = vec![Slot {
        name: "x".into(),
        kind: SlotKind::Images,
        ty: TensorType::f32(vec![batch, c * h * w]),
    }];
    for p in net.param_specs()? {
        inputs.push(Slot {
            name: p.name,
            kind: SlotKind::Param,
            ty: p.ty,
        });
    }
    for BnSite { name, ch, .. } in batch_bn_sites(net)? {
        let ty = TensorType::f32(vec![ch]);
        for (suffix, kind) in [
            ("running_mean", SlotKind::RunningMean),
            ("running_var", SlotKind::RunningVar),
        ] {
            inputs.push(Slot {
                name: format!("{name}.{suffix}"),
                kind,
                ty: ty.clone(),
            });
        }
    }
    Ok(StepSignature {
        func: format!("{}_fwd_eval", slug(net)),
        inputs,
        outputs: vec![Slot {
            name: "logits".into(),
            kind: SlotKind::Logits,
            ty: TensorType::f32(vec![batch, net.classes]),
        }],
    })
}

/// `net` with its true-batch norms — top level and inside blocks — put in
/// `world`. Per-example batch norm (cifar8-bn) is the same function at train
/// and eval and keeps its world.
pub fn with_batch_bn_world(net: &NetSpec, world: BnWorld) -> NetSpec {
    let mut n = net.clone();
    for (_, l) in &mut n.layers {
        if l.bn_world() == Some(BnWorld::Batch) {
            l.set_bn_world(world);
        }
    }
    n
}

/// The eval forward: `net` with every true-batch norm in the Eval world, its
/// running statistics as inputs (per-example batch norm needs none).
pub fn render_eval_forward(net: &NetSpec, batch: i64) -> Result<Module, LayerError> {
    Ok(render_eval_forward_parts(net, batch)?.module)
}

/// [`render_eval_forward`] with the layer spans.
pub fn render_eval_forward_parts(net: &NetSpec, batch: i64) -> Result<Rendered, LayerError> {
    render_logits_forward(net, batch, BnWorld::Eval)
}

/// The logits forward of `net` with its true-batch norms put in `world`. With
/// `BnWorld::Eval` this is the eval forward; any other world is there for
/// the drift guard's negative control (an eval forward that forgot to switch).
pub fn render_logits_forward(
    net: &NetSpec,
    batch: i64,
    world: BnWorld,
) -> Result<Rendered, LayerError> {
    let sig = eval_signature(net, batch)?;
    let switched = with_batch_bn_world(net, world);
    let chain = switched.chain()?;
    let x4_ty = net.input_type(batch);
    let mut fb = FuncBuilder::new(sig.func.clone(), Visibility::Public);
    let args: Vec<ValueId> = sig.inputs.iter().map(|s| fb.param(s.ty.clone())).collect();
    // The switched chain's parameters are the train θ plus, per Eval-world
    // batch norm (wherever it sits), its running mean and var; all of them
    // are signature slots of the same name.
    let by_name: HashMap<&str, ValueId> = sig
        .inputs
        .iter()
        .zip(&args)
        .map(|(s, a)| (s.name.as_str(), *a))
        .collect();
    let chain_params = chain
        .params(&x4_ty)
        .iter()
        .map(|p| {
            by_name.get(p.name.as_str()).copied().ok_or_else(|| {
                LayerError(format!(
                    "{}: the {world:?}-world forward needs {}, which the eval signature lacks",
                    net.name, p.name
                ))
            })
        })
        .collect::<Result<Vec<_>, _>>()?;
    let x4 = fb.reshape(args[0], &x4_ty.shape)?;
    let saved = chain.forward(&mut fb, x4, &chain_params, &mut Sites::default())?;
    let logits = saved.output();
    let func = fb.finish(&[logits])?;
    let mut layer_params = split_params(&chain, &x4_ty, &chain_params)?;
    let spans = spans(
        &func,
        &switched,
        x4,
        &saved,
        chain.layers.iter().map(|(n, _)| n.clone()),
        &mut layer_params,
    );
    finish_render(func, sig, spans, logits, false)
}

/// The standalone loss forward `x [B, C·H·W], θ…, onehot → loss`: the train
/// step's forward on its own (what the drift guard compares the step's
/// forward prefix with).
pub fn render_loss_forward(net: &NetSpec, batch: i64, bf16: bool) -> Result<Rendered, LayerError> {
    let full = step_signature(net, batch, Optimizer::Sgd)?;
    let keep = |k: SlotKind| matches!(k, SlotKind::Images | SlotKind::Param | SlotKind::OneHot);
    let sig = StepSignature {
        func: format!("{}_loss_forward", slug(net)),
        inputs: full.inputs.into_iter().filter(|s| keep(s.kind)).collect(),
        outputs: vec![Slot {
            name: "loss".into(),
            kind: SlotKind::Loss,
            ty: TensorType::f32(Vec::<i64>::new()),
        }],
    };
    let chain = net.chain_with_loss()?;
    let x4_ty = net.input_type(batch);
    let mut fb = FuncBuilder::new(sig.func.clone(), Visibility::Public);
    let args: Vec<ValueId> = sig.inputs.iter().map(|s| fb.param(s.ty.clone())).collect();
    let x4 = fb.reshape(args[0], &x4_ty.shape)?;
    let chain_params = args[1..].to_vec();
    let saved = chain.forward(&mut fb, x4, &chain_params, &mut Sites::default())?;
    let loss = saved.output();
    let func = fb.finish(&[loss])?;
    let mut layer_params = split_params(&chain, &x4_ty, &chain_params)?;
    let spans = spans(
        &func,
        net,
        x4,
        &saved,
        chain.layers.iter().map(|(n, _)| n.clone()),
        &mut layer_params,
    );
    finish_render(func, sig, spans, loss, bf16)
}

// ---------------------------------------------------------------------------
// Drift guard

/// The ops of `range` in `func`, each printed with its operands renamed: a
/// value defined inside the range by its position (`%o3#0`), a value in
/// `roles` by its role (`%in`, `%p1`), anything else as `%outside`. Two ranges
/// with equal normalised text compute the same function of their roles.
pub fn normalized_ops(
    func: &Func,
    range: (usize, usize),
    roles: &HashMap<ValueId, String>,
) -> Vec<String> {
    let mut local: HashMap<ValueId, String> = HashMap::new();
    let mut out = Vec::new();
    for (k, op) in func.body.ops[range.0..range.1].iter().enumerate() {
        out.push(normalize_op(op, &format!("o{k}"), roles, &mut local));
    }
    out
}

fn normalize_op(
    op: &Op,
    tag: &str,
    roles: &HashMap<ValueId, String>,
    local: &mut HashMap<ValueId, String>,
) -> String {
    let name = |v: &ValueId, local: &HashMap<ValueId, String>| {
        local
            .get(v)
            .or_else(|| roles.get(v))
            .cloned()
            .unwrap_or_else(|| "%outside".into())
    };
    let operands: Vec<String> = op.operands.iter().map(|v| name(v, local)).collect();
    let mut regions = Vec::new();
    for (ri, r) in op.regions.iter().enumerate() {
        let mut inner = local.clone();
        for (ai, (a, _)) in r.args.iter().enumerate() {
            inner.insert(*a, format!("%{tag}r{ri}a{ai}"));
        }
        let body: Vec<String> = r
            .ops
            .iter()
            .enumerate()
            .map(|(k, o)| normalize_op(o, &format!("{tag}r{ri}o{k}"), roles, &mut inner))
            .collect();
        regions.push(format!("{{{}}}", body.join("; ")));
    }
    let results: Vec<String> = op.results.iter().map(|(_, t)| t.to_string()).collect();
    for (i, (r, _)) in op.results.iter().enumerate() {
        local.insert(*r, format!("%{tag}#{i}"));
    }
    format!(
        "{:?}({}){} -> ({})",
        op.kind,
        operands.join(", "),
        regions.join(""),
        results.join(", ")
    )
}

/// The normalised ops of one layer span (input `%in`, parameters `%p<k>`).
pub fn span_ops(r: &Rendered, span: &LayerSpan) -> Vec<String> {
    let mut roles = HashMap::new();
    roles.insert(span.input, "%in".to_string());
    for (k, p) in span.params.iter().enumerate() {
        roles.entry(*p).or_insert_with(|| format!("%p{k}"));
    }
    normalized_ops(r.func(), span.ops, &roles)
}

/// The normalised forward prefix of a render: arguments by slot name.
pub fn forward_prefix(r: &Rendered) -> Vec<String> {
    let f = r.func();
    let roles: HashMap<ValueId, String> = f
        .params
        .iter()
        .zip(&r.signature.inputs)
        .map(|(p, s)| (p.value, format!("%{}", s.name)))
        .collect();
    normalized_ops(f, (0, r.forward_ops), &roles)
}

/// A difference the drift guard found.
#[derive(Clone, Debug, PartialEq)]
pub struct Drift {
    pub layer: String,
    pub detail: String,
}

/// The normalised forward of a lone copy of `spec` — a batch norm or a
/// residual block — with its batch norms in `world`, at `input`.
fn lone_layer_ops(
    spec: &LayerSpec,
    world: BnWorld,
    input: &TensorType,
) -> Result<Vec<String>, LayerError> {
    let mut spec = spec.clone();
    spec.set_bn_world(world);
    let layer: Box<dyn CertLayer> = match spec {
        LayerSpec::BatchNorm { eps, .. } => Box::new(BatchNorm {
            ch: input.shape[1],
            world,
            eps,
        }),
        _ => Box::new(spec.block(input.shape[1])?),
    };
    let mut fb = FuncBuilder::new("lone", Visibility::Public);
    let x = fb.param(input.clone());
    let ps: Vec<ValueId> = layer
        .params(input)
        .iter()
        .map(|p| fb.param(p.ty.clone()))
        .collect();
    let s = layer.forward(&mut fb, x, &ps, &mut Sites::default())?;
    let f = fb.finish(&[s.output()])?;
    let mut roles = HashMap::new();
    roles.insert(x, "%in".to_string());
    for (k, p) in ps.iter().enumerate() {
        roles.insert(*p, format!("%p{k}"));
    }
    Ok(normalized_ops(&f, (0, f.body.ops.len() - 1), &roles))
}

/// Compares a train forward (a step or loss-forward render of `train_net`)
/// with an eval forward, layer by layer: every layer but a batch norm must
/// emit the same ops (up to renaming), a batch norm of the train forward must
/// be a lone batch norm in `train_net`'s world, and one of the eval forward a
/// lone batch norm in the Eval world. Empty when they agree.
pub fn forward_drift(
    train_net: &NetSpec,
    train: &Rendered,
    eval: &Rendered,
) -> Result<Vec<Drift>, LayerError> {
    let mut drifts = Vec::new();
    let train_layers: Vec<&LayerSpan> = train.layers.iter().filter(|l| l.name != "loss").collect();
    if train_layers.len() != eval.layers.len() {
        drifts.push(Drift {
            layer: "(net)".into(),
            detail: format!(
                "train forward has {} layers, eval forward {}",
                train_layers.len(),
                eval.layers.len()
            ),
        });
        return Ok(drifts);
    }
    for (t, e) in train_layers.iter().zip(&eval.layers) {
        if t.name != e.name {
            drifts.push(Drift {
                layer: t.name.clone(),
                detail: format!("eval forward has layer {} here", e.name),
            });
            continue;
        }
        let (to, eo) = (span_ops(train, t), span_ops(eval, e));
        // The world the declared net gives this layer.
        let declared = train_net
            .layers
            .iter()
            .find(|(n, _)| *n == t.name)
            .map(|(_, s)| s.clone());
        match declared {
            // A batch norm or a block whose batch norms the train net runs on
            // batch statistics: the only layers allowed to differ.
            Some(spec) if spec.bn_world() == Some(BnWorld::Batch) => {
                let input_ty = train.func().value_types()[t.input.index()].clone();
                if to != lone_layer_ops(&spec, BnWorld::Batch, &input_ty)? {
                    drifts.push(Drift {
                        layer: t.name.clone(),
                        detail: "the train forward's batch norm is not in the Batch world".into(),
                    });
                }
                if eo != lone_layer_ops(&spec, BnWorld::Eval, &input_ty)? {
                    drifts.push(Drift {
                        layer: e.name.clone(),
                        detail: "the eval forward's batch norm is not in the Eval world \
                                 (running statistics)"
                            .into(),
                    });
                }
            }
            _ => {
                if to != eo {
                    let at = to.iter().zip(&eo).position(|(a, b)| a != b);
                    drifts.push(Drift {
                        layer: t.name.clone(),
                        detail: match at {
                            Some(i) => format!("op {i}: train `{}` vs eval `{}`", to[i], eo[i]),
                            None => format!("{} ops in train, {} in eval", to.len(), eo.len()),
                        },
                    });
                }
            }
        }
    }
    Ok(drifts)
}
