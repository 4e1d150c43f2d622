//! Data-movement ops: constant, iota, reshape, transpose, broadcast_in_dim,
//! reverse, slice, pad, concatenate. None of them computes with the scalar, so
//! each is written once over the element storage (`Tensor<T>` for any `T`).

use super::index::strides_at;
use super::{par, Fail};
use crate::scalar::Scalar;
use crate::tensor::Tensor;
use crate::value::Value;
use ir::{DenseData, TensorType};

pub fn dims_usize(ty: &TensorType) -> Vec<usize> {
    ty.shape.iter().map(|&d| d as usize).collect()
}

/// The value of shape `shape` read from `x` at `base + Σ i_d·strides[d]`
/// (`par::strided`: the gather at `strided_offsets`, without the table).
fn gather_strided<S: Scalar>(
    x: &Value<S>,
    shape: Vec<usize>,
    strides: &[isize],
    base: isize,
) -> Value<S> {
    match x {
        Value::Float(t, e) => {
            let data = par::strided(&t.data, &shape, strides, base);
            Value::Float(Tensor::new(shape, data), *e)
        }
        Value::Int(t, e) => {
            let data = par::strided(&t.data, &shape, strides, base);
            Value::Int(Tensor::new(shape, data), *e)
        }
    }
}

/// `constant`: the payload in row-major order, a single value splatted; the
/// element type comes from the result type.
pub fn constant<S: Scalar>(data: &DenseData, ty: &TensorType) -> Result<Value<S>, Fail> {
    let shape = dims_usize(ty);
    let n: usize = shape.iter().product();
    if data.len() != n && data.len() != 1 {
        return Err(Fail::msg(format!(
            "constant has {} values for {n} elements",
            data.len()
        )));
    }
    let at = |i: usize| if data.len() == 1 { 0 } else { i };
    Ok(if ty.elem.is_float() {
        let vals: Vec<S> = match data {
            DenseData::Float(v) => v
                .iter()
                .map(|&x| S::from_f64(x).map(|s| s.round_to(ty.elem)))
                .collect::<Result<_, _>>()?,
            DenseData::Int(v) => v
                .iter()
                .map(|&x| S::from_i64(x).round_to(ty.elem))
                .collect(),
        };
        Value::Float(
            Tensor::new(shape, par::collect_ok(n, |i| vals[at(i)].clone())),
            ty.elem,
        )
    } else {
        let vals: Vec<i64> = match data {
            DenseData::Int(v) => v.clone(),
            DenseData::Float(v) => v.iter().map(|&x| x as i64).collect(),
        };
        let vals: Vec<i64> = vals
            .iter()
            .map(|&v| super::elementwise::wrap_int(v, ty.elem))
            .collect();
        Value::Int(
            Tensor::new(shape, (0..n).map(|i| vals[at(i)]).collect()),
            ty.elem,
        )
    })
}

/// `iota`: element = its index along `dim`.
pub fn iota<S: Scalar>(dim: usize, ty: &TensorType) -> Result<Value<S>, Fail> {
    let shape = dims_usize(ty);
    if dim >= shape.len() {
        return Err(Fail::msg(format!("iota dimension {dim} out of range")));
    }
    let inner: usize = shape[dim + 1..].iter().product();
    let n: usize = shape.iter().product();
    let len = shape[dim];
    let idx = (0..n).map(|i| ((i / inner) % len) as i64);
    Ok(if ty.elem.is_float() {
        Value::Float(
            Tensor::new(
                shape,
                idx.map(|v| S::from_i64(v).round_to(ty.elem)).collect(),
            ),
            ty.elem,
        )
    } else {
        Value::Int(
            Tensor::new(
                shape,
                idx.map(|v| super::elementwise::wrap_int(v, ty.elem))
                    .collect(),
            ),
            ty.elem,
        )
    })
}

/// `reshape`: same elements in row-major order, new shape.
pub fn reshape<S: Scalar>(x: &Value<S>, ty: &TensorType) -> Result<Value<S>, Fail> {
    reshape_owned(x.clone(), ty)
}

/// [`reshape`] of an operand that dies at this op: its data is moved, not copied.
pub fn reshape_owned<S: Scalar>(x: Value<S>, ty: &TensorType) -> Result<Value<S>, Fail> {
    let shape = dims_usize(ty);
    if shape.iter().product::<usize>() != x.len() {
        return Err(Fail::msg(format!(
            "cannot reshape {:?} to {:?}",
            x.shape(),
            shape
        )));
    }
    Ok(match x {
        Value::Float(t, e) => Value::Float(Tensor::new(shape, t.data), e),
        Value::Int(t, e) => Value::Int(Tensor::new(shape, t.data), e),
    })
}

/// `transpose`: result dimension k is operand dimension `perm[k]`.
pub fn transpose<S: Scalar>(x: &Value<S>, perm: &[usize]) -> Result<Value<S>, Fail> {
    let shape = x.shape();
    if perm.len() != shape.len() || perm.iter().any(|&p| p >= shape.len()) {
        return Err(Fail::msg(format!("bad permutation {perm:?}")));
    }
    let out: Vec<usize> = perm.iter().map(|&p| shape[p]).collect();
    let strides = strides_at(shape, perm);
    Ok(gather_strided(x, out, &strides, 0))
}

/// `broadcast_in_dim`: operand dimension j maps to result dimension `dims[j]`;
/// a size-1 operand dimension is repeated.
pub fn broadcast_in_dim<S: Scalar>(
    x: &Value<S>,
    dims: &[usize],
    ty: &TensorType,
) -> Result<Value<S>, Fail> {
    let (out, strides) = broadcast_strides(x.shape(), dims, ty)?;
    Ok(gather_strided(x, out, &strides, 0))
}

/// `broadcast_in_dim`'s result shape and, per result dimension, the stride
/// at which it reads its operand (0 along the dimensions it repeats).
pub(crate) fn broadcast_strides(
    shape: &[usize],
    dims: &[usize],
    ty: &TensorType,
) -> Result<(Vec<usize>, Vec<isize>), Fail> {
    let out = dims_usize(ty);
    if dims.len() != shape.len() {
        return Err(Fail::msg(
            "broadcast_dimensions length differs from operand rank",
        ));
    }
    let src = crate::tensor::row_major_strides(shape);
    let mut strides = vec![0isize; out.len()];
    for (j, &d) in dims.iter().enumerate() {
        if d >= out.len() || (shape[j] != 1 && shape[j] != out[d]) {
            return Err(Fail::msg(format!(
                "operand dimension {j} (size {}) cannot broadcast to result dimension {d}",
                shape[j]
            )));
        }
        if shape[j] != 1 {
            strides[d] = src[j] as isize;
        }
    }
    Ok((out, strides))
}

/// `reverse` along `dims`.
pub fn reverse<S: Scalar>(x: &Value<S>, dims: &[usize]) -> Result<Value<S>, Fail> {
    let shape = x.shape().to_vec();
    let src = crate::tensor::row_major_strides(&shape);
    let mut strides: Vec<isize> = src.iter().map(|&s| s as isize).collect();
    let mut base = 0isize;
    for &d in dims {
        if d >= shape.len() {
            return Err(Fail::msg(format!("reverse dimension {d} out of range")));
        }
        if shape[d] > 0 {
            base += (shape[d] as isize - 1) * strides[d];
        }
        strides[d] = -strides[d];
    }
    Ok(gather_strided(x, shape, &strides, base))
}

/// `slice`: elements `start + i·stride` below `limit` per dimension.
pub fn slice<S: Scalar>(
    x: &Value<S>,
    start: &[i64],
    limit: &[i64],
    stride: &[i64],
) -> Result<Value<S>, Fail> {
    let shape = x.shape();
    let rank = shape.len();
    if start.len() != rank || limit.len() != rank || stride.len() != rank {
        return Err(Fail::msg(
            "slice attribute lengths differ from operand rank",
        ));
    }
    let src = crate::tensor::row_major_strides(shape);
    let mut out = Vec::with_capacity(rank);
    let mut strides = Vec::with_capacity(rank);
    let mut base = 0isize;
    for d in 0..rank {
        let (s, l, k) = (start[d], limit[d], stride[d]);
        if s < 0 || l < s || l > shape[d] as i64 || k < 1 {
            return Err(Fail::msg(format!(
                "slice [{s}:{l}:{k}] out of range for dimension {d} of size {}",
                shape[d]
            )));
        }
        out.push(((l - s + k - 1) / k) as usize);
        strides.push((k as usize * src[d]) as isize);
        base += (s as usize * src[d]) as isize;
    }
    Ok(gather_strided(x, out, &strides, base))
}

fn pad_t<T: Clone>(
    t: &Tensor<T>,
    value: &T,
    low: &[i64],
    interior: &[i64],
    out: &[usize],
) -> Tensor<T> {
    let mut r = Tensor::filled(out.to_vec(), value.clone());
    let ostr = crate::tensor::row_major_strides(out);
    let rank = t.shape.len();
    let mut idx = vec![0usize; rank];
    // Each operand element lands at low + i·(interior + 1); negative padding
    // crops, so positions outside the result are dropped.
    'elems: for x in t.data.iter() {
        let mut off = 0usize;
        let mut inside = true;
        for d in 0..rank {
            let p = low[d] + idx[d] as i64 * (interior[d] + 1);
            if p < 0 || p >= out[d] as i64 {
                inside = false;
                break;
            }
            off += p as usize * ostr[d];
        }
        if inside {
            r.data[off] = x.clone();
        }
        for d in (0..rank).rev() {
            idx[d] += 1;
            if idx[d] < t.shape[d] {
                continue 'elems;
            }
            idx[d] = 0;
        }
    }
    r
}

/// `pad(operand, padding_value)` with edge padding `low`/`high` (negative
/// crops) and `interior` padding between elements.
pub fn pad<S: Scalar>(
    x: &Value<S>,
    value: &Value<S>,
    low: &[i64],
    high: &[i64],
    interior: &[i64],
) -> Result<Value<S>, Fail> {
    let shape = x.shape();
    let rank = shape.len();
    if low.len() != rank || high.len() != rank || interior.len() != rank {
        return Err(Fail::msg("pad attribute lengths differ from operand rank"));
    }
    let mut out = Vec::with_capacity(rank);
    for d in 0..rank {
        if interior[d] < 0 {
            return Err(Fail::msg("negative interior padding"));
        }
        let dilated = if shape[d] == 0 {
            0
        } else {
            (shape[d] as i64 - 1) * (interior[d] + 1) + 1
        };
        let n = low[d] + dilated + high[d];
        if n < 0 {
            return Err(Fail::msg(format!(
                "pad gives negative size in dimension {d}"
            )));
        }
        out.push(n as usize);
    }
    match (x, value) {
        (Value::Float(t, e), Value::Float(v, _)) if v.len() == 1 => {
            Ok(Value::Float(pad_t(t, &v.data[0], low, interior, &out), *e))
        }
        (Value::Int(t, e), Value::Int(v, _)) if v.len() == 1 => {
            Ok(Value::Int(pad_t(t, &v.data[0], low, interior, &out), *e))
        }
        _ => Err(Fail::msg(
            "padding value must be a scalar of the operand's type",
        )),
    }
}

fn concat_t<T: Clone>(parts: &[&Tensor<T>], dim: usize) -> Tensor<T> {
    let mut out = parts[0].shape.clone();
    out[dim] = parts.iter().map(|t| t.shape[dim]).sum();
    let outer: usize = out[..dim].iter().product();
    let mut data = Vec::with_capacity(out.iter().product());
    for o in 0..outer {
        for t in parts {
            let block: usize = t.shape[dim..].iter().product();
            data.extend_from_slice(&t.data[o * block..(o + 1) * block]);
        }
    }
    Tensor::new(out, data)
}

/// `concatenate` along `dim`.
pub fn concatenate<S: Scalar>(xs: &[&Value<S>], dim: usize) -> Result<Value<S>, Fail> {
    let first = xs.first().ok_or_else(|| Fail::msg("no operands"))?;
    let rank = first.shape().len();
    if dim >= rank {
        return Err(Fail::msg(format!("dimension {dim} out of range")));
    }
    for x in xs {
        let s = x.shape();
        if s.len() != rank || (0..rank).any(|d| d != dim && s[d] != first.shape()[d]) {
            return Err(Fail::msg(format!(
                "operand shapes {:?} and {:?} differ outside dimension {dim}",
                first.shape(),
                s
            )));
        }
    }
    match first {
        Value::Float(_, e) => {
            let parts = xs
                .iter()
                .map(|x| x.as_float().ok_or_else(|| Fail::msg("operands mix types")))
                .collect::<Result<Vec<_>, _>>()?;
            Ok(Value::Float(concat_t(&parts, dim), *e))
        }
        Value::Int(_, e) => {
            let parts = xs
                .iter()
                .map(|x| x.as_int().ok_or_else(|| Fail::msg("operands mix types")))
                .collect::<Result<Vec<_>, _>>()?;
            Ok(Value::Int(concat_t(&parts, dim), *e))
        }
    }
}
