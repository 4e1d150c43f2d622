//! reduce, reduce_window and select_and_scatter with the reducers the plan
//! knows: add-reductions fused with the elementwise expression they sum,
//! other reductions and windows on den's fast kernels, tiling max/min pools
//! and their select_and_scatter on the plan's own kernels.

use super::{float, lower, shape_of, Builder, Def};
use crate::fused::ViewSpec;
use crate::pool;
use crate::schedule::{Kind, ReduceOut};
use den::eval::as_compare_selector;
use den::fast::ReduceKind;
use ir::{BinaryOp, ElemType, Op, ScatterWindowAttrs, TensorType, WindowAttrs};

fn reduce_kind(b: Option<BinaryOp>) -> Option<ReduceKind> {
    match b? {
        BinaryOp::Add => Some(ReduceKind::Add),
        BinaryOp::Maximum => Some(ReduceKind::Max),
        BinaryOp::Minimum => Some(ReduceKind::Min),
        BinaryOp::Multiply => Some(ReduceKind::Mul),
        _ => None,
    }
}

/// f32-computed element types whose results need no rounding.
fn wide(e: ElemType) -> bool {
    matches!(e, ElemType::F32 | ElemType::F64)
}

impl Builder<'_> {
    /// The pending expression of `v` when a reduction should store it while
    /// summing it: its top op is costly (softmax's `exp`) and another op, or
    /// the function's result, reads it too. Inlined into each reader, it
    /// would be computed again; materialised by its own loop, it would cost
    /// a pass more.
    fn shared_costly(&self, v: ir::ValueId) -> Option<std::rc::Rc<super::Expr>> {
        let i = v.index();
        match &self.defs[i] {
            Def::Pending(e) if e.top_is_costly() && (self.uses[i] > 1 || self.is_output[i]) => {
                Some(e.clone())
            }
            _ => None,
        }
    }

    /// `reduce` of one input: a fused reduction for add, else den's fold.
    pub(super) fn reduce(
        &mut self,
        op: &Op,
        rd: &[i64],
        tys: &[TensorType],
        rty: TensorType,
        rshape: Vec<usize>,
    ) -> Option<bool> {
        let Some(kind) = reduce_kind(op.regions.first().and_then(|b| b.as_binary_reducer())) else {
            return Some(false);
        };
        if !(tys.len() == 2
            && wide(tys[0].elem)
            && wide(rty.elem)
            && tys[1].shape.is_empty()
            && float(&tys[1]))
        {
            return Some(false);
        }
        let s = shape_of(&tys[0]);
        let mut seen = vec![false; s.len()];
        if rd.iter().any(|&d| {
            d < 0 || d as usize >= s.len() || std::mem::replace(&mut seen[d as usize], true)
        }) {
            return Some(false);
        }
        let kept: Vec<usize> = (0..s.len()).filter(|&d| !seen[d]).collect();
        if kept.iter().map(|&d| s[d]).collect::<Vec<_>>() != rshape {
            return Some(false);
        }
        let init = self.init_of(op.operands[1])?;
        let out = op.results[0].0.index();
        let len: usize = s.iter().product();
        if kind == ReduceKind::Add {
            let (e, store) = match self.shared_costly(op.operands[0]) {
                Some(e) => (e, true),
                None => match self.operand(op.operands[0], &s) {
                    Some(e) => (e, false),
                    None => return Some(false),
                },
            };
            let ostr = den::tensor::row_major_strides(&rshape);
            let mut strides = vec![0isize; s.len()];
            for (k, &d) in kept.iter().enumerate() {
                strides[d] = ostr[k] as isize;
            }
            let map = ViewSpec {
                shape: s.clone(),
                strides,
                base: 0,
            }
            .merged();
            let (prog, inputs) = lower(&e);
            let flops = ((prog.op_count() + 1) * len) as u64;
            let node = prog.nodes.len() - 1;
            let stores = if store {
                let v = op.operands[0].index();
                self.defs[v] = Def::Mat;
                vec![(v, node)]
            } else {
                Vec::new()
            };
            let kind = Kind::Reduce {
                prog,
                inputs,
                outs: vec![ReduceOut {
                    slot: out,
                    init,
                    node,
                }],
                len,
                map,
                out_len: rshape.iter().product(),
                stores,
                store_in_place: None,
            };
            self.push(op, "fused(reduce)", flops, kind);
        } else {
            if tys[0].elem != ElemType::F32 || rty.elem != ElemType::F32 {
                return Some(false);
            }
            let input = self.mat_operand(op.operands[0])?;
            let kind = Kind::ReduceFold {
                input,
                init,
                kind,
                dims: rd.iter().map(|&d| d as usize).collect(),
                out,
                shape: rshape,
            };
            self.push(op, "stablehlo.reduce", len as u64, kind);
        }
        self.defs[out] = Def::Mat;
        Some(true)
    }

    /// `reduce_window`: tiling max/min pools on the plan's kernel, others on den's.
    pub(super) fn reduce_window(
        &mut self,
        op: &Op,
        wa: &WindowAttrs,
        tys: &[TensorType],
        rty: TensorType,
        rshape: Vec<usize>,
    ) -> Option<bool> {
        let Some(kind) = reduce_kind(op.regions.first().and_then(|b| b.as_binary_reducer())) else {
            return Some(false);
        };
        if !(tys.len() == 2
            && tys[0].elem == ElemType::F32
            && rty.elem == ElemType::F32
            && tys[1].shape.is_empty()
            && float(&tys[1]))
        {
            return Some(false);
        }
        let init = self.init_of(op.operands[1])?;
        let input = self.mat_operand(op.operands[0])?;
        let window: i64 = wa.window_dimensions.iter().product();
        let flops = rshape.iter().product::<usize>() as u64 * window.max(1) as u64;
        let out = op.results[0].0.index();
        let tiles = matches!(kind, ReduceKind::Max | ReduceKind::Min)
            .then(|| {
                pool::Tiles::new(
                    &input.1,
                    &rshape,
                    &wa.window_dimensions,
                    &wa.window_strides,
                    &wa.padding,
                    [&wa.base_dilations, &wa.window_dilations],
                )
            })
            .flatten();
        let kind = Kind::Window {
            input,
            init,
            kind,
            attrs: wa.clone(),
            out,
            shape: rshape,
            tiles,
        };
        let label = match &kind {
            Kind::Window { tiles: Some(_), .. } => "stablehlo.reduce_window (tiled)",
            _ => "stablehlo.reduce_window",
        };
        self.push(op, label, flops, kind);
        self.defs[out] = Def::Mat;
        Some(true)
    }

    /// `select_and_scatter` with an add scatter region.
    pub(super) fn select_and_scatter(
        &mut self,
        op: &Op,
        sa: &ScatterWindowAttrs,
        tys: &[TensorType],
        rty: TensorType,
        rshape: Vec<usize>,
    ) -> Option<bool> {
        if op.regions.len() != 2 || op.regions[1].as_binary_reducer() != Some(BinaryOp::Add) {
            return Some(false);
        }
        let Some(select) = as_compare_selector(&op.regions[0]) else {
            return Some(false);
        };
        if !(tys.len() == 3
            && tys[0].elem == ElemType::F32
            && tys[1].elem == ElemType::F32
            && rty.elem == ElemType::F32
            && tys[2].shape.is_empty()
            && float(&tys[2])
            && tys[0].shape == rty.shape)
        {
            return Some(false);
        }
        let init = self.init_of(op.operands[2])?;
        let operand = self.mat_operand(op.operands[0])?;
        let source = self.mat_operand(op.operands[1])?;
        let flops = rshape.iter().product::<usize>() as u64;
        let out = op.results[0].0.index();
        let tiles = pool::Tiles::new(
            &operand.1,
            &source.1,
            &sa.window_dimensions,
            &sa.window_strides,
            &sa.padding,
            [&[], &[]],
        );
        let kind = Kind::Scatter {
            operand,
            source,
            init,
            select,
            attrs: sa.clone(),
            out,
            tiles,
        };
        let label = match &kind {
            Kind::Scatter { tiles: Some(_), .. } => "stablehlo.select_and_scatter (tiled)",
            _ => "stablehlo.select_and_scatter",
        };
        self.push(op, label, flops, kind);
        self.defs[out] = Def::Mat;
        Some(true)
    }
}
