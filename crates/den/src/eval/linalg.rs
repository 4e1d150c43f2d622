//! Contractions: dot_general and convolution, following the spec's definitions.
//! Products are summed in the scalar's own arithmetic in a fixed order (the
//! contracting / window indices row-major, starting from zero) and the final
//! sum is rounded once with `Scalar::round_accumulated`. Integer operands use
//! the same index walk over i64 with wrap-around in the result type (i1: or
//! of ands), through one [`Ring`] the walk is generic over.

use super::elementwise::wrap_int;
use super::index::{strided_offsets, strides_at};
use super::Fail;
use crate::scalar::Scalar;
use crate::tensor::Tensor;
use ir::{ConvAttrs, DotDims, ElemType};

/// What a contraction needs of its elements: a zero, the step
/// `acc + a·b`, and the rounding (or wrap) of the final sum to the result type.
trait Ring: Clone {
    fn zero() -> Self;
    fn mul_add(&self, a: &Self, b: &Self) -> Self;
    fn finish(self, elem: ElemType) -> Self;
}

/// A float scalar, summed in its own arithmetic.
#[derive(Clone)]
struct Float<S>(S);

impl<S: Scalar> Ring for Float<S> {
    fn zero() -> Self {
        Float(S::zero())
    }
    fn mul_add(&self, a: &Self, b: &Self) -> Self {
        Float(self.0.add(&a.0.mul(&b.0)))
    }
    fn finish(self, elem: ElemType) -> Self {
        Float(self.0.round_accumulated(elem))
    }
}

/// An integer, summed modulo 2⁶⁴ and wrapped to the result type at the end
/// (wrapping commutes with + and ×, so this is the per-op wrap); i1 operands
/// (0/1) are or-ed ands, the spec's boolean add and multiply.
#[derive(Clone)]
struct Int {
    v: i64,
    boolean: bool,
}

impl Ring for Int {
    fn zero() -> Self {
        Int {
            v: 0,
            boolean: false,
        }
    }
    fn mul_add(&self, a: &Self, b: &Self) -> Self {
        if a.boolean {
            Int {
                v: self.v | (a.v & b.v),
                boolean: true,
            }
        } else {
            Int {
                v: self.v.wrapping_add(a.v.wrapping_mul(b.v)),
                boolean: false,
            }
        }
    }
    fn finish(self, elem: ElemType) -> Self {
        Int {
            v: if elem == ElemType::I1 {
                i64::from(self.v != 0)
            } else {
                wrap_int(self.v, elem)
            },
            boolean: self.boolean,
        }
    }
}

fn floats<S: Scalar>(t: &Tensor<S>) -> Tensor<Float<S>> {
    t.map(|x| Float(x.clone()))
}

fn unfloat<S: Scalar>(t: Tensor<Float<S>>) -> Tensor<S> {
    Tensor::new(t.shape, t.data.into_iter().map(|x| x.0).collect())
}

fn ints(t: &Tensor<i64>, elem: ElemType) -> Tensor<Int> {
    t.map(|&v| Int {
        v,
        boolean: elem == ElemType::I1,
    })
}

fn unint(t: Tensor<Int>) -> Tensor<i64> {
    Tensor::new(t.shape, t.data.into_iter().map(|x| x.v).collect())
}

/// `dot_general` of float operands.
pub fn dot_general<S: Scalar>(
    lhs: &Tensor<S>,
    rhs: &Tensor<S>,
    dims: &DotDims,
    out_elem: ElemType,
) -> Result<Tensor<S>, Fail> {
    dot_general_in(&floats(lhs), &floats(rhs), dims, out_elem).map(unfloat)
}

/// `dot_general` of integer (or i1) operands of type `in_elem`, wrapping in
/// the result type.
pub fn dot_general_int(
    lhs: &Tensor<i64>,
    rhs: &Tensor<i64>,
    in_elem: ElemType,
    dims: &DotDims,
    out_elem: ElemType,
) -> Result<Tensor<i64>, Fail> {
    dot_general_in(&ints(lhs, in_elem), &ints(rhs, in_elem), dims, out_elem).map(unint)
}

/// `convolution` of float operands.
pub fn convolution<S: Scalar>(
    lhs: &Tensor<S>,
    rhs: &Tensor<S>,
    a: &ConvAttrs,
    out_shape: &[usize],
    out_elem: ElemType,
) -> Result<Tensor<S>, Fail> {
    convolution_in(&floats(lhs), &floats(rhs), a, out_shape, out_elem).map(unfloat)
}

/// `convolution` of integer (or i1) operands of type `in_elem`, wrapping in
/// the result type.
pub fn convolution_int(
    lhs: &Tensor<i64>,
    rhs: &Tensor<i64>,
    in_elem: ElemType,
    a: &ConvAttrs,
    out_shape: &[usize],
    out_elem: ElemType,
) -> Result<Tensor<i64>, Fail> {
    convolution_in(
        &ints(lhs, in_elem),
        &ints(rhs, in_elem),
        a,
        out_shape,
        out_elem,
    )
    .map(unint)
}

fn to_usize(dims: &[i64], rank: usize, what: &str) -> Result<Vec<usize>, Fail> {
    dims.iter()
        .map(|&d| {
            if d >= 0 && (d as usize) < rank {
                Ok(d as usize)
            } else {
                Err(Fail::msg(format!("{what} dimension {d} out of range")))
            }
        })
        .collect()
}

/// `dot_general`: result dimensions are batch, lhs free, rhs free (each in
/// operand order); every result element sums lhs·rhs over the contracting dims.
fn dot_general_in<S: Ring>(
    lhs: &Tensor<S>,
    rhs: &Tensor<S>,
    dims: &DotDims,
    out_elem: ElemType,
) -> Result<Tensor<S>, Fail> {
    let lb = to_usize(&dims.lhs_batch, lhs.rank(), "lhs batch")?;
    let rb = to_usize(&dims.rhs_batch, rhs.rank(), "rhs batch")?;
    let lc = to_usize(&dims.lhs_contracting, lhs.rank(), "lhs contracting")?;
    let rc = to_usize(&dims.rhs_contracting, rhs.rank(), "rhs contracting")?;
    if lb.len() != rb.len() || lc.len() != rc.len() {
        return Err(Fail::msg("batch/contracting dimension counts differ"));
    }
    for (&a, &b) in lb.iter().zip(&rb).chain(lc.iter().zip(&rc)) {
        if lhs.shape[a] != rhs.shape[b] {
            return Err(Fail::msg(format!(
                "lhs dimension {a} (size {}) and rhs dimension {b} (size {}) differ",
                lhs.shape[a], rhs.shape[b]
            )));
        }
    }
    let free = |rank: usize, used: &[usize]| -> Vec<usize> {
        (0..rank).filter(|d| !used.contains(d)).collect()
    };
    let lf = free(lhs.rank(), &[lb.clone(), lc.clone()].concat());
    let rf = free(rhs.rank(), &[rb.clone(), rc.clone()].concat());
    let ext =
        |t: &Tensor<S>, ds: &[usize]| -> Vec<usize> { ds.iter().map(|&d| t.shape[d]).collect() };
    let batch_ext = ext(lhs, &lb);
    let contr_ext = ext(lhs, &lc);
    let b_l = strided_offsets(&batch_ext, &strides_at(&lhs.shape, &lb), 0);
    let b_r = strided_offsets(&batch_ext, &strides_at(&rhs.shape, &rb), 0);
    let c_l = strided_offsets(&contr_ext, &strides_at(&lhs.shape, &lc), 0);
    let c_r = strided_offsets(&contr_ext, &strides_at(&rhs.shape, &rc), 0);
    let f_l = strided_offsets(&ext(lhs, &lf), &strides_at(&lhs.shape, &lf), 0);
    let f_r = strided_offsets(&ext(rhs, &rf), &strides_at(&rhs.shape, &rf), 0);
    let mut out_shape = batch_ext;
    out_shape.extend(ext(lhs, &lf));
    out_shape.extend(ext(rhs, &rf));
    let mut data = Vec::with_capacity(b_l.len() * f_l.len() * f_r.len());
    for (&bl, &br) in b_l.iter().zip(&b_r) {
        for &il in &f_l {
            for &jr in &f_r {
                let mut acc = S::zero();
                for (&kl, &kr) in c_l.iter().zip(&c_r) {
                    acc = acc.mul_add(&lhs.data[bl + il + kl], &rhs.data[br + jr + kr]);
                }
                data.push(acc.finish(out_elem));
            }
        }
    }
    Ok(Tensor::new(out_shape, data))
}

/// `convolution` per the spec: the lhs is padded (negative = crop) and
/// base-dilated (`lhs_dilation`), the kernel window is dilated
/// (`rhs_dilation`) and optionally reversed, and each output element is the
/// sum over the window and the group's input features of lhs·rhs. With
/// `feature_group_count` G the input features and output features are split
/// into G contiguous groups; with `batch_group_count` B the lhs batch and the
/// output features are split into B contiguous groups.
fn convolution_in<S: Ring>(
    lhs: &Tensor<S>,
    rhs: &Tensor<S>,
    a: &ConvAttrs,
    out_shape: &[usize],
    out_elem: ElemType,
) -> Result<Tensor<S>, Fail> {
    let d = &a.dims;
    let ns = d.input_spatial.len();
    let (lr, rr) = (lhs.rank(), rhs.rank());
    let ib = to_usize(&[d.input_batch], lr, "input batch")?[0];
    let ifeat = to_usize(&[d.input_feature], lr, "input feature")?[0];
    let isp = to_usize(&d.input_spatial, lr, "input spatial")?;
    let kif = to_usize(&[d.kernel_input_feature], rr, "kernel input feature")?[0];
    let kof = to_usize(&[d.kernel_output_feature], rr, "kernel output feature")?[0];
    let ksp = to_usize(&d.kernel_spatial, rr, "kernel spatial")?;
    let orank = out_shape.len();
    let ob = to_usize(&[d.output_batch], orank, "output batch")?[0];
    let of = to_usize(&[d.output_feature], orank, "output feature")?[0];
    let osp = to_usize(&d.output_spatial, orank, "output spatial")?;
    let attr_ok = [
        a.window_strides.len(),
        a.padding.len(),
        a.lhs_dilation.len(),
        a.rhs_dilation.len(),
        a.window_reversal.len(),
        ksp.len(),
        osp.len(),
    ]
    .iter()
    .all(|&n| n == ns);
    if !attr_ok {
        return Err(Fail::msg(
            "convolution attributes disagree on the number of spatial dims",
        ));
    }
    let (fg, bg) = (a.feature_group_count, a.batch_group_count);
    if fg < 1 || bg < 1 || (fg > 1 && bg > 1) {
        return Err(Fail::msg(format!(
            "feature_group_count {fg} / batch_group_count {bg} unsupported"
        )));
    }
    let (fg, bg) = (fg as usize, bg as usize);
    let n_in = lhs.shape[ib];
    let c_in = lhs.shape[ifeat];
    let ci = rhs.shape[kif];
    let o_feat = rhs.shape[kof];
    let n_out = out_shape[ob];
    if c_in != ci * fg
        || !o_feat.is_multiple_of(fg * bg)
        || n_in != n_out * bg
        || out_shape[of] != o_feat
    {
        return Err(Fail::msg(format!(
            "feature/batch sizes disagree: input batch {n_in} features {c_in}, kernel input features {ci} output features {o_feat}, output batch {n_out} features {}, groups {fg}/{bg}",
            out_shape[of]
        )));
    }
    let lstr = lhs.strides();
    let rstr = rhs.strides();
    let ostr = crate::tensor::row_major_strides(out_shape);

    // Per spatial dim: for output index y and window index k, the lhs offset
    // contribution (or −1 when the position is padding or a dilation hole) and
    // the rhs offset contribution (reversed window reads K−1−k).
    let mut tables: Vec<Vec<(isize, usize)>> = Vec::with_capacity(ns);
    for s in 0..ns {
        let (l_len, k_len, y_len) = (lhs.shape[isp[s]], rhs.shape[ksp[s]], out_shape[osp[s]]);
        let (stride, lo) = (a.window_strides[s], a.padding[s].0);
        let (ld, rd) = (a.lhs_dilation[s], a.rhs_dilation[s]);
        let mut t = Vec::with_capacity(y_len * k_len);
        for y in 0..y_len as i64 {
            for k in 0..k_len as i64 {
                let q = y * stride + k * rd - lo;
                let valid = q >= 0 && q % ld == 0 && q / ld < l_len as i64;
                let kk = if a.window_reversal[s] {
                    k_len as i64 - 1 - k
                } else {
                    k
                };
                t.push((
                    if valid {
                        (q / ld) as isize * lstr[isp[s]] as isize
                    } else {
                        -1
                    },
                    kk as usize * rstr[ksp[s]],
                ));
            }
        }
        tables.push(t);
    }
    // For every output spatial position (row-major), the valid (lhs, rhs)
    // spatial offset pairs of its window, and its output spatial offset.
    let y_ext: Vec<usize> = osp.iter().map(|&o| out_shape[o]).collect();
    let k_ext: Vec<usize> = ksp.iter().map(|&k| rhs.shape[k]).collect();
    let k_len: usize = k_ext.iter().product();
    let y_offs = strided_offsets(&y_ext, &strides_at(out_shape, &osp), 0);
    let mut pair_start = Vec::with_capacity(y_offs.len() + 1);
    let mut pairs: Vec<(usize, usize)> = Vec::new();
    let mut y_idx = vec![0usize; ns];
    for _ in 0..y_offs.len() {
        pair_start.push(pairs.len());
        let mut k_idx = vec![0usize; ns];
        for _ in 0..k_len {
            let mut lo_off = 0isize;
            let mut ro_off = 0usize;
            let mut valid = true;
            for s in 0..ns {
                let (l, r) = tables[s][y_idx[s] * k_ext[s] + k_idx[s]];
                if l < 0 {
                    valid = false;
                    break;
                }
                lo_off += l;
                ro_off += r;
            }
            if valid {
                pairs.push((lo_off as usize, ro_off));
            }
            for s in (0..ns).rev() {
                k_idx[s] += 1;
                if k_idx[s] < k_ext[s] {
                    break;
                }
                k_idx[s] = 0;
            }
        }
        for s in (0..ns).rev() {
            y_idx[s] += 1;
            if y_idx[s] < y_ext[s] {
                break;
            }
            y_idx[s] = 0;
        }
    }
    pair_start.push(pairs.len());

    let mut out = vec![S::zero(); out_shape.iter().product()];
    let o_per_fg = o_feat / fg;
    let o_per_bg = o_feat / bg;
    for b in 0..n_out {
        for o in 0..o_feat {
            let g = o / o_per_fg;
            let in_batch = (o / o_per_bg) * n_out + b;
            let lbase = in_batch * lstr[ib];
            let rbase = o * rstr[kof];
            for (yi, &yo) in y_offs.iter().enumerate() {
                let window = &pairs[pair_start[yi]..pair_start[yi + 1]];
                let mut acc = S::zero();
                for c in 0..ci {
                    let lc = lbase + (g * ci + c) * lstr[ifeat];
                    let rc = rbase + c * rstr[kif];
                    for &(lo, ro) in window {
                        acc = acc.mul_add(&lhs.data[lc + lo], &rhs.data[rc + ro]);
                    }
                }
                out[b * ostr[ob] + o * ostr[of] + yo] = acc.finish(out_elem);
            }
        }
    }
    Ok(Tensor::new(out_shape.to_vec(), out))
}
