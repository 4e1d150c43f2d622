//! The host loop with R replicas on the native engine (`exec::ReplicaPlan`:
//! compiled plans between the all_reduces; `den::eval_replicas` is the
//! reference it is compared with):
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

/// The step's arguments for replica `r` of `s` at its current state (images
/// and targets drawn from `salt`, fixed schedule scalars).
fn replica_args(s: &Session, r: usize) -> Vec<engines::host::HostTensor> {
    let sig = &s.step.signature;
    let k = s.net.classes as usize;
    let b = s.shard_batch();
    let st = &s.state;
    let (mut th, mut mm, mut vv) = (st.params.iter(), st.m.iter(), st.v.iter());
    sig.inputs
        .iter()
        .map(|slot| {
            let data = match slot.kind {
                SlotKind::Images => (0..slot.ty.num_elements() as usize)
                    .map(|i| (((i + 17 * r) * 37 % 101) as f32 - 50.0) / 25.0)
                    .collect(),
                SlotKind::Param => th.next().unwrap().clone(),
                SlotKind::M => mm.next().unwrap().clone(),
                SlotKind::V => vv.next().unwrap().clone(),
                SlotKind::Lr => vec![0.05],
                SlotKind::Bc1 | SlotKind::Bc2 => vec![1.0],
                SlotKind::OneHot => {
                    let mut t = vec![0f32; b * k];
                    for row in 0..b {
                        t[row * k + (row + r) % k] = 1.0;
                    }
                    t
                }
                other => unreachable!("{other:?}"),
            };
            engines::host::HostTensor::f32(slot.ty.shape.clone(), data)
        })
        .collect()
}

/// ‖a − b‖ / ‖b‖ of one f32 host tensor against a reference value.
fn normwise_one(a: &engines::host::HostTensor, b: &den::Value<f32>) -> f64 {
    let b = &b.as_float().unwrap().data;
    let a = a.as_f32().unwrap();
    let (mut d, mut n) = (0f64, 0f64);
    for (p, q) in a.iter().zip(b) {
        d += ((p - q) as f64).powi(2);
        n += (*q as f64).powi(2);
    }
    if n > 0.0 {
        (d / n).sqrt()
    } else {
        d.sqrt()
    }
}

/// The native engine runs R = 2 through compiled plans (not the replica
/// evaluator), and computes what the replica evaluator computes on the
/// session's own data-parallel module: every output of every replica within
/// 1e-5 norm-wise (the executor's agreement bound with the evaluator:
/// convolutions and sums accumulate in another order), the replicas' θ'
/// bit-identical. The module is the one the DP certificate ties: the Split
/// identity (2 × B = 1 × 2B, no batch BN) certifies on it in f64.
#[test]
fn native_replicas_run_on_plans_and_agree_with_the_replica_evaluator() {
    let d = temp_dir("dp-plans");
    write_quadrant_idx(&d, 32, 8);
    let net = no_bn_net(&d);
    let mut two = Session::new(config(&d, net, 8, 2)).unwrap();
    let how = two.step_exec().unwrap().describe();
    assert!(how.contains("2 replicas, exec plans"), "{how}");
    let args = vec![replica_args(&two, 0), replica_args(&two, 1)];
    let got = two.step_exec().unwrap().run(&args).unwrap();
    let values: Vec<Vec<den::Value<f32>>> = args
        .iter()
        .map(|a| {
            a.iter()
                .map(|t| t.to_value_f32(ir::ElemType::F32).unwrap())
                .collect()
        })
        .collect();
    let func = two.step.signature.func.clone();
    let want = den::eval_replicas::<f32>(
        &two.step.module,
        &func,
        values,
        &den::EvalOptions::default(),
    )
    .unwrap();
    let mut worst = 0f64;
    for (g, w) in got.iter().zip(&want) {
        for (a, b) in g.iter().zip(&w.outputs) {
            worst = worst.max(normwise_one(a, b));
        }
    }
    eprintln!("replica plans vs replica evaluator: worst output norm-wise {worst:.2e}");
    assert!(worst <= 1e-5, "{worst:e}");
    for i in two.step.signature.output_positions(SlotKind::Param) {
        assert_eq!(got[0][i], got[1][i], "θ' output {i} is one value");
    }

    let so = layers::trainstep::StepOptions {
        replicas: 2,
        ..layers::trainstep::StepOptions::new(two.optimizer)
    };
    let cert = cert::dp::check_dp_step::<f64>(
        &two.net,
        4,
        &so,
        &two.step.module,
        cert::dp::DpIdentity::Split,
        &cert::dp::DpOptions::rounded(7, 1e-12),
    );
    assert!(cert.certified(), "{:?}", cert.verdict);
}

/// k = 4 free-running updates at 2 replicas × 4 and at 1 replica × 8 from the
/// same initial state (no batch BN, so both are the same SGD in exact
/// arithmetic) stay together within what f32 summation order allows. The
/// two runs sum each batch-mean gradient in another order (per shard, then
/// across the 2 shards, against one sum over 8 examples); summing n terms
/// in f32 is exact to γ_n = n·u/(1 − n·u) of Σ|terms| (u = 2⁻²⁴), so each
/// update's gradient differs by at most 2γ_n relative where no cancellation
/// magnifies it, with n = 512 the longest sum of the step (the first conv's
/// weight gradient over 8 examples × 8×8 positions). The θ difference after
/// k updates is then at most 2γ_n · Σ_j ‖θ_j − θ_{j−1}‖ (the sizes of the
/// updates), allowed 8× for cancellation and for the difference carried
/// through later gradients; each loss within 8·2γ_n relative.
#[test]
fn free_running_two_replicas_track_one_replica_within_summation_order() {
    let d = temp_dir("dp-free");
    write_quadrant_idx(&d, 32, 8);
    let net = no_bn_net(&d);
    let mut one = Session::new(config(&d, net.clone(), 8, 1)).unwrap();
    let mut two = Session::new(config(&d, net, 8, 2)).unwrap();
    let u = f64::powi(2.0, -24);
    let n = 512.0;
    let gamma = n * u / (1.0 - n * u);
    let mut moved = 0f64;
    for k in 1..=4 {
        let before = one.state.params.clone();
        let a = one.train_step().unwrap().loss;
        let b = two.train_step().unwrap().loss;
        let step_size = {
            let (mut d2, mut n2) = (0f64, 0f64);
            for (x, y) in one.state.params.iter().zip(&before) {
                for (p, q) in x.iter().zip(y) {
                    d2 += ((p - q) as f64).powi(2);
                    n2 += (*q as f64).powi(2);
                }
            }
            (d2 / n2).sqrt()
        };
        moved += step_size;
        let theta = normwise(&two.state.params, &one.state.params);
        let bound = 8.0 * 2.0 * gamma * moved;
        let loss = ((a - b) / a).abs();
        eprintln!(
            "update {k}: θ norm-wise {theta:.2e} (bound {bound:.2e}), loss relative {loss:.2e} (bound {:.2e})",
            8.0 * 2.0 * gamma
        );
        assert!(theta <= bound, "update {k}: θ {theta:e} > {bound:e}");
        assert!(loss <= 8.0 * 2.0 * gamma, "update {k}: loss {loss:e}");
    }
    assert_eq!(two.replica_divergence, 0.0);
}
