//! The host loop with R replicas on the native engine (`den::eval_replicas`):
//! for a net without batch norm, an update at 2 replicas × B equals an update
//! at 1 × 2B from the same state within f32 rounding (the mean of the shard
//! means IS the mean), at two successive states; for a batch-BN net, two identical shards give exactly the one-shard
//! step; and the two shape-preserving DP bugs are caught: a sum without ÷R
//! breaks the identity, and a step without the cross-replica mean makes the
//! replicas disagree, which the native session refuses.

use crate::common::*;
use ir::OpKind;
use layers::trainstep::SlotKind;
use train::{Session, TrainConfig};

/// tiny.toml with its batch-norm layers removed, written into `dir`.
fn no_bn_net(dir: &std::path::Path) -> String {
    let text = std::fs::read_to_string(tiny_net()).unwrap();
    let mut blocks = text.split("[[layers]]");
    let head = blocks.next().unwrap().replace("tiny-bbn", "tiny-nobn");
    let kept: Vec<&str> = blocks.filter(|b| !b.contains("batch_norm")).collect();
    let out = format!("{head}[[layers]]{}", kept.join("[[layers]]"));
    let p = dir.join("tiny-nobn.toml");
    std::fs::write(&p, out).unwrap();
    p.display().to_string()
}

fn config(d: &std::path::Path, net: String, batch: usize, replicas: usize) -> TrainConfig {
    TrainConfig {
        net,
        optimizer: "sgd".into(),
        batch,
        replicas,
        lr: 0.05,
        ..tiny_config(d)
    }
}

/// ‖a − b‖ / ‖b‖ over all tensors of a state component.
fn normwise(a: &[Vec<f32>], b: &[Vec<f32>]) -> f64 {
    let (mut d, mut n) = (0f64, 0f64);
    for (x, y) in a.iter().zip(b) {
        for (p, q) in x.iter().zip(y) {
            d += ((p - q) as f64).powi(2);
            n += (*q as f64).powi(2);
        }
    }
    (d / n).sqrt()
}

/// Two updates of `s`, each from the state `reference` had before its own
/// update (so each comparison is of ONE step from one state: a free-running
/// pair drifts apart through ReLU/pool decisions that a 1e-9 difference can
/// flip); returns the worst θ norm-wise and loss relative differences.
fn two_steps_from(reference: &mut Session, s: &mut Session) -> (f64, f64) {
    let (mut theta, mut loss) = (0f64, 0f64);
    for _ in 0..2 {
        s.state = reference.state.clone();
        let a = reference.train_step().unwrap().loss;
        let b = s.train_step().unwrap().loss;
        theta = theta.max(normwise(&s.state.params, &reference.state.params));
        loss = loss.max(((a - b) / a).abs());
    }
    (theta, loss)
}

/// Replaces every use of a `divide` whose numerator is an `all_reduce` result
/// by the `all_reduce` itself: the replica SUM reaches the optimizer.
fn drop_division_by_r(s: &mut Session) -> usize {
    let f = &mut s.step.module.funcs[0];
    let mut reduced = std::collections::HashSet::new();
    let mut rewire = std::collections::HashMap::new();
    for op in &f.body.ops {
        match op.kind {
            OpKind::AllReduce { .. } => {
                reduced.insert(op.results[0].0);
            }
            OpKind::Binary(ir::BinaryOp::Divide) if reduced.contains(&op.operands[0]) => {
                rewire.insert(op.results[0].0, op.operands[0]);
            }
            _ => {}
        }
    }
    for op in &mut f.body.ops {
        for x in &mut op.operands {
            if let Some(&y) = rewire.get(x) {
                *x = y;
            }
        }
    }
    rewire.len()
}

#[test]
fn two_replicas_of_b_equal_one_replica_of_2b_without_batch_norm() {
    let d = temp_dir("dp-identity");
    write_quadrant_idx(&d, 32, 8);
    let net = no_bn_net(&d);
    let mut one = Session::new(config(&d, net.clone(), 8, 1)).unwrap();
    let mut two = Session::new(config(&d, net.clone(), 8, 2)).unwrap();
    assert_eq!(two.shard_batch(), 4);
    let func = &two.step.signature.func;
    assert!(func.contains("dp4x2"), "{func}");
    let (theta, loss) = two_steps_from(&mut one, &mut two);
    eprintln!("2×4 vs 1×8, one SGD update from each of 2 states: θ norm-wise {theta:.2e}, loss relative {loss:.2e}");
    assert!(theta <= 1e-6, "θ differs norm-wise by {theta:e}");
    assert!(loss <= 1e-6, "losses differ by {loss:e} relative");
    assert_eq!(
        two.replica_divergence, 0.0,
        "native replicas share θ' bit for bit"
    );
    assert!(two.step_exec().unwrap().describe().contains("2 replicas"));

    // Negative control: the replica sum without ÷R (shape-preserving) is off
    // by the whole update, far outside the identity's tolerance.
    let mut one = Session::new(config(&d, net.clone(), 8, 1)).unwrap();
    let mut summed = Session::new(config(&d, net, 8, 2)).unwrap();
    assert!(
        drop_division_by_r(&mut summed) > 0,
        "no all_reduce ÷ R found"
    );
    let (off, _) = two_steps_from(&mut one, &mut summed);
    eprintln!("sum-not-mean control: θ norm-wise {off:.2e}");
    assert!(off > 1e-3, "a sum without ÷R passed the identity ({off:e})");
}

#[test]
fn duplicated_shards_give_the_one_shard_step_with_batch_norm() {
    let d = temp_dir("dp-dup");
    write_quadrant_idx(&d, 16, 4);
    let mut one = Session::new(config(&d, tiny_net(), 4, 1)).unwrap();
    let mut two = Session::new(config(&d, tiny_net(), 8, 2)).unwrap();
    // Feed both replicas the one-replica run's batch: x and θ are the same,
    // BN statistics are per replica, and (g + g) / 2 = g exactly.
    let args = {
        let sig = &one.step.signature;
        let k = one.net.classes as usize;
        let mut onehot = vec![0f32; 4 * k];
        for r in 0..4 {
            onehot[r * k + r % k] = 1.0;
        }
        let xs: Vec<f32> = (0..sig.inputs[0].ty.num_elements() as usize)
            .map(|i| ((i * 37 % 101) as f32 - 50.0) / 25.0)
            .collect();
        let st = &one.state;
        let (mut th, mut mm, mut vv) = (st.params.iter(), st.m.iter(), st.v.iter());
        let mut rm = st.running.iter().map(|p| &p.0);
        let mut rv = st.running.iter().map(|p| &p.1);
        sig.inputs
            .iter()
            .map(|s| {
                let data = match s.kind {
                    SlotKind::Images => xs.clone(),
                    SlotKind::Param => th.next().unwrap().clone(),
                    SlotKind::M => mm.next().unwrap().clone(),
                    SlotKind::V => vv.next().unwrap().clone(),
                    SlotKind::Lr => vec![0.05],
                    SlotKind::Bc1 | SlotKind::Bc2 => vec![1.0],
                    SlotKind::RunningMean => rm.next().unwrap().clone(),
                    SlotKind::RunningVar => rv.next().unwrap().clone(),
                    SlotKind::OneHot => onehot.clone(),
                    other => unreachable!("{other:?}"),
                };
                engines::host::HostTensor::f32(s.ty.shape.clone(), data)
            })
            .collect::<Vec<_>>()
    };
    let single = one.step_exec().unwrap().run_one(args.clone()).unwrap();
    let dup = two.step_exec().unwrap().run(&[args.clone(), args]).unwrap();
    assert_eq!(dup[0], single, "replica 0 of a duplicated batch");
    assert_eq!(dup[1], single, "replica 1 of a duplicated batch");
}

#[test]
fn a_step_without_the_cross_replica_mean_is_refused_on_native() {
    let d = temp_dir("dp-nomean");
    write_quadrant_idx(&d, 16, 4);
    let mut s = Session::new(config(&d, tiny_net(), 8, 2)).unwrap();
    // The one-replica render at the shard batch: the same signature, no
    // all_reduce, so each replica steps with its own shard's gradient.
    let net = s.net.clone();
    let opts = layers::trainstep::StepOptions::new(s.optimizer);
    let plain = layers::trainstep::render_step(&net, 4, &opts)
        .unwrap()
        .module;
    let mut plain_func = plain.funcs[0].clone();
    plain_func.name = s.step.signature.func.clone();
    s.step.module.funcs[0] = plain_func;
    let e = s.train_step().unwrap_err();
    assert!(e.message().contains("replicas disagree"), "{e}");
    assert!(matches!(e, train::TrainError::Run(_)), "{e:?}");
}
