//! Result-type rules of the ops with regions the IR has had from the start
//! (reduce, reduce_window, select_and_scatter, all_reduce) and the region
//! checks they share with the structured ops: a region's signature, and its
//! argument and result types against what the op requires.

use super::*;

/// The type of `v` when `region` defines it: one of its arguments or a result
/// of one of its ops.
pub(super) fn region_value_type(region: &Block, v: ValueId) -> Option<TensorType> {
    region
        .args
        .iter()
        .chain(region.ops.iter().flat_map(|op| op.results.iter()))
        .find(|(id, _)| *id == v)
        .map(|(_, t)| t.clone())
}

/// Argument types and returned types of a single-block region. Returned values
/// must be the block's arguments or results of its own ops.
pub(super) fn region_signature(region: &Block) -> Rule<(Vec<TensorType>, Vec<TensorType>)> {
    let args: Vec<TensorType> = region.args.iter().map(|(_, t)| t.clone()).collect();
    let ret = match region.ops.last() {
        Some(op) if op.kind == OpKind::Return => op,
        _ => return Err("region must end with stablehlo.return".into()),
    };
    let rets = ret
        .operands
        .iter()
        .map(|&v| {
            region_value_type(region, v)
                .ok_or_else(|| format!("region returns %{} defined outside it", v.0))
        })
        .collect::<Rule<Vec<_>>>()?;
    Ok((args, rets))
}

/// The region computes `(E0..En, E0..En) -> (E0..En)` over scalars when
/// `arg_elems` is `[E0..En, E0..En]` and `ret_elems` is `[E0..En]`.
pub(super) fn check_region(
    which: &str,
    region: &Block,
    arg_elems: &[ElemType],
    ret_elems: &[ElemType],
) -> Rule<()> {
    let (args, rets) = region_signature(region)?;
    let expect = |what: &str, got: &[TensorType], want: &[ElemType]| -> Rule<()> {
        if got.len() != want.len() {
            return Err(format!(
                "{which} region has {} {what}(s), expected {}",
                got.len(),
                want.len()
            ));
        }
        for (i, (g, &w)) in got.iter().zip(want).enumerate() {
            let w = TensorType::scalar(w);
            if *g != w {
                return Err(format!(
                    "{which} region {what} #{i} has type {g}, expected {w}"
                ));
            }
        }
        Ok(())
    };
    expect("argument", &args, arg_elems)?;
    expect("result", &rets, ret_elems)
}

/// Splits `inputs…, inits…` and checks the inits are scalars of the inputs'
/// element types and the inputs share one shape.
pub(super) fn inputs_and_inits(ops: &[TensorType]) -> Rule<(&[TensorType], Vec<ElemType>)> {
    if ops.is_empty() || ops.len() & 1 == 1 {
        return Err(format!(
            "expected inputs and as many init values, found {} operand(s)",
            ops.len()
        ));
    }
    let (inputs, inits) = ops.split_at(ops.len() / 2);
    for (i, (x, init)) in inputs.iter().zip(inits).enumerate() {
        if init.rank() != 0 {
            return Err(format!("init value #{i} {init} must be a scalar"));
        }
        same_elem(&format!("init value #{i}"), init, &format!("input #{i}"), x)?;
        same_shape(&format!("input #{i}"), x, "input #0", &inputs[0])?;
    }
    Ok((inputs, inits.iter().map(|t| t.elem).collect()))
}

pub(super) fn reduce_rule(dims: &[i64], ops: &[TensorType], body: &Block) -> Rule<Vec<TensorType>> {
    let (inputs, elems) = inputs_and_inits(ops)?;
    let x = &inputs[0];
    unique_in_range("dimensions", dims, x.rank())?;
    let twice: Vec<ElemType> = elems.iter().chain(&elems).copied().collect();
    check_region("body", body, &twice, &elems)?;
    let shape: Vec<i64> = (0..x.rank() as i64)
        .filter(|d| !dims.contains(d))
        .map(|d| x.shape[d as usize])
        .collect();
    Ok(elems
        .iter()
        .map(|&e| TensorType::new(shape.clone(), e))
        .collect())
}

pub(super) fn reduce_window_rule(
    a: &WindowAttrs,
    ops: &[TensorType],
    body: &Block,
) -> Rule<Vec<TensorType>> {
    let (inputs, elems) = inputs_and_inits(ops)?;
    let x = &inputs[0];
    let r = x.rank();
    attr_len("window_dimensions", a.window_dimensions.len(), r)?;
    attr_len("window_strides", a.window_strides.len(), r)?;
    attr_len("base_dilations", a.base_dilations.len(), r)?;
    attr_len("window_dilations", a.window_dilations.len(), r)?;
    attr_len("padding", a.padding.len(), r)?;
    all_positive("window_dimensions", &a.window_dimensions)?;
    all_positive("window_strides", &a.window_strides)?;
    all_positive("base_dilations", &a.base_dilations)?;
    all_positive("window_dilations", &a.window_dilations)?;
    let twice: Vec<ElemType> = elems.iter().chain(&elems).copied().collect();
    check_region("body", body, &twice, &elems)?;
    let shape = (0..r)
        .map(|d| {
            num_windows(
                "operand",
                d,
                WindowDim {
                    base: x.shape[d],
                    base_dilation: a.base_dilations[d],
                    padding: a.padding[d],
                    window: a.window_dimensions[d],
                    window_dilation: a.window_dilations[d],
                    stride: a.window_strides[d],
                },
            )
        })
        .collect::<Rule<Vec<i64>>>()?;
    Ok(elems
        .iter()
        .map(|&e| TensorType::new(shape.clone(), e))
        .collect())
}

pub(super) fn select_and_scatter_rule(
    a: &ScatterWindowAttrs,
    ops: &[TensorType],
    select: &Block,
    scatter: &Block,
) -> Rule<TensorType> {
    operand_count(ops, 3)?;
    let (x, source, init) = (&ops[0], &ops[1], &ops[2]);
    same_elem("source", source, "operand", x)?;
    if init.rank() != 0 {
        return Err(format!("init value {init} must be a scalar"));
    }
    same_elem("init value", init, "operand", x)?;
    let r = x.rank();
    attr_len("window_dimensions", a.window_dimensions.len(), r)?;
    attr_len("window_strides", a.window_strides.len(), r)?;
    attr_len("padding", a.padding.len(), r)?;
    all_positive("window_dimensions", &a.window_dimensions)?;
    all_positive("window_strides", &a.window_strides)?;
    let windows = (0..r)
        .map(|d| {
            num_windows(
                "operand",
                d,
                WindowDim {
                    base: x.shape[d],
                    base_dilation: 1,
                    padding: a.padding[d],
                    window: a.window_dimensions[d],
                    window_dilation: 1,
                    stride: a.window_strides[d],
                },
            )
        })
        .collect::<Rule<Vec<i64>>>()?;
    same_shape(
        "source",
        source,
        "window output",
        &TensorType::new(windows, x.elem),
    )?;
    let e = x.elem;
    check_region("select", select, &[e, e], &[ElemType::I1])?;
    check_region("scatter", scatter, &[e, e], &[e])?;
    Ok(x.clone())
}

pub(super) fn all_reduce_rule(
    groups: &[Vec<i64>],
    ops: &[TensorType],
    body: &Block,
) -> Rule<Vec<TensorType>> {
    let first = ops
        .first()
        .ok_or_else(|| "expected at least 1 operand".to_string())?;
    for (i, t) in ops.iter().enumerate() {
        same_elem(&format!("operand #{i}"), t, "operand #0", first)?;
    }
    if let Some(g) = groups.iter().position(|g| g.len() != groups[0].len()) {
        return Err(format!(
            "replica group {g} has {} ids, group 0 has {}",
            groups[g].len(),
            groups[0].len()
        ));
    }
    let e = first.elem;
    check_region("computation", body, &[e, e], &[e])?;
    Ok(ops.to_vec())
}
