//! ViT as data and as rendered text: the shipped
//! `examples/nets/vit-tiny.toml` IS the built-in net (same NetSpec, same
//! rendered step), a file's ViT block with a field that cannot be right is
//! refused naming the file, line and field; and the shape check — the
//! forward the certificate's chain is about IS the rendered train forward
//! and the rendered eval forward, which for a net without batch norm are one
//! function — with its negative control (a head LN whose ε drifted in the
//! eval net is not that forward).
//!
//! `CERTGRAD_WRITE_EXAMPLES=1 cargo test -p layers --test vit_nets`
//! rewrites the file (what `certgrad nets vit-tiny --write-file F` writes).

use layers::net::{by_name, vit, LayerSpec, NetSpec, VIT_TINY};
use layers::ops::norm::BnWorld;
use layers::trainstep::{
    forward_prefix, render_eval_forward, render_logits_forward, render_step, Optimizer, StepOptions,
};
use std::path::PathBuf;

fn example(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../examples/nets")
        .join(format!("{name}.toml"))
}

#[test]
fn the_shipped_file_is_the_built_in_net() {
    let net = by_name("vit-tiny").unwrap();
    if std::env::var_os("CERTGRAD_WRITE_EXAMPLES").is_some() {
        net.write(&example("vit-tiny")).unwrap();
    }
    let file = NetSpec::load(&example("vit-tiny")).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(file, net);
    // At a small size (a multiple of the patch) the step text is the same
    // byte for byte.
    let (mut small, mut builtin) = (file.clone(), net.clone());
    small.input = (3, 32, 32);
    builtin.input = (3, 32, 32);
    let opts = StepOptions::new(Optimizer::AdamW);
    let a = ir::print::print_module(&render_step(&small, 2, &opts).unwrap().module);
    let b = ir::print::print_module(&render_step(&builtin, 2, &opts).unwrap().module);
    assert!(a == b, "the file's step differs from the built-in's");
}

#[test]
fn a_vit_field_that_cannot_be_right_is_named_with_its_line() {
    let text = std::fs::read_to_string(example("vit-tiny")).unwrap();
    let bad = text.replacen("heads = 3", "heads = 0", 1);
    let e = NetSpec::from_text(&bad, "v.toml").unwrap_err().to_string();
    assert!(e.contains("v.toml:") && e.contains("heads"), "{e}");
    let bad = text.replacen("eps = 0.00001", "eps = -1.0", 1);
    let e = NetSpec::from_text(&bad, "v.toml").unwrap_err().to_string();
    assert!(e.contains("v.toml:") && e.contains("eps"), "{e}");
    // An omitted convention is an error, not a default.
    let bad = text.replacen("mlp = 768\n", "", 1);
    let e = NetSpec::from_text(&bad, "v.toml").unwrap_err().to_string();
    assert!(e.contains("mlp"), "{e}");
}

fn narrow() -> NetSpec {
    vit(&VIT_TINY, 12, 10, (32, 32), 8)
}

/// Op kinds and result types of a function's top-level ops from `from` on:
/// the function up to SSA numbering.
fn ops_from(f: &ir::Func, from: usize) -> Vec<String> {
    f.body.ops[from..]
        .iter()
        .map(|op| {
            format!(
                "{:?} {:?} {:?}",
                op.kind,
                op.extra_attrs,
                op.results
                    .iter()
                    .map(|(_, t)| t.to_string())
                    .collect::<Vec<_>>()
            )
        })
        .collect()
}

#[test]
fn the_certified_forward_is_the_rendered_train_and_eval_forward() {
    let net = narrow();
    // No batch norm: the eval net IS the train net, and nothing switches.
    assert!(net.bn_sites().unwrap().is_empty());
    assert_eq!(net.with_batch_stat_bns_in(BnWorld::Eval), net);
    assert_eq!(net.with_every_bn_in(BnWorld::Eval), net);
    let eval = render_eval_forward(&net, 2).unwrap();
    let train_logits = render_logits_forward(&net, 2, BnWorld::Batch).unwrap();
    assert_eq!(
        eval.module, train_logits.module,
        "one function at train and eval"
    );
    // The eval forward is the train step's forward up to the logits (the
    // step then runs the loss and the backward).
    let e = forward_prefix(&eval);
    assert!(e.len() > 100, "a real forward ({} ops)", e.len());
    for opt in [Optimizer::AdamW, Optimizer::Sgd] {
        let step = render_step(&net, 2, &StepOptions::new(opt)).unwrap();
        let s = forward_prefix(&step);
        assert!(s.len() > e.len(), "{opt:?}");
        assert_eq!(
            s[..e.len()],
            e[..],
            "{opt:?}: the step's forward is the eval forward"
        );
    }
    // The certificate's chain forward (what `certify` ties) is the rendered
    // one after the render's reshape of the flat image batch.
    let chain = net.chain().unwrap();
    let tied = layers::tie_funcs(&chain, &net.input_type(2))
        .unwrap()
        .forward;
    let f = eval.func();
    assert!(matches!(f.body.ops[0].kind, ir::OpKind::Reshape));
    assert_eq!(ops_from(f, 1), ops_from(&tied, 0));
}

/// Negative control of the shape check: the head's LN with ε 1e-6 in the
/// net the eval forward is rendered from (every shape the same).
#[test]
fn a_drifted_head_norm_is_not_the_certified_forward() {
    let net = narrow();
    let mut drifted = net.clone();
    let Some(LayerSpec::VitHead(h)) = drifted.layer_mut("head") else {
        panic!("head")
    };
    h.eps = 1e-6;
    let e = forward_prefix(&render_eval_forward(&drifted, 2).unwrap());
    let step = forward_prefix(&render_step(&net, 2, &StepOptions::new(Optimizer::AdamW)).unwrap());
    assert_ne!(step[..e.len()], e[..]);
    let tied = layers::tie_funcs(&net.chain().unwrap(), &net.input_type(2))
        .unwrap()
        .forward;
    assert_ne!(
        ops_from(render_eval_forward(&drifted, 2).unwrap().func(), 1),
        ops_from(&tied, 0)
    );
}
