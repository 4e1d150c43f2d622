//! Indexed data movement: gather, scatter, dynamic_slice and
//! dynamic_update_slice, following the StableHLO specification's index maps.
//!
//! The float operands only move (scatter also combines them through its
//! update computation), so every `Scalar` flows through unchanged: a dual
//! number's tangent moves with its primal. Indices are integers and carry no
//! tangent. Out-of-range starts are clamped where the spec clamps them
//! (gather, dynamic_slice, dynamic_update_slice); a scatter update window
//! that does not fit in the result is skipped whole, the behaviour of XLA
//! (the spec leaves it implementation-defined), so `x.at[i].add(u)` with an
//! out-of-bounds `i` leaves `x` unchanged as JAX documents.

use super::Fail;
use crate::scalar::Scalar;
use crate::tensor::{row_major_strides, Tensor};
use crate::value::Value;
use ir::{GatherAttrs, ScatterAttrs, TensorType};

/// Element `i` of `v` as a rank-0 value.
pub(crate) fn scalar_at<S: Scalar>(v: &Value<S>, i: usize) -> Value<S> {
    match v {
        Value::Float(t, e) => Value::Float(Tensor::new(vec![], vec![t.data[i].clone()]), *e),
        Value::Int(t, e) => Value::Int(Tensor::new(vec![], vec![t.data[i]]), *e),
    }
}

/// Store the rank-0 `s` as element `i` of `v` (same element type).
pub(crate) fn set_at<S: Scalar>(v: &mut Value<S>, i: usize, s: &Value<S>) -> Result<(), Fail> {
    match (v, s) {
        (Value::Float(t, e), Value::Float(u, f)) if e == f && u.len() == 1 => {
            t.data[i] = u.data[0].clone()
        }
        (Value::Int(t, e), Value::Int(u, f)) if e == f && u.len() == 1 => t.data[i] = u.data[0],
        _ => {
            return Err(Fail::msg(
                "region returned a value of the wrong type or shape",
            ))
        }
    }
    Ok(())
}

/// The value whose element `k` is element `offs[k]` of `x`.
fn pick<S: Scalar>(x: &Value<S>, shape: Vec<usize>, offs: &[usize]) -> Value<S> {
    fn go<T: Clone>(t: &Tensor<T>, shape: Vec<usize>, offs: &[usize]) -> Tensor<T> {
        Tensor::new(shape, offs.iter().map(|&o| t.data[o].clone()).collect())
    }
    match x {
        Value::Float(t, e) => Value::Float(go(t, shape, offs), *e),
        Value::Int(t, e) => Value::Int(go(t, shape, offs), *e),
    }
}

fn indices<S: Scalar>(v: &Value<S>, what: &str) -> Result<Tensor<i64>, Fail> {
    v.as_int()
        .cloned()
        .ok_or_else(|| Fail::msg(format!("{what} must be integers")))
}

/// Row-major odometer over `shape`: calls `f` with every multi-index in order.
fn for_each_index(
    shape: &[usize],
    mut f: impl FnMut(&[usize]) -> Result<(), Fail>,
) -> Result<(), Fail> {
    if shape.contains(&0) {
        return Ok(());
    }
    let mut idx = vec![0usize; shape.len()];
    loop {
        f(&idx)?;
        let mut d = shape.len();
        loop {
            if d == 0 {
                return Ok(());
            }
            d -= 1;
            idx[d] += 1;
            if idx[d] < shape[d] {
                break;
            }
            idx[d] = 0;
        }
    }
}

fn linear(idx: &[i64], strides: &[usize]) -> usize {
    idx.iter().zip(strides).map(|(&i, &s)| i as usize * s).sum()
}

fn udims(v: &[i64]) -> Vec<usize> {
    v.iter().map(|&d| d.max(0) as usize).collect()
}

/// The start index vector of one batch position of an index tensor: the
/// elements along `index_vector_dim` (or the single element when it equals
/// the rank).
fn start_vector(idx: &Tensor<i64>, ivd: usize, batch_index: &[usize]) -> Vec<i64> {
    let strides = row_major_strides(&idx.shape);
    let r = idx.shape.len();
    let mut full = Vec::with_capacity(r);
    let mut b = batch_index.iter();
    for d in 0..r {
        full.push(if d == ivd { 0 } else { *b.next().unwrap_or(&0) });
    }
    let base: usize = full.iter().zip(&strides).map(|(i, s)| i * s).sum();
    if ivd >= r {
        return vec![idx.data[base]];
    }
    (0..idx.shape[ivd])
        .map(|k| idx.data[base + k * strides[ivd]])
        .collect()
}

/// `batch_index[d_start]` with `index_vector_dim` removed from the numbering.
fn batch_coord(batch_index: &[usize], d_start: usize, ivd: usize) -> i64 {
    let k = if d_start < ivd { d_start } else { d_start - 1 };
    batch_index.get(k).copied().unwrap_or(0) as i64
}

/// `gather`: `result[i] = operand[full_start + full_batching + full_offset]`,
/// each start clamped to `[0, dim − slice_size]`.
pub fn gather<S: Scalar>(
    x: &Value<S>,
    start_indices: &Value<S>,
    a: &GatherAttrs,
    out_ty: &TensorType,
) -> Result<Value<S>, Fail> {
    let idx = indices(start_indices, "gather start indices")?;
    let xs = x.shape().to_vec();
    let r = xs.len();
    if a.slice_sizes.len() != r {
        return Err(Fail::msg(
            "gather slice_sizes length differs from operand rank",
        ));
    }
    let out_shape = super::shape::dims_usize(out_ty);
    let ivd = a.index_vector_dim.max(0) as usize;
    let offset_dims = udims(&a.offset_dims);
    let batch_dims: Vec<usize> = (0..out_shape.len())
        .filter(|d| !offset_dims.contains(d))
        .collect();
    let collapsed = udims(&a.collapsed_slice_dims);
    let obd = udims(&a.operand_batching_dims);
    let sibd = udims(&a.start_indices_batching_dims);
    let sim = udims(&a.start_index_map);
    let window_dims: Vec<usize> = (0..r)
        .filter(|d| !collapsed.contains(d) && !obd.contains(d))
        .collect();
    let xstr = row_major_strides(&xs);
    let mut offs = Vec::with_capacity(out_shape.iter().product());
    let mut batch_index = Vec::with_capacity(batch_dims.len());
    let mut operand_index = vec![0i64; r];
    for_each_index(&out_shape, |ri| {
        batch_index.clear();
        batch_index.extend(batch_dims.iter().map(|&d| ri[d]));
        operand_index.iter_mut().for_each(|v| *v = 0);
        let start = start_vector(&idx, ivd, &batch_index);
        for (k, &d) in sim.iter().enumerate() {
            let hi = xs[d] as i64 - a.slice_sizes[d];
            operand_index[d] += start.get(k).copied().unwrap_or(0).clamp(0, hi.max(0));
        }
        for (&od, &sd) in obd.iter().zip(&sibd) {
            operand_index[od] += batch_coord(&batch_index, sd, ivd);
        }
        for (&wd, &od) in window_dims.iter().zip(&offset_dims) {
            operand_index[wd] += ri[od] as i64;
        }
        if operand_index
            .iter()
            .zip(&xs)
            .any(|(&i, &n)| i < 0 || i >= n as i64)
        {
            return Err(Fail::msg(format!(
                "gather reads operand index {operand_index:?} outside shape {xs:?}"
            )));
        }
        offs.push(linear(&operand_index, &xstr));
        Ok(())
    })?;
    Ok(pick(x, out_shape, &offs))
}

/// The update computation of a scatter on rank-0 values: `(results…, updates…)`
/// → the new results.
pub type Combine<'a, S> = dyn FnMut(Vec<Value<S>>) -> Result<Vec<Value<S>>, Fail> + 'a;

/// `scatter`: for every update element in row-major order, the results at
/// `full_start + full_batching + full_window` become `combine(results…,
/// updates…)` there, so duplicate indices accumulate in order. A window that
/// does not fit is skipped (see the module docs).
pub fn scatter<S: Scalar>(
    inputs: &[&Value<S>],
    scatter_indices: &Value<S>,
    updates: &[&Value<S>],
    a: &ScatterAttrs,
    combine: &mut Combine<'_, S>,
) -> Result<Vec<Value<S>>, Fail> {
    let idx = indices(scatter_indices, "scatter indices")?;
    let mut results: Vec<Value<S>> = inputs.iter().map(|v| (*v).clone()).collect();
    let (Some(x0), Some(u0)) = (inputs.first(), updates.first()) else {
        return Err(Fail::msg("scatter needs inputs and updates"));
    };
    let xs = x0.shape().to_vec();
    let us = u0.shape().to_vec();
    let r = xs.len();
    let ivd = a.index_vector_dim.max(0) as usize;
    let uwd = udims(&a.update_window_dims);
    let usd: Vec<usize> = (0..us.len()).filter(|d| !uwd.contains(d)).collect();
    let inserted = udims(&a.inserted_window_dims);
    let ibd = udims(&a.input_batching_dims);
    let sibd = udims(&a.scatter_indices_batching_dims);
    let sdod = udims(&a.scatter_dims_to_operand_dims);
    let window_dims: Vec<usize> = (0..r)
        .filter(|d| !inserted.contains(d) && !ibd.contains(d))
        .collect();
    // The extent of one update window in each result dimension.
    let mut extent = vec![1i64; r];
    for (&wd, &ud) in window_dims.iter().zip(&uwd) {
        extent[wd] = us[ud] as i64;
    }
    let xstr = row_major_strides(&xs);
    let ustr = row_major_strides(&us);
    let mut scatter_index = Vec::with_capacity(usd.len());
    let mut base = vec![0i64; r];
    let mut at = vec![0i64; r];
    for_each_index(&us, |ui| {
        scatter_index.clear();
        scatter_index.extend(usd.iter().map(|&d| ui[d]));
        base.iter_mut().for_each(|v| *v = 0);
        let start = start_vector(&idx, ivd, &scatter_index);
        for (k, &d) in sdod.iter().enumerate() {
            base[d] += start.get(k).copied().unwrap_or(0);
        }
        for (&id, &sd) in ibd.iter().zip(&sibd) {
            base[id] += batch_coord(&scatter_index, sd, ivd);
        }
        let fits = (0..r).all(|d| base[d] >= 0 && base[d] + extent[d] <= xs[d] as i64);
        if !fits {
            return Ok(());
        }
        at.copy_from_slice(&base);
        for (&wd, &ud) in window_dims.iter().zip(&uwd) {
            at[wd] += ui[ud] as i64;
        }
        let ro = linear(&at, &xstr);
        let uo: usize = ui.iter().zip(&ustr).map(|(i, s)| i * s).sum();
        let mut args: Vec<Value<S>> = results.iter().map(|v| scalar_at(v, ro)).collect();
        args.extend(updates.iter().map(|u| scalar_at(u, uo)));
        let new = combine(args)?;
        if new.len() != results.len() {
            return Err(Fail::msg(format!(
                "update computation returned {} values for {} inputs",
                new.len(),
                results.len()
            )));
        }
        for (res, v) in results.iter_mut().zip(&new) {
            set_at(res, ro, v)?;
        }
        Ok(())
    })?;
    Ok(results)
}

/// The start indices of dynamic_slice / dynamic_update_slice, each clamped to
/// `[0, dim − size]`.
fn clamped_starts<S: Scalar>(
    starts: &[&Value<S>],
    dims: &[usize],
    sizes: &[usize],
) -> Result<Vec<i64>, Fail> {
    if starts.len() != dims.len() || sizes.len() != dims.len() {
        return Err(Fail::msg(format!(
            "{} start indices for an operand of rank {}",
            starts.len(),
            dims.len()
        )));
    }
    starts
        .iter()
        .zip(dims.iter().zip(sizes))
        .map(|(s, (&n, &k))| {
            let t = indices(s, "start indices")?;
            let v = *t
                .data
                .first()
                .ok_or_else(|| Fail::msg("empty start index"))?;
            Ok(v.clamp(0, (n as i64 - k as i64).max(0)))
        })
        .collect()
}

/// `dynamic_slice`: the `sizes` block starting at the clamped start indices.
pub fn dynamic_slice<S: Scalar>(
    x: &Value<S>,
    starts: &[&Value<S>],
    sizes: &[i64],
) -> Result<Value<S>, Fail> {
    let xs = x.shape().to_vec();
    let sizes = udims(sizes);
    if sizes.iter().zip(&xs).any(|(k, n)| k > n) {
        return Err(Fail::msg("dynamic_slice sizes exceed the operand"));
    }
    let start = clamped_starts(starts, &xs, &sizes)?;
    let xstr = row_major_strides(&xs);
    let mut offs = Vec::with_capacity(sizes.iter().product());
    let mut at = vec![0i64; xs.len()];
    for_each_index(&sizes, |i| {
        for d in 0..xs.len() {
            at[d] = start[d] + i[d] as i64;
        }
        offs.push(linear(&at, &xstr));
        Ok(())
    })?;
    Ok(pick(x, sizes, &offs))
}

/// `dynamic_update_slice`: the operand with `update` written at the clamped
/// start indices.
pub fn dynamic_update_slice<S: Scalar>(
    x: &Value<S>,
    update: &Value<S>,
    starts: &[&Value<S>],
) -> Result<Value<S>, Fail> {
    let xs = x.shape().to_vec();
    let us = update.shape().to_vec();
    if us.len() != xs.len() || us.iter().zip(&xs).any(|(k, n)| k > n) {
        return Err(Fail::msg(
            "dynamic_update_slice update does not fit the operand",
        ));
    }
    if x.elem() != update.elem() {
        return Err(Fail::msg(
            "dynamic_update_slice update has another element type",
        ));
    }
    let start = clamped_starts(starts, &xs, &us)?;
    let xstr = row_major_strides(&xs);
    let mut offs = Vec::with_capacity(us.iter().product());
    let mut at = vec![0i64; xs.len()];
    for_each_index(&us, |i| {
        for d in 0..xs.len() {
            at[d] = start[d] + i[d] as i64;
        }
        offs.push(linear(&at, &xstr));
        Ok(())
    })?;
    fn put<T: Clone>(dst: &mut Tensor<T>, src: &Tensor<T>, offs: &[usize]) {
        for (&o, v) in offs.iter().zip(&src.data) {
            dst.data[o] = v.clone();
        }
    }
    let mut out = x.clone();
    match (&mut out, update) {
        (Value::Float(t, _), Value::Float(u, _)) => put(t, u, &offs),
        (Value::Int(t, _), Value::Int(u, _)) => put(t, u, &offs),
        _ => {
            return Err(Fail::msg(
                "dynamic_update_slice update has another element type",
            ))
        }
    }
    Ok(out)
}
