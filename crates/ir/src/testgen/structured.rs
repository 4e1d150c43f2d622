//! The generator's structured ops: gather, scatter, dynamic_slice,
//! dynamic_update_slice, while, case, if, sort, map and optimization_barrier,
//! each drawn well typed, with index constants that reach past both ends of
//! the operand (so the clamping and skipping rules are exercised) and loops
//! that always end (a counter to at most 3).

use super::ops::Gen;
use super::*;

impl Gen<'_> {
    /// A pool value of rank ≥ 1 (a scalar is reshaped to `[1]`).
    fn ranked_value(&mut self) -> ValueId {
        let x = self.any_value();
        let ty = self.ty(x);
        if ty.rank() > 0 {
            return x;
        }
        self.push1(
            OpKind::Reshape,
            &[x],
            Some(TensorType::new(vec![1], ty.elem)),
        )
    }

    /// An i32 index tensor of `shape` with values in `[-2, hi + 2]`.
    fn index_constant(&mut self, shape: Vec<i64>, hi: i64) -> ValueId {
        let n: i64 = shape.iter().product();
        let data = (0..n).map(|_| self.rng.range(-2, hi + 2)).collect();
        self.push1(
            OpKind::Constant(DenseData::Int(data)),
            &[],
            Some(TensorType::new(shape, ElemType::I32)),
        )
    }

    /// `x[idx]` rows (jnp.take along axis 0), indices `[k, 1]` or `[k]`.
    pub(super) fn gather(&mut self) {
        let x = self.ranked_value();
        let ty = self.ty(x);
        let r = ty.rank() as i64;
        let k = self.rng.range(1, 3);
        let vector_last = self.rng.chance(0.5);
        let idx_shape = if vector_last { vec![k] } else { vec![k, 1] };
        let idx = self.index_constant(idx_shape, ty.shape[0]);
        let mut slice_sizes = ty.shape.clone();
        slice_sizes[0] = ty.shape[0].min(1);
        let a = GatherAttrs {
            offset_dims: (1..r).collect(),
            collapsed_slice_dims: vec![0],
            start_index_map: vec![0],
            index_vector_dim: 1,
            slice_sizes,
            indices_are_sorted: self.rng.chance(0.2),
            ..Default::default()
        };
        self.push1(OpKind::Gather(a), &[x, idx], None);
    }

    /// `x.at[idx].add(u)`-style row scatter with a combining or overwriting region.
    pub(super) fn scatter(&mut self) {
        let x = self.ranked_value();
        let ty = self.ty(x);
        let r = ty.rank() as i64;
        let k = self.rng.range(1, 3);
        let idx = self.index_constant(vec![k, 1], ty.shape[0]);
        let mut ushape = ty.shape.clone();
        ushape[0] = k;
        let u = self.value_of_type(&TensorType::new(ushape, ty.elem));
        let e = ty.elem;
        let region = if self.rng.chance(0.3) {
            let s = TensorType::scalar(e);
            self.b
                .region(&[s.clone(), s], |_, a| Ok(vec![a[1]]))
                .expect("overwrite region")
        } else {
            let op = if e.is_bool() {
                BinaryOp::Or
            } else {
                self.rng
                    .pick(&[BinaryOp::Add, BinaryOp::Maximum, BinaryOp::Multiply])
            };
            self.b.binary_region(op, e).expect("scatter region")
        };
        let a = ScatterAttrs {
            update_window_dims: (1..r).collect(),
            inserted_window_dims: vec![0],
            scatter_dims_to_operand_dims: vec![0],
            index_vector_dim: 1,
            indices_are_sorted: false,
            unique_indices: self.rng.chance(0.2),
            ..Default::default()
        };
        self.push(OpKind::Scatter(a), &[x, idx, u], vec![region], None);
    }

    fn start_scalars(&mut self, shape: &[i64]) -> Vec<ValueId> {
        shape
            .iter()
            .map(|&n| self.index_constant(vec![], n))
            .collect()
    }

    pub(super) fn dynamic_slice(&mut self) {
        let x = self.any_value();
        let shape = self.ty(x).shape;
        let sizes: Vec<i64> = shape.iter().map(|&n| self.rng.range(0, n)).collect();
        let mut operands = vec![x];
        operands.extend(self.start_scalars(&shape));
        self.push1(OpKind::DynamicSlice { sizes }, &operands, None);
    }

    pub(super) fn dynamic_update_slice(&mut self) {
        let x = self.any_value();
        let ty = self.ty(x);
        let ushape: Vec<i64> = ty.shape.iter().map(|&n| self.rng.range(0, n)).collect();
        let u = self.value_of_type(&TensorType::new(ushape, ty.elem));
        let mut operands = vec![x, u];
        operands.extend(self.start_scalars(&ty.shape));
        self.push1(OpKind::DynamicUpdateSlice, &operands, None);
    }

    /// `fori_loop`: `(k, x)` with `k < n` (n ≤ 3) and `x ← x op x`.
    pub(super) fn while_loop(&mut self) {
        let x = self.any_value();
        let ty = self.ty(x);
        let i32s = TensorType::scalar(ElemType::I32);
        let zero = self.push1(
            OpKind::Constant(DenseData::Int(vec![0])),
            &[],
            Some(i32s.clone()),
        );
        let n = self.rng.range(0, 3);
        let op = if ty.elem.is_bool() {
            BinaryOp::Or
        } else {
            self.rng
                .pick(&[BinaryOp::Add, BinaryOp::Maximum, BinaryOp::Multiply])
        };
        let state = [i32s.clone(), ty.clone()];
        let cond = self
            .b
            .region(&state, |b, a| {
                let limit = b.push1(
                    OpKind::Constant(DenseData::Int(vec![n])),
                    &[],
                    Some(TensorType::scalar(ElemType::I32)),
                )?;
                Ok(vec![b.push1(
                    OpKind::Compare {
                        direction: CompareDirection::Lt,
                        compare_type: Some(CompareType::Signed),
                    },
                    &[a[0], limit],
                    None,
                )?])
            })
            .expect("while cond");
        let body = self
            .b
            .region(&state, |b, a| {
                let one = b.push1(
                    OpKind::Constant(DenseData::Int(vec![1])),
                    &[],
                    Some(TensorType::scalar(ElemType::I32)),
                )?;
                let k = b.binary(BinaryOp::Add, a[0], one)?;
                let y = b.binary(op, a[1], a[1])?;
                Ok(vec![k, y])
            })
            .expect("while body");
        self.push(OpKind::While, &[zero, x], vec![cond, body], None);
    }

    /// A branch returning `v` (a captured value) or an op on it. The captured
    /// values are drawn before any branch is built: a value made in between
    /// would break the canonical id order (regions before the op's results).
    fn branch(&mut self, v: ValueId) -> Block {
        let ty = self.ty(v);
        let negate = !ty.elem.is_bool() && self.rng.chance(0.5);
        self.b
            .region(&[], |b, _| {
                Ok(vec![if negate {
                    b.push1(OpKind::Unary(UnaryOp::Negate), &[v], None)?
                } else {
                    b.binary(BinaryOp::Maximum, v, v)?
                }])
            })
            .expect("branch")
    }

    /// `case` (index in `[-1, 3]` over 1–3 branches) or `if`.
    pub(super) fn branches(&mut self) {
        let x = self.any_value();
        let ty = self.ty(x);
        if self.rng.chance(0.5) {
            let pred = self.rng.range(0, 1);
            let p = self.push1(
                OpKind::Constant(DenseData::Int(vec![pred])),
                &[],
                Some(TensorType::scalar(ElemType::I1)),
            );
            let (a, b) = (self.value_of_type(&ty), self.value_of_type(&ty));
            let regions = vec![self.branch(a), self.branch(b)];
            self.push(OpKind::If, &[p], regions, None);
        } else {
            let k = self.index_constant(vec![], 2);
            let n = self.rng.range(1, 3);
            let vs: Vec<ValueId> = (0..n).map(|_| self.value_of_type(&ty)).collect();
            let regions = vs.into_iter().map(|v| self.branch(v)).collect();
            self.push(OpKind::Case, &[k], regions, None);
        }
    }

    /// Sort 1–2 operands along a random dimension by the first one.
    pub(super) fn sort(&mut self) {
        let x = self.ranked_value();
        let ty = self.ty(x);
        let mut operands = vec![x];
        if self.rng.chance(0.4) {
            let e = rand_elem(&mut self.rng);
            operands.push(self.value_of_type(&ty.with_elem(e)));
        }
        let pairs: Vec<TensorType> = operands
            .iter()
            .flat_map(|v| {
                let s = TensorType::scalar(self.ty(*v).elem);
                [s.clone(), s]
            })
            .collect();
        let e = ty.elem;
        let compare_type = if e.is_float() {
            self.rng
                .pick(&[CompareType::Float, CompareType::TotalOrder])
        } else if e.is_unsigned() || e.is_bool() {
            CompareType::Unsigned
        } else {
            CompareType::Signed
        };
        let direction = self.rng.pick(&[CompareDirection::Lt, CompareDirection::Gt]);
        let cmp = self
            .b
            .region(&pairs, |b, a| {
                Ok(vec![b.push1(
                    OpKind::Compare {
                        direction,
                        compare_type: Some(compare_type),
                    },
                    &[a[0], a[1]],
                    None,
                )?])
            })
            .expect("comparator");
        let r = ty.rank() as i64;
        let dimension = self.rng.range(-r, r - 1);
        let is_stable = self.rng.chance(0.7);
        self.push(
            OpKind::Sort {
                dimension,
                is_stable,
            },
            &operands,
            vec![cmp],
            None,
        );
    }

    /// `map` of a random scalar computation over 1–2 operands of one shape.
    pub(super) fn map(&mut self) {
        let x = self.any_value();
        let ty = self.ty(x);
        let mut operands = vec![x];
        if self.rng.chance(0.5) {
            operands.push(self.value_of_type(&ty));
        }
        let args: Vec<TensorType> = operands
            .iter()
            .map(|_| TensorType::scalar(ty.elem))
            .collect();
        let rng = &mut self.rng;
        let body = self
            .b
            .region(&args, |b, a| {
                let mut pool = a.to_vec();
                for _ in 0..1 + rng.below(3) {
                    ops::scalar_op(b, rng, &mut pool);
                }
                Ok(vec![rng.pick(&pool)])
            })
            .expect("map computation");
        let dimensions = (0..ty.rank() as i64).collect();
        self.push(OpKind::Map { dimensions }, &operands, vec![body], None);
    }

    pub(super) fn optimization_barrier(&mut self) {
        let mut operands = vec![self.any_value()];
        if self.rng.chance(0.5) {
            operands.push(self.any_value());
        }
        self.push(OpKind::OptimizationBarrier, &operands, Vec::new(), None);
    }
}
