//! The structured ops' own spellings: the pretty `stablehlo.while`
//! form JAX prints, and the `#stablehlo.gather<…>` / `#stablehlo.scatter<…>`
//! dimension numbers of the generic form (empty lists left out, as MLIR does).

use super::attrs::{extras, list};
use super::func::FuncPrinter;
use crate::module::Op;
use crate::ops::{GatherAttrs, ScatterAttrs};
use std::fmt::Write;

/// `#stablehlo.NAME<field = [..], …, index_vector_dim = n>`.
fn dims_struct(name: &str, fields: &[(&str, &[i64])], index_vector_dim: i64) -> String {
    let mut parts: Vec<String> = fields
        .iter()
        .filter(|(_, v)| !v.is_empty())
        .map(|(k, v)| format!("{k} = {}", list(v)))
        .collect();
    parts.push(format!("index_vector_dim = {index_vector_dim}"));
    format!("#stablehlo.{name}<{}>", parts.join(", "))
}

pub(super) fn gather_dims(g: &GatherAttrs) -> String {
    dims_struct(
        "gather",
        &[
            ("offset_dims", &g.offset_dims),
            ("collapsed_slice_dims", &g.collapsed_slice_dims),
            ("operand_batching_dims", &g.operand_batching_dims),
            (
                "start_indices_batching_dims",
                &g.start_indices_batching_dims,
            ),
            ("start_index_map", &g.start_index_map),
        ],
        g.index_vector_dim,
    )
}

pub(super) fn scatter_dims(s: &ScatterAttrs) -> String {
    dims_struct(
        "scatter",
        &[
            ("update_window_dims", &s.update_window_dims),
            ("inserted_window_dims", &s.inserted_window_dims),
            ("input_batching_dims", &s.input_batching_dims),
            (
                "scatter_indices_batching_dims",
                &s.scatter_indices_batching_dims,
            ),
            (
                "scatter_dims_to_operand_dims",
                &s.scatter_dims_to_operand_dims,
            ),
        ],
        s.index_vector_dim,
    )
}

pub(super) fn bool_word(b: bool) -> String {
    if b { "true" } else { "false" }.to_string()
}

impl FuncPrinter<'_> {
    /// The pretty while form needs both regions to take exactly the loop values.
    pub(super) fn while_pretty_ok(op: &Op) -> bool {
        let types: Vec<_> = op.results.iter().map(|(_, t)| t).collect();
        op.regions.len() == 2
            && !op.operands.is_empty()
            && op.operands.len() == op.results.len()
            && op.regions.iter().all(|r| {
                r.args.len() == types.len() && r.args.iter().zip(&types).all(|((_, t), u)| t == *u)
            })
    }

    /// `%r:n = stablehlo.while(%iterArg = %x, …) : T, …\n cond {…} do {…}`;
    /// both regions' arguments print as the same `%iterArg…` names.
    pub(super) fn while_op(&mut self, out: &mut String, op: &Op, indent: usize) {
        let pad = " ".repeat(indent);
        let operand_names: Vec<String> = op.operands.iter().map(|v| self.name(*v)).collect();
        let types: Vec<String> = op.results.iter().map(|(_, t)| t.to_string()).collect();
        let ex = extras(op);
        let lhs = self.results_prefix(op);
        out.push_str(&lhs);
        let iter_names: Vec<String> = (0..op.operands.len())
            .map(|_| self.iter_arg_name())
            .collect();
        let bindings: Vec<String> = iter_names
            .iter()
            .zip(&operand_names)
            .map(|(i, o)| format!("{i} = {o}"))
            .collect();
        let _ = writeln!(
            out,
            "stablehlo.while({}){ex} : {}",
            bindings.join(", "),
            types.join(", ")
        );
        for (k, region) in op.regions.iter().enumerate() {
            for ((v, t), name) in region.args.iter().zip(&iter_names) {
                self.define(*v, name.clone(), t);
            }
            if k == 0 {
                let _ = writeln!(out, "{pad}cond {{");
            } else {
                let _ = writeln!(out, "{pad}}} do {{");
            }
            for inner in &region.ops {
                self.op(out, inner, indent + 2);
            }
        }
        let _ = write!(out, "{pad}}}");
    }
}
