//! Dispatch from the generic evaluator to the fast kernels in `crate::fast`,
//! for three scalars:
//!
//! * `f32`, when every tensor involved is f32-typed (no bf16/f16 rounding to
//!   apply);
//! * `f64` (the real-number proxy: it never rounds, so any float element type);
//! * `Dual<f64>` (forward mode, any float element type), split into value and
//!   tangent tensors: convolution and dot_general are bilinear, so
//!   `K(x, w) = K(x_v, w_v) + (K(x_t, w_v) + K(x_v, w_t))·ε`, with a term left
//!   out when its tangent is entirely zero (a block probe perturbs one
//!   parameter; constants have no tangent) and the other operand is finite (so
//!   the term is exactly zero, as `0 · x` is for finite `x`); add-reductions
//!   reduce value and tangent separately; max/min folds choose by the value
//!   (the generic rule, first maximum in scan order) and carry the chosen
//!   element's tangent; select_and_scatter selects by the operand's value and
//!   scatters the source's value and tangent.
//!
//! Each function answers `None` when the scalar, the element types or the op's
//! regions are not ones a kernel implements; the caller then takes the generic
//! path. Decision ops are only dispatched when no margins are recorded (the
//! caller's `fast_ok`).

use super::par;
use crate::fast::{self, FastFloat, ReduceKind};
use crate::scalar::{Dual, Scalar};
use crate::tensor::Tensor;
use crate::value::Value;
use ir::{BinaryOp, CompareDirection, ElemType, TensorType};
use std::any::Any;

/// A float tensor of the evaluator, by the scalar the kernels see.
enum Lane<'a> {
    F32(&'a Tensor<f32>),
    F64(&'a Tensor<f64>),
    Dual(&'a Tensor<Dual<f64>>),
}

fn lane<S: Scalar>(t: &Tensor<S>) -> Option<Lane<'_>> {
    let t = t as &dyn Any;
    if let Some(t) = t.downcast_ref::<Tensor<f32>>() {
        Some(Lane::F32(t))
    } else if let Some(t) = t.downcast_ref::<Tensor<f64>>() {
        Some(Lane::F64(t))
    } else {
        t.downcast_ref::<Tensor<Dual<f64>>>().map(Lane::Dual)
    }
}

/// The kernel result as the evaluator's tensor (`T` is `S` by construction).
fn back<T: 'static, S: Scalar>(t: Tensor<T>) -> Option<Tensor<S>> {
    let b: Box<dyn Any> = Box::new(t);
    b.downcast::<Tensor<S>>().ok().map(|b| *b)
}

/// The scalar of a rank-0 init value, by the same scalar as `lane`.
fn scalar_of<T: Clone + 'static, S: Scalar>(v: &Value<S>) -> Option<T> {
    let t = float_value(v)?;
    (t as &dyn Any)
        .downcast_ref::<Tensor<T>>()?
        .data
        .first()
        .cloned()
}

/// The result shape, when the kernels may produce a result of type `ty` for
/// this scalar: f32 only for f32 results (no narrower rounding), f64 and duals
/// for any float type (they never round).
fn out_shape<S: Scalar>(ty: &TensorType) -> Option<Vec<usize>> {
    let is_f32 = (&0f32 as &dyn Any).type_id() == std::any::TypeId::of::<S>();
    let ok = if is_f32 {
        ty.elem == ElemType::F32
    } else {
        ty.elem.is_float()
    };
    ok.then(|| ty.shape.iter().map(|&d| d as usize).collect())
}

/// A float value's tensor, when its element type suits the scalar (f32: f32 only).
fn float_value<S: Scalar>(v: &Value<S>) -> Option<&Tensor<S>> {
    match v {
        Value::Float(t, e) => match lane(t)? {
            Lane::F32(_) if *e != ElemType::F32 => None,
            _ => Some(t),
        },
        Value::Int(..) => None,
    }
}

fn kind(op: Option<BinaryOp>) -> Option<ReduceKind> {
    match op? {
        BinaryOp::Add => Some(ReduceKind::Add),
        BinaryOp::Maximum => Some(ReduceKind::Max),
        BinaryOp::Minimum => Some(ReduceKind::Min),
        BinaryOp::Multiply => Some(ReduceKind::Mul),
        _ => None,
    }
}

/// A dual tensor as value and tangent tensors; `tangent` is `None` when every
/// tangent is zero, and `finite` says whether every value is finite.
struct Split {
    value: Tensor<f64>,
    tangent: Option<Tensor<f64>>,
    finite: bool,
}

fn split(t: &Tensor<Dual<f64>>) -> Split {
    let d = &t.data;
    let value = par::collect_ok(d.len(), |i| d[i].value);
    let finite = value.iter().all(|v| v.is_finite());
    let zero_tangent = d.iter().all(|x| x.tangent == 0.0);
    let tangent = (!zero_tangent)
        .then(|| Tensor::new(t.shape.clone(), par::collect_ok(d.len(), |i| d[i].tangent)));
    Split {
        value: Tensor::new(t.shape.clone(), value),
        tangent,
        finite,
    }
}

/// `value + tangent·ε` elementwise (a missing tangent is zero).
fn join(value: Tensor<f64>, tangent: Option<Tensor<f64>>) -> Tensor<Dual<f64>> {
    let v = &value.data;
    let data = match tangent {
        Some(t) => {
            debug_assert_eq!(t.shape, value.shape);
            par::collect_ok(v.len(), |i| Dual::new(v[i], t.data[i]))
        }
        None => par::collect_ok(v.len(), |i| Dual::new(v[i], 0.0)),
    };
    Tensor::new(value.shape, data)
}

fn add_into(acc: Option<Tensor<f64>>, t: Tensor<f64>) -> Tensor<f64> {
    match acc {
        None => t,
        Some(mut a) => {
            for (x, y) in a.data.iter_mut().zip(&t.data) {
                *x += y;
            }
            a
        }
    }
}

/// A bilinear kernel `k` over duals: `k(x_v, w_v) + (k(x_t, w_v) + k(x_v, w_t))·ε`.
/// A term whose tangent is zero is skipped when the other operand is finite;
/// otherwise it is computed with a zero tangent, so `0 · ∞ = NaN` shows up as
/// in the generic path.
fn bilinear(
    x: &Tensor<Dual<f64>>,
    w: &Tensor<Dual<f64>>,
    k: impl Fn(&Tensor<f64>, &Tensor<f64>) -> Tensor<f64>,
) -> Tensor<Dual<f64>> {
    let (x, w) = (split(x), split(w));
    let value = k(&x.value, &w.value);
    let zeros = |t: &Tensor<f64>| Tensor::filled(t.shape.clone(), 0.0);
    let mut tangent = None;
    match (&x.tangent, w.finite) {
        (Some(xt), _) => tangent = Some(k(xt, &w.value)),
        (None, false) => tangent = Some(k(&zeros(&x.value), &w.value)),
        (None, true) => {}
    }
    match (&w.tangent, x.finite) {
        (Some(wt), _) => tangent = Some(add_into(tangent, k(&x.value, wt))),
        (None, false) => tangent = Some(add_into(tangent, k(&x.value, &zeros(&w.value)))),
        (None, true) => {}
    }
    join(value, tangent)
}

/// Runs the bilinear kernel `k` on the operands' scalar (f32, f64 or duals).
fn dispatch_bilinear<S: Scalar>(
    lhs: &Tensor<S>,
    rhs: &Tensor<S>,
    k32: impl Fn(&Tensor<f32>, &Tensor<f32>) -> Tensor<f32>,
    k64: impl Fn(&Tensor<f64>, &Tensor<f64>) -> Tensor<f64>,
) -> Option<Tensor<S>> {
    match (lane(lhs)?, lane(rhs)?) {
        (Lane::F32(x), Lane::F32(w)) => back(k32(x, w)),
        (Lane::F64(x), Lane::F64(w)) => back(k64(x, w)),
        (Lane::Dual(x), Lane::Dual(w)) => back(bilinear(x, w, k64)),
        _ => None,
    }
}

/// Operand element types are checked by the caller's value types: these
/// tensors come from f32-typed values only when the scalar is f32, and the
/// result type must be f32 too.
pub fn dot_general<S: Scalar>(
    lhs: &Tensor<S>,
    rhs: &Tensor<S>,
    dims: &ir::DotDims,
    ty: &TensorType,
) -> Option<Tensor<S>> {
    let shape = out_shape::<S>(ty)?;
    dispatch_bilinear(
        lhs,
        rhs,
        |x, w| fast::dot_general(x, w, dims, &shape),
        |x, w| fast::dot_general(x, w, dims, &shape),
    )
}

pub fn convolution<S: Scalar>(
    lhs: &Tensor<S>,
    rhs: &Tensor<S>,
    attrs: &ir::ConvAttrs,
    ty: &TensorType,
) -> Option<Tensor<S>> {
    let shape = out_shape::<S>(ty)?;
    dispatch_bilinear(
        lhs,
        rhs,
        |x, w| fast::convolution(x, w, attrs, &shape),
        |x, w| fast::convolution(x, w, attrs, &shape),
    )
}

/// A max/min fold over duals from the choices a `*_choices` kernel made on
/// the values: each output is the chosen element, or `init`.
fn chosen(
    x: &Tensor<Dual<f64>>,
    init: &Dual<f64>,
    choices: Vec<Option<usize>>,
    shape: Vec<usize>,
) -> Tensor<Dual<f64>> {
    let data = choices
        .into_iter()
        .map(|c| c.map_or_else(|| init.clone(), |i| x.data[i].clone()))
        .collect();
    Tensor::new(shape, data)
}

/// A reduction over duals: add-reductions run on value and tangent separately
/// (`sum` is the f64 kernel with its init), max/min by `choose` on the values.
fn dual_reduction(
    x: &Tensor<Dual<f64>>,
    init: &Dual<f64>,
    k: ReduceKind,
    shape: Vec<usize>,
    sum: impl Fn(&Tensor<f64>, f64) -> Tensor<f64>,
    choose: impl Fn(&Tensor<f64>, f64) -> Vec<Option<usize>>,
) -> Option<Tensor<Dual<f64>>> {
    match k {
        ReduceKind::Add => {
            let s = split(x);
            let value = sum(&s.value, init.value);
            let tangent = match s.tangent {
                Some(t) => Some(sum(&t, init.tangent)),
                None if init.tangent != 0.0 => {
                    Some(sum(&Tensor::filled(x.shape.clone(), 0.0), init.tangent))
                }
                None => None,
            };
            Some(join(value, tangent))
        }
        ReduceKind::Max | ReduceKind::Min => {
            let values = Tensor::new(x.shape.clone(), x.data.iter().map(|d| d.value).collect());
            Some(chosen(x, init, choose(&values, init.value), shape))
        }
        // A product's tangent is not a product of tangents: generic path.
        ReduceKind::Mul => None,
    }
}

/// Runs a reduction (`reduce` or `reduce_window`) given its f32/f64 kernels
/// `fold` and max/min choice kernel `choose`.
fn dispatch_reduction<S: Scalar>(
    input: &Value<S>,
    init: &Value<S>,
    k: ReduceKind,
    ty: &TensorType,
    fold32: impl Fn(&Tensor<f32>, f32) -> Tensor<f32>,
    fold64: impl Fn(&Tensor<f64>, f64) -> Tensor<f64>,
    choose: impl Fn(&Tensor<f64>, f64) -> Vec<Option<usize>>,
) -> Option<Value<S>> {
    let shape = out_shape::<S>(ty)?;
    let t = match lane(float_value(input)?)? {
        Lane::F32(x) => back(fold32(x, scalar_of::<f32, S>(init)?))?,
        Lane::F64(x) => back(fold64(x, scalar_of::<f64, S>(init)?))?,
        Lane::Dual(x) => {
            let i = scalar_of::<Dual<f64>, S>(init)?;
            back(dual_reduction(x, &i, k, shape.clone(), fold64, choose)?)?
        }
    };
    Some(Value::Float(t, ty.elem))
}

pub fn reduce<S: Scalar>(
    input: &Value<S>,
    init: &Value<S>,
    reducer: Option<BinaryOp>,
    dims: &[usize],
    ty: &TensorType,
) -> Option<Value<S>> {
    let shape = out_shape::<S>(ty)?;
    let k = kind(reducer)?;
    dispatch_reduction(
        input,
        init,
        k,
        ty,
        |x, i| fast::reduce(x, i, k, dims, &shape),
        |x, i| fast::reduce(x, i, k, dims, &shape),
        |x, i| fast::reduce_choices(x, i, k, dims, &shape),
    )
}

pub fn reduce_window<S: Scalar>(
    input: &Value<S>,
    init: &Value<S>,
    reducer: Option<BinaryOp>,
    attrs: &ir::WindowAttrs,
    ty: &TensorType,
) -> Option<Value<S>> {
    let shape = out_shape::<S>(ty)?;
    let k = kind(reducer)?;
    dispatch_reduction(
        input,
        init,
        k,
        ty,
        |x, i| fast::reduce_window(x, i, k, attrs, &shape),
        |x, i| fast::reduce_window(x, i, k, attrs, &shape),
        |x, i| fast::reduce_window_choices(x, i, k, attrs, &shape),
    )
}

/// select_and_scatter on one kernel scalar: `sas(operand, source, init)`.
fn scatter_with<T: FastFloat>(
    x: &Tensor<T>,
    s: &Tensor<T>,
    init: T,
    selector: CompareDirection,
    attrs: &ir::ScatterWindowAttrs,
) -> Tensor<T> {
    fast::select_and_scatter(x, s, init, selector, attrs, &x.shape)
}

pub fn select_and_scatter<S: Scalar>(
    operand: &Value<S>,
    source: &Value<S>,
    init: &Value<S>,
    selector: Option<CompareDirection>,
    scatter: Option<BinaryOp>,
    attrs: &ir::ScatterWindowAttrs,
) -> Option<Value<S>> {
    if scatter != Some(BinaryOp::Add) {
        return None;
    }
    let selector = selector?;
    let elem = operand.elem();
    let (x, s) = (float_value(operand)?, float_value(source)?);
    let t = match (lane(x)?, lane(s)?) {
        (Lane::F32(x), Lane::F32(s)) => back(scatter_with(
            x,
            s,
            scalar_of::<f32, S>(init)?,
            selector,
            attrs,
        ))?,
        (Lane::F64(x), Lane::F64(s)) => back(scatter_with(
            x,
            s,
            scalar_of::<f64, S>(init)?,
            selector,
            attrs,
        ))?,
        (Lane::Dual(x), Lane::Dual(s)) => {
            let init = scalar_of::<Dual<f64>, S>(init)?;
            // The selection depends on the operand's values only; the scatter
            // adds value and tangent parts separately.
            let xv = Tensor::new(x.shape.clone(), x.data.iter().map(|d| d.value).collect());
            let src = split(s);
            let value = scatter_with(&xv, &src.value, init.value, selector, attrs);
            let tangent = match src.tangent {
                Some(st) => Some(scatter_with(&xv, &st, init.tangent, selector, attrs)),
                None if init.tangent != 0.0 => Some(Tensor::filled(x.shape.clone(), init.tangent)),
                None => None,
            };
            back(join(value, tangent))?
        }
        _ => return None,
    };
    Some(Value::Float(t, elem))
}
