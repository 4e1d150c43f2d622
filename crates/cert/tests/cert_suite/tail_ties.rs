//! The recipe vocabulary under the train-step tie (docs/training.md §2–§4):
//! TF-RMSProp, LAMB, global-norm clipping, no-decay groups, the EMA shadow,
//! gradient accumulation and the BCE loss, alone and in the combinations the
//! reference's recipes use, each certified; and one negative control per
//! place a shape-preserving bug hides, each REFUTED beside its certified
//! twin (the same recipe without the fault, at the same point).

use crate::common::{refuted_in, tiny};
use cert::step::{certify_recipe_step, StepTieOptions, StepTieReport};
use cert::Verdict;
use layers::net::{by_name, NetSpec};
use layers::ops::norm::BnWorld;
use layers::trainstep::{
    render_step, Fault, Loss, Optimizer, Recipe, RecipeFlags, StepOptions, WdExclude,
};

fn opts(optimizer: Optimizer, recipe: Recipe) -> StepOptions {
    StepOptions {
        recipe,
        ..StepOptions::new(optimizer)
    }
}

fn certify_with(net: &NetSpec, so: &StepOptions, t: &StepTieOptions) -> StepTieReport {
    let m = render_step(net, 3, so).unwrap().module;
    certify_recipe_step(net, 3, so, &m, t)
}

fn certify(net: &NetSpec, so: &StepOptions) -> StepTieReport {
    certify_with(net, so, &StepTieOptions::default())
}

fn assert_certified(r: &StepTieReport) {
    assert!(
        r.certified(),
        "@{}: {:?} (tail gap {:.2e})",
        r.func,
        r.verdict,
        r.tail_gap
    );
}

/// The control refuted in `block`, its twin (`fault: None`) certified.
fn control(net: &NetSpec, so: StepOptions, fault: Fault, t: &StepTieOptions) -> String {
    assert_certified(&certify_with(net, &so, t));
    let bad = StepOptions {
        recipe: Recipe {
            fault: Some(fault),
            ..so.recipe
        },
        ..so
    };
    let r = certify_with(net, &bad, t);
    refuted_in(&r.verdict, &format!("{fault:?}"))
}

const WX: WdExclude = WdExclude {
    norm: true,
    bias: true,
};

/// The recipes of docs/training.md §2, §4: MobileNetV2/EfficientNet (TF-RMSProp,
/// EMA), ResNet-50 RSB-A3 (LAMB, accumulation, BCE), ViT (AdamW, clip 1.0,
/// no decay on norms and biases, EMA), and each modifier on its own.
fn reference_recipes() -> Vec<(Optimizer, Recipe)> {
    let r = Recipe::default();
    vec![
        (Optimizer::RmsProp, r),
        (
            Optimizer::RmsProp,
            Recipe {
                ema: Some(0.9999),
                ..r
            },
        ),
        (
            Optimizer::RmsProp,
            Recipe {
                weight_decay: Some(0.0),
                ..r
            },
        ),
        (Optimizer::Lamb, r),
        (
            Optimizer::Lamb,
            Recipe {
                loss: Loss::Bce,
                ..r
            },
        ),
        (
            Optimizer::Lamb,
            Recipe {
                accumulate: Some(4),
                loss: Loss::Bce,
                ..r
            },
        ),
        (
            Optimizer::AdamW,
            Recipe {
                clip: Some(1.0),
                wd_exclude: WX,
                ema: Some(0.9999),
                ..r
            },
        ),
        (
            Optimizer::AdamW,
            Recipe {
                clip: Some(0.01),
                accumulate: Some(2),
                ..r
            },
        ),
        (
            Optimizer::HeavyBall,
            Recipe {
                wd_exclude: WX,
                ..r
            },
        ),
        (
            Optimizer::Nesterov,
            Recipe {
                clip: Some(0.01),
                ..r
            },
        ),
        (
            Optimizer::Sgd,
            Recipe {
                loss: Loss::Bce,
                ema: Some(0.999),
                ..r
            },
        ),
    ]
}

#[test]
fn every_reference_recipe_certifies_on_every_bn_world() {
    for bn in [None, Some(BnWorld::PerExample), Some(BnWorld::Batch)] {
        let net = tiny(bn);
        for (opt, recipe) in reference_recipes() {
            let r = certify(&net, &opts(opt, recipe));
            assert_certified(&r);
            // One row per parameter tensor per joint probe, per point (two
            // points, a cycle's first and last micro-batch, under
            // accumulation); a fitted clip factor takes two probes.
            let points = 1 + recipe.accumulate.is_some() as usize;
            let probes = 1 + (recipe.clip.is_some() && recipe.accumulate.is_none()) as usize;
            assert_eq!(
                r.blocks.len(),
                (4 + 2 * bn.is_some() as usize) * points * probes
            );
        }
    }
}

#[test]
fn lamb_accumulate_bce_certifies_on_cifar8_bbn() {
    let net = by_name("cifar8-bbn").unwrap();
    let so = opts(
        Optimizer::Lamb,
        Recipe {
            accumulate: Some(4),
            loss: Loss::Bce,
            wd_exclude: WX,
            ..Recipe::default()
        },
    );
    let m = render_step(&net, 2, &so).unwrap().module;
    let r = certify_recipe_step(&net, 2, &so, &m, &StepTieOptions::default());
    assert_certified(&r);
    assert_eq!(r.func, "cifar8_bbn_lambwxacc4bce_train_step");
}

#[test]
fn rmsprop_with_epsilon_outside_the_sqrt_is_refuted() {
    let net = tiny(Some(BnWorld::Batch));
    let so = opts(Optimizer::RmsProp, Recipe::default());
    let t = StepTieOptions::default();
    let block = control(&net, so, Fault::RmsEpsOutsideSqrt, &t);
    assert!(
        block.starts_with("v' of") || block.starts_with('d'),
        "{block}"
    );
}

/// At the step-1 point of a fresh run the zero-initialised biases are 0:
/// without the rule their trust ratio is 0/‖r‖ = 0 (NaN = 0/0 where r is 0
/// too), and θ' = 0 where the rule's trust 1 moves the bias by −lr·r. On the
/// no-BN net the conv bias has a real gradient; in front of a batch norm its
/// gradient (and r) is rounding-level, and the fault still freezes it.
#[test]
fn lamb_trust_ratio_without_the_zero_norm_rule_is_refuted_at_step_1() {
    let t = StepTieOptions {
        fresh: true,
        t: 1,
        ..Default::default()
    };
    let so = opts(Optimizer::Lamb, Recipe::default());
    for bn in [None, Some(BnWorld::Batch)] {
        assert_eq!(
            control(&tiny(bn), so, Fault::LambNoZeroNormRule, &t),
            "θ' of conv.b"
        );
    }
    let net = tiny(Some(BnWorld::Batch));
    // The same fault at a point away from step 1 (no zero norm) is the same
    // function: the rule only matters where a norm is 0.
    let bad = StepOptions {
        recipe: Recipe {
            fault: Some(Fault::LambNoZeroNormRule),
            ..so.recipe
        },
        ..so
    };
    assert_certified(&certify(&net, &bad));
}

#[test]
fn clip_factor_per_tensor_is_refuted() {
    let net = tiny(None);
    let so = opts(
        Optimizer::AdamW,
        Recipe {
            clip: Some(0.01),
            ..Recipe::default()
        },
    );
    let t = StepTieOptions::default();
    let block = control(&net, so, Fault::ClipPerTensor, &t);
    assert!(block.starts_with('d') || block == "clip factor", "{block}");
    // Under accumulation the raw gradient is in G': the replay refutes.
    let acc = opts(
        Optimizer::Sgd,
        Recipe {
            clip: Some(0.01),
            accumulate: Some(2),
            ..Recipe::default()
        },
    );
    assert!(control(&net, acc, Fault::ClipPerTensor, &t).starts_with("θ' of"));
}

#[test]
fn clip_missing_is_refuted_by_the_factor_check() {
    // A step rendered without clip, certified as if it had one: the
    // gradients are ∂L itself (f = 1), the formula wants f < 1.
    let net = tiny(None);
    let plain = opts(Optimizer::AdamW, Recipe::default());
    let clipped = opts(
        Optimizer::AdamW,
        Recipe {
            clip: Some(0.01),
            ..Recipe::default()
        },
    );
    let mut m = render_step(&net, 3, &plain).unwrap().module;
    m.funcs[0].name = render_step(&net, 3, &clipped).unwrap().signature.func;
    let r = certify_recipe_step(&net, 3, &clipped, &m, &StepTieOptions::default());
    assert_eq!(refuted_in(&r.verdict, "no clip"), "clip factor");
}

#[test]
fn ema_of_the_old_theta_is_refuted() {
    let net = tiny(Some(BnWorld::PerExample));
    let so = opts(
        Optimizer::AdamW,
        Recipe {
            ema: Some(0.9999),
            ..Recipe::default()
        },
    );
    let block = control(&net, so, Fault::EmaOfOldTheta, &StepTieOptions::default());
    assert_eq!(block, "shadow' of conv.W");
}

#[test]
fn decay_on_a_bn_beta_under_wd_exclude_is_refuted() {
    let net = tiny(Some(BnWorld::Batch));
    let t = StepTieOptions::default();
    for opt in [Optimizer::AdamW, Optimizer::Lamb] {
        let so = opts(
            opt,
            Recipe {
                wd_exclude: WX,
                ..Recipe::default()
            },
        );
        assert_eq!(
            control(&net, so, Fault::DecayOnNormBeta, &t),
            "θ' of bn.beta"
        );
    }
    // Coupled L2 (heavy-ball, RMSProp): the recovered gradient carries wd·β.
    for opt in [Optimizer::HeavyBall, Optimizer::RmsProp] {
        let so = opts(
            opt,
            Recipe {
                wd_exclude: WX,
                ..Recipe::default()
            },
        );
        assert_eq!(control(&net, so, Fault::DecayOnNormBeta, &t), "dbn.beta");
    }
}

#[test]
fn accumulation_that_applies_on_the_first_micro_batch_is_refuted() {
    let net = tiny(None);
    let so = opts(
        Optimizer::AdamW,
        Recipe {
            accumulate: Some(4),
            ..Recipe::default()
        },
    );
    let r = control(
        &net,
        so,
        Fault::AccumulateAlwaysApplies,
        &StepTieOptions::default(),
    );
    assert_eq!(r, "θ' of conv.W");
}

#[test]
fn bce_averaged_over_the_batch_only_is_refuted() {
    let net = tiny(None);
    let so = opts(
        Optimizer::Sgd,
        Recipe {
            loss: Loss::Bce,
            ..Recipe::default()
        },
    );
    let block = control(
        &net,
        so,
        Fault::BceMeanOverBatch,
        &StepTieOptions::default(),
    );
    assert_eq!(block, "dconv.W");
}

#[test]
fn recipe_flags_parse_once_and_name_their_flag() {
    let f = |flags: RecipeFlags| Recipe::from_flags(Optimizer::Lamb, &flags);
    let r = f(RecipeFlags {
        clip: Some(1.0),
        ema: Some(0.9998),
        wd_exclude: Some("norm,bias"),
        accumulate: Some(4),
        loss: Some("bce"),
        ..Default::default()
    })
    .unwrap();
    assert_eq!(
        r,
        Recipe {
            clip: Some(1.0),
            ema: Some(0.9998),
            wd_exclude: WX,
            accumulate: Some(4),
            loss: Loss::Bce,
            ..Recipe::default()
        }
    );
    assert_eq!(
        r.variant(Optimizer::Lamb, 64, 8),
        "emalambclipwxacc4dp64x8bce"
    );
    for (flags, flag) in [
        (
            RecipeFlags {
                wd_exclude: Some("norms"),
                ..Default::default()
            },
            "--wd-exclude",
        ),
        (
            RecipeFlags {
                loss: Some("mse"),
                ..Default::default()
            },
            "--loss",
        ),
        (
            RecipeFlags {
                accumulate: Some(1),
                ..Default::default()
            },
            "--accumulate",
        ),
        (
            RecipeFlags {
                clip: Some(0.0),
                ..Default::default()
            },
            "--clip",
        ),
        (
            RecipeFlags {
                ema: Some(1.0),
                ..Default::default()
            },
            "--ema",
        ),
    ] {
        let e = f(flags).unwrap_err().to_string();
        assert!(e.contains(flag), "{e}");
    }
    let e = Recipe::from_flags(
        Optimizer::Sgd,
        &RecipeFlags {
            weight_decay: Some(1e-4),
            ..Default::default()
        },
    )
    .unwrap_err()
    .to_string();
    assert!(e.contains("--weight-decay") && e.contains("sgd"), "{e}");
}

/// Every recipe's text (header comment + module) parses back to the same
/// module; the header names the tail's formula and constants.
#[test]
fn recipe_renders_round_trip_with_their_header() {
    let net = tiny(Some(BnWorld::Batch));
    for (opt, recipe) in reference_recipes() {
        let r = render_step(&net, 3, &opts(opt, recipe)).unwrap();
        let text = r.text();
        assert!(
            text.starts_with("// certgrad train-step recipe: "),
            "{text}"
        );
        let back = ir::parse::parse_module(&text, "recipe.mlir").unwrap();
        assert_eq!(
            ir::print::print_module(&back),
            ir::print::print_module(&r.module)
        );
    }
    let r = render_step(&net, 3, &opts(Optimizer::RmsProp, Recipe::default())).unwrap();
    assert!(r.header[1].contains("sqrt(s' + eps)"), "{:?}", r.header);
    assert!(r.header[2].contains("eps = 1,") && r.header[2].contains("wd = 0.00004"));
    // The plain steps of the original tails keep their header-less text.
    for opt in Optimizer::ALL {
        let r = render_step(&net, 3, &StepOptions::new(opt)).unwrap();
        assert!(r.header.is_empty());
        assert_eq!(r.text(), ir::print::print_module(&r.module));
    }
}

#[test]
fn rsb_a3_bce_divides_by_b_times_k() {
    // The BCE forward's divisor is B·K (the RSB-A3 artifact's 64000 =
    // 64·1000): at batch 3 and K = 4 the render holds the constant 12.
    let net = tiny(None);
    let so = opts(
        Optimizer::Lamb,
        Recipe {
            loss: Loss::Bce,
            ..Recipe::default()
        },
    );
    let text = render_step(&net, 3, &so).unwrap().text();
    assert!(text.contains("1.200000e+01"), "no B·K = 12 constant");
    assert!(text.contains("stablehlo.logistic"));
    assert!(matches!(certify(&net, &so).verdict, Verdict::Certified));
}
