//! The memory limits: how large one tensor may be, and how many bytes one
//! evaluation may hold live at once, before an evaluator allocates anything;
//! and the walks that check a module against them.
//!
//! Owns [`max_bytes`] / [`set_max_bytes`] (process-wide; initialised from
//! `CERTGRAD_MAX_BYTES`, else [`DEFAULT_MAX_BYTES`]), [`parse_byte_size`]
//! (`16G`, `512MiB`, `1000000`), [`tensor_bytes`] (a checked byte count) and
//! [`check_module`], which den's evaluator and exec's plans call before they
//! allocate anything. A type whose size does not fit in the limit, or does
//! not fit in `usize` at all, is refused naming the op, its source line and
//! column, the type and the size — instead of a "capacity overflow" panic or
//! an allocation abort deep inside a kernel.
//!
//! The total limit ([`max_total_bytes`]) bounds the peak of the bytes live at
//! once when a function runs in program order with every value freed after
//! its last use — what den's evaluator and exec's plans hold. Many tensors
//! each under the per-tensor limit can still add up past the machine's
//! memory; that is refused the same way, naming the op where the peak falls.
//! Its default is the machine's physical memory; an explicit `--max-memory`
//! (or `CERTGRAD_MAX_BYTES`) sets both limits.

use crate::module::{Block, Module, Op, SrcLoc, ValueId};
use crate::types::TensorType;
use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering};

/// The default limit on one tensor: 16 GiB. Larger single tensors are almost
/// always a typo'd shape; set `CERTGRAD_MAX_BYTES` (or the CLI's
/// `--max-memory`) to go beyond it.
pub const DEFAULT_MAX_BYTES: u64 = 16 << 30;

/// The environment variable read once for the initial limit.
pub const ENV_VAR: &str = "CERTGRAD_MAX_BYTES";

/// 0 = not initialised yet (read the environment on first use).
static MAX_BYTES: AtomicU64 = AtomicU64::new(0);

/// The limit on the bytes of one tensor. The first call reads
/// `CERTGRAD_MAX_BYTES`; an unreadable value falls back to the default with a
/// warning on stderr (callers that want a hard error use [`limit_from_env`]).
pub fn max_bytes() -> u64 {
    let v = MAX_BYTES.load(Ordering::Relaxed);
    if v != 0 {
        return v;
    }
    let v = match limit_from_env() {
        Ok(Some(v)) => v,
        Ok(None) => DEFAULT_MAX_BYTES,
        Err(e) => {
            eprintln!("warning: {e}; using the default limit");
            DEFAULT_MAX_BYTES
        }
    };
    MAX_BYTES.store(v, Ordering::Relaxed);
    v
}

/// Sets the per-tensor limit and the total limit for the rest of the
/// process (0 is taken as 1).
pub fn set_max_bytes(bytes: u64) {
    MAX_BYTES.store(bytes.max(1), Ordering::Relaxed);
    MAX_TOTAL_BYTES.store(bytes.max(1), Ordering::Relaxed);
}

/// 0 = not initialised yet.
static MAX_TOTAL_BYTES: AtomicU64 = AtomicU64::new(0);

/// The limit on the bytes one evaluation holds live at once: the value given
/// to [`set_max_bytes`] or `CERTGRAD_MAX_BYTES` when either was given, else
/// the machine's physical memory (no limit where that cannot be read).
pub fn max_total_bytes() -> u64 {
    let v = MAX_TOTAL_BYTES.load(Ordering::Relaxed);
    if v != 0 {
        return v;
    }
    let v = match limit_from_env() {
        Ok(Some(v)) => v,
        _ => physical_memory().unwrap_or(u64::MAX),
    };
    MAX_TOTAL_BYTES.store(v, Ordering::Relaxed);
    v
}

/// `MemTotal` of `/proc/meminfo`, in bytes.
fn physical_memory() -> Option<u64> {
    let info = std::fs::read_to_string("/proc/meminfo").ok()?;
    let line = info.lines().find(|l| l.starts_with("MemTotal:"))?;
    let kib: u64 = line
        .trim_start_matches("MemTotal:")
        .trim()
        .trim_end_matches("kB")
        .trim()
        .parse()
        .ok()?;
    kib.checked_mul(1024)
}

/// `CERTGRAD_MAX_BYTES` parsed: `None` when unset.
pub fn limit_from_env() -> Result<Option<u64>, String> {
    match std::env::var(ENV_VAR) {
        Err(std::env::VarError::NotPresent) => Ok(None),
        Err(e) => Err(format!("{ENV_VAR}: {e}")),
        Ok(s) => parse_byte_size(&s)
            .map(Some)
            .map_err(|e| format!("{ENV_VAR}={s:?}: {e}")),
    }
}

/// A byte count: digits with an optional binary suffix `K`, `M`, `G`, `T`
/// (also `KiB`/`KB`…, case-insensitive; all powers of 1024). Zero, fractions,
/// signs and overflow are refused.
pub fn parse_byte_size(s: &str) -> Result<u64, String> {
    let t = s.trim();
    let digits = t.bytes().take_while(u8::is_ascii_digit).count();
    if digits == 0 {
        return Err("expected a byte count such as 8G, 512M or 1000000".into());
    }
    let n: u64 = t[..digits]
        .parse()
        .map_err(|_| "the byte count does not fit in 64 bits".to_string())?;
    let shift = match t[digits..].trim().to_ascii_lowercase().as_str() {
        "" | "b" => 0,
        "k" | "kb" | "kib" => 10,
        "m" | "mb" | "mib" => 20,
        "g" | "gb" | "gib" => 30,
        "t" | "tb" | "tib" => 40,
        other => {
            return Err(format!(
                "unknown unit {other:?} (expected K, M, G or T, powers of 1024)"
            ))
        }
    };
    if n == 0 {
        return Err("the limit must be positive".into());
    }
    n.checked_mul(1u64 << shift)
        .ok_or_else(|| "the byte count does not fit in 64 bits".to_string())
}

/// Bytes of one element as the IR stores it (bool and sub-byte types take a byte).
pub fn elem_bytes(t: &TensorType) -> u64 {
    u64::from(t.elem.bit_width().div_ceil(8).max(1))
}

/// The elements of `t` and its bytes at `bytes_per_elem` each, exactly (no
/// overflow possible: each dimension is below 2^63 and the product is
/// computed in u128, saturating).
pub fn tensor_bytes(t: &TensorType, bytes_per_elem: u64) -> (u128, u128) {
    let mut n: u128 = 1;
    for &d in &t.shape {
        n = n.saturating_mul(u128::from(d.max(0) as u64));
    }
    (n, n.saturating_mul(u128::from(bytes_per_elem)))
}

/// A byte count for people: `400.0 GB (400000000000 bytes)`.
pub fn human_bytes(b: u128) -> String {
    let units = [("TB", 1e12), ("GB", 1e9), ("MB", 1e6), ("kB", 1e3)];
    let f = b as f64;
    for (u, s) in units {
        if f >= s {
            return format!("{:.1} {u} ({b} bytes)", f / s);
        }
    }
    format!("{b} bytes")
}

/// Which limit a [`SizeError`] is about.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SizeKind {
    /// One tensor over the per-tensor limit (or over what `usize` can count).
    Tensor,
    /// The bytes live at once, at this op, over the total limit.
    PeakLive,
}

/// A tensor, or the live set at one op, over its limit: where, what, how large.
#[derive(Clone, Debug, PartialEq)]
pub struct SizeError {
    pub kind: SizeKind,
    pub func: String,
    /// The op defining the value (`func.func` for a parameter).
    pub op: &'static str,
    /// Source line and column when the module was parsed.
    pub loc: Option<(u32, u32)>,
    pub ty: TensorType,
    pub elements: u128,
    pub bytes: u128,
    pub limit: u64,
}

impl SizeError {
    /// What is wrong, without the place: the type, its size and the limit.
    pub fn what(&self) -> String {
        if self.kind == SizeKind::PeakLive {
            return format!(
                "{} are live at once here (the peak of @{} run in program order, every \
                 value freed after its last use; this op makes {}), over the total memory \
                 limit of {} (the machine's memory by default; raise it with --max-memory \
                 or {ENV_VAR})",
                human_bytes(self.bytes),
                self.func,
                self.ty,
                human_bytes(u128::from(self.limit))
            );
        }
        let head = format!(
            "{} needs {} ({} elements)",
            self.ty,
            human_bytes(self.bytes),
            self.elements
        );
        if self.bytes > usize::MAX as u128 {
            format!("{head}, more than this machine can address")
        } else {
            format!(
                "{head}, over the memory limit of {} per tensor \
                 (raise it with --max-memory or {ENV_VAR})",
                human_bytes(u128::from(self.limit))
            )
        }
    }
}

impl fmt::Display for SizeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "func @{}", self.func)?;
        if let Some((l, c)) = self.loc {
            write!(f, ", line {l}:{c}")?;
        }
        write!(f, ": {}: {}", self.op, self.what())
    }
}

impl std::error::Error for SizeError {}

/// Checks every parameter and every op result of every function of `m`
/// (regions included) against [`max_bytes`], at `bytes_per_elem` bytes per
/// element when given (an evaluator's scalar size), else the IR element size
/// — whichever is larger. The first value over the limit is reported.
pub fn check_module(m: &Module, bytes_per_elem: Option<usize>) -> Result<(), Box<SizeError>> {
    check_module_with(m, bytes_per_elem, max_bytes())?;
    check_peak_with(m, bytes_per_elem, max_total_bytes())
}

/// [`check_module`] against an explicit `limit`.
pub fn check_module_with(
    m: &Module,
    bytes_per_elem: Option<usize>,
    limit: u64,
) -> Result<(), Box<SizeError>> {
    let per = bytes_per_elem.map_or(0, |b| b as u64);
    let check = |func: &str, op: &'static str, loc: SrcLoc, ty: &TensorType| {
        let (elements, bytes) = tensor_bytes(ty, per.max(elem_bytes(ty)));
        if bytes > u128::from(limit) || bytes > usize::MAX as u128 {
            return Err(Box::new(SizeError {
                kind: SizeKind::Tensor,
                func: func.to_string(),
                op,
                loc: loc.0,
                ty: ty.clone(),
                elements,
                bytes,
                limit,
            }));
        }
        Ok(())
    };
    type Check<'c> =
        dyn Fn(&str, &'static str, SrcLoc, &TensorType) -> Result<(), Box<SizeError>> + 'c;
    fn walk(b: &Block, func: &str, check: &Check<'_>) -> Result<(), Box<SizeError>> {
        for op in &b.ops {
            for (_, ty) in &op.results {
                check(func, op.kind.name(), op.loc, ty)?;
            }
            for r in &op.regions {
                for (_, ty) in &r.args {
                    check(func, op.kind.name(), op.loc, ty)?;
                }
                walk(r, func, check)?;
            }
        }
        Ok(())
    }
    for f in &m.funcs {
        for p in &f.params {
            check(&f.name, "func.func", SrcLoc(None), &p.ty)?;
        }
        walk(&f.body, &f.name, &check)?;
    }
    Ok(())
}

/// The peak of one function's live bytes: where it falls and how large.
#[derive(Clone, Debug, PartialEq)]
pub struct PeakLive {
    pub bytes: u128,
    /// The op whose results (and whose regions' or callee's temporaries)
    /// make the peak; `func.func` when the parameters alone do.
    pub op: &'static str,
    pub loc: SrcLoc,
    /// The op's first result type (the first parameter's for `func.func`).
    pub ty: Option<TensorType>,
}

/// The bytes live at once while `func` runs in program order, each value
/// freed after its last use (uses inside an op's regions count as the op's),
/// parameters live throughout, a region's or callee's own peak added at the
/// op that runs it. `None` when `func` is not in `m`. Never panics on an
/// unverified module: a value it cannot place counts as zero bytes.
pub fn peak_live_bytes(m: &Module, func: &str, bytes_per_elem: Option<usize>) -> Option<PeakLive> {
    let per = bytes_per_elem.map_or(0, |b| b as u64);
    let f = m.func(func)?;
    let mut walk = PeakWalk {
        m,
        per,
        callees: std::collections::HashMap::new(),
        depth: 0,
    };
    Some(walk.block(&f.body, true))
}

/// Refuses a function of `m` whose [`peak_live_bytes`] exceed `limit`.
pub fn check_peak_with(
    m: &Module,
    bytes_per_elem: Option<usize>,
    limit: u64,
) -> Result<(), Box<SizeError>> {
    for f in &m.funcs {
        let Some(p) = peak_live_bytes(m, &f.name, bytes_per_elem) else {
            continue;
        };
        if p.bytes > u128::from(limit) {
            let ty = p.ty.unwrap_or_else(|| TensorType::f32(vec![]));
            let (elements, _) = tensor_bytes(&ty, 1);
            return Err(Box::new(SizeError {
                kind: SizeKind::PeakLive,
                func: f.name.clone(),
                op: p.op,
                loc: p.loc.0,
                ty,
                elements,
                bytes: p.bytes,
                limit,
            }));
        }
    }
    Ok(())
}

struct PeakWalk<'m> {
    m: &'m Module,
    per: u64,
    /// A callee's peak beyond its parameters (which the caller holds).
    callees: std::collections::HashMap<String, u128>,
    depth: usize,
}

impl PeakWalk<'_> {
    fn bytes(&self, t: &TensorType) -> u128 {
        tensor_bytes(t, self.per.max(elem_bytes(t))).1
    }

    /// The peak of `b`'s own values, its arguments included; `hold_args`:
    /// the arguments stay live throughout (a function's parameters, which
    /// its caller holds), else they die after their last use.
    fn block(&mut self, b: &Block, hold_args: bool) -> PeakLive {
        use std::collections::HashMap;
        fn uses(op: &Op, i: usize, last: &mut HashMap<ValueId, usize>) {
            for v in &op.operands {
                last.insert(*v, i);
            }
            for r in &op.regions {
                for o in &r.ops {
                    uses(o, i, last);
                }
            }
        }
        let mut last = HashMap::new();
        for (i, op) in b.ops.iter().enumerate() {
            uses(op, i, &mut last);
        }
        let mut size: HashMap<ValueId, u128> = HashMap::new();
        let mut live: u128 = 0;
        for (v, t) in &b.args {
            let n = self.bytes(t);
            if !hold_args {
                size.insert(*v, n);
            }
            live = live.saturating_add(n);
        }
        let mut peak = PeakLive {
            bytes: live,
            op: "func.func",
            loc: SrcLoc(None),
            ty: b.args.first().map(|a| a.1.clone()),
        };
        let mut dying: HashMap<usize, Vec<ValueId>> = HashMap::new();
        for (v, &i) in &last {
            dying.entry(i).or_default().push(*v);
        }
        for (i, op) in b.ops.iter().enumerate() {
            let mut inner: u128 = 0;
            for r in &op.regions {
                inner = inner.max(self.block(r, false).bytes);
            }
            if let crate::ops::OpKind::Call { callee } = &op.kind {
                inner = inner.max(self.callee(callee));
            }
            let mut made: u128 = 0;
            for (v, t) in &op.results {
                let n = self.bytes(t);
                size.insert(*v, n);
                made = made.saturating_add(n);
            }
            let now = live.saturating_add(inner).saturating_add(made);
            if now > peak.bytes {
                peak = PeakLive {
                    bytes: now,
                    op: op.kind.name(),
                    loc: op.loc,
                    ty: op.results.first().map(|r| r.1.clone()),
                };
            }
            live = live.saturating_add(made);
            // Unused results die at once; operands (of this block) after their last use.
            for (v, _) in &op.results {
                if !last.contains_key(v) {
                    live = live.saturating_sub(size.remove(v).unwrap_or(0));
                }
            }
            for v in dying.get(&i).into_iter().flatten() {
                live = live.saturating_sub(size.remove(v).unwrap_or(0));
            }
        }
        peak
    }

    fn callee(&mut self, name: &str) -> u128 {
        if let Some(&n) = self.callees.get(name) {
            return n;
        }
        // StableHLO has no recursion; a cycle in a malformed module counts as nothing.
        if self.depth > 64 {
            return 0;
        }
        let Some(f) = self.m.func(name) else {
            return 0;
        };
        self.depth += 1;
        let params: u128 = f.params.iter().map(|p| self.bytes(&p.ty)).sum();
        let own = self.block(&f.body, true).bytes;
        self.depth -= 1;
        let extra = own.saturating_sub(params.min(own));
        self.callees.insert(name.to_string(), extra);
        extra
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn byte_sizes_parse_with_binary_units() {
        assert_eq!(parse_byte_size("1000"), Ok(1000));
        assert_eq!(parse_byte_size("8G"), Ok(8 * 1024 * 1024 * 1024));
        assert_eq!(parse_byte_size("512MiB"), Ok(512 * 1024 * 1024));
        assert_eq!(parse_byte_size(" 2 kb "), Ok(2048));
        assert!(parse_byte_size("0").is_err());
        assert!(parse_byte_size("-1G").is_err());
        assert!(parse_byte_size("1.5G").is_err());
        assert!(parse_byte_size("16E").is_err());
        assert!(parse_byte_size("99999999999T").is_err());
        assert!(parse_byte_size("").is_err());
    }

    #[test]
    fn tensor_bytes_do_not_overflow() {
        // 3037000499^2 = 9223372030926249001 elements (< 2^63) × 4 bytes > 2^64.
        let t = TensorType::f32(vec![3037000499, 3037000499]);
        let (n, b) = tensor_bytes(&t, 4);
        assert_eq!(n, 9_223_372_030_926_249_001u128);
        assert_eq!(b, 36_893_488_123_704_996_004u128);
        assert_eq!(tensor_bytes(&TensorType::f32(vec![]), 4), (1, 4));
        assert_eq!(tensor_bytes(&TensorType::f32(vec![3, 0]), 4), (0, 0));
    }
}
