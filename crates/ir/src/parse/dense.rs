//! `dense<…>` literals: empty, splat, nested lists and hex blobs, checked against
//! and converted to the element type once the `: tensor<…>` after them is read.
//! The element values themselves are read by `crate::literal`.

use super::{PResult, Parser, Span, MAX_NESTING};
use crate::literal::{hex_blob_data, parse_float, parse_int};
use crate::ops::DenseData;
use crate::types::{ElemType, TensorType};

/// A `dense<…>` literal before its element type is known.
pub(super) struct DenseLit {
    /// Nested-list shape; `None` for a splat scalar.
    pub(super) shape: Option<Vec<usize>>,
    pub(super) elems: Vec<Span>,
    /// `dense<"0x…">`: little-endian element bytes.
    pub(super) hex_blob: Option<Span>,
    pub(super) pos: usize,
}

impl Parser<'_> {
    /// `dense<…>` up to the closing `>`.
    pub(super) fn dense_lit(&mut self) -> PResult<DenseLit> {
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
            self.skip_string_lit()?;
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
    pub(super) fn list_lit(&mut self, depth: usize) -> PResult<DenseLit> {
        if self.depth + depth >= MAX_NESTING {
            return Err(self.err(format!("at most {MAX_NESTING} levels of nesting")));
        }
        self.ws();
        let pos = self.pos;
        self.expect("[")?;
        let mut elems = Vec::new();
        let mut inner: Option<Vec<usize>> = None;
        let mut count = 0usize;
        if let Some(lit) = self.scalar_list(pos) {
            return Ok(lit);
        }
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

    /// `a, b, c]` after the `[` of a list of scalars, scanned byte by byte
    /// (a 50 MB one-line weight constant is millions of elements). Only the
    /// plain form — tokens, ASCII whitespace, commas, the closing `]` — is
    /// taken here; anything else (a comment, a nested list, a missing
    /// element) returns `None` with the position unchanged, and the general
    /// loop of `list_lit` parses it and words any error exactly as before.
    fn scalar_list(&mut self, pos: usize) -> Option<DenseLit> {
        let bytes = self.src.as_bytes();
        let end = self.end.min(bytes.len());
        let is_tok = |b: u8| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'+' | b'-');
        let skip_ws = |mut i: usize| {
            while i < end && bytes[i].is_ascii_whitespace() {
                i += 1;
            }
            i
        };
        // Sized once from the commas before the first `]` (a vectorised
        // count), instead of doubling through a multi-megabyte list.
        let here = bytes.get(self.pos..end).unwrap_or(&[]);
        let span = here.iter().position(|&b| b == b']').unwrap_or(here.len());
        let commas = here[..span].iter().filter(|&&b| b == b',').count();
        let mut elems = Vec::with_capacity(commas + 1);
        let mut i = skip_ws(self.pos);
        loop {
            let start = i;
            while i < end && is_tok(bytes[i]) {
                i += 1;
            }
            if i == start {
                return None;
            }
            elems.push(Span { start, end: i });
            i = skip_ws(i);
            if i >= end {
                return None;
            }
            match bytes[i] {
                b',' => i = skip_ws(i + 1),
                b']' => {
                    self.pos = i + 1;
                    return Some(DenseLit {
                        shape: Some(vec![elems.len()]),
                        elems,
                        hex_blob: None,
                        pos,
                    });
                }
                _ => return None,
            }
        }
    }

    /// Convert a literal to data of `ty`: shape checked, floats rounded to the
    /// element type, integers range-checked.
    pub(super) fn dense_data(&self, lit: &DenseLit, ty: &TensorType) -> PResult<DenseData> {
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
        parse_float(t, elem).ok_or_else(|| self.err_at(s.start, format!("a {elem} literal"), t))
    }

    fn int_elem(&self, s: Span, elem: ElemType) -> PResult<i64> {
        let t = self.text(s);
        parse_int(t, elem).ok_or_else(|| self.err_at(s.start, format!("an {elem} literal"), t))
    }

    /// `dense<"0x…">`: little-endian element bytes, one element (a splat) or all.
    fn hex_blob(&self, s: Span, ty: &TensorType) -> PResult<DenseData> {
        let t = self.text(s);
        hex_blob_data(t, ty).map_err(|why| {
            self.err_at(
                s.start,
                why.to_string(),
                t.get(..t.len().min(24)).unwrap_or(""),
            )
        })
    }
}
