//! The .npy files the IREE engine exchanges with `iree-run-module`: C-order
//! float32, int32 and int64 arrays (the element types a [`HostTensor`]
//! carries), written as format 1.0 and read from format 1.0, 2.0 or 3.0
//! headers. Anything else is refused with the file and the reason.

use crate::error::EngineError;
use crate::host::{HostData, HostTensor};
use std::path::Path;

const MAGIC: &[u8] = b"\x93NUMPY";

fn descr(data: &HostData) -> &'static str {
    match data {
        HostData::F32(_) => "<f4",
        HostData::I32(_) => "<i4",
        HostData::I64(_) => "<i8",
    }
}

/// The bytes of `t` as a format-1.0 .npy file.
pub fn to_bytes(t: &HostTensor) -> Vec<u8> {
    let shape = match t.shape.len() {
        0 => "()".to_string(),
        1 => format!("({},)", t.shape[0]),
        _ => format!(
            "({})",
            t.shape
                .iter()
                .map(|d| d.to_string())
                .collect::<Vec<_>>()
                .join(", ")
        ),
    };
    let mut header = format!(
        "{{'descr': '{}', 'fortran_order': False, 'shape': {shape}, }}",
        descr(&t.data)
    );
    // numpy pads the header so the data starts on a 64-byte boundary.
    let unpadded = MAGIC.len() + 2 + 2 + header.len() + 1;
    header.push_str(&" ".repeat((64 - unpadded % 64) % 64));
    header.push('\n');
    let mut out = Vec::with_capacity(MAGIC.len() + 4 + header.len() + 8 * t.data.len());
    out.extend_from_slice(MAGIC);
    out.extend_from_slice(&[1, 0]);
    out.extend_from_slice(&(header.len() as u16).to_le_bytes());
    out.extend_from_slice(header.as_bytes());
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

/// Parses one .npy array from `bytes` (trailing bytes are an error: IREE's
/// `+file.npy` appends several arrays to one file, and certgrad never asks it to).
pub fn from_bytes(bytes: &[u8]) -> Result<HostTensor, EngineError> {
    let bad = |m: &str| EngineError(format!("not a usable .npy file: {m}"));
    if bytes.len() < 10 || &bytes[..6] != MAGIC {
        return Err(bad("no \\x93NUMPY magic"));
    }
    let (header_len, start) = match bytes[6] {
        1 => (u16::from_le_bytes([bytes[8], bytes[9]]) as usize, 10),
        2 | 3 if bytes.len() >= 12 => (
            u32::from_le_bytes([bytes[8], bytes[9], bytes[10], bytes[11]]) as usize,
            12,
        ),
        v => return Err(bad(&format!("format version {v}.{}", bytes[7]))),
    };
    let header = bytes
        .get(start..start + header_len)
        .ok_or_else(|| bad("the header is truncated"))?;
    let header = std::str::from_utf8(header).map_err(|_| bad("the header is not text"))?;
    let descr = dict_value(header, "descr")
        .and_then(|v| v.strip_prefix('\'').or_else(|| v.strip_prefix('"')))
        .and_then(|v| v.split(['\'', '"']).next())
        .ok_or_else(|| bad("no 'descr' in the header"))?;
    let fortran = dict_value(header, "fortran_order").ok_or_else(|| bad("no 'fortran_order'"))?;
    if fortran.starts_with("True") {
        return Err(bad("Fortran-order arrays are not supported"));
    }
    let shape_text = dict_value(header, "shape")
        .and_then(|v| v.strip_prefix('('))
        .and_then(|v| v.split(')').next())
        .ok_or_else(|| bad("no 'shape' in the header"))?;
    let shape = shape_text
        .split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(|s| s.parse::<i64>())
        .collect::<Result<Vec<_>, _>>()
        .map_err(|_| bad(&format!("shape ({shape_text})")))?;
    let n: usize = shape.iter().map(|&d| d as usize).product();
    let body = &bytes[start + header_len..];
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
}
