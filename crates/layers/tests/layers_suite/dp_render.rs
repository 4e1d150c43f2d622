//! The data-parallel render (docs/conventions.md §18): one `all_reduce` (sum over the
//! replica group [[0, …, R−1]]) per parameter gradient, each read only by a
//! ÷R, the single-device forward unchanged, the signature unchanged but for
//! the `dp{B}x{R}` name, and the text round-tripping through the parser.

use ir::{BinaryOp, DenseData, OpKind};
use layers::net::by_name;
use layers::trainstep::{
    forward_prefix, render_step, step_signature, step_signature_with, Optimizer, StepOptions,
};

fn dp(opt: Optimizer, replicas: usize) -> StepOptions {
    StepOptions {
        replicas,
        ..StepOptions::new(opt)
    }
}

#[test]
fn one_all_reduce_then_divide_per_parameter_gradient() {
    let net = by_name("cifar8-bbn").unwrap();
    let n_params = net.param_specs().unwrap().len();
    for replicas in [2usize, 4] {
        let m = render_step(&net, 2, &dp(Optimizer::AdamW, replicas))
            .unwrap()
            .module;
        let f = &m.funcs[0];
        assert_eq!(f.name, format!("cifar8_bbn_adamdp2x{replicas}_train_step"));
        let ops = &f.body.ops;
        let reduces: Vec<usize> = (0..ops.len())
            .filter(|&i| matches!(ops[i].kind, OpKind::AllReduce { .. }))
            .collect();
        assert_eq!(reduces.len(), n_params, "R={replicas}");
        let group: Vec<i64> = (0..replicas as i64).collect();
        for &i in &reduces {
            match &ops[i].kind {
                OpKind::AllReduce {
                    replica_groups,
                    channel_id,
                    use_global_device_ids,
                } => {
                    assert_eq!(replica_groups, &vec![group.clone()]);
                    assert_eq!((channel_id, use_global_device_ids), (&None, &false));
                }
                _ => unreachable!(),
            }
            assert_eq!(
                ops[i].regions[0].as_binary_reducer(),
                Some(BinaryOp::Add),
                "a sum"
            );
            let sum = ops[i].results[0].0;
            let readers: Vec<&ir::Op> = ops.iter().filter(|o| o.operands.contains(&sum)).collect();
            assert_eq!(readers.len(), 1, "only the ÷R reads the sum");
            assert!(matches!(readers[0].kind, OpKind::Binary(BinaryOp::Divide)));
            assert_eq!(readers[0].operands[0], sum);
            let divisor = ops
                .iter()
                .find(|o| o.results.iter().any(|(r, _)| *r == readers[0].operands[1]))
                .unwrap();
            assert_eq!(
                divisor.kind,
                OpKind::Constant(DenseData::Float(vec![replicas as f64]))
            );
        }
        let attrs = m.attrs.as_deref().unwrap_or("");
        assert!(
            attrs.contains(&format!("mhlo.num_replicas = {replicas} : i32")),
            "{attrs}"
        );
    }
}

#[test]
fn dp_render_round_trips_and_keeps_the_single_device_forward() {
    let net = by_name("cifar8-bbn").unwrap();
    for opt in Optimizer::ALL {
        let single = render_step(&net, 2, &StepOptions::new(opt)).unwrap();
        let r = render_step(&net, 2, &dp(opt, 2)).unwrap();
        ir::verify_module(&r.module).unwrap();
        let text = ir::print::print_module(&r.module);
        assert!(text.contains("stablehlo.all_reduce"));
        let back = ir::parse::parse_module(&text, "dp.mlir").unwrap();
        assert_eq!(back, r.module, "{opt:?}");
        assert_eq!(ir::print::print_module(&back), text);
        assert_eq!(forward_prefix(&r), forward_prefix(&single), "{opt:?}");
        let (a, b) = (&r.signature, &single.signature);
        assert_eq!((&a.inputs, &a.outputs), (&b.inputs, &b.outputs));
    }
}

#[test]
fn one_replica_is_the_plain_step() {
    let net = by_name("cifar8").unwrap();
    for opt in Optimizer::ALL {
        let a = render_step(&net, 3, &dp(opt, 1)).unwrap().module;
        let b = render_step(&net, 3, &StepOptions::new(opt)).unwrap().module;
        assert_eq!(a, b);
        assert!(a.attrs.is_none());
        assert_eq!(
            step_signature_with(&net, 3, &StepOptions::new(opt)).unwrap(),
            step_signature(&net, 3, opt).unwrap()
        );
    }
    let e = render_step(&net, 3, &dp(Optimizer::Sgd, 0)).unwrap_err();
    assert!(e.to_string().contains("at least 1 replica"), "{e}");
}

#[test]
fn optimizer_names_parse_back() {
    for opt in Optimizer::EVERY {
        assert_eq!(Optimizer::parse(opt.name()), Some(opt));
    }
    assert_eq!(
        Optimizer::names(),
        "sgd, nesterov, adamw, momentum, rmsprop, lamb"
    );
    let variants: Vec<&str> = Optimizer::EVERY.iter().map(|o| o.variant()).collect();
    assert_eq!(variants, ["sgd", "mom", "adam", "hbmom", "rms", "lamb"]);
}
