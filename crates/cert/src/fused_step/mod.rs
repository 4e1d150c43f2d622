//! Certify a fused train step certgrad did not write (`certgrad
//! certify-step`). From the text alone: the roles of its arguments and
//! results ([`roles`]); for every parameter θ, the value its update reads as
//! the gradient — the first value of θ's type that every path from the data
//! to θ' passes through ([`graph`]); and the tie of those values to the
//! step's own loss output. The oracle is the directional derivative of the
//! loss along a random v on every parameter at once, by dual numbers through
//! the forward part only (the loss's slice of the step, which never runs the
//! backward), against Σ ⟨g_θ, v_θ⟩. The update may read κ·∇L instead of ∇L
//! (a sum over the batch, a learning rate folded in): κ is measured, must be
//! one number for every parameter, and is reported — a parameter whose
//! gradient carries another scale (a missing 1/N on one bias) is refuted.
//! When the joint probes disagree, each parameter is probed alone to name
//! the wrong ones. Then the recognised optimizer tails are fitted to the
//! step's outputs ([`tail`]); a tail not recognised is reported as such.

mod graph;
mod locate;
mod roles;
mod tail;

pub use locate::{Finding, Localisation};
pub use roles::{ArgRole, ResultRole, RoleError, RoleHints, Roles, Slot, TextNames};
pub use tail::{StateFit, TailReport};

use crate::tie::Verdict;
use den::{eval_func, eval_replicas, Dual, EvalOptions, Evaluation, Scalar, Tensor, Value};
use graph::Graph;
use ir::rng::{Rng, CERT_SALT};
use ir::{Func, FuncResult, Module, OpKind, TensorType, ValueId};
use std::collections::HashSet;
use std::time::Instant;

#[derive(Clone, Debug)]
pub struct FusedStepOptions {
    pub seed: u64,
    /// Joint probes (at least 2: the first measures κ, the others check it).
    pub probes: usize,
    /// |Σ⟨g, v⟩ − κ·∂L·v| ≤ tol · (Σ|g ⊙ v| + |κ·∂L·v|).
    pub tolerance: f64,
    /// One value per argument (`--inputs`), else a drawn point.
    pub inputs: Option<Vec<Value<f64>>>,
    pub hints: RoleHints,
    /// Told each phase as it starts, with the seconds spent so far (long
    /// steps take minutes).
    pub progress: Option<fn(&str)>,
    /// Independent evaluations run side by side only while their estimated
    /// live bytes fit in this together.
    pub memory_budget: u64,
}

impl Default for FusedStepOptions {
    fn default() -> Self {
        FusedStepOptions {
            seed: 0,
            probes: 2,
            tolerance: 1e-8,
            inputs: None,
            hints: RoleHints::default(),
            progress: None,
            memory_budget: 4 << 30,
        }
    }
}

/// A value of the step's text: what defines it and where.
#[derive(Clone, Debug, PartialEq)]
pub struct Site {
    pub op: &'static str,
    pub line: Option<u32>,
    pub col: Option<u32>,
}

#[derive(Clone, Debug, PartialEq)]
pub enum RowStatus {
    /// ⟨g, v⟩ = κ·∂L·v with the step's common κ.
    Tied,
    /// The loss does not depend on θ and g is zero (a bias before a norm).
    Zero,
    /// g is not κ·∇L: why, with the measured numbers.
    Wrong(String),
    /// No value of θ's type lies on every path from the data to θ'.
    NoGradient,
    /// Not probed alone, and the joint probes failed (see the other rows).
    Unresolved,
}

#[derive(Clone, Debug)]
pub struct ParamRow {
    pub arg: usize,
    pub name: String,
    pub ty: TensorType,
    pub output: usize,
    pub gradient: Option<Site>,
    /// κ measured for this parameter alone (when probed alone).
    pub scale: Option<f64>,
    pub status: RowStatus,
}

#[derive(Clone, Debug)]
pub struct FusedStepReport {
    pub func: String,
    pub roles: Roles,
    pub rows: Vec<ParamRow>,
    /// The common scale: the update reads κ·∂loss/∂θ.
    pub scale: Option<f64>,
    /// ‖g‖ over every parameter's gradient value at the point: with κ < 1
    /// a round number here is a global-norm clip's threshold.
    pub gradient_norm: f64,
    pub loss: f64,
    pub probes: usize,
    /// Largest |Σ⟨g, v⟩ − κ·∂L·v| over its tolerance's scale.
    pub relative_gap: f64,
    /// Smallest margin of an untied decision of the loss's forward.
    pub min_margin: Option<(f64, String)>,
    /// Decisions tied at the point across which the loss is flat (a max
    /// over ReLU zeros): no one-sided derivative there.
    pub flat_ties: usize,
    pub tail: TailReport,
    /// Where the first refuted gradient's backward first goes wrong.
    pub localisation: Option<Localisation>,
    /// The point was given (`--inputs`).
    pub given_point: bool,
    /// Data-parallel replicas R (the step's `all_reduce` groups name
    /// replicas 0..R): the oracle is the mean of the R replicas' losses,
    /// each on its own data. 1 for a single-replica step.
    pub replicas: usize,
    pub phases: Vec<(&'static str, f64)>,
    pub verdict: Verdict,
}

impl FusedStepReport {
    pub fn certified(&self) -> bool {
        self.verdict == Verdict::Certified
    }
}

fn site(g: &Graph, v: ValueId) -> Site {
    let op = g.op_of(v);
    Site {
        op: op.map_or("argument", |o| o.kind.name()),
        line: op.and_then(|o| o.loc.line()),
        col: op.and_then(|o| o.loc.0.map(|(_, c)| c)),
    }
}

/// `f` returning `values` instead of its results, dead ops pruned.
fn returning(f: &Func, values: &[ValueId], g: &Graph) -> Func {
    let mut h = f.clone();
    let ret = h.body.ops.last_mut().expect("func.return");
    ret.operands = values.to_vec();
    h.results = values
        .iter()
        .map(|v| FuncResult {
            ty: g.ty[v].clone(),
            attrs: None,
        })
        .collect();
    ir::passes::prune_dead_ops(&mut h);
    h
}

fn module_with(m: &Module, f: Func) -> Module {
    let mut out = m.clone();
    out.funcs.retain(|h| h.name != f.name);
    out.funcs.push(f);
    out
}

fn shape(ty: &TensorType) -> Vec<usize> {
    ty.shape.iter().map(|&d| d as usize).collect()
}

/// A point of the step: parameters at a fan-in scale, data standard normal,
/// one-hot label rows, integer labels and token ids 0 or 1, state small and
/// non-negative (second moments stay valid), hyper-parameters in [0.2, 0.8],
/// integer counters 3.
fn draw(roles: &Roles, rng: &mut Rng) -> Vec<Value<f64>> {
    roles
        .args
        .iter()
        .map(|a| {
            let sh = shape(&a.ty);
            let n: usize = sh.iter().product();
            if !a.ty.elem.is_float() {
                // Integer data are labels or token ids: 0 or 1 is a valid
                // index into any axis of two or more (a larger draw could
                // fall outside a vocabulary and gather a NaN fill).
                // Integer hyper-parameters are counters (Adam's step).
                let v: Vec<i64> = match a.role {
                    ArgRole::Hyper => vec![3; n],
                    _ => (0..n).map(|_| rng.below(2) as i64).collect(),
                };
                return Value::Int(Tensor::new(sh, v), a.ty.elem);
            }
            let data: Vec<f64> = match &a.role {
                ArgRole::Param { .. } => {
                    let fan_in = if sh.len() >= 2 { n / sh[0] } else { 4 };
                    let std = 1.0 / (fan_in.max(1) as f64).sqrt();
                    (0..n).map(|_| std * rng.normal()).collect()
                }
                ArgRole::State { .. } => (0..n).map(|_| 0.01 * rng.normal().abs()).collect(),
                ArgRole::Labels => {
                    let cols = *sh.last().unwrap_or(&1);
                    let mut d = vec![0.0; n];
                    for row in 0..n / cols.max(1) {
                        d[row * cols + rng.below(cols.max(1))] = 1.0;
                    }
                    d
                }
                ArgRole::Data => (0..n).map(|_| rng.normal()).collect(),
                ArgRole::Hyper => (0..n).map(|_| 0.2 + 0.6 * rng.unit()).collect(),
            };
            Value::Float(Tensor::new(sh, data), a.ty.elem)
        })
        .collect()
}

fn dot(a: &[f64], b: &[f64]) -> f64 {
    a.iter().zip(b).map(|(x, y)| x * y).sum()
}

fn abs_dot(a: &[f64], b: &[f64]) -> f64 {
    a.iter().zip(b).map(|(x, y)| (x * y).abs()).sum()
}

/// The decisions of the loss's forward at the point.
#[derive(Clone, Debug, Default)]
struct Margins {
    /// The smallest margin of a decision that is not tied, and where.
    untied: Option<(f64, String)>,
    /// Decisions taken with margin exactly 0, and the first op holding one.
    ties: usize,
    tied_at: Option<String>,
}

/// The loss's forward slice at the point, one input list per replica.
struct Oracle<'a> {
    module: Module,
    func: String,
    points: &'a [Vec<Value<f64>>],
}

/// Evaluate on one replica, or on R with their `all_reduce`s.
fn eval_on<S: Scalar + Send>(
    m: &Module,
    func: &str,
    inputs: Vec<Vec<Value<S>>>,
    opts: &EvalOptions,
) -> Result<Vec<Evaluation<S>>, String> {
    if inputs.len() == 1 {
        let one = inputs.into_iter().next().expect("one replica");
        eval_func(m, func, one, opts).map(|e| vec![e])
    } else {
        eval_replicas(m, func, inputs, opts)
    }
    .map_err(|e| e.to_string())
}

impl Oracle<'_> {
    /// (loss, ∂loss·v, the smallest margin and where) for tangents `v` on
    /// the arguments listed (the rest carry none).
    /// Over R replicas: the mean of their losses and derivatives (the
    /// function a data-parallel update's all_reduce ÷ R follows), the
    /// margins of replica 0.
    fn probe(&self, v: &[(usize, Vec<f64>)]) -> Result<(f64, f64, Margins), String> {
        let dual = |point: &[Value<f64>]| -> Vec<Value<Dual<f64>>> {
            point
                .iter()
                .enumerate()
                .map(|(i, x)| match x {
                    Value::Float(t, e) => {
                        let tan = v.iter().find(|(a, _)| *a == i).map(|(_, d)| d);
                        let data = t
                            .data
                            .iter()
                            .enumerate()
                            .map(|(k, &p)| Dual::new(p, tan.map_or(0.0, |d| d[k])))
                            .collect();
                        Value::Float(Tensor::new(t.shape.clone(), data), *e)
                    }
                    Value::Int(t, e) => Value::Int(t.clone(), *e),
                })
                .collect()
        };
        let opts = EvalOptions {
            fast: true,
            record_margins: true,
            replicas: 1,
        };
        let evs = eval_on::<Dual<f64>>(
            &self.module,
            &self.func,
            self.points.iter().map(|p| dual(p)).collect(),
            &opts,
        )?;
        let (mut value, mut tangent) = (0.0, 0.0);
        for ev in &evs {
            let d = &ev.outputs[0]
                .as_float()
                .ok_or("the loss is not float")?
                .data[0];
            value += d.value;
            tangent += d.tangent;
        }
        let r = evs.len() as f64;
        let ev = &evs[0];
        let margin = Margins {
            untied: ev
                .margins
                .iter()
                .filter(|m| m.decisions > 0 && m.ties == 0)
                .min_by(|a, b| a.min.total_cmp(&b.min))
                .map(|m| {
                    (
                        m.min,
                        format!(
                            "{} at line {}",
                            m.op,
                            m.line.map_or("?".into(), |l| l.to_string())
                        ),
                    )
                }),
            ties: ev.margins.iter().map(|m| m.ties).sum(),
            tied_at: ev.margins.iter().find(|m| m.ties > 0).map(|m| {
                format!(
                    "{} at line {}",
                    m.op,
                    m.line.map_or("?".into(), |l| l.to_string())
                )
            }),
        };
        Ok((value / r, tangent / r, margin))
    }
}

impl Oracle<'_> {
    /// The loss in f64 with `eps·w` added to the listed arguments.
    fn loss_at(&self, w: &[(usize, Vec<f64>)], eps: f64) -> Result<f64, String> {
        let moved = |point: &[Value<f64>]| -> Vec<Value<f64>> {
            point
                .iter()
                .enumerate()
                .map(|(i, x)| match (x, w.iter().find(|(a, _)| *a == i)) {
                    (Value::Float(t, e), Some((_, d))) => {
                        let data = t.data.iter().zip(d).map(|(p, d)| p + eps * d).collect();
                        Value::Float(Tensor::new(t.shape.clone(), data), *e)
                    }
                    _ => x.clone(),
                })
                .collect()
        };
        let evs = eval_on::<f64>(
            &self.module,
            &self.func,
            self.points.iter().map(|p| moved(p)).collect(),
            &EvalOptions::default(),
        )?;
        let mut sum = 0.0;
        for ev in &evs {
            sum += ev.outputs[0]
                .as_float()
                .ok_or("the loss is not float")?
                .data[0];
        }
        Ok(sum / evs.len() as f64)
    }

    /// Whether the loss is differentiable across its tied decisions (a max
    /// over ReLU zeros): at a true kink the second difference
    /// L(x+εw) + L(x−εw) − 2L(x) is first order in ε for almost every w,
    /// where the tied branches agree it is second order. The test
    /// `check-vjp` applies per output, on the one loss.
    fn ties_are_flat(
        &self,
        params: &[(usize, usize)],
        rng: &mut Rng,
        budget: u64,
    ) -> Result<bool, String> {
        // Second order in ε where the tied branches agree.
        let flat = |z: f64, p: f64, m: f64| {
            (p + m - 2.0 * z).abs() <= 1e-3 * (p - m).abs() + 8.0 * f64::EPSILON * z.abs()
        };
        let xmax = params
            .iter()
            .flat_map(|(a, _)| {
                self.points[0][*a]
                    .as_float()
                    .map(|t| t.data.clone())
                    .unwrap_or_default()
            })
            .fold(0f64, |m, x| m.max(x.abs()))
            .max(1e-30);
        let w: Vec<(usize, Vec<f64>)> = params
            .iter()
            .map(|&(a, n)| (a, (0..n).map(|_| rng.signed_unit()).collect()))
            .collect();
        let eps = 1e-9 * xmax;
        // Three independent evaluations, side by side when they fit.
        let peak = ir::limits::peak_live_bytes(&self.module, &self.func, Some(8))
            .map_or(0, |p| p.bytes)
            * self.points.len() as u128;
        if 3 * peak > budget as u128 {
            let (z, p, m) = (
                self.loss_at(&w, 0.0)?,
                self.loss_at(&w, eps)?,
                self.loss_at(&w, -eps)?,
            );
            return Ok(flat(z, p, m));
        }
        let (z, p, m) = std::thread::scope(|sc| {
            let w = &w;
            let hp = sc.spawn(move || self.loss_at(w, eps));
            let hm = sc.spawn(move || self.loss_at(w, -eps));
            let z = self.loss_at(w, 0.0);
            let join = |h: std::thread::ScopedJoinHandle<'_, Result<f64, String>>| {
                h.join()
                    .unwrap_or_else(|_| Err("an evaluation panicked".into()))
            };
            (z, join(hp), join(hm))
        });
        let (z, p, m) = (z?, p?, m?);
        Ok(flat(z, p, m))
    }
}

/// Certify `func` of `module`. `names`: read from the text
/// ([`TextNames::read`]).
pub fn certify_fused_step(
    module: &Module,
    func: &str,
    names: &TextNames,
    opts: &FusedStepOptions,
) -> Result<FusedStepReport, RoleError> {
    let mut phases = Vec::new();
    let t0 = Instant::now();
    let tell = |what: &str| {
        if let Some(p) = opts.progress {
            p(&format!("[{:7.1} s] {what}", t0.elapsed().as_secs_f64()));
        }
    };
    let original = module
        .func(func)
        .ok_or_else(|| RoleError(format!("no function @{func}")))?;
    let f = ir::passes::inline_calls(module, original)
        .ok_or_else(|| RoleError(format!("@{func}: a callee is missing or the calls recurse")))?;
    let g = Graph::new(&f);
    let roles = roles::find_roles(&g, names, &opts.hints)?;
    let data = roles.data();
    // Data-parallel: the replicas the all_reduce groups name.
    let replicas = f
        .body
        .ops
        .iter()
        .filter_map(|o| match &o.kind {
            OpKind::AllReduce { replica_groups, .. } => {
                replica_groups.iter().flatten().copied().max()
            }
            _ => None,
        })
        .max()
        .map_or(1, |m| m as usize + 1);
    // The values the loss reads: the forward. A gradient is never one.
    let mut forward: HashSet<ValueId> = HashSet::new();
    let mut stack = vec![g.returned[roles.loss]];
    while let Some(v) = stack.pop() {
        if forward.insert(v) {
            if let Some(graph::Def::Op(k, _)) = g.def.get(&v) {
                stack.extend(g.reads[*k].iter().copied());
            }
        }
    }
    let mut rows = Vec::new();
    let mut grads: Vec<ValueId> = Vec::new();
    for i in roles.params() {
        let output = roles.output_of(i).expect("a parameter has an output");
        let chain = g.dominators(g.returned[output], &data);
        let want = &f.params[i].ty;
        let mut at = chain
            .iter()
            .position(|v| &g.ty[v] == want && !forward.contains(v));
        // A value that only a transpose, reshape or reverse follows on the
        // way to the update is in another layout of the same type (a square
        // conv kernel's IOHW); the gradient is where the layout ops end.
        while let Some(p) = at {
            let next = chain.get(p + 1).filter(|n| {
                &g.ty[*n] == want
                    && g.op_of(**n).is_some_and(|o| {
                        matches!(
                            o.kind,
                            OpKind::Transpose { .. } | OpKind::Reshape | OpKind::Reverse { .. }
                        ) && o.operands == [chain[p]]
                    })
            });
            match next {
                Some(_) => at = Some(p + 1),
                None => break,
            }
        }
        // Data-parallel: the gradient the update reads is the all_reduce of
        // the replicas' gradients, then its scaling by a constant (÷ R).
        if let Some(p) = at {
            let after = |q: usize, pick: &dyn Fn(&ir::Op) -> bool| {
                chain.get(q + 1).is_some_and(|n| {
                    &g.ty[n] == want
                        && g.op_of(*n)
                            .is_some_and(|o| pick(o) && o.operands.contains(&chain[q]))
                })
            };
            let constant =
                |v: &ValueId| !g.deps[v].any_of(&(0..f.params.len()).collect::<Vec<_>>());
            if after(p, &|o| matches!(o.kind, OpKind::AllReduce { .. })) {
                let mut q = p + 1;
                if after(q, &|o| {
                    matches!(
                        o.kind,
                        OpKind::Binary(ir::BinaryOp::Multiply | ir::BinaryOp::Divide)
                    ) && o.operands.iter().filter(|x| **x != chain[q]).all(constant)
                }) {
                    q += 1;
                }
                at = Some(q);
            }
        }
        let gv = at.map(|p| chain[p]);
        if let Some(v) = gv {
            grads.push(v);
        }
        rows.push(ParamRow {
            arg: i,
            name: roles.args[i].name.clone(),
            ty: f.params[i].ty.clone(),
            output,
            gradient: gv.map(|v| site(&g, v)),
            scale: None,
            status: if gv.is_some() {
                RowStatus::Unresolved
            } else {
                RowStatus::NoGradient
            },
        });
    }
    let grad_of: Vec<Option<ValueId>> = {
        let mut it = grads.iter();
        rows.iter()
            .map(|r| r.gradient.as_ref().and_then(|_| it.next().copied()))
            .collect()
    };
    phases.push(("roles and gradients", t0.elapsed().as_secs_f64()));

    // The point, and the step at it: its results and every gradient value.
    tell(&format!(
        "{} parameters, loss = result {}; evaluating the step at the point (f64)",
        rows.len(),
        roles.loss
    ));
    let t1 = Instant::now();
    let given_point = opts.inputs.is_some();
    let point = match &opts.inputs {
        Some(v) => {
            if v.len() != f.params.len() {
                return Err(RoleError(format!(
                    "@{func} takes {} arguments, {} values given",
                    f.params.len(),
                    v.len()
                )));
            }
            v.clone()
        }
        None => draw(&roles, &mut Rng::salted(opts.seed, CERT_SALT)),
    };
    // Replica r ≥ 1: the same parameters, state and hyper-parameters, its
    // own data and labels (given inputs: the same on every replica).
    let points: Vec<Vec<Value<f64>>> = (0..replicas)
        .map(|r| {
            if r == 0 || given_point {
                return point.clone();
            }
            let own = draw(&roles, &mut Rng::derived(opts.seed, CERT_SALT, r as u64));
            point
                .iter()
                .zip(own)
                .zip(&roles.args)
                .map(|((p, o), a)| match a.role {
                    ArgRole::Data | ArgRole::Labels => o,
                    _ => p.clone(),
                })
                .collect()
        })
        .collect();
    if replicas > 1 {
        tell(&format!(
            "data-parallel: {replicas} replicas (the all_reduce groups), each on its own data"
        ));
    }
    let mut wanted: Vec<ValueId> = g.returned.clone();
    wanted.extend(grads.iter().copied());
    let step_name = format!("{}__certify_step", f.name);
    let step_fn = Func {
        name: step_name.clone(),
        ..returning(&f, &wanted, &g)
    };
    let step_mod = module_with(module, step_fn);
    let ev = eval_on::<f64>(
        &step_mod,
        &step_name,
        points.clone(),
        &EvalOptions {
            fast: true,
            record_margins: false,
            replicas: 1,
        },
    );
    let outs = match ev {
        Ok(e) => e.into_iter().next().expect("replica 0").outputs,
        Err(e) => {
            return Ok(undecided(
                func,
                roles,
                rows,
                given_point,
                phases,
                format!("the step does not evaluate: {e}"),
            ));
        }
    };
    let nres = g.returned.len();
    let gvals: Vec<Tensor<f64>> = outs[nres..]
        .iter()
        .map(|v| v.as_float().cloned().expect("a float gradient"))
        .collect();
    phases.push(("step at the point (f64)", t1.elapsed().as_secs_f64()));

    // The oracle: the loss's slice over dual numbers.
    let t2 = Instant::now();
    let loss_name = format!("{}__certify_loss", f.name);
    let loss_fn = Func {
        name: loss_name.clone(),
        ..returning(&f, &[g.returned[roles.loss]], &g)
    };
    let oracle = Oracle {
        module: module_with(module, loss_fn),
        func: loss_name,
        points: &points,
    };
    let tied: Vec<usize> = (0..rows.len()).filter(|&r| grad_of[r].is_some()).collect();
    let gval = |r: usize| -> &[f64] {
        let k = tied.iter().position(|&x| x == r).expect("tied row");
        &gvals[k].data
    };
    let mut rng = Rng::derived(opts.seed, CERT_SALT, 0x5EED_57E9);
    let mut dir = |n: usize| -> Vec<f64> { (0..n).map(|_| rng.normal()).collect() };
    let mut loss = f64::NAN;
    let mut margins = Margins::default();
    let mut kappa: Option<f64> = None;
    let mut worst = 0.0f64;
    let mut joint_ok = !tied.is_empty();
    // The joint probes are independent: they run side by side, as many at
    // once as there are cores (each a single-threaded dual evaluation).
    let n_probes = opts.probes.max(2);
    let directions: Vec<Vec<(usize, Vec<f64>)>> = (0..n_probes)
        .map(|_| {
            tied.iter()
                .map(|&r| (rows[r].arg, dir(rows[r].ty.num_elements() as usize)))
                .collect()
        })
        .collect();
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    // Side by side only while their peaks fit the memory budget together
    // (a dual number holds two f64).
    let peak = ir::limits::peak_live_bytes(&oracle.module, &oracle.func, Some(16))
        .map_or(0, |p| p.bytes)
        * replicas as u128;
    let fit = (opts.memory_budget as u128 / peak.max(1)).max(1) as usize;
    let side_by_side = cores.min(fit).max(1);
    tell(&format!(
        "each dual evaluation holds up to {} live: {side_by_side} at once",
        ir::limits::human_bytes(peak)
    ));
    let mut probed = Vec::with_capacity(n_probes);
    for batch in directions.chunks(side_by_side) {
        tell(&format!(
            "joint probe(s) {}–{} of {n_probes}: the loss's forward over dual numbers",
            probed.len() + 1,
            probed.len() + batch.len()
        ));
        let oracle = &oracle;
        probed.extend(std::thread::scope(|sc| {
            let hs: Vec<_> = batch
                .iter()
                .map(|v| sc.spawn(move || oracle.probe(v)))
                .collect();
            hs.into_iter()
                .map(|h| h.join().unwrap_or_else(|_| Err("a probe panicked".into())))
                .collect::<Vec<_>>()
        }));
    }
    for (p, (v, outcome)) in directions.iter().zip(probed).enumerate() {
        let (l, s, m) = match outcome {
            Ok(x) => x,
            Err(e) => {
                return Ok(undecided(
                    func,
                    roles,
                    rows,
                    given_point,
                    phases,
                    format!("the loss's forward does not evaluate over dual numbers: {e}"),
                ));
            }
        };
        loss = l;
        if p == 0 {
            margins = m;
        }
        if !l.is_finite() || !s.is_finite() {
            return Ok(undecided(func, roles, rows, given_point, phases, format!("the loss or its derivative is not finite at the point (loss {l}, ∂loss·v {s}); give another point with --inputs or --seed")));
        }
        let claimed: f64 = tied.iter().zip(v).map(|(&r, (_, d))| dot(gval(r), d)).sum();
        let terms: f64 = tied
            .iter()
            .zip(v)
            .map(|(&r, (_, d))| abs_dot(gval(r), d))
            .sum();
        if !claimed.is_finite() {
            joint_ok = false;
            break;
        }
        match kappa {
            None => {
                if s == 0.0 || claimed == 0.0 {
                    joint_ok = claimed == 0.0 && s == 0.0;
                    break;
                }
                kappa = Some(claimed / s);
            }
            Some(k) => {
                let gap = (claimed - k * s).abs() / (terms + (k * s).abs()).max(f64::MIN_POSITIVE);
                worst = worst.max(gap);
                if gap.is_nan() || gap > opts.tolerance {
                    joint_ok = false;
                }
            }
        }
    }
    let probes_joint = opts.probes.max(2);
    let mut probes_alone = 0;
    if joint_ok {
        for r in &tied {
            rows[*r].status = RowStatus::Tied;
        }
    } else {
        // Each parameter alone: two probes give its own κ and check it.
        let mut kappas = Vec::new();
        // A gradient at f64 noise next to the largest one (a conv bias in
        // front of a batch norm: zero in exact arithmetic, ~1e-16 after the
        // normalisation's cancellations) has no direction to tie.
        let gmax = tied
            .iter()
            .flat_map(|&r| gval(r).iter())
            .fold(0f64, |m, x| m.max(x.abs()));
        for &r in &tied {
            tell(&format!("probing %{} alone", rows[r].name));
            let i = rows[r].arg;
            let n = rows[r].ty.num_elements() as usize;
            let gv = gval(r).to_vec();
            let mut ks = Vec::new();
            let mut status = None;
            for _ in 0..2 {
                let d = dir(n);
                probes_alone += 1;
                let (_, s, _) = match oracle.probe(&[(i, d.clone())]) {
                    Ok(x) => x,
                    Err(e) => {
                        status = Some(RowStatus::Wrong(format!("the oracle failed: {e}")));
                        break;
                    }
                };
                let c = dot(&gv, &d);
                let terms = abs_dot(&gv, &d);
                if !c.is_finite() {
                    status = Some(RowStatus::Wrong(
                        "its gradient is not finite where the loss and its derivative are".into(),
                    ));
                    break;
                }
                ks.push((c, s, terms));
            }
            if status.is_none() && ks.len() == 2 {
                let (c0, s0, t0) = ks[0];
                let (c1, s1, t1) = ks[1];
                let noise = gv.iter().all(|x| x.abs() <= 1e-12 * gmax);
                let zero = |c: f64, s: f64, t: f64| {
                    (noise || c.abs() <= opts.tolerance * t.max(1e-300))
                        && s.abs() <= 1e-12 * (t + 1.0)
                };
                if zero(c0, s0, t0) && zero(c1, s1, t1) || (c0 == 0.0 && s0 == 0.0) {
                    status = Some(RowStatus::Zero);
                } else if s0 == 0.0 {
                    status = Some(RowStatus::Wrong(format!(
                        "the loss does not depend on it, but its gradient does not vanish (⟨g, v⟩ = {c0:.3e})"
                    )));
                } else {
                    let k = c0 / s0;
                    let gap = (c1 - k * s1).abs() / (t1 + (k * s1).abs()).max(f64::MIN_POSITIVE);
                    worst = worst.max(gap);
                    if gap <= opts.tolerance {
                        rows[r].scale = Some(k);
                        kappas.push(k);
                    } else {
                        status = Some(RowStatus::Wrong(format!(
                            "not a multiple of ∂loss/∂θ: ⟨g, v⟩ / ∂loss·v is {:.6e} along one direction and {:.6e} along another",
                            k,
                            c1 / s1
                        )));
                    }
                }
            }
            if let Some(s) = status {
                rows[r].status = s;
            }
        }
        // The common scale: the one most parameters share.
        let common = kappas
            .iter()
            .copied()
            .max_by_key(|k| kappas.iter().filter(|x| close(**x, *k, 1e-6)).count());
        kappa = common;
        for &r in &tied {
            if let (Some(k), Some(c)) = (rows[r].scale, common) {
                rows[r].status = if close(k, c, 1e-6) {
                    RowStatus::Tied
                } else {
                    RowStatus::Wrong(format!(
                        "its update reads {k:.6e}·∂loss/∂θ, the other parameters' {c:.6e}·∂loss/∂θ"
                    ))
                };
            }
        }
    }
    let flat = margins.ties == 0 || {
        let ps: Vec<(usize, usize)> = rows
            .iter()
            .map(|r| (r.arg, r.ty.num_elements() as usize))
            .collect();
        oracle
            .ties_are_flat(&ps, &mut rng, opts.memory_budget)
            .unwrap_or(false)
    };
    phases.push(("gradient ties (dual f64)", t2.elapsed().as_secs_f64()));

    let t3 = Instant::now();
    let tail = match kappa {
        Some(k)
            if rows
                .iter()
                .all(|r| matches!(r.status, RowStatus::Tied | RowStatus::Zero)) =>
        {
            let params: Vec<tail::ParamAtPoint> = rows
                .iter()
                .enumerate()
                .filter(|(r, _)| grad_of[*r].is_some())
                .map(|(r, row)| tail::ParamAtPoint {
                    arg: row.arg,
                    theta: point[row.arg].as_float().expect("float").data.clone(),
                    updated: outs[row.output].as_float().expect("float").data.clone(),
                    grad: gval(r).iter().map(|x| x / k).collect(),
                })
                .collect();
            tail::fit(&roles, &g, &point, &outs[..nres], &params)
        }
        _ => TailReport::not_checked("the gradients are not all tied"),
    };
    phases.push(("tail fit", t3.elapsed().as_secs_f64()));

    let t4 = Instant::now();
    if rows.iter().any(|r| matches!(r.status, RowStatus::Wrong(_))) {
        tell("following the first wrong gradient's backward");
    }
    let first_wrong = (0..rows.len()).find(|&r| matches!(rows[r].status, RowStatus::Wrong(_)));
    // (one replica's slices: a data-parallel step's backward is not followed)
    let localisation = first_wrong.filter(|_| replicas == 1).and_then(|r| {
        let params = roles.params();
        let inputs = locate::Inputs {
            module,
            f: &f,
            g: &g,
            forward: &forward,
            data: &data,
            params: &params,
            loss: g.returned[roles.loss],
            point: &point,
            kappa,
            wrong_gradients: (0..rows.len())
                .filter(|&w| matches!(rows[w].status, RowStatus::Wrong(_)))
                .filter_map(|w| grad_of[w])
                .collect(),
            tolerance: opts.tolerance,
            budget: LOCATE_PROBES,
        };
        locate::locate(&inputs, &rows[r].name, grad_of[r]?, &mut rng)
    });
    if first_wrong.is_some() {
        phases.push(("localisation (dual f64)", t4.elapsed().as_secs_f64()));
    }

    let wrong: Vec<&ParamRow> = rows
        .iter()
        .filter(|r| matches!(r.status, RowStatus::Wrong(_) | RowStatus::NoGradient))
        .collect();
    let verdict = if let Some(r) = wrong.first() {
        let detail = match &r.status {
            RowStatus::Wrong(w) => w.clone(),
            _ => format!(
                "no value of type {} lies on every path from the data to its update (result {})",
                r.ty, r.output
            ),
        };
        Verdict::Refuted {
            block: r.name.clone(),
            detail: format!(
                "{detail}{}",
                if wrong.len() > 1 {
                    format!(" ({} parameters wrong)", wrong.len())
                } else {
                    String::new()
                }
            ),
        }
    } else if margins.ties > 0 && !flat {
        Verdict::Undecided {
            reason: format!(
                "{} decision(s) of the loss's forward are tied at the point (first: {}) and the loss is not flat across them: the derivative is one-sided there; try another --seed",
                margins.ties,
                margins.tied_at.as_deref().unwrap_or("?")
            ),
        }
    } else {
        Verdict::Certified
    };
    Ok(FusedStepReport {
        func: func.to_string(),
        roles,
        rows,
        scale: kappa,
        gradient_norm: gvals
            .iter()
            .flat_map(|t| t.data.iter())
            .map(|x| x * x)
            .sum::<f64>()
            .sqrt(),
        loss,
        probes: probes_joint + probes_alone,
        relative_gap: worst,
        min_margin: margins.untied.clone(),
        flat_ties: if flat { margins.ties } else { 0 },
        tail,
        localisation,
        given_point,
        replicas,
        phases,
        verdict,
    })
}

/// Dual-number probes the localisation may spend (two per forward value).
const LOCATE_PROBES: usize = 256;

fn close(a: f64, b: f64, tol: f64) -> bool {
    (a - b).abs() <= tol * a.abs().max(b.abs())
}

fn undecided(
    func: &str,
    roles: Roles,
    rows: Vec<ParamRow>,
    given_point: bool,
    phases: Vec<(&'static str, f64)>,
    reason: String,
) -> FusedStepReport {
    FusedStepReport {
        func: func.to_string(),
        roles,
        rows,
        scale: None,
        gradient_norm: f64::NAN,
        loss: f64::NAN,
        probes: 0,
        relative_gap: f64::NAN,
        min_margin: None,
        flat_ties: 0,
        tail: TailReport::not_checked("undecided"),
        localisation: None,
        given_point,
        replicas: 1,
        phases,
        verdict: Verdict::Undecided { reason },
    }
}
