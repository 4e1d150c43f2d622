//! The CertLayer contract: a layer emits its forward, its hand-written
//! closed-form backward map, names its kink sites and lists its parameters. The
//! certifier ties the backward map to the VJP of the forward; nothing here
//! derives a gradient automatically.

use crate::emit::EmitResult;
use crate::ops::norm::{BatchNorm, BnWorld};
use ir::{Func, FuncBuilder, Module, TensorType, ValueId, Visibility};
use std::fmt;

/// How a parameter is initialised (the trainer draws from it; the certifier
/// draws its own points).
#[derive(Clone, Debug, PartialEq)]
pub enum Init {
    Zeros,
    Ones,
    /// He (Kaiming) normal: std = sqrt(2 / fan_in).
    HeNormal {
        fan_in: i64,
    },
    /// Normal with the given standard deviation.
    Normal {
        std: f64,
    },
    /// Every entry `value` (ConvNeXt's layer scale γ: 1e-6).
    Const {
        value: f64,
    },
}

#[derive(Clone, Debug, PartialEq)]
pub struct ParamSpec {
    /// Local name (`W`, `b`, `gamma`); combinators prefix it with the layer path.
    pub name: String,
    pub ty: TensorType,
    pub init: Init,
}

impl ParamSpec {
    pub fn f32(name: impl Into<String>, shape: &[i64], init: Init) -> Self {
        ParamSpec {
            name: name.into(),
            ty: TensorType::f32(shape.to_vec()),
            init,
        }
    }
}

/// Where a kink sits: what the deciding op compares. Descriptive: the margins
/// themselves are measured at the deciding op by the evaluator.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum KinkAt {
    /// The deciding op's input equals this value (`max(x, 0)` at 0, ReLU6's
    /// corners at 0 and 6, a hard-swish's at ±3); margin = the distance to it.
    Value(f64),
    /// The two largest values of a window tie, over distinct input positions
    /// (max pool); margin = the gap between them.
    TopTwoTie,
}

/// The predicate a kink site must satisfy for the layer to be differentiable
/// there (its smooth-point hypothesis), as data: an op with a new kink defines
/// its own `KinkKind` value where it is emitted.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct KinkKind {
    pub at: KinkAt,
    /// The hypothesis in words, e.g. `x ≠ 6`.
    pub predicate: &'static str,
}

impl KinkKind {
    /// A kink where the deciding op's input equals `threshold`.
    pub const fn at_value(threshold: f64, predicate: &'static str) -> Self {
        KinkKind {
            at: KinkAt::Value(threshold),
            predicate,
        }
    }

    /// A kink where the two largest values of a window tie.
    pub const fn top_two_tie(predicate: &'static str) -> Self {
        KinkKind {
            at: KinkAt::TopTwoTie,
            predicate,
        }
    }
}

/// A non-smooth point of a forward: the decision op whose margin discharges it.
#[derive(Clone, Debug, PartialEq)]
pub struct KinkSite {
    /// Path of the activation it reads, e.g. `stage2.conv1.pre_relu`.
    pub name: String,
    pub kind: KinkKind,
    /// The result of the deciding op (`maximum`, `minimum`, `reduce_window`) in
    /// the function being built.
    pub value: ValueId,
}

/// Collects kink sites while a forward is emitted, under a path prefix.
#[derive(Default, Debug)]
pub struct Sites {
    prefix: Vec<String>,
    pub sites: Vec<KinkSite>,
}

impl Sites {
    pub fn record(&mut self, local: &str, kind: KinkKind, value: ValueId) {
        let mut name = self.prefix.join(".");
        if !name.is_empty() {
            name.push('.');
        }
        name.push_str(local);
        self.sites.push(KinkSite { name, kind, value });
    }

    /// Run `f` with `scope` appended to the path.
    pub fn scoped<T>(&mut self, scope: &str, f: impl FnOnce(&mut Self) -> T) -> T {
        self.prefix.push(scope.to_string());
        let out = f(self);
        self.prefix.pop();
        out
    }
}

/// What a forward keeps for its backward: its output and the intermediate
/// activations its backward map reads (combinators keep their children's).
#[derive(Clone, Debug, Default)]
pub struct Saved {
    pub output: Option<ValueId>,
    pub values: Vec<ValueId>,
    pub children: Vec<Saved>,
}

impl Saved {
    pub fn leaf(output: ValueId) -> Self {
        Saved {
            output: Some(output),
            ..Default::default()
        }
    }
    /// A combinator's: its output and its children's `Saved`, nothing of
    /// its own.
    pub fn composite(output: ValueId, children: Vec<Saved>) -> Self {
        Saved {
            output: Some(output),
            values: Vec::new(),
            children,
        }
    }
    pub fn output(&self) -> ValueId {
        self.output.expect("forward recorded its output")
    }
}

/// A batch norm inside a layer, wherever it sits: what a train step's
/// batch-stat outputs, running-stat inputs and eval switch are derived from.
#[derive(Clone, Debug, PartialEq)]
pub struct BlockBn {
    /// Its parameter path without the `.gamma` (`bn1`, `main.bn2`,
    /// `stage2.block1.shortcut.bn`; empty for a batch norm itself).
    pub name: String,
    pub ch: i64,
    pub world: BnWorld,
    /// Child indices from the layer's `Saved` down to the batch norm's.
    pub path: Vec<usize>,
}

impl BlockBn {
    /// This batch norm seen from a parent that holds its layer as child
    /// `index` of its `Saved`, under the parameter prefix `scope` (empty when
    /// the parent does not prefix its child's parameters).
    pub fn under(mut self, scope: &str, index: usize) -> BlockBn {
        self.name = match (scope.is_empty(), self.name.is_empty()) {
            (true, _) => self.name,
            (false, true) => scope.to_string(),
            (false, false) => format!("{scope}.{}", self.name),
        };
        self.path.insert(0, index);
        self
    }

    /// The `(mean, var)` this batch norm's forward computed, read from the
    /// `Saved` of the layer it was reported by (`None` in the Eval world).
    pub fn stats(&self, saved: &Saved) -> Option<(ValueId, ValueId)> {
        let mut s = saved;
        for &i in &self.path {
            s = s.children.get(i)?;
        }
        BatchNorm::saved_stats(s)
    }
}

/// The backward map's results: the input cotangent and one gradient per
/// parameter, in [`CertLayer::params`] order.
#[derive(Clone, Debug)]
pub struct Grads {
    pub dx: ValueId,
    pub dparams: Vec<ValueId>,
}

impl Grads {
    /// The backward map of a layer without parameters: the input cotangent
    /// `dx` alone.
    pub fn input_only(dx: ValueId) -> Self {
        Grads {
            dx,
            dparams: Vec::new(),
        }
    }
}

/// A certified layer. `x` is always the full batched input (e.g. `[N,C,H,W]`).
pub trait CertLayer: Send + Sync {
    /// The op and its configuration, e.g. `conv2d k=3 s=2 Symmetric 16→32`.
    fn name(&self) -> String;
    /// The output type for an input type, or why the input does not fit.
    fn output_type(&self, input: &TensorType) -> Result<TensorType, LayerError>;
    /// Parameters for an input type, in the order forward/backward take them
    /// (none by default: activations, pools, reshapes).
    fn params(&self, _input: &TensorType) -> Vec<ParamSpec> {
        Vec::new()
    }
    /// The batch norms this layer holds, in parameter order (none by default;
    /// a batch norm reports itself, a combinator its children's, prefixed).
    fn batch_norms(&self) -> Vec<BlockBn> {
        Vec::new()
    }
    /// Emit the forward; record kink sites in `sites`.
    fn forward(
        &self,
        fb: &mut FuncBuilder,
        x: ValueId,
        params: &[ValueId],
        sites: &mut Sites,
    ) -> EmitResult<Saved>;
    /// Emit the hand-written backward map at the saved forward input `x`:
    /// cotangent `dy` of the output → input cotangent and parameter gradients.
    fn backward(
        &self,
        fb: &mut FuncBuilder,
        x: ValueId,
        params: &[ValueId],
        saved: &Saved,
        dy: ValueId,
    ) -> EmitResult<Grads>;
}

#[derive(Clone, Debug, PartialEq)]
pub struct LayerError(pub String);

impl fmt::Display for LayerError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}
impl std::error::Error for LayerError {}

impl From<ir::TypeError> for LayerError {
    fn from(e: ir::TypeError) -> Self {
        LayerError(e.to_string())
    }
}

/// The standalone functions a tie is computed on, derived from one layer.
pub struct TieFuncs {
    /// `@forward(x, θ…) -> y`.
    pub forward: Func,
    /// Kink sites of `forward` (values are ids in `forward`).
    pub sites: Vec<KinkSite>,
    /// `@backward(x, θ…, dy) -> (dx, dθ…)`: recomputes the forward from `x`,
    /// then runs the backward map.
    pub backward: Func,
    pub params: Vec<ParamSpec>,
    pub input: TensorType,
    pub output: TensorType,
}

impl TieFuncs {
    pub fn module(&self) -> Module {
        Module {
            name: Some("tie".into()),
            attrs: None,
            funcs: vec![self.forward.clone(), self.backward.clone()],
        }
    }
}

/// Build the forward and backward functions of `layer` at input type `input`.
pub fn tie_funcs(layer: &dyn CertLayer, input: &TensorType) -> Result<TieFuncs, LayerError> {
    let output = layer.output_type(input)?;
    let params = layer.params(input);

    let mut fb = FuncBuilder::new("forward", Visibility::Public);
    let x = fb.param(input.clone());
    let ps: Vec<ValueId> = params.iter().map(|p| fb.param(p.ty.clone())).collect();
    let mut sites = Sites::default();
    let saved = layer.forward(&mut fb, x, &ps, &mut sites)?;
    let y = saved.output();
    if fb.ty(y) != &output {
        return Err(LayerError(format!(
            "{}: forward produced {}, output_type says {}",
            layer.name(),
            fb.ty(y),
            output
        )));
    }
    let forward = fb.finish(&[y])?;

    let mut fb = FuncBuilder::new("backward", Visibility::Public);
    let x = fb.param(input.clone());
    let ps: Vec<ValueId> = params.iter().map(|p| fb.param(p.ty.clone())).collect();
    let dy = fb.param(output.clone());
    let saved = layer.forward(&mut fb, x, &ps, &mut Sites::default())?;
    let g = layer.backward(&mut fb, x, &ps, &saved, dy)?;
    if g.dparams.len() != params.len() {
        return Err(LayerError(format!(
            "{}: backward returned {} parameter gradients for {} parameters",
            layer.name(),
            g.dparams.len(),
            params.len()
        )));
    }
    let mut outs = vec![g.dx];
    outs.extend(&g.dparams);
    let backward = fb.finish(&outs)?;
    Ok(TieFuncs {
        forward,
        sites: sites.sites,
        backward,
        params,
        input: input.clone(),
        output,
    })
}
