//! The train-step tie: every parameter's update in the rendered step is the
//! optimizer tail of ∂Loss/∂θ (oracle: the standalone loss forward over dual
//! numbers), with negative controls that inject real shape-preserving bugs
//! into the rendered step; and the step's bf16 and batch-stat behaviour under
//! evaluation.

use cert::step::{certify_train_step, StepTieOptions};
use cert::Verdict;
use den::{eval_func, EvalOptions, Tensor, Value};
use ir::{BinaryOp, DenseData, ElemType, Module, OpKind, ValueId};
use layers::net::{
    by_name, BatchNormSpec, Conv2dSpec, DenseSpec, FlattenSpec, LayerSpec, MaxPoolSpec, NetSpec,
    ReluSpec,
};
use layers::ops::conv::Padding;
use layers::ops::norm::BnWorld;
use layers::trainstep::{render_step, step_signature, Optimizer, SlotKind, StepOptions};

/// A small net with every layer kind of the cifar8 family (for evaluation).
fn tiny(bn: Option<BnWorld>) -> NetSpec {
    let mut layers = vec![(
        "conv".to_string(),
        LayerSpec::Conv2d(Conv2dSpec {
            k: 3,
            stride: 1,
            padding: Padding::Symmetric,
            out_ch: 3,
            bias: true,
        }),
    )];
    if let Some(world) = bn {
        layers.push((
            "bn".into(),
            LayerSpec::BatchNorm(BatchNormSpec { world, eps: 1e-5 }),
        ));
    }
    layers.extend([
        (
            "pool".into(),
            LayerSpec::MaxPool(MaxPoolSpec {
                window: 2,
                stride: 2,
                pad: 0,
            }),
        ),
        ("relu".into(), LayerSpec::Relu(ReluSpec {})),
        ("flatten".into(), LayerSpec::Flatten(FlattenSpec {})),
        (
            "dense".into(),
            LayerSpec::Dense(DenseSpec {
                out_f: 4,
                bias: true,
            }),
        ),
    ]);
    NetSpec {
        name: "tiny".into(),
        input: (2, 4, 4),
        classes: 4,
        layers,
        label_smoothing: None,
        pool_backward: Default::default(),
    }
}

fn certify(net: &NetSpec, batch: i64, opt: Optimizer, m: &Module) -> cert::step::StepTieReport {
    certify_train_step(net, batch, opt, m, &StepTieOptions::default())
}

#[test]
fn every_optimizer_certifies_on_every_bn_world() {
    for bn in [None, Some(BnWorld::PerExample), Some(BnWorld::Batch)] {
        let net = tiny(bn);
        for opt in Optimizer::ALL {
            let m = render_step(&net, 3, &StepOptions::new(opt)).unwrap().module;
            let r = certify(&net, 3, opt, &m);
            assert!(r.certified(), "{bn:?} {opt:?}: {:?}", r.verdict);
            assert_eq!(r.blocks.len(), net.param_specs().unwrap().len());
            assert!(
                r.tail_gap < 1e-12,
                "{bn:?} {opt:?}: tail gap {}",
                r.tail_gap
            );
            assert_eq!(r.loss_gap, 0.0);
        }
    }
}

#[test]
fn cifar8_bbn_adamw_step_certifies() {
    let net = by_name("cifar8-bbn").unwrap();
    let m = render_step(&net, 2, &StepOptions::new(Optimizer::AdamW))
        .unwrap()
        .module;
    let r = certify(&net, 2, Optimizer::AdamW, &m);
    assert!(r.certified(), "{:?}", r.verdict);
    assert_eq!(r.blocks.len(), 38);
    let worst = r.blocks.iter().map(|b| b.relative_gap).fold(0.0, f64::max);
    assert!(worst < 1e-10, "worst block gap {worst:e}");
}

/// bf16 converts read as the identity in f64: the bf16 step certifies.
#[test]
fn bf16_step_certifies_at_identity_rounding() {
    let net = tiny(Some(BnWorld::Batch));
    for opt in Optimizer::ALL {
        let m = render_step(
            &net,
            2,
            &StepOptions {
                bf16: true,
                ..StepOptions::new(opt)
            },
        )
        .unwrap()
        .module;
        let r = certify(&net, 2, opt, &m);
        assert!(r.certified(), "{opt:?}: {:?}", r.verdict);
    }
}

/// The value returned at output position `k`.
fn returned(m: &Module, k: usize) -> ValueId {
    let f = &m.funcs[0];
    f.body.ops.last().unwrap().operands[k]
}

/// Replace operand `from` of the first multiply reading it by `to`.
fn redirect_multiply(m: &mut Module, from: ValueId, to: ValueId) {
    let op = m.funcs[0]
        .body
        .ops
        .iter_mut()
        .find(|o| matches!(o.kind, OpKind::Binary(BinaryOp::Multiply)) && o.operands[1] == from)
        .expect("the multiply exists");
    op.operands[1] = to;
    ir::verify_module(m).unwrap();
}

/// Negative control: Nesterov's look-ahead reads μ·v instead of μ·v'.
#[test]
fn nesterov_with_the_old_velocity_is_refuted() {
    let net = tiny(Some(BnWorld::Batch));
    let opt = Optimizer::Nesterov;
    let sig = step_signature(&net, 3, opt).unwrap();
    let mut m = render_step(&net, 3, &StepOptions::new(opt)).unwrap().module;
    let b = 2; // the BN γ
    let v_new = returned(&m, sig.output_positions(SlotKind::V)[b]);
    let v_old = m.funcs[0].params[sig.input_positions(SlotKind::V)[b]].value;
    redirect_multiply(&mut m, v_new, v_old);
    let r = certify(&net, 3, opt, &m);
    match &r.verdict {
        Verdict::Refuted { block, .. } => assert_eq!(block, "θ' of bn.gamma"),
        v => panic!("not refuted: {v:?}"),
    }
}

/// Negative control: AdamW's decoupled decay applied to the new θ.
#[test]
fn adamw_decay_on_the_new_theta_is_refuted() {
    let net = tiny(None);
    let opt = Optimizer::AdamW;
    let sig = step_signature(&net, 3, opt).unwrap();
    let mut m = render_step(&net, 3, &StepOptions::new(opt)).unwrap().module;
    let b = 0; // conv.W
    let theta_new = returned(&m, sig.output_positions(SlotKind::Param)[b]);
    let theta_old = m.funcs[0].params[sig.input_positions(SlotKind::Param)[b]].value;
    let f = &m.funcs[0];
    let final_sub = f
        .body
        .ops
        .iter()
        .find(|o| o.results[0].0 == theta_new)
        .unwrap();
    let moved = final_sub.operands[0];
    redirect_multiply(&mut m, theta_old, moved);
    let r = certify(&net, 3, opt, &m);
    match &r.verdict {
        Verdict::Refuted { block, detail } => {
            assert_eq!(block, "θ' of conv.W", "{detail}")
        }
        v => panic!("not refuted: {v:?}"),
    }
}

/// Negative control: the CE cotangent without its 1/B (the divisor constant
/// of `(softmax − onehot)/B` set to 1) — every gradient is B times too large.
#[test]
fn ce_cotangent_missing_one_over_b_is_refuted() {
    let net = tiny(Some(BnWorld::Batch));
    let batch = 3;
    for opt in Optimizer::ALL {
        let mut m = render_step(&net, batch, &StepOptions::new(opt))
            .unwrap()
            .module;
        let f = &mut m.funcs[0];
        let tys = f.value_types();
        let consts: Vec<ValueId> = f
            .body
            .ops
            .iter()
            .filter(|o| matches!(o.kind, OpKind::Binary(BinaryOp::Divide)))
            .map(|o| o.operands[1])
            .filter(|d| tys[d.index()].shape == [batch, 4])
            .collect();
        let mut hit = 0;
        for op in f.body.ops.iter_mut() {
            if let OpKind::Constant(DenseData::Float(vals)) = &mut op.kind {
                if consts.contains(&op.results[0].0) && vals == &[batch as f64] {
                    vals[0] = 1.0;
                    hit += 1;
                }
            }
        }
        assert_eq!(hit, 1, "exactly the cotangent's 1/B");
        let r = certify(&net, batch, opt, &m);
        match &r.verdict {
            Verdict::Refuted { block, detail } => {
                assert!(block.starts_with('d'), "{block}: {detail}");
                assert!(detail.contains("ratio 3.0000"), "{detail}");
            }
            v => panic!("{opt:?} not refuted: {v:?}"),
        }
    }
}

fn seeded(shape: &[usize], seed: u64, scale: f64) -> Tensor<f64> {
    let mut s = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    let n = shape.iter().product();
    let data = (0..n)
        .map(|_| {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            ((s >> 11) as f64 / (1u64 << 53) as f64 - 0.5) * 2.0 * scale
        })
        .collect();
    Tensor::new(shape.to_vec(), data)
}

fn step_inputs(net: &NetSpec, batch: i64, opt: Optimizer) -> Vec<Tensor<f64>> {
    let sig = step_signature(net, batch, opt).unwrap();
    sig.inputs
        .iter()
        .enumerate()
        .map(|(i, s)| {
            let shape: Vec<usize> = s.ty.shape.iter().map(|&d| d as usize).collect();
            match s.kind {
                SlotKind::Lr => Tensor::new(vec![], vec![0.05]),
                SlotKind::Bc1 | SlotKind::Bc2 | SlotKind::RunningVar => Tensor::filled(shape, 0.5),
                SlotKind::V => seeded(&shape, i as u64, 0.01).map(|x| x.abs()),
                SlotKind::OneHot => {
                    let k = shape[1];
                    let data = (0..shape[0] * k)
                        .map(|j| if j % k == (j / k) % k { 1.0 } else { 0.0 })
                        .collect();
                    Tensor::new(shape, data)
                }
                _ => seeded(&shape, i as u64 + 7, 0.5),
            }
        })
        .collect()
}

fn eval_as<S: den::Scalar>(m: &ir::Module, inputs: &[Tensor<f64>]) -> Vec<Vec<f64>> {
    let vals = inputs
        .iter()
        .map(|t| Value::Float(t.map(|&x| S::from_f64(x).unwrap()), ElemType::F32))
        .collect();
    let opts = EvalOptions {
        fast: false,
        ..Default::default()
    };
    eval_func::<S>(m, &m.funcs[0].name, vals, &opts)
        .unwrap()
        .outputs
        .into_iter()
        .map(|v| {
            v.as_float()
                .unwrap()
                .data
                .iter()
                .map(|x| x.to_f64())
                .collect()
        })
        .collect()
}

/// Certified at identity rounding, executed with real rounding: in f64 the
/// converts are the identity and the bf16 step equals the f32 step bit for
/// bit; in f32 the bf16 results are rounded and the steps differ (slightly).
#[test]
fn bf16_step_is_identity_in_f64_and_rounds_in_f32() {
    let net = tiny(Some(BnWorld::Batch));
    let inputs = step_inputs(&net, 3, Optimizer::AdamW);
    let plain = render_step(&net, 3, &StepOptions::new(Optimizer::AdamW))
        .unwrap()
        .module;
    let bf = render_step(
        &net,
        3,
        &StepOptions {
            bf16: true,
            ..StepOptions::new(Optimizer::AdamW)
        },
    )
    .unwrap()
    .module;
    assert_eq!(
        eval_as::<f64>(&plain, &inputs),
        eval_as::<f64>(&bf, &inputs)
    );
    let (a, b) = (
        eval_as::<f32>(&plain, &inputs),
        eval_as::<f32>(&bf, &inputs),
    );
    let loss = step_signature(&net, 3, Optimizer::AdamW)
        .unwrap()
        .output_positions(SlotKind::Loss)[0];
    let rel = (a[loss][0] - b[loss][0]).abs() / a[loss][0].abs();
    assert!(rel > 1e-6 && rel < 5e-2, "bf16 loss differs by {rel:e}");
}

/// The batch-stat outputs are the batch norm's own mean and biased variance
/// over N·H·W (checked here against a direct computation on the conv output).
#[test]
fn batch_stat_outputs_are_the_bn_statistics() {
    let net = tiny(Some(BnWorld::Batch));
    let batch = 3;
    let inputs = step_inputs(&net, batch, Optimizer::Sgd);
    let step = render_step(&net, batch, &StepOptions::new(Optimizer::Sgd))
        .unwrap()
        .module;
    let out = eval_as::<f64>(&step, &inputs);
    let sig = step_signature(&net, batch, Optimizer::Sgd).unwrap();
    let mean = &out[sig.output_positions(SlotKind::BatchMean)[0]];
    let var = &out[sig.output_positions(SlotKind::BatchVar)[0]];
    // The BN input: the conv's forward alone, on the same images and weights.
    let f = layers::tie_funcs(
        &layers::ops::conv::Conv2d {
            k: 3,
            stride: 1,
            padding: Padding::Symmetric,
            in_ch: 2,
            out_ch: 3,
            bias: true,
        },
        &net.input_type(batch),
    )
    .unwrap();
    let x4 = Tensor::new(vec![3, 2, 4, 4], inputs[0].data.clone());
    let m = f.module();
    let vals = [&x4, &inputs[1], &inputs[2]]
        .iter()
        .map(|t| Value::Float((*t).clone(), ElemType::F32))
        .collect();
    let y = eval_func::<f64>(&m, "forward", vals, &EvalOptions::default())
        .unwrap()
        .outputs
        .remove(0)
        .into_float()
        .unwrap();
    for c in 0..3 {
        let xs: Vec<f64> = (0..3)
            .flat_map(|n| (0..16).map(move |k| (n, k)))
            .map(|(n, k)| y.data[(n * 3 + c) * 16 + k])
            .collect();
        let mu = xs.iter().sum::<f64>() / 48.0;
        let v = xs.iter().map(|x| (x - mu) * (x - mu)).sum::<f64>() / 48.0;
        assert!((mean[c] - mu).abs() < 1e-12, "mean[{c}]");
        assert!((var[c] - v).abs() < 1e-12, "var[{c}]");
    }
}
