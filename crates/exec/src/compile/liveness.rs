//! The last stage of lowering: the step passes, then liveness (which slots
//! die after which step, which fused loop may write over a dying input) and
//! the [`Compiled`] schedule.

use super::Builder;
use crate::passes::{
    fold_conv_bias, fold_conv_upsample, fold_dot_bias, merge_sibling_reductions,
    sum_reductions_in_producers, sums_from_conv_moments,
};
use crate::rewrites::Planted;
use crate::runtime::{Compiled, Pool};
use crate::schedule::Kind;

impl Builder<'_> {
    /// Liveness: which slots die after which step, and in-place outputs.
    pub(super) fn finish(mut self) -> Compiled {
        let outputs: Vec<usize> = self.outputs.iter().map(|o| o.0).collect();
        // The bias folds first: a bias add folded into its kernel costs no
        // pass, one that became a storing reduction would cost one.
        let on = self.rewrites;
        let steps = std::mem::take(&mut self.steps);
        let steps = run_if(on.conv_bias, steps, |s| fold_conv_bias(s, &outputs, &on));
        let steps = run_if(on.conv_upsample, steps, |s| {
            fold_conv_upsample(s, &outputs, &on)
        });
        let steps = run_if(on.dot_bias, steps, |s| fold_dot_bias(s, &outputs, &on));
        let mut n = self.root.len();
        let steps = run_if(on.conv_moments, steps, |s| {
            sums_from_conv_moments(s, &mut n, &on)
        });
        let steps = run_if(on.sum_in_producer, steps, |s| {
            sum_reductions_in_producers(s, &on)
        });
        self.steps = run_if(on.sibling_reductions, steps, |s| {
            merge_sibling_reductions(s, &on)
        });
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
                if !on.in_place {
                    return None;
                }
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
                    *store_in_place = dying(prog, inputs);
                    prog.stores_first = on.plants(Planted::StoresBeforeSums);
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

/// `pass(steps)` when `on`, else `steps` as they are.
fn run_if<T>(on: bool, steps: T, pass: impl FnOnce(T) -> T) -> T {
    match on {
        true => pass(steps),
        false => steps,
    }
}
