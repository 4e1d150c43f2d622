//! `certgrad run --engine …`: one function of a parsed module executed on the
//! chosen engine (native, PJRT, IREE) with evaluator values in and out, timed
//! separately for preparation (compile) and execution. Values are
//! [`den::Ieee`]: every tensor in its own element type. The engines compute in
//! f32, so a function with f64 tensors runs on the typed generic evaluator
//! (`--generic` always does), which computes f64 in f64. With R replicas
//! (`--replicas`, a data-parallel step's `all_reduce` over them) every
//! replica has its own argument list and results.

use anyhow::{anyhow, Result};
use den::value::Value;
use den::Ieee;
use engines::host::HostTensor;
use engines::select::{EngineKind, EngineOptions};
use std::time::Instant;

/// What one `run` produced: each replica's outputs, how they were computed,
/// and times.
pub struct EngineRun {
    pub outputs: Vec<Vec<Value<Ieee>>>,
    pub how: String,
    pub prepare_seconds: f64,
    /// Seconds of each execution (`--repeat` of them).
    pub run_seconds: Vec<f64>,
}

/// Runs `func` of `module` on `inputs` (one argument list per replica)
/// `repeat` times on the engine `opts` names (`generic`: the typed reference
/// evaluator instead of the native engine; the native engine also hands a
/// function with f64 tensors to it).
pub fn execute(
    module: &ir::Module,
    func: &str,
    inputs: Vec<Vec<Value<Ieee>>>,
    opts: &EngineOptions,
    generic: bool,
    repeat: usize,
) -> Result<EngineRun> {
    let repeat = repeat.max(1);
    if generic {
        if opts.kind != EngineKind::Native {
            return Err(anyhow!("--generic is the native engine's reference evaluator; it does not combine with --engine {}", opts.kind));
        }
        return typed(
            module,
            func,
            inputs,
            repeat,
            "generic typed evaluator".into(),
        );
    }
    if let Some(why) = needs_typed_evaluator(module, func) {
        if opts.kind != EngineKind::Native {
            return Err(anyhow!(
                "the {} engine exchanges float32 tensors and @{func} has {why}; use --engine native or --generic",
                opts.kind
            ));
        }
        return typed(
            module,
            func,
            inputs,
            repeat,
            format!("generic typed evaluator: {why}"),
        );
    }
    let sig = module
        .func(func)
        .ok_or_else(|| anyhow!("no function @{func}"))?;
    let elems: Vec<ir::ElemType> = sig.results.iter().map(|r| r.ty.elem).collect();
    let mut engine = opts.build().map_err(|e| anyhow!("{e}"))?;
    let t0 = Instant::now();
    let text = ir::print::print_module(module);
    let mut prepared = engine
        .prepare(&text, module, func, inputs.len())
        .map_err(|e| anyhow!("{} engine: {e}", engine.name()))?;
    let prepare_seconds = t0.elapsed().as_secs_f64();
    // Every float here is f32/bf16/f16 (f64 went to the typed evaluator), so
    // narrowing to f32 is exact.
    let args: Vec<Vec<HostTensor>> = inputs
        .iter()
        .map(|replica| {
            replica
                .iter()
                .map(|v| HostTensor::from_value_f32(&v.map_scalar(|x| x.get() as f32)))
                .collect()
        })
        .collect();
    let mut run_seconds = Vec::new();
    let mut outs = Vec::new();
    for _ in 0..repeat {
        let t0 = Instant::now();
        let ran = match args.as_slice() {
            [one] => prepared.run_one(one.clone()).map(|o| vec![o]),
            all => prepared.run(all),
        };
        outs = ran.map_err(|e| anyhow!("{} engine: {e}", engine.name()))?;
        run_seconds.push(t0.elapsed().as_secs_f64());
    }
    let outputs = outs
        .iter()
        .map(|replica| {
            replica
                .iter()
                .zip(&elems)
                .map(|(t, &e)| {
                    t.to_value_f32(e)
                        .map(|v| v.map_scalar(|&x| Ieee(f64::from(x))))
                        .map_err(|e| anyhow!("{e}"))
                })
                .collect::<Result<Vec<_>>>()
        })
        .collect::<Result<Vec<_>>>()?;
    Ok(EngineRun {
        outputs,
        how: prepared.describe(),
        prepare_seconds,
        run_seconds,
    })
}

/// Runs `func` on the generic evaluator over [`Ieee`] (no fast f32 kernels).
fn typed(
    module: &ir::Module,
    func: &str,
    inputs: Vec<Vec<Value<Ieee>>>,
    repeat: usize,
    how: String,
) -> Result<EngineRun> {
    let eo = den::eval::EvalOptions {
        fast: false,
        ..Default::default()
    };
    let mut run_seconds = Vec::new();
    let mut outputs = Vec::new();
    for _ in 0..repeat {
        let t0 = Instant::now();
        outputs = match inputs.as_slice() {
            [one] => vec![
                den::eval::eval_func::<Ieee>(module, func, one.clone(), &eo)
                    .map_err(|e| anyhow!("{e}"))?
                    .outputs,
            ],
            _ => den::eval::eval_replicas::<Ieee>(module, func, inputs.clone(), &eo)
                .map_err(|e| anyhow!("{e}"))?
                .into_iter()
                .map(|e| e.outputs)
                .collect(),
        };
        run_seconds.push(t0.elapsed().as_secs_f64());
    }
    Ok(EngineRun {
        outputs,
        how,
        prepare_seconds: 0.0,
        run_seconds,
    })
}

/// Why `func` (with the functions it calls) cannot run on the f32 engines:
/// it has f64 tensors, which they would compute in f32. `None`: every float
/// tensor is f32, bf16 or f16.
pub fn needs_typed_evaluator(module: &ir::Module, func: &str) -> Option<String> {
    fn block_has_f64(b: &ir::Block, calls: &mut Vec<String>) -> bool {
        b.args.iter().any(|(_, t)| t.elem == ir::ElemType::F64)
            || b.ops.iter().any(|op| {
                if let ir::OpKind::Call { callee } = &op.kind {
                    calls.push(callee.clone());
                }
                op.results.iter().any(|(_, t)| t.elem == ir::ElemType::F64)
                    || op.regions.iter().any(|r| block_has_f64(r, calls))
            })
    }
    let mut todo = vec![func.to_string()];
    let mut seen: Vec<String> = Vec::new();
    while let Some(name) = todo.pop() {
        if seen.contains(&name) {
            continue;
        }
        let Some(f) = module.func(&name) else {
            continue;
        };
        let mut calls = Vec::new();
        let signature_f64 = f.params.iter().any(|p| p.ty.elem == ir::ElemType::F64)
            || f.results.iter().any(|r| r.ty.elem == ir::ElemType::F64);
        if signature_f64 || block_has_f64(&f.body, &mut calls) {
            return Some("f64 tensors".into());
        }
        seen.push(name);
        todo.extend(calls);
    }
    None
}
