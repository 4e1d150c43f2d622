//! The schedule a plan runs: steps over numbered slots, what each step
//! computes, reads and writes. The compiler emits it, the passes rewrite it,
//! the runtime executes it.

use crate::fused::{Merged, Program};
use crate::pool;
use crate::runtime::Compiled;
use den::fast::ReduceKind;
use ir::{ConvAttrs, DotDims, ElemType, Module, ScatterWindowAttrs, TensorType, WindowAttrs};

/// A reduction's initial value: a constant, or the scalar in a slot.
#[derive(Clone, Copy)]
pub(crate) enum Init {
    Const(f32),
    Slot(usize),
}

pub(crate) struct Step {
    pub label: String,
    /// The op the step comes from, for errors.
    pub op: &'static str,
    pub line: Option<u32>,
    pub flops: u64,
    pub kind: Kind,
}

/// One output of a [`Kind::Reduce`]: its slot, initial value and the program
/// node it sums.
#[derive(Clone, Copy)]
pub(crate) struct ReduceOut {
    pub slot: usize,
    pub init: Init,
    pub node: usize,
}

/// What a step computes; kernel operands are `(slot, shape)`.
pub(crate) enum Kind {
    Const {
        out: usize,
        data: ConstData,
    },
    Loop {
        prog: Program,
        inputs: Vec<usize>,
        out: usize,
        len: usize,
        /// An input whose buffer dies here and may become the output.
        in_place: Option<usize>,
    },
    /// Add-reductions over the same positions into the same output shape,
    /// one pass for all (siblings merged by [`crate::passes::merge_sibling_reductions`]).
    Reduce {
        prog: Program,
        inputs: Vec<usize>,
        outs: Vec<ReduceOut>,
        len: usize,
        map: Merged,
        out_len: usize,
        /// Full-size values the pass also writes, `(slot, node)`: an
        /// operand that later ops read too, stored while it is summed
        /// instead of computed again (softmax's `exp`).
        stores: Vec<(usize, usize)>,
        /// An input whose buffer dies here and becomes the first store's
        /// (set by liveness, as a loop's `in_place`).
        store_in_place: Option<usize>,
    },
    Conv {
        lhs: (usize, Vec<usize>),
        rhs: (usize, Vec<usize>),
        attrs: ConvAttrs,
        out: usize,
        shape: Vec<usize>,
        /// A per-output-feature bias added as the result is written (the
        /// `conv + broadcast(b)` loop folded in by [`crate::passes::fold_conv_bias`]).
        bias: Option<usize>,
        /// A slot for each result plane's moments, taken as the kernel
        /// writes it (`den::fast::convolution_moments_into`), which
        /// [`Kind::Moments`] steps turn into batch norm's sums.
        moments: Option<usize>,
    },
    /// A per-feature add-reduction of a convolution's result from the
    /// moments its kernel took ([`crate::passes::sums_from_conv_moments`]):
    /// `out[f] = init + Σ_b Σ y` over feature `f`'s planes, or with
    /// `centre`, `init + Σ_b Σ (y − centre[f])²`; combined in f64.
    Moments {
        moments: usize,
        centre: Option<usize>,
        init: f32,
        out: usize,
        /// Output features, and elements per result plane.
        features: usize,
        plane: usize,
        /// Test hook (`Plan::perturb_first_conv_moments_for_tests`):
        /// every sum is scaled by `1 + fault`.
        fault: f32,
    },
    Dot {
        lhs: (usize, Vec<usize>),
        rhs: (usize, Vec<usize>),
        dims: DotDims,
        out: usize,
        shape: Vec<usize>,
        /// A bias along the result's last axis added in the GEMM's epilogue
        /// (the `dot + broadcast(b)` loop folded in by [`crate::passes::fold_dot_bias`]).
        bias: Option<usize>,
    },
    ReduceFold {
        input: (usize, Vec<usize>),
        init: Init,
        kind: ReduceKind,
        dims: Vec<usize>,
        out: usize,
        shape: Vec<usize>,
    },
    Window {
        input: (usize, Vec<usize>),
        init: Init,
        kind: ReduceKind,
        attrs: WindowAttrs,
        out: usize,
        shape: Vec<usize>,
        /// Max/min over tiling windows: the plan's own kernel.
        tiles: Option<pool::Tiles>,
    },
    Scatter {
        operand: (usize, Vec<usize>),
        source: (usize, Vec<usize>),
        init: Init,
        select: ir::CompareDirection,
        attrs: ScatterWindowAttrs,
        out: usize,
        tiles: Option<pool::Tiles>,
    },
    /// `pad` of an f32 operand (the strided depthwise VJPs dilate `dy` with it).
    Pad {
        input: (usize, Vec<usize>),
        value: Init,
        low: Vec<i64>,
        interior: Vec<i64>,
        out: usize,
        shape: Vec<usize>,
    },
    /// `concatenate` along `dim`: the operands' rows copied in turn.
    Concat {
        inputs: Vec<(usize, Vec<usize>)>,
        dim: usize,
        out: usize,
        shape: Vec<usize>,
    },
    Generic {
        module: Module,
        operands: Vec<(usize, TensorType)>,
        results: Vec<usize>,
    },
    /// `while`: `cond` then `body` on the loop state until `cond` is false.
    While {
        cond: Box<SubPlan>,
        body: Box<SubPlan>,
        /// The initial loop state.
        state: Vec<usize>,
        /// Outer values the regions read.
        captured: Vec<usize>,
        results: Vec<usize>,
    },
    /// `case` (branch `selector`, the last one when out of range) and `if`
    /// (region 0 when the selector is true, else region 1).
    Branch {
        selector: usize,
        is_if: bool,
        branches: Vec<SubPlan>,
        captured: Vec<usize>,
        results: Vec<usize>,
    },
}

/// A region of `while`/`case`/`if` compiled into its own schedule: its
/// parameters are the region's arguments followed by the outer values it
/// reads; `args` says where each comes from.
pub(crate) struct SubPlan {
    pub plan: Compiled,
    pub args: Vec<SubArg>,
}

#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) enum SubArg {
    /// Region argument `k` (the loop state's `k`-th value).
    State(usize),
    /// The control step's `k`-th captured outer value.
    Captured(usize),
    /// A parameter the region never reads (nothing is passed).
    Unused,
}

#[derive(Clone)]
pub(crate) enum ConstData {
    F(Vec<f32>),
    I(Vec<i64>),
}

impl Kind {
    pub(crate) fn reads(&self) -> Vec<usize> {
        let init = |i: &Init| match i {
            Init::Slot(s) => vec![*s],
            Init::Const(_) => vec![],
        };
        match self {
            Kind::Const { .. } => vec![],
            Kind::Loop { inputs, .. } => inputs.clone(),
            Kind::Reduce { inputs, outs, .. } => inputs
                .iter()
                .copied()
                .chain(outs.iter().flat_map(|o| init(&o.init)))
                .collect(),
            Kind::Conv { lhs, rhs, bias, .. } => [lhs.0, rhs.0].into_iter().chain(*bias).collect(),
            Kind::Moments {
                moments, centre, ..
            } => std::iter::once(*moments).chain(*centre).collect(),
            Kind::Dot { lhs, rhs, bias, .. } => [lhs.0, rhs.0].into_iter().chain(*bias).collect(),
            Kind::ReduceFold { input, init: i, .. }
            | Kind::Window { input, init: i, .. }
            | Kind::Pad {
                input, value: i, ..
            } => [vec![input.0], init(i)].concat(),
            Kind::Scatter {
                operand,
                source,
                init: i,
                ..
            } => [vec![operand.0, source.0], init(i)].concat(),
            Kind::Concat { inputs, .. } => inputs.iter().map(|i| i.0).collect(),
            Kind::Generic { operands, .. } => operands.iter().map(|o| o.0).collect(),
            Kind::While {
                state, captured, ..
            } => state.iter().chain(captured).copied().collect(),
            Kind::Branch {
                selector, captured, ..
            } => std::iter::once(*selector)
                .chain(captured.iter().copied())
                .collect(),
        }
    }

    pub(crate) fn writes(&self) -> Vec<usize> {
        match self {
            Kind::Const { out, .. }
            | Kind::Loop { out, .. }
            | Kind::Moments { out, .. }
            | Kind::Dot { out, .. }
            | Kind::ReduceFold { out, .. }
            | Kind::Window { out, .. }
            | Kind::Scatter { out, .. }
            | Kind::Pad { out, .. }
            | Kind::Concat { out, .. } => vec![*out],
            Kind::Conv { out, moments, .. } => std::iter::once(*out).chain(*moments).collect(),
            Kind::Reduce { outs, stores, .. } => outs
                .iter()
                .map(|o| o.slot)
                .chain(stores.iter().map(|s| s.0))
                .collect(),
            Kind::Generic { results, .. }
            | Kind::While { results, .. }
            | Kind::Branch { results, .. } => results.clone(),
        }
    }
}

/// bf16 and f16: computed in f32, every result rounded to the type.
pub(crate) fn narrow(e: ElemType) -> bool {
    matches!(e, ElemType::BF16 | ElemType::F16)
}

/// A shape's dimensions as extents (negative, i.e. dynamic, ones as 0).
pub(crate) fn dims(s: &[i64]) -> Vec<usize> {
    s.iter().map(|&d| d.max(0) as usize).collect()
}
