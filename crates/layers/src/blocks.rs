//! Residual blocks of the ResNet family (REFERENCE §4.2–4.3) as CertLayers:
//! the basic block (identity or 1×1 projection skip) and the v1.5 bottleneck.
//! A block is `relu(main(x) + skip(x))`, composed from the per-op layers with
//! the `Residual` / `Projection` combinators, so its backward map is the
//! composition of certified leaf backwards and nothing block-specific is
//! hand-written here.

use crate::combinators::{Chain, Projection, Residual};
use crate::emit::EmitResult;
use crate::layer::{CertLayer, Grads, LayerError, ParamSpec, Saved, Sites};
use crate::ops::activation::Relu;
use crate::ops::conv::{Conv2d, Padding};
use crate::ops::norm::{BatchNorm, BnWorld};
use ir::{FuncBuilder, TensorType, ValueId};

/// The conventions every conv + BN pair of a ResNet block shares: bias-free
/// convs (the BN's β is the bias), symmetric padding, one BN world and ε.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct BlockNorm {
    pub world: BnWorld,
    pub eps: f64,
}

impl BlockNorm {
    /// The batch norm of a `ch`-channel conv under these conventions.
    pub fn bn(self, ch: i64) -> BatchNorm {
        BatchNorm {
            ch,
            world: self.world,
            eps: self.eps,
        }
    }
}

/// `relu(sum(x))` where `sum` is a `Residual` (identity skip) or a
/// `Projection` (1×1 conv + BN skip).
///
/// Kink sites, under the block's name: `mid_relu.pre_relu` (basic) or
/// `mid_relu1.pre_relu`, `mid_relu2.pre_relu` (bottleneck) inside the main
/// branch (prefixed `main.` when the skip projects), and `out_relu.pre_relu`,
/// the post-residual ReLU. Parameters: the main branch's convs and BNs in
/// forward order, then (projection) the skip's conv and BN, prefixed `main.` /
/// `shortcut.`.
pub struct ResidualBlock {
    /// `conv3×3 … BN` basic / bottleneck, with its configuration in words.
    pub label: String,
    pub sum: Box<dyn CertLayer>,
    /// Its batch norms in parameter order.
    pub bns: Vec<BlockBn>,
}

/// One batch norm inside a block: its parameter path (`bn1`, `main.bn2`,
/// `shortcut.bn`), width, and child indices into the block's `Saved`.
#[derive(Clone, Debug, PartialEq)]
pub struct BlockBn {
    pub name: String,
    pub ch: i64,
    pub path: Vec<usize>,
}

/// The main branch as it is assembled: the chain and its batch norms.
struct Branch {
    chain: Chain,
    bns: Vec<(String, i64, usize)>,
}

impl Branch {
    fn new() -> Self {
        Branch {
            chain: Chain::new(),
            bns: Vec::new(),
        }
    }
    fn conv(mut self, name: &str, k: i64, stride: i64, in_ch: i64, out_ch: i64) -> Self {
        self.chain = self.chain.push(name, block_conv(k, stride, in_ch, out_ch));
        self
    }
    fn bn(mut self, name: &str, ch: i64, norm: BlockNorm) -> Self {
        self.bns.push((name.into(), ch, self.chain.layers.len()));
        self.chain = self.chain.push(name, norm.bn(ch));
        self
    }
    fn relu(mut self, name: &str) -> Self {
        self.chain = self.chain.push(name, Relu);
        self
    }
}

impl ResidualBlock {
    /// The basic block: conv3×3/`stride` → BN → ReLU → conv3×3 → BN, plus the
    /// skip. With `project`, the skip is conv1×1/`stride` → BN (option B);
    /// without, it is the identity and needs `stride` 1 and `in_ch == out_ch`.
    pub fn basic(
        in_ch: i64,
        out_ch: i64,
        stride: i64,
        project: bool,
        norm: BlockNorm,
    ) -> Result<Self, LayerError> {
        let main = Branch::new()
            .conv("conv1", 3, stride, in_ch, out_ch)
            .bn("bn1", out_ch, norm)
            .relu("mid_relu")
            .conv("conv2", 3, 1, out_ch, out_ch)
            .bn("bn2", out_ch, norm);
        let label = format!(
            "basic block {in_ch}→{out_ch} s{stride} {}",
            skip_label(project)
        );
        Self::with_skip(label, main, in_ch, out_ch, stride, project, norm)
    }

    /// The v1.5 bottleneck: conv1×1 → BN → ReLU → conv3×3/`stride` → BN → ReLU
    /// → conv1×1 → BN (`in_ch → mid_ch → mid_ch → out_ch`), plus the skip. The
    /// stride sits in the 3×3 (v1.5, not in the first 1×1 as in v1), and in the
    /// projection.
    pub fn bottleneck(
        in_ch: i64,
        mid_ch: i64,
        out_ch: i64,
        stride: i64,
        project: bool,
        norm: BlockNorm,
    ) -> Result<Self, LayerError> {
        let main = Branch::new()
            .conv("conv1", 1, 1, in_ch, mid_ch)
            .bn("bn1", mid_ch, norm)
            .relu("mid_relu1")
            .conv("conv2", 3, stride, mid_ch, mid_ch)
            .bn("bn2", mid_ch, norm)
            .relu("mid_relu2")
            .conv("conv3", 1, 1, mid_ch, out_ch)
            .bn("bn3", out_ch, norm);
        let label = format!(
            "bottleneck {in_ch}→{mid_ch}→{out_ch} s{stride} {}",
            skip_label(project)
        );
        Self::with_skip(label, main, in_ch, out_ch, stride, project, norm)
    }

    fn with_skip(
        label: String,
        main: Branch,
        in_ch: i64,
        out_ch: i64,
        stride: i64,
        project: bool,
        norm: BlockNorm,
    ) -> Result<Self, LayerError> {
        // The block's Saved is [sum, out_relu]; a Residual's is [body]; a
        // Projection's is [main, shortcut]; a Chain's has one child per layer.
        let (sum, bns): (Box<dyn CertLayer>, Vec<BlockBn>) = if project {
            let shortcut = Branch::new()
                .conv("conv", 1, stride, in_ch, out_ch)
                .bn("bn", out_ch, norm);
            let mut bns = Vec::new();
            for (pre, branch, b) in [("main", 0, &main), ("shortcut", 1, &shortcut)] {
                for (name, ch, i) in &b.bns {
                    bns.push(BlockBn {
                        name: format!("{pre}.{name}"),
                        ch: *ch,
                        path: vec![0, branch, *i],
                    });
                }
            }
            let sum = Projection {
                main: Box::new(main.chain),
                shortcut: Box::new(shortcut.chain),
            };
            (Box::new(sum), bns)
        } else {
            if stride != 1 || in_ch != out_ch {
                return Err(LayerError(format!(
                    "{label}: an identity skip needs stride 1 and equal channels \
                     ({in_ch}→{out_ch}, stride {stride}); project the skip"
                )));
            }
            let bns = main
                .bns
                .iter()
                .map(|(name, ch, i)| BlockBn {
                    name: name.clone(),
                    ch: *ch,
                    path: vec![0, 0, *i],
                })
                .collect();
            let sum = Residual {
                body: Box::new(main.chain),
            };
            (Box::new(sum), bns)
        };
        Ok(ResidualBlock { label, sum, bns })
    }
}

impl ResidualBlock {
    /// The post-residual ReLU's backward from a block's `Saved` (`[sum,
    /// out_relu]`): its `dx` is the cotangent of the sum, `e`.
    pub fn out_relu_backward(
        fb: &mut FuncBuilder,
        saved: &Saved,
        dy: ValueId,
    ) -> EmitResult<Grads> {
        let sum_out = saved.children[0].output();
        Relu.backward(fb, sum_out, &[], &saved.children[1], dy)
    }
}

fn skip_label(project: bool) -> &'static str {
    if project {
        "(1×1 projection skip)"
    } else {
        "(identity skip)"
    }
}

/// A block's conv: bias-free, symmetric padding.
pub fn block_conv(k: i64, stride: i64, in_ch: i64, out_ch: i64) -> Conv2d {
    Conv2d {
        k,
        stride,
        padding: Padding::Symmetric,
        in_ch,
        out_ch,
        bias: false,
    }
}

impl CertLayer for ResidualBlock {
    fn name(&self) -> String {
        self.label.clone()
    }
    fn output_type(&self, input: &TensorType) -> Result<TensorType, LayerError> {
        self.sum.output_type(input)
    }
    fn params(&self, input: &TensorType) -> Vec<ParamSpec> {
        self.sum.params(input)
    }
    fn forward(
        &self,
        fb: &mut FuncBuilder,
        x: ValueId,
        params: &[ValueId],
        sites: &mut Sites,
    ) -> EmitResult<Saved> {
        let s = self.sum.forward(fb, x, params, sites)?;
        let r = sites.scoped("out_relu", |sites| Relu.forward(fb, s.output(), &[], sites))?;
        Ok(Saved {
            output: Some(r.output()),
            values: Vec::new(),
            children: vec![s, r],
        })
    }
    fn backward(
        &self,
        fb: &mut FuncBuilder,
        x: ValueId,
        params: &[ValueId],
        saved: &Saved,
        dy: ValueId,
    ) -> EmitResult<Grads> {
        let e = Self::out_relu_backward(fb, saved, dy)?;
        self.sum.backward(fb, x, params, &saved.children[0], e.dx)
    }
}
