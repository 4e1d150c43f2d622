//! Throughput of the fast f32 kernels: raw `matrixmultiply::sgemm` (the GEMM
//! den ran before its AVX-512 kernel, measured in the same run), `dot_general`
//! (ViT-Tiny's products against matrixmultiply, alternating calls), every
//! convolution the cifar8-bbn train step runs at batch 128 (the shapes and
//! attributes of `certgrad render cifar8-bbn --optimizer sgd --batch 128`:
//! forward and input-VJP are plain NCHW/OIHW 3×3 pad-1 convolutions, the
//! weight-VJP is the same attribute set on transposed operands), and other
//! forms (reversed window, lhs dilation, batch-feature swap, batch groups).
//! Prints the median time and GFLOP/s of several runs, and the step's total.
//!
//! Run: `cargo run --release -p den --example gemm_bench`
//! (single thread: `RAYON_NUM_THREADS=1 …`).

use std::time::Instant;

use den::fast;
use den::Tensor;
use ir::{ConvAttrs, DotDims};

/// Median and fastest seconds of `runs` calls of `f` (after one warm-up call);
/// on a shared machine the fastest run is the better estimate of the kernel.
fn time_runs(runs: usize, mut f: impl FnMut()) -> (f64, f64) {
    f();
    let mut times: Vec<f64> = (0..runs)
        .map(|_| {
            let t = Instant::now();
            f();
            t.elapsed().as_secs_f64()
        })
        .collect();
    times.sort_by(f64::total_cmp);
    (times[runs / 2], times[0])
}

/// Whether a benchmark runs: its name contains the first command-line argument
/// (all run without one).
fn selected(name: &str) -> bool {
    std::env::args().nth(1).is_none_or(|f| name.contains(&f))
}

fn report(name: &str, flops: f64, (median, best): (f64, f64)) {
    println!(
        "{name:<52} {:>8.2} ms {:>7.2} GFLOP/s   best {:>8.2} ms {:>7.2} GFLOP/s",
        median * 1e3,
        flops / median / 1e9,
        best * 1e3,
        flops / best / 1e9
    );
}

fn filled(shape: &[usize], seed: u32) -> Tensor<f32> {
    let n: usize = shape.iter().product();
    let data = (0..n).map(|i| {
        ((i as u32).wrapping_mul(2_654_435_761).wrapping_add(seed) >> 24) as f32 / 128.0 - 1.0
    });
    Tensor::new(shape.to_vec(), data.collect())
}

/// Times `f` on two filled `n×n` operands (fill seeds `seeds`) and reports it
/// under `name` as an `n³` matrix product.
fn square_matmul(
    name: &str,
    n: usize,
    seeds: (u32, u32),
    mut f: impl FnMut(&Tensor<f32>, &Tensor<f32>),
) {
    let a = filled(&[n, n], seeds.0);
    let b = filled(&[n, n], seeds.1);
    let secs = time_runs(5, || f(&a, &b));
    report(name, 2.0 * (n * n * n) as f64, secs);
}

/// Raw sgemm `n³`; the 1024³ peak always runs (the yardstick of the run).
fn raw_sgemm(n: usize) {
    let name = format!("matrixmultiply sgemm {n}^3");
    if n != 1024 && !selected(&name) {
        return;
    }
    let mut c = vec![0f32; n * n];
    square_matmul(&name, n, (1, 2), |a, b| {
        // SAFETY: a, b and c are dense n×n row-major buffers of the stated sizes.
        unsafe {
            matrixmultiply::sgemm(
                n,
                n,
                n,
                1.0,
                a.data.as_ptr(),
                n as isize,
                1,
                b.data.as_ptr(),
                n as isize,
                1,
                0.0,
                c.as_mut_ptr(),
                n as isize,
                1,
            );
        }
    });
}

fn dot_general(n: usize) {
    let name = format!("fast::dot_general {n}^3");
    if !selected(&name) {
        return;
    }
    let dims = DotDims {
        lhs_contracting: vec![1],
        rhs_contracting: vec![0],
        ..DotDims::default()
    };
    square_matmul(&name, n, (3, 4), |a, b| {
        std::hint::black_box(fast::dot_general(a, b, &dims, &[n, n]));
    });
}

/// ViT-Tiny's products at batch 8 (197 tokens, width 192, 3 heads of 64,
/// MLP 768): the dense layers as `[1576, k] · [k, n]`, attention's per-head
/// products batched over the 24 (example, head) pairs, and the dense
/// weight-VJP `xᵀ · dy` (contracting the 1576 rows of both).
fn vit_dots() {
    let t = 197usize;
    let rows = 8 * t;
    let plain = |batch: bool| DotDims {
        lhs_batch: if batch { vec![0] } else { vec![] },
        rhs_batch: if batch { vec![0] } else { vec![] },
        lhs_contracting: vec![if batch { 2 } else { 1 }],
        rhs_contracting: vec![if batch { 1 } else { 0 }],
    };
    // (name, lhs shape, rhs shape, dimension numbers, result shape)
    type Case = (&'static str, Vec<usize>, Vec<usize>, DotDims, Vec<usize>);
    let cases: [Case; 8] = [
        (
            "vit qkv   1576x192 * 192x576",
            vec![rows, 192],
            vec![192, 576],
            plain(false),
            vec![rows, 576],
        ),
        (
            "vit proj  1576x192 * 192x192",
            vec![rows, 192],
            vec![192, 192],
            plain(false),
            vec![rows, 192],
        ),
        (
            "vit mlp1  1576x192 * 192x768",
            vec![rows, 192],
            vec![192, 768],
            plain(false),
            vec![rows, 768],
        ),
        (
            "vit mlp2  1576x768 * 768x192",
            vec![rows, 768],
            vec![768, 192],
            plain(false),
            vec![rows, 192],
        ),
        (
            "vit score 24x(197x64 * 64x197)",
            vec![24, t, 64],
            vec![24, 64, t],
            plain(true),
            vec![24, t, t],
        ),
        (
            "vit scoreT 24x(197x64 * (197x64)^T)",
            vec![24, t, 64],
            vec![24, t, 64],
            DotDims {
                lhs_batch: vec![0],
                rhs_batch: vec![0],
                lhs_contracting: vec![2],
                rhs_contracting: vec![2],
            },
            vec![24, t, t],
        ),
        (
            "vit attnv 24x(197x197 * 197x64)",
            vec![24, t, t],
            vec![24, t, 64],
            plain(true),
            vec![24, t, 64],
        ),
        (
            "vit dW    (1576x192)^T * 1576x768",
            vec![rows, 192],
            vec![rows, 768],
            DotDims {
                lhs_contracting: vec![0],
                rhs_contracting: vec![0],
                ..DotDims::default()
            },
            vec![192, 768],
        ),
    ];
    let mut total = 0.0;
    for (name, l, r, dims, out) in cases {
        if !selected(name) {
            continue;
        }
        let (a, b) = (filled(&l, 5), filled(&r, 6));
        let k: usize = dims
            .lhs_contracting
            .iter()
            .map(|&d| l[d as usize])
            .product();
        let flops = 2.0 * (out.iter().product::<usize>() * k) as f64;
        // The peer: matrixmultiply's sgemm (den's GEMM before its own
        // AVX-512 kernel) on the same strided operands: batches on rayon's
        // threads, a single product cut into one row block per thread.
        let batch = if dims.lhs_batch.is_empty() { 1 } else { l[0] };
        let (m, n) = (out[out.len() - 2], out[out.len() - 1]);
        let stride = |shape: &[usize], d: usize| shape[d + 1..].iter().product::<usize>() as isize;
        let lc = dims.lhs_contracting[0] as usize;
        let rc = dims.rhs_contracting[0] as usize;
        let lr = if lc == l.len() - 1 {
            l.len() - 2
        } else {
            l.len() - 1
        };
        let rn = if rc == r.len() - 1 {
            r.len() - 2
        } else {
            r.len() - 1
        };
        let (rsa, csa) = (stride(&l, lr), stride(&l, lc));
        let (rsb, csb) = (stride(&r, rc), stride(&r, rn));
        let per = if batch > 1 {
            m
        } else {
            m.div_ceil(rayon::current_num_threads()).div_ceil(16) * 16
        };
        let peer = || {
            use rayon::prelude::*;
            let mut c = vec![0.0f32; batch * m * n];
            c.par_chunks_mut(m * n).enumerate().for_each(|(i, c)| {
                c.par_chunks_mut(per * n).enumerate().for_each(|(j, c)| {
                    let a0 = i * a.data.len() / batch + j * per * rsa as usize;
                    // SAFETY: rows j·per.. of batch i's views, in bounds of
                    // the operands' buffers; `c` is this block's rows.
                    unsafe {
                        matrixmultiply::sgemm(
                            c.len() / n,
                            k,
                            n,
                            1.0,
                            a.data[a0..].as_ptr(),
                            rsa,
                            csa,
                            b.data[i * b.data.len() / batch..].as_ptr(),
                            rsb,
                            csb,
                            0.0,
                            c.as_mut_ptr(),
                            n as isize,
                            1,
                        )
                    }
                })
            });
            std::hint::black_box(c);
        };
        // Alternating calls, so a slow spell of the machine hits both.
        let mut pairs = vec![];
        for _ in 0..21 {
            let t0 = Instant::now();
            std::hint::black_box(fast::dot_general(&a, &b, &dims, &out));
            let t1 = Instant::now();
            peer();
            pairs.push([
                t1.duration_since(t0).as_secs_f64(),
                t1.elapsed().as_secs_f64(),
            ]);
        }
        let mut r: Vec<f64> = pairs.iter().map(|t| t[0] / t[1]).collect();
        r.sort_by(f64::total_cmp);
        let mut times: Vec<f64> = pairs.iter().map(|t| t[0]).collect();
        times.sort_by(f64::total_cmp);
        total += times[10];
        println!(
            "{name:<38} {:>7.1} GFLOP/s  den/matrixmultiply {:.3} (quartiles {:.3}, {:.3})",
            flops / times[10] / 1e9,
            r[10],
            r[5],
            r[15]
        );
    }
    if total > 0.0 {
        println!("vit products, den's medians summed: {:.2} ms", total * 1e3);
    }
}

/// The ResNet stem's max-pool at batch 8 (3×3, stride 2, padding 1 on
/// `[8, 64, 112, 112]`) and its backward.
fn stem_pool() {
    if !selected("stem pool") {
        return;
    }
    let x = filled(&[8, 64, 112, 112], 9);
    let s = filled(&[8, 64, 56, 56], 10);
    let window = ir::WindowAttrs {
        window_dimensions: vec![1, 1, 3, 3],
        window_strides: vec![1, 1, 2, 2],
        padding: vec![(0, 0), (0, 0), (1, 1), (1, 1)],
        base_dilations: vec![1; 4],
        window_dilations: vec![1; 4],
    };
    let scatter = ir::ScatterWindowAttrs {
        window_dimensions: window.window_dimensions.clone(),
        window_strides: window.window_strides.clone(),
        padding: window.padding.clone(),
    };
    let outputs = (8 * 64 * 56 * 56) as f64;
    let secs = time_runs(9, || {
        std::hint::black_box(fast::reduce_window(
            &x,
            f32::NEG_INFINITY,
            fast::ReduceKind::Max,
            &window,
            &[8, 64, 56, 56],
        ));
    });
    report(
        "stem pool reduce_window (GFLOP = 9 per output)",
        9.0 * outputs,
        secs,
    );
    let secs = time_runs(9, || {
        std::hint::black_box(fast::select_and_scatter(
            &x,
            &s,
            0.0,
            ir::CompareDirection::Ge,
            &scatter,
            &x.shape,
        ));
    });
    report(
        "stem pool select_and_scatter (9 per source)",
        9.0 * outputs,
        secs,
    );
}

/// Times one convolution; returns (median, best) seconds.
fn conv(
    name: &str,
    lhs: &[usize],
    rhs: &[usize],
    attrs: &ConvAttrs,
    out: &[usize],
    flops: f64,
) -> (f64, f64) {
    if !selected(name) {
        return (0.0, 0.0);
    }
    let x = filled(lhs, 5);
    let w = filled(rhs, 6);
    let secs = time_runs(7, || {
        std::hint::black_box(fast::convolution(&x, &w, attrs, out));
    });
    report(name, flops, secs);
    secs
}

/// One convolution of the cifar8-bbn step at batch 128: `[b, f, 0, 1] x [o, i,
/// 0, 1] -> [b, f, 0, 1]`, stride 1, pad 1, and how often the step runs it.
struct StepConv {
    kind: &'static str,
    lhs: [usize; 4],
    rhs: [usize; 4],
    out: [usize; 4],
    count: usize,
}

const fn sc(
    kind: &'static str,
    lhs: [usize; 4],
    rhs: [usize; 4],
    out: [usize; 4],
    count: usize,
) -> StepConv {
    StepConv {
        kind,
        lhs,
        rhs,
        out,
        count,
    }
}

/// The step's convolutions (`grep stablehlo.convolution` in the rendered step):
/// the input-VJP is a forward-shaped convolution with the transposed, reversed
/// kernel; the weight-VJP convolves `xᵀ [C, N, H, W]` with `dyᵀ [O, N, H, W]`.
const STEP: &[StepConv] = &[
    sc("fwd", [128, 3, 32, 32], [16, 3, 3, 3], [128, 16, 32, 32], 1),
    sc(
        "fwd+dx",
        [128, 16, 32, 32],
        [16, 16, 3, 3],
        [128, 16, 32, 32],
        2,
    ),
    sc(
        "fwd+dx",
        [128, 16, 16, 16],
        [16, 16, 3, 3],
        [128, 16, 16, 16],
        4,
    ),
    sc("fwd", [128, 16, 8, 8], [32, 16, 3, 3], [128, 32, 8, 8], 1),
    sc("dx", [128, 32, 8, 8], [16, 32, 3, 3], [128, 16, 8, 8], 1),
    sc(
        "fwd+dx",
        [128, 32, 8, 8],
        [32, 32, 3, 3],
        [128, 32, 8, 8],
        2,
    ),
    sc(
        "fwd+dx",
        [128, 32, 4, 4],
        [32, 32, 3, 3],
        [128, 32, 4, 4],
        4,
    ),
    sc("dw", [3, 128, 32, 32], [16, 128, 32, 32], [3, 16, 3, 3], 1),
    sc(
        "dw",
        [16, 128, 32, 32],
        [16, 128, 32, 32],
        [16, 16, 3, 3],
        1,
    ),
    sc(
        "dw",
        [16, 128, 16, 16],
        [16, 128, 16, 16],
        [16, 16, 3, 3],
        2,
    ),
    sc("dw", [16, 128, 8, 8], [32, 128, 8, 8], [16, 32, 3, 3], 1),
    sc("dw", [32, 128, 8, 8], [32, 128, 8, 8], [32, 32, 3, 3], 1),
    sc("dw", [32, 128, 4, 4], [32, 128, 4, 4], [32, 32, 3, 3], 2),
];

/// `128x16x32x32`.
fn dims(shape: &[usize]) -> String {
    let d: Vec<String> = shape.iter().map(usize::to_string).collect();
    d.join("x")
}

fn step_convolutions() {
    let attrs = ConvAttrs {
        padding: vec![(1, 1), (1, 1)],
        ..ConvAttrs::plain2d()
    };
    let (mut total_s, mut total_best, mut total_flops) = (0.0, 0.0, 0.0);
    for c in STEP {
        // out[b, o, p] sums lhs features × kernel taps.
        let flops = 2.0 * (c.out.iter().product::<usize>() * c.rhs[1] * c.rhs[2] * c.rhs[3]) as f64;
        let name = format!(
            "step {:<6} {} * {} (x{})",
            c.kind,
            dims(&c.lhs),
            dims(&c.rhs),
            c.count
        );
        let (median, best) = conv(&name, &c.lhs, &c.rhs, &attrs, &c.out, flops);
        total_s += median * c.count as f64;
        total_best += best * c.count as f64;
        total_flops += flops * c.count as f64;
    }
    report(
        "step convolutions, all (count-weighted)",
        total_flops,
        (total_s, total_best),
    );
}

fn main() {
    raw_sgemm(512);
    raw_sgemm(1024);
    dot_general(512);
    vit_dots();
    stem_pool();
    step_convolutions();

    // CIFAR-like layer: batch 128, 16 → 16 channels, 32×32, 3×3, pad 1.
    let (n, c, o, hw) = (128usize, 16usize, 16usize, 32usize);
    let flops = 2.0 * (n * o * hw * hw * c * 9) as f64;
    let fwd = ConvAttrs {
        padding: vec![(1, 1), (1, 1)],
        ..ConvAttrs::plain2d()
    };
    let _ = conv(
        "conv forward  NCHW 128x16x32x32 * 16x16x3x3",
        &[n, c, hw, hw],
        &[o, c, 3, 3],
        &fwd,
        &[n, o, hw, hw],
        flops,
    );

    // Input gradient: dy convolved with the O/I-swapped, spatially reversed kernel.
    let mut dgrad = fwd.clone();
    dgrad.window_reversal = vec![true, true];
    dgrad.dims.kernel_input_feature = 0;
    dgrad.dims.kernel_output_feature = 1;
    let _ = conv(
        "conv input grad (reversed window)",
        &[n, o, hw, hw],
        &[o, c, 3, 3],
        &dgrad,
        &[n, c, hw, hw],
        flops,
    );

    // Strided input gradient (transposed conv): a stride-2 layer's 16×16 dy,
    // zero-upsampled by lhs_dilation 2. Useful FLOPs are a quarter of the dense count.
    let mut tconv = dgrad.clone();
    tconv.lhs_dilation = vec![2, 2];
    tconv.padding = vec![(1, 2), (1, 2)];
    let _ = conv(
        "conv input grad stride 2 (lhs_dilation 2)",
        &[n, o, hw / 2, hw / 2],
        &[o, c, 3, 3],
        &tconv,
        &[n, c, hw, hw],
        flops / 4.0,
    );

    // Weight gradient, transpose trick: batch and feature swap roles, dy is the kernel.
    let mut wgrad = fwd.clone();
    wgrad.dims.input_batch = 1;
    wgrad.dims.input_feature = 0;
    wgrad.dims.kernel_input_feature = 0;
    wgrad.dims.kernel_output_feature = 1;
    wgrad.dims.output_batch = 1;
    wgrad.dims.output_feature = 0;
    let _ = conv(
        "conv weight grad (batch<->feature)",
        &[n, c, hw, hw],
        &[n, o, hw, hw],
        &wgrad,
        &[o, c, 3, 3],
        flops,
    );

    // Depthwise weight gradient: batch_group_count = channels.
    let mut dw = fwd.clone();
    dw.batch_group_count = c as i64;
    let _ = conv(
        "depthwise weight grad (batch_group_count 16)",
        &[c, n, hw, hw],
        &[c, n, hw, hw],
        &dw,
        &[1, c, 3, 3],
        flops / o as f64,
    );
}
