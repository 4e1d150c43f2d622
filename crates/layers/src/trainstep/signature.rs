//! The packed signatures of the rendered functions (docs/conventions.md §15): which
//! slot of a train step or eval forward carries what, derived from the
//! NetSpec alone; the renderer and the train-step tie both read slot
//! positions from here. A recipe's EMA shadow and accumulator are extra
//! regions after v (docs/conventions.md §15), its host scalars (`emad`, `oemad`,
//! `aup`, `akeep`) follow bc2, among the arguments and, unchanged, among the
//! results.

use super::{Optimizer, StepOptions};
use crate::layer::LayerError;
use crate::net::{BnSite, NetSpec};
use crate::ops::norm::BnWorld;
use ir::TensorType;

/// What a signature slot carries.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SlotKind {
    /// `x [B, C·H·W]`.
    Images,
    Param,
    M,
    V,
    /// The EMA shadow of a parameter (recipe `ema`).
    Shadow,
    /// The gradient accumulator of a parameter (recipe `accumulate`).
    Accum,
    Lr,
    Bc1,
    Bc2,
    /// `emad`: the EMA decay d of this update.
    EmaDecay,
    /// `oemad`: 1 − d.
    EmaOneMinus,
    /// `aup`: 1 on a cycle's last micro-batch (the tail applies), else 0.
    AccApply,
    /// `akeep`: 0 on a cycle's first micro-batch (G restarts), else 1.
    AccKeep,
    RunningMean,
    RunningVar,
    /// `dp{i} [B]`: the per-example keep scales of drop-path site i (recipe
    /// `drop_path`).
    DropPath,
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

/// The signature of a train step (docs/conventions.md §15), derived from the NetSpec alone; the
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

/// The packed train-step signature of `net` at batch `batch` (docs/conventions.md §15).
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
    let recipe = &opts.recipe;
    recipe
        .validate(opt)
        .map_err(|e| LayerError(format!("{}: {e}", net.name)))?;
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
    let mut regions = vec![
        (SlotKind::Param, ""),
        (SlotKind::M, ".m"),
        (SlotKind::V, ".v"),
    ];
    if recipe.ema.is_some() {
        regions.push((SlotKind::Shadow, ".ema"));
    }
    if recipe.accumulate.is_some() {
        regions.push((SlotKind::Accum, ".acc"));
    }
    for (kind, suffix) in regions {
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
    let mut host_scalars = Vec::new();
    if recipe.ema.is_some() {
        host_scalars.extend([
            ("emad", SlotKind::EmaDecay),
            ("oemad", SlotKind::EmaOneMinus),
        ]);
    }
    if recipe.accumulate.is_some() {
        host_scalars.extend([("aup", SlotKind::AccApply), ("akeep", SlotKind::AccKeep)]);
    }
    // Returned unchanged, as bc1 and bc2 are: the reference project's steps
    // return every scalar they take, so the signatures agree slot for slot.
    for (name, kind) in host_scalars {
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
    if let Some(rate) = recipe.drop_path {
        let sites = net.drop_path_sites(rate)?;
        if sites.is_empty() {
            return Err(LayerError(format!(
                "--drop-path: {} has no drop-path sites (no block with a residual branch opts in)",
                net.name
            )));
        }
        // Returned unchanged too, after the batch statistics (the
        // reference project's convention: every argument but x and the
        // labels comes back).
        for i in 0..sites.len() {
            let s = slot(
                format!("dp{i}"),
                SlotKind::DropPath,
                TensorType::f32(vec![batch]),
            );
            inputs.push(s.clone());
            outputs.push(s);
        }
    }
    inputs.push(slot(
        "onehot".into(),
        SlotKind::OneHot,
        TensorType::f32(vec![batch, net.classes]),
    ));
    Ok(StepSignature {
        func: format!(
            "{}_{}_train_step",
            slug(net),
            recipe.variant(opt, batch, opts.replicas)
        ),
        inputs,
        outputs,
    })
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
