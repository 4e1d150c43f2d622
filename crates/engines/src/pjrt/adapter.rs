//! The PJRT binding behind [`Engine`]: one client per engine, one
//! executable per prepared function, compiled from the printed text (the
//! binding renames the entry `@main` in the compiled copy only).

use super::{Client, Executable, PjrtPlugin};
use crate::engine::{Engine, FuncSignature, Prepared};
use crate::error::EngineError;
use crate::host::HostTensor;
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
