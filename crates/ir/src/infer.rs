//! Result-type inference and checking for every op, following the StableHLO
//! specification's constraints. The builder and the verifier both go through here.

use crate::module::Block;
use crate::ops::OpKind;
use crate::types::TensorType;
use std::fmt;

/// An ill-typed op: which op, and what does not match (dimensions named).
#[derive(Clone, Debug, PartialEq)]
pub struct TypeError {
    pub op: &'static str,
    pub message: String,
}

impl fmt::Display for TypeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.op, self.message)
    }
}

impl std::error::Error for TypeError {}

/// The result types of `kind` applied to operands of `operand_types` with
/// `regions`. `given` holds the result types the text or the caller states; it is
/// required where the spec does not determine the result type from the operands
/// (constant, convert, reshape, broadcast_in_dim, iota, func.call) and is checked
/// against the inferred types everywhere else.
pub fn infer_result_types(
    kind: &OpKind,
    operand_types: &[TensorType],
    regions: &[Block],
    given: Option<&[TensorType]>,
) -> Result<Vec<TensorType>, TypeError> {
    let _ = (kind, operand_types, regions);
    // Placeholder until the inference rules land: trust the stated types.
    given.map(|g| g.to_vec()).ok_or_else(|| TypeError {
        op: kind.name(),
        message: "type inference not implemented yet".into(),
    })
}
