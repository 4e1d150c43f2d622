//! Number literals of the StableHLO text: how `print` spells an element value
//! and how `parse` reads one back, plus the rounding the builder applies to
//! constants. One home so that printing and parsing agree by construction: a
//! printed float reads back to the same bits (`float_literal` checks it with
//! `decimal_to_elem`), 16-bit floats round and decode the way MLIR's APFloat
//! does, and integers accept exactly the spellings MLIR writes.

use crate::ops::DenseData;
use crate::types::{ElemType, TensorType};

// ---------------------------------------------------------------------------
// Floats.

/// Exponent and mantissa bits of a float element type.
fn float_format(elem: ElemType) -> (u32, u32) {
    match elem {
        ElemType::F16 => (5, 10),
        ElemType::BF16 => (8, 7),
        ElemType::F64 => (11, 52),
        _ => (8, 23),
    }
}

/// `x` rounded (to nearest, ties to even) to the float element type `elem`,
/// returned as the exactly equal f64. Overflow gives ±inf, as MLIR's APFloat does.
pub fn round_to_elem(x: f64, elem: ElemType) -> f64 {
    match elem {
        ElemType::F64 => x,
        ElemType::F32 => x as f32 as f64,
        _ => {
            if !x.is_finite() || x == 0.0 {
                return x;
            }
            let (e, m) = float_format(elem);
            let emax = (1i32 << (e - 1)) - 1;
            let emin = 1 - emax;
            let a = x.abs();
            // floor(log2(a)) from the f64 exponent field; `a` is a normal f64 here
            // whenever it matters (f64 subnormals are far below every 16-bit format).
            let exp = ((a.to_bits() >> 52) as i32 & 0x7ff) - 1023;
            let quantum = 2f64.powi(exp.max(emin) - m as i32);
            let r = (a / quantum).round_ties_even() * quantum;
            let max_finite = (2.0 - 2f64.powi(-(m as i32))) * 2f64.powi(emax);
            let r = if r > max_finite { f64::INFINITY } else { r };
            r.copysign(x)
        }
    }
}

/// The value of the `elem`-typed float whose storage bits are `bits`; `None` when
/// `bits` does not fit the type's width.
pub(crate) fn float_from_bits(bits: u64, elem: ElemType) -> Option<f64> {
    match elem {
        ElemType::F64 => Some(f64::from_bits(bits)),
        ElemType::F32 => u32::try_from(bits).ok().map(|b| f32::from_bits(b) as f64),
        ElemType::F16 | ElemType::BF16 => {
            if bits > 0xffff {
                return None;
            }
            let (e, m) = float_format(elem);
            let sign = if bits >> (e + m) & 1 == 1 { -1.0 } else { 1.0 };
            let exp_field = (bits >> m) & ((1 << e) - 1);
            let frac = (bits & ((1 << m) - 1)) as f64;
            let bias = (1i32 << (e - 1)) - 1;
            let v = if exp_field == (1 << e) - 1 {
                if frac == 0.0 {
                    f64::INFINITY
                } else {
                    f64::NAN
                }
            } else if exp_field == 0 {
                frac * 2f64.powi(1 - bias - m as i32)
            } else {
                (1.0 + frac * 2f64.powi(-(m as i32))) * 2f64.powi(exp_field as i32 - bias)
            };
            Some(sign * v)
        }
        _ => None,
    }
}

/// Storage bits of a non-finite value, for the hex spelling MLIR uses for them.
fn nonfinite_bits(x: f64, elem: ElemType) -> String {
    let neg = x.is_sign_negative();
    match elem {
        ElemType::F64 => format!("0x{:016X}", x.to_bits()),
        ElemType::BF16 => format!("0x{:04X}", (x as f32).to_bits() >> 16),
        ElemType::F16 => {
            let mag: u32 = if x.is_nan() { 0x7E00 } else { 0x7C00 };
            format!("0x{:04X}", mag | if neg { 0x8000 } else { 0 })
        }
        _ => format!("0x{:08X}", (x as f32).to_bits()),
    }
}

/// `d.dddddde±XX` with `digits` digits after the point: MLIR's `%e` style.
fn sci(x: f64, digits: usize) -> String {
    normalise_exp(&format!("{x:.digits$e}"))
}

/// Rust writes `1.5e-3` / `1e0`; MLIR wants a decimal point in the mantissa and a
/// signed two-digit exponent: `1.5e-03`, `1.0e+00`.
fn normalise_exp(s: &str) -> String {
    let (mant, exp) = s.split_once('e').unwrap_or((s, "0"));
    let exp: i32 = exp.parse().unwrap_or(0);
    let mant = if mant.contains('.') {
        mant.to_string()
    } else {
        format!("{mant}.0")
    };
    let sign = if exp < 0 { '-' } else { '+' };
    format!("{mant}e{sign}{:02}", exp.abs())
}

/// Parse a decimal literal as an `elem` value (correctly rounded).
pub(crate) fn decimal_to_elem(text: &str, elem: ElemType) -> Option<f64> {
    match elem {
        ElemType::F32 => text.parse::<f32>().ok().map(|v| v as f64),
        _ => text.parse::<f64>().ok().map(|v| round_to_elem(v, elem)),
    }
}

/// The literal MLIR prints for a float of type `elem`: `%e` with six digits when
/// that reads back to exactly `x`, else the shortest exact spelling, and hex bits
/// for inf/NaN.
pub fn float_literal(x: f64, elem: ElemType) -> String {
    if !x.is_finite() {
        return nonfinite_bits(x, elem);
    }
    let same = |s: &str| decimal_to_elem(s, elem).map(f64::to_bits) == Some(x.to_bits());
    let six = sci(x, 6);
    if same(&six) {
        return six;
    }
    let shortest = match elem {
        ElemType::F32 => normalise_exp(&format!("{:e}", x as f32)),
        ElemType::F64 => normalise_exp(&format!("{x:e}")),
        _ => (7..=17)
            .map(|d| sci(x, d))
            .find(|s| same(s))
            .unwrap_or_default(),
    };
    if same(&shortest) {
        shortest
    } else {
        // `x` is not a value of `elem` at all (an invalid constant): print it at
        // f64 precision so at least nothing is hidden.
        normalise_exp(&format!("{x:e}"))
    }
}

// ---------------------------------------------------------------------------
// Integers and dense literals.

fn int_literal(v: i64, elem: ElemType) -> String {
    match elem {
        ElemType::I1 => (if v != 0 { "true" } else { "false" }).to_string(),
        ElemType::UI64 => (v as u64).to_string(),
        _ => v.to_string(),
    }
}

/// `dense<…>` (without the trailing `: type`): a splat for one stored value,
/// nested lists following `ty`'s shape otherwise.
pub fn dense_literal(data: &DenseData, ty: &TensorType) -> String {
    let elems: Vec<String> = match data {
        DenseData::Float(v) => v.iter().map(|x| float_literal(*x, ty.elem)).collect(),
        DenseData::Int(v) => v.iter().map(|x| int_literal(*x, ty.elem)).collect(),
    };
    let mut out = String::from("dense<");
    let count = ty
        .shape
        .iter()
        .try_fold(1usize, |acc, d| acc.checked_mul(usize::try_from(*d).ok()?));
    if elems.len() == 1 {
        out.push_str(&elems[0]);
    } else if elems.is_empty() {
        // `dense<>` is MLIR's spelling of a zero-element tensor.
    } else if count == Some(elems.len()) && !ty.shape.is_empty() {
        nested(&mut out, &elems, &ty.shape);
    } else {
        // Data and shape disagree (an invalid module); a flat list keeps every value.
        out.push('[');
        out.push_str(&elems.join(", "));
        out.push(']');
    }
    out.push('>');
    out
}

fn nested(out: &mut String, elems: &[String], shape: &[i64]) {
    match shape.split_first() {
        None => out.push_str(elems.first().map(String::as_str).unwrap_or("")),
        Some((&d, rest)) => {
            let d = d.max(1) as usize;
            let chunk = (elems.len() / d).max(1);
            out.push('[');
            for (i, part) in elems.chunks(chunk).enumerate() {
                if i > 0 {
                    out.push_str(", ");
                }
                nested(out, part, rest);
            }
            out.push(']');
        }
    }
}

// ---------------------------------------------------------------------------
// Reading element literals (the parser's side; `None` is a malformed literal).

/// A float element: a decimal, or `0x…` storage bits as MLIR spells non-finite
/// values.
pub(crate) fn parse_float(text: &str, elem: ElemType) -> Option<f64> {
    if let Some(hex) = text.strip_prefix("0x").or_else(|| text.strip_prefix("0X")) {
        let bits = u64::from_str_radix(hex, 16).ok()?;
        return float_from_bits(bits, elem);
    }
    let numeric = text
        .trim_start_matches(['-', '+'])
        .bytes()
        .next()
        .is_some_and(|b| b.is_ascii_digit());
    if !numeric {
        return None;
    }
    decimal_to_elem(text, elem)
}

/// An integer element: decimal, `0x…`, or `true`/`false`, range-checked
/// against `elem` and stored sign-extended.
pub(crate) fn parse_int(text: &str, elem: ElemType) -> Option<i64> {
    let v: i128 = match text {
        "true" => 1,
        "false" => 0,
        _ => {
            if let Some(hex) = text.strip_prefix("0x").or_else(|| text.strip_prefix("0X")) {
                u64::from_str_radix(hex, 16).ok()? as i128
            } else {
                text.parse::<i128>().ok()?
            }
        }
    };
    let bits = elem.bit_width();
    let (lo, hi): (i128, i128) = if elem == ElemType::I1 {
        (0, 1)
    } else if elem.is_unsigned() {
        (0, (1i128 << bits) - 1)
    } else {
        // MLIR accepts a signed type's unsigned spelling (`255 : i8`); keep the
        // signed reading.
        (-(1i128 << (bits - 1)), (1i128 << bits) - 1)
    };
    if v < lo || v > hi {
        return None;
    }
    let v = if !elem.is_unsigned() && elem != ElemType::I1 && v >= 1i128 << (bits - 1) {
        v - (1i128 << bits)
    } else {
        v
    };
    Some(v as i64)
}

/// The payload of `dense<"0x…">` (`text` without the quotes): little-endian
/// element bytes, one element (a splat) or one per element of `ty`. `Err` says
/// what was expected.
pub(crate) fn hex_blob_data(text: &str, ty: &TensorType) -> Result<DenseData, &'static str> {
    let hex = text.strip_prefix("0x").ok_or("a hex string starting 0x")?;
    if hex.len() & 1 == 1 {
        return Err("an even number of hex digits");
    }
    // One pass over digit pairs (blobs of real weights run to many megabytes).
    fn nibble(b: u8) -> Option<u8> {
        match b {
            b'0'..=b'9' => Some(b - b'0'),
            b'a'..=b'f' => Some(b - b'a' + 10),
            b'A'..=b'F' => Some(b - b'A' + 10),
            _ => None,
        }
    }
    let bytes: Vec<u8> = hex
        .as_bytes()
        .chunks_exact(2)
        .map(|p| Some(nibble(p[0])? << 4 | nibble(p[1])?))
        .collect::<Option<_>>()
        .ok_or("an even number of hex digits")?;
    let width = (ty.elem.bit_width() as usize).div_ceil(8);
    let count: Option<usize> = ty
        .shape
        .iter()
        .try_fold(1usize, |a, d| a.checked_mul(usize::try_from(*d).ok()?));
    let n = bytes.len() / width;
    if n * width != bytes.len() || (n != 1 && Some(n) != count) {
        return Err("a hex blob of one element or one per tensor element");
    }
    let words = bytes.chunks(width).map(|c| {
        c.iter()
            .rev()
            .fold(0u64, |acc, b| (acc << 8) | u64::from(*b))
    });
    if ty.elem.is_float() {
        let v: Option<Vec<f64>> = words.map(|w| float_from_bits(w, ty.elem)).collect();
        Ok(DenseData::Float(v.ok_or("float bits")?))
    } else {
        let bits = ty.elem.bit_width();
        let v = words
            .map(|w| {
                if ty.elem.is_unsigned() || bits >= 64 || ty.elem == ElemType::I1 {
                    w as i64
                } else {
                    // Sign-extend from the element's width.
                    let shift = 64 - bits;
                    ((w << shift) as i64) >> shift
                }
            })
            .collect();
        Ok(DenseData::Int(v))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn float_literals_use_mlir_spellings() {
        assert_eq!(float_literal(0.0, ElemType::F32), "0.000000e+00");
        assert_eq!(float_literal(1.0, ElemType::F32), "1.000000e+00");
        assert_eq!(float_literal(-2.5e-3, ElemType::F64), "-2.500000e-03");
        assert_eq!(float_literal(0.1f32 as f64, ElemType::F32), "1.000000e-01");
        assert_eq!(
            float_literal(0.70710677f32 as f64, ElemType::F32),
            "7.0710677e-01"
        );
        assert_eq!(float_literal(0.1, ElemType::F64), "1.000000e-01");
        assert_eq!(
            float_literal(1.0 / 3.0, ElemType::F64),
            "3.333333333333333e-01"
        );
        assert_eq!(
            float_literal(f64::NEG_INFINITY, ElemType::F32),
            "0xFF800000"
        );
        assert_eq!(float_literal(f64::INFINITY, ElemType::F32), "0x7F800000");
        assert_eq!(float_literal(f64::NAN, ElemType::F32), "0x7FC00000");
        assert_eq!(float_literal(f64::NEG_INFINITY, ElemType::BF16), "0xFF80");
        assert_eq!(float_literal(f64::INFINITY, ElemType::F16), "0x7C00");
        assert_eq!(
            float_literal(f64::INFINITY, ElemType::F64),
            "0x7FF0000000000000"
        );
        assert_eq!(float_literal(-0.0, ElemType::F32), "-0.000000e+00");
    }

    #[test]
    fn sixteen_bit_rounding_and_bits_agree() {
        // Every bf16 and f16 bit pattern decodes to a value that rounds to itself
        // and prints a literal that reads back to it.
        for elem in [ElemType::BF16, ElemType::F16] {
            for bits in (0u64..=0xffff).step_by(7) {
                let v = float_from_bits(bits, elem).expect("16 bits fit");
                if !v.is_finite() {
                    continue;
                }
                assert_eq!(
                    round_to_elem(v, elem).to_bits(),
                    v.to_bits(),
                    "{elem} {bits:#x}"
                );
                let lit = float_literal(v, elem);
                assert_eq!(
                    decimal_to_elem(&lit, elem).map(f64::to_bits),
                    Some(v.to_bits()),
                    "{elem} {bits:#x} printed {lit}"
                );
            }
        }
        assert_eq!(float_from_bits(0x3F80, ElemType::BF16), Some(1.0));
        assert_eq!(float_from_bits(0x3C00, ElemType::F16), Some(1.0));
        assert_eq!(float_from_bits(0x0001, ElemType::F16), Some(2f64.powi(-24)));
        assert_eq!(round_to_elem(65520.0, ElemType::F16), f64::INFINITY);
        assert_eq!(round_to_elem(65519.0, ElemType::F16), 65504.0);
    }

    #[test]
    fn dense_literals_follow_the_shape() {
        let ty = TensorType::f32([2, 2]);
        let d = DenseData::Float(vec![1.0, 2.0, 3.0, 4.0]);
        assert_eq!(
            dense_literal(&d, &ty),
            "dense<[[1.000000e+00, 2.000000e+00], [3.000000e+00, 4.000000e+00]]>"
        );
        let b = TensorType::new([2], ElemType::I1);
        assert_eq!(dense_literal(&DenseData::Int(vec![1]), &b), "dense<true>");
        let i = TensorType::new([2], ElemType::I64);
        assert_eq!(
            dense_literal(&DenseData::Int(vec![1, 2]), &i),
            "dense<[1, 2]>"
        );
        let e = TensorType::f32([0]);
        assert_eq!(dense_literal(&DenseData::Float(vec![]), &e), "dense<>");
    }
}
