//! The parser's lexical layer: positions and error messages, whitespace and
//! `//` comments, tokens (identifiers, strings, symbols, integers), and the
//! bracket-balanced scan that keeps an attribute value as a span to parse later.

use super::{Entry, PResult, ParseError, Parser, Span, MAX_NESTING};

fn is_id_start(b: u8) -> bool {
    b.is_ascii_alphabetic() || b == b'_'
}

fn is_id_char(b: u8) -> bool {
    b.is_ascii_alphanumeric() || matches!(b, b'_' | b'$' | b'.')
}

fn is_suffix_char(b: u8) -> bool {
    b.is_ascii_alphanumeric() || matches!(b, b'_' | b'$' | b'.' | b'-')
}

impl<'a> Parser<'a> {
    // ----- positions and errors -------------------------------------------

    pub(super) fn line_col(&self, pos: usize) -> (u32, u32) {
        let line = self.lines.partition_point(|s| *s <= pos).max(1);
        let start = self.lines.get(line - 1).copied().unwrap_or(0);
        let col = match self.src.get(start..pos) {
            Some(s) => s.chars().count(),
            None => pos.saturating_sub(start),
        };
        (line as u32, col as u32 + 1)
    }

    pub(super) fn err_at(
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
    pub(super) fn err(&mut self, expected: impl Into<String>) -> ParseError {
        self.ws();
        let found = self.found();
        self.err_at(self.pos, expected, found)
    }

    /// A short description of the next token.
    pub(super) fn found(&self) -> String {
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

    pub(super) fn rest(&self) -> &'a str {
        self.src.get(self.pos..self.end).unwrap_or("")
    }

    pub(super) fn peek(&self) -> Option<u8> {
        if self.pos < self.end {
            self.src.as_bytes().get(self.pos).copied()
        } else {
            None
        }
    }

    pub(super) fn peek_at(&self, k: usize) -> Option<u8> {
        let i = self.pos.checked_add(k)?;
        if i < self.end {
            self.src.as_bytes().get(i).copied()
        } else {
            None
        }
    }

    /// Skip whitespace and `//` comments.
    pub(super) fn ws(&mut self) {
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

    pub(super) fn at(&mut self, s: &str) -> bool {
        self.ws();
        self.rest().starts_with(s)
    }

    pub(super) fn at_byte(&mut self, b: u8) -> bool {
        self.ws();
        self.peek() == Some(b)
    }

    pub(super) fn eat(&mut self, s: &str) -> bool {
        if self.at(s) {
            self.pos += s.len();
            true
        } else {
            false
        }
    }

    pub(super) fn expect(&mut self, s: &str) -> PResult<()> {
        if self.eat(s) {
            Ok(())
        } else {
            Err(self.err(format!("'{s}'")))
        }
    }

    /// A keyword: `s` not followed by an identifier character.
    pub(super) fn at_kw(&mut self, s: &str) -> bool {
        self.at(s)
            && !self
                .src
                .as_bytes()
                .get(self.pos + s.len())
                .is_some_and(|b| is_id_char(*b) && self.pos + s.len() < self.end)
    }

    pub(super) fn eat_kw(&mut self, s: &str) -> bool {
        if self.at_kw(s) {
            self.pos += s.len();
            true
        } else {
            false
        }
    }

    pub(super) fn expect_kw(&mut self, s: &str) -> PResult<()> {
        if self.eat_kw(s) {
            Ok(())
        } else {
            Err(self.err(format!("'{s}'")))
        }
    }

    pub(super) fn at_end(&mut self) -> bool {
        self.ws();
        self.pos >= self.end
    }

    pub(super) fn expect_end(&mut self, what: &str) -> PResult<()> {
        if self.at_end() {
            Ok(())
        } else {
            Err(self.err(format!("the end of {what}")))
        }
    }

    pub(super) fn nest(&mut self) -> PResult<()> {
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

    pub(super) fn expect_id(&mut self, what: &str) -> PResult<&'a str> {
        match self.bare_id() {
            Some(s) => Ok(s),
            None => Err(self.err(what.to_string())),
        }
    }

    /// The identifier after a sigil: digits, or `[A-Za-z$._-][A-Za-z0-9$._-]*`.
    pub(super) fn suffix_id(&mut self) -> Option<&'a str> {
        let rest = self.rest();
        let n = rest.bytes().take_while(|b| is_suffix_char(*b)).count();
        if n == 0 {
            return None;
        }
        self.pos += n;
        rest.get(..n)
    }

    /// `"…"` with MLIR escapes; returns the decoded text.
    pub(super) fn string_lit(&mut self) -> PResult<String> {
        self.ws();
        if self.peek() != Some(b'"') {
            return Err(self.err("a string literal"));
        }
        let start = self.pos;
        self.pos += 1;
        // Fast path: no escape before the closing quote (a dense<"0x…"> blob
        // of many megabytes is one such string) is a single scan and copy.
        let tail = self.src.as_bytes().get(self.pos..self.end).unwrap_or(&[]);
        if let Some(q) = tail.iter().position(|&b| b == b'"' || b == b'\\') {
            if tail[q] == b'"' {
                let text = self.src.get(self.pos..self.pos + q).unwrap_or("");
                self.pos += q + 1;
                return Ok(text.to_string());
            }
        }
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

    /// A string literal skipped without building its value: one scan when
    /// it has no escape (a multi-megabyte `dense<"0x…">` blob), else
    /// [`Self::string_lit`]'s checks.
    pub(super) fn skip_string_lit(&mut self) -> PResult<()> {
        self.ws();
        let tail = self.src.as_bytes().get(self.pos..self.end).unwrap_or(&[]);
        if tail.first() == Some(&b'"') {
            if let Some(q) = tail[1..].iter().position(|&b| b == b'"' || b == b'\\') {
                if tail[1 + q] == b'"' {
                    self.pos += q + 2;
                    return Ok(());
                }
            }
        }
        self.string_lit().map(drop)
    }

    /// `@name` or `@"quoted name"`.
    pub(super) fn symbol_ref(&mut self) -> PResult<String> {
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
    pub(super) fn integer(&mut self) -> PResult<i64> {
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
    pub(super) fn int_list(&mut self) -> PResult<Vec<i64>> {
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
    pub(super) fn skip_loc(&mut self) -> PResult<()> {
        if self.eat_kw("loc") {
            self.expect("(")?;
            self.balanced(b")", true)?;
            self.expect(")")?;
        }
        Ok(())
    }

    /// Scan an attribute value up to one of `stops` at bracket depth 0 (brackets
    /// and strings balanced, `->` skipped). Returns the trimmed span.
    pub(super) fn balanced(&mut self, stops: &[u8], allow_empty: bool) -> PResult<Span> {
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

    pub(super) fn text(&self, s: Span) -> &'a str {
        self.src.get(s.start..s.end).unwrap_or("")
    }

    /// `{name = value, unit, …}`; returns the entries and the text inside the braces.
    pub(super) fn attr_dict(&mut self) -> PResult<(Vec<Entry>, Span)> {
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
    pub(super) fn raw_dict(&mut self) -> PResult<String> {
        let (_, inner) = self.attr_dict()?;
        Ok(self.text(inner).trim().to_string())
    }

    pub(super) fn entry_text(&self, e: &Entry) -> (String, String) {
        let v = e
            .value
            .map(|s| self.text(s).to_string())
            .unwrap_or_default();
        (e.name.clone(), v)
    }
}
