//! The two emitted forms of the max-pool backward (`PoolBackward`): the
//! shifted-sums form is tied to the forward's VJP with exact evidence on every
//! geometry the nets use, agrees with select_and_scatter bit for bit (ties
//! included) on the evaluator, and its negative controls (a mis-placed offset,
//! a missing offset, assignment instead of accumulation; carried by the pool
//! catalog entry) are refuted.

use crate::common;

use crate::common::refuted_block;
use cert::{certify_layer, Evidence, TieOptions, TieReport};
use den::{eval_func, EvalOptions, Tensor, Value};
use ir::{CompareDirection, ElemType, Module, TensorType};
use layers::ops::pool::{MaxPool, PoolBackward};
use layers::{tie_funcs, CertLayer, Emit, Grads, ReplacedBackward};

fn t(shape: &[i64]) -> TensorType {
    TensorType::f32(shape.to_vec())
}

fn certify(layer: &dyn CertLayer, shape: &[i64]) -> TieReport {
    certify_layer(layer, &t(shape), &TieOptions::default())
}

fn shifted(window: i64, stride: i64, pad: i64) -> MaxPool {
    MaxPool::new(window, stride, pad).with_backward(PoolBackward::ShiftedSums)
}

/// (pool, input shape): the stem pool at even, odd and non-square inputs and
/// batch 1..3, the CIFAR 2×2/s2 pool, and stride-1 3×3 pools (every input
/// element in up to 9 windows).
fn geometries() -> Vec<(MaxPool, Vec<i64>)> {
    vec![
        (shifted(3, 2, 1), vec![1, 2, 6, 8]),
        (shifted(3, 2, 1), vec![2, 1, 7, 5]),
        (shifted(3, 2, 1), vec![3, 1, 5, 9]),
        (shifted(2, 2, 0), vec![1, 2, 4, 6]),
        (shifted(2, 2, 0), vec![3, 1, 6, 4]),
        (shifted(3, 1, 1), vec![2, 1, 5, 7]),
        (shifted(3, 1, 0), vec![1, 2, 6, 5]),
    ]
}

#[test]
fn shifted_sums_backward_is_certified_exactly_on_every_geometry() {
    for (pool, shape) in geometries() {
        let r = certify(&pool, &shape);
        eprintln!(
            "{} at {:?}: {} points {} full-J {} {:.3}s",
            r.layer, shape, r.evidence, r.points, r.full_jacobian, r.seconds
        );
        assert!(r.certified(), "{} at {shape:?}: {:?}", r.layer, r.verdict);
        assert_eq!(r.evidence, Evidence::Exact, "{}: a rational tie", r.layer);
        let m = r.min_margin.expect("a max pool takes decisions");
        assert_eq!(m.site, "pool");
    }
}

fn backward_text(pool: &MaxPool, shape: &[i64]) -> String {
    let f = tie_funcs(pool, &t(shape)).expect("the tie builds");
    ir::print::print_module(&f.module())
}

#[test]
fn shifted_sums_emits_no_select_and_scatter() {
    let stem = MaxPool::new(3, 2, 1);
    let sas = backward_text(&stem, &[2, 1, 8, 8]);
    assert!(sas.contains("stablehlo.select_and_scatter"));
    let sums = backward_text(
        &stem.with_backward(PoolBackward::ShiftedSums),
        &[2, 1, 8, 8],
    );
    assert!(!sums.contains("select_and_scatter"), "{sums}");
    // 9 offsets: one strided slice and one scatter pad each, plus the −∞ pad.
    assert_eq!(sums.matches("stablehlo.pad").count(), 10, "{sums}");
    assert!(sums.contains("stablehlo.reduce_window"), "same forward");
}

// ---------------------------------------------------------------------------
// Bit-identity with select_and_scatter on the evaluator.

/// `forward(x) -> y` and `backward(x, dy) -> dx` of `pool` as one module.
fn module_of(pool: &MaxPool, shape: &[i64], elem: ElemType) -> Module {
    let ty = TensorType::new(shape.to_vec(), elem);
    tie_funcs(pool, &ty).expect("the tie builds").module()
}

/// Deterministic xorshift values; `levels > 0` quantises to that many
/// distinct values so windows tie often (as ReLU zeros do in real nets).
fn sample(n: usize, seed: u64, levels: u32) -> Vec<f64> {
    let mut s = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    (0..n)
        .map(|_| {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            let u = (s >> 11) as f64 / (1u64 << 53) as f64;
            if levels > 0 {
                (u * levels as f64).floor() - 1.0
            } else {
                u * 4.0 - 2.0
            }
        })
        .collect()
}

fn dx_bits(module: &Module, x: &[f64], dy: &[f64], shape: &[i64], fast: bool) -> Vec<u32> {
    let out_shape = {
        let f = module.funcs.iter().find(|f| f.name == "forward").unwrap();
        f.result_types()[0].shape.clone()
    };
    let v = |d: &[f64], s: &[i64]| {
        let shape: Vec<usize> = s.iter().map(|&k| k as usize).collect();
        Value::Float(
            Tensor::new(shape, d.iter().map(|&a| a as f32).collect()),
            ElemType::F32,
        )
    };
    let ev = eval_func::<f32>(
        module,
        "backward",
        vec![v(x, shape), v(dy, &out_shape)],
        &EvalOptions {
            fast,
            ..Default::default()
        },
    )
    .expect("backward evaluates");
    let dx = ev.outputs[0].clone().into_float().expect("float dx");
    dx.data.iter().map(|a| a.to_bits()).collect()
}

#[test]
fn both_forms_give_bit_identical_dx_including_ties() {
    let cases: &[(i64, i64, i64, &[i64])] = &[
        (3, 2, 1, &[2, 3, 12, 10]),
        (3, 2, 1, &[1, 2, 9, 11]),
        (2, 2, 0, &[2, 2, 8, 6]),
        (3, 1, 1, &[1, 2, 7, 6]),
    ];
    let mut compared = 0usize;
    for &(k, s, p, shape) in cases {
        let pool = MaxPool::new(k, s, p);
        let a = module_of(&pool, shape, ElemType::F32);
        let b = module_of(
            &pool.clone().with_backward(PoolBackward::ShiftedSums),
            shape,
            ElemType::F32,
        );
        let out = pool.output_type(&t(shape)).unwrap();
        let n: usize = shape.iter().product::<i64>() as usize;
        let m: usize = out.shape.iter().product::<i64>() as usize;
        // levels 0: distinct values; 3: heavy ties (first-maximum rule).
        for (seed, levels) in [(1u64, 0u32), (2, 3), (3, 2)] {
            let x = sample(n, seed, levels);
            let dy = sample(m, seed + 100, 0);
            for fast in [true, false] {
                let want = dx_bits(&a, &x, &dy, shape, fast);
                let got = dx_bits(&b, &x, &dy, shape, fast);
                assert_eq!(
                    want,
                    got,
                    "{} at {shape:?}, seed {seed}, levels {levels}, fast {fast}",
                    pool.name()
                );
                compared += want.len();
            }
        }
    }
    assert!(compared > 2000);
}

/// The equivalence is not vacuous: at tied windows the first-maximum rule
/// matters, and a scan that takes the LAST maximum differs from
/// select_and_scatter there (while off ties it is the same function, so the
/// VJP tie — at smooth points — cannot tell them apart and certifies it).
#[test]
fn last_maximum_rule_certifies_off_ties_but_differs_at_ties() {
    let pool = MaxPool::new(3, 2, 1);
    let last = last_maximum(pool.clone());
    let shape = [1, 2, 7, 9];
    assert!(certify(&last, &shape).certified());
    let a = module_of(&pool, &shape, ElemType::F32);
    let b = tie_funcs(&last, &t(&shape)).unwrap().module();
    let x = sample(2 * 7 * 9, 5, 2);
    let dy = sample(2 * 4 * 5, 6, 0);
    assert_ne!(
        dx_bits(&a, &x, &dy, &shape, false),
        dx_bits(&b, &x, &dy, &shape, false)
    );
}

// ---------------------------------------------------------------------------
// Negative controls: the shifted-sums backward with one step gone wrong (the
// last-maximum scan certifies: it differs only at ties).

/// Scans offsets in reverse, so the last maximal element claims the cotangent.
fn last_maximum(pool: MaxPool) -> ReplacedBackward<MaxPool> {
    ReplacedBackward::new(
        pool,
        "shifted sums, last maximum claims",
        |p, fb, x, _, saved, dy| {
            let input = fb.shape(x);
            let out = fb.shape(dy);
            let xp = p.pad_like_forward(fb, x)?;
            let zero = fb.splat(0.0, TensorType::f32(out.clone()));
            let mut unclaimed = dy;
            let mut scattered = Vec::new();
            for (a, b) in p.offsets().into_iter().rev() {
                let at = p.offset_view(fb, xp, &out, (a, b))?;
                let is_max = fb.cmp(CompareDirection::Eq, at, saved.output())?;
                let c = fb.select(is_max, unclaimed, zero)?;
                unclaimed = fb.select(is_max, zero, unclaimed)?;
                scattered.push(p.scatter_offset(fb, c, (a, b), &input)?);
            }
            let sum = p.sum_in_window_order(fb, &scattered)?;
            let dx = p.crop_padding(fb, sum, &input)?;
            Ok(Grads {
                dx,
                dparams: vec![],
            })
        },
    )
}

/// The pool catalog entry's shifted-sums controls (pool.rs): a pad shifted by
/// one row, an offset's cotangent dropped, assignment instead of
/// accumulation, each beside its certified twin.
#[test]
fn shifted_sums_negative_controls_are_refuted() {
    let cases = layers::ops::pool::catalog();
    let found = common::controls_named(&cases, "maxpool", "shifted sums, ");
    assert_eq!(found.len(), 6);
    for (evidence, ctl) in found {
        assert!(ctl.twin.name().ends_with("shifted-sums backward"));
        let (_, bad) = common::check_control(evidence, "maxpool", ctl);
        assert_eq!(refuted_block(&bad), "dx", "{}", ctl.name);
    }
}

/// Why `sum_in_window_order` adds in reverse scan order: adding the same
/// terms in scan order (later windows first) rounds differently wherever an
/// input is the argmax of three or more windows, so the forms would agree
/// only to a few ulps, not bit for bit.
#[test]
fn scan_order_summation_is_not_bit_identical() {
    let pool = MaxPool::new(3, 1, 1);
    let scan_order = ReplacedBackward::new(
        pool.clone().with_backward(PoolBackward::ShiftedSums),
        "shifted sums added in scan order",
        |p, fb, x, _, saved, dy| {
            let input = fb.shape(x);
            let claimed = p.claimed_cotangents(fb, x, saved.output(), dy)?;
            let mut acc = None;
            for (o, c) in p.offsets().into_iter().zip(claimed) {
                let t = p.scatter_offset(fb, c, o, &input)?;
                acc = Some(match acc {
                    None => t,
                    Some(a) => fb.add(a, t)?,
                });
            }
            let dx = p.crop_padding(fb, acc.expect("offsets"), &input)?;
            Ok(Grads {
                dx,
                dparams: vec![],
            })
        },
    );
    let shape = [2, 3, 12, 12];
    let a = module_of(&pool, &shape, ElemType::F32);
    let b = tie_funcs(&scan_order, &t(&shape)).unwrap().module();
    // Few levels: wide plateaus, so one input is the argmax of many windows.
    let x = sample(2 * 3 * 144, 9, 2);
    let dy = sample(2 * 3 * 144, 10, 0);
    let (da, db) = (
        dx_bits(&a, &x, &dy, &shape, false),
        dx_bits(&b, &x, &dy, &shape, false),
    );
    let differ = da.iter().zip(&db).filter(|(p, q)| p != q).count();
    let worst = da
        .iter()
        .zip(&db)
        .map(|(p, q)| (f32::from_bits(*p) - f32::from_bits(*q)).abs())
        .fold(0f32, f32::max);
    eprintln!(
        "scan-order sums: {differ} of {} elements differ, max |Δ| {worst:e}",
        da.len()
    );
    assert!(differ > 0);
}
