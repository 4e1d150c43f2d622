//! Pointwise activations: forward, backward map (masks are strict) and kinks.

use crate::emit::{Emit, R};
use crate::layer::{CertLayer, Grads, KinkKind, LayerError, ParamSpec, Saved, Sites};
use ir::{CompareDirection, FuncBuilder, TensorType, ValueId};

/// ReLU: `y = max(x, 0)`; backward `dx = x > 0 ? dy : 0` (strict mask, relu'(0) = 0).
/// Kink: every input ≠ 0.
pub struct Relu;

impl CertLayer for Relu {
    fn name(&self) -> String {
        "relu".into()
    }
    fn output_type(&self, input: &TensorType) -> Result<TensorType, LayerError> {
        Ok(input.clone())
    }
    fn params(&self, _: &TensorType) -> Vec<ParamSpec> {
        Vec::new()
    }
    fn forward(
        &self,
        fb: &mut FuncBuilder,
        x: ValueId,
        _: &[ValueId],
        sites: &mut Sites,
    ) -> R<Saved> {
        let zero = fb.splat_like(0.0, x);
        let y = fb.max(x, zero)?;
        sites.record("pre_relu", KinkKind::ReluNonZero, y);
        Ok(Saved::leaf(y))
    }
    fn backward(
        &self,
        fb: &mut FuncBuilder,
        x: ValueId,
        _: &[ValueId],
        _: &Saved,
        dy: ValueId,
    ) -> R<Grads> {
        let zero = fb.splat_like(0.0, x);
        let pos = fb.cmp(CompareDirection::Gt, x, zero)?;
        let dx = fb.select(pos, dy, zero)?;
        Ok(Grads {
            dx,
            dparams: Vec::new(),
        })
    }
}

/// The activation configurations `certify --all-ops` ties.
pub fn catalog() -> Vec<super::OpCase> {
    vec![
        super::OpCase::new("relu", "N=1, [1,3,4,5]", Relu, &[1, 3, 4, 5]),
        super::OpCase::new("relu", "N=2, [2,7]", Relu, &[2, 7]),
        super::OpCase::new("relu", "N=3, [3,2,3,5]", Relu, &[3, 2, 3, 5]),
    ]
}
