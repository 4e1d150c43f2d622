//! Decision sites: their names, the smooth-point hypothesis at a sampled point
//! (a decision that ties is a kink to resample away from, unless the forward is
//! flat across it), and the margins and branch coverage over certified points.

use super::points::Point;
use super::report::outcome_labels;
use super::{add_outcomes, MarginReport, SiteCoverage, SiteMargin, Tie, TieOptions, TieReport};
use den::{eval_func, EvalOptions, Tensor};
use ir::rng::Rng;

/// The decision sites of the certified points so far.
#[derive(Default)]
pub(super) struct Sites {
    /// (op index, op) → outcome counts over the certified points.
    seen: Vec<((usize, &'static str), Vec<usize>)>,
    /// Op index of each entry of the report's `site_margins`.
    site_ops: Vec<usize>,
}

impl Sites {
    /// Whether some decision outcome was never taken.
    pub(super) fn missing_outcomes(&self) -> bool {
        self.seen.iter().any(|((_, op), counts)| {
            outcome_labels(op)
                .is_some_and(|l| (0..l.len()).any(|k| counts.get(k).copied().unwrap_or(0) == 0))
        })
    }
}

impl Tie<'_> {
    /// Site name of the decision op at `op_index` in the forward.
    fn site_name(&self, op_index: usize, op: &str) -> String {
        let mut idx = 0usize;
        let mut found = None;
        fn walk(b: &ir::Block, idx: &mut usize, target: usize, found: &mut Option<ir::ValueId>) {
            for op in &b.ops {
                if *idx == target {
                    *found = op.results.first().map(|r| r.0);
                }
                *idx += 1;
                for r in &op.regions {
                    walk(r, idx, target, found);
                }
            }
        }
        walk(&self.forward.body, &mut idx, op_index, &mut found);
        found
            .and_then(|v| self.sites.iter().find(|s| s.value == v))
            .map(|s| s.name.clone())
            .unwrap_or_else(|| format!("{op}#{op_index}"))
    }

    /// Whether the point can be certified at: no decision ties, or (with
    /// `accept_flat_ties`) the forward is flat across every tie, which is then
    /// listed in `report`. A kink is listed in `report` and gives false.
    pub(super) fn accept_ties(
        &self,
        point: &Point,
        margins: &[den::Margin],
        rng: &mut Rng,
        opts: &TieOptions,
        report: &mut TieReport,
    ) -> bool {
        if let Some(m) = margins.iter().find(|m| m.ties > 0) {
            let flat = opts.accept_flat_ties && self.ties_are_flat(point, margins, rng) == Ok(true);
            if !flat {
                report.kinks_resampled.push(format!(
                    "kink at {}[{}], margin 0",
                    self.site_name(m.op_index, m.op),
                    m.argmin
                ));
                return false;
            }
            for m in margins.iter().filter(|m| m.ties > 0) {
                report.flat_ties.push(format!(
                    "{}[{}] ({} tie{})",
                    self.site_name(m.op_index, m.op),
                    m.argmin,
                    m.ties,
                    if m.ties == 1 { "" } else { "s" }
                ));
            }
        }
        true
    }

    /// The smallest margin of the decisions that did not tie, if smaller than
    /// the report's so far.
    pub(super) fn record_min_margin(&self, margins: &[den::Margin], report: &mut TieReport) {
        if let Some(m) = margins
            .iter()
            .filter(|m| m.ties == 0)
            .min_by(|a, b| a.min.total_cmp(&b.min))
        {
            let better = report.min_margin.as_ref().is_none_or(|r| m.min < r.margin);
            if better {
                report.min_margin = Some(MarginReport {
                    site: self.site_name(m.op_index, m.op),
                    index: m.argmin,
                    margin: m.min,
                });
            }
        }
    }

    /// Folds a certified point's margins into the per-site margins of `report`
    /// and the outcome counts of `sites`.
    pub(super) fn record_sites(
        &self,
        margins: &[den::Margin],
        sites: &mut Sites,
        report: &mut TieReport,
    ) {
        for m in margins {
            match report
                .site_margins
                .iter_mut()
                .zip(&sites.site_ops)
                .find(|(_, k)| **k == m.op_index)
            {
                Some((s, _)) => s.absorb(m),
                None => {
                    sites.site_ops.push(m.op_index);
                    report
                        .site_margins
                        .push(SiteMargin::first(self.site_name(m.op_index, m.op), m));
                }
            }
            let key = (m.op_index, m.op);
            let slot = match sites.seen.iter().position(|(k, _)| *k == key) {
                Some(i) => i,
                None => {
                    sites.seen.push((key, Vec::new()));
                    sites.seen.len() - 1
                }
            };
            add_outcomes(&mut sites.seen[slot].1, &m.outcomes);
        }
    }

    /// Branch coverage of every decision site the certified points met.
    pub(super) fn coverage(&self, sites: Sites) -> Vec<SiteCoverage> {
        sites
            .seen
            .into_iter()
            .map(|((idx, op), outcomes)| {
                SiteCoverage::from_counts(self.site_name(idx, op), op, outcomes)
            })
            .collect()
    }

    /// Is the forward differentiable at a point where decisions tie? At a tie
    /// of operands with different derivatives (a true kink) f is only one-sided
    /// differentiable, and the second difference f(x+εw) + f(x−εw) − 2f(x) is
    /// first order in ε for almost every direction w; where the tied operands
    /// are locally equal (a max over ReLU zeros) it is second order. Checked
    /// per output element in f64 with ε = 1e-10·max|x|, small enough that no
    /// untied decision (margin ≥ 1e-6·max|x| required) changes outcome unless
    /// the forward amplifies perturbations 10⁴-fold before it; a kink must move
    /// an output by more than 1e-3 of the largest first difference to be seen.
    fn ties_are_flat(
        &self,
        point: &Point,
        margins: &[den::Margin],
        rng: &mut Rng,
    ) -> Result<bool, String> {
        let xmax = point
            .blocks
            .iter()
            .flat_map(|t| t.data.iter())
            .fold(0f64, |a, x| a.max(x.abs()))
            .max(1e-30);
        let untied_min = margins
            .iter()
            .filter(|m| m.ties == 0)
            .map(|m| m.min)
            .fold(f64::INFINITY, f64::min);
        if untied_min < 1e-6 * xmax {
            return Ok(false);
        }
        let eps = 1e-10 * xmax;
        let w: Vec<Tensor<f64>> = point
            .blocks
            .iter()
            .map(|t| t.map(|_| rng.unit() * 2.0 - 1.0))
            .collect();
        let eval = |sign: f64| -> Result<Vec<Tensor<f64>>, String> {
            let shifted: Vec<Tensor<f64>> = point
                .blocks
                .iter()
                .zip(&w)
                .map(|(x, w)| {
                    let data = x.data.iter().zip(&w.data).map(|(a, b)| a + sign * eps * b);
                    Tensor::new(x.shape.clone(), data.collect())
                })
                .collect();
            let ev = eval_func::<f64>(
                self.module,
                &self.forward.name,
                self.to_values::<f64>(&shifted),
                &EvalOptions {
                    fast: true,
                    ..Default::default()
                },
            )
            .map_err(|e| e.to_string())?;
            Ok(ev
                .outputs
                .into_iter()
                .filter_map(|v| v.into_float())
                .collect())
        };
        let (f0, fp, fm) = (eval(0.0)?, eval(1.0)?, eval(-1.0)?);
        let dmax = fp
            .iter()
            .zip(&fm)
            .flat_map(|(p, m)| p.data.iter().zip(&m.data).map(|(a, b)| (a - b).abs()))
            .fold(0f64, f64::max);
        for ((a, p), m) in f0.iter().zip(&fp).zip(&fm) {
            for ((z, p), m) in a.data.iter().zip(&p.data).zip(&m.data) {
                let second = (p + m - 2.0 * z).abs();
                if second > 1e-3 * ((p - m).abs() + dmax) {
                    return Ok(false);
                }
            }
        }
        Ok(true)
    }
}
