//! The emission vocabulary every layer uses: thin, typed wrappers over
//! `FuncBuilder::push1` for the ops forwards and backward maps are made of, so a
//! layer reads like its formula and no layer spells attributes by hand.

use ir::{
    BinaryOp, Block, CompareDirection, CompareType, ConvAttrs, DotDims, ElemType, FuncBuilder,
    OpKind, ScatterWindowAttrs, TensorType, TypeError, UnaryOp, ValueId, WindowAttrs,
};

/// What every emission returns: the value built, or the builder's shape error.
pub type EmitResult<T> = Result<T, TypeError>;

/// Emission helpers on a function builder. Shapes are checked by the builder.
pub trait Emit {
    fn fb(&mut self) -> &mut FuncBuilder;

    fn shape(&mut self, v: ValueId) -> Vec<i64> {
        self.fb().ty(v).shape.clone()
    }
    fn elem(&mut self, v: ValueId) -> ElemType {
        self.fb().ty(v).elem
    }

    /// A scalar f32 constant broadcast (splat) to `shape`.
    fn splat(&mut self, value: f64, shape: &[i64]) -> ValueId {
        self.fb().splat(value, TensorType::f32(shape.to_vec()))
    }
    /// A splat of `value` shaped like `like`.
    fn splat_like(&mut self, value: f64, like: ValueId) -> ValueId {
        let s = self.shape(like);
        self.splat(value, &s)
    }

    fn add(&mut self, a: ValueId, b: ValueId) -> EmitResult<ValueId> {
        self.fb().binary(BinaryOp::Add, a, b)
    }
    fn sub(&mut self, a: ValueId, b: ValueId) -> EmitResult<ValueId> {
        self.fb().binary(BinaryOp::Subtract, a, b)
    }
    fn mul(&mut self, a: ValueId, b: ValueId) -> EmitResult<ValueId> {
        self.fb().binary(BinaryOp::Multiply, a, b)
    }
    fn div(&mut self, a: ValueId, b: ValueId) -> EmitResult<ValueId> {
        self.fb().binary(BinaryOp::Divide, a, b)
    }
    fn max(&mut self, a: ValueId, b: ValueId) -> EmitResult<ValueId> {
        self.fb().binary(BinaryOp::Maximum, a, b)
    }
    fn min(&mut self, a: ValueId, b: ValueId) -> EmitResult<ValueId> {
        self.fb().binary(BinaryOp::Minimum, a, b)
    }
    fn and(&mut self, a: ValueId, b: ValueId) -> EmitResult<ValueId> {
        self.fb().binary(BinaryOp::And, a, b)
    }
    /// `a * c` for a scalar constant c.
    fn scale(&mut self, a: ValueId, c: f64) -> EmitResult<ValueId> {
        let k = self.splat_like(c, a);
        self.mul(a, k)
    }
    fn unary(&mut self, op: UnaryOp, a: ValueId) -> EmitResult<ValueId> {
        self.fb().push1(OpKind::Unary(op), &[a], None)
    }
    fn neg(&mut self, a: ValueId) -> EmitResult<ValueId> {
        self.unary(UnaryOp::Negate, a)
    }

    /// `compare dir, a, b, FLOAT` → i1.
    fn cmp(&mut self, dir: CompareDirection, a: ValueId, b: ValueId) -> EmitResult<ValueId> {
        self.fb().push1(
            OpKind::Compare {
                direction: dir,
                compare_type: Some(CompareType::Float),
            },
            &[a, b],
            None,
        )
    }
    fn select(&mut self, pred: ValueId, t: ValueId, f: ValueId) -> EmitResult<ValueId> {
        self.fb().push1(OpKind::Select, &[pred, t, f], None)
    }

    fn reshape(&mut self, a: ValueId, shape: &[i64]) -> EmitResult<ValueId> {
        let e = self.elem(a);
        self.fb().push1(
            OpKind::Reshape,
            &[a],
            Some(TensorType::new(shape.to_vec(), e)),
        )
    }
    fn transpose(&mut self, a: ValueId, perm: &[i64]) -> EmitResult<ValueId> {
        self.fb().push1(
            OpKind::Transpose {
                permutation: perm.to_vec(),
            },
            &[a],
            None,
        )
    }
    fn reverse(&mut self, a: ValueId, dims: &[i64]) -> EmitResult<ValueId> {
        self.fb().push1(
            OpKind::Reverse {
                dims: dims.to_vec(),
            },
            &[a],
            None,
        )
    }
    /// `broadcast_in_dim a, dims` to `shape`.
    fn bcast(&mut self, a: ValueId, dims: &[i64], shape: &[i64]) -> EmitResult<ValueId> {
        let e = self.elem(a);
        self.fb().push1(
            OpKind::BroadcastInDim {
                dims: dims.to_vec(),
            },
            &[a],
            Some(TensorType::new(shape.to_vec(), e)),
        )
    }
    /// Zero padding with `low`, `high`, `interior` per dimension.
    fn pad(
        &mut self,
        a: ValueId,
        low: &[i64],
        high: &[i64],
        interior: &[i64],
    ) -> EmitResult<ValueId> {
        self.pad_with(a, 0.0, low, high, interior)
    }
    fn pad_with(
        &mut self,
        a: ValueId,
        value: f64,
        low: &[i64],
        high: &[i64],
        interior: &[i64],
    ) -> EmitResult<ValueId> {
        let e = self.elem(a);
        let z = self.fb().splat(value, TensorType::scalar(e));
        self.fb().push1(
            OpKind::Pad {
                low: low.to_vec(),
                high: high.to_vec(),
                interior: interior.to_vec(),
            },
            &[a, z],
            None,
        )
    }
    fn slice(
        &mut self,
        a: ValueId,
        start: &[i64],
        limit: &[i64],
        strides: &[i64],
    ) -> EmitResult<ValueId> {
        self.fb().push1(
            OpKind::Slice {
                start: start.to_vec(),
                limit: limit.to_vec(),
                strides: strides.to_vec(),
            },
            &[a],
            None,
        )
    }
    fn concat(&mut self, parts: &[ValueId], dim: i64) -> EmitResult<ValueId> {
        self.fb().push1(OpKind::Concatenate { dim }, parts, None)
    }

    /// `reduce(a) applies <op> across dims` with the op's identity as init.
    fn reduce(&mut self, op: BinaryOp, a: ValueId, dims: &[i64]) -> EmitResult<ValueId> {
        let e = self.elem(a);
        let init = match op {
            BinaryOp::Add => 0.0,
            BinaryOp::Multiply => 1.0,
            BinaryOp::Maximum => f64::NEG_INFINITY,
            BinaryOp::Minimum => f64::INFINITY,
            _ => panic!("reduce with {op:?} has no identity"),
        };
        let init = self.fb().splat(init, TensorType::scalar(e));
        let body = self.fb().binary_region(op, e)?;
        Ok(self.fb().push(
            OpKind::Reduce {
                dims: dims.to_vec(),
            },
            &[a, init],
            vec![body],
            None,
        )?[0])
    }
    fn reduce_sum(&mut self, a: ValueId, dims: &[i64]) -> EmitResult<ValueId> {
        self.reduce(BinaryOp::Add, a, dims)
    }

    fn dot(&mut self, a: ValueId, b: ValueId, dims: DotDims) -> EmitResult<ValueId> {
        self.fb().push1(
            OpKind::DotGeneral {
                dims,
                precision_config: None,
            },
            &[a, b],
            None,
        )
    }
    /// `[m,k] · [k,n]`, contracting a's `ca` with b's `cb`.
    fn matmul(&mut self, a: ValueId, b: ValueId, ca: i64, cb: i64) -> EmitResult<ValueId> {
        self.dot(
            a,
            b,
            DotDims {
                lhs_contracting: vec![ca],
                rhs_contracting: vec![cb],
                ..Default::default()
            },
        )
    }
    fn conv(&mut self, x: ValueId, w: ValueId, attrs: ConvAttrs) -> EmitResult<ValueId> {
        self.fb().push1(OpKind::Convolution(attrs), &[x, w], None)
    }

    /// `reduce_window` with a max (init −∞) or add (init 0) body.
    fn reduce_window(
        &mut self,
        op: BinaryOp,
        a: ValueId,
        attrs: WindowAttrs,
    ) -> EmitResult<ValueId> {
        let e = self.elem(a);
        let init = match op {
            BinaryOp::Maximum => f64::NEG_INFINITY,
            _ => 0.0,
        };
        let init = self.fb().splat(init, TensorType::scalar(e));
        let body = self.fb().binary_region(op, e)?;
        Ok(self
            .fb()
            .push(OpKind::ReduceWindow(attrs), &[a, init], vec![body], None)?[0])
    }
    /// `select_and_scatter` with a `select` compare region and an add scatter.
    fn select_and_scatter(
        &mut self,
        operand: ValueId,
        source: ValueId,
        select: CompareDirection,
        attrs: ScatterWindowAttrs,
    ) -> EmitResult<ValueId> {
        let e = self.elem(operand);
        let s = TensorType::scalar(e);
        let sel: Block = self.fb().region(&[s.clone(), s.clone()], |b, a| {
            Ok(vec![b.push1(
                OpKind::Compare {
                    direction: select,
                    compare_type: Some(CompareType::Float),
                },
                &[a[0], a[1]],
                None,
            )?])
        })?;
        let scatter = self.fb().binary_region(BinaryOp::Add, e)?;
        let init = self.fb().splat(0.0, s);
        Ok(self.fb().push(
            OpKind::SelectAndScatter(attrs),
            &[operand, source, init],
            vec![sel, scatter],
            None,
        )?[0])
    }
}

impl Emit for FuncBuilder {
    fn fb(&mut self) -> &mut FuncBuilder {
        self
    }
}
