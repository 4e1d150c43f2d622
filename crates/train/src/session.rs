//! The host loop: it executes the RENDERED train step (the `ir::Module` that
//! `layers::trainstep` returned, run by an engine of the `engines` crate:
//! native by default, or XLA through PJRT, or IREE) and nothing else computes
//! a gradient or an update. With R replicas the step is the data-parallel
//! render: the global batch is split into R shards, θ|m|v are replicated, θ'
//! is taken from replica 0 (the others are checked against it), the loss is
//! the mean over replicas. Around it the host does what
//! REFERENCE §6.2 puts outside the graph: batches (per-epoch shuffle from the
//! seed, augmentation), the lr schedule and bias corrections, the running-BN
//! EMA from the step's batch-stat outputs, evaluation with the rendered eval
//! forward, the metrics log and the checkpoints that let a killed run resume
//! bit for bit.

use crate::checkpoint::{checkpoint_path, Checkpoint, CheckpointError};
use crate::data::{self, augment, Augment, Dataset};
use crate::rng::Rng;
use crate::schedule::{bias_corrections, bn_momentum, lr_at};
use engines::engine::{Engine, Prepared};
use engines::host::{HostData, HostTensor};
use engines::select::{EngineKind, EngineOptions};
use ir::Module;
use layers::net::NetSpec;
use layers::ops::norm::BnWorld;
use layers::trainstep::{
    eval_signature, render_eval_forward, render_logits_forward, render_train_step,
    render_train_step_with, step_signature_with, Optimizer, SlotKind, StepOptions, StepSignature,
};
use layers::Init;
use serde::{Deserialize, Serialize};
use std::fs::{File, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::Instant;

/// Everything that determines a run (stored in every checkpoint).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TrainConfig {
    /// A built-in net name or a net file.
    pub net: String,
    /// `builtin`, `fashion-mnist` or a directory (see [`data::load`]).
    pub data: String,
    /// `sgd`, `nesterov`, `adamw`.
    pub optimizer: String,
    pub epochs: u64,
    pub batch: usize,
    /// Peak learning rate.
    pub lr: f64,
    pub warmup_epochs: f64,
    pub seed: u64,
    /// bf16 operands for conv/dot in the step (REFERENCE §6.5).
    pub bf16: bool,
    /// Random-crop padding (0: off).
    pub crop_pad: usize,
    /// Random horizontal flip (honoured only for CIFAR-style data).
    pub flip: bool,
    /// Score each training batch with the batch-BN logits forward (the step's
    /// own forward function, rendered on its own) for the train accuracy.
    pub train_accuracy: bool,
    /// Checkpoint every K updates (0: at epoch ends only).
    pub checkpoint_every: u64,
    /// Use only the first N train / test examples (quick runs, tests).
    pub limit_train: Option<usize>,
    pub limit_test: Option<usize>,
    /// Data-parallel replicas R: `batch` is the global batch, split into R
    /// shards of `batch / R` (BN statistics per shard, REFERENCE §6.4).
    #[serde(default = "one_replica")]
    pub replicas: usize,
}

fn one_replica() -> usize {
    1
}

impl TrainConfig {
    pub fn optimizer(&self) -> Result<Optimizer, TrainError> {
        Optimizer::parse(&self.optimizer).ok_or_else(|| {
            TrainError(format!(
                "unknown optimizer `{}` (sgd, nesterov, adamw)",
                self.optimizer
            ))
        })
    }
}

#[derive(Debug)]
pub struct TrainError(pub String);

impl std::fmt::Display for TrainError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}
impl std::error::Error for TrainError {}

impl From<CheckpointError> for TrainError {
    fn from(e: CheckpointError) -> Self {
        TrainError(e.0)
    }
}
impl From<data::DataError> for TrainError {
    fn from(e: data::DataError) -> Self {
        TrainError(e.0)
    }
}

fn terr<T>(m: impl Into<String>) -> Result<T, TrainError> {
    Err(TrainError(m.into()))
}

/// What the host carries between steps.
#[derive(Clone, Debug, PartialEq)]
pub struct State {
    pub params: Vec<Vec<f32>>,
    pub m: Vec<Vec<f32>>,
    pub v: Vec<Vec<f32>>,
    /// Per batch-BN layer (running mean, running var).
    pub running: Vec<(Vec<f32>, Vec<f32>)>,
    /// Updates done (t of the next update is `step + 1`).
    pub step: u64,
    /// The current epoch (0-based) and the updates done in it.
    pub epoch: u64,
    pub batch_in_epoch: u64,
    /// The augmentation stream.
    pub rng: Rng,
    /// The current epoch's partial sums (so a resumed epoch reports the same
    /// mean as an uninterrupted one).
    pub loss_sum: f64,
    pub correct: u64,
    pub seen: u64,
}

/// One update, as logged.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct StepRecord {
    pub step: u64,
    pub epoch: u64,
    pub lr: f64,
    pub loss: f64,
    /// Correct predictions on the batch (before the update), when scored.
    pub correct: Option<u64>,
}

/// One epoch, as logged.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct EpochRecord {
    pub epoch: u64,
    pub steps: u64,
    pub train_loss: f64,
    pub train_acc: Option<f64>,
    pub test_acc: f64,
    /// Wall time of the epoch (excluded from reproducibility comparisons).
    pub seconds: f64,
}

/// A line of `metrics.jsonl`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum MetricsLine {
    Step(StepRecord),
    Epoch(EpochRecord),
}

pub const METRICS_FILE: &str = "metrics.jsonl";

/// A net, its data, its rendered functions, and the host state.
pub struct Session {
    pub cfg: TrainConfig,
    pub optimizer: Optimizer,
    /// The net with its input shape set from the data.
    pub net: NetSpec,
    pub data: Dataset,
    /// The rendered train step the loop executes (at the per-replica batch,
    /// with one all_reduce per gradient when R > 1). The engine prepares it on
    /// the first update; changes after that do not reach the engine.
    pub step_module: Module,
    pub step_sig: StepSignature,
    /// The rendered eval forward (BN Eval world, running statistics).
    pub eval_module: Module,
    pub eval_sig: StepSignature,
    /// The batch-BN logits forward (train accuracy) at the per-replica batch,
    /// when enabled; its signature is `logits_sig`.
    pub train_logits: Option<Module>,
    pub logits_sig: StepSignature,
    pub state: State,
    /// The engine every rendered function runs on (not part of the run's
    /// config: a run may continue on another engine).
    pub engine_options: EngineOptions,
    /// The largest |θ'_r − θ'_0| (also m', v') between replicas so far: 0 with
    /// one replica, and required to be 0 on the native engine.
    pub replica_divergence: f64,
    /// Seconds spent preparing (compiling) functions on the engine so far.
    pub prepare_seconds: f64,
    engine: Box<dyn Engine>,
    step_exec: Option<Box<dyn Prepared>>,
    eval_exec: Option<Box<dyn Prepared>>,
    logits_exec: Option<Box<dyn Prepared>>,
    perm: Option<(u64, Vec<usize>)>,
}

fn host(ty: &ir::TensorType, data: Vec<f32>) -> HostTensor {
    HostTensor::f32(ty.shape.clone(), data)
}

fn scalar(x: f64) -> HostTensor {
    HostTensor::f32(vec![], vec![x as f32])
}

fn f32_data(t: HostTensor, what: &str) -> Result<Vec<f32>, TrainError> {
    match t.data {
        HostData::F32(v) => Ok(v),
        other => terr(format!(
            "{what}: expected f32 data, found {:?}",
            other.elem()
        )),
    }
}

/// Prepares `func` of `module` on `engine` (printing the module for the
/// engines that compile text); returns the executable and its seconds.
fn prepare_on(
    engine: &mut dyn Engine,
    module: &Module,
    func: &str,
    replicas: usize,
) -> Result<(Box<dyn Prepared>, f64), TrainError> {
    let t0 = Instant::now();
    let text = ir::print::print_module(module);
    let p = engine
        .prepare(&text, module, func, replicas)
        .map_err(|e| TrainError(format!("{} engine, @{func}: {e}", engine.name())))?;
    Ok((p, t0.elapsed().as_secs_f64()))
}

fn dims(ty: &ir::TensorType) -> Vec<usize> {
    ty.shape.iter().map(|&d| d as usize).collect()
}

fn argmax(row: &[f32]) -> usize {
    let mut best = 0;
    for (i, &x) in row.iter().enumerate() {
        if x > row[best] {
            best = i;
        }
    }
    best
}

/// The net `cfg.net` adapted to `data`: input channels from the data, spatial
/// size kept (the data is zero-padded to it); classes must match.
pub fn adapt_net(net_name: &str, data: &mut Dataset) -> Result<NetSpec, TrainError> {
    let mut net = layers::net::resolve(net_name).map_err(|e| TrainError(e.to_string()))?;
    let (_, h, w) = net.input;
    data.pad_to(h as usize, w as usize)?;
    net.input.0 = data.shape.0 as i64;
    if data.classes as i64 > net.classes {
        return terr(format!(
            "{}: the data has {} classes, the net {}",
            net.name, data.classes, net.classes
        ));
    }
    Ok(net)
}

impl Session {
    /// Loads the data, adapts the net, renders the step and eval forward, and
    /// initialises the state from the seed; the native engine runs them.
    pub fn new(cfg: TrainConfig) -> Result<Session, TrainError> {
        Session::with_engine(cfg, EngineOptions::native())
    }

    /// [`Session::new`] on the engine `engine` (built now, so a missing plugin
    /// or tool is reported before anything is certified or trained).
    pub fn with_engine(cfg: TrainConfig, engine: EngineOptions) -> Result<Session, TrainError> {
        let optimizer = cfg.optimizer()?;
        if cfg.batch == 0 {
            return terr("--batch must be at least 1");
        }
        let r = cfg.replicas;
        if r == 0 {
            return terr("--replicas must be at least 1");
        }
        if !cfg.batch.is_multiple_of(r) {
            return terr(format!(
                "--batch {} does not split into {r} equal replica shards",
                cfg.batch
            ));
        }
        let built = engine.build().map_err(|e| TrainError(e.0))?;
        let mut data = data::load(&cfg.data)?;
        if cfg.limit_train.is_some() || cfg.limit_test.is_some() {
            data.truncate(
                cfg.limit_train.unwrap_or(usize::MAX),
                cfg.limit_test.unwrap_or(usize::MAX),
            );
        }
        let net = adapt_net(&cfg.net, &mut data)?;
        data.normalize();
        if data.train.len() < cfg.batch {
            return terr(format!(
                "{} training examples are fewer than one batch of {}",
                data.train.len(),
                cfg.batch
            ));
        }
        let b = cfg.batch as i64;
        let shard = (cfg.batch / r) as i64;
        let le = |e: layers::LayerError| TrainError(format!("{}: {e}", net.name));
        let step_opts = StepOptions {
            bf16: cfg.bf16,
            replicas: r,
            ..StepOptions::new(optimizer)
        };
        let step_module = render_train_step_with(&net, shard, &step_opts).map_err(le)?;
        let step_sig = step_signature_with(&net, shard, &step_opts).map_err(le)?;
        let eval_module = render_eval_forward(&net, b).map_err(le)?;
        let eval_sig = eval_signature(&net, b).map_err(le)?;
        let logits_sig = eval_signature(&net, shard).map_err(le)?;
        let train_logits = if cfg.train_accuracy {
            Some(
                render_logits_forward(&net, shard, BnWorld::Batch)
                    .map_err(le)?
                    .module,
            )
        } else {
            None
        };
        let state = initial_state(&net, &step_sig, cfg.seed)?;
        Ok(Session {
            cfg,
            optimizer,
            net,
            data,
            step_module,
            step_sig,
            eval_module,
            eval_sig,
            train_logits,
            logits_sig,
            state,
            engine_options: engine,
            replica_divergence: 0.0,
            prepare_seconds: 0.0,
            engine: built,
            step_exec: None,
            eval_exec: None,
            logits_exec: None,
            perm: None,
        })
    }

    /// The per-replica batch.
    pub fn shard_batch(&self) -> usize {
        self.cfg.batch / self.cfg.replicas
    }

    /// The train step as the engine runs it (prepared on first use).
    pub fn step_exec(&mut self) -> Result<&mut dyn Prepared, TrainError> {
        if self.step_exec.is_none() {
            let (p, s) = prepare_on(
                self.engine.as_mut(),
                &self.step_module,
                &self.step_sig.func,
                self.cfg.replicas,
            )?;
            self.prepare_seconds += s;
            self.step_exec = Some(p);
        }
        Ok(self.step_exec.as_mut().expect("prepared").as_mut())
    }

    fn eval_exec(&mut self) -> Result<&mut dyn Prepared, TrainError> {
        if self.eval_exec.is_none() {
            let (p, s) = prepare_on(
                self.engine.as_mut(),
                &self.eval_module,
                &self.eval_sig.func,
                1,
            )?;
            self.prepare_seconds += s;
            self.eval_exec = Some(p);
        }
        Ok(self.eval_exec.as_mut().expect("prepared").as_mut())
    }

    fn logits_exec(&mut self) -> Result<Option<&mut dyn Prepared>, TrainError> {
        let Some(m) = &self.train_logits else {
            return Ok(None);
        };
        if self.logits_exec.is_none() {
            let (p, s) = prepare_on(self.engine.as_mut(), m, &self.logits_sig.func, 1)?;
            self.prepare_seconds += s;
            self.logits_exec = Some(p);
        }
        Ok(Some(self.logits_exec.as_mut().expect("prepared").as_mut()))
    }

    pub fn steps_per_epoch(&self) -> u64 {
        (self.data.train.len() / self.cfg.batch) as u64
    }
    pub fn total_steps(&self) -> u64 {
        self.steps_per_epoch() * self.cfg.epochs
    }
    pub fn warmup_steps(&self) -> u64 {
        (self.cfg.warmup_epochs * self.steps_per_epoch() as f64).round() as u64
    }

    /// Certifies the rendered step (REFERENCE: the backward IS the VJP, the
    /// tail IS the optimizer) at batch `cert_batch`: the very module trained
    /// with when `cert_batch` is the training batch, else the same renderer's
    /// output at the smaller batch ("fast mode": the certifier runs in f64).
    pub fn certify(&self, cert_batch: usize) -> Result<cert::step::StepTieReport, TrainError> {
        let opts = cert::step::StepTieOptions {
            seed: self.cfg.seed,
            ..Default::default()
        };
        let b = cert_batch as i64;
        // With R > 1 the trained module adds the cross-replica mean, which a
        // one-replica evaluation cannot tie; its per-replica body is the R = 1
        // render, certified here at `cert_batch`.
        let report = if cert_batch == self.cfg.batch && self.cfg.replicas == 1 {
            cert::step::certify_train_step(&self.net, b, self.optimizer, &self.step_module, &opts)
        } else {
            let m = render_train_step(&self.net, b, self.optimizer, self.cfg.bf16)
                .map_err(|e| TrainError(e.to_string()))?;
            cert::step::certify_train_step(&self.net, b, self.optimizer, &m, &opts)
        };
        Ok(report)
    }

    /// The training-set order of epoch `epoch`: a permutation drawn from
    /// `(seed, epoch)` alone, so it does not depend on how the run got there.
    fn permutation(&mut self, epoch: u64) -> &[usize] {
        if self.perm.as_ref().map(|p| p.0) != Some(epoch) {
            let mut r = Rng::derived(self.cfg.seed, 0x5EED_0000 + epoch);
            self.perm = Some((epoch, r.permutation(self.data.train.len())));
        }
        &self.perm.as_ref().unwrap().1
    }

    /// Inputs of an eval-signature function (`x, θ…, running stats`).
    fn eval_inputs(&self, sig: &StepSignature, x: Vec<f32>) -> Vec<HostTensor> {
        let mut params = self.state.params.iter();
        let mut rm = self.state.running.iter().map(|p| &p.0);
        let mut rv = self.state.running.iter().map(|p| &p.1);
        sig.inputs
            .iter()
            .map(|s| match s.kind {
                SlotKind::Images => host(&s.ty, x.clone()),
                SlotKind::Param => host(&s.ty, params.next().unwrap().clone()),
                SlotKind::RunningMean => host(&s.ty, rm.next().unwrap().clone()),
                SlotKind::RunningVar => host(&s.ty, rv.next().unwrap().clone()),
                _ => unreachable!("eval signature slot {:?}", s.kind),
            })
            .collect()
    }

    /// Logits of the eval forward on a batch of `cfg.batch` images.
    fn eval_logits(&mut self, x: Vec<f32>) -> Result<Vec<f32>, TrainError> {
        let inputs = self.eval_inputs(&self.eval_sig, x);
        let func = self.eval_sig.func.clone();
        let out = self
            .eval_exec()?
            .run_one(inputs)
            .map_err(|e| TrainError(format!("running @{func}: {e}")))?;
        f32_data(out.into_iter().next().expect("logits"), &func)
    }

    /// Correct predictions of the batch-BN logits forward on each replica's
    /// shard (the forward the step itself takes), when train accuracy is on.
    fn train_correct(&mut self, x: &[f32], labels: &[usize]) -> Result<Option<u64>, TrainError> {
        if self.train_logits.is_none() {
            return Ok(None);
        }
        let k = self.net.classes as usize;
        let shard = self.shard_batch();
        let per = x.len() / labels.len().max(1);
        let func = self.logits_sig.func.clone();
        let mut correct = 0u64;
        for r in 0..self.cfg.replicas {
            let rows = r * shard..(r + 1) * shard;
            let inputs = self.eval_inputs(
                &self.logits_sig,
                x[rows.start * per..rows.end * per].to_vec(),
            );
            let out = self
                .logits_exec()?
                .expect("train logits enabled")
                .run_one(inputs)
                .map_err(|e| TrainError(format!("running @{func}: {e}")))?;
            let logits = f32_data(out.into_iter().next().expect("logits"), &func)?;
            correct += rows
                .enumerate()
                .filter(|&(i, row)| argmax(&logits[i * k..(i + 1) * k]) == labels[row])
                .count() as u64;
        }
        Ok(Some(correct))
    }

    /// One replica's step inputs: its shard of images and targets, the shared
    /// state and schedule scalars.
    fn step_inputs(&self, x: &[f32], onehot: &[f32], lr: f64, bc: (f64, f64)) -> Vec<HostTensor> {
        let st = &self.state;
        let (mut th, mut mm, mut vv) = (st.params.iter(), st.m.iter(), st.v.iter());
        let mut rm = st.running.iter().map(|p| &p.0);
        let mut rv = st.running.iter().map(|p| &p.1);
        self.step_sig
            .inputs
            .iter()
            .map(|s| match s.kind {
                SlotKind::Images => host(&s.ty, x.to_vec()),
                SlotKind::Param => host(&s.ty, th.next().unwrap().clone()),
                SlotKind::M => host(&s.ty, mm.next().unwrap().clone()),
                SlotKind::V => host(&s.ty, vv.next().unwrap().clone()),
                SlotKind::Lr => scalar(lr),
                SlotKind::Bc1 => scalar(bc.0),
                SlotKind::Bc2 => scalar(bc.1),
                SlotKind::RunningMean => host(&s.ty, rm.next().unwrap().clone()),
                SlotKind::RunningVar => host(&s.ty, rv.next().unwrap().clone()),
                SlotKind::OneHot => host(&s.ty, onehot.to_vec()),
                other => unreachable!("step input slot {other:?}"),
            })
            .collect()
    }

    /// One update on the next batch of the current epoch.
    pub fn train_step(&mut self) -> Result<StepRecord, TrainError> {
        let b = self.cfg.batch;
        let (c, h, w) = self.data.shape;
        let per = c * h * w;
        let k = self.net.classes as usize;
        let epoch = self.state.epoch;
        let start = self.state.batch_in_epoch as usize * b;
        let idx: Vec<usize> = self.permutation(epoch)[start..start + b].to_vec();
        let labels: Vec<usize> = idx
            .iter()
            .map(|&i| self.data.train.labels[i] as usize)
            .collect();
        let mut x = Vec::with_capacity(b * per);
        let mut onehot = vec![0f32; b * k];
        for (row, &i) in idx.iter().enumerate() {
            x.extend_from_slice(&self.data.train.images[i * per..(i + 1) * per]);
            onehot[row * k + labels[row]] = 1.0;
        }
        let aug = Augment {
            crop_pad: self.cfg.crop_pad,
            flip: self.cfg.flip && self.data.flip_ok,
        };
        augment(&mut x, self.data.shape, aug, &mut self.state.rng);

        let t = self.state.step + 1;
        let lr = lr_at(self.cfg.lr, t, self.warmup_steps(), self.total_steps());
        let bc = bias_corrections(t);

        let correct = self.train_correct(&x, &labels)?;

        let replicas = self.cfg.replicas;
        let shard = self.shard_batch();
        let args: Vec<Vec<HostTensor>> = (0..replicas)
            .map(|r| {
                let rows = r * shard..(r + 1) * shard;
                self.step_inputs(
                    &x[rows.start * per..rows.end * per],
                    &onehot[rows.start * k..rows.end * k],
                    lr,
                    bc,
                )
            })
            .collect();
        let func = self.step_sig.func.clone();
        let outs = self
            .step_exec()?
            .run(&args)
            .map_err(|e| TrainError(format!("running @{func}: {e}")))?;
        let outs = outs
            .into_iter()
            .map(|o| {
                o.into_iter()
                    .map(|t| f32_data(t, &func))
                    .collect::<Result<Vec<_>, _>>()
            })
            .collect::<Result<Vec<_>, _>>()?;
        let sig = &self.step_sig;
        // θ', m', v' are one value on every replica: the gradients were
        // averaged across replicas before the tail.
        let mut divergence = 0f64;
        for kind in [SlotKind::Param, SlotKind::M, SlotKind::V] {
            for i in sig.output_positions(kind) {
                for o in &outs[1..] {
                    for (a, b) in o[i].iter().zip(&outs[0][i]) {
                        divergence = divergence.max((a - b).abs() as f64);
                    }
                }
            }
        }
        if divergence != 0.0 && self.engine_options.kind == EngineKind::Native {
            return terr(format!(
                "update {t}: the {replicas} native replicas disagree on the new state by up to {divergence:e} \
                 (the cross-replica mean must give every replica the same bits)"
            ));
        }
        self.replica_divergence = self.replica_divergence.max(divergence);
        let take = |kind| -> Vec<Vec<f32>> {
            sig.output_positions(kind)
                .into_iter()
                .map(|i| outs[0][i].clone())
                .collect()
        };
        // BN statistics are per replica; the running estimate takes their mean.
        let mean_over_replicas = |kind| -> Vec<Vec<f32>> {
            sig.output_positions(kind)
                .into_iter()
                .map(|i| {
                    let mut acc = vec![0f64; outs[0][i].len()];
                    for o in &outs {
                        for (a, &x) in acc.iter_mut().zip(&o[i]) {
                            *a += x as f64;
                        }
                    }
                    acc.iter().map(|a| (a / replicas as f64) as f32).collect()
                })
                .collect()
        };
        let loss_at = sig.output_positions(SlotKind::Loss)[0];
        let loss = outs.iter().map(|o| o[loss_at][0] as f64).sum::<f64>() / replicas as f64;
        if !loss.is_finite() {
            return terr(format!(
                "the loss is {loss} at update {t} (lr {lr:.3e}); lower --lr"
            ));
        }
        let new_params = take(SlotKind::Param);
        let new_m = take(SlotKind::M);
        let new_v = take(SlotKind::V);
        let bmean = mean_over_replicas(SlotKind::BatchMean);
        let bvar = mean_over_replicas(SlotKind::BatchVar);
        let mom = bn_momentum(t);
        let st = &mut self.state;
        for ((run, bm), bv) in st.running.iter_mut().zip(&bmean).zip(&bvar) {
            for (r, &x) in run.0.iter_mut().zip(bm) {
                *r = (1.0 - mom) * *r + mom * x;
            }
            for (r, &x) in run.1.iter_mut().zip(bv) {
                *r = (1.0 - mom) * *r + mom * x;
            }
        }
        st.params = new_params;
        st.m = new_m;
        st.v = new_v;
        st.step = t;
        st.batch_in_epoch += 1;
        st.loss_sum += loss;
        st.correct += correct.unwrap_or(0);
        st.seen += b as u64;
        Ok(StepRecord {
            step: t,
            epoch,
            lr,
            loss,
            correct,
        })
    }

    /// Accuracy of the rendered eval forward (running statistics) on the test
    /// split; the last partial batch is zero-padded and its padding ignored.
    pub fn evaluate(&mut self) -> Result<f64, TrainError> {
        let b = self.cfg.batch;
        let (c, h, w) = self.data.shape;
        let per = c * h * w;
        let k = self.net.classes as usize;
        let total = self.data.test.len();
        let mut correct = 0usize;
        for start in (0..total).step_by(b) {
            let n = b.min(total - start);
            let mut x = vec![0f32; b * per];
            x[..n * per].copy_from_slice(&self.data.test.images[start * per..(start + n) * per]);
            let logits = self.eval_logits(x)?;
            let test = &self.data.test;
            correct += (0..n)
                .filter(|&r| argmax(&logits[r * k..(r + 1) * k]) == test.labels[start + r] as usize)
                .count();
        }
        Ok(correct as f64 / total.max(1) as f64)
    }

    /// Closes the current epoch: its record, then the counters move on.
    pub fn finish_epoch(&mut self, seconds: f64) -> Result<EpochRecord, TrainError> {
        let test_acc = self.evaluate()?;
        let st = &mut self.state;
        let steps = st.batch_in_epoch;
        let rec = EpochRecord {
            epoch: st.epoch,
            steps,
            train_loss: st.loss_sum / steps.max(1) as f64,
            train_acc: self
                .train_logits
                .as_ref()
                .map(|_| st.correct as f64 / st.seen.max(1) as f64),
            test_acc,
            seconds,
        };
        st.epoch += 1;
        st.batch_in_epoch = 0;
        st.loss_sum = 0.0;
        st.correct = 0;
        st.seen = 0;
        Ok(rec)
    }

    /// The checkpoint of the current state (`metrics_len`: the metrics log's
    /// length at this point, restored on resume).
    pub fn to_checkpoint(&self, metrics_len: u64) -> Result<Checkpoint, TrainError> {
        let mut ck = Checkpoint::default();
        let st = &self.state;
        let sig = &self.step_sig;
        let (mut th, mut mm, mut vv) = (st.params.iter(), st.m.iter(), st.v.iter());
        let mut rm = st.running.iter().map(|p| &p.0);
        let mut rv = st.running.iter().map(|p| &p.1);
        for s in &sig.inputs {
            let d = match s.kind {
                SlotKind::Param => th.next(),
                SlotKind::M => mm.next(),
                SlotKind::V => vv.next(),
                SlotKind::RunningMean => rm.next(),
                SlotKind::RunningVar => rv.next(),
                _ => None,
            };
            if let Some(d) = d {
                ck.tensors.insert(s.name.clone(), (dims(&s.ty), d.clone()));
            }
        }
        let cfg = serde_json::to_string(&self.cfg).map_err(|e| TrainError(e.to_string()))?;
        let (c, h, w) = self.net.input;
        for (k, v) in [
            ("config", cfg),
            ("net", self.net.name.clone()),
            ("net_input", format!("{c},{h},{w}")),
            ("step_func", sig.func.clone()),
            ("step", st.step.to_string()),
            ("epoch", st.epoch.to_string()),
            ("batch_in_epoch", st.batch_in_epoch.to_string()),
            ("rng_state", st.rng.state.to_string()),
            ("loss_sum_bits", st.loss_sum.to_bits().to_string()),
            ("correct", st.correct.to_string()),
            ("seen", st.seen.to_string()),
            ("metrics_len", metrics_len.to_string()),
        ] {
            ck.meta.insert(k.into(), v);
        }
        Ok(ck)
    }

    /// Rebuilds a session from a checkpoint: the config it stores, then every
    /// tensor and counter checked against the re-rendered signature.
    pub fn from_checkpoint(ck: &Checkpoint, what: &str) -> Result<Session, TrainError> {
        Session::from_checkpoint_with(ck, what, EngineOptions::native())
    }

    /// [`Session::from_checkpoint`] continuing on the engine `engine`.
    pub fn from_checkpoint_with(
        ck: &Checkpoint,
        what: &str,
        engine: EngineOptions,
    ) -> Result<Session, TrainError> {
        let cfg: TrainConfig = serde_json::from_str(ck.meta_field("config")?)
            .map_err(|e| TrainError(format!("{what}: its run config does not parse: {e}")))?;
        let mut s = Session::with_engine(cfg, engine)?;
        s.restore(ck, what)?;
        Ok(s)
    }

    /// Overwrites the state with the checkpoint's, after checking that it is
    /// this net's (name, input shape, every slot's name and shape).
    pub fn restore(&mut self, ck: &Checkpoint, what: &str) -> Result<(), TrainError> {
        let wrong = |m: String| TrainError(format!("{what}: {m}"));
        let name = ck.meta_field("net")?;
        if name != self.net.name {
            return Err(wrong(format!(
                "it is a checkpoint of net `{name}`, not `{}`",
                self.net.name
            )));
        }
        let (c, h, w) = self.net.input;
        let input = ck.meta_field("net_input")?;
        if input != format!("{c},{h},{w}") {
            return Err(wrong(format!(
                "its net input is {input}, this run's is {c},{h},{w}"
            )));
        }
        let mut st = self.state.clone();
        let (mut params, mut m, mut v, mut rmean, mut rvar) =
            (vec![], vec![], vec![], vec![], vec![]);
        let mut used = 0;
        for s in &self.step_sig.inputs {
            let dest = match s.kind {
                SlotKind::Param => &mut params,
                SlotKind::M => &mut m,
                SlotKind::V => &mut v,
                SlotKind::RunningMean => &mut rmean,
                SlotKind::RunningVar => &mut rvar,
                _ => continue,
            };
            let (shape, data) = ck
                .tensors
                .get(&s.name)
                .ok_or_else(|| wrong(format!("no tensor `{}` (a different net?)", s.name)))?;
            if *shape != dims(&s.ty) {
                return Err(wrong(format!(
                    "tensor `{}` has shape {shape:?}, the net needs {:?}",
                    s.name,
                    dims(&s.ty)
                )));
            }
            dest.push(data.clone());
            used += 1;
        }
        if used != ck.tensors.len() {
            return Err(wrong(format!(
                "{} tensors, the net has {used} slots (a different net?)",
                ck.tensors.len()
            )));
        }
        st.params = params;
        st.m = m;
        st.v = v;
        st.running = rmean.into_iter().zip(rvar).collect();
        st.step = ck.meta_u64("step")?;
        st.epoch = ck.meta_u64("epoch")?;
        st.batch_in_epoch = ck.meta_u64("batch_in_epoch")?;
        st.rng = Rng {
            state: ck.meta_u64("rng_state")?,
        };
        st.loss_sum = f64::from_bits(ck.meta_u64("loss_sum_bits")?);
        st.correct = ck.meta_u64("correct")?;
        st.seen = ck.meta_u64("seen")?;
        if st.batch_in_epoch > self.steps_per_epoch() {
            return Err(wrong(
                "its position in the epoch is past the epoch's end".into(),
            ));
        }
        self.state = st;
        Ok(())
    }
}

/// `n` values of a parameter drawn from its declared init (constant inits
/// draw nothing from `rng`).
pub fn init_values(init: &Init, n: usize, rng: &mut Rng) -> Vec<f32> {
    (0..n)
        .map(|_| match *init {
            Init::Zeros => 0.0,
            Init::Ones => 1.0,
            Init::HeNormal { fan_in } => {
                (rng.normal() * (2.0 / fan_in.max(1) as f64).sqrt()) as f32
            }
            Init::Normal { std } => (rng.normal() * std) as f32,
        })
        .collect()
}

/// θ from each parameter's declared init (a stream derived from the seed),
/// m = v = 0, running mean 0 and variance 1.
pub fn initial_state(net: &NetSpec, sig: &StepSignature, seed: u64) -> Result<State, TrainError> {
    let specs = net.param_specs().map_err(|e| TrainError(e.to_string()))?;
    let mut rng = Rng::derived(seed, 0x1417);
    let params: Vec<Vec<f32>> = specs
        .iter()
        .map(|p| init_values(&p.init, p.ty.num_elements() as usize, &mut rng))
        .collect();
    let zeros: Vec<Vec<f32>> = params.iter().map(|p| vec![0.0; p.len()]).collect();
    let running = sig
        .input_positions(SlotKind::RunningMean)
        .into_iter()
        .map(|i| {
            let n = sig.inputs[i].ty.num_elements() as usize;
            (vec![0.0; n], vec![1.0; n])
        })
        .collect();
    Ok(State {
        params,
        m: zeros.clone(),
        v: zeros,
        running,
        step: 0,
        epoch: 0,
        batch_in_epoch: 0,
        rng: Rng::derived(seed, 0xA06),
        loss_sum: 0.0,
        correct: 0,
        seen: 0,
    })
}

/// How [`run`] reports and what it may be asked to do between steps.
pub struct RunOptions<'a> {
    /// Draw an indicatif progress bar per epoch on stderr.
    pub progress: bool,
    /// Called after each update (and after its checkpoint, if one was due).
    pub after_step: Option<&'a mut dyn FnMut(&StepRecord)>,
    /// Called after each epoch.
    pub after_epoch: Option<&'a mut dyn FnMut(&EpochRecord)>,
}

/// What a finished run reports.
#[derive(Clone, Debug)]
pub struct RunSummary {
    pub epochs: Vec<EpochRecord>,
    pub seconds: f64,
    pub steps: u64,
    pub examples_per_second: f64,
    pub checkpoint: PathBuf,
    pub metrics: PathBuf,
}

/// The metrics log of a run directory, positioned for appending: created
/// empty for a fresh run; for a resumed run, cut back to the length the
/// checkpoint recorded (lines written after it belong to updates that are
/// about to be redone).
fn open_metrics(run_dir: &Path, resume_len: Option<u64>) -> Result<File, TrainError> {
    let p = run_dir.join(METRICS_FILE);
    let io = |e: std::io::Error| TrainError(format!("{}: {e}", p.display()));
    match resume_len {
        None => File::create(&p).map_err(io),
        Some(len) => {
            let f = OpenOptions::new().append(true).open(&p).map_err(io)?;
            let have = f.metadata().map_err(io)?.len();
            if have < len {
                return terr(format!(
                    "{}: {have} bytes, the checkpoint recorded {len} (the log was truncated)",
                    p.display()
                ));
            }
            f.set_len(len).map_err(io)?;
            Ok(f)
        }
    }
}

fn log_line(f: &mut File, line: &MetricsLine) -> Result<u64, TrainError> {
    let mut s = serde_json::to_string(line).map_err(|e| TrainError(e.to_string()))?;
    s.push('\n');
    f.write_all(s.as_bytes())
        .map_err(|e| TrainError(format!("writing the metrics log: {e}")))?;
    Ok(f.metadata().map(|m| m.len()).unwrap_or(0))
}

fn save(session: &Session, log: &mut File, run_dir: &Path) -> Result<(), TrainError> {
    // The log reaches the disk before the checkpoint that points into it.
    log.sync_data()
        .map_err(|e| TrainError(format!("syncing the metrics log: {e}")))?;
    let len = log.metadata().map(|m| m.len()).unwrap_or(0);
    session
        .to_checkpoint(len)?
        .write_atomic(&checkpoint_path(run_dir))?;
    Ok(())
}

/// Trains `session` to the end of its configured epochs in `run_dir`,
/// checkpointing every `checkpoint_every` updates and at each epoch end.
/// `resumed_metrics_len`: `Some(len)` when the session was restored from the
/// run directory's checkpoint.
pub fn run(
    session: &mut Session,
    run_dir: &Path,
    resumed_metrics_len: Option<u64>,
    mut opts: RunOptions,
) -> Result<RunSummary, TrainError> {
    std::fs::create_dir_all(run_dir)
        .map_err(|e| TrainError(format!("{}: {e}", run_dir.display())))?;
    let mut log = open_metrics(run_dir, resumed_metrics_len)?;
    let t0 = Instant::now();
    let mut examples = 0u64;
    let spe = session.steps_per_epoch();
    let b = session.cfg.batch as u64;
    while session.state.epoch < session.cfg.epochs {
        let e0 = Instant::now();
        let epoch = session.state.epoch;
        let bar = if opts.progress {
            indicatif::ProgressBar::new(spe * b)
        } else {
            indicatif::ProgressBar::hidden()
        };
        bar.set_style(
            indicatif::ProgressStyle::with_template(
                "{prefix} [{bar:28}] {pos}/{len} {msg} {per_sec} ETA {eta}",
            )
            .expect("valid template")
            .progress_chars("=> "),
        );
        bar.set_prefix(format!("epoch {}/{}", epoch + 1, session.cfg.epochs));
        bar.set_position(session.state.batch_in_epoch * b);
        bar.reset_eta();
        while session.state.batch_in_epoch < spe {
            let rec = session.train_step()?;
            examples += b;
            log_line(&mut log, &MetricsLine::Step(rec.clone()))?;
            let st = &session.state;
            let acc = if session.train_logits.is_some() {
                format!(
                    " acc {:.1}%",
                    100.0 * st.correct as f64 / st.seen.max(1) as f64
                )
            } else {
                String::new()
            };
            bar.set_message(format!(
                "loss {:.4}{acc} lr {:.2e}",
                st.loss_sum / st.batch_in_epoch as f64,
                rec.lr
            ));
            bar.inc(b);
            let k = session.cfg.checkpoint_every;
            if k > 0 && rec.step % k == 0 && session.state.batch_in_epoch < spe {
                save(session, &mut log, run_dir)?;
            }
            if let Some(f) = opts.after_step.as_mut() {
                f(&rec);
            }
        }
        bar.finish_and_clear();
        let rec = session.finish_epoch(e0.elapsed().as_secs_f64())?;
        log_line(&mut log, &MetricsLine::Epoch(rec.clone()))?;
        save(session, &mut log, run_dir)?;
        if opts.progress {
            eprintln!(
                "epoch {}/{}: train loss {:.4}{}, test acc {:.2}% ({:.1} s)",
                rec.epoch + 1,
                session.cfg.epochs,
                rec.train_loss,
                rec.train_acc
                    .map(|a| format!(", train acc {:.2}%", 100.0 * a))
                    .unwrap_or_default(),
                100.0 * rec.test_acc,
                rec.seconds
            );
        }
        if let Some(f) = opts.after_epoch.as_mut() {
            f(&rec);
        }
    }
    let seconds = t0.elapsed().as_secs_f64();
    Ok(RunSummary {
        epochs: read_epochs(&run_dir.join(METRICS_FILE))?,
        seconds,
        steps: session.state.step,
        examples_per_second: examples as f64 / seconds.max(1e-9),
        checkpoint: checkpoint_path(run_dir),
        metrics: run_dir.join(METRICS_FILE),
    })
}

/// The epoch records of a metrics log.
pub fn read_epochs(path: &Path) -> Result<Vec<EpochRecord>, TrainError> {
    Ok(read_metrics(path)?
        .into_iter()
        .filter_map(|l| match l {
            MetricsLine::Epoch(e) => Some(e),
            _ => None,
        })
        .collect())
}

/// Every line of a metrics log.
pub fn read_metrics(path: &Path) -> Result<Vec<MetricsLine>, TrainError> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| TrainError(format!("{}: {e}", path.display())))?;
    text.lines()
        .enumerate()
        .map(|(i, l)| {
            serde_json::from_str(l)
                .map_err(|e| TrainError(format!("{}:{}: {e}", path.display(), i + 1)))
        })
        .collect()
}

/// Opens a run directory's checkpoint as a session ready to continue (or to
/// be evaluated): `(session, metrics_len)`.
pub fn resume(run_dir: &Path) -> Result<(Session, u64), TrainError> {
    resume_with(run_dir, EngineOptions::native())
}

/// [`resume`] on the engine `engine`.
pub fn resume_with(run_dir: &Path, engine: EngineOptions) -> Result<(Session, u64), TrainError> {
    let p = checkpoint_path(run_dir);
    let ck = Checkpoint::read(&p)?;
    let what = p.display().to_string();
    let s = Session::from_checkpoint_with(&ck, &what, engine)?;
    Ok((s, ck.meta_u64("metrics_len")?))
}
