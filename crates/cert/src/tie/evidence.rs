//! The evidence of a tie at one point: the adjoint identity ⟨u, J·v⟩ =
//! ⟨B(u), v⟩ per block for random probes (exactly, or within the f64
//! tolerance), the localisation of a refuted block, and at small sizes the
//! full Jacobian entry by entry.

use super::points::shape_of;
use super::{Tie, TieOptions, TieReport, Verdict};
use den::{Scalar, Tensor, Value};
use ir::rng::Rng;

/// Σ over tensors of Σ a⊙b.
fn dot_all<S: Scalar>(a: &[Tensor<S>], b: &[Tensor<S>]) -> S {
    a.iter()
        .zip(b)
        .fold(S::zero(), |acc, (x, y)| acc.add(&dot(&x.data, &y.data)))
}

fn abs_dot_all<S: Scalar>(a: &[Tensor<S>], b: &[Tensor<S>]) -> f64 {
    a.iter()
        .zip(b)
        .map(|(x, y)| abs_dot(&x.data, &y.data))
        .sum()
}

fn dot<S: Scalar>(a: &[S], b: &[S]) -> S {
    a.iter()
        .zip(b)
        .fold(S::zero(), |acc, (x, y)| acc.add(&x.mul(y)))
}

fn abs_dot<S: Scalar>(a: &[S], b: &[S]) -> f64 {
    a.iter()
        .zip(b)
        .map(|(x, y)| (x.to_f64() * y.to_f64()).abs())
        .sum()
}

/// `[i, j, k]` of a flat index in a row-major shape.
pub fn multi_index(mut flat: usize, shape: &[usize]) -> String {
    let mut idx = vec![0; shape.len()];
    for d in (0..shape.len()).rev() {
        if shape[d] > 0 {
            idx[d] = flat % shape[d];
            flat /= shape[d];
        }
    }
    let parts: Vec<String> = idx.iter().map(|i| i.to_string()).collect();
    format!("[{}]", parts.join(", "))
}

/// What ends the evidence at one point early.
pub(super) enum PointStop {
    /// The tie's verdict: a refuted block, or an evaluation that failed.
    Verdict(Verdict),
    /// A non-finite value (an overflow at this point's scale) and where it
    /// began: no evidence either way, never a verdict; the point is resampled.
    NonFinite(String),
}

impl From<Verdict> for PointStop {
    fn from(v: Verdict) -> Self {
        PointStop::Verdict(v)
    }
}

fn tensors_f64<S: Scalar>(ts: &[Tensor<S>]) -> Vec<Tensor<f64>> {
    ts.iter().map(|t| t.map(|x| x.to_f64())).collect()
}

fn values_f64<S: Scalar>(vs: &[Value<S>]) -> Vec<Value<f64>> {
    vs.iter()
        .map(|v| match v {
            Value::Float(t, e) => Value::Float(t.map(|x| x.to_f64()), *e),
            Value::Int(t, e) => Value::Int(t.clone(), *e),
        })
        .collect()
}

fn all_finite<S: Scalar>(ts: &[Tensor<S>]) -> bool {
    ts.iter().all(|t| t.data.iter().all(|x| x.all_finite()))
}

impl Tie<'_> {
    /// The adjoint identity for `opts.probes` random cotangents u, each against
    /// a random tangent v of every block in turn; each block's largest relative
    /// discrepancy goes into `report`. `Err` ends the point: the verdict that
    /// ends the tie (a refuted block, a failed evaluation), or a non-finite
    /// value, after which the point is resampled.
    pub(super) fn check_adjoint<S: Scalar>(
        &self,
        point: &[Value<S>],
        rng: &mut Rng,
        exact: bool,
        opts: &TieOptions,
        point_scale: f64,
        report: &mut TieReport,
    ) -> Result<(), PointStop> {
        let names = self.block_names();
        let types = self.block_types();
        for _ in 0..opts.probes {
            let u: Vec<Tensor<S>> = self.random_outputs(rng, exact);
            let claimed = match self.vjp(point, &u) {
                Ok(c) => c,
                Err(e) => {
                    return Err(Verdict::Undecided {
                        reason: format!("backward evaluation failed: {e}"),
                    }
                    .into());
                }
            };
            if !all_finite(&claimed) {
                return Err(PointStop::NonFinite(self.non_finite_origin(
                    point,
                    &self.zeros::<S>(),
                    Some(&u),
                )));
            }
            for (b, ty) in types.iter().enumerate() {
                let mut tangents = self.zeros::<S>();
                tangents[b] = self.random_like(rng, &shape_of(ty), exact);
                let jv = match self.jvp(point, &tangents, false) {
                    Ok((jv, _)) => jv,
                    Err(e) => {
                        return Err(Verdict::Undecided {
                            reason: format!("forward evaluation failed: {e}"),
                        }
                        .into());
                    }
                };
                if !all_finite(&jv) {
                    return Err(PointStop::NonFinite(
                        self.non_finite_origin(point, &tangents, None),
                    ));
                }
                let lhs = dot_all(&u, &jv);
                let rhs = dot(&claimed[b].data, &tangents[b].data);
                // Magnitude the rounding error is relative to: the terms of both
                // sides, floored by ‖u‖·‖v‖ (the size of the form for a Jacobian of
                // unit scale), since an exactly-zero VJP block (a bias a softmax is
                // invariant to) has no terms of its own to measure rounding against.
                let scale = abs_dot_all(&u, &jv)
                    + abs_dot(&claimed[b].data, &tangents[b].data)
                    + (abs_dot_all(&u, &u) * abs_dot(&tangents[b].data, &tangents[b].data)).sqrt();
                if !(lhs.all_finite() && rhs.all_finite() && scale.is_finite()) {
                    return Err(PointStop::NonFinite(format!(
                        "the adjoint sums ⟨u, J·v⟩ = {:e}, ⟨B(u), v⟩ = {:e} overflow",
                        lhs.to_f64(),
                        rhs.to_f64()
                    )));
                }
                let (ok, diff) = self.equal(&lhs, &rhs, scale, exact, opts.f64_tolerance);
                let br = &mut report.block_results[b];
                br.probes += 1;
                br.max_rel_discrepancy = br
                    .max_rel_discrepancy
                    .max(diff / scale.max(f64::MIN_POSITIVE));
                if !ok {
                    // Localised in f64 whatever the evidence: it only names
                    // the worst element, and an exact basis sweep through a
                    // convolution costs seconds.
                    let loc = self.localise(
                        &values_f64(point),
                        b,
                        &tensors_f64(&u),
                        &claimed[b].map(|x| x.to_f64()),
                        opts.localise_limit,
                    );
                    return Err(PointStop::Verdict(Verdict::Refuted {
                        block: names[b].clone(),
                        detail: format!(
                            "⟨u, J·v⟩ − ⟨B(u), v⟩ = {diff:.3e} (scale {scale:.3e}) at a point of scale {scale_pt}; {loc}",
                            scale_pt = scale_label(point_scale)
                        ),
                    }));
                }
            }
        }
        Ok(())
    }

    fn equal<S: Scalar>(&self, a: &S, b: &S, scale: f64, exact: bool, tol: f64) -> (bool, f64) {
        let d = a.sub(b);
        if exact {
            (d.is_zero(), d.to_f64().abs())
        } else {
            let diff = d.to_f64().abs();
            (diff <= tol * scale.max(f64::MIN_POSITIVE), diff)
        }
    }

    /// Locate a wrong block: the true Jᵀu by basis tangents vs B(u), largest gap.
    fn localise<S: Scalar>(
        &self,
        point: &[Value<S>],
        block: usize,
        u: &[Tensor<S>],
        claimed: &Tensor<S>,
        limit: usize,
    ) -> String {
        let n = claimed.len();
        if n > limit {
            return format!("not localised (block larger than {limit} elements)");
        }
        let mut tangents = self.zeros::<S>();
        let (mut worst, mut at, mut truth_at, mut norm) = (0.0f64, 0usize, 0.0f64, 0.0f64);
        for i in 0..n {
            tangents[block].data[i] = S::one();
            let jv = match self.jvp(point, &tangents, false) {
                Ok((jv, _)) => jv,
                Err(e) => return format!("not localised: {e}"),
            };
            tangents[block].data[i] = S::zero();
            let truth = dot_all(u, &jv).to_f64();
            let gap = (truth - claimed.data[i].to_f64()).abs();
            norm = norm.max(truth.abs());
            if gap > worst {
                worst = gap;
                at = i;
                truth_at = truth;
            }
        }
        format!(
            "largest discrepancy {worst:.3e} at {}{} (true {truth_at:.6e}, claimed {:.6e}; relative to max |true| {:.2e})",
            self.block_names()[block],
            multi_index(at, &claimed.shape),
            claimed.data[at].to_f64(),
            worst / norm.max(f64::MIN_POSITIVE)
        )
    }

    /// Compare J (by basis tangents) with B (by basis cotangents) entry by entry;
    /// `Some` on a mismatch, a failure, or a non-finite entry.
    pub(super) fn full_jacobian<S: Scalar>(
        &self,
        point: &[Value<S>],
        exact: bool,
        tol: f64,
    ) -> Option<PointStop> {
        let names = self.block_names();
        // Rows of J: (result k, flat index j) for every float result.
        let cells: Vec<(usize, usize)> = self
            .outputs
            .iter()
            .enumerate()
            .filter(|(_, t)| t.elem.is_float())
            .flat_map(|(k, t)| (0..t.num_elements() as usize).map(move |j| (k, j)))
            .collect();
        let mut rows: Vec<Vec<Tensor<S>>> = Vec::with_capacity(cells.len());
        for &(k, j) in &cells {
            let mut u: Vec<Tensor<S>> = self
                .outputs
                .iter()
                .map(|t| Tensor::filled(shape_of(t), S::zero()))
                .collect();
            u[k].data[j] = S::one();
            match self.vjp(point, &u) {
                Ok(r) if !all_finite(&r) => {
                    return Some(PointStop::NonFinite(self.non_finite_origin(
                        point,
                        &self.zeros::<S>(),
                        Some(&u),
                    )))
                }
                Ok(r) => rows.push(r),
                Err(e) => return Some(Verdict::Undecided { reason: e }.into()),
            }
        }
        let mut tangents = self.zeros::<S>();
        for (b, name) in names.iter().enumerate() {
            for i in 0..tangents[b].len() {
                tangents[b].data[i] = S::one();
                let col = match self.jvp(point, &tangents, false) {
                    Ok((c, _)) if !all_finite(&c) => {
                        return Some(PointStop::NonFinite(
                            self.non_finite_origin(point, &tangents, None),
                        ))
                    }
                    Ok((c, _)) => c,
                    Err(e) => return Some(Verdict::Undecided { reason: e }.into()),
                };
                tangents[b].data[i] = S::zero();
                for (&(k, j), row) in cells.iter().zip(&rows) {
                    let col = &col[k];
                    // Entries are compared against unit scale as well (see the probes).
                    let scale = col.data[j].to_f64().abs() + row[b].data[i].to_f64().abs() + 1.0;
                    let (ok, diff) = self.equal(&col.data[j], &row[b].data[i], scale, exact, tol);
                    if !ok {
                        return Some(PointStop::Verdict(Verdict::Refuted {
                            block: name.clone(),
                            detail: format!(
                                "full Jacobian: ∂y{}{}/∂{}{} is {:.6e}, the backward map gives {:.6e} (gap {diff:.3e})",
                                if self.outputs.len() > 1 { k.to_string() } else { String::new() },
                                multi_index(j, &shape_of(&self.outputs[k])),
                                &name[1..],
                                multi_index(i, &tangents[b].shape),
                                col.data[j].to_f64(),
                                row[b].data[i].to_f64()
                            ),
                        }));
                    }
                }
            }
        }
        None
    }
}

fn scale_label(s: f64) -> String {
    format!("{s}")
}
