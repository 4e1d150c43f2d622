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

use crate::module::{Block, Func, FuncResult, Module, Op, Param, SrcLoc, ValueId, Visibility};
use crate::ops::{
    BinaryOp, CompareDirection, CompareType, ConvAttrs, ConvDims, DenseData, DotDims, OpKind,
    ScatterWindowAttrs, UnaryOp, WindowAttrs,
};
use crate::print::{decimal_to_elem, float_from_bits};
use crate::types::{ElemType, TensorType};
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

impl fmt::Display for ParseError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
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

/// A `dense<…>` literal before its element type is known.
struct DenseLit {
    /// Nested-list shape; `None` for a splat scalar.
    shape: Option<Vec<usize>>,
    elems: Vec<Span>,
    /// `dense<"0x…">`: little-endian element bytes.
    hex_blob: Option<Span>,
    pos: usize,
}

/// The result names an op defines: `%name` or `%name:count`, with positions.
struct ResultDef {
    name: String,
    count: usize,
    pos: usize,
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

fn is_id_start(b: u8) -> bool {
    b.is_ascii_alphabetic() || b == b'_'
}

fn is_id_char(b: u8) -> bool {
    b.is_ascii_alphanumeric() || matches!(b, b'_' | b'$' | b'.')
}

fn is_suffix_char(b: u8) -> bool {
    b.is_ascii_alphanumeric() || matches!(b, b'_' | b'$' | b'.' | b'-')
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

    // ----- positions and errors -------------------------------------------

    fn line_col(&self, pos: usize) -> (u32, u32) {
        let line = self.lines.partition_point(|s| *s <= pos).max(1);
        let start = self.lines.get(line - 1).copied().unwrap_or(0);
        let col = match self.src.get(start..pos) {
            Some(s) => s.chars().count(),
            None => pos.saturating_sub(start),
        };
        (line as u32, col as u32 + 1)
    }

    fn err_at(
        &self,
        pos: usize,
        expected: impl Into<String>,
        found: impl Into<String>,
    ) -> ParseError {
        let (line, col) = self.line_col(pos);
        ParseError {
            file: self.file.to_string(),
            line,
            col,
            expected: expected.into(),
            found: found.into(),
        }
    }

    /// "expected X, found <the next token>" at the next token.
    fn err(&mut self, expected: impl Into<String>) -> ParseError {
        self.ws();
        let found = self.found();
        self.err_at(self.pos, expected, found)
    }

    /// A short description of the next token.
    fn found(&self) -> String {
        let rest = self.rest();
        let bytes = rest.as_bytes();
        let Some(&first) = bytes.first() else {
            return "end of input".to_string();
        };
        let take = |n: usize| rest.get(..n).unwrap_or(rest).to_string();
        if is_id_start(first) {
            let n = bytes.iter().take_while(|b| is_id_char(**b)).count();
            return take(n);
        }
        if matches!(first, b'%' | b'@' | b'#' | b'^') {
            let n = 1 + bytes[1..]
                .iter()
                .take_while(|b| is_suffix_char(**b))
                .count();
            return take(n);
        }
        if first.is_ascii_digit() || first == b'-' {
            let n = 1 + bytes[1..]
                .iter()
                .take_while(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'+' | b'-'))
                .count();
            return take(n);
        }
        if first == b'"' {
            let n = bytes[1..]
                .iter()
                .position(|b| *b == b'"')
                .map_or(bytes.len(), |i| i + 2)
                .min(48);
            return take(n);
        }
        rest.chars().next().map(String::from).unwrap_or_default()
    }

    // ----- characters -----------------------------------------------------

    fn rest(&self) -> &'a str {
        self.src.get(self.pos..self.end).unwrap_or("")
    }

    fn peek(&self) -> Option<u8> {
        if self.pos < self.end {
            self.src.as_bytes().get(self.pos).copied()
        } else {
            None
        }
    }

    fn peek_at(&self, k: usize) -> Option<u8> {
        let i = self.pos.checked_add(k)?;
        if i < self.end {
            self.src.as_bytes().get(i).copied()
        } else {
            None
        }
    }

    /// Skip whitespace and `//` comments.
    fn ws(&mut self) {
        while let Some(b) = self.peek() {
            if b.is_ascii_whitespace() {
                self.pos += 1;
            } else if b == b'/' && self.peek_at(1) == Some(b'/') {
                while let Some(c) = self.peek() {
                    if c == b'\n' {
                        break;
                    }
                    self.pos += 1;
                }
            } else {
                break;
            }
        }
    }

    fn at(&mut self, s: &str) -> bool {
        self.ws();
        self.rest().starts_with(s)
    }

    fn at_byte(&mut self, b: u8) -> bool {
        self.ws();
        self.peek() == Some(b)
    }

    fn eat(&mut self, s: &str) -> bool {
        if self.at(s) {
            self.pos += s.len();
            true
        } else {
            false
        }
    }

    fn expect(&mut self, s: &str) -> PResult<()> {
        if self.eat(s) {
            Ok(())
        } else {
            Err(self.err(format!("'{s}'")))
        }
    }

    /// A keyword: `s` not followed by an identifier character.
    fn at_kw(&mut self, s: &str) -> bool {
        self.at(s)
            && !self
                .src
                .as_bytes()
                .get(self.pos + s.len())
                .is_some_and(|b| is_id_char(*b) && self.pos + s.len() < self.end)
    }

    fn eat_kw(&mut self, s: &str) -> bool {
        if self.at_kw(s) {
            self.pos += s.len();
            true
        } else {
            false
        }
    }

    fn expect_kw(&mut self, s: &str) -> PResult<()> {
        if self.eat_kw(s) {
            Ok(())
        } else {
            Err(self.err(format!("'{s}'")))
        }
    }

    fn at_end(&mut self) -> bool {
        self.ws();
        self.pos >= self.end
    }

    fn expect_end(&mut self, what: &str) -> PResult<()> {
        if self.at_end() {
            Ok(())
        } else {
            Err(self.err(format!("the end of {what}")))
        }
    }

    fn nest(&mut self) -> PResult<()> {
        if self.depth >= MAX_NESTING {
            return Err(self.err(format!("at most {MAX_NESTING} levels of nesting")));
        }
        self.depth += 1;
        Ok(())
    }

    // ----- tokens ---------------------------------------------------------

    /// A bare identifier `[A-Za-z_][A-Za-z0-9_$.]*`.
    fn bare_id(&mut self) -> Option<&'a str> {
        self.ws();
        let rest = self.rest();
        let bytes = rest.as_bytes();
        if !bytes.first().is_some_and(|b| is_id_start(*b)) {
            return None;
        }
        let n = bytes.iter().take_while(|b| is_id_char(**b)).count();
        self.pos += n;
        rest.get(..n)
    }

    fn expect_id(&mut self, what: &str) -> PResult<&'a str> {
        match self.bare_id() {
            Some(s) => Ok(s),
            None => Err(self.err(what.to_string())),
        }
    }

    /// The identifier after a sigil: digits, or `[A-Za-z$._-][A-Za-z0-9$._-]*`.
    fn suffix_id(&mut self) -> Option<&'a str> {
        let rest = self.rest();
        let n = rest.bytes().take_while(|b| is_suffix_char(*b)).count();
        if n == 0 {
            return None;
        }
        self.pos += n;
        rest.get(..n)
    }

    /// `"…"` with MLIR escapes; returns the decoded text.
    fn string_lit(&mut self) -> PResult<String> {
        self.ws();
        if self.peek() != Some(b'"') {
            return Err(self.err("a string literal"));
        }
        let start = self.pos;
        self.pos += 1;
        let mut bytes = Vec::new();
        loop {
            match self.peek() {
                None => return Err(self.err_at(start, "a closing '\"'", "end of input")),
                Some(b'"') => {
                    self.pos += 1;
                    break;
                }
                Some(b'\\') => {
                    let e = self.peek_at(1);
                    let hex = |b: Option<u8>| b.and_then(|b| (b as char).to_digit(16));
                    match e {
                        Some(b'"') | Some(b'\\') => {
                            bytes.push(e.unwrap_or(b'\\'));
                            self.pos += 2;
                        }
                        Some(b'n') => {
                            bytes.push(b'\n');
                            self.pos += 2;
                        }
                        Some(b't') => {
                            bytes.push(b'\t');
                            self.pos += 2;
                        }
                        _ => match (hex(e), hex(self.peek_at(2))) {
                            (Some(h), Some(l)) => {
                                bytes.push((h * 16 + l) as u8);
                                self.pos += 3;
                            }
                            _ => return Err(self.err("a valid string escape")),
                        },
                    }
                }
                Some(b) => {
                    bytes.push(b);
                    self.pos += 1;
                }
            }
        }
        Ok(String::from_utf8_lossy(&bytes).into_owned())
    }

    /// `@name` or `@"quoted name"`.
    fn symbol_ref(&mut self) -> PResult<String> {
        self.ws();
        if self.peek() != Some(b'@') {
            return Err(self.err("a symbol name (@name)"));
        }
        self.pos += 1;
        if self.peek() == Some(b'"') {
            return self.string_lit();
        }
        match self.suffix_id() {
            Some(s) => Ok(s.to_string()),
            None => Err(self.err("a symbol name after '@'")),
        }
    }

    /// A decimal or `0x` hexadecimal integer with an optional sign.
    fn integer(&mut self) -> PResult<i64> {
        self.ws();
        let start = self.pos;
        let neg = if self.peek() == Some(b'-') {
            self.pos += 1;
            true
        } else {
            if self.peek() == Some(b'+') {
                self.pos += 1;
            }
            false
        };
        let rest = self.rest();
        let value = if rest.starts_with("0x") || rest.starts_with("0X") {
            let n = rest[2..].bytes().take_while(u8::is_ascii_hexdigit).count();
            self.pos += 2 + n;
            u64::from_str_radix(&rest[2..2 + n], 16)
                .ok()
                .map(|v| v as i64)
        } else {
            let n = rest.bytes().take_while(u8::is_ascii_digit).count();
            self.pos += n;
            if n == 0 {
                self.pos = start;
                return Err(self.err("an integer"));
            }
            rest[..n].parse::<i64>().ok()
        };
        let found = self.src.get(start..self.pos).unwrap_or("").to_string();
        let value = value.ok_or_else(|| self.err_at(start, "a 64-bit integer", found))?;
        Ok(if neg { value.wrapping_neg() } else { value })
    }

    /// `[1, 2, 3]`.
    fn int_list(&mut self) -> PResult<Vec<i64>> {
        self.expect("[")?;
        let mut v = Vec::new();
        if self.eat("]") {
            return Ok(v);
        }
        loop {
            v.push(self.integer()?);
            if self.eat("]") {
                return Ok(v);
            }
            self.expect(",")?;
        }
    }

    /// Skip a `loc(…)` trailer if present.
    fn skip_loc(&mut self) -> PResult<()> {
        if self.eat_kw("loc") {
            self.expect("(")?;
            self.balanced(b")", true)?;
            self.expect(")")?;
        }
        Ok(())
    }

    /// Scan an attribute value up to one of `stops` at bracket depth 0 (brackets
    /// and strings balanced, `->` skipped). Returns the trimmed span.
    fn balanced(&mut self, stops: &[u8], allow_empty: bool) -> PResult<Span> {
        self.ws();
        let start = self.pos;
        let mut stack: Vec<u8> = Vec::new();
        while let Some(b) = self.peek() {
            if stack.is_empty() && stops.contains(&b) {
                break;
            }
            match b {
                b'"' => {
                    self.string_lit()?;
                    continue;
                }
                b'-' if self.peek_at(1) == Some(b'>') => {
                    self.pos += 2;
                    continue;
                }
                b'(' | b'[' | b'{' | b'<' => {
                    if stack.len() >= MAX_NESTING {
                        return Err(self.err(format!("at most {MAX_NESTING} nested brackets")));
                    }
                    stack.push(match b {
                        b'(' => b')',
                        b'[' => b']',
                        b'{' => b'}',
                        _ => b'>',
                    });
                }
                b')' | b']' | b'}' | b'>' => {
                    if stack.last() == Some(&b) {
                        stack.pop();
                    } else if let Some(want) = stack.last() {
                        return Err(self.err(format!("'{}'", *want as char)));
                    } else {
                        break;
                    }
                }
                _ => {}
            }
            self.pos += 1;
        }
        if let Some(want) = stack.last() {
            return Err(self.err(format!("'{}'", *want as char)));
        }
        let mut end = self.pos;
        while end > start
            && self
                .src
                .as_bytes()
                .get(end - 1)
                .is_some_and(u8::is_ascii_whitespace)
        {
            end -= 1;
        }
        if end == start && !allow_empty {
            return Err(self.err("an attribute value"));
        }
        Ok(Span { start, end })
    }

    fn text(&self, s: Span) -> &'a str {
        self.src.get(s.start..s.end).unwrap_or("")
    }

    /// `{name = value, unit, …}`; returns the entries and the text inside the braces.
    fn attr_dict(&mut self) -> PResult<(Vec<Entry>, Span)> {
        self.expect("{")?;
        let inner_start = self.pos;
        let mut entries = Vec::new();
        if !self.at("}") {
            loop {
                self.ws();
                let pos = self.pos;
                let name = if self.peek() == Some(b'"') {
                    let s = self.string_lit()?;
                    self.src.get(pos..self.pos).unwrap_or(&s).to_string()
                } else {
                    self.expect_id("an attribute name")?.to_string()
                };
                let value = if self.eat("=") {
                    Some(self.balanced(b",}", false)?)
                } else {
                    None
                };
                entries.push(Entry { name, value });
                if !self.eat(",") {
                    break;
                }
            }
        }
        self.ws();
        let inner = Span {
            start: inner_start,
            end: self.pos,
        };
        self.expect("}")?;
        Ok((entries, inner))
    }

    /// An attribute dictionary kept as raw text (without braces).
    fn raw_dict(&mut self) -> PResult<String> {
        let (_, inner) = self.attr_dict()?;
        Ok(self.text(inner).trim().to_string())
    }

    fn entry_text(&self, e: &Entry) -> (String, String) {
        let v = e
            .value
            .map(|s| self.text(s).to_string())
            .unwrap_or_default();
        (e.name.clone(), v)
    }

    // ----- types ----------------------------------------------------------

    fn tensor_type(&mut self) -> PResult<TensorType> {
        self.ws();
        let start = self.pos;
        if !self.eat_kw("tensor") {
            return Err(self.err("a tensor type"));
        }
        if self.peek() != Some(b'<') {
            return Err(self.err("'<'"));
        }
        self.pos += 1;
        let mut shape = Vec::new();
        let mut count: i64 = 1;
        loop {
            match self.peek() {
                Some(b) if b.is_ascii_digit() => {
                    let dstart = self.pos;
                    let n = self.rest().bytes().take_while(u8::is_ascii_digit).count();
                    self.pos += n;
                    let text = self.src.get(dstart..self.pos).unwrap_or("");
                    let d: i64 = text
                        .parse()
                        .map_err(|_| self.err_at(dstart, "a dimension size", text))?;
                    count = count.checked_mul(d).ok_or_else(|| {
                        self.err_at(start, "a tensor type with fewer than 2^63 elements", text)
                    })?;
                    shape.push(d);
                    if self.peek() != Some(b'x') {
                        return Err(self.err("'x' after a dimension"));
                    }
                    self.pos += 1;
                }
                Some(b'?') => return Err(self.err("a static dimension")),
                _ => break,
            }
        }
        let epos = self.pos;
        let elem_name = self.rest();
        let n = elem_name
            .bytes()
            .take_while(|b| b.is_ascii_alphanumeric())
            .count();
        let elem_name = elem_name.get(..n).unwrap_or("");
        let elem = ElemType::from_mnemonic(elem_name).ok_or_else(|| {
            let names: Vec<&str> = ElemType::ALL.iter().map(|e| e.mnemonic()).collect();
            let found = if elem_name.is_empty() {
                self.found()
            } else {
                elem_name.to_string()
            };
            self.err_at(
                epos,
                format!("an element type ({})", names.join(", ")),
                found,
            )
        })?;
        self.pos += n;
        if self.peek() != Some(b'>') {
            return Err(self.err("'>' closing the tensor type"));
        }
        self.pos += 1;
        Ok(TensorType { shape, elem })
    }

    /// `T, T, …` (possibly empty when followed by `)`).
    fn type_list(&mut self, close: &str) -> PResult<Vec<TensorType>> {
        let mut v = Vec::new();
        if self.at(close) {
            return Ok(v);
        }
        loop {
            v.push(self.tensor_type()?);
            if !self.eat(",") {
                return Ok(v);
            }
        }
    }

    /// `(A, B) -> R`, `(A) -> (R, S)`, `() -> ()`.
    fn func_type(&mut self) -> PResult<(Vec<TensorType>, Vec<TensorType>)> {
        self.expect("(")?;
        let ins = self.type_list(")")?;
        self.expect(")")?;
        self.expect("->")?;
        let outs = if self.eat("(") {
            let outs = self.type_list(")")?;
            self.expect(")")?;
            outs
        } else {
            vec![self.tensor_type()?]
        };
        Ok((ins, outs))
    }

    // ----- values ---------------------------------------------------------

    fn fresh(&mut self, ty: TensorType) -> ValueId {
        let v = ValueId(self.types.len() as u32);
        self.types.push(ty);
        v
    }

    fn bind(&mut self, name: &str, group: Vec<ValueId>, pos: usize) -> PResult<()> {
        let scope = self.scopes.last_mut().ok_or_else(|| ParseError {
            file: String::new(),
            line: 0,
            col: 0,
            expected: "a scope".into(),
            found: "none".into(),
        })?;
        if scope.contains_key(name) {
            return Err(self.err_at(
                pos,
                "a fresh value name",
                format!("%{name} (defined before)"),
            ));
        }
        scope.insert(name.to_string(), group);
        Ok(())
    }

    /// `%name` (optionally `#k`) resolved to a defined value.
    fn operand(&mut self) -> PResult<ValueId> {
        self.ws();
        let pos = self.pos;
        if self.peek() != Some(b'%') {
            return Err(self.err("a value (%name)"));
        }
        self.pos += 1;
        let name = self
            .suffix_id()
            .ok_or_else(|| self.err_at(pos, "a value name after '%'", "%"))?;
        let mut index = 0usize;
        if self.peek() == Some(b'#') {
            self.pos += 1;
            let n = self.rest().bytes().take_while(u8::is_ascii_digit).count();
            let text = self.rest().get(..n).unwrap_or("");
            index = text
                .parse()
                .map_err(|_| self.err_at(self.pos, "a result number after '#'", self.found()))?;
            self.pos += n;
        }
        let full = self.src.get(pos..self.pos).unwrap_or("%").to_string();
        for scope in self.scopes.iter().rev() {
            if let Some(group) = scope.get(name) {
                return group.get(index).copied().ok_or_else(|| {
                    self.err_at(pos, format!("a result number below {}", group.len()), full)
                });
            }
        }
        Err(self.err_at(pos, "a defined value", full))
    }

    /// `%a, %b, …`: stops before a comma that is not followed by another value.
    fn operands(&mut self) -> PResult<Vec<ValueId>> {
        let mut v = Vec::new();
        if !self.at_byte(b'%') {
            return Ok(v);
        }
        v.push(self.operand()?);
        loop {
            let save = self.pos;
            if self.eat(",") && self.at_byte(b'%') {
                v.push(self.operand()?);
            } else {
                self.pos = save;
                return Ok(v);
            }
        }
    }

    /// The operands' types must be the ones the text states.
    fn check_types(&self, operands: &[ValueId], tys: &[TensorType], pos: usize) -> PResult<()> {
        if operands.len() != tys.len() {
            return Err(self.err_at(
                pos,
                format!(
                    "{} (one per operand)",
                    plural(operands.len(), "operand type")
                ),
                plural(tys.len(), "type"),
            ));
        }
        for (k, (v, t)) in operands.iter().zip(tys).enumerate() {
            if let Some(actual) = self.types.get(v.index()) {
                if actual != t {
                    return Err(self.err_at(
                        pos,
                        format!("{actual} (the type of operand #{k})"),
                        t.to_string(),
                    ));
                }
            }
        }
        Ok(())
    }

    // ----- module and functions --------------------------------------------

    /// Skip `#alias = …` lines and `{-# … #-}` resource blocks.
    fn skip_top_level_noise(&mut self) -> PResult<()> {
        loop {
            self.ws();
            if self.at("{-#") {
                match self.rest().find("#-}") {
                    Some(i) => self.pos += i + 3,
                    None => return Err(self.err("'#-}' closing the resource block")),
                }
            } else if self.peek() == Some(b'#') {
                self.pos += 1;
                if self.suffix_id().is_none() {
                    return Err(self.err("an alias name after '#'"));
                }
                self.expect("=")?;
                // The value runs to the end of its line (brackets balanced).
                while self.peek().is_some_and(|b| b == b' ' || b == b'\t') {
                    self.pos += 1;
                }
                self.balanced(b"\n", false)?;
            } else {
                return Ok(());
            }
        }
    }

    fn module(&mut self) -> PResult<Module> {
        self.skip_top_level_noise()?;
        let mut m = Module::default();
        if self.eat_kw("module") {
            if self.at_byte(b'@') {
                m.name = Some(self.symbol_ref()?);
            }
            if self.eat_kw("attributes") {
                m.attrs = Some(self.raw_dict()?);
            }
            self.expect("{")?;
            while !self.at("}") {
                if self.at_end() {
                    return Err(self.err("'}' closing the module"));
                }
                m.funcs.push(self.func()?);
            }
            self.expect("}")?;
            self.skip_loc()?;
        } else {
            if !self.at_kw("func.func") {
                return Err(self.err("'module' or 'func.func'"));
            }
            while self.at_kw("func.func") {
                m.funcs.push(self.func()?);
                self.skip_top_level_noise()?;
            }
        }
        self.skip_top_level_noise()?;
        if !self.at_end() {
            return Err(self.err("the end of the input"));
        }
        Ok(m)
    }

    fn func(&mut self) -> PResult<Func> {
        self.expect_kw("func.func")?;
        let visibility = if self.eat_kw("private") {
            Visibility::Private
        } else {
            if !self.eat_kw("public") {
                self.eat_kw("nested");
            }
            Visibility::Public
        };
        let name = self.symbol_ref()?;
        self.scopes = vec![HashMap::new()];
        self.types.clear();
        self.expect("(")?;
        let mut params = Vec::new();
        let mut args = Vec::new();
        if !self.eat(")") {
            loop {
                let (pname, ppos) = self.def_name()?;
                self.expect(":")?;
                let ty = self.tensor_type()?;
                let attrs = if self.at("{") {
                    Some(self.raw_dict()?)
                } else {
                    None
                };
                self.skip_loc()?;
                let v = self.fresh(ty.clone());
                self.bind(&pname, vec![v], ppos)?;
                args.push((v, ty.clone()));
                params.push(Param {
                    value: v,
                    ty,
                    attrs,
                });
                if self.eat(")") {
                    break;
                }
                self.expect(",")?;
            }
        }
        let mut results = Vec::new();
        if self.eat("->") {
            if self.eat("(") {
                if !self.eat(")") {
                    loop {
                        results.push(self.func_result(true)?);
                        if self.eat(")") {
                            break;
                        }
                        self.expect(",")?;
                    }
                }
            } else {
                // Unparenthesised: a bare type; a `{` after it opens the body.
                results.push(self.func_result(false)?);
            }
        }
        let attrs = if self.eat_kw("attributes") {
            Some(self.raw_dict()?)
        } else {
            None
        };
        self.expect("{")?;
        let ops = self.block_ops()?;
        self.expect("}")?;
        self.skip_loc()?;
        let mut f = Func {
            name,
            visibility,
            params,
            results,
            body: Block { args, ops },
            attrs,
        };
        f.canonicalize();
        Ok(f)
    }

    fn func_result(&mut self, with_attrs: bool) -> PResult<FuncResult> {
        let ty = self.tensor_type()?;
        let attrs = if with_attrs && self.at("{") {
            Some(self.raw_dict()?)
        } else {
            None
        };
        self.skip_loc()?;
        Ok(FuncResult { ty, attrs })
    }

    /// `%name` being defined (a parameter or block argument).
    fn def_name(&mut self) -> PResult<(String, usize)> {
        self.ws();
        let pos = self.pos;
        if self.peek() != Some(b'%') {
            return Err(self.err("a value name (%name)"));
        }
        self.pos += 1;
        match self.suffix_id() {
            Some(n) => Ok((n.to_string(), pos)),
            None => Err(self.err_at(pos, "a value name after '%'", "%")),
        }
    }

    /// Ops up to (not including) the closing `}` of a block.
    fn block_ops(&mut self) -> PResult<Vec<Op>> {
        let mut ops = Vec::new();
        loop {
            self.ws();
            match self.peek() {
                Some(b'}') => return Ok(ops),
                None => return Err(self.err("'}' closing the block")),
                Some(b'^') => {
                    return Err(self.err("an op (certgrad supports single-block regions only)"))
                }
                _ => ops.push(self.op()?),
            }
        }
    }

    /// `{ [^bb0(%a: T, …):] ops }` in a fresh scope.
    fn region(&mut self) -> PResult<Block> {
        self.nest()?;
        self.expect("{")?;
        self.scopes.push(HashMap::new());
        let mut args = Vec::new();
        if self.at_byte(b'^') {
            self.pos += 1;
            if self.suffix_id().is_none() {
                return Err(self.err("a block label after '^'"));
            }
            if self.eat("(") && !self.eat(")") {
                loop {
                    args.push(self.block_arg()?);
                    if self.eat(")") {
                        break;
                    }
                    self.expect(",")?;
                }
            }
            self.expect(":")?;
        }
        let ops = self.block_ops()?;
        self.expect("}")?;
        self.scopes.pop();
        self.depth -= 1;
        Ok(Block { args, ops })
    }

    /// `%a: T [loc(…)]`, bound in the innermost scope.
    fn block_arg(&mut self) -> PResult<(ValueId, TensorType)> {
        let (name, pos) = self.def_name()?;
        self.expect(":")?;
        let ty = self.tensor_type()?;
        self.skip_loc()?;
        let v = self.fresh(ty.clone());
        self.bind(&name, vec![v], pos)?;
        Ok((v, ty))
    }

    // ----- ops --------------------------------------------------------------

    fn op(&mut self) -> PResult<Op> {
        self.ws();
        let start = self.pos;
        let mut defs: Vec<ResultDef> = Vec::new();
        if self.peek() == Some(b'%') {
            loop {
                let (name, pos) = self.def_name()?;
                let mut count = 1usize;
                if self.peek() == Some(b':') && self.peek_at(1).is_some_and(|b| b.is_ascii_digit())
                {
                    self.pos += 1;
                    let n = self.integer()?;
                    count = usize::try_from(n)
                        .ok()
                        .filter(|c| (1..=1 << 16).contains(c))
                        .ok_or_else(|| {
                            self.err_at(pos, "a result count between 1 and 65536", n.to_string())
                        })?;
                }
                defs.push(ResultDef { name, count, pos });
                if !self.eat(",") {
                    break;
                }
            }
            self.expect("=")?;
        }
        self.ws();
        let name_pos = self.pos;
        let parts = if self.peek() == Some(b'"') {
            let name = self.string_lit()?;
            self.generic_op(&name, name_pos)?
        } else {
            let name = self.expect_id("an op name")?;
            self.pretty_op(name, name_pos)?
        };
        self.skip_loc()?;
        self.check_arity(&parts, name_pos)?;
        // Results are bound after the op's regions were parsed: an op's regions
        // cannot see its own results.
        let named: usize = defs.iter().map(|d| d.count).sum();
        if !defs.is_empty() && named != parts.result_types.len() {
            return Err(self.err_at(
                start,
                format!(
                    "{} ({} has {})",
                    plural(parts.result_types.len(), "result name"),
                    parts.kind.name(),
                    plural(parts.result_types.len(), "result")
                ),
                plural(named, "name"),
            ));
        }
        let results: Vec<(ValueId, TensorType)> = parts
            .result_types
            .iter()
            .map(|t| (self.fresh(t.clone()), t.clone()))
            .collect();
        let mut next = 0;
        for d in &defs {
            let group: Vec<ValueId> = results[next..next + d.count].iter().map(|r| r.0).collect();
            next += d.count;
            self.bind(&d.name, group, d.pos)?;
        }
        let (line, col) = self.line_col(start);
        Ok(Op {
            kind: parts.kind,
            operands: parts.operands,
            results,
            regions: parts.regions,
            extra_attrs: parts.extra,
            loc: SrcLoc(Some((line, col))),
        })
    }

    fn check_arity(&self, parts: &OpParts, pos: usize) -> PResult<()> {
        let n = parts.operands.len();
        let name = parts.kind.name();
        let (ok, want, regions) = match &parts.kind {
            OpKind::Constant(_) | OpKind::Iota { .. } => (n == 0, "0 operands".to_string(), 0),
            OpKind::Unary(_)
            | OpKind::Convert
            | OpKind::Reshape
            | OpKind::Transpose { .. }
            | OpKind::BroadcastInDim { .. }
            | OpKind::Reverse { .. }
            | OpKind::Slice { .. } => (n == 1, "1 operand".to_string(), 0),
            OpKind::Binary(_)
            | OpKind::Compare { .. }
            | OpKind::Pad { .. }
            | OpKind::DotGeneral { .. }
            | OpKind::Convolution(_) => (n == 2, "2 operands".to_string(), 0),
            OpKind::Select | OpKind::Clamp => (n == 3, "3 operands".to_string(), 0),
            OpKind::Concatenate { .. } => (n >= 1, "at least 1 operand".to_string(), 0),
            OpKind::Reduce { .. } | OpKind::ReduceWindow(_) => (
                n >= 2 && n & 1 == 0,
                "an even number (≥ 2) of operands".to_string(),
                1,
            ),
            OpKind::SelectAndScatter(_) => (n == 3, "3 operands".to_string(), 2),
            OpKind::AllReduce { .. } => (n >= 1, "at least 1 operand".to_string(), 1),
            OpKind::Call { .. } | OpKind::Return | OpKind::FuncReturn => (true, String::new(), 0),
        };
        if !ok {
            return Err(self.err_at(pos, format!("{want} for {name}"), plural(n, "operand")));
        }
        if parts.regions.len() != regions {
            return Err(self.err_at(
                pos,
                format!("{} for {name}", plural(regions, "region")),
                plural(parts.regions.len(), "region"),
            ));
        }
        if parts.kind.is_terminator() && !parts.result_types.is_empty() {
            return Err(self.err_at(
                pos,
                format!("no results for {name}"),
                plural(parts.result_types.len(), "result"),
            ));
        }
        Ok(())
    }

    /// An optional `{…}` before the type: attributes kept verbatim.
    fn extras(&mut self) -> PResult<Vec<(String, String)>> {
        if !self.at("{") {
            return Ok(Vec::new());
        }
        let (entries, _) = self.attr_dict()?;
        Ok(entries.iter().map(|e| self.entry_text(e)).collect())
    }

    /// `: T` (every operand and the result have type T) or `: (A, B) -> R`.
    fn same_type_sig(&mut self, operands: &[ValueId]) -> PResult<Vec<TensorType>> {
        self.expect(":")?;
        self.ws();
        let pos = self.pos;
        if self.at("(") {
            let (ins, outs) = self.func_type()?;
            self.check_types(operands, &ins, pos)?;
            Ok(outs)
        } else {
            let t = self.tensor_type()?;
            self.check_types(operands, &vec![t.clone(); operands.len()], pos)?;
            Ok(vec![t])
        }
    }

    fn functional_sig(&mut self, operands: &[ValueId]) -> PResult<Vec<TensorType>> {
        self.expect(":")?;
        self.ws();
        let pos = self.pos;
        let (ins, outs) = self.func_type()?;
        self.check_types(operands, &ins, pos)?;
        Ok(outs)
    }

    fn simple(
        kind: OpKind,
        operands: Vec<ValueId>,
        result_types: Vec<TensorType>,
        extra: Vec<(String, String)>,
    ) -> OpParts {
        OpParts {
            kind,
            operands,
            result_types,
            regions: Vec::new(),
            extra,
        }
    }

    fn unsupported(&self, name: &str, pos: usize) -> ParseError {
        let mut names: Vec<&str> = UnaryOp::ALL
            .iter()
            .map(|u| u.name())
            .chain(BinaryOp::ALL.iter().map(|b| b.name()))
            .chain([
                "stablehlo.constant",
                "stablehlo.compare",
                "stablehlo.select",
                "stablehlo.clamp",
                "stablehlo.convert",
                "stablehlo.reshape",
                "stablehlo.transpose",
                "stablehlo.broadcast_in_dim",
                "stablehlo.reverse",
                "stablehlo.slice",
                "stablehlo.pad",
                "stablehlo.concatenate",
                "stablehlo.iota",
                "stablehlo.dot_general",
                "stablehlo.convolution",
                "stablehlo.reduce",
                "stablehlo.reduce_window",
                "stablehlo.select_and_scatter",
                "stablehlo.all_reduce",
                "stablehlo.return",
                "func.call",
                "func.return",
            ])
            .collect();
        names.sort_unstable();
        self.err_at(pos, format!("a supported op ({})", names.join(", ")), name)
    }

    fn pretty_op(&mut self, name: &str, pos: usize) -> PResult<OpParts> {
        if let Some(u) = UnaryOp::from_name(name) {
            let operands = self.operands()?;
            let extra = self.extras()?;
            let outs = if u.is_chlo() && !self.at(": (") {
                // chlo's spelling: `: T -> R`.
                self.expect(":")?;
                self.ws();
                let tpos = self.pos;
                let t = self.tensor_type()?;
                self.check_types(&operands, &vec![t.clone(); operands.len()], tpos)?;
                if self.eat("->") {
                    vec![self.tensor_type()?]
                } else {
                    vec![t]
                }
            } else {
                self.same_type_sig(&operands)?
            };
            return Ok(Self::simple(OpKind::Unary(u), operands, outs, extra));
        }
        if let Some(b) = BinaryOp::from_name(name) {
            let operands = self.operands()?;
            let extra = self.extras()?;
            let outs = self.same_type_sig(&operands)?;
            return Ok(Self::simple(OpKind::Binary(b), operands, outs, extra));
        }
        match name {
            "stablehlo.constant" => {
                let extra = self.extras()?;
                let lit = self.dense_lit()?;
                self.expect(":")?;
                let ty = self.tensor_type()?;
                let data = self.dense_data(&lit, &ty)?;
                Ok(Self::simple(
                    OpKind::Constant(data),
                    Vec::new(),
                    vec![ty],
                    extra,
                ))
            }
            "stablehlo.compare" => {
                let dpos = {
                    self.ws();
                    self.pos
                };
                let d = self.expect_id("a comparison direction")?;
                let direction = CompareDirection::from_mnemonic(d).ok_or_else(|| {
                    self.err_at(dpos, "a comparison direction (EQ, NE, GE, GT, LE, LT)", d)
                })?;
                self.expect(",")?;
                let operands = self.operands()?;
                let compare_type = if self.eat(",") {
                    self.ws();
                    let tpos = self.pos;
                    let t = self.expect_id("a comparison type")?;
                    Some(CompareType::from_mnemonic(t).ok_or_else(|| {
                        self.err_at(
                            tpos,
                            "a comparison type (FLOAT, TOTALORDER, SIGNED, UNSIGNED)",
                            t,
                        )
                    })?)
                } else {
                    None
                };
                let extra = self.extras()?;
                let outs = self.functional_sig(&operands)?;
                Ok(Self::simple(
                    OpKind::Compare {
                        direction,
                        compare_type,
                    },
                    operands,
                    outs,
                    extra,
                ))
            }
            "stablehlo.select" => {
                let operands = self.operands()?;
                let extra = self.extras()?;
                self.expect(":")?;
                self.ws();
                let tpos = self.pos;
                let outs = if self.at("(") {
                    let (ins, outs) = self.func_type()?;
                    self.check_types(&operands, &ins, tpos)?;
                    outs
                } else {
                    let pred = self.tensor_type()?;
                    self.expect(",")?;
                    let t = self.tensor_type()?;
                    self.check_types(&operands, &[pred, t.clone(), t.clone()], tpos)?;
                    vec![t]
                };
                Ok(Self::simple(OpKind::Select, operands, outs, extra))
            }
            "stablehlo.clamp" | "stablehlo.convert" | "stablehlo.reshape" => {
                let kind = match name {
                    "stablehlo.clamp" => OpKind::Clamp,
                    "stablehlo.convert" => OpKind::Convert,
                    _ => OpKind::Reshape,
                };
                let operands = self.operands()?;
                let extra = self.extras()?;
                let outs = self.same_type_sig(&operands)?;
                Ok(Self::simple(kind, operands, outs, extra))
            }
            "stablehlo.transpose" | "stablehlo.broadcast_in_dim" | "stablehlo.reverse" => {
                let operands = self.operands()?;
                self.expect(",")?;
                self.expect_kw("dims")?;
                self.expect("=")?;
                let dims = self.int_list()?;
                let extra = self.extras()?;
                let outs = self.same_type_sig(&operands)?;
                let kind = match name {
                    "stablehlo.transpose" => OpKind::Transpose { permutation: dims },
                    "stablehlo.broadcast_in_dim" => OpKind::BroadcastInDim { dims },
                    _ => OpKind::Reverse { dims },
                };
                Ok(Self::simple(kind, operands, outs, extra))
            }
            "stablehlo.slice" => {
                let operands = self.operands()?;
                self.expect("[")?;
                let (mut start, mut limit, mut strides) = (Vec::new(), Vec::new(), Vec::new());
                if !self.eat("]") {
                    loop {
                        start.push(self.integer()?);
                        self.expect(":")?;
                        limit.push(self.integer()?);
                        strides.push(if self.eat(":") { self.integer()? } else { 1 });
                        if self.eat("]") {
                            break;
                        }
                        self.expect(",")?;
                    }
                }
                let extra = self.extras()?;
                let outs = self.functional_sig(&operands)?;
                Ok(Self::simple(
                    OpKind::Slice {
                        start,
                        limit,
                        strides,
                    },
                    operands,
                    outs,
                    extra,
                ))
            }
            "stablehlo.pad" => {
                let operands = self.operands()?;
                let mut lists = Vec::new();
                for key in ["low", "high", "interior"] {
                    self.expect(",")?;
                    self.expect_kw(key)?;
                    self.expect("=")?;
                    lists.push(self.int_list()?);
                }
                let extra = self.extras()?;
                let outs = self.functional_sig(&operands)?;
                let interior = lists.pop().unwrap_or_default();
                let high = lists.pop().unwrap_or_default();
                let low = lists.pop().unwrap_or_default();
                Ok(Self::simple(
                    OpKind::Pad {
                        low,
                        high,
                        interior,
                    },
                    operands,
                    outs,
                    extra,
                ))
            }
            "stablehlo.concatenate" | "stablehlo.iota" => {
                let operands = if name == "stablehlo.concatenate" {
                    let o = self.operands()?;
                    self.expect(",")?;
                    o
                } else {
                    Vec::new()
                };
                self.expect_kw("dim")?;
                self.expect("=")?;
                let dim = self.integer()?;
                let extra = self.extras()?;
                let (kind, outs) = if name == "stablehlo.iota" {
                    self.expect(":")?;
                    (OpKind::Iota { dim }, vec![self.tensor_type()?])
                } else {
                    (OpKind::Concatenate { dim }, self.functional_sig(&operands)?)
                };
                Ok(Self::simple(kind, operands, outs, extra))
            }
            "stablehlo.dot_general" => self.pretty_dot_general(),
            "stablehlo.convolution" => self.pretty_convolution(),
            "stablehlo.reduce" => self.pretty_reduce(pos),
            "call" | "func.call" => {
                let callee = self.symbol_ref()?;
                self.expect("(")?;
                let operands = self.operands()?;
                self.expect(")")?;
                let extra = self.extras()?;
                let outs = self.functional_sig(&operands)?;
                Ok(Self::simple(OpKind::Call { callee }, operands, outs, extra))
            }
            "return" | "func.return" | "stablehlo.return" => {
                let kind = if name == "stablehlo.return" {
                    OpKind::Return
                } else {
                    OpKind::FuncReturn
                };
                let operands = self.operands()?;
                let extra = self.extras()?;
                if !operands.is_empty() {
                    self.expect(":")?;
                    self.ws();
                    let tpos = self.pos;
                    let tys = self.type_list("}")?;
                    self.check_types(&operands, &tys, tpos)?;
                }
                Ok(Self::simple(kind, operands, Vec::new(), extra))
            }
            _ => Err(self.unsupported(name, pos)),
        }
    }

    fn pretty_dot_general(&mut self) -> PResult<OpParts> {
        let operands = self.operands()?;
        self.expect(",")?;
        let mut dims = DotDims::default();
        if self.eat_kw("batching_dims") {
            self.expect("=")?;
            dims.lhs_batch = self.int_list()?;
            self.expect_kw("x")?;
            dims.rhs_batch = self.int_list()?;
            self.expect(",")?;
        }
        self.expect_kw("contracting_dims")?;
        self.expect("=")?;
        dims.lhs_contracting = self.int_list()?;
        self.expect_kw("x")?;
        dims.rhs_contracting = self.int_list()?;
        let mut precision_config = None;
        let mut extra = Vec::new();
        while self.eat(",") {
            if self.eat_kw("precision") {
                self.expect("=")?;
                let span = self.balanced(b",{:", false)?;
                precision_config = Some(self.precision(span));
            } else {
                let key = self.expect_id("'precision' or 'algorithm'")?.to_string();
                self.expect("=")?;
                let span = self.balanced(b",{:", false)?;
                extra.push((key, self.text(span).to_string()));
            }
        }
        extra.extend(self.extras()?);
        let outs = self.functional_sig(&operands)?;
        Ok(Self::simple(
            OpKind::DotGeneral {
                dims,
                precision_config,
            },
            operands,
            outs,
            extra,
        ))
    }

    fn pretty_convolution(&mut self) -> PResult<OpParts> {
        self.expect("(")?;
        let operands = self.operands()?;
        self.expect(")")?;
        self.expect_kw("dim_numbers")?;
        self.expect("=")?;
        let dims = self.conv_dims_compact()?;
        let n = dims.input_spatial.len();
        let mut c = ConvAttrs {
            window_strides: vec![1; n],
            padding: vec![(0, 0); n],
            lhs_dilation: vec![1; n],
            rhs_dilation: vec![1; n],
            window_reversal: vec![false; n],
            dims,
            feature_group_count: 1,
            batch_group_count: 1,
            precision_config: None,
        };
        if self.eat(",") {
            self.expect_kw("window")?;
            self.expect("=")?;
            self.expect("{")?;
            if !self.eat("}") {
                loop {
                    self.ws();
                    let kpos = self.pos;
                    let key = self.expect_id(
                        "a window field (stride, pad, lhs_dilate, rhs_dilate, reverse)",
                    )?;
                    self.expect("=")?;
                    match key {
                        "stride" => c.window_strides = self.int_list()?,
                        "lhs_dilate" => c.lhs_dilation = self.int_list()?,
                        "rhs_dilate" => c.rhs_dilation = self.int_list()?,
                        "pad" => c.padding = self.pair_list()?,
                        "reverse" => c.window_reversal = self.bool_list()?,
                        other => {
                            return Err(self.err_at(
                                kpos,
                                "a window field (stride, pad, lhs_dilate, rhs_dilate, reverse)",
                                other,
                            ))
                        }
                    }
                    if self.eat("}") {
                        break;
                    }
                    self.expect(",")?;
                }
            }
        }
        let mut extra = Vec::new();
        if self.at("{") {
            let (entries, _) = self.attr_dict()?;
            for e in entries {
                match (e.name.as_str(), e.value) {
                    ("batch_group_count", Some(s)) => {
                        c.batch_group_count = self.sub(s).int_attr()?
                    }
                    ("feature_group_count", Some(s)) => {
                        c.feature_group_count = self.sub(s).int_attr()?
                    }
                    ("precision_config", Some(s)) => c.precision_config = Some(self.precision(s)),
                    _ => extra.push(self.entry_text(&e)),
                }
            }
        }
        let outs = self.functional_sig(&operands)?;
        Ok(Self::simple(OpKind::Convolution(c), operands, outs, extra))
    }

    /// `stablehlo.reduce(%x init: %i)… [applies op] across dimensions = […] : sig
    /// [reducer(%a: T, %b: T)… { … }]`.
    fn pretty_reduce(&mut self, pos: usize) -> PResult<OpParts> {
        let mut inputs = Vec::new();
        let mut inits = Vec::new();
        loop {
            self.expect("(")?;
            inputs.push(self.operand()?);
            self.expect_kw("init")?;
            self.expect(":")?;
            inits.push(self.operand()?);
            self.expect(")")?;
            if !self.eat(",") {
                break;
            }
        }
        let applies = if self.eat_kw("applies") {
            self.ws();
            let bpos = self.pos;
            let name = self.expect_id("a binary op name")?;
            let b = BinaryOp::from_name(name).ok_or_else(|| {
                let names: Vec<&str> = BinaryOp::ALL.iter().map(|b| b.name()).collect();
                self.err_at(bpos, format!("a binary op ({})", names.join(", ")), name)
            })?;
            Some((b, bpos))
        } else {
            None
        };
        self.expect_kw("across")?;
        self.expect_kw("dimensions")?;
        self.expect("=")?;
        let dims = self.int_list()?;
        let extra = self.extras()?;
        let operands: Vec<ValueId> = inputs.iter().chain(&inits).copied().collect();
        let outs = self.functional_sig(&operands)?;
        let block = match applies {
            Some((b, bpos)) => {
                if inits.len() != 1 {
                    return Err(self.err_at(
                        bpos,
                        "one input for the 'applies' form",
                        plural(inits.len(), "input"),
                    ));
                }
                let ty = self
                    .types
                    .get(inits[0].index())
                    .cloned()
                    .unwrap_or_else(|| TensorType::scalar(ElemType::F32));
                let a = self.fresh(ty.clone());
                let c = self.fresh(ty.clone());
                let r = self.fresh(ty.clone());
                let (line, col) = self.line_col(pos);
                let loc = SrcLoc(Some((line, col)));
                Block {
                    args: vec![(a, ty.clone()), (c, ty.clone())],
                    ops: vec![
                        Op {
                            kind: OpKind::Binary(b),
                            operands: vec![a, c],
                            results: vec![(r, ty)],
                            regions: Vec::new(),
                            extra_attrs: Vec::new(),
                            loc,
                        },
                        Op {
                            kind: OpKind::Return,
                            operands: vec![r],
                            results: Vec::new(),
                            regions: Vec::new(),
                            extra_attrs: Vec::new(),
                            loc,
                        },
                    ],
                }
            }
            None => {
                self.expect_kw("reducer")?;
                self.nest()?;
                self.scopes.push(HashMap::new());
                let (mut lhs, mut rhs) = (Vec::new(), Vec::new());
                while self.eat("(") {
                    lhs.push(self.block_arg()?);
                    self.expect(",")?;
                    rhs.push(self.block_arg()?);
                    self.expect(")")?;
                }
                if lhs.is_empty() {
                    return Err(self.err("'(' starting the reducer arguments"));
                }
                self.expect("{")?;
                let ops = self.block_ops()?;
                self.expect("}")?;
                self.scopes.pop();
                self.depth -= 1;
                lhs.extend(rhs);
                Block { args: lhs, ops }
            }
        };
        Ok(OpParts {
            kind: OpKind::Reduce { dims },
            operands,
            result_types: outs,
            regions: vec![block],
            extra,
        })
    }

    /// `"name"(operands) [<{props}>] [({regions})] [{attrs}] : (…) -> …`.
    fn generic_op(&mut self, name: &str, pos: usize) -> PResult<OpParts> {
        self.expect("(")?;
        let operands = self.operands()?;
        self.expect(")")?;
        let mut entries = Vec::new();
        if self.eat("<") {
            entries.extend(self.attr_dict()?.0);
            self.expect(">")?;
        }
        let mut regions = Vec::new();
        if self.eat("(") {
            loop {
                regions.push(self.region()?);
                if !self.eat(",") {
                    break;
                }
            }
            self.expect(")")?;
        }
        if self.at("{") {
            entries.extend(self.attr_dict()?.0);
        }
        self.expect(":")?;
        self.ws();
        let tpos = self.pos;
        let (ins, outs) = self.func_type()?;
        self.check_types(&operands, &ins, tpos)?;
        let (kind, extra) = self.generic_kind(name, pos, entries, &outs, &operands)?;
        Ok(OpParts {
            kind,
            operands,
            result_types: outs,
            regions,
            extra,
        })
    }

    /// The op kind of a generic-form op from its attributes; leftovers are extras.
    fn generic_kind(
        &mut self,
        name: &str,
        pos: usize,
        mut entries: Vec<Entry>,
        outs: &[TensorType],
        operands: &[ValueId],
    ) -> PResult<(OpKind, Vec<(String, String)>)> {
        let mut take = |key: &str| -> Option<Entry> {
            let i = entries.iter().position(|e| e.name == key)?;
            Some(entries.remove(i))
        };
        let this = &*self;
        let need = |e: Option<Entry>, key: &str| -> PResult<Span> {
            e.and_then(|e| e.value)
                .ok_or_else(|| this.err_at(pos, format!("attribute '{key}' on {name}"), "none"))
        };
        let kind = if let Some(u) = UnaryOp::from_name(name) {
            OpKind::Unary(u)
        } else if let Some(b) = BinaryOp::from_name(name) {
            OpKind::Binary(b)
        } else {
            match name {
                "stablehlo.constant" => {
                    let s = need(take("value"), "value")?;
                    let mut p = this.sub(s);
                    let lit = p.dense_lit()?;
                    p.expect(":")?;
                    let ty = p.tensor_type()?;
                    p.expect_end("the value attribute")?;
                    if outs.len() == 1 && outs[0] != ty {
                        return Err(this.err_at(
                            s.start,
                            format!("a value of the result type {}", outs[0]),
                            ty.to_string(),
                        ));
                    }
                    OpKind::Constant(p.dense_data(&lit, &ty)?)
                }
                "stablehlo.compare" => {
                    let s = need(take("comparison_direction"), "comparison_direction")?;
                    let d = this.sub(s).enum_attr("comparison_direction")?;
                    let direction = CompareDirection::from_mnemonic(d.0).ok_or_else(|| {
                        this.err_at(d.1, "a comparison direction (EQ, NE, GE, GT, LE, LT)", d.0)
                    })?;
                    let compare_type = match take("compare_type").and_then(|e| e.value) {
                        None => None,
                        Some(s) => {
                            let t = this.sub(s).enum_attr("comparison_type")?;
                            Some(CompareType::from_mnemonic(t.0).ok_or_else(|| {
                                this.err_at(
                                    t.1,
                                    "a comparison type (FLOAT, TOTALORDER, SIGNED, UNSIGNED)",
                                    t.0,
                                )
                            })?)
                        }
                    };
                    OpKind::Compare {
                        direction,
                        compare_type,
                    }
                }
                "stablehlo.select" => OpKind::Select,
                "stablehlo.clamp" => OpKind::Clamp,
                "stablehlo.convert" => OpKind::Convert,
                "stablehlo.reshape" => OpKind::Reshape,
                "stablehlo.transpose" => OpKind::Transpose {
                    permutation: this
                        .sub(need(take("permutation"), "permutation")?)
                        .i64_array()?,
                },
                "stablehlo.broadcast_in_dim" => OpKind::BroadcastInDim {
                    dims: this
                        .sub(need(take("broadcast_dimensions"), "broadcast_dimensions")?)
                        .i64_array()?,
                },
                "stablehlo.reverse" => OpKind::Reverse {
                    dims: this
                        .sub(need(take("dimensions"), "dimensions")?)
                        .i64_array()?,
                },
                "stablehlo.slice" => {
                    let start = this
                        .sub(need(take("start_indices"), "start_indices")?)
                        .i64_array()?;
                    let limit = this
                        .sub(need(take("limit_indices"), "limit_indices")?)
                        .i64_array()?;
                    let strides = match take("strides").and_then(|e| e.value) {
                        Some(s) => this.sub(s).i64_array()?,
                        None => vec![1; start.len()],
                    };
                    OpKind::Slice {
                        start,
                        limit,
                        strides,
                    }
                }
                "stablehlo.pad" => {
                    let low = this
                        .sub(need(take("edge_padding_low"), "edge_padding_low")?)
                        .i64_array()?;
                    let high = this
                        .sub(need(take("edge_padding_high"), "edge_padding_high")?)
                        .i64_array()?;
                    let interior = match take("interior_padding").and_then(|e| e.value) {
                        Some(s) => this.sub(s).i64_array()?,
                        None => vec![0; low.len()],
                    };
                    OpKind::Pad {
                        low,
                        high,
                        interior,
                    }
                }
                "stablehlo.concatenate" => OpKind::Concatenate {
                    dim: this.sub(need(take("dimension"), "dimension")?).int_attr()?,
                },
                "stablehlo.iota" => OpKind::Iota {
                    dim: this
                        .sub(need(take("iota_dimension"), "iota_dimension")?)
                        .int_attr()?,
                },
                "stablehlo.dot_general" => {
                    let dims = this
                        .sub(need(
                            take("dot_dimension_numbers"),
                            "dot_dimension_numbers",
                        )?)
                        .dot_dims_attr()?;
                    let precision_config = take("precision_config")
                        .and_then(|e| e.value)
                        .map(|s| this.precision(s));
                    OpKind::DotGeneral {
                        dims,
                        precision_config,
                    }
                }
                "stablehlo.convolution" => {
                    let dims = this
                        .sub(need(take("dimension_numbers"), "dimension_numbers")?)
                        .conv_dims_attr()?;
                    let n = dims.input_spatial.len();
                    let mut ints = |key: &str, default: i64| -> PResult<Vec<i64>> {
                        match take(key).and_then(|e| e.value) {
                            Some(s) => this.sub(s).i64_array(),
                            None => Ok(vec![default; n]),
                        }
                    };
                    let window_strides = ints("window_strides", 1)?;
                    let lhs_dilation = ints("lhs_dilation", 1)?;
                    let rhs_dilation = ints("rhs_dilation", 1)?;
                    let padding = match take("padding").and_then(|e| e.value) {
                        Some(s) => this.sub(s).pairs_attr()?,
                        None => vec![(0, 0); n],
                    };
                    let window_reversal = match take("window_reversal").and_then(|e| e.value) {
                        Some(s) => this.sub(s).bool_array()?,
                        None => vec![false; n],
                    };
                    let mut count = |key: &str| -> PResult<i64> {
                        match take(key).and_then(|e| e.value) {
                            Some(s) => this.sub(s).int_attr(),
                            None => Ok(1),
                        }
                    };
                    let feature_group_count = count("feature_group_count")?;
                    let batch_group_count = count("batch_group_count")?;
                    let precision_config = take("precision_config")
                        .and_then(|e| e.value)
                        .map(|s| this.precision(s));
                    OpKind::Convolution(ConvAttrs {
                        window_strides,
                        padding,
                        lhs_dilation,
                        rhs_dilation,
                        window_reversal,
                        dims,
                        feature_group_count,
                        batch_group_count,
                        precision_config,
                    })
                }
                "stablehlo.reduce" => OpKind::Reduce {
                    dims: this
                        .sub(need(take("dimensions"), "dimensions")?)
                        .i64_array()?,
                },
                "stablehlo.reduce_window" | "stablehlo.select_and_scatter" => {
                    let window_dimensions = this
                        .sub(need(take("window_dimensions"), "window_dimensions")?)
                        .i64_array()?;
                    let n = window_dimensions.len();
                    let padding = match take("padding").and_then(|e| e.value) {
                        Some(s) => this.sub(s).pairs_attr()?,
                        None => vec![(0, 0); n],
                    };
                    let mut ints = |key: &str| -> PResult<Vec<i64>> {
                        match take(key).and_then(|e| e.value) {
                            Some(s) => this.sub(s).i64_array(),
                            None => Ok(vec![1; n]),
                        }
                    };
                    let window_strides = ints("window_strides")?;
                    if name == "stablehlo.reduce_window" {
                        let base_dilations = ints("base_dilations")?;
                        let window_dilations = ints("window_dilations")?;
                        OpKind::ReduceWindow(WindowAttrs {
                            window_dimensions,
                            window_strides,
                            base_dilations,
                            window_dilations,
                            padding,
                        })
                    } else {
                        OpKind::SelectAndScatter(ScatterWindowAttrs {
                            window_dimensions,
                            window_strides,
                            padding,
                        })
                    }
                }
                "stablehlo.all_reduce" => {
                    let replica_groups = match take("replica_groups").and_then(|e| e.value) {
                        Some(s) => this.sub(s).groups_attr()?,
                        None => Vec::new(),
                    };
                    let channel_id = match take("channel_handle").and_then(|e| e.value) {
                        Some(s) => Some(this.sub(s).channel_handle()?),
                        None => None,
                    };
                    let use_global_device_ids = match take("use_global_device_ids") {
                        None => false,
                        Some(Entry { value: None, .. }) => true,
                        Some(Entry { value: Some(s), .. }) => {
                            let t = this.text(s);
                            match t {
                                "true" => true,
                                "false" => false,
                                _ => {
                                    return Err(this.err_at(
                                        s.start,
                                        "a unit attribute or true/false",
                                        t,
                                    ))
                                }
                            }
                        }
                    };
                    OpKind::AllReduce {
                        replica_groups,
                        channel_id,
                        use_global_device_ids,
                    }
                }
                "func.call" | "call" => {
                    let s = need(take("callee"), "callee")?;
                    let mut p = this.sub(s);
                    let callee = p.symbol_ref()?;
                    p.expect_end("the callee attribute")?;
                    OpKind::Call { callee }
                }
                "stablehlo.return" => OpKind::Return,
                "func.return" | "return" => OpKind::FuncReturn,
                _ => return Err(this.unsupported(name, pos)),
            }
        };
        let _ = operands;
        let extra = entries.iter().map(|e| self.entry_text(e)).collect();
        Ok((kind, extra))
    }

    // ----- attribute values (each parser runs over one value's span) ----------

    /// `#stablehlo<kind VALUE>` (or a bare `VALUE`): the mnemonic and its position.
    fn enum_attr(&mut self, kind: &str) -> PResult<(&'a str, usize)> {
        let wrapped = self.eat("#stablehlo<");
        if wrapped {
            self.expect_kw(kind)?;
        }
        self.ws();
        let pos = self.pos;
        let v = self.expect_id(kind)?;
        if wrapped {
            self.expect(">")?;
        }
        self.expect_end("the attribute")?;
        Ok((v, pos))
    }

    /// `1 : i64` or `1`.
    fn int_attr(&mut self) -> PResult<i64> {
        let v = self.integer()?;
        if self.eat(":") {
            self.expect_id("an integer type")?;
        }
        self.expect_end("the integer attribute")?;
        Ok(v)
    }

    /// Integers with their shape from `array<i64: …>`, `dense<…> : tensor<…>` or `[…]`.
    fn int_elements(&mut self) -> PResult<(Vec<i64>, Vec<usize>)> {
        if self.eat_kw("array") {
            self.expect("<")?;
            self.expect_id("an integer element type")?;
            let mut v = Vec::new();
            if self.eat(":") {
                loop {
                    v.push(self.integer()?);
                    if !self.eat(",") {
                        break;
                    }
                }
            }
            self.expect(">")?;
            let n = v.len();
            return Ok((v, vec![n]));
        }
        if self.at_kw("dense") {
            let lit = self.dense_lit()?;
            self.expect(":")?;
            let ty = self.tensor_type()?;
            if ty.elem.is_float() {
                return Err(self.err_at(lit.pos, "an integer tensor", ty.to_string()));
            }
            let shape: Vec<usize> = ty.shape.iter().map(|d| *d as usize).collect();
            let data = match self.dense_data(&lit, &ty)? {
                DenseData::Int(v) => v,
                DenseData::Float(_) => Vec::new(),
            };
            let count: usize = shape.iter().product();
            let data = if data.len() == 1 && count != 1 {
                if count > 1 << 20 {
                    return Err(self.err_at(
                        lit.pos,
                        "an attribute of at most 2^20 elements",
                        count.to_string(),
                    ));
                }
                vec![data[0]; count]
            } else {
                data
            };
            return Ok((data, shape));
        }
        // A plain (possibly nested) list.
        let lit = self.list_lit(0)?;
        let mut v = Vec::new();
        for s in &lit.elems {
            let mut p = self.sub(*s);
            v.push(p.integer()?);
            p.expect_end("the integer")?;
        }
        Ok((v, lit.shape.unwrap_or_default()))
    }

    fn i64_array(&mut self) -> PResult<Vec<i64>> {
        self.ws();
        let pos = self.pos;
        let (v, shape) = self.int_elements()?;
        if shape.len() > 1 {
            return Err(self.err_at(
                pos,
                "a one-dimensional integer array",
                format!("rank {}", shape.len()),
            ));
        }
        self.expect_end("the integer array")?;
        Ok(v)
    }

    /// Padding: `dense<[[lo, hi], …]> : tensor<Nx2xi64>` or `[[lo, hi], …]`.
    fn pairs_attr(&mut self) -> PResult<Vec<(i64, i64)>> {
        self.ws();
        let pos = self.pos;
        let (v, shape) = self.int_elements()?;
        if shape.len() != 2 || shape[1] != 2 {
            return Err(self.err_at(pos, "an N×2 integer array", format!("shape {shape:?}")));
        }
        self.expect_end("the padding attribute")?;
        Ok(v.chunks(2).map(|c| (c[0], c[1])).collect())
    }

    fn pair_list(&mut self) -> PResult<Vec<(i64, i64)>> {
        let span = self.balanced(b",}", false)?;
        self.sub(span).pairs_attr()
    }

    /// `[[0, 1, 2, 3]]`-shaped replica groups.
    fn groups_attr(&mut self) -> PResult<Vec<Vec<i64>>> {
        self.ws();
        let pos = self.pos;
        let (v, shape) = self.int_elements()?;
        if shape.len() != 2 {
            return Err(self.err_at(
                pos,
                "a two-dimensional integer array",
                format!("shape {shape:?}"),
            ));
        }
        self.expect_end("the replica groups")?;
        let (groups, width) = (shape[0], shape[1]);
        if width == 0 {
            return Ok(vec![Vec::new(); groups.min(1 << 16)]);
        }
        Ok(v.chunks(width).map(<[i64]>::to_vec).collect())
    }

    /// Booleans from `array<i1: …>`, `dense<…> : tensor<Nxi1>`, `[true, 0, …]`.
    fn bool_array(&mut self) -> PResult<Vec<bool>> {
        self.ws();
        if self.at_kw("array") || self.at_kw("dense") {
            let save = self.pos;
            if self.eat_kw("array") {
                self.expect("<")?;
                self.expect_kw("i1")?;
                let mut v = Vec::new();
                if self.eat(":") {
                    loop {
                        v.push(self.bool_token()?);
                        if !self.eat(",") {
                            break;
                        }
                    }
                }
                self.expect(">")?;
                self.expect_end("the boolean array")?;
                return Ok(v);
            }
            self.pos = save;
            let (v, _) = self.int_elements()?;
            self.expect_end("the boolean array")?;
            return Ok(v.into_iter().map(|x| x != 0).collect());
        }
        let v = self.bool_list()?;
        self.expect_end("the boolean array")?;
        Ok(v)
    }

    fn bool_list(&mut self) -> PResult<Vec<bool>> {
        self.expect("[")?;
        let mut v = Vec::new();
        if self.eat("]") {
            return Ok(v);
        }
        loop {
            v.push(self.bool_token()?);
            if self.eat("]") {
                return Ok(v);
            }
            self.expect(",")?;
        }
    }

    fn bool_token(&mut self) -> PResult<bool> {
        if self.eat_kw("true") {
            return Ok(true);
        }
        if self.eat_kw("false") {
            return Ok(false);
        }
        match self.integer() {
            Ok(0) => Ok(false),
            Ok(1) => Ok(true),
            _ => Err(self.err("a boolean (true, false, 0 or 1)")),
        }
    }

    /// A precision config normalised to `[#stablehlo<precision X>, …]`; text that
    /// is not a list of precisions is kept verbatim.
    fn precision(&self, span: Span) -> String {
        let mut p = self.sub(span);
        let mut names = Vec::new();
        let parsed = (|| -> PResult<()> {
            p.expect("[")?;
            if p.eat("]") {
                return Ok(());
            }
            loop {
                let wrapped = p.eat("#stablehlo<");
                if wrapped {
                    p.expect_kw("precision")?;
                }
                names.push(p.expect_id("a precision")?.to_string());
                if wrapped {
                    p.expect(">")?;
                }
                if p.eat("]") {
                    return Ok(());
                }
                p.expect(",")?;
            }
        })();
        if parsed.is_ok() && p.at_end() {
            let parts: Vec<String> = names
                .iter()
                .map(|n| format!("#stablehlo<precision {n}>"))
                .collect();
            format!("[{}]", parts.join(", "))
        } else {
            self.text(span).to_string()
        }
    }

    fn dot_dims_attr(&mut self) -> PResult<DotDims> {
        self.expect("#stablehlo.dot<")?;
        let mut d = DotDims::default();
        if !self.eat(">") {
            loop {
                self.ws();
                let kpos = self.pos;
                let key = self.expect_id("a dot dimension field")?;
                self.expect("=")?;
                let v = self.int_list()?;
                match key {
                    "lhs_batching_dimensions" => d.lhs_batch = v,
                    "rhs_batching_dimensions" => d.rhs_batch = v,
                    "lhs_contracting_dimensions" => d.lhs_contracting = v,
                    "rhs_contracting_dimensions" => d.rhs_contracting = v,
                    other => {
                        return Err(self.err_at(
                            kpos,
                            "lhs_/rhs_batching_dimensions or lhs_/rhs_contracting_dimensions",
                            other,
                        ))
                    }
                }
                if self.eat(">") {
                    break;
                }
                self.expect(",")?;
            }
        }
        self.expect_end("the dot dimension numbers")?;
        Ok(d)
    }

    fn conv_dims_attr(&mut self) -> PResult<ConvDims> {
        self.expect("#stablehlo.conv<")?;
        let d = if self.eat_kw("raw") {
            let mut d = ConvDims::nchw(0);
            loop {
                self.ws();
                let kpos = self.pos;
                let key = self.expect_id("a convolution dimension field")?;
                self.expect("=")?;
                match key {
                    "input_batch_dimension" => d.input_batch = self.integer()?,
                    "input_feature_dimension" => d.input_feature = self.integer()?,
                    "input_spatial_dimensions" => d.input_spatial = self.int_list()?,
                    "kernel_input_feature_dimension" => d.kernel_input_feature = self.integer()?,
                    "kernel_output_feature_dimension" => {
                        d.kernel_output_feature = self.integer()?
                    }
                    "kernel_spatial_dimensions" => d.kernel_spatial = self.int_list()?,
                    "output_batch_dimension" => d.output_batch = self.integer()?,
                    "output_feature_dimension" => d.output_feature = self.integer()?,
                    "output_spatial_dimensions" => d.output_spatial = self.int_list()?,
                    other => return Err(self.err_at(kpos, "a convolution dimension field", other)),
                }
                if !self.eat(",") {
                    break;
                }
            }
            d
        } else {
            self.conv_dims_compact()?
        };
        self.expect(">")?;
        self.expect_end("the convolution dimension numbers")?;
        Ok(d)
    }

    /// `[b, f, 0, 1]x[o, i, 0, 1]->[b, f, 0, 1]`.
    fn conv_dims_compact(&mut self) -> PResult<ConvDims> {
        let (ib, i_f, isp) = self.conv_labels('b', 'f')?;
        self.expect("x")?;
        let (ko, ki, ksp) = self.conv_labels('o', 'i')?;
        self.expect("->")?;
        let (ob, of, osp) = self.conv_labels('b', 'f')?;
        Ok(ConvDims {
            input_batch: ib,
            input_feature: i_f,
            input_spatial: isp,
            kernel_input_feature: ki,
            kernel_output_feature: ko,
            kernel_spatial: ksp,
            output_batch: ob,
            output_feature: of,
            output_spatial: osp,
        })
    }

    /// One bracketed label list: where `first`, `second` and each spatial index sit.
    fn conv_labels(&mut self, first: char, second: char) -> PResult<(i64, i64, Vec<i64>)> {
        self.ws();
        let pos = self.pos;
        self.expect("[")?;
        let mut labels: Vec<String> = Vec::new();
        if !self.eat("]") {
            loop {
                self.ws();
                let n = self
                    .rest()
                    .bytes()
                    .take_while(u8::is_ascii_alphanumeric)
                    .count();
                if n == 0 {
                    return Err(self.err(format!(
                        "a dimension label ({first}, {second} or a spatial index)"
                    )));
                }
                labels.push(self.rest().get(..n).unwrap_or("").to_string());
                self.pos += n;
                if self.eat("]") {
                    break;
                }
                self.expect(",")?;
            }
        }
        let bad = |p: &Self| {
            p.err_at(
                pos,
                format!(
                    "each of {first}, {second}, 0..{} exactly once",
                    labels.len().saturating_sub(2)
                ),
                format!("[{}]", labels.join(", ")),
            )
        };
        let spatial = labels.len().checked_sub(2).ok_or_else(|| bad(self))?;
        let (mut a, mut b) = (None, None);
        let mut sp: Vec<Option<i64>> = vec![None; spatial];
        for (i, l) in labels.iter().enumerate() {
            let slot = if *l == first.to_string() {
                &mut a
            } else if *l == second.to_string() {
                &mut b
            } else {
                match l.parse::<usize>().ok().and_then(|k| sp.get_mut(k)) {
                    Some(s) => s,
                    None => return Err(bad(self)),
                }
            };
            if slot.is_some() {
                return Err(bad(self));
            }
            *slot = Some(i as i64);
        }
        let sp: Option<Vec<i64>> = sp.into_iter().collect();
        match (a, b, sp) {
            (Some(a), Some(b), Some(sp)) => Ok((a, b, sp)),
            _ => Err(bad(self)),
        }
    }

    /// `#stablehlo.channel_handle<handle = H, type = T>`.
    fn channel_handle(&mut self) -> PResult<(i64, i64)> {
        self.expect("#stablehlo.channel_handle<")?;
        self.expect_kw("handle")?;
        self.expect("=")?;
        let h = self.integer()?;
        self.expect(",")?;
        self.expect_kw("type")?;
        self.expect("=")?;
        let t = self.integer()?;
        self.expect(">")?;
        self.expect_end("the channel handle")?;
        Ok((h, t))
    }

    // ----- dense literals -------------------------------------------------------

    /// `dense<…>` up to the closing `>`.
    fn dense_lit(&mut self) -> PResult<DenseLit> {
        self.ws();
        let pos = self.pos;
        self.expect_kw("dense")?;
        if self.peek() != Some(b'<') {
            return Err(self.err("'<'"));
        }
        self.pos += 1;
        let lit = if self.at(">") {
            DenseLit {
                shape: Some(vec![0]),
                elems: Vec::new(),
                hex_blob: None,
                pos,
            }
        } else if self.at_byte(b'"') {
            let start = self.pos;
            self.string_lit()?;
            DenseLit {
                shape: None,
                elems: Vec::new(),
                hex_blob: Some(Span {
                    start: start + 1,
                    end: self.pos - 1,
                }),
                pos,
            }
        } else if self.at("[") {
            let mut l = self.list_lit(0)?;
            l.pos = pos;
            l
        } else {
            DenseLit {
                shape: None,
                elems: vec![self.element_token()?],
                hex_blob: None,
                pos,
            }
        };
        self.expect(">")?;
        Ok(lit)
    }

    /// One literal element: a number, hex bits, or `true`/`false`.
    fn element_token(&mut self) -> PResult<Span> {
        self.ws();
        let start = self.pos;
        let n = self
            .rest()
            .bytes()
            .take_while(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'+' | b'-'))
            .count();
        if n == 0 {
            return Err(self.err("a literal element"));
        }
        self.pos += n;
        Ok(Span {
            start,
            end: self.pos,
        })
    }

    /// A nested `[…]` list: its rectangular shape and elements.
    fn list_lit(&mut self, depth: usize) -> PResult<DenseLit> {
        if self.depth + depth >= MAX_NESTING {
            return Err(self.err(format!("at most {MAX_NESTING} levels of nesting")));
        }
        self.ws();
        let pos = self.pos;
        self.expect("[")?;
        let mut elems = Vec::new();
        let mut inner: Option<Vec<usize>> = None;
        let mut count = 0usize;
        if !self.eat("]") {
            loop {
                let child_shape = if self.at("[") {
                    let child = self.list_lit(depth + 1)?;
                    elems.extend(child.elems);
                    child.shape.unwrap_or_default()
                } else {
                    elems.push(self.element_token()?);
                    Vec::new()
                };
                match &inner {
                    None => inner = Some(child_shape),
                    Some(s) if *s == child_shape => {}
                    Some(s) => {
                        return Err(self.err_at(
                            pos,
                            format!("a rectangular list (every element of shape {s:?})"),
                            format!("an element of shape {child_shape:?}"),
                        ))
                    }
                }
                count += 1;
                if self.eat("]") {
                    break;
                }
                self.expect(",")?;
            }
        }
        let mut shape = vec![count];
        shape.extend(inner.unwrap_or_default());
        Ok(DenseLit {
            shape: Some(shape),
            elems,
            hex_blob: None,
            pos,
        })
    }

    /// Convert a literal to data of `ty`: shape checked, floats rounded to the
    /// element type, integers range-checked.
    fn dense_data(&self, lit: &DenseLit, ty: &TensorType) -> PResult<DenseData> {
        let want: Vec<usize> = ty.shape.iter().map(|d| *d as usize).collect();
        if let Some(blob) = lit.hex_blob {
            return self.hex_blob(blob, ty);
        }
        if let Some(shape) = &lit.shape {
            let empty_ok = lit.elems.is_empty() && want.contains(&0);
            if *shape != want && !empty_ok {
                return Err(self.err_at(
                    lit.pos,
                    format!("a literal of shape {want:?} (the type's)"),
                    format!("shape {shape:?}"),
                ));
            }
        }
        if ty.elem.is_float() {
            let mut v = Vec::with_capacity(lit.elems.len());
            for s in &lit.elems {
                v.push(self.float_elem(*s, ty.elem)?);
            }
            Ok(DenseData::Float(v))
        } else {
            let mut v = Vec::with_capacity(lit.elems.len());
            for s in &lit.elems {
                v.push(self.int_elem(*s, ty.elem)?);
            }
            Ok(DenseData::Int(v))
        }
    }

    fn float_elem(&self, s: Span, elem: ElemType) -> PResult<f64> {
        let t = self.text(s);
        let bad = || self.err_at(s.start, format!("a {elem} literal"), t);
        if let Some(hex) = t.strip_prefix("0x").or_else(|| t.strip_prefix("0X")) {
            let bits = u64::from_str_radix(hex, 16).map_err(|_| bad())?;
            return float_from_bits(bits, elem).ok_or_else(bad);
        }
        let numeric = t
            .trim_start_matches(['-', '+'])
            .bytes()
            .next()
            .is_some_and(|b| b.is_ascii_digit());
        if !numeric {
            return Err(bad());
        }
        decimal_to_elem(t, elem).ok_or_else(bad)
    }

    fn int_elem(&self, s: Span, elem: ElemType) -> PResult<i64> {
        let t = self.text(s);
        let bad = || self.err_at(s.start, format!("an {elem} literal"), t);
        let v: i128 = match t {
            "true" => 1,
            "false" => 0,
            _ => {
                if let Some(hex) = t.strip_prefix("0x").or_else(|| t.strip_prefix("0X")) {
                    u64::from_str_radix(hex, 16).map_err(|_| bad())? as i128
                } else {
                    t.parse::<i128>().map_err(|_| bad())?
                }
            }
        };
        let bits = elem.bit_width();
        let (lo, hi): (i128, i128) = if elem == ElemType::I1 {
            (0, 1)
        } else if elem.is_unsigned() {
            (0, (1i128 << bits) - 1)
        } else {
            // MLIR accepts a signed type's unsigned spelling (`255 : i8`); keep the
            // signed reading.
            (-(1i128 << (bits - 1)), (1i128 << bits) - 1)
        };
        if v < lo || v > hi {
            return Err(bad());
        }
        let v = if !elem.is_unsigned() && elem != ElemType::I1 && v >= 1i128 << (bits - 1) {
            v - (1i128 << bits)
        } else {
            v
        };
        Ok(v as i64)
    }

    /// `dense<"0x…">`: little-endian element bytes, one element (a splat) or all.
    fn hex_blob(&self, s: Span, ty: &TensorType) -> PResult<DenseData> {
        let t = self.text(s);
        let bad = |why: &str| {
            self.err_at(
                s.start,
                why.to_string(),
                t.get(..t.len().min(24)).unwrap_or(""),
            )
        };
        let hex = t
            .strip_prefix("0x")
            .ok_or_else(|| bad("a hex string starting 0x"))?;
        if hex.len() & 1 == 1 || !hex.bytes().all(|b| b.is_ascii_hexdigit()) {
            return Err(bad("an even number of hex digits"));
        }
        let bytes: Vec<u8> = (0..hex.len() / 2)
            .map(|i| u8::from_str_radix(&hex[2 * i..2 * i + 2], 16).unwrap_or(0))
            .collect();
        let width = (ty.elem.bit_width() as usize).div_ceil(8);
        let count: Option<usize> = ty
            .shape
            .iter()
            .try_fold(1usize, |a, d| a.checked_mul(usize::try_from(*d).ok()?));
        let n = bytes.len() / width;
        if n * width != bytes.len() || (n != 1 && Some(n) != count) {
            return Err(bad("a hex blob of one element or one per tensor element"));
        }
        let words = bytes.chunks(width).map(|c| {
            c.iter()
                .rev()
                .fold(0u64, |acc, b| (acc << 8) | u64::from(*b))
        });
        if ty.elem.is_float() {
            let v: Option<Vec<f64>> = words.map(|w| float_from_bits(w, ty.elem)).collect();
            Ok(DenseData::Float(v.ok_or_else(|| bad("float bits"))?))
        } else {
            let bits = ty.elem.bit_width();
            let v = words
                .map(|w| {
                    if ty.elem.is_unsigned() || bits >= 64 || ty.elem == ElemType::I1 {
                        w as i64
                    } else {
                        // Sign-extend from the element's width.
                        let shift = 64 - bits;
                        ((w << shift) as i64) >> shift
                    }
                })
                .collect();
            Ok(DenseData::Int(v))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn error_display_has_file_line_col() {
        let e = parse_module(
            "module {\n  func.func @f() {\n    %0 = stablehlo.while\n",
            "x.mlir",
        )
        .expect_err("unsupported op");
        assert_eq!((e.line, e.col), (3, 10));
        assert_eq!(e.found, "stablehlo.while");
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
