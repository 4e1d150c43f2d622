//! `certgrad bench step`: a net's rendered train step timed on certgrad's CPU
//! executor (the compiled plan or the op-by-op evaluator), θ, m, v fed back
//! step to step as the trainer does; the report (median/min/max ms, GFLOP/s
//! from the FLOP model, peak RSS, the per-op profile) as text or JSON.

use super::flops::step_flops;
use super::{median, StepArgs};
use anyhow::{anyhow, bail, Result};
use den::{Tensor, Value};
use ir::{ElemType, Module};
use layers::trainstep::{render_step, Optimizer, SlotKind, StepOptions, StepSignature};
use std::time::Instant;

/// Which executor runs the step.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum ExecutorKind {
    /// `exec::Plan`: compiled once, fused loops, buffers reused by liveness.
    Plan,
    /// `den::eval_func::<f32>` with the fast kernels: op by op, every
    /// intermediate materialised.
    Eval,
}

impl ExecutorKind {
    fn describe(self) -> &'static str {
        match self {
            ExecutorKind::Plan => "plan (exec::Plan, compiled f32 executor)",
            ExecutorKind::Eval => "eval_func (den::eval_func, fast f32 kernels)",
        }
    }
    fn name(self) -> &'static str {
        match self {
            ExecutorKind::Plan => "plan",
            ExecutorKind::Eval => "eval_func",
        }
    }
}

/// A prepared executor for one rendered step function.
enum StepRunner<'m> {
    Plan(Box<exec::Plan>),
    Eval { module: &'m Module, func: String },
}

impl<'m> StepRunner<'m> {
    fn new(kind: ExecutorKind, module: &'m Module, func: &str) -> Result<Self> {
        Ok(match kind {
            ExecutorKind::Plan => StepRunner::Plan(Box::new(
                exec::Plan::compile(module, func).map_err(|e| anyhow!("compiling @{func}: {e}"))?,
            )),
            ExecutorKind::Eval => StepRunner::Eval {
                module,
                func: func.to_string(),
            },
        })
    }

    fn can_profile(&self) -> bool {
        matches!(self, StepRunner::Plan(_))
    }

    /// What the executor made of the function (one line), when it says.
    fn summary(&self) -> Option<String> {
        match self {
            StepRunner::Plan(p) => Some(p.summary()),
            StepRunner::Eval { .. } => None,
        }
    }

    fn set_profile(&mut self, on: bool) {
        if let StepRunner::Plan(p) = self {
            if on {
                p.reset_profile();
            }
            p.set_profile(on);
        }
    }

    fn profile(&self) -> Vec<exec::OpTime> {
        match self {
            StepRunner::Plan(p) => p.profile(),
            StepRunner::Eval { .. } => Vec::new(),
        }
    }

    /// One step: the inputs in signature order → the outputs in signature order.
    fn run_step(&mut self, inputs: Vec<Value<f32>>) -> Result<Vec<Value<f32>>> {
        match self {
            StepRunner::Plan(p) => p.run(inputs).map_err(|e| anyhow!("running the plan: {e}")),
            StepRunner::Eval { module, func } => {
                let opts = den::EvalOptions {
                    fast: true,
                    ..Default::default()
                };
                let out = den::eval_func::<f32>(module, func, inputs, &opts)
                    .map_err(|e| anyhow!("evaluating @{func}: {e}"))?;
                Ok(out.outputs)
            }
        }
    }
}

/// `--engine-plan` names the default, the compiled plan; clap refuses it
/// beside `--generic`.
fn pick_executor(a: &StepArgs) -> ExecutorKind {
    if a.engine_plan || !a.generic {
        ExecutorKind::Plan
    } else {
        ExecutorKind::Eval
    }
}

fn f32_value(shape: &[i64], data: Vec<f32>) -> Value<f32> {
    let dims = shape.iter().map(|&d| d as usize).collect();
    Value::Float(Tensor::new(dims, data), ElemType::F32)
}

/// The learning rate of the timed steps.
const BENCH_LR: f64 = 1e-3;

/// The step's inputs and which outputs feed which inputs on the next step.
struct StepState {
    /// Inputs in signature order; the carried slots are taken out while a step runs.
    inputs: Vec<Option<Value<f32>>>,
    /// `(input position, output position)` of θ, m and v.
    carried: Vec<(usize, usize)>,
    loss_at: usize,
}

impl StepState {
    /// θ from the declared init (as the trainer does), m = v = 0, running
    /// mean 0 / variance 1, a random normal batch and random one-hot labels,
    /// lr [`BENCH_LR`] and the bias corrections of t = 1.
    fn new(
        net: &layers::net::NetSpec,
        sig: &StepSignature,
        opt: Optimizer,
        seed: u64,
    ) -> Result<Self> {
        let st = train::session::initial_state(net, sig, seed).map_err(|e| anyhow!("{e}"))?;
        let mut rng = ir::rng::Rng::derived(seed, ir::rng::TRAIN_SALT, 0xBE7C);
        // Small enough that repeated steps on one random batch stay finite
        // (the default lr 0.1 drives BN-free cifar8 to NaN in two steps), and
        // NaN arithmetic is not a representative step.
        let lr = BENCH_LR.min(train::schedule::default_lr(opt));
        let (bc1, bc2) = train::schedule::bias_corrections(1);
        let (mut th, mut mm, mut vv) = (st.params.into_iter(), st.m.into_iter(), st.v.into_iter());
        let mut rm = st.running.iter().map(|p| p.0.clone());
        let mut rv = st.running.iter().map(|p| p.1.clone());
        let mut inputs = Vec::with_capacity(sig.inputs.len());
        for s in &sig.inputs {
            let n = s.ty.num_elements() as usize;
            let missing = || anyhow!("the signature's slot `{}` has no initial value", s.name);
            let data = match s.kind {
                SlotKind::Images => (0..n).map(|_| rng.normal() as f32).collect(),
                SlotKind::Param => th.next().ok_or_else(missing)?,
                SlotKind::M => mm.next().ok_or_else(missing)?,
                SlotKind::V => vv.next().ok_or_else(missing)?,
                SlotKind::Lr => vec![lr as f32],
                SlotKind::Bc1 => vec![bc1 as f32],
                SlotKind::Bc2 => vec![bc2 as f32],
                SlotKind::RunningMean => rm.next().ok_or_else(missing)?,
                SlotKind::RunningVar => rv.next().ok_or_else(missing)?,
                SlotKind::OneHot => {
                    let classes = s.ty.shape[1] as usize;
                    let mut d = vec![0f32; n];
                    for row in d.chunks_mut(classes) {
                        row[rng.below(classes)] = 1.0;
                    }
                    d
                }
                other => bail!("unexpected step input slot {other:?} (`{}`)", s.name),
            };
            if data.len() != n {
                bail!("slot `{}`: {} values for {}", s.name, data.len(), s.ty);
            }
            inputs.push(Some(f32_value(&s.ty.shape, data)));
        }
        let mut carried = Vec::new();
        for (i, s) in sig.inputs.iter().enumerate() {
            if matches!(s.kind, SlotKind::Param | SlotKind::M | SlotKind::V) {
                let o = sig
                    .outputs
                    .iter()
                    .position(|t| t.kind == s.kind && t.name == s.name)
                    .ok_or_else(|| anyhow!("no output slot for the carried input `{}`", s.name))?;
                carried.push((i, o));
            }
        }
        let loss_at = *sig
            .output_positions(SlotKind::Loss)
            .first()
            .ok_or_else(|| anyhow!("the step has no loss output"))?;
        Ok(StepState {
            inputs,
            carried,
            loss_at,
        })
    }

    /// The next step's inputs: the carried slots moved out, the rest cloned.
    fn take_inputs(&mut self) -> Vec<Value<f32>> {
        let mut out = Vec::with_capacity(self.inputs.len());
        for (i, slot) in self.inputs.iter_mut().enumerate() {
            let v = if self.carried.iter().any(|&(c, _)| c == i) {
                slot.take()
            } else {
                slot.clone()
            };
            out.push(v.expect("carried slot refilled after every step"));
        }
        out
    }

    /// Feeds θ', m', v' back; returns the step's loss.
    fn absorb(&mut self, mut outputs: Vec<Value<f32>>) -> Result<f64> {
        let loss = outputs
            .get(self.loss_at)
            .and_then(|v| v.as_float())
            .and_then(|t| t.data.first().copied())
            .ok_or_else(|| anyhow!("the step returned no scalar loss"))? as f64;
        for &(i, o) in &self.carried {
            let v = std::mem::replace(
                outputs
                    .get_mut(o)
                    .ok_or_else(|| anyhow!("the step returned too few outputs"))?,
                Value::Float(Tensor::new(vec![0], vec![]), ElemType::F32),
            );
            self.inputs[i] = Some(v);
        }
        Ok(loss)
    }
}

/// Peak resident set size of this process in KiB (VmHWM), or why it is unknown.
fn peak_rss_kib() -> Result<u64, String> {
    let status = std::fs::read_to_string("/proc/self/status")
        .map_err(|e| format!("/proc/self/status unreadable ({e})"))?;
    let line = status
        .lines()
        .find(|l| l.starts_with("VmHWM:"))
        .ok_or("no VmHWM line in /proc/self/status")?;
    line.trim_start_matches("VmHWM:")
        .trim()
        .trim_end_matches("kB")
        .trim()
        .parse()
        .map_err(|e| format!("VmHWM unparsable ({e}): {line}"))
}

/// Runs `n` steps, returning each one's wall time in ms and the last loss.
fn run_steps(
    runner: &mut StepRunner,
    state: &mut StepState,
    n: usize,
    label: &str,
) -> Result<(Vec<f64>, f64)> {
    let mut times = Vec::with_capacity(n);
    let mut loss = f64::NAN;
    let started = Instant::now();
    for i in 0..n {
        let inputs = state.take_inputs();
        let t0 = Instant::now();
        let outputs = runner.run_step(inputs)?;
        let ms = t0.elapsed().as_secs_f64() * 1e3;
        loss = state.absorb(outputs)?;
        times.push(ms);
        // A line per step once the phase runs long enough to look stuck.
        if started.elapsed().as_secs_f64() > 2.0 {
            eprintln!("  {label} {}/{n}: {ms:.1} ms", i + 1);
        }
    }
    Ok((times, loss))
}

pub(super) fn bench_step(a: &StepArgs) -> Result<()> {
    if a.batch < 1 {
        bail!("--batch must be at least 1, got {}", a.batch);
    }
    if a.iters < 1 {
        bail!("--iters must be at least 1");
    }
    let opt = Optimizer::parse(&a.optimizer).ok_or_else(|| {
        let known: Vec<&str> = Optimizer::ALL.iter().map(|o| o.name()).collect();
        anyhow!(
            "unknown optimizer `{}` (known: {})",
            a.optimizer,
            known.join(", ")
        )
    })?;
    let kind = pick_executor(a);
    let net = layers::net::resolve(&a.net).map_err(|e| anyhow!("{e}"))?;
    let t0 = Instant::now();
    let rendered = render_step(
        &net,
        a.batch,
        &StepOptions {
            bf16: a.bf16,
            ..StepOptions::new(opt)
        },
    )
    .map_err(|e| anyhow!("{}: rendering the step: {e}", net.name))?;
    let (module, sig) = (&rendered.module, &rendered.signature);
    let render_ms = t0.elapsed().as_secs_f64() * 1e3;
    let flops = step_flops(module, &sig.func)?;
    let mut state = StepState::new(&net, sig, opt, a.seed)?;
    let t0 = Instant::now();
    let mut runner = StepRunner::new(kind, module, &sig.func)?;
    let prepare_ms = t0.elapsed().as_secs_f64() * 1e3;
    if a.profile && !runner.can_profile() {
        bail!(
            "--profile needs per-op timings, which only the compiled executor records \
             (exec::Plan; {} does not)",
            kind.name()
        );
    }
    eprintln!(
        "bench: {} {} step at batch {} on {}: {} warm-up + {} timed steps",
        net.name,
        opt.name(),
        a.batch,
        kind.name(),
        a.warmup,
        a.iters
    );
    let (_, first_loss) = if a.warmup > 0 {
        run_steps(&mut runner, &mut state, a.warmup, "warm-up")?
    } else {
        (Vec::new(), f64::NAN)
    };
    let (times, last_loss) = run_steps(&mut runner, &mut state, a.iters, "timed")?;
    let mut sorted = times.clone();
    sorted.sort_by(f64::total_cmp);
    let (med, min, max) = (median(&sorted), sorted[0], sorted[sorted.len() - 1]);

    let mut profile_rows = Vec::new();
    let mut profile_ms = 0.0;
    if a.profile {
        runner.set_profile(true);
        let (ptimes, _) = run_steps(&mut runner, &mut state, a.iters, "profiled")?;
        runner.set_profile(false);
        profile_ms = ptimes.iter().sum::<f64>() / ptimes.len() as f64;
        profile_rows = runner.profile();
        profile_rows.sort_by_key(|r| std::cmp::Reverse(r.nanos));
    }
    let rss = peak_rss_kib();
    let gflops = flops as f64 / (med * 1e-3) / 1e9;
    if !last_loss.is_finite() {
        eprintln!(
            "warning: the loss became {last_loss} during the run; timings of non-finite \
             arithmetic may not be representative"
        );
    }

    let steps = a.iters as f64;
    if a.json {
        let profile: Vec<serde_json::Value> = profile_rows
            .iter()
            .map(|r| {
                serde_json::json!({
                    "op": r.op,
                    "calls": r.calls,
                    "ms_per_step": r.nanos as f64 / 1e6 / steps,
                    "flops_per_step": r.flops as f64 / steps,
                })
            })
            .collect();
        let j = serde_json::json!({
            "net": net.name,
            "batch": a.batch,
            "optimizer": opt.name(),
            "bf16": a.bf16,
            "executor": kind.name(),
            "executor_summary": runner.summary(),
            "warmup": a.warmup,
            "iters": a.iters,
            "ms": { "median": med, "min": min, "max": max, "all": times },
            "flops_per_step": flops,
            "gflops_per_s": gflops,
            "peak_rss_kib": rss.as_ref().ok(),
            "peak_rss_unavailable": rss.as_ref().err(),
            "render_ms": render_ms,
            "prepare_ms": prepare_ms,
            "loss": { "after_warmup": first_loss, "last": last_loss },
            "profile": if a.profile { Some(profile) } else { None },
            "profile_ms_per_step": if a.profile { Some(profile_ms) } else { None },
        });
        println!("{}", serde_json::to_string_pretty(&j)?);
        return Ok(());
    }

    println!(
        "{} {} train step, batch {}{}, on {}",
        net.name,
        opt.name(),
        a.batch,
        if a.bf16 { " (bf16 conv/dot)" } else { "" },
        kind.describe()
    );
    println!(
        "  ms/step   median {med:.2}   min {min:.2}   max {max:.2}   ({} timed after {} warm-up)",
        a.iters, a.warmup
    );
    println!(
        "  work      {:.3} GFLOP/step (convolution + dot_general, real taps)  →  {gflops:.2} GFLOP/s at the median",
        flops as f64 / 1e9
    );
    if let Some(sum) = runner.summary() {
        println!("  executor  {sum}");
    }
    match &rss {
        Ok(kib) => println!(
            "  peak RSS  {:.1} MiB (VmHWM, whole process)",
            *kib as f64 / 1024.0
        ),
        Err(why) => println!("  peak RSS  unavailable: {why}"),
    }
    println!(
        "  setup     render {render_ms:.0} ms, executor preparation {prepare_ms:.0} ms; loss {first_loss:.4} → {last_loss:.4}"
    );
    if a.profile {
        print_profile(&profile_rows, steps, profile_ms);
    }
    Ok(())
}

fn print_profile(rows: &[exec::OpTime], steps: f64, step_ms: f64) {
    let total_ms: f64 = rows.iter().map(|r| r.nanos as f64 / 1e6).sum::<f64>() / steps;
    println!(
        "  per-op profile ({} profiled steps, {step_ms:.2} ms/step wall, {total_ms:.2} ms in ops; GFLOP/s from the plan's own FLOP count):",
        steps as u64
    );
    println!(
        "    {:<36} {:>8} {:>10} {:>7} {:>9}",
        "op", "calls", "ms/step", "%", "GFLOP/s"
    );
    for r in rows.iter().take(15) {
        let ms = r.nanos as f64 / 1e6 / steps;
        let gf = if r.flops > 0 && r.nanos > 0 {
            format!("{:.2}", r.flops as f64 / r.nanos as f64)
        } else {
            "-".into()
        };
        println!(
            "    {:<36} {:>8} {:>10.3} {:>6.1}% {:>9}",
            r.op,
            r.calls,
            ms,
            100.0 * ms / step_ms.max(f64::MIN_POSITIVE),
            gf
        );
    }
    if rows.len() > 15 {
        let rest: f64 = rows[15..].iter().map(|r| r.nanos as f64).sum::<f64>() / 1e6 / steps;
        println!(
            "    {:<36} {:>8} {:>10.3} {:>6.1}%",
            format!("({} more)", rows.len() - 15),
            "",
            rest,
            100.0 * rest / step_ms.max(f64::MIN_POSITIVE)
        );
    }
}
