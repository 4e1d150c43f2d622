//! `CERTGRAD_PROFILE`: per-op-name times of the generic evaluator's
//! top-level ops, printed to stderr after each `eval_func`.

use ir::{Op, OpKind};
use std::collections::HashMap;

/// Whether `CERTGRAD_PROFILE` is set: each `eval_func` then prints the
/// time its top-level ops took, per op name, to stderr (a call's time
/// includes its callee's).
pub(super) fn profiling() -> bool {
    static ON: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *ON.get_or_init(|| std::env::var_os("CERTGRAD_PROFILE").is_some())
}

/// The profile row of `op`: its name, grouped convolutions (depthwise and
/// their weight-VJPs) apart from dense ones.
pub(super) fn profile_label(op: &Op) -> &'static str {
    match &op.kind {
        OpKind::Convolution(a) if a.batch_group_count > 1 => "stablehlo.convolution (batch groups)",
        OpKind::Convolution(a) if a.feature_group_count > 1 => {
            "stablehlo.convolution (feature groups)"
        }
        _ => op.kind.name(),
    }
}

pub(super) fn print_op_times(func: &str, scalar: &str, times: &HashMap<&'static str, (u64, u64)>) {
    let mut rows: Vec<_> = times.iter().collect();
    rows.sort_by_key(|(_, (_, ns))| std::cmp::Reverse(*ns));
    let total: u64 = rows.iter().map(|(_, (_, ns))| ns).sum();
    eprintln!(
        "eval profile @{func} over {scalar}: {:.3} s in top-level ops",
        total as f64 * 1e-9
    );
    for (name, (calls, ns)) in rows {
        eprintln!("  {name:<38} {calls:>6} calls {:>9.3} s", *ns as f64 * 1e-9);
    }
}
