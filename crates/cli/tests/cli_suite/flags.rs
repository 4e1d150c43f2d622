//! Every flag a command parses is honoured or refused by name: the flag
//! combinations that used to be accepted and ignored without a word
//! (`certify NET --op`, `certify --op --batch`, `bound FILE.mlir --step`,
//! `bound --method box --tape-nodes`, `render --eval --drop-path`, `run
//! --pjrt-plugin` without `--engine pjrt`, `train --no-certify
//! --certify-batch`) now end with status 2 and a message naming the flag,
//! and the ones whose meaning is clear change the output as they say
//! (`certify --op --probes/--points`, `bench step --engine-plan`).

use std::path::PathBuf;
use std::process::{Command, Output};

fn certgrad(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_certgrad"))
        .env_remove("CERTGRAD_MAX_BYTES")
        .args(args)
        .output()
        .expect("run certgrad")
}

fn text(o: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

/// Status 2, every needle in stderr, no panic, and nothing on stdout (the
/// refusal comes before any work).
fn refused(args: &[&str], needles: &[&str]) {
    let o = certgrad(args);
    let e = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{args:?}: {}", text(&o));
    assert!(!e.contains("panicked"), "{args:?}: {e}");
    for n in needles {
        assert!(e.contains(n), "{args:?}: missing {n:?} in: {e}");
    }
    assert!(
        o.stdout.is_empty(),
        "{args:?}: refused after starting: {}",
        String::from_utf8_lossy(&o.stdout)
    );
}

fn temp(tag: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("certgrad-cli-flags-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

#[test]
fn certify_net_refuses_the_op_catalog_flags_by_name() {
    for (flag, value) in [
        ("--op", Some("relu")),
        ("--all-ops", None),
        ("--controls", None),
        ("--shape", Some("1,3,8,8")),
    ] {
        let mut args = vec!["certify", "cifar8", flag];
        args.extend(value);
        refused(&args, &[flag, "cannot be used with", "[NET]"]);
    }
}

#[test]
fn certify_op_refuses_batch_and_a_second_selection() {
    refused(
        &["certify", "--op", "relu6", "--batch", "4"],
        &["--batch", "cannot be used with", "--op"],
    );
    refused(
        &["certify", "--all-ops", "--batch", "4"],
        &["--batch", "cannot be used with", "--all-ops"],
    );
    refused(
        &["certify", "--op", "relu6", "--all-ops"],
        &["--all-ops", "cannot be used with", "--op"],
    );
}

/// `certify --op relu6 ARGS --json`: each tie's (probes per block, points).
fn relu6_ties(args: &[&str], tag: &str) -> (String, Vec<(u64, u64)>) {
    let d = temp(tag);
    let json = d.join("c.json");
    let mut all = vec!["certify", "--op", "relu6", "--json", json.to_str().unwrap()];
    all.extend(args);
    let o = certgrad(&all);
    assert!(o.status.success(), "{all:?}: {}", text(&o));
    let j: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    let ties = j["ties"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| {
            (
                t["probes_per_block"].as_u64().unwrap(),
                t["points"].as_u64().unwrap(),
            )
        })
        .collect();
    (String::from_utf8_lossy(&o.stdout).into_owned(), ties)
}

#[test]
fn certify_op_honours_probes_and_points() {
    let (out, ties) = relu6_ties(&[], "opdefault");
    assert!(out.contains("at least 3 points per tie"), "{out}");
    assert!(
        out.contains(", 2 probes per block and point, seed 0"),
        "{out}"
    );
    assert!(!ties.is_empty());
    assert!(ties.iter().all(|&(p, n)| p == 2 && n >= 3), "{ties:?}");
    // Points are a floor: a tie samples on while a branch is unexercised.
    let (out, ties) = relu6_ties(&["--probes", "5", "--points", "6"], "opflags");
    assert!(out.contains("at least 6 points per tie"), "{out}");
    assert!(
        out.contains(", 5 probes per block and point, seed 0"),
        "{out}"
    );
    assert!(ties.iter().all(|&(p, n)| p == 5 && n >= 6), "{ties:?}");
    assert!(out.contains("CERTIFIED: all"), "{out}");
    refused(
        &["certify", "--op", "relu6", "--points", "0"],
        &["--points 0"],
    );
}

#[test]
fn render_forwards_refuse_drop_path_and_the_step_takes_it() {
    let d = temp("evaldp");
    let net = "vit-tiny-w12-k10-32x32-p8";
    let eval = d.join("eval.mlir");
    refused(
        &[
            "render",
            net,
            "--batch",
            "2",
            "--eval",
            "--drop-path",
            "0.1",
            "-o",
            eval.to_str().unwrap(),
        ],
        &[
            "--drop-path 0.1",
            "applies to the train step, not to --eval",
        ],
    );
    assert!(!eval.exists(), "a refused render wrote its file");
    refused(
        &[
            "render",
            net,
            "--forward",
            "--drop-path",
            "0.1",
            "-o",
            eval.to_str().unwrap(),
        ],
        &[
            "--drop-path 0.1",
            "applies to the train step, not to --forward",
        ],
    );
    refused(
        &[
            "render",
            net,
            "--forward",
            "--eval",
            "-o",
            eval.to_str().unwrap(),
        ],
        &["'--forward' cannot be used with '--eval'"],
    );
    assert!(!eval.exists(), "a refused render wrote its file");
    let fwd = d.join("fwd.mlir");
    let o = certgrad(&[
        "render",
        "cifar8-bbn",
        "--forward",
        "-o",
        fwd.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", text(&o));
    assert!(
        text(&o).contains("@cifar8_bbn_fwd: 39 inputs -> 1 outputs"),
        "{}",
        text(&o)
    );
    let step = d.join("step.mlir");
    let o = certgrad(&[
        "render",
        net,
        "--batch",
        "2",
        "--drop-path",
        "0.1",
        "-o",
        step.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", text(&o));
    assert!(
        text(&o).contains("drop-path keep inputs: 24"),
        "{}",
        text(&o)
    );
}

use super::commands::SUM;

#[test]
fn bound_of_a_mlir_file_refuses_the_net_render_flags() {
    let d = temp("boundflags");
    let f = d.join("sum.mlir");
    std::fs::write(&f, SUM).unwrap();
    let file = f.to_str().unwrap();
    for (flag, value) in [
        ("--step", Some("sgd")),
        ("--bf16", None),
        ("--batch", Some("4")),
    ] {
        let mut args = vec!["bound", file, flag];
        args.extend(value);
        refused(
            &args,
            &[flag, "chooses how a net's step is rendered", "sum.mlir"],
        );
    }
    // The same file without them is bounded.
    let o = certgrad(&["bound", file]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
}

#[test]
fn bench_step_engine_plan_is_the_default_executor_and_not_with_generic() {
    let run = |flags: &[&str]| {
        let mut args = vec![
            "bench", "step", "cifar8", "--batch", "1", "--iters", "1", "--warmup", "0", "--json",
        ];
        args.extend(flags);
        let o = certgrad(&args);
        assert!(o.status.success(), "{args:?}: {}", text(&o));
        let j: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
        j["executor"].as_str().unwrap().to_string()
    };
    assert_eq!(run(&["--engine-plan"]), "plan");
    assert_eq!(run(&[]), "plan");
    refused(
        &["bench", "step", "cifar8", "--engine-plan", "--generic"],
        &["--engine-plan", "cannot be used with", "--generic"],
    );
}

#[test]
fn bound_box_method_refuses_a_tape_budget() {
    let d = temp("boundbox");
    let f = d.join("sum.mlir");
    std::fs::write(&f, SUM).unwrap();
    let file = f.to_str().unwrap();
    refused(
        &["bound", file, "--method", "box", "--tape-nodes", "1000"],
        &["--tape-nodes", "--method box"],
    );
    let o = certgrad(&["bound", file, "--method", "box"]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    assert!(text(&o).contains("method box"), "{}", text(&o));
}

#[test]
fn engine_flags_for_an_engine_not_in_use_are_refused() {
    let d = temp("engineflags");
    let f = d.join("sum.mlir");
    std::fs::write(&f, SUM).unwrap();
    let (file, out) = (f.to_str().unwrap(), d.join("o"));
    let out = out.to_str().unwrap();
    refused(
        &[
            "run",
            file,
            "--pjrt-plugin",
            "/nonexistent/libpjrt.so",
            "--out",
            out,
        ],
        &["--pjrt-plugin", "--engine native", "add --engine pjrt"],
    );
    refused(
        &[
            "run",
            file,
            "--engine",
            "pjrt",
            "--iree-dir",
            "/nonexistent",
            "--out",
            out,
        ],
        &["--iree-dir", "--engine pjrt", "add --engine iree"],
    );
    refused(
        &[
            "eval",
            "/nonexistent/run",
            "--pjrt-plugin",
            "/nonexistent/libpjrt.so",
        ],
        &["--pjrt-plugin", "--engine native"],
    );
    // With the engine that uses it, the flag is taken: the missing plugin
    // is what fails now.
    let c = d.join("const.mlir");
    std::fs::write(
        &c,
        "func.func public @main() -> tensor<2xf32> {\n  %0 = stablehlo.constant dense<1.0> : tensor<2xf32>\n  return %0 : tensor<2xf32>\n}\n",
    )
    .unwrap();
    let o = certgrad(&[
        "run",
        c.to_str().unwrap(),
        "--engine",
        "pjrt",
        "--pjrt-plugin",
        "/nonexistent/libpjrt.so",
        "--out",
        out,
    ]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    assert!(text(&o).contains("/nonexistent/libpjrt.so"), "{}", text(&o));
    assert!(!text(&o).contains("add --engine pjrt"), "{}", text(&o));
}

#[test]
fn train_refuses_a_certify_batch_it_would_not_certify() {
    refused(
        &[
            "train",
            "--no-certify",
            "--certify-batch",
            "2",
            "--steps",
            "1",
        ],
        &["--certify-batch", "cannot be used with", "--no-certify"],
    );
}

/// Measure mode writes no run directory: the flags that name one are
/// refused by name, and --quiet leaves only the summary line.
#[test]
fn train_steps_refuses_the_run_directory_flags_and_quiet_prints_the_summary() {
    let out = temp("steps_out");
    let out = out.to_str().expect("a UTF-8 path");
    refused(
        &["train", "--no-certify", "--steps", "1", "--out", out],
        &["--out", "cannot be used with", "--steps"],
    );
    refused(
        &[
            "train",
            "--no-certify",
            "--steps",
            "1",
            "--checkpoint-every",
            "5",
        ],
        &["--checkpoint-every", "cannot be used with", "--steps"],
    );
    let run = |quiet: bool| {
        let mut args = vec!["train", "--no-certify", "--steps", "2", "--batch", "8"];
        if quiet {
            args.push("--quiet");
        }
        let o = certgrad(&args);
        assert_eq!(o.status.code(), Some(0), "{}", text(&o));
        String::from_utf8_lossy(&o.stdout).to_string()
    };
    let loud = run(false);
    assert_eq!(
        loud.lines().filter(|l| l.starts_with("step ")).count(),
        2,
        "{loud}"
    );
    let quiet = run(true);
    assert!(!quiet.lines().any(|l| l.starts_with("step ")), "{quiet}");
    assert!(quiet.contains("median step"), "{quiet}");
}
