//! `certgrad certify`: tie every op configuration of the catalog (or one op
//! family) to its VJP and print one table row per tie and one verdict; with
//! `--controls`, also every negative control the ops carry, one row each,
//! REFUTED beside its certified twin.

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
    /// Probes per block and point (default: `TieOptions`'s).
    pub probes: Option<usize>,
    /// Smooth points per tie (default: `TieOptions`'s).
    pub points: Option<usize>,
    pub seed: u64,
    pub json: Option<&'a Path>,
    /// Also run the negative controls of the chosen ops.
    pub controls: bool,
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
    let mut opts = TieOptions {
        seed: args.seed,
        ..Default::default()
    };
    if let Some(p) = args.probes {
        opts.probes = p;
    }
    if let Some(p) = args.points {
        opts.points = p;
        // Kinks are resampled: leave room for them at every point.
        opts.max_attempts = opts.max_attempts.max(2 * p);
    }
    let t0 = Instant::now();
    println!(
        "at least {} point{} per tie (more while a branch is unexercised), {} probe{} per block and point, seed {}",
        opts.points,
        if opts.points == 1 { "" } else { "s" },
        opts.probes,
        if opts.probes == 1 { "" } else { "s" },
        opts.seed
    );
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
    let control_rows = if args.controls {
        run_controls(&cases, &opts)
    } else {
        Vec::new()
    };
    let controls_failed = control_rows.iter().filter(|r| !r.refuted).count();
    let total = t0.elapsed().as_secs_f64();
    if args.controls {
        if controls_failed == 0 {
            println!(
                "CONTROLS REFUTED: all {} negative controls refuted beside their certified twins",
                control_rows.len()
            );
        } else {
            println!(
                "CONTROLS FAILED: {controls_failed} of {} negative controls not refuted as expected",
                control_rows.len()
            );
        }
    }
    let verdict = if bad == 0 {
        format!("CERTIFIED: all {ok} ties hold")
    } else {
        format!("NOT CERTIFIED: {bad} of {} ties failed", ok + bad)
    };
    println!("{verdict} ({total:.1} s, seed {})", args.seed);
    if let Some(path) = args.json {
        let mut doc = json!({
            "certgrad": env!("CARGO_PKG_VERSION"),
            "seed": args.seed,
            "ties": rows,
            "certified": bad == 0,
            "seconds": total,
        });
        if args.controls {
            doc["controls"] = control_rows.iter().map(|r| r.json.clone()).collect();
            doc["controls_refuted"] = json!(controls_failed == 0);
        }
        std::fs::write(path, serde_json::to_string_pretty(&doc)?)?;
        println!("certificate written to {}", path.display());
    }
    Ok(if bad == 0 && controls_failed == 0 {
        0
    } else {
        1
    })
}

/// One negative control's outcome.
struct ControlRow {
    /// The twin certified and the control was refuted as it expects.
    refuted: bool,
    json: serde_json::Value,
}

/// Tie every control of `cases` and its twin; print one row per control.
fn run_controls(cases: &[OpCase], opts: &TieOptions) -> Vec<ControlRow> {
    println!();
    println!(
        "{:<16} {:<44} {:<32} {:<23} {:>8}  verdict",
        "op", "config", "control", "twin", "time"
    );
    let mut rows = Vec::new();
    for c in cases {
        for ctl in &c.controls {
            let twin = certify_layer(ctl.twin.as_ref(), &ctl.input, opts);
            let r = certify_layer(ctl.layer.as_ref(), &ctl.input, opts);
            // The gate holds when the twin passes and the bug is caught where
            // the control says; a certified control is a gate that let it through.
            let judged = match &r.verdict {
                Verdict::Refuted { block, detail } => ctl.expect.judge(block, detail),
                Verdict::Certified => Err("certified: the bug got through".into()),
                Verdict::Undecided { reason } => Err(format!("undecided: {reason}")),
            };
            let refuted = twin.certified() && judged.is_ok();
            let verdict = match judged {
                Err(why) => format!("NOT REFUTED as expected ({why})"),
                Ok(()) if twin.certified() => "REFUTED".to_string(),
                Ok(()) => format!("REFUTED, but the twin is {}", verdict_cell(&twin.verdict)),
            };
            let detail = match &r.verdict {
                Verdict::Refuted { block, detail } => format!(": {block}: {detail}"),
                _ => String::new(),
            };
            println!(
                "{:<16} {:<44} {:<32} {:<23} {:>7.0}ms  {verdict}{detail}",
                c.op,
                truncate(&ctl.config, 44),
                truncate(&ctl.name, 32),
                format!("{} {}", verdict_cell(&twin.verdict), twin.evidence),
                (twin.seconds + r.seconds) * 1e3,
            );
            rows.push(ControlRow {
                refuted,
                json: json!({
                    "op": c.op,
                    "config": ctl.config,
                    "control": ctl.name,
                    "layer": r.layer,
                    "input": r.input.to_string(),
                    "twin": {
                        "layer": twin.layer,
                        "verdict": verdict_cell(&twin.verdict),
                        "evidence": twin.evidence.to_string(),
                        "seconds": twin.seconds,
                    },
                    "evidence": r.evidence.to_string(),
                    "verdict": verdict_cell(&r.verdict),
                    "expected_blocks": ctl.expect.blocks,
                    "refuted_as_expected": refuted,
                    "detail": match &r.verdict {
                        Verdict::Certified => serde_json::Value::Null,
                        Verdict::Refuted { block, detail } => json!({"block": block, "detail": detail}),
                        Verdict::Undecided { reason } => json!({"reason": reason}),
                    },
                    "seconds": r.seconds,
                }),
            });
        }
    }
    rows
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

/// `certgrad certify NET`: what to certify and how hard.
pub struct NetArgs<'a> {
    /// A built-in net name or a `.toml`/`.json` net file.
    pub net: &'a str,
    pub batch: i64,
    pub seed: u64,
    pub probes: Option<usize>,
    pub points: Option<usize>,
    pub json: Option<&'a Path>,
    /// Certify the stochastic-depth render at this maximum drop rate.
    pub drop_path: Option<f64>,
}

/// One row per block: probes, largest relative discrepancy, verdict.
fn block_rows(tie: &str, r: &TieReport) -> Vec<serde_json::Value> {
    let refuted = match &r.verdict {
        Verdict::Refuted { block, .. } => Some(block.as_str()),
        _ => None,
    };
    let mut rows = Vec::new();
    for b in &r.block_results {
        let verdict = if Some(b.name.as_str()) == refuted {
            "REFUTED"
        } else if b.probes == 0 {
            "not reached"
        } else if r.points == 0 {
            "-"
        } else {
            "ok"
        };
        println!(
            "{:<6} {:<26} {:>6} {:>12.2e}  {}",
            tie, b.name, b.probes, b.max_rel_discrepancy, verdict
        );
        rows.push(json!({
            "block": b.name, "probes": b.probes,
            "max_rel_discrepancy": b.max_rel_discrepancy, "verdict": verdict,
        }));
    }
    rows
}

fn tie_json(r: &TieReport, blocks: Vec<serde_json::Value>) -> serde_json::Value {
    json!({
        "layer": r.layer,
        "input": r.input.to_string(),
        "evidence": r.evidence.to_string(),
        "probes_per_block": r.probes,
        "points": r.points,
        "blocks": blocks,
        "site_margins": r.site_margins.iter().map(|s| json!({
            "site": s.site, "op": s.op, "min": s.min, "argmin": s.argmin, "decisions": s.decisions,
        })).collect::<Vec<_>>(),
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
    })
}

/// Branch coverage summed per kind of kink site (the site name's last part,
/// `pre_relu`, `relu6_upper`): how often each outcome was taken over every
/// site of that kind, and at how many sites some outcome never was. A whole
/// net's smooth point exercises a branch only if some decision takes it
/// (ReLU6's upper corner: some pre-activation above 6).
fn print_coverage_by_kink(r: &TieReport) {
    let mut kinds: Vec<(String, &'static str, Vec<usize>, usize, usize)> = Vec::new();
    for c in &r.coverage {
        let kind = c.site.rsplit('.').next().unwrap_or(&c.site).to_string();
        let at = match kinds.iter().position(|k| k.0 == kind && k.1 == c.op) {
            Some(i) => i,
            None => {
                kinds.push((kind, c.op, Vec::new(), 0, 0));
                kinds.len() - 1
            }
        };
        let k = &mut kinds[at];
        if k.2.len() < c.outcomes.len() {
            k.2.resize(c.outcomes.len(), 0);
        }
        for (t, n) in k.2.iter_mut().zip(&c.outcomes) {
            *t += n;
        }
        k.3 += 1;
        k.4 += usize::from(!c.missing.is_empty());
    }
    for (kind, op, totals, sites, partial) in kinds {
        println!(
            "branch coverage {kind} ({op}): outcome counts {totals:?} over {sites} sites; \
             {partial} sites left an outcome untaken"
        );
    }
}

fn tie_verdict_line(tie: &str, r: &TieReport) -> String {
    match &r.verdict {
        Verdict::Certified => format!(
            "{tie}: CERTIFIED at {} point(s) ({:.1} s)",
            r.points, r.seconds
        ),
        Verdict::Refuted { block, detail } => format!("{tie}: REFUTED at block {block}: {detail}"),
        Verdict::Undecided { reason } => format!("{tie}: UNDECIDED: {reason}"),
    }
}

/// What a net certificate claims about its point and its evidence: the kink
/// sites (none: the forward takes no decision, so every point is smooth and
/// no margin is discharged), and the strongest evidence level its ops allow
/// (exact rationals need a rational forward and backward; the ops that rule
/// them out are named).
struct SmoothnessClaim {
    lines: Vec<String>,
    irrational: Vec<&'static str>,
}

fn smoothness_claim(
    net: &layers::net::NetSpec,
    input: &ir::TensorType,
    c: &cert::NetCertificate,
) -> Result<SmoothnessClaim> {
    let chain = net.chain_with_loss().map_err(|e| anyhow::anyhow!("{e}"))?;
    let module = layers::tie_funcs(&chain, input)
        .map_err(|e| anyhow::anyhow!("{e}"))?
        .module();
    let irrational = cert::tie::irrational_ops(&module);
    let mut lines = Vec::new();
    if c.params.site_margins.is_empty() {
        lines.push(
            "kink sites: none (no ReLU, max pool or other decision in the forward): every point \
             is a smooth point, no margin to discharge"
                .to_string(),
        );
    }
    lines.push(if irrational.is_empty() {
        "evidence level: every op is rational, so exact rationals would apply; whole nets are \
         tied in f64 duals (exact through every conv costs minutes per evaluation)"
            .to_string()
    } else {
        format!(
            "evidence level: f64 duals, the strongest these ops allow (exact rationals need a \
             rational forward and backward; this one holds {})",
            irrational.join(", ")
        )
    });
    Ok(SmoothnessClaim { lines, irrational })
}

/// The whole-net tie and the parameter ties of one net; returns the exit
/// status (0 both certified, 1 otherwise).
pub fn certify_net(args: &NetArgs) -> Result<u8> {
    let net = layers::net::resolve(args.net).map_err(|e| anyhow::anyhow!("{e}"))?;
    if args.batch < 1 {
        bail!("--batch must be at least 1");
    }
    if let Some(rate) = args.drop_path {
        // Refused before anything is printed: a bad rate, a net without sites.
        layers::droppath::validate_rate(rate).map_err(|e| anyhow::anyhow!("{e}"))?;
        cert::drop_path::certificate_masks(&net, args.batch, rate, args.seed)
            .map_err(|e| anyhow::anyhow!("{e}"))?;
    }
    let mut opts = cert::net_tie_options(args.seed);
    if let Some(p) = args.probes {
        opts.probes = p.max(1);
    }
    if let Some(p) = args.points {
        opts.points = p.max(1);
        opts.max_attempts = opts.max_attempts.max(2 * opts.points);
    }
    let (tensors, floats) = net.param_count().map_err(|e| anyhow::anyhow!("{e}"))?;
    let input = net.input_type(args.batch);
    println!(
        "certify {}: input {input}, {tensors} parameter tensors ({floats} floats), seed {}",
        net.name, args.seed
    );
    println!(
        "evidence: f64 dual numbers (forward mode, never the backward) against the emitted backward; \
{} point(s), {} joint probe(s): u on the output and v on every block at once, one forward and one \
backward per probe; the tie passes when |<u,J·v> − Σ_b <B_b(u),v_b>| ≤ {:.0e} × scale \
(scale = Σ|u⊙J·v| + Σ|B(u)⊙v| + ‖u‖‖v‖); Gaussian probes make a wrong block pass with \
probability 0 unless its error is below that tolerance; a failure is localised to a block by \
bisection; each block row shows the joint identity's discrepancy",
        opts.points, opts.probes, opts.f64_tolerance
    );
    let c = match args.drop_path {
        None => cert::certify_net(&net, args.batch, &opts),
        Some(rate) => {
            print_drop_path_plan(&net, args.batch, rate, opts.seed)?;
            cert::drop_path::certify_net_drop_path(&net, args.batch, rate, &opts)
        }
    }
    .map_err(|e| anyhow::anyhow!("{e}"))?;
    println!();
    println!(
        "{:<6} {:<26} {:>6} {:>12}  verdict",
        "tie", "block", "probes", "max rel disc"
    );
    let whole_rows = block_rows("whole", &c.whole);
    let loss_rows = block_rows("loss", &c.params);
    println!();
    println!("smooth-point hypothesis at the certified point(s) (every kink site of the forward):");
    if !c.params.site_margins.is_empty() {
        println!(
            "{:<32} {:<24} {:>11} {:>9} {:>10}",
            "site", "op", "min margin", "at", "decisions"
        );
    }
    // The loss chain's forward contains the logits forward: its sites are all of them.
    for s in &c.params.site_margins {
        println!(
            "{:<32} {:<24} {:>11.3e} {:>9} {:>10}",
            s.site, s.op, s.min, s.argmin, s.decisions
        );
    }
    let sites_min = c
        .params
        .site_margins
        .iter()
        .map(|s| s.min)
        .fold(f64::INFINITY, f64::min);
    if c.params.site_margins.is_empty() {
        print_smooth_net_evidence(&net);
    }
    print_coverage_by_kink(&c.params);
    let claim = smoothness_claim(&net, &input, &c)?;
    for line in &claim.lines {
        println!("{line}");
    }
    if !c.params.kinks_resampled.is_empty() || !c.whole.kinks_resampled.is_empty() {
        println!(
            "kinks met and resampled: {}",
            c.whole
                .kinks_resampled
                .iter()
                .chain(&c.params.kinks_resampled)
                .cloned()
                .collect::<Vec<_>>()
                .join("; ")
        );
    }
    println!();
    println!("{}", tie_verdict_line("whole-net tie (logits)", &c.whole));
    println!("{}", tie_verdict_line("parameter ties (loss)", &c.params));
    let ok = c.certified();
    println!(
        "{}: {}{} at N={} ({} sites, smallest margin {:.3e}; {:.1} s)",
        if ok { "CERTIFIED" } else { "NOT CERTIFIED" },
        net.name,
        args.drop_path
            .map(|r| format!(" --drop-path {r}"))
            .unwrap_or_default(),
        args.batch,
        c.params.site_margins.len(),
        sites_min,
        c.seconds
    );
    if let Some(path) = args.json {
        let doc = json!({
            "certgrad": env!("CARGO_PKG_VERSION"),
            "net": net.name,
            "batch": args.batch,
            "seed": args.seed,
            "drop_path": args.drop_path,
            "parameter_tensors": tensors,
            "parameter_floats": floats,
            "f64_tolerance": opts.f64_tolerance,
            "whole_net_tie": tie_json(&c.whole, whole_rows),
            "parameter_ties": tie_json(&c.params, loss_rows),
            "kink_sites": c.params.site_margins.len(),
            "irrational_ops": claim.irrational,
            "certified": ok,
            "seconds": c.seconds,
        });
        std::fs::write(path, serde_json::to_string_pretty(&doc)?)?;
        println!("certificate written to {}", path.display());
    }
    Ok(if ok { 0 } else { 1 })
}

/// What a drop-path certificate ties: the sites, their keep probabilities
/// and the masks the parameter ties hold fixed.
fn print_drop_path_plan(
    net: &layers::net::NetSpec,
    batch: i64,
    rate: f64,
    seed: u64,
) -> Result<()> {
    let sites = net
        .drop_path_sites(rate)
        .map_err(|e| anyhow::anyhow!("{e}"))?;
    let masks = cert::drop_path::certificate_masks(net, batch, rate, seed)
        .map_err(|e| anyhow::anyhow!("{e}"))?;
    println!(
        "drop path {rate}: {} keep inputs [N] (keep {:.4} … {:.4} on the net's ramp); the logits tie \
takes them as tie blocks (rows d…drop_path), the parameter ties hold them fixed at one draw \
(seed {seed}; 0 or 1/keep per example):",
        sites.len(),
        sites.first().map_or(1.0, |s| s.keep),
        sites.last().map_or(1.0, |s| s.keep),
    );
    let dropped: usize = masks.iter().flatten().filter(|&&k| k == 0.0).count();
    let shown: Vec<String> = sites
        .iter()
        .zip(&masks)
        .take(4)
        .map(|(s, m)| format!("{} {m:?}", s.name))
        .collect();
    println!(
        "  {}{}; {dropped} of {} branch-examples dropped",
        shown.join(", "),
        if sites.len() > 4 { ", …" } else { "" },
        sites.len() as i64 * batch
    );
    Ok(())
}

/// The verdict's evidence line for a net without kink sites (ConvNeXt: no
/// ReLU, no max pool): the smooth-point hypothesis is vacuous, and the
/// strongest evidence is exact arithmetic unless a transcendental op is on
/// the path, in which case it is f64 duals (this certificate's).
fn print_smooth_net_evidence(net: &layers::net::NetSpec) {
    const TRANSCENDENTAL: [&str; 6] = [
        "stablehlo.exponential",
        "stablehlo.log",
        "stablehlo.tanh",
        "stablehlo.logistic",
        "stablehlo.rsqrt",
        "stablehlo.sqrt",
    ];
    let ops: Vec<&str> = net
        .chain()
        .ok()
        .and_then(|c| layers::tie_funcs(&c, &net.input_type(1)).ok())
        .map(|f| {
            f.forward
                .op_counts()
                .into_iter()
                .map(|(n, _)| n)
                .filter(|n| TRANSCENDENTAL.contains(n))
                .collect()
        })
        .unwrap_or_default();
    println!("  (none: no kink sites — the forward has no ReLU, ReLU6, max pool or other decision op, so the smooth-point hypothesis holds at every point)");
    if ops.is_empty() {
        println!(
            "  strongest evidence the ops allow: exact (every op is rational); this tie: f64 duals"
        );
    } else {
        println!(
            "  strongest evidence the ops allow: f64 dual numbers ({} are not rational, so no exact tie exists); this tie: f64 duals",
            ops.join(", ")
        );
    }
}
