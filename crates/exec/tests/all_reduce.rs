//! `all_reduce` on the compiled plan, which runs one replica: groups that
//! name another replica are refused as the evaluator refuses them (one
//! replica applying gradient/R would be silently wrong), and with one replica
//! in its only group the collective is the identity. The replica evaluator
//! itself is tested in den's `tests/replica.rs`.

use den::{Tensor, Value};
use exec::Plan;
use ir::*;

fn f32t(shape: &[i64]) -> TensorType {
    TensorType::f32(shape.to_vec())
}

fn module(f: Func) -> Module {
    Module {
        name: None,
        attrs: None,
        funcs: vec![f],
    }
}

fn all_reduce_kind(groups: Vec<Vec<i64>>) -> OpKind {
    OpKind::AllReduce {
        replica_groups: groups,
        channel_id: None,
        use_global_device_ids: false,
    }
}

/// `main(x) = all_reduce(x)` over `groups` with a plain binary region.
fn reduce_module(op: BinaryOp, groups: Vec<Vec<i64>>, shape: &[i64]) -> Module {
    let mut fb = FuncBuilder::new("main", Visibility::Public);
    let x = fb.param(f32t(shape));
    let body = fb.binary_region(op, ElemType::F32).unwrap();
    let y = fb
        .push(all_reduce_kind(groups), &[x], vec![body], None)
        .unwrap()[0];
    module(fb.finish(&[y]).unwrap())
}

fn f32v(data: Vec<f32>) -> Value<f32> {
    Value::Float(Tensor::new(vec![data.len()], data), ElemType::F32)
}

#[test]
fn the_plan_refuses_other_replicas_and_runs_one_replica_as_the_identity() {
    let m = reduce_module(BinaryOp::Add, vec![vec![0, 1]], &[1]);
    let mut plan = Plan::compile(&m, "main").unwrap();
    let e = plan.run(vec![f32v(vec![3.0])]).unwrap_err();
    assert!(e.message.contains("only 1 replica"), "{e}");
    let single = reduce_module(BinaryOp::Add, vec![vec![0]], &[1]);
    let mut plan = Plan::compile(&single, "main").unwrap();
    let out = plan.run(vec![f32v(vec![3.0])]).unwrap();
    assert_eq!(out[0], f32v(vec![3.0]));
}
