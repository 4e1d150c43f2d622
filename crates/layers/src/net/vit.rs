//! The Vision Transformers as tables (docs/nets.md §8): ViT-Tiny, ViT-S and
//! ViT-B at any class count, image size (a multiple of the patch), patch size
//! and width, their names (`vit-tiny`, `vit-tiny-k1000`,
//! `vit-tiny-k10-32x32-p4`, `vit-s-k1000`), and the `BlockSpec` of each
//! block kind of `crate::blocks_vit`. All use LN ε 1e-5, GELU(tanh), Q/K/V/O
//! projections with biases, a learned CLS token and positional embedding,
//! and an MLP 4× the width (timm's `vit_{tiny,small,base}_patch16_224`).

use super::block::{at_least, positive_eps, BlockSpec, BuildCtx, FieldError};
use super::sizes::{Sizes, HW};
use super::{LayerSpec, NetSpec};
use crate::blocks_vit::{PatchEmbedSpec, VitBlockSpec, VitHeadSpec};
use crate::layer::{CertLayer, LayerError};
use crate::ops::pool::PoolBackward;
use ir::TensorType;

/// LN ε of every norm of the family.
const EPS: f64 = 1e-5;

/// The token width of an input `[_, T, D]`.
fn token_dim(input: &TensorType) -> Result<i64, LayerError> {
    match input.shape.as_slice() {
        [_, _, d] => Ok(*d),
        _ => Err(LayerError(format!("expects tokens [N,T,D], got {input}"))),
    }
}

impl BlockSpec for PatchEmbedSpec {
    fn build(&self, input: &TensorType, _: &BuildCtx) -> Result<Box<dyn CertLayer>, LayerError> {
        Ok(Box::new(PatchEmbedSpec::build(self, input)?))
    }
    fn validate(&self) -> Result<(), FieldError> {
        at_least("patch", self.patch, 1)?;
        at_least("dim", self.dim, 1)
    }
}

impl BlockSpec for VitBlockSpec {
    fn build(&self, input: &TensorType, ctx: &BuildCtx) -> Result<Box<dyn CertLayer>, LayerError> {
        let block = self.build_with(token_dim(input)?, ctx.drop_path, &mut |_, l| l)?;
        Ok(Box::new(block))
    }
    fn validate(&self) -> Result<(), FieldError> {
        at_least("heads", self.heads, 1)?;
        at_least("mlp", self.mlp, 1)?;
        positive_eps("eps", self.eps)
    }
    /// Both residual branches (attention and MLP), docs/conventions.md §13.
    fn drop_path_sites(&self) -> usize {
        2
    }
}

impl BlockSpec for VitHeadSpec {
    fn build(&self, input: &TensorType, _: &BuildCtx) -> Result<Box<dyn CertLayer>, LayerError> {
        Ok(Box::new(VitHeadSpec::build(self, token_dim(input)?)?))
    }
    fn validate(&self) -> Result<(), FieldError> {
        at_least("out_f", self.out_f, 1)?;
        positive_eps("eps", self.eps)
    }
}

/// One row of the family's table.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct VitConfig {
    /// The name's base (`vit-tiny`).
    pub base: &'static str,
    /// Token width D.
    pub dim: i64,
    pub depth: usize,
    pub heads: i64,
}

/// ViT-Tiny: D 192, 12 blocks, 3 heads (d = 64), MLP 768.
pub const VIT_TINY: VitConfig = VitConfig {
    base: "vit-tiny",
    dim: 192,
    depth: 12,
    heads: 3,
};
/// ViT-S: D 384, 12 blocks, 6 heads (d = 64), MLP 1536.
pub const VIT_S: VitConfig = VitConfig {
    base: "vit-s",
    dim: 384,
    depth: 12,
    heads: 6,
};
/// ViT-B: D 768, 12 blocks, 12 heads (d = 64), MLP 3072.
pub const VIT_B: VitConfig = VitConfig {
    base: "vit-b",
    dim: 768,
    depth: 12,
    heads: 12,
};

const CONFIGS: [VitConfig; 3] = [VIT_TINY, VIT_S, VIT_B];

/// The paper's patch (its image size is every family's, `sizes::HW`).
const PATCH: i64 = 16;

/// `base`, then `-w{dim}` unless the table's width, K and input size, and
/// `-p{P}` unless 16 (`Sizes`).
fn vit_name(c: &VitConfig, dim: i64, classes: i64, hw: (i64, i64), patch: i64) -> String {
    Sizes {
        width: (dim != c.dim).then_some(dim),
        classes,
        hw,
        patch: (patch != PATCH).then_some(patch),
    }
    .name(c.base)
}

/// ViT-Tiny at `classes` outputs, an `hw` image (a multiple of `patch`).
pub fn vit_tiny(classes: i64, hw: (i64, i64), patch: i64) -> NetSpec {
    vit(&VIT_TINY, VIT_TINY.dim, classes, hw, patch)
}

/// The family's net of row `c` at token width `dim` (the table's, or a
/// narrower one for tests: same tensors, names and blocks; `dim` must be a
/// multiple of the heads): `patch_embed` (conv P×P/sP 3→D + CLS + pos),
/// `blocks.0` … `blocks.{depth−1}` (pre-norm, MLP 4·D), `head` (LN → CLS →
/// dense D→K).
pub fn vit(c: &VitConfig, dim: i64, classes: i64, hw: (i64, i64), patch: i64) -> NetSpec {
    let mut layers = vec![(
        "patch_embed".to_string(),
        LayerSpec::PatchEmbed(PatchEmbedSpec { patch, dim }),
    )];
    for b in 0..c.depth {
        layers.push((
            format!("blocks.{b}"),
            LayerSpec::VitBlock(VitBlockSpec {
                heads: c.heads,
                mlp: 4 * dim,
                eps: EPS,
            }),
        ));
    }
    layers.push((
        "head".into(),
        LayerSpec::VitHead(VitHeadSpec {
            eps: EPS,
            out_f: classes,
        }),
    ));
    NetSpec {
        name: vit_name(c, dim, classes, hw, patch),
        input: (3, hw.0, hw.1),
        classes,
        label_smoothing: None,
        layers,
        pool_backward: PoolBackward::default(),
    }
}

/// The three nets at K = 10 and K = 1000, 224², patch 16.
pub fn catalog() -> Vec<NetSpec> {
    let mut out = Vec::new();
    for k in [10, 1000] {
        for c in &CONFIGS {
            out.push(vit(c, c.dim, k, HW, PATCH));
        }
    }
    out
}

/// A net of the family by name: the base, then optionally `-w{D}`, `-k{K}`,
/// `-{H}x{W}`, `-p{P}` in that order (`vit-tiny-k10-32x32-p4`). Only the
/// canonical spelling names a net.
pub fn by_name(name: &str) -> Option<NetSpec> {
    let c = CONFIGS
        .iter()
        .filter(|c| name == c.base || name.starts_with(&format!("{}-", c.base)))
        .max_by_key(|c| c.base.len())?;
    Sizes::build_named(name, &name[c.base.len()..], |s| {
        let (dim, patch) = (s.width.unwrap_or(c.dim), s.patch.unwrap_or(PATCH));
        vit(c, dim, s.classes, s.hw, patch)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The reference project's integers (docs/nets.md §8 for ViT-Tiny; timm's published
    /// counts for ViT-S/16 and ViT-B/16 at K = 1000), not computed here.
    /// 200 tensors: patch embed 4, per block 2 LNs × 2 + 4 projections × 2 +
    /// the MLP's 4, head LN 2 and dense 2.
    #[test]
    fn parameter_counts_match_the_reference_and_timm() {
        let count = |n: &str| by_name(n).unwrap().param_count().unwrap();
        assert_eq!(count("vit-tiny"), (200, 5_526_346));
        assert_eq!(count("vit-tiny-k1000"), (200, 5_717_416));
        assert_eq!(count("vit-s-k1000"), (200, 22_050_664));
        assert_eq!(count("vit-b-k1000"), (200, 86_567_656));
        let ps = by_name("vit-tiny").unwrap().param_specs().unwrap();
        let lns = ps.iter().filter(|p| p.name.ends_with("norm.gamma")).count();
        assert_eq!(lns, 25, "2 per block + the head's");
        let shape = |name: &str| super::super::param_shape(&ps, name);
        assert_eq!(shape("patch_embed.W"), [192, 3, 16, 16]);
        assert_eq!(shape("patch_embed.pos"), [197, 192]);
        assert_eq!(shape("patch_embed.cls"), [192]);
        assert_eq!(shape("blocks.11.attn.mhsa.Wq"), [192, 192]);
        assert_eq!(shape("blocks.0.mlp.fc1.W"), [192, 768]);
        assert_eq!(shape("head.fc.W"), [192, 10]);
        // No batch norm anywhere: nothing switches between train and eval.
        assert!(by_name("vit-tiny").unwrap().bn_sites().unwrap().is_empty());
    }

    #[test]
    fn names_parse_back_and_only_the_canonical_spelling_names_a_net() {
        let n = by_name("vit-tiny-k10-32x32-p4").unwrap();
        assert_eq!((n.input, n.classes), ((3, 32, 32), 10));
        assert_eq!(n, vit_tiny(10, (32, 32), 4));
        let ps = n.param_specs().unwrap();
        assert_eq!(ps[0].ty.shape, [192, 3, 4, 4]);
        assert_eq!(ps[3].ty.shape, [65, 192], "8×8 patches + CLS");
        assert_eq!(
            by_name("vit-tiny-w12-k10-32x32-p8").unwrap().name,
            "vit-tiny-w12-k10-32x32-p8"
        );
        assert_eq!(by_name("vit-b").unwrap(), vit(&VIT_B, 768, 10, HW, 16));
        for bad in [
            "vit-tiny-k10",
            "vit-tiny-p16",
            "vit-tiny-32x32",
            "vit-tiny-k10-32x32-p4-x",
            "vit-tiny-k0",
            "vit-tiny-w192",
            "vit-huge",
            "vit-tinyx",
        ] {
            assert!(by_name(bad).is_none(), "{bad}");
        }
        // An image that is not a multiple of the patch is refused by name.
        let e = by_name("vit-tiny-k10-30x32-p4")
            .unwrap()
            .chain()
            .err()
            .unwrap();
        assert!(e.0.contains("not a multiple of the patch"), "{e}");
    }

    #[test]
    fn geometry_is_the_papers() {
        let n = vit_tiny(10, HW, PATCH);
        let tys = n.chain().unwrap().types(&n.input_type(2)).unwrap();
        assert_eq!(tys[1].shape, [2, 197, 192], "196 patches + CLS");
        assert!(tys[1..=13].iter().all(|t| t.shape == [2, 197, 192]));
        assert_eq!(tys[14].shape, [2, 10]);
    }
}
