//! The IREE engine against the real tools (skipped, loudly, where
//! `iree-compile` is not installed): a small module gives the native engine's
//! results, the compiled `.vmfb` is cached by content (a second prepare is a
//! hit, a changed text is not), and what IREE cannot do is refused clearly.

use engines::engine::{Engine, Prepared};
use engines::host::HostTensor;
use engines::iree::IreeEngine;
use engines::native::NativeEngine;
use std::path::PathBuf;

const STEP: &str = "func.func public @step(%a: tensor<2x3xf32>, %b: tensor<2x3xf32>, %s: tensor<f32>) -> (tensor<2x3xf32>, tensor<f32>) {
  %0 = stablehlo.add %a, %b : tensor<2x3xf32>
  %1 = stablehlo.multiply %s, %s : tensor<f32>
  return %0, %1 : tensor<2x3xf32>, tensor<f32>
}
";

/// The engine with a fresh cache directory, or `None` (with a `SKIPPED:` line)
/// when the tools are absent.
fn engine(tag: &str) -> Option<IreeEngine> {
    match IreeEngine::locate(None) {
        Ok(mut e) => {
            let dir: PathBuf = std::env::temp_dir()
                .join(format!("certgrad-iree-test-{tag}-{}", std::process::id()));
            let _ = std::fs::remove_dir_all(&dir);
            e.cache_dir = dir;
            Some(e)
        }
        Err(err) => {
            crate::skipped(&format!("IREE tools not found ({err})"));
            None
        }
    }
}

fn args() -> Vec<HostTensor> {
    vec![
        HostTensor::f32(vec![2, 3], vec![1.0, 2.0, 3.0, 4.0, 5.0, 6.0]),
        HostTensor::f32(vec![2, 3], vec![0.5, -2.0, 0.25, 1e-3, -5.0, 7.0]),
        HostTensor::f32(vec![], vec![1.5]),
    ]
}

#[test]
fn a_small_module_matches_the_native_engine_and_is_cached() {
    let Some(mut iree) = engine("cache") else {
        return;
    };
    let m = ir::parse::parse_module(STEP, "step.mlir").unwrap();
    let mut first = iree.prepare_iree(STEP, &m, "step", 1).unwrap();
    assert!(!first.compiled.cache_hit, "a fresh cache directory hit");
    assert!(first.compiled.vmfb.is_file());
    let out = first.run_one(args()).unwrap();
    let native = NativeEngine::default()
        .prepare(STEP, &m, "step", 1)
        .unwrap()
        .run_one(args())
        .unwrap();
    // add and multiply are correctly rounded in both: the same bits.
    assert_eq!(out, native);
    assert_eq!(out[1], HostTensor::f32(vec![], vec![2.25]));

    let second = iree.prepare_iree(STEP, &m, "step", 1).unwrap();
    assert!(second.compiled.cache_hit, "the same text compiled twice");
    assert_eq!(second.compiled.vmfb, first.compiled.vmfb);
    let names: Vec<String> = std::fs::read_dir(&iree.cache_dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(
        names.len(),
        1,
        "only the .vmfb stays in the cache: {names:?}"
    );

    // A different text (even by one constant's worth of meaning) is another key.
    let other = STEP.replace("stablehlo.multiply %s, %s", "stablehlo.add %s, %s");
    let m2 = ir::parse::parse_module(&other, "other.mlir").unwrap();
    let third = iree.prepare_iree(&other, &m2, "step", 1).unwrap();
    assert!(!third.compiled.cache_hit);
    assert_ne!(third.compiled.vmfb, first.compiled.vmfb);
    let mut third = third;
    let out = third.run_one(args()).unwrap();
    assert_eq!(out[1], HostTensor::f32(vec![], vec![3.0]));

    // Other flags are another key too.
    iree.flags.push("--iree-opt-level=O1".into());
    let fourth = iree.prepare_iree(STEP, &m, "step", 1).unwrap();
    assert!(!fourth.compiled.cache_hit);
    let _ = std::fs::remove_dir_all(&iree.cache_dir);
}

#[test]
fn replicas_bad_arguments_and_rejected_modules_are_refused_clearly() {
    let Some(mut iree) = engine("refuse") else {
        return;
    };
    let m = ir::parse::parse_module(STEP, "step.mlir").unwrap();
    let e = iree.prepare(STEP, &m, "step", 2).err().unwrap();
    assert!(
        e.0.contains("data-parallel (2 replicas) needs the native or PJRT engine"),
        "{e}"
    );
    let mut p = iree.prepare(STEP, &m, "step", 1).unwrap();
    let mut bad = args();
    bad[2] = HostTensor::f32(vec![1], vec![1.5]);
    let e = p.run_one(bad).unwrap_err();
    assert!(e.0.contains("argument 2 expects tensor<f32>"), "{e}");
    // Text IREE's parser rejects (the module object is fine; the text is not).
    let e = iree
        .prepare(
            &STEP.replace("stablehlo.add", "stablehlo.bogus_op"),
            &m,
            "step",
            1,
        )
        .err()
        .unwrap();
    assert!(e.0.starts_with("iree-compile rejected the module"), "{e}");
    let _ = std::fs::remove_dir_all(&iree.cache_dir);
}
