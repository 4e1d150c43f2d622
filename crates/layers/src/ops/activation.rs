//! Pointwise activations (docs/conventions.md §9): ReLU, ReLU6, sigmoid, swish and
//! tanh-form GELU — each a [`Pointwise`] definition (forward emitter,
//! derivative emitter, kinks) that the one generic pointwise CertLayer turns
//! into a layer — their catalog cases and their negative controls.

use crate::combinators::ReplacedBackward;
use crate::emit::{Emit, EmitResult};
use crate::layer::{CertLayer, Grads, KinkKind, LayerError, Saved, Sites};
use ir::{CompareDirection, FuncBuilder, TensorType, UnaryOp, ValueId};

/// How a pointwise backward turns `dy` into `dx`.
pub enum Derivative {
    /// `dx = f'(x)·dy`, with `f'(x)` emitted as a value.
    Slope(ValueId),
    /// `f'` is 1 where `mask` holds and 0 elsewhere: `dx = mask ? dy : zero`
    /// (a select, so the piecewise-linear tie stays exact).
    Mask { mask: ValueId, zero: ValueId },
}

/// A kink of a pointwise op: the local site name and its hypothesis.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Kink {
    pub site: &'static str,
    pub kind: KinkKind,
}

/// An elementwise activation `y = f(x)`, `dx = f'(x)·dy`, given by its
/// emitters. Every `Pointwise` is a [`CertLayer`]: output type = input type,
/// no parameters, one kink site per entry of [`Pointwise::KINKS`].
pub trait Pointwise: Send + Sync {
    /// The layer name.
    fn op_name(&self) -> String;
    /// The kinks of `f`, in the order [`Pointwise::emit_forward`] returns
    /// their deciding ops (none for a smooth op).
    const KINKS: &'static [Kink] = &[];
    /// Emit `f(x)`: the output and the deciding op of each kink.
    fn emit_forward(&self, fb: &mut FuncBuilder, x: ValueId)
        -> EmitResult<(ValueId, Vec<ValueId>)>;
    /// Emit `f'` at the saved input `x`.
    fn emit_derivative(&self, fb: &mut FuncBuilder, x: ValueId) -> EmitResult<Derivative>;
}

impl<P: Pointwise> CertLayer for P {
    fn name(&self) -> String {
        self.op_name()
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
        let (y, decisions) = self.emit_forward(fb, x)?;
        let kinks = Self::KINKS;
        assert_eq!(
            decisions.len(),
            kinks.len(),
            "{}: one deciding op per kink",
            self.op_name()
        );
        for (k, v) in kinks.iter().zip(decisions) {
            sites.record(k.site, k.kind, v);
        }
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
        let dx = match self.emit_derivative(fb, x)? {
            Derivative::Slope(d) => fb.mul(d, dy)?,
            Derivative::Mask { mask, zero } => fb.select(mask, dy, zero)?,
        };
        Ok(Grads::input_only(dx))
    }
}

/// ReLU: `y = max(x, 0)`; backward `dx = x > 0 ? dy : 0` (strict mask, relu'(0) = 0).
/// Kink: every input ≠ 0.
pub struct Relu;

impl Pointwise for Relu {
    fn op_name(&self) -> String {
        "relu".into()
    }
    const KINKS: &'static [Kink] = &[Kink {
        site: "pre_relu",
        kind: KinkKind::at_value(0.0, "x ≠ 0"),
    }];
    fn emit_forward(
        &self,
        fb: &mut FuncBuilder,
        x: ValueId,
    ) -> EmitResult<(ValueId, Vec<ValueId>)> {
        let zero = fb.splat_like(0.0, x);
        let y = fb.max(x, zero)?;
        Ok((y, vec![y]))
    }
    fn emit_derivative(&self, fb: &mut FuncBuilder, x: ValueId) -> EmitResult<Derivative> {
        let zero = fb.splat_like(0.0, x);
        let pos = fb.cmp(CompareDirection::Gt, x, zero)?;
        Ok(Derivative::Mask { mask: pos, zero })
    }
}

/// ReLU6: `y = min(max(x, 0), 6)`; backward `dx = (0 < x < 6) ? dy : 0` (strict
/// on both sides: two compares AND-ed). Kinks: the lower corner on the `max`
/// (x ≠ 0) and the upper corner on the `min` (x ≠ 6).
pub struct Relu6;

impl Pointwise for Relu6 {
    fn op_name(&self) -> String {
        "relu6".into()
    }
    const KINKS: &'static [Kink] = &[
        Kink {
            site: "relu6_lower",
            kind: KinkKind::at_value(0.0, "x ≠ 0"),
        },
        Kink {
            site: "relu6_upper",
            kind: KinkKind::at_value(6.0, "x ≠ 6"),
        },
    ];
    fn emit_forward(
        &self,
        fb: &mut FuncBuilder,
        x: ValueId,
    ) -> EmitResult<(ValueId, Vec<ValueId>)> {
        let zero = fb.splat_like(0.0, x);
        let six = fb.splat_like(6.0, x);
        let lower = fb.max(x, zero)?;
        let y = fb.min(lower, six)?;
        Ok((y, vec![lower, y]))
    }
    fn emit_derivative(&self, fb: &mut FuncBuilder, x: ValueId) -> EmitResult<Derivative> {
        let zero = fb.splat_like(0.0, x);
        let six = fb.splat_like(6.0, x);
        let above = fb.cmp(CompareDirection::Gt, x, zero)?;
        let below = fb.cmp(CompareDirection::Lt, x, six)?;
        let inside = fb.and(above, below)?;
        Ok(Derivative::Mask { mask: inside, zero })
    }
}

/// Sigmoid `σ(x)` (stablehlo.logistic); backward `dx = σ(1−σ)·dy`. Smooth.
pub struct Sigmoid;

impl Pointwise for Sigmoid {
    fn op_name(&self) -> String {
        "sigmoid".into()
    }
    fn emit_forward(
        &self,
        fb: &mut FuncBuilder,
        x: ValueId,
    ) -> EmitResult<(ValueId, Vec<ValueId>)> {
        Ok((fb.unary(UnaryOp::Logistic, x)?, Vec::new()))
    }
    fn emit_derivative(&self, fb: &mut FuncBuilder, x: ValueId) -> EmitResult<Derivative> {
        let s = fb.unary(UnaryOp::Logistic, x)?;
        let one = fb.splat_like(1.0, x);
        let rest = fb.sub(one, s)?;
        Ok(Derivative::Slope(fb.mul(s, rest)?))
    }
}

/// Swish / SiLU `x·σ(x)`; backward `dx = σ·(1 + x·(1−σ))·dy`. Smooth.
pub struct Swish;

impl Pointwise for Swish {
    fn op_name(&self) -> String {
        "swish".into()
    }
    fn emit_forward(
        &self,
        fb: &mut FuncBuilder,
        x: ValueId,
    ) -> EmitResult<(ValueId, Vec<ValueId>)> {
        let s = fb.unary(UnaryOp::Logistic, x)?;
        Ok((fb.mul(x, s)?, Vec::new()))
    }
    fn emit_derivative(&self, fb: &mut FuncBuilder, x: ValueId) -> EmitResult<Derivative> {
        let s = fb.unary(UnaryOp::Logistic, x)?;
        let one = fb.splat_like(1.0, x);
        let rest = fb.sub(one, s)?;
        let xr = fb.mul(x, rest)?;
        let t = fb.add(one, xr)?;
        Ok(Derivative::Slope(fb.mul(s, t)?))
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

impl Pointwise for Gelu {
    fn op_name(&self) -> String {
        format!("gelu {:?}", self.form)
    }
    fn emit_forward(
        &self,
        fb: &mut FuncBuilder,
        x: ValueId,
    ) -> EmitResult<(ValueId, Vec<ValueId>)> {
        let GeluForm::Tanh = self.form;
        let (t, _) = self.tanh_arg(fb, x)?;
        let one = fb.splat_like(1.0, x);
        let onet = fb.add(one, t)?;
        let half_x = fb.scale(x, 0.5)?;
        Ok((fb.mul(half_x, onet)?, Vec::new()))
    }
    fn emit_derivative(&self, fb: &mut FuncBuilder, x: ValueId) -> EmitResult<Derivative> {
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
        Ok(Derivative::Slope(fb.add(first, second)?))
    }
}

/// The activation configurations `certify --all-ops` ties, with the
/// activations' negative controls.
pub fn catalog() -> Vec<super::OpCase> {
    use super::OpCase;
    let tanh = || Gelu {
        form: GeluForm::Tanh,
    };
    vec![
        OpCase::exact("relu", "N=1, [1,3,4,5]", Relu, &[1, 3, 4, 5]).with_controls(vec![
            super::NegativeControl::new(
                "no mask",
                "N=2, [2,3,4]",
                &[2, 3, 4],
                Relu,
                relu_no_mask(),
                &["dx"],
            ),
        ]),
        OpCase::exact("relu", "N=2, [2,7]", Relu, &[2, 7]),
        OpCase::exact("relu", "N=3, [3,2,3,5]", Relu, &[3, 2, 3, 5]),
        OpCase::exact("relu6", "N=1, [1,2,3,4]", Relu6, &[1, 2, 3, 4]).with_controls(vec![
            // Refuted at a large-scale point, i.e. the first (scale 1) point
            // passed: the bug is invisible below 6.
            super::NegativeControl::new(
                "mask x > 0 only",
                "N=2, [2,3,4]",
                &[2, 3, 4],
                Relu6,
                relu6_no_upper_mask(),
                &["dx"],
            )
            .detail_contains(&["scale 8"]),
        ]),
        OpCase::exact("relu6", "N=2, [2,6]", Relu6, &[2, 6]),
        OpCase::exact("relu6", "N=3, [3,2,4,3]", Relu6, &[3, 2, 4, 3]),
        OpCase::f64("sigmoid", "N=1, [1,2,3,2]", Sigmoid, &[1, 2, 3, 2]),
        OpCase::f64("sigmoid", "N=2, [2,5]", Sigmoid, &[2, 5]),
        OpCase::f64("sigmoid", "N=3, [3,4]", Sigmoid, &[3, 4]),
        OpCase::f64("swish", "N=1, [1,7]", Swish, &[1, 7]),
        OpCase::f64("swish", "N=2, [2,2,2,3]", Swish, &[2, 2, 2, 3]),
        OpCase::f64("swish", "N=3, [3,5]", Swish, &[3, 5]),
        OpCase::f64("gelu", "tanh, N=1, [1,3,4]", tanh(), &[1, 3, 4]).with_controls(vec![
            super::NegativeControl::new(
                "erf-form backward",
                "tanh, N=2, [2,6]",
                &[2, 6],
                tanh(),
                GeluErfBackward,
                &["dx"],
            ),
        ]),
        OpCase::f64("gelu", "tanh, N=2, [2,6]", tanh(), &[2, 6]),
        OpCase::f64("gelu", "tanh, N=3, [3,2,5]", tanh(), &[3, 2, 5]),
    ]
}

// ---------------------------------------------------------------------------
// Negative controls.

/// ReLU whose backward passes the cotangent through unmasked.
fn relu_no_mask() -> ReplacedBackward<Relu> {
    ReplacedBackward::new(Relu, "no mask", |_, _, _, _, _, dy| {
        Ok(Grads::input_only(dy))
    })
}

/// ReLU6 whose mask forgets the upper bound (`x > 0` only): the VJP at every
/// point below 6, wrong above it (the certifier's scale-8 points reach it).
fn relu6_no_upper_mask() -> ReplacedBackward<Relu6> {
    ReplacedBackward::new(Relu6, "relu6 (mask x > 0 only)", |_, fb, x, _, _, dy| {
        let zero = fb.splat_like(0.0, x);
        let pos = fb.cmp(CompareDirection::Gt, x, zero)?;
        let dx = fb.select(pos, dy, zero)?;
        Ok(Grads::input_only(dx))
    })
}

/// GELU with the tanh forward and the erf-form derivative
/// `Φ(x) + x·φ(x)` in its backward (the reference's FD-script mismatch).
struct GeluErfBackward;
impl CertLayer for GeluErfBackward {
    fn name(&self) -> String {
        "gelu tanh forward, erf backward".into()
    }
    fn output_type(&self, input: &TensorType) -> Result<TensorType, LayerError> {
        Ok(input.clone())
    }
    fn forward(
        &self,
        fb: &mut FuncBuilder,
        x: ValueId,
        p: &[ValueId],
        s: &mut Sites,
    ) -> EmitResult<Saved> {
        Gelu {
            form: GeluForm::Tanh,
        }
        .forward(fb, x, p, s)
    }
    fn backward(
        &self,
        fb: &mut FuncBuilder,
        x: ValueId,
        _: &[ValueId],
        _: &Saved,
        dy: ValueId,
    ) -> EmitResult<Grads> {
        let one = fb.splat_like(1.0, x);
        let xs = fb.scale(x, std::f64::consts::FRAC_1_SQRT_2)?;
        let erf = fb.unary(UnaryOp::Erf, xs)?;
        let cdf = fb.add(one, erf)?;
        let cdf = fb.scale(cdf, 0.5)?;
        let x2 = fb.mul(x, x)?;
        let e = fb.scale(x2, -0.5)?;
        let pdf = fb.unary(UnaryOp::Exponential, e)?;
        // 1/√(2π) = √(2/π)/2.
        let pdf = fb.scale(pdf, GELU_SQRT_2_OVER_PI * 0.5)?;
        let xpdf = fb.mul(x, pdf)?;
        let d = fb.add(cdf, xpdf)?;
        let dx = fb.mul(d, dy)?;
        Ok(Grads::input_only(dx))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::layer::{tie_funcs, KinkAt};

    #[test]
    fn relu6_records_both_corners_as_data() {
        let f = tie_funcs(&Relu6, &TensorType::f32(vec![2, 3])).unwrap();
        let at: Vec<(&str, KinkAt, &str)> = f
            .sites
            .iter()
            .map(|s| (s.name.as_str(), s.kind.at, s.kind.predicate))
            .collect();
        assert_eq!(
            at,
            [
                ("relu6_lower", KinkAt::Value(0.0), "x ≠ 0"),
                ("relu6_upper", KinkAt::Value(6.0), "x ≠ 6"),
            ]
        );
        assert!(tie_funcs(&Sigmoid, &TensorType::f32(vec![2, 3]))
            .unwrap()
            .sites
            .is_empty());
    }
}
