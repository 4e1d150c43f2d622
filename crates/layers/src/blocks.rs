//! Residual blocks of the ResNet family (docs/nets.md §3) as CertLayers:
//! the basic block (identity or 1×1 projection skip) and the v1.5 bottleneck.
//! A block is `relu(main(x) + skip(x))`, composed from the per-op layers with
//! the `Residual` / `Projection` combinators, so its backward map is the
//! composition of certified leaf backwards and nothing block-specific is
//! hand-written here.

use crate::combinators::{Chain, Projection, Residual};
use crate::emit::EmitResult;
use crate::layer::{BlockBn, CertLayer, Grads, LayerError, ParamSpec, Saved, Sites};
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

/// `post(sum(x))` where `sum` is a `Residual` (identity skip) or a
/// `Projection` (a skip branch of its own) and `post` the layers after the
/// sum (the ResNets: one ReLU, `out_relu`).
///
/// Kink sites, under the block's name: `mid_relu.pre_relu` (basic) or
/// `mid_relu1.pre_relu`, `mid_relu2.pre_relu` (bottleneck) inside the main
/// branch (prefixed `main.` when the skip projects), and `out_relu.pre_relu`,
/// the post-residual ReLU. Parameters: the main branch's convs and BNs in
/// forward order, then (projection) the skip's conv and BN, prefixed `main.` /
/// `shortcut.`, then the post layers' under their names.
pub struct ResidualBlock {
    /// `conv3×3 … BN` basic / bottleneck, with its configuration in words.
    pub label: String,
    pub sum: Box<dyn CertLayer>,
    /// Run on the sum in order, each scoped by its name; its `Saved` is the
    /// block's children `1..`.
    pub post: Vec<(String, Box<dyn CertLayer>)>,
}

/// The main branch as it is assembled.
struct Branch {
    chain: Chain,
}

impl Branch {
    fn new() -> Self {
        Branch {
            chain: Chain::new(),
        }
    }
    fn conv(mut self, name: &str, k: i64, stride: i64, in_ch: i64, out_ch: i64) -> Self {
        self.chain = self.chain.push(name, block_conv(k, stride, in_ch, out_ch));
        self
    }
    fn bn(mut self, name: &str, ch: i64, norm: BlockNorm) -> Self {
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
        let sum: Box<dyn CertLayer> = if project {
            let shortcut = Branch::new()
                .conv("conv", 1, stride, in_ch, out_ch)
                .bn("bn", out_ch, norm);
            Box::new(Projection {
                main: Box::new(main.chain),
                shortcut: Box::new(shortcut.chain),
            })
        } else {
            if stride != 1 || in_ch != out_ch {
                return Err(LayerError(format!(
                    "{label}: an identity skip needs stride 1 and equal channels \
                     ({in_ch}→{out_ch}, stride {stride}); project the skip"
                )));
            }
            Box::new(Residual::new(Box::new(main.chain)))
        };
        Ok(ResidualBlock {
            label,
            sum,
            post: Self::relu_after(),
        })
    }

    /// The ResNets' post-sum layers: one ReLU, `out_relu`.
    pub fn relu_after() -> Vec<(String, Box<dyn CertLayer>)> {
        vec![("out_relu".into(), Box::new(Relu))]
    }
}

impl ResidualBlock {
    /// The post-residual ReLU's backward from a ResNet block's `Saved`
    /// (`[sum, out_relu]`): its `dx` is the cotangent of the sum, `e`.
    pub fn out_relu_backward(
        fb: &mut FuncBuilder,
        saved: &Saved,
        dy: ValueId,
    ) -> EmitResult<Grads> {
        let sum_out = saved.children[0].output();
        Relu.backward(fb, sum_out, &[], &saved.children[1], dy)
    }

    /// The input type of each post layer (the sum's output first).
    fn post_types(&self, input: &TensorType) -> Result<Vec<TensorType>, LayerError> {
        let mut tys = vec![self.sum.output_type(input)?];
        for (name, l) in &self.post {
            let next = l
                .output_type(tys.last().expect("non-empty"))
                .map_err(|e| LayerError(format!("{name}: {e}")))?;
            tys.push(next);
        }
        Ok(tys)
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
        Ok(self.post_types(input)?.pop().expect("non-empty"))
    }
    fn params(&self, input: &TensorType) -> Vec<ParamSpec> {
        let mut out = self.sum.params(input);
        if let Ok(tys) = self.post_types(input) {
            for ((name, l), ty) in self.post.iter().zip(&tys) {
                for mut p in l.params(ty) {
                    p.name = format!("{name}.{}", p.name);
                    out.push(p);
                }
            }
        }
        out
    }
    fn batch_norms(&self) -> Vec<BlockBn> {
        let mut out: Vec<BlockBn> = self
            .sum
            .batch_norms()
            .into_iter()
            .map(|b| b.under("", 0))
            .collect();
        for (i, (name, l)) in self.post.iter().enumerate() {
            out.extend(l.batch_norms().into_iter().map(|b| b.under(name, i + 1)));
        }
        out
    }
    fn forward(
        &self,
        fb: &mut FuncBuilder,
        x: ValueId,
        params: &[ValueId],
        sites: &mut Sites,
    ) -> EmitResult<Saved> {
        let tys = self
            .post_types(fb.ty(x))
            .expect("types were checked by output_type");
        let n_sum = self.sum.params(fb.ty(x)).len();
        let s = self.sum.forward(fb, x, &params[..n_sum], sites)?;
        let mut h = s.output();
        let mut children = vec![s];
        let mut at = n_sum;
        for ((name, l), ty) in self.post.iter().zip(&tys) {
            let n = l.params(ty).len();
            let r = sites.scoped(name, |sites| l.forward(fb, h, &params[at..at + n], sites))?;
            at += n;
            h = r.output();
            children.push(r);
        }
        Ok(Saved::composite(h, children))
    }
    fn backward(
        &self,
        fb: &mut FuncBuilder,
        x: ValueId,
        params: &[ValueId],
        saved: &Saved,
        dy: ValueId,
    ) -> EmitResult<Grads> {
        let tys = self
            .post_types(fb.ty(x))
            .expect("types were checked by output_type");
        let n_sum = self.sum.params(fb.ty(x)).len();
        let counts: Vec<usize> = self
            .post
            .iter()
            .zip(&tys)
            .map(|((_, l), ty)| l.params(ty).len())
            .collect();
        let mut e = dy;
        let mut post_grads: Vec<Vec<ValueId>> = vec![Vec::new(); self.post.len()];
        let mut end = params.len();
        for i in (0..self.post.len()).rev() {
            let start = end - counts[i];
            let input = saved.children[i].output();
            let g = self.post[i].1.backward(
                fb,
                input,
                &params[start..end],
                &saved.children[i + 1],
                e,
            )?;
            e = g.dx;
            post_grads[i] = g.dparams;
            end = start;
        }
        let g = self
            .sum
            .backward(fb, x, &params[..n_sum], &saved.children[0], e)?;
        let mut dparams = g.dparams;
        dparams.extend(post_grads.concat());
        Ok(Grads { dx: g.dx, dparams })
    }
}
