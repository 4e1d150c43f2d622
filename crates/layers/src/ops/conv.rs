//! The convolution family: `Conv2d` (stride 1, 2, 4; symmetric or XLA-SAME
//! padding; odd and even kernels) and `DepthwiseConv2d`, the two
//! configurations of one `GroupedConv2d` (groups 1, or one per channel) whose
//! per-axis geometry, forward and hand-written closed-form backward map
//! (docs/conventions.md §2–§5) they share; the conv catalog and its negative controls.
//!
//! One geometry drives forward and backward. Per spatial axis of size `n`,
//! with kernel `k`, stride `s` and forward pad `[lo, hi]`, the forward reads
//! `y[i] = Σ_kh W[kh]·x[s·i + kh − lo]`. Its adjoint pieces are then fixed:
//! * input VJP: zero-upsample `dy` (`dy[i]` at `s·i`, interior `s−1`, plus
//!   `t_in` trailing zeros), then the stride-1 conv with the reversed,
//!   O/I-transposed kernel and pad `[k−1−lo, n−1−s·(out−1)+lo−t_in]`;
//! * weight VJP: the transpose trick — correlate the saved input (pad
//!   `[lo, hi_w]`) with the upsampled `dy` (`t_w` trailing zeros) as kernel.
//!
//! These reproduce the reference's forms: stride 1 `[k−1−p, p]`; stride 2
//! symmetric `[k−1−p, p]` on `pad(dy, high 1, interior 1)`; XLA-SAME `[p+1,
//! p−1]` (input) vs `[p−1, p+1]` (weight); even-kernel wgrad without the
//! trailing row and pad `[p, k−2−p]`; stride-4 wgrad at extent `4h−3`. They
//! also stay exact at odd input sizes, where the trailing zeros are trimmed so
//! that no pad goes negative.

use super::{NegativeControl, OpCase};
use crate::combinators::ReplacedBackward;
use crate::emit::{Emit, EmitResult};
use crate::layer::{CertLayer, Grads, Init, LayerError, ParamSpec, Saved, Sites};
use ir::{ConvAttrs, FuncBuilder, TensorType, TypeError, ValueId};

/// Which pixels a strided conv reads: the padding convention of the op.
///
/// `p = (k−1)/2` (floor). At stride 1 both conventions pad `[p, k−1−p]` (even
/// kernels get one more on the high side, so the output keeps the input size).
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Padding {
    /// torchvision / He et al.: stride 2 pads `[p, p]` (keeps the even phase of
    /// the stride-1 SAME conv); stride 4 exists only as the k=4 patchify conv
    /// with pad `[p−1, p−1] = [0, 0]` (ConvNeXt stem). Other strides are rejected.
    Symmetric,
    /// XLA / TF `'SAME'`: at stride 2 on an even input, decimateOdd ∘ conv —
    /// the odd phase of the stride-1 conv, pad `[p−1, k−1−p]` (odd k: the
    /// reference's `[p−1, p]`; k=1: `[−1, 0]`, a crop). Elsewhere XLA's rule:
    /// output `ceil(n/s)`, total pad `max((out−1)·s + k − n, 0)`, split
    /// `[total/2, total − total/2]` (symmetric `[p, p]` at odd inputs).
    XlaSame,
}

/// The geometry of one spatial axis: the forward pad and output size, and the
/// upsampling and pads of the two backward convolutions.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AxisGeometry {
    /// Input size along the axis.
    pub n: i64,
    pub k: i64,
    pub stride: i64,
    /// Forward pad `(low, high)`.
    pub pad: (i64, i64),
    /// Output size `(n + lo + hi − k) / s + 1`.
    pub out: i64,
    /// Trailing zeros after the upsampled cotangent of the input VJP.
    pub input_trailing: i64,
    /// Pad of the reversed-kernel conv of the input VJP.
    pub input_pad: (i64, i64),
    /// Trailing zeros after the upsampled cotangent of the weight VJP.
    pub weight_trailing: i64,
    /// Pad of the saved input in the weight VJP correlation.
    pub weight_pad: (i64, i64),
}

fn layer_err(msg: String) -> LayerError {
    LayerError(msg)
}

/// The largest kernel, stride or input extent of one conv axis.
pub const AXIS_MAX: i64 = 1 << 31;

/// `p = (k−1)/2` with floor division.
fn half(k: i64) -> i64 {
    (k - 1) / 2
}

/// The forward pad `(lo, hi)` of one axis of size `n`.
pub fn forward_pad(
    padding: Padding,
    k: i64,
    stride: i64,
    n: i64,
) -> Result<(i64, i64), LayerError> {
    if k < 1 || stride < 1 {
        return Err(layer_err(format!(
            "conv: kernel {k} and stride {stride} must be ≥ 1"
        )));
    }
    // Bounded so that the geometry's i64 arithmetic cannot overflow (a net
    // file may hold any integer); no real axis comes near 2³¹.
    if let Some(big) = [k, stride, n].into_iter().find(|&v| v > AXIS_MAX) {
        return Err(layer_err(format!(
            "conv: kernel {k}, stride {stride}, input size {n}: {big} is over the largest axis certgrad builds ({AXIS_MAX})"
        )));
    }
    let p = half(k);
    match (padding, stride) {
        (_, 1) => Ok((p, k - 1 - p)),
        (Padding::Symmetric, 2) => Ok((p, p)),
        (Padding::Symmetric, 4) if k == 4 => Ok((p - 1, p - 1)),
        (Padding::Symmetric, s) => Err(layer_err(format!(
            "conv: symmetric padding is defined for stride 1, 2 and the 4×4/s4 patchify, not k={k} s={s}"
        ))),
        // XLA-SAME stride 2 on an even input is decimateOdd ∘ conv
        // (docs/conventions.md §3): output i reads rows 2i+1+kh−p, so the pad is [p−1, k−1−p] for
        // every k ([−1, 0] at k=1 crops: the odd phase, as the reference defines
        // it). At odd inputs XLA SAME is symmetric, which the general rule gives.
        (Padding::XlaSame, 2) if n % 2 == 0 => Ok((p - 1, k - 1 - p)),
        (Padding::XlaSame, s) => {
            let out = (n + s - 1) / s;
            let total = ((out - 1) * s + k - n).max(0);
            Ok((total / 2, total - total / 2))
        }
    }
}

/// The full geometry of one axis (see the module comment for the formulas).
pub fn axis_geometry(
    padding: Padding,
    k: i64,
    stride: i64,
    n: i64,
) -> Result<AxisGeometry, LayerError> {
    let (lo, hi) = forward_pad(padding, k, stride, n)?;
    let span = n + lo + hi - k;
    if span < 0 {
        return Err(layer_err(format!(
            "conv: input size {n} with pad [{lo}, {hi}] is smaller than the kernel {k}"
        )));
    }
    let s = stride;
    let out = span / s + 1;
    // Last input row an upsampled cotangent row can reach, counted past the
    // last stored dy position s·(out−1): the room left for trailing zeros.
    let room = n - 1 - s * (out - 1) + lo;
    // The reference upsamples with s−1 trailing zeros (extent s·out); at odd
    // sizes that can overshoot, so trim to keep the high pad non-negative.
    let input_trailing = (s - 1).min(room);
    let input_pad = (k - 1 - lo, room - input_trailing);
    // Weight VJP: result length (n + lo + hi_w) − ext + 1 = k. Odd kernels
    // keep the trailing zeros (extent s·out), even kernels drop them (extent
    // s·(out−1)+1, docs/conventions.md §3 sWGradGeom); add zeros only if hi_w would go negative.
    let ext0 = s * (out - 1) + 1;
    let hi_w0 = k - 1 + ext0 - n - lo;
    let preferred = if k % 2 == 1 { s - 1 } else { 0 };
    let weight_trailing = preferred.max(-hi_w0).min(s - 1);
    let weight_pad = (lo, hi_w0 + weight_trailing);
    // Negative pads crop (StableHLO allows them): XLA-SAME k=1 at stride 2
    // reads the odd phase with forward pad [−1, 0].
    Ok(AxisGeometry {
        n,
        k,
        stride,
        pad: (lo, hi),
        out,
        input_trailing,
        input_pad,
        weight_trailing,
        weight_pad,
    })
}

/// Zero-upsample an NCHW cotangent: `dy[i]` lands at `s·i`, with `trailing`
/// zeros after the last row/column (`pad(dy, low 0, high t, interior s−1)`).
pub fn upsample(
    fb: &mut FuncBuilder,
    dy: ValueId,
    stride: i64,
    trailing: [i64; 2],
) -> EmitResult<ValueId> {
    if stride == 1 && trailing == [0, 0] {
        return Ok(dy);
    }
    fb.pad(
        dy,
        &[0, 0, 0, 0],
        &[0, 0, trailing[0], trailing[1]],
        &[0, 0, stride - 1, stride - 1],
    )
}

/// A 2-d NCHW/OIHW convolution with the given stride, pads and groups.
fn conv2d(
    fb: &mut FuncBuilder,
    lhs: ValueId,
    rhs: ValueId,
    stride: i64,
    pads: [(i64, i64); 2],
    feature_groups: i64,
    batch_groups: i64,
) -> EmitResult<ValueId> {
    let mut attrs = ConvAttrs::plain2d();
    attrs.window_strides = vec![stride, stride];
    attrs.padding = pads.to_vec();
    attrs.feature_group_count = feature_groups;
    attrs.batch_group_count = batch_groups;
    fb.conv(lhs, rhs, attrs)
}

fn spatial(t: &TensorType, what: &str) -> Result<(i64, i64, i64, i64), LayerError> {
    match t.shape[..] {
        [n, c, h, w] => Ok((n, c, h, w)),
        _ => Err(layer_err(format!("{what}: expects an NCHW input, got {t}"))),
    }
}

fn as_type_error(e: LayerError) -> TypeError {
    TypeError {
        op: "conv geometry",
        message: e.0,
    }
}

/// Per-axis geometry `[H, W]` of a conv at an NCHW input type.
fn geometry2d(
    padding: Padding,
    k: i64,
    stride: i64,
    h: i64,
    w: i64,
) -> Result<[AxisGeometry; 2], LayerError> {
    Ok([
        axis_geometry(padding, k, stride, h)?,
        axis_geometry(padding, k, stride, w)?,
    ])
}

/// A 2-d NCHW convolution with `groups` feature groups: OIHW kernel
/// `W [out_ch, in_ch/groups, k, k]`, optional bias `b [out_ch]`. The one
/// convolution behind [`Conv2d`] (`groups = 1`) and [`DepthwiseConv2d`]
/// (`groups = in_ch = out_ch`, one filter per channel): geometry, forward and
/// backward map are shared. Other group counts are rejected (their input VJP
/// needs a per-group O/I transpose that no op here emits).
#[derive(Clone, Debug, PartialEq)]
pub struct GroupedConv2d {
    pub k: i64,
    pub stride: i64,
    pub padding: Padding,
    pub in_ch: i64,
    pub out_ch: i64,
    pub groups: i64,
    pub bias: bool,
}

impl GroupedConv2d {
    /// The per-axis geometry at an NCHW input type; `what` names the layer in
    /// errors.
    pub fn geometry(
        &self,
        what: &str,
        input: &TensorType,
    ) -> Result<[AxisGeometry; 2], LayerError> {
        let (_, c, h, w) = spatial(input, what)?;
        if c != self.in_ch {
            return Err(layer_err(format!(
                "{what}: input has {c} channels, expected {}",
                self.in_ch
            )));
        }
        let g = self.groups;
        if g != 1 && (g != self.in_ch || g != self.out_ch) {
            return Err(layer_err(format!(
                "{what}: {g} groups is neither 1 (dense) nor one channel per group (depthwise)"
            )));
        }
        geometry2d(self.padding, self.k, self.stride, h, w)
    }

    fn output_type(&self, what: &str, input: &TensorType) -> Result<TensorType, LayerError> {
        let g = self.geometry(what, input)?;
        Ok(TensorType::f32(vec![
            input.shape[0],
            self.out_ch,
            g[0].out,
            g[1].out,
        ]))
    }

    fn params(&self) -> Vec<ParamSpec> {
        let per_group = self.in_ch / self.groups;
        let mut ps = vec![ParamSpec::f32(
            "W",
            &[self.out_ch, per_group, self.k, self.k],
            Init::HeNormal {
                fan_in: per_group * self.k * self.k,
            },
        )];
        if self.bias {
            ps.push(ParamSpec::f32("b", &[self.out_ch], Init::Zeros));
        }
        ps
    }

    fn forward(
        &self,
        what: &str,
        fb: &mut FuncBuilder,
        x: ValueId,
        params: &[ValueId],
    ) -> EmitResult<Saved> {
        let g = self.geometry(what, fb.ty(x)).map_err(as_type_error)?;
        let y = conv2d(
            fb,
            x,
            params[0],
            self.stride,
            [g[0].pad, g[1].pad],
            self.groups,
            1,
        )?;
        let y = if self.bias {
            let shape = fb.shape(y);
            let b = fb.bcast(params[1], &[1], &shape)?;
            fb.add(y, b)?
        } else {
            y
        };
        Ok(Saved::leaf(y))
    }

    /// The backward map at a given geometry (tests pass a deliberately wrong
    /// one to check the tie refutes it).
    ///
    /// * `dx = conv(up_in(dy), flip(Wb), pad = input_pad)` where `Wb` is the
    ///   kernel with O/I transposed (dense) or as is (depthwise, grouped);
    /// * `dW` by the transpose trick on `up_w(dy)` (depthwise: `batch_group_count`);
    /// * `db = Σ dy` over `[0, 2, 3]`.
    pub fn backward_at(
        &self,
        fb: &mut FuncBuilder,
        x: ValueId,
        params: &[ValueId],
        dy: ValueId,
        geo: &[AxisGeometry; 2],
    ) -> EmitResult<Grads> {
        let w = params[0];
        let s = geo[0].stride;
        let groups = self.groups;

        // Input VJP: reversed kernel (both spatial axes), O/I transposed for a
        // dense conv; one input channel per group needs no transpose.
        let up_in = upsample(fb, dy, s, [geo[0].input_trailing, geo[1].input_trailing])?;
        let w_oi = if groups > 1 {
            w
        } else {
            fb.transpose(w, &[1, 0, 2, 3])?
        };
        let w_rev = fb.reverse(w_oi, &[2, 3])?;
        let dx = conv2d(
            fb,
            up_in,
            w_rev,
            1,
            [geo[0].input_pad, geo[1].input_pad],
            groups,
            1,
        )?;

        // Weight VJP (transpose trick): batch into the feature slot, the
        // upsampled cotangent is the kernel, the result is [in, out, kH, kW].
        let up_w = upsample(fb, dy, s, [geo[0].weight_trailing, geo[1].weight_trailing])?;
        let xt = fb.transpose(x, &[1, 0, 2, 3])?;
        let dyt = fb.transpose(up_w, &[1, 0, 2, 3])?;
        let raw = conv2d(
            fb,
            xt,
            dyt,
            1,
            [geo[0].weight_pad, geo[1].weight_pad],
            1,
            groups,
        )?;
        let dw = if groups > 1 {
            // [1, c, kH, kW] → [c, 1, kH, kW]: same order of elements.
            fb.reshape(raw, &[self.out_ch, 1, geo[0].k, geo[1].k])?
        } else {
            fb.transpose(raw, &[1, 0, 2, 3])?
        };

        let mut dparams = vec![dw];
        if params.len() > 1 {
            dparams.push(fb.reduce_sum(dy, &[0, 2, 3])?);
        }
        Ok(Grads { dx, dparams })
    }

    fn backward(
        &self,
        what: &str,
        fb: &mut FuncBuilder,
        x: ValueId,
        params: &[ValueId],
        dy: ValueId,
    ) -> EmitResult<Grads> {
        let g = self.geometry(what, fb.ty(x)).map_err(as_type_error)?;
        self.backward_at(fb, x, params, dy, &g)
    }
}

/// `y = conv(x, W) (+ b)`: a cross-correlation with zero padding, NCHW input,
/// OIHW kernel `W [out_ch, in_ch, k, k]`, optional bias `b [out_ch]`.
#[derive(Clone, Debug, PartialEq)]
pub struct Conv2d {
    pub k: i64,
    pub stride: i64,
    pub padding: Padding,
    pub in_ch: i64,
    pub out_ch: i64,
    pub bias: bool,
}

/// The geometry, explicit-geometry backward and [`CertLayer`] of a conv layer
/// that is a [`GroupedConv2d`] under another name: `$t` provides `grouped()`
/// and `label()`, everything else is the grouped convolution's.
macro_rules! conv_layer_via_grouped {
    ($t:ty) => {
        impl $t {
            /// The per-axis geometry at an NCHW input type.
            pub fn geometry(&self, input: &TensorType) -> Result<[AxisGeometry; 2], LayerError> {
                self.grouped().geometry(&self.label(), input)
            }

            /// The backward map at an explicit geometry (the normal backward
            /// passes [`Self::geometry`]; negative controls pass a wrong one).
            pub fn backward_at(
                &self,
                fb: &mut FuncBuilder,
                x: ValueId,
                params: &[ValueId],
                dy: ValueId,
                geo: &[AxisGeometry; 2],
            ) -> EmitResult<Grads> {
                self.grouped().backward_at(fb, x, params, dy, geo)
            }
        }

        impl CertLayer for $t {
            fn name(&self) -> String {
                self.label()
            }
            fn output_type(&self, input: &TensorType) -> Result<TensorType, LayerError> {
                self.grouped().output_type(&self.label(), input)
            }
            fn params(&self, _: &TensorType) -> Vec<ParamSpec> {
                self.grouped().params()
            }
            fn forward(
                &self,
                fb: &mut FuncBuilder,
                x: ValueId,
                params: &[ValueId],
                _: &mut Sites,
            ) -> EmitResult<Saved> {
                self.grouped().forward(&self.label(), fb, x, params)
            }
            fn backward(
                &self,
                fb: &mut FuncBuilder,
                x: ValueId,
                params: &[ValueId],
                _: &Saved,
                dy: ValueId,
            ) -> EmitResult<Grads> {
                self.grouped().backward(&self.label(), fb, x, params, dy)
            }
        }
    };
}

impl Conv2d {
    /// The shared convolution, one group.
    pub fn grouped(&self) -> GroupedConv2d {
        GroupedConv2d {
            k: self.k,
            stride: self.stride,
            padding: self.padding,
            in_ch: self.in_ch,
            out_ch: self.out_ch,
            groups: 1,
            bias: self.bias,
        }
    }

    /// The layer's name: kernel, stride, padding, channels, bias.
    fn label(&self) -> String {
        format!(
            "conv2d k={} s={} {:?} {}→{}{}",
            self.k,
            self.stride,
            self.padding,
            self.in_ch,
            self.out_ch,
            if self.bias { " +b" } else { "" }
        )
    }
}

conv_layer_via_grouped!(Conv2d);

/// Depthwise conv: one `k×k` filter per channel, `W [ch, 1, k, k]`, emitted
/// with `feature_group_count = ch`; optional bias `b [ch]`.
#[derive(Clone, Debug, PartialEq)]
pub struct DepthwiseConv2d {
    pub k: i64,
    pub stride: i64,
    pub padding: Padding,
    pub ch: i64,
    pub bias: bool,
}

impl DepthwiseConv2d {
    /// The shared convolution, one group per channel.
    pub fn grouped(&self) -> GroupedConv2d {
        GroupedConv2d {
            k: self.k,
            stride: self.stride,
            padding: self.padding,
            in_ch: self.ch,
            out_ch: self.ch,
            groups: self.ch,
            bias: self.bias,
        }
    }

    /// The layer's name: kernel, stride, padding, channels, bias.
    fn label(&self) -> String {
        format!(
            "depthwise_conv2d k={} s={} {:?} ch={}{}",
            self.k,
            self.stride,
            self.padding,
            self.ch,
            if self.bias { " +b" } else { "" }
        )
    }
}

conv_layer_via_grouped!(DepthwiseConv2d);

fn conv(k: i64, stride: i64, padding: Padding, in_ch: i64, out_ch: i64, bias: bool) -> Conv2d {
    Conv2d {
        k,
        stride,
        padding,
        in_ch,
        out_ch,
        bias,
    }
}

fn depthwise(k: i64, stride: i64, padding: Padding, ch: i64, bias: bool) -> DepthwiseConv2d {
    DepthwiseConv2d {
        k,
        stride,
        padding,
        ch,
        bias,
    }
}

/// Configuration text: `k=3 s=2 Symmetric, N=2, 2→3 ch, 6×5, +b`.
fn describe(k: i64, s: i64, p: Padding, ch: String, shape: &[i64], bias: bool) -> String {
    format!(
        "k={k} s={s} {p:?}, N={}, {ch}, {}×{}{}",
        shape[0],
        shape[2],
        shape[3],
        if bias { ", +b" } else { "" }
    )
}

fn conv_config(k: i64, s: i64, p: Padding, out_ch: i64, shape: &[i64], bias: bool) -> String {
    describe(k, s, p, format!("{}→{out_ch} ch", shape[1]), shape, bias)
}

fn depthwise_config(k: i64, s: i64, p: Padding, shape: &[i64], bias: bool) -> String {
    describe(k, s, p, format!("{} ch", shape[1]), shape, bias)
}

fn conv_case(k: i64, s: i64, p: Padding, out_ch: i64, shape: [i64; 4], bias: bool) -> OpCase {
    OpCase::exact(
        "conv2d",
        conv_config(k, s, p, out_ch, &shape, bias),
        conv(k, s, p, shape[1], out_ch, bias),
        &shape,
    )
}

fn depthwise_case(k: i64, s: i64, p: Padding, shape: [i64; 4], bias: bool) -> OpCase {
    OpCase::exact(
        "depthwise_conv2d",
        depthwise_config(k, s, p, &shape, bias),
        depthwise(k, s, p, shape[1], bias),
        &shape,
    )
}

/// The conv configurations `certify --all-ops` ties (with the negative
/// controls): stride 1 at odd and even
/// kernels, stride 2 both conventions at k ∈ {1,2,3,5,7} on even, odd and
/// non-square inputs, the 4×4/s4 patchify, and depthwise at strides 1 and 2.
pub fn catalog() -> Vec<OpCase> {
    use Padding::{Symmetric as Sym, XlaSame as Xla};
    vec![
        // Stride 1 (both conventions pad [p, k−1−p]).
        conv_case(1, 1, Sym, 3, [2, 2, 3, 4], true).with_controls(conv_controls()),
        conv_case(2, 1, Sym, 2, [1, 2, 4, 5], true),
        conv_case(3, 1, Sym, 2, [3, 2, 5, 4], true),
        conv_case(4, 1, Sym, 2, [2, 1, 5, 6], false),
        conv_case(5, 1, Xla, 2, [1, 2, 5, 6], true),
        // Stride 2 symmetric: even, odd and mixed-parity inputs.
        conv_case(1, 2, Sym, 2, [3, 2, 4, 5], false),
        conv_case(2, 2, Sym, 3, [2, 2, 6, 4], true),
        conv_case(2, 2, Sym, 2, [1, 2, 5, 7], false),
        conv_case(3, 2, Sym, 2, [2, 2, 6, 8], true),
        conv_case(3, 2, Sym, 2, [1, 2, 7, 5], true),
        conv_case(5, 2, Sym, 2, [3, 1, 6, 5], true),
        conv_case(7, 2, Sym, 2, [1, 1, 8, 7], false),
        // Stride 2 XLA-SAME: even inputs (odd phase), odd inputs (symmetric).
        conv_case(1, 2, Xla, 2, [2, 2, 4, 6], true),
        conv_case(2, 2, Xla, 2, [1, 2, 6, 5], false),
        conv_case(3, 2, Xla, 2, [3, 2, 6, 4], true),
        conv_case(3, 2, Xla, 2, [1, 2, 5, 6], false),
        conv_case(5, 2, Xla, 2, [2, 1, 8, 6], true),
        conv_case(7, 2, Xla, 2, [1, 1, 8, 9], true),
        // Stride 4 patchify (ConvNeXt stem), non-square.
        conv_case(4, 4, Sym, 2, [2, 2, 8, 4], true),
        conv_case(4, 4, Xla, 2, [1, 1, 4, 8], false),
        // Depthwise: stride 1, stride 2 both conventions.
        depthwise_case(3, 1, Sym, [2, 3, 5, 4], true),
        depthwise_case(2, 1, Sym, [1, 2, 4, 5], false),
        depthwise_case(3, 2, Sym, [3, 2, 6, 5], true),
        depthwise_case(5, 2, Sym, [1, 3, 7, 6], false),
        depthwise_case(3, 2, Xla, [2, 3, 6, 4], true).with_controls(vec![{
            let dw = depthwise(3, 2, Xla, 3, true);
            NegativeControl::new(
                "input VJP pad [p−1, p+1]",
                depthwise_config(3, 2, Xla, &[2, 3, 6, 4], true),
                &[2, 3, 6, 4],
                dw.clone(),
                depthwise_at_wrong_geometry(dw),
                &["dx"],
            )
        }]),
        depthwise_case(5, 2, Xla, [1, 2, 8, 7], true),
    ]
}

// ---------------------------------------------------------------------------
// Negative controls: realistic shape-preserving backward bugs from
// docs/conventions.md §2–§13, each next to its certified twin.

/// A conv control at `shape` with `conv`'s configuration.
fn conv_control(
    name: &'static str,
    c: Conv2d,
    shape: [i64; 4],
    bug: impl CertLayer + 'static,
    blocks: &'static [&'static str],
) -> NegativeControl {
    let config = conv_config(c.k, c.stride, c.padding, c.out_ch, &shape, c.bias);
    NegativeControl::new(name, config, &shape, c, bug, blocks)
}

fn conv_controls() -> Vec<NegativeControl> {
    use Padding::{Symmetric as Sym, XlaSame as Xla};
    let mut controls = Vec::new();
    // docs/conventions.md §3: the XLA-SAME input VJP written with the weight
    // VJP's shift direction, `[p−1, p+1]` instead of `[p+1, p−1]` (same total,
    // same shape).
    let c = conv(3, 2, Xla, 2, 2, true);
    controls.push(conv_control(
        "input VJP pad [p−1, p+1]",
        c.clone(),
        [2, 2, 6, 4],
        conv_at_wrong_geometry(c, |g| {
            assert_eq!(g.input_pad, (2, 0), "the correct XLA-SAME input pad at k=3");
            g.input_pad = (0, 2);
        }),
        &["dx"],
    ));
    // docs/conventions.md §2: at an even kernel the transposed pad `[k−1−p, p]`
    // is not symmetric; the "odd-kernel by habit" split `[p, k−1−p]` keeps the
    // shape and is wrong (k=2: [0,1] for [1,0]; k=4: [1,2] for [2,1]).
    for (k, shape) in [(2, [1, 2, 4, 5]), (4, [2, 1, 5, 6])] {
        let c = conv(k, 1, Sym, shape[1], 2, false);
        controls.push(conv_control(
            "even-kernel input VJP pad mirrored",
            c.clone(),
            shape,
            conv_at_wrong_geometry(c, |g| g.input_pad = (g.input_pad.1, g.input_pad.0)),
            &["dx"],
        ));
    }
    let c = conv(3, 1, Sym, 2, 2, true);
    controls.push(conv_control(
        "dW with kh/kw swapped",
        c.clone(),
        [2, 2, 5, 3],
        conv_weight_grad_hw_swapped(c),
        &["dW"],
    ));
    // Localised to the dropped row (h = 6).
    let c = conv(3, 2, Sym, 2, 2, true);
    controls.push(
        conv_control(
            "dx last row dropped",
            c.clone(),
            [1, 2, 7, 5],
            strided_conv_drops_last_row(c),
            &["dx"],
        )
        .detail_contains(&["dx[", ", 6, "]),
    );
    controls
}

/// A conv whose backward runs at a geometry edited by `edit` (a wrong pad).
fn conv_at_wrong_geometry(conv: Conv2d, edit: fn(&mut AxisGeometry)) -> ReplacedBackward<Conv2d> {
    ReplacedBackward::new(
        conv,
        "wrong backward geometry",
        move |c, fb, x, p, _, dy| {
            let mut g = c.geometry(fb.ty(x)).expect("valid geometry");
            for axis in &mut g {
                edit(axis);
            }
            c.backward_at(fb, x, p, dy, &g)
        },
    )
}

/// A conv whose weight gradient comes out with the kernel's spatial axes
/// transposed (`[o,i,kh,kw] → [o,i,kw,kh]`, e.g. a final transpose written as
/// `[1,0,3,2]`): the square kernel hides it from the shapes.
fn conv_weight_grad_hw_swapped(conv: Conv2d) -> ReplacedBackward<Conv2d> {
    ReplacedBackward::new(conv, "dW with kh/kw swapped", |c, fb, x, p, s, dy| {
        let mut g = c.backward(fb, x, p, s, dy)?;
        g.dparams[0] = fb.transpose(g.dparams[0], &[0, 1, 3, 2])?;
        Ok(g)
    })
}

/// A strided conv backward written for the even (2h) grid: at an odd input
/// size the last input row gets zero instead of its gradient.
fn strided_conv_drops_last_row(conv: Conv2d) -> ReplacedBackward<Conv2d> {
    ReplacedBackward::new(conv, "dx last row dropped", |c, fb, x, p, s, dy| {
        let mut g = c.backward(fb, x, p, s, dy)?;
        let [n, ch, h, w] = fb.shape(x)[..] else {
            panic!("NCHW")
        };
        let even = fb.slice(g.dx, &[0, 0, 0, 0], &[n, ch, h - 1, w], &[1, 1, 1, 1])?;
        g.dx = fb.pad(even, &[0, 0, 0, 0], &[0, 0, 1, 0], &[0, 0, 0, 0])?;
        Ok(g)
    })
}

/// Depthwise XLA-SAME input VJP with the weight-VJP shift (the repo's
/// `depthwiseStridedXlaBackBatched` is where this rule is emitted).
fn depthwise_at_wrong_geometry(dw: DepthwiseConv2d) -> ReplacedBackward<DepthwiseConv2d> {
    ReplacedBackward::new(dw, "input VJP pad [p−1, p+1]", |d, fb, x, p, _, dy| {
        let mut g = d.geometry(fb.ty(x)).expect("valid geometry");
        for axis in &mut g {
            axis.input_pad = axis.weight_pad;
        }
        d.backward_at(fb, x, p, dy, &g)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn grouped_conv_takes_one_group_or_one_per_channel() {
        let input = TensorType::f32(vec![1, 4, 5, 5]);
        let grouped = |groups, out_ch| GroupedConv2d {
            k: 3,
            stride: 1,
            padding: Padding::Symmetric,
            in_ch: 4,
            out_ch,
            groups,
            bias: false,
        };
        assert!(grouped(1, 6).geometry("dense", &input).is_ok());
        assert!(grouped(4, 4).geometry("depthwise", &input).is_ok());
        let e = grouped(2, 4).geometry("two groups", &input).unwrap_err();
        assert!(e.0.contains("2 groups"), "{e}");
        // Depthwise is the grouped conv with one group per channel.
        let dw = DepthwiseConv2d {
            k: 3,
            stride: 2,
            padding: Padding::XlaSame,
            ch: 4,
            bias: true,
        };
        assert_eq!(dw.grouped().groups, 4);
        assert_eq!(dw.params(&input), dw.grouped().params());
        assert_eq!(dw.params(&input)[0].ty.shape, [4, 1, 3, 3]);
    }
}
