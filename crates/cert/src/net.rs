//! Whole-net certification of a declared net (a `NetSpec`): the whole-net tie
//! (the chain's backward IS the VJP of the logits forward), the parameter ties
//! (every emitted gradient of the loss chain is ∂Loss/∂θ at the point), and the
//! train/eval drift guard over the emitted forward functions (the eval forward
//! differs from the train forward only inside its batch norms).

use crate::probe::{abs_dot, dot, fill_normals, normals};
use crate::tie::{
    add_outcomes, BlockResult, Evidence, MarginReport, SiteCoverage, SiteMargin, TieOptions,
    TieReport, Verdict,
};
use den::{eval_func, Dual, EvalOptions, Tensor, Value};
use ir::rng::{Rng, CERT_SALT};
use ir::{Block, ElemType, Func, FuncBuilder, Op, TensorType, ValueId, Visibility};
use layers::net::NetSpec;
use layers::ops::norm::BnWorld;
use layers::{tie_funcs, CertLayer, Init, KinkSite, LayerError, Sites};
use std::collections::HashMap;
use std::time::Instant;

/// Tie options for whole nets: one point, one joint probe, f64 duals.
///
/// Whole nets are tied by [`joint_tie`]: one forward-mode pass with a random
/// tangent on every block at once and one backward pass per probe, instead of
/// one forward pass per block (111 for ResNet-34). The probe is a randomized
/// identity test: if any block B_b ≠ J_bᵀ, the bilinear form
/// Σ_b ⟨u, (J_b − B_bᵀ) v_b⟩ is a nonzero polynomial in the Gaussian (u, v)
/// and vanishes with probability 0, so a wrong block passes only if its error
/// is below the f64 tolerance (1e-9 relative to the terms of the identity).
/// A failed identity is localised to its block by bisection over the blocks
/// (about log₂(blocks) more forward passes).
pub fn net_tie_options(seed: u64) -> TieOptions {
    TieOptions {
        seed,
        probes: 1,
        points: 1,
        max_attempts: 6,
        exact: false,
        localise_limit: 64,
        ..TieOptions::default()
    }
}

/// Both ties of one net at one batch size.
#[derive(Clone, Debug)]
pub struct NetCertificate {
    pub net: String,
    pub batch: i64,
    /// `chain()` at `[N,C,H,W]`: logits forward, blocks dx and every parameter.
    pub whole: TieReport,
    /// `chain_with_loss()`: blocks dx, every parameter, and the loss target.
    pub params: TieReport,
    pub seconds: f64,
}

impl NetCertificate {
    pub fn certified(&self) -> bool {
        self.whole.certified() && self.params.certified()
    }
}

/// Certify `spec` at batch `batch`: the whole-net tie, then the parameter
/// ties, each a [`joint_tie`].
pub fn certify_net(
    spec: &NetSpec,
    batch: i64,
    opts: &TieOptions,
) -> Result<NetCertificate, LayerError> {
    let t0 = Instant::now();
    let input = spec.input_type(batch);
    let whole = joint_tie(&spec.chain()?, &input, opts);
    let params = joint_tie(&spec.chain_with_loss()?, &input, opts);
    Ok(NetCertificate {
        net: spec.name.clone(),
        batch,
        whole,
        params,
        seconds: t0.elapsed().as_secs_f64(),
    })
}

/// The tie of `layer` at `input` by joint probes (see [`net_tie_options`]):
/// per probe, u on the output and v on every block (the input and each
/// parameter) drawn at once, and ⟨u, J·v⟩ (one dual-number forward, which also
/// records the smooth-point margins) compared with Σ_b ⟨B_b(u), v_b⟩ (one
/// backward). Evidence is f64; `opts.exact` and the full Jacobian do not
/// apply. Each block's row reports the joint identity's relative discrepancy
/// (every block takes part in every probe); a refutation names the block
/// bisection isolated.
pub fn joint_tie(layer: &dyn CertLayer, input: &TensorType, opts: &TieOptions) -> TieReport {
    let t0 = Instant::now();
    let evidence = Evidence::F64 {
        tolerance: opts.f64_tolerance,
    };
    let mut report = TieReport::start(layer.name(), input.clone(), evidence, opts.probes);
    if let Err(reason) = joint_run(layer, input, opts, &mut report) {
        report.verdict = Verdict::Undecided { reason };
    }
    report.seconds = t0.elapsed().as_secs_f64();
    report
}

/// One block of a joint tie: an argument of the forward and how it is drawn.
struct JointBlock {
    name: String,
    shape: Vec<usize>,
    init: Init,
    /// The input: multiplied by the point's scale.
    scaled: bool,
}

fn f64_values(point: &[Tensor<f64>]) -> Vec<Value<f64>> {
    point
        .iter()
        .map(|t| Value::Float(t.clone(), ElemType::F32))
        .collect()
}

/// The forward over dual numbers at `point` with `tangents` (None: zero):
/// `(J·v, margins)`.
fn joint_jvp(
    module: &ir::Module,
    point: &[Tensor<f64>],
    tangents: &[Option<&Tensor<f64>>],
    record: bool,
) -> Result<(Tensor<f64>, Vec<den::Margin>), String> {
    let inputs: Vec<Value<Dual<f64>>> = point
        .iter()
        .zip(tangents)
        .map(|(p, t)| {
            let data = match t {
                Some(t) => p
                    .data
                    .iter()
                    .zip(&t.data)
                    .map(|(&a, &b)| Dual::new(a, b))
                    .collect(),
                None => p.data.iter().map(|&a| Dual::new(a, 0.0)).collect(),
            };
            Value::Float(Tensor::new(p.shape.clone(), data), ElemType::F32)
        })
        .collect();
    let opts = EvalOptions {
        fast: true,
        record_margins: record,
        replicas: 1,
    };
    let ev = eval_func::<Dual<f64>>(module, "forward", inputs, &opts)
        .map_err(|e| format!("forward evaluation failed: {e}"))?;
    let y = ev
        .outputs
        .first()
        .and_then(|v| v.as_float())
        .ok_or("the forward has no float result")?
        .map(|d| d.tangent);
    let margins = ev
        .margins
        .into_iter()
        .filter(|m| m.func == "forward")
        .collect();
    Ok((y, margins))
}

/// Site names of the forward's decision ops, by pre-order op index (the
/// index `den::Margin` reports); ops no layer declared are `op#index`.
fn site_names(forward: &ir::Func, sites: &[KinkSite]) -> HashMap<usize, String> {
    fn walk(b: &Block, idx: &mut usize, sites: &[KinkSite], out: &mut HashMap<usize, String>) {
        for op in &b.ops {
            if let Some((v, _)) = op.results.first() {
                if let Some(s) = sites.iter().find(|s| s.value == *v) {
                    out.insert(*idx, s.name.clone());
                }
            }
            *idx += 1;
            for r in &op.regions {
                walk(r, idx, sites, out);
            }
        }
    }
    let mut out = HashMap::new();
    walk(&forward.body, &mut 0, sites, &mut out);
    out
}

fn joint_run(
    layer: &dyn CertLayer,
    input: &TensorType,
    opts: &TieOptions,
    report: &mut TieReport,
) -> Result<(), String> {
    let funcs = tie_funcs(layer, input).map_err(|e| format!("cannot build the tie: {e}"))?;
    let module = funcs.module();
    let shape = |t: &TensorType| t.shape.iter().map(|&d| d as usize).collect::<Vec<_>>();
    let blocks: Vec<JointBlock> = std::iter::once(JointBlock {
        name: "dx".into(),
        shape: shape(&funcs.input),
        init: Init::Normal { std: 1.0 },
        scaled: true,
    })
    .chain(funcs.params.iter().map(|p| JointBlock {
        name: format!("d{}", p.name),
        shape: shape(&p.ty),
        init: p.init.clone(),
        scaled: false,
    }))
    .collect();
    report.blocks = blocks.len();
    report.block_results = blocks
        .iter()
        .map(|b| BlockResult {
            name: b.name.clone(),
            max_rel_discrepancy: 0.0,
            probes: 0,
        })
        .collect();
    let names = site_names(&funcs.forward, &funcs.sites);
    let site = |m: &den::Margin| {
        names
            .get(&m.op_index)
            .cloned()
            .unwrap_or_else(|| format!("{}#{}", m.op, m.op_index))
    };
    let out_shape = shape(&funcs.output);
    let out_len: usize = out_shape.iter().product();
    let mut rng = Rng::salted(opts.seed.wrapping_add(1), CERT_SALT);
    let scales = [1.0, 8.0, 0.25];
    let mut coverage: Vec<(usize, &'static str, Vec<usize>)> = Vec::new();
    let mut attempt = 0;
    while report.points < opts.points {
        if attempt >= opts.max_attempts {
            if report.points == 0 {
                return Err(format!(
                    "every sampled point sits on a kink ({})",
                    report.kinks_resampled.join(", ")
                ));
            }
            break;
        }
        let scale = scales[attempt % scales.len()];
        attempt += 1;
        let point: Vec<Tensor<f64>> = blocks
            .iter()
            .map(|b| {
                let n: usize = b.shape.iter().product();
                let s = if b.scaled { scale } else { 1.0 };
                let mut data = vec![0.0; n];
                let init = &b.init;
                fill_normals(&mut rng, &mut data, |z| {
                    s * match *init {
                        Init::Zeros => 0.1 * z,
                        Init::Ones => 1.0 + 0.25 * z,
                        Init::HeNormal { fan_in } => z * (2.0 / fan_in.max(1) as f64).sqrt(),
                        Init::Normal { std } => z * std,
                        // A constant init (1e-6) would be a degenerate point: draw around
                        // it at the scale of the ones-initialised parameters instead.
                        Init::Const { value } => value + 0.25 * z,
                    }
                });
                Tensor::new(b.shape.clone(), data)
            })
            .collect();
        let mut point_margins = None;
        for probe in 0..opts.probes {
            let v: Vec<Tensor<f64>> = blocks
                .iter()
                .map(|b| Tensor::new(b.shape.clone(), normals(&mut rng, b.shape.iter().product())))
                .collect();
            let all: Vec<Option<&Tensor<f64>>> = v.iter().map(Some).collect();
            // The first probe's forward also records the smooth-point margins
            // (decisions read primal values only, so the tangent is irrelevant).
            let (jv, margins) = joint_jvp(&module, &point, &all, probe == 0)?;
            if probe == 0 {
                if let Some(m) = margins.iter().find(|m| m.ties > 0) {
                    report.kinks_resampled.push(format!(
                        "kink at {}[{}], margin 0",
                        site(m),
                        m.argmin
                    ));
                    break;
                }
                point_margins = Some(margins);
            }
            let u = normals(&mut rng, out_len);
            let mut bwd_in = f64_values(&point);
            bwd_in.push(Value::Float(
                Tensor::new(out_shape.clone(), u.clone()),
                ElemType::F32,
            ));
            let ev = eval_func::<f64>(
                &module,
                "backward",
                bwd_in,
                &EvalOptions {
                    fast: true,
                    ..Default::default()
                },
            )
            .map_err(|e| format!("backward evaluation failed: {e}"))?;
            let claimed: Vec<Tensor<f64>> = ev
                .outputs
                .into_iter()
                .map(|o| o.into_float().ok_or("a backward result is not float"))
                .collect::<Result<_, _>>()?;
            if claimed.len() != blocks.len() {
                return Err(format!(
                    "the backward returns {} results for {} blocks",
                    claimed.len(),
                    blocks.len()
                ));
            }
            let lhs = dot(&u, &jv.data);
            let per: Vec<f64> = claimed
                .iter()
                .zip(&v)
                .map(|(c, v)| dot(&c.data, &v.data))
                .collect();
            let rhs: f64 = per.iter().sum();
            let v_norm2: f64 = v.iter().map(|t| dot(&t.data, &t.data)).sum();
            let terms = abs_dot(&u, &jv.data)
                + claimed
                    .iter()
                    .zip(&v)
                    .map(|(c, v)| abs_dot(&c.data, &v.data))
                    .sum::<f64>()
                + (dot(&u, &u) * v_norm2).sqrt();
            let rel = (lhs - rhs).abs() / terms.max(f64::MIN_POSITIVE);
            for br in &mut report.block_results {
                br.probes += 1;
                br.max_rel_discrepancy = br.max_rel_discrepancy.max(rel);
            }
            if rel.is_nan() || rel > opts.f64_tolerance {
                let (block, detail) =
                    bisect(&module, &point, &v, &u, &per, &blocks, opts.f64_tolerance)?;
                report.verdict = Verdict::Refuted {
                    block,
                    detail: format!(
                        "joint identity ⟨u, J·v⟩ − Σ⟨B(u), v⟩ = {:.3e} (relative {rel:.3e}) at a point of scale {scale}; {detail}",
                        lhs - rhs
                    ),
                };
                return Ok(());
            }
        }
        let Some(margins) = point_margins else {
            continue;
        };
        report.points += 1;
        for m in &margins {
            if let Some(r) = &report.min_margin {
                if m.min >= r.margin {
                    continue;
                }
            }
            report.min_margin = Some(MarginReport {
                site: site(m),
                index: m.argmin,
                margin: m.min,
            });
        }
        for m in &margins {
            match report.site_margins.iter_mut().find(|s| s.site == site(m)) {
                Some(s) => s.absorb(m),
                None => report.site_margins.push(SiteMargin::first(site(m), m)),
            }
            match coverage.iter_mut().find(|(i, _, _)| *i == m.op_index) {
                Some((_, _, counts)) => add_outcomes(counts, &m.outcomes),
                None => coverage.push((m.op_index, m.op, m.outcomes.clone())),
            }
        }
    }
    report.coverage = coverage
        .into_iter()
        .map(|(idx, op, outcomes)| {
            let site = names
                .get(&idx)
                .cloned()
                .unwrap_or_else(|| format!("{op}#{idx}"));
            SiteCoverage::from_counts(site, op, outcomes)
        })
        .collect();
    Ok(())
}

/// Find the block a failed joint identity comes from (`probe::bisect`, each
/// restricted identity one more dual forward).
fn bisect(
    module: &ir::Module,
    point: &[Tensor<f64>],
    v: &[Tensor<f64>],
    u: &[f64],
    per: &[f64],
    blocks: &[JointBlock],
    tol: f64,
) -> Result<(String, String), String> {
    // (lhs, rhs, terms) of the identity restricted to `set`.
    let restricted = |set: &[usize]| -> Result<(f64, f64, f64), String> {
        let tangents: Vec<Option<&Tensor<f64>>> = (0..v.len())
            .map(|b| set.contains(&b).then_some(&v[b]))
            .collect();
        let (jv, _) = joint_jvp(module, point, &tangents, false)?;
        let rhs: f64 = set.iter().map(|&b| per[b]).sum();
        let v2: f64 = set.iter().map(|&b| dot(&v[b].data, &v[b].data)).sum();
        let terms = abs_dot(u, &jv.data)
            + set.iter().map(|&b| per[b].abs()).sum::<f64>()
            + (dot(u, u) * v2).sqrt();
        Ok((dot(u, &jv.data), rhs, terms))
    };
    let all: Vec<usize> = (0..blocks.len()).collect();
    let whole = restricted(&all)?;
    let (b, (lhs, rhs, terms)) = crate::probe::bisect(blocks.len(), whole, tol, restricted)?;
    Ok((
        blocks[b].name.clone(),
        format!(
            "isolated by bisection: ⟨u, J_b·v_b⟩ = {lhs:.9e}, ⟨B_b(u), v_b⟩ = {rhs:.9e} (relative gap {:.3e})",
            (lhs - rhs).abs() / terms.max(f64::MIN_POSITIVE)
        ),
    ))
}

/// The logits forward of `spec`, emitted as the left fold of its layers'
/// forwards, with the top-level op range each layer emitted.
pub struct ForwardSegments {
    pub func: Func,
    /// `(layer name, first op, end op)` in forward order, indices into
    /// `func.body.ops`.
    pub segments: Vec<(String, usize, usize)>,
    /// Parameter names (ParamSpec paths) in function-parameter order after x.
    pub param_names: Vec<String>,
}

/// Emit the forward of `spec` at `batch` layer by layer, and check that the
/// fold IS the chain's emitted forward (the `chain_fwd` equation, on the IR).
pub fn forward_segments(spec: &NetSpec, batch: i64) -> Result<ForwardSegments, LayerError> {
    let chain = spec.chain()?;
    let input = spec.input_type(batch);
    let tys = chain.types(&input)?;
    let params = chain.params(&input);
    let mut fb = FuncBuilder::new("forward", Visibility::Public);
    let x = fb.param(input.clone());
    let ps: Vec<ValueId> = params.iter().map(|p| fb.param(p.ty.clone())).collect();
    let mut sites = Sites::default();
    let mut h = x;
    let mut at = 0;
    // Each layer's last value id: values are numbered in creation order, so a
    // top-level op belongs to the first layer whose boundary its result reaches.
    let mut bounds = Vec::new();
    for ((name, l), ty) in chain.layers.iter().zip(&tys) {
        let n = l.params(ty).len();
        let s = sites.scoped(name, |s| l.forward(&mut fb, h, &ps[at..at + n], s))?;
        at += n;
        h = s.output();
        bounds.push((name.clone(), h));
    }
    let func = fb.finish(&[h])?;
    if func != tie_funcs(&chain, &input)?.forward {
        return Err(LayerError(format!(
            "{}: the fold of the layers' forwards is not the chain's emitted forward",
            spec.name
        )));
    }
    let mut segments = Vec::new();
    let mut start = 0;
    for (name, out) in bounds {
        let mut end = start;
        while end < func.body.ops.len()
            && func.body.ops[end]
                .results
                .first()
                .is_some_and(|(v, _)| *v <= out)
        {
            end += 1;
        }
        segments.push((name, start, end));
        start = end;
    }
    Ok(ForwardSegments {
        func,
        segments,
        param_names: params.into_iter().map(|p| p.name).collect(),
    })
}

/// What the drift guard compared.
#[derive(Clone, Debug, PartialEq)]
pub struct DriftReport {
    /// Layers whose emitted ops are identical (up to SSA renumbering),
    /// per-example batch norms included.
    pub identical_layers: usize,
    /// Batch-norm layers and residual blocks (which hold batch norms) that
    /// switch world, each emitted differently in the two forwards.
    pub bn_layers: usize,
    /// Ops compared outside the batch norms.
    pub ops_compared: usize,
}

/// The drift guard: the eval forward `eval` differs from the train forward
/// `train` only in its batch norms. Both forwards are emitted at `batch`;
/// outside the batch-norm layers every op must be the same op (kind,
/// attributes, result types) on corresponding operands; every eval batch norm
/// must be in the Eval world and its emitted ops must differ from the train
/// one's (a switch that changed nothing would hide a train net scored with
/// train statistics). A batch norm (or block) the train net runs per example
/// has no running statistics to switch to: it is the same function at train
/// and eval, so the eval forward must keep it, op for op (the eval net the
/// renderer derives, `NetSpec::with_batch_stat_bns_in(Eval)`, does). Errors
/// name the first layer and op that drifted.
pub fn check_eval_drift(
    train: &NetSpec,
    eval: &NetSpec,
    batch: i64,
) -> Result<DriftReport, LayerError> {
    let err = |m: String| LayerError(format!("drift {} → {}: {m}", train.name, eval.name));
    if train.layers.len() != eval.layers.len() {
        return Err(err(format!(
            "{} layers in train, {} in eval",
            train.layers.len(),
            eval.layers.len()
        )));
    }
    let a = forward_segments(train, batch)?;
    let b = forward_segments(eval, batch)?;
    // Train value → eval value. Parameters correspond by name; the eval
    // forward's extra running statistics have no train counterpart.
    let mut map: HashMap<ValueId, ValueId> = HashMap::new();
    map.insert(a.func.params[0].value, b.func.params[0].value);
    for (i, name) in a.param_names.iter().enumerate() {
        let j = b
            .param_names
            .iter()
            .position(|n| n == name)
            .ok_or_else(|| err(format!("parameter {name} is missing from the eval forward")))?;
        map.insert(a.func.params[i + 1].value, b.func.params[j + 1].value);
    }
    let mut report = DriftReport {
        identical_layers: 0,
        bn_layers: 0,
        ops_compared: 0,
    };
    for (((name, ta, tb), (name_b, ea, eb)), ((_, la), (_, lb))) in a
        .segments
        .iter()
        .zip(&b.segments)
        .zip(train.layers.iter().zip(&eval.layers))
    {
        if name != name_b {
            return Err(err(format!("layer {name} in train is {name_b} in eval")));
        }
        let ops_a = &a.func.body.ops[*ta..*tb];
        let ops_b = &b.func.body.ops[*ea..*eb];
        if la.bn_world() == Some(BnWorld::PerExample) {
            if la != lb {
                return Err(err(format!(
                    "{name}: the train forward's per-example batch norm is the same function \
                     at eval, but the eval forward has {lb:?}"
                )));
            }
            report.ops_compared +=
                same_ops(ops_a, ops_b, &mut map).map_err(|m| err(format!("{name}: {m}")))?;
            report.identical_layers += 1;
            continue;
        }
        // A layer holds batch norms or not, whatever its kind: one that does
        // must be the train layer apart from the world (one description builds
        // both), in the Eval world, and emit different ops; one that does not
        // must emit the same ops.
        match (la.bn_world(), lb.bn_world()) {
            (Some(train_world), Some(world)) => {
                let mut same_world = lb.clone();
                same_world.set_bn_world(train_world);
                if &same_world != la {
                    return Err(err(format!(
                        "{name}: the eval layer is not the train layer ({la:?} vs {lb:?})"
                    )));
                }
                if world != BnWorld::Eval {
                    return Err(err(format!(
                        "{name}: the eval forward's batch norm(s) are in the {world:?} world"
                    )));
                }
                switched_layer(ops_a, ops_b, &mut map).map_err(|()| {
                    err(format!(
                        "{name}: the eval batch norm(s) emit the train ones' ops"
                    ))
                })?;
                report.bn_layers += 1;
            }
            (Some(_), None) | (None, Some(_)) => {
                return Err(err(format!(
                    "{name}: a layer with batch norms in one forward has none in the other"
                )));
            }
            (None, None) => {
                report.ops_compared +=
                    same_ops(ops_a, ops_b, &mut map).map_err(|m| err(format!("{name}: {m}")))?;
                report.identical_layers += 1;
            }
        }
    }
    Ok(report)
}

/// Every op of `ops_a` is the same op as its counterpart in `ops_b`; the
/// number of ops compared.
fn same_ops(
    ops_a: &[Op],
    ops_b: &[Op],
    map: &mut HashMap<ValueId, ValueId>,
) -> Result<usize, String> {
    if ops_a.len() != ops_b.len() {
        return Err(format!(
            "{} ops in train, {} in eval",
            ops_a.len(),
            ops_b.len()
        ));
    }
    for (k, (x, y)) in ops_a.iter().zip(ops_b).enumerate() {
        same_op(x, y, map).map_err(|m| format!("op {k} ({}) differs: {m}", x.kind.name()))?;
    }
    Ok(ops_a.len())
}

/// A layer whose batch norms switch world between the two forwards: `Err`
/// when its eval ops are op for op the train ones (the switch emitted
/// nothing); otherwise the layer's outputs correspond in `map` (its insides
/// need not).
fn switched_layer(
    ops_a: &[Op],
    ops_b: &[Op],
    map: &mut HashMap<ValueId, ValueId>,
) -> Result<(), ()> {
    let mut trial = map.clone();
    if ops_a.len() == ops_b.len()
        && ops_a
            .iter()
            .zip(ops_b)
            .all(|(x, y)| same_op(x, y, &mut trial).is_ok())
    {
        return Err(());
    }
    if let (Some(x), Some(y)) = (ops_a.last(), ops_b.last()) {
        map.insert(x.result(0), y.result(0));
    }
    Ok(())
}

/// `x` and `y` are the same op on corresponding operands; on success their
/// results (and region values) correspond in `map`.
fn same_op(x: &Op, y: &Op, map: &mut HashMap<ValueId, ValueId>) -> Result<(), String> {
    if x.kind != y.kind {
        return Err(format!("{:?} vs {:?}", x.kind, y.kind));
    }
    if x.extra_attrs != y.extra_attrs {
        return Err("attributes differ".into());
    }
    if x.operands.len() != y.operands.len() {
        return Err("operand counts differ".into());
    }
    for (i, (p, q)) in x.operands.iter().zip(&y.operands).enumerate() {
        if map.get(p) != Some(q) {
            return Err(format!("operand {i} reads a different value"));
        }
    }
    if x.regions.len() != y.regions.len() {
        return Err("region counts differ".into());
    }
    for (r, s) in x.regions.iter().zip(&y.regions) {
        same_block(r, s, map)?;
    }
    if x.results.len() != y.results.len() {
        return Err("result counts differ".into());
    }
    for ((v, t), (w, u)) in x.results.iter().zip(&y.results) {
        if t != u {
            return Err(format!("result type {t} vs {u}"));
        }
        map.insert(*v, *w);
    }
    Ok(())
}

fn same_block(a: &Block, b: &Block, map: &mut HashMap<ValueId, ValueId>) -> Result<(), String> {
    if a.args.len() != b.args.len() || a.ops.len() != b.ops.len() {
        return Err("regions differ in shape".into());
    }
    for ((v, t), (w, u)) in a.args.iter().zip(&b.args) {
        if t != u {
            return Err(format!("region argument {t} vs {u}"));
        }
        map.insert(*v, *w);
    }
    for (x, y) in a.ops.iter().zip(&b.ops) {
        same_op(x, y, map)?;
    }
    Ok(())
}
