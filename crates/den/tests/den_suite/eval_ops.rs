//! Op-by-op tests of the generic evaluator against hand-computed results and
//! direct formulas written from the spec text (convolution, dot_general,
//! windows), plus the evaluator's errors, calls, margins and the fast path.

use den::{eval_func, EvalOptions, Tensor, Value};
use ir::*;

use crate::common::{generic, ConvCase, Fb};

fn f32t(shape: &[i64]) -> TensorType {
    TensorType::f32(shape.to_vec())
}

fn fval(shape: &[usize], data: Vec<f64>) -> Value<f64> {
    Value::Float(Tensor::new(shape.to_vec(), data), ElemType::F32)
}

fn run(m: &Module, inputs: Vec<Value<f64>>) -> Vec<Value<f64>> {
    eval_func(m, "main", inputs, &generic()).unwrap().outputs
}

fn floats(v: &Value<f64>) -> Vec<f64> {
    v.as_float().unwrap().data.clone()
}

fn ints(v: &Value<f64>) -> Vec<i64> {
    v.as_int().unwrap().data.clone()
}

/// Deterministic pseudo-random numbers (no dependency, reproducible cases).
struct Lcg(u64);
impl Lcg {
    fn next(&mut self) -> u64 {
        self.0 = self
            .0
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        self.0 >> 33
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
    /// Small dyadic values, so f64 sums are exact and comparisons meaningful.
    fn dyadic(&mut self) -> f64 {
        (self.below(33) as f64 - 16.0) / 8.0
    }
    fn vec(&mut self, n: usize) -> Vec<f64> {
        (0..n).map(|_| self.dyadic()).collect()
    }
}

#[test]
fn binary_arithmetic_follows_the_spec() {
    let mut b = Fb::new();
    let x = b.param(f32t(&[4]));
    let y = b.param(f32t(&[4]));
    let ops = [
        BinaryOp::Add,
        BinaryOp::Subtract,
        BinaryOp::Multiply,
        BinaryOp::Divide,
        BinaryOp::Remainder,
        BinaryOp::Maximum,
        BinaryOp::Minimum,
        BinaryOp::Power,
    ];
    let outs: Vec<ValueId> = ops
        .iter()
        .map(|&o| b.op1(OpKind::Binary(o), &[x, y], f32t(&[4])))
        .collect();
    let m = b.finish(&outs);
    let r = run(
        &m,
        vec![
            fval(&[4], vec![7.0, -7.0, 2.0, -0.0]),
            fval(&[4], vec![2.0, 2.0, -3.0, 0.0]),
        ],
    );
    assert_eq!(floats(&r[0]), vec![9.0, -5.0, -1.0, 0.0]);
    assert_eq!(floats(&r[1]), vec![5.0, -9.0, 5.0, -0.0]);
    assert_eq!(floats(&r[2]), vec![14.0, -14.0, -6.0, -0.0]);
    assert_eq!(floats(&r[3])[..3], [3.5, -3.5, -2.0 / 3.0]);
    assert!(floats(&r[3])[3].is_nan());
    // Remainder takes the dividend's sign.
    assert_eq!(floats(&r[4])[..3], [1.0, -1.0, 2.0]);
    let mx = floats(&r[5]);
    assert_eq!(mx, vec![7.0, 2.0, 2.0, 0.0]);
    // IEEE maximum(-0, +0) = +0, minimum = -0.
    assert!(mx[3].is_sign_positive());
    assert!(floats(&r[6])[3].is_sign_negative());
    assert_eq!(floats(&r[7])[..3], [49.0, 49.0, 0.125]);
}

#[test]
fn integer_and_logical_ops_wrap_to_their_type() {
    let i8t = TensorType::new(vec![3], ElemType::I8);
    let i1t = TensorType::new(vec![4], ElemType::I1);
    let mut b = Fb::new();
    let x = b.param(i8t.clone());
    let y = b.param(i8t.clone());
    let p = b.param(i1t.clone());
    let q = b.param(i1t.clone());
    let add = b.op1(OpKind::Binary(BinaryOp::Add), &[x, y], i8t.clone());
    let div = b.op1(OpKind::Binary(BinaryOp::Divide), &[x, y], i8t.clone());
    let and = b.op1(OpKind::Binary(BinaryOp::And), &[p, q], i1t.clone());
    let or = b.op1(OpKind::Binary(BinaryOp::Or), &[p, q], i1t.clone());
    let xor = b.op1(OpKind::Binary(BinaryOp::Xor), &[p, q], i1t.clone());
    let not = b.op1(OpKind::Unary(UnaryOp::Not), &[p], i1t.clone());
    let notx = b.op1(OpKind::Unary(UnaryOp::Not), &[x], i8t.clone());
    let m = b.finish(&[add, div, and, or, xor, not, notx]);
    let iv = |d: Vec<i64>, e| Value::<f64>::Int(Tensor::new(vec![d.len()], d), e);
    let r = run(
        &m,
        vec![
            iv(vec![100, -7, 5], ElemType::I8),
            iv(vec![100, 2, -2], ElemType::I8),
            iv(vec![0, 0, 1, 1], ElemType::I1),
            iv(vec![0, 1, 0, 1], ElemType::I1),
        ],
    );
    assert_eq!(ints(&r[0]), vec![-56, -5, 3]); // 200 wraps in i8
    assert_eq!(ints(&r[1]), vec![1, -3, -2]); // truncating division
    assert_eq!(ints(&r[2]), vec![0, 0, 0, 1]);
    assert_eq!(ints(&r[3]), vec![0, 1, 1, 1]);
    assert_eq!(ints(&r[4]), vec![0, 1, 1, 0]);
    assert_eq!(ints(&r[5]), vec![1, 1, 0, 0]);
    assert_eq!(ints(&r[6]), vec![-101, 6, -6]);
}

#[test]
fn compare_float_and_totalorder() {
    let i1 = TensorType::new(vec![3], ElemType::I1);
    let mut b = Fb::new();
    let x = b.param(f32t(&[3]));
    let y = b.param(f32t(&[3]));
    let mut outs = vec![];
    for d in CompareDirection::ALL {
        outs.push(b.op1(
            OpKind::Compare {
                direction: d,
                compare_type: None,
            },
            &[x, y],
            i1.clone(),
        ));
    }
    let tot = OpKind::Compare {
        direction: CompareDirection::Lt,
        compare_type: Some(CompareType::TotalOrder),
    };
    outs.push(b.op1(tot, &[x, y], i1.clone()));
    let m = b.finish(&outs);
    let r = run(
        &m,
        vec![
            fval(&[3], vec![1.0, -0.0, f64::NAN]),
            fval(&[3], vec![2.0, 0.0, 1.0]),
        ],
    );
    // EQ NE GE GT LE LT
    assert_eq!(ints(&r[0]), vec![0, 1, 0]);
    assert_eq!(ints(&r[1]), vec![1, 0, 1]);
    assert_eq!(ints(&r[2]), vec![0, 1, 0]);
    assert_eq!(ints(&r[3]), vec![0, 0, 0]);
    assert_eq!(ints(&r[4]), vec![1, 1, 0]);
    assert_eq!(ints(&r[5]), vec![1, 0, 0]);
    // Total order: -0 < +0; positive NaN above everything.
    assert_eq!(ints(&r[6]), vec![1, 1, 0]);
}

#[test]
fn select_clamp_convert() {
    let mut b = Fb::new();
    let p = b.param(TensorType::new(vec![3], ElemType::I1));
    let x = b.param(f32t(&[3]));
    let y = b.param(f32t(&[3]));
    let sel = b.op1(OpKind::Select, &[p, x, y], f32t(&[3]));
    let lo = b.constant(0.0, f32t(&[]));
    let hi = b.constant(6.0, f32t(&[]));
    let cl = b.op1(OpKind::Clamp, &[lo, x, hi], f32t(&[3]));
    let ci = b.op1(
        OpKind::Convert,
        &[x],
        TensorType::new(vec![3], ElemType::I32),
    );
    let cb = b.op1(
        OpKind::Convert,
        &[x],
        TensorType::new(vec![3], ElemType::I1),
    );
    let back = b.op1(OpKind::Convert, &[ci], f32t(&[3]));
    let m = b.finish(&[sel, cl, ci, cb, back]);
    let pv = Value::Int(Tensor::new(vec![3], vec![1, 0, 1]), ElemType::I1);
    let r = run(
        &m,
        vec![
            pv,
            fval(&[3], vec![-2.5, 0.0, 7.75]),
            fval(&[3], vec![10.0, 20.0, 30.0]),
        ],
    );
    assert_eq!(floats(&r[0]), vec![-2.5, 20.0, 7.75]);
    assert_eq!(floats(&r[1]), vec![0.0, 0.0, 6.0]);
    assert_eq!(ints(&r[2]), vec![-2, 0, 7]); // toward zero
    assert_eq!(ints(&r[3]), vec![1, 0, 1]);
    assert_eq!(floats(&r[4]), vec![-2.0, 0.0, 7.0]);
}

#[test]
fn data_movement_ops() {
    let mut b = Fb::new();
    let x = b.param(f32t(&[2, 3]));
    let tr = b.op1(
        OpKind::Transpose {
            permutation: vec![1, 0],
        },
        &[x],
        f32t(&[3, 2]),
    );
    let rs = b.op1(OpKind::Reshape, &[x], f32t(&[3, 2]));
    let rv = b.op1(OpKind::Reverse { dims: vec![1] }, &[x], f32t(&[2, 3]));
    let sl = b.op1(
        OpKind::Slice {
            start: vec![0, 1],
            limit: vec![2, 3],
            strides: vec![1, 2],
        },
        &[x],
        f32t(&[2, 1]),
    );
    let row = b.op1(
        OpKind::Slice {
            start: vec![1, 0],
            limit: vec![2, 3],
            strides: vec![1, 1],
        },
        &[x],
        f32t(&[1, 3]),
    );
    let bc = b.op1(
        OpKind::BroadcastInDim { dims: vec![0, 2] },
        &[row],
        f32t(&[2, 2, 3]),
    );
    let cc = b.op1(OpKind::Concatenate { dim: 1 }, &[x, x], f32t(&[2, 6]));
    let io = b.op1(
        OpKind::Iota { dim: 1 },
        &[],
        TensorType::new(vec![2, 3], ElemType::I32),
    );
    let m = b.finish(&[tr, rs, rv, sl, bc, cc, io]);
    let r = run(&m, vec![fval(&[2, 3], vec![1.0, 2.0, 3.0, 4.0, 5.0, 6.0])]);
    assert_eq!(floats(&r[0]), vec![1.0, 4.0, 2.0, 5.0, 3.0, 6.0]);
    assert_eq!(floats(&r[1]), vec![1.0, 2.0, 3.0, 4.0, 5.0, 6.0]);
    assert_eq!(floats(&r[2]), vec![3.0, 2.0, 1.0, 6.0, 5.0, 4.0]);
    assert_eq!(floats(&r[3]), vec![2.0, 5.0]);
    assert_eq!(
        floats(&r[4]),
        vec![4.0, 5.0, 6.0, 4.0, 5.0, 6.0, 4.0, 5.0, 6.0, 4.0, 5.0, 6.0]
    );
    assert_eq!(
        floats(&r[5]),
        vec![1.0, 2.0, 3.0, 1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 4.0, 5.0, 6.0]
    );
    assert_eq!(ints(&r[6]), vec![0, 1, 2, 0, 1, 2]);
}

#[test]
fn pad_with_interior_and_negative_edges() {
    let mut b = Fb::new();
    let x = b.param(f32t(&[2, 3]));
    let z = b.constant(0.0, f32t(&[]));
    // Dim 0: low 1, interior 1 → [0, a, 0, b] then high -1 crops the last: size 1+3-1 = 3.
    // Dim 1: low -1 crops the first, interior 1, high 2: 5 - 1 + 2 = 6.
    let p = b.op1(
        OpKind::Pad {
            low: vec![1, -1],
            high: vec![-1, 2],
            interior: vec![1, 1],
        },
        &[x, z],
        f32t(&[3, 6]),
    );
    let m = b.finish(&[p]);
    let r = run(&m, vec![fval(&[2, 3], vec![1.0, 2.0, 3.0, 4.0, 5.0, 6.0])]);
    #[rustfmt::skip]
    let want = vec![
        0.0, 0.0, 0.0, 0.0, 0.0, 0.0,
        0.0, 2.0, 0.0, 3.0, 0.0, 0.0,
        0.0, 0.0, 0.0, 0.0, 0.0, 0.0,
    ];
    assert_eq!(floats(&r[0]), want);
}

/// dot_general by its definition, batch and contracting dims given.
#[test]
fn dot_general_with_batch_and_contracting_dims() {
    // lhs [k=3, b=2, i=2], rhs [b=2, j=2, k=3]: result [b, i, j].
    let mut b = Fb::new();
    let x = b.param(f32t(&[3, 2, 2]));
    let y = b.param(f32t(&[2, 2, 3]));
    let dims = DotDims {
        lhs_batch: vec![1],
        rhs_batch: vec![0],
        lhs_contracting: vec![0],
        rhs_contracting: vec![2],
    };
    let d = b.op1(
        OpKind::DotGeneral {
            dims,
            precision_config: None,
        },
        &[x, y],
        f32t(&[2, 2, 2]),
    );
    let m = b.finish(&[d]);
    let mut g = Lcg(7);
    let (xl, yl) = (g.vec(12), g.vec(12));
    let r = run(
        &m,
        vec![fval(&[3, 2, 2], xl.clone()), fval(&[2, 2, 3], yl.clone())],
    );
    let mut want = vec![];
    for bb in 0..2 {
        for i in 0..2 {
            for j in 0..2 {
                want.push(
                    (0..3)
                        .map(|k| xl[k * 4 + bb * 2 + i] * yl[bb * 6 + j * 3 + k])
                        .sum::<f64>(),
                );
            }
        }
    }
    assert_eq!(floats(&r[0]), want);
}

impl ConvCase {
    /// The spec's construction, materialised: pad + dilate the lhs explicitly,
    /// reverse the kernel, then a plain strided, dilated window sum per group.
    fn reference(&self, x: &[f64], w: &[f64]) -> Vec<f64> {
        let [h, wd] = self.hw;
        let ci = self.c / self.fg;
        let nout = self.n / self.bg;
        let [oh, ow] = self.out_hw().unwrap();
        // Padded, dilated lhs (negative padding crops), as a map from padded
        // coordinates to values.
        let ph = ((h as i64 - 1) * self.ld[0] + 1 + self.pad[0].0 + self.pad[0].1) as usize;
        let pw = ((wd as i64 - 1) * self.ld[1] + 1 + self.pad[1].0 + self.pad[1].1) as usize;
        let mut padded = vec![0.0; self.n * self.c * ph * pw];
        for nb in 0..self.n {
            for c in 0..self.c {
                for i in 0..h {
                    for j in 0..wd {
                        let pi = self.pad[0].0 + i as i64 * self.ld[0];
                        let pj = self.pad[1].0 + j as i64 * self.ld[1];
                        if pi >= 0 && pj >= 0 && (pi as usize) < ph && (pj as usize) < pw {
                            padded[((nb * self.c + c) * ph + pi as usize) * pw + pj as usize] =
                                x[((nb * self.c + c) * h + i) * wd + j];
                        }
                    }
                }
            }
        }
        let [kh, kw] = self.k;
        let mut out = vec![0.0; nout * self.o * oh * ow];
        for b in 0..nout {
            for o in 0..self.o {
                let g = o / (self.o / self.fg);
                let nb = (o / (self.o / self.bg)) * nout + b;
                for y in 0..oh {
                    for z in 0..ow {
                        let mut s = 0.0;
                        for cc in 0..ci {
                            for a in 0..kh {
                                for bq in 0..kw {
                                    let pi = y * self.stride[0] as usize + a * self.rd[0] as usize;
                                    let pj = z * self.stride[1] as usize + bq * self.rd[1] as usize;
                                    let ka = if self.rev[0] { kh - 1 - a } else { a };
                                    let kb = if self.rev[1] { kw - 1 - bq } else { bq };
                                    s += padded[((nb * self.c + g * ci + cc) * ph + pi) * pw + pj]
                                        * w[((o * ci + cc) * kh + ka) * kw + kb];
                                }
                            }
                        }
                        out[((b * self.o + o) * oh + y) * ow + z] = s;
                    }
                }
            }
        }
        out
    }
}

fn random_conv_case(g: &mut Lcg) -> ConvCase {
    loop {
        let (fg, bg) = match g.below(3) {
            0 => (1, 1),
            1 => (1 + g.below(2) as usize, 1),
            _ => (1, 2),
        };
        let groups = fg.max(bg);
        let case = ConvCase {
            n: bg * (1 + g.below(2) as usize),
            c: fg * (1 + g.below(2) as usize),
            o: groups * (1 + g.below(2) as usize),
            hw: [2 + g.below(4) as usize, 2 + g.below(4) as usize],
            k: [1 + g.below(3) as usize, 1 + g.below(3) as usize],
            stride: [1 + g.below(2) as i64, 1 + g.below(3) as i64],
            pad: [
                (g.below(4) as i64 - 1, g.below(4) as i64 - 1),
                (g.below(3) as i64 - 1, g.below(3) as i64),
            ],
            ld: [1 + g.below(2) as i64, 1 + g.below(2) as i64],
            rd: [1 + g.below(2) as i64, 1 + g.below(2) as i64],
            rev: [g.below(2) == 1, g.below(2) == 1],
            fg,
            bg,
        };
        if case.out_hw().is_some() {
            return case;
        }
    }
}

#[test]
fn convolution_matches_the_spec_construction_on_random_cases() {
    let mut g = Lcg(2024);
    for _ in 0..60 {
        let c = random_conv_case(&mut g);
        let [oh, ow] = c.out_hw().unwrap();
        let ci = c.c / c.fg;
        let (hh, ww) = (c.hw[0] as i64, c.hw[1] as i64);
        let mut b = Fb::new();
        let x = b.param(f32t(&[c.n as i64, c.c as i64, hh, ww]));
        let w = b.param(f32t(&[c.o as i64, ci as i64, c.k[0] as i64, c.k[1] as i64]));
        let out_t = f32t(&[(c.n / c.bg) as i64, c.o as i64, oh as i64, ow as i64]);
        let y = b.op1(
            OpKind::Convolution(c.attrs(ConvDims::nchw(2))),
            &[x, w],
            out_t,
        );
        let m = b.finish(&[y]);
        let xs = g.vec(c.n * c.c * c.hw[0] * c.hw[1]);
        let ws = g.vec(c.o * ci * c.k[0] * c.k[1]);
        let r = run(
            &m,
            vec![
                fval(&[c.n, c.c, c.hw[0], c.hw[1]], xs.clone()),
                fval(&[c.o, ci, c.k[0], c.k[1]], ws.clone()),
            ],
        );
        assert_eq!(
            floats(&r[0]),
            c.reference(&xs, &ws),
            "case fg={} bg={}",
            c.fg,
            c.bg
        );
    }
}

fn permute(x: &[f64], shape: &[usize], perm: &[usize]) -> (Vec<f64>, Vec<usize>) {
    let t = den::Tensor::new(shape.to_vec(), x.to_vec());
    let s = t.strides();
    let out: Vec<usize> = perm.iter().map(|&p| shape[p]).collect();
    let n = x.len();
    let os = den::row_major_strides(&out);
    let mut data = vec![0.0; n];
    for (flat, v) in data.iter_mut().enumerate() {
        let src: usize = (0..out.len())
            .map(|k| (flat / os[k]) % out[k] * s[perm[k]])
            .sum();
        *v = x[src];
    }
    (data, out)
}

#[test]
fn convolution_honours_dimension_numbers() {
    // NHWC input, HWIO kernel, NHWC output: same numbers as NCHW after permuting.
    let mut g = Lcg(99);
    let c = ConvCase {
        n: 2,
        c: 4,
        o: 4,
        hw: [5, 4],
        k: [3, 2],
        stride: [2, 1],
        pad: [(1, 1), (0, 1)],
        ld: [1, 1],
        rd: [1, 2],
        rev: [false, true],
        fg: 2,
        bg: 1,
    };
    let [oh, ow] = c.out_hw().unwrap();
    let xs = g.vec(2 * 4 * 5 * 4);
    let ws = g.vec(4 * 2 * 3 * 2);
    let want = c.reference(&xs, &ws);
    let (x_nhwc, xs_shape) = permute(&xs, &[2, 4, 5, 4], &[0, 2, 3, 1]);
    let (w_hwio, ws_shape) = permute(&ws, &[4, 2, 3, 2], &[2, 3, 1, 0]);
    let dims = ConvDims::nhwc_hwio();
    let to_i = |s: &[usize]| s.iter().map(|&d| d as i64).collect::<Vec<_>>();
    let mut b = Fb::new();
    let x = b.param(f32t(&to_i(&xs_shape)));
    let w = b.param(f32t(&to_i(&ws_shape)));
    let y = b.op1(
        OpKind::Convolution(c.attrs(dims)),
        &[x, w],
        f32t(&[2, oh as i64, ow as i64, 4]),
    );
    let m = b.finish(&[y]);
    let r = run(&m, vec![fval(&xs_shape, x_nhwc), fval(&ws_shape, w_hwio)]);
    let (want_nhwc, _) = permute(&want, &[2, 4, oh, ow], &[0, 2, 3, 1]);
    assert_eq!(floats(&r[0]), want_nhwc);
}

#[test]
fn reduce_add_and_variadic_argmax() {
    let s = TensorType::scalar(ElemType::F32);
    let si = TensorType::scalar(ElemType::I32);
    let mut b = Fb::new();
    let x = b.param(f32t(&[2, 3]));
    let z = b.constant(0.0, s.clone());
    let add = b.binary_region(BinaryOp::Add, ElemType::F32);
    let sum = b.op(
        OpKind::Reduce { dims: vec![1] },
        &[x, z],
        vec![add],
        &[f32t(&[2])],
    )[0];
    // argmax over dim 1: body((v0, i0), (v1, i1)) = v0 >= v1 ? (v0, i0) : (v1, i1).
    let io = b.op1(
        OpKind::Iota { dim: 1 },
        &[],
        TensorType::new(vec![2, 3], ElemType::I32),
    );
    let ninf = b.constant(f64::NEG_INFINITY, s.clone());
    let zero_i = b.op1(OpKind::Constant(DenseData::Int(vec![0])), &[], si.clone());
    let body = b.region(&[s.clone(), si.clone(), s.clone(), si.clone()], |b, a| {
        let i1 = TensorType::scalar(ElemType::I1);
        let ge = b.op1(
            OpKind::Compare {
                direction: CompareDirection::Ge,
                compare_type: None,
            },
            &[a[0], a[2]],
            i1,
        );
        let v = b.op1(OpKind::Select, &[ge, a[0], a[2]], s.clone());
        let i = b.op1(OpKind::Select, &[ge, a[1], a[3]], si.clone());
        vec![v, i]
    });
    let am = b.op(
        OpKind::Reduce { dims: vec![1] },
        &[x, io, ninf, zero_i],
        vec![body],
        &[f32t(&[2]), TensorType::new(vec![2], ElemType::I32)],
    );
    let m = b.finish(&[sum, am[0], am[1]]);
    let r = run(&m, vec![fval(&[2, 3], vec![1.0, 5.0, 2.0, 7.0, -1.0, 7.0])]);
    assert_eq!(floats(&r[0]), vec![8.0, 13.0]);
    assert_eq!(floats(&r[1]), vec![5.0, 7.0]);
    assert_eq!(ints(&r[2]), vec![1, 0]); // first maximal element on ties
}

#[test]
fn reduce_window_max_pool_with_padding_and_avg_with_dilation() {
    let mut b = Fb::new();
    let x = b.param(f32t(&[1, 1, 4, 4]));
    let mp = b.max_pool_3x3_s2_p1(x, &[1, 1, 2, 2]);
    // Sum pool 2x1 with base dilation 2 on dim 3 (holes read as init 0) and window dilation 2 on dim 2.
    let z = b.constant(0.0, f32t(&[]));
    let add = b.binary_region(BinaryOp::Add, ElemType::F32);
    let wa = WindowAttrs {
        window_dimensions: vec![1, 1, 2, 2],
        window_strides: vec![1, 1, 1, 1],
        base_dilations: vec![1, 1, 1, 2],
        window_dilations: vec![1, 1, 2, 1],
        padding: vec![(0, 0); 4],
    };
    // dim 2: 4 - (2-1)*2 = 2 outputs; dim 3: dilated 7, window 2 → 6 outputs.
    let sp = b.op(
        OpKind::ReduceWindow(wa),
        &[x, z],
        vec![add],
        &[f32t(&[1, 1, 2, 6])],
    )[0];
    let m = b.finish(&[mp, sp]);
    let xs: Vec<f64> = (0..16).map(|v| ((v * 7) % 16) as f64).collect();
    // x = [[0,7,14,5],[12,3,10,1],[8,15,6,13],[4,11,2,9]]
    let r = run(&m, vec![fval(&[1, 1, 4, 4], xs)]);
    // Window rows [-1,1] x cols [-1,1] etc.
    assert_eq!(floats(&r[0]), vec![12.0, 14.0, 15.0, 15.0]);
    // Row pairs (0,2) and (1,3); dilated cols: x0 _ x1 _ x2 _ x3, window 2 covers one real element each.
    let want = vec![
        0.0 + 8.0,
        7.0 + 15.0,
        7.0 + 15.0,
        14.0 + 6.0,
        14.0 + 6.0,
        5.0 + 13.0,
        12.0 + 4.0,
        3.0 + 11.0,
        3.0 + 11.0,
        10.0 + 2.0,
        10.0 + 2.0,
        1.0 + 9.0,
    ];
    assert_eq!(floats(&r[1]), want);
}

fn select_and_scatter_3x3_s2_p1(b: &mut Fb, x: ValueId, dy: ValueId, shape: &[i64]) -> ValueId {
    let s = f32t(&[]);
    let i1 = TensorType::scalar(ElemType::I1);
    let z = b.constant(0.0, s.clone());
    let sel = b.region(&[s.clone(), s.clone()], |b, a| {
        vec![b.op1(
            OpKind::Compare {
                direction: CompareDirection::Ge,
                compare_type: None,
            },
            &[a[0], a[1]],
            i1,
        )]
    });
    let sc = b.binary_region(BinaryOp::Add, ElemType::F32);
    let sa = ScatterWindowAttrs {
        window_dimensions: vec![1, 1, 3, 3],
        window_strides: vec![1, 1, 2, 2],
        padding: vec![(0, 0), (0, 0), (1, 1), (1, 1)],
    };
    b.op(
        OpKind::SelectAndScatter(sa),
        &[x, dy, z],
        vec![sel, sc],
        &[f32t(shape)],
    )[0]
}

#[test]
fn select_and_scatter_accumulates_overlapping_windows() {
    let mut b = Fb::new();
    let x = b.param(f32t(&[1, 1, 4, 4]));
    let dy = b.param(f32t(&[1, 1, 2, 2]));
    let r = select_and_scatter_3x3_s2_p1(&mut b, x, dy, &[1, 1, 4, 4]);
    let m = b.finish(&[r]);
    // x = [[0,7,14,5],[12,3,10,1],[8,15,6,13],[4,11,2,9]]: window maxima at
    // (1,0)=12, (0,2)=14, (2,1)=15, (2,1)=15 — the last two windows overlap on 15.
    let xs: Vec<f64> = (0..16).map(|v| ((v * 7) % 16) as f64).collect();
    let out = run(
        &m,
        vec![
            fval(&[1, 1, 4, 4], xs),
            fval(&[1, 1, 2, 2], vec![1.0, 2.0, 4.0, 8.0]),
        ],
    );
    let mut want = vec![0.0; 16];
    want[4] = 1.0;
    want[2] = 2.0;
    want[9] = 4.0 + 8.0;
    assert_eq!(floats(&out[0]), want);

    // Ties: the first maximal element in window scan order gets the gradient.
    let ties = run(
        &m,
        vec![
            fval(&[1, 1, 4, 4], vec![1.0; 16]),
            fval(&[1, 1, 2, 2], vec![1.0, 2.0, 4.0, 8.0]),
        ],
    );
    // Window (i,j) starts at row 2i-1, col 2j-1; its first real element is
    // (max(2i-1,0), max(2j-1,0)).
    let mut want = vec![0.0; 16];
    want[0] = 1.0;
    want[1] = 2.0;
    want[4] = 4.0;
    want[5] = 8.0;
    assert_eq!(floats(&ties[0]), want);
}

#[test]
fn generic_select_and_scatter_region_matches_recognised_one() {
    // A scatter region the evaluator does not recognise (a + 1·b via multiply)
    // takes the region-evaluating path; it must agree with the direct path.
    let s = f32t(&[]);
    let mut b = Fb::new();
    let x = b.param(f32t(&[1, 1, 4, 4]));
    let dy = b.param(f32t(&[1, 1, 2, 2]));
    let direct = select_and_scatter_3x3_s2_p1(&mut b, x, dy, &[1, 1, 4, 4]);
    let i1 = TensorType::scalar(ElemType::I1);
    let z = b.constant(0.0, s.clone());
    let sel = b.region(&[s.clone(), s.clone()], |b, a| {
        let ge = b.op1(
            OpKind::Compare {
                direction: CompareDirection::Ge,
                compare_type: None,
            },
            &[a[0], a[1]],
            i1.clone(),
        );
        let t = b.op1(OpKind::Constant(DenseData::Int(vec![1])), &[], i1.clone());
        vec![b.op1(OpKind::Binary(BinaryOp::And), &[ge, t], i1.clone())]
    });
    let sc = b.region(&[s.clone(), s.clone()], |b, a| {
        let one = b.constant(1.0, s.clone());
        let m = b.op1(OpKind::Binary(BinaryOp::Multiply), &[a[1], one], s.clone());
        vec![b.op1(OpKind::Binary(BinaryOp::Add), &[a[0], m], s.clone())]
    });
    let sa = ScatterWindowAttrs {
        window_dimensions: vec![1, 1, 3, 3],
        window_strides: vec![1, 1, 2, 2],
        padding: vec![(0, 0), (0, 0), (1, 1), (1, 1)],
    };
    let generic_r = b.op(
        OpKind::SelectAndScatter(sa),
        &[x, dy, z],
        vec![sel, sc],
        &[f32t(&[1, 1, 4, 4])],
    )[0];
    let m = b.finish(&[direct, generic_r]);
    let mut g = Lcg(5);
    let r = run(
        &m,
        vec![
            fval(&[1, 1, 4, 4], g.vec(16)),
            fval(&[1, 1, 2, 2], g.vec(4)),
        ],
    );
    assert_eq!(floats(&r[0]), floats(&r[1]));
}

#[test]
fn call_all_reduce_and_errors() {
    // @main calls @double; all_reduce is the identity on one replica.
    let mut d = Fb::new();
    let a = d.param(f32t(&[2]));
    let s = d.op1(OpKind::Binary(BinaryOp::Add), &[a, a], f32t(&[2]));
    let mut dm = d.finish(&[s]);
    let mut double = dm.funcs.pop().unwrap();
    double.name = "double".into();
    double.visibility = Visibility::Private;

    let mut b = Fb::new();
    let x = b.param(f32t(&[2]));
    let c = b.op1(
        OpKind::Call {
            callee: "double".into(),
        },
        &[x],
        f32t(&[2]),
    );
    let add = b.binary_region(BinaryOp::Add, ElemType::F32);
    let ar = OpKind::AllReduce {
        replica_groups: vec![vec![0]],
        channel_id: None,
        use_global_device_ids: false,
    };
    let r = b.op(ar, &[c], vec![add], &[f32t(&[2])])[0];
    let mut m = b.finish(&[r]);
    m.funcs.push(double);
    let out = run(&m, vec![fval(&[2], vec![1.5, -2.0])]);
    assert_eq!(floats(&out[0]), vec![3.0, -4.0]);

    let opts = EvalOptions {
        replicas: 4,
        ..generic()
    };
    let e = eval_func(&m, "main", vec![fval(&[2], vec![1.0, 2.0])], &opts).unwrap_err();
    assert_eq!(e.op, "stablehlo.all_reduce");
    assert!(e.message.contains("needs the replica evaluator"), "{e}");

    let e = eval_func(
        &m,
        "main",
        vec![fval(&[3], vec![1.0, 2.0, 3.0])],
        &generic(),
    )
    .unwrap_err();
    assert!(
        e.to_string()
            .contains("input 0 has type tensor<3xf32>, the signature says tensor<2xf32>"),
        "{e}"
    );
    let e = eval_func::<f64>(&m, "main", vec![], &generic()).unwrap_err();
    assert!(e.message.contains("expected 1 inputs, got 0"), "{e}");
    let e = eval_func::<f64>(&m, "nope", vec![], &generic()).unwrap_err();
    assert!(e.message.contains("no function @nope"), "{e}");
}

#[test]
fn relu_at_zero_is_a_tie_and_margins_are_recorded() {
    let mut b = Fb::new();
    let x = b.param(f32t(&[4]));
    let z = b.constant(0.0, f32t(&[4]));
    let relu = b.op1(OpKind::Binary(BinaryOp::Maximum), &[x, z], f32t(&[4]));
    let m = b.finish(&[relu]);
    let opts = EvalOptions {
        record_margins: true,
        ..generic()
    };
    let ev = eval_func(
        &m,
        "main",
        vec![fval(&[4], vec![0.5, 0.0, -0.25, 2.0])],
        &opts,
    )
    .unwrap();
    assert_eq!(floats(&ev.outputs[0]), vec![0.5, 0.0, 0.0, 2.0]);
    assert_eq!(ev.margins.len(), 1);
    let mg = &ev.margins[0];
    assert_eq!(
        (mg.op, mg.op_index, mg.min, mg.argmin, mg.ties, mg.decisions),
        ("stablehlo.maximum", 1, 0.0, 1, 1, 4)
    );
    // Away from the kink: the margin is the distance to it.
    let ev = eval_func(
        &m,
        "main",
        vec![fval(&[4], vec![0.5, 0.125, -0.25, 2.0])],
        &opts,
    )
    .unwrap();
    assert_eq!(
        (ev.margins[0].min, ev.margins[0].argmin, ev.margins[0].ties),
        (0.125, 1, 0)
    );
    // Without record_margins nothing is recorded.
    let ev = eval_func(&m, "main", vec![fval(&[4], vec![0.0; 4])], &generic()).unwrap();
    assert!(ev.margins.is_empty());
}

#[test]
fn pool_margins_are_top_two_gaps() {
    let mut b = Fb::new();
    let x = b.param(f32t(&[1, 1, 4, 4]));
    let dy = b.param(f32t(&[1, 1, 2, 2]));
    let mp = b.max_pool_3x3_s2_p1(x, &[1, 1, 2, 2]);
    let ss = select_and_scatter_3x3_s2_p1(&mut b, x, dy, &[1, 1, 4, 4]);
    let m = b.finish(&[mp, ss]);
    let xs: Vec<f64> = (0..16).map(|v| ((v * 7) % 16) as f64).collect();
    let opts = EvalOptions {
        record_margins: true,
        ..generic()
    };
    let ev = eval_func(
        &m,
        "main",
        vec![fval(&[1, 1, 4, 4], xs), fval(&[1, 1, 2, 2], vec![1.0; 4])],
        &opts,
    )
    .unwrap();
    // Windows: {0,7,12,3} gap 5; {7,14,5,3,10,1} gap 4; {12,3,8,15,4,11} gap 3;
    // {3,10,1,15,6,13,11,2,9} gap 2.
    let names: Vec<&str> = ev.margins.iter().map(|m| m.op).collect();
    assert_eq!(
        names,
        vec!["stablehlo.reduce_window", "stablehlo.select_and_scatter"]
    );
    for mg in &ev.margins {
        assert_eq!(
            (mg.min, mg.argmin, mg.ties, mg.decisions),
            (2.0, 3, 0, 4),
            "{}",
            mg.op
        );
    }
}

#[test]
fn fast_f32_path_agrees_with_generic() {
    let mut b = Fb::new();
    let x = b.param(f32t(&[2, 3, 6, 6]));
    let w = b.param(f32t(&[4, 3, 3, 3]));
    let k = b.param(f32t(&[4, 5]));
    let mut a = ConvAttrs::plain2d();
    a.padding = vec![(1, 1), (1, 1)];
    let y = b.op1(OpKind::Convolution(a), &[x, w], f32t(&[2, 4, 6, 6]));
    let p = b.max_pool_3x3_s2_p1(y, &[2, 4, 3, 3]);
    let z = b.constant(0.0, f32t(&[]));
    let add = b.binary_region(BinaryOp::Add, ElemType::F32);
    let s = b.op(
        OpKind::Reduce { dims: vec![2, 3] },
        &[p, z],
        vec![add],
        &[f32t(&[2, 4])],
    )[0];
    let dims = DotDims {
        lhs_batch: vec![],
        rhs_batch: vec![],
        lhs_contracting: vec![1],
        rhs_contracting: vec![0],
    };
    let d = b.op1(
        OpKind::DotGeneral {
            dims,
            precision_config: None,
        },
        &[s, k],
        f32t(&[2, 5]),
    );
    let m = b.finish(&[d]);
    let mut g = Lcg(11);
    let (xs, ws, ks) = (g.vec(2 * 3 * 36), g.vec(4 * 27), g.vec(20));
    let f32v = |shape: &[usize], v: &[f64]| {
        Value::<f32>::Float(
            Tensor::new(shape.to_vec(), v.iter().map(|&x| x as f32).collect()),
            ElemType::F32,
        )
    };
    let inputs = || {
        vec![
            f32v(&[2, 3, 6, 6], &xs),
            f32v(&[4, 3, 3, 3], &ws),
            f32v(&[4, 5], &ks),
        ]
    };
    let fast = eval_func(&m, "main", inputs(), &EvalOptions::default()).unwrap();
    let slow = eval_func(&m, "main", inputs(), &generic()).unwrap();
    // Dyadic inputs with few bits: every partial sum is exact in f32, so any
    // summation order gives the same result.
    assert_eq!(fast.outputs, slow.outputs);
}
