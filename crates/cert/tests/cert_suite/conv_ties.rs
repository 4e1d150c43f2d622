//! Ties of the conv family (conv2d, depthwise, dense, bias_add, GAP, flatten):
//! every catalog case certified with exact evidence, the catalog's total time,
//! and the negative controls the ops carry — realistic shape-preserving
//! backward bugs from docs/conventions.md §2–§13 that the tie must refute, each next to its
//! certified twin.

use crate::common::{check_case, check_control, check_controls, checked_control, controls_named};
use cert::{Evidence, Verdict};
use ir::TensorType;
use layers::ops::conv::{Conv2d, Padding};
use layers::ops::ExpectedEvidence;
use layers::CertLayer;
use std::time::Instant;

fn t(shape: &[i64]) -> TensorType {
    TensorType::f32(shape.to_vec())
}

#[test]
fn every_conv_and_dense_catalog_case_is_certified_exactly() {
    let cases: Vec<_> = layers::ops::conv::catalog()
        .into_iter()
        .chain(layers::ops::dense::catalog())
        .collect();
    assert!(cases.len() >= 30, "catalog shrank to {}", cases.len());
    let t0 = Instant::now();
    for case in &cases {
        assert_eq!(case.expected_evidence, ExpectedEvidence::Exact);
        let r = check_case(case);
        assert_eq!(r.evidence, Evidence::Exact, "{}", r.layer);
        assert_eq!(r.points, 3, "{} {}", case.op, case.config);
    }
    eprintln!(
        "total {} cases: {:.2}s",
        cases.len(),
        t0.elapsed().as_secs_f64()
    );
    assert_eq!(check_controls(&cases), 8);
}

#[test]
fn catalog_covers_batches_non_square_and_kernels() {
    let conv = layers::ops::conv::catalog();
    for op in ["conv2d", "depthwise_conv2d"] {
        let of_op: Vec<_> = conv.iter().filter(|c| c.op == op).collect();
        for n in 1..=3 {
            assert!(
                of_op.iter().any(|c| c.input.shape[0] == n),
                "{op} lacks N={n}"
            );
        }
        assert!(of_op.iter().any(|c| c.input.shape[2] != c.input.shape[3]));
    }
    let dense = layers::ops::dense::catalog();
    for op in ["dense", "bias_add", "global_avg_pool", "flatten"] {
        let of_op: Vec<_> = dense.iter().filter(|c| c.op == op).collect();
        for n in 1..=3 {
            assert!(
                of_op.iter().any(|c| c.input.shape[0] == n),
                "{op} lacks N={n}"
            );
        }
    }
}

/// Forward pads and output sizes against docs/conventions.md §2–§4.
#[test]
fn geometry_matches_the_reference_forms() {
    use layers::ops::conv::axis_geometry;
    use Padding::{Symmetric as Sym, XlaSame as Xla};
    // Stride 1: [p, k−1−p]; input VJP [k−1−p, p].
    for (k, pad, tp) in [
        (1, (0, 0), (0, 0)),
        (2, (0, 1), (1, 0)),
        (3, (1, 1), (1, 1)),
        (4, (1, 2), (2, 1)),
        (5, (2, 2), (2, 2)),
    ] {
        let g = axis_geometry(Sym, k, 1, 6).unwrap();
        assert_eq!((g.pad, g.out, g.input_pad), (pad, 6, tp), "k={k}");
    }
    // Stride 2 symmetric at 2h: pad [p,p]; input VJP [k−1−p, p] on extent 2h;
    // wgrad odd k [p,p] extent 2h, even k [p, k−2−p] extent 2h−1.
    for (k, pad, tp, wt, wp) in [
        (3, (1, 1), (1, 1), 1, (1, 1)),
        (7, (3, 3), (3, 3), 1, (3, 3)),
        (2, (0, 0), (1, 0), 0, (0, 0)),
        (4, (1, 1), (2, 1), 0, (1, 1)),
    ] {
        let g = axis_geometry(Sym, k, 2, 8).unwrap();
        assert_eq!(
            (g.pad, g.out, g.input_trailing, g.input_pad),
            (pad, 4, 1, tp),
            "k={k}"
        );
        assert_eq!((g.weight_trailing, g.weight_pad), (wt, wp), "k={k}");
    }
    // XLA-SAME at 2h, odd k: pad [p−1, p]; input [p+1, p−1]; weight [p−1, p+1].
    for (k, p) in [(3, 1), (5, 2), (7, 3)] {
        let g = axis_geometry(Xla, k, 2, 8).unwrap();
        assert_eq!(g.pad, (p - 1, p), "k={k}");
        assert_eq!(g.input_pad, (p + 1, p - 1), "k={k}");
        assert_eq!(g.weight_pad, (p - 1, p + 1), "k={k}");
    }
    // XLA-SAME at odd inputs is symmetric.
    assert_eq!(axis_geometry(Xla, 3, 2, 7).unwrap().pad, (1, 1));
    assert_eq!(axis_geometry(Xla, 5, 2, 9).unwrap().pad, (2, 2));
    // Stride 4 patchify: pad [0,0], wgrad extent 4h−3 (no trailing), pad [0,0].
    let g = axis_geometry(Sym, 4, 4, 8).unwrap();
    assert_eq!(
        (g.pad, g.out, g.weight_trailing, g.weight_pad),
        ((0, 0), 2, 0, (0, 0))
    );
    assert!(axis_geometry(Sym, 3, 4, 8).is_err());
}

// ----- negative controls (conv.rs, dense.rs) -----------------------------------

fn conv_catalog() -> Vec<layers::ops::OpCase> {
    layers::ops::conv::catalog()
}

/// docs/conventions.md §3: the XLA-SAME input VJP written with the weight
/// VJP's shift direction, `[p−1, p+1]` instead of `[p+1, p−1]`.
#[test]
fn xla_same_input_vjp_with_weight_vjp_padding_is_refuted() {
    checked_control(&conv_catalog(), "conv2d", "input VJP pad [p−1, p+1]");
}

/// docs/conventions.md §2: the even kernel's transposed pad mirrored, at k=2
/// and k=4.
#[test]
fn even_kernel_input_vjp_with_mirrored_split_is_refuted() {
    let cases = conv_catalog();
    let found = controls_named(&cases, "conv2d", "even-kernel input VJP pad mirrored");
    assert_eq!(found.len(), 2, "k=2 and k=4");
    for (evidence, ctl) in found {
        check_control(evidence, "conv2d", ctl);
    }
}

#[test]
fn weight_vjp_with_spatial_axes_swapped_is_refuted() {
    checked_control(&conv_catalog(), "conv2d", "dW with kh/kw swapped");
}

#[test]
fn strided_backward_dropping_the_odd_last_row_is_refuted() {
    let (_, _, bad) = checked_control(&conv_catalog(), "conv2d", "dx last row dropped");
    if let Verdict::Refuted { detail, .. } = &bad.verdict {
        // Localised to the dropped row (h = 6).
        assert!(
            detail.contains("dx[") && detail.contains(", 6, "),
            "{detail}"
        );
    }
}

#[test]
fn dense_backward_with_w_instead_of_w_transposed_is_refuted() {
    checked_control(&layers::ops::dense::catalog(), "dense", "dx = dy·W");
}

#[test]
fn gap_backward_dividing_by_h_only_is_refuted() {
    checked_control(
        &layers::ops::dense::catalog(),
        "global_avg_pool",
        "backward ÷H",
    );
}

#[test]
fn depthwise_xla_same_input_vjp_with_weight_padding_is_refuted() {
    checked_control(
        &conv_catalog(),
        "depthwise_conv2d",
        "input VJP pad [p−1, p+1]",
    );
}

// ----- forward semantics: "strided = decimation of the stride-1 SAME conv" ---

/// The forward of `layer` (no bias) at integer-valued `x` and `w`, in f64.
fn forward_f64(layer: &Conv2d, x: &[i64; 4], xs: &[f64], ws: &[f64]) -> den::Tensor<f64> {
    let funcs = layers::tie_funcs(layer, &t(x)).expect("tie funcs");
    let module = funcs.module();
    let k = layer.k as usize;
    let o = layer.out_ch as usize;
    let c = layer.in_ch as usize;
    let inputs = vec![
        den::Value::Float(
            den::Tensor::new(x.iter().map(|&d| d as usize).collect(), xs.to_vec()),
            ir::ElemType::F32,
        ),
        den::Value::Float(
            den::Tensor::new(vec![o, c, k, k], ws.to_vec()),
            ir::ElemType::F32,
        ),
    ];
    let opts = den::EvalOptions {
        fast: false,
        ..Default::default()
    };
    let ev = den::eval_func::<f64>(&module, "forward", inputs, &opts).expect("forward evaluates");
    ev.outputs[0].as_float().expect("float").clone()
}

/// docs/conventions.md §3, §4: symmetric stride 2 keeps the even phase of the
/// stride-1 SAME conv, XLA-SAME (even input, odd k ≥ 3) the odd phase, the
/// 4×4/s4 patchify phase 1 of 4; at odd inputs XLA-SAME is symmetric.
#[test]
fn strided_forward_is_a_phase_of_the_stride_one_conv() {
    use Padding::{Symmetric as Sym, XlaSame as Xla};
    // (k, stride, padding, input [N,C,H,W], phase along H, phase along W)
    let cases: [(i64, i64, Padding, [i64; 4], usize, usize); 9] = [
        (3, 2, Sym, [1, 2, 6, 8], 0, 0),
        (2, 2, Sym, [2, 1, 6, 4], 0, 0),
        (7, 2, Sym, [1, 1, 8, 7], 0, 0),
        (3, 2, Xla, [1, 2, 6, 8], 1, 1),
        (5, 2, Xla, [1, 1, 8, 6], 1, 1),
        (7, 2, Xla, [1, 1, 8, 9], 1, 0),
        (3, 2, Xla, [2, 1, 7, 6], 0, 1),
        (4, 4, Sym, [1, 2, 8, 4], 1, 1),
        (4, 4, Xla, [1, 1, 4, 8], 1, 1),
    ];
    for (k, s, padding, x, ph, pw) in cases {
        let strided = Conv2d {
            k,
            stride: s,
            padding,
            in_ch: x[1],
            out_ch: 2,
            bias: false,
        };
        let dense = Conv2d {
            stride: 1,
            padding: Sym,
            ..strided.clone()
        };
        let nx: i64 = x.iter().product();
        let xs: Vec<f64> = (0..nx).map(|i| ((i * 7919) % 23 - 11) as f64).collect();
        let ws: Vec<f64> = (0..2 * x[1] * k * k)
            .map(|i| ((i * 104729) % 13 - 6) as f64)
            .collect();
        let y = forward_f64(&strided, &x, &xs, &ws);
        let z = forward_f64(&dense, &x, &xs, &ws);
        let (ho, wo) = (y.shape[2], y.shape[3]);
        let (h, w) = (z.shape[2], z.shape[3]);
        let su = s as usize;
        // Phase positions ph, ph+s, … below h: the strided output size.
        assert_eq!((ho, wo), ((h - ph).div_ceil(su), (w - pw).div_ceil(su)));
        for nc in 0..y.shape[0] * y.shape[1] {
            for i in 0..ho {
                for j in 0..wo {
                    let got = y.data[(nc * ho + i) * wo + j];
                    let want = z.data[(nc * h + su * i + ph) * w + su * j + pw];
                    assert_eq!(got, want, "{} at {x:?}: y[{nc}, {i}, {j}]", strided.name());
                }
            }
        }
    }
}
