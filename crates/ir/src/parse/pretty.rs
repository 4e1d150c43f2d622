//! The pretty (custom assembly) form of each op, as MLIR prints it:
//! `stablehlo.add %a, %b : T`, `stablehlo.compare  LT, %a, %b, FLOAT : …`,
//! `stablehlo.reduce(%x init: %i) applies stablehlo.add across dimensions = […]`,
//! `stablehlo.convolution(%x, %w) dim_numbers = […]x[…]->[…], window = {…}`.

use super::{plural, OpParts, PResult, Parser};
use crate::module::{Block, Op, SrcLoc, ValueId};
use crate::ops::{BinaryOp, CompareDirection, CompareType, ConvAttrs, DotDims, OpKind, UnaryOp};
use crate::types::{ElemType, TensorType};
use std::collections::HashMap;

impl Parser<'_> {
    pub(super) fn pretty_op(&mut self, name: &str, pos: usize) -> PResult<OpParts> {
        if OpKind::REJECTED_NAMES.contains(&name) {
            return Err(self.not_supported(name, pos));
        }
        if let Some(u) = UnaryOp::from_name(name) {
            return self.pretty_unary(u);
        }
        if let Some(b) = BinaryOp::from_name(name) {
            let operands = self.operands()?;
            let extra = self.extras()?;
            let outs = if b.is_chlo() {
                self.chlo_sig(&operands)?
            } else {
                self.same_type_sig(&operands)?
            };
            return Ok(Self::simple(OpKind::Binary(b), operands, outs, extra));
        }
        if let Some(parts) = self.pretty_chlo_op(name)? {
            return Ok(parts);
        }
        match name {
            "stablehlo.constant" => self.pretty_constant(),
            "stablehlo.compare" => self.pretty_compare(),
            "stablehlo.select" => self.pretty_select(),
            "stablehlo.clamp" | "stablehlo.convert" | "stablehlo.reshape" => {
                self.pretty_plain(name)
            }
            "stablehlo.transpose" | "stablehlo.broadcast_in_dim" | "stablehlo.reverse" => {
                self.pretty_dims(name)
            }
            "stablehlo.slice" => self.pretty_slice(),
            "stablehlo.pad" => self.pretty_pad(),
            "stablehlo.concatenate" | "stablehlo.iota" => self.pretty_dim(name),
            "stablehlo.dot_general" => self.pretty_dot_general(),
            "stablehlo.convolution" => self.pretty_convolution(),
            "stablehlo.reduce" => self.pretty_reduce(pos),
            "call" | "func.call" => self.pretty_call(),
            "return" | "func.return" | "stablehlo.return" => self.pretty_return(name),
            "stablehlo.while" => self.pretty_while(),
            "stablehlo.dynamic_slice" => self.pretty_dynamic_slice(),
            "stablehlo.dynamic_update_slice" => self.pretty_dynamic_update_slice(),
            "stablehlo.optimization_barrier" => self.pretty_optimization_barrier(),
            _ => Err(self.unsupported(name, pos)),
        }
    }

    /// A unary op: the same-type signature, or chlo's `: T -> R`.
    fn pretty_unary(&mut self, u: UnaryOp) -> PResult<OpParts> {
        let operands = self.operands()?;
        let extra = self.extras()?;
        let outs = if u.is_chlo() {
            self.chlo_sig(&operands)?
        } else {
            self.same_type_sig(&operands)?
        };
        Ok(Self::simple(OpKind::Unary(u), operands, outs, extra))
    }

    /// `stablehlo.constant [{attrs}] dense<…> : T`.
    fn pretty_constant(&mut self) -> PResult<OpParts> {
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

    /// `stablehlo.compare DIR, %a, %b[, TYPE] : (A, B) -> R`.
    fn pretty_compare(&mut self) -> PResult<OpParts> {
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

    /// `stablehlo.select %p, %a, %b : P, T`, or the functional type.
    fn pretty_select(&mut self) -> PResult<OpParts> {
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

    /// clamp, convert and reshape: operands, then the same-type signature.
    fn pretty_plain(&mut self, name: &str) -> PResult<OpParts> {
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

    /// transpose, broadcast_in_dim and reverse: `%x, dims = […]`.
    fn pretty_dims(&mut self, name: &str) -> PResult<OpParts> {
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

    /// `stablehlo.slice %x [0:2, 1:4:2]`.
    fn pretty_slice(&mut self) -> PResult<OpParts> {
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

    /// `stablehlo.pad %x, %v, low = […], high = […], interior = […]`.
    fn pretty_pad(&mut self) -> PResult<OpParts> {
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

    /// concatenate (`%a, %b, dim = 0`) and iota (`dim = 0 : T`).
    fn pretty_dim(&mut self, name: &str) -> PResult<OpParts> {
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

    /// `call @f(%a, …) : (A, …) -> R`.
    fn pretty_call(&mut self) -> PResult<OpParts> {
        let callee = self.symbol_ref()?;
        self.expect("(")?;
        let operands = self.operands()?;
        self.expect(")")?;
        let extra = self.extras()?;
        let outs = self.functional_sig(&operands)?;
        Ok(Self::simple(OpKind::Call { callee }, operands, outs, extra))
    }

    /// `return %a, … : A, …` (func.return) and `stablehlo.return`.
    fn pretty_return(&mut self, name: &str) -> PResult<OpParts> {
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
}
