//! Agreement of the fast f32 kernels (`den::fast`) with the StableHLO semantics.
//!
//! Each kernel is compared against a direct f64 transcription of the spec formula
//! written here (independent of the kernels' im2col/GEMM machinery). Products of
//! f32 values are exact in f64, so the reference is the exact result up to f64
//! rounding; a kernel that accumulates `n` terms in f32 may differ from it by at
//! most `n · eps_f32 · Σ|terms|` (the classical recursive-summation bound
//! `γ_n = n·u/(1−n·u)` with `u = eps/2`, rounded up). Max/min and selections are
//! exact and compared bit for bit.

use den::fast::{self, ReduceKind};
use den::{row_major_strides, Tensor};
use ir::{CompareDirection, ConvAttrs, ConvDims, DotDims, ScatterWindowAttrs, WindowAttrs};
use proptest::prelude::*;

// ---------------------------------------------------------------------------
// Shared helpers

/// Deterministic pseudo-random f32 data in `[-2, 2)` (xorshift64*), so a proptest
/// case is a handful of integers and shrinks quickly.
fn random_data(len: usize, seed: u64) -> Vec<f32> {
    crate::common::xorshift64star(seed)
        .take(len)
        .map(|bits| {
            let r = bits >> 40; // 24 bits
            (r as f32 / (1u64 << 22) as f32) - 2.0
        })
        .collect()
}

/// Small integers in `[0, levels)`: many ties, for max/select tie rules.
fn random_levels(len: usize, seed: u64, levels: u32) -> Vec<f32> {
    random_data(len, seed)
        .into_iter()
        .map(|x| (((x + 2.0) * 1000.0) as u32 % levels) as f32)
        .collect()
}

fn random_tensor(shape: &[usize], seed: u64) -> Tensor<f32> {
    let n = shape.iter().product();
    Tensor::new(shape.to_vec(), random_data(n, seed))
}

/// Multi-index of flat position `flat` in `shape`.
fn unravel(flat: usize, shape: &[usize]) -> Vec<usize> {
    let strides = row_major_strides(shape);
    shape
        .iter()
        .zip(&strides)
        .map(|(&n, &s)| (flat / s) % n)
        .collect()
}

fn ravel(idx: &[usize], shape: &[usize]) -> usize {
    idx.iter()
        .zip(row_major_strides(shape))
        .map(|(i, s)| i * s)
        .sum()
}

/// The exact value of an output element (f64) and the sum of its terms' magnitudes.
#[derive(Clone, Copy, Debug)]
struct Exact {
    value: f64,
    abs_sum: f64,
    /// Absolute error gradual underflow may add on top of the relative bound
    /// (products: each f32 multiply may lose up to 2^-150 when its result is
    /// subnormal, a loss later factors scale; sums of floats underflow exactly).
    floor: f64,
}

/// Asserts `|fast - exact| <= n · eps_f32 · Σ|terms|` element by element.
fn assert_within_bound(what: &str, fast: &Tensor<f32>, exact: &[Exact], terms: usize) {
    assert_eq!(fast.len(), exact.len(), "{what}: element count");
    let k = terms.max(1) as f64;
    for (i, (&f, e)) in fast.data.iter().zip(exact).enumerate() {
        if !e.value.is_finite() {
            // Infinite init (e.g. -inf): the result is that exact value (or NaN for inf - inf).
            let same = (f.is_nan() && e.value.is_nan()) || f as f64 == e.value;
            assert!(same, "{what}: element {i}: fast {f} vs exact {}", e.value);
            continue;
        }
        // (Twice the floor: the later multiplies round the lost amounts too.)
        let bound = k * f32::EPSILON as f64 * e.abs_sum + 2.0 * e.floor;
        let err = (f as f64 - e.value).abs();
        assert!(
            err <= bound,
            "{what}: element {i} (index {:?}): fast {f} vs exact {} (|err| {err:e} > bound {bound:e})",
            unravel(i, &fast.shape),
            e.value
        );
    }
}

/// Bitwise equality, treating all NaNs as equal.
fn assert_same_bits(what: &str, fast: &Tensor<f32>, expected: &[f32]) {
    assert_eq!(fast.len(), expected.len(), "{what}: element count");
    for (i, (&f, &e)) in fast.data.iter().zip(expected).enumerate() {
        let same = (f.is_nan() && e.is_nan()) || f.to_bits() == e.to_bits();
        assert!(
            same,
            "{what}: element {i} (index {:?}): fast {f} vs expected {e}",
            unravel(i, &fast.shape)
        );
    }
}

/// Output extent of a window op along one dimension (at least 1 by construction).
fn window_out_len(
    src: i64,
    base_dil: i64,
    lo: i64,
    hi: i64,
    window: i64,
    win_dil: i64,
    stride: i64,
) -> i64 {
    let padded = (src - 1) * base_dil + 1 + lo + hi;
    let dilated_window = (window - 1) * win_dil + 1;
    (padded - dilated_window).div_euclid(stride) + 1
}

/// Raises `hi` until the padded, dilated extent holds at least one window.
fn fit_high_padding(src: i64, base_dil: i64, lo: i64, hi: i64, window: i64, win_dil: i64) -> i64 {
    let need = (window - 1) * win_dil + 1 - ((src - 1) * base_dil + 1 + lo);
    hi.max(need)
}

// ---------------------------------------------------------------------------
// Convolution

/// A random convolution problem: logical sizes plus the layouts of each operand.
#[derive(Clone, Debug)]
struct ConvCase {
    out_batch: usize,
    kernel_in: usize,
    group_out: usize,
    feature_groups: usize,
    batch_groups: usize,
    in_spatial: Vec<usize>,
    kernel_spatial: Vec<usize>,
    strides: Vec<i64>,
    padding: Vec<(i64, i64)>,
    lhs_dilation: Vec<i64>,
    rhs_dilation: Vec<i64>,
    reversal: Vec<bool>,
    /// Tensor dimension of each logical role ([batch, feature, spatial…]).
    lhs_layout: Vec<usize>,
    rhs_layout: Vec<usize>,
    out_layout: Vec<usize>,
    seed: u64,
}

fn conv_case_strategy() -> impl Strategy<Value = ConvCase> {
    (1usize..=2).prop_flat_map(|nsp| {
        let perm = || Just((0..nsp + 2).collect::<Vec<usize>>()).prop_shuffle();
        let per_dim = (
            1usize..=6,
            1usize..=3,
            1i64..=3,
            -1i64..=2,
            -1i64..=2,
            1i64..=2,
            1i64..=2,
            any::<bool>(),
        );
        (
            (1usize..=2, 1usize..=3, 1usize..=2, 1usize..=3, 1usize..=2),
            proptest::collection::vec(per_dim, nsp),
            (perm(), perm(), perm()),
            any::<u64>(),
        )
            .prop_map(
                |((out_batch, kernel_in, group_out, fg, bg), dims, (l, r, o), seed)| {
                    let mut case = ConvCase {
                        out_batch,
                        kernel_in,
                        group_out,
                        feature_groups: fg,
                        batch_groups: bg,
                        in_spatial: vec![],
                        kernel_spatial: vec![],
                        strides: vec![],
                        padding: vec![],
                        lhs_dilation: vec![],
                        rhs_dilation: vec![],
                        reversal: vec![],
                        lhs_layout: l,
                        rhs_layout: r,
                        out_layout: o,
                        seed,
                    };
                    for (n, k, s, lo, hi, ld, rd, rev) in dims {
                        let hi = fit_high_padding(n as i64, ld, lo, hi, k as i64, rd);
                        case.in_spatial.push(n);
                        case.kernel_spatial.push(k);
                        case.strides.push(s);
                        case.padding.push((lo, hi));
                        case.lhs_dilation.push(ld);
                        case.rhs_dilation.push(rd);
                        case.reversal.push(rev);
                    }
                    case
                },
            )
    })
}

impl ConvCase {
    fn nsp(&self) -> usize {
        self.in_spatial.len()
    }
    fn in_features(&self) -> usize {
        self.kernel_in * self.feature_groups
    }
    fn out_features(&self) -> usize {
        self.group_out * self.feature_groups * self.batch_groups
    }
    fn out_spatial(&self) -> Vec<usize> {
        (0..self.nsp())
            .map(|s| {
                let (lo, hi) = self.padding[s];
                window_out_len(
                    self.in_spatial[s] as i64,
                    self.lhs_dilation[s],
                    lo,
                    hi,
                    self.kernel_spatial[s] as i64,
                    self.rhs_dilation[s],
                    self.strides[s],
                ) as usize
            })
            .collect()
    }
    /// Physical shape from logical sizes `[batch, feature, spatial…]` and a layout.
    fn physical(logical: &[usize], layout: &[usize]) -> Vec<usize> {
        let mut shape = vec![0; logical.len()];
        for (role, &dim) in layout.iter().enumerate() {
            shape[dim] = logical[role];
        }
        shape
    }
    fn lhs_shape(&self) -> Vec<usize> {
        let logical: Vec<usize> = [self.out_batch * self.batch_groups, self.in_features()]
            .into_iter()
            .chain(self.in_spatial.iter().copied())
            .collect();
        Self::physical(&logical, &self.lhs_layout)
    }
    /// Kernel roles: [output feature, input feature, spatial…].
    fn rhs_shape(&self) -> Vec<usize> {
        let logical: Vec<usize> = [self.out_features(), self.kernel_in]
            .into_iter()
            .chain(self.kernel_spatial.iter().copied())
            .collect();
        Self::physical(&logical, &self.rhs_layout)
    }
    fn out_shape(&self) -> Vec<usize> {
        let logical: Vec<usize> = [self.out_batch, self.out_features()]
            .into_iter()
            .chain(self.out_spatial())
            .collect();
        Self::physical(&logical, &self.out_layout)
    }
    fn attrs(&self) -> ConvAttrs {
        let l = |v: &[usize]| v.iter().map(|&x| x as i64).collect::<Vec<i64>>();
        ConvAttrs {
            window_strides: self.strides.clone(),
            padding: self.padding.clone(),
            lhs_dilation: self.lhs_dilation.clone(),
            rhs_dilation: self.rhs_dilation.clone(),
            window_reversal: self.reversal.clone(),
            dims: ConvDims {
                input_batch: self.lhs_layout[0] as i64,
                input_feature: self.lhs_layout[1] as i64,
                input_spatial: l(&self.lhs_layout[2..]),
                kernel_output_feature: self.rhs_layout[0] as i64,
                kernel_input_feature: self.rhs_layout[1] as i64,
                kernel_spatial: l(&self.rhs_layout[2..]),
                output_batch: self.out_layout[0] as i64,
                output_feature: self.out_layout[1] as i64,
                output_spatial: l(&self.out_layout[2..]),
            },
            feature_group_count: self.feature_groups as i64,
            batch_group_count: self.batch_groups as i64,
            precision_config: None,
        }
    }
}

/// The StableHLO convolution formula, evaluated directly in f64: output
/// `(b, o, y)` sums `lhs[bg·N_out + b, g·I + i, x] · rhs[o, i, k']` over kernel
/// input features `i` and kernel offsets `k`, where `k'` is `k` reversed where
/// `window_reversal` says, and `x·lhs_dilation = y·stride + k·rhs_dilation − pad_low`
/// must land on an input element (not padding, not a dilation hole).
fn reference_convolution(
    lhs: &Tensor<f32>,
    rhs: &Tensor<f32>,
    a: &ConvAttrs,
    out_shape: &[usize],
) -> Vec<Exact> {
    let d = &a.dims;
    let u = |x: i64| x as usize;
    let nsp = d.input_spatial.len();
    let out_batch = out_shape[u(d.output_batch)];
    let out_features = out_shape[u(d.output_feature)];
    let kernel_in = rhs.shape[u(d.kernel_input_feature)];
    let bg_count = u(a.batch_group_count);
    let fg_count = u(a.feature_group_count);
    let per_bg = out_features / bg_count;
    let per_fg = per_bg / fg_count;
    let kshape: Vec<usize> = d.kernel_spatial.iter().map(|&k| rhs.shape[u(k)]).collect();
    let kprod: usize = kshape.iter().product();
    (0..out_shape.iter().product::<usize>())
        .map(|flat| {
            let oi = unravel(flat, out_shape);
            let (b, o) = (oi[u(d.output_batch)], oi[u(d.output_feature)]);
            let bg = o / per_bg;
            let g = (o % per_bg) / per_fg;
            let example = bg * out_batch + b;
            let mut e = Exact {
                value: 0.0,
                abs_sum: 0.0,
                floor: 0.0,
            };
            for i in 0..kernel_in {
                'offsets: for kf in 0..kprod {
                    let k = unravel(kf, &kshape);
                    let mut lhs_idx = vec![0; lhs.rank()];
                    let mut rhs_idx = vec![0; rhs.rank()];
                    lhs_idx[u(d.input_batch)] = example;
                    lhs_idx[u(d.input_feature)] = g * kernel_in + i;
                    rhs_idx[u(d.kernel_output_feature)] = o;
                    rhs_idx[u(d.kernel_input_feature)] = i;
                    for s in 0..nsp {
                        let y = oi[u(d.output_spatial[s])] as i64;
                        let q = y * a.window_strides[s] + k[s] as i64 * a.rhs_dilation[s]
                            - a.padding[s].0;
                        let ld = a.lhs_dilation[s];
                        let src_len = lhs.shape[u(d.input_spatial[s])] as i64;
                        if q < 0 || q % ld != 0 || q / ld >= src_len {
                            continue 'offsets;
                        }
                        lhs_idx[u(d.input_spatial[s])] = (q / ld) as usize;
                        rhs_idx[u(d.kernel_spatial[s])] = if a.window_reversal[s] {
                            kshape[s] - 1 - k[s]
                        } else {
                            k[s]
                        };
                    }
                    let t = lhs.data[ravel(&lhs_idx, &lhs.shape)] as f64
                        * rhs.data[ravel(&rhs_idx, &rhs.shape)] as f64;
                    e.value += t;
                    e.abs_sum += t.abs();
                }
            }
            e
        })
        .collect()
}

fn check_convolution(
    what: &str,
    lhs: &Tensor<f32>,
    rhs: &Tensor<f32>,
    attrs: &ConvAttrs,
    out_shape: &[usize],
) {
    let fast = fast::convolution(lhs, rhs, attrs, out_shape);
    assert_eq!(fast.shape, out_shape, "{what}: result shape");
    let exact = reference_convolution(lhs, rhs, attrs, out_shape);
    let terms = rhs.len() / out_shape[attrs.dims.output_feature as usize].max(1);
    assert_within_bound(what, &fast, &exact, terms);
}

impl ConvCase {
    /// The case's random operands: the lhs drawn from `seed`, the rhs from
    /// `seed ^ rhs_salt`.
    fn operands(&self, rhs_salt: u64) -> (Tensor<f32>, Tensor<f32>) {
        (
            random_tensor(&self.lhs_shape(), self.seed),
            random_tensor(&self.rhs_shape(), self.seed ^ rhs_salt),
        )
    }

    /// [`check_convolution`] on the case's operands ([`ConvCase::operands`]).
    fn check(&self, what: &str, rhs_salt: u64) {
        let (lhs, rhs) = self.operands(rhs_salt);
        check_convolution(what, &lhs, &rhs, &self.attrs(), &self.out_shape());
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(128))]

    #[test]
    fn convolution_matches_spec_formula(case in conv_case_strategy()) {
        case.check("convolution", 0xABCD);
    }
}

/// Stride-1 convolutions with at least 8 input features per group and no lhs
/// dilation or negative padding (the kernels' shifted-GEMM path).
fn wide_channel_case_strategy() -> impl Strategy<Value = ConvCase> {
    (conv_case_strategy(), 8usize..=9).prop_map(|(mut case, kernel_in)| {
        case.kernel_in = kernel_in;
        for s in 0..case.nsp() {
            case.strides[s] = 1;
            case.lhs_dilation[s] = 1;
            let lo = case.padding[s].0.max(0);
            let hi = case.padding[s].1.max(0);
            let k = case.kernel_spatial[s] as i64;
            let hi = fit_high_padding(
                case.in_spatial[s] as i64,
                1,
                lo,
                hi,
                k,
                case.rhs_dilation[s],
            );
            case.padding[s] = (lo, hi);
        }
        case
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    #[test]
    fn wide_channel_convolution_matches_spec_formula(case in wide_channel_case_strategy()) {
        case.check("wide-channel convolution", 0x4321);
    }
}

/// Weight-gradient shaped problems: the kernel spans most of the input and the
/// output is a few positions (the kernel's own extent in the network).
fn wgrad_case_strategy() -> impl Strategy<Value = ConvCase> {
    let per_dim = (4usize..=9, 1i64..=3, 1i64..=2, -1i64..=1, 0i64..=1);
    (conv_case_strategy(), proptest::collection::vec(per_dim, 2)).prop_map(|(mut case, dims)| {
        case.in_spatial.clear();
        case.kernel_spatial.clear();
        case.padding.clear();
        case.strides.clear();
        for (n, out, stride, lo, hi) in dims {
            // Kernel extent giving exactly `out` positions at stride `stride`.
            let k = (n as i64 + lo + hi - (out - 1) * stride).max(1);
            let hi = fit_high_padding(n as i64, 1, lo, hi, k, 1);
            case.in_spatial.push(n);
            case.kernel_spatial.push(k as usize);
            case.padding.push((lo, hi));
            case.strides.push(stride);
        }
        case.lhs_dilation = vec![1; 2];
        case.rhs_dilation = vec![1; 2];
        case.reversal.resize(2, false);
        // Layouts drawn for a 1-D case do not fit: use NCHW there.
        for layout in [
            &mut case.lhs_layout,
            &mut case.rhs_layout,
            &mut case.out_layout,
        ] {
            if layout.len() != 4 {
                *layout = vec![0, 1, 2, 3];
            }
        }
        case
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    #[test]
    fn weight_gradient_shaped_convolution_matches_spec_formula(case in wgrad_case_strategy()) {
        case.check("wgrad-shaped convolution", 0x1234);
    }
}

/// NCHW/OIHW attributes with symmetric padding `pad` and stride `stride`.
fn nchw_conv(stride: i64, pad: i64) -> ConvAttrs {
    ConvAttrs {
        window_strides: vec![stride, stride],
        padding: vec![(pad, pad), (pad, pad)],
        ..ConvAttrs::plain2d()
    }
}

#[test]
fn cifar_like_convolution_forward_and_gradients() {
    let (n, c, o, hw) = (3usize, 8usize, 5usize, 8usize);
    let x = random_tensor(&[n, c, hw, hw], 1);
    let w = random_tensor(&[o, c, 3, 3], 2);
    let dy = random_tensor(&[n, o, hw, hw], 3);
    // Forward: 3×3, pad 1.
    check_convolution("forward", &x, &w, &nchw_conv(1, 1), &[n, o, hw, hw]);
    // Input gradient: dy ⋆ W with O/I swapped and the window reversed.
    let mut dgrad = nchw_conv(1, 1);
    dgrad.window_reversal = vec![true, true];
    dgrad.dims.kernel_input_feature = 0;
    dgrad.dims.kernel_output_feature = 1;
    check_convolution("input gradient", &dy, &w, &dgrad, &[n, c, hw, hw]);
    // Strided input gradient: dy of a stride-2 conv, zero-upsampled by lhs_dilation.
    let dy2 = random_tensor(&[n, o, hw / 2, hw / 2], 4);
    let mut dgrad2 = dgrad.clone();
    dgrad2.lhs_dilation = vec![2, 2];
    dgrad2.padding = vec![(1, 2), (1, 2)];
    check_convolution("strided input gradient", &dy2, &w, &dgrad2, &[n, c, hw, hw]);
    // Weight gradient, transpose trick: batch ↔ feature on both operands.
    let mut wgrad = nchw_conv(1, 1);
    wgrad.dims.input_batch = 1;
    wgrad.dims.input_feature = 0;
    wgrad.dims.kernel_input_feature = 0;
    wgrad.dims.kernel_output_feature = 1;
    wgrad.dims.output_batch = 1;
    wgrad.dims.output_feature = 0;
    check_convolution("weight gradient", &x, &dy, &wgrad, &[o, c, 3, 3]);
    // Depthwise weight gradient: one batch group per channel.
    let xd = random_tensor(&[c, n, hw, hw], 5);
    let dyd = random_tensor(&[c, n, hw, hw], 6);
    let mut dw = nchw_conv(1, 1);
    dw.batch_group_count = c as i64;
    check_convolution("depthwise weight gradient", &xd, &dyd, &dw, &[1, c, 3, 3]);
    // Depthwise forward: one feature group per channel.
    let wd = random_tensor(&[c, 1, 3, 3], 7);
    let mut depthwise = nchw_conv(2, 1);
    depthwise.feature_group_count = c as i64;
    check_convolution(
        "depthwise stride 2",
        &x,
        &wd,
        &depthwise,
        &[n, c, hw / 2, hw / 2],
    );
    // 1×1 pointwise conv in NHWC/HWIO.
    let xh = random_tensor(&[n, hw, hw, c], 8);
    let w11 = random_tensor(&[1, 1, c, o], 9);
    let nhwc = ConvAttrs {
        padding: vec![(0, 0), (0, 0)],
        dims: ConvDims::nhwc_hwio(),
        ..ConvAttrs::plain2d()
    };
    check_convolution("pointwise NHWC", &xh, &w11, &nhwc, &[n, hw, hw, o]);
}

/// The weight gradient of a 3×3/pad-1 NCHW conv over enough examples that the
/// kernel splits the reduction into several tiles, against the textbook formula
/// `dW[o, c, kh, kw] = Σ_{n, h, w} dy[n, o, h, w] · x[n, c, h + kh − 1, w + kw − 1]`.
#[test]
fn weight_gradient_over_many_examples() {
    let (n, c, o, hw) = (64usize, 8usize, 8usize, 32usize);
    let x = random_tensor(&[n, c, hw, hw], 51);
    let dy = random_tensor(&[n, o, hw, hw], 52);
    let mut wgrad = nchw_conv(1, 1);
    wgrad.dims.input_batch = 1;
    wgrad.dims.input_feature = 0;
    wgrad.dims.kernel_input_feature = 0;
    wgrad.dims.kernel_output_feature = 1;
    wgrad.dims.output_batch = 1;
    wgrad.dims.output_feature = 0;
    let fast = fast::convolution(&x, &dy, &wgrad, &[o, c, 3, 3]);
    let mut exact = Vec::with_capacity(o * c * 9);
    for oi in 0..o {
        for ci in 0..c {
            for kh in 0..3 {
                for kw in 0..3 {
                    let mut e = Exact {
                        value: 0.0,
                        abs_sum: 0.0,
                        floor: 0.0,
                    };
                    for ni in 0..n {
                        for h in 0..hw {
                            let ih = h as i64 + kh as i64 - 1;
                            if !(0..hw as i64).contains(&ih) {
                                continue;
                            }
                            let dy_row = &dy.data[((ni * o + oi) * hw + h) * hw..][..hw];
                            let x_row = &x.data[((ni * c + ci) * hw + ih as usize) * hw..][..hw];
                            for (w, &d) in dy_row.iter().enumerate() {
                                let iw = w as i64 + kw as i64 - 1;
                                if (0..hw as i64).contains(&iw) {
                                    let t = d as f64 * x_row[iw as usize] as f64;
                                    e.value += t;
                                    e.abs_sum += t.abs();
                                }
                            }
                        }
                    }
                    exact.push(e);
                }
            }
        }
    }
    assert_within_bound("weight gradient, many tiles", &fast, &exact, n * hw * hw);
}

#[test]
fn convolution_by_hand() {
    // 1-D: input [1, 2, 3], kernel [1, 10], pad (1, 0): outputs 0·1+1·10, 1·1+2·10, 2·1+3·10.
    let attrs = ConvAttrs {
        window_strides: vec![1],
        padding: vec![(1, 0)],
        lhs_dilation: vec![1],
        rhs_dilation: vec![1],
        window_reversal: vec![false],
        dims: ConvDims::nchw(1),
        feature_group_count: 1,
        batch_group_count: 1,
        precision_config: None,
    };
    let x = Tensor::new(vec![1, 1, 3], vec![1.0, 2.0, 3.0]);
    let w = Tensor::new(vec![1, 1, 2], vec![1.0, 10.0]);
    let y = fast::convolution(&x, &w, &attrs, &[1, 1, 3]);
    assert_eq!(y.data, vec![10.0, 21.0, 32.0]);
    // Reversed window: kernel read as [10, 1].
    let rev = ConvAttrs {
        window_reversal: vec![true],
        ..attrs.clone()
    };
    let y = fast::convolution(&x, &w, &rev, &[1, 1, 3]);
    assert_eq!(y.data, vec![1.0, 12.0, 23.0]);
    // lhs_dilation 2: the input reads [1, 0, 2, 0, 3] with pad (1, 0).
    let dil = ConvAttrs {
        lhs_dilation: vec![2],
        ..attrs
    };
    let y = fast::convolution(&x, &w, &dil, &[1, 1, 5]);
    assert_eq!(y.data, vec![10.0, 1.0, 20.0, 2.0, 30.0]);
}

// ---------------------------------------------------------------------------
// dot_general

#[derive(Clone, Debug)]
struct DotCase {
    batch: Vec<usize>,
    lhs_free: Vec<usize>,
    rhs_free: Vec<usize>,
    contracting: Vec<usize>,
    /// Tensor dimension of each logical dim ([batch…, free…, contracting…]).
    lhs_layout: Vec<usize>,
    rhs_layout: Vec<usize>,
    seed: u64,
}

fn dot_case_strategy() -> impl Strategy<Value = DotCase> {
    let sizes = |max_len| proptest::collection::vec(1usize..=5, 0..=max_len);
    (sizes(2), sizes(2), sizes(2), sizes(2)).prop_flat_map(|(batch, lf, rf, c)| {
        let lrank = batch.len() + lf.len() + c.len();
        let rrank = batch.len() + rf.len() + c.len();
        (
            Just((batch, lf, rf, c)),
            Just((0..lrank).collect::<Vec<usize>>()).prop_shuffle(),
            Just((0..rrank).collect::<Vec<usize>>()).prop_shuffle(),
            any::<u64>(),
        )
            .prop_map(
                |((batch, lhs_free, rhs_free, contracting), lhs_layout, rhs_layout, seed)| {
                    DotCase {
                        batch,
                        lhs_free,
                        rhs_free,
                        contracting,
                        lhs_layout,
                        rhs_layout,
                        seed,
                    }
                },
            )
    })
}

impl DotCase {
    fn shapes(&self, free: &[usize], layout: &[usize]) -> Vec<usize> {
        let logical: Vec<usize> = self
            .batch
            .iter()
            .chain(free)
            .chain(&self.contracting)
            .copied()
            .collect();
        let mut shape = vec![0; logical.len()];
        for (role, &dim) in layout.iter().enumerate() {
            shape[dim] = logical[role];
        }
        shape
    }
    fn dims(&self) -> DotDims {
        let (nb, nl, nr) = (self.batch.len(), self.lhs_free.len(), self.rhs_free.len());
        let pick = |layout: &[usize], from: usize, n: usize| {
            layout[from..from + n].iter().map(|&d| d as i64).collect()
        };
        DotDims {
            lhs_batch: pick(&self.lhs_layout, 0, nb),
            rhs_batch: pick(&self.rhs_layout, 0, nb),
            lhs_contracting: pick(&self.lhs_layout, nb + nl, self.contracting.len()),
            rhs_contracting: pick(&self.rhs_layout, nb + nr, self.contracting.len()),
        }
    }
    /// `[batch…, lhs free…, rhs free…]`, each free group in its tensor's dimension order.
    fn out_shape(&self) -> Vec<usize> {
        let nb = self.batch.len();
        let free_in_order = |free: &[usize], layout: &[usize]| {
            let mut f: Vec<(usize, usize)> = free
                .iter()
                .enumerate()
                .map(|(j, &n)| (layout[nb + j], n))
                .collect();
            f.sort_unstable();
            f.into_iter().map(|(_, n)| n).collect::<Vec<usize>>()
        };
        let mut shape = self.batch.clone();
        shape.extend(free_in_order(&self.lhs_free, &self.lhs_layout));
        shape.extend(free_in_order(&self.rhs_free, &self.rhs_layout));
        shape
    }
}

/// The dot_general formula in f64: result `[batch…, lhs free…, rhs free…]`, summing
/// over contracting index tuples (lhs_contracting[i] pairs with rhs_contracting[i]).
fn reference_dot(lhs: &Tensor<f32>, rhs: &Tensor<f32>, dims: &DotDims) -> Vec<Exact> {
    let u = |v: &[i64]| v.iter().map(|&d| d as usize).collect::<Vec<usize>>();
    let (lb, rb, lc, rc) = (
        u(&dims.lhs_batch),
        u(&dims.rhs_batch),
        u(&dims.lhs_contracting),
        u(&dims.rhs_contracting),
    );
    let lf: Vec<usize> = (0..lhs.rank())
        .filter(|d| !lb.contains(d) && !lc.contains(d))
        .collect();
    let rf: Vec<usize> = (0..rhs.rank())
        .filter(|d| !rb.contains(d) && !rc.contains(d))
        .collect();
    let out_shape: Vec<usize> = lb
        .iter()
        .chain(&lf)
        .map(|&d| lhs.shape[d])
        .chain(rf.iter().map(|&d| rhs.shape[d]))
        .collect();
    let cshape: Vec<usize> = lc.iter().map(|&d| lhs.shape[d]).collect();
    let cprod: usize = cshape.iter().product();
    (0..out_shape.iter().product::<usize>())
        .map(|flat| {
            let oi = unravel(flat, &out_shape);
            let mut li = vec![0; lhs.rank()];
            let mut ri = vec![0; rhs.rank()];
            for (j, (&l, &r)) in lb.iter().zip(&rb).enumerate() {
                li[l] = oi[j];
                ri[r] = oi[j];
            }
            for (j, &l) in lf.iter().enumerate() {
                li[l] = oi[lb.len() + j];
            }
            for (j, &r) in rf.iter().enumerate() {
                ri[r] = oi[lb.len() + lf.len() + j];
            }
            let mut e = Exact {
                value: 0.0,
                abs_sum: 0.0,
                floor: 0.0,
            };
            for cf in 0..cprod {
                let ci = unravel(cf, &cshape);
                for (j, (&l, &r)) in lc.iter().zip(&rc).enumerate() {
                    li[l] = ci[j];
                    ri[r] = ci[j];
                }
                let t = lhs.data[ravel(&li, &lhs.shape)] as f64
                    * rhs.data[ravel(&ri, &rhs.shape)] as f64;
                e.value += t;
                e.abs_sum += t.abs();
            }
            e
        })
        .collect()
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(128))]

    #[test]
    fn dot_general_matches_spec_formula(case in dot_case_strategy()) {
        let lhs = random_tensor(&case.shapes(&case.lhs_free, &case.lhs_layout), case.seed);
        let rhs = random_tensor(&case.shapes(&case.rhs_free, &case.rhs_layout), case.seed ^ 0x5555);
        let dims = case.dims();
        let out_shape = case.out_shape();
        let fast = fast::dot_general(&lhs, &rhs, &dims, &out_shape);
        prop_assert_eq!(&fast.shape, &out_shape);
        let terms = case.contracting.iter().product();
        assert_within_bound("dot_general", &fast, &reference_dot(&lhs, &rhs, &dims), terms);
    }
}

#[test]
fn dot_general_dense_layer_and_transposed_weight_gradient() {
    // y = x·W with x [B, in], W [in, out]; dW = xᵀ·dy contracts the batch dims.
    let x = random_tensor(&[7, 33], 11);
    let w = random_tensor(&[33, 10], 12);
    let dims = DotDims {
        lhs_contracting: vec![1],
        rhs_contracting: vec![0],
        ..DotDims::default()
    };
    let y = fast::dot_general(&x, &w, &dims, &[7, 10]);
    assert_within_bound("dense", &y, &reference_dot(&x, &w, &dims), 33);
    let dy = random_tensor(&[7, 10], 13);
    let wgrad = DotDims {
        lhs_contracting: vec![0],
        rhs_contracting: vec![0],
        ..DotDims::default()
    };
    let dw = fast::dot_general(&x, &dy, &wgrad, &[33, 10]);
    assert_within_bound(
        "dense weight gradient",
        &dw,
        &reference_dot(&x, &dy, &wgrad),
        7,
    );
    // Hand-checked 2×2 product.
    let a = Tensor::new(vec![2, 2], vec![1.0, 2.0, 3.0, 4.0]);
    let b = Tensor::new(vec![2, 2], vec![5.0, 6.0, 7.0, 8.0]);
    assert_eq!(
        fast::dot_general(&a, &b, &dims, &[2, 2]).data,
        vec![19.0, 22.0, 43.0, 50.0]
    );
}

// ---------------------------------------------------------------------------
// reduce

fn kind_strategy() -> impl Strategy<Value = ReduceKind> {
    prop_oneof![
        Just(ReduceKind::Add),
        Just(ReduceKind::Max),
        Just(ReduceKind::Min),
        Just(ReduceKind::Mul)
    ]
}

fn apply_f32(kind: ReduceKind, a: f32, b: f32) -> f32 {
    match kind {
        ReduceKind::Add => a + b,
        ReduceKind::Mul => a * b,
        // IEEE maximum/minimum as the spec states: NaN wins, +0 > -0.
        ReduceKind::Max if a.is_nan() || b.is_nan() => f32::NAN,
        ReduceKind::Min if a.is_nan() || b.is_nan() => f32::NAN,
        ReduceKind::Max if a == b => {
            if a.is_sign_positive() {
                a
            } else {
                b
            }
        }
        ReduceKind::Min if a == b => {
            if a.is_sign_negative() {
                a
            } else {
                b
            }
        }
        ReduceKind::Max => {
            if a > b {
                a
            } else {
                b
            }
        }
        ReduceKind::Min => {
            if a < b {
                a
            } else {
                b
            }
        }
    }
}

/// Expected reduce_window/reduce results, folded in f64 for Add/Mul (exact up to
/// f64 rounding) and in f32 for Max/Min (exact), from `init` and `terms` per output.
fn fold_expected(kind: ReduceKind, init: f32, groups: &[Vec<f32>]) -> (Vec<Exact>, Vec<f32>) {
    let exact = groups
        .iter()
        .map(|xs| match kind {
            ReduceKind::Add => Exact {
                value: xs.iter().fold(init as f64, |a, &x| a + x as f64),
                abs_sum: xs
                    .iter()
                    .fold((init as f64).abs(), |a, &x| a + (x as f64).abs()),
                floor: 0.0,
            },
            ReduceKind::Mul => {
                let p = xs.iter().fold(init as f64, |a, &x| a * x as f64);
                let half_subnormal = f64::from(f32::from_bits(1)) / 2.0;
                Exact {
                    value: p,
                    abs_sum: p.abs(),
                    floor: xs
                        .iter()
                        .fold(0.0, |f, &x| f * (x as f64).abs() + half_subnormal),
                }
            }
            _ => Exact {
                value: 0.0,
                abs_sum: 0.0,
                floor: 0.0,
            },
        })
        .collect();
    let bits = groups
        .iter()
        .map(|xs| xs.iter().fold(init, |a, &x| apply_f32(kind, a, x)))
        .collect();
    (exact, bits)
}

fn check_fold(what: &str, kind: ReduceKind, fast: &Tensor<f32>, init: f32, groups: &[Vec<f32>]) {
    let (exact, bits) = fold_expected(kind, init, groups);
    match kind {
        ReduceKind::Add | ReduceKind::Mul => {
            let terms = groups.iter().map(Vec::len).max().unwrap_or(0) + 1;
            assert_within_bound(what, fast, &exact, terms);
        }
        ReduceKind::Max | ReduceKind::Min => assert_same_bits(what, fast, &bits),
    }
}

/// Data for a reduction of `kind`: products stay near 1 so they neither overflow
/// nor underflow.
fn reduce_data(kind: ReduceKind, len: usize, seed: u64) -> Vec<f32> {
    let d = random_data(len, seed);
    if kind == ReduceKind::Mul {
        d.into_iter().map(|x| 1.0 + x / 8.0).collect()
    } else {
        d
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(128))]

    #[test]
    fn reduce_matches_sequential_fold(
        shape in proptest::collection::vec(1usize..=5, 0..=4),
        mask in any::<u8>(),
        kind in kind_strategy(),
        init in prop_oneof![Just(0.0f32), Just(1.0f32), Just(f32::NEG_INFINITY), -2.0f32..2.0],
        seed in any::<u64>(),
    ) {
        let rank = shape.len();
        let dims: Vec<usize> = (0..rank).filter(|d| mask >> d & 1 == 1).collect();
        let input = Tensor::new(shape.clone(), reduce_data(kind, shape.iter().product(), seed));
        let out_shape: Vec<usize> = (0..rank).filter(|d| !dims.contains(d)).map(|d| shape[d]).collect();
        let fast = fast::reduce(&input, init, kind, &dims, &out_shape);
        prop_assert_eq!(&fast.shape, &out_shape);
        // Group the elements of each output in row-major order of the input.
        let mut groups = vec![Vec::new(); out_shape.iter().product()];
        for (flat, &x) in input.data.iter().enumerate() {
            let idx = unravel(flat, &shape);
            let kept: Vec<usize> = (0..rank).filter(|d| !dims.contains(d)).map(|d| idx[d]).collect();
            groups[ravel(&kept, &out_shape)].push(x);
        }
        check_fold("reduce", kind, &fast, init, &groups);
    }
}

#[test]
fn reduce_long_rows_and_ieee_max_min() {
    // A long contiguous sum (partial-sum path) against the exact sum.
    let input = random_tensor(&[3, 1000], 21);
    let fast = fast::reduce(&input, 0.0, ReduceKind::Add, &[1], &[3]);
    let groups: Vec<Vec<f32>> = input.data.chunks(1000).map(<[f32]>::to_vec).collect();
    check_fold("long sum", ReduceKind::Add, &fast, 0.0, &groups);
    // Batch-norm style reduce over [0, 2, 3] of NCHW.
    let x = random_tensor(&[4, 3, 5, 6], 22);
    let fast = fast::reduce(&x, 0.0, ReduceKind::Add, &[0, 2, 3], &[3]);
    let mut groups = vec![Vec::new(); 3];
    for (flat, &v) in x.data.iter().enumerate() {
        groups[unravel(flat, &x.shape)[1]].push(v);
    }
    check_fold("bn sum", ReduceKind::Add, &fast, 0.0, &groups);
    // NaN propagates through max/min; +0 beats -0 in max, -0 wins in min.
    let t = Tensor::new(vec![2, 3], vec![1.0, f32::NAN, 3.0, -0.0, 0.0, -0.0]);
    let max = fast::reduce(&t, f32::NEG_INFINITY, ReduceKind::Max, &[1], &[2]);
    assert!(max.data[0].is_nan());
    assert_eq!(max.data[1].to_bits(), 0.0f32.to_bits());
    let min = fast::reduce(&t, f32::INFINITY, ReduceKind::Min, &[1], &[2]);
    assert!(min.data[0].is_nan());
    assert_eq!(min.data[1].to_bits(), (-0.0f32).to_bits());
}

// ---------------------------------------------------------------------------
// reduce_window

#[derive(Clone, Debug)]
struct WindowCase {
    shape: Vec<usize>,
    attrs: WindowAttrs,
    out_shape: Vec<usize>,
}

fn window_case_strategy() -> impl Strategy<Value = WindowCase> {
    let per_dim = (
        1usize..=6,
        1i64..=3,
        1i64..=3,
        1i64..=2,
        1i64..=2,
        0i64..=2,
        0i64..=2,
    );
    proptest::collection::vec(per_dim, 1..=4).prop_map(|dims| {
        let mut c = WindowCase {
            shape: vec![],
            attrs: WindowAttrs {
                window_dimensions: vec![],
                window_strides: vec![],
                base_dilations: vec![],
                window_dilations: vec![],
                padding: vec![],
            },
            out_shape: vec![],
        };
        for (n, w, s, bd, wd, lo, hi) in dims {
            let hi = fit_high_padding(n as i64, bd, lo, hi, w, wd);
            c.shape.push(n);
            c.attrs.window_dimensions.push(w);
            c.attrs.window_strides.push(s);
            c.attrs.base_dilations.push(bd);
            c.attrs.window_dilations.push(wd);
            c.attrs.padding.push((lo, hi));
            c.out_shape
                .push(window_out_len(n as i64, bd, lo, hi, w, wd, s) as usize);
        }
        c
    })
}

/// The spec's reduce_window: pad (and base-dilate) the operand with `init`, then
/// fold `init` and each window's elements in row-major window order. Returns
/// each output's window elements (padding as `init`).
fn reference_windows(
    input: &Tensor<f32>,
    init: f32,
    a: &WindowAttrs,
    out_shape: &[usize],
) -> Vec<Vec<f32>> {
    let rank = input.rank();
    let wshape: Vec<usize> = a.window_dimensions.iter().map(|&w| w as usize).collect();
    (0..out_shape.iter().product::<usize>())
        .map(|flat| {
            let oi = unravel(flat, out_shape);
            (0..wshape.iter().product::<usize>())
                .map(|wf| {
                    let wi = unravel(wf, &wshape);
                    let mut idx = vec![0; rank];
                    for d in 0..rank {
                        let q = oi[d] as i64 * a.window_strides[d]
                            + wi[d] as i64 * a.window_dilations[d]
                            - a.padding[d].0;
                        let bd = a.base_dilations[d];
                        if q < 0 || q % bd != 0 || q / bd >= input.shape[d] as i64 {
                            return init;
                        }
                        idx[d] = (q / bd) as usize;
                    }
                    input.data[ravel(&idx, &input.shape)]
                })
                .collect()
        })
        .collect()
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(128))]

    #[test]
    fn reduce_window_matches_spec_formula(
        case in window_case_strategy(),
        kind in kind_strategy(),
        init in prop_oneof![Just(0.0f32), Just(f32::NEG_INFINITY), Just(f32::INFINITY), -2.0f32..2.0],
        seed in any::<u64>(),
    ) {
        // Mul with an infinite init gives inf/NaN either way; keep products finite.
        let init = if kind == ReduceKind::Mul && init.is_infinite() { 1.0 } else { init };
        let input = Tensor::new(case.shape.clone(), reduce_data(kind, case.shape.iter().product(), seed));
        let fast = fast::reduce_window(&input, init, kind, &case.attrs, &case.out_shape);
        prop_assert_eq!(&fast.shape, &case.out_shape);
        let groups = reference_windows(&input, init, &case.attrs, &case.out_shape);
        check_fold("reduce_window", kind, &fast, init, &groups);
    }
}

#[test]
fn max_pool_3x3_stride_2_pad_1() {
    // NCHW max pool as the ResNet stem emits it, init -inf.
    let x = random_tensor(&[2, 3, 8, 8], 31);
    let attrs = WindowAttrs {
        window_dimensions: vec![1, 1, 3, 3],
        window_strides: vec![1, 1, 2, 2],
        base_dilations: vec![1; 4],
        window_dilations: vec![1; 4],
        padding: vec![(0, 0), (0, 0), (1, 1), (1, 1)],
    };
    let out = [2, 3, 4, 4];
    let fast = fast::reduce_window(&x, f32::NEG_INFINITY, ReduceKind::Max, &attrs, &out);
    let groups = reference_windows(&x, f32::NEG_INFINITY, &attrs, &out);
    check_fold(
        "max pool",
        ReduceKind::Max,
        &fast,
        f32::NEG_INFINITY,
        &groups,
    );
    // Hand check: the top-left window covers rows/cols {0, 1} of the input.
    let top_left = x.data[0].max(x.data[1]).max(x.data[8]).max(x.data[9]);
    assert_eq!(fast.data[0], top_left);
}

// ---------------------------------------------------------------------------
// select_and_scatter

#[derive(Clone, Debug)]
struct ScatterCase {
    shape: Vec<usize>,
    attrs: ScatterWindowAttrs,
    source_shape: Vec<usize>,
}

fn scatter_case_strategy() -> impl Strategy<Value = ScatterCase> {
    let per_dim = (1usize..=6, 1i64..=3, 1i64..=3, 0i64..=1, 0i64..=1);
    proptest::collection::vec(per_dim, 1..=4).prop_map(|dims| {
        let mut c = ScatterCase {
            shape: vec![],
            attrs: ScatterWindowAttrs {
                window_dimensions: vec![],
                window_strides: vec![],
                padding: vec![],
            },
            source_shape: vec![],
        };
        for (n, w, s, lo, hi) in dims {
            let hi = fit_high_padding(n as i64, 1, lo, hi, w, 1);
            c.shape.push(n);
            c.attrs.window_dimensions.push(w);
            c.attrs.window_strides.push(s);
            c.attrs.padding.push((lo, hi));
            c.source_shape
                .push(window_out_len(n as i64, 1, lo, hi, w, 1, s) as usize);
        }
        c
    })
}

fn direction_strategy() -> impl Strategy<Value = CompareDirection> {
    prop_oneof![
        Just(CompareDirection::Ge),
        Just(CompareDirection::Gt),
        Just(CompareDirection::Le),
        Just(CompareDirection::Lt)
    ]
}

fn compare(a: f32, b: f32, dir: CompareDirection) -> bool {
    match dir {
        CompareDirection::Eq => a == b,
        CompareDirection::Ne => a != b,
        CompareDirection::Ge => a >= b,
        CompareDirection::Gt => a > b,
        CompareDirection::Le => a <= b,
        CompareDirection::Lt => a < b,
    }
}

/// select_and_scatter from the spec (with XLA's reading of padding): in each
/// window, scanning valid positions in row-major order, the selection starts at
/// the first and moves to `x` whenever `select(selected, x)` is false; the
/// window's source value is added to the selected position. Returns, per operand
/// element, the source values it receives, in window order.
fn reference_scatter(
    operand: &Tensor<f32>,
    source: &Tensor<f32>,
    dir: CompareDirection,
    a: &ScatterWindowAttrs,
) -> Vec<Vec<f32>> {
    let rank = operand.rank();
    let wshape: Vec<usize> = a.window_dimensions.iter().map(|&w| w as usize).collect();
    let mut received = vec![Vec::new(); operand.len()];
    for (sf, &value) in source.data.iter().enumerate() {
        let si = unravel(sf, &source.shape);
        let mut selected: Option<usize> = None;
        'window: for wf in 0..wshape.iter().product::<usize>() {
            let wi = unravel(wf, &wshape);
            let mut idx = vec![0; rank];
            for d in 0..rank {
                let q = si[d] as i64 * a.window_strides[d] + wi[d] as i64 - a.padding[d].0;
                if q < 0 || q >= operand.shape[d] as i64 {
                    continue 'window;
                }
                idx[d] = q as usize;
            }
            let cand = ravel(&idx, &operand.shape);
            selected = match selected {
                Some(s) if compare(operand.data[s], operand.data[cand], dir) => Some(s),
                _ => Some(cand),
            };
        }
        if let Some(s) = selected {
            received[s].push(value);
        }
    }
    received
}

fn check_scatter(
    what: &str,
    operand: &Tensor<f32>,
    source: &Tensor<f32>,
    init: f32,
    dir: CompareDirection,
    attrs: &ScatterWindowAttrs,
) {
    let fast = fast::select_and_scatter(operand, source, init, dir, attrs, &operand.shape);
    assert_eq!(fast.shape, operand.shape, "{what}: result shape");
    let received = reference_scatter(operand, source, dir, attrs);
    check_fold(what, ReduceKind::Add, &fast, init, &received);
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(128))]

    #[test]
    fn select_and_scatter_matches_spec_formula(
        case in scatter_case_strategy(),
        dir in direction_strategy(),
        init in prop_oneof![Just(0.0f32), -2.0f32..2.0],
        levels in 2u32..=5,
        seed in any::<u64>(),
    ) {
        // Few distinct operand values, so windows are full of ties.
        let operand = Tensor::new(case.shape.clone(), random_levels(case.shape.iter().product(), seed, levels));
        let source = random_tensor(&case.source_shape, seed ^ 0x77);
        check_scatter("select_and_scatter", &operand, &source, init, dir, &case.attrs);
    }
}

#[test]
fn max_pool_backward_ties_and_overlap() {
    // 1×1×4×4 all-equal operand, 3×3/s2 pad 1, GE: every window picks its first
    // valid position, and overlapping windows accumulate.
    let operand = Tensor::filled(vec![1, 1, 4, 4], 1.0f32);
    let source = Tensor::new(vec![1, 1, 2, 2], vec![1.0, 10.0, 100.0, 1000.0]);
    let attrs = ScatterWindowAttrs {
        window_dimensions: vec![1, 1, 3, 3],
        window_strides: vec![1, 1, 2, 2],
        padding: vec![(0, 0), (0, 0), (1, 1), (1, 1)],
    };
    let out = fast::select_and_scatter(
        &operand,
        &source,
        0.5,
        CompareDirection::Ge,
        &attrs,
        &[1, 1, 4, 4],
    );
    // Window (0,0) starts at (-1,-1): first valid (0,0). Window (0,1) covers
    // cols 1..=3: first valid (0,1). Window (1,0): (1,0). Window (1,1): (1,1).
    let mut expected = vec![0.5f32; 16];
    expected[0] += 1.0;
    expected[1] += 10.0;
    expected[4] += 100.0;
    expected[5] += 1000.0;
    assert_eq!(out.data, expected);
    // A distinct maximum shared by two overlapping windows receives both values.
    let mut operand = Tensor::filled(vec![1, 1, 4, 4], 0.0f32);
    operand.data[4 + 1] = 5.0; // (1, 1): rows/cols 1 lie in windows [-1, 1] and [1, 3]
    let out = fast::select_and_scatter(
        &operand,
        &source,
        0.0,
        CompareDirection::Ge,
        &attrs,
        &[1, 1, 4, 4],
    );
    assert_eq!(out.data[4 + 1], 1111.0);
    assert_eq!(out.data.iter().filter(|&&v| v != 0.0).count(), 1);
}

// ---------------------------------------------------------------------------
// The evaluator with `fast: true` (these kernels) against `fast: false` (the
// generic path), on one-op modules.

mod against_generic_evaluator {
    use super::*;
    use den::eval::{eval_func, EvalOptions};
    use den::value::Value;
    use ir::{BinaryOp, Block, ElemType, FuncBuilder, Module, OpKind, TensorType, Visibility};

    fn ty(shape: &[usize]) -> TensorType {
        TensorType::f32(shape.iter().map(|&d| d as i64).collect::<Vec<i64>>())
    }

    /// `main(params…) = op(params…)` with `regions` built by `make_regions`.
    fn one_op_module(
        params: &[Vec<usize>],
        kind: OpKind,
        make_regions: impl FnOnce(&mut FuncBuilder) -> Vec<Block>,
        result: &[usize],
    ) -> Module {
        let mut b = FuncBuilder::new("main", Visibility::Public);
        let args: Vec<_> = params.iter().map(|p| b.param(ty(p))).collect();
        let regions = make_regions(&mut b);
        let r = b
            .push(kind, &args, regions, Some(&[ty(result)]))
            .expect("one-op module is well typed");
        let func = b.finish(&r).expect("function closes");
        Module {
            funcs: vec![func],
            ..Module::default()
        }
    }

    /// The single output of `main(inputs)` with the fast kernels on or off.
    fn run(m: &Module, inputs: &[Tensor<f32>], fast: bool) -> Tensor<f32> {
        let values = inputs
            .iter()
            .map(|t| Value::Float(t.clone(), ElemType::F32))
            .collect();
        let opts = EvalOptions {
            fast,
            record_margins: false,
            replicas: 1,
        };
        let mut ev = eval_func::<f32>(m, "main", values, &opts).expect("evaluation succeeds");
        match ev.outputs.remove(0) {
            Value::Float(t, ElemType::F32) => t,
            other => panic!("unexpected output {other:?}"),
        }
    }

    /// `|fast − generic| <= n · eps_f32 · Σ|terms|` per element (both are within
    /// half of that of the exact value), plus each against the exact value.
    fn assert_pair(
        what: &str,
        fast: &Tensor<f32>,
        generic: &Tensor<f32>,
        exact: &[Exact],
        terms: usize,
    ) {
        assert_eq!(fast.shape, generic.shape, "{what}: shapes");
        assert_within_bound(&format!("{what} (fast)"), fast, exact, terms);
        assert_within_bound(&format!("{what} (generic)"), generic, exact, terms);
        let k = terms.max(1) as f64 * f32::EPSILON as f64;
        for (i, ((&f, &g), e)) in fast.data.iter().zip(&generic.data).zip(exact).enumerate() {
            if e.value.is_finite() {
                assert!(
                    (f as f64 - g as f64).abs() <= k * e.abs_sum,
                    "{what}: element {i}: fast {f} vs generic {g}"
                );
            }
        }
    }

    fn scalar(x: f32) -> Tensor<f32> {
        Tensor::new(vec![], vec![x])
    }

    fn reducer_op(kind: ReduceKind) -> BinaryOp {
        match kind {
            ReduceKind::Add => BinaryOp::Add,
            ReduceKind::Max => BinaryOp::Maximum,
            ReduceKind::Min => BinaryOp::Minimum,
            ReduceKind::Mul => BinaryOp::Multiply,
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(64))]

        #[test]
        fn convolution_fast_equals_generic(case in conv_case_strategy()) {
            // The spec allows at most one of the group counts above 1 (the kernel
            // itself handles both, which the reference tests above cover).
            let mut case = case;
            if case.feature_groups > 1 {
                case.batch_groups = 1;
            }
            let (lhs, rhs) = case.operands(0xABCD);
            let attrs = case.attrs();
            let out = case.out_shape();
            let m = one_op_module(&[lhs.shape.clone(), rhs.shape.clone()], OpKind::Convolution(attrs.clone()), |_| vec![], &out);
            let inputs = [lhs.clone(), rhs.clone()];
            let terms = rhs.len() / case.out_features();
            let exact = reference_convolution(&lhs, &rhs, &attrs, &out);
            assert_pair("convolution", &run(&m, &inputs, true), &run(&m, &inputs, false), &exact, terms);
        }

        #[test]
        fn dot_general_fast_equals_generic(case in dot_case_strategy()) {
            let lhs = random_tensor(&case.shapes(&case.lhs_free, &case.lhs_layout), case.seed);
            let rhs = random_tensor(&case.shapes(&case.rhs_free, &case.rhs_layout), case.seed ^ 0x5555);
            let dims = case.dims();
            let out = case.out_shape();
            let kind = OpKind::DotGeneral { dims: dims.clone(), precision_config: None };
            let m = one_op_module(&[lhs.shape.clone(), rhs.shape.clone()], kind, |_| vec![], &out);
            let inputs = [lhs.clone(), rhs.clone()];
            let exact = reference_dot(&lhs, &rhs, &dims);
            let terms = case.contracting.iter().product();
            assert_pair("dot_general", &run(&m, &inputs, true), &run(&m, &inputs, false), &exact, terms);
        }

        #[test]
        fn reduce_window_fast_equals_generic(
            case in window_case_strategy(),
            kind in kind_strategy(),
            init in prop_oneof![Just(0.0f32), Just(f32::NEG_INFINITY), -2.0f32..2.0],
            seed in any::<u64>(),
        ) {
            let init = if kind == ReduceKind::Mul && init.is_infinite() { 1.0 } else { init };
            let input = Tensor::new(case.shape.clone(), reduce_data(kind, case.shape.iter().product(), seed));
            let m = one_op_module(
                &[case.shape.clone(), vec![]],
                OpKind::ReduceWindow(case.attrs.clone()),
                |b| vec![b.binary_region(reducer_op(kind), ElemType::F32).expect("reducer region")],
                &case.out_shape,
            );
            let inputs = [input.clone(), scalar(init)];
            let (fast, generic) = (run(&m, &inputs, true), run(&m, &inputs, false));
            let groups = reference_windows(&input, init, &case.attrs, &case.out_shape);
            check_fold("reduce_window (fast)", kind, &fast, init, &groups);
            check_fold("reduce_window (generic)", kind, &generic, init, &groups);
            if matches!(kind, ReduceKind::Max | ReduceKind::Min) {
                assert_same_bits("reduce_window fast vs generic", &fast, &generic.data);
            }
        }

        #[test]
        fn select_and_scatter_fast_equals_generic(
            case in scatter_case_strategy(),
            levels in 2u32..=5,
            seed in any::<u64>(),
        ) {
            let operand = Tensor::new(case.shape.clone(), random_levels(case.shape.iter().product(), seed, levels));
            let source = random_tensor(&case.source_shape, seed ^ 0x77);
            let m = one_op_module(
                &[case.shape.clone(), case.source_shape.clone(), vec![]],
                OpKind::SelectAndScatter(case.attrs.clone()),
                |b| {
                    let s = TensorType::scalar(ElemType::F32);
                    let select = b
                        .region(&[s.clone(), s], |b, a| {
                            let kind = OpKind::Compare { direction: CompareDirection::Ge, compare_type: None };
                            Ok(vec![b.push1(kind, &[a[0], a[1]], Some(TensorType::scalar(ElemType::I1)))?])
                        })
                        .expect("select region");
                    let scatter = b.binary_region(BinaryOp::Add, ElemType::F32).expect("scatter region");
                    vec![select, scatter]
                },
                &case.shape,
            );
            let inputs = [operand.clone(), source.clone(), scalar(0.0)];
            let (fast, generic) = (run(&m, &inputs, true), run(&m, &inputs, false));
            let received = reference_scatter(&operand, &source, CompareDirection::Ge, &case.attrs);
            check_fold("select_and_scatter (fast)", ReduceKind::Add, &fast, 0.0, &received);
            check_fold("select_and_scatter (generic)", ReduceKind::Add, &generic, 0.0, &received);
        }
    }

    #[test]
    fn reduce_fast_equals_generic() {
        let x = random_tensor(&[4, 3, 5, 6], 41);
        for kind in [
            ReduceKind::Add,
            ReduceKind::Max,
            ReduceKind::Min,
            ReduceKind::Mul,
        ] {
            let input = Tensor::new(x.shape.clone(), reduce_data(kind, x.len(), 41));
            for dims in [vec![0usize, 2, 3], vec![3], vec![0], vec![0, 1, 2, 3]] {
                let out: Vec<usize> = (0..4)
                    .filter(|d| !dims.contains(d))
                    .map(|d| x.shape[d])
                    .collect();
                let init = if kind == ReduceKind::Mul { 1.0 } else { 0.0 };
                let m = one_op_module(
                    &[x.shape.clone(), vec![]],
                    OpKind::Reduce {
                        dims: dims.iter().map(|&d| d as i64).collect(),
                    },
                    |b| {
                        vec![b
                            .binary_region(reducer_op(kind), ElemType::F32)
                            .expect("reducer region")]
                    },
                    &out,
                );
                let inputs = [input.clone(), scalar(init)];
                let (fast, generic) = (run(&m, &inputs, true), run(&m, &inputs, false));
                let mut groups = vec![Vec::new(); out.iter().product()];
                for (flat, &v) in input.data.iter().enumerate() {
                    let idx = unravel(flat, &input.shape);
                    let kept: Vec<usize> = (0..4)
                        .filter(|d| !dims.contains(d))
                        .map(|d| idx[d])
                        .collect();
                    groups[ravel(&kept, &out)].push(v);
                }
                check_fold("reduce (fast)", kind, &fast, init, &groups);
                check_fold("reduce (generic)", kind, &generic, init, &groups);
                if matches!(kind, ReduceKind::Max | ReduceKind::Min) {
                    assert_same_bits("reduce fast vs generic", &fast, &generic.data);
                }
            }
        }
    }
}
