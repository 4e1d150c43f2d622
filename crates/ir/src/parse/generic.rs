//! The generic form of every op, `"stablehlo.op"(…) <{…}> ({…}) {…} : (…) -> …`:
//! the op kind is read from its inherent attributes (in either spelling, with
//! StableHLO's defaults filled in), and the attributes left over are kept
//! verbatim as the op's extras.

use super::{Entry, OpParts, PResult, Parser, Span};
use crate::ops::{
    BinaryOp, CompareDirection, CompareType, ConvAttrs, GatherAttrs, OpKind, ScatterAttrs,
    ScatterWindowAttrs, TransposeA, UnaryOp, WindowAttrs,
};
use crate::types::TensorType;

impl Parser<'_> {
    /// `"name"(operands) [<{props}>] [({regions})] [{attrs}] : (…) -> …`.
    pub(super) fn generic_op(&mut self, name: &str, pos: usize) -> PResult<OpParts> {
        if OpKind::REJECTED_NAMES.contains(&name) {
            return Err(self.not_supported(name, pos));
        }
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
        let (kind, extra) = self.generic_kind(name, pos, entries, &outs)?;
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
        &self,
        name: &str,
        pos: usize,
        entries: Vec<Entry>,
        outs: &[TensorType],
    ) -> PResult<(OpKind, Vec<(String, String)>)> {
        let mut a = Attrs {
            p: self,
            name,
            pos,
            entries,
        };
        let kind = if let Some(u) = UnaryOp::from_name(name) {
            OpKind::Unary(u)
        } else if let Some(b) = BinaryOp::from_name(name) {
            OpKind::Binary(b)
        } else {
            match name {
                "stablehlo.constant" => a.constant(outs)?,
                "stablehlo.compare" => a.compare()?,
                "stablehlo.select" => OpKind::Select,
                "stablehlo.clamp" => OpKind::Clamp,
                "stablehlo.convert" => OpKind::Convert,
                "stablehlo.reshape" => OpKind::Reshape,
                "stablehlo.transpose" => OpKind::Transpose {
                    permutation: a.i64_array("permutation")?,
                },
                "stablehlo.broadcast_in_dim" => OpKind::BroadcastInDim {
                    dims: a.i64_array("broadcast_dimensions")?,
                },
                "stablehlo.reverse" => OpKind::Reverse {
                    dims: a.i64_array("dimensions")?,
                },
                "stablehlo.slice" => a.slice()?,
                "stablehlo.pad" => a.pad()?,
                "stablehlo.concatenate" => OpKind::Concatenate {
                    dim: a.int_attr("dimension")?,
                },
                "stablehlo.iota" => OpKind::Iota {
                    dim: a.int_attr("iota_dimension")?,
                },
                "stablehlo.dot_general" => a.dot_general()?,
                "stablehlo.convolution" => a.convolution()?,
                "stablehlo.reduce" => OpKind::Reduce {
                    dims: a.i64_array("dimensions")?,
                },
                "stablehlo.reduce_window" | "stablehlo.select_and_scatter" => a.window()?,
                "stablehlo.all_reduce" => a.all_reduce()?,
                "func.call" | "call" => a.call()?,
                "stablehlo.return" => OpKind::Return,
                "func.return" | "return" => OpKind::FuncReturn,
                "stablehlo.gather" => a.gather()?,
                "stablehlo.scatter" => a.scatter()?,
                "stablehlo.dynamic_slice" => OpKind::DynamicSlice {
                    sizes: a.i64_array("slice_sizes")?,
                },
                "stablehlo.dynamic_update_slice" => OpKind::DynamicUpdateSlice,
                "stablehlo.while" => OpKind::While,
                "stablehlo.case" => OpKind::Case,
                "stablehlo.if" => OpKind::If,
                "stablehlo.sort" => OpKind::Sort {
                    dimension: match a.value("dimension") {
                        Some(s) => self.sub(s).int_attr()?,
                        None => -1,
                    },
                    is_stable: a.flag("is_stable")?,
                },
                "stablehlo.map" => OpKind::Map {
                    dimensions: a.i64_array("dimensions")?,
                },
                "stablehlo.optimization_barrier" => OpKind::OptimizationBarrier,
                // The bit-level and library ops.
                "stablehlo.bitcast_convert" => OpKind::BitcastConvert,
                "stablehlo.reduce_precision" => OpKind::ReducePrecision {
                    exponent_bits: a.int_attr("exponent_bits")?,
                    mantissa_bits: a.int_attr("mantissa_bits")?,
                },
                "stablehlo.get_dimension_size" => OpKind::GetDimensionSize {
                    dimension: a.int_attr("dimension")?,
                },
                "chlo.top_k" => OpKind::TopK {
                    k: a.int_attr("k")?,
                },
                "stablehlo.triangular_solve" => a.triangular_solve()?,
                _ => return Err(self.unsupported(name, pos)),
            }
        };
        let extra = a.entries.iter().map(|e| self.entry_text(e)).collect();
        Ok((kind, extra))
    }
}

/// A generic op's attributes, taken out one by one as its kind is read.
struct Attrs<'p, 'a> {
    p: &'p Parser<'a>,
    /// The op and its position, for a missing required attribute.
    name: &'p str,
    pos: usize,
    entries: Vec<Entry>,
}

impl Attrs<'_, '_> {
    /// The entry `key`, removed from the leftovers.
    fn take(&mut self, key: &str) -> Option<Entry> {
        let i = self.entries.iter().position(|e| e.name == key)?;
        Some(self.entries.remove(i))
    }

    /// The value of an optional attribute.
    fn value(&mut self, key: &str) -> Option<Span> {
        self.take(key).and_then(|e| e.value)
    }

    /// The value of a required attribute.
    fn need(&mut self, key: &str) -> PResult<Span> {
        let (p, pos, name) = (self.p, self.pos, self.name);
        self.value(key)
            .ok_or_else(|| p.err_at(pos, format!("attribute '{key}' on {name}"), "none"))
    }

    fn i64_array(&mut self, key: &str) -> PResult<Vec<i64>> {
        let s = self.need(key)?;
        self.p.sub(s).i64_array()
    }

    fn int_attr(&mut self, key: &str) -> PResult<i64> {
        let s = self.need(key)?;
        self.p.sub(s).int_attr()
    }

    fn constant(&mut self, outs: &[TensorType]) -> PResult<OpKind> {
        let s = self.need("value")?;
        let mut p = self.p.sub(s);
        let lit = p.dense_lit()?;
        p.expect(":")?;
        let ty = p.tensor_type()?;
        p.expect_end("the value attribute")?;
        if outs.len() == 1 && outs[0] != ty {
            return Err(self.p.err_at(
                s.start,
                format!("a value of the result type {}", outs[0]),
                ty.to_string(),
            ));
        }
        Ok(OpKind::Constant(p.dense_data(&lit, &ty)?))
    }

    fn compare(&mut self) -> PResult<OpKind> {
        let this = self.p;
        let s = self.need("comparison_direction")?;
        let d = this.sub(s).enum_attr("comparison_direction")?;
        let direction = CompareDirection::from_mnemonic(d.0).ok_or_else(|| {
            this.err_at(d.1, "a comparison direction (EQ, NE, GE, GT, LE, LT)", d.0)
        })?;
        let compare_type = match self.value("compare_type") {
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
        Ok(OpKind::Compare {
            direction,
            compare_type,
        })
    }

    fn slice(&mut self) -> PResult<OpKind> {
        let start = self.i64_array("start_indices")?;
        let limit = self.i64_array("limit_indices")?;
        let strides = match self.value("strides") {
            Some(s) => self.p.sub(s).i64_array()?,
            None => vec![1; start.len()],
        };
        Ok(OpKind::Slice {
            start,
            limit,
            strides,
        })
    }

    fn pad(&mut self) -> PResult<OpKind> {
        let low = self.i64_array("edge_padding_low")?;
        let high = self.i64_array("edge_padding_high")?;
        let interior = match self.value("interior_padding") {
            Some(s) => self.p.sub(s).i64_array()?,
            None => vec![0; low.len()],
        };
        Ok(OpKind::Pad {
            low,
            high,
            interior,
        })
    }

    fn dot_general(&mut self) -> PResult<OpKind> {
        let s = self.need("dot_dimension_numbers")?;
        let dims = self.p.sub(s).dot_dims_attr()?;
        let precision_config = self.value("precision_config").map(|s| self.p.precision(s));
        Ok(OpKind::DotGeneral {
            dims,
            precision_config,
        })
    }

    fn convolution(&mut self) -> PResult<OpKind> {
        let this = self.p;
        let s = self.need("dimension_numbers")?;
        let dims = this.sub(s).conv_dims_attr()?;
        let n = dims.input_spatial.len();
        let mut ints = |key: &str, default: i64| -> PResult<Vec<i64>> {
            match self.value(key) {
                Some(s) => this.sub(s).i64_array(),
                None => Ok(vec![default; n]),
            }
        };
        let window_strides = ints("window_strides", 1)?;
        let lhs_dilation = ints("lhs_dilation", 1)?;
        let rhs_dilation = ints("rhs_dilation", 1)?;
        let padding = match self.value("padding") {
            Some(s) => this.sub(s).pairs_attr()?,
            None => vec![(0, 0); n],
        };
        let window_reversal = match self.value("window_reversal") {
            Some(s) => this.sub(s).bool_array()?,
            None => vec![false; n],
        };
        let mut count = |key: &str| -> PResult<i64> {
            match self.value(key) {
                Some(s) => this.sub(s).int_attr(),
                None => Ok(1),
            }
        };
        let feature_group_count = count("feature_group_count")?;
        let batch_group_count = count("batch_group_count")?;
        let precision_config = self.value("precision_config").map(|s| this.precision(s));
        Ok(OpKind::Convolution(ConvAttrs {
            window_strides,
            padding,
            lhs_dilation,
            rhs_dilation,
            window_reversal,
            dims,
            feature_group_count,
            batch_group_count,
            precision_config,
        }))
    }

    /// reduce_window and select_and_scatter.
    fn window(&mut self) -> PResult<OpKind> {
        let this = self.p;
        let window_dimensions = self.i64_array("window_dimensions")?;
        let n = window_dimensions.len();
        let padding = match self.value("padding") {
            Some(s) => this.sub(s).pairs_attr()?,
            None => vec![(0, 0); n],
        };
        let is_reduce_window = self.name == "stablehlo.reduce_window";
        let mut ints = |key: &str| -> PResult<Vec<i64>> {
            match self.value(key) {
                Some(s) => this.sub(s).i64_array(),
                None => Ok(vec![1; n]),
            }
        };
        let window_strides = ints("window_strides")?;
        if is_reduce_window {
            let base_dilations = ints("base_dilations")?;
            let window_dilations = ints("window_dilations")?;
            Ok(OpKind::ReduceWindow(WindowAttrs {
                window_dimensions,
                window_strides,
                base_dilations,
                window_dilations,
                padding,
            }))
        } else {
            Ok(OpKind::SelectAndScatter(ScatterWindowAttrs {
                window_dimensions,
                window_strides,
                padding,
            }))
        }
    }

    fn all_reduce(&mut self) -> PResult<OpKind> {
        let this = self.p;
        let replica_groups = match self.value("replica_groups") {
            Some(s) => this.sub(s).groups_attr()?,
            None => Vec::new(),
        };
        let channel_id = match self.value("channel_handle") {
            Some(s) => Some(this.sub(s).channel_handle()?),
            None => None,
        };
        let use_global_device_ids = match self.take("use_global_device_ids") {
            None => false,
            Some(Entry { value: None, .. }) => true,
            Some(Entry { value: Some(s), .. }) => {
                let t = this.text(s);
                match t {
                    "true" => true,
                    "false" => false,
                    _ => return Err(this.err_at(s.start, "a unit attribute or true/false", t)),
                }
            }
        };
        Ok(OpKind::AllReduce {
            replica_groups,
            channel_id,
            use_global_device_ids,
        })
    }

    /// A required `true`/`false` attribute.
    fn bool_attr(&mut self, key: &str) -> PResult<bool> {
        let s = self.need(key)?;
        match self.p.text(s).trim() {
            "true" => Ok(true),
            "false" => Ok(false),
            t => Err(self
                .p
                .err_at(s.start, format!("true or false for '{key}'"), t)),
        }
    }

    fn triangular_solve(&mut self) -> PResult<OpKind> {
        let this = self.p;
        let s = self.need("transpose_a")?;
        let t = this.sub(s).enum_attr("transpose")?;
        let transpose_a = TransposeA::from_mnemonic(t.0).ok_or_else(|| {
            this.err_at(t.1, "a transpose (NO_TRANSPOSE, TRANSPOSE, ADJOINT)", t.0)
        })?;
        Ok(OpKind::TriangularSolve {
            left_side: self.bool_attr("left_side")?,
            lower: self.bool_attr("lower")?,
            unit_diagonal: self.bool_attr("unit_diagonal")?,
            transpose_a,
        })
    }

    fn call(&mut self) -> PResult<OpKind> {
        let s = self.need("callee")?;
        let mut p = self.p.sub(s);
        let callee = p.symbol_ref()?;
        p.expect_end("the callee attribute")?;
        Ok(OpKind::Call { callee })
    }

    // Structured ops.

    /// An optional boolean attribute (`true`/`false`, or unit = true); absent is false.
    fn flag(&mut self, key: &str) -> PResult<bool> {
        let this = self.p;
        match self.take(key) {
            None => Ok(false),
            Some(Entry { value: None, .. }) => Ok(true),
            Some(Entry { value: Some(s), .. }) => match this.text(s).trim() {
                "true" => Ok(true),
                "false" => Ok(false),
                t => Err(this.err_at(s.start, "true or false", t)),
            },
        }
    }

    fn gather(&mut self) -> PResult<OpKind> {
        let mut g = GatherAttrs::default();
        let s = self.need("dimension_numbers")?;
        self.p.sub(s).gather_dims_attr(&mut g)?;
        g.slice_sizes = self.i64_array("slice_sizes")?;
        g.indices_are_sorted = self.flag("indices_are_sorted")?;
        Ok(OpKind::Gather(g))
    }

    fn scatter(&mut self) -> PResult<OpKind> {
        let mut a = ScatterAttrs::default();
        let s = self.need("scatter_dimension_numbers")?;
        self.p.sub(s).scatter_dims_attr(&mut a)?;
        a.indices_are_sorted = self.flag("indices_are_sorted")?;
        a.unique_indices = self.flag("unique_indices")?;
        Ok(OpKind::Scatter(a))
    }
}
