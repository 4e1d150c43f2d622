//! The rendered train step and eval forward of a NetSpec (docs/conventions.md §15–§19): one
//! StableHLO function `x, θ…, m…, v…, lr, bc1, bc2, [running stats], onehot →
//! θ', m', v', loss, bc1, bc2, [batch stats]` whose forward is the NetSpec's
//! `chain_with_loss()` forward, whose gradient is that chain's backward map at
//! dy = 1, followed by the optimizer tail; and the eval forward `x, θ…,
//! running stats → logits` from the same NetSpec in the Eval BN world. No layer
//! logic lives here: the module only wires the CertLayers' emissions together,
//! plus two whole-function passes of `ir::passes` (dead-op pruning, bf16
//! operands for conv/dot). The data-parallel step (docs/conventions.md §18: R replicas, one
//! `all_reduce` sum per parameter gradient, then ÷R, before the optimizer
//! tail) is the same render with those two ops inserted.
//!
//! `signature`: the slots; `render`: the train step; `tails`: the optimizer
//! update formulas; `recipe`: the modifiers around a tail (clip, no-decay
//! groups, EMA, accumulation, BCE) and the render's header comment; `eval`: the eval, logits and loss forwards. The drift
//! guard over train and eval forwards is the certificate's
//! (`cert::net::check_eval_drift`).

mod eval;
mod recipe;
mod render;
mod signature;
mod tails;

pub use eval::{
    render_eval_forward, render_logits_forward, render_loss_forward, render_train_forward,
};
pub use recipe::{
    default_decay, param_group, tail_formula, Fault, Loss, ParamGroup, Recipe, RecipeFlags,
    WdExclude, CLIP_DELTA, CLIP_NORM, EMA_DECAY,
};
pub use render::step_chain;
pub use render::{forward_prefix, render_step, LayerSpan, Rendered, StepOptions};
pub use signature::{
    batch_bn_sites, eval_signature, slug, step_signature, step_signature_with, Slot, SlotKind,
    StepSignature,
};
pub use tails::{
    Optimizer, ADAMW_WEIGHT_DECAY, ADAM_BETA1, ADAM_BETA2, ADAM_EPS, HEAVY_BALL_MU,
    HEAVY_BALL_WEIGHT_DECAY, LAMB_EPS, LAMB_WEIGHT_DECAY, NESTEROV_MU, RMSPROP_EPS, RMSPROP_MU,
    RMSPROP_RHO, RMSPROP_WEIGHT_DECAY,
};
