//! The drift guard walks a net's layers by what they hold (`bn_world`), not
//! by their kind: a net file's nested `residual` blocks switch world like the
//! built-in ResNet blocks. Positive: `examples/nets/tiny-resnet.toml`
//! against its eval net. Negative controls, each caught at its block: a
//! nested block left in the Batch world, a nested conv whose padding drifted
//! (symmetric → XLA-SAME: the same shapes at this even input), and a nested
//! batch norm whose ε drifted.

use cert::net::check_eval_drift;
use layers::net::{LayerSpec, NetSpec};
use layers::ops::conv::Padding;
use layers::ops::norm::BnWorld;
use layers::CertLayer;

fn tiny_resnet() -> NetSpec {
    NetSpec::load(std::path::Path::new(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../examples/nets/tiny-resnet.toml"
    )))
    .unwrap()
}

/// The `main` list of the `residual` block `block` of `net`.
fn main_of<'a>(net: &'a mut NetSpec, block: &str) -> &'a mut Vec<(String, LayerSpec)> {
    match net.layer_mut(block).expect("block exists") {
        LayerSpec::Residual(r) => &mut r.main,
        other => panic!("{block} is {other:?}"),
    }
}

#[test]
fn nested_blocks_switch_world_and_drift_is_caught_inside_them() {
    let train = tiny_resnet();
    let eval = train.with_batch_stat_bns_in(BnWorld::Eval);
    let r = check_eval_drift(&train, &eval, 2).unwrap();
    // stem.bn, block1, block2, block3 hold batch norms; stem.conv,
    // stem.relu, gap, fc do not.
    assert_eq!((r.bn_layers, r.identical_layers), (4, 4), "{r:?}");

    let mut stale = eval.clone();
    stale
        .layer_mut("block2")
        .unwrap()
        .set_bn_world(BnWorld::Batch);
    let e = check_eval_drift(&train, &stale, 2).unwrap_err();
    assert!(e.0.contains("block2") && e.0.contains("Batch"), "{e}");

    let mut padded = eval.clone();
    match &mut main_of(&mut padded, "block2")[0].1 {
        LayerSpec::Conv2d(c) => c.padding = Padding::XlaSame,
        other => panic!("{other:?}"),
    }
    assert_eq!(
        padded.chain().unwrap().output_type(&padded.input_type(2)),
        eval.chain().unwrap().output_type(&eval.input_type(2))
    );
    let e = check_eval_drift(&train, &padded, 2).unwrap_err();
    assert!(
        e.0.contains("block2") && e.0.contains("not the train layer"),
        "{e}"
    );

    let mut eps = eval.clone();
    match &mut main_of(&mut eps, "block1")[1].1 {
        LayerSpec::BatchNorm(b) => b.eps = 1e-3,
        other => panic!("{other:?}"),
    }
    let e = check_eval_drift(&train, &eps, 2).unwrap_err();
    assert!(e.0.contains("block1"), "{e}");
}
