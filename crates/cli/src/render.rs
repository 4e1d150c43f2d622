//! `certgrad render NET`: print a net's (built-in or file) train step (single-device or
//! data-parallel over R replicas) its eval forward or its train-mode forward as StableHLO, with its
//! max pools' backward in either emitted form, and a summary of its
//! signature, size and render time.

use anyhow::{bail, Context, Result};
use layers::ops::pool::PoolBackward;
use layers::trainstep::{
    render_eval_forward, render_step, render_train_forward, tail_formula, Optimizer, Recipe,
    RecipeFlags, SlotKind, StepOptions,
};
use std::path::Path;
use std::time::Instant;

/// The recipe flags around the `--optimizer` tail, shared by `render` and
/// `train` (parsed once into a typed `Recipe`).
#[derive(clap::Args, Clone, Debug)]
pub struct RecipeArgs {
    /// Global-norm clipping before the tail: g <- g·min(1, C/(√Σ_all g² + 1e-6)),
    /// one factor for every tensor (ViT: 1.0).
    #[arg(long, value_name = "C")]
    pub clip: Option<f64>,
    /// EMA shadow of the weights after each update, shadow' = d·shadow + (1−d)·θ',
    /// d = min(DECAY, (1+t)/(10+t)); eval scores the shadow (default DECAY 0.9999).
    #[arg(long, value_name = "DECAY", num_args = 0..=1, default_missing_value = "0.9999")]
    pub ema: Option<f64>,
    /// No weight decay on these groups: norm (γ, β of batch/layer norms), bias
    /// (every other rank-1 tensor), or norm,bias.
    #[arg(long, value_name = "GROUPS")]
    pub wd_exclude: Option<String>,
    /// Gradient accumulation over K micro-batches: G' = akeep·G + g, the tail
    /// consumes G'/K on the K-th (θ, m, v unchanged on the others).
    #[arg(long, value_name = "K")]
    pub accumulate: Option<u32>,
    /// The loss: ce (softmax cross-entropy, mean over B) or bce (a sigmoid per
    /// class, mean over B·K).
    #[arg(long, default_value = "ce")]
    pub loss: String,
    /// The tail's weight decay instead of its default (adamw 1e-4, momentum
    /// 1e-4, rmsprop 4e-5, lamb 0.02); 0 renders no decay.
    #[arg(long, value_name = "WD")]
    pub weight_decay: Option<f64>,
    /// Stochastic depth at maximum drop rate RATE (docs/conventions.md §13): each
    /// drop-path block's branch is scaled per example by a graph input dp{i}
    /// [B] (1/keep or 0, drawn on the host each step; keep on the net's
    /// linear ramp, ConvNeXt 1 − RATE·i/17; ViT both sub-layers of block i,
    /// each its own input, 1 − RATE·i/11).
    #[arg(long, value_name = "RATE")]
    pub drop_path: Option<f64>,
}

impl RecipeArgs {
    /// The recipe flags given on the command line, as spelled (`--loss ce`,
    /// the default, counts as not given): what `render --eval` refuses and a
    /// resumed run compares with its stored recipe.
    pub fn given(&self) -> Vec<String> {
        let mut v = Vec::new();
        if let Some(c) = self.clip {
            v.push(format!("--clip {c}"));
        }
        if let Some(d) = self.ema {
            v.push(format!("--ema {d}"));
        }
        if let Some(g) = &self.wd_exclude {
            v.push(format!("--wd-exclude {g}"));
        }
        if let Some(k) = self.accumulate {
            v.push(format!("--accumulate {k}"));
        }
        if self.loss != "ce" {
            v.push(format!("--loss {}", self.loss));
        }
        if let Some(w) = self.weight_decay {
            v.push(format!("--weight-decay {w}"));
        }
        if let Some(r) = self.drop_path {
            v.push(format!("--drop-path {r}"));
        }
        v
    }

    /// The typed recipe for the tail `opt`; errors name their flag.
    pub fn recipe(&self, opt: Optimizer) -> Result<Recipe> {
        Recipe::from_flags(
            opt,
            &RecipeFlags {
                weight_decay: self.weight_decay,
                clip: self.clip,
                wd_exclude: self.wd_exclude.as_deref(),
                ema: self.ema,
                accumulate: self.accumulate,
                loss: Some(&self.loss),
                drop_path: self.drop_path,
            },
        )
        .map_err(|e| anyhow::anyhow!("{e}"))
    }
}

/// The tails and their update formulas, for `certgrad render --help`.
pub fn tails_help() -> String {
    let mut s = String::from("Optimizer tails (--optimizer; g is the batch-mean gradient):\n");
    for o in Optimizer::EVERY {
        s.push_str(&format!("  {:<9} {}\n", o.name(), tail_formula(o)));
    }
    s.push_str(
        "Modifiers: --clip (before the tail), --wd-exclude, --accumulate, --ema (after the \
         update), --loss bce. A recipe's render starts with a // header listing every formula \
         and baked constant.",
    );
    s
}

pub struct RenderArgs<'a> {
    pub net: &'a str,
    pub optimizer: &'a str,
    pub recipe: &'a RecipeArgs,
    pub batch: i64,
    pub bf16: bool,
    pub replicas: usize,
    pub eval: bool,
    /// The train-mode forward (batch statistics) instead of the train step.
    pub forward: bool,
    /// `select-and-scatter` or `shifted-sums`.
    pub pool_backward: &'a str,
    pub output: &'a Path,
}

/// The CLI spelling of a max-pool backward form.
pub fn parse_pool_backward(s: &str) -> Result<PoolBackward> {
    match s {
        "select-and-scatter" => Ok(PoolBackward::SelectAndScatter),
        "shifted-sums" => Ok(PoolBackward::ShiftedSums),
        _ => bail!("unknown --pool-backward {s:?} (select-and-scatter, shifted-sums)"),
    }
}

pub fn render(a: &RenderArgs) -> Result<()> {
    let net = layers::net::resolve(a.net).map_err(|e| anyhow::anyhow!("{e}"))?;
    let net = net.with_pool_backward(parse_pool_backward(a.pool_backward)?);
    let Some(opt) = Optimizer::parse(a.optimizer) else {
        bail!(
            "unknown optimizer {:?} ({})",
            a.optimizer,
            Optimizer::names()
        );
    };
    if a.replicas < 1 {
        bail!("--replicas must be at least 1");
    }
    // The forward flag given, if any: --eval or --forward.
    let forward_flag = match (a.eval, a.forward) {
        (true, _) => Some("--eval"),
        (false, true) => Some("--forward"),
        (false, false) => None,
    };
    if let (Some(f), true) = (forward_flag, a.replicas > 1) {
        bail!("--replicas applies to the train step, not to {f}");
    }
    if a.batch < 1 {
        bail!("--batch must be at least 1");
    }
    if let (Some(f), true) = (forward_flag, a.bf16) {
        bail!("--bf16 applies to the train step, not to {f}");
    }
    // Every recipe has the same forwards (logits from θ and the running or
    // the batch's statistics): accepting the flags would print a file that
    // looks as if it honoured them. What --ema changes at eval is the
    // weights fed as θ.
    if let (Some(f), Some(flag)) = (forward_flag, a.recipe.given().first()) {
        bail!(
            "{flag} applies to the train step, not to {f}: the forward is the same \
             function for every recipe (with --ema, feed it the EMA shadow as θ, as \
             `certgrad eval RUN_DIR` and the training loop's evaluation do)"
        );
    }
    let t0 = Instant::now();
    let r = if a.eval {
        render_eval_forward(&net, a.batch)
    } else if a.forward {
        render_train_forward(&net, a.batch)
    } else {
        let step = StepOptions {
            optimizer: opt,
            recipe: a.recipe.recipe(opt)?,
            bf16: a.bf16,
            replicas: a.replicas,
        };
        render_step(&net, a.batch, &step)
    }
    .map_err(|e| anyhow::anyhow!("{e}"))?;
    let text = r.text();
    let elapsed = t0.elapsed();
    std::fs::write(a.output, &text).with_context(|| format!("writing {}", a.output.display()))?;
    let f = r.func();
    let total: usize = f.op_counts().iter().map(|(_, c)| c).sum();
    let collectives = f
        .op_counts()
        .iter()
        .find(|(name, _)| *name == "stablehlo.all_reduce")
        .map_or(0, |(_, c)| *c);
    let sig = &r.signature;
    let count = |k| sig.input_positions(k).len();
    println!(
        "@{}: {} inputs -> {} outputs, {} ops ({} in the forward), {} bytes, {} lines, rendered in {:.1} ms -> {}",
        sig.func,
        sig.inputs.len(),
        sig.outputs.len(),
        total,
        r.forward_ops,
        text.len(),
        text.lines().count(),
        elapsed.as_secs_f64() * 1e3,
        a.output.display()
    );
    println!(
        "  inputs: x, {} θ, {} m, {} v, lr/bc1/bc2: {}, running stats: {}, onehot: {}{}",
        count(SlotKind::Param),
        count(SlotKind::M),
        count(SlotKind::V),
        count(SlotKind::Lr) + count(SlotKind::Bc1) + count(SlotKind::Bc2),
        count(SlotKind::RunningMean) + count(SlotKind::RunningVar),
        count(SlotKind::OneHot),
        if a.bf16 {
            " (bf16 conv/dot operands, f32 accumulation)"
        } else {
            ""
        }
    );
    if count(SlotKind::DropPath) > 0 {
        println!(
            "  drop-path keep inputs: {} (dp0… [B], one per drop-path site, drawn on the host)",
            count(SlotKind::DropPath)
        );
    }
    let scatters = f
        .op_counts()
        .iter()
        .find(|(name, _)| *name == "stablehlo.select_and_scatter")
        .map_or(0, |(_, c)| *c);
    if forward_flag.is_none() {
        println!(
            "  max-pool backward: {} ({scatters} select_and_scatter)",
            a.pool_backward
        );
    }
    let (shadow, accum) = (count(SlotKind::Shadow), count(SlotKind::Accum));
    if shadow + accum > 0 {
        println!(
            "  recipe state: {shadow} EMA shadow, {accum} accumulator tensors; host scalars: {}",
            [
                (SlotKind::EmaDecay, "emad"),
                (SlotKind::EmaOneMinus, "oemad"),
                (SlotKind::AccApply, "aup"),
                (SlotKind::AccKeep, "akeep"),
            ]
            .iter()
            .filter(|(k, _)| count(*k) > 0)
            .map(|(_, n)| *n)
            .collect::<Vec<_>>()
            .join(", ")
        );
    }
    if a.replicas > 1 {
        println!(
            "  data-parallel: {} replicas × batch {}, {collectives} all_reduce (sum, then ÷{}) \
             before the optimizer tail; BN statistics and the loss output are per replica",
            a.replicas, a.batch, a.replicas
        );
    }
    Ok(())
}
