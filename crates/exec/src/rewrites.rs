//! Which of the plan's rewrites run (all, by default), and — with the cargo
//! feature `fault-injection` — one shape-preserving bug planted in one of
//! them. Switching one rewrite off at a time bisects a wrong plan to the
//! rewrite that made it wrong; the planted bugs are the negative controls of
//! the tests that hold each rewrite to the evaluator.

/// The plan's rewrites, each on or off.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Rewrites {
    /// Common subexpressions of the function computed once (`passes::cse`).
    pub cse: bool,
    /// A convolution's bias add done by the convolution (`passes::conv_bias`).
    pub conv_bias: bool,
    /// A zero-upsampling pad read by a convolution moved into its dilation
    /// and padding (`passes::conv_upsample`).
    pub conv_upsample: bool,
    /// A dense layer's bias add done by its GEMM (`passes::dot_bias`).
    pub dot_bias: bool,
    /// Batch norm's sums of a convolution's result from the moments its
    /// kernel takes (`passes::conv_moments`).
    pub conv_moments: bool,
    /// A sum of a loop's result done by that loop (`passes::sum_in_producer`).
    pub sum_in_producer: bool,
    /// Adjacent sums over the same positions in one pass
    /// (`passes::sibling_reductions`).
    pub sibling_reductions: bool,
    /// Fused passes writing over a dying input's buffer (liveness).
    pub in_place: bool,
    /// A bug planted in one rewrite (tests' negative controls).
    #[cfg(feature = "fault-injection")]
    pub planted: Option<Planted>,
}

/// A shape-preserving bug in one rewrite, for negative controls (planted
/// only with the feature `fault-injection`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Planted {
    /// CSE keys binary ops without their operator: `a + b` and `a · b` merge.
    CseIgnoresTheOperator,
    /// The folded convolution drops its bias.
    ConvBiasDropped,
    /// The folded pad's low edge moves one step (the high edge one less).
    ConvUpsampleShifted,
    /// The folded GEMM drops its bias.
    DotBiasDropped,
    /// Every sum taken from the moments is off by 1e-3 of itself.
    ConvMomentsScaled,
    /// The joined sum adds up the loop's first node instead of its value.
    SumInProducerSumsTheWrongNode,
    /// The merged pass returns the two sums in each other's slots.
    SiblingSumsSwapped,
    /// A storing reduction writes its stores before it sums: a sum that
    /// reads the overwritten input in place sees the stored value.
    StoresBeforeSums,
}

impl Planted {
    /// Every planted bug, with the rewrite it is planted in.
    pub const ALL: [(Planted, &'static str); 8] = [
        (Planted::CseIgnoresTheOperator, "cse"),
        (Planted::ConvBiasDropped, "conv_bias"),
        (Planted::ConvUpsampleShifted, "conv_upsample"),
        (Planted::DotBiasDropped, "dot_bias"),
        (Planted::ConvMomentsScaled, "conv_moments"),
        (Planted::SumInProducerSumsTheWrongNode, "sum_in_producer"),
        (Planted::SiblingSumsSwapped, "sibling_reductions"),
        (Planted::StoresBeforeSums, "in_place"),
    ];
}

impl Rewrites {
    /// Every rewrite on: what [`crate::Plan::compile`] uses.
    pub const ALL: Rewrites = Rewrites {
        cse: true,
        conv_bias: true,
        conv_upsample: true,
        dot_bias: true,
        conv_moments: true,
        sum_in_producer: true,
        sibling_reductions: true,
        in_place: true,
        #[cfg(feature = "fault-injection")]
        planted: None,
    };

    /// The rewrites' names, as [`Rewrites::without`] takes them.
    pub const NAMES: [&'static str; 8] = [
        "cse",
        "conv_bias",
        "conv_upsample",
        "dot_bias",
        "conv_moments",
        "sum_in_producer",
        "sibling_reductions",
        "in_place",
    ];

    /// These rewrites with the one named `name` off; `None` for a name not
    /// in [`Rewrites::NAMES`].
    pub fn without(mut self, name: &str) -> Option<Rewrites> {
        let switch = match name {
            "cse" => &mut self.cse,
            "conv_bias" => &mut self.conv_bias,
            "conv_upsample" => &mut self.conv_upsample,
            "dot_bias" => &mut self.dot_bias,
            "conv_moments" => &mut self.conv_moments,
            "sum_in_producer" => &mut self.sum_in_producer,
            "sibling_reductions" => &mut self.sibling_reductions,
            "in_place" => &mut self.in_place,
            _ => return None,
        };
        *switch = false;
        Some(self)
    }

    /// Whether `bug` is planted (always false without `fault-injection`).
    #[allow(unused_variables)]
    pub(crate) fn plants(&self, bug: Planted) -> bool {
        #[cfg(feature = "fault-injection")]
        {
            self.planted == Some(bug)
        }
        #[cfg(not(feature = "fault-injection"))]
        {
            false
        }
    }
}

impl Default for Rewrites {
    fn default() -> Self {
        Rewrites::ALL
    }
}
