//! The host loop: it executes the RENDERED train step (the `ir::Module` that
//! `layers::trainstep` returned, run by an engine of the `engines` crate:
//! native by default, or XLA through PJRT, or IREE) and nothing else computes
//! a gradient or an update. With R replicas the step is the data-parallel
//! render: the global batch is split into R shards, θ|m|v are replicated, θ'
//! is taken from replica 0 (the others are checked against it), the loss is
//! the mean over replicas. Around it the host does what
//! docs/conventions.md §16 puts outside the graph: batches (per-epoch shuffle from the
//! seed, augmentation), the lr schedule and bias corrections, the running-BN
//! EMA from the step's batch-stat outputs, evaluation with the rendered eval
//! forward, the metrics log and the checkpoints that let a killed run resume
//! bit for bit.
//!
//! This module owns the session itself: the run's config, the host state, the
//! rendered functions and their engine, and how a session is set up from a
//! config. One update and the evaluation are in `step.rs`, what is certified
//! before training in `certify.rs`, checkpoints in and
//! out in `resume.rs`, the epoch loop ([`run()`]) in `run.rs`, the metrics log
//! in `metrics.rs`.

mod certify;
mod metrics;
mod resume;
mod run;
mod step;

pub use certify::{Certification, CertifyBudget, CertifyChoice, Estimate, Subject};
pub use metrics::{read_epochs, read_metrics, EpochRecord, MetricsLine, StepRecord, METRICS_FILE};
pub use resume::{resume, resume_with};
pub use run::{run, RunOptions, RunSummary};

use crate::data::{self, Dataset};
use crate::error::TrainError;
use engines::engine::{Engine, Prepared};
use engines::select::EngineOptions;
use ir::rng::{Rng, TRAIN_SALT};
use ir::Module;
use layers::net::NetSpec;
use layers::ops::norm::BnWorld;
use layers::trainstep::{
    render_eval_forward, render_logits_forward, render_step, Optimizer, Recipe, RecipeFlags,
    Rendered, SlotKind, StepOptions, StepSignature,
};
use layers::{Init, LayerError};
use serde::{Deserialize, Serialize};
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
    /// bf16 operands for conv/dot in the step (docs/conventions.md §19).
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
    /// shards of `batch / R` (BN statistics per shard, docs/conventions.md §18).
    #[serde(default = "one_replica")]
    pub replicas: usize,
    /// The recipe around the optimizer tail, as the CLI spells it.
    #[serde(default)]
    pub recipe: RecipeConfig,
}

fn one_replica() -> usize {
    1
}

/// The recipe flags of a run (`--clip`, `--ema`, `--wd-exclude`,
/// `--accumulate`, `--loss`, `--weight-decay`), stored as spelled and parsed
/// into the typed `Recipe` once per session.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct RecipeConfig {
    pub clip: Option<f64>,
    pub ema: Option<f64>,
    pub wd_exclude: Option<String>,
    /// Micro-batches per update; `batch` is the micro-batch.
    pub accumulate: Option<u32>,
    /// `ce` or `bce` (None: ce).
    pub loss: Option<String>,
    pub weight_decay: Option<f64>,
    /// Stochastic depth's maximum drop rate (`--drop-path`).
    #[serde(default)]
    pub drop_path: Option<f64>,
}

impl TrainConfig {
    pub fn optimizer(&self) -> Result<Optimizer, TrainError> {
        Optimizer::parse(&self.optimizer).ok_or_else(|| {
            TrainError::Run(format!(
                "unknown optimizer `{}` ({})",
                self.optimizer,
                Optimizer::names()
            ))
        })
    }

    /// The typed recipe of the run.
    pub fn recipe(&self) -> Result<Recipe, TrainError> {
        let r = &self.recipe;
        Recipe::from_flags(
            self.optimizer()?,
            &RecipeFlags {
                weight_decay: r.weight_decay,
                clip: r.clip,
                wd_exclude: r.wd_exclude.as_deref(),
                ema: r.ema,
                accumulate: r.accumulate,
                loss: r.loss.as_deref(),
                drop_path: r.drop_path,
            },
        )
        .map_err(|e| TrainError::Run(e.to_string()))
    }
}

impl TrainConfig {
    /// The numbers a run cannot start with: no epoch, a learning rate that is
    /// not a positive finite number, a warmup that is negative or not finite
    /// (`nan` would otherwise train with a NaN schedule), an empty split.
    pub fn check_numbers(&self) -> Result<(), TrainError> {
        if self.epochs == 0 {
            return terr("--epochs must be at least 1");
        }
        if !(self.lr.is_finite() && self.lr > 0.0) {
            return terr(format!(
                "--lr {}: expected a positive finite number",
                self.lr
            ));
        }
        if !(self.warmup_epochs.is_finite() && self.warmup_epochs >= 0.0) {
            return terr(format!(
                "--warmup-epochs {}: expected a finite number of epochs, at least 0",
                self.warmup_epochs
            ));
        }
        if self.limit_train == Some(0) || self.limit_test == Some(0) {
            return terr("--limit-train / --limit-test must keep at least 1 example");
        }
        Ok(())
    }
}

fn terr<T>(m: impl Into<String>) -> Result<T, TrainError> {
    Err(TrainError::Run(m.into()))
}

/// What the host carries between steps.
#[derive(Clone, Debug, PartialEq)]
pub struct State {
    pub params: Vec<Vec<f32>>,
    pub m: Vec<Vec<f32>>,
    pub v: Vec<Vec<f32>>,
    /// The EMA shadow of θ (recipe `ema`; empty otherwise): what eval scores.
    pub shadow: Vec<Vec<f32>>,
    /// The gradient accumulator (recipe `accumulate`; empty otherwise).
    pub accum: Vec<Vec<f32>>,
    /// Per batch-BN layer (running mean, running var).
    pub running: Vec<(Vec<f32>, Vec<f32>)>,
    /// Steps (micro-batches under accumulation) done; the step's optimizer
    /// update is `step / k + 1` with k micro-batches per update.
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

/// A net, its data, its rendered functions, and the host state.
pub struct Session {
    pub cfg: TrainConfig,
    pub optimizer: Optimizer,
    /// The typed recipe around the tail (parsed from `cfg.recipe` once).
    pub recipe: Recipe,
    /// The net with its input shape set from the data.
    pub net: NetSpec,
    pub data: Dataset,
    /// The rendered train step the loop executes (at the per-replica batch,
    /// with one all_reduce per gradient when R > 1): its module, and the
    /// signature and layer spans the render returned with it, which every
    /// part of the run reads (certify, the step's arguments and outputs,
    /// checkpoints) instead of deriving them again. The engine prepares the
    /// module on the first update; changes after that do not reach the engine.
    pub step: Rendered,
    /// The rendered eval forward (BN Eval world, running statistics) at the
    /// global batch.
    pub eval: Rendered,
    /// The batch-BN logits forward (train accuracy) at the per-replica batch,
    /// when enabled.
    pub train_logits: Option<Rendered>,
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
        .map_err(|e| TrainError::Run(format!("{} engine, @{func}: {e}", engine.name())))?;
    Ok((p, t0.elapsed().as_secs_f64()))
}

fn dims(ty: &ir::TensorType) -> Vec<usize> {
    ty.shape.iter().map(|&d| d as usize).collect()
}

/// The net `cfg.net` adapted to `data`: input channels from the data, spatial
/// size kept (the data is zero-padded to it); classes must match.
pub fn adapt_net(net_name: &str, data: &mut Dataset) -> Result<NetSpec, TrainError> {
    let mut net = layers::net::resolve(net_name).map_err(|e| TrainError::Run(e.to_string()))?;
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
        let recipe = cfg.recipe()?;
        if cfg.batch == 0 {
            return terr("--batch must be at least 1");
        }
        cfg.check_numbers()?;
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
        let built = engine.build().map_err(|e| TrainError::Run(e.0))?;
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
        let le = |e: LayerError| TrainError::Run(format!("{}: {e}", net.name));
        let step_opts = StepOptions {
            bf16: cfg.bf16,
            replicas: r,
            recipe,
            ..StepOptions::new(optimizer)
        };
        let step = render_step(&net, shard, &step_opts).map_err(le)?;
        let eval = render_eval_forward(&net, b).map_err(le)?;
        let train_logits = if cfg.train_accuracy {
            Some(render_logits_forward(&net, shard, BnWorld::Batch).map_err(le)?)
        } else {
            None
        };
        let mut state = initial_state(&net, &step.signature, cfg.seed)?;
        if optimizer == Optimizer::RmsProp {
            // TF semantics: the mean square starts at 1 (docs/conventions.md §16).
            state.v.iter_mut().for_each(|v| v.fill(1.0));
        }
        Ok(Session {
            cfg,
            optimizer,
            recipe,
            net,
            data,
            step,
            eval,
            train_logits,
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

    /// This session continued on the engine `engine` (built now): the same
    /// config, net, data, rendered functions and state, none of them loaded
    /// or rendered again; the functions are prepared on `engine` on first use.
    pub fn on_engine(&self, engine: EngineOptions) -> Result<Session, TrainError> {
        let built = engine.build().map_err(|e| TrainError::Run(e.0))?;
        Ok(Session {
            cfg: self.cfg.clone(),
            optimizer: self.optimizer,
            recipe: self.recipe,
            net: self.net.clone(),
            data: self.data.clone(),
            step: self.step.clone(),
            eval: self.eval.clone(),
            train_logits: self.train_logits.clone(),
            state: self.state.clone(),
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

    /// (tensors, floats) of the trainable parameters, read off the step's
    /// signature: `NetSpec::param_count` without building the net again.
    pub fn param_count(&self) -> (usize, i64) {
        let sig = &self.step.signature;
        let params = sig.input_positions(SlotKind::Param);
        let floats = params
            .iter()
            .map(|&i| sig.inputs[i].ty.num_elements())
            .sum();
        (params.len(), floats)
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
                &self.step.module,
                &self.step.signature.func,
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
                &self.eval.module,
                &self.eval.signature.func,
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
            let (p, s) = prepare_on(self.engine.as_mut(), &m.module, &m.signature.func, 1)?;
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
    /// Micro-batches per optimizer update (1 without accumulation).
    pub fn micro_batches(&self) -> u64 {
        self.recipe.accumulate.map_or(1, u64::from)
    }

    /// Certifies the rendered step (docs/certificates.md: the backward IS the
    /// VJP, the tail IS the optimizer) at batch `cert_batch`: the very module trained
    /// with when `cert_batch` is the training batch, else the same renderer's
    /// output at that batch. With R > 1 the trained module adds the
    /// cross-replica mean, which a one-replica evaluation cannot tie: its
    /// per-replica body (the R = 1 render) is certified at `cert_batch`.
    /// [`Session::certify_for_training`] is the pre-training policy.
    pub fn certify(&self, cert_batch: usize) -> Result<cert::step::StepTieReport, TrainError> {
        if cert_batch == self.cfg.batch && self.cfg.replicas == 1 {
            Ok(self.certify_module(cert_batch, &self.step.module))
        } else {
            self.certify_rendered(cert_batch)
        }
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
            Init::Const { value } => value as f32,
        })
        .collect()
}

/// θ from each parameter's declared init (a stream derived from the seed),
/// m = v = 0, running mean 0 and variance 1; the EMA shadow (when the
/// signature has one) starts at θ, the accumulator at 0.
pub fn initial_state(net: &NetSpec, sig: &StepSignature, seed: u64) -> Result<State, TrainError> {
    let specs = net
        .param_specs()
        .map_err(|e| TrainError::Run(e.to_string()))?;
    let mut rng = Rng::derived(seed, TRAIN_SALT, 0x1417);
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
    let has = |k| !sig.input_positions(k).is_empty();
    let shadow = if has(SlotKind::Shadow) {
        params.clone()
    } else {
        Vec::new()
    };
    let accum = if has(SlotKind::Accum) {
        zeros.clone()
    } else {
        Vec::new()
    };
    Ok(State {
        params,
        m: zeros.clone(),
        v: zeros,
        shadow,
        accum,
        running,
        step: 0,
        epoch: 0,
        batch_in_epoch: 0,
        rng: Rng::derived(seed, TRAIN_SALT, 0xA06),
        loss_sum: 0.0,
        correct: 0,
        seen: 0,
    })
}
