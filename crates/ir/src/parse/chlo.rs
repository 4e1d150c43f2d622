//! CHLO's type spelling (`: A, B -> R`, `: T -> (V, I)`), `chlo.top_k`, and the
//! pretty forms of the bit-level StableHLO ops that JAX prints beside them:
//! `stablehlo.bitcast_convert %x : (A) -> R`,
//! `stablehlo.reduce_precision %x, format = e8m7 : T`,
//! `stablehlo.get_dimension_size %x, dim = 0 : (A) -> tensor<i32>`.

use super::{OpParts, PResult, Parser};
use crate::module::ValueId;
use crate::ops::OpKind;
use crate::types::TensorType;

impl Parser<'_> {
    /// The pretty form of an op this file owns; `None` for any other name.
    pub(super) fn pretty_chlo_op(&mut self, name: &str) -> PResult<Option<OpParts>> {
        let parts = match name {
            "stablehlo.bitcast_convert" => {
                let operands = self.operands()?;
                let extra = self.extras()?;
                let outs = self.same_type_sig(&operands)?;
                Self::simple(OpKind::BitcastConvert, operands, outs, extra)
            }
            "stablehlo.reduce_precision" => {
                let operands = self.operands()?;
                self.expect(",")?;
                self.expect_kw("format")?;
                self.expect("=")?;
                let (exponent_bits, mantissa_bits) = self.float_format()?;
                let extra = self.extras()?;
                let outs = self.same_type_sig(&operands)?;
                Self::simple(
                    OpKind::ReducePrecision {
                        exponent_bits,
                        mantissa_bits,
                    },
                    operands,
                    outs,
                    extra,
                )
            }
            "stablehlo.get_dimension_size" => {
                let operands = self.operands()?;
                self.expect(",")?;
                self.expect_kw("dim")?;
                self.expect("=")?;
                let dimension = self.integer()?;
                let extra = self.extras()?;
                let outs = self.same_type_sig(&operands)?;
                Self::simple(
                    OpKind::GetDimensionSize { dimension },
                    operands,
                    outs,
                    extra,
                )
            }
            "chlo.top_k" => {
                self.expect("(")?;
                let operands = self.operands()?;
                self.expect(",")?;
                self.expect_kw("k")?;
                self.expect("=")?;
                let k = self.integer()?;
                self.expect(")")?;
                let extra = self.extras()?;
                let outs = self.chlo_sig(&operands)?;
                Self::simple(OpKind::TopK { k }, operands, outs, extra)
            }
            _ => return Ok(None),
        };
        Ok(Some(parts))
    }

    /// `eEmM` (reduce_precision's format): exponent and mantissa bit counts.
    fn float_format(&mut self) -> PResult<(i64, i64)> {
        self.ws();
        let pos = self.pos;
        let id = self.expect_id("a float format such as e8m7")?;
        let bad = || self.err_at(pos, "a float format such as e8m7", id);
        let rest = id.strip_prefix('e').ok_or_else(bad)?;
        let (e, m) = rest.split_once('m').ok_or_else(bad)?;
        let digits = |t: &str| -> Option<i64> {
            (!t.is_empty() && t.bytes().all(|b| b.is_ascii_digit()))
                .then(|| t.parse().ok())
                .flatten()
        };
        match (digits(e), digits(m)) {
            (Some(e), Some(m)) => Ok((e, m)),
            _ => Err(bad()),
        }
    }

    /// CHLO's signature: `: T -> R` (every operand has type T), `: A, B -> R`,
    /// `: T -> (R, S)`, a bare `: T` (result type T), or the functional type.
    pub(super) fn chlo_sig(&mut self, operands: &[ValueId]) -> PResult<Vec<TensorType>> {
        self.expect(":")?;
        self.ws();
        let pos = self.pos;
        if self.at("(") {
            let (ins, outs) = self.func_type()?;
            self.check_types(operands, &ins, pos)?;
            return Ok(outs);
        }
        let mut ins = vec![self.tensor_type()?];
        while self.eat(",") {
            ins.push(self.tensor_type()?);
        }
        if ins.len() == 1 && operands.len() > 1 {
            ins = vec![ins[0].clone(); operands.len()];
        }
        self.check_types(operands, &ins, pos)?;
        if !self.eat("->") {
            return Ok(vec![ins[0].clone()]);
        }
        if self.eat("(") {
            let outs = self.type_list(")")?;
            self.expect(")")?;
            Ok(outs)
        } else {
            Ok(vec![self.tensor_type()?])
        }
    }
}
