//! ConvNeXt as a file and as a render: the shipped
//! `examples/nets/convnext-t.toml` IS the built-in `convnext-t` (same
//! NetSpec, same rendered step text); a ConvNeXt block field that cannot be
//! right is refused naming the file, line and field; and the drop-path
//! render adds exactly the keep inputs `dp{i} [B]` to the plain step, whose
//! text does not change without `--drop-path`.
//!
//! `CERTGRAD_WRITE_EXAMPLES=1 cargo test -p layers --test convnext_nets`
//! rewrites the file (what `certgrad nets convnext-t --write-file F` writes).

use layers::net::{by_name, NetSpec};
use layers::trainstep::{render_step, Optimizer, Recipe, SlotKind, StepOptions};
use std::path::PathBuf;

fn example() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../examples/nets/convnext-t.toml")
}

#[test]
fn the_shipped_file_is_the_built_in_net() {
    let net = by_name("convnext-t").unwrap();
    if std::env::var_os("CERTGRAD_WRITE_EXAMPLES").is_some() {
        net.write(&example()).unwrap();
    }
    let file = NetSpec::load(&example()).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(file, net);
    let mut small = file.clone();
    small.input = (3, 32, 32);
    let mut builtin = net.clone();
    builtin.input = (3, 32, 32);
    let opts = StepOptions::new(Optimizer::AdamW);
    let a = ir::print::print_module(&render_step(&small, 2, &opts).unwrap().module);
    let b = ir::print::print_module(&render_step(&builtin, 2, &opts).unwrap().module);
    assert!(a == b, "the file's step differs from the built-in's");
}

#[test]
fn a_convnext_field_that_cannot_be_right_is_named_with_its_line() {
    let text = std::fs::read_to_string(example()).unwrap();
    let bad = text.replacen("eps = 0.000001", "eps = 0.0", 1);
    let e = NetSpec::from_text(&bad, "c.toml").unwrap_err();
    eprintln!("{e}");
    assert!(e.to_string().contains("c.toml:"), "{e}");
    assert!(e.to_string().contains("eps"), "{e}");
    // An omitted convention is an error, not a default.
    let bad = text.replacen("layer_scale_init = 0.000001\n", "", 1);
    let e = NetSpec::from_text(&bad, "c.toml").unwrap_err();
    assert!(e.to_string().contains("layer_scale_init"), "{e}");
    let bad = text.replacen("act = \"gelu_tanh\"\n", "", 1);
    let e = NetSpec::from_text(&bad, "c.toml").unwrap_err();
    assert!(e.to_string().contains("act"), "{e}");
}

#[test]
fn the_drop_path_render_adds_the_keep_inputs_and_returns_them() {
    let mut net = by_name("convnext-t").unwrap();
    net.input = (3, 32, 32);
    let plain = render_step(&net, 3, &StepOptions::new(Optimizer::AdamW)).unwrap();
    let sd = StepOptions {
        recipe: Recipe {
            drop_path: Some(0.1),
            ..Recipe::default()
        },
        ..StepOptions::new(Optimizer::AdamW)
    };
    let r = render_step(&net, 3, &sd).unwrap();
    let extra: Vec<_> = r
        .signature
        .inputs
        .iter()
        .filter(|s| !plain.signature.inputs.contains(s))
        .collect();
    assert_eq!(extra.len(), 18);
    assert!(extra
        .iter()
        .enumerate()
        .all(|(i, s)| s.kind == SlotKind::DropPath
            && s.name == format!("dp{i}")
            && s.ty.shape == [3]));
    // The keeps come back unchanged after the plain step's outputs.
    let mut outputs = plain.signature.outputs.clone();
    outputs.extend(extra.iter().map(|s| (*s).clone()));
    assert_eq!(r.signature.outputs, outputs);
    assert!(r.text().contains("keep_i = 1 - 0.1*i/(blocks-1)"));
    // A rate outside [0, 1) names the flag.
    let bad = StepOptions {
        recipe: Recipe {
            drop_path: Some(1.0),
            ..Recipe::default()
        },
        ..StepOptions::new(Optimizer::AdamW)
    };
    let e = render_step(&net, 3, &bad).err().unwrap();
    assert!(e.0.contains("--drop-path"), "{e}");
}
