//! Pair checks: certify that a backward function given as StableHLO IS the VJP
//! of a forward function given as StableHLO (`certgrad check-vjp`), for
//! modules certgrad did not emit (JAX exports, hand-written kernels).
//!
//! Convention: the forward is `f(a0, …, an) -> (y0, …, ym)`; the backward is
//! `b(a0, …, an, dy0, …, dym) -> (da0, …, dan)`, one cotangent per forward
//! argument (or one per float argument only). Integer and boolean arguments
//! get no cotangent check. The two functions may live in separate modules
//! whose names collide (both JAX exports call their entry `@main` and carry
//! private helpers); they are merged into one module with the backward's
//! colliding functions renamed. The check itself is the layer tie's
//! (`crate::tie`): dual-number J·v oracle, adjoint identity per input,
//! exact where rational, full Jacobian at small sizes.

use crate::tie::{module_is_rational, Tie, TieBlock, TieOptions, TieReport, Verdict};
use den::{Tensor, Value};
use ir::{Block, Func, Module, OpKind, TensorType};
use layers::Init;
use std::fmt;
use std::time::Instant;

/// A malformed pair: the functions are missing or their signatures do not
/// follow the convention (a usage error, not a refutation).
#[derive(Clone, Debug, PartialEq)]
pub struct PairError(pub String);

impl fmt::Display for PairError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for PairError {}

/// The forward and backward merged into one module, with the names under
/// which they can be evaluated there.
#[derive(Clone, Debug)]
pub struct MergedPair {
    pub module: Module,
    pub forward: String,
    pub backward: String,
    /// Backward-module functions renamed to avoid a collision: (old, new).
    pub renamed: Vec<(String, String)>,
}

/// Pick a function: by name, else the module's default entry (`@main`, else
/// the only public function).
fn pick<'a>(m: &'a Module, name: Option<&str>, what: &str) -> Result<&'a Func, PairError> {
    let names = || {
        m.funcs
            .iter()
            .map(|f| format!("@{}", f.name))
            .collect::<Vec<_>>()
            .join(", ")
    };
    match name {
        Some(n) => m.func(n).ok_or_else(|| {
            PairError(format!(
                "{what} module has no function @{n} (functions: {})",
                names()
            ))
        }),
        None => m.default_entry().ok_or_else(|| {
            PairError(format!(
                "{what} module has no @main and several public functions ({}); choose one with --{}-func",
                names(),
                &what[..3]
            ))
        }),
    }
}

fn rename_calls(b: &mut Block, renamed: &[(String, String)]) {
    for op in &mut b.ops {
        if let OpKind::Call { callee } = &mut op.kind {
            if let Some((_, new)) = renamed.iter().find(|(old, _)| old == callee) {
                *callee = new.clone();
            }
        }
        for r in &mut op.regions {
            rename_calls(r, renamed);
        }
    }
}

/// Merge `fwd` and `bwd` into one module. Every function of both is kept (the
/// entries may call helpers); a backward function whose name a forward
/// function already uses is renamed (`main` → `main_bwd`), calls included.
pub fn merge_pair(
    fwd: &Module,
    bwd: &Module,
    fwd_func: Option<&str>,
    bwd_func: Option<&str>,
) -> Result<MergedPair, PairError> {
    let forward = pick(fwd, fwd_func, "forward")?.name.clone();
    let backward = pick(bwd, bwd_func, "backward")?.name.clone();
    let mut taken: Vec<String> = fwd.funcs.iter().map(|f| f.name.clone()).collect();
    taken.extend(bwd.funcs.iter().map(|f| f.name.clone()));
    let mut renamed = Vec::new();
    for f in &bwd.funcs {
        if fwd.func(&f.name).is_some() {
            let mut new = format!("{}_bwd", f.name);
            while taken.contains(&new) {
                new.push_str("_bwd");
            }
            taken.push(new.clone());
            renamed.push((f.name.clone(), new));
        }
    }
    let mut funcs = fwd.funcs.clone();
    for f in &bwd.funcs {
        let mut f = f.clone();
        if let Some((_, new)) = renamed.iter().find(|(old, _)| *old == f.name) {
            f.name = new.clone();
        }
        rename_calls(&mut f.body, &renamed);
        funcs.push(f);
    }
    let backward = renamed
        .iter()
        .find(|(old, _)| *old == backward)
        .map(|(_, new)| new.clone())
        .unwrap_or(backward);
    Ok(MergedPair {
        module: Module {
            name: None,
            attrs: None,
            funcs,
        },
        forward,
        backward,
        renamed,
    })
}

/// What the pair check saw, on top of the tie report.
#[derive(Clone, Debug)]
pub struct PairReport {
    pub forward: String,
    pub backward: String,
    /// Per forward argument: `da{i}` for float ones, `None` for integer/boolean
    /// ones (no cotangent check).
    pub inputs: Vec<(TensorType, Option<String>)>,
    pub outputs: Vec<TensorType>,
    /// The point was given (`--at`), not sampled.
    pub given_point: bool,
    pub tie: TieReport,
}

impl PairReport {
    pub fn certified(&self) -> bool {
        self.tie.certified()
    }
}

/// Check the merged pair. `at`: one value per forward argument (f32 values
/// from .npy files), or `None` for seeded random points (standard normal at
/// scales 1, 8, 1/4 in turn; integer arguments 0).
pub fn check_pair(
    pair: &MergedPair,
    at: Option<&[Value<f32>]>,
    opts: &TieOptions,
) -> Result<PairReport, PairError> {
    let t0 = Instant::now();
    let m = &pair.module;
    let f = m.func(&pair.forward).expect("merged forward");
    let b = m.func(&pair.backward).expect("merged backward");
    let n = f.params.len();
    let outputs: Vec<TensorType> = f.results.iter().map(|r| r.ty.clone()).collect();
    let sig = |fun: &Func| {
        let ins: Vec<String> = fun.params.iter().map(|p| p.ty.to_string()).collect();
        let outs: Vec<String> = fun.results.iter().map(|r| r.ty.to_string()).collect();
        format!("({}) -> ({})", ins.join(", "), outs.join(", "))
    };
    // b(a…, dy…): the forward's arguments, then one cotangent per result.
    let want: Vec<&TensorType> = f
        .params
        .iter()
        .map(|p| &p.ty)
        .chain(outputs.iter())
        .collect();
    let got: Vec<&TensorType> = b.params.iter().map(|p| &p.ty).collect();
    if want != got {
        return Err(PairError(format!(
            "backward @{} {} must take the forward's arguments then one cotangent per result: forward @{} is {}",
            pair.backward,
            sig(b),
            pair.forward,
            sig(f)
        )));
    }
    let float_args: Vec<usize> = (0..n).filter(|&i| f.params[i].ty.elem.is_float()).collect();
    if float_args.is_empty() {
        return Err(PairError(format!(
            "forward @{} has no float argument to differentiate",
            pair.forward
        )));
    }
    // Results: one per argument, or one per float argument.
    let per_all = b.results.len() == n;
    if !per_all && b.results.len() != float_args.len() {
        return Err(PairError(format!(
            "backward @{} returns {} results; expected one cotangent per forward argument ({n}) or per float argument ({})",
            pair.backward,
            b.results.len(),
            float_args.len()
        )));
    }
    let mut blocks = Vec::new();
    let mut inputs = Vec::new();
    let mut fixed = Vec::new();
    for (i, p) in f.params.iter().enumerate() {
        if p.ty.elem.is_float() {
            let out = if per_all {
                i
            } else {
                float_args.iter().position(|&a| a == i).expect("float")
            };
            if b.results[out].ty != p.ty {
                return Err(PairError(format!(
                    "backward result {out} is {}, but forward argument {i} is {}",
                    b.results[out].ty, p.ty
                )));
            }
            blocks.push(TieBlock {
                name: format!("da{i}"),
                ty: p.ty.clone(),
                init: Init::Normal { std: 1.0 },
                scaled: true,
                arg: i,
                bwd_out: out,
            });
            inputs.push((p.ty.clone(), Some(format!("da{i}"))));
        } else {
            let shape: Vec<usize> = p.ty.shape.iter().map(|&d| d as usize).collect();
            let value = match at.map(|a| &a[i]) {
                Some(Value::Int(t, _)) => t.clone(),
                _ => Tensor::filled(shape, 0),
            };
            fixed.push((i, value, p.ty.elem));
            inputs.push((p.ty.clone(), None));
        }
    }
    let given = match at {
        Some(vals) => {
            if vals.len() != n {
                return Err(PairError(format!(
                    "forward @{} takes {n} arguments, {} values given",
                    pair.forward,
                    vals.len()
                )));
            }
            let mut pts = Vec::new();
            for blk in &blocks {
                match &vals[blk.arg] {
                    Value::Float(t, _) => {
                        if t.data.iter().any(|x| !x.is_finite()) {
                            return Err(PairError(format!(
                                "argument {} holds a non-finite value",
                                blk.arg
                            )));
                        }
                        pts.push(t.map(|&x| x as f64));
                    }
                    Value::Int(..) => {
                        return Err(PairError(format!(
                            "argument {} is float, an integer array was given",
                            blk.arg
                        )))
                    }
                }
            }
            Some(pts)
        }
        None => None,
    };
    let mut opts = opts.clone();
    // Foreign forwards tie structurally (a max pool over ReLU zeros): accept
    // ties where the forward is flat across them.
    opts.accept_flat_ties = true;
    if given.is_some() {
        // One point, no resampling: a kink there leaves the check undecided.
        opts.points = 1;
        opts.max_attempts = 1;
    }
    let tie = Tie {
        module: m,
        forward: f,
        backward: &pair.backward,
        sites: &[],
        blocks,
        fixed,
        outputs: outputs.clone(),
        at: given.clone(),
        forward_margins_only: false,
    };
    let exact = opts.exact && module_is_rational(m);
    let mut report = if exact {
        tie.run::<den::Exact>(&opts, true)
    } else {
        tie.run::<f64>(&opts, false)
    };
    if exact {
        if let Verdict::Undecided { reason } = &report.verdict {
            if reason.contains("not exact") {
                report = tie.run::<f64>(&opts, false);
            }
        }
    }
    report.layer = format!("@{} / @{}", pair.forward, pair.backward);
    report.seconds = t0.elapsed().as_secs_f64();
    Ok(PairReport {
        forward: pair.forward.clone(),
        backward: pair.backward.clone(),
        inputs,
        outputs,
        given_point: given.is_some(),
        tie: report,
    })
}
