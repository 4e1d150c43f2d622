//! Elementwise results written over an operand that dies at the op, reshapes
//! that move their dying operand, and broadcasts and splat constants read
//! where their elements lie by their one binary reader: the same numbers,
//! decisions and non-finite record as with every value materialised.

use den::{eval_func, Dual, EvalOptions, Scalar, Tensor, Value};
use ir::ElemType;

/// `@dies` lets each value die at the op that reads it last (first operand,
/// second operand, both, one value read twice; broadcasts and splats read
/// by one binary op, two of them read by one op, one whose other operand
/// lives on); `@kept` is the same function returning every value, so none
/// dies early and each is materialised.
fn text(n: usize) -> String {
    let r = n / 8;
    let (t, t2) = (format!("tensor<{n}xf32>"), format!("tensor<{r}x8xf32>"));
    let h = "tensor<8xf32>";
    let v = format!("tensor<{r}xf32>");
    let ops = [
        ("%0", format!("stablehlo.subtract %a, %b : {t}"), &t),
        ("%1", format!("stablehlo.divide %c, %0 : {t}"), &t),
        ("%2", format!("stablehlo.maximum %1, %c : {t}"), &t),
        ("%3", format!("stablehlo.multiply %b, %2 : {t}"), &t),
        ("%4", format!("stablehlo.add %3, %3 : {t}"), &t),
        ("%5", format!("stablehlo.minimum %4, %4 : {t}"), &t),
        ("%s", format!("stablehlo.constant dense<0.5> : {t}"), &t),
        ("%6", format!("stablehlo.multiply %s, %5 : {t}"), &t),
        ("%z", format!("stablehlo.constant dense<0.0> : {t}"), &t),
        ("%7", format!("stablehlo.maximum %6, %z : {t}"), &t),
        ("%r", format!("stablehlo.reshape %7 : ({t}) -> {t2}"), &t2),
        (
            "%g",
            format!("stablehlo.broadcast_in_dim %h, dims = [1] : ({h}) -> {t2}"),
            &t2,
        ),
        ("%8", format!("stablehlo.subtract %g, %r : {t2}"), &t2),
        ("%e", format!("stablehlo.tanh %8 : {t2}"), &t2),
        (
            "%p",
            format!("stablehlo.broadcast_in_dim %h, dims = [1] : ({h}) -> {t2}"),
            &t2,
        ),
        (
            "%q",
            format!("stablehlo.broadcast_in_dim %h, dims = [1] : ({h}) -> {t2}"),
            &t2,
        ),
        ("%9", format!("stablehlo.multiply %p, %q : {t2}"), &t2),
        (
            "%u",
            format!("stablehlo.broadcast_in_dim %h, dims = [1] : ({h}) -> {t2}"),
            &t2,
        ),
        ("%10", format!("stablehlo.add %u, %e : {t2}"), &t2),
        ("%11", format!("stablehlo.multiply %e, %9 : {t2}"), &t2),
        ("%12", format!("stablehlo.divide %11, %10 : {t2}"), &t2),
        (
            "%w",
            format!("stablehlo.broadcast_in_dim %v, dims = [0] : ({v}) -> {t2}"),
            &t2,
        ),
        ("%13", format!("stablehlo.maximum %12, %w : {t2}"), &t2),
    ];
    let body: String = ops
        .iter()
        .map(|(v, op, _)| format!("  {v} = {op}\n"))
        .collect();
    let params = format!("%a: {t}, %b: {t}, %c: {t}, %h: {h}, %v: {v}");
    let all: Vec<&str> = ops.iter().map(|o| o.0).collect();
    let types: Vec<&str> = ops.iter().map(|o| o.2.as_str()).collect();
    format!(
        "func.func @dies({params}) -> {t2} {{
{body}  return %13 : {t2}
}}
func.func @kept({params}) -> ({}) {{
{body}  return {} : {}
}}",
        types.join(", "),
        all.join(", "),
        types.join(", ")
    )
}

fn inputs<S: Scalar>(n: usize, make: impl Fn(f64, f64) -> S) -> Vec<Value<S>> {
    [n, n, n, 8, n / 8]
        .iter()
        .enumerate()
        .map(|(k, &len)| {
            let data = (0..len)
                .map(|i| {
                    let x = ((i * 7 + k * 13) % 23) as f64 * 0.37 - 4.0;
                    make(x, (i % 5) as f64 - 2.0)
                })
                .collect();
            Value::Float(Tensor::new(vec![len], data), ElemType::F32)
        })
        .collect()
}

fn same<S: Scalar + std::fmt::Debug>(n: usize, make: impl Fn(f64, f64) -> S) {
    let m = ir::parse::parse_module(&text(n), "t").unwrap();
    for record_margins in [false, true] {
        let opts = EvalOptions {
            fast: true,
            record_margins,
            replicas: 1,
        };
        let dies = eval_func::<S>(&m, "dies", inputs(n, &make), &opts).unwrap();
        let kept = eval_func::<S>(&m, "kept", inputs(n, &make), &opts).unwrap();
        assert_eq!(
            format!("{:?}", dies.outputs[0]),
            format!("{:?}", kept.outputs.last().unwrap()),
            "n = {n}"
        );
        // Margins and the non-finite record, but for the function's name and lines.
        let margins = |ev: &den::Evaluation<S>| {
            ev.margins
                .iter()
                .map(|m| {
                    let d = (m.decisions, m.ties, m.outcomes.clone());
                    (m.op_index, m.op, m.min, m.argmin, m.near, d)
                })
                .collect::<Vec<_>>()
        };
        assert_eq!(margins(&dies), margins(&kept));
        let at = |ev: &den::Evaluation<S>| {
            let a = ev.first_non_finite.as_ref();
            a.map(|a| (a.op, a.index, a.value.to_bits()))
        };
        assert_eq!(at(&dies), at(&kept));
    }
}

#[test]
fn results_over_dying_operands_are_the_fresh_results() {
    // Small (one thread) and past the parallel threshold.
    for n in [56, 40_000] {
        same(n, |x, _| x);
        same(n, Dual::new);
        same(n, |x, _| x as f32);
    }
}

/// With the operand overwritten, the record still tells an overflow from
/// finite operands (named) from a non-finite operand passed on (not named).
#[test]
fn the_non_finite_record_reads_the_overwritten_operand() {
    let text = "func.func @main(%x: tensor<2xf32>, %y: tensor<2xf32>) -> tensor<2xf32> {
  %p = stablehlo.multiply %y, %x : tensor<2xf32>
  return %p : tensor<2xf32>
}";
    let m = ir::parse::parse_module(text, "t").unwrap();
    let opts = EvalOptions {
        fast: true,
        record_margins: true,
        replicas: 1,
    };
    let v = |a: f64, b: f64| Value::Float(Tensor::new(vec![2], vec![a, b]), ElemType::F32);
    let ev = eval_func::<f64>(&m, "main", vec![v(1.0, 1e300), v(2.0, 1e300)], &opts).unwrap();
    let at = ev.first_non_finite.expect("1e300² overflows");
    assert_eq!((at.op, at.index), ("stablehlo.multiply", 1));
    for (x, y) in [(f64::INFINITY, 2.0), (2.0, f64::NAN)] {
        let ev = eval_func::<f64>(&m, "main", vec![v(1.0, x), v(1.0, y)], &opts).unwrap();
        assert!(
            ev.first_non_finite.is_none(),
            "{x} · {y} passes an input on"
        );
    }
}
