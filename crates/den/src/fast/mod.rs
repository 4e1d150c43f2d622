//! Fast f32 kernels for the heavy ops (convolution, dot_general, reductions,
//! reduce_window, select_and_scatter). Each kernel computes exactly what the
//! generic evaluator computes for f32, only faster; property tests check that.
