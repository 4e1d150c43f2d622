//! Pointwise activations (REFERENCE §2.11): ReLU, ReLU6, sigmoid, swish and
//! tanh-form GELU — forward, closed-form backward map (masks are strict) and
//! kink sites.

use crate::emit::{Emit, EmitResult};
use crate::layer::{CertLayer, Grads, KinkKind, LayerError, Saved, Sites};
use ir::{CompareDirection, FuncBuilder, TensorType, UnaryOp, ValueId};

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
    fn forward(
        &self,
        fb: &mut FuncBuilder,
        x: ValueId,
        _: &[ValueId],
        sites: &mut Sites,
    ) -> EmitResult<Saved> {
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
    ) -> EmitResult<Grads> {
        let zero = fb.splat_like(0.0, x);
        let pos = fb.cmp(CompareDirection::Gt, x, zero)?;
        let dx = fb.select(pos, dy, zero)?;
        Ok(Grads {
            dx,
            dparams: Vec::new(),
        })
    }
}

/// ReLU6: `y = min(max(x, 0), 6)`; backward `dx = (0 < x < 6) ? dy : 0` (strict
/// on both sides: two compares AND-ed). Kinks: the lower corner on the `max`
/// (x ≠ 0) and the upper corner on the `min` (x ≠ 6).
pub struct Relu6;

impl CertLayer for Relu6 {
    fn name(&self) -> String {
        "relu6".into()
    }
    fn output_type(&self, input: &TensorType) -> Result<TensorType, LayerError> {
        Ok(input.clone())
    }
    fn forward(
        &self,
        fb: &mut FuncBuilder,
        x: ValueId,
        _: &[ValueId],
        sites: &mut Sites,
    ) -> EmitResult<Saved> {
        let zero = fb.splat_like(0.0, x);
        let six = fb.splat_like(6.0, x);
        let lower = fb.max(x, zero)?;
        sites.record("relu6_lower", KinkKind::Relu6Lower, lower);
        let y = fb.min(lower, six)?;
        sites.record("relu6_upper", KinkKind::Relu6Upper, y);
        Ok(Saved::leaf(y))
    }
    fn backward(
        &self,
        fb: &mut FuncBuilder,
        x: ValueId,
        _: &[ValueId],
        _: &Saved,
        dy: ValueId,
    ) -> EmitResult<Grads> {
        let zero = fb.splat_like(0.0, x);
        let six = fb.splat_like(6.0, x);
        let above = fb.cmp(CompareDirection::Gt, x, zero)?;
        let below = fb.cmp(CompareDirection::Lt, x, six)?;
        let inside = fb.and(above, below)?;
        let dx = fb.select(inside, dy, zero)?;
        Ok(Grads {
            dx,
            dparams: Vec::new(),
        })
    }
}

/// Sigmoid `σ(x)` (stablehlo.logistic); backward `dx = σ(1−σ)·dy`. Smooth.
pub struct Sigmoid;

impl CertLayer for Sigmoid {
    fn name(&self) -> String {
        "sigmoid".into()
    }
    fn output_type(&self, input: &TensorType) -> Result<TensorType, LayerError> {
        Ok(input.clone())
    }
    fn forward(
        &self,
        fb: &mut FuncBuilder,
        x: ValueId,
        _: &[ValueId],
        _: &mut Sites,
    ) -> EmitResult<Saved> {
        Ok(Saved::leaf(fb.unary(UnaryOp::Logistic, x)?))
    }
    fn backward(
        &self,
        fb: &mut FuncBuilder,
        x: ValueId,
        _: &[ValueId],
        _: &Saved,
        dy: ValueId,
    ) -> EmitResult<Grads> {
        let s = fb.unary(UnaryOp::Logistic, x)?;
        let one = fb.splat_like(1.0, x);
        let rest = fb.sub(one, s)?;
        let d = fb.mul(s, rest)?;
        let dx = fb.mul(d, dy)?;
        Ok(Grads {
            dx,
            dparams: Vec::new(),
        })
    }
}

/// Swish / SiLU `x·σ(x)`; backward `dx = σ·(1 + x·(1−σ))·dy`. Smooth.
pub struct Swish;

impl CertLayer for Swish {
    fn name(&self) -> String {
        "swish".into()
    }
    fn output_type(&self, input: &TensorType) -> Result<TensorType, LayerError> {
        Ok(input.clone())
    }
    fn forward(
        &self,
        fb: &mut FuncBuilder,
        x: ValueId,
        _: &[ValueId],
        _: &mut Sites,
    ) -> EmitResult<Saved> {
        let s = fb.unary(UnaryOp::Logistic, x)?;
        Ok(Saved::leaf(fb.mul(x, s)?))
    }
    fn backward(
        &self,
        fb: &mut FuncBuilder,
        x: ValueId,
        _: &[ValueId],
        _: &Saved,
        dy: ValueId,
    ) -> EmitResult<Grads> {
        let s = fb.unary(UnaryOp::Logistic, x)?;
        let one = fb.splat_like(1.0, x);
        let rest = fb.sub(one, s)?;
        let xr = fb.mul(x, rest)?;
        let t = fb.add(one, xr)?;
        let d = fb.mul(s, t)?;
        let dx = fb.mul(d, dy)?;
        Ok(Grads {
            dx,
            dparams: Vec::new(),
        })
    }
}

/// The GELU formula. Only the tanh approximation is rendered by the reference
/// (the erf form appears only in its finite-difference script).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum GeluForm {
    /// `0.5·x·(1 + tanh(√(2/π)·(x + 0.044715·x³)))`.
    Tanh,
}

/// √(2/π), as in the reference artifacts.
pub const GELU_SQRT_2_OVER_PI: f64 = 0.7978845608028654;
/// The cubic coefficient of the tanh-form GELU.
pub const GELU_CUBIC: f64 = 0.044715;

/// GELU; backward for the tanh form
/// `dx = (0.5(1+t) + 0.5·x·(1−t²)·√(2/π)·(1 + 3·0.044715·x²))·dy`. Smooth.
pub struct Gelu {
    pub form: GeluForm,
}

impl Gelu {
    /// `t = tanh(√(2/π)·(x + c·x³))` and `x²`.
    fn tanh_arg(&self, fb: &mut FuncBuilder, x: ValueId) -> EmitResult<(ValueId, ValueId)> {
        let x2 = fb.mul(x, x)?;
        let x3 = fb.mul(x2, x)?;
        let cx3 = fb.scale(x3, GELU_CUBIC)?;
        let inner = fb.add(x, cx3)?;
        let inner = fb.scale(inner, GELU_SQRT_2_OVER_PI)?;
        let t = fb.unary(UnaryOp::Tanh, inner)?;
        Ok((t, x2))
    }
}

impl CertLayer for Gelu {
    fn name(&self) -> String {
        format!("gelu {:?}", self.form)
    }
    fn output_type(&self, input: &TensorType) -> Result<TensorType, LayerError> {
        Ok(input.clone())
    }
    fn forward(
        &self,
        fb: &mut FuncBuilder,
        x: ValueId,
        _: &[ValueId],
        _: &mut Sites,
    ) -> EmitResult<Saved> {
        let GeluForm::Tanh = self.form;
        let (t, _) = self.tanh_arg(fb, x)?;
        let one = fb.splat_like(1.0, x);
        let onet = fb.add(one, t)?;
        let half_x = fb.scale(x, 0.5)?;
        Ok(Saved::leaf(fb.mul(half_x, onet)?))
    }
    fn backward(
        &self,
        fb: &mut FuncBuilder,
        x: ValueId,
        _: &[ValueId],
        _: &Saved,
        dy: ValueId,
    ) -> EmitResult<Grads> {
        let GeluForm::Tanh = self.form;
        let (t, x2) = self.tanh_arg(fb, x)?;
        let one = fb.splat_like(1.0, x);
        let onet = fb.add(one, t)?;
        let first = fb.scale(onet, 0.5)?;
        let tt = fb.mul(t, t)?;
        let sech2 = fb.sub(one, tt)?;
        // 3·c·x² as (c·x²)·3 rather than the literal 0.134145: the f32-rounded
        // constants must be the forward's own c, or the backward differs from
        // the derivative of the emitted forward by a constant's rounding.
        let cx2 = fb.scale(x2, GELU_CUBIC)?;
        let cx2 = fb.scale(cx2, 3.0)?;
        let poly = fb.add(one, cx2)?;
        let k = fb.scale(poly, GELU_SQRT_2_OVER_PI)?;
        let half_x = fb.scale(x, 0.5)?;
        let second = fb.mul(half_x, sech2)?;
        let second = fb.mul(second, k)?;
        let d = fb.add(first, second)?;
        let dx = fb.mul(d, dy)?;
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
        super::OpCase::new("relu6", "N=1, [1,2,3,4]", Relu6, &[1, 2, 3, 4]),
        super::OpCase::new("relu6", "N=2, [2,6]", Relu6, &[2, 6]),
        super::OpCase::new("relu6", "N=3, [3,2,4,3]", Relu6, &[3, 2, 4, 3]),
        super::OpCase::new("sigmoid", "N=1, [1,2,3,2]", Sigmoid, &[1, 2, 3, 2]),
        super::OpCase::new("sigmoid", "N=2, [2,5]", Sigmoid, &[2, 5]),
        super::OpCase::new("sigmoid", "N=3, [3,4]", Sigmoid, &[3, 4]),
        super::OpCase::new("swish", "N=1, [1,7]", Swish, &[1, 7]),
        super::OpCase::new("swish", "N=2, [2,2,2,3]", Swish, &[2, 2, 2, 3]),
        super::OpCase::new("swish", "N=3, [3,5]", Swish, &[3, 5]),
        super::OpCase::new(
            "gelu",
            "tanh, N=1, [1,3,4]",
            Gelu {
                form: GeluForm::Tanh,
            },
            &[1, 3, 4],
        ),
        super::OpCase::new(
            "gelu",
            "tanh, N=2, [2,6]",
            Gelu {
                form: GeluForm::Tanh,
            },
            &[2, 6],
        ),
        super::OpCase::new(
            "gelu",
            "tanh, N=3, [3,2,5]",
            Gelu {
                form: GeluForm::Tanh,
            },
            &[3, 2, 5],
        ),
    ]
}
