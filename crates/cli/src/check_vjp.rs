//! `certgrad check-vjp FWD.mlir BWD.mlir`: certify that a backward function
//! given as StableHLO IS the VJP of a forward function (`cert::pair`), print
//! the verdict and evidence, optionally as JSON. Exit 0 certified, 1 refuted,
//! 2 usage/parse error, 3 could not decide.

use crate::{load_module, Exit};
use anyhow::{bail, Context, Result};
use cert::pair::{check_pair, merge_pair, PairReport};
use cert::{TieOptions, Verdict};
use serde_json::json;
use std::path::{Path, PathBuf};

pub struct CheckVjpArgs<'a> {
    pub fwd: &'a Path,
    pub bwd: &'a Path,
    pub fwd_func: Option<&'a str>,
    pub bwd_func: Option<&'a str>,
    pub at: &'a [PathBuf],
    pub seed: u64,
    pub probes: usize,
    pub boundary_points: usize,
    pub json: Option<&'a Path>,
}

pub fn check_vjp(args: &CheckVjpArgs) -> Result<()> {
    let fwd = load_module(args.fwd)?;
    let bwd = load_module(args.bwd)?;
    let pair =
        merge_pair(&fwd, &bwd, args.fwd_func, args.bwd_func).map_err(|e| anyhow::anyhow!("{e}"))?;
    let f = pair.module.func(&pair.forward).expect("merged forward");
    let at = if args.at.is_empty() {
        None
    } else {
        if args.at.len() != f.params.len() {
            bail!(
                "@{} takes {} arguments, but {} --at files were given",
                f.name,
                f.params.len(),
                args.at.len()
            );
        }
        let mut vals = Vec::new();
        for (i, (path, p)) in args.at.iter().zip(&f.params).enumerate() {
            vals.push(engines::npy::read_argument(path, i, &p.ty)?);
        }
        Some(vals)
    };
    let opts = TieOptions {
        seed: args.seed,
        probes: args.probes,
        boundary_points: args.boundary_points,
        ..Default::default()
    };
    let report = check_pair(&pair, at.as_deref(), &opts).map_err(|e| anyhow::anyhow!("{e}"))?;
    print_report(args, &report);
    if let Some(path) = args.json {
        let text = serde_json::to_string_pretty(&to_json(args, &report))?;
        std::fs::write(path, text).with_context(|| format!("writing {}", path.display()))?;
    }
    match report.tie.verdict {
        Verdict::Certified => Ok(()),
        Verdict::Refuted { .. } => Err(Exit(1).into()),
        Verdict::Undecided { .. } => Err(Exit(3).into()),
    }
}

fn verdict_word(v: &Verdict) -> &'static str {
    match v {
        Verdict::Certified => "CERTIFIED",
        Verdict::Refuted { .. } => "REFUTED",
        Verdict::Undecided { .. } => "UNDECIDED",
    }
}

fn print_report(args: &CheckVjpArgs, r: &PairReport) {
    let t = &r.tie;
    println!(
        "check-vjp {}:@{} / {}:@{}",
        args.fwd.display(),
        r.forward,
        args.bwd.display(),
        r.backward
    );
    for (i, (ty, cot)) in r.inputs.iter().enumerate() {
        match cot {
            Some(name) => {
                let br = t.block_results.iter().find(|b| &b.name == name);
                let (disc, probes) = br.map_or((0.0, 0), |b| (b.max_rel_discrepancy, b.probes));
                println!(
                    "  a{i}: {ty}  {name}: {} probes, evidence {}, max relative discrepancy {disc:.2e}",
                    probes, t.evidence
                );
            }
            None => println!("  a{i}: {ty}  (integer/boolean: no cotangent check)"),
        }
    }
    println!(
        "  point: {}; {} point(s) certified{}, {} probe(s) per input and point{}{}",
        if r.given_point {
            "given (--at)"
        } else {
            "seeded random"
        },
        t.points,
        if t.boundary_points > 0 {
            format!(" + {} boundary point(s)", t.boundary_points)
        } else {
            String::new()
        },
        t.probes,
        if t.full_jacobian {
            ", full Jacobian compared"
        } else {
            ""
        },
        t.failure_bound
            .map(|b| format!(", P(wrong input passes) ≤ {b:.1e} per point"))
            .unwrap_or_default()
    );
    match &t.min_margin {
        Some(m) => println!("  min margin {:.3e} at {}[{}]", m.margin, m.site, m.index),
        None if t.points > 0 => println!("  min margin: none (the forward takes no decisions)"),
        None => {}
    }
    if !t.flat_ties.is_empty() {
        println!(
            "  ties accepted (forward flat across them, second-difference test): {}",
            t.flat_ties.join("; ")
        );
    }
    if !t.kinks_resampled.is_empty() {
        println!("  kinks resampled: {}", t.kinks_resampled.join("; "));
    }
    if let Some(first) = t.non_finite_resampled.first() {
        println!(
            "  non-finite points resampled (no evidence either way): {}; first: {first}",
            t.non_finite_resampled.len()
        );
    }
    match &t.verdict {
        Verdict::Certified => {}
        Verdict::Refuted { block, detail } => {
            println!("  refuted: {block} is not the VJP's cotangent: {detail}");
            println!("  first departing intermediate: not localised");
        }
        Verdict::Undecided { reason } => println!("  could not decide: {reason}"),
    }
    println!("{} in {:.3} s", verdict_word(&t.verdict), t.seconds);
}

fn to_json(args: &CheckVjpArgs, r: &PairReport) -> serde_json::Value {
    let t = &r.tie;
    let (verdict, detail) = match &t.verdict {
        Verdict::Certified => ("certified", json!(null)),
        Verdict::Refuted { block, detail } => {
            ("refuted", json!({"cotangent": block, "detail": detail}))
        }
        Verdict::Undecided { reason } => ("undecided", json!({ "reason": reason })),
    };
    json!({
        "forward": {"file": args.fwd.display().to_string(), "func": r.forward},
        "backward": {"file": args.bwd.display().to_string(), "func": r.backward},
        "verdict": verdict,
        "detail": detail,
        "evidence": t.evidence.to_string(),
        "seed": args.seed,
        "probes": t.probes,
        "points": t.points,
        "boundary_points": t.boundary_points,
        "given_point": r.given_point,
        "full_jacobian": t.full_jacobian,
        "failure_bound": t.failure_bound,
        "min_margin": t.min_margin.as_ref().map(|m| json!({"site": m.site, "index": m.index, "margin": m.margin})),
        // Per decision site of the forward, and which outcomes its decisions
        // took (the Python package's report shows both).
        "site_margins": t.site_margins.iter().map(|s| json!({
            "site": s.site, "op": s.op, "min": s.min, "argmin": s.argmin, "decisions": s.decisions,
        })).collect::<Vec<_>>(),
        "branch_coverage": t.coverage.iter().map(|c| json!({
            "site": c.site, "op": c.op, "outcome_counts": c.outcomes, "never_taken": c.missing,
        })).collect::<Vec<_>>(),
        "kinks_resampled": t.kinks_resampled,
        "non_finite_resampled": t.non_finite_resampled,
        "flat_ties": t.flat_ties,
        "inputs": r.inputs.iter().enumerate().map(|(i, (ty, cot))| {
            let br = cot.as_ref().and_then(|c| t.block_results.iter().find(|b| &b.name == c));
            json!({
                "arg": i,
                "type": ty.to_string(),
                "cotangent": cot,
                "probes": br.map(|b| b.probes),
                "max_rel_discrepancy": br.map(|b| b.max_rel_discrepancy),
            })
        }).collect::<Vec<_>>(),
        "seconds": t.seconds,
    })
}
