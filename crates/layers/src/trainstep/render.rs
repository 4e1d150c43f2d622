//! The train step render: the forward of `chain_with_loss()`, its backward
//! at dy = 1, the optimizer tail per parameter (with R > 1 replicas, the
//! replica mean of each gradient first), then the whole-function passes of
//! `ir::passes` and the layer spans of the forward.

use super::tails::tail;
use super::{batch_bn_sites, step_signature_with, Optimizer, SlotKind, StepSignature};
use crate::emit::Emit;
use crate::layer::{CertLayer, LayerError, Saved, Sites};
use crate::net::{LayerSpec, NetSpec};
use ir::passes::{bf16_operands, defining_op, normalized_ops, prune_dead_ops, renumber};
use ir::{Func, FuncBuilder, Module, OpKind, TensorType, ValueId, Visibility};
use std::collections::HashMap;

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
}

impl Rendered {
    pub fn func(&self) -> &Func {
        self.module
            .func(&self.signature.func)
            .expect("rendered function")
    }
}

/// Renders the train step `opts` describes for `net` at per-replica batch
/// `batch`, with its signature and the forward's layer spans. With
/// `opts.bf16`, every convolution and dot_general takes bf16 operands
/// (converted from f32) and accumulates into an f32 result, while master
/// weights, optimizer state and every other op stay f32 (REFERENCE §6.5);
/// with `opts.replicas` > 1, the data-parallel step (§6.4). The max pools'
/// backward form is the net's own (`NetSpec::with_pool_backward`).
pub fn render_step(net: &NetSpec, batch: i64, opts: &StepOptions) -> Result<Rendered, LayerError> {
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
