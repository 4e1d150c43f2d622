//! The optimizer tails of a train step (REFERENCE §6.3): the update formulas
//! of SGD, Nesterov, AdamW and heavy-ball momentum, one parameter at a time,
//! after the gradient, and their hyperparameters.

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

/// The optimizer tail after the gradient (REFERENCE §6.3).
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
}

impl Optimizer {
    pub const ALL: [Optimizer; 4] = [
        Optimizer::Sgd,
        Optimizer::Nesterov,
        Optimizer::AdamW,
        Optimizer::HeavyBall,
    ];

    /// The CLI name: `sgd`, `nesterov`, `adamw`, `momentum` (heavy-ball).
    pub fn name(self) -> &'static str {
        match self {
            Optimizer::Sgd => "sgd",
            Optimizer::Nesterov => "nesterov",
            Optimizer::AdamW => "adamw",
            Optimizer::HeavyBall => "momentum",
        }
    }

    /// Every CLI name, for messages: `sgd, nesterov, adamw, momentum`.
    pub fn names() -> String {
        Self::ALL.map(|o| o.name()).join(", ")
    }

    pub fn parse(s: &str) -> Option<Optimizer> {
        Self::ALL.into_iter().find(|o| o.name() == s)
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
        }
    }
}

/// The optimizer tail for one parameter: `(θ', m', v')`. The formulas follow
/// REFERENCE §6.3 literally, operation by operation, so a host replaying them
/// in the same order gets the same bits.
#[allow(clippy::too_many_arguments)]
pub(super) fn tail(
    fb: &mut FuncBuilder,
    opt: Optimizer,
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
            let eps = fb.splat_like(ADAM_EPS, theta);
            let den = fb.add(root, eps)?;
            let upd = fb.div(m_hat, den)?;
            let step = fb.mul(lr_b, upd)?;
            let moved = fb.sub(theta, step)?;
            // Decoupled decay reads the OLD θ (fact 13).
            let wd = fb.splat_like(ADAMW_WEIGHT_DECAY, theta);
            let wd_theta = fb.mul(wd, theta)?;
            let decay = fb.mul(lr_b, wd_theta)?;
            (fb.sub(moved, decay)?, m_new, v_new)
        }
        Optimizer::HeavyBall => {
            // Coupled L2 in the velocity's own form μ·v + g (μ := wd, v := θ).
            let wd = fb.splat_like(HEAVY_BALL_WEIGHT_DECAY, theta);
            let wd_theta = fb.mul(wd, theta)?;
            let g_l2 = fb.add(wd_theta, g)?;
            let mu = fb.splat_like(HEAVY_BALL_MU, theta);
            let mv = fb.mul(mu, v)?;
            let v_new = fb.add(mv, g_l2)?;
            let step = fb.mul(lr_b, v_new)?;
            (fb.sub(theta, step)?, m, v_new)
        }
    })
}
