//! Ops that move no data: a reshape shares its operand's slot, a
//! single-replica all_reduce is the identity, and broadcast_in_dim,
//! transpose, reverse and slice are strided views read by their consumers.

use super::{fusable, shape_of, Builder, Def, Expr};
use crate::fused::ViewSpec;
use ir::{Op, OpKind, TensorType};
use std::rc::Rc;

/// One fusable operand of the result's element type: what every strided
/// view (broadcast, transpose, reverse, slice) needs of its operand.
fn one_viewable(tys: &[TensorType], rty: &TensorType) -> bool {
    tys.len() == 1 && fusable(&tys[0]) && tys[0].elem == rty.elem
}

impl Builder<'_> {
    /// `reshape`: the result is the operand's slot (a splat stays a splat).
    pub(super) fn reshape(
        &mut self,
        op: &Op,
        tys: &[TensorType],
        rty: TensorType,
        rshape: Vec<usize>,
    ) -> Option<bool> {
        if tys.len() != 1
            || shape_of(&tys[0]).iter().product::<usize>() != rshape.iter().product::<usize>()
            || tys[0].elem != rty.elem
        {
            return Some(false);
        }
        let (v, r) = (op.operands[0], op.results[0].0);
        if let Some(x) = self.splat_of(v) {
            self.defs[r.index()] = Def::Pending(Rc::new(Expr::Splat(x)));
            return Some(true);
        }
        self.materialize(v)?;
        self.root[r.index()] = self.root[v.index()];
        self.defs[r.index()] = Def::Mat;
        Some(true)
    }

    /// `broadcast_in_dim`: a view with stride 0 along the new and the size-1 dimensions.
    pub(super) fn broadcast_in_dim(
        &mut self,
        op: &Op,
        bd: &[i64],
        tys: &[TensorType],
        rty: TensorType,
        rshape: Vec<usize>,
    ) -> Option<bool> {
        if !one_viewable(tys, &rty) {
            return Some(false);
        }
        let s = shape_of(&tys[0]);
        if bd.len() != s.len()
            || bd.iter().enumerate().any(|(j, &d)| {
                d < 0 || d as usize >= rshape.len() || (s[j] != 1 && s[j] != rshape[d as usize])
            })
        {
            return Some(false);
        }
        Some(self.view_op(op, |spec| {
            let mut strides = vec![0isize; rshape.len()];
            for (j, &d) in bd.iter().enumerate() {
                if s[j] != 1 {
                    strides[d as usize] = spec.strides[j];
                }
            }
            ViewSpec {
                shape: rshape.clone(),
                strides,
                base: spec.base,
            }
        }))
    }

    /// `transpose`: a view with permuted strides.
    pub(super) fn transpose(
        &mut self,
        op: &Op,
        permutation: &[i64],
        tys: &[TensorType],
        rty: TensorType,
        rshape: Vec<usize>,
    ) -> Option<bool> {
        let rank = tys.first().map_or(0, |t| t.shape.len());
        let mut seen = vec![false; rank];
        let ok = one_viewable(tys, &rty)
            && permutation.len() == rank
            && permutation.iter().all(|&p| {
                p >= 0 && (p as usize) < rank && !std::mem::replace(&mut seen[p as usize], true)
            });
        if !ok {
            return Some(false);
        }
        Some(self.view_op(op, |spec| {
            ViewSpec {
                shape: rshape.clone(),
                strides: permutation
                    .iter()
                    .map(|&p| spec.strides[p as usize])
                    .collect(),
                base: spec.base,
            }
        }))
    }

    /// `reverse`: a view with negated strides.
    pub(super) fn reverse(
        &mut self,
        op: &Op,
        rd: &[i64],
        tys: &[TensorType],
        rty: TensorType,
    ) -> Option<bool> {
        let rank = tys.first().map_or(0, |t| t.shape.len());
        if !one_viewable(tys, &rty) || rd.iter().any(|&d| d < 0 || d as usize >= rank) {
            return Some(false);
        }
        Some(self.view_op(op, |spec| {
            let mut s = spec.clone();
            for &d in rd {
                let d = d as usize;
                if s.shape[d] > 0 {
                    s.base += (s.shape[d] as isize - 1) * s.strides[d];
                }
                s.strides[d] = -s.strides[d];
            }
            s
        }))
    }

    /// `slice`: a view starting at `start` with the strides scaled by the
    /// slice's steps.
    pub(super) fn slice(
        &mut self,
        op: &Op,
        start: &[i64],
        steps: &[i64],
        tys: &[TensorType],
        rty: TensorType,
        rshape: Vec<usize>,
    ) -> Option<bool> {
        let rank = tys.first().map_or(0, |t| t.shape.len());
        if !one_viewable(tys, &rty)
            || start.len() != rank
            || steps.len() != rank
            || rshape.len() != rank
            || start.iter().any(|&x| x < 0)
            || steps.iter().any(|&x| x <= 0)
        {
            return Some(false);
        }
        Some(self.view_op(op, |spec| {
            let mut s = spec.clone();
            for d in 0..rank {
                // An empty result reads nothing; its base may stay put.
                if rshape[d] > 0 {
                    s.base += start[d] as isize * s.strides[d];
                }
                s.strides[d] *= steps[d] as isize;
            }
            s.shape = rshape.clone();
            s
        }))
    }

    /// Single-replica all_reduce is the identity: results share their operands' buffers.
    pub(super) fn all_reduce(&mut self, op: &Op) -> Option<bool> {
        let OpKind::AllReduce { replica_groups, .. } = &op.kind else {
            return Some(false);
        };
        // Groups with other replicas: the generic evaluator explains the error.
        if op.operands.len() != op.results.len()
            || replica_groups.iter().flatten().any(|&id| id != 0)
        {
            return Some(false);
        }
        for (&v, r) in op.operands.iter().zip(&op.results) {
            self.materialize(v)?;
            self.root[r.0.index()] = self.root[v.index()];
            self.defs[r.0.index()] = Def::Mat;
        }
        Some(true)
    }

    /// A transpose / reverse / broadcast / slice: a view of the operand's slot (a
    /// splat stays a splat).
    fn view_op(&mut self, op: &Op, f: impl FnOnce(&ViewSpec) -> ViewSpec) -> bool {
        let v = op.operands[0];
        let r = op.results[0].0.index();
        if let Some(x) = self.splat_of(v) {
            self.defs[r] = Def::Pending(Rc::new(Expr::Splat(x)));
            return true;
        }
        let Some((slot, spec)) = self.view_of(v) else {
            return false;
        };
        self.defs[r] = Def::Pending(Rc::new(Expr::View(slot, f(&spec))));
        true
    }
}
