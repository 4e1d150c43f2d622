//! `certgrad`: the command-line front end. Each subcommand is a thin shell over
//! the library crates; exit status 0 = ok, 1 = a check refuted, 2 = usage,
//! parse or verification error.

mod bench;
mod bound;
mod certify;
mod certify_step;
mod check_vjp;
mod demo;
mod diff;
mod nets;
mod render;
mod run_engine;
mod train;
mod validate;

use anyhow::{bail, Context, Result};
use clap::{Parser, Subcommand};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Instant;

#[derive(Parser)]
#[command(
    name = "certgrad",
    version,
    about = "Compile, certify and run StableHLO training steps",
    long_about = "certgrad reads and writes StableHLO text (the form `jax.jit(f).lower(...).as_text()` \
prints and `iree-compile --iree-input-type=stablehlo` accepts), evaluates it with one \
reference semantics generic over the scalar type, and runs it on a fast f32 CPU executor."
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
    /// The most bytes one tensor may take, and one evaluation may hold live
    /// at once (e.g. 8G, 512M; powers of 1024); more is refused before
    /// allocating, naming the op. Default: $CERTGRAD_MAX_BYTES, else 16G per
    /// tensor and the machine's physical memory in all.
    #[arg(long, global = true, value_name = "BYTES")]
    max_memory: Option<String>,
}

#[derive(Subcommand)]
enum Command {
    /// Built-in default job: build a small conv net, print it as StableHLO, parse it
    /// back and evaluate it on every evaluator path, reporting agreement.
    Demo,
    /// Certify that each op's backward map IS the VJP of its forward (leaf ties).
    ///
    /// Each tie evaluates the emitted forward over dual numbers (forward mode)
    /// and checks the adjoint identity <u, J v> = <B(u), v> against the emitted
    /// backward map B for random probes, block by block — exactly, in rational
    /// arithmetic, for piecewise-linear ops; in f64 with a stated tolerance
    /// otherwise. Exit status: 0 all certified, 1 any refuted or undecided.
    ///
    /// `--controls` also runs the ops' negative controls (shape-preserving
    /// backward bugs) and shows each REFUTED beside its certified twin; the
    /// exit status is then 0 only if every control is refuted as well.
    ///
    /// `certify NET` (a built-in net or a .toml/.json net file) certifies the
    /// whole net: the chain's backward IS the VJP of its logits forward, and every
    /// parameter gradient of the loss chain IS dLoss/dθ at the sampled point.
    Certify {
        /// A net to certify: a built-in name (see `certgrad nets`) or a net file.
        net: Option<String>,
        /// NET only: batch size N of the net's input [N,C,H,W] (each op
        /// configuration has its own input; --shape overrides it).
        #[arg(long, default_value_t = 1, conflicts_with_all = ["op", "all_ops"])]
        batch: i64,
        /// Adjoint-identity probes per block and point (nets: default 1;
        /// ops: default 2).
        #[arg(long)]
        probes: Option<usize>,
        /// Smooth points to certify at (nets: default 1; ops: default 3).
        #[arg(long)]
        points: Option<usize>,
        /// Certify one op family (e.g. conv2d, maxpool, batchnorm); not with NET.
        #[arg(long, conflicts_with = "net")]
        op: Option<String>,
        /// Certify every op configuration of the catalog; not with NET.
        #[arg(long, conflicts_with_all = ["net", "op"])]
        all_ops: bool,
        /// With --op or --all-ops: also run the ops' negative controls, each a
        /// backward bug that must be REFUTED while its correct twin certifies.
        #[arg(long, conflicts_with = "net")]
        controls: bool,
        /// Input shape override for --op or --all-ops, comma separated (e.g.
        /// 2,3,9,7); not with NET (a net's input is [--batch, C, H, W]).
        #[arg(long, value_delimiter = ',', conflicts_with = "net")]
        shape: Option<Vec<i64>>,
        /// Seed of the sampled points and probes.
        #[arg(long, default_value_t = 0)]
        seed: u64,
        /// Write the certificate (every tie, margin, evidence, timing) as JSON.
        #[arg(long)]
        json: Option<PathBuf>,
        /// NET: certify the stochastic-depth render at maximum drop rate RATE
        /// (docs/conventions.md §13, as `render --drop-path`): the logits tie takes
        /// the keep inputs as tie blocks, the parameter ties hold them fixed
        /// at one seeded draw of the masks on the net's ramp.
        #[arg(long, value_name = "RATE")]
        drop_path: Option<f64>,
    },
    /// Render a built-in net's fused train step (forward, loss, backward,
    /// optimizer), its eval forward or its train-mode forward as StableHLO
    /// text, derived from its NetSpec.
    #[command(after_help = render::tails_help())]
    Render {
        /// A built-in net (e.g. cifar8-bbn, see `certgrad nets`) or a .toml/.json net file.
        net: String,
        /// Optimizer tail: sgd, nesterov, adamw, momentum (heavy-ball, coupled L2),
        /// rmsprop (TF form) or lamb; formulas below. Not with --eval or
        /// --forward (a forward has no optimizer).
        #[arg(long, default_value = "adamw", conflicts_with_all = ["eval", "forward"])]
        optimizer: String,
        #[command(flatten)]
        recipe: Box<render::RecipeArgs>,
        /// Batch size baked into the signature (per replica).
        #[arg(long, default_value_t = 128)]
        batch: i64,
        /// bf16 conv/dot operands with f32 accumulation (master weights stay f32).
        #[arg(long)]
        bf16: bool,
        /// Data-parallel replicas R: one all_reduce (sum) per gradient, then ÷R.
        #[arg(long, default_value_t = 1)]
        replicas: usize,
        /// Render the eval forward (running BN statistics) instead of the train step.
        #[arg(long, conflicts_with = "forward")]
        eval: bool,
        /// Render the train-mode forward instead of the train step:
        /// `@NET_fwd(x, θ…) -> logits`, batch norms on the batch's own
        /// statistics (the train step's forward), no running statistics taken.
        #[arg(long)]
        forward: bool,
        /// Max-pool backward form: select-and-scatter or shifted-sums (IREE).
        /// Not with --eval or --forward (a forward has no backward).
        #[arg(long, default_value = "select-and-scatter", conflicts_with_all = ["eval", "forward"])]
        pool_backward: String,
        /// Output .mlir file.
        #[arg(short, long)]
        output: PathBuf,
    },
    /// List the built-in nets (or one net: a name or a net file) with input
    /// shape and parameter counts; `--write-file` writes the net as a file.
    Nets {
        /// One net to list: a built-in name or a .toml/.json net file.
        net: Option<String>,
        /// A .toml or .json net file to read (the same as giving it as NET).
        #[arg(long, conflicts_with = "net")]
        file: Option<PathBuf>,
        /// Write the net (NET or --file) to this .toml or .json file; it reads
        /// back to the same net and renders the same step.
        #[arg(long)]
        write_file: Option<PathBuf>,
    },
    /// Parse, verify and round-trip a StableHLO file; print its functions and op counts.
    Check {
        /// The .mlir file to check.
        file: PathBuf,
    },
    /// Print a StableHLO file in certgrad's canonical form (parse, verify, print).
    Fmt {
        /// The .mlir file to reformat.
        file: PathBuf,
        /// Write here instead of standard output.
        #[arg(short, long)]
        output: Option<PathBuf>,
    },
    /// Certify that a StableHLO backward IS the VJP of a StableHLO forward.
    ///
    /// FWD holds f(a0..an) -> (y0..ym); BWD holds b(a0..an, dy0..dym) -> (da0..dan)
    /// (e.g. JAX exports of f and of `jax.vjp(f, …)[1]`). Exit status: 0 certified,
    /// 1 refuted, 2 usage or parse error, 3 could not decide.
    CheckVjp {
        /// The forward's .mlir file.
        fwd: PathBuf,
        /// The backward's .mlir file.
        bwd: PathBuf,
        /// Forward function (default: @main, else the only public function).
        #[arg(long)]
        fwd_func: Option<String>,
        /// Backward function (default: @main, else the only public function).
        #[arg(long)]
        bwd_func: Option<String>,
        /// The point: one .npy file per forward argument (default: seeded random).
        #[arg(long, num_args = 1..)]
        at: Vec<PathBuf>,
        /// Seed of the sampled points and probes.
        #[arg(long, default_value_t = 0)]
        seed: u64,
        /// Adjoint-identity probes per input and point.
        #[arg(long, default_value_t = 2)]
        probes: usize,
        /// Boundary points after the sampled ones certify: each decision's
        /// compared quantity put just above and just below every threshold
        /// either function compares against, so a moved threshold (a mask at
        /// 6.06 for a ReLU6 at 6) is refuted. 0 turns them off.
        #[arg(long, default_value_t = 16)]
        boundary_points: usize,
        /// Write the verdict and evidence as JSON.
        #[arg(long)]
        json: Option<PathBuf>,
    },
    /// Certify a fused train step certgrad did not write (a JAX `train_step`
    /// export, another generator's step): find the loss, parameters, state
    /// and data; for every parameter, the value its update reads as the
    /// gradient, tied to the directional derivative of the step's own loss
    /// (dual numbers through its forward); the optimizer tail fitted. Exit
    /// status: 0 certified, 1 refuted, 2 usage, 3 undecided.
    CertifyStep(certify_step::CertifyStepArgs),
    /// Train a net with its rendered, certified step (certifies it first), with
    /// checkpoints, a metrics log and a plot in the run directory.
    Train(train::TrainArgs),
    /// Time a rendered train step on the CPU executor, or measure the GEMM peak.
    Bench(bench::BenchArgs),
    /// Score a run directory's latest checkpoint on the test split.
    Eval(train::EvalArgs),
    /// Evaluate a function of a StableHLO file on .npy inputs; write its outputs as .npy.
    Run(RunArgs),
    /// Whether two StableHLO functions compute the same function: signatures,
    /// every result at seeded points in float64, and where they part (the
    /// first op of each whose value the other never computes, with its line).
    /// Exit status: 0 same, 1 different, 2 usage, 3 undecided (no finite
    /// result at any point).
    Diff(diff::DiffArgs),
    /// A rigorous bound on the f32 rounding error of a net's step (or any function) at a point, for any IEEE evaluation in any summation order, and the mask-flip-free decision. Exit status: 0 rigorous (no compare/select_and_scatter can flip), 1 one could (the bounds then assume the exact branches), 2 usage, 3 a measured value escaped a rigorous bound.
    Bound(bound::BoundArgs),
}

#[derive(clap::Args)]
struct RunArgs {
    /// The .mlir file holding the function.
    file: PathBuf,
    /// Function to run (default: @main, else the only public function).
    #[arg(long)]
    func: Option<String>,
    /// One .npy file per function argument, in order (dtype and shape are checked).
    #[arg(long, num_args = 0..)]
    inputs: Vec<PathBuf>,
    /// Directory for out_0.npy, out_1.npy, … (created if missing).
    #[arg(long)]
    out: PathBuf,
    /// Use the generic reference evaluator instead of the fast f32 kernels.
    #[arg(long)]
    generic: bool,
    #[command(flatten)]
    engine: train::EngineArgs,
    /// Run the function this many times and report the step times.
    #[arg(long, default_value_t = 1)]
    repeat: usize,
    /// Also evaluate in float64 and print the smallest decision margins
    /// (max/min/compare/select/pool windows) at these inputs: how close the
    /// point is to a kink where f32 rounding can change a branch.
    #[arg(long, value_name = "N", num_args = 0..=1, default_missing_value = "8")]
    margins: Option<usize>,
    /// Switch one of the native plan's rewrites off (repeatable): cse,
    /// conv_bias, conv_upsample, dot_bias, conv_moments, sum_in_producer,
    /// sibling_reductions, in_place. The function is the same with any set;
    /// if outputs change, the rewrite switched off is wrong (compare with
    /// --generic). Native engine only.
    #[arg(long, value_name = "REWRITE")]
    without_rewrite: Vec<String>,
    /// Run R replicas of a data-parallel function (its all_reduce sums over
    /// them). --inputs then holds R × (arguments) files, replica 0's
    /// arguments first, or one set that every replica takes; the outputs go
    /// to OUT/replica_0/, OUT/replica_1/, …
    #[arg(long, value_name = "R", default_value_t = 1)]
    replicas: usize,
}

/// An error that has already been reported in full; exit with this status.
struct Exit(u8);

fn main() -> ExitCode {
    validate::quiet_broken_pipe();
    let matches = <Cli as clap::CommandFactory>::command().get_matches();
    let mut cli = match <Cli as clap::FromArgMatches>::from_arg_matches(&matches) {
        Ok(cli) => cli,
        Err(e) => e.exit(),
    };
    if let (Command::Train(a), Some(("train", m))) = (&mut cli.command, matches.subcommand()) {
        a.given = m
            .ids()
            .filter(|id| {
                m.value_source(id.as_str()) == Some(clap::parser::ValueSource::CommandLine)
            })
            .map(|id| id.to_string())
            .collect();
    }
    let checked =
        validate::memory_limit(cli.max_memory.as_deref()).and_then(|()| match &cli.command {
            Command::Certify {
                probes,
                points,
                shape,
                ..
            } => validate::certify(*probes, *points, shape.as_deref()),
            _ => Ok(()),
        });
    if let Err(e) = checked {
        eprintln!("error: {e:#}");
        return ExitCode::from(2);
    }
    let result = match cli.command {
        Command::Demo => demo::demo(),
        Command::Nets {
            net,
            file,
            write_file,
        } => nets::nets(
            net.or_else(|| file.map(|f| f.display().to_string()))
                .as_deref(),
            write_file.as_deref(),
        ),
        Command::Certify {
            net: Some(net),
            batch,
            probes,
            points,
            seed,
            json,
            drop_path,
            ..
        } => certify::certify_net(&certify::NetArgs {
            net: &net,
            batch,
            seed,
            probes,
            points,
            json: json.as_deref(),
            drop_path,
        })
        .and_then(|code| {
            if code == 0 {
                Ok(())
            } else {
                Err(Exit(code).into())
            }
        }),
        Command::Certify {
            drop_path: Some(_),
            ..
        } => Err(anyhow::anyhow!(
            "--drop-path: certifies a net's stochastic-depth render; give a NET (e.g. `certgrad certify vit-tiny --drop-path 0.1`)"
        )),
        Command::Certify {
            op,
            all_ops,
            controls,
            shape,
            probes,
            points,
            seed,
            json,
            ..
        } => certify::certify(&certify::CertifyArgs {
            op: op.as_deref(),
            all_ops,
            shape: shape.as_deref(),
            probes,
            points,
            seed,
            json: json.as_deref(),
            controls,
        })
        .and_then(|code| {
            if code == 0 {
                Ok(())
            } else {
                Err(Exit(code).into())
            }
        }),
        Command::Render {
            net,
            optimizer,
            recipe,
            batch,
            bf16,
            replicas,
            eval,
            forward,
            pool_backward,
            output,
        } => render::render(&render::RenderArgs {
            net: &net,
            optimizer: &optimizer,
            recipe: &recipe,
            batch,
            bf16,
            replicas,
            eval,
            forward,
            pool_backward: &pool_backward,
            output: &output,
        }),
        Command::Check { file } => check(&file),
        Command::Fmt { file, output } => load_module(&file).and_then(|m| {
            let text = ir::print::print_module(&m);
            match output {
                Some(p) => {
                    std::fs::write(&p, text).with_context(|| format!("writing {}", p.display()))
                }
                None => {
                    print!("{text}");
                    Ok(())
                }
            }
        }),
        Command::CheckVjp {
            fwd,
            bwd,
            fwd_func,
            bwd_func,
            at,
            seed,
            probes,
            boundary_points,
            json,
        } => validate::check_vjp(probes).and_then(|()| {
            check_vjp::check_vjp(&check_vjp::CheckVjpArgs {
                fwd: &fwd,
                bwd: &bwd,
                fwd_func: fwd_func.as_deref(),
                bwd_func: bwd_func.as_deref(),
                at: &at,
                seed,
                probes,
                boundary_points,
                json: json.as_deref(),
            })
        }),
        Command::CertifyStep(a) => certify_step::certify_step(&a),
        Command::Train(a) => validate::train(&a)
            .and_then(|()| a.engine.check_used(a.shadow_engine.as_deref()))
            .and_then(|()| train::train(&a)),
        Command::Bench(a) => bench::bench(&a),
        Command::Bound(a) => bound::bound(&a),
        Command::Diff(a) => diff::diff(&a).and_then(|code| match code {
            0 => Ok(()),
            c => Err(Exit(c).into()),
        }),
        Command::Eval(a) => a.engine.check_used(None).and_then(|()| train::eval(&a)),
        Command::Run(a) => validate::run(a.repeat)
            .and_then(|()| a.engine.check_used(None))
            .and_then(|()| a.engine.options())
            .and_then(|e| validate::rewrites(e, &a.without_rewrite, a.generic))
            .and_then(|e| run(&a, &e)),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => match e.downcast_ref::<Exit>() {
            Some(Exit(code)) => ExitCode::from(*code),
            // Stopped by Ctrl-C after writing a checkpoint: 130, as a shell
            // reports a SIGINT death, with the message saying how to resume.
            None if matches!(
                e.downcast_ref::<::train::TrainError>(),
                Some(::train::TrainError::Interrupted(_))
            ) =>
            {
                eprintln!("{e:#}");
                ExitCode::from(130)
            }
            None => {
                eprintln!("error: {e:#}");
                ExitCode::from(2)
            }
        },
    }
}

impl std::fmt::Debug for Exit {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "exit {}", self.0)
    }
}
impl std::fmt::Display for Exit {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "exit {}", self.0)
    }
}
impl std::error::Error for Exit {}

/// Read, parse and verify a module; errors are printed as `file:line:col: …`.
fn load_module(file: &Path) -> Result<ir::Module> {
    let text =
        std::fs::read_to_string(file).with_context(|| format!("reading {}", file.display()))?;
    let name = file.display().to_string();
    let module = ir::parse::parse_module(&text, &name).map_err(|e| anyhow::anyhow!("{e}"))?;
    ir::verify::verify_module(&module).map_err(|e| anyhow::anyhow!("{name}: {e}"))?;
    Ok(module)
}

fn signature(f: &ir::Func) -> String {
    let ins: Vec<String> = f.params.iter().map(|p| p.ty.to_string()).collect();
    let outs: Vec<String> = f.results.iter().map(|r| r.ty.to_string()).collect();
    format!("({}) -> ({})", ins.join(", "), outs.join(", "))
}

fn check(file: &Path) -> Result<()> {
    let t0 = Instant::now();
    let module = load_module(file)?;
    let parsed = t0.elapsed();
    let printed = ir::print::print_module(&module);
    let reparsed = ir::parse::parse_module(&printed, "<printed>")
        .map_err(|e| anyhow::anyhow!("round trip: the printed module does not parse: {e}"))?;
    if reparsed != module {
        bail!("round trip: parse(print(m)) differs from m");
    }
    if ir::print::print_module(&reparsed) != printed {
        bail!("round trip: printing is not a fixed point");
    }
    println!(
        "{}: ok ({} function{}, parsed and verified in {:.1} ms, round trip exact)",
        file.display(),
        module.funcs.len(),
        if module.funcs.len() == 1 { "" } else { "s" },
        parsed.as_secs_f64() * 1e3
    );
    for f in &module.funcs {
        let vis = match f.visibility {
            ir::Visibility::Public => "public",
            ir::Visibility::Private => "private",
        };
        let counts = f.op_counts();
        let total: usize = counts.iter().map(|(_, c)| c).sum();
        println!("  func {vis} @{} {}", f.name, signature(f));
        println!("    {total} ops");
        for (name, c) in counts {
            println!("    {c:>6}  {name}");
        }
    }
    Ok(())
}

fn run(a: &RunArgs, engine: &engines::select::EngineOptions) -> Result<()> {
    let (file, func, inputs, out) = (&a.file, a.func.as_deref(), &a.inputs, &a.out);
    let module = load_module(file)?;
    let f = match func {
        Some(name) => module.func(name).with_context(|| {
            let names: Vec<&str> = module.funcs.iter().map(|f| f.name.as_str()).collect();
            format!(
                "{}: no function @{name} (functions: @{})",
                file.display(),
                names.join(", @")
            )
        })?,
        None => module.default_entry().with_context(|| {
            format!(
                "{}: several public functions; choose one with --func",
                file.display()
            )
        })?,
    };
    let n = f.params.len();
    let replicas = a.replicas;
    if replicas == 0 {
        bail!("--replicas must be at least 1");
    }
    if replicas > 1 && a.margins.is_some() {
        bail!("--margins evaluates one replica; it does not combine with --replicas");
    }
    let shared = inputs.len() == n;
    let s = if n == 1 { "" } else { "s" };
    if !shared && (replicas == 1 || inputs.len() != n * replicas) {
        match replicas {
            1 => bail!("{}", validate::arity_message(file, f, inputs.len())),
            r => bail!(
                "{}: @{} takes {n} argument{s} per replica: give {n} file{s} (every \
                 replica takes them) or {} ({r} replicas × {n}, replica 0's first), not {}",
                file.display(),
                f.name,
                n * r,
                inputs.len()
            ),
        }
    }
    let mut per_replica = Vec::with_capacity(replicas);
    for r in 0..replicas {
        let files = if shared {
            inputs
        } else {
            &inputs[r * n..(r + 1) * n]
        };
        let mut values = Vec::with_capacity(n);
        for (i, (path, p)) in files.iter().zip(&f.params).enumerate() {
            values.push(engines::npy::read_argument::<den::Ieee>(path, i, &p.ty)?);
        }
        per_replica.push(values);
    }
    let margin_inputs = a.margins.map(|_| per_replica[0].clone());
    let result = run_engine::execute(&module, &f.name, per_replica, engine, a.generic, a.repeat)
        .map_err(|e| anyhow::anyhow!("{}: {e:#}", file.display()))?;
    for (r, outputs) in result.outputs.iter().enumerate() {
        let dir = match replicas {
            1 => out.clone(),
            _ => out.join(format!("replica_{r}")),
        };
        std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
        for (i, v) in outputs.iter().enumerate() {
            engines::npy::write_value(&dir.join(format!("out_{i}.npy")), v)?;
        }
    }
    let mut times = result.run_seconds.clone();
    times.sort_by(f64::total_cmp);
    let outputs = result.outputs[0].len();
    println!(
        "@{}: {} output{}{} written to {} (evaluated in {:.1} ms{}; {}, prepared in {:.2} s)",
        f.name,
        outputs,
        if outputs == 1 { "" } else { "s" },
        match replicas {
            1 => String::new(),
            r => format!(" × {r} replicas"),
        },
        out.display(),
        result.run_seconds[0] * 1e3,
        if times.len() > 1 {
            format!(
                ", median of {} runs {:.1} ms, min {:.1} ms",
                times.len(),
                times[times.len() / 2] * 1e3,
                times[0] * 1e3
            )
        } else {
            String::new()
        },
        result.how,
        result.prepare_seconds
    );
    if let (Some(n), Some(values)) = (a.margins, margin_inputs) {
        print_margins(&module, &f.name, &values, n)?;
    }
    Ok(())
}

/// The `n` smallest non-zero decision margins of `func` evaluated in
/// float64 at `values`: where an f32 engine's rounding (about 1e-7 of the values
/// involved per op) can take the other branch, so two engines' outputs may
/// differ by a whole subgradient rather than by rounding.
fn print_margins(
    module: &ir::Module,
    func: &str,
    values: &[den::value::Value<den::Ieee>],
    n: usize,
) -> Result<()> {
    let inputs: Vec<den::value::Value<f64>> =
        values.iter().map(|v| v.map_scalar(|x| x.get())).collect();
    let opts = den::eval::EvalOptions {
        record_margins: true,
        ..Default::default()
    };
    let t0 = std::time::Instant::now();
    let ev = den::eval::eval_func::<f64>(module, func, inputs, &opts)
        .map_err(|e| anyhow::anyhow!("float64 evaluation: {e}"))?;
    // Sorted by the nearest tie that is not exact: an exact tie (equal
    // values, e.g. zeros a pool's backward scattered) is broken by the op's
    // rule in every precision; a gap of a few roundings is not.
    let mut margins = ev.margins;
    margins.sort_by(|x, y| x.near.total_cmp(&y.near));
    println!(
        "smallest decision margins in float64 ({} deciding ops, {:.1} s):",
        margins.len(),
        t0.elapsed().as_secs_f64()
    );
    println!(
        "  {:>6}  {:<28} {:>12} {:>10} {:>12}",
        "line", "op", "near tie", "decisions", "exact ties"
    );
    for m in margins.iter().take(n) {
        println!(
            "  {:>6}  {:<28} {:>12.3e} {:>10} {:>12}",
            m.line.map_or("-".to_string(), |l| l.to_string()),
            m.op,
            m.near,
            m.decisions,
            m.ties
        );
    }
    Ok(())
}
