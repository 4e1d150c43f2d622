//! The native engine: certgrad's own f32 execution of the parsed module. One
//! replica runs through an `exec::Plan` (compiled once, reused every
//! step), falling back to the fast-path evaluator `den::eval_func` for a
//! function the planner does not take; R > 1 replicas run through an
//! `exec::ReplicaPlan` (one plan per stage between the `all_reduce`s, the
//! collectives folded in the host), falling back to `den::eval_replicas`,
//! which gives `all_reduce` its cross-replica meaning, for a function it
//! does not take.

use crate::engine::{Engine, FuncSignature, Prepared};
use crate::error::EngineError;
use crate::host::HostTensor;
use den::{EvalOptions, Scalar, Value};
use ir::Module;

/// The native engine: which of the plan's rewrites run (all, unless a
/// bisection switches some off); everything else lives in the prepared
/// function.
pub struct NativeEngine {
    pub rewrites: exec::Rewrites,
}

impl Default for NativeEngine {
    fn default() -> Self {
        NativeEngine {
            rewrites: exec::Rewrites::ALL,
        }
    }
}

impl Engine for NativeEngine {
    fn name(&self) -> &str {
        "native"
    }

    fn prepare(
        &mut self,
        _module_text: &str,
        module: &Module,
        func: &str,
        replicas: usize,
    ) -> Result<Box<dyn Prepared>, EngineError> {
        let sig = FuncSignature::of(module, func)?;
        if replicas == 0 {
            return Err(EngineError("replicas must be at least 1".into()));
        }
        let how = if replicas == 1 {
            match exec::Plan::compile_with(module, func, self.rewrites) {
                Ok(plan) => How::Plan(Box::new(plan)),
                Err(e) => How::Evaluator {
                    why: format!("no plan: {e}"),
                },
            }
        } else if self.rewrites != exec::Rewrites::ALL {
            return Err(EngineError(
                "rewrites can be switched off for one replica only".into(),
            ));
        } else {
            match exec::ReplicaPlan::compile(module, func, replicas) {
                Ok(plan) => How::ReplicaPlan(Box::new(plan)),
                Err(why) => How::Replicas { why },
            }
        };
        // A rewrite is off when switching it off changes nothing.
        let rewrites_off = exec::Rewrites::NAMES
            .into_iter()
            .filter(|n| self.rewrites.without(n) == Some(self.rewrites))
            .collect();
        Ok(Box::new(NativePrepared {
            module: module.clone(),
            sig,
            replicas,
            how,
            rewrites_off,
        }))
    }
}

enum How {
    Plan(Box<exec::Plan>),
    /// The fast-path evaluator, and why the planner was not used.
    Evaluator {
        why: String,
    },
    ReplicaPlan(Box<exec::ReplicaPlan>),
    /// The replica evaluator, and why no replica plan.
    Replicas {
        why: String,
    },
}

struct NativePrepared {
    module: Module,
    sig: FuncSignature,
    replicas: usize,
    how: How,
    /// The plan's rewrites switched off, by name.
    rewrites_off: Vec<&'static str>,
}

impl NativePrepared {
    /// One replica's arguments as evaluator values; bf16/f16 parameters are
    /// rounded on entry, as a device would store them.
    fn values(&self, args: &[HostTensor]) -> Result<Vec<Value<f32>>, EngineError> {
        args.iter()
            .zip(&self.sig.params)
            .map(|(t, ty)| Ok(narrowed(t.to_value_f32(ty.elem)?)))
            .collect()
    }

    fn host(&self, outs: &[Value<f32>]) -> Result<Vec<HostTensor>, EngineError> {
        let host: Vec<HostTensor> = outs.iter().map(HostTensor::from_value_f32).collect();
        self.sig.check_results(&host, "native")?;
        Ok(host)
    }
}

/// A bf16/f16 argument rounded to its type (the host passes it as f32).
fn narrowed(v: Value<f32>) -> Value<f32> {
    match v {
        Value::Float(t, e) if e != ir::ElemType::F32 => {
            Value::Float(t.map(|x| Scalar::round_to(*x, e)), e)
        }
        v => v,
    }
}

impl Prepared for NativePrepared {
    fn replicas(&self) -> usize {
        self.replicas
    }

    fn describe(&self) -> String {
        match &self.how {
            How::Plan(_) => match self.rewrites_off.is_empty() {
                true => "native (exec plan)".into(),
                false => format!(
                    "native (exec plan without {})",
                    self.rewrites_off.join(", ")
                ),
            },
            How::Evaluator { why } => format!("native (fast evaluator; {why})"),
            How::ReplicaPlan(p) => format!(
                "native ({} replicas, exec plans: {})",
                self.replicas,
                p.summary()
            ),
            How::Replicas { why } => format!(
                "native ({} replicas, den::eval_replicas; no replica plan: {why})",
                self.replicas
            ),
        }
    }

    /// One replica on the compiled plan takes its arguments' buffers rather
    /// than copying them.
    fn run_one(&mut self, args: Vec<HostTensor>) -> Result<Vec<HostTensor>, EngineError> {
        if self.replicas != 1 || !matches!(self.how, How::Plan(_)) {
            let mut out = self.run(&[args])?;
            return Ok(out.swap_remove(0));
        }
        let args = [args];
        self.sig.check_args(&args, 1)?;
        let [args] = args;
        let values = args
            .into_iter()
            .zip(&self.sig.params)
            .map(|(t, ty)| Ok(narrowed(t.into_value_f32(ty.elem)?)))
            .collect::<Result<Vec<_>, EngineError>>()?;
        let How::Plan(plan) = &mut self.how else {
            unreachable!("checked above")
        };
        let outs = plan
            .run(values)
            .map_err(|e| EngineError(format!("native: @{}: {e}", self.sig.func)))?;
        let host: Vec<HostTensor> = outs
            .into_iter()
            .map(HostTensor::from_value_f32_owned)
            .collect();
        self.sig.check_results(&host, "native")?;
        Ok(host)
    }

    fn run(&mut self, args: &[Vec<HostTensor>]) -> Result<Vec<Vec<HostTensor>>, EngineError> {
        self.sig.check_args(args, self.replicas)?;
        let func = &self.sig.func;
        let err = |e: &dyn std::fmt::Display| EngineError(format!("native: @{func}: {e}"));
        let values = args
            .iter()
            .map(|a| self.values(a))
            .collect::<Result<Vec<_>, _>>()?;
        let outs: Vec<Vec<Value<f32>>> = match &mut self.how {
            How::Plan(plan) => {
                let v = values.into_iter().next().expect("one replica");
                vec![plan.run(v).map_err(|e| err(&e))?]
            }
            How::Evaluator { .. } => {
                let v = values.into_iter().next().expect("one replica");
                let opts = EvalOptions::default();
                vec![
                    den::eval_func::<f32>(&self.module, func, v, &opts)
                        .map_err(|e| err(&e))?
                        .outputs,
                ]
            }
            How::ReplicaPlan(plan) => plan.run(values).map_err(|e| err(&e))?,
            How::Replicas { .. } => {
                let opts = EvalOptions {
                    replicas: self.replicas,
                    ..EvalOptions::default()
                };
                den::eval_replicas::<f32>(&self.module, func, values, &opts)
                    .map_err(|e| err(&e))?
                    .into_iter()
                    .map(|e| e.outputs)
                    .collect()
            }
        };
        outs.iter().map(|o| self.host(o)).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const ADD: &str =
        "func.func public @f(%a: tensor<3xf32>, %b: tensor<3xf32>) -> tensor<3xf32> {\n  \
        %0 = stablehlo.add %a, %b : tensor<3xf32>\n  \
        return %0 : tensor<3xf32>\n}\n";

    #[test]
    fn runs_a_function_and_checks_its_arguments() {
        let m = ir::parse::parse_module(ADD, "add.mlir").unwrap();
        let mut p = NativeEngine::default().prepare(ADD, &m, "f", 1).unwrap();
        let out = p
            .run_one(vec![
                HostTensor::f32(vec![3], vec![1.0, 2.0, 3.0]),
                HostTensor::f32(vec![3], vec![0.5, 0.25, -3.0]),
            ])
            .unwrap();
        assert_eq!(out, vec![HostTensor::f32(vec![3], vec![1.5, 2.25, 0.0])]);
        let e = p
            .run_one(vec![HostTensor::f32(vec![3], vec![1.0; 3])])
            .unwrap_err();
        assert!(e.0.contains("takes 2 arguments, given 1"), "{e}");
        let e = NativeEngine::default()
            .prepare(ADD, &m, "g", 1)
            .err()
            .unwrap();
        assert!(e.0.contains("no function @g"), "{e}");
    }

    /// `run_one` moves its arguments into the plan instead of copying them;
    /// it must still narrow a bf16 argument and pass an integer one as `run`
    /// does (1 + 3·2⁻⁸ is not a bf16: rounded on the way in to 1 + 2⁻⁶, its
    /// square rounds to 1.03125; unrounded it would give 1.0234375).
    #[test]
    fn run_one_takes_its_arguments_as_run_copies_them() {
        let text = "func.func public @f(%a: tensor<2xbf16>, %b: tensor<2xf32>, %i: tensor<2xi64>) -> (tensor<2xbf16>, tensor<2xf32>, tensor<2xi64>) {\n  \
            %0 = stablehlo.multiply %a, %a : tensor<2xbf16>\n  \
            %1 = stablehlo.multiply %b, %b : tensor<2xf32>\n  \
            %2 = stablehlo.add %i, %i : tensor<2xi64>\n  \
            return %0, %1, %2 : tensor<2xbf16>, tensor<2xf32>, tensor<2xi64>\n}\n";
        let m = ir::parse::parse_module(text, "mixed.mlir").unwrap();
        let mut p = NativeEngine::default().prepare(text, &m, "f", 1).unwrap();
        let args = vec![
            HostTensor::f32(vec![2], vec![1.0 + 3.0 / 256.0, -3.5]),
            HostTensor::f32(vec![2], vec![1.5, -0.25]),
            HostTensor::i64(vec![2], vec![7, -40]),
        ];
        let copied = p.run(std::slice::from_ref(&args)).unwrap().swap_remove(0);
        let moved = p.run_one(args).unwrap();
        assert_eq!(moved, copied);
        assert_eq!(
            moved,
            vec![
                HostTensor::f32(vec![2], vec![1.03125, 12.25]),
                HostTensor::f32(vec![2], vec![2.25, 0.0625]),
                HostTensor::i64(vec![2], vec![14, -80]),
            ]
        );
    }
}
