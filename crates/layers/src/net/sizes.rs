//! The size suffixes of a built-in net's name, printed and parsed in one
//! place for every family: `base`, then `-w{width}` when the width is not
//! the family's, `-k{K}` unless the net has the default 10 classes at the
//! default size, `-{H}x{W}` unless 224², `-p{P}` when a patch size is not the
//! family's (`resnet34-k10-64x64`, `mobilenetv2-k1000`, `vit-tiny-k10-32x32-p4`).

use super::NetSpec;
use std::iter::Peekable;
use std::str::Split;

/// The input size every family defaults to.
pub(super) const HW: (i64, i64) = (224, 224);
/// The class count every family defaults to.
pub(super) const CLASSES: i64 = 10;

/// A name's sizes; `width` and `patch` are `Some` only where they differ
/// from the family's own.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(super) struct Sizes {
    pub width: Option<i64>,
    pub classes: i64,
    pub hw: (i64, i64),
    pub patch: Option<i64>,
}

impl Sizes {
    /// The net `build` makes at the sizes `rest` spells, if it is the net
    /// `name` names: only the canonical spelling names a net (no
    /// `resnet34-k10`).
    pub fn build_named(
        name: &str,
        rest: &str,
        build: impl FnOnce(&Sizes) -> NetSpec,
    ) -> Option<NetSpec> {
        let net = build(&Sizes::parse(rest)?);
        (net.name == name).then_some(net)
    }

    /// `base` with these sizes' suffixes.
    pub fn name(&self, base: &str) -> String {
        let mut name = base.to_string();
        if let Some(w) = self.width {
            name.push_str(&format!("-w{w}"));
        }
        if self.classes != CLASSES || self.hw != HW || self.patch.is_some() {
            name.push_str(&format!("-k{}", self.classes));
        }
        if self.hw != HW {
            name.push_str(&format!("-{}x{}", self.hw.0, self.hw.1));
        }
        if let Some(p) = self.patch {
            name.push_str(&format!("-p{p}"));
        }
        name
    }

    /// The sizes `rest` (what follows a family's base: empty, or `-…`)
    /// spells, each positive, in the order [`Sizes::name`] writes them.
    /// `None` for anything else. A family checks the spelling is canonical
    /// by comparing the built net's name with the one asked for.
    pub fn parse(rest: &str) -> Option<Sizes> {
        let mut sizes = Sizes {
            width: None,
            classes: CLASSES,
            hw: HW,
            patch: None,
        };
        if rest.is_empty() {
            return Some(sizes);
        }
        let mut parts = rest.strip_prefix('-')?.split('-').peekable();
        sizes.width = tagged(&mut parts, 'w')?;
        sizes.classes = tagged(&mut parts, 'k')?.unwrap_or(CLASSES);
        if let Some(p) = parts.next_if(|p| p.contains('x')) {
            let (h, w) = p.split_once('x')?;
            sizes.hw = (h.parse().ok()?, w.parse().ok()?);
            if sizes.hw.0 < 1 || sizes.hw.1 < 1 {
                return None;
            }
        }
        sizes.patch = tagged(&mut parts, 'p')?;
        parts.next().is_none().then_some(sizes)
    }
}

/// The next part's positive number after `tag` when the part starts with
/// it (`Some(None)` when it does not; `None` for a bad number).
fn tagged(parts: &mut Peekable<Split<'_, char>>, tag: char) -> Option<Option<i64>> {
    match parts.next_if(|p| p.starts_with(tag)) {
        Some(p) => Some(Some(p[1..].parse().ok().filter(|&v: &i64| v >= 1)?)),
        None => Some(None),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_suffix_round_trips_and_junk_is_refused() {
        for name in [
            "net",
            "net-k1000",
            "net-k10-64x64",
            "net-w32-k1000",
            "net-k10-32x32-p4",
            "net-w96-k10-32x48-p8",
        ] {
            let sizes = Sizes::parse(&name[3..]).unwrap_or_else(|| panic!("{name}"));
            assert_eq!(sizes.name("net"), name);
        }
        assert_eq!(Sizes::parse("-k1000").unwrap().classes, 1000);
        assert_eq!(Sizes::parse("-k10-64x32").unwrap().hw, (64, 32));
        for junk in [
            "k10",
            "-k0",
            "-k-3",
            "-kx",
            "-64x64-k10",
            "-k10-0x64",
            "-k10-64x64-q2",
            "-p4-k10",
            "-k10-",
            "-",
        ] {
            assert_eq!(Sizes::parse(junk), None, "{junk}");
        }
    }
}
