//! Fast f32 kernels for the heavy ops (convolution, dot_general, reductions,
//! reduce_window, select_and_scatter). Each kernel computes exactly what the
//! generic evaluator computes for f32, only faster; property tests check that.
//!
//! Convolution and dot_general run on `matrixmultiply::sgemm` (convolution via
//! im2col, parallel over examples with rayon), so their accumulation order
//! differs from the generic path: per output element the difference stays within
//! `n · eps_f32 · Σ|terms|` for `n` accumulated terms. Max/min reductions and
//! selections are exact; sums follow row-major order except for long contiguous
//! runs, which use partial sums.
//!
//! Every `out_shape` is the op's result shape, as the IR states it; the kernels
//! assert that it is consistent with the operands.

mod conv;
mod dot;
mod gemm;
mod layout;
mod reduce;

use crate::tensor::Tensor;

/// The reducer of a `reduce` / `reduce_window` region, recognised by the caller.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ReduceKind {
    Add,
    Max,
    Min,
    Mul,
}

/// `stablehlo.convolution` on f32 with any dimension numbers, strides, padding
/// (negative crops), lhs/rhs dilation, window reversal and feature or batch groups.
pub fn convolution(
    lhs: &Tensor<f32>,
    rhs: &Tensor<f32>,
    attrs: &ir::ConvAttrs,
    out_shape: &[usize],
) -> Tensor<f32> {
    conv::convolution(lhs, rhs, attrs, out_shape)
}

/// `stablehlo.dot_general` on f32; the result is laid out batch, lhs free, rhs free.
pub fn dot_general(
    lhs: &Tensor<f32>,
    rhs: &Tensor<f32>,
    dims: &ir::DotDims,
    out_shape: &[usize],
) -> Tensor<f32> {
    dot::dot_general(lhs, rhs, dims, out_shape)
}

/// `stablehlo.reduce` of one f32 input over `dims` with the reducer `kind`, starting
/// every output element at `init`.
pub fn reduce(
    input: &Tensor<f32>,
    init: f32,
    kind: ReduceKind,
    dims: &[usize],
    out_shape: &[usize],
) -> Tensor<f32> {
    reduce::reduce(input, init, kind, dims, out_shape)
}

/// `stablehlo.reduce_window` of one f32 input; padding and base-dilation holes read
/// as `init`, as the spec pads the operand with the init value.
pub fn reduce_window(
    input: &Tensor<f32>,
    init: f32,
    kind: ReduceKind,
    attrs: &ir::WindowAttrs,
    out_shape: &[usize],
) -> Tensor<f32> {
    reduce::reduce_window(input, init, kind, attrs, out_shape)
}

/// `stablehlo.select_and_scatter` with select region `compare(a, b, select)` and
/// scatter region `add`: in each window the first position (row-major window
/// order) that no later position beats receives that window's source value; the
/// output starts at `init` everywhere and overlapping windows accumulate. Padding
/// positions are never selected, and a window of padding only scatters nothing
/// (XLA's behaviour, see openxla/stablehlo#731).
pub fn select_and_scatter(
    operand: &Tensor<f32>,
    source: &Tensor<f32>,
    init: f32,
    select: ir::CompareDirection,
    attrs: &ir::ScatterWindowAttrs,
    out_shape: &[usize],
) -> Tensor<f32> {
    reduce::select_and_scatter(operand, source, init, select, attrs, out_shape)
}
