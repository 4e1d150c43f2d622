//! `certgrad bench`: how fast the rendered train step runs on certgrad's CPU
//! executor (`bench step`, [`step`]) and what this machine's GEMM can do at
//! best (`bench gemm`, [`gemm`]), so that each step figure can be read as a
//! fraction of that limit. This module owns the arguments and the dispatch;
//! the FLOP count of a StableHLO function is [`flops`]'s.

mod flops;
mod gemm;
mod step;

use anyhow::Result;
use clap::{Args, Subcommand};

#[derive(Args)]
pub struct BenchArgs {
    #[command(subcommand)]
    pub what: BenchWhat,
}

#[derive(Subcommand)]
pub enum BenchWhat {
    /// Time a net's rendered train step: W warm-up steps, then N timed steps
    /// (each step's θ, m, v fed back into the next, as the trainer does).
    Step(StepArgs),
    /// Measure the single-precision GEMM peak (den's GEMM — its AVX-512 kernel, else matrixmultiply's sgemm — n×n×n, on rayon's threads).
    Gemm(GemmArgs),
}

#[derive(Args)]
pub struct StepArgs {
    /// A built-in net (see `certgrad nets`) or a .toml/.json net file.
    pub net: String,
    /// Batch size baked into the step.
    #[arg(long, default_value_t = 128)]
    pub batch: i64,
    /// Optimizer tail (sgd, nesterov, adamw, …: see `certgrad render --help`).
    #[arg(long, default_value = "sgd")]
    pub optimizer: String,
    /// Untimed steps before timing.
    #[arg(long, default_value_t = 3)]
    pub warmup: usize,
    /// Timed steps.
    #[arg(long, default_value_t = 10)]
    pub iters: usize,
    /// After the timed steps, run N more with per-op timing and print the top 15 ops.
    #[arg(long)]
    pub profile: bool,
    /// Run on the compiled executor, exec::Plan (the default).
    #[arg(long, conflicts_with = "generic")]
    pub engine_plan: bool,
    /// Run on the op-by-op evaluator (den::eval_func, fast f32 kernels).
    #[arg(long)]
    pub generic: bool,
    /// bf16 conv/dot operands with f32 accumulation.
    #[arg(long)]
    pub bf16: bool,
    /// Seed of the parameter init and of the random batch.
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
    /// Print one JSON object on stdout instead of the text report.
    #[arg(long)]
    pub json: bool,
}

#[derive(Args)]
pub struct GemmArgs {
    /// Matrix size n (C = A·B with n×n operands).
    #[arg(long, default_value_t = 1024)]
    pub n: usize,
    /// Timed repetitions (after one untimed).
    #[arg(long, default_value_t = 5)]
    pub reps: usize,
    /// Print one JSON object on stdout instead of the text report.
    #[arg(long)]
    pub json: bool,
}

pub fn bench(a: &BenchArgs) -> Result<()> {
    match &a.what {
        BenchWhat::Step(s) => step::bench_step(s),
        BenchWhat::Gemm(g) => gemm::bench_gemm(g),
    }
}

fn median(sorted: &[f64]) -> f64 {
    let n = sorted.len();
    if n % 2 == 1 {
        sorted[n / 2]
    } else {
        0.5 * (sorted[n / 2 - 1] + sorted[n / 2])
    }
}
