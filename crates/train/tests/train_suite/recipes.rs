//! The host loop under a recipe: the state slots and host scalars a recipe
//! adds are fed and taken back as docs/conventions.md §16 says — RMSProp's mean square
//! starts at 1, the EMA shadow starts at θ and follows θ' with the warmed-up
//! decay, accumulation leaves θ, m, v untouched until the cycle's last
//! micro-batch — every new tail learns the tiny task, and a recipe run
//! checkpoints and resumes with its extra state; evaluation scores the EMA
//! shadow, not θ.

use crate::common::*;
use train::{run, RecipeConfig, RunOptions, Session};

fn quiet() -> RunOptions<'static> {
    RunOptions {
        progress: false,
        after_step: None,
        after_epoch: None,
    }
}

fn session(tag: &str, optimizer: &str, lr: f64, recipe: RecipeConfig) -> Session {
    let d = temp_dir(tag);
    write_quadrant_idx(&d, 48, 16);
    let mut cfg = tiny_config(&d);
    cfg.optimizer = optimizer.into();
    cfg.lr = lr;
    cfg.recipe = recipe;
    Session::new(cfg).unwrap()
}

#[test]
fn rmsprop_mean_square_starts_at_one() {
    let s = session("rms-init", "rmsprop", 0.01, RecipeConfig::default());
    assert!(s.state.v.iter().flatten().all(|&x| x == 1.0));
    assert!(s.state.m.iter().flatten().all(|&x| x == 0.0));
    assert_eq!(s.step.signature.func, "tiny_bbn_rms_train_step");
}

#[test]
fn ema_shadow_starts_at_theta_and_follows_theta_prime() {
    let mut s = session(
        "ema",
        "adamw",
        1e-2,
        RecipeConfig {
            ema: Some(0.9999),
            ..Default::default()
        },
    );
    assert_eq!(s.state.shadow, s.state.params);
    let mut prev_shadow = s.state.shadow.clone();
    for update in 0..3u32 {
        s.train_step().unwrap();
        // d = min(0.9999, (1+t')/(10+t')) at the 0-based update t'.
        let t = update as f64;
        let d = ((1.0 + t) / (10.0 + t)) as f32;
        for (b, (sh, th)) in s.state.shadow.iter().zip(&s.state.params).enumerate() {
            for (i, (&x, &p)) in sh.iter().zip(th).enumerate() {
                let want = d * prev_shadow[b][i] + (1.0 - d) * p;
                assert!(
                    (x - want).abs() <= 1e-6 * (1.0 + want.abs()),
                    "update {update}, tensor {b}[{i}]: shadow {x}, d·s + (1−d)·θ' = {want}"
                );
            }
        }
        prev_shadow = s.state.shadow.clone();
    }
}

#[test]
fn accumulation_updates_once_per_cycle() {
    let mut s = session(
        "acc",
        "lamb",
        8e-3,
        RecipeConfig {
            accumulate: Some(3),
            loss: Some("bce".into()),
            ..Default::default()
        },
    );
    assert_eq!(s.step.signature.func, "tiny_bbn_lambacc3bce_train_step");
    for cycle in 0..2 {
        let (th, m, v) = (s.state.params.clone(), s.state.m.clone(), s.state.v.clone());
        for micro in 0..3 {
            s.train_step().unwrap();
            let moved = s.state.params != th;
            assert_eq!(
                moved,
                micro == 2,
                "cycle {cycle}, micro-batch {micro}: θ moved {moved}"
            );
            assert_eq!(s.state.m != m, micro == 2);
            assert_eq!(s.state.v != v, micro == 2);
        }
    }
}

/// Each new tail, and the ViT-style AdamW recipe, learns the quadrant task
/// (a quarter of the loss gone in 4 epochs) and scores above chance.
#[test]
fn every_new_recipe_learns_the_tiny_task() {
    for (tag, opt, lr, recipe) in [
        ("l-rms", "rmsprop", 0.01, RecipeConfig::default()),
        (
            "l-lamb",
            "lamb",
            2e-2,
            RecipeConfig {
                loss: Some("bce".into()),
                ..Default::default()
            },
        ),
        (
            "l-vit",
            "adamw",
            1e-2,
            RecipeConfig {
                clip: Some(1.0),
                wd_exclude: Some("norm,bias".into()),
                ema: Some(0.9),
                ..Default::default()
            },
        ),
    ] {
        let mut s = session(tag, opt, lr, recipe);
        s.cfg.epochs = 4;
        let out = temp_dir(tag).join("run");
        let sum = run(&mut s, &out, None, quiet()).unwrap();
        let (first, last) = (&sum.epochs[0], sum.epochs.last().unwrap());
        assert!(
            last.train_loss < 0.75 * first.train_loss,
            "{tag}: {:?}",
            sum.epochs
        );
        assert!(last.test_acc > 0.5, "{tag}: {:?}", sum.epochs);
        let report = s.certify(2).unwrap();
        assert!(report.certified(), "{tag}: {:?}", report.verdict);
    }
}

#[test]
fn a_recipe_run_resumes_with_its_shadow_and_accumulator() {
    let recipe = RecipeConfig {
        ema: Some(0.999),
        accumulate: Some(2),
        ..Default::default()
    };
    let mut s = session("resume", "rmsprop", 0.01, recipe);
    for _ in 0..3 {
        s.train_step().unwrap();
    }
    let ck = s.to_checkpoint(0).unwrap();
    assert!(ck.tensors.keys().any(|k| k.ends_with(".ema")));
    assert!(ck.tensors.keys().any(|k| k.ends_with(".acc")));
    let mut back = Session::from_checkpoint(&ck, "ck").unwrap();
    assert_eq!(back.state, s.state);
    s.train_step().unwrap();
    back.train_step().unwrap();
    assert_eq!(back.state.params, s.state.params);
    assert_eq!(back.state.shadow, s.state.shadow);
}

/// Evaluation under `ema` — the training loop's, and `certgrad eval`'s after
/// a checkpoint round trip — scores the shadow, not θ: with θ zeroed the
/// score is unchanged; with the shadow zeroed every logit is 0 (zero
/// kernels, BN γ, β and biases), one class takes every test example, and the
/// balanced 4-class test set scores exactly 1/4.
#[test]
fn evaluation_scores_the_ema_shadow_not_theta() {
    let recipe = RecipeConfig {
        ema: Some(0.9),
        ..Default::default()
    };
    let mut s = session("evalema", "adamw", 1e-2, recipe);
    let out = temp_dir("evalema-run").join("run");
    run(&mut s, &out, None, quiet()).unwrap();
    let acc = s.evaluate().unwrap();
    assert!(acc > 0.25, "the shadow learned nothing: {acc}");
    let zero = |ts: &mut Vec<Vec<f32>>| ts.iter_mut().for_each(|t| t.fill(0.0));
    let (theta, shadow) = (s.state.params.clone(), s.state.shadow.clone());
    zero(&mut s.state.params);
    assert_eq!(s.evaluate().unwrap(), acc, "θ zeroed changed the score");
    s.state.params = theta;
    zero(&mut s.state.shadow);
    assert_eq!(
        s.evaluate().unwrap(),
        0.25,
        "a zero shadow should tie every logit"
    );
    s.state.shadow = shadow;
    let mut back = Session::from_checkpoint(&s.to_checkpoint(0).unwrap(), "ck").unwrap();
    zero(&mut back.state.params);
    assert_eq!(back.evaluate().unwrap(), acc, "the resumed session's score");
}

/// Training smoke of ConvNeXt-T at 32² on a fixed batch: 8
/// examples of the embedded Fashion-MNIST subset (1 channel, padded 28 →
/// 32), no augmentation, so every update sees the same batch; with
/// stochastic depth the host draws the 18 keep inputs each step. The loss
/// falls.
#[test]
fn convnext_t_loss_falls_on_a_fixed_batch_with_drop_path() {
    let cfg = train::TrainConfig {
        net: "convnext-t-k10-32x32".into(),
        data: "builtin".into(),
        epochs: 12,
        batch: 8,
        lr: 1e-3,
        warmup_epochs: 0.0,
        crop_pad: 0,
        flip: false,
        train_accuracy: false,
        limit_train: Some(8),
        limit_test: Some(8),
        checkpoint_every: 1000,
        recipe: RecipeConfig {
            drop_path: Some(0.1),
            ..Default::default()
        },
        ..tiny_config(&temp_dir("convnext-smoke"))
    };
    let dir = temp_dir("convnext-smoke-run");
    let mut s = Session::new(cfg).unwrap();
    assert_eq!(
        s.step.signature.func,
        "convnext_t_k10_32x32_adamsd_train_step"
    );
    // One update an epoch (8 examples, batch 8): the run loop's epochs.
    let mut losses = Vec::new();
    let mut hook = |r: &train::StepRecord| losses.push(r.loss);
    run(
        &mut s,
        &dir,
        None,
        RunOptions {
            progress: false,
            after_step: Some(&mut hook),
            after_epoch: None,
        },
    )
    .unwrap();
    assert_eq!(losses.len(), 12);
    eprintln!("convnext-t 32² fixed-batch losses: {losses:?}");
    assert!(losses.iter().all(|l| l.is_finite()));
    let first = losses[0];
    let last = losses[9..].iter().sum::<f64>() / 3.0;
    assert!(last < 0.5 * first, "loss {first} → {last}");
}
