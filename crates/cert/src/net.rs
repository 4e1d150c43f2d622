//! Whole-net certification of a declared net (a `NetSpec`): the whole-net tie
//! (the chain's backward IS the VJP of the logits forward), the parameter ties
//! (every emitted gradient of the loss chain is ∂Loss/∂θ at the point), and the
//! train/eval drift guard over the emitted forward functions (the eval forward
//! differs from the train forward only inside its batch norms).

use crate::tie::{certify_layer, TieOptions, TieReport};
use ir::{Block, Func, FuncBuilder, Op, ValueId, Visibility};
use layers::net::{LayerSpec, NetSpec};
use layers::ops::norm::BnWorld;
use layers::{tie_funcs, CertLayer, LayerError, Sites};
use std::collections::HashMap;
use std::time::Instant;

/// Tie options for whole nets: one point, one probe per block, f64 duals.
///
/// One probe per block suffices as a randomized identity test here: a wrong
/// block B_b ≠ J_bᵀ makes ⟨u, (J_b − B_bᵀ)v⟩ a nonzero bilinear form in
/// Gaussian (u, v), which vanishes with probability 0, so a wrong block passes
/// only if its error is below the f64 tolerance (1e-9 relative to the terms).
/// Refuted blocks of at most 64 elements (biases, BN γ/β) are localised to an
/// element; larger ones would cost one forward per element.
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

/// Certify `spec` at batch `batch`: the whole-net tie, then the parameter ties.
pub fn certify_net(
    spec: &NetSpec,
    batch: i64,
    opts: &TieOptions,
) -> Result<NetCertificate, LayerError> {
    let t0 = Instant::now();
    let input = spec.input_type(batch);
    let whole = certify_layer(&spec.chain()?, &input, opts);
    let params = certify_layer(&spec.chain_with_loss()?, &input, opts);
    Ok(NetCertificate {
        net: spec.name.clone(),
        batch,
        whole,
        params,
        seconds: t0.elapsed().as_secs_f64(),
    })
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
    /// Layers whose emitted ops are identical (up to SSA renumbering).
    pub identical_layers: usize,
    /// Batch-norm layers, each emitted differently in the two forwards.
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
/// train statistics). Errors name the first layer and op that drifted.
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
        match (la, lb) {
            (LayerSpec::BatchNorm { .. }, LayerSpec::BatchNorm { world, .. }) => {
                if *world != BnWorld::Eval {
                    return Err(err(format!(
                        "{name}: the eval forward's batch norm is in the {world:?} world"
                    )));
                }
                let mut trial = map.clone();
                if ops_a.len() == ops_b.len()
                    && ops_a
                        .iter()
                        .zip(ops_b)
                        .all(|(x, y)| same_op(x, y, &mut trial).is_ok())
                {
                    return Err(err(format!(
                        "{name}: the eval batch norm emits the train one's ops"
                    )));
                }
                // The layer's output corresponds; its insides need not.
                let out_a = ops_a.last().map(|o| o.result(0));
                let out_b = ops_b.last().map(|o| o.result(0));
                if let (Some(x), Some(y)) = (out_a, out_b) {
                    map.insert(x, y);
                }
                report.bn_layers += 1;
            }
            (LayerSpec::BatchNorm { .. }, _) | (_, LayerSpec::BatchNorm { .. }) => {
                return Err(err(format!(
                    "{name}: a batch norm in one forward is not one in the other"
                )));
            }
            _ => {
                if ops_a.len() != ops_b.len() {
                    return Err(err(format!(
                        "{name}: {} ops in train, {} in eval",
                        ops_a.len(),
                        ops_b.len()
                    )));
                }
                for (k, (x, y)) in ops_a.iter().zip(ops_b).enumerate() {
                    same_op(x, y, &mut map).map_err(|m| {
                        err(format!("{name}: op {k} ({}) differs: {m}", x.kind.name()))
                    })?;
                    report.ops_compared += 1;
                }
                report.identical_layers += 1;
            }
        }
    }
    Ok(report)
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
