//! Per-chunk uniform values of a fused program's nodes and the register
//! file that holds them ([`Regs`]): one number instead of a filled register
//! where a node's value does not vary across the chunk.

use super::CHUNK;

/// A node's value over the current chunk when it is one number: a splat, a
/// broadcast whose chunk lies in one stride-0 run (batch norm's per-channel
/// statistics over a 1024-position plane), or an op of such values. It is
/// written to the node's register only when a consumer needs a slice.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Uniform {
    /// Not uniform: the value is in the register (or the input, for a load).
    No,
    /// Uniform, register not written.
    Lazy(f32),
    /// Uniform, and the register holds it too.
    Filled(f32),
}

impl Uniform {
    pub(super) fn value(self) -> Option<f32> {
        match self {
            Uniform::No => None,
            Uniform::Lazy(v) | Uniform::Filled(v) => Some(v),
        }
    }
}

/// `Some((lhs is the uniform one, its value))` when exactly one of two
/// operands is uniform.
pub(super) fn one_uniform_of(a: Uniform, c: Uniform) -> Option<(bool, f32)> {
    match (a.value(), c.value()) {
        (Some(v), None) => Some((true, v)),
        (None, Some(v)) => Some((false, v)),
        _ => None,
    }
}

/// A thread's register file: `CHUNK` floats per node, and each node's
/// [`Uniform`] state for the chunk being evaluated.
pub(crate) struct Regs {
    pub(super) data: Vec<f32>,
    pub(super) uniform: Vec<Uniform>,
}

impl Regs {
    /// Writes node `k`'s uniform value into its register if it is not there.
    pub(super) fn materialise(&mut self, k: usize, len: usize) {
        if let Uniform::Lazy(v) = self.uniform[k] {
            self.data[k * CHUNK..k * CHUNK + len].fill(v);
            self.uniform[k] = Uniform::Filled(v);
        }
    }
}
