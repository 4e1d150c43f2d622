//! Building functions op by op. Every op goes through type inference
//! ([`crate::infer::infer_result_types`]), so an ill-typed op is rejected where it
//! is built, with a message naming the op and the mismatching dimensions.

use crate::infer::{infer_result_types, TypeError};
use crate::module::{Block, Func, FuncResult, Op, Param, SrcLoc, ValueId, Visibility};
use crate::ops::{BinaryOp, DenseData, OpKind};
use crate::types::{ElemType, TensorType};

/// Builds one function. Regions are built with [`FuncBuilder::region`].
pub struct FuncBuilder {
    name: String,
    visibility: Visibility,
    params: Vec<Param>,
    /// Type of every value created so far, indexed by id.
    types: Vec<TensorType>,
    /// Innermost block last; `blocks[0]` is the function body.
    blocks: Vec<Block>,
}

impl FuncBuilder {
    pub fn new(name: impl Into<String>, visibility: Visibility) -> Self {
        FuncBuilder {
            name: name.into(),
            visibility,
            params: Vec::new(),
            types: Vec::new(),
            blocks: vec![Block::default()],
        }
    }

    fn fresh(&mut self, ty: TensorType) -> ValueId {
        let v = ValueId(self.types.len() as u32);
        self.types.push(ty);
        v
    }

    /// Add a function parameter. All parameters must be added before any op.
    pub fn param(&mut self, ty: TensorType) -> ValueId {
        assert!(
            self.blocks.len() == 1 && self.blocks[0].ops.is_empty(),
            "FuncBuilder::param after ops were built"
        );
        let v = self.fresh(ty.clone());
        self.blocks[0].args.push((v, ty.clone()));
        self.params.push(Param {
            value: v,
            ty,
            attrs: None,
        });
        v
    }

    pub fn ty(&self, v: ValueId) -> &TensorType {
        &self.types[v.index()]
    }

    /// Append an op; result types are inferred (and checked against `given` when
    /// the op's result type is not derivable from its operands).
    pub fn push(
        &mut self,
        kind: OpKind,
        operands: &[ValueId],
        regions: Vec<Block>,
        given: Option<&[TensorType]>,
    ) -> Result<Vec<ValueId>, TypeError> {
        let operand_types: Vec<TensorType> = operands.iter().map(|v| self.ty(*v).clone()).collect();
        let result_types = infer_result_types(&kind, &operand_types, &regions, given)?;
        let results: Vec<(ValueId, TensorType)> = result_types
            .into_iter()
            .map(|t| (self.fresh(t.clone()), t))
            .collect();
        let ids = results.iter().map(|(v, _)| *v).collect();
        self.blocks.last_mut().expect("open block").ops.push(Op {
            kind,
            operands: operands.to_vec(),
            results,
            regions,
            extra_attrs: Vec::new(),
            loc: SrcLoc::default(),
        });
        Ok(ids)
    }

    /// Append a single-result op.
    pub fn push1(
        &mut self,
        kind: OpKind,
        operands: &[ValueId],
        given: Option<TensorType>,
    ) -> Result<ValueId, TypeError> {
        let given = given.map(|t| vec![t]);
        let r = self.push(kind, operands, Vec::new(), given.as_deref())?;
        Ok(r[0])
    }

    /// Build a region (a single block with arguments of `arg_types`), terminated by
    /// `stablehlo.return` of the values `body` returns.
    pub fn region(
        &mut self,
        arg_types: &[TensorType],
        body: impl FnOnce(&mut Self, &[ValueId]) -> Result<Vec<ValueId>, TypeError>,
    ) -> Result<Block, TypeError> {
        let mut block = Block::default();
        let mut args = Vec::new();
        for t in arg_types {
            let v = self.fresh(t.clone());
            block.args.push((v, t.clone()));
            args.push(v);
        }
        self.blocks.push(block);
        let rets = body(self, &args);
        let rets = match rets {
            Ok(r) => r,
            Err(e) => {
                self.blocks.pop();
                return Err(e);
            }
        };
        self.push(OpKind::Return, &rets, Vec::new(), None)?;
        Ok(self.blocks.pop().expect("region block"))
    }

    /// A reducer region `(a, b) -> a <op> b` over scalars of `elem`.
    pub fn binary_region(&mut self, op: BinaryOp, elem: ElemType) -> Result<Block, TypeError> {
        let s = TensorType::scalar(elem);
        self.region(&[s.clone(), s], |b, a| {
            Ok(vec![b.push1(OpKind::Binary(op), &[a[0], a[1]], None)?])
        })
    }

    /// `stablehlo.constant` of a splat value, rounded to the element type (as the
    /// text would store it).
    pub fn splat(&mut self, value: f64, ty: TensorType) -> ValueId {
        let data = if ty.elem.is_float() {
            DenseData::Float(vec![crate::literal::round_to_elem(value, ty.elem)])
        } else {
            DenseData::Int(vec![value as i64])
        };
        self.push1(OpKind::Constant(data), &[], Some(ty))
            .expect("splat constant is well typed")
    }

    pub fn binary(&mut self, op: BinaryOp, a: ValueId, b: ValueId) -> Result<ValueId, TypeError> {
        self.push1(OpKind::Binary(op), &[a, b], None)
    }

    /// Close the function with `func.return` of `results`.
    pub fn finish(mut self, results: &[ValueId]) -> Result<Func, TypeError> {
        assert_eq!(self.blocks.len(), 1, "FuncBuilder::finish inside a region");
        let result_types: Vec<FuncResult> = results
            .iter()
            .map(|v| FuncResult {
                ty: self.ty(*v).clone(),
                attrs: None,
            })
            .collect();
        self.push(OpKind::FuncReturn, results, Vec::new(), None)?;
        let body = self.blocks.pop().expect("body");
        Ok(Func {
            name: self.name,
            visibility: self.visibility,
            params: self.params,
            results: result_types,
            body,
            attrs: None,
        })
    }
}
