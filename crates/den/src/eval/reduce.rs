//! Reductions: reduce, reduce_window and select_and_scatter, each with a
//! generic path that runs the op's region on scalars and a direct path for the
//! recognised bodies (binary add/mul/max/min reducers, `compare` selectors,
//! add scatter). Both paths fold in the same order: the init value first, then
//! the elements row-major (for windows: padding positions read as the init
//! value, as in the spec's padded operand).
//!
//! Decisions (for margins): a max/min reduction decides, per output, between
//! its real (non-padding) candidates; its margin is the gap between the best
//! and the runner-up. select_and_scatter decides per window; its margin is the
//! gap between the selected value and the best other value. A window with a
//! single real element takes no decision.

use super::index::{strided_offsets, strides_at, WindowGeometry};
use super::{Decisions, Fail};
use crate::scalar::Scalar;
use crate::tensor::Tensor;
use crate::value::Value;
use ir::{BinaryOp, Block, CompareDirection, CompareType, ElemType, OpKind, TensorType};
use std::cmp::Ordering;

/// The op's regions evaluated on scalar (rank-0) values: `body(region, args)`.
pub type Body<'a, S> = dyn FnMut(usize, Vec<Value<S>>) -> Result<Vec<Value<S>>, Fail> + 'a;

/// Element `i` of `v` as a rank-0 value.
fn scalar_at<S: Scalar>(v: &Value<S>, i: usize) -> Value<S> {
    match v {
        Value::Float(t, e) => Value::Float(Tensor::new(vec![], vec![t.data[i].clone()]), *e),
        Value::Int(t, e) => Value::Int(Tensor::new(vec![], vec![t.data[i]]), *e),
    }
}

/// Output storage filled one scalar value at a time.
enum Buf<S> {
    Float(Vec<S>, ElemType),
    Int(Vec<i64>, ElemType),
}

impl<S: Scalar> Buf<S> {
    fn new(ty: &TensorType, n: usize) -> Self {
        if ty.elem.is_float() {
            Buf::Float(Vec::with_capacity(n), ty.elem)
        } else {
            Buf::Int(Vec::with_capacity(n), ty.elem)
        }
    }

    fn push(&mut self, v: &Value<S>) -> Result<(), Fail> {
        match (self, v) {
            (Buf::Float(d, _), Value::Float(t, _)) if t.len() == 1 => d.push(t.data[0].clone()),
            (Buf::Int(d, _), Value::Int(t, _)) if t.len() == 1 => d.push(t.data[0]),
            _ => {
                return Err(Fail::msg(
                    "region returned a value of the wrong type or shape",
                ))
            }
        }
        Ok(())
    }

    fn finish(self, shape: Vec<usize>) -> Value<S> {
        match self {
            Buf::Float(d, e) => Value::Float(Tensor::new(shape, d), e),
            Buf::Int(d, e) => Value::Int(Tensor::new(shape, d), e),
        }
    }
}

/// The float fold step of a recognised binary reducer.
fn fold_step<S: Scalar>(op: BinaryOp, acc: &S, x: &S) -> Option<S> {
    Some(match op {
        BinaryOp::Add => acc.add(x),
        BinaryOp::Multiply => acc.mul(x),
        BinaryOp::Maximum => acc.max(x),
        BinaryOp::Minimum => acc.min(x),
        _ => return None,
    })
}

/// Tracks the best and runner-up real candidates of one max/min reduction.
struct TopTwo<'a, S> {
    max: bool,
    best: Option<&'a S>,
    second: Option<&'a S>,
}

impl<'a, S: Scalar> TopTwo<'a, S> {
    fn new(op: BinaryOp) -> Self {
        TopTwo {
            max: op == BinaryOp::Maximum,
            best: None,
            second: None,
        }
    }

    fn better(&self, a: &S, b: &S) -> bool {
        let o = a.primal_cmp(b);
        if self.max {
            o == Some(Ordering::Greater)
        } else {
            o == Some(Ordering::Less)
        }
    }

    /// Offer a candidate; true when it becomes the best so far.
    fn offer(&mut self, x: &'a S) -> bool {
        match self.best {
            None => {
                self.best = Some(x);
                true
            }
            Some(b) if self.better(x, b) => {
                self.second = self.best;
                self.best = Some(x);
                true
            }
            _ => {
                match self.second {
                    Some(s) if !self.better(x, s) => {}
                    _ => self.second = Some(x),
                }
                false
            }
        }
    }

    fn record(&self, dec: &mut Decisions, index: usize) {
        if let (Some(b), Some(s)) = (self.best, self.second) {
            dec.record(b.gap(s), index);
        }
    }
}

fn is_decision(op: Option<BinaryOp>) -> bool {
    matches!(op, Some(BinaryOp::Maximum | BinaryOp::Minimum))
}

/// `reduce` over `dims`: variadic (inputs…, inits…), result dims are the kept
/// dims in order. `reducer` is the region's binary op when it is a plain one.
pub fn reduce<S: Scalar>(
    inputs: &[&Value<S>],
    inits: &[&Value<S>],
    dims: &[usize],
    reducer: Option<BinaryOp>,
    body: &mut Body<'_, S>,
    out_types: &[TensorType],
    mut dec: Option<&mut Decisions>,
) -> Result<Vec<Value<S>>, Fail> {
    let shape = inputs[0].shape().to_vec();
    if inputs.iter().any(|x| x.shape() != shape.as_slice()) {
        return Err(Fail::msg("reduce inputs have different shapes"));
    }
    if dims.iter().any(|&d| d >= shape.len()) {
        return Err(Fail::msg(format!(
            "reduce dimensions {dims:?} out of range"
        )));
    }
    let kept: Vec<usize> = (0..shape.len()).filter(|d| !dims.contains(d)).collect();
    let kept_ext: Vec<usize> = kept.iter().map(|&d| shape[d]).collect();
    let red_ext: Vec<usize> = dims.iter().map(|&d| shape[d]).collect();
    let kept_offs = strided_offsets(&kept_ext, &strides_at(&shape, &kept), 0);
    let red_offs = strided_offsets(&red_ext, &strides_at(&shape, dims), 0);

    if let ([Value::Float(x, _)], [Value::Float(init, _)], Some(op)) = (inputs, inits, reducer) {
        if fold_step(op, &init.data[0], &init.data[0]).is_some() {
            let elem = out_types[0].elem;
            let mut data = Vec::with_capacity(kept_offs.len());
            for (i, &base) in kept_offs.iter().enumerate() {
                let mut acc = init.data[0].clone();
                let mut top = TopTwo::new(op);
                for &r in &red_offs {
                    let v = &x.data[base + r];
                    acc = fold_step(op, &acc, v).expect("recognised reducer");
                    if dec.is_some() {
                        let _ = top.offer(v);
                    }
                }
                if let Some(d) = dec.as_deref_mut().filter(|_| is_decision(Some(op))) {
                    top.record(d, i);
                }
                data.push(acc.round_accumulated(elem));
            }
            return Ok(vec![Value::Float(Tensor::new(kept_ext, data), elem)]);
        }
    }

    let mut bufs: Vec<Buf<S>> = out_types
        .iter()
        .map(|t| Buf::new(t, kept_offs.len()))
        .collect();
    for &base in &kept_offs {
        let mut accs: Vec<Value<S>> = inits.iter().map(|v| (*v).clone()).collect();
        for &r in &red_offs {
            let mut args = accs;
            args.extend(inputs.iter().map(|x| scalar_at(x, base + r)));
            accs = body(0, args)?;
        }
        for (b, a) in bufs.iter_mut().zip(&accs) {
            b.push(a)?;
        }
    }
    Ok(bufs
        .into_iter()
        .map(|b| b.finish(kept_ext.clone()))
        .collect())
}

fn usize_attr(v: &[i64], rank: usize, what: &str) -> Result<Vec<usize>, Fail> {
    if v.len() != rank || v.iter().any(|&x| x < 1) {
        return Err(Fail::msg(format!(
            "{what} {v:?} must have {rank} positive entries"
        )));
    }
    Ok(v.iter().map(|&x| x as usize).collect())
}

/// `reduce_window`: for every output position, fold the window of the padded,
/// base-dilated operand (holes and padding read as the init value).
pub fn reduce_window<S: Scalar>(
    inputs: &[&Value<S>],
    inits: &[&Value<S>],
    attrs: &ir::WindowAttrs,
    reducer: Option<BinaryOp>,
    body: &mut Body<'_, S>,
    out_types: &[TensorType],
    mut dec: Option<&mut Decisions>,
) -> Result<Vec<Value<S>>, Fail> {
    let shape = inputs[0].shape().to_vec();
    let rank = shape.len();
    if inputs.iter().any(|x| x.shape() != shape.as_slice()) {
        return Err(Fail::msg("reduce_window inputs have different shapes"));
    }
    let window = usize_attr(&attrs.window_dimensions, rank, "window_dimensions")?;
    let strides = usize_attr(&attrs.window_strides, rank, "window_strides")?;
    let base_dil = usize_attr(&attrs.base_dilations, rank, "base_dilations")?;
    let win_dil = usize_attr(&attrs.window_dilations, rank, "window_dilations")?;
    if attrs.padding.len() != rank {
        return Err(Fail::msg("padding length differs from operand rank"));
    }
    let pad_low: Vec<i64> = attrs.padding.iter().map(|p| p.0).collect();
    let out_shape: Vec<usize> = out_types[0].shape.iter().map(|&d| d as usize).collect();
    let geo = WindowGeometry::new(
        &shape, &out_shape, &window, &strides, &base_dil, &win_dil, &pad_low,
    );

    if let ([Value::Float(x, _)], [Value::Float(init, _)], Some(op)) = (inputs, inits, reducer) {
        let init = &init.data[0];
        if fold_step(op, init, init).is_some() {
            let elem = out_types[0].elem;
            let mut data = Vec::with_capacity(out_shape.iter().product());
            geo.for_each(|o, offs| {
                let mut acc = init.clone();
                let mut top = TopTwo::new(op);
                let mut winner = 0;
                for (j, off) in offs.iter().enumerate() {
                    let v = match off {
                        Some(k) => &x.data[*k],
                        None => init,
                    };
                    acc = fold_step(op, &acc, v).expect("recognised reducer");
                    if off.is_some() && dec.is_some() && top.offer(v) {
                        winner = j;
                    }
                }
                if let Some(d) = dec.as_deref_mut().filter(|_| is_decision(Some(op))) {
                    if top.second.is_some() {
                        d.outcome(winner);
                    }
                    top.record(d, o);
                }
                data.push(acc.round_accumulated(elem));
            });
            return Ok(vec![Value::Float(Tensor::new(out_shape, data), elem)]);
        }
    }

    let n_out: usize = out_shape.iter().product();
    let mut bufs: Vec<Buf<S>> = out_types.iter().map(|t| Buf::new(t, n_out)).collect();
    let mut failure: Option<Fail> = None;
    geo.for_each(|_, offs| {
        if failure.is_some() {
            return;
        }
        let res = (|| -> Result<(), Fail> {
            let mut accs: Vec<Value<S>> = inits.iter().map(|v| (*v).clone()).collect();
            for off in offs {
                let mut args = accs;
                for (x, init) in inputs.iter().zip(inits) {
                    args.push(match off {
                        Some(k) => scalar_at(x, *k),
                        None => (*init).clone(),
                    });
                }
                accs = body(0, args)?;
            }
            for (b, a) in bufs.iter_mut().zip(&accs) {
                b.push(a)?;
            }
            Ok(())
        })();
        if let Err(e) = res {
            failure = Some(e);
        }
    });
    if let Some(e) = failure {
        return Err(e);
    }
    Ok(bufs
        .into_iter()
        .map(|b| b.finish(out_shape.clone()))
        .collect())
}

/// The direction of a selector region `^bb0(%a, %b): %p = compare DIR %a, %b
/// (FLOAT or default); return %p`.
pub fn as_compare_selector(block: &Block) -> Option<CompareDirection> {
    if block.args.len() != 2 || block.ops.len() != 2 {
        return None;
    }
    let (cmp, ret) = (&block.ops[0], &block.ops[1]);
    match &cmp.kind {
        OpKind::Compare {
            direction,
            compare_type: None | Some(CompareType::Float),
        } if cmp.operands == [block.args[0].0, block.args[1].0]
            && ret.kind == OpKind::Return
            && ret.operands == [cmp.results[0].0] =>
        {
            Some(*direction)
        }
        _ => None,
    }
}

/// The window selection of select_and_scatter: scanning the window's real
/// elements row-major, the current choice `a` is replaced by a later `b`
/// unless `select(a, b)` holds.
type Selector<'a, T> = dyn FnMut(&T, &T) -> Result<bool, Fail> + 'a;

fn select_in<T>(
    x: &[T],
    offs: &[Option<usize>],
    skip: Option<usize>,
    select: &mut Selector<'_, T>,
) -> Result<Option<usize>, Fail> {
    let mut cur: Option<usize> = None;
    for &k in offs.iter().flatten() {
        if Some(k) == skip {
            continue;
        }
        cur = match cur {
            None => Some(k),
            Some(c) => {
                if select(&x[c], &x[k])? {
                    Some(c)
                } else {
                    Some(k)
                }
            }
        };
    }
    Ok(cur)
}

/// The element family select_and_scatter runs over: floats of the scalar `S`
/// (rounded to their type, decisions recorded) or integers (wrapping, and
/// exact comparisons that are no decisions).
trait Elems<S: Scalar> {
    type T: Clone;
    fn elem(&self) -> ElemType;
    fn cmp(&self, a: &Self::T, b: &Self::T) -> Option<Ordering>;
    /// The margin of a choice between `a` and `b`; `None`: no decision.
    fn gap(&self, a: &Self::T, b: &Self::T) -> Option<f64>;
    /// `scatter(acc, x)` for a recognised binary scatter region.
    fn fold(&self, op: BinaryOp, acc: &Self::T, x: &Self::T) -> Option<Self::T>;
    /// An element as the rank-0 value a region takes.
    fn value(&self, x: Self::T) -> Value<S>;
    /// The element a region returned as a rank-0 value.
    fn element(&self, v: Value<S>) -> Option<Self::T>;
}

struct FloatElems(ElemType);

impl<S: Scalar> Elems<S> for FloatElems {
    type T = S;
    fn elem(&self) -> ElemType {
        self.0
    }
    fn cmp(&self, a: &S, b: &S) -> Option<Ordering> {
        a.primal_cmp(b)
    }
    fn gap(&self, a: &S, b: &S) -> Option<f64> {
        Some(a.gap(b))
    }
    fn fold(&self, op: BinaryOp, acc: &S, x: &S) -> Option<S> {
        fold_step(op, acc, x).map(|v| v.round_to(self.0))
    }
    fn value(&self, x: S) -> Value<S> {
        Value::Float(Tensor::new(vec![], vec![x]), self.0)
    }
    fn element(&self, v: Value<S>) -> Option<S> {
        match v {
            Value::Float(t, _) if t.len() == 1 => t.data.into_iter().next(),
            _ => None,
        }
    }
}

struct IntElems(ElemType);

impl<S: Scalar> Elems<S> for IntElems {
    type T = i64;
    fn elem(&self) -> ElemType {
        self.0
    }
    fn cmp(&self, a: &i64, b: &i64) -> Option<Ordering> {
        Some(if self.0.is_unsigned() {
            (*a as u64).cmp(&(*b as u64))
        } else {
            a.cmp(b)
        })
    }
    fn gap(&self, _: &i64, _: &i64) -> Option<f64> {
        None
    }
    fn fold(&self, op: BinaryOp, acc: &i64, x: &i64) -> Option<i64> {
        super::elementwise::int_binary(op, *acc, *x, self.0).ok()
    }
    fn value(&self, x: i64) -> Value<S> {
        Value::Int(Tensor::new(vec![], vec![x]), self.0)
    }
    fn element(&self, v: Value<S>) -> Option<i64> {
        match v {
            Value::Int(t, _) if t.len() == 1 => Some(t.data[0]),
            _ => None,
        }
    }
}

/// `select_and_scatter`: for each source element (row-major), its window of
/// the padded operand selects one real position, which accumulates
/// `scatter(acc, source)`, the accumulator starting at the init value.
/// Overlapping windows add up. Float or integer operands.
// The op has three operands, its attributes, two regions (recognised or
// evaluated) and the margin sink: bundling them would only rename them.
#[allow(clippy::too_many_arguments)]
pub fn select_and_scatter<S: Scalar>(
    operand: &Value<S>,
    source: &Value<S>,
    init: &Value<S>,
    attrs: &ir::ScatterWindowAttrs,
    selector: Option<CompareDirection>,
    scatter: Option<BinaryOp>,
    regions: &mut Body<'_, S>,
    dec: Option<&mut Decisions>,
) -> Result<Value<S>, Fail> {
    match (operand, source, init) {
        (Value::Float(x, e), Value::Float(s, _), Value::Float(i, _)) if i.len() == 1 => {
            let r = select_and_scatter_in(
                &FloatElems(*e),
                x,
                s,
                &i.data[0],
                attrs,
                selector,
                scatter,
                regions,
                dec,
            )?;
            Ok(Value::Float(r, *e))
        }
        (Value::Int(x, e), Value::Int(s, _), Value::Int(i, _)) if i.len() == 1 => {
            let r = select_and_scatter_in(
                &IntElems(*e),
                x,
                s,
                &i.data[0],
                attrs,
                selector,
                scatter,
                regions,
                dec,
            )?;
            Ok(Value::Int(r, *e))
        }
        _ => Err(Fail::msg(
            "select_and_scatter needs operand, source and a scalar init of one kind (float or integer)",
        )),
    }
}

#[allow(clippy::too_many_arguments)]
fn select_and_scatter_in<S: Scalar, K: Elems<S>>(
    kind: &K,
    x: &Tensor<K::T>,
    src: &Tensor<K::T>,
    init: &K::T,
    attrs: &ir::ScatterWindowAttrs,
    selector: Option<CompareDirection>,
    scatter: Option<BinaryOp>,
    regions: &mut Body<'_, S>,
    mut dec: Option<&mut Decisions>,
) -> Result<Tensor<K::T>, Fail> {
    let rank = x.rank();
    let window = usize_attr(&attrs.window_dimensions, rank, "window_dimensions")?;
    let strides = usize_attr(&attrs.window_strides, rank, "window_strides")?;
    if attrs.padding.len() != rank {
        return Err(Fail::msg("padding length differs from operand rank"));
    }
    let pad_low: Vec<i64> = attrs.padding.iter().map(|p| p.0).collect();
    let ones = vec![1usize; rank];
    let geo = WindowGeometry::new(
        &x.shape, &src.shape, &window, &strides, &ones, &ones, &pad_low,
    );

    // Region 0 selects, region 1 scatters; one callback evaluates both.
    let regions = std::cell::RefCell::new(regions);
    let mut select: Box<Selector<'_, K::T>> = match selector {
        Some(dir) => Box::new(move |a: &K::T, b: &K::T| {
            Ok(super::elementwise::direction_holds(dir, kind.cmp(a, b)))
        }),
        None => Box::new(|a: &K::T, b: &K::T| {
            let r = (*regions.borrow_mut())(0, vec![kind.value(a.clone()), kind.value(b.clone())])?;
            match r.as_slice() {
                [Value::Int(t, _)] if t.len() == 1 => Ok(t.data[0] != 0),
                _ => Err(Fail::msg("select region must return one i1 scalar")),
            }
        }),
    };
    let mut result = vec![init.clone(); x.len()];
    let mut failure: Option<Fail> = None;
    geo.for_each(|o, offs| {
        if failure.is_some() {
            return;
        }
        let res = (|| -> Result<(), Fail> {
            let Some(sel) = select_in(&x.data, offs, None, &mut *select)? else {
                return Ok(()); // a window of padding only selects nothing
            };
            if let Some(d) = dec.as_deref_mut() {
                if let Some(other) = select_in(&x.data, offs, Some(sel), &mut *select)? {
                    // The runner-up: the selection among the other elements.
                    if let Some(g) = kind.gap(&x.data[sel], &x.data[other]) {
                        d.record(g, o);
                        if let Some(j) = offs.iter().position(|k| *k == Some(sel)) {
                            d.outcome(j);
                        }
                    }
                }
            }
            let acc = &result[sel];
            result[sel] = match scatter.and_then(|op| kind.fold(op, acc, &src.data[o])) {
                Some(v) => v,
                None => {
                    let r = (*regions.borrow_mut())(
                        1,
                        vec![kind.value(acc.clone()), kind.value(src.data[o].clone())],
                    )?;
                    r.into_iter()
                        .next()
                        .and_then(|v| kind.element(v))
                        .ok_or_else(|| {
                            Fail::msg(format!(
                                "scatter region must return one {} scalar",
                                kind.elem()
                            ))
                        })?
                }
            };
            Ok(())
        })();
        if let Err(e) = res {
            failure = Some(e);
        }
    });
    if let Some(e) = failure {
        return Err(e);
    }
    Ok(Tensor::new(x.shape.clone(), result))
}
