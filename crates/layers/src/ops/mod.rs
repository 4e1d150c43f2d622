//! The op set: one module per op family, and the catalog of every op
//! configuration `certgrad certify --all-ops` ties.

pub mod activation;
pub mod attention;
pub mod conv;
pub mod dense;
pub mod loss;
pub mod norm;
pub mod pool;
pub mod se;

use crate::layer::CertLayer;
use ir::TensorType;

/// One op configuration to certify: the layer, and the input it is tied at.
pub struct OpCase {
    /// Op family name used by `certify --op NAME` (e.g. `conv2d`, `maxpool`).
    pub op: &'static str,
    /// The configuration in words (`k=3 s=2 Symmetric, N=2, 2→3 ch, 7×5`).
    pub config: String,
    pub layer: Box<dyn CertLayer>,
    pub input: TensorType,
}

impl OpCase {
    pub fn new(
        op: &'static str,
        config: impl Into<String>,
        layer: impl CertLayer + 'static,
        input: &[i64],
    ) -> Self {
        OpCase {
            op,
            config: config.into(),
            layer: Box::new(layer),
            input: TensorType::f32(input.to_vec()),
        }
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
    ] {
        cases.extend(more());
    }
    cases
}
