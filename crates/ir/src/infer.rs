//! Result-type inference and checking for every op, following the StableHLO
//! specification's constraints. The builder and the verifier both go through here.
//!
//! Every rule lives in one function per op family; each error names the op and
//! the dimension (or attribute index) that does not fit, so a rejected module
//! says where to look.

use crate::module::{Block, ValueId};
use crate::ops::{
    BinaryOp, CompareType, ConvAttrs, DenseData, DotDims, OpKind, ScatterWindowAttrs, UnaryOp,
    WindowAttrs,
};
use crate::types::{ElemType, TensorType};
use std::fmt;

mod bits;
mod regions;
mod structured;

use bits::{
    bitcast_convert_rule, get_dimension_size_rule, reduce_precision_rule, top_k_rule,
    triangular_solve_rule,
};
use regions::{
    all_reduce_rule, check_region, reduce_rule, reduce_window_rule, region_value_type,
    select_and_scatter_rule,
};

/// An ill-typed op: which op, and what does not match (dimensions named).
#[derive(Clone, Debug, PartialEq)]
pub struct TypeError {
    pub op: &'static str,
    pub message: String,
}

impl fmt::Display for TypeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.op, self.message)
    }
}

impl std::error::Error for TypeError {}

/// Rules return a bare message; [`infer_result_types`] attaches the op name.
type Rule<T> = Result<T, String>;

/// The result types of `kind` applied to operands of `operand_types` with
/// `regions`. `given` holds the result types the text or the caller states; it is
/// required where the spec does not determine the result type from the operands
/// (constant, convert, reshape, broadcast_in_dim, iota, func.call) and is checked
/// against the inferred types everywhere else.
pub fn infer_result_types(
    kind: &OpKind,
    operand_types: &[TensorType],
    regions: &[Block],
    given: Option<&[TensorType]>,
) -> Result<Vec<TensorType>, TypeError> {
    infer(kind, operand_types, regions, given).map_err(|message| TypeError {
        op: kind.name(),
        message,
    })
}

fn infer(
    kind: &OpKind,
    ops: &[TensorType],
    regions: &[Block],
    given: Option<&[TensorType]>,
) -> Rule<Vec<TensorType>> {
    let want_regions = match kind {
        OpKind::Reduce { .. } | OpKind::ReduceWindow(_) | OpKind::AllReduce { .. } => 1,
        OpKind::SelectAndScatter(_) => 2,
        OpKind::Scatter(_) | OpKind::Sort { .. } | OpKind::Map { .. } => 1,
        OpKind::While | OpKind::If => 2,
        OpKind::Case => regions.len().max(1),
        _ => 0,
    };
    if regions.len() != want_regions {
        return Err(format!(
            "expected {want_regions} region(s), found {}",
            regions.len()
        ));
    }
    // Ops whose result type is stated, not derived.
    match kind {
        OpKind::Constant(data) => {
            operand_count(ops, 0)?;
            let t = single_given(given)?;
            constant_rule(data, &t)?;
            return Ok(vec![t]);
        }
        OpKind::Convert => {
            operand_count(ops, 1)?;
            let t = single_given(given)?;
            if t.shape != ops[0].shape {
                return Err(format!(
                    "result shape {:?} does not match operand shape {:?}",
                    t.shape, ops[0].shape
                ));
            }
            return Ok(vec![t]);
        }
        OpKind::Reshape => {
            operand_count(ops, 1)?;
            let t = single_given(given)?;
            same_elem("result", &t, "operand", &ops[0])?;
            if t.num_elements() != ops[0].num_elements() {
                return Err(format!(
                    "result {t} has {} elements, operand {} has {}",
                    t.num_elements(),
                    ops[0],
                    ops[0].num_elements()
                ));
            }
            return Ok(vec![t]);
        }
        OpKind::BroadcastInDim { dims } => {
            operand_count(ops, 1)?;
            let t = single_given(given)?;
            broadcast_rule(dims, &ops[0], &t)?;
            return Ok(vec![t]);
        }
        OpKind::Iota { dim } => {
            operand_count(ops, 0)?;
            let t = single_given(given)?;
            if *dim < 0 || *dim as usize >= t.rank() {
                return Err(format!(
                    "iota_dimension {dim} out of range for result of rank {}",
                    t.rank()
                ));
            }
            return Ok(vec![t]);
        }
        OpKind::Call { .. } => {
            // Operand and result types are checked against the callee by the verifier.
            return given
                .map(|g| g.to_vec())
                .ok_or_else(|| "result types must be given".to_string());
        }
        OpKind::BitcastConvert => {
            operand_count(ops, 1)?;
            let t = single_given(given)?;
            bitcast_convert_rule(&ops[0], &t)?;
            return Ok(vec![t]);
        }
        OpKind::Return | OpKind::FuncReturn => {
            if let Some(g) = given {
                if !g.is_empty() {
                    return Err(format!("a terminator has no results, {} given", g.len()));
                }
            }
            return Ok(Vec::new());
        }
        _ => {}
    }
    let inferred = match kind {
        OpKind::Unary(u) => vec![unary_rule(*u, ops)?],
        OpKind::Binary(b) => vec![binary_rule(*b, ops)?],
        OpKind::Compare { compare_type, .. } => vec![compare_rule(*compare_type, ops)?],
        OpKind::Select => vec![select_rule(ops)?],
        OpKind::Clamp => vec![clamp_rule(ops)?],
        OpKind::Transpose { permutation } => vec![transpose_rule(permutation, ops)?],
        OpKind::Reverse { dims } => {
            operand_count(ops, 1)?;
            unique_in_range("dimensions", dims, ops[0].rank())?;
            vec![ops[0].clone()]
        }
        OpKind::Slice {
            start,
            limit,
            strides,
        } => vec![slice_rule(start, limit, strides, ops)?],
        OpKind::Pad {
            low,
            high,
            interior,
        } => vec![pad_rule(low, high, interior, ops)?],
        OpKind::Concatenate { dim } => vec![concatenate_rule(*dim, ops)?],
        OpKind::DotGeneral { dims, .. } => {
            vec![dot_general_rule(dims, ops, given_elem(given))?]
        }
        OpKind::Convolution(attrs) => vec![convolution_rule(attrs, ops, given_elem(given))?],
        OpKind::Reduce { dims } => reduce_rule(dims, ops, &regions[0])?,
        OpKind::ReduceWindow(attrs) => reduce_window_rule(attrs, ops, &regions[0])?,
        OpKind::SelectAndScatter(attrs) => {
            vec![select_and_scatter_rule(
                attrs,
                ops,
                &regions[0],
                &regions[1],
            )?]
        }
        OpKind::AllReduce { replica_groups, .. } => {
            all_reduce_rule(replica_groups, ops, &regions[0])?
        }
        OpKind::Gather(a) => vec![structured::gather_rule(a, ops)?],
        OpKind::Scatter(a) => structured::scatter_rule(a, ops, &regions[0])?,
        OpKind::DynamicSlice { sizes } => vec![structured::dynamic_slice_rule(sizes, ops)?],
        OpKind::DynamicUpdateSlice => vec![structured::dynamic_update_slice_rule(ops)?],
        OpKind::While => structured::while_rule(ops, &regions[0], &regions[1], given)?,
        OpKind::Case => structured::branches_rule(ElemType::I32, ops, regions, given)?,
        OpKind::If => structured::branches_rule(ElemType::I1, ops, regions, given)?,
        OpKind::Sort { dimension, .. } => structured::sort_rule(*dimension, ops, &regions[0])?,
        OpKind::Map { dimensions } => vec![structured::map_rule(dimensions, ops, &regions[0])?],
        OpKind::OptimizationBarrier => ops.to_vec(),
        OpKind::ReducePrecision {
            exponent_bits,
            mantissa_bits,
        } => vec![reduce_precision_rule(*exponent_bits, *mantissa_bits, ops)?],
        OpKind::GetDimensionSize { dimension } => {
            vec![get_dimension_size_rule(*dimension, ops)?]
        }
        OpKind::TopK { k } => top_k_rule(*k, ops)?,
        OpKind::TriangularSolve { left_side, .. } => {
            vec![triangular_solve_rule(*left_side, ops)?]
        }
        OpKind::Constant(_)
        | OpKind::BitcastConvert
        | OpKind::Convert
        | OpKind::Reshape
        | OpKind::BroadcastInDim { .. }
        | OpKind::Iota { .. }
        | OpKind::Call { .. }
        | OpKind::Return
        | OpKind::FuncReturn => unreachable!("handled above"),
    };
    if let Some(g) = given {
        check_given(&inferred, g)?;
    }
    Ok(inferred)
}

/// Where the spec lets the result element type differ from the operands'
/// (dot_general, convolution: e.g. bf16 operands accumulating into f32), the
/// stated element type wins.
fn given_elem(given: Option<&[TensorType]>) -> Option<ElemType> {
    given.and_then(|g| g.first()).map(|t| t.elem)
}

fn check_given(inferred: &[TensorType], given: &[TensorType]) -> Rule<()> {
    if inferred.len() != given.len() {
        return Err(format!(
            "{} result(s) given, {} inferred",
            given.len(),
            inferred.len()
        ));
    }
    for (i, (inf, g)) in inferred.iter().zip(given).enumerate() {
        if inf != g {
            return Err(format!(
                "result #{i} type {g} does not match inferred {inf}: {}",
                describe_mismatch(inf, g)
            ));
        }
    }
    Ok(())
}

/// Which part of `got` differs from `expected` (rank, element type, or the
/// first differing dimension).
fn describe_mismatch(expected: &TensorType, got: &TensorType) -> String {
    if expected.rank() != got.rank() {
        return format!("rank {} vs {}", got.rank(), expected.rank());
    }
    if let Some(d) = (0..got.rank()).find(|&d| got.shape[d] != expected.shape[d]) {
        return format!(
            "dimension {d} is {}, expected {}",
            got.shape[d], expected.shape[d]
        );
    }
    format!("element type {}, expected {}", got.elem, expected.elem)
}

fn operand_count(ops: &[TensorType], n: usize) -> Rule<()> {
    if ops.len() != n {
        return Err(format!("expected {n} operand(s), found {}", ops.len()));
    }
    Ok(())
}

fn single_given(given: Option<&[TensorType]>) -> Rule<TensorType> {
    match given {
        None => Err("result type must be given".into()),
        Some([t]) => Ok(t.clone()),
        Some(g) => Err(format!("expected 1 result, {} given", g.len())),
    }
}

fn same_elem(a_name: &str, a: &TensorType, b_name: &str, b: &TensorType) -> Rule<()> {
    if a.elem != b.elem {
        return Err(format!(
            "{a_name} element type {} does not match {b_name} element type {}",
            a.elem, b.elem
        ));
    }
    Ok(())
}

/// `a` and `b` have the same type; the message names the first differing dimension.
fn same_type(a_name: &str, a: &TensorType, b_name: &str, b: &TensorType) -> Rule<()> {
    same_elem(a_name, a, b_name, b)?;
    same_shape(a_name, a, b_name, b)
}

fn same_shape(a_name: &str, a: &TensorType, b_name: &str, b: &TensorType) -> Rule<()> {
    if a.rank() != b.rank() {
        return Err(format!(
            "{a_name} rank {} does not match {b_name} rank {}",
            a.rank(),
            b.rank()
        ));
    }
    if let Some(d) = (0..a.rank()).find(|&d| a.shape[d] != b.shape[d]) {
        return Err(format!(
            "{a_name} dimension {d}={} does not match {b_name} dimension {d}={}",
            a.shape[d], b.shape[d]
        ));
    }
    Ok(())
}

/// Each entry of `dims` is a dimension index in `0..rank`, none repeated.
fn unique_in_range(what: &str, dims: &[i64], rank: usize) -> Rule<()> {
    for (i, &d) in dims.iter().enumerate() {
        if d < 0 || d as usize >= rank {
            return Err(format!("{what}[{i}]={d} out of range for rank {rank}"));
        }
        if dims[..i].contains(&d) {
            return Err(format!("{what}[{i}]={d} is repeated"));
        }
    }
    Ok(())
}

fn attr_len(what: &str, len: usize, want: usize) -> Rule<()> {
    if len != want {
        return Err(format!("{what} has {len} entries, expected {want}"));
    }
    Ok(())
}

fn all_positive(what: &str, v: &[i64]) -> Rule<()> {
    match v.iter().position(|&x| x < 1) {
        Some(i) => Err(format!("{what}[{i}]={} must be >= 1", v[i])),
        None => Ok(()),
    }
}

fn integer_range(elem: ElemType) -> (i128, i128) {
    let bits = elem.bit_width();
    if elem.is_bool() {
        (0, 1)
    } else if elem.is_unsigned() {
        (0, (1i128 << bits) - 1)
    } else {
        (-(1i128 << (bits - 1)), (1i128 << (bits - 1)) - 1)
    }
}

/// Whether `v` is exactly a value of the float type `elem` (NaN and ±inf count).
fn representable(v: f64, elem: ElemType) -> bool {
    if !v.is_finite() {
        return true;
    }
    match elem {
        ElemType::F64 => true,
        ElemType::F32 => (v as f32) as f64 == v,
        ElemType::BF16 => (v as f32) as f64 == v && (v as f32).to_bits() & 0xFFFF == 0,
        // f16: a finite f64 that is a multiple of 2^-24 with at most 11
        // significant bits and magnitude at most 65504.
        ElemType::F16 => {
            let scaled = v * (1u64 << 24) as f64;
            if v.abs() > 65504.0 || scaled.fract() != 0.0 {
                return false;
            }
            let m = scaled.abs() as u64;
            m == 0 || (m >> m.trailing_zeros()) < (1 << 11)
        }
        _ => false,
    }
}

fn constant_rule(data: &DenseData, t: &TensorType) -> Rule<()> {
    let n = t.num_elements() as usize;
    if data.len() != n && data.len() != 1 {
        return Err(format!(
            "dense data has {} values, result {t} has {n} elements",
            data.len()
        ));
    }
    match data {
        DenseData::Float(v) => {
            if !t.elem.is_float() {
                return Err(format!("float data for element type {}", t.elem));
            }
            if let Some(i) = v.iter().position(|x| !representable(*x, t.elem)) {
                return Err(format!(
                    "value [{i}]={:e} is not exactly representable in {}",
                    v[i], t.elem
                ));
            }
        }
        DenseData::Int(v) => {
            if t.elem.is_float() {
                return Err(format!("integer data for element type {}", t.elem));
            }
            let (lo, hi) = integer_range(t.elem);
            // ui64 values above 2⁶³−1 are stored as their bit pattern.
            let wide = |x: i64| {
                if t.elem == ElemType::UI64 {
                    x as u64 as i128
                } else {
                    x as i128
                }
            };
            if let Some(i) = v.iter().position(|&x| wide(x) < lo || wide(x) > hi) {
                return Err(format!("value [{i}]={} out of range for {}", v[i], t.elem));
            }
        }
    }
    Ok(())
}

fn is_signed_int(e: ElemType) -> bool {
    e.is_integer() && !e.is_bool() && !e.is_unsigned()
}

fn unary_rule(u: UnaryOp, ops: &[TensorType]) -> Rule<TensorType> {
    operand_count(ops, 1)?;
    let e = ops[0].elem;
    let ok = match u {
        UnaryOp::Not => e.is_integer(),
        UnaryOp::Negate | UnaryOp::Square => !e.is_bool(),
        UnaryOp::Abs | UnaryOp::Sign => e.is_float() || is_signed_int(e),
        UnaryOp::Exponential
        | UnaryOp::ExponentialMinusOne
        | UnaryOp::Log
        | UnaryOp::LogPlusOne
        | UnaryOp::Sqrt
        | UnaryOp::Rsqrt
        | UnaryOp::Cbrt
        | UnaryOp::Tanh
        | UnaryOp::Logistic
        | UnaryOp::Floor
        | UnaryOp::Ceil
        | UnaryOp::RoundNearestEven
        | UnaryOp::Sine
        | UnaryOp::Cosine
        | UnaryOp::Erf
        | UnaryOp::Erfc => e.is_float(),
        // Bit-level and special functions.
        UnaryOp::Popcnt | UnaryOp::CountLeadingZeros => e.is_integer() && !e.is_bool(),
        UnaryOp::IsFinite
        | UnaryOp::IsInf
        | UnaryOp::IsNegInf
        | UnaryOp::IsPosInf
        | UnaryOp::RoundNearestAfz
        | UnaryOp::Tan
        | UnaryOp::ChloTan
        | UnaryOp::ErfInv
        | UnaryOp::Lgamma
        | UnaryOp::Digamma
        | UnaryOp::BesselI1e
        | UnaryOp::Sinh
        | UnaryOp::Cosh
        | UnaryOp::Asin
        | UnaryOp::Acos
        | UnaryOp::Atan
        | UnaryOp::Asinh
        | UnaryOp::Acosh
        | UnaryOp::Atanh => e.is_float(),
    };
    if !ok {
        return Err(format!("operand element type {e} not allowed"));
    }
    if u.is_predicate() {
        return Ok(ops[0].with_elem(ElemType::I1));
    }
    Ok(ops[0].clone())
}

fn binary_rule(b: BinaryOp, ops: &[TensorType]) -> Rule<TensorType> {
    operand_count(ops, 2)?;
    same_type("lhs", &ops[0], "rhs", &ops[1])?;
    let e = ops[0].elem;
    let ok = match b {
        BinaryOp::And | BinaryOp::Or | BinaryOp::Xor => e.is_integer(),
        // The spec defines these on booleans too (or, and, or, and).
        BinaryOp::Add | BinaryOp::Multiply | BinaryOp::Maximum | BinaryOp::Minimum => true,
        BinaryOp::Subtract | BinaryOp::Divide | BinaryOp::Remainder | BinaryOp::Power => {
            !e.is_bool()
        }
        BinaryOp::ShiftLeft
        | BinaryOp::ShiftRightLogical
        | BinaryOp::ShiftRightArithmetic
        | BinaryOp::Mulhi => e.is_integer() && !e.is_bool(),
        BinaryOp::Atan2 | BinaryOp::Polygamma | BinaryOp::Zeta | BinaryOp::NextAfter => {
            e.is_float()
        }
    };
    if !ok {
        return Err(format!("operand element type {e} not allowed"));
    }
    Ok(ops[0].clone())
}

fn compare_rule(compare_type: Option<CompareType>, ops: &[TensorType]) -> Rule<TensorType> {
    operand_count(ops, 2)?;
    same_type("lhs", &ops[0], "rhs", &ops[1])?;
    let e = ops[0].elem;
    if let Some(ct) = compare_type {
        let ok = match ct {
            CompareType::Float | CompareType::TotalOrder => e.is_float(),
            CompareType::Signed => is_signed_int(e),
            CompareType::Unsigned => e.is_unsigned() || e.is_bool(),
        };
        if !ok {
            return Err(format!(
                "compare_type {} does not fit element type {e}",
                ct.mnemonic()
            ));
        }
    }
    Ok(ops[0].with_elem(ElemType::I1))
}

fn select_rule(ops: &[TensorType]) -> Rule<TensorType> {
    operand_count(ops, 3)?;
    let (pred, on_true, on_false) = (&ops[0], &ops[1], &ops[2]);
    if pred.elem != ElemType::I1 {
        return Err(format!("pred element type {} must be i1", pred.elem));
    }
    same_type("on_true", on_true, "on_false", on_false)?;
    if pred.rank() != 0 {
        same_shape("pred", pred, "on_true", on_true)?;
    }
    Ok(on_true.clone())
}

fn clamp_rule(ops: &[TensorType]) -> Rule<TensorType> {
    operand_count(ops, 3)?;
    let operand = &ops[1];
    for (name, bound) in [("min", &ops[0]), ("max", &ops[2])] {
        same_elem(name, bound, "operand", operand)?;
        if bound.rank() != 0 {
            same_shape(name, bound, "operand", operand)?;
        }
    }
    Ok(operand.clone())
}

fn transpose_rule(perm: &[i64], ops: &[TensorType]) -> Rule<TensorType> {
    operand_count(ops, 1)?;
    let x = &ops[0];
    attr_len("permutation", perm.len(), x.rank())?;
    unique_in_range("permutation", perm, x.rank())?;
    let shape: Vec<i64> = perm.iter().map(|&p| x.shape[p as usize]).collect();
    Ok(TensorType::new(shape, x.elem))
}

fn broadcast_rule(dims: &[i64], x: &TensorType, result: &TensorType) -> Rule<()> {
    same_elem("result", result, "operand", x)?;
    attr_len("broadcast_dimensions", dims.len(), x.rank())?;
    unique_in_range("broadcast_dimensions", dims, result.rank())?;
    for (i, &d) in dims.iter().enumerate() {
        let (od, rd) = (x.shape[i], result.shape[d as usize]);
        if od != 1 && od != rd {
            return Err(format!(
                "operand dimension {i}={od} does not match result dimension {d}={rd}"
            ));
        }
    }
    Ok(())
}

fn slice_rule(
    start: &[i64],
    limit: &[i64],
    strides: &[i64],
    ops: &[TensorType],
) -> Rule<TensorType> {
    operand_count(ops, 1)?;
    let x = &ops[0];
    attr_len("start_indices", start.len(), x.rank())?;
    attr_len("limit_indices", limit.len(), x.rank())?;
    attr_len("strides", strides.len(), x.rank())?;
    all_positive("strides", strides)?;
    let mut shape = Vec::with_capacity(x.rank());
    for d in 0..x.rank() {
        let (s, l, n) = (start[d], limit[d], x.shape[d]);
        if s < 0 || s > l || l > n {
            return Err(format!(
                "dimension {d}: need 0 <= start {s} <= limit {l} <= size {n}"
            ));
        }
        // (l - s) / stride rounded up, without overflow for a huge stride.
        shape.push(((l - s) as u64).div_ceil(strides[d] as u64) as i64);
    }
    Ok(TensorType::new(shape, x.elem))
}

fn pad_rule(low: &[i64], high: &[i64], interior: &[i64], ops: &[TensorType]) -> Rule<TensorType> {
    operand_count(ops, 2)?;
    let (x, pv) = (&ops[0], &ops[1]);
    if pv.rank() != 0 {
        return Err(format!("padding value {pv} must be a scalar"));
    }
    same_elem("padding value", pv, "operand", x)?;
    attr_len("edge_padding_low", low.len(), x.rank())?;
    attr_len("edge_padding_high", high.len(), x.rank())?;
    attr_len("interior_padding", interior.len(), x.rank())?;
    let mut shape = Vec::with_capacity(x.rank());
    for d in 0..x.rank() {
        if interior[d] < 0 {
            return Err(format!("interior_padding[{d}]={} is negative", interior[d]));
        }
        // In i128: edges near ±2^63 must give an error, not an overflow.
        let n = i128::from(x.shape[d]);
        let core = if n == 0 {
            0
        } else {
            n + (n - 1) * i128::from(interior[d])
        };
        let out = i128::from(low[d]) + i128::from(high[d]) + core;
        if out < 0 {
            return Err(format!(
                "dimension {d}: low {} + high {} + padded size {core} is negative",
                low[d], high[d]
            ));
        }
        shape.push(fit_dim(d, out)?);
    }
    Ok(TensorType::new(shape, x.elem))
}

fn concatenate_rule(dim: i64, ops: &[TensorType]) -> Rule<TensorType> {
    let first = ops
        .first()
        .ok_or_else(|| "expected at least 1 operand".to_string())?;
    if dim < 0 || dim as usize >= first.rank() {
        return Err(format!(
            "dimension {dim} out of range for rank {}",
            first.rank()
        ));
    }
    let dim = dim as usize;
    let mut total: i128 = 0;
    for (i, t) in ops.iter().enumerate() {
        same_elem(&format!("operand #{i}"), t, "operand #0", first)?;
        if t.rank() != first.rank() {
            return Err(format!(
                "operand #{i} rank {} does not match operand #0 rank {}",
                t.rank(),
                first.rank()
            ));
        }
        if let Some(d) = (0..t.rank()).find(|&d| d != dim && t.shape[d] != first.shape[d]) {
            return Err(format!(
                "operand #{i} dimension {d}={} does not match operand #0 dimension {d}={}",
                t.shape[d], first.shape[d]
            ));
        }
        total += i128::from(t.shape[dim]);
    }
    let mut shape = first.shape.clone();
    shape[dim] = fit_dim(dim, total)?;
    Ok(TensorType::new(shape, first.elem))
}

fn dot_general_rule(
    dims: &DotDims,
    ops: &[TensorType],
    given_elem: Option<ElemType>,
) -> Rule<TensorType> {
    operand_count(ops, 2)?;
    let (lhs, rhs) = (&ops[0], &ops[1]);
    same_elem("lhs", lhs, "rhs", rhs)?;
    if dims.lhs_batch.len() != dims.rhs_batch.len() {
        return Err(format!(
            "{} lhs batching dimensions but {} rhs",
            dims.lhs_batch.len(),
            dims.rhs_batch.len()
        ));
    }
    if dims.lhs_contracting.len() != dims.rhs_contracting.len() {
        return Err(format!(
            "{} lhs contracting dimensions but {} rhs",
            dims.lhs_contracting.len(),
            dims.rhs_contracting.len()
        ));
    }
    let lhs_all: Vec<i64> = dims
        .lhs_batch
        .iter()
        .chain(&dims.lhs_contracting)
        .copied()
        .collect();
    let rhs_all: Vec<i64> = dims
        .rhs_batch
        .iter()
        .chain(&dims.rhs_contracting)
        .copied()
        .collect();
    unique_in_range("lhs batching+contracting dimensions", &lhs_all, lhs.rank())?;
    unique_in_range("rhs batching+contracting dimensions", &rhs_all, rhs.rank())?;
    for (&l, &r) in dims.lhs_batch.iter().zip(&dims.rhs_batch) {
        let (a, b) = (lhs.shape[l as usize], rhs.shape[r as usize]);
        if a != b {
            return Err(format!(
                "batching dimension lhs[{l}]={a} does not match rhs[{r}]={b}"
            ));
        }
    }
    for (&l, &r) in dims.lhs_contracting.iter().zip(&dims.rhs_contracting) {
        let (a, b) = (lhs.shape[l as usize], rhs.shape[r as usize]);
        if a != b {
            return Err(format!(
                "contracting dimension lhs[{l}]={a} does not match rhs[{r}]={b}"
            ));
        }
    }
    let mut shape: Vec<i64> = dims
        .lhs_batch
        .iter()
        .map(|&d| lhs.shape[d as usize])
        .collect();
    for (t, used) in [(lhs, &lhs_all), (rhs, &rhs_all)] {
        shape.extend(
            (0..t.rank() as i64)
                .filter(|d| !used.contains(d))
                .map(|d| t.shape[d as usize]),
        );
    }
    Ok(TensorType::new(shape, given_elem.unwrap_or(lhs.elem)))
}

/// One dimension of a windowed op (convolution, reduce_window, select_and_scatter).
struct WindowDim {
    base: i64,
    base_dilation: i64,
    padding: (i64, i64),
    window: i64,
    window_dilation: i64,
    stride: i64,
}

/// The output size of one window dimension (spec `num_windows`): the base is
/// dilated and padded, the window dilated; an empty window gives size 0, as
/// the spec says. A negative padded size has no meaning and is an error.
fn num_windows(what: &str, d: usize, w: WindowDim) -> Rule<i64> {
    let WindowDim {
        base,
        base_dilation,
        padding: (lo, hi),
        window,
        window_dilation,
        stride,
    } = w;
    // In i128: huge dilations or paddings must give an error, not an overflow.
    let (base, base_dilation, lo, hi) = (
        i128::from(base),
        i128::from(base_dilation),
        i128::from(lo),
        i128::from(hi),
    );
    let (window, window_dilation, stride) = (
        i128::from(window),
        i128::from(window_dilation),
        i128::from(stride),
    );
    let dilated_base = if base == 0 {
        0
    } else {
        (base - 1) * base_dilation + 1
    };
    let padded = lo + dilated_base + hi;
    if padded < 0 {
        return Err(format!(
            "{what} dimension {d}: padding ({lo}, {hi}) of dilated size {dilated_base} is negative"
        ));
    }
    let dilated_window = if window == 0 {
        0
    } else {
        (window - 1) * window_dilation + 1
    };
    if padded == 0 || dilated_window > padded {
        return Ok(0);
    }
    if stride <= 0 {
        return Err(format!(
            "{what} dimension {d}: stride {stride} must be positive"
        ));
    }
    fit_dim(d, (padded - dilated_window) / stride + 1)
}

/// A derived dimension size, refused when it does not fit a tensor type
/// (certgrad's types hold fewer than 2^63 elements).
fn fit_dim(d: usize, n: i128) -> Rule<i64> {
    i64::try_from(n).map_err(|_| format!("dimension {d} would be {n}, beyond 2^63 - 1"))
}

fn convolution_rule(
    a: &ConvAttrs,
    ops: &[TensorType],
    given_elem: Option<ElemType>,
) -> Rule<TensorType> {
    operand_count(ops, 2)?;
    let (lhs, rhs) = (&ops[0], &ops[1]);
    same_elem("lhs", lhs, "rhs", rhs)?;
    let dn = &a.dims;
    let n = lhs.rank();
    if n < 2 {
        return Err(format!("lhs rank {n} must be at least 2"));
    }
    if rhs.rank() != n {
        return Err(format!(
            "rhs rank {} does not match lhs rank {n}",
            rhs.rank()
        ));
    }
    let s = n - 2;
    attr_len("input spatial dimensions", dn.input_spatial.len(), s)?;
    attr_len("kernel spatial dimensions", dn.kernel_spatial.len(), s)?;
    attr_len("output spatial dimensions", dn.output_spatial.len(), s)?;
    attr_len("window_strides", a.window_strides.len(), s)?;
    attr_len("padding", a.padding.len(), s)?;
    attr_len("lhs_dilation", a.lhs_dilation.len(), s)?;
    attr_len("rhs_dilation", a.rhs_dilation.len(), s)?;
    attr_len("window_reversal", a.window_reversal.len(), s)?;
    all_positive("window_strides", &a.window_strides)?;
    all_positive("lhs_dilation", &a.lhs_dilation)?;
    all_positive("rhs_dilation", &a.rhs_dilation)?;
    let input_dims: Vec<i64> = [dn.input_batch, dn.input_feature]
        .into_iter()
        .chain(dn.input_spatial.iter().copied())
        .collect();
    let kernel_dims: Vec<i64> = [dn.kernel_input_feature, dn.kernel_output_feature]
        .into_iter()
        .chain(dn.kernel_spatial.iter().copied())
        .collect();
    let output_dims: Vec<i64> = [dn.output_batch, dn.output_feature]
        .into_iter()
        .chain(dn.output_spatial.iter().copied())
        .collect();
    unique_in_range("input dimension numbers", &input_dims, n)?;
    unique_in_range("kernel dimension numbers", &kernel_dims, n)?;
    unique_in_range("output dimension numbers", &output_dims, n)?;
    let (fgc, bgc) = (a.feature_group_count, a.batch_group_count);
    if fgc < 1 || bgc < 1 {
        return Err(format!(
            "feature_group_count {fgc} and batch_group_count {bgc} must be >= 1"
        ));
    }
    if fgc > 1 && bgc > 1 {
        return Err(format!(
            "feature_group_count {fgc} and batch_group_count {bgc} cannot both exceed 1"
        ));
    }
    let batch = lhs.shape[dn.input_batch as usize];
    let in_feat = lhs.shape[dn.input_feature as usize];
    let k_in = rhs.shape[dn.kernel_input_feature as usize];
    let k_out = rhs.shape[dn.kernel_output_feature as usize];
    if batch % bgc != 0 {
        return Err(format!(
            "input batch dimension lhs[{}]={batch} is not divisible by batch_group_count {bgc}",
            dn.input_batch
        ));
    }
    if in_feat % fgc != 0 {
        return Err(format!(
            "input feature dimension lhs[{}]={in_feat} is not divisible by feature_group_count {fgc}",
            dn.input_feature
        ));
    }
    if k_in * fgc != in_feat {
        return Err(format!(
            "kernel input feature dimension rhs[{}]={k_in} times feature_group_count {fgc} does not match input feature dimension lhs[{}]={in_feat}",
            dn.kernel_input_feature, dn.input_feature
        ));
    }
    for (name, g) in [("feature_group_count", fgc), ("batch_group_count", bgc)] {
        if k_out % g != 0 {
            return Err(format!(
                "kernel output feature dimension rhs[{}]={k_out} is not divisible by {name} {g}",
                dn.kernel_output_feature
            ));
        }
    }
    let mut shape = vec![0i64; n];
    shape[dn.output_batch as usize] = batch / bgc;
    shape[dn.output_feature as usize] = k_out;
    for i in 0..s {
        let ld = dn.input_spatial[i] as usize;
        let kd = dn.kernel_spatial[i] as usize;
        shape[dn.output_spatial[i] as usize] = num_windows(
            "spatial",
            i,
            WindowDim {
                base: lhs.shape[ld],
                base_dilation: a.lhs_dilation[i],
                padding: a.padding[i],
                window: rhs.shape[kd],
                window_dilation: a.rhs_dilation[i],
                stride: a.window_strides[i],
            },
        )?;
    }
    Ok(TensorType::new(shape, given_elem.unwrap_or(lhs.elem)))
}
