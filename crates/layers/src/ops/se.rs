//! Multiplicative gating: the `ElementwiseProduct` combinator (product rule,
//! docs/conventions.md §12) and EfficientNet's squeeze-and-excitation block
//! `SqueezeExcite` (docs/conventions.md §12), each with its hand-written backward map; their
//! catalog cases and negative controls.

use super::activation::Relu;
use super::attention::{dense_last_axis, dense_last_axis_back, PatchEmbed};
use crate::combinators::{fan_in_output_type, fan_in_params, ReplacedBackward, Residual};
use crate::emit::{Emit, EmitResult};
use crate::layer::{CertLayer, Grads, Init, LayerError, ParamSpec, Saved, Sites};
use ir::{FuncBuilder, TensorType, UnaryOp, ValueId};

// ---------------------------------------------------------------------------
// Elementwise product.
// ---------------------------------------------------------------------------

/// `y = f(x) ⊙ g(x)` for two layers with equal output types. Backward (product
/// rule, `elemwiseProduct_has_vjp`): `dx = f.back(x, g(x)⊙dy) + g.back(x, f(x)⊙dy)`
/// — each branch's cotangent is scaled by the OTHER factor. Parameters: f's
/// (prefixed `f.`) then g's (prefixed `g.`); kink sites scoped the same way.
pub struct ElementwiseProduct {
    pub f: Box<dyn CertLayer>,
    pub g: Box<dyn CertLayer>,
}

impl ElementwiseProduct {
    /// How many of the flat parameters belong to `f` at input type `input`.
    fn branches(&self) -> [(&'static str, &dyn CertLayer); 2] {
        [("f", &*self.f), ("g", &*self.g)]
    }

    pub fn f_param_count(&self, input: &TensorType) -> usize {
        self.f.params(input).len()
    }
}

impl CertLayer for ElementwiseProduct {
    fn name(&self) -> String {
        format!("product[{} ⊙ {}]", self.f.name(), self.g.name())
    }

    fn output_type(&self, input: &TensorType) -> Result<TensorType, LayerError> {
        fan_in_output_type("elementwise product", self.branches(), input)
    }

    fn params(&self, input: &TensorType) -> Vec<ParamSpec> {
        fan_in_params(self.branches(), input)
    }

    fn forward(
        &self,
        fb: &mut FuncBuilder,
        x: ValueId,
        params: &[ValueId],
        sites: &mut Sites,
    ) -> EmitResult<Saved> {
        let n = self.f_param_count(fb.ty(x));
        let a = sites.scoped("f", |s| self.f.forward(fb, x, &params[..n], s))?;
        let b = sites.scoped("g", |s| self.g.forward(fb, x, &params[n..], s))?;
        let y = fb.mul(a.output(), b.output())?;
        Ok(Saved::composite(y, vec![a, b]))
    }

    fn backward(
        &self,
        fb: &mut FuncBuilder,
        x: ValueId,
        params: &[ValueId],
        saved: &Saved,
        dy: ValueId,
    ) -> EmitResult<Grads> {
        let n = self.f_param_count(fb.ty(x));
        let (fx, gx) = (saved.children[0].output(), saved.children[1].output());
        let df_out = fb.mul(gx, dy)?; // ∂y/∂f = g(x)
        let dg_out = fb.mul(fx, dy)?; // ∂y/∂g = f(x)
        let ga = self
            .f
            .backward(fb, x, &params[..n], &saved.children[0], df_out)?;
        let gb = self
            .g
            .backward(fb, x, &params[n..], &saved.children[1], dg_out)?;
        let dx = fb.add(ga.dx, gb.dx)?;
        let mut dparams = ga.dparams;
        dparams.extend(gb.dparams);
        Ok(Grads { dx, dparams })
    }
}

// ---------------------------------------------------------------------------
// Squeeze-and-excitation.
// ---------------------------------------------------------------------------

/// EfficientNet SE on NCHW `[N,C,H,W]`: `s = GAP(x)` `[N,C]` → dense (W1 `[C,r]`,
/// b1) → swish → dense (W2 `[r,C]`, b2) → sigmoid gate `[N,C]` →
/// `y = x ⊙ broadcast(gate)`. Both dense layers keep their biases
/// (docs/conventions.md §12); `reduced` is r. Globally smooth: no kink sites.
pub struct SqueezeExcite {
    pub ch: i64,
    pub reduced: i64,
}

/// The SE forward's intermediates, recomputed from the input by the backward.
struct SeForward {
    /// `GAP(x)` `[N,C]`.
    squeezed: ValueId,
    /// First dense output (swish input) `[N,r]`.
    pre_swish: ValueId,
    /// `swish(pre_swish)` `[N,r]`.
    excited: ValueId,
    /// `sigmoid(·)` `[N,C]`.
    gate: ValueId,
    /// `x ⊙ broadcast(gate)`.
    output: ValueId,
}

/// The two terms of SE's input cotangent, and the parameter gradients.
pub struct SeBackTerms {
    /// `gate ⊙ dy`: the path through the multiplied input.
    pub direct: ValueId,
    /// `broadcast(ds / (H·W))`: the path through the squeeze and the gate.
    pub through_gate: ValueId,
    /// `[dW1, db1, dW2, db2]`.
    pub dparams: Vec<ValueId>,
}

impl SqueezeExcite {
    fn se_forward(
        &self,
        fb: &mut FuncBuilder,
        x: ValueId,
        params: &[ValueId],
    ) -> EmitResult<SeForward> {
        let (w1, b1, w2, b2) = (params[0], params[1], params[2], params[3]);
        let shape = fb.shape(x);
        let hw = (shape[2] * shape[3]) as f64;
        let sum = fb.reduce_sum(x, &[2, 3])?;
        let squeezed = fb.scale(sum, 1.0 / hw)?;
        let pre_swish = dense_last_axis(fb, squeezed, w1, b1)?;
        let sig = fb.unary(UnaryOp::Logistic, pre_swish)?;
        let excited = fb.mul(pre_swish, sig)?;
        let pre_gate = dense_last_axis(fb, excited, w2, b2)?;
        let gate = fb.unary(UnaryOp::Logistic, pre_gate)?;
        let gate_b = fb.bcast(gate, &[0, 1], &shape)?;
        let output = fb.mul(x, gate_b)?;
        Ok(SeForward {
            squeezed,
            pre_swish,
            excited,
            gate,
            output,
        })
    }

    /// The backward map's terms, recomputing the SE forward from `x` (as the
    /// reference emitter does). `dx = direct + through_gate`.
    pub fn backward_terms(
        &self,
        fb: &mut FuncBuilder,
        x: ValueId,
        params: &[ValueId],
        dy: ValueId,
    ) -> EmitResult<SeBackTerms> {
        let (w1, w2) = (params[0], params[2]);
        let f = self.se_forward(fb, x, params)?;
        let shape = fb.shape(x);
        let hw = (shape[2] * shape[3]) as f64;

        let gate_b = fb.bcast(f.gate, &[0, 1], &shape)?;
        let direct = fb.mul(gate_b, dy)?;

        // dgate = Σ_{h,w} x⊙dy; through σ: dz = dgate ⊙ gate(1−gate).
        let xdy = fb.mul(x, dy)?;
        let dgate = fb.reduce_sum(xdy, &[2, 3])?;
        let one = fb.splat_like(1.0, f.gate);
        let one_minus = fb.sub(one, f.gate)?;
        let sig_slope = fb.mul(f.gate, one_minus)?;
        let dz = fb.mul(dgate, sig_slope)?;
        let (d_excited, dw2, db2) = dense_last_axis_back(fb, f.excited, w2, dz)?;

        // swish'(e) = σ(e)·(1 + e·(1 − σ(e))).
        let sig = fb.unary(UnaryOp::Logistic, f.pre_swish)?;
        let one = fb.splat_like(1.0, sig);
        let one_minus = fb.sub(one, sig)?;
        let e_term = fb.mul(f.pre_swish, one_minus)?;
        let inner = fb.add(one, e_term)?;
        let swish_slope = fb.mul(sig, inner)?;
        let de = fb.mul(d_excited, swish_slope)?;
        let (ds, dw1, db1) = dense_last_axis_back(fb, f.squeezed, w1, de)?;

        // GAP's VJP spreads ds/(H·W) over every pixel of its channel.
        let ds_mean = fb.scale(ds, 1.0 / hw)?;
        let through_gate = fb.bcast(ds_mean, &[0, 1], &shape)?;
        Ok(SeBackTerms {
            direct,
            through_gate,
            dparams: vec![dw1, db1, dw2, db2],
        })
    }
}

impl CertLayer for SqueezeExcite {
    fn name(&self) -> String {
        format!("squeeze_excite C={} r={}", self.ch, self.reduced)
    }

    fn output_type(&self, input: &TensorType) -> Result<TensorType, LayerError> {
        match input.shape.as_slice() {
            [_, c, _, _] if *c == self.ch => Ok(input.clone()),
            _ => Err(LayerError(format!(
                "squeeze_excite: expects [N,{},H,W], got {input}",
                self.ch
            ))),
        }
    }

    fn params(&self, _: &TensorType) -> Vec<ParamSpec> {
        let (c, r) = (self.ch, self.reduced);
        vec![
            ParamSpec::f32("W1", &[c, r], Init::HeNormal { fan_in: c }),
            ParamSpec::f32("b1", &[r], Init::Zeros),
            ParamSpec::f32("W2", &[r, c], Init::HeNormal { fan_in: r }),
            ParamSpec::f32("b2", &[c], Init::Zeros),
        ]
    }

    fn forward(
        &self,
        fb: &mut FuncBuilder,
        x: ValueId,
        params: &[ValueId],
        _: &mut Sites,
    ) -> EmitResult<Saved> {
        let f = self.se_forward(fb, x, params)?;
        Ok(Saved::leaf(f.output))
    }

    fn backward(
        &self,
        fb: &mut FuncBuilder,
        x: ValueId,
        params: &[ValueId],
        _: &Saved,
        dy: ValueId,
    ) -> EmitResult<Grads> {
        let t = self.backward_terms(fb, x, params, dy)?;
        let dx = fb.add(t.direct, t.through_gate)?;
        Ok(Grads {
            dx,
            dparams: t.dparams,
        })
    }
}

/// The SE and elementwise-product configurations `certify --all-ops` ties,
/// with their negative controls.
pub fn catalog() -> Vec<super::OpCase> {
    use super::{NegativeControl, OpCase};
    let se = |n| SqueezeExcite { ch: 4, reduced: n };
    vec![
        OpCase::f64("squeeze_excite", "C=4 r=2, N=1, 3×5", se(2), &[1, 4, 3, 5]),
        OpCase::f64("squeeze_excite", "C=4 r=2, N=3, 5×2", se(2), &[3, 4, 5, 2]).with_controls(
            vec![NegativeControl::new(
                "dx without gate⊙dy",
                "C=4 r=2, N=3, 5×2",
                &[3, 4, 5, 2],
                se(2),
                se_without_direct_term(se(2)),
                &["dx"],
            )],
        ),
        OpCase::f64("squeeze_excite", "C=4 r=1, N=2, 2×3", se(1), &[2, 4, 2, 3]),
        OpCase::exact(
            "elementwise_product",
            "relu ⊙ residual[relu] (rational), N=3, [3,2,3,5]",
            relu_times_residual(),
            &[3, 2, 3, 5],
        )
        .with_controls(product_controls()),
        OpCase::exact(
            "elementwise_product",
            "patch_embed ⊙ patch_embed P=2 1→3 (rational), N=2, 4×6",
            ElementwiseProduct {
                f: Box::new(PatchEmbed {
                    patch: 2,
                    in_ch: 1,
                    dim: 3,
                }),
                g: Box::new(PatchEmbed {
                    patch: 2,
                    in_ch: 1,
                    dim: 3,
                }),
            },
            &[2, 1, 4, 6],
        ),
        OpCase::f64(
            "elementwise_product",
            "squeeze_excite C=3 r=2 ⊙ relu (smooth × kink), N=1, 4×3",
            ElementwiseProduct {
                f: Box::new(SqueezeExcite { ch: 3, reduced: 2 }),
                g: Box::new(Relu),
            },
            &[1, 3, 4, 3],
        ),
    ]
}

// ---------------------------------------------------------------------------
// Negative controls.

/// SE whose dx keeps only the path through the squeeze and the gate.
fn se_without_direct_term(se: SqueezeExcite) -> ReplacedBackward<SqueezeExcite> {
    ReplacedBackward::new(se, "dx without gate⊙dy", |l, fb, x, p, _, dy| {
        let terms = l.backward_terms(fb, x, p, dy)?;
        Ok(Grads {
            dx: terms.through_gate,
            dparams: terms.dparams,
        })
    })
}

fn relu_times_residual() -> ElementwiseProduct {
    ElementwiseProduct {
        f: Box::new(Relu),
        g: Box::new(Residual::new(Box::new(Relu))),
    }
}

fn patch_times_patch() -> ElementwiseProduct {
    let patch = || PatchEmbed {
        patch: 2,
        in_ch: 3,
        dim: 4,
    };
    ElementwiseProduct {
        f: Box::new(patch()),
        g: Box::new(patch()),
    }
}

fn product_controls() -> Vec<super::NegativeControl> {
    use super::NegativeControl;
    vec![
        // relu ⊙ (relu + id): f(x) ≠ g(x) wherever x < 0, so f(x)⊙dy ≠ g(x)⊙dy.
        NegativeControl::new(
            "f.back(f⊙dy)",
            "relu ⊙ residual[relu] (rational), N=3, [3,2,3,5]",
            &[3, 2, 3, 5],
            relu_times_residual(),
            product_swapped_factors(relu_times_residual()),
            &["dx"],
        ),
        // Two patch embeddings with independent parameters: f's parameter
        // gradients see the wrong factor (dx is checked first and is wrong too).
        NegativeControl::new(
            "f.back(f⊙dy)",
            "patch_embed ⊙ patch_embed P=2 3→4 (rational), N=2, 4×6",
            &[2, 3, 4, 6],
            patch_times_patch(),
            product_swapped_factors(patch_times_patch()),
            &["dx", "df.W", "df.b", "df.cls", "df.pos"],
        ),
    ]
}

/// `f ⊙ g` whose backward feeds f's branch `f(x)⊙dy` (swapped factors).
fn product_swapped_factors(prod: ElementwiseProduct) -> ReplacedBackward<ElementwiseProduct> {
    ReplacedBackward::new(prod, "f.back(f⊙dy)", |l, fb, x, p, s, dy| {
        let n = l.f_param_count(fb.ty(x));
        let fx = s.children[0].output();
        let wrong = fb.mul(fx, dy)?; // bug: should be g(x)⊙dy
        let ga = l.f.backward(fb, x, &p[..n], &s.children[0], wrong)?;
        let gb = l.g.backward(fb, x, &p[n..], &s.children[1], wrong)?;
        let dx = fb.add(ga.dx, gb.dx)?;
        let mut dparams = ga.dparams;
        dparams.extend(gb.dparams);
        Ok(Grads { dx, dparams })
    })
}
