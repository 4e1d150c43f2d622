//! The points a tie is checked at and the probes drawn there: block values
//! from each block's init (scaled, and dyadic when exact), integer probes from
//! `[-PROBE_RANGE, PROBE_RANGE]` when exact, normals otherwise.

use super::{Tie, PROBE_RANGE};
use den::{Scalar, Tensor, Value};
use ir::rng::Rng;
use ir::TensorType;
use layers::Init;

/// A point: every block, as f64 values (dyadic when exact).
pub(super) struct Point {
    pub(super) blocks: Vec<Tensor<f64>>,
}

pub(super) fn shape_of(t: &TensorType) -> Vec<usize> {
    t.shape.iter().map(|&d| d as usize).collect()
}

/// Round to a multiple of 2^-k: dyadic, so exactly representable everywhere.
fn dyadic(x: f64, k: i32) -> f64 {
    let s = 2f64.powi(k);
    (x * s).round() / s
}

impl Tie<'_> {
    pub(super) fn sample_point(&self, rng: &mut Rng, scale: f64, exact: bool) -> Point {
        if let Some(at) = &self.at {
            return Point { blocks: at.clone() };
        }
        let q = |x: f64| if exact { dyadic(x, 10) } else { x };
        let blocks = self
            .blocks
            .iter()
            .map(|b| {
                let shape = shape_of(&b.ty);
                let n: usize = shape.iter().product();
                let s = if b.scaled { scale } else { 1.0 };
                let data = (0..n)
                    .map(|_| {
                        let z = rng.normal();
                        q(s * match b.init {
                            Init::Zeros => 0.1 * z,
                            Init::Ones => 1.0 + 0.25 * z,
                            Init::HeNormal { fan_in } => z * (2.0 / fan_in.max(1) as f64).sqrt(),
                            Init::Normal { std } => z * std,
                            // A constant init (1e-6) would be a degenerate point: draw around
                            // it at the scale of the ones-initialised parameters instead.
                            Init::Const { value } => value + 0.25 * z,
                        })
                    })
                    .collect();
                Tensor::new(shape, data)
            })
            .collect();
        Point { blocks }
    }

    /// The forward's arguments at a point, in order (fixed ones included).
    pub(super) fn to_values<S: Scalar>(&self, blocks: &[Tensor<f64>]) -> Vec<Value<S>> {
        let n = self.blocks.len() + self.fixed.len();
        (0..n)
            .map(|arg| {
                if let Some((b, blk)) = self.blocks.iter().enumerate().find(|(_, b)| b.arg == arg) {
                    Value::Float(
                        blocks[b].map(|&x| S::from_f64(x).expect("sampled values are finite")),
                        blk.ty.elem,
                    )
                } else {
                    let (_, t, e) = self
                        .fixed
                        .iter()
                        .find(|(a, _, _)| *a == arg)
                        .expect("every argument is a block or fixed");
                    Value::Int(t.clone(), *e)
                }
            })
            .collect()
    }

    /// Random cotangents, one per forward result (zeros for integer results).
    pub(super) fn random_outputs<S: Scalar>(&self, rng: &mut Rng, exact: bool) -> Vec<Tensor<S>> {
        self.outputs
            .iter()
            .map(|t| {
                if t.elem.is_float() {
                    self.random_like(rng, &shape_of(t), exact)
                } else {
                    Tensor::filled(shape_of(t), S::zero())
                }
            })
            .collect()
    }

    pub(super) fn random_like<S: Scalar>(
        &self,
        rng: &mut Rng,
        shape: &[usize],
        exact: bool,
    ) -> Tensor<S> {
        let n = shape.iter().product();
        let data = (0..n)
            .map(|_| {
                if exact {
                    S::from_i64(rng.int_in(PROBE_RANGE))
                } else {
                    S::from_f64(rng.normal()).expect("finite")
                }
            })
            .collect();
        Tensor::new(shape.to_vec(), data)
    }

    pub(super) fn zeros<S: Scalar>(&self) -> Vec<Tensor<S>> {
        self.block_types()
            .iter()
            .map(|t| Tensor::filled(shape_of(t), S::zero()))
            .collect()
    }
}
