//! Per-channel multiplicative scales: ConvNeXt's layer scale γ
//! (docs/conventions.md §12, `y = γ ⊙ x` before the residual add) with its hand-written
//! backward map, its catalog cases and its negative control.

use super::{NegativeControl, OpCase};
use crate::combinators::ReplacedBackward;
use crate::emit::{Emit, EmitResult};
use crate::layer::{CertLayer, Grads, Init, LayerError, ParamSpec, Saved, Sites};
use ir::{FuncBuilder, TensorType, ValueId};

/// Layer scale on NCHW: `y[n,c,h,w] = γ[c]·x[n,c,h,w]`, `γ [ch]` initialised
/// to the constant `init` (timm's ConvNeXt: 1e-6). Backward:
/// `dx = γ ⊙ dy`, `dγ = Σ_{n,h,w} x ⊙ dy`. Bilinear: its tie is exact.
#[derive(Clone, Debug, PartialEq)]
pub struct LayerScale {
    pub ch: i64,
    pub init: f64,
}

impl CertLayer for LayerScale {
    fn name(&self) -> String {
        format!("layer_scale ch={} init={:e}", self.ch, self.init)
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
        vec![ParamSpec::f32(
            "gamma",
            &[self.ch],
            Init::Const { value: self.init },
        )]
    }
    fn forward(
        &self,
        fb: &mut FuncBuilder,
        x: ValueId,
        params: &[ValueId],
        _: &mut Sites,
    ) -> EmitResult<Saved> {
        let shape = fb.shape(x);
        let g = fb.bcast(params[0], &[1], &shape)?;
        Ok(Saved::leaf(fb.mul(g, x)?))
    }
    fn backward(
        &self,
        fb: &mut FuncBuilder,
        x: ValueId,
        params: &[ValueId],
        _: &Saved,
        dy: ValueId,
    ) -> EmitResult<Grads> {
        let shape = fb.shape(x);
        let g = fb.bcast(params[0], &[1], &shape)?;
        let dx = fb.mul(g, dy)?;
        let xdy = fb.mul(x, dy)?;
        let dg = fb.reduce_sum(xdy, &[0, 2, 3])?;
        Ok(Grads {
            dx,
            dparams: vec![dg],
        })
    }
}

/// The layer-scale configurations `certify --all-ops` ties, with the
/// control.
pub fn catalog() -> Vec<OpCase> {
    let ls = |ch| LayerScale { ch, init: 1e-6 };
    vec![
        OpCase::exact("layer_scale", "N=2, 3 ch, 2×4", ls(3), &[2, 3, 2, 4]).with_controls(vec![
            NegativeControl::new(
                "γ missing from dx",
                "N=2, 3 ch, 2×4",
                &[2, 3, 2, 4],
                ls(3),
                layer_scale_missing_from_backward(ls(3)),
                &["dx"],
            ),
        ]),
        OpCase::exact("layer_scale", "N=1, 2 ch, 3×5", ls(2), &[1, 2, 3, 5]),
        OpCase::exact("layer_scale", "N=3, 4 ch, 1×2", ls(4), &[3, 4, 1, 2]),
    ]
}

/// Layer scale whose input backward forgets γ (`dx = dy`, as if the scale
/// were not in the forward); dγ stays right. Shape-preserving.
pub fn layer_scale_missing_from_backward(ls: LayerScale) -> ReplacedBackward<LayerScale> {
    ReplacedBackward::new(ls, "γ missing from dx", |l, fb, x, p, s, dy| {
        let right = l.backward(fb, x, p, s, dy)?;
        Ok(Grads {
            dx: dy,
            dparams: right.dparams,
        })
    })
}
