//! Leaf and block ties: "backward map B IS the VJP of forward F at x", checked
//! on the emitted IR with an oracle that never uses B.
//!
//! The oracle is forward mode: F evaluated over dual numbers gives J·v for a
//! direction v. The adjoint identity ⟨u, J·v⟩ = ⟨B(x, u), v⟩ is then checked for
//! random probes, block by block (the input and every parameter). Where every op
//! on the path is rational (piecewise-linear layers) the arithmetic is exact
//! (big rationals at dyadic points, integer probes): the identity holds exactly
//! or the tie fails, and a wrong block survives one probe with probability at
//! most 2/|S| (Schwartz–Zippel on the bilinear form uᵀ(J − Bᵀ)v, entries drawn
//! from S). Otherwise it runs in f64 with a stated relative tolerance. At small
//! sizes the full Jacobian is compared entry by entry as well.

use ir::rng::{Rng, CERT_SALT};
use den::{eval_func, Dual, EvalOptions, Exact, Scalar, Tensor, Value};
use ir::{Func, Module, TensorType};
use layers::{tie_funcs, CertLayer, Init, KinkSite};
use std::fmt;
use std::time::Instant;

/// Half-width of the integer range exact probes are drawn from.
const PROBE_RANGE: i64 = 1 << 20;

#[derive(Clone, Debug)]
pub struct TieOptions {
    pub seed: u64,
    /// Probes per block and point.
    pub probes: usize,
    /// Smooth points to certify at (each must pass).
    pub points: usize,
    /// Points drawn at most (kinks are resampled).
    pub max_attempts: usize,
    /// Compare the full Jacobian when (input + parameter + output) elements ≤ this.
    pub full_jacobian_limit: usize,
    /// Relative tolerance of the f64 evidence level: |⟨u,Jv⟩ − ⟨B(u),v⟩| must be
    /// at most this times (Σ|u⊙Jv| + Σ|B(u)⊙v| + ‖u‖·‖v‖).
    pub f64_tolerance: f64,
    /// Use exact rational arithmetic where the tie is rational. Whole nets turn
    /// this off: big rationals through eight convolutions cost minutes per
    /// evaluation, and f64 duals bound the same identity to ~1e-13.
    pub exact: bool,
    /// Localise a refuted block by basis tangents (one forward per element)
    /// only when it has at most this many elements.
    pub localise_limit: usize,
    /// Accept a point whose decisions tie (margin 0) when the forward is
    /// nevertheless differentiable there: the tied operands are locally equal
    /// (max over a window of ReLU zeros). Judged numerically by the second
    /// difference along a random direction (`Tie::ties_are_flat`); off for
    /// layer ties, whose random points never tie.
    pub accept_flat_ties: bool,
}

impl Default for TieOptions {
    fn default() -> Self {
        TieOptions {
            seed: 0,
            probes: 2,
            points: 3,
            max_attempts: 12,
            full_jacobian_limit: 64,
            f64_tolerance: 1e-9,
            exact: true,
            localise_limit: 4096,
            accept_flat_ties: false,
        }
    }
}

#[derive(Clone, Debug, PartialEq)]
pub enum Evidence {
    /// Exact rational arithmetic: the identity held exactly.
    Exact,
    /// f64 dual numbers; identity within the relative tolerance.
    F64 { tolerance: f64 },
}

impl fmt::Display for Evidence {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Evidence::Exact => f.write_str("exact"),
            Evidence::F64 { tolerance } => write!(f, "f64-tol {tolerance:.0e}"),
        }
    }
}

#[derive(Clone, Debug, PartialEq)]
pub enum Verdict {
    Certified,
    /// The backward map is not the VJP: which block, and the evidence.
    Refuted {
        block: String,
        detail: String,
    },
    /// No decision (every point on a kink, an evaluation error).
    Undecided {
        reason: String,
    },
}

/// Branch coverage of one decision site over the certified points.
#[derive(Clone, Debug, PartialEq)]
pub struct SiteCoverage {
    pub site: String,
    pub op: &'static str,
    /// Count per outcome (see `den::Margin::outcomes`).
    pub outcomes: Vec<usize>,
    /// Outcomes never taken, in words.
    pub missing: Vec<String>,
}

/// The outcomes a decision op can take, in words; `None` when the set is open
/// (window positions: padding offsets may be unreachable).
fn outcome_labels(op: &str) -> Option<&'static [&'static str]> {
    match op {
        "stablehlo.maximum" | "stablehlo.minimum" => Some(&["first operand", "second operand"]),
        "stablehlo.compare" => Some(&["false", "true"]),
        "stablehlo.clamp" => Some(&["below min", "inside", "above max"]),
        _ => None,
    }
}

impl SiteCoverage {
    /// A site's coverage from its per-outcome counts: the outcomes never
    /// taken are named where the op's outcome set is closed.
    pub(crate) fn from_counts(site: String, op: &'static str, outcomes: Vec<usize>) -> Self {
        let missing = outcome_labels(op)
            .map(|labels| {
                labels
                    .iter()
                    .enumerate()
                    .filter(|(k, _)| outcomes.get(*k).copied().unwrap_or(0) == 0)
                    .map(|(_, l)| l.to_string())
                    .collect()
            })
            .unwrap_or_default();
        SiteCoverage {
            site,
            op,
            outcomes,
            missing,
        }
    }
}

/// Adds one point's per-outcome counts to a site's running totals (a window
/// op's count vector grows with the offsets seen).
pub(crate) fn add_outcomes(totals: &mut Vec<usize>, outcomes: &[usize]) {
    if totals.len() < outcomes.len() {
        totals.resize(outcomes.len(), 0);
    }
    for (a, b) in totals.iter_mut().zip(outcomes) {
        *a += b;
    }
}

/// The smallest margin of the certified points, and where.
#[derive(Clone, Debug, PartialEq)]
pub struct MarginReport {
    pub site: String,
    pub index: usize,
    pub margin: f64,
}

/// What the adjoint identity saw on one block (the input or one parameter)
/// over every probe of every point.
#[derive(Clone, Debug, PartialEq)]
pub struct BlockResult {
    /// `dx`, or `d` + the parameter's path (`dstage2.conv1.W`).
    pub name: String,
    /// max |⟨u,J·v⟩ − ⟨B(u),v⟩| / scale (0 when exact and equal).
    pub max_rel_discrepancy: f64,
    /// Adjoint-identity probes checked on this block.
    pub probes: usize,
}

/// The smooth-point margin of one decision site over the certified points.
#[derive(Clone, Debug, PartialEq)]
pub struct SiteMargin {
    /// The kink site's activation path (`stage2.conv1.relu.pre_relu`), or
    /// `op#index` for a decision op no layer declared.
    pub site: String,
    pub op: &'static str,
    /// Smallest margin of any decision (|x| for ReLU, top-two gap for pools).
    pub min: f64,
    /// Flat index of that decision in the op's result.
    pub argmin: usize,
    /// Decisions taken, summed over the certified points.
    pub decisions: usize,
}

impl SiteMargin {
    /// A site's record from its first point's margin.
    pub(crate) fn first(site: String, m: &den::Margin) -> Self {
        SiteMargin {
            site,
            op: m.op,
            min: m.min,
            argmin: m.argmin,
            decisions: m.decisions,
        }
    }

    /// Folds another point's margin of the same site in.
    pub(crate) fn absorb(&mut self, m: &den::Margin) {
        if m.min < self.min {
            self.min = m.min;
            self.argmin = m.argmin;
        }
        self.decisions += m.decisions;
    }
}

#[derive(Clone, Debug)]
pub struct TieReport {
    pub layer: String,
    pub input: TensorType,
    pub evidence: Evidence,
    /// Adjoint-identity probes per block and point.
    pub probes: usize,
    pub blocks: usize,
    pub points: usize,
    /// Probability that a wrong block passes all probes at one point (exact only).
    pub failure_bound: Option<f64>,
    pub full_jacobian: bool,
    /// `None` when the forward takes no decisions (globally smooth).
    pub min_margin: Option<MarginReport>,
    /// Kinks met (and resampled away from).
    pub kinks_resampled: Vec<String>,
    /// Ties accepted at certified points because the forward is flat across
    /// them (see `TieOptions::accept_flat_ties`): site, index, count.
    pub flat_ties: Vec<String>,
    /// Branch coverage of every decision site of the forward.
    pub coverage: Vec<SiteCoverage>,
    /// Per block: the largest relative discrepancy the identity showed.
    pub block_results: Vec<BlockResult>,
    /// Per decision site of the forward, in op order: its smallest margin.
    pub site_margins: Vec<SiteMargin>,
    pub verdict: Verdict,
    pub seconds: f64,
}

impl TieReport {
    pub fn certified(&self) -> bool {
        self.verdict == Verdict::Certified
    }

    /// A report before any point: no blocks, sites or coverage yet, and
    /// certified until a check says otherwise.
    pub(crate) fn start(
        layer: String,
        input: TensorType,
        evidence: Evidence,
        probes: usize,
    ) -> Self {
        TieReport {
            layer,
            input,
            evidence,
            probes,
            blocks: 0,
            points: 0,
            failure_bound: None,
            full_jacobian: false,
            min_margin: None,
            kinks_resampled: Vec::new(),
            flat_ties: Vec::new(),
            coverage: Vec::new(),
            block_results: Vec::new(),
            site_margins: Vec::new(),
            verdict: Verdict::Certified,
            seconds: 0.0,
        }
    }
}

/// Certify `layer` at input type `input`.
pub fn certify_layer(layer: &dyn CertLayer, input: &TensorType, opts: &TieOptions) -> TieReport {
    let t0 = Instant::now();
    let name = layer.name();
    let undecided = |reason: String, t0: Instant| TieReport {
        verdict: Verdict::Undecided { reason },
        seconds: t0.elapsed().as_secs_f64(),
        ..TieReport::start(name.clone(), input.clone(), Evidence::Exact, 0)
    };
    let funcs = match tie_funcs(layer, input) {
        Ok(f) => f,
        Err(e) => return undecided(format!("cannot build the tie: {e}"), t0),
    };
    let module = funcs.module();
    // Blocks: the input (scaled per point), then each parameter (drawn from
    // its init); `backward` returns their cotangents in the same order.
    let blocks = std::iter::once(TieBlock {
        name: "dx".to_string(),
        ty: funcs.input.clone(),
        init: Init::Normal { std: 1.0 },
        scaled: true,
        arg: 0,
        bwd_out: 0,
    })
    .chain(funcs.params.iter().enumerate().map(|(i, p)| TieBlock {
        name: format!("d{}", p.name),
        ty: p.ty.clone(),
        init: p.init.clone(),
        scaled: false,
        arg: i + 1,
        bwd_out: i + 1,
    }))
    .collect();
    let tie = Tie {
        module: &module,
        forward: &funcs.forward,
        backward: "backward",
        sites: &funcs.sites,
        blocks,
        fixed: Vec::new(),
        outputs: vec![funcs.output.clone()],
        at: None,
        forward_margins_only: true,
    };
    // Exact when every op of the forward and backward is rational (decided from
    // the op kinds, without evaluating); an exact run that still meets a value
    // it cannot represent (a NaN constant) falls back to f64.
    let exact = opts.exact && module_is_rational(&module);
    let mut report = if exact {
        tie.run::<Exact>(opts, true)
    } else {
        tie.run::<f64>(opts, false)
    };
    if exact {
        if let Verdict::Undecided { reason } = &report.verdict {
            if reason.contains("not exact") {
                report = tie.run::<f64>(opts, false);
            }
        }
    }
    report.layer = name;
    report.seconds = t0.elapsed().as_secs_f64();
    report
}

/// True when every op of `m` maps rationals to rationals (so the exact scalar
/// can evaluate it): no exp/log/sqrt/rsqrt/tanh/logistic/erf/trig/power.
pub fn module_is_rational(m: &Module) -> bool {
    use ir::{BinaryOp, OpKind, UnaryOp};
    fn block(b: &ir::Block) -> bool {
        b.ops.iter().all(|op| {
            let ok = match &op.kind {
                OpKind::Unary(u) => matches!(
                    u,
                    UnaryOp::Negate
                        | UnaryOp::Abs
                        | UnaryOp::Sign
                        | UnaryOp::Floor
                        | UnaryOp::Ceil
                        | UnaryOp::RoundNearestEven
                        | UnaryOp::Not
                        | UnaryOp::Square
                ),
                OpKind::Binary(BinaryOp::Power) => false,
                _ => true,
            };
            ok && op.regions.iter().all(block)
        })
    }
    m.funcs.iter().all(|f| block(&f.body))
}

/// One float argument of the forward whose cotangent the backward claims: a
/// block of the adjoint identity.
#[derive(Clone, Debug)]
pub(crate) struct TieBlock {
    /// `dx`, `dstage2.conv1.W`, `da0`.
    pub name: String,
    pub ty: TensorType,
    /// Distribution of sampled values.
    pub init: Init,
    /// Multiplied by the point's scale (1, 8, 1/4 in turn) as well.
    pub scaled: bool,
    /// Position among the forward's arguments.
    pub arg: usize,
    /// Position of its cotangent among the backward's results.
    pub bwd_out: usize,
}

/// A (forward, backward) pair in one module: `forward(a…) -> (y…)` and
/// `backward(a…, dy…) -> (da…)`. Shared by layer ties (built from a CertLayer)
/// and pair checks (two user modules merged, `crate::pair`).
pub(crate) struct Tie<'a> {
    pub module: &'a Module,
    pub forward: &'a Func,
    pub backward: &'a str,
    /// Declared kink sites of `forward` (empty for foreign modules).
    pub sites: &'a [KinkSite],
    pub blocks: Vec<TieBlock>,
    /// Arguments with no cotangent (integer/boolean): position and value.
    pub fixed: Vec<(usize, Tensor<i64>, ir::ElemType)>,
    /// The forward's results; float ones get cotangent probes.
    pub outputs: Vec<TensorType>,
    /// A given point (one tensor per block) instead of sampled ones.
    pub at: Option<Vec<Tensor<f64>>>,
    /// Count margins of `forward`'s own ops only (layer ties), or of every
    /// function it calls as well (foreign modules keep helpers private).
    pub forward_margins_only: bool,
}

/// A point: every block, as f64 values (dyadic when exact).
struct Point {
    blocks: Vec<Tensor<f64>>,
}

/// Σ over tensors of Σ a⊙b.
fn dot_all<S: Scalar>(a: &[Tensor<S>], b: &[Tensor<S>]) -> S {
    a.iter()
        .zip(b)
        .fold(S::zero(), |acc, (x, y)| acc.add(&dot(&x.data, &y.data)))
}

fn abs_dot_all<S: Scalar>(a: &[Tensor<S>], b: &[Tensor<S>]) -> f64 {
    a.iter()
        .zip(b)
        .map(|(x, y)| abs_dot(&x.data, &y.data))
        .sum()
}

fn shape_of(t: &TensorType) -> Vec<usize> {
    t.shape.iter().map(|&d| d as usize).collect()
}

/// Round to a multiple of 2^-k: dyadic, so exactly representable everywhere.
fn dyadic(x: f64, k: i32) -> f64 {
    let s = 2f64.powi(k);
    (x * s).round() / s
}

fn dot<S: Scalar>(a: &[S], b: &[S]) -> S {
    a.iter()
        .zip(b)
        .fold(S::zero(), |acc, (x, y)| acc.add(&x.mul(y)))
}

fn abs_dot<S: Scalar>(a: &[S], b: &[S]) -> f64 {
    a.iter()
        .zip(b)
        .map(|(x, y)| (x.to_f64() * y.to_f64()).abs())
        .sum()
}

/// `[i, j, k]` of a flat index in a row-major shape.
pub fn multi_index(mut flat: usize, shape: &[usize]) -> String {
    let mut idx = vec![0; shape.len()];
    for d in (0..shape.len()).rev() {
        if shape[d] > 0 {
            idx[d] = flat % shape[d];
            flat /= shape[d];
        }
    }
    let parts: Vec<String> = idx.iter().map(|i| i.to_string()).collect();
    format!("[{}]", parts.join(", "))
}

impl Tie<'_> {
    fn block_names(&self) -> Vec<String> {
        self.blocks.iter().map(|b| b.name.clone()).collect()
    }

    fn block_types(&self) -> Vec<TensorType> {
        self.blocks.iter().map(|b| b.ty.clone()).collect()
    }

    fn sample_point(&self, rng: &mut Rng, scale: f64, exact: bool) -> Point {
        if let Some(at) = &self.at {
            return Point { blocks: at.clone() };
        }
        let q = |x: f64| if exact { dyadic(x, 10) } else { x };
        let blocks = self
            .blocks
            .iter()
            .map(|b| {
                let shape = shape_of(&b.ty);
                let n: usize = shape.iter().product();
                let s = if b.scaled { scale } else { 1.0 };
                let data = (0..n)
                    .map(|_| {
                        let z = rng.normal();
                        q(s * match b.init {
                            Init::Zeros => 0.1 * z,
                            Init::Ones => 1.0 + 0.25 * z,
                            Init::HeNormal { fan_in } => z * (2.0 / fan_in.max(1) as f64).sqrt(),
                            Init::Normal { std } => z * std,
                        })
                    })
                    .collect();
                Tensor::new(shape, data)
            })
            .collect();
        Point { blocks }
    }

    /// Site name of the decision op at `op_index` in the forward.
    fn site_name(&self, op_index: usize, op: &str) -> String {
        let mut idx = 0usize;
        let mut found = None;
        fn walk(b: &ir::Block, idx: &mut usize, target: usize, found: &mut Option<ir::ValueId>) {
            for op in &b.ops {
                if *idx == target {
                    *found = op.results.first().map(|r| r.0);
                }
                *idx += 1;
                for r in &op.regions {
                    walk(r, idx, target, found);
                }
            }
        }
        walk(&self.forward.body, &mut idx, op_index, &mut found);
        found
            .and_then(|v| self.sites.iter().find(|s| s.value == v))
            .map(|s| s.name.clone())
            .unwrap_or_else(|| format!("{op}#{op_index}"))
    }

    /// The forward's arguments at a point, in order (fixed ones included).
    fn to_values<S: Scalar>(&self, blocks: &[Tensor<f64>]) -> Vec<Value<S>> {
        let n = self.blocks.len() + self.fixed.len();
        (0..n)
            .map(|arg| {
                if let Some((b, blk)) = self.blocks.iter().enumerate().find(|(_, b)| b.arg == arg) {
                    Value::Float(
                        blocks[b].map(|&x| S::from_f64(x).expect("sampled values are finite")),
                        blk.ty.elem,
                    )
                } else {
                    let (_, t, e) = self
                        .fixed
                        .iter()
                        .find(|(a, _, _)| *a == arg)
                        .expect("every argument is a block or fixed");
                    Value::Int(t.clone(), *e)
                }
            })
            .collect()
    }

    /// Random cotangents, one per forward result (zeros for integer results).
    fn random_outputs<S: Scalar>(&self, rng: &mut Rng, exact: bool) -> Vec<Tensor<S>> {
        self.outputs
            .iter()
            .map(|t| {
                if t.elem.is_float() {
                    self.random_like(rng, &shape_of(t), exact)
                } else {
                    Tensor::filled(shape_of(t), S::zero())
                }
            })
            .collect()
    }

    fn random_like<S: Scalar>(&self, rng: &mut Rng, shape: &[usize], exact: bool) -> Tensor<S> {
        let n = shape.iter().product();
        let data = (0..n)
            .map(|_| {
                if exact {
                    S::from_i64(rng.int_in(PROBE_RANGE))
                } else {
                    S::from_f64(rng.normal()).expect("finite")
                }
            })
            .collect();
        Tensor::new(shape.to_vec(), data)
    }

    /// J·v (one tensor per forward result) for `tangents` (one per block) at `point`.
    #[allow(clippy::type_complexity)]
    fn jvp<S: Scalar>(
        &self,
        point: &[Value<S>],
        tangents: &[Tensor<S>],
        record: bool,
    ) -> Result<(Vec<Tensor<S>>, Vec<den::Margin>), String> {
        let inputs: Vec<Value<Dual<S>>> = point
            .iter()
            .enumerate()
            .map(|(arg, p)| match p {
                Value::Float(pt, elem) => {
                    let b = self
                        .blocks
                        .iter()
                        .position(|b| b.arg == arg)
                        .expect("float arguments are blocks");
                    let data = pt
                        .data
                        .iter()
                        .zip(&tangents[b].data)
                        .map(|(a, t)| Dual::new(a.clone(), t.clone()))
                        .collect();
                    Value::Float(Tensor::new(pt.shape.clone(), data), *elem)
                }
                Value::Int(t, e) => Value::Int(t.clone(), *e),
            })
            .collect();
        let opts = EvalOptions {
            fast: true,
            record_margins: record,
            replicas: 1,
        };
        let ev = eval_func::<Dual<S>>(self.module, &self.forward.name, inputs, &opts)
            .map_err(|e| e.to_string())?;
        let outs = ev
            .outputs
            .iter()
            .map(|v| match v {
                Value::Float(t, _) => t.map(|d| d.tangent.clone()),
                Value::Int(t, _) => Tensor::filled(t.shape.clone(), S::zero()),
            })
            .collect();
        let margins = if self.forward_margins_only {
            ev.margins
                .into_iter()
                .filter(|m| m.func == self.forward.name)
                .collect()
        } else {
            ev.margins
        };
        Ok((outs, margins))
    }

    /// B(a, u): one cotangent per block.
    fn vjp<S: Scalar>(
        &self,
        point: &[Value<S>],
        u: &[Tensor<S>],
    ) -> Result<Vec<Tensor<S>>, String> {
        let mut inputs = point.to_vec();
        for (t, ty) in u.iter().zip(&self.outputs) {
            inputs.push(if ty.elem.is_float() {
                Value::Float(t.clone(), ty.elem)
            } else {
                Value::Int(Tensor::filled(t.shape.clone(), 0), ty.elem)
            });
        }
        let opts = EvalOptions {
            fast: true,
            ..Default::default()
        };
        let ev =
            eval_func::<S>(self.module, self.backward, inputs, &opts).map_err(|e| e.to_string())?;
        let mut outs = ev.outputs;
        self.blocks
            .iter()
            .map(|b| {
                let v = std::mem::replace(
                    outs.get_mut(b.bwd_out)
                        .ok_or_else(|| format!("backward has no result {}", b.bwd_out))?,
                    Value::Int(Tensor::filled(vec![], 0), ir::ElemType::I1),
                );
                v.into_float().ok_or_else(|| {
                    format!("backward result {} ({}) is not float", b.bwd_out, b.name)
                })
            })
            .collect()
    }

    /// Is the forward differentiable at a point where decisions tie? At a tie
    /// of operands with different derivatives (a true kink) f is only one-sided
    /// differentiable, and the second difference f(x+εw) + f(x−εw) − 2f(x) is
    /// first order in ε for almost every direction w; where the tied operands
    /// are locally equal (a max over ReLU zeros) it is second order. Checked
    /// per output element in f64 with ε = 1e-10·max|x|, small enough that no
    /// untied decision (margin ≥ 1e-6·max|x| required) changes outcome unless
    /// the forward amplifies perturbations 10⁴-fold before it; a kink must move
    /// an output by more than 1e-3 of the largest first difference to be seen.
    fn ties_are_flat(
        &self,
        point: &Point,
        margins: &[den::Margin],
        rng: &mut Rng,
    ) -> Result<bool, String> {
        let xmax = point
            .blocks
            .iter()
            .flat_map(|t| t.data.iter())
            .fold(0f64, |a, x| a.max(x.abs()))
            .max(1e-30);
        let untied_min = margins
            .iter()
            .filter(|m| m.ties == 0)
            .map(|m| m.min)
            .fold(f64::INFINITY, f64::min);
        if untied_min < 1e-6 * xmax {
            return Ok(false);
        }
        let eps = 1e-10 * xmax;
        let w: Vec<Tensor<f64>> = point
            .blocks
            .iter()
            .map(|t| t.map(|_| rng.unit() * 2.0 - 1.0))
            .collect();
        let eval = |sign: f64| -> Result<Vec<Tensor<f64>>, String> {
            let shifted: Vec<Tensor<f64>> = point
                .blocks
                .iter()
                .zip(&w)
                .map(|(x, w)| {
                    let data = x.data.iter().zip(&w.data).map(|(a, b)| a + sign * eps * b);
                    Tensor::new(x.shape.clone(), data.collect())
                })
                .collect();
            let ev = eval_func::<f64>(
                self.module,
                &self.forward.name,
                self.to_values::<f64>(&shifted),
                &EvalOptions {
                    fast: true,
                    ..Default::default()
                },
            )
            .map_err(|e| e.to_string())?;
            Ok(ev
                .outputs
                .into_iter()
                .filter_map(|v| v.into_float())
                .collect())
        };
        let (f0, fp, fm) = (eval(0.0)?, eval(1.0)?, eval(-1.0)?);
        let dmax = fp
            .iter()
            .zip(&fm)
            .flat_map(|(p, m)| p.data.iter().zip(&m.data).map(|(a, b)| (a - b).abs()))
            .fold(0f64, f64::max);
        for ((a, p), m) in f0.iter().zip(&fp).zip(&fm) {
            for ((z, p), m) in a.data.iter().zip(&p.data).zip(&m.data) {
                let second = (p + m - 2.0 * z).abs();
                if second > 1e-3 * ((p - m).abs() + dmax) {
                    return Ok(false);
                }
            }
        }
        Ok(true)
    }

    fn zeros<S: Scalar>(&self) -> Vec<Tensor<S>> {
        self.block_types()
            .iter()
            .map(|t| Tensor::filled(shape_of(t), S::zero()))
            .collect()
    }

    fn equal<S: Scalar>(&self, a: &S, b: &S, scale: f64, exact: bool, tol: f64) -> (bool, f64) {
        let d = a.sub(b);
        if exact {
            (d.is_zero(), d.to_f64().abs())
        } else {
            let diff = d.to_f64().abs();
            (diff <= tol * scale.max(f64::MIN_POSITIVE), diff)
        }
    }

    /// Locate a wrong block: the true Jᵀu by basis tangents vs B(u), largest gap.
    fn localise<S: Scalar>(
        &self,
        point: &[Value<S>],
        block: usize,
        u: &[Tensor<S>],
        claimed: &Tensor<S>,
        limit: usize,
    ) -> String {
        let n = claimed.len();
        if n > limit {
            return format!("not localised (block larger than {limit} elements)");
        }
        let mut tangents = self.zeros::<S>();
        let (mut worst, mut at, mut truth_at, mut norm) = (0.0f64, 0usize, 0.0f64, 0.0f64);
        for i in 0..n {
            tangents[block].data[i] = S::one();
            let jv = match self.jvp(point, &tangents, false) {
                Ok((jv, _)) => jv,
                Err(e) => return format!("not localised: {e}"),
            };
            tangents[block].data[i] = S::zero();
            let truth = dot_all(u, &jv).to_f64();
            let gap = (truth - claimed.data[i].to_f64()).abs();
            norm = norm.max(truth.abs());
            if gap > worst {
                worst = gap;
                at = i;
                truth_at = truth;
            }
        }
        format!(
            "largest discrepancy {worst:.3e} at {}{} (true {truth_at:.6e}, claimed {:.6e}; relative to max |true| {:.2e})",
            self.block_names()[block],
            multi_index(at, &claimed.shape),
            claimed.data[at].to_f64(),
            worst / norm.max(f64::MIN_POSITIVE)
        )
    }

    pub(crate) fn run<S: Scalar>(&self, opts: &TieOptions, exact: bool) -> TieReport {
        let names = self.block_names();
        let types = self.block_types();
        let evidence = if exact {
            Evidence::Exact
        } else {
            Evidence::F64 {
                tolerance: opts.f64_tolerance,
            }
        };
        let total_in: usize = types.iter().map(|t| t.num_elements() as usize).sum();
        let total_out: usize = self.outputs.iter().map(|t| t.num_elements() as usize).sum();
        let full = total_in + total_out <= opts.full_jacobian_limit;
        let input = types
            .first()
            .cloned()
            .unwrap_or_else(|| TensorType::f32(Vec::<i64>::new()));
        let mut report = TieReport {
            blocks: names.len(),
            failure_bound: exact
                .then(|| (2.0 / (2 * PROBE_RANGE + 1) as f64).powi(opts.probes as i32)),
            full_jacobian: full,
            block_results: names
                .iter()
                .map(|n| BlockResult {
                    name: n.clone(),
                    max_rel_discrepancy: 0.0,
                    probes: 0,
                })
                .collect(),
            ..TieReport::start(String::new(), input, evidence, opts.probes)
        };
        // (op index, op) → outcome counts over the certified points.
        let mut seen: Vec<((usize, &'static str), Vec<usize>)> = Vec::new();
        let missing_outcomes = |seen: &[((usize, &'static str), Vec<usize>)]| {
            seen.iter().any(|((_, op), counts)| {
                outcome_labels(op)
                    .is_some_and(|l| (0..l.len()).any(|k| counts.get(k).copied().unwrap_or(0) == 0))
            })
        };
        // Op index of each entry of `report.site_margins`.
        let mut site_ops: Vec<usize> = Vec::new();
        let mut rng = Rng::salted(opts.seed.wrapping_add(1), CERT_SALT);
        let scales = [1.0, 8.0, 0.25];
        let mut attempt = 0;
        // Certify at `points` points, and keep sampling (within the budget) while
        // a decision outcome has never been exercised.
        while report.points < opts.points
            || (missing_outcomes(&seen) && attempt < opts.max_attempts)
        {
            if attempt >= opts.max_attempts {
                report.verdict = if report.points == 0 {
                    Verdict::Undecided {
                        reason: format!(
                            "{} on a kink ({})",
                            if self.at.is_some() {
                                "the given point sits"
                            } else {
                                "every sampled point sits"
                            },
                            report.kinks_resampled.join(", ")
                        ),
                    }
                } else {
                    Verdict::Certified
                };
                break;
            }
            let scale = scales[attempt % scales.len()];
            attempt += 1;
            let point_f64 = self.sample_point(&mut rng, scale, exact);
            let point: Vec<Value<S>> = self.to_values(&point_f64.blocks);

            // Smooth-point hypothesis from the forward's recorded margins.
            let margins = match self.jvp(&point, &self.zeros::<S>(), true) {
                Ok((_, m)) => m,
                Err(e) => {
                    report.verdict = Verdict::Undecided {
                        reason: format!("forward evaluation failed: {e}"),
                    };
                    return report;
                }
            };
            if let Some(m) = margins.iter().find(|m| m.ties > 0) {
                let flat = opts.accept_flat_ties
                    && self.ties_are_flat(&point_f64, &margins, &mut rng) == Ok(true);
                if !flat {
                    report.kinks_resampled.push(format!(
                        "kink at {}[{}], margin 0",
                        self.site_name(m.op_index, m.op),
                        m.argmin
                    ));
                    continue;
                }
                for m in margins.iter().filter(|m| m.ties > 0) {
                    report.flat_ties.push(format!(
                        "{}[{}] ({} tie{})",
                        self.site_name(m.op_index, m.op),
                        m.argmin,
                        m.ties,
                        if m.ties == 1 { "" } else { "s" }
                    ));
                }
            }
            // The smallest margin of the decisions that did not tie.
            if let Some(m) = margins
                .iter()
                .filter(|m| m.ties == 0)
                .min_by(|a, b| a.min.total_cmp(&b.min))
            {
                let better = report.min_margin.as_ref().is_none_or(|r| m.min < r.margin);
                if better {
                    report.min_margin = Some(MarginReport {
                        site: self.site_name(m.op_index, m.op),
                        index: m.argmin,
                        margin: m.min,
                    });
                }
            }

            // Adjoint identity, block by block.
            for _ in 0..opts.probes {
                let u: Vec<Tensor<S>> = self.random_outputs(&mut rng, exact);
                let claimed = match self.vjp(&point, &u) {
                    Ok(c) => c,
                    Err(e) => {
                        report.verdict = Verdict::Undecided {
                            reason: format!("backward evaluation failed: {e}"),
                        };
                        return report;
                    }
                };
                for (b, ty) in types.iter().enumerate() {
                    let mut tangents = self.zeros::<S>();
                    tangents[b] = self.random_like(&mut rng, &shape_of(ty), exact);
                    let jv = match self.jvp(&point, &tangents, false) {
                        Ok((jv, _)) => jv,
                        Err(e) => {
                            report.verdict = Verdict::Undecided {
                                reason: format!("forward evaluation failed: {e}"),
                            };
                            return report;
                        }
                    };
                    let lhs = dot_all(&u, &jv);
                    let rhs = dot(&claimed[b].data, &tangents[b].data);
                    // Magnitude the rounding error is relative to: the terms of both
                    // sides, floored by ‖u‖·‖v‖ (the size of the form for a Jacobian of
                    // unit scale), since an exactly-zero VJP block (a bias a softmax is
                    // invariant to) has no terms of its own to measure rounding against.
                    let scale = abs_dot_all(&u, &jv)
                        + abs_dot(&claimed[b].data, &tangents[b].data)
                        + (abs_dot_all(&u, &u) * abs_dot(&tangents[b].data, &tangents[b].data))
                            .sqrt();
                    let (ok, diff) = self.equal(&lhs, &rhs, scale, exact, opts.f64_tolerance);
                    let br = &mut report.block_results[b];
                    br.probes += 1;
                    br.max_rel_discrepancy = br
                        .max_rel_discrepancy
                        .max(diff / scale.max(f64::MIN_POSITIVE));
                    if !ok {
                        let loc = self.localise(&point, b, &u, &claimed[b], opts.localise_limit);
                        report.verdict = Verdict::Refuted {
                            block: names[b].clone(),
                            detail: format!(
                                "⟨u, J·v⟩ − ⟨B(u), v⟩ = {diff:.3e} (scale {scale:.3e}) at a point of scale {scale_pt}; {loc}",
                                scale_pt = scale_label(scale_of(attempt - 1))
                            ),
                        };
                        return report;
                    }
                }
            }

            // Full Jacobian at small sizes: every entry.
            if full {
                if let Some(v) = self.full_jacobian(&point, exact, opts.f64_tolerance) {
                    report.verdict = v;
                    return report;
                }
            }
            report.points += 1;
            for m in &margins {
                match report
                    .site_margins
                    .iter_mut()
                    .zip(&site_ops)
                    .find(|(_, k)| **k == m.op_index)
                {
                    Some((s, _)) => s.absorb(m),
                    None => {
                        site_ops.push(m.op_index);
                        report
                            .site_margins
                            .push(SiteMargin::first(self.site_name(m.op_index, m.op), m));
                    }
                }
                let key = (m.op_index, m.op);
                let slot = match seen.iter().position(|(k, _)| *k == key) {
                    Some(i) => i,
                    None => {
                        seen.push((key, Vec::new()));
                        seen.len() - 1
                    }
                };
                add_outcomes(&mut seen[slot].1, &m.outcomes);
            }
        }
        report.coverage = seen
            .into_iter()
            .map(|((idx, op), outcomes)| {
                SiteCoverage::from_counts(self.site_name(idx, op), op, outcomes)
            })
            .collect();
        report
    }

    /// Compare J (by basis tangents) with B (by basis cotangents) entry by entry;
    /// `Some(verdict)` on a mismatch or failure.
    fn full_jacobian<S: Scalar>(
        &self,
        point: &[Value<S>],
        exact: bool,
        tol: f64,
    ) -> Option<Verdict> {
        let names = self.block_names();
        // Rows of J: (result k, flat index j) for every float result.
        let cells: Vec<(usize, usize)> = self
            .outputs
            .iter()
            .enumerate()
            .filter(|(_, t)| t.elem.is_float())
            .flat_map(|(k, t)| (0..t.num_elements() as usize).map(move |j| (k, j)))
            .collect();
        let mut rows: Vec<Vec<Tensor<S>>> = Vec::with_capacity(cells.len());
        for &(k, j) in &cells {
            let mut u: Vec<Tensor<S>> = self
                .outputs
                .iter()
                .map(|t| Tensor::filled(shape_of(t), S::zero()))
                .collect();
            u[k].data[j] = S::one();
            match self.vjp(point, &u) {
                Ok(r) => rows.push(r),
                Err(e) => return Some(Verdict::Undecided { reason: e }),
            }
        }
        let mut tangents = self.zeros::<S>();
        for (b, name) in names.iter().enumerate() {
            for i in 0..tangents[b].len() {
                tangents[b].data[i] = S::one();
                let col = match self.jvp(point, &tangents, false) {
                    Ok((c, _)) => c,
                    Err(e) => return Some(Verdict::Undecided { reason: e }),
                };
                tangents[b].data[i] = S::zero();
                for (&(k, j), row) in cells.iter().zip(&rows) {
                    let col = &col[k];
                    // Entries are compared against unit scale as well (see the probes).
                    let scale = col.data[j].to_f64().abs() + row[b].data[i].to_f64().abs() + 1.0;
                    let (ok, diff) = self.equal(&col.data[j], &row[b].data[i], scale, exact, tol);
                    if !ok {
                        return Some(Verdict::Refuted {
                            block: name.clone(),
                            detail: format!(
                                "full Jacobian: ∂y{}{}/∂{}{} is {:.6e}, the backward map gives {:.6e} (gap {diff:.3e})",
                                if self.outputs.len() > 1 { k.to_string() } else { String::new() },
                                multi_index(j, &shape_of(&self.outputs[k])),
                                &name[1..],
                                multi_index(i, &tangents[b].shape),
                                col.data[j].to_f64(),
                                row[b].data[i].to_f64()
                            ),
                        });
                    }
                }
            }
        }
        None
    }
}

fn scale_of(attempt: usize) -> f64 {
    [1.0, 8.0, 0.25][attempt % 3]
}

fn scale_label(s: f64) -> String {
    format!("{s}")
}
