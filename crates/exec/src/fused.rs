//! Fused elementwise loops of the f32 plan: a small register program (loads,
//! strided views, splats, elementwise ops, rounding) evaluated chunk by chunk,
//! so a chain of elementwise ops reads its inputs once and writes one output
//! (or accumulates into a reduction) without materialising intermediates.
//!
//! Every op computes exactly what the generic evaluator computes for `f32`
//! (the non-rational functions go through the same [`Scalar`] methods, so they
//! are bit-identical), except exp, tanh and logistic, whose vectorisable
//! twins (`crate::vmath`) are within one ulp of it; only fused add-reductions
//! sum in a different order.

use den::scalar::Scalar;
use ir::{BinaryOp, CompareDirection, ElemType, UnaryOp};
use rayon::prelude::*;

/// Elements per register: large enough to amortise the per-node dispatch,
/// small enough that a program's registers stay in L2.
pub(crate) const CHUNK: usize = 512;

/// Loops shorter than this run on one thread (the split costs more than it saves).
const PAR_MIN: usize = 1 << 15;

/// An affine read: output multi-index `i` reads source offset
/// `base + Σ i[d]·strides[d]`. Transpose, reverse and broadcast_in_dim are
/// views; composing them only changes strides and base.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct ViewSpec {
    pub shape: Vec<usize>,
    pub strides: Vec<isize>,
    pub base: isize,
}

impl ViewSpec {
    /// The identity view of a row-major buffer of `shape`.
    pub fn identity(shape: &[usize]) -> Self {
        ViewSpec {
            shape: shape.to_vec(),
            strides: den::tensor::row_major_strides(shape)
                .into_iter()
                .map(|s| s as isize)
                .collect(),
            base: 0,
        }
    }

    /// Merged form: size-1 dimensions dropped, adjacent dimensions that walk
    /// the source contiguously fused into one, innermost last.
    pub fn merged(&self) -> Merged {
        let mut dims: Vec<(usize, isize)> = Vec::new();
        for (&n, &s) in self.shape.iter().zip(&self.strides).rev() {
            if n == 1 {
                continue;
            }
            match dims.last_mut() {
                Some((ni, si)) if s == *si * *ni as isize => *ni *= n,
                _ => dims.push((n, s)),
            }
        }
        dims.reverse();
        Merged {
            dims,
            base: self.base,
        }
    }
}

/// A [`ViewSpec`] in merged form, ready to walk.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Merged {
    dims: Vec<(usize, isize)>,
    base: isize,
}

impl Merged {
    /// Calls `run(source offset, stride, output position, length)` for the
    /// innermost runs covering output positions `start..start + len`.
    #[inline(always)]
    fn runs(&self, start: usize, len: usize, mut run: impl FnMut(isize, isize, usize, usize)) {
        let Some(&(inner, stride)) = self.dims.last() else {
            run(self.base, 0, 0, len);
            return;
        };
        let rank = self.dims.len();
        let mut idx = [0usize; 16];
        let mut big = Vec::new();
        let idx: &mut [usize] = if rank <= 16 {
            &mut idx[..rank]
        } else {
            big.resize(rank, 0);
            &mut big
        };
        let mut rest = start;
        for d in (0..rank).rev() {
            idx[d] = rest % self.dims[d].0;
            rest /= self.dims[d].0;
        }
        let mut done = 0;
        while done < len {
            let n = (inner - idx[rank - 1]).min(len - done);
            let off = self.base
                + idx
                    .iter()
                    .zip(&self.dims)
                    .map(|(&i, &(_, s))| i as isize * s)
                    .sum::<isize>();
            run(off, stride, done, n);
            done += n;
            idx[rank - 1] += n;
            let mut d = rank - 1;
            while idx[d] == self.dims[d].0 && d > 0 {
                idx[d] = 0;
                d -= 1;
                idx[d] += 1;
            }
        }
    }

    /// The one source offset that output positions `start..start + len` all
    /// read, if they do (the chunk lies inside one run of stride 0).
    #[inline(always)]
    fn uniform_offset(&self, start: usize, len: usize) -> Option<usize> {
        let Some(&(inner, stride)) = self.dims.last() else {
            return Some(self.base as usize);
        };
        if (stride != 0 && len > 1) || start % inner + len > inner {
            return None;
        }
        let mut rest = start;
        let mut off = self.base;
        for &(n, s) in self.dims.iter().rev() {
            off += (rest % n) as isize * s;
            rest /= n;
        }
        Some(off as usize)
    }

    /// `dst[k] = src[offset of output position start + k]`.
    #[inline(always)]
    fn gather(&self, src: &[f32], start: usize, dst: &mut [f32]) {
        self.runs(start, dst.len(), |off, stride, at, n| {
            let d = &mut dst[at..at + n];
            if stride == 0 {
                d.fill(src[off as usize]);
            } else if stride == 1 {
                d.copy_from_slice(&src[off as usize..off as usize + n]);
            } else {
                for (k, x) in d.iter_mut().enumerate() {
                    *x = src[(off + k as isize * stride) as usize];
                }
            }
        });
    }

    /// `acc[offset of output position start + k] += vals[k]`, in position order.
    #[inline(always)]
    fn accumulate(&self, acc: &mut [f32], start: usize, vals: &[f32]) {
        self.runs(start, vals.len(), |off, stride, at, n| {
            let v = &vals[at..at + n];
            if stride == 0 {
                acc[off as usize] = sum_run(acc[off as usize], v);
            } else if stride == 1 {
                for (a, &x) in acc[off as usize..off as usize + n].iter_mut().zip(v) {
                    *a += x;
                }
            } else {
                for (k, &x) in v.iter().enumerate() {
                    acc[(off + k as isize * stride) as usize] += x;
                }
            }
        });
    }
}

/// `acc + Σ xs`, 64 partial sums (four vectors) for runs of 128 and more,
/// added pairwise at the end: a run of 512 is 8 dependent adds per lane
/// rather than 64 at eight lanes (batch norm's per-channel sums over
/// stride-0 runs were bound by that add latency: the accumulation's share
/// of a cifar8-bbn b128 step 8.0 % → 4.7 %).
#[inline(always)]
fn sum_run(acc: f32, xs: &[f32]) -> f32 {
    const LANES: usize = 64;
    if xs.len() < 2 * LANES {
        return sum_run8(acc, xs);
    }
    let mut lanes = [0f32; LANES];
    let chunks = xs.chunks_exact(LANES);
    let tail = chunks.remainder();
    for c in chunks {
        for (l, &x) in lanes.iter_mut().zip(c) {
            *l += x;
        }
    }
    // Pairwise: 64 → 32 → … → 1.
    let mut w = LANES;
    while w > 1 {
        w /= 2;
        for i in 0..w {
            lanes[i] += lanes[i + w];
        }
    }
    tail.iter().fold(acc + lanes[0], |a, &x| a + x)
}

/// `acc + Σ xs`, eight partial sums for runs of 16 and more.
#[inline(always)]
fn sum_run8(acc: f32, xs: &[f32]) -> f32 {
    const LANES: usize = 8;
    if xs.len() < 2 * LANES {
        return xs.iter().fold(acc, |a, &x| a + x);
    }
    let mut lanes = [0f32; LANES];
    let chunks = xs.chunks_exact(LANES);
    let tail = chunks.remainder();
    for c in chunks {
        for (l, &x) in lanes.iter_mut().zip(c) {
            *l += x;
        }
    }
    let partial = ((lanes[0] + lanes[1]) + (lanes[2] + lanes[3]))
        + ((lanes[4] + lanes[5]) + (lanes[6] + lanes[7]));
    tail.iter().fold(acc + partial, |a, &x| a + x)
}

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

/// A fused program; its value is the last node's register.
#[derive(Clone, Debug)]
pub(crate) struct Program {
    pub nodes: Vec<Node>,
    /// Test hook (`Plan::perturb_first_fused_loop_for_tests`, cargo feature
    /// `fault-injection`): added to every element of the program's value.
    pub fault: f32,
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

/// A node's value over the current chunk when it is one number: a splat, a
/// broadcast whose chunk lies in one stride-0 run (batch norm's per-channel
/// statistics over a 1024-position plane), or an op of such values. It is
/// written to the node's register only when a consumer needs a slice.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Uniform {
    /// Not uniform: the value is in the register (or the input, for a load).
    No,
    /// Uniform, register not written.
    Lazy(f32),
    /// Uniform, and the register holds it too.
    Filled(f32),
}

impl Uniform {
    fn value(self) -> Option<f32> {
        match self {
            Uniform::No => None,
            Uniform::Lazy(v) | Uniform::Filled(v) => Some(v),
        }
    }
}

/// `Some((lhs is the uniform one, its value))` when exactly one of two
/// operands is uniform.
fn one_uniform_of(a: Uniform, c: Uniform) -> Option<(bool, f32)> {
    match (a.value(), c.value()) {
        (Some(v), None) => Some((true, v)),
        (None, Some(v)) => Some((false, v)),
        _ => None,
    }
}

/// A thread's register file: `CHUNK` floats per node, and each node's
/// [`Uniform`] state for the chunk being evaluated.
pub(crate) struct Regs {
    data: Vec<f32>,
    uniform: Vec<Uniform>,
}

impl Regs {
    /// Writes node `k`'s uniform value into its register if it is not there.
    fn materialise(&mut self, k: usize, len: usize) {
        if let Uniform::Lazy(v) = self.uniform[k] {
            self.data[k * CHUNK..k * CHUNK + len].fill(v);
            self.uniform[k] = Uniform::Filled(v);
        }
    }
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

    /// [`Program::write_block`] compiled for AVX2 and FMA.
    ///
    /// # Safety
    /// The CPU has AVX2 and FMA; as [`Program::write_block`].
    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx2,fma")]
    unsafe fn write_block_avx2(
        &self,
        inputs: &[Input],
        out: SendPtr,
        lo: usize,
        hi: usize,
        regs: &mut Regs,
        in_place: bool,
    ) {
        // SAFETY: forwarded contract.
        unsafe { self.write_block(inputs, out, lo, hi, regs, in_place) }
    }

    /// [`Program::write_block`] compiled for AVX-512F: twice the lanes of
    /// the AVX2 twin for the f64 `exp`/`tanh`/`logistic` (GELU(tanh) was a
    /// third of a ViT forward); the same IEEE operations, so the same bits.
    ///
    /// # Safety
    /// The CPU has AVX-512F; as [`Program::write_block`].
    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx512f,fma")]
    unsafe fn write_block_avx512(
        &self,
        inputs: &[Input],
        out: SendPtr,
        lo: usize,
        hi: usize,
        regs: &mut Regs,
        in_place: bool,
    ) {
        // SAFETY: forwarded contract.
        unsafe { self.write_block(inputs, out, lo, hi, regs, in_place) }
    }

    /// [`Program::reduce_block`] compiled for AVX-512F.
    ///
    /// # Safety
    /// The CPU has AVX-512F.
    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx512f,fma")]
    #[allow(clippy::too_many_arguments)]
    unsafe fn reduce_block_avx512(
        &self,
        inputs: &[Input],
        map: &Merged,
        values: &[usize],
        accs: &mut [Vec<f32>],
        stores: &[(usize, SendPtr)],
        lo: usize,
        hi: usize,
        regs: &mut Regs,
    ) {
        self.reduce_block(inputs, map, values, accs, stores, lo, hi, regs)
    }

    /// [`Program::reduce_block`] compiled for AVX2 and FMA.
    ///
    /// # Safety
    /// The CPU has AVX2 and FMA.
    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx2,fma")]
    #[allow(clippy::too_many_arguments)]
    unsafe fn reduce_block_avx2(
        &self,
        inputs: &[Input],
        map: &Merged,
        values: &[usize],
        accs: &mut [Vec<f32>],
        stores: &[(usize, SendPtr)],
        lo: usize,
        hi: usize,
        regs: &mut Regs,
    ) {
        self.reduce_block(inputs, map, values, accs, stores, lo, hi, regs)
    }

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
    ) {
        // Plain loads are read where they are, never copied into a register
        // (a reduction of a convolution's output alone, such as batch norm's
        // Σx, had copied all of it) — except under a test fault, which is
        // added to the value's register.
        let in_place = self.fault == 0.0;
        let mut s = lo;
        while s < hi {
            let n = CHUNK.min(hi - s);
            self.eval_chunk(inputs, s, n, regs, None, in_place);
            for &k in values.iter().chain(stores.iter().map(|(k, _)| k)) {
                regs.materialise(k, n);
            }
            for &(k, out) in stores {
                // SAFETY: `out` holds `len` elements (`Program::reduce`) and
                // blocks cover disjoint ranges of them.
                let dst = unsafe { std::slice::from_raw_parts_mut(out.get().add(s), n) };
                dst.copy_from_slice(self.value_of(k, inputs, regs, s, n, in_place));
            }
            for (&k, acc) in values.iter().zip(accs.iter_mut()) {
                let v = self.value_of(k, inputs, regs, s, n, in_place);
                map.accumulate(acc, s, v);
            }
            s += n;
        }
    }

    /// Adds the values of nodes `values` at positions `0..len` into `accs`
    /// (one per value) through `map` (a reduction: reduced dimensions have
    /// stride 0). Several values share one pass over the inputs; each is
    /// summed in the same blocks and order as it would be alone. Each
    /// `(node, buffer)` of `stores` also gets that node's value at every
    /// position (a full-size output of the same pass).
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
                        self.reduce_block_avx512(inputs, map, values, accs, stores, lo, hi, regs)
                    };
                    return;
                }
                #[cfg(target_arch = "x86_64")]
                if avx2() {
                    // SAFETY: the CPU has AVX2 and FMA.
                    unsafe {
                        self.reduce_block_avx2(inputs, map, values, accs, stores, lo, hi, regs)
                    };
                    return;
                }
                self.reduce_block(inputs, map, values, accs, stores, lo, hi, regs)
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
fn avx512() -> bool {
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

/// `b` where `pick_b`, else `a`, as a bit mask: no branch, so data-dependent
/// choices (ReLU, max-pool) cost no mispredictions and loops vectorise.
#[inline(always)]
fn choose(pick_b: bool, a: f32, b: f32) -> f32 {
    let m = (pick_b as u32).wrapping_neg();
    f32::from_bits((b.to_bits() & m) | (a.to_bits() & !m))
}

/// StableHLO `maximum` as the generic evaluator has it: NaN wins (the first
/// one), `+0` beats `-0`. Branch-free: `b` when it is greater, when only
/// `b` is NaN, or when the two are equal and `a` is negative (`-0` vs `+0`).
#[inline(always)]
pub(crate) fn max_f32(a: f32, b: f32) -> f32 {
    let pick_b = (b > a) | (!a.is_nan() & b.is_nan()) | ((a == b) & a.is_sign_negative());
    choose(pick_b, a, b)
}

/// StableHLO `minimum`: NaN wins (the first one), `-0` beats `+0`.
#[inline(always)]
pub(crate) fn min_f32(a: f32, b: f32) -> f32 {
    let pick_b = (b < a) | (!a.is_nan() & b.is_nan()) | ((a == b) & a.is_sign_positive());
    choose(pick_b, a, b)
}

/// `out[i] = f(x[i])`, monomorphised per op so the loop has no indirect call
/// and can vectorise.
#[inline(always)]
fn map1(x: &[f32], out: &mut [f32], f: impl Fn(&f32) -> f32) {
    for (o, x) in out.iter_mut().zip(x) {
        *o = f(x);
    }
}

/// The two operands of a binary op over a chunk: two slices, or one slice
/// and a uniform value (a scalar in the loop instead of a filled register).
trait Map2: Copy {
    /// `out[i] = f(x[i], y[i])`, monomorphised per op and operand form.
    fn map(self, out: &mut [f32], f: impl Fn(f32, f32) -> f32);
}

impl Map2 for (&[f32], &[f32]) {
    #[inline(always)]
    fn map(self, out: &mut [f32], f: impl Fn(f32, f32) -> f32) {
        for ((o, &a), &c) in out.iter_mut().zip(self.0).zip(self.1) {
            *o = f(a, c);
        }
    }
}

impl Map2 for (f32, &[f32]) {
    #[inline(always)]
    fn map(self, out: &mut [f32], f: impl Fn(f32, f32) -> f32) {
        for (o, &c) in out.iter_mut().zip(self.1) {
            *o = f(self.0, c);
        }
    }
}

impl Map2 for (&[f32], f32) {
    #[inline(always)]
    fn map(self, out: &mut [f32], f: impl Fn(f32, f32) -> f32) {
        for (o, &a) in out.iter_mut().zip(self.0) {
            *o = f(a, self.1);
        }
    }
}

#[inline(always)]
fn unary(u: UnaryOp, x: &[f32], out: &mut [f32]) {
    match u {
        UnaryOp::Negate => map1(x, out, |x| -x),
        UnaryOp::Abs => map1(x, out, |x| x.abs()),
        UnaryOp::Square => map1(x, out, |x| x * x),
        UnaryOp::Sqrt => map1(x, out, |x| f32::sqrt(*x)),
        UnaryOp::Floor => map1(x, out, |x| x.floor()),
        UnaryOp::Ceil => map1(x, out, |x| x.ceil()),
        UnaryOp::Sign => map1(x, out, Scalar::sign),
        UnaryOp::RoundNearestEven => map1(x, out, |x| x.round_ties_even()),
        UnaryOp::Exponential => map1(x, out, |&x| crate::vmath::exp(x)),
        UnaryOp::ExponentialMinusOne => map1(x, out, |x| Scalar::expm1(x).unwrap_or(f32::NAN)),
        UnaryOp::Log => map1(x, out, |x| Scalar::log(x).unwrap_or(f32::NAN)),
        UnaryOp::LogPlusOne => map1(x, out, |x| Scalar::log1p(x).unwrap_or(f32::NAN)),
        UnaryOp::Rsqrt => map1(x, out, |x| Scalar::rsqrt(x).unwrap_or(f32::NAN)),
        UnaryOp::Cbrt => map1(x, out, |x| Scalar::cbrt(x).unwrap_or(f32::NAN)),
        UnaryOp::Tanh => map1(x, out, |&x| crate::vmath::tanh(x)),
        UnaryOp::Logistic => map1(x, out, |&x| crate::vmath::logistic(x)),
        UnaryOp::Sine => map1(x, out, |x| Scalar::sin(x).unwrap_or(f32::NAN)),
        UnaryOp::Cosine => map1(x, out, |x| Scalar::cos(x).unwrap_or(f32::NAN)),
        UnaryOp::Erf => map1(x, out, |x| Scalar::erf(x).unwrap_or(f32::NAN)),
        UnaryOp::Erfc => map1(x, out, |x| 1.0 - Scalar::erf(x).unwrap_or(f32::NAN)),
        // Issue 21: the float functions through the f32 scalar, as the
        // generic evaluator computes them.
        UnaryOp::RoundNearestAfz => map1(x, out, Scalar::round_nearest_afz),
        UnaryOp::Tan | UnaryOp::ChloTan => map1(x, out, |x| Scalar::tan(x).unwrap_or(f32::NAN)),
        UnaryOp::ErfInv => map1(x, out, |x| Scalar::erf_inv(x).unwrap_or(f32::NAN)),
        UnaryOp::Lgamma => map1(x, out, |x| Scalar::lgamma(x).unwrap_or(f32::NAN)),
        UnaryOp::Digamma => map1(x, out, |x| Scalar::digamma(x).unwrap_or(f32::NAN)),
        UnaryOp::BesselI1e => map1(x, out, |x| Scalar::bessel_i1e(x).unwrap_or(f32::NAN)),
        UnaryOp::Sinh => map1(x, out, |x| Scalar::sinh(x).unwrap_or(f32::NAN)),
        UnaryOp::Cosh => map1(x, out, |x| Scalar::cosh(x).unwrap_or(f32::NAN)),
        UnaryOp::Asin => map1(x, out, |x| Scalar::asin(x).unwrap_or(f32::NAN)),
        UnaryOp::Acos => map1(x, out, |x| Scalar::acos(x).unwrap_or(f32::NAN)),
        UnaryOp::Atan => map1(x, out, |x| Scalar::atan(x).unwrap_or(f32::NAN)),
        UnaryOp::Asinh => map1(x, out, |x| Scalar::asinh(x).unwrap_or(f32::NAN)),
        UnaryOp::Acosh => map1(x, out, |x| Scalar::acosh(x).unwrap_or(f32::NAN)),
        UnaryOp::Atanh => map1(x, out, |x| Scalar::atanh(x).unwrap_or(f32::NAN)),
        // Rejected when the plan is compiled (integers only, or an i1 result).
        UnaryOp::Not
        | UnaryOp::Popcnt
        | UnaryOp::CountLeadingZeros
        | UnaryOp::IsFinite
        | UnaryOp::IsInf
        | UnaryOp::IsNegInf
        | UnaryOp::IsPosInf => out.fill(f32::NAN),
    }
}

/// Whether a unary op is fused (float operands and a float result).
pub(crate) fn fusable_unary(u: UnaryOp) -> bool {
    !(u == UnaryOp::Not || u.is_bit_count() || u.is_predicate())
}

/// Whether a binary op is fused (float operands).
pub(crate) fn fusable_binary(b: BinaryOp) -> bool {
    // next_after steps in the element type's spacing, which the f32 kernels
    // do not know: the generic evaluator runs it.
    !(b.is_logical() || b.is_shift() || matches!(b, BinaryOp::NextAfter | BinaryOp::Mulhi))
}

#[inline(always)]
fn binary(b: BinaryOp, xy: impl Map2, out: &mut [f32]) {
    match b {
        BinaryOp::Add => xy.map(out, |a, c| a + c),
        BinaryOp::Subtract => xy.map(out, |a, c| a - c),
        BinaryOp::Multiply => xy.map(out, |a, c| a * c),
        BinaryOp::Divide => xy.map(out, |a, c| a / c),
        BinaryOp::Maximum => xy.map(out, max_f32),
        BinaryOp::Minimum => xy.map(out, min_f32),
        BinaryOp::Remainder => xy.map(out, |a, c| Scalar::rem(&a, &c)),
        BinaryOp::Power => xy.map(out, |a, c| Scalar::pow(&a, &c).unwrap_or(f32::NAN)),
        // Issue 21.
        BinaryOp::Atan2 => xy.map(out, |a, c| Scalar::atan2(&a, &c).unwrap_or(f32::NAN)),
        BinaryOp::Polygamma => xy.map(out, |a, c| Scalar::polygamma(&a, &c).unwrap_or(f32::NAN)),
        BinaryOp::Zeta => xy.map(out, |a, c| Scalar::zeta(&a, &c).unwrap_or(f32::NAN)),
        // Rejected when the plan is compiled (integers only, or not fused).
        BinaryOp::And
        | BinaryOp::Or
        | BinaryOp::Xor
        | BinaryOp::ShiftLeft
        | BinaryOp::ShiftRightLogical
        | BinaryOp::ShiftRightArithmetic
        | BinaryOp::NextAfter
        | BinaryOp::Mulhi => out.fill(f32::NAN),
    }
}

#[inline(always)]
fn compare(d: CompareDirection, total: bool, xy: impl Map2, out: &mut [f32]) {
    use std::cmp::Ordering;
    if total {
        xy.map(out, |a, c| {
            let ord = a.total_cmp(&c);
            let holds = match d {
                CompareDirection::Eq => ord == Ordering::Equal,
                CompareDirection::Ne => ord != Ordering::Equal,
                CompareDirection::Ge => ord != Ordering::Less,
                CompareDirection::Gt => ord == Ordering::Greater,
                CompareDirection::Le => ord != Ordering::Greater,
                CompareDirection::Lt => ord == Ordering::Less,
            };
            holds as u8 as f32
        });
        return;
    }
    match d {
        CompareDirection::Eq => xy.map(out, |a, c| (a == c) as u8 as f32),
        CompareDirection::Ne => xy.map(out, |a, c| (a != c) as u8 as f32),
        CompareDirection::Ge => xy.map(out, |a, c| (a >= c) as u8 as f32),
        CompareDirection::Gt => xy.map(out, |a, c| (a > c) as u8 as f32),
        CompareDirection::Le => xy.map(out, |a, c| (a <= c) as u8 as f32),
        CompareDirection::Lt => xy.map(out, |a, c| (a < c) as u8 as f32),
    }
}

#[cfg(test)]
mod tests {
    use super::{max_f32, min_f32};

    /// The rules spelled out case by case, as the generic evaluator states them.
    fn max_ref(a: f32, b: f32) -> f32 {
        if a.is_nan() {
            a
        } else if b.is_nan() {
            b
        } else if a > b {
            a
        } else if b > a || a.is_sign_negative() {
            b
        } else {
            a
        }
    }

    fn min_ref(a: f32, b: f32) -> f32 {
        if a.is_nan() {
            a
        } else if b.is_nan() {
            b
        } else if a < b {
            a
        } else if b < a || a.is_sign_positive() {
            b
        } else {
            a
        }
    }

    /// Every run length (the 8- and 64-lane forms, their tails) sums
    /// integers exactly: partial sums stay below 2²⁴, so any order is exact.
    #[test]
    fn sum_run_adds_every_element_once() {
        for len in [0usize, 1, 15, 16, 17, 127, 128, 129, 200, 512, 1000] {
            let xs: Vec<f32> = (0..len).map(|i| ((i * 37) % 101) as f32 - 50.0).collect();
            let want: f32 = 3.0 + xs.iter().map(|&x| x as f64).sum::<f64>() as f32;
            assert_eq!(super::sum_run(3.0, &xs), want, "len {len}");
        }
    }

    #[test]
    fn branch_free_max_min_keep_nan_and_signed_zero_rules() {
        let nan_a = f32::from_bits(0x7fc0_0001);
        let nan_b = f32::from_bits(0xffc0_0002);
        let vals = [
            0.0,
            -0.0,
            1.0,
            -1.0,
            f32::INFINITY,
            f32::NEG_INFINITY,
            f32::MIN_POSITIVE,
            3.0e38,
            nan_a,
            nan_b,
        ];
        for &a in &vals {
            for &b in &vals {
                assert_eq!(
                    max_f32(a, b).to_bits(),
                    max_ref(a, b).to_bits(),
                    "max({a}, {b})"
                );
                assert_eq!(
                    min_f32(a, b).to_bits(),
                    min_ref(a, b).to_bits(),
                    "min({a}, {b})"
                );
            }
        }
    }
}
