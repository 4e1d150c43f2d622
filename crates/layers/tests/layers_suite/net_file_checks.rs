//! Net files are checked before anything is built or allocated: each field
//! that cannot be right is rejected with the file, the line of the field and
//! the field's path and value (negative controls), beside the good twin,
//! `examples/nets/tiny-resnet.toml` itself, which is accepted with the
//! parameter count and batch norms counted by hand.

use layers::net::{NetSpec, SizeLimit};

fn example(name: &str) -> String {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../examples/nets/");
    std::fs::read_to_string(format!("{path}{name}")).unwrap()
}

/// The 1-based line of the `n`-th (0-based) occurrence of `needle`.
fn line_of(text: &str, needle: &str, n: usize) -> usize {
    let (at, _) = text
        .match_indices(needle)
        .nth(n)
        .unwrap_or_else(|| panic!("no {n}th {needle:?}"));
    text[..at].matches('\n').count() + 1
}

/// `text` with the `n`-th occurrence of `from` replaced by `to`.
fn replace_nth(text: &str, from: &str, n: usize, to: &str) -> String {
    let (at, _) = text.match_indices(from).nth(n).unwrap();
    format!("{}{to}{}", &text[..at], &text[at + from.len()..])
}

#[test]
fn the_good_twin_is_accepted_with_its_hand_counted_size() {
    let net = NetSpec::from_text(&example("tiny-resnet.toml"), "tiny-resnet.toml").unwrap();
    // stem conv 3→8 (216) + bn (16); block1 2×(576 + 16); block2 conv 8→16
    // s2 (1152) + bn (32) + conv 16→16 (2304) + bn (32) + skip 1×1 (128) +
    // bn (32); block3 2×(2304 + 32); fc 16→10 (170).
    assert_eq!(net.param_count().unwrap(), (26, 9938));
    // stem 1, block1 2, block2 3, block3 2.
    assert_eq!(net.bn_sites().unwrap().len(), 8);
    // Per-example activations: 8×16×16 ×4 (stem conv, bn, relu, block1),
    // 16×8×8 ×2 (block2, block3), gap 16, fc 10.
    assert_eq!(
        net.check_size(SizeLimit::both(1 << 20)).unwrap(),
        (9938, 10266)
    );
}

#[test]
fn each_bad_field_is_rejected_with_its_line_and_path() {
    let good = example("tiny-resnet.toml");
    // (what to replace, which occurrence, with what, the expected message).
    let cases: &[(&str, usize, &str, &str)] = &[
        ("out_ch = 8", 0, "out_ch = -4", "layers[0] (stem.conv): out_ch = -4: expected ≥ 1"),
        ("k = 3", 0, "k = 0", "layers[0] (stem.conv): k = 0: expected ≥ 1"),
        ("eps = 1e-5", 0, "eps = 0.0", "layers[1] (stem.bn): eps = 0: expected a finite ε > 0"),
        ("eps = 1e-5", 0, "eps = -1e-5", "layers[1] (stem.bn): eps = -0.00001: expected a finite ε > 0"),
        ("eps = 1e-5", 0, "eps = inf", "layers[1] (stem.bn): eps = inf: expected a finite ε > 0"),
        ("eps = 1e-5", 0, "eps = nan", "layers[1] (stem.bn): eps = NaN: expected a finite ε > 0"),
        // Inside nested blocks: the path names each level.
        ("stride = 1", 1, "stride = 0", "layers[3] (block1): main[0] (conv1): stride = 0: expected ≥ 1"),
        ("eps = 1e-5", 2, "eps = 0.0", "layers[3] (block1): main[4] (bn2): eps = 0: expected a finite ε > 0"),
        ("stride = 2", 0, "stride = -2", "layers[4] (block2): main[0] (conv1): stride = -2: expected ≥ 1"),
        ("out_ch = 16", 2, "out_ch = 0", "layers[4] (block2): shortcut[0] (conv): out_ch = 0: expected ≥ 1"),
        ("k = 1", 0, "k = 0", "layers[4] (block2): shortcut[0] (conv): k = 0: expected ≥ 1"),
        ("out_ch = 16", 3, "out_ch = 0", "layers[5] (block3): out_ch = 0: expected ≥ 1"),
        ("stride = 1\nproject", 0, "stride = 2\nproject", "layers[5] (block3): stride = 2: an identity skip (project = false) needs stride 1"),
        ("eps = 1e-5", 6, "eps = -1.0", "layers[5] (block3): eps = -1: expected a finite ε > 0"),
        ("out_f = 10", 0, "out_f = 0", "layers[7] (fc): out_f = 0: expected ≥ 1"),
        ("classes = 10", 0, "classes = 0", "classes = 0: expected ≥ 1"),
        ("label_smoothing = \"none\"", 0, "label_smoothing = 1.0", "label_smoothing = 1: expected α in [0, 1) or \"none\""),
        ("label_smoothing = \"none\"", 0, "label_smoothing = -0.1", "label_smoothing = -0.1: expected α in [0, 1) or \"none\""),
        ("input = [3, 16, 16]", 0, "input = [3, 0, 16]", "input = [3, 0, 16]: expected [C, H, W], each ≥ 1 (entry 1 is 0)"),
        ("name = \"mid_relu\"", 0, "name = \"conv1\"", "layers[3] (block1): main[2] (conv1): name = \"conv1\": the name is used twice in `main`"),
    ];
    for &(from, n, to, want) in cases {
        let bad = replace_nth(&good, from, n, to);
        let e = NetSpec::from_text(&bad, "nets.toml").unwrap_err();
        // Replacements keep the line count: the field is where `from` was.
        let line = line_of(&good, from, n);
        assert_eq!(e.to_string(), format!("nets.toml:{line}: {want}"), "{to}");
    }
    // The same checks in a JSON file, with its line.
    let net = NetSpec::from_text(&good, "tiny-resnet.toml").unwrap();
    let json = net.to_text(layers::net::NetFormat::Json).unwrap();
    let bad = replace_nth(&json, "\"stride\": 2", 0, "\"stride\": 0");
    let e = NetSpec::from_text(&bad, "nets.json").unwrap_err();
    assert_eq!(
        e.to_string(),
        format!(
            "nets.json:{}: layers[4] (block2): main[0] (conv1): stride = 0: expected ≥ 1",
            line_of(&bad, "\"stride\": 0", 0)
        )
    );
}

#[test]
fn pool_geometry_is_checked_before_the_build() {
    let good = example("tiny.toml");
    for (from, to, want) in [
        (
            "window = 2",
            "window = 0",
            "layers[2] (stage1.pool): window = 0: expected ≥ 1",
        ),
        (
            "pad = 0",
            "pad = -1",
            "layers[2] (stage1.pool): pad = -1: expected ≥ 0",
        ),
        (
            "pad = 1",
            "pad = 3",
            "layers[6] (stage2.pool): pad = 3: expected < window (3)",
        ),
    ] {
        let bad = replace_nth(&good, from, 0, to);
        let e = NetSpec::from_text(&bad, "t.toml").unwrap_err();
        assert_eq!(
            e.to_string(),
            format!("t.toml:{}: {want}", line_of(&bad, to, 0))
        );
    }
}

#[test]
fn a_spatial_size_that_reaches_zero_is_refused_at_its_layer() {
    // 4×4 → stage1's 2×2/s2 pool → 2×2; stage2's 3×3 pool without padding
    // has no full window left: its output would be empty.
    let good = example("tiny.toml");
    let bad = replace_nth(&good, "input = [3, 8, 8]", 0, "input = [3, 4, 4]");
    let bad = replace_nth(&bad, "pad = 1", 0, "pad = 0");
    let e = NetSpec::from_text(&bad, "t.toml").unwrap_err();
    assert!(e.message.contains("stage2.pool"), "{e}");
    assert_eq!(
        e.at,
        format!("t.toml:{}", line_of(&bad, "\"stage2.pool\"", 0))
    );
    // Its twin at 8×8 is the accepted example.
    assert!(NetSpec::from_text(&good, "t.toml").is_ok());
}

#[test]
fn the_size_limit_is_stated_and_enforced() {
    let text = example("tiny-resnet.toml");
    let at = |params, activations| {
        NetSpec::from_text_with(
            &text,
            "n.toml",
            SizeLimit {
                params,
                activations,
            },
        )
    };
    assert!(at(9938, 10266).is_ok());
    let e = at(9937, 10266).unwrap_err();
    assert!(
        e.message
            .contains("9938 parameter floats exceed the limit of 9937")
            && e.message.contains("CERTGRAD_MAX_FLOATS"),
        "{e}"
    );
    let e = at(9938, 10265).unwrap_err();
    assert!(
        e.message.contains("10266 per-example activation floats"),
        "{e}"
    );
    assert_eq!(SizeLimit::parse("1_000").unwrap(), SizeLimit::both(1000));
    assert!(SizeLimit::parse("-3")
        .unwrap_err()
        .contains("CERTGRAD_MAX_FLOATS"));
    assert_eq!(SizeLimit::DEFAULT, 1 << 28);
    // ResNet-50 at 224² fits the default (docs/nets.md §3: 25,557,032 at K = 1000).
    let r50 = layers::net::by_name("resnet50-k1000").unwrap();
    assert_eq!(
        r50.check_size(SizeLimit::both(SizeLimit::DEFAULT))
            .unwrap()
            .0,
        25_557_032
    );
}
