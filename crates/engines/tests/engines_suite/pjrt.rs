//! The PJRT engine against a real plugin (`CERTGRAD_PJRT_PLUGIN`, e.g. XLA's
//! CPU plugin from the `fastatomstruct-xla-cpu` wheel): small programs agree
//! with the native evaluator, `all_reduce` sums over 2 replicas, the plugin's
//! own error text reaches the caller, and the cifar8-bbn SGD step at batch 32
//! matches `den` f32 within 1e-4 norm-wise per output. Without a plugin every
//! test that needs one prints a `SKIPPED:` line saying why, and passes.

use den::{eval_func, EvalOptions};
use engines::host::{HostData, HostTensor};
use engines::pjrt::{Client, PjrtPlugin, PLUGIN_ENV};
use ir::*;

fn client() -> Option<Client> {
    match std::env::var_os(PLUGIN_ENV) {
        Some(p) if !p.is_empty() => {
            let plugin = PjrtPlugin::load(&p).expect("load the PJRT plugin");
            Some(plugin.client().expect("create a PJRT client"))
        }
        _ => {
            crate::skipped(&format!(
                "needs {PLUGIN_ENV} (a PJRT plugin .so, e.g. XLA's CPU libpjrt_cpu.so)"
            ));
            None
        }
    }
}

/// A deterministic pseudo-random f32 sequence in [-1, 1).
fn values(n: usize, seed: u64) -> Vec<f32> {
    let mut s = seed
        .wrapping_mul(6364136223846793005)
        .wrapping_add(1442695040888963407);
    (0..n)
        .map(|_| {
            s = s
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            ((s >> 40) as f32 / (1u64 << 24) as f32) * 2.0 - 1.0
        })
        .collect()
}

fn module(f: Func) -> Module {
    Module {
        name: None,
        attrs: None,
        funcs: vec![f],
    }
}

/// ‖a − b‖ / ‖b‖ over f32 data (0 when both are zero).
fn rel_err(a: &[f32], b: &[f32]) -> f64 {
    assert_eq!(a.len(), b.len(), "lengths differ");
    let (mut num, mut den) = (0f64, 0f64);
    for (&x, &y) in a.iter().zip(b) {
        num += (x as f64 - y as f64).powi(2);
        den += (y as f64).powi(2);
    }
    if den == 0.0 {
        num.sqrt()
    } else {
        (num / den).sqrt()
    }
}

/// `step(a, b, c) = (a·b + c, a·b)` with a [2,3], b [3,4], c [2,4].
fn add_dot_module() -> Module {
    let mut fb = FuncBuilder::new("step", Visibility::Public);
    let a = fb.param(TensorType::f32(vec![2, 3]));
    let b = fb.param(TensorType::f32(vec![3, 4]));
    let c = fb.param(TensorType::f32(vec![2, 4]));
    let dims = DotDims {
        lhs_batch: vec![],
        rhs_batch: vec![],
        lhs_contracting: vec![1],
        rhs_contracting: vec![0],
    };
    let ab = fb
        .push1(
            OpKind::DotGeneral {
                dims,
                precision_config: None,
            },
            &[a, b],
            None,
        )
        .unwrap();
    let sum = fb.binary(BinaryOp::Add, ab, c).unwrap();
    module(fb.finish(&[sum, ab]).unwrap())
}

#[test]
fn add_dot_matches_the_native_evaluator() {
    let Some(client) = client() else { return };
    let m = add_dot_module();
    let text = print::print_module(&m);
    let exe = client.compile(&text, 1).expect("compile");
    assert_eq!(exe.num_outputs(), 2);
    let shapes = [vec![2i64, 3], vec![3, 4], vec![2, 4]];
    let inputs: Vec<HostTensor> = shapes
        .iter()
        .enumerate()
        .map(|(i, s)| {
            HostTensor::f32(
                s.clone(),
                values(s.iter().product::<i64>() as usize, i as u64),
            )
        })
        .collect();
    let out = exe.execute(std::slice::from_ref(&inputs)).expect("execute");
    let native = eval_func::<f32>(
        &m,
        "step",
        inputs
            .iter()
            .map(|t| t.to_value_f32(ElemType::F32).unwrap())
            .collect(),
        &EvalOptions::default(),
    )
    .expect("den");
    assert_eq!(out.len(), 1);
    for (k, (got, want)) in out[0].iter().zip(&native.outputs).enumerate() {
        let want = HostTensor::from_value_f32(want);
        assert_eq!(got.shape, want.shape, "output {k} shape");
        let e = rel_err(got.as_f32().unwrap(), want.as_f32().unwrap());
        assert!(e <= 1e-6, "output {k}: relative error {e}");
    }
    // The comparison can fail: a perturbed input changes the sum output.
    let mut bumped = inputs.clone();
    if let HostData::F32(v) = &mut bumped[2].data {
        v[0] += 0.5;
    }
    let out2 = exe.execute(&[bumped]).expect("execute");
    assert!(rel_err(out2[0][0].as_f32().unwrap(), out[0][0].as_f32().unwrap()) > 1e-3);
}

#[test]
fn integer_arguments_round_trip() {
    let Some(client) = client() else { return };
    let mut fb = FuncBuilder::new("main", Visibility::Public);
    let a = fb.param(TensorType {
        shape: vec![3],
        elem: ElemType::I32,
    });
    let b = fb.param(TensorType {
        shape: vec![],
        elem: ElemType::I64,
    });
    let a2 = fb.binary(BinaryOp::Multiply, a, a).unwrap();
    let b2 = fb.binary(BinaryOp::Add, b, b).unwrap();
    let text = print::print_module(&module(fb.finish(&[a2, b2]).unwrap()));
    let exe = client.compile(&text, 1).expect("compile");
    let out = exe
        .execute(&[vec![
            HostTensor::i32(vec![3], vec![-3, 4, 70000]),
            HostTensor::i64(vec![], vec![1 << 40]),
        ]])
        .expect("execute");
    assert_eq!(
        out[0][0],
        HostTensor::i32(vec![3], vec![9, 16, 70000i32.wrapping_mul(70000)])
    );
    assert_eq!(out[0][1], HostTensor::i64(vec![], vec![1 << 41]));
}

#[test]
fn all_reduce_sums_over_two_replicas() {
    let Some(client) = client() else { return };
    let devices = client.devices().expect("devices");
    if devices.len() < 2 {
        crate::skipped(&format!(
            "the plugin has {} device(s), 2 needed",
            devices.len()
        ));
        return;
    }
    let mut fb = FuncBuilder::new("main", Visibility::Public);
    let x = fb.param(TensorType::f32(vec![4]));
    let body = fb.binary_region(BinaryOp::Add, ElemType::F32).unwrap();
    let y = fb
        .push(
            OpKind::AllReduce {
                replica_groups: vec![vec![0, 1]],
                channel_id: None,
                use_global_device_ids: false,
            },
            &[x],
            vec![body],
            None,
        )
        .unwrap()[0];
    let text = print::print_module(&module(fb.finish(&[y]).unwrap()));
    let exe = client.compile(&text, 2).expect("compile for 2 replicas");
    assert_eq!(exe.num_replicas(), 2);
    let ids: Vec<i32> = exe.devices().unwrap().iter().map(|d| d.id).collect();
    assert_eq!(ids.len(), 2);
    assert_ne!(ids[0], ids[1], "replicas on distinct devices");
    let r0 = vec![1.0f32, 2.0, 3.0, 4.0];
    let r1 = vec![10.0f32, 20.0, 30.0, -4.0];
    let out = exe
        .execute(&[
            vec![HostTensor::f32(vec![4], r0)],
            vec![HostTensor::f32(vec![4], r1)],
        ])
        .expect("execute");
    let want = HostTensor::f32(vec![4], vec![11.0, 22.0, 33.0, 0.0]);
    assert_eq!(out.len(), 2);
    assert_eq!(out[0], vec![want.clone()]);
    assert_eq!(out[1], vec![want]);
    // One argument list for a 2-replica program is refused, not misread.
    let err = exe
        .execute(&[vec![HostTensor::f32(vec![4], vec![0.0; 4])]])
        .unwrap_err();
    assert!(err.0.contains("2 device"), "{err}");
}

#[test]
fn bad_mlir_reports_the_plugins_message() {
    let Some(client) = client() else { return };
    let text = "func.func @main(%a: tensor<2xf32>) -> tensor<2xf32> {\n  %0 = stablehlo.frobnicate %a : tensor<2xf32>\n  return %0 : tensor<2xf32>\n}\n";
    let err = client.compile(text, 1).err().expect("must not compile").0;
    assert!(err.starts_with("PJRT_Client_Compile: "), "{err}");
    // The parser's own words about the unknown op, from inside the plugin.
    assert!(err.contains("frobnicate"), "{err}");
}

#[test]
fn wrong_arguments_are_refused_with_a_message() {
    let Some(client) = client() else { return };
    let text = print::print_module(&add_dot_module());
    let exe = client.compile(&text, 1).expect("compile");
    let ok = [
        HostTensor::f32(vec![2, 3], vec![0.0; 6]),
        HostTensor::f32(vec![3, 4], vec![0.0; 12]),
        HostTensor::f32(vec![2, 4], vec![0.0; 8]),
    ];
    let err = exe.execute(&[ok[..2].to_vec()]).unwrap_err().0;
    assert!(err.contains("takes 3 arguments, got 2"), "{err}");
    let mut short = ok.to_vec();
    short[0] = HostTensor::f32(vec![2, 3], vec![0.0; 5]);
    let err = exe.execute(&[short]).unwrap_err().0;
    assert!(err.contains("needs 6 elements, has 5"), "{err}");
    // Same byte size, transposed shape: XLA's CPU plugin would run it.
    let mut transposed = ok.to_vec();
    transposed[0] = HostTensor::f32(vec![3, 2], vec![0.0; 6]);
    let err = exe.execute(&[transposed]).unwrap_err().0;
    assert!(
        err.contains("argument 0 expects tensor<2x3xf32>") && err.contains("[3, 2]"),
        "{err}"
    );
    let mut ints = ok.to_vec();
    ints[2] = HostTensor::i32(vec![2, 4], vec![0; 8]);
    let err = exe.execute(&[ints]).unwrap_err().0;
    assert!(err.contains("argument 2 expects tensor<2x4xf32>"), "{err}");
    assert!(exe.execute(&[ok.to_vec()]).is_ok());
}

/// Runs without a plugin: a shared library that is not a PJRT plugin, and a
/// missing file, are refused with the reason.
#[test]
fn non_plugins_are_refused_with_the_reason() {
    let err = PjrtPlugin::load("/nonexistent/libpjrt.so").err().unwrap().0;
    assert!(err.contains("/nonexistent/libpjrt.so"), "{err}");
    let libm = std::path::Path::new("/lib/x86_64-linux-gnu/libm.so.6");
    if libm.is_file() {
        let err = PjrtPlugin::load(libm).err().unwrap().0;
        assert!(
            err.contains("not a PJRT plugin (no GetPjrtApi symbol)"),
            "{err}"
        );
    }
}

#[test]
fn client_reports_platform_and_devices() {
    let Some(client) = client() else { return };
    let name = client.platform_name().unwrap();
    assert!(!name.is_empty());
    let devices = client.devices().unwrap();
    assert!(!devices.is_empty());
    eprintln!(
        "platform {name} {}; {} device(s): {:?}",
        client.platform_version().unwrap_or_default(),
        devices.len(),
        devices
    );
}

/// The cifar8-bbn SGD step at batch 32: PJRT (XLA CPU) against `den` f32 with
/// the fast kernels, norm-wise relative error per output ≤ 1e-4.
#[test]
fn cifar8_sgd_step_matches_den() {
    let Some(client) = client() else { return };
    let net = layers::net::by_name("cifar8-bbn").expect("cifar8-bbn");
    let batch = 32;
    let r = layers::trainstep::render_step(
        &net,
        batch,
        &layers::trainstep::StepOptions::new(layers::trainstep::Optimizer::Sgd),
    )
    .expect("render");
    let sig = &r.signature;
    let inputs: Vec<HostTensor> = sig
        .inputs
        .iter()
        .enumerate()
        .map(|(i, slot)| step_input(slot, i as u64))
        .collect();
    let text = print::print_module(&r.module);
    let exe = client.compile(&text, 1).expect("compile the step");
    let out = exe
        .execute(std::slice::from_ref(&inputs))
        .expect("run the step");
    let native = eval_func::<f32>(
        &r.module,
        &sig.func,
        inputs
            .iter()
            .zip(&sig.inputs)
            .map(|(t, s)| t.to_value_f32(s.ty.elem).unwrap())
            .collect(),
        &EvalOptions::default(),
    )
    .expect("den f32");
    assert_eq!(out[0].len(), native.outputs.len());
    let mut worst = (0f64, String::new());
    for ((got, want), slot) in out[0].iter().zip(&native.outputs).zip(&sig.outputs) {
        let want = HostTensor::from_value_f32(want);
        assert_eq!(got.shape, want.shape, "{}", slot.name);
        let e = rel_err(got.as_f32().unwrap(), want.as_f32().unwrap());
        if e > worst.0 {
            worst = (e, slot.name.clone());
        }
    }
    eprintln!(
        "cifar8-bbn sgd b{batch}: max norm-wise relative error PJRT vs den f32 = {:.3e} ({})",
        worst.0, worst.1
    );
    assert!(worst.0 <= 1e-4, "{} differs by {}", worst.1, worst.0);
    // The gate discriminates: a step on other images is far outside it.
    let mut other = inputs.clone();
    let x = sig.input_positions(layers::trainstep::SlotKind::Images)[0];
    other[x] = step_input(&sig.inputs[x], 999);
    let moved = exe.execute(&[other]).expect("run the step");
    let loss = sig.output_positions(layers::trainstep::SlotKind::Loss)[0];
    let want = HostTensor::from_value_f32(&native.outputs[loss]);
    let e = rel_err(moved[0][loss].as_f32().unwrap(), want.as_f32().unwrap());
    assert!(e > 1e-4, "other images moved the loss by only {e}");
}

/// A plausible value for a step input: images and parameters random, a valid
/// one-hot, lr 0.05, bias corrections 1, variances positive.
fn step_input(slot: &layers::trainstep::Slot, seed: u64) -> HostTensor {
    use layers::trainstep::SlotKind;
    let shape = slot.ty.shape.clone();
    let n = shape.iter().product::<i64>() as usize;
    let data = match slot.kind {
        SlotKind::OneHot => {
            let classes = *shape.last().unwrap() as usize;
            (0..n)
                .map(|i| ((i % classes) == (i / classes * 7 + 3) % classes) as u8 as f32)
                .collect()
        }
        SlotKind::Lr => vec![0.05; n],
        SlotKind::Bc1 | SlotKind::Bc2 => vec![1.0; n],
        SlotKind::RunningVar | SlotKind::V => {
            values(n, seed).iter().map(|x| x.abs() + 0.5).collect()
        }
        SlotKind::Param => values(n, seed).iter().map(|x| x * 0.3).collect(),
        _ => values(n, seed),
    };
    HostTensor::f32(shape, data)
}
