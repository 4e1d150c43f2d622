//! Where a refuted gradient's backward first goes wrong. The values a wrong
//! gradient is computed from (its backward ancestry) are tied, one at a
//! time, to the derivative of the step's own loss at a forward value of the
//! same type: a backward value c is the cotangent of a forward value a when
//! ⟨c, u⟩ = κ·∂loss/∂a·u for random u, the derivative taken by dual numbers
//! through the loss's slice cut at a (a becomes an argument carrying the
//! tangent u; nothing else carries one). The op to blame computes the first
//! backward value (in text order) that is no cotangent (or one with another
//! scale), whose nearest backward inputs are tied cotangents (or that has
//! none and every wrong gradient is computed from it: a residual such as
//! JAX's 1 − σ, computed by the forward for one layer's backward, is not
//! blamed for the others), and after which no value on the way to the
//! gradient is tied again.

use super::graph::{Def, Graph};
use super::{abs_dot, dot, module_with, returning, site, Oracle, Site};
use den::{eval_func, EvalOptions, Tensor, Value};
use ir::rng::Rng;
use ir::{Block, Func, Module, Param, TensorType, ValueId};
use std::collections::{HashMap, HashSet};

/// What the first wrong backward value is.
#[derive(Clone, Debug, PartialEq)]
pub enum Finding {
    /// κ'·∂loss/∂a with κ' ≠ κ: a missing or extra factor.
    Scaled { of: Site, ratio: f64 },
    /// No forward value of its type has it as its cotangent.
    NotACotangent { tried: Vec<Site> },
    /// The gradient value itself, computed from right cotangents.
    TheGradient,
}

#[derive(Clone, Debug, PartialEq)]
pub struct Localisation {
    /// The parameter whose gradient was followed back.
    pub param: String,
    pub at: Site,
    pub finding: Finding,
    /// The backward values it reads that are right: (value, the forward
    /// value it is the cotangent of).
    pub reads: Vec<(Site, Site)>,
    /// Dual-number probes spent.
    pub probes: usize,
}

/// Two directions u at a forward value a, each with ∂loss/∂a·u.
type TwoProbes = [(Vec<f64>, f64); 2];

#[derive(Clone, Copy, Debug, PartialEq)]
enum Status {
    Tied(usize),
    Scaled(usize, f64),
    Untied,
}

/// The loss slice with every use of `a` replaced by a new last argument.
fn cut_at(loss_fn: &Func, a: ValueId, ty: &TensorType) -> Func {
    fn replace(b: &mut Block, a: ValueId, x: ValueId) {
        for op in b.ops.iter_mut() {
            for o in op.operands.iter_mut() {
                if *o == a {
                    *o = x;
                }
            }
            for r in op.regions.iter_mut() {
                replace(r, a, x);
            }
        }
    }
    let mut h = loss_fn.clone();
    let mut m = 0;
    ir::passes::max_id(&h.body, &mut m);
    let x = ValueId(m);
    replace(&mut h.body, a, x);
    h.params.push(Param {
        value: x,
        ty: ty.clone(),
        attrs: None,
    });
    h.body.args.push((x, ty.clone()));
    ir::passes::prune_dead_ops(&mut h);
    h.canonicalize();
    h
}

pub(crate) struct Inputs<'a> {
    pub module: &'a Module,
    pub f: &'a Func,
    pub g: &'a Graph<'a>,
    pub forward: &'a HashSet<ValueId>,
    pub data: &'a [usize],
    pub params: &'a [usize],
    pub loss: ValueId,
    pub point: &'a [Value<f64>],
    pub kappa: Option<f64>,
    /// The gradient values of every refuted parameter.
    pub wrong_gradients: Vec<ValueId>,
    pub tolerance: f64,
    /// At most this many dual-number probes.
    pub budget: usize,
}

/// Follow `grad` (parameter `param`'s gradient) back; `None` when no
/// backward value could be blamed within the budget.
pub(crate) fn locate(
    inp: &Inputs,
    param: &str,
    grad: ValueId,
    rng: &mut Rng,
) -> Option<Localisation> {
    let g = inp.g;
    let op_index = |v: &ValueId| match g.def.get(v) {
        Some(Def::Op(k, _)) => Some(*k),
        _ => None,
    };
    // The backward ancestry of the gradient, in text order.
    let mut backward: Vec<ValueId> = Vec::new();
    let mut seen = HashSet::new();
    let mut stack = vec![grad];
    while let Some(v) = stack.pop() {
        if !seen.insert(v) || inp.forward.contains(&v) {
            continue;
        }
        let Some(k) = op_index(&v) else { continue };
        if !g.ty[&v].elem.is_float() || !g.deps[&v].any_of(inp.data) {
            continue;
        }
        backward.push(v);
        stack.extend(g.reads[k].iter().copied());
    }
    backward.sort_by_key(|v| (op_index(v), v.0));
    // Forward values a tangent can be seeded at, by type.
    let mut activations: HashMap<&TensorType, Vec<ValueId>> = HashMap::new();
    let mut forward: Vec<&ValueId> = inp.forward.iter().collect();
    forward.sort_by_key(|v| (op_index(v), v.0));
    for a in forward {
        let t = &g.ty[a];
        if op_index(a).is_some()
            && t.elem.is_float()
            && t.num_elements() > 1
            && g.smooth_deps[a].any_of(inp.params)
        {
            activations.entry(t).or_default().push(*a);
        }
    }
    let cands: Vec<ValueId> = backward
        .iter()
        .copied()
        .filter(|v| activations.contains_key(&g.ty[v]))
        .take(512)
        .collect();
    if cands.is_empty() {
        return None;
    }
    let index: HashMap<ValueId, usize> = cands.iter().enumerate().map(|(i, v)| (*v, i)).collect();
    // For each backward value: the nearest candidates upstream, and all.
    let words = cands.len().div_ceil(64);
    let mut near: HashMap<ValueId, Vec<usize>> = HashMap::new();
    let mut all: HashMap<ValueId, Vec<u64>> = HashMap::new();
    for v in &backward {
        let k = op_index(v).expect("an op value");
        let mut n = Vec::new();
        let mut a = vec![0u64; words];
        for r in &g.reads[k] {
            if let Some(&i) = index.get(r) {
                n.push(i);
                a[i / 64] |= 1 << (i % 64);
            } else if let Some(rn) = near.get(r) {
                n.extend(rn.iter().copied());
            }
            if let Some(ra) = all.get(r) {
                for (x, y) in a.iter_mut().zip(ra) {
                    *x |= y;
                }
            }
        }
        n.sort();
        n.dedup();
        near.insert(*v, n);
        all.insert(*v, a);
    }
    // The step's values at the point: every candidate and activation.
    let mut wanted = cands.clone();
    let acts: Vec<ValueId> = {
        let mut v: Vec<ValueId> = activations.values().flatten().copied().collect();
        v.sort();
        v
    };
    wanted.extend(acts.iter().copied());
    let name = format!("{}__certify_locate", inp.f.name);
    let step = Func {
        name: name.clone(),
        ..returning(inp.f, &wanted, g)
    };
    let ev = eval_func::<f64>(
        &module_with(inp.module, step),
        &name,
        inp.point.to_vec(),
        &EvalOptions {
            fast: true,
            record_margins: false,
            replicas: 1,
        },
    )
    .ok()?;
    let value: HashMap<ValueId, Tensor<f64>> = wanted
        .iter()
        .zip(ev.outputs)
        .filter_map(|(v, o)| o.as_float().cloned().map(|t| (*v, t)))
        .collect();
    let loss_fn = returning(inp.f, &[inp.loss], g);
    // ∂loss/∂a along two directions, per activation, on demand.
    let mut derivs: HashMap<ValueId, Option<TwoProbes>> = HashMap::new();
    let mut probes = 0usize;
    let mut derivative = |a: ValueId, rng: &mut Rng, probes: &mut usize| {
        derivs
            .entry(a)
            .or_insert_with(|| {
                if *probes + 2 > inp.budget {
                    return None;
                }
                let cut_name = format!("{}__certify_cut", inp.f.name);
                let cut = Func {
                    name: cut_name.clone(),
                    ..cut_at(&loss_fn, a, &g.ty[&a])
                };
                let mut point = inp.point.to_vec();
                point.push(Value::Float(value[&a].clone(), g.ty[&a].elem));
                let n = point.len() - 1;
                let points = [point];
                let oracle = Oracle {
                    module: module_with(inp.module, cut),
                    func: cut_name,
                    points: &points,
                };
                let mut out = Vec::new();
                for _ in 0..2 {
                    let u: Vec<f64> = (0..value[&a].data.len()).map(|_| rng.normal()).collect();
                    *probes += 1;
                    let (_, d, _) = oracle.probe(&[(n, u.clone())]).ok()?;
                    out.push((u, d));
                }
                let [p, q]: TwoProbes = out.try_into().ok()?;
                Some([p, q])
            })
            .clone()
    };
    let mut status: HashMap<usize, Status> = HashMap::new();
    let mut tried: HashMap<usize, Vec<ValueId>> = HashMap::new();
    let mut status_of = |i: usize, rng: &mut Rng, probes: &mut usize| -> Option<Status> {
        if let Some(s) = status.get(&i) {
            return Some(*s);
        }
        let c = &value[&cands[i]].data;
        let mut s = Status::Untied;
        let mut scaled = None;
        for (j, &a) in activations[&g.ty[&cands[i]]].iter().enumerate() {
            let [(u0, d0), (u1, d1)] = derivative(a, rng, probes)?;
            tried.entry(i).or_default().push(a);
            let (c0, c1) = (dot(c, &u0), dot(c, &u1));
            let (t0, t1) = (abs_dot(c, &u0), abs_dot(c, &u1));
            let fits = |k: f64| {
                (c0 - k * d0).abs() <= inp.tolerance * (t0 + (k * d0).abs())
                    && (c1 - k * d1).abs() <= inp.tolerance * (t1 + (k * d1).abs())
            };
            if inp.kappa.is_some_and(fits) && (d0 != 0.0 || d1 != 0.0) {
                s = Status::Tied(j);
                break;
            }
            if d0 != 0.0 && scaled.is_none() && fits(c0 / d0) && c0 != 0.0 {
                scaled = Some(Status::Scaled(j, c0 / d0));
            }
        }
        if s == Status::Untied {
            s = scaled.unwrap_or(Status::Untied);
        }
        status.insert(i, s);
        Some(s)
    };
    let ty_acts = |i: usize| &activations[&g.ty[&cands[i]]];
    // What every wrong gradient is computed from.
    let feeds_every_wrong_gradient = |c: ValueId| {
        inp.wrong_gradients.iter().all(|&w| {
            let mut seen = HashSet::new();
            let mut stack = vec![w];
            while let Some(v) = stack.pop() {
                if v == c {
                    return true;
                }
                if seen.insert(v) {
                    if let Some(k) = op_index(&v) {
                        stack.extend(g.reads[k].iter().copied());
                    }
                }
            }
            false
        })
    };
    for i in 0..cands.len() {
        let s = status_of(i, rng, &mut probes)?;
        if matches!(s, Status::Tied(_)) {
            continue;
        }
        let ups = &near[&cands[i]];
        let mut ups_tied = true;
        for &u in ups {
            ups_tied &= matches!(status_of(u, rng, &mut probes)?, Status::Tied(_));
        }
        // With no backward inputs (the backward's first values, read from
        // the forward alone: the loss's own cotangent, or a residual) it is
        // to blame only if every wrong gradient is computed from it.
        if !ups_tied || (ups.is_empty() && !feeds_every_wrong_gradient(cands[i])) {
            continue;
        }
        // Nothing after it on the way to the gradient is right again.
        let mut recovers = false;
        for (d, dv) in cands.iter().enumerate().skip(i + 1) {
            if all[dv][i / 64] >> (i % 64) & 1 == 1
                && matches!(status_of(d, rng, &mut probes)?, Status::Tied(_))
            {
                recovers = true;
                break;
            }
        }
        if recovers {
            continue;
        }
        let finding = match s {
            Status::Scaled(j, r) => Finding::Scaled {
                of: site(g, ty_acts(i)[j]),
                ratio: r,
            },
            _ => Finding::NotACotangent {
                tried: tried
                    .get(&i)
                    .map(|t| t.iter().map(|a| site(g, *a)).collect())
                    .unwrap_or_default(),
            },
        };
        let reads = ups
            .iter()
            .filter_map(|&u| match status.get(&u) {
                Some(Status::Tied(j)) => Some((site(g, cands[u]), site(g, ty_acts(u)[*j]))),
                _ => None,
            })
            .collect();
        return Some(Localisation {
            param: param.to_string(),
            at: site(g, cands[i]),
            finding,
            reads,
            probes,
        });
    }
    // No backward value before it is to blame: the gradient itself, when
    // what it reads is right.
    let ups = near.get(&grad)?;
    let mut reads = Vec::new();
    for &u in ups {
        match status_of(u, rng, &mut probes)? {
            Status::Tied(j) => reads.push((site(g, cands[u]), site(g, ty_acts(u)[j]))),
            _ => return None,
        }
    }
    (!reads.is_empty()).then(|| Localisation {
        param: param.to_string(),
        at: site(g, grad),
        finding: Finding::TheGradient,
        reads,
        probes,
    })
}
