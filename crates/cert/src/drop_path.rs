//! The net certificate of a drop-path render (docs/conventions.md §13): the keep
//! scales are graph inputs, so the step is a deterministic function of them
//! and certifies like any other. The whole-net tie takes the keeps as blocks
//! of the tie (a generic point: every keep moves, `ddrop_path` rows); the
//! parameter ties hold them fixed at one host draw of the masks on the net's
//! ramp (0 or 1/keep per example, `layers::droppath::FixedKeeps`), the
//! function the train step computes at that draw.

use crate::net::{joint_tie, NetCertificate};
use crate::tie::TieOptions;
use ir::rng::Rng;
use layers::droppath::{draw_net_keeps, FixedKeeps};
use layers::net::NetSpec;
use layers::LayerError;
use std::time::Instant;

/// The stream the certificate's masks are drawn from (mixed with the seed).
const MASK_SALT: u64 = 0x6470_6d61_736b;

/// The masks [`certify_net_drop_path`] fixes for seed `seed`: per site, one
/// keep scale per example.
pub fn certificate_masks(
    spec: &NetSpec,
    batch: i64,
    rate: f64,
    seed: u64,
) -> Result<Vec<Vec<f32>>, LayerError> {
    let mut rng = Rng::salted(seed, MASK_SALT);
    let keeps = draw_net_keeps(spec, rate, batch.max(1) as usize, &mut rng)?;
    if keeps.is_empty() {
        return Err(LayerError(format!(
            "--drop-path: {} has no drop-path sites (no block with a residual branch opts in)",
            spec.name
        )));
    }
    Ok(keeps)
}

/// Certify the drop-path render of `spec` at batch `batch` and maximum drop
/// rate `rate`: the whole drop-path chain with the keeps as tie blocks, then
/// the drop-path loss chain with the keeps fixed at
/// [`certificate_masks`]`(…, opts.seed)`.
pub fn certify_net_drop_path(
    spec: &NetSpec,
    batch: i64,
    rate: f64,
    opts: &TieOptions,
) -> Result<NetCertificate, LayerError> {
    let t0 = Instant::now();
    let keeps = certificate_masks(spec, batch, rate, opts.seed)?;
    let input = spec.input_type(batch);
    let whole = joint_tie(&spec.chain_with_drop_path()?, &input, opts);
    let fixed = FixedKeeps {
        chain: spec.chain_with_loss_drop_path()?,
        keeps,
    };
    let params = joint_tie(&fixed, &input, opts);
    Ok(NetCertificate {
        net: spec.name.clone(),
        batch,
        whole,
        params,
        seconds: t0.elapsed().as_secs_f64(),
    })
}
