//! The 2-D pooling fast path (`reduce_window` / `select_and_scatter` with a
//! window over the two innermost dimensions, NCHW max-pool style) against the
//! N-d fast path and the generic evaluator, bit for bit: window 1–3 per side,
//! stride 1–3, padding, odd sizes, batch and channels above 1, operands full
//! of ties, with NaN and signed zeros mixed in.
//!
//! The N-d path is reached with the same problem behind a leading size-1
//! dimension whose one-element window has stride 2: that reads the same
//! positions, but the 2-D path declines a leading dimension with a stride.

use den::eval::{eval_func, EvalOptions};
use den::fast::{self, ReduceKind};
use den::value::Value;
use den::Tensor;
use ir::{
    BinaryOp, CompareDirection, ElemType, FuncBuilder, Module, OpKind, ScatterWindowAttrs,
    TensorType, Visibility, WindowAttrs,
};
use proptest::prelude::*;

/// xorshift64* values in `[0, levels)`, with some NaN and signed zeros when
/// `specials` (NaN only where `nan`).
fn levels(len: usize, seed: u64, levels: u32, specials: bool, nan: bool) -> Vec<f32> {
    crate::common::xorshift64star(seed)
        .take(len)
        .map(|bits| {
            let r = bits >> 40;
            match (specials, r % 23) {
                (true, 0) if nan => f32::NAN,
                (true, 1) => -0.0,
                (true, 2) => 0.0,
                _ => ((r >> 5) % levels as u64) as f32 - 1.0,
            }
        })
        .collect()
}

#[derive(Clone, Debug)]
struct Case {
    shape: [usize; 4],
    window: [i64; 2],
    stride: [i64; 2],
    pad: [(i64, i64); 2],
    out: [usize; 4],
}

fn out_len(n: usize, w: i64, s: i64, (lo, hi): (i64, i64)) -> usize {
    let padded = n as i64 + lo + hi;
    if padded < w {
        0
    } else {
        ((padded - w) / s + 1) as usize
    }
}

fn case_strategy() -> impl Strategy<Value = Case> {
    let spatial = (1usize..=9, 1i64..=3, 1i64..=3, 0i64..=2, 0i64..=2);
    (1usize..=3, 1usize..=3, spatial.clone(), spatial).prop_map(|(n, c, h, w)| {
        // Padding below the window, as a pool's is.
        let fit = |(len, k, s, lo, hi): (usize, i64, i64, i64, i64)| {
            (len, k, s, (lo.min(k - 1), hi.min(k - 1)))
        };
        let (h, w) = (fit(h), fit(w));
        Case {
            shape: [n, c, h.0, w.0],
            window: [h.1, w.1],
            stride: [h.2, w.2],
            pad: [h.3, w.3],
            out: [
                n,
                c,
                out_len(h.0, h.1, h.2, h.3),
                out_len(w.0, w.1, w.2, w.3),
            ],
        }
    })
}

impl Case {
    /// The attributes over `[n, c, h, w]`, or over `[1, n, c, h, w]` with the
    /// leading window strided (`nd`: the N-d path).
    fn window_attrs(&self, nd: bool) -> WindowAttrs {
        let mut a = WindowAttrs {
            window_dimensions: vec![1, 1, self.window[0], self.window[1]],
            window_strides: vec![1, 1, self.stride[0], self.stride[1]],
            base_dilations: vec![1; 4],
            window_dilations: vec![1; 4],
            padding: vec![(0, 0), (0, 0), self.pad[0], self.pad[1]],
        };
        if nd {
            a.window_dimensions.insert(0, 1);
            a.window_strides.insert(0, 2);
            a.base_dilations.insert(0, 1);
            a.window_dilations.insert(0, 1);
            a.padding.insert(0, (0, 0));
        }
        a
    }

    fn scatter_attrs(&self) -> ScatterWindowAttrs {
        let a = self.window_attrs(false);
        ScatterWindowAttrs {
            window_dimensions: a.window_dimensions,
            window_strides: a.window_strides,
            padding: a.padding,
        }
    }

    /// `shape` behind a leading size-1 dimension.
    fn with_unit(shape: &[usize]) -> Vec<usize> {
        let mut s = vec![1];
        s.extend_from_slice(shape);
        s
    }

    fn lift(t: &Tensor<f32>) -> Tensor<f32> {
        Tensor::new(Case::with_unit(&t.shape), t.data.clone())
    }
}

fn ty(shape: &[usize]) -> TensorType {
    TensorType::f32(shape.iter().map(|&d| d as i64).collect::<Vec<i64>>())
}

fn scalar(x: f32) -> Tensor<f32> {
    Tensor::new(vec![], vec![x])
}

/// The single output of the one-op module `main(params) = kind(params)` on
/// den's generic evaluator.
fn generic(
    params: &[Vec<usize>],
    kind: OpKind,
    regions: impl FnOnce(&mut FuncBuilder) -> Vec<ir::Block>,
    result: &[usize],
    inputs: &[Tensor<f32>],
) -> Tensor<f32> {
    let mut b = FuncBuilder::new("main", Visibility::Public);
    let args: Vec<_> = params.iter().map(|p| b.param(ty(p))).collect();
    let regions = regions(&mut b);
    let r = b
        .push(kind, &args, regions, Some(&[ty(result)]))
        .expect("one-op module is well typed");
    let m = Module {
        funcs: vec![b.finish(&r).expect("function closes")],
        ..Module::default()
    };
    let values = inputs
        .iter()
        .map(|t| Value::Float(t.clone(), ElemType::F32))
        .collect();
    let opts = EvalOptions {
        fast: false,
        record_margins: false,
        replicas: 1,
    };
    let mut ev = eval_func::<f32>(&m, "main", values, &opts).expect("evaluation succeeds");
    match ev.outputs.remove(0) {
        Value::Float(t, ElemType::F32) => t,
        other => panic!("unexpected output {other:?}"),
    }
}

fn same_bits(what: &str, a: &Tensor<f32>, b: &Tensor<f32>) {
    assert_eq!(
        a.shape.iter().product::<usize>(),
        b.shape.iter().product::<usize>(),
        "{what}: sizes"
    );
    assert_eq!(a.data.len(), b.data.len(), "{what}: lengths");
    for (i, (x, y)) in a.data.iter().zip(&b.data).enumerate() {
        assert!(
            x.to_bits() == y.to_bits() || (x.is_nan() && y.is_nan()),
            "{what}: element {i}: {x:?} vs {y:?}"
        );
    }
}

fn reducer(kind: ReduceKind) -> BinaryOp {
    match kind {
        ReduceKind::Add => BinaryOp::Add,
        ReduceKind::Max => BinaryOp::Maximum,
        ReduceKind::Min => BinaryOp::Minimum,
        ReduceKind::Mul => BinaryOp::Multiply,
    }
}

fn check_reduce_window(case: &Case, kind: ReduceKind, init: f32, x: &Tensor<f32>) {
    let fast2d = fast::reduce_window(x, init, kind, &case.window_attrs(false), &case.out);
    let x5 = Case::lift(x);
    let nd = fast::reduce_window(
        &x5,
        init,
        kind,
        &case.window_attrs(true),
        &Case::with_unit(&case.out),
    );
    same_bits("reduce_window 2-D vs N-d", &fast2d, &nd);
    let g = generic(
        &[x.shape.clone(), vec![]],
        OpKind::ReduceWindow(case.window_attrs(false)),
        |b| {
            vec![b
                .binary_region(reducer(kind), ElemType::F32)
                .expect("reducer")]
        },
        &case.out,
        &[x.clone(), scalar(init)],
    );
    if matches!(kind, ReduceKind::Max | ReduceKind::Min) {
        same_bits("reduce_window 2-D vs generic", &fast2d, &g);
    }
}

fn check_scatter(case: &Case, dir: CompareDirection, init: f32, x: &Tensor<f32>, s: &Tensor<f32>) {
    let attrs = case.scatter_attrs();
    let fast2d = fast::select_and_scatter(x, s, init, dir, &attrs, &x.shape);
    let mut a_nd = attrs.clone();
    a_nd.window_dimensions.insert(0, 1);
    a_nd.window_strides.insert(0, 2);
    a_nd.padding.insert(0, (0, 0));
    let (x5, s5) = (Case::lift(x), Case::lift(s));
    let nd = fast::select_and_scatter(&x5, &s5, init, dir, &a_nd, &x5.shape);
    same_bits("select_and_scatter 2-D vs N-d", &fast2d, &nd);
    let g = generic(
        &[x.shape.clone(), s.shape.clone(), vec![]],
        OpKind::SelectAndScatter(attrs),
        |b| {
            let e = TensorType::scalar(ElemType::F32);
            let select = b
                .region(&[e.clone(), e], |b, a| {
                    let kind = OpKind::Compare {
                        direction: dir,
                        compare_type: None,
                    };
                    Ok(vec![b.push1(
                        kind,
                        &[a[0], a[1]],
                        Some(TensorType::scalar(ElemType::I1)),
                    )?])
                })
                .expect("select region");
            let add = b
                .binary_region(BinaryOp::Add, ElemType::F32)
                .expect("scatter region");
            vec![select, add]
        },
        &x.shape,
        &[x.clone(), s.clone(), scalar(init)],
    );
    same_bits("select_and_scatter 2-D vs generic", &fast2d, &g);
}

fn kind_strategy() -> impl Strategy<Value = ReduceKind> {
    prop_oneof![
        Just(ReduceKind::Max),
        Just(ReduceKind::Min),
        Just(ReduceKind::Add),
        Just(ReduceKind::Mul)
    ]
}

fn direction_strategy() -> impl Strategy<Value = CompareDirection> {
    prop_oneof![
        Just(CompareDirection::Ge),
        Just(CompareDirection::Gt),
        Just(CompareDirection::Le),
        Just(CompareDirection::Lt),
        Just(CompareDirection::Eq),
        Just(CompareDirection::Ne)
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn pool2d_reduce_window_matches_nd_and_generic(
        case in case_strategy(),
        kind in kind_strategy(),
        init in prop_oneof![Just(f32::NEG_INFINITY), Just(f32::INFINITY), Just(0.0f32), Just(-0.0f32), -2.0f32..2.0],
        n_levels in 1u32..=4,
        specials in any::<bool>(),
        seed in any::<u64>(),
    ) {
        let len = case.shape.iter().product();
        let x = Tensor::new(case.shape.to_vec(), levels(len, seed, n_levels, specials, true));
        check_reduce_window(&case, kind, init, &x);
    }

    #[test]
    fn pool2d_select_and_scatter_matches_nd_and_generic(
        case in case_strategy(),
        dir in direction_strategy(),
        init in prop_oneof![Just(0.0f32), Just(-0.0f32), -2.0f32..2.0],
        n_levels in 1u32..=4,
        specials in any::<bool>(),
        seed in any::<u64>(),
    ) {
        let len = case.shape.iter().product();
        let x = Tensor::new(case.shape.to_vec(), levels(len, seed, n_levels, specials, true));
        let slen = case.out.iter().product();
        let s = Tensor::new(case.out.to_vec(), levels(slen, seed ^ 0x77, 1000, false, false));
        check_scatter(&case, dir, init, &x, &s);
    }
}

/// The ResNet stem pool (3×3, stride 2, padding 1, init -inf) on an all-equal
/// plane: every window keeps its first valid position under GE and moves to
/// its last under GT, overlapping windows accumulating — written out by hand.
#[test]
fn pool2d_ties_by_hand() {
    let case = Case {
        shape: [1, 2, 4, 4],
        window: [3, 3],
        stride: [2, 2],
        pad: [(1, 1), (1, 1)],
        out: [1, 2, 2, 2],
    };
    let x = Tensor::filled(vec![1, 2, 4, 4], 1.0f32);
    let s = Tensor::new(
        vec![1, 2, 2, 2],
        vec![1., 10., 100., 1000., 2., 20., 200., 2000.],
    );
    let ge = fast::select_and_scatter(
        &x,
        &s,
        0.0,
        CompareDirection::Ge,
        &case.scatter_attrs(),
        &x.shape,
    );
    // Windows start at rows/cols -1 and 1: first valid positions (0,0), (0,1),
    // (1,0), (1,1); last valid ones (1,1), (1,3), (3,1), (3,3).
    let mut want = vec![0.0f32; 32];
    for (p, scale) in [(0, 1.0f32), (16, 2.0)] {
        want[p] = scale;
        want[p + 1] = 10.0 * scale;
        want[p + 4] = 100.0 * scale;
        want[p + 5] = 1000.0 * scale;
    }
    assert_eq!(ge.data, want);
    let gt = fast::select_and_scatter(
        &x,
        &s,
        0.0,
        CompareDirection::Gt,
        &case.scatter_attrs(),
        &x.shape,
    );
    let mut want = vec![0.0f32; 32];
    for (p, scale) in [(0, 1.0f32), (16, 2.0)] {
        want[p + 5] = scale;
        want[p + 7] = 10.0 * scale;
        want[p + 13] = 100.0 * scale;
        want[p + 15] = 1000.0 * scale;
    }
    assert_eq!(gt.data, want);
    let pooled = fast::reduce_window(
        &x,
        f32::NEG_INFINITY,
        ReduceKind::Max,
        &case.window_attrs(false),
        &case.out,
    );
    assert_eq!(pooled.data, vec![1.0f32; 8]);
}
