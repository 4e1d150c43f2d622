//! `ir::rng` draws exactly what each of the three generators it replaced drew
//! (`ir::testgen`'s, `cert::rng`'s and `train::rng`'s): seeds recorded in
//! certificates, checkpoints and failing property tests keep their meaning.
//! The old generators are copied here verbatim as the reference, and a few
//! draws of each are pinned as numbers computed by the old code.

use ir::rng::{Rng, CERT_SALT, TRAIN_SALT};

/// The generators as they were, method for method.
mod old {
    fn mix(state: &mut u64) -> u64 {
        *state = state.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = *state;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// `ir::testgen::Rng`.
    #[derive(Clone)]
    pub struct Testgen(pub u64);
    impl Testgen {
        pub fn new(seed: u64) -> Self {
            Testgen(seed)
        }
        pub fn next_u64(&mut self) -> u64 {
            self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
            let mut z = self.0;
            z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
            z ^ (z >> 31)
        }
        pub fn below(&mut self, n: usize) -> usize {
            (self.next_u64() % n as u64) as usize
        }
        pub fn range(&mut self, lo: i64, hi: i64) -> i64 {
            lo + (self.next_u64() % (hi - lo + 1) as u64) as i64
        }
        pub fn chance(&mut self, p: f64) -> bool {
            ((self.next_u64() >> 11) as f64 / (1u64 << 53) as f64) < p
        }
        pub fn pick<T: Clone>(&mut self, items: &[T]) -> T {
            items[self.below(items.len())].clone()
        }
        pub fn shuffle<T>(&mut self, items: &mut [T]) {
            for i in (1..items.len()).rev() {
                let j = self.below(i + 1);
                items.swap(i, j);
            }
        }
        pub fn unit(&mut self) -> f64 {
            (self.next_u64() >> 11) as f64 / (1u64 << 52) as f64 - 1.0
        }
    }

    /// `cert::rng::Rng`.
    pub struct Cert(pub u64);
    impl Cert {
        pub fn new(seed: u64) -> Self {
            Cert(seed ^ 0x5DEE_CE66_D1CE_4E5B)
        }
        pub fn next_u64(&mut self) -> u64 {
            mix(&mut self.0)
        }
        pub fn unit(&mut self) -> f64 {
            (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64
        }
        pub fn normal(&mut self) -> f64 {
            let u1 = self.unit().max(f64::MIN_POSITIVE);
            let u2 = self.unit();
            (-2.0 * u1.ln()).sqrt() * (2.0 * std::f64::consts::PI * u2).cos()
        }
        pub fn int_in(&mut self, r: i64) -> i64 {
            (self.next_u64() % (2 * r as u64 + 1)) as i64 - r
        }
    }

    /// `train::rng::Rng`.
    pub struct Train {
        pub state: u64,
    }
    impl Train {
        pub fn new(seed: u64) -> Self {
            Train {
                state: seed ^ 0x2545_F491_4F6C_DD1D,
            }
        }
        pub fn derived(seed: u64, tag: u64) -> Self {
            let mut r = Train::new(seed);
            r.state ^= tag.wrapping_mul(0xD6E8_FEB8_6659_FD93);
            r.next_u64();
            r
        }
        pub fn next_u64(&mut self) -> u64 {
            mix(&mut self.state)
        }
        pub fn below(&mut self, n: u64) -> u64 {
            self.next_u64() % n
        }
        pub fn unit(&mut self) -> f64 {
            (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64
        }
        pub fn normal(&mut self) -> f64 {
            let u1 = self.unit().max(f64::MIN_POSITIVE);
            let u2 = self.unit();
            (-2.0 * u1.ln()).sqrt() * (2.0 * std::f64::consts::PI * u2).cos()
        }
        pub fn permutation(&mut self, n: usize) -> Vec<usize> {
            let mut p: Vec<usize> = (0..n).collect();
            for i in (1..n).rev() {
                let j = self.below(i as u64 + 1) as usize;
                p.swap(i, j);
            }
            p
        }
    }
}

const SEEDS: [u64; 6] = [0, 1, 7, 42, 0x5EED_0000, u64::MAX];

#[test]
fn testgen_stream_is_unchanged() {
    for seed in SEEDS {
        let (mut a, mut b) = (Rng::new(seed), old::Testgen::new(seed));
        for k in 0..200u64 {
            match k % 7 {
                0 => assert_eq!(a.next_u64(), b.next_u64()),
                1 => assert_eq!(a.below(1 + k as usize), b.below(1 + k as usize)),
                2 => assert_eq!(a.range(-5, 3 + k as i64), b.range(-5, 3 + k as i64)),
                3 => assert_eq!(a.chance(0.3), b.chance(0.3)),
                4 => assert_eq!(a.pick(&[1, 2, 3, 4, 5]), b.pick(&[1, 2, 3, 4, 5])),
                5 => {
                    let (mut x, mut y) = ([0, 1, 2, 3, 4, 5, 6], [0, 1, 2, 3, 4, 5, 6]);
                    a.shuffle(&mut x);
                    b.shuffle(&mut y);
                    assert_eq!(x, y);
                }
                _ => assert_eq!(a.signed_unit().to_bits(), b.unit().to_bits()),
            }
        }
        assert_eq!(a.state, b.0, "seed {seed}");
    }
}

#[test]
fn cert_stream_is_unchanged() {
    for seed in SEEDS {
        let (mut a, mut b) = (Rng::salted(seed, CERT_SALT), old::Cert::new(seed));
        for k in 0..200u64 {
            match k % 4 {
                0 => assert_eq!(a.next_u64(), b.next_u64()),
                1 => assert_eq!(a.unit().to_bits(), b.unit().to_bits()),
                2 => assert_eq!(a.normal().to_bits(), b.normal().to_bits()),
                _ => assert_eq!(a.int_in(1 << 20), b.int_in(1 << 20)),
            }
        }
        assert_eq!(a.state, b.0, "seed {seed}");
    }
}

#[test]
fn train_stream_is_unchanged() {
    for seed in SEEDS {
        for (mut a, mut b) in [
            (Rng::salted(seed, TRAIN_SALT), old::Train::new(seed)),
            (
                Rng::derived(seed, TRAIN_SALT, 0x5EED_0003),
                old::Train::derived(seed, 0x5EED_0003),
            ),
        ] {
            assert_eq!(a.state, b.state);
            for k in 0..200u64 {
                match k % 5 {
                    0 => assert_eq!(a.next_u64(), b.next_u64()),
                    1 => assert_eq!(a.below(1 + k as usize) as u64, b.below(1 + k)),
                    2 => assert_eq!(a.unit().to_bits(), b.unit().to_bits()),
                    3 => assert_eq!(a.normal().to_bits(), b.normal().to_bits()),
                    _ => assert_eq!(a.permutation(9), b.permutation(9)),
                }
            }
            assert_eq!(a.state, b.state, "seed {seed}");
        }
    }
}

/// `int_in(r)` and `range(-r, r)`, and `signed_unit()` and `2·unit() − 1`, are
/// the same draws (kept as separate methods because their users spell them so).
#[test]
fn equivalent_draws_agree() {
    let (mut a, mut b) = (Rng::new(3), Rng::new(3));
    for _ in 0..1000 {
        assert_eq!(a.int_in(1 << 20), b.range(-(1 << 20), 1 << 20));
        assert_eq!(a.signed_unit().to_bits(), (2.0 * b.unit() - 1.0).to_bits());
    }
}

/// Draws computed once with the old generators.
#[test]
fn pinned_draws() {
    let mut t = Rng::new(42);
    let got = [
        t.next_u64(),
        t.below(1000) as u64,
        t.range(-5, 5) as u64,
        t.signed_unit().to_bits(),
    ];
    assert_eq!(got, PIN_TESTGEN);

    let mut c = Rng::salted(7, CERT_SALT);
    let got = [
        c.next_u64(),
        c.unit().to_bits(),
        c.normal().to_bits(),
        c.int_in(1 << 20) as u64,
    ];
    assert_eq!(got, PIN_CERT);

    let mut r = Rng::derived(1, TRAIN_SALT, 0x1417);
    let got = [
        r.next_u64(),
        r.below(10) as u64,
        r.normal().to_bits(),
        r.permutation(5).iter().fold(0, |a, i| a * 10 + *i as u64),
    ];
    assert_eq!(got, PIN_TRAIN);
}

const PIN_TESTGEN: [u64; 4] = [
    0xbdd7_3226_2feb_6e95,
    0x123,
    0xffff_ffff_ffff_fffd,
    0xbfd3_f18f_0078_da90,
];
const PIN_CERT: [u64; 4] = [
    0xd814_e58a_040f_45a8,
    0x3fa9_3a55_cd96_8330,
    0x3feb_eb52_0ee8_5bf2,
    0x584fb,
];
const PIN_TRAIN: [u64; 4] = [0xcb23_e52c_d287_2bce, 2, 0x3ff5_1ea2_0149_b51a, 2431];
