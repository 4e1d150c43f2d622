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
    /// An f32 max pool of NCHW `x` (3 × 3 window, stride 2, spatial padding
    /// 1, initial value −∞) with result shape `out`.
    pub fn max_pool_3x3_s2_p1(&mut self, x: ValueId, out: &[i64]) -> ValueId {
        let ninf = self.constant(f64::NEG_INFINITY, TensorType::f32(vec![]));
        let mx = self.binary_region(BinaryOp::Maximum, ElemType::F32);
        let wa = WindowAttrs {
            window_dimensions: vec![1, 1, 3, 3],
            window_strides: vec![1, 1, 2, 2],
            base_dilations: vec![1; 4],
            window_dilations: vec![1; 4],
            padding: vec![(0, 0), (0, 0), (1, 1), (1, 1)],
        };
        let ty = TensorType::f32(out.to_vec());
        self.op(OpKind::ReduceWindow(wa), &[x, ninf], vec![mx], &[ty])[0]
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

/// A 2-D NCHW convolution case: batch `n`, `c` input and `o` output
/// features, spatial size `hw`, kernel size `k`, and the op's strides,
/// padding, dilations, reversal and group counts.
#[derive(Clone, Debug)]
pub struct ConvCase {
    pub n: usize,
    pub c: usize,
    pub o: usize,
    pub hw: [usize; 2],
    pub k: [usize; 2],
    pub stride: [i64; 2],
    pub pad: [(i64, i64); 2],
    pub ld: [i64; 2],
    pub rd: [i64; 2],
    pub rev: [bool; 2],
    pub fg: usize,
    pub bg: usize,
}

impl ConvCase {
    /// A stride-1, undilated, unreversed, ungrouped case with padding `pad`.
    pub fn plain(
        n: usize,
        c: usize,
        o: usize,
        hw: [usize; 2],
        k: [usize; 2],
        pad: [(i64, i64); 2],
    ) -> Self {
        ConvCase {
            n,
            c,
            o,
            hw,
            k,
            stride: [1, 1],
            pad,
            ld: [1, 1],
            rd: [1, 1],
            rev: [false, false],
            fg: 1,
            bg: 1,
        }
    }

    /// The output's spatial size, `None` when the window does not fit.
    pub fn out_hw(&self) -> Option<[usize; 2]> {
        let mut out = [0; 2];
        for (d, o) in out.iter_mut().enumerate() {
            let dil_in = (self.hw[d] as i64 - 1) * self.ld[d] + 1 + self.pad[d].0 + self.pad[d].1;
            let dil_k = (self.k[d] as i64 - 1) * self.rd[d] + 1;
            if dil_in < dil_k {
                return None;
            }
            *o = ((dil_in - dil_k) / self.stride[d] + 1) as usize;
        }
        Some(out)
    }

    /// The op's attributes with dimension numbers `dims`.
    pub fn attrs(&self, dims: ConvDims) -> ConvAttrs {
        ConvAttrs {
            window_strides: self.stride.to_vec(),
            padding: self.pad.to_vec(),
            lhs_dilation: self.ld.to_vec(),
            rhs_dilation: self.rd.to_vec(),
            window_reversal: self.rev.to_vec(),
            dims,
            feature_group_count: self.fg as i64,
            batch_group_count: self.bg as i64,
            precision_config: None,
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
