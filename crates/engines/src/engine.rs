//! The one interface every engine implements: an [`Engine`] turns a StableHLO
//! function (its printed text and its parsed module, the same thing twice) into
//! a [`Prepared`] executable for R replicas, which runs on host tensors, one
//! argument list per replica. Also owns the argument and result checks every
//! engine shares ([`FuncSignature`]) and how engine outputs are compared
//! ([`normwise_diff`]). Which engine runs is [`crate::select`]'s.

use crate::error::EngineError;
use crate::host::{HostData, HostTensor};
use ir::{ElemType, Module, TensorType};

/// An execution engine: compiles (or plans) one function for R replicas.
pub trait Engine {
    /// `native`, `pjrt`, `iree`.
    fn name(&self) -> &str;

    /// Prepares `func` of `module` for `replicas` replicas. `module_text` is
    /// `module` printed (what the external engines compile); the caller keeps
    /// the two in step.
    fn prepare(
        &mut self,
        module_text: &str,
        module: &Module,
        func: &str,
        replicas: usize,
    ) -> Result<Box<dyn Prepared>, EngineError>;
}

/// A function ready to run: `args[r]` are replica r's arguments in signature
/// order, and the result's `[r]` are replica r's results.
pub trait Prepared {
    fn replicas(&self) -> usize;

    /// One line for logs: the engine and how it runs the function.
    fn describe(&self) -> String;

    fn run(&mut self, args: &[Vec<HostTensor>]) -> Result<Vec<Vec<HostTensor>>, EngineError>;

    /// [`Prepared::run`] for a single replica.
    fn run_one(&mut self, args: Vec<HostTensor>) -> Result<Vec<HostTensor>, EngineError> {
        let mut out = self.run(&[args])?;
        Ok(out.swap_remove(0))
    }
}

/// A function's argument and result types, as the engines check them.
#[derive(Clone, Debug, PartialEq)]
pub struct FuncSignature {
    pub func: String,
    pub params: Vec<TensorType>,
    pub results: Vec<TensorType>,
}

impl FuncSignature {
    /// The signature of `func` in `module`, or an error listing the functions.
    pub fn of(module: &Module, func: &str) -> Result<FuncSignature, EngineError> {
        let f = module.func(func).ok_or_else(|| {
            let names: Vec<&str> = module.funcs.iter().map(|f| f.name.as_str()).collect();
            EngineError(format!(
                "no function @{func} in the module (functions: @{})",
                names.join(", @")
            ))
        })?;
        Ok(FuncSignature {
            func: func.to_string(),
            params: f.params.iter().map(|p| p.ty.clone()).collect(),
            results: f.results.iter().map(|r| r.ty.clone()).collect(),
        })
    }

    /// Checks `args` (one list per replica) against the parameters: replica
    /// count, arity, and each tensor's shape and host element type.
    pub fn check_args(&self, args: &[Vec<HostTensor>], replicas: usize) -> Result<(), EngineError> {
        if args.len() != replicas {
            return Err(EngineError(format!(
                "@{} was prepared for {replicas} replica{}, given arguments for {}",
                self.func,
                if replicas == 1 { "" } else { "s" },
                args.len()
            )));
        }
        for (r, list) in args.iter().enumerate() {
            let at = if replicas > 1 {
                format!(" (replica {r})")
            } else {
                String::new()
            };
            if list.len() != self.params.len() {
                return Err(EngineError(format!(
                    "@{} takes {} arguments, given {}{at}",
                    self.func,
                    self.params.len(),
                    list.len()
                )));
            }
            for (i, (t, ty)) in list.iter().zip(&self.params).enumerate() {
                t.validate()
                    .map_err(|e| EngineError(format!("@{} argument {i}{at}: {e}", self.func)))?;
                if t.shape != ty.shape || t.data.elem() != host_elem(ty.elem) {
                    return Err(EngineError(format!(
                        "@{} argument {i}{at} expects {ty} (host {:?} {:?}), found {:?} {:?}",
                        self.func,
                        host_elem(ty.elem),
                        ty.shape,
                        t.data.elem(),
                        t.shape
                    )));
                }
            }
        }
        Ok(())
    }

    /// Checks one replica's results against the declared result types.
    pub fn check_results(&self, outs: &[HostTensor], engine: &str) -> Result<(), EngineError> {
        if outs.len() != self.results.len() {
            return Err(EngineError(format!(
                "{engine}: @{} returned {} results, its signature has {}",
                self.func,
                outs.len(),
                self.results.len()
            )));
        }
        for (k, (t, ty)) in outs.iter().zip(&self.results).enumerate() {
            if t.shape != ty.shape || t.data.len() != t.num_elements() {
                return Err(EngineError(format!(
                    "{engine}: @{} result {k} has shape {:?} ({} values), its signature says {ty}",
                    self.func,
                    t.shape,
                    t.data.len()
                )));
            }
        }
        Ok(())
    }
}

/// The host element type that carries a StableHLO element type: every float
/// type travels as f32 (bf16/f16 are rounded by the engine on entry), i64 and
/// ui64 as i64, every other integer type (i1 as 0/1) as i32.
pub fn host_elem(elem: ElemType) -> ElemType {
    match elem {
        e if e.is_float() => ElemType::F32,
        ElemType::I64 | ElemType::UI64 => ElemType::I64,
        _ => ElemType::I32,
    }
}

/// Norm-wise relative difference ‖a − b‖ / ‖b‖ (absolute when b = 0) of two
/// host tensors of one shape and type; how engine outputs are compared
/// (element-wise relative error is meaningless where θ' has entries near 0).
pub fn normwise_diff(a: &HostTensor, b: &HostTensor) -> Result<f64, EngineError> {
    let as64 = |t: &HostTensor| -> Vec<f64> {
        match &t.data {
            HostData::F32(v) => v.iter().map(|&x| x as f64).collect(),
            HostData::I32(v) => v.iter().map(|&x| x as f64).collect(),
            HostData::I64(v) => v.iter().map(|&x| x as f64).collect(),
        }
    };
    if a.shape != b.shape || a.data.elem() != b.data.elem() {
        return Err(EngineError(format!(
            "cannot compare {:?} {:?} with {:?} {:?}",
            a.data.elem(),
            a.shape,
            b.data.elem(),
            b.shape
        )));
    }
    let (x, y) = (as64(a), as64(b));
    let diff: f64 = x.iter().zip(&y).map(|(p, q)| (p - q) * (p - q)).sum();
    let norm: f64 = y.iter().map(|q| q * q).sum();
    Ok(if norm > 0.0 {
        (diff / norm).sqrt()
    } else {
        diff.sqrt()
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sig() -> FuncSignature {
        FuncSignature {
            func: "f".into(),
            params: vec![
                TensorType::new(vec![2, 3], ElemType::F32),
                TensorType::new(Vec::<i64>::new(), ElemType::BF16),
                TensorType::new(vec![2], ElemType::I1),
                TensorType::new(vec![1], ElemType::UI64),
            ],
            results: vec![TensorType::new(vec![2], ElemType::F32)],
        }
    }

    fn good_args() -> Vec<HostTensor> {
        vec![
            HostTensor::f32(vec![2, 3], vec![0.0; 6]),
            HostTensor::f32(vec![], vec![1.0]),
            HostTensor::i32(vec![2], vec![0, 1]),
            HostTensor::i64(vec![1], vec![9]),
        ]
    }

    #[test]
    fn arguments_are_checked_against_the_signature() {
        let s = sig();
        s.check_args(&[good_args()], 1).unwrap();
        s.check_args(&[good_args(), good_args()], 2).unwrap();
        let e = s.check_args(&[good_args()], 2).unwrap_err();
        assert!(
            e.0.contains("prepared for 2 replicas, given arguments for 1"),
            "{e}"
        );
        let mut short = good_args();
        short.pop();
        assert!(s
            .check_args(&[short], 1)
            .unwrap_err()
            .0
            .contains("takes 4 arguments, given 3"));
        let mut wrong_shape = good_args();
        wrong_shape[0] = HostTensor::f32(vec![3, 2], vec![0.0; 6]);
        let e = s.check_args(&[good_args(), wrong_shape], 2).unwrap_err();
        assert!(
            e.0.contains("argument 0 (replica 1) expects tensor<2x3xf32>"),
            "{e}"
        );
        let mut wrong_type = good_args();
        wrong_type[3] = HostTensor::i32(vec![1], vec![9]);
        assert!(s
            .check_args(&[wrong_type], 1)
            .unwrap_err()
            .0
            .contains("argument 3"));
        let mut torn = good_args();
        torn[0] = HostTensor::f32(vec![2, 3], vec![0.0; 5]);
        assert!(s
            .check_args(&[torn], 1)
            .unwrap_err()
            .0
            .contains("needs 6 elements"));
    }

    #[test]
    fn results_are_checked_against_the_signature() {
        let s = sig();
        s.check_results(&[HostTensor::f32(vec![2], vec![1.0, 2.0])], "t")
            .unwrap();
        let e = s
            .check_results(&[HostTensor::f32(vec![1, 2], vec![1.0, 2.0])], "iree")
            .unwrap_err();
        assert!(e.0.starts_with("iree: @f result 0 has shape [1, 2]"), "{e}");
        assert!(s.check_results(&[], "t").is_err());
    }

    #[test]
    fn normwise_difference_is_relative_to_the_second_tensor() {
        let b = HostTensor::f32(vec![2], vec![3.0, 4.0]);
        let a = HostTensor::f32(vec![2], vec![3.0, 4.5]);
        assert!((normwise_diff(&a, &b).unwrap() - 0.1).abs() < 1e-12);
        let zero = HostTensor::f32(vec![2], vec![0.0, 0.0]);
        assert_eq!(normwise_diff(&b, &zero).unwrap(), 5.0, "absolute at b = 0");
        assert!(normwise_diff(&a, &HostTensor::f32(vec![1, 2], vec![3.0, 4.0])).is_err());
    }
}
