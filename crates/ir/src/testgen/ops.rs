//! The op generator: per-function state ([`Gen`]) that draws one random,
//! well-typed op of every [`OpKind`] at a time, and the scalar ops of regions.

use super::*;

/// Per-function generation state: the builder, and the values ops may use.
pub(super) struct Gen<'c> {
    pub(super) rng: Rng,
    pub(super) b: FuncBuilder,
    /// Body values usable as operands (parameters and op results).
    pub(super) pool: Vec<ValueId>,
    pub(super) callees: &'c [Func],
}

impl Gen<'_> {
    pub(super) fn ty(&self, v: ValueId) -> TensorType {
        self.b.ty(v).clone()
    }

    /// Push a single-result op; a type error is a generator bug.
    pub(super) fn push1(
        &mut self,
        kind: OpKind,
        operands: &[ValueId],
        given: Option<TensorType>,
    ) -> ValueId {
        let what = format!("{kind:?}");
        let v = self
            .b
            .push1(kind, operands, given)
            .unwrap_or_else(|e| panic!("testgen built an ill-typed op {what}: {e}"));
        self.pool.push(v);
        v
    }

    pub(super) fn push(
        &mut self,
        kind: OpKind,
        operands: &[ValueId],
        regions: Vec<Block>,
        given: Option<&[TensorType]>,
    ) -> Vec<ValueId> {
        let what = format!("{kind:?}");
        let vs = self
            .b
            .push(kind, operands, regions, given)
            .unwrap_or_else(|e| panic!("testgen built an ill-typed op {what}: {e}"));
        self.pool.extend(&vs);
        vs
    }

    fn infer1(&self, kind: &OpKind, operands: &[ValueId]) -> TensorType {
        let tys: Vec<TensorType> = operands.iter().map(|v| self.ty(*v)).collect();
        infer_result_types(kind, &tys, &[], None)
            .unwrap_or_else(|e| panic!("testgen built an ill-typed op: {e}"))
            .remove(0)
    }

    pub(super) fn constant(&mut self, ty: TensorType) -> ValueId {
        let n = ty.num_elements() as usize;
        let splat = n != 1 && (n > 12 || self.rng.chance(0.5));
        let data = scalar_data(&mut self.rng, ty.elem, if splat { 1 } else { n });
        self.push1(OpKind::Constant(data), &[], Some(ty))
    }

    /// A pool value satisfying `ok`, if any.
    pub(super) fn find(&mut self, ok: impl Fn(&TensorType) -> bool) -> Option<ValueId> {
        let hits: Vec<ValueId> = self
            .pool
            .iter()
            .copied()
            .filter(|v| ok(self.b.ty(*v)))
            .collect();
        (!hits.is_empty()).then(|| self.rng.pick(&hits))
    }

    /// A value of exactly `ty`: from the pool, reshaped from a pool value with
    /// as many elements, or a fresh constant.
    pub(super) fn value_of_type(&mut self, ty: &TensorType) -> ValueId {
        if self.rng.chance(0.7) {
            if let Some(v) = self.find(|t| t == ty) {
                return v;
            }
        }
        if self.rng.chance(0.4) {
            let n = ty.num_elements();
            if let Some(v) = self.find(|t| t.elem == ty.elem && t.num_elements() == n) {
                return self.push1(OpKind::Reshape, &[v], Some(ty.clone()));
            }
        }
        self.constant(ty.clone())
    }

    /// A pool value whose element type satisfies `ok`, or a constant of `fallback`.
    pub(super) fn value_with_elem(
        &mut self,
        ok: impl Fn(ElemType) -> bool,
        fallback: ElemType,
    ) -> ValueId {
        if self.rng.chance(0.8) {
            if let Some(v) = self.find(|t| ok(t.elem)) {
                return v;
            }
        }
        let shape = rand_shape(&mut self.rng, 3);
        self.constant(TensorType::new(shape, fallback))
    }

    pub(super) fn any_value(&mut self) -> ValueId {
        self.value_with_elem(|_| true, ElemType::F32)
    }

    pub(super) fn float_value(&mut self) -> ValueId {
        self.value_with_elem(|e| e.is_float(), ElemType::F32)
    }

    pub(super) fn random_op(&mut self) {
        match self.rng.below(33) {
            0 => {
                let ty = TensorType::new(rand_shape(&mut self.rng, 3), rand_elem(&mut self.rng));
                self.constant(ty);
            }
            1 => self.unary(),
            2 => self.binary(),
            3 => self.compare(),
            4 => self.select(),
            5 => self.clamp(),
            6 => self.convert(),
            7 => self.reshape(),
            8 => self.transpose(),
            9 => self.broadcast_in_dim(),
            10 => self.reverse(),
            11 => self.slice(),
            12 => self.pad(),
            13 => self.concatenate(),
            14 => self.iota(),
            15 => self.dot_general(),
            16 => self.convolution(),
            17 => self.reduce(),
            18 => self.reduce_window(),
            19 => self.select_and_scatter(),
            20 => self.all_reduce(),
            21 => self.call(),
            // Structured ops, in testgen/structured.rs.
            22 => self.gather(),
            23 => self.scatter(),
            24 => self.dynamic_slice(),
            25 => self.dynamic_update_slice(),
            26 => self.while_loop(),
            27 => self.branches(),
            28 => self.sort(),
            29 => self.map(),
            30 => self.optimization_barrier(),
            // The bit-level and library ops.
            31 => self.library_op(),
            // Twice the unary weight: there are twice as many unary ops.
            32 => self.unary(),
            _ => self.binary(),
        }
    }

    fn unary(&mut self) {
        let u = self.rng.pick(&UnaryOp::ALL);
        let x = match u {
            UnaryOp::Not => self.value_with_elem(|e| e.is_integer(), ElemType::I1),
            UnaryOp::Negate | UnaryOp::Square => {
                self.value_with_elem(|e| !e.is_bool(), ElemType::I32)
            }
            UnaryOp::Abs | UnaryOp::Sign => self.value_with_elem(
                |e| e.is_float() || (e.is_integer() && !e.is_bool() && !e.is_unsigned()),
                ElemType::F32,
            ),
            UnaryOp::Popcnt | UnaryOp::CountLeadingZeros => {
                self.value_with_elem(|e| e.is_integer() && !e.is_bool(), ElemType::I32)
            }
            _ => self.float_value(),
        };
        self.push1(OpKind::Unary(u), &[x], None);
    }

    fn binary(&mut self) {
        let op = self.rng.pick(&BinaryOp::ALL);
        let a = match op {
            BinaryOp::And | BinaryOp::Or | BinaryOp::Xor => {
                self.value_with_elem(|e| e.is_integer(), ElemType::I1)
            }
            BinaryOp::Subtract | BinaryOp::Divide | BinaryOp::Remainder | BinaryOp::Power => {
                self.value_with_elem(|e| !e.is_bool(), ElemType::F32)
            }
            BinaryOp::ShiftLeft
            | BinaryOp::ShiftRightLogical
            | BinaryOp::ShiftRightArithmetic
            | BinaryOp::Mulhi => {
                self.value_with_elem(|e| e.is_integer() && !e.is_bool(), ElemType::I32)
            }
            BinaryOp::Atan2 | BinaryOp::Polygamma | BinaryOp::Zeta | BinaryOp::NextAfter => {
                self.float_value()
            }
            _ => self.any_value(),
        };
        let ty = self.ty(a);
        let b = self.value_of_type(&ty);
        self.push1(OpKind::Binary(op), &[a, b], None);
    }

    fn compare(&mut self) {
        let a = self.any_value();
        let ty = self.ty(a);
        let b = self.value_of_type(&ty);
        let e = ty.elem;
        let compare_type = if self.rng.chance(0.5) {
            None
        } else if e.is_float() {
            Some(
                self.rng
                    .pick(&[CompareType::Float, CompareType::TotalOrder]),
            )
        } else if e.is_unsigned() || e.is_bool() {
            Some(CompareType::Unsigned)
        } else {
            Some(CompareType::Signed)
        };
        let direction = self.rng.pick(&CompareDirection::ALL);
        self.push1(
            OpKind::Compare {
                direction,
                compare_type,
            },
            &[a, b],
            None,
        );
    }

    fn select(&mut self) {
        let t = self.any_value();
        let ty = self.ty(t);
        let f = self.value_of_type(&ty);
        let pred_ty = if self.rng.chance(0.3) {
            TensorType::scalar(ElemType::I1)
        } else {
            ty.with_elem(ElemType::I1)
        };
        let p = self.value_of_type(&pred_ty);
        self.push1(OpKind::Select, &[p, t, f], None);
    }

    fn clamp(&mut self) {
        let x = self.any_value();
        let ty = self.ty(x);
        let bound = |g: &mut Self| {
            let bty = if g.rng.chance(0.5) {
                TensorType::scalar(ty.elem)
            } else {
                ty.clone()
            };
            g.value_of_type(&bty)
        };
        let lo = bound(self);
        let hi = bound(self);
        self.push1(OpKind::Clamp, &[lo, x, hi], None);
    }

    fn convert(&mut self) {
        let x = self.any_value();
        let to = self.rng.pick(&ElemType::ALL);
        let ty = self.ty(x).with_elem(to);
        self.push1(OpKind::Convert, &[x], Some(ty));
    }

    fn reshape(&mut self) {
        let x = self.any_value();
        let ty = self.ty(x);
        let n = ty.num_elements();
        let rank = self.rng.below(5);
        let shape = if n == 0 {
            let mut s = vec![1; rank.max(1)];
            let z = self.rng.below(s.len());
            s[z] = 0;
            s
        } else {
            let mut s = vec![1i64; rank];
            for f in factors(n) {
                if rank == 0 {
                    break;
                }
                let d = self.rng.below(rank);
                s[d] *= f;
            }
            if rank == 0 && n != 1 {
                vec![n]
            } else {
                s
            }
        };
        self.push1(OpKind::Reshape, &[x], Some(TensorType::new(shape, ty.elem)));
    }

    fn transpose(&mut self) {
        let x = self.any_value();
        let mut permutation: Vec<i64> = (0..self.ty(x).rank() as i64).collect();
        self.rng.shuffle(&mut permutation);
        self.push1(OpKind::Transpose { permutation }, &[x], None);
    }

    fn broadcast_in_dim(&mut self) {
        let x = self.any_value();
        let ty = self.ty(x);
        let out_rank = ty.rank() + self.rng.below(3);
        let mut positions: Vec<i64> = (0..out_rank as i64).collect();
        self.rng.shuffle(&mut positions);
        let mut dims: Vec<i64> = positions[..ty.rank()].to_vec();
        if self.rng.chance(0.8) {
            dims.sort_unstable();
        }
        let mut shape: Vec<i64> = (0..out_rank).map(|_| self.rng.range(1, 3)).collect();
        for (i, &d) in dims.iter().enumerate() {
            if ty.shape[i] != 1 || self.rng.chance(0.5) {
                shape[d as usize] = ty.shape[i];
            }
        }
        self.push1(
            OpKind::BroadcastInDim { dims },
            &[x],
            Some(TensorType::new(shape, ty.elem)),
        );
    }

    fn reverse(&mut self) {
        let x = self.any_value();
        let mut dims: Vec<i64> = (0..self.ty(x).rank() as i64)
            .filter(|_| self.rng.chance(0.5))
            .collect();
        self.rng.shuffle(&mut dims);
        self.push1(OpKind::Reverse { dims }, &[x], None);
    }

    fn slice(&mut self) {
        let x = self.any_value();
        let ty = self.ty(x);
        let (mut start, mut limit, mut strides) = (vec![], vec![], vec![]);
        for &n in &ty.shape {
            let s = if n > 0 && self.rng.chance(0.9) {
                self.rng.range(0, n - 1)
            } else {
                self.rng.range(0, n)
            };
            let l = if s < n && self.rng.chance(0.9) {
                self.rng.range(s + 1, n)
            } else {
                self.rng.range(s, n)
            };
            start.push(s);
            limit.push(l);
            strides.push(self.rng.range(1, 3));
        }
        self.push1(
            OpKind::Slice {
                start,
                limit,
                strides,
            },
            &[x],
            None,
        );
    }

    fn pad(&mut self) {
        let x = self.any_value();
        let ty = self.ty(x);
        let (mut low, mut high, mut interior) = (vec![], vec![], vec![]);
        for &n in &ty.shape {
            let i = self.rng.range(0, 2);
            let mut lo = self.rng.range(-1, 2);
            let mut hi = self.rng.range(-1, 2);
            let core = if n == 0 { 0 } else { n + (n - 1) * i };
            // Keep the padded size non-negative (and usually positive).
            while lo + hi + core < 1 {
                if lo < 0 {
                    lo += 1;
                } else {
                    hi += 1;
                }
            }
            low.push(lo);
            high.push(hi);
            interior.push(i);
        }
        let pv = self.value_of_type(&TensorType::scalar(ty.elem));
        self.push1(
            OpKind::Pad {
                low,
                high,
                interior,
            },
            &[x, pv],
            None,
        );
    }

    fn concatenate(&mut self) {
        let x = self.any_value();
        let ty = self.ty(x);
        if ty.rank() == 0 {
            // Concatenation needs a dimension: lift the scalar to rank 1 first.
            let y = self.push1(
                OpKind::Reshape,
                &[x],
                Some(TensorType::new(vec![1], ty.elem)),
            );
            return self.concatenate_from(y);
        }
        self.concatenate_from(x)
    }

    fn concatenate_from(&mut self, x: ValueId) {
        let ty = self.ty(x);
        let dim = self.rng.below(ty.rank());
        let mut operands = vec![x];
        for _ in 0..self.rng.below(3) {
            if self.rng.chance(0.3) {
                operands.push(x);
            } else {
                let mut shape = ty.shape.clone();
                shape[dim] = self.rng.range(1, 3);
                let v = self.value_of_type(&TensorType::new(shape, ty.elem));
                operands.push(v);
            }
        }
        self.rng.shuffle(&mut operands);
        self.push1(OpKind::Concatenate { dim: dim as i64 }, &operands, None);
    }

    fn iota(&mut self) {
        let rank = self.rng.range(1, 3) as usize;
        let shape: Vec<i64> = (0..rank).map(|_| self.rng.range(1, 4)).collect();
        let elem = self
            .rng
            .pick(&[ElemType::I32, ElemType::I64, ElemType::F32, ElemType::UI32]);
        let dim = self.rng.below(rank) as i64;
        self.push1(
            OpKind::Iota { dim },
            &[],
            Some(TensorType::new(shape, elem)),
        );
    }

    /// Operand element type for the heavy ops, and whether a bf16 product is
    /// stated to accumulate into f32.
    fn matmul_elem(&mut self) -> (ElemType, bool) {
        match self.rng.below(10) {
            0 => (ElemType::BF16, true),
            1 => (ElemType::BF16, false),
            2 => (ElemType::F64, false),
            3 => (ElemType::I32, false),
            _ => (ElemType::F32, false),
        }
    }

    fn precision_config(&mut self) -> Option<String> {
        self.rng
            .chance(0.3)
            .then(|| "[#stablehlo<precision DEFAULT>, #stablehlo<precision DEFAULT>]".to_string())
    }

    /// Random roles `(role, size)` laid out in a random dimension order; returns
    /// the shape and, per role, the dimension indices that carry it.
    fn layout(&mut self, roles: &[(usize, i64)], n_roles: usize) -> (Vec<i64>, Vec<Vec<i64>>) {
        let mut order: Vec<usize> = (0..roles.len()).collect();
        self.rng.shuffle(&mut order);
        let mut shape = vec![0; roles.len()];
        let mut by_role = vec![Vec::new(); n_roles];
        for (pos, &k) in order.iter().enumerate() {
            shape[pos] = roles[k].1;
            by_role[roles[k].0].push((k, pos as i64));
        }
        // Within a role keep the pairing order of `roles` (batch i pairs with batch i).
        let by_role = by_role
            .into_iter()
            .map(|mut v| {
                v.sort_unstable();
                v.into_iter().map(|(_, p)| p).collect()
            })
            .collect();
        (shape, by_role)
    }

    fn dot_general(&mut self) {
        const BATCH: usize = 0;
        const CONTRACT: usize = 1;
        const FREE: usize = 2;
        let nb = self.rng.below(3);
        let nc = self.rng.below(3);
        let batch: Vec<i64> = (0..nb).map(|_| self.rng.range(1, 3)).collect();
        let contract: Vec<i64> = (0..nc).map(|_| self.rng.range(1, 4)).collect();
        let side = |g: &mut Self| {
            let mut roles: Vec<(usize, i64)> = batch.iter().map(|&s| (BATCH, s)).collect();
            roles.extend(contract.iter().map(|&s| (CONTRACT, s)));
            roles.extend((0..g.rng.below(3)).map(|_| (FREE, g.rng.range(1, 4))));
            g.layout(&roles, 3)
        };
        let (lshape, lroles) = side(self);
        let (rshape, rroles) = side(self);
        let (elem, widen) = self.matmul_elem();
        let lhs = self.value_of_type(&TensorType::new(lshape, elem));
        let rhs = self.value_of_type(&TensorType::new(rshape, elem));
        let kind = OpKind::DotGeneral {
            dims: DotDims {
                lhs_batch: lroles[BATCH].clone(),
                rhs_batch: rroles[BATCH].clone(),
                lhs_contracting: lroles[CONTRACT].clone(),
                rhs_contracting: rroles[CONTRACT].clone(),
            },
            precision_config: self.precision_config(),
        };
        let mut out = self.infer1(&kind, &[lhs, rhs]);
        if widen {
            out.elem = ElemType::F32;
        }
        self.push1(kind, &[lhs, rhs], Some(out));
    }

    /// Random dimension numbers for one conv operand: `(a, b, spatial)`.
    fn conv_layout(&mut self, rank: usize) -> (i64, i64, Vec<i64>) {
        let mut perm: Vec<i64> = (0..rank as i64).collect();
        match self.rng.below(3) {
            0 => {}
            // Channels last (NHWC / HWIO-like).
            1 => {
                perm = [0, rank as i64 - 1]
                    .into_iter()
                    .chain(1..rank as i64 - 1)
                    .collect()
            }
            _ => self.rng.shuffle(&mut perm),
        }
        (perm[0], perm[1], perm[2..].to_vec())
    }

    fn convolution(&mut self) {
        let s = if self.rng.chance(0.1) {
            3
        } else {
            self.rng.range(1, 2) as usize
        };
        let n = s + 2;
        let (fgc, bgc) = match self.rng.below(5) {
            0 => (2, 1),
            1 => (1, 2),
            _ => (1, 1),
        };
        let k_in = self.rng.range(1, 2);
        let in_feat = k_in * fgc;
        let batch = bgc * self.rng.range(1, 2);
        let k_out = self.rng.range(1, 2) * fgc * bgc;
        let mut attrs = ConvAttrs {
            window_strides: vec![],
            padding: vec![],
            lhs_dilation: vec![],
            rhs_dilation: vec![],
            window_reversal: vec![],
            dims: ConvDims::nchw(s),
            feature_group_count: fgc,
            batch_group_count: bgc,
            precision_config: self.precision_config(),
        };
        let (mut in_sizes, mut k_sizes) = (vec![], vec![]);
        for _ in 0..s {
            let mut pick = (1, 1, 1, 1, 1, (0, 0));
            for _ in 0..20 {
                let x = self.rng.range(1, 5);
                let k = self.rng.range(1, 3);
                let ld = if self.rng.chance(0.7) { 1 } else { 2 };
                let rd = if self.rng.chance(0.7) { 1 } else { 2 };
                let st = self.rng.range(1, 3);
                let pad = (self.rng.range(-1, 2), self.rng.range(-1, 2));
                let padded = pad.0 + pad.1 + (x - 1) * ld + 1;
                if padded > (k - 1) * rd {
                    pick = (x, k, ld, rd, st, pad);
                    break;
                }
            }
            let (x, k, ld, rd, st, pad) = pick;
            in_sizes.push(x);
            k_sizes.push(k);
            attrs.lhs_dilation.push(ld);
            attrs.rhs_dilation.push(rd);
            attrs.window_strides.push(st);
            attrs.padding.push(pad);
            attrs.window_reversal.push(self.rng.chance(0.2));
        }
        if self.rng.chance(0.5) {
            let (ib, if_, isp) = self.conv_layout(n);
            let (ki, ko, ksp) = self.conv_layout(n);
            let (ob, of, osp) = self.conv_layout(n);
            attrs.dims = ConvDims {
                input_batch: ib,
                input_feature: if_,
                input_spatial: isp,
                kernel_input_feature: ki,
                kernel_output_feature: ko,
                kernel_spatial: ksp,
                output_batch: ob,
                output_feature: of,
                output_spatial: osp,
            };
        }
        let dn = &attrs.dims;
        let mut lshape = vec![0; n];
        lshape[dn.input_batch as usize] = batch;
        lshape[dn.input_feature as usize] = in_feat;
        let mut rshape = vec![0; n];
        rshape[dn.kernel_input_feature as usize] = k_in;
        rshape[dn.kernel_output_feature as usize] = k_out;
        for i in 0..s {
            lshape[dn.input_spatial[i] as usize] = in_sizes[i];
            rshape[dn.kernel_spatial[i] as usize] = k_sizes[i];
        }
        let (elem, widen) = self.matmul_elem();
        let elem = if elem == ElemType::I32 {
            ElemType::F32
        } else {
            elem
        };
        let lhs = self.value_of_type(&TensorType::new(lshape, elem));
        let rhs = self.value_of_type(&TensorType::new(rshape, elem));
        let kind = OpKind::Convolution(attrs);
        let mut out = self.infer1(&kind, &[lhs, rhs]);
        if widen {
            out.elem = ElemType::F32;
        }
        self.push1(kind, &[lhs, rhs], Some(out));
    }

    /// A reducer region over `elems`: a plain binary op (one input) or a
    /// random multi-op scalar body.
    fn reducer(&mut self, elems: &[ElemType]) -> Block {
        if elems.len() == 1 && self.rng.chance(0.6) {
            let e = elems[0];
            let op = if e.is_bool() {
                self.rng.pick(&[BinaryOp::And, BinaryOp::Or])
            } else {
                self.rng.pick(&[
                    BinaryOp::Add,
                    BinaryOp::Maximum,
                    BinaryOp::Minimum,
                    BinaryOp::Multiply,
                ])
            };
            return self.b.binary_region(op, e).expect("binary reducer");
        }
        let arg_types: Vec<TensorType> = elems
            .iter()
            .chain(elems)
            .map(|&e| TensorType::scalar(e))
            .collect();
        let rng = &mut self.rng;
        self.b
            .region(&arg_types, |b, args| {
                let mut pool = args.to_vec();
                for _ in 0..1 + rng.below(4) {
                    scalar_op(b, rng, &mut pool);
                }
                Ok(elems
                    .iter()
                    .map(|&e| {
                        let fits: Vec<ValueId> = pool
                            .iter()
                            .copied()
                            .filter(|v| b.ty(*v).elem == e)
                            .collect();
                        rng.pick(&fits)
                    })
                    .collect())
            })
            .expect("reducer region")
    }

    /// Inputs of one shape (1 or 2, of possibly different element types) and
    /// matching scalar inits.
    fn inputs_and_inits(&mut self, min_rank: usize) -> (Vec<ValueId>, Vec<ElemType>) {
        let mut x = self.any_value();
        while self.ty(x).rank() < min_rank {
            let ty = self.ty(x);
            let shape: Vec<i64> = std::iter::once(1).chain(ty.shape.iter().copied()).collect();
            x = self.push1(OpKind::Reshape, &[x], Some(TensorType::new(shape, ty.elem)));
        }
        let ty = self.ty(x);
        let mut inputs = vec![x];
        if self.rng.chance(0.3) {
            let e = rand_elem(&mut self.rng);
            let y = self.value_of_type(&ty.with_elem(e));
            inputs.push(y);
        }
        let elems: Vec<ElemType> = inputs.iter().map(|v| self.ty(*v).elem).collect();
        for &e in &elems {
            let init = self.constant(TensorType::scalar(e));
            inputs.push(init);
        }
        (inputs, elems)
    }

    fn reduce(&mut self) {
        let (operands, elems) = self.inputs_and_inits(0);
        let rank = self.ty(operands[0]).rank() as i64;
        let mut dims: Vec<i64> = (0..rank).filter(|_| self.rng.chance(0.5)).collect();
        if self.rng.chance(0.2) {
            self.rng.shuffle(&mut dims);
        }
        let body = self.reducer(&elems);
        self.push(OpKind::Reduce { dims }, &operands, vec![body], None);
    }

    fn reduce_window(&mut self) {
        let (operands, elems) = self.inputs_and_inits(1);
        let shape = self.ty(operands[0]).shape;
        let mut a = WindowAttrs {
            window_dimensions: vec![],
            window_strides: vec![],
            base_dilations: vec![],
            window_dilations: vec![],
            padding: vec![],
        };
        for &n in &shape {
            let bd = if self.rng.chance(0.8) { 1 } else { 2 };
            let wd = if self.rng.chance(0.8) { 1 } else { 2 };
            let pad = (self.rng.range(0, 1), self.rng.range(0, 1));
            let padded = pad.0 + pad.1 + if n == 0 { 0 } else { (n - 1) * bd + 1 };
            // Largest window that still fits once dilated, so windows are non-empty.
            let max_w = ((padded - 1) / wd + 1).clamp(1, 3);
            a.window_dimensions.push(self.rng.range(1, max_w));
            a.window_strides.push(self.rng.range(1, 2));
            a.base_dilations.push(bd);
            a.window_dilations.push(wd);
            a.padding.push(pad);
        }
        let body = self.reducer(&elems);
        self.push(OpKind::ReduceWindow(a), &operands, vec![body], None);
    }

    fn select_and_scatter(&mut self) {
        let mut x = self.float_value();
        if self.ty(x).rank() == 0 {
            let e = self.ty(x).elem;
            x = self.push1(OpKind::Reshape, &[x], Some(TensorType::new(vec![1], e)));
        }
        let ty = self.ty(x);
        let mut a = ScatterWindowAttrs {
            window_dimensions: vec![],
            window_strides: vec![],
            padding: vec![],
        };
        for &n in &ty.shape {
            let pad = (self.rng.range(0, 1), self.rng.range(0, 1));
            let padded = n + pad.0 + pad.1;
            a.window_dimensions
                .push(self.rng.range(1, padded.clamp(1, 3)));
            a.window_strides.push(self.rng.range(1, 2));
            a.padding.push(pad);
        }
        // The source has the window-reduction shape (spec `num_windows`).
        let e = ty.elem;
        let windows: Vec<i64> = (0..ty.rank())
            .map(|d| {
                let padded = ty.shape[d] + a.padding[d].0 + a.padding[d].1;
                let w = a.window_dimensions[d];
                if padded == 0 || w > padded {
                    0
                } else {
                    (padded - w) / a.window_strides[d] + 1
                }
            })
            .collect();
        let win = TensorType::new(windows, e);
        let init_ty = TensorType::scalar(e);
        let source = self.value_of_type(&win);
        let init = self.constant(init_ty);
        let s = TensorType::scalar(e);
        let direction = self.rng.pick(&[
            CompareDirection::Ge,
            CompareDirection::Gt,
            CompareDirection::Le,
        ]);
        let compare_type = self.rng.chance(0.5).then_some(CompareType::Float);
        let select = self
            .b
            .region(&[s.clone(), s], |b, args| {
                Ok(vec![b.push1(
                    OpKind::Compare {
                        direction,
                        compare_type,
                    },
                    &[args[0], args[1]],
                    None,
                )?])
            })
            .expect("select region");
        let scatter = self
            .b
            .binary_region(BinaryOp::Add, e)
            .expect("scatter region");
        self.push(
            OpKind::SelectAndScatter(a),
            &[x, source, init],
            vec![select, scatter],
            None,
        );
    }

    fn all_reduce(&mut self) {
        let x = self.value_with_elem(|e| !e.is_bool(), ElemType::F32);
        let e = self.ty(x).elem;
        let mut operands = vec![x];
        if self.rng.chance(0.3) {
            let shape = rand_shape(&mut self.rng, 2);
            let y = self.value_of_type(&TensorType::new(shape, e));
            operands.push(y);
        }
        let replica_groups = self.rng.pick(&[
            vec![vec![0]],
            vec![vec![0, 1]],
            vec![vec![0], vec![1]],
            vec![vec![0, 1, 2, 3]],
        ]);
        let channel_id = self.rng.chance(0.5).then_some((1, 1));
        let use_global_device_ids = channel_id.is_some() && self.rng.chance(0.5);
        let op = self.rng.pick(&[BinaryOp::Add, BinaryOp::Maximum]);
        let body = self.b.binary_region(op, e).expect("all_reduce region");
        self.push(
            OpKind::AllReduce {
                replica_groups,
                channel_id,
                use_global_device_ids,
            },
            &operands,
            vec![body],
            None,
        );
    }

    fn call(&mut self) {
        if self.callees.is_empty() {
            return self.binary();
        }
        let c = &self.callees[self.rng.below(self.callees.len())];
        let (params, results, callee) = (c.param_types(), c.result_types(), c.name.clone());
        let operands: Vec<ValueId> = params.iter().map(|t| self.value_of_type(t)).collect();
        self.push(
            OpKind::Call { callee },
            &operands,
            Vec::new(),
            Some(&results),
        );
    }
}

/// One random scalar op inside a region, over the scalars in `pool`.
pub(super) fn scalar_op(b: &mut FuncBuilder, rng: &mut Rng, pool: &mut Vec<ValueId>) {
    let a = rng.pick(pool);
    let ty = b.ty(a).clone();
    let e = ty.elem;
    let same: Vec<ValueId> = pool.iter().copied().filter(|v| *b.ty(*v) == ty).collect();
    let other = rng.pick(&same);
    let new = match rng.below(5) {
        0 if e.is_float() => {
            let u = rng.pick(&[
                UnaryOp::Exponential,
                UnaryOp::Tanh,
                UnaryOp::Negate,
                UnaryOp::Abs,
            ]);
            b.push1(OpKind::Unary(u), &[a], None)
        }
        1 => {
            let c = b
                .push1(
                    OpKind::Compare {
                        direction: rng.pick(&CompareDirection::ALL),
                        compare_type: None,
                    },
                    &[a, other],
                    None,
                )
                .expect("scalar compare");
            pool.push(c);
            b.push1(OpKind::Select, &[c, a, other], None)
        }
        2 => {
            let data = scalar_data(rng, e, 1);
            b.push1(OpKind::Constant(data), &[], Some(ty))
        }
        _ => {
            let op = if e.is_bool() {
                rng.pick(&[
                    BinaryOp::And,
                    BinaryOp::Or,
                    BinaryOp::Xor,
                    BinaryOp::Maximum,
                ])
            } else {
                rng.pick(&[
                    BinaryOp::Add,
                    BinaryOp::Multiply,
                    BinaryOp::Maximum,
                    BinaryOp::Minimum,
                    BinaryOp::Subtract,
                ])
            };
            b.push1(OpKind::Binary(op), &[a, other], None)
        }
    };
    pool.push(new.unwrap_or_else(|e| panic!("testgen built an ill-typed scalar op: {e}")));
}
