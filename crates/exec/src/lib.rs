//! The compiled f32 executor: a function of an `ir::Module` turned once into a
//! straight-line schedule of steps (fused elementwise loops, fused
//! add-reductions, the fast kernels for convolution / dot_general / pooling,
//! and the generic evaluator for single ops it has no step for), with buffers
//! released by liveness into a size-keyed pool so a repeated run neither keeps
//! every intermediate alive nor re-zeroes fresh pages.
//!
//! It computes what `eval_func::<f32>` computes: elementwise ops are the same
//! f32 operations (bit-identical); convolutions, dots and sums accumulate in
//! a different order (the fast kernels' agreement bound). Reshape is free
//! (the result shares its operand's buffer); transpose, reverse and
//! broadcast_in_dim are strided reads fused into their consumers. A function
//! with calls or regions that read outer values runs on the generic evaluator
//! (fast kernels) as a whole.

mod fused;
mod passes;
mod pool;

use den::eval::{as_compare_selector, eval_func, wrap_int, EvalError, EvalOptions};
use den::fast::{self, ReduceKind};
use den::scalar::Scalar;
use den::tensor::Tensor;
use den::value::Value;
use passes::cse;
use fused::{Input, Merged, Node, Program, ViewSpec};
use ir::{
    BinaryOp, Block, CompareType, ConvAttrs, DenseData, DotDims, ElemType, Func, FuncResult,
    Module, Op, OpKind, Param, ScatterWindowAttrs, TensorType, ValueId, Visibility, WindowAttrs,
};
use std::collections::HashMap;
use std::rc::Rc;
use std::time::Instant;

/// Time spent in one kind of step, summed over the calls of `Plan::run`
/// since profiling was switched on.
#[derive(Clone, Debug, PartialEq)]
pub struct OpTime {
    /// `stablehlo.convolution`, `fused(elementwise)`, `fused(reduce)`,
    /// `copy` (a materialised transpose/broadcast/reverse), `generic(stablehlo.pad)`, …
    pub op: String,
    pub calls: u64,
    pub nanos: u64,
    /// Floating-point operations (2 per multiply-add; 1 per fused elementwise op and element).
    pub flops: u64,
}

/// Time spent in one step of the plan (see [`Plan::step_profile`]).
#[derive(Clone, Debug, PartialEq)]
pub struct StepTime {
    pub op: String,
    /// Source line of the op the step comes from, when known.
    pub line: Option<u32>,
    /// Elements a fused loop iterates (0 for other steps).
    pub elements: usize,
    /// Elementwise ops fused into the loop.
    pub ops: usize,
    /// Buffers the loop reads.
    pub inputs: usize,
    pub calls: u64,
    pub nanos: u64,
}

/// A compiled f32 execution plan for one function (see the module docs).
pub struct Plan {
    func: String,
    params: Vec<TensorType>,
    body: Body,
    profile: bool,
    parallel: bool,
}

enum Body {
    /// Calls or captured values: the generic evaluator runs the whole function.
    Generic(Box<Module>),
    Compiled(Compiled),
}

impl Plan {
    /// Compiles `func` of `module`. Never fails on a function the generic
    /// evaluator can run: what the plan has no step for runs on the generic
    /// evaluator (one op, or the whole function).
    pub fn compile(module: &Module, func: &str) -> Result<Plan, EvalError> {
        let f = module.func(func).ok_or_else(|| EvalError {
            func: func.to_string(),
            op: "func.func",
            line: None,
            message: format!("no function @{func} in the module"),
        })?;
        let deduplicated = cse::eliminate_common_subexpressions(f);
        let body = match Builder::new(&deduplicated).and_then(|b| b.build()) {
            Some(c) => Body::Compiled(c),
            None => Body::Generic(Box::new(module.clone())),
        };
        Ok(Plan {
            func: func.to_string(),
            params: f.params.iter().map(|p| p.ty.clone()).collect(),
            body,
            profile: false,
            parallel: true,
        })
    }

    /// Runs the function on `inputs` (checked against its signature as
    /// `eval_func` checks them); the outputs are `eval_func`'s outputs.
    pub fn run(&mut self, inputs: Vec<Value<f32>>) -> Result<Vec<Value<f32>>, EvalError> {
        match &mut self.body {
            Body::Generic(m) => {
                let opts = EvalOptions {
                    fast: true,
                    record_margins: false,
                    replicas: 1,
                };
                eval_func(m, &self.func, inputs, &opts).map(|e| e.outputs)
            }
            Body::Compiled(c) => {
                check_inputs(&self.func, &self.params, &inputs)?;
                c.run(&self.func, inputs, self.profile, self.parallel)
            }
        }
    }

    /// Times every step from now on (a little overhead per step).
    pub fn set_profile(&mut self, on: bool) {
        self.profile = on;
    }

    /// Whether loops over large buffers may use rayon's threads (default on).
    pub fn set_parallel(&mut self, on: bool) {
        self.parallel = on;
    }

    /// Clears the accumulated step times.
    pub fn reset_profile(&mut self) {
        if let Body::Compiled(c) = &mut self.body {
            c.stats.iter_mut().for_each(|s| *s = (0, 0));
        }
    }

    /// Time per kind of step, slowest first (empty for a function the generic
    /// evaluator runs as a whole).
    pub fn profile(&self) -> Vec<OpTime> {
        let Body::Compiled(c) = &self.body else {
            return Vec::new();
        };
        let mut by: HashMap<&str, OpTime> = HashMap::new();
        for (s, &(calls, nanos)) in c.steps.iter().zip(&c.stats) {
            if calls == 0 {
                continue;
            }
            let e = by.entry(&s.label).or_insert_with(|| OpTime {
                op: s.label.clone(),
                calls: 0,
                nanos: 0,
                flops: 0,
            });
            e.calls += calls;
            e.nanos += nanos;
            e.flops += s.flops * calls;
        }
        let mut v: Vec<OpTime> = by.into_values().collect();
        v.sort_by(|a, b| b.nanos.cmp(&a.nanos).then(a.op.cmp(&b.op)));
        v
    }

    /// Time per step in plan order (for finding the slow loops inside a
    /// kind): label, source line, elements the step iterates, fused ops,
    /// calls and nanos since profiling was switched on.
    pub fn step_profile(&self) -> Vec<StepTime> {
        let Body::Compiled(c) = &self.body else {
            return Vec::new();
        };
        c.steps
            .iter()
            .zip(&c.stats)
            .map(|(s, &(calls, nanos))| {
                let (elements, ops, inputs) = match &s.kind {
                    Kind::Loop {
                        prog, len, inputs, ..
                    }
                    | Kind::Reduce {
                        prog, len, inputs, ..
                    } => (*len, prog.op_count(), inputs.len()),
                    _ => (0, 0, 0),
                };
                StepTime {
                    op: s.label.clone(),
                    line: s.line,
                    elements,
                    ops,
                    inputs,
                    calls,
                    nanos,
                }
            })
            .collect()
    }

    /// One line per step in execution order: what it runs, the slots it reads
    /// and writes, and a fused loop's program (for reading a schedule).
    pub fn listing(&self) -> Vec<String> {
        let Body::Compiled(c) = &self.body else {
            return vec!["whole function on the generic evaluator".into()];
        };
        c.steps
            .iter()
            .enumerate()
            .map(|(i, st)| {
                let detail = match &st.kind {
                    Kind::Loop {
                        prog,
                        inputs,
                        len,
                        out,
                        ..
                    } => format!("len {len} {inputs:?} -> {out}: {:?}", prog.nodes),
                    Kind::Reduce {
                        prog,
                        inputs,
                        len,
                        outs,
                        ..
                    } => format!(
                        "len {len} {inputs:?} -> {:?}: {:?}",
                        outs.iter().map(|o| (o.slot, o.node)).collect::<Vec<_>>(),
                        prog.nodes
                    ),
                    k => format!("{:?} -> {:?}", k.reads(), k.writes()),
                };
                format!("{i:4} {:<36} {detail}", st.label)
            })
            .collect()
    }

    /// One line: steps, fused elementwise ops, ops left to the generic evaluator.
    pub fn summary(&self) -> String {
        match &self.body {
            Body::Generic(_) => "whole function on the generic evaluator".to_string(),
            Body::Compiled(c) => {
                let fused: usize = c
                    .steps
                    .iter()
                    .map(|s| match &s.kind {
                        Kind::Loop { prog, .. } | Kind::Reduce { prog, .. } => prog.op_count(),
                        _ => 0,
                    })
                    .sum();
                let generic: Vec<&str> = c
                    .steps
                    .iter()
                    .filter(|s| matches!(s.kind, Kind::Generic { .. }))
                    .map(|s| s.op)
                    .collect();
                format!(
                    "{} steps, {fused} elementwise ops fused, {} ops on the generic evaluator{}",
                    c.steps.len(),
                    generic.len(),
                    if generic.is_empty() {
                        String::new()
                    } else {
                        format!(" ({})", generic.join(", "))
                    }
                )
            }
        }
    }

    /// Negative-control hook for tests: adds `delta` to every element written
    /// by the first fused loop with at least two elementwise ops, a
    /// shape-preserving bug an agreement check must catch. Returns whether
    /// such a loop exists.
    #[doc(hidden)]
    pub fn inject_fault(&mut self, delta: f32) -> bool {
        let Body::Compiled(c) = &mut self.body else {
            return false;
        };
        for s in &mut c.steps {
            if let Kind::Loop { prog, .. } = &mut s.kind {
                if prog.op_count() >= 2 {
                    prog.fault = delta;
                    return true;
                }
            }
        }
        false
    }
}

fn check_inputs(func: &str, params: &[TensorType], inputs: &[Value<f32>]) -> Result<(), EvalError> {
    let err = |message: String| EvalError {
        func: func.to_string(),
        op: "func.func",
        line: None,
        message,
    };
    if inputs.len() != params.len() {
        return Err(err(format!(
            "expected {} inputs, got {}",
            params.len(),
            inputs.len()
        )));
    }
    for (i, (p, v)) in params.iter().zip(inputs).enumerate() {
        if v.ty() != *p {
            return Err(err(format!(
                "input {i} has type {}, the signature says {p}",
                v.ty()
            )));
        }
    }
    Ok(())
}

// ---------------------------------------------------------------------------
// Steps

/// A slot's buffer: floats (also i1 as 0/1 when a fused loop wrote it) or integers.
enum Buf {
    F(Vec<f32>),
    I(Vec<i64>),
}

#[derive(Clone, Copy)]
enum Init {
    Const(f32),
    Slot(usize),
}

struct Step {
    label: String,
    /// The op the step comes from, for errors.
    op: &'static str,
    line: Option<u32>,
    flops: u64,
    kind: Kind,
}

/// One output of a [`Kind::Reduce`]: its slot, initial value and the program
/// node it sums.
#[derive(Clone, Copy)]
struct ReduceOut {
    slot: usize,
    init: Init,
    node: usize,
}

enum Kind {
    Const {
        out: usize,
        data: ConstData,
    },
    Loop {
        prog: Program,
        inputs: Vec<usize>,
        out: usize,
        len: usize,
        /// An input whose buffer dies here and may become the output.
        in_place: Option<usize>,
    },
    /// Add-reductions over the same positions into the same output shape,
    /// one pass for all (siblings merged by [`merge_sibling_reductions`]).
    Reduce {
        prog: Program,
        inputs: Vec<usize>,
        outs: Vec<ReduceOut>,
        len: usize,
        map: Merged,
        out_len: usize,
    },
    Conv {
        lhs: (usize, Vec<usize>),
        rhs: (usize, Vec<usize>),
        attrs: ConvAttrs,
        out: usize,
        shape: Vec<usize>,
        /// A per-output-feature bias added as the result is written (the
        /// `conv + broadcast(b)` loop folded in by [`fold_conv_bias`]).
        bias: Option<usize>,
    },
    Dot {
        lhs: (usize, Vec<usize>),
        rhs: (usize, Vec<usize>),
        dims: DotDims,
        out: usize,
        shape: Vec<usize>,
    },
    ReduceFold {
        input: (usize, Vec<usize>),
        init: Init,
        kind: ReduceKind,
        dims: Vec<usize>,
        out: usize,
        shape: Vec<usize>,
    },
    Window {
        input: (usize, Vec<usize>),
        init: Init,
        kind: ReduceKind,
        attrs: WindowAttrs,
        out: usize,
        shape: Vec<usize>,
        /// Max/min over tiling windows: the plan's own kernel.
        tiles: Option<pool::Tiles>,
    },
    Scatter {
        operand: (usize, Vec<usize>),
        source: (usize, Vec<usize>),
        init: Init,
        select: ir::CompareDirection,
        attrs: ScatterWindowAttrs,
        out: usize,
        tiles: Option<pool::Tiles>,
    },
    Generic {
        module: Module,
        operands: Vec<(usize, TensorType)>,
        results: Vec<usize>,
    },
}

#[derive(Clone)]
enum ConstData {
    F(Vec<f32>),
    I(Vec<i64>),
}

impl Kind {
    fn reads(&self) -> Vec<usize> {
        let init = |i: &Init| match i {
            Init::Slot(s) => vec![*s],
            Init::Const(_) => vec![],
        };
        match self {
            Kind::Const { .. } => vec![],
            Kind::Loop { inputs, .. } => inputs.clone(),
            Kind::Reduce { inputs, outs, .. } => inputs
                .iter()
                .copied()
                .chain(outs.iter().flat_map(|o| init(&o.init)))
                .collect(),
            Kind::Conv { lhs, rhs, bias, .. } => [lhs.0, rhs.0].into_iter().chain(*bias).collect(),
            Kind::Dot { lhs, rhs, .. } => vec![lhs.0, rhs.0],
            Kind::ReduceFold { input, init: i, .. } | Kind::Window { input, init: i, .. } => {
                [vec![input.0], init(i)].concat()
            }
            Kind::Scatter {
                operand,
                source,
                init: i,
                ..
            } => [vec![operand.0, source.0], init(i)].concat(),
            Kind::Generic { operands, .. } => operands.iter().map(|o| o.0).collect(),
        }
    }

    fn writes(&self) -> Vec<usize> {
        match self {
            Kind::Const { out, .. }
            | Kind::Loop { out, .. }
            | Kind::Conv { out, .. }
            | Kind::Dot { out, .. }
            | Kind::ReduceFold { out, .. }
            | Kind::Window { out, .. }
            | Kind::Scatter { out, .. } => vec![*out],
            Kind::Reduce { outs, .. } => outs.iter().map(|o| o.slot).collect(),
            Kind::Generic { results, .. } => results.clone(),
        }
    }
}

/// Released float buffers by length, reused for outputs of the same length.
#[derive(Default)]
struct Pool {
    free: HashMap<usize, Vec<Vec<f32>>>,
}

/// Buffers kept per length; more are dropped. Generous: a buffer dropped at
/// the end of one run is allocated (and paged in) again by the next.
const POOL_PER_LEN: usize = 64;

impl Pool {
    /// A buffer of `len` elements with unspecified contents.
    fn get(&mut self, len: usize) -> Vec<f32> {
        self.free
            .get_mut(&len)
            .and_then(|v| v.pop())
            .unwrap_or_else(|| vec![0.0; len])
    }

    fn put(&mut self, b: Buf) {
        if let Buf::F(v) = b {
            let list = self.free.entry(v.len()).or_default();
            if list.len() < POOL_PER_LEN && !v.is_empty() {
                list.push(v);
            }
        }
    }
}

struct Compiled {
    n_slots: usize,
    params: Vec<usize>,
    steps: Vec<Step>,
    free_after: Vec<Vec<usize>>,
    unused_inputs: Vec<usize>,
    outputs: Vec<(usize, TensorType)>,
    pool: Pool,
    /// (calls, nanos) per step while profiling.
    stats: Vec<(u64, u64)>,
}

fn narrow(e: ElemType) -> bool {
    matches!(e, ElemType::BF16 | ElemType::F16)
}

fn to_value(b: Buf, ty: &TensorType) -> Value<f32> {
    let shape = dims(&ty.shape);
    match (b, ty.elem.is_float()) {
        (Buf::F(d), true) => Value::Float(Tensor::new(shape, d), ty.elem),
        (Buf::F(d), false) => Value::Int(
            Tensor::new(shape, d.into_iter().map(|x| x as i64).collect()),
            ty.elem,
        ),
        (Buf::I(d), false) => Value::Int(Tensor::new(shape, d), ty.elem),
        (Buf::I(d), true) => Value::Float(
            Tensor::new(shape, d.into_iter().map(|x| x as f32).collect()),
            ty.elem,
        ),
    }
}

fn dims(s: &[i64]) -> Vec<usize> {
    s.iter().map(|&d| d.max(0) as usize).collect()
}

impl Compiled {
    fn run(
        &mut self,
        func: &str,
        inputs: Vec<Value<f32>>,
        profile: bool,
        parallel: bool,
    ) -> Result<Vec<Value<f32>>, EvalError> {
        let mut slots: Vec<Option<Buf>> = (0..self.n_slots).map(|_| None).collect();
        for (v, &slot) in inputs.into_iter().zip(&self.params) {
            slots[slot] = Some(match v {
                Value::Float(t, e) => {
                    let mut d = t.data;
                    if narrow(e) {
                        d.iter_mut().for_each(|x| *x = x.round_to(e));
                    }
                    Buf::F(d)
                }
                Value::Int(t, _) => Buf::I(t.data),
            });
        }
        for &s in &self.unused_inputs {
            if let Some(b) = slots[s].take() {
                self.pool.put(b);
            }
        }
        for i in 0..self.steps.len() {
            let t0 = profile.then(Instant::now);
            let step = &self.steps[i];
            exec(step, &mut slots, &mut self.pool, parallel).map_err(|message| EvalError {
                func: func.to_string(),
                op: step.op,
                line: step.line,
                message,
            })?;
            if let Some(t0) = t0 {
                let st = &mut self.stats[i];
                st.0 += 1;
                st.1 += t0.elapsed().as_nanos() as u64;
            }
            for &s in &self.free_after[i] {
                if let Some(b) = slots[s].take() {
                    self.pool.put(b);
                }
            }
        }
        let mut out = Vec::with_capacity(self.outputs.len());
        for (k, (slot, ty)) in self.outputs.iter().enumerate() {
            let again = self.outputs[k + 1..].iter().any(|(s, _)| s == slot);
            let b = if again {
                match slots[*slot].as_ref() {
                    Some(Buf::F(d)) => Some(Buf::F(d.clone())),
                    Some(Buf::I(d)) => Some(Buf::I(d.clone())),
                    None => None,
                }
            } else {
                slots[*slot].take()
            };
            let b = b.ok_or_else(|| EvalError {
                func: func.to_string(),
                op: "func.return",
                line: None,
                message: format!("internal: output {k} was not computed"),
            })?;
            out.push(to_value(b, ty));
        }
        Ok(out)
    }
}

fn take_float(slots: &mut [Option<Buf>], s: usize, shape: &[usize]) -> Result<Tensor<f32>, String> {
    match slots[s].take() {
        Some(Buf::F(d)) if d.len() == shape.iter().product::<usize>() => {
            Ok(Tensor::new(shape.to_vec(), d))
        }
        Some(Buf::I(d)) => Ok(Tensor::new(
            shape.to_vec(),
            d.into_iter().map(|x| x as f32).collect(),
        )),
        _ => Err(format!("internal: operand buffer {s} missing or mis-sized")),
    }
}

fn init_value(slots: &[Option<Buf>], i: Init) -> Result<f32, String> {
    match i {
        Init::Const(x) => Ok(x),
        Init::Slot(s) => match slots[s].as_ref() {
            Some(Buf::F(d)) if !d.is_empty() => Ok(d[0]),
            _ => Err("internal: init value missing".into()),
        },
    }
}

/// Runs `f` on the float tensors of two slots (the same slot twice allowed),
/// putting them back afterwards.
fn with2<R>(
    slots: &mut [Option<Buf>],
    a: &(usize, Vec<usize>),
    b: &(usize, Vec<usize>),
    f: impl FnOnce(&Tensor<f32>, &Tensor<f32>) -> R,
) -> Result<R, String> {
    let x = take_float(slots, a.0, &a.1)?;
    let r = if a.0 == b.0 {
        let y = Tensor::new(b.1.clone(), x.data.clone());
        f(&x, &y)
    } else {
        let y = take_float(slots, b.0, &b.1)?;
        let r = f(&x, &y);
        slots[b.0] = Some(Buf::F(y.data));
        r
    };
    slots[a.0] = Some(Buf::F(x.data));
    Ok(r)
}

fn with1<R>(
    slots: &mut [Option<Buf>],
    a: &(usize, Vec<usize>),
    f: impl FnOnce(&Tensor<f32>) -> R,
) -> Result<R, String> {
    let x = take_float(slots, a.0, &a.1)?;
    let r = f(&x);
    slots[a.0] = Some(Buf::F(x.data));
    Ok(r)
}

/// The loop inputs of `inputs` (integer buffers converted); `skip` is the
/// input whose buffer was taken to become the output (read through `alias`).
fn loop_inputs<'s>(
    slots: &'s [Option<Buf>],
    inputs: &[usize],
    alias: Option<(usize, *const f32, usize)>,
) -> Result<Vec<Input<'s>>, String> {
    inputs
        .iter()
        .enumerate()
        .map(|(k, &s)| match alias {
            Some((j, p, n)) if j == k => Ok(Input::Float(p, n)),
            _ => match slots[s].as_ref() {
                Some(Buf::F(d)) => Ok(Input::Borrowed(d)),
                Some(Buf::I(d)) => Ok(Input::Owned(d.iter().map(|&x| x as f32).collect())),
                None => Err(format!("internal: loop input buffer {s} missing")),
            },
        })
        .collect()
}

fn exec(
    step: &Step,
    slots: &mut [Option<Buf>],
    pool: &mut Pool,
    parallel: bool,
) -> Result<(), String> {
    match &step.kind {
        Kind::Const { out, data } => {
            slots[*out] = Some(match data {
                ConstData::F(d) => {
                    let mut b = pool.get(d.len());
                    b.copy_from_slice(d);
                    Buf::F(b)
                }
                ConstData::I(d) => Buf::I(d.clone()),
            });
        }
        Kind::Loop {
            prog,
            inputs,
            out,
            len,
            in_place,
        } => {
            let taken = in_place.and_then(|k| match slots[inputs[k]].take() {
                Some(Buf::F(d)) if d.len() == *len => Some((k, d)),
                other => {
                    slots[inputs[k]] = other;
                    None
                }
            });
            let (mut buf, alias) = match taken {
                Some((k, mut d)) => {
                    let p = d.as_mut_ptr() as *const f32;
                    (d, Some((k, p, *len)))
                }
                None => (pool.get(*len), None),
            };
            {
                let ins = loop_inputs(slots, inputs, alias)?;
                // SAFETY: `buf` holds `len` elements; the only input that may
                // alias it is the in-place one, which the compiler chose only
                // when the program reads it element for element.
                unsafe { prog.run(&ins, buf.as_mut_ptr(), *len, parallel, alias.is_some()) };
            }
            slots[*out] = Some(Buf::F(std::mem::take(&mut buf)));
        }
        Kind::Reduce {
            prog,
            inputs,
            outs,
            len,
            map,
            out_len,
        } => {
            let mut accs = Vec::with_capacity(outs.len());
            for o in outs {
                let mut acc = pool.get(*out_len);
                acc.fill(init_value(slots, o.init)?);
                accs.push(acc);
            }
            let values: Vec<usize> = outs.iter().map(|o| o.node).collect();
            {
                let ins = loop_inputs(slots, inputs, None)?;
                prog.reduce(&ins, map, &values, &mut accs, *len, parallel);
            }
            for (o, acc) in outs.iter().zip(accs) {
                slots[o.slot] = Some(Buf::F(acc));
            }
        }
        Kind::Conv {
            lhs,
            rhs,
            attrs,
            out,
            shape,
            bias,
        } => {
            let buffer = pool.get(shape.iter().product());
            let bias = match bias {
                Some(b) => match slots[*b].as_ref() {
                    Some(Buf::F(d)) => Some(d.clone()),
                    _ => return Err("internal: convolution bias missing".into()),
                },
                None => None,
            };
            let t = with2(slots, lhs, rhs, |x, w| {
                fast::convolution_into(x, w, attrs, shape, buffer, bias.as_deref())
            })?;
            slots[*out] = Some(Buf::F(t.data));
        }
        Kind::Dot {
            lhs,
            rhs,
            dims,
            out,
            shape,
        } => {
            let t = with2(slots, lhs, rhs, |x, w| fast::dot_general(x, w, dims, shape))?;
            slots[*out] = Some(Buf::F(t.data));
        }
        Kind::ReduceFold {
            input,
            init,
            kind,
            dims,
            out,
            shape,
        } => {
            let init = init_value(slots, *init)?;
            let t = with1(slots, input, |x| fast::reduce(x, init, *kind, dims, shape))?;
            slots[*out] = Some(Buf::F(t.data));
        }
        Kind::Window {
            input,
            init,
            kind,
            out,
            tiles: Some(t),
            ..
        } => {
            let init = init_value(slots, *init)?;
            let len = t.out_len();
            let mut o = pool.get(len);
            match slots[input.0].as_ref() {
                Some(Buf::F(x)) => t.fold(x, init, *kind == ReduceKind::Max, &mut o),
                _ => return Err("internal: pooling input missing".into()),
            }
            slots[*out] = Some(Buf::F(o));
        }
        Kind::Scatter {
            operand,
            source,
            init,
            select,
            out,
            tiles: Some(t),
            ..
        } => {
            let init = init_value(slots, *init)?;
            let mut o = pool.get(t.in_len());
            match (slots[operand.0].as_ref(), slots[source.0].as_ref()) {
                (Some(Buf::F(x)), Some(Buf::F(s))) => t.scatter(x, s, init, *select, &mut o),
                _ => return Err("internal: select_and_scatter operands missing".into()),
            }
            slots[*out] = Some(Buf::F(o));
        }
        Kind::Window {
            input,
            init,
            kind,
            attrs,
            out,
            shape,
            ..
        } => {
            let init = init_value(slots, *init)?;
            let t = with1(slots, input, |x| {
                fast::reduce_window(x, init, *kind, attrs, shape)
            })?;
            slots[*out] = Some(Buf::F(t.data));
        }
        Kind::Scatter {
            operand,
            source,
            init,
            select,
            attrs,
            out,
            ..
        } => {
            let init = init_value(slots, *init)?;
            let t = with2(slots, operand, source, |x, s| {
                fast::select_and_scatter(x, s, init, *select, attrs, &x.shape)
            })?;
            slots[*out] = Some(Buf::F(t.data));
        }
        Kind::Generic {
            module,
            operands,
            results,
        } => {
            let mut values = Vec::with_capacity(operands.len());
            for (s, ty) in operands {
                let b = match slots[*s].as_ref() {
                    Some(Buf::F(d)) => Buf::F(d.clone()),
                    Some(Buf::I(d)) => Buf::I(d.clone()),
                    None => return Err(format!("internal: operand buffer {s} missing")),
                };
                values.push(to_value(b, ty));
            }
            let opts = EvalOptions {
                fast: true,
                record_margins: false,
                replicas: 1,
            };
            let outs = eval_func(module, "op", values, &opts).map_err(|e| e.message)?;
            for (v, &r) in outs.outputs.into_iter().zip(results) {
                slots[r] = Some(match v {
                    Value::Float(t, _) => Buf::F(t.data),
                    Value::Int(t, _) => Buf::I(t.data),
                });
            }
        }
    }
    Ok(())
}

// ---------------------------------------------------------------------------
// Compilation

/// An elementwise expression not yet materialised.
#[derive(Debug)]
enum Expr {
    /// A materialised slot, element for element.
    Load(usize),
    /// A materialised slot through a strided view.
    View(usize, ViewSpec),
    Splat(f32),
    Op(ExprOp, Vec<Rc<Expr>>),
}

#[derive(Clone, Copy, Debug)]
enum ExprOp {
    Unary(ir::UnaryOp),
    Binary(BinaryOp),
    Compare(ir::CompareDirection, bool),
    Select,
    Clamp,
    Round(ElemType),
    NotZero,
}

impl Expr {
    fn is_leaf(&self) -> bool {
        !matches!(self, Expr::Op(..))
    }
}

enum Def {
    Undef,
    /// In the slot `root[v]`.
    Mat,
    Pending(Rc<Expr>),
}

struct Builder<'f> {
    f: &'f Func,
    types: Vec<Option<TensorType>>,
    uses: Vec<usize>,
    is_output: Vec<bool>,
    root: Vec<usize>,
    defs: Vec<Def>,
    steps: Vec<Step>,
    outputs: Vec<(usize, TensorType)>,
}

/// Ids defined inside a block (its arguments and every nested result).
fn defined_in(b: &Block, out: &mut Vec<ValueId>) {
    out.extend(b.args.iter().map(|a| a.0));
    for op in &b.ops {
        out.extend(op.results.iter().map(|r| r.0));
        for r in &op.regions {
            defined_in(r, out);
        }
    }
}

/// Whether a region reads only its own values.
fn closed(b: &Block) -> bool {
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

/// Operands the fast f32 kernels take: f32, and bf16 (its values are f32
/// values; the kernels accumulate in f32 as the generic path does).
fn kernel_operand(t: &TensorType) -> bool {
    matches!(t.elem, ElemType::F32 | ElemType::BF16)
}

impl<'f> Builder<'f> {
    fn new(f: &'f Func) -> Option<Self> {
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
        let mut is_output = vec![false; n];
        for op in &f.body.ops {
            if matches!(op.kind, OpKind::Call { .. }) {
                return None;
            }
            if !op.regions.iter().all(closed) {
                return None;
            }
            for r in &op.results {
                types[r.0.index()] = Some(r.1.clone());
            }
            for v in &op.operands {
                *uses.get_mut(v.index())? += 1;
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
            is_output,
            root: (0..n).collect(),
            defs,
            steps: Vec::new(),
            outputs: Vec::new(),
        })
    }

    fn ty(&self, v: ValueId) -> Option<&TensorType> {
        self.types.get(v.index())?.as_ref()
    }

    fn build(mut self) -> Option<Compiled> {
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

    /// Liveness: which slots die after which step, and in-place outputs.
    fn finish(mut self) -> Compiled {
        self.steps = merge_sibling_reductions(std::mem::take(&mut self.steps));
        let outputs: Vec<usize> = self.outputs.iter().map(|o| o.0).collect();
        self.steps = fold_conv_bias(std::mem::take(&mut self.steps), &outputs);
        let n = self.root.len();
        let mut last: Vec<Option<usize>> = vec![None; n];
        for (i, s) in self.steps.iter().enumerate() {
            for r in s.kind.reads() {
                last[r] = Some(i);
            }
        }
        let mut keep = vec![false; n];
        for (s, _) in &self.outputs {
            keep[*s] = true;
        }
        let mut free_after: Vec<Vec<usize>> = vec![Vec::new(); self.steps.len()];
        for (s, l) in last.iter().enumerate() {
            if let (Some(i), false) = (l, keep[s]) {
                free_after[*i].push(s);
            }
        }
        let mut steps = self.steps;
        for (i, s) in steps.iter_mut().enumerate() {
            for w in s.kind.writes() {
                if last[w].is_none() && !keep[w] {
                    free_after[i].push(w);
                }
            }
            if let Kind::Loop {
                prog,
                inputs,
                in_place,
                ..
            } = &mut s.kind
            {
                *in_place = inputs
                    .iter()
                    .enumerate()
                    .position(|(k, &r)| last[r] == Some(i) && !keep[r] && !prog.viewed(k));
            }
        }
        let params: Vec<usize> = self.f.params.iter().map(|p| p.value.index()).collect();
        let unused_inputs = params
            .iter()
            .copied()
            .filter(|&p| last[p].is_none() && !keep[p])
            .collect();
        let stats = vec![(0, 0); steps.len()];
        Compiled {
            n_slots: n,
            params,
            steps,
            free_after,
            unused_inputs,
            outputs: self.outputs,
            pool: Pool::default(),
            stats,
        }
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
                if e.is_leaf() || (self.uses[i] == 1 && !self.is_output[i]) {
                    return Some(e.clone());
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

    /// `v` as a transpose of a whole materialised slot: the slot, its own
    /// shape, and for each dimension of `v` the slot dimension it is. None for
    /// any other view (broadcast, reversal, slice) or a computed value.
    fn permuted_slot(&self, v: ValueId) -> Option<(usize, Vec<usize>, Vec<usize>)> {
        let Def::Pending(e) = &self.defs[v.index()] else {
            return None;
        };
        let Expr::View(slot, spec) = &**e else {
            return None;
        };
        let rank = spec.shape.len();
        if spec.base != 0 || spec.strides.iter().any(|&st| st <= 0) {
            return None;
        }
        // Slot dimensions in memory order: the view's dimensions by stride.
        let mut order: Vec<usize> = (0..rank).collect();
        order.sort_by_key(|&d| std::cmp::Reverse(spec.strides[d]));
        let shape: Vec<usize> = order.iter().map(|&d| spec.shape[d]).collect();
        let row_major = den::tensor::row_major_strides(&shape);
        if order
            .iter()
            .zip(&row_major)
            .any(|(&d, &st)| spec.strides[d] != st as isize)
        {
            return None;
        }
        let mut q = vec![0; rank];
        for (phys, &d) in order.iter().enumerate() {
            q[d] = phys;
        }
        Some((*slot, shape, q))
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
        if op.results.len() != 1 {
            if let OpKind::AllReduce { .. } = op.kind {
                return self.all_reduce(op);
            }
            return Some(false);
        }
        let rty = op.results[0].1.clone();
        let rshape = shape_of(&rty);
        let float = |t: &TensorType| t.elem.is_float();
        match &op.kind {
            OpKind::Constant(d) => return Some(self.constant(op, d, &rty)),
            OpKind::Unary(u) => {
                if !(tys.len() == 1 && float(&tys[0]) && float(&rty) && fused::fusable_unary(*u)) {
                    return Some(false);
                }
                if !self.pend_op(op, &rshape, ExprOp::Unary(*u)) {
                    return Some(false);
                }
            }
            OpKind::Binary(b) => {
                if !(tys.len() == 2
                    && tys.iter().all(float)
                    && float(&rty)
                    && fused::fusable_binary(*b))
                {
                    return Some(false);
                }
                if !self.pend_op(op, &rshape, ExprOp::Binary(*b)) {
                    return Some(false);
                }
            }
            OpKind::Compare {
                direction,
                compare_type,
            } => {
                if !(tys.len() == 2 && tys.iter().all(float) && rty.elem == ElemType::I1) {
                    return Some(false);
                }
                let total = *compare_type == Some(CompareType::TotalOrder);
                if !self.pend_op(op, &rshape, ExprOp::Compare(*direction, total)) {
                    return Some(false);
                }
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
                if !self.pend_op(op, &rshape, ExprOp::Select) {
                    return Some(false);
                }
            }
            OpKind::Clamp => {
                if !(tys.len() == 3 && tys.iter().all(float) && tys[1].shape == rty.shape) {
                    return Some(false);
                }
                if !self.pend_op(op, &rshape, ExprOp::Clamp) {
                    return Some(false);
                }
            }
            OpKind::Convert => {
                if tys.len() != 1
                    || !fusable(&tys[0])
                    || !fusable(&rty)
                    || tys[0].shape != rty.shape
                {
                    return Some(false);
                }
                let Some(a) = self.operand(op.operands[0], &rshape) else {
                    return Some(false);
                };
                let e = match (float(&tys[0]), float(&rty)) {
                    (_, true) if narrow(rty.elem) => {
                        Rc::new(Expr::Op(ExprOp::Round(rty.elem), vec![a]))
                    }
                    // f32 → f32/f64 and i1 (0/1) → float are the identity.
                    (_, true) => a,
                    (true, false) => Rc::new(Expr::Op(ExprOp::NotZero, vec![a])),
                    (false, false) => return Some(false),
                };
                self.defs[op.results[0].0.index()] = Def::Pending(e);
            }
            OpKind::Reshape => {
                if tys.len() != 1
                    || shape_of(&tys[0]).iter().product::<usize>()
                        != rshape.iter().product::<usize>()
                    || tys[0].elem != rty.elem
                {
                    return Some(false);
                }
                let (v, r) = (op.operands[0], op.results[0].0);
                if let Some(x) = self.splat_of(v) {
                    self.defs[r.index()] = Def::Pending(Rc::new(Expr::Splat(x)));
                    return Some(true);
                }
                self.materialize(v)?;
                self.root[r.index()] = self.root[v.index()];
                self.defs[r.index()] = Def::Mat;
            }
            OpKind::BroadcastInDim { dims: bd } => {
                if tys.len() != 1 || !fusable(&tys[0]) || tys[0].elem != rty.elem {
                    return Some(false);
                }
                let s = shape_of(&tys[0]);
                if bd.len() != s.len()
                    || bd.iter().enumerate().any(|(j, &d)| {
                        d < 0
                            || d as usize >= rshape.len()
                            || (s[j] != 1 && s[j] != rshape[d as usize])
                    })
                {
                    return Some(false);
                }
                return Some(self.view_op(op, |spec| {
                    let mut strides = vec![0isize; rshape.len()];
                    for (j, &d) in bd.iter().enumerate() {
                        if s[j] != 1 {
                            strides[d as usize] = spec.strides[j];
                        }
                    }
                    ViewSpec {
                        shape: rshape.clone(),
                        strides,
                        base: spec.base,
                    }
                }));
            }
            OpKind::Transpose { permutation } => {
                let rank = tys.first().map_or(0, |t| t.shape.len());
                let mut seen = vec![false; rank];
                let ok = tys.len() == 1
                    && fusable(&tys[0])
                    && tys[0].elem == rty.elem
                    && permutation.len() == rank
                    && permutation.iter().all(|&p| {
                        p >= 0
                            && (p as usize) < rank
                            && !std::mem::replace(&mut seen[p as usize], true)
                    });
                if !ok {
                    return Some(false);
                }
                return Some(self.view_op(op, |spec| {
                    ViewSpec {
                        shape: rshape.clone(),
                        strides: permutation
                            .iter()
                            .map(|&p| spec.strides[p as usize])
                            .collect(),
                        base: spec.base,
                    }
                }));
            }
            OpKind::Reverse { dims: rd } => {
                let rank = tys.first().map_or(0, |t| t.shape.len());
                if tys.len() != 1
                    || !fusable(&tys[0])
                    || tys[0].elem != rty.elem
                    || rd.iter().any(|&d| d < 0 || d as usize >= rank)
                {
                    return Some(false);
                }
                return Some(self.view_op(op, |spec| {
                    let mut s = spec.clone();
                    for &d in rd {
                        let d = d as usize;
                        if s.shape[d] > 0 {
                            s.base += (s.shape[d] as isize - 1) * s.strides[d];
                        }
                        s.strides[d] = -s.strides[d];
                    }
                    s
                }));
            }
            OpKind::Convolution(a) => {
                if !(tys.len() == 2 && tys.iter().all(kernel_operand) && rty.elem == ElemType::F32)
                {
                    return Some(false);
                }
                // Transposed operands are read in place: the transpose goes
                // into the dimension numbers (the weight-VJP's xᵀ and dyᵀ
                // would otherwise be copied every step).
                let mut a = a.clone();
                let d = &mut a.dims;
                let lhs = match self.permuted_slot(op.operands[0]) {
                    Some((slot, shape, q)) => {
                        let dims = [&mut d.input_batch, &mut d.input_feature];
                        relabel(&q, dims.into_iter().chain(&mut d.input_spatial));
                        (slot, shape)
                    }
                    None => self.mat_operand(op.operands[0])?,
                };
                let rhs = match self.permuted_slot(op.operands[1]) {
                    Some((slot, shape, q)) => {
                        let dims = [&mut d.kernel_output_feature, &mut d.kernel_input_feature];
                        relabel(&q, dims.into_iter().chain(&mut d.kernel_spatial));
                        (slot, shape)
                    }
                    None => self.mat_operand(op.operands[1])?,
                };
                let a = &a;
                let o = rhs
                    .1
                    .get(a.dims.kernel_output_feature.max(0) as usize)
                    .copied()
                    .unwrap_or(1)
                    .max(1);
                let macs = rshape.iter().product::<usize>() * (rhs.1.iter().product::<usize>() / o);
                let kind = Kind::Conv {
                    lhs,
                    rhs,
                    attrs: a.clone(),
                    out: op.results[0].0.index(),
                    shape: rshape,
                    bias: None,
                };
                self.push(op, "stablehlo.convolution", 2 * macs as u64, kind);
                self.defs[op.results[0].0.index()] = Def::Mat;
            }
            OpKind::DotGeneral { dims: dd, .. } => {
                if !(tys.len() == 2 && tys.iter().all(kernel_operand) && rty.elem == ElemType::F32)
                {
                    return Some(false);
                }
                let (lhs, rhs) = (
                    self.mat_operand(op.operands[0])?,
                    self.mat_operand(op.operands[1])?,
                );
                let k: usize = dd
                    .lhs_contracting
                    .iter()
                    .map(|&d| lhs.1.get(d.max(0) as usize).copied().unwrap_or(1))
                    .product();
                let macs = rshape.iter().product::<usize>() * k;
                let kind = Kind::Dot {
                    lhs,
                    rhs,
                    dims: dd.clone(),
                    out: op.results[0].0.index(),
                    shape: rshape,
                };
                self.push(op, "stablehlo.dot_general", 2 * macs as u64, kind);
                self.defs[op.results[0].0.index()] = Def::Mat;
            }
            OpKind::Reduce { dims: rd } => {
                let Some(kind) =
                    reduce_kind(op.regions.first().and_then(|b| b.as_binary_reducer()))
                else {
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
                    let Some(e) = self.operand(op.operands[0], &s) else {
                        return Some(false);
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
            }
            OpKind::ReduceWindow(wa) => {
                let Some(kind) =
                    reduce_kind(op.regions.first().and_then(|b| b.as_binary_reducer()))
                else {
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
            }
            OpKind::SelectAndScatter(sa) => {
                if op.regions.len() != 2 || op.regions[1].as_binary_reducer() != Some(BinaryOp::Add)
                {
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
            }
            OpKind::AllReduce { .. } => return self.all_reduce(op),
            _ => return Some(false),
        }
        Some(true)
    }

    /// Single-replica all_reduce is the identity: results share their operands' buffers.
    fn all_reduce(&mut self, op: &Op) -> Option<bool> {
        let OpKind::AllReduce { replica_groups, .. } = &op.kind else {
            return Some(false);
        };
        // Groups with other replicas: the generic evaluator explains the error.
        if op.operands.len() != op.results.len()
            || replica_groups.iter().flatten().any(|&id| id != 0)
        {
            return Some(false);
        }
        for (&v, r) in op.operands.iter().zip(&op.results) {
            self.materialize(v)?;
            self.root[r.0.index()] = self.root[v.index()];
            self.defs[r.0.index()] = Def::Mat;
        }
        Some(true)
    }

    /// A transpose / reverse / broadcast: a view of the operand's slot (a
    /// splat stays a splat).
    fn view_op(&mut self, op: &Op, f: impl FnOnce(&ViewSpec) -> ViewSpec) -> bool {
        let v = op.operands[0];
        let r = op.results[0].0.index();
        if let Some(x) = self.splat_of(v) {
            self.defs[r] = Def::Pending(Rc::new(Expr::Splat(x)));
            return true;
        }
        let Some((slot, spec)) = self.view_of(v) else {
            return false;
        };
        self.defs[r] = Def::Pending(Rc::new(Expr::View(slot, f(&spec))));
        true
    }

    fn constant(&mut self, op: &Op, d: &DenseData, ty: &TensorType) -> bool {
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

    /// Plans `op` alone on the generic evaluator.
    fn generic(&mut self, op: &Op) -> Option<()> {
        let mut ids: Vec<ValueId> = Vec::new();
        for &v in &op.operands {
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

fn ints(d: &DenseData) -> Vec<i64> {
    match d {
        DenseData::Int(v) => v.clone(),
        DenseData::Float(v) => v.iter().map(|&x| x as i64).collect(),
    }
}

/// Dimension numbers of an operand read through the transpose `q` (its
/// dimension `j` is the slot's dimension `q[j]`) renamed to the slot's.
fn relabel<'a>(q: &[usize], dims: impl Iterator<Item = &'a mut i64>) {
    for d in dims {
        *d = q[*d as usize] as i64;
    }
}

/// `conv(x, w) + broadcast(b)` — a loop adding a per-output-feature vector to
/// a convolution's result right after it, the result read nowhere else —
/// becomes the convolution with a bias: the kernel adds `b` while it writes
/// (one pass over the result less per biased convolution; each element is
/// rounded exactly as the add rounds it).
fn fold_conv_bias(steps: Vec<Step>, outputs: &[usize]) -> Vec<Step> {
    let mut reads = HashMap::<usize, usize>::new();
    for s in &steps {
        for r in s.kind.reads() {
            *reads.entry(r).or_default() += 1;
        }
    }
    let mut out: Vec<Step> = Vec::with_capacity(steps.len());
    for step in steps {
        if let Some(prev) = out.last_mut() {
            if let Some(folded) = conv_with_bias(prev, &step, &reads, outputs) {
                prev.kind = folded;
                prev.flops += step.flops;
                continue;
            }
        }
        out.push(step);
    }
    out
}

/// The convolution `conv` with the bias loop `add` folded in, when it is one.
fn conv_with_bias(
    conv: &Step,
    add: &Step,
    reads: &HashMap<usize, usize>,
    outputs: &[usize],
) -> Option<Kind> {
    let Kind::Conv {
        lhs,
        rhs,
        attrs,
        out,
        shape,
        bias: None,
    } = &conv.kind
    else {
        return None;
    };
    let Kind::Loop {
        prog,
        inputs,
        out: sum,
        len,
        ..
    } = &add.kind
    else {
        return None;
    };
    let (load, view, m) = match prog.nodes.as_slice() {
        [Node::Load(l), Node::View(v, m), Node::Binary(BinaryOp::Add, 0, 1)]
        | [Node::View(v, m), Node::Load(l), Node::Binary(BinaryOp::Add, 0, 1)] => (*l, *v, m),
        _ => return None,
    };
    let feature = usize::try_from(attrs.dims.output_feature).ok()?;
    if inputs[load] != *out
        || *len != shape.iter().product::<usize>()
        || feature >= shape.len()
        || reads.get(out) != Some(&1)
        || outputs.contains(out)
        || prog.fault != 0.0
    {
        return None;
    }
    let mut strides = vec![0isize; shape.len()];
    strides[feature] = 1;
    let per_feature = ViewSpec {
        shape: shape.clone(),
        strides,
        base: 0,
    }
    .merged();
    if *m != per_feature {
        return None;
    }
    Some(Kind::Conv {
        lhs: lhs.clone(),
        rhs: rhs.clone(),
        attrs: attrs.clone(),
        out: *sum,
        shape: shape.clone(),
        bias: Some(inputs[view]),
    })
}

/// Adjacent add-reductions over the same positions into the same shape,
/// where the later does not read what the earlier writes, become one step:
/// their programs side by side over the union of their inputs, each value
/// summed as before (bit-identical), the inputs read once. The batch-BN
/// backward takes Σdy and Σdy·x̂, then Σγdy and Σx̂·γdy, back to back.
fn merge_sibling_reductions(steps: Vec<Step>) -> Vec<Step> {
    let mut out: Vec<Step> = Vec::with_capacity(steps.len());
    for step in steps {
        if let Some(prev) = out.last_mut() {
            if let Some(merged) = merge_reductions(prev, &step) {
                prev.kind = merged;
                prev.flops += step.flops;
                continue;
            }
        }
        out.push(step);
    }
    out
}

/// The two reductions as one, when they can share a pass.
fn merge_reductions(a: &Step, b: &Step) -> Option<Kind> {
    let (
        Kind::Reduce {
            prog: pa,
            inputs: ia,
            outs: oa,
            len: la,
            map: ma,
            out_len: na,
        },
        Kind::Reduce {
            prog: pb,
            inputs: ib,
            outs: ob,
            len: lb,
            map: mb,
            out_len: nb,
        },
    ) = (&a.kind, &b.kind)
    else {
        return None;
    };
    let written: Vec<usize> = oa.iter().map(|o| o.slot).collect();
    if la != lb
        || na != nb
        || ma != mb
        || pa.fault != 0.0
        || pb.fault != 0.0
        || b.kind.reads().iter().any(|r| written.contains(r))
    {
        return None;
    }
    let mut inputs = ia.clone();
    let remap: Vec<usize> = ib
        .iter()
        .map(|s| match inputs.iter().position(|t| t == s) {
            Some(k) => k,
            None => {
                inputs.push(*s);
                inputs.len() - 1
            }
        })
        .collect();
    let shift = pa.nodes.len();
    let mut nodes = pa.nodes.clone();
    nodes.extend(pb.nodes.iter().map(|n| n.shifted(shift, &remap)));
    let mut outs = oa.clone();
    outs.extend(ob.iter().map(|o| ReduceOut {
        node: o.node + shift,
        ..*o
    }));
    Some(Kind::Reduce {
        prog: Program { nodes, fault: 0.0 },
        inputs,
        outs,
        len: *la,
        map: ma.clone(),
        out_len: *na,
    })
}

/// An expression as a register program over distinct input slots.
fn lower(e: &Rc<Expr>) -> (Program, Vec<usize>) {
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
