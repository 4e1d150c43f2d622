//! What an evaluation gives back and how it fails: the outputs with the
//! decision margins (`Margin`, gathered per op in `Decisions`), where a
//! non-finite value first appeared (`NonFinite`), and errors placed at their
//! op (`EvalError`, from an op's unplaced `Fail`).

use crate::scalar::NotExact;
use crate::value::Value;
use ir::{Func, Op};
use std::fmt;

/// The decisions one op took during an evaluation, and the smallest margin.
#[derive(Clone, Debug, PartialEq)]
pub struct Margin {
    pub func: String,
    /// Pre-order index of the op within its function.
    pub op_index: usize,
    pub op: &'static str,
    pub line: Option<u32>,
    /// The smallest margin of any decision (|a − b| of the primal values).
    pub min: f64,
    /// Flat index in the op's result (for windows: the output position) of
    /// the first decision with the smallest margin.
    pub argmin: usize,
    /// The smallest margin that is not 0: a near tie, which f32 rounding of
    /// the compared values can break either way (an exact tie is broken by
    /// the op's own rule, the same in every precision). ∞ when none.
    pub near: f64,
    /// Decisions taken with margin exactly 0.
    pub ties: usize,
    pub decisions: usize,
    /// How often each outcome was taken (branch coverage): maximum/minimum
    /// `[first operand, second operand]` (ties go to the first); compare
    /// `[false, true]`; clamp `[below min, inside, above max]`; reduce_window and
    /// select_and_scatter: the winning offset in window scan order. Empty for
    /// reduce.
    pub outcomes: Vec<usize>,
}

/// Outputs of a function, and the margins of its decision ops (when recorded),
/// ordered by function and op index.
#[derive(Clone, Debug)]
pub struct Evaluation<S> {
    pub outputs: Vec<Value<S>>,
    pub margins: Vec<Margin>,
    /// When margins are recorded: the first op (in execution order) that made
    /// a non-finite float (NaN, ±inf, or a dual number with a non-finite
    /// tangent) from finite operands — where an overflow began. Constants are
    /// not counted: a `-inf` reduction init is deliberate.
    pub first_non_finite: Option<NonFinite>,
}

/// Where a non-finite value first appeared in an evaluation.
#[derive(Clone, Debug, PartialEq)]
pub struct NonFinite {
    pub func: String,
    pub op: &'static str,
    pub line: Option<u32>,
    /// Flat index of the first non-finite element of the op's first such result.
    pub index: usize,
    /// The element's primal value (NaN, ±inf, or finite with a non-finite tangent).
    pub value: f64,
}

impl fmt::Display for NonFinite {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} in @{}", self.op, self.func)?;
        if let Some(l) = self.line {
            write!(f, " line {l}")?;
        }
        write!(f, ", element {}", self.index)?;
        if self.value.is_finite() {
            write!(f, " (value {:e} with a non-finite derivative)", self.value)
        } else {
            write!(f, " (value {})", self.value)
        }
    }
}

/// Why an evaluation failed: where, and what.
#[derive(Clone, Debug, PartialEq)]
pub struct EvalError {
    pub func: String,
    pub op: &'static str,
    pub line: Option<u32>,
    pub message: String,
}

impl fmt::Display for EvalError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "@{}", self.func)?;
        if let Some(l) = self.line {
            write!(f, " line {l}")?;
        }
        write!(f, ": {}: {}", self.op, self.message)
    }
}

impl std::error::Error for EvalError {}

/// An op failure before it is placed: a message, or an error already placed
/// inside a region or a callee.
pub(crate) enum Fail {
    Msg(String),
    Placed(EvalError),
}

impl Fail {
    pub(crate) fn msg(m: impl Into<String>) -> Self {
        Fail::Msg(m.into())
    }

    pub(crate) fn place(self, func: &Func, op: &Op) -> EvalError {
        match self {
            Fail::Placed(e) => e,
            Fail::Msg(message) => EvalError {
                func: func.name.clone(),
                op: op.kind.name(),
                line: op.loc.line(),
                message,
            },
        }
    }
}

impl From<NotExact> for Fail {
    fn from(e: NotExact) -> Self {
        Fail::Msg(format!("not exact ({e})"))
    }
}

/// Running summary of one op's decisions.
#[derive(Clone, Debug)]
pub(crate) struct Decisions {
    pub(crate) min: f64,
    pub(crate) argmin: usize,
    pub(crate) near: f64,
    pub(crate) ties: usize,
    pub(crate) decisions: usize,
    pub(crate) outcomes: Vec<usize>,
}

impl Decisions {
    pub(crate) fn new() -> Self {
        Decisions {
            min: f64::INFINITY,
            argmin: 0,
            near: f64::INFINITY,
            ties: 0,
            decisions: 0,
            outcomes: Vec::new(),
        }
    }

    /// Count one decision's outcome `k` (branch coverage).
    pub(crate) fn outcome(&mut self, k: usize) {
        if self.outcomes.len() <= k {
            self.outcomes.resize(k + 1, 0);
        }
        self.outcomes[k] += 1;
    }

    /// One decision with margin `gap` at result index `index`. A NaN gap (NaN
    /// operands) cannot certify anything and counts as a tie.
    pub(crate) fn record(&mut self, gap: f64, index: usize) {
        let gap = if gap.is_nan() { 0.0 } else { gap };
        self.decisions += 1;
        if gap == 0.0 {
            self.ties += 1;
        } else {
            self.near = self.near.min(gap);
        }
        if gap < self.min {
            self.min = gap;
            self.argmin = index;
        }
    }
}
