//! Test support shared by cert's test files: the small every-layer-kind net
//! of the step ties, the refuted block of a tie report, and the walk of the op
//! catalog (every case certified at its evidence level, every negative control
//! refuted beside its certified twin).
#![allow(dead_code)] // each test file uses a different part

use cert::{certify_layer, Evidence, TieOptions, TieReport, Verdict};
use layers::net::NetSpec;
use layers::ops::norm::BnWorld;
use layers::ops::{ExpectedEvidence, NegativeControl, OpCase};

/// A small net with every layer kind of the cifar8 family, with a batch norm
/// in `bn`'s world after the conv (declared as data, so it follows NetSpec's
/// defaults).
pub fn tiny(bn: Option<BnWorld>) -> NetSpec {
    let bn = match bn {
        None => String::new(),
        Some(w) => {
            let world = match w {
                BnWorld::PerExample => "per_example",
                BnWorld::Batch => "batch",
                BnWorld::Eval => "eval",
            };
            format!(
                "[[layers]]\nname = \"bn\"\nop = \"batch_norm\"\nworld = \"{world}\"\neps = 1e-5\n"
            )
        }
    };
    let text = format!(
        r#"name = "tiny"
input = [2, 4, 4]
classes = 4
label_smoothing = "none"
[[layers]]
name = "conv"
op = "conv2d"
k = 3
stride = 1
padding = "symmetric"
out_ch = 3
bias = true
{bn}
[[layers]]
name = "pool"
op = "max_pool"
window = 2
stride = 2
pad = 0
[[layers]]
name = "relu"
op = "relu"
[[layers]]
name = "flatten"
op = "flatten"
[[layers]]
name = "dense"
op = "dense"
out_f = 4
bias = true
"#
    );
    NetSpec::from_text(&text, "tiny.toml").unwrap()
}

/// The block a refutation of `what` names, or a panic naming what came back
/// instead.
pub fn refuted_in(verdict: &Verdict, what: &str) -> String {
    match verdict {
        Verdict::Refuted { block, detail } => {
            eprintln!("{what} refuted in {block}: {detail}");
            block.clone()
        }
        v => panic!("{what}: expected a refutation, got {v:?}"),
    }
}

/// The block a layer tie's refutation names.
pub fn refuted_block(r: &TieReport) -> String {
    refuted_in(&r.verdict, &r.layer)
}

/// Whether a report's evidence is the level a catalog entry expects (f64 at
/// the default tolerance).
pub fn evidence_is(expected: ExpectedEvidence, got: &Evidence) -> bool {
    match expected {
        ExpectedEvidence::Exact => *got == Evidence::Exact,
        ExpectedEvidence::F64 => {
            *got == Evidence::F64 {
                tolerance: TieOptions::default().f64_tolerance,
            }
        }
    }
}

/// Certify a catalog case: certified at its expected evidence level, at one
/// point at least, with every outcome of every decision site exercised
/// (ReLU6's upper corner included: the scale-8 points pass 6).
pub fn check_case(c: &OpCase) -> TieReport {
    let r = certify_layer(c.layer.as_ref(), &c.input, &TieOptions::default());
    eprintln!(
        "{:<20} {:<58} {:<14} points {} full-J {} margin {:?} {:.3}s",
        c.op,
        c.config,
        r.evidence.to_string(),
        r.points,
        r.full_jacobian,
        r.min_margin.as_ref().map(|m| (m.site.clone(), m.margin)),
        r.seconds
    );
    assert!(
        r.certified(),
        "{} {}: {:?} (kinks {:?})",
        c.op,
        c.config,
        r.verdict,
        r.kinks_resampled
    );
    assert!(r.points >= 1, "{} {}: no point certified", c.op, c.config);
    for cov in &r.coverage {
        assert!(
            cov.missing.is_empty(),
            "{} {}: site {} never took {:?}",
            c.op,
            c.config,
            cov.site,
            cov.missing
        );
    }
    assert!(
        evidence_is(c.expected_evidence, &r.evidence),
        "{} {}: tied at {}, expected {:?}",
        c.op,
        c.config,
        r.evidence,
        c.expected_evidence
    );
    r
}

/// Certify every case of a catalog; returns the total seconds.
pub fn certify_all(cases: &[OpCase]) -> f64 {
    let t0 = std::time::Instant::now();
    assert!(!cases.is_empty());
    for c in cases {
        check_case(c);
    }
    let total = t0.elapsed().as_secs_f64();
    eprintln!("{} cases in {total:.3}s", cases.len());
    total
}

/// A negative control of an op whose ties reach `evidence`: its correct twin
/// certifies at that level, and the control is refuted at the same level, in
/// the block (and with the detail) the control expects. Returns the twin's and
/// the control's reports.
pub fn check_control(
    evidence: ExpectedEvidence,
    op: &str,
    ctl: &NegativeControl,
) -> (TieReport, TieReport) {
    let what = format!("{op} {} ({})", ctl.config, ctl.name);
    let opts = TieOptions::default();
    let twin = certify_layer(ctl.twin.as_ref(), &ctl.input, &opts);
    assert!(twin.certified(), "{what}: twin {:?}", twin.verdict);
    assert!(
        evidence_is(evidence, &twin.evidence),
        "{what}: twin tied at {}, expected {evidence:?}",
        twin.evidence
    );
    let bad = certify_layer(ctl.layer.as_ref(), &ctl.input, &opts);
    match &bad.verdict {
        Verdict::Refuted { block, detail } => {
            eprintln!("{what}: REFUTED in {block}: {detail}");
            if let Err(why) = ctl.expect.judge(block, detail) {
                panic!("{what}: {why} ({detail})");
            }
        }
        v => panic!("{what}: expected a refutation, got {v:?}"),
    }
    assert!(
        evidence_is(evidence, &bad.evidence),
        "{what}: refuted at {}, expected {evidence:?}",
        bad.evidence
    );
    (twin, bad)
}

/// Check every control of `cases`; returns how many there were.
pub fn check_controls(cases: &[OpCase]) -> usize {
    let mut n = 0;
    for c in cases {
        for ctl in &c.controls {
            check_control(c.expected_evidence, c.op, ctl);
            n += 1;
        }
    }
    n
}

/// The controls of `op` in `cases` whose name starts with `name`, with the
/// evidence level of the case that carries them; at least one.
pub fn controls_named<'a>(
    cases: &'a [OpCase],
    op: &str,
    name: &str,
) -> Vec<(ExpectedEvidence, &'a NegativeControl)> {
    let found: Vec<_> = cases
        .iter()
        .filter(|c| c.op == op)
        .flat_map(|c| c.controls.iter().map(move |k| (c.expected_evidence, k)))
        .filter(|(_, k)| k.name.starts_with(name))
        .collect();
    assert!(
        !found.is_empty(),
        "no control {name:?} of {op} in the catalog"
    );
    found
}

/// The one control of `op` named `name`, checked (see [`check_control`]):
/// the control, its twin's report and its own.
pub fn checked_control<'a>(
    cases: &'a [OpCase],
    op: &str,
    name: &str,
) -> (&'a NegativeControl, TieReport, TieReport) {
    let found = controls_named(cases, op, name);
    assert_eq!(found.len(), 1, "{op}: controls named {name:?}");
    let (evidence, ctl) = found[0];
    let (twin, bad) = check_control(evidence, op, ctl);
    (ctl, twin, bad)
}
