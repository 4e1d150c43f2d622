//! `check-vjp` through the special functions: the `jax.vjp`
//! backward of f(x, y) = atan2(y, x)·lgamma(x² + ½) + digamma(cosh x + ¼) +
//! asinh(y)·sinh(y/2) (JAX differentiates with x/(x²+y²), digamma, sinh,
//! polygamma(1, ·), rsqrt, cosh), both exported by jax 0.10.2, is certified;
//! the same backward with lgamma's derivative `digamma` planted as `lgamma`
//! (same shapes, one token) is refuted.
//!
//! (erf_inv is left out: JAX's backward multiplies by √π/2 rounded to f32,
//! 1.4e-8 relative off the true derivative, which the f64 tolerance refutes.)

use cert::pair::{check_pair, merge_pair, PairReport};
use cert::{Evidence, TieOptions, Verdict};
use ir::Module;

fn data(name: &str) -> Module {
    let path = format!(
        "{}/tests/cert_suite/data/{name}",
        env!("CARGO_MANIFEST_DIR")
    );
    let text = std::fs::read_to_string(&path).expect(&path);
    let m = ir::parse::parse_module(&text, name).unwrap_or_else(|e| panic!("{name}: {e}"));
    ir::verify_module(&m).unwrap_or_else(|e| panic!("{name}: {e}"));
    m
}

fn check(fwd: &Module, bwd: &Module) -> PairReport {
    let pair = merge_pair(fwd, bwd, None, None).expect("merge");
    check_pair(&pair, None, &TieOptions::default()).expect("well-formed pair")
}

#[test]
fn jax_vjp_through_special_functions_is_certified_and_a_planted_bug_refuted() {
    let fwd = data("special.fwd.mlir");
    let ok = check(&fwd, &data("special.jax.mlir"));
    assert!(ok.certified(), "{:?}", ok.tie.verdict);
    // Not rational (lgamma, digamma, …): f64 dual evidence, not exact.
    assert!(
        matches!(ok.tie.evidence, Evidence::F64 { .. }),
        "{}",
        ok.tie.evidence
    );

    let bad = check(&fwd, &data("special.bug.mlir"));
    match &bad.tie.verdict {
        // Only x reaches lgamma: the refutation names its cotangent.
        Verdict::Refuted { block, detail } => {
            assert_eq!(block, "da0", "{detail}");
        }
        v => panic!("the planted lgamma-for-digamma bug was not refuted: {v:?}"),
    }
}
