//! `all_reduce` on the compiled plan, which runs one replica: groups that
//! name another replica are refused as the evaluator refuses them (one
//! replica applying gradient/R would be silently wrong), and with one replica
//! in its only group the collective is the identity. The replica evaluator
//! itself is tested in den's `tests/den_suite/replica.rs`.

use den::{Tensor, Value};
use exec::Plan;
use ir::testgen::all_reduce_module;
use ir::*;

fn f32v(data: Vec<f32>) -> Value<f32> {
    Value::Float(Tensor::new(vec![data.len()], data), ElemType::F32)
}

#[test]
fn the_plan_refuses_other_replicas_and_runs_one_replica_as_the_identity() {
    let m = all_reduce_module(BinaryOp::Add, vec![vec![0, 1]], &[1]);
    let mut plan = Plan::compile(&m, "main").unwrap();
    let e = plan.run(vec![f32v(vec![3.0])]).unwrap_err();
    assert!(e.message.contains("only 1 replica"), "{e}");
    let single = all_reduce_module(BinaryOp::Add, vec![vec![0]], &[1]);
    let mut plan = Plan::compile(&single, "main").unwrap();
    let out = plan.run(vec![f32v(vec![3.0])]).unwrap();
    assert_eq!(out[0], f32v(vec![3.0]));
}
