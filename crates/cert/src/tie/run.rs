//! The tie procedure: sample points until `points` are certified (and, within
//! the attempt budget, until every decision outcome has been exercised), each
//! point through the phases in order; the first refutation or failed
//! evaluation ends the tie.

use super::evidence::PointStop;
use super::margins::Sites;
use super::points::Point;
use super::{BlockResult, Evidence, TieReport, Verdict};
use super::{Tie, TieOptions, PROBE_RANGE};
use den::{Scalar, Value};
use ir::rng::{Rng, CERT_SALT};
use ir::TensorType;

/// What one point gave.
enum PointOutcome {
    /// Every check held; the forward's margins there.
    Certified(Vec<den::Margin>),
    /// No evidence: a kink, or a non-finite value (listed in the report).
    Skipped,
    /// The verdict that ends the tie.
    Verdict(Verdict),
}

impl Tie<'_> {
    /// One point through the phases: the smooth-point hypothesis from the
    /// forward's margins, the adjoint identity block by block, and at small
    /// sizes the full Jacobian entry by entry. A non-finite value is no
    /// evidence: the point is dropped (the scales cycle, so a scale-8 overflow
    /// is followed by a scale-0.25 point).
    #[allow(clippy::too_many_arguments)]
    fn check_point<S: Scalar>(
        &self,
        point_f64: &Point,
        scale: f64,
        rng: &mut Rng,
        opts: &TieOptions,
        exact: bool,
        full: bool,
        report: &mut TieReport,
    ) -> PointOutcome {
        let point: Vec<Value<S>> = self.to_values(&point_f64.blocks);
        let margins = match self.jvp(&point, &self.zeros::<S>(), true) {
            Ok((_, m)) => m,
            Err(e) => {
                return PointOutcome::Verdict(Verdict::Undecided {
                    reason: format!("forward evaluation failed: {e}"),
                })
            }
        };
        if !self.accept_ties(point_f64, &margins, rng, opts, report) {
            return PointOutcome::Skipped;
        }
        self.record_min_margin(&margins, report);
        let stop = match self.check_adjoint(&point, rng, exact, opts, scale, report) {
            Err(stop) => Some(stop),
            Ok(()) if full => self.full_jacobian(&point, exact, opts.f64_tolerance),
            Ok(()) => None,
        };
        match stop {
            Some(PointStop::Verdict(v)) => PointOutcome::Verdict(v),
            Some(PointStop::NonFinite(origin)) => {
                report
                    .non_finite_resampled
                    .push(format!("scale {scale}: {origin}"));
                PointOutcome::Skipped
            }
            None => PointOutcome::Certified(margins),
        }
    }

    pub(crate) fn run<S: Scalar>(&self, opts: &TieOptions, exact: bool) -> TieReport {
        let names = self.block_names();
        let types = self.block_types();
        let evidence = if exact {
            Evidence::Exact
        } else {
            Evidence::F64 {
                tolerance: opts.f64_tolerance,
            }
        };
        let total_in: usize = types.iter().map(|t| t.num_elements() as usize).sum();
        let total_out: usize = self.outputs.iter().map(|t| t.num_elements() as usize).sum();
        let full = total_in + total_out <= opts.full_jacobian_limit;
        let input = types
            .first()
            .cloned()
            .unwrap_or_else(|| TensorType::f32(Vec::<i64>::new()));
        let mut report = TieReport {
            blocks: names.len(),
            failure_bound: exact
                .then(|| (2.0 / (2 * PROBE_RANGE + 1) as f64).powi(opts.probes as i32)),
            full_jacobian: full,
            block_results: names
                .iter()
                .map(|n| BlockResult {
                    name: n.clone(),
                    max_rel_discrepancy: 0.0,
                    probes: 0,
                })
                .collect(),
            ..TieReport::start(String::new(), input, evidence, opts.probes)
        };
        let mut sites = Sites::default();
        let mut rng = Rng::salted(opts.seed.wrapping_add(1), CERT_SALT);
        let scales = [1.0, 8.0, 0.25];
        let mut attempt = 0;
        // Certify at `points` points, and keep sampling (within the budget) while
        // a decision outcome has never been exercised.
        while report.points < opts.points
            || (sites.missing_outcomes() && attempt < opts.max_attempts)
        {
            if attempt >= opts.max_attempts {
                report.verdict = if report.points == 0 && !report.non_finite_resampled.is_empty() {
                    Verdict::Undecided {
                        reason: format!(
                            "no sampled point gave finite values ({})",
                            report.non_finite_resampled.join("; ")
                        ),
                    }
                } else if report.points == 0 {
                    Verdict::Undecided {
                        reason: format!(
                            "{} on a kink ({})",
                            if self.at.is_some() {
                                "the given point sits"
                            } else {
                                "every sampled point sits"
                            },
                            report.kinks_resampled.join(", ")
                        ),
                    }
                } else {
                    Verdict::Certified
                };
                break;
            }
            let scale = scales[attempt % scales.len()];
            attempt += 1;
            let point_f64 = self.sample_point(&mut rng, scale, exact);
            match self.check_point::<S>(&point_f64, scale, &mut rng, opts, exact, full, &mut report)
            {
                PointOutcome::Certified(margins) => {
                    report.points += 1;
                    self.record_sites(&margins, &mut sites, &mut report);
                }
                PointOutcome::Skipped => {}
                PointOutcome::Verdict(v) => {
                    report.verdict = v;
                    return report;
                }
            }
        }
        // Boundary points: each decision's compared quantity just above and
        // just below every threshold either side tests against.
        if self.at.is_none() && report.points > 0 && matches!(report.verdict, Verdict::Certified) {
            let plan = self.boundary_plan();
            let targets = plan.as_ref().map_or(&[][..], |p| &p.targets[..]);
            'targets: for target in targets {
                for above in [true, false] {
                    if report.boundary_points >= opts.boundary_points {
                        break 'targets;
                    }
                    let base = self.sample_point(&mut rng, 1.0, exact);
                    let Some(point_f64) = plan.as_ref().and_then(|p| {
                        self.boundary_point(p, &base, &mut rng, target, above, exact)
                    }) else {
                        continue;
                    };
                    match self.check_point::<S>(
                        &point_f64,
                        1.0,
                        &mut rng,
                        opts,
                        exact,
                        full,
                        &mut report,
                    ) {
                        PointOutcome::Certified(_) => report.boundary_points += 1,
                        PointOutcome::Skipped => {}
                        PointOutcome::Verdict(Verdict::Refuted { block, detail }) => {
                            report.verdict = Verdict::Refuted {
                                block,
                                detail: format!(
                                    "at a boundary point (a decision's operand {} its threshold {}): {detail}",
                                    if above { "just above" } else { "just below" },
                                    target.threshold
                                ),
                            };
                            return report;
                        }
                        PointOutcome::Verdict(v) => {
                            report.verdict = v;
                            return report;
                        }
                    }
                }
            }
        }
        report.coverage = self.coverage(sites);
        report
    }
}
