//! Test support shared by cert's test files: the small every-layer-kind net
//! of the step ties and the refuted block of a tie report.
#![allow(dead_code)] // each test file uses a different part

use cert::{TieReport, Verdict};
use layers::net::NetSpec;
use layers::ops::norm::BnWorld;

/// A small net with every layer kind of the cifar8 family, with a batch norm
/// in `bn`'s world after the conv (declared as data, so it follows NetSpec's
/// defaults).
pub fn tiny(bn: Option<BnWorld>) -> NetSpec {
    let bn = match bn {
        None => String::new(),
        Some(w) => {
            let world = match w {
                BnWorld::PerExample => "per_example",
                BnWorld::Batch => "batch",
                BnWorld::Eval => "eval",
            };
            format!(
                "[[layers]]\nname = \"bn\"\nop = \"batch_norm\"\nworld = \"{world}\"\neps = 1e-5\n"
            )
        }
    };
    let text = format!(
        r#"name = "tiny"
input = [2, 4, 4]
classes = 4
[[layers]]
name = "conv"
op = "conv2d"
k = 3
stride = 1
padding = "symmetric"
out_ch = 3
bias = true
{bn}
[[layers]]
name = "pool"
op = "max_pool"
window = 2
stride = 2
pad = 0
[[layers]]
name = "relu"
op = "relu"
[[layers]]
name = "flatten"
op = "flatten"
[[layers]]
name = "dense"
op = "dense"
out_f = 4
bias = true
"#
    );
    NetSpec::from_text(&text, "tiny.toml").unwrap()
}

/// The block a refutation of `what` names, or a panic naming what came back
/// instead.
pub fn refuted_in(verdict: &Verdict, what: &str) -> String {
    match verdict {
        Verdict::Refuted { block, detail } => {
            eprintln!("{what} refuted in {block}: {detail}");
            block.clone()
        }
        v => panic!("{what}: expected a refutation, got {v:?}"),
    }
}

/// The block a layer tie's refutation names.
pub fn refuted_block(r: &TieReport) -> String {
    refuted_in(&r.verdict, &r.layer)
}
