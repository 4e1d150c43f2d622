//! The forwards rendered on their own: the eval forward (true-batch norms in
//! the Eval world, running statistics as inputs), the train-mode forward
//! (batch statistics, no running statistics taken), the logits forward in
//! any BN world, and the standalone loss forward.

use super::render::{finish_render, spans, split_params};
use super::{
    eval_signature, slug, step_signature, Optimizer, Rendered, Slot, SlotKind, StepSignature,
};
use crate::emit::Emit;
use crate::layer::{CertLayer, LayerError, Sites};
use crate::net::NetSpec;
use crate::ops::norm::BnWorld;
use ir::{FuncBuilder, TensorType, ValueId, Visibility};
use std::collections::HashMap;

/// The eval forward: `net` with every true-batch norm in the Eval world, its
/// running statistics as inputs (per-example batch norm needs none), with
/// the layer spans.
pub fn render_eval_forward(net: &NetSpec, batch: i64) -> Result<Rendered, LayerError> {
    render_logits_forward(net, batch, BnWorld::Eval)
}

/// The logits forward of `net` with its true-batch norms put in `world`. With
/// `BnWorld::Eval` this is the eval forward; with `BnWorld::Batch`, the train
/// forward's logits (train accuracy, and an eval forward that forgot to
/// switch, for negative controls).
pub fn render_logits_forward(
    net: &NetSpec,
    batch: i64,
    world: BnWorld,
) -> Result<Rendered, LayerError> {
    logits_forward(net, batch, world, eval_signature(net, batch)?)
}

/// The train-mode forward `@{net}_fwd(x [B, C·H·W], θ…) -> logits`: every
/// true-batch norm normalises by the batch's own statistics, as the train
/// step's forward does, so no running statistics are taken.
pub fn render_train_forward(net: &NetSpec, batch: i64) -> Result<Rendered, LayerError> {
    let mut sig = eval_signature(net, batch)?;
    sig.inputs
        .retain(|s| !matches!(s.kind, SlotKind::RunningMean | SlotKind::RunningVar));
    sig.func = format!("{}_fwd", slug(net));
    logits_forward(net, batch, BnWorld::Batch, sig)
}

/// The logits forward of `net` in `world` under the signature `sig`, which
/// names every parameter the switched chain reads.
fn logits_forward(
    net: &NetSpec,
    batch: i64,
    world: BnWorld,
    sig: StepSignature,
) -> Result<Rendered, LayerError> {
    let switched = net.with_batch_stat_bns_in(world);
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
                    "{}: the {world:?}-world forward needs {}, which its signature lacks",
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
/// step's forward on its own (what the step's forward prefix is compared
/// with).
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
