//! The generic evaluator: runs a function of an `ir::Module` over any
//! [`Scalar`], one function per op following the StableHLO specification
//! (families in `elementwise`, `shape`, `linalg`, `reduce`; indexed data
//! movement in `gather`, `sort`; region-driven ops — while, case, if, map,
//! scatter's and sort's regions — in `control`), recording the
//! decision margins the certifier needs and dispatching heavy ops to the fast
//! f32 kernels when asked.
//!
//! Op indices (for margins) are pre-order within a function: an op, then the
//! ops of its regions, then the next op.
//!
//! Memory in a function's body follows liveness: each value is dropped after
//! its last use; an elementwise op writes its result over an operand that
//! dies at it, a reshape moves its dying operand, and a broadcast or splat
//! constant whose one reader is such an op is read where its elements lie
//! (`View`). Each element is computed by the same function from the same
//! operands either way, so the numbers are those of fresh tensors; only the
//! allocations (and their page faults) are saved.

mod bits;
mod control;
mod dispatch;
mod elementwise;
mod fastpath;
mod gather;
mod index;
mod linalg;
mod par;
mod profile;
mod reduce;
mod replica;
mod report;
mod schedule;
mod shape;
mod sort;
mod topk;
mod triangular;

use profile::{print_op_times, profile_label, profiling};
use schedule::{consumable, drop_schedule, max_value_id, region_op_count, view_schedule};

pub use control::branch_index;
pub use elementwise::wrap_int;
pub use reduce::as_compare_selector;
pub use replica::eval_replicas;
pub(crate) use report::{Decisions, Fail};
pub use report::{EvalError, Evaluation, Margin, NonFinite};

use crate::scalar::Scalar;
use crate::value::Value;
use ir::{Block, Func, Module, Op, OpKind};
use std::collections::HashMap;

#[derive(Clone, Debug)]
pub struct EvalOptions {
    /// Use the fast f32 kernels when the scalar is `f32` (decision ops only
    /// when margins are not recorded).
    pub fast: bool,
    pub record_margins: bool,
    /// Number of replicas (1: `all_reduce` is the identity). More than one
    /// is for [`eval_replicas`], which runs the replicas and sets it.
    pub replicas: usize,
}

impl Default for EvalOptions {
    fn default() -> Self {
        EvalOptions {
            fast: true,
            record_margins: false,
            replicas: 1,
        }
    }
}

/// Evaluate `func` of `m` on `inputs` (checked against its signature).
pub fn eval_func<S: Scalar>(
    m: &Module,
    func: &str,
    inputs: Vec<Value<S>>,
    opts: &EvalOptions,
) -> Result<Evaluation<S>, EvalError> {
    let f = m.func(func).ok_or_else(|| EvalError {
        func: func.to_string(),
        op: "func.func",
        line: None,
        message: format!("no function @{func} in the module"),
    })?;
    check_sizes::<S>(m)?;
    let mut interp = Interp {
        module: m,
        opts,
        margins: Vec::new(),
        margin_slot: HashMap::new(),
        first_non_finite: None,
        depth: 0,
        op_times: HashMap::new(),
        consumed: Vec::new(),
        views: HashMap::new(),
    };
    let outputs = interp.call(f, inputs)?;
    if profiling() {
        print_op_times(func, &S::type_name(), &interp.op_times);
    }
    let mut margins = interp.margins;
    margins.sort_by(|a, b| a.func.cmp(&b.func).then(a.op_index.cmp(&b.op_index)));
    Ok(Evaluation {
        outputs,
        margins,
        first_non_finite: interp.first_non_finite,
    })
}

/// Refuses, before anything is allocated, a module holding a value larger
/// than the memory limit (`ir::limits`) at `S`'s size per element.
pub fn check_sizes<S>(m: &Module) -> Result<(), EvalError> {
    ir::limits::check_module(m, Some(std::mem::size_of::<S>())).map_err(|e| EvalError {
        func: e.func.clone(),
        op: e.op,
        line: e.loc.map(|(l, _)| l),
        message: match e.loc {
            Some((_, col)) => format!("(column {col}) {}", e.what()),
            None => e.what(),
        },
    })
}

/// Calls deeper than this are taken to be runaway recursion.
const MAX_CALL_DEPTH: usize = 256;

struct Interp<'m> {
    module: &'m Module,
    opts: &'m EvalOptions,
    margins: Vec<Margin>,
    /// (function, op index) → position in `margins`.
    margin_slot: HashMap<(String, usize), usize>,
    first_non_finite: Option<NonFinite>,
    depth: usize,
    /// With `CERTGRAD_PROFILE` set: (calls, nanoseconds) per op name,
    /// over the top-level ops of every function body evaluated.
    op_times: HashMap<&'static str, (u64, u64)>,
    /// The operands the last op wrote its result over or read as a view
    /// (env indices), each with whether all its elements were finite (see
    /// `note_non_finite`: they are gone from the env).
    consumed: Vec<(usize, bool)>,
    /// The current function body's values left as views (env index →
    /// `View<S>`, typed per scalar), until the one op that reads each.
    views: HashMap<usize, Box<dyn std::any::Any>>,
}

/// A broadcast_in_dim or splat constant not materialised: its one reader, a
/// binary elementwise op, writes its result over its other operand and reads
/// this one's elements where they lie (`src` at `strides` over `shape`), so
/// the full tensor is never allocated or written.
struct View<S> {
    src: Vec<S>,
    shape: Vec<usize>,
    strides: Vec<isize>,
    elem: ir::ElemType,
    /// Whether every element is finite.
    finite: bool,
}

impl<S: Scalar> View<S> {
    /// The value the op would have produced (a strided gather, as `broadcast_in_dim`'s).
    fn materialise(self) -> Value<S> {
        let data = par::strided(&self.src, &self.shape, &self.strides, 0);
        Value::Float(crate::tensor::Tensor::new(self.shape, data), self.elem)
    }
}

type Env<S> = Vec<Option<Value<S>>>;

impl<'m> Interp<'m> {
    fn call<S: Scalar>(
        &mut self,
        f: &'m Func,
        inputs: Vec<Value<S>>,
    ) -> Result<Vec<Value<S>>, EvalError> {
        let err = |message: String| EvalError {
            func: f.name.clone(),
            op: "func.func",
            line: None,
            message,
        };
        if inputs.len() != f.params.len() {
            return Err(err(format!(
                "expected {} inputs, got {}",
                f.params.len(),
                inputs.len()
            )));
        }
        if self.depth >= MAX_CALL_DEPTH {
            return Err(err("call depth exceeded (recursive call?)".into()));
        }
        let mut env: Env<S> = vec![None; max_value_id(&f.body)];
        for (i, (p, v)) in f.params.iter().zip(inputs).enumerate() {
            if v.ty() != p.ty {
                return Err(err(format!(
                    "input {i} has type {}, the signature says {}",
                    v.ty(),
                    p.ty
                )));
            }
            // Inputs are values of the parameter's type: round them as any op
            // result is rounded (the identity unless the scalar narrows), in
            // place (they are ours, and can be as large as the parameters).
            let v = match v {
                Value::Float(mut t, e) => {
                    for x in &mut t.data {
                        *x = x.clone().round_to(e);
                    }
                    Value::Float(t, e)
                }
                v => v,
            };
            env[p.value.index()] = Some(v);
        }
        self.depth += 1;
        // The caller's views are its own (indices are per function).
        let views = std::mem::take(&mut self.views);
        let out = self.run_block(f, &mut env, &f.body, 0);
        self.views = views;
        self.depth -= 1;
        let out = out?;
        for (i, (v, r)) in out.iter().zip(&f.results).enumerate() {
            if v.ty() != r.ty {
                return Err(err(format!(
                    "result {i} has type {}, the signature says {}",
                    v.ty(),
                    r.ty
                )));
            }
        }
        Ok(out)
    }

    /// Run `block` (its arguments already bound); the values its terminator returns.
    fn run_block<S: Scalar>(
        &mut self,
        f: &'m Func,
        env: &mut Env<S>,
        block: &'m Block,
        first_index: usize,
    ) -> Result<Vec<Value<S>>, EvalError> {
        let mut idx = first_index;
        // A function's body drops each value after its last use (peak memory
        // is the live set, not every intermediate); region blocks run once
        // per element or iteration, where the schedule would cost more than
        // it frees.
        let drops = std::ptr::eq(block, &f.body).then(|| drop_schedule(block));
        // Views in a function's body (whose drop schedule says which
        // operands die), for scalars that are never undefined (that check
        // reads each op's results).
        let views = drops
            .as_ref()
            .filter(|_| !S::MAY_BE_UNDEFINED)
            .map(|d| view_schedule(block, d));
        for (k, op) in block.ops.iter().enumerate() {
            if op.kind.is_terminator() {
                // Nothing reads a function body's values after its return:
                // the results are moved out (a value returned twice is
                // cloned for all but its last place). A region's block runs
                // again and may return values from outside it: cloned.
                let ops = &op.operands;
                return ops
                    .iter()
                    .enumerate()
                    .map(|(i, v)| {
                        let last = drops.is_some() && !ops[i + 1..].contains(v);
                        let moved = if last {
                            env.get_mut(v.index()).and_then(Option::take)
                        } else {
                            None
                        };
                        match moved {
                            Some(x) => Ok(x),
                            None => get(env, *v).cloned(),
                        }
                    })
                    .collect::<Result<Vec<_>, Fail>>()
                    .map_err(|e| e.place(f, op));
            }
            if views.as_ref().is_some_and(|w| w[k]) {
                if let Some(view) = self.view::<S>(env, op).map_err(|e| e.place(f, op))? {
                    self.views.insert(op.results[0].0.index(), Box::new(view));
                    if let Some(d) = &drops {
                        for &v in &d[k] {
                            env[v] = None;
                        }
                    }
                    idx += 1 + region_op_count(op);
                    continue;
                }
            }
            let t0 = (drops.is_some() && profiling()).then(std::time::Instant::now);
            let over = drops.as_ref().map_or(0, |d| consumable(op, &d[k]));
            let results = self
                .eval_op(f, env, op, idx, over)
                .map_err(|e| e.place(f, op))?;
            let consumed = std::mem::take(&mut self.consumed);
            if let Some(t0) = t0 {
                let e = self.op_times.entry(profile_label(op)).or_default();
                e.0 += 1;
                e.1 += t0.elapsed().as_nanos() as u64;
            }
            if self.opts.record_margins && self.first_non_finite.is_none() {
                self.note_non_finite(f, env, op, &results, &consumed);
            }
            if results.len() != op.results.len() {
                return Err(Fail::msg(format!(
                    "produced {} results, the op declares {}",
                    results.len(),
                    op.results.len()
                ))
                .place(f, op));
            }
            for ((id, ty), v) in op.results.iter().zip(results) {
                if v.ty() != *ty {
                    return Err(Fail::msg(format!(
                        "computed a {} where the op declares {}",
                        v.ty(),
                        ty
                    ))
                    .place(f, op));
                }
                if S::MAY_BE_UNDEFINED {
                    if let Some(t) = v.as_float() {
                        if let Some((i, why)) = t
                            .data
                            .iter()
                            .enumerate()
                            .find_map(|(i, x)| x.undefined().map(|w| (i, w)))
                        {
                            return Err(Fail::msg(format!(
                                "not exact (result element {i} is not a real number: {why})"
                            ))
                            .place(f, op));
                        }
                    }
                }
                env[id.index()] = Some(v);
            }
            if let Some(drops) = &drops {
                for &v in &drops[k] {
                    env[v] = None;
                }
            }
            idx += 1 + region_op_count(op);
        }
        Err(EvalError {
            func: f.name.clone(),
            op: "func.func",
            line: None,
            message: "block has no terminator".into(),
        })
    }

    /// Remember `op` as where non-finite values began if it made one from
    /// finite float operands (see [`Evaluation::first_non_finite`]).
    fn note_non_finite<S: Scalar>(
        &mut self,
        f: &Func,
        env: &Env<S>,
        op: &Op,
        results: &[Value<S>],
        consumed: &[(usize, bool)],
    ) {
        if matches!(op.kind, OpKind::Constant(_)) {
            return;
        }
        let first_bad = |v: &Value<S>| {
            v.as_float()
                .and_then(|t| t.data.iter().position(|x| !x.all_finite()))
                .map(|i| (i, v.as_float().map_or(0.0, |t| t.data[i].to_f64())))
        };
        let Some((index, value)) = results.iter().find_map(first_bad) else {
            return;
        };
        let operands_finite =
            op.operands
                .iter()
                .all(|v| match consumed.iter().find(|(c, _)| *c == v.index()) {
                    Some(&(_, finite)) => finite,
                    None => get(env, *v).map_or(true, |x| first_bad(x).is_none()),
                });
        if operands_finite {
            self.first_non_finite = Some(NonFinite {
                func: f.name.clone(),
                op: op.kind.name(),
                line: op.loc.line(),
                index,
                value,
            });
        }
    }

    fn record(&mut self, f: &Func, op: &Op, op_index: usize, d: &Decisions) {
        if d.decisions == 0 {
            return;
        }
        let key = (f.name.clone(), op_index);
        match self.margin_slot.get(&key) {
            Some(&i) => {
                let m = &mut self.margins[i];
                if d.min < m.min {
                    m.min = d.min;
                    m.argmin = d.argmin;
                }
                m.near = m.near.min(d.near);
                m.ties += d.ties;
                m.decisions += d.decisions;
                if m.outcomes.len() < d.outcomes.len() {
                    m.outcomes.resize(d.outcomes.len(), 0);
                }
                for (a, b) in m.outcomes.iter_mut().zip(&d.outcomes) {
                    *a += b;
                }
            }
            None => {
                self.margin_slot.insert(key, self.margins.len());
                self.margins.push(Margin {
                    func: f.name.clone(),
                    op_index,
                    op: op.kind.name(),
                    line: op.loc.line(),
                    min: d.min,
                    argmin: d.argmin,
                    near: d.near,
                    ties: d.ties,
                    decisions: d.decisions,
                    outcomes: d.outcomes.clone(),
                });
            }
        }
    }

    fn eval_op<S: Scalar>(
        &mut self,
        f: &'m Func,
        env: &mut Env<S>,
        op: &'m Op,
        op_index: usize,
        over: u8,
    ) -> Result<Vec<Value<S>>, Fail> {
        let mut dec = self.opts.record_margins.then(Decisions::new);
        let out = self.eval_op_inner(f, env, op, op_index, dec.as_mut(), over)?;
        if let Some(d) = &dec {
            self.record(f, op, op_index, d);
        }
        Ok(out)
    }

    /// `op` (a broadcast_in_dim or a splat constant) as a [`View`]; `None`
    /// when its operand or types are not ones a view holds (the op then runs
    /// as usual and reports what is wrong). A broadcast's errors are its own.
    fn view<S: Scalar>(&self, env: &Env<S>, op: &Op) -> Result<Option<View<S>>, Fail> {
        let [(_, ty)] = op.results.as_slice() else {
            return Ok(None);
        };
        let (src, elem, shape, strides) = match &op.kind {
            OpKind::BroadcastInDim { dims } if op.operands.len() == 1 => {
                let Value::Float(t, e) = get(env, op.operands[0])? else {
                    return Ok(None);
                };
                if *e != ty.elem {
                    return Ok(None);
                }
                let dims: Vec<usize> = dims.iter().map(|&d| d.max(0) as usize).collect();
                let (shape, strides) = shape::broadcast_strides(&t.shape, &dims, ty)?;
                (t.data.clone(), *e, shape, strides)
            }
            OpKind::Constant(d) if d.len() == 1 => {
                let scalar = ir::TensorType::new(Vec::new(), ty.elem);
                let Value::Float(t, e) = shape::constant::<S>(d, &scalar)? else {
                    return Ok(None);
                };
                let shape = shape::dims_usize(ty);
                let strides = vec![0; shape.len()];
                (t.data, e, shape, strides)
            }
            _ => return Ok(None),
        };
        let finite = src.iter().all(S::all_finite);
        Ok(Some(View {
            src,
            shape,
            strides,
            elem,
            finite,
        }))
    }

    /// `reduce` or `reduce_window` of `op`: `fast` (the fast kernel, given
    /// the one input, its init, the recognised reducer and the result type)
    /// when allowed, else `generic` (the evaluator's op, given the inputs,
    /// inits, reducer, region body, result types and margin sink) with the
    /// recognised binary reducer applied directly or, failing that, the
    /// region evaluated on detached operands.
    #[allow(clippy::too_many_arguments)]
    fn eval_reduction<S: Scalar>(
        &mut self,
        f: &'m Func,
        env: &mut Env<S>,
        op: &'m Op,
        op_index: usize,
        dec: Option<&mut Decisions>,
        fast: impl FnOnce(
            &Value<S>,
            &Value<S>,
            Option<ir::BinaryOp>,
            &ir::TensorType,
        ) -> Option<Value<S>>,
        generic: impl Fn(
            &[&Value<S>],
            &[&Value<S>],
            Option<ir::BinaryOp>,
            &mut reduce::Body<'_, S>,
            &[ir::TensorType],
            Option<&mut Decisions>,
        ) -> Result<Vec<Value<S>>, Fail>,
    ) -> Result<Vec<Value<S>>, Fail> {
        let (inputs, inits) = self.split_inputs(env, op)?;
        let region = single_region(op, 0)?;
        let reducer = region.as_binary_reducer();
        let ty = op
            .results
            .first()
            .map(|r| &r.1)
            .ok_or_else(|| Fail::msg("op declares no result"))?;
        if inputs.len() == 1 {
            let decides = matches!(reducer, Some(ir::BinaryOp::Maximum | ir::BinaryOp::Minimum));
            if let Some(v) = self
                .fast_ok(decides)
                .then(|| fast(inputs[0], inits[0], reducer, ty))
                .flatten()
            {
                return Ok(vec![v]);
            }
        }
        if direct_reducer(&inputs, reducer) {
            return generic(
                &inputs,
                &inits,
                reducer,
                &mut no_region,
                &result_types(op),
                dec,
            );
        }
        // The region reads and writes the environment: detach the operands.
        let (inputs, inits) = (owned(&inputs), owned(&inits));
        let mut body =
            |r: usize, args: Vec<Value<S>>| self.run_region(f, env, op, op_index, r, args);
        generic(
            &refs(&inputs),
            &refs(&inits),
            reducer,
            &mut body,
            &result_types(op),
            dec,
        )
    }

    /// Whether to use the fast f32 kernels for this op (decision ops only
    /// when no margins are recorded).
    fn fast_ok(&self, decides: bool) -> bool {
        self.opts.fast && !(decides && self.opts.record_margins)
    }

    /// Variadic (inputs…, inits…) operands.
    #[allow(clippy::type_complexity)]
    fn split_inputs<'e, S: Scalar>(
        &self,
        env: &'e Env<S>,
        op: &Op,
    ) -> Result<(Vec<&'e Value<S>>, Vec<&'e Value<S>>), Fail> {
        let n = op.operands.len();
        if n == 0 || !n.is_multiple_of(2) || op.results.len() != n / 2 {
            return Err(Fail::msg("expected inputs and as many init values"));
        }
        let all = op
            .operands
            .iter()
            .map(|v| get(env, *v))
            .collect::<Result<Vec<_>, _>>()?;
        if all[n / 2..].iter().any(|v| !v.shape().is_empty()) {
            return Err(Fail::msg("init values must be scalars"));
        }
        let (a, b) = all.split_at(n / 2);
        Ok((a.to_vec(), b.to_vec()))
    }

    /// Run region `r` of `op` on `args` (rank-0 values).
    fn run_region<S: Scalar>(
        &mut self,
        f: &'m Func,
        env: &mut Env<S>,
        op: &'m Op,
        op_index: usize,
        r: usize,
        args: Vec<Value<S>>,
    ) -> Result<Vec<Value<S>>, Fail> {
        let block = single_region(op, r)?;
        if args.len() != block.args.len() {
            return Err(Fail::msg(format!(
                "region {r} takes {} arguments, given {}",
                block.args.len(),
                args.len()
            )));
        }
        for ((id, _), v) in block.args.iter().zip(args) {
            env[id.index()] = Some(v);
        }
        let first = op_index
            + 1
            + op.regions[..r]
                .iter()
                .flat_map(|b| &b.ops)
                .map(|o| 1 + region_op_count(o))
                .sum::<usize>();
        self.run_block(f, env, block, first).map_err(Fail::Placed)
    }
}

fn get<S>(env: &Env<S>, v: ir::ValueId) -> Result<&Value<S>, Fail> {
    env.get(v.index())
        .and_then(|x| x.as_ref())
        .ok_or_else(|| Fail::msg(format!("operand %{} is not defined", v.0)))
}

/// The first operand position in `over` (see `consumable`) whose value an
/// elementwise op may write its result over: every operand is a float
/// tensor of that value's shape (otherwise the op takes its usual path, which
/// also reports what is wrong).
fn over_operand<S>(env: &Env<S>, op: &Op, over: u8) -> Option<usize> {
    if over == 0 {
        return None;
    }
    let shapes = op
        .operands
        .iter()
        .map(|v| match env.get(v.index())? {
            Some(Value::Float(t, _)) => Some(t.shape.as_slice()),
            _ => None,
        })
        .collect::<Option<Vec<_>>>()?;
    if shapes.windows(2).any(|w| w[0] != w[1]) {
        return None;
    }
    (0..op.operands.len().min(8)).find(|p| over & (1 << p) != 0)
}

fn floats2<'e, S: Scalar>(
    env: &'e Env<S>,
    op: &Op,
) -> Result<(&'e crate::tensor::Tensor<S>, &'e crate::tensor::Tensor<S>), Fail> {
    let x = get(env, op.operands[0])?.as_float();
    let y = get(env, op.operands[1])?.as_float();
    match (x, y) {
        (Some(x), Some(y)) => Ok((x, y)),
        _ => Err(Fail::msg("integer operands are not supported")),
    }
}

/// Both operands as integer tensors (and their element type), `None` when
/// both are floats; an error when they mix.
#[allow(clippy::type_complexity)]
fn ints2<'e, S: Scalar>(
    env: &'e Env<S>,
    op: &Op,
) -> Result<
    Option<(
        &'e crate::tensor::Tensor<i64>,
        &'e crate::tensor::Tensor<i64>,
        ir::ElemType,
    )>,
    Fail,
> {
    let (x, y) = (get(env, op.operands[0])?, get(env, op.operands[1])?);
    match (x, y) {
        (Value::Int(a, e), Value::Int(b, _)) => Ok(Some((a, b, *e))),
        (Value::Float(..), Value::Float(..)) => Ok(None),
        _ => Err(Fail::msg("operands mix float and integer types")),
    }
}

fn single_region(op: &Op, r: usize) -> Result<&Block, Fail> {
    op.regions
        .get(r)
        .ok_or_else(|| Fail::msg(format!("missing region {r}")))
}

/// Whether the reduction takes the direct path (no region evaluation).
fn direct_reducer<S: Scalar>(inputs: &[&Value<S>], reducer: Option<ir::BinaryOp>) -> bool {
    use ir::BinaryOp::*;
    inputs.len() == 1
        && inputs[0].as_float().is_some()
        && matches!(reducer, Some(Add | Multiply | Maximum | Minimum))
}

/// The region callback of a direct path, which never evaluates a region.
fn no_region<S>(_: usize, _: Vec<Value<S>>) -> Result<Vec<Value<S>>, Fail> {
    Err(Fail::msg("internal: direct path asked for its region"))
}

fn owned<S: Clone>(vs: &[&Value<S>]) -> Vec<Value<S>> {
    vs.iter().map(|v| (*v).clone()).collect()
}

fn refs<S>(vs: &[Value<S>]) -> Vec<&Value<S>> {
    vs.iter().collect()
}

fn result_types(op: &Op) -> Vec<ir::TensorType> {
    op.results.iter().map(|r| r.1.clone()).collect()
}
