//! Measures the wall time of one update of the rendered train step (host
//! batching and EMA included, no train-accuracy forward) and of the eval
//! forward per batch: `cargo run --release -p train --example step_time --
//! [NET] [BATCH...]` (defaults: cifar8-bbn, 32 128) on the built-in data.

use std::time::Instant;
use train::{Session, TrainConfig};

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let net = args.first().cloned().unwrap_or_else(|| "cifar8-bbn".into());
    let batches: Vec<usize> = if args.len() > 1 {
        args[1..]
            .iter()
            .map(|a| a.parse().expect("a batch size"))
            .collect()
    } else {
        vec![32, 128]
    };
    for b in batches {
        for opt in ["nesterov", "adamw"] {
            let mut s = Session::new(TrainConfig {
                net: net.clone(),
                data: "builtin".into(),
                optimizer: opt.into(),
                epochs: 1,
                batch: b,
                lr: 0.01,
                warmup_epochs: 0.0,
                seed: 0,
                bf16: false,
                crop_pad: 0,
                flip: false,
                train_accuracy: false,
                checkpoint_every: 0,
                limit_train: None,
                limit_test: Some(b),
                replicas: 1,
                recipe: Default::default(),
            })
            .expect("session");
            s.train_step().expect("warm-up step");
            let n = 5;
            let t0 = Instant::now();
            for _ in 0..n {
                s.train_step().expect("step");
            }
            let step = t0.elapsed().as_secs_f64() / n as f64;
            let t0 = Instant::now();
            s.evaluate().expect("eval");
            let eval = t0.elapsed().as_secs_f64();
            println!(
                "{net} {opt} batch {b}: {:.3} s/update ({:.0} examples/s), eval forward {:.3} s/batch",
                step,
                b as f64 / step,
                eval
            );
        }
    }
}
