//! The structured ops' own syntax: the `#stablehlo.gather<…>` and
//! `#stablehlo.scatter<…>` dimension numbers, and the pretty forms JAX prints
//! for `stablehlo.while(%iterArg = %x, …) : T, … cond {…} do {…}`,
//! `stablehlo.dynamic_slice %x, %i, %j, sizes = […] : …`,
//! `stablehlo.dynamic_update_slice %x, %u, %i, … : …` and
//! `stablehlo.optimization_barrier %a, %b : A, B`.

use super::{OpParts, PResult, Parser};
use crate::module::Block;
use crate::ops::{GatherAttrs, OpKind, ScatterAttrs};
use std::collections::HashMap;

impl Parser<'_> {
    /// `#stablehlo.NAME<field = [..] | n, …>`: each field's integers (a bare
    /// integer reads as a one-element list).
    fn dims_struct(&mut self, name: &str, fields: &[&str]) -> PResult<Vec<(String, Vec<i64>)>> {
        self.expect(&format!("#stablehlo.{name}<"))?;
        let mut out = Vec::new();
        if !self.eat(">") {
            loop {
                self.ws();
                let kpos = self.pos;
                let key = self.expect_id("a dimension-numbers field")?;
                if !fields.contains(&key) {
                    return Err(self.err_at(kpos, format!("one of {}", fields.join(", ")), key));
                }
                self.expect("=")?;
                self.ws();
                let v = if self.at("[") {
                    self.int_list()?
                } else {
                    vec![self.integer()?]
                };
                out.push((key.to_string(), v));
                if self.eat(">") {
                    break;
                }
                self.expect(",")?;
            }
        }
        self.expect_end("the dimension numbers")?;
        Ok(out)
    }

    /// `#stablehlo.gather<…>` into `a` (slice sizes and flags are separate attributes).
    pub(super) fn gather_dims_attr(&mut self, a: &mut GatherAttrs) -> PResult<()> {
        let fields = [
            "offset_dims",
            "collapsed_slice_dims",
            "operand_batching_dims",
            "start_indices_batching_dims",
            "start_index_map",
            "index_vector_dim",
        ];
        for (k, v) in self.dims_struct("gather", &fields)? {
            match k.as_str() {
                "offset_dims" => a.offset_dims = v,
                "collapsed_slice_dims" => a.collapsed_slice_dims = v,
                "operand_batching_dims" => a.operand_batching_dims = v,
                "start_indices_batching_dims" => a.start_indices_batching_dims = v,
                "start_index_map" => a.start_index_map = v,
                _ => a.index_vector_dim = v.first().copied().unwrap_or(0),
            }
        }
        Ok(())
    }

    /// `#stablehlo.scatter<…>` into `a`.
    pub(super) fn scatter_dims_attr(&mut self, a: &mut ScatterAttrs) -> PResult<()> {
        let fields = [
            "update_window_dims",
            "inserted_window_dims",
            "input_batching_dims",
            "scatter_indices_batching_dims",
            "scatter_dims_to_operand_dims",
            "index_vector_dim",
        ];
        for (k, v) in self.dims_struct("scatter", &fields)? {
            match k.as_str() {
                "update_window_dims" => a.update_window_dims = v,
                "inserted_window_dims" => a.inserted_window_dims = v,
                "input_batching_dims" => a.input_batching_dims = v,
                "scatter_indices_batching_dims" => a.scatter_indices_batching_dims = v,
                "scatter_dims_to_operand_dims" => a.scatter_dims_to_operand_dims = v,
                _ => a.index_vector_dim = v.first().copied().unwrap_or(0),
            }
        }
        Ok(())
    }

    /// `stablehlo.while(%iterArg = %x, …) [attrs] : T, … cond { … } do { … }`.
    /// The iteration names are bound afresh as each region's block arguments.
    pub(super) fn pretty_while(&mut self) -> PResult<OpParts> {
        self.expect("(")?;
        let mut names = Vec::new();
        let mut operands = Vec::new();
        if !self.eat(")") {
            loop {
                let (name, pos) = self.def_name()?;
                self.expect("=")?;
                operands.push(self.operand()?);
                names.push((name, pos));
                if self.eat(")") {
                    break;
                }
                self.expect(",")?;
            }
        }
        let extra = self.extras()?;
        let tys = if operands.is_empty() {
            Vec::new()
        } else {
            self.expect(":")?;
            self.ws();
            let tpos = self.pos;
            let tys = self.type_list("cond")?;
            self.check_types(&operands, &tys, tpos)?;
            tys
        };
        let mut regions = Vec::new();
        for kw in ["cond", "do"] {
            self.expect_kw(kw)?;
            self.nest()?;
            self.expect("{")?;
            self.scopes.push(HashMap::new());
            let mut args = Vec::new();
            for ((name, pos), t) in names.iter().zip(&tys) {
                let v = self.fresh(t.clone());
                self.bind(name, vec![v], *pos)?;
                args.push((v, t.clone()));
            }
            let ops = self.block_ops()?;
            self.expect("}")?;
            self.scopes.pop();
            self.depth -= 1;
            regions.push(Block { args, ops });
        }
        Ok(OpParts {
            kind: OpKind::While,
            operands,
            result_types: tys,
            regions,
            extra,
        })
    }

    /// `stablehlo.dynamic_slice %x, %i, …, sizes = [..] : (…) -> R`.
    pub(super) fn pretty_dynamic_slice(&mut self) -> PResult<OpParts> {
        let operands = self.operands()?;
        self.expect(",")?;
        self.expect_kw("sizes")?;
        self.expect("=")?;
        let sizes = self.int_list()?;
        let extra = self.extras()?;
        let outs = self.functional_sig(&operands)?;
        Ok(Self::simple(
            OpKind::DynamicSlice { sizes },
            operands,
            outs,
            extra,
        ))
    }

    /// `stablehlo.dynamic_update_slice %x, %u, %i, … : (…) -> R`.
    pub(super) fn pretty_dynamic_update_slice(&mut self) -> PResult<OpParts> {
        let operands = self.operands()?;
        let extra = self.extras()?;
        let outs = self.functional_sig(&operands)?;
        Ok(Self::simple(
            OpKind::DynamicUpdateSlice,
            operands,
            outs,
            extra,
        ))
    }

    /// `stablehlo.optimization_barrier %a, … : A, …` (results have the operands' types).
    pub(super) fn pretty_optimization_barrier(&mut self) -> PResult<OpParts> {
        let operands = self.operands()?;
        let extra = self.extras()?;
        let outs = if operands.is_empty() {
            Vec::new()
        } else {
            self.expect(":")?;
            self.ws();
            let tpos = self.pos;
            if self.at("(") {
                let (ins, outs) = self.func_type()?;
                self.check_types(&operands, &ins, tpos)?;
                outs
            } else {
                let tys = self.type_list("}")?;
                self.check_types(&operands, &tys, tpos)?;
                tys
            }
        };
        Ok(Self::simple(
            OpKind::OptimizationBarrier,
            operands,
            outs,
            extra,
        ))
    }
}
