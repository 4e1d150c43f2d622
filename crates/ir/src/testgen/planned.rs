//! Random f32 programs shaped like the train steps the compiled plan
//! accelerates, for differential tests of the plan against the evaluator:
//! NCHW activations at sizes that span its chunks, parallel blocks and vector
//! lanes; convolutions in the forward form and both VJP forms (input gradient
//! through a reversed kernel and a dilated or zero-upsampled cotangent, weight
//! gradient with batch and feature swapped), every padding, stride and
//! dilation; batch norm and ReLU forward and backward; add and max reductions
//! over any axis set and their broadcasts back; reshapes and transposes;
//! pools and `select_and_scatter`; dense layers with a bias. Values are read
//! by several consumers and outputs are drawn from anywhere, so the plan's
//! rewrites (sums joined into their producers, sibling sums merged, bias and
//! moment folds, buffers reused in place) meet each other.
//!
//! A program is a list of recipes, each a kind and a few numbers that choose
//! operands by position among the values built so far: every sub-list still
//! builds a well-typed function. So a failing program shrinks by deleting
//! recipes and outputs and lowering numbers ([`Planned::shrink`]), and the
//! smallest failure prints as a few lines of StableHLO.

use crate::builder::FuncBuilder;
use crate::module::{Block, Func, ValueId, Visibility};
use crate::ops::{
    BinaryOp, CompareDirection, ConvAttrs, ConvDims, DotDims, OpKind, ScatterWindowAttrs, UnaryOp,
    WindowAttrs,
};
use crate::rng::Rng;
use crate::types::{ElemType, TensorType};

/// How many numbers a recipe carries (a recipe reads them cyclically).
const PICKS: usize = 8;

/// One op (or one short idiom: a batch norm, its backward, a ReLU mask) of a
/// [`Planned`] program.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Recipe {
    pub kind: u32,
    pub picks: [u32; PICKS],
}

/// A random program of the plan's op set: the activation shape
/// `[N, C, H, W]` its parameters take, its recipes, and which values it
/// returns (numbers choosing among all values, the last value always).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Planned {
    pub shape: [i64; 4],
    pub recipes: Vec<Recipe>,
    pub outputs: Vec<u32>,
}

/// The recipe kinds, in [`Recipe::kind`] order (`kind % KINDS.len()`).
const KINDS: [&str; 20] = [
    "unary",
    "binary",
    "binary with a broadcast operand",
    "add-reduction",
    "max-reduction",
    "broadcast of a reduction back",
    "reshape",
    "transpose",
    "convolution",
    "input-gradient convolution",
    "weight-gradient convolution",
    "pool",
    "select_and_scatter",
    "relu and its mask",
    "batch norm",
    "batch norm backward",
    "dense",
    "sibling sums",
    "zero-upsampling pad",
    "scale by a constant",
];

impl Planned {
    /// The program of `seed`: up to `max_recipes` recipes.
    pub fn draw(seed: u64, max_recipes: usize) -> Planned {
        let mut rng = Rng::salted(seed, 0x504c_414e);
        let sizes = [1, 2, 3, 4, 5, 7, 8, 12, 16, 32];
        let shape = loop {
            let n = rng.pick(&[1i64, 2, 2, 4, 8]);
            let c = rng.pick(&[1i64, 2, 3, 4, 8, 8, 16]);
            let h = rng.pick(&sizes);
            let w = if rng.chance(0.7) { h } else { rng.pick(&sizes) };
            if n * c * h * w <= 1 << 15 {
                break [n, c, h, w];
            }
        };
        let n_recipes = 1 + rng.below(max_recipes.max(1));
        let recipes = (0..n_recipes)
            .map(|_| Recipe {
                kind: rng.below(KINDS.len()) as u32,
                picks: std::array::from_fn(|_| rng.next_u64() as u32),
            })
            .collect();
        let outputs = (0..rng.below(4)).map(|_| rng.next_u64() as u32).collect();
        Planned {
            shape,
            recipes,
            outputs,
        }
    }

    /// The recipe kinds' names, for coverage counts.
    pub fn kind_name(kind: u32) -> &'static str {
        KINDS[kind as usize % KINDS.len()]
    }

    /// The function `main` this program builds.
    pub fn build(&self) -> Func {
        let [n, c, h, w] = self.shape;
        let f32t = |s: &[i64]| TensorType::new(s.to_vec(), ElemType::F32);
        let mut b = FuncBuilder::new("main", Visibility::Public);
        let mut pool = Vec::new();
        // Activations (inputs, cotangents), per-feature vectors (γ, β, a
        // bias), kernels (3×3, 1×1, depthwise 3×3) and dense weights.
        for s in [
            vec![n, c, h, w],
            vec![n, c, h, w],
            vec![n, c, h, w],
            vec![c],
            vec![c],
        ] {
            let v = b.param(f32t(&s));
            pool.push(Val::plain(v, s));
        }
        let weights = Weights {
            k3: b.param(f32t(&[c, c, 3, 3])),
            k1: b.param(f32t(&[c, c, 1, 1])),
            depthwise: b.param(f32t(&[c, 1, 3, 3])),
            dense_flat: b.param(f32t(&[c * h * w, c])),
            dense: b.param(f32t(&[c, c])),
        };
        let mut g = Builder {
            b,
            pool,
            weights,
            shape: self.shape,
        };
        for r in &self.recipes {
            let mut p = Picks {
                picks: &r.picks,
                at: 0,
            };
            g.recipe(r.kind as usize % KINDS.len(), &mut p);
        }
        // The last value, and values chosen anywhere (duplicates dropped).
        let built: Vec<ValueId> = g.pool.iter().map(|v| v.id).collect();
        let mut results = vec![*built.last().expect("parameters")];
        for &o in &self.outputs {
            let v = built[o as usize % built.len()];
            if !results.contains(&v) {
                results.push(v);
            }
        }
        g.b.finish(&results).expect("func.return of built values")
    }

    /// The smallest program derived from this one for which `fails` still
    /// holds (`fails(self.build())` should): recipes and outputs deleted,
    /// halves first, then one by one, then the numbers that choose operands
    /// and attributes lowered, until nothing smaller fails.
    pub fn shrink(&self, mut fails: impl FnMut(&Func) -> bool) -> Planned {
        let mut best = self.clone();
        let mut try_it = |cand: Planned, best: &mut Planned| {
            let f = cand.build();
            if fails(&f) {
                *best = cand;
                true
            } else {
                false
            }
        };
        loop {
            let mut progress = false;
            // Chunks of recipes, from half the program down to single ones.
            let mut size = best.recipes.len().div_ceil(2).max(1);
            loop {
                let mut at = 0;
                while at < best.recipes.len() {
                    let mut cand = best.clone();
                    let end = (at + size).min(cand.recipes.len());
                    cand.recipes.drain(at..end);
                    if !try_it(cand, &mut best) {
                        at += size;
                    } else {
                        progress = true;
                    }
                }
                if size == 1 {
                    break;
                }
                size = size.div_ceil(2);
            }
            for k in (0..best.outputs.len()).rev() {
                let mut cand = best.clone();
                cand.outputs.remove(k);
                progress |= try_it(cand, &mut best);
            }
            // Smaller numbers: operands nearer the start, plainer attributes.
            for r in 0..best.recipes.len() {
                for k in 0..PICKS {
                    for smaller in [0, best.recipes[r].picks[k] / 2] {
                        if smaller < best.recipes[r].picks[k] {
                            let mut cand = best.clone();
                            cand.recipes[r].picks[k] = smaller;
                            if try_it(cand, &mut best) {
                                progress = true;
                                break;
                            }
                        }
                    }
                }
            }
            // A smaller activation shape, one dimension at a time.
            for d in 0..4 {
                for smaller in [1, best.shape[d] / 2] {
                    if smaller >= 1 && smaller < best.shape[d] {
                        let mut cand = best.clone();
                        cand.shape[d] = smaller;
                        if try_it(cand, &mut best) {
                            progress = true;
                            break;
                        }
                    }
                }
            }
            if !progress {
                return best;
            }
        }
    }
}

/// A value of the program and, for a reduction, the shape it was reduced
/// from and the dimensions it kept (to broadcast it back).
#[derive(Clone)]
struct Val {
    id: ValueId,
    shape: Vec<i64>,
    reduced_from: Option<(Vec<i64>, Vec<i64>)>,
}

impl Val {
    fn plain(id: ValueId, shape: Vec<i64>) -> Val {
        Val {
            id,
            shape,
            reduced_from: None,
        }
    }
}

struct Weights {
    k3: ValueId,
    k1: ValueId,
    depthwise: ValueId,
    dense_flat: ValueId,
    dense: ValueId,
}

/// A recipe's numbers, read in turn (cyclically).
struct Picks<'a> {
    picks: &'a [u32; PICKS],
    at: usize,
}

impl Picks<'_> {
    /// A number below `n` (n ≥ 1).
    fn below(&mut self, n: usize) -> usize {
        let p = self.picks[self.at % PICKS] as usize;
        self.at += 1;
        p % n.max(1)
    }

    fn chance(&mut self, percent: usize) -> bool {
        self.below(100) < percent
    }

    fn of<T: Copy>(&mut self, items: &[T]) -> T {
        items[self.below(items.len())]
    }
}

struct Builder {
    b: FuncBuilder,
    pool: Vec<Val>,
    weights: Weights,
    shape: [i64; 4],
}

fn f32t(shape: &[i64]) -> TensorType {
    TensorType::new(shape.to_vec(), ElemType::F32)
}

impl Builder {
    /// A value satisfying `ok`, most often one of the three latest (chains),
    /// else any; `None` when there is none.
    fn value(&self, p: &mut Picks, ok: impl Fn(&Val) -> bool) -> Option<Val> {
        let fits: Vec<&Val> = self.pool.iter().filter(|v| ok(v)).collect();
        if fits.is_empty() {
            return None;
        }
        let k = match p.chance(70) {
            true => fits.len() - 1 - p.below(fits.len().min(3)),
            false => p.below(fits.len()),
        };
        Some(fits[k].clone())
    }

    fn rank4(&self, p: &mut Picks) -> Option<Val> {
        self.value(p, |v| v.shape.len() == 4)
    }

    /// The value built last.
    fn latest(&self) -> Val {
        self.pool.last().expect("parameters").clone()
    }

    fn add(&mut self, id: ValueId) -> ValueId {
        let shape = self.b.ty(id).shape.clone();
        self.pool.push(Val::plain(id, shape));
        id
    }

    fn push1(&mut self, kind: OpKind, operands: &[ValueId]) -> ValueId {
        let v = self
            .b
            .push1(kind, operands, None)
            .unwrap_or_else(|e| panic!("generated op does not type-check: {e}"));
        self.add(v)
    }

    fn push_with(&mut self, kind: OpKind, operands: &[ValueId], regions: Vec<Block>) -> ValueId {
        let v = self
            .b
            .push(kind, operands, regions, None)
            .unwrap_or_else(|e| panic!("generated op does not type-check: {e}"))[0];
        self.add(v)
    }

    fn scalar(&mut self, x: f64) -> ValueId {
        self.b.splat(x, TensorType::scalar(ElemType::F32))
    }

    /// `x` broadcast from `from` to `shape` along `dims` (not pooled).
    fn broadcast(&mut self, x: ValueId, shape: &[i64], dims: Vec<i64>) -> ValueId {
        self.b
            .push1(OpKind::BroadcastInDim { dims }, &[x], Some(f32t(shape)))
            .expect("broadcast")
    }

    fn splat_like(&mut self, x: f64, shape: &[i64]) -> ValueId {
        let s = self.scalar(x);
        self.broadcast(s, shape, vec![])
    }

    fn binary(&mut self, op: BinaryOp, a: ValueId, b: ValueId) -> ValueId {
        self.push1(OpKind::Binary(op), &[a, b])
    }

    /// `a op b`, a division by `|b| + 1/2`: a divisor that is a cancelled
    /// difference (Σ(x − mean)) is rounding noise, and `x · d / d` is NaN or
    /// not as the order of summation decides.
    fn combine(&mut self, op: BinaryOp, a: ValueId, b: ValueId) -> ValueId {
        if op != BinaryOp::Divide {
            return self.binary(op, a, b);
        }
        let shape = self.b.ty(b).shape.clone();
        let magnitude = self.push1(OpKind::Unary(UnaryOp::Abs), &[b]);
        let half = self.splat_like(0.5, &shape);
        let apart = self.binary(BinaryOp::Add, magnitude, half);
        self.binary(op, a, apart)
    }

    /// An add- or max-reduction of `x` over `dims`, pooled with its origin.
    fn reduce(&mut self, x: &Val, dims: Vec<i64>, op: BinaryOp) -> ValueId {
        let init = self.scalar(match op {
            BinaryOp::Maximum => f64::NEG_INFINITY,
            _ => 0.0,
        });
        let body = self
            .b
            .binary_region(op, ElemType::F32)
            .expect("reducer region");
        let kept: Vec<i64> = (0..x.shape.len() as i64)
            .filter(|d| !dims.contains(d))
            .collect();
        let v = self
            .b
            .push(OpKind::Reduce { dims }, &[x.id, init], vec![body], None)
            .unwrap_or_else(|e| panic!("generated reduce does not type-check: {e}"))[0];
        let shape = self.b.ty(v).shape.clone();
        self.pool.push(Val {
            id: v,
            shape,
            reduced_from: Some((x.shape.clone(), kept)),
        });
        v
    }

    /// Reduced dimensions: batch norm's `[0, 2, 3]` most often, else any
    /// non-empty set.
    fn reduced_dims(&self, p: &mut Picks, rank: usize) -> Vec<i64> {
        if rank == 4 && p.chance(50) {
            return vec![0, 2, 3];
        }
        let mask = 1 + p.below((1 << rank) - 1);
        (0..rank as i64).filter(|d| mask >> d & 1 == 1).collect()
    }

    /// A vector along dimension `d` of `shape`, broadcast to it: a pooled
    /// vector of that length, else a splat.
    fn along(&mut self, p: &mut Picks, shape: &[i64]) -> ValueId {
        let d = p.below(shape.len().max(1));
        let len = shape.get(d).copied().unwrap_or(1);
        match self.value(p, |v| v.shape == [len]) {
            Some(v) if !shape.is_empty() => self.broadcast(v.id, shape, vec![d as i64]),
            _ => {
                let x = 0.25 + p.below(8) as f64 * 0.25;
                self.splat_like(x, shape)
            }
        }
    }

    fn recipe(&mut self, kind: usize, p: &mut Picks) {
        match KINDS[kind] {
            "unary" => {
                let x = self.value(p, |_| true).expect("parameters");
                let op = p.of(&[
                    UnaryOp::Negate,
                    UnaryOp::Abs,
                    UnaryOp::Exponential,
                    UnaryOp::Tanh,
                    UnaryOp::Logistic,
                    UnaryOp::Sqrt,
                ]);
                // A square root of |x| (NaN everywhere says little).
                let x = match op {
                    UnaryOp::Sqrt => self.push1(OpKind::Unary(UnaryOp::Abs), &[x.id]),
                    _ => x.id,
                };
                self.push1(OpKind::Unary(op), &[x]);
            }
            "binary" => {
                let x = self.value(p, |_| true).expect("parameters");
                let y = self.value(p, |v| v.shape == x.shape).expect("x itself");
                let op = p.of(&[
                    BinaryOp::Add,
                    BinaryOp::Subtract,
                    BinaryOp::Multiply,
                    BinaryOp::Maximum,
                    BinaryOp::Minimum,
                    BinaryOp::Divide,
                ]);
                self.combine(op, x.id, y.id);
            }
            "binary with a broadcast operand" => {
                let x = self.value(p, |_| true).expect("parameters");
                let y = self.along(p, &x.shape);
                let op = p.of(&[
                    BinaryOp::Add,
                    BinaryOp::Subtract,
                    BinaryOp::Multiply,
                    BinaryOp::Divide,
                ]);
                match p.chance(50) {
                    true => self.combine(op, x.id, y),
                    false => self.combine(op, y, x.id),
                };
            }
            "add-reduction" | "max-reduction" => {
                let Some(x) = self.value(p, |v| !v.shape.is_empty()) else {
                    return;
                };
                let dims = self.reduced_dims(p, x.shape.len());
                let op = match KINDS[kind] {
                    "add-reduction" => BinaryOp::Add,
                    _ => BinaryOp::Maximum,
                };
                self.reduce(&x, dims, op);
            }
            "broadcast of a reduction back" => {
                let Some(r) = self.value(p, |v| v.reduced_from.is_some()) else {
                    return;
                };
                let (from, kept) = r.reduced_from.clone().expect("a reduction");
                let back = self.broadcast(r.id, &from, kept);
                let x = self.value(p, |v| v.shape == from);
                match x {
                    // x − mean, x / Σ, x · scale.
                    Some(x) => {
                        let op = p.of(&[BinaryOp::Subtract, BinaryOp::Divide, BinaryOp::Multiply]);
                        self.combine(op, x.id, back);
                    }
                    None => {
                        self.add(back);
                    }
                }
            }
            "reshape" => {
                let Some(x) = self.value(p, |v| v.shape.len() >= 2) else {
                    return;
                };
                let count: i64 = x.shape.iter().product();
                // Adjacent dimensions merged, or any pooled shape of as many
                // elements (a flat value back to NCHW).
                let mut targets: Vec<Vec<i64>> = (0..x.shape.len() - 1)
                    .map(|i| {
                        let mut s = x.shape.clone();
                        let m = s.remove(i + 1);
                        s[i] *= m;
                        s
                    })
                    .collect();
                for v in &self.pool {
                    if v.shape != x.shape
                        && v.shape.iter().product::<i64>() == count
                        && !targets.contains(&v.shape)
                    {
                        targets.push(v.shape.clone());
                    }
                }
                let to = targets[p.below(targets.len())].clone();
                let v = self
                    .b
                    .push1(OpKind::Reshape, &[x.id], Some(f32t(&to)))
                    .expect("reshape");
                self.add(v);
            }
            "transpose" => {
                let Some(x) = self.value(p, |v| v.shape.len() >= 2) else {
                    return;
                };
                let rank = x.shape.len();
                let permutation: Vec<i64> = match (rank, p.below(3)) {
                    (4, 0) => vec![0, 2, 3, 1],
                    (4, 1) => vec![1, 0, 2, 3],
                    _ => {
                        let mut perm: Vec<i64> = (0..rank as i64).collect();
                        let k = 1 + p.below(rank - 1);
                        perm.rotate_left(k);
                        perm
                    }
                };
                self.push1(OpKind::Transpose { permutation }, &[x.id]);
            }
            "convolution" | "input-gradient convolution" => self.convolution(p, kind == 9),
            "weight-gradient convolution" => self.weight_gradient(p),
            "pool" => {
                let Some(x) = self.rank4(p) else { return };
                let (attrs, init, op) = self.pool_window(p, &x.shape);
                let init = self.scalar(init);
                let body = self.b.binary_region(op, ElemType::F32).expect("pool body");
                let y = self.push_with(OpKind::ReduceWindow(attrs), &[x.id, init], vec![body]);
                if op == BinaryOp::Add && p.chance(50) {
                    // An average pool: the window sum divided by its size.
                    let shape = self.b.ty(y).shape.clone();
                    let k = self.splat_like(p.of(&[4.0, 9.0]), &shape);
                    self.binary(BinaryOp::Divide, y, k);
                }
            }
            "select_and_scatter" => {
                let Some(x) = self.rank4(p) else { return };
                let (attrs, ..) = self.pool_window(p, &x.shape);
                let init = self.scalar(f64::NEG_INFINITY);
                let body = self
                    .b
                    .binary_region(BinaryOp::Maximum, ElemType::F32)
                    .expect("pool body");
                let pooled = self
                    .b
                    .push(
                        OpKind::ReduceWindow(attrs.clone()),
                        &[x.id, init],
                        vec![body],
                        None,
                    )
                    .expect("max pool")[0];
                let pooled_shape = self.b.ty(pooled).shape.clone();
                // The cotangent: a pooled value of the pool's shape, else the
                // pool itself.
                let source = match self.value(p, |v| v.shape == pooled_shape) {
                    Some(v) => v.id,
                    None => self.add(pooled),
                };
                let scatter = ScatterWindowAttrs {
                    window_dimensions: attrs.window_dimensions,
                    window_strides: attrs.window_strides,
                    padding: attrs.padding,
                };
                // Built before the regions: a region's values are numbered
                // just before its op's results.
                let zero = self.scalar(0.0);
                let s = TensorType::scalar(ElemType::F32);
                let select = self
                    .b
                    .region(&[s.clone(), s], |b, a| {
                        Ok(vec![b.push1(
                            OpKind::Compare {
                                direction: CompareDirection::Ge,
                                compare_type: None,
                            },
                            &[a[0], a[1]],
                            None,
                        )?])
                    })
                    .expect("select region");
                let add = self
                    .b
                    .binary_region(BinaryOp::Add, ElemType::F32)
                    .expect("scatter region");
                self.push_with(
                    OpKind::SelectAndScatter(scatter),
                    &[x.id, source, zero],
                    vec![select, add],
                );
            }
            "relu and its mask" => {
                let x = self.value(p, |_| true).expect("parameters");
                let zero = self.splat_like(0.0, &x.shape);
                if p.chance(50) {
                    self.binary(BinaryOp::Maximum, x.id, zero);
                } else {
                    // ReLU's backward: dy where x > 0, else 0.
                    let dy = self.value(p, |v| v.shape == x.shape).expect("x itself");
                    let mask = self
                        .b
                        .push1(
                            OpKind::Compare {
                                direction: CompareDirection::Gt,
                                compare_type: None,
                            },
                            &[x.id, zero],
                            None,
                        )
                        .expect("compare");
                    self.push1(OpKind::Select, &[mask, dy.id, zero]);
                }
            }
            "batch norm" => self.batch_norm(p),
            "batch norm backward" => self.batch_norm_backward(p),
            "dense" => {
                let [n, c, h, w] = self.shape;
                let flat = vec![n, c * h * w];
                // A flattened activation, or a global pool's [N, C] (made
                // from an activation when none is at hand, as a head does).
                let base = vec![n, c, h, w];
                let (x, wt) = match p.chance(50) {
                    true => {
                        let x = match self.value(p, |v| v.shape == flat || v.shape == base) {
                            Some(x) if x.shape == base => {
                                let v = self
                                    .b
                                    .push1(OpKind::Reshape, &[x.id], Some(f32t(&flat)))
                                    .expect("flatten");
                                self.add(v)
                            }
                            Some(x) => x.id,
                            None => return,
                        };
                        (x, self.weights.dense_flat)
                    }
                    false => {
                        let x = match self.value(p, |v| v.shape == [n, c]) {
                            Some(x) if p.chance(50) => x.id,
                            _ => {
                                let Some(a) = self.value(p, |v| {
                                    v.shape.len() == 4 && v.shape[0] == n && v.shape[1] == c
                                }) else {
                                    return;
                                };
                                self.reduce(&a, vec![2, 3], BinaryOp::Add)
                            }
                        };
                        (x, self.weights.dense)
                    }
                };
                let dims = DotDims {
                    lhs_batch: vec![],
                    rhs_batch: vec![],
                    lhs_contracting: vec![1],
                    rhs_contracting: vec![0],
                };
                let y = self.push1(
                    OpKind::DotGeneral {
                        dims,
                        precision_config: None,
                    },
                    &[x, wt],
                );
                if p.chance(70) {
                    let bias = self.value(p, |v| v.shape == [c]).expect("a [C] parameter");
                    let bb = self.broadcast(bias.id, &[n, c], vec![1]);
                    self.binary(BinaryOp::Add, y, bb);
                }
            }
            "sibling sums" => {
                // Σdy and Σdy·x back to back (batch norm's backward).
                let Some(x) = self.value(p, |v| !v.shape.is_empty()) else {
                    return;
                };
                let y = self.value(p, |v| v.shape == x.shape).expect("x itself");
                let dims = self.reduced_dims(p, x.shape.len());
                self.binary(BinaryOp::Multiply, x.id, y.id);
                let xy = self.latest();
                self.reduce(&y, dims.clone(), BinaryOp::Add);
                self.reduce(&xy, dims, BinaryOp::Add);
            }
            "zero-upsampling pad" => {
                // A strided convolution's input VJP as JAX writes it: the
                // cotangent zero-upsampled by a pad with interior zeros.
                let Some(x) = self.value(p, |v| v.shape.len() == 4 && v.shape[1] == self.shape[1])
                else {
                    return;
                };
                let (lo, hi) = (p.below(3) as i64, p.below(3) as i64);
                let zero = self.scalar(0.0);
                let padded = self.push1(
                    OpKind::Pad {
                        low: vec![0, 0, lo, lo],
                        high: vec![0, 0, hi, hi],
                        interior: vec![0, 0, 1, 1],
                    },
                    &[x.id, zero],
                );
                let k = self.weights.k3;
                let reversed = self
                    .b
                    .push1(OpKind::Reverse { dims: vec![2, 3] }, &[k], None)
                    .expect("reverse");
                let shape = self.b.ty(padded).shape.clone();
                if shape[2] >= 3 && shape[3] >= 3 {
                    let attrs = ConvAttrs {
                        dims: ConvDims {
                            kernel_input_feature: 0,
                            kernel_output_feature: 1,
                            ..ConvDims::nchw(2)
                        },
                        ..ConvAttrs::plain2d()
                    };
                    self.push1(OpKind::Convolution(attrs), &[padded, reversed]);
                }
            }
            "scale by a constant" => {
                let x = self.value(p, |_| true).expect("parameters");
                // Division by a power of two (multiplied by its reciprocal),
                // by 3 (a true division), multiplication by a scalar.
                let k = p.of(&[2.0, 0.5, 3.0, 128.0, -1.5]);
                let s = self.splat_like(k, &x.shape);
                let op = p.of(&[BinaryOp::Divide, BinaryOp::Multiply]);
                self.binary(op, x.id, s);
            }
            other => unreachable!("recipe kind {other}"),
        }
    }

    /// A max or sum window over the spatial dimensions of `shape`: 2×2 or
    /// 3×3, stride 1 or 2, padding none, one-sided or both.
    fn pool_window(&self, p: &mut Picks, shape: &[i64]) -> (WindowAttrs, f64, BinaryOp) {
        let k = p.of(&[2, 3]).min(shape[2]).min(shape[3]).max(1);
        let s = p.of(&[1, 2]);
        let pad = p.of(&[(0, 0), (0, 1), (1, 1)]);
        let pad = if k == 1 { (0, 0) } else { pad };
        let (init, op) = match p.chance(70) {
            true => (f64::NEG_INFINITY, BinaryOp::Maximum),
            false => (0.0, BinaryOp::Add),
        };
        let attrs = WindowAttrs {
            window_dimensions: vec![1, 1, k, k],
            window_strides: vec![1, 1, s, s],
            base_dilations: vec![1, 1, 1, 1],
            window_dilations: vec![1, 1, 1, 1],
            padding: vec![(0, 0), (0, 0), pad, pad],
        };
        (attrs, init, op)
    }

    /// A forward convolution (3×3, 1×1 or depthwise 3×3; any stride,
    /// padding and kernel dilation), or the input-gradient form: the
    /// reversed kernel with its feature roles swapped, over a dilated input.
    fn convolution(&mut self, p: &mut Picks, input_gradient: bool) {
        let c = self.shape[1];
        let Some(x) = self.value(p, |v| v.shape.len() == 4 && v.shape[1] == c) else {
            return;
        };
        let which = if input_gradient { 0 } else { p.below(3) };
        let (kernel, k, groups) = match which {
            0 => (self.weights.k3, 3, 1),
            1 => (self.weights.k1, 1, 1),
            _ => (self.weights.depthwise, 3, c),
        };
        let stride = p.of(&[1, 1, 2]);
        let dilation = if k == 3 { p.of(&[1, 1, 2]) } else { 1 };
        let lhs_dilation = if input_gradient { p.of(&[1, 2]) } else { 1 };
        let pads = [(0, 0), (1, 1), (0, 1), (1, 0), (2, 2)];
        let pad = [p.of(&pads), p.of(&pads)];
        let pad = if p.chance(60) { [pad[0], pad[0]] } else { pad };
        // Windows must fit: padded, dilated input at least the dilated kernel.
        for (&(lo, hi), &size) in pad.iter().zip(&x.shape[2..]) {
            if lo + hi + (size - 1) * lhs_dilation + 1 < (k - 1) * dilation + 1 {
                return;
            }
        }
        let (kernel, dims) = match input_gradient {
            true => {
                let r = self
                    .b
                    .push1(OpKind::Reverse { dims: vec![2, 3] }, &[kernel], None)
                    .expect("reverse");
                let dims = ConvDims {
                    kernel_input_feature: 0,
                    kernel_output_feature: 1,
                    ..ConvDims::nchw(2)
                };
                (r, dims)
            }
            false => (kernel, ConvDims::nchw(2)),
        };
        let attrs = ConvAttrs {
            window_strides: vec![stride, stride],
            padding: pad.to_vec(),
            lhs_dilation: vec![lhs_dilation; 2],
            rhs_dilation: vec![dilation; 2],
            dims,
            feature_group_count: groups,
            ..ConvAttrs::plain2d()
        };
        let y = self.push1(OpKind::Convolution(attrs), &[x.id, kernel]);
        if p.chance(40) {
            // The convolution's bias.
            let shape = self.b.ty(y).shape.clone();
            let bias = self.value(p, |v| v.shape == [c]).expect("a [C] parameter");
            let bb = self.broadcast(bias.id, &shape, vec![1]);
            self.binary(BinaryOp::Add, y, bb);
        }
    }

    /// dW[o, i, kh, kw] = Σ x[n, i, ·]·dy[n, o, ·]: a convolution of `x`
    /// (features as batch) with `dy` (batch as input feature), the forward
    /// stride as kernel dilation.
    fn weight_gradient(&mut self, p: &mut Picks) {
        let [n, c, ..] = self.shape;
        let Some(x) = self.value(p, |v| {
            v.shape.len() == 4 && v.shape[0] == n && v.shape[1] == c
        }) else {
            return;
        };
        let Some(dy) = self.value(p, |v| {
            v.shape.len() == 4 && v.shape[0] == n && v.shape[1] == c && v.shape[2] <= x.shape[2]
        }) else {
            return;
        };
        let stride = p.of(&[1, 2]);
        let pad = p.of(&[0, 1]);
        for d in 0..2 {
            let window = (dy.shape[2 + d] - 1) * stride + 1;
            if x.shape[2 + d] + 2 * pad < window {
                return;
            }
        }
        let attrs = ConvAttrs {
            padding: vec![(pad, pad); 2],
            rhs_dilation: vec![stride; 2],
            dims: ConvDims::nchw_weight_gradient(),
            ..ConvAttrs::plain2d()
        };
        self.push1(OpKind::Convolution(attrs), &[x.id, dy.id]);
    }

    /// Batch statistics over `[0, 2, 3]`: mean, centred value, variance,
    /// x̂, and γ·x̂ + β.
    fn batch_norm(&mut self, p: &mut Picks) {
        let Some(x) = self.rank4(p) else { return };
        let s = x.shape.clone();
        let count = (s[0] * s[2] * s[3]) as f64;
        let sum = self.reduce(&x, vec![0, 2, 3], BinaryOp::Add);
        let inv_n = self.splat_like(1.0 / count, &[s[1]]);
        let mean = self.binary(BinaryOp::Multiply, sum, inv_n);
        let mean_b = self.broadcast(mean, &s, vec![1]);
        let xc = self.binary(BinaryOp::Subtract, x.id, mean_b);
        self.binary(BinaryOp::Multiply, xc, xc);
        let sq = self.latest();
        let ss = self.reduce(&sq, vec![0, 2, 3], BinaryOp::Add);
        let var = self.binary(BinaryOp::Multiply, ss, inv_n);
        let eps = self.splat_like(1e-5, &[s[1]]);
        let var_eps = self.binary(BinaryOp::Add, var, eps);
        let inv_std = self.push1(OpKind::Unary(UnaryOp::Rsqrt), &[var_eps]);
        let inv_b = self.broadcast(inv_std, &s, vec![1]);
        let xhat = self.binary(BinaryOp::Multiply, xc, inv_b);
        if s[1] == self.shape[1] && p.chance(70) {
            let gamma = self.value(p, |v| v.shape == [s[1]]).expect("γ");
            let beta = self.value(p, |v| v.shape == [s[1]]).expect("β");
            let g = self.broadcast(gamma.id, &s, vec![1]);
            let bt = self.broadcast(beta.id, &s, vec![1]);
            let y = self.binary(BinaryOp::Multiply, xhat, g);
            self.binary(BinaryOp::Add, y, bt);
        }
    }

    /// dx = (γ/σ)/M · (M·dy − Σdy − x̂·Σ(dy·x̂)), with dβ = Σdy and
    /// dγ = Σ(dy·x̂) beside it.
    fn batch_norm_backward(&mut self, p: &mut Picks) {
        let Some(xhat) = self.rank4(p) else { return };
        let s = xhat.shape.clone();
        let dy = self.value(p, |v| v.shape == s).expect("x̂ itself");
        let count = (s[0] * s[2] * s[3]) as f64;
        let dbeta = self.reduce(&dy, vec![0, 2, 3], BinaryOp::Add);
        self.binary(BinaryOp::Multiply, dy.id, xhat.id);
        let prod = self.latest();
        let dgamma = self.reduce(&prod, vec![0, 2, 3], BinaryOp::Add);
        let m = self.splat_like(count, &s);
        let mdy = self.binary(BinaryOp::Multiply, m, dy.id);
        let db = self.broadcast(dbeta, &s, vec![1]);
        let t = self.binary(BinaryOp::Subtract, mdy, db);
        let dg = self.broadcast(dgamma, &s, vec![1]);
        let xdg = self.binary(BinaryOp::Multiply, xhat.id, dg);
        let t = self.binary(BinaryOp::Subtract, t, xdg);
        let scale = self.along(p, &s);
        let t = self.binary(BinaryOp::Multiply, t, scale);
        let inv_m = self.splat_like(1.0 / count, &s);
        self.binary(BinaryOp::Multiply, t, inv_m);
    }
}
