//! The executor's API: [`Plan`], compiled once from a function and run many
//! times, and what a plan reports about itself: time per kind of step and
//! per step while profiling, a one-line summary, the listing of its schedule.

use crate::compile::Builder;
use crate::passes::{cse, inline_all_calls};
use crate::rewrites::Rewrites;
use crate::runtime::Compiled;
use crate::schedule::Kind;
use den::{eval_func, EvalError, EvalOptions, Value};
use ir::{Module, TensorType};
use std::collections::HashMap;

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

/// A compiled f32 execution plan for one function (see the crate docs).
pub struct Plan {
    func: String,
    params: Vec<TensorType>,
    body: Body,
    profile: bool,
    parallel: bool,
}

enum Body {
    /// Calls that could not be inlined: the generic evaluator runs the whole function.
    Generic(Box<Module>),
    Compiled(Compiled),
}

impl Plan {
    /// Compiles `func` of `module`. Never fails on a function the generic
    /// evaluator can run: what the plan has no step for runs on the generic
    /// evaluator (one op, or the whole function).
    pub fn compile(module: &Module, func: &str) -> Result<Plan, EvalError> {
        Plan::compile_with(module, func, Rewrites::ALL)
    }

    /// [`Plan::compile`] with only the rewrites `rewrites` switches on: the
    /// same function computed with fewer rewrites (bisecting a wrong plan to
    /// the rewrite that made it wrong).
    pub fn compile_with(
        module: &Module,
        func: &str,
        rewrites: Rewrites,
    ) -> Result<Plan, EvalError> {
        let f = module.func(func).ok_or_else(|| EvalError {
            func: func.to_string(),
            op: "func.func",
            line: None,
            message: format!("no function @{func} in the module"),
        })?;
        // Refused before the plan sizes its buffers.
        den::eval::check_sizes::<f32>(module)?;
        // JAX's exports call `@closed_call`, `@dynamic_index_in_dim`, … from
        // loop bodies; inlined, the whole function is one schedule.
        let inlined = inline_all_calls(module, f);
        let inlined = inlined.as_ref().unwrap_or(f);
        let deduplicated = cse::eliminate_common_subexpressions(inlined, &rewrites);
        let body = match Builder::new(&deduplicated, rewrites).and_then(|b| b.build()) {
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
                let (func, profile, parallel) = (&self.func, self.profile, self.parallel);
                if parallel && rayon::current_thread_index().is_none() {
                    // The whole step on one of rayon's workers: each parallel
                    // loop is then a fork-join with the other workers, not an
                    // injection from outside the pool that parks this thread
                    // and wakes it again (two context switches per step of
                    // the plan: ~10 % of a cifar8-bbn b32 step in the kernel).
                    rayon::scope(|_| c.run(func, inputs, profile, parallel))
                } else {
                    c.run(func, inputs, profile, parallel)
                }
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
                        in_place,
                    } => format!(
                        "len {len} {inputs:?} -> {out}{}: {:?}",
                        over_input(*in_place),
                        prog.nodes
                    ),
                    Kind::Reduce {
                        prog,
                        inputs,
                        len,
                        outs,
                        stores,
                        store_in_place,
                        ..
                    } => format!(
                        "len {len} {inputs:?} -> {:?}{}{}: {:?}",
                        outs.iter().map(|o| (o.slot, o.node)).collect::<Vec<_>>(),
                        if stores.is_empty() {
                            String::new()
                        } else {
                            format!(" stores {stores:?}")
                        },
                        over_input(*store_in_place),
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

    /// Negative-control hook for tests (cargo feature `fault-injection`):
    /// adds `delta` to the last value of the first fused reduction that has
    /// elementwise ops, before it is summed (and stored, when the pass stores
    /// it). Returns whether such a reduction exists.
    #[cfg(feature = "fault-injection")]
    pub fn perturb_first_fused_reduction_for_tests(&mut self, delta: f32) -> bool {
        let Body::Compiled(c) = &mut self.body else {
            return false;
        };
        for s in &mut c.steps {
            if let Kind::Reduce { prog, .. } = &mut s.kind {
                if prog.op_count() >= 1 {
                    prog.fault = delta;
                    return true;
                }
            }
        }
        false
    }

    /// Negative-control hook for tests (cargo feature `fault-injection`):
    /// scales every sum of the first step computing batch norm's
    /// statistics from a convolution's moments by `1 + rel` (a combination
    /// of the plane moments that is off). Returns whether such a step exists.
    #[cfg(feature = "fault-injection")]
    pub fn perturb_first_conv_moments_for_tests(&mut self, rel: f32) -> bool {
        let Body::Compiled(c) = &mut self.body else {
            return false;
        };
        c.steps.iter_mut().any(|s| match &mut s.kind {
            Kind::Moments { fault, .. } => {
                *fault = rel;
                true
            }
            _ => false,
        })
    }

    /// Negative-control hook for tests (cargo feature `fault-injection`,
    /// off by default): adds `delta` to every element written by the first
    /// fused loop with at least two elementwise ops, a shape-preserving bug
    /// an agreement check must catch. Returns whether such a loop exists.
    #[cfg(feature = "fault-injection")]
    pub fn perturb_first_fused_loop_for_tests(&mut self, delta: f32) -> bool {
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

    /// Negative-control hook for tests (cargo feature `fault-injection`): the
    /// first dot with a folded bias forgets it (a fold that drops the add).
    /// Returns whether such a dot exists.
    #[cfg(feature = "fault-injection")]
    pub fn drop_first_dot_bias_for_tests(&mut self) -> bool {
        let Body::Compiled(c) = &mut self.body else {
            return false;
        };
        c.steps.iter_mut().any(|s| match &mut s.kind {
            Kind::Dot { bias, .. } => bias.take().is_some(),
            _ => false,
        })
    }

    /// The same hook on the first fused loop (of at least one op) inside a
    /// `while`/`case`/`if` region: the sub-plans' negative control.
    #[cfg(feature = "fault-injection")]
    pub fn perturb_first_fused_loop_in_a_region_for_tests(&mut self, delta: f32) -> bool {
        fn inside(c: &mut Compiled, delta: f32, nested: bool) -> bool {
            for s in &mut c.steps {
                let found = match &mut s.kind {
                    Kind::Loop { prog, .. } if nested && prog.op_count() >= 1 => {
                        prog.fault = delta;
                        true
                    }
                    Kind::While { cond, body, .. } => {
                        inside(&mut cond.plan, delta, true) || inside(&mut body.plan, delta, true)
                    }
                    Kind::Branch { branches, .. } => branches
                        .iter_mut()
                        .any(|b| inside(&mut b.plan, delta, true)),
                    _ => false,
                };
                if found {
                    return true;
                }
            }
            false
        }
        match &mut self.body {
            Body::Compiled(c) => inside(c, delta, false),
            Body::Generic(_) => false,
        }
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

/// The listing's note of a fused pass that writes over a dying input's buffer.
fn over_input(k: Option<usize>) -> String {
    k.map(|k| format!(" over input {k}")).unwrap_or_default()
}
