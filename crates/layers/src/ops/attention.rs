//! Transformer token ops: multi-head self-attention (`MultiHeadSelfAttention`,
//! docs/conventions.md §11) and the ViT patch embedding (`PatchEmbed`, docs/conventions.md §4; docs/nets.md §8),
//! each with its hand-written backward map, plus the token-level emission
//! helpers they are built from (dense over the last axis, head split/merge,
//! per-head matmul, row softmax and its VJP); their catalog cases and negative
//! controls.

use crate::combinators::ReplacedBackward;
use crate::emit::{Emit, EmitResult};
use crate::layer::{CertLayer, Grads, Init, LayerError, ParamSpec, Saved, Sites};
use ir::{ConvAttrs, ConvDims, DotDims, FuncBuilder, TensorType, UnaryOp, ValueId};

// ---------------------------------------------------------------------------
// Emission helpers shared by the token ops (and SE's two dense layers).
// ---------------------------------------------------------------------------

/// `y = x·W + b` over the last axis of `x` (`[…, in]`, W `[in, out]`, b `[out]`):
/// the docs/conventions.md §1 dense convention (weights stored [in, out]).
pub fn dense_last_axis(
    fb: &mut FuncBuilder,
    x: ValueId,
    w: ValueId,
    b: ValueId,
) -> EmitResult<ValueId> {
    let rank = fb.shape(x).len() as i64;
    let xw = fb.matmul(x, w, rank - 1, 0)?;
    let shape = fb.shape(xw);
    let bb = fb.bcast(b, &[rank - 1], &shape)?;
    fb.add(xw, bb)
}

/// VJP of [`dense_last_axis`]: `(dx, dW, db) = (dy·Wᵀ, Σ xᵀ·dy, Σ dy)`, the
/// sums running over every leading (batch/token) axis.
pub fn dense_last_axis_back(
    fb: &mut FuncBuilder,
    x: ValueId,
    w: ValueId,
    dy: ValueId,
) -> EmitResult<(ValueId, ValueId, ValueId)> {
    let rank = fb.shape(x).len() as i64;
    let lead: Vec<i64> = (0..rank - 1).collect();
    let dx = fb.matmul(dy, w, rank - 1, 1)?;
    // Contracting every leading axis of x with the same axis of dy leaves
    // x's free axis (in) first and dy's (out) second: [in, out], W's layout.
    let dw = fb.dot(
        x,
        dy,
        DotDims {
            lhs_contracting: lead.clone(),
            rhs_contracting: lead.clone(),
            ..Default::default()
        },
    )?;
    let db = fb.reduce_sum(dy, &lead)?;
    Ok((dx, dw, db))
}

/// `[N,T,D] → [N,H,T,d]`: the D axis cut into H contiguous chunks of
/// d = D/H (head h owns features `h·d .. (h+1)·d`, exactly the slicing of
/// docs/conventions.md §11), heads moved next to the batch axis.
pub fn split_heads(fb: &mut FuncBuilder, x: ValueId, heads: i64) -> EmitResult<ValueId> {
    let s = fb.shape(x);
    let (n, t, d) = (s[0], s[1], s[2]);
    let r = fb.reshape(x, &[n, t, heads, d / heads])?;
    fb.transpose(r, &[0, 2, 1, 3])
}

/// Inverse of [`split_heads`]: `[N,H,T,d] → [N,T,H·d]` (head concatenation).
pub fn merge_heads(fb: &mut FuncBuilder, xh: ValueId) -> EmitResult<ValueId> {
    let s = fb.shape(xh);
    let (n, h, t, d) = (s[0], s[1], s[2], s[3]);
    let tr = fb.transpose(xh, &[0, 2, 1, 3])?;
    fb.reshape(tr, &[n, t, h * d])
}

/// Per-(example, head) matrix product of two `[N,H,·,·]` tensors, contracting
/// `a`'s axis `ca` with `b`'s axis `cb` (each 2 or 3): result
/// `[N, H, a's free axis, b's free axis]`.
pub fn head_matmul(
    fb: &mut FuncBuilder,
    a: ValueId,
    b: ValueId,
    ca: i64,
    cb: i64,
) -> EmitResult<ValueId> {
    fb.dot(
        a,
        b,
        DotDims {
            lhs_batch: vec![0, 1],
            rhs_batch: vec![0, 1],
            lhs_contracting: vec![ca],
            rhs_contracting: vec![cb],
        },
    )
}

/// Softmax over the last axis, `exp(z) / Σ exp(z)` with NO max subtraction
/// (docs/conventions.md §11: the reference render does not stabilise).
pub fn softmax_rows(fb: &mut FuncBuilder, z: ValueId) -> EmitResult<ValueId> {
    let shape = fb.shape(z);
    let last = shape.len() as i64 - 1;
    let e = fb.unary(UnaryOp::Exponential, z)?;
    let sum = fb.reduce_sum(e, &[last])?;
    let keep: Vec<i64> = (0..last).collect();
    let sum_b = fb.bcast(sum, &keep, &shape)?;
    fb.div(e, sum_b)
}

/// Row-softmax VJP: `dz = p ⊙ (dp − Σ_row p⊙dp)`.
pub fn softmax_rows_back(fb: &mut FuncBuilder, p: ValueId, dp: ValueId) -> EmitResult<ValueId> {
    let shape = fb.shape(p);
    let last = shape.len() as i64 - 1;
    let pdp = fb.mul(p, dp)?;
    let row = fb.reduce_sum(pdp, &[last])?;
    let keep: Vec<i64> = (0..last).collect();
    let row_b = fb.bcast(row, &keep, &shape)?;
    let centred = fb.sub(dp, row_b)?;
    fb.mul(p, centred)
}

// ---------------------------------------------------------------------------
// Multi-head self-attention.
// ---------------------------------------------------------------------------

/// The per-head forward values the attention core's backward reads, all
/// `[N,H,T,·]`: queries, keys, values `[N,H,T,d]`, probabilities `[N,H,Tq,Tk]`.
#[derive(Clone, Copy, Debug)]
pub struct HeadTensors {
    pub q: ValueId,
    pub k: ValueId,
    pub v: ValueId,
    pub p: ValueId,
}

/// The backward of the attention core `(Q_h, K_h, V_h) ↦ softmax(Q_h K_hᵀ·c)·V_h`:
/// from the per-head output cotangent `[N,H,Tq,d]` and the score scale c to
/// `(dQ_h, dK_h, dV_h)`.
pub type CoreBack =
    fn(&mut FuncBuilder, &HeadTensors, ValueId, f64) -> EmitResult<(ValueId, ValueId, ValueId)>;

/// The attention core's VJP:
/// `dP = dO·V_hᵀ`, `dV_h = Pᵀ·dO`, `dS = c·P⊙(dP − Σ_row P⊙dP)`,
/// `dQ_h = dS·K_h`, `dK_h = dSᵀ·Q_h` (the scale c = 1/√d lands on both dQ and dK
/// because it multiplies the score, which is bilinear in Q and K).
pub fn attention_core_back(
    fb: &mut FuncBuilder,
    h: &HeadTensors,
    d_out: ValueId,
    score_scale: f64,
) -> EmitResult<(ValueId, ValueId, ValueId)> {
    let dp = head_matmul(fb, d_out, h.v, 3, 3)?; // [N,H,Tq,Tk]
    let dv = head_matmul(fb, h.p, d_out, 2, 2)?; // Σ_q P[q,k]·dO[q,·] → [N,H,Tk,d]
    let ds = softmax_rows_back(fb, h.p, dp)?;
    let ds = fb.scale(ds, score_scale)?;
    let dq = head_matmul(fb, ds, h.k, 3, 2)?; // Σ_k dS[q,k]·K[k,·] → [N,H,Tq,d]
    let dk = head_matmul(fb, ds, h.q, 2, 2)?; // Σ_q dS[q,k]·Q[q,·] → [N,H,Tk,d]
    Ok((dq, dk, dv))
}

/// ViT multi-head self-attention on tokens `[N,T,D]`: Q,K,V,O projections
/// (W `[D,D]` stored [in,out], bias `[D]`), `heads` heads of width d = D/heads,
/// scores `Q_h·K_hᵀ/√d`, row softmax over keys (no max subtraction), `P·V_h`,
/// heads concatenated, output projection. Globally smooth: no kink sites.
pub struct MultiHeadSelfAttention {
    pub dim: i64,
    pub heads: i64,
}

/// Indices into `Saved::values` of the attention forward.
pub mod saved_index {
    pub const Q_HEADS: usize = 0;
    pub const K_HEADS: usize = 1;
    pub const V_HEADS: usize = 2;
    pub const PROBS: usize = 3;
    /// Concatenated head outputs `[N,T,D]` (the output projection's input).
    pub const CONCAT: usize = 4;
}

impl MultiHeadSelfAttention {
    fn head_dim(&self) -> i64 {
        self.dim / self.heads
    }

    /// The score scale `1/√d`.
    pub fn score_scale(&self) -> f64 {
        1.0 / (self.head_dim() as f64).sqrt()
    }

    /// The backward map with the attention core's VJP supplied by `core`
    /// ([`attention_core_back`] in [`CertLayer::backward`]); the projections'
    /// VJPs around it are fixed.
    pub fn backward_with_core(
        &self,
        fb: &mut FuncBuilder,
        x: ValueId,
        params: &[ValueId],
        saved: &Saved,
        dy: ValueId,
        core: CoreBack,
    ) -> EmitResult<Grads> {
        use saved_index::*;
        let (wq, wk, wv, wo) = (params[0], params[2], params[4], params[6]);
        let heads = HeadTensors {
            q: saved.values[Q_HEADS],
            k: saved.values[K_HEADS],
            v: saved.values[V_HEADS],
            p: saved.values[PROBS],
        };
        let (d_concat, dwo, dbo) = dense_last_axis_back(fb, saved.values[CONCAT], wo, dy)?;
        let d_out = split_heads(fb, d_concat, self.heads)?;
        let (dqh, dkh, dvh) = core(fb, &heads, d_out, self.score_scale())?;
        let dq = merge_heads(fb, dqh)?;
        let dk = merge_heads(fb, dkh)?;
        let dv = merge_heads(fb, dvh)?;
        let (dx_q, dwq, dbq) = dense_last_axis_back(fb, x, wq, dq)?;
        let (dx_k, dwk, dbk) = dense_last_axis_back(fb, x, wk, dk)?;
        let (dx_v, dwv, dbv) = dense_last_axis_back(fb, x, wv, dv)?;
        // x feeds all three projections: its cotangent is the sum (fan-in).
        let dx = fb.add(dx_q, dx_k)?;
        let dx = fb.add(dx, dx_v)?;
        Ok(Grads {
            dx,
            dparams: vec![dwq, dbq, dwk, dbk, dwv, dbv, dwo, dbo],
        })
    }
}

impl CertLayer for MultiHeadSelfAttention {
    fn name(&self) -> String {
        format!("mhsa D={} heads={}", self.dim, self.heads)
    }

    fn output_type(&self, input: &TensorType) -> Result<TensorType, LayerError> {
        if self.heads <= 0 || self.dim % self.heads != 0 {
            return Err(LayerError(format!(
                "mhsa: D={} is not divisible into {} heads",
                self.dim, self.heads
            )));
        }
        match input.shape.as_slice() {
            [_, _, d] if *d == self.dim => Ok(input.clone()),
            _ => Err(LayerError(format!(
                "mhsa: expects tokens [N,T,{}], got {input}",
                self.dim
            ))),
        }
    }

    fn params(&self, _: &TensorType) -> Vec<ParamSpec> {
        let d = self.dim;
        // Glorot-normal for a square [D,D] projection: std = √(2/(D+D)) = 1/√D,
        // which keeps the scores O(1) at unit-scale inputs.
        let w = Init::Normal {
            std: (1.0 / d as f64).sqrt(),
        };
        let mut out = Vec::new();
        for which in ["q", "k", "v", "o"] {
            out.push(ParamSpec::f32(format!("W{which}"), &[d, d], w.clone()));
            out.push(ParamSpec::f32(format!("b{which}"), &[d], Init::Zeros));
        }
        out
    }

    fn forward(
        &self,
        fb: &mut FuncBuilder,
        x: ValueId,
        params: &[ValueId],
        _: &mut Sites,
    ) -> EmitResult<Saved> {
        let q = dense_last_axis(fb, x, params[0], params[1])?;
        let k = dense_last_axis(fb, x, params[2], params[3])?;
        let v = dense_last_axis(fb, x, params[4], params[5])?;
        let qh = split_heads(fb, q, self.heads)?;
        let kh = split_heads(fb, k, self.heads)?;
        let vh = split_heads(fb, v, self.heads)?;
        let scores = head_matmul(fb, qh, kh, 3, 3)?; // [N,H,Tq,Tk]
        let scores = fb.scale(scores, self.score_scale())?;
        let p = softmax_rows(fb, scores)?;
        let oh = head_matmul(fb, p, vh, 3, 2)?; // [N,H,Tq,d]
        let concat = merge_heads(fb, oh)?;
        let y = dense_last_axis(fb, concat, params[6], params[7])?;
        Ok(Saved {
            output: Some(y),
            values: vec![qh, kh, vh, p, concat],
            children: Vec::new(),
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
        self.backward_with_core(fb, x, params, saved, dy, attention_core_back)
    }
}

// ---------------------------------------------------------------------------
// ViT patch embedding.
// ---------------------------------------------------------------------------

/// ViT patch embedding on NCHW images: a non-overlapping conv with kernel =
/// stride = `patch`, pad 0 (W `[dim, in_ch, P, P]` OIHW, bias `[dim]`) →
/// `[N,D,H/P,W/P]` → tokens `[N,T,D]` in row-major patch order (T = H/P·W/P),
/// a learned CLS token `[D]` prepended (T+1 tokens), a learned positional
/// embedding `[T+1, D]` added. Linear in (x, W, b, cls, pos) jointly affine.
pub struct PatchEmbed {
    pub patch: i64,
    pub in_ch: i64,
    pub dim: i64,
}

impl PatchEmbed {
    /// `(patches down, patches across)` for an `[N,C,H,W]` input.
    fn grid(&self, input: &TensorType) -> (i64, i64) {
        (input.shape[2] / self.patch, input.shape[3] / self.patch)
    }

    fn patch_conv_attrs(&self) -> ConvAttrs {
        ConvAttrs {
            window_strides: vec![self.patch, self.patch],
            ..ConvAttrs::plain2d()
        }
    }
}

impl CertLayer for PatchEmbed {
    fn name(&self) -> String {
        format!(
            "patch_embed P={} {}→{} +cls +pos",
            self.patch, self.in_ch, self.dim
        )
    }

    fn output_type(&self, input: &TensorType) -> Result<TensorType, LayerError> {
        match input.shape.as_slice() {
            [n, c, h, w] if *c == self.in_ch && h % self.patch == 0 && w % self.patch == 0 => {
                let t = (h / self.patch) * (w / self.patch);
                Ok(TensorType::f32(vec![*n, t + 1, self.dim]))
            }
            _ => Err(LayerError(format!(
                "patch_embed P={}: expects [N,{},H,W] with P | H and P | W, got {input}",
                self.patch, self.in_ch
            ))),
        }
    }

    fn params(&self, input: &TensorType) -> Vec<ParamSpec> {
        let (p, d) = (self.patch, self.dim);
        let (gh, gw) = self.grid(input);
        let tokens = gh * gw + 1;
        vec![
            ParamSpec::f32(
                "W",
                &[d, self.in_ch, p, p],
                Init::HeNormal {
                    fan_in: self.in_ch * p * p,
                },
            ),
            ParamSpec::f32("b", &[d], Init::Zeros),
            ParamSpec::f32("cls", &[d], Init::Normal { std: 0.02 }),
            ParamSpec::f32("pos", &[tokens, d], Init::Normal { std: 0.02 }),
        ]
    }

    fn forward(
        &self,
        fb: &mut FuncBuilder,
        x: ValueId,
        params: &[ValueId],
        _: &mut Sites,
    ) -> EmitResult<Saved> {
        let (w, b, cls, pos) = (params[0], params[1], params[2], params[3]);
        let n = fb.shape(x)[0];
        let (gh, gw) = self.grid(fb.ty(x));
        let (t, d) = (gh * gw, self.dim);
        let z = fb.conv(x, w, self.patch_conv_attrs())?; // [N,D,gh,gw]
        let zs = fb.shape(z);
        let bb = fb.bcast(b, &[1], &zs)?;
        let z = fb.add(z, bb)?;
        let flat = fb.reshape(z, &[n, d, t])?;
        let tokens = fb.transpose(flat, &[0, 2, 1])?; // [N,T,D]
        let cls_b = fb.bcast(cls, &[2], &[n, 1, d])?;
        let seq = fb.concat(&[cls_b, tokens], 1)?; // [N,T+1,D]
        let pos_b = fb.bcast(pos, &[1, 2], &[n, t + 1, d])?;
        let y = fb.add(seq, pos_b)?;
        Ok(Saved::leaf(y))
    }

    fn backward(
        &self,
        fb: &mut FuncBuilder,
        x: ValueId,
        params: &[ValueId],
        _: &Saved,
        dy: ValueId,
    ) -> EmitResult<Grads> {
        let w = params[0];
        let xs = fb.shape(x);
        let (n, p, d) = (xs[0], self.patch, self.dim);
        let (gh, gw) = self.grid(fb.ty(x));
        let t = gh * gw;

        // pos is added to every example: its gradient sums over the batch.
        let dpos = fb.reduce_sum(dy, &[0])?;
        // The CLS token is broadcast to every example at token 0.
        let d_cls_tok = fb.slice(dy, &[0, 0, 0], &[n, 1, d], &[1, 1, 1])?;
        let dcls = fb.reduce_sum(d_cls_tok, &[0, 1])?;
        // Patch tokens back to the conv output layout [N,D,gh,gw].
        let d_tokens = fb.slice(dy, &[0, 1, 0], &[n, t + 1, d], &[1, 1, 1])?;
        let d_flat = fb.transpose(d_tokens, &[0, 2, 1])?;
        let dz = fb.reshape(d_flat, &[n, d, gh, gw])?;
        let db = fb.reduce_sum(dz, &[0, 2, 3])?;

        // Weight gradient by the batch-into-feature conv:
        // dW[o,c,kh,kw] = Σ_{n,i,j} x[n,c,P·i+kh,P·j+kw]·dz[n,o,i,j] is a conv of
        // x (C as batch, N as feature) with dz (N as input feature, D as output
        // feature) dilated by P, whose output [P,P] window lands as [D,C,P,P].
        let wgrad = ConvAttrs {
            rhs_dilation: vec![p, p],
            dims: ConvDims::nchw_weight_gradient(),
            ..ConvAttrs::plain2d()
        };
        let dw = fb.conv(x, dz, wgrad)?;

        // Input gradient by the transposed conv: dz zero-upsampled by P
        // (lhs_dilation), padded [k−1−p, k−1−p] = [P−1, P−1] (pad 0, k = P), against
        // the spatially reversed kernel with its O/I roles swapped. Windows do not
        // overlap (k = stride), so each input pixel receives exactly one term.
        let w_rev = fb.reverse(w, &[2, 3])?;
        let dgrad = ConvAttrs {
            lhs_dilation: vec![p, p],
            padding: vec![(p - 1, p - 1), (p - 1, p - 1)],
            dims: ConvDims {
                kernel_input_feature: 0,
                kernel_output_feature: 1,
                ..ConvDims::nchw(2)
            },
            ..ConvAttrs::plain2d()
        };
        let dx = fb.conv(dz, w_rev, dgrad)?;
        Ok(Grads {
            dx,
            dparams: vec![dw, db, dcls, dpos],
        })
    }
}

/// The attention and patch-embedding configurations `certify --all-ops` ties,
/// with their negative controls.
pub fn catalog() -> Vec<super::OpCase> {
    use super::{NegativeControl, OpCase};
    vec![
        OpCase::f64(
            "mhsa",
            "D=8 H=2 (d=4), N=1, T=3",
            MultiHeadSelfAttention { dim: 8, heads: 2 },
            &[1, 3, 8],
        ),
        OpCase::f64(
            "mhsa",
            "D=8 H=2 (d=4), N=2, T=4",
            MultiHeadSelfAttention { dim: 8, heads: 2 },
            &[2, 4, 8],
        )
        .with_controls(mhsa_controls()),
        OpCase::f64(
            "mhsa",
            "D=8 H=4 (d=2, scale 1/√2), N=3, T=3",
            MultiHeadSelfAttention { dim: 8, heads: 4 },
            &[3, 3, 8],
        ),
        OpCase::exact(
            "patch_embed",
            "P=2, 1→4, N=1, 4×6 (6 patches + CLS)",
            PatchEmbed {
                patch: 2,
                in_ch: 1,
                dim: 4,
            },
            &[1, 1, 4, 6],
        ),
        OpCase::exact(
            "patch_embed",
            "P=2, 3→4, N=2, 8×4 (8 patches + CLS)",
            PatchEmbed {
                patch: 2,
                in_ch: 3,
                dim: 4,
            },
            &[2, 3, 8, 4],
        )
        // At N = 1, dy[0] IS the batch sum: the control is only meaningful
        // at N ≥ 2.
        .with_controls(vec![NegativeControl::new(
            "dpos = dy[0]",
            "P=2, 3→4, N=2, 8×4 (8 patches + CLS)",
            &[2, 3, 8, 4],
            patch(),
            patch_pos_from_first_example(patch()),
            &["dpos"],
        )]),
        OpCase::exact(
            "patch_embed",
            "P=4, 2→3, N=3, 8×4 (2 patches + CLS)",
            PatchEmbed {
                patch: 4,
                in_ch: 2,
                dim: 3,
            },
            &[3, 2, 8, 4],
        ),
    ]
}

// ---------------------------------------------------------------------------
// Negative controls.

// Attention: slips in the attention core's VJP (square T×T score matrices).

fn mhsa() -> MultiHeadSelfAttention {
    MultiHeadSelfAttention { dim: 8, heads: 2 }
}

fn mhsa_controls() -> Vec<super::NegativeControl> {
    use super::NegativeControl;
    let config = "D=8 H=2 (d=4), N=2, T=4";
    let input = [2, 4, 8];
    // dQ feeds dx (through Wqᵀ), dWq and dbq; dx is checked first.
    let cases: [(&str, CoreBack, &'static [&'static str]); 3] = [
        (
            "dQ without 1/√d",
            core_missing_scale_on_dq,
            &["dx", "dWq", "dbq"],
        ),
        ("dK = dS·Q", core_dk_untransposed, &["dx", "dWk", "dbk"]),
        ("dV = P·dO", core_dv_untransposed, &["dx", "dWv", "dbv"]),
    ];
    cases
        .into_iter()
        .map(|(name, core, blocks)| {
            NegativeControl::new(name, config, &input, mhsa(), with_core(core, name), blocks)
        })
        .collect()
}

/// MHSA whose backward uses a caller-supplied (buggy) attention-core VJP,
/// `label` saying what it gets wrong.
fn with_core(core: CoreBack, label: &str) -> ReplacedBackward<MultiHeadSelfAttention> {
    ReplacedBackward::new(mhsa(), label, move |l, fb, x, p, s, dy| {
        l.backward_with_core(fb, x, p, s, dy, core)
    })
}

/// The core VJP with the 1/√d applied to dK but forgotten on dQ.
fn core_missing_scale_on_dq(
    fb: &mut FuncBuilder,
    h: &HeadTensors,
    d_out: ValueId,
    c: f64,
) -> EmitResult<(ValueId, ValueId, ValueId)> {
    let dp = head_matmul(fb, d_out, h.v, 3, 3)?;
    let dv = head_matmul(fb, h.p, d_out, 2, 2)?;
    let ds = softmax_rows_back(fb, h.p, dp)?;
    let ds_scaled = fb.scale(ds, c)?;
    let dq = head_matmul(fb, ds, h.k, 3, 2)?; // bug: unscaled dS
    let dk = head_matmul(fb, ds_scaled, h.q, 2, 2)?;
    Ok((dq, dk, dv))
}

/// The core VJP with dK = dS·Q_h (contracting the key axis) instead of dSᵀ·Q_h:
/// it type-checks because the score matrix is square (Tq = Tk).
fn core_dk_untransposed(
    fb: &mut FuncBuilder,
    h: &HeadTensors,
    d_out: ValueId,
    c: f64,
) -> EmitResult<(ValueId, ValueId, ValueId)> {
    let dp = head_matmul(fb, d_out, h.v, 3, 3)?;
    let dv = head_matmul(fb, h.p, d_out, 2, 2)?;
    let ds = softmax_rows_back(fb, h.p, dp)?;
    let ds = fb.scale(ds, c)?;
    let dq = head_matmul(fb, ds, h.k, 3, 2)?;
    let dk = head_matmul(fb, ds, h.q, 3, 2)?; // bug: should contract axis 2
    Ok((dq, dk, dv))
}

/// The core VJP with dV = P·dO instead of Pᵀ·dO (same slip on the value path).
fn core_dv_untransposed(
    fb: &mut FuncBuilder,
    h: &HeadTensors,
    d_out: ValueId,
    c: f64,
) -> EmitResult<(ValueId, ValueId, ValueId)> {
    let dp = head_matmul(fb, d_out, h.v, 3, 3)?;
    let dv = head_matmul(fb, h.p, d_out, 3, 2)?; // bug: should contract axis 2
    let ds = softmax_rows_back(fb, h.p, dp)?;
    let ds = fb.scale(ds, c)?;
    let dq = head_matmul(fb, ds, h.k, 3, 2)?;
    let dk = head_matmul(fb, ds, h.q, 2, 2)?;
    Ok((dq, dk, dv))
}

// Patch embedding: positional-embedding gradient not summed over the batch.

fn patch() -> PatchEmbed {
    PatchEmbed {
        patch: 2,
        in_ch: 3,
        dim: 4,
    }
}

/// Patch embedding whose dpos takes example 0's cotangent only (the classic
/// "per-example descriptor at batch N" slip, docs/conventions.md §14).
fn patch_pos_from_first_example(pe: PatchEmbed) -> ReplacedBackward<PatchEmbed> {
    ReplacedBackward::new(pe, "dpos = dy[0]", |l, fb, x, p, s, dy| {
        let mut g = l.backward(fb, x, p, s, dy)?;
        let shape = fb.shape(dy);
        let first = fb.slice(dy, &[0, 0, 0], &[1, shape[1], shape[2]], &[1, 1, 1])?;
        g.dparams[3] = fb.reshape(first, &[shape[1], shape[2]])?;
        Ok(g)
    })
}
