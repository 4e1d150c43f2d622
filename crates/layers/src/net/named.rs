//! Named layer lists — a net's `layers`, a block's `main`, `shortcut`,
//! `post` — and what every list answers the same way: its build into a
//! `Chain`, its field checks, its batch-norm world, and its file form (an
//! array of tables, each `name`, `op` and the kind's fields).

use super::block::{BuildCtx, FieldError};
use super::LayerSpec;
use crate::combinators::Chain;
use crate::layer::LayerError;
use crate::ops::norm::BnWorld;
use ir::TensorType;

/// Layers in forward order, each named; names scope parameters and kink sites.
pub type Layers = Vec<(String, LayerSpec)>;

/// The chain of `layers` at input `input`, and its output type. Errors name
/// the layer (`conv1: …`); a layer whose output has an empty dimension is an
/// error (a spatial size that shrank to 0 does not fit the input).
pub fn build_chain(
    layers: &[(String, LayerSpec)],
    input: &TensorType,
    ctx: &BuildCtx,
) -> Result<(Chain, TensorType), LayerError> {
    let mut chain = Chain::new();
    let mut ty = input.clone();
    for (name, spec) in layers {
        let at = |e: LayerError| LayerError(format!("{name}: {e}"));
        let layer = spec.as_block().build(&ty, ctx).map_err(at)?;
        let out = layer.output_type(&ty).map_err(at)?;
        if out.shape.iter().any(|&d| d < 1) {
            return Err(at(LayerError(format!(
                "maps {ty} to {out}: the input is too small for it (a size reaches 0)"
            ))));
        }
        ty = out;
        chain.layers.push((name.clone(), layer));
    }
    Ok((chain, ty))
}

/// Every layer's own field checks, then the list's: names present and
/// distinct. `list` names the list in the error's field path (`layers`,
/// `main`).
pub fn validate_list(list: &str, layers: &[(String, LayerSpec)]) -> Result<(), FieldError> {
    for (i, (name, spec)) in layers.iter().enumerate() {
        if name.is_empty() {
            return Err(
                FieldError::new("name", "name = \"\": expected a layer name").inside(list, i, name),
            );
        }
        if layers[..i].iter().any(|(n, _)| n == name) {
            return Err(FieldError::new(
                "name",
                format!("name = \"{name}\": the name is used twice in `{list}`"),
            )
            .inside(list, i, name));
        }
        spec.as_block()
            .validate()
            .map_err(|e| e.inside(list, i, name))?;
    }
    Ok(())
}

/// The world of the first batch norm among `lists`, if any holds one.
pub fn first_bn_world(lists: &[&Layers]) -> Option<BnWorld> {
    lists
        .iter()
        .flat_map(|l| l.iter())
        .find_map(|(_, s)| s.bn_world())
}

/// Put every batch norm of `lists` in `world`.
pub fn set_bn_worlds(lists: &mut [&mut Layers], world: BnWorld) {
    for l in lists.iter_mut() {
        for (_, s) in l.iter_mut() {
            s.set_bn_world(world);
        }
    }
}

/// The file form of a layer list (`#[serde(with = "tables")]`): each entry a
/// table `{ name, op, …the kind's fields }`. Unknown fields are refused by
/// the kind's payload (`deny_unknown_fields`).
pub mod tables {
    use super::{LayerSpec, Layers};
    use serde::{Deserialize, Deserializer, Serialize, Serializer};

    #[derive(Serialize)]
    struct Ref<'a> {
        name: &'a str,
        #[serde(flatten)]
        spec: &'a LayerSpec,
    }

    #[derive(Deserialize)]
    struct Owned {
        name: String,
        #[serde(flatten)]
        spec: LayerSpec,
    }

    pub fn serialize<S: Serializer>(layers: &Layers, s: S) -> Result<S::Ok, S::Error> {
        s.collect_seq(layers.iter().map(|(name, spec)| Ref { name, spec }))
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Layers, D::Error> {
        Ok(Vec::<Owned>::deserialize(d)?
            .into_iter()
            .map(|o| (o.name, o.spec))
            .collect())
    }
}
