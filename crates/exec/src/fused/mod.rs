//! Fused elementwise loops of the f32 plan: a small register program (loads,
//! strided views, splats, elementwise ops, rounding) evaluated chunk by chunk,
//! so a chain of elementwise ops reads its inputs once and writes one output
//! (or accumulates into a reduction) without materialising intermediates.
//!
//! Every op computes exactly what the generic evaluator computes for `f32`
//! (the non-rational functions go through the same [`Scalar`] methods, so they
//! are bit-identical), except exp, tanh and logistic, which are f32
//! polynomials (`crate::vmath`, within 1, 2 and 3 ulp of the real function
//! where the evaluator is within half an ulp); only fused add-reductions sum
//! in a different order.
//!
//! This module owns the program ([`Node`], [`Program`]) and its chunk loops
//! (write, reduce, threads); `view` the strided reads, `ops` the per-op
//! loops, `uniform` the per-chunk uniform values and the register file.

use den::scalar::Scalar;
use ir::{BinaryOp, CompareDirection, ElemType, UnaryOp};
use rayon::prelude::*;

/// Elements per register: large enough to amortise the per-node dispatch,
/// small enough that a program's registers stay in L2.
pub(crate) const CHUNK: usize = 512;

/// How far ahead of the chunk being evaluated its inputs are prefetched.
const PREFETCH_AHEAD: usize = CHUNK;

/// Loops shorter than this run on one thread (the split costs more than it saves).
const PAR_MIN: usize = 1 << 15;

mod ops;
mod uniform;
mod view;

use ops::{binary, choose, compare, unary};
pub(crate) use ops::{fusable_binary, fusable_unary, max_f32, min_f32};
use uniform::{one_uniform_of, Regs, Uniform};
pub(crate) use view::{Merged, ViewSpec};

/// One instruction of a fused program; operands are earlier node indices,
/// and every node writes its own register.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum Node {
    /// Input `k`, element for element.
    Load(usize),
    /// Input `k` through a view.
    View(usize, Merged),
    Splat(f32),
    Unary(UnaryOp, usize),
    Binary(BinaryOp, usize, usize),
    /// 1.0 when the comparison holds, else 0.0; `total` is TOTALORDER.
    Compare(CompareDirection, bool, usize, usize),
    /// `select(pred ≠ 0, on_true, on_false)`.
    Select(usize, usize, usize),
    /// `clamp(min, x, max)`.
    Clamp(usize, usize, usize),
    /// Round to bf16/f16 (a narrower result type, or `convert`).
    Round(ElemType, usize),
    /// float → i1 `convert`: `x ≠ 0`.
    NotZero(usize),
}

/// `1 / v` when it is exact and normal (`v = ±2^e`, |e| ≤ 126), so that
/// `x / v` and `x · (1 / v)` are the same IEEE result for every `x`.
fn exact_reciprocal(v: f32) -> Option<f32> {
    let power_of_two = v.is_normal() && v.to_bits() & 0x007f_ffff == 0;
    let inverse = 1.0 / v;
    (power_of_two && inverse.is_normal()).then_some(inverse)
}

/// A fused program; its value is the last node's register.
#[derive(Clone, Debug)]
pub(crate) struct Program {
    pub nodes: Vec<Node>,
    /// Test hook (`Plan::perturb_first_fused_loop_for_tests`, cargo feature
    /// `fault-injection`): added to every element of the program's value.
    pub fault: f32,
    /// A planted bug (`Planted::StoresBeforeSums`): a reduction's stores
    /// written before its sums read the chunk.
    pub stores_first: bool,
}

impl Node {
    /// The node with operand node `k` renamed `at[k]` (inputs unchanged).
    pub fn renumbered(&self, at: &[usize]) -> Node {
        let n = |k: &usize| at[*k];
        match self {
            Node::Load(k) => Node::Load(*k),
            Node::View(k, m) => Node::View(*k, m.clone()),
            Node::Splat(x) => Node::Splat(*x),
            Node::Unary(u, a) => Node::Unary(*u, n(a)),
            Node::Binary(b, a, c) => Node::Binary(*b, n(a), n(c)),
            Node::Compare(d, t, a, c) => Node::Compare(*d, *t, n(a), n(c)),
            Node::Select(p, t, f) => Node::Select(n(p), n(t), n(f)),
            Node::Clamp(l, x, h) => Node::Clamp(n(l), n(x), n(h)),
            Node::Round(e, a) => Node::Round(*e, n(a)),
            Node::NotZero(a) => Node::NotZero(n(a)),
        }
    }

    /// The node in a program whose nodes moved up by `shift` and whose input
    /// `k` became input `remap[k]`.
    pub fn shifted(&self, shift: usize, remap: &[usize]) -> Node {
        let n = |k: &usize| k + shift;
        match self {
            Node::Load(k) => Node::Load(remap[*k]),
            Node::View(k, m) => Node::View(remap[*k], m.clone()),
            Node::Splat(x) => Node::Splat(*x),
            Node::Unary(u, a) => Node::Unary(*u, n(a)),
            Node::Binary(b, a, c) => Node::Binary(*b, n(a), n(c)),
            Node::Compare(d, t, a, c) => Node::Compare(*d, *t, n(a), n(c)),
            Node::Select(p, t, f) => Node::Select(n(p), n(t), n(f)),
            Node::Clamp(l, x, h) => Node::Clamp(n(l), n(x), n(h)),
            Node::Round(e, a) => Node::Round(*e, n(a)),
            Node::NotZero(a) => Node::NotZero(n(a)),
        }
    }
}

impl Node {
    /// The nodes this one reads (none for loads, views and splats).
    fn operands(&self) -> ([usize; 3], usize) {
        match *self {
            Node::Load(_) | Node::View(..) | Node::Splat(_) => ([0; 3], 0),
            Node::Unary(_, a) | Node::Round(_, a) | Node::NotZero(a) => ([a, 0, 0], 1),
            Node::Binary(_, a, c) | Node::Compare(_, _, a, c) => ([a, c, 0], 2),
            Node::Select(a, b, c) | Node::Clamp(a, b, c) => ([a, b, c], 3),
        }
    }

    /// The node's value at one position whose operands are `args` (in
    /// [`Node::operands`] order), by the very functions the chunk loops use.
    fn at_one(&self, args: &[f32]) -> f32 {
        let mut out = [0f32];
        match *self {
            Node::Unary(u, _) => unary(u, &args[..1], &mut out),
            Node::Binary(b, ..) => binary(b, (&args[..1], &args[1..2]), &mut out),
            Node::Compare(d, total, ..) => compare(d, total, (&args[..1], &args[1..2]), &mut out),
            Node::Select(..) => out[0] = choose(args[0] == 0.0, args[1], args[2]),
            Node::Clamp(..) => out[0] = min_f32(max_f32(args[1], args[0]), args[2]),
            Node::Round(e, _) => out[0] = args[0].round_to(e),
            Node::NotZero(_) => out[0] = (args[0] != 0.0) as u8 as f32,
            Node::Load(_) | Node::View(..) | Node::Splat(_) => {
                unreachable!("a node without operands is never evaluated at one position")
            }
        }
        out[0]
    }
}

/// Defines `$avx2` and `$avx512`, the method `$inner` (same arguments)
/// compiled for AVX2 + FMA and for AVX-512F + FMA; each has `$inner`'s
/// contract and needs a CPU with its features.
macro_rules! feature_twins {
    ($avx2:ident, $avx512:ident => $inner:ident($($arg:ident: $ty:ty),* $(,)?)) => {
        #[doc = concat!("[`Program::", stringify!($inner), "`] compiled for AVX2 and FMA.")]
        ///
        /// # Safety
        #[doc = concat!("The CPU has AVX2 and FMA; as [`Program::", stringify!($inner), "`].")]
        #[cfg(target_arch = "x86_64")]
        #[target_feature(enable = "avx2,fma")]
        #[allow(clippy::too_many_arguments, unused_unsafe)]
        unsafe fn $avx2(&self, $($arg: $ty),*) {
            // SAFETY: forwarded contract.
            unsafe { self.$inner($($arg),*) }
        }

        #[doc = concat!("[`Program::", stringify!($inner), "`] compiled for AVX-512F.")]
        ///
        /// # Safety
        #[doc = concat!("The CPU has AVX-512F; as [`Program::", stringify!($inner), "`].")]
        #[cfg(target_arch = "x86_64")]
        #[target_feature(enable = "avx512f,fma")]
        #[allow(clippy::too_many_arguments, unused_unsafe)]
        unsafe fn $avx512(&self, $($arg: $ty),*) {
            // SAFETY: forwarded contract.
            unsafe { self.$inner($($arg),*) }
        }
    };
}

impl Program {
    /// Nodes that compute (not loads or splats): the elementwise ops fused.
    pub fn op_count(&self) -> usize {
        self.nodes
            .iter()
            .filter(|n| !matches!(n, Node::Load(_) | Node::View(..) | Node::Splat(_)))
            .count()
    }

    /// Whether input `k` is read other than element for element.
    pub fn viewed(&self, k: usize) -> bool {
        self.nodes
            .iter()
            .any(|n| matches!(n, Node::View(j, _) if *j == k))
    }

    /// Evaluates positions `start..start + len` (len ≤ CHUNK) into the
    /// registers — the value node into `dst` instead when given — and returns
    /// the index of the value node. With `loads_in_place`, a value node that
    /// is a plain load is left in its input (the caller reads it there)
    /// rather than copied into its register.
    #[inline(always)]
    fn eval_chunk(
        &self,
        inputs: &[Input],
        start: usize,
        len: usize,
        regs: &mut Regs,
        mut dst: Option<&mut [f32]>,
        loads_in_place: bool,
    ) -> usize {
        let last = self.nodes.len() - 1;
        let Regs { data, uniform } = regs;
        for (j, node) in self.nodes.iter().enumerate() {
            let (lo, hi) = data.split_at_mut(j * CHUNK);
            let (ulo, uhi) = uniform.split_at_mut(j);
            uhi[0] = Uniform::No;
            // A node whose operands are all uniform over the chunk is one
            // value, computed once by the same function on one element.
            let (operands, n_operands) = node.operands();
            let operands = &operands[..n_operands];
            if !operands.is_empty() && operands.iter().all(|&k| ulo[k].value().is_some()) {
                let mut args = [0f32; 3];
                for (a, &k) in args.iter_mut().zip(operands) {
                    *a = ulo[k].value().expect("checked uniform");
                }
                uhi[0] = Uniform::Lazy(node.at_one(&args[..operands.len()]));
                continue;
            }
            match node {
                Node::Splat(x) => {
                    uhi[0] = Uniform::Lazy(*x);
                    continue;
                }
                Node::View(k, m) => {
                    if let Some(off) = m.uniform_offset(start, len) {
                        uhi[0] = Uniform::Lazy(inputs[*k].whole()[off]);
                        continue;
                    }
                }
                _ => {}
            }
            // A binary op or comparison with one uniform operand reads it as
            // a scalar; every other use of a uniform operand fills its register.
            let one_uniform = match node {
                Node::Binary(_, a, c) | Node::Compare(_, _, a, c) => {
                    one_uniform_of(ulo[*a], ulo[*c])
                }
                _ => None,
            };
            if one_uniform.is_none() {
                for &k in operands {
                    if let Uniform::Lazy(v) = ulo[k] {
                        lo[k * CHUNK..k * CHUNK + len].fill(v);
                        ulo[k] = Uniform::Filled(v);
                    }
                }
            }
            // The value node writes straight into `dst` when given one.
            let out = match dst.as_deref_mut() {
                Some(d) if j == last => &mut d[..len],
                _ => &mut hi[..len],
            };
            // Operands that are plain loads are read straight from their
            // input: copying them into a register would be one more pass.
            let r = |k: usize| match self.nodes[k] {
                Node::Load(i) => inputs[i].slice(start, len),
                _ => &lo[k * CHUNK..k * CHUNK + len],
            };
            match (node, one_uniform) {
                // Division by a uniform power of two is multiplication by its
                // exact reciprocal: both round the same real number once, so
                // the same bits, without the divider (batch norm's 1/N).
                (Node::Binary(BinaryOp::Divide, a, _), Some((false, v)))
                    if exact_reciprocal(v).is_some() =>
                {
                    let inverse = exact_reciprocal(v).expect("checked in the guard");
                    binary(BinaryOp::Multiply, (r(*a), inverse), out)
                }
                (Node::Binary(b, _, c), Some((true, v))) => binary(*b, (v, r(*c)), out),
                (Node::Binary(b, a, _), Some((false, v))) => binary(*b, (r(*a), v), out),
                (Node::Compare(d, total, _, c), Some((true, v))) => {
                    compare(*d, *total, (v, r(*c)), out)
                }
                (Node::Compare(d, total, a, _), Some((false, v))) => {
                    compare(*d, *total, (r(*a), v), out)
                }
                // Only the value node needs its load in a register.
                (Node::Load(k), _) if j == last && !loads_in_place => inputs[*k].read(start, out),
                (Node::Load(_), _) => {}
                (Node::View(k, m), _) => m.gather(inputs[*k].whole(), start, out),
                (Node::Splat(x), _) => out.fill(*x),
                (Node::Unary(u, a), _) => unary(*u, r(*a), out),
                (Node::Binary(b, a, c), _) => binary(*b, (r(*a), r(*c)), out),
                (Node::Compare(d, total, a, c), _) => compare(*d, *total, (r(*a), r(*c)), out),
                (Node::Select(p, t, f), _) => {
                    for (((o, &p), &t), &f) in out.iter_mut().zip(r(*p)).zip(r(*t)).zip(r(*f)) {
                        *o = choose(p == 0.0, t, f);
                    }
                }
                (Node::Clamp(l, x, h), _) => {
                    for (((o, &l), &x), &h) in out.iter_mut().zip(r(*l)).zip(r(*x)).zip(r(*h)) {
                        *o = min_f32(max_f32(x, l), h);
                    }
                }
                (Node::Round(e, a), _) => {
                    for (o, &x) in out.iter_mut().zip(r(*a)) {
                        *o = x.round_to(*e);
                    }
                }
                (Node::NotZero(a), _) => {
                    for (o, &x) in out.iter_mut().zip(r(*a)) {
                        *o = (x != 0.0) as u8 as f32;
                    }
                }
            }
        }
        // A uniform value node is written out whole.
        if let Uniform::Lazy(v) = uniform[last] {
            match dst.as_deref_mut() {
                Some(d) => d[..len].fill(v),
                None => data[last * CHUNK..last * CHUNK + len].fill(v),
            }
            uniform[last] = Uniform::Filled(v);
        }
        if self.fault != 0.0 {
            let value = match dst {
                Some(d) => &mut d[..len],
                None => &mut data[last * CHUNK..last * CHUNK + len],
            };
            for x in value {
                *x += self.fault;
            }
        }
        last
    }

    /// Prefetches the plain loads' inputs `PREFETCH_AHEAD` positions past
    /// chunk `s` (a streaming pass's first touch of each input had been
    /// where its loops waited).
    #[inline(always)]
    fn prefetch_ahead(&self, inputs: &[Input], s: usize, n: usize) {
        for node in &self.nodes {
            if let Node::Load(i) = node {
                inputs[*i].prefetch(s + PREFETCH_AHEAD, n);
            }
        }
    }

    /// Node `k`'s value at positions `s..s + n` after [`Program::eval_chunk`]
    /// (with `loads_in_place` as given to it): a plain load is read in its
    /// input unless it is the value node copied into its register.
    #[inline(always)]
    fn value_of<'r>(
        &self,
        k: usize,
        inputs: &'r [Input],
        regs: &'r Regs,
        s: usize,
        n: usize,
        loads_in_place: bool,
    ) -> &'r [f32] {
        match self.nodes[k] {
            Node::Load(i) if loads_in_place || k != self.nodes.len() - 1 => inputs[i].slice(s, n),
            _ => &regs.data[k * CHUNK..k * CHUNK + n],
        }
    }

    /// Runs `f` with this thread's register file, grown to fit the program.
    /// Kept per thread: allocating (and zeroing) it per loop costs a memset
    /// of the whole file every call, and registers are written before read.
    fn with_scratch<R>(&self, f: impl FnOnce(&mut Regs) -> R) -> R {
        thread_local! {
            static REGS: std::cell::RefCell<Regs> = const {
                std::cell::RefCell::new(Regs { data: Vec::new(), uniform: Vec::new() })
            };
        }
        let nodes = self.nodes.len();
        REGS.with(|r| {
            let mut regs = r.borrow_mut();
            if regs.data.len() < nodes * CHUNK {
                regs.data.resize(nodes * CHUNK, 0.0);
            }
            if regs.uniform.len() < nodes {
                regs.uniform.resize(nodes, Uniform::No);
            }
            f(&mut regs)
        })
    }

    /// Writes the program's value at positions `0..len` through `out`.
    ///
    /// # Safety
    /// `out` must be valid for `len` writes; an input may alias it only when
    /// it is read element for element (`Load`), as position `i` is read
    /// before it is written.
    pub unsafe fn run(
        &self,
        inputs: &[Input],
        out: *mut f32,
        len: usize,
        parallel: bool,
        in_place: bool,
    ) {
        let out = SendPtr(out);
        let block = |lo: usize, hi: usize| {
            self.with_scratch(|regs| {
                #[cfg(target_arch = "x86_64")]
                if avx512() {
                    // SAFETY: the CPU has AVX-512F; forwarded contract, blocks disjoint.
                    unsafe { self.write_block_avx512(inputs, out, lo, hi, regs, in_place) };
                    return;
                }
                #[cfg(target_arch = "x86_64")]
                if avx2() {
                    // SAFETY: the CPU has AVX2 and FMA; forwarded contract, blocks disjoint.
                    unsafe { self.write_block_avx2(inputs, out, lo, hi, regs, in_place) };
                    return;
                }
                // SAFETY: forwarded contract; blocks are disjoint.
                unsafe { self.write_block(inputs, out, lo, hi, regs, in_place) }
            })
        };
        let blocks = split(len, parallel);
        if blocks.len() == 1 {
            block(0, len);
        } else {
            blocks.par_iter().for_each(|&(lo, hi)| block(lo, hi));
        }
    }

    /// Positions `lo..hi` of [`Program::run`], chunk by chunk.
    ///
    /// # Safety
    /// As [`Program::run`], for positions `lo..hi`.
    #[inline(always)]
    unsafe fn write_block(
        &self,
        inputs: &[Input],
        out: SendPtr,
        lo: usize,
        hi: usize,
        regs: &mut Regs,
        in_place: bool,
    ) {
        let mut s = lo;
        while s < hi {
            let n = CHUNK.min(hi - s);
            self.prefetch_ahead(inputs, s, n);
            // SAFETY: positions s..s+n are inside 0..len and disjoint between
            // blocks.
            let dst = unsafe { std::slice::from_raw_parts_mut(out.get().add(s), n) };
            if in_place {
                // An input shares the output's buffer: finish reading it
                // before the value is written.
                let v = self.eval_chunk(inputs, s, n, regs, None, false);
                dst.copy_from_slice(&regs.data[v * CHUNK..v * CHUNK + n]);
            } else {
                self.eval_chunk(inputs, s, n, regs, Some(dst), false);
            }
            s += n;
        }
    }

    // The block loops compiled for AVX2 + FMA and for AVX-512F: the wider
    // twin has twice the lanes for `vmath`'s polynomials (GELU(tanh) was a
    // third of a ViT forward) with the same IEEE operations, so the same bits.
    feature_twins!(write_block_avx2, write_block_avx512 => write_block(
        inputs: &[Input],
        out: SendPtr,
        lo: usize,
        hi: usize,
        regs: &mut Regs,
        in_place: bool,
    ));
    feature_twins!(reduce_block_avx2, reduce_block_avx512 => reduce_block(
        inputs: &[Input],
        map: &Merged,
        values: &[usize],
        accs: &mut [Vec<f32>],
        stores: &[(usize, SendPtr)],
        lo: usize,
        hi: usize,
        regs: &mut Regs,
        aliased: bool,
    ));

    /// Positions `lo..hi` of [`Program::reduce`], accumulated into `accs`.
    #[inline(always)]
    #[allow(clippy::too_many_arguments)]
    fn reduce_block(
        &self,
        inputs: &[Input],
        map: &Merged,
        values: &[usize],
        accs: &mut [Vec<f32>],
        stores: &[(usize, SendPtr)],
        lo: usize,
        hi: usize,
        regs: &mut Regs,
        aliased: bool,
    ) {
        // Plain loads are read where they are, never copied into a register
        // (a reduction of a convolution's output alone, such as batch norm's
        // Σx, had copied all of it) — except under a test fault, which is
        // added to the value's register.
        let in_place = self.fault == 0.0;
        // A stored value node computed straight into its store (as a loop
        // writes its output), not into its register and then copied —
        // unless the store is an input's buffer (`aliased`): then, as for
        // an in-place loop, the chunk is read whole before it is written.
        let last = self.nodes.len() - 1;
        let direct = !aliased
            && matches!(stores, [(k, _)] if *k == last)
            && !matches!(self.nodes[last], Node::Load(_));
        // The chunk's runs of the reduction map, walked once for all values.
        let mut runs: Vec<view::Run> = Vec::new();
        let mut s = lo;
        while s < hi {
            let n = CHUNK.min(hi - s);
            self.prefetch_ahead(inputs, s, n);
            runs.clear();
            runs.extend(map.runs(s, n));
            if direct {
                // SAFETY: as for the stores below.
                let dst = unsafe { std::slice::from_raw_parts_mut(stores[0].1.get().add(s), n) };
                self.eval_chunk(inputs, s, n, regs, Some(&mut *dst), in_place);
                for &k in values.iter().filter(|&&k| k != last) {
                    regs.materialise(k, n);
                }
                for (&k, acc) in values.iter().zip(accs.iter_mut()) {
                    let v = match k == last {
                        true => &*dst,
                        false => self.value_of(k, inputs, regs, s, n, in_place),
                    };
                    view::accumulate_runs(acc, runs.iter().copied(), v);
                }
                s += n;
                continue;
            }
            self.eval_chunk(inputs, s, n, regs, None, in_place);
            for &k in values.iter().chain(stores.iter().map(|(k, _)| k)) {
                regs.materialise(k, n);
            }
            // Every read of the chunk comes before any write: a value that
            // is a plain load is read in its input, and with `aliased` the
            // first store's buffer IS an input. So the sums first, then the
            // stores, the aliased first store last.
            let store = |regs: &Regs| {
                for &(k, out) in stores.iter().rev() {
                    // SAFETY: `out` holds `len` elements (`Program::reduce`)
                    // and blocks cover disjoint ranges of them.
                    let dst = unsafe { std::slice::from_raw_parts_mut(out.get().add(s), n) };
                    dst.copy_from_slice(self.value_of(k, inputs, regs, s, n, in_place));
                }
            };
            if self.stores_first {
                store(regs);
            }
            for (&k, acc) in values.iter().zip(accs.iter_mut()) {
                let v = self.value_of(k, inputs, regs, s, n, in_place);
                view::accumulate_runs(acc, runs.iter().copied(), v);
            }
            if !self.stores_first {
                store(regs);
            }
            s += n;
        }
    }

    /// Adds the values of nodes `values` at positions `0..len` into `accs`
    /// (one per value) through `map` (a reduction: reduced dimensions have
    /// stride 0). Several values share one pass over the inputs; each is
    /// summed in the same blocks and order as it would be alone. Each
    /// `(node, buffer)` of `stores` also gets that node's value at every
    /// position (a full-size output of the same pass); with `aliased`, the
    /// first store's buffer is an input's, read element for element.
    #[allow(clippy::too_many_arguments)]
    pub fn reduce(
        &self,
        inputs: &[Input],
        map: &Merged,
        values: &[usize],
        accs: &mut [Vec<f32>],
        stores: &mut [(usize, &mut [f32])],
        len: usize,
        parallel: bool,
        aliased: bool,
    ) {
        let stores: Vec<(usize, SendPtr)> = stores
            .iter_mut()
            .map(|(k, b)| {
                assert!(b.len() >= len && *k < self.nodes.len(), "reduce store");
                (*k, SendPtr(b.as_mut_ptr()))
            })
            .collect();
        let stores = &stores[..];
        let block = |lo: usize, hi: usize, accs: &mut [Vec<f32>]| {
            self.with_scratch(|regs| {
                #[cfg(target_arch = "x86_64")]
                if avx512() {
                    // SAFETY: the CPU has AVX-512F.
                    unsafe {
                        self.reduce_block_avx512(
                            inputs, map, values, accs, stores, lo, hi, regs, aliased,
                        )
                    };
                    return;
                }
                #[cfg(target_arch = "x86_64")]
                if avx2() {
                    // SAFETY: the CPU has AVX2 and FMA.
                    unsafe {
                        self.reduce_block_avx2(
                            inputs, map, values, accs, stores, lo, hi, regs, aliased,
                        )
                    };
                    return;
                }
                self.reduce_block(inputs, map, values, accs, stores, lo, hi, regs, aliased)
            })
        };
        let blocks = split(len, parallel);
        if blocks.len() == 1 {
            block(0, len, accs);
            return;
        }
        let partials: Vec<Vec<Vec<f32>>> = blocks
            .par_iter()
            .map(|&(lo, hi)| {
                let mut a: Vec<Vec<f32>> = accs.iter().map(|acc| vec![0.0; acc.len()]).collect();
                block(lo, hi, &mut a);
                a
            })
            .collect();
        for p in partials {
            for (acc, part) in accs.iter_mut().zip(p) {
                for (a, x) in acc.iter_mut().zip(part) {
                    *a += x;
                }
            }
        }
    }
}

/// Whether the loops run in their AVX2 build, chosen at run time. The twin is
/// the same code compiled for 256-bit vectors: IEEE operations, never
/// contracted into FMA except `vmath`'s explicit `mul_add`s (correctly
/// rounded on every path), so its results are bit for bit the baseline's
/// (measured on the cifar8 step: fused elementwise −27 %, reductions −14 %).
/// FMA is required with AVX2: without it each `mul_add` would be a libm call.
#[cfg(target_arch = "x86_64")]
fn avx2() -> bool {
    std::arch::is_x86_feature_detected!("avx2") && std::arch::is_x86_feature_detected!("fma")
}

/// Whether the loops run in their AVX-512F build (preferred to AVX2 when
/// present; `CERTGRAD_NO_AVX512=1` keeps the AVX2 one, for comparisons).
#[cfg(target_arch = "x86_64")]
pub(super) fn avx512() -> bool {
    use std::sync::OnceLock;
    static ON: OnceLock<bool> = OnceLock::new();
    *ON.get_or_init(|| {
        std::arch::is_x86_feature_detected!("avx512f")
            && std::arch::is_x86_feature_detected!("fma")
            && std::env::var_os("CERTGRAD_NO_AVX512").is_none_or(|v| v.is_empty())
    })
}

/// Splits `0..len` into one block per thread (chunk-aligned) when it pays.
fn split(len: usize, parallel: bool) -> Vec<(usize, usize)> {
    let threads = rayon::current_num_threads();
    if !parallel || threads < 2 || len < PAR_MIN {
        return vec![(0, len)];
    }
    let per = len.div_ceil(threads).div_ceil(CHUNK) * CHUNK;
    (0..len)
        .step_by(per)
        .map(|lo| (lo, (lo + per).min(len)))
        .collect()
}

#[derive(Clone, Copy)]
struct SendPtr(*mut f32);
// SAFETY: blocks write disjoint ranges through the pointer (see `Program::run`).
unsafe impl Send for SendPtr {}
unsafe impl Sync for SendPtr {}
impl SendPtr {
    fn get(self) -> *mut f32 {
        self.0
    }
}

/// A loop input: a float buffer (possibly the output buffer itself, hence
/// the raw pointer) or integers read as f32.
pub(crate) enum Input<'a> {
    Float(*const f32, usize),
    Owned(Vec<f32>),
    Borrowed(&'a [f32]),
}

// SAFETY: the pointer of `Float` is only read, at positions no block writes
// concurrently other than the element-for-element alias `Program::run` allows.
unsafe impl Sync for Input<'_> {}

impl Input<'_> {
    fn read(&self, start: usize, out: &mut [f32]) {
        match self {
            Input::Float(p, len) => {
                debug_assert!(start + out.len() <= *len);
                // SAFETY: `p` is valid for `len` reads; this range is read
                // before the same range of an aliased output is written.
                let src = unsafe { std::slice::from_raw_parts(p.add(start), out.len()) };
                out.copy_from_slice(src);
            }
            Input::Owned(v) => out.copy_from_slice(&v[start..start + out.len()]),
            Input::Borrowed(v) => out.copy_from_slice(&v[start..start + out.len()]),
        }
    }

    /// Asks the cache for positions `start..start + len` (clamped to the
    /// input) ahead of their reads.
    #[inline(always)]
    fn prefetch(&self, start: usize, len: usize) {
        #[cfg(target_arch = "x86_64")]
        {
            let (p, n) = match self {
                Input::Float(p, n) => (*p, *n),
                Input::Owned(v) => (v.as_ptr(), v.len()),
                Input::Borrowed(v) => (v.as_ptr(), v.len()),
            };
            let end = (start + len).min(n);
            let mut i = start;
            while i < end {
                // SAFETY: a prefetch of an address inside the input; it
                // neither faults nor changes memory.
                unsafe {
                    std::arch::x86_64::_mm_prefetch::<{ std::arch::x86_64::_MM_HINT_T0 }>(
                        p.add(i).cast::<i8>(),
                    )
                };
                i += 16;
            }
        }
    }

    /// Positions `start..start + len`, for reading only.
    fn slice(&self, start: usize, len: usize) -> &[f32] {
        match self {
            Input::Float(p, n) => {
                debug_assert!(start + len <= *n);
                // SAFETY: `p` is valid for `n` reads; an aliased output range
                // is written only after the chunk's last read of it.
                unsafe { std::slice::from_raw_parts(p.add(start), len) }
            }
            Input::Owned(v) => &v[start..start + len],
            Input::Borrowed(v) => &v[start..start + len],
        }
    }

    fn whole(&self) -> &[f32] {
        match self {
            // SAFETY: viewed inputs never alias the output (`Program::viewed`).
            Input::Float(p, len) => unsafe { std::slice::from_raw_parts(*p, *len) },
            Input::Owned(v) => v,
            Input::Borrowed(v) => v,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::exact_reciprocal;

    /// Division by a power of two and multiplication by its reciprocal are
    /// the same bits on every kind of dividend (normal, subnormal results,
    /// overflow, ±0, ±∞, NaN); divisors whose reciprocal would round, or be
    /// subnormal, or that are not finite, are refused.
    #[test]
    fn power_of_two_division_is_reciprocal_multiplication() {
        let dividends = [
            1.0f32,
            -3.7,
            1e-38,
            -1.5e-39,
            f32::from_bits(1),
            3.4e38,
            0.0,
            -0.0,
            f32::INFINITY,
            f32::NEG_INFINITY,
            f32::NAN,
            123456.79,
            -7.006e-5,
        ];
        let mut divisors = 0;
        for e in -126..=126 {
            for sign in [1.0f32, -1.0] {
                let v = sign * 2f32.powi(e);
                let inverse = exact_reciprocal(v).expect("a power of two in range");
                divisors += 1;
                for &x in &dividends {
                    let (q, p) = (x / v, x * inverse);
                    assert!(
                        q.to_bits() == p.to_bits() || (q.is_nan() && p.is_nan()),
                        "{x} / {v}: {q} vs {p}"
                    );
                }
            }
        }
        assert_eq!(divisors, 2 * 253);
        for v in [
            3.0f32,
            0.1,
            1.5,
            2f32.powi(127),
            2f32.powi(-127),
            0.0,
            f32::INFINITY,
            f32::NAN,
        ] {
            assert_eq!(exact_reciprocal(v), None, "{v}");
        }
    }
}
