//! `cert::fused_step` on fused train steps written here as text, the way a
//! hand-written or generated step is: a two-layer ReLU net with a softmax
//! cross-entropy loss (mean over the batch) returned as a result, its
//! backward, and an SGD, Adam or RMSProp tail. Every dimension is the same so that
//! the planted bugs keep every shape: each is refuted at the parameter whose
//! update reads the wrong value, and the correct twin is certified with its
//! tail recognised and its hyper-parameters measured; the backward is
//! followed from the wrong gradient to the op that carries the bug.

use cert::fused_step::{
    certify_fused_step, ArgRole, Finding, FusedStepOptions, RoleHints, RowStatus, TextNames,
};
use cert::Verdict;
use layers::trainstep::{render_step, Optimizer, StepOptions};

/// Batch and width (the input, hidden and class widths are all `N`).
const B: usize = 4;
const N: usize = 6;

#[derive(Clone, Copy, Debug, PartialEq)]
enum Bug {
    None,
    /// The dense backward multiplies by W₂ instead of W₂ᵀ.
    UntransposedW,
    /// The ReLU mask compares the cotangent instead of the pre-activation.
    MaskOnCotangent,
    /// b₂'s gradient is summed over the batch without the mean's 1/B.
    MissingMean,
    /// b₁'s gradient is B times the first example's instead of the batch's.
    OneExample,
}

#[derive(Clone, Copy, PartialEq)]
enum Tail {
    Sgd,
    Adam,
    RmsProp,
}

fn step(bug: Bug, tail: Tail) -> String {
    let t = |r: usize, c: usize| format!("tensor<{r}x{c}xf32>");
    let v = |n: usize| format!("tensor<{n}xf32>");
    let (bn, nn, n1) = (t(B, N), t(N, N), v(N));
    let dot = |a: &str, b: &str, ca: usize, cb: usize, ta: &str, tb: &str, out: &str| {
        format!("stablehlo.dot_general {a}, {b}, contracting_dims = [{ca}] x [{cb}], precision = [DEFAULT, DEFAULT] : ({ta}, {tb}) -> {out}")
    };
    let mut s = String::new();
    let states = match tail {
        Tail::Sgd => String::new(),
        Tail::Adam => ["W1", "b1", "W2", "b2"]
            .iter()
            .flat_map(|p| {
                let ty = if p.starts_with('W') { &nn } else { &n1 };
                [format!(", %{p}_m: {ty}"), format!(", %{p}_v: {ty}")]
            })
            .collect(),
        Tail::RmsProp => ["W1", "b1", "W2", "b2"]
            .iter()
            .map(|p| {
                let ty = if p.starts_with('W') { &nn } else { &n1 };
                format!(", %{p}_v: {ty}")
            })
            .collect(),
    };
    s += &format!(
        "func.func public @step(%x: {bn}, %W1: {nn}, %b1: {n1}, %W2: {nn}, %b2: {n1}, %y: {bn}{states}) -> ("
    );
    let mut outs = vec![nn.clone(), n1.clone(), nn.clone(), n1.clone()];
    if tail == Tail::Adam {
        for ty in [&nn, &nn, &n1, &n1, &nn, &nn, &n1, &n1] {
            outs.push(ty.to_string());
        }
    }
    if tail == Tail::RmsProp {
        for ty in [&nn, &n1, &nn, &n1] {
            outs.push(ty.to_string());
        }
    }
    outs.push("tensor<f32>".into());
    s += &outs.join(", ");
    s += ") {\n";
    let mut line = |l: String| {
        s += "  ";
        s += &l;
        s += "\n";
    };
    line(format!("%h0 = {}", dot("%x", "%W1", 1, 0, &bn, &nn, &bn)));
    line(format!(
        "%b1b = stablehlo.broadcast_in_dim %b1, dims = [1] : ({n1}) -> {bn}"
    ));
    line(format!("%z1 = stablehlo.add %h0, %b1b : {bn}"));
    line(format!("%zero = stablehlo.constant dense<0.0> : {bn}"));
    line(format!("%a1 = stablehlo.maximum %z1, %zero : {bn}"));
    line(format!("%h2 = {}", dot("%a1", "%W2", 1, 0, &bn, &nn, &bn)));
    line(format!(
        "%b2b = stablehlo.broadcast_in_dim %b2, dims = [1] : ({n1}) -> {bn}"
    ));
    line(format!("%z2 = stablehlo.add %h2, %b2b : {bn}"));
    line(format!("%e = stablehlo.exponential %z2 : {bn}"));
    line("%c0 = stablehlo.constant dense<0.0> : tensor<f32>".into());
    line(format!("%se = stablehlo.reduce(%e init: %c0) applies stablehlo.add across dimensions = [1] : ({bn}, tensor<f32>) -> tensor<{B}xf32>"));
    line(format!(
        "%seb = stablehlo.broadcast_in_dim %se, dims = [0] : (tensor<{B}xf32>) -> {bn}"
    ));
    line(format!("%p = stablehlo.divide %e, %seb : {bn}"));
    line(format!("%lp = stablehlo.log %p : {bn}"));
    line(format!("%yl = stablehlo.multiply %y, %lp : {bn}"));
    line(format!("%sum = stablehlo.reduce(%yl init: %c0) applies stablehlo.add across dimensions = [0, 1] : ({bn}, tensor<f32>) -> tensor<f32>"));
    line(format!(
        "%nb = stablehlo.constant dense<-{B}.0> : tensor<f32>"
    ));
    line("%loss = stablehlo.divide %sum, %nb : tensor<f32>".into());
    // Backward of the mean cross-entropy: dz₂ = (p − y)/B.
    line(format!("%d = stablehlo.subtract %p, %y : {bn}"));
    line(format!(
        "%invb = stablehlo.constant dense<{}> : {bn}",
        1.0 / B as f64
    ));
    line(format!("%dz2 = stablehlo.multiply %d, %invb : {bn}"));
    line(format!(
        "%gW2 = {}",
        dot("%a1", "%dz2", 0, 0, &bn, &bn, &nn)
    ));
    let gb2_from = if bug == Bug::MissingMean {
        "%d"
    } else {
        "%dz2"
    };
    line(format!("%gb2 = stablehlo.reduce({gb2_from} init: %c0) applies stablehlo.add across dimensions = [0] : ({bn}, tensor<f32>) -> {n1}"));
    let wt = if bug == Bug::UntransposedW { 0 } else { 1 };
    line(format!(
        "%da1 = {}",
        dot("%dz2", "%W2", 1, wt, &bn, &nn, &bn)
    ));
    let masked = if bug == Bug::MaskOnCotangent {
        "%da1"
    } else {
        "%z1"
    };
    line(format!(
        "%mask = stablehlo.compare GT, {masked}, %zero : ({bn}, {bn}) -> tensor<{B}x{N}xi1>"
    ));
    line(format!(
        "%dz1 = stablehlo.select %mask, %da1, %zero : tensor<{B}x{N}xi1>, {bn}"
    ));
    line(format!("%gW1 = {}", dot("%x", "%dz1", 0, 0, &bn, &bn, &nn)));
    if bug == Bug::OneExample {
        line(format!(
            "%row = stablehlo.slice %dz1 [0:1, 0:{N}] : ({bn}) -> tensor<1x{N}xf32>"
        ));
        line(format!(
            "%rowf = stablehlo.reshape %row : (tensor<1x{N}xf32>) -> {n1}"
        ));
        line(format!("%bsc = stablehlo.constant dense<{B}.0> : {n1}"));
        line(format!("%gb1 = stablehlo.multiply %rowf, %bsc : {n1}"));
    } else {
        line(format!("%gb1 = stablehlo.reduce(%dz1 init: %c0) applies stablehlo.add across dimensions = [0] : ({bn}, tensor<f32>) -> {n1}"));
    }
    let mut rets = Vec::new();
    let mut state_rets = Vec::new();
    for p in ["W1", "b1", "W2", "b2"] {
        let ty = if p.starts_with('W') { &nn } else { &n1 };
        match tail {
            Tail::Sgd => {
                line(format!("%lr_{p} = stablehlo.constant dense<0.1> : {ty}"));
                line(format!("%u_{p} = stablehlo.multiply %g{p}, %lr_{p} : {ty}"));
            }
            Tail::Adam => {
                let k = |name: &str, x: f64| {
                    format!("%{name}_{p} = stablehlo.constant dense<{x:e}> : {ty}")
                };
                line(k("b1", 0.9));
                line(k("c1", 0.1));
                line(k("b2", 0.999));
                line(k("c2", 0.001));
                line(k("eps", 1e-8));
                line(k("lr", 0.01));
                line(format!(
                    "%mo_{p} = stablehlo.multiply %{p}_m, %b1_{p} : {ty}"
                ));
                line(format!(
                    "%mg_{p} = stablehlo.multiply %g{p}, %c1_{p} : {ty}"
                ));
                line(format!("%m2_{p} = stablehlo.add %mo_{p}, %mg_{p} : {ty}"));
                line(format!(
                    "%vo_{p} = stablehlo.multiply %{p}_v, %b2_{p} : {ty}"
                ));
                line(format!("%gg_{p} = stablehlo.multiply %g{p}, %g{p} : {ty}"));
                line(format!(
                    "%vg_{p} = stablehlo.multiply %gg_{p}, %c2_{p} : {ty}"
                ));
                line(format!("%v2_{p} = stablehlo.add %vo_{p}, %vg_{p} : {ty}"));
                line(format!("%sq_{p} = stablehlo.sqrt %v2_{p} : {ty}"));
                line(format!("%den_{p} = stablehlo.add %sq_{p}, %eps_{p} : {ty}"));
                line(format!(
                    "%r_{p} = stablehlo.divide %m2_{p}, %den_{p} : {ty}"
                ));
                line(format!(
                    "%u_{p} = stablehlo.multiply %r_{p}, %lr_{p} : {ty}"
                ));
                state_rets.push(format!("%m2_{p}"));
                state_rets.push(format!("%v2_{p}"));
            }
            Tail::RmsProp => {
                // optax's form: ε inside the root.
                let k = |name: &str, x: f64| {
                    format!("%{name}_{p} = stablehlo.constant dense<{x:e}> : {ty}")
                };
                line(k("rho", 0.9));
                line(k("c", 0.1));
                line(k("eps", 1e-8));
                line(k("lr", 0.001));
                line(format!(
                    "%vo_{p} = stablehlo.multiply %{p}_v, %rho_{p} : {ty}"
                ));
                line(format!("%gg_{p} = stablehlo.multiply %g{p}, %g{p} : {ty}"));
                line(format!(
                    "%vg_{p} = stablehlo.multiply %gg_{p}, %c_{p} : {ty}"
                ));
                line(format!("%v2_{p} = stablehlo.add %vo_{p}, %vg_{p} : {ty}"));
                line(format!("%ve_{p} = stablehlo.add %v2_{p}, %eps_{p} : {ty}"));
                line(format!("%rs_{p} = stablehlo.rsqrt %ve_{p} : {ty}"));
                line(format!("%r_{p} = stablehlo.multiply %g{p}, %rs_{p} : {ty}"));
                line(format!(
                    "%u_{p} = stablehlo.multiply %r_{p}, %lr_{p} : {ty}"
                ));
                state_rets.push(format!("%v2_{p}"));
            }
        }
        line(format!("%new_{p} = stablehlo.subtract %{p}, %u_{p} : {ty}"));
        rets.push(format!("%new_{p}"));
    }
    rets.extend(state_rets);
    rets.push("%loss".into());
    line(format!("return {} : {}", rets.join(", "), outs.join(", ")));
    s += "}\n";
    s
}

fn certify(text: &str) -> cert::fused_step::FusedStepReport {
    let module = ir::parse::parse_module(text, "step.mlir").expect("the generated step parses");
    ir::verify::verify_module(&module).expect("the generated step verifies");
    let f = module.default_entry().expect("one public function");
    let names = TextNames::read(text, f);
    certify_fused_step(&module, &f.name, &names, &FusedStepOptions::default())
        .expect("the roles are found")
}

#[test]
fn a_correct_sgd_step_is_certified_with_its_roles_and_learning_rate() {
    let r = certify(&step(Bug::None, Tail::Sgd));
    assert_eq!(r.verdict, Verdict::Certified, "{:?}", r.verdict);
    let roles: Vec<(&str, &ArgRole)> = r
        .roles
        .args
        .iter()
        .map(|a| (a.name.as_str(), &a.role))
        .collect();
    assert_eq!(roles[0], ("x", &ArgRole::Data));
    assert_eq!(roles[1], ("W1", &ArgRole::Param { output: 0 }));
    assert_eq!(roles[4], ("b2", &ArgRole::Param { output: 3 }));
    assert_eq!(roles[5], ("y", &ArgRole::Labels));
    assert_eq!(r.roles.loss, 4);
    assert!(r.rows.iter().all(|row| row.status == RowStatus::Tied));
    // The backward's values are ∂loss/∂θ themselves (the 1/B is applied at dz₂).
    let k = r.scale.expect("a scale");
    assert!((k - 1.0).abs() < 1e-9, "{k}");
    // The tail's gradient values are read at their ops' lines in the text.
    let gw1 = r.rows[0].gradient.as_ref().expect("W1's gradient");
    assert_eq!(gw1.op, "stablehlo.dot_general");
    let text = step(Bug::None, Tail::Sgd);
    let at = text.lines().nth(gw1.line.unwrap() as usize - 1).unwrap();
    assert!(at.trim_start().starts_with("%gW1 ="), "{at}");
    let tail = r.tail.recognised.as_deref().expect("SGD recognised");
    assert!(tail.starts_with("SGD, lr 1.000000e-1"), "{tail}");
}

#[test]
fn a_correct_adam_step_is_certified_and_its_moments_measured() {
    let r = certify(&step(Bug::None, Tail::Adam));
    assert_eq!(r.verdict, Verdict::Certified, "{:?}", r.verdict);
    let states = r
        .roles
        .args
        .iter()
        .filter(|a| matches!(a.role, ArgRole::State { .. }))
        .count();
    assert_eq!(states, 8);
    let tail = r.tail.recognised.as_deref().expect("Adam recognised");
    assert!(
        tail.starts_with("Adam, θ' = θ − 1.000000e-2·m'/(√v' + 1.0e-8)"),
        "{tail}"
    );
    let forms: Vec<&str> = r.tail.states.iter().map(|s| s.form.as_str()).collect();
    assert_eq!(
        forms,
        [
            "s' = 0.900000·s + 1.000000e-1·∇L",
            "s' = 0.999000·s + 1.000000e-3·∇L²"
        ]
    );
}

#[test]
fn a_correct_rmsprop_step_is_certified_and_its_epsilon_measured() {
    let r = certify(&step(Bug::None, Tail::RmsProp));
    assert_eq!(r.verdict, Verdict::Certified, "{:?}", r.verdict);
    let tail = r.tail.recognised.as_deref().expect("RMSProp recognised");
    assert!(
        tail.starts_with("RMSProp, θ' = θ − lr·∇L/(√(v' + ε)), lr 1.000000e-3, ε 1.0e-8"),
        "{tail}"
    );
}

/// Each planted bug is refuted at the parameter whose update reads it.
#[test]
fn each_planted_backward_bug_is_refuted_at_its_parameter() {
    for tail in [Tail::Sgd, Tail::Adam, Tail::RmsProp] {
        for (bug, param) in [
            (Bug::UntransposedW, "W1"),
            (Bug::MaskOnCotangent, "W1"),
            (Bug::MissingMean, "b2"),
            (Bug::OneExample, "b1"),
        ] {
            let r = certify(&step(bug, tail));
            match &r.verdict {
                Verdict::Refuted { block, .. } => assert_eq!(block, param, "{bug:?}"),
                v => panic!("{bug:?} is not refuted: {v:?}"),
            }
            let wrong: Vec<&str> = r
                .rows
                .iter()
                .filter(|row| matches!(row.status, RowStatus::Wrong(_)))
                .map(|row| row.name.as_str())
                .collect();
            let expected: &[&str] = match bug {
                Bug::UntransposedW | Bug::MaskOnCotangent => &["W1", "b1"],
                Bug::MissingMean => &["b2"],
                _ => &["b1"],
            };
            assert_eq!(wrong, expected, "{bug:?}");
            // The backward is followed from the first wrong gradient to the
            // op that carries the bug.
            let text = step(bug, tail);
            let (blamed, finding) = match bug {
                Bug::UntransposedW => ("%da1", "not a cotangent"),
                Bug::MaskOnCotangent => ("%dz1", "not a cotangent"),
                Bug::MissingMean => ("%d", "scaled"),
                // The first value of b₁'s type on the update's paths is
                // the one example's row; its inputs (dz₁) are right.
                _ => ("%rowf", "the gradient"),
            };
            let line = text
                .lines()
                .position(|l| l.trim_start().starts_with(&format!("{blamed} = ")))
                .expect("the blamed value is in the text") as u32
                + 1;
            let loc = r.localisation.as_ref().expect("localised");
            assert_eq!(loc.at.line, Some(line), "{bug:?}: {loc:?}");
            match (&loc.finding, finding) {
                (Finding::NotACotangent { .. }, "not a cotangent") => {}
                (Finding::TheGradient, "the gradient") => {}
                (Finding::Scaled { ratio, .. }, "scaled") => {
                    assert!((ratio - B as f64).abs() < 1e-9, "{ratio}")
                }
                (f, want) => panic!("{bug:?}: found {f:?}, expected {want}"),
            }
            // What it reads is right (the missing mean reads the forward only).
            assert_eq!(loc.reads.is_empty(), bug == Bug::MissingMean, "{loc:?}");
            if bug == Bug::MissingMean {
                let RowStatus::Wrong(why) = &r.rows[3].status else {
                    unreachable!()
                };
                assert!(
                    why.contains("4.000000e0·∂loss/∂θ, the other parameters' 1.000000e0"),
                    "{why}"
                );
            }
        }
    }
}

#[test]
fn a_step_without_a_loss_or_with_two_is_a_usage_error_listing_the_candidates() {
    let text = step(Bug::None, Tail::Sgd);
    // No loss: the last result dropped.
    let no_loss = text
        .replace(", tensor<f32>) {", ") {")
        .replace(", %loss : ", " : ")
        .replace(", tensor<f32>\n", "\n");
    let module = ir::parse::parse_module(&no_loss, "step.mlir").expect("parses");
    let f = module.func("step").unwrap();
    let err = certify_fused_step(
        &module,
        "step",
        &TextNames::read(&no_loss, f),
        &FusedStepOptions::default(),
    )
    .expect_err("no loss");
    assert!(err.0.contains("returns no loss"), "{}", err.0);
    // Two candidates: the loss and its double, neither named like a loss.
    let two = text
        .replace("%loss", "%l")
        .replace(", %l : ", ", %l, %l2 : ")
        .replace(", tensor<f32>) {", ", tensor<f32>, tensor<f32>) {")
        .replace(
            "  return ",
            "  %l2 = stablehlo.add %l, %l : tensor<f32>\n  return ",
        )
        .replace(", tensor<f32>\n}", ", tensor<f32>, tensor<f32>\n}");
    let module = ir::parse::parse_module(&two, "step.mlir").expect("parses");
    let f = module.func("step").unwrap();
    let names = TextNames::read(&two, f);
    let err = certify_fused_step(&module, "step", &names, &FusedStepOptions::default())
        .expect_err("ambiguous");
    assert!(
        err.0.contains("several results could be the loss: 4 (%l,") && err.0.contains("5 (%l2,"),
        "{}",
        err.0
    );
    // Named with --loss, it is certified.
    let opts = FusedStepOptions {
        hints: RoleHints {
            loss: Some("l".into()),
            params: None,
        },
        ..Default::default()
    };
    let r = certify_fused_step(&module, "step", &names, &opts).expect("named");
    assert_eq!(r.verdict, Verdict::Certified);
}

/// certgrad's own train steps, read back from their text alone: every
/// gradient tied, and the momentum tails recognised with their measured
/// hyper-parameters. MobileNetV2's gradients dwarf the small momentum state
/// the point draws, so s' = μ·s + ∇L is nearly parallel to ∇L there: the
/// Nesterov fit on (∇L, s') was ill-conditioned and failed; on (∇L, s) it
/// recovers lr and μ = 0.9 exactly.
#[test]
fn certgrads_own_momentum_steps_are_recognised_from_their_text() {
    let net = layers::net::by_name("mobilenetv2-k10-32x32").expect("a built-in net");
    for (optimizer, form) in [
        (Optimizer::Nesterov, "Nesterov momentum, lr "),
        (Optimizer::HeavyBall, "heavy-ball momentum, lr "),
        (Optimizer::Sgd, "SGD, lr "),
    ] {
        let text = render_step(&net, 2, &StepOptions::new(optimizer))
            .expect("the step renders")
            .text();
        let r = certify(&text);
        assert!(r.certified(), "{optimizer:?}: {r:?}");
        let tail = r
            .tail
            .recognised
            .as_deref()
            .unwrap_or_else(|| panic!("{optimizer:?}: {}", r.tail.note));
        assert!(tail.starts_with(form), "{optimizer:?}: {tail}");
        if optimizer == Optimizer::Nesterov {
            assert!(tail.contains("μ 0.900000"), "{tail}");
        }
        // No fitted-noise decoupled weight decay (heavy-ball couples its L2
        // into the state, which the state fit shows).
        assert!(!tail.contains("weight decay"), "{optimizer:?}: {tail}");
    }
}

/// certgrad's TF-RMSProp step (L2 coupled into the gradient, ε = 1): both
/// states and the update recognised from the text, with the render's own
/// constants read back.
#[test]
fn certgrads_own_tf_rmsprop_step_is_recognised_with_its_constants() {
    let r = certify(&own_step(Optimizer::RmsProp, |_| {}));
    certified_with_tail(
        &r,
        &[
            "TF-RMSProp, θ' = θ − lr·b'",
            "μ 0.900000",
            "ε 1.0e0",
            "L2 4.000000e-5·θ coupled into ∇L",
        ],
    );
    assert!(r.tail.states.iter().all(|s| s.fits), "{:?}", r.tail.states);
}

/// certgrad's own cifar8-bbn step at batch 2 with this optimizer, its
/// options changed by `modify` (a recipe modifier, replicas).
fn own_step(optimizer: Optimizer, modify: impl FnOnce(&mut StepOptions)) -> String {
    let net = layers::net::by_name("cifar8-bbn").expect("a built-in net");
    let mut opts = StepOptions::new(optimizer);
    modify(&mut opts);
    render_step(&net, 2, &opts)
        .expect("the step renders")
        .text()
}

/// The step is certified and its recognised tail contains every part.
fn certified_with_tail(r: &cert::fused_step::FusedStepReport, parts: &[&str]) {
    assert!(r.certified(), "{r:?}");
    let tail = r
        .tail
        .recognised
        .as_deref()
        .unwrap_or_else(|| panic!("{}", r.tail.note));
    for part in parts {
        assert!(tail.contains(part), "{part:?} not in {tail}");
    }
}

/// The SSA names of `%x = stablehlo.OP %a, %b : …` lines, in text order.
fn binary_ops<'a>(text: &'a str, op: &str) -> Vec<(usize, &'a str, &'a str, &'a str)> {
    text.lines()
        .enumerate()
        .filter_map(|(i, l)| {
            let (lhs, rhs) = l.trim().split_once(" = ")?;
            let rest = rhs.strip_prefix(&format!("stablehlo.{op} "))?;
            let (a, rest) = rest.split_once(", ")?;
            let b = rest.split_whitespace().next()?;
            Some((i, lhs, a, b))
        })
        .collect()
}

fn replace_line(text: &str, line: usize, from: &str, to: &str) -> String {
    text.lines()
        .enumerate()
        .map(|(i, l)| {
            if i == line {
                assert!(l.contains(from), "{from} not in {l}");
                l.replacen(from, to, 1)
            } else {
                l.to_string()
            }
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// An EMA shadow of the updated weights (e' = emad·e + oemad·θ') is
/// recognised beside the AdamW tail, its decay named as the argument that
/// holds it. The same step with the shadow averaging the weights before the
/// update is reported as such, and with one tensor's shadow reading another
/// value (θ instead of θ', one parameter only) the shadows are reported
/// not checked: a state the update does not read is never left out.
#[test]
fn an_ema_shadow_is_recognised_and_a_shadow_of_the_old_weights_is_told_apart() {
    let text = own_step(Optimizer::AdamW, |o| o.recipe.ema = Some(0.999));
    let shadow_line = |r: &cert::fused_step::FusedStepReport| {
        r.tail
            .states
            .iter()
            .find(|s| s.form.contains("EMA") || s.form.contains("carries its parameter"))
            .cloned()
            .unwrap_or_else(|| panic!("no shadow line in {:?}", r.tail.states))
    };
    let r = certify(&text);
    certified_with_tail(&r, &["Adam"]);
    let s = shadow_line(&r);
    assert!(
        s.fits
            && s.form
                .contains("·θ' (an EMA shadow of the updated weights)"),
        "{s:?}"
    );
    assert!(s.form.contains("(the argument %"), "{s:?}");
    // The shadow lines: e' = d·e + (1−d)·θ' is `%a = multiply %d, %e`,
    // `%b = multiply %od, %new`, `%c = add %a, %b`. Parameters are the
    // arguments 1..=n and the shadows follow θ, m and v: shadow s of
    // parameter s − 3n.
    let n = r.roles.params().len();
    let mults = binary_ops(&text, "multiply");
    let shadow_reads: Vec<(usize, &str, usize)> = mults
        .windows(2)
        .filter_map(|w| {
            let s: usize = w[0].3.strip_prefix("%arg")?.parse().ok()?;
            (s > 3 * n && s <= 4 * n && w[1].0 == w[0].0 + 1).then(|| (w[1].0, w[1].3, s - 3 * n))
        })
        .collect();
    assert_eq!(shadow_reads.len(), n, "one shadow update per parameter");
    let mut before = text.clone();
    for &(line, new, p) in &shadow_reads {
        before = replace_line(&before, line, new, &format!("%arg{p}"));
    }
    let r = certify(&before);
    let s = shadow_line(&r);
    assert!(
        s.fits
            && s.form
                .contains("·θ (an EMA shadow of the weights before this step's update)"),
        "{s:?}"
    );
    let (line, new, p) = shadow_reads[0];
    let one_wrong = replace_line(&text, line, new, &format!("%arg{p}"));
    let r = certify(&one_wrong);
    assert!(r.certified(), "the gradients are still right: {r:?}");
    let s = shadow_line(&r);
    assert!(!s.fits && s.form.starts_with("update not checked"), "{s:?}");
}

/// Gradient accumulation as certgrad renders it (G' = akeep·G + ∇L; the
/// AdamW tail reads G'/4 and is applied in proportion to `aup`) is
/// recognised with the accumulator's form and the gate named. With one
/// parameter's first moment reading the micro-batch gradient instead of
/// G'/4 (a shape-preserving bug), the tail is not recognised.
#[test]
fn an_accumulated_and_gated_tail_is_recognised_and_a_moment_of_the_micro_batch_is_not() {
    let text = own_step(Optimizer::AdamW, |o| o.recipe.accumulate = Some(4));
    let r = certify(&text);
    certified_with_tail(
        &r,
        &[
            "Adam",
            "on the accumulated gradient G'",
            "applied in proportion to the argument %",
        ],
    );
    assert!(
        r.tail.states.iter().take(3).all(|s| s.fits),
        "{:?}",
        r.tail.states
    );
    let forms: Vec<&str> = r.tail.states.iter().map(|s| s.form.as_str()).collect();
    assert!(
        forms[0].starts_with("G' = ") && forms[0].contains("1.000000e0·∇L"),
        "{forms:?}"
    );
    // The first moment reads G'/4: 0.1/4 = 2.5e-2.
    assert!(forms[1].contains("2.500000e-2·G'"), "{forms:?}");
    // The bug: the first parameter's accumulated gradient is
    // `%s = add %a, %g` (a = akeep·G), `%q = divide %s, %four`; its first
    // moment `%x = multiply %c, %q` reads %g instead.
    let adds = binary_ops(&text, "add");
    let divides = binary_ops(&text, "divide");
    let (sum, g) = adds
        .iter()
        .find_map(|&(i, lhs, _, g)| {
            let q = divides.iter().find(|d| d.0 > i && d.2 == lhs)?;
            Some((q.1, g))
        })
        .expect("an accumulated gradient divided by K");
    let (m_line, _, _, _) = *binary_ops(&text, "multiply")
        .iter()
        .find(|m| m.3 == sum && m.2.starts_with("%cst"))
        .expect("the first moment's c·G'/K");
    let bug = replace_line(&text, m_line, &format!("{sum} :"), &format!("{g} :"));
    let r = certify(&bug);
    assert!(r.tail.recognised.is_none(), "{:?}", r.tail.recognised);
}

/// A data-parallel step (certgrad's cifar8-bbn AdamW on 2 replicas: each
/// gradient all_reduce-summed, then ÷ 2) is certified against the mean of
/// the replicas' losses, each on its own data, with the gradient read after
/// the ÷ 2. Two shape-preserving bugs: ×2 in place of ÷2 everywhere shows
/// as the gradient of 4 × the mean loss; one parameter updated from its
/// own replica's gradient (its all_reduce skipped) is refuted there.
#[test]
fn a_data_parallel_step_follows_the_mean_of_its_replicas_losses() {
    let text = own_step(Optimizer::AdamW, |o| o.replicas = 2);
    let r = certify(&text);
    assert!(r.certified(), "{r:?}");
    assert_eq!(r.replicas, 2);
    assert!(
        r.scale.is_some_and(|k| (k - 1.0).abs() < 1e-9),
        "{:?}",
        r.scale
    );
    let site = r.rows[0].gradient.as_ref().expect("a gradient");
    assert_eq!(site.op, "stablehlo.divide", "{site:?}");
    // The all_reduces: `%y = "stablehlo.all_reduce"(%x) …`, then
    // `%z = stablehlo.divide %y, %two`.
    let reduced: Vec<(String, String)> = text
        .lines()
        .filter_map(|l| {
            let (lhs, rhs) = l.trim().split_once(" = \"stablehlo.all_reduce\"(")?;
            Some((lhs.to_string(), rhs.split(')').next()?.to_string()))
        })
        .collect();
    assert_eq!(reduced.len(), r.rows.len());
    let times_two = text
        .lines()
        .map(|l| {
            let hit = reduced
                .iter()
                .any(|(y, _)| l.contains(&format!("stablehlo.divide {y}, ")));
            if hit {
                l.replacen("stablehlo.divide", "stablehlo.multiply", 1)
            } else {
                l.to_string()
            }
        })
        .collect::<Vec<_>>()
        .join("\n");
    let r = certify(&times_two);
    assert!(r.certified(), "{r:?}");
    assert!(
        r.scale.is_some_and(|k| (k - 4.0).abs() < 1e-9),
        "{:?}",
        r.scale
    );
    let (y, x) = &reduced[0];
    let local = text.replacen(
        &format!("stablehlo.divide {y}, "),
        &format!("stablehlo.divide {x}, "),
        1,
    );
    let r = certify(&local);
    match &r.verdict {
        Verdict::Refuted { block, .. } => assert_eq!(block, &r.rows[0].name),
        v => panic!("not refuted: {v:?}"),
    }
}
