//! The one seeded generator of the workspace (SplitMix64): the test-module
//! generator, the certifier and the trainer all draw from it.
//!
//! Its whole state is one public `u64`, so a checkpoint stores it exactly and a
//! resumed run draws the same numbers; certificates and property tests are
//! reproducible from their seed. Each user seeds its own stream: the test
//! generator starts from the bare seed ([`Rng::new`]), the certifier and the
//! trainer xor it with their salt ([`Rng::salted`] with [`CERT_SALT`] or
//! [`TRAIN_SALT`]), so one seed gives them unrelated streams. The salts and
//! every derivation below are pinned by the tests: seeds recorded in
//! certificates and checkpoints must keep meaning the same draws.

/// The certifier's stream (ties, net, step and data-parallel certificates).
pub const CERT_SALT: u64 = 0x5DEE_CE66_D1CE_4E5B;

/// The trainer's stream (initial parameters, epoch permutations, augmentation).
pub const TRAIN_SALT: u64 = 0x2545_F491_4F6C_DD1D;

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Rng {
    pub state: u64,
}

impl Rng {
    /// The stream whose state starts at `seed` (the test generator's).
    pub fn new(seed: u64) -> Self {
        Rng { state: seed }
    }

    /// The stream of `seed` for the user owning `salt`.
    pub fn salted(seed: u64, salt: u64) -> Self {
        Rng::new(seed ^ salt)
    }

    /// An independent stream for `(seed, tag)` within `salt`'s (e.g. the
    /// trainer's permutation of one epoch).
    pub fn derived(seed: u64, salt: u64, tag: u64) -> Self {
        let mut r = Rng::salted(seed, salt);
        r.state ^= tag.wrapping_mul(0xD6E8_FEB8_6659_FD93);
        r.next_u64();
        r
    }

    pub fn next_u64(&mut self) -> u64 {
        self.state = self.state.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.state;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in `0..n` (`n > 0`; the modulo bias is < 2⁻⁴⁰ for n < 2²⁴).
    pub fn below(&mut self, n: usize) -> usize {
        (self.next_u64() % n as u64) as usize
    }

    /// Uniform in `lo..=hi`.
    pub fn range(&mut self, lo: i64, hi: i64) -> i64 {
        lo + (self.next_u64() % (hi - lo + 1) as u64) as i64
    }

    /// Uniform integer in `[-r, r]` (`r ≥ 0`); the same draw as `range(-r, r)`.
    pub fn int_in(&mut self, r: i64) -> i64 {
        (self.next_u64() % (2 * r as u64 + 1)) as i64 - r
    }

    /// Uniform in `[0, 1)`: the top 53 bits over 2⁵³.
    pub fn unit(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }

    /// Uniform in `[-1, 1)`: the top 53 bits over 2⁵², less one (the test
    /// generator's float draw; equal to `2·unit() − 1` bit for bit).
    pub fn signed_unit(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 / (1u64 << 52) as f64 - 1.0
    }

    /// True with probability `p`.
    pub fn chance(&mut self, p: f64) -> bool {
        self.unit() < p
    }

    /// Standard normal (Box–Muller, one value per two uniforms).
    pub fn normal(&mut self) -> f64 {
        let u1 = self.unit().max(f64::MIN_POSITIVE);
        let u2 = self.unit();
        (-2.0 * u1.ln()).sqrt() * (2.0 * std::f64::consts::PI * u2).cos()
    }

    /// A uniformly chosen element of `items` (non-empty).
    pub fn pick<T: Clone>(&mut self, items: &[T]) -> T {
        items[self.below(items.len())].clone()
    }

    /// Fisher–Yates, from the back.
    pub fn shuffle<T>(&mut self, items: &mut [T]) {
        for i in (1..items.len()).rev() {
            let j = self.below(i + 1);
            items.swap(i, j);
        }
    }

    /// A uniformly random permutation of `0..n`.
    pub fn permutation(&mut self, n: usize) -> Vec<usize> {
        let mut p: Vec<usize> = (0..n).collect();
        self.shuffle(&mut p);
        p
    }
}
