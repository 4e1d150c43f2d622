//! `certgrad bound`: the rigorous rounding-error bound of a net's step (its
//! loss and gradients, or the whole step with a tail) or of any function of
//! a .mlir file, at a concrete point (`cert::bound`), beside the error
//! measured between the native f32 executor and the f64 evaluation, and the
//! mask-flip-free decision.

use anyhow::{bail, Context, Result};
use cert::bound::{
    analyse, analyse_adjoint, evaluate_f64, max_abs_diff, to_f32_values, view, BoundReport,
    HalvedUnit, Ieee754, Model, DEFAULT_TAPE_NODES,
};
use den::{Tensor, Value};
use ir::rng::Rng;
use std::path::PathBuf;
use std::time::Instant;

#[derive(clap::Args)]
pub struct BoundArgs {
    /// A built-in net or a .toml/.json net file (its rendered step's loss and
    /// parameter gradients), or a .mlir file (any function).
    target: String,
    /// Batch size of the net's step (default 32); a net only (a .mlir
    /// function's shapes are its own).
    #[arg(long)]
    batch: Option<i64>,
    /// Bound the whole train step with this optimizer tail (sgd, adamw, …)
    /// instead of its loss and gradients; a net only.
    #[arg(long, value_name = "OPTIMIZER")]
    step: Option<String>,
    /// The bf16 render (bf16 conv/dot operands, u = 2⁻⁸; f32 accumulation);
    /// a net only.
    #[arg(long)]
    bf16: bool,
    /// Function of the .mlir file (default: @main, else the only public one).
    #[arg(long)]
    func: Option<String>,
    /// The point: one .npy file per argument of the .mlir function (default:
    /// seeded standard-normal f32 values).
    #[arg(long, num_args = 1..)]
    at: Vec<PathBuf>,
    /// Seed of the sampled point.
    #[arg(long, default_value_t = 0)]
    seed: u64,
    /// NEGATIVE CONTROL: run the analysis with the unit roundoff halved (its
    /// "bounds" are unsound; measured errors should escape them).
    #[arg(long)]
    halved_unit: bool,
    /// Write the per-tensor bounds and the decision summary as JSON.
    #[arg(long)]
    json: Option<PathBuf>,
    /// `adjoint` (default): the first-order composite bound from a recorded
    /// tape, per element the smaller of it and the box; `box`: running error
    /// analysis alone.
    #[arg(long, default_value = "adjoint", value_parser = ["adjoint", "box"])]
    method: String,
    /// The adjoint tape's node budget (48 bytes a node); above it the box
    /// bounds are reported. Not with `--method box` (no tape).
    #[arg(long, default_value_t = DEFAULT_TAPE_NODES)]
    tape_nodes: usize,
}

fn run<M: Model>(a: &BoundArgs, v: &view::View) -> std::result::Result<BoundReport, String> {
    if a.method == "box" {
        analyse::<M>(&v.module, &v.func, &v.inputs, &v.names)
    } else {
        analyse_adjoint::<M>(&v.module, &v.func, &v.inputs, &v.names, a.tape_nodes)
    }
}

/// What to bound: a module's function at a point, with output names.
fn target(a: &BoundArgs) -> Result<(view::View, String)> {
    if a.target.ends_with(".mlir") {
        // These flags choose how a net's step is rendered; a .mlir file is
        // already rendered, and accepting them would bound something other
        // than what they ask for.
        let render_flags = [
            (a.step.is_some(), "--step"),
            (a.bf16, "--bf16"),
            (a.batch.is_some(), "--batch"),
        ];
        if let Some((_, flag)) = render_flags.iter().find(|(given, _)| *given) {
            bail!(
                "{flag} chooses how a net's step is rendered; {} is a .mlir file, bounded as \
                 written (its types and ops are its own)",
                a.target
            );
        }
        let path = PathBuf::from(&a.target);
        let module = crate::load_module(&path)?;
        let f = match a.func.as_deref() {
            Some(name) => module
                .func(name)
                .with_context(|| format!("{}: no function @{name} (--func)", a.target))?,
            None => module.default_entry().with_context(|| {
                format!(
                    "{}: several public functions; choose one with --func",
                    a.target
                )
            })?,
        };
        let inputs: Vec<Value<f64>> = if a.at.is_empty() {
            let mut rng = Rng::new(a.seed);
            f.params
                .iter()
                .map(|p| {
                    let shape: Vec<usize> = p.ty.shape.iter().map(|&d| d as usize).collect();
                    let n = shape.iter().product();
                    if p.ty.elem.is_float() {
                        let d = (0..n)
                            .map(|_| den::scalar::round_f64_to(rng.normal(), p.ty.elem))
                            .collect();
                        Value::Float(Tensor::new(shape, d), p.ty.elem)
                    } else {
                        Value::Int(Tensor::new(shape, vec![0; n]), p.ty.elem)
                    }
                })
                .collect()
        } else {
            if a.at.len() != f.params.len() {
                bail!(
                    "@{} takes {} arguments, but {} --at files were given",
                    f.name,
                    f.params.len(),
                    a.at.len()
                );
            }
            let mut vals = Vec::new();
            for (i, (path, p)) in a.at.iter().zip(&f.params).enumerate() {
                vals.push(engines::npy::read_argument::<f64>(path, i, &p.ty)?);
            }
            vals
        };
        let names = (0..f.results.len())
            .map(|i| format!("result {i}"))
            .collect();
        let what = format!("@{} of {}", f.name, a.target);
        let func = f.name.clone();
        return Ok((
            view::View {
                module,
                func,
                names,
                inputs,
            },
            what,
        ));
    }
    if !a.at.is_empty() || a.func.is_some() {
        bail!("--at and --func are for a .mlir file; a net is bounded at its sampled step point");
    }
    let batch = a.batch.unwrap_or(32);
    if batch < 1 {
        bail!("--batch must be at least 1 (got {batch})");
    }
    let net = layers::net::resolve(&a.target).map_err(|e| anyhow::anyhow!("{e}"))?;
    let bf = if a.bf16 { " (bf16)" } else { "" };
    match a.step.as_deref() {
        Some(o) => {
            let opt = layers::trainstep::Optimizer::parse(o).with_context(|| {
                format!(
                    "--step {o}: not an optimizer (one of {})",
                    layers::trainstep::Optimizer::names()
                )
            })?;
            let v = view::step_view(&net, batch, opt, a.bf16, a.seed)
                .map_err(|e| anyhow::anyhow!("{e}"))?;
            let what = format!("{}'s {} train step{bf}, batch {batch}", net.name, o);
            Ok((v, what))
        }
        None => {
            let v = view::gradient_view(&net, batch, a.bf16, a.seed)
                .map_err(|e| anyhow::anyhow!("{e}"))?;
            let what = format!("{}'s step{bf}: loss and gradients, batch {batch}", net.name);
            Ok((v, what))
        }
    }
}

/// Per output: measured max |f32 − f64| and how many f32 elements lie outside the bound.
struct Measured {
    max_diff: Vec<f64>,
    outside: Vec<usize>,
    seconds: f64,
}

fn measure(v: &view::View, r: &BoundReport) -> Result<Measured> {
    let t0 = Instant::now();
    let exact = evaluate_f64(&v.module, &v.func, &v.inputs).map_err(|e| anyhow::anyhow!("{e}"))?;
    let mut plan = exec::Plan::compile(&v.module, &v.func).map_err(|e| anyhow::anyhow!("{e}"))?;
    let f32s: Vec<Vec<f64>> = plan
        .run(to_f32_values(&v.inputs))
        .map_err(|e| anyhow::anyhow!("{e}"))?
        .into_iter()
        .filter_map(|o| {
            o.into_float()
                .map(|t| t.data.iter().map(|&x| x as f64).collect())
        })
        .collect();
    let mut m = Measured {
        max_diff: Vec::new(),
        outside: Vec::new(),
        seconds: 0.0,
    };
    for ((t, x), c) in r.outputs.iter().zip(&exact).zip(&f32s) {
        m.max_diff.push(max_abs_diff(c, x));
        m.outside.push(
            c.iter()
                .zip(t.exact.iter().zip(&t.err))
                .filter(|(&c, (iv, &e))| !iv.hull(e).contains(c))
                .count(),
        );
    }
    m.seconds = t0.elapsed().as_secs_f64();
    Ok(m)
}

fn median(mut v: Vec<f64>) -> Option<f64> {
    v.retain(|x| x.is_finite());
    if v.is_empty() {
        return None;
    }
    v.sort_by(f64::total_cmp);
    Some(v[v.len() / 2])
}

pub fn bound(a: &BoundArgs) -> Result<()> {
    if a.method == "box" && a.tape_nodes != DEFAULT_TAPE_NODES {
        bail!("--tape-nodes budgets the adjoint method's tape; --method box records none");
    }
    let (v, what) = target(a)?;
    let r = if a.halved_unit {
        run::<HalvedUnit>(a, &v)
    } else {
        run::<Ieee754>(a, &v)
    }
    .map_err(|e| anyhow::anyhow!("{e}"))?;
    let m = measure(&v, &r)?;
    println!(
        "certgrad bound: {what}\n  model {}: any IEEE evaluation, any summation order; method {}{}; analysis {:.2} s, measurement (native f32 vs f64) {:.2} s",
        r.model,
        r.method,
        r.tape_nodes
            .map_or(String::new(), |n| format!(" ({n} tape nodes)")),
        r.seconds,
        m.seconds
    );
    if let Some(n) = &r.note {
        println!("  {n}");
    }
    if !r.unsupported.is_empty() {
        println!(
            "  no rule for: {} (their results are vacuous)",
            r.unsupported.join(", ")
        );
    }
    println!(
        "  {:<26} {:>8} {:>10} {:>10} {:>10} {:>9} {:>10} {:>11} {:>9}  in bound",
        "tensor",
        "elems",
        "‖value‖",
        "max bound",
        "‖bound‖",
        "‖b‖/‖v‖",
        "‖box‖/‖v‖",
        "measured",
        "tightness"
    );
    let mut tight = Vec::new();
    let mut non_vacuous = 0;
    let mut zero_valued = 0;
    let mut rows = Vec::new();
    for (i, t) in r.outputs.iter().enumerate() {
        let (nv, nb, mb) = (t.norm_value(), t.norm_err(), t.max_err());
        let meas = m.max_diff[i];
        let tightness = mb / meas;
        if meas > 0.0 {
            tight.push(tightness);
        }
        let ok = t.non_vacuous(0.1);
        let zero = !ok && t.zero_valued();
        non_vacuous += usize::from(ok);
        zero_valued += usize::from(zero);
        println!(
            "  {:<26} {:>8} {:>10.3e} {:>10.3e} {:>10.3e} {:>9.2e} {:>10.2e} {:>11.3e} {:>9.1} {}{}",
            t.name,
            t.len(),
            nv,
            mb,
            nb,
            nb / nv,
            t.box_norm / nv,
            meas,
            tightness,
            if m.outside[i] == 0 { "yes" } else { "NO" },
            if ok {
                ""
            } else if zero {
                "  (zero-valued: |exact| ≤ bound everywhere; no relative criterion)"
            } else {
                "  (vacuous: ‖bound‖ ≥ 10 % ‖value‖)"
            }
        );
        rows.push(serde_json::json!({
            "tensor": t.name, "elements": t.len(), "norm_value": nv, "max_bound": mb,
            "norm_bound": nb, "box_norm_bound": t.box_norm, "measured_max_abs_f32_minus_f64": meas, "tightness": tightness,
            "non_vacuous": ok, "zero_valued": zero, "f32_outside_bound": m.outside[i],
        }));
    }
    let med = median(tight);
    println!(
        "  non-vacuous (‖bound‖ < 10 % ‖value‖): {non_vacuous} of {} tensors{}; median tightness (max bound / measured) {}",
        r.outputs.len(),
        if zero_valued > 0 {
            format!(
                ", {zero_valued} more zero-valued (the exact value within its bound of 0 at every element, e.g. a conv bias before a batch BN: counted neither way)"
            )
        } else {
            String::new()
        },
        med.map_or("n/a".into(), |x| format!("{x:.1}"))
    );
    let outside: usize = m.outside.iter().sum();
    let weakest = r.weakest();
    let flip_line = match (r.flip_free(), weakest) {
        (_, None) => "no decisions".to_string(),
        (true, Some(w)) => format!(
            "mask-flip-free: YES — the f32 evaluation takes the exact branches at all {} decisions ({} ops); smallest margin/bound {:.3e} at {} #{}{} index {}",
            r.decision_count(),
            r.decisions.len(),
            w.ratio,
            w.op,
            w.op_index,
            w.line.map_or(String::new(), |l| format!(" (line {l})")),
            w.index
        ),
        (false, Some(w)) => format!(
            "mask-flip-free: NO — rounding could flip {} #{}{} at index {} (margin/bound {:.3e}); {} of {} decision ops have a ratio ≤ 1, and the bounds assume the exact branches",
            w.op,
            w.op_index,
            w.line.map_or(String::new(), |l| format!(" (line {l})")),
            w.index,
            w.ratio,
            r.decisions.iter().filter(|d| !d.flip_free()).count(),
            r.decisions.len()
        ),
    };
    println!("  {flip_line}");
    let rigorous = r.rigorous();
    match r.weakest_discrete() {
        _ if rigorous => println!(
            "  rigorous: YES — every compare/select_and_scatter outcome is flip-free, so the bounds hold for any IEEE evaluation"
        ),
        Some(w) => println!(
            "  rigorous: NO — {} #{}{} at index {} (margin/bound {:.3e}) routes values and could flip: the bounds hold only for evaluations taking the exact branches",
            w.op,
            w.op_index,
            w.line.map_or(String::new(), |l| format!(" (line {l})")),
            w.index,
            w.ratio
        ),
        None => {}
    }
    if outside > 0 {
        println!(
            "  {outside} native f32 elements lie outside their bound{}",
            if rigorous {
                " — A SOUNDNESS FAILURE"
            } else {
                " (possible: the bounds are conditional)"
            }
        );
    }
    if let Some(path) = &a.json {
        let j = serde_json::json!({
            "target": what, "model": r.model, "method": r.method, "tape_nodes": r.tape_nodes,
            "note": r.note, "analysis_seconds": r.seconds,
            "tensors": rows, "median_tightness": med, "non_vacuous": non_vacuous, "zero_valued": zero_valued,
            "flip_free": r.flip_free(), "rigorous": rigorous, "decisions": r.decision_count(),
            "weakest_decision": weakest.map(|w| serde_json::json!({
                "op": w.op, "op_index": w.op_index, "line": w.line, "index": w.index, "ratio": w.ratio,
            })),
            "unsupported": r.unsupported, "f32_outside_bound": outside,
        });
        std::fs::write(path, serde_json::to_string_pretty(&j)?)
            .with_context(|| format!("writing {}", path.display()))?;
    }
    if outside > 0 && rigorous && !a.halved_unit {
        return Err(crate::Exit(3).into());
    }
    if !rigorous {
        return Err(crate::Exit(1).into());
    }
    Ok(())
}
