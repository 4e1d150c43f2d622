//! .npy files, certgrad's one codec for them: the format (format 1.0 written,
//! 1.0, 2.0 and 3.0 headers read, C order only) and the mapping of numpy
//! dtypes onto what certgrad carries. Two users: the IREE engine exchanges
//! [`HostTensor`]s (float32, int32, int64) with `iree-run-module`
//! ([`read`], [`write`]), and `certgrad run` / `check-vjp` read a function's
//! arguments and write its results as evaluator values of any StableHLO
//! element type ([`read_argument`], [`write_value`]). Anything else is
//! refused with the file and the reason.

use crate::error::EngineError;
use crate::host::{HostData, HostTensor};
use den::value::Value;
use den::{Scalar, Tensor};
use ir::{ElemType, TensorType};
use std::io::Write;
use std::path::Path;

const MAGIC: &[u8] = b"\x93NUMPY";

fn descr(data: &HostData) -> &'static str {
    match data {
        HostData::F32(_) => "<f4",
        HostData::I32(_) => "<i4",
        HostData::I64(_) => "<i8",
    }
}

/// A format-1.0 header for a C-order array of `descr` and `shape`, padded
/// (as numpy pads it) so that the data starts on a 64-byte boundary.
fn header_bytes(descr: &str, shape: &[usize]) -> Vec<u8> {
    let shape = match shape.len() {
        0 => "()".to_string(),
        1 => format!("({},)", shape[0]),
        _ => format!(
            "({})",
            shape
                .iter()
                .map(|d| d.to_string())
                .collect::<Vec<_>>()
                .join(", ")
        ),
    };
    let mut header = format!("{{'descr': '{descr}', 'fortran_order': False, 'shape': {shape}, }}");
    let unpadded = MAGIC.len() + 2 + 2 + header.len() + 1;
    header.push_str(&" ".repeat((64 - unpadded % 64) % 64));
    header.push('\n');
    let mut out = Vec::with_capacity(MAGIC.len() + 4 + header.len());
    out.extend_from_slice(MAGIC);
    out.extend_from_slice(&[1, 0]);
    out.extend_from_slice(&(header.len() as u16).to_le_bytes());
    out.extend_from_slice(header.as_bytes());
    out
}

/// The bytes of `t` as a format-1.0 .npy file.
pub fn to_bytes(t: &HostTensor) -> Vec<u8> {
    let shape: Vec<usize> = t.shape.iter().map(|&d| d as usize).collect();
    let mut out = header_bytes(descr(&t.data), &shape);
    out.reserve(8 * t.data.len());
    match &t.data {
        HostData::F32(v) => v
            .iter()
            .for_each(|x| out.extend_from_slice(&x.to_le_bytes())),
        HostData::I32(v) => v
            .iter()
            .for_each(|x| out.extend_from_slice(&x.to_le_bytes())),
        HostData::I64(v) => v
            .iter()
            .for_each(|x| out.extend_from_slice(&x.to_le_bytes())),
    }
    out
}

/// Writes `t` to `path` as .npy.
pub fn write(path: &Path, t: &HostTensor) -> Result<(), EngineError> {
    std::fs::write(path, to_bytes(t))
        .map_err(|e| EngineError(format!("writing {}: {e}", path.display())))
}

/// Reads the .npy file at `path`.
pub fn read(path: &Path) -> Result<HostTensor, EngineError> {
    let bytes =
        std::fs::read(path).map_err(|e| EngineError(format!("reading {}: {e}", path.display())))?;
    from_bytes(&bytes).map_err(|e| EngineError(format!("{}: {}", path.display(), e.0)))
}

/// A parsed .npy file: its header's three fields and the bytes after it.
#[derive(Clone, Debug, PartialEq)]
pub struct NpyArray<'a> {
    /// The dtype as the header spells it (`<f4`, `|b1`, …); a structured
    /// dtype's whole list (`[('a', '<f4'), …]`).
    pub descr: String,
    pub fortran_order: bool,
    pub shape: Vec<i64>,
    /// Everything after the header.
    pub data: &'a [u8],
}

impl NpyArray<'_> {
    /// Whether the dtype is a structured one (a list of fields).
    pub fn is_structured(&self) -> bool {
        self.descr.starts_with('[')
    }

    /// The element count; [`parse`] has checked that it (and its bytes at
    /// 8 per element) fits in `usize`.
    pub fn num_elements(&self) -> usize {
        self.shape.iter().map(|&d| d as usize).product()
    }
}

/// Parses the header of the .npy file `bytes`; the error is the reason alone
/// (callers say which file, and what they wanted of it).
pub fn parse(bytes: &[u8]) -> Result<NpyArray<'_>, String> {
    if bytes.len() < 10 || &bytes[..6] != MAGIC {
        return Err("no \\x93NUMPY magic".into());
    }
    let (header_len, start) = match bytes[6] {
        1 => (u16::from_le_bytes([bytes[8], bytes[9]]) as usize, 10),
        2 | 3 if bytes.len() >= 12 => (
            u32::from_le_bytes([bytes[8], bytes[9], bytes[10], bytes[11]]) as usize,
            12,
        ),
        v => return Err(format!("format version {v}.{}", bytes[7])),
    };
    let header = bytes
        .get(start..start + header_len)
        .ok_or("the header is truncated")?;
    let header = std::str::from_utf8(header).map_err(|_| "the header is not text")?;
    let descr_value = dict_value(header, "descr").ok_or("no 'descr' in the header")?;
    let descr = if descr_value.starts_with('[') {
        structured(descr_value).ok_or("no 'descr' in the header")?
    } else {
        descr_value
            .strip_prefix('\'')
            .or_else(|| descr_value.strip_prefix('"'))
            .and_then(|v| v.split(['\'', '"']).next())
            .ok_or("no 'descr' in the header")?
    };
    let fortran = dict_value(header, "fortran_order").ok_or("no 'fortran_order'")?;
    let shape_text = dict_value(header, "shape")
        .and_then(|v| v.strip_prefix('('))
        .and_then(|v| v.split(')').next())
        .ok_or("no 'shape' in the header")?;
    let shape = shape_text
        .split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(|s| s.parse::<i64>())
        .collect::<Result<Vec<_>, _>>()
        .map_err(|_| format!("shape ({shape_text})"))?;
    if let Some(d) = shape.iter().find(|&&d| d < 0) {
        return Err(format!("shape ({shape_text}) has a negative dimension {d}"));
    }
    // Every later byte count is elements × at most 8: checked once here.
    let fits = shape
        .iter()
        .try_fold(8usize, |n, &d| n.checked_mul(d as usize))
        .is_some();
    if !fits {
        return Err(format!(
            "shape ({shape_text}) has more elements than this machine can address"
        ));
    }
    let fortran_order = if fortran.starts_with("True") {
        true
    } else if fortran.starts_with("False") {
        false
    } else {
        return Err(format!(
            "'fortran_order' is {}, expected True or False",
            fortran.split([',', '}']).next().unwrap_or("").trim()
        ));
    };
    Ok(NpyArray {
        descr: descr.to_string(),
        fortran_order,
        shape,
        data: &bytes[start + header_len..],
    })
}

/// A structured dtype's list, `[` to its matching `]`.
fn structured(v: &str) -> Option<&str> {
    let mut depth = 0usize;
    for (i, c) in v.char_indices() {
        match c {
            '[' => depth += 1,
            ']' => {
                depth -= 1;
                if depth == 0 {
                    return Some(&v[..=i]);
                }
            }
            _ => {}
        }
    }
    None
}

/// Parses one .npy array from `bytes` (trailing bytes are an error: IREE's
/// `+file.npy` appends several arrays to one file, and certgrad never asks it to).
pub fn from_bytes(bytes: &[u8]) -> Result<HostTensor, EngineError> {
    let bad = |m: &str| EngineError(format!("not a usable .npy file: {m}"));
    let npy = parse(bytes).map_err(|m| bad(&m))?;
    if npy.fortran_order {
        return Err(bad("Fortran-order arrays are not supported"));
    }
    let (shape, descr, body) = (npy.shape.clone(), npy.descr.as_str(), npy.data);
    let n = npy.num_elements();
    let width = match descr {
        "<f4" | "<i4" => 4,
        "<i8" => 8,
        other => {
            return Err(bad(&format!(
                "dtype {other} (certgrad exchanges <f4, <i4 and <i8)"
            )))
        }
    };
    if body.len() != n * width {
        return Err(bad(&format!(
            "shape {shape:?} needs {} data bytes, the file has {}",
            n * width,
            body.len()
        )));
    }
    let words = body.chunks_exact(width);
    let data = match descr {
        "<f4" => HostData::F32(
            words
                .map(|w| f32::from_le_bytes(w.try_into().unwrap()))
                .collect(),
        ),
        "<i4" => HostData::I32(
            words
                .map(|w| i32::from_le_bytes(w.try_into().unwrap()))
                .collect(),
        ),
        _ => HostData::I64(
            words
                .map(|w| i64::from_le_bytes(w.try_into().unwrap()))
                .collect(),
        ),
    };
    Ok(HostTensor { shape, data })
}

/// The text after `'key':` in a header dict, leading spaces trimmed.
fn dict_value<'a>(header: &'a str, key: &str) -> Option<&'a str> {
    let at = header
        .find(&format!("'{key}'"))
        .or_else(|| header.find(&format!("\"{key}\"")))?;
    let rest = &header[at + key.len() + 2..];
    Some(rest.trim_start().strip_prefix(':')?.trim_start())
}

/// The numpy dtype certgrad writes for (and expects of) an element type.
/// bf16/f16 travel as float32 (numpy has no bf16); values are rounded on entry.
pub fn npy_dtype(elem: ElemType) -> &'static str {
    match elem {
        ElemType::F16 | ElemType::BF16 | ElemType::F32 => "<f4",
        ElemType::F64 => "<f8",
        ElemType::I1 => "|b1",
        ElemType::I8 => "|i1",
        ElemType::UI8 => "|u1",
        ElemType::I16 => "<i2",
        ElemType::UI16 => "<u2",
        ElemType::I32 => "<i4",
        ElemType::UI32 => "<u4",
        ElemType::I64 => "<i8",
        ElemType::UI64 => "<u8",
    }
}

fn numpy_name(dtype: &str) -> &str {
    match dtype {
        "<f4" => "float32",
        "<f8" => "float64",
        "|b1" => "bool",
        "|i1" => "int8",
        "|u1" => "uint8",
        "<i2" => "int16",
        "<u2" => "uint16",
        "<i4" => "int32",
        "<u4" => "uint32",
        "<i8" => "int64",
        "<u8" => "uint64",
        other => other,
    }
}

/// The bytes of one element of each dtype [`npy_dtype`] names.
fn width(dtype: &str) -> usize {
    match dtype {
        "|b1" | "|i1" | "|u1" => 1,
        "<i2" | "<u2" => 2,
        "<f4" | "<i4" | "<u4" => 4,
        _ => 8,
    }
}

/// Reads `path` as argument `index` of a function, of type `ty`: the file's
/// dtype must be the one [`npy_dtype`] gives for `ty`'s element type and its
/// shape `ty`'s. Data after the array's elements is ignored.
pub fn read_argument<S: Scalar>(
    path: &Path,
    index: usize,
    ty: &TensorType,
) -> Result<Value<S>, EngineError> {
    let at = |m: String| EngineError(format!("{}: {m}", path.display()));
    let bytes =
        std::fs::read(path).map_err(|e| EngineError(format!("reading {}: {e}", path.display())))?;
    let npy = parse(&bytes).map_err(|m| at(format!("not a valid .npy file: {m}")))?;
    if npy.is_structured() {
        return Err(at(format!(
            "structured dtype {} is not supported",
            npy.descr
        )));
    }
    let want = npy_dtype(ty.elem);
    if npy.descr != want || npy.shape != ty.shape {
        return Err(at(format!(
            "argument {index} expects {} {:?} ({ty}), found {} {:?}",
            numpy_name(want),
            ty.shape,
            numpy_name(&npy.descr),
            npy.shape
        )));
    }
    if npy.fortran_order {
        return Err(at(
            "Fortran-order arrays are not supported; save with np.ascontiguousarray".into(),
        ));
    }
    let n = npy.num_elements();
    // The reasons after the colon are those the CLI printed when npyz read
    // its .npy files (std's read_exact, npyz's bool check).
    let malformed = |why: String| at(format!("truncated or malformed data: {why}"));
    let body = npy
        .data
        .get(..n * width(want))
        .ok_or_else(|| malformed("failed to fill whole buffer".into()))?;
    let ushape: Vec<usize> = ty.shape.iter().map(|&d| d as usize).collect();
    fn words<const W: usize>(body: &[u8]) -> impl Iterator<Item = [u8; W]> + '_ {
        body.chunks_exact(W).map(|w| w.try_into().unwrap())
    }
    let int = |data: Vec<i64>| Value::Int(Tensor::new(ushape.clone(), data), ty.elem);
    // Floats enter through `S::from_f64` (exact for every f32/f64 value) and
    // are rounded to the parameter's type: bf16/f16 once on entry, as a device
    // would store them; f64 stays f64 for a scalar that keeps it.
    let float = |data: Vec<f64>| -> Result<Value<S>, EngineError> {
        let vals = data
            .into_iter()
            .map(|x| S::from_f64(x).map(|v| v.round_to(ty.elem)))
            .collect::<Result<Vec<S>, _>>()
            .map_err(|e| {
                at(format!(
                    "{} cannot hold an argument value: {e}",
                    S::type_name()
                ))
            })?;
        Ok(Value::Float(Tensor::new(ushape.clone(), vals), ty.elem))
    };
    let value = match want {
        "<f4" => float(
            words(body)
                .map(|w| f64::from(f32::from_le_bytes(w)))
                .collect(),
        )?,
        "<f8" => float(words(body).map(f64::from_le_bytes).collect())?,
        "|b1" => {
            if let Some(b) = body.iter().find(|&&b| b > 1) {
                return Err(malformed(format!("invalid value for bool: {b}")));
            }
            int(body.iter().map(|&b| i64::from(b)).collect())
        }
        "|i1" => int(body.iter().map(|&b| i64::from(b as i8)).collect()),
        "|u1" => int(body.iter().map(|&b| i64::from(b)).collect()),
        "<i2" => int(words(body)
            .map(|w| i64::from(i16::from_le_bytes(w)))
            .collect()),
        "<u2" => int(words(body)
            .map(|w| i64::from(u16::from_le_bytes(w)))
            .collect()),
        "<i4" => int(words(body)
            .map(|w| i64::from(i32::from_le_bytes(w)))
            .collect()),
        "<u4" => int(words(body)
            .map(|w| i64::from(u32::from_le_bytes(w)))
            .collect()),
        "<i8" => int(words(body).map(i64::from_le_bytes).collect()),
        _ => int(words(body).map(|w| u64::from_le_bytes(w) as i64).collect()),
    };
    Ok(value)
}

/// The .npy bytes of an evaluator value (C order), in the dtype
/// [`npy_dtype`] gives for its element type: floats as float32 (float64 for
/// f64), integers cast to their type's width.
pub fn value_to_bytes<S: Scalar>(value: &Value<S>) -> Vec<u8> {
    let (shape, elem) = match value {
        Value::Float(t, e) => (&t.shape, *e),
        Value::Int(t, e) => (&t.shape, *e),
    };
    let dtype = npy_dtype(elem);
    let (descr, body): (&str, Vec<u8>) = match value {
        Value::Float(t, _) if dtype == "<f8" => (
            "<f8",
            t.data
                .iter()
                .flat_map(|x| x.to_f64().to_le_bytes())
                .collect(),
        ),
        Value::Float(t, _) => (
            "<f4",
            t.data
                .iter()
                .flat_map(|x| (x.to_f64() as f32).to_le_bytes())
                .collect(),
        ),
        Value::Int(t, _) => {
            let d = &t.data;
            match dtype {
                "|b1" => ("|b1", d.iter().map(|&x| u8::from(x != 0)).collect()),
                "|i1" => ("|i1", d.iter().map(|&x| x as i8 as u8).collect()),
                "|u1" => ("|u1", d.iter().map(|&x| x as u8).collect()),
                "<i2" => (
                    "<i2",
                    d.iter().flat_map(|&x| (x as i16).to_le_bytes()).collect(),
                ),
                "<u2" => (
                    "<u2",
                    d.iter().flat_map(|&x| (x as u16).to_le_bytes()).collect(),
                ),
                "<i4" => (
                    "<i4",
                    d.iter().flat_map(|&x| (x as i32).to_le_bytes()).collect(),
                ),
                "<u4" => (
                    "<u4",
                    d.iter().flat_map(|&x| (x as u32).to_le_bytes()).collect(),
                ),
                "<u8" => (
                    "<u8",
                    d.iter().flat_map(|&x| (x as u64).to_le_bytes()).collect(),
                ),
                _ => ("<i8", d.iter().flat_map(|x| x.to_le_bytes()).collect()),
            }
        }
    };
    let mut out = header_bytes(descr, shape);
    out.extend_from_slice(&body);
    out
}

/// Writes one evaluator output to `path` as .npy ([`value_to_bytes`]).
pub fn write_value<S: Scalar>(path: &Path, value: &Value<S>) -> Result<(), EngineError> {
    let mut f = std::fs::File::create(path)
        .map_err(|e| EngineError(format!("creating {}: {e}", path.display())))?;
    f.write_all(&value_to_bytes(value))
        .map_err(|e| EngineError(format!("writing {}: {e}", path.display())))
}
#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_each_element_type_and_rank() {
        for t in [
            HostTensor {
                shape: vec![2, 3],
                data: HostData::F32(vec![1.5, -2.0, 0.0, f32::MIN_POSITIVE, 3.25, -0.0]),
            },
            HostTensor {
                shape: vec![],
                data: HostData::F32(vec![7.0]),
            },
            HostTensor {
                shape: vec![4],
                data: HostData::I32(vec![1, -2, i32::MAX, i32::MIN]),
            },
            HostTensor {
                shape: vec![1, 2, 1],
                data: HostData::I64(vec![i64::MIN, 5]),
            },
        ] {
            let bytes = to_bytes(&t);
            let header_end = bytes.iter().position(|&b| b == b'\n').unwrap() + 1;
            assert_eq!(header_end % 64, 0, "data is 64-byte aligned");
            assert_eq!(from_bytes(&bytes).unwrap(), t);
        }
    }

    /// A file as numpy 1.x writes it (`np.save` of `np.arange(6, dtype='<f4')
    /// .reshape(2, 3)`), spelled out byte by byte.
    #[test]
    fn reads_a_numpy_written_file() {
        let header = "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }";
        let mut bytes = b"\x93NUMPY\x01\x00".to_vec();
        let padded = format!("{header:<117}\n");
        bytes.extend_from_slice(&(padded.len() as u16).to_le_bytes());
        bytes.extend_from_slice(padded.as_bytes());
        for i in 0..6 {
            bytes.extend_from_slice(&(i as f32).to_le_bytes());
        }
        let t = from_bytes(&bytes).unwrap();
        assert_eq!(t.shape, vec![2, 3]);
        assert_eq!(t.data, HostData::F32(vec![0.0, 1.0, 2.0, 3.0, 4.0, 5.0]));
    }

    fn replaced(bytes: &[u8], from: &[u8], to: &[u8]) -> Vec<u8> {
        let at = bytes.windows(from.len()).position(|w| w == from).unwrap();
        [&bytes[..at], to, &bytes[at + from.len()..]].concat()
    }

    #[test]
    fn refuses_other_dtypes_fortran_order_and_short_data() {
        let mut t = to_bytes(&HostTensor {
            shape: vec![2],
            data: HostData::F32(vec![1.0, 2.0]),
        });
        let e = from_bytes(&replaced(&t, b"<f4", b"<f8")).unwrap_err();
        assert!(e.0.contains("dtype <f8"), "{}", e.0);
        let fortran = replaced(&t, b"False", b"True ");
        assert!(from_bytes(&fortran).unwrap_err().0.contains("Fortran"));
        t.pop();
        assert!(from_bytes(&t).unwrap_err().0.contains("needs 8 data bytes"));
        assert!(from_bytes(b"PK\x03\x04").is_err());
    }

    fn temp(tag: &str) -> std::path::PathBuf {
        std::env::temp_dir().join(format!("certgrad-npy-{}-{tag}.npy", std::process::id()))
    }

    fn ty(shape: &[i64], elem: ElemType) -> TensorType {
        TensorType::new(shape.to_vec(), elem)
    }

    /// Every element type `certgrad run` writes reads back as the same value
    /// (bf16 and f16 travel as float32 and are rounded on entry).
    #[test]
    fn values_of_every_element_type_round_trip() {
        let float = |e: ElemType, d: Vec<f32>| Value::Float(Tensor::new(vec![2, 2], d), e);
        let int = |e: ElemType, d: Vec<i64>| Value::Int(Tensor::new(vec![2, 2], d), e);
        let cases = [
            float(ElemType::F32, vec![1.5, -2.0, 0.0, f32::MIN_POSITIVE]),
            float(ElemType::F64, vec![1.5, -2.0, 0.0, 3.25]),
            float(ElemType::BF16, vec![1.0, -2.0, 0.5, 4.0]),
            float(ElemType::F16, vec![1.0, -2.0, 0.5, 4.0]),
            int(ElemType::I1, vec![0, 1, 1, 0]),
            int(ElemType::I8, vec![-128, 127, 0, -1]),
            int(ElemType::UI8, vec![0, 255, 7, 1]),
            int(ElemType::I32, vec![i32::MIN as i64, i32::MAX as i64, 0, -5]),
            int(ElemType::UI32, vec![0, u32::MAX as i64, 9, 1]),
            int(ElemType::I64, vec![i64::MIN, i64::MAX, 0, -5]),
            int(ElemType::UI64, vec![0, 1 << 40, 9, 1]),
        ];
        for (k, v) in cases.iter().enumerate() {
            let elem = match v {
                Value::Float(_, e) | Value::Int(_, e) => *e,
            };
            let bytes = value_to_bytes(v);
            let header_end = bytes.iter().position(|&b| b == b'\n').unwrap() + 1;
            assert_eq!(header_end % 64, 0, "data is 64-byte aligned");
            assert_eq!(parse(&bytes).unwrap().descr, npy_dtype(elem));
            let p = temp(&format!("rt{k}"));
            write_value(&p, v).unwrap();
            let back = read_argument(&p, 0, &ty(&[2, 2], elem)).unwrap();
            std::fs::remove_file(&p).ok();
            assert_eq!(&back, v, "{elem:?}");
        }
    }

    /// The header a written value carries, byte for byte.
    #[test]
    fn a_written_value_has_numpys_header() {
        let v: Value<f32> = Value::Int(Tensor::new(vec![3], vec![1, 0, 1]), ElemType::I1);
        let bytes = value_to_bytes(&v);
        let header = "{'descr': '|b1', 'fortran_order': False, 'shape': (3,), }";
        let mut want = b"\x93NUMPY\x01\x00\x76\x00".to_vec();
        want.extend_from_slice(format!("{header:<117}\n").as_bytes());
        want.extend_from_slice(&[1, 0, 1]);
        assert_eq!(bytes, want);
    }

    fn read_back(bytes: &[u8], tag: &str, t: &TensorType) -> Result<Value<f32>, EngineError> {
        let p = temp(tag);
        std::fs::write(&p, bytes).unwrap();
        let r = read_argument(&p, 1, t);
        std::fs::remove_file(&p).ok();
        r.map_err(|e| EngineError(e.0.replace(&p.display().to_string(), "FILE")))
    }

    #[test]
    fn arguments_of_another_dtype_shape_or_order_are_refused_by_name() {
        let f32x2 = ty(&[2], ElemType::F32);
        let good = to_bytes(&HostTensor::f32(vec![2], vec![1.0, 2.0]));
        assert!(read_back(&good, "ok", &f32x2).is_ok());
        let e = read_back(&good, "dtype", &ty(&[2], ElemType::F64)).unwrap_err();
        assert_eq!(
            e.0,
            "FILE: argument 1 expects float64 [2] (tensor<2xf64>), found float32 [2]"
        );
        let e = read_back(&good, "shape", &ty(&[1, 2], ElemType::F32)).unwrap_err();
        assert_eq!(
            e.0,
            "FILE: argument 1 expects float32 [1, 2] (tensor<1x2xf32>), found float32 [2]"
        );
        let fortran = replaced(&good, b"False", b"True ");
        let e = read_back(&fortran, "fortran", &f32x2).unwrap_err();
        assert_eq!(
            e.0,
            "FILE: Fortran-order arrays are not supported; save with np.ascontiguousarray"
        );
        let e = read_back(&good[..good.len() - 1], "short", &f32x2).unwrap_err();
        assert_eq!(
            e.0,
            "FILE: truncated or malformed data: failed to fill whole buffer"
        );
        let mut long = good.clone();
        long.extend_from_slice(b"trailing");
        assert!(
            read_back(&long, "long", &f32x2).is_ok(),
            "trailing data is ignored"
        );
        let e = read_back(b"PK\x03\x04", "zip", &f32x2).unwrap_err();
        assert!(e.0.starts_with("FILE: not a valid .npy file: "), "{}", e.0);
        let structured = replaced(&good, b"'<f4'", b"[('a', '<f4')]");
        let e = read_back(&structured, "rec", &f32x2).unwrap_err();
        assert_eq!(
            e.0,
            "FILE: structured dtype [('a', '<f4')] is not supported"
        );
        let b1 = ty(&[3], ElemType::I1);
        let bools = value_to_bytes(&Value::<f32>::Int(
            Tensor::new(vec![3], vec![1, 0, 1]),
            ElemType::I1,
        ));
        assert!(read_back(&bools, "bool", &b1).is_ok());
        let mut two = bools.clone();
        *two.last_mut().unwrap() = 2;
        let e = read_back(&two, "bool2", &b1).unwrap_err();
        assert_eq!(
            e.0, "FILE: truncated or malformed data: invalid value for bool: 2",
            "a bool byte of 2"
        );
        let e = read_argument::<f32>(Path::new("/nonexistent/x.npy"), 0, &f32x2).unwrap_err();
        assert!(e.0.starts_with("reading /nonexistent/x.npy: "), "{}", e.0);
    }
}
