//! Printing modules as the pretty StableHLO text MLIR (and JAX) writes.
//!
//! Owns the canonical spelling of every op: the pretty assembly form where
//! StableHLO has one (`stablehlo.add %a, %b : tensor<f32>`), the generic form
//! (`"stablehlo.reduce_window"(…) <{…}> ({…}) : …`) where it has none or where
//! the op is malformed enough that the pretty form cannot express it. Element
//! values are spelled by `crate::literal`. Printing never panics, even on an
//! invalid module: unknown values print as `%unknown<N>`.
//!
//! `FuncPrinter` names values and walks a function (`func`); each op prints in
//! its pretty form (`pretty`) or the generic one (`generic`); the attribute
//! spellings both share are in `attrs`.

mod attrs;
mod func;
mod generic;
mod pretty;
mod structured;

use crate::module::{Func, Module};
use func::FuncPrinter;
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn symbols_quote_when_needed() {
        assert_eq!(symbol("main"), "@main");
        assert_eq!(symbol("jit_f.1"), "@jit_f.1");
        assert_eq!(symbol("a b"), "@\"a b\"");
    }
}
