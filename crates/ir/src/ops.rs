//! The op vocabulary: one enum variant per StableHLO op certgrad knows, with its
//! attributes fully normalised (defaults filled in), so two modules that mean the
//! same thing compare equal and the printer has one canonical spelling.

/// Payload of `stablehlo.constant`: `dense<…>` values in row-major order.
/// `values.len() == 1` with a larger shape means a splat.
#[derive(Clone, Debug)]
pub enum DenseData {
    /// Float element types; every f16/bf16/f32 value is exactly representable in f64.
    Float(Vec<f64>),
    /// Integer element types (i1 stored as 0/1, unsigned as their value).
    Int(Vec<i64>),
}

/// Bitwise equality (any NaN equals any NaN): a NaN constant equals itself and
/// `-0.0 != 0.0`, so a printed and re-parsed module compares equal exactly when
/// its values survived.
impl PartialEq for DenseData {
    fn eq(&self, other: &Self) -> bool {
        match (self, other) {
            (DenseData::Float(a), DenseData::Float(b)) => {
                a.len() == b.len()
                    && a.iter()
                        .zip(b)
                        .all(|(x, y)| x.to_bits() == y.to_bits() || (x.is_nan() && y.is_nan()))
            }
            (DenseData::Int(a), DenseData::Int(b)) => a == b,
            _ => false,
        }
    }
}

impl DenseData {
    pub fn len(&self) -> usize {
        match self {
            DenseData::Float(v) => v.len(),
            DenseData::Int(v) => v.len(),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum UnaryOp {
    Negate,
    Abs,
    Exponential,
    ExponentialMinusOne,
    Log,
    LogPlusOne,
    Sqrt,
    Rsqrt,
    Cbrt,
    Tanh,
    Logistic,
    Sign,
    Floor,
    Ceil,
    RoundNearestEven,
    Sine,
    Cosine,
    Not,
    /// `chlo.erf`.
    Erf,
    /// `chlo.erfc` (JAX exports of the exact, erf-form GELU).
    Erfc,
    /// `chlo.square`.
    Square,
    // The remaining elementwise StableHLO ops and the CHLO ops JAX
    // leaves in its default lowering.
    /// `stablehlo.is_finite`: float → i1.
    IsFinite,
    /// `stablehlo.popcnt`: set bits of an integer.
    Popcnt,
    /// `stablehlo.count_leading_zeros` within the element's bit width.
    CountLeadingZeros,
    /// `stablehlo.round_nearest_afz`: ties away from zero.
    RoundNearestAfz,
    /// `stablehlo.tan`.
    Tan,
    /// `chlo.tan` (same meaning as `stablehlo.tan`, kept apart so it prints back as written).
    ChloTan,
    ErfInv,
    Lgamma,
    Digamma,
    /// `chlo.bessel_i1e`: e^{−|x|}·I₁(x).
    BesselI1e,
    Sinh,
    Cosh,
    Asin,
    Acos,
    Atan,
    Asinh,
    Acosh,
    Atanh,
    /// `chlo.is_inf`, `chlo.is_neg_inf`, `chlo.is_pos_inf`: float → i1.
    IsInf,
    IsNegInf,
    IsPosInf,
}

impl UnaryOp {
    pub const ALL: [UnaryOp; 42] = [
        UnaryOp::Negate,
        UnaryOp::Abs,
        UnaryOp::Exponential,
        UnaryOp::ExponentialMinusOne,
        UnaryOp::Log,
        UnaryOp::LogPlusOne,
        UnaryOp::Sqrt,
        UnaryOp::Rsqrt,
        UnaryOp::Cbrt,
        UnaryOp::Tanh,
        UnaryOp::Logistic,
        UnaryOp::Sign,
        UnaryOp::Floor,
        UnaryOp::Ceil,
        UnaryOp::RoundNearestEven,
        UnaryOp::Sine,
        UnaryOp::Cosine,
        UnaryOp::Not,
        UnaryOp::Erf,
        UnaryOp::Erfc,
        UnaryOp::Square,
        UnaryOp::IsFinite,
        UnaryOp::Popcnt,
        UnaryOp::CountLeadingZeros,
        UnaryOp::RoundNearestAfz,
        UnaryOp::Tan,
        UnaryOp::ChloTan,
        UnaryOp::ErfInv,
        UnaryOp::Lgamma,
        UnaryOp::Digamma,
        UnaryOp::BesselI1e,
        UnaryOp::Sinh,
        UnaryOp::Cosh,
        UnaryOp::Asin,
        UnaryOp::Acos,
        UnaryOp::Atan,
        UnaryOp::Asinh,
        UnaryOp::Acosh,
        UnaryOp::Atanh,
        UnaryOp::IsInf,
        UnaryOp::IsNegInf,
        UnaryOp::IsPosInf,
    ];

    /// Full op name as printed (`stablehlo.negate`, `chlo.erf`).
    pub fn name(self) -> &'static str {
        match self {
            UnaryOp::Negate => "stablehlo.negate",
            UnaryOp::Abs => "stablehlo.abs",
            UnaryOp::Exponential => "stablehlo.exponential",
            UnaryOp::ExponentialMinusOne => "stablehlo.exponential_minus_one",
            UnaryOp::Log => "stablehlo.log",
            UnaryOp::LogPlusOne => "stablehlo.log_plus_one",
            UnaryOp::Sqrt => "stablehlo.sqrt",
            UnaryOp::Rsqrt => "stablehlo.rsqrt",
            UnaryOp::Cbrt => "stablehlo.cbrt",
            UnaryOp::Tanh => "stablehlo.tanh",
            UnaryOp::Logistic => "stablehlo.logistic",
            UnaryOp::Sign => "stablehlo.sign",
            UnaryOp::Floor => "stablehlo.floor",
            UnaryOp::Ceil => "stablehlo.ceil",
            UnaryOp::RoundNearestEven => "stablehlo.round_nearest_even",
            UnaryOp::Sine => "stablehlo.sine",
            UnaryOp::Cosine => "stablehlo.cosine",
            UnaryOp::Not => "stablehlo.not",
            UnaryOp::Erf => "chlo.erf",
            UnaryOp::Erfc => "chlo.erfc",
            UnaryOp::Square => "chlo.square",
            UnaryOp::IsFinite => "stablehlo.is_finite",
            UnaryOp::Popcnt => "stablehlo.popcnt",
            UnaryOp::CountLeadingZeros => "stablehlo.count_leading_zeros",
            UnaryOp::RoundNearestAfz => "stablehlo.round_nearest_afz",
            UnaryOp::Tan => "stablehlo.tan",
            UnaryOp::ChloTan => "chlo.tan",
            UnaryOp::ErfInv => "chlo.erf_inv",
            UnaryOp::Lgamma => "chlo.lgamma",
            UnaryOp::Digamma => "chlo.digamma",
            UnaryOp::BesselI1e => "chlo.bessel_i1e",
            UnaryOp::Sinh => "chlo.sinh",
            UnaryOp::Cosh => "chlo.cosh",
            UnaryOp::Asin => "chlo.asin",
            UnaryOp::Acos => "chlo.acos",
            UnaryOp::Atan => "chlo.atan",
            UnaryOp::Asinh => "chlo.asinh",
            UnaryOp::Acosh => "chlo.acosh",
            UnaryOp::Atanh => "chlo.atanh",
            UnaryOp::IsInf => "chlo.is_inf",
            UnaryOp::IsNegInf => "chlo.is_neg_inf",
            UnaryOp::IsPosInf => "chlo.is_pos_inf",
        }
    }

    pub fn from_name(s: &str) -> Option<UnaryOp> {
        UnaryOp::ALL.into_iter().find(|u| u.name() == s)
    }

    /// CHLO ops print their type as `: T -> R` rather than stablehlo's `: T`.
    pub fn is_chlo(self) -> bool {
        self.name().starts_with("chlo.")
    }

    /// Float → i1 classification ops.
    pub fn is_predicate(self) -> bool {
        matches!(
            self,
            UnaryOp::IsFinite | UnaryOp::IsInf | UnaryOp::IsNegInf | UnaryOp::IsPosInf
        )
    }

    /// Bit-counting ops on (non-boolean) integers.
    pub fn is_bit_count(self) -> bool {
        matches!(self, UnaryOp::Popcnt | UnaryOp::CountLeadingZeros)
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum BinaryOp {
    Add,
    Subtract,
    Multiply,
    Divide,
    Remainder,
    Maximum,
    Minimum,
    Power,
    And,
    Or,
    Xor,
    // The binary special functions.
    /// `stablehlo.atan2(y, x)`.
    Atan2,
    ShiftLeft,
    ShiftRightLogical,
    ShiftRightArithmetic,
    /// `chlo.polygamma(n, x)`: the n-th derivative of digamma.
    Polygamma,
    /// `chlo.zeta(s, q)`: the Hurwitz zeta function.
    Zeta,
    /// `chlo.next_after(x, y)`: the next representable value after x toward y.
    NextAfter,
    /// `chlo.mulhi(x, y)`: the high half of the double-width integer product.
    Mulhi,
}

impl BinaryOp {
    pub const ALL: [BinaryOp; 19] = [
        BinaryOp::Add,
        BinaryOp::Subtract,
        BinaryOp::Multiply,
        BinaryOp::Divide,
        BinaryOp::Remainder,
        BinaryOp::Maximum,
        BinaryOp::Minimum,
        BinaryOp::Power,
        BinaryOp::And,
        BinaryOp::Or,
        BinaryOp::Xor,
        BinaryOp::Atan2,
        BinaryOp::ShiftLeft,
        BinaryOp::ShiftRightLogical,
        BinaryOp::ShiftRightArithmetic,
        BinaryOp::Polygamma,
        BinaryOp::Zeta,
        BinaryOp::NextAfter,
        BinaryOp::Mulhi,
    ];

    pub fn name(self) -> &'static str {
        match self {
            BinaryOp::Add => "stablehlo.add",
            BinaryOp::Subtract => "stablehlo.subtract",
            BinaryOp::Multiply => "stablehlo.multiply",
            BinaryOp::Divide => "stablehlo.divide",
            BinaryOp::Remainder => "stablehlo.remainder",
            BinaryOp::Maximum => "stablehlo.maximum",
            BinaryOp::Minimum => "stablehlo.minimum",
            BinaryOp::Power => "stablehlo.power",
            BinaryOp::And => "stablehlo.and",
            BinaryOp::Or => "stablehlo.or",
            BinaryOp::Xor => "stablehlo.xor",
            BinaryOp::Atan2 => "stablehlo.atan2",
            BinaryOp::ShiftLeft => "stablehlo.shift_left",
            BinaryOp::ShiftRightLogical => "stablehlo.shift_right_logical",
            BinaryOp::ShiftRightArithmetic => "stablehlo.shift_right_arithmetic",
            BinaryOp::Polygamma => "chlo.polygamma",
            BinaryOp::Zeta => "chlo.zeta",
            BinaryOp::NextAfter => "chlo.next_after",
            BinaryOp::Mulhi => "chlo.mulhi",
        }
    }

    pub fn from_name(s: &str) -> Option<BinaryOp> {
        BinaryOp::ALL.into_iter().find(|b| b.name() == s)
    }

    /// Logical ops take integer/boolean operands only.
    pub fn is_logical(self) -> bool {
        matches!(self, BinaryOp::And | BinaryOp::Or | BinaryOp::Xor)
    }

    /// Shifts take (non-boolean) integer operands only.
    pub fn is_shift(self) -> bool {
        matches!(
            self,
            BinaryOp::ShiftLeft | BinaryOp::ShiftRightLogical | BinaryOp::ShiftRightArithmetic
        )
    }

    /// CHLO ops print their type as `: A, B -> R`.
    pub fn is_chlo(self) -> bool {
        self.name().starts_with("chlo.")
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum CompareDirection {
    Eq,
    Ne,
    Ge,
    Gt,
    Le,
    Lt,
}

impl CompareDirection {
    pub const ALL: [CompareDirection; 6] = [
        CompareDirection::Eq,
        CompareDirection::Ne,
        CompareDirection::Ge,
        CompareDirection::Gt,
        CompareDirection::Le,
        CompareDirection::Lt,
    ];

    /// `EQ`, `NE`, `GE`, `GT`, `LE`, `LT`.
    pub fn mnemonic(self) -> &'static str {
        match self {
            CompareDirection::Eq => "EQ",
            CompareDirection::Ne => "NE",
            CompareDirection::Ge => "GE",
            CompareDirection::Gt => "GT",
            CompareDirection::Le => "LE",
            CompareDirection::Lt => "LT",
        }
    }

    pub fn from_mnemonic(s: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|d| d.mnemonic() == s)
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum CompareType {
    Float,
    TotalOrder,
    Signed,
    Unsigned,
}

impl CompareType {
    pub const ALL: [CompareType; 4] = [
        CompareType::Float,
        CompareType::TotalOrder,
        CompareType::Signed,
        CompareType::Unsigned,
    ];

    /// `FLOAT`, `TOTALORDER`, `SIGNED`, `UNSIGNED`.
    pub fn mnemonic(self) -> &'static str {
        match self {
            CompareType::Float => "FLOAT",
            CompareType::TotalOrder => "TOTALORDER",
            CompareType::Signed => "SIGNED",
            CompareType::Unsigned => "UNSIGNED",
        }
    }

    pub fn from_mnemonic(s: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|d| d.mnemonic() == s)
    }
}

/// `dot_general` dimension numbers.
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct DotDims {
    pub lhs_batch: Vec<i64>,
    pub rhs_batch: Vec<i64>,
    pub lhs_contracting: Vec<i64>,
    pub rhs_contracting: Vec<i64>,
}

/// Convolution dimension numbers: which tensor dimension plays which role.
/// `[b, f, 0, 1]x[o, i, 0, 1]->[b, f, 0, 1]` is NCHW / OIHW / NCHW.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ConvDims {
    pub input_batch: i64,
    pub input_feature: i64,
    pub input_spatial: Vec<i64>,
    pub kernel_input_feature: i64,
    pub kernel_output_feature: i64,
    pub kernel_spatial: Vec<i64>,
    pub output_batch: i64,
    pub output_feature: i64,
    pub output_spatial: Vec<i64>,
}

impl ConvDims {
    /// NCHW / OIHW / NCHW with `spatial` spatial dimensions.
    pub fn nchw(spatial: usize) -> Self {
        let sp: Vec<i64> = (2..2 + spatial as i64).collect();
        ConvDims {
            input_batch: 0,
            input_feature: 1,
            input_spatial: sp.clone(),
            kernel_input_feature: 1,
            kernel_output_feature: 0,
            kernel_spatial: sp.clone(),
            output_batch: 0,
            output_feature: 1,
            output_spatial: sp,
        }
    }

    /// NHWC / HWIO / NHWC with two spatial dimensions (features last).
    pub fn nhwc_hwio() -> Self {
        ConvDims {
            input_batch: 0,
            input_feature: 3,
            input_spatial: vec![1, 2],
            kernel_input_feature: 2,
            kernel_output_feature: 3,
            kernel_spatial: vec![0, 1],
            output_batch: 0,
            output_feature: 3,
            output_spatial: vec![1, 2],
        }
    }

    /// The weight VJP of a 2-D NCHW convolution as a convolution: the input
    /// `x` read with C as batch and N as feature, the cotangent `dy` as the
    /// kernel (N as input feature, O as output feature), the result
    /// `[O, C, kh, kw]` (output feature first).
    pub fn nchw_weight_gradient() -> Self {
        ConvDims {
            input_batch: 1,
            input_feature: 0,
            input_spatial: vec![2, 3],
            kernel_input_feature: 0,
            kernel_output_feature: 1,
            kernel_spatial: vec![2, 3],
            output_batch: 1,
            output_feature: 0,
            output_spatial: vec![2, 3],
        }
    }
}

/// `stablehlo.convolution` attributes, defaults filled in.
#[derive(Clone, Debug, PartialEq)]
pub struct ConvAttrs {
    pub window_strides: Vec<i64>,
    /// `(low, high)` per spatial dimension; negative values crop.
    pub padding: Vec<(i64, i64)>,
    pub lhs_dilation: Vec<i64>,
    pub rhs_dilation: Vec<i64>,
    pub window_reversal: Vec<bool>,
    pub dims: ConvDims,
    pub feature_group_count: i64,
    pub batch_group_count: i64,
    /// Precision config kept verbatim for printing; evaluation ignores it.
    pub precision_config: Option<String>,
}

impl ConvAttrs {
    /// Stride 1, no padding, no dilation, one group, NCHW/OIHW, 2 spatial dims.
    pub fn plain2d() -> Self {
        ConvAttrs {
            window_strides: vec![1, 1],
            padding: vec![(0, 0), (0, 0)],
            lhs_dilation: vec![1, 1],
            rhs_dilation: vec![1, 1],
            window_reversal: vec![false, false],
            dims: ConvDims::nchw(2),
            feature_group_count: 1,
            batch_group_count: 1,
            precision_config: None,
        }
    }
}

/// `stablehlo.reduce_window` attributes (one entry per operand dimension).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WindowAttrs {
    pub window_dimensions: Vec<i64>,
    pub window_strides: Vec<i64>,
    pub base_dilations: Vec<i64>,
    pub window_dilations: Vec<i64>,
    pub padding: Vec<(i64, i64)>,
}

/// `stablehlo.select_and_scatter` attributes (one entry per operand dimension).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ScatterWindowAttrs {
    pub window_dimensions: Vec<i64>,
    pub window_strides: Vec<i64>,
    pub padding: Vec<(i64, i64)>,
}

/// `stablehlo.gather` dimension numbers and flags (spec names; empty lists
/// where the text leaves a field out).
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct GatherAttrs {
    pub offset_dims: Vec<i64>,
    pub collapsed_slice_dims: Vec<i64>,
    pub operand_batching_dims: Vec<i64>,
    pub start_indices_batching_dims: Vec<i64>,
    pub start_index_map: Vec<i64>,
    pub index_vector_dim: i64,
    pub slice_sizes: Vec<i64>,
    pub indices_are_sorted: bool,
}

/// `stablehlo.scatter` dimension numbers and flags (spec names).
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct ScatterAttrs {
    pub update_window_dims: Vec<i64>,
    pub inserted_window_dims: Vec<i64>,
    pub input_batching_dims: Vec<i64>,
    pub scatter_indices_batching_dims: Vec<i64>,
    pub scatter_dims_to_operand_dims: Vec<i64>,
    pub index_vector_dim: i64,
    pub indices_are_sorted: bool,
    pub unique_indices: bool,
}

/// `triangular_solve`'s `transpose_a`: which op(a) the system uses.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum TransposeA {
    NoTranspose,
    Transpose,
    /// The conjugate transpose (the transpose for real element types).
    Adjoint,
}

impl TransposeA {
    pub const ALL: [TransposeA; 3] = [
        TransposeA::NoTranspose,
        TransposeA::Transpose,
        TransposeA::Adjoint,
    ];

    /// `NO_TRANSPOSE`, `TRANSPOSE`, `ADJOINT`.
    pub fn mnemonic(self) -> &'static str {
        match self {
            TransposeA::NoTranspose => "NO_TRANSPOSE",
            TransposeA::Transpose => "TRANSPOSE",
            TransposeA::Adjoint => "ADJOINT",
        }
    }

    pub fn from_mnemonic(s: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|t| t.mnemonic() == s)
    }
}

/// Every op certgrad knows. Attributes live in the variant; operands, results and
/// regions live in [`crate::Op`].
#[derive(Clone, Debug, PartialEq)]
pub enum OpKind {
    /// `stablehlo.constant dense<…>`; the result type is the op's result type.
    Constant(DenseData),
    Unary(UnaryOp),
    Binary(BinaryOp),
    Compare {
        direction: CompareDirection,
        compare_type: Option<CompareType>,
    },
    /// `select(pred, on_true, on_false)`; pred is i1, scalar or same shape.
    Select,
    /// `clamp(min, operand, max)`.
    Clamp,
    /// Element type conversion; result type given.
    Convert,
    /// Result type given.
    Reshape,
    Transpose {
        permutation: Vec<i64>,
    },
    /// Result type given.
    BroadcastInDim {
        dims: Vec<i64>,
    },
    Reverse {
        dims: Vec<i64>,
    },
    Slice {
        start: Vec<i64>,
        limit: Vec<i64>,
        strides: Vec<i64>,
    },
    /// Operands: operand, padding value (scalar).
    Pad {
        low: Vec<i64>,
        high: Vec<i64>,
        interior: Vec<i64>,
    },
    Concatenate {
        dim: i64,
    },
    /// Result type given.
    Iota {
        dim: i64,
    },
    DotGeneral {
        dims: DotDims,
        precision_config: Option<String>,
    },
    Convolution(ConvAttrs),
    /// Operands: inputs…, init values…; one region (the reducer).
    Reduce {
        dims: Vec<i64>,
    },
    /// Operands: inputs…, init values…; one region.
    ReduceWindow(WindowAttrs),
    /// Operands: operand, source, init value; regions: select, scatter.
    SelectAndScatter(ScatterWindowAttrs),
    /// One region (the combiner). Single-replica evaluation is the identity.
    AllReduce {
        replica_groups: Vec<Vec<i64>>,
        channel_id: Option<(i64, i64)>,
        use_global_device_ids: bool,
    },
    /// `func.call @callee(…)`.
    Call {
        callee: String,
    },
    /// `stablehlo.return`, the terminator of op regions.
    Return,
    /// `func.return`, the terminator of a function body.
    FuncReturn,
    // Structured ops: indexing, control flow, sorting.
    /// Operands: operand, start_indices.
    Gather(GatherAttrs),
    /// Operands: inputs…, scatter_indices, updates…; one region (update computation).
    Scatter(ScatterAttrs),
    /// Operands: operand, one scalar start index per dimension.
    DynamicSlice {
        sizes: Vec<i64>,
    },
    /// Operands: operand, update, one scalar start index per dimension.
    DynamicUpdateSlice,
    /// Operands: the initial loop-carried values; regions: cond, body.
    While,
    /// Operand: a scalar i32 branch index; one region per branch (no arguments).
    Case,
    /// Operand: a scalar i1 predicate; regions: true branch, false branch.
    If,
    /// Operands sorted together along `dimension`; one region (the comparator).
    Sort {
        dimension: i64,
        is_stable: bool,
    },
    /// Operands mapped elementwise over `dimensions`; one region (the computation).
    Map {
        dimensions: Vec<i64>,
    },
    /// Identity on every operand.
    OptimizationBarrier,
    // The non-elementwise ops of the elementwise/CHLO set.
    /// `stablehlo.bitcast_convert`: bit reinterpretation; result type given
    /// (a narrower result element type adds a trailing dimension, a wider one
    /// consumes the operand's last).
    BitcastConvert,
    /// `stablehlo.reduce_precision`: round to a float format with
    /// `exponent_bits` exponent and `mantissa_bits` mantissa bits.
    ReducePrecision {
        exponent_bits: i64,
        mantissa_bits: i64,
    },
    /// `stablehlo.get_dimension_size`: `tensor<i32>` holding the operand's size
    /// in `dimension`.
    GetDimensionSize {
        dimension: i64,
    },
    /// `chlo.top_k(%x, k = K)`: the K largest entries along the last dimension
    /// (descending, ties by lower index) and their i32 indices.
    TopK {
        k: i64,
    },
    /// `stablehlo.triangular_solve(a, b)`: solves op(a)·x = b (`left_side`) or
    /// x·op(a) = b for triangular a (its `lower` or upper triangle is read; a
    /// `unit_diagonal` is taken as ones), batched over leading dimensions.
    TriangularSolve {
        left_side: bool,
        lower: bool,
        unit_diagonal: bool,
        transpose_a: TransposeA,
    },
}

impl OpKind {
    /// The names of the ops that are not elementwise unary/binary ones, in
    /// declaration order: with [`UnaryOp::ALL`] and [`BinaryOp::ALL`] they are
    /// every op the IR knows ([`OpKind::all_names`]). A new variant's name goes
    /// here too; the generator's coverage test fails until it does.
    pub const STRUCTURED_NAMES: [&'static str; 37] = [
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
        "func.call",
        "stablehlo.return",
        "func.return",
        "stablehlo.gather",
        "stablehlo.scatter",
        "stablehlo.dynamic_slice",
        "stablehlo.dynamic_update_slice",
        "stablehlo.while",
        "stablehlo.case",
        "stablehlo.if",
        "stablehlo.sort",
        "stablehlo.map",
        "stablehlo.optimization_barrier",
        "stablehlo.bitcast_convert",
        "stablehlo.reduce_precision",
        "stablehlo.get_dimension_size",
        "chlo.top_k",
        "stablehlo.triangular_solve",
    ];

    /// Ops of the StableHLO specification certgrad rejects on purpose
    /// (distributed, host-communication and opaque ops): the parser answers
    /// "not supported: <op> at <file>:<line>:<col>".
    pub const REJECTED_NAMES: [&'static str; 12] = [
        "stablehlo.custom_call",
        "stablehlo.send",
        "stablehlo.recv",
        "stablehlo.infeed",
        "stablehlo.outfeed",
        "stablehlo.after_all",
        "stablehlo.all_gather",
        "stablehlo.all_to_all",
        "stablehlo.collective_permute",
        "stablehlo.collective_broadcast",
        "stablehlo.reduce_scatter",
        // The spec leaves its bits implementation-defined: no reference to
        // evaluate against.
        "stablehlo.rng_bit_generator",
    ];

    /// Ops the StableHLO specification defines that the IR cannot carry (tuple
    /// types are not tensor types): parsing them is a clear "not supported".
    pub const UNSUPPORTED_NAMES: [&'static str; 2] =
        ["stablehlo.tuple", "stablehlo.get_tuple_element"];

    /// Every op name the IR knows, sorted (for "expected one of" messages and
    /// coverage tests).
    pub fn all_names() -> Vec<&'static str> {
        let mut names: Vec<&'static str> = UnaryOp::ALL
            .iter()
            .map(|u| u.name())
            .chain(BinaryOp::ALL.iter().map(|b| b.name()))
            .chain(Self::STRUCTURED_NAMES)
            .collect();
        names.sort_unstable();
        names
    }

    /// The op's full name as printed (`stablehlo.add`, `func.call`, …).
    pub fn name(&self) -> &'static str {
        match self {
            OpKind::Constant(_) => "stablehlo.constant",
            OpKind::Unary(u) => u.name(),
            OpKind::Binary(b) => b.name(),
            OpKind::Compare { .. } => "stablehlo.compare",
            OpKind::Select => "stablehlo.select",
            OpKind::Clamp => "stablehlo.clamp",
            OpKind::Convert => "stablehlo.convert",
            OpKind::Reshape => "stablehlo.reshape",
            OpKind::Transpose { .. } => "stablehlo.transpose",
            OpKind::BroadcastInDim { .. } => "stablehlo.broadcast_in_dim",
            OpKind::Reverse { .. } => "stablehlo.reverse",
            OpKind::Slice { .. } => "stablehlo.slice",
            OpKind::Pad { .. } => "stablehlo.pad",
            OpKind::Concatenate { .. } => "stablehlo.concatenate",
            OpKind::Iota { .. } => "stablehlo.iota",
            OpKind::DotGeneral { .. } => "stablehlo.dot_general",
            OpKind::Convolution(_) => "stablehlo.convolution",
            OpKind::Reduce { .. } => "stablehlo.reduce",
            OpKind::ReduceWindow(_) => "stablehlo.reduce_window",
            OpKind::SelectAndScatter(_) => "stablehlo.select_and_scatter",
            OpKind::AllReduce { .. } => "stablehlo.all_reduce",
            OpKind::Call { .. } => "func.call",
            OpKind::Return => "stablehlo.return",
            OpKind::FuncReturn => "func.return",
            OpKind::Gather(_) => "stablehlo.gather",
            OpKind::Scatter(_) => "stablehlo.scatter",
            OpKind::DynamicSlice { .. } => "stablehlo.dynamic_slice",
            OpKind::DynamicUpdateSlice => "stablehlo.dynamic_update_slice",
            OpKind::While => "stablehlo.while",
            OpKind::Case => "stablehlo.case",
            OpKind::If => "stablehlo.if",
            OpKind::Sort { .. } => "stablehlo.sort",
            OpKind::Map { .. } => "stablehlo.map",
            OpKind::OptimizationBarrier => "stablehlo.optimization_barrier",
            OpKind::BitcastConvert => "stablehlo.bitcast_convert",
            OpKind::ReducePrecision { .. } => "stablehlo.reduce_precision",
            OpKind::GetDimensionSize { .. } => "stablehlo.get_dimension_size",
            OpKind::TopK { .. } => "chlo.top_k",
            OpKind::TriangularSolve { .. } => "stablehlo.triangular_solve",
        }
    }

    pub fn is_terminator(&self) -> bool {
        matches!(self, OpKind::Return | OpKind::FuncReturn)
    }
}
