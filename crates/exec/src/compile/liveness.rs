//! The last stage of lowering: the step passes, then liveness (which slots
//! die after which step, which fused loop may write over a dying input) and
//! the [`Compiled`] schedule.

use super::Builder;
use crate::passes::{
    fold_conv_bias, fold_conv_upsample, fold_dot_bias, merge_sibling_reductions,
    sum_reductions_in_producers, sums_from_conv_moments,
};
use crate::runtime::{Compiled, Pool};
use crate::schedule::Kind;

impl Builder<'_> {
    /// Liveness: which slots die after which step, and in-place outputs.
    pub(super) fn finish(mut self) -> Compiled {
        let outputs: Vec<usize> = self.outputs.iter().map(|o| o.0).collect();
        // The bias folds first: a bias add folded into its kernel costs no
        // pass, one that became a storing reduction would cost one.
        self.steps = fold_conv_bias(std::mem::take(&mut self.steps), &outputs);
        self.steps = fold_conv_upsample(std::mem::take(&mut self.steps), &outputs);
        self.steps = fold_dot_bias(std::mem::take(&mut self.steps), &outputs);
        let mut n = self.root.len();
        self.steps = sums_from_conv_moments(std::mem::take(&mut self.steps), &mut n);
        self.steps = sum_reductions_in_producers(std::mem::take(&mut self.steps));
        self.steps = merge_sibling_reductions(std::mem::take(&mut self.steps));
        let mut last: Vec<Option<usize>> = vec![None; n];
        for (i, s) in self.steps.iter().enumerate() {
            for r in s.kind.reads() {
                last[r] = Some(i);
            }
        }
        let mut keep = vec![false; n];
        for (s, _) in &self.outputs {
            keep[*s] = true;
        }
        let mut free_after: Vec<Vec<usize>> = vec![Vec::new(); self.steps.len()];
        for (s, l) in last.iter().enumerate() {
            if let (Some(i), false) = (l, keep[s]) {
                free_after[*i].push(s);
            }
        }
        let mut steps = self.steps;
        for (i, s) in steps.iter_mut().enumerate() {
            for w in s.kind.writes() {
                if last[w].is_none() && !keep[w] {
                    free_after[i].push(w);
                }
            }
            let dying = |prog: &crate::fused::Program, inputs: &[usize]| {
                inputs
                    .iter()
                    .enumerate()
                    .position(|(k, &r)| last[r] == Some(i) && !keep[r] && !prog.viewed(k))
            };
            match &mut s.kind {
                Kind::Loop {
                    prog,
                    inputs,
                    in_place,
                    ..
                } => *in_place = dying(prog, inputs),
                // The stored value must be computed, not a load (it would
                // be copied onto itself).
                Kind::Reduce {
                    prog,
                    inputs,
                    stores,
                    store_in_place,
                    ..
                } if stores.first().is_some_and(|&(_, k)| {
                    !matches!(prog.nodes[k], crate::fused::Node::Load(_))
                }) =>
                {
                    *store_in_place = dying(prog, inputs)
                }
                _ => {}
            }
        }
        let params: Vec<usize> = self.f.params.iter().map(|p| p.value.index()).collect();
        let unused_inputs = params
            .iter()
            .copied()
            .filter(|&p| last[p].is_none() && !keep[p])
            .collect();
        let stats = vec![(0, 0); steps.len()];
        Compiled {
            n_slots: n,
            params,
            steps,
            free_after,
            unused_inputs,
            outputs: self.outputs,
            pool: Pool::default(),
            stats,
        }
    }
}
