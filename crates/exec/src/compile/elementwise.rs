//! Elementwise ops and constants: pended as expressions that a fused loop
//! computes later (a splat constant stays a leaf of them).

use super::{float, fusable, shape_of, Builder, Def, Expr, ExprOp};
use crate::fused;
use crate::schedule::{narrow, ConstData, Kind};
use den::eval::wrap_int;
use den::Scalar;
use ir::{BinaryOp, CompareType, DenseData, ElemType, Op, OpKind, TensorType};
use std::rc::Rc;

impl Builder<'_> {
    /// Unary, binary, compare, select and clamp on floats: pended as that op
    /// of its operands read at the result shape.
    pub(super) fn elementwise(
        &mut self,
        op: &Op,
        tys: &[TensorType],
        rty: TensorType,
        rshape: Vec<usize>,
    ) -> Option<bool> {
        let f = match &op.kind {
            OpKind::Unary(u) => {
                if !(tys.len() == 1 && float(&tys[0]) && float(&rty) && fused::fusable_unary(*u)) {
                    return Some(false);
                }
                ExprOp::Unary(*u)
            }
            // i1 `and`/`or` (ReLU6's two-sided mask): i1 values are 0/1 in
            // the fused loops, where they are `min`/`max`.
            OpKind::Binary(b @ (BinaryOp::And | BinaryOp::Or))
                if tys.len() == 2
                    && tys.iter().all(|t| t.elem == ElemType::I1)
                    && rty.elem == ElemType::I1 =>
            {
                ExprOp::Binary(match b {
                    BinaryOp::And => BinaryOp::Minimum,
                    _ => BinaryOp::Maximum,
                })
            }
            OpKind::Binary(b) => {
                if !(tys.len() == 2
                    && tys.iter().all(float)
                    && float(&rty)
                    && fused::fusable_binary(*b))
                {
                    return Some(false);
                }
                ExprOp::Binary(*b)
            }
            OpKind::Compare {
                direction,
                compare_type,
            } => {
                if !(tys.len() == 2 && tys.iter().all(float) && rty.elem == ElemType::I1) {
                    return Some(false);
                }
                let total = *compare_type == Some(CompareType::TotalOrder);
                ExprOp::Compare(*direction, total)
            }
            OpKind::Select => {
                if !(tys.len() == 3
                    && tys[0].elem == ElemType::I1
                    && float(&tys[1])
                    && float(&tys[2])
                    && tys[1].shape == rty.shape
                    && tys[2].shape == rty.shape)
                {
                    return Some(false);
                }
                ExprOp::Select
            }
            OpKind::Clamp => {
                if !(tys.len() == 3 && tys.iter().all(float) && tys[1].shape == rty.shape) {
                    return Some(false);
                }
                ExprOp::Clamp
            }
            _ => return Some(false),
        };
        Some(self.pend_op(op, &rshape, f))
    }

    /// `convert` between floats and i1 (0/1): a rounding, a `!= 0` or nothing.
    pub(super) fn convert(
        &mut self,
        op: &Op,
        tys: &[TensorType],
        rty: TensorType,
        rshape: Vec<usize>,
    ) -> Option<bool> {
        if tys.len() != 1 || !fusable(&tys[0]) || !fusable(&rty) || tys[0].shape != rty.shape {
            return Some(false);
        }
        let Some(a) = self.operand(op.operands[0], &rshape) else {
            return Some(false);
        };
        let e = match (float(&tys[0]), float(&rty)) {
            (_, true) if narrow(rty.elem) => Rc::new(Expr::Op(ExprOp::Round(rty.elem), vec![a])),
            // f32 → f32/f64 and i1 (0/1) → float are the identity.
            (_, true) => a,
            (true, false) => Rc::new(Expr::Op(ExprOp::NotZero, vec![a])),
            (false, false) => return Some(false),
        };
        self.defs[op.results[0].0.index()] = Def::Pending(e);
        Some(true)
    }

    /// `constant`: a splat pends as a leaf; other float and integer data
    /// become a constant step (an i1 array is left to the generic evaluator).
    pub(super) fn constant(&mut self, op: &Op, d: &DenseData, ty: &TensorType) -> bool {
        let n: usize = shape_of(ty).iter().product();
        if d.len() != n && d.len() != 1 {
            return false;
        }
        let r = op.results[0].0.index();
        let floats = |e: ElemType| -> Vec<f32> {
            match d {
                DenseData::Float(v) => v.iter().map(|&x| (x as f32).round_to(e)).collect(),
                DenseData::Int(v) => v.iter().map(|&x| (x as f32).round_to(e)).collect(),
            }
        };
        if ty.elem.is_float() || ty.elem == ElemType::I1 {
            let vals = if ty.elem == ElemType::I1 {
                ints(d)
                    .iter()
                    .map(|&x| wrap_int(x, ElemType::I1) as f32)
                    .collect()
            } else {
                floats(ty.elem)
            };
            if vals.len() == 1 {
                self.defs[r] = Def::Pending(Rc::new(Expr::Splat(vals[0])));
                return true;
            }
            if ty.elem == ElemType::I1 {
                return false;
            }
            self.push(
                op,
                "stablehlo.constant",
                0,
                Kind::Const {
                    out: r,
                    data: ConstData::F(vals),
                },
            );
        } else {
            let vals: Vec<i64> = ints(d).iter().map(|&x| wrap_int(x, ty.elem)).collect();
            let vals = if vals.len() == 1 {
                vec![vals[0]; n]
            } else {
                vals
            };
            self.push(
                op,
                "stablehlo.constant",
                0,
                Kind::Const {
                    out: r,
                    data: ConstData::I(vals),
                },
            );
        }
        self.defs[r] = Def::Mat;
        true
    }
}

fn ints(d: &DenseData) -> Vec<i64> {
    match d {
        DenseData::Int(v) => v.clone(),
        DenseData::Float(v) => v.iter().map(|&x| x as i64).collect(),
    }
}
