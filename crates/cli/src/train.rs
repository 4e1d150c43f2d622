//! `certgrad train` and `certgrad eval`: the command-line shell over the
//! `train` crate. Train certifies the rendered step first (a step that is not
//! certified is never trained with), runs the host loop with a progress bar,
//! writes metrics, checkpoints and a plot to the run directory, and prints a
//! one-screen summary; eval scores a run directory's latest checkpoint. Both
//! run the rendered functions on the engine `--engine` names (native by
//! default; `pjrt` with a plugin, `iree`), the step data-parallel over
//! `--replicas` replicas.

use anyhow::{bail, Result};
use clap::Args;
use engines::select::EngineOptions;
use std::path::{Path, PathBuf};
use std::time::Instant;
use train::{checkpoint_path, session, RunOptions, Session, TrainConfig};

/// Where the rendered functions run.
#[derive(Args, Clone)]
pub struct EngineArgs {
    /// native (certgrad's f32 executor), pjrt (XLA or another PJRT backend
    /// through --pjrt-plugin) or iree (iree-compile + iree-run-module).
    #[arg(long, default_value = "native")]
    pub engine: String,
    /// The PJRT plugin .so (default: $CERTGRAD_PJRT_PLUGIN), e.g. libpjrt_cpu.so
    /// or jax-cuda12-pjrt's xla_cuda_plugin.so.
    #[arg(long)]
    pub pjrt_plugin: Option<PathBuf>,
    /// Directory holding iree-compile and iree-run-module (default: the PATH,
    /// then ~/.cache/certgrad/venv/bin).
    #[arg(long)]
    pub iree_dir: Option<PathBuf>,
}

impl EngineArgs {
    /// `--pjrt-plugin` and `--iree-dir` configure one engine each: given
    /// while neither `--engine` nor the shadow engine (`train --steps
    /// --shadow-engine`) is that engine, they are refused by name.
    pub fn check_used(&self, shadow: Option<&str>) -> Result<()> {
        let uses = |kind: &str| self.engine == kind || shadow == Some(kind);
        if self.pjrt_plugin.is_some() && !uses("pjrt") {
            bail!(
                "--pjrt-plugin names the plugin of the pjrt engine; --engine {} does not load one \
                 (add --engine pjrt)",
                self.engine
            );
        }
        if self.iree_dir.is_some() && !uses("iree") {
            bail!(
                "--iree-dir locates the iree engine's tools; --engine {} does not run them \
                 (add --engine iree)",
                self.engine
            );
        }
        Ok(())
    }

    pub fn options(&self) -> Result<EngineOptions> {
        EngineOptions::from_cli(
            &self.engine,
            self.pjrt_plugin.clone(),
            self.iree_dir.clone(),
        )
        .map_err(|e| anyhow::anyhow!("{e}"))
    }
}

#[derive(Args)]
pub struct TrainArgs {
    /// A built-in net (see `certgrad nets`) or a net file; its input channels
    /// follow the data (28×28×1 images are zero-padded to the net's size).
    #[arg(default_value = "cifar8-bbn")]
    pub net: String,
    /// `builtin` (embedded Fashion-MNIST subset, 2,000 train / 1,000 test),
    /// `fashion-mnist` (the full set from Debian's dataset-fashion-mnist), or a
    /// directory of IDX files or CIFAR-10 binary batches.
    #[arg(long, default_value = "builtin")]
    pub data: String,
    /// sgd, nesterov, adamw, momentum (heavy-ball with coupled L2), rmsprop
    /// (TF form) or lamb; formulas in `certgrad render --help`.
    #[arg(long, default_value = "nesterov")]
    pub optimizer: String,
    #[command(flatten)]
    pub recipe: Box<crate::render::RecipeArgs>,
    #[arg(long, default_value_t = 5)]
    pub epochs: u64,
    #[arg(long, default_value_t = 128)]
    pub batch: usize,
    /// Peak learning rate (default: sgd 0.1, nesterov 0.02, adamw 1e-3,
    /// momentum 0.02, rmsprop 0.045, lamb 8e-3).
    #[arg(long)]
    pub lr: Option<f64>,
    /// Linear warmup length in epochs, then cosine decay.
    #[arg(long, default_value_t = 1.0)]
    pub warmup_epochs: f64,
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
    /// Run directory (metrics.jsonl, checkpoint.safetensors, plot.png).
    /// Default: runs/NET-OPTIMIZER (-2, -3, … when that one holds a run).
    #[arg(long)]
    pub out: Option<PathBuf>,
    /// Continue the run in --out from its checkpoint (its stored config wins).
    #[arg(long)]
    pub resume: bool,
    /// With --resume: load a checkpoint that has no checksum (written before
    /// certgrad checked checkpoints, or damaged) instead of refusing it.
    #[arg(long, requires = "resume")]
    pub allow_unverified_checkpoint: bool,
    /// bf16 conv/dot operands with f32 accumulation.
    #[arg(long)]
    pub bf16: bool,
    /// Skip certifying the step before training.
    #[arg(long)]
    pub no_certify: bool,
    /// Batch of the pre-training certification. Default: the trained module
    /// itself (the step at --batch), unless a batch-2 twin estimates its tie
    /// over 60 s or half the available memory, in which case the twin is
    /// what is certified (and the output says so). --certify-batch B (the
    /// training batch) certifies the trained module whatever it costs; a
    /// smaller N a twin of the same renderer at N.
    #[arg(long, conflicts_with = "no_certify")]
    pub certify_batch: Option<usize>,
    /// Random-crop padding in pixels (0: off).
    #[arg(long, default_value_t = 0)]
    pub crop_pad: usize,
    /// No random horizontal flip (applied to CIFAR-style data only).
    #[arg(long)]
    pub no_flip: bool,
    /// Skip scoring training batches (saves one forward per step).
    #[arg(long)]
    pub no_train_acc: bool,
    /// Checkpoint every K updates as well as at epoch ends (0: epoch ends only).
    #[arg(long, default_value_t = 0)]
    pub checkpoint_every: u64,
    /// Use only the first N training examples.
    #[arg(long)]
    pub limit_train: Option<usize>,
    /// Use only the first N test examples.
    #[arg(long)]
    pub limit_test: Option<usize>,
    /// No progress bar.
    #[arg(long)]
    pub quiet: bool,
    #[command(flatten)]
    pub engine: EngineArgs,
    /// Data-parallel replicas: --batch is the global batch, split into R
    /// equal shards (one per device on PJRT; BN statistics per shard).
    #[arg(long, default_value_t = 1)]
    pub replicas: usize,
    /// Measure instead of training: run N updates from the initial state,
    /// print each loss (not with --quiet) and the step time; no run
    /// directory is written, so --out and --checkpoint-every are refused.
    #[arg(long, conflicts_with_all = ["out", "checkpoint_every"])]
    pub steps: Option<u64>,
    /// With --steps: also run every update on this engine from the same
    /// state (same plugin/IREE options) and print how far its loss and θ'
    /// are from the primary engine's; the primary's state carries on.
    #[arg(long, requires = "steps")]
    pub shadow_engine: Option<String>,
    /// The ids of the arguments given on the command line (not defaulted),
    /// filled in by `main` from clap's matches: with `--resume`, a run
    /// setting given that differs from the stored one is refused by name.
    #[arg(skip)]
    pub given: Vec<String>,
}

#[derive(Args)]
pub struct EvalArgs {
    /// A run directory written by `certgrad train`.
    pub run_dir: PathBuf,
    #[command(flatten)]
    pub engine: EngineArgs,
    /// Load a checkpoint that has no checksum instead of refusing it.
    #[arg(long)]
    pub allow_unverified_checkpoint: bool,
}

fn verdict_line(r: &cert::step::StepTieReport) -> String {
    let worst = r
        .blocks
        .iter()
        .map(|b| b.relative_gap)
        .fold(0.0f64, f64::max);
    format!(
        "{} @{} (batch {}, {} parameter blocks, worst gradient gap {:.2e}, tail gap {:.2e}, {:.1} s)",
        match &r.verdict {
            cert::Verdict::Certified => "CERTIFIED".to_string(),
            cert::Verdict::Refuted { block, detail } => format!("REFUTED at {block}: {detail}"),
            cert::Verdict::Undecided { reason } => format!("UNDECIDED: {reason}"),
        },
        r.func,
        r.batch,
        r.blocks.len(),
        worst,
        r.tail_gap,
        r.seconds
    )
}

pub fn train(a: &TrainArgs) -> Result<()> {
    train::checkpoint::set_allow_unverified(a.allow_unverified_checkpoint);
    let opt = layers::trainstep::Optimizer::parse(&a.optimizer).ok_or_else(|| {
        anyhow::anyhow!(
            "--optimizer {}: expected one of {}",
            a.optimizer,
            layers::trainstep::Optimizer::names()
        )
    })?;
    let out = a.out.clone().unwrap_or_else(|| {
        let net = Path::new(&a.net)
            .file_stem()
            .map(|s| s.to_string_lossy().into_owned())
            .unwrap_or_else(|| a.net.clone());
        let base = PathBuf::from("runs").join(format!("{net}-{}", opt.name()));
        // A new run without --out never collides with an earlier one: take the
        // first of runs/NET-OPT, runs/NET-OPT-2, … that holds no checkpoint
        // (with --resume, the plain name is the run to continue).
        if a.resume {
            return base;
        }
        (1..)
            .map(|i| {
                if i == 1 {
                    base.clone()
                } else {
                    PathBuf::from(format!("{}-{i}", base.display()))
                }
            })
            .find(|d| !checkpoint_path(d).exists())
            .expect("an unused run directory")
    });
    let ck = checkpoint_path(&out);
    let engine = a.engine.options()?;
    let (mut s, resumed) = if a.resume {
        let (s, len) = session::resume_with(&out, engine)?;
        if s.cfg.net != a.net {
            bail!(
                "{}: the checkpoint is of a run of `{}`, not `{}`",
                ck.display(),
                s.cfg.net,
                a.net
            );
        }
        check_resumed_recipe(&a.recipe, &s.cfg.recipe, &ck)?;
        check_resumed_config(a, &s.cfg, &ck)?;
        eprintln!(
            "resuming {} at epoch {}, update {} (its stored config: {} epochs, batch {}, {})",
            out.display(),
            s.state.epoch + 1,
            s.state.step,
            s.cfg.epochs,
            s.cfg.batch,
            s.cfg.optimizer
        );
        (s, Some(len))
    } else {
        if ck.exists() {
            bail!(
                "{} already holds a checkpoint; pass --resume to continue it or --out for a new run",
                out.display()
            );
        }
        let cfg = TrainConfig {
            net: a.net.clone(),
            data: a.data.clone(),
            optimizer: opt.name().into(),
            epochs: a.epochs,
            batch: a.batch,
            lr: a.lr.unwrap_or_else(|| train::schedule::default_lr(opt)),
            warmup_epochs: a.warmup_epochs,
            seed: a.seed,
            bf16: a.bf16,
            crop_pad: a.crop_pad,
            flip: !a.no_flip,
            train_accuracy: !a.no_train_acc,
            checkpoint_every: a.checkpoint_every,
            limit_train: a.limit_train,
            limit_test: a.limit_test,
            replicas: a.replicas,
            recipe: train::RecipeConfig {
                clip: a.recipe.clip,
                ema: a.recipe.ema,
                wd_exclude: a.recipe.wd_exclude.clone(),
                accumulate: a.recipe.accumulate,
                loss: Some(a.recipe.loss.clone()),
                weight_decay: a.recipe.weight_decay,
                drop_path: a.recipe.drop_path,
            },
        };
        (Session::with_engine(cfg, engine)?, None)
    };
    let (c, h, w) = s.net.input;
    let (tensors, floats) = s.param_count();
    eprintln!(
        "net {} (input {c}×{h}×{w}, {tensors} tensors, {floats} parameters); data {}: {} train / {} test, {} classes",
        s.net.name,
        s.data.source,
        s.data.train.len(),
        s.data.test.len(),
        s.data.classes
    );
    eprintln!(
        "step @{}: {} updates/epoch at batch {}{}, {} {}, lr {} (warmup {} updates, cosine to {}); engine {}",
        s.step.signature.func,
        s.steps_per_epoch(),
        s.cfg.batch,
        if s.cfg.replicas > 1 {
            format!(" ({} replicas × {})", s.cfg.replicas, s.shard_batch())
        } else {
            String::new()
        },
        s.cfg.optimizer,
        if s.cfg.bf16 { "bf16" } else { "f32" },
        s.cfg.lr,
        s.warmup_steps(),
        s.total_steps(),
        s.engine_options.kind
    );
    if !a.no_certify {
        let choice = match a.certify_batch {
            // `validate::train` refused 0 before anything was loaded.
            Some(n) => train::CertifyChoice::Batch(n),
            None => train::CertifyChoice::Default,
        };
        let c = s.certify_for_training(choice, train::CertifyBudget::default())?;
        for t in &c.twins {
            println!("certify: {} [twin: timing]", verdict_line(t));
        }
        println!("certify: {}", verdict_line(&c.report));
        println!("         {}", c.subject_line(s.cfg.batch));
        if !c.certified() {
            eprintln!("the step is not certified: refusing to train with it");
            return Err(crate::Exit(1).into());
        }
    } else {
        println!("certify: skipped (--no-certify)");
    }
    if let Some(n) = a.steps {
        let mut shadow = match &a.shadow_engine {
            Some(e) => {
                let opts = EngineArgs {
                    engine: e.clone(),
                    ..a.engine.clone()
                }
                .options()?;
                Some(s.on_engine(opts)?)
            }
            None => None,
        };
        return measure_steps(&mut s, n, shadow.as_mut(), a.quiet);
    }
    // Ctrl-C from here on stops at the next update with a checkpoint (before
    // here nothing is trained, and the default action loses nothing).
    train::interrupt::install_sigint_handler();
    let summary = train::run(
        &mut s,
        &out,
        resumed,
        RunOptions {
            progress: !a.quiet,
            after_step: None,
            after_epoch: None,
        },
    )?;
    let plot = out.join("plot.png");
    let title = format!(
        "{} · {} · {} · batch {}",
        s.net.name, s.data.source, s.cfg.optimizer, s.cfg.batch
    );
    train::plot::plot_run(&summary.epochs, &title, &plot)?;
    let last = summary.epochs.last();
    let best = summary
        .epochs
        .iter()
        .map(|e| e.test_acc)
        .fold(0.0f64, f64::max);
    println!("── {} on {} ──", s.net.name, s.data.source);
    println!(
        "epochs {} · updates {} · {:.1} s this session · {:.1} examples/s",
        summary.epochs.len(),
        summary.steps,
        summary.seconds,
        summary.examples_per_second
    );
    if let Some(e) = last {
        println!(
            "final: train loss {:.4}{} · test accuracy {:.2}% (best {:.2}%)",
            e.train_loss,
            e.train_acc
                .map(|x| format!(" · train accuracy {:.2}%", 100.0 * x))
                .unwrap_or_default(),
            100.0 * e.test_acc,
            100.0 * best
        );
    }
    println!("plot       {}", plot.display());
    println!("metrics    {}", summary.metrics.display());
    println!("checkpoint {}", summary.checkpoint.display());
    Ok(())
}

/// A resumed run trains with its stored recipe; a recipe flag given with
/// `--resume` that disagrees with it is an error naming the flag (it would
/// otherwise be ignored without a word), one that repeats it is fine.
fn check_resumed_recipe(
    given: &crate::render::RecipeArgs,
    stored: &train::RecipeConfig,
    ck: &Path,
) -> Result<()> {
    let differs = |flag: &str, theirs: String| {
        anyhow::anyhow!(
            "{flag}: the run in {} was trained with {theirs}; a resumed run keeps its stored \
             recipe (drop the flag, or start a new run with --out)",
            ck.display()
        )
    };
    let show = |o: Option<String>, none: &str| o.unwrap_or_else(|| none.to_string());
    if let Some(c) = given.clip.filter(|c| Some(*c) != stored.clip) {
        let theirs = show(stored.clip.map(|c| format!("--clip {c}")), "no clipping");
        return Err(differs(&format!("--clip {c}"), theirs));
    }
    if let Some(d) = given.ema.filter(|d| Some(*d) != stored.ema) {
        let theirs = show(stored.ema.map(|d| format!("--ema {d}")), "no EMA");
        return Err(differs(&format!("--ema {d}"), theirs));
    }
    if let Some(g) = &given.wd_exclude {
        if stored.wd_exclude.as_deref() != Some(g.as_str()) {
            let theirs = show(
                stored
                    .wd_exclude
                    .as_ref()
                    .map(|w| format!("--wd-exclude {w}")),
                "no --wd-exclude",
            );
            return Err(differs(&format!("--wd-exclude {g}"), theirs));
        }
    }
    if let Some(k) = given.accumulate.filter(|k| Some(*k) != stored.accumulate) {
        let theirs = show(
            stored.accumulate.map(|k| format!("--accumulate {k}")),
            "no accumulation",
        );
        return Err(differs(&format!("--accumulate {k}"), theirs));
    }
    let stored_loss = stored.loss.as_deref().unwrap_or("ce");
    if given.loss != "ce" && given.loss != stored_loss {
        return Err(differs(
            &format!("--loss {}", given.loss),
            format!("--loss {stored_loss}"),
        ));
    }
    if let Some(w) = given
        .weight_decay
        .filter(|w| Some(*w) != stored.weight_decay)
    {
        let theirs = show(
            stored.weight_decay.map(|w| format!("--weight-decay {w}")),
            "the tail's default weight decay",
        );
        return Err(differs(&format!("--weight-decay {w}"), theirs));
    }
    if let Some(r) = given.drop_path.filter(|r| Some(*r) != stored.drop_path) {
        let theirs = show(
            stored.drop_path.map(|r| format!("--drop-path {r}")),
            "no stochastic depth",
        );
        return Err(differs(&format!("--drop-path {r}"), theirs));
    }
    Ok(())
}

/// A resumed run trains with its stored config (data, optimizer, epochs,
/// batch, …); a setting given on the command line with `--resume` that
/// differs from the stored one is an error naming the flag, one that repeats
/// it is fine.
fn check_resumed_config(a: &TrainArgs, stored: &TrainConfig, ck: &Path) -> Result<()> {
    // A setting as the command line spells it.
    let value = |flag: &str, v: String| format!("{flag} {v}");
    let switch = |flag: &str, on: bool| {
        if on {
            flag.to_string()
        } else {
            format!("no {flag}")
        }
    };
    let limit = |flag: &str, v: Option<usize>| match v {
        Some(n) => format!("{flag} {n}"),
        None => format!("no {flag}"),
    };
    let optimizer = layers::trainstep::Optimizer::parse(&a.optimizer)
        .map_or(a.optimizer.clone(), |o| o.name().to_string());
    // (clap id, as given, as stored)
    let settings = [
        (
            "data",
            value("--data", a.data.clone()),
            value("--data", stored.data.clone()),
        ),
        (
            "optimizer",
            value("--optimizer", optimizer),
            value("--optimizer", stored.optimizer.clone()),
        ),
        (
            "epochs",
            value("--epochs", a.epochs.to_string()),
            value("--epochs", stored.epochs.to_string()),
        ),
        (
            "batch",
            value("--batch", a.batch.to_string()),
            value("--batch", stored.batch.to_string()),
        ),
        (
            "lr",
            value("--lr", a.lr.map_or(String::new(), |x| x.to_string())),
            value("--lr", stored.lr.to_string()),
        ),
        (
            "warmup_epochs",
            value("--warmup-epochs", a.warmup_epochs.to_string()),
            value("--warmup-epochs", stored.warmup_epochs.to_string()),
        ),
        (
            "seed",
            value("--seed", a.seed.to_string()),
            value("--seed", stored.seed.to_string()),
        ),
        (
            "bf16",
            switch("--bf16", a.bf16),
            switch("--bf16", stored.bf16),
        ),
        (
            "crop_pad",
            value("--crop-pad", a.crop_pad.to_string()),
            value("--crop-pad", stored.crop_pad.to_string()),
        ),
        (
            "no_flip",
            switch("--no-flip", a.no_flip),
            switch("--no-flip", !stored.flip),
        ),
        (
            "no_train_acc",
            switch("--no-train-acc", a.no_train_acc),
            switch("--no-train-acc", !stored.train_accuracy),
        ),
        (
            "checkpoint_every",
            value("--checkpoint-every", a.checkpoint_every.to_string()),
            value("--checkpoint-every", stored.checkpoint_every.to_string()),
        ),
        (
            "limit_train",
            limit("--limit-train", a.limit_train),
            limit("--limit-train", stored.limit_train),
        ),
        (
            "limit_test",
            limit("--limit-test", a.limit_test),
            limit("--limit-test", stored.limit_test),
        ),
        (
            "replicas",
            value("--replicas", a.replicas.to_string()),
            value("--replicas", stored.replicas.to_string()),
        ),
    ];
    for (id, given, theirs) in settings {
        if a.given.iter().any(|g| g == id) && given != theirs {
            bail!(
                "{given}: the run in {} was trained with {theirs}; a resumed run keeps its \
                 stored settings (drop the flag, or start a new run with --out)",
                ck.display()
            );
        }
    }
    Ok(())
}

/// `--steps N`: N updates from the session's state, each loss printed as
/// `step K loss L` (full precision, for comparisons across engines), then the
/// engine's prepare time and the step time (the first update, which prepares
/// the step, is timed separately). `quiet`: the summary lines only.
fn measure_steps(
    s: &mut Session,
    n: u64,
    mut shadow: Option<&mut Session>,
    quiet: bool,
) -> Result<()> {
    let mut times = Vec::new();
    let (mut worst_loss, mut worst_theta) = (0f64, 0f64);
    for _ in 0..n {
        if s.state.batch_in_epoch >= s.steps_per_epoch() {
            s.state.batch_in_epoch = 0;
            s.state.epoch += 1;
        }
        if let Some(sh) = shadow.as_deref_mut() {
            sh.state = s.state.clone();
        }
        let t0 = Instant::now();
        let prep = s.prepare_seconds;
        let rec = s.train_step()?;
        times.push(t0.elapsed().as_secs_f64() - (s.prepare_seconds - prep));
        match shadow.as_deref_mut() {
            Some(sh) => {
                let other = sh.train_step()?;
                let dl = ((other.loss - rec.loss) / rec.loss).abs();
                let dt = normwise(&sh.state.params, &s.state.params);
                worst_loss = worst_loss.max(dl);
                worst_theta = worst_theta.max(dt);
                if quiet {
                    continue;
                }
                println!(
                    "step {} loss {:.9e} shadow {} loss {:.9e} relative {dl:.3e} θ' norm-wise {dt:.3e}",
                    rec.step, rec.loss, sh.engine_options.kind, other.loss
                );
            }
            None if quiet => {}
            None => println!("step {} loss {:.9e}", rec.step, rec.loss),
        }
    }
    if let Some(sh) = shadow {
        println!(
            "engine {} shadowed by {} over {} updates, each from the same state: max loss relative {worst_loss:.3e}, max θ' norm-wise {worst_theta:.3e}",
            s.engine_options.kind, sh.engine_options.kind, n
        );
    }
    let mut steady: Vec<f64> = times.iter().skip(1).copied().collect();
    steady.sort_by(f64::total_cmp);
    let median = steady.get(steady.len() / 2).copied().unwrap_or(times[0]);
    let how = s.step_exec()?.describe();
    println!(
        "engine {} · {} · prepare {:.2} s · first step {:.1} ms · median step {:.1} ms (min {:.1} ms) over {} steps{}",
        s.engine_options.kind,
        how,
        s.prepare_seconds,
        times.first().copied().unwrap_or(0.0) * 1e3,
        median * 1e3,
        steady.first().copied().unwrap_or(median) * 1e3,
        steady.len(),
        if s.cfg.replicas > 1 {
            format!(
                " · replicas {} agree on θ' to {:e}",
                s.cfg.replicas, s.replica_divergence
            )
        } else {
            String::new()
        }
    );
    Ok(())
}

/// ‖a − b‖ / ‖b‖ over all tensors.
fn normwise(a: &[Vec<f32>], b: &[Vec<f32>]) -> f64 {
    let (mut d, mut n) = (0f64, 0f64);
    for (x, y) in a.iter().zip(b) {
        for (p, q) in x.iter().zip(y) {
            d += (*p as f64 - *q as f64).powi(2);
            n += (*q as f64).powi(2);
        }
    }
    if n > 0.0 {
        (d / n).sqrt()
    } else {
        d.sqrt()
    }
}

pub fn eval(a: &EvalArgs) -> Result<()> {
    train::checkpoint::set_allow_unverified(a.allow_unverified_checkpoint);
    let (mut s, _) = session::resume_with(&a.run_dir, a.engine.options()?)?;
    let acc = s.evaluate()?;
    println!(
        "{}: {} after epoch {} (update {}): test accuracy {:.2}% on {} examples of {}",
        checkpoint_path(&a.run_dir).display(),
        s.net.name,
        s.state.epoch,
        s.state.step,
        100.0 * acc,
        s.data.test.len(),
        s.data.source
    );
    Ok(())
}
