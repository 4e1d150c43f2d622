//! Checkpoints: one safetensors file per run directory holding every tensor
//! the host loop carries (θ, m, v, running BN statistics, keyed by their
//! signature slot names) and, as string metadata, the counters, the RNG
//! state, the epoch's partial sums and the run config. Writes are atomic
//! (temp file, fsync, rename, fsync of the directory), so a crash leaves
//! either the old or the new checkpoint; a file that does not load is
//! reported and never overwritten.
//!
//! Every checkpoint carries a CRC-32 (`checksum` metadata) over the format
//! marker, every other metadata entry and every tensor's name, shape and
//! bytes, in name order; a load recomputes it and refuses a mismatch (one
//! flipped exponent bit would otherwise resume silently). A checkpoint with
//! no checksum (written before certgrad checked checkpoints, or one whose
//! checksum entry was destroyed) is refused unless the process allows it
//! ([`set_allow_unverified`], the CLI's `--allow-unverified-checkpoint`);
//! then it loads with a warning.

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
/// The metadata key of the checksum, and its value's prefix.
pub const CHECKSUM_KEY: &str = "checksum";
const CHECKSUM_PREFIX: &str = "crc32:";

/// Whether a checkpoint without a checksum may load (process-wide).
static ALLOW_UNVERIFIED: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// Lets checkpoints without a checksum load (with a warning) for the rest of
/// the process; by default they are refused.
pub fn set_allow_unverified(allow: bool) {
    ALLOW_UNVERIFIED.store(allow, std::sync::atomic::Ordering::Relaxed);
}

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

/// CRC-32 (IEEE 802.3, reflected, polynomial 0xEDB88320) — the zlib/PNG
/// one: small enough to write here, and detects every burst of up to 32
/// flipped bits, which a one-bit exponent flip is.
pub fn crc32(bytes: &[u8]) -> u32 {
    crc32_update(0, bytes)
}

/// Continues a CRC-32 over more bytes (`crc32_update(crc32(a), b)` =
/// `crc32(a ++ b)`).
pub fn crc32_update(crc: u32, bytes: &[u8]) -> u32 {
    const TABLE: [u32; 256] = {
        let mut t = [0u32; 256];
        let mut i = 0;
        while i < 256 {
            let mut c = i as u32;
            let mut k = 0;
            while k < 8 {
                c = if c & 1 != 0 {
                    0xEDB8_8320 ^ (c >> 1)
                } else {
                    c >> 1
                };
                k += 1;
            }
            t[i] = c;
            i += 1;
        }
        t
    };
    let mut c = !crc;
    for &b in bytes {
        c = TABLE[((c ^ u32::from(b)) & 0xFF) as usize] ^ (c >> 8);
    }
    !c
}

/// The checksum of a checkpoint's contents: each metadata entry but the
/// checksum itself, then each tensor (name, shape, little-endian f32 bytes),
/// all in name order, every field length-prefixed so no two contents share
/// a byte stream.
fn content_checksum(
    tensors: &BTreeMap<String, (Vec<usize>, Vec<f32>)>,
    meta: &BTreeMap<String, String>,
) -> u32 {
    fn field(c: u32, b: &[u8]) -> u32 {
        crc32_update(crc32_update(c, &(b.len() as u64).to_le_bytes()), b)
    }
    let mut c = 0;
    for (k, v) in meta.iter().filter(|(k, _)| k.as_str() != CHECKSUM_KEY) {
        c = field(field(c, k.as_bytes()), v.as_bytes());
    }
    for (name, (shape, data)) in tensors {
        c = field(c, name.as_bytes());
        let dims: Vec<u8> = shape
            .iter()
            .flat_map(|&d| (d as u64).to_le_bytes())
            .collect();
        c = field(c, &dims);
        c = crc32_update(c, &((data.len() * 4) as u64).to_le_bytes());
        for chunk in data.chunks(4096) {
            c = crc32_update(c, &f32_bytes(chunk));
        }
    }
    c
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
        let mut sealed = self.meta.clone();
        sealed.insert("format".into(), FORMAT.into());
        let sum = content_checksum(&self.tensors, &sealed);
        sealed.insert(CHECKSUM_KEY.into(), format!("{CHECKSUM_PREFIX}{sum:08x}"));
        let meta: HashMap<String, String> = sealed.into_iter().collect();
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
        let mut meta = meta;
        match meta.remove(CHECKSUM_KEY) {
            Some(stored) => {
                let want = stored
                    .strip_prefix(CHECKSUM_PREFIX)
                    .and_then(|h| u32::from_str_radix(h, 16).ok())
                    .ok_or_else(|| bad(format!("unreadable checksum {stored:?}")))?;
                let got = content_checksum(&tensors, &meta);
                if got != want {
                    return Err(TrainError::Checkpoint(format!(
                        "{what}: corrupt checkpoint: its contents' CRC-32 is {got:08x}, \
                         the file says {want:08x} (a tensor or the metadata changed after \
                         it was written); it is not used — restore a copy or start afresh"
                    )));
                }
            }
            None if ALLOW_UNVERIFIED.load(std::sync::atomic::Ordering::Relaxed) => eprintln!(
                "warning: {what} has no checksum (written before certgrad checked \
                 checkpoints, or its checksum entry was lost); loading it unverified as asked"
            ),
            None => {
                return Err(TrainError::Checkpoint(format!(
                    "{what}: the checkpoint has no `{CHECKSUM_KEY}` metadata (written before \
                     certgrad checked checkpoints, or damaged), so its contents cannot be \
                     verified; pass --allow-unverified-checkpoint to load it anyway"
                )))
            }
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
