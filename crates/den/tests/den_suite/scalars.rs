//! The scalar types through the evaluator: dual-number derivatives against
//! analytic ones, exact rationals on a piecewise-linear net (equal to f64 on
//! dyadic inputs) and their refusals, bf16 rounding, erf accuracy.

use den::scalar::erf_f64;
use den::{eval_func, Bf16, Dual, EvalOptions, Exact, Scalar, Tensor, Value};
use ir::*;

use crate::common::{generic, Fb};

fn val<S: Scalar>(shape: &[usize], data: Vec<S>, elem: ElemType) -> Value<S> {
    Value::Float(Tensor::new(shape.to_vec(), data), elem)
}

/// One-op module `y = u(x)` on a vector of `n`.
fn unary_module(u: UnaryOp, n: i64) -> Module {
    let mut b = Fb::new();
    let x = b.param(TensorType::f32(vec![n]));
    let y = b.op1(OpKind::Unary(u), &[x], TensorType::f32(vec![n]));
    b.finish(&[y])
}

fn rel_close(a: f64, b: f64) -> bool {
    (a - b).abs() <= 1e-13 * (1.0 + b.abs())
}

/// An op, its function and its derivative f′ (compared with the dual tangent).
type Case = (UnaryOp, fn(f64) -> f64, Box<dyn Fn(f64) -> f64>);

#[test]
fn dual_numbers_give_analytic_derivatives() {
    let xs = [0.3, 0.7, 1.9];
    let erf_d = |x: f64| std::f64::consts::FRAC_2_SQRT_PI * (-x * x).exp();
    let sig = |x: f64| 1.0 / (1.0 + (-x).exp());
    let cases: Vec<Case> = vec![
        (UnaryOp::Exponential, f64::exp, Box::new(f64::exp)),
        (
            UnaryOp::ExponentialMinusOne,
            f64::exp_m1,
            Box::new(f64::exp),
        ),
        (UnaryOp::Log, f64::ln, Box::new(|x| 1.0 / x)),
        (
            UnaryOp::LogPlusOne,
            f64::ln_1p,
            Box::new(|x| 1.0 / (1.0 + x)),
        ),
        (UnaryOp::Sqrt, f64::sqrt, Box::new(|x| 0.5 / x.sqrt())),
        (
            UnaryOp::Rsqrt,
            |x| 1.0 / x.sqrt(),
            Box::new(|x| -0.5 * x.powf(-1.5)),
        ),
        (
            UnaryOp::Cbrt,
            f64::cbrt,
            Box::new(|x| x.powf(-2.0 / 3.0) / 3.0),
        ),
        (
            UnaryOp::Tanh,
            f64::tanh,
            Box::new(|x| 1.0 / x.cosh().powi(2)),
        ),
        (
            UnaryOp::Logistic,
            |x| 1.0 / (1.0 + (-x).exp()),
            Box::new(move |x| sig(x) * (1.0 - sig(x))),
        ),
        (UnaryOp::Sine, f64::sin, Box::new(f64::cos)),
        (UnaryOp::Cosine, f64::cos, Box::new(|x| -x.sin())),
        (UnaryOp::Erf, erf_f64, Box::new(erf_d)),
        (UnaryOp::Square, |x| x * x, Box::new(|x| 2.0 * x)),
        (UnaryOp::Abs, f64::abs, Box::new(|_| 1.0)),
        (UnaryOp::Negate, |x| -x, Box::new(|_| -1.0)),
        (UnaryOp::Floor, f64::floor, Box::new(|_| 0.0)),
    ];
    for (u, f, df) in cases {
        let m = unary_module(u, 3);
        let input: Vec<Dual<f64>> = xs.iter().map(|&x| Dual::new(x, 1.0)).collect();
        let out = eval_func(
            &m,
            "main",
            vec![val(&[3], input, ElemType::F32)],
            &generic(),
        )
        .unwrap();
        let t = out.outputs[0].as_float().unwrap();
        for (i, &x) in xs.iter().enumerate() {
            assert!(
                rel_close(t.data[i].value, f(x)),
                "{u:?} value at {x}: {:?}",
                t.data[i]
            );
            assert!(
                rel_close(t.data[i].tangent, df(x)),
                "{u:?} derivative at {x}: {} vs {}",
                t.data[i].tangent,
                df(x)
            );
        }
    }
}

#[test]
fn dual_binary_rules_and_decisions_use_the_value() {
    let mut b = Fb::new();
    let x = b.param(TensorType::f32(vec![3]));
    let y = b.param(TensorType::f32(vec![3]));
    let ops = [
        BinaryOp::Multiply,
        BinaryOp::Divide,
        BinaryOp::Power,
        BinaryOp::Maximum,
    ];
    let outs: Vec<ValueId> = ops
        .iter()
        .map(|&o| b.op1(OpKind::Binary(o), &[x, y], TensorType::f32(vec![3])))
        .collect();
    let m = b.finish(&outs);
    // Direction (dx, dy) = (1, 2).
    let xs = [1.5, 2.0, 3.0];
    let ys = [2.0, 2.0, 0.5];
    let xv: Vec<Dual<f64>> = xs.iter().map(|&v| Dual::new(v, 1.0)).collect();
    let yv: Vec<Dual<f64>> = ys.iter().map(|&v| Dual::new(v, 2.0)).collect();
    let out = eval_func(
        &m,
        "main",
        vec![val(&[3], xv, ElemType::F32), val(&[3], yv, ElemType::F32)],
        &generic(),
    )
    .unwrap();
    let t = |k: usize, i: usize| out.outputs[k].as_float().unwrap().data[i].tangent;
    for i in 0..3 {
        let (a, c) = (xs[i], ys[i]);
        assert!(rel_close(t(0, i), c + 2.0 * a));
        assert!(rel_close(t(1, i), 1.0 / c - 2.0 * a / (c * c)));
        assert!(rel_close(
            t(2, i),
            c * a.powf(c - 1.0) + 2.0 * a.powf(c) * a.ln()
        ));
    }
    // max picks the tangent of the larger value; on a tie, the first operand's.
    assert_eq!([t(3, 0), t(3, 1), t(3, 2)], [2.0, 1.0, 1.0]);
}

/// conv (pad 1) → relu (maximum with 0) → max pool 3x3/s2 pad 1 (init −∞) →
/// flatten → dot with a dense matrix: piecewise linear, so exact.
fn piecewise_linear_net() -> Module {
    let f = |s: &[i64]| TensorType::f32(s.to_vec());
    let mut b = Fb::new();
    let x = b.param(f(&[1, 2, 4, 4]));
    let w = b.param(f(&[3, 2, 3, 3]));
    let d = b.param(f(&[12, 2]));
    let mut a = ConvAttrs::plain2d();
    a.padding = vec![(1, 1), (1, 1)];
    let c = b.op1(OpKind::Convolution(a), &[x, w], f(&[1, 3, 4, 4]));
    let z = b.constant(0.0, f(&[1, 3, 4, 4]));
    let r = b.op1(OpKind::Binary(BinaryOp::Maximum), &[c, z], f(&[1, 3, 4, 4]));
    let p = b.max_pool_3x3_s2_p1(r, &[1, 3, 2, 2]);
    let flat = b.op1(OpKind::Reshape, &[p], f(&[1, 12]));
    let dims = DotDims {
        lhs_batch: vec![],
        rhs_batch: vec![],
        lhs_contracting: vec![1],
        rhs_contracting: vec![0],
    };
    let y = b.op1(
        OpKind::DotGeneral {
            dims,
            precision_config: None,
        },
        &[flat, d],
        f(&[1, 2]),
    );
    b.finish(&[y])
}

#[test]
fn exact_piecewise_linear_net_equals_f64_on_dyadic_inputs() {
    let m = piecewise_linear_net();
    let mut seed = 17u64;
    let mut dyadic = |n: usize| -> Vec<f64> {
        (0..n)
            .map(|_| {
                seed = seed
                    .wrapping_mul(6364136223846793005)
                    .wrapping_add(1442695040888963407);
                ((seed >> 33) % 41) as f64 / 16.0 - 1.25
            })
            .collect()
    };
    let (xs, ws, ds) = (dyadic(32), dyadic(54), dyadic(24));
    let shapes: [&[usize]; 3] = [&[1, 2, 4, 4], &[3, 2, 3, 3], &[12, 2]];
    let data = [&xs, &ws, &ds];
    let f64_in: Vec<Value<f64>> = (0..3)
        .map(|i| val(shapes[i], data[i].clone(), ElemType::F32))
        .collect();
    let ex_in: Vec<Value<Exact>> = f64_in
        .iter()
        .map(|v| v.map_scalar(|&x| Exact::from_f64(x).unwrap()))
        .collect();
    let opts = EvalOptions {
        record_margins: true,
        ..generic()
    };
    let r64 = eval_func(&m, "main", f64_in, &opts).unwrap();
    let rex = eval_func(&m, "main", ex_in, &opts).unwrap();
    let out64 = r64.outputs[0].as_float().unwrap();
    let outex = rex.outputs[0].as_float().unwrap();
    for (a, e) in out64.data.iter().zip(&outex.data) {
        // Every intermediate is a short dyadic, so f64 is exact too.
        assert_eq!(Exact::from_f64(*a).unwrap(), *e);
    }
    assert!(out64.data.iter().any(|&v| v != 0.0));
    // The same decisions with the same margins.
    assert_eq!(r64.margins, rex.margins);
    assert_eq!(rex.margins.len(), 2);
}

#[test]
fn exact_refuses_irrational_results_naming_op_and_line() {
    let mut m = unary_module(UnaryOp::Rsqrt, 2);
    m.funcs[0].body.ops[0].loc = SrcLoc(Some((12, 5)));
    let input = val(&[2], vec![Exact::int(4), Exact::int(2)], ElemType::F32);
    let e = eval_func(&m, "main", vec![input], &generic()).unwrap_err();
    assert_eq!(
        e.to_string(),
        "@main line 12: stablehlo.rsqrt: not exact (rsqrt of 2/1 is irrational)"
    );
    // A perfect square is fine.
    let input = val(&[2], vec![Exact::ratio(9, 4), Exact::int(4)], ElemType::F32);
    let out = eval_func(&m, "main", vec![input], &generic()).unwrap();
    assert_eq!(
        out.outputs[0].as_float().unwrap().data,
        vec![Exact::ratio(2, 3), Exact::ratio(1, 2)]
    );
}

#[test]
fn exact_infinities_and_undefined_results() {
    let ninf = Exact::from_f64(f64::NEG_INFINITY).unwrap();
    assert_eq!(ninf.max(&Exact::int(-5)), Exact::int(-5));
    assert_eq!(ninf.add(&Exact::int(3)), Exact::NegInf);
    assert!(Exact::from_f64(f64::NAN).is_err());
    // inf − inf in a module is an error naming the op.
    let mut b = Fb::new();
    let x = b.param(TensorType::f32(vec![1]));
    let i = b.constant(f64::INFINITY, TensorType::f32(vec![1]));
    let y = b.op1(
        OpKind::Binary(BinaryOp::Add),
        &[x, i],
        TensorType::f32(vec![1]),
    );
    let m = b.finish(&[y]);
    let ok = eval_func(
        &m,
        "main",
        vec![val(&[1], vec![Exact::int(1)], ElemType::F32)],
        &generic(),
    )
    .unwrap();
    assert_eq!(ok.outputs[0].as_float().unwrap().data, vec![Exact::PosInf]);
    let e = eval_func(
        &m,
        "main",
        vec![val(&[1], vec![Exact::NegInf], ElemType::F32)],
        &generic(),
    )
    .unwrap_err();
    assert_eq!(e.op, "stablehlo.add");
    assert!(e.message.contains("inf - inf"), "{e}");
}

#[test]
fn exact_rounding_functions() {
    let r = |n, d| Exact::ratio(n, d);
    assert_eq!(r(5, 2).round_nearest_even(), Exact::int(2));
    assert_eq!(r(7, 2).round_nearest_even(), Exact::int(4));
    assert_eq!(r(-5, 2).round_nearest_even(), Exact::int(-2));
    assert_eq!(r(-7, 3).floor(), Exact::int(-3));
    assert_eq!(r(-7, 3).ceil(), Exact::int(-2));
    assert_eq!(r(-7, 2).rem(&Exact::int(2)), r(-3, 2));
    assert_eq!(r(8, 27).cbrt().unwrap(), r(2, 3));
    assert_eq!(r(-8, 27).cbrt().unwrap(), r(-2, 3));
    assert_eq!(r(2, 3).pow(&Exact::int(-2)).unwrap(), r(9, 4));
    assert_eq!(Exact::from_f64(0.1).unwrap().to_f64(), 0.1);
}

#[test]
fn f32_scalar_rounds_bf16_ops_and_bf16_scalar_keeps_f32_accumulation() {
    let bf = |s: &[i64]| TensorType::new(s.to_vec(), ElemType::BF16);
    // 1 + 2^-9 is not a bf16 (8 significant bits): rounds to 1 (ties to even).
    let mut b = Fb::new();
    let x = b.param(bf(&[2]));
    let y = b.param(bf(&[2]));
    let s = b.op1(OpKind::Binary(BinaryOp::Add), &[x, y], bf(&[2]));
    let m = b.finish(&[s]);
    let xv = val(&[2], vec![1.0f32, 1.0], ElemType::BF16);
    let yv = val(
        &[2],
        vec![2f32.powi(-9), 3.0 * 2f32.powi(-9)],
        ElemType::BF16,
    );
    let out = eval_func(&m, "main", vec![xv, yv], &generic()).unwrap();
    assert_eq!(
        out.outputs[0].as_float().unwrap().data,
        vec![1.0, 1.0 + 2f32.powi(-7)]
    );

    // Bf16 on an f32 module: elementwise results round, a dot with f32 result
    // accumulates in f32 without rounding.
    let f = |s: &[i64]| TensorType::f32(s.to_vec());
    let mut b = Fb::new();
    let x = b.param(f(&[4]));
    let y = b.param(f(&[4]));
    let p = b.op1(OpKind::Binary(BinaryOp::Add), &[x, y], f(&[4]));
    let dims = DotDims {
        lhs_batch: vec![],
        rhs_batch: vec![],
        lhs_contracting: vec![0],
        rhs_contracting: vec![0],
    };
    let d = b.op1(
        OpKind::DotGeneral {
            dims,
            precision_config: None,
        },
        &[x, y],
        f(&[]),
    );
    let m = b.finish(&[p, d]);
    let e = 2f32.powi(-8);
    let xv = val(&[4], vec![Bf16(1.0); 4], ElemType::F32);
    let yv = val(
        &[4],
        vec![Bf16(e), Bf16(e), Bf16(e), Bf16(e)],
        ElemType::F32,
    );
    let out = eval_func(&m, "main", vec![xv, yv], &generic()).unwrap();
    // 1 + 2^-8 is halfway between bf16 neighbours 1 and 1 + 2^-7: ties to even → 1.
    assert_eq!(out.outputs[0].as_float().unwrap().data, vec![Bf16(1.0); 4]);
    // Σ 1·2^-8 = 2^-6 exactly in f32.
    assert_eq!(out.outputs[1].as_float().unwrap().data, vec![Bf16(4.0 * e)]);
    assert_eq!(Bf16(1.0 + e).round_accumulated(ElemType::BF16), Bf16(1.0));
}

#[test]
fn erf_matches_reference_values() {
    // Values of erf to 16 digits (Abramowitz & Stegun table / high-precision).
    let table = [
        (0.0, 0.0),
        (0.1, 0.1124629160182849),
        (0.5, 0.5204998778130465),
        (1.0, 0.8427007929497149),
        (2.0, 0.9953222650189527),
        (3.0, 0.9999779095030014),
        (-1.5, -0.9661051464753108),
    ];
    for (x, want) in table {
        let got = erf_f64(x);
        assert!(
            (got - want).abs() <= 4e-16_f64.max(2.0 * f64::EPSILON * want.abs()),
            "erf({x}) = {got}, want {want}"
        );
    }
    assert_eq!(erf_f64(7.0), 1.0);
}
