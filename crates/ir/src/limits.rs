//! The memory limit: how large one tensor may be before an evaluator
//! allocates it, and the walk that checks every value of a module against it.
//!
//! Owns [`max_bytes`] / [`set_max_bytes`] (process-wide; initialised from
//! `CERTGRAD_MAX_BYTES`, else [`DEFAULT_MAX_BYTES`]), [`parse_byte_size`]
//! (`16G`, `512MiB`, `1000000`), [`tensor_bytes`] (a checked byte count) and
//! [`check_module`], which den's evaluator and exec's plans call before they
//! allocate anything. A type whose size does not fit in the limit, or does
//! not fit in `usize` at all, is refused naming the op, its source line and
//! column, the type and the size — instead of a "capacity overflow" panic or
//! an allocation abort deep inside a kernel.

use crate::module::{Block, Module, SrcLoc};
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

/// Sets the per-tensor limit for the rest of the process (0 is taken as 1).
pub fn set_max_bytes(bytes: u64) {
    MAX_BYTES.store(bytes.max(1), Ordering::Relaxed);
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

/// A tensor over the limit: where, what, how large.
#[derive(Clone, Debug, PartialEq)]
pub struct SizeError {
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
    check_module_with(m, bytes_per_elem, max_bytes())
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
