//! The train step render: the forward of `chain_with_loss()` (its loss
//! swapped for BCE under that recipe), its backward at dy = 1, the recipe's
//! gradient modifiers (with R > 1 replicas, the replica mean of each gradient
//! first; then accumulation, then the global-norm clip), the optimizer tail
//! per parameter, the accumulation gate and the EMA shadow, then the
//! whole-function passes of `ir::passes` and the layer spans of the forward.

use super::recipe::{Fault, Loss, Recipe, CLIP_DELTA};
use super::tails::{l2_norm, tail};
use super::{batch_bn_sites, step_signature_with, Optimizer, SlotKind, StepSignature};
use crate::emit::Emit;
use crate::layer::{CertLayer, LayerError, Saved, Sites};
use crate::net::{LayerSpec, NetSpec};
use crate::ops::loss::{bce_mean_over_batch, BinaryCrossEntropy};
use ir::passes::{bf16_operands, defining_op, normalized_ops, prune_dead_ops, renumber};
use ir::{Func, FuncBuilder, Module, OpKind, TensorType, ValueId, Visibility};
use std::collections::HashMap;

/// How a train step is rendered.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct StepOptions {
    /// The base tail.
    pub optimizer: Optimizer,
    /// The modifiers around it and the loss (default: none, softmax-CE).
    pub recipe: Recipe,
    /// bf16 operands for convolution and dot_general (docs/conventions.md §19).
    pub bf16: bool,
    /// Data-parallel replicas R (docs/conventions.md §18). With R > 1 the batch of the
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
            recipe: Recipe::default(),
            bf16: false,
            replicas: 1,
        }
    }
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
    pub spans: Vec<LayerSpan>,
    /// The number of leading body ops that are the forward.
    pub forward_ops: usize,
    /// The header comment lines (without `//`): a recipe's formulas and
    /// constants; empty for the plain steps of the original four tails and
    /// for eval forwards, whose text is the module alone.
    pub header: Vec<String>,
}

impl Rendered {
    pub fn func(&self) -> &Func {
        self.module
            .func(&self.signature.func)
            .expect("rendered function")
    }

    /// The StableHLO text: the header comment, then the module.
    pub fn text(&self) -> String {
        let mut t: String = self.header.iter().map(|l| format!("// {l}\n")).collect();
        t.push_str(&ir::print::print_module(&self.module));
        t
    }
}

/// The chain a train step differentiates: the net's `chain_with_loss()`,
/// its softmax-CE replaced by BCE under `Loss::Bce`.
pub fn step_chain(net: &NetSpec, recipe: &Recipe) -> Result<crate::Chain, LayerError> {
    let mut chain = if recipe.drop_path.is_some() {
        net.chain_with_loss_drop_path()?
    } else {
        net.chain_with_loss()?
    };
    if recipe.loss == Loss::Bce {
        if net.label_smoothing.is_some() {
            return Err(LayerError(format!(
                "{}: --loss bce takes no label smoothing (the net sets {:?})",
                net.name, net.label_smoothing
            )));
        }
        let last = chain
            .layers
            .last_mut()
            .ok_or_else(|| LayerError(format!("{}: an empty chain", net.name)))?;
        last.1 = if recipe.fault == Some(Fault::BceMeanOverBatch) {
            Box::new(bce_mean_over_batch(net.classes))
        } else {
            Box::new(BinaryCrossEntropy {
                classes: net.classes,
            })
        };
    }
    Ok(chain)
}

/// Renders the train step `opts` describes for `net` at per-replica batch
/// `batch`, with its signature and the forward's layer spans. With
/// `opts.bf16`, every convolution and dot_general takes bf16 operands
/// (converted from f32) and accumulates into an f32 result, while master
/// weights, optimizer state and every other op stay f32 (docs/conventions.md §19);
/// with `opts.replicas` > 1, the data-parallel step (docs/conventions.md §18). The max pools'
/// backward form is the net's own (`NetSpec::with_pool_backward`).
pub fn render_step(net: &NetSpec, batch: i64, opts: &StepOptions) -> Result<Rendered, LayerError> {
    let (opt, bf16, replicas) = (opts.optimizer, opts.bf16, opts.replicas);
    let recipe = &opts.recipe;
    let sig = step_signature_with(net, batch, opts)?;
    let chain = step_chain(net, recipe)?;
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
    let (shadow, accum) = (at(SlotKind::Shadow), at(SlotKind::Accum));
    let first = |kind| at(kind).first().copied();
    let (emad, oemad) = (first(SlotKind::EmaDecay), first(SlotKind::EmaOneMinus));
    let (aup, akeep) = (first(SlotKind::AccApply), first(SlotKind::AccKeep));
    let param_names: Vec<String> = sig
        .input_positions(SlotKind::Param)
        .into_iter()
        .map(|i| sig.inputs[i].name.clone())
        .collect();

    let x4 = fb.reshape(args[0], &x4_ty.shape)?;
    // The loss layer's `target` parameter is the one-hot input; drop-path
    // keep inputs sit at their blocks' positions among θ.
    let mut chain_params = theta.clone();
    chain_params.push(onehot);
    let keeps = at(SlotKind::DropPath);
    let keep_at = crate::droppath::keep_positions(&chain, &x4_ty);
    if keep_at.len() != keeps.len() {
        return Err(LayerError(format!(
            "{}: the step chain has {} drop-path keep inputs, the signature {}",
            net.name,
            keep_at.len(),
            keeps.len()
        )));
    }
    let chain_params = crate::droppath::interleave(&keep_at, &keeps, &chain_params);
    let saved = chain.forward(&mut fb, x4, &chain_params, &mut Sites::default())?;
    let loss = saved.output();
    let dloss = fb.splat(1.0, TensorType::f32(Vec::<i64>::new()));
    let mut grads = chain.backward(&mut fb, x4, &chain_params, &saved, dloss)?;
    // The keep inputs' gradients are data gradients: not used by the step.
    grads.dparams = crate::droppath::split_keeps(&keep_at, &grads.dparams).0;
    if grads.dparams.len() != n_theta + 1 {
        return Err(LayerError(format!(
            "{}: the backward returned {} gradients for {} parameters and the target",
            net.name,
            grads.dparams.len(),
            n_theta
        )));
    }

    // The replica mean comes first; without a modifier that reads every
    // gradient it is emitted beside each tail (the original op order).
    let whole = recipe.accumulate.is_some() || recipe.clip.is_some();
    let mut g: Vec<ValueId> = Vec::new();
    for &d in &grads.dparams[..n_theta] {
        g.push(if replicas > 1 && whole {
            replica_mean(&mut fb, d, replicas)?
        } else {
            d
        });
    }
    // Accumulation: G' = akeep·G + g; the tail consumes the mean G'/k.
    let mut new_accum = Vec::new();
    if let (Some(k), Some(akeep)) = (recipe.accumulate, akeep) {
        for (gi, &acc) in g.iter_mut().zip(&accum) {
            let shape = fb.shape(*gi);
            let keep = fb.bcast(akeep, &[], &shape)?;
            let kept = fb.mul(keep, acc)?;
            let sum = fb.add(kept, *gi)?;
            new_accum.push(sum);
            let kk = fb.splat_like(k as f64, sum);
            *gi = fb.div(sum, kk)?;
        }
    }
    if let Some(c) = recipe.clip {
        clip_global(
            &mut fb,
            &mut g,
            c,
            recipe.fault == Some(Fault::ClipPerTensor),
        )?;
    }
    let mut new_theta = Vec::new();
    let mut new_m = Vec::new();
    let mut new_v = Vec::new();
    for i in 0..n_theta {
        if replicas > 1 && !whole {
            g[i] = replica_mean(&mut fb, g[i], replicas)?;
        }
        let ty = fb.ty(theta[i]).clone();
        let wd = recipe.decay_for(opt, &param_names[i], &ty);
        let (t, mm, vv) = tail(
            &mut fb,
            opt,
            wd,
            recipe.fault,
            theta[i],
            m[i],
            v[i],
            g[i],
            lr,
            bc1,
            bc2,
        )?;
        new_theta.push(t);
        new_m.push(mm);
        new_v.push(vv);
    }
    // The apply gate: x' = aup·x_new + (1 − aup)·x, exact for aup ∈ {0, 1}.
    let gate = |fb: &mut FuncBuilder, new: ValueId, old: ValueId| -> Result<ValueId, LayerError> {
        match aup {
            Some(aup) if recipe.fault != Some(Fault::AccumulateAlwaysApplies) => {
                let shape = fb.shape(new);
                let one = fb.splat(1.0, TensorType::f32(Vec::<i64>::new()));
                let skip = fb.sub(one, aup)?;
                let up_b = fb.bcast(aup, &[], &shape)?;
                let skip_b = fb.bcast(skip, &[], &shape)?;
                let a = fb.mul(up_b, new)?;
                let b = fb.mul(skip_b, old)?;
                Ok(fb.add(a, b)?)
            }
            _ => Ok(new),
        }
    };
    if recipe.accumulate.is_some() {
        for i in 0..n_theta {
            new_theta[i] = gate(&mut fb, new_theta[i], theta[i])?;
            new_m[i] = gate(&mut fb, new_m[i], m[i])?;
            new_v[i] = gate(&mut fb, new_v[i], v[i])?;
        }
    }
    // EMA after the update: shadow' = d·shadow + (1−d)·θ'.
    let mut new_shadow = Vec::new();
    if let (Some(emad), Some(oemad)) = (emad, oemad) {
        for i in 0..n_theta {
            let shape = fb.shape(theta[i]);
            let d = fb.bcast(emad, &[], &shape)?;
            let od = fb.bcast(oemad, &[], &shape)?;
            let followed = if recipe.fault == Some(Fault::EmaOfOldTheta) {
                theta[i]
            } else {
                new_theta[i]
            };
            let a = fb.mul(d, shadow[i])?;
            let b = fb.mul(od, followed)?;
            let s = fb.add(a, b)?;
            new_shadow.push(gate(&mut fb, s, shadow[i])?);
        }
    }
    let mut outs: Vec<ValueId> = [new_theta, new_m, new_v, new_shadow, new_accum].concat();
    outs.extend([loss, bc1, bc2]);
    // The host scalars return unchanged, in the signature's order.
    outs.extend([emad, oemad, aup, akeep].into_iter().flatten());
    for site in batch_bn_sites(net)? {
        let (mean, var) = site
            .stats(&saved)
            .ok_or_else(|| LayerError(format!("{}: batch norm saved no statistics", site.name)))?;
        outs.extend([mean, var]);
    }
    // The drop-path keeps return unchanged, as the signature lists them.
    outs.extend(keeps.iter().copied());
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
    if !(recipe.is_plain() && Optimizer::ALL.contains(&opt)) {
        r.header = recipe.header(opt);
    }
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

/// Global-norm clipping (docs/training.md §3): `s = Σ_tensors Σ g²`, one factor
/// `min(1, c/(√s + 1e-6))` multiplying every gradient; with `per_tensor`
/// (a negative control's bug) each tensor's own norm instead.
fn clip_global(
    fb: &mut FuncBuilder,
    g: &mut [ValueId],
    c: f64,
    per_tensor: bool,
) -> Result<(), LayerError> {
    let factor = |fb: &mut FuncBuilder, norm: ValueId| -> Result<ValueId, LayerError> {
        let delta = fb.splat_like(CLIP_DELTA, norm);
        let den = fb.add(norm, delta)?;
        let cc = fb.splat_like(c, norm);
        let q = fb.div(cc, den)?;
        let one = fb.splat_like(1.0, norm);
        Ok(fb.min(one, q)?)
    };
    let global = if per_tensor {
        None
    } else {
        let mut total: Option<ValueId> = None;
        for &gi in g.iter() {
            let rank = fb.shape(gi).len() as i64;
            let sq = fb.mul(gi, gi)?;
            let dims: Vec<i64> = (0..rank).collect();
            let s = fb.reduce_sum(sq, &dims)?;
            total = Some(match total {
                Some(t) => fb.add(t, s)?,
                None => s,
            });
        }
        let Some(total) = total else {
            return Ok(());
        };
        let norm = fb.unary(ir::UnaryOp::Sqrt, total)?;
        Some(factor(fb, norm)?)
    };
    for gi in g.iter_mut() {
        let f = match global {
            Some(f) => f,
            None => {
                let n = l2_norm(fb, *gi)?;
                factor(fb, n)?
            }
        };
        let shape = fb.shape(*gi);
        let fb_ = fb.bcast(f, &[], &shape)?;
        *gi = fb.mul(fb_, *gi)?;
    }
    Ok(())
}

/// Per-layer slices of a chain's flat parameter list.
pub(super) fn split_params(
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

/// The layer spans of a forward: layer i's ops run from the op after layer
/// i−1's output to the op defining its own output.
pub(super) fn spans(
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
pub(super) fn finish_render(
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
        spans: layers,
        forward_ops,
        header: Vec::new(),
    })
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
