//! Result-type rules of the structured ops: gather, scatter,
//! dynamic_slice, dynamic_update_slice, while, case, if, sort, map and
//! optimization_barrier, each following its constraints in the StableHLO
//! specification (the ones that decide the result type or that evaluation
//! relies on: every dimension number in range, no dimension used twice).
//!
//! Regions of control-flow ops may return values defined outside them (JAX's
//! `case` branches return captured operands); such a value's type is not known
//! here, so it is taken from the op's stated result type and the verifier,
//! which sees the scope, checks it.

use super::{
    attr_len, check_region, operand_count, region_value_type, same_elem, same_shape,
    unique_in_range, Rule,
};
use crate::module::Block;
use crate::ops::{GatherAttrs, ScatterAttrs};
use crate::types::{ElemType, TensorType};

/// Types of the values `region`'s terminator returns; a value defined outside
/// the region takes `outer[i]` (the op's stated type) when there is one.
pub(super) fn region_returns(
    which: &str,
    region: &Block,
    outer: Option<&[TensorType]>,
) -> Rule<Vec<TensorType>> {
    let ret = match region.ops.last() {
        Some(op) if op.kind == crate::ops::OpKind::Return => op,
        _ => return Err(format!("{which} region must end with stablehlo.return")),
    };
    ret.operands
        .iter()
        .enumerate()
        .map(|(i, &v)| {
            region_value_type(region, v)
                .or_else(|| outer.and_then(|o| o.get(i).cloned()))
                .ok_or_else(|| format!("{which} region returns %{} whose type is not known", v.0))
        })
        .collect()
}

fn sorted_unique(what: &str, dims: &[i64], rank: usize) -> Rule<()> {
    unique_in_range(what, dims, rank)?;
    if dims.windows(2).any(|w| w[0] > w[1]) {
        return Err(format!("{what} {dims:?} must be sorted"));
    }
    Ok(())
}

fn disjoint(a_name: &str, a: &[i64], b_name: &str, b: &[i64]) -> Rule<()> {
    match a.iter().find(|d| b.contains(d)) {
        Some(d) => Err(format!("dimension {d} is in both {a_name} and {b_name}")),
        None => Ok(()),
    }
}

fn integer_tensor(what: &str, t: &TensorType) -> Rule<()> {
    if !t.elem.is_integer() {
        return Err(format!("{what} {t} must have an integer element type"));
    }
    Ok(())
}

/// The batching dimensions of an index tensor: its dimension sizes without
/// `index_vector_dim` (which may equal the rank: every element is an index).
fn index_checks(
    indices: &TensorType,
    index_vector_dim: i64,
    batching: &[i64],
    batching_name: &str,
) -> Rule<(Vec<i64>, i64)> {
    integer_tensor("start indices", indices)?;
    let r = indices.rank() as i64;
    if index_vector_dim < 0 || index_vector_dim > r {
        return Err(format!(
            "index_vector_dim {index_vector_dim} out of range for indices of rank {r}"
        ));
    }
    unique_in_range(batching_name, batching, indices.rank())?;
    if batching.contains(&index_vector_dim) {
        return Err(format!(
            "{batching_name} contains index_vector_dim {index_vector_dim}"
        ));
    }
    let batch: Vec<i64> = (0..r)
        .filter(|&d| d != index_vector_dim)
        .map(|d| indices.shape[d as usize])
        .collect();
    let vector_size = if index_vector_dim < r {
        indices.shape[index_vector_dim as usize]
    } else {
        1
    };
    Ok((batch, vector_size))
}

pub(super) fn gather_rule(a: &GatherAttrs, ops: &[TensorType]) -> Rule<TensorType> {
    operand_count(ops, 2)?;
    let (x, idx) = (&ops[0], &ops[1]);
    let r = x.rank();
    let (batch, vector_size) = index_checks(
        idx,
        a.index_vector_dim,
        &a.start_indices_batching_dims,
        "start_indices_batching_dims",
    )?;
    sorted_unique("collapsed_slice_dims", &a.collapsed_slice_dims, r)?;
    unique_in_range("operand_batching_dims", &a.operand_batching_dims, r)?;
    disjoint(
        "collapsed_slice_dims",
        &a.collapsed_slice_dims,
        "operand_batching_dims",
        &a.operand_batching_dims,
    )?;
    attr_len(
        "start_indices_batching_dims",
        a.start_indices_batching_dims.len(),
        a.operand_batching_dims.len(),
    )?;
    attr_len(
        "start_index_map",
        a.start_index_map.len(),
        vector_size.max(0) as usize,
    )?;
    unique_in_range("start_index_map", &a.start_index_map, r)?;
    disjoint(
        "start_index_map",
        &a.start_index_map,
        "operand_batching_dims",
        &a.operand_batching_dims,
    )?;
    attr_len("slice_sizes", a.slice_sizes.len(), r)?;
    for (d, (&s, &n)) in a.slice_sizes.iter().zip(&x.shape).enumerate() {
        if s < 0 || s > n {
            return Err(format!(
                "slice_sizes[{d}]={s} out of range for operand dimension {d}={n}"
            ));
        }
        let dd = d as i64;
        if (a.collapsed_slice_dims.contains(&dd) || a.operand_batching_dims.contains(&dd)) && s > 1
        {
            return Err(format!(
                "slice_sizes[{d}]={s} must be 0 or 1 for a collapsed or batching dimension"
            ));
        }
    }
    let offset_sizes: Vec<i64> = (0..r as i64)
        .filter(|d| !a.collapsed_slice_dims.contains(d) && !a.operand_batching_dims.contains(d))
        .map(|d| a.slice_sizes[d as usize])
        .collect();
    attr_len("offset_dims", a.offset_dims.len(), offset_sizes.len())?;
    let out_rank = offset_sizes.len() + batch.len();
    sorted_unique("offset_dims", &a.offset_dims, out_rank)?;
    let (mut oi, mut bi) = (0, 0);
    let shape: Vec<i64> = (0..out_rank as i64)
        .map(|d| {
            if a.offset_dims.contains(&d) {
                oi += 1;
                offset_sizes[oi - 1]
            } else {
                bi += 1;
                batch[bi - 1]
            }
        })
        .collect();
    Ok(TensorType::new(shape, x.elem))
}

pub(super) fn scatter_rule(
    a: &ScatterAttrs,
    ops: &[TensorType],
    body: &Block,
) -> Rule<Vec<TensorType>> {
    if ops.len() < 3 || ops.len().is_multiple_of(2) {
        return Err(format!(
            "expected inputs, scatter indices and as many updates as inputs, found {} operand(s)",
            ops.len()
        ));
    }
    let n = (ops.len() - 1) / 2;
    let (inputs, rest) = ops.split_at(n);
    let (idx, updates) = (&rest[0], &rest[1..]);
    for (i, (x, u)) in inputs.iter().zip(updates).enumerate() {
        same_shape(&format!("input #{i}"), x, "input #0", &inputs[0])?;
        same_shape(&format!("update #{i}"), u, "update #0", &updates[0])?;
        same_elem(&format!("update #{i}"), u, &format!("input #{i}"), x)?;
    }
    let (x, u) = (&inputs[0], &updates[0]);
    let r = x.rank();
    let (batch, vector_size) = index_checks(
        idx,
        a.index_vector_dim,
        &a.scatter_indices_batching_dims,
        "scatter_indices_batching_dims",
    )?;
    sorted_unique("update_window_dims", &a.update_window_dims, u.rank())?;
    sorted_unique("inserted_window_dims", &a.inserted_window_dims, r)?;
    unique_in_range("input_batching_dims", &a.input_batching_dims, r)?;
    disjoint(
        "inserted_window_dims",
        &a.inserted_window_dims,
        "input_batching_dims",
        &a.input_batching_dims,
    )?;
    attr_len(
        "scatter_indices_batching_dims",
        a.scatter_indices_batching_dims.len(),
        a.input_batching_dims.len(),
    )?;
    attr_len(
        "scatter_dims_to_operand_dims",
        a.scatter_dims_to_operand_dims.len(),
        vector_size.max(0) as usize,
    )?;
    unique_in_range(
        "scatter_dims_to_operand_dims",
        &a.scatter_dims_to_operand_dims,
        r,
    )?;
    disjoint(
        "scatter_dims_to_operand_dims",
        &a.scatter_dims_to_operand_dims,
        "input_batching_dims",
        &a.input_batching_dims,
    )?;
    let window_operand_dims: Vec<i64> = (0..r as i64)
        .filter(|d| !a.inserted_window_dims.contains(d) && !a.input_batching_dims.contains(d))
        .collect();
    attr_len(
        "update_window_dims",
        a.update_window_dims.len(),
        window_operand_dims.len(),
    )?;
    let scatter_dims: Vec<i64> = (0..u.rank() as i64)
        .filter(|d| !a.update_window_dims.contains(d))
        .collect();
    if scatter_dims.len() != batch.len() {
        return Err(format!(
            "updates have {} scatter dimension(s), the indices {}",
            scatter_dims.len(),
            batch.len()
        ));
    }
    for (&d, &b) in scatter_dims.iter().zip(&batch) {
        if u.shape[d as usize] != b {
            return Err(format!(
                "update dimension {d}={} does not match the indices' batch dimension {b}",
                u.shape[d as usize]
            ));
        }
    }
    for (&ud, &xd) in a.update_window_dims.iter().zip(&window_operand_dims) {
        let (us, xs) = (u.shape[ud as usize], x.shape[xd as usize]);
        if us > xs {
            return Err(format!(
                "update window dimension {ud}={us} exceeds input dimension {xd}={xs}"
            ));
        }
    }
    let elems: Vec<ElemType> = inputs.iter().map(|t| t.elem).collect();
    let twice: Vec<ElemType> = elems.iter().chain(&elems).copied().collect();
    check_region("update_computation", body, &twice, &elems)?;
    Ok(inputs.to_vec())
}

/// The start-index operands of dynamic_slice / dynamic_update_slice: one
/// integer scalar per operand dimension, all of one type.
fn start_indices(starts: &[TensorType], rank: usize) -> Rule<()> {
    if starts.len() != rank {
        return Err(format!(
            "{} start index operand(s) for an operand of rank {rank}",
            starts.len()
        ));
    }
    for (i, t) in starts.iter().enumerate() {
        if t.rank() != 0 || !t.elem.is_integer() {
            return Err(format!("start index #{i} {t} must be an integer scalar"));
        }
        same_elem(
            &format!("start index #{i}"),
            t,
            "start index #0",
            &starts[0],
        )?;
    }
    Ok(())
}

pub(super) fn dynamic_slice_rule(sizes: &[i64], ops: &[TensorType]) -> Rule<TensorType> {
    let x = ops
        .first()
        .ok_or_else(|| "expected an operand and start indices".to_string())?;
    start_indices(&ops[1..], x.rank())?;
    attr_len("slice_sizes", sizes.len(), x.rank())?;
    for (d, (&s, &n)) in sizes.iter().zip(&x.shape).enumerate() {
        if s < 0 || s > n {
            return Err(format!(
                "slice_sizes[{d}]={s} out of range for operand dimension {d}={n}"
            ));
        }
    }
    Ok(TensorType::new(sizes.to_vec(), x.elem))
}

pub(super) fn dynamic_update_slice_rule(ops: &[TensorType]) -> Rule<TensorType> {
    if ops.len() < 2 {
        return Err(format!(
            "expected an operand, an update and start indices, found {} operand(s)",
            ops.len()
        ));
    }
    let (x, u) = (&ops[0], &ops[1]);
    same_elem("update", u, "operand", x)?;
    if u.rank() != x.rank() {
        return Err(format!(
            "update rank {} does not match operand rank {}",
            u.rank(),
            x.rank()
        ));
    }
    for d in 0..x.rank() {
        if u.shape[d] > x.shape[d] {
            return Err(format!(
                "update dimension {d}={} exceeds operand dimension {d}={}",
                u.shape[d], x.shape[d]
            ));
        }
    }
    start_indices(&ops[2..], x.rank())?;
    Ok(x.clone())
}

fn expect_types(what: &str, got: &[TensorType], want: &[TensorType]) -> Rule<()> {
    if got.len() != want.len() {
        return Err(format!(
            "{what}: {} value(s), expected {}",
            got.len(),
            want.len()
        ));
    }
    for (i, (g, w)) in got.iter().zip(want).enumerate() {
        if g != w {
            return Err(format!("{what} #{i} has type {g}, expected {w}"));
        }
    }
    Ok(())
}

fn block_arg_types(b: &Block) -> Vec<TensorType> {
    b.args.iter().map(|(_, t)| t.clone()).collect()
}

pub(super) fn while_rule(
    ops: &[TensorType],
    cond: &Block,
    body: &Block,
    given: Option<&[TensorType]>,
) -> Rule<Vec<TensorType>> {
    expect_types("cond region argument", &block_arg_types(cond), ops)?;
    expect_types("body region argument", &block_arg_types(body), ops)?;
    let i1 = [TensorType::scalar(ElemType::I1)];
    let pred = region_returns("cond", cond, Some(&i1))?;
    expect_types("cond region result", &pred, &i1)?;
    let next = region_returns("body", body, given.or(Some(ops)))?;
    expect_types("body region result", &next, ops)?;
    Ok(ops.to_vec())
}

/// case and if: branches take no arguments and return values of one list of
/// types, the results.
pub(super) fn branches_rule(
    selector: ElemType,
    ops: &[TensorType],
    branches: &[Block],
    given: Option<&[TensorType]>,
) -> Rule<Vec<TensorType>> {
    operand_count(ops, 1)?;
    let want = TensorType::scalar(selector);
    if ops[0] != want {
        return Err(format!("the selector {} must be {want}", ops[0]));
    }
    let first = branches
        .first()
        .ok_or_else(|| "expected at least 1 branch".to_string())?;
    let types = region_returns("branch 0", first, given)?;
    for (i, b) in branches.iter().enumerate() {
        if !b.args.is_empty() {
            return Err(format!("branch {i} must take no arguments"));
        }
        let t = region_returns(&format!("branch {i}"), b, given)?;
        expect_types(&format!("branch {i} result"), &t, &types)?;
    }
    Ok(types)
}

pub(super) fn sort_rule(dimension: i64, ops: &[TensorType], cmp: &Block) -> Rule<Vec<TensorType>> {
    let first = ops
        .first()
        .ok_or_else(|| "expected at least 1 operand".to_string())?;
    for (i, t) in ops.iter().enumerate() {
        same_shape(&format!("operand #{i}"), t, "operand #0", first)?;
    }
    let r = first.rank() as i64;
    if dimension < -r || dimension >= r {
        return Err(format!(
            "dimension {dimension} out of range for operands of rank {r}"
        ));
    }
    let pairs: Vec<ElemType> = ops.iter().flat_map(|t| [t.elem, t.elem]).collect();
    check_region("comparator", cmp, &pairs, &[ElemType::I1])?;
    Ok(ops.to_vec())
}

pub(super) fn map_rule(dimensions: &[i64], ops: &[TensorType], body: &Block) -> Rule<TensorType> {
    let first = ops
        .first()
        .ok_or_else(|| "expected at least 1 operand".to_string())?;
    for (i, t) in ops.iter().enumerate() {
        same_shape(&format!("operand #{i}"), t, "operand #0", first)?;
    }
    let all: Vec<i64> = (0..first.rank() as i64).collect();
    if dimensions != all.as_slice() {
        return Err(format!("dimensions {dimensions:?} must be {all:?}"));
    }
    let elems: Vec<ElemType> = ops.iter().map(|t| t.elem).collect();
    let rets = region_returns("computation", body, None)?;
    let out = match rets.as_slice() {
        [t] if t.rank() == 0 => t.elem,
        _ => return Err("computation region must return one scalar".into()),
    };
    check_region("computation", body, &elems, &[out])?;
    Ok(first.with_elem(out))
}
