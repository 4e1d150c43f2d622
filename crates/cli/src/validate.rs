//! Flag checks that run before any command does work: numbers that would
//! make a command fail obscurely later are refused here, naming the flag and
//! what it takes — `--steps 0` (which indexed an empty list),
//! `--certify-batch 0` (which certified a NaN loss), `--probes 0` (silently
//! taken as one probe). Also the process set-up every command shares: the
//! memory limit (`--max-memory` / `CERTGRAD_MAX_BYTES`) and the default
//! SIGPIPE action, so a closed stdout (`certgrad nets | head -1`) ends the
//! process quietly instead of panicking.

use crate::train::TrainArgs;
use anyhow::{bail, Result};

/// Restores the default SIGPIPE action (Rust ignores it, turning a closed
/// pipe into a panic inside `println!`): writing to a closed stdout then ends
/// the process silently, as it does for `cat` or `ls`.
pub fn quiet_broken_pipe() {
    #[cfg(unix)]
    {
        extern "C" {
            // POSIX signal(2), from the libc std links; SIGPIPE is 13 and
            // SIG_DFL 0 on Linux and macOS alike.
            fn signal(signum: i32, handler: usize) -> usize;
        }
        // SAFETY: restoring a default action installs no code of ours.
        unsafe {
            signal(13, 0);
        }
    }
}

/// Sets the memory limits (per tensor and total) from `--max-memory`, else from
/// `CERTGRAD_MAX_BYTES`; an unreadable value is an error here, not a warning.
pub fn memory_limit(flag: Option<&str>) -> Result<()> {
    let bytes = match flag {
        Some(s) => {
            ir::limits::parse_byte_size(s).map_err(|e| anyhow::anyhow!("--max-memory {s}: {e}"))?
        }
        None => match ir::limits::limit_from_env().map_err(anyhow::Error::msg)? {
            Some(b) => b,
            None => return Ok(()),
        },
    };
    ir::limits::set_max_bytes(bytes);
    Ok(())
}

fn at_least_one(flag: &str, v: Option<usize>, what: &str) -> Result<()> {
    if v == Some(0) {
        bail!("{flag} 0: {what}");
    }
    Ok(())
}

/// `certgrad train`: every numeric flag in range before data is loaded.
pub fn train(a: &TrainArgs) -> Result<()> {
    if a.steps == Some(0) {
        bail!("--steps 0: expected at least 1 update to measure (leave --steps out to train)");
    }
    if a.certify_batch == Some(0) && !a.no_certify {
        bail!(
            "--certify-batch 0: the pre-training certification needs a batch of at least 1 \
             (or pass --no-certify)"
        );
    }
    if !(a.warmup_epochs.is_finite() && a.warmup_epochs >= 0.0) {
        bail!(
            "--warmup-epochs {}: expected a finite number of epochs, at least 0",
            a.warmup_epochs
        );
    }
    if let Some(lr) = a.lr {
        if !(lr.is_finite() && lr > 0.0) {
            bail!("--lr {lr}: expected a positive finite number");
        }
    }
    if a.epochs == 0 {
        bail!("--epochs 0: expected at least 1 epoch");
    }
    at_least_one("--batch", Some(a.batch), "expected a batch of at least 1")?;
    at_least_one(
        "--replicas",
        Some(a.replicas),
        "expected at least 1 replica",
    )?;
    at_least_one(
        "--limit-train",
        a.limit_train,
        "expected at least 1 example",
    )?;
    at_least_one("--limit-test", a.limit_test, "expected at least 1 example")?;
    Ok(())
}

/// `certgrad certify`: probes, points and an `--shape` override.
pub fn certify(probes: Option<usize>, points: Option<usize>, shape: Option<&[i64]>) -> Result<()> {
    at_least_one("--probes", probes, "a certificate needs at least 1 probe")?;
    at_least_one("--points", points, "a certificate needs at least 1 point")?;
    if let Some(s) = shape {
        if let Some(d) = s.iter().find(|&&d| d <= 0) {
            bail!("--shape {s:?}: dimension {d}; every dimension must be at least 1");
        }
    }
    Ok(())
}

/// `certgrad check-vjp`: a tie with no probe would certify nothing.
pub fn check_vjp(probes: usize) -> Result<()> {
    at_least_one(
        "--probes",
        Some(probes),
        "a certificate needs at least 1 probe",
    )
}

/// `certgrad run`: at least one evaluation.
pub fn run(repeat: usize) -> Result<()> {
    at_least_one("--repeat", Some(repeat), "expected at least 1 run")
}

/// `run --without-rewrite NAME…`: the engine options with those rewrites of
/// the native plan off; an unknown name, or the flag with `--generic` or
/// another engine (which have no such rewrites), is refused.
pub fn rewrites(
    mut engine: engines::select::EngineOptions,
    names: &[String],
    generic: bool,
) -> Result<engines::select::EngineOptions> {
    if names.is_empty() {
        return Ok(engine);
    }
    if generic {
        bail!("--without-rewrite switches off rewrites of the native plan; --generic runs no plan");
    }
    if engine.kind != engines::select::EngineKind::Native {
        bail!(
            "--without-rewrite switches off rewrites of the native plan; --engine {} has none",
            engine.kind
        );
    }
    for name in names {
        engine.rewrites = engine.rewrites.without(name).ok_or_else(|| {
            anyhow::anyhow!(
                "--without-rewrite: unknown rewrite `{name}` (one of {})",
                exec::Rewrites::NAMES.join(", ")
            )
        })?;
    }
    Ok(engine)
}

/// The error for `certgrad run` given the wrong number of `--inputs`: how
/// many were expected and given, the first argument without a file (or the
/// first file too many), and where to read the whole signature — instead of
/// the signature on one line, 5,000 characters for a train step.
pub fn arity_message(file: &std::path::Path, f: &ir::Func, given: usize) -> String {
    let want = f.params.len();
    let first = if given < want {
        format!(
            "the first without a file is argument {given}: {}",
            f.params[given].ty
        )
    } else {
        format!("the first extra file is --inputs #{want}")
    };
    format!(
        "@{} takes {want} argument{}, {given} --inputs given; {first} \
         (`certgrad check {}` prints the signature)",
        f.name,
        if want == 1 { "" } else { "s" },
        file.display()
    )
}
