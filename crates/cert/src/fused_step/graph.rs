//! The dataflow of one inlined step function, as the role finder and the
//! gradient finder need it: for every top-level value, the arguments it
//! depends on; for every update output, the arguments it carries elementwise
//! (θ' = θ − …: θ is carried); and the chain of values every path from the
//! data to an output must pass through (the dominators), which is where the
//! update reads its gradient.

use ir::{Func, Op, OpKind, TensorType, ValueId};
use std::collections::HashMap;

/// A set of argument positions.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct ArgSet(Vec<u64>);

impl ArgSet {
    fn empty(n: usize) -> Self {
        ArgSet(vec![0; n.div_ceil(64).max(1)])
    }
    fn insert(&mut self, i: usize) {
        self.0[i / 64] |= 1 << (i % 64);
    }
    fn union(&mut self, o: &ArgSet) {
        for (a, b) in self.0.iter_mut().zip(&o.0) {
            *a |= b;
        }
    }
    pub(crate) fn contains(&self, i: usize) -> bool {
        self.0[i / 64] >> (i % 64) & 1 == 1
    }
    pub(crate) fn any_of(&self, set: &[usize]) -> bool {
        set.iter().any(|&i| self.contains(i))
    }
}

/// Where a top-level value comes from.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) enum Def {
    Arg(usize),
    /// Op index in the body, result index.
    Op(usize, usize),
}

pub(crate) struct Graph<'f> {
    pub f: &'f Func,
    pub def: HashMap<ValueId, Def>,
    pub ty: HashMap<ValueId, TensorType>,
    /// Arguments each top-level value depends on.
    pub deps: HashMap<ValueId, ArgSet>,
    /// The float arguments each float value depends on along float values
    /// only: a path through a comparison, an argmax index or any other
    /// integer or boolean value carries no derivative, so an accuracy metric
    /// depends on the parameters but not smoothly.
    pub smooth_deps: HashMap<ValueId, ArgSet>,
    /// Per body op: the top-level values it reads (operands and values its
    /// regions capture).
    pub reads: Vec<Vec<ValueId>>,
    /// The values `func.return` returns.
    pub returned: Vec<ValueId>,
}

fn captured(op: &Op, out: &mut Vec<ValueId>) {
    out.extend(op.operands.iter().copied());
    for r in &op.regions {
        for o in &r.ops {
            captured(o, out);
        }
    }
}

/// Ops through which an optimizer tail carries a tensor elementwise.
fn elementwise(kind: &OpKind) -> bool {
    matches!(
        kind,
        OpKind::Unary(_) | OpKind::Binary(_) | OpKind::Select | OpKind::Clamp | OpKind::Convert
    )
}

impl<'f> Graph<'f> {
    pub fn new(f: &'f Func) -> Self {
        let n = f.params.len();
        let mut def = HashMap::new();
        let mut ty = HashMap::new();
        let mut deps = HashMap::new();
        let mut smooth_deps = HashMap::new();
        for (i, p) in f.params.iter().enumerate() {
            def.insert(p.value, Def::Arg(i));
            ty.insert(p.value, p.ty.clone());
            let mut s = ArgSet::empty(n);
            s.insert(i);
            smooth_deps.insert(
                p.value,
                if p.ty.elem.is_float() {
                    s.clone()
                } else {
                    ArgSet::empty(n)
                },
            );
            deps.insert(p.value, s);
        }
        let mut reads = Vec::with_capacity(f.body.ops.len());
        let mut returned = Vec::new();
        for (k, op) in f.body.ops.iter().enumerate() {
            let mut r = Vec::new();
            captured(op, &mut r);
            r.retain(|v| def.contains_key(v));
            r.sort();
            r.dedup();
            let mut s = ArgSet::empty(n);
            let mut smooth = ArgSet::empty(n);
            for v in &r {
                s.union(&deps[v]);
                smooth.union(&smooth_deps[v]);
            }
            if matches!(op.kind, OpKind::FuncReturn) {
                returned = op.operands.clone();
            }
            for (j, (v, t)) in op.results.iter().enumerate() {
                def.insert(*v, Def::Op(k, j));
                ty.insert(*v, t.clone());
                deps.insert(*v, s.clone());
                smooth_deps.insert(
                    *v,
                    if t.elem.is_float() {
                        smooth.clone()
                    } else {
                        ArgSet::empty(n)
                    },
                );
            }
            reads.push(r);
        }
        Graph {
            f,
            def,
            ty,
            deps,
            smooth_deps,
            reads,
            returned,
        }
    }

    /// The arguments `v` carries elementwise, each with the number of ops
    /// between (0: `v` is the argument). Only operands of `v`'s own shape are
    /// followed, so a broadcast learning rate is not "carried".
    pub fn carried(&self, v: ValueId) -> Vec<(usize, usize)> {
        let shape = &self.ty[&v].shape;
        let mut out: Vec<(usize, usize)> = Vec::new();
        let mut frontier = vec![v];
        let mut seen = std::collections::HashSet::new();
        for depth in 0..64 {
            let mut next = Vec::new();
            for x in frontier {
                if !seen.insert(x) {
                    continue;
                }
                match self.def.get(&x) {
                    Some(Def::Arg(i)) if !out.iter().any(|(a, _)| a == i) => {
                        out.push((*i, depth));
                    }
                    Some(Def::Arg(_)) => {}
                    Some(Def::Op(k, _)) => {
                        let op = &self.f.body.ops[*k];
                        if elementwise(&op.kind) {
                            for o in &op.operands {
                                if self.ty.get(o).is_some_and(|t| &t.shape == shape) {
                                    next.push(*o);
                                }
                            }
                        }
                    }
                    None => {}
                }
            }
            if next.is_empty() {
                break;
            }
            frontier = next;
        }
        out
    }

    /// The values every path from the `data` arguments to `root` passes
    /// through, nearest the data first, `root` excluded: the dominator chain
    /// of `root` in the reverse dataflow graph, cut where the data's paths
    /// meet. Empty when `root` does not depend on the data.
    pub fn dominators(&self, root: ValueId, data: &[usize]) -> Vec<ValueId> {
        // Nodes: body ops (0..ops) and arguments (ops + i).
        let ops = self.f.body.ops.len();
        let node_of = |v: &ValueId| match self.def[v] {
            Def::Arg(i) => ops + i,
            Def::Op(k, _) => k,
        };
        let on_data = |v: &ValueId| self.deps[v].any_of(data);
        let root_node = match self.def.get(&root) {
            Some(Def::Op(k, _)) if on_data(&root) => *k,
            _ => return Vec::new(),
        };
        let total = ops + self.f.params.len();
        // idom in the reverse graph; usize::MAX: not reached.
        let mut idom = vec![usize::MAX; total];
        let mut depth = vec![0usize; total];
        idom[root_node] = root_node;
        let lca = |mut a: usize, mut b: usize, idom: &[usize], depth: &[usize]| {
            while a != b {
                if depth[a] >= depth[b] {
                    a = idom[a];
                } else {
                    b = idom[b];
                }
            }
            a
        };
        // Consumers always come later in the body than what they read, so one
        // sweep from the root down settles each node after all its readers.
        let mut pending: Vec<Option<usize>> = vec![None; total];
        let settle =
            |from: usize, pending: &mut Vec<Option<usize>>, idom: &[usize], depth: &[usize]| {
                for v in &self.reads[from] {
                    if !on_data(v) {
                        continue;
                    }
                    let n = node_of(v);
                    pending[n] = Some(match pending[n] {
                        None => from,
                        Some(p) => lca(p, from, idom, depth),
                    });
                }
            };
        settle(root_node, &mut pending, &idom, &depth);
        for k in (0..root_node).rev() {
            if let Some(d) = pending[k] {
                idom[k] = d;
                depth[k] = depth[d] + 1;
                settle(k, &mut pending, &idom, &depth);
            }
        }
        let mut meet: Option<usize> = None;
        for &i in data {
            if let Some(d) = pending[ops + i] {
                idom[ops + i] = d;
                depth[ops + i] = depth[d] + 1;
                meet = Some(match meet {
                    None => ops + i,
                    Some(m) => lca(m, ops + i, &idom, &depth),
                });
            }
        }
        let Some(mut at) = meet else {
            return Vec::new();
        };
        // The values the root's ops read, transitively: of a dominating op
        // with several results (a while loop that accumulates every
        // gradient) the one result on the root's paths is the dominator.
        let mut upstream = std::collections::HashSet::new();
        let mut needed = vec![false; ops];
        needed[root_node] = true;
        for k in (0..=root_node).rev() {
            if needed[k] {
                for v in &self.reads[k] {
                    upstream.insert(*v);
                    if let Def::Op(j, _) = self.def[v] {
                        needed[j] = true;
                    }
                }
            }
        }
        let mut chain = Vec::new();
        while at != root_node {
            if at < ops {
                let mut on_path = self.f.body.ops[at]
                    .results
                    .iter()
                    .map(|(v, _)| *v)
                    .filter(|v| upstream.contains(v));
                if let (Some(v), None) = (on_path.next(), on_path.next()) {
                    chain.push(v);
                }
            }
            at = idom[at];
        }
        chain
    }

    /// The op defining `v` (`None` for an argument).
    pub fn op_of(&self, v: ValueId) -> Option<&'f Op> {
        match self.def.get(&v)? {
            Def::Op(k, _) => Some(&self.f.body.ops[*k]),
            Def::Arg(_) => None,
        }
    }
}
