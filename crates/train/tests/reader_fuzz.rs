//! Mutation fuzzing of the checkpoint and data-set readers: a real
//! checkpoint and real IDX / CIFAR-10 files, mutated (bit flips, insertions,
//! deletions, truncations, length-field rewrites), must never make
//! `Checkpoint::from_bytes`, `parse_idx` or `parse_cifar10` panic; and a
//! mutated checkpoint that still loads must be one whose bytes the checksum
//! covers unchanged (every changed tensor or metadata byte is refused).
//! Bounded: 3 s per reader by default, `CERTGRAD_FUZZ_SECS` for long runs.

#[path = "train_suite/common/mod.rs"]
mod common;

use common::*;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::time::{Duration, Instant};
use train::Checkpoint;

struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
    fn below(&mut self, n: usize) -> usize {
        if n == 0 {
            0
        } else {
            (self.next() % n as u64) as usize
        }
    }
}

fn mutate(rng: &mut Rng, base: &[u8]) -> Vec<u8> {
    let mut b = base.to_vec();
    for _ in 0..1 + rng.below(3) {
        let len = b.len();
        let i = rng.below(len + 1);
        match rng.below(6) {
            0 | 1 if i < len => b[i] ^= 1 << rng.below(8),
            2 => {
                let j = (i + 1 + rng.below(16)).min(len);
                b.drain(i..j);
            }
            3 => b.truncate(i),
            4 if len >= 8 => {
                // A length field: safetensors' header size, IDX's dims.
                let k = rng.below(8.min(len));
                b[k] = [0u8, 0xFF, 0x7F, 1][rng.below(4)];
            }
            _ => b.insert(i, rng.below(256) as u8),
        }
    }
    b
}

fn budget() -> Duration {
    let secs = std::env::var("CERTGRAD_FUZZ_SECS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(3);
    Duration::from_secs(secs)
}

/// Runs `f` on mutations of `seeds` for the budget; returns (cases, accepted).
fn fuzz(name: &str, seeds: &[Vec<u8>], salt: u64, f: impl Fn(&[u8]) -> bool) -> (usize, usize) {
    let mut rng = Rng(0x9E37_79B9_7F4A_7C15 ^ salt);
    let (mut cases, mut accepted) = (0, 0);
    let quiet = std::panic::take_hook();
    std::panic::set_hook(Box::new(|_| {}));
    let start = Instant::now();
    let mut failure = None;
    while start.elapsed() < budget() {
        let pick = rng.below(seeds.len());
        let input = mutate(&mut rng, &seeds[pick]);
        cases += 1;
        match catch_unwind(AssertUnwindSafe(|| f(&input))) {
            Ok(ok) => accepted += usize::from(ok),
            Err(_) => {
                failure = Some(input);
                break;
            }
        }
    }
    std::panic::set_hook(quiet);
    if let Some(input) = failure {
        panic!(
            "{name}: after {cases} cases a reader panicked on {} bytes: {input:?}",
            input.len()
        );
    }
    println!(
        "{name}: {cases} mutated inputs in {:.1} s, {accepted} accepted, no panic",
        start.elapsed().as_secs_f64()
    );
    assert!(cases >= 200, "{name}: only {cases} cases ran");
    (cases, accepted)
}

#[test]
fn mutated_checkpoints_never_panic_and_never_load_changed() {
    let d = temp_dir("ck-fuzz");
    write_quadrant_idx(&d, 16, 4);
    let mut s = train::Session::new(tiny_config(&d)).unwrap();
    s.train_step().unwrap();
    let good = s.to_checkpoint(0).unwrap();
    let bytes = good.to_bytes().unwrap();
    let reference = Checkpoint::from_bytes(&bytes, "seed").unwrap();
    // A mutation that destroys the `checksum` key is refused as unverified.
    fuzz("checkpoint_fuzz", &[bytes], 1, |b| {
        match Checkpoint::from_bytes(b, "fuzz") {
            Ok(ck) => {
                // Loaded: then its contents must be the original's (a
                // mutation the checksum does not cover, e.g. header padding).
                assert!(ck.tensors == reference.tensors, "changed data loaded");
                true
            }
            Err(_) => false,
        }
    });
}

#[test]
fn mutated_idx_and_cifar_files_never_panic() {
    let (im, lb) = quadrant_images(6, 3);
    let seeds = vec![
        idx_bytes(&[6, 8, 8], &im),
        idx_bytes(&[6], &lb),
        gzip(&idx_bytes(&[6, 8, 8], &im)),
    ];
    fuzz("idx_fuzz", &seeds, 2, |b| {
        train::data::parse_idx(b, "fuzz").is_ok()
    });
    let mut rec = vec![3u8];
    rec.extend((0..3072).map(|i| (i % 251) as u8));
    let mut two = rec.clone();
    two.extend(&rec);
    fuzz("cifar_fuzz", &[rec, two], 3, |b| {
        train::data::parse_cifar10(b, "fuzz").is_ok()
    });
}
