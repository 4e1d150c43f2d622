//! Uniform operands in fused loops: a splat, or a broadcast whose chunk of
//! positions lies in one stride-0 run (batch norm's per-channel statistics
//! over a plane of 1024), is one number per chunk. The loop reads it as a
//! scalar (either side of a binary op or comparison), computes ops of such
//! numbers once (`rsqrt(var + ε)` inside the loop), fills a register only
//! for the ops that need a slice (select, clamp) and writes a uniform value
//! node whole. None of that may change a bit: every elementwise op here is
//! the generic evaluator's f32 op, so plan and evaluator agree exactly, on
//! planes long enough for uniform chunks (32×32) and too short for them
//! (4×4, the per-position path). A loop perturbed by 1e-3 is rejected.

use super::agreement::{generic, random_inputs};
use den::{eval_func, Value};
use exec::Plan;
use ir::{Module, TensorType};

fn module(h: usize) -> Module {
    let t = format!("tensor<2x4x{h}x{h}xf32>");
    let v = "tensor<4xf32>";
    let text = format!(
        r#"func.func public @main(%x: {t}, %mean: {v}, %var: {v}, %gamma: {v}) -> ({t}, {t}, {t}, {t}) {{
  %eps = stablehlo.constant dense<1.000000e-05> : {t}
  %zero = stablehlo.constant dense<0.000000e+00> : {t}
  %lo = stablehlo.constant dense<-2.500000e-01> : {t}
  %mb = stablehlo.broadcast_in_dim %mean, dims = [1] : ({v}) -> {t}
  %vb = stablehlo.broadcast_in_dim %var, dims = [1] : ({v}) -> {t}
  %gb = stablehlo.broadcast_in_dim %gamma, dims = [1] : ({v}) -> {t}
  %ve = stablehlo.add %vb, %eps : {t}
  %ab = stablehlo.abs %ve : {t}
  %is = stablehlo.rsqrt %ab : {t}
  %c = stablehlo.subtract %x, %mb : {t}
  %d = stablehlo.subtract %mb, %x : {t}
  %xh = stablehlo.multiply %c, %is : {t}
  %q = stablehlo.divide %gb, %x : {t}
  %r = stablehlo.maximum %xh, %zero : {t}
  %k = stablehlo.compare GT, %zero, %d, FLOAT : ({t}, {t}) -> tensor<2x4x{h}x{h}xi1>
  %s1 = stablehlo.select %k, %q, %r : tensor<2x4x{h}x{h}xi1>, {t}
  %kt = stablehlo.compare LT, %x, %gb, TOTALORDER : ({t}, {t}) -> tensor<2x4x{h}x{h}xi1>
  %s2 = stablehlo.select %kt, %vb, %zero : tensor<2x4x{h}x{h}xi1>, {t}
  %cl = stablehlo.clamp %lo, %x, %gb : {t}
  %o2 = stablehlo.add %s2, %cl : {t}
  %u = stablehlo.multiply %is, %gb : {t}
  return %s1, %o2, %u, %d : {t}, {t}, {t}, {t}
}}
"#
    );
    let m = ir::parse::parse_module(&text, "uniform.mlir").unwrap();
    ir::verify_module(&m).unwrap();
    m
}

fn inputs(m: &Module, seed: u64) -> Vec<Value<f32>> {
    let params: Vec<TensorType> = m.funcs[0].params.iter().map(|p| p.ty.clone()).collect();
    random_inputs(&params, seed)
}

/// The first output element whose bits differ between plan and evaluator.
fn first_bit_difference(plan: &mut Plan, m: &Module, seed: u64) -> Option<String> {
    let got = plan.run(inputs(m, seed)).unwrap();
    let want = eval_func::<f32>(m, "main", inputs(m, seed), &generic())
        .unwrap()
        .outputs;
    for (i, (g, w)) in got.iter().zip(&want).enumerate() {
        let (Value::Float(g, _), Value::Float(w, _)) = (g, w) else {
            return Some(format!("output {i} is not a float tensor"));
        };
        assert_eq!(g.shape, w.shape);
        for (j, (a, b)) in g.data.iter().zip(&w.data).enumerate() {
            if a.to_bits() != b.to_bits() {
                return Some(format!("output {i}[{j}]: plan {a:e}, evaluator {b:e}"));
            }
        }
    }
    None
}

#[test]
fn uniform_operands_change_no_bit() {
    for h in [32, 4] {
        let m = module(h);
        let mut plan = Plan::compile(&m, "main").unwrap();
        let fused = plan
            .listing()
            .iter()
            .filter(|l| l.contains("fused"))
            .count();
        assert!(fused >= 1, "no fused loop:\n{:#?}", plan.listing());
        for seed in 1..4 {
            assert_eq!(
                first_bit_difference(&mut plan, &m, seed),
                None,
                "{h}×{h}, seed {seed}"
            );
        }
    }
}

#[test]
fn a_perturbed_loop_with_uniform_operands_is_caught() {
    let m = module(32);
    let mut plan = Plan::compile(&m, "main").unwrap();
    assert_eq!(first_bit_difference(&mut plan, &m, 1), None);
    assert!(plan.perturb_first_fused_loop_for_tests(1e-3));
    assert!(
        first_bit_difference(&mut plan, &m, 1).is_some(),
        "the perturbed loop passed"
    );
}
