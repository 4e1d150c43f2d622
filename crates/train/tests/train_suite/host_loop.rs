//! The host loop on a tiny net: it trains with the rendered step (and learns),
//! the certification gate rejects a mis-wired step, the running-BN EMA follows
//! the step's batch-stat outputs, checkpoints round-trip, and corrupt, torn or
//! wrong-net checkpoints are refused without being touched.

use crate::common::*;
use engines::select::EngineOptions;
use layers::trainstep::SlotKind;
use train::{checkpoint_path, read_epochs, run, Checkpoint, RunOptions, Session};

fn quiet() -> RunOptions<'static> {
    RunOptions {
        progress: false,
        after_step: None,
        after_epoch: None,
    }
}

#[test]
fn tiny_net_learns_with_the_rendered_step() {
    let d = temp_dir("learn");
    write_quadrant_idx(&d, 48, 16);
    let mut cfg = tiny_config(&d);
    cfg.epochs = 4;
    let mut s = Session::new(cfg).unwrap();
    assert_eq!(s.net.input, (1, 8, 8), "input channels follow the data");
    let before = s.evaluate().unwrap();
    let out = d.join("run");
    let sum = run(&mut s, &out, None, quiet()).unwrap();
    assert_eq!(sum.steps, 48);
    assert_eq!(sum.epochs.len(), 4);
    let last = sum.epochs.last().unwrap();
    assert!(
        last.train_loss < 0.8 * sum.epochs[0].train_loss,
        "{:?}",
        sum.epochs
    );
    assert!(
        last.test_acc >= 0.75,
        "test accuracy {} (before {before})",
        last.test_acc
    );
    let png = out.join("plot.png");
    train::plot::plot_run(&sum.epochs, "tiny", &png).unwrap();
    let bytes = std::fs::read(&png).unwrap();
    assert!(bytes.starts_with(b"\x89PNG") && bytes.len() > 5000);
}

/// ViT's training smoke: a narrow ViT-Tiny (the paper's 12
/// pre-norm blocks and 200 tensors at width 12, patch 4 on the 8×8 images:
/// 4 patches + CLS) trained by its rendered, certified AdamW step on one
/// fixed batch of 4 (one update an epoch, no augmentation) memorises it: the
/// loss falls.
#[test]
fn narrow_vit_loss_falls_on_a_fixed_batch() {
    let d = temp_dir("vit");
    write_quadrant_idx(&d, 4, 4);
    let mut cfg = tiny_config(&d);
    cfg.net = "vit-tiny-w12-k10-8x8-p4".into();
    cfg.epochs = 12;
    cfg.lr = 3e-3;
    cfg.warmup_epochs = 0.0;
    cfg.crop_pad = 0;
    cfg.flip = false;
    cfg.checkpoint_every = 0;
    let mut s = Session::new(cfg).unwrap();
    assert_eq!(s.net.param_count().unwrap().0, 200);
    let sum = run(&mut s, &d.join("run"), None, quiet()).unwrap();
    assert_eq!(sum.steps, 12, "one update an epoch");
    let losses: Vec<f64> = sum.epochs.iter().map(|e| e.train_loss).collect();
    eprintln!("vit fixed-batch losses {losses:?}");
    let (first, last) = (losses[0], *losses.last().unwrap());
    assert!(last.is_finite() && last < 0.5 * first, "{losses:?}");
}

/// Negative control for the pre-training gate: swap the returned θ' of two
/// same-shaped parameters (a shape-preserving wiring bug) in the very module
/// the session trains with; the certifier refutes it.
#[test]
fn certification_gate_rejects_a_miswired_step() {
    let d = temp_dir("gate");
    write_quadrant_idx(&d, 8, 4);
    let mut s = Session::new(tiny_config(&d)).unwrap();
    let good = s.certify(s.cfg.batch).unwrap();
    assert!(good.certified(), "{:?}", good.verdict);
    let params = s.step.signature.output_positions(SlotKind::Param);
    let (i, j) = params
        .iter()
        .flat_map(|&i| params.iter().map(move |&j| (i, j)))
        .find(|&(i, j)| {
            let outs = &s.step.signature.outputs;
            i < j && outs[i].ty == outs[j].ty
        })
        .expect("two parameters of one shape");
    let f = &mut s.step.module.funcs[0];
    f.body.ops.last_mut().unwrap().operands.swap(i, j);
    ir::verify_module(&s.step.module).unwrap();
    let bad = s.certify(s.cfg.batch).unwrap();
    assert!(!bad.certified(), "a swapped update certified");
    assert!(
        matches!(bad.verdict, cert::Verdict::Refuted { .. }),
        "{:?}",
        bad.verdict
    );
}

/// The first `multiply` of the step's backward (the ops after the forward)
/// becomes an `add`: a shape-preserving bug in the trained module only (a
/// fresh render of the same net is correct).
fn plant_backward_bug(s: &mut Session) {
    let start = s.step.forward_ops;
    let f = &mut s.step.module.funcs[0];
    let op = f.body.ops[start..]
        .iter_mut()
        .find(|op| op.kind == ir::OpKind::Binary(ir::BinaryOp::Multiply))
        .expect("a multiply in the backward");
    op.kind = ir::OpKind::Binary(ir::BinaryOp::Add);
    ir::verify_module(&s.step.module).unwrap();
}

/// `certgrad train`'s default certificate is of the module object the session
/// executes: the batch-2 twin times it, then the step at the training batch is
/// tied. A bug planted in that module's backward passes the (freshly
/// rendered) twin and is REFUTED by the default, so the run may not train;
/// with a budget the twin says is too small, the twin is what is certified
/// and the subject line says the trained module was not.
#[test]
fn the_default_certificate_is_of_the_trained_module() {
    use train::{CertifyBudget, CertifyChoice, Subject};
    let d = temp_dir("certify-default");
    write_quadrant_idx(&d, 16, 4);
    let mut cfg = tiny_config(&d);
    cfg.batch = 8;
    let mut s = Session::new(cfg).unwrap();
    let budget = CertifyBudget::default();
    let good = s
        .certify_for_training(CertifyChoice::Default, budget)
        .unwrap();
    assert_eq!(good.subject, Subject::TrainedModule);
    assert_eq!(good.report.batch, 8, "the training batch");
    assert!(good.certified(), "{:?}", good.report.verdict);
    assert_eq!(good.twins.len(), 1, "the batch-2 twin timed it");
    assert_eq!(good.twins[0].batch, 2);
    let e = good.estimate.unwrap();
    assert!(e.fits() && e.seconds > 0.0, "{e:?}");
    assert!(good
        .subject_line(8)
        .starts_with("certified the trained module"));

    // Too small a budget: the batch-4 twin refines the estimate, still over
    // budget, so the batch-4 twin is the certificate, and it says so.
    let tight = CertifyBudget {
        seconds: 0.0,
        bytes: None,
    };
    let twin = s
        .certify_for_training(CertifyChoice::Default, tight)
        .unwrap();
    assert_eq!(twin.subject, Subject::Twin { batch: 4 });
    assert!(twin.certified());
    let line = twin.subject_line(8);
    assert!(line.contains("NOT the trained module"), "{line}");
    assert!(line.contains("--certify-batch 8"), "{line}");

    plant_backward_bug(&mut s);
    let bad = s
        .certify_for_training(CertifyChoice::Default, budget)
        .unwrap();
    assert!(bad.twins[0].certified(), "the fresh twin is correct");
    assert_eq!(bad.subject, Subject::TrainedModule);
    assert!(
        matches!(bad.report.verdict, cert::Verdict::Refuted { .. }),
        "{:?}",
        bad.report.verdict
    );
    assert!(!bad.certified(), "a run with the planted bug may not train");
    // An explicit --certify-batch at the training batch is the same object.
    let explicit = s
        .certify_for_training(CertifyChoice::Batch(8), budget)
        .unwrap();
    assert!(!explicit.certified() && explicit.twins.is_empty());
}

/// Each function is rendered once and kept with what its render returned:
/// the signature every part of the run reads is the one the module came
/// with, and a session moved to another engine reuses all of it (and takes
/// the same update from the same state).
#[test]
fn one_render_of_each_function_serves_the_run() {
    let d = temp_dir("render-once");
    write_quadrant_idx(&d, 8, 4);
    let mut s = Session::new(tiny_config(&d)).unwrap();
    let logits = s.train_logits.as_ref().expect("train accuracy is on");
    for r in [&s.step, &s.eval, logits] {
        assert_eq!(r.func().params.len(), r.signature.inputs.len());
        assert_eq!(r.func().results.len(), r.signature.outputs.len());
        assert!(!r.spans.is_empty(), "{}: no layer spans", r.signature.func);
    }
    assert_eq!(s.param_count(), s.net.param_count().unwrap());
    let mut moved = s.on_engine(EngineOptions::native()).unwrap();
    assert_eq!(moved.step.module, s.step.module);
    assert_eq!(moved.eval.module, s.eval.module);
    assert_eq!(moved.state, s.state);
    assert_eq!(moved.train_step().unwrap(), s.train_step().unwrap());
    assert_eq!(moved.state, s.state);
}

#[test]
fn running_statistics_follow_the_step_batch_stats() {
    let d = temp_dir("ema");
    write_quadrant_idx(&d, 16, 4);
    let mut s = Session::new(tiny_config(&d)).unwrap();
    assert_eq!(s.state.running.len(), 2);
    assert!(s.state.running[0].1.iter().all(|&v| v == 1.0));
    s.train_step().unwrap();
    // After update 1 (momentum 1.0) the running stats ARE a batch's stats:
    // variances positive, means not the initial zeros.
    let first = s.state.running.clone();
    assert!(first[0].0.iter().any(|&m| m != 0.0));
    assert!(first.iter().all(|(_, v)| v.iter().all(|&x| x > 0.0)));
    s.train_step().unwrap();
    // Update 2 moves them by momentum 0.1: at most 10% of the way.
    let second = &s.state.running;
    let moved: f32 = first[0]
        .0
        .iter()
        .zip(&second[0].0)
        .map(|(a, b)| (a - b).abs())
        .sum();
    assert!(moved > 0.0);
    // The eval forward reads the running stats: perturbing them changes logits.
    let acc = s.evaluate().unwrap();
    assert!((0.0..=1.0).contains(&acc));
}

#[test]
fn checkpoint_round_trips_the_whole_state() {
    let d = temp_dir("ck");
    write_quadrant_idx(&d, 16, 4);
    let mut s = Session::new(tiny_config(&d)).unwrap();
    for _ in 0..3 {
        s.train_step().unwrap();
    }
    let ck = s.to_checkpoint(123).unwrap();
    let bytes = ck.to_bytes().unwrap();
    let back = Checkpoint::from_bytes(&bytes, "mem").unwrap();
    assert_eq!(back, {
        let mut c = ck.clone();
        c.meta
            .insert("format".into(), train::checkpoint::FORMAT.into());
        c
    });
    let mut fresh = Session::new(tiny_config(&d)).unwrap();
    assert_ne!(fresh.state, s.state);
    fresh.restore(&back, "mem").unwrap();
    assert_eq!(fresh.state, s.state);
}

#[test]
fn corrupt_truncated_and_wrong_net_checkpoints_are_refused_untouched() {
    let d = temp_dir("bad");
    write_quadrant_idx(&d, 16, 4);
    let mut cfg = tiny_config(&d);
    cfg.epochs = 1;
    let out = d.join("run");
    let mut s = Session::new(cfg.clone()).unwrap();
    run(&mut s, &out, None, quiet()).unwrap();
    let ck = checkpoint_path(&out);
    let good = std::fs::read(&ck).unwrap();

    // Truncated.
    std::fs::write(&ck, &good[..good.len() / 2]).unwrap();
    let e = train::resume(&out).err().expect("a torn checkpoint loads");
    assert!(e.message().contains("not a usable checkpoint"), "{e}");
    assert!(matches!(e, train::TrainError::Checkpoint(_)), "{e:?}");
    assert_eq!(std::fs::read(&ck).unwrap(), &good[..good.len() / 2]);
    // Garbage.
    std::fs::write(&ck, b"\x08\0\0\0\0\0\0\0{}").unwrap();
    assert!(train::resume(&out).is_err());

    // Wrong net: same file layout, different widths (stage2.conv out_ch 6).
    std::fs::write(&ck, &good).unwrap();
    let text = std::fs::read_to_string(tiny_net()).unwrap();
    let other = d.join("other.toml");
    std::fs::write(&other, text.replace("out_ch = 8", "out_ch = 6")).unwrap();
    let mut ocfg = cfg.clone();
    ocfg.net = other.display().to_string();
    let mut o = Session::new(ocfg).unwrap();
    let e = o
        .restore(&Checkpoint::read(&ck).unwrap(), "ck")
        .expect_err("a checkpoint of another net restored");
    assert!(e.message().contains("shape"), "{e}");
    assert!(matches!(e, train::TrainError::Checkpoint(_)), "{e:?}");
    // A renamed net is caught by name.
    std::fs::write(&other, text.replace("tiny-bbn", "tiny-other")).unwrap();
    let mut o = Session::new({
        let mut c = cfg.clone();
        c.net = other.display().to_string();
        c
    })
    .unwrap();
    let e = o
        .restore(&Checkpoint::read(&ck).unwrap(), "ck")
        .unwrap_err();
    assert!(e.message().contains("not `tiny-other`"), "{e}");
    assert_eq!(
        std::fs::read(&ck).unwrap(),
        good,
        "the checkpoint was touched"
    );
    assert_eq!(read_epochs(&out.join("metrics.jsonl")).unwrap().len(), 1);
}
