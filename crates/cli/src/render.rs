//! `certgrad render NET`: print a built-in net's train step (or eval forward)
//! as StableHLO, with a summary of its signature, size and render time.

use anyhow::{bail, Context, Result};
use layers::trainstep::{render_eval_forward_parts, render_train_step_parts, Optimizer, SlotKind};
use std::path::Path;
use std::time::Instant;

pub struct RenderArgs<'a> {
    pub net: &'a str,
    pub optimizer: &'a str,
    pub batch: i64,
    pub bf16: bool,
    pub eval: bool,
    pub output: &'a Path,
}

pub fn render(a: &RenderArgs) -> Result<()> {
    let names: Vec<String> = layers::net::catalog().into_iter().map(|n| n.name).collect();
    let Some(net) = layers::net::by_name(a.net) else {
        bail!("unknown net {:?} (built-in: {})", a.net, names.join(", "));
    };
    let Some(opt) = Optimizer::parse(a.optimizer) else {
        bail!("unknown optimizer {:?} (sgd, nesterov, adamw)", a.optimizer);
    };
    if a.batch < 1 {
        bail!("--batch must be at least 1");
    }
    if a.eval && a.bf16 {
        bail!("--bf16 applies to the train step, not to --eval");
    }
    let t0 = Instant::now();
    let r = if a.eval {
        render_eval_forward_parts(&net, a.batch)
    } else {
        render_train_step_parts(&net, a.batch, opt, a.bf16)
    }
    .map_err(|e| anyhow::anyhow!("{e}"))?;
    let text = ir::print::print_module(&r.module);
    let elapsed = t0.elapsed();
    std::fs::write(a.output, &text).with_context(|| format!("writing {}", a.output.display()))?;
    let f = r.func();
    let total: usize = f.op_counts().iter().map(|(_, c)| c).sum();
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
    Ok(())
}
