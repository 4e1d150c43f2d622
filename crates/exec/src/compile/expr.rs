//! Pending elementwise expressions (a value not yet in memory, as a tree of
//! ops over slots, views and splats) and their lowering to a fused loop's
//! register program.

use crate::fused::{Node, Program, ViewSpec};
use ir::{BinaryOp, ElemType, UnaryOp};
use std::collections::HashMap;
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

/// At most this many distinct nodes in an expression recomputed at each of
/// its uses (`Expr::recomputable`): batch norm's longest, the ReLU mask of
/// `γ·(x − μ)·istd + β`, has 13.
const RECOMPUTE_NODES: usize = 24;

impl Expr {
    pub(super) fn is_leaf(&self) -> bool {
        !matches!(self, Expr::Op(..))
    }

    /// Whether the expression's own (top) op is a transcendental function or
    /// another op [`Expr::recomputable`] does not repeat below the top.
    pub(super) fn top_is_costly(&self) -> bool {
        matches!(self, Expr::Op(o, _) if !cheap_op(o))
    }

    /// The full-size slots the expression reads (loads, and views that
    /// broadcast nothing), when it is cheap to compute again at another use:
    /// at most [`RECOMPUTE_NODES`] distinct nodes, every op below the top one
    /// a rational arithmetic op, comparison, select, clamp or rounding (the
    /// transcendental functions cost more than the pass they would save).
    /// The top op may be any: EfficientNet-B0's σ(x), read by the forward and
    /// the backward, is cheaper computed twice than stored across the net
    /// (its b8 SGD step took 1.3× as long, with 120 MB more peak RSS, stored).
    pub(super) fn recomputable(&self) -> Option<Vec<usize>> {
        fn go(e: &Rc<Expr>, seen: &mut Vec<*const Expr>, big: &mut Vec<usize>) -> Option<()> {
            let p = Rc::as_ptr(e);
            if seen.contains(&p) {
                return Some(());
            }
            seen.push(p);
            if seen.len() > RECOMPUTE_NODES {
                return None;
            }
            let mut slot = |s: usize| {
                if !big.contains(&s) {
                    big.push(s);
                }
            };
            match &**e {
                Expr::Load(s) => slot(*s),
                Expr::View(s, spec) => {
                    if !spec
                        .strides
                        .iter()
                        .zip(&spec.shape)
                        .any(|(&st, &n)| st == 0 && n > 1)
                    {
                        slot(*s)
                    }
                }
                Expr::Splat(_) => {}
                Expr::Op(o, args) => {
                    if !cheap_op(o) {
                        return None;
                    }
                    for a in args {
                        go(a, seen, big)?;
                    }
                }
            }
            Some(())
        }
        let Expr::Op(_, args) = self else {
            return Some(Vec::new());
        };
        let mut seen = Vec::new();
        let mut big = Vec::new();
        for a in args {
            go(a, &mut seen, &mut big)?;
        }
        (seen.len() < RECOMPUTE_NODES).then_some(big)
    }
}

/// Ops cheap enough to compute again at another use: rational arithmetic,
/// comparisons, select, clamp and rounding.
fn cheap_op(o: &ExprOp) -> bool {
    match o {
        ExprOp::Unary(u) => {
            matches!(u, UnaryOp::Negate | UnaryOp::Abs | UnaryOp::Square)
        }
        ExprOp::Binary(b) => matches!(
            b,
            BinaryOp::Add
                | BinaryOp::Subtract
                | BinaryOp::Multiply
                | BinaryOp::Divide
                | BinaryOp::Maximum
                | BinaryOp::Minimum
        ),
        ExprOp::Compare(..)
        | ExprOp::Select
        | ExprOp::Clamp
        | ExprOp::Round(_)
        | ExprOp::NotZero => true,
    }
}

/// An expression as a register program over distinct input slots; a
/// subexpression shared by several ops (one recomputed at its uses, see
/// `Builder::recompute`) is computed once.
pub(super) fn lower(e: &Rc<Expr>) -> (Program, Vec<usize>) {
    fn go(
        e: &Rc<Expr>,
        nodes: &mut Vec<Node>,
        inputs: &mut Vec<usize>,
        done: &mut HashMap<*const Expr, usize>,
    ) -> usize {
        if let Some(&k) = done.get(&Rc::as_ptr(e)) {
            return k;
        }
        let mut input = |s: usize| {
            inputs.iter().position(|&x| x == s).unwrap_or_else(|| {
                inputs.push(s);
                inputs.len() - 1
            })
        };
        let node = match &**e {
            Expr::Load(s) => Node::Load(input(*s)),
            Expr::View(s, spec) => Node::View(input(*s), spec.merged()),
            Expr::Splat(x) => Node::Splat(*x),
            Expr::Op(o, args) => {
                let a: Vec<usize> = args.iter().map(|x| go(x, nodes, inputs, done)).collect();
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
        done.insert(Rc::as_ptr(e), nodes.len() - 1);
        nodes.len() - 1
    }
    let mut nodes = Vec::new();
    let mut inputs = Vec::new();
    go(e, &mut nodes, &mut inputs, &mut HashMap::new());
    // Equal leaves and ops built apart (each use makes its own load or view).
    let (nodes, _) = crate::passes::dedupe_nodes(&nodes);
    (
        Program {
            nodes,
            fault: 0.0,
            stores_first: false,
        },
        inputs,
    )
}
