//! Normalization layers (docs/conventions.md §8, §10): batch norm in its three
//! worlds (per-example, true batch, frozen eval statistics) and layer norm (row
//! over the last dim, channel over C per position). Every world uses biased
//! variance and `istd = rsqrt(var + ε)`; the backward recomputes the
//! statistics from the saved input and applies the three-term formula. Also
//! the norm catalog cases and batch norm's negative controls.

use crate::combinators::ReplacedBackward;
use crate::emit::{Emit, EmitResult};
use crate::layer::{BlockBn, CertLayer, Grads, Init, LayerError, ParamSpec, Saved, Sites};
use ir::{FuncBuilder, TensorType, UnaryOp, ValueId};

/// The normalized input over a reduction set, with what the backward reads.
#[derive(Clone, Copy, Debug)]
pub struct Standardized {
    /// `x̂ = (x − μ)·istd`, shaped like x.
    pub xhat: ValueId,
    /// `istd = rsqrt(var + ε)` broadcast to x's shape.
    pub istd: ValueId,
    /// M: the number of elements each statistic reduces.
    pub count: i64,
    /// The mean and biased variance, shaped by the kept dims (`[C]` for batch
    /// BN): what a batch-BN train step reports for the host's running stats.
    pub mean: ValueId,
    pub var: ValueId,
}

/// Dimensions of a rank-`rank` tensor not in `reduce`, in order (the dims the
/// statistics keep, and so their broadcast dims).
pub fn kept_dims(rank: usize, reduce: &[i64]) -> Vec<i64> {
    (0..rank as i64).filter(|d| !reduce.contains(d)).collect()
}

/// Mean and biased variance of `x` over `reduce`, then `x̂` and `istd`.
/// The means divide by M (an integer, exact in f32) rather than multiply by a
/// rounded 1/M, so forward and backward agree on the constant.
pub fn standardize(
    fb: &mut FuncBuilder,
    x: ValueId,
    reduce: &[i64],
    eps: f64,
) -> EmitResult<Standardized> {
    let shape = fb.shape(x);
    let kept = kept_dims(shape.len(), reduce);
    let count: i64 = reduce.iter().map(|&d| shape[d as usize]).product();
    let sum = fb.reduce_sum(x, reduce)?;
    let m = fb.splat_like(count as f64, sum);
    let mean = fb.div(sum, m)?;
    let mean_b = fb.bcast(mean, &kept, &shape)?;
    let centred = fb.sub(x, mean_b)?;
    let sq = fb.mul(centred, centred)?;
    let sq_sum = fb.reduce_sum(sq, reduce)?;
    let var = fb.div(sq_sum, m)?;
    let e = fb.splat_like(eps, var);
    let var_eps = fb.add(var, e)?;
    let istd = fb.unary(UnaryOp::Rsqrt, var_eps)?;
    let istd = fb.bcast(istd, &kept, &shape)?;
    let xhat = fb.mul(centred, istd)?;
    Ok(Standardized {
        xhat,
        istd,
        count,
        mean,
        var,
    })
}

/// `γ·x̂ + β` with γ, β of one dim (`affine_dim` of x) broadcast.
fn affine(
    fb: &mut FuncBuilder,
    xhat: ValueId,
    gamma: ValueId,
    beta: ValueId,
    affine_dim: i64,
) -> EmitResult<ValueId> {
    let shape = fb.shape(xhat);
    let g = fb.bcast(gamma, &[affine_dim], &shape)?;
    let b = fb.bcast(beta, &[affine_dim], &shape)?;
    let scaled = fb.mul(xhat, g)?;
    fb.add(scaled, b)
}

/// The input VJP of `γ·standardize(x)` over `reduce`:
/// `ĝ = γ⊙dy`, `dx = (istd/M)·(M·ĝ − Σĝ − x̂·Σ(x̂⊙ĝ))` (sums over `reduce`).
pub fn standardize_backward(
    fb: &mut FuncBuilder,
    s: &Standardized,
    ghat: ValueId,
    reduce: &[i64],
) -> EmitResult<ValueId> {
    let shape = fb.shape(ghat);
    let kept = kept_dims(shape.len(), reduce);
    let sum_g = fb.reduce_sum(ghat, reduce)?;
    let sum_g = fb.bcast(sum_g, &kept, &shape)?;
    let xg = fb.mul(s.xhat, ghat)?;
    let sum_xg = fb.reduce_sum(xg, reduce)?;
    let sum_xg = fb.bcast(sum_xg, &kept, &shape)?;
    let m_g = fb.scale(ghat, s.count as f64)?;
    let t = fb.sub(m_g, sum_g)?;
    let xs = fb.mul(s.xhat, sum_xg)?;
    let t = fb.sub(t, xs)?;
    let t = fb.mul(s.istd, t)?;
    let m = fb.splat_like(s.count as f64, t);
    fb.div(t, m)
}

/// `ĝ = γ⊙dy`, `dγ = Σ dy⊙x̂`, `dβ = Σ dy`, the sums over every dim but
/// `affine_dim`.
pub fn affine_backward(
    fb: &mut FuncBuilder,
    xhat: ValueId,
    gamma: ValueId,
    dy: ValueId,
    affine_dim: i64,
) -> EmitResult<(ValueId, ValueId, ValueId)> {
    let shape = fb.shape(dy);
    let g = fb.bcast(gamma, &[affine_dim], &shape)?;
    let ghat = fb.mul(g, dy)?;
    let others: Vec<i64> = (0..shape.len() as i64)
        .filter(|&d| d != affine_dim)
        .collect();
    let dyx = fb.mul(dy, xhat)?;
    let dgamma = fb.reduce_sum(dyx, &others)?;
    let dbeta = fb.reduce_sum(dy, &others)?;
    Ok((ghat, dgamma, dbeta))
}

/// Which statistics batch norm normalizes with (docs/conventions.md §8: never mix).
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum BnWorld {
    /// Per channel over the H·W of each example (reduce dims [2,3]), as the
    /// cifar8_bn renders.
    PerExample,
    /// True (training-mode) batch norm: per channel over N·H·W (reduce [0,2,3]).
    Batch,
    /// Frozen running statistics, given as the extra parameters
    /// `running_mean`, `running_var` `[C]`; no reduction.
    Eval,
}

/// Batch norm over an `[N,C,H,W]` input with `ch` channels.
///
/// Parameters, in order: `gamma` `[C]` (Init::Ones), `beta` `[C]`
/// (Init::Zeros), and in the Eval world `running_mean` `[C]` (Init::Zeros) and
/// `running_var` `[C]` (Init::Ones). The running statistics are inputs the
/// trainer does not update by gradient (the host EMAs them), but their
/// gradient slots carry the layer's exact VJP with respect to them:
/// `dμ = −Σ istd·ĝ`, `dvar = −½·istd²·Σ ĝ⊙x̂`.
#[derive(Clone, Debug, PartialEq)]
pub struct BatchNorm {
    pub ch: i64,
    pub world: BnWorld,
    pub eps: f64,
}

impl BatchNorm {
    /// The reduction set of the statistics (empty in the Eval world).
    pub fn reduce_dims(&self) -> &'static [i64] {
        match self.world {
            BnWorld::PerExample => &[2, 3],
            BnWorld::Batch => &[0, 2, 3],
            BnWorld::Eval => &[],
        }
    }

    /// Eval world: `(x̂, istd broadcast)` from the running statistics.
    fn eval_standardize(
        &self,
        fb: &mut FuncBuilder,
        x: ValueId,
        mean: ValueId,
        var: ValueId,
    ) -> EmitResult<(ValueId, ValueId)> {
        let shape = fb.shape(x);
        let e = fb.splat_like(self.eps, var);
        let var_eps = fb.add(var, e)?;
        let istd = fb.unary(UnaryOp::Rsqrt, var_eps)?;
        let istd = fb.bcast(istd, &[1], &shape)?;
        let mean = fb.bcast(mean, &[1], &shape)?;
        let centred = fb.sub(x, mean)?;
        let xhat = fb.mul(centred, istd)?;
        Ok((xhat, istd))
    }
}

impl BatchNorm {
    /// `(mean, biased var)` this layer's forward computed (`[C]` in the Batch
    /// world, `[N, C]` per example), read from its `Saved`; `None` in the Eval
    /// world, which computes no statistics.
    pub fn saved_stats(saved: &Saved) -> Option<(ValueId, ValueId)> {
        match saved.values.as_slice() {
            [mean, var] => Some((*mean, *var)),
            _ => None,
        }
    }
}

impl CertLayer for BatchNorm {
    fn name(&self) -> String {
        format!("batchnorm {:?} C={} ε={:e}", self.world, self.ch, self.eps)
    }

    fn output_type(&self, input: &TensorType) -> Result<TensorType, LayerError> {
        let s = &input.shape;
        if s.len() != 4 || s[1] != self.ch {
            return Err(LayerError(format!(
                "{}: expects [N,{},H,W], got {input}",
                self.name(),
                self.ch
            )));
        }
        Ok(input.clone())
    }

    fn batch_norms(&self) -> Vec<BlockBn> {
        vec![BlockBn {
            name: String::new(),
            ch: self.ch,
            world: self.world,
            path: Vec::new(),
        }]
    }

    fn params(&self, _: &TensorType) -> Vec<ParamSpec> {
        let c = [self.ch];
        let mut ps = vec![
            ParamSpec::f32("gamma", &c, Init::Ones),
            ParamSpec::f32("beta", &c, Init::Zeros),
        ];
        if self.world == BnWorld::Eval {
            ps.push(ParamSpec::f32("running_mean", &c, Init::Zeros));
            ps.push(ParamSpec::f32("running_var", &c, Init::Ones));
        }
        ps
    }

    fn forward(
        &self,
        fb: &mut FuncBuilder,
        x: ValueId,
        params: &[ValueId],
        _: &mut Sites,
    ) -> EmitResult<Saved> {
        let (xhat, stats) = match self.world {
            BnWorld::Eval => (self.eval_standardize(fb, x, params[2], params[3])?.0, None),
            _ => {
                let s = standardize(fb, x, self.reduce_dims(), self.eps)?;
                (s.xhat, Some([s.mean, s.var]))
            }
        };
        let y = affine(fb, xhat, params[0], params[1], 1)?;
        // The statistics the forward computed ride along in `values`, so a train
        // step can output them without emitting them a second time.
        Ok(Saved {
            output: Some(y),
            values: stats.map(Vec::from).unwrap_or_default(),
            children: Vec::new(),
        })
    }

    fn backward(
        &self,
        fb: &mut FuncBuilder,
        x: ValueId,
        params: &[ValueId],
        _: &Saved,
        dy: ValueId,
    ) -> EmitResult<Grads> {
        // Recompute the statistics from the saved BN input (as the reference's
        // emitters do) rather than saving them.
        if self.world == BnWorld::Eval {
            let (xhat, istd) = self.eval_standardize(fb, x, params[2], params[3])?;
            let (ghat, dgamma, dbeta) = affine_backward(fb, xhat, params[0], dy, 1)?;
            // Frozen statistics: x̂ is affine in x, so dx = istd·ĝ.
            let dx = fb.mul(istd, ghat)?;
            // y depends on μ through x − μ: dμ = −Σ dx.
            let dmean = fb.reduce_sum(dx, &[0, 2, 3])?;
            let dmean = fb.neg(dmean)?;
            // ∂istd/∂var = −½·istd³, so ∂y/∂var = −½·γ·x̂·istd².
            let ii = fb.mul(istd, istd)?;
            let xg = fb.mul(xhat, ghat)?;
            let t = fb.mul(ii, xg)?;
            let dvar = fb.reduce_sum(t, &[0, 2, 3])?;
            let dvar = fb.scale(dvar, -0.5)?;
            return Ok(Grads {
                dx,
                dparams: vec![dgamma, dbeta, dmean, dvar],
            });
        }
        let reduce = self.reduce_dims();
        let s = standardize(fb, x, reduce, self.eps)?;
        let (ghat, dgamma, dbeta) = affine_backward(fb, s.xhat, params[0], dy, 1)?;
        let dx = standardize_backward(fb, &s, ghat, reduce)?;
        Ok(Grads {
            dx,
            dparams: vec![dgamma, dbeta],
        })
    }
}

/// Which axis layer norm normalizes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LnKind {
    /// Over the last dim D of `[N,D]` or `[N,T,D]` (ViT's per-token LN).
    Row,
    /// Over C at each (n,h,w) of `[N,C,H,W]` (ConvNeXt's channel LN).
    Channel,
}

/// Layer norm over `dim` features (D for Row, C for Channel); params `gamma`
/// (Init::Ones), `beta` (Init::Zeros), both `[dim]`. ε is a field: 1e-5 (ViT)
/// and 1e-6 (ConvNeXt) are the reference's configurations.
#[derive(Clone, Debug, PartialEq)]
pub struct LayerNorm {
    pub dim: i64,
    pub eps: f64,
    pub kind: LnKind,
}

impl LayerNorm {
    /// The normalized (and affine) dim for an input of `rank`.
    fn axis(&self, rank: usize) -> i64 {
        match self.kind {
            LnKind::Row => rank as i64 - 1,
            LnKind::Channel => 1,
        }
    }
}

impl CertLayer for LayerNorm {
    fn name(&self) -> String {
        format!("layernorm {:?} D={} ε={:e}", self.kind, self.dim, self.eps)
    }

    fn output_type(&self, input: &TensorType) -> Result<TensorType, LayerError> {
        let s = &input.shape;
        let fits = match self.kind {
            LnKind::Row => (2..=3).contains(&s.len()) && s[s.len() - 1] == self.dim,
            LnKind::Channel => s.len() == 4 && s[1] == self.dim,
        };
        if !fits {
            let want = match self.kind {
                LnKind::Row => format!("[N,{d}] or [N,T,{d}]", d = self.dim),
                LnKind::Channel => format!("[N,{},H,W]", self.dim),
            };
            return Err(LayerError(format!(
                "{}: expects {want}, got {input}",
                self.name()
            )));
        }
        Ok(input.clone())
    }

    fn params(&self, _: &TensorType) -> Vec<ParamSpec> {
        vec![
            ParamSpec::f32("gamma", &[self.dim], Init::Ones),
            ParamSpec::f32("beta", &[self.dim], Init::Zeros),
        ]
    }

    fn forward(
        &self,
        fb: &mut FuncBuilder,
        x: ValueId,
        params: &[ValueId],
        _: &mut Sites,
    ) -> EmitResult<Saved> {
        let axis = self.axis(fb.shape(x).len());
        let s = standardize(fb, x, &[axis], self.eps)?;
        let y = affine(fb, s.xhat, params[0], params[1], axis)?;
        Ok(Saved::leaf(y))
    }

    fn backward(
        &self,
        fb: &mut FuncBuilder,
        x: ValueId,
        params: &[ValueId],
        _: &Saved,
        dy: ValueId,
    ) -> EmitResult<Grads> {
        let axis = self.axis(fb.shape(x).len());
        let s = standardize(fb, x, &[axis], self.eps)?;
        let (ghat, dgamma, dbeta) = affine_backward(fb, s.xhat, params[0], dy, axis)?;
        let dx = standardize_backward(fb, &s, ghat, &[axis])?;
        Ok(Grads {
            dx,
            dparams: vec![dgamma, dbeta],
        })
    }
}

/// The normalization configurations `certify --all-ops` ties: every BN world
/// at batch 1, 2, 3 on non-square inputs, both LN kinds with both ε.
pub fn catalog() -> Vec<super::OpCase> {
    let bn = |ch, world| BatchNorm {
        ch,
        world,
        eps: 1e-5,
    };
    let ln = |dim, eps, kind| LayerNorm { dim, eps, kind };
    use super::OpCase;
    // Configurations named `World, N=n, c ch, h×w` after their input.
    let bn_case = |world: BnWorld, input: [i64; 4]| {
        let [n, c, h, w] = input;
        let config = format!("{world:?}, N={n}, {c} ch, {h}×{w}");
        OpCase::f64("batchnorm", config, bn(c, world), &input)
    };
    vec![
        bn_case(BnWorld::PerExample, [1, 2, 3, 4]).with_controls(bn_controls()),
        bn_case(BnWorld::PerExample, [3, 2, 2, 3]),
        bn_case(BnWorld::Batch, [2, 2, 3, 2]),
        bn_case(BnWorld::Batch, [3, 3, 2, 3]),
        bn_case(BnWorld::Batch, [1, 2, 4, 3]),
        bn_case(BnWorld::Eval, [2, 3, 2, 3]),
        bn_case(BnWorld::Eval, [1, 2, 3, 5]),
        OpCase::f64(
            "layernorm",
            "Row ε=1e-5, N=2, D=5",
            ln(5, 1e-5, LnKind::Row),
            &[2, 5],
        ),
        OpCase::f64(
            "layernorm",
            "Row ε=1e-5, N=1, T=3, D=4",
            ln(4, 1e-5, LnKind::Row),
            &[1, 3, 4],
        ),
        OpCase::f64(
            "layernorm",
            "Channel ε=1e-6, N=3, 3 ch, 2×3",
            ln(3, 1e-6, LnKind::Channel),
            &[3, 3, 2, 3],
        ),
        OpCase::f64(
            "layernorm",
            "Channel ε=1e-6, N=1, 4 ch, 3×2",
            ln(4, 1e-6, LnKind::Channel),
            &[1, 4, 3, 2],
        ),
    ]
}

// ---------------------------------------------------------------------------
// Negative controls.

const BN_BATCH: BatchNorm = BatchNorm {
    ch: 2,
    world: BnWorld::Batch,
    eps: 1e-5,
};

const BN_EVAL: BatchNorm = BatchNorm {
    ch: 2,
    world: BnWorld::Eval,
    eps: 1e-5,
};

fn bn_controls() -> Vec<super::NegativeControl> {
    use super::NegativeControl;
    vec![
        NegativeControl::new(
            "without −Σĝ",
            "Batch, N=2, 2 ch, 3×2",
            &[2, 2, 3, 2],
            BN_BATCH,
            bn_without_mean_term(),
            &["dx"],
        ),
        // dx comes first; dγ is wrong too (x̂ from the wrong statistics).
        NegativeControl::new(
            "PerExample backward",
            "Batch, N=3, 2 ch, 2×3",
            &[3, 2, 2, 3],
            BN_BATCH,
            batch_forward_per_example_backward(),
            &["dx"],
        ),
        NegativeControl::new(
            "zero running-stat gradients",
            "Eval, N=2, 2 ch, 3×2",
            &[2, 2, 3, 2],
            BN_EVAL,
            bn_eval_zero_stat_grads(),
            &["drunning_mean"],
        ),
    ]
}

/// Batch BN whose input backward drops the −Σĝ (mean) term:
/// `dx = (istd/M)(M·ĝ − x̂·Σ(x̂⊙ĝ))`.
fn bn_without_mean_term() -> ReplacedBackward<BatchNorm> {
    ReplacedBackward::new(
        BN_BATCH,
        "batchnorm Batch without −Σĝ",
        |_, fb, x, p, saved, dy| {
            // Keep the correct parameter gradients; rebuild dx with the bug.
            let right = BN_BATCH.backward(fb, x, p, saved, dy)?;
            let reduce = BN_BATCH.reduce_dims();
            let st = standardize(fb, x, reduce, BN_BATCH.eps)?;
            let shape = fb.shape(x);
            let kept = kept_dims(shape.len(), reduce);
            let g = fb.bcast(p[0], &[1], &shape)?;
            let ghat = fb.mul(g, dy)?;
            let xg = fb.mul(st.xhat, ghat)?;
            let sum_xg = fb.reduce_sum(xg, reduce)?;
            let sum_xg = fb.bcast(sum_xg, &kept, &shape)?;
            let m_g = fb.scale(ghat, st.count as f64)?;
            let xs = fb.mul(st.xhat, sum_xg)?;
            let inner = fb.sub(m_g, xs)?;
            let inner = fb.mul(st.istd, inner)?;
            let dx = fb.scale(inner, 1.0 / st.count as f64)?;
            Ok(Grads {
                dx,
                dparams: right.dparams,
            })
        },
    )
}

/// The "two worlds" hazard: a batch-BN forward with the per-example backward.
fn batch_forward_per_example_backward() -> ReplacedBackward<BatchNorm> {
    ReplacedBackward::new(
        BN_BATCH,
        "batchnorm Batch forward, PerExample backward",
        |_, fb, x, p, saved, dy| {
            let per_example = BatchNorm {
                world: BnWorld::PerExample,
                ..BN_BATCH
            };
            per_example.backward(fb, x, p, saved, dy)
        },
    )
}

/// Eval BN that calls its running statistics non-trainable and returns zero
/// for them: not the VJP, and the tie says so (the slot is checked honestly).
fn bn_eval_zero_stat_grads() -> ReplacedBackward<BatchNorm> {
    ReplacedBackward::new(
        BN_EVAL,
        "batchnorm Eval with zero running-stat gradients",
        |_, fb, x, p, saved, dy| {
            let mut g = BN_EVAL.backward(fb, x, p, saved, dy)?;
            g.dparams[2] = fb.splat_like(0.0, p[2]);
            g.dparams[3] = fb.splat_like(0.0, p[3]);
            Ok(g)
        },
    )
}
