//! NetSpec: a net declared once, as data. Its forward chain, parameter layout,
//! eval variant (BN in the Eval world) and — above this crate — certificate,
//! train step and rendered text are all derived from it; no second
//! hand-written copy of a net exists.

use crate::blocks::{BlockNorm, ResidualBlock};
use crate::combinators::Chain;
use crate::layer::{CertLayer, LayerError, ParamSpec, Saved};
use crate::ops::activation::Relu;
use crate::ops::conv::{Conv2d, Padding};
use crate::ops::dense::{Dense, Flatten, GlobalAvgPool};
use crate::ops::loss::SoftmaxCrossEntropy;
use crate::ops::norm::{BatchNorm, BnWorld};
use crate::ops::pool::{MaxPool, PoolBackward};
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
    /// ResNet basic block `relu(main(x) + skip(x))`, main = conv3×3/`stride`
    /// → BN → ReLU → conv3×3 → BN (bias-free, symmetric padding). `project`:
    /// the skip is conv1×1/`stride` → BN, else the identity (stride 1, equal
    /// channels). See `crate::blocks::ResidualBlock::basic`.
    BasicBlock {
        out_ch: i64,
        stride: i64,
        project: bool,
        world: BnWorld,
        eps: f64,
    },
    /// ResNet v1.5 bottleneck: conv1×1 (→`mid_ch`) → BN → ReLU → conv3×3/`stride`
    /// → BN → ReLU → conv1×1 (→`out_ch`) → BN, plus the skip as in `BasicBlock`.
    Bottleneck {
        mid_ch: i64,
        out_ch: i64,
        stride: i64,
        project: bool,
        world: BnWorld,
        eps: f64,
    },
}

/// A batch norm of a net, wherever it sits (top level or inside a block).
#[derive(Clone, Debug, PartialEq)]
pub struct BnSite {
    /// Its parameter path without the `.gamma` (`stem.bn`, `stage2.block1.main.bn1`).
    pub name: String,
    pub ch: i64,
    pub world: BnWorld,
    /// Child indices from the chain's `Saved` down to the batch norm's.
    pub path: Vec<usize>,
}

impl BnSite {
    /// The `(mean, var)` this batch norm's forward computed, read from the
    /// `Saved` of the chain it belongs to (`NetSpec::chain` or
    /// `chain_with_loss`: the loss comes last, so paths agree).
    pub fn stats(&self, chain_saved: &Saved) -> Option<(ir::ValueId, ir::ValueId)> {
        let mut s = chain_saved;
        for &i in &self.path {
            s = s.children.get(i)?;
        }
        BatchNorm::saved_stats(s)
    }
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
    /// The emitted form of every max pool's backward (the function is the
    /// same; IREE cannot lower an overlapping `select_and_scatter`).
    pub pool_backward: PoolBackward,
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
                    backward: self.pool_backward,
                }),
                LayerSpec::GlobalAvgPool => Box::new(GlobalAvgPool),
                LayerSpec::Flatten => Box::new(Flatten),
                LayerSpec::Dense { out_f, bias } => Box::new(Dense {
                    in_f: *ty.shape.last().unwrap_or(&0),
                    out_f: *out_f,
                    bias: *bias,
                }),
                LayerSpec::BasicBlock { .. } | LayerSpec::Bottleneck { .. } => Box::new(
                    spec.block(channels(&ty, name)?)
                        .map_err(|e| LayerError(format!("{}: {name}: {e}", self.name)))?,
                ),
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
        self.layers.iter().find_map(|(_, l)| l.bn_world())
    }

    /// The same net with every batch norm — top-level and inside blocks — in
    /// `world` (e.g. `Eval` for the eval forward): the only difference between
    /// a train step's forward and the eval forward.
    pub fn with_bn_world(&self, world: BnWorld) -> NetSpec {
        let mut n = self.clone();
        for (_, l) in &mut n.layers {
            l.set_bn_world(world);
        }
        n
    }

    /// The same net with every max pool's backward emitted in `form`.
    pub fn with_pool_backward(&self, form: PoolBackward) -> NetSpec {
        NetSpec {
            pool_backward: form,
            ..self.clone()
        }
    }

    /// Every batch norm of the net in forward (= parameter) order, with where
    /// its statistics sit in the chain's `Saved`. A train step's batch-stat
    /// outputs and running-stat inputs are one per site.
    pub fn bn_sites(&self) -> Result<Vec<BnSite>, LayerError> {
        let chain = self.chain()?;
        let tys = chain.types(&self.input_type(1))?;
        let mut out = Vec::new();
        for (i, ((name, spec), ty)) in self.layers.iter().zip(&tys).enumerate() {
            match spec {
                LayerSpec::BatchNorm { world, .. } => out.push(BnSite {
                    name: name.clone(),
                    ch: ty.shape[1],
                    world: *world,
                    path: vec![i],
                }),
                LayerSpec::BasicBlock { world, .. } | LayerSpec::Bottleneck { world, .. } => {
                    for b in spec.block(channels(ty, name)?)?.bns {
                        let mut path = vec![i];
                        path.extend(b.path);
                        out.push(BnSite {
                            name: format!("{name}.{}", b.name),
                            ch: b.ch,
                            world: *world,
                            path,
                        });
                    }
                }
                _ => {}
            }
        }
        Ok(out)
    }
}

impl LayerSpec {
    /// The BN world of this layer's batch norm(s), if it has any.
    pub fn bn_world(&self) -> Option<BnWorld> {
        match self {
            LayerSpec::BatchNorm { world, .. }
            | LayerSpec::BasicBlock { world, .. }
            | LayerSpec::Bottleneck { world, .. } => Some(*world),
            _ => None,
        }
    }

    /// Put this layer's batch norm(s) in `world`.
    pub fn set_bn_world(&mut self, to: BnWorld) {
        match self {
            LayerSpec::BatchNorm { world, .. }
            | LayerSpec::BasicBlock { world, .. }
            | LayerSpec::Bottleneck { world, .. } => *world = to,
            _ => {}
        }
    }

    /// The block CertLayer of a `BasicBlock` / `Bottleneck` at `in_ch` input
    /// channels (an error for other layers).
    pub fn block(&self, in_ch: i64) -> Result<ResidualBlock, LayerError> {
        match self {
            LayerSpec::BasicBlock {
                out_ch,
                stride,
                project,
                world,
                eps,
            } => ResidualBlock::basic(
                in_ch,
                *out_ch,
                *stride,
                *project,
                BlockNorm {
                    world: *world,
                    eps: *eps,
                },
            ),
            LayerSpec::Bottleneck {
                mid_ch,
                out_ch,
                stride,
                project,
                world,
                eps,
            } => ResidualBlock::bottleneck(
                in_ch,
                *mid_ch,
                *out_ch,
                *stride,
                *project,
                BlockNorm {
                    world: *world,
                    eps: *eps,
                },
            ),
            other => Err(LayerError(format!("{other:?} is not a residual block"))),
        }
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
        pool_backward: PoolBackward::default(),
    }
}

/// The ResNet stem (REFERENCE §4.2): conv 7×7/s2 symmetric pad 3, bias-free
/// → BN → max pool 3×3/s2 pad 1 → ReLU.
///
/// The pool is emitted before the ReLU, as in `cifar8`: conv→BN→ReLU→pool and
/// conv→BN→pool→ReLU are the same function (ReLU is monotone and the pool is a
/// max, so max∘relu = relu∘max), but pooling the continuous BN output keeps the
/// unique-argmax hypothesis generic. After the ReLU about half the stem units
/// are exactly 0, and a 3×3 window of nine dead units ties at 0 with
/// probability about 2⁻⁹ — at 112² × 64 channels that is hundreds of tied
/// windows at every point, and the smooth-point hypothesis would fail at
/// almost every point.
fn resnet_stem(world: BnWorld, width: i64) -> Vec<(String, LayerSpec)> {
    vec![
        (
            "stem.conv".into(),
            LayerSpec::Conv2d {
                k: 7,
                stride: 2,
                padding: Padding::Symmetric,
                out_ch: width,
                bias: false,
            },
        ),
        ("stem.bn".into(), LayerSpec::BatchNorm { world, eps: 1e-5 }),
        (
            "stem.pool".into(),
            LayerSpec::MaxPool {
                window: 3,
                stride: 2,
                pad: 1,
            },
        ),
        ("stem.relu".into(), LayerSpec::Relu),
    ]
}

/// GAP → dense (with bias) to `classes`.
fn resnet_head(classes: i64) -> Vec<(String, LayerSpec)> {
    vec![
        ("gap".into(), LayerSpec::GlobalAvgPool),
        (
            "fc".into(),
            LayerSpec::Dense {
                out_f: classes,
                bias: true,
            },
        ),
    ]
}

/// `resnet34`, `resnet34-k1000`, `resnet34-k10-64x64`: the K and input size
/// appear in the name unless they are the Imagenette defaults (K = 10, 224²).
fn resnet_name(base: &str, classes: i64, hw: (i64, i64)) -> String {
    let mut name = base.to_string();
    if classes != 10 || hw != (224, 224) {
        name.push_str(&format!("-k{classes}"));
    }
    if hw != (224, 224) {
        name.push_str(&format!("-{}x{}", hw.0, hw.1));
    }
    name
}

/// ResNet-34 (REFERENCE §4.2) at `classes` outputs and an `hw` input: the
/// stem, `[3, 4, 6, 3]` basic blocks at 64/128/256/512 channels (the first
/// block of stages 2–4: 3×3/s2 and a 1×1/s2 projection + BN skip), GAP, dense.
/// True batch-stat BN, ε 1e-5 (`with_bn_world` gives the per-example or eval
/// world). Blocks are named `stage{s}.block{b}` (1-based).
pub fn resnet34(classes: i64, hw: (i64, i64)) -> NetSpec {
    resnet34_width(classes, hw, 64)
}

/// ResNet-34's topology with every width scaled to `width`/64 (stem `width`,
/// stages `width`·1/2/4/8): the same blocks, strides, projections, parameter
/// tensors and kink sites at a fraction of the floats, for tests that must
/// run every block type fast. Named `resnet34-w{width}-…`; `width` 64 is
/// [`resnet34`].
pub fn resnet34_width(classes: i64, hw: (i64, i64), width: i64) -> NetSpec {
    let stages = [(3, width), (4, 2 * width), (6, 4 * width), (3, 8 * width)];
    resnet("resnet34", classes, hw, width, stages, |s, b, ch| {
        let down = s > 0 && b == 0;
        LayerSpec::BasicBlock {
            out_ch: ch,
            stride: if down { 2 } else { 1 },
            project: down,
            world: BnWorld::Batch,
            eps: 1e-5,
        }
    })
}

/// ResNet-50 v1.5 (REFERENCE §4.3): the ResNet-34 stem and head around
/// `[3, 4, 6, 3]` bottlenecks with outputs 256/512/1024/2048 (width out/4).
/// The first block of every stage projects (stage 1: 64→256 at stride 1);
/// stages 2–4 stride in the first block's 3×3 and its projection.
pub fn resnet50(classes: i64, hw: (i64, i64)) -> NetSpec {
    resnet50_width(classes, hw, 64)
}

/// ResNet-50's topology with every width scaled to `width`/64 (stem `width`,
/// bottleneck outputs `width`·4/8/16/32); `width` 64 is [`resnet50`].
pub fn resnet50_width(classes: i64, hw: (i64, i64), width: i64) -> NetSpec {
    let stages = [
        (3, 4 * width),
        (4, 8 * width),
        (6, 16 * width),
        (3, 32 * width),
    ];
    resnet("resnet50", classes, hw, width, stages, |s, b, ch| {
        LayerSpec::Bottleneck {
            mid_ch: ch / 4,
            out_ch: ch,
            stride: if s > 0 && b == 0 { 2 } else { 1 },
            project: b == 0,
            world: BnWorld::Batch,
            eps: 1e-5,
        }
    })
}

/// A ResNet of true batch-stat BN: the stem and head around four stages of
/// (blocks, channels), block `b` of stage `s` (0-based) being `block(s, b,
/// channels)`, named `stage{s}.block{b}` (1-based). The net is named `base`,
/// `-w{width}` unless `width` is 64, then K and input size (`resnet_name`).
fn resnet(
    base: &str,
    classes: i64,
    hw: (i64, i64),
    width: i64,
    stages: [(usize, i64); 4],
    block: impl Fn(usize, usize, i64) -> LayerSpec,
) -> NetSpec {
    let mut layers = resnet_stem(BnWorld::Batch, width);
    for (s, (n, ch)) in stages.into_iter().enumerate() {
        for b in 0..n {
            layers.push((format!("stage{}.block{}", s + 1, b + 1), block(s, b, ch)));
        }
    }
    layers.extend(resnet_head(classes));
    let base = if width == 64 {
        base.to_string()
    } else {
        format!("{base}-w{width}")
    };
    NetSpec {
        name: resnet_name(&base, classes, hw),
        input: (3, hw.0, hw.1),
        classes,
        layers,
        label_smoothing: None,
        pool_backward: PoolBackward::default(),
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
        resnet34(10, (224, 224)),
        resnet34(1000, (224, 224)),
        resnet50(10, (224, 224)),
        resnet50(1000, (224, 224)),
    ]
}

/// A built-in net by name. ResNets also take any class count and input size
/// in the naming scheme of `resnet34`: `resnet50-k1000`, `resnet34-k10-64x64`.
pub fn by_name(name: &str) -> Option<NetSpec> {
    if let Some(n) = catalog().into_iter().find(|n| n.name == name) {
        return Some(n);
    }
    let (base, rest) = name.split_at(name.find('-')?);
    let build: fn(i64, (i64, i64)) -> NetSpec = match base {
        "resnet34" => resnet34,
        "resnet50" => resnet50,
        _ => return None,
    };
    let mut parts = rest[1..].split('-');
    let classes: i64 = parts.next()?.strip_prefix('k')?.parse().ok()?;
    let hw = match parts.next() {
        None => (224, 224),
        Some(p) => {
            let (h, w) = p.split_once('x')?;
            (h.parse().ok()?, w.parse().ok()?)
        }
    };
    if parts.next().is_some() || classes < 1 || hw.0 < 1 || hw.1 < 1 {
        return None;
    }
    let net = build(classes, hw);
    // Only the canonical spelling names a net (no `resnet34-k10`).
    (net.name == name).then_some(net)
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

    /// The counts are REFERENCE §4.2–4.3's (issue 9), not computed here.
    #[test]
    fn resnet_parameter_counts_match_the_reference() {
        let r34 = by_name("resnet34").unwrap();
        assert_eq!(r34.param_count().unwrap(), (110, 21_289_802));
        assert_eq!(
            by_name("resnet50").unwrap().param_count().unwrap(),
            (161, 23_528_522)
        );
        assert_eq!(
            by_name("resnet50-k1000").unwrap().param_count().unwrap(),
            (161, 25_557_032)
        );
        // 36 and 53 batch norms (stem 1; 2 per identity block, 3 per
        // downsample block; 3 per bottleneck, +1 per projection).
        assert_eq!(r34.bn_sites().unwrap().len(), 36);
        assert_eq!(by_name("resnet50").unwrap().bn_sites().unwrap().len(), 53);
    }

    #[test]
    fn resnet_names_parse_back_and_sizes_shrink_to_the_logits() {
        let n = by_name("resnet34-k10-64x48").unwrap();
        assert_eq!((n.input, n.classes), ((3, 64, 48), 10));
        assert_eq!(n, resnet34(10, (64, 48)));
        assert_eq!(
            by_name("resnet50-k1000").unwrap(),
            resnet50(1000, (224, 224))
        );
        for bad in [
            "resnet34-k10",
            "resnet34-10",
            "resnet34-k0",
            "resnet18-k10",
            "resnet34-k10-64",
        ] {
            assert!(by_name(bad).is_none(), "{bad}");
        }
        // The narrow topology: same tensors and names, fewer floats.
        let narrow = resnet34_width(10, (32, 32), 4);
        assert_eq!(narrow.name, "resnet34-w4-k10-32x32");
        let (a, b) = (
            narrow.param_specs().unwrap(),
            resnet34(10, (32, 32)).param_specs().unwrap(),
        );
        assert_eq!(a.len(), b.len());
        assert!(a.iter().zip(&b).all(|(p, q)| p.name == q.name));
        // Only the parameter layout depends on K, not on the input size.
        let (a, b) = (resnet50(10, (224, 224)), resnet50(10, (64, 64)));
        assert_eq!(a.param_specs().unwrap(), b.param_specs().unwrap());
    }

    #[test]
    fn resnet_geometry_is_the_papers() {
        let n = resnet34(10, (224, 224));
        let stem: Vec<_> = n.layers[..4].iter().map(|(_, l)| l.clone()).collect();
        assert_eq!(
            stem[0],
            LayerSpec::Conv2d {
                k: 7,
                stride: 2,
                padding: Padding::Symmetric,
                out_ch: 64,
                bias: false
            }
        );
        assert_eq!(
            stem[2],
            LayerSpec::MaxPool {
                window: 3,
                stride: 2,
                pad: 1
            }
        );
        // 224 → 112 (stem) → 56 (pool) → 56, 28, 14, 7.
        let chain = n.chain().unwrap();
        let tys = chain.types(&n.input_type(2)).unwrap();
        let at = |name: &str| {
            let i = n.layers.iter().position(|(m, _)| m == name).unwrap();
            tys[i + 1].shape.clone()
        };
        assert_eq!(at("stem.bn"), [2, 64, 112, 112]);
        assert_eq!(at("stem.relu"), [2, 64, 56, 56]);
        assert_eq!(at("stage1.block3"), [2, 64, 56, 56]);
        assert_eq!(at("stage2.block1"), [2, 128, 28, 28]);
        assert_eq!(at("stage4.block3"), [2, 512, 7, 7]);
        // ResNet-50 v1.5: the stride sits in the 3×3 of the first block.
        let r50 = resnet50(10, (224, 224));
        let ps: Vec<_> = r50.param_specs().unwrap();
        let shape = |name: &str| {
            ps.iter()
                .find(|p| p.name == name)
                .unwrap_or_else(|| panic!("{name}"))
                .ty
                .shape
                .clone()
        };
        assert_eq!(shape("stage1.block1.shortcut.conv.W"), [256, 64, 1, 1]);
        assert_eq!(shape("stage2.block1.main.conv1.W"), [128, 256, 1, 1]);
        assert_eq!(shape("stage2.block1.main.conv2.W"), [128, 128, 3, 3]);
        assert!(ps.iter().all(|p| p.name != "stage1.block2.shortcut.conv.W"));
        let chain = r50.chain().unwrap();
        let tys = chain.types(&r50.input_type(1)).unwrap();
        let i = r50
            .layers
            .iter()
            .position(|(m, _)| m == "stage4.block3")
            .unwrap();
        assert_eq!(tys[i + 1].shape, [1, 2048, 7, 7]);
    }

    #[test]
    fn every_batch_norm_switches_world_and_reads_its_own_stats() {
        let n = resnet34(10, (64, 64)).with_bn_world(BnWorld::PerExample);
        let sites = n.bn_sites().unwrap();
        assert!(sites.iter().all(|s| s.world == BnWorld::PerExample));
        assert_eq!(n.bn_world(), Some(BnWorld::PerExample));
        // Each site's path leads to a batch norm whose stats the forward saved,
        // named like its γ parameter.
        let chain = n.chain().unwrap();
        let input = n.input_type(2);
        let params = chain.params(&input);
        let mut fb = ir::FuncBuilder::new("f", ir::Visibility::Public);
        let x = fb.param(input.clone());
        let ps: Vec<_> = params.iter().map(|p| fb.param(p.ty.clone())).collect();
        let saved = chain
            .forward(&mut fb, x, &ps, &mut crate::layer::Sites::default())
            .unwrap();
        let gammas: Vec<_> = params
            .iter()
            .filter_map(|p| p.name.strip_suffix(".gamma"))
            .collect();
        assert_eq!(
            sites.iter().map(|s| s.name.as_str()).collect::<Vec<_>>(),
            gammas
        );
        for s in &sites {
            let (mean, _) = s.stats(&saved).unwrap_or_else(|| panic!("{}", s.name));
            assert_eq!(fb.ty(mean).shape, [2, s.ch], "{}", s.name);
        }
    }

    #[test]
    fn with_pool_backward_reaches_every_pool() {
        let n = resnet34(10, (64, 64)).with_pool_backward(PoolBackward::ShiftedSums);
        assert_eq!(n.pool_backward, PoolBackward::ShiftedSums);
        let chain = n.chain().unwrap();
        assert!(chain
            .layers
            .iter()
            .any(|(_, l)| l.name().starts_with("maxpool 3×3/s2")));
        assert_ne!(n, resnet34(10, (64, 64)));
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
