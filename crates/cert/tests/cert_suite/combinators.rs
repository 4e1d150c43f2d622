//! Ties of the combinators on small layers, and the negative controls that
//! inject shape-preserving composition bugs.

use crate::common;

use cert::{certify_layer, TieOptions, Verdict};
use ir::{FuncBuilder, TensorType, ValueId};
use layers::emit::EmitResult;
use layers::ops::activation::Relu;
use layers::{
    compose, CertLayer, Emit, Grads, LayerError, ReplacedBackward, Residual, Saved, Sites,
};

fn t(shape: &[i64]) -> TensorType {
    TensorType::f32(shape.to_vec())
}

#[test]
fn relu_is_certified_exactly() {
    let r = certify_layer(&Relu, &t(&[2, 3, 4]), &TieOptions::default());
    assert!(r.certified(), "{:?}", r.verdict);
    assert_eq!(r.evidence, cert::Evidence::Exact);
    assert!(r.min_margin.as_ref().unwrap().margin > 0.0);
    assert_eq!(r.min_margin.as_ref().unwrap().site, "pre_relu");
}

/// ReLU whose backward passes the cotangent through unmasked (the relu
/// catalog entry's control, activation.rs).
#[test]
fn relu_without_mask_is_refuted() {
    let cases = layers::ops::activation::catalog();
    let (_, ctl) = common::controls_named(&cases, "relu", "no mask")[0];
    assert_eq!(ctl.input.shape, [2, 3, 4]);
    let r = certify_layer(ctl.layer.as_ref(), &ctl.input, &TieOptions::default());
    match &r.verdict {
        Verdict::Refuted { block, .. } => assert_eq!(block, "dx"),
        v => panic!("expected refutation, got {v:?}"),
    }
}

/// A scale-by-constant layer (linear, endomorphic), so that composing it with
/// ReLU makes "backward at the wrong point" observable.
struct Shift(f64);
impl CertLayer for Shift {
    fn name(&self) -> String {
        format!("shift {}", self.0)
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
        let c = fb.splat_like(self.0, x);
        Ok(Saved::leaf(fb.add(x, c)?))
    }
    fn backward(
        &self,
        _: &mut FuncBuilder,
        _: ValueId,
        _: &[ValueId],
        _: &Saved,
        dy: ValueId,
    ) -> EmitResult<Grads> {
        Ok(Grads {
            dx: dy,
            dparams: vec![],
        })
    }
}

#[test]
fn comp_and_residual_are_certified() {
    let c = compose(Box::new(Shift(0.5)), Box::new(Relu));
    let r = certify_layer(&c, &t(&[3, 5]), &TieOptions::default());
    assert!(r.certified(), "{:?}", r.verdict);
    let res = Residual::new(Box::new(c));
    let r = certify_layer(&res, &t(&[3, 5]), &TieOptions::default());
    assert!(r.certified(), "{:?}", r.verdict);
}

/// `compose` with the second layer's backward evaluated at x instead of the
/// first layer's output (docs/conventions.md §14's injected bug).
struct CompAtWrongPoint(Shift, Relu);
impl CertLayer for CompAtWrongPoint {
    fn name(&self) -> String {
        "compose (second backward at x)".into()
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
        let a = self.0.forward(fb, x, p, s)?;
        let b = self.1.forward(fb, a.output(), p, s)?;
        Ok(Saved {
            output: b.output,
            values: vec![],
            children: vec![a, b],
        })
    }
    fn backward(
        &self,
        fb: &mut FuncBuilder,
        x: ValueId,
        p: &[ValueId],
        s: &Saved,
        dy: ValueId,
    ) -> EmitResult<Grads> {
        let g2 = self.1.backward(fb, x, p, &s.children[1], dy)?;
        self.0.backward(fb, x, p, &s.children[0], g2.dx)
    }
}

#[test]
fn comp_at_wrong_point_is_refuted() {
    let r = certify_layer(
        &CompAtWrongPoint(Shift(0.5), Relu),
        &t(&[3, 5]),
        &TieOptions::default(),
    );
    assert!(
        matches!(r.verdict, Verdict::Refuted { .. }),
        "{:?}",
        r.verdict
    );
}

/// A residual whose backward forgets the skip term.
fn residual_no_skip() -> ReplacedBackward<Residual> {
    let res = Residual::new(Box::new(Relu));
    ReplacedBackward::new(res, "no skip in backward", |r, fb, x, p, s, dy| {
        r.body.backward(fb, x, p, &s.children[0], dy)
    })
}

#[test]
fn residual_missing_skip_is_refuted() {
    let r = certify_layer(&residual_no_skip(), &t(&[2, 7]), &TieOptions::default());
    assert!(
        matches!(r.verdict, Verdict::Refuted { .. }),
        "{:?}",
        r.verdict
    );
}

/// A forward that always sits on a ReLU kink (its pre-activation is x·0):
/// the certifier must not certify it, and must name the site.
#[test]
fn a_point_on_a_kink_is_not_certified_and_names_the_site() {
    let c = compose(Box::new(Shift(0.0)), Box::new(Relu));
    // Shift(0) keeps x, so build the kink with a layer that zeroes x instead.
    struct Zero;
    impl CertLayer for Zero {
        fn name(&self) -> String {
            "zero".into()
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
            let z = fb.splat_like(0.0, x);
            Ok(Saved::leaf(fb.mul(x, z)?))
        }
        fn backward(
            &self,
            fb: &mut FuncBuilder,
            x: ValueId,
            _: &[ValueId],
            _: &Saved,
            _: ValueId,
        ) -> EmitResult<Grads> {
            Ok(Grads {
                dx: fb.splat_like(0.0, x),
                dparams: vec![],
            })
        }
    }
    assert!(certify_layer(&c, &t(&[2, 3]), &TieOptions::default()).certified());
    let on_kink = compose(Box::new(Zero), Box::new(Relu));
    let r = certify_layer(&on_kink, &t(&[2, 3]), &TieOptions::default());
    match &r.verdict {
        Verdict::Undecided { reason } => {
            assert!(
                reason.contains("kink at 1.pre_relu[0], margin 0"),
                "{reason}"
            )
        }
        v => panic!("expected undecided, got {v:?}"),
    }
}
