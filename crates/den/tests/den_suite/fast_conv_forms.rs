//! Agreement of `den::fast::convolution` (f32 and f64) with the StableHLO
//! convolution formula, written out independently here, on the forms a train
//! step uses: the cifar8 step's own three (forward, input-VJP with a reversed
//! kernel, weight-VJP on transposed operands — `[b, f, 0, 1] x [o, i, 0, 1] ->
//! [b, f, 0, 1]`, 3×3, pad 1), and the forms other nets produce (strides,
//! XLA-SAME and negative pads, lhs dilation 2, window dilation, feature groups
//! and depthwise, batch groups, permuted dimension numbers), at batch 1/2/3 with
//! odd and even H ≠ W, at sizes that reach every path of the kernels (partial
//! register tiles, several output-feature tiles, reduction blocks, reduction
//! slices).
//!
//! Element `i` of the fast result may differ from the formula by at most
//! `n · (eps_T + eps_f64) · Σ|terms_i|` for `n` accumulated terms (the fast
//! kernels sum in another order; the formula is summed in f64). Negative
//! controls show the check rejects a kernel result with one tap dropped and one
//! with the kernel's spatial axes swapped.

use den::fast;
use den::Tensor;
use ir::{ConvAttrs, ConvDims};
use proptest::prelude::*;

/// Deterministic values in `[-2, 2)` on a 1/64 grid (exact in f32 and f64).
fn data(len: usize, seed: u64) -> Vec<f64> {
    crate::common::xorshift64star(seed)
        .take(len)
        .map(|bits| ((bits >> 56) as f64 - 128.0) / 64.0)
        .collect()
}

/// One 2-D convolution: logical shapes, window attributes and the physical
/// position of every logical dimension (`[batch, feature, h, w]` for lhs and
/// result, `[out_feature, in_feature, h, w]` for the kernel).
#[derive(Clone, Debug)]
struct Case {
    batch: usize,
    in_features: usize,
    out_features: usize,
    in_hw: [usize; 2],
    kernel_hw: [usize; 2],
    stride: [usize; 2],
    pad: [(i64, i64); 2],
    lhs_dilation: [usize; 2],
    rhs_dilation: [usize; 2],
    reversal: [bool; 2],
    feature_groups: usize,
    batch_groups: usize,
    lhs_layout: [usize; 4],
    rhs_layout: [usize; 4],
    out_layout: [usize; 4],
}

const NCHW: [usize; 4] = [0, 1, 2, 3];

impl Case {
    /// NCHW / OIHW, stride 1, no padding or dilation, one group.
    fn plain(batch: usize, c: usize, o: usize, hw: [usize; 2], k: [usize; 2]) -> Case {
        Case {
            batch,
            in_features: c,
            out_features: o,
            in_hw: hw,
            kernel_hw: k,
            stride: [1, 1],
            pad: [(0, 0); 2],
            lhs_dilation: [1, 1],
            rhs_dilation: [1, 1],
            reversal: [false, false],
            feature_groups: 1,
            batch_groups: 1,
            lhs_layout: NCHW,
            rhs_layout: NCHW,
            out_layout: NCHW,
        }
    }
    fn pad(mut self, pad: [(i64, i64); 2]) -> Case {
        self.pad = pad;
        self
    }
    fn stride(mut self, s: [usize; 2]) -> Case {
        self.stride = s;
        self
    }

    /// Output extent along spatial dimension `s` (None when the window does not fit).
    fn out_len(&self, s: usize) -> Option<usize> {
        let dilated = (self.in_hw[s] as i64 - 1) * self.lhs_dilation[s] as i64 + 1;
        let padded = dilated + self.pad[s].0 + self.pad[s].1;
        let window = (self.kernel_hw[s] as i64 - 1) * self.rhs_dilation[s] as i64 + 1;
        (self.in_hw[s] > 0 && padded >= window)
            .then(|| ((padded - window) / self.stride[s] as i64 + 1) as usize)
    }
    fn out_hw(&self) -> [usize; 2] {
        [self.out_len(0).unwrap(), self.out_len(1).unwrap()]
    }
    fn valid(&self) -> bool {
        self.out_len(0).is_some()
            && self.out_len(1).is_some()
            && self.in_features.is_multiple_of(self.feature_groups)
            && self
                .out_features
                .is_multiple_of(self.feature_groups * self.batch_groups)
            && self.batch.is_multiple_of(self.batch_groups)
            && (self.feature_groups == 1 || self.batch_groups == 1)
    }

    fn lhs_logical(&self) -> [usize; 4] {
        [self.batch, self.in_features, self.in_hw[0], self.in_hw[1]]
    }
    fn rhs_logical(&self) -> [usize; 4] {
        let cg = self.in_features / self.feature_groups;
        [self.out_features, cg, self.kernel_hw[0], self.kernel_hw[1]]
    }
    fn out_logical(&self) -> [usize; 4] {
        let [oh, ow] = self.out_hw();
        [self.batch / self.batch_groups, self.out_features, oh, ow]
    }

    fn attrs(&self) -> ConvAttrs {
        let l = self.lhs_layout.map(|d| d as i64);
        let r = self.rhs_layout.map(|d| d as i64);
        let o = self.out_layout.map(|d| d as i64);
        ConvAttrs {
            window_strides: self.stride.iter().map(|&s| s as i64).collect(),
            padding: self.pad.to_vec(),
            lhs_dilation: self.lhs_dilation.iter().map(|&s| s as i64).collect(),
            rhs_dilation: self.rhs_dilation.iter().map(|&s| s as i64).collect(),
            window_reversal: self.reversal.to_vec(),
            dims: ConvDims {
                input_batch: l[0],
                input_feature: l[1],
                input_spatial: vec![l[2], l[3]],
                kernel_output_feature: r[0],
                kernel_input_feature: r[1],
                kernel_spatial: vec![r[2], r[3]],
                output_batch: o[0],
                output_feature: o[1],
                output_spatial: vec![o[2], o[3]],
            },
            feature_group_count: self.feature_groups as i64,
            batch_group_count: self.batch_groups as i64,
            precision_config: None,
        }
    }
}

/// Physical shape of a logical shape laid out by `layout` (logical dim j sits at
/// physical position layout[j]).
fn physical(logical: [usize; 4], layout: [usize; 4]) -> Vec<usize> {
    let mut shape = vec![0; 4];
    for j in 0..4 {
        shape[layout[j]] = logical[j];
    }
    shape
}

/// Flat physical offset of logical index `idx`.
fn offset(idx: [usize; 4], logical: [usize; 4], layout: [usize; 4]) -> usize {
    let shape = physical(logical, layout);
    let mut pidx = [0; 4];
    for j in 0..4 {
        pidx[layout[j]] = idx[j];
    }
    pidx.iter().zip(&shape).fold(0, |acc, (&i, &n)| acc * n + i)
}

/// The formula, in f64, in the result's physical layout: per element its value
/// and `Σ|terms|`, and the number of terms per element.
fn formula(case: &Case, lhs: &[f64], rhs: &[f64]) -> (Vec<(f64, f64)>, usize) {
    let (ll, rl, ol) = (case.lhs_logical(), case.rhs_logical(), case.out_logical());
    let [out_batch, o_total, oh, ow] = ol;
    let cg = rl[1];
    let og_f = o_total / case.feature_groups;
    let og_b = o_total / case.batch_groups;
    let mut out = vec![(0.0, 0.0); ol.iter().product()];
    for b in 0..out_batch {
        for o in 0..o_total {
            // Batch group: which block of examples; feature group: which block of features.
            let example = (o / og_b) * out_batch + b;
            let first_c = (o / og_f) * cg;
            for y in 0..oh {
                for x in 0..ow {
                    let (mut v, mut a) = (0.0, 0.0);
                    for ci in 0..cg {
                        for ky in 0..rl[2] {
                            for kx in 0..rl[3] {
                                let pos = [y, x];
                                let k = [ky, kx];
                                let mut src = [0usize; 2];
                                let mut inside = true;
                                for s in 0..2 {
                                    let q = (pos[s] * case.stride[s] + k[s] * case.rhs_dilation[s])
                                        as i64
                                        - case.pad[s].0;
                                    let d = case.lhs_dilation[s] as i64;
                                    if q < 0 || q % d != 0 || q / d >= case.in_hw[s] as i64 {
                                        inside = false;
                                    } else {
                                        src[s] = (q / d) as usize;
                                    }
                                }
                                if !inside {
                                    continue;
                                }
                                let kk = [
                                    if case.reversal[0] { rl[2] - 1 - ky } else { ky },
                                    if case.reversal[1] { rl[3] - 1 - kx } else { kx },
                                ];
                                let xv = lhs[offset(
                                    [example, first_c + ci, src[0], src[1]],
                                    ll,
                                    case.lhs_layout,
                                )];
                                let wv = rhs[offset([o, ci, kk[0], kk[1]], rl, case.rhs_layout)];
                                v += xv * wv;
                                a += (xv * wv).abs();
                            }
                        }
                    }
                    out[offset([b, o, y, x], ol, case.out_layout)] = (v, a);
                }
            }
        }
    }
    (out, cg * rl[2] * rl[3])
}

/// Checks a fast result against the formula within `n · (eps + eps_f64) · Σ|terms|`.
fn agree(
    what: &str,
    fast: &[f64],
    eps: f64,
    expected: &[(f64, f64)],
    terms: usize,
) -> Result<(), String> {
    if fast.len() != expected.len() {
        return Err(format!(
            "{what}: {} elements, expected {}",
            fast.len(),
            expected.len()
        ));
    }
    let n = terms.max(1) as f64;
    for (i, (&f, &(v, a))) in fast.iter().zip(expected).enumerate() {
        let bound = n * (eps + f64::EPSILON) * a;
        if (f - v).is_nan() || (f - v).abs() > bound {
            return Err(format!(
                "{what}: element {i}: fast {f} vs formula {v} (|err| {:e} > bound {bound:e})",
                (f - v).abs()
            ));
        }
    }
    Ok(())
}

/// Operands of a case (physical layouts), as f64 values exact in f32.
fn operands(case: &Case, seed: u64) -> (Vec<f64>, Vec<f64>) {
    let nl: usize = case.lhs_logical().iter().product();
    let nr: usize = case.rhs_logical().iter().product();
    (data(nl, seed), data(nr, seed ^ 0x5555))
}

/// Runs the case through the f32 and f64 fast kernels on the given kernel
/// values (possibly corrupted) and checks both against the formula on `rhs`.
fn check_with_kernel(case: &Case, lhs: &[f64], rhs: &[f64], kernel: &[f64]) -> Result<(), String> {
    let attrs = case.attrs();
    let lshape = physical(case.lhs_logical(), case.lhs_layout);
    let rshape = physical(case.rhs_logical(), case.rhs_layout);
    let oshape = physical(case.out_logical(), case.out_layout);
    let (expected, terms) = formula(case, lhs, rhs);

    let l32 = Tensor::new(lshape.clone(), lhs.iter().map(|&v| v as f32).collect());
    let r32 = Tensor::new(rshape.clone(), kernel.iter().map(|&v| v as f32).collect());
    let out32 = fast::convolution(&l32, &r32, &attrs, &oshape);
    assert_eq!(out32.shape, oshape);
    let f32s: Vec<f64> = out32.data.iter().map(|&v| v as f64).collect();
    agree("f32", &f32s, f32::EPSILON as f64, &expected, terms)?;

    let l64 = Tensor::new(lshape, lhs.to_vec());
    let r64 = Tensor::new(rshape, kernel.to_vec());
    let out64 = fast::convolution(&l64, &r64, &attrs, &oshape);
    agree("f64", &out64.data, f64::EPSILON, &expected, terms)
}

fn check(case: &Case, seed: u64) {
    assert!(case.valid(), "invalid test case {case:?}");
    let (lhs, rhs) = operands(case, seed);
    if let Err(e) = check_with_kernel(case, &lhs, &rhs, &rhs) {
        panic!("{e}\ncase: {case:?}");
    }
}

/// The cifar8 step's forward / input-VJP shape: NCHW, 3×3, stride 1, pad 1.
fn step_forward(batch: usize, c: usize, o: usize, hw: [usize; 2]) -> Case {
    Case::plain(batch, c, o, hw, [3, 3]).pad([(1, 1), (1, 1)])
}

/// The cifar8 step's weight-VJP: `conv(xᵀ [C, N, H, W], dyᵀ [O, N, H, W])` with
/// the forward's attributes gives `[C, O, 3, 3]` (pad 1 → 3×3 result).
fn step_weight_vjp(batch: usize, c: usize, o: usize, hw: [usize; 2]) -> Case {
    Case::plain(c, batch, o, hw, hw).pad([(1, 1), (1, 1)])
}

#[test]
fn step_forward_and_input_vjp_forms() {
    for (i, &(batch, c, o, hw)) in [
        (1, 3, 16, [8, 8]),
        (2, 16, 16, [7, 5]),
        (3, 16, 32, [6, 9]),
        (2, 32, 16, [4, 4]),
        (3, 5, 7, [9, 6]),
        (1, 32, 32, [2, 3]),
    ]
    .iter()
    .enumerate()
    {
        check(&step_forward(batch, c, o, hw), i as u64);
        // Input-VJP as the step writes it (kernel transposed and reversed by
        // separate ops) is the forward form; with the reversal as an attribute:
        let mut reversed = step_forward(batch, o, c, hw);
        reversed.reversal = [true, true];
        check(&reversed, 100 + i as u64);
    }
}

#[test]
fn batch_split_into_tasks_with_a_short_last_task() {
    // 35 positions per example: tasks of 6 examples (210 rows), the last one
    // holding 1 example whose 35 rows are not a whole number of register tiles.
    check(&step_forward(7, 3, 5, [7, 5]), 150);
    check(&step_forward(13, 2, 17, [5, 7]), 151);
}

#[test]
fn step_weight_vjp_forms() {
    for (i, &(batch, c, o, hw)) in [
        (1, 3, 16, [8, 8]),
        (2, 16, 16, [7, 5]),
        (3, 16, 32, [6, 9]),
        (3, 32, 32, [4, 4]),
        (2, 5, 3, [5, 8]),
    ]
    .iter()
    .enumerate()
    {
        check(&step_weight_vjp(batch, c, o, hw), 200 + i as u64);
    }
}

#[test]
fn weight_vjp_with_long_reductions_sliced_and_blocked() {
    // Few outputs and reductions of 2,048 / 3,456 / 4,096 terms: the
    // reduction-sliced path, with several L1 blocks per slice.
    check(&step_weight_vjp(8, 3, 5, [16, 16]), 300);
    check(&step_weight_vjp(6, 4, 9, [24, 24]), 301);
    check(&step_weight_vjp(16, 16, 32, [16, 16]), 302);
}

#[test]
fn forward_with_long_reduction_and_several_feature_tiles() {
    // 96 features × 7×7 taps = 4,704 terms: more than one reduction block per
    // row pass; 20 output features: two f32 tiles, three f64 tiles.
    check(
        &Case::plain(2, 96, 20, [9, 8], [7, 7]).pad([(3, 3), (3, 3)]),
        400,
    );
}

#[test]
fn wide_and_tail_feature_tiles_of_the_avx512_kernels() {
    // 40 and 72 output features pad to 48 and 80: one and two 32-wide f32
    // tiles followed by a 16-wide last one (AVX-512), 16-wide tiles only
    // (AVX2); f64 runs 16-wide tiles then an 8-wide one. Forward (odd H ≠ W,
    // stride 1 and 2, the stem's 7×7/s2 pad 3) and weight-VJP (sliced
    // reduction) forms.
    check(&step_forward(2, 8, 40, [7, 6]), 450);
    check(&step_forward(3, 5, 72, [5, 9]).stride([2, 2]), 451);
    check(
        &Case::plain(2, 3, 40, [13, 11], [7, 7])
            .stride([2, 2])
            .pad([(3, 3), (3, 3)]),
        452,
    );
    check(&step_weight_vjp(8, 3, 40, [16, 16]), 453);
    check(&step_weight_vjp(3, 7, 72, [7, 5]), 454);
}

#[test]
fn strided_and_xla_same_padded_forms() {
    // XLA SAME with stride 2: total pad max((out−1)·s + k − in, 0), low half first.
    check(
        &step_forward(2, 4, 6, [8, 8])
            .stride([2, 2])
            .pad([(0, 1), (0, 1)]),
        500,
    );
    check(
        &step_forward(3, 4, 6, [7, 9])
            .stride([2, 2])
            .pad([(1, 1), (0, 1)]),
        501,
    );
    // 1×1 stride-2 projection (decimation) on even and odd extents.
    check(&Case::plain(2, 6, 5, [8, 7], [1, 1]).stride([2, 2]), 502);
    check(
        &Case::plain(1, 3, 4, [6, 5], [3, 2])
            .stride([3, 2])
            .pad([(2, 0), (1, 1)]),
        503,
    );
}

#[test]
fn negative_padding_crops() {
    check(
        &Case::plain(2, 3, 5, [8, 7], [3, 3]).pad([(-1, 1), (1, -1)]),
        600,
    );
    check(
        &Case::plain(1, 4, 4, [9, 6], [2, 2]).pad([(-1, -1), (-2, 0)]),
        601,
    );
    check(
        &Case::plain(3, 2, 3, [7, 8], [1, 1])
            .stride([2, 2])
            .pad([(0, -1), (-1, 0)]),
        602,
    );
}

#[test]
fn transposed_convolution_with_lhs_dilation_2() {
    // The input-VJP of a stride-2 3×3 conv: dy dilated by 2, reversed kernel,
    // the pads that restore the input extent (one of them negative).
    let mut c = Case::plain(2, 6, 4, [4, 4], [3, 3]).pad([(1, 2), (1, 2)]);
    c.lhs_dilation = [2, 2];
    c.reversal = [true, true];
    check(&c, 700);
    let mut c = Case::plain(3, 5, 3, [4, 5], [3, 3]).pad([(2, 1), (1, -1)]);
    c.lhs_dilation = [2, 2];
    check(&c, 701);
    let mut c = Case::plain(1, 3, 2, [3, 4], [1, 1]).pad([(0, 1), (0, 0)]);
    c.lhs_dilation = [2, 2];
    check(&c, 702);
}

#[test]
fn window_dilation() {
    let mut c = Case::plain(2, 3, 5, [9, 8], [3, 2]).pad([(2, 2), (1, 0)]);
    c.rhs_dilation = [2, 3];
    check(&c, 800);
}

#[test]
fn feature_groups_and_depthwise() {
    let mut c = step_forward(2, 8, 12, [6, 7]);
    c.feature_groups = 4;
    check(&c, 900);
    // Depthwise, channel multiplier 2, stride 2.
    let mut c = step_forward(3, 5, 10, [7, 6]).stride([2, 2]);
    c.feature_groups = 5;
    check(&c, 901);
}

#[test]
fn batch_groups_depthwise_weight_vjp() {
    // Depthwise weight-VJP: xᵀ [C, N, H, W] with dyᵀ [C, N, H, W] as kernel and
    // batch_group_count = C.
    let mut c = Case::plain(4, 3, 4, [6, 5], [6, 5]).pad([(1, 1), (1, 1)]);
    c.batch_groups = 4;
    check(&c, 1000);
    let mut c = Case::plain(6, 2, 6, [5, 7], [3, 3]);
    c.batch_groups = 2;
    check(&c, 1001);
}

#[test]
fn permuted_dimension_numbers() {
    // The transpose trick expressed in dimension numbers: batch and feature swap.
    let mut c = step_weight_vjp(3, 4, 5, [6, 7]);
    c.lhs_layout = [1, 0, 2, 3];
    c.rhs_layout = [1, 0, 2, 3];
    c.out_layout = [1, 0, 2, 3];
    check(&c, 1100);
    // NHWC / HWIO / NHWC.
    let mut c = step_forward(2, 3, 5, [5, 6]);
    c.lhs_layout = [0, 3, 1, 2];
    c.rhs_layout = [3, 2, 0, 1];
    c.out_layout = [0, 3, 1, 2];
    check(&c, 1101);
}

/// The weight-VJP as the executor passes it: `x [N, C, H, W]` and `dy [N, O,
/// H, W]` untransposed, with dimension numbers that swap batch and feature
/// (lhs `input_batch = 1, input_feature = 0`; rhs `kernel_output_feature = 1,
/// kernel_input_feature = 0`), result `[O, C, 3, 3]` (or `[C, O, 3, 3]` with
/// `out_nchw`).
fn nchw_weight_vjp(batch: usize, c: usize, o: usize, hw: [usize; 2], out_nchw: bool) -> Case {
    let mut case = step_weight_vjp(batch, c, o, hw);
    case.lhs_layout = [1, 0, 2, 3];
    case.rhs_layout = [1, 0, 2, 3];
    case.out_layout = if out_nchw { NCHW } else { [1, 0, 2, 3] };
    case
}

#[test]
fn weight_vjp_on_untransposed_operands_at_step_shapes() {
    // Row-parallel (short reductions) and reduction-sliced (long) paths, both
    // result layouts.
    for (i, &(batch, c, o, hw)) in [
        (2, 16, 16, [7, 5]),
        (3, 5, 3, [5, 8]),
        (8, 3, 5, [16, 16]),
        (16, 16, 32, [16, 16]),
        (32, 3, 16, [32, 32]),
        (32, 16, 16, [32, 32]),
        (32, 16, 32, [8, 8]),
        (32, 32, 32, [4, 4]),
    ]
    .iter()
    .enumerate()
    {
        check(&nchw_weight_vjp(batch, c, o, hw, false), 1150 + i as u64);
        check(&nchw_weight_vjp(batch, c, o, hw, true), 1170 + i as u64);
    }
}

#[test]
fn forward_and_input_vjp_with_swapped_leading_dimensions() {
    // lhs given as [C, N, H, W]; the input-VJP's kernel given as the forward's
    // [O, I, 3, 3] weights read with kernel_output_feature = 1 (reversed: the
    // kernel is copied) and the same without reversal (read in place).
    for (i, &(batch, c, o, hw)) in [(2, 16, 16, [7, 5]), (7, 3, 5, [7, 5]), (32, 16, 32, [8, 8])]
        .iter()
        .enumerate()
    {
        let mut case = step_forward(batch, c, o, hw);
        case.lhs_layout = [1, 0, 2, 3];
        check(&case, 1190 + i as u64);
        let mut case = step_forward(batch, o, c, hw);
        case.rhs_layout = [1, 0, 2, 3];
        check(&case, 1195 + i as u64);
        case.reversal = [true, true];
        check(&case, 1198 + i as u64);
    }
}

/// `fast::convolution` (f32) of a case whose operands are given in their
/// physical layouts, and of the same operands first transposed to NCHW / OIHW
/// (result layout unchanged).
fn swapped_and_transposed(case: &Case, seed: u64) -> (Vec<u32>, Vec<u32>) {
    let (lhs, rhs) = operands(case, seed);
    let oshape = physical(case.out_logical(), case.out_layout);
    let tensor = |logical: [usize; 4], layout: [usize; 4], vals: &[f64]| {
        Tensor::new(
            physical(logical, layout),
            vals.iter().map(|&v| v as f32).collect(),
        )
    };
    let to_logical = |logical: [usize; 4], layout: [usize; 4], vals: &[f64]| {
        let mut out = vec![0.0; vals.len()];
        let mut flat = 0;
        for a in 0..logical[0] {
            for b in 0..logical[1] {
                for y in 0..logical[2] {
                    for x in 0..logical[3] {
                        out[flat] = vals[offset([a, b, y, x], logical, layout)];
                        flat += 1;
                    }
                }
            }
        }
        out
    };
    let (ll, rl) = (case.lhs_logical(), case.rhs_logical());
    let given = fast::convolution(
        &tensor(ll, case.lhs_layout, &lhs),
        &tensor(rl, case.rhs_layout, &rhs),
        &case.attrs(),
        &oshape,
    );
    let mut nchw = case.clone();
    nchw.lhs_layout = NCHW;
    nchw.rhs_layout = NCHW;
    let copied = fast::convolution(
        &tensor(ll, NCHW, &to_logical(ll, case.lhs_layout, &lhs)),
        &tensor(rl, NCHW, &to_logical(rl, case.rhs_layout, &rhs)),
        &nchw.attrs(),
        &oshape,
    );
    let bits = |t: &Tensor<f32>| t.data.iter().map(|v| v.to_bits()).collect::<Vec<_>>();
    (bits(&given), bits(&copied))
}

#[test]
fn strided_operands_give_the_bits_of_transposed_copies() {
    // Reading the swapped leading dimensions in place sums in the same order as
    // on transposed copies: identical bits, on both implicit-GEMM paths.
    for (i, case) in [
        nchw_weight_vjp(32, 16, 16, [32, 32], false),
        nchw_weight_vjp(2, 5, 3, [5, 8], true),
        {
            let mut c = step_forward(7, 3, 5, [7, 5]);
            c.lhs_layout = [1, 0, 2, 3];
            c.rhs_layout = [1, 0, 2, 3];
            c
        },
    ]
    .iter()
    .enumerate()
    {
        let (given, copied) = swapped_and_transposed(case, 1210 + i as u64);
        assert_eq!(given.len(), copied.len());
        assert!(given == copied, "case {case:?}");
    }
}

/// Asserts the f32 kernel's result for `case` (operands drawn from `seed`)
/// has the same bits on one thread and on three.
fn assert_same_bits_on_1_and_3_threads(case: &Case, seed: u64) {
    let (lhs, rhs) = operands(case, seed);
    let l = Tensor::new(
        physical(case.lhs_logical(), case.lhs_layout),
        lhs.iter().map(|&v| v as f32).collect(),
    );
    let r = Tensor::new(
        physical(case.rhs_logical(), case.rhs_layout),
        rhs.iter().map(|&v| v as f32).collect(),
    );
    let oshape = physical(case.out_logical(), case.out_layout);
    let run = |threads: usize| {
        rayon::ThreadPoolBuilder::new()
            .num_threads(threads)
            .build()
            .unwrap()
            .install(|| fast::convolution(&l, &r, &case.attrs(), &oshape))
    };
    let bits = |t: &Tensor<f32>| t.data.iter().map(|v| v.to_bits()).collect::<Vec<_>>();
    assert_eq!(bits(&run(1)), bits(&run(3)), "case {case:?}");
}

#[test]
fn sliced_reduction_does_not_depend_on_the_thread_count() {
    assert_same_bits_on_1_and_3_threads(&step_weight_vjp(16, 16, 32, [16, 16]), 1200);
}

#[test]
fn long_reductions_over_many_output_features_split_by_kernel_panels() {
    // 256 features × 3 × 3 = 2,304 terms at 7 × 7 for 2 examples: the tasks
    // split the kernel's panels (100 outputs: 7 f32 panels, 13 f64 ones, so
    // an odd last range); then 9 examples, 3 row groups, the last short.
    check(&step_forward(2, 256, 100, [7, 7]), 1300);
    check(&step_forward(9, 232, 64, [7, 7]), 1301);
}

/// `conv(x, k) + bias` with plane moments, in f32, over the first `batch`
/// examples of `xs` (`[16, c, 7, 7]`).
fn conv_with_moments(
    xs: &[f32],
    kernel: &Tensor<f32>,
    bias: &[f32],
    batch: usize,
) -> (Vec<f32>, Vec<f32>) {
    let case = step_forward(batch, kernel.shape[1], kernel.shape[0], [7, 7]);
    let per = xs.len() / 16;
    let l = Tensor::new(case.lhs_logical().to_vec(), xs[..batch * per].to_vec());
    let mut moments = vec![0.0; 2 * batch * kernel.shape[0]];
    let out = fast::convolution_moments_into(
        &l,
        kernel,
        &case.attrs(),
        &case.out_logical(),
        Vec::new(),
        Some(bias),
        &mut moments,
    );
    (out.data, moments)
}

#[test]
fn kernel_panel_tasks_sum_in_the_order_of_the_row_tasks() {
    // Two examples take the panel-split path; sixteen are four row tasks of
    // four examples. Each output is the same sum in the same order, so the
    // first two examples' results, bias added and plane moments, are the
    // same bits — on one thread and on three.
    let (c, o) = (256, 96);
    let xs: Vec<f32> = data(16 * c * 49, 1310).iter().map(|&v| v as f32).collect();
    let kernel = Tensor::new(
        vec![o, c, 3, 3],
        data(o * c * 9, 1311).iter().map(|&v| v as f32).collect(),
    );
    let bias: Vec<f32> = data(o, 1312).iter().map(|&v| v as f32).collect();
    let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
    let (rows_out, rows_moments) = conv_with_moments(&xs, &kernel, &bias, 16);
    for threads in [1, 3] {
        let (out, moments) = rayon::ThreadPoolBuilder::new()
            .num_threads(threads)
            .build()
            .unwrap()
            .install(|| conv_with_moments(&xs, &kernel, &bias, 2));
        assert!(
            bits(&out) == bits(&rows_out[..out.len()]),
            "results on {threads} threads"
        );
        assert!(
            bits(&moments) == bits(&rows_moments[..moments.len()]),
            "moments on {threads} threads"
        );
    }
}

#[test]
fn check_rejects_a_kernel_with_one_tap_dropped() {
    // Negative control: the fast kernel run on a kernel whose centre tap is
    // zeroed (for every feature pair) must fail the check against the true kernel.
    for case in [
        step_forward(2, 16, 16, [7, 5]),
        step_weight_vjp(2, 5, 3, [5, 8]),
    ] {
        let (lhs, rhs) = operands(&case, 1300);
        assert!(check_with_kernel(&case, &lhs, &rhs, &rhs).is_ok());
        let rl = case.rhs_logical();
        let mut dropped = rhs.clone();
        for o in 0..rl[0] {
            for c in 0..rl[1] {
                dropped[offset([o, c, rl[2] / 2, rl[3] / 2], rl, case.rhs_layout)] = 0.0;
            }
        }
        let err = check_with_kernel(&case, &lhs, &rhs, &dropped).unwrap_err();
        assert!(err.starts_with("f32: element"), "{err}");
    }
}

#[test]
fn check_rejects_a_kernel_with_swapped_spatial_axes() {
    // Negative control: a layout slip (kernel read as [o, i, w, h]) on a square
    // kernel keeps every shape and must still fail.
    let case = step_forward(2, 4, 6, [6, 7]);
    let (lhs, rhs) = operands(&case, 1400);
    let rl = case.rhs_logical();
    let mut swapped = rhs.clone();
    for o in 0..rl[0] {
        for c in 0..rl[1] {
            for y in 0..rl[2] {
                for x in 0..rl[3] {
                    swapped[offset([o, c, y, x], rl, NCHW)] = rhs[offset([o, c, x, y], rl, NCHW)];
                }
            }
        }
    }
    assert!(check_with_kernel(&case, &lhs, &rhs, &swapped).is_err());
}

#[test]
#[should_panic(expected = "result shape")]
fn inconsistent_result_shape_is_a_clear_error() {
    let case = step_forward(1, 2, 3, [5, 5]);
    let attrs = case.attrs();
    let l = Tensor::new(vec![1, 2, 5, 5], vec![0f32; 50]);
    let r = Tensor::new(vec![3, 2, 3, 3], vec![0f32; 54]);
    // 6×6 cannot come from a 5×5 input with a 3×3 window and pad 1.
    let _ = fast::convolution(&l, &r, &attrs, &[1, 3, 6, 6]);
}

fn case_strategy() -> impl Strategy<Value = Case> {
    let spatial = (
        1usize..=9,
        1usize..=4,
        1usize..=3,
        -1i64..=2,
        -1i64..=2,
        1usize..=2,
        1usize..=2,
    );
    (
        (1usize..=3, 1usize..=4, 1usize..=3, 0usize..3),
        spatial.clone(),
        spatial,
        (any::<[bool; 2]>(), 0usize..4, any::<u64>()),
    )
        .prop_map(
            |((batch, cg, og, groups), h, w, (reversal, layout, seed))| {
                let (mut fg, mut bg) = (1, 1);
                match groups {
                    1 => fg = 2,
                    2 => bg = if batch.is_multiple_of(2) { 2 } else { 1 },
                    _ => {}
                }
                let layouts = [
                    (NCHW, NCHW, NCHW),
                    ([1, 0, 2, 3], [1, 0, 2, 3], [1, 0, 2, 3]),
                    ([0, 3, 1, 2], [3, 2, 0, 1], [0, 3, 1, 2]),
                    ([3, 0, 2, 1], [0, 3, 1, 2], [2, 1, 3, 0]),
                ];
                let (ll, rl, ol) = layouts[layout];
                let case = Case {
                    batch,
                    in_features: cg * fg,
                    out_features: og * fg * bg,
                    in_hw: [h.0, w.0],
                    kernel_hw: [h.1, w.1],
                    stride: [h.2, w.2],
                    pad: [(h.3, h.4), (w.3, w.4)],
                    lhs_dilation: [h.5, w.5],
                    rhs_dilation: [h.6, w.6],
                    reversal,
                    feature_groups: fg,
                    batch_groups: bg,
                    lhs_layout: ll,
                    rhs_layout: rl,
                    out_layout: ol,
                };
                (case, seed)
            },
        )
        .prop_filter("window fits", |(c, _)| c.valid())
        .prop_map(|(c, seed)| {
            let _ = seed;
            c
        })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(192))]

    #[test]
    fn random_forms_agree_with_the_formula(case in case_strategy(), seed in any::<u64>()) {
        let (lhs, rhs) = operands(&case, seed);
        let checked = check_with_kernel(&case, &lhs, &rhs, &rhs);
        prop_assert!(checked.is_ok(), "{}", checked.unwrap_err());
    }
}

#[test]
fn step_forms_at_batch_32() {
    // The cifar8-bbn step's convolutions at batch 32 (whole-example tasks with
    // partial register tiles, and the weight-VJP's reduction over the batch
    // in slices), which the small shapes above do not reach.
    check(&step_forward(32, 16, 16, [32, 32]), 900);
    check(&step_forward(32, 3, 16, [32, 32]), 901);
    check(&step_forward(32, 16, 32, [16, 16]), 903);
    check(&step_weight_vjp(32, 16, 16, [32, 32]), 905);
}

/// XLA-SAME padding of one spatial dimension (TF's "SAME": output ⌈n/s⌉, the
/// odd pad at the end) and the symmetric `(k−1)/2` both sides.
fn same_pad(n: usize, k: usize, s: usize, xla_same: bool) -> (i64, i64) {
    if !xla_same {
        let p = ((k - 1) / 2) as i64;
        return (p, p);
    }
    let out = n.div_ceil(s);
    let total = ((out - 1) * s + k).saturating_sub(n) as i64;
    (total / 2, total - total / 2)
}

/// The depthwise forms of a train step at one geometry, as the renders emit
/// them (`[b, f, 0, 1] x [o, i, 0, 1]`, NCHW tensors): the forward
/// (`feature_group_count = C`), the input-VJP on the output gradient dilated
/// by a `pad` op (stride-1 convolution with the reversed kernel, reversal as
/// an attribute or already applied), and the weight-VJP on the executor's
/// untransposed `x` and dilated `dy` (`batch_group_count = C`, leading
/// dimensions swapped in the dimension numbers); plus the weight-VJP with the
/// stride as window dilation instead of a dilated `dy` (JAX's form).
fn depthwise_forms(n: usize, c: usize, hw: [usize; 2], k: usize, s: usize, xla: bool) -> Vec<Case> {
    let pads = [0, 1].map(|d| same_pad(hw[d], k, s, xla));
    let fwd = Case::plain(n, c, c, hw, [k, k]).stride([s, s]).pad(pads);
    let mut forward = fwd.clone();
    forward.feature_groups = c;
    let [oh, ow] = fwd.out_hw();
    // dy dilated by s − 1 zeros between elements: (o − 1)·s + 1.
    let dil = [(oh - 1) * s + 1, (ow - 1) * s + 1];
    // Input-VJP: output extent hw from the dilated dy, low pad k − 1 − lo.
    let ipad = [0, 1].map(|d| {
        let lo = (k - 1) as i64 - pads[d].0;
        (lo, hw[d] as i64 + k as i64 - 1 - dil[d] as i64 - lo)
    });
    let mut input_vjp = Case::plain(n, c, c, dil, [k, k]).pad(ipad);
    input_vjp.feature_groups = c;
    let mut input_vjp_rev = input_vjp.clone();
    input_vjp_rev.reversal = [true, true];
    // Weight-VJP: out[0, c, a, b] = Σ_n Σ_p x[n, c, a + p − lo, …]·dy_dil[n, c, p, …].
    let wpad = [0, 1].map(|d| {
        let lo = pads[d].0;
        (lo, k as i64 - 1 + dil[d] as i64 - 1 - hw[d] as i64 - lo + 1)
    });
    let mut weight_vjp = Case::plain(c, n, c, hw, dil).pad(wpad);
    weight_vjp.batch_groups = c;
    weight_vjp.lhs_layout = [1, 0, 2, 3];
    weight_vjp.rhs_layout = [1, 0, 2, 3];
    let mut weight_vjp_jax = weight_vjp.clone();
    weight_vjp_jax.kernel_hw = [oh, ow];
    weight_vjp_jax.rhs_dilation = [s, s];
    vec![
        forward,
        input_vjp,
        input_vjp_rev,
        weight_vjp,
        weight_vjp_jax,
    ]
}

#[test]
fn depthwise_direct_path_forms() {
    // Stride 1 and 2, k 3 and 5, XLA-SAME and symmetric pads, H ≠ W (odd and
    // even), N = 1 and 3, and one channel count with a single channel.
    let mut seed = 1500;
    for &(n, c, hw) in &[(1, 4, [9, 7]), (3, 6, [8, 11]), (3, 1, [6, 5])] {
        for k in [3, 5] {
            for s in [1, 2] {
                for xla in [true, false] {
                    for case in depthwise_forms(n, c, hw, k, s, xla) {
                        check(&case, seed);
                        seed += 1;
                    }
                }
            }
        }
    }
}

#[test]
fn depthwise_channel_multiplier_dilation_and_crops() {
    // Channel multiplier 3, window dilation 2, a negative (cropping) pad,
    // permuted NHWC / HWIO layouts.
    let mut c = Case::plain(2, 4, 12, [10, 9], [3, 3]).pad([(-1, 2), (2, -1)]);
    c.feature_groups = 4;
    c.rhs_dilation = [2, 1];
    check(&c, 1600);
    c.lhs_layout = [0, 3, 1, 2];
    c.rhs_layout = [3, 2, 0, 1];
    c.out_layout = [0, 3, 1, 2];
    check(&c, 1601);
    // Weight-VJP of a multiplier-2 depthwise conv: 2 output features per batch group.
    let mut w = Case::plain(3, 2, 6, [7, 8], [5, 6]).pad([(1, 1), (0, 2)]);
    w.batch_groups = 3;
    check(&w, 1602);
}

#[test]
fn depthwise_results_do_not_depend_on_the_thread_count() {
    for (i, case) in depthwise_forms(3, 6, [8, 11], 3, 2, true)
        .iter()
        .enumerate()
    {
        assert_same_bits_on_1_and_3_threads(case, 1700 + i as u64);
    }
}

#[test]
fn depthwise_check_rejects_a_dropped_tap_and_a_transposed_kernel() {
    // Negative controls on the direct path: every form of a stride-2 XLA-SAME
    // k=3 geometry with (a) one corner tap zeroed and (b) the kernel's
    // spatial axes swapped (square kernels; the weight-VJP's dy is square
    // here too) must fail the check the true kernel passes.
    for case in depthwise_forms(3, 4, [9, 9], 3, 2, true) {
        let (lhs, rhs) = operands(&case, 1800);
        assert!(check_with_kernel(&case, &lhs, &rhs, &rhs).is_ok());
        let rl = case.rhs_logical();
        let mut dropped = rhs.clone();
        let mut swapped = rhs.clone();
        for o in 0..rl[0] {
            for c in 0..rl[1] {
                dropped[offset([o, c, 0, 0], rl, case.rhs_layout)] = 0.0;
                for y in 0..rl[2] {
                    for x in 0..rl[3] {
                        swapped[offset([o, c, y, x], rl, case.rhs_layout)] =
                            rhs[offset([o, c, x, y], rl, case.rhs_layout)];
                    }
                }
            }
        }
        let err = check_with_kernel(&case, &lhs, &rhs, &dropped).unwrap_err();
        assert!(err.starts_with("f32: element"), "{err}");
        assert!(
            check_with_kernel(&case, &lhs, &rhs, &swapped).is_err(),
            "case {case:?}"
        );
    }
}

#[test]
#[should_panic(expected = "result shape inconsistent")]
fn depthwise_inconsistent_result_shape_is_a_clear_error() {
    let mut case = step_forward(1, 2, 2, [5, 5]);
    case.feature_groups = 2;
    let l = Tensor::new(vec![1, 2, 5, 5], vec![0f32; 50]);
    let r = Tensor::new(vec![2, 1, 3, 3], vec![0f32; 18]);
    let _ = fast::convolution(&l, &r, &case.attrs(), &[1, 2, 6, 6]);
}

/// `stablehlo.pad` by its definition: result index `low + i·(interior + 1)`
/// holds operand element `i` where it lies inside; everything else the value.
fn pad_formula(
    x: &[f64],
    shape: &[usize],
    low: &[i64],
    interior: &[i64],
    out: &[usize],
    v: f64,
) -> Vec<f64> {
    let mut r = vec![v; out.iter().product()];
    for (flat, &val) in x.iter().enumerate() {
        let mut rem = flat;
        let mut idx = vec![0usize; shape.len()];
        for d in (0..shape.len()).rev() {
            idx[d] = rem % shape[d];
            rem /= shape[d];
        }
        let mut at = 0i64;
        let mut inside = true;
        for d in 0..shape.len() {
            let p = low[d] + idx[d] as i64 * (interior[d] + 1);
            inside &= p >= 0 && p < out[d] as i64;
            at = at * out[d] as i64 + p;
        }
        if inside {
            r[at as usize] = val;
        }
    }
    r
}

#[test]
fn pad_matches_its_definition() {
    // The depthwise VJP's dilation (interior 1, high 1), and crops/edges.
    for (i, (shape, low, high, interior)) in [
        (
            vec![2, 3, 4, 5],
            vec![0, 0, 0, 0],
            vec![0, 0, 1, 1],
            vec![0, 0, 1, 1],
        ),
        (vec![3, 5, 4], vec![1, -1, 2], vec![-2, 3, 0], vec![0, 2, 1]),
        (vec![7], vec![-3], vec![-3], vec![0]),
        (vec![4, 1], vec![2, 0], vec![1, 2], vec![3, 0]),
    ]
    .into_iter()
    .enumerate()
    {
        let out: Vec<usize> = (0..shape.len())
            .map(|d| {
                let n = shape[d] as i64;
                (low[d] + high[d] + n + (n - 1).max(0) * interior[d]) as usize
            })
            .collect();
        let x = data(shape.iter().product(), 1900 + i as u64);
        let want = pad_formula(&x, &shape, &low, &interior, &out, -0.75);
        let t32 = Tensor::new(shape.clone(), x.iter().map(|&v| v as f32).collect());
        let got = fast::pad(&t32, -0.75f32, &low, &interior, &out);
        assert_eq!(got.shape, out);
        let got: Vec<f64> = got.data.iter().map(|&v| v as f64).collect();
        assert_eq!(got, want, "case {i}");
        let t64 = Tensor::new(shape.clone(), x.clone());
        assert_eq!(
            fast::pad(&t64, -0.75, &low, &interior, &out).data,
            want,
            "case {i} f64"
        );
    }
}

/// `conv(x, k) + bias` in f32 with each result plane's moments.
fn conv_bias_moments(case: &Case, seed: u64) -> (Vec<f32>, Vec<f32>) {
    let (lhs, rhs) = operands(case, seed);
    let f32s = |v: &[f64]| v.iter().map(|&v| v as f32).collect::<Vec<f32>>();
    let l = Tensor::new(case.lhs_logical().to_vec(), f32s(&lhs));
    let k = Tensor::new(case.rhs_logical().to_vec(), f32s(&rhs));
    let bias = f32s(&data(case.out_features, seed ^ 0x77));
    let mut moments = vec![0.0; 2 * case.batch * case.out_features];
    let out = fast::convolution_moments_into(
        &l,
        &k,
        &case.attrs(),
        &case.out_logical(),
        Vec::new(),
        Some(&bias),
        &mut moments,
    );
    (out.data, moments)
}

#[test]
fn lane_tiles_are_the_row_tiles_bit_for_bit() {
    // Output rows that fill vector lanes take the lane tiles on AVX-512 CPUs
    // (rows of 32 and 16; 14, 13 and 29 with a masked last vector; 8 to 40
    // features; a stride along the rows; one-sided padding). Every result,
    // bias added, and every plane moment must be the row tiles' bits, and
    // the result must meet the formula. Batches leave last tiles of one
    // and two vectors. The only test that flips the switch: other tests
    // may run either path meanwhile, with the same bits.
    let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
    for (i, case) in [
        step_forward(2, 16, 16, [32, 32]),
        step_forward(3, 3, 16, [16, 16]),
        step_forward(1, 32, 24, [14, 14]),
        step_forward(5, 8, 40, [13, 13]),
        step_forward(1, 5, 8, [7, 29]),
        step_forward(2, 6, 16, [9, 16]).stride([2, 1]),
        Case::plain(3, 4, 8, [6, 17], [2, 3]).pad([(0, 1), (2, 0)]),
    ]
    .iter()
    .enumerate()
    {
        let seed = 1500 + i as u64;
        fast::set_lane_tiles(false);
        let (rows_out, rows_moments) = conv_bias_moments(case, seed);
        fast::set_lane_tiles(true);
        let (out, moments) = conv_bias_moments(case, seed);
        assert!(bits(&out) == bits(&rows_out), "results of {case:?}");
        assert!(bits(&moments) == bits(&rows_moments), "moments of {case:?}");
        check(case, seed);
    }
}
