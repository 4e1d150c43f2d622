//! Tensor and function types: `tensor<2x3xf32>`, `(A, B) -> (R, S)`.

use super::{PResult, Parser};
use crate::types::{ElemType, TensorType};

impl Parser<'_> {
    pub(super) fn tensor_type(&mut self) -> PResult<TensorType> {
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
    pub(super) fn type_list(&mut self, close: &str) -> PResult<Vec<TensorType>> {
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
    pub(super) fn func_type(&mut self) -> PResult<(Vec<TensorType>, Vec<TensorType>)> {
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
}
