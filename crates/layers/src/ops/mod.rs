//! The op set: one module per op family, and the catalog of every op
//! configuration `certgrad certify --all-ops` ties. A family's module holds
//! its forwards, backward maps, catalog cases and negative controls together:
//! each case says the evidence its tie must reach and carries the controls
//! (shape-preserving backward bugs) the certifier must refute.

pub mod activation;
pub mod attention;
pub mod conv;
pub mod dense;
pub mod loss;
pub mod norm;
pub mod pool;
pub mod scale;
pub mod se;

use crate::layer::CertLayer;
use ir::TensorType;

/// The evidence level a case's tie must reach.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ExpectedEvidence {
    /// Every op of forward and backward is rational (piecewise linear,
    /// affine, divisions by constants): the identity must hold exactly.
    Exact,
    /// A transcendental op (exp, tanh, logistic, rsqrt) is on the path: f64
    /// duals within the certifier's relative tolerance.
    F64,
}

/// What a control's refutation must say.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Refutation {
    /// The refuted block is one of these (several where blocks are checked in
    /// an order the bug does not pin down, e.g. dQ feeding dx, dWq and dbq).
    pub blocks: &'static [&'static str],
    /// Substrings the refutation's detail must contain (where the bug is
    /// localised, e.g. the dropped row `, 6, `, or the point scale).
    pub detail_contains: &'static [&'static str],
}

impl Refutation {
    /// Whether a refutation in `block` with `detail` is the expected one; the
    /// reason when not.
    pub fn judge(&self, block: &str, detail: &str) -> Result<(), String> {
        if !self.blocks.contains(&block) {
            return Err(format!(
                "refuted in block {block}, expected one of {:?}",
                self.blocks
            ));
        }
        match self.detail_contains.iter().find(|p| !detail.contains(*p)) {
            Some(p) => Err(format!("refutation detail lacks {p:?}")),
            None => Ok(()),
        }
    }
}

/// A named, shape-preserving backward bug of one op: the certifier must refute
/// `layer` while `twin`, the correct op at the same configuration, certifies.
/// A control names its own configuration and input (the bug may only show at
/// some shapes, e.g. a square weight or an odd input).
pub struct NegativeControl {
    /// What the bug gets wrong, e.g. `without −Σĝ`.
    pub name: String,
    /// The twin's configuration in words.
    pub config: String,
    pub twin: Box<dyn CertLayer>,
    /// The twin with the bug injected.
    pub layer: Box<dyn CertLayer>,
    pub input: TensorType,
    pub expect: Refutation,
}

impl NegativeControl {
    /// A control refuted in one of `blocks`.
    pub fn new(
        name: impl Into<String>,
        config: impl Into<String>,
        input: &[i64],
        twin: impl CertLayer + 'static,
        layer: impl CertLayer + 'static,
        blocks: &'static [&'static str],
    ) -> Self {
        NegativeControl {
            name: name.into(),
            config: config.into(),
            twin: Box::new(twin),
            layer: Box::new(layer),
            input: TensorType::f32(input.to_vec()),
            expect: Refutation {
                blocks,
                detail_contains: &[],
            },
        }
    }

    /// The refutation's detail must also contain each of `parts`.
    pub fn detail_contains(mut self, parts: &'static [&'static str]) -> Self {
        self.expect.detail_contains = parts;
        self
    }
}

/// One op configuration to certify: the layer, the input it is tied at, the
/// evidence the tie must reach, and the op's negative controls.
pub struct OpCase {
    /// Op family name used by `certify --op NAME` (e.g. `conv2d`, `maxpool`).
    pub op: &'static str,
    /// The configuration in words (`k=3 s=2 Symmetric, N=2, 2→3 ch, 7×5`).
    pub config: String,
    pub layer: Box<dyn CertLayer>,
    pub input: TensorType,
    pub expected_evidence: ExpectedEvidence,
    /// Controls of this op (by convention on the op's first case), tied at
    /// the same evidence level as the case.
    pub controls: Vec<NegativeControl>,
}

impl OpCase {
    /// A case whose tie must be exact.
    pub fn exact(
        op: &'static str,
        config: impl Into<String>,
        layer: impl CertLayer + 'static,
        input: &[i64],
    ) -> Self {
        Self::new(op, config, layer, input, ExpectedEvidence::Exact)
    }

    /// A case tied in f64 (a transcendental op is on the path).
    pub fn f64(
        op: &'static str,
        config: impl Into<String>,
        layer: impl CertLayer + 'static,
        input: &[i64],
    ) -> Self {
        Self::new(op, config, layer, input, ExpectedEvidence::F64)
    }

    pub fn new(
        op: &'static str,
        config: impl Into<String>,
        layer: impl CertLayer + 'static,
        input: &[i64],
        expected_evidence: ExpectedEvidence,
    ) -> Self {
        OpCase {
            op,
            config: config.into(),
            layer: Box::new(layer),
            input: TensorType::f32(input.to_vec()),
            expected_evidence,
            controls: Vec::new(),
        }
    }

    /// The case with `controls` attached.
    pub fn with_controls(mut self, controls: Vec<NegativeControl>) -> Self {
        self.controls.extend(controls);
        self
    }
}

/// Every op configuration, grouped by family.
pub fn catalog() -> Vec<OpCase> {
    let mut cases = activation::catalog();
    for more in [
        conv::catalog,
        dense::catalog,
        pool::catalog,
        norm::catalog,
        loss::catalog,
        attention::catalog,
        se::catalog,
        scale::catalog,
    ] {
        cases.extend(more());
    }
    cases
}
