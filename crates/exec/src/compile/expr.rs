//! Pending elementwise expressions (a value not yet in memory, as a tree of
//! ops over slots, views and splats) and their lowering to a fused loop's
//! register program.

use crate::fused::{Node, Program, ViewSpec};
use ir::{BinaryOp, ElemType};
use std::rc::Rc;

/// An elementwise expression not yet materialised.
#[derive(Debug)]
pub(super) enum Expr {
    /// A materialised slot, element for element.
    Load(usize),
    /// A materialised slot through a strided view.
    View(usize, ViewSpec),
    Splat(f32),
    Op(ExprOp, Vec<Rc<Expr>>),
}

#[derive(Clone, Copy, Debug)]
pub(super) enum ExprOp {
    Unary(ir::UnaryOp),
    Binary(BinaryOp),
    Compare(ir::CompareDirection, bool),
    Select,
    Clamp,
    Round(ElemType),
    NotZero,
}

impl Expr {
    pub(super) fn is_leaf(&self) -> bool {
        !matches!(self, Expr::Op(..))
    }
}

/// An expression as a register program over distinct input slots.
pub(super) fn lower(e: &Rc<Expr>) -> (Program, Vec<usize>) {
    fn go(e: &Expr, nodes: &mut Vec<Node>, inputs: &mut Vec<usize>) -> usize {
        let mut input = |s: usize| {
            inputs.iter().position(|&x| x == s).unwrap_or_else(|| {
                inputs.push(s);
                inputs.len() - 1
            })
        };
        let node = match e {
            Expr::Load(s) => Node::Load(input(*s)),
            Expr::View(s, spec) => Node::View(input(*s), spec.merged()),
            Expr::Splat(x) => Node::Splat(*x),
            Expr::Op(o, args) => {
                let a: Vec<usize> = args.iter().map(|x| go(x, nodes, inputs)).collect();
                match o {
                    ExprOp::Unary(u) => Node::Unary(*u, a[0]),
                    ExprOp::Binary(b) => Node::Binary(*b, a[0], a[1]),
                    ExprOp::Compare(d, t) => Node::Compare(*d, *t, a[0], a[1]),
                    ExprOp::Select => Node::Select(a[0], a[1], a[2]),
                    ExprOp::Clamp => Node::Clamp(a[0], a[1], a[2]),
                    ExprOp::Round(el) => Node::Round(*el, a[0]),
                    ExprOp::NotZero => Node::NotZero(a[0]),
                }
            }
        };
        nodes.push(node);
        nodes.len() - 1
    }
    let mut nodes = Vec::new();
    let mut inputs = Vec::new();
    go(e, &mut nodes, &mut inputs);
    (Program { nodes, fault: 0.0 }, inputs)
}
