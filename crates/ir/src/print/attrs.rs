//! Attribute spellings shared by the pretty and generic forms: integer lists
//! and arrays, padding pairs, replica groups, precision configs, dot and
//! convolution dimension numbers, attribute dictionaries.

use crate::module::Op;
use crate::ops::{ConvDims, DotDims};

pub(super) fn list(v: &[i64]) -> String {
    let parts: Vec<String> = v.iter().map(i64::to_string).collect();
    format!("[{}]", parts.join(", "))
}

pub(super) fn bool_list(v: &[bool]) -> String {
    let parts: Vec<&str> = v
        .iter()
        .map(|b| if *b { "true" } else { "false" })
        .collect();
    format!("[{}]", parts.join(", "))
}

pub(super) fn array_i64(v: &[i64]) -> String {
    if v.is_empty() {
        return "array<i64>".to_string();
    }
    let parts: Vec<String> = v.iter().map(i64::to_string).collect();
    format!("array<i64: {}>", parts.join(", "))
}

pub(super) fn array_i1(v: &[bool]) -> String {
    if v.is_empty() {
        return "array<i1>".to_string();
    }
    let parts: Vec<&str> = v
        .iter()
        .map(|b| if *b { "true" } else { "false" })
        .collect();
    format!("array<i1: {}>", parts.join(", "))
}

pub(super) fn pairs(v: &[(i64, i64)]) -> String {
    let parts: Vec<String> = v.iter().map(|(a, b)| format!("[{a}, {b}]")).collect();
    format!("[{}]", parts.join(", "))
}

/// `dense<[[lo, hi], …]> : tensor<Nx2xi64>`, the padding attribute spelling.
pub(super) fn dense_pairs(v: &[(i64, i64)]) -> String {
    if v.is_empty() {
        return "dense<> : tensor<0x2xi64>".to_string();
    }
    format!("dense<{}> : tensor<{}x2xi64>", pairs(v), v.len())
}

/// `dense<[[0, 1], [2, 3]]> : tensor<2x2xi64>` for replica groups.
pub(super) fn dense_groups(groups: &[Vec<i64>]) -> String {
    let width = groups.first().map_or(0, Vec::len);
    let ty = format!("tensor<{}x{}xi64>", groups.len(), width);
    if groups.is_empty() || width == 0 {
        return format!("dense<> : {ty}");
    }
    let rows: Vec<String> = groups.iter().map(|g| list(g)).collect();
    format!("dense<[{}]> : {ty}", rows.join(", "))
}

/// The mnemonics of a precision config stored in its attribute spelling
/// (`[#stablehlo<precision DEFAULT>, #stablehlo<precision HIGH>]`), if it is one.
pub(super) fn precision_mnemonics(p: &str) -> Option<Vec<&str>> {
    let inner = p.trim().strip_prefix('[')?.strip_suffix(']')?.trim();
    if inner.is_empty() {
        return Some(Vec::new());
    }
    inner
        .split(',')
        .map(|e| {
            let name = e
                .trim()
                .strip_prefix("#stablehlo<precision")?
                .strip_suffix('>')?
                .trim();
            let ok =
                !name.is_empty() && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
            ok.then_some(name)
        })
        .collect()
}

pub(super) fn dot_attr(d: &DotDims) -> String {
    let mut parts = Vec::new();
    if !d.lhs_batch.is_empty() {
        parts.push(format!("lhs_batching_dimensions = {}", list(&d.lhs_batch)));
    }
    if !d.rhs_batch.is_empty() {
        parts.push(format!("rhs_batching_dimensions = {}", list(&d.rhs_batch)));
    }
    if !d.lhs_contracting.is_empty() {
        parts.push(format!(
            "lhs_contracting_dimensions = {}",
            list(&d.lhs_contracting)
        ));
    }
    if !d.rhs_contracting.is_empty() {
        parts.push(format!(
            "rhs_contracting_dimensions = {}",
            list(&d.rhs_contracting)
        ));
    }
    format!("#stablehlo.dot<{}>", parts.join(", "))
}

/// `[b, f, 0, 1]x[o, i, 0, 1]->[b, f, 0, 1]`, or `None` when the dimension
/// numbers are not a permutation of each tensor's dimensions.
pub(super) fn conv_dims_compact(d: &ConvDims) -> Option<String> {
    fn labels(first: (i64, &str), second: (i64, &str), spatial: &[i64]) -> Option<String> {
        let rank = spatial.len() + 2;
        let mut slots: Vec<Option<String>> = vec![None; rank];
        let mut put = |pos: i64, label: String| -> Option<()> {
            let slot = slots.get_mut(usize::try_from(pos).ok()?)?;
            if slot.is_some() {
                return None;
            }
            *slot = Some(label);
            Some(())
        };
        put(first.0, first.1.to_string())?;
        put(second.0, second.1.to_string())?;
        for (k, p) in spatial.iter().enumerate() {
            put(*p, k.to_string())?;
        }
        let parts: Option<Vec<String>> = slots.into_iter().collect();
        Some(format!("[{}]", parts?.join(", ")))
    }
    let n = d.input_spatial.len();
    if d.kernel_spatial.len() != n || d.output_spatial.len() != n {
        return None;
    }
    Some(format!(
        "{}x{}->{}",
        labels(
            (d.input_batch, "b"),
            (d.input_feature, "f"),
            &d.input_spatial
        )?,
        labels(
            (d.kernel_output_feature, "o"),
            (d.kernel_input_feature, "i"),
            &d.kernel_spatial
        )?,
        labels(
            (d.output_batch, "b"),
            (d.output_feature, "f"),
            &d.output_spatial
        )?
    ))
}

pub(super) fn conv_dims_attr(d: &ConvDims) -> String {
    match conv_dims_compact(d) {
        Some(c) => format!("#stablehlo.conv<{c}>"),
        None => format!(
            "#stablehlo.conv<raw input_batch_dimension = {}, input_feature_dimension = {}, \
             input_spatial_dimensions = {}, kernel_input_feature_dimension = {}, \
             kernel_output_feature_dimension = {}, kernel_spatial_dimensions = {}, \
             output_batch_dimension = {}, output_feature_dimension = {}, \
             output_spatial_dimensions = {}>",
            d.input_batch,
            d.input_feature,
            list(&d.input_spatial),
            d.kernel_input_feature,
            d.kernel_output_feature,
            list(&d.kernel_spatial),
            d.output_batch,
            d.output_feature,
            list(&d.output_spatial)
        ),
    }
}

/// `name = value, …` (a unit attribute, stored with an empty value, prints bare).
pub(super) fn dict_body(entries: &[(String, String)]) -> String {
    let parts: Vec<String> = entries
        .iter()
        .map(|(k, v)| {
            if v.is_empty() {
                k.clone()
            } else {
                format!("{k} = {v}")
            }
        })
        .collect();
    parts.join(", ")
}

/// ` {extra attrs}` or nothing.
pub(super) fn extras(op: &Op) -> String {
    if op.extra_attrs.is_empty() {
        String::new()
    } else {
        format!(" {{{}}}", dict_body(&op.extra_attrs))
    }
}
