//! Rewrites that change how a plan computes, never what it computes: calls
//! inlined, in regions too (`ir::passes::inline_all_calls`), and common subexpressions removed
//! from the function before it is lowered (`cse`),
//! and on the lowered steps, adjacent sibling add-reductions merged into one
//! pass (`sibling_reductions`) and a convolution's bias add folded into the
//! convolution (`conv_bias`), a dense layer's bias add folded into its dot's
//! GEMM epilogue (`dot_bias`), and the zero-upsampling pad of a strided
//! convolution's VJP moved into its dilation and padding (`conv_upsample`). Transposed convolution operands are read in
//! place while lowering (`compile::kernels`).

mod conv_bias;
mod conv_upsample;
pub(crate) mod cse;
mod dedupe;
mod dot_bias;
mod sibling_reductions;

pub(crate) use conv_bias::fold_conv_bias;
pub(crate) use conv_upsample::fold_conv_upsample;
pub(crate) use dedupe::dedupe_nodes;
pub(crate) use dot_bias::fold_dot_bias;
pub(crate) use ir::passes::inline_all_calls;
pub(crate) use sibling_reductions::merge_sibling_reductions;
