//! Element and tensor types of the StableHLO subset (static shapes only).

use std::fmt;

/// Element types certgrad reads and writes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ElemType {
    F16,
    BF16,
    F32,
    F64,
    I1,
    I8,
    I16,
    I32,
    I64,
    UI8,
    UI16,
    UI32,
    UI64,
}

impl ElemType {
    pub const ALL: [ElemType; 13] = [
        ElemType::F16,
        ElemType::BF16,
        ElemType::F32,
        ElemType::F64,
        ElemType::I1,
        ElemType::I8,
        ElemType::I16,
        ElemType::I32,
        ElemType::I64,
        ElemType::UI8,
        ElemType::UI16,
        ElemType::UI32,
        ElemType::UI64,
    ];

    /// The MLIR spelling (`f32`, `bf16`, `i1`, …).
    pub fn mnemonic(self) -> &'static str {
        match self {
            ElemType::F16 => "f16",
            ElemType::BF16 => "bf16",
            ElemType::F32 => "f32",
            ElemType::F64 => "f64",
            ElemType::I1 => "i1",
            ElemType::I8 => "i8",
            ElemType::I16 => "i16",
            ElemType::I32 => "i32",
            ElemType::I64 => "i64",
            ElemType::UI8 => "ui8",
            ElemType::UI16 => "ui16",
            ElemType::UI32 => "ui32",
            ElemType::UI64 => "ui64",
        }
    }

    pub fn from_mnemonic(s: &str) -> Option<ElemType> {
        ElemType::ALL.into_iter().find(|e| e.mnemonic() == s)
    }

    pub fn is_float(self) -> bool {
        matches!(
            self,
            ElemType::F16 | ElemType::BF16 | ElemType::F32 | ElemType::F64
        )
    }

    pub fn is_bool(self) -> bool {
        self == ElemType::I1
    }

    /// Integer types, i1 included.
    pub fn is_integer(self) -> bool {
        !self.is_float()
    }

    pub fn is_unsigned(self) -> bool {
        matches!(
            self,
            ElemType::UI8 | ElemType::UI16 | ElemType::UI32 | ElemType::UI64
        )
    }

    /// Bits of storage (i1 counts as 1).
    pub fn bit_width(self) -> u32 {
        match self {
            ElemType::I1 => 1,
            ElemType::I8 | ElemType::UI8 => 8,
            ElemType::F16 | ElemType::BF16 | ElemType::I16 | ElemType::UI16 => 16,
            ElemType::F32 | ElemType::I32 | ElemType::UI32 => 32,
            ElemType::F64 | ElemType::I64 | ElemType::UI64 => 64,
        }
    }
}

impl fmt::Display for ElemType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.mnemonic())
    }
}

/// A ranked tensor type with a static shape: `tensor<2x3xf32>`, `tensor<f32>`.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct TensorType {
    pub shape: Vec<i64>,
    pub elem: ElemType,
}

impl TensorType {
    pub fn new(shape: impl Into<Vec<i64>>, elem: ElemType) -> Self {
        TensorType {
            shape: shape.into(),
            elem,
        }
    }

    pub fn scalar(elem: ElemType) -> Self {
        TensorType {
            shape: vec![],
            elem,
        }
    }

    pub fn f32(shape: impl Into<Vec<i64>>) -> Self {
        Self::new(shape, ElemType::F32)
    }

    pub fn rank(&self) -> usize {
        self.shape.len()
    }

    pub fn num_elements(&self) -> i64 {
        self.shape.iter().product()
    }

    /// Same shape, other element type.
    pub fn with_elem(&self, elem: ElemType) -> Self {
        TensorType {
            shape: self.shape.clone(),
            elem,
        }
    }
}

impl fmt::Display for TensorType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("tensor<")?;
        for d in &self.shape {
            write!(f, "{d}x")?;
        }
        write!(f, "{}>", self.elem)
    }
}
