//! Running a schedule: slots hold buffers; each step takes its operands
//! from slots and writes its results to slots; a buffer read for the last
//! time goes back to a size-keyed pool that later outputs of the same length
//! reuse, so a repeated run neither keeps every intermediate alive nor
//! re-zeroes fresh pages.

use crate::fused::Input;
use crate::schedule::{dims, narrow, ConstData, Init, Kind, Step};
use den::fast::{self, ReduceKind};
use den::{eval_func, EvalError, EvalOptions, Scalar, Tensor, Value};
use ir::TensorType;
use std::collections::HashMap;
use std::time::Instant;

/// A slot's buffer: floats (also i1 as 0/1 when a fused loop wrote it) or integers.
pub(crate) enum Buf {
    F(Vec<f32>),
    I(Vec<i64>),
}

/// Released float buffers by length, reused for outputs of the same length.
#[derive(Default)]
pub(crate) struct Pool {
    free: HashMap<usize, Vec<Vec<f32>>>,
}

/// Buffers kept per length; more are dropped. Generous: a buffer dropped at
/// the end of one run is allocated (and paged in) again by the next. A train
/// step keeps more than 64 activations of one length alive for its backward
/// (ViT-Tiny: 12 blocks × several `[B, T, D]` tensors); at 64, those freed
/// past the cap were paged in afresh every step (page clearing was 29 % of a
/// ViT step's CPU). Peak RSS of that step was unchanged at 1024 (1.86 GB).
const POOL_PER_LEN: usize = 1024;

impl Pool {
    /// A buffer of `len` elements with unspecified contents.
    pub(crate) fn get(&mut self, len: usize) -> Vec<f32> {
        self.free
            .get_mut(&len)
            .and_then(|v| v.pop())
            .unwrap_or_else(|| vec![0.0; len])
    }

    pub(crate) fn put(&mut self, b: Buf) {
        if let Buf::F(v) = b {
            let list = self.free.entry(v.len()).or_default();
            if list.len() < POOL_PER_LEN && !v.is_empty() {
                list.push(v);
            }
        }
    }
}

/// A lowered function: its schedule, the slots that die after each step,
/// where inputs and outputs live, and what a plan keeps between runs (the
/// buffer pool, step times).
pub(crate) struct Compiled {
    pub n_slots: usize,
    pub params: Vec<usize>,
    pub steps: Vec<Step>,
    pub free_after: Vec<Vec<usize>>,
    pub unused_inputs: Vec<usize>,
    pub outputs: Vec<(usize, TensorType)>,
    pub pool: Pool,
    /// (calls, nanos) per step while profiling.
    pub stats: Vec<(u64, u64)>,
}

fn to_value(b: Buf, ty: &TensorType) -> Value<f32> {
    let shape = dims(&ty.shape);
    match (b, ty.elem.is_float()) {
        (Buf::F(d), true) => Value::Float(Tensor::new(shape, d), ty.elem),
        (Buf::F(d), false) => Value::Int(
            Tensor::new(shape, d.into_iter().map(|x| x as i64).collect()),
            ty.elem,
        ),
        (Buf::I(d), false) => Value::Int(Tensor::new(shape, d), ty.elem),
        (Buf::I(d), true) => Value::Float(
            Tensor::new(shape, d.into_iter().map(|x| x as f32).collect()),
            ty.elem,
        ),
    }
}

impl Buf {
    pub(crate) fn duplicate(&self) -> Buf {
        match self {
            Buf::F(d) => Buf::F(d.clone()),
            Buf::I(d) => Buf::I(d.clone()),
        }
    }

    /// The first element as an integer (a predicate or a branch index).
    pub(crate) fn first_int(&self) -> Option<i64> {
        match self {
            Buf::F(d) => d.first().map(|&x| x as i64),
            Buf::I(d) => d.first().copied(),
        }
    }
}

impl Compiled {
    pub(crate) fn run(
        &mut self,
        func: &str,
        inputs: Vec<Value<f32>>,
        profile: bool,
        parallel: bool,
    ) -> Result<Vec<Value<f32>>, EvalError> {
        let bufs = inputs
            .into_iter()
            .map(|v| {
                Some(match v {
                    Value::Float(t, e) => {
                        let mut d = t.data;
                        if narrow(e) {
                            d.iter_mut().for_each(|x| *x = x.round_to(e));
                        }
                        Buf::F(d)
                    }
                    Value::Int(t, _) => Buf::I(t.data),
                })
            })
            .collect();
        let outs = self.run_bufs(func, bufs, profile, parallel)?;
        Ok(outs
            .into_iter()
            .zip(&self.outputs)
            .map(|(b, (_, ty))| to_value(b, ty))
            .collect())
    }

    /// Runs the schedule on buffers (`None` for a parameter it never reads).
    pub(crate) fn run_bufs(
        &mut self,
        func: &str,
        inputs: Vec<Option<Buf>>,
        profile: bool,
        parallel: bool,
    ) -> Result<Vec<Buf>, EvalError> {
        let mut slots: Vec<Option<Buf>> = (0..self.n_slots).map(|_| None).collect();
        for (b, &slot) in inputs.into_iter().zip(&self.params) {
            slots[slot] = b;
        }
        for &s in &self.unused_inputs {
            if let Some(b) = slots[s].take() {
                self.pool.put(b);
            }
        }
        for i in 0..self.steps.len() {
            let t0 = profile.then(Instant::now);
            let step = &mut self.steps[i];
            run_step(step, &mut slots, &mut self.pool, profile, parallel).map_err(|message| {
                EvalError {
                    func: func.to_string(),
                    op: step.op,
                    line: step.line,
                    message,
                }
            })?;
            if let Some(t0) = t0 {
                let st = &mut self.stats[i];
                st.0 += 1;
                st.1 += t0.elapsed().as_nanos() as u64;
            }
            for &s in &self.free_after[i] {
                if let Some(b) = slots[s].take() {
                    self.pool.put(b);
                }
            }
        }
        let mut out = Vec::with_capacity(self.outputs.len());
        for (k, (slot, _)) in self.outputs.iter().enumerate() {
            let again = self.outputs[k + 1..].iter().any(|(s, _)| s == slot);
            let b = if again {
                slots[*slot].as_ref().map(Buf::duplicate)
            } else {
                slots[*slot].take()
            };
            let b = b.ok_or_else(|| EvalError {
                func: func.to_string(),
                op: "func.return",
                line: None,
                message: format!("internal: output {k} was not computed"),
            })?;
            out.push(b);
        }
        Ok(out)
    }
}

fn take_float(slots: &mut [Option<Buf>], s: usize, shape: &[usize]) -> Result<Tensor<f32>, String> {
    match slots[s].take() {
        Some(Buf::F(d)) if d.len() == shape.iter().product::<usize>() => {
            Ok(Tensor::new(shape.to_vec(), d))
        }
        Some(Buf::I(d)) => Ok(Tensor::new(
            shape.to_vec(),
            d.into_iter().map(|x| x as f32).collect(),
        )),
        _ => Err(format!("internal: operand buffer {s} missing or mis-sized")),
    }
}

fn init_value(slots: &[Option<Buf>], i: Init) -> Result<f32, String> {
    match i {
        Init::Const(x) => Ok(x),
        Init::Slot(s) => match slots[s].as_ref() {
            Some(Buf::F(d)) if !d.is_empty() => Ok(d[0]),
            _ => Err("internal: init value missing".into()),
        },
    }
}

/// Runs `f` on the float tensors of two slots (the same slot twice allowed),
/// putting them back afterwards.
fn with2<R>(
    slots: &mut [Option<Buf>],
    a: &(usize, Vec<usize>),
    b: &(usize, Vec<usize>),
    f: impl FnOnce(&Tensor<f32>, &Tensor<f32>) -> R,
) -> Result<R, String> {
    let x = take_float(slots, a.0, &a.1)?;
    let r = if a.0 == b.0 {
        let y = Tensor::new(b.1.clone(), x.data.clone());
        f(&x, &y)
    } else {
        let y = take_float(slots, b.0, &b.1)?;
        let r = f(&x, &y);
        slots[b.0] = Some(Buf::F(y.data));
        r
    };
    slots[a.0] = Some(Buf::F(x.data));
    Ok(r)
}

fn with1<R>(
    slots: &mut [Option<Buf>],
    a: &(usize, Vec<usize>),
    f: impl FnOnce(&Tensor<f32>) -> R,
) -> Result<R, String> {
    let x = take_float(slots, a.0, &a.1)?;
    let r = f(&x);
    slots[a.0] = Some(Buf::F(x.data));
    Ok(r)
}

/// The loop inputs of `inputs` (integer buffers converted); `skip` is the
/// input whose buffer was taken to become the output (read through `alias`).
fn loop_inputs<'s>(
    slots: &'s [Option<Buf>],
    inputs: &[usize],
    alias: Option<(usize, *const f32, usize)>,
) -> Result<Vec<Input<'s>>, String> {
    inputs
        .iter()
        .enumerate()
        .map(|(k, &s)| match alias {
            Some((j, p, n)) if j == k => Ok(Input::Float(p, n)),
            _ => match slots[s].as_ref() {
                Some(Buf::F(d)) => Ok(Input::Borrowed(d)),
                Some(Buf::I(d)) => Ok(Input::Owned(d.iter().map(|&x| x as f32).collect())),
                None => Err(format!("internal: loop input buffer {s} missing")),
            },
        })
        .collect()
}

/// Runs one step: its operands from `slots`, its results into them.
fn run_step(
    step: &mut Step,
    slots: &mut [Option<Buf>],
    pool: &mut Pool,
    profile: bool,
    parallel: bool,
) -> Result<(), String> {
    // Control steps run their sub-plans (which keep pools and step times).
    match &mut step.kind {
        Kind::While {
            cond,
            body,
            state,
            captured,
            results,
        } => {
            let run = crate::control::Run { profile, parallel };
            return run.run_while(cond, body, state, captured, results, slots);
        }
        Kind::Branch {
            selector,
            is_if,
            branches,
            captured,
            results,
        } => {
            let run = crate::control::Run { profile, parallel };
            return run.run_branch(*selector, *is_if, branches, captured, results, slots);
        }
        _ => {}
    }
    match &step.kind {
        Kind::While { .. } | Kind::Branch { .. } => {}
        Kind::Const { out, data } => {
            slots[*out] = Some(match data {
                ConstData::F(d) => {
                    let mut b = pool.get(d.len());
                    b.copy_from_slice(d);
                    Buf::F(b)
                }
                ConstData::I(d) => Buf::I(d.clone()),
            });
        }
        Kind::Loop {
            prog,
            inputs,
            out,
            len,
            in_place,
        } => {
            let taken = in_place.and_then(|k| match slots[inputs[k]].take() {
                Some(Buf::F(d)) if d.len() == *len => Some((k, d)),
                other => {
                    slots[inputs[k]] = other;
                    None
                }
            });
            let (mut buf, alias) = match taken {
                Some((k, mut d)) => {
                    let p = d.as_mut_ptr() as *const f32;
                    (d, Some((k, p, *len)))
                }
                None => (pool.get(*len), None),
            };
            {
                let ins = loop_inputs(slots, inputs, alias)?;
                // SAFETY: `buf` holds `len` elements; the only input that may
                // alias it is the in-place one, which the compiler chose only
                // when the program reads it element for element.
                unsafe { prog.run(&ins, buf.as_mut_ptr(), *len, parallel, alias.is_some()) };
            }
            slots[*out] = Some(Buf::F(std::mem::take(&mut buf)));
        }
        Kind::Reduce {
            prog,
            inputs,
            outs,
            len,
            map,
            out_len,
            stores,
            store_in_place,
        } => {
            let mut accs = Vec::with_capacity(outs.len());
            for o in outs {
                let mut acc = pool.get(*out_len);
                acc.fill(init_value(slots, o.init)?);
                accs.push(acc);
            }
            let values: Vec<usize> = outs.iter().map(|o| o.node).collect();
            // The first store may take over a dying input's buffer, as an
            // in-place loop does (its lines are in cache; a fresh buffer's
            // are read for ownership first).
            let taken = store_in_place.and_then(|k| match slots[inputs[k]].take() {
                Some(Buf::F(d)) if d.len() == *len => Some((k, d)),
                other => {
                    slots[inputs[k]] = other;
                    None
                }
            });
            let mut alias = None;
            let mut stored: Vec<Vec<f32>> = Vec::with_capacity(stores.len());
            if let Some((k, d)) = taken {
                alias = Some((k, d.as_ptr(), *len));
                stored.push(d);
            }
            while stored.len() < stores.len() {
                stored.push(pool.get(*len));
            }
            {
                let ins = loop_inputs(slots, inputs, alias)?;
                let mut into: Vec<(usize, &mut [f32])> = stores
                    .iter()
                    .zip(stored.iter_mut())
                    .map(|(s, b)| (s.1, &mut b[..]))
                    .collect();
                prog.reduce(
                    &ins,
                    map,
                    &values,
                    &mut accs,
                    &mut into,
                    *len,
                    parallel,
                    alias.is_some(),
                );
            }
            for (o, acc) in outs.iter().zip(accs) {
                slots[o.slot] = Some(Buf::F(acc));
            }
            for (s, b) in stores.iter().zip(stored) {
                slots[s.0] = Some(Buf::F(b));
            }
        }
        Kind::Conv {
            lhs,
            rhs,
            attrs,
            out,
            shape,
            bias,
            moments,
        } => {
            let buffer = pool.get(shape.iter().product());
            let bias = match bias {
                Some(b) => match slots[*b].as_ref() {
                    Some(Buf::F(d)) => Some(d.clone()),
                    _ => return Err("internal: convolution bias missing".into()),
                },
                None => None,
            };
            let t = match moments {
                Some(m) => {
                    let planes = shape[attrs.dims.output_batch as usize]
                        * shape[attrs.dims.output_feature as usize];
                    let mut stats = pool.get(2 * planes);
                    let t = with2(slots, lhs, rhs, |x, w| {
                        fast::convolution_moments_into(
                            x,
                            w,
                            attrs,
                            shape,
                            buffer,
                            bias.as_deref(),
                            &mut stats,
                        )
                    })?;
                    slots[*m] = Some(Buf::F(stats));
                    t
                }
                None => with2(slots, lhs, rhs, |x, w| {
                    fast::convolution_into(x, w, attrs, shape, buffer, bias.as_deref())
                })?,
            };
            slots[*out] = Some(Buf::F(t.data));
        }
        Kind::Moments {
            moments,
            centre,
            init,
            out,
            features,
            plane,
            fault,
        } => {
            let Some(Buf::F(m)) = slots[*moments].as_ref() else {
                return Err("internal: convolution moments missing".into());
            };
            let centre = match centre {
                Some(c) => match slots[*c].as_ref() {
                    Some(Buf::F(d)) if d.len() >= *features => Some(&d[..*features]),
                    _ => return Err("internal: moments centre missing".into()),
                },
                None => None,
            };
            let mut sums = pool.get(*features);
            feature_sums(m, centre, *init, *plane, &mut sums);
            if *fault != 0.0 {
                sums.iter_mut().for_each(|x| *x *= 1.0 + *fault);
            }
            slots[*out] = Some(Buf::F(sums));
        }
        Kind::Dot {
            lhs,
            rhs,
            dims,
            out,
            shape,
            bias,
        } => {
            let buffer = pool.get(shape.iter().product());
            let t = match bias {
                Some(b) => {
                    // The fold checked the bias is read as the slot's first
                    // `last` elements, broadcast along the last axis.
                    let last = shape.last().copied().unwrap_or(0);
                    let bias = match slots[*b].as_ref() {
                        Some(Buf::F(d)) if d.len() >= last => d[..last].to_vec(),
                        _ => return Err("internal: dot bias missing".into()),
                    };
                    with2(slots, lhs, rhs, |x, w| {
                        fast::dot_general_bias_into(x, w, dims, shape, buffer, &bias)
                    })?
                }
                None => with2(slots, lhs, rhs, |x, w| {
                    fast::dot_general_into(x, w, dims, shape, buffer)
                })?,
            };
            slots[*out] = Some(Buf::F(t.data));
        }
        Kind::ReduceFold {
            input,
            init,
            kind,
            dims,
            out,
            shape,
        } => {
            let init = init_value(slots, *init)?;
            let t = with1(slots, input, |x| fast::reduce(x, init, *kind, dims, shape))?;
            slots[*out] = Some(Buf::F(t.data));
        }
        Kind::Window {
            input,
            init,
            kind,
            out,
            tiles: Some(t),
            ..
        } => {
            let init = init_value(slots, *init)?;
            let len = t.out_len();
            let mut o = pool.get(len);
            match slots[input.0].as_ref() {
                Some(Buf::F(x)) => t.fold(x, init, *kind == ReduceKind::Max, &mut o),
                _ => return Err("internal: pooling input missing".into()),
            }
            slots[*out] = Some(Buf::F(o));
        }
        Kind::Scatter {
            operand,
            source,
            init,
            select,
            out,
            tiles: Some(t),
            ..
        } => {
            let init = init_value(slots, *init)?;
            let mut o = pool.get(t.in_len());
            match (slots[operand.0].as_ref(), slots[source.0].as_ref()) {
                (Some(Buf::F(x)), Some(Buf::F(s))) => t.scatter(x, s, init, *select, &mut o),
                _ => return Err("internal: select_and_scatter operands missing".into()),
            }
            slots[*out] = Some(Buf::F(o));
        }
        Kind::Window {
            input,
            init,
            kind,
            attrs,
            out,
            shape,
            ..
        } => {
            let init = init_value(slots, *init)?;
            let buffer = pool.get(shape.iter().product());
            let t = with1(slots, input, |x| {
                fast::reduce_window_into(x, init, *kind, attrs, shape, buffer)
            })?;
            slots[*out] = Some(Buf::F(t.data));
        }
        Kind::Scatter {
            operand,
            source,
            init,
            select,
            attrs,
            out,
            ..
        } => {
            let init = init_value(slots, *init)?;
            let buffer = pool.get(operand.1.iter().product());
            let t = with2(slots, operand, source, |x, s| {
                fast::select_and_scatter_into(x, s, init, *select, attrs, &x.shape, buffer)
            })?;
            slots[*out] = Some(Buf::F(t.data));
        }
        Kind::Pad {
            input,
            value,
            low,
            interior,
            out,
            shape,
        } => {
            let v = init_value(slots, *value)?;
            let t = with1(slots, input, |x| fast::pad(x, v, low, interior, shape))?;
            slots[*out] = Some(Buf::F(t.data));
        }
        Kind::Concat {
            inputs,
            dim,
            out,
            shape,
        } => {
            let outer: usize = shape[..*dim].iter().product();
            let mut data = pool.get(shape.iter().product());
            let mut at = 0;
            for o in 0..outer {
                for (s, sh) in inputs {
                    let rows: usize = sh[*dim..].iter().product();
                    let Some(Buf::F(d)) = slots[*s].as_ref() else {
                        return Err(format!("internal: concatenate operand buffer {s} missing"));
                    };
                    data[at..at + rows].copy_from_slice(&d[o * rows..(o + 1) * rows]);
                    at += rows;
                }
            }
            slots[*out] = Some(Buf::F(data));
        }
        Kind::Generic {
            module,
            operands,
            results,
        } => {
            let mut values = Vec::with_capacity(operands.len());
            for (s, ty) in operands {
                let b = match slots[*s].as_ref() {
                    Some(Buf::F(d)) => Buf::F(d.clone()),
                    Some(Buf::I(d)) => Buf::I(d.clone()),
                    None => return Err(format!("internal: operand buffer {s} missing")),
                };
                values.push(to_value(b, ty));
            }
            let opts = EvalOptions {
                fast: true,
                record_margins: false,
                replicas: 1,
            };
            let outs = eval_func(module, "op", values, &opts).map_err(|e| e.message)?;
            for (v, &r) in outs.outputs.into_iter().zip(results) {
                slots[r] = Some(match v {
                    Value::Float(t, _) => Buf::F(t.data),
                    Value::Int(t, _) => Buf::I(t.data),
                });
            }
        }
    }
    Ok(())
}

/// Per-feature sums from per-plane moments `m` (`[planes][Σ y, Σ (y − ȳ)²]`,
/// plane `b·F + f` for feature `f`): `init + Σ_b Σ y`, or with `centre`,
/// `init + Σ_b Σ (y − c_f)²` through `Σ (y − c)² = Σ (y − ȳ)² + n (ȳ − c)²`,
/// exact in exact arithmetic; summed in f64, rounded once.
fn feature_sums(m: &[f32], centre: Option<&[f32]>, init: f32, plane: usize, out: &mut [f32]) {
    let features = out.len();
    let n = plane as f64;
    for (f, o) in out.iter_mut().enumerate() {
        let mut acc = init as f64;
        for b in m.chunks_exact(2).skip(f).step_by(features) {
            let (sum, m2) = (b[0] as f64, b[1] as f64);
            acc += match centre {
                Some(c) => {
                    let d = sum / n - c[f] as f64;
                    m2 + n * d * d
                }
                None => sum,
            };
        }
        *o = acc as f32;
    }
}
