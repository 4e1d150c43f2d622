//! The optimizer tails of a train step (docs/training.md §2): the update formulas
//! of SGD, Nesterov, AdamW, heavy-ball momentum, TF-RMSProp and LAMB, one
//! parameter at a time, after the gradient, and their hyperparameters.

use super::recipe::Fault;
use crate::emit::Emit;
use crate::layer::LayerError;
use ir::{FuncBuilder, ValueId};

/// Nesterov momentum μ (cifar8 "mom"): velocity in the v slot.
pub const NESTEROV_MU: f64 = 0.9;
/// AdamW β1.
pub const ADAM_BETA1: f64 = 0.9;
/// AdamW β2.
pub const ADAM_BETA2: f64 = 0.999;
/// AdamW ε (outside the square root).
pub const ADAM_EPS: f64 = 1e-8;
/// AdamW decoupled weight decay, applied to the OLD θ.
pub const ADAMW_WEIGHT_DECAY: f64 = 1e-4;
/// Heavy-ball momentum μ (the R34/R50 ImageNet "mom"): velocity in the v slot.
pub const HEAVY_BALL_MU: f64 = 0.9;
/// Heavy-ball coupled L2 weight decay, added to the gradient before the velocity.
pub const HEAVY_BALL_WEIGHT_DECAY: f64 = 1e-4;
/// TF-RMSProp mean-square decay ρ (MobileNetV2-ImageNet recipe).
pub const RMSPROP_RHO: f64 = 0.9;
/// TF-RMSProp momentum μ.
pub const RMSPROP_MU: f64 = 0.9;
/// TF-RMSProp ε, INSIDE the square root: `g/√(s' + ε)`.
pub const RMSPROP_EPS: f64 = 1.0;
/// TF-RMSProp coupled L2 (MobileNetV2: 4e-5).
pub const RMSPROP_WEIGHT_DECAY: f64 = 4e-5;
/// LAMB ε, OUTSIDE the square root (β1, β2 are AdamW's).
pub const LAMB_EPS: f64 = 1e-6;
/// LAMB weight decay inside r. Not a reference-project value: timm's RSB-A3 one.
pub const LAMB_WEIGHT_DECAY: f64 = 0.02;

/// The optimizer tail after the gradient (docs/training.md §2).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Optimizer {
    /// `θ' = θ − lr·g`; m, v passed through.
    Sgd,
    /// `v' = μ·v + g`, `θ' = θ − lr·(g + μ·v')`; m passed through.
    Nesterov,
    /// `m' = β1·m + (1−β1)·g`, `v' = β2·v + (1−β2)·g²`,
    /// `θ' = θ − lr·(m'/bc1)/(√(v'/bc2) + ε) − lr·wd·θ`.
    AdamW,
    /// Heavy-ball with coupled L2 (the ImageNet recipe, wd 1e-4, μ 0.9):
    /// `g ← wd·θ + g`, `v' = μ·v + g`, `θ' = θ − lr·v'`; m passed through.
    HeavyBall,
    /// TF-RMSProp (optional coupled L2 `g ← g + wd·θ`):
    /// `s' = ρ·s + (1−ρ)·g²` (v slot), `b' = μ·b + g/√(s' + ε)` (m slot),
    /// `θ' = θ − lr·b'`; no bias correction.
    RmsProp,
    /// LAMB: AdamW's moments, `r = (m'/bc1)/(√(v'/bc2) + ε) + wd·θ`, per-tensor
    /// trust `‖θ‖/‖r‖` (1 if either norm is 0), `θ' = θ − lr·trust·r`.
    Lamb,
}

impl Optimizer {
    /// The four tails of the original vocabulary (every built-in render of
    /// these is pinned byte for byte).
    pub const ALL: [Optimizer; 4] = [
        Optimizer::Sgd,
        Optimizer::Nesterov,
        Optimizer::AdamW,
        Optimizer::HeavyBall,
    ];
    /// Every tail, the recipe tails (RMSProp, LAMB) last.
    pub const EVERY: [Optimizer; 6] = [
        Optimizer::Sgd,
        Optimizer::Nesterov,
        Optimizer::AdamW,
        Optimizer::HeavyBall,
        Optimizer::RmsProp,
        Optimizer::Lamb,
    ];

    /// The CLI name: `sgd`, `nesterov`, `adamw`, `momentum` (heavy-ball),
    /// `rmsprop`, `lamb`.
    pub fn name(self) -> &'static str {
        match self {
            Optimizer::Sgd => "sgd",
            Optimizer::Nesterov => "nesterov",
            Optimizer::AdamW => "adamw",
            Optimizer::HeavyBall => "momentum",
            Optimizer::RmsProp => "rmsprop",
            Optimizer::Lamb => "lamb",
        }
    }

    /// Every CLI name, for messages: `sgd, nesterov, adamw, momentum,
    /// rmsprop, lamb`.
    pub fn names() -> String {
        Self::EVERY.map(|o| o.name()).join(", ")
    }

    pub fn parse(s: &str) -> Option<Optimizer> {
        Self::EVERY.into_iter().find(|o| o.name() == s)
    }

    /// The variant marker in the function name (`sgd`, `mom`, `adam`,
    /// `hbmom`). The reference marks both momentum tails `mom`; here
    /// heavy-ball gets its own marker so a Nesterov render can never be taken
    /// for a heavy-ball one (same signature, different function).
    pub fn variant(self) -> &'static str {
        match self {
            Optimizer::Sgd => "sgd",
            Optimizer::Nesterov => "mom",
            Optimizer::AdamW => "adam",
            Optimizer::HeavyBall => "hbmom",
            Optimizer::RmsProp => "rms",
            Optimizer::Lamb => "lamb",
        }
    }
}

/// The optimizer tail for one parameter: `(θ', m', v')`, with weight decay
/// `wd` on this tensor (None: no decay ops; the decaying tails pass their
/// default unless the recipe changes or excludes it). The formulas follow
/// docs/training.md §2 literally, operation by operation, so a host replaying them
/// in the same order gets the same bits.
#[allow(clippy::too_many_arguments)]
pub(super) fn tail(
    fb: &mut FuncBuilder,
    opt: Optimizer,
    wd: Option<f64>,
    fault: Option<Fault>,
    theta: ValueId,
    m: ValueId,
    v: ValueId,
    g: ValueId,
    lr: ValueId,
    bc1: ValueId,
    bc2: ValueId,
) -> Result<(ValueId, ValueId, ValueId), LayerError> {
    let shape = fb.shape(theta);
    let lr_b = fb.bcast(lr, &[], &shape)?;
    Ok(match opt {
        Optimizer::Sgd => {
            let step = fb.mul(lr_b, g)?;
            (fb.sub(theta, step)?, m, v)
        }
        Optimizer::Nesterov => {
            let mu = fb.splat_like(NESTEROV_MU, theta);
            let mv = fb.mul(mu, v)?;
            let v_new = fb.add(mv, g)?;
            let mu = fb.splat_like(NESTEROV_MU, theta);
            let look = fb.mul(mu, v_new)?;
            let dir = fb.add(g, look)?;
            let step = fb.mul(lr_b, dir)?;
            (fb.sub(theta, step)?, m, v_new)
        }
        Optimizer::AdamW => {
            let (m_new, v_new, upd) = adam_direction(fb, theta, (m, v, g), (bc1, bc2), ADAM_EPS)?;
            let step = fb.mul(lr_b, upd)?;
            let moved = fb.sub(theta, step)?;
            match wd {
                // Decoupled decay reads the OLD θ (fact 13).
                Some(wd) => {
                    let wd = fb.splat_like(wd, theta);
                    let wd_theta = fb.mul(wd, theta)?;
                    let decay = fb.mul(lr_b, wd_theta)?;
                    (fb.sub(moved, decay)?, m_new, v_new)
                }
                None => (moved, m_new, v_new),
            }
        }
        Optimizer::HeavyBall => {
            let g_l2 = coupled_l2(fb, wd, theta, g)?;
            let mu = fb.splat_like(HEAVY_BALL_MU, theta);
            let mv = fb.mul(mu, v)?;
            let v_new = fb.add(mv, g_l2)?;
            let step = fb.mul(lr_b, v_new)?;
            (fb.sub(theta, step)?, m, v_new)
        }
        Optimizer::RmsProp => {
            // Slots: m = b (momentum), v = s (mean square).
            let g = coupled_l2(fb, wd, theta, g)?;
            let rho = fb.splat_like(RMSPROP_RHO, theta);
            let orho = fb.splat_like(1.0 - RMSPROP_RHO, theta);
            let t1 = fb.mul(rho, v)?;
            let gg = fb.mul(g, g)?;
            let t2 = fb.mul(orho, gg)?;
            let s_new = fb.add(t1, t2)?;
            let eps = fb.splat_like(RMSPROP_EPS, theta);
            let den = if fault == Some(Fault::RmsEpsOutsideSqrt) {
                let root = fb.unary(ir::UnaryOp::Sqrt, s_new)?;
                fb.add(root, eps)?
            } else {
                // TF semantics: ε INSIDE the square root.
                let inside = fb.add(s_new, eps)?;
                fb.unary(ir::UnaryOp::Sqrt, inside)?
            };
            let scaled = fb.div(g, den)?;
            let mu = fb.splat_like(RMSPROP_MU, theta);
            let mb = fb.mul(mu, m)?;
            let b_new = fb.add(mb, scaled)?;
            let step = fb.mul(lr_b, b_new)?;
            (fb.sub(theta, step)?, b_new, s_new)
        }
        Optimizer::Lamb => {
            let (m_new, v_new, upd) = adam_direction(fb, theta, (m, v, g), (bc1, bc2), LAMB_EPS)?;
            // Decay inside r, on the old θ.
            let r = match wd {
                Some(wd) => {
                    let wd = fb.splat_like(wd, theta);
                    let wd_theta = fb.mul(wd, theta)?;
                    fb.add(upd, wd_theta)?
                }
                None => upd,
            };
            let n_theta = l2_norm(fb, theta)?;
            let n_r = l2_norm(fb, r)?;
            let ratio = fb.div(n_theta, n_r)?;
            let trust = if fault == Some(Fault::LambNoZeroNormRule) {
                ratio
            } else {
                // 1 when either norm is 0 (a zero-initialised bias or β at
                // step 1: ‖θ‖ = 0, and ‖r‖ = 0 where its gradient is 0 too).
                let zero = fb.splat_like(0.0, n_theta);
                let theta_pos = fb.cmp(ir::CompareDirection::Gt, n_theta, zero)?;
                let r_pos = fb.cmp(ir::CompareDirection::Gt, n_r, zero)?;
                let both = fb.and(theta_pos, r_pos)?;
                let one = fb.splat_like(1.0, n_theta);
                fb.select(both, ratio, one)?
            };
            let trust_b = fb.bcast(trust, &[], &shape)?;
            let lr_trust = fb.mul(lr_b, trust_b)?;
            let step = fb.mul(lr_trust, r)?;
            (fb.sub(theta, step)?, m_new, v_new)
        }
    })
}

/// The bias-corrected Adam moments and direction shared by AdamW and LAMB:
/// `m' = β₁m + (1−β₁)g`, `v' = β₂v + (1−β₂)g²`, `u = (m'/bc1) / (√(v'/bc2) + ε)`,
/// in that operation order (the host replay depends on it).
fn adam_direction(
    fb: &mut FuncBuilder,
    theta: ValueId,
    (m, v, g): (ValueId, ValueId, ValueId),
    (bc1, bc2): (ValueId, ValueId),
    eps: f64,
) -> Result<(ValueId, ValueId, ValueId), LayerError> {
    let shape = fb.shape(theta);
    let b1 = fb.splat_like(ADAM_BETA1, theta);
    let ob1 = fb.splat_like(1.0 - ADAM_BETA1, theta);
    let b2 = fb.splat_like(ADAM_BETA2, theta);
    let ob2 = fb.splat_like(1.0 - ADAM_BETA2, theta);
    let t1 = fb.mul(b1, m)?;
    let t2 = fb.mul(ob1, g)?;
    let m_new = fb.add(t1, t2)?;
    let gg = fb.mul(g, g)?;
    let t3 = fb.mul(b2, v)?;
    let t4 = fb.mul(ob2, gg)?;
    let v_new = fb.add(t3, t4)?;
    let bc1_b = fb.bcast(bc1, &[], &shape)?;
    let bc2_b = fb.bcast(bc2, &[], &shape)?;
    let m_hat = fb.div(m_new, bc1_b)?;
    let v_hat = fb.div(v_new, bc2_b)?;
    let root = fb.unary(ir::UnaryOp::Sqrt, v_hat)?;
    let eps = fb.splat_like(eps, theta);
    let den = fb.add(root, eps)?;
    let upd = fb.div(m_hat, den)?;
    Ok((m_new, v_new, upd))
}

/// Coupled L2 in the velocity's own form μ·v + g (μ := wd, v := θ):
/// `wd·θ + g`, or g without decay.
fn coupled_l2(
    fb: &mut FuncBuilder,
    wd: Option<f64>,
    theta: ValueId,
    g: ValueId,
) -> Result<ValueId, LayerError> {
    Ok(match wd {
        Some(wd) => {
            let wd = fb.splat_like(wd, theta);
            let wd_theta = fb.mul(wd, theta)?;
            fb.add(wd_theta, g)?
        }
        None => g,
    })
}

/// `√Σ x²` over every element, rank 0.
pub(super) fn l2_norm(fb: &mut FuncBuilder, x: ValueId) -> Result<ValueId, LayerError> {
    let rank = fb.shape(x).len() as i64;
    let xx = fb.mul(x, x)?;
    let dims: Vec<i64> = (0..rank).collect();
    let ss = fb.reduce_sum(xx, &dims)?;
    Ok(fb.unary(ir::UnaryOp::Sqrt, ss)?)
}
