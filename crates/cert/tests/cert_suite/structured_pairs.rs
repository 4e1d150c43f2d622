//! `check-vjp` through the structured ops: the VJP of a gather
//! with duplicate indices (`jnp.take`, the integer-label cross-entropy's
//! `take_along_axis`) is a scatter-add, and a backward whose scatter
//! overwrites instead of adding — the classic bug at duplicate indices — is
//! refuted. A loop (`while`) forward whose backward drops one factor of the
//! carried product is refuted too, next to its certified twin.

use cert::pair::{check_pair, merge_pair, PairReport};
use cert::{Evidence, TieOptions, Verdict};
use ir::Module;

fn parse(text: &str, name: &str) -> Module {
    let m = ir::parse::parse_module(text, name).unwrap_or_else(|e| panic!("{name}: {e}"));
    ir::verify_module(&m).unwrap_or_else(|e| panic!("{name}: {e}"));
    m
}

fn check(fwd: &str, bwd: &str) -> PairReport {
    let pair = merge_pair(&parse(fwd, "fwd"), &parse(bwd, "bwd"), None, None).expect("merge");
    check_pair(&pair, None, &TieOptions::default()).expect("well-formed pair")
}

/// `x[[0, 2, 2, 3]]` rows: row 2 is read twice.
const TAKE_FWD: &str = r#"
func.func public @main(%arg0: tensor<4x3xf32>) -> tensor<4x3xf32> {
  %c = stablehlo.constant dense<[[0], [2], [2], [3]]> : tensor<4x1xi32>
  %0 = "stablehlo.gather"(%arg0, %c) <{dimension_numbers = #stablehlo.gather<offset_dims = [1], collapsed_slice_dims = [0], start_index_map = [0], index_vector_dim = 1>, indices_are_sorted = false, slice_sizes = array<i64: 1, 3>}> : (tensor<4x3xf32>, tensor<4x1xi32>) -> tensor<4x3xf32>
  %1 = stablehlo.multiply %0, %0 : tensor<4x3xf32>
  return %1 : tensor<4x3xf32>
}
"#;

/// d/dx of sum(dy · x[i]²) = scatter-add of 2·x[i]·dy into zeros.
fn take_bwd(update_region: &str) -> String {
    format!(
        r#"
func.func public @main(%arg0: tensor<4x3xf32>, %arg1: tensor<4x3xf32>) -> tensor<4x3xf32> {{
  %c = stablehlo.constant dense<[[0], [2], [2], [3]]> : tensor<4x1xi32>
  %0 = "stablehlo.gather"(%arg0, %c) <{{dimension_numbers = #stablehlo.gather<offset_dims = [1], collapsed_slice_dims = [0], start_index_map = [0], index_vector_dim = 1>, indices_are_sorted = false, slice_sizes = array<i64: 1, 3>}}> : (tensor<4x3xf32>, tensor<4x1xi32>) -> tensor<4x3xf32>
  %cst = stablehlo.constant dense<2.000000e+00> : tensor<f32>
  %1 = stablehlo.broadcast_in_dim %cst, dims = [] : (tensor<f32>) -> tensor<4x3xf32>
  %2 = stablehlo.multiply %1, %0 : tensor<4x3xf32>
  %3 = stablehlo.multiply %2, %arg1 : tensor<4x3xf32>
  %cst_0 = stablehlo.constant dense<0.000000e+00> : tensor<f32>
  %4 = stablehlo.broadcast_in_dim %cst_0, dims = [] : (tensor<f32>) -> tensor<4x3xf32>
  %5 = "stablehlo.scatter"(%4, %c, %3) <{{indices_are_sorted = false, scatter_dimension_numbers = #stablehlo.scatter<update_window_dims = [1], inserted_window_dims = [0], scatter_dims_to_operand_dims = [0], index_vector_dim = 1>, unique_indices = false}}> ({{
  ^bb0(%a: tensor<f32>, %b: tensor<f32>):
{update_region}
  }}) : (tensor<4x3xf32>, tensor<4x1xi32>, tensor<4x3xf32>) -> tensor<4x3xf32>
  return %5 : tensor<4x3xf32>
}}
"#
    )
}

#[test]
fn gather_vjp_is_a_scatter_add_and_an_overwriting_scatter_is_refuted() {
    let add = "    %6 = stablehlo.add %a, %b : tensor<f32>\n    stablehlo.return %6 : tensor<f32>";
    let ok = check(TAKE_FWD, &take_bwd(add));
    assert!(ok.certified(), "{:?}", ok.tie.verdict);
    assert!(ok.tie.block_results.iter().all(|b| b.probes > 0));
    // Gather, multiply and scatter-add are rational: the evidence is exact.
    assert_eq!(ok.tie.evidence, Evidence::Exact);

    // Same shapes, same ops, but the update region returns the update: at
    // the duplicate row 2 only the second contribution survives.
    let overwrite = "    stablehlo.return %b : tensor<f32>";
    let bad = check(TAKE_FWD, &take_bwd(overwrite));
    match &bad.tie.verdict {
        Verdict::Refuted { block, detail } => {
            assert_eq!(block, "da0");
            // The largest discrepancy is in the duplicated row 2.
            assert!(detail.contains("at da0[2, "), "{detail}");
        }
        v => panic!("the overwriting scatter must be refuted, got {v:?}"),
    }
}

/// `fori_loop(0, 3, lambda k, c: c * x, x)`: x⁴, carried through a while loop.
const POW_FWD: &str = r#"
func.func public @main(%arg0: tensor<3xf32>) -> tensor<3xf32> {
  %c = stablehlo.constant dense<0> : tensor<i32>
  %0:2 = stablehlo.while(%iterArg = %c, %iterArg_0 = %arg0) : tensor<i32>, tensor<3xf32>
  cond {
    %c_1 = stablehlo.constant dense<3> : tensor<i32>
    %1 = stablehlo.compare  LT, %iterArg, %c_1,  SIGNED : (tensor<i32>, tensor<i32>) -> tensor<i1>
    stablehlo.return %1 : tensor<i1>
  } do {
    %1 = stablehlo.multiply %iterArg_0, %arg0 : tensor<3xf32>
    %c_1 = stablehlo.constant dense<1> : tensor<i32>
    %2 = stablehlo.add %iterArg, %c_1 : tensor<i32>
    stablehlo.return %2, %1 : tensor<i32>, tensor<3xf32>
  }
  return %0#1 : tensor<3xf32>
}
"#;

/// The backward as a loop: d(x⁴) = 4x³·dy, with `factor` (4 correct, 3 the
/// bug of a scan backward that drops the carry's own contribution).
fn pow_bwd(factor: &str) -> String {
    format!(
        r#"
func.func public @main(%arg0: tensor<3xf32>, %arg1: tensor<3xf32>) -> tensor<3xf32> {{
  %c = stablehlo.constant dense<0> : tensor<i32>
  %0:2 = stablehlo.while(%iterArg = %c, %iterArg_0 = %arg1) : tensor<i32>, tensor<3xf32>
  cond {{
    %c_1 = stablehlo.constant dense<3> : tensor<i32>
    %1 = stablehlo.compare  LT, %iterArg, %c_1,  SIGNED : (tensor<i32>, tensor<i32>) -> tensor<i1>
    stablehlo.return %1 : tensor<i1>
  }} do {{
    %1 = stablehlo.multiply %iterArg_0, %arg0 : tensor<3xf32>
    %c_1 = stablehlo.constant dense<1> : tensor<i32>
    %2 = stablehlo.add %iterArg, %c_1 : tensor<i32>
    stablehlo.return %2, %1 : tensor<i32>, tensor<3xf32>
  }}
  %cst = stablehlo.constant dense<{factor}> : tensor<f32>
  %3 = stablehlo.broadcast_in_dim %cst, dims = [] : (tensor<f32>) -> tensor<3xf32>
  %4 = stablehlo.multiply %0#1, %3 : tensor<3xf32>
  return %4 : tensor<3xf32>
}}
"#
    )
}

#[test]
fn while_loop_vjp_is_certified_and_a_dropped_term_is_refuted() {
    let ok = check(POW_FWD, &pow_bwd("4.000000e+00"));
    assert!(ok.certified(), "{:?}", ok.tie.verdict);
    assert_eq!(ok.tie.evidence, Evidence::Exact);
    let bad = check(POW_FWD, &pow_bwd("3.000000e+00"));
    assert!(
        matches!(bad.tie.verdict, Verdict::Refuted { .. }),
        "{:?}",
        bad.tie.verdict
    );
}
