//! Test support shared by den's test files: a function builder that states
//! every type (independent of ir's type inference, so the tests exercise the
//! evaluator alone), the generic-path options and the seeded bit stream the
//! fast-kernel tests draw their data from.
#![allow(dead_code)] // each test file uses a different part

use den::EvalOptions;
use ir::*;

/// A minimal function builder that states every type (independent of ir's
/// type inference, so these tests exercise the evaluator alone).
pub struct Fb {
    types: Vec<TensorType>,
    params: Vec<Param>,
    blocks: Vec<Block>,
}

impl Fb {
    pub fn new() -> Self {
        Fb {
            types: vec![],
            params: vec![],
            blocks: vec![Block::default()],
        }
    }
    pub fn fresh(&mut self, t: &TensorType) -> ValueId {
        self.types.push(t.clone());
        ValueId(self.types.len() as u32 - 1)
    }
    pub fn param(&mut self, t: TensorType) -> ValueId {
        let v = self.fresh(&t);
        self.blocks[0].args.push((v, t.clone()));
        self.params.push(Param {
            value: v,
            ty: t,
            attrs: None,
        });
        v
    }
    pub fn op(
        &mut self,
        kind: OpKind,
        operands: &[ValueId],
        regions: Vec<Block>,
        tys: &[TensorType],
    ) -> Vec<ValueId> {
        let results: Vec<(ValueId, TensorType)> =
            tys.iter().map(|t| (self.fresh(t), t.clone())).collect();
        let ids = results.iter().map(|r| r.0).collect();
        self.blocks.last_mut().unwrap().ops.push(Op {
            kind,
            operands: operands.to_vec(),
            results,
            regions,
            extra_attrs: vec![],
            loc: SrcLoc::default(),
        });
        ids
    }
    pub fn op1(&mut self, kind: OpKind, operands: &[ValueId], ty: TensorType) -> ValueId {
        self.op(kind, operands, vec![], &[ty])[0]
    }
    pub fn region(
        &mut self,
        args: &[TensorType],
        body: impl FnOnce(&mut Fb, &[ValueId]) -> Vec<ValueId>,
    ) -> Block {
        let mut b = Block::default();
        let ids: Vec<ValueId> = args.iter().map(|t| self.fresh(t)).collect();
        b.args = ids.iter().zip(args).map(|(v, t)| (*v, t.clone())).collect();
        self.blocks.push(b);
        let rets = body(self, &ids);
        self.op(OpKind::Return, &rets, vec![], &[]);
        self.blocks.pop().unwrap()
    }
    pub fn binary_region(&mut self, op: BinaryOp, elem: ElemType) -> Block {
        let s = TensorType::scalar(elem);
        self.region(&[s.clone(), s.clone()], |b, a| {
            vec![b.op1(OpKind::Binary(op), &[a[0], a[1]], s)]
        })
    }
    pub fn constant(&mut self, v: f64, ty: TensorType) -> ValueId {
        self.op1(OpKind::Constant(DenseData::Float(vec![v])), &[], ty)
    }
    pub fn finish(mut self, results: &[ValueId]) -> Module {
        self.op(OpKind::FuncReturn, results, vec![], &[]);
        let res = results
            .iter()
            .map(|v| FuncResult {
                ty: self.types[v.index()].clone(),
                attrs: None,
            })
            .collect();
        let f = Func {
            name: "main".into(),
            visibility: Visibility::Public,
            params: self.params,
            results: res,
            body: self.blocks.pop().unwrap(),
            attrs: None,
        };
        Module {
            name: None,
            attrs: None,
            funcs: vec![f],
        }
    }
}

pub fn generic() -> EvalOptions {
    EvalOptions {
        fast: false,
        ..Default::default()
    }
}

/// The xorshift64* stream of `seed` (each item the full 64-bit product, so a
/// caller takes the high bits it needs): deterministic test data from a
/// handful of integers, so a proptest case shrinks quickly.
pub fn xorshift64star(seed: u64) -> impl Iterator<Item = u64> {
    let mut s = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    std::iter::repeat_with(move || {
        s ^= s >> 12;
        s ^= s << 25;
        s ^= s >> 27;
        s.wrapping_mul(0x2545_F491_4F6C_DD1D)
    })
}
