//! `all_reduce` on the compiled plan, which runs one replica: groups that
//! name another replica are refused as the evaluator refuses them (one
//! replica applying gradient/R would be silently wrong), and with one replica
//! in its only group the collective is the identity. The replica plan (R
//! replicas over one plan per stage between the collectives) agrees with the
//! replica evaluator bit for bit on elementwise functions, beside its
//! negative control. The replica evaluator itself is tested in den's
//! `tests/den_suite/replica.rs`.

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

/// `(x, w) ↦ (w − ½·Σ_r(x⊙w)/R + Σ_r((Σ_r(x⊙w)/R)²), x, x⊙w, 3)` over R
/// replicas: two rounds of all_reduce (the second reads the first), values
/// carried from stage 0 to the return, an argument returned as it is, and a
/// constant read in two stages.
fn two_round_module(n: i64, replicas: usize) -> ir::Module {
    use ir::testgen::{all_reduce_kind, single_func_module};
    let ty = TensorType::f32(vec![n]);
    let mut fb = FuncBuilder::new("main", Visibility::Public);
    let x = fb.param(ty.clone());
    let w = fb.param(ty.clone());
    let group = vec![(0..replicas as i64).collect::<Vec<_>>()];
    let all_reduce = |fb: &mut FuncBuilder, v| {
        let body = fb.binary_region(BinaryOp::Add, ElemType::F32).unwrap();
        fb.push(all_reduce_kind(group.clone()), &[v], vec![body], None)
            .unwrap()[0]
    };
    let g = fb.binary(BinaryOp::Multiply, x, w).unwrap();
    let s = all_reduce(&mut fb, g);
    let r = fb.splat(replicas as f64, ty.clone());
    let mean = fb.binary(BinaryOp::Divide, s, r).unwrap();
    let half = fb.splat(0.5, ty.clone());
    let step = fb.binary(BinaryOp::Multiply, half, mean).unwrap();
    let moved = fb.binary(BinaryOp::Subtract, w, step).unwrap();
    let sq = fb.binary(BinaryOp::Multiply, mean, mean).unwrap();
    let s2 = all_reduce(&mut fb, sq);
    let out = fb.binary(BinaryOp::Add, moved, s2).unwrap();
    let three = fb.splat(3.0, ty.clone());
    let three_g = fb.binary(BinaryOp::Multiply, three, g).unwrap();
    let three_out = fb.binary(BinaryOp::Multiply, three, out).unwrap();
    single_func_module(fb.finish(&[out, x, g, three, three_g, three_out]).unwrap())
}

fn replica_inputs(n: usize, replicas: usize) -> Vec<Vec<Value<f32>>> {
    let w: Vec<f32> = (0..n).map(|i| 0.25 + i as f32 * 0.37).collect();
    (0..replicas)
        .map(|r| {
            let x: Vec<f32> = (0..n)
                .map(|i| ((i * 7 + r * 13) % 11) as f32 * 0.1 - 0.45)
                .collect();
            vec![f32v(x), f32v(w.clone())]
        })
        .collect()
}

/// The replica evaluator's outputs of `main` in `m` on `inputs`, replica by
/// replica.
fn evaluated_replicas(m: &ir::Module, inputs: Vec<Vec<Value<f32>>>) -> Vec<Vec<Value<f32>>> {
    den::eval_replicas::<f32>(m, "main", inputs, &den::EvalOptions::default())
        .unwrap()
        .into_iter()
        .map(|e| e.outputs)
        .collect()
}

/// The replica plan computes what the replica evaluator computes: on a
/// function of elementwise ops and two rounds of all_reduce, bit for bit on
/// every replica (the same f32 ops, the same fold order), and every replica
/// holds the same collective results.
#[test]
fn the_replica_plan_agrees_with_the_replica_evaluator_bit_for_bit() {
    for replicas in [2, 3] {
        let m = two_round_module(5, replicas);
        let mut plan = exec::ReplicaPlan::compile(&m, "main", replicas).unwrap();
        assert!(
            plan.summary().starts_with("3 stages around 2 all_reduce"),
            "{}",
            plan.summary()
        );
        let inputs = replica_inputs(5, replicas);
        let want = evaluated_replicas(&m, inputs.clone());
        let got = plan.run(inputs.clone()).unwrap();
        assert_eq!(got, want, "{replicas} replicas");
        // Run again: the plans are reused.
        assert_eq!(plan.run(inputs).unwrap(), want);
        for r in 1..replicas {
            assert_eq!(got[r][0], got[0][0], "the reduced result is one value");
            assert_ne!(got[r][1], got[0][1], "x is the replica's own");
        }
    }
}

/// Negative control: a replica plan whose collectives hand each replica its
/// own operand (the one-replica identity, a shape-preserving bug planted
/// with the `fault-injection` hook) fails the comparison above; and what the
/// plan does not take is refused with the reason.
#[test]
fn a_plan_without_the_fold_is_caught_and_untaken_collectives_are_refused() {
    let m = two_round_module(5, 2);
    let inputs = replica_inputs(5, 2);
    let want = evaluated_replicas(&m, inputs.clone());
    let mut bad = exec::ReplicaPlan::compile(&m, "main", 2).unwrap();
    bad.skip_the_fold_for_tests();
    let got = bad.run(inputs.clone()).unwrap();
    assert_ne!(got[0][0], want[0][0], "the control is caught");
    assert_ne!(got[0][0], got[1][0], "and its replicas disagree");
    // Reducers other than add and split replica groups are refused, not
    // folded as one sum.
    let maxed = all_reduce_module(BinaryOp::Maximum, vec![vec![0, 1]], &[3]);
    let e = exec::ReplicaPlan::compile(&maxed, "main", 2).err().unwrap();
    assert!(e.contains("not add"), "{e}");
    let split = all_reduce_module(BinaryOp::Add, vec![vec![0], vec![1]], &[3]);
    let e = exec::ReplicaPlan::compile(&split, "main", 2).err().unwrap();
    assert!(e.contains("more than one replica group"), "{e}");
    let mut p = exec::ReplicaPlan::compile(&m, "main", 2).unwrap();
    let e = p.run(inputs[..1].to_vec()).unwrap_err();
    assert!(e.message.contains("compiled for 2 replicas"), "{e}");
}
