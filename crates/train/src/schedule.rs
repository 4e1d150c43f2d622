//! The host schedule (docs/conventions.md §16): the learning rate of update t (linear
//! warmup, then cosine decay), the AdamW bias corrections and the running-BN
//! EMA momentum. t counts optimizer updates, 1-based.

use layers::trainstep::{ADAM_BETA1, ADAM_BETA2};

/// `base·t/warm` while `t ≤ warm`, then `base·½(1 + cos(π·(t−warm)/(T−warm)))`.
pub fn lr_at(base: f64, t: u64, warm: u64, total: u64) -> f64 {
    if t <= warm {
        return base * t as f64 / warm as f64;
    }
    let span = total.saturating_sub(warm).max(1);
    let frac = ((t - warm) as f64 / span as f64).min(1.0);
    base * 0.5 * (1.0 + (std::f64::consts::PI * frac).cos())
}

/// `(bc1, bc2) = (1 − β1^t, 1 − β2^t)`, computed as `1 − exp(t·ln β)`.
pub fn bias_corrections(t: u64) -> (f64, f64) {
    let t = t as f64;
    (
        1.0 - (t * ADAM_BETA1.ln()).exp(),
        1.0 - (t * ADAM_BETA2.ln()).exp(),
    )
}

/// Running-statistics EMA momentum of update t: 1.0 on the first (the running
/// value becomes the first batch's), 0.1 after.
pub fn bn_momentum(t: u64) -> f32 {
    if t <= 1 {
        1.0
    } else {
        0.1
    }
}

/// The default peak learning rate of each optimizer (docs/training.md §4 tuned
/// values: SGD 0.1, Nesterov 0.02, AdamW 1e-3; TF-RMSProp 0.045, the
/// MobileNetV2 peak; LAMB 8e-3, timm's RSB-A3 peak, which the reference project does not
/// give).
pub fn default_lr(opt: layers::trainstep::Optimizer) -> f64 {
    use layers::trainstep::Optimizer::*;
    match opt {
        Sgd => 0.1,
        Nesterov => 0.02,
        AdamW => 1e-3,
        // Heavy-ball takes Nesterov's steps at the same lr/(1−μ) scale.
        HeavyBall => 0.02,
        RmsProp => 0.045,
        Lamb => 8e-3,
    }
}
