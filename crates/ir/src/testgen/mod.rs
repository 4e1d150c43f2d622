//! Random well-typed modules for property tests (round trips here, evaluator
//! agreement in `den`). Plain Rust with a seeded RNG (`crate::rng`) so any
//! crate's tests can reuse it: a proptest-chosen `u64` seed gives a
//! reproducible module. Test-only: compiled with the `testgen` feature, which
//! the tests that use it enable as a dev-dependency.
//!
//! Every op goes through [`FuncBuilder`], so type inference vets each one as it
//! is built; a generated op that does not type-check is a generator bug and
//! panics with the op's error. The generator reaches every [`OpKind`], edge
//! values in constants (±inf, NaN, −0, subnormals, extremes), unusual
//! attributes (negative padding, dilations, feature/batch groups, permuted
//! dimension numbers) and the verbatim attribute strings JAX exports carry.

use crate::builder::FuncBuilder;
use crate::infer::infer_result_types;
use crate::module::{Block, Func, Module, ValueId, Visibility};
use crate::ops::{
    BinaryOp, CompareDirection, CompareType, ConvAttrs, ConvDims, DenseData, DotDims, GatherAttrs,
    OpKind, ScatterAttrs, ScatterWindowAttrs, TransposeA, UnaryOp, WindowAttrs,
};
use crate::rng::Rng;
use crate::types::{ElemType, TensorType};

/// A random module that verifies: 1–3 functions (`main` first, public; private
/// helpers it may call), each with up to `max_ops` top-level ops.
pub fn random_module(seed: u64, max_ops: usize) -> Module {
    let mut rng = Rng::new(seed);
    let n_helpers = rng.below(3);
    let mut helpers: Vec<Func> = Vec::new();
    for k in 0..n_helpers {
        let vis = if rng.chance(0.8) {
            Visibility::Private
        } else {
            Visibility::Public
        };
        let f = random_func(&mut rng, &format!("helper_{k}"), vis, &helpers, max_ops);
        helpers.push(f);
    }
    let main = random_func(&mut rng, "main", Visibility::Public, &helpers, max_ops);
    let mut funcs = vec![main];
    funcs.extend(helpers);
    Module {
        name: rng
            .chance(0.5)
            .then(|| rng.pick(&["jit_train_step", "cifar8_step"]).to_string()),
        attrs: rng
            .chance(0.3)
            .then(|| "mhlo.num_partitions = 1 : i32, mhlo.num_replicas = 1 : i32".to_string()),
        funcs,
    }
}

/// A random well-typed function named `name` that may call any of `callees`.
pub fn random_func(
    rng: &mut Rng,
    name: &str,
    visibility: Visibility,
    callees: &[Func],
    max_ops: usize,
) -> Func {
    let mut b = FuncBuilder::new(name, visibility);
    let mut pool = Vec::new();
    for _ in 0..rng.below(4) {
        let ty = TensorType::new(rand_shape(rng, 3), rand_elem(rng));
        pool.push(b.param(ty));
    }
    let mut g = Gen {
        rng: rng.clone(),
        b,
        pool,
        callees,
    };
    let n_ops = 1 + g.rng.below(max_ops.max(1));
    for _ in 0..n_ops {
        g.random_op();
    }
    let mut results = vec![*g.pool.last().expect("at least one op ran")];
    for _ in 0..g.rng.below(3) {
        let v = g.rng.pick(&g.pool);
        results.push(v);
    }
    *rng = g.rng.clone();
    let mut f = g.b.finish(&results).expect("func.return is well typed");
    decorate(rng, &mut f);
    f
}

/// Verbatim attribute strings of the kinds JAX exports carry.
const PARAM_ATTRS: [&str; 4] = [
    "mhlo.sharding = \"{replicated}\"",
    "jax.arg_info = \"params['w']\", mhlo.sharding = \"{replicated}\"",
    "mhlo.layout_mode = \"default\"",
    "jax.buffer_donor = true",
];
const RESULT_ATTRS: [&str; 3] = [
    "jax.result_info = \"result[0]\"",
    "jax.result_info = \"[1]\", mhlo.sharding = \"{replicated}\"",
    "mhlo.layout_mode = \"default\"",
];
const OP_ATTRS: [(&str, &str); 3] = [
    ("mhlo.sharding", "\"{replicated}\""),
    ("mhlo.frontend_attributes", "{_xla_compute_type = \"host\"}"),
    ("mhlo.original_value", "\"w.1\""),
];

/// Sprinkle verbatim attributes over params, results, the function and its ops.
fn decorate(rng: &mut Rng, f: &mut Func) {
    for p in &mut f.params {
        if rng.chance(0.3) {
            p.attrs = Some(rng.pick(&PARAM_ATTRS).to_string());
        }
    }
    for r in &mut f.results {
        if rng.chance(0.3) {
            r.attrs = Some(rng.pick(&RESULT_ATTRS).to_string());
        }
    }
    if rng.chance(0.15) {
        f.attrs = Some("jax.uses_shape_polymorphism = false".to_string());
    }
    fn ops(rng: &mut Rng, b: &mut Block) {
        for op in &mut b.ops {
            if !op.kind.is_terminator() && rng.chance(0.1) {
                let (k, v) = rng.pick(&OP_ATTRS);
                op.extra_attrs.push((k.to_string(), v.to_string()));
            }
            for r in &mut op.regions {
                ops(rng, r);
            }
        }
    }
    ops(rng, &mut f.body);
}

fn rand_elem(rng: &mut Rng) -> ElemType {
    match rng.below(20) {
        0..=11 => ElemType::F32,
        12 | 13 => ElemType::BF16,
        14 => ElemType::F64,
        15..=17 => ElemType::I32,
        _ => ElemType::I1,
    }
}

fn rand_shape(rng: &mut Rng, max_rank: usize) -> Vec<i64> {
    let rank = rng.below(max_rank + 1);
    (0..rank)
        .map(|_| if rng.chance(0.01) { 0 } else { rng.range(1, 4) })
        .collect()
}

/// Round `v` to the nearest value of float type `elem` that it truncates to
/// (bf16 by dropping mantissa bits; the result is exactly representable).
fn round_to(v: f64, elem: ElemType) -> f64 {
    match elem {
        ElemType::F64 => v,
        ElemType::F32 => v as f32 as f64,
        ElemType::BF16 => f32::from_bits((v as f32).to_bits() & 0xFFFF_0000) as f64,
        // f16: a multiple of 1/256 with |k| < 2048 has at most 11 significant bits.
        _ => ((v * 256.0).round().clamp(-2047.0, 2047.0)) / 256.0,
    }
}

fn rand_float(rng: &mut Rng, elem: ElemType) -> f64 {
    let (tiny, subnormal, huge) = match elem {
        ElemType::F64 => (f64::MIN_POSITIVE, 5e-324, f64::MAX),
        ElemType::F32 => (
            f32::MIN_POSITIVE as f64,
            f32::from_bits(1) as f64,
            f32::MAX as f64,
        ),
        ElemType::BF16 => (
            f32::MIN_POSITIVE as f64,
            f32::from_bits(0x0001_0000) as f64,
            f32::from_bits(0x7F7F_0000) as f64,
        ),
        _ => (6.103515625e-5, 5.960464477539063e-8, 65504.0),
    };
    match rng.below(16) {
        0 => f64::INFINITY,
        1 => f64::NEG_INFINITY,
        2 => f64::NAN,
        3 => -0.0,
        4 => tiny,
        5 => -subnormal,
        6 => huge,
        7 => -huge,
        8 => rng.pick(&[0.0, 1.0, -1.0, 0.5, 2.0]),
        _ => round_to(rng.signed_unit() * 8.0, elem),
    }
}

fn rand_int(rng: &mut Rng, elem: ElemType) -> i64 {
    let (lo, hi) = match elem {
        ElemType::I1 => (0, 1),
        ElemType::I8 => (i8::MIN as i64, i8::MAX as i64),
        ElemType::UI8 => (0, u8::MAX as i64),
        ElemType::I16 => (i16::MIN as i64, i16::MAX as i64),
        ElemType::UI16 => (0, u16::MAX as i64),
        ElemType::I32 => (i32::MIN as i64, i32::MAX as i64),
        ElemType::UI32 => (0, u32::MAX as i64),
        ElemType::I64 => (i64::MIN, i64::MAX),
        _ => (0, i64::MAX),
    };
    match rng.below(6) {
        0 => lo,
        1 => hi,
        _ => rng.range(lo.max(-5), hi.min(5)),
    }
}

fn scalar_data(rng: &mut Rng, elem: ElemType, n: usize) -> DenseData {
    if elem.is_float() {
        DenseData::Float((0..n).map(|_| rand_float(rng, elem)).collect())
    } else {
        DenseData::Int((0..n).map(|_| rand_int(rng, elem)).collect())
    }
}

/// Prime factors of `n` (n >= 1), for random reshapes.
fn factors(mut n: i64) -> Vec<i64> {
    let mut out = Vec::new();
    let mut p = 2;
    while p * p <= n {
        while n % p == 0 {
            out.push(p);
            n /= p;
        }
        p += 1;
    }
    if n > 1 {
        out.push(n);
    }
    out
}

mod fixtures;
mod library;
mod ops;
mod planned;
mod structured;

pub use fixtures::*;
use ops::Gen;
pub use planned::{Planned, Recipe};

#[cfg(test)]
mod tests {
    use super::*;
    use crate::verify::verify_module;

    #[test]
    fn generated_modules_verify() {
        for seed in 0..300 {
            let m = random_module(seed, 12);
            if let Err(e) = verify_module(&m) {
                panic!("seed {seed}: {e}\n{m:#?}");
            }
        }
    }

    #[test]
    fn planned_programs_verify_and_reach_every_recipe() {
        let mut kinds = std::collections::BTreeSet::new();
        for seed in 0..300 {
            let p = Planned::draw(seed, 14);
            let m = Module {
                name: None,
                attrs: None,
                funcs: vec![p.build()],
            };
            if let Err(e) = verify_module(&m) {
                panic!("seed {seed}: {e}\n{}", crate::print::print_module(&m));
            }
            kinds.extend(p.recipes.iter().map(|r| Planned::kind_name(r.kind)));
        }
        assert_eq!(kinds.len(), 20, "{kinds:?}");
    }

    #[test]
    fn same_seed_same_module() {
        // Debug text, not `==`: a NaN constant is never `==` to itself.
        let text = |seed| format!("{:?}", random_module(seed, 10));
        assert_eq!(text(7), text(7));
        assert_ne!(text(7), text(8));
    }

    /// Across a few hundred seeds, every op kind shows up at least once.
    #[test]
    fn every_op_kind_is_generated() {
        let mut seen = std::collections::BTreeSet::new();
        for seed in 0..300 {
            for f in random_module(seed, 12).funcs {
                for (name, _) in f.op_counts() {
                    seen.insert(name);
                }
            }
        }
        let want = OpKind::all_names();
        let missing: Vec<&str> = want.into_iter().filter(|n| !seen.contains(n)).collect();
        assert!(missing.is_empty(), "never generated: {missing:?}");
    }
}
