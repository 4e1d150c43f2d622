//! The typed train-step recipe (docs/training.md §2–§4): the modifiers around a
//! base optimizer tail — one global gradient-norm clip, no-decay parameter
//! groups, an EMA shadow of the weights, gradient accumulation over
//! micro-batches, and the loss (softmax-CE or BCE) — with their
//! hyperparameters and the reference's defaults; the parameter groups; the
//! function-name marker (derived from the typed recipe, never read back from
//! it); and the header comment that prints every formula and constant a
//! render bakes. The CLI parses its flags into this once
//! (`Recipe::from_flags`).

use super::tails::{
    Optimizer, ADAMW_WEIGHT_DECAY, ADAM_BETA1, ADAM_BETA2, ADAM_EPS, HEAVY_BALL_MU,
    HEAVY_BALL_WEIGHT_DECAY, LAMB_EPS, LAMB_WEIGHT_DECAY, NESTEROV_MU, RMSPROP_EPS, RMSPROP_MU,
    RMSPROP_RHO, RMSPROP_WEIGHT_DECAY,
};
use crate::layer::LayerError;
use ir::TensorType;

/// The clip threshold c of the ViT recipe (docs/training.md §4: clip 1.0).
pub const CLIP_NORM: f64 = 1.0;
/// The δ in the clip factor `min(1, c/(√Σg² + δ))` (docs/training.md §3).
pub const CLIP_DELTA: f64 = 1e-6;
/// The EMA decay ceiling (docs/conventions.md §16: 0.9999; the host warms it up as
/// `d = min(decay, (1+t')/(10+t'))`).
pub const EMA_DECAY: f64 = 0.9999;

/// The loss at the end of the forward.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum Loss {
    /// Softmax cross-entropy, mean over B, with the net's label smoothing.
    #[default]
    SoftmaxCe,
    /// Binary cross-entropy, a sigmoid per class, mean over B·K
    /// (docs/conventions.md §11: the RSB-A3 divisor 64000 = 64·1000).
    Bce,
}

impl Loss {
    pub fn name(self) -> &'static str {
        match self {
            Loss::SoftmaxCe => "ce",
            Loss::Bce => "bce",
        }
    }
}

/// Which parameter group a tensor belongs to, for `wd-exclude`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ParamGroup {
    /// Rank ≥ 2 tensors: conv kernels, dense and attention matrices, the
    /// position embedding.
    Weight,
    /// The γ and β of batch and layer norms (local names `gamma`, `beta`).
    Norm,
    /// Every other rank-1 tensor: biases (`b`, `b1`, `bq`, …), the class
    /// token.
    Bias,
}

/// The group of the parameter `name` (its full path) of type `ty`: the local
/// name is the last path segment, compared whole.
pub fn param_group(name: &str, ty: &TensorType) -> ParamGroup {
    let local = name.rsplit('.').next().unwrap_or(name);
    if local == "gamma" || local == "beta" {
        ParamGroup::Norm
    } else if ty.shape.len() <= 1 {
        ParamGroup::Bias
    } else {
        ParamGroup::Weight
    }
}

/// The groups weight decay skips (`--wd-exclude norm,bias`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct WdExclude {
    pub norm: bool,
    pub bias: bool,
}

impl WdExclude {
    pub fn excludes(self, g: ParamGroup) -> bool {
        match g {
            ParamGroup::Weight => false,
            ParamGroup::Norm => self.norm,
            ParamGroup::Bias => self.bias,
        }
    }
    fn any(self) -> bool {
        self.norm || self.bias
    }
}

/// A deliberate, shape-preserving bug in a tail or loss, for the train-step
/// tie's negative controls only: the function keeps its name and signature.
/// Not reachable from the CLI.
#[doc(hidden)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Fault {
    /// RMSProp with `√s' + ε` instead of `√(s' + ε)`.
    RmsEpsOutsideSqrt,
    /// LAMB's trust ratio `‖θ‖/‖r‖` without the 1-if-either-norm-is-0 rule.
    LambNoZeroNormRule,
    /// One clip factor per tensor instead of one global factor.
    ClipPerTensor,
    /// The EMA shadow follows the old θ instead of θ'.
    EmaOfOldTheta,
    /// Weight decay on the norms' β even where `wd_exclude` excludes norms.
    DecayOnNormBeta,
    /// The update applies on every micro-batch, ignoring the apply flag.
    AccumulateAlwaysApplies,
    /// BCE's backward averaged over B instead of B·K.
    BceMeanOverBatch,
}

/// Everything of a train step's recipe around its base tail
/// (`StepOptions::optimizer`). `Recipe::default()` is the plain step every
/// render had before recipes existed (and renders byte-identically).
#[derive(Clone, Copy, Debug, PartialEq, Default)]
pub struct Recipe {
    /// The base tail's weight decay instead of its default (AdamW 1e-4,
    /// heavy-ball 1e-4, RMSProp 4e-5, LAMB 0.02); 0 drops the decay ops.
    pub weight_decay: Option<f64>,
    /// Global-norm clip threshold c: `g ← g·min(1, c/(√Σ_all g² + 1e-6))`
    /// before the tail.
    pub clip: Option<f64>,
    pub wd_exclude: WdExclude,
    /// EMA shadow of θ' with this decay ceiling (host-side warmup; the graph
    /// reads `emad`, `oemad` = d, 1−d).
    pub ema: Option<f64>,
    /// Gradient accumulation over k ≥ 2 micro-batches: `G' = akeep·G + g`,
    /// and when `aup` = 1 the tail consumes `G'/k` (the mean over k·B
    /// examples); when `aup` = 0, θ, m, v (and the shadow) pass through.
    pub accumulate: Option<u32>,
    pub loss: Loss,
    /// Stochastic depth at this maximum drop rate (docs/conventions.md §13): every
    /// drop-path site of the net takes a per-example keep input `dp{i} [B]`
    /// (the net's linear ramp; the host draws the scales each step).
    pub drop_path: Option<f64>,
    #[doc(hidden)]
    pub fault: Option<Fault>,
}

/// The recipe flags as the CLI spells them.
#[derive(Clone, Debug, Default)]
pub struct RecipeFlags<'a> {
    pub weight_decay: Option<f64>,
    pub clip: Option<f64>,
    /// `norm`, `bias` or `norm,bias`.
    pub wd_exclude: Option<&'a str>,
    pub ema: Option<f64>,
    pub accumulate: Option<u32>,
    /// `ce` or `bce`.
    pub loss: Option<&'a str>,
    /// `--drop-path RATE`.
    pub drop_path: Option<f64>,
}

fn err(s: String) -> LayerError {
    LayerError(s)
}

impl Recipe {
    /// Parses the CLI flags into a recipe for the base tail `opt`, once;
    /// every error names its flag.
    pub fn from_flags(opt: Optimizer, f: &RecipeFlags) -> Result<Recipe, LayerError> {
        let mut wd_exclude = WdExclude::default();
        if let Some(list) = f.wd_exclude {
            for part in list.split(',') {
                match part.trim() {
                    "norm" => wd_exclude.norm = true,
                    "bias" => wd_exclude.bias = true,
                    other => {
                        return Err(err(format!(
                        "--wd-exclude: unknown group {other:?} (expected norm, bias or norm,bias)"
                    )))
                    }
                }
            }
        }
        let loss = match f.loss {
            None | Some("ce") => Loss::SoftmaxCe,
            Some("bce") => Loss::Bce,
            Some(other) => {
                return Err(err(format!(
                    "--loss: unknown loss {other:?} (expected ce or bce)"
                )))
            }
        };
        let r = Recipe {
            weight_decay: f.weight_decay,
            clip: f.clip,
            wd_exclude,
            ema: f.ema,
            accumulate: f.accumulate,
            loss,
            drop_path: f.drop_path,
            fault: None,
        };
        r.validate(opt)?;
        Ok(r)
    }

    /// The checks every recipe passes before it renders.
    pub fn validate(&self, opt: Optimizer) -> Result<(), LayerError> {
        let decays = default_decay(opt).is_some();
        if let Some(wd) = self.weight_decay {
            if !decays {
                return Err(err(format!(
                    "--weight-decay: the {} tail has no weight decay (adamw, momentum, rmsprop, lamb have)",
                    opt.name()
                )));
            }
            if !(wd.is_finite() && wd >= 0.0) {
                return Err(err(format!(
                    "--weight-decay: expected a finite value ≥ 0, got {wd}"
                )));
            }
        }
        if self.wd_exclude.any() && !decays {
            return Err(err(format!(
                "--wd-exclude: the {} tail has no weight decay to exclude",
                opt.name()
            )));
        }
        if let Some(c) = self.clip {
            if !(c.is_finite() && c > 0.0) {
                return Err(err(format!("--clip: expected a norm > 0, got {c}")));
            }
        }
        if let Some(d) = self.ema {
            if !(d > 0.0 && d < 1.0) {
                return Err(err(format!("--ema: expected a decay in (0, 1), got {d}")));
            }
        }
        if let Some(rate) = self.drop_path {
            crate::droppath::validate_rate(rate)?;
        }
        if let Some(k) = self.accumulate {
            if k < 2 {
                return Err(err(format!(
                    "--accumulate: expected at least 2 micro-batches, got {k}"
                )));
            }
        }
        Ok(())
    }

    /// Whether this is the plain recipe (no modifier, softmax-CE).
    pub fn is_plain(&self) -> bool {
        *self == Recipe::default()
    }

    /// The decay the base tail applies to the parameter `name` of type `ty`
    /// (None: no decay ops for it).
    pub fn decay_for(&self, opt: Optimizer, name: &str, ty: &TensorType) -> Option<f64> {
        let wd = self.weight_decay.or(default_decay(opt))?;
        let beta = name.rsplit('.').next() == Some("beta");
        let excluded = self.wd_exclude.excludes(param_group(name, ty))
            && !(self.fault == Some(Fault::DecayOnNormBeta) && beta);
        (wd != 0.0 && !excluded).then_some(wd)
    }

    /// The variant marker after the net's slug: `[ema]BASE[clip][wx][acc{k}][dp{B}x{R}][bce]`
    /// (`lamb`+`acc` = `lambacc4`, the reference's `lambaccdp8x64bce` order).
    pub fn variant(&self, opt: Optimizer, batch: i64, replicas: usize) -> String {
        let mut s = String::new();
        if self.ema.is_some() {
            s.push_str("ema");
        }
        s.push_str(opt.variant());
        if self.clip.is_some() {
            s.push_str("clip");
        }
        if self.wd_exclude.any() {
            s.push_str("wx");
            if !(self.wd_exclude.norm && self.wd_exclude.bias) {
                s.push_str(if self.wd_exclude.norm { "n" } else { "b" });
            }
        }
        if let Some(k) = self.accumulate {
            s.push_str(&format!("acc{k}"));
        }
        if self.drop_path.is_some() {
            s.push_str("sd");
        }
        if replicas > 1 {
            s.push_str(&format!("dp{batch}x{replicas}"));
        }
        if self.loss == Loss::Bce {
            s.push_str("bce");
        }
        s
    }

    /// The header comment of a render (`//` lines): the tail's formula and
    /// every constant baked into the graph, the modifiers and the host's part.
    pub fn header(&self, opt: Optimizer) -> Vec<String> {
        let mut h = vec![format!("certgrad train-step recipe: {}", opt.name())];
        h.push(format!("  tail: {}", tail_formula(opt)));
        let wd = self.weight_decay.or(default_decay(opt));
        h.push(format!(
            "  constants: {}",
            match opt {
                Optimizer::Sgd => "none".to_string(),
                Optimizer::Nesterov => format!("mu = {NESTEROV_MU}"),
                Optimizer::AdamW => format!(
                    "beta1 = {ADAM_BETA1}, beta2 = {ADAM_BETA2}, eps = {ADAM_EPS:e}, wd = {}",
                    wd.unwrap_or(ADAMW_WEIGHT_DECAY)
                ),
                Optimizer::HeavyBall => format!(
                    "mu = {HEAVY_BALL_MU}, wd = {}",
                    wd.unwrap_or(HEAVY_BALL_WEIGHT_DECAY)
                ),
                Optimizer::RmsProp => format!(
                    "rho = {RMSPROP_RHO}, mu = {RMSPROP_MU}, eps = {RMSPROP_EPS}, wd = {} (host: s starts at 1.0, b at 0)",
                    wd.unwrap_or(RMSPROP_WEIGHT_DECAY)
                ),
                Optimizer::Lamb => format!(
                    "beta1 = {ADAM_BETA1}, beta2 = {ADAM_BETA2}, eps = {LAMB_EPS:e}, wd = {}",
                    wd.unwrap_or(LAMB_WEIGHT_DECAY)
                ),
            }
        ));
        if let Some(c) = self.clip {
            h.push(format!(
                "  clip: g <- g * min(1, {c} / (sqrt(sum over all tensors of g^2) + {CLIP_DELTA:e})), one factor for every tensor, before the tail"
            ));
        }
        if self.wd_exclude.any() {
            let groups = match (self.wd_exclude.norm, self.wd_exclude.bias) {
                (true, true) => "norm gamma/beta and biases (every rank-1 tensor)",
                (true, false) => "norm gamma/beta",
                _ => "biases (rank-1 tensors other than norm gamma/beta)",
            };
            h.push(format!("  wd-exclude: no weight decay on {groups}"));
        }
        if let Some(k) = self.accumulate {
            h.push(format!(
                "  accumulate {k}: G' = akeep*G + g; when aup = 1 the tail consumes G'/{k}, else theta, m, v pass through (host: akeep = 0 on a cycle's first micro-batch, aup = 1 on its last)"
            ));
        }
        if let Some(d) = self.ema {
            h.push(format!(
                "  ema: shadow' = emad*shadow + oemad*theta' (host: emad = min({d}, (1+t)/(10+t)) with t the 0-based update, oemad = 1 - emad; the shadow starts at theta)"
            ));
        }
        if let Some(rate) = self.drop_path {
            h.push(format!(
                "  drop path {rate}: branch i of the net's drop-path blocks is scaled per example by the input dp{{i}} [B] (host: 1/keep_i with probability keep_i, else 0; keep_i = 1 - {rate}*i/(blocks-1))"
            ));
        }
        h.push(format!(
            "  loss: {}",
            match self.loss {
                Loss::SoftmaxCe => "softmax cross-entropy, mean over B",
                Loss::Bce => "binary cross-entropy, sigmoid per class, mean over B*K",
            }
        ));
        h
    }
}

/// The weight decay a base tail applies by default (None: it has none).
pub fn default_decay(opt: Optimizer) -> Option<f64> {
    match opt {
        Optimizer::Sgd | Optimizer::Nesterov => None,
        Optimizer::AdamW => Some(ADAMW_WEIGHT_DECAY),
        Optimizer::HeavyBall => Some(HEAVY_BALL_WEIGHT_DECAY),
        Optimizer::RmsProp => Some(RMSPROP_WEIGHT_DECAY),
        Optimizer::Lamb => Some(LAMB_WEIGHT_DECAY),
    }
}

/// The update formula of a base tail (docs/training.md §2), for help texts and
/// headers.
pub fn tail_formula(opt: Optimizer) -> &'static str {
    match opt {
        Optimizer::Sgd => "theta' = theta - lr*g",
        Optimizer::Nesterov => "v' = mu*v + g; theta' = theta - lr*(g + mu*v')",
        Optimizer::AdamW => {
            "m' = b1*m + (1-b1)*g; v' = b2*v + (1-b2)*g^2; theta' = theta - lr*(m'/bc1)/(sqrt(v'/bc2) + eps) - lr*wd*theta"
        }
        Optimizer::HeavyBall => "g <- g + wd*theta; v' = mu*v + g; theta' = theta - lr*v'",
        Optimizer::RmsProp => {
            "g <- g + wd*theta; s' = rho*s + (1-rho)*g^2 (v slot); b' = mu*b + g/sqrt(s' + eps) (m slot); theta' = theta - lr*b'"
        }
        Optimizer::Lamb => {
            "m', v' as AdamW; r = (m'/bc1)/(sqrt(v'/bc2) + eps) + wd*theta; trust = |theta|/|r| (1 if either is 0); theta' = theta - lr*trust*r"
        }
    }
}
