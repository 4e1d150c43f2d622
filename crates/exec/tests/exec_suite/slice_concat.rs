//! `slice` is a strided view read by its consumers and `concatenate` a copy
//! step (no arithmetic), so the plan's outputs are the evaluator's bit for
//! bit: offset and stepped slices of computed, transposed and sliced values,
//! concatenation along every dimension of f32 and bf16 operands. A plan whose
//! slice starts one row off, or whose concatenation takes its operands in the
//! wrong order, gives outputs of the same shapes that the comparison rejects.

use super::agreement::random_inputs;
use den::{eval_func, EvalOptions, Value};
use exec::Plan;
use ir::{Module, TensorType};

/// `elem` is the float type (`ELEM` in `cat` too); `s0`/`cat` place the first slice's rows and the
/// first concatenation's operand order (the negative controls move them).
fn module(elem: &str, s0: &str, cat: &str) -> String {
    let cat = cat.replace("ELEM", elem);
    format!(
        "func.func public @main(%x: tensor<4x6x5x{elem}>, %y: tensor<4x2x5x{elem}>) -> (tensor<4x5x5x{elem}>, tensor<2x2x3x{elem}>, tensor<4x8x5x{elem}>, tensor<4x6x10x{elem}>, tensor<3x3x4x{elem}>, tensor<8x6x5x{elem}>) {{
  %e = stablehlo.multiply %x, %x : tensor<4x6x5x{elem}>
  %a = stablehlo.slice %e [{s0}, 0:5] : (tensor<4x6x5x{elem}>) -> tensor<4x3x5x{elem}>
  %b = stablehlo.slice %x [1:4:2, 0:6:3, 1:5:2] : (tensor<4x6x5x{elem}>) -> tensor<2x2x2x{elem}>
  %t = stablehlo.transpose %x, dims = [2, 1, 0] : (tensor<4x6x5x{elem}>) -> tensor<5x6x4x{elem}>
  %c = stablehlo.slice %t [1:4, 2:5, 0:4] : (tensor<5x6x4x{elem}>) -> tensor<3x3x4x{elem}>
  %bb = stablehlo.slice %b [0:2, 0:2, 0:1] : (tensor<2x2x2x{elem}>) -> tensor<2x2x1x{elem}>
  %bc = stablehlo.concatenate %b, %bb, dim = 2 : (tensor<2x2x2x{elem}>, tensor<2x2x1x{elem}>) -> tensor<2x2x3x{elem}>
  %y2 = stablehlo.multiply %y, %y : tensor<4x2x5x{elem}>
  %c1 = stablehlo.concatenate {cat} -> tensor<4x8x5x{elem}>
  %s1 = stablehlo.slice %c1 [0:4, 1:6, 0:5] : (tensor<4x8x5x{elem}>) -> tensor<4x5x5x{elem}>
  %c2 = stablehlo.concatenate %x, %e, dim = 2 : (tensor<4x6x5x{elem}>, tensor<4x6x5x{elem}>) -> tensor<4x6x10x{elem}>
  %c0 = stablehlo.concatenate %e, %x, dim = 0 : (tensor<4x6x5x{elem}>, tensor<4x6x5x{elem}>) -> tensor<8x6x5x{elem}>
  return %s1, %bc, %c1, %c2, %c, %c0 : tensor<4x5x5x{elem}>, tensor<2x2x3x{elem}>, tensor<4x8x5x{elem}>, tensor<4x6x10x{elem}>, tensor<3x3x4x{elem}>, tensor<8x6x5x{elem}>
}}
"
    )
}

const ROWS: &str = "0:4, 2:5";
const ORDER: &str =
    "%a, %y2, %a, dim = 1 : (tensor<4x3x5xELEM>, tensor<4x2x5xELEM>, tensor<4x3x5xELEM>)";

fn parse(text: &str) -> Module {
    let m = ir::parse::parse_module(text, "slice_concat.mlir").unwrap();
    ir::verify_module(&m).unwrap();
    m
}

fn inputs(m: &Module, seed: u64) -> Vec<Value<f32>> {
    let params: Vec<TensorType> = m.funcs[0].params.iter().map(|p| p.ty.clone()).collect();
    random_inputs(&params, seed)
}

fn bits(vs: &[Value<f32>]) -> Vec<Vec<u32>> {
    vs.iter()
        .map(|v| {
            v.as_float()
                .unwrap()
                .data
                .iter()
                .map(|x| x.to_bits())
                .collect()
        })
        .collect()
}

/// The plan's outputs of `planned` and the generic evaluator's of `reference`
/// on the same inputs, as bits.
fn outputs(planned: &Module, reference: &Module, seed: u64) -> (Vec<Vec<u32>>, Vec<Vec<u32>>) {
    let mut plan = Plan::compile(planned, "main").unwrap();
    let listing = plan.listing().join("\n");
    assert!(
        !listing.contains("generic("),
        "slice/concatenate left on the generic evaluator:\n{listing}"
    );
    assert!(listing.contains("stablehlo.concatenate"), "{listing}");
    let got = plan.run(inputs(planned, seed)).unwrap();
    let opts = EvalOptions {
        fast: false,
        ..Default::default()
    };
    let want = eval_func::<f32>(reference, "main", inputs(reference, seed), &opts)
        .unwrap()
        .outputs;
    (bits(&got), bits(&want))
}

#[test]
fn slices_and_concatenations_agree_bit_for_bit() {
    for elem in ["f32", "bf16"] {
        let m = parse(&module(elem, ROWS, ORDER));
        for seed in 0..3 {
            let (got, want) = outputs(&m, &m, seed);
            assert_eq!(got, want, "{elem}, seed {seed}");
        }
    }
}

#[test]
fn a_slice_one_row_off_or_a_swapped_concatenation_is_rejected() {
    let m = parse(&module("f32", ROWS, ORDER));
    for bug in [
        module("f32", "0:4, 3:6", ORDER),
        module(
            "f32",
            ROWS,
            "%a, %a, %y2, dim = 1 : (tensor<4x3x5xELEM>, tensor<4x3x5xELEM>, tensor<4x2x5xELEM>)",
        ),
    ] {
        let (got, want) = outputs(&parse(&bug), &m, 1);
        assert_eq!(got.len(), want.len());
        assert!(
            got.iter().zip(&want).all(|(g, w)| g.len() == w.len()),
            "the bug changed a shape"
        );
        assert_ne!(got, want, "the comparison accepted:\n{bug}");
    }
}
