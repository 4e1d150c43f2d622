//! Printing modules as the pretty StableHLO text MLIR (and JAX) writes.
//!
//! Owns the canonical spelling of every op: the pretty assembly form where
//! StableHLO has one (`stablehlo.add %a, %b : tensor<f32>`), the generic form
//! (`"stablehlo.reduce_window"(…) <{…}> ({…}) : …`) where it has none or where
//! the op is malformed enough that the pretty form cannot express it. Also owns
//! the float literal spelling shared with the parser (`float_literal`,
//! `round_to_elem`, `float_from_bits`). Printing never panics, even on an
//! invalid module: unknown values print as `%unknown<N>`.

use crate::module::{Block, Func, Module, Op, ValueId, Visibility};
use crate::ops::{
    ConvAttrs, ConvDims, DenseData, DotDims, OpKind, ScatterWindowAttrs, WindowAttrs,
};
use crate::types::{ElemType, TensorType};
use std::collections::HashMap;
use std::fmt::Write;

/// The whole module: `module @name attributes {…} { func.func … }`.
pub fn print_module(m: &Module) -> String {
    let mut out = String::new();
    out.push_str("module");
    if let Some(name) = &m.name {
        out.push(' ');
        out.push_str(&symbol(name));
    }
    if let Some(attrs) = &m.attrs {
        let _ = write!(out, " attributes {{{attrs}}}");
    }
    out.push_str(" {\n");
    for f in &m.funcs {
        FuncPrinter::new(f).func(&mut out, 2);
    }
    out.push_str("}\n");
    out
}

/// One function, unindented: `func.func public @main(…) -> … { … }`.
pub fn print_func(f: &Func) -> String {
    let mut out = String::new();
    FuncPrinter::new(f).func(&mut out, 0);
    out
}

/// `@name`, quoted when the name is not a bare MLIR identifier.
pub(crate) fn symbol(name: &str) -> String {
    if is_bare_id(name) {
        format!("@{name}")
    } else {
        format!("@{}", quote(name))
    }
}

fn is_bare_id(s: &str) -> bool {
    let mut chars = s.chars();
    match chars.next() {
        Some(c) if c.is_ascii_alphabetic() || c == '_' => {}
        _ => return false,
    }
    chars.all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '$' | '.'))
}

/// An MLIR string literal with `\\`, `\"` and non-printable bytes escaped as `\XX`.
fn quote(s: &str) -> String {
    let mut out = String::from("\"");
    for b in s.bytes() {
        match b {
            b'"' => out.push_str("\\\""),
            b'\\' => out.push_str("\\\\"),
            0x20..=0x7e => out.push(b as char),
            _ => {
                let _ = write!(out, "\\{b:02X}");
            }
        }
    }
    out.push('"');
    out
}

// ---------------------------------------------------------------------------
// Float literals (shared with the parser).

/// Exponent and mantissa bits of a float element type.
fn float_format(elem: ElemType) -> (u32, u32) {
    match elem {
        ElemType::F16 => (5, 10),
        ElemType::BF16 => (8, 7),
        ElemType::F64 => (11, 52),
        _ => (8, 23),
    }
}

/// `x` rounded (to nearest, ties to even) to the float element type `elem`,
/// returned as the exactly equal f64. Overflow gives ±inf, as MLIR's APFloat does.
pub fn round_to_elem(x: f64, elem: ElemType) -> f64 {
    match elem {
        ElemType::F64 => x,
        ElemType::F32 => x as f32 as f64,
        _ => {
            if !x.is_finite() || x == 0.0 {
                return x;
            }
            let (e, m) = float_format(elem);
            let emax = (1i32 << (e - 1)) - 1;
            let emin = 1 - emax;
            let a = x.abs();
            // floor(log2(a)) from the f64 exponent field; `a` is a normal f64 here
            // whenever it matters (f64 subnormals are far below every 16-bit format).
            let exp = ((a.to_bits() >> 52) as i32 & 0x7ff) - 1023;
            let quantum = 2f64.powi(exp.max(emin) - m as i32);
            let r = (a / quantum).round_ties_even() * quantum;
            let max_finite = (2.0 - 2f64.powi(-(m as i32))) * 2f64.powi(emax);
            let r = if r > max_finite { f64::INFINITY } else { r };
            r.copysign(x)
        }
    }
}

/// The value of the `elem`-typed float whose storage bits are `bits`; `None` when
/// `bits` does not fit the type's width.
pub(crate) fn float_from_bits(bits: u64, elem: ElemType) -> Option<f64> {
    match elem {
        ElemType::F64 => Some(f64::from_bits(bits)),
        ElemType::F32 => u32::try_from(bits).ok().map(|b| f32::from_bits(b) as f64),
        ElemType::F16 | ElemType::BF16 => {
            if bits > 0xffff {
                return None;
            }
            let (e, m) = float_format(elem);
            let sign = if bits >> (e + m) & 1 == 1 { -1.0 } else { 1.0 };
            let exp_field = (bits >> m) & ((1 << e) - 1);
            let frac = (bits & ((1 << m) - 1)) as f64;
            let bias = (1i32 << (e - 1)) - 1;
            let v = if exp_field == (1 << e) - 1 {
                if frac == 0.0 {
                    f64::INFINITY
                } else {
                    f64::NAN
                }
            } else if exp_field == 0 {
                frac * 2f64.powi(1 - bias - m as i32)
            } else {
                (1.0 + frac * 2f64.powi(-(m as i32))) * 2f64.powi(exp_field as i32 - bias)
            };
            Some(sign * v)
        }
        _ => None,
    }
}

/// Storage bits of a non-finite value, for the hex spelling MLIR uses for them.
fn nonfinite_bits(x: f64, elem: ElemType) -> String {
    let neg = x.is_sign_negative();
    match elem {
        ElemType::F64 => format!("0x{:016X}", x.to_bits()),
        ElemType::BF16 => format!("0x{:04X}", (x as f32).to_bits() >> 16),
        ElemType::F16 => {
            let mag: u32 = if x.is_nan() { 0x7E00 } else { 0x7C00 };
            format!("0x{:04X}", mag | if neg { 0x8000 } else { 0 })
        }
        _ => format!("0x{:08X}", (x as f32).to_bits()),
    }
}

/// `d.dddddde±XX` with `digits` digits after the point: MLIR's `%e` style.
fn sci(x: f64, digits: usize) -> String {
    normalise_exp(&format!("{x:.digits$e}"))
}

/// Rust writes `1.5e-3` / `1e0`; MLIR wants a decimal point in the mantissa and a
/// signed two-digit exponent: `1.5e-03`, `1.0e+00`.
fn normalise_exp(s: &str) -> String {
    let (mant, exp) = s.split_once('e').unwrap_or((s, "0"));
    let exp: i32 = exp.parse().unwrap_or(0);
    let mant = if mant.contains('.') {
        mant.to_string()
    } else {
        format!("{mant}.0")
    };
    let sign = if exp < 0 { '-' } else { '+' };
    format!("{mant}e{sign}{:02}", exp.abs())
}

/// Parse a decimal literal as an `elem` value (correctly rounded).
pub(crate) fn decimal_to_elem(text: &str, elem: ElemType) -> Option<f64> {
    match elem {
        ElemType::F32 => text.parse::<f32>().ok().map(|v| v as f64),
        _ => text.parse::<f64>().ok().map(|v| round_to_elem(v, elem)),
    }
}

/// The literal MLIR prints for a float of type `elem`: `%e` with six digits when
/// that reads back to exactly `x`, else the shortest exact spelling, and hex bits
/// for inf/NaN.
pub fn float_literal(x: f64, elem: ElemType) -> String {
    if !x.is_finite() {
        return nonfinite_bits(x, elem);
    }
    let same = |s: &str| decimal_to_elem(s, elem).map(f64::to_bits) == Some(x.to_bits());
    let six = sci(x, 6);
    if same(&six) {
        return six;
    }
    let shortest = match elem {
        ElemType::F32 => normalise_exp(&format!("{:e}", x as f32)),
        ElemType::F64 => normalise_exp(&format!("{x:e}")),
        _ => (7..=17)
            .map(|d| sci(x, d))
            .find(|s| same(s))
            .unwrap_or_default(),
    };
    if same(&shortest) {
        shortest
    } else {
        // `x` is not a value of `elem` at all (an invalid constant): print it at
        // f64 precision so at least nothing is hidden.
        normalise_exp(&format!("{x:e}"))
    }
}

fn int_literal(v: i64, elem: ElemType) -> String {
    match elem {
        ElemType::I1 => (if v != 0 { "true" } else { "false" }).to_string(),
        ElemType::UI64 => (v as u64).to_string(),
        _ => v.to_string(),
    }
}

/// `dense<…>` (without the trailing `: type`): a splat for one stored value,
/// nested lists following `ty`'s shape otherwise.
pub fn dense_literal(data: &DenseData, ty: &TensorType) -> String {
    let elems: Vec<String> = match data {
        DenseData::Float(v) => v.iter().map(|x| float_literal(*x, ty.elem)).collect(),
        DenseData::Int(v) => v.iter().map(|x| int_literal(*x, ty.elem)).collect(),
    };
    let mut out = String::from("dense<");
    let count = ty
        .shape
        .iter()
        .try_fold(1usize, |acc, d| acc.checked_mul(usize::try_from(*d).ok()?));
    if elems.len() == 1 {
        out.push_str(&elems[0]);
    } else if elems.is_empty() {
        // `dense<>` is MLIR's spelling of a zero-element tensor.
    } else if count == Some(elems.len()) && !ty.shape.is_empty() {
        nested(&mut out, &elems, &ty.shape);
    } else {
        // Data and shape disagree (an invalid module); a flat list keeps every value.
        out.push('[');
        out.push_str(&elems.join(", "));
        out.push(']');
    }
    out.push('>');
    out
}

fn nested(out: &mut String, elems: &[String], shape: &[i64]) {
    match shape.split_first() {
        None => out.push_str(elems.first().map(String::as_str).unwrap_or("")),
        Some((&d, rest)) => {
            let d = d.max(1) as usize;
            let chunk = (elems.len() / d).max(1);
            out.push('[');
            for (i, part) in elems.chunks(chunk).enumerate() {
                if i > 0 {
                    out.push_str(", ");
                }
                nested(out, part, rest);
            }
            out.push(']');
        }
    }
}

// ---------------------------------------------------------------------------
// Attribute spellings shared by pretty and generic forms.

fn list(v: &[i64]) -> String {
    let parts: Vec<String> = v.iter().map(i64::to_string).collect();
    format!("[{}]", parts.join(", "))
}

fn bool_list(v: &[bool]) -> String {
    let parts: Vec<&str> = v
        .iter()
        .map(|b| if *b { "true" } else { "false" })
        .collect();
    format!("[{}]", parts.join(", "))
}

fn array_i64(v: &[i64]) -> String {
    if v.is_empty() {
        return "array<i64>".to_string();
    }
    let parts: Vec<String> = v.iter().map(i64::to_string).collect();
    format!("array<i64: {}>", parts.join(", "))
}

fn array_i1(v: &[bool]) -> String {
    if v.is_empty() {
        return "array<i1>".to_string();
    }
    let parts: Vec<&str> = v
        .iter()
        .map(|b| if *b { "true" } else { "false" })
        .collect();
    format!("array<i1: {}>", parts.join(", "))
}

fn pairs(v: &[(i64, i64)]) -> String {
    let parts: Vec<String> = v.iter().map(|(a, b)| format!("[{a}, {b}]")).collect();
    format!("[{}]", parts.join(", "))
}

/// `dense<[[lo, hi], …]> : tensor<Nx2xi64>`, the padding attribute spelling.
fn dense_pairs(v: &[(i64, i64)]) -> String {
    if v.is_empty() {
        return "dense<> : tensor<0x2xi64>".to_string();
    }
    format!("dense<{}> : tensor<{}x2xi64>", pairs(v), v.len())
}

/// `dense<[[0, 1], [2, 3]]> : tensor<2x2xi64>` for replica groups.
fn dense_groups(groups: &[Vec<i64>]) -> String {
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
pub(crate) fn precision_mnemonics(p: &str) -> Option<Vec<&str>> {
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

fn dot_attr(d: &DotDims) -> String {
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
fn conv_dims_compact(d: &ConvDims) -> Option<String> {
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

fn conv_dims_attr(d: &ConvDims) -> String {
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

/// The inherent attributes of `kind` as `(name, value)`, sorted by name as MLIR
/// prints a properties dictionary; defaults are left out where StableHLO allows.
fn inherent_attrs(kind: &OpKind, result_ty: Option<&TensorType>) -> Vec<(String, String)> {
    let mut a: Vec<(String, String)> = Vec::new();
    let mut put = |k: &str, v: String| a.push((k.to_string(), v));
    match kind {
        OpKind::Constant(d) => {
            let ty = result_ty
                .cloned()
                .unwrap_or_else(|| TensorType::scalar(ElemType::F32));
            put("value", format!("{} : {ty}", dense_literal(d, &ty)));
        }
        OpKind::Compare {
            direction,
            compare_type,
        } => {
            put(
                "comparison_direction",
                format!("#stablehlo<comparison_direction {}>", direction.mnemonic()),
            );
            if let Some(t) = compare_type {
                put(
                    "compare_type",
                    format!("#stablehlo<comparison_type {}>", t.mnemonic()),
                );
            }
        }
        OpKind::Transpose { permutation } => put("permutation", array_i64(permutation)),
        OpKind::BroadcastInDim { dims } => put("broadcast_dimensions", array_i64(dims)),
        OpKind::Reverse { dims } => put("dimensions", array_i64(dims)),
        OpKind::Slice {
            start,
            limit,
            strides,
        } => {
            put("start_indices", array_i64(start));
            put("limit_indices", array_i64(limit));
            put("strides", array_i64(strides));
        }
        OpKind::Pad {
            low,
            high,
            interior,
        } => {
            put("edge_padding_low", array_i64(low));
            put("edge_padding_high", array_i64(high));
            put("interior_padding", array_i64(interior));
        }
        OpKind::Concatenate { dim } => put("dimension", format!("{dim} : i64")),
        OpKind::Iota { dim } => put("iota_dimension", format!("{dim} : i64")),
        OpKind::DotGeneral {
            dims,
            precision_config,
        } => {
            put("dot_dimension_numbers", dot_attr(dims));
            if let Some(p) = precision_config {
                put("precision_config", p.clone());
            }
        }
        OpKind::Convolution(c) => {
            put(
                "batch_group_count",
                format!("{} : i64", c.batch_group_count),
            );
            put("dimension_numbers", conv_dims_attr(&c.dims));
            put(
                "feature_group_count",
                format!("{} : i64", c.feature_group_count),
            );
            put("lhs_dilation", array_i64(&c.lhs_dilation));
            put("padding", dense_pairs(&c.padding));
            if let Some(p) = &c.precision_config {
                put("precision_config", p.clone());
            }
            put("rhs_dilation", array_i64(&c.rhs_dilation));
            if c.window_reversal.iter().any(|r| *r) {
                put("window_reversal", array_i1(&c.window_reversal));
            }
            put("window_strides", array_i64(&c.window_strides));
        }
        OpKind::Reduce { dims } => put("dimensions", array_i64(dims)),
        OpKind::ReduceWindow(w) => window_attrs(w, &mut put),
        OpKind::SelectAndScatter(s) => scatter_window_attrs(s, &mut put),
        OpKind::AllReduce {
            replica_groups,
            channel_id,
            use_global_device_ids,
        } => {
            if let Some((handle, ty)) = channel_id {
                put(
                    "channel_handle",
                    format!("#stablehlo.channel_handle<handle = {handle}, type = {ty}>"),
                );
            }
            put("replica_groups", dense_groups(replica_groups));
            if *use_global_device_ids {
                put("use_global_device_ids", String::new());
            }
        }
        OpKind::Call { callee } => put("callee", symbol(callee)),
        OpKind::Unary(_)
        | OpKind::Binary(_)
        | OpKind::Select
        | OpKind::Clamp
        | OpKind::Convert
        | OpKind::Reshape
        | OpKind::Return
        | OpKind::FuncReturn => {}
    }
    a.sort_by(|x, y| x.0.cmp(&y.0));
    a
}

fn window_attrs(w: &WindowAttrs, put: &mut impl FnMut(&str, String)) {
    if w.base_dilations.iter().any(|d| *d != 1) {
        put("base_dilations", array_i64(&w.base_dilations));
    }
    if w.padding.iter().any(|p| *p != (0, 0)) {
        put("padding", dense_pairs(&w.padding));
    }
    if w.window_dilations.iter().any(|d| *d != 1) {
        put("window_dilations", array_i64(&w.window_dilations));
    }
    put("window_dimensions", array_i64(&w.window_dimensions));
    if w.window_strides.iter().any(|d| *d != 1) {
        put("window_strides", array_i64(&w.window_strides));
    }
}

fn scatter_window_attrs(s: &ScatterWindowAttrs, put: &mut impl FnMut(&str, String)) {
    if s.padding.iter().any(|p| *p != (0, 0)) {
        put("padding", dense_pairs(&s.padding));
    }
    put("window_dimensions", array_i64(&s.window_dimensions));
    if s.window_strides.iter().any(|d| *d != 1) {
        put("window_strides", array_i64(&s.window_strides));
    }
}

/// `name = value, …` (a unit attribute, stored with an empty value, prints bare).
fn dict_body(entries: &[(String, String)]) -> String {
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
fn extras(op: &Op) -> String {
    if op.extra_attrs.is_empty() {
        String::new()
    } else {
        format!(" {{{}}}", dict_body(&op.extra_attrs))
    }
}

// ---------------------------------------------------------------------------
// Functions, blocks and ops.

struct FuncPrinter<'f> {
    func: &'f Func,
    names: HashMap<ValueId, String>,
    types: HashMap<ValueId, TensorType>,
    next_arg: usize,
    next_value: usize,
    /// Float constants are `%cst`, `%cst_0`, …; integer ones `%c`, `%c_0`, … (MLIR's style).
    next_cst: Option<usize>,
    next_c: Option<usize>,
}

impl<'f> FuncPrinter<'f> {
    fn new(func: &'f Func) -> Self {
        FuncPrinter {
            func,
            names: HashMap::new(),
            types: HashMap::new(),
            next_arg: 0,
            next_value: 0,
            next_cst: None,
            next_c: None,
        }
    }

    fn name(&self, v: ValueId) -> String {
        self.names
            .get(&v)
            .cloned()
            .unwrap_or_else(|| format!("%unknown{}", v.0))
    }

    fn ty(&self, v: ValueId) -> String {
        match self.types.get(&v) {
            Some(t) => t.to_string(),
            None => "tensor<unknown>".to_string(),
        }
    }

    fn define(&mut self, v: ValueId, name: String, ty: &TensorType) {
        self.names.insert(v, name);
        self.types.insert(v, ty.clone());
    }

    fn define_arg(&mut self, v: ValueId, ty: &TensorType) -> String {
        let name = format!("%arg{}", self.next_arg);
        self.next_arg += 1;
        self.define(v, name.clone(), ty);
        name
    }

    fn func(mut self, out: &mut String, indent: usize) {
        let f = self.func;
        let pad = " ".repeat(indent);
        let vis = match f.visibility {
            Visibility::Public => "public",
            Visibility::Private => "private",
        };
        let _ = write!(out, "{pad}func.func {vis} {}(", symbol(&f.name));
        for (i, p) in f.params.iter().enumerate() {
            if i > 0 {
                out.push_str(", ");
            }
            let name = self.define_arg(p.value, &p.ty);
            if let Some((v, t)) = f.body.args.get(i) {
                if *v != p.value {
                    self.define(*v, name.clone(), t);
                }
            }
            let _ = write!(out, "{name}: {}", p.ty);
            if let Some(a) = &p.attrs {
                let _ = write!(out, " {{{a}}}");
            }
        }
        out.push(')');
        let single_plain = f.results.len() == 1 && f.results[0].attrs.is_none();
        if single_plain {
            let _ = write!(out, " -> {}", f.results[0].ty);
        } else if !f.results.is_empty() {
            let parts: Vec<String> = f
                .results
                .iter()
                .map(|r| match &r.attrs {
                    Some(a) => format!("{} {{{a}}}", r.ty),
                    None => r.ty.to_string(),
                })
                .collect();
            let _ = write!(out, " -> ({})", parts.join(", "));
        }
        if let Some(a) = &f.attrs {
            let _ = write!(out, " attributes {{{a}}}");
        }
        out.push_str(" {\n");
        for op in &f.body.ops {
            self.op(out, op, indent + 2);
        }
        let _ = writeln!(out, "{pad}}}");
    }

    fn operand_list(&self, op: &Op) -> String {
        let parts: Vec<String> = op.operands.iter().map(|v| self.name(*v)).collect();
        parts.join(", ")
    }

    fn operand_types(&self, op: &Op) -> Vec<String> {
        op.operands.iter().map(|v| self.ty(*v)).collect()
    }

    fn result_types(op: &Op) -> Vec<String> {
        op.results.iter().map(|(_, t)| t.to_string()).collect()
    }

    /// `(A, B) -> R`, `(A) -> (R, S)`, `() -> ()`.
    fn functional(&self, op: &Op) -> String {
        let ins = self.operand_types(op).join(", ");
        let outs = Self::result_types(op);
        if outs.len() == 1 {
            format!("({ins}) -> {}", outs[0])
        } else {
            format!("({ins}) -> ({})", outs.join(", "))
        }
    }

    /// StableHLO's `SameOperandsAndResultType` spelling: one type when every
    /// operand and the result agree, the functional type otherwise.
    fn same_type(&self, op: &Op) -> String {
        let ins = self.operand_types(op);
        let outs = Self::result_types(op);
        if outs.len() == 1 && ins.iter().all(|t| *t == outs[0]) {
            outs[0].clone()
        } else {
            self.functional(op)
        }
    }

    /// Names the op's results; returns the `%r = ` prefix (empty for none).
    fn results_prefix(&mut self, op: &Op) -> String {
        match op.results.len() {
            0 => String::new(),
            1 => {
                let (v, t) = &op.results[0];
                let name = match &op.kind {
                    OpKind::Constant(DenseData::Float(_)) => {
                        Self::counter(&mut self.next_cst, "%cst")
                    }
                    OpKind::Constant(DenseData::Int(_)) => Self::counter(&mut self.next_c, "%c"),
                    _ => {
                        self.next_value += 1;
                        format!("%{}", self.next_value - 1)
                    }
                };
                self.define(*v, name.clone(), t);
                format!("{name} = ")
            }
            n => {
                let base = format!("%{}", self.next_value);
                self.next_value += 1;
                for (i, (v, t)) in op.results.iter().enumerate() {
                    self.define(*v, format!("{base}#{i}"), t);
                }
                format!("{base}:{n} = ")
            }
        }
    }

    fn counter(next: &mut Option<usize>, base: &str) -> String {
        let name = match next {
            None => base.to_string(),
            Some(k) => format!("{base}_{k}"),
        };
        *next = Some(next.map_or(0, |k| k + 1));
        name
    }

    /// Whether `op` has the shape its pretty form can express.
    fn pretty_ok(op: &Op) -> bool {
        let (nres, nreg) = (op.results.len(), op.regions.len());
        match &op.kind {
            OpKind::Return | OpKind::FuncReturn => nres == 0 && nreg == 0,
            OpKind::Call { .. } => nreg == 0,
            OpKind::Reduce { .. } => {
                let n = op.operands.len() / 2;
                nreg == 1 && n >= 1 && op.operands.len() == 2 * n && nres == n
            }
            OpKind::ReduceWindow(_) | OpKind::SelectAndScatter(_) | OpKind::AllReduce { .. } => {
                false
            }
            OpKind::Slice {
                start,
                limit,
                strides,
            } => {
                nres == 1 && nreg == 0 && start.len() == limit.len() && start.len() == strides.len()
            }
            OpKind::Convolution(c) => {
                let n = c.dims.input_spatial.len();
                nres == 1
                    && nreg == 0
                    && conv_dims_compact(&c.dims).is_some()
                    && c.window_strides.len() == n
                    && c.padding.len() == n
                    && c.lhs_dilation.len() == n
                    && c.rhs_dilation.len() == n
                    && (c.window_reversal.len() == n || c.window_reversal.iter().all(|r| !r))
            }
            _ => nres == 1 && nreg == 0,
        }
    }

    fn op(&mut self, out: &mut String, op: &Op, indent: usize) {
        let pad = " ".repeat(indent);
        out.push_str(&pad);
        if !Self::pretty_ok(op) {
            self.generic(out, op, indent);
            out.push('\n');
            return;
        }
        if let OpKind::Reduce { dims } = &op.kind {
            self.reduce(out, op, dims, indent);
            out.push('\n');
            return;
        }
        let lhs = self.results_prefix(op);
        out.push_str(&lhs);
        let args = self.operand_list(op);
        let ex = extras(op);
        let res_ty = op
            .results
            .first()
            .map(|(_, t)| t.to_string())
            .unwrap_or_default();
        let line = match &op.kind {
            OpKind::Constant(d) => {
                let ty = &op.results[0].1;
                format!("stablehlo.constant{ex} {} : {ty}", dense_literal(d, ty))
            }
            OpKind::Unary(u) if u.is_chlo() => {
                let ins = self.operand_types(op).join(", ");
                format!("{} {args}{ex} : {ins} -> {res_ty}", u.name())
            }
            OpKind::Unary(u) => format!("{} {args}{ex} : {}", u.name(), self.same_type(op)),
            OpKind::Binary(b) => format!("{} {args}{ex} : {}", b.name(), self.same_type(op)),
            OpKind::Compare {
                direction,
                compare_type,
            } => {
                let ct = compare_type
                    .map(|t| format!(",  {}", t.mnemonic()))
                    .unwrap_or_default();
                format!(
                    "stablehlo.compare  {}, {args}{ct}{ex} : {}",
                    direction.mnemonic(),
                    self.functional(op)
                )
            }
            OpKind::Select => {
                let ins = self.operand_types(op);
                let ty = if ins.len() == 3 && ins[1] == res_ty && ins[2] == res_ty {
                    format!("{}, {res_ty}", ins[0])
                } else {
                    self.functional(op)
                };
                format!("stablehlo.select {args}{ex} : {ty}")
            }
            OpKind::Clamp => format!("stablehlo.clamp {args}{ex} : {}", self.same_type(op)),
            OpKind::Convert => format!("stablehlo.convert {args}{ex} : {}", self.same_type(op)),
            OpKind::Reshape => format!("stablehlo.reshape {args}{ex} : {}", self.functional(op)),
            OpKind::Transpose { permutation } => format!(
                "stablehlo.transpose {args}, dims = {}{ex} : {}",
                list(permutation),
                self.functional(op)
            ),
            OpKind::BroadcastInDim { dims } => format!(
                "stablehlo.broadcast_in_dim {args}, dims = {}{ex} : {}",
                list(dims),
                self.functional(op)
            ),
            OpKind::Reverse { dims } => format!(
                "stablehlo.reverse {args}, dims = {}{ex} : {}",
                list(dims),
                self.same_type(op)
            ),
            OpKind::Slice {
                start,
                limit,
                strides,
            } => {
                let ranges: Vec<String> = start
                    .iter()
                    .zip(limit)
                    .zip(strides)
                    .map(|((s, l), st)| {
                        if *st == 1 {
                            format!("{s}:{l}")
                        } else {
                            format!("{s}:{l}:{st}")
                        }
                    })
                    .collect();
                format!(
                    "stablehlo.slice {args} [{}]{ex} : {}",
                    ranges.join(", "),
                    self.functional(op)
                )
            }
            OpKind::Pad {
                low,
                high,
                interior,
            } => format!(
                "stablehlo.pad {args}, low = {}, high = {}, interior = {}{ex} : {}",
                list(low),
                list(high),
                list(interior),
                self.functional(op)
            ),
            OpKind::Concatenate { dim } => format!(
                "stablehlo.concatenate {args}, dim = {dim}{ex} : {}",
                self.functional(op)
            ),
            OpKind::Iota { dim } => format!("stablehlo.iota dim = {dim}{ex} : {res_ty}"),
            OpKind::DotGeneral {
                dims,
                precision_config,
            } => self.dot_general(op, &args, dims, precision_config.as_deref()),
            OpKind::Convolution(c) => self.convolution(op, &args, c),
            OpKind::Call { callee } => {
                format!(
                    "call {}({args}){ex} : {}",
                    symbol(callee),
                    self.functional(op)
                )
            }
            OpKind::Return | OpKind::FuncReturn => {
                let name = if op.kind == OpKind::Return {
                    "stablehlo.return"
                } else {
                    "return"
                };
                if op.operands.is_empty() {
                    format!("{name}{ex}")
                } else {
                    format!("{name} {args}{ex} : {}", self.operand_types(op).join(", "))
                }
            }
            OpKind::Reduce { .. }
            | OpKind::ReduceWindow(_)
            | OpKind::SelectAndScatter(_)
            | OpKind::AllReduce { .. } => {
                unreachable!("handled before: reduce above, the others in generic form")
            }
        };
        out.push_str(&line);
        out.push('\n');
    }

    fn dot_general(&self, op: &Op, args: &str, d: &DotDims, precision: Option<&str>) -> String {
        let mut s = format!("stablehlo.dot_general {args}");
        if !d.lhs_batch.is_empty() || !d.rhs_batch.is_empty() {
            let _ = write!(
                s,
                ", batching_dims = {} x {}",
                list(&d.lhs_batch),
                list(&d.rhs_batch)
            );
        }
        let _ = write!(
            s,
            ", contracting_dims = {} x {}",
            list(&d.lhs_contracting),
            list(&d.rhs_contracting)
        );
        let mut attrs = op.extra_attrs.clone();
        if let Some(p) = precision {
            match precision_mnemonics(p) {
                Some(names) => {
                    let _ = write!(s, ", precision = [{}]", names.join(", "));
                }
                None => attrs.insert(0, ("precision_config".to_string(), p.to_string())),
            }
        }
        if !attrs.is_empty() {
            let _ = write!(s, " {{{}}}", dict_body(&attrs));
        }
        let _ = write!(s, " : {}", self.functional(op));
        s
    }

    fn convolution(&self, op: &Op, args: &str, c: &ConvAttrs) -> String {
        let mut window = vec![
            format!("stride = {}", list(&c.window_strides)),
            format!("pad = {}", pairs(&c.padding)),
            format!("lhs_dilate = {}", list(&c.lhs_dilation)),
            format!("rhs_dilate = {}", list(&c.rhs_dilation)),
        ];
        if c.window_reversal.iter().any(|r| *r) {
            window.push(format!("reverse = {}", bool_list(&c.window_reversal)));
        }
        let mut attrs = vec![
            (
                "batch_group_count".to_string(),
                format!("{} : i64", c.batch_group_count),
            ),
            (
                "feature_group_count".to_string(),
                format!("{} : i64", c.feature_group_count),
            ),
        ];
        if let Some(p) = &c.precision_config {
            attrs.push(("precision_config".to_string(), p.clone()));
        }
        attrs.extend(op.extra_attrs.iter().cloned());
        format!(
            "stablehlo.convolution({args}) dim_numbers = {}, window = {{{}}} {{{}}} : {}",
            conv_dims_compact(&c.dims).unwrap_or_default(),
            window.join(", "),
            dict_body(&attrs),
            self.functional(op)
        )
    }

    /// `stablehlo.reduce(%x init: %i) applies stablehlo.add across dimensions = […]`
    /// for a plain binary reducer, the `reducer(…) { … }` form otherwise.
    fn reduce(&mut self, out: &mut String, op: &Op, dims: &[i64], indent: usize) {
        let n = op.operands.len() / 2;
        let body = &op.regions[0];
        let compact = if n == 1
            && op.regions[0]
                .ops
                .first()
                .is_some_and(|o| o.extra_attrs.is_empty())
        {
            let init_ty = self.types.get(&op.operands[1]);
            body.as_binary_reducer().filter(|_| {
                let inner_ty = body.ops[0].results.first().map(|(_, t)| t);
                init_ty.is_some()
                    && body.args.iter().all(|(_, t)| Some(t) == init_ty)
                    && inner_ty == init_ty
            })
        } else {
            None
        };
        let pairs: Vec<String> = (0..n)
            .map(|i| {
                format!(
                    "({} init: {})",
                    self.name(op.operands[i]),
                    self.name(op.operands[i + n])
                )
            })
            .collect();
        let sig = self.functional(op);
        let ex = extras(op);
        let lhs = self.results_prefix(op);
        out.push_str(&lhs);
        let _ = write!(out, "stablehlo.reduce{}", pairs.join(", "));
        if let Some(b) = compact {
            let _ = write!(
                out,
                " applies {} across dimensions = {}{ex} : {sig}",
                b.name(),
                list(dims)
            );
            return;
        }
        let _ = writeln!(out, " across dimensions = {}{ex} : {sig}", list(dims));
        let pad = " ".repeat(indent);
        let _ = write!(out, "{pad} reducer");
        let arg_names: Vec<String> = body
            .args
            .iter()
            .map(|(v, t)| {
                let name = self.define_arg(*v, t);
                format!("{name}: {t}")
            })
            .collect();
        if body.args.len() == 2 * n {
            for i in 0..n {
                let _ = write!(
                    out,
                    "{}({}, {})",
                    if i > 0 { " " } else { "" },
                    arg_names[i],
                    arg_names[i + n]
                );
            }
        } else {
            // Not pairable (an invalid reducer): one group keeps every argument.
            let _ = write!(out, "({})", arg_names.join(", "));
        }
        out.push_str(" {\n");
        for inner in &body.ops {
            self.op(out, inner, indent + 2);
        }
        let _ = write!(out, "{pad}}}");
    }

    /// `"name"(operands) <{props}> ({regions}) {extras} : (types) -> types`.
    fn generic(&mut self, out: &mut String, op: &Op, indent: usize) {
        let sig = self.functional(op);
        let args = self.operand_list(op);
        let lhs = self.results_prefix(op);
        out.push_str(&lhs);
        let _ = write!(out, "\"{}\"({args})", op.kind.name());
        let props = inherent_attrs(&op.kind, op.results.first().map(|(_, t)| t));
        if !props.is_empty() {
            let _ = write!(out, " <{{{}}}>", dict_body(&props));
        }
        if !op.regions.is_empty() {
            out.push_str(" (");
            let pad = " ".repeat(indent);
            for (i, block) in op.regions.iter().enumerate() {
                if i > 0 {
                    out.push_str(", ");
                }
                out.push_str("{\n");
                self.block(out, block, indent);
                out.push_str(&pad);
                out.push('}');
            }
            out.push(')');
        }
        let _ = write!(out, "{} : {sig}", extras(op));
    }

    /// A region block: `^bb0(args):` at `indent`, ops at `indent + 2`.
    fn block(&mut self, out: &mut String, block: &Block, indent: usize) {
        let pad = " ".repeat(indent);
        if !block.args.is_empty() {
            let args: Vec<String> = block
                .args
                .iter()
                .map(|(v, t)| format!("{}: {t}", self.define_arg(*v, t)))
                .collect();
            let _ = writeln!(out, "{pad}^bb0({}):", args.join(", "));
        }
        for op in &block.ops {
            self.op(out, op, indent + 2);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn float_literals_use_mlir_spellings() {
        assert_eq!(float_literal(0.0, ElemType::F32), "0.000000e+00");
        assert_eq!(float_literal(1.0, ElemType::F32), "1.000000e+00");
        assert_eq!(float_literal(-2.5e-3, ElemType::F64), "-2.500000e-03");
        assert_eq!(float_literal(0.1f32 as f64, ElemType::F32), "1.000000e-01");
        assert_eq!(
            float_literal(0.70710677f32 as f64, ElemType::F32),
            "7.0710677e-01"
        );
        assert_eq!(float_literal(0.1, ElemType::F64), "1.000000e-01");
        assert_eq!(
            float_literal(1.0 / 3.0, ElemType::F64),
            "3.333333333333333e-01"
        );
        assert_eq!(
            float_literal(f64::NEG_INFINITY, ElemType::F32),
            "0xFF800000"
        );
        assert_eq!(float_literal(f64::INFINITY, ElemType::F32), "0x7F800000");
        assert_eq!(float_literal(f64::NAN, ElemType::F32), "0x7FC00000");
        assert_eq!(float_literal(f64::NEG_INFINITY, ElemType::BF16), "0xFF80");
        assert_eq!(float_literal(f64::INFINITY, ElemType::F16), "0x7C00");
        assert_eq!(
            float_literal(f64::INFINITY, ElemType::F64),
            "0x7FF0000000000000"
        );
        assert_eq!(float_literal(-0.0, ElemType::F32), "-0.000000e+00");
    }

    #[test]
    fn sixteen_bit_rounding_and_bits_agree() {
        // Every bf16 and f16 bit pattern decodes to a value that rounds to itself
        // and prints a literal that reads back to it.
        for elem in [ElemType::BF16, ElemType::F16] {
            for bits in (0u64..=0xffff).step_by(7) {
                let v = float_from_bits(bits, elem).expect("16 bits fit");
                if !v.is_finite() {
                    continue;
                }
                assert_eq!(
                    round_to_elem(v, elem).to_bits(),
                    v.to_bits(),
                    "{elem} {bits:#x}"
                );
                let lit = float_literal(v, elem);
                assert_eq!(
                    decimal_to_elem(&lit, elem).map(f64::to_bits),
                    Some(v.to_bits()),
                    "{elem} {bits:#x} printed {lit}"
                );
            }
        }
        assert_eq!(float_from_bits(0x3F80, ElemType::BF16), Some(1.0));
        assert_eq!(float_from_bits(0x3C00, ElemType::F16), Some(1.0));
        assert_eq!(float_from_bits(0x0001, ElemType::F16), Some(2f64.powi(-24)));
        assert_eq!(round_to_elem(65520.0, ElemType::F16), f64::INFINITY);
        assert_eq!(round_to_elem(65519.0, ElemType::F16), 65504.0);
    }

    #[test]
    fn dense_literals_follow_the_shape() {
        let ty = TensorType::f32([2, 2]);
        let d = DenseData::Float(vec![1.0, 2.0, 3.0, 4.0]);
        assert_eq!(
            dense_literal(&d, &ty),
            "dense<[[1.000000e+00, 2.000000e+00], [3.000000e+00, 4.000000e+00]]>"
        );
        let b = TensorType::new([2], ElemType::I1);
        assert_eq!(dense_literal(&DenseData::Int(vec![1]), &b), "dense<true>");
        let i = TensorType::new([2], ElemType::I64);
        assert_eq!(
            dense_literal(&DenseData::Int(vec![1, 2]), &i),
            "dense<[1, 2]>"
        );
        let e = TensorType::f32([0]);
        assert_eq!(dense_literal(&DenseData::Float(vec![]), &e), "dense<>");
    }

    #[test]
    fn symbols_quote_when_needed() {
        assert_eq!(symbol("main"), "@main");
        assert_eq!(symbol("jit_f.1"), "@jit_f.1");
        assert_eq!(symbol("a b"), "@\"a b\"");
    }
}
