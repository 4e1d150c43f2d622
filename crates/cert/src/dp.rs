//! The data-parallel step's identities (docs/conventions.md §18). The R-replica render
//! (one `all_reduce` sum per parameter gradient, then ÷R) is run by the
//! replica evaluator and compared with the single-device step rendered from
//! the same NetSpec (which the train-step tie certifies):
//!
//! * `Split`: without true-batch BN, R replicas × B examples equal one device
//!   × R·B examples: ½[(1/B)Σ_A + (1/B)Σ_B] = (1/2B)Σ_{A∪B}.
//! * `Duplicated`: every replica gets the same B examples ⇒ the R-replica step
//!   equals the single step on those B examples (valid with batch BN, whose
//!   statistics stay per replica).
//! * `Agreement`: different examples on every replica ⇒ every replica's θ',
//!   m', v' are bit-identical (valid for every net; what catches a missing
//!   collective when the data are duplicated).
//!
//! Every identity also checks that the replicas agree bit for bit. The
//! identities hold in exact arithmetic, but the step is not rational
//! (softmax-CE has exp and log, batch norm rsqrt), so [`FrozenExact`] runs the
//! step over big rationals with each transcendental frozen to a fixed
//! function (its f64 value, made exact): the identities use nothing about
//! those functions but that each returns the same value for the same exact
//! argument, so they must hold with zero residual. f64 and f32 (native fast
//! kernels) give the rounding-level residuals.

use crate::step::{as_values, sample, StepTieOptions};
use crate::tie::{multi_index, Verdict};
use den::{eval_func, eval_replicas, EvalOptions, Exact, NotExact, Scalar, Tensor, Value};
use ir::rng::{Rng, CERT_SALT};
use ir::{ElemType, Module};
use layers::net::NetSpec;
use layers::ops::norm::BnWorld;
use layers::trainstep::{render_step, step_signature_with, SlotKind, StepOptions};
use std::cmp::Ordering;
use std::time::Instant;

/// Which data-parallel identity to check.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DpIdentity {
    /// R × B = 1 × R·B (nets without true-batch BN).
    Split,
    /// R copies of one batch of B = 1 × B.
    Duplicated,
    /// Different batches: the replicas' θ', m', v' agree bit for bit.
    Agreement,
}

#[derive(Clone, Debug)]
pub struct DpOptions {
    pub seed: u64,
    /// Largest accepted scaled gap (0: the difference must be exactly zero).
    pub tolerance: f64,
    /// Use the fast kernels (f32/f64).
    pub fast: bool,
    /// The learning rate and step count (bc1, bc2) at the point.
    pub lr: f64,
    pub t: u32,
}

impl DpOptions {
    /// Exact comparison (for [`FrozenExact`]).
    pub fn exact(seed: u64) -> Self {
        DpOptions {
            seed,
            tolerance: 0.0,
            fast: false,
            lr: 0.5,
            t: 3,
        }
    }
    /// Scaled gap at most `tolerance` on the fast kernels.
    pub fn rounded(seed: u64, tolerance: f64) -> Self {
        DpOptions {
            tolerance,
            fast: true,
            ..DpOptions::exact(seed)
        }
    }
}

#[derive(Clone, Debug)]
pub struct DpReport {
    pub func: String,
    pub identity: DpIdentity,
    pub replicas: usize,
    /// Per replica.
    pub batch: i64,
    /// The scalar the step ran over (`exact-frozen`, `f64`, `f32`).
    pub arithmetic: String,
    /// Largest |dp − reference| over the output's scale (max |reference| +
    /// max |the input it updates|), over every θ', m', v', loss and batch
    /// statistic compared.
    pub max_gap: f64,
    /// Where `max_gap` is (`θ' of stage1.conv1.W[3, 0, 1, 2]`).
    pub worst: String,
    /// Outputs compared exactly equal (every difference exactly zero).
    pub zero_residual: bool,
    pub verdict: Verdict,
    pub seconds: f64,
}

impl DpReport {
    pub fn certified(&self) -> bool {
        self.verdict == Verdict::Certified
    }
}

/// Check `identity` for the data-parallel step `dp_step` of `net` (rendered
/// with `step` at per-replica batch `batch`) over the scalar `S`.
pub fn check_dp_step<S: Scalar>(
    net: &NetSpec,
    batch: i64,
    step: &StepOptions,
    dp_step: &Module,
    identity: DpIdentity,
    opts: &DpOptions,
) -> DpReport {
    let t0 = Instant::now();
    let mut report = DpReport {
        func: String::new(),
        identity,
        replicas: step.replicas,
        batch,
        arithmetic: S::type_name(),
        max_gap: 0.0,
        worst: String::new(),
        zero_residual: true,
        verdict: Verdict::Certified,
        seconds: 0.0,
    };
    report.verdict = match run::<S>(net, batch, step, dp_step, identity, opts, &mut report) {
        Ok(v) => v,
        Err(reason) => Verdict::Undecided { reason },
    };
    report.seconds = t0.elapsed().as_secs_f64();
    report
}

/// Whether any batch norm of `net` — top level or inside a block — is a
/// true-batch one (the walk of `NetSpec::bn_sites`, whatever the kinds).
fn has_batch_bn(net: &NetSpec) -> bool {
    net.bn_sites()
        .is_ok_and(|sites| sites.iter().any(|s| s.world == BnWorld::Batch))
}

/// Rows `[from, from + n)` of a `[N, …]` tensor.
fn rows(t: &Tensor<f64>, from: usize, n: usize) -> Tensor<f64> {
    let row: usize = t.shape[1..].iter().product();
    let mut shape = t.shape.clone();
    shape[0] = n;
    Tensor::new(shape, t.data[from * row..(from + n) * row].to_vec())
}

fn floats<S: Scalar>(vs: Vec<Value<S>>) -> Result<Vec<Tensor<S>>, String> {
    vs.into_iter()
        .map(|v| {
            v.into_float()
                .ok_or_else(|| "a non-float step output".to_string())
        })
        .collect()
}

fn abs_max<S: Scalar>(t: &[S]) -> f64 {
    t.iter().fold(0.0f64, |a, x| a.max(x.to_f64().abs()))
}

#[allow(clippy::too_many_arguments)]
fn run<S: Scalar>(
    net: &NetSpec,
    batch: i64,
    step: &StepOptions,
    dp_step: &Module,
    identity: DpIdentity,
    opts: &DpOptions,
    report: &mut DpReport,
) -> Result<Verdict, String> {
    let r = step.replicas;
    if r < 2 {
        return Err("a data-parallel identity needs at least 2 replicas".into());
    }
    if identity == DpIdentity::Split && has_batch_bn(net) {
        return Err(format!(
            "{} has true-batch BN, whose statistics are per replica: R × B is not 1 × R·B \
             (check the Duplicated and Agreement identities instead)",
            net.name
        ));
    }
    let sig = step_signature_with(net, batch, step).map_err(|e| e.to_string())?;
    report.func = sig.func.clone();
    let f = dp_step
        .func(&sig.func)
        .ok_or_else(|| format!("the module has no @{}", sig.func))?;
    let want: Vec<_> = sig.inputs.iter().map(|s| s.ty.clone()).collect();
    if f.param_types() != want {
        return Err(format!(
            "@{} does not have the packed signature of {} at batch {batch}",
            sig.func, net.name
        ));
    }

    // The point: for Split, R·B examples cut into R slices; otherwise B
    // examples (repeated, or drawn afresh for each replica).
    let ub = batch as usize;
    let single = StepOptions {
        replicas: 1,
        ..*step
    };
    let ref_batch = match identity {
        DpIdentity::Split => batch * r as i64,
        _ => batch,
    };
    let ref_sig = step_signature_with(net, ref_batch, &single).map_err(|e| e.to_string())?;
    let tie_opts = StepTieOptions {
        seed: opts.seed,
        lr: opts.lr,
        t: opts.t,
        ..StepTieOptions::default()
    };
    let mut rng = Rng::salted(opts.seed, CERT_SALT);
    let point = sample(&ref_sig, net, &mut rng, &tie_opts);
    let per_example = |s: SlotKind| matches!(s, SlotKind::Images | SlotKind::OneHot);
    let replica_points: Vec<Vec<Tensor<f64>>> = (0..r)
        .map(|k| match identity {
            DpIdentity::Split => sig
                .inputs
                .iter()
                .zip(&point)
                .map(|(s, t)| {
                    if per_example(s.kind) {
                        rows(t, k * ub, ub)
                    } else {
                        t.clone()
                    }
                })
                .collect(),
            DpIdentity::Duplicated => point.clone(),
            DpIdentity::Agreement => {
                let fresh = sample(&ref_sig, net, &mut rng, &tie_opts);
                sig.inputs
                    .iter()
                    .zip(point.iter().zip(fresh))
                    .map(|(s, (shared, own))| {
                        if per_example(s.kind) {
                            own
                        } else {
                            shared.clone()
                        }
                    })
                    .collect()
            }
        })
        .collect();

    let eval_opts = EvalOptions {
        fast: opts.fast,
        record_margins: false,
        replicas: r,
    };
    let dp_outs: Vec<Vec<Tensor<S>>> = eval_replicas::<S>(
        dp_step,
        &sig.func,
        replica_points.iter().map(|p| as_values(p)).collect(),
        &eval_opts,
    )
    .map_err(|e| format!("evaluating the data-parallel step: {e}"))?
    .into_iter()
    .map(|e| floats(e.outputs))
    .collect::<Result<_, _>>()?;

    // Every replica applies the same update.
    let updated = |k: SlotKind| matches!(k, SlotKind::Param | SlotKind::M | SlotKind::V);
    for (o, slot) in sig.outputs.iter().enumerate() {
        if !updated(slot.kind) {
            continue;
        }
        for (k, outs) in dp_outs.iter().enumerate().skip(1) {
            let (a, b) = (&dp_outs[0][o], &outs[o]);
            if let Some(i) = (0..a.len()).find(|&i| !a.data[i].sub(&b.data[i]).is_zero()) {
                return Ok(Verdict::Refuted {
                    block: "replica agreement".into(),
                    detail: format!(
                        "replica {k}'s {} {}{} is {:.9e}, replica 0's {:.9e}: the replicas \
                         applied different updates",
                        which(slot.kind),
                        slot.name,
                        multi_index(i, &a.shape),
                        b.data[i].to_f64(),
                        a.data[i].to_f64()
                    ),
                });
            }
        }
    }
    if identity == DpIdentity::Agreement {
        return Ok(Verdict::Certified);
    }

    let reference = render_step(net, ref_batch, &single)
        .map_err(|e| e.to_string())?
        .module;
    let ref_eval = EvalOptions {
        replicas: 1,
        ..eval_opts
    };
    let ref_outs = floats(
        eval_func::<S>(&reference, &ref_sig.func, as_values(&point), &ref_eval)
            .map_err(|e| format!("evaluating the single-device step: {e}"))?
            .outputs,
    )?;

    let input_of = |o: usize| -> Option<usize> {
        let name = &sig.outputs[o].name;
        sig.inputs
            .iter()
            .position(|s| s.name == *name && s.kind == sig.outputs[o].kind)
    };
    let mut compare =
        |label: String, got: &[S], want: &[S], shape: &[usize], scale: f64| -> Option<Verdict> {
            for i in 0..want.len() {
                let diff = got[i].sub(&want[i]);
                let exact_zero = diff.is_zero();
                report.zero_residual &= exact_zero;
                let gap = diff.to_f64().abs() / scale;
                if gap > report.max_gap || (report.worst.is_empty() && !exact_zero) {
                    report.max_gap = report.max_gap.max(gap);
                    report.worst = format!("{label}{}", multi_index(i, shape));
                }
                let ok = if opts.tolerance == 0.0 {
                    exact_zero
                } else {
                    gap <= opts.tolerance
                };
                if !ok {
                    return Some(Verdict::Refuted {
                        block: label.clone(),
                        detail: format!(
                        "{label}{}: the {r}-replica step gives {:.12e}, the single-device step \
                         {:.12e} (scaled gap {gap:.2e}, tolerance {:.0e})",
                        multi_index(i, shape),
                        got[i].to_f64(),
                        want[i].to_f64(),
                        opts.tolerance
                    ),
                    });
                }
            }
            None
        };
    for (o, slot) in sig.outputs.iter().enumerate() {
        let want = &ref_outs[o];
        let label = format!("{} {}", which(slot.kind), slot.name);
        let verdict = match slot.kind {
            SlotKind::Param | SlotKind::M | SlotKind::V => {
                let before = input_of(o).map_or(0.0, |i| abs_max(&point[i].data));
                let scale = abs_max(&want.data) + before + f64::MIN_POSITIVE;
                compare(label, &dp_outs[0][o].data, &want.data, &want.shape, scale)
            }
            SlotKind::Loss => {
                let scale = abs_max(&want.data) + f64::MIN_POSITIVE;
                let got = match identity {
                    // The host's global loss: the mean of the replica losses.
                    DpIdentity::Split => {
                        let sum = dp_outs
                            .iter()
                            .skip(1)
                            .fold(dp_outs[0][o].data[0].clone(), |a, d| a.add(&d[o].data[0]));
                        let r_s = S::from_i64(r as i64);
                        vec![sum.div(&r_s)]
                    }
                    _ => dp_outs[0][o].data.clone(),
                };
                let mut v = None;
                if identity == DpIdentity::Duplicated {
                    for outs in &dp_outs {
                        v = v.or_else(|| {
                            compare(label.clone(), &outs[o].data, &want.data, &[], scale)
                        });
                    }
                } else {
                    v = compare(label, &got, &want.data, &[], scale);
                }
                v
            }
            SlotKind::BatchMean | SlotKind::BatchVar => {
                let scale = abs_max(&want.data) + f64::MIN_POSITIVE;
                let mut v = None;
                for outs in &dp_outs {
                    v = v.or_else(|| {
                        compare(label.clone(), &outs[o].data, &want.data, &want.shape, scale)
                    });
                }
                v
            }
            _ => None,
        };
        if let Some(v) = verdict {
            return Ok(v);
        }
    }
    Ok(Verdict::Certified)
}

fn which(kind: SlotKind) -> &'static str {
    match kind {
        SlotKind::Param => "θ' of",
        SlotKind::M => "m' of",
        SlotKind::V => "v' of",
        SlotKind::Loss => "the",
        SlotKind::BatchMean | SlotKind::BatchVar => "the batch statistic",
        _ => "output",
    }
}

/// Exact rationals ([`Exact`]) with every transcendental function frozen to
/// a fixed rational-valued function: the f64 value of the true result at the
/// f64 nearest the exact argument, made exact (or the exact result itself
/// where it is rational). Arithmetic, comparisons and rounding stay exact,
/// so any identity the module satisfies for arbitrary functions in place of
/// exp, log, rsqrt, … holds with zero residual — the data-parallel
/// identities are of that kind.
#[derive(Clone, Debug, PartialEq)]
pub struct FrozenExact(pub Exact);

impl FrozenExact {
    fn frozen(
        &self,
        exact: impl FnOnce(&Exact) -> Result<Exact, NotExact>,
        float: impl FnOnce(f64) -> f64,
    ) -> Result<Self, NotExact> {
        match exact(&self.0) {
            Ok(e) => Ok(FrozenExact(e)),
            Err(_) => Exact::from_f64(float(self.0.to_f64())).map(FrozenExact),
        }
    }
}

impl Scalar for FrozenExact {
    fn type_name() -> String {
        "exact-frozen".into()
    }
    const MAY_BE_UNDEFINED: bool = true;
    fn zero() -> Self {
        FrozenExact(Exact::zero())
    }
    fn one() -> Self {
        FrozenExact(Exact::one())
    }
    fn from_f64(x: f64) -> Result<Self, NotExact> {
        Exact::from_f64(x).map(FrozenExact)
    }
    fn from_i64(x: i64) -> Self {
        FrozenExact(Exact::from_i64(x))
    }
    fn to_f64(&self) -> f64 {
        self.0.to_f64()
    }
    fn is_zero(&self) -> bool {
        self.0.is_zero()
    }
    fn is_nan(&self) -> bool {
        self.0.is_nan()
    }
    fn add(&self, o: &Self) -> Self {
        FrozenExact(self.0.add(&o.0))
    }
    fn sub(&self, o: &Self) -> Self {
        FrozenExact(self.0.sub(&o.0))
    }
    fn mul(&self, o: &Self) -> Self {
        FrozenExact(self.0.mul(&o.0))
    }
    fn div(&self, o: &Self) -> Self {
        FrozenExact(self.0.div(&o.0))
    }
    fn neg(&self) -> Self {
        FrozenExact(self.0.neg())
    }
    fn abs(&self) -> Self {
        FrozenExact(self.0.abs())
    }
    fn rem(&self, o: &Self) -> Self {
        FrozenExact(self.0.rem(&o.0))
    }
    fn primal_cmp(&self, o: &Self) -> Option<Ordering> {
        self.0.primal_cmp(&o.0)
    }
    fn total_cmp(&self, o: &Self) -> Ordering {
        self.0.total_cmp(&o.0)
    }
    fn max(&self, o: &Self) -> Self {
        FrozenExact(self.0.max(&o.0))
    }
    fn min(&self, o: &Self) -> Self {
        FrozenExact(self.0.min(&o.0))
    }
    fn gap(&self, o: &Self) -> f64 {
        self.0.gap(&o.0)
    }
    fn sign(&self) -> Self {
        FrozenExact(self.0.sign())
    }
    fn floor(&self) -> Self {
        FrozenExact(self.0.floor())
    }
    fn ceil(&self) -> Self {
        FrozenExact(self.0.ceil())
    }
    fn round_nearest_even(&self) -> Self {
        FrozenExact(self.0.round_nearest_even())
    }
    fn trunc(&self) -> Self {
        FrozenExact(self.0.trunc())
    }
    fn exp(&self) -> Result<Self, NotExact> {
        self.frozen(Exact::exp, f64::exp)
    }
    fn expm1(&self) -> Result<Self, NotExact> {
        self.frozen(Exact::expm1, f64::exp_m1)
    }
    fn log(&self) -> Result<Self, NotExact> {
        self.frozen(Exact::log, f64::ln)
    }
    fn log1p(&self) -> Result<Self, NotExact> {
        self.frozen(Exact::log1p, f64::ln_1p)
    }
    fn sqrt(&self) -> Result<Self, NotExact> {
        self.frozen(Exact::sqrt, f64::sqrt)
    }
    fn rsqrt(&self) -> Result<Self, NotExact> {
        self.frozen(Exact::rsqrt, |x| 1.0 / x.sqrt())
    }
    fn cbrt(&self) -> Result<Self, NotExact> {
        self.frozen(Exact::cbrt, f64::cbrt)
    }
    fn tanh(&self) -> Result<Self, NotExact> {
        self.frozen(Exact::tanh, f64::tanh)
    }
    fn logistic(&self) -> Result<Self, NotExact> {
        self.frozen(Exact::logistic, |x| 1.0 / (1.0 + (-x).exp()))
    }
    fn sin(&self) -> Result<Self, NotExact> {
        self.frozen(Exact::sin, f64::sin)
    }
    fn cos(&self) -> Result<Self, NotExact> {
        self.frozen(Exact::cos, f64::cos)
    }
    fn erf(&self) -> Result<Self, NotExact> {
        self.frozen(Exact::erf, den::scalar::erf_f64)
    }
    fn pow(&self, o: &Self) -> Result<Self, NotExact> {
        let y = o.0.to_f64();
        self.frozen(|x| x.pow(&o.0), |x| x.powf(y))
    }
    fn round_to(self, elem: ElemType) -> Self {
        FrozenExact(self.0.round_to(elem))
    }
    fn round_accumulated(self, elem: ElemType) -> Self {
        FrozenExact(self.0.round_accumulated(elem))
    }
    fn undefined(&self) -> Option<String> {
        self.0.undefined()
    }
}
