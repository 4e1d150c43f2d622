//! One op: its result names, the dispatch to the pretty or generic form, result
//! binding, the operand/region/result counts each kind must have, and the
//! signature spellings the pretty forms share.

use super::{plural, OpParts, PResult, ParseError, Parser};
use crate::module::{Op, SrcLoc, ValueId};
use crate::ops::OpKind;
use crate::types::TensorType;

/// The result names an op defines: `%name` or `%name:count`, with positions.
struct ResultDef {
    name: String,
    count: usize,
    pos: usize,
}

impl Parser<'_> {
    pub(super) fn op(&mut self) -> PResult<Op> {
        self.ws();
        let start = self.pos;
        let mut defs: Vec<ResultDef> = Vec::new();
        if self.peek() == Some(b'%') {
            loop {
                let (name, pos) = self.def_name()?;
                let mut count = 1usize;
                if self.peek() == Some(b':') && self.peek_at(1).is_some_and(|b| b.is_ascii_digit())
                {
                    self.pos += 1;
                    let n = self.integer()?;
                    count = usize::try_from(n)
                        .ok()
                        .filter(|c| (1..=1 << 16).contains(c))
                        .ok_or_else(|| {
                            self.err_at(pos, "a result count between 1 and 65536", n.to_string())
                        })?;
                }
                defs.push(ResultDef { name, count, pos });
                if !self.eat(",") {
                    break;
                }
            }
            self.expect("=")?;
        }
        self.ws();
        let name_pos = self.pos;
        let parts = if self.peek() == Some(b'"') {
            let name = self.string_lit()?;
            self.generic_op(&name, name_pos)?
        } else {
            let name = self.expect_id("an op name")?;
            self.pretty_op(name, name_pos)?
        };
        self.skip_loc()?;
        self.check_arity(&parts, name_pos)?;
        // Results are bound after the op's regions were parsed: an op's regions
        // cannot see its own results.
        let named: usize = defs.iter().map(|d| d.count).sum();
        if !defs.is_empty() && named != parts.result_types.len() {
            return Err(self.err_at(
                start,
                format!(
                    "{} ({} has {})",
                    plural(parts.result_types.len(), "result name"),
                    parts.kind.name(),
                    plural(parts.result_types.len(), "result")
                ),
                plural(named, "name"),
            ));
        }
        let results: Vec<(ValueId, TensorType)> = parts
            .result_types
            .iter()
            .map(|t| (self.fresh(t.clone()), t.clone()))
            .collect();
        let mut next = 0;
        for d in &defs {
            let group: Vec<ValueId> = results[next..next + d.count].iter().map(|r| r.0).collect();
            next += d.count;
            self.bind(&d.name, group, d.pos)?;
        }
        let (line, col) = self.line_col(start);
        Ok(Op {
            kind: parts.kind,
            operands: parts.operands,
            results,
            regions: parts.regions,
            extra_attrs: parts.extra,
            loc: SrcLoc(Some((line, col))),
        })
    }

    fn check_arity(&self, parts: &OpParts, pos: usize) -> PResult<()> {
        let n = parts.operands.len();
        let name = parts.kind.name();
        let (ok, want, regions) = match &parts.kind {
            OpKind::Constant(_) | OpKind::Iota { .. } => (n == 0, "0 operands".to_string(), 0),
            OpKind::Unary(_)
            | OpKind::Convert
            | OpKind::Reshape
            | OpKind::Transpose { .. }
            | OpKind::BroadcastInDim { .. }
            | OpKind::Reverse { .. }
            | OpKind::Slice { .. } => (n == 1, "1 operand".to_string(), 0),
            OpKind::Binary(_)
            | OpKind::Compare { .. }
            | OpKind::Pad { .. }
            | OpKind::DotGeneral { .. }
            | OpKind::Convolution(_) => (n == 2, "2 operands".to_string(), 0),
            OpKind::Select | OpKind::Clamp => (n == 3, "3 operands".to_string(), 0),
            OpKind::Concatenate { .. } => (n >= 1, "at least 1 operand".to_string(), 0),
            OpKind::Reduce { .. } | OpKind::ReduceWindow(_) => (
                n >= 2 && n & 1 == 0,
                "an even number (≥ 2) of operands".to_string(),
                1,
            ),
            OpKind::SelectAndScatter(_) => (n == 3, "3 operands".to_string(), 2),
            OpKind::AllReduce { .. } => (n >= 1, "at least 1 operand".to_string(), 1),
            OpKind::Call { .. } | OpKind::Return | OpKind::FuncReturn => (true, String::new(), 0),
            OpKind::Gather(_) => (n == 2, "2 operands".to_string(), 0),
            OpKind::Scatter(_) => (
                n >= 3 && n & 1 == 1,
                "inputs, indices and as many updates (an odd number ≥ 3 of operands)".to_string(),
                1,
            ),
            OpKind::DynamicSlice { .. } => (n >= 1, "at least 1 operand".to_string(), 0),
            OpKind::DynamicUpdateSlice => (n >= 2, "at least 2 operands".to_string(), 0),
            OpKind::While => (true, String::new(), 2),
            OpKind::If => (n == 1, "1 operand".to_string(), 2),
            OpKind::Case => (n == 1, "1 operand".to_string(), parts.regions.len().max(1)),
            OpKind::Sort { .. } | OpKind::Map { .. } => {
                (n >= 1, "at least 1 operand".to_string(), 1)
            }
            OpKind::OptimizationBarrier => (true, String::new(), 0),
            OpKind::BitcastConvert
            | OpKind::ReducePrecision { .. }
            | OpKind::GetDimensionSize { .. }
            | OpKind::TopK { .. } => (n == 1, "1 operand".to_string(), 0),
            OpKind::TriangularSolve { .. } => (n == 2, "2 operands".to_string(), 0),
        };
        if !ok {
            return Err(self.err_at(pos, format!("{want} for {name}"), plural(n, "operand")));
        }
        if parts.regions.len() != regions {
            return Err(self.err_at(
                pos,
                format!("{} for {name}", plural(regions, "region")),
                plural(parts.regions.len(), "region"),
            ));
        }
        if parts.kind.is_terminator() && !parts.result_types.is_empty() {
            return Err(self.err_at(
                pos,
                format!("no results for {name}"),
                plural(parts.result_types.len(), "result"),
            ));
        }
        Ok(())
    }

    /// An optional `{…}` before the type: attributes kept verbatim.
    pub(super) fn extras(&mut self) -> PResult<Vec<(String, String)>> {
        if !self.at("{") {
            return Ok(Vec::new());
        }
        let (entries, _) = self.attr_dict()?;
        Ok(entries.iter().map(|e| self.entry_text(e)).collect())
    }

    /// `: T` (every operand and the result have type T) or `: (A, B) -> R`.
    pub(super) fn same_type_sig(&mut self, operands: &[ValueId]) -> PResult<Vec<TensorType>> {
        self.expect(":")?;
        self.ws();
        let pos = self.pos;
        if self.at("(") {
            let (ins, outs) = self.func_type()?;
            self.check_types(operands, &ins, pos)?;
            Ok(outs)
        } else {
            let t = self.tensor_type()?;
            self.check_types(operands, &vec![t.clone(); operands.len()], pos)?;
            Ok(vec![t])
        }
    }

    pub(super) fn functional_sig(&mut self, operands: &[ValueId]) -> PResult<Vec<TensorType>> {
        self.expect(":")?;
        self.ws();
        let pos = self.pos;
        let (ins, outs) = self.func_type()?;
        self.check_types(operands, &ins, pos)?;
        Ok(outs)
    }

    pub(super) fn simple(
        kind: OpKind,
        operands: Vec<ValueId>,
        result_types: Vec<TensorType>,
        extra: Vec<(String, String)>,
    ) -> OpParts {
        OpParts {
            kind,
            operands,
            result_types,
            regions: Vec::new(),
            extra,
        }
    }

    /// An op certgrad rejects on purpose ([`OpKind::REJECTED_NAMES`]):
    /// "not supported: <op> at <file>:<line>:<col>".
    pub(super) fn not_supported(&self, name: &str, pos: usize) -> ParseError {
        self.err_at(pos, super::NOT_SUPPORTED, name)
    }

    pub(super) fn unsupported(&self, name: &str, pos: usize) -> ParseError {
        if OpKind::UNSUPPORTED_NAMES.contains(&name) {
            // A known StableHLO op the IR cannot carry: say so, not "unknown op".
            return self.err_at(
                pos,
                "an op certgrad supports (not supported: tuple values)",
                format!("not supported: {name}"),
            );
        }
        let names = OpKind::all_names();
        self.err_at(pos, format!("a supported op ({})", names.join(", ")), name)
    }
}
