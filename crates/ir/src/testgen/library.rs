//! The generator of the bit-level and library ops:
//! bitcast_convert (every width relation), reduce_precision,
//! get_dimension_size, triangular_solve and chlo.top_k.

use super::ops::Gen;
use super::*;

/// The bit-level and library ops: bitcast_convert, reduce_precision, get_dimension_size, chlo.top_k.
impl Gen<'_> {
    pub(super) fn library_op(&mut self) {
        match self.rng.below(5) {
            0 => self.bitcast_convert(),
            1 => self.reduce_precision(),
            2 => self.get_dimension_size(),
            3 => self.triangular_solve(),
            _ => self.top_k(),
        }
    }

    /// A bitcast to a random type of the same width, a narrower one (adding a
    /// trailing dimension) or a wider one (when the last dimension fits).
    fn bitcast_convert(&mut self) {
        let x = self.value_with_elem(|e| !e.is_bool(), ElemType::F32);
        let t = self.ty(x);
        let ow = t.elem.bit_width();
        let options: Vec<TensorType> = ElemType::ALL
            .iter()
            .filter(|e| !e.is_bool())
            .filter_map(|&e| {
                let rw = e.bit_width();
                if rw == ow {
                    Some(t.with_elem(e))
                } else if rw < ow {
                    let mut s = t.shape.clone();
                    s.push((ow / rw) as i64);
                    Some(TensorType::new(s, e))
                } else if t.shape.last() == Some(&((rw / ow) as i64)) {
                    Some(TensorType::new(t.shape[..t.rank() - 1].to_vec(), e))
                } else {
                    None
                }
            })
            .collect();
        let r = self.rng.pick(&options);
        self.push1(OpKind::BitcastConvert, &[x], Some(r));
    }

    fn reduce_precision(&mut self) {
        let x = self.float_value();
        let kind = OpKind::ReducePrecision {
            exponent_bits: self.rng.range(1, 11),
            mantissa_bits: self.rng.range(0, 52),
        };
        self.push1(kind, &[x], None);
    }

    /// A pool value of rank ≥ 1, else a fresh rank-1 constant.
    fn ranked_operand(&mut self) -> ValueId {
        match self.find(|t| t.rank() >= 1) {
            Some(v) if self.rng.chance(0.8) => v,
            _ => {
                let elem = rand_elem(&mut self.rng);
                let n = self.rng.range(1, 5);
                self.constant(TensorType::new(vec![n], elem))
            }
        }
    }

    fn get_dimension_size(&mut self) {
        let x = self.ranked_operand();
        let rank = self.ty(x).rank();
        let dimension = self.rng.below(rank) as i64;
        self.push1(OpKind::GetDimensionSize { dimension }, &[x], None);
    }

    /// a `[…, M, M]` and b `[…, M, N]` or `[…, N, M]` with random flags.
    fn triangular_solve(&mut self) {
        let elem = self
            .rng
            .pick(&[ElemType::F32, ElemType::F64, ElemType::BF16]);
        let batch: Vec<i64> = (0..self.rng.below(2))
            .map(|_| self.rng.range(1, 2))
            .collect();
        let m = self.rng.range(1, 3);
        let n = self.rng.range(1, 3);
        let left_side = self.rng.chance(0.5);
        let mut a_shape = batch.clone();
        a_shape.extend([m, m]);
        let mut b_shape = batch;
        b_shape.extend(if left_side { [m, n] } else { [n, m] });
        let a = self.value_of_type(&TensorType::new(a_shape, elem));
        let b = self.value_of_type(&TensorType::new(b_shape, elem));
        let kind = OpKind::TriangularSolve {
            left_side,
            lower: self.rng.chance(0.5),
            unit_diagonal: self.rng.chance(0.5),
            transpose_a: self.rng.pick(&TransposeA::ALL),
        };
        self.push1(kind, &[a, b], None);
    }

    fn top_k(&mut self) {
        let x = self.ranked_operand();
        let last = *self.ty(x).shape.last().expect("rank >= 1");
        let k = self.rng.range(0, last);
        self.push(OpKind::TopK { k }, &[x], Vec::new(), None);
    }
}
