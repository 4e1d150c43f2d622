//! Common-subexpression elimination of a function body before the plan is
//! built: an op equal to an earlier one (same op and attributes, same operands
//! after renaming, same result types, alpha-equal regions) is dropped and its
//! results renamed to the earlier op's. Every StableHLO op certgrad knows is a
//! pure function of its operands, so this changes no value.
//!
//! Why here: a rendered train step recomputes what its forward already holds —
//! the backward of batch-stat BN takes the batch mean and variance again from
//! the same pre-BN tensor (two full passes over it per BN layer) — because the
//! renderer writes each VJP from the forward's text, as the certificate checks
//! it. The executor, not the printed step, removes the repeats.

use std::collections::HashMap;
use std::fmt::Write;

use crate::rewrites::{Planted, Rewrites};
use ir::{Block, DenseData, Func, Op, OpKind, ValueId};

/// Constants larger than this (and not splats) are never merged: their key
/// would cost more than the copy they save.
const MAX_CONSTANT_KEY: usize = 64;

/// `f` with repeated top-level ops removed (unchanged when `rewrites` has
/// CSE off, a region reads a value from outside it, or the body has calls).
pub(crate) fn eliminate_common_subexpressions(f: &Func, rewrites: &Rewrites) -> Func {
    let blind = rewrites.plants(Planted::CseIgnoresTheOperator);
    let mut out = f.clone();
    if !rewrites.cse {
        return out;
    }
    if f.body.ops.iter().any(|op| {
        matches!(op.kind, OpKind::Call { .. }) || !op.regions.iter().all(crate::compile::closed)
    }) {
        return out;
    }
    let mut rename: HashMap<ValueId, ValueId> = HashMap::new();
    let mut seen: HashMap<String, Vec<ValueId>> = HashMap::new();
    let mut ops = Vec::with_capacity(f.body.ops.len());
    for op in &f.body.ops {
        let mut op = op.clone();
        for v in &mut op.operands {
            if let Some(&r) = rename.get(v) {
                *v = r;
            }
        }
        if let Some(k) = key(&op, blind) {
            if let Some(earlier) = seen.get(&k) {
                for (r, &e) in op.results.iter().zip(earlier) {
                    rename.insert(r.0, e);
                }
                continue;
            }
            seen.insert(k, op.results.iter().map(|r| r.0).collect());
        }
        ops.push(op);
    }
    out.body.ops = ops;
    out
}

/// The identity of an op's value, or None for ops that are never merged.
/// (`blind`: a planted bug, binary ops keyed without their operator.)
fn key(op: &Op, blind: bool) -> Option<String> {
    if op.results.is_empty() || !op.extra_attrs.is_empty() {
        return None;
    }
    let mut k = String::new();
    match &op.kind {
        OpKind::FuncReturn | OpKind::Return | OpKind::Call { .. } => return None,
        OpKind::Constant(data) => {
            if data.len() > MAX_CONSTANT_KEY {
                return None;
            }
            // Bits, not the decimal form: -0.0 and 0.0 stay apart.
            match data {
                DenseData::Float(v) => {
                    k.push_str("const f");
                    for x in v {
                        let _ = write!(k, " {:x}", x.to_bits());
                    }
                }
                DenseData::Int(v) => {
                    let _ = write!(k, "const i {v:?}");
                }
            }
        }
        OpKind::Binary(_) if blind => k.push_str("binary"),
        kind => {
            let _ = write!(k, "{kind:?}");
        }
    }
    let _ = write!(k, " ({:?})", op.operands);
    for r in &op.results {
        let _ = write!(k, " -> {:?}", r.1);
    }
    for region in &op.regions {
        k.push_str(" {");
        region_key(region, &mut k);
        k.push('}');
    }
    Some(k)
}

/// A region written with its own values numbered in order of definition, so
/// two regions that differ only in value names get the same text.
fn region_key(b: &Block, k: &mut String) {
    let mut local: HashMap<ValueId, usize> = HashMap::new();
    fn name(local: &HashMap<ValueId, usize>, v: ValueId) -> String {
        local
            .get(&v)
            .map_or(format!("outer{}", v.0), |i| format!("l{i}"))
    }
    fn walk(b: &Block, local: &mut HashMap<ValueId, usize>, k: &mut String) {
        for (a, t) in &b.args {
            let i = local.len();
            local.insert(*a, i);
            let _ = write!(k, " arg l{i}: {t:?};");
        }
        for op in &b.ops {
            let _ = write!(k, " {:?}(", op.kind);
            for v in &op.operands {
                let _ = write!(k, "{},", name(local, *v));
            }
            k.push(')');
            for region in &op.regions {
                k.push('{');
                walk(region, local, k);
                k.push('}');
            }
            for (r, t) in &op.results {
                let i = local.len();
                local.insert(*r, i);
                let _ = write!(k, " -> l{i}: {t:?};");
            }
        }
    }
    walk(b, &mut local, k);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> ir::Module {
        ir::parse::parse_module(text, "cse_test.mlir").expect("test module parses")
    }

    #[test]
    fn the_batch_mean_taken_twice_is_taken_once() {
        let m = parse(
            "func.func public @main(%x: tensor<2x3xf32>) -> (tensor<3xf32>, tensor<3xf32>) {
  %c0 = stablehlo.constant dense<0.000000e+00> : tensor<f32>
  %0 = stablehlo.reduce(%x init: %c0) applies stablehlo.add across dimensions = [0] : (tensor<2x3xf32>, tensor<f32>) -> tensor<3xf32>
  %c1 = stablehlo.constant dense<0.000000e+00> : tensor<f32>
  %1 = stablehlo.reduce(%x init: %c1) applies stablehlo.add across dimensions = [0] : (tensor<2x3xf32>, tensor<f32>) -> tensor<3xf32>
  %2 = stablehlo.multiply %0, %0 : tensor<3xf32>
  %3 = stablehlo.multiply %1, %1 : tensor<3xf32>
  return %2, %3 : tensor<3xf32>, tensor<3xf32>
}",
        );
        let f = eliminate_common_subexpressions(&m.funcs[0], &Rewrites::ALL);
        let kinds: Vec<String> = f.body.ops.iter().map(|o| format!("{:?}", o.kind)).collect();
        assert_eq!(f.body.ops.len(), 4, "{kinds:?}");
        let ret = f.body.ops.last().unwrap();
        assert_eq!(ret.operands[0], ret.operands[1]);
    }

    #[test]
    fn different_attributes_constants_or_signed_zeros_are_kept_apart() {
        let m = parse(
            "func.func public @main(%x: tensor<2x3xf32>) -> (tensor<3xf32>, tensor<2xf32>, tensor<f32>, tensor<f32>) {
  %c0 = stablehlo.constant dense<0.000000e+00> : tensor<f32>
  %cn = stablehlo.constant dense<-0.000000e+00> : tensor<f32>
  %0 = stablehlo.reduce(%x init: %c0) applies stablehlo.add across dimensions = [0] : (tensor<2x3xf32>, tensor<f32>) -> tensor<3xf32>
  %1 = stablehlo.reduce(%x init: %c0) applies stablehlo.add across dimensions = [1] : (tensor<2x3xf32>, tensor<f32>) -> tensor<2xf32>
  %2 = stablehlo.reduce(%x init: %c0) applies stablehlo.maximum across dimensions = [0, 1] : (tensor<2x3xf32>, tensor<f32>) -> tensor<f32>
  %3 = stablehlo.reduce(%x init: %cn) applies stablehlo.maximum across dimensions = [0, 1] : (tensor<2x3xf32>, tensor<f32>) -> tensor<f32>
  return %0, %1, %2, %3 : tensor<3xf32>, tensor<2xf32>, tensor<f32>, tensor<f32>
}",
        );
        let f = eliminate_common_subexpressions(&m.funcs[0], &Rewrites::ALL);
        assert_eq!(f.body.ops.len(), m.funcs[0].body.ops.len());
    }
}
