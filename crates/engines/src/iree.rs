//! The IREE engine: `iree-compile` turns the printed StableHLO into a `.vmfb`
//! (cached under `~/.cache/certgrad/iree/` by the SHA-256 of the compiler
//! version, the flags and the text, written by atomic rename), and each run is
//! one `iree-run-module` process fed .npy files and writing one .npy per
//! result. The tools come from `--iree-dir`, the PATH, or certgrad's venv
//! (`~/.cache/certgrad/venv/bin`, where scripts/*.sh install the PyPI wheels).
//! Single replica only: IREE's tools run one device here.

use crate::engine::{Engine, FuncSignature, Prepared};
use crate::error::EngineError;
use crate::host::HostTensor;
use crate::npy;
use ir::Module;
use sha2::{Digest, Sha256};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

/// The preprocessing flag that rewrites convolutions as im2col + matmul
/// before global optimisation (TOOLING.md measured ~2.8× on conv-heavy steps).
pub const IM2COL_FLAG: &str =
    "--iree-preprocessing-pass-pipeline=builtin.module(util.func(iree-global-opt-convert-conv2d-to-img2col))";

/// The flags every compile gets: StableHLO input, the CPU backend tuned for
/// this host, and the im2col rewrite ([`IM2COL_FLAG`]; dropped for modules
/// with grouped convolutions, see [`IreeEngine::flags_for`]).
pub fn default_flags() -> Vec<String> {
    [
        "--iree-input-type=stablehlo",
        "--iree-hal-target-backends=llvm-cpu",
        "--iree-llvmcpu-target-cpu=host",
        IM2COL_FLAG,
    ]
    .map(String::from)
    .to_vec()
}

/// Whether the printed module has a grouped convolution (a
/// `feature_group_count` or `batch_group_count` above 1: depthwise convs and
/// their weight VJPs).
pub fn has_grouped_convolution(text: &str) -> bool {
    ["feature_group_count = ", "batch_group_count = "]
        .iter()
        .any(|key| {
            text.match_indices(key).any(|(i, _)| {
                let digits: String = text[i + key.len()..]
                    .chars()
                    .take_while(char::is_ascii_digit)
                    .collect();
                digits.parse::<u64>().is_ok_and(|g| g > 1)
            })
        })
}

/// The runtime device `iree-run-module` uses (multi-threaded CPU).
pub const DEVICE: &str = "local-task";

/// The IREE tools, where they were found, and the compiler's version line.
#[derive(Clone, Debug)]
pub struct IreeTools {
    pub compile: PathBuf,
    pub run: PathBuf,
    pub version: String,
}

fn venv_bin() -> Option<PathBuf> {
    if let Some(v) = std::env::var_os("CERTGRAD_VENV").filter(|v| !v.is_empty()) {
        return Some(PathBuf::from(v).join("bin"));
    }
    std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache/certgrad/venv/bin"))
}

impl IreeTools {
    /// Finds `iree-compile` and `iree-run-module`: in `dir` when given (and
    /// only there), else on the PATH, else in certgrad's venv.
    pub fn locate(dir: Option<&Path>) -> Result<IreeTools, EngineError> {
        let both = |d: &Path| {
            let (c, r) = (d.join("iree-compile"), d.join("iree-run-module"));
            (c.is_file() && r.is_file()).then_some((c, r))
        };
        let (compile, run) = match dir {
            Some(d) => both(d).ok_or_else(|| {
                EngineError(format!(
                    "--iree-dir {}: no iree-compile and iree-run-module there",
                    d.display()
                ))
            })?,
            None => {
                let path = std::env::var_os("PATH").unwrap_or_default();
                let mut dirs: Vec<PathBuf> = std::env::split_paths(&path).collect();
                dirs.extend(venv_bin());
                dirs.iter().find_map(|d| both(d)).ok_or_else(|| {
                    EngineError(format!(
                        "--engine iree: iree-compile and iree-run-module are neither on the PATH nor in {}; \
                         install them with `pip install iree-base-compiler iree-base-runtime` (3.13) \
                         or pass --iree-dir DIR",
                        venv_bin().map(|p| p.display().to_string()).unwrap_or_default()
                    ))
                })?
            }
        };
        let out = Command::new(&compile)
            .arg("--version")
            .output()
            .map_err(|e| EngineError(format!("running {} --version: {e}", compile.display())))?;
        let version = String::from_utf8_lossy(&out.stdout).trim().to_string();
        if !out.status.success() || version.is_empty() {
            return Err(EngineError(format!(
                "{} --version failed: {}",
                compile.display(),
                String::from_utf8_lossy(&out.stderr).trim()
            )));
        }
        Ok(IreeTools {
            compile,
            run,
            version,
        })
    }
}

/// The default cache directory: `$CERTGRAD_IREE_CACHE`, else
/// `~/.cache/certgrad/iree`.
pub fn default_cache_dir() -> PathBuf {
    if let Some(d) = std::env::var_os("CERTGRAD_IREE_CACHE").filter(|v| !v.is_empty()) {
        return PathBuf::from(d);
    }
    std::env::var_os("HOME")
        .map(|h| PathBuf::from(h).join(".cache/certgrad/iree"))
        .unwrap_or_else(|| std::env::temp_dir().join("certgrad-iree-cache"))
}

/// The IREE engine: its tools, flags and cache.
pub struct IreeEngine {
    pub tools: IreeTools,
    pub flags: Vec<String>,
    pub cache_dir: PathBuf,
}

/// A compiled module: where its `.vmfb` is, whether the cache already held
/// it, and how long getting it took.
#[derive(Clone, Debug)]
pub struct Compiled {
    pub vmfb: PathBuf,
    pub cache_hit: bool,
    pub seconds: f64,
}

static UNIQUE: AtomicU64 = AtomicU64::new(0);

fn unique_suffix() -> String {
    format!(
        "{}-{}",
        std::process::id(),
        UNIQUE.fetch_add(1, Ordering::Relaxed)
    )
}

impl IreeEngine {
    pub fn locate(dir: Option<&Path>) -> Result<IreeEngine, EngineError> {
        Ok(IreeEngine {
            tools: IreeTools::locate(dir)?,
            flags: default_flags(),
            cache_dir: default_cache_dir(),
        })
    }

    /// The flags `text` is compiled with: `self.flags`, less the im2col
    /// rewrite when the module has a grouped convolution. IREE 3.13's im2col
    /// pass miscompiles depthwise convolutions: on the mobilenetv2 step
    /// (`feature_group_count = 32`, batch 2) it builds a `linalg.batch_matvec`
    /// of batch 64 against a 32-row filter and `iree-compile` fails
    /// verification; without the rewrite the same text compiles.
    pub fn flags_for(&self, text: &str) -> Vec<String> {
        let grouped = has_grouped_convolution(text);
        self.flags
            .iter()
            .filter(|f| !(grouped && f.as_str() == IM2COL_FLAG))
            .cloned()
            .collect()
    }

    /// The cache key of `text` under this compiler and the flags it is
    /// compiled with.
    pub fn cache_key(&self, text: &str) -> String {
        let flags = self.flags_for(text);
        let mut h = Sha256::new();
        for part in [
            b"certgrad iree cache v1".as_slice(),
            self.tools.version.as_bytes(),
        ]
        .into_iter()
        .chain(flags.iter().map(|f| f.as_bytes()))
        {
            h.update((part.len() as u64).to_le_bytes());
            h.update(part);
        }
        h.update(text.as_bytes());
        h.finalize().iter().map(|b| format!("{b:02x}")).collect()
    }

    /// The `.vmfb` of `text`: from the cache, or compiled into it (written to
    /// a unique temporary name, then renamed, so a concurrent or killed compile
    /// never leaves a torn file under the key).
    pub fn compile(&self, text: &str) -> Result<Compiled, EngineError> {
        let t0 = Instant::now();
        let io = |p: &Path, e: std::io::Error| EngineError(format!("{}: {e}", p.display()));
        std::fs::create_dir_all(&self.cache_dir).map_err(|e| io(&self.cache_dir, e))?;
        let vmfb = self
            .cache_dir
            .join(format!("{}.vmfb", self.cache_key(text)));
        if vmfb.is_file() {
            return Ok(Compiled {
                vmfb,
                cache_hit: true,
                seconds: t0.elapsed().as_secs_f64(),
            });
        }
        let suffix = unique_suffix();
        let src = self.cache_dir.join(format!("src-{suffix}.mlir"));
        let tmp = self.cache_dir.join(format!("vmfb-{suffix}.tmp"));
        std::fs::write(&src, text).map_err(|e| io(&src, e))?;
        let out = Command::new(&self.tools.compile)
            .args(self.flags_for(text))
            .arg(&src)
            .arg("-o")
            .arg(&tmp)
            .output();
        let _ = std::fs::remove_file(&src);
        let out =
            out.map_err(|e| EngineError(format!("running {}: {e}", self.tools.compile.display())))?;
        if !out.status.success() {
            let _ = std::fs::remove_file(&tmp);
            return Err(EngineError(format!(
                "iree-compile rejected the module:\n{}",
                tail(&String::from_utf8_lossy(&out.stderr), 20)
            )));
        }
        std::fs::rename(&tmp, &vmfb).map_err(|e| io(&vmfb, e))?;
        Ok(Compiled {
            vmfb,
            cache_hit: false,
            seconds: t0.elapsed().as_secs_f64(),
        })
    }

    /// [`Engine::prepare`] with the concrete result (cache hit, compile time).
    pub fn prepare_iree(
        &self,
        module_text: &str,
        module: &Module,
        func: &str,
        replicas: usize,
    ) -> Result<IreePrepared, EngineError> {
        if replicas != 1 {
            return Err(EngineError(format!(
                "--engine iree runs one replica; data-parallel ({replicas} replicas) needs the native or PJRT engine"
            )));
        }
        let sig = FuncSignature::of(module, func)?;
        let compiled = self.compile(module_text)?;
        Ok(IreePrepared {
            sig,
            run_tool: self.tools.run.clone(),
            compiled,
        })
    }
}

impl Engine for IreeEngine {
    fn name(&self) -> &str {
        "iree"
    }

    fn prepare(
        &mut self,
        module_text: &str,
        module: &Module,
        func: &str,
        replicas: usize,
    ) -> Result<Box<dyn Prepared>, EngineError> {
        Ok(Box::new(self.prepare_iree(
            module_text,
            module,
            func,
            replicas,
        )?))
    }
}

/// A compiled function, run by one `iree-run-module` process per call.
pub struct IreePrepared {
    pub sig: FuncSignature,
    pub compiled: Compiled,
    run_tool: PathBuf,
}

/// A scratch directory removed when dropped (also on an early error return).
struct Scratch(PathBuf);

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn tail(s: &str, lines: usize) -> String {
    let all: Vec<&str> = s.trim_end().lines().collect();
    all[all.len().saturating_sub(lines)..].join("\n")
}

impl Prepared for IreePrepared {
    fn replicas(&self) -> usize {
        1
    }

    fn describe(&self) -> String {
        format!(
            "iree ({}, {}, {})",
            DEVICE,
            self.compiled.vmfb.display(),
            if self.compiled.cache_hit {
                "cached".to_string()
            } else {
                format!("compiled in {:.1} s", self.compiled.seconds)
            }
        )
    }

    fn run(&mut self, args: &[Vec<HostTensor>]) -> Result<Vec<Vec<HostTensor>>, EngineError> {
        self.sig.check_args(args, 1)?;
        let dir = Scratch(std::env::temp_dir().join(format!("certgrad-iree-{}", unique_suffix())));
        std::fs::create_dir_all(&dir.0)
            .map_err(|e| EngineError(format!("{}: {e}", dir.0.display())))?;
        let mut cmd = Command::new(&self.run_tool);
        cmd.arg(format!("--device={DEVICE}"))
            .arg(format!("--module={}", self.compiled.vmfb.display()))
            .arg(format!("--function={}", self.sig.func));
        for (i, t) in args[0].iter().enumerate() {
            let p = dir.0.join(format!("in_{i}.npy"));
            npy::write(&p, t)?;
            cmd.arg(format!("--input=@{}", p.display()));
        }
        let outs: Vec<PathBuf> = (0..self.sig.results.len())
            .map(|k| dir.0.join(format!("out_{k}.npy")))
            .collect();
        for p in &outs {
            cmd.arg(format!("--output=@{}", p.display()));
        }
        let out = cmd
            .output()
            .map_err(|e| EngineError(format!("running {}: {e}", self.run_tool.display())))?;
        if !out.status.success() {
            return Err(EngineError(format!(
                "iree-run-module failed on @{}:\n{}",
                self.sig.func,
                tail(&String::from_utf8_lossy(&out.stderr), 20)
            )));
        }
        let results = outs
            .iter()
            .map(|p| npy::read(p))
            .collect::<Result<Vec<_>, _>>()?;
        self.sig.check_results(&results, "iree")?;
        Ok(vec![results])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The `.vmfb` cache key of a fixed compiler, flag set and text, pinned:
    /// a key that changed would silently orphan every cached compile.
    const PINNED: &str = "ac8896a2b1273120debc52cc46e057d154d6a566daefb030e8ec65876a6025fd";

    #[test]
    fn the_cache_key_of_a_fixed_input_is_pinned() {
        let engine = IreeEngine {
            tools: IreeTools {
                compile: PathBuf::from("/opt/iree/bin/iree-compile"),
                run: PathBuf::from("/opt/iree/bin/iree-run-module"),
                version: "IREE (https://iree.dev):\n  IREE compiler version 3.1.0rc20250107 @ d2242207764230ad398585a5771f9d54ce91b4c8\n  LLVM version 20.0.0git\n  Optimized build".into(),
            },
            flags: default_flags(),
            cache_dir: std::env::temp_dir(),
        };
        let text = "func.func public @f(%a: tensor<3xf32>) -> tensor<3xf32> {\n  return %a : tensor<3xf32>\n}\n";
        assert_eq!(engine.cache_key(text), PINNED);
        let mut other = engine.flags.clone();
        other.pop();
        let fewer = IreeEngine {
            flags: other,
            ..engine
        };
        assert_ne!(
            fewer.cache_key(text),
            PINNED,
            "the flags are part of the key"
        );
    }

    fn engine() -> IreeEngine {
        IreeEngine {
            tools: IreeTools {
                compile: PathBuf::from("iree-compile"),
                run: PathBuf::from("iree-run-module"),
                version: "test".into(),
            },
            flags: default_flags(),
            cache_dir: std::env::temp_dir(),
        }
    }

    fn conv(feature_groups: u32, batch_groups: u32) -> String {
        format!(
            "%1 = stablehlo.convolution(%0, %w) dim_numbers = [b, f, 0, 1]x[o, i, 0, 1]->[b, f, 0, 1], \
             window = {{stride = [1, 1]}} {{batch_group_count = {batch_groups} : i64, \
             feature_group_count = {feature_groups} : i64}} : (tensor<2x32x8x8xf32>, tensor<32x1x3x3xf32>) -> tensor<2x32x8x8xf32>"
        )
    }

    #[test]
    fn grouped_convolutions_compile_without_the_im2col_rewrite() {
        let e = engine();
        let plain = conv(1, 1);
        assert!(!has_grouped_convolution(&plain));
        assert_eq!(e.flags_for(&plain), default_flags());
        // Depthwise forward (feature groups) and its weight VJP (batch
        // groups); a group count of 10 or 12 is grouped too (not "1…").
        for text in [conv(32, 1), conv(1, 32), conv(10, 1), conv(1, 12)] {
            assert!(has_grouped_convolution(&text), "{text}");
            let flags = e.flags_for(&text);
            assert!(!flags.iter().any(|f| f == IM2COL_FLAG), "{flags:?}");
            assert_eq!(flags.len(), default_flags().len() - 1);
        }
        // The key follows the flags actually used: an engine configured
        // without the rewrite shares the grouped text's key and not the
        // plain text's.
        let without = IreeEngine {
            flags: e.flags_for(&conv(32, 1)),
            ..engine()
        };
        assert_eq!(without.cache_key(&conv(32, 1)), e.cache_key(&conv(32, 1)));
        assert_ne!(without.cache_key(&plain), e.cache_key(&plain));
    }
}
