//! Ops that run their regions on whole values: while, case, if, map, and the
//! region-driven parts of scatter and sort. The loop is unrolled by running
//! it: each iteration evaluates the cond region, then the body, through the
//! same `run_region` as every region, so every `compare` in a condition or a
//! body records its margin at its own op index (merged over iterations) and an
//! error inside a region is placed at the op that failed there.

use super::gather::{scalar_at, set_at};
use super::{Fail, Interp};
use crate::scalar::Scalar;
use crate::value::Value;
use ir::{Func, Op};

type Env<S> = Vec<Option<Value<S>>>;

/// An i1 (or integer) rank-0 value as a boolean / an index.
fn scalar_int<S: Scalar>(v: &Value<S>, what: &str) -> Result<i64, Fail> {
    match v {
        Value::Int(t, _) if t.len() == 1 => Ok(t.data[0]),
        _ => Err(Fail::msg(format!("{what} must be an integer scalar"))),
    }
}

impl<'m> Interp<'m> {
    fn operands<S: Scalar>(&self, env: &Env<S>, op: &Op) -> Result<Vec<Value<S>>, Fail> {
        op.operands
            .iter()
            .map(|v| super::get(env, *v).cloned())
            .collect()
    }

    /// `while`: `cond` then `body` on the loop values until `cond` is false.
    pub(super) fn eval_while<S: Scalar>(
        &mut self,
        f: &'m Func,
        env: &mut Env<S>,
        op: &'m Op,
        op_index: usize,
    ) -> Result<Vec<Value<S>>, Fail> {
        let mut state = self.operands(env, op)?;
        loop {
            let c = self.run_region(f, env, op, op_index, 0, state.clone())?;
            let go = match c.as_slice() {
                [p] => scalar_int(p, "the while condition")? != 0,
                _ => return Err(Fail::msg("the while condition must return one i1")),
            };
            if !go {
                return Ok(state);
            }
            state = self.run_region(f, env, op, op_index, 1, state)?;
        }
    }

    /// `case`: branch `index`, the last one when `index` is out of range.
    /// `if`: the true branch (region 0) or the false branch (region 1).
    pub(super) fn eval_branch<S: Scalar>(
        &mut self,
        f: &'m Func,
        env: &mut Env<S>,
        op: &'m Op,
        op_index: usize,
        is_if: bool,
    ) -> Result<Vec<Value<S>>, Fail> {
        let sel = scalar_int(super::get(env, op.operands[0])?, "the branch selector")?;
        let n = op.regions.len() as i64;
        if n == 0 {
            return Err(Fail::msg("no branches"));
        }
        let r = branch_index(is_if, sel, n);
        self.run_region(f, env, op, op_index, r, Vec::new())
    }

    /// `map`: the computation on the operands' elements at each position.
    pub(super) fn eval_map<S: Scalar>(
        &mut self,
        f: &'m Func,
        env: &mut Env<S>,
        op: &'m Op,
        op_index: usize,
    ) -> Result<Vec<Value<S>>, Fail> {
        let xs = self.operands(env, op)?;
        let ty = op
            .results
            .first()
            .map(|r| r.1.clone())
            .ok_or_else(|| Fail::msg("map declares no result"))?;
        let n = xs.first().map_or(0, |x| x.len());
        let mut out = super::shape::constant(&zero_of(&ty), &ty)?;
        for i in 0..n {
            let args = xs.iter().map(|x| scalar_at(x, i)).collect();
            let r = self.run_region(f, env, op, op_index, 0, args)?;
            match r.as_slice() {
                [v] => set_at(&mut out, i, v)?,
                _ => return Err(Fail::msg("map computation must return one scalar")),
            }
        }
        Ok(vec![out])
    }

    /// `scatter`, its update computation run as a region (or directly when it
    /// is a plain float `add`, the common gradient case).
    pub(super) fn eval_scatter<S: Scalar>(
        &mut self,
        f: &'m Func,
        env: &mut Env<S>,
        op: &'m Op,
        op_index: usize,
        a: &ir::ScatterAttrs,
    ) -> Result<Vec<Value<S>>, Fail> {
        let all = self.operands(env, op)?;
        if all.len() < 3 || all.len().is_multiple_of(2) {
            return Err(Fail::msg(
                "scatter needs inputs, indices and as many updates",
            ));
        }
        let n = (all.len() - 1) / 2;
        let inputs: Vec<&Value<S>> = all[..n].iter().collect();
        let updates: Vec<&Value<S>> = all[n + 1..].iter().collect();
        let region = super::single_region(op, 0)?;
        let direct_add = n == 1
            && all[0].as_float().is_some()
            && region.as_binary_reducer() == Some(ir::BinaryOp::Add);
        if direct_add {
            let elem = all[0].elem();
            let mut add = |args: Vec<Value<S>>| -> Result<Vec<Value<S>>, Fail> {
                match (&args[0], &args[1]) {
                    (Value::Float(a, e), Value::Float(b, _)) => Ok(vec![Value::Float(
                        crate::tensor::Tensor::new(
                            vec![],
                            vec![a.data[0].add(&b.data[0]).round_to(elem)],
                        ),
                        *e,
                    )]),
                    _ => Err(Fail::msg("scatter add on non-float values")),
                }
            };
            return super::gather::scatter(&inputs, &all[n], &updates, a, &mut add);
        }
        let mut body = |args: Vec<Value<S>>| self.run_region(f, env, op, op_index, 0, args);
        super::gather::scatter(&inputs, &all[n], &updates, a, &mut body)
    }

    /// `sort` with its comparator region.
    pub(super) fn eval_sort<S: Scalar>(
        &mut self,
        f: &'m Func,
        env: &mut Env<S>,
        op: &'m Op,
        op_index: usize,
        dimension: i64,
    ) -> Result<Vec<Value<S>>, Fail> {
        let xs = self.operands(env, op)?;
        let refs: Vec<&Value<S>> = xs.iter().collect();
        let mut cmp = |args: Vec<Value<S>>| self.run_region(f, env, op, op_index, 0, args);
        super::sort::sort(&refs, dimension, &mut cmp)
    }
}

/// A zero payload for an output buffer of `ty` (overwritten element by element).
fn zero_of(ty: &ir::TensorType) -> ir::DenseData {
    if ty.elem.is_float() {
        ir::DenseData::Float(vec![0.0])
    } else {
        ir::DenseData::Int(vec![0])
    }
}

/// The branch an `if` or `case` with `n` branches takes on selector `sel`:
/// for `if`, the true branch (0) when `sel` is nonzero and the false branch
/// (1) otherwise; for `case`, branch `sel`, or the last one when `sel` is out
/// of range.
pub fn branch_index(is_if: bool, sel: i64, n: i64) -> usize {
    let k = if is_if {
        if sel != 0 {
            0
        } else {
            1
        }
    } else if (0..n).contains(&sel) {
        sel
    } else {
        n - 1
    };
    k as usize
}
