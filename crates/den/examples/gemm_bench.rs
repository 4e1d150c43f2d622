//! Throughput of the fast f32 kernels: raw `matrixmultiply::sgemm`, `dot_general`,
//! and a CIFAR-sized 3×3 convolution in its forward, input-gradient and
//! weight-gradient forms. Prints the median GFLOP/s of several runs.
//!
//! Run: `cargo run --release -p den --example gemm_bench`

use std::time::Instant;

use den::fast;
use den::Tensor;
use ir::{ConvAttrs, DotDims};

/// Median seconds of `runs` calls of `f` (after one warm-up call).
fn median_seconds(runs: usize, mut f: impl FnMut()) -> f64 {
    f();
    let mut times: Vec<f64> = (0..runs)
        .map(|_| {
            let t = Instant::now();
            f();
            t.elapsed().as_secs_f64()
        })
        .collect();
    times.sort_by(f64::total_cmp);
    times[runs / 2]
}

fn report(name: &str, flops: f64, seconds: f64) {
    println!(
        "{name:<48} {:>9.2} ms {:>8.2} GFLOP/s",
        seconds * 1e3,
        flops / seconds / 1e9
    );
}

fn filled(shape: &[usize], seed: u32) -> Tensor<f32> {
    let n: usize = shape.iter().product();
    let data = (0..n).map(|i| {
        ((i as u32).wrapping_mul(2_654_435_761).wrapping_add(seed) >> 24) as f32 / 128.0 - 1.0
    });
    Tensor::new(shape.to_vec(), data.collect())
}

fn raw_sgemm(n: usize) {
    let a = filled(&[n, n], 1);
    let b = filled(&[n, n], 2);
    let mut c = vec![0f32; n * n];
    let secs = median_seconds(5, || {
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
    report(
        &format!("matrixmultiply sgemm {n}^3"),
        2.0 * (n * n * n) as f64,
        secs,
    );
}

fn dot_general(n: usize) {
    let a = filled(&[n, n], 3);
    let b = filled(&[n, n], 4);
    let dims = DotDims {
        lhs_contracting: vec![1],
        rhs_contracting: vec![0],
        ..DotDims::default()
    };
    let secs = median_seconds(5, || {
        std::hint::black_box(fast::dot_general(&a, &b, &dims, &[n, n]));
    });
    report(
        &format!("fast::dot_general {n}^3"),
        2.0 * (n * n * n) as f64,
        secs,
    );
}

fn conv(name: &str, lhs: &[usize], rhs: &[usize], attrs: &ConvAttrs, out: &[usize], flops: f64) {
    let x = filled(lhs, 5);
    let w = filled(rhs, 6);
    let secs = median_seconds(7, || {
        std::hint::black_box(fast::convolution(&x, &w, attrs, out));
    });
    report(name, flops, secs);
}

fn main() {
    raw_sgemm(512);
    raw_sgemm(1024);
    dot_general(512);

    // CIFAR-like layer: batch 128, 16 → 16 channels, 32×32, 3×3, pad 1.
    let (n, c, o, hw) = (128usize, 16usize, 16usize, 32usize);
    let flops = 2.0 * (n * o * hw * hw * c * 9) as f64;
    let fwd = ConvAttrs {
        padding: vec![(1, 1), (1, 1)],
        ..ConvAttrs::plain2d()
    };
    conv(
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
    conv(
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
    conv(
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
    conv(
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
    conv(
        "depthwise weight grad (batch_group_count 16)",
        &[c, n, hw, hw],
        &[c, n, hw, hw],
        &dw,
        &[1, c, 3, 3],
        flops / o as f64,
    );
}
