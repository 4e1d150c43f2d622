//! `certgrad bench` end to end through the built binary: the JSON report of a
//! tiny cifar8 step (fields present and sane, the FLOP count equal to one
//! worked out by hand from the architecture), the per-op profile, and the
//! errors on bad input.

use std::process::{Command, Output};

fn certgrad(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_certgrad"))
        .args(args)
        .output()
        .expect("run certgrad")
}

fn json_of(out: &Output) -> serde_json::Value {
    assert!(
        out.status.success(),
        "certgrad failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "stdout is not one JSON object ({e}):\n{}",
            String::from_utf8_lossy(&out.stdout)
        )
    })
}

/// FLOPs of cifar8's SGD step at batch `n`, from docs/nets.md §2 by hand:
/// (convolutions, dense layers).
///
/// A 3×3 stride-1 conv with padding 1 on an H×H map makes 3H − 2 real
/// (output, tap) pairs per spatial dimension (each border position loses one
/// tap to the padding), so 2·n·Cout·Cin·(3H−2)² FLOPs. Its weight gradient and
/// its input gradient form the same products, so they count the same; the
/// first conv's input gradient (a gradient w.r.t. the images) is not computed.
/// A dense layer is 2·n·in·out, three times (forward, input and weight
/// gradient). Nothing else is counted.
fn cifar8_step_flops(n: u64) -> (u64, u64) {
    let convs: [(u64, u64, u64); 8] = [
        (3, 16, 32),
        (16, 16, 32),
        (16, 16, 16),
        (16, 16, 16),
        (16, 32, 8),
        (32, 32, 8),
        (32, 32, 4),
        (32, 32, 4),
    ];
    let conv = |&(cin, cout, h): &(u64, u64, u64)| 2 * n * cout * cin * (3 * h - 2) * (3 * h - 2);
    let all: u64 = convs.iter().map(conv).sum();
    let first = conv(&convs[0]);
    let dense: u64 = [(128, 64), (64, 64), (64, 10)]
        .iter()
        .map(|&(i, o)| 2 * n * i * o)
        .sum();
    (3 * all - first, 3 * dense)
}

fn cifar8_total(n: u64) -> u64 {
    let (conv, dense) = cifar8_step_flops(n);
    conv + dense
}

#[test]
fn bench_step_json_reports_sane_timings_and_the_hand_counted_flops() {
    let out = certgrad(&[
        "bench", "step", "cifar8", "--batch", "2", "--iters", "2", "--warmup", "1", "--json",
    ]);
    let j = json_of(&out);
    assert_eq!(j["net"], "cifar8");
    assert_eq!(j["batch"], 2);
    assert_eq!(j["optimizer"], "sgd");
    assert_eq!(j["executor"], "plan");
    assert_eq!(j["warmup"], 1);
    assert_eq!(j["iters"], 2);
    let ms = &j["ms"];
    let (med, min, max) = (
        ms["median"].as_f64().unwrap(),
        ms["min"].as_f64().unwrap(),
        ms["max"].as_f64().unwrap(),
    );
    assert!(min > 0.0 && min <= med && med <= max, "{ms}");
    assert_eq!(ms["all"].as_array().unwrap().len(), 2);
    let flops = j["flops_per_step"].as_u64().unwrap();
    assert_eq!(flops, cifar8_total(2));
    let gflops = j["gflops_per_s"].as_f64().unwrap();
    let expect = flops as f64 / (med * 1e-3) / 1e9;
    assert!(
        (gflops - expect).abs() <= 1e-9 * expect,
        "{gflops} vs {expect}"
    );
    // Linux: VmHWM is there, and a process that held the step holds > 1 MiB.
    let rss = j["peak_rss_kib"].as_u64().expect("peak_rss_kib on Linux");
    assert!(rss > 1024, "peak RSS {rss} KiB");
    let loss = j["loss"]["last"].as_f64().unwrap();
    assert!(loss.is_finite() && loss > 0.0, "loss {loss}");
    assert!(j["profile"].is_null(), "no profile unless asked");
}

/// `bench step cifar8` at batch 2, one timed iteration and no warm-up, with
/// `flag`; its JSON report.
fn one_cifar8_step_json(flag: &str) -> serde_json::Value {
    json_of(&certgrad(&[
        "bench", "step", "cifar8", "--batch", "2", "--iters", "1", "--warmup", "0", "--json", flag,
    ]))
}

#[test]
fn bench_step_generic_runs_the_evaluator_with_the_same_flop_count() {
    let j = one_cifar8_step_json("--generic");
    assert_eq!(j["executor"], "eval_func");
    assert_eq!(j["flops_per_step"].as_u64().unwrap(), cifar8_total(2));
}

#[test]
fn bench_step_profile_lists_the_convolutions() {
    let j = one_cifar8_step_json("--profile");
    let rows = j["profile"].as_array().expect("profile rows");
    assert!(!rows.is_empty());
    let conv = rows
        .iter()
        .find(|r| r["op"].as_str().unwrap().contains("convolution"))
        .unwrap_or_else(|| panic!("no convolution row in {rows:?}"));
    assert!(conv["ms_per_step"].as_f64().unwrap() > 0.0);
    // The plan counts its own FLOPs; whatever it does with padding taps, it
    // cannot count fewer than the real products worked out by hand.
    let conv_flops: f64 = rows
        .iter()
        .filter(|r| r["op"].as_str().unwrap().contains("convolution"))
        .map(|r| r["flops_per_step"].as_f64().unwrap())
        .sum();
    assert!(conv_flops >= cifar8_step_flops(2).0 as f64, "{conv_flops}");
}

#[test]
fn bench_step_rejects_bad_input_with_a_message() {
    let out = certgrad(&["bench", "step", "cifar8", "--optimizer", "lbfgs"]);
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("unknown optimizer `lbfgs`"), "{err}");
    assert!(err.contains("sgd"), "{err}");

    let out = certgrad(&["bench", "step", "no-such-net", "--batch", "2"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("no-such-net"));

    let out = certgrad(&["bench", "step", "cifar8", "--batch", "0"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("--batch must be at least 1"));

    let out = certgrad(&["bench", "step", "cifar8", "--profile", "--generic"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("--profile"));
}

#[test]
fn bench_gemm_reports_a_positive_rate() {
    let out = certgrad(&["bench", "gemm", "--n", "64", "--reps", "2", "--json"]);
    let j = json_of(&out);
    assert_eq!(j["n"], 64);
    let best = j["gflops_per_s"]["best"].as_f64().unwrap();
    let med = j["gflops_per_s"]["median"].as_f64().unwrap();
    assert!(best > 0.0 && med > 0.0 && med <= best, "{j}");
}
