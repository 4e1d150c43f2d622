//! The two sides of the adjoint identity, evaluated on the IR: J·v by the
//! forward over dual numbers (the oracle, which never runs the backward), and
//! the backward map's claimed B(x, u).

use super::Tie;
use den::{eval_func, Dual, EvalOptions, Scalar, Tensor, Value};

impl Tie<'_> {
    /// J·v (one tensor per forward result) for `tangents` (one per block) at `point`.
    #[allow(clippy::type_complexity)]
    pub(super) fn jvp<S: Scalar>(
        &self,
        point: &[Value<S>],
        tangents: &[Tensor<S>],
        record: bool,
    ) -> Result<(Vec<Tensor<S>>, Vec<den::Margin>), String> {
        let inputs = self.jvp_inputs(point, tangents);
        let opts = EvalOptions {
            fast: true,
            record_margins: record,
            replicas: 1,
        };
        let ev = eval_func::<Dual<S>>(self.module, &self.forward.name, inputs, &opts)
            .map_err(|e| e.to_string())?;
        let outs = ev
            .outputs
            .iter()
            .map(|v| match v {
                Value::Float(t, _) => t.map(|d| d.tangent.clone()),
                Value::Int(t, _) => Tensor::filled(t.shape.clone(), S::zero()),
            })
            .collect();
        let margins = if self.forward_margins_only {
            ev.margins
                .into_iter()
                .filter(|m| m.func == self.forward.name)
                .collect()
        } else {
            ev.margins
        };
        Ok((outs, margins))
    }

    /// B(a, u): one cotangent per block.
    pub(super) fn vjp<S: Scalar>(
        &self,
        point: &[Value<S>],
        u: &[Tensor<S>],
    ) -> Result<Vec<Tensor<S>>, String> {
        let inputs = self.vjp_inputs(point, u);
        let opts = EvalOptions {
            fast: true,
            ..Default::default()
        };
        let ev =
            eval_func::<S>(self.module, self.backward, inputs, &opts).map_err(|e| e.to_string())?;
        let mut outs = ev.outputs;
        self.blocks
            .iter()
            .map(|b| {
                let v = std::mem::replace(
                    outs.get_mut(b.bwd_out)
                        .ok_or_else(|| format!("backward has no result {}", b.bwd_out))?,
                    Value::Int(Tensor::filled(vec![], 0), ir::ElemType::I1),
                );
                v.into_float().ok_or_else(|| {
                    format!("backward result {} ({}) is not float", b.bwd_out, b.name)
                })
            })
            .collect()
    }

    /// The forward's inputs for J·v: the point, each float argument carrying
    /// its block's tangent.
    pub(super) fn jvp_inputs<S: Scalar>(
        &self,
        point: &[Value<S>],
        tangents: &[Tensor<S>],
    ) -> Vec<Value<Dual<S>>> {
        point
            .iter()
            .enumerate()
            .map(|(arg, p)| match p {
                Value::Float(pt, elem) => {
                    let b = self
                        .blocks
                        .iter()
                        .position(|b| b.arg == arg)
                        .expect("float arguments are blocks");
                    let data = pt
                        .data
                        .iter()
                        .zip(&tangents[b].data)
                        .map(|(a, t)| Dual::new(a.clone(), t.clone()))
                        .collect();
                    Value::Float(Tensor::new(pt.shape.clone(), data), *elem)
                }
                Value::Int(t, e) => Value::Int(t.clone(), *e),
            })
            .collect()
    }

    /// The backward's inputs for B(u): the point, then one cotangent per
    /// forward result (zeros of an integer result's type).
    fn vjp_inputs<S: Scalar>(&self, point: &[Value<S>], u: &[Tensor<S>]) -> Vec<Value<S>> {
        let mut inputs = point.to_vec();
        for (t, ty) in u.iter().zip(&self.outputs) {
            inputs.push(if ty.elem.is_float() {
                Value::Float(t.clone(), ty.elem)
            } else {
                Value::Int(Tensor::filled(t.shape.clone(), 0), ty.elem)
            });
        }
        inputs
    }

    /// Where the non-finite values of the forward's J·v at `tangents` (or, with
    /// `u`, of the backward's B(u)) began: op, function, line and element.
    pub(super) fn non_finite_origin<S: Scalar>(
        &self,
        point: &[Value<S>],
        tangents: &[Tensor<S>],
        u: Option<&[Tensor<S>]>,
    ) -> String {
        let opts = EvalOptions {
            fast: false,
            record_margins: true,
            replicas: 1,
        };
        let (side, origin) = match u {
            None => (
                "the forward's J·v",
                eval_func::<Dual<S>>(
                    self.module,
                    &self.forward.name,
                    self.jvp_inputs(point, tangents),
                    &opts,
                )
                .map(|ev| ev.first_non_finite),
            ),
            Some(u) => (
                "the backward",
                eval_func::<S>(self.module, self.backward, self.vjp_inputs(point, u), &opts)
                    .map(|ev| ev.first_non_finite),
            ),
        };
        match origin {
            Ok(Some(at)) => format!("{side} became non-finite at {at}"),
            Ok(None) => format!("{side} is non-finite (from a non-finite input)"),
            Err(e) => format!("{side} is non-finite; re-evaluating it failed: {e}"),
        }
    }
}
