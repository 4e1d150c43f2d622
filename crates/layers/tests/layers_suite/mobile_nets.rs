//! The depthwise family as files: the shipped
//! `examples/nets/{mobilenetv2,efficientnet-b0,mobilenetv4-conv-m}.toml` ARE
//! the built-in nets (same NetSpec, same rendered step text), and a file's
//! depthwise block with a field that cannot be right is refused before
//! anything is built, naming the file, line and field.
//!
//! `CERTGRAD_WRITE_EXAMPLES=1 cargo test -p layers --test layers_suite mobile_nets`
//! rewrites the files (what `certgrad nets NET --write-file F` writes).

use layers::net::{by_name, NetSpec};
use layers::trainstep::{render_step, Optimizer, StepOptions};
use std::path::PathBuf;

const NETS: [&str; 3] = ["mobilenetv2", "efficientnet-b0", "mobilenetv4-conv-m"];

fn example(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../examples/nets")
        .join(format!("{name}.toml"))
}

#[test]
fn the_shipped_files_are_the_built_in_nets() {
    for name in NETS {
        let net = by_name(name).unwrap();
        if std::env::var_os("CERTGRAD_WRITE_EXAMPLES").is_some() {
            net.write(&example(name)).unwrap();
        }
        let file = NetSpec::load(&example(name)).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(file, net, "{name}");
        // At a small size the step text is the same byte for byte.
        let mut small = file.clone();
        small.input = (3, 32, 32);
        let mut builtin = net.clone();
        builtin.input = (3, 32, 32);
        let opts = StepOptions::new(Optimizer::AdamW);
        let a = ir::print::print_module(&render_step(&small, 2, &opts).unwrap().module);
        let b = ir::print::print_module(&render_step(&builtin, 2, &opts).unwrap().module);
        assert!(
            a == b,
            "{name}: the file's step differs from the built-in's"
        );
    }
}

#[test]
fn a_depthwise_block_field_that_cannot_be_right_is_named_with_its_line() {
    let text = std::fs::read_to_string(example("mobilenetv4-conv-m")).unwrap();
    // blocks.9 is the first FFN UIB (pre_dw_k = post_dw_k = 0): a stride
    // there has no depthwise conv to take it.
    let at = text
        .find("name = \"blocks.9\"")
        .expect("blocks.9 in the file");
    let (head, tail) = text.split_at(at);
    let bad = format!("{head}{}", tail.replacen("stride = 1", "stride = 2", 1));
    let e = NetSpec::from_text(&bad, "m.toml").unwrap_err();
    eprintln!("{e}");
    assert!(e.to_string().contains("m.toml:"), "{e}");
    assert!(e.to_string().contains("stride"), "{e}");
    // ε ≤ 0 in a block.
    let bad = text.replacen("eps = 0.00001", "eps = 0.0", 1);
    let e = NetSpec::from_text(&bad, "m.toml").unwrap_err();
    assert!(e.to_string().contains("eps"), "{e}");
    // An omitted convention is an error, not a default.
    let bad = text.replacen("act = \"relu\"\n", "", 1);
    let e = NetSpec::from_text(&bad, "m.toml").unwrap_err();
    assert!(e.to_string().contains("act"), "{e}");
}
