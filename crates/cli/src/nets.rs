//! `certgrad nets`: list the built-in nets (or one net, by name or file) with
//! their input shape, BN world and parameter layout size, all derived from
//! the NetSpec; `--write-file` writes a net as a TOML or JSON net file.

use anyhow::{anyhow, bail, Result};
use layers::net::{catalog, resolve, NetSpec};
use std::path::Path;

/// The name column fits the longest built-in name (`mobilenetv4-conv-m-k1000`).
const NAME_WIDTH: usize = 24;

/// One table row: name, input C×H×W, classes, BN world, layers, tensors, floats.
fn row(net: &NetSpec) -> Result<String> {
    let (tensors, floats) = net.param_count().map_err(|e| anyhow!("{e}"))?;
    let (c, h, w) = net.input;
    Ok(format!(
        "{:<w$} {:>10} {:>7} {:<11} {:>6} {:>7} {:>10}",
        net.name,
        format!("{c}×{h}×{w}"),
        net.classes,
        net.bn_world()
            .map_or("none".to_string(), |w| format!("{w:?}")),
        net.layers.len(),
        tensors,
        group_thousands(floats),
        w = NAME_WIDTH
    ))
}

/// `52858` → `52,858`.
fn group_thousands(n: i64) -> String {
    let digits = n.to_string();
    let mut out = String::new();
    // A comma before every digit with a multiple of three digits after it.
    let mut after = digits.len();
    for ch in digits.chars() {
        if after != digits.len() && after / 3 * 3 == after {
            out.push(',');
        }
        out.push(ch);
        after -= 1;
    }
    out
}

/// The table of `net` (a built-in name or a net file, through the one
/// resolver) or of every built-in; with `write_file`, `net` is also written
/// there as a net file.
pub fn nets(net: Option<&str>, write_file: Option<&Path>) -> Result<()> {
    let one = net.map(resolve).transpose().map_err(|e| anyhow!("{e}"))?;
    if let Some(path) = write_file {
        let Some(net) = &one else {
            bail!("--write-file needs the net to write: `certgrad nets NET --write-file F.toml`");
        };
        net.write(path).map_err(|e| anyhow!("{e}"))?;
        eprintln!("wrote {} to {}", net.name, path.display());
    }
    println!(
        "{:<w$} {:>10} {:>7} {:<11} {:>6} {:>7} {:>10}",
        "net",
        "input",
        "classes",
        "BN world",
        "layers",
        "tensors",
        "floats",
        w = NAME_WIDTH
    );
    match one {
        Some(net) => println!("{}", row(&net)?),
        None => {
            for net in catalog() {
                println!("{}", row(&net)?);
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rows_show_the_reference_parameter_counts() {
        let r = row(&layers::net::by_name("cifar8").unwrap()).unwrap();
        assert!(
            r.contains("3×32×32") && r.contains(" 22 ") && r.ends_with("52,858"),
            "{r}"
        );
        let r = row(&layers::net::by_name("cifar8w").unwrap()).unwrap();
        assert!(r.ends_with("373,626"), "{r}");
        let r = row(&layers::net::by_name("cifar8-bbn").unwrap()).unwrap();
        assert!(r.contains("Batch") && r.contains(" 38 "), "{r}");
        assert_eq!(group_thousands(999), "999");
        // docs/nets.md §3: the exact ResNet counts.
        for (net, tensors, floats) in [
            ("resnet34", " 110 ", "21,289,802"),
            ("resnet50", " 161 ", "23,528,522"),
            ("resnet50-k1000", " 161 ", "25,557,032"),
        ] {
            let r = row(&layers::net::by_name(net).unwrap()).unwrap();
            assert!(
                r.starts_with(&format!("{net} ")) && r.contains(tensors) && r.ends_with(floats),
                "{r}"
            );
            assert!(r.contains("3×224×224") && r.contains("Batch"), "{r}");
        }
        assert_eq!(group_thousands(1000), "1,000");
    }

    #[test]
    fn write_file_writes_a_net_that_resolves_back_to_itself() {
        let dir = std::env::temp_dir();
        for ext in ["toml", "json"] {
            let out = dir.join(format!("certgrad-nets-{}.{ext}", std::process::id()));
            nets(Some("resnet50-k1000"), Some(&out)).unwrap();
            let back = resolve(&out.display().to_string()).unwrap();
            std::fs::remove_file(&out).ok();
            assert_eq!(back, layers::net::by_name("resnet50-k1000").unwrap());
        }
        // Without a net there is nothing to write; a YAML name is refused.
        assert!(nets(None, Some(Path::new("x.toml"))).is_err());
        let e = nets(Some("cifar8"), Some(Path::new("x.yaml"))).unwrap_err();
        assert!(e.to_string().contains("unknown net file format"), "{e}");
    }

    #[test]
    fn certify_net_writes_a_certificate_for_the_example_file() {
        let example = concat!(env!("CARGO_MANIFEST_DIR"), "/../../examples/nets/tiny.toml");
        let out = std::env::temp_dir().join(format!("certgrad-net-{}.json", std::process::id()));
        let code = crate::certify::certify_net(&crate::certify::NetArgs {
            net: example,
            batch: 2,
            seed: 1,
            probes: None,
            points: None,
            json: Some(&out),
            drop_path: None,
        })
        .unwrap();
        assert_eq!(code, 0);
        let doc: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(&out).unwrap()).unwrap();
        std::fs::remove_file(&out).ok();
        assert_eq!(doc["certified"], true);
        assert_eq!(
            doc["parameter_ties"]["blocks"].as_array().unwrap().len(),
            14
        );
        assert_eq!(
            doc["whole_net_tie"]["site_margins"][2]["site"],
            "stage2.pool.pool"
        );
        assert!(crate::certify::certify_net(&crate::certify::NetArgs {
            net: "no-such-net",
            batch: 1,
            seed: 0,
            probes: None,
            points: None,
            json: None,
            drop_path: None,
        })
        .is_err());
    }
}
