//! Shared fixtures: a tiny learnable IDX data set written to a temp directory
//! and the config of a tiny-net run on it.

#![allow(dead_code)]

use std::io::Write;
use std::path::{Path, PathBuf};
use train::TrainConfig;

/// A fresh empty directory under the target's temp area.
pub fn temp_dir(tag: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!(
        "certgrad-train-{tag}-{}-{:?}",
        std::process::id(),
        std::thread::current().id()
    ));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// IDX bytes of unsigned bytes with `dims`.
pub fn idx_bytes(dims: &[u32], data: &[u8]) -> Vec<u8> {
    let mut b = vec![0, 0, 0x08, dims.len() as u8];
    for d in dims {
        b.extend(d.to_be_bytes());
    }
    b.extend_from_slice(data);
    b
}

pub fn gzip(bytes: &[u8]) -> Vec<u8> {
    let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    e.write_all(bytes).unwrap();
    e.finish().unwrap()
}

/// `n` 8×8 one-channel images, 4 classes: class c lights quadrant c (plus
/// deterministic noise), so a tiny net learns it in a few dozen updates.
pub fn quadrant_images(n: usize, salt: u32) -> (Vec<u8>, Vec<u8>) {
    let mut images = Vec::with_capacity(n * 64);
    let mut labels = Vec::with_capacity(n);
    let mut s = 0x1234_5678u32 ^ salt;
    for i in 0..n {
        let c = (i % 4) as u8;
        labels.push(c);
        for y in 0..8 {
            for x in 0..8 {
                s = s.wrapping_mul(1_664_525).wrapping_add(1_013_904_223);
                let noise = (s >> 26) as u8; // 0..63
                let q = (y / 4) * 2 + x / 4;
                images.push(if q == c as usize { 150 + noise } else { noise });
            }
        }
    }
    (images, labels)
}

/// Writes a quadrant data set (`n_train`, `n_test`) as IDX files (gzip'd
/// images, raw labels: both forms are read) into `dir`.
pub fn write_quadrant_idx(dir: &Path, n_train: usize, n_test: usize) {
    for (split, n, salt) in [("train", n_train, 1), ("t10k", n_test, 2)] {
        let (im, lb) = quadrant_images(n, salt);
        std::fs::write(
            dir.join(format!("{split}-images-idx3-ubyte.gz")),
            gzip(&idx_bytes(&[n as u32, 8, 8], &im)),
        )
        .unwrap();
        std::fs::write(
            dir.join(format!("{split}-labels-idx1-ubyte")),
            idx_bytes(&[n as u32], &lb),
        )
        .unwrap();
    }
}

/// examples/nets/tiny.toml (3×8×8 input; the data sets its channels to 1).
pub fn tiny_net() -> String {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../examples/nets/tiny.toml")
        .display()
        .to_string()
}

/// A tiny-net AdamW run on `data_dir`: 48 train / 16 test examples, batch 4
/// (12 updates an epoch), 3 epochs.
pub fn tiny_config(data_dir: &Path) -> TrainConfig {
    TrainConfig {
        net: tiny_net(),
        data: data_dir.display().to_string(),
        optimizer: "adamw".into(),
        epochs: 3,
        batch: 4,
        lr: 1e-2,
        warmup_epochs: 0.5,
        seed: 7,
        bf16: false,
        crop_pad: 1,
        flip: true,
        train_accuracy: true,
        checkpoint_every: 5,
        limit_train: None,
        limit_test: None,
        replicas: 1,
        recipe: Default::default(),
    }
}
