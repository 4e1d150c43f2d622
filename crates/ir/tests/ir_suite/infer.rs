//! Result-type inference rules, one group per op family, with the error text
//! each rejection must carry (op name and the mismatching dimension).

// Operand lists written as `&[x.clone()]` read like the op's operand list.
#![allow(clippy::cloned_ref_to_slice_refs)]

use ir::*;

fn f32t(shape: &[i64]) -> TensorType {
    TensorType::f32(shape.to_vec())
}

fn t(shape: &[i64], elem: ElemType) -> TensorType {
    TensorType::new(shape.to_vec(), elem)
}

fn ok(kind: OpKind, ops: &[TensorType], given: Option<&[TensorType]>) -> Vec<TensorType> {
    infer_result_types(&kind, ops, &[], given).unwrap_or_else(|e| panic!("{e}"))
}

fn ok1(kind: OpKind, ops: &[TensorType]) -> TensorType {
    ok(kind, ops, None).remove(0)
}

fn err(kind: OpKind, ops: &[TensorType], given: Option<&[TensorType]>) -> String {
    match infer_result_types(&kind, ops, &[], given) {
        Ok(r) => panic!("expected an error, inferred {r:?}"),
        Err(e) => e.to_string(),
    }
}

fn err_regions(kind: OpKind, ops: &[TensorType], regions: &[Block]) -> String {
    match infer_result_types(&kind, ops, regions, None) {
        Ok(r) => panic!("expected an error, inferred {r:?}"),
        Err(e) => e.to_string(),
    }
}

/// A reducer region built outside any function, for region-taking ops.
fn region(op: BinaryOp, elem: ElemType) -> Block {
    let mut b = FuncBuilder::new("scratch", Visibility::Private);
    b.binary_region(op, elem).unwrap()
}

#[test]
fn elementwise_unary_and_binary() {
    let x = f32t(&[2, 3]);
    assert_eq!(ok1(OpKind::Unary(UnaryOp::Tanh), &[x.clone()]), x);
    assert_eq!(
        ok1(OpKind::Binary(BinaryOp::Add), &[x.clone(), x.clone()]),
        x
    );
    assert_eq!(
        err(
            OpKind::Binary(BinaryOp::Add),
            &[x.clone(), f32t(&[2, 4])],
            None
        ),
        "stablehlo.add: lhs dimension 1=3 does not match rhs dimension 1=4"
    );
    assert_eq!(
        err(
            OpKind::Binary(BinaryOp::Multiply),
            &[x.clone(), x.with_elem(ElemType::BF16)],
            None
        ),
        "stablehlo.multiply: lhs element type f32 does not match rhs element type bf16"
    );
    // Logical ops are integer/boolean only; float-only unaries reject integers.
    assert!(
        err(OpKind::Binary(BinaryOp::And), &[x.clone(), x.clone()], None)
            .starts_with("stablehlo.and: operand element type f32")
    );
    let b = x.with_elem(ElemType::I1);
    assert_eq!(
        ok1(OpKind::Binary(BinaryOp::Xor), &[b.clone(), b.clone()]),
        b
    );
    assert_eq!(ok1(OpKind::Unary(UnaryOp::Not), &[b.clone()]), b);
    assert!(err(
        OpKind::Unary(UnaryOp::Log),
        &[x.with_elem(ElemType::I32)],
        None
    )
    .starts_with("stablehlo.log: operand element type i32"));
    assert!(err(OpKind::Unary(UnaryOp::Not), &[x.clone()], None).starts_with("stablehlo.not"));
    // A wrong stated result names the dimension.
    assert_eq!(
        err(
            OpKind::Unary(UnaryOp::Negate),
            &[x.clone()],
            Some(&[f32t(&[2, 5])])
        ),
        "stablehlo.negate: result #0 type tensor<2x5xf32> does not match inferred \
         tensor<2x3xf32>: dimension 1 is 5, expected 3"
    );
    assert!(err(OpKind::Unary(UnaryOp::Negate), &[], None).contains("expected 1 operand(s)"));
}

#[test]
fn compare_select_clamp() {
    let x = f32t(&[4]);
    let cmp = |ct| OpKind::Compare {
        direction: CompareDirection::Lt,
        compare_type: ct,
    };
    assert_eq!(
        ok1(cmp(None), &[x.clone(), x.clone()]),
        t(&[4], ElemType::I1)
    );
    assert_eq!(
        ok1(cmp(Some(CompareType::TotalOrder)), &[x.clone(), x.clone()]),
        t(&[4], ElemType::I1)
    );
    assert_eq!(
        err(
            cmp(Some(CompareType::Signed)),
            &[x.clone(), x.clone()],
            None
        ),
        "stablehlo.compare: compare_type SIGNED does not fit element type f32"
    );
    let u = t(&[4], ElemType::UI32);
    ok1(cmp(Some(CompareType::Unsigned)), &[u.clone(), u]);

    let p = t(&[4], ElemType::I1);
    let ps = TensorType::scalar(ElemType::I1);
    assert_eq!(ok1(OpKind::Select, &[p.clone(), x.clone(), x.clone()]), x);
    assert_eq!(ok1(OpKind::Select, &[ps, x.clone(), x.clone()]), x);
    assert_eq!(
        err(
            OpKind::Select,
            &[t(&[5], ElemType::I1), x.clone(), x.clone()],
            None
        ),
        "stablehlo.select: pred dimension 0=5 does not match on_true dimension 0=4"
    );
    assert_eq!(
        err(OpKind::Select, &[x.clone(), x.clone(), x.clone()], None),
        "stablehlo.select: pred element type f32 must be i1"
    );

    let s = TensorType::scalar(ElemType::F32);
    assert_eq!(ok1(OpKind::Clamp, &[s.clone(), x.clone(), s.clone()]), x);
    assert_eq!(ok1(OpKind::Clamp, &[x.clone(), x.clone(), s]), x);
    assert_eq!(
        err(OpKind::Clamp, &[f32t(&[3]), x.clone(), x.clone()], None),
        "stablehlo.clamp: min dimension 0=3 does not match operand dimension 0=4"
    );
}

#[test]
fn stated_result_ops() {
    let x = f32t(&[2, 3]);
    // convert: any element type, same shape.
    let y = x.with_elem(ElemType::BF16);
    assert_eq!(
        ok(OpKind::Convert, &[x.clone()], Some(&[y.clone()])),
        vec![y]
    );
    assert_eq!(
        err(OpKind::Convert, &[x.clone()], None),
        "stablehlo.convert: result type must be given"
    );
    // reshape: element count preserved.
    ok(OpKind::Reshape, &[x.clone()], Some(&[f32t(&[6])]));
    assert_eq!(
        err(OpKind::Reshape, &[x.clone()], Some(&[f32t(&[7])])),
        "stablehlo.reshape: result tensor<7xf32> has 7 elements, operand tensor<2x3xf32> has 6"
    );
    // iota: dimension in range of the result.
    ok(
        OpKind::Iota { dim: 1 },
        &[],
        Some(&[t(&[2, 3], ElemType::I32)]),
    );
    assert_eq!(
        err(OpKind::Iota { dim: 2 }, &[], Some(&[f32t(&[2, 3])])),
        "stablehlo.iota: iota_dimension 2 out of range for result of rank 2"
    );
    // constant: data length, element kind and exact representability.
    let c = |d| OpKind::Constant(d);
    ok(c(DenseData::Float(vec![1.0])), &[], Some(&[x.clone()]));
    ok(
        c(DenseData::Float(vec![f64::NAN, f64::INFINITY, -0.0])),
        &[],
        Some(&[f32t(&[3])]),
    );
    assert_eq!(
        err(c(DenseData::Float(vec![1.0, 2.0])), &[], Some(&[x.clone()])),
        "stablehlo.constant: dense data has 2 values, result tensor<2x3xf32> has 6 elements"
    );
    assert!(err(c(DenseData::Float(vec![0.1])), &[], Some(&[f32t(&[])]))
        .contains("not exactly representable in f32"));
    assert!(err(
        c(DenseData::Float(vec![1.0 + 1.0 / 256.0])),
        &[],
        Some(&[t(&[], ElemType::BF16)])
    )
    .contains("not exactly representable in bf16"));
    assert_eq!(
        err(
            c(DenseData::Int(vec![2])),
            &[],
            Some(&[t(&[], ElemType::I1)])
        ),
        "stablehlo.constant: value [0]=2 out of range for i1"
    );
    assert_eq!(
        err(c(DenseData::Int(vec![1])), &[], Some(&[f32t(&[])])),
        "stablehlo.constant: integer data for element type f32"
    );
    // func.call: the stated types stand (the verifier checks the callee).
    let call = OpKind::Call { callee: "f".into() };
    assert_eq!(ok(call.clone(), &[x.clone()], Some(&[])), vec![]);
    assert!(err(call, &[x.clone()], None).contains("result types must be given"));
    // Terminators have no results.
    assert_eq!(ok(OpKind::FuncReturn, &[x.clone()], None), vec![]);
    assert!(err(OpKind::Return, &[x.clone()], Some(&[x])).contains("no results"));
}

#[test]
fn broadcast_in_dim() {
    let b = |dims: &[i64]| OpKind::BroadcastInDim {
        dims: dims.to_vec(),
    };
    let x = f32t(&[3, 1]);
    ok(b(&[1, 2]), &[x.clone()], Some(&[f32t(&[2, 3, 5])]));
    assert_eq!(
        err(b(&[0, 2]), &[x.clone()], Some(&[f32t(&[2, 3, 5])])),
        "stablehlo.broadcast_in_dim: operand dimension 0=3 does not match result dimension 0=2"
    );
    assert_eq!(
        err(b(&[1, 1]), &[x.clone()], Some(&[f32t(&[2, 3, 5])])),
        "stablehlo.broadcast_in_dim: broadcast_dimensions[1]=1 is repeated"
    );
    assert_eq!(
        err(b(&[1, 3]), &[x.clone()], Some(&[f32t(&[2, 3, 5])])),
        "stablehlo.broadcast_in_dim: broadcast_dimensions[1]=3 out of range for rank 3"
    );
    assert_eq!(
        err(b(&[1]), &[x], Some(&[f32t(&[2, 3, 5])])),
        "stablehlo.broadcast_in_dim: broadcast_dimensions has 1 entries, expected 2"
    );
}

#[test]
fn transpose_reverse_slice() {
    let x = f32t(&[2, 3, 4]);
    assert_eq!(
        ok1(
            OpKind::Transpose {
                permutation: vec![2, 0, 1]
            },
            &[x.clone()]
        ),
        f32t(&[4, 2, 3])
    );
    assert_eq!(
        err(
            OpKind::Transpose {
                permutation: vec![0, 0, 1]
            },
            &[x.clone()],
            None
        ),
        "stablehlo.transpose: permutation[1]=0 is repeated"
    );
    assert_eq!(
        ok1(OpKind::Reverse { dims: vec![0, 2] }, &[x.clone()]),
        x.clone()
    );
    assert!(err(OpKind::Reverse { dims: vec![3] }, &[x.clone()], None)
        .contains("dimensions[0]=3 out of range for rank 3"));
    let slice = |start: &[i64], limit: &[i64], strides: &[i64]| OpKind::Slice {
        start: start.to_vec(),
        limit: limit.to_vec(),
        strides: strides.to_vec(),
    };
    // ceil((limit - start) / stride): (2-0)/2=1, (3-1)/1=2, ceil((4-0)/3)=2.
    assert_eq!(
        ok1(slice(&[0, 1, 0], &[2, 3, 4], &[2, 1, 3]), &[x.clone()]),
        f32t(&[1, 2, 2])
    );
    assert_eq!(
        ok1(slice(&[1, 3, 0], &[1, 3, 4], &[1, 1, 1]), &[x.clone()]),
        f32t(&[0, 0, 4])
    );
    assert_eq!(
        err(
            slice(&[0, 2, 0], &[2, 1, 4], &[1, 1, 1]),
            &[x.clone()],
            None
        ),
        "stablehlo.slice: dimension 1: need 0 <= start 2 <= limit 1 <= size 3"
    );
    assert_eq!(
        err(
            slice(&[0, 0, 0], &[2, 3, 5], &[1, 1, 1]),
            &[x.clone()],
            None
        ),
        "stablehlo.slice: dimension 2: need 0 <= start 0 <= limit 5 <= size 4"
    );
    assert_eq!(
        err(slice(&[0, 0, 0], &[2, 3, 4], &[1, 0, 1]), &[x], None),
        "stablehlo.slice: strides[1]=0 must be >= 1"
    );
}

#[test]
fn pad_and_concatenate() {
    let pad = |low: &[i64], high: &[i64], interior: &[i64]| OpKind::Pad {
        low: low.to_vec(),
        high: high.to_vec(),
        interior: interior.to_vec(),
    };
    let x = f32t(&[3, 2, 0]);
    let s = TensorType::scalar(ElemType::F32);
    // dim 0: 1 + 2 + 3 + 2*1 = 8; dim 1: -1 + 0 + 2 + 1*2 = 3; dim 2 (size 0): 1 + 1 = 2.
    assert_eq!(
        ok1(
            pad(&[1, -1, 1], &[2, 0, 1], &[1, 2, 5]),
            &[x.clone(), s.clone()]
        ),
        f32t(&[8, 3, 2])
    );
    assert_eq!(
        err(
            pad(&[0, -3, 0], &[0, 0, 0], &[0, 0, 0]),
            &[x.clone(), s.clone()],
            None
        ),
        "stablehlo.pad: dimension 1: low -3 + high 0 + padded size 2 is negative"
    );
    assert_eq!(
        err(
            pad(&[0, 0, 0], &[0, 0, 0], &[0, -1, 0]),
            &[x.clone(), s.clone()],
            None
        ),
        "stablehlo.pad: interior_padding[1]=-1 is negative"
    );
    assert_eq!(
        err(
            pad(&[0, 0, 0], &[0, 0, 0], &[0, 0, 0]),
            &[x.clone(), f32t(&[1])],
            None
        ),
        "stablehlo.pad: padding value tensor<1xf32> must be a scalar"
    );

    let a = f32t(&[2, 3]);
    let cat = |dim| OpKind::Concatenate { dim };
    assert_eq!(
        ok1(cat(1), &[a.clone(), f32t(&[2, 1]), a.clone()]),
        f32t(&[2, 7])
    );
    assert_eq!(
        err(cat(1), &[a.clone(), f32t(&[4, 1])], None),
        "stablehlo.concatenate: operand #1 dimension 0=4 does not match operand #0 dimension 0=2"
    );
    assert_eq!(
        err(cat(2), &[a], None),
        "stablehlo.concatenate: dimension 2 out of range for rank 2"
    );
}

#[test]
fn dot_general() {
    let dot = |lb: &[i64], rb: &[i64], lc: &[i64], rc: &[i64]| OpKind::DotGeneral {
        dims: DotDims {
            lhs_batch: lb.to_vec(),
            rhs_batch: rb.to_vec(),
            lhs_contracting: lc.to_vec(),
            rhs_contracting: rc.to_vec(),
        },
        precision_config: None,
    };
    // Plain matmul.
    assert_eq!(
        ok1(dot(&[], &[], &[1], &[0]), &[f32t(&[2, 3]), f32t(&[3, 4])]),
        f32t(&[2, 4])
    );
    // Batch dims first, then lhs free, then rhs free; dims in any position.
    assert_eq!(
        ok1(
            dot(&[2], &[0], &[0], &[2]),
            &[f32t(&[3, 7, 5]), f32t(&[5, 6, 3])]
        ),
        f32t(&[5, 7, 6])
    );
    assert_eq!(
        err(
            dot(&[], &[], &[1], &[0]),
            &[f32t(&[2, 3]), f32t(&[4, 4])],
            None
        ),
        "stablehlo.dot_general: contracting dimension lhs[1]=3 does not match rhs[0]=4"
    );
    assert_eq!(
        err(
            dot(&[0], &[0], &[2], &[1]),
            &[f32t(&[2, 3, 4]), f32t(&[5, 4, 6])],
            None
        ),
        "stablehlo.dot_general: batching dimension lhs[0]=2 does not match rhs[0]=5"
    );
    assert!(err(
        dot(&[0], &[0], &[0], &[1]),
        &[f32t(&[2, 3]), f32t(&[2, 2])],
        None
    )
    .contains("lhs batching+contracting dimensions[1]=0 is repeated"));
    // bf16 operands may state an f32 result; the shape is still checked.
    let bf = |s: &[i64]| t(s, ElemType::BF16);
    assert_eq!(
        ok(
            dot(&[], &[], &[1], &[0]),
            &[bf(&[2, 3]), bf(&[3, 4])],
            Some(&[f32t(&[2, 4])])
        ),
        vec![f32t(&[2, 4])]
    );
    assert_eq!(
        ok1(dot(&[], &[], &[1], &[0]), &[bf(&[2, 3]), bf(&[3, 4])]),
        bf(&[2, 4])
    );
    assert!(err(
        dot(&[], &[], &[1], &[0]),
        &[bf(&[2, 3]), bf(&[3, 4])],
        Some(&[f32t(&[4, 2])])
    )
    .contains("dimension 0 is 4, expected 2"));
}

fn conv(
    strides: &[i64],
    padding: &[(i64, i64)],
    lhs_dil: &[i64],
    rhs_dil: &[i64],
    dims: ConvDims,
    fgc: i64,
    bgc: i64,
) -> OpKind {
    OpKind::Convolution(ConvAttrs {
        window_strides: strides.to_vec(),
        padding: padding.to_vec(),
        lhs_dilation: lhs_dil.to_vec(),
        rhs_dilation: rhs_dil.to_vec(),
        window_reversal: vec![false; strides.len()],
        dims,
        feature_group_count: fgc,
        batch_group_count: bgc,
        precision_config: None,
    })
}

#[test]
fn convolution_shapes() {
    let plain = OpKind::Convolution(ConvAttrs::plain2d());
    // 3x3 "valid" conv on 8x8, 4 in -> 6 out features.
    assert_eq!(
        ok1(plain.clone(), &[f32t(&[2, 4, 8, 8]), f32t(&[6, 4, 3, 3])]),
        f32t(&[2, 6, 6, 6])
    );
    // Stride 2, pad (1,1), lhs dilation 2, rhs dilation 2 on H; plain on W.
    // H: dilated input (5-1)*2+1=9, padded 11, dilated window (3-1)*2+1=5,
    //    (11-5)/2+1 = 4.  W: pad (-1, 0) crops: 5-1=4, window 2, stride 1 -> 3.
    let c = conv(
        &[2, 1],
        &[(1, 1), (-1, 0)],
        &[2, 1],
        &[2, 1],
        ConvDims::nchw(2),
        1,
        1,
    );
    assert_eq!(
        ok1(c, &[f32t(&[1, 1, 5, 5]), f32t(&[1, 1, 3, 2])]),
        f32t(&[1, 1, 4, 3])
    );
    // NHWC / HWIO -> NHWC with feature groups: 4 input features in 2 groups,
    // kernel input features 2, 6 output features.
    let nhwc = ConvDims::nhwc_hwio();
    let g = conv(
        &[1, 1],
        &[(0, 0), (0, 0)],
        &[1, 1],
        &[1, 1],
        nhwc.clone(),
        2,
        1,
    );
    assert_eq!(
        ok1(g.clone(), &[f32t(&[1, 5, 5, 4]), f32t(&[3, 3, 2, 6])]),
        f32t(&[1, 3, 3, 6])
    );
    assert_eq!(
        err(g.clone(), &[f32t(&[1, 5, 5, 4]), f32t(&[3, 3, 4, 6])], None),
        "stablehlo.convolution: kernel input feature dimension rhs[2]=4 times \
         feature_group_count 2 does not match input feature dimension lhs[3]=4"
    );
    assert_eq!(
        err(g, &[f32t(&[1, 5, 5, 4]), f32t(&[3, 3, 2, 5])], None),
        "stablehlo.convolution: kernel output feature dimension rhs[3]=5 is not \
         divisible by feature_group_count 2"
    );
    // Batch groups: batch 4 / 2 groups -> output batch 2.
    let bg = conv(
        &[1, 1],
        &[(0, 0), (0, 0)],
        &[1, 1],
        &[1, 1],
        ConvDims::nchw(2),
        1,
        2,
    );
    assert_eq!(
        ok1(bg.clone(), &[f32t(&[4, 3, 2, 2]), f32t(&[2, 3, 1, 1])]),
        f32t(&[2, 2, 2, 2])
    );
    assert_eq!(
        err(bg, &[f32t(&[3, 3, 2, 2]), f32t(&[2, 3, 1, 1])], None),
        "stablehlo.convolution: input batch dimension lhs[0]=3 is not divisible by \
         batch_group_count 2"
    );
    // A window larger than the padded input gives an empty output (spec num_windows);
    // cropping below zero is an error.
    assert_eq!(
        ok1(plain, &[f32t(&[1, 1, 2, 4]), f32t(&[1, 1, 3, 3])]),
        f32t(&[1, 1, 0, 2])
    );
    let crop = conv(
        &[1, 1],
        &[(-2, -1), (0, 0)],
        &[1, 1],
        &[1, 1],
        ConvDims::nchw(2),
        1,
        1,
    );
    assert_eq!(
        err(crop, &[f32t(&[1, 1, 2, 2]), f32t(&[1, 1, 1, 1])], None),
        "stablehlo.convolution: spatial dimension 0: padding (-2, -1) of dilated size 2 is negative"
    );
    // bf16 operands, f32 result stated.
    let bf = |s: &[i64]| t(s, ElemType::BF16);
    let c = OpKind::Convolution(ConvAttrs::plain2d());
    assert_eq!(
        ok(
            c,
            &[bf(&[1, 1, 3, 3]), bf(&[1, 1, 3, 3])],
            Some(&[f32t(&[1, 1, 1, 1])])
        ),
        vec![f32t(&[1, 1, 1, 1])]
    );
}

#[test]
fn reduce_rules() {
    let x = f32t(&[2, 3, 4]);
    let s = TensorType::scalar(ElemType::F32);
    let add = region(BinaryOp::Add, ElemType::F32);
    let r = infer_result_types(
        &OpKind::Reduce { dims: vec![2, 0] },
        &[x.clone(), s.clone()],
        &[add.clone()],
        None,
    )
    .unwrap();
    assert_eq!(r, vec![f32t(&[3])]);
    // The reducer must be over the init element type.
    let iadd = region(BinaryOp::Add, ElemType::I32);
    assert_eq!(
        err_regions(
            OpKind::Reduce { dims: vec![0] },
            &[x.clone(), s.clone()],
            &[iadd]
        ),
        "stablehlo.reduce: body region argument #0 has type tensor<i32>, expected tensor<f32>"
    );
    assert_eq!(
        err_regions(
            OpKind::Reduce { dims: vec![0] },
            &[x.clone(), f32t(&[1])],
            &[add.clone()]
        ),
        "stablehlo.reduce: init value #0 tensor<1xf32> must be a scalar"
    );
    assert_eq!(
        err_regions(
            OpKind::Reduce { dims: vec![0] },
            &[x.clone(), s.clone()],
            &[]
        ),
        "stablehlo.reduce: expected 1 region(s), found 0"
    );
    // Variadic reduce: (f32, i32) inputs with a two-result body.
    let mut b = FuncBuilder::new("scratch", Visibility::Private);
    let si = TensorType::scalar(ElemType::I32);
    let body = b
        .region(&[s.clone(), si.clone(), s.clone(), si.clone()], |b, a| {
            Ok(vec![
                b.binary(BinaryOp::Maximum, a[0], a[2])?,
                b.binary(BinaryOp::Add, a[1], a[3])?,
            ])
        })
        .unwrap();
    let xi = x.with_elem(ElemType::I32);
    let r = infer_result_types(
        &OpKind::Reduce { dims: vec![1] },
        &[x.clone(), xi.clone(), s.clone(), si.clone()],
        &[body.clone()],
        None,
    )
    .unwrap();
    assert_eq!(r, vec![f32t(&[2, 4]), t(&[2, 4], ElemType::I32)]);
    assert_eq!(
        err_regions(
            OpKind::Reduce { dims: vec![1] },
            &[x.clone(), f32t(&[2, 3, 5]), s.clone(), s.clone()],
            &[body]
        ),
        "stablehlo.reduce: input #1 dimension 2=5 does not match input #0 dimension 2=4"
    );

    // reduce_window: the max-pool 3x3/s2 pad 1 on 112 -> 56.
    let pool = OpKind::ReduceWindow(WindowAttrs {
        window_dimensions: vec![1, 1, 3, 3],
        window_strides: vec![1, 1, 2, 2],
        base_dilations: vec![1, 1, 1, 1],
        window_dilations: vec![1, 1, 1, 1],
        padding: vec![(0, 0), (0, 0), (1, 1), (1, 1)],
    });
    let max = region(BinaryOp::Maximum, ElemType::F32);
    let img = f32t(&[2, 64, 112, 112]);
    let r = infer_result_types(&pool, &[img.clone(), s.clone()], &[max.clone()], None).unwrap();
    assert_eq!(r, vec![f32t(&[2, 64, 56, 56])]);
    // Base and window dilation: base 4 dilated by 2 -> 7, window 2 dilated by 3 -> 4,
    // stride 1 -> 4 windows.
    let dil = OpKind::ReduceWindow(WindowAttrs {
        window_dimensions: vec![2],
        window_strides: vec![1],
        base_dilations: vec![2],
        window_dilations: vec![3],
        padding: vec![(0, 0)],
    });
    let r = infer_result_types(&dil, &[f32t(&[4]), s.clone()], &[max.clone()], None).unwrap();
    assert_eq!(r, vec![f32t(&[4])]);
    assert!(err_regions(pool, &[f32t(&[2, 64, 112]), s.clone()], &[max])
        .contains("window_dimensions has 4 entries, expected 3"));
}

#[test]
fn select_and_scatter_and_all_reduce() {
    let s = TensorType::scalar(ElemType::F32);
    let mut b = FuncBuilder::new("scratch", Visibility::Private);
    let select = b
        .region(&[s.clone(), s.clone()], |b, a| {
            Ok(vec![b.push1(
                OpKind::Compare {
                    direction: CompareDirection::Ge,
                    compare_type: None,
                },
                &[a[0], a[1]],
                None,
            )?])
        })
        .unwrap();
    let scatter = b.binary_region(BinaryOp::Add, ElemType::F32).unwrap();
    let sas = OpKind::SelectAndScatter(ScatterWindowAttrs {
        window_dimensions: vec![1, 2, 2],
        window_strides: vec![1, 2, 2],
        padding: vec![(0, 0), (0, 0), (0, 0)],
    });
    let x = f32t(&[3, 4, 6]);
    let regions = [select.clone(), scatter.clone()];
    let r = infer_result_types(
        &sas,
        &[x.clone(), f32t(&[3, 2, 3]), s.clone()],
        &regions,
        None,
    )
    .unwrap();
    assert_eq!(r, vec![x.clone()]);
    assert_eq!(
        err_regions(sas.clone(), &[x.clone(), f32t(&[3, 2, 2]), s.clone()], &regions),
        "stablehlo.select_and_scatter: source dimension 2=2 does not match window output dimension 2=3"
    );
    // The select region must return i1; regions swapped is an error.
    assert_eq!(
        err_regions(
            sas,
            &[x.clone(), f32t(&[3, 2, 3]), s.clone()],
            &[scatter.clone(), select]
        ),
        "stablehlo.select_and_scatter: select region result #0 has type tensor<f32>, expected tensor<i1>"
    );

    let ar = OpKind::AllReduce {
        replica_groups: vec![vec![0, 1]],
        channel_id: None,
        use_global_device_ids: false,
    };
    let r = infer_result_types(&ar, &[x.clone(), s.clone()], &[scatter.clone()], None).unwrap();
    assert_eq!(r, vec![x.clone(), s.clone()]);
    let ragged = OpKind::AllReduce {
        replica_groups: vec![vec![0, 1], vec![2]],
        channel_id: None,
        use_global_device_ids: false,
    };
    assert_eq!(
        err_regions(ragged, &[x], &[scatter]),
        "stablehlo.all_reduce: replica group 1 has 1 ids, group 0 has 2"
    );
}
