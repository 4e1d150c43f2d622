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
//!
//! The procedure (`run`) samples points until enough are certified; at each
//! point (`points`: sampled blocks and probes) it checks the smooth-point
//! hypothesis and records margins and branch coverage (`margins`), then checks
//! the identity per block and, at small sizes, the full Jacobian (`evidence`),
//! both sides evaluated by `eval`. What it finds is reported in the types of
//! `report`.

mod boundary;
mod eval;
mod evidence;
mod margins;
mod points;
mod report;
mod run;

pub use evidence::multi_index;
pub(crate) use report::add_outcomes;
pub use report::{
    BlockResult, Evidence, MarginReport, SiteCoverage, SiteMargin, TieReport, Verdict,
};

use den::{Exact, Tensor};
use ir::{Func, Module, TensorType};
use layers::{tie_funcs, CertLayer, Init, KinkSite};
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
    /// Boundary points per tie after the sampled ones certify: a decision's
    /// compared quantity put just above and just below each threshold either
    /// function tests against (`boundary`), so a moved threshold is refuted.
    /// 0 turns them off (layer and net ties, whose backward is emitted from
    /// the same thresholds as the forward); pair checks use 16.
    pub boundary_points: usize,
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
            boundary_points: 0,
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
/// can evaluate it): no exp/log/sqrt/rsqrt/tanh/logistic/erf/trig/power, and
/// none of the special functions or next_after.
pub fn module_is_rational(m: &Module) -> bool {
    irrational_ops(m).is_empty()
}

/// The distinct ops of `m` (regions included) that do not map rationals to
/// rationals, by printed name in first-use order: why exact evidence does
/// not apply to `m` (none: it does).
pub fn irrational_ops(m: &Module) -> Vec<&'static str> {
    use ir::{BinaryOp, OpKind, UnaryOp};
    fn block(b: &ir::Block, out: &mut Vec<&'static str>) {
        for op in &b.ops {
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
                        | UnaryOp::RoundNearestAfz
                        | UnaryOp::IsFinite
                        | UnaryOp::IsInf
                        | UnaryOp::IsNegInf
                        | UnaryOp::IsPosInf
                        | UnaryOp::Popcnt
                        | UnaryOp::CountLeadingZeros
                ),
                OpKind::Binary(
                    BinaryOp::Power
                    | BinaryOp::Atan2
                    | BinaryOp::Polygamma
                    | BinaryOp::Zeta
                    | BinaryOp::NextAfter,
                ) => false,
                _ => true,
            };
            let name = op.kind.name();
            if !ok && !out.contains(&name) {
                out.push(name);
            }
            for r in &op.regions {
                block(r, out);
            }
        }
    }
    let mut out = Vec::new();
    for f in &m.funcs {
        block(&f.body, &mut out);
    }
    out
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

impl Tie<'_> {
    fn block_names(&self) -> Vec<String> {
        self.blocks.iter().map(|b| b.name.clone()).collect()
    }

    fn block_types(&self) -> Vec<TensorType> {
        self.blocks.iter().map(|b| b.ty.clone()).collect()
    }
}
