//! Which engine runs a function: [`EngineKind`] and [`EngineOptions`] from
//! the command line, and the factory that turns them into a ready
//! [`Engine`]. The one module that knows every concrete engine, so that the
//! interface in [`crate::engine`] imports none of them.

use crate::engine::Engine;
use crate::error::EngineError;
use std::fmt;
use std::path::PathBuf;
use std::str::FromStr;

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
    /// The native plan's rewrites (`run --without-rewrite` switches some off).
    pub rewrites: exec::Rewrites,
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
            rewrites: exec::Rewrites::ALL,
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
            rewrites: exec::Rewrites::ALL,
        })
    }

    /// The engine these options name, ready to prepare functions (loads the
    /// PJRT plugin and creates its client; finds the IREE tools).
    pub fn build(&self) -> Result<Box<dyn Engine>, EngineError> {
        match self.kind {
            EngineKind::Native => Ok(Box::new(crate::native::NativeEngine {
                rewrites: self.rewrites,
            })),
            EngineKind::Iree => Ok(Box::new(crate::iree::IreeEngine::locate(
                self.iree_dir.as_deref(),
            )?)),
            EngineKind::Pjrt => Ok(Box::new(crate::pjrt::PjrtEngine::load(
                self.pjrt_plugin.as_deref(),
            )?)),
        }
    }
}

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
            ..EngineOptions::native()
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
}
