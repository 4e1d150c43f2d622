//! The Vision Transformer's blocks (docs/conventions.md §10, §11; docs/nets.md §8) as
//! CertLayers: the patch embedding with its CLS token and learned positional
//! embedding (`PatchEmbedSpec`, the leaf `ops::attention::PatchEmbed`), the
//! pre-norm encoder block (`VitBlockSpec`: `x + MHSA(LN x)`, then
//! `+ MLP(LN ·)`), and the head (`VitHeadSpec`: final LN → CLS token →
//! dense), plus the one leaf this family adds, `ClsToken` (token 0 of
//! `[N,T,D]`). Every block is a `Chain` of certified leaves (row LN, MHSA,
//! dense over the last axis, GELU-tanh) with its residual adds made by
//! [`residual`], so its backward map is the composition of certified leaf
//! backwards; nothing block-specific is hand-written here.
//!
//! Layers inside a block are named by role: `attn.norm`, `attn.mhsa`,
//! `mlp.norm`, `mlp.fc1`, `mlp.act`, `mlp.fc2` (parameters
//! `blocks.5.attn.mhsa.Wq`, `blocks.5.mlp.fc1.W`); the head's are `norm`,
//! `cls`, `fc`. Every op is smooth: the family has no kink sites.

use crate::block_parts::{check_eps, check_positive, LayerSwap, SwapChain};
use crate::combinators::{Chain, LabelledBlock, Residual};
use crate::emit::{Emit, EmitResult};
use crate::layer::{CertLayer, Grads, LayerError, Saved, Sites};
use crate::ops::activation::{Gelu, GeluForm};
use crate::ops::attention::{MultiHeadSelfAttention, PatchEmbed};
use crate::ops::dense::Dense;
use crate::ops::norm::{LayerNorm, LnKind};
use ir::{FuncBuilder, TensorType, ValueId};
use serde::{Deserialize, Serialize};

// ---------------------------------------------------------------------------
// The CLS-token read-out.
// ---------------------------------------------------------------------------

/// `[N,T,D] → [N,D]`: the CLS token (token 0). Backward: the cotangent lands
/// on token 0, every other token's is zero. Linear (pure data movement).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ClsToken;

impl CertLayer for ClsToken {
    fn name(&self) -> String {
        "cls_token".into()
    }
    fn output_type(&self, input: &TensorType) -> Result<TensorType, LayerError> {
        match input.shape.as_slice() {
            [n, t, d] if *t >= 1 => Ok(TensorType::f32(vec![*n, *d])),
            _ => Err(LayerError(format!(
                "cls_token: expects tokens [N,T,D] with T ≥ 1, got {input}"
            ))),
        }
    }
    fn forward(
        &self,
        fb: &mut FuncBuilder,
        x: ValueId,
        _: &[ValueId],
        _: &mut Sites,
    ) -> EmitResult<Saved> {
        let s = fb.shape(x);
        let (n, d) = (s[0], s[2]);
        let tok = fb.slice(x, &[0, 0, 0], &[n, 1, d], &[1, 1, 1])?;
        Ok(Saved::leaf(fb.reshape(tok, &[n, d])?))
    }
    fn backward(
        &self,
        fb: &mut FuncBuilder,
        x: ValueId,
        _: &[ValueId],
        _: &Saved,
        dy: ValueId,
    ) -> EmitResult<Grads> {
        let s = fb.shape(x);
        let (n, t, d) = (s[0], s[1], s[2]);
        let dy3 = fb.reshape(dy, &[n, 1, d])?;
        // Zero cotangent for tokens 1..T: pad token 0's on the high side.
        let dx = fb.pad(dy3, &[0, 0, 0], &[0, t - 1, 0], &[0, 0, 0])?;
        Ok(Grads::input_only(dx))
    }
}

// ---------------------------------------------------------------------------
// Blocks.
// ---------------------------------------------------------------------------

/// A residual sub-layer `x + branch(x)`: the one place a ViT block adds its
/// skip; with `drop_path`, `x + keep[n]·branch(x)` with the sub-layer's own
/// per-example keep input (docs/conventions.md §13: both sub-layers of a block are
/// drop-path sites, each with its own draw at the block's keep probability).
pub fn residual(branch: Chain, drop_path: bool) -> Box<dyn CertLayer> {
    Box::new(Residual {
        body: Box::new(branch),
        drop_path,
    })
}

/// A built ViT block (embedding, encoder block or head): its body and its
/// configuration in words. Its `Saved` is the body's own.
pub type VitBlock = LabelledBlock;

fn row_ln(dim: i64, eps: f64) -> Box<dyn CertLayer> {
    Box::new(LayerNorm {
        dim,
        eps,
        kind: LnKind::Row,
    })
}

/// The patch embedding: conv `patch`×`patch`/s`patch` (pad 0, with bias) to
/// `dim`, patches as tokens in row-major order, a learned CLS token
/// prepended and a learned positional embedding `[T+1, dim]` added
/// (parameters `W`, `b`, `cls`, `pos`). The image size must be a multiple of
/// the patch.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PatchEmbedSpec {
    pub patch: i64,
    pub dim: i64,
}

impl PatchEmbedSpec {
    /// The layer for an NCHW input of type `input` (`[_, C, H, W]`, P | H, P | W).
    pub fn build(&self, input: &TensorType) -> Result<PatchEmbed, LayerError> {
        check_positive("patch_embed", &[("patch", self.patch), ("dim", self.dim)])?;
        let [_, c, h, w] = input.shape[..] else {
            return Err(LayerError(format!(
                "patch_embed: expects an NCHW image, got {input}"
            )));
        };
        if h % self.patch != 0 || w % self.patch != 0 {
            return Err(LayerError(format!(
                "patch_embed: the image {h}×{w} is not a multiple of the patch {p}×{p}",
                p = self.patch
            )));
        }
        Ok(PatchEmbed {
            patch: self.patch,
            in_ch: c,
            dim: self.dim,
        })
    }
}

/// The pre-norm encoder block on tokens `[N,T,D]` (D from the input):
/// `h = x + MHSA(LN₁ x)` (`heads` heads of width D/heads, scale 1/√(D/heads),
/// Q/K/V/O with biases), then `y = h + fc2(GELU_tanh(fc1(LN₂ h)))` with the
/// MLP hidden width `mlp`; both LNs over D with ε `eps`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct VitBlockSpec {
    pub heads: i64,
    pub mlp: i64,
    pub eps: f64,
}

impl VitBlockSpec {
    pub fn build(&self, dim: i64) -> Result<VitBlock, LayerError> {
        self.build_with(dim, false, &mut |_, l| l)
    }

    /// The block with each layer passed through `swap` (by its block-wide
    /// name, `attn.mhsa`, `mlp.act`, …) as it is built; with `drop_path`
    /// each residual branch takes a keep input (`attn.drop_path`,
    /// `mlp.drop_path`, after that sub-layer's parameters).
    pub fn build_with(
        &self,
        dim: i64,
        drop_path: bool,
        swap: LayerSwap,
    ) -> Result<VitBlock, LayerError> {
        let (attn, mlp) = self.branches(dim, swap)?;
        let body = Chain {
            layers: vec![
                ("attn".into(), residual(attn, drop_path)),
                ("mlp".into(), residual(mlp, drop_path)),
            ],
        };
        Ok(VitBlock {
            label: format!(
                "vit block D={dim} heads={} mlp={} ε={:e}{}",
                self.heads,
                self.mlp,
                self.eps,
                if drop_path { " +drop-path" } else { "" }
            ),
            body: Box::new(body),
        })
    }

    /// The two residual branches alone, `(attn, mlp)`: `norm`, `mhsa`, then
    /// `norm`, `fc1`, `act`, `fc2` (each layer through `swap` by its
    /// block-wide name).
    pub fn branches(&self, dim: i64, swap: LayerSwap) -> Result<(Chain, Chain), LayerError> {
        let what = "vit block";
        check_positive(
            what,
            &[("dim", dim), ("heads", self.heads), ("mlp", self.mlp)],
        )?;
        if dim % self.heads != 0 {
            return Err(LayerError(format!(
                "{what}: D = {dim} is not divisible into {} heads",
                self.heads
            )));
        }
        check_eps(what, self.eps)?;
        let mut attn = SwapChain::with_prefix("attn", &mut *swap);
        attn.push("norm", row_ln(dim, self.eps));
        attn.push(
            "mhsa",
            Box::new(MultiHeadSelfAttention {
                dim,
                heads: self.heads,
            }),
        );
        let attn = attn.chain;
        let mut mlp = SwapChain::with_prefix("mlp", &mut *swap);
        mlp.push("norm", row_ln(dim, self.eps));
        let dense = |in_f, out_f| -> Box<dyn CertLayer> {
            Box::new(Dense {
                in_f,
                out_f,
                bias: true,
            })
        };
        mlp.push("fc1", dense(dim, self.mlp));
        mlp.push(
            "act",
            Box::new(Gelu {
                form: GeluForm::Tanh,
            }),
        );
        mlp.push("fc2", dense(self.mlp, dim));
        Ok((attn, mlp.chain))
    }
}

/// The head on tokens `[N,T,D]`: LN over D (ε `eps`) → the CLS token →
/// dense D → `out_f` with bias (layers `norm`, `cls`, `fc`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct VitHeadSpec {
    pub eps: f64,
    pub out_f: i64,
}

impl VitHeadSpec {
    pub fn build(&self, dim: i64) -> Result<VitBlock, LayerError> {
        self.build_with(dim, &mut |_, l| l)
    }

    pub fn build_with(&self, dim: i64, swap: LayerSwap) -> Result<VitBlock, LayerError> {
        let what = "vit head";
        check_positive(what, &[("dim", dim), ("out_f", self.out_f)])?;
        check_eps(what, self.eps)?;
        let mut l = SwapChain::new(&mut *swap);
        l.push("norm", row_ln(dim, self.eps));
        l.push("cls", Box::new(ClsToken));
        l.push(
            "fc",
            Box::new(Dense {
                in_f: dim,
                out_f: self.out_f,
                bias: true,
            }),
        );
        Ok(VitBlock {
            label: format!(
                "vit head ln ε={:e} cls dense {dim}→{}",
                self.eps, self.out_f
            ),
            body: Box::new(l.chain),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(b: &dyn CertLayer, input: &[i64]) -> Vec<String> {
        b.params(&TensorType::f32(input.to_vec()))
            .into_iter()
            .map(|p| p.name)
            .collect()
    }

    #[test]
    fn vit_block_names_its_parameters_by_role() {
        let b = VitBlockSpec {
            heads: 2,
            mlp: 16,
            eps: 1e-5,
        }
        .build(8)
        .unwrap();
        assert_eq!(
            names(&b, &[1, 5, 8]),
            [
                "attn.norm.gamma",
                "attn.norm.beta",
                "attn.mhsa.Wq",
                "attn.mhsa.bq",
                "attn.mhsa.Wk",
                "attn.mhsa.bk",
                "attn.mhsa.Wv",
                "attn.mhsa.bv",
                "attn.mhsa.Wo",
                "attn.mhsa.bo",
                "mlp.norm.gamma",
                "mlp.norm.beta",
                "mlp.fc1.W",
                "mlp.fc1.b",
                "mlp.fc2.W",
                "mlp.fc2.b",
            ]
        );
        let bad = VitBlockSpec {
            heads: 3,
            mlp: 16,
            eps: 1e-5,
        };
        let e = bad.build(8).err().unwrap();
        assert!(e.0.contains("not divisible into 3 heads"), "{e}");
        let e = PatchEmbedSpec { patch: 4, dim: 8 }
            .build(&TensorType::f32(vec![1, 3, 30, 32]))
            .err()
            .unwrap();
        assert!(
            e.0.contains("30×32 is not a multiple of the patch 4×4"),
            "{e}"
        );
    }

    #[test]
    fn drop_path_gives_each_sub_layer_its_own_keep_input() {
        let spec = VitBlockSpec {
            heads: 2,
            mlp: 16,
            eps: 1e-5,
        };
        let b = spec.build_with(8, true, &mut |_, l| l).unwrap();
        let ps = b.params(&TensorType::f32(vec![3, 5, 8]));
        assert_eq!(ps.len(), 18);
        assert_eq!(ps[10].name, "attn.drop_path");
        assert_eq!(ps[17].name, "mlp.drop_path");
        assert_eq!(
            (ps[10].ty.shape.clone(), ps[17].ty.shape.clone()),
            (vec![3], vec![3])
        );
        // Without drop path, the plain block's 16 parameters in the same order.
        let plain: Vec<String> = names(&spec.build(8).unwrap(), &[3, 5, 8]);
        let kept: Vec<String> = ps
            .into_iter()
            .map(|p| p.name)
            .filter(|n| !n.ends_with("drop_path"))
            .collect();
        assert_eq!(kept, plain);
    }

    #[test]
    fn swap_sees_block_wide_names() {
        let mut seen = Vec::new();
        VitBlockSpec {
            heads: 1,
            mlp: 4,
            eps: 1e-5,
        }
        .build_with(2, false, &mut |name, l| {
            seen.push(name.to_string());
            l
        })
        .unwrap();
        assert_eq!(
            seen,
            [
                "attn.norm",
                "attn.mhsa",
                "mlp.norm",
                "mlp.fc1",
                "mlp.act",
                "mlp.fc2"
            ]
        );
    }
}
