//! Dispatch from the generic evaluator to the fast f32 kernels in
//! `crate::fast`. Each function answers `None` unless the scalar is `f32`, every
//! tensor involved is f32-typed (no bf16/f16 rounding to apply) and the op's
//! regions are the ones the kernel implements; the caller then takes the
//! generic path.

use crate::fast::{self, ReduceKind};
use crate::scalar::Scalar;
use crate::tensor::Tensor;
use crate::value::Value;
use ir::{BinaryOp, CompareDirection, ElemType, TensorType};
use std::any::Any;

fn as_f32<S: Scalar>(t: &Tensor<S>) -> Option<&Tensor<f32>> {
    (t as &dyn Any).downcast_ref::<Tensor<f32>>()
}

fn from_f32<S: Scalar>(t: Tensor<f32>) -> Option<Tensor<S>> {
    let b: Box<dyn Any> = Box::new(t);
    b.downcast::<Tensor<S>>().ok().map(|b| *b)
}

fn f32_value<S: Scalar>(v: &Value<S>) -> Option<&Tensor<f32>> {
    match v {
        Value::Float(t, ElemType::F32) => as_f32(t),
        _ => None,
    }
}

fn out_shape(ty: &TensorType) -> Option<Vec<usize>> {
    (ty.elem == ElemType::F32).then(|| ty.shape.iter().map(|&d| d as usize).collect())
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

/// Operand element types are checked by the caller's value types: these
/// tensors come from f32-typed values only when the scalar is f32, and the
/// result type must be f32 too.
pub fn dot_general<S: Scalar>(
    lhs: &Tensor<S>,
    rhs: &Tensor<S>,
    dims: &ir::DotDims,
    ty: &TensorType,
) -> Option<Tensor<S>> {
    let shape = out_shape(ty)?;
    from_f32(fast::dot_general(as_f32(lhs)?, as_f32(rhs)?, dims, &shape))
}

pub fn convolution<S: Scalar>(
    lhs: &Tensor<S>,
    rhs: &Tensor<S>,
    attrs: &ir::ConvAttrs,
    ty: &TensorType,
) -> Option<Tensor<S>> {
    let shape = out_shape(ty)?;
    from_f32(fast::convolution(as_f32(lhs)?, as_f32(rhs)?, attrs, &shape))
}

pub fn reduce<S: Scalar>(
    input: &Value<S>,
    init: &Value<S>,
    reducer: Option<BinaryOp>,
    dims: &[usize],
    ty: &TensorType,
) -> Option<Value<S>> {
    let shape = out_shape(ty)?;
    let k = kind(reducer)?;
    let r = fast::reduce(f32_value(input)?, f32_value(init)?.data[0], k, dims, &shape);
    Some(Value::Float(from_f32(r)?, ElemType::F32))
}

pub fn reduce_window<S: Scalar>(
    input: &Value<S>,
    init: &Value<S>,
    reducer: Option<BinaryOp>,
    attrs: &ir::WindowAttrs,
    ty: &TensorType,
) -> Option<Value<S>> {
    let shape = out_shape(ty)?;
    let k = kind(reducer)?;
    let r = fast::reduce_window(
        f32_value(input)?,
        f32_value(init)?.data[0],
        k,
        attrs,
        &shape,
    );
    Some(Value::Float(from_f32(r)?, ElemType::F32))
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
    let x = f32_value(operand)?;
    let r = fast::select_and_scatter(
        x,
        f32_value(source)?,
        f32_value(init)?.data[0],
        selector?,
        attrs,
        &x.shape,
    );
    Some(Value::Float(from_f32(r)?, ElemType::F32))
}
