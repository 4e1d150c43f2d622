//! The one interface every engine implements: an [`Engine`] turns a StableHLO
//! function (its printed text and its parsed module, the same thing twice) into
//! a [`Prepared`] executable for R replicas, which runs on host tensors, one
//! argument list per replica. Also owns the choice of engine from command-line
//! options ([`EngineKind`], [`EngineOptions`]), the argument checks every
//! engine shares, and the adapter of the PJRT binding to this interface.

use crate::error::EngineError;
use crate::host::{HostData, HostTensor};
use ir::{ElemType, Module, TensorType};
use std::fmt;
use std::path::PathBuf;
use std::str::FromStr;

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

/// Which engine runs the step.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EngineKind {
    /// certgrad's own f32 executor (the default).
    Native,
    /// XLA (or any PJRT backend) through a plugin `.so` loaded at run time.
    Pjrt,
    /// IREE through `iree-compile` and `iree-run-module`.
    Iree,
}

impl EngineKind {
    pub const ALL: [EngineKind; 3] = [EngineKind::Native, EngineKind::Pjrt, EngineKind::Iree];

    pub fn name(self) -> &'static str {
        match self {
            EngineKind::Native => "native",
            EngineKind::Pjrt => "pjrt",
            EngineKind::Iree => "iree",
        }
    }
}

impl fmt::Display for EngineKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for EngineKind {
    type Err = EngineError;
    fn from_str(s: &str) -> Result<Self, EngineError> {
        Self::ALL
            .into_iter()
            .find(|k| k.name() == s)
            .ok_or_else(|| EngineError(format!("unknown engine `{s}` (native, pjrt, iree)")))
    }
}

/// What the command line says about the engine.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EngineOptions {
    pub kind: EngineKind,
    /// The PJRT plugin `.so` (`--pjrt-plugin`; when absent, the binding reads
    /// `$CERTGRAD_PJRT_PLUGIN`).
    pub pjrt_plugin: Option<PathBuf>,
    /// The directory holding `iree-compile` and `iree-run-module` (`--iree-dir`).
    pub iree_dir: Option<PathBuf>,
}

impl Default for EngineOptions {
    fn default() -> Self {
        EngineOptions::native()
    }
}

impl EngineOptions {
    pub fn native() -> Self {
        EngineOptions {
            kind: EngineKind::Native,
            pjrt_plugin: None,
            iree_dir: None,
        }
    }

    /// From `--engine`, `--pjrt-plugin` and `--iree-dir`.
    pub fn from_cli(
        engine: &str,
        pjrt_plugin: Option<PathBuf>,
        iree_dir: Option<PathBuf>,
    ) -> Result<Self, EngineError> {
        let kind: EngineKind = engine
            .parse()
            .map_err(|e: EngineError| EngineError(format!("--engine: {e}")))?;
        Ok(EngineOptions {
            kind,
            pjrt_plugin,
            iree_dir,
        })
    }

    /// The engine these options name, ready to prepare functions (loads the
    /// PJRT plugin and creates its client; finds the IREE tools).
    pub fn build(&self) -> Result<Box<dyn Engine>, EngineError> {
        match self.kind {
            EngineKind::Native => Ok(Box::new(crate::native::NativeEngine)),
            EngineKind::Iree => Ok(Box::new(crate::iree::IreeEngine::locate(
                self.iree_dir.as_deref(),
            )?)),
            EngineKind::Pjrt => Ok(Box::new(pjrt_adapter::PjrtEngine::load(
                self.pjrt_plugin.as_deref(),
            )?)),
        }
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

mod pjrt_adapter {
    //! The PJRT binding behind [`Engine`]: one client per engine, one
    //! executable per prepared function, compiled from the printed text (the
    //! binding renames the entry `@main` in the compiled copy only).

    use super::{Engine, FuncSignature, Prepared};
    use crate::error::EngineError;
    use crate::host::HostTensor;
    use crate::pjrt::{Client, Executable, PjrtPlugin};
    use std::path::{Path, PathBuf};

    pub struct PjrtEngine {
        path: PathBuf,
        client: Client,
    }

    impl PjrtEngine {
        /// Loads the plugin at `path` (else `$CERTGRAD_PJRT_PLUGIN`) and
        /// creates its client.
        pub fn load(path: Option<&Path>) -> Result<PjrtEngine, EngineError> {
            let plugin = PjrtPlugin::locate(path)?;
            let client = plugin.client()?;
            Ok(PjrtEngine {
                path: plugin.path().to_path_buf(),
                client,
            })
        }

        pub fn client(&self) -> &Client {
            &self.client
        }
    }

    impl Engine for PjrtEngine {
        fn name(&self) -> &str {
            "pjrt"
        }

        fn prepare(
            &mut self,
            module_text: &str,
            module: &ir::Module,
            func: &str,
            replicas: usize,
        ) -> Result<Box<dyn Prepared>, EngineError> {
            let sig = FuncSignature::of(module, func)?;
            let exe = self
                .client
                .compile_entry(module_text, Some(func), replicas)?;
            Ok(Box::new(PjrtPrepared {
                sig,
                exe,
                replicas,
                plugin: self.path.display().to_string(),
            }))
        }
    }

    struct PjrtPrepared {
        sig: FuncSignature,
        exe: Executable,
        replicas: usize,
        plugin: String,
    }

    impl Prepared for PjrtPrepared {
        fn replicas(&self) -> usize {
            self.replicas
        }

        fn describe(&self) -> String {
            format!(
                "pjrt ({}, {} replica{})",
                self.plugin,
                self.replicas,
                if self.replicas == 1 { "" } else { "s" }
            )
        }

        fn run(&mut self, args: &[Vec<HostTensor>]) -> Result<Vec<Vec<HostTensor>>, EngineError> {
            self.sig.check_args(args, self.replicas)?;
            let outs = self.exe.execute(args)?;
            if outs.len() != self.replicas {
                return Err(EngineError(format!(
                    "pjrt: @{} returned results for {} replicas, expected {}",
                    self.sig.func,
                    outs.len(),
                    self.replicas
                )));
            }
            for o in &outs {
                self.sig.check_results(o, "pjrt")?;
            }
            Ok(outs)
        }
    }
}

pub use pjrt_adapter::PjrtEngine;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn engine_kinds_parse_and_print_back() {
        for k in EngineKind::ALL {
            assert_eq!(k.to_string().parse::<EngineKind>().unwrap(), k);
        }
        assert_eq!("iree".parse::<EngineKind>().unwrap(), EngineKind::Iree);
        let e = "xla".parse::<EngineKind>().unwrap_err();
        assert!(e.0.contains("unknown engine `xla`"), "{e}");
        assert!("Native".parse::<EngineKind>().is_err(), "names are exact");
    }

    #[test]
    fn cli_options_name_the_engine_and_the_plugin() {
        let o = EngineOptions::from_cli("pjrt", Some("/x/libpjrt_cpu.so".into()), None).unwrap();
        assert_eq!(o.kind, EngineKind::Pjrt);
        assert_eq!(o.pjrt_plugin, Some(PathBuf::from("/x/libpjrt_cpu.so")));
        let e = EngineOptions::from_cli("gpu", None, None).unwrap_err();
        assert!(e.0.starts_with("--engine: unknown engine `gpu`"), "{e}");
        let missing = EngineOptions {
            kind: EngineKind::Pjrt,
            pjrt_plugin: None,
            iree_dir: None,
        };
        if std::env::var_os(crate::pjrt::PLUGIN_ENV).is_none() {
            let e = missing.build().err().expect("pjrt without a plugin built");
            assert!(e.0.contains("--pjrt-plugin"), "{e}");
        }
        let absent = EngineOptions {
            pjrt_plugin: Some("/nonexistent/libpjrt.so".into()),
            ..missing
        };
        let e = absent.build().err().expect("a missing plugin loaded");
        assert!(e.0.contains("/nonexistent/libpjrt.so"), "{e}");
    }

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
