//! Mutation fuzzing of the .npy reader: valid files of several dtypes and
//! ranks, mutated (bit flips, byte and header-token insertions, deletions,
//! truncations), must never make `npy::parse`, `npy::from_bytes` or
//! `npy::read_argument` panic or allocate past the file; every refusal is an
//! error value. Bounded: 3 s by default, `CERTGRAD_FUZZ_SECS` for long runs.
//! Also the hostile headers found by hand, each with its clear error.

use engines::host::HostTensor;
use engines::npy;
use ir::{ElemType, TensorType};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::time::{Duration, Instant};

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

const TOKENS: &[&str] = &[
    "(",
    ")",
    ",",
    "'",
    "-1",
    "0",
    "99999999999999999999",
    "4611686018427387904",
    "3037000499, 3037000499",
    "True",
    "False",
    "<f8",
    "|b1",
    "[('a', '<f4')]",
    "{",
    "}",
    "'shape':",
    "'descr':",
    "'fortran_order':",
    "\n",
    "\0",
];

fn mutate(rng: &mut Rng, base: &[u8]) -> Vec<u8> {
    let mut b = base.to_vec();
    for _ in 0..1 + rng.below(3) {
        let len = b.len();
        let i = rng.below(len + 1);
        match rng.below(6) {
            0 if i < len => b[i] ^= 1 << rng.below(8),
            1 => {
                let t = TOKENS[rng.below(TOKENS.len())].as_bytes();
                b.splice(i..i, t.iter().copied());
            }
            2 => {
                let j = (i + 1 + rng.below(6)).min(len);
                b.drain(i..j);
            }
            3 => b.truncate(i),
            4 if len >= 10 => {
                // The header-length field.
                let k = 8 + rng.below(2);
                b[k] = rng.below(256) as u8;
            }
            _ => b.insert(i, rng.below(256) as u8),
        }
    }
    b
}

fn seeds() -> Vec<(Vec<u8>, TensorType)> {
    vec![
        (
            npy::to_bytes(&HostTensor::f32(vec![2, 3], vec![1.0; 6])),
            TensorType::new(vec![2, 3], ElemType::F32),
        ),
        (
            npy::to_bytes(&HostTensor::f32(vec![], vec![7.0])),
            TensorType::new(vec![], ElemType::F32),
        ),
        (
            npy::to_bytes(&HostTensor::f32(vec![4], vec![0.5; 4])),
            TensorType::new(vec![4], ElemType::F32),
        ),
    ]
}

#[test]
fn mutated_npy_files_never_panic() {
    let long: Option<u64> = std::env::var("CERTGRAD_FUZZ_SECS")
        .ok()
        .and_then(|s| s.parse().ok());
    let budget = Duration::from_secs(long.unwrap_or(3));
    let dir = std::env::temp_dir().join(format!("certgrad-npy-fuzz-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("x.npy");
    let seeds = seeds();
    let mut rng = Rng(0x5DEE_CE66_D1CE_4E5B);
    let (mut cases, mut accepted) = (0usize, 0usize);
    let quiet = std::panic::take_hook();
    std::panic::set_hook(Box::new(|_| {}));
    let start = Instant::now();
    let mut failure = None;
    while start.elapsed() < budget {
        let (base, ty) = &seeds[rng.below(seeds.len())];
        let input = mutate(&mut rng, base);
        cases += 1;
        // read_argument reads a file: every 8th case, the rest in memory.
        let via_file = cases % 8 == 0;
        if via_file {
            std::fs::write(&path, &input).unwrap();
        }
        let r = catch_unwind(AssertUnwindSafe(|| {
            let _ = npy::parse(&input);
            let a = npy::from_bytes(&input).is_ok();
            let b = via_file && npy::read_argument::<f32>(&path, 0, ty).is_ok();
            a || b
        }));
        match r {
            Ok(ok) => accepted += usize::from(ok),
            Err(_) => {
                failure = Some(input);
                break;
            }
        }
    }
    std::panic::set_hook(quiet);
    let _ = std::fs::remove_dir_all(&dir);
    if let Some(f) = failure {
        panic!(
            "after {cases} cases the reader panicked on {:?}",
            String::from_utf8_lossy(&f)
        );
    }
    println!(
        "npy_fuzz: {cases} mutated files in {:.1} s, {accepted} still read, no panic",
        start.elapsed().as_secs_f64()
    );
    assert!(cases >= 500, "only {cases} cases ran");
}

fn header(shape: &str, fortran: &str) -> Vec<u8> {
    let h = format!("{{'descr': '<f4', 'fortran_order': {fortran}, 'shape': {shape}, }}\n");
    let mut b = b"\x93NUMPY\x01\x00".to_vec();
    b.extend((h.len() as u16).to_le_bytes());
    b.extend(h.as_bytes());
    b
}

#[test]
fn hostile_headers_get_clear_errors() {
    // Negative dimension: before, `d as usize` made it 2^64 - 1.
    let e = npy::parse(&header("(-1,)", "False")).unwrap_err();
    assert!(e.contains("negative dimension -1"), "{e}");
    // Elements × 8 bytes overflow usize: before, a multiply-overflow panic.
    let e = npy::parse(&header("(3037000499, 3037000499)", "False")).unwrap_err();
    assert!(
        e.contains("more elements than this machine can address"),
        "{e}"
    );
    let e = npy::from_bytes(&header("(3037000499, 3037000499)", "False")).unwrap_err();
    assert!(e.0.contains("more elements"), "{e:?}");
    // fortran_order that is neither True nor False was read as False.
    let e = npy::parse(&header("(0,)", "maybe")).unwrap_err();
    assert!(e.contains("'fortran_order' is maybe"), "{e}");
    // The good twins.
    let empty = header("(0,)", "False");
    assert_eq!(npy::parse(&empty).unwrap().shape, vec![0]);
    let mut b = header("(2,)", "False");
    b.extend(1.5f32.to_le_bytes());
    b.extend((-2.0f32).to_le_bytes());
    let t = npy::from_bytes(&b).unwrap();
    assert_eq!(t, HostTensor::f32(vec![2], vec![1.5, -2.0]));
}
