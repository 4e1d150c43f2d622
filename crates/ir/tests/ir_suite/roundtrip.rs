//! Round trips over random well-typed modules: each verifies, parsing its
//! printed text gives back the same module, and printing that again gives
//! the same text.

use ir::parse::parse_module;
use ir::print::print_module;
use ir::testgen::random_module;
use ir::verify_module;
use proptest::prelude::*;

/// Structural equality; `DenseData`'s `==` is bitwise (NaN equals NaN, -0.0 differs from 0.0).
fn same_module(a: &ir::Module, b: &ir::Module) -> bool {
    a == b
}

fn check_roundtrip(seed: u64, max_ops: usize) -> Result<(), TestCaseError> {
    let m = random_module(seed, max_ops);
    if let Err(e) = verify_module(&m) {
        return Err(TestCaseError::fail(format!(
            "seed {seed}: generated module does not verify: {e}"
        )));
    }
    let text = print_module(&m);
    let parsed = match parse_module(&text, "roundtrip.mlir") {
        Ok(p) => p,
        Err(e) => {
            return Err(TestCaseError::fail(format!(
                "seed {seed}: printed text does not parse: {e}\n{text}"
            )))
        }
    };
    if let Err(e) = verify_module(&parsed) {
        return Err(TestCaseError::fail(format!(
            "seed {seed}: parsed module does not verify: {e}\n{text}"
        )));
    }
    if !same_module(&parsed, &m) {
        return Err(TestCaseError::fail(format!(
            "seed {seed}: parse(print(m)) != m\n{text}\nreprinted:\n{}",
            print_module(&parsed)
        )));
    }
    let again = print_module(&parsed);
    prop_assert_eq!(&again, &text, "seed {}: print is not stable", seed);
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(192))]

    #[test]
    fn print_parse_roundtrip(seed in any::<u64>()) {
        check_roundtrip(seed, 12)?;
    }
}

/// Larger bodies at a few fixed seeds (deterministic, so a failure is easy to replay).
#[test]
fn roundtrip_fixed_seeds() {
    for seed in 0..48 {
        check_roundtrip(seed, 30).unwrap_or_else(|e| panic!("{e}"));
    }
}

/// Module equality tells NaN from NaN as equal and -0.0 from 0.0 as different,
/// so the round trip really checks signed zeros and NaNs survive.
#[test]
fn module_equality_is_bitwise_on_constants() {
    use ir::{DenseData, FuncBuilder, Module, OpKind, TensorType, Visibility};
    let build = |v: f64| {
        let mut b = FuncBuilder::new("main", Visibility::Public);
        let c = b
            .push1(
                OpKind::Constant(DenseData::Float(vec![v])),
                &[],
                Some(TensorType::f32(vec![])),
            )
            .unwrap();
        Module {
            name: None,
            attrs: None,
            funcs: vec![b.finish(&[c]).unwrap()],
        }
    };
    assert!(same_module(&build(f64::NAN), &build(f64::NAN)));
    assert!(!same_module(&build(0.0), &build(-0.0)));
    assert!(!same_module(&build(1.0), &build(f64::NAN)));
}
