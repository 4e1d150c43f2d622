//! Fast kernels for the heavy ops (convolution, dot_general, reductions,
//! reduce_window, select_and_scatter), generic over [`FastFloat`] (`f32` and
//! `f64`). Each kernel computes what the generic evaluator computes for that
//! scalar, only faster; property tests check that (`tests/den_suite/fast_agreement.rs`
//! for f32, `tests/den_suite/fast_f64.rs` for f64 and dual numbers).
//!
//! dot_general and the GEMM forms of convolution run on den's AVX-512 f32
//! GEMM where the CPU has it, else on `matrixmultiply`'s sgemm/dgemm; the
//! other convolutions on implicit-GEMM tiles (parallel over examples with
//! rayon), so their accumulation order differs from the generic path: per output
//! element the difference stays within `n · eps · Σ|terms|` for `n` accumulated
//! terms. Max/min reductions and selections are exact; sums follow row-major
//! order except for long contiguous runs, which use partial sums.
//!
//! The `*_choices` kernels return, per output, which source element a max/min
//! fold ends on: the evaluator uses them to carry the tangent of a dual number
//! along with its value.
//!
//! Every `out_shape` is the op's result shape, as the IR states it; the kernels
//! assert that it is consistent with the operands.

mod conv;
mod depthwise;
mod dot;
mod float;
mod gemm;
mod implicit;
mod layout;
mod moments;
mod pad;
mod pool2d;
mod reduce;

pub use float::FastFloat;
pub use gemm::sgemm_row_major;
pub use implicit::{set_lane_tiles, set_row_major_kernel_layout};

use crate::tensor::Tensor;

/// The reducer of a `reduce` / `reduce_window` region, recognised by the caller.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ReduceKind {
    Add,
    Max,
    Min,
    Mul,
}

/// `stablehlo.convolution` with any dimension numbers, strides, padding
/// (negative crops), lhs/rhs dilation, window reversal and feature or batch groups.
pub fn convolution<T: FastFloat>(
    lhs: &Tensor<T>,
    rhs: &Tensor<T>,
    attrs: &ir::ConvAttrs,
    out_shape: &[usize],
) -> Tensor<T> {
    conv::convolution(lhs, rhs, attrs, out_shape, Vec::new(), None, None)
}

/// [`convolution`] writing into `buffer` when the kernel can (its length is
/// the result's and its contents are ignored): a caller that recycles buffers
/// saves the fresh pages of a new result every call. With `bias` (one value
/// per output feature) the result is `convolution + bias` broadcast along the
/// output feature dimension, each element rounded as the separate add would
/// round it; the implicit-GEMM path adds it while writing its result.
pub fn convolution_into<T: FastFloat>(
    lhs: &Tensor<T>,
    rhs: &Tensor<T>,
    attrs: &ir::ConvAttrs,
    out_shape: &[usize],
    buffer: Vec<T>,
    bias: Option<&[T]>,
) -> Tensor<T> {
    conv::convolution(lhs, rhs, attrs, out_shape, buffer, bias, None)
}

/// [`convolution_into`] that also writes the first two moments of each
/// result plane `(b, f)` (batch `b`, output feature `f`, whatever the result
/// layout): `moments[2(b·F + f)] = Σ y` and `moments[2(b·F + f) + 1] = Σ (y −
/// ȳ)²` about the plane's own mean, taken while the plane is in cache where
/// the kernel allows (batch norm's statistics without their own passes).
pub fn convolution_moments_into(
    lhs: &Tensor<f32>,
    rhs: &Tensor<f32>,
    attrs: &ir::ConvAttrs,
    out_shape: &[usize],
    buffer: Vec<f32>,
    bias: Option<&[f32]>,
    moments: &mut [f32],
) -> Tensor<f32> {
    conv::convolution(lhs, rhs, attrs, out_shape, buffer, bias, Some(moments))
}

/// `stablehlo.pad` with the padding value `value`: operand element `i` lands at
/// `low + i·(interior + 1)` per dimension (negative `low`/`high` crop; `high`
/// is implied by `out_shape`). Exact: the values are copied.
pub fn pad<T: FastFloat>(
    x: &Tensor<T>,
    value: T,
    low: &[i64],
    interior: &[i64],
    out_shape: &[usize],
) -> Tensor<T> {
    pad::pad(x, value, low, interior, out_shape)
}

/// `stablehlo.dot_general`; the result is laid out batch, lhs free, rhs free.
pub fn dot_general<T: FastFloat>(
    lhs: &Tensor<T>,
    rhs: &Tensor<T>,
    dims: &ir::DotDims,
    out_shape: &[usize],
) -> Tensor<T> {
    dot::dot_general(lhs, rhs, dims, out_shape, None, None)
}

/// [`dot_general`] into `buffer` (the result's length, any contents: every
/// element is overwritten), so a caller's reused buffer is neither zeroed nor
/// paged in again.
pub fn dot_general_into<T: FastFloat>(
    lhs: &Tensor<T>,
    rhs: &Tensor<T>,
    dims: &ir::DotDims,
    out_shape: &[usize],
    buffer: Vec<T>,
) -> Tensor<T> {
    dot::dot_general(lhs, rhs, dims, out_shape, Some(buffer), None)
}

/// [`dot_general_into`] plus `bias` broadcast along the result's last axis
/// (one value per element of it; that axis must be an rhs free axis), added
/// in the GEMM's epilogue: each element is the dot rounded, then the add
/// rounded, bit for bit a separate add after the dot.
pub fn dot_general_bias_into<T: FastFloat>(
    lhs: &Tensor<T>,
    rhs: &Tensor<T>,
    dims: &ir::DotDims,
    out_shape: &[usize],
    buffer: Vec<T>,
    bias: &[T],
) -> Tensor<T> {
    dot::dot_general(lhs, rhs, dims, out_shape, Some(buffer), Some(bias))
}

/// `stablehlo.reduce` of one input over `dims` with the reducer `kind`, starting
/// every output element at `init`.
pub fn reduce<T: FastFloat>(
    input: &Tensor<T>,
    init: T,
    kind: ReduceKind,
    dims: &[usize],
    out_shape: &[usize],
) -> Tensor<T> {
    reduce::reduce(input, init, kind, dims, out_shape)
}

/// For `stablehlo.reduce` with a max/min reducer (`kind` must be `Max` or
/// `Min`): per output element (row-major), the flat index of the input element
/// the generic fold ends on, or `None` when it ends on `init`. Ties keep the
/// earlier element, `+0` beats `-0` (max; `-0` for min), the first NaN wins.
pub fn reduce_choices<T: FastFloat>(
    input: &Tensor<T>,
    init: T,
    kind: ReduceKind,
    dims: &[usize],
    out_shape: &[usize],
) -> Vec<Option<usize>> {
    reduce::reduce_choices(input, init, kind, dims, out_shape)
}

/// `stablehlo.reduce_window` of one input; padding and base-dilation holes read
/// as `init`, as the spec pads the operand with the init value.
pub fn reduce_window<T: FastFloat>(
    input: &Tensor<T>,
    init: T,
    kind: ReduceKind,
    attrs: &ir::WindowAttrs,
    out_shape: &[usize],
) -> Tensor<T> {
    reduce::reduce_window(input, init, kind, attrs, out_shape, Vec::new())
}

/// [`reduce_window`] writing into `buffer` where the kernel can (any length
/// and contents): a caller that recycles buffers saves the fresh pages of a
/// new result.
pub fn reduce_window_into<T: FastFloat>(
    input: &Tensor<T>,
    init: T,
    kind: ReduceKind,
    attrs: &ir::WindowAttrs,
    out_shape: &[usize],
    buffer: Vec<T>,
) -> Tensor<T> {
    reduce::reduce_window(input, init, kind, attrs, out_shape, buffer)
}

/// For `stablehlo.reduce_window` with a max/min reducer: per output element,
/// the flat index of the input element the fold (in window scan order) ends on,
/// or `None` for `init` (padding and holes read as `init`); tie rules as in
/// [`reduce_choices`].
pub fn reduce_window_choices<T: FastFloat>(
    input: &Tensor<T>,
    init: T,
    kind: ReduceKind,
    attrs: &ir::WindowAttrs,
    out_shape: &[usize],
) -> Vec<Option<usize>> {
    reduce::reduce_window_choices(input, init, kind, attrs, out_shape)
}

/// `stablehlo.select_and_scatter` with select region `compare(a, b, select)` and
/// scatter region `add`: in each window the first position (row-major window
/// order) that no later position beats receives that window's source value; the
/// output starts at `init` everywhere and overlapping windows accumulate. Padding
/// positions are never selected, and a window of padding only scatters nothing
/// (XLA's behaviour, see openxla/stablehlo#731).
pub fn select_and_scatter<T: FastFloat>(
    operand: &Tensor<T>,
    source: &Tensor<T>,
    init: T,
    select: ir::CompareDirection,
    attrs: &ir::ScatterWindowAttrs,
    out_shape: &[usize],
) -> Tensor<T> {
    reduce::select_and_scatter(operand, source, init, select, attrs, out_shape, Vec::new())
}

/// [`select_and_scatter`] writing into `buffer` where the kernel can (any
/// length and contents), as [`reduce_window_into`].
pub fn select_and_scatter_into<T: FastFloat>(
    operand: &Tensor<T>,
    source: &Tensor<T>,
    init: T,
    select: ir::CompareDirection,
    attrs: &ir::ScatterWindowAttrs,
    out_shape: &[usize],
    buffer: Vec<T>,
) -> Tensor<T> {
    reduce::select_and_scatter(operand, source, init, select, attrs, out_shape, buffer)
}
