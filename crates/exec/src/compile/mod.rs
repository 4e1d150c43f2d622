//! Lowering a function to a schedule. Elementwise ops stay pending as
//! expressions until something needs their values in memory, then become
//! one fused loop; reshapes share their operand's slot and transposes,
//! reversals and broadcasts are strided views of it; the heavy ops become
//! kernel steps; `while`/`case`/`if` run their regions as sub-plans
//! (`control`); an op with no step runs alone on the generic evaluator (with
//! the outer values its regions read), and a function with calls is not
//! lowered at all (`Plan::compile` inlines them first). One module per op
//! family; `liveness` finishes the schedule.

mod control;
mod elementwise;
mod expr;
mod kernels;
mod liveness;
mod reductions;
mod views;

use crate::fused::ViewSpec;
use crate::rewrites::Rewrites;
use crate::runtime::Compiled;
use crate::schedule::{dims, narrow, Init, Kind, Step};
use expr::{lower, Expr, ExprOp};
use ir::{
    Block, ElemType, Func, FuncResult, Module, Op, OpKind, Param, TensorType, ValueId, Visibility,
};
use std::rc::Rc;

enum Def {
    Undef,
    /// In the slot `root[v]`.
    Mat,
    Pending(Rc<Expr>),
}

/// The lowering state of one function: per value its type, uses, slot and
/// definition (undefined, in its slot, or pending); the steps so far.
pub(crate) struct Builder<'f> {
    f: &'f Func,
    types: Vec<Option<TensorType>>,
    uses: Vec<usize>,
    /// Per value, the index of the last top-level op reading it (or reading
    /// an expression recomputed from it, see `Builder::recompute`).
    last_use: Vec<usize>,
    is_output: Vec<bool>,
    root: Vec<usize>,
    defs: Vec<Def>,
    steps: Vec<Step>,
    outputs: Vec<(usize, TensorType)>,
    /// The rewrites that run (sub-plans of regions take the same).
    rewrites: Rewrites,
}

/// Ids defined inside a block (its arguments and every nested result).
pub(crate) fn defined_in(b: &Block, out: &mut Vec<ValueId>) {
    out.extend(b.args.iter().map(|a| a.0));
    for op in &b.ops {
        out.extend(op.results.iter().map(|r| r.0));
        for r in &op.regions {
            defined_in(r, out);
        }
    }
}

/// Whether `op` is a call or holds one in its regions (a JAX `while` body
/// calls `@closed_call`): a one-op generic step carries no callees, so such a
/// function (one `passes::inline` could not flatten) runs whole on the generic
/// evaluator.
fn calls_a_function(op: &Op) -> bool {
    matches!(op.kind, OpKind::Call { .. })
        || op
            .regions
            .iter()
            .any(|r| r.ops.iter().any(calls_a_function))
}

/// Whether a region reads only its own values.
pub(crate) fn closed(b: &Block) -> bool {
    let mut own = Vec::new();
    defined_in(b, &mut own);
    fn reads_outside(b: &Block, own: &[ValueId]) -> bool {
        b.ops.iter().any(|op| {
            op.operands.iter().any(|v| !own.contains(v))
                || op.regions.iter().any(|r| reads_outside(r, own))
        })
    }
    !reads_outside(b, &own)
}

fn shape_of(t: &TensorType) -> Vec<usize> {
    dims(&t.shape)
}

fn fusable(t: &TensorType) -> bool {
    t.elem.is_float() || t.elem == ElemType::I1
}

fn float(t: &TensorType) -> bool {
    t.elem.is_float()
}

impl<'f> Builder<'f> {
    pub(crate) fn new(f: &'f Func, rewrites: Rewrites) -> Option<Self> {
        let mut n = f
            .params
            .iter()
            .map(|p| p.value.index() + 1)
            .max()
            .unwrap_or(0);
        let mut all = Vec::new();
        defined_in(&f.body, &mut all);
        n = n.max(all.iter().map(|v| v.index() + 1).max().unwrap_or(0));
        let mut types = vec![None; n];
        for p in &f.params {
            types[p.value.index()] = Some(p.ty.clone());
        }
        let mut uses = vec![0; n];
        let mut last_use = vec![0; n];
        let mut is_output = vec![false; n];
        for (at, op) in f.body.ops.iter().enumerate() {
            if calls_a_function(op) {
                return None;
            }
            for r in &op.results {
                types[r.0.index()] = Some(r.1.clone());
            }
            // Outer values a region reads are operands of its step.
            for v in op.operands.iter().chain(&control::captured_by(op)) {
                *uses.get_mut(v.index())? += 1;
                last_use[v.index()] = at;
                if matches!(op.kind, OpKind::FuncReturn) {
                    is_output[v.index()] = true;
                }
            }
        }
        let mut defs: Vec<Def> = (0..n).map(|_| Def::Undef).collect();
        for p in &f.params {
            defs[p.value.index()] = Def::Mat;
        }
        Some(Builder {
            f,
            types,
            uses,
            last_use,
            is_output,
            root: (0..n).collect(),
            defs,
            steps: Vec::new(),
            outputs: Vec::new(),
            rewrites,
        })
    }

    fn ty(&self, v: ValueId) -> Option<&TensorType> {
        self.types.get(v.index())?.as_ref()
    }

    pub(crate) fn build(mut self) -> Option<Compiled> {
        let f = self.f;
        let mut returned = false;
        for op in &f.body.ops {
            if let OpKind::FuncReturn = op.kind {
                for &v in &op.operands {
                    self.materialize(v)?;
                    let ty = self.ty(v)?.clone();
                    self.outputs.push((self.root[v.index()], ty));
                }
                returned = true;
                break;
            }
            if !self.op(op)? {
                self.generic(op)?;
            }
        }
        if !returned {
            return None;
        }
        Some(self.finish())
    }

    fn push(&mut self, op: &Op, label: impl Into<String>, flops: u64, kind: Kind) {
        self.steps.push(Step {
            label: label.into(),
            op: op.kind.name(),
            line: op.loc.line(),
            flops,
            kind,
        });
    }

    /// Materialises `v` into its slot (emitting a loop for a pending expression).
    fn materialize(&mut self, v: ValueId) -> Option<()> {
        let i = v.index();
        match std::mem::replace(self.defs.get_mut(i)?, Def::Mat) {
            Def::Mat => Some(()),
            Def::Undef => None,
            Def::Pending(e) => {
                let len = shape_of(self.ty(v)?).iter().product();
                let (prog, inputs) = lower(&e);
                let ops = prog.op_count();
                let label = if ops == 0 {
                    "copy"
                } else {
                    "fused(elementwise)"
                };
                self.steps.push(Step {
                    label: label.into(),
                    op: "fused",
                    line: None,
                    flops: (ops * len) as u64,
                    kind: Kind::Loop {
                        prog,
                        inputs,
                        out: i,
                        len,
                        in_place: None,
                    },
                });
                Some(())
            }
        }
    }

    /// `v` as an operand of an elementwise op with result shape `want`.
    fn operand(&mut self, v: ValueId, want: &[usize]) -> Option<Rc<Expr>> {
        let shape = shape_of(self.ty(v)?);
        let i = v.index();
        if shape == want {
            if let Def::Pending(e) = &self.defs[i] {
                let e = e.clone();
                if e.is_leaf() || (self.uses[i] == 1 && !self.is_output[i]) || self.recompute(i, &e)
                {
                    return Some(e);
                }
            }
            self.materialize(v)?;
            return Some(Rc::new(Expr::Load(self.root[i])));
        }
        if !shape.is_empty() {
            return None;
        }
        // A scalar operand (select's pred, clamp's bounds) read everywhere.
        if let Def::Pending(e) = &self.defs[i] {
            if let Expr::Splat(x) = **e {
                return Some(Rc::new(Expr::Splat(x)));
            }
        }
        let (slot, spec) = self.view_of(v)?;
        Some(Rc::new(Expr::View(
            slot,
            ViewSpec {
                shape: want.to_vec(),
                strides: vec![0; want.len()],
                base: spec.base,
            },
        )))
    }

    /// Whether value `i`, pending as `e` and read by more than one op, is
    /// recomputed at each use rather than stored: a short chain of cheap ops
    /// (`Expr::recomputable`) that keeps at most one full-size input alive
    /// past its own last use, in place of `i` itself. Batch norm's
    /// `x − μ`, `x̂`, `γx̂ + β`, the ReLU mask `select(y > 0, g, 0)` and
    /// `γ·dy` are each read two or three times (forward and backward): stored,
    /// each costs a write and a read per use of the pre-BN tensor; recomputed,
    /// the forward is the statistics' passes and one normalising pass, the
    /// backward one pass for the four sums and one for dx. The recomputed
    /// ops are the same f32 ops on the same inputs: values are bit-identical.
    fn recompute(&mut self, i: usize, e: &Expr) -> bool {
        if self.is_output[i] {
            return false;
        }
        let Some(big) = e.recomputable() else {
            return false;
        };
        // A bias added to the convolution just computed is folded into the
        // convolution (`passes::fold_conv_bias`): stored, it costs nothing.
        if let (Some(Kind::Conv { out, .. }), Expr::Op(ExprOp::Binary(ir::BinaryOp::Add), args)) =
            (self.steps.last().map(|s| &s.kind), e)
        {
            if args
                .iter()
                .any(|a| matches!(**a, Expr::Load(s) if s == *out))
            {
                return false;
            }
        }
        let until = self.last_use[i];
        if big.iter().filter(|&&s| self.last_use[s] < until).count() > 1 {
            return false;
        }
        // The inputs now live as long as `i` would have: later decisions
        // count them as alive until then.
        for s in big {
            self.last_use[s] = self.last_use[s].max(until);
        }
        true
    }

    /// `v` as a strided view of a materialised slot.
    fn view_of(&mut self, v: ValueId) -> Option<(usize, ViewSpec)> {
        if let Def::Pending(e) = &self.defs[v.index()] {
            if let Expr::View(s, spec) = &**e {
                return Some((*s, spec.clone()));
            }
        }
        self.materialize(v)?;
        Some((
            self.root[v.index()],
            ViewSpec::identity(&shape_of(self.ty(v)?)),
        ))
    }

    fn splat_of(&self, v: ValueId) -> Option<f32> {
        match &self.defs[v.index()] {
            Def::Pending(e) => match **e {
                Expr::Splat(x) => Some(x),
                _ => None,
            },
            _ => None,
        }
    }

    fn pend(&mut self, op: &Op, e: Expr) {
        let ty = &op.results[0].1;
        let e = if narrow(ty.elem) && !matches!(e, Expr::Op(ExprOp::Round(_), _)) {
            Expr::Op(ExprOp::Round(ty.elem), vec![Rc::new(e)])
        } else {
            e
        };
        self.defs[op.results[0].0.index()] = Def::Pending(Rc::new(e));
    }

    /// Pends `op` as `f` of its operands read at the result shape; false when
    /// an operand cannot be read that way.
    fn pend_op(&mut self, op: &Op, rshape: &[usize], f: ExprOp) -> bool {
        let args: Option<Vec<_>> = op
            .operands
            .iter()
            .map(|&v| self.operand(v, rshape))
            .collect();
        let Some(args) = args else {
            return false;
        };
        self.pend(op, Expr::Op(f, args));
        true
    }

    fn init_of(&mut self, v: ValueId) -> Option<Init> {
        if let Some(x) = self.splat_of(v) {
            return Some(Init::Const(x));
        }
        self.materialize(v)?;
        Some(Init::Slot(self.root[v.index()]))
    }

    fn mat_operand(&mut self, v: ValueId) -> Option<(usize, Vec<usize>)> {
        self.materialize(v)?;
        Some((self.root[v.index()], shape_of(self.ty(v)?)))
    }

    /// Plans `op` natively; `Some(false)` when it has no native step (the
    /// caller plans it on the generic evaluator), `None` to give up on the
    /// whole function.
    fn op(&mut self, op: &Op) -> Option<bool> {
        let tys: Vec<TensorType> = op
            .operands
            .iter()
            .map(|&v| self.ty(v).cloned())
            .collect::<Option<_>>()?;
        if let OpKind::While | OpKind::Case | OpKind::If = op.kind {
            return self.control(op);
        }
        if op.results.len() != 1 {
            if let OpKind::AllReduce { .. } = op.kind {
                return self.all_reduce(op);
            }
            return Some(false);
        }
        let rty = op.results[0].1.clone();
        let rshape = shape_of(&rty);
        match &op.kind {
            OpKind::Constant(d) => Some(self.constant(op, d, &rty)),
            OpKind::Unary(_)
            | OpKind::Binary(_)
            | OpKind::Compare { .. }
            | OpKind::Select
            | OpKind::Clamp => self.elementwise(op, &tys, rty, rshape),
            OpKind::Convert => self.convert(op, &tys, rty, rshape),
            OpKind::Reshape => self.reshape(op, &tys, rty, rshape),
            OpKind::BroadcastInDim { dims: bd } => self.broadcast_in_dim(op, bd, &tys, rty, rshape),
            OpKind::Transpose { permutation } => self.transpose(op, permutation, &tys, rty, rshape),
            OpKind::Reverse { dims: rd } => self.reverse(op, rd, &tys, rty),
            OpKind::Convolution(a) => self.convolution(op, a, &tys, rty, rshape),
            OpKind::DotGeneral { dims: dd, .. } => self.dot_general(op, dd, &tys, rty, rshape),
            OpKind::Reduce { dims: rd } => self.reduce(op, rd, &tys, rty, rshape),
            OpKind::ReduceWindow(wa) => self.reduce_window(op, wa, &tys, rty, rshape),
            OpKind::SelectAndScatter(sa) => self.select_and_scatter(op, sa, &tys, rty, rshape),
            OpKind::AllReduce { .. } => self.all_reduce(op),
            OpKind::Pad { low, interior, .. } => self.pad(op, low, interior, &tys, rty, rshape),
            OpKind::Slice { start, strides, .. } => {
                self.slice(op, start, strides, &tys, rty, rshape)
            }
            OpKind::Concatenate { dim } => self.concatenate(op, *dim, &tys, rty, rshape),
            // The generic step: ops with no kernel run alone on den's
            // evaluator inside the plan (`Kind::Generic`), so a plan runs
            // every op the evaluator runs. Ops added to the evaluator without
            // a kernel belong here. (Calls and terminators never get here:
            // `Builder::new` declines functions with calls, `build` takes the
            // return.)
            OpKind::Iota { .. }
            | OpKind::Gather(_)
            | OpKind::Scatter(_)
            | OpKind::DynamicSlice { .. }
            | OpKind::DynamicUpdateSlice
            | OpKind::While
            | OpKind::Case
            | OpKind::If
            | OpKind::Sort { .. }
            | OpKind::Map { .. }
            | OpKind::OptimizationBarrier
            | OpKind::BitcastConvert
            | OpKind::ReducePrecision { .. }
            | OpKind::GetDimensionSize { .. }
            | OpKind::TopK { .. }
            | OpKind::TriangularSolve { .. }
            | OpKind::Call { .. }
            | OpKind::Return
            | OpKind::FuncReturn => Some(false),
        }
    }

    /// Plans `op` alone on the generic evaluator; the outer values its
    /// regions read become parameters of its one-op function.
    fn generic(&mut self, op: &Op) -> Option<()> {
        let mut ids: Vec<ValueId> = Vec::new();
        for &v in op.operands.iter().chain(&control::captured_by(op)) {
            if !ids.contains(&v) {
                ids.push(v);
            }
        }
        let mut operands = Vec::new();
        let mut params = Vec::new();
        for &v in &ids {
            self.materialize(v)?;
            let ty = self.ty(v)?.clone();
            operands.push((self.root[v.index()], ty.clone()));
            params.push(Param {
                value: v,
                ty,
                attrs: None,
            });
        }
        let ret = Op {
            kind: OpKind::FuncReturn,
            operands: op.results.iter().map(|r| r.0).collect(),
            results: vec![],
            regions: vec![],
            extra_attrs: vec![],
            loc: op.loc,
        };
        let func = Func {
            name: "op".into(),
            visibility: Visibility::Public,
            body: Block {
                args: params.iter().map(|p| (p.value, p.ty.clone())).collect(),
                ops: vec![op.clone(), ret],
            },
            params,
            results: op
                .results
                .iter()
                .map(|r| FuncResult {
                    ty: r.1.clone(),
                    attrs: None,
                })
                .collect(),
            attrs: None,
        };
        let module = Module {
            name: None,
            attrs: None,
            funcs: vec![func],
        };
        let results: Vec<usize> = op.results.iter().map(|r| r.0.index()).collect();
        for &r in &results {
            self.defs[r] = Def::Mat;
        }
        self.push(
            op,
            format!("generic({})", op.kind.name()),
            0,
            Kind::Generic {
                module,
                operands,
                results,
            },
        );
        Some(())
    }
}
