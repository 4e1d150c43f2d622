//! The checks a net passes before anything is built or allocated: its own
//! fields (input, classes, label smoothing, every layer's `validate`) and its
//! size — total parameter floats and per-example activation floats — against
//! a stated limit, so a typo (`out_ch = 40960`, `input = [3, 22400, 224]`)
//! is an error naming the field, not an allocation failure minutes later.

use super::block::{at_least, FieldError};
use super::named::validate_list;
use super::NetSpec;
use crate::layer::{CertLayer, LayerError};

/// The most floats a net may hold: trainable parameters, and the outputs of
/// its top-level layers for one example summed (what a batch of one keeps
/// for the backward, block internals aside). Both default to 2^28 (1 GiB of
/// f32 each: ResNet-50 at 224² holds 25.6 M parameters and about 25 M such
/// activations); the environment variable `CERTGRAD_MAX_FLOATS` raises or
/// lowers both.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SizeLimit {
    pub params: i64,
    pub activations: i64,
}

impl SizeLimit {
    pub const ENV: &'static str = "CERTGRAD_MAX_FLOATS";
    pub const DEFAULT: i64 = 1 << 28;

    /// The default, or `CERTGRAD_MAX_FLOATS` when it is set (an error when
    /// it is not a positive integer).
    pub fn from_env() -> Result<SizeLimit, String> {
        match std::env::var(Self::ENV) {
            Err(_) => Ok(SizeLimit::both(Self::DEFAULT)),
            Ok(v) => SizeLimit::parse(&v),
        }
    }

    /// A value of `CERTGRAD_MAX_FLOATS`: a positive integer (`_` allowed as
    /// a digit separator), the limit of both sizes.
    pub fn parse(v: &str) -> Result<SizeLimit, String> {
        v.trim()
            .replace('_', "")
            .parse::<i64>()
            .ok()
            .filter(|&n| n > 0)
            .map(SizeLimit::both)
            .ok_or_else(|| format!("{} = {v:?}: expected a positive integer", Self::ENV))
    }

    /// `n` floats for the parameters and `n` for the activations.
    pub fn both(n: i64) -> SizeLimit {
        SizeLimit {
            params: n,
            activations: n,
        }
    }
}

impl NetSpec {
    /// The net's own fields and every layer's, checked without building
    /// anything; the error names the field (`layers[3].out_ch`).
    pub fn validate(&self) -> Result<(), FieldError> {
        if self.name.is_empty() {
            return Err(FieldError::new("name", "name = \"\": expected a net name"));
        }
        let (c, h, w) = self.input;
        for (i, v) in [c, h, w].into_iter().enumerate() {
            at_least("input", v, 1).map_err(|_| {
                FieldError::new(
                    "input",
                    format!(
                        "input = [{c}, {h}, {w}]: expected [C, H, W], each ≥ 1 (entry {i} is {v})"
                    ),
                )
            })?;
        }
        at_least("classes", self.classes, 1)?;
        if let Some(a) = self.label_smoothing {
            if !(0.0..1.0).contains(&a) {
                return Err(FieldError::new(
                    "label_smoothing",
                    format!("label_smoothing = {a}: expected α in [0, 1) or \"none\""),
                ));
            }
        }
        if self.layers.is_empty() {
            return Err(FieldError::new(
                "layers",
                "layers = []: expected at least one layer",
            ));
        }
        validate_list("layers", &self.layers)
    }

    /// (parameter floats, per-example activation floats) of the net's types
    /// (nothing allocated), and an error when either exceeds `limit`.
    pub fn check_size(&self, limit: SizeLimit) -> Result<(i64, i64), LayerError> {
        let chain = self.chain()?;
        let input = self.input_type(1);
        // Saturating: a file may declare sizes whose product overflows i64,
        // and "more than the limit" is all that needs saying about them.
        let floats = |t: &ir::TensorType| {
            t.shape
                .iter()
                .try_fold(1i64, |n, &d| n.checked_mul(d))
                .unwrap_or(i64::MAX)
        };
        let params: i64 = chain
            .params(&input)
            .iter()
            .fold(0i64, |n, p| n.saturating_add(floats(&p.ty)));
        let acts: i64 = chain.types(&input)?[1..]
            .iter()
            .fold(0i64, |n, t| n.saturating_add(floats(t)));
        for (what, n, max) in [
            ("parameter", params, limit.params),
            ("per-example activation", acts, limit.activations),
        ] {
            if n > max {
                return Err(LayerError(format!(
                    "{}: {n} {what} floats exceed the limit of {max} (set {} to raise it)",
                    self.name,
                    SizeLimit::ENV
                )));
            }
        }
        Ok((params, acts))
    }
}
