//! `certgrad diff A.mlir B.mlir`: whether two functions compute the same
//! function — a refactor, a re-export, another code generator's render — and
//! where they part when they do not. Signatures first (argument and result
//! types in order); then both evaluated at the same seeded points in float64
//! (so f32 rounding is never mistaken for a difference), every result
//! compared; then, for a pair that differs, every intermediate value of each
//! matched by value against the other's (equal type, equal numbers at the
//! same inputs), and from the differing result back along the values with
//! no match the op of each whose operands all have a match but whose result
//! has none named, with its line and the attribute that differs. A
//! data-parallel function (`--replicas R`) is evaluated on its R replicas
//! and compared replica by replica; where such a pair parts is not
//! localised (the value matching follows one evaluation).

use anyhow::{bail, Context, Result};
use clap::Args;
use den::{eval_func, EvalOptions, Tensor, Value};
use ir::{Func, FuncResult, Module, Op, OpKind, TensorType, ValueId};
use std::collections::HashMap;
use std::path::{Path, PathBuf};

#[derive(Args)]
pub struct DiffArgs {
    /// The first .mlir file.
    pub a: PathBuf,
    /// The second .mlir file.
    pub b: PathBuf,
    /// Function of A (default: @main, else the only public function).
    #[arg(long)]
    pub func_a: Option<String>,
    /// Function of B (default: @main, else the only public function).
    #[arg(long)]
    pub func_b: Option<String>,
    /// Seed of the drawn points: one with floats uniform in [−1, 1], one in
    /// [0.05, 1] (positive, for square roots and logarithms of state).
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
    /// One .npy file per argument (the same for A and B) instead of the
    /// drawn points.
    #[arg(long, num_args = 0..)]
    pub inputs: Vec<PathBuf>,
    /// Relative difference (norm-wise per result, float64) under which two
    /// results are the same.
    #[arg(long, default_value_t = 1e-9)]
    pub tolerance: f64,
    /// Evaluate both on R replicas (a data-parallel function whose
    /// all_reduce sums over them). --inputs then holds R × (arguments)
    /// files, replica 0's first, or one set every replica takes; drawn
    /// points draw each replica's arguments apart.
    #[arg(long, value_name = "R", default_value_t = 1)]
    pub replicas: usize,
}

/// A loaded side: path, text (for quoting lines), module and function name.
struct Side {
    path: PathBuf,
    text: String,
    module: Module,
    func: String,
}

impl Side {
    fn load(path: &Path, func: Option<&str>, flag: &str) -> Result<Side> {
        let text =
            std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
        let name = path.display().to_string();
        let module = ir::parse::parse_module(&text, &name).map_err(|e| anyhow::anyhow!("{e}"))?;
        ir::verify::verify_module(&module).map_err(|e| anyhow::anyhow!("{name}: {e}"))?;
        let func = match func {
            Some(f) => {
                let f = f.trim_start_matches('@');
                if module.func(f).is_none() {
                    let names: Vec<&str> = module.funcs.iter().map(|f| f.name.as_str()).collect();
                    bail!(
                        "{name}: no function @{f} (functions: @{})",
                        names.join(", @")
                    );
                }
                f.to_string()
            }
            None => module
                .default_entry()
                .with_context(|| {
                    format!("{name}: several public functions; choose one with {flag}")
                })?
                .name
                .clone(),
        };
        Ok(Side {
            path: path.to_path_buf(),
            text,
            module,
            func,
        })
    }

    fn f(&self) -> &Func {
        self.module.func(&self.func).expect("checked when loaded")
    }

    /// `file:line` and the op's source line (its attributes), shortened.
    fn quote(&self, op: &Op) -> String {
        let line = op.loc.line().unwrap_or(0);
        let src = self
            .text
            .lines()
            .nth(line.saturating_sub(1) as usize)
            .unwrap_or("")
            .trim();
        let src: String = match src.chars().count() > 200 {
            true => src.chars().take(200).chain("…".chars()).collect(),
            false => src.to_string(),
        };
        format!("{}:{line}: {src}", self.path.display())
    }
}

/// Runs the comparison; the exit status: 0 same, 1 different.
pub fn diff(a: &DiffArgs) -> Result<u8> {
    if !(a.tolerance >= 0.0 && a.tolerance < 1.0) {
        bail!("--tolerance {}: expected a number in [0, 1)", a.tolerance);
    }
    let sa = Side::load(&a.a, a.func_a.as_deref(), "--func-a")?;
    let sb = Side::load(&a.b, a.func_b.as_deref(), "--func-b")?;
    println!("A: {} @{}", sa.path.display(), sa.func);
    println!("B: {} @{}", sb.path.display(), sb.func);
    if !same_signature(sa.f(), sb.f()) {
        println!("verdict: different signatures");
        return Ok(1);
    }
    let params = sa.f().param_types();
    let replicas = a.replicas;
    if replicas == 0 {
        bail!("--replicas must be at least 1");
    }
    // One input set per replica at each point.
    let draw_all = |seed: u64, range: (f64, f64)| -> Vec<Vec<Value<f64>>> {
        (0..replicas as u64)
            .map(|r| {
                drawn(
                    &params,
                    seed.wrapping_add(r.wrapping_mul(0x9e37_79b9)),
                    range,
                )
            })
            .collect()
    };
    let points: Vec<(String, Vec<Vec<Value<f64>>>)> = if a.inputs.is_empty() {
        vec![
            (
                format!("seed {}, floats in [-1, 1]", a.seed),
                draw_all(a.seed, (-1.0, 1.0)),
            ),
            (
                format!("seed {}, floats in [0.05, 1]", a.seed + 1),
                draw_all(a.seed + 1, (0.05, 1.0)),
            ),
        ]
    } else {
        let n = params.len();
        let shared = a.inputs.len() == n;
        if !shared && a.inputs.len() != n * replicas {
            match replicas {
                1 => bail!("--inputs: {} files for {n} arguments", a.inputs.len()),
                r => bail!(
                    "--inputs: {} files for {n} arguments on {r} replicas: give {n} (every \
                     replica takes them) or {} (replica 0's first)",
                    a.inputs.len(),
                    n * r
                ),
            }
        }
        let mut sets = Vec::with_capacity(replicas);
        for r in 0..replicas {
            let files = if shared {
                &a.inputs[..]
            } else {
                &a.inputs[r * n..(r + 1) * n]
            };
            let values = files
                .iter()
                .zip(&params)
                .enumerate()
                .map(|(i, (p, t))| engines::npy::read_argument::<f64>(p, i, t))
                .collect::<Result<Vec<_>, _>>()
                .map_err(|e| anyhow::anyhow!("{e}"))?;
            sets.push(values);
        }
        vec![("--inputs".to_string(), sets)]
    };
    // The first point and result that differ; whether any result had a
    // finite number to compare.
    let mut first_parting: Option<(usize, usize)> = None;
    let mut informative = false;
    for (k, (what, inputs)) in points.iter().enumerate() {
        let ra = evaluate(&sa, inputs.clone())?;
        let rb = evaluate(&sb, inputs.clone())?;
        println!("point {} ({what}):", k + 1);
        for i in 0..ra[0].len() {
            // The largest difference over the replicas.
            let d = ra
                .iter()
                .zip(&rb)
                .map(|(x, y)| difference(&x[i], &y[i]))
                .fold(0.0, f64::max);
            let same = d <= a.tolerance;
            if !same && first_parting.is_none() {
                first_parting = Some((k, i));
            }
            let blank = same
                && ra
                    .iter()
                    .zip(&rb)
                    .all(|(x, y)| no_finite_value(&x[i]) && no_finite_value(&y[i]));
            informative |= !blank;
            println!(
                "  result {i:<3} {:<28} {}",
                ra[0][i].ty().to_string(),
                match (same, d) {
                    _ if blank => "no finite value in either (no information)".to_string(),
                    (true, 0.0) => "same (bit for bit in float64)".to_string(),
                    (true, d) => format!("same (relative difference {d:.1e})"),
                    (false, d) if d.is_infinite() => "DIFFERENT (non-finite values apart)".into(),
                    (false, d) => format!("DIFFERENT (relative difference {d:.2e})"),
                }
            );
        }
    }
    let Some((k, output)) = first_parting else {
        if !informative {
            println!(
                "verdict: undecided (no result has a finite value at any point; try --inputs)"
            );
            return Ok(3);
        }
        println!(
            "verdict: same function at {} point{}",
            points.len(),
            if points.len() == 1 { "" } else { "s" }
        );
        return Ok(0);
    };
    if replicas > 1 {
        println!(
            "where they part: not localised on {replicas} replicas (value matching follows one \
             evaluation); diff the single-replica renders to localise"
        );
        println!("verdict: different");
        return Ok(1);
    }
    match localise(&sa, &sb, &points[k].1[0], a.tolerance, output)? {
        Some(text) => println!("{text}"),
        None => println!("where they part: not found (the differing result's value has a match in the other function)"),
    }
    println!("verdict: different");
    Ok(1)
}

/// Prints both signatures' differences; whether they are the same.
fn same_signature(fa: &Func, fb: &Func) -> bool {
    let (pa, pb) = (fa.param_types(), fb.param_types());
    let (ra, rb) = (fa.result_types(), fb.result_types());
    let mut same = true;
    for (what, x, y) in [("argument", &pa, &pb), ("result", &ra, &rb)] {
        if x.len() != y.len() {
            println!("signature: {} {what}s in A, {} in B", x.len(), y.len());
            same = false;
        }
        for (i, (s, t)) in x.iter().zip(y).enumerate() {
            if s != t {
                println!("signature: {what} {i} is {s} in A, {t} in B");
                same = false;
            }
        }
    }
    if same {
        println!(
            "signature: same ({} arguments, {} results)",
            pa.len(),
            ra.len()
        );
    }
    same
}

/// Seeded inputs: floats uniform in `range`, integers in [0, 2], i1 0 or 1.
fn drawn(params: &[TensorType], seed: u64, range: (f64, f64)) -> Vec<Value<f64>> {
    let mut rng = ir::rng::Rng::salted(seed, 0xd1ff);
    params
        .iter()
        .map(|t| {
            let shape: Vec<usize> = t.shape.iter().map(|&d| d as usize).collect();
            let n: usize = shape.iter().product();
            if t.elem.is_float() {
                let data = (0..n)
                    .map(|_| range.0 + (range.1 - range.0) * rng.unit())
                    .map(|x| ir::literal::round_to_elem(x, t.elem))
                    .collect();
                Value::Float(Tensor::new(shape, data), t.elem)
            } else {
                let hi = if t.elem == ir::ElemType::I1 { 1 } else { 2 };
                let data = (0..n).map(|_| rng.range(0, hi)).collect();
                Value::int(Tensor::new(shape, data), t.elem)
            }
        })
        .collect()
}

fn options() -> EvalOptions {
    EvalOptions::default()
}

/// Every replica's results (one input set per replica).
fn evaluate(side: &Side, inputs: Vec<Vec<Value<f64>>>) -> Result<Vec<Vec<Value<f64>>>> {
    let failed = |e: den::EvalError| anyhow::anyhow!("{}: {e}", side.path.display());
    if inputs.len() == 1 {
        let one = inputs.into_iter().next().expect("one replica");
        let e = eval_func::<f64>(&side.module, &side.func, one, &options()).map_err(failed)?;
        return Ok(vec![e.outputs]);
    }
    let all =
        den::eval_replicas::<f64>(&side.module, &side.func, inputs, &options()).map_err(failed)?;
    Ok(all.into_iter().map(|e| e.outputs).collect())
}

fn floats(v: &Value<f64>) -> Option<&[f64]> {
    match v {
        Value::Float(t, _) => Some(&t.data),
        Value::Int(..) => None,
    }
}

/// Whether a float value has no finite element (integers always have).
fn no_finite_value(x: &Value<f64>) -> bool {
    floats(x).is_some_and(|d| d.iter().all(|v| !v.is_finite()))
}

/// The norm-wise relative difference of two values of one type (0 when
/// equal, infinite when non-finite values sit apart or integers differ).
fn difference(x: &Value<f64>, y: &Value<f64>) -> f64 {
    match (x, y) {
        (Value::Float(a, _), Value::Float(b, _)) if a.shape == b.shape => {
            let (mut d, mut n) = (0f64, 0f64);
            for (&p, &q) in a.data.iter().zip(&b.data) {
                if !p.is_finite() || !q.is_finite() {
                    if !((p.is_nan() && q.is_nan()) || p == q) {
                        return f64::INFINITY;
                    }
                    continue;
                }
                d += (p - q) * (p - q);
                n += (p * p).max(q * q);
            }
            match d {
                0.0 => 0.0,
                _ => (d / n.max(f64::MIN_POSITIVE)).sqrt(),
            }
        }
        (Value::Int(a, _), Value::Int(b, _)) if a == b => 0.0,
        _ => f64::INFINITY,
    }
}

/// `f` with every float value it computes (parameters and top-level op
/// results, constants aside) reduced, right where it is defined, to two
/// scalars: Σ v·w with fixed weights w ∈ [1, 2) and Σ |v|. The function
/// returns only those, so the evaluator still drops each value after its
/// last use: a 224² net is localised in the memory of one evaluation.
/// Also: per pair of results, the op that defines the value (`None`: a
/// parameter) and its type.
fn fingerprinted(f: &Func) -> (Func, Vec<(ValueId, Option<usize>, TensorType)>) {
    let mut next = f.num_values() as u32;
    let mut fresh = |ty: TensorType| {
        next += 1;
        (ValueId(next - 1), ty)
    };
    let op = |kind: OpKind, operands: Vec<ValueId>, result: (ValueId, TensorType)| Op {
        kind,
        operands,
        results: vec![result],
        regions: Vec::new(),
        extra_attrs: Vec::new(),
        loc: Default::default(),
    };
    let splat = |x: f64| OpKind::Constant(ir::DenseData::Float(vec![x]));
    let mut body: Vec<Op> = Vec::new();
    let mut sums: Vec<ValueId> = Vec::new();
    let mut which: Vec<(ValueId, Option<usize>, TensorType)> = Vec::new();
    let mut reduce_ops =
        |v: ValueId, ty: &TensorType, body: &mut Vec<Op>, sums: &mut Vec<ValueId>| {
            let n = ty.shape.iter().product::<i64>().max(1);
            let flat = TensorType::new(vec![n], ty.elem);
            let scalar = TensorType::scalar(ty.elem);
            // One flat op into `body`: its result's id.
            let mut emit = |kind: OpKind, operands: Vec<ValueId>, body: &mut Vec<Op>| {
                let r = fresh(flat.clone());
                body.push(op(kind, operands, r.clone()));
                r.0
            };
            use ir::{BinaryOp as B, UnaryOp as U};
            let r = emit(OpKind::Reshape, vec![v], body);
            let i = emit(OpKind::Iota { dim: 0 }, vec![], body);
            let k = emit(splat(0.618_033_988_749_894_9), vec![], body);
            let p = emit(OpKind::Binary(B::Multiply), vec![i, k], body);
            let fl = emit(OpKind::Unary(U::Floor), vec![p], body);
            let fr = emit(OpKind::Binary(B::Subtract), vec![p, fl], body);
            let one = emit(splat(1.0), vec![], body);
            let w = emit(OpKind::Binary(B::Add), vec![fr, one], body);
            let prod = emit(OpKind::Binary(B::Multiply), vec![r, w], body);
            let abs = emit(OpKind::Unary(U::Abs), vec![r], body);
            let zero = fresh(scalar.clone());
            body.push(op(splat(0.0), vec![], zero.clone()));
            for x in [prod, abs] {
                let (a, b) = (fresh(scalar.clone()), fresh(scalar.clone()));
                let sum = fresh(scalar.clone());
                let add = op(
                    OpKind::Binary(ir::BinaryOp::Add),
                    vec![a.0, b.0],
                    sum.clone(),
                );
                let ret = Op {
                    kind: OpKind::Return,
                    operands: vec![sum.0],
                    results: Vec::new(),
                    ..add.clone()
                };
                let region = ir::Block {
                    args: vec![a, b],
                    ops: vec![add, ret],
                };
                let s = fresh(scalar.clone());
                body.push(Op {
                    regions: vec![region],
                    ..op(OpKind::Reduce { dims: vec![0] }, vec![x, zero.0], s.clone())
                });
                sums.push(s.0);
            }
        };
    for p in &f.params {
        if p.ty.elem.is_float() {
            reduce_ops(p.value, &p.ty, &mut body, &mut sums);
            which.push((p.value, None, p.ty.clone()));
        }
    }
    let ops = &f.body.ops[..f.body.ops.len() - 1];
    for (k, o) in ops.iter().enumerate() {
        body.push(o.clone());
        if matches!(o.kind, OpKind::Constant(_)) {
            continue;
        }
        for (v, ty) in &o.results {
            if ty.elem.is_float() {
                reduce_ops(*v, ty, &mut body, &mut sums);
                which.push((*v, Some(k), ty.clone()));
            }
        }
    }
    let ret = f.body.ops.last().expect("func.return").clone();
    let results: Vec<FuncResult> = sums
        .iter()
        .zip(which.iter().flat_map(|w| [w, w]))
        .map(|(_, (_, _, ty))| FuncResult {
            ty: TensorType::scalar(ty.elem),
            attrs: None,
        })
        .collect();
    body.push(Op {
        operands: sums,
        ..ret
    });
    let g = Func {
        results,
        body: ir::Block {
            args: f.body.args.clone(),
            ops: body,
        },
        ..f.clone()
    };
    (g, which)
}

/// A side's every float value at `inputs`: id, defining op, type, Σ v·w, Σ |v|.
type Values = Vec<(ValueId, Option<usize>, TensorType, f64, f64)>;

fn every_value_at(side: &Side, inputs: &[Value<f64>]) -> Result<Values> {
    let (g, which) = fingerprinted(side.f());
    let mut module = side.module.clone();
    let slot = module
        .funcs
        .iter_mut()
        .find(|h| h.name == side.func)
        .expect("the function");
    *slot = g;
    let outs = eval_func::<f64>(&module, &side.func, inputs.to_vec(), &options())
        .map_err(|e| anyhow::anyhow!("{}: {e}", side.path.display()))?
        .outputs;
    let scalar = |v: &Value<f64>| {
        floats(v)
            .and_then(|d| d.first().copied())
            .unwrap_or(f64::NAN)
    };
    Ok(which
        .into_iter()
        .zip(outs.chunks_exact(2))
        .map(|((v, k, ty), s)| (v, k, ty, scalar(&s[0]), scalar(&s[1])))
        .collect())
}

/// Whether two fingerprints are of the same numbers (within `tol` of the
/// values' size).
fn same_print(x: (f64, f64), y: (f64, f64), tol: f64) -> bool {
    let close = |a: f64, b: f64| (a.is_nan() && b.is_nan()) || (a - b).abs() <= tol * x.1.max(y.1);
    close(x.0, y.0) && close(x.1, y.1)
}

/// For each value of `from`, whether some value of `to` has its type and
/// its fingerprint.
fn matched(from: &Values, to: &Values, tol: f64) -> Vec<bool> {
    let mut by_type: HashMap<&TensorType, Vec<(f64, f64)>> = HashMap::new();
    for (_, _, ty, s, a) in to {
        by_type.entry(ty).or_default().push((*s, *a));
    }
    from.iter()
        .map(|(_, _, ty, s, a)| {
            by_type
                .get(ty)
                .is_some_and(|c| c.iter().any(|&y| same_print((*s, *a), y, tol)))
        })
        .collect()
}

/// Where `side` parts from the other: from its result `output` (which
/// differs), back through values with no match in the other — at each op
/// into its unmatched operand computed by the most ops in a row (the data
/// path, not a parameter's broadcast the other side never forms) — to the
/// op whose operands all have matches and whose result has none.
fn culprit<'s>(side: &'s Side, values: &Values, hit: &[bool], output: usize) -> Option<&'s Op> {
    let f = side.f();
    let ops = &f.body.ops;
    // Per float value id: whether it has a match.
    let mut ok: HashMap<ValueId, bool> = HashMap::new();
    let mut at = 0;
    for p in f.params.iter().filter(|p| p.ty.elem.is_float()) {
        ok.insert(p.value, hit[at]);
        at += 1;
    }
    // Per op result: its op, and its depth (ops on the longest path from
    // the parameters).
    let mut def: HashMap<ValueId, usize> = HashMap::new();
    let mut depth: HashMap<ValueId, usize> = HashMap::new();
    for (k, o) in ops.iter().enumerate() {
        let d = 1 + o
            .operands
            .iter()
            .filter_map(|v| depth.get(v))
            .max()
            .copied()
            .unwrap_or(0);
        for (v, ty) in &o.results {
            def.insert(*v, k);
            depth.insert(*v, d);
            if ty.elem.is_float() && !matches!(o.kind, OpKind::Constant(_)) {
                debug_assert_eq!(values[at].1, Some(k));
                ok.insert(*v, hit[at]);
                at += 1;
            }
        }
    }
    let unmatched = |v: &ValueId| ok.get(v) == Some(&false) && def.contains_key(v);
    let mut v = *ops.last()?.operands.get(output)?;
    if !unmatched(&v) {
        return None;
    }
    loop {
        let op = &ops[def[&v]];
        match op
            .operands
            .iter()
            .filter(|o| unmatched(o))
            .max_by_key(|o| (depth[*o], def[*o]))
        {
            Some(next) => v = *next,
            None => return Some(op),
        }
    }
}

/// The ops of a side whose float operands all have matches (constants and
/// integers aside) and some float result of which has none, in order.
fn boundary<'s>(side: &'s Side, values: &Values, hit: &[bool]) -> Vec<&'s Op> {
    let ok: HashMap<ValueId, bool> = values.iter().zip(hit).map(|(v, h)| (v.0, *h)).collect();
    side.f()
        .body
        .ops
        .iter()
        .filter(|o| !matches!(o.kind, OpKind::Constant(_)))
        .filter(|o| o.results.iter().any(|(v, _)| ok.get(v) == Some(&false)))
        .filter(|o| {
            o.operands
                .iter()
                .all(|v| ok.get(v).copied().unwrap_or(true))
        })
        .collect()
}

/// The first op of A and an op of B that part from the same operands: the
/// same kind of op, each float operand of one the same numbers as the
/// other's (constants and integers taken as alike), each result new to
/// the other side — a changed attribute or constant, not a rewriting.
fn counterparts<'s>(
    sa: &'s Side,
    va: &Values,
    ha: &[bool],
    sb: &'s Side,
    vb: &Values,
    hb: &[bool],
    tol: f64,
) -> Option<(&'s Op, &'s Op)> {
    let prints = |v: &Values| -> HashMap<ValueId, (f64, f64)> {
        v.iter().map(|x| (x.0, (x.3, x.4))).collect()
    };
    let (pa, pb) = (prints(va), prints(vb));
    let (ba, bb) = (boundary(sa, va, ha), boundary(sb, vb, hb));
    ba.into_iter().find_map(|a| {
        let b = bb.iter().find(|b| {
            b.kind.name() == a.kind.name()
                && b.operands.len() == a.operands.len()
                && a.operands
                    .iter()
                    .zip(&b.operands)
                    .all(|(x, y)| match (pa.get(x), pb.get(y)) {
                        (Some(&p), Some(&q)) => same_print(p, q, tol),
                        (None, None) => true,
                        _ => false,
                    })
        })?;
        Some((a, *b))
    })
}

/// Where A and B part at `inputs`: the first op of each whose result the
/// other never computes; `None` when every value of A has a match.
fn localise(
    sa: &Side,
    sb: &Side,
    inputs: &[Value<f64>],
    tol: f64,
    output: usize,
) -> Result<Option<String>> {
    let va = match every_value_at(sa, inputs) {
        Ok(v) => v,
        Err(e) => return Ok(Some(format!("where they part: not localised ({e})"))),
    };
    let vb = match every_value_at(sb, inputs) {
        Ok(v) => v,
        Err(e) => return Ok(Some(format!("where they part: not localised ({e})"))),
    };
    // Fingerprints compared at a tolerance a little above the results' own:
    // a sum in another order differs by rounding of its terms' size.
    let tol = tol.max(1e-12) * 10.0;
    let ha = matched(&va, &vb, tol);
    let hb = matched(&vb, &va, tol);
    let (a, b) = match counterparts(sa, &va, &ha, sb, &vb, &hb, tol) {
        Some((a, b)) => (a, Some(b)),
        None => match culprit(sa, &va, &ha, output) {
            Some(a) => (a, culprit(sb, &vb, &hb, output)),
            None => return Ok(None),
        },
    };
    let mut text = format!(
        "where they part (back from result {output}: the op whose operands the other side computes too, and whose value it never does):\n  A {}",
        sa.quote(a)
    );
    match b {
        Some(b) => {
            text.push_str(&format!("\n  B {}", sb.quote(b)));
            if let Some((x, y)) = apart(&sa.quote(a), &sb.quote(b)) {
                text.push_str(&format!("\n  A has `{x}` where B has `{y}`"));
            }
        }
        None => text.push_str("\n  B (every value of B has a match in A)"),
    }
    Ok(Some(text))
}

/// The part of two quoted lines between their common start and end (from
/// the op's text on: after the file and line), when both parts are short.
fn apart(a: &str, b: &str) -> Option<(String, String)> {
    let strip = |q: &str| -> Vec<char> { q.splitn(3, ':').nth(2).unwrap_or("").chars().collect() };
    let (x, y) = (strip(a), strip(b));
    let head = x.iter().zip(&y).take_while(|(p, q)| p == q).count();
    let tail = x[head..]
        .iter()
        .rev()
        .zip(y[head..].iter().rev())
        .take_while(|(p, q)| p == q)
        .count();
    let (u, v) = (
        whole_attribute(&x, head, x.len() - tail),
        whole_attribute(&y, head, y.len() - tail),
    );
    let short = |s: &str| !s.is_empty() && s.chars().count() <= 80;
    (short(&u) && short(&v)).then_some((u, v))
}

/// `line[from..to]` widened to the `name = value` it lies in: back to the
/// last `=` before it and the word before that, on to the end of the value
/// (its brackets closed, else the next space).
fn whole_attribute(line: &[char], from: usize, to: usize) -> String {
    let Some(eq) = line[..from].iter().rposition(|&c| c == '=') else {
        return line[from..to].iter().collect();
    };
    let mut start = eq;
    while start > 0 && line[start - 1] == ' ' {
        start -= 1;
    }
    while start > 0 && !matches!(line[start - 1], ' ' | '{' | '(' | ',') {
        start -= 1;
    }
    let mut end = eq + 1;
    while end < line.len() && line[end] == ' ' {
        end += 1;
    }
    let mut depth = 0i32;
    while end < line.len() {
        match line[end] {
            '[' | '{' | '(' | '<' => depth += 1,
            ']' | '}' | ')' | '>' => depth -= 1,
            ' ' | ',' if depth <= 0 => break,
            _ => {}
        }
        end += 1;
        if depth == 0 && end >= to && matches!(line[end - 1], ']' | '}' | ')' | '>') {
            break;
        }
    }
    line[start..end.max(to)].iter().collect()
}
