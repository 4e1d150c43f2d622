//! `certgrad render NET`: print a net's (built-in or file) train step (single-device or
//! data-parallel over R replicas) or its eval forward as StableHLO, with its
//! max pools' backward in either emitted form, and a summary of its
//! signature, size and render time.

use anyhow::{bail, Context, Result};
use layers::ops::pool::PoolBackward;
use layers::trainstep::{render_eval_forward, render_step, Optimizer, SlotKind, StepOptions};
use std::path::Path;
use std::time::Instant;

pub struct RenderArgs<'a> {
    pub net: &'a str,
    pub optimizer: &'a str,
    pub batch: i64,
    pub bf16: bool,
    pub replicas: usize,
    pub eval: bool,
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
    if a.eval && a.replicas > 1 {
        bail!("--replicas applies to the train step, not to --eval");
    }
    if a.batch < 1 {
        bail!("--batch must be at least 1");
    }
    if a.eval && a.bf16 {
        bail!("--bf16 applies to the train step, not to --eval");
    }
    let t0 = Instant::now();
    let r = if a.eval {
        render_eval_forward(&net, a.batch)
    } else {
        let step = StepOptions {
            optimizer: opt,
            bf16: a.bf16,
            replicas: a.replicas,
        };
        render_step(&net, a.batch, &step)
    }
    .map_err(|e| anyhow::anyhow!("{e}"))?;
    let text = ir::print::print_module(&r.module);
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
    let scatters = f
        .op_counts()
        .iter()
        .find(|(name, _)| *name == "stablehlo.select_and_scatter")
        .map_or(0, |(_, c)| *c);
    if !a.eval {
        println!(
            "  max-pool backward: {} ({scatters} select_and_scatter)",
            a.pool_backward
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
