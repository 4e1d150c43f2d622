//! The pretty (custom assembly) form of each op, where StableHLO has one and
//! the op is well-formed enough for it; everything else falls back to the
//! generic form.

use super::attrs::{
    bool_list, conv_dims_compact, dict_body, extras, list, pairs, precision_mnemonics,
};
use super::func::FuncPrinter;
use super::symbol;
use crate::literal::dense_literal;
use crate::module::Op;
use crate::ops::{ConvAttrs, DotDims, OpKind};
use std::fmt::Write;

impl FuncPrinter<'_> {
    /// Whether `op` has the shape its pretty form can express.
    fn pretty_ok(op: &Op) -> bool {
        let (nres, nreg) = (op.results.len(), op.regions.len());
        match &op.kind {
            OpKind::Return | OpKind::FuncReturn => nres == 0 && nreg == 0,
            OpKind::Call { .. } => nreg == 0,
            OpKind::Reduce { .. } => {
                let n = op.operands.len() / 2;
                nreg == 1 && n >= 1 && op.operands.len() == 2 * n && nres == n
            }
            OpKind::ReduceWindow(_) | OpKind::SelectAndScatter(_) | OpKind::AllReduce { .. } => {
                false
            }
            OpKind::TopK { .. } => nres == 2 && nreg == 0,
            // No custom assembly: MLIR prints it generically.
            OpKind::TriangularSolve { .. } => false,
            OpKind::Slice {
                start,
                limit,
                strides,
            } => {
                nres == 1 && nreg == 0 && start.len() == limit.len() && start.len() == strides.len()
            }
            OpKind::Convolution(c) => {
                let n = c.dims.input_spatial.len();
                nres == 1
                    && nreg == 0
                    && conv_dims_compact(&c.dims).is_some()
                    && c.window_strides.len() == n
                    && c.padding.len() == n
                    && c.lhs_dilation.len() == n
                    && c.rhs_dilation.len() == n
                    && (c.window_reversal.len() == n || c.window_reversal.iter().all(|r| !r))
            }
            OpKind::While => Self::while_pretty_ok(op),
            OpKind::OptimizationBarrier => {
                nreg == 0 && nres == op.operands.len() && !op.operands.is_empty()
            }
            OpKind::Gather(_)
            | OpKind::Scatter(_)
            | OpKind::Case
            | OpKind::If
            | OpKind::Sort { .. }
            | OpKind::Map { .. } => false,
            _ => nres == 1 && nreg == 0,
        }
    }

    pub(super) fn op(&mut self, out: &mut String, op: &Op, indent: usize) {
        let pad = " ".repeat(indent);
        out.push_str(&pad);
        if !Self::pretty_ok(op) {
            self.generic(out, op, indent);
            out.push('\n');
            return;
        }
        if op.kind == OpKind::While {
            self.while_op(out, op, indent);
            out.push('\n');
            return;
        }
        if let OpKind::Reduce { dims } = &op.kind {
            self.reduce(out, op, dims, indent);
            out.push('\n');
            return;
        }
        let lhs = self.results_prefix(op);
        out.push_str(&lhs);
        let args = self.operand_list(op);
        let ex = extras(op);
        let res_ty = op
            .results
            .first()
            .map(|(_, t)| t.to_string())
            .unwrap_or_default();
        let line = match &op.kind {
            OpKind::Constant(d) => {
                let ty = &op.results[0].1;
                format!("stablehlo.constant{ex} {} : {ty}", dense_literal(d, ty))
            }
            OpKind::Unary(u) if u.is_chlo() => {
                let ins = self.operand_types(op).join(", ");
                format!("{} {args}{ex} : {ins} -> {res_ty}", u.name())
            }
            OpKind::Unary(u) => format!("{} {args}{ex} : {}", u.name(), self.same_type(op)),
            OpKind::Binary(b) if b.is_chlo() => {
                let ins = self.operand_types(op).join(", ");
                format!("{} {args}{ex} : {ins} -> {res_ty}", b.name())
            }
            OpKind::Binary(b) => format!("{} {args}{ex} : {}", b.name(), self.same_type(op)),
            OpKind::Compare {
                direction,
                compare_type,
            } => {
                let ct = compare_type
                    .map(|t| format!(",  {}", t.mnemonic()))
                    .unwrap_or_default();
                format!(
                    "stablehlo.compare  {}, {args}{ct}{ex} : {}",
                    direction.mnemonic(),
                    self.functional(op)
                )
            }
            OpKind::Select => {
                let ins = self.operand_types(op);
                let ty = if ins.len() == 3 && ins[1] == res_ty && ins[2] == res_ty {
                    format!("{}, {res_ty}", ins[0])
                } else {
                    self.functional(op)
                };
                format!("stablehlo.select {args}{ex} : {ty}")
            }
            OpKind::Clamp => format!("stablehlo.clamp {args}{ex} : {}", self.same_type(op)),
            OpKind::Convert => format!("stablehlo.convert {args}{ex} : {}", self.same_type(op)),
            OpKind::Reshape => format!("stablehlo.reshape {args}{ex} : {}", self.functional(op)),
            OpKind::Transpose { permutation } => format!(
                "stablehlo.transpose {args}, dims = {}{ex} : {}",
                list(permutation),
                self.functional(op)
            ),
            OpKind::BroadcastInDim { dims } => format!(
                "stablehlo.broadcast_in_dim {args}, dims = {}{ex} : {}",
                list(dims),
                self.functional(op)
            ),
            OpKind::Reverse { dims } => format!(
                "stablehlo.reverse {args}, dims = {}{ex} : {}",
                list(dims),
                self.same_type(op)
            ),
            OpKind::Slice {
                start,
                limit,
                strides,
            } => {
                let ranges: Vec<String> = start
                    .iter()
                    .zip(limit)
                    .zip(strides)
                    .map(|((s, l), st)| {
                        if *st == 1 {
                            format!("{s}:{l}")
                        } else {
                            format!("{s}:{l}:{st}")
                        }
                    })
                    .collect();
                format!(
                    "stablehlo.slice {args} [{}]{ex} : {}",
                    ranges.join(", "),
                    self.functional(op)
                )
            }
            OpKind::Pad {
                low,
                high,
                interior,
            } => format!(
                "stablehlo.pad {args}, low = {}, high = {}, interior = {}{ex} : {}",
                list(low),
                list(high),
                list(interior),
                self.functional(op)
            ),
            OpKind::Concatenate { dim } => format!(
                "stablehlo.concatenate {args}, dim = {dim}{ex} : {}",
                self.functional(op)
            ),
            OpKind::Iota { dim } => format!("stablehlo.iota dim = {dim}{ex} : {res_ty}"),
            OpKind::DotGeneral {
                dims,
                precision_config,
            } => self.dot_general(op, &args, dims, precision_config.as_deref()),
            OpKind::Convolution(c) => self.convolution(op, &args, c),
            OpKind::Call { callee } => {
                format!(
                    "call {}({args}){ex} : {}",
                    symbol(callee),
                    self.functional(op)
                )
            }
            OpKind::Return | OpKind::FuncReturn => {
                let name = if op.kind == OpKind::Return {
                    "stablehlo.return"
                } else {
                    "return"
                };
                if op.operands.is_empty() {
                    format!("{name}{ex}")
                } else {
                    format!("{name} {args}{ex} : {}", self.operand_types(op).join(", "))
                }
            }
            OpKind::DynamicSlice { sizes } => format!(
                "stablehlo.dynamic_slice {args}, sizes = {}{ex} : {}",
                list(sizes),
                self.functional(op)
            ),
            OpKind::DynamicUpdateSlice => format!(
                "stablehlo.dynamic_update_slice {args}{ex} : {}",
                self.functional(op)
            ),
            OpKind::OptimizationBarrier => format!(
                "stablehlo.optimization_barrier {args}{ex} : {}",
                self.operand_types(op).join(", ")
            ),
            // The bit-level and library ops.
            OpKind::BitcastConvert => format!(
                "stablehlo.bitcast_convert {args}{ex} : {}",
                self.functional(op)
            ),
            OpKind::ReducePrecision {
                exponent_bits,
                mantissa_bits,
            } => format!(
                "stablehlo.reduce_precision {args}, format = e{exponent_bits}m{mantissa_bits}{ex} : {}",
                self.same_type(op)
            ),
            OpKind::GetDimensionSize { dimension } => format!(
                "stablehlo.get_dimension_size {args}, dim = {dimension}{ex} : {}",
                self.functional(op)
            ),
            OpKind::TopK { k } => {
                let ins = self.operand_types(op).join(", ");
                let outs: Vec<String> = op.results.iter().map(|(_, t)| t.to_string()).collect();
                format!(
                    "chlo.top_k({args}, k = {k}){ex} : {ins} -> ({})",
                    outs.join(", ")
                )
            }
            OpKind::Reduce { .. }
            | OpKind::ReduceWindow(_)
            | OpKind::SelectAndScatter(_)
            | OpKind::AllReduce { .. }
            | OpKind::While
            | OpKind::Gather(_)
            | OpKind::Scatter(_)
            | OpKind::Case
            | OpKind::If
            | OpKind::Sort { .. }
            | OpKind::Map { .. }
            | OpKind::TriangularSolve { .. } => {
                unreachable!("handled before: reduce and while above, the others in generic form")
            }
        };
        out.push_str(&line);
        out.push('\n');
    }

    fn dot_general(&self, op: &Op, args: &str, d: &DotDims, precision: Option<&str>) -> String {
        let mut s = format!("stablehlo.dot_general {args}");
        if !d.lhs_batch.is_empty() || !d.rhs_batch.is_empty() {
            let _ = write!(
                s,
                ", batching_dims = {} x {}",
                list(&d.lhs_batch),
                list(&d.rhs_batch)
            );
        }
        let _ = write!(
            s,
            ", contracting_dims = {} x {}",
            list(&d.lhs_contracting),
            list(&d.rhs_contracting)
        );
        let mut attrs = op.extra_attrs.clone();
        if let Some(p) = precision {
            match precision_mnemonics(p) {
                Some(names) => {
                    let _ = write!(s, ", precision = [{}]", names.join(", "));
                }
                None => attrs.insert(0, ("precision_config".to_string(), p.to_string())),
            }
        }
        if !attrs.is_empty() {
            let _ = write!(s, " {{{}}}", dict_body(&attrs));
        }
        let _ = write!(s, " : {}", self.functional(op));
        s
    }

    fn convolution(&self, op: &Op, args: &str, c: &ConvAttrs) -> String {
        let mut window = vec![
            format!("stride = {}", list(&c.window_strides)),
            format!("pad = {}", pairs(&c.padding)),
            format!("lhs_dilate = {}", list(&c.lhs_dilation)),
            format!("rhs_dilate = {}", list(&c.rhs_dilation)),
        ];
        if c.window_reversal.iter().any(|r| *r) {
            window.push(format!("reverse = {}", bool_list(&c.window_reversal)));
        }
        let mut attrs = vec![
            (
                "batch_group_count".to_string(),
                format!("{} : i64", c.batch_group_count),
            ),
            (
                "feature_group_count".to_string(),
                format!("{} : i64", c.feature_group_count),
            ),
        ];
        if let Some(p) = &c.precision_config {
            attrs.push(("precision_config".to_string(), p.clone()));
        }
        attrs.extend(op.extra_attrs.iter().cloned());
        format!(
            "stablehlo.convolution({args}) dim_numbers = {}, window = {{{}}} {{{}}} : {}",
            conv_dims_compact(&c.dims).unwrap_or_default(),
            window.join(", "),
            dict_body(&attrs),
            self.functional(op)
        )
    }

    /// `stablehlo.reduce(%x init: %i) applies stablehlo.add across dimensions = […]`
    /// for a plain binary reducer, the `reducer(…) { … }` form otherwise.
    fn reduce(&mut self, out: &mut String, op: &Op, dims: &[i64], indent: usize) {
        let n = op.operands.len() / 2;
        let body = &op.regions[0];
        let compact = if n == 1
            && op.regions[0]
                .ops
                .first()
                .is_some_and(|o| o.extra_attrs.is_empty())
        {
            let init_ty = self.types.get(&op.operands[1]);
            body.as_binary_reducer().filter(|_| {
                let inner_ty = body.ops[0].results.first().map(|(_, t)| t);
                init_ty.is_some()
                    && body.args.iter().all(|(_, t)| Some(t) == init_ty)
                    && inner_ty == init_ty
            })
        } else {
            None
        };
        let pairs: Vec<String> = (0..n)
            .map(|i| {
                format!(
                    "({} init: {})",
                    self.name(op.operands[i]),
                    self.name(op.operands[i + n])
                )
            })
            .collect();
        let sig = self.functional(op);
        let ex = extras(op);
        let lhs = self.results_prefix(op);
        out.push_str(&lhs);
        let _ = write!(out, "stablehlo.reduce{}", pairs.join(", "));
        if let Some(b) = compact {
            let _ = write!(
                out,
                " applies {} across dimensions = {}{ex} : {sig}",
                b.name(),
                list(dims)
            );
            return;
        }
        let _ = writeln!(out, " across dimensions = {}{ex} : {sig}", list(dims));
        let pad = " ".repeat(indent);
        let _ = write!(out, "{pad} reducer");
        let arg_names: Vec<String> = body
            .args
            .iter()
            .map(|(v, t)| {
                let name = self.define_arg(*v, t);
                format!("{name}: {t}")
            })
            .collect();
        if body.args.len() == 2 * n {
            for i in 0..n {
                let _ = write!(
                    out,
                    "{}({}, {})",
                    if i > 0 { " " } else { "" },
                    arg_names[i],
                    arg_names[i + n]
                );
            }
        } else {
            // Not pairable (an invalid reducer): one group keeps every argument.
            let _ = write!(out, "({})", arg_names.join(", "));
        }
        out.push_str(" {\n");
        for inner in &body.ops {
            self.op(out, inner, indent + 2);
        }
        let _ = write!(out, "{pad}}}");
    }
}
