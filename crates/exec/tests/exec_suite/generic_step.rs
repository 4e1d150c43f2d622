//! Ops the plan compiler has no kernel for run as generic steps inside a
//! compiled plan (den's evaluator on that op alone), and the plan's outputs
//! are the evaluator's, bit for bit: iota, integer slice and concatenate, i1
//! add (the spec's or), integer dot_general and convolution, an integer
//! reduce, mixed with fused f32 work around them and native f32 steps: a pad
//! (its `-0` padding value must survive), a slice view and a concatenation.

use den::{eval_func, EvalOptions, Tensor, Value};
use exec::Plan;

const MODULE: &str = "func.func public @main(%x: tensor<4xf32>, %b: tensor<4xi1>, %n: tensor<2x3xi8>) -> (tensor<6xf32>, tensor<4xi1>, tensor<2x2xi8>, tensor<i32>, tensor<1x1x2xi32>, tensor<4xf32>, tensor<2x6xi32>, tensor<2x2xi32>) {
  %io = stablehlo.iota dim = 0 : tensor<4xf32>
  %s = stablehlo.add %x, %io : tensor<4xf32>
  %e = stablehlo.multiply %s, %s : tensor<4xf32>
  %sl = stablehlo.slice %e [1:3] : (tensor<4xf32>) -> tensor<2xf32>
  %z = stablehlo.constant dense<-0.000000e+00> : tensor<f32>
  %p = stablehlo.pad %sl, %z, low = [1], high = [1], interior = [0] : (tensor<2xf32>, tensor<f32>) -> tensor<4xf32>
  %c = stablehlo.concatenate %p, %sl, dim = 0 : (tensor<4xf32>, tensor<2xf32>) -> tensor<6xf32>
  %t = stablehlo.constant dense<[true, true, false, false]> : tensor<4xi1>
  %o = stablehlo.add %b, %t : tensor<4xi1>
  %d = stablehlo.dot_general %n, %n, contracting_dims = [1] x [1] : (tensor<2x3xi8>, tensor<2x3xi8>) -> tensor<2x2xi8>
  %w = stablehlo.convert %n : (tensor<2x3xi8>) -> tensor<2x3xi32>
  %zi = stablehlo.constant dense<0> : tensor<i32>
  %r = stablehlo.reduce(%w init: %zi) applies stablehlo.add across dimensions = [0, 1] : (tensor<2x3xi32>, tensor<i32>) -> tensor<i32>
  %l = stablehlo.reshape %w : (tensor<2x3xi32>) -> tensor<1x1x6xi32>
  %k = stablehlo.constant dense<[[[1, -1, 2, 0, 0]]]> : tensor<1x1x5xi32>
  %cv = stablehlo.convolution(%l, %k) dim_numbers = [b, f, 0]x[o, i, 0]->[b, f, 0], window = {stride = [1], pad = [[0, 0]], lhs_dilate = [1], rhs_dilate = [1]} {batch_group_count = 1 : i64, feature_group_count = 1 : i64} : (tensor<1x1x6xi32>, tensor<1x1x5xi32>) -> tensor<1x1x2xi32>
  %h = stablehlo.multiply %p, %p : tensor<4xf32>
  %ci = stablehlo.concatenate %w, %w, dim = 1 : (tensor<2x3xi32>, tensor<2x3xi32>) -> tensor<2x6xi32>
  %si = stablehlo.slice %w [0:2, 1:3] : (tensor<2x3xi32>) -> tensor<2x2xi32>
  return %c, %o, %d, %r, %cv, %h, %ci, %si : tensor<6xf32>, tensor<4xi1>, tensor<2x2xi8>, tensor<i32>, tensor<1x1x2xi32>, tensor<4xf32>, tensor<2x6xi32>, tensor<2x2xi32>
}
";

fn inputs() -> Vec<Value<f32>> {
    vec![
        Value::Float(
            Tensor::new(vec![4], vec![0.5, -1.25, 3.0, f32::NAN]),
            ir::ElemType::F32,
        ),
        Value::Int(Tensor::new(vec![4], vec![0, 1, 0, 1]), ir::ElemType::I1),
        Value::Int(
            Tensor::new(vec![2, 3], vec![100, -7, 3, 127, -128, 1]),
            ir::ElemType::I8,
        ),
    ]
}

fn bits(v: &Value<f32>) -> (ir::TensorType, Vec<u64>) {
    let data = match v {
        Value::Float(t, _) => t.data.iter().map(|x| u64::from(x.to_bits())).collect(),
        Value::Int(t, _) => t.data.iter().map(|&x| x as u64).collect(),
    };
    (v.ty(), data)
}

#[test]
fn ops_without_kernels_run_as_generic_steps_and_agree_bit_for_bit() {
    let m = ir::parse::parse_module(MODULE, "generic_step.mlir").unwrap();
    ir::verify_module(&m).unwrap();
    let mut plan = Plan::compile(&m, "main").unwrap();
    let listing = plan.listing().join("\n");
    // The plan is compiled (not the whole-function fallback) and holds
    // generic steps for the ops it has no kernel for.
    for op in [
        "generic(stablehlo.iota)",
        "generic(stablehlo.slice)",
        "generic(stablehlo.concatenate)",
        "generic(stablehlo.add)",
        "generic(stablehlo.dot_general)",
        "generic(stablehlo.convolution)",
    ] {
        assert!(listing.contains(op), "no {op} step:\n{listing}");
    }
    assert!(listing.contains("fused"), "{listing}");
    for op in ["pad", "concatenate"] {
        let native = listing
            .lines()
            .any(|l| l.contains(&format!(" stablehlo.{op} ")));
        assert!(native, "the f32 {op} is not a native step:\n{listing}");
    }
    let got = plan.run(inputs()).unwrap();
    let opts = EvalOptions {
        fast: false,
        ..Default::default()
    };
    let want = eval_func::<f32>(&m, "main", inputs(), &opts)
        .unwrap()
        .outputs;
    assert_eq!(got.len(), want.len());
    for (i, (g, w)) in got.iter().zip(&want).enumerate() {
        assert_eq!(bits(g), bits(w), "output {i}");
    }
    // The values the spec gives, by hand, for the integer and boolean outputs.
    let ints = |v: &Value<f32>| v.as_int().unwrap().data.clone();
    assert_eq!(ints(&got[1]), vec![1, 1, 0, 1], "i1 add is or");
    // Rows r0 = [100, -7, 3], r1 = [127, -128, 1]: r0·r0 = 10058 → 10058 mod
    // 256 = 74; r0·r1 = 12700 + 896 + 3 = 13599 → 31; r1·r1 = 16129 + 16384
    // + 1 = 32514 → 2.
    assert_eq!(ints(&got[2]), vec![74, 31, 31, 2]);
    assert_eq!(ints(&got[3]), vec![96]);
    // [100, -7, 3, 127, -128, 1] ⋆ [1, -1, 2, 0, 0]: 100 + 7 + 6 = 113;
    // -7 - 3 + 254 = 244.
    assert_eq!(ints(&got[4]), vec![113, 244]);
    assert_eq!(
        ints(&got[6]),
        vec![100, -7, 3, 100, -7, 3, 127, -128, 1, 127, -128, 1]
    );
    assert_eq!(ints(&got[7]), vec![-7, 3, -128, 1]);
}
