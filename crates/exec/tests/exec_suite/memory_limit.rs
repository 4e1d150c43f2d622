//! The memory limit before allocation: the generic evaluator and a compiled
//! plan both refuse a module holding a tensor over `ir::limits::max_bytes()`
//! (default 16 GiB) with the op and its line, instead of aborting in the
//! allocator; the same programs at a small size still run.

use den::{eval_func, EvalOptions, Tensor, Value};
use exec::Plan;
use ir::parse::parse_module;

fn module(src: &str) -> ir::Module {
    let m = parse_module(src, "t.mlir").expect("parses");
    ir::verify::verify_module(&m).expect("verifies");
    m
}

fn splat(n: &str) -> ir::Module {
    let t = format!("tensor<{n}xf32>");
    module(&format!(
        "func.func @main() -> {t} {{\n  %0 = stablehlo.constant dense<1.5> : {t}\n  return %0 : {t}\n}}\n"
    ))
}

fn broadcast(n: &str) -> ir::Module {
    let t = format!("tensor<{n}x{n}xf32>");
    module(&format!(
        "func.func @main(%a: tensor<f32>) -> {t} {{\n  %0 = stablehlo.broadcast_in_dim %a, dims = [] : (tensor<f32>) -> {t}\n  return %0 : {t}\n}}\n"
    ))
}

fn scalar(x: f32) -> Value<f32> {
    Value::Float(Tensor::new(vec![], vec![x]), ir::ElemType::F32)
}

#[test]
fn the_evaluator_refuses_a_1e11_element_splat_before_allocating() {
    let e = eval_func::<f32>(
        &splat("100000000000"),
        "main",
        vec![],
        &EvalOptions::default(),
    )
    .expect_err("refused");
    assert_eq!((e.op, e.line), ("stablehlo.constant", Some(2)));
    assert!(e.message.contains("400.0 GB"), "{e}");
    assert!(e.message.contains("--max-memory"), "{e}");
    // f64 evaluation counts 8 bytes per element.
    let e = eval_func::<f64>(
        &splat("3000000000"),
        "main",
        vec![],
        &EvalOptions::default(),
    )
    .expect_err("24 GB in f64");
    assert!(e.message.contains("24.0 GB"), "{e}");
    let ok = eval_func::<f32>(&splat("3"), "main", vec![], &EvalOptions::default()).expect("runs");
    assert_eq!(ok.outputs[0].as_float().unwrap().data, vec![1.5; 3]);
}

#[test]
fn a_plan_refuses_a_broadcast_to_1e6_by_1e6_before_allocating() {
    let e = Plan::compile(&broadcast("1000000"), "main")
        .err()
        .expect("refused");
    assert_eq!((e.op, e.line), ("stablehlo.broadcast_in_dim", Some(2)));
    assert!(e.message.contains("4.0 TB (4000000000000 bytes)"), "{e}");
    let mut p = Plan::compile(&broadcast("2"), "main").expect("compiles");
    let out = p.run(vec![scalar(2.5)]).expect("runs");
    assert_eq!(out[0].as_float().unwrap().data, vec![2.5; 4]);
}
