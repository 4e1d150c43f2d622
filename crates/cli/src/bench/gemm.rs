//! `certgrad bench gemm`: this machine's single-precision GEMM peak (the
//! GEMM every fast kernel runs — den's AVX-512 kernel where the CPU has it,
//! else matrixmultiply's sgemm — on n×n×n, on rayon's threads as the fast
//! kernels run it), the limit a step's GFLOP/s is read against.

use super::{median, GemmArgs};
use anyhow::{bail, Result};
use std::time::Instant;

pub(super) fn bench_gemm(a: &GemmArgs) -> Result<()> {
    let n = a.n;
    if n == 0 || a.reps == 0 {
        bail!("--n and --reps must be at least 1");
    }
    let mut rng = ir::rng::Rng::derived(0, ir::rng::TRAIN_SALT, 0x6E44);
    let x: Vec<f32> = (0..n * n).map(|_| rng.normal() as f32).collect();
    let y: Vec<f32> = (0..n * n).map(|_| rng.normal() as f32).collect();
    let mut z = vec![0f32; n * n];
    let gemm = |z: &mut [f32]| den::fast::sgemm_row_major(&x, &y, z, n, n, n);
    gemm(&mut z);
    let mut gf = Vec::with_capacity(a.reps);
    for _ in 0..a.reps {
        let t0 = Instant::now();
        gemm(&mut z);
        gf.push(2.0 * (n as f64).powi(3) / t0.elapsed().as_secs_f64() / 1e9);
    }
    // A check that the product was computed at all: one entry against a dot product.
    let (i, j) = (n / 3, n / 2);
    let want: f64 = (0..n)
        .map(|k| x[i * n + k] as f64 * y[k * n + j] as f64)
        .sum();
    let got = z[i * n + j] as f64;
    if (got - want).abs() > 1e-3 * (1.0 + want.abs()) {
        bail!("sgemm returned a wrong product: C[{i},{j}] = {got}, expected {want}");
    }
    let mut sorted = gf.clone();
    sorted.sort_by(f64::total_cmp);
    let threads = std::env::var("RAYON_NUM_THREADS")
        .ok()
        .filter(|s| !s.is_empty());
    let thread_note = match &threads {
        Some(t) => format!("RAYON_NUM_THREADS={t}"),
        None => format!(
            "RAYON_NUM_THREADS unset: {} threads",
            rayon::current_num_threads()
        ),
    };
    if a.json {
        let j = serde_json::json!({
            "n": n,
            "reps": a.reps,
            "gflops_per_s": { "best": sorted[sorted.len() - 1], "median": median(&sorted), "all": gf },
            "threads": threads,
        });
        println!("{}", serde_json::to_string_pretty(&j)?);
        return Ok(());
    }
    println!(
        "sgemm {n}³ (den's GEMM, {thread_note}): best {:.1} GFLOP/s, median {:.1} GFLOP/s over {} runs",
        sorted[sorted.len() - 1],
        median(&sorted),
        a.reps
    );
    Ok(())
}
