//! Affine and reshaping ops around the convs: `Dense` (W stored [in, out]),
//! `BiasAdd` (per-channel bias on NCHW), `GlobalAvgPool` (NCHW → [N, C]) and
//! `Flatten` (NCHW → [N, C·H·W]), each with its hand-written backward map
//! (docs/conventions.md §6), their catalog and negative controls.

use crate::combinators::ReplacedBackward;
use crate::emit::{Emit, EmitResult};
use crate::layer::{CertLayer, Grads, Init, LayerError, ParamSpec, Saved, Sites};
use ir::{DotDims, FuncBuilder, TensorType, ValueId};

/// `y = x·W + b` on the last axis: `x [.., in_f]`, `W [in_f, out_f]`, `b [out_f]`.
/// Leading axes (batch, tokens) are carried along, so `[N, F]` and `[N, T, D]`
/// both work. Backward: `dx = dy·Wᵀ`, `dW = xᵀ·dy` (contracting every leading
/// axis), `db = Σ dy` over the leading axes.
#[derive(Clone, Debug, PartialEq)]
pub struct Dense {
    pub in_f: i64,
    pub out_f: i64,
    pub bias: bool,
}

impl Dense {
    /// The leading (non-feature) axes of an input of rank `rank`.
    fn leading(rank: usize) -> Vec<i64> {
        (0..rank as i64 - 1).collect()
    }
}

impl CertLayer for Dense {
    fn name(&self) -> String {
        format!(
            "dense {}→{}{}",
            self.in_f,
            self.out_f,
            if self.bias { " +b" } else { "" }
        )
    }
    fn output_type(&self, input: &TensorType) -> Result<TensorType, LayerError> {
        match input.shape.split_last() {
            Some((&f, lead)) if !lead.is_empty() && f == self.in_f => {
                let mut shape = lead.to_vec();
                shape.push(self.out_f);
                Ok(TensorType::f32(shape))
            }
            _ => Err(LayerError(format!(
                "{}: expects [.., {}] with a batch axis, got {input}",
                self.name(),
                self.in_f
            ))),
        }
    }
    fn params(&self, _: &TensorType) -> Vec<ParamSpec> {
        let mut ps = vec![ParamSpec::f32(
            "W",
            &[self.in_f, self.out_f],
            Init::HeNormal { fan_in: self.in_f },
        )];
        if self.bias {
            ps.push(ParamSpec::f32("b", &[self.out_f], Init::Zeros));
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
        let last = fb.shape(x).len() as i64 - 1;
        let y = fb.matmul(x, params[0], last, 0)?;
        let y = if self.bias {
            let shape = fb.shape(y);
            let b = fb.bcast(params[1], &[last], &shape)?;
            fb.add(y, b)?
        } else {
            y
        };
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
        let rank = fb.shape(x).len();
        let last = rank as i64 - 1;
        let lead = Self::leading(rank);
        // dx = dy·Wᵀ: contract dy's out axis with W's out axis (dim 1).
        let dx = fb.matmul(dy, params[0], last, 1)?;
        // dW = xᵀ·dy: contract every leading axis → [in, out].
        let dw = fb.dot(
            x,
            dy,
            DotDims {
                lhs_contracting: lead.clone(),
                rhs_contracting: lead.clone(),
                ..Default::default()
            },
        )?;
        let mut dparams = vec![dw];
        if self.bias {
            dparams.push(fb.reduce_sum(dy, &lead)?);
        }
        Ok(Grads { dx, dparams })
    }
}

/// `y = x + b[c]` on NCHW (channel axis 1), `b [ch]`. Backward: `dx = dy`,
/// `db = Σ dy` over `[0, 2, 3]`.
#[derive(Clone, Debug, PartialEq)]
pub struct BiasAdd {
    pub ch: i64,
}

impl CertLayer for BiasAdd {
    fn name(&self) -> String {
        format!("bias_add ch={}", self.ch)
    }
    fn output_type(&self, input: &TensorType) -> Result<TensorType, LayerError> {
        if input.rank() != 4 || input.shape[1] != self.ch {
            return Err(LayerError(format!(
                "{}: expects [N, {}, H, W], got {input}",
                self.name(),
                self.ch
            )));
        }
        Ok(input.clone())
    }
    fn params(&self, _: &TensorType) -> Vec<ParamSpec> {
        vec![ParamSpec::f32("b", &[self.ch], Init::Zeros)]
    }
    fn forward(
        &self,
        fb: &mut FuncBuilder,
        x: ValueId,
        params: &[ValueId],
        _: &mut Sites,
    ) -> EmitResult<Saved> {
        let shape = fb.shape(x);
        let b = fb.bcast(params[0], &[1], &shape)?;
        Ok(Saved::leaf(fb.add(x, b)?))
    }
    fn backward(
        &self,
        fb: &mut FuncBuilder,
        _: ValueId,
        _: &[ValueId],
        _: &Saved,
        dy: ValueId,
    ) -> EmitResult<Grads> {
        let db = fb.reduce_sum(dy, &[0, 2, 3])?;
        Ok(Grads {
            dx: dy,
            dparams: vec![db],
        })
    }
}

/// `y[n,c] = Σ_{h,w} x[n,c,h,w] / (H·W)`. Backward broadcasts `dy/(H·W)` over
/// the grid. The divisor is emitted as a `divide` by the integer `H·W` on both
/// sides, so the exact tie sees the same rational `1/(H·W)` in each.
#[derive(Clone, Debug, PartialEq)]
pub struct GlobalAvgPool;

impl CertLayer for GlobalAvgPool {
    fn name(&self) -> String {
        "global_avg_pool".into()
    }
    fn output_type(&self, input: &TensorType) -> Result<TensorType, LayerError> {
        match input.shape[..] {
            [n, c, _, _] => Ok(TensorType::f32(vec![n, c])),
            _ => Err(LayerError(format!(
                "global_avg_pool: expects NCHW, got {input}"
            ))),
        }
    }
    fn forward(
        &self,
        fb: &mut FuncBuilder,
        x: ValueId,
        _: &[ValueId],
        _: &mut Sites,
    ) -> EmitResult<Saved> {
        let shape = fb.shape(x);
        let sum = fb.reduce_sum(x, &[2, 3])?;
        let count = fb.splat_like((shape[2] * shape[3]) as f64, sum);
        Ok(Saved::leaf(fb.div(sum, count)?))
    }
    fn backward(
        &self,
        fb: &mut FuncBuilder,
        x: ValueId,
        _: &[ValueId],
        _: &Saved,
        dy: ValueId,
    ) -> EmitResult<Grads> {
        let shape = fb.shape(x);
        let count = fb.splat_like((shape[2] * shape[3]) as f64, dy);
        let per_pixel = fb.div(dy, count)?;
        let dx = fb.bcast(per_pixel, &[0, 1], &shape)?;
        Ok(Grads::input_only(dx))
    }
}

/// `[N, d1, d2, ..] → [N, d1·d2·..]` (row-major, so NCHW flattens as
/// `(c·H + h)·W + w`); backward reshapes `dy` back to the input shape.
#[derive(Clone, Debug, PartialEq)]
pub struct Flatten;

impl CertLayer for Flatten {
    fn name(&self) -> String {
        "flatten".into()
    }
    fn output_type(&self, input: &TensorType) -> Result<TensorType, LayerError> {
        if input.rank() < 2 {
            return Err(LayerError(format!(
                "flatten: expects a batch axis and more, got {input}"
            )));
        }
        let rest: i64 = input.shape[1..].iter().product();
        Ok(TensorType::f32(vec![input.shape[0], rest]))
    }
    fn forward(
        &self,
        fb: &mut FuncBuilder,
        x: ValueId,
        _: &[ValueId],
        _: &mut Sites,
    ) -> EmitResult<Saved> {
        let shape = fb.shape(x);
        let rest: i64 = shape[1..].iter().product();
        Ok(Saved::leaf(fb.reshape(x, &[shape[0], rest])?))
    }
    fn backward(
        &self,
        fb: &mut FuncBuilder,
        x: ValueId,
        _: &[ValueId],
        _: &Saved,
        dy: ValueId,
    ) -> EmitResult<Grads> {
        let shape = fb.shape(x);
        Ok(Grads::input_only(fb.reshape(dy, &shape)?))
    }
}

/// The dense-family configurations `certify --all-ops` ties.
pub fn catalog() -> Vec<super::OpCase> {
    use super::{NegativeControl, OpCase};
    let dense = |in_f, out_f, bias| Dense { in_f, out_f, bias };
    vec![
        OpCase::exact("dense", "N=1, 4→3, +b", dense(4, 3, true), &[1, 4]),
        OpCase::exact(
            "dense",
            "N=2, 5→5 (square W), +b",
            dense(5, 5, true),
            &[2, 5],
        )
        .with_controls(vec![NegativeControl::new(
            "dx = dy·W",
            "N=2, 5→5 (square W), +b",
            &[2, 5],
            dense(5, 5, true),
            dense_untransposed(dense(5, 5, true)),
            &["dx"],
        )]),
        OpCase::exact("dense", "N=3, 6→2, no bias", dense(6, 2, false), &[3, 6]),
        OpCase::exact(
            "dense",
            "tokens N=2 T=3, 4→3, +b",
            dense(4, 3, true),
            &[2, 3, 4],
        ),
        OpCase::exact(
            "bias_add",
            "N=1, 3 ch, 4×5",
            BiasAdd { ch: 3 },
            &[1, 3, 4, 5],
        ),
        OpCase::exact(
            "bias_add",
            "N=2, 2 ch, 2×3",
            BiasAdd { ch: 2 },
            &[2, 2, 2, 3],
        ),
        OpCase::exact(
            "bias_add",
            "N=3, 2 ch, 3×2",
            BiasAdd { ch: 2 },
            &[3, 2, 3, 2],
        ),
        OpCase::exact(
            "global_avg_pool",
            "N=2, 3 ch, 5×3",
            GlobalAvgPool,
            &[2, 3, 5, 3],
        )
        .with_controls(vec![NegativeControl::new(
            "backward ÷H",
            "N=2, 3 ch, 5×3",
            &[2, 3, 5, 3],
            GlobalAvgPool,
            gap_divides_by_h_only(),
            &["dx"],
        )]),
        OpCase::exact(
            "global_avg_pool",
            "N=1, 2 ch, 4×4",
            GlobalAvgPool,
            &[1, 2, 4, 4],
        ),
        OpCase::exact(
            "global_avg_pool",
            "N=3, 2 ch, 3×7",
            GlobalAvgPool,
            &[3, 2, 3, 7],
        ),
        OpCase::exact("flatten", "N=2, [2,3,4]", Flatten, &[2, 2, 3, 4]),
        OpCase::exact("flatten", "N=1, [3,2,5]", Flatten, &[1, 3, 2, 5]),
        OpCase::exact("flatten", "N=3, [2,4]", Flatten, &[3, 2, 4]),
    ]
}

// ---------------------------------------------------------------------------
// Negative controls.

/// Dense with `dx = dy·W` (contracting W's input axis) instead of `dy·Wᵀ`:
/// shape-correct only because W is square.
fn dense_untransposed(dense: Dense) -> ReplacedBackward<Dense> {
    ReplacedBackward::new(dense, "dx = dy·W", |d, fb, x, p, s, dy| {
        let mut g = d.backward(fb, x, p, s, dy)?;
        g.dx = fb.matmul(dy, p[0], 1, 0)?;
        Ok(g)
    })
}

/// GAP backward dividing by H only.
fn gap_divides_by_h_only() -> ReplacedBackward<GlobalAvgPool> {
    ReplacedBackward::new(GlobalAvgPool, "backward ÷H", |_, fb, x, _, _, dy| {
        let shape = fb.shape(x);
        let h = fb.splat_like(shape[2] as f64, dy);
        let per_pixel = fb.div(dy, h)?;
        let dx = fb.bcast(per_pixel, &[0, 1], &shape)?;
        Ok(Grads::input_only(dx))
    })
}
