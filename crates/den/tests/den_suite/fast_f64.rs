//! Agreement of the fast paths for `f64` and `Dual<f64>` with the generic
//! evaluator: the same one-op module is evaluated with `fast: true` and
//! `fast: false` on random inputs, and the results compared.
//!
//! Contractions and sums accumulate in another order on the fast path, so
//! element `i` may differ by at most `k · eps_f64 · A_i`, where `A_i` is the
//! same op evaluated (generically) on the absolute values — for a dual number,
//! value and tangent parts alike, since the tangent of a bilinear op is a sum
//! of products too — and `k` bounds the number of accumulated terms. Max/min
//! folds and selections are exact: values and the tangents they carry are
//! compared bit for bit (all NaNs equal). The tangent cases cover the zero
//! tangents the dual dispatch skips, and infinities that make a skipped term
//! NaN. A negative control shows the comparison rejects a dual convolution
//! whose tangent lacks the weight-tangent term.

use den::fast;
use den::{eval_func, Dual, EvalOptions, Scalar, Tensor, Value};
use ir::*;
use proptest::prelude::*;

use crate::common::{generic, ConvCase, Fb};

fn fast_opts() -> EvalOptions {
    EvalOptions::default()
}

fn f32t(shape: &[usize]) -> TensorType {
    TensorType::f32(shape.iter().map(|&d| d as i64).collect::<Vec<_>>())
}

/// Deterministic data in `[-2, 2)` (xorshift64*); with `levels`, small integers
/// (many ties, for the max/select tie rules).
fn data(len: usize, seed: u64, levels: Option<u32>) -> Vec<f64> {
    crate::common::xorshift64star(seed)
        .take(len)
        .map(|bits| {
            let r = (bits >> 11) as f64 / (1u64 << 53) as f64;
            match levels {
                Some(l) => (r * l as f64).floor(),
                None => 4.0 * r - 2.0,
            }
        })
        .collect()
}

/// Which tangents an input carries.
#[derive(Clone, Copy, Debug)]
enum Tangent {
    Random,
    Zero,
}

/// An input: shape, values, tangent kind.
struct Input {
    shape: Vec<usize>,
    value: Vec<f64>,
    tangent: Tangent,
    seed: u64,
}

impl Input {
    fn new(shape: &[usize], seed: u64, levels: Option<u32>, tangent: Tangent) -> Self {
        let n = shape.iter().product();
        Input {
            shape: shape.to_vec(),
            value: data(n, seed, levels),
            tangent,
            seed,
        }
    }

    fn f64(&self, abs: bool) -> Value<f64> {
        let v = self
            .value
            .iter()
            .map(|x| if abs { x.abs() } else { *x })
            .collect();
        Value::Float(Tensor::new(self.shape.clone(), v), ElemType::F32)
    }

    fn dual(&self, abs: bool) -> Value<Dual<f64>> {
        let t = match self.tangent {
            Tangent::Random => data(self.value.len(), self.seed ^ 0xABCD, None),
            Tangent::Zero => vec![0.0; self.value.len()],
        };
        let d = self
            .value
            .iter()
            .zip(t)
            .map(|(&v, t)| {
                if abs {
                    Dual::new(v.abs(), t.abs())
                } else {
                    Dual::new(v, t)
                }
            })
            .collect();
        Value::Float(Tensor::new(self.shape.clone(), d), ElemType::F32)
    }
}

fn run<S: Scalar>(m: &Module, inputs: Vec<Value<S>>, opts: &EvalOptions) -> Vec<S> {
    let ev = eval_func(m, "main", inputs, opts).expect("evaluation");
    ev.outputs[0].as_float().expect("float output").data.clone()
}

fn same(a: f64, b: f64) -> bool {
    (a.is_nan() && b.is_nan()) || a.to_bits() == b.to_bits()
}

/// `|fast − generic| ≤ k·eps·abs` per element (exactly equal when `k` is 0);
/// non-finite reference values must match exactly.
fn close(what: &str, fast: &[f64], generic: &[f64], abs: &[f64], k: f64) -> Result<(), String> {
    if fast.len() != generic.len() {
        return Err(format!(
            "{what}: {} vs {} elements",
            fast.len(),
            generic.len()
        ));
    }
    for (i, ((&f, &g), &a)) in fast.iter().zip(generic).zip(abs).enumerate() {
        let ok = if k == 0.0 || !g.is_finite() || !a.is_finite() {
            same(f, g)
        } else {
            (f - g).abs() <= k * f64::EPSILON * a
        };
        if !ok {
            return Err(format!(
                "{what}: element {i}: fast {f:e} vs generic {g:e} (bound {:e})",
                k * f64::EPSILON * a
            ));
        }
    }
    Ok(())
}

fn close_dual(
    fast: &[Dual<f64>],
    generic: &[Dual<f64>],
    abs: &[Dual<f64>],
    k: f64,
) -> Result<(), String> {
    let part = |v: &[Dual<f64>], t: bool| -> Vec<f64> {
        v.iter()
            .map(|d| if t { d.tangent } else { d.value })
            .collect()
    };
    close(
        "value",
        &part(fast, false),
        &part(generic, false),
        &part(abs, false),
        k,
    )?;
    close(
        "tangent",
        &part(fast, true),
        &part(generic, true),
        &part(abs, true),
        k,
    )
}

/// Fast vs generic for f64 and for duals; `k` as in [`close`] (0: exact).
fn check(m: &Module, inputs: &[Input], k: f64) -> Result<(), String> {
    let f: Vec<Value<f64>> = inputs.iter().map(|i| i.f64(false)).collect();
    let fa: Vec<Value<f64>> = inputs.iter().map(|i| i.f64(true)).collect();
    let fast = run(m, f.clone(), &fast_opts());
    let gen = run(m, f, &generic());
    let abs = run(m, fa, &generic());
    close("f64", &fast, &gen, &abs, k)?;
    let d: Vec<Value<Dual<f64>>> = inputs.iter().map(|i| i.dual(false)).collect();
    let da: Vec<Value<Dual<f64>>> = inputs.iter().map(|i| i.dual(true)).collect();
    let fast = run(m, d.clone(), &fast_opts());
    let gen = run(m, d, &generic());
    let abs = run(m, da, &generic());
    close_dual(&fast, &gen, &abs, k).map_err(|e| format!("dual {e}"))
}

fn tangent_strategy() -> impl Strategy<Value = Tangent> {
    prop_oneof![Just(Tangent::Random), Just(Tangent::Zero)]
}

// ---------------------------------------------------------------------------
// Convolution and dot_general

impl ConvCase {
    fn x_shape(&self) -> Vec<usize> {
        vec![self.n, self.c, self.hw[0], self.hw[1]]
    }

    fn w_shape(&self) -> Vec<usize> {
        vec![self.o, self.c / self.fg, self.k[0], self.k[1]]
    }

    fn module(&self) -> Module {
        let [oh, ow] = self.out_hw().expect("valid case");
        let mut b = Fb::new();
        let x = b.param(f32t(&self.x_shape()));
        let w = b.param(f32t(&self.w_shape()));
        let y = b.op1(
            OpKind::Convolution(self.attrs(ConvDims::nchw(2))),
            &[x, w],
            f32t(&[self.n, self.o, oh, ow]),
        );
        b.finish(&[y])
    }

    /// Accumulated terms per output, doubled for the two tangent sums, plus slack.
    fn terms(&self) -> f64 {
        (2 * (self.c / self.fg) * self.k[0] * self.k[1] + 4) as f64
    }

    /// [`check`] of the case's module on inputs drawn from `seed` (the kernel
    /// from `seed + 7`) with tangents `tx` and `tw`.
    fn check(&self, seed: u64, tx: Tangent, tw: Tangent) -> Result<(), String> {
        let inputs = [
            Input::new(&self.x_shape(), seed, None, tx),
            Input::new(&self.w_shape(), seed + 7, None, tw),
        ];
        check(&self.module(), &inputs, self.terms())
    }
}

fn conv_strategy() -> impl Strategy<Value = ConvCase> {
    (
        (1usize..3, 1usize..4, 1usize..4, 1usize..3),
        (3usize..8, 3usize..8, 1usize..4, 1usize..4),
        (1i64..3, 1i64..3, 0i64..3, -1i64..3),
        (1i64..3, 1i64..3, any::<bool>()),
    )
        .prop_map(
            |((n, cg, og, fg), (h, w, kh, kw), (sh, sw, p0, p1), (ld, rd, rev))| ConvCase {
                n,
                c: cg * fg,
                o: og * fg,
                hw: [h, w],
                k: [kh, kw],
                stride: [sh, sw],
                pad: [(p0, p1), (p1.max(0), p0)],
                ld: [ld, 1],
                rd: [1, rd],
                rev: [rev, false],
                fg,
                bg: 1,
            },
        )
        .prop_filter("some output", |c| c.out_hw().is_some())
}

/// Ungrouped convolutions with 9–40 output features (the implicit GEMM's
/// register tiles of 16 features and a last block of 8, AVX-512 on CPUs that
/// have it), any strides, window dilation and padding.
fn wide_conv_strategy() -> impl Strategy<Value = ConvCase> {
    (
        (1usize..3, 1usize..5, 9usize..41),
        (3usize..9, 3usize..9, 2usize..4, 1usize..4),
        (1i64..3, 1i64..3, 0i64..3, -1i64..3),
        (1i64..3, any::<bool>()),
    )
        .prop_map(
            |((n, c, o), (h, w, kh, kw), (sh, sw, p0, p1), (rd, rev))| ConvCase {
                n,
                c,
                o,
                hw: [h, w],
                k: [kh, kw],
                stride: [sh, sw],
                pad: [(p0, p1), (p1.max(0), p0)],
                ld: [1, 1],
                rd: [rd, 1],
                rev: [rev, false],
                fg: 1,
                bg: 1,
            },
        )
        .prop_filter("some output", |c| c.out_hw().is_some())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]

    #[test]
    fn convolution_agrees(case in conv_strategy(), seed in 0u64..1000,
                          tx in tangent_strategy(), tw in tangent_strategy()) {
        case.check(seed, tx, tw).map_err(TestCaseError::fail)?;
    }

    #[test]
    fn wide_convolution_agrees(case in wide_conv_strategy(), seed in 0u64..1000,
                               tx in tangent_strategy(), tw in tangent_strategy()) {
        case.check(seed, tx, tw).map_err(TestCaseError::fail)?;
    }

    #[test]
    fn dot_general_agrees(b in 1usize..3, m in 1usize..5, k in 1usize..6, n in 1usize..5,
                          transposed in any::<bool>(), seed in 0u64..1000,
                          tx in tangent_strategy(), tw in tangent_strategy()) {
        // [b, m, k] · [b, k, n] or, transposed, [b, n, k].
        let mut fb = Fb::new();
        let x = fb.param(f32t(&[b, m, k]));
        let w_shape = if transposed { vec![b, n, k] } else { vec![b, k, n] };
        let w = fb.param(f32t(&w_shape));
        let dims = DotDims {
            lhs_batch: vec![0],
            rhs_batch: vec![0],
            lhs_contracting: vec![2],
            rhs_contracting: vec![if transposed { 2 } else { 1 }],
        };
        let y = fb.op1(
            OpKind::DotGeneral { dims, precision_config: None },
            &[x, w],
            f32t(&[b, m, n]),
        );
        let module = fb.finish(&[y]);
        let inputs = [
            Input::new(&[b, m, k], seed, None, tx),
            Input::new(&w_shape, seed + 3, None, tw),
        ];
        check(&module, &inputs, (2 * k + 4) as f64).map_err(TestCaseError::fail)?;
    }
}

/// A zero tangent is skipped only when the other operand is finite: with an
/// infinite weight, `0 · ∞` makes the tangent NaN, on both paths.
#[test]
fn zero_tangent_against_infinity_stays_nan() {
    let case = ConvCase::plain(1, 2, 2, [4, 4], [3, 3], [(1, 1), (1, 1)]);
    let m = case.module();
    let x = Input::new(&case.x_shape(), 1, None, Tangent::Zero);
    let mut w = Input::new(&case.w_shape(), 2, None, Tangent::Random);
    w.value[4] = f64::INFINITY;
    let d = vec![x.dual(false), w.dual(false)];
    let fast = run(&m, d.clone(), &fast_opts());
    let gen = run(&m, d, &generic());
    assert!(
        gen.iter().any(|d| d.tangent.is_nan()),
        "the case has NaN tangents"
    );
    for (f, g) in fast.iter().zip(&gen) {
        assert_eq!(f.tangent.is_nan(), g.tangent.is_nan(), "{f:?} vs {g:?}");
        assert_eq!(f.value.is_nan(), g.value.is_nan(), "{f:?} vs {g:?}");
    }
}

/// The f64 and dual evaluations really take the kernels: their results are the
/// kernel's, bit for bit, and (for this case) not the generic loop's.
#[test]
fn f64_and_dual_convolutions_dispatch_to_the_kernel() {
    let case = ConvCase::plain(2, 16, 8, [6, 6], [3, 3], [(1, 1), (1, 1)]);
    let m = case.module();
    let x = Input::new(&case.x_shape(), 11, None, Tangent::Random);
    let w = Input::new(&case.w_shape(), 12, None, Tangent::Zero);
    let xs = x.f64(false).into_float().unwrap();
    let ws = w.f64(false).into_float().unwrap();
    let kernel = fast::convolution(&xs, &ws, &case.attrs(ConvDims::nchw(2)), &[2, 8, 6, 6]);
    let fast64 = run(&m, vec![x.f64(false), w.f64(false)], &fast_opts());
    let gen64 = run(&m, vec![x.f64(false), w.f64(false)], &generic());
    assert!(fast64.iter().zip(&kernel.data).all(|(a, b)| same(*a, *b)));
    assert!(fast64.iter().zip(&gen64).any(|(a, b)| !same(*a, *b)));
    let dual = run(&m, vec![x.dual(false), w.dual(false)], &fast_opts());
    assert!(dual
        .iter()
        .zip(&kernel.data)
        .all(|(d, k)| same(d.value, *k)));
}

/// Negative control: a dual convolution whose tangent drops the `K(x_v, w_t)`
/// term (a plausible dispatch bug, same shapes) is rejected by the comparison.
#[test]
fn comparison_rejects_a_dual_convolution_missing_a_tangent_term() {
    let case = ConvCase::plain(2, 3, 4, [5, 5], [3, 3], [(1, 1), (1, 1)]);
    let m = case.module();
    let x = Input::new(&case.x_shape(), 21, None, Tangent::Random);
    let w = Input::new(&case.w_shape(), 22, None, Tangent::Random);
    let d = vec![x.dual(false), w.dual(false)];
    let gen = run(&m, d.clone(), &generic());
    let abs = run(&m, vec![x.dual(true), w.dual(true)], &generic());
    let fast = run(&m, d.clone(), &fast_opts());
    close_dual(&fast, &gen, &abs, case.terms()).expect("the real dispatch agrees");

    let part = |v: &Value<Dual<f64>>, t: bool| {
        let t_ = v.as_float().unwrap();
        Tensor::new(
            t_.shape.clone(),
            t_.data
                .iter()
                .map(|d| if t { d.tangent } else { d.value })
                .collect(),
        )
    };
    let out = [2, 4, 5, 5];
    let value = fast::convolution(
        &part(&d[0], false),
        &part(&d[1], false),
        &case.attrs(ConvDims::nchw(2)),
        &out,
    );
    let only_x = fast::convolution(
        &part(&d[0], true),
        &part(&d[1], false),
        &case.attrs(ConvDims::nchw(2)),
        &out,
    );
    let buggy: Vec<Dual<f64>> = value
        .data
        .iter()
        .zip(&only_x.data)
        .map(|(&v, &t)| Dual::new(v, t))
        .collect();
    let err = close_dual(&buggy, &gen, &abs, case.terms()).expect_err("the bug is caught");
    assert!(err.starts_with("tangent"), "{err}");
}

// ---------------------------------------------------------------------------
// Reductions and windows

fn window_module(
    shape: &[usize],
    op: BinaryOp,
    init: f64,
    attrs: WindowAttrs,
    out: &[usize],
) -> Module {
    let mut b = Fb::new();
    let x = b.param(f32t(shape));
    let i = b.constant(init, f32t(&[]));
    let r = b.binary_region(op, ElemType::F32);
    let y = b.op(OpKind::ReduceWindow(attrs), &[x, i], vec![r], &[f32t(out)])[0];
    b.finish(&[y])
}

fn reducer_strategy() -> impl Strategy<Value = (BinaryOp, f64)> {
    prop_oneof![
        Just((BinaryOp::Add, 0.0)),
        Just((BinaryOp::Add, 0.5)),
        Just((BinaryOp::Maximum, f64::NEG_INFINITY)),
        Just((BinaryOp::Maximum, 1.0)),
        Just((BinaryOp::Minimum, f64::INFINITY)),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]

    #[test]
    fn reduce_window_agrees(n in 1usize..3, c in 1usize..3, h in 2usize..7, w in 2usize..7,
                            win in 1i64..4, stride in 1i64..3, pad in 0i64..2,
                            (op, init) in reducer_strategy(), levels in any::<bool>(),
                            seed in 0u64..1000, t in tangent_strategy()) {
        let win = win.min(h as i64 + 2 * pad).min(w as i64 + 2 * pad);
        let out_len = |s: usize| ((s as i64 + 2 * pad - win) / stride + 1) as usize;
        let attrs = WindowAttrs {
            window_dimensions: vec![1, 1, win, win],
            window_strides: vec![1, 1, stride, stride],
            base_dilations: vec![1; 4],
            window_dilations: vec![1; 4],
            padding: vec![(0, 0), (0, 0), (pad, pad), (pad, pad)],
        };
        let out = [n, c, out_len(h), out_len(w)];
        let m = window_module(&[n, c, h, w], op, init, attrs, &out);
        let input = Input::new(&[n, c, h, w], seed, levels.then_some(4), t);
        let k = if op == BinaryOp::Add { (win * win + 4) as f64 } else { 0.0 };
        check(&m, &[input], k).map_err(TestCaseError::fail)?;
    }

    #[test]
    fn reduce_agrees(shape in proptest::collection::vec(1usize..5, 1..4), mask in 1u8..8,
                     (op, init) in reducer_strategy(), levels in any::<bool>(),
                     seed in 0u64..1000, t in tangent_strategy()) {
        let rank = shape.len();
        let dims: Vec<usize> = (0..rank).filter(|d| mask & (1 << d) != 0).collect();
        prop_assume!(!dims.is_empty());
        let kept: Vec<usize> = (0..rank).filter(|d| !dims.contains(d)).map(|d| shape[d]).collect();
        let mut b = Fb::new();
        let x = b.param(f32t(&shape));
        let i = b.constant(init, f32t(&[]));
        let r = b.binary_region(op, ElemType::F32);
        let y = b.op(
            OpKind::Reduce { dims: dims.iter().map(|&d| d as i64).collect() },
            &[x, i],
            vec![r],
            &[f32t(&kept)],
        )[0];
        let m = b.finish(&[y]);
        let input = Input::new(&shape, seed, levels.then_some(3), t);
        let terms: usize = dims.iter().map(|&d| shape[d]).product();
        let k = if op == BinaryOp::Add { (terms + 4) as f64 } else { 0.0 };
        check(&m, &[input], k).map_err(TestCaseError::fail)?;
    }

    #[test]
    fn select_and_scatter_agrees(n in 1usize..3, h in 2usize..7, w in 2usize..7,
                                 win in 1i64..4, stride in 1i64..3, pad in 0i64..2,
                                 ge in any::<bool>(), levels in any::<bool>(), seed in 0u64..1000,
                                 tx in tangent_strategy(), ts in tangent_strategy()) {
        let win = win.min(h as i64 + 2 * pad).min(w as i64 + 2 * pad);
        let out_len = |s: usize| ((s as i64 + 2 * pad - win) / stride + 1) as usize;
        let src = [n, 2, out_len(h), out_len(w)];
        let shape = [n, 2, h, w];
        let mut b = Fb::new();
        let x = b.param(f32t(&shape));
        let s = b.param(f32t(&src));
        let z = b.constant(0.0, f32t(&[]));
        let scalar = f32t(&[]);
        let direction = if ge { CompareDirection::Ge } else { CompareDirection::Le };
        let sel = b.region(&[scalar.clone(), scalar], |b, a| {
            vec![b.op1(
                OpKind::Compare { direction, compare_type: None },
                &[a[0], a[1]],
                TensorType::scalar(ElemType::I1),
            )]
        });
        let sc = b.binary_region(BinaryOp::Add, ElemType::F32);
        let sa = ScatterWindowAttrs {
            window_dimensions: vec![1, 1, win, win],
            window_strides: vec![1, 1, stride, stride],
            padding: vec![(0, 0), (0, 0), (pad, pad), (pad, pad)],
        };
        let y = b.op(OpKind::SelectAndScatter(sa), &[x, s, z], vec![sel, sc], &[f32t(&shape)])[0];
        let m = b.finish(&[y]);
        let inputs = [
            Input::new(&shape, seed, levels.then_some(3), tx),
            Input::new(&src, seed + 5, None, ts),
        ];
        // Overlapping windows add several sources into one element.
        let k = (win * win + 4) as f64;
        check(&m, &inputs, k).map_err(TestCaseError::fail)?;
    }
}

/// Regression (found by `select_and_scatter_agrees`): a size-1 window with
/// stride 2 reads fewer operand rows than there are, so that dimension must not
/// split the problem into operand/source blocks of equal count — in f32 as well.
#[test]
fn strided_unit_window_scatters_to_the_window_position() {
    let operand = Tensor::new(vec![1, 2, 2, 2], (0..8).map(|i| i as f32).collect());
    let source = Tensor::new(vec![1, 2, 1, 1], vec![10.0f32, 20.0]);
    let attrs = ScatterWindowAttrs {
        window_dimensions: vec![1, 1, 1, 1],
        window_strides: vec![1, 1, 2, 2],
        padding: vec![(0, 0); 4],
    };
    let out = fast::select_and_scatter(
        &operand,
        &source,
        0.0,
        CompareDirection::Ge,
        &attrs,
        &[1, 2, 2, 2],
    );
    assert_eq!(out.data, vec![10.0, 0.0, 0.0, 0.0, 20.0, 0.0, 0.0, 0.0]);
}
