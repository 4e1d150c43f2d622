//! Parser tests over hand-written JAX-style samples (tests/ir_suite/data/*.mlir): op
//! counts, attribute normalisation, print → parse fixed points, and errors with
//! exact positions.

use ir::parse::{parse_module, ParseError};
use ir::print::print_module;
use ir::*;

fn sample(name: &str) -> (String, Module) {
    let path = format!("{}/tests/ir_suite/data/{name}", env!("CARGO_MANIFEST_DIR"));
    let text = std::fs::read_to_string(&path).expect("sample file");
    let m = parse_module(&text, name).unwrap_or_else(|e| panic!("{e}"));
    (text, m)
}

/// Print, parse back: the same module, and printing again gives the same text.
fn assert_fixed_point(m: &Module) -> String {
    let text = print_module(m);
    let back = parse_module(&text, "printed.mlir").unwrap_or_else(|e| panic!("{e}\n{text}"));
    assert_eq!(&back, m, "print/parse changed the module:\n{text}");
    assert_eq!(print_module(&back), text);
    text
}

fn count(f: &Func, name: &str) -> usize {
    f.op_counts()
        .iter()
        .find(|(n, _)| *n == name)
        .map_or(0, |(_, c)| *c)
}

fn all_ops(b: &Block) -> Vec<&Op> {
    let mut out = Vec::new();
    for op in &b.ops {
        out.push(op);
        for r in &op.regions {
            out.extend(all_ops(r));
        }
    }
    out
}

fn err(src: &str) -> ParseError {
    match parse_module(src, "t.mlir") {
        Ok(m) => panic!("parsed unexpectedly: {m:?}"),
        Err(e) => e,
    }
}

#[test]
fn jax_mlp_export() {
    let (_, m) = sample("jax_mlp.mlir");
    assert_eq!(m.name.as_deref(), Some("jit_mlp_loss"));
    assert_eq!(
        m.attrs.as_deref(),
        Some("mhlo.num_partitions = 1 : i32, mhlo.num_replicas = 1 : i32")
    );
    assert_eq!(m.funcs.len(), 2);
    let main = m.func("main").expect("main");
    assert_eq!(main.visibility, Visibility::Public);
    assert_eq!(main.params.len(), 4);
    assert_eq!(
        main.params[0].attrs.as_deref(),
        Some("mhlo.sharding = \"{replicated}\"")
    );
    assert_eq!(main.params[1].attrs, None);
    assert_eq!(
        main.results[0].attrs.as_deref(),
        Some("jax.result_info = \"result\"")
    );
    assert_eq!(count(main, "stablehlo.dot_general"), 1);
    assert_eq!(count(main, "stablehlo.constant"), 2);
    assert_eq!(count(main, "func.call"), 1);
    // The `applies` reducer expands to a region with add + return.
    assert_eq!(count(main, "stablehlo.add"), 2);
    assert_eq!(count(main, "stablehlo.return"), 1);
    let dot = &main.body.ops[0];
    assert_eq!(
        dot.kind,
        OpKind::DotGeneral {
            dims: DotDims {
                lhs_batch: vec![],
                rhs_batch: vec![],
                lhs_contracting: vec![1],
                rhs_contracting: vec![0],
            },
            precision_config: Some(
                "[#stablehlo<precision DEFAULT>, #stablehlo<precision DEFAULT>]".into()
            ),
        }
    );
    assert_eq!(dot.loc.0, Some((3, 5)));
    let relu = m.func("relu").expect("relu");
    assert_eq!(relu.visibility, Visibility::Private);
    assert_eq!(relu.body.ops.len(), 4);
    assert!(main.body.ops.iter().all(|op| op.loc.0.is_some()));
    let text = assert_fixed_point(&m);
    assert!(text.contains("applies stablehlo.add across dimensions = [0, 1]"));
    assert!(text.contains("precision = [DEFAULT, DEFAULT]"));
}

#[test]
fn conv_bn_relu_maxpool_export() {
    let (_, m) = sample("conv_bn_relu_maxpool.mlir");
    let f = m.default_entry().expect("entry");
    assert_eq!(f.results.len(), 2);
    assert_eq!(count(f, "stablehlo.convolution"), 1);
    assert_eq!(count(f, "stablehlo.reduce"), 2);
    assert_eq!(count(f, "stablehlo.reduce_window"), 1);
    assert_eq!(count(f, "stablehlo.maximum"), 2);
    assert_eq!(count(f, "stablehlo.rsqrt"), 1);
    assert_eq!(count(f, "stablehlo.return"), 3);
    let conv = &f.body.ops[0];
    let OpKind::Convolution(c) = &conv.kind else {
        panic!("first op is the conv")
    };
    assert_eq!(c.padding, vec![(1, 1), (1, 1)]);
    assert_eq!(c.window_reversal, vec![false, false]);
    assert_eq!(c.dims, ConvDims::nchw(2));
    let pool = f
        .body
        .ops
        .iter()
        .find(|o| matches!(o.kind, OpKind::ReduceWindow(_)))
        .expect("reduce_window");
    assert_eq!(
        pool.kind,
        OpKind::ReduceWindow(WindowAttrs {
            window_dimensions: vec![1, 1, 3, 3],
            window_strides: vec![1, 1, 2, 2],
            base_dilations: vec![1; 4],
            window_dilations: vec![1; 4],
            padding: vec![(0, 0), (0, 0), (1, 1), (1, 1)],
        })
    );
    assert_eq!(pool.regions[0].as_binary_reducer(), Some(BinaryOp::Maximum));
    // -inf from hex, 1e-5 rounded to f32.
    let consts: Vec<&DenseData> = f
        .body
        .ops
        .iter()
        .filter_map(|o| match &o.kind {
            OpKind::Constant(d) => Some(d),
            _ => None,
        })
        .collect();
    assert!(consts.contains(&&DenseData::Float(vec![f64::NEG_INFINITY])));
    assert!(consts.contains(&&DenseData::Float(vec![1e-5f32 as f64])));
    let text = assert_fixed_point(&m);
    assert!(text.contains("dense<0xFF800000> : tensor<f32>"));
    assert!(text.contains("\"stablehlo.reduce_window\""));
}

#[test]
fn cifar_train_step_fragment() {
    let (_, m) = sample("cifar_train_step_fragment.mlir");
    let f = &m.funcs[0];
    assert_eq!(f.params.len(), 9);
    assert_eq!(f.results.len(), 4);
    assert_eq!(count(f, "stablehlo.select_and_scatter"), 1);
    assert_eq!(count(f, "stablehlo.all_reduce"), 1);
    assert_eq!(count(f, "stablehlo.convolution"), 2);
    assert_eq!(count(f, "stablehlo.reduce"), 3);
    let ops = all_ops(&f.body);
    let multi = ops
        .iter()
        .find(|o| matches!(o.kind, OpKind::Reduce { .. }) && o.results.len() == 2)
        .expect("two-result reduce");
    // reducer(%a0, %b0) (%a1, %b1): block args are [a0, a1, b0, b1].
    let body = &multi.regions[0];
    assert_eq!(body.ops[0].operands, vec![body.args[0].0, body.args[2].0]);
    assert_eq!(body.ops[1].operands, vec![body.args[1].0, body.args[3].0]);
    // `%s#0` is the reduce's first result.
    let log = ops
        .iter()
        .find(|o| o.kind == OpKind::Unary(UnaryOp::Log))
        .expect("log");
    assert_eq!(log.operands, vec![multi.results[0].0]);
    let ar = ops
        .iter()
        .find(|o| matches!(o.kind, OpKind::AllReduce { .. }))
        .expect("all_reduce");
    assert_eq!(
        ar.kind,
        OpKind::AllReduce {
            replica_groups: vec![vec![0, 1]],
            channel_id: Some((1, 1)),
            use_global_device_ids: true,
        }
    );
    let slice = ops
        .iter()
        .find(|o| matches!(o.kind, OpKind::Slice { .. }))
        .expect("slice");
    assert_eq!(
        slice.kind,
        OpKind::Slice {
            start: vec![0, 0],
            limit: vec![2, 8],
            strides: vec![1, 2],
        }
    );
    let mask = ops
        .iter()
        .find_map(|o| match &o.kind {
            OpKind::Constant(d) if o.results[0].1.elem == ElemType::I1 => Some(d.clone()),
            _ => None,
        })
        .expect("bool constant");
    assert_eq!(mask, DenseData::Int(vec![1, 0, 1, 0]));
    let text = assert_fixed_point(&m);
    assert!(text.contains("reducer(%"));
    assert!(text.contains("\"stablehlo.select_and_scatter\""));
    assert!(text.contains("use_global_device_ids"));
    assert!(text.contains("stablehlo.slice %"));
}

#[test]
fn generic_forms_normalise_like_pretty_forms() {
    let (_, m) = sample("generic_forms.mlir");
    assert_eq!(m.name, None);
    let f = m.func("generic").expect("generic");
    let ops = &f.body.ops;
    assert_eq!(ops.len(), 20);
    assert_eq!(ops[2].kind, OpKind::BroadcastInDim { dims: vec![1] });
    assert_eq!(
        ops[3].kind,
        OpKind::Compare {
            direction: CompareDirection::Lt,
            compare_type: Some(CompareType::Float),
        }
    );
    assert_eq!(
        ops[5].kind,
        OpKind::Transpose {
            permutation: vec![1, 0]
        }
    );
    assert_eq!(
        ops[9].kind,
        OpKind::Pad {
            low: vec![0, 1],
            high: vec![0, 0],
            interior: vec![1, 0],
        }
    );
    let OpKind::Convolution(c) = &ops[14].kind else {
        panic!("conv")
    };
    assert_eq!(c.window_strides, vec![2, 2]);
    assert_eq!(c.padding, vec![(1, 1), (1, 1)]);
    assert_eq!(c.lhs_dilation, vec![1, 1]);
    assert_eq!(c.window_reversal, vec![false, false]);
    assert_eq!((c.feature_group_count, c.batch_group_count), (1, 1));
    assert_eq!(c.precision_config, None);
    assert_eq!(ops[15].regions[0].as_binary_reducer(), Some(BinaryOp::Add));
    assert_eq!(
        ops[17].kind,
        OpKind::Call {
            callee: "id".into()
        }
    );
    assert_eq!(ops[18].kind, OpKind::Unary(UnaryOp::Erf));
    assert_eq!(ops[19].kind, OpKind::FuncReturn);
    let text = assert_fixed_point(&m);
    // The generic reduce prints in the compact pretty form.
    assert!(text.contains("applies stablehlo.add across dimensions = [1]"));
    assert!(text.contains("chlo.erf %"));
}

#[test]
fn generic_and_pretty_spellings_parse_equal() {
    let pretty = r#"func.func @f(%a: tensor<2xf32>, %b: tensor<2xf32>) -> tensor<2xi1> {
  %0 = stablehlo.add %a, %b : tensor<2xf32>
  %1 = stablehlo.compare  GE, %0, %b,  TOTALORDER : (tensor<2xf32>, tensor<2xf32>) -> tensor<2xi1>
  return %1 : tensor<2xi1>
}"#;
    let generic = r#"func.func @f(%x: tensor<2xf32>, %y: tensor<2xf32>) -> tensor<2xi1> {
  %s = "stablehlo.add"(%x, %y) : (tensor<2xf32>, tensor<2xf32>) -> tensor<2xf32>
  %c = "stablehlo.compare"(%s, %y) <{compare_type = #stablehlo<comparison_type TOTALORDER>, comparison_direction = #stablehlo<comparison_direction GE>}> : (tensor<2xf32>, tensor<2xf32>) -> tensor<2xi1>
  "func.return"(%c) : (tensor<2xi1>) -> ()
}"#;
    let a = parse_module(pretty, "p").expect("pretty");
    let b = parse_module(generic, "g").expect("generic");
    assert_eq!(a, b);
}

#[test]
fn dense_spellings() {
    let src = r#"func.func @f() -> tensor<2x2xf64> {
  %0 = stablehlo.constant dense<[[1.0, 2.5], [-3.0, 0x7FF0000000000000]]> : tensor<2x2xf64>
  %1 = stablehlo.constant dense<"0x0000803F00000040"> : tensor<2xf32>
  %2 = stablehlo.constant dense<255> : tensor<ui8>
  %3 = stablehlo.constant dense<0xFF80> : tensor<bf16>
  %4 = stablehlo.constant dense<> : tensor<0x3xf32>
  %5 = stablehlo.constant dense<[1, -2]> : tensor<2xi8>
  return %0 : tensor<2x2xf64>
}"#;
    let m = parse_module(src, "d").expect("parses");
    let kinds: Vec<&OpKind> = m.funcs[0].body.ops.iter().map(|o| &o.kind).collect();
    assert_eq!(
        *kinds[0],
        OpKind::Constant(DenseData::Float(vec![1.0, 2.5, -3.0, f64::INFINITY]))
    );
    assert_eq!(
        *kinds[1],
        OpKind::Constant(DenseData::Float(vec![1.0, 2.0]))
    );
    assert_eq!(*kinds[2], OpKind::Constant(DenseData::Int(vec![255])));
    assert_eq!(
        *kinds[3],
        OpKind::Constant(DenseData::Float(vec![f64::NEG_INFINITY]))
    );
    assert_eq!(*kinds[4], OpKind::Constant(DenseData::Float(vec![])));
    assert_eq!(*kinds[5], OpKind::Constant(DenseData::Int(vec![1, -2])));
    let text = assert_fixed_point(&m);
    assert!(text.contains("dense<0xFF80> : tensor<bf16>"), "{text}");
    assert!(text.contains("dense<[1.000000e+00, 2.000000e+00]> : tensor<2xf32>"));
}

#[test]
fn error_unknown_op() {
    let e = err("func.func @f(%a: tensor<f32>) -> tensor<f32> {\n  %0 = stablehlo.rng_uniform %a : tensor<f32>\n  return %0 : tensor<f32>\n}\n");
    assert_eq!((e.line, e.col), (2, 8));
    assert!(e.expected.starts_with("a supported op ("), "{}", e.expected);
    assert!(e.expected.contains("stablehlo.add"));
    assert_eq!(e.found, "stablehlo.rng_uniform");
    let g = err("func.func @f(%a: tensor<f32>) {\n  %0 = \"stablehlo.custom_call\"(%a) : (tensor<f32>) -> tensor<f32>\n}\n");
    assert_eq!(
        (g.line, g.col, g.found.as_str()),
        (2, 8, "stablehlo.custom_call")
    );
}

#[test]
fn error_bad_type() {
    let e = err("func.func @f(%a: tensor<2xf8>) {\n  return\n}\n");
    assert_eq!((e.line, e.col), (1, 27));
    assert!(
        e.expected.starts_with("an element type (f16, bf16, f32"),
        "{}",
        e.expected
    );
    assert_eq!(e.found, "f8");
    let d = err("func.func @f(%a: tensor<?x2xf32>) {\n  return\n}\n");
    assert_eq!(
        (d.line, d.col, d.expected.as_str(), d.found.as_str()),
        (1, 25, "a static dimension", "?")
    );
}

#[test]
fn error_missing_percent() {
    let e = err("func.func @f(%a: tensor<f32>) -> tensor<f32> {\n  %0 = stablehlo.add %a, a : tensor<f32>\n  return %0 : tensor<f32>\n}\n");
    // `%a, a` stops the operand list at the comma; the type colon is missing.
    assert_eq!((e.line, e.col), (2, 24));
    assert_eq!(e.expected, "':'");
    assert_eq!(e.found, ",");
    let u = err("func.func @f(%a: tensor<f32>) -> tensor<f32> {\n  %0 = stablehlo.add %a, %b : tensor<f32>\n  return %0 : tensor<f32>\n}\n");
    assert_eq!(
        (u.line, u.col, u.expected.as_str(), u.found.as_str()),
        (2, 26, "a defined value", "%b")
    );
}

#[test]
fn error_unterminated_region() {
    let src = "func.func @f(%a: tensor<2xf32>, %i: tensor<f32>) -> tensor<f32> {\n  %0 = \"stablehlo.reduce\"(%a, %i) ({\n  ^bb0(%x: tensor<f32>, %y: tensor<f32>):\n    %1 = stablehlo.add %x, %y : tensor<f32>\n";
    let e = err(src);
    assert_eq!((e.line, e.col), (5, 1));
    assert_eq!(e.expected, "'}' closing the block");
    assert_eq!(e.found, "end of input");
}

#[test]
fn error_wrong_operand_count() {
    let e = err("func.func @f(%a: tensor<f32>) -> tensor<f32> {\n  %0 = \"stablehlo.add\"(%a) : (tensor<f32>) -> tensor<f32>\n  return %0 : tensor<f32>\n}\n");
    assert_eq!((e.line, e.col), (2, 8));
    assert_eq!(e.expected, "2 operands for stablehlo.add");
    assert_eq!(e.found, "1 operand");
    let t = err("func.func @f(%a: tensor<f32>) -> tensor<f32> {\n  %0 = \"stablehlo.negate\"(%a) : (tensor<f32>, tensor<f32>) -> tensor<f32>\n  return %0 : tensor<f32>\n}\n");
    assert_eq!((t.line, t.col), (2, 33));
    assert_eq!(
        (t.expected.as_str(), t.found.as_str()),
        ("1 operand type (one per operand)", "2 types")
    );
    assert_eq!(
        t.to_string(),
        "t.mlir:2:33: expected 1 operand type (one per operand), found 2 types"
    );
}

#[test]
fn error_operand_type_mismatch_and_redefinition() {
    let e = err("func.func @f(%a: tensor<2xf32>) -> tensor<2xf32> {\n  %0 = stablehlo.abs %a : tensor<3xf32>\n  return %0 : tensor<2xf32>\n}\n");
    assert_eq!((e.line, e.col), (2, 27));
    assert_eq!(e.expected, "tensor<2xf32> (the type of operand #0)");
    assert_eq!(e.found, "tensor<3xf32>");
    let r = err("func.func @f(%a: tensor<f32>) -> tensor<f32> {\n  %a = stablehlo.abs %a : tensor<f32>\n  return %a : tensor<f32>\n}\n");
    assert_eq!(
        (r.line, r.col, r.expected.as_str()),
        (2, 3, "a fresh value name")
    );
}

#[test]
fn deep_nesting_is_an_error_not_a_crash() {
    let mut src = String::from("func.func @f(%a: tensor<f32>) -> tensor<f32> {\n");
    for _ in 0..200 {
        src.push_str("%r = \"stablehlo.all_reduce\"(%a) ({\n");
    }
    let e = err(&src);
    assert!(e.expected.contains("levels of nesting"), "{e}");
    let dense = format!(
        "func.func @f() {{\n %0 = stablehlo.constant dense<{}1.0{}> : tensor<f32>\n}}",
        "[".repeat(10_000),
        "]".repeat(10_000)
    );
    let e = err(&dense);
    assert!(e.expected.contains("levels of nesting"), "{e}");
}

#[test]
fn bare_functions_and_empty_input() {
    let m = parse_module(
        "func.func @id(%arg0: tensor<f32>) -> tensor<f32> {\n  return %arg0 : tensor<f32>\n}\n",
        "b",
    )
    .expect("bare func");
    assert_eq!(m.name, None);
    assert_eq!(m.funcs.len(), 1);
    let e = err("  \n// only a comment\n");
    assert_eq!((e.line, e.col, e.found.as_str()), (3, 1, "end of input"));
}
