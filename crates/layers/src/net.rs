//! NetSpec: a net declared once, as data. Its forward chain, parameter layout,
//! eval variant (BN in the Eval world) and — above this crate — certificate,
//! train step and rendered text are all derived from it; no second
//! hand-written copy of a net exists.

use crate::combinators::Chain;
use crate::layer::{CertLayer, LayerError, ParamSpec};
use crate::ops::activation::Relu;
use crate::ops::conv::{Conv2d, Padding};
use crate::ops::dense::{Dense, Flatten, GlobalAvgPool};
use crate::ops::loss::SoftmaxCrossEntropy;
use crate::ops::norm::{BatchNorm, BnWorld};
use crate::ops::pool::MaxPool;
use ir::TensorType;

/// One layer of a net, with every convention explicit. Channel counts of
/// inputs are inferred from the layer before.
#[derive(Clone, Debug, PartialEq)]
pub enum LayerSpec {
    Conv2d {
        k: i64,
        stride: i64,
        padding: Padding,
        out_ch: i64,
        bias: bool,
    },
    BatchNorm {
        world: BnWorld,
        eps: f64,
    },
    Relu,
    MaxPool {
        window: i64,
        stride: i64,
        pad: i64,
    },
    GlobalAvgPool,
    Flatten,
    Dense {
        out_f: i64,
        bias: bool,
    },
}

#[derive(Clone, Debug, PartialEq)]
pub struct NetSpec {
    pub name: String,
    /// Per-example input `(C, H, W)`.
    pub input: (i64, i64, i64),
    pub classes: i64,
    /// Named layers in forward order; names scope parameters and kink sites.
    pub layers: Vec<(String, LayerSpec)>,
    /// Label smoothing α of the loss (target `(1−α)·onehot + α/K`).
    pub label_smoothing: Option<f64>,
}

impl NetSpec {
    /// `[B, C, H, W]`.
    pub fn input_type(&self, batch: i64) -> TensorType {
        let (c, h, w) = self.input;
        TensorType::f32(vec![batch, c, h, w])
    }

    /// The forward as a chain of CertLayers (logits out, no loss).
    pub fn chain(&self) -> Result<Chain, LayerError> {
        let mut chain = Chain::new();
        let mut ty = self.input_type(1);
        for (name, spec) in &self.layers {
            let layer: Box<dyn CertLayer> = match spec {
                LayerSpec::Conv2d {
                    k,
                    stride,
                    padding,
                    out_ch,
                    bias,
                } => Box::new(Conv2d {
                    k: *k,
                    stride: *stride,
                    padding: *padding,
                    in_ch: channels(&ty, name)?,
                    out_ch: *out_ch,
                    bias: *bias,
                }),
                LayerSpec::BatchNorm { world, eps } => Box::new(BatchNorm {
                    ch: channels(&ty, name)?,
                    world: *world,
                    eps: *eps,
                }),
                LayerSpec::Relu => Box::new(Relu),
                LayerSpec::MaxPool {
                    window,
                    stride,
                    pad,
                } => Box::new(MaxPool {
                    window: *window,
                    stride: *stride,
                    pad: *pad,
                }),
                LayerSpec::GlobalAvgPool => Box::new(GlobalAvgPool),
                LayerSpec::Flatten => Box::new(Flatten),
                LayerSpec::Dense { out_f, bias } => Box::new(Dense {
                    in_f: *ty.shape.last().unwrap_or(&0),
                    out_f: *out_f,
                    bias: *bias,
                }),
            };
            ty = layer
                .output_type(&ty)
                .map_err(|e| LayerError(format!("{}: {name}: {e}", self.name)))?;
            chain.layers.push((name.clone(), layer));
        }
        if ty.shape != [1, self.classes] {
            return Err(LayerError(format!(
                "{}: the forward ends in {ty}, expected logits [B, {}]",
                self.name, self.classes
            )));
        }
        Ok(chain)
    }

    /// The forward followed by the mean softmax cross-entropy (its `target`
    /// parameter is the one-hot or soft label matrix `[B, K]`).
    pub fn chain_with_loss(&self) -> Result<Chain, LayerError> {
        let mut c = self.chain()?;
        c.layers.push((
            "loss".into(),
            Box::new(SoftmaxCrossEntropy {
                classes: self.classes,
                label_smoothing: self.label_smoothing,
            }),
        ));
        Ok(c)
    }

    /// Trainable parameters in forward order (per layer W then b; BN γ then β).
    pub fn param_specs(&self) -> Result<Vec<ParamSpec>, LayerError> {
        Ok(self.chain()?.params(&self.input_type(1)))
    }

    /// (tensors, floats) of the trainable parameters.
    pub fn param_count(&self) -> Result<(usize, i64), LayerError> {
        let ps = self.param_specs()?;
        Ok((ps.len(), ps.iter().map(|p| p.ty.num_elements()).sum()))
    }

    /// The BN world of the net's batch norms, if it has any.
    pub fn bn_world(&self) -> Option<BnWorld> {
        self.layers.iter().find_map(|(_, l)| match l {
            LayerSpec::BatchNorm { world, .. } => Some(*world),
            _ => None,
        })
    }

    /// The same net with every batch norm in `world` (e.g. `Eval` for the eval
    /// forward): the only difference between a train step's forward and the eval
    /// forward.
    pub fn with_bn_world(&self, world: BnWorld) -> NetSpec {
        let mut n = self.clone();
        for (_, l) in &mut n.layers {
            if let LayerSpec::BatchNorm { world: w, .. } = l {
                *w = world;
            }
        }
        n
    }
}

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
            OpFile::Conv2d => LayerSpec::Conv2d {
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
            },
            OpFile::BatchNorm => LayerSpec::BatchNorm {
                world: match self
                    .world
                    .ok_or("needs `world` (per_example, batch or eval)")?
                {
                    WorldFile::PerExample => BnWorld::PerExample,
                    WorldFile::Batch => BnWorld::Batch,
                    WorldFile::Eval => BnWorld::Eval,
                },
                eps: self.eps.ok_or("needs `eps`")?,
            },
            OpFile::Relu => LayerSpec::Relu,
            OpFile::MaxPool => LayerSpec::MaxPool {
                window: need(self.window, "window")?,
                stride: need(self.stride, "stride")?,
                pad: need(self.pad, "pad")?,
            },
            OpFile::GlobalAvgPool => LayerSpec::GlobalAvgPool,
            OpFile::Flatten => LayerSpec::Flatten,
            OpFile::Dense => LayerSpec::Dense {
                out_f: need(self.out_f, "out_f")?,
                bias: self.bias.ok_or("needs `bias`")?,
            },
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

fn channels(ty: &TensorType, layer: &str) -> Result<i64, LayerError> {
    match ty.shape.as_slice() {
        [_, c, _, _] => Ok(*c),
        _ => Err(LayerError(format!(
            "{layer}: expects an NCHW input, got {ty}"
        ))),
    }
}

/// The cifar8 family (REFERENCE §4.1): four stages of conv3×3(bias) → [BN] →
/// ReLU, twice, then max pool 2×2/s2; channels 16,16 | 16,16 | 32,32 | 32,32;
/// flatten 128; dense 128→d→ReLU→d→ReLU→10.
///
/// Each stage's pool is emitted before its second ReLU. The function is the
/// same (ReLU is monotone, so max∘relu = relu∘max), but the pool then decides
/// on continuous BN/conv outputs, where ties have measure zero, instead of on
/// ReLU outputs, where a window of four dead units ties at 0 with probability
/// about 1/16 and the unique-argmax hypothesis would fail at almost every
/// point. It also runs the second ReLU on a quarter of the elements.
pub fn cifar8(name: &str, head: i64, bn: Option<BnWorld>) -> NetSpec {
    let mut layers = Vec::new();
    let stages = [(16, 16), (16, 16), (32, 32), (32, 32)];
    for (s, (c1, c2)) in stages.iter().enumerate() {
        let st = format!("stage{}", s + 1);
        for (i, c) in [c1, c2].iter().enumerate() {
            let conv = format!("{st}.conv{}", i + 1);
            layers.push((
                conv.clone(),
                LayerSpec::Conv2d {
                    k: 3,
                    stride: 1,
                    padding: Padding::Symmetric,
                    out_ch: **c,
                    bias: true,
                },
            ));
            if let Some(world) = bn {
                layers.push((
                    format!("{st}.bn{}", i + 1),
                    LayerSpec::BatchNorm { world, eps: 1e-5 },
                ));
            }
            if i == 1 {
                layers.push((
                    format!("{st}.pool"),
                    LayerSpec::MaxPool {
                        window: 2,
                        stride: 2,
                        pad: 0,
                    },
                ));
            }
            layers.push((format!("{conv}.relu"), LayerSpec::Relu));
        }
    }
    layers.push(("flatten".into(), LayerSpec::Flatten));
    for (i, out_f) in [head, head, 10].iter().enumerate() {
        layers.push((
            format!("dense{}", i + 1),
            LayerSpec::Dense {
                out_f: *out_f,
                bias: true,
            },
        ));
        if i < 2 {
            layers.push((format!("dense{}.relu", i + 1), LayerSpec::Relu));
        }
    }
    NetSpec {
        name: name.into(),
        input: (3, 32, 32),
        classes: 10,
        layers,
        label_smoothing: None,
    }
}

/// Every built-in net.
pub fn catalog() -> Vec<NetSpec> {
    vec![
        cifar8("cifar8", 64, None),
        cifar8("cifar8w", 512, None),
        cifar8("cifar8-bn", 64, Some(BnWorld::PerExample)),
        cifar8("cifar8-bbn", 64, Some(BnWorld::Batch)),
        cifar8("cifar8w-bbn", 512, Some(BnWorld::Batch)),
    ]
}

/// A built-in net by name.
pub fn by_name(name: &str) -> Option<NetSpec> {
    catalog().into_iter().find(|n| n.name == name)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cifar8_parameter_counts_match_the_reference() {
        assert_eq!(
            by_name("cifar8").unwrap().param_count().unwrap(),
            (22, 52_858)
        );
        assert_eq!(
            by_name("cifar8w").unwrap().param_count().unwrap().1,
            373_626
        );
        for n in ["cifar8-bn", "cifar8-bbn", "cifar8w-bbn"] {
            assert_eq!(by_name(n).unwrap().param_count().unwrap().0, 38, "{n}");
        }
    }

    #[test]
    fn eval_variant_differs_only_in_the_bn_world() {
        let train = by_name("cifar8-bbn").unwrap();
        let eval = train.with_bn_world(BnWorld::Eval);
        assert_eq!(train.layers.len(), eval.layers.len());
        for ((a, x), (b, y)) in train.layers.iter().zip(&eval.layers) {
            assert_eq!(a, b);
            match (x, y) {
                (
                    LayerSpec::BatchNorm { world: w1, .. },
                    LayerSpec::BatchNorm { world: w2, .. },
                ) => {
                    assert_eq!((*w1, *w2), (BnWorld::Batch, BnWorld::Eval))
                }
                _ => assert_eq!(x, y),
            }
        }
    }

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
            LayerSpec::MaxPool {
                window: 3,
                stride: 2,
                pad: 1
            }
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
