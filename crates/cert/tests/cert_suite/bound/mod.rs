//! Soundness tests of `cert::bound`, and the helpers its two methods' tests
//! share: random f32 points, the two f32 orders every bound must contain
//! (den's generic evaluator: sequential f32 sums; the compiled executor:
//! blocked kernels), the exact reference (den's rationals) and the escape
//! count of a report against them.

mod adjoint;
mod box_method;

use cert::bound::{evaluate_f32, evaluate_f64, BoundReport};
use den::{eval_func, EvalOptions, Exact, Scalar, Tensor, Value};
use ir::rng::Rng;
use ir::{ElemType, Module};

pub fn module(text: &str) -> Module {
    ir::parse::parse_module(text, "test.mlir").expect("parses")
}

/// A random f32 tensor: normal values times `scale`·2^k with k uniform in
/// [−spread, spread] (mixed magnitudes make cancellation and long sums).
pub fn sample(rng: &mut Rng, shape: &[usize], scale: f64, spread: i32) -> Value<f64> {
    let n: usize = shape.iter().product();
    let data = (0..n)
        .map(|_| {
            let k = if spread == 0 {
                0
            } else {
                (rng.next_u64() % (2 * spread as u64 + 1)) as i32 - spread
            };
            (rng.normal() * scale * 2f64.powi(k)) as f32 as f64
        })
        .collect();
    Value::Float(Tensor::new(shape.to_vec(), data), ElemType::F32)
}

/// The compiled f32 executor's outputs (its blocked kernels' orders).
pub fn exec_f32(m: &Module, func: &str, inputs: &[Value<f64>]) -> Vec<Vec<f64>> {
    let mut plan = exec::Plan::compile(m, func).expect("compiles");
    plan.run(cert::bound::to_f32_values(inputs))
        .expect("runs")
        .into_iter()
        .filter_map(|v| {
            v.into_float()
                .map(|t| t.data.iter().map(|&x| x as f64).collect())
        })
        .collect()
}

/// The f32 runs every bound must contain: the generic evaluator's
/// sequential order and the executor's.
pub fn f32_runs(m: &Module, func: &str, inputs: &[Value<f64>]) -> [Vec<Vec<f64>>; 2] {
    [
        evaluate_f32(m, func, inputs).unwrap(),
        exec_f32(m, func, inputs),
    ]
}

/// The exact (rational) outputs, rounded to f64 once: within 2⁻⁵³ relative
/// of the real value, far below any f32 rounding bound.
pub fn exact(m: &Module, func: &str, inputs: &[Value<f64>]) -> Vec<Vec<f64>> {
    let vals: Vec<Value<Exact>> = inputs
        .iter()
        .map(|v| match v {
            Value::Float(t, e) => Value::Float(t.map(|&x| Exact::from_f64(x).unwrap()), *e),
            Value::Int(t, e) => Value::Int(t.clone(), *e),
        })
        .collect();
    let o = EvalOptions {
        fast: false,
        ..Default::default()
    };
    eval_func::<Exact>(m, func, vals, &o)
        .expect("exact evaluation")
        .outputs
        .into_iter()
        .map(|v| {
            v.into_float()
                .unwrap()
                .data
                .iter()
                .map(|x| x.to_f64())
                .collect()
        })
        .collect()
}

/// Elements of the two f32 runs farther from the reference (`exact`
/// rationals where `rational`, else f64) than their bound, the reference's
/// own error allowed for by 2⁻⁵⁰ relative.
pub fn escapes(r: &BoundReport, m: &Module, func: &str, x: &[Value<f64>], rational: bool) -> usize {
    let reference = if rational {
        exact(m, func, x)
    } else {
        evaluate_f64(m, func, x).unwrap()
    };
    let mut bad = 0;
    for runs in f32_runs(m, func, x) {
        for ((t, c), z) in r.outputs.iter().zip(&runs).zip(&reference) {
            bad += c
                .iter()
                .zip(z)
                .zip(&t.err)
                .filter(|((&c, &z), &e)| (c - z).abs() > e + z.abs() * 2f64.powi(-50))
                .count();
        }
    }
    bad
}

/// examples/nets/tiny.toml: every layer kind of the cifar8 family, tiny.
pub fn tiny_net() -> layers::net::NetSpec {
    let path =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/nets/tiny.toml");
    layers::net::NetSpec::load(&path).expect("tiny.toml")
}

/// Elementwise products and sums of random f32 pairs: single roundings,
/// whose errors reach u·|x| for some pairs (the negative controls' target).
pub const ELEMENTWISE: &str = r#"
func.func public @f(%a: tensor<4000xf32>, %b: tensor<4000xf32>) -> (tensor<4000xf32>, tensor<4000xf32>) {
  %0 = stablehlo.multiply %a, %b : tensor<4000xf32>
  %1 = stablehlo.add %a, %b : tensor<4000xf32>
  return %0, %1 : tensor<4000xf32>, tensor<4000xf32>
}
"#;
