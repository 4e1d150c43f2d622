//! Convolution, dot_general, pad and concatenate: steps on den's fast
//! kernels and plain copies. A transposed
//! convolution operand is read in place, its transpose moved into the
//! dimension numbers.

use super::{Builder, Def, Expr};
use crate::schedule::Kind;
use ir::{ConvAttrs, DotDims, ElemType, Op, TensorType, ValueId};

/// Operands the fast f32 kernels take: f32, and bf16 (its values are f32
/// values; the kernels accumulate in f32 as the generic path does).
fn kernel_operand(t: &TensorType) -> bool {
    matches!(t.elem, ElemType::F32 | ElemType::BF16)
}

impl Builder<'_> {
    /// `v` as a transpose of a whole materialised slot: the slot, its own
    /// shape, and for each dimension of `v` the slot dimension it is. None for
    /// any other view (broadcast, reversal, slice) or a computed value.
    fn permuted_slot(&self, v: ValueId) -> Option<(usize, Vec<usize>, Vec<usize>)> {
        let Def::Pending(e) = &self.defs[v.index()] else {
            return None;
        };
        let Expr::View(slot, spec) = &**e else {
            return None;
        };
        let rank = spec.shape.len();
        if spec.base != 0 || spec.strides.iter().any(|&st| st <= 0) {
            return None;
        }
        // Slot dimensions in memory order: the view's dimensions by stride.
        let mut order: Vec<usize> = (0..rank).collect();
        order.sort_by_key(|&d| std::cmp::Reverse(spec.strides[d]));
        let shape: Vec<usize> = order.iter().map(|&d| spec.shape[d]).collect();
        let row_major = den::tensor::row_major_strides(&shape);
        if order
            .iter()
            .zip(&row_major)
            .any(|(&d, &st)| spec.strides[d] != st as isize)
        {
            return None;
        }
        let mut q = vec![0; rank];
        for (phys, &d) in order.iter().enumerate() {
            q[d] = phys;
        }
        Some((*slot, shape, q))
    }

    /// `convolution` of f32/bf16 operands into f32.
    pub(super) fn convolution(
        &mut self,
        op: &Op,
        a: &ConvAttrs,
        tys: &[TensorType],
        rty: TensorType,
        rshape: Vec<usize>,
    ) -> Option<bool> {
        if !(tys.len() == 2 && tys.iter().all(kernel_operand) && rty.elem == ElemType::F32) {
            return Some(false);
        }
        // Transposed operands are read in place: the transpose goes
        // into the dimension numbers (the weight-VJP's xᵀ and dyᵀ
        // would otherwise be copied every step).
        let mut a = a.clone();
        let d = &mut a.dims;
        let lhs = match self.permuted_slot(op.operands[0]) {
            Some((slot, shape, q)) => {
                let dims = [&mut d.input_batch, &mut d.input_feature];
                relabel(&q, dims.into_iter().chain(&mut d.input_spatial));
                (slot, shape)
            }
            None => self.mat_operand(op.operands[0])?,
        };
        let rhs = match self.permuted_slot(op.operands[1]) {
            Some((slot, shape, q)) => {
                let dims = [&mut d.kernel_output_feature, &mut d.kernel_input_feature];
                relabel(&q, dims.into_iter().chain(&mut d.kernel_spatial));
                (slot, shape)
            }
            None => self.mat_operand(op.operands[1])?,
        };
        let a = &a;
        let o = rhs
            .1
            .get(a.dims.kernel_output_feature.max(0) as usize)
            .copied()
            .unwrap_or(1)
            .max(1);
        let macs = rshape.iter().product::<usize>() * (rhs.1.iter().product::<usize>() / o);
        let kind = Kind::Conv {
            lhs,
            rhs,
            attrs: a.clone(),
            out: op.results[0].0.index(),
            shape: rshape,
            bias: None,
            moments: None,
        };
        // Grouped convolutions (the depthwise forms) run on their own kernel
        // (den's direct depthwise path): profiled under their own name.
        let label = if a.feature_group_count > 1 || a.batch_group_count > 1 {
            "stablehlo.convolution (grouped)"
        } else {
            "stablehlo.convolution"
        };
        self.push(op, label, 2 * macs as u64, kind);
        self.defs[op.results[0].0.index()] = Def::Mat;
        Some(true)
    }

    /// `pad` of an f32 operand with an f32 scalar (the strided depthwise
    /// VJPs dilate the output gradient with it; on the generic evaluator it
    /// cost more than the convolutions that read it).
    pub(super) fn pad(
        &mut self,
        op: &Op,
        low: &[i64],
        interior: &[i64],
        tys: &[TensorType],
        rty: TensorType,
        rshape: Vec<usize>,
    ) -> Option<bool> {
        if !(tys.len() == 2
            && tys[0].elem == ElemType::F32
            && tys[1].elem == ElemType::F32
            && tys[1].shape.is_empty()
            && rty.elem == ElemType::F32
            && interior.iter().all(|&i| i >= 0))
        {
            return Some(false);
        }
        let value = self.init_of(op.operands[1])?;
        let input = self.mat_operand(op.operands[0])?;
        let out = op.results[0].0.index();
        let kind = Kind::Pad {
            input,
            value,
            low: low.to_vec(),
            interior: interior.to_vec(),
            out,
            shape: rshape,
        };
        self.push(op, "stablehlo.pad", 0, kind);
        self.defs[out] = Def::Mat;
        Some(true)
    }

    /// `concatenate` of float operands: each operand's rows copied into place
    /// (no arithmetic, so every float type's values pass unchanged).
    pub(super) fn concatenate(
        &mut self,
        op: &Op,
        dim: i64,
        tys: &[TensorType],
        rty: TensorType,
        rshape: Vec<usize>,
    ) -> Option<bool> {
        let rank = rshape.len();
        if tys.is_empty()
            || dim < 0
            || dim as usize >= rank
            || !tys.iter().all(|t| t.elem == rty.elem && t.elem.is_float())
        {
            return Some(false);
        }
        let mut inputs = Vec::with_capacity(op.operands.len());
        for &v in &op.operands {
            inputs.push(self.mat_operand(v)?);
        }
        let out = op.results[0].0.index();
        let kind = Kind::Concat {
            inputs,
            dim: dim as usize,
            out,
            shape: rshape,
        };
        self.push(op, "stablehlo.concatenate", 0, kind);
        self.defs[out] = Def::Mat;
        Some(true)
    }

    /// `dot_general` of f32/bf16 operands into f32.
    pub(super) fn dot_general(
        &mut self,
        op: &Op,
        dd: &DotDims,
        tys: &[TensorType],
        rty: TensorType,
        rshape: Vec<usize>,
    ) -> Option<bool> {
        if !(tys.len() == 2 && tys.iter().all(kernel_operand) && rty.elem == ElemType::F32) {
            return Some(false);
        }
        // Transposed operands (attention's split heads, a weight's transpose)
        // are read in place, the transpose moved into the dimension numbers.
        let mut dims = dd.clone();
        let lhs = match self.permuted_slot(op.operands[0]) {
            Some((slot, shape, q)) if free_in_order(&q, &dd.lhs_batch, &dd.lhs_contracting) => {
                relabel(
                    &q,
                    dims.lhs_batch.iter_mut().chain(&mut dims.lhs_contracting),
                );
                (slot, shape)
            }
            _ => self.mat_operand(op.operands[0])?,
        };
        let rhs = match self.permuted_slot(op.operands[1]) {
            Some((slot, shape, q)) if free_in_order(&q, &dd.rhs_batch, &dd.rhs_contracting) => {
                relabel(
                    &q,
                    dims.rhs_batch.iter_mut().chain(&mut dims.rhs_contracting),
                );
                (slot, shape)
            }
            _ => self.mat_operand(op.operands[1])?,
        };
        let k: usize = dims
            .lhs_contracting
            .iter()
            .map(|&d| lhs.1.get(d.max(0) as usize).copied().unwrap_or(1))
            .product();
        let macs = rshape.iter().product::<usize>() * k;
        let kind = Kind::Dot {
            lhs,
            rhs,
            dims,
            out: op.results[0].0.index(),
            shape: rshape,
            bias: None,
        };
        self.push(op, "stablehlo.dot_general", 2 * macs as u64, kind);
        self.defs[op.results[0].0.index()] = Def::Mat;
        Some(true)
    }
}

/// Dimension numbers of an operand read through the transpose `q` (its
/// dimension `j` is the slot's dimension `q[j]`) renamed to the slot's.
fn relabel<'a>(q: &[usize], dims: impl Iterator<Item = &'a mut i64>) {
    for d in dims {
        *d = q[*d as usize] as i64;
    }
}

/// Whether an operand read through the transpose `q` keeps its free
/// dimensions (those neither batch nor contracting) in order: the result lays
/// them out in dimension order, so a transpose that reorders them cannot move
/// into the dimension numbers.
fn free_in_order(q: &[usize], batch: &[i64], contracting: &[i64]) -> bool {
    let free: Vec<usize> = (0..q.len())
        .filter(|&d| !batch.contains(&(d as i64)) && !contracting.contains(&(d as i64)))
        .map(|d| q[d])
        .collect();
    free.windows(2).all(|w| w[0] < w[1])
}
