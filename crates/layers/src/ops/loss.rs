//! Softmax and the softmax cross-entropy loss (docs/conventions.md §11): the mean loss
//! over a batch of logits against a target distribution, with optional label
//! smoothing, and the row softmax; the binary cross-entropy loss (a sigmoid
//! per class, mean over B·K, the RSB-A3 loss); each with its closed-form
//! backward map; their catalog cases and the losses' negative controls.
//!
//! Softmax is `exp(z) / Σ exp(z)` with no max-subtraction, as the reference
//! renders it: a max-shift would add a decision op (a kink site) to a function
//! that is smooth everywhere; the certifier's inputs are small enough not to
//! overflow.

use crate::combinators::ReplacedBackward;
use crate::emit::{Emit, EmitResult};
use crate::layer::{CertLayer, Grads, Init, LayerError, ParamSpec, Saved, Sites};
use ir::{BinaryOp, FuncBuilder, TensorType, UnaryOp, ValueId};

/// `(p, log p)` of a softmax over the last dim of `z`.
fn softmax_and_log(fb: &mut FuncBuilder, z: ValueId) -> EmitResult<(ValueId, ValueId)> {
    let shape = fb.shape(z);
    let last = shape.len() as i64 - 1;
    let kept: Vec<i64> = (0..last).collect();
    let e = fb.unary(UnaryOp::Exponential, z)?;
    let s = fb.reduce_sum(e, &[last])?;
    let s = fb.bcast(s, &kept, &shape)?;
    let p = fb.div(e, s)?;
    let log_s = fb.unary(UnaryOp::Log, s)?;
    let log_p = fb.sub(z, log_s)?;
    Ok((p, log_p))
}

/// A loss's output type: logits `input` must be `[B,K]` with K = `classes`
/// (`name` says which loss refused); the loss is a rank-0 scalar.
fn loss_output_type(
    name: &str,
    classes: i64,
    input: &TensorType,
) -> Result<TensorType, LayerError> {
    let s = &input.shape;
    if s.len() != 2 || s[1] != classes {
        return Err(LayerError(format!(
            "{name}: expects logits [B,{classes}], got {input}"
        )));
    }
    Ok(TensorType::new(vec![], input.elem))
}

/// A loss's one parameter, `target`, shaped as the logits. The loss is
/// affine in the target, so any values certify; a small normal keeps the
/// draws distribution-sized.
fn target_param(input: &TensorType) -> ParamSpec {
    ParamSpec::f32("target", &input.shape, Init::Normal { std: 0.5 })
}

/// Mean softmax cross-entropy of logits `[B,K]` against the parameter
/// `target` `[B,K]` (one-hot or soft rows):
/// `L = −(1/B)·Σ_{b,k} t'·log softmax(z)`, a rank-0 `tensor<f32>`, with
/// `t' = (1−α)·target + α/K` under label smoothing α (the real K), else
/// `t' = target`.
///
/// Backward: `dz = dy·(softmax(z)·Σ_k t'_k − t')/B` — the reference's
/// `(softmax(z) − t')/B` wherever the target rows sum to 1 (one-hot, soft, and
/// smoothed targets), and the true VJP at any target the certifier draws — and
/// the target's true VJP `dtarget = −dy·(1−α)·log softmax(z)/B` (α = 0 without
/// smoothing). The target is a parameter only so the tie covers its slot; the
/// trainer feeds it as data.
#[derive(Clone, Debug, PartialEq)]
pub struct SoftmaxCrossEntropy {
    pub classes: i64,
    pub label_smoothing: Option<f64>,
}

impl SoftmaxCrossEntropy {
    /// `t'` from the target.
    fn smoothed_target(&self, fb: &mut FuncBuilder, target: ValueId) -> EmitResult<ValueId> {
        match self.label_smoothing {
            None => Ok(target),
            Some(alpha) => {
                let kept = fb.scale(target, 1.0 - alpha)?;
                let spread = fb.splat_like(alpha / self.classes as f64, target);
                fb.add(kept, spread)
            }
        }
    }
}

impl CertLayer for SoftmaxCrossEntropy {
    fn name(&self) -> String {
        match self.label_smoothing {
            None => format!("softmax_ce K={}", self.classes),
            Some(a) => format!("softmax_ce K={} label smoothing {a}", self.classes),
        }
    }

    fn output_type(&self, input: &TensorType) -> Result<TensorType, LayerError> {
        loss_output_type(&self.name(), self.classes, input)
    }

    fn params(&self, input: &TensorType) -> Vec<ParamSpec> {
        vec![target_param(input)]
    }

    fn forward(
        &self,
        fb: &mut FuncBuilder,
        z: ValueId,
        params: &[ValueId],
        _: &mut Sites,
    ) -> EmitResult<Saved> {
        let batch = fb.shape(z)[0];
        let (_, log_p) = softmax_and_log(fb, z)?;
        let t = self.smoothed_target(fb, params[0])?;
        let tl = fb.mul(t, log_p)?;
        let total = fb.reduce_sum(tl, &[0, 1])?;
        // Divide by B (exact in f32) so forward and backward share the constant.
        let b = fb.splat_like(batch as f64, total);
        let mean = fb.div(total, b)?;
        Ok(Saved::leaf(fb.neg(mean)?))
    }

    fn backward(
        &self,
        fb: &mut FuncBuilder,
        z: ValueId,
        params: &[ValueId],
        _: &Saved,
        dy: ValueId,
    ) -> EmitResult<Grads> {
        let shape = fb.shape(z);
        let batch = shape[0];
        let (p, log_p) = softmax_and_log(fb, z)?;
        let t = self.smoothed_target(fb, params[0])?;
        let dy_b = fb.bcast(dy, &[], &shape)?;
        let b = fb.splat_like(batch as f64, z);
        // −∂L/∂z·B = t' − p·Σ_k t'_k: the row mass of t' multiplies p. It is 1
        // for one-hot or soft targets (also after smoothing), where this is the
        // reference's `p − t'`; keeping it makes the map the VJP at every
        // target, not only on the simplex.
        let mass = fb.reduce_sum(t, &[1])?;
        let mass = fb.bcast(mass, &[0], &shape)?;
        let pm = fb.mul(p, mass)?;
        let diff = fb.sub(pm, t)?;
        let dz = fb.mul(dy_b, diff)?;
        let dz = fb.div(dz, b)?;
        let lp = match self.label_smoothing {
            None => log_p,
            Some(alpha) => fb.scale(log_p, 1.0 - alpha)?,
        };
        let dt = fb.mul(dy_b, lp)?;
        let dt = fb.div(dt, b)?;
        let dtarget = fb.neg(dt)?;
        Ok(Grads {
            dx: dz,
            dparams: vec![dtarget],
        })
    }
}

/// Mean binary cross-entropy of logits `[B,K]` against the parameter
/// `target` `[B,K]` (multi-hot or soft):
/// `L = −(1/(B·K))·Σ_{b,k} [t·log σ(z) + (1−t)·log σ(−z)]`, rank 0
/// (`log σ(−z)` is `log(1 − σ(z))` without the cancellation).
///
/// Backward: `dz = dy·(σ(z) − t)/(B·K)` — exact at every target, since
/// `∂/∂z [t log σ(z) + (1−t) log σ(−z)] = t − σ(z)` — and
/// `dtarget = −dy·z/(B·K)` (`log σ(z) − log σ(−z) = z`).
#[derive(Clone, Debug, PartialEq)]
pub struct BinaryCrossEntropy {
    pub classes: i64,
}

/// `Σ_{b,k} [t·log σ(z) + (1−t)·log σ(−z)]`.
fn bce_sum(fb: &mut FuncBuilder, z: ValueId, t: ValueId) -> EmitResult<ValueId> {
    let sig = fb.unary(UnaryOp::Logistic, z)?;
    let log_pos = fb.unary(UnaryOp::Log, sig)?;
    let nz = fb.neg(z)?;
    let sig_neg = fb.unary(UnaryOp::Logistic, nz)?;
    let log_neg = fb.unary(UnaryOp::Log, sig_neg)?;
    let one = fb.splat_like(1.0, t);
    let ot = fb.sub(one, t)?;
    let a = fb.mul(t, log_pos)?;
    let b = fb.mul(ot, log_neg)?;
    let ab = fb.add(a, b)?;
    fb.reduce_sum(ab, &[0, 1])
}

impl CertLayer for BinaryCrossEntropy {
    fn name(&self) -> String {
        format!("bce K={}", self.classes)
    }

    fn output_type(&self, input: &TensorType) -> Result<TensorType, LayerError> {
        loss_output_type(&self.name(), self.classes, input)
    }

    fn params(&self, input: &TensorType) -> Vec<ParamSpec> {
        vec![target_param(input)]
    }

    fn forward(
        &self,
        fb: &mut FuncBuilder,
        z: ValueId,
        params: &[ValueId],
        _: &mut Sites,
    ) -> EmitResult<Saved> {
        let shape = fb.shape(z);
        let total = bce_sum(fb, z, params[0])?;
        // B·K is exact in f32 for any real batch; forward and backward share it.
        let n = fb.splat_like((shape[0] * shape[1]) as f64, total);
        let mean = fb.div(total, n)?;
        Ok(Saved::leaf(fb.neg(mean)?))
    }

    fn backward(
        &self,
        fb: &mut FuncBuilder,
        z: ValueId,
        params: &[ValueId],
        _: &Saved,
        dy: ValueId,
    ) -> EmitResult<Grads> {
        bce_backward(fb, z, params[0], dy, false)
    }
}

/// BCE's backward; `over_batch_only` divides by B instead of B·K (the
/// negative control's bug).
fn bce_backward(
    fb: &mut FuncBuilder,
    z: ValueId,
    t: ValueId,
    dy: ValueId,
    over_batch_only: bool,
) -> EmitResult<Grads> {
    let shape = fb.shape(z);
    let n = if over_batch_only {
        shape[0]
    } else {
        shape[0] * shape[1]
    };
    let sig = fb.unary(UnaryOp::Logistic, z)?;
    let dy_b = fb.bcast(dy, &[], &shape)?;
    let n = fb.splat_like(n as f64, z);
    let diff = fb.sub(sig, t)?;
    let dz = fb.mul(dy_b, diff)?;
    let dz = fb.div(dz, n)?;
    let dt = fb.mul(dy_b, z)?;
    let dt = fb.div(dt, n)?;
    let dtarget = fb.neg(dt)?;
    Ok(Grads {
        dx: dz,
        dparams: vec![dtarget],
    })
}

/// Negative control: BCE whose backward averages over B only (the forward
/// still averages over B·K): every gradient K times too large.
pub fn bce_mean_over_batch(classes: i64) -> ReplacedBackward<BinaryCrossEntropy> {
    ReplacedBackward::new(
        BinaryCrossEntropy { classes },
        "bce backward averaged over B only",
        |_, fb, z, p, _, dy| bce_backward(fb, z, p[0], dy, true),
    )
}

/// Row softmax over the last dim of `[N,K]` or `[N,T,K]`; backward
/// `dz = p⊙(dp − Σ_row p⊙dp)`. Smooth.
pub struct Softmax;

impl CertLayer for Softmax {
    fn name(&self) -> String {
        "softmax (last dim)".into()
    }
    fn output_type(&self, input: &TensorType) -> Result<TensorType, LayerError> {
        if input.shape.is_empty() {
            return Err(LayerError("softmax: needs at least one dim".into()));
        }
        Ok(input.clone())
    }
    fn forward(
        &self,
        fb: &mut FuncBuilder,
        z: ValueId,
        _: &[ValueId],
        _: &mut Sites,
    ) -> EmitResult<Saved> {
        let (p, _) = softmax_and_log(fb, z)?;
        Ok(Saved::leaf(p))
    }
    fn backward(
        &self,
        fb: &mut FuncBuilder,
        z: ValueId,
        _: &[ValueId],
        _: &Saved,
        dp: ValueId,
    ) -> EmitResult<Grads> {
        let shape = fb.shape(z);
        let last = shape.len() as i64 - 1;
        let kept: Vec<i64> = (0..last).collect();
        let (p, _) = softmax_and_log(fb, z)?;
        let pdp = fb.mul(p, dp)?;
        let s = fb.reduce_sum(pdp, &[last])?;
        let s = fb.bcast(s, &kept, &shape)?;
        let centred = fb.sub(dp, s)?;
        let dz = fb.mul(p, centred)?;
        Ok(Grads::input_only(dz))
    }
}

/// The loss configurations `certify --all-ops` ties, with the loss's negative
/// controls.
pub fn catalog() -> Vec<super::OpCase> {
    let ce = |classes, label_smoothing| SoftmaxCrossEntropy {
        classes,
        label_smoothing,
    };
    use super::OpCase;
    vec![
        OpCase::f64("softmax_ce", "K=4, B=1", ce(4, None), &[1, 4]).with_controls(ce_controls()),
        OpCase::f64("softmax_ce", "K=5, B=2", ce(5, None), &[2, 5]),
        OpCase::f64(
            "softmax_ce",
            "K=3, B=3, label smoothing 0.1",
            ce(3, Some(0.1)),
            &[3, 3],
        ),
        OpCase::f64(
            "softmax_ce",
            "K=10, B=2, label smoothing 0.1",
            ce(10, Some(0.1)),
            &[2, 10],
        ),
        OpCase::f64(
            "bce",
            "K=4, B=3",
            BinaryCrossEntropy { classes: 4 },
            &[3, 4],
        )
        .with_controls(vec![super::NegativeControl::new(
            "averaged over B only",
            "K=4, B=3",
            &[3, 4],
            BinaryCrossEntropy { classes: 4 },
            bce_mean_over_batch(4),
            &["dx"],
        )]),
        OpCase::f64(
            "bce",
            "K=10, B=2",
            BinaryCrossEntropy { classes: 10 },
            &[2, 10],
        ),
        OpCase::f64("softmax", "N=1, K=5", Softmax, &[1, 5]),
        OpCase::f64("softmax", "N=2, T=3, K=4", Softmax, &[2, 3, 4]),
        OpCase::f64("softmax", "N=3, K=3", Softmax, &[3, 3]),
    ]
}

// ---------------------------------------------------------------------------
// Negative controls.

const CE: SoftmaxCrossEntropy = SoftmaxCrossEntropy {
    classes: 4,
    label_smoothing: None,
};

fn ce_controls() -> Vec<super::NegativeControl> {
    use super::NegativeControl;
    vec![
        // At B = 1 the missing factor is 1 (the same map is the VJP there):
        // the control runs at B = 3.
        NegativeControl::new(
            "without 1/B",
            "K=4, B=3",
            &[3, 4],
            CE,
            ce_without_one_over_b(),
            &["dx"],
        ),
        NegativeControl::new(
            "(p − t)/B",
            "K=4, B=2",
            &[2, 4],
            CE,
            ce_simplex_only_cotangent(),
            &["dx"],
        ),
    ]
}

/// Softmax-CE whose logit cotangent forgets the 1/B:
/// `dz = dy·(p·Σ_k t_k − t)` (the correct map times B).
fn ce_without_one_over_b() -> ReplacedBackward<SoftmaxCrossEntropy> {
    ReplacedBackward::new(CE, "softmax_ce without 1/B", |_, fb, z, p, saved, dy| {
        let right = CE.backward(fb, z, p, saved, dy)?;
        let shape = fb.shape(z);
        let e = fb.unary(UnaryOp::Exponential, z)?;
        let s = fb.reduce(BinaryOp::Add, e, &[1])?;
        let s = fb.bcast(s, &[0], &shape)?;
        let prob = fb.div(e, s)?;
        let mass = fb.reduce(BinaryOp::Add, p[0], &[1])?;
        let mass = fb.bcast(mass, &[0], &shape)?;
        let pm = fb.mul(prob, mass)?;
        let diff = fb.sub(pm, p[0])?;
        let dy_b = fb.bcast(dy, &[], &shape)?;
        let dz = fb.mul(dy_b, diff)?;
        Ok(Grads {
            dx: dz,
            dparams: right.dparams,
        })
    })
}

/// Softmax-CE with the reference's literal cotangent `dy·(p − t)/B`, which
/// assumes target rows that sum to 1. The certifier draws targets off the
/// simplex, where the row mass `Σ_k t_k` matters: this is why the layer's map
/// keeps `p·Σ_k t_k`.
fn ce_simplex_only_cotangent() -> ReplacedBackward<SoftmaxCrossEntropy> {
    ReplacedBackward::new(
        CE,
        "softmax_ce with (p − t)/B",
        |_, fb, z, p, saved, dy| {
            let right = CE.backward(fb, z, p, saved, dy)?;
            let shape = fb.shape(z);
            let e = fb.unary(UnaryOp::Exponential, z)?;
            let s = fb.reduce(BinaryOp::Add, e, &[1])?;
            let s = fb.bcast(s, &[0], &shape)?;
            let prob = fb.div(e, s)?;
            let diff = fb.sub(prob, p[0])?;
            let dy_b = fb.bcast(dy, &[], &shape)?;
            let dz = fb.mul(dy_b, diff)?;
            let b = fb.splat_like(shape[0] as f64, dz);
            let dz = fb.div(dz, b)?;
            Ok(Grads {
                dx: dz,
                dparams: right.dparams,
            })
        },
    )
}
