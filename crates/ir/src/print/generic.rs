//! The generic form `"stablehlo.op"(…) <{props}> ({regions}) {extras} : …`,
//! which every op has: the inherent attributes as a sorted properties
//! dictionary, regions as `^bb0` blocks.

use super::attrs::{
    array_i1, array_i64, conv_dims_attr, dense_groups, dense_pairs, dict_body, dot_attr, extras,
};
use super::func::FuncPrinter;
use super::structured;
use super::symbol;
use crate::literal::dense_literal;
use crate::module::Op;
use crate::ops::{OpKind, ScatterWindowAttrs, WindowAttrs};
use crate::types::{ElemType, TensorType};
use std::fmt::Write;

/// The inherent attributes of `kind` as `(name, value)`, sorted by name as MLIR
/// prints a properties dictionary; defaults are left out where StableHLO allows.
fn inherent_attrs(kind: &OpKind, result_ty: Option<&TensorType>) -> Vec<(String, String)> {
    let mut a: Vec<(String, String)> = Vec::new();
    let mut put = |k: &str, v: String| a.push((k.to_string(), v));
    match kind {
        OpKind::Constant(d) => {
            let ty = result_ty
                .cloned()
                .unwrap_or_else(|| TensorType::scalar(ElemType::F32));
            put("value", format!("{} : {ty}", dense_literal(d, &ty)));
        }
        OpKind::Compare {
            direction,
            compare_type,
        } => {
            put(
                "comparison_direction",
                format!("#stablehlo<comparison_direction {}>", direction.mnemonic()),
            );
            if let Some(t) = compare_type {
                put(
                    "compare_type",
                    format!("#stablehlo<comparison_type {}>", t.mnemonic()),
                );
            }
        }
        OpKind::Transpose { permutation } => put("permutation", array_i64(permutation)),
        OpKind::BroadcastInDim { dims } => put("broadcast_dimensions", array_i64(dims)),
        OpKind::Reverse { dims } => put("dimensions", array_i64(dims)),
        OpKind::Slice {
            start,
            limit,
            strides,
        } => {
            put("start_indices", array_i64(start));
            put("limit_indices", array_i64(limit));
            put("strides", array_i64(strides));
        }
        OpKind::Pad {
            low,
            high,
            interior,
        } => {
            put("edge_padding_low", array_i64(low));
            put("edge_padding_high", array_i64(high));
            put("interior_padding", array_i64(interior));
        }
        OpKind::Concatenate { dim } => put("dimension", format!("{dim} : i64")),
        OpKind::Iota { dim } => put("iota_dimension", format!("{dim} : i64")),
        OpKind::DotGeneral {
            dims,
            precision_config,
        } => {
            put("dot_dimension_numbers", dot_attr(dims));
            if let Some(p) = precision_config {
                put("precision_config", p.clone());
            }
        }
        OpKind::Convolution(c) => {
            put(
                "batch_group_count",
                format!("{} : i64", c.batch_group_count),
            );
            put("dimension_numbers", conv_dims_attr(&c.dims));
            put(
                "feature_group_count",
                format!("{} : i64", c.feature_group_count),
            );
            put("lhs_dilation", array_i64(&c.lhs_dilation));
            put("padding", dense_pairs(&c.padding));
            if let Some(p) = &c.precision_config {
                put("precision_config", p.clone());
            }
            put("rhs_dilation", array_i64(&c.rhs_dilation));
            if c.window_reversal.iter().any(|r| *r) {
                put("window_reversal", array_i1(&c.window_reversal));
            }
            put("window_strides", array_i64(&c.window_strides));
        }
        OpKind::Reduce { dims } => put("dimensions", array_i64(dims)),
        OpKind::ReduceWindow(w) => window_attrs(w, &mut put),
        OpKind::SelectAndScatter(s) => scatter_window_attrs(s, &mut put),
        OpKind::AllReduce {
            replica_groups,
            channel_id,
            use_global_device_ids,
        } => {
            if let Some((handle, ty)) = channel_id {
                put(
                    "channel_handle",
                    format!("#stablehlo.channel_handle<handle = {handle}, type = {ty}>"),
                );
            }
            put("replica_groups", dense_groups(replica_groups));
            if *use_global_device_ids {
                put("use_global_device_ids", String::new());
            }
        }
        OpKind::Call { callee } => put("callee", symbol(callee)),
        // The bit-level and library ops.
        OpKind::ReducePrecision {
            exponent_bits,
            mantissa_bits,
        } => {
            put("exponent_bits", format!("{exponent_bits} : i32"));
            put("mantissa_bits", format!("{mantissa_bits} : i32"));
        }
        OpKind::GetDimensionSize { dimension } => put("dimension", format!("{dimension} : i64")),
        OpKind::TopK { k } => put("k", format!("{k} : i64")),
        OpKind::BitcastConvert => {}
        OpKind::TriangularSolve {
            left_side,
            lower,
            unit_diagonal,
            transpose_a,
        } => {
            put("left_side", left_side.to_string());
            put("lower", lower.to_string());
            put(
                "transpose_a",
                format!("#stablehlo<transpose {}>", transpose_a.mnemonic()),
            );
            put("unit_diagonal", unit_diagonal.to_string());
        }
        OpKind::Unary(_)
        | OpKind::Binary(_)
        | OpKind::Select
        | OpKind::Clamp
        | OpKind::Convert
        | OpKind::Reshape
        | OpKind::Return
        | OpKind::FuncReturn => {}
        OpKind::Gather(g) => {
            put("dimension_numbers", structured::gather_dims(g));
            put(
                "indices_are_sorted",
                structured::bool_word(g.indices_are_sorted),
            );
            put("slice_sizes", array_i64(&g.slice_sizes));
        }
        OpKind::Scatter(s) => {
            put(
                "indices_are_sorted",
                structured::bool_word(s.indices_are_sorted),
            );
            put("scatter_dimension_numbers", structured::scatter_dims(s));
            put("unique_indices", structured::bool_word(s.unique_indices));
        }
        OpKind::DynamicSlice { sizes } => put("slice_sizes", array_i64(sizes)),
        OpKind::Sort {
            dimension,
            is_stable,
        } => {
            put("dimension", format!("{dimension} : i64"));
            put("is_stable", structured::bool_word(*is_stable));
        }
        OpKind::Map { dimensions } => put("dimensions", array_i64(dimensions)),
        OpKind::DynamicUpdateSlice
        | OpKind::While
        | OpKind::Case
        | OpKind::If
        | OpKind::OptimizationBarrier => {}
    }
    a.sort_by(|x, y| x.0.cmp(&y.0));
    a
}

fn window_attrs(w: &WindowAttrs, put: &mut impl FnMut(&str, String)) {
    if w.base_dilations.iter().any(|d| *d != 1) {
        put("base_dilations", array_i64(&w.base_dilations));
    }
    if w.padding.iter().any(|p| *p != (0, 0)) {
        put("padding", dense_pairs(&w.padding));
    }
    if w.window_dilations.iter().any(|d| *d != 1) {
        put("window_dilations", array_i64(&w.window_dilations));
    }
    put("window_dimensions", array_i64(&w.window_dimensions));
    if w.window_strides.iter().any(|d| *d != 1) {
        put("window_strides", array_i64(&w.window_strides));
    }
}

fn scatter_window_attrs(s: &ScatterWindowAttrs, put: &mut impl FnMut(&str, String)) {
    if s.padding.iter().any(|p| *p != (0, 0)) {
        put("padding", dense_pairs(&s.padding));
    }
    put("window_dimensions", array_i64(&s.window_dimensions));
    if s.window_strides.iter().any(|d| *d != 1) {
        put("window_strides", array_i64(&s.window_strides));
    }
}

impl FuncPrinter<'_> {
    /// `"name"(operands) <{props}> ({regions}) {extras} : (types) -> types`.
    pub(super) fn generic(&mut self, out: &mut String, op: &Op, indent: usize) {
        let sig = self.functional(op);
        let args = self.operand_list(op);
        let lhs = self.results_prefix(op);
        out.push_str(&lhs);
        let _ = write!(out, "\"{}\"({args})", op.kind.name());
        let props = inherent_attrs(&op.kind, op.results.first().map(|(_, t)| t));
        if !props.is_empty() {
            let _ = write!(out, " <{{{}}}>", dict_body(&props));
        }
        if !op.regions.is_empty() {
            out.push_str(" (");
            let pad = " ".repeat(indent);
            for (i, block) in op.regions.iter().enumerate() {
                if i > 0 {
                    out.push_str(", ");
                }
                out.push_str("{\n");
                self.block(out, block, indent);
                out.push_str(&pad);
                out.push('}');
            }
            out.push(')');
        }
        let _ = write!(out, "{} : {sig}", extras(op));
    }
}
