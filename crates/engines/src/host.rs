//! Host-side tensors exchanged with every engine (native, PJRT, IREE): a
//! row-major shape and a typed data vector, with conversions to and from the
//! evaluator's values.

use crate::error::EngineError;
use den::tensor::Tensor;
use den::value::Value;
use ir::ElemType;

/// Element data of a host tensor, row-major.
#[derive(Clone, Debug, PartialEq)]
pub enum HostData {
    F32(Vec<f32>),
    I32(Vec<i32>),
    I64(Vec<i64>),
}

/// A dense row-major tensor on the host.
#[derive(Clone, Debug, PartialEq)]
pub struct HostTensor {
    pub shape: Vec<i64>,
    pub data: HostData,
}

impl HostData {
    pub fn len(&self) -> usize {
        match self {
            HostData::F32(v) => v.len(),
            HostData::I32(v) => v.len(),
            HostData::I64(v) => v.len(),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The StableHLO element type of this data.
    pub fn elem(&self) -> ElemType {
        match self {
            HostData::F32(_) => ElemType::F32,
            HostData::I32(_) => ElemType::I32,
            HostData::I64(_) => ElemType::I64,
        }
    }
}

impl HostTensor {
    pub fn f32(shape: Vec<i64>, data: Vec<f32>) -> Self {
        HostTensor {
            shape,
            data: HostData::F32(data),
        }
    }

    pub fn i32(shape: Vec<i64>, data: Vec<i32>) -> Self {
        HostTensor {
            shape,
            data: HostData::I32(data),
        }
    }

    pub fn i64(shape: Vec<i64>, data: Vec<i64>) -> Self {
        HostTensor {
            shape,
            data: HostData::I64(data),
        }
    }

    /// Product of the dimensions (1 for a scalar).
    pub fn num_elements(&self) -> usize {
        self.shape.iter().map(|&d| d.max(0) as usize).product()
    }

    /// Checks that the shape is non-negative and matches the data length.
    pub fn validate(&self) -> Result<(), EngineError> {
        if let Some(d) = self.shape.iter().find(|&&d| d < 0) {
            return Err(EngineError(format!(
                "host tensor has a negative dimension {d} in shape {:?}",
                self.shape
            )));
        }
        if self.num_elements() != self.data.len() {
            return Err(EngineError(format!(
                "host tensor of shape {:?} needs {} elements, has {}",
                self.shape,
                self.num_elements(),
                self.data.len()
            )));
        }
        Ok(())
    }

    /// The f32 data, or an error naming what it is instead.
    pub fn as_f32(&self) -> Result<&[f32], EngineError> {
        match &self.data {
            HostData::F32(v) => Ok(v),
            other => Err(EngineError(format!(
                "expected f32 data, found {:?}",
                other.elem()
            ))),
        }
    }

    /// The tensor as an evaluator value of element type `elem` (f32 data only
    /// for float types; integer data for integer types, i1 from 0/1 values).
    pub fn to_value_f32(&self, elem: ElemType) -> Result<Value<f32>, EngineError> {
        self.validate()?;
        let shape: Vec<usize> = self.shape.iter().map(|&d| d as usize).collect();
        match (&self.data, elem.is_float()) {
            (HostData::F32(v), true) => Ok(Value::Float(Tensor::new(shape, v.clone()), elem)),
            (HostData::I32(v), false) => Ok(Value::Int(
                Tensor::new(shape, v.iter().map(|&x| x as i64).collect()),
                elem,
            )),
            (HostData::I64(v), false) => Ok(Value::Int(Tensor::new(shape, v.clone()), elem)),
            (d, _) => Err(EngineError(format!(
                "cannot pass {:?} host data as {elem:?}",
                d.elem()
            ))),
        }
    }

    /// [`HostTensor::to_value_f32`] taking the tensor: f32 and i64 data move
    /// into the value instead of being copied (a ViT-Tiny step's 23 MB of
    /// parameters, every step).
    pub fn into_value_f32(self, elem: ElemType) -> Result<Value<f32>, EngineError> {
        self.validate()?;
        let shape: Vec<usize> = self.shape.iter().map(|&d| d as usize).collect();
        match (self.data, elem.is_float()) {
            (HostData::F32(v), true) => Ok(Value::Float(Tensor::new(shape, v), elem)),
            (HostData::I64(v), false) => Ok(Value::Int(Tensor::new(shape, v), elem)),
            (data, _) => HostTensor {
                shape: self.shape,
                data,
            }
            .to_value_f32(elem),
        }
    }

    /// [`HostTensor::from_value_f32`] taking the value: f32 and i64 data
    /// move instead of being copied.
    pub fn from_value_f32_owned(v: Value<f32>) -> HostTensor {
        let shape: Vec<i64> = v.shape().iter().map(|&d| d as i64).collect();
        match v {
            Value::Float(t, _) => HostTensor::f32(shape, t.data),
            Value::Int(t, ElemType::I64 | ElemType::UI64) => HostTensor::i64(shape, t.data),
            v => HostTensor::from_value_f32(&v),
        }
    }

    /// An evaluator value as a host tensor: floats as f32, i64/ui64 as i64,
    /// every other integer type (i1 as 0/1) as i32.
    pub fn from_value_f32(v: &Value<f32>) -> HostTensor {
        let shape: Vec<i64> = v.shape().iter().map(|&d| d as i64).collect();
        match v {
            Value::Float(t, _) => HostTensor::f32(shape, t.data.clone()),
            Value::Int(t, ElemType::I64 | ElemType::UI64) => HostTensor::i64(shape, t.data.clone()),
            Value::Int(t, _) => HostTensor::i32(shape, t.data.iter().map(|&x| x as i32).collect()),
        }
    }
}
