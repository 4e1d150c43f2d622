//! Inputs a run must refuse before it trains, each beside its good twin:
//! checkpoints whose bytes changed after writing (a flipped exponent bit in a
//! tensor, an edited counter), non-finite weights, a `--resume` with nothing
//! to resume, configs with a NaN warmup / zero epochs / zero learning rate,
//! and IDX data with empty images or no examples.

use crate::common::*;
use std::collections::HashMap;
use train::checkpoint::{crc32, crc32_update};
use train::{checkpoint_path, Checkpoint, Session, TrainError};

#[test]
fn crc32_is_the_standard_one() {
    // The CRC-32/ISO-HDLC check value of "123456789" (zlib, PNG, gzip).
    assert_eq!(crc32(b"123456789"), 0xCBF4_3926);
    assert_eq!(crc32(b""), 0);
    assert_eq!(crc32_update(crc32(b"1234"), b"56789"), 0xCBF4_3926);
}

fn small_checkpoint() -> (Checkpoint, Vec<u8>) {
    let mut ck = Checkpoint::default();
    ck.tensors
        .insert("a.w".into(), (vec![2, 2], vec![1.0, -2.0, 0.5, 3.0]));
    ck.tensors.insert("b.bias".into(), (vec![3], vec![0.25; 3]));
    ck.meta.insert("step".into(), "3".into());
    ck.meta.insert("epoch".into(), "1".into());
    let bytes = ck.to_bytes().unwrap();
    (ck, bytes)
}

fn corrupt(e: TrainError) -> String {
    assert!(matches!(e, TrainError::Checkpoint(_)), "{e:?}");
    e.message().to_string()
}

#[test]
fn a_flipped_exponent_bit_is_refused_and_the_intact_file_loads() {
    let (ck, bytes) = small_checkpoint();
    let back = Checkpoint::from_bytes(&bytes, "ck").expect("intact");
    assert_eq!(back.tensors, ck.tensors);
    assert_eq!(back.meta.get("step").map(String::as_str), Some("3"));
    // The last byte is the high byte of the last f32 (little-endian) of the
    // last tensor in the data section; 0x40 there is exponent bit 30:
    // 0.25 becomes 0.25 · 2^128 = inf... or any other value — never loaded.
    let mut flipped = bytes.clone();
    *flipped.last_mut().unwrap() ^= 0x40;
    let m = corrupt(Checkpoint::from_bytes(&flipped, "ck").unwrap_err());
    assert!(
        m.contains("corrupt checkpoint") && m.contains("CRC-32"),
        "{m}"
    );
    // A metadata counter edited in place (same length, so the JSON stays valid).
    let needle = br#""step":"3""#;
    let at = bytes
        .windows(needle.len())
        .position(|w| w == needle)
        .expect("the header holds the counter");
    let mut edited_bytes = bytes.clone();
    edited_bytes[at + 8] = b'4';
    let m = corrupt(Checkpoint::from_bytes(&edited_bytes, "ck").unwrap_err());
    assert!(m.contains("corrupt checkpoint"), "{m}");
}

#[test]
fn a_checkpoint_without_a_checksum_is_refused_unless_asked() {
    // What checkpoint.rs wrote before the checksum: the same tensors and
    // metadata, no `checksum` entry.
    let (ck, _) = small_checkpoint();
    let raw: Vec<(String, Vec<usize>, Vec<u8>)> = ck
        .tensors
        .iter()
        .map(|(k, (s, d))| {
            (
                k.clone(),
                s.clone(),
                d.iter().flat_map(|x| x.to_le_bytes()).collect(),
            )
        })
        .collect();
    let views: Vec<(String, safetensors::tensor::TensorView)> = raw
        .iter()
        .map(|(k, s, b)| {
            let v =
                safetensors::tensor::TensorView::new(safetensors::tensor::Dtype::F32, s.clone(), b)
                    .unwrap();
            (k.clone(), v)
        })
        .collect();
    let mut meta: HashMap<String, String> = ck.meta.clone().into_iter().collect();
    meta.insert("format".into(), train::checkpoint::FORMAT.into());
    let old = safetensors::serialize(views, &Some(meta)).unwrap();
    // Refused by default, naming what is missing and the way to load it anyway.
    let e = Checkpoint::from_bytes(&old, "old")
        .expect_err("no checksum: refused")
        .to_string();
    assert!(e.contains("no `checksum` metadata"), "{e}");
    assert!(e.contains("--allow-unverified-checkpoint"), "{e}");
    // Asked for, it loads, unchanged. (Process-wide: restored at once, and no
    // other test in this binary builds a checkpoint without a checksum.)
    train::checkpoint::set_allow_unverified(true);
    let back = Checkpoint::from_bytes(&old, "old");
    train::checkpoint::set_allow_unverified(false);
    assert_eq!(
        back.expect("an old checkpoint loads when asked").tensors,
        ck.tensors
    );
}

#[test]
fn non_finite_weights_are_damage_not_a_learning_rate() {
    let d = temp_dir("nan-ck");
    write_quadrant_idx(&d, 16, 4);
    let mut s = Session::new(tiny_config(&d)).unwrap();
    s.train_step().unwrap();
    let good = s.to_checkpoint(0).unwrap();
    let mut fresh = Session::new(tiny_config(&d)).unwrap();
    fresh.restore(&good, "ck").expect("the good twin restores");
    let mut bad = good.clone();
    let (name, (_, data)) = bad.tensors.iter_mut().next().unwrap();
    let name = name.clone();
    data[1] = f32::NAN;
    // Written and read back: the checksum is over the NaN, so only the
    // finiteness check can catch it.
    let bytes = bad.to_bytes().unwrap();
    let back = Checkpoint::from_bytes(&bytes, "ck").unwrap();
    let m = corrupt(fresh.restore(&back, "ck").unwrap_err());
    assert!(
        m.contains(&format!("tensor `{name}` holds NaN at element 1")),
        "{m}"
    );
    assert!(m.contains("damaged") && !m.contains("--lr"), "{m}");
}

#[test]
fn resume_without_a_checkpoint_says_so() {
    let d = temp_dir("no-ck");
    let e = train::resume(&d.join("run"))
        .err()
        .expect("nothing to resume");
    let m = corrupt(e);
    assert!(m.contains("no checkpoint to resume"), "{m}");
    assert!(m.contains("without --resume to start afresh"), "{m}");
    assert!(!checkpoint_path(&d.join("run")).exists());
}

fn run_error(cfg: train::TrainConfig) -> String {
    match Session::new(cfg) {
        Ok(_) => panic!("the config was accepted"),
        Err(e) => {
            assert!(matches!(e, TrainError::Run(_)), "{e:?}");
            e.message().to_string()
        }
    }
}

#[test]
fn nan_warmup_zero_epochs_and_zero_lr_are_refused() {
    let d = temp_dir("cfg");
    write_quadrant_idx(&d, 16, 4);
    let good = tiny_config(&d);
    Session::new(good.clone()).expect("the good twin");
    let m = run_error(train::TrainConfig {
        warmup_epochs: f64::NAN,
        ..good.clone()
    });
    assert!(m.contains("--warmup-epochs NaN"), "{m}");
    let m = run_error(train::TrainConfig {
        warmup_epochs: -1.0,
        ..good.clone()
    });
    assert!(m.contains("--warmup-epochs -1"), "{m}");
    let m = run_error(train::TrainConfig {
        epochs: 0,
        ..good.clone()
    });
    assert!(m.contains("--epochs must be at least 1"), "{m}");
    for lr in [0.0, -1e-3, f64::INFINITY, f64::NAN] {
        let m = run_error(train::TrainConfig { lr, ..good.clone() });
        assert!(m.contains("--lr") && m.contains("positive finite"), "{m}");
    }
    let m = run_error(train::TrainConfig {
        limit_train: Some(0),
        ..good
    });
    assert!(m.contains("at least 1 example"), "{m}");
}

fn data_error(dir: &std::path::Path) -> String {
    let e = train::data::load(&dir.display().to_string()).expect_err("refused");
    assert!(matches!(e, TrainError::Data(_)), "{e:?}");
    e.message().to_string()
}

#[test]
fn idx_images_of_zero_rows_or_no_examples_are_refused() {
    let d = temp_dir("idx0");
    write_quadrant_idx(&d, 8, 4);
    train::data::load(&d.display().to_string()).expect("the good twin");
    // 0×28 images (no pixel bytes at all) with 8 labels.
    std::fs::write(
        d.join("train-images-idx3-ubyte.gz"),
        gzip(&idx_bytes(&[8, 0, 28], &[])),
    )
    .unwrap();
    let m = data_error(&d);
    assert!(m.contains("train images are 0×28"), "{m}");
    // No examples at all.
    std::fs::write(
        d.join("train-images-idx3-ubyte.gz"),
        gzip(&idx_bytes(&[0, 8, 8], &[])),
    )
    .unwrap();
    std::fs::write(d.join("train-labels-idx1-ubyte"), idx_bytes(&[0], &[])).unwrap();
    let m = data_error(&d);
    assert!(m.contains("hold no examples"), "{m}");
    // Dimensions whose product overflows: 255 dims of 2^32-1.
    let dims = vec![u32::MAX; 255];
    let mut b = vec![0, 0, 0x08, 255];
    for x in &dims {
        b.extend(x.to_be_bytes());
    }
    let e = train::data::parse_idx(&b, "huge").unwrap_err();
    assert!(e.message().contains("overflow"), "{e}");
}
