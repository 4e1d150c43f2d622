//! Checkpoints: one safetensors file per run directory holding every tensor
//! the host loop carries (θ, m, v, running BN statistics, keyed by their
//! signature slot names) and, as string metadata, the counters, the RNG
//! state, the epoch's partial sums and the run config. Writes are atomic
//! (temp file, fsync, rename, fsync of the directory), so a crash leaves
//! either the old or the new checkpoint; a file that does not load is
//! reported and never overwritten.

use crate::error::TrainError;
use safetensors::tensor::{Dtype, SafeTensors, TensorView};
use std::collections::{BTreeMap, HashMap};
use std::fs::{self, File};
use std::io::Write;
use std::path::{Path, PathBuf};

/// The file name of the latest checkpoint inside a run directory.
pub const CHECKPOINT_FILE: &str = "checkpoint.safetensors";
/// The format marker in the metadata.
pub const FORMAT: &str = "certgrad-train-checkpoint-1";

/// The contents of a checkpoint: named f32 tensors and string metadata.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Checkpoint {
    /// name → (shape, data).
    pub tensors: BTreeMap<String, (Vec<usize>, Vec<f32>)>,
    pub meta: BTreeMap<String, String>,
}

pub fn checkpoint_path(run_dir: &Path) -> PathBuf {
    run_dir.join(CHECKPOINT_FILE)
}

fn f32_bytes(v: &[f32]) -> Vec<u8> {
    v.iter().flat_map(|x| x.to_le_bytes()).collect()
}

impl Checkpoint {
    /// The safetensors bytes of this checkpoint.
    pub fn to_bytes(&self) -> Result<Vec<u8>, TrainError> {
        let bytes: Vec<(String, Vec<usize>, Vec<u8>)> = self
            .tensors
            .iter()
            .map(|(k, (s, d))| (k.clone(), s.clone(), f32_bytes(d)))
            .collect();
        let views = bytes
            .iter()
            .map(|(k, s, b)| {
                TensorView::new(Dtype::F32, s.clone(), b)
                    .map(|v| (k.clone(), v))
                    .map_err(|e| TrainError::Checkpoint(format!("tensor {k}: {e:?}")))
            })
            .collect::<Result<Vec<_>, _>>()?;
        let mut meta: HashMap<String, String> = self.meta.clone().into_iter().collect();
        meta.insert("format".into(), FORMAT.into());
        safetensors::serialize(views, &Some(meta))
            .map_err(|e| TrainError::Checkpoint(format!("serializing the checkpoint: {e:?}")))
    }

    /// Parses safetensors bytes; `what` names the file in errors.
    pub fn from_bytes(buf: &[u8], what: &str) -> Result<Checkpoint, TrainError> {
        let bad = |m: String| {
            TrainError::Checkpoint(format!(
                "{what}: not a usable checkpoint (truncated or corrupt?): {m}"
            ))
        };
        let (_, md) = SafeTensors::read_metadata(buf).map_err(|e| bad(format!("{e:?}")))?;
        let st = SafeTensors::deserialize(buf).map_err(|e| bad(format!("{e:?}")))?;
        let meta: BTreeMap<String, String> = md
            .metadata()
            .clone()
            .unwrap_or_default()
            .into_iter()
            .collect();
        if meta.get("format").map(String::as_str) != Some(FORMAT) {
            return Err(bad(format!("no `format: {FORMAT}` metadata")));
        }
        let mut tensors = BTreeMap::new();
        for name in st.names() {
            let t = st.tensor(name).map_err(|e| bad(format!("{e:?}")))?;
            if t.dtype() != Dtype::F32 {
                return Err(bad(format!(
                    "tensor {name} is {:?}, expected F32",
                    t.dtype()
                )));
            }
            let data: Vec<f32> = t
                .data()
                .chunks_exact(4)
                .map(|c| f32::from_le_bytes(c.try_into().unwrap()))
                .collect();
            tensors.insert(name.clone(), (t.shape().to_vec(), data));
        }
        Ok(Checkpoint { tensors, meta })
    }

    /// Writes atomically: `.<name>.tmp` in the same directory, fsync, rename
    /// over `path`, fsync of the directory (so the rename itself is durable).
    pub fn write_atomic(&self, path: &Path) -> Result<(), TrainError> {
        let io = |e: std::io::Error, what: &Path| {
            TrainError::Checkpoint(format!("writing {}: {e}", what.display()))
        };
        let bytes = self.to_bytes()?;
        let dir = path.parent().unwrap_or(Path::new("."));
        let name = path
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_else(|| CHECKPOINT_FILE.into());
        let tmp = dir.join(format!(".{name}.tmp"));
        {
            let mut f = File::create(&tmp).map_err(|e| io(e, &tmp))?;
            f.write_all(&bytes).map_err(|e| io(e, &tmp))?;
            f.sync_all().map_err(|e| io(e, &tmp))?;
        }
        fs::rename(&tmp, path).map_err(|e| io(e, path))?;
        if let Ok(d) = File::open(dir) {
            // Directory fsync is best effort: not every filesystem supports it.
            let _ = d.sync_all();
        }
        Ok(())
    }

    /// Reads and parses `path`.
    pub fn read(path: &Path) -> Result<Checkpoint, TrainError> {
        let buf = fs::read(path)
            .map_err(|e| TrainError::Checkpoint(format!("reading {}: {e}", path.display())))?;
        Checkpoint::from_bytes(&buf, &path.display().to_string())
    }

    /// A metadata field, or an error naming it.
    pub fn meta_field(&self, key: &str) -> Result<&str, TrainError> {
        self.meta
            .get(key)
            .map(String::as_str)
            .ok_or_else(|| TrainError::Checkpoint(format!("checkpoint metadata lacks `{key}`")))
    }

    /// A numeric metadata field.
    pub fn meta_u64(&self, key: &str) -> Result<u64, TrainError> {
        self.meta_field(key)?.parse().map_err(|_| {
            TrainError::Checkpoint(format!("checkpoint metadata `{key}` is not a number"))
        })
    }
}
