//! Attribute values, each parsed by a parser over the value's own span: enum
//! mnemonics, integers and integer arrays in every spelling (`array<i64: …>`,
//! `dense<…> : tensor<…>`, `[…]`), padding pairs, replica groups, booleans,
//! precision configs, dot and convolution dimension numbers, channel handles.

use super::{PResult, Parser, Span};
use crate::ops::{ConvDims, DenseData, DotDims};

impl<'a> Parser<'a> {
    /// `#stablehlo<kind VALUE>` (or a bare `VALUE`): the mnemonic and its position.
    pub(super) fn enum_attr(&mut self, kind: &str) -> PResult<(&'a str, usize)> {
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
    pub(super) fn int_attr(&mut self) -> PResult<i64> {
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

    pub(super) fn i64_array(&mut self) -> PResult<Vec<i64>> {
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
    pub(super) fn pairs_attr(&mut self) -> PResult<Vec<(i64, i64)>> {
        self.ws();
        let pos = self.pos;
        let (v, shape) = self.int_elements()?;
        if shape.len() != 2 || shape[1] != 2 {
            return Err(self.err_at(pos, "an N×2 integer array", format!("shape {shape:?}")));
        }
        self.expect_end("the padding attribute")?;
        Ok(v.chunks(2).map(|c| (c[0], c[1])).collect())
    }

    pub(super) fn pair_list(&mut self) -> PResult<Vec<(i64, i64)>> {
        let span = self.balanced(b",}", false)?;
        self.sub(span).pairs_attr()
    }

    /// `[[0, 1, 2, 3]]`-shaped replica groups.
    pub(super) fn groups_attr(&mut self) -> PResult<Vec<Vec<i64>>> {
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
    pub(super) fn bool_array(&mut self) -> PResult<Vec<bool>> {
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

    pub(super) fn bool_list(&mut self) -> PResult<Vec<bool>> {
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
    pub(super) fn precision(&self, span: Span) -> String {
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

    pub(super) fn dot_dims_attr(&mut self) -> PResult<DotDims> {
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

    pub(super) fn conv_dims_attr(&mut self) -> PResult<ConvDims> {
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
    pub(super) fn conv_dims_compact(&mut self) -> PResult<ConvDims> {
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
    pub(super) fn channel_handle(&mut self) -> PResult<(i64, i64)> {
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
}
