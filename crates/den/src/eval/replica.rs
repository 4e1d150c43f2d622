//! Data-parallel evaluation: [`eval_replicas`] runs one function as R
//! replicas, each on its own thread with its own inputs, and owns the
//! semantics of `stablehlo.all_reduce` across them (one partition, so every
//! collective mode reduces to replica ids): each replica deposits its operands
//! at an exchange, waits until all R have deposited at the same op, and then
//! combines the operands of the members of its replica group with the op's
//! region, folding in group order (member 0, then 1, …). Every member folds the
//! same values in the same order, so the results are bit-identical across the
//! replicas of a group — whatever the scalar's rounding.
//!
//! A replica that fails (or finishes) while others wait at a collective ends
//! their wait with an error naming it, so a failure never hangs the run; the
//! error returned is the one of the replica that failed first.

use super::elementwise;
use super::{eval_func, EvalError, EvalOptions, Evaluation, Fail};
use crate::scalar::Scalar;
use crate::tensor::Tensor;
use crate::value::Value;
use ir::{BinaryOp, Module, TensorType};
use std::any::Any;
use std::cell::RefCell;
use std::sync::{Arc, Condvar, Mutex, MutexGuard};

/// Evaluate `func` of `m` as `inputs.len()` replicas, replica r on `inputs[r]`;
/// the evaluations in replica order. `opts.replicas` must be 1 (the default)
/// or the number of replicas.
pub fn eval_replicas<S: Scalar + Send>(
    m: &Module,
    func: &str,
    inputs: Vec<Vec<Value<S>>>,
    opts: &EvalOptions,
) -> Result<Vec<Evaluation<S>>, EvalError> {
    let replicas = inputs.len();
    let usage = |message: String| EvalError {
        func: func.to_string(),
        op: "func.func",
        line: None,
        message,
    };
    if replicas == 0 {
        return Err(usage(
            "eval_replicas needs the inputs of at least 1 replica".into(),
        ));
    }
    if opts.replicas != 1 && opts.replicas != replicas {
        return Err(usage(format!(
            "EvalOptions says {} replicas, {replicas} replica input lists were given",
            opts.replicas
        )));
    }
    super::check_sizes::<S>(m)?;
    let opts = EvalOptions {
        replicas,
        ..opts.clone()
    };
    if replicas == 1 {
        let one = inputs.into_iter().next().expect("one replica");
        return eval_func(m, func, one, &opts).map(|e| vec![e]);
    }
    let exchange: Arc<Exchange<S>> = Arc::new(Exchange::new(replicas));
    let results: Vec<Result<Evaluation<S>, EvalError>> = std::thread::scope(|scope| {
        let handles: Vec<_> = inputs
            .into_iter()
            .enumerate()
            .map(|(r, ins)| {
                let exchange = exchange.clone();
                let opts = &opts;
                scope.spawn(move || {
                    // Departs even when the evaluation panics, so no other
                    // replica waits for this one forever.
                    let mut guard = Departure {
                        exchange: &exchange,
                        replica: r,
                        why: "panicked".into(),
                    };
                    let shared: Arc<dyn Any + Send + Sync> = exchange.clone();
                    CONTEXT.with(|c| {
                        *c.borrow_mut() = Some(Context {
                            replica: r,
                            replicas,
                            exchange: shared,
                        })
                    });
                    let out = eval_func(m, func, ins, opts);
                    CONTEXT.with(|c| *c.borrow_mut() = None);
                    guard.why = match &out {
                        Ok(_) => "finished".into(),
                        Err(e) => format!("failed ({e})"),
                    };
                    out
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().unwrap_or_else(|p| std::panic::resume_unwind(p)))
            .collect()
    });
    let first_failure = exchange.lock().first_failure;
    if let Some(r) = first_failure {
        if let Err(e) = &results[r] {
            return Err(e.clone());
        }
    }
    results.into_iter().collect()
}

/// What an evaluation thread knows about the replica it runs.
struct Context {
    replica: usize,
    replicas: usize,
    /// An `Exchange<S>` for the scalar of the running evaluation.
    exchange: Arc<dyn Any + Send + Sync>,
}

thread_local! {
    static CONTEXT: RefCell<Option<Context>> = const { RefCell::new(None) };
}

/// One replica's operands at one collective, with the op they belong to.
#[derive(Clone)]
struct Deposit<S> {
    site: (String, usize),
    operands: Vec<Value<S>>,
}

struct Round<S> {
    /// Completed collectives; the deposits of the latest one.
    generation: u64,
    done: Option<Arc<Vec<Deposit<S>>>>,
    pending: Vec<Option<Deposit<S>>>,
    /// Why each replica left the run, once it has.
    departed: Vec<Option<String>>,
    first_failure: Option<usize>,
}

struct Exchange<S> {
    round: Mutex<Round<S>>,
    turn: Condvar,
}

impl<S> Exchange<S> {
    fn new(replicas: usize) -> Self {
        Exchange {
            round: Mutex::new(Round {
                generation: 0,
                done: None,
                pending: (0..replicas).map(|_| None).collect(),
                departed: vec![None; replicas],
                first_failure: None,
            }),
            turn: Condvar::new(),
        }
    }

    fn lock(&self) -> MutexGuard<'_, Round<S>> {
        // A poisoned lock means a replica panicked holding it; the state is a
        // plain record of deposits, still consistent enough to report from.
        self.round.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Deposit replica `r`'s operands and wait for every replica's.
    fn meet(&self, r: usize, deposit: Deposit<S>) -> Result<Arc<Vec<Deposit<S>>>, String> {
        let mut round = self.lock();
        let gone = |round: &Round<S>| {
            round
                .departed
                .iter()
                .enumerate()
                .find_map(|(k, why)| why.as_ref().map(|w| format!("replica {k} {w}")))
        };
        if let Some(w) = gone(&round) {
            return Err(format!("{w} before this all_reduce"));
        }
        round.pending[r] = Some(deposit);
        if round.pending.iter().all(Option::is_some) {
            let all: Vec<Deposit<S>> = round
                .pending
                .iter_mut()
                .map(|d| d.take().expect("deposit"))
                .collect();
            let all = Arc::new(all);
            round.done = Some(all.clone());
            round.generation += 1;
            self.turn.notify_all();
            return Ok(all);
        }
        let generation = round.generation;
        while round.generation == generation {
            if let Some(w) = gone(&round) {
                return Err(format!("{w} while replica {r} waited at this all_reduce"));
            }
            round = self.turn.wait(round).unwrap_or_else(|p| p.into_inner());
        }
        // The next round cannot complete before this replica deposits again,
        // so `done` is still this round's.
        Ok(round.done.clone().expect("a completed round"))
    }

    fn depart(&self, r: usize, why: String) {
        let mut round = self.lock();
        if why != "finished" && round.first_failure.is_none() {
            round.first_failure = Some(r);
        }
        round.departed[r] = Some(why);
        self.turn.notify_all();
    }
}

struct Departure<'e, S> {
    exchange: &'e Exchange<S>,
    replica: usize,
    why: String,
}

impl<S> Drop for Departure<'_, S> {
    fn drop(&mut self) {
        self.exchange
            .depart(self.replica, std::mem::take(&mut self.why));
    }
}

/// The operands of every member of this replica's group at the all_reduce
/// `(func, op_index)`, in group order. `replicas` is the evaluation's replica
/// count (`EvalOptions::replicas`, > 1).
pub(crate) fn gather<S: Scalar>(
    func: &str,
    op_index: usize,
    groups: &[Vec<i64>],
    operands: Vec<Value<S>>,
    replicas: usize,
) -> Result<Vec<Vec<Value<S>>>, Fail> {
    let ctx = CONTEXT.with(|c| {
        c.borrow()
            .as_ref()
            .map(|c| (c.replica, c.replicas, c.exchange.clone()))
    });
    let Some((me, n, exchange)) = ctx else {
        return Err(Fail::msg(format!(
            "all_reduce over {replicas} replicas needs the replica evaluator (den::eval_replicas)"
        )));
    };
    if n != replicas {
        return Err(Fail::msg(format!(
            "this evaluation has {replicas} replicas, its replica evaluator {n}"
        )));
    }
    let exchange = exchange
        .downcast::<Exchange<S>>()
        .map_err(|_| Fail::msg("internal: the replica exchange holds another scalar type"))?;
    let group = group_of(groups, me, n)?;
    let site = (func.to_string(), op_index);
    let all = exchange
        .meet(
            me,
            Deposit {
                site: site.clone(),
                operands,
            },
        )
        .map_err(Fail::Msg)?;
    if let Some((k, d)) = all.iter().enumerate().find(|(_, d)| d.site != site) {
        return Err(Fail::msg(format!(
            "replica {k} reached @{} op #{} while replica {me} is at op #{op_index}",
            d.site.0, d.site.1
        )));
    }
    Ok(group.iter().map(|&k| all[k].operands.clone()).collect())
}

/// The members of replica `me`'s group; every replica must be in exactly one
/// group (an empty list is one group of all replicas).
fn group_of(groups: &[Vec<i64>], me: usize, replicas: usize) -> Result<Vec<usize>, Fail> {
    if groups.is_empty() {
        return Ok((0..replicas).collect());
    }
    let mut seen = vec![0usize; replicas];
    for g in groups {
        for &id in g {
            if id < 0 || id as usize >= replicas {
                return Err(Fail::msg(format!(
                    "replica_groups names replica {id}, the evaluation has {replicas}"
                )));
            }
            seen[id as usize] += 1;
        }
    }
    if let Some(k) = seen.iter().position(|&c| c != 1) {
        return Err(Fail::msg(format!(
            "replica_groups must name every replica exactly once; replica {k} appears {} times",
            seen[k]
        )));
    }
    let g = groups
        .iter()
        .find(|g| g.contains(&(me as i64)))
        .expect("every replica is in a group");
    Ok(g.iter().map(|&k| k as usize).collect())
}

/// Fold the members' operands (in member order) with the reducer: a plain
/// binary op elementwise, or else the region `body` element by element.
pub(crate) fn combine<S: Scalar>(
    members: Vec<Vec<Value<S>>>,
    reducer: Option<BinaryOp>,
    result_types: &[TensorType],
    body: &mut dyn FnMut(Vec<Value<S>>) -> Result<Vec<Value<S>>, Fail>,
) -> Result<Vec<Value<S>>, Fail> {
    let mut members = members.into_iter();
    let mut acc = members
        .next()
        .ok_or_else(|| Fail::msg("an empty replica group"))?;
    for next in members {
        if next.len() != acc.len() {
            return Err(Fail::msg("replicas disagree on the number of operands"));
        }
        for (i, (a, b)) in acc.iter_mut().zip(&next).enumerate() {
            if a.ty() != b.ty() {
                return Err(Fail::msg(format!(
                    "operand {i}: {} on one replica, {} on another",
                    a.ty(),
                    b.ty()
                )));
            }
            let elem = result_types
                .get(i)
                .map(|t| t.elem)
                .ok_or_else(|| Fail::msg("fewer results than operands"))?;
            *a = match reducer {
                Some(op) => elementwise::binary(op, a, b, elem, None)?,
                None => by_region(a, b, body)?,
            };
        }
    }
    Ok(acc)
}

/// `body(a[k], b[k])` for every element k.
fn by_region<S: Scalar>(
    a: &Value<S>,
    b: &Value<S>,
    body: &mut dyn FnMut(Vec<Value<S>>) -> Result<Vec<Value<S>>, Fail>,
) -> Result<Value<S>, Fail> {
    let scalar = |v: &Value<S>, k: usize| match v {
        Value::Float(t, e) => Value::Float(Tensor::new(vec![], vec![t.data[k].clone()]), *e),
        Value::Int(t, e) => Value::Int(Tensor::new(vec![], vec![t.data[k]]), *e),
    };
    let shape = a.shape().to_vec();
    let mut floats = Vec::new();
    let mut ints = Vec::new();
    let mut elem = a.elem();
    for k in 0..a.len() {
        let mut out = body(vec![scalar(a, k), scalar(b, k)])?;
        if out.len() != 1 {
            return Err(Fail::msg("the all_reduce region must return one value"));
        }
        match out.remove(0) {
            Value::Float(t, e) => {
                elem = e;
                floats.extend(t.data)
            }
            Value::Int(t, e) => {
                elem = e;
                ints.extend(t.data)
            }
        }
    }
    Ok(if a.as_float().is_some() {
        Value::Float(Tensor::new(shape, floats), elem)
    } else {
        Value::Int(Tensor::new(shape, ints), elem)
    })
}
