//! The compiled plan held to the evaluator on random programs of its own op
//! set (`ir::testgen::Planned`: convolutions in every form, batch norm and
//! ReLU forward and backward, reductions over any axes and their broadcasts
//! back, views, pools, select_and_scatter, dense layers), and each of the
//! plan's rewrites held to the same judge with a planted bug as its
//! negative control.
//!
//! The judge: per output, the plan's f32 error against the float64
//! evaluation of the same program at the same inputs may be at most 8× the
//! largest of three f32 noise levels — the errors of the evaluator's two f32
//! paths (generic, in the spec's order; fast kernels, held to the generic
//! path by den's own tests), and how far the float64 result moves when every
//! input moves by one f32 rounding (so an output that cancels, such as
//! Σ(x − mean), has a noise level), plus, for an output that is a sum,
//! one rounding of every summand (2⁻²⁴·Σ|x|: a cancelling sum's summands
//! carry correlated rounding, such as one rounded mean shifting every x̂) —
//! plus 1e-6 of the output's norm (or of an output of the inputs'
//! size, for outputs whose truth is 0 by symmetry). The plan's value must be finite
//! where the f32 evaluator's and the float64 value are; where either is not
//! (f32's range left, on the way or at the end), no f32 value is right and
//! the element is no verdict. A program with a near tie — a decision (pool
//! winner, maximum, comparison) whose float64 margin is not 0 but within the
//! f32 noise of what it compares — is no verdict either: two right f32
//! evaluations may take different branches there (σ rounding to 1.0 in one
//! kernel and to 1 − 2⁻²⁴ in the other moves a pool's scattered gradient).
//! Exact ties are judged: every precision breaks them by the op's rule. A
//! wrong sum, a lost bias or a stale buffer is off by far more than rounding.
//!
//! The fuzz test runs for a bounded time (`CERTGRAD_PLAN_FUZZ_SECONDS`,
//! default 20) from a seed it prints (`CERTGRAD_PLAN_FUZZ_SEED` replays
//! one), and shrinks a failure to a small program before it reports it.

use super::agreement::random_inputs;
use den::{eval_func, EvalOptions, Tensor, Value};
use exec::{Plan, Planted, Rewrites};
use ir::testgen::Planned;
use ir::{BinaryOp, Func, FuncResult, Module, Op, OpKind, TensorType, ValueId};
use std::io::Write;
use std::time::{Duration, Instant};

fn module(f: Func) -> Module {
    Module {
        name: None,
        attrs: None,
        funcs: vec![f],
    }
}

fn generic() -> EvalOptions {
    EvalOptions {
        fast: false,
        ..EvalOptions::default()
    }
}

fn widened(v: &Value<f32>, nudge: &mut impl FnMut() -> f64) -> Value<f64> {
    match v {
        Value::Float(t, e) => Value::Float(
            Tensor::new(
                t.shape.clone(),
                t.data.iter().map(|&x| x as f64 * (1.0 + nudge())).collect(),
            ),
            *e,
        ),
        Value::Int(t, e) => Value::Int(t.clone(), *e),
    }
}

/// ±2⁻²⁴ (one f32 rounding) in a fixed pseudo-random pattern.
fn rounding_pattern(seed: u64) -> impl FnMut() -> f64 {
    let mut s = seed | 1;
    move || {
        s ^= s << 13;
        s ^= s >> 7;
        s ^= s << 17;
        match s & 1 {
            0 => f64::EPSILON * (1u64 << 28) as f64,
            _ => -f64::EPSILON * (1u64 << 28) as f64,
        }
    }
}

fn floats<S: Copy>(v: &Value<S>) -> Option<&[S]> {
    match v {
        Value::Float(t, _) => Some(&t.data),
        Value::Int(..) => None,
    }
}

/// Why `got` is not `want32`'s function within rounding (module docs), if
/// it is not: `truth` the float64 evaluation, `moved` the float64 evaluation
/// at inputs moved by one rounding.
fn misjudged(got: &[Value<f32>], refs: &References, input_scale: f64) -> Option<String> {
    let [want32, fast32] = &refs.f32s;
    let (truth, moved) = (&refs.truth, &refs.moved);
    if got.len() != want32.len() {
        return Some(format!(
            "{} outputs, the evaluator {}",
            got.len(),
            want32.len()
        ));
    }
    for (k, ((((a, b), c), t), m)) in got
        .iter()
        .zip(want32)
        .zip(fast32)
        .zip(truth)
        .zip(moved)
        .enumerate()
    {
        if a.ty() != b.ty() {
            return Some(format!("output {k}: type {} vs {}", a.ty(), b.ty()));
        }
        let (Some(a), Some(b), Some(c), Some(t), Some(m)) =
            (floats(a), floats(b), floats(c), floats(t), floats(m))
        else {
            if a != b {
                return Some(format!("output {k}: integer outputs differ"));
            }
            continue;
        };
        let (mut ea, mut eb, mut ec, mut em, mut nt) = (0f64, 0f64, 0f64, 0f64, 0f64);
        for i in 0..a.len() {
            let (p, q) = (a[i], b[i]);
            // Past f32's range, or where the f32 evaluator overflowed on the
            // way, no f32 result is right: no verdict on that element.
            let representable = |x: f64| x.is_finite() && x.abs() <= f32::MAX as f64;
            if !representable(t[i]) || !representable(m[i]) || !q.is_finite() {
                let same = (p.is_nan() && q.is_nan()) || p == q;
                if !same && representable(t[i]) && q.is_finite() {
                    return Some(format!("output {k}, element {i}: plan {p}, evaluator {q}"));
                }
                continue;
            }
            // An element that the f32 evaluator or one input rounding moves
            // by a quarter of its size is rounding noise (a division by a
            // cancelled difference): a non-finite plan value there is no
            // verdict either.
            let noise = (q as f64 - t[i]).abs().max((m[i] - t[i]).abs());
            let noise = match c[i].is_finite() {
                true => noise.max((c[i] as f64 - t[i]).abs()),
                false => noise,
            };
            if !p.is_finite() && noise > 0.25 * t[i].abs() {
                continue;
            }
            if !p.is_finite() {
                return Some(format!(
                    "output {k}, element {i}: plan {p}, evaluator {q}, float64 {}",
                    t[i]
                ));
            }
            ea += (p as f64 - t[i]).powi(2);
            eb += (q as f64 - t[i]).powi(2);
            if c[i].is_finite() {
                ec += (c[i] as f64 - t[i]).powi(2);
            }
            em += (m[i] - t[i]).powi(2);
            nt += t[i] * t[i];
        }
        let (ea, eb, ec, em, nt) = (ea.sqrt(), eb.sqrt(), ec.sqrt(), em.sqrt(), nt.sqrt());
        // 1e-6 of the output's norm, or of an output as large as the inputs
        // (an output whose truth is 0 by symmetry, e.g. Σ x̂·(x − μ)² over
        // two values, is a few roundings of its terms in any other order).
        let floor = 1e-6 * nt.max((a.len() as f64).sqrt() * input_scale);
        let allowed = 8.0 * eb.max(ec).max(em) + refs.summands[k] + floor;
        if ea > allowed {
            return Some(format!(
                "output {k}: the plan's error {ea:.3e} against float64 exceeds {allowed:.3e} \
                 (the f32 evaluators' {eb:.3e} and {ec:.3e}, one input rounding moves it \
                 {em:.3e}, its summands' rounding {:.3e}, |truth| {nt:.3e})",
                refs.summands[k]
            ));
        }
    }
    None
}

/// The references of `m` at `seed`'s inputs: the inputs, the f32 generic
/// evaluation, the float64 one and the float64 one at moved inputs.
struct References {
    inputs: Vec<Value<f32>>,
    /// The generic f32 evaluator's outputs, then the fast kernels' ones.
    f32s: [Vec<Value<f32>>; 2],
    truth: Vec<Value<f64>>,
    moved: Vec<Value<f64>>,
    /// Per output: one f32 rounding of every summand, 2⁻²⁴·Σ|x|, when the
    /// output is an add-reduction of x (0 otherwise).
    summands: Vec<f64>,
}

/// `f` returning its parameters and every value its ops compute, where its
/// own results are among them, and which value each result is.
fn every_value(f: &Func) -> (Func, Vec<usize>, Vec<ValueId>) {
    let mut g = f.clone();
    let ret = g.body.ops.pop().expect("func.return");
    let params = g.params.iter().map(|p| (p.value, p.ty.clone()));
    let values: Vec<(ValueId, TensorType)> = params
        // Constants (a max-reduction's −∞ init) are no computed values.
        .chain(
            g.body
                .ops
                .iter()
                .filter(|op| !matches!(op.kind, OpKind::Constant(_)))
                .flat_map(|op| op.results.clone()),
        )
        .collect();
    let at = ret
        .operands
        .iter()
        .map(|r| {
            values
                .iter()
                .position(|(v, _)| v == r)
                .expect("a computed result")
        })
        .collect();
    g.results = values
        .iter()
        .map(|(_, ty)| FuncResult {
            ty: ty.clone(),
            attrs: None,
        })
        .collect();
    let ids: Vec<ValueId> = values.iter().map(|(v, _)| *v).collect();
    g.body.ops.push(Op {
        operands: ids.clone(),
        ..ret
    });
    (g, at, ids)
}

/// How many ops `op`'s regions hold, nested ones included (the evaluator
/// numbers ops in pre-order).
fn region_ops(op: &Op) -> usize {
    op.regions
        .iter()
        .flat_map(|b| &b.ops)
        .map(|o| 1 + region_ops(o))
        .sum()
}

/// 2⁻²⁴·Σ|x| when `value` is an add-reduction of x in `f` (0 otherwise):
/// the first-order effect of one f32 rounding of every summand, in any
/// order. A sum that cancels (Σ x̂ of a normalised x, truth ≈ 0) carries
/// that much noise from its summands' own rounding, and the summands'
/// errors can be correlated (one rounded mean shifts every x̂ alike), so
/// two right f32 evaluations may differ by it whatever the evaluator's own
/// error happened to be.
fn summand_rounding(f: &Func, ids: &[ValueId], every64: &[Value<f64>], value: ValueId) -> f64 {
    let Some(op) = f
        .body
        .ops
        .iter()
        .find(|op| op.results.iter().any(|(v, _)| *v == value))
    else {
        return 0.0;
    };
    let adds = op.regions.first().is_some_and(|b| {
        b.ops
            .iter()
            .any(|o| matches!(o.kind, OpKind::Binary(BinaryOp::Add)))
    });
    if !matches!(op.kind, OpKind::Reduce { .. }) || !adds {
        return 0.0;
    }
    let Some(k) = ids.iter().position(|v| *v == op.operands[0]) else {
        return 0.0;
    };
    floats(&every64[k]).map_or(0.0, |x| {
        x.iter().map(|x| x.abs()).sum::<f64>() * f32::EPSILON as f64 / 2.0
    })
}

/// A decision of `f` that f32 rounding can take either way, if there is
/// one: a maximum, pool window, comparison or select whose float64 margin
/// is not 0 (an exact tie is broken by the op's rule in every precision) but
/// within 16× the f32 noise of the values it compares — the f32 evaluator's
/// error on them, or one rounding of their size. There, two right f32
/// evaluations can pick different branches (a pool's winner, a scattered
/// gradient's position), so no f32 value is the judge's: no verdict.
/// `every32`/`every64` hold the values `ids` names.
fn near_tie(
    f: &Func,
    ids: &[ValueId],
    every32: &[Value<f32>],
    every64: &den::Evaluation<f64>,
) -> Option<String> {
    let noise = |v: &ValueId| {
        let k = ids.iter().position(|w| w == v)?;
        let (a, t) = (floats(&every32[k])?, floats(&every64.outputs[k])?);
        Some(a.iter().zip(t).fold(0f64, |m, (&a, &t)| {
            m.max((a as f64 - t).abs())
                .max(t.abs() * f32::EPSILON as f64 / 2.0)
        }))
    };
    let mut first = 0;
    for op in &f.body.ops {
        let last = first + region_ops(op);
        let noise = op.operands.iter().filter_map(noise).fold(0f64, f64::max);
        if let Some(m) = every64.margins.iter().find(|m| {
            (first..=last).contains(&m.op_index) && m.near.is_finite() && m.near <= 16.0 * noise
        }) {
            return Some(format!(
                "{NEAR_TIE}: {} decides by {:.1e}, its operands' f32 noise is {noise:.1e}",
                m.op, m.near
            ));
        }
        first = last + 1;
    }
    None
}

/// Whether every float of `values` is finite and far inside f32's range.
fn in_range(values: &[Value<f32>]) -> bool {
    values
        .iter()
        .filter_map(floats)
        .all(|d| d.iter().all(|x| x.abs() < 1e30))
}

/// The references of `m` at `seed`'s inputs; an error when the evaluator
/// refuses the program or the f32 evaluation leaves f32's comfortable range
/// anywhere on the way (an overflowed intermediate makes `0 · inf` and
/// `inf − inf` of the order of evaluation: no verdict).
fn references(m: &Module, seed: u64) -> Result<References, String> {
    let params: Vec<TensorType> = m.funcs[0].params.iter().map(|p| p.ty.clone()).collect();
    references_at(m, random_inputs(&params, seed), seed)
}

/// The references of `m` at `inputs` (`seed` picks the rounding pattern).
fn references_at(m: &Module, inputs: Vec<Value<f32>>, seed: u64) -> Result<References, String> {
    let f = &m.funcs[0];
    let (all, at, ids) = every_value(f);
    let all = module(all);
    let every = eval_func::<f32>(&all, "main", inputs.clone(), &generic())
        .map_err(|e| format!("the f32 evaluator fails: {e}"))?
        .outputs;
    if !in_range(&every) {
        return Err(OUT_OF_RANGE.into());
    }
    let exact: Vec<Value<f64>> = inputs.iter().map(|v| widened(v, &mut || 0.0)).collect();
    let margins = EvalOptions {
        record_margins: true,
        ..generic()
    };
    let every64 = eval_func::<f64>(&all, "main", exact, &margins)
        .map_err(|e| format!("the f64 evaluator fails: {e}"))?;
    if let Some(why) = near_tie(&all.funcs[0], &ids, &every, &every64) {
        return Err(why);
    }
    let truth = at.iter().map(|&k| every64.outputs[k].clone()).collect();
    let summands = at
        .iter()
        .map(|&k| summand_rounding(&all.funcs[0], &ids, &every64.outputs, ids[k]))
        .collect();
    let f32_run = |opts: &EvalOptions| {
        eval_func::<f32>(m, "main", inputs.clone(), opts)
            .map(|e| e.outputs)
            .map_err(|e| format!("the f32 evaluator fails: {e}"))
    };
    let generic32 = at.iter().map(|&k| every[k].clone()).collect();
    let f32s = [generic32, f32_run(&EvalOptions::default())?];
    let mut nudge = rounding_pattern(seed);
    let moved_in: Vec<Value<f64>> = inputs.iter().map(|v| widened(v, &mut nudge)).collect();
    let moved = eval_func::<f64>(m, "main", moved_in, &generic())
        .map_err(|e| format!("the f64 evaluator fails: {e}"))?
        .outputs;
    Ok(References {
        inputs,
        f32s,
        truth,
        moved,
        summands,
    })
}

/// Why the plan of `m` compiled with `rewrites` is wrong at `seed`'s
/// inputs, if it is (run twice: the second run reuses pooled buffers).
fn plan_error(m: &Module, rewrites: Rewrites, refs: &References) -> Option<String> {
    let mut plan = match Plan::compile_with(m, "main", rewrites) {
        Ok(p) => p,
        Err(e) => return Some(format!("the plan does not compile: {e}")),
    };
    for run in ["", " (second run)"] {
        match plan.run(refs.inputs.clone()) {
            Ok(got) => {
                let scale = refs
                    .inputs
                    .iter()
                    .filter_map(floats)
                    .flatten()
                    .fold(0f64, |m, &x| m.max((x as f64).abs()));
                if let Some(e) = misjudged(&got, refs, scale) {
                    return Some(format!("{e}{run}"));
                }
            }
            Err(e) => return Some(format!("the plan fails where the evaluator runs: {e}{run}")),
        }
    }
    None
}

/// Why a program is no verdict on the plan: its f32 values overflow.
const OUT_OF_RANGE: &str = "out of f32's range";
/// Why a program is no verdict on the plan: rounding decides a branch.
const NEAR_TIE: &str = "a near tie";

/// The plan's error on `program` at `seed`: `Err` when the program is no
/// verdict (the evaluator refuses it, or its values overflow).
fn program_error(
    program: &Planned,
    rewrites: Rewrites,
    seed: u64,
) -> Result<Option<String>, String> {
    let m = module(program.build());
    let refs = references(&m, seed)?;
    Ok(plan_error(&m, rewrites, &refs))
}

/// Whether the plan is wrong on `program` (a program that is no verdict is
/// not wrong).
fn wrong(program: &Planned, rewrites: Rewrites, seed: u64) -> bool {
    matches!(program_error(program, rewrites, seed), Ok(Some(_)))
}

/// `program` shrunk while the plan stays wrong on it (for at most
/// `budget`), and the report: seed, the small program's text, the error.
fn shrunk_report(program: &Planned, rewrites: Rewrites, seed: u64, budget: Duration) -> String {
    let start = Instant::now();
    let small = program.shrink(|f| {
        start.elapsed() < budget && {
            let m = module(f.clone());
            references(&m, seed).is_ok_and(|refs| plan_error(&m, rewrites, &refs).is_some())
        }
    });
    let error = program_error(&small, rewrites, seed)
        .ok()
        .flatten()
        .unwrap_or_default();
    // Bisection: the rewrites whose switching off makes the plan right.
    let culprits: Vec<&str> = Rewrites::NAMES
        .into_iter()
        .filter(|name| {
            let without = rewrites.without(name).expect("a rewrite's name");
            !wrong(&small, without, seed)
        })
        .collect();
    format!(
        "program seed {seed} ({} recipes, shrunk to {}): {error}\n\
         right with one rewrite off: {culprits:?}\n{}",
        program.recipes.len(),
        small.recipes.len(),
        ir::print::print_module(&module(small.build()))
    )
}

/// Says `line` on the test's real stderr (libtest captures `eprintln!` of a
/// passing test): the seed must show in CI's log.
fn say(line: &str) {
    let _ = writeln!(std::io::stderr(), "{line}");
}

const MAX_RECIPES: usize = 14;

#[test]
fn the_plan_agrees_with_the_evaluator_on_random_programs() {
    let seconds: f64 = std::env::var("CERTGRAD_PLAN_FUZZ_SECONDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(20.0);
    let base: u64 = std::env::var("CERTGRAD_PLAN_FUZZ_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| {
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.as_secs() % 1_000_000)
                .unwrap_or(0)
                * 1000
        });
    say(&format!(
        "plan fuzz: programs from seed {base} for {seconds} s (replay: CERTGRAD_PLAN_FUZZ_SEED={base})"
    ));
    let start = Instant::now();
    let (mut n, mut overflowed, mut near_ties) = (0u64, 0u64, 0u64);
    while n == 0 || start.elapsed().as_secs_f64() < seconds {
        let seed = base + n;
        let program = Planned::draw(seed, MAX_RECIPES);
        let verdict = program_error(&program, Rewrites::ALL, seed);
        match &verdict {
            Err(why) if why.starts_with(NEAR_TIE) => near_ties += 1,
            Err(_) => overflowed += 1,
            Ok(_) => {}
        }
        if matches!(verdict, Ok(Some(_))) {
            let report = shrunk_report(&program, Rewrites::ALL, seed, Duration::from_secs(120));
            panic!("the plan disagrees with the evaluator (replay: CERTGRAD_PLAN_FUZZ_SEED={seed}):\n{report}");
        }
        n += 1;
    }
    say(&format!(
        "plan fuzz: {} programs from seed {base} agree; no verdict on {overflowed} that \
         overflowed f32 and {near_ties} with a near tie ({:.1} s)",
        n - overflowed - near_ties,
        start.elapsed().as_secs_f64()
    ));
    assert!(
        (overflowed + near_ties) * 4 <= n,
        "no verdict on {overflowed} of {n} programs that overflowed and {near_ties} with a \
         near tie: the generator's values grow too fast or tie too often"
    );
}

/// The fuzzer finds the storing reduction that wrote before it summed (the
/// defect a residual block's backward exposed) and shrinks it to a few ops.
#[test]
fn the_fuzzer_finds_and_shrinks_a_planted_bug() {
    let planted = Rewrites {
        planted: Some(Planted::StoresBeforeSums),
        ..Rewrites::ALL
    };
    let found = (0..400u64).find_map(|seed| {
        let program = Planned::draw(seed, MAX_RECIPES);
        wrong(&program, planted, seed).then_some((seed, program))
    });
    let (seed, program) = found.expect("400 programs and the planted bug never showed");
    let start = Instant::now();
    let small = program.shrink(|f| {
        start.elapsed() < Duration::from_secs(120) && {
            let m = module(f.clone());
            references(&m, seed).is_ok_and(|refs| plan_error(&m, planted, &refs).is_some())
        }
    });
    assert!(wrong(&small, planted, seed));
    assert!(matches!(
        program_error(&small, Rewrites::ALL, seed),
        Ok(None)
    ));
    let ops = small.build().body.ops.len();
    assert!(
        ops <= 12,
        "shrunk to {ops} ops:\n{}",
        ir::print::print_module(&module(small.build()))
    );
}

/// The programs the rewrite tests draw.
const REWRITE_SEEDS: std::ops::Range<u64> = 0..300;

fn listing(m: &Module, rewrites: Rewrites) -> Vec<String> {
    Plan::compile_with(m, "main", rewrites)
        .expect("the plan compiles")
        .listing()
}

/// The rewrites documented to change no bit of any value (the others sum
/// in another order: `conv_upsample` skips the inserted zeros,
/// `conv_moments` combines per-plane moments in f64).
const BIT_IDENTICAL: [&str; 6] = [
    "cse",
    "conv_bias",
    "dot_bias",
    "sum_in_producer",
    "sibling_reductions",
    "in_place",
];

/// Each rewrite, on the programs where it changes the plan, gives a plan
/// the judge accepts, as does the plan without it — bit for bit the same
/// values where the rewrite claims so — and it changes the plan of enough
/// programs for that to mean something.
#[test]
fn each_rewrite_keeps_the_function() {
    let mut fired = [0usize; Rewrites::NAMES.len()];
    for seed in REWRITE_SEEDS {
        let program = Planned::draw(seed, MAX_RECIPES);
        let m = module(program.build());
        let Ok(refs) = references(&m, seed) else {
            continue;
        };
        let all = listing(&m, Rewrites::ALL);
        if let Some(e) = plan_error(&m, Rewrites::ALL, &refs) {
            panic!("seed {seed}: {e}");
        }
        // Bits are compared among the rewrites that keep them: a rewrite
        // switched off can also switch off an order-changing one downstream
        // (an unfolded bias leaves batch norm's sums to a loop, not to the
        // convolution's moments).
        let keeping = Rewrites {
            conv_upsample: false,
            conv_moments: false,
            ..Rewrites::ALL
        };
        let bits = |r: Rewrites| -> Vec<Vec<u32>> {
            let mut plan = Plan::compile_with(&m, "main", r).expect("the plan compiles");
            let got = plan.run(refs.inputs.clone()).expect("the plan runs");
            got.iter()
                .map(|x| {
                    floats(x)
                        .unwrap_or(&[])
                        .iter()
                        .map(|f| f.to_bits())
                        .collect()
                })
                .collect()
        };
        for (k, name) in Rewrites::NAMES.into_iter().enumerate() {
            let without = Rewrites::ALL.without(name).expect("a rewrite");
            if listing(&m, without) == all {
                continue;
            }
            fired[k] += 1;
            if let Some(e) = plan_error(&m, without, &refs) {
                panic!("seed {seed}, without {name}: {e}");
            }
            if BIT_IDENTICAL.contains(&name) {
                let without = keeping.without(name).expect("a rewrite");
                assert!(
                    bits(without) == bits(keeping),
                    "seed {seed}: {name} changed bits\n{}",
                    ir::print::print_module(&m)
                );
            }
        }
    }
    say(&format!(
        "rewrites changing the plans of {} programs: {:?}",
        REWRITE_SEEDS.end - REWRITE_SEEDS.start,
        Rewrites::NAMES.iter().zip(fired).collect::<Vec<_>>()
    ));
    for (name, n) in Rewrites::NAMES.iter().zip(fired) {
        assert!(
            n >= 5,
            "{name} changed only {n} plans: the generator misses it"
        );
    }
}

/// The negative controls: a bug planted in each rewrite makes the plan of
/// some program wrong, and the judge says so.
#[test]
fn a_bug_planted_in_each_rewrite_is_caught() {
    for (bug, name) in Planted::ALL {
        let planted = Rewrites {
            planted: Some(bug),
            ..Rewrites::ALL
        };
        let caught = REWRITE_SEEDS.clone().find(|&seed| {
            let program = Planned::draw(seed, MAX_RECIPES);
            wrong(&program, planted, seed)
        });
        match caught {
            Some(seed) => say(&format!("planted {bug:?} ({name}): caught at seed {seed}")),
            None => panic!("{bug:?} planted in {name} was never caught"),
        }
    }
}

/// A max pool's backward over σ(x): where two window entries are 1e-4 apart
/// at x ≈ 20 (both σ round to 1 in f32, float64 still orders them) two
/// right f32 evaluations may scatter to different positions, and the judge
/// gives no verdict; where they are equal (an exact tie, broken by the
/// select rule in every precision) it judges, and the plan scatters where
/// the evaluator does.
#[test]
fn a_near_tie_is_no_verdict_and_an_exact_tie_is_judged() {
    let text = "func.func @main(%x: tensor<1x4xf32>) -> tensor<1x4xf32> {
  %s = stablehlo.logistic %x : tensor<1x4xf32>
  %z = stablehlo.constant dense<0.0> : tensor<f32>
  %g = stablehlo.constant dense<1.0> : tensor<1x2xf32>
  %r = \"stablehlo.select_and_scatter\"(%s, %g, %z) <{window_dimensions = array<i64: 1, 2>, window_strides = array<i64: 1, 2>}> ({
  ^bb0(%a: tensor<f32>, %b: tensor<f32>):
    %c = stablehlo.compare GE, %a, %b : (tensor<f32>, tensor<f32>) -> tensor<i1>
    stablehlo.return %c : tensor<i1>
  }, {
  ^bb0(%a: tensor<f32>, %b: tensor<f32>):
    %c = stablehlo.add %a, %b : tensor<f32>
    stablehlo.return %c : tensor<f32>
  }) : (tensor<1x4xf32>, tensor<1x2xf32>, tensor<f32>) -> tensor<1x4xf32>
  return %r : tensor<1x4xf32>
}";
    let m = ir::parse::parse_module(text, "near_tie.mlir").expect("the program parses");
    let at = |x: [f32; 4]| {
        vec![Value::Float(
            Tensor::new(vec![1, 4], x.to_vec()),
            ir::ElemType::F32,
        )]
    };
    let near = references_at(&m, at([20.0, 20.0001, -1.0, 1.0]), 1);
    assert!(
        near.as_ref().is_err_and(|why| why.starts_with(NEAR_TIE)),
        "a near tie judged: {:?}",
        near.err()
    );
    let refs = references_at(&m, at([20.0, 20.0, -1.0, 1.0]), 1).expect("an exact tie is judged");
    assert_eq!(plan_error(&m, Rewrites::ALL, &refs), None);
    // The control: scattering the tied window's 1 to its second entry is
    // wrong for this judge.
    let mut swapped = refs.f32s[0].clone();
    let Value::Float(t, _) = &mut swapped[0] else {
        panic!("a float output")
    };
    assert_eq!(
        t.data[..2],
        [1.0, 0.0],
        "the first of tied entries is selected"
    );
    t.data.swap(0, 1);
    assert!(misjudged(&swapped, &refs, 20.0).is_some());
}

/// A program the fuzzer drew (seed 662341861) ends in Σ x̂ of a normalised
/// convolution (3,720 summands of size ~1, truth ~1e-6). The plan (moments
/// combined in f64) and the evaluator (an f32 mean) round the mean
/// differently, which shifts every x̂ alike: shrunk, the plan's error was
/// 4.8e-5, 13× the evaluator's 3.6e-6, but within one rounding of the
/// summands (2⁻²⁴·Σ|x̂| ≈ 2e-4). The judge accepts the plan, and still
/// refutes that output moved by ten times the summands' rounding.
#[test]
fn a_cancelling_sum_is_judged_against_its_summands_rounding() {
    let seed = 662_341_861;
    let m = module(Planned::draw(seed, MAX_RECIPES).build());
    let refs = references(&m, seed).expect("a verdict");
    // The sum that cancels: its truth is far below its summands' rounding.
    let size =
        |v: &Value<f64>| floats(v).map_or(0.0, |x| x.iter().map(|x| x * x).sum::<f64>().sqrt());
    let k = (0..refs.truth.len())
        .find(|&k| size(&refs.truth[k]) < refs.summands[k])
        .expect("a cancelling sum");
    let floor = refs.summands[k];
    assert!(floor > 1e-4, "{:?}", refs.summands);
    assert_eq!(plan_error(&m, Rewrites::ALL, &refs), None);
    let mut moved = refs.f32s[0].clone();
    let Value::Float(t, _) = &mut moved[k] else {
        panic!("a float output")
    };
    t.data[0] += (10.0 * floor) as f32;
    assert!(misjudged(&moved, &refs, 1.0).is_some());
}
