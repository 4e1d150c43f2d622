//! `certgrad certify-step STEP.mlir`: certify a fused train step certgrad did
//! not write (`cert::fused_step`) — print its roles, then per parameter the
//! value its update reads as the gradient (line and op) and whether that is
//! the gradient of the step's own loss, the recognised optimizer tail, and
//! one verdict. Exit 0 certified, 1 refuted, 2 usage, 3 undecided.

use crate::Exit;
use anyhow::{Context, Result};
use cert::fused_step::{
    certify_fused_step, ArgRole, Finding, FusedStepOptions, FusedStepReport, ResultRole, RoleHints,
    RowStatus, TextNames,
};
use cert::Verdict;
use clap::Args;
use serde_json::json;
use std::path::PathBuf;

#[derive(Args)]
pub struct CertifyStepArgs {
    /// The .mlir file holding the fused step (forward, loss, backward and
    /// update in one function), e.g. `jax.jit(train_step).lower(…).as_text()`.
    pub step: PathBuf,
    /// The step function (default: @main, else the only public function).
    #[arg(long)]
    pub func: Option<String>,
    /// One .npy file per argument, in order, instead of the drawn point.
    #[arg(long, num_args = 1..)]
    pub inputs: Vec<PathBuf>,
    /// Seed of the drawn point and the probe directions.
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
    /// The loss result (an index or its name) when several could be.
    #[arg(long)]
    pub loss: Option<String>,
    /// The parameter arguments (indices or names, comma-separated) instead
    /// of those found.
    #[arg(long, value_delimiter = ',')]
    pub params: Option<Vec<String>>,
    /// Joint probes (at least 2: one measures the scale, the rest check it).
    #[arg(long, default_value_t = 2)]
    pub probes: usize,
    /// Write the roles, rows and verdict as JSON.
    #[arg(long)]
    pub json: Option<PathBuf>,
}

pub fn certify_step(a: &CertifyStepArgs) -> Result<()> {
    let text = std::fs::read_to_string(&a.step)
        .with_context(|| format!("reading {}", a.step.display()))?;
    let name = a.step.display().to_string();
    let module = ir::parse::parse_module(&text, &name).map_err(|e| anyhow::anyhow!("{e}"))?;
    ir::verify::verify_module(&module).map_err(|e| anyhow::anyhow!("{name}: {e}"))?;
    let func = match &a.func {
        Some(f) => {
            let f = f.trim_start_matches('@');
            module
                .func(f)
                .with_context(|| format!("{name}: no function @{f}"))?
        }
        None => module
            .default_entry()
            .with_context(|| format!("{name}: several public functions; choose one with --func"))?,
    };
    let names = TextNames::read(&text, func);
    let inputs = if a.inputs.is_empty() {
        None
    } else {
        if a.inputs.len() != func.params.len() {
            anyhow::bail!(
                "@{} takes {} arguments, but {} --inputs files were given",
                func.name,
                func.params.len(),
                a.inputs.len()
            );
        }
        let mut vals = Vec::new();
        for (i, (path, p)) in a.inputs.iter().zip(&func.params).enumerate() {
            vals.push(engines::npy::read_argument::<f64>(path, i, &p.ty)?);
        }
        Some(vals)
    };
    let opts = FusedStepOptions {
        seed: a.seed,
        probes: a.probes.max(2),
        inputs,
        hints: RoleHints {
            loss: a.loss.clone(),
            params: a.params.clone(),
        },
        progress: Some(|m| eprintln!("certify-step {m}")),
        ..Default::default()
    };
    let report = certify_fused_step(&module, &func.name, &names, &opts)
        .map_err(|e| anyhow::anyhow!("{name}: {e}"))?;
    print_report(&name, &text, &report);
    if let Some(path) = &a.json {
        let text = serde_json::to_string_pretty(&to_json(&name, &report))?;
        std::fs::write(path, text).with_context(|| format!("writing {}", path.display()))?;
    }
    match report.verdict {
        Verdict::Certified => Ok(()),
        Verdict::Refuted { .. } => Err(Exit(1).into()),
        Verdict::Undecided { .. } => Err(Exit(3).into()),
    }
}

/// κ is 1 up to the f32 rounding of the text's constants (a 1/N or a 0.1
/// stored as f32 is off by up to 6e-8 relative).
fn is_one(k: f64) -> bool {
    (k - 1.0).abs() < 1e-6
}

fn role_word(r: &ArgRole) -> String {
    match r {
        ArgRole::Param { output } => format!("parameter → result {output}"),
        ArgRole::State { output } => format!("state → result {output}"),
        ArgRole::Data => "data".into(),
        ArgRole::Labels => "labels".into(),
        ArgRole::Hyper => "hyper-parameter / other".into(),
    }
}

fn status_word(s: &RowStatus) -> String {
    match s {
        RowStatus::Tied => "tied".into(),
        RowStatus::Zero => "tied (zero: the loss does not depend on it)".into(),
        RowStatus::Wrong(w) => format!("WRONG: {w}"),
        RowStatus::NoGradient => "WRONG: no gradient value on every path from the data".into(),
        RowStatus::Unresolved => "not probed alone".into(),
    }
}

/// `file:line:col %name op`; the SSA name is read from the text at the site.
fn place(file: &str, text: &str, s: &cert::fused_step::Site) -> String {
    let ssa = |l: usize, c: usize| {
        let at = text
            .lines()
            .nth(l.wrapping_sub(1))?
            .get(c.wrapping_sub(1)..)?;
        let name = at.split_whitespace().next()?;
        name.starts_with('%').then(|| format!("{name} "))
    };
    match (s.line, s.col) {
        (Some(l), Some(c)) => format!(
            "{file}:{l}:{c} {}{}",
            ssa(l as usize, c as usize).unwrap_or_default(),
            s.op
        ),
        (Some(l), None) => format!("{file}:{l} {}", s.op),
        _ => s.op.to_string(),
    }
}

/// Where the backward of the first wrong gradient goes wrong, in words.
fn localisation_line(file: &str, text: &str, r: &FusedStepReport) -> Option<String> {
    if !matches!(r.verdict, Verdict::Refuted { .. }) {
        return None;
    }
    if r.replicas > 1 {
        return Some(format!(
            "  backward: not followed (a data-parallel step: its backward crosses the {} replicas' all_reduce)",
            r.replicas
        ));
    }
    let Some(l) = &r.localisation else {
        return Some(
            "  backward: no single backward value could be blamed (the gradient itself is wrong; see its row)"
                .into(),
        );
    };
    let short = |s: &cert::fused_step::Site| {
        let p = place(file, text, s);
        p.strip_prefix(&format!("{file}:"))
            .map_or(p.clone(), |x| format!("line {x}"))
    };
    let what = match &l.finding {
        Finding::Scaled { of, ratio } => format!(
            "it is {ratio:.6e}·∂loss/∂({}), where the step's gradients read {}·∂loss/∂θ",
            short(of),
            r.scale.map_or("κ".into(), |k| format!("{k:.6e}"))
        ),
        Finding::TheGradient => {
            "the gradient value itself is computed wrongly from right inputs".into()
        }
        Finding::NotACotangent { tried } => format!(
            "it is not the derivative of the loss at any forward value of its type ({} tried{})",
            tried.len(),
            tried
                .first()
                .map_or(String::new(), |t| format!(", e.g. {}", short(t)))
        ),
    };
    let mut out = format!(
        "  backward: %{}'s gradient first goes wrong at {}: {what}",
        l.param,
        place(file, text, &l.at)
    );
    for (v, a) in &l.reads {
        out.push_str(&format!(
            "\n    it reads {}, which is right: ∂loss/∂({})",
            short(v),
            short(a)
        ));
    }
    Some(out)
}

fn print_report(file: &str, text: &str, r: &FusedStepReport) {
    println!("certify-step {file}:@{}", r.func);
    let count = |f: &dyn Fn(&ArgRole) -> bool| r.roles.args.iter().filter(|a| f(&a.role)).count();
    println!(
        "  roles: loss = result {} (%{}); {} parameters, {} state, {} data, {} hyper/other",
        r.roles.loss,
        r.roles.results[r.roles.loss].name,
        count(&|x| matches!(x, ArgRole::Param { .. })),
        count(&|x| matches!(x, ArgRole::State { .. })),
        count(&|x| matches!(x, ArgRole::Data | ArgRole::Labels)),
        count(&|x| matches!(x, ArgRole::Hyper)),
    );
    for (i, a) in r.roles.args.iter().enumerate() {
        if !matches!(a.role, ArgRole::Param { .. }) {
            println!(
                "    arg {i:<4} %{:<12} {:<24} {}",
                a.name,
                a.ty.to_string(),
                role_word(&a.role)
            );
        }
    }
    let others: Vec<String> = r
        .roles
        .results
        .iter()
        .enumerate()
        .filter(|(_, s)| s.role == ResultRole::Other)
        .map(|(j, s)| format!("{j} (%{})", s.name))
        .collect();
    if !others.is_empty() {
        println!(
            "    results not updating an argument: {}",
            others.join(", ")
        );
    }
    println!(
        "  point: {}; loss {:.6e}; {} dual-number probe(s) of the loss's forward",
        if r.given_point {
            "given (--inputs)"
        } else {
            "drawn"
        },
        r.loss,
        r.probes
    );
    if let Some(k) = r.scale {
        let what = if is_one(k) {
            "the update reads ∂loss/∂θ itself".to_string()
        } else {
            format!(
                "the update reads {k:.6e} × ∂loss/∂θ (stated, not hidden: a learning rate folded in, a sum where the loss is a mean{}); ‖κ·∇L‖ over all parameters = {:.6e}",
                if k < 1.0 { ", a global-norm clip to ‖κ·∇L‖" } else { "" },
                r.gradient_norm
            )
        };
        println!("  scale: {what}");
    }
    // Columns as wide as their longest entry (pytree paths are long).
    let wn = r
        .rows
        .iter()
        .map(|x| x.name.chars().count())
        .max()
        .unwrap_or(0)
        .max(13);
    let wt = r
        .rows
        .iter()
        .map(|x| x.ty.to_string().len())
        .max()
        .unwrap_or(0)
        .max(22);
    println!(
        "  {:<4} {:<w1$} {:<wt$} {:<48} verdict",
        "arg",
        "parameter",
        "type",
        "gradient read by the update",
        w1 = wn + 1
    );
    for row in &r.rows {
        println!(
            "  {:<4} %{:<wn$} {:<wt$} {:<48} {}",
            row.arg,
            row.name,
            row.ty.to_string(),
            row.gradient
                .as_ref()
                .map_or("—".into(), |s| place(file, text, s)),
            status_word(&row.status)
        );
    }
    if let Some((m, at)) = &r.min_margin {
        println!("  smallest decision margin of the loss's forward: {m:.3e} ({at})");
    }
    if r.flat_ties > 0 {
        println!(
            "  {} decision(s) tied at the point, the loss flat across them (second difference; a max over equal branches)",
            r.flat_ties
        );
    }
    match &r.tail.recognised {
        Some(t) => println!("  tail: {t} (fit residual {:.1e})", r.tail.residual),
        None => println!("  tail: {}", r.tail.note),
    }
    for s in &r.tail.states {
        println!("    state %{}…: {}", s.name, s.form);
    }
    if let Some(line) = localisation_line(file, text, r) {
        println!("{line}");
    }
    let phases: Vec<String> = r
        .phases
        .iter()
        .map(|(p, s)| format!("{p} {s:.2} s"))
        .collect();
    println!("  time: {}", phases.join(", "));
    match &r.verdict {
        Verdict::Certified => {
            // Which function the update follows, exactly: κ × the loss.
            let loss = format!(
                "{}the step's own loss (result {}, %{})",
                match r.replicas {
                    1 => String::new(),
                    n => format!("the mean over {n} replicas (each on its own data) of "),
                },
                r.roles.loss,
                r.roles.results[r.roles.loss].name
            );
            let of = match r.scale {
                Some(k) if !is_one(k) => {
                    format!("{k:.6e} × {loss}, not of the loss itself")
                }
                _ => loss,
            };
            println!(
                "CERTIFIED: every parameter's update reads the gradient of {of} (relative gap ≤ {:.1e})",
                r.relative_gap
            )
        }
        Verdict::Refuted { block, detail } => println!("REFUTED: parameter %{block}: {detail}"),
        Verdict::Undecided { reason } => println!("UNDECIDED: {reason}"),
    }
}

fn to_json(file: &str, r: &FusedStepReport) -> serde_json::Value {
    json!({
        "file": file,
        "func": r.func,
        "verdict": match &r.verdict {
            Verdict::Certified => "certified",
            Verdict::Refuted { .. } => "refuted",
            Verdict::Undecided { .. } => "undecided",
        },
        "detail": match &r.verdict {
            Verdict::Certified => String::new(),
            Verdict::Refuted { block, detail } => format!("{block}: {detail}"),
            Verdict::Undecided { reason } => reason.clone(),
        },
        "loss_result": r.roles.loss,
        "scale": r.scale,
        "loss": r.loss,
        "probes": r.probes,
        "relative_gap": r.relative_gap,
        "arguments": r.roles.args.iter().map(|a| json!({
            "name": a.name, "type": a.ty.to_string(), "role": role_word(&a.role),
        })).collect::<Vec<_>>(),
        "parameters": r.rows.iter().map(|row| json!({
            "arg": row.arg,
            "name": row.name,
            "type": row.ty.to_string(),
            "output": row.output,
            "gradient_line": row.gradient.as_ref().and_then(|s| s.line),
            "gradient_op": row.gradient.as_ref().map(|s| s.op),
            "scale": row.scale,
            "status": status_word(&row.status),
        })).collect::<Vec<_>>(),
        "localisation": r.localisation.as_ref().map(|l| json!({
            "param": l.param,
            "line": l.at.line,
            "op": l.at.op,
            "finding": match &l.finding {
                Finding::Scaled { ratio, .. } => format!("scaled by {ratio:e}"),
                Finding::NotACotangent { .. } => "not a cotangent".into(),
                Finding::TheGradient => "the gradient value itself".into(),
            },
            "probes": l.probes,
        })),
        "replicas": r.replicas,
        "tail": r.tail.recognised,
        "tail_note": r.tail.note,
        "tail_states": r.tail.states.iter().map(|s| json!({"argument": s.name, "form": s.form, "fits": s.fits})).collect::<Vec<_>>(),
        "phases": r.phases.iter().map(|(p, s)| json!({"phase": p, "seconds": s})).collect::<Vec<_>>(),
    })
}
