//! Whole-module verification: SSA scoping, terminators, call signatures, and
//! every op's types re-inferred.
//!
//! A module that verifies is one the evaluator, the printer and the certifier can
//! take at face value: every operand names a value visible at its use, every
//! block ends in the right terminator, every op's stated result types are the
//! ones [`crate::infer::infer_result_types`] derives, and value ids are in the
//! canonical order of [`crate::module`] (so `==` on modules is meaningful).

use crate::infer::infer_result_types;
use crate::module::{Block, Func, Module, Op, ValueId};
use crate::ops::OpKind;
use crate::types::TensorType;
use std::collections::{HashMap, HashSet};
use std::fmt;

/// Why a module does not verify: in which function, at which op (and source
/// line when the module was parsed), and what is wrong.
#[derive(Clone, Debug, PartialEq)]
pub struct VerifyError {
    pub func: String,
    /// Op name (`stablehlo.add`); `func.func` for problems with the function
    /// itself (signature, duplicate name).
    pub op: &'static str,
    pub line: Option<u32>,
    pub message: String,
}

impl fmt::Display for VerifyError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "func @{}", self.func)?;
        if let Some(l) = self.line {
            write!(f, ", line {l}")?;
        }
        write!(f, ": {}: {}", self.op, self.message)
    }
}

impl std::error::Error for VerifyError {}

/// Check the whole module; the first problem found is reported.
pub fn verify_module(m: &Module) -> Result<(), VerifyError> {
    let mut seen = HashSet::new();
    for f in &m.funcs {
        if !seen.insert(f.name.as_str()) {
            return Err(func_error(f, "function name defined twice".into()));
        }
    }
    for f in &m.funcs {
        verify_func(m, f)?;
    }
    Ok(())
}

fn func_error(f: &Func, message: String) -> VerifyError {
    VerifyError {
        func: f.name.clone(),
        op: "func.func",
        line: None,
        message,
    }
}

/// Per-function walk state.
struct Walk<'m> {
    module: &'m Module,
    func: &'m Func,
    /// Values visible at the current point, with their types.
    scope: HashMap<ValueId, TensorType>,
    /// Next id in canonical order.
    next_id: u32,
    /// The operand types of the last `stablehlo.return` walked: what the
    /// region just verified returns, outer values included.
    returned: Vec<TensorType>,
}

fn verify_func(m: &Module, f: &Func) -> Result<(), VerifyError> {
    if f.params.len() != f.body.args.len() {
        return Err(func_error(
            f,
            format!(
                "{} parameters but the body block has {} arguments",
                f.params.len(),
                f.body.args.len()
            ),
        ));
    }
    for (i, (p, (v, t))) in f.params.iter().zip(&f.body.args).enumerate() {
        if p.value != *v || p.ty != *t {
            return Err(func_error(
                f,
                format!("parameter #{i} does not match body argument #{i}"),
            ));
        }
    }
    let mut w = Walk {
        module: m,
        func: f,
        scope: HashMap::new(),
        next_id: 0,
        returned: Vec::new(),
    };
    w.block(&f.body, true)
}

impl Walk<'_> {
    /// Regions of control-flow ops may return values from outside them, whose
    /// types inference cannot see: check them here, where the scope is known.
    fn control_flow_returns(
        &self,
        op: &Op,
        operand_types: &[TensorType],
        given: &[TensorType],
        region_returns: &[Vec<TensorType>],
    ) -> Result<(), VerifyError> {
        let i1 = [TensorType::scalar(crate::types::ElemType::I1)];
        for (i, got) in region_returns.iter().enumerate() {
            let want = match op.kind {
                OpKind::Case | OpKind::If => given,
                OpKind::While if i == 0 => &i1,
                OpKind::While => operand_types,
                _ => continue,
            };
            if got.as_slice() != want {
                return Err(self.error(
                    op,
                    format!(
                        "region {i} returns ({}), expected ({})",
                        list(got),
                        list(want)
                    ),
                ));
            }
        }
        Ok(())
    }

    fn error(&self, op: &Op, message: String) -> VerifyError {
        VerifyError {
            func: self.func.name.clone(),
            op: op.kind.name(),
            line: op.loc.line(),
            message,
        }
    }

    /// Define `v` in scope, checking it is the next id in canonical order (which
    /// also makes ids unique).
    fn define(&mut self, v: ValueId, t: &TensorType) -> Result<(), String> {
        if v.0 != self.next_id {
            return Err(format!(
                "value id %{} is not canonical (expected %{})",
                v.0, self.next_id
            ));
        }
        self.next_id += 1;
        self.scope.insert(v, t.clone());
        Ok(())
    }

    /// Verify `b`; `is_body` selects `func.return` (function body) over
    /// `stablehlo.return` (op region) as the required terminator. Values the
    /// block defines leave scope when it ends.
    fn block(&mut self, b: &Block, is_body: bool) -> Result<(), VerifyError> {
        let mut defined: Vec<ValueId> = Vec::new();
        let terminator = if is_body {
            OpKind::FuncReturn
        } else {
            OpKind::Return
        };
        for (v, t) in &b.args {
            self.define(*v, t).map_err(|message| VerifyError {
                func: self.func.name.clone(),
                op: if is_body { "func.func" } else { "block" },
                line: None,
                message,
            })?;
            defined.push(*v);
        }
        let Some(last) = b.ops.last() else {
            return Err(VerifyError {
                func: self.func.name.clone(),
                op: terminator.name(),
                line: None,
                message: "block is empty; it must end with a terminator".into(),
            });
        };
        if last.kind != terminator {
            return Err(self.error(last, format!("block must end with {}", terminator.name())));
        }
        for (i, op) in b.ops.iter().enumerate() {
            if op.kind.is_terminator() && i + 1 != b.ops.len() {
                return Err(self.error(op, "terminator before the end of its block".into()));
            }
            self.op(op)?;
            defined.extend(op.results.iter().map(|(v, _)| *v));
        }
        for v in defined {
            self.scope.remove(&v);
        }
        Ok(())
    }

    fn op(&mut self, op: &Op) -> Result<(), VerifyError> {
        let mut operand_types = Vec::with_capacity(op.operands.len());
        for (i, v) in op.operands.iter().enumerate() {
            match self.scope.get(v) {
                Some(t) => operand_types.push(t.clone()),
                None => {
                    return Err(self.error(
                        op,
                        format!("operand #{i} %{} is not defined before use", v.0),
                    ))
                }
            }
        }
        let mut region_returns = Vec::with_capacity(op.regions.len());
        for r in &op.regions {
            self.block(r, false)?;
            region_returns.push(std::mem::take(&mut self.returned));
        }
        if op.kind == OpKind::Return {
            self.returned = operand_types.clone();
        }
        let given: Vec<TensorType> = op.results.iter().map(|(_, t)| t.clone()).collect();
        self.control_flow_returns(op, &operand_types, &given, &region_returns)?;
        let inferred = infer_result_types(&op.kind, &operand_types, &op.regions, Some(&given))
            .map_err(|e| self.error(op, e.message))?;
        if inferred != given {
            return Err(self.error(
                op,
                format!("result types {given:?} do not match inferred {inferred:?}"),
            ));
        }
        match &op.kind {
            OpKind::FuncReturn => {
                let want = self.func.result_types();
                if operand_types != want {
                    return Err(self.error(
                        op,
                        format!(
                            "returns ({}) but the function declares ({})",
                            list(&operand_types),
                            list(&want)
                        ),
                    ));
                }
            }
            OpKind::Call { callee } => {
                let Some(c) = self.module.func(callee) else {
                    return Err(self.error(op, format!("callee @{callee} does not exist")));
                };
                let (params, results) = (c.param_types(), c.result_types());
                if operand_types != params {
                    return Err(self.error(
                        op,
                        format!(
                            "operands ({}) do not match @{callee} parameters ({})",
                            list(&operand_types),
                            list(&params)
                        ),
                    ));
                }
                if given != results {
                    return Err(self.error(
                        op,
                        format!(
                            "results ({}) do not match @{callee} results ({})",
                            list(&given),
                            list(&results)
                        ),
                    ));
                }
            }
            _ => {}
        }
        for (v, t) in &op.results {
            self.define(*v, t).map_err(|m| self.error(op, m))?;
        }
        Ok(())
    }
}

fn list(ts: &[TensorType]) -> String {
    ts.iter()
        .map(|t| t.to_string())
        .collect::<Vec<_>>()
        .join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::builder::FuncBuilder;
    use crate::module::{SrcLoc, Visibility};
    use crate::ops::BinaryOp;

    /// `main(x: 2xf32) -> 2xf32 { y = x + x; z = call @h(y); return z }` and a
    /// private `h` that negates.
    fn module() -> Module {
        let mut h = FuncBuilder::new("h", Visibility::Private);
        let a = h.param(TensorType::f32(vec![2]));
        let n = h
            .push1(OpKind::Unary(crate::ops::UnaryOp::Negate), &[a], None)
            .unwrap();
        let h = h.finish(&[n]).unwrap();
        let mut b = FuncBuilder::new("main", Visibility::Public);
        let x = b.param(TensorType::f32(vec![2]));
        let y = b.binary(BinaryOp::Add, x, x).unwrap();
        let t = TensorType::f32(vec![2]);
        let z = b
            .push(
                OpKind::Call { callee: "h".into() },
                &[y],
                Vec::new(),
                Some(&[t]),
            )
            .unwrap()[0];
        let main = b.finish(&[z]).unwrap();
        Module {
            name: None,
            attrs: None,
            funcs: vec![main, h],
        }
    }

    fn err(m: &Module) -> String {
        verify_module(m).expect_err("should not verify").to_string()
    }

    #[test]
    fn well_formed_module_verifies() {
        verify_module(&module()).unwrap();
    }

    #[test]
    fn use_before_definition() {
        let mut m = module();
        m.funcs[0].body.ops[0].operands[1] = ValueId(7);
        m.funcs[0].body.ops[0].loc = SrcLoc(Some((12, 5)));
        assert_eq!(
            err(&m),
            "func @main, line 12: stablehlo.add: operand #1 %7 is not defined before use"
        );
    }

    #[test]
    fn terminators() {
        let mut m = module();
        m.funcs[1].body.ops.last_mut().unwrap().kind = OpKind::Return;
        assert_eq!(
            err(&m),
            "func @h: stablehlo.return: block must end with func.return"
        );
        let mut m = module();
        m.funcs[1].body.ops.pop();
        assert_eq!(
            err(&m),
            "func @h: stablehlo.negate: block must end with func.return"
        );
        let mut m = module();
        let ret = m.funcs[1].body.ops.last().unwrap().clone();
        m.funcs[1].body.ops.insert(0, ret);
        assert_eq!(
            err(&m),
            "func @h: func.return: terminator before the end of its block"
        );
    }

    #[test]
    fn return_and_call_signatures() {
        let mut m = module();
        m.funcs[1].results[0].ty = TensorType::f32(vec![3]);
        // The call in @main no longer matches @h's declared results either, but
        // @main's call is checked first.
        assert_eq!(
            err(&m),
            "func @main: func.call: results (tensor<2xf32>) do not match @h results (tensor<3xf32>)"
        );
        m.funcs.swap(0, 1);
        assert_eq!(
            err(&m),
            "func @h: func.return: returns (tensor<2xf32>) but the function declares (tensor<3xf32>)"
        );
        let mut m = module();
        if let OpKind::Call { callee } = &mut m.funcs[0].body.ops[1].kind {
            *callee = "missing".into();
        }
        assert_eq!(
            err(&m),
            "func @main: func.call: callee @missing does not exist"
        );
        let mut m = module();
        m.funcs[1].params[0].ty = TensorType::f32(vec![4]);
        m.funcs[1].body.args[0].1 = TensorType::f32(vec![4]);
        assert!(err(&m).starts_with(
            "func @main: func.call: operands (tensor<2xf32>) do not match @h parameters (tensor<4xf32>)"
        ));
    }

    #[test]
    fn result_types_are_reinferred() {
        let mut m = module();
        m.funcs[0].body.ops[0].results[0].1 = TensorType::f32(vec![3]);
        assert_eq!(
            err(&m),
            "func @main: stablehlo.add: result #0 type tensor<3xf32> does not match \
             inferred tensor<2xf32>: dimension 0 is 3, expected 2"
        );
    }

    #[test]
    fn ids_must_be_canonical_and_unique() {
        let mut m = module();
        // Swap the ids of the add result and the call result (uses follow).
        let f = &mut m.funcs[0];
        f.body.ops[0].results[0].0 = ValueId(2);
        f.body.ops[1].operands[0] = ValueId(2);
        f.body.ops[1].results[0].0 = ValueId(1);
        f.body.ops[2].operands[0] = ValueId(1);
        assert_eq!(
            err(&m),
            "func @main: stablehlo.add: value id %2 is not canonical (expected %1)"
        );
        let mut m = module();
        m.funcs[0].body.ops[1].results[0].0 = ValueId(1);
        assert_eq!(
            err(&m),
            "func @main: func.call: value id %1 is not canonical (expected %2)"
        );
        let mut m = module();
        m.funcs.push(m.funcs[1].clone());
        assert_eq!(err(&m), "func @h: func.func: function name defined twice");
    }

    #[test]
    fn region_values_leave_scope() {
        let mut b = FuncBuilder::new("main", Visibility::Public);
        let x = b.param(TensorType::f32(vec![3]));
        let init = b.splat(0.0, TensorType::scalar(crate::ElemType::F32));
        let body = b
            .binary_region(BinaryOp::Add, crate::ElemType::F32)
            .unwrap();
        let r = b
            .push(
                OpKind::Reduce { dims: vec![0] },
                &[x, init],
                vec![body],
                None,
            )
            .unwrap()[0];
        // Return a region argument (id 2) from the function body instead of r.
        let mut f = b.finish(&[r]).unwrap();
        f.body.ops.last_mut().unwrap().operands[0] = ValueId(2);
        let m = Module {
            name: None,
            attrs: None,
            funcs: vec![f],
        };
        assert_eq!(
            err(&m),
            "func @main: func.return: operand #0 %2 is not defined before use"
        );
    }
}
