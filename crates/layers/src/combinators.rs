//! Composition of CertLayers: `Chain` (and its two-layer case `compose`),
//! `Residual` (optionally with a per-example stochastic-depth keep scale on
//! its branch), `Projection` and `LabelledBlock` (a built block's body
//! under its label). The second layer's backward is built at the
//! FIRST layer's output; a residual's backward is `body.back(e) + e`
//! (`body.back(keep⊙e) + e` with drop path).

use crate::droppath::KEEP_NAME;
use crate::emit::{Emit, EmitResult};
use crate::layer::{BlockBn, CertLayer, Grads, Init, LayerError, ParamSpec, Saved, Sites};
use ir::{FuncBuilder, TensorType, ValueId};

/// Layers run in list order; each has a name that scopes its kink sites and
/// parameters (`stage1.conv1.W`).
pub struct Chain {
    pub layers: Vec<(String, Box<dyn CertLayer>)>,
}

/// A built block: its body (a chain, plain or inside a skip) under a label
/// that states the block's kind and configuration in words. It is its body
/// as a layer: the same output type, parameters, batch norms, forward and
/// backward, and its `Saved` is the body's own.
pub struct LabelledBlock {
    /// The block's kind and configuration in words.
    pub label: String,
    pub body: Box<dyn CertLayer>,
}

impl CertLayer for LabelledBlock {
    fn name(&self) -> String {
        self.label.clone()
    }
    fn output_type(&self, input: &TensorType) -> Result<TensorType, LayerError> {
        self.body.output_type(input)
    }
    fn params(&self, input: &TensorType) -> Vec<ParamSpec> {
        self.body.params(input)
    }
    fn batch_norms(&self) -> Vec<BlockBn> {
        self.body.batch_norms()
    }
    fn forward(
        &self,
        fb: &mut FuncBuilder,
        x: ValueId,
        params: &[ValueId],
        sites: &mut Sites,
    ) -> EmitResult<Saved> {
        self.body.forward(fb, x, params, sites)
    }
    fn backward(
        &self,
        fb: &mut FuncBuilder,
        x: ValueId,
        params: &[ValueId],
        saved: &Saved,
        dy: ValueId,
    ) -> EmitResult<Grads> {
        self.body.backward(fb, x, params, saved, dy)
    }
}

/// Two layers, `first` then `second`.
pub fn compose(first: Box<dyn CertLayer>, second: Box<dyn CertLayer>) -> Chain {
    Chain {
        layers: vec![("0".into(), first), ("1".into(), second)],
    }
}

impl Chain {
    pub fn new() -> Self {
        Chain { layers: Vec::new() }
    }
    pub fn push(mut self, name: impl Into<String>, layer: impl CertLayer + 'static) -> Self {
        self.layers.push((name.into(), Box::new(layer)));
        self
    }

    /// Input type of every layer, and the chain's output type last.
    pub fn types(&self, input: &TensorType) -> Result<Vec<TensorType>, LayerError> {
        let mut tys = vec![input.clone()];
        for (name, l) in &self.layers {
            let next = l
                .output_type(tys.last().expect("non-empty"))
                .map_err(|e| LayerError(format!("{name}: {e}")))?;
            tys.push(next);
        }
        Ok(tys)
    }

    /// Split a flat parameter list into per-layer slices.
    fn split<'a>(&self, input_types: &[TensorType], params: &'a [ValueId]) -> Vec<&'a [ValueId]> {
        let mut out = Vec::new();
        let mut at = 0;
        for ((_, l), ty) in self.layers.iter().zip(input_types) {
            let n = l.params(ty).len();
            out.push(&params[at..at + n]);
            at += n;
        }
        out
    }

    fn input_types_from(&self, fb: &FuncBuilder, x: ValueId) -> Vec<TensorType> {
        self.types(fb.ty(x))
            .expect("types were checked by output_type")
    }
}

impl Default for Chain {
    fn default() -> Self {
        Self::new()
    }
}

impl CertLayer for Chain {
    fn name(&self) -> String {
        let names: Vec<String> = self.layers.iter().map(|(_, l)| l.name()).collect();
        format!("chain[{}]", names.join(" ; "))
    }

    fn output_type(&self, input: &TensorType) -> Result<TensorType, LayerError> {
        Ok(self.types(input)?.pop().expect("non-empty"))
    }

    fn params(&self, input: &TensorType) -> Vec<ParamSpec> {
        let tys = match self.types(input) {
            Ok(t) => t,
            Err(_) => return Vec::new(),
        };
        let mut out = Vec::new();
        for ((name, l), ty) in self.layers.iter().zip(&tys) {
            for mut p in l.params(ty) {
                p.name = format!("{name}.{}", p.name);
                out.push(p);
            }
        }
        out
    }

    fn batch_norms(&self) -> Vec<BlockBn> {
        let mut out = Vec::new();
        for (i, (name, l)) in self.layers.iter().enumerate() {
            out.extend(l.batch_norms().into_iter().map(|b| b.under(name, i)));
        }
        out
    }

    fn forward(
        &self,
        fb: &mut FuncBuilder,
        x: ValueId,
        params: &[ValueId],
        sites: &mut Sites,
    ) -> EmitResult<Saved> {
        let tys = self.input_types_from(fb, x);
        let per = self.split(&tys, params);
        let mut h = x;
        let mut children = Vec::new();
        for ((name, l), ps) in self.layers.iter().zip(per) {
            let s = sites.scoped(name, |sites| l.forward(fb, h, ps, sites))?;
            h = s.output();
            children.push(s);
        }
        Ok(Saved::composite(h, children))
    }

    fn backward(
        &self,
        fb: &mut FuncBuilder,
        x: ValueId,
        params: &[ValueId],
        saved: &Saved,
        dy: ValueId,
    ) -> EmitResult<Grads> {
        let tys = self.input_types_from(fb, x);
        let per = self.split(&tys, params);
        // The input of layer i is x for i = 0, else layer i−1's output.
        let inputs: Vec<ValueId> = std::iter::once(x)
            .chain(saved.children.iter().map(Saved::output))
            .collect();
        let mut e = dy;
        let mut grads: Vec<Vec<ValueId>> = vec![Vec::new(); self.layers.len()];
        for i in (0..self.layers.len()).rev() {
            let g = self.layers[i]
                .1
                .backward(fb, inputs[i], per[i], &saved.children[i], e)?;
            e = g.dx;
            grads[i] = g.dparams;
        }
        Ok(Grads {
            dx: e,
            dparams: grads.concat(),
        })
    }
}

/// `y = body(x) + x`; with `drop_path`, stochastic depth as a graph input
/// (docs/conventions.md §13): `y = x + keep[n]·body(x)` with `keep [N]` a
/// per-example input, the layer's last parameter (local name
/// [`KEEP_NAME`]; 1/p or 0 at train time, p the keep probability; keep 1 is
/// the plain skip). Backward: `dx = body.back(keep⊙dy) + dy`, the body's
/// parameter gradients at that cotangent, and
/// `dkeep[n] = Σ_{c,h,w} body(x)⊙dy` (computed honestly; the render
/// discards it).
pub struct Residual {
    pub body: Box<dyn CertLayer>,
    /// Whether the branch takes a per-example keep scale.
    pub drop_path: bool,
}

impl Residual {
    /// The plain identity skip.
    pub fn new(body: Box<dyn CertLayer>) -> Self {
        Residual {
            body,
            drop_path: false,
        }
    }

    /// The skip with its branch scaled by a keep input.
    pub fn with_drop_path(body: Box<dyn CertLayer>) -> Self {
        Residual {
            body,
            drop_path: true,
        }
    }

    /// `(the keep input, the body's parameters)`.
    fn split<'a>(&self, params: &'a [ValueId]) -> (Option<ValueId>, &'a [ValueId]) {
        match params.split_last() {
            Some((keep, body)) if self.drop_path => (Some(*keep), body),
            _ => (None, params),
        }
    }

    /// `keep` broadcast over the shape of `like` along the batch axis.
    fn keep_like(fb: &mut FuncBuilder, keep: ValueId, like: ValueId) -> EmitResult<ValueId> {
        let shape = fb.shape(like);
        fb.bcast(keep, &[0], &shape)
    }
}

impl CertLayer for Residual {
    fn name(&self) -> String {
        let kind = if self.drop_path {
            "drop_path_residual"
        } else {
            "residual"
        };
        format!("{kind}[{}]", self.body.name())
    }
    fn output_type(&self, input: &TensorType) -> Result<TensorType, LayerError> {
        let out = self.body.output_type(input)?;
        if &out != input {
            let kind = if self.drop_path {
                "drop-path residual"
            } else {
                "residual"
            };
            return Err(LayerError(format!(
                "{kind}: body maps {input} to {out}; a skip connection needs equal types"
            )));
        }
        Ok(out)
    }
    /// The body's (unprefixed), then with `drop_path` the keep input `[N]`.
    fn params(&self, input: &TensorType) -> Vec<ParamSpec> {
        let mut ps = self.body.params(input);
        if self.drop_path {
            let n = input.shape.first().copied().unwrap_or(1);
            ps.push(ParamSpec::f32(KEEP_NAME, &[n], Init::Ones));
        }
        ps
    }
    /// The body's, unprefixed (so are its parameters).
    fn batch_norms(&self) -> Vec<BlockBn> {
        self.body
            .batch_norms()
            .into_iter()
            .map(|b| b.under("", 0))
            .collect()
    }
    fn forward(
        &self,
        fb: &mut FuncBuilder,
        x: ValueId,
        params: &[ValueId],
        sites: &mut Sites,
    ) -> EmitResult<Saved> {
        let (keep, body_params) = self.split(params);
        let s = self.body.forward(fb, x, body_params, sites)?;
        let y = match keep {
            Some(keep) => {
                let k = Self::keep_like(fb, keep, s.output())?;
                let scaled = fb.mul(k, s.output())?;
                fb.add(scaled, x)?
            }
            None => fb.add(s.output(), x)?,
        };
        Ok(Saved::composite(y, vec![s]))
    }
    fn backward(
        &self,
        fb: &mut FuncBuilder,
        x: ValueId,
        params: &[ValueId],
        saved: &Saved,
        dy: ValueId,
    ) -> EmitResult<Grads> {
        let (keep, body_params) = self.split(params);
        let Some(keep) = keep else {
            let g = self.body.backward(fb, x, params, &saved.children[0], dy)?;
            let dx = fb.add(g.dx, dy)?;
            return Ok(Grads {
                dx,
                dparams: g.dparams,
            });
        };
        let branch = saved.children[0].output();
        let k = Self::keep_like(fb, keep, dy)?;
        let dbranch = fb.mul(k, dy)?;
        let g = self
            .body
            .backward(fb, x, body_params, &saved.children[0], dbranch)?;
        let dx = fb.add(g.dx, dy)?;
        let bd = fb.mul(branch, dy)?;
        let rank = fb.shape(dy).len() as i64;
        let rest: Vec<i64> = (1..rank).collect();
        let dkeep = fb.reduce_sum(bd, &rest)?;
        let mut dparams = g.dparams;
        dparams.push(dkeep);
        Ok(Grads { dx, dparams })
    }
}

/// Two-branch fan-in `y = main(x) + shortcut(x)` (a projection skip).
pub struct Projection {
    pub main: Box<dyn CertLayer>,
    pub shortcut: Box<dyn CertLayer>,
}

impl CertLayer for Projection {
    fn name(&self) -> String {
        format!(
            "projection[{} + {}]",
            self.main.name(),
            self.shortcut.name()
        )
    }
    fn output_type(&self, input: &TensorType) -> Result<TensorType, LayerError> {
        fan_in_output_type("projection", self.branches(), input)
    }
    fn params(&self, input: &TensorType) -> Vec<ParamSpec> {
        fan_in_params(self.branches(), input)
    }
    fn batch_norms(&self) -> Vec<BlockBn> {
        let mut out = Vec::new();
        for (i, (pre, l)) in self.branches().into_iter().enumerate() {
            out.extend(l.batch_norms().into_iter().map(|b| b.under(pre, i)));
        }
        out
    }
    fn forward(
        &self,
        fb: &mut FuncBuilder,
        x: ValueId,
        params: &[ValueId],
        sites: &mut Sites,
    ) -> EmitResult<Saved> {
        let n = self.main.params(fb.ty(x)).len();
        let a = sites.scoped("main", |s| self.main.forward(fb, x, &params[..n], s))?;
        let b = sites.scoped("shortcut", |s| {
            self.shortcut.forward(fb, x, &params[n..], s)
        })?;
        let y = fb.add(a.output(), b.output())?;
        Ok(Saved::composite(y, vec![a, b]))
    }
    fn backward(
        &self,
        fb: &mut FuncBuilder,
        x: ValueId,
        params: &[ValueId],
        saved: &Saved,
        dy: ValueId,
    ) -> EmitResult<Grads> {
        let n = self.main.params(fb.ty(x)).len();
        let ga = self
            .main
            .backward(fb, x, &params[..n], &saved.children[0], dy)?;
        let gb = self
            .shortcut
            .backward(fb, x, &params[n..], &saved.children[1], dy)?;
        let dx = fb.add(ga.dx, gb.dx)?;
        let mut dparams = ga.dparams;
        dparams.extend(gb.dparams);
        Ok(Grads { dx, dparams })
    }
}

impl Projection {
    fn branches(&self) -> [(&'static str, &dyn CertLayer); 2] {
        [("main", &*self.main), ("shortcut", &*self.shortcut)]
    }
}

/// The output type of a two-branch fan-in (`op` names it in errors): both
/// branches must map `input` to the same type.
pub fn fan_in_output_type(
    op: &str,
    [(na, a), (nb, b)]: [(&str, &dyn CertLayer); 2],
    input: &TensorType,
) -> Result<TensorType, LayerError> {
    let (ta, tb) = (a.output_type(input)?, b.output_type(input)?);
    if ta != tb {
        return Err(LayerError(format!(
            "{op}: {na} gives {ta}, {nb} gives {tb}; the branches need equal types"
        )));
    }
    Ok(ta)
}

/// The parameters of a fan-in: each branch's, in branch order, prefixed by the
/// branch name.
pub fn fan_in_params(branches: [(&str, &dyn CertLayer); 2], input: &TensorType) -> Vec<ParamSpec> {
    let mut out = Vec::new();
    for (pre, l) in branches {
        for mut p in l.params(input) {
            p.name = format!("{pre}.{}", p.name);
            out.push(p);
        }
    }
    out
}

/// A replacement backward map: `(layer, fb, x, params, saved, dy) → grads`.
pub type BackwardFn<L> = dyn Fn(&L, &mut FuncBuilder, ValueId, &[ValueId], &Saved, ValueId) -> EmitResult<Grads>
    + Send
    + Sync;

/// `layer` with its backward map replaced; forward, parameters and kink sites
/// stay the layer's own. Negative controls use it to inject one realistic,
/// shape-preserving bug into a backward map and show that the tie rejects it.
pub struct ReplacedBackward<L> {
    pub layer: L,
    /// What the replacement gets wrong, for the layer's name.
    pub label: String,
    pub backward: Box<BackwardFn<L>>,
}

impl<L> ReplacedBackward<L> {
    pub fn new(
        layer: L,
        label: impl Into<String>,
        backward: impl Fn(&L, &mut FuncBuilder, ValueId, &[ValueId], &Saved, ValueId) -> EmitResult<Grads>
            + Send
            + Sync
            + 'static,
    ) -> Self {
        ReplacedBackward {
            layer,
            label: label.into(),
            backward: Box::new(backward),
        }
    }
}

impl<L: CertLayer> CertLayer for ReplacedBackward<L> {
    fn name(&self) -> String {
        format!("{} ({})", self.layer.name(), self.label)
    }
    fn output_type(&self, input: &TensorType) -> Result<TensorType, LayerError> {
        self.layer.output_type(input)
    }
    fn params(&self, input: &TensorType) -> Vec<ParamSpec> {
        self.layer.params(input)
    }
    fn batch_norms(&self) -> Vec<BlockBn> {
        self.layer.batch_norms()
    }
    fn forward(
        &self,
        fb: &mut FuncBuilder,
        x: ValueId,
        params: &[ValueId],
        sites: &mut Sites,
    ) -> EmitResult<Saved> {
        self.layer.forward(fb, x, params, sites)
    }
    fn backward(
        &self,
        fb: &mut FuncBuilder,
        x: ValueId,
        params: &[ValueId],
        saved: &Saved,
        dy: ValueId,
    ) -> EmitResult<Grads> {
        (self.backward)(&self.layer, fb, x, params, saved, dy)
    }
}
