//! The structured ops (gather, scatter, dynamic_slice,
//! dynamic_update_slice, while, case, if, sort, map, optimization_barrier,
//! multi-operand reduce): each parsed from the text JAX prints (pretty form
//! where JAX has one, generic otherwise) and from the generic form, both giving
//! the same module; printed and parsed back unchanged; and bad attributes
//! rejected by inference with the dimension named.

use ir::parse::parse_module;
use ir::print::print_module;
use ir::*;

fn parse(src: &str) -> Module {
    let m = parse_module(src, "t.mlir").unwrap_or_else(|e| panic!("{e}\n{src}"));
    verify_module(&m).unwrap_or_else(|e| panic!("{e}\n{src}"));
    m
}

/// Print, parse back: the same module, and printing again gives the same text.
fn fixed_point(m: &Module) -> String {
    let text = print_module(m);
    let back = parse_module(&text, "printed.mlir").unwrap_or_else(|e| panic!("{e}\n{text}"));
    assert_eq!(&back, m, "print/parse changed the module:\n{text}");
    assert_eq!(print_module(&back), text);
    text
}

fn func(sig: &str, body: &str) -> String {
    format!("module {{\n  func.func public @main({sig} {{\n{body}\n  }}\n}}\n")
}

fn main_ops(m: &Module) -> &[Op] {
    &m.func("main").expect("main").body.ops
}

const TAKE: &str = r#"    %0 = "stablehlo.gather"(%arg0, %arg1) <{dimension_numbers = #stablehlo.gather<offset_dims = [1], collapsed_slice_dims = [0], start_index_map = [0], index_vector_dim = 1>, indices_are_sorted = false, slice_sizes = array<i64: 1, 3>}> : (tensor<4x3xf32>, tensor<2x1xi32>) -> tensor<2x3xf32>
    return %0 : tensor<2x3xf32>"#;

#[test]
fn gather_as_jax_prints_it() {
    let m = parse(&func(
        "%arg0: tensor<4x3xf32>, %arg1: tensor<2x1xi32>) -> tensor<2x3xf32>",
        TAKE,
    ));
    let OpKind::Gather(g) = &main_ops(&m)[0].kind else {
        panic!("not a gather");
    };
    assert_eq!(g.offset_dims, vec![1]);
    assert_eq!(g.collapsed_slice_dims, vec![0]);
    assert_eq!(g.start_index_map, vec![0]);
    assert!(g.operand_batching_dims.is_empty());
    assert_eq!(g.index_vector_dim, 1);
    assert_eq!(g.slice_sizes, vec![1, 3]);
    assert!(!g.indices_are_sorted);
    let text = fixed_point(&m);
    assert!(text.contains("#stablehlo.gather<offset_dims = [1], collapsed_slice_dims = [0], start_index_map = [0], index_vector_dim = 1>"), "{text}");
}

#[test]
fn gather_with_batching_dims_take_along_axis() {
    // jnp.take_along_axis(x, i, axis=1) as jax 0.10 lowers it.
    let body = r#"    %0 = "stablehlo.gather"(%arg0, %arg1) <{dimension_numbers = #stablehlo.gather<collapsed_slice_dims = [1], operand_batching_dims = [0], start_indices_batching_dims = [0], start_index_map = [1], index_vector_dim = 2>, indices_are_sorted = false, slice_sizes = array<i64: 1, 1>}> : (tensor<4x3xf32>, tensor<4x1x1xi32>) -> tensor<4x1xf32>
    return %0 : tensor<4x1xf32>"#;
    let m = parse(&func(
        "%arg0: tensor<4x3xf32>, %arg1: tensor<4x1x1xi32>) -> tensor<4x1xf32>",
        body,
    ));
    let OpKind::Gather(g) = &main_ops(&m)[0].kind else {
        panic!("not a gather");
    };
    assert_eq!(g.operand_batching_dims, vec![0]);
    assert_eq!(g.start_indices_batching_dims, vec![0]);
    assert!(g.offset_dims.is_empty());
    fixed_point(&m);
}

const SCATTER_ADD: &str = r#"    %0 = "stablehlo.scatter"(%arg0, %arg1, %arg2) <{indices_are_sorted = false, scatter_dimension_numbers = #stablehlo.scatter<update_window_dims = [1], inserted_window_dims = [0], scatter_dims_to_operand_dims = [0], index_vector_dim = 1>, unique_indices = false}> ({
    ^bb0(%a: tensor<f32>, %b: tensor<f32>):
      %1 = stablehlo.add %a, %b : tensor<f32>
      stablehlo.return %1 : tensor<f32>
    }) : (tensor<4x3xf32>, tensor<3x1xi32>, tensor<3x3xf32>) -> tensor<4x3xf32>
    return %0 : tensor<4x3xf32>"#;

#[test]
fn scatter_as_jax_prints_it() {
    let m = parse(&func(
        "%arg0: tensor<4x3xf32>, %arg1: tensor<3x1xi32>, %arg2: tensor<3x3xf32>) -> tensor<4x3xf32>",
        SCATTER_ADD,
    ));
    let op = &main_ops(&m)[0];
    let OpKind::Scatter(s) = &op.kind else {
        panic!("not a scatter");
    };
    assert_eq!(s.update_window_dims, vec![1]);
    assert_eq!(s.inserted_window_dims, vec![0]);
    assert_eq!(s.scatter_dims_to_operand_dims, vec![0]);
    assert_eq!(s.index_vector_dim, 1);
    assert!(!s.unique_indices);
    assert_eq!(op.regions[0].as_binary_reducer(), Some(BinaryOp::Add));
    fixed_point(&m);
}

#[test]
fn dynamic_slices_pretty_and_generic_agree() {
    let sig = "%arg0: tensor<4x3xf32>, %arg1: tensor<i32>, %arg2: tensor<2x3xf32>) -> (tensor<2x3xf32>, tensor<4x3xf32>)";
    let pretty = r#"    %c = stablehlo.constant dense<0> : tensor<i32>
    %0 = stablehlo.dynamic_slice %arg0, %arg1, %c, sizes = [2, 3] : (tensor<4x3xf32>, tensor<i32>, tensor<i32>) -> tensor<2x3xf32>
    %1 = stablehlo.dynamic_update_slice %arg0, %arg2, %arg1, %c : (tensor<4x3xf32>, tensor<2x3xf32>, tensor<i32>, tensor<i32>) -> tensor<4x3xf32>
    return %0, %1 : tensor<2x3xf32>, tensor<4x3xf32>"#;
    let generic = r#"    %c = "stablehlo.constant"() <{value = dense<0> : tensor<i32>}> : () -> tensor<i32>
    %0 = "stablehlo.dynamic_slice"(%arg0, %arg1, %c) <{slice_sizes = array<i64: 2, 3>}> : (tensor<4x3xf32>, tensor<i32>, tensor<i32>) -> tensor<2x3xf32>
    %1 = "stablehlo.dynamic_update_slice"(%arg0, %arg2, %arg1, %c) : (tensor<4x3xf32>, tensor<2x3xf32>, tensor<i32>, tensor<i32>) -> tensor<4x3xf32>
    "func.return"(%0, %1) : (tensor<2x3xf32>, tensor<4x3xf32>) -> ()"#;
    let a = parse(&func(sig, pretty));
    let b = parse(&func(sig, generic));
    assert_eq!(a, b);
    assert_eq!(
        main_ops(&a)[1].kind,
        OpKind::DynamicSlice { sizes: vec![2, 3] }
    );
    let text = fixed_point(&a);
    assert!(
        text.contains("stablehlo.dynamic_slice %arg0, %arg1, %c, sizes = [2, 3] :"),
        "{text}"
    );
    assert!(
        text.contains("stablehlo.dynamic_update_slice %arg0, %arg2, %arg1, %c :"),
        "{text}"
    );
}

const WHILE_PRETTY: &str = r#"    %c = stablehlo.constant dense<0> : tensor<i32>
    %0:2 = stablehlo.while(%iterArg = %c, %iterArg_0 = %arg0) : tensor<i32>, tensor<4x3xf32>
    cond {
      %c_1 = stablehlo.constant dense<3> : tensor<i32>
      %1 = stablehlo.compare  LT, %iterArg, %c_1,  SIGNED : (tensor<i32>, tensor<i32>) -> tensor<i1>
      stablehlo.return %1 : tensor<i1>
    } do {
      %1 = stablehlo.add %iterArg_0, %iterArg_0 : tensor<4x3xf32>
      %c_1 = stablehlo.constant dense<1> : tensor<i32>
      %2 = stablehlo.add %iterArg, %c_1 : tensor<i32>
      stablehlo.return %2, %1 : tensor<i32>, tensor<4x3xf32>
    }
    return %0#1 : tensor<4x3xf32>"#;

const WHILE_GENERIC: &str = r#"    %c = stablehlo.constant dense<0> : tensor<i32>
    %0:2 = "stablehlo.while"(%c, %arg0) ({
    ^bb0(%i: tensor<i32>, %x: tensor<4x3xf32>):
      %c_1 = stablehlo.constant dense<3> : tensor<i32>
      %1 = stablehlo.compare  LT, %i, %c_1,  SIGNED : (tensor<i32>, tensor<i32>) -> tensor<i1>
      stablehlo.return %1 : tensor<i1>
    }, {
    ^bb0(%i: tensor<i32>, %x: tensor<4x3xf32>):
      %1 = stablehlo.add %x, %x : tensor<4x3xf32>
      %c_1 = stablehlo.constant dense<1> : tensor<i32>
      %2 = stablehlo.add %i, %c_1 : tensor<i32>
      stablehlo.return %2, %1 : tensor<i32>, tensor<4x3xf32>
    }) : (tensor<i32>, tensor<4x3xf32>) -> (tensor<i32>, tensor<4x3xf32>)
    return %0#1 : tensor<4x3xf32>"#;

#[test]
fn while_pretty_and_generic_agree() {
    let sig = "%arg0: tensor<4x3xf32>) -> tensor<4x3xf32>";
    let a = parse(&func(sig, WHILE_PRETTY));
    let b = parse(&func(sig, WHILE_GENERIC));
    assert_eq!(a, b);
    let w = &main_ops(&a)[1];
    assert_eq!(w.kind, OpKind::While);
    assert_eq!(w.regions.len(), 2);
    assert_eq!(w.regions[0].args.len(), 2);
    let text = fixed_point(&a);
    assert!(
        text.contains(
            "stablehlo.while(%iterArg = %c, %iterArg_0 = %arg0) : tensor<i32>, tensor<4x3xf32>"
        ),
        "{text}"
    );
    assert!(text.contains("} do {"), "{text}");
}

#[test]
fn case_branches_return_captured_values() {
    // lax.switch as jax lowers it: branch 0 returns %arg1 from outside.
    let body = r#"    %0 = "stablehlo.case"(%arg0) ({
      stablehlo.return %arg1 : tensor<4x3xf32>
    }, {
      %1 = stablehlo.add %arg1, %arg1 : tensor<4x3xf32>
      stablehlo.return %1 : tensor<4x3xf32>
    }) : (tensor<i32>) -> tensor<4x3xf32>
    return %0 : tensor<4x3xf32>"#;
    let m = parse(&func(
        "%arg0: tensor<i32>, %arg1: tensor<4x3xf32>) -> tensor<4x3xf32>",
        body,
    ));
    assert_eq!(main_ops(&m)[0].kind, OpKind::Case);
    assert_eq!(main_ops(&m)[0].regions.len(), 2);
    fixed_point(&m);
}

#[test]
fn case_branch_of_the_wrong_type_is_rejected() {
    let body = r#"    %0 = "stablehlo.case"(%arg0) ({
      stablehlo.return %arg2 : tensor<3xf32>
    }, {
      stablehlo.return %arg1 : tensor<4x3xf32>
    }) : (tensor<i32>) -> tensor<4x3xf32>
    return %0 : tensor<4x3xf32>"#;
    let src = func(
        "%arg0: tensor<i32>, %arg1: tensor<4x3xf32>, %arg2: tensor<3xf32>) -> tensor<4x3xf32>",
        body,
    );
    let m = parse_module(&src, "t.mlir").expect("parses");
    let e = verify_module(&m).expect_err("branch 0 returns tensor<3xf32>");
    assert_eq!(e.op, "stablehlo.case");
    assert!(
        e.message.contains("region 0 returns (tensor<3xf32>)"),
        "{e}"
    );
}

#[test]
fn if_and_map_and_barrier() {
    let body = r#"    %0 = "stablehlo.if"(%arg0) ({
      stablehlo.return %arg1 : tensor<4xf32>
    }, {
      %1 = stablehlo.negate %arg1 : tensor<4xf32>
      stablehlo.return %1 : tensor<4xf32>
    }) : (tensor<i1>) -> tensor<4xf32>
    %2 = "stablehlo.map"(%0, %arg1) <{dimensions = array<i64: 0>}> ({
    ^bb0(%a: tensor<f32>, %b: tensor<f32>):
      %3 = stablehlo.multiply %a, %b : tensor<f32>
      stablehlo.return %3 : tensor<f32>
    }) : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
    %4:2 = stablehlo.optimization_barrier %2, %arg0 : tensor<4xf32>, tensor<i1>
    return %4#0 : tensor<4xf32>"#;
    let m = parse(&func(
        "%arg0: tensor<i1>, %arg1: tensor<4xf32>) -> tensor<4xf32>",
        body,
    ));
    let ops = main_ops(&m);
    assert_eq!(ops[0].kind, OpKind::If);
    assert_eq!(
        ops[1].kind,
        OpKind::Map {
            dimensions: vec![0]
        }
    );
    assert_eq!(ops[2].kind, OpKind::OptimizationBarrier);
    let text = fixed_point(&m);
    assert!(
        text.contains("stablehlo.optimization_barrier %2, %arg0 : tensor<4xf32>, tensor<i1>"),
        "{text}"
    );
    // The generic spelling of the barrier is the same op.
    let generic = body.replace(
        "%4:2 = stablehlo.optimization_barrier %2, %arg0 : tensor<4xf32>, tensor<i1>",
        "%4:2 = \"stablehlo.optimization_barrier\"(%2, %arg0) : (tensor<4xf32>, tensor<i1>) -> (tensor<4xf32>, tensor<i1>)",
    );
    assert_ne!(generic, body);
    assert_eq!(
        parse(&func(
            "%arg0: tensor<i1>, %arg1: tensor<4xf32>) -> tensor<4xf32>",
            &generic
        )),
        m
    );
}

#[test]
fn sort_two_operands_as_jax_prints_it() {
    let body = r#"    %0:2 = "stablehlo.sort"(%arg0, %arg1) <{dimension = 1 : i64, is_stable = true}> ({
    ^bb0(%arg2: tensor<f32>, %arg3: tensor<f32>, %arg4: tensor<i32>, %arg5: tensor<i32>):
      %1 = stablehlo.compare  LT, %arg2, %arg3,  TOTALORDER : (tensor<f32>, tensor<f32>) -> tensor<i1>
      stablehlo.return %1 : tensor<i1>
    }) : (tensor<4x3xf32>, tensor<4x3xi32>) -> (tensor<4x3xf32>, tensor<4x3xi32>)
    return %0#0, %0#1 : tensor<4x3xf32>, tensor<4x3xi32>"#;
    let m = parse(&func(
        "%arg0: tensor<4x3xf32>, %arg1: tensor<4x3xi32>) -> (tensor<4x3xf32>, tensor<4x3xi32>)",
        body,
    ));
    assert_eq!(
        main_ops(&m)[0].kind,
        OpKind::Sort {
            dimension: 1,
            is_stable: true
        }
    );
    let text = fixed_point(&m);
    assert!(
        text.contains("<{dimension = 1 : i64, is_stable = true}>"),
        "{text}"
    );
    // dimension defaults to -1 and is_stable to false.
    let bare = body.replace(" <{dimension = 1 : i64, is_stable = true}>", "");
    let m = parse(&func(
        "%arg0: tensor<4x3xf32>, %arg1: tensor<4x3xi32>) -> (tensor<4x3xf32>, tensor<4x3xi32>)",
        &bare,
    ));
    assert_eq!(
        main_ops(&m)[0].kind,
        OpKind::Sort {
            dimension: -1,
            is_stable: false
        }
    );
}

#[test]
fn argmax_reduce_with_two_operands_as_jax_prints_it() {
    let body = r#"    %0 = stablehlo.iota dim = 1 : tensor<4x3xi32>
    %cst = stablehlo.constant dense<0xFF800000> : tensor<f32>
    %c = stablehlo.constant dense<0> : tensor<i32>
    %1:2 = stablehlo.reduce(%arg0 init: %cst), (%0 init: %c) across dimensions = [1] : (tensor<4x3xf32>, tensor<4x3xi32>, tensor<f32>, tensor<i32>) -> (tensor<4xf32>, tensor<4xi32>)
     reducer(%arg1: tensor<f32>, %arg3: tensor<f32>) (%arg2: tensor<i32>, %arg4: tensor<i32>)  {
      %2 = stablehlo.compare  GT, %arg1, %arg3,  FLOAT : (tensor<f32>, tensor<f32>) -> tensor<i1>
      %3 = stablehlo.compare  NE, %arg1, %arg1,  FLOAT : (tensor<f32>, tensor<f32>) -> tensor<i1>
      %4 = stablehlo.or %2, %3 : tensor<i1>
      %5 = stablehlo.compare  EQ, %arg1, %arg3,  FLOAT : (tensor<f32>, tensor<f32>) -> tensor<i1>
      %6 = stablehlo.compare  LT, %arg2, %arg4,  SIGNED : (tensor<i32>, tensor<i32>) -> tensor<i1>
      %7 = stablehlo.and %5, %6 : tensor<i1>
      %8 = stablehlo.or %4, %7 : tensor<i1>
      %9 = stablehlo.select %4, %arg1, %arg3 : tensor<i1>, tensor<f32>
      %10 = stablehlo.select %8, %arg2, %arg4 : tensor<i1>, tensor<i32>
      stablehlo.return %9, %10 : tensor<f32>, tensor<i32>
    }
    return %1#1 : tensor<4xi32>"#;
    let m = parse(&func("%arg0: tensor<4x3xf32>) -> tensor<4xi32>", body));
    let r = &main_ops(&m)[3];
    assert_eq!(r.kind, OpKind::Reduce { dims: vec![1] });
    assert_eq!(r.operands.len(), 4);
    assert_eq!(r.results.len(), 2);
    fixed_point(&m);
}

#[test]
fn tuple_is_a_clear_not_supported() {
    let src = func(
        "%arg0: tensor<f32>) -> tensor<f32>",
        "    %0 = \"stablehlo.tuple\"(%arg0) : (tensor<f32>) -> tensor<f32>\n    return %0 : tensor<f32>",
    );
    let e = parse_module(&src, "t.mlir").expect_err("tuple");
    assert_eq!(e.found, "not supported: stablehlo.tuple");
    assert_eq!((e.line, e.col), (3, 10));
}

fn ty(shape: &[i64], e: ElemType) -> TensorType {
    TensorType::new(shape.to_vec(), e)
}

fn infer_err(kind: &OpKind, ops: &[TensorType], regions: &[Block]) -> String {
    match infer_result_types(kind, ops, regions, None) {
        Ok(t) => panic!("inferred {t:?} for {kind:?}"),
        Err(e) => e.to_string(),
    }
}

fn take_attrs() -> GatherAttrs {
    GatherAttrs {
        offset_dims: vec![1],
        collapsed_slice_dims: vec![0],
        start_index_map: vec![0],
        index_vector_dim: 1,
        slice_sizes: vec![1, 3],
        ..Default::default()
    }
}

#[test]
fn gather_infers_its_result_shape() {
    let x = ty(&[4, 3], ElemType::F32);
    let i = ty(&[5, 1], ElemType::I32);
    let t = infer_result_types(&OpKind::Gather(take_attrs()), &[x.clone(), i], &[], None)
        .expect("infers");
    assert_eq!(t, vec![ty(&[5, 3], ElemType::F32)]);
    // index_vector_dim == rank: every element of the indices is one start index.
    let mut a = take_attrs();
    a.index_vector_dim = 2;
    let i = ty(&[2, 5], ElemType::I64);
    let t = infer_result_types(&OpKind::Gather(a), &[x, i], &[], None).expect("infers");
    // offset_dims = [1] puts the slice between the two batch dimensions.
    assert_eq!(t, vec![ty(&[2, 3, 5], ElemType::F32)]);
}

#[test]
fn gather_rejects_bad_attributes() {
    let x = ty(&[4, 3], ElemType::F32);
    let i = ty(&[5, 1], ElemType::I32);
    let ops = [x.clone(), i.clone()];
    let mut a = take_attrs();
    a.slice_sizes = vec![1, 4];
    assert!(infer_err(&OpKind::Gather(a), &ops, &[]).contains("slice_sizes[1]=4 out of range"));
    let mut a = take_attrs();
    a.slice_sizes = vec![2, 3];
    assert!(infer_err(&OpKind::Gather(a), &ops, &[]).contains("slice_sizes[0]=2 must be 0 or 1"));
    let mut a = take_attrs();
    a.start_index_map = vec![0, 1];
    assert!(infer_err(&OpKind::Gather(a), &ops, &[]).contains("start_index_map has 2 entries"));
    let mut a = take_attrs();
    a.index_vector_dim = 3;
    assert!(infer_err(&OpKind::Gather(a), &ops, &[]).contains("index_vector_dim 3 out of range"));
    let mut a = take_attrs();
    a.offset_dims = vec![2];
    assert!(infer_err(&OpKind::Gather(a), &ops, &[]).contains("offset_dims[0]=2 out of range"));
    let f = ty(&[5, 1], ElemType::F32);
    assert!(infer_err(&OpKind::Gather(take_attrs()), &[x, f], &[]).contains("integer element type"));
}

#[test]
fn dynamic_slice_rejects_bad_sizes_and_indices() {
    let x = ty(&[4, 3], ElemType::F32);
    let s = ty(&[], ElemType::I32);
    let k = OpKind::DynamicSlice { sizes: vec![5, 3] };
    assert!(infer_err(&k, &[x.clone(), s.clone(), s.clone()], &[]).contains("slice_sizes[0]=5"));
    let k = OpKind::DynamicSlice { sizes: vec![2, 3] };
    assert!(infer_err(&k, &[x.clone(), s.clone()], &[]).contains("1 start index operand(s)"));
    let f = ty(&[], ElemType::F32);
    assert!(infer_err(&k, &[x.clone(), s.clone(), f], &[]).contains("must be an integer scalar"));
    let u = ty(&[5, 3], ElemType::F32);
    assert!(
        infer_err(&OpKind::DynamicUpdateSlice, &[x, u, s.clone(), s], &[])
            .contains("update dimension 0=5 exceeds")
    );
}

#[test]
fn scatter_rejects_mismatched_updates() {
    let m = parse(&func(
        "%arg0: tensor<4x3xf32>, %arg1: tensor<3x1xi32>, %arg2: tensor<3x3xf32>) -> tensor<4x3xf32>",
        SCATTER_ADD,
    ));
    let op = &main_ops(&m)[0];
    let x = ty(&[4, 3], ElemType::F32);
    let i = ty(&[3, 1], ElemType::I32);
    let u = ty(&[2, 3], ElemType::F32);
    assert!(infer_err(&op.kind, &[x.clone(), i.clone(), u], &op.regions)
        .contains("update dimension 0=2 does not match"));
    let u = ty(&[3, 4], ElemType::F32);
    assert!(infer_err(&op.kind, &[x.clone(), i.clone(), u], &op.regions)
        .contains("update window dimension 1=4 exceeds"));
    assert!(infer_err(&op.kind, &[x, i], &op.regions).contains("as many updates"));
}

#[test]
fn while_rejects_a_body_of_the_wrong_type() {
    let m = parse(&func(
        "%arg0: tensor<4x3xf32>) -> tensor<4x3xf32>",
        WHILE_GENERIC,
    ));
    let w = &main_ops(&m)[1];
    let e = infer_err(
        &w.kind,
        &[ty(&[], ElemType::I32), ty(&[4, 4], ElemType::F32)],
        &w.regions,
    );
    assert!(e.contains("cond region argument #1"), "{e}");
}

#[test]
fn sort_rejects_a_bad_dimension_and_comparator() {
    let x = ty(&[4, 3], ElemType::F32);
    let m = parse(&func(
        "%arg0: tensor<4x3xf32>) -> tensor<4x3xf32>",
        WHILE_GENERIC,
    ));
    let not_a_comparator = &main_ops(&m)[1].regions[1..];
    let k = OpKind::Sort {
        dimension: 2,
        is_stable: true,
    };
    assert!(infer_err(&k, std::slice::from_ref(&x), not_a_comparator)
        .contains("dimension 2 out of range"));
    let k = OpKind::Sort {
        dimension: 0,
        is_stable: true,
    };
    assert!(infer_err(&k, &[x], not_a_comparator).contains("comparator region"));
}

/// Every JAX export under tests/ir_suite/data/structured (written by
/// scripts/jax_structured_samples.py) parses, verifies and round-trips, and
/// holds the structured op it was written for.
#[test]
fn jax_exports_parse_verify_and_round_trip() {
    let dir = format!(
        "{}/tests/ir_suite/data/structured",
        env!("CARGO_MANIFEST_DIR")
    );
    let want = [
        ("take", "stablehlo.gather"),
        ("take_along_axis", "stablehlo.gather"),
        ("at_add", "stablehlo.scatter"),
        ("dynamic_slice", "stablehlo.dynamic_slice"),
        ("dynamic_update_slice", "stablehlo.dynamic_update_slice"),
        ("fori_loop", "stablehlo.while"),
        ("scan", "stablehlo.while"),
        ("sort", "stablehlo.sort"),
        ("argsort", "stablehlo.sort"),
        ("argmax", "stablehlo.reduce"),
        ("switch", "stablehlo.case"),
        ("cond", "stablehlo.case"),
        ("optimization_barrier", "stablehlo.optimization_barrier"),
        ("take_grad", "stablehlo.scatter"),
    ];
    for (name, op) in want {
        let path = format!("{dir}/{name}.mlir");
        let text = std::fs::read_to_string(&path).expect(&path);
        let m = parse_module(&text, &path).unwrap_or_else(|e| panic!("{e}"));
        verify_module(&m).unwrap_or_else(|e| panic!("{path}: {e}"));
        let found = m
            .funcs
            .iter()
            .any(|f| f.op_counts().iter().any(|(n, _)| *n == op));
        assert!(found, "{name}: no {op}");
        fixed_point(&m);
    }
}

#[test]
fn while_regions_returning_outer_values_are_checked_by_the_verifier() {
    // The cond region returns a captured value: fine when it is an i1,
    // rejected (with the region named) when it is not.
    let body = |pred: &str, pty: &str| {
        format!(
            r#"    %0 = "stablehlo.while"(%arg0) ({{
    ^bb0(%x: tensor<f32>):
      stablehlo.return {pred} : {pty}
    }}, {{
    ^bb0(%x: tensor<f32>):
      stablehlo.return %arg0 : tensor<f32>
    }}) : (tensor<f32>) -> tensor<f32>
    return %0 : tensor<f32>"#
        )
    };
    let sig = "%arg0: tensor<f32>, %arg1: tensor<i1>) -> tensor<f32>";
    parse(&func(sig, &body("%arg1", "tensor<i1>")));
    let src = func(sig, &body("%arg0", "tensor<f32>"));
    let m = parse_module(&src, "t.mlir").expect("parses");
    let e = verify_module(&m).expect_err("cond returns an f32");
    assert_eq!(e.op, "stablehlo.while");
    assert!(e.message.contains("region 0 returns (tensor<f32>)"), "{e}");
}
