//! The file form of a NetSpec (README "Declaring a net"): TOML or JSON text
//! read into a checked NetSpec, with errors that name the file, line and layer.

use super::*;
use crate::ops::conv::Padding;
use crate::ops::norm::BnWorld;
use crate::ops::pool::PoolBackward;

/// A NetSpec file could not be read or does not declare a net.
#[derive(Clone, Debug, PartialEq)]
pub struct NetFileError {
    /// `file:line:col` (or `file:line`, or `file`) where the reader knows it.
    pub at: String,
    pub message: String,
}

impl std::fmt::Display for NetFileError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.at, self.message)
    }
}
impl std::error::Error for NetFileError {}

/// The file form of a net (see README "Declaring a net"). Every convention
/// is a required field: a file that omits a padding mode or BN world is
/// rejected rather than defaulted.
#[derive(serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct NetFile {
    name: String,
    /// `[C, H, W]` of one example.
    input: [i64; 3],
    classes: i64,
    label_smoothing: Option<f64>,
    layers: Vec<LayerFile>,
}

/// One layer: its name, its `op` and the fields that op needs (all others
/// must be absent).
#[derive(serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct LayerFile {
    name: String,
    op: OpFile,
    k: Option<i64>,
    stride: Option<i64>,
    padding: Option<PaddingFile>,
    out_ch: Option<i64>,
    bias: Option<bool>,
    world: Option<WorldFile>,
    eps: Option<f64>,
    window: Option<i64>,
    pad: Option<i64>,
    out_f: Option<i64>,
}

#[derive(serde::Deserialize, Clone, Copy, Debug)]
#[serde(rename_all = "snake_case")]
enum OpFile {
    Conv2d,
    BatchNorm,
    Relu,
    MaxPool,
    GlobalAvgPool,
    Flatten,
    Dense,
}

#[derive(serde::Deserialize, Clone, Copy)]
#[serde(rename_all = "snake_case")]
enum PaddingFile {
    Symmetric,
    XlaSame,
}

#[derive(serde::Deserialize, Clone, Copy)]
#[serde(rename_all = "snake_case")]
enum WorldFile {
    PerExample,
    Batch,
    Eval,
}

impl LayerFile {
    /// The LayerSpec, or which field is missing or does not belong.
    fn spec(&self) -> Result<LayerSpec, String> {
        let need = |v: Option<i64>, f: &str| v.ok_or_else(|| format!("needs `{f}`"));
        let fields: [(&str, bool); 10] = [
            ("k", self.k.is_some()),
            ("stride", self.stride.is_some()),
            ("padding", self.padding.is_some()),
            ("out_ch", self.out_ch.is_some()),
            ("bias", self.bias.is_some()),
            ("world", self.world.is_some()),
            ("eps", self.eps.is_some()),
            ("window", self.window.is_some()),
            ("pad", self.pad.is_some()),
            ("out_f", self.out_f.is_some()),
        ];
        let allowed: &[&str] = match self.op {
            OpFile::Conv2d => &["k", "stride", "padding", "out_ch", "bias"],
            OpFile::BatchNorm => &["world", "eps"],
            OpFile::MaxPool => &["window", "stride", "pad"],
            OpFile::Dense => &["out_f", "bias"],
            OpFile::Relu | OpFile::GlobalAvgPool | OpFile::Flatten => &[],
        };
        if let Some((f, _)) = fields.iter().find(|(f, set)| *set && !allowed.contains(f)) {
            return Err(format!("`{f}` does not apply to {:?}", self.op));
        }
        Ok(match self.op {
            OpFile::Conv2d => LayerSpec::Conv2d(Conv2dSpec {
                k: need(self.k, "k")?,
                stride: need(self.stride, "stride")?,
                padding: match self
                    .padding
                    .ok_or("needs `padding` (symmetric or xla_same)")?
                {
                    PaddingFile::Symmetric => Padding::Symmetric,
                    PaddingFile::XlaSame => Padding::XlaSame,
                },
                out_ch: need(self.out_ch, "out_ch")?,
                bias: self.bias.ok_or("needs `bias`")?,
            }),
            OpFile::BatchNorm => LayerSpec::BatchNorm(BatchNormSpec {
                world: match self
                    .world
                    .ok_or("needs `world` (per_example, batch or eval)")?
                {
                    WorldFile::PerExample => BnWorld::PerExample,
                    WorldFile::Batch => BnWorld::Batch,
                    WorldFile::Eval => BnWorld::Eval,
                },
                eps: self.eps.ok_or("needs `eps`")?,
            }),
            OpFile::Relu => LayerSpec::Relu(ReluSpec {}),
            OpFile::MaxPool => LayerSpec::MaxPool(MaxPoolSpec {
                window: need(self.window, "window")?,
                stride: need(self.stride, "stride")?,
                pad: need(self.pad, "pad")?,
            }),
            OpFile::GlobalAvgPool => LayerSpec::GlobalAvgPool(GlobalAvgPoolSpec {}),
            OpFile::Flatten => LayerSpec::Flatten(FlattenSpec {}),
            OpFile::Dense => LayerSpec::Dense(DenseSpec {
                out_f: need(self.out_f, "out_f")?,
                bias: self.bias.ok_or("needs `bias`")?,
            }),
        })
    }
}

/// 1-based line of the first occurrence of `needle` in `text`.
fn line_of(text: &str, needle: &str) -> Option<usize> {
    text.find(needle)
        .map(|at| text[..at].bytes().filter(|&b| b == b'\n').count() + 1)
}

fn line_col(text: &str, offset: usize) -> (usize, usize) {
    let before = &text[..offset.min(text.len())];
    let line = before.bytes().filter(|&b| b == b'\n').count() + 1;
    let col = before.len() - before.rfind('\n').map_or(0, |i| i + 1) + 1;
    (line, col)
}

impl NetSpec {
    /// Read a net from TOML (`.toml`) or JSON (any other name) text; `origin`
    /// names the file in errors. The net is checked by building its chain, so
    /// a channel or shape mismatch is reported here, naming the layer.
    pub fn from_text(text: &str, origin: &str) -> Result<NetSpec, NetFileError> {
        let file: NetFile = if origin.ends_with(".toml") {
            toml::from_str(text).map_err(|e| NetFileError {
                at: match e.span() {
                    Some(span) => {
                        let (l, c) = line_col(text, span.start);
                        format!("{origin}:{l}:{c}")
                    }
                    None => origin.to_string(),
                },
                message: e.message().trim_end().to_string(),
            })?
        } else {
            serde_json::from_str(text).map_err(|e| NetFileError {
                at: format!("{origin}:{}:{}", e.line(), e.column()),
                message: e.to_string(),
            })?
        };
        let at_layer = |name: &str| match line_of(text, &format!("\"{name}\"")) {
            Some(l) => format!("{origin}:{l}"),
            None => origin.to_string(),
        };
        let mut layers = Vec::with_capacity(file.layers.len());
        for (i, l) in file.layers.iter().enumerate() {
            if layers.iter().any(|(n, _)| n == &l.name) {
                return Err(NetFileError {
                    at: at_layer(&l.name),
                    message: format!("layer {i} `{}`: the name is used twice", l.name),
                });
            }
            let spec = l.spec().map_err(|m| NetFileError {
                at: at_layer(&l.name),
                message: format!("layer {i} `{}` ({:?}): {m}", l.name, l.op),
            })?;
            layers.push((l.name.clone(), spec));
        }
        let (c, h, w) = (file.input[0], file.input[1], file.input[2]);
        if c < 1 || h < 1 || w < 1 || file.classes < 1 {
            return Err(NetFileError {
                at: origin.to_string(),
                message: "input dims and classes must be positive".into(),
            });
        }
        let net = NetSpec {
            name: file.name,
            input: (c, h, w),
            classes: file.classes,
            layers,
            label_smoothing: file.label_smoothing,
            pool_backward: PoolBackward::default(),
        };
        if let Err(e) = net.chain() {
            // The chain's errors start with the net and layer name.
            let layer = net
                .layers
                .iter()
                .map(|(n, _)| n)
                .find(|n| e.0.contains(&format!(": {n}: ")));
            return Err(NetFileError {
                at: layer.map_or_else(|| origin.to_string(), |n| at_layer(n)),
                message: e.0,
            });
        }
        Ok(net)
    }

    /// Read a net from a `.toml` or `.json` file.
    pub fn load(path: &std::path::Path) -> Result<NetSpec, NetFileError> {
        let origin = path.display().to_string();
        let text = std::fs::read_to_string(path).map_err(|e| NetFileError {
            at: origin.clone(),
            message: e.to_string(),
        })?;
        NetSpec::from_text(&text, &origin)
    }
}

/// A built-in net by name, or a net file (a name ending in `.toml`/`.json`).
pub fn resolve(name_or_file: &str) -> Result<NetSpec, NetFileError> {
    if name_or_file.ends_with(".toml") || name_or_file.ends_with(".json") {
        return NetSpec::load(std::path::Path::new(name_or_file));
    }
    by_name(name_or_file).ok_or_else(|| NetFileError {
        at: name_or_file.to_string(),
        message: format!(
            "no built-in net of that name (built-in: {}; or give a .toml/.json file)",
            catalog()
                .iter()
                .map(|n| n.name.as_str())
                .collect::<Vec<_>>()
                .join(", ")
        ),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn example(name: &str) -> std::path::PathBuf {
        std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../../examples/nets")
            .join(name)
    }

    #[test]
    fn the_example_file_declares_a_batch_bn_conv_net() {
        let net = NetSpec::load(&example("tiny.toml")).unwrap();
        assert_eq!(net.name, "tiny-bbn");
        assert_eq!(net.input, (3, 8, 8));
        assert_eq!(net.bn_world(), Some(BnWorld::Batch));
        // conv 3→4 (108+4), bn (4+4), conv 4→8 (288+8), bn (8+8),
        // dense 32→16 (512+16), dense 16→4 (64+4).
        assert_eq!(net.param_count().unwrap(), (12, 1028));
        assert!(net.layers.contains(&(
            "stage2.pool".into(),
            LayerSpec::MaxPool(MaxPoolSpec {
                window: 3,
                stride: 2,
                pad: 1
            })
        )));
    }

    #[test]
    fn json_and_toml_declare_the_same_net() {
        let toml_net = NetSpec::load(&example("tiny.toml")).unwrap();
        let json = r#"{"name": "tiny-bbn", "input": [3, 8, 8], "classes": 4, "layers": [
            {"name": "stage1.conv", "op": "conv2d", "k": 3, "stride": 1, "padding": "symmetric", "out_ch": 4, "bias": true},
            {"name": "stage1.bn", "op": "batch_norm", "world": "batch", "eps": 1e-5},
            {"name": "stage1.pool", "op": "max_pool", "window": 2, "stride": 2, "pad": 0},
            {"name": "stage1.relu", "op": "relu"},
            {"name": "stage2.conv", "op": "conv2d", "k": 3, "stride": 1, "padding": "symmetric", "out_ch": 8, "bias": true},
            {"name": "stage2.bn", "op": "batch_norm", "world": "batch", "eps": 1e-5},
            {"name": "stage2.pool", "op": "max_pool", "window": 3, "stride": 2, "pad": 1},
            {"name": "stage2.relu", "op": "relu"},
            {"name": "flatten", "op": "flatten"},
            {"name": "dense1", "op": "dense", "out_f": 16, "bias": true},
            {"name": "dense1.relu", "op": "relu"},
            {"name": "dense2", "op": "dense", "out_f": 4, "bias": true}]}"#;
        assert_eq!(NetSpec::from_text(json, "tiny.json").unwrap(), toml_net);
    }

    #[test]
    fn file_errors_name_the_line_and_the_layer() {
        let text = std::fs::read_to_string(example("tiny.toml")).unwrap();
        // A syntax error: the reader's own line and column.
        let bad = text.replace(
            "k = 3\nstride = 1\npadding = \"symmetric\"\nout_ch = 4",
            "k = = 3",
        );
        let e = NetSpec::from_text(&bad, "t.toml").unwrap_err();
        assert!(e.at.starts_with("t.toml:13:"), "{e}");
        // An omitted convention is an error, not a default.
        let bad = text.replacen("padding = \"symmetric\"\n", "", 1);
        let e = NetSpec::from_text(&bad, "t.toml").unwrap_err();
        assert!(
            e.message.contains("stage1.conv") && e.message.contains("padding"),
            "{e}"
        );
        assert_eq!(e.at, "t.toml:11");
        // A field of another op.
        let bad = text.replacen("world = \"batch\"", "world = \"batch\"\nwindow = 2", 1);
        let e = NetSpec::from_text(&bad, "t.toml").unwrap_err();
        assert!(e.message.contains("`window` does not apply"), "{e}");
        // A misspelt field: the reader names it, with its line.
        let bad = text.replacen("out_f = 16", "outf = 16", 1);
        let e = NetSpec::from_text(&bad, "t.toml").unwrap_err();
        assert!(e.message.contains("outf"), "{e}");
        assert!(e.at.starts_with("t.toml:"), "{e}");
        // A shape mismatch found by building the chain names the layer.
        let bad = text.replacen("out_f = 4", "out_f = 5", 1);
        let e = NetSpec::from_text(&bad, "t.toml").unwrap_err();
        assert!(e.message.contains("expected logits [B, 4]"), "{e}");
        let bad = text.replacen(
            "eps = 1e-5",
            "eps = 1e-5\n[[layers]]\nname = \"x\"\nop = \"global_avg_pool\"",
            1,
        );
        let e = NetSpec::from_text(&bad, "t.toml").unwrap_err();
        assert!(e.message.contains("stage1.pool"), "{e}");
    }

    #[test]
    fn resolve_finds_built_ins_and_rejects_unknown_names() {
        assert_eq!(resolve("cifar8").unwrap().name, "cifar8");
        let e = resolve("cifar9").unwrap_err();
        assert!(e.message.contains("cifar8-bbn"), "{e}");
    }
}
