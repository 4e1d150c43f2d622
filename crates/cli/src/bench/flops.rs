//! The FLOP model of `certgrad bench`: how many floating-point operations one
//! call of a StableHLO function does ([`step_flops`]), the figure a step's
//! time is turned into GFLOP/s with.

use anyhow::{anyhow, bail, Result};
use ir::{Func, Module, OpKind, TensorType};

/// Floating-point operations of one call of `func`: 2 per multiply-add of every
/// `convolution` and `dot_general` (other ops are not counted), following
/// `func.call`s into their callees.
///
/// A convolution counts only the products whose input element is real: taps
/// that land on padding or on the holes of `lhs_dilation` are not work, and
/// counting them would credit a strided conv's input gradient with stride²
/// times its forward's FLOPs. With that rule a conv, its input gradient and its
/// weight gradient count the same (they form the same set of x·w products).
pub fn step_flops(module: &Module, func: &str) -> Result<u64> {
    let mut stack = Vec::new();
    func_flops(module, func, &mut stack)
}

fn func_flops(module: &Module, name: &str, stack: &mut Vec<String>) -> Result<u64> {
    if stack.iter().any(|s| s == name) {
        bail!(
            "@{name} calls itself (through {}); no FLOP count",
            stack.join(" → @")
        );
    }
    let f = module.func(name).ok_or_else(|| {
        let names: Vec<&str> = module.funcs.iter().map(|f| f.name.as_str()).collect();
        anyhow!("no function @{name} (functions: @{})", names.join(", @"))
    })?;
    stack.push(name.to_string());
    let types = f.value_types();
    let total = block_flops(module, f, &f.body, &types, stack)?;
    stack.pop();
    Ok(total)
}

fn block_flops(
    module: &Module,
    f: &Func,
    block: &ir::Block,
    types: &[TensorType],
    stack: &mut Vec<String>,
) -> Result<u64> {
    let mut total = 0u64;
    for op in &block.ops {
        let operand = |i: usize| -> Result<&TensorType> {
            op.operands
                .get(i)
                .and_then(|v| types.get(v.index()))
                .ok_or_else(|| anyhow!("@{}: {} lacks operand {i}", f.name, op.kind.name()))
        };
        total += match &op.kind {
            OpKind::DotGeneral { dims, .. } => {
                let lhs = operand(0)?;
                let contracted: u64 = dims
                    .lhs_contracting
                    .iter()
                    .map(|&d| dim(lhs, d))
                    .product::<Result<u64>>()?;
                2 * elements(&op.results[0].1) * contracted
            }
            OpKind::Convolution(attrs) => {
                conv_flops(attrs, operand(0)?, operand(1)?, &op.results[0].1)?
            }
            OpKind::Call { callee } => func_flops(module, callee, stack)?,
            _ => 0,
        };
        for r in &op.regions {
            total += block_flops(module, f, r, types, stack)?;
        }
    }
    Ok(total)
}

fn dim(t: &TensorType, d: i64) -> Result<u64> {
    t.shape
        .get(d as usize)
        .map(|&n| n.max(0) as u64)
        .ok_or_else(|| anyhow!("dimension {d} out of range for {t}"))
}

fn elements(t: &TensorType) -> u64 {
    t.shape.iter().map(|&n| n.max(0) as u64).product()
}

/// Multiply-adds of a convolution with real input elements (see [`step_flops`]), ×2.
fn conv_flops(
    a: &ir::ConvAttrs,
    lhs: &TensorType,
    rhs: &TensorType,
    out: &TensorType,
) -> Result<u64> {
    let d = &a.dims;
    let mut taps = 1u64;
    for i in 0..d.input_spatial.len() {
        let input = dim(lhs, d.input_spatial[i])? as i64;
        let kernel = dim(rhs, d.kernel_spatial[i])? as i64;
        let output = dim(out, d.output_spatial[i])? as i64;
        let get = |v: &[i64], default: i64| v.get(i).copied().unwrap_or(default);
        let lhs_dil = get(&a.lhs_dilation, 1).max(1);
        let rhs_dil = get(&a.rhs_dilation, 1).max(1);
        let stride = get(&a.window_strides, 1).max(1);
        let low = a.padding.get(i).map_or(0, |p| p.0);
        let dilated = if input == 0 {
            0
        } else {
            (input - 1) * lhs_dil + 1
        };
        let mut pairs = 0u64;
        for o in 0..output {
            for k in 0..kernel {
                let q = o * stride + k * rhs_dil - low;
                if q >= 0 && q < dilated && q % lhs_dil == 0 {
                    pairs += 1;
                }
            }
        }
        taps *= pairs;
    }
    let per_output_window = dim(rhs, d.kernel_input_feature)?;
    let outer = dim(out, d.output_batch)? * dim(out, d.output_feature)?;
    Ok(2 * outer * per_output_window * taps)
}

#[cfg(test)]
mod tests {
    use super::*;
    use ir::{ConvAttrs, DotDims, FuncBuilder, Visibility};

    /// One conv (NCHW 2×3×8×8, OIHW 4×3×3×3, stride 1, pad 1) and one matmul
    /// [5,7]·[7,6]: FLOPs counted by hand.
    #[test]
    fn step_flops_counts_a_conv_and_a_dot_by_hand() {
        let mut b = FuncBuilder::new("f", Visibility::Public);
        let x = b.param(TensorType::f32(vec![2, 3, 8, 8]));
        let w = b.param(TensorType::f32(vec![4, 3, 3, 3]));
        let p = b.param(TensorType::f32(vec![5, 7]));
        let q = b.param(TensorType::f32(vec![7, 6]));
        let mut attrs = ConvAttrs::plain2d();
        attrs.padding = vec![(1, 1), (1, 1)];
        let y = b.push1(OpKind::Convolution(attrs), &[x, w], None).unwrap();
        let dims = DotDims {
            lhs_contracting: vec![1],
            rhs_contracting: vec![0],
            ..Default::default()
        };
        let z = b
            .push1(
                OpKind::DotGeneral {
                    dims,
                    precision_config: None,
                },
                &[p, q],
                None,
            )
            .unwrap();
        let f = b.finish(&[y, z]).unwrap();
        let m = Module {
            funcs: vec![f],
            ..Default::default()
        };
        // Per spatial dim of size 8 with a 3-tap kernel and pad 1, the real
        // (output, tap) pairs are 3·8 − 2 = 22 (each border loses one tap).
        let conv = 2 * 2 * 4 * 3 * 22 * 22;
        let dot = 2 * 5 * 6 * 7;
        assert_eq!(step_flops(&m, "f").unwrap(), conv + dot);
        assert!(step_flops(&m, "g").is_err());
    }

    /// lhs_dilation 2 (a stride-2 conv's input gradient): the holes are not
    /// counted. Input 1×1×3×3 dilated to 5×5, kernel 1×1×3×3, pad 2 → 7×7 output;
    /// per dim each of the 3 real inputs meets all 3 taps once: 9 pairs.
    #[test]
    fn step_flops_skips_dilation_holes() {
        let mut b = FuncBuilder::new("f", Visibility::Public);
        let x = b.param(TensorType::f32(vec![1, 1, 3, 3]));
        let w = b.param(TensorType::f32(vec![1, 1, 3, 3]));
        let mut attrs = ConvAttrs::plain2d();
        attrs.padding = vec![(2, 2), (2, 2)];
        attrs.lhs_dilation = vec![2, 2];
        let y = b.push1(OpKind::Convolution(attrs), &[x, w], None).unwrap();
        assert_eq!(b.ty(y).shape, vec![1, 1, 7, 7]);
        let f = b.finish(&[y]).unwrap();
        let m = Module {
            funcs: vec![f],
            ..Default::default()
        };
        assert_eq!(step_flops(&m, "f").unwrap(), 2 * 9 * 9);
    }
}
