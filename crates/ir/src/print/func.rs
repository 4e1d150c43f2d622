//! One function's printer: value names (`%arg0`, `%0`, `%cst`, `%c`, MLIR's
//! style), the function header and body, region blocks, and the type
//! signatures ops share.

use super::symbol;
use crate::module::{Block, Func, Op, ValueId, Visibility};
use crate::ops::{DenseData, OpKind};
use crate::types::TensorType;
use std::collections::HashMap;
use std::fmt::Write;

pub(super) struct FuncPrinter<'f> {
    func: &'f Func,
    names: HashMap<ValueId, String>,
    pub(super) types: HashMap<ValueId, TensorType>,
    next_arg: usize,
    next_value: usize,
    /// Float constants are `%cst`, `%cst_0`, …; integer ones `%c`, `%c_0`, … (MLIR's style).
    next_cst: Option<usize>,
    next_c: Option<usize>,
    /// `stablehlo.while` iteration arguments are `%iterArg`, `%iterArg_0`, ….
    next_iter: Option<usize>,
}

impl<'f> FuncPrinter<'f> {
    pub(super) fn new(func: &'f Func) -> Self {
        FuncPrinter {
            func,
            names: HashMap::new(),
            types: HashMap::new(),
            next_arg: 0,
            next_value: 0,
            next_cst: None,
            next_c: None,
            next_iter: None,
        }
    }

    pub(super) fn name(&self, v: ValueId) -> String {
        self.names
            .get(&v)
            .cloned()
            .unwrap_or_else(|| format!("%unknown{}", v.0))
    }

    fn ty(&self, v: ValueId) -> String {
        match self.types.get(&v) {
            Some(t) => t.to_string(),
            None => "tensor<unknown>".to_string(),
        }
    }

    /// A fresh `%iterArg…` name (MLIR's spelling of while-loop arguments).
    pub(super) fn iter_arg_name(&mut self) -> String {
        Self::counter(&mut self.next_iter, "%iterArg")
    }

    pub(super) fn define(&mut self, v: ValueId, name: String, ty: &TensorType) {
        self.names.insert(v, name);
        self.types.insert(v, ty.clone());
    }

    pub(super) fn define_arg(&mut self, v: ValueId, ty: &TensorType) -> String {
        let name = format!("%arg{}", self.next_arg);
        self.next_arg += 1;
        self.define(v, name.clone(), ty);
        name
    }

    pub(super) fn func(mut self, out: &mut String, indent: usize) {
        let f = self.func;
        let pad = " ".repeat(indent);
        let vis = match f.visibility {
            Visibility::Public => "public",
            Visibility::Private => "private",
        };
        let _ = write!(out, "{pad}func.func {vis} {}(", symbol(&f.name));
        for (i, p) in f.params.iter().enumerate() {
            if i > 0 {
                out.push_str(", ");
            }
            let name = self.define_arg(p.value, &p.ty);
            if let Some((v, t)) = f.body.args.get(i) {
                if *v != p.value {
                    self.define(*v, name.clone(), t);
                }
            }
            let _ = write!(out, "{name}: {}", p.ty);
            if let Some(a) = &p.attrs {
                let _ = write!(out, " {{{a}}}");
            }
        }
        out.push(')');
        let single_plain = f.results.len() == 1 && f.results[0].attrs.is_none();
        if single_plain {
            let _ = write!(out, " -> {}", f.results[0].ty);
        } else if !f.results.is_empty() {
            let parts: Vec<String> = f
                .results
                .iter()
                .map(|r| match &r.attrs {
                    Some(a) => format!("{} {{{a}}}", r.ty),
                    None => r.ty.to_string(),
                })
                .collect();
            let _ = write!(out, " -> ({})", parts.join(", "));
        }
        if let Some(a) = &f.attrs {
            let _ = write!(out, " attributes {{{a}}}");
        }
        out.push_str(" {\n");
        for op in &f.body.ops {
            self.op(out, op, indent + 2);
        }
        let _ = writeln!(out, "{pad}}}");
    }

    pub(super) fn operand_list(&self, op: &Op) -> String {
        let parts: Vec<String> = op.operands.iter().map(|v| self.name(*v)).collect();
        parts.join(", ")
    }

    pub(super) fn operand_types(&self, op: &Op) -> Vec<String> {
        op.operands.iter().map(|v| self.ty(*v)).collect()
    }

    fn result_types(op: &Op) -> Vec<String> {
        op.results.iter().map(|(_, t)| t.to_string()).collect()
    }

    /// `(A, B) -> R`, `(A) -> (R, S)`, `() -> ()`.
    pub(super) fn functional(&self, op: &Op) -> String {
        let ins = self.operand_types(op).join(", ");
        let outs = Self::result_types(op);
        if outs.len() == 1 {
            format!("({ins}) -> {}", outs[0])
        } else {
            format!("({ins}) -> ({})", outs.join(", "))
        }
    }

    /// StableHLO's `SameOperandsAndResultType` spelling: one type when every
    /// operand and the result agree, the functional type otherwise.
    pub(super) fn same_type(&self, op: &Op) -> String {
        let ins = self.operand_types(op);
        let outs = Self::result_types(op);
        if outs.len() == 1 && ins.iter().all(|t| *t == outs[0]) {
            outs[0].clone()
        } else {
            self.functional(op)
        }
    }

    /// Names the op's results; returns the `%r = ` prefix (empty for none).
    pub(super) fn results_prefix(&mut self, op: &Op) -> String {
        match op.results.len() {
            0 => String::new(),
            1 => {
                let (v, t) = &op.results[0];
                let name = match &op.kind {
                    OpKind::Constant(DenseData::Float(_)) => {
                        Self::counter(&mut self.next_cst, "%cst")
                    }
                    OpKind::Constant(DenseData::Int(_)) => Self::counter(&mut self.next_c, "%c"),
                    _ => {
                        self.next_value += 1;
                        format!("%{}", self.next_value - 1)
                    }
                };
                self.define(*v, name.clone(), t);
                format!("{name} = ")
            }
            n => {
                let base = format!("%{}", self.next_value);
                self.next_value += 1;
                for (i, (v, t)) in op.results.iter().enumerate() {
                    self.define(*v, format!("{base}#{i}"), t);
                }
                format!("{base}:{n} = ")
            }
        }
    }

    fn counter(next: &mut Option<usize>, base: &str) -> String {
        let name = match next {
            None => base.to_string(),
            Some(k) => format!("{base}_{k}"),
        };
        *next = Some(next.map_or(0, |k| k + 1));
        name
    }

    /// A region block: `^bb0(args):` at `indent`, ops at `indent + 2`.
    pub(super) fn block(&mut self, out: &mut String, block: &Block, indent: usize) {
        let pad = " ".repeat(indent);
        if !block.args.is_empty() {
            let args: Vec<String> = block
                .args
                .iter()
                .map(|(v, t)| format!("{}: {t}", self.define_arg(*v, t)))
                .collect();
            let _ = writeln!(out, "{pad}^bb0({}):", args.join(", "));
        }
        for op in &block.ops {
            self.op(out, op, indent + 2);
        }
    }
}
