//! The replica evaluator: `all_reduce` combines the operands of the members of
//! each replica group with its region, folding in group order (so results are
//! bit-identical across replicas and equal to the left fold written out here),
//! plain `eval_func` refuses R > 1, and a failing replica ends the run with its
//! own error instead of hanging the others.

use den::{eval_func, eval_replicas, EvalOptions, Tensor, Value};
use ir::testgen::{all_reduce_kind, all_reduce_module, single_func_module};
use ir::*;

fn f32t(shape: &[i64]) -> TensorType {
    TensorType::f32(shape.to_vec())
}

fn f32v(data: Vec<f32>) -> Value<f32> {
    Value::Float(Tensor::new(vec![data.len()], data), ElemType::F32)
}

fn f64v(shape: &[usize], data: Vec<f64>) -> Value<f64> {
    Value::Float(Tensor::new(shape.to_vec(), data), ElemType::F32)
}

fn out_f32(e: &den::Evaluation<f32>, k: usize) -> Vec<f32> {
    e.outputs[k].as_float().unwrap().data.clone()
}

fn out_f64(e: &den::Evaluation<f64>, k: usize) -> Vec<f64> {
    e.outputs[k].as_float().unwrap().data.clone()
}

fn generic(replicas: usize) -> EvalOptions {
    EvalOptions {
        fast: false,
        record_margins: false,
        replicas,
    }
}

#[test]
fn two_replicas_sum_their_operands() {
    let m = all_reduce_module(BinaryOp::Add, vec![vec![0, 1]], &[3]);
    let a = vec![1.5f32, -2.0, 0.25];
    let b = vec![0.5f32, 7.0, -0.125];
    let ev = eval_replicas(
        &m,
        "main",
        vec![vec![f32v(a.clone())], vec![f32v(b.clone())]],
        &generic(1),
    )
    .unwrap();
    assert_eq!(ev.len(), 2);
    let want: Vec<f32> = a.iter().zip(&b).map(|(x, y)| x + y).collect();
    assert_eq!(out_f32(&ev[0], 0), want);
    assert_eq!(out_f32(&ev[1], 0), want);
}

/// f32 addition is not associative: 1e8 + (−1e8) + 1 is 1 folded left to
/// right and 0 folded the other way. Every replica gets the left fold over
/// replica order, bit for bit.
#[test]
fn the_fold_is_in_replica_order_and_identical_on_every_replica() {
    let m = all_reduce_module(BinaryOp::Add, vec![vec![0, 1, 2]], &[2]);
    let vals = [vec![1e8f32, 1.0], vec![-1e8f32, 1e8], vec![1.0f32, -1e8]];
    let left = |k: usize| (vals[0][k] + vals[1][k]) + vals[2][k];
    let right = |k: usize| vals[0][k] + (vals[1][k] + vals[2][k]);
    assert_ne!(left(0), right(0), "the case must discriminate the order");
    let want = vec![left(0), left(1)];
    for fast in [false, true] {
        let opts = EvalOptions { fast, ..generic(3) };
        let ev = eval_replicas(
            &m,
            "main",
            vals.iter().map(|v| vec![f32v(v.clone())]).collect(),
            &opts,
        )
        .unwrap();
        for (r, e) in ev.iter().enumerate() {
            assert_eq!(out_f32(e, 0), want, "replica {r}, fast {fast}");
        }
    }
}

#[test]
fn replica_groups_partition_the_replicas() {
    let m = all_reduce_module(BinaryOp::Maximum, vec![vec![0, 2], vec![3, 1]], &[2]);
    let vals = [[1.0, 9.0], [4.0, -1.0], [3.0, 2.0], [0.5, 5.0]];
    let ev = eval_replicas(
        &m,
        "main",
        vals.iter().map(|v| vec![f64v(&[2], v.to_vec())]).collect(),
        &generic(4),
    )
    .unwrap();
    let group_a = vec![3.0, 9.0]; // replicas 0 and 2
    let group_b = vec![4.0, 5.0]; // replicas 3 and 1
    assert_eq!(out_f64(&ev[0], 0), group_a);
    assert_eq!(out_f64(&ev[2], 0), group_a);
    assert_eq!(out_f64(&ev[1], 0), group_b);
    assert_eq!(out_f64(&ev[3], 0), group_b);
}

/// A region that is not a plain binary op (acc + 2·next) runs element by
/// element, in group order: the result is r0 + 2·r1 + 2·r2, not symmetric.
#[test]
fn a_general_region_folds_in_group_order() {
    let mut fb = FuncBuilder::new("main", Visibility::Public);
    let x = fb.param(f32t(&[2]));
    let s = TensorType::scalar(ElemType::F32);
    let body = fb
        .region(&[s.clone(), s.clone()], |b, a| {
            let two = b.splat(2.0, s.clone());
            let t = b.binary(BinaryOp::Multiply, two, a[1])?;
            Ok(vec![b.binary(BinaryOp::Add, a[0], t)?])
        })
        .unwrap();
    let y = fb
        .push(all_reduce_kind(vec![vec![2, 0, 1]]), &[x], vec![body], None)
        .unwrap()[0];
    let m = single_func_module(fb.finish(&[y]).unwrap());
    let vals = [[1.0, 10.0], [100.0, 1000.0], [3.0, 5.0]];
    let ev = eval_replicas(
        &m,
        "main",
        vals.iter().map(|v| vec![f64v(&[2], v.to_vec())]).collect(),
        &generic(3),
    )
    .unwrap();
    // group order 2, 0, 1
    let want: Vec<f64> = (0..2)
        .map(|k| vals[2][k] + 2.0 * vals[0][k] + 2.0 * vals[1][k])
        .collect();
    for e in &ev {
        assert_eq!(out_f64(e, 0), want);
    }
}

/// Several collectives in a row, with work in between, many times over: the
/// exchange keeps the rounds apart.
#[test]
fn consecutive_collectives_stay_in_step() {
    let mut fb = FuncBuilder::new("main", Visibility::Public);
    let x = fb.param(f32t(&[5]));
    let mut v = x;
    for _ in 0..4 {
        let body = fb.binary_region(BinaryOp::Add, ElemType::F32).unwrap();
        let s = fb
            .push(
                all_reduce_kind(vec![vec![0, 1, 2, 3]]),
                &[v],
                vec![body],
                None,
            )
            .unwrap()[0];
        let c = fb.splat(0.5, f32t(&[5]));
        let h = fb.binary(BinaryOp::Multiply, s, c).unwrap();
        v = fb.binary(BinaryOp::Add, h, x).unwrap();
    }
    let m = single_func_module(fb.finish(&[v]).unwrap());
    let inputs: Vec<Vec<f64>> = (0..4)
        .map(|r| (0..5).map(|k| (r * 5 + k) as f64 * 0.25 - 2.0).collect())
        .collect();
    // The same recurrence written out: v ← ½·Σ_r v_r + x_r.
    let mut want = inputs.clone();
    for _ in 0..4 {
        let sum: Vec<f64> = (0..5).map(|k| want.iter().map(|w| w[k]).sum()).collect();
        for (r, w) in want.iter_mut().enumerate() {
            for k in 0..5 {
                w[k] = 0.5 * sum[k] + inputs[r][k];
            }
        }
    }
    for _ in 0..25 {
        let ev = eval_replicas(
            &m,
            "main",
            inputs.iter().map(|d| vec![f64v(&[5], d.clone())]).collect(),
            &generic(4),
        )
        .unwrap();
        for (r, e) in ev.iter().enumerate() {
            assert_eq!(out_f64(e, 0), want[r], "replica {r}");
        }
    }
}

#[test]
fn plain_eval_func_refuses_more_than_one_replica() {
    let m = all_reduce_module(BinaryOp::Add, vec![vec![0, 1]], &[1]);
    let e = eval_func(&m, "main", vec![f64v(&[1], vec![1.0])], &generic(2)).unwrap_err();
    assert!(e.message.contains("eval_replicas"), "{e}");
    // One replica running a step whose groups name replica 1 would silently
    // apply gradient/R: refused by the evaluator (and by the compiled plan,
    // exec's tests/exec_suite/all_reduce.rs).
    let e = eval_func(&m, "main", vec![f64v(&[1], vec![3.0])], &generic(1)).unwrap_err();
    assert!(e.message.contains("only 1 replica"), "{e}");
    // With one replica in its only group the collective is the identity.
    let single = all_reduce_module(BinaryOp::Add, vec![vec![0]], &[1]);
    let ev = eval_func(&single, "main", vec![f64v(&[1], vec![3.0])], &generic(1)).unwrap();
    assert_eq!(out_f64(&ev, 0), vec![3.0]);
}

/// Replica 1 gets an input of the wrong shape and fails before the
/// collective; replica 0, waiting there, is released and the error returned
/// is replica 1's.
#[test]
fn a_failing_replica_ends_the_run_with_its_own_error() {
    let m = all_reduce_module(BinaryOp::Add, vec![vec![0, 1]], &[2]);
    let e = eval_replicas(
        &m,
        "main",
        vec![
            vec![f64v(&[2], vec![1.0, 2.0])],
            vec![f64v(&[3], vec![1.0, 2.0, 3.0])],
        ],
        &generic(2),
    )
    .unwrap_err();
    assert!(e.message.contains("input 0 has type"), "{e}");
}

#[test]
fn bad_replica_groups_and_counts_are_errors() {
    let missing = all_reduce_module(BinaryOp::Add, vec![vec![0, 1]], &[1]);
    let three = || {
        (0..3)
            .map(|_| vec![f64v(&[1], vec![1.0])])
            .collect::<Vec<_>>()
    };
    let e = eval_replicas(&missing, "main", three(), &generic(3)).unwrap_err();
    assert!(e.message.contains("replica 2 appears 0 times"), "{e}");
    let out_of_range = all_reduce_module(BinaryOp::Add, vec![vec![0, 1, 5]], &[1]);
    let e = eval_replicas(&out_of_range, "main", three(), &generic(3)).unwrap_err();
    assert!(e.message.contains("names replica 5"), "{e}");
    let e = eval_replicas(&missing, "main", three(), &generic(2)).unwrap_err();
    assert!(e.message.contains("3 replica input lists"), "{e}");
    let e = eval_replicas::<f64>(&missing, "main", vec![], &generic(1)).unwrap_err();
    assert!(e.message.contains("at least 1 replica"), "{e}");
}
