//! Parsing StableHLO text: pretty and generic op forms, JAX export decorations.
//!
//! Owns `parse_module`: text → [`Module`]. Accepts what `print` writes, the
//! generic `"stablehlo.op"(…) <{…}> ({…}) {…} : (…) -> …` form of every op, both
//! attribute spellings (`array<i64: …>` and `dense<[…]> : tensor<…>`), and the
//! decorations of real JAX exports (`loc(…)` trailers, `#loc` alias lines,
//! `mhlo.*`/`sdy.*` attributes kept verbatim). Attributes are normalised into the
//! `OpKind` structs with defaults filled, so equal meaning gives `==` modules.
//!
//! The parser never panics: every index is checked, nesting is capped at
//! [`MAX_NESTING`], and any malformed input becomes a [`ParseError`].
//!
//! One `Parser` walks the source; its methods live by job: `lex` (positions,
//! errors, tokens, attribute dictionaries), `types`, `module` (the top level,
//! functions, regions, value scopes), `op` (one op: result names, arity, the
//! signatures the pretty forms share), `pretty` and `generic` (the two op
//! forms), `attrs` (attribute values) and `dense` (dense literals).

mod attrs;
mod chlo;
mod dense;
mod generic;
mod lex;
mod module;
mod op;
mod pretty;
mod structured;
mod types;

use crate::module::{Block, Module, ValueId};
use crate::ops::OpKind;
use crate::types::TensorType;
use std::collections::HashMap;
use std::fmt;

/// Deepest nesting of regions, dense-literal lists or attribute brackets
/// accepted; deeper input is an error rather than a stack overflow.
pub const MAX_NESTING: usize = 64;

/// A parse failure at `file:line:col` (1-based; columns count characters).
#[derive(Debug, Clone, PartialEq)]
pub struct ParseError {
    pub file: String,
    pub line: u32,
    pub col: u32,
    pub expected: String,
    pub found: String,
}

/// The `expected` of a [`ParseError`] for an op certgrad rejects on purpose;
/// such an error displays as "not supported: <op> at <file>:<line>:<col>".
pub const NOT_SUPPORTED: &str = "not supported";

impl ParseError {
    /// Whether this error rejects a known-but-unsupported op.
    pub fn is_not_supported(&self) -> bool {
        self.expected == NOT_SUPPORTED
    }
}

impl fmt::Display for ParseError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.is_not_supported() {
            return write!(
                f,
                "not supported: {} at {}:{}:{}",
                self.found, self.file, self.line, self.col
            );
        }
        write!(
            f,
            "{}:{}:{}: expected {}, found {}",
            self.file, self.line, self.col, self.expected, self.found
        )
    }
}

impl std::error::Error for ParseError {}

/// Parse a whole file: `module @name attributes {…} { func.func … }`, an
/// anonymous `module { … }`, or bare `func.func`s. `filename` only labels errors.
pub fn parse_module(src: &str, filename: &str) -> Result<Module, ParseError> {
    let mut lines = vec![0usize];
    lines.extend(
        src.bytes()
            .enumerate()
            .filter(|(_, b)| *b == b'\n')
            .map(|(i, _)| i + 1),
    );
    let mut p = Parser::new(src, filename, &lines, 0, src.len());
    p.module()
}

type PResult<T> = Result<T, ParseError>;

/// A byte range of the source (an attribute value kept for later parsing).
#[derive(Clone, Copy, Debug)]
struct Span {
    start: usize,
    end: usize,
}

/// One `name = value` (or unit `name`) of an attribute dictionary.
#[derive(Clone, Debug)]
struct Entry {
    name: String,
    value: Option<Span>,
}

/// What an op parser produces before results are bound.
struct OpParts {
    kind: OpKind,
    operands: Vec<ValueId>,
    result_types: Vec<TensorType>,
    regions: Vec<Block>,
    extra: Vec<(String, String)>,
}

struct Parser<'a> {
    src: &'a str,
    file: &'a str,
    lines: &'a [usize],
    pos: usize,
    end: usize,
    depth: usize,
    /// Visible value names, innermost region last; a name maps to its result group.
    scopes: Vec<HashMap<String, Vec<ValueId>>>,
    /// Type of every value defined so far in the current function.
    types: Vec<TensorType>,
}

fn plural(n: usize, word: &str) -> String {
    if n == 1 {
        format!("1 {word}")
    } else {
        format!("{n} {word}s")
    }
}

impl<'a> Parser<'a> {
    fn new(src: &'a str, file: &'a str, lines: &'a [usize], pos: usize, end: usize) -> Self {
        Parser {
            src,
            file,
            lines,
            pos,
            end,
            depth: 0,
            scopes: Vec::new(),
            types: Vec::new(),
        }
    }

    /// A parser over one attribute value.
    fn sub(&self, span: Span) -> Parser<'a> {
        let mut p = Parser::new(self.src, self.file, self.lines, span.start, span.end);
        p.depth = self.depth;
        p
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn error_display_has_file_line_col() {
        let e = parse_module(
            "module {\n  func.func @f() {\n    %0 = stablehlo.fft\n",
            "x.mlir",
        )
        .expect_err("unsupported op");
        assert_eq!((e.line, e.col), (3, 10));
        assert_eq!(e.found, "stablehlo.fft");
        assert!(e
            .to_string()
            .starts_with("x.mlir:3:10: expected a supported op ("));
    }

    #[test]
    fn line_col_counts_characters() {
        let e = parse_module("// é\n  bogus", "u.mlir").expect_err("not a module");
        assert_eq!((e.line, e.col, e.found.as_str()), (2, 3, "bogus"));
    }
}
