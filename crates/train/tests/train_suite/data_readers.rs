//! The data readers on files the tests write (IDX gzip'd and raw, CIFAR-10
//! binary), the embedded built-in set, padding, normalisation, augmentation
//! and the schedule.

use crate::common::*;
use ir::rng::{Rng, TRAIN_SALT};
use train::data::{self, augment, Augment};
use train::schedule::{bias_corrections, bn_momentum, lr_at};

#[test]
fn idx_reads_gzip_and_raw_and_rejects_bad_files() {
    let payload = [1u8, 2, 3, 4, 5, 6];
    let raw = idx_bytes(&[3, 2], &payload);
    for bytes in [raw.clone(), gzip(&raw)] {
        let idx = data::parse_idx(&bytes, "t").unwrap();
        assert_eq!(idx.dims, vec![3, 2]);
        assert_eq!(idx.data, payload);
    }
    // Truncated payload, bad magic, non-byte element type.
    let e = data::parse_idx(&raw[..raw.len() - 1], "t").unwrap_err();
    assert!(e.message().contains("need 6 bytes"), "{e}");
    assert!(matches!(e, train::TrainError::Data(_)), "{e:?}");
    let mut bad = raw.clone();
    bad[0] = 7;
    assert!(data::parse_idx(&bad, "t")
        .unwrap_err()
        .message()
        .contains("magic"));
    let mut f32s = raw;
    f32s[2] = 0x0D;
    assert!(data::parse_idx(&f32s, "t")
        .unwrap_err()
        .message()
        .contains("0x0d"));
}

#[test]
fn idx_directory_pairs_images_and_labels() {
    let d = temp_dir("idx");
    write_quadrant_idx(&d, 12, 8);
    let ds = data::load(d.to_str().unwrap()).unwrap();
    assert_eq!(ds.shape, (1, 8, 8));
    assert_eq!((ds.train.len(), ds.test.len()), (12, 8));
    let (im, lb) = quadrant_images(12, 1);
    assert_eq!(ds.train.labels, lb);
    assert_eq!(
        ds.train.images[..64],
        im[..64].iter().map(|&p| p as f32).collect::<Vec<_>>()[..]
    );
    assert!(!ds.flip_ok, "MNIST-style data is not flipped");
}

#[test]
fn cifar10_binary_batches() {
    let d = temp_dir("cifar");
    let record = |label: u8, fill: u8| {
        let mut r = vec![label];
        // Channel-major: R plane, G plane, B plane; mark pixel (0, 1) of G.
        let mut px = vec![fill; 3 * 1024];
        px[1024 + 1] = 200;
        r.extend(px);
        r
    };
    let train: Vec<u8> = (0..3).flat_map(|i| record(i as u8, i as u8)).collect();
    std::fs::write(d.join("data_batch_1.bin"), &train).unwrap();
    std::fs::write(d.join("data_batch_2.bin"), record(9, 9)).unwrap();
    std::fs::write(d.join("test_batch.bin"), record(5, 1)).unwrap();
    let ds = data::load(d.to_str().unwrap()).unwrap();
    assert_eq!(ds.shape, (3, 32, 32));
    assert_eq!(ds.train.labels, vec![0, 1, 2, 9]);
    assert_eq!(ds.test.labels, vec![5]);
    assert_eq!(ds.train.images[3 * 3072 + 1024 + 1], 200.0);
    assert_eq!(ds.train.images[3 * 3072], 9.0);
    assert!(ds.flip_ok);
    // A torn file is a clear error.
    std::fs::write(d.join("test_batch.bin"), &record(5, 1)[..100]).unwrap();
    let e = data::load(d.to_str().unwrap()).unwrap_err();
    assert!(
        e.message()
            .contains("not a whole number of CIFAR-10 records"),
        "{e}"
    );
}

#[test]
fn builtin_subset_is_stratified_fashion_mnist() {
    let ds = data::builtin();
    assert_eq!((ds.train.len(), ds.test.len()), (2000, 1000));
    assert_eq!(ds.shape, (1, 28, 28));
    for c in 0..10u8 {
        assert_eq!(ds.train.labels.iter().filter(|&&l| l == c).count(), 200);
        assert_eq!(ds.test.labels.iter().filter(|&&l| l == c).count(), 100);
    }
}

#[test]
fn padding_centres_and_normalisation_standardises() {
    let mut ds = data::builtin();
    ds.truncate(20, 5);
    let first = ds.train.images[..28].to_vec();
    ds.pad_to(32, 32).unwrap();
    assert_eq!(ds.shape, (1, 32, 32));
    assert_eq!(ds.train.images.len(), 20 * 1024);
    // Row 0 of the original is row 2 of the padded image, columns 2..30.
    assert_eq!(ds.train.images[2 * 32 + 2..2 * 32 + 30], first[..]);
    assert!(ds.train.images[..2 * 32].iter().all(|&p| p == 0.0));
    ds.normalize();
    let n = ds.train.images.len() as f64;
    let mean = ds.train.images.iter().map(|&p| p as f64).sum::<f64>() / n;
    let var = ds
        .train
        .images
        .iter()
        .map(|&p| (p as f64 - mean).powi(2))
        .sum::<f64>()
        / n;
    assert!(
        mean.abs() < 1e-4 && (var - 1.0).abs() < 1e-3,
        "{mean} {var}"
    );
    assert!(ds.pad_to(16, 16).is_err(), "shrinking is refused");
}

#[test]
fn augmentation_flips_and_crops() {
    let img: Vec<f32> = (0..2 * 3 * 4).map(|i| i as f32).collect(); // [1, 2, 3, 4]
                                                                    // Flip only: some draw flips; a flipped image reverses every row.
    let mut rng = Rng::salted(1, TRAIN_SALT);
    let mut flipped = 0;
    for _ in 0..20 {
        let mut x = img.clone();
        augment(
            &mut x,
            (2, 3, 4),
            Augment {
                crop_pad: 0,
                flip: true,
            },
            &mut rng,
        );
        if x != img {
            flipped += 1;
            for r in 0..6 {
                let row: Vec<f32> = img[r * 4..r * 4 + 4].iter().rev().copied().collect();
                assert_eq!(x[r * 4..r * 4 + 4], row[..]);
            }
        }
    }
    assert!((3..=17).contains(&flipped), "{flipped} of 20 flipped");
    // Crop with padding 1: every output pixel is an input pixel shifted by
    // one (dy, dx) for the whole image, or zero.
    let mut x = img.clone();
    augment(
        &mut x,
        (2, 3, 4),
        Augment {
            crop_pad: 1,
            flip: false,
        },
        &mut Rng::salted(3, TRAIN_SALT),
    );
    let shifted = (-1..=1).any(|dy: i64| {
        (-1..=1).any(|dx: i64| {
            (0..24).all(|i| {
                let (c, y, xx) = (i / 12, (i / 4) % 3, i % 4);
                let (sy, sx) = (y as i64 + dy, xx as i64 + dx);
                let want = if (0..3).contains(&sy) && (0..4).contains(&sx) {
                    img[c * 12 + sy as usize * 4 + sx as usize]
                } else {
                    0.0
                };
                x[i] == want
            })
        })
    });
    assert!(shifted);
}

#[test]
fn schedule_warms_up_then_decays_by_cosine() {
    assert_eq!(lr_at(0.1, 1, 4, 20), 0.025);
    assert_eq!(lr_at(0.1, 4, 4, 20), 0.1);
    assert!((lr_at(0.1, 12, 4, 20) - 0.05).abs() < 1e-12);
    assert!(lr_at(0.1, 20, 4, 20).abs() < 1e-12);
    let (b1, b2) = bias_corrections(1);
    assert!((b1 - 0.1).abs() < 1e-12 && (b2 - 0.001).abs() < 1e-12);
    let (b1, _) = bias_corrections(3);
    assert!((b1 - (1.0 - 0.9f64.powi(3))).abs() < 1e-12);
    assert_eq!((bn_momentum(1), bn_momentum(2)), (1.0, 0.1));
}
