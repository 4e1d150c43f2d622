//! `certgrad certify`: tie every op configuration of the catalog (or one op
//! family) to its VJP and print one table row per tie and one verdict.

use anyhow::{bail, Result};
use cert::{certify_layer, TieOptions, TieReport, Verdict};
use layers::ops::{catalog, OpCase};
use serde_json::json;
use std::path::Path;
use std::time::Instant;

pub struct CertifyArgs<'a> {
    pub op: Option<&'a str>,
    pub all_ops: bool,
    pub shape: Option<&'a [i64]>,
    pub seed: u64,
    pub json: Option<&'a Path>,
}

fn margin_cell(r: &TieReport) -> String {
    match &r.min_margin {
        Some(m) => format!("{:.2e} {}", m.margin, m.site),
        None => "smooth".into(),
    }
}

/// Decision outcomes never exercised, or "all" / "-" (no decisions).
fn coverage_cell(r: &TieReport) -> String {
    if r.coverage.is_empty() {
        return "-".into();
    }
    let missing: Vec<String> = r
        .coverage
        .iter()
        .flat_map(|c| c.missing.iter().map(move |m| format!("{}: {m}", c.site)))
        .collect();
    if missing.is_empty() {
        "all".into()
    } else {
        format!("missing {}", missing.join("; "))
    }
}

fn verdict_cell(v: &Verdict) -> &'static str {
    match v {
        Verdict::Certified => "CERTIFIED",
        Verdict::Refuted { .. } => "REFUTED",
        Verdict::Undecided { .. } => "UNDECIDED",
    }
}

/// Returns the process exit status: 0 all certified, 1 otherwise.
pub fn certify(args: &CertifyArgs) -> Result<u8> {
    let mut cases: Vec<OpCase> = catalog();
    if let Some(op) = args.op {
        let known: Vec<&str> = {
            let mut v: Vec<&str> = cases.iter().map(|c| c.op).collect();
            v.dedup();
            v
        };
        cases.retain(|c| c.op == op);
        if cases.is_empty() {
            bail!("unknown op '{op}'; known ops: {}", known.join(", "));
        }
    } else if !args.all_ops {
        bail!("say what to certify: --op NAME or --all-ops (see --help)");
    }
    if let Some(shape) = args.shape {
        for c in &mut cases {
            c.input = ir::TensorType::f32(shape.to_vec());
            c.config = format!("{} @ {:?}", c.config, shape);
        }
    }
    let opts = TieOptions {
        seed: args.seed,
        ..Default::default()
    };
    let t0 = Instant::now();
    println!(
        "{:<16} {:<44} {:<15} {:>6} {:<28} {:<9} {:>8}  verdict",
        "op", "config", "evidence", "probes", "min margin (site)", "branches", "time"
    );
    let mut rows = Vec::new();
    let (mut ok, mut bad) = (0usize, 0usize);
    for c in &cases {
        let r = certify_layer(c.layer.as_ref(), &c.input, &opts);
        let probes = format!("{}×{}", r.probes, r.blocks);
        println!(
            "{:<16} {:<44} {:<15} {:>6} {:<28} {:<9} {:>7.0}ms  {}{}",
            c.op,
            truncate(&c.config, 44),
            r.evidence.to_string() + if r.full_jacobian { "+J" } else { "" },
            probes,
            truncate(&margin_cell(&r), 28),
            coverage_cell(&r),
            r.seconds * 1e3,
            verdict_cell(&r.verdict),
            match &r.verdict {
                Verdict::Certified => String::new(),
                Verdict::Refuted { block, detail } => format!(": {block}: {detail}"),
                Verdict::Undecided { reason } => format!(": {reason}"),
            }
        );
        if r.certified() {
            ok += 1;
        } else {
            bad += 1;
        }
        rows.push(json!({
            "op": c.op,
            "config": c.config,
            "layer": r.layer,
            "input": r.input.to_string(),
            "evidence": r.evidence.to_string(),
            "full_jacobian": r.full_jacobian,
            "probes_per_block": r.probes,
            "blocks": r.blocks,
            "points": r.points,
            "failure_bound_per_point": r.failure_bound,
            "min_margin": r.min_margin.as_ref().map(|m| json!({"site": m.site, "index": m.index, "margin": m.margin})),
            "kinks_resampled": r.kinks_resampled,
            "branch_coverage": r.coverage.iter().map(|c| json!({
                "site": c.site, "op": c.op, "outcome_counts": c.outcomes, "never_taken": c.missing,
            })).collect::<Vec<_>>(),
            "verdict": verdict_cell(&r.verdict),
            "detail": match &r.verdict {
                Verdict::Certified => serde_json::Value::Null,
                Verdict::Refuted { block, detail } => json!({"block": block, "detail": detail}),
                Verdict::Undecided { reason } => json!({"reason": reason}),
            },
            "seconds": r.seconds,
        }));
    }
    let total = t0.elapsed().as_secs_f64();
    let verdict = if bad == 0 {
        format!("CERTIFIED: all {ok} ties hold")
    } else {
        format!("NOT CERTIFIED: {bad} of {} ties failed", ok + bad)
    };
    println!("{verdict} ({total:.1} s, seed {})", args.seed);
    if let Some(path) = args.json {
        let doc = json!({
            "certgrad": env!("CARGO_PKG_VERSION"),
            "seed": args.seed,
            "ties": rows,
            "certified": bad == 0,
            "seconds": total,
        });
        std::fs::write(path, serde_json::to_string_pretty(&doc)?)?;
        println!("certificate written to {}", path.display());
    }
    Ok(if bad == 0 { 0 } else { 1 })
}

fn truncate(s: &str, n: usize) -> String {
    if s.chars().count() <= n {
        s.to_string()
    } else {
        let mut t: String = s.chars().take(n - 1).collect();
        t.push('…');
        t
    }
}
