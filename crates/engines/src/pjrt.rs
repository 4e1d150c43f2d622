//! The PJRT engine: runs StableHLO text on XLA through a PJRT plugin loaded at
//! run time (`libpjrt_cpu.so` from the PyPI wheel `fastatomstruct-xla-cpu`,
//! or a GPU vendor's plugin), with no Python and no link-time XLA.
//!
//! This module owns the safe surface: plugin path resolution, the version
//! policy, the entry-function rename, the hand-encoded `CompileOptionsProto`,
//! and the `PjrtPlugin` → `Client` → `Executable` handles. Every `unsafe`
//! (struct layouts of the C API 0.106, calls through its function table,
//! freeing what the plugin allocated) lives in [`raw`].
#![deny(unsafe_code)]

mod adapter;
mod raw;

use std::path::{Path, PathBuf};
use std::sync::Arc;

pub use crate::error::EngineError;
pub use crate::host::{HostData, HostTensor};
pub use adapter::PjrtEngine;
pub use raw::DeviceInfo;

/// The PJRT C API version whose struct layouts this binding declares.
pub const BINDING_API_MAJOR: i32 = 0;
pub const BINDING_API_MINOR: i32 = 106;

/// The environment variable naming the plugin when no path is given.
pub const PLUGIN_ENV: &str = "CERTGRAD_PJRT_PLUGIN";

/// How to get a CPU plugin, for error messages.
pub const PLUGIN_HELP: &str = "get XLA's CPU plugin with `pip download --no-deps fastatomstruct-xla-cpu -d /tmp/pjrt && cd /tmp/pjrt && unzip -o *.whl` and pass `fastatomstruct_xla_cpu/libpjrt_cpu.so` (or set CERTGRAD_PJRT_PLUGIN to it); GPU users: `pip install jax-cuda12-pjrt` (or `jax-rocm7-pjrt`) and point at the plugin's .so inside the installed package";

/// How a plugin's API version relates to the binding's.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum VersionFit {
    /// Same major and minor.
    Exact,
    /// Same major, newer minor. Accepted: within one major version the C API
    /// only appends fields to argument structs and entries to the function
    /// table, and a plugin refuses any argument struct whose `struct_size` is
    /// smaller than its own, so a struct that grew is reported by the plugin
    /// (its message is passed on) instead of being misread.
    NewerMinor,
}

/// The version policy: the major version must match; the minor version must
/// be at least the binding's (an older plugin may lack fields and table
/// entries this binding uses, which nothing on its side would check).
pub fn check_api_version(major: i32, minor: i32) -> Result<VersionFit, EngineError> {
    let ours = format!("{BINDING_API_MAJOR}.{BINDING_API_MINOR}");
    if major != BINDING_API_MAJOR {
        return Err(EngineError(format!(
            "the PJRT plugin implements PJRT C API {major}.{minor}, but this binding was written for {ours}: a different major version changes the ABI"
        )));
    }
    if minor < BINDING_API_MINOR {
        return Err(EngineError(format!(
            "the PJRT plugin implements PJRT C API {major}.{minor}, older than {ours} that this binding was written for; use a plugin built for {ours} or later"
        )));
    }
    Ok(if minor == BINDING_API_MINOR {
        VersionFit::Exact
    } else {
        VersionFit::NewerMinor
    })
}

/// The plugin path: `explicit`, else `$CERTGRAD_PJRT_PLUGIN`, else an error
/// saying how to get one.
pub fn resolve_plugin_path(explicit: Option<&Path>) -> Result<PathBuf, EngineError> {
    let path = match explicit {
        Some(p) => p.to_path_buf(),
        None => match std::env::var_os(PLUGIN_ENV) {
            Some(v) if !v.is_empty() => PathBuf::from(v),
            _ => {
                return Err(EngineError(format!(
                    "no PJRT plugin given (--pjrt-plugin PATH or {PLUGIN_ENV}); {PLUGIN_HELP}"
                )))
            }
        },
    };
    if !path.is_file() {
        return Err(EngineError(format!(
            "PJRT plugin {} does not exist or is not a file; {PLUGIN_HELP}",
            path.display()
        )));
    }
    Ok(path)
}

/// A serialized `xla.CompileOptionsProto` with
/// `executable_build_options { device_ordinal: -1, num_replicas, num_partitions: 1 }`
/// (field numbers from `xla/pjrt/proto/compile_options.proto`: 3 =
/// executable_build_options; `xla/xla.proto` ExecutableBuildOptionsProto:
/// 1 = device_ordinal, 4 = num_replicas, 5 = num_partitions).
pub fn compile_options_proto(num_replicas: usize) -> Vec<u8> {
    let mut build = Vec::new();
    put_varint_field(&mut build, 1, -1i64 as u64);
    put_varint_field(&mut build, 4, num_replicas as u64);
    put_varint_field(&mut build, 5, 1);
    let mut out = Vec::new();
    put_key(&mut out, 3, WIRE_LEN);
    put_varint(&mut out, build.len() as u64);
    out.extend_from_slice(&build);
    out
}

const WIRE_VARINT: u64 = 0;
const WIRE_LEN: u64 = 2;

fn put_varint(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push((v as u8 & 0x7f) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

fn put_key(out: &mut Vec<u8>, field: u64, wire: u64) {
    put_varint(out, (field << 3) | wire);
}

fn put_varint_field(out: &mut Vec<u8>, field: u64, v: u64) {
    put_key(out, field, WIRE_VARINT);
    put_varint(out, v);
}

fn is_symbol_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || matches!(c, '_' | '$' | '.' | '-')
}

/// Function definitions in `text`: (name, is_private), in order. A
/// definition is `func.func [public|private|nested] @NAME`.
fn func_definitions(text: &str) -> Vec<(String, bool)> {
    let mut defs = Vec::new();
    let mut rest = text;
    while let Some(at) = rest.find("func.func") {
        let after = &rest[at + "func.func".len()..];
        let trimmed = after.trim_start();
        let (private, trimmed) = match trimmed.split_once(char::is_whitespace) {
            Some((w @ ("public" | "private" | "nested"), tail)) if !trimmed.starts_with('@') => {
                (w == "private", tail.trim_start())
            }
            _ => (false, trimmed),
        };
        if let Some(sym) = trimmed.strip_prefix('@') {
            let name: String = sym.chars().take_while(|&c| is_symbol_char(c)).collect();
            if !name.is_empty() {
                defs.push((name, private));
            }
        }
        rest = after;
    }
    defs
}

/// The text with the entry function renamed `@main` (definition and every
/// `@NAME` reference), the rest byte-for-byte unchanged. The entry is `entry`
/// if given, else `main` if defined, else the only public function, else the
/// only function.
pub fn with_main_entry(text: &str, entry: Option<&str>) -> Result<String, EngineError> {
    let defs = func_definitions(text);
    let has = |n: &str| defs.iter().any(|(d, _)| d == n);
    let entry = match entry {
        Some(e) => {
            if !has(e) {
                let names: Vec<&str> = defs.iter().map(|(d, _)| d.as_str()).collect();
                return Err(EngineError(format!(
                    "no function @{e} in the module (functions: {})",
                    names.join(", ")
                )));
            }
            e.to_string()
        }
        None if has("main") => return Ok(text.to_string()),
        None => {
            let public: Vec<&String> = defs.iter().filter(|(_, p)| !p).map(|(d, _)| d).collect();
            match (public.as_slice(), defs.as_slice()) {
                ([only], _) => (*only).clone(),
                (_, [(only, _)]) => only.clone(),
                _ => {
                    // No definition found at all: let the compiler report the text.
                    if defs.is_empty() {
                        return Ok(text.to_string());
                    }
                    let names: Vec<&str> = defs.iter().map(|(d, _)| d.as_str()).collect();
                    return Err(EngineError(format!(
                        "cannot tell the entry function among {}; name it",
                        names.join(", ")
                    )));
                }
            }
        }
    };
    if entry == "main" {
        return Ok(text.to_string());
    }
    if has("main") {
        return Err(EngineError(format!(
            "cannot rename @{entry} to @main: the module already defines another @main"
        )));
    }
    let pattern = format!("@{entry}");
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(i) = rest.find(&pattern) {
        let after = &rest[i + pattern.len()..];
        let whole = !after.starts_with(is_symbol_char);
        out.push_str(&rest[..i]);
        out.push_str(if whole { "@main" } else { &pattern });
        rest = after;
    }
    out.push_str(rest);
    Ok(out)
}

/// A loaded PJRT plugin (loaded once per process per path; never unloaded).
#[derive(Clone)]
pub struct PjrtPlugin {
    api: Arc<raw::Api>,
    fit: VersionFit,
}

impl PjrtPlugin {
    /// Load the plugin at `path`: dlopen, `GetPjrtApi`, the version check,
    /// `PJRT_Plugin_Initialize`.
    pub fn load(path: impl AsRef<Path>) -> Result<PjrtPlugin, EngineError> {
        let path = path.as_ref();
        let api = raw::load_api(path, |major, minor| {
            check_api_version(major, minor)
                .map(|_| ())
                .map_err(|e| EngineError(format!("{}: {e}", path.display())))
        })?;
        let fit = check_api_version(api.major, api.minor)?;
        Ok(PjrtPlugin { api, fit })
    }

    /// Load from `explicit`, else `$CERTGRAD_PJRT_PLUGIN` (see [`resolve_plugin_path`]).
    pub fn locate(explicit: Option<&Path>) -> Result<PjrtPlugin, EngineError> {
        PjrtPlugin::load(resolve_plugin_path(explicit)?)
    }

    /// The plugin's PJRT C API version (major, minor).
    pub fn api_version(&self) -> (i32, i32) {
        (self.api.major, self.api.minor)
    }

    pub fn version_fit(&self) -> VersionFit {
        self.fit
    }

    pub fn path(&self) -> &Path {
        &self.api.path
    }

    /// A new client with default options.
    pub fn client(&self) -> Result<Client, EngineError> {
        Ok(Client {
            raw: Arc::new(raw::RawClient::create(self.api.clone())?),
        })
    }
}

/// A PJRT client: compiles programs and owns the devices.
pub struct Client {
    raw: Arc<raw::RawClient>,
}

impl Client {
    /// e.g. `cpu`, `cuda`.
    pub fn platform_name(&self) -> Result<String, EngineError> {
        self.raw.platform_name()
    }

    pub fn platform_version(&self) -> Result<String, EngineError> {
        self.raw.platform_version()
    }

    /// The addressable devices, in the client's order.
    pub fn devices(&self) -> Result<Vec<DeviceInfo>, EngineError> {
        self.raw.devices()
    }

    /// Compile StableHLO/MLIR text for `num_replicas` devices. The entry is
    /// `main`, else the only public function, else the only function; it is
    /// renamed `@main` in the compiled copy only.
    pub fn compile(&self, mlir_text: &str, num_replicas: usize) -> Result<Executable, EngineError> {
        self.compile_entry(mlir_text, None, num_replicas)
    }

    /// [`Client::compile`] with the entry function named.
    pub fn compile_entry(
        &self,
        mlir_text: &str,
        entry: Option<&str>,
        num_replicas: usize,
    ) -> Result<Executable, EngineError> {
        if num_replicas == 0 {
            return Err(EngineError("num_replicas must be at least 1".into()));
        }
        let available = self.raw.devices()?.len();
        if num_replicas > available {
            return Err(EngineError(format!(
                "{num_replicas} replicas requested, the {} plugin has {available} device(s)",
                self.platform_name().unwrap_or_default()
            )));
        }
        let text = with_main_entry(mlir_text, entry)?;
        let raw = self.raw.compile(
            text.as_bytes(),
            "mlir",
            &compile_options_proto(num_replicas),
        )?;
        if raw.num_devices() != num_replicas {
            return Err(EngineError(format!(
                "compiled for {num_replicas} replicas but PJRT placed it on {} device(s)",
                raw.num_devices()
            )));
        }
        // XLA's CPU plugin runs a program on any arguments of the right byte
        // size (a [3,2] buffer for a [2,3] parameter included), so arguments are
        // checked here against the entry's declared types whenever certgrad's
        // reader understands the text.
        let params = ir::parse::parse_module(&text, "program")
            .ok()
            .and_then(|m| m.func("main").map(|f| f.param_types()));
        Ok(Executable {
            raw,
            num_replicas,
            params,
        })
    }
}

/// A compiled program on its devices.
pub struct Executable {
    raw: raw::RawExecutable,
    num_replicas: usize,
    /// The entry's parameter types, when certgrad's reader parsed the text.
    params: Option<Vec<ir::TensorType>>,
}

impl Executable {
    pub fn num_replicas(&self) -> usize {
        self.num_replicas
    }

    /// Outputs per replica.
    pub fn num_outputs(&self) -> usize {
        self.raw.num_outputs()
    }

    /// The devices the replicas run on, in replica order.
    pub fn devices(&self) -> Result<Vec<DeviceInfo>, EngineError> {
        self.raw.device_infos()
    }

    /// Run every replica: `args[r]` is replica r's argument list; returns each
    /// replica's outputs. Host data is copied in and out; nothing persists on
    /// the devices between calls.
    pub fn execute(&self, args: &[Vec<HostTensor>]) -> Result<Vec<Vec<HostTensor>>, EngineError> {
        if let Some(params) = &self.params {
            for (r, list) in args.iter().enumerate() {
                check_arguments(params, list)
                    .map_err(|e| EngineError(format!("replica {r}: {e}")))?;
            }
        }
        self.raw.execute(args)
    }

    /// The entry's parameter types, if certgrad's reader parsed the program.
    pub fn parameter_types(&self) -> Option<&[ir::TensorType]> {
        self.params.as_deref()
    }
}

/// Whether host tensors fit declared parameter types: count, shape, and an
/// element type that the host data carries without conversion.
pub fn check_arguments(params: &[ir::TensorType], args: &[HostTensor]) -> Result<(), EngineError> {
    use ir::ElemType;
    if params.len() != args.len() {
        return Err(EngineError(format!(
            "the program takes {} arguments, got {}",
            params.len(),
            args.len()
        )));
    }
    for (i, (p, a)) in params.iter().zip(args).enumerate() {
        a.validate()
            .map_err(|e| EngineError(format!("argument {i}: {e}")))?;
        let fits = matches!(
            (&a.data, p.elem),
            (HostData::F32(_), ElemType::F32)
                | (HostData::I32(_), ElemType::I32 | ElemType::UI32)
                | (HostData::I64(_), ElemType::I64 | ElemType::UI64)
        );
        if a.shape != p.shape || !fits {
            return Err(EngineError(format!(
                "argument {i} expects {p}, got {:?} data of shape {:?}",
                a.data.elem(),
                a.shape
            )));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn version_policy_names_both_versions() {
        assert_eq!(check_api_version(0, 106), Ok(VersionFit::Exact));
        assert_eq!(check_api_version(0, 112), Ok(VersionFit::NewerMinor));
        let older = check_api_version(0, 54).unwrap_err().0;
        assert!(older.contains("0.54") && older.contains("0.106"), "{older}");
        let major = check_api_version(1, 3).unwrap_err().0;
        assert!(major.contains("1.3") && major.contains("0.106"), "{major}");
    }

    #[test]
    fn compile_options_bytes() {
        // Hand-decoded: field 3 (len 15) { 1: -1 as a 10-byte varint, 4: 2, 5: 1 }.
        let mut want = vec![0x1a, 15, 0x08];
        want.extend_from_slice(&[0xff; 9]);
        want.extend_from_slice(&[0x01, 0x20, 0x02, 0x28, 0x01]);
        assert_eq!(compile_options_proto(2), want);
        // 300 needs two varint bytes: 0xac 0x02.
        let p = compile_options_proto(300);
        assert_eq!(&p[13..16], &[0x20, 0xac, 0x02]);
        assert_eq!(p[1] as usize, p.len() - 2);
    }

    #[test]
    fn entry_rename_touches_only_the_entry_symbol() {
        let text = "module @m {\n  func.func private @step_helper(%a: tensor<f32>) -> tensor<f32> {\n    return %a : tensor<f32>\n  }\n  func.func @step(%a: tensor<f32>) -> tensor<f32> {\n    %0 = func.call @step_helper(%a) : (tensor<f32>) -> tensor<f32>\n    return %0 : tensor<f32>\n  }\n}\n";
        let out = with_main_entry(text, None).unwrap();
        assert!(out.contains("func.func @main(%a"), "{out}");
        assert!(out.contains("func.func private @step_helper("), "{out}");
        assert!(out.contains("func.call @step_helper(%a)"), "{out}");
        assert!(!out.contains("@step("), "{out}");
        // A module with @main is left alone; an explicit entry is honoured.
        assert_eq!(with_main_entry(&out, None).unwrap(), out);
        let clash = with_main_entry(&out, Some("step_helper")).unwrap_err().0;
        assert!(clash.contains("another @main"), "{clash}");
        let missing = with_main_entry(text, Some("nope")).unwrap_err().0;
        assert!(
            missing.contains("@nope") && missing.contains("step_helper"),
            "{missing}"
        );
    }

    #[test]
    fn entry_rename_refuses_an_ambiguous_module() {
        let text = "func.func @a() -> () {\n return\n}\nfunc.func @b() -> () {\n return\n}\n";
        let err = with_main_entry(text, None).unwrap_err().0;
        assert!(err.contains("a, b"), "{err}");
        let ok = with_main_entry(text, Some("b")).unwrap();
        assert!(
            ok.contains("func.func @a()") && ok.contains("func.func @main()"),
            "{ok}"
        );
    }

    #[test]
    fn arguments_are_checked_against_the_signature() {
        let params = vec![
            ir::TensorType::f32(vec![2, 3]),
            ir::TensorType {
                shape: vec![],
                elem: ir::ElemType::I64,
            },
        ];
        let good = vec![
            HostTensor::f32(vec![2, 3], vec![0.0; 6]),
            HostTensor::i64(vec![], vec![4]),
        ];
        assert!(check_arguments(&params, &good).is_ok());
        let err = check_arguments(&params, &good[..1]).unwrap_err().0;
        assert!(err.contains("takes 2 arguments, got 1"), "{err}");
        let mut t = good.clone();
        t[0] = HostTensor::f32(vec![3, 2], vec![0.0; 6]);
        let err = check_arguments(&params, &t).unwrap_err().0;
        assert!(err.contains("argument 0 expects tensor<2x3xf32>"), "{err}");
        let mut t = good.clone();
        t[1] = HostTensor::i32(vec![], vec![4]);
        let err = check_arguments(&params, &t).unwrap_err().0;
        assert!(err.contains("argument 1 expects tensor<i64>"), "{err}");
    }

    #[test]
    fn missing_plugin_says_how_to_get_one() {
        let err = resolve_plugin_path(Some(Path::new("/nonexistent/libpjrt_cpu.so")))
            .unwrap_err()
            .0;
        assert!(err.contains("/nonexistent/libpjrt_cpu.so"), "{err}");
        assert!(err.contains("pip download"), "{err}");
    }
}
