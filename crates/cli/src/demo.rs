//! `certgrad demo`: the built-in default job for this stage of the project. It
//! builds a small conv net forward with the IR builder, prints it as StableHLO,
//! parses the text back (round trip), and evaluates it on the fast f32 path, the
//! generic f32 evaluator and the f64 reference, reporting their agreement.

use anyhow::{bail, Result};
use den::eval::{eval_func, EvalOptions};
use den::value::Value;
use den::Tensor;
use ir::{
    BinaryOp, ConvAttrs, DotDims, ElemType, FuncBuilder, Module, OpKind, TensorType, Visibility,
    WindowAttrs,
};
use std::time::Instant;

/// conv3x3(pad 1) + bias + ReLU + 2×2/s2 max pool + dense, batch `b`, `c`→`k`
/// channels on `h`×`w` inputs, `classes` outputs.
fn small_convnet(b: i64, c: i64, k: i64, h: i64, w: i64, classes: i64) -> Result<Module> {
    let mut fb = FuncBuilder::new("main", Visibility::Public);
    let x = fb.param(TensorType::f32([b, c, h, w]));
    let wk = fb.param(TensorType::f32([k, c, 3, 3]));
    let bias = fb.param(TensorType::f32([k]));
    let wd = fb.param(TensorType::f32([k * (h / 2) * (w / 2), classes]));
    let mut conv = ConvAttrs::plain2d();
    conv.padding = vec![(1, 1), (1, 1)];
    let y = fb.push1(OpKind::Convolution(conv), &[x, wk], None)?;
    let bb = fb.push1(
        OpKind::BroadcastInDim { dims: vec![1] },
        &[bias],
        Some(TensorType::f32([b, k, h, w])),
    )?;
    let y = fb.binary(BinaryOp::Add, y, bb)?;
    let zero = fb.splat(0.0, TensorType::f32([b, k, h, w]));
    let y = fb.binary(BinaryOp::Maximum, y, zero)?;
    let neg_inf = fb.splat(f64::NEG_INFINITY, TensorType::scalar(ElemType::F32));
    let max_body = fb.binary_region(BinaryOp::Maximum, ElemType::F32)?;
    let pool = WindowAttrs {
        window_dimensions: vec![1, 1, 2, 2],
        window_strides: vec![1, 1, 2, 2],
        base_dilations: vec![1; 4],
        window_dilations: vec![1; 4],
        padding: vec![(0, 0); 4],
    };
    let p = fb.push(
        OpKind::ReduceWindow(pool),
        &[y, neg_inf],
        vec![max_body],
        None,
    )?[0];
    let flat = fb.push1(
        OpKind::Reshape,
        &[p],
        Some(TensorType::f32([b, k * (h / 2) * (w / 2)])),
    )?;
    let dims = DotDims {
        lhs_contracting: vec![1],
        rhs_contracting: vec![0],
        ..Default::default()
    };
    let logits = fb.push1(
        OpKind::DotGeneral {
            dims,
            precision_config: None,
        },
        &[flat, wd],
        None,
    )?;
    let f = fb.finish(&[logits])?;
    Ok(Module {
        name: Some("certgrad_demo".into()),
        attrs: None,
        funcs: vec![f],
    })
}

/// Deterministic normal-ish values (sum of uniforms) so the demo needs no RNG crate.
fn pseudo_normal(n: usize, seed: u64, scale: f32) -> Vec<f32> {
    let mut s = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    let mut next = || {
        s ^= s << 13;
        s ^= s >> 7;
        s ^= s << 17;
        (s >> 40) as f32 / (1u64 << 24) as f32
    };
    (0..n)
        .map(|_| (next() + next() + next() + next() - 2.0) * scale * 1.7)
        .collect()
}

fn max_rel_diff(a: &[f32], b: &[f64]) -> f64 {
    let num: f64 = a.iter().zip(b).map(|(&x, &y)| (x as f64 - y).powi(2)).sum();
    let den: f64 = b.iter().map(|y| y * y).sum();
    (num / den.max(f64::MIN_POSITIVE)).sqrt()
}

pub fn demo() -> Result<()> {
    let (b, c, k, h, w, classes) = (8, 3, 16, 32, 32, 10);
    let t0 = Instant::now();
    let module = small_convnet(b, c, k, h, w, classes)?;
    let text = ir::print::print_module(&module);
    let built = t0.elapsed();
    println!("certgrad demo: a small conv net forward (conv3x3 + bias + ReLU + maxpool 2x2/s2 + dense), batch {b}, {c}x{h}x{w} -> {classes}");
    println!("--- StableHLO ({} lines) ---", text.lines().count());
    for line in text.lines() {
        println!("{line}");
    }
    println!("---");
    let back = ir::parse::parse_module(&text, "<demo>").map_err(|e| anyhow::anyhow!("{e}"))?;
    ir::verify::verify_module(&back).map_err(|e| anyhow::anyhow!("{e}"))?;
    if back != module {
        bail!("round trip failed: parse(print(m)) != m");
    }
    println!(
        "built + printed in {:.2} ms; parsed back, verified, round trip exact",
        built.as_secs_f64() * 1e3
    );
    let f = &back.funcs[0];
    let inputs: Vec<Tensor<f32>> = f
        .params
        .iter()
        .enumerate()
        .map(|(i, p)| {
            let shape: Vec<usize> = p.ty.shape.iter().map(|&d| d as usize).collect();
            let n = shape.iter().product();
            Tensor::new(shape, pseudo_normal(n, i as u64 + 1, 0.5))
        })
        .collect();
    let as_f32: Vec<Value<f32>> = inputs
        .iter()
        .map(|t| Value::Float(t.clone(), ElemType::F32))
        .collect();
    let as_f64: Vec<Value<f64>> = inputs
        .iter()
        .map(|t| Value::Float(t.map(|&x| x as f64), ElemType::F32))
        .collect();
    let mut rows = Vec::new();
    for (label, fast) in [("fast f32", true), ("generic f32", false)] {
        let opts = EvalOptions {
            fast,
            ..Default::default()
        };
        let t = Instant::now();
        let out = eval_func::<f32>(&back, "main", as_f32.clone(), &opts)
            .map_err(|e| anyhow::anyhow!("{e}"))?;
        rows.push((label, t.elapsed(), out.outputs));
    }
    let t = Instant::now();
    let reference = eval_func::<f64>(
        &back,
        "main",
        as_f64,
        &EvalOptions {
            fast: false,
            ..Default::default()
        },
    )
    .map_err(|e| anyhow::anyhow!("{e}"))?;
    let ref_time = t.elapsed();
    let truth = match &reference.outputs[0] {
        Value::Float(t, _) => t.data.clone(),
        Value::Int(..) => bail!("demo output is not float"),
    };
    println!(
        "{:<12} {:>10} {:>22}",
        "evaluator", "time", "‖out − f64‖/‖f64‖"
    );
    for (label, dt, out) in &rows {
        let data = match &out[0] {
            Value::Float(t, _) => &t.data,
            Value::Int(..) => bail!("demo output is not float"),
        };
        println!(
            "{label:<12} {:>8.2}ms {:>22.3e}",
            dt.as_secs_f64() * 1e3,
            max_rel_diff(data, &truth)
        );
    }
    println!(
        "{:<12} {:>8.2}ms {:>22}",
        "generic f64",
        ref_time.as_secs_f64() * 1e3,
        "(reference)"
    );
    Ok(())
}
