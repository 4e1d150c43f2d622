//! Stochastic depth ("drop path", docs/conventions.md §13) as graph inputs: the
//! keep input's name (the residual whose branch it scales is
//! `combinators::Residual::with_drop_path`), the linear ramp of keep probabilities over a net's
//! drop-path blocks, and the host-side draw of the keep scales. The keep
//! scales are fixed inputs of the step (drawn on the host each step), so the
//! rendered step stays a deterministic function and certifies like any
//! other: the keep input is a parameter slot of the layer (like the loss's
//! target), its gradient is computed honestly and discarded by the render.
//! `FixedKeeps` holds the keeps at one draw instead (constants), the
//! function the step computes at that draw.

use crate::combinators::Chain;
use crate::emit::{Emit, EmitResult};
use crate::layer::{BlockBn, CertLayer, Grads, LayerError, ParamSpec, Saved, Sites};
use crate::net::{BuildCtx, NetSpec};
use ir::rng::Rng;
use ir::{DenseData, FuncBuilder, OpKind, TensorType, ValueId};

/// The local name of a drop-path keep input inside its block (its full name
/// is the block's path + `.drop_path`).
pub const KEEP_NAME: &str = "drop_path";

/// The keep probability of each of `blocks` drop-path blocks at maximum drop
/// rate `rate`: the linear ramp `1 − rate·i/(blocks−1)` (docs/conventions.md §13:
/// ConvNeXt-T `1 − 0.1·i/17`; ViT's two sub-layers of block i share
/// `1 − 0.1·i/11`). One block gets `1 − rate`.
pub fn keep_ramp(blocks: usize, rate: f64) -> Vec<f64> {
    if blocks == 1 {
        return vec![1.0 - rate];
    }
    (0..blocks)
        .map(|i| 1.0 - rate * i as f64 / (blocks - 1) as f64)
        .collect()
}

/// Checks a drop-path rate (the `--drop-path` flag).
pub fn validate_rate(rate: f64) -> Result<(), LayerError> {
    if rate.is_finite() && (0.0..1.0).contains(&rate) {
        Ok(())
    } else {
        Err(LayerError(format!(
            "--drop-path: expected a rate in [0, 1), got {rate}"
        )))
    }
}

/// One step's keep scales for a site with keep probability `keep`, `batch`
/// examples: each `1/keep` with probability `keep`, else 0 (timm's
/// `scale_by_keep`, so the expected branch is unchanged).
pub fn draw_keep_scales(keep: f64, batch: usize, rng: &mut Rng) -> Vec<f32> {
    (0..batch)
        .map(|_| {
            if rng.chance(keep) {
                (1.0 / keep) as f32
            } else {
                0.0
            }
        })
        .collect()
}

/// A drop-path keep input of a net: its name (the block's path +
/// `.drop_path`, as the chain names its parameters), the ordinal of its
/// block among the net's drop-path blocks, and its keep probability.
#[derive(Clone, Debug, PartialEq)]
pub struct DropPathSite {
    pub name: String,
    pub block: usize,
    pub keep: f64,
}

impl NetSpec {
    /// The emission choices with every drop-path site taking its keep input.
    fn drop_path_ctx(&self) -> BuildCtx {
        BuildCtx {
            drop_path: true,
            ..self.build_ctx()
        }
    }

    /// The forward with stochastic depth (logits out): every top-level block
    /// with drop-path sites built with its keep inputs, which sit among the
    /// chain's parameters (see [`keep_positions`]).
    pub fn chain_with_drop_path(&self) -> Result<Chain, LayerError> {
        self.logits_chain(&self.drop_path_ctx())
    }

    /// [`Self::chain_with_drop_path`] followed by the net's loss.
    pub fn chain_with_loss_drop_path(&self) -> Result<Chain, LayerError> {
        let mut with_loss = self.chain_with_loss()?;
        let loss = with_loss.layers.pop().expect("the loss layer");
        let mut c = self.chain_with_drop_path()?;
        c.layers.push(loss);
        Ok(c)
    }

    /// The net's drop-path sites in forward order with their keep
    /// probabilities at maximum drop rate `rate`: the blocks answering
    /// `drop_path_sites() ≥ 1`, numbered in order, on [`keep_ramp`] (every
    /// site of one block shares its block's keep). Empty without any.
    pub fn drop_path_sites(&self, rate: f64) -> Result<Vec<DropPathSite>, LayerError> {
        let chain = self.chain_with_drop_path()?;
        let tys = chain.types(&self.input_type(1))?;
        let blocks = self
            .layers
            .iter()
            .filter(|(_, l)| l.as_block().drop_path_sites() > 0)
            .count();
        let ramp = keep_ramp(blocks.max(1), rate);
        let mut out = Vec::new();
        let mut block = 0;
        for (((name, spec), (_, layer)), ty) in self.layers.iter().zip(&chain.layers).zip(&tys) {
            let want = spec.as_block().drop_path_sites();
            if want == 0 {
                continue;
            }
            let keeps: Vec<String> = layer
                .params(ty)
                .into_iter()
                .filter(|p| p.name == KEEP_NAME || p.name.ends_with(&format!(".{KEEP_NAME}")))
                .map(|p| format!("{name}.{}", p.name))
                .collect();
            if keeps.len() != want {
                return Err(LayerError(format!(
                    "{}: layer {name} names {want} drop-path site(s) but builds {} keep input(s)",
                    self.name,
                    keeps.len()
                )));
            }
            for k in keeps {
                out.push(DropPathSite {
                    name: k,
                    block,
                    keep: ramp[block],
                });
            }
            block += 1;
        }
        Ok(out)
    }
}

/// Where the keep inputs sit among the parameters of a drop-path chain at
/// `input`: the positions whose local name is `drop_path`.
pub fn keep_positions(chain: &dyn CertLayer, input: &TensorType) -> Vec<usize> {
    chain
        .params(input)
        .iter()
        .enumerate()
        .filter(|(_, p)| p.name == KEEP_NAME || p.name.ends_with(&format!(".{KEEP_NAME}")))
        .map(|(i, _)| i)
        .collect()
}

/// A drop-path chain's parameter list from its parts: `keeps` at
/// `positions` (ascending), the others filled in order from `rest` (θ, then
/// the loss target).
pub fn interleave<T: Copy>(positions: &[usize], keeps: &[T], rest: &[T]) -> Vec<T> {
    let total = keeps.len() + rest.len();
    let (mut k, mut r) = (keeps.iter(), rest.iter());
    (0..total)
        .map(|i| {
            let from = if positions.contains(&i) {
                &mut k
            } else {
                &mut r
            };
            *from.next().expect("enough values for every slot")
        })
        .collect()
}

/// The inverse of [`interleave`]: `(the others in order, the keeps)`.
pub fn split_keeps<T: Copy>(positions: &[usize], all: &[T]) -> (Vec<T>, Vec<T>) {
    let mut rest = Vec::new();
    let mut keeps = Vec::new();
    for (i, &v) in all.iter().enumerate() {
        if positions.contains(&i) {
            keeps.push(v);
        } else {
            rest.push(v);
        }
    }
    (rest, keeps)
}

/// A drop-path chain with its keep inputs fixed at one draw of the masks:
/// each keep a constant `[N]` of the emitted forward and backward, so the
/// layer is the function the train step computes at that draw, with the
/// chain's other parameters (θ, then the loss target) as its own. The
/// keeps' gradients are dropped (the render discards them too).
pub struct FixedKeeps {
    pub chain: Chain,
    /// Per keep input in forward order (see [`keep_positions`]), its value
    /// for each example.
    pub keeps: Vec<Vec<f32>>,
}

impl FixedKeeps {
    /// The keep constants for an input of batch `n`, in the chain's order.
    fn constants(&self, fb: &mut FuncBuilder, n: i64) -> EmitResult<Vec<ValueId>> {
        self.keeps
            .iter()
            .map(|k| {
                if k.len() as i64 != n {
                    return Err(ir::TypeError {
                        op: "fixed_keeps",
                        message: format!("a keep holds {} values for a batch of {n}", k.len()),
                    });
                }
                let data = DenseData::Float(k.iter().map(|&v| f64::from(v)).collect());
                let ty = TensorType::f32(vec![n]);
                fb.push1(OpKind::Constant(data), &[], Some(ty))
            })
            .collect()
    }

    fn positions(&self, fb: &FuncBuilder, x: ValueId) -> Vec<usize> {
        keep_positions(&self.chain, fb.ty(x))
    }
}

impl CertLayer for FixedKeeps {
    fn name(&self) -> String {
        format!("{} (keeps fixed)", self.chain.name())
    }
    fn output_type(&self, input: &TensorType) -> Result<TensorType, LayerError> {
        let have = keep_positions(&self.chain, input).len();
        if have != self.keeps.len() {
            return Err(LayerError(format!(
                "fixed keeps: the chain has {have} keep input(s), {} given",
                self.keeps.len()
            )));
        }
        self.chain.output_type(input)
    }
    /// The chain's, without its keep inputs.
    fn params(&self, input: &TensorType) -> Vec<ParamSpec> {
        let at = keep_positions(&self.chain, input);
        let mut ps = self.chain.params(input);
        for &i in at.iter().rev() {
            ps.remove(i);
        }
        ps
    }
    fn batch_norms(&self) -> Vec<BlockBn> {
        self.chain.batch_norms()
    }
    fn forward(
        &self,
        fb: &mut FuncBuilder,
        x: ValueId,
        params: &[ValueId],
        sites: &mut Sites,
    ) -> EmitResult<Saved> {
        let at = self.positions(fb, x);
        let n = fb.shape(x)[0];
        let keeps = self.constants(fb, n)?;
        self.chain
            .forward(fb, x, &interleave(&at, &keeps, params), sites)
    }
    fn backward(
        &self,
        fb: &mut FuncBuilder,
        x: ValueId,
        params: &[ValueId],
        saved: &Saved,
        dy: ValueId,
    ) -> EmitResult<Grads> {
        let at = self.positions(fb, x);
        let n = fb.shape(x)[0];
        let keeps = self.constants(fb, n)?;
        let g = self
            .chain
            .backward(fb, x, &interleave(&at, &keeps, params), saved, dy)?;
        Ok(Grads {
            dx: g.dx,
            dparams: split_keeps(&at, &g.dparams).0,
        })
    }
}

/// One host draw of a net's masks at maximum drop rate `rate` for a batch of
/// `batch`: per site (in [`NetSpec::drop_path_sites`] order) its keep scales
/// from [`draw_keep_scales`], all from `rng`.
pub fn draw_net_keeps(
    net: &NetSpec,
    rate: f64,
    batch: usize,
    rng: &mut Rng,
) -> Result<Vec<Vec<f32>>, LayerError> {
    validate_rate(rate)?;
    Ok(net
        .drop_path_sites(rate)?
        .iter()
        .map(|s| draw_keep_scales(s.keep, batch, rng))
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ramps_are_the_references() {
        // ConvNeXt-T: 18 blocks, keep_i = 1 − 0.1·i/17.
        let r = keep_ramp(18, 0.1);
        assert_eq!(r.len(), 18);
        assert_eq!(r[0], 1.0);
        assert!((r[17] - 0.9).abs() < 1e-15);
        assert!((r[5] - (1.0 - 0.5 / 17.0)).abs() < 1e-15);
        // ViT: 12 blocks (24 sub-layers), keep = 1 − 0.1·⌊s/2⌋/11.
        let v = keep_ramp(12, 0.1);
        for s in 0..24 {
            let want = 1.0 - 0.1 * (s / 2) as f64 / 11.0;
            assert!((v[s / 2] - want).abs() < 1e-15, "{s}");
        }
        assert!(validate_rate(1.0).is_err());
        assert!(validate_rate(f64::NAN).is_err());
        assert!(validate_rate(0.0).is_ok());
    }

    #[test]
    fn interleave_and_split_are_inverse() {
        let all = interleave(&[1, 4], &[10, 11], &[0, 2, 3, 5]);
        assert_eq!(all, [0, 10, 2, 3, 11, 5]);
        assert_eq!(split_keeps(&[1, 4], &all), (vec![0, 2, 3, 5], vec![10, 11]));
    }

    #[test]
    fn keep_scales_are_zero_or_inverse_keep_with_the_keep_frequency() {
        let mut rng = Rng::new(7);
        let s = draw_keep_scales(0.8, 20_000, &mut rng);
        let kept = s.iter().filter(|&&x| x != 0.0).count();
        assert!(s.iter().all(|&x| x == 0.0 || x == 1.25));
        let frac = kept as f64 / s.len() as f64;
        assert!((frac - 0.8).abs() < 0.02, "{frac}");
    }
}
