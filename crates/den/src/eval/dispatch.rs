//! The op dispatch: the one `match` over [`OpKind`] that sends each op to
//! its evaluation (elementwise, shape, reduction, linear algebra, control
//! flow, …); the walk over a block in `mod.rs` calls it once per op.

use super::*;

impl<'m> Interp<'m> {
    pub(super) fn eval_op_inner<S: Scalar>(
        &mut self,
        f: &'m Func,
        env: &mut Env<S>,
        op: &'m Op,
        op_index: usize,
        dec: Option<&mut Decisions>,
        over: u8,
    ) -> Result<Vec<Value<S>>, Fail> {
        let n_args = op.operands.len();
        let arity = |n: usize| -> Result<(), Fail> {
            if n_args == n {
                Ok(())
            } else {
                Err(Fail::msg(format!("expected {n} operands, got {n_args}")))
            }
        };
        let result_ty = |i: usize| -> Result<&ir::TensorType, Fail> {
            op.results
                .get(i)
                .map(|r| &r.1)
                .ok_or_else(|| Fail::msg("op declares no result"))
        };
        let one = |v: Value<S>| Ok(vec![v]);
        let dims = |v: &[i64]| -> Vec<usize> { v.iter().map(|&d| d.max(0) as usize).collect() };
        match &op.kind {
            OpKind::Constant(d) => one(shape::constant(d, result_ty(0)?)?),
            OpKind::Iota { dim } => one(shape::iota((*dim).max(0) as usize, result_ty(0)?)?),
            OpKind::Unary(u) => {
                arity(1)?;
                let elem = result_ty(0)?.elem;
                let slot = op.operands[0].index();
                let float = matches!(env.get(slot), Some(Some(Value::Float(..))));
                if over & 1 != 0 && float && elementwise::unary_maps_floats(*u) {
                    // The operand dies here: the result is written over it.
                    if let Some(Value::Float(mut x, _)) = env[slot].take() {
                        let check = self.opts.record_margins && self.first_non_finite.is_none();
                        let finite = elementwise::unary_over(*u, &mut x, elem, check)?;
                        self.consumed.push((slot, finite));
                        return one(Value::Float(x, elem));
                    }
                }
                one(elementwise::unary(
                    *u,
                    get(env, op.operands[0])?,
                    result_ty(0)?.elem,
                )?)
            }
            OpKind::Binary(b) => {
                arity(2)?;
                let decides = matches!(b, ir::BinaryOp::Maximum | ir::BinaryOp::Minimum);
                let (elem, dec) = (result_ty(0)?.elem, dec.filter(|_| decides));
                let check = self.opts.record_margins && self.first_non_finite.is_none();
                let viewed = (0..2).find(|&p| self.views.contains_key(&op.operands[p].index()));
                if let Some(p) = viewed {
                    let id = op.operands[p].index();
                    let view = self
                        .views
                        .remove(&id)
                        .and_then(|b| b.downcast::<View<S>>().ok());
                    if let Some(view) = view {
                        let slot = op.operands[1 - p].index();
                        let fits = over & (1 << (1 - p)) != 0
                            && matches!(env.get(slot), Some(Some(Value::Float(t, _))) if t.shape == view.shape);
                        if fits {
                            if let Some(Value::Float(mut x, _)) = env[slot].take() {
                                // The result is written over the other operand,
                                // reading the view where its elements lie.
                                let read = (
                                    view.src.as_slice(),
                                    view.shape.as_slice(),
                                    view.strides.as_slice(),
                                );
                                let finite = elementwise::binary_over_strided(
                                    *b,
                                    &mut x,
                                    read,
                                    p == 1,
                                    elem,
                                    dec,
                                    check,
                                )?;
                                self.consumed.push((slot, finite));
                                self.consumed.push((id, view.finite));
                                return one(Value::Float(x, elem));
                            }
                        }
                        env[id] = Some(view.materialise());
                    }
                }
                if let Some(p) = over_operand(env, op, over) {
                    // The operand dies here: the result is written over it.
                    let slot = op.operands[p].index();
                    if let Some(Value::Float(mut x, _)) = env[slot].take() {
                        let y = get(env, op.operands[1 - p])?
                            .as_float()
                            .ok_or_else(|| Fail::msg("operands mix float and integer types"))?;
                        let finite =
                            elementwise::binary_over(*b, &mut x, y, p == 0, elem, dec, check)?;
                        self.consumed.push((slot, finite));
                        return one(Value::Float(x, elem));
                    }
                }
                let (x, y) = (get(env, op.operands[0])?, get(env, op.operands[1])?);
                one(elementwise::binary(*b, x, y, elem, dec)?)
            }
            OpKind::Compare {
                direction,
                compare_type,
            } => {
                arity(2)?;
                let (x, y) = (get(env, op.operands[0])?, get(env, op.operands[1])?);
                one(elementwise::compare(*direction, *compare_type, x, y, dec)?)
            }
            OpKind::Select => {
                arity(3)?;
                let [p, t, e] = [0, 1, 2].map(|i| get(env, op.operands[i]));
                one(elementwise::select(p?, t?, e?)?)
            }
            OpKind::Clamp => {
                arity(3)?;
                let [lo, x, hi] = [0, 1, 2].map(|i| get(env, op.operands[i]));
                one(elementwise::clamp(lo?, x?, hi?, dec)?)
            }
            OpKind::Convert => {
                arity(1)?;
                one(elementwise::convert(
                    get(env, op.operands[0])?,
                    result_ty(0)?.elem,
                )?)
            }
            OpKind::Reshape => {
                arity(1)?;
                if over & 1 != 0 {
                    // The operand dies here: its data is moved, not copied.
                    // The result holds the operand's elements: when one is
                    // not finite, the operand was not (no scan needed).
                    let slot = op.operands[0].index();
                    if let Some(x) = env[slot].take() {
                        self.consumed.push((slot, false));
                        return one(shape::reshape_owned(x, result_ty(0)?)?);
                    }
                }
                one(shape::reshape(get(env, op.operands[0])?, result_ty(0)?)?)
            }
            OpKind::Transpose { permutation } => {
                arity(1)?;
                one(shape::transpose(
                    get(env, op.operands[0])?,
                    &dims(permutation),
                )?)
            }
            OpKind::BroadcastInDim { dims: bd } => {
                arity(1)?;
                one(shape::broadcast_in_dim(
                    get(env, op.operands[0])?,
                    &dims(bd),
                    result_ty(0)?,
                )?)
            }
            OpKind::Reverse { dims: rd } => {
                arity(1)?;
                one(shape::reverse(get(env, op.operands[0])?, &dims(rd))?)
            }
            OpKind::Slice {
                start,
                limit,
                strides,
            } => {
                arity(1)?;
                one(shape::slice(
                    get(env, op.operands[0])?,
                    start,
                    limit,
                    strides,
                )?)
            }
            OpKind::Pad {
                low,
                high,
                interior,
            } => {
                arity(2)?;
                let (x, v) = (get(env, op.operands[0])?, get(env, op.operands[1])?);
                one(shape::pad(x, v, low, high, interior)?)
            }
            OpKind::Concatenate { dim } => {
                let xs = op
                    .operands
                    .iter()
                    .map(|v| get(env, *v))
                    .collect::<Result<Vec<_>, _>>()?;
                one(shape::concatenate(&xs, (*dim).max(0) as usize)?)
            }
            OpKind::DotGeneral { dims: dd, .. } => {
                arity(2)?;
                if let Some((x, y, e)) = ints2(env, op)? {
                    let elem = result_ty(0)?.elem;
                    return one(Value::Int(
                        linalg::dot_general_int(x, y, e, dd, elem)?,
                        elem,
                    ));
                }
                let (x, y) = floats2(env, op)?;
                let ty = result_ty(0)?;
                let elem = ty.elem;
                if let Some(t) = self
                    .fast_ok(false)
                    .then(|| fastpath::dot_general(x, y, dd, ty))
                    .flatten()
                {
                    return one(Value::Float(t, elem));
                }
                one(Value::Float(linalg::dot_general(x, y, dd, elem)?, elem))
            }
            OpKind::Convolution(a) => {
                arity(2)?;
                let ty = result_ty(0)?;
                let out_shape = shape::dims_usize(ty);
                if let Some((x, y, e)) = ints2(env, op)? {
                    return one(Value::Int(
                        linalg::convolution_int(x, y, e, a, &out_shape, ty.elem)?,
                        ty.elem,
                    ));
                }
                let (x, y) = floats2(env, op)?;
                if let Some(t) = self
                    .fast_ok(false)
                    .then(|| fastpath::convolution(x, y, a, ty))
                    .flatten()
                {
                    return one(Value::Float(t, ty.elem));
                }
                one(Value::Float(
                    linalg::convolution(x, y, a, &out_shape, ty.elem)?,
                    ty.elem,
                ))
            }
            OpKind::Reduce { dims: rd } => {
                let rd = dims(rd);
                self.eval_reduction(
                    f,
                    env,
                    op,
                    op_index,
                    dec,
                    |x, init, reducer, ty| fastpath::reduce(x, init, reducer, &rd, ty),
                    |inputs, inits, reducer, body, tys, dec| {
                        reduce::reduce(inputs, inits, &rd, reducer, body, tys, dec)
                    },
                )
            }
            OpKind::ReduceWindow(wa) => self.eval_reduction(
                f,
                env,
                op,
                op_index,
                dec,
                |x, init, reducer, ty| fastpath::reduce_window(x, init, reducer, wa, ty),
                |inputs, inits, reducer, body, tys, dec| {
                    reduce::reduce_window(inputs, inits, wa, reducer, body, tys, dec)
                },
            ),
            OpKind::SelectAndScatter(sa) => {
                arity(3)?;
                if op.regions.len() != 2 {
                    return Err(Fail::msg(
                        "select_and_scatter needs select and scatter regions",
                    ));
                }
                let selector = reduce::as_compare_selector(&op.regions[0]);
                let scatter = op.regions[1].as_binary_reducer();
                let [x, s, i] = [0, 1, 2].map(|k| get(env, op.operands[k]));
                let (x, s, i) = (x?, s?, i?);
                if let Some(v) = self
                    .fast_ok(true)
                    .then(|| fastpath::select_and_scatter(x, s, i, selector, scatter, sa))
                    .flatten()
                {
                    return one(v);
                }
                let scatter_direct = matches!(
                    scatter,
                    Some(
                        ir::BinaryOp::Add
                            | ir::BinaryOp::Multiply
                            | ir::BinaryOp::Maximum
                            | ir::BinaryOp::Minimum
                    )
                );
                if selector.is_some() && scatter_direct {
                    return one(reduce::select_and_scatter(
                        x,
                        s,
                        i,
                        sa,
                        selector,
                        scatter,
                        &mut no_region,
                        dec,
                    )?);
                }
                let (x, s, i) = (x.clone(), s.clone(), i.clone());
                let mut body =
                    |r: usize, args: Vec<Value<S>>| self.run_region(f, env, op, op_index, r, args);
                one(reduce::select_and_scatter(
                    &x, &s, &i, sa, selector, scatter, &mut body, dec,
                )?)
            }
            // The bit-level and library ops.
            OpKind::BitcastConvert => {
                arity(1)?;
                one(bits::bitcast_convert(
                    get(env, op.operands[0])?,
                    result_ty(0)?,
                )?)
            }
            OpKind::ReducePrecision {
                exponent_bits,
                mantissa_bits,
            } => {
                arity(1)?;
                one(bits::reduce_precision(
                    get(env, op.operands[0])?,
                    *exponent_bits,
                    *mantissa_bits,
                )?)
            }
            OpKind::GetDimensionSize { dimension } => {
                arity(1)?;
                one(bits::get_dimension_size(
                    get(env, op.operands[0])?,
                    *dimension,
                )?)
            }
            OpKind::TopK { k } => {
                arity(1)?;
                topk::top_k(get(env, op.operands[0])?, *k, dec)
            }
            OpKind::TriangularSolve {
                left_side,
                lower,
                unit_diagonal,
                transpose_a,
            } => {
                arity(2)?;
                one(triangular::triangular_solve(
                    get(env, op.operands[0])?,
                    get(env, op.operands[1])?,
                    *left_side,
                    *lower,
                    *unit_diagonal,
                    *transpose_a,
                )?)
            }
            OpKind::AllReduce { replica_groups, .. } => {
                let operands = op
                    .operands
                    .iter()
                    .map(|v| get(env, *v).cloned())
                    .collect::<Result<Vec<_>, _>>()?;
                if self.opts.replicas == 1 {
                    // A group naming replica 1+ belongs to a data-parallel step:
                    // as the identity it would silently apply gradient/R.
                    if let Some(&id) = replica_groups.iter().flatten().find(|&&id| id != 0) {
                        return Err(Fail::msg(format!(
                            "replica_groups name replica {id} but only 1 replica is running; \
                             a data-parallel step needs R replicas (den::eval_replicas, --replicas R)"
                        )));
                    }
                    return Ok(operands);
                }
                let members = replica::gather(
                    &f.name,
                    op_index,
                    replica_groups,
                    operands,
                    self.opts.replicas,
                )?;
                let reducer = single_region(op, 0)?.as_binary_reducer();
                let mut body = |args: Vec<Value<S>>| self.run_region(f, env, op, op_index, 0, args);
                replica::combine(members, reducer, &result_types(op), &mut body)
            }
            OpKind::Call { callee } => {
                let g = self
                    .module
                    .func(callee)
                    .ok_or_else(|| Fail::msg(format!("no function @{callee}")))?;
                let args = op
                    .operands
                    .iter()
                    .map(|v| get(env, *v).cloned())
                    .collect::<Result<Vec<_>, _>>()?;
                self.call(g, args).map_err(Fail::Placed)
            }
            OpKind::Return | OpKind::FuncReturn => {
                Err(Fail::msg("terminator in the middle of a block"))
            }
            // Structured ops: gather.rs, sort.rs, control.rs.
            OpKind::Gather(a) => {
                arity(2)?;
                let (x, i) = (get(env, op.operands[0])?, get(env, op.operands[1])?);
                one(gather::gather(x, i, a, result_ty(0)?)?)
            }
            OpKind::Scatter(a) => self.eval_scatter(f, env, op, op_index, a),
            OpKind::DynamicSlice { sizes } => {
                let vs = op
                    .operands
                    .iter()
                    .map(|v| get(env, *v))
                    .collect::<Result<Vec<_>, _>>()?;
                let (x, starts) = vs
                    .split_first()
                    .ok_or_else(|| Fail::msg("dynamic_slice needs an operand"))?;
                one(gather::dynamic_slice(x, starts, sizes)?)
            }
            OpKind::DynamicUpdateSlice => {
                let vs = op
                    .operands
                    .iter()
                    .map(|v| get(env, *v))
                    .collect::<Result<Vec<_>, _>>()?;
                if vs.len() < 2 {
                    return Err(Fail::msg(
                        "dynamic_update_slice needs an operand and an update",
                    ));
                }
                one(gather::dynamic_update_slice(vs[0], vs[1], &vs[2..])?)
            }
            OpKind::While => self.eval_while(f, env, op, op_index),
            OpKind::Case => self.eval_branch(f, env, op, op_index, false),
            OpKind::If => self.eval_branch(f, env, op, op_index, true),
            OpKind::Sort { dimension, .. } => self.eval_sort(f, env, op, op_index, *dimension),
            OpKind::Map { .. } => self.eval_map(f, env, op, op_index),
            OpKind::OptimizationBarrier => {
                op.operands.iter().map(|v| get(env, *v).cloned()).collect()
            }
        }
    }
}
