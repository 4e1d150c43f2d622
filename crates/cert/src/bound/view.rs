//! What `certgrad bound NET` analyses: the net's rendered train step at the
//! certifier's sample point (`step::sample`, every value rounded to f32),
//! either whole (every output) or as its *gradient view* — the rendered SGD
//! step with its return cut back to `loss` and each parameter's gradient g
//! (the SGD tail is θ' = θ − lr·g, so g is read off the text), dead ops
//! pruned: exactly the step's forward and backward ops, no tail.

use crate::step::{sample, StepTieOptions};
use den::{Tensor, Value};
use ir::passes::{defining_op, prune_dead_ops};
use ir::rng::{Rng, CERT_SALT};
use ir::{BinaryOp, ElemType, Func, FuncResult, Module, OpKind, ValueId};
use layers::net::NetSpec;
use layers::trainstep::{render_step, Optimizer, SlotKind, StepOptions};

/// A function to bound, with its point and output names.
#[derive(Clone, Debug)]
pub struct View {
    pub module: Module,
    pub func: String,
    pub names: Vec<String>,
    pub inputs: Vec<Value<f64>>,
}

fn render(
    net: &NetSpec,
    batch: i64,
    opt: Optimizer,
    bf16: bool,
) -> Result<layers::trainstep::Rendered, String> {
    let so = StepOptions {
        bf16,
        ..StepOptions::new(opt)
    };
    render_step(net, batch, &so).map_err(|e| e.to_string())
}

/// The step's inputs at the certifier's sample point for `seed`, as f32 values.
fn point(net: &NetSpec, sig: &layers::trainstep::StepSignature, seed: u64) -> Vec<Value<f64>> {
    let mut rng = Rng::salted(seed, CERT_SALT);
    sample(sig, net, &mut rng, &StepTieOptions::default())
        .into_iter()
        .map(|t: Tensor<f64>| Value::Float(t.map(|&x| x as f32 as f64), ElemType::F32))
        .collect()
}

/// The whole rendered train step with optimizer `opt`.
pub fn step_view(
    net: &NetSpec,
    batch: i64,
    opt: Optimizer,
    bf16: bool,
    seed: u64,
) -> Result<View, String> {
    let r = render(net, batch, opt, bf16)?;
    let names = r.signature.outputs.iter().map(|s| s.name.clone()).collect();
    let inputs = point(net, &r.signature, seed);
    Ok(View {
        func: r.signature.func.clone(),
        module: r.module,
        names,
        inputs,
    })
}

/// The operand `k` of the op defining `v`, if that op is the binary `op`.
fn operand_of(f: &Func, v: ValueId, op: BinaryOp, k: usize) -> Option<ValueId> {
    let o = &f.body.ops[defining_op(f, v)?];
    (o.kind == OpKind::Binary(op)).then(|| o.operands.get(k).copied())?
}

/// The step's loss and every parameter gradient (see the module doc).
pub fn gradient_view(net: &NetSpec, batch: i64, bf16: bool, seed: u64) -> Result<View, String> {
    let r = render(net, batch, Optimizer::Sgd, bf16)?;
    let sig = &r.signature;
    let mut f = r.func().clone();
    let ret = f
        .body
        .ops
        .last()
        .filter(|o| o.kind == OpKind::FuncReturn)
        .ok_or("the rendered step has no func.return")?
        .operands
        .clone();
    let mut outs = vec![ret[sig.output_positions(SlotKind::Loss)[0]]];
    let mut names = vec!["loss".to_string()];
    for (k, &pos) in sig.output_positions(SlotKind::Param).iter().enumerate() {
        let step = operand_of(&f, ret[pos], BinaryOp::Subtract, 1);
        let g = step.and_then(|s| operand_of(&f, s, BinaryOp::Multiply, 1));
        outs.push(g.ok_or_else(|| format!("output {pos} of the SGD step is not θ − lr·g"))?);
        let p = sig.input_positions(SlotKind::Param)[k];
        names.push(format!("d{}", sig.inputs[p].name));
    }
    f.results = outs
        .iter()
        .map(|&v| {
            let op = &f.body.ops[defining_op(&f, v).expect("an op result")];
            let ty = op
                .results
                .iter()
                .find(|(r, _)| *r == v)
                .expect("result")
                .1
                .clone();
            FuncResult { ty, attrs: None }
        })
        .collect();
    f.body.ops.last_mut().expect("return").operands = outs;
    prune_dead_ops(&mut f);
    let inputs = point(net, sig, seed);
    Ok(View {
        func: f.name.clone(),
        module: Module {
            name: None,
            attrs: None,
            funcs: vec![f],
        },
        names,
        inputs,
    })
}
