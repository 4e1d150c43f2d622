//! The train/eval drift guard (`check_eval_drift`) on the nets the renderer
//! ships, against the net their eval forward is rendered from
//! (`with_batch_stat_bns_in(Eval)`): cifar8 with batch, per-example and no
//! batch norm, and a narrow ResNet-34 whose blocks switch world, pass; the
//! negative controls — a pool that drifted, an eval forward that kept batch
//! statistics at any one batch norm or block, a train step rendered in the
//! per-example world for a batch-BN net — are caught at the layer they hit.

use cert::net::check_eval_drift;
use layers::net::{by_name, resnet34_width, LayerSpec, MaxPoolSpec, NetSpec};
use layers::ops::norm::BnWorld;

/// The net the eval forward of `net` is rendered from.
fn eval_net(net: &NetSpec) -> NetSpec {
    net.with_batch_stat_bns_in(BnWorld::Eval)
}

/// The layers of `net` holding true-batch norms (batch norms and blocks).
fn batch_stat_layers(net: &NetSpec) -> Vec<String> {
    net.layers
        .iter()
        .filter(|(_, l)| l.bn_world() == Some(BnWorld::Batch))
        .map(|(n, _)| n.clone())
        .collect()
}

/// `net` with the batch norm(s) of `layer` in `world`.
fn with_layer_in(net: &NetSpec, layer: &str, world: BnWorld) -> NetSpec {
    let mut n = net.clone();
    n.layer_mut(layer)
        .expect("layer exists")
        .set_bn_world(world);
    n
}

fn retarget_pool(net: &mut NetSpec, layer: &str) {
    *net.layer_mut(layer).expect("layer exists") = LayerSpec::MaxPool(MaxPoolSpec {
        window: 3,
        stride: 2,
        pad: 1,
    });
}

#[test]
fn train_and_eval_forwards_differ_only_in_the_bn_world() {
    for name in ["cifar8-bbn", "cifar8-bn", "cifar8"] {
        let net = by_name(name).unwrap();
        let r = check_eval_drift(&net, &eval_net(&net), 2).unwrap_or_else(|e| panic!("{e}"));
        // Only true-batch norms switch; per-example ones are compared op by op.
        let switched = batch_stat_layers(&net).len();
        assert_eq!(switched, if name == "cifar8-bbn" { 8 } else { 0 });
        assert_eq!(r.bn_layers, switched, "{name}");
        assert_eq!(r.identical_layers, net.layers.len() - switched, "{name}");
        assert!(r.ops_compared > 0);
    }
}

/// Negative control: an eval forward whose pool drifted to 3×3/s2/p1 (the
/// ResNet-stem convention, same output shape) is caught at that layer.
#[test]
fn drift_guard_catches_a_mismatched_pool() {
    let net = by_name("cifar8-bbn").unwrap();
    let mut drifted = net.clone();
    retarget_pool(&mut drifted, "stage3.pool");
    let e = check_eval_drift(&net, &eval_net(&drifted), 2).unwrap_err();
    assert!(
        e.0.contains("stage3.pool:") && e.0.contains("reduce_window"),
        "{e}"
    );
}

/// Negative controls: an eval forward that kept batch statistics, and a train
/// step rendered in the per-example world for a batch-BN net, are caught at
/// every BN layer (each left alone in the wrong world in turn).
#[test]
fn drift_guard_catches_a_mismatched_bn_world() {
    let net = by_name("cifar8-bbn").unwrap();
    let bns = batch_stat_layers(&net);
    assert_eq!(bns.len(), 8);
    assert!(bns.iter().all(|l| l.contains(".bn")));
    // The logits forward left in the Batch world.
    let stale = net.with_batch_stat_bns_in(BnWorld::Batch);
    let e = check_eval_drift(&net, &stale, 2).unwrap_err();
    assert!(e.0.contains(&format!("{}:", bns[0])), "{e}");
    let per_example = net.with_every_bn_in(BnWorld::PerExample);
    let e = check_eval_drift(&per_example, &eval_net(&net), 2).unwrap_err();
    assert!(e.0.contains(&format!("{}:", bns[0])), "{e}");
    for bn in &bns {
        let stale = with_layer_in(&eval_net(&net), bn, BnWorld::Batch);
        let e = check_eval_drift(&net, &stale, 2).unwrap_err();
        assert!(e.0.contains(&format!("{bn}:")), "{bn}: {e}");
        let wrong_step = with_layer_in(&net, bn, BnWorld::PerExample);
        let e = check_eval_drift(&wrong_step, &eval_net(&net), 2).unwrap_err();
        assert!(e.0.contains(&format!("{bn}:")), "{bn}: {e}");
    }
}

#[test]
fn resnet_drift_guard_sees_every_block_switch_and_nothing_else() {
    let net = resnet34_width(10, (32, 32), 4);
    let r = check_eval_drift(&net, &eval_net(&net), 2).unwrap();
    assert_eq!(r.bn_layers, 1 + 16);
    assert_eq!(r.identical_layers, net.layers.len() - (1 + 16));
    // Negative control: an eval forward that kept batch statistics drifts at
    // the stem BN and at each of the 16 blocks.
    let switching = batch_stat_layers(&net);
    assert_eq!(switching.len(), 1 + 16);
    assert!(switching
        .iter()
        .all(|l| l == "stem.bn" || l.contains(".block")));
    for layer in &switching {
        let stale = with_layer_in(&eval_net(&net), layer, BnWorld::Batch);
        let e = check_eval_drift(&net, &stale, 2).unwrap_err();
        assert!(e.0.contains(&format!("{layer}:")), "{layer}: {e}");
    }
}
