//! Pair checks (`cert::pair`, `certgrad check-vjp`): a backward given as
//! StableHLO text certified or refuted against a forward given as StableHLO
//! text. Pairs: JAX exports committed under tests/cert_suite/data (jax.vjp backward, and a
//! hand-written one with a bug), certgrad's own layer ties printed as two
//! separate modules, and hand-written text for the tie rules. Every certified
//! pair sits next to a refuted or undecided twin.

use cert::pair::{check_pair, merge_pair, MergedPair, PairReport};
use cert::{Evidence, TieOptions, Verdict};
use den::{Tensor, Value};
use ir::{ElemType, Module, TensorType};
use layers::ops::conv::{Conv2d, Padding};
use layers::tie_funcs;

fn parse(text: &str, name: &str) -> Module {
    let m = ir::parse::parse_module(text, name).unwrap_or_else(|e| panic!("{name}: {e}"));
    ir::verify_module(&m).unwrap_or_else(|e| panic!("{name}: {e}"));
    m
}

fn data(name: &str) -> Module {
    let path = format!(
        "{}/tests/cert_suite/data/{name}",
        env!("CARGO_MANIFEST_DIR")
    );
    parse(&std::fs::read_to_string(&path).expect(&path), name)
}

fn check(fwd: &Module, bwd: &Module) -> PairReport {
    let pair = merge_pair(fwd, bwd, None, None).expect("merge");
    check_pair(&pair, None, &TieOptions::default()).expect("well-formed pair")
}

fn refutation(r: &PairReport) -> (String, String) {
    match &r.tie.verdict {
        Verdict::Refuted { block, detail } => (block.clone(), detail.clone()),
        v => panic!("expected a refutation, got {v:?}"),
    }
}

#[test]
fn jax_dense_vjp_is_certified_exactly_and_w_for_wt_is_refuted_at_an_index() {
    let fwd = data("dense.fwd.mlir");
    let ok = check(&fwd, &data("dense.jax.mlir"));
    assert!(ok.certified(), "{:?}", ok.tie.verdict);
    assert_eq!(ok.tie.evidence, Evidence::Exact);
    assert_eq!(ok.tie.block_results.len(), 3);
    assert!(ok.tie.block_results.iter().all(|b| b.probes > 0));

    let bad = check(&fwd, &data("dense.bug.mlir"));
    let (block, detail) = refutation(&bad);
    assert_eq!(block, "da0", "only dx uses W");
    assert!(
        detail.contains("largest discrepancy") && detail.contains("da0["),
        "{detail}"
    );
}

#[test]
fn colliding_helper_names_are_renamed_and_the_merged_pair_is_checked() {
    // Both JAX exports call their entry @main and carry a private @_where.
    let fwd = data("leaky.fwd.mlir");
    let bwd = data("leaky.jax.mlir");
    let pair = merge_pair(&fwd, &bwd, None, None).unwrap();
    assert!(pair.renamed.iter().any(|(old, _)| old == "main"));
    assert!(pair.renamed.iter().any(|(old, _)| old == "_where"));
    assert_ne!(pair.forward, pair.backward);
    let r = check_pair(&pair, None, &TieOptions::default()).unwrap();
    assert!(r.certified(), "{:?}", r.tie.verdict);
    assert!(
        r.tie.min_margin.is_some(),
        "the forward's compare is a decision"
    );

    let bad = check(&fwd, &data("leaky.bug.mlir"));
    assert_eq!(refutation(&bad).0, "da0");
}

/// A certgrad layer tie printed as two modules (the forward and the backward
/// each alone, as a user would hand them over) and parsed back.
fn printed_conv(padding: Padding) -> (Module, Module) {
    let conv = Conv2d {
        k: 3,
        stride: 2,
        padding,
        in_ch: 2,
        out_ch: 2,
        bias: true,
    };
    let funcs = tie_funcs(&conv, &TensorType::f32(vec![2, 2, 6, 4])).unwrap();
    let alone = |f: &ir::Func| Module {
        name: None,
        attrs: None,
        funcs: vec![f.clone()],
    };
    let fwd = ir::print::print_module(&alone(&funcs.forward));
    let bwd = ir::print::print_module(&alone(&funcs.backward));
    (parse(&fwd, "fwd"), parse(&bwd, "bwd"))
}

#[test]
fn printed_layer_tie_is_certified_and_the_other_padding_convention_is_refuted() {
    let (fwd_same, bwd_same) = printed_conv(Padding::XlaSame);
    let r = check(&fwd_same, &bwd_same);
    assert!(r.certified(), "{:?}", r.tie.verdict);
    assert_eq!(r.tie.evidence, Evidence::Exact);
    assert_eq!(r.inputs.len(), 3, "x, W, b");

    // Same shapes, torchvision padding [1,1] instead of XLA SAME [0,1]: the
    // input cotangent is shifted by one row.
    let (_, bwd_sym) = printed_conv(Padding::Symmetric);
    let bad = check(&fwd_same, &bwd_sym);
    let (block, _) = refutation(&bad);
    assert!(block == "da0" || block == "da1", "{block}");
}

const MAX_FWD: &str = r#"
func.func public @main(%arg0: tensor<4xf32>, %arg1: tensor<4xf32>) -> tensor<4xf32> {
  %0 = stablehlo.maximum %arg0, %arg1 : tensor<4xf32>
  return %0 : tensor<4xf32>
}
"#;

/// max(a, b)'s VJP, ties to the first operand.
const MAX_BWD: &str = r#"
func.func public @main(%arg0: tensor<4xf32>, %arg1: tensor<4xf32>, %arg2: tensor<4xf32>) -> (tensor<4xf32>, tensor<4xf32>) {
  %0 = stablehlo.compare GE, %arg0, %arg1, FLOAT : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xi1>
  %cst = stablehlo.constant dense<0.000000e+00> : tensor<4xf32>
  %1 = stablehlo.select %0, %arg2, %cst : tensor<4xi1>, tensor<4xf32>
  %2 = stablehlo.select %0, %cst, %arg2 : tensor<4xi1>, tensor<4xf32>
  return %1, %2 : tensor<4xf32>, tensor<4xf32>
}
"#;

/// max(relu(a), relu(b)): flat where both are negative.
const RELU_MAX_FWD: &str = r#"
func.func public @main(%arg0: tensor<4xf32>, %arg1: tensor<4xf32>) -> tensor<4xf32> {
  %cst = stablehlo.constant dense<0.000000e+00> : tensor<4xf32>
  %0 = stablehlo.maximum %arg0, %cst : tensor<4xf32>
  %1 = stablehlo.maximum %arg1, %cst : tensor<4xf32>
  %2 = stablehlo.maximum %0, %1 : tensor<4xf32>
  return %2 : tensor<4xf32>
}
"#;

const RELU_MAX_BWD: &str = r#"
func.func public @main(%arg0: tensor<4xf32>, %arg1: tensor<4xf32>, %arg2: tensor<4xf32>) -> (tensor<4xf32>, tensor<4xf32>) {
  %cst = stablehlo.constant dense<0.000000e+00> : tensor<4xf32>
  %0 = stablehlo.maximum %arg0, %cst : tensor<4xf32>
  %1 = stablehlo.maximum %arg1, %cst : tensor<4xf32>
  %2 = stablehlo.compare GE, %0, %1, FLOAT : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xi1>
  %3 = stablehlo.select %2, %arg2, %cst : tensor<4xi1>, tensor<4xf32>
  %4 = stablehlo.select %2, %cst, %arg2 : tensor<4xi1>, tensor<4xf32>
  %5 = stablehlo.compare GT, %arg0, %cst, FLOAT : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xi1>
  %6 = stablehlo.compare GT, %arg1, %cst, FLOAT : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xi1>
  %7 = stablehlo.select %5, %3, %cst : tensor<4xi1>, tensor<4xf32>
  %8 = stablehlo.select %6, %4, %cst : tensor<4xi1>, tensor<4xf32>
  return %7, %8 : tensor<4xf32>, tensor<4xf32>
}
"#;

fn at(a: [f32; 4], b: [f32; 4]) -> Vec<Value<f32>> {
    vec![
        Value::Float(Tensor::new(vec![4], a.to_vec()), ElemType::F32),
        Value::Float(Tensor::new(vec![4], b.to_vec()), ElemType::F32),
    ]
}

fn pair(fwd: &str, bwd: &str) -> MergedPair {
    merge_pair(&parse(fwd, "fwd"), &parse(bwd, "bwd"), None, None).unwrap()
}

#[test]
fn a_given_point_on_a_true_kink_is_undecided_and_off_it_certified() {
    let p = pair(MAX_FWD, MAX_BWD);
    let opts = TieOptions::default();
    let off = check_pair(
        &p,
        Some(&at([1.0, -2.0, 3.5, 0.25], [0.5, 2.0, -1.0, 1.0])),
        &opts,
    )
    .unwrap();
    assert!(off.certified(), "{:?}", off.tie.verdict);
    assert!(off.given_point);
    assert_eq!(off.tie.min_margin.as_ref().unwrap().margin, 0.5);
    // a == b: max is not differentiable there (the gradients of the tied
    // operands differ), so no tie may be accepted.
    let on = check_pair(
        &p,
        Some(&at([1.0, 2.0, 3.0, 4.0], [1.0, 2.0, 3.0, 4.0])),
        &opts,
    )
    .unwrap();
    assert!(
        matches!(on.tie.verdict, Verdict::Undecided { .. }),
        "{:?}",
        on.tie.verdict
    );
    assert!(on.tie.flat_ties.is_empty());
}

#[test]
fn ties_of_locally_equal_operands_are_accepted_as_flat() {
    // Both ReLUs inactive: max(0, 0) ties, but f is constant nearby.
    let p = pair(RELU_MAX_FWD, RELU_MAX_BWD);
    let r = check_pair(
        &p,
        Some(&at([-1.0, -2.0, 3.0, -0.5], [-2.0, -1.0, -1.0, 2.0])),
        &TieOptions::default(),
    )
    .unwrap();
    assert!(r.certified(), "{:?}", r.tie.verdict);
    assert!(!r.tie.flat_ties.is_empty(), "the tie was seen and accepted");
    // The same backward against max(a, b) at a point where a == b: refused.
    let q = pair(MAX_FWD, RELU_MAX_BWD);
    let on = check_pair(&q, Some(&at([1.0; 4], [1.0; 4])), &TieOptions::default()).unwrap();
    assert!(!on.certified());
}

#[test]
fn malformed_pairs_are_usage_errors() {
    let fwd = data("dense.fwd.mlir");
    // The forward handed over as the backward: wrong arguments.
    let p = merge_pair(&fwd, &fwd, None, None).unwrap();
    let e = check_pair(&p, None, &TieOptions::default()).unwrap_err();
    assert!(e.0.contains("must take the forward's arguments"), "{e}");
    let e = merge_pair(&fwd, &fwd, Some("nope"), None).unwrap_err();
    assert!(e.0.contains("no function @nope"), "{e}");
}

/// The issue-21 block (depthwise conv, ReLU6, SiLU, squeeze-excite; JAX's
/// export and its jax.vjp): at scale-8 points the SE gate's `1/(1+exp(−z))`
/// overflows in the dual-number J·v. Such a point is no evidence and is
/// resampled — the pair certifies at the seeds that used to be refuted with
/// "discrepancy NaN" — while the backward with a planted gate-derivative bug
/// is still refuted at every one of those seeds.
#[test]
fn a_non_finite_probe_is_resampled_never_a_verdict() {
    let fwd = data("se_block.fwd.mlir");
    let pair = merge_pair(&fwd, &data("se_block.jax.mlir"), None, None).unwrap();
    let bug = merge_pair(&fwd, &data("se_block.bug.mlir"), None, None).unwrap();
    let mut resampled = 0;
    for seed in [4, 12, 22, 23] {
        let opts = TieOptions {
            seed,
            ..TieOptions::default()
        };
        let r = check_pair(&pair, None, &opts).unwrap();
        assert!(r.certified(), "seed {seed}: {:?}", r.tie.verdict);
        resampled += r.tie.non_finite_resampled.len();
        for why in &r.tie.non_finite_resampled {
            assert!(
                why.contains("non-finite at stablehlo.") && why.contains("line"),
                "names the op and line where it began: {why}"
            );
        }
        let b = check_pair(&bug, None, &opts).unwrap();
        let (_, detail) = refutation(&b);
        assert!(!detail.contains("NaN"), "seed {seed}: {detail}");
    }
    assert!(resampled > 0, "the seeds chosen do meet the overflow");
}

/// A forward, exp((1000·x)²), that overflows at every sampled point leaves the pair
/// UNDECIDED, naming the op where the non-finite value began — not REFUTED.
#[test]
fn a_pair_that_overflows_everywhere_is_undecided_with_the_op() {
    let fwd = parse(
        "func.func @main(%x: tensor<3xf32>) -> tensor<3xf32> {
  %k = stablehlo.constant dense<1.0e3> : tensor<3xf32>
  %y = stablehlo.multiply %x, %k : tensor<3xf32>
  %s = stablehlo.multiply %y, %y : tensor<3xf32>
  %e = stablehlo.exponential %s : tensor<3xf32>
  return %e : tensor<3xf32>
}",
        "overflow.fwd",
    );
    let bwd = parse(
        "func.func @main(%x: tensor<3xf32>, %dy: tensor<3xf32>) -> tensor<3xf32> {
  %k = stablehlo.constant dense<1.0e3> : tensor<3xf32>
  %two = stablehlo.constant dense<2.0> : tensor<3xf32>
  %y = stablehlo.multiply %x, %k : tensor<3xf32>
  %s = stablehlo.multiply %y, %y : tensor<3xf32>
  %e = stablehlo.exponential %s : tensor<3xf32>
  %y2 = stablehlo.multiply %y, %two : tensor<3xf32>
  %ds = stablehlo.multiply %y2, %k : tensor<3xf32>
  %d = stablehlo.multiply %e, %ds : tensor<3xf32>
  %dx = stablehlo.multiply %d, %dy : tensor<3xf32>
  return %dx : tensor<3xf32>
}",
        "overflow.bwd",
    );
    let r = check(&fwd, &bwd);
    match &r.tie.verdict {
        Verdict::Undecided { reason } => assert!(
            reason.contains("no sampled point gave finite values")
                && reason.contains("stablehlo.exponential"),
            "{reason}"
        ),
        v => panic!("expected UNDECIDED, got {v:?}"),
    }
}

/// A ReLU6 backward whose mask threshold moved from 6 to 6.06 (JAX's clip
/// backward with the constant changed): random points rarely put a conv
/// output in (6, 6.06) — without boundary points some seeds certify the bug —
/// but boundary points put each decision's operand just above and below
/// every threshold either side compares against, so every seed refutes it,
/// and the correct jax.vjp backward still certifies with them.
#[test]
fn boundary_points_refute_a_moved_threshold_that_random_points_miss() {
    let fwd = data("conv_relu6.fwd.mlir");
    let ok = merge_pair(&fwd, &data("conv_relu6.jax.mlir"), None, None).unwrap();
    let bug = merge_pair(&fwd, &data("conv_relu6.bug.mlir"), None, None).unwrap();
    let with = |seed, boundary_points| TieOptions {
        seed,
        boundary_points,
        ..TieOptions::default()
    };
    let seeds = [0, 2, 3];
    let missed = seeds
        .iter()
        .filter(|&&s| check_pair(&bug, None, &with(s, 0)).unwrap().certified())
        .count();
    assert!(
        missed > 0,
        "the band is narrow enough that random points miss it"
    );
    for seed in seeds {
        let r = check_pair(&bug, None, &with(seed, 16)).unwrap();
        let (_, detail) = refutation(&r);
        assert!(
            detail.contains("at a boundary point"),
            "seed {seed}: {detail}"
        );
        let good = check_pair(&ok, None, &with(seed, 16)).unwrap();
        assert!(good.certified(), "seed {seed}: {:?}", good.tie.verdict);
        assert!(
            good.tie.boundary_points > 0,
            "seed {seed}: boundary points were checked"
        );
    }
}
