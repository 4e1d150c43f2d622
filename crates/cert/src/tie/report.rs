//! What a tie reports: the evidence level, the verdict, and per block, site and
//! point what the checks saw (discrepancies, margins, branch coverage).

use ir::TensorType;
use std::fmt;

#[derive(Clone, Debug, PartialEq)]
pub enum Evidence {
    /// Exact rational arithmetic: the identity held exactly.
    Exact,
    /// f64 dual numbers; identity within the relative tolerance.
    F64 { tolerance: f64 },
}

impl fmt::Display for Evidence {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Evidence::Exact => f.write_str("exact"),
            Evidence::F64 { tolerance } => write!(f, "f64-tol {tolerance:.0e}"),
        }
    }
}

#[derive(Clone, Debug, PartialEq)]
pub enum Verdict {
    Certified,
    /// The backward map is not the VJP: which block, and the evidence.
    Refuted {
        block: String,
        detail: String,
    },
    /// No decision (every point on a kink, an evaluation error).
    Undecided {
        reason: String,
    },
}

/// Branch coverage of one decision site over the certified points.
#[derive(Clone, Debug, PartialEq)]
pub struct SiteCoverage {
    pub site: String,
    pub op: &'static str,
    /// Count per outcome (see `den::Margin::outcomes`).
    pub outcomes: Vec<usize>,
    /// Outcomes never taken, in words.
    pub missing: Vec<String>,
}

/// The outcomes a decision op can take, in words; `None` when the set is open
/// (window positions: padding offsets may be unreachable).
pub(super) fn outcome_labels(op: &str) -> Option<&'static [&'static str]> {
    match op {
        "stablehlo.maximum" | "stablehlo.minimum" => Some(&["first operand", "second operand"]),
        "stablehlo.compare" => Some(&["false", "true"]),
        "stablehlo.clamp" => Some(&["below min", "inside", "above max"]),
        _ => None,
    }
}

impl SiteCoverage {
    /// A site's coverage from its per-outcome counts: the outcomes never
    /// taken are named where the op's outcome set is closed.
    pub(crate) fn from_counts(site: String, op: &'static str, outcomes: Vec<usize>) -> Self {
        let missing = outcome_labels(op)
            .map(|labels| {
                labels
                    .iter()
                    .enumerate()
                    .filter(|(k, _)| outcomes.get(*k).copied().unwrap_or(0) == 0)
                    .map(|(_, l)| l.to_string())
                    .collect()
            })
            .unwrap_or_default();
        SiteCoverage {
            site,
            op,
            outcomes,
            missing,
        }
    }
}

/// Adds one point's per-outcome counts to a site's running totals (a window
/// op's count vector grows with the offsets seen).
pub(crate) fn add_outcomes(totals: &mut Vec<usize>, outcomes: &[usize]) {
    if totals.len() < outcomes.len() {
        totals.resize(outcomes.len(), 0);
    }
    for (a, b) in totals.iter_mut().zip(outcomes) {
        *a += b;
    }
}

/// The smallest margin of the certified points, and where.
#[derive(Clone, Debug, PartialEq)]
pub struct MarginReport {
    pub site: String,
    pub index: usize,
    pub margin: f64,
}

/// What the adjoint identity saw on one block (the input or one parameter)
/// over every probe of every point.
#[derive(Clone, Debug, PartialEq)]
pub struct BlockResult {
    /// `dx`, or `d` + the parameter's path (`dstage2.conv1.W`).
    pub name: String,
    /// max |⟨u,J·v⟩ − ⟨B(u),v⟩| / scale (0 when exact and equal).
    pub max_rel_discrepancy: f64,
    /// Adjoint-identity probes checked on this block.
    pub probes: usize,
}

/// The smooth-point margin of one decision site over the certified points.
#[derive(Clone, Debug, PartialEq)]
pub struct SiteMargin {
    /// The kink site's activation path (`stage2.conv1.relu.pre_relu`), or
    /// `op#index` for a decision op no layer declared.
    pub site: String,
    pub op: &'static str,
    /// Smallest margin of any decision (|x| for ReLU, top-two gap for pools).
    pub min: f64,
    /// Flat index of that decision in the op's result.
    pub argmin: usize,
    /// Decisions taken, summed over the certified points.
    pub decisions: usize,
}

impl SiteMargin {
    /// A site's record from its first point's margin.
    pub(crate) fn first(site: String, m: &den::Margin) -> Self {
        SiteMargin {
            site,
            op: m.op,
            min: m.min,
            argmin: m.argmin,
            decisions: m.decisions,
        }
    }

    /// Folds another point's margin of the same site in.
    pub(crate) fn absorb(&mut self, m: &den::Margin) {
        if m.min < self.min {
            self.min = m.min;
            self.argmin = m.argmin;
        }
        self.decisions += m.decisions;
    }
}

#[derive(Clone, Debug)]
pub struct TieReport {
    pub layer: String,
    pub input: TensorType,
    pub evidence: Evidence,
    /// Adjoint-identity probes per block and point.
    pub probes: usize,
    pub blocks: usize,
    pub points: usize,
    /// Probability that a wrong block passes all probes at one point (exact only).
    pub failure_bound: Option<f64>,
    pub full_jacobian: bool,
    /// `None` when the forward takes no decisions (globally smooth).
    pub min_margin: Option<MarginReport>,
    /// Kinks met (and resampled away from).
    pub kinks_resampled: Vec<String>,
    /// Boundary points certified after the sampled ones (see
    /// `TieOptions::boundary_points`).
    pub boundary_points: usize,
    /// Points dropped because a value became non-finite (an overflow at the
    /// point's scale), each with where it began; never a verdict.
    pub non_finite_resampled: Vec<String>,
    /// Ties accepted at certified points because the forward is flat across
    /// them (see `TieOptions::accept_flat_ties`): site, index, count.
    pub flat_ties: Vec<String>,
    /// Branch coverage of every decision site of the forward.
    pub coverage: Vec<SiteCoverage>,
    /// Per block: the largest relative discrepancy the identity showed.
    pub block_results: Vec<BlockResult>,
    /// Per decision site of the forward, in op order: its smallest margin.
    pub site_margins: Vec<SiteMargin>,
    pub verdict: Verdict,
    pub seconds: f64,
}

impl TieReport {
    pub fn certified(&self) -> bool {
        self.verdict == Verdict::Certified
    }

    /// A report before any point: no blocks, sites or coverage yet, and
    /// certified until a check says otherwise.
    pub(crate) fn start(
        layer: String,
        input: TensorType,
        evidence: Evidence,
        probes: usize,
    ) -> Self {
        TieReport {
            layer,
            input,
            evidence,
            probes,
            blocks: 0,
            points: 0,
            failure_bound: None,
            full_jacobian: false,
            min_margin: None,
            kinks_resampled: Vec::new(),
            non_finite_resampled: Vec::new(),
            boundary_points: 0,
            flat_ties: Vec::new(),
            coverage: Vec::new(),
            block_results: Vec::new(),
            site_margins: Vec::new(),
            verdict: Verdict::Certified,
            seconds: 0.0,
        }
    }
}
