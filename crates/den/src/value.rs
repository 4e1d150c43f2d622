//! Runtime values of the evaluator: a float tensor over the scalar `S`, or an
//! integer tensor (i1 stored as 0/1), each tagged with its StableHLO element type.

use crate::scalar::{NotExact, Scalar};
use crate::tensor::Tensor;
use ir::{ElemType, TensorType};

#[derive(Clone, Debug, PartialEq)]
pub enum Value<S> {
    /// Element type is a float type.
    Float(Tensor<S>, ElemType),
    /// Element type is an integer type (i1 included, as 0/1; unsigned values
    /// up to 2⁶³−1, ui64 beyond that as its two's-complement bit pattern).
    Int(Tensor<i64>, ElemType),
}

impl<S: Scalar> Value<S> {
    pub fn elem(&self) -> ElemType {
        match self {
            Value::Float(_, e) | Value::Int(_, e) => *e,
        }
    }

    pub fn shape(&self) -> &[usize] {
        match self {
            Value::Float(t, _) => &t.shape,
            Value::Int(t, _) => &t.shape,
        }
    }

    pub fn len(&self) -> usize {
        self.shape().iter().product()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    pub fn ty(&self) -> TensorType {
        TensorType::new(
            self.shape().iter().map(|&d| d as i64).collect::<Vec<_>>(),
            self.elem(),
        )
    }

    pub fn as_float(&self) -> Option<&Tensor<S>> {
        match self {
            Value::Float(t, _) => Some(t),
            Value::Int(..) => None,
        }
    }

    pub fn as_int(&self) -> Option<&Tensor<i64>> {
        match self {
            Value::Int(t, _) => Some(t),
            Value::Float(..) => None,
        }
    }

    pub fn into_float(self) -> Option<Tensor<S>> {
        match self {
            Value::Float(t, _) => Some(t),
            Value::Int(..) => None,
        }
    }

    /// A float value from f64 data (converted with `S::from_f64`, no rounding).
    pub fn from_f64_tensor(t: &Tensor<f64>, elem: ElemType) -> Result<Self, NotExact> {
        assert!(
            elem.is_float(),
            "from_f64_tensor needs a float element type"
        );
        let data = t
            .data
            .iter()
            .map(|&x| S::from_f64(x))
            .collect::<Result<Vec<_>, _>>()?;
        Ok(Value::Float(Tensor::new(t.shape.clone(), data), elem))
    }

    /// A float value from f32 data.
    pub fn from_f32_tensor(t: &Tensor<f32>, elem: ElemType) -> Result<Self, NotExact> {
        assert!(
            elem.is_float(),
            "from_f32_tensor needs a float element type"
        );
        let data = t
            .data
            .iter()
            .map(|&x| S::from_f64(x as f64))
            .collect::<Result<Vec<_>, _>>()?;
        Ok(Value::Float(Tensor::new(t.shape.clone(), data), elem))
    }

    /// The primal values as f64 (integers converted).
    pub fn to_f64_tensor(&self) -> Tensor<f64> {
        match self {
            Value::Float(t, _) => t.map(|x| x.to_f64()),
            Value::Int(t, e) => t.map(|&x| int_to_f64(x, *e)),
        }
    }

    /// The primal values rounded to f32.
    pub fn to_f32_tensor(&self) -> Tensor<f32> {
        self.to_f64_tensor().map(|&x| x as f32)
    }

    /// The same value over another scalar type (e.g. f32 → `Dual<f64>`);
    /// integer values are unchanged.
    pub fn map_scalar<T: Scalar>(&self, f: impl FnMut(&S) -> T) -> Value<T> {
        match self {
            Value::Float(t, e) => Value::Float(t.map(f), *e),
            Value::Int(t, e) => Value::Int(t.clone(), *e),
        }
    }
}

impl<S> Value<S> {
    /// An integer value (data already in range for `elem`).
    pub fn int(t: Tensor<i64>, elem: ElemType) -> Self {
        assert!(
            elem.is_integer(),
            "Value::int needs an integer element type"
        );
        Value::Int(t, elem)
    }
}

/// An integer stored in the evaluator's i64 as f64 (ui64 reinterpreted unsigned).
pub fn int_to_f64(x: i64, elem: ElemType) -> f64 {
    if elem == ElemType::UI64 {
        x as u64 as f64
    } else {
        x as f64
    }
}
