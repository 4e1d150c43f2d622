//! The train-step tie of a recipe (docs/training.md §2): TF-RMSProp and LAMB
//! tails, global-norm clipping, no-decay groups, gradient accumulation, the
//! EMA shadow and the BCE loss. At a random point (two for accumulation: a
//! cycle's first micro-batch, akeep = aup = 0, and its last, akeep = aup = 1)
//! the step is evaluated in f64; the gradient g of every parameter is
//! recovered from its outputs (with accumulation `G' − akeep·G`, the raw
//! micro-batch gradient; otherwise the tail's inverse, which gives the
//! consumed, possibly clipped gradient ĝ); each g is tied to the directional
//! derivative of the standalone loss forward (`LossOracle`); and the whole
//! recipe — accumulation, clip, tail with per-tensor decay, apply gate, EMA —
//! is replayed in f64 from (θ, m, v, shadow, G, g) and compared with every
//! output.
//!
//! Clipping without accumulation leaves only ĝ = f·g in the outputs, with one
//! unknown f: it is fitted to the oracle over all blocks (least squares), each
//! block must then agree with f·∂L on its own (a per-tensor factor does not),
//! and f must be the formula's `min(1, c/(‖ĝ‖/f + 1e-6))`.

use super::{f32c, sample, shape, within, LossOracle, StepTieOptions, StepTieReport};
use crate::tie::Verdict;
use den::{eval_func, EvalOptions, Tensor};
use ir::rng::{Rng, CERT_SALT};
use ir::Module;
use layers::net::NetSpec;
use layers::trainstep::{
    step_chain, step_signature_with, Optimizer, Recipe, SlotKind, StepOptions, ADAM_BETA1,
    ADAM_BETA2, ADAM_EPS, CLIP_DELTA, HEAVY_BALL_MU, LAMB_EPS, NESTEROV_MU, RMSPROP_EPS,
    RMSPROP_MU, RMSPROP_RHO,
};
use layers::Init;

/// The EMA decay the tie's points carry (exact in f32, far from 0 and 1 so
/// both terms show).
const TIE_EMA_DECAY: f64 = 0.75;

/// The state of one parameter tensor the replay reads and writes.
#[derive(Clone)]
struct TensorState {
    theta: Vec<f64>,
    m: Vec<f64>,
    v: Vec<f64>,
    shadow: Vec<f64>,
    accum: Vec<f64>,
}

pub(super) fn run(
    net: &NetSpec,
    batch: i64,
    so: &StepOptions,
    step: &Module,
    opts: &StepTieOptions,
    report: &mut StepTieReport,
) -> Result<Verdict, String> {
    if so.replicas != 1 {
        return Err("the recipe tie certifies the one-replica step (cert::dp ties R > 1)".into());
    }
    let phases: &[(f64, f64)] = if so.recipe.accumulate.is_some() {
        &[(0.0, 0.0), (1.0, 1.0)]
    } else {
        &[(1.0, 1.0)]
    };
    let mut rng = Rng::salted(opts.seed, CERT_SALT);
    for &(akeep, aup) in phases {
        let v = phase(net, batch, so, step, opts, report, &mut rng, akeep, aup)?;
        if v != Verdict::Certified {
            return Ok(v);
        }
    }
    Ok(Verdict::Certified)
}

#[allow(clippy::too_many_arguments)]
fn phase(
    net: &NetSpec,
    batch: i64,
    so: &StepOptions,
    step: &Module,
    opts: &StepTieOptions,
    report: &mut StepTieReport,
    rng: &mut Rng,
    akeep: f64,
    aup: f64,
) -> Result<Verdict, String> {
    let (opt, recipe) = (so.optimizer, &so.recipe);
    let sig = step_signature_with(net, batch, so).map_err(|e| e.to_string())?;
    report.func = sig.func.clone();
    let f = step
        .func(&sig.func)
        .ok_or_else(|| format!("the module has no @{}", sig.func))?;
    let want: Vec<_> = sig.inputs.iter().map(|s| s.ty.clone()).collect();
    if f.param_types() != want {
        return Err(format!(
            "@{} does not have the packed signature of {} under this recipe",
            sig.func, net.name
        ));
    }

    // The point: the plain step's draws, then the recipe's own slots.
    let mut point = sample(&sig, net, rng, opts);
    let inits: Vec<Init> = net
        .param_specs()
        .map_err(|e| e.to_string())?
        .into_iter()
        .map(|p| p.init)
        .collect();
    let ti = sig.input_positions(SlotKind::Param);
    for (k, s) in sig.inputs.iter().enumerate() {
        let n = point[k].len();
        let value = match s.kind {
            SlotKind::Shadow => None,
            SlotKind::Accum => Some((0..n).map(|_| 0.01 * rng.normal()).collect()),
            SlotKind::EmaDecay => Some(vec![TIE_EMA_DECAY]),
            SlotKind::EmaOneMinus => Some(vec![f32c(1.0 - TIE_EMA_DECAY)]),
            SlotKind::AccKeep => Some(vec![akeep]),
            SlotKind::AccApply => Some(vec![aup]),
            SlotKind::M if opts.fresh => Some(vec![0.0; n]),
            SlotKind::V if opts.fresh => {
                let init = if opt == Optimizer::RmsProp { 1.0 } else { 0.0 };
                Some(vec![init; n])
            }
            SlotKind::V if opt == Optimizer::RmsProp => {
                Some((0..n).map(|_| 0.5 + 0.1 * rng.normal().abs()).collect())
            }
            _ => None,
        };
        if let Some(v) = value {
            point[k].data = v;
        }
    }
    if opts.fresh {
        for (b, &i) in ti.iter().enumerate() {
            if inits.get(b) == Some(&Init::Zeros) {
                point[i].data.iter_mut().for_each(|x| *x = 0.0);
            }
        }
    }
    // The shadow lags θ a little.
    let si = sig.input_positions(SlotKind::Shadow);
    for (b, &i) in si.iter().enumerate() {
        let th = point[ti[b]].data.clone();
        point[i].data = th.iter().map(|x| x + 0.01 * rng.normal()).collect();
    }

    // f64 on the fast kernels (f64 never rounds; only sum orders differ).
    let eval_opts = EvalOptions::default();
    let outs: Vec<Tensor<f64>> =
        eval_func::<f64>(step, &sig.func, super::as_values(&point), &eval_opts)
            .map_err(|e| format!("evaluating the step: {e}"))?
            .outputs
            .into_iter()
            .map(|v| v.into_float().ok_or("non-float step output"))
            .collect::<Result<_, _>>()?;

    let scalar = |k| point[sig.input_positions(k)[0]].data[0];
    let (lr, bc1, bc2) = (
        scalar(SlotKind::Lr),
        scalar(SlotKind::Bc1),
        scalar(SlotKind::Bc2),
    );
    let names: Vec<String> = ti.iter().map(|&i| sig.inputs[i].name.clone()).collect();
    let tys: Vec<ir::TensorType> = ti.iter().map(|&i| sig.inputs[i].ty.clone()).collect();
    let region = |kind, outputs: bool| -> Vec<Vec<f64>> {
        let pos = if outputs {
            sig.output_positions(kind)
        } else {
            sig.input_positions(kind)
        };
        let src = if outputs { &outs } else { &point };
        pos.iter().map(|&i| src[i].data.clone()).collect()
    };
    let n = names.len();
    let empty = || vec![Vec::new(); n];
    let or_empty = |v: Vec<Vec<f64>>| if v.is_empty() { empty() } else { v };
    let state: Vec<TensorState> = {
        let (th, m, v) = (
            region(SlotKind::Param, false),
            region(SlotKind::M, false),
            region(SlotKind::V, false),
        );
        let (sh, acc) = (
            or_empty(region(SlotKind::Shadow, false)),
            or_empty(region(SlotKind::Accum, false)),
        );
        (0..n)
            .map(|b| TensorState {
                theta: th[b].clone(),
                m: m[b].clone(),
                v: v[b].clone(),
                shadow: sh[b].clone(),
                accum: acc[b].clone(),
            })
            .collect()
    };
    let out_state: Vec<TensorState> = {
        let (th, m, v) = (
            region(SlotKind::Param, true),
            region(SlotKind::M, true),
            region(SlotKind::V, true),
        );
        let (sh, acc) = (
            or_empty(region(SlotKind::Shadow, true)),
            or_empty(region(SlotKind::Accum, true)),
        );
        (0..n)
            .map(|b| TensorState {
                theta: th[b].clone(),
                m: m[b].clone(),
                v: v[b].clone(),
                shadow: sh[b].clone(),
                accum: acc[b].clone(),
            })
            .collect()
    };
    // The decay each tensor should get: the recipe's, never a fault's.
    let clean = Recipe {
        fault: None,
        ..*recipe
    };
    let wds: Vec<Option<f64>> = (0..n)
        .map(|b| clean.decay_for(opt, &names[b], &tys[b]))
        .collect();

    // 1. g recovered from the outputs.
    let grads: Vec<Vec<f64>> = (0..n)
        .map(|b| {
            let (s, o) = (&state[b], &out_state[b]);
            if recipe.accumulate.is_some() {
                o.accum
                    .iter()
                    .zip(&s.accum)
                    .map(|(gn, g)| gn - akeep * g)
                    .collect()
            } else {
                (0..s.theta.len())
                    .map(|i| recover(opt, wds[b], lr, s, o, i))
                    .collect()
            }
        })
        .collect();

    // 2. The oracle: the recipe's loss forward (without any fault).
    let chain = step_chain(net, &clean).map_err(|e| e.to_string())?;
    let oracle = LossOracle::new(&chain, net, batch, &point, &sig, n)?;
    // Joint probes (v on every block at once); a fitted clip factor needs a
    // second probe to be checked at all.
    let fitted = recipe.clip.is_some() && recipe.accumulate.is_none();
    let k = if fitted {
        opts.probes.max(2)
    } else {
        opts.probes
    };
    let shapes: Vec<Vec<usize>> = tys.iter().map(shape).collect();
    let probes = super::draw_probes(rng, &shapes, k);
    let none = vec![None; n];
    let first = probes.first().map_or(none, |v| super::tangents(v));
    let (loss, first_dl, margins) = oracle.jvp(&first, true)?;
    if let Some(m) = margins.iter().find(|m| m.ties > 0) {
        return Err(format!(
            "the point sits on a kink ({} #{}, margin 0)",
            m.op, m.op_index
        ));
    }
    report.min_margin = margins.iter().map(|m| m.min).reduce(f64::min);
    let step_loss = outs[sig.output_positions(SlotKind::Loss)[0]].data[0];
    report.loss_gap = (step_loss - loss).abs() / loss.abs().max(f64::MIN_POSITIVE);
    if !within(report.loss_gap, opts.gradient_tolerance) {
        return Ok(Verdict::Refuted {
            block: "loss".into(),
            detail: format!(
                "the step reports loss {step_loss:.12e}, the standalone forward {loss:.12e}"
            ),
        });
    }

    // 3. Tie every gradient block to the oracle at once; under clip without
    // accumulation, up to the one fitted factor f.
    let (verdict, factor) = super::joint_gradient_tie(
        &oracle,
        &grads,
        &names,
        &probes,
        first_dl,
        fitted,
        opts.gradient_tolerance,
        report,
    )?;
    if verdict != Verdict::Certified {
        return Ok(verdict);
    }
    if let (true, Some(c)) = (fitted, recipe.clip) {
        // ĝ = f·g: the formula's factor at ‖g‖ = ‖ĝ‖/f.
        let norm_hat = grads.iter().flatten().map(|x| x * x).sum::<f64>().sqrt();
        let want = clip_factor(c, norm_hat / factor);
        let gap = (want - factor).abs() / want;
        if !within(gap, opts.gradient_tolerance) {
            return Ok(Verdict::Refuted {
                block: "clip factor".into(),
                detail: format!(
                    "the gradients the tail consumed are {factor:.12e}·∂L, min(1, {c}/(‖g‖ + {CLIP_DELTA:e})) is {want:.12e} (relative gap {gap:.2e})"
                ),
            });
        }
    }

    // 4. Replay the recipe in f64 and compare every output.
    let raw: Vec<Vec<f64>> = if fitted {
        grads
            .iter()
            .map(|g| g.iter().map(|x| x / factor).collect())
            .collect()
    } else {
        grads.clone()
    };
    let replayed = replay(
        so,
        lr,
        bc1,
        bc2,
        akeep,
        aup,
        &state,
        &raw,
        &wds,
        fitted.then_some(&grads),
    );
    let max = |t: &[f64]| t.iter().fold(0.0f64, |a, x| a.max(x.abs()));
    for b in 0..n {
        let (s, o, r) = (&state[b], &out_state[b], &replayed[b]);
        let gmax = lr * max(&raw[b]);
        for (which, before, out, want) in [
            ("θ'", &s.theta, &o.theta, &r.theta),
            ("m'", &s.m, &o.m, &r.m),
            ("v'", &s.v, &o.v, &r.v),
            ("shadow'", &s.shadow, &o.shadow, &r.shadow),
            ("G'", &s.accum, &o.accum, &r.accum),
        ] {
            let scale = max(before) + max(out) + gmax + f64::MIN_POSITIVE;
            for (i, (&w, &got)) in want.iter().zip(out.iter()).enumerate() {
                let gap = (w - got).abs() / scale;
                report.tail_gap =
                    report
                        .tail_gap
                        .max(if gap.is_nan() { f64::INFINITY } else { gap });
                if !within(gap, opts.tail_tolerance) {
                    return Ok(Verdict::Refuted {
                        block: format!("{which} of {}", names[b]),
                        detail: format!(
                            "the {} recipe replayed from (θ, m, v, shadow, G, g) gives {w:.9e} at {} (akeep {akeep}, aup {aup}), the step outputs {got:.9e} (scaled gap {gap:.2e} > {:.0e})",
                            sig.func,
                            crate::tie::multi_index(i, &shape(&tys[b])),
                            opts.tail_tolerance
                        ),
                    });
                }
            }
        }
    }
    Ok(Verdict::Certified)
}

/// `min(1, c/(n + 1e-6))`.
fn clip_factor(c: f64, norm: f64) -> f64 {
    let q = f32c(c) / (norm + f32c(CLIP_DELTA));
    q.min(1.0)
}

/// The gradient the tail consumed, from its outputs at element `i`.
fn recover(
    opt: Optimizer,
    wd: Option<f64>,
    lr: f64,
    s: &TensorState,
    o: &TensorState,
    i: usize,
) -> f64 {
    let l2 = wd.map_or(0.0, |w| f32c(w) * s.theta[i]);
    match opt {
        Optimizer::Sgd => (s.theta[i] - o.theta[i]) / lr,
        Optimizer::Nesterov => o.v[i] - f32c(NESTEROV_MU) * s.v[i],
        Optimizer::AdamW | Optimizer::Lamb => {
            (o.m[i] - f32c(ADAM_BETA1) * s.m[i]) / f32c(1.0 - ADAM_BETA1)
        }
        Optimizer::HeavyBall => o.v[i] - f32c(HEAVY_BALL_MU) * s.v[i] - l2,
        Optimizer::RmsProp => {
            (o.m[i] - f32c(RMSPROP_MU) * s.m[i]) * (o.v[i] + f32c(RMSPROP_EPS)).sqrt() - l2
        }
    }
}

/// The recipe replayed in f64, in the render's operation order with its f32
/// constants, from the state and the raw gradients; `consumed` (clip without
/// accumulation) are the gradients the tail took, already clipped.
#[allow(clippy::too_many_arguments)]
fn replay(
    so: &StepOptions,
    lr: f64,
    bc1: f64,
    bc2: f64,
    akeep: f64,
    aup: f64,
    state: &[TensorState],
    raw: &[Vec<f64>],
    wds: &[Option<f64>],
    consumed: Option<&Vec<Vec<f64>>>,
) -> Vec<TensorState> {
    let recipe = &so.recipe;
    let n = state.len();
    // Accumulation, then the mean over k.
    let mut accum = vec![Vec::new(); n];
    let mut g: Vec<Vec<f64>> = raw.to_vec();
    if let Some(k) = recipe.accumulate {
        for b in 0..n {
            accum[b] = state[b]
                .accum
                .iter()
                .zip(&raw[b])
                .map(|(a, x)| akeep * a + x)
                .collect();
            g[b] = accum[b].iter().map(|x| x / k as f64).collect();
        }
    }
    match (consumed, recipe.clip) {
        (Some(c), _) => g = c.clone(),
        (None, Some(c)) => {
            let total: f64 = g.iter().map(|t| t.iter().map(|x| x * x).sum::<f64>()).sum();
            let f = clip_factor(c, total.sqrt());
            for t in &mut g {
                t.iter_mut().for_each(|x| *x *= f);
            }
        }
        (None, None) => {}
    }
    (0..n)
        .map(|b| {
            let s = &state[b];
            let (mut th, mut m, mut v) = tail(so.optimizer, wds[b], lr, bc1, bc2, s, &g[b]);
            let blend = |new: &mut Vec<f64>, old: &[f64]| {
                if recipe.accumulate.is_some() {
                    for (x, &o) in new.iter_mut().zip(old) {
                        *x = aup * *x + (1.0 - aup) * o;
                    }
                }
            };
            blend(&mut th, &s.theta);
            blend(&mut m, &s.m);
            blend(&mut v, &s.v);
            let mut shadow = Vec::new();
            if recipe.ema.is_some() {
                let (d, od) = (TIE_EMA_DECAY, f32c(1.0 - TIE_EMA_DECAY));
                shadow = s
                    .shadow
                    .iter()
                    .zip(&th)
                    .map(|(sh, t)| d * sh + od * t)
                    .collect();
                blend(&mut shadow, &s.shadow);
            }
            TensorState {
                theta: th,
                m,
                v,
                shadow,
                accum: accum[b].clone(),
            }
        })
        .collect()
}

/// One tensor's base tail in f64: `(θ', m', v')`.
fn tail(
    opt: Optimizer,
    wd: Option<f64>,
    lr: f64,
    bc1: f64,
    bc2: f64,
    s: &TensorState,
    g: &[f64],
) -> (Vec<f64>, Vec<f64>, Vec<f64>) {
    let len = g.len();
    let wdc = wd.map(f32c);
    let l2 = |i: usize| wdc.map_or(g[i], |w| w * s.theta[i] + g[i]);
    let mut th = vec![0.0; len];
    let mut m = s.m.clone();
    let mut v = s.v.clone();
    match opt {
        Optimizer::Sgd => {
            for i in 0..len {
                th[i] = s.theta[i] - lr * g[i];
            }
        }
        Optimizer::Nesterov => {
            let mu = f32c(NESTEROV_MU);
            for i in 0..len {
                v[i] = mu * s.v[i] + g[i];
                th[i] = s.theta[i] - lr * (g[i] + mu * v[i]);
            }
        }
        Optimizer::HeavyBall => {
            for i in 0..len {
                v[i] = f32c(HEAVY_BALL_MU) * s.v[i] + l2(i);
                th[i] = s.theta[i] - lr * v[i];
            }
        }
        Optimizer::AdamW | Optimizer::Lamb => {
            let (b1, ob1) = (f32c(ADAM_BETA1), f32c(1.0 - ADAM_BETA1));
            let (b2, ob2) = (f32c(ADAM_BETA2), f32c(1.0 - ADAM_BETA2));
            let eps = f32c(if opt == Optimizer::Lamb {
                LAMB_EPS
            } else {
                ADAM_EPS
            });
            let mut r = vec![0.0; len];
            for i in 0..len {
                m[i] = b1 * s.m[i] + ob1 * g[i];
                v[i] = b2 * s.v[i] + ob2 * (g[i] * g[i]);
                r[i] = (m[i] / bc1) / ((v[i] / bc2).sqrt() + eps);
            }
            if opt == Optimizer::AdamW {
                for i in 0..len {
                    let moved = s.theta[i] - lr * r[i];
                    th[i] = match wdc {
                        Some(w) => moved - lr * (w * s.theta[i]),
                        None => moved,
                    };
                }
            } else {
                if let Some(w) = wdc {
                    for (ri, th) in r.iter_mut().zip(&s.theta) {
                        *ri += w * th;
                    }
                }
                let norm = |x: &[f64]| x.iter().map(|a| a * a).sum::<f64>().sqrt();
                let (nt, nr) = (norm(&s.theta), norm(&r));
                let trust = if nt > 0.0 && nr > 0.0 { nt / nr } else { 1.0 };
                for i in 0..len {
                    th[i] = s.theta[i] - lr * trust * r[i];
                }
            }
        }
        Optimizer::RmsProp => {
            let (rho, orho) = (f32c(RMSPROP_RHO), f32c(1.0 - RMSPROP_RHO));
            let (mu, eps) = (f32c(RMSPROP_MU), f32c(RMSPROP_EPS));
            for i in 0..len {
                let gi = l2(i);
                v[i] = rho * s.v[i] + orho * (gi * gi);
                m[i] = mu * s.m[i] + gi / (v[i] + eps).sqrt();
                th[i] = s.theta[i] - lr * m[i];
            }
        }
    }
    (th, m, v)
}
