//! Modules, functions, blocks and ops: the SSA container of the IR.
//!
//! Values are numbered per function (`ValueId`), in one canonical order: the
//! function's parameters, then a walk over the body in which an op's regions
//! (block arguments, then their ops) come before the op's own results. Both the
//! builder and the parser produce that order, so structurally equal modules are
//! `==`.

use crate::ops::OpKind;
use crate::types::TensorType;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ValueId(pub u32);

impl ValueId {
    pub fn index(self) -> usize {
        self.0 as usize
    }
}

/// Where an op came from in its source text (1-based line, column). It never
/// takes part in equality: a printed and re-parsed module is the same module.
#[derive(Clone, Copy, Debug, Default)]
pub struct SrcLoc(pub Option<(u32, u32)>);

impl PartialEq for SrcLoc {
    fn eq(&self, _: &Self) -> bool {
        true
    }
}

impl SrcLoc {
    pub fn line(&self) -> Option<u32> {
        self.0.map(|(l, _)| l)
    }
}

#[derive(Clone, Debug, PartialEq)]
pub struct Op {
    pub kind: OpKind,
    pub operands: Vec<ValueId>,
    pub results: Vec<(ValueId, TensorType)>,
    pub regions: Vec<Block>,
    /// Attributes certgrad does not interpret (`mhlo.*`, `sdy.*`, …), kept verbatim
    /// as `(name, value text)` so printing gives them back.
    pub extra_attrs: Vec<(String, String)>,
    pub loc: SrcLoc,
}

impl Op {
    pub fn result(&self, i: usize) -> ValueId {
        self.results[i].0
    }
}

#[derive(Clone, Debug, PartialEq, Default)]
pub struct Block {
    pub args: Vec<(ValueId, TensorType)>,
    /// The last op is the terminator (`stablehlo.return` / `func.return`).
    pub ops: Vec<Op>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Visibility {
    Public,
    Private,
}

#[derive(Clone, Debug, PartialEq)]
pub struct Param {
    pub value: ValueId,
    pub ty: TensorType,
    /// Argument attribute dictionary kept verbatim (without braces), e.g.
    /// `mhlo.sharding = "{replicated}"`.
    pub attrs: Option<String>,
}

#[derive(Clone, Debug, PartialEq)]
pub struct FuncResult {
    pub ty: TensorType,
    /// Result attribute dictionary kept verbatim (without braces), e.g.
    /// `jax.result_info = "result[0]"`.
    pub attrs: Option<String>,
}

#[derive(Clone, Debug, PartialEq)]
pub struct Func {
    pub name: String,
    pub visibility: Visibility,
    pub params: Vec<Param>,
    pub results: Vec<FuncResult>,
    /// Body block; its `args` mirror `params` (same ids and types).
    pub body: Block,
    /// Function attribute dictionary kept verbatim (without braces).
    pub attrs: Option<String>,
}

#[derive(Clone, Debug, PartialEq, Default)]
pub struct Module {
    /// `module @name`; `None` for an anonymous `module { … }` or bare functions.
    pub name: Option<String>,
    /// Module attribute dictionary kept verbatim (without braces).
    pub attrs: Option<String>,
    pub funcs: Vec<Func>,
}

impl Module {
    pub fn func(&self, name: &str) -> Option<&Func> {
        self.funcs.iter().find(|f| f.name == name)
    }

    /// The entry point a user most likely means: `main`, else the only public
    /// function, else the only function.
    pub fn default_entry(&self) -> Option<&Func> {
        if let Some(f) = self.func("main") {
            return Some(f);
        }
        let public: Vec<&Func> = self
            .funcs
            .iter()
            .filter(|f| f.visibility == Visibility::Public)
            .collect();
        match (public.len(), self.funcs.len()) {
            (1, _) => Some(public[0]),
            (_, 1) => Some(&self.funcs[0]),
            _ => None,
        }
    }
}

impl Func {
    pub fn param_types(&self) -> Vec<TensorType> {
        self.params.iter().map(|p| p.ty.clone()).collect()
    }

    pub fn result_types(&self) -> Vec<TensorType> {
        self.results.iter().map(|r| r.ty.clone()).collect()
    }

    /// Number of values defined in the function (parameters, op results, region
    /// arguments): ids are `0..num_values()` once canonical.
    pub fn num_values(&self) -> usize {
        fn count(b: &Block) -> usize {
            b.args.len()
                + b.ops
                    .iter()
                    .map(|op| op.results.len() + op.regions.iter().map(count).sum::<usize>())
                    .sum::<usize>()
        }
        count(&self.body)
    }

    /// The type of every value, indexed by `ValueId`. Requires canonical ids.
    pub fn value_types(&self) -> Vec<TensorType> {
        let mut out = vec![TensorType::scalar(crate::ElemType::F32); self.num_values()];
        fn fill(b: &Block, out: &mut [TensorType]) {
            for (v, t) in &b.args {
                out[v.index()] = t.clone();
            }
            for op in &b.ops {
                for r in &op.regions {
                    fill(r, out);
                }
                for (v, t) in &op.results {
                    out[v.index()] = t.clone();
                }
            }
        }
        fill(&self.body, &mut out);
        out
    }

    /// Renumber every value into the canonical order (see the module docs).
    /// Operands must refer to values defined earlier in scope; an unknown operand
    /// id is left untouched so verification can report it.
    pub fn canonicalize(&mut self) {
        use std::collections::HashMap;
        fn walk(b: &mut Block, map: &mut HashMap<ValueId, ValueId>, next: &mut u32) {
            for (v, _) in b.args.iter_mut() {
                let n = ValueId(*next);
                *next += 1;
                map.insert(*v, n);
                *v = n;
            }
            for op in b.ops.iter_mut() {
                for x in op.operands.iter_mut() {
                    if let Some(n) = map.get(x) {
                        *x = *n;
                    }
                }
                for r in op.regions.iter_mut() {
                    walk(r, map, next);
                }
                for (v, _) in op.results.iter_mut() {
                    let n = ValueId(*next);
                    *next += 1;
                    map.insert(*v, n);
                    *v = n;
                }
            }
        }
        let mut map = HashMap::new();
        let mut next = 0u32;
        walk(&mut self.body, &mut map, &mut next);
        for (p, (v, _)) in self.params.iter_mut().zip(&self.body.args) {
            p.value = *v;
        }
    }

    /// Count ops by name, regions included (for `certgrad check`).
    pub fn op_counts(&self) -> Vec<(&'static str, usize)> {
        let mut counts: Vec<(&'static str, usize)> = Vec::new();
        fn walk(b: &Block, counts: &mut Vec<(&'static str, usize)>) {
            for op in &b.ops {
                let n = op.kind.name();
                match counts.iter_mut().find(|(k, _)| *k == n) {
                    Some((_, c)) => *c += 1,
                    None => counts.push((n, 1)),
                }
                for r in &op.regions {
                    walk(r, counts);
                }
            }
        }
        walk(&self.body, &mut counts);
        counts.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(b.0)));
        counts
    }
}

impl Block {
    /// If this block is a plain binary reducer `^bb0(%a, %b): %r = op %a, %b;
    /// return %r` over scalars, the op. Printers use it for the compact
    /// `applies stablehlo.add` form; evaluators for fast reductions.
    pub fn as_binary_reducer(&self) -> Option<crate::ops::BinaryOp> {
        if self.args.len() != 2 || self.ops.len() != 2 {
            return None;
        }
        let (a, b) = (self.args[0].0, self.args[1].0);
        let op = &self.ops[0];
        let ret = &self.ops[1];
        let bin = match op.kind {
            OpKind::Binary(bin) => bin,
            _ => return None,
        };
        let ok = op.operands == [a, b]
            && op.results.len() == 1
            && ret.kind == OpKind::Return
            && ret.operands == [op.results[0].0]
            && self.args.iter().all(|(_, t)| t.shape.is_empty());
        ok.then_some(bin)
    }
}
