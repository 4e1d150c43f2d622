//! The train-step tie: the rendered step's θ' is the optimizer tail applied to
//! ∂Loss/∂θ. At a random point the step is evaluated in f64 (bf16 converts
//! are the identity there: "certified at identity rounding"); the gradient g
//! of every parameter is recovered from the step's outputs (SGD: (θ − θ')/lr;
//! Nesterov: v' − μv; AdamW: (m' − β1·m)/(1 − β1); heavy-ball: v' − μv − wd·θ,
//! so the L2 term the tail adds must be there for g to be the loss gradient);
//! the tail formula of
//! docs/training.md §2 replayed in f64 from (θ, m, v, g) must reproduce θ', m', v';
//! and the g_b are tied to an oracle that never sees the step: the directional
//! derivative of the standalone loss forward (`chain_with_loss()` built with
//! `layers::tie_funcs`) along a random v with a Gaussian v_b on every block at
//! once (one dual-number forward per probe, not one per block), against
//! Σ_b ⟨g_b, v_b⟩; a failed probe is localised to its block by bisection
//! ([`joint_gradient_tie`]).

use crate::tie::Verdict;
use den::{eval_func, Dual, EvalOptions, Tensor, Value};
use ir::rng::{Rng, CERT_SALT};
use ir::{ElemType, Module};
use layers::net::NetSpec;
mod recipe;

use layers::trainstep::{
    step_signature, Optimizer, SlotKind, StepOptions, StepSignature, ADAMW_WEIGHT_DECAY,
    ADAM_BETA1, ADAM_BETA2, ADAM_EPS, HEAVY_BALL_MU, HEAVY_BALL_WEIGHT_DECAY, NESTEROV_MU,
};
use layers::{tie_funcs, Init};
use std::time::Instant;

#[derive(Clone, Debug)]
pub struct StepTieOptions {
    pub seed: u64,
    /// Joint oracle probes (each with v on every parameter block).
    pub probes: usize,
    /// |Σ_b ⟨g_b, v_b⟩ − ∂_v L| ≤ tol · (Σ_b Σ|g_b⊙v_b| + |∂_v L| + ‖v‖):
    /// the terms of both sides, floored by the unit-scale form (as
    /// `cert::tie`, with the loss cotangent u = 1), since a block whose true
    /// gradient is zero (a conv bias in front of a batch norm) has only
    /// rounding noise as terms.
    pub gradient_tolerance: f64,
    /// |replayed − output| ≤ tol · (max|θ| + max|output| + max|lr·g|) per tensor.
    pub tail_tolerance: f64,
    /// The learning rate and step count (for bc1, bc2) at the point.
    pub lr: f64,
    pub t: u32,
    /// The step-1 point of a fresh run (recipe ties only): zero-initialised
    /// parameters exactly 0, m = v = 0 (RMSProp's v = 1, its TF init), and
    /// the caller's `t` should be 1. This is where LAMB's trust ratio meets
    /// ‖θ‖ = 0.
    pub fresh: bool,
}

impl Default for StepTieOptions {
    fn default() -> Self {
        StepTieOptions {
            seed: 0,
            probes: 1,
            gradient_tolerance: 1e-8,
            tail_tolerance: 1e-10,
            lr: 0.5,
            t: 3,
            fresh: false,
        }
    }
}

/// One parameter block's row of a joint gradient probe.
#[derive(Clone, Debug)]
pub struct BlockTie {
    pub param: String,
    /// This block's share ⟨g_b, v_b⟩ of the step's side.
    pub claimed: f64,
    /// The probe's oracle side: (f·)∂L along v, v on every block at once
    /// (the same in every row of the probe).
    pub oracle: f64,
    /// The probe's |Σ_b ⟨g_b, v_b⟩ − ∂L·v| over the tolerance's scale (the
    /// same in every row of the probe).
    pub relative_gap: f64,
}

#[derive(Clone, Debug)]
pub struct StepTieReport {
    pub func: String,
    pub optimizer: Optimizer,
    pub batch: i64,
    pub blocks: Vec<BlockTie>,
    /// Largest scaled gap of the replayed tail over every θ', m', v'.
    pub tail_gap: f64,
    /// |loss(step) − loss(oracle)| / |loss(oracle)|.
    pub loss_gap: f64,
    /// Smallest decision margin of the oracle forward at the point.
    pub min_margin: Option<f64>,
    pub verdict: Verdict,
    pub seconds: f64,
}

impl StepTieReport {
    pub fn certified(&self) -> bool {
        self.verdict == Verdict::Certified
    }
}

/// `gap ≤ tol`, false for NaN (a NaN gap is never within tolerance).
pub(crate) fn within(gap: f64, tol: f64) -> bool {
    gap <= tol
}

pub(crate) fn f32c(x: f64) -> f64 {
    x as f32 as f64
}

pub(crate) fn shape(ty: &ir::TensorType) -> Vec<usize> {
    ty.shape.iter().map(|&d| d as usize).collect()
}

/// A point of the step's inputs: data-like images, parameters by their init,
/// moments, one-hot rows, and host-side scalars.
pub(crate) fn sample(
    sig: &StepSignature,
    net: &NetSpec,
    rng: &mut Rng,
    opts: &StepTieOptions,
) -> Vec<Tensor<f64>> {
    let inits: Vec<Init> = net
        .param_specs()
        .map(|ps| ps.into_iter().map(|p| p.init).collect())
        .unwrap_or_default();
    let mut param_at = 0;
    sig.inputs
        .iter()
        .map(|s| {
            let sh = shape(&s.ty);
            let n: usize = sh.iter().product();
            let mut draw = |f: &mut dyn FnMut(&mut Rng) -> f64| {
                Tensor::new(sh.clone(), (0..n).map(|_| f(rng)).collect())
            };
            match s.kind {
                SlotKind::Images => draw(&mut |r| r.normal()),
                SlotKind::Param => {
                    let init = inits
                        .get(param_at)
                        .cloned()
                        .unwrap_or(Init::Normal { std: 0.5 });
                    param_at += 1;
                    draw(&mut |r| {
                        let z = r.normal();
                        match init {
                            Init::Zeros => 0.1 * z,
                            Init::Ones => 1.0 + 0.25 * z,
                            Init::HeNormal { fan_in } => z * (2.0 / fan_in.max(1) as f64).sqrt(),
                            Init::Normal { std } => z * std,
                            // A constant init (1e-6) would be a degenerate point: draw around
                            // it at the scale of the ones-initialised parameters instead.
                            Init::Const { value } => value + 0.25 * z,
                        }
                    })
                }
                SlotKind::M => draw(&mut |r| 0.01 * r.normal()),
                SlotKind::V => draw(&mut |r| 1e-4 * r.normal().abs()),
                SlotKind::Lr => Tensor::new(vec![], vec![opts.lr]),
                SlotKind::Bc1 => {
                    Tensor::new(vec![], vec![f32c(1.0 - ADAM_BETA1.powi(opts.t as i32))])
                }
                SlotKind::Bc2 => {
                    Tensor::new(vec![], vec![f32c(1.0 - ADAM_BETA2.powi(opts.t as i32))])
                }
                // Drop-path keep scales as the host draws them (keep 3/4 so
                // both outcomes appear at small batches): fixed inputs.
                SlotKind::DropPath => draw(&mut |r| if r.chance(0.75) { 4.0 / 3.0 } else { 0.0 }),
                SlotKind::RunningMean => draw(&mut |r| 0.1 * r.normal()),
                SlotKind::RunningVar => draw(&mut |r| 1.0 + 0.1 * r.normal().abs()),
                SlotKind::OneHot => {
                    let k = sh[1];
                    let mut t = Tensor::filled(sh.clone(), 0.0);
                    for b in 0..sh[0] {
                        let c = (rng.next_u64() % k as u64) as usize;
                        t.data[b * k + c] = 1.0;
                    }
                    t
                }
                _ => Tensor::filled(sh.clone(), 0.0),
            }
        })
        .collect()
}

pub(crate) fn as_values<S: den::Scalar>(ts: &[Tensor<f64>]) -> Vec<Value<S>> {
    ts.iter()
        .map(|t| Value::Float(t.map(|&x| S::from_f64(x).expect("finite")), ElemType::F32))
        .collect()
}

/// The tail replayed in f64 from (θ, m, v, g), in the step's operation order
/// and with its f32 constants: `(θ', m', v')`.
#[allow(clippy::too_many_arguments)]
fn replay(
    opt: Optimizer,
    lr: f64,
    bc1: f64,
    bc2: f64,
    th: f64,
    m: f64,
    v: f64,
    g: f64,
) -> (f64, f64, f64) {
    match opt {
        Optimizer::Sgd => (th - lr * g, m, v),
        Optimizer::Nesterov => {
            let mu = f32c(NESTEROV_MU);
            let vn = mu * v + g;
            (th - lr * (g + mu * vn), m, vn)
        }
        Optimizer::AdamW => {
            let (b1, ob1) = (f32c(ADAM_BETA1), f32c(1.0 - ADAM_BETA1));
            let (b2, ob2) = (f32c(ADAM_BETA2), f32c(1.0 - ADAM_BETA2));
            let mn = b1 * m + ob1 * g;
            let vn = b2 * v + ob2 * (g * g);
            let upd = (mn / bc1) / ((vn / bc2).sqrt() + f32c(ADAM_EPS));
            let moved = th - lr * upd;
            (moved - lr * (f32c(ADAMW_WEIGHT_DECAY) * th), mn, vn)
        }
        Optimizer::HeavyBall => {
            let g_l2 = f32c(HEAVY_BALL_WEIGHT_DECAY) * th + g;
            let vn = f32c(HEAVY_BALL_MU) * v + g_l2;
            (th - lr * vn, m, vn)
        }
        Optimizer::RmsProp | Optimizer::Lamb => unreachable!("recipe::run certifies these tails"),
    }
}

/// g recovered from the step's outputs.
#[allow(clippy::too_many_arguments)]
fn recover(
    opt: Optimizer,
    lr: f64,
    th: f64,
    th_new: f64,
    m: f64,
    m_new: f64,
    v: f64,
    v_new: f64,
) -> f64 {
    match opt {
        Optimizer::Sgd => (th - th_new) / lr,
        Optimizer::Nesterov => v_new - f32c(NESTEROV_MU) * v,
        Optimizer::AdamW => (m_new - f32c(ADAM_BETA1) * m) / f32c(1.0 - ADAM_BETA1),
        Optimizer::HeavyBall => {
            v_new - f32c(HEAVY_BALL_MU) * v - f32c(HEAVY_BALL_WEIGHT_DECAY) * th
        }
        Optimizer::RmsProp | Optimizer::Lamb => unreachable!("recipe::run certifies these tails"),
    }
}

/// The oracle of a train-step tie: the standalone loss forward of a chain
/// (built with `layers::tie_funcs`, never the step), at the step's point,
/// evaluated over dual numbers.
pub(crate) struct LossOracle {
    module: Module,
    point: Vec<Tensor<f64>>,
    /// The forward argument of each θ block (drop-path keep inputs, fixed
    /// at the step's values, sit between them).
    theta_arg: Vec<usize>,
}

impl LossOracle {
    /// The oracle at the step's `point` (images, the `n_params` θ slots, the
    /// one-hot target).
    pub(crate) fn new(
        chain: &layers::Chain,
        net: &NetSpec,
        batch: i64,
        point: &[Tensor<f64>],
        sig: &StepSignature,
        n_params: usize,
    ) -> Result<LossOracle, String> {
        let x4_ty = net.input_type(batch);
        let funcs = tie_funcs(chain, &x4_ty).map_err(|e| e.to_string())?;
        let keeps = sig.input_positions(SlotKind::DropPath);
        if funcs.params.len() != n_params + keeps.len() + 1 {
            return Err(
                "the loss forward's parameters are not θ, the drop-path keeps and the target"
                    .into(),
            );
        }
        let x4 = Tensor::new(shape(&x4_ty), point[0].data.clone());
        // Step slots in the chain's parameter order: θ then the target, with
        // the keep inputs at their blocks' positions.
        let mut rest = sig.input_positions(SlotKind::Param);
        rest.push(sig.input_positions(SlotKind::OneHot)[0]);
        let keep_at = layers::droppath::keep_positions(chain, &x4_ty);
        let order = layers::droppath::interleave(&keep_at, &keeps, &rest);
        let mut oracle_point = vec![x4];
        oracle_point.extend(order.iter().map(|&i| point[i].clone()));
        let theta_arg = sig
            .input_positions(SlotKind::Param)
            .iter()
            .map(|i| 1 + order.iter().position(|j| j == i).expect("θ slot"))
            .collect();
        Ok(LossOracle {
            module: funcs.module(),
            point: oracle_point,
            theta_arg,
        })
    }

    /// `(L, ∂L along the tangents, margins)`: `tangents[b]` on parameter
    /// block b (None: zero), one dual-number forward on the fast kernels
    /// (decision ops stay generic while margins are recorded).
    pub(crate) fn jvp(
        &self,
        tangents: &[Option<&Tensor<f64>>],
        record: bool,
    ) -> Result<(f64, f64, Vec<den::Margin>), String> {
        let inputs: Vec<Value<Dual<f64>>> = self
            .point
            .iter()
            .enumerate()
            .map(|(k, t)| {
                let tangent = self
                    .theta_arg
                    .iter()
                    .position(|&a| a == k)
                    .and_then(|b| tangents.get(b).copied().flatten());
                let data = match tangent {
                    Some(v) => t
                        .data
                        .iter()
                        .zip(&v.data)
                        .map(|(&x, &d)| Dual::new(x, d))
                        .collect(),
                    None => t.data.iter().map(|&x| Dual::new(x, 0.0)).collect(),
                };
                Value::Float(Tensor::new(t.shape.clone(), data), ElemType::F32)
            })
            .collect();
        let o = EvalOptions {
            fast: true,
            record_margins: record,
            replicas: 1,
        };
        let ev = eval_func::<Dual<f64>>(&self.module, "forward", inputs, &o)
            .map_err(|e| format!("oracle forward: {e}"))?;
        let y = ev.outputs[0].as_float().ok_or("oracle output")?.data[0].clone();
        Ok((y.value, y.tangent, ev.margins))
    }
}

/// `k` joint probes: each a Gaussian v_b for every block (shapes), probe by
/// probe.
pub(crate) fn draw_probes(rng: &mut Rng, shapes: &[Vec<usize>], k: usize) -> Vec<Vec<Tensor<f64>>> {
    (0..k)
        .map(|_| {
            shapes
                .iter()
                .map(|sh| Tensor::new(sh.clone(), crate::probe::normals(rng, sh.iter().product())))
                .collect()
        })
        .collect()
}

/// The probe's tangents, one per block.
pub(crate) fn tangents(v: &[Tensor<f64>]) -> Vec<Option<&Tensor<f64>>> {
    v.iter().map(Some).collect()
}

/// The gradient tie of every block at once, by joint probes: per probe,
/// Σ_b ⟨g_b, v_b⟩ from the step against ∂L·v (v on every block) from the
/// oracle — one dual forward per probe instead of one per block. A wrong
/// block passes only if its error hides below `tol` relative to the terms of
/// the whole identity (Gaussian v: a nonzero error polynomial vanishes with
/// probability 0). `first_dl` is probe 0's ∂L·v (the caller's forward that
/// also recorded margins). With `fitted` (clip without accumulation) the
/// step's gradients are f·∂L for one unknown f, fitted by least squares over
/// the probes (the caller draws at least two, so the fit is checked).
/// A failed probe is localised by bisection over the blocks and refuted at
/// the block it isolates, with that block's own figures. Every block gets a
/// row per probe: its share ⟨g_b, v_b⟩ and the probe's (f·)∂L·v and gap.
/// Returns the verdict and f (1 unless fitted).
#[allow(clippy::too_many_arguments)]
pub(crate) fn joint_gradient_tie(
    oracle: &LossOracle,
    grads: &[Vec<f64>],
    names: &[String],
    probes: &[Vec<Tensor<f64>>],
    first_dl: f64,
    fitted: bool,
    tol: f64,
    report: &mut StepTieReport,
) -> Result<(Verdict, f64), String> {
    use crate::probe::{abs_dot, dot};
    // Per probe: each block's ⟨g_b, v_b⟩, Σ|g_b⊙v_b| and ‖v_b‖², and ∂L·v.
    struct Figures {
        per: Vec<f64>,
        terms: Vec<f64>,
        v2: Vec<f64>,
        dl: f64,
    }
    let mut figs = Vec::new();
    for (p, v) in probes.iter().enumerate() {
        let dl = if p == 0 {
            first_dl
        } else {
            oracle.jvp(&tangents(v), false)?.1
        };
        figs.push(Figures {
            per: grads.iter().zip(v).map(|(g, v)| dot(g, &v.data)).collect(),
            terms: grads
                .iter()
                .zip(v)
                .map(|(g, v)| abs_dot(g, &v.data))
                .collect(),
            v2: v.iter().map(|v| dot(&v.data, &v.data)).collect(),
            dl,
        });
    }
    let claimed = |f: &Figures| f.per.iter().sum::<f64>();
    let factor = if fitted {
        let num: f64 = figs.iter().map(|f| claimed(f) * f.dl).sum();
        let den: f64 = figs.iter().map(|f| f.dl * f.dl).sum();
        num / den
    } else {
        1.0
    };
    // (oracle side, claimed side, scale) over the blocks of `set`, given the
    // set's ∂L·v.
    let identity = |f: &Figures, set: &[usize], dl: f64| {
        let rhs: f64 = set.iter().map(|&b| f.per[b]).sum();
        let terms: f64 = set.iter().map(|&b| f.terms[b]).sum();
        let norm_v = set.iter().map(|&b| f.v2[b]).sum::<f64>().sqrt();
        (factor * dl, rhs, terms + factor * dl.abs() + norm_v)
    };
    let all: Vec<usize> = (0..grads.len()).collect();
    for (f, v) in figs.iter().zip(probes) {
        let (lhs, rhs, scale) = identity(f, &all, f.dl);
        let gap = (rhs - lhs).abs() / scale;
        for (b, name) in names.iter().enumerate() {
            report.blocks.push(BlockTie {
                param: name.clone(),
                claimed: f.per[b],
                oracle: lhs,
                relative_gap: gap,
            });
        }
        if within(gap, tol) {
            continue;
        }
        let restricted = |set: &[usize]| -> Result<crate::probe::Restricted, String> {
            let t: Vec<Option<&Tensor<f64>>> = (0..v.len())
                .map(|b| set.contains(&b).then_some(&v[b]))
                .collect();
            let dl = oracle.jvp(&t, false)?.1;
            Ok(identity(f, set, dl))
        };
        let (b, (l, r, t)) = crate::probe::bisect(grads.len(), (lhs, rhs, scale), tol, restricted)?;
        return Ok((
            Verdict::Refuted {
                block: format!("d{}", names[b]),
                detail: format!(
                    "⟨g, v⟩ = {r:.12e} from the step, {}∂L·v = {l:.12e} from the standalone forward (ratio {:.6}, scaled gap {:.2e} > {tol:.0e}); the joint probe over {} blocks failed with scaled gap {gap:.2e} and bisection isolated this block",
                    if fitted { "f·" } else { "" },
                    r / l,
                    (r - l).abs() / t,
                    grads.len()
                ),
            },
            factor,
        ));
    }
    Ok((Verdict::Certified, factor))
}

/// Certify the rendered train step `step` of `net` (batch `batch`, optimizer
/// `opt`) at one random point.
pub fn certify_train_step(
    net: &NetSpec,
    batch: i64,
    opt: Optimizer,
    step: &Module,
    opts: &StepTieOptions,
) -> StepTieReport {
    let t0 = Instant::now();
    let mut report = StepTieReport {
        func: String::new(),
        optimizer: opt,
        batch,
        blocks: Vec::new(),
        tail_gap: 0.0,
        loss_gap: 0.0,
        min_margin: None,
        verdict: Verdict::Certified,
        seconds: 0.0,
    };
    let verdict = if Optimizer::ALL.contains(&opt) {
        run(net, batch, opt, step, opts, &mut report)
    } else {
        recipe::run(net, batch, &StepOptions::new(opt), step, opts, &mut report)
    };
    report.verdict = match verdict {
        Ok(v) => v,
        Err(reason) => Verdict::Undecided { reason },
    };
    report.seconds = t0.elapsed().as_secs_f64();
    report
}

/// Certify the rendered train step `step` of `net` for the recipe `so`
/// (single-device: `so.replicas` must be 1; bf16 is the identity in f64) at
/// one random point, or at the two points of an accumulation cycle (its
/// first and its last micro-batch). A plain step of the original four tails
/// takes `certify_train_step`'s path; every other recipe `recipe::run`'s.
pub fn certify_recipe_step(
    net: &NetSpec,
    batch: i64,
    so: &StepOptions,
    step: &Module,
    opts: &StepTieOptions,
) -> StepTieReport {
    if so.recipe.is_plain() && Optimizer::ALL.contains(&so.optimizer) {
        return certify_train_step(net, batch, so.optimizer, step, opts);
    }
    let t0 = Instant::now();
    let mut report = StepTieReport {
        func: String::new(),
        optimizer: so.optimizer,
        batch,
        blocks: Vec::new(),
        tail_gap: 0.0,
        loss_gap: 0.0,
        min_margin: None,
        verdict: Verdict::Certified,
        seconds: 0.0,
    };
    report.verdict = match recipe::run(net, batch, so, step, opts, &mut report) {
        Ok(v) => v,
        Err(reason) => Verdict::Undecided { reason },
    };
    report.seconds = t0.elapsed().as_secs_f64();
    report
}

fn run(
    net: &NetSpec,
    batch: i64,
    opt: Optimizer,
    step: &Module,
    opts: &StepTieOptions,
    report: &mut StepTieReport,
) -> Result<Verdict, String> {
    let sig = step_signature(net, batch, opt).map_err(|e| e.to_string())?;
    report.func = sig.func.clone();
    let f = step
        .func(&sig.func)
        .ok_or_else(|| format!("the module has no @{}", sig.func))?;
    let want: Vec<_> = sig.inputs.iter().map(|s| s.ty.clone()).collect();
    if f.param_types() != want {
        return Err(format!(
            "@{} does not have the packed signature of {}",
            sig.func, net.name
        ));
    }
    let mut rng = Rng::salted(opts.seed, CERT_SALT);
    let point = sample(&sig, net, &mut rng, opts);
    // f64 on the fast kernels: f64 never rounds, so they compute what the
    // generic rules do, up to the order of their sums.
    let eval_opts = EvalOptions::default();
    let outs: Vec<Tensor<f64>> = eval_func::<f64>(step, &sig.func, as_values(&point), &eval_opts)
        .map_err(|e| format!("evaluating the step: {e}"))?
        .outputs
        .into_iter()
        .map(|v| v.into_float().ok_or("non-float step output"))
        .collect::<Result<_, _>>()?;

    let pos_in = |k| sig.input_positions(k);
    let pos_out = |k| sig.output_positions(k);
    let scalar = |k| point[pos_in(k)[0]].data[0];
    let (lr, bc1, bc2) = (
        scalar(SlotKind::Lr),
        scalar(SlotKind::Bc1),
        scalar(SlotKind::Bc2),
    );
    let names: Vec<String> = pos_in(SlotKind::Param)
        .iter()
        .map(|&i| sig.inputs[i].name.clone())
        .collect();
    let (ti, mi, vi) = (
        pos_in(SlotKind::Param),
        pos_in(SlotKind::M),
        pos_in(SlotKind::V),
    );
    let (to, mo, vo) = (
        pos_out(SlotKind::Param),
        pos_out(SlotKind::M),
        pos_out(SlotKind::V),
    );

    // 1. Recover g and replay the tail.
    let mut grads = Vec::new();
    for b in 0..names.len() {
        let (th, m, v) = (&point[ti[b]], &point[mi[b]], &point[vi[b]]);
        let (thn, mn, vn) = (&outs[to[b]], &outs[mo[b]], &outs[vo[b]]);
        let g: Vec<f64> = (0..th.len())
            .map(|i| {
                recover(
                    opt,
                    lr,
                    th.data[i],
                    thn.data[i],
                    m.data[i],
                    mn.data[i],
                    v.data[i],
                    vn.data[i],
                )
            })
            .collect();
        let max = |t: &[f64]| t.iter().fold(0.0f64, |a, x| a.max(x.abs()));
        for (which, out, k) in [("θ'", thn, 0), ("m'", mn, 1), ("v'", vn, 2)] {
            let scale = max(&th.data) + max(&out.data) + lr * max(&g) + f64::MIN_POSITIVE;
            for (i, &gi) in g.iter().enumerate() {
                let r = replay(opt, lr, bc1, bc2, th.data[i], m.data[i], v.data[i], gi);
                let want = [r.0, r.1, r.2][k];
                let gap = (want - out.data[i]).abs() / scale;
                report.tail_gap = report.tail_gap.max(gap);
                if !within(gap, opts.tail_tolerance) {
                    return Ok(Verdict::Refuted {
                        block: format!("{which} of {}", names[b]),
                        detail: format!(
                            "the {} tail replayed from (θ, m, v, g) gives {want:.9e} at {}, the step outputs {:.9e} (scaled gap {gap:.2e} > {:.0e})",
                            opt.name(),
                            crate::tie::multi_index(i, &th.shape),
                            out.data[i],
                            opts.tail_tolerance
                        ),
                    });
                }
            }
        }
        grads.push(g);
    }

    // 2. The oracle: the standalone loss forward, over dual numbers, with
    // v on every block at once; its first forward also records the margins.
    let chain = net.chain_with_loss().map_err(|e| e.to_string())?;
    let oracle = LossOracle::new(&chain, net, batch, &point, &sig, names.len())?;
    let shapes: Vec<Vec<usize>> = ti.iter().map(|&i| point[i].shape.clone()).collect();
    let probes = draw_probes(&mut rng, &shapes, opts.probes);
    let none = vec![None; names.len()];
    let first = probes.first().map_or(none, |v| tangents(v));
    let (loss, first_dl, margins) = oracle.jvp(&first, true)?;
    if let Some(m) = margins.iter().find(|m| m.ties > 0) {
        return Err(format!(
            "the point sits on a kink ({} #{}, margin 0)",
            m.op, m.op_index
        ));
    }
    report.min_margin = margins.iter().map(|m| m.min).reduce(f64::min);
    let step_loss = outs[pos_out(SlotKind::Loss)[0]].data[0];
    report.loss_gap = (step_loss - loss).abs() / loss.abs().max(f64::MIN_POSITIVE);
    if !within(report.loss_gap, opts.gradient_tolerance) {
        return Ok(Verdict::Refuted {
            block: "loss".into(),
            detail: format!(
                "the step reports loss {step_loss:.12e}, the standalone forward {loss:.12e}"
            ),
        });
    }

    // 3. Tie every gradient block to the oracle at once.
    let (verdict, _) = joint_gradient_tie(
        &oracle,
        &grads,
        &names,
        &probes,
        first_dl,
        false,
        opts.gradient_tolerance,
        report,
    )?;
    Ok(verdict)
}
