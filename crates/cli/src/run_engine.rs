//! `certgrad run --engine …`: one function of a parsed module executed on the
//! chosen engine (native, PJRT, IREE) with evaluator values in and out, timed
//! separately for preparation (compile) and execution.

use anyhow::{anyhow, Result};
use den::value::Value;
use engines::host::HostTensor;
use engines::select::{EngineKind, EngineOptions};
use std::time::Instant;

/// What one `run` produced: the outputs, how they were computed, and times.
pub struct EngineRun {
    pub outputs: Vec<Value<f32>>,
    pub how: String,
    pub prepare_seconds: f64,
    /// Seconds of each execution (`--repeat` of them).
    pub run_seconds: Vec<f64>,
}

/// Runs `func` of `module` on `inputs` `repeat` times on the engine `opts`
/// names (`generic`: the reference evaluator instead of the native engine).
pub fn execute(
    module: &ir::Module,
    func: &str,
    inputs: Vec<Value<f32>>,
    opts: &EngineOptions,
    generic: bool,
    repeat: usize,
) -> Result<EngineRun> {
    let repeat = repeat.max(1);
    if generic {
        if opts.kind != EngineKind::Native {
            return Err(anyhow!("--generic is the native engine's reference evaluator; it does not combine with --engine {}", opts.kind));
        }
        let eo = den::eval::EvalOptions {
            fast: false,
            ..Default::default()
        };
        let mut run_seconds = Vec::new();
        let mut outputs = Vec::new();
        for _ in 0..repeat {
            let t0 = Instant::now();
            outputs = den::eval::eval_func::<f32>(module, func, inputs.clone(), &eo)
                .map_err(|e| anyhow!("{e}"))?
                .outputs;
            run_seconds.push(t0.elapsed().as_secs_f64());
        }
        return Ok(EngineRun {
            outputs,
            how: "generic f32 evaluator".into(),
            prepare_seconds: 0.0,
            run_seconds,
        });
    }
    let sig = module
        .func(func)
        .ok_or_else(|| anyhow!("no function @{func}"))?;
    let elems: Vec<ir::ElemType> = sig.results.iter().map(|r| r.ty.elem).collect();
    let mut engine = opts.build().map_err(|e| anyhow!("{e}"))?;
    let t0 = Instant::now();
    let text = ir::print::print_module(module);
    let mut prepared = engine
        .prepare(&text, module, func, 1)
        .map_err(|e| anyhow!("{} engine: {e}", engine.name()))?;
    let prepare_seconds = t0.elapsed().as_secs_f64();
    let args: Vec<HostTensor> = inputs.iter().map(HostTensor::from_value_f32).collect();
    let mut run_seconds = Vec::new();
    let mut outs = Vec::new();
    for _ in 0..repeat {
        let t0 = Instant::now();
        outs = prepared
            .run_one(args.clone())
            .map_err(|e| anyhow!("{} engine: {e}", engine.name()))?;
        run_seconds.push(t0.elapsed().as_secs_f64());
    }
    let outputs = outs
        .iter()
        .zip(elems)
        .map(|(t, e)| t.to_value_f32(e).map_err(|e| anyhow!("{e}")))
        .collect::<Result<Vec<_>>>()?;
    Ok(EngineRun {
        outputs,
        how: prepared.describe(),
        prepare_seconds,
        run_seconds,
    })
}
