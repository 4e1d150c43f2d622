//! Training data: readers for the real on-disk formats (IDX, gzip'd or raw;
//! the CIFAR-10 binary batches), the built-in Fashion-MNIST subset embedded in
//! the binary, zero-padding to the net's spatial size, per-channel
//! normalisation, and the augmentations (random crop with padding, horizontal
//! flip) applied to a batch on the host.

use crate::error::TrainError;
use flate2::read::GzDecoder;
use ir::rng::Rng;
use std::io::Read;
use std::path::{Path, PathBuf};

/// One split of a labelled image set, pixels as f32 in `[N, C, H, W]` order.
#[derive(Clone, Debug, PartialEq)]
pub struct Split {
    pub images: Vec<f32>,
    pub labels: Vec<u8>,
}

impl Split {
    pub fn len(&self) -> usize {
        self.labels.len()
    }
    pub fn is_empty(&self) -> bool {
        self.labels.is_empty()
    }
}

/// A train/test pair with its geometry.
#[derive(Clone, Debug, PartialEq)]
pub struct Dataset {
    /// Where it came from (printed in the summary, stored in checkpoints).
    pub source: String,
    /// Per-example `(C, H, W)`.
    pub shape: (usize, usize, usize),
    pub classes: usize,
    pub train: Split,
    pub test: Split,
    /// Natural photographs (CIFAR): a horizontal flip is a label-preserving
    /// augmentation. Not for Fashion-MNIST-like data, where it is off.
    pub flip_ok: bool,
}

fn err<T>(msg: impl Into<String>) -> Result<T, TrainError> {
    Err(TrainError::Data(msg.into()))
}

/// Where Debian's `dataset-fashion-mnist` installs the full set.
pub const SYSTEM_FASHION_MNIST: &str = "/usr/share/datasets/fashion-mnist";

const BUILTIN_TRAIN_IMAGES: &[u8] =
    include_bytes!("../../../data/fashion-mnist-mini/train-images-idx3-ubyte.gz");
const BUILTIN_TRAIN_LABELS: &[u8] =
    include_bytes!("../../../data/fashion-mnist-mini/train-labels-idx1-ubyte.gz");
const BUILTIN_TEST_IMAGES: &[u8] =
    include_bytes!("../../../data/fashion-mnist-mini/t10k-images-idx3-ubyte.gz");
const BUILTIN_TEST_LABELS: &[u8] =
    include_bytes!("../../../data/fashion-mnist-mini/t10k-labels-idx1-ubyte.gz");

/// A parsed IDX file of unsigned bytes: its dimensions and payload.
#[derive(Clone, Debug, PartialEq)]
pub struct Idx {
    pub dims: Vec<usize>,
    pub data: Vec<u8>,
}

/// Parses an IDX file (`0x00 0x00 0x08 ndim`, big-endian u32 dims, bytes),
/// gunzipping first when the bytes start with the gzip magic.
pub fn parse_idx(bytes: &[u8], what: &str) -> Result<Idx, TrainError> {
    let raw: Vec<u8>;
    let b = if bytes.starts_with(&[0x1f, 0x8b]) {
        let mut out = Vec::new();
        // A gzip stream may inflate a thousandfold: the memory limit bounds it.
        let limit = ir::limits::max_bytes();
        GzDecoder::new(bytes)
            .take(limit.saturating_add(1))
            .read_to_end(&mut out)
            .map_err(|e| TrainError::Data(format!("{what}: bad gzip stream: {e}")))?;
        if out.len() as u64 > limit {
            return err(format!(
                "{what}: the gzip stream inflates past the memory limit of {} \
                 (raise it with --max-memory or {})",
                ir::limits::human_bytes(u128::from(limit)),
                ir::limits::ENV_VAR
            ));
        }
        raw = out;
        &raw[..]
    } else {
        bytes
    };
    if b.len() < 4 || b[0] != 0 || b[1] != 0 {
        return err(format!("{what}: not an IDX file (bad magic)"));
    }
    if b[2] != 0x08 {
        return err(format!(
            "{what}: IDX element type 0x{:02x}, only unsigned bytes (0x08) are images/labels",
            b[2]
        ));
    }
    let ndim = b[3] as usize;
    let head = 4 + 4 * ndim;
    if b.len() < head {
        return err(format!("{what}: truncated IDX header"));
    }
    let dims: Vec<usize> = (0..ndim)
        .map(|i| u32::from_be_bytes(b[4 + 4 * i..8 + 4 * i].try_into().unwrap()) as usize)
        .collect();
    let n = dims.iter().try_fold(1usize, |n, &d| n.checked_mul(d));
    let Some(n) = n else {
        return err(format!("{what}: IDX dims {dims:?} overflow a byte count"));
    };
    if b.len() - head != n {
        return err(format!(
            "{what}: IDX dims {dims:?} need {n} bytes, the file has {}",
            b.len() - head
        ));
    }
    Ok(Idx {
        dims,
        data: b[head..].to_vec(),
    })
}

fn idx_split(
    images: &[u8],
    labels: &[u8],
    what: &str,
) -> Result<(Split, usize, usize), TrainError> {
    let im = parse_idx(images, &format!("{what} images"))?;
    let lb = parse_idx(labels, &format!("{what} labels"))?;
    if im.dims.len() != 3 || lb.dims.len() != 1 || im.dims[0] != lb.dims[0] {
        return err(format!(
            "{what}: images {:?} and labels {:?} do not pair up",
            im.dims, lb.dims
        ));
    }
    // An empty image or split would be padded and "trained on" as zeros.
    if im.dims[1] == 0 || im.dims[2] == 0 {
        return err(format!(
            "{what} images are {}×{}: an image needs at least one row and one column",
            im.dims[1], im.dims[2]
        ));
    }
    if im.dims[0] == 0 {
        return err(format!("{what}: the IDX files hold no examples"));
    }
    Ok((
        Split {
            images: im.data.iter().map(|&p| p as f32).collect(),
            labels: lb.data,
        },
        im.dims[1],
        im.dims[2],
    ))
}

fn classes_of(splits: &[&Split]) -> usize {
    splits
        .iter()
        .flat_map(|s| s.labels.iter())
        .map(|&l| l as usize + 1)
        .max()
        .unwrap_or(0)
}

/// An IDX train/test pair from bytes (`train-*`, `t10k-*`).
pub fn idx_dataset(
    source: &str,
    train: (&[u8], &[u8]),
    test: (&[u8], &[u8]),
) -> Result<Dataset, TrainError> {
    let (tr, h, w) = idx_split(train.0, train.1, &format!("{source} train"))?;
    let (te, h2, w2) = idx_split(test.0, test.1, &format!("{source} test"))?;
    if (h, w) != (h2, w2) {
        return err(format!("{source}: train is {h}×{w}, test is {h2}×{w2}"));
    }
    Ok(Dataset {
        source: source.to_string(),
        shape: (1, h, w),
        classes: classes_of(&[&tr, &te]),
        train: tr,
        test: te,
        flip_ok: false,
    })
}

/// The built-in default: 2,000 train / 1,000 test Fashion-MNIST images (200 /
/// 100 per class), embedded at build time.
pub fn builtin() -> Dataset {
    idx_dataset(
        "builtin (Fashion-MNIST subset)",
        (BUILTIN_TRAIN_IMAGES, BUILTIN_TRAIN_LABELS),
        (BUILTIN_TEST_IMAGES, BUILTIN_TEST_LABELS),
    )
    .expect("the embedded data parses")
}

fn read(path: &Path) -> Result<Vec<u8>, TrainError> {
    std::fs::read(path).map_err(|e| TrainError::Data(format!("{}: {e}", path.display())))
}

/// The first of `names` that exists in `dir`.
fn find(dir: &Path, names: &[&str]) -> Option<PathBuf> {
    names.iter().map(|n| dir.join(n)).find(|p| p.is_file())
}

/// An MNIST-style directory: `train-images-idx3-ubyte[.gz]`,
/// `train-labels-idx1-ubyte[.gz]`, `t10k-…`.
pub fn load_idx_dir(dir: &Path) -> Result<Dataset, TrainError> {
    let get = |stem: &str| -> Result<Vec<u8>, TrainError> {
        let gz = format!("{stem}.gz");
        match find(dir, &[stem, &gz]) {
            Some(p) => read(&p),
            None => err(format!("{}: no {stem}[.gz]", dir.display())),
        }
    };
    let (a, b, c, d) = (
        get("train-images-idx3-ubyte")?,
        get("train-labels-idx1-ubyte")?,
        get("t10k-images-idx3-ubyte")?,
        get("t10k-labels-idx1-ubyte")?,
    );
    idx_dataset(&dir.display().to_string(), (&a, &b), (&c, &d))
}

/// Parses CIFAR-10 binary records (`label byte, 3·32·32 bytes` channel-major).
pub fn parse_cifar10(bytes: &[u8], what: &str) -> Result<Split, TrainError> {
    const REC: usize = 1 + 3 * 32 * 32;
    let records = bytes.len() / REC;
    if records == 0 || records * REC != bytes.len() {
        return err(format!(
            "{what}: {} bytes is not a whole number of CIFAR-10 records ({REC} bytes each)",
            bytes.len()
        ));
    }
    let mut s = Split {
        images: Vec::with_capacity(bytes.len() / REC * (REC - 1)),
        labels: Vec::with_capacity(bytes.len() / REC),
    };
    for r in bytes.chunks_exact(REC) {
        if r[0] > 9 {
            return err(format!("{what}: label {} out of range 0..10", r[0]));
        }
        s.labels.push(r[0]);
        s.images.extend(r[1..].iter().map(|&p| p as f32));
    }
    Ok(s)
}

/// A CIFAR-10 binary directory: `data_batch_1..5.bin` and `test_batch.bin`.
pub fn load_cifar10_dir(dir: &Path) -> Result<Dataset, TrainError> {
    let mut train = Split {
        images: Vec::new(),
        labels: Vec::new(),
    };
    let mut any = false;
    for i in 1..=5 {
        let p = dir.join(format!("data_batch_{i}.bin"));
        if p.is_file() {
            let s = parse_cifar10(&read(&p)?, &p.display().to_string())?;
            train.images.extend(s.images);
            train.labels.extend(s.labels);
            any = true;
        }
    }
    if !any {
        return err(format!("{}: no data_batch_*.bin", dir.display()));
    }
    let tp = dir.join("test_batch.bin");
    let test = parse_cifar10(&read(&tp)?, &tp.display().to_string())?;
    Ok(Dataset {
        source: dir.display().to_string(),
        shape: (3, 32, 32),
        classes: 10,
        train,
        test,
        flip_ok: true,
    })
}

/// Resolves `--data`: `builtin`, `fashion-mnist` (the Debian package's files),
/// or a directory holding IDX files or CIFAR-10 binary batches.
pub fn load(source: &str) -> Result<Dataset, TrainError> {
    match source {
        "builtin" => Ok(builtin()),
        "fashion-mnist" => load_idx_dir(Path::new(SYSTEM_FASHION_MNIST)).map_err(|e| {
            TrainError::Data(format!(
                "{e} (install it with `apt-get install dataset-fashion-mnist`)"
            ))
        }),
        dir => {
            let d = Path::new(dir);
            if !d.is_dir() {
                return err(format!(
                    "--data {dir}: not `builtin`, `fashion-mnist` or a directory"
                ));
            }
            if d.join("test_batch.bin").is_file() {
                load_cifar10_dir(d)
            } else {
                load_idx_dir(d)
            }
        }
    }
}

impl Dataset {
    /// Zero-pads every image (in raw pixel space, before normalisation: the
    /// border is background) to `h × w`, centred; 28×28 → 32×32 pads 2 a side.
    pub fn pad_to(&mut self, h: usize, w: usize) -> Result<(), TrainError> {
        let (c, h0, w0) = self.shape;
        if (h0, w0) == (h, w) {
            return Ok(());
        }
        if h < h0 || w < w0 {
            return err(format!(
                "{}: images are {h0}×{w0}, the net takes {h}×{w} (cannot shrink)",
                self.source
            ));
        }
        let (top, left) = ((h - h0) / 2, (w - w0) / 2);
        for s in [&mut self.train, &mut self.test] {
            let n = s.len();
            let mut out = vec![0.0f32; n * c * h * w];
            for i in 0..n * c {
                for y in 0..h0 {
                    let src = (i * h0 + y) * w0;
                    let dst = (i * h + y + top) * w + left;
                    out[dst..dst + w0].copy_from_slice(&s.images[src..src + w0]);
                }
            }
            s.images = out;
        }
        self.shape = (c, h, w);
        Ok(())
    }

    /// Per-channel mean and standard deviation of the training split.
    pub fn channel_stats(&self) -> Vec<(f32, f32)> {
        let (c, h, w) = self.shape;
        let hw = h * w;
        (0..c)
            .map(|ch| {
                let (mut s, mut s2, mut k) = (0f64, 0f64, 0f64);
                for img in self.train.images.chunks_exact(c * hw) {
                    for &p in &img[ch * hw..(ch + 1) * hw] {
                        s += p as f64;
                        s2 += (p as f64) * (p as f64);
                        k += 1.0;
                    }
                }
                let mean = s / k.max(1.0);
                let var = (s2 / k.max(1.0) - mean * mean).max(1e-12);
                (mean as f32, var.sqrt() as f32)
            })
            .collect()
    }

    /// Normalises both splits with the training split's per-channel statistics.
    pub fn normalize(&mut self) {
        let stats = self.channel_stats();
        let (c, h, w) = self.shape;
        let hw = h * w;
        for s in [&mut self.train, &mut self.test] {
            for img in s.images.chunks_exact_mut(c * hw) {
                for (ch, &(m, sd)) in stats.iter().enumerate() {
                    for p in &mut img[ch * hw..(ch + 1) * hw] {
                        *p = (*p - m) / sd;
                    }
                }
            }
        }
    }

    /// Keeps the first `n_train` / `n_test` examples (tests, quick runs).
    pub fn truncate(&mut self, n_train: usize, n_test: usize) {
        let per = self.shape.0 * self.shape.1 * self.shape.2;
        for (s, n) in [(&mut self.train, n_train), (&mut self.test, n_test)] {
            let n = n.min(s.len());
            s.labels.truncate(n);
            s.images.truncate(n * per);
        }
    }
}

/// Host-side augmentation of one training batch.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Augment {
    /// Random crop: pad by this many zeros a side, take a random window of the
    /// original size (0: off).
    pub crop_pad: usize,
    /// Random horizontal flip with probability ½ (CIFAR-style data only).
    pub flip: bool,
}

/// Applies `aug` in place to `images` (`[B, C, H, W]`), drawing from `rng` in
/// a fixed order (per image: crop offsets, then flip) so a resumed run
/// replays the same draws.
pub fn augment(images: &mut [f32], shape: (usize, usize, usize), aug: Augment, rng: &mut Rng) {
    let (c, h, w) = shape;
    if aug.crop_pad == 0 && !aug.flip {
        return;
    }
    let p = aug.crop_pad as i64;
    let mut tmp = vec![0f32; c * h * w];
    for img in images.chunks_exact_mut(c * h * w) {
        let (dy, dx) = if p > 0 {
            (
                (rng.below(2 * p as usize + 1) as i64) - p,
                (rng.below(2 * p as usize + 1) as i64) - p,
            )
        } else {
            (0, 0)
        };
        let flip = aug.flip && rng.below(2) == 1;
        for ch in 0..c {
            for y in 0..h {
                for x in 0..w {
                    let sy = y as i64 + dy;
                    let sx0 = if flip { w - 1 - x } else { x } as i64;
                    let sx = sx0 + dx;
                    tmp[(ch * h + y) * w + x] =
                        if sy < 0 || sx < 0 || sy >= h as i64 || sx >= w as i64 {
                            0.0
                        } else {
                            img[(ch * h + sy as usize) * w + sx as usize]
                        };
                }
            }
        }
        img.copy_from_slice(&tmp);
    }
}
