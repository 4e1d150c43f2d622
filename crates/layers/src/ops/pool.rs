//! Spatial max pooling over NCHW activations (docs/conventions.md §7): the
//! forward `reduce_window` max with −∞ padding, its kink site (unique argmax per
//! window) and its accumulating backward in two emitted forms (`PoolBackward`):
//! one `select_and_scatter`, or shifted compare/select/pad sums for engines
//! that cannot lower the overlapping `select_and_scatter` (IREE); its catalog
//! cases and negative controls.

use super::{NegativeControl, OpCase};
use crate::combinators::ReplacedBackward;
use crate::emit::{Emit, EmitResult};
use crate::layer::{CertLayer, Grads, KinkKind, LayerError, Saved, Sites};
use ir::{
    CompareDirection, CompareType, FuncBuilder, OpKind, ScatterWindowAttrs, TensorType, ValueId,
    WindowAttrs,
};

/// Max pool over H and W of an `[N,C,H,W]` input: square `window`, `stride`,
/// and `pad` rows/columns of −∞ on every side (symmetric).
///
/// * `MaxPool::new(2, 2, 0)`: non-overlapping (CIFAR nets).
/// * `MaxPool::new(3, 2, 1)`: the He et al. ResNet stem;
///   window `i` covers input rows `[2i−1, 2i+1]`, so windows overlap and the
///   backward accumulates (an input may receive gradient from up to 4 windows).
///
/// Output extent per spatial dim: `⌊(H + 2·pad − window)/stride⌋ + 1`.
/// Backward (`PoolBackward::SelectAndScatter`): `select_and_scatter` with a
/// `GE` select (the first maximal element in window scan order wins, as the
/// reference's verified render) and an `add` scatter, same window, stride and
/// padding as the forward. `PoolBackward::ShiftedSums` emits the same function
/// without it (bit-identical on the evaluator, `cert/tests/cert_suite/pool_forms.rs`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MaxPool {
    pub window: i64,
    pub stride: i64,
    pub pad: i64,
    /// Which equivalent backward map is emitted (the forward is the same).
    pub backward: PoolBackward,
}

/// The emitted form of the max-pool backward. Both forms compute the same
/// function (the gradient goes to the first maximal element of each window in
/// scan order, accumulated over overlapping windows); they differ in the ops
/// they use, which matters to compilers that cannot lower one of them.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum PoolBackward {
    /// One `select_and_scatter` (GE select, add scatter).
    #[default]
    SelectAndScatter,
    /// Per window offset: strided slices of the −∞-padded input give the mask
    /// "this offset is the window's selected element"; the selected `dy` is
    /// scattered back with an interior/edge `pad` and the offsets are summed.
    /// No `select_and_scatter` (IREE cannot legalize the overlapping one).
    ShiftedSums,
}

impl MaxPool {
    /// The pool's kink: a unique maximum per window, over distinct input
    /// positions (margin = gap between the two largest values of the window).
    pub const KINK: KinkKind = KinkKind::top_two_tie("unique argmax per window");

    /// A pool with the default (select_and_scatter) backward.
    pub const fn new(window: i64, stride: i64, pad: i64) -> Self {
        MaxPool {
            window,
            stride,
            pad,
            backward: PoolBackward::SelectAndScatter,
        }
    }

    /// The same pool with another backward form.
    pub const fn with_backward(self, backward: PoolBackward) -> Self {
        MaxPool { backward, ..self }
    }

    /// The forward's window geometry (`reduce_window` attributes, rank 4).
    pub fn window_attrs(&self) -> WindowAttrs {
        WindowAttrs {
            window_dimensions: vec![1, 1, self.window, self.window],
            window_strides: vec![1, 1, self.stride, self.stride],
            base_dilations: vec![1; 4],
            window_dilations: vec![1; 4],
            padding: self.padding(),
        }
    }

    /// The backward's geometry: the forward's window, stride and padding.
    pub fn scatter_attrs(&self) -> ScatterWindowAttrs {
        ScatterWindowAttrs {
            window_dimensions: vec![1, 1, self.window, self.window],
            window_strides: vec![1, 1, self.stride, self.stride],
            padding: self.padding(),
        }
    }

    /// Window offsets `(row, column)` in the window's scan order (row-major),
    /// the order select_and_scatter's selection visits them.
    pub fn offsets(&self) -> Vec<(i64, i64)> {
        (0..self.window)
            .flat_map(|a| (0..self.window).map(move |b| (a, b)))
            .collect()
    }

    /// ShiftedSums, step 1. Per window offset (scan order), an `[N,C,Ho,Wo]`
    /// tensor: `dy` where the element at that offset is the window's selected
    /// one, 0 elsewhere. The selected element is the first (in scan order)
    /// equal to the forward's maximum `y`, exactly select_and_scatter's GE
    /// choice (a later element replaces the current one only when strictly
    /// greater). `unclaimed` carries the cotangent no earlier offset took, so
    /// no boolean algebra is needed: an offset equal to `y` claims what is
    /// left and leaves 0. The input is padded with −∞ as in the forward;
    /// padding never equals `y` unless a window's real elements are all −∞
    /// (the one input where the two forms can differ).
    pub fn claimed_cotangents(
        &self,
        fb: &mut FuncBuilder,
        x: ValueId,
        y: ValueId,
        dy: ValueId,
    ) -> EmitResult<Vec<ValueId>> {
        let xp = self.pad_like_forward(fb, x)?;
        let out = fb.shape(dy);
        let elem = fb.elem(dy);
        let zero = fb.splat(0.0, TensorType::new(out.clone(), elem));
        let mut unclaimed = dy;
        let mut claimed = Vec::with_capacity((self.window * self.window) as usize);
        for (a, b) in self.offsets() {
            let at_offset = self.offset_view(fb, xp, &out, (a, b))?;
            let is_max = fb.cmp(CompareDirection::Eq, at_offset, y)?;
            claimed.push(fb.select(is_max, unclaimed, zero)?);
            unclaimed = fb.select(is_max, zero, unclaimed)?;
        }
        Ok(claimed)
    }

    /// `x` padded with −∞ as the forward pads it (padding never wins a max).
    pub fn pad_like_forward(&self, fb: &mut FuncBuilder, x: ValueId) -> EmitResult<ValueId> {
        let p = self.pad;
        fb.pad_with(x, f64::NEG_INFINITY, &[0, 0, p, p], &[0, 0, p, p], &[0; 4])
    }

    /// The element at window offset `(a, b)` of every window, `[N,C,Ho,Wo]`
    /// (`out`), read from the padded input `xp`: output `(i, j)` is padded
    /// input `(a + i·stride, b + j·stride)`.
    pub fn offset_view(
        &self,
        fb: &mut FuncBuilder,
        xp: ValueId,
        out: &[i64],
        (a, b): (i64, i64),
    ) -> EmitResult<ValueId> {
        let s = self.stride;
        fb.slice(
            xp,
            &[0, 0, a, b],
            &[
                out[0],
                out[1],
                a + (out[2] - 1) * s + 1,
                b + (out[3] - 1) * s + 1,
            ],
            &[1, 1, s, s],
        )
    }

    /// ShiftedSums, step 2. Offset `(a, b)`'s claimed cotangent placed where
    /// its elements sit in the padded input: output `(i, j)` of that offset is
    /// padded-input `(a + i·stride, b + j·stride)`, so an interior padding of
    /// `stride − 1` and edge padding `a`/`b` low, the rest high.
    pub fn scatter_offset(
        &self,
        fb: &mut FuncBuilder,
        claimed: ValueId,
        (a, b): (i64, i64),
        input: &[i64],
    ) -> EmitResult<ValueId> {
        let out = fb.shape(claimed);
        let s = self.stride;
        let high = |len: i64, off: i64, n: i64| len + 2 * self.pad - off - (n - 1) * s - 1;
        fb.pad(
            claimed,
            &[0, 0, a, b],
            &[0, 0, high(input[2], a, out[2]), high(input[3], b, out[3])],
            &[0, 0, s - 1, s - 1],
        )
    }

    /// ShiftedSums, step 3. The scattered offsets added up in the order
    /// select_and_scatter accumulates: it visits windows row-major, and
    /// of the windows covering one input element a later window sees it at
    /// a smaller offset, so reverse scan order; the fold starts at 0 as its
    /// init does. Every addition then matches one of select_and_scatter's or
    /// adds +0 to a value that is not −0, so the two forms agree bit for bit.
    pub fn sum_in_window_order(
        &self,
        fb: &mut FuncBuilder,
        scattered: &[ValueId],
    ) -> EmitResult<ValueId> {
        let first = *scattered.last().expect("a window has at least one offset");
        let shape = fb.shape(first);
        let elem = fb.elem(first);
        let mut acc = fb.splat(0.0, TensorType::new(shape, elem));
        for &t in scattered.iter().rev() {
            acc = fb.add(acc, t)?;
        }
        Ok(acc)
    }

    /// ShiftedSums, step 4. The padded-input gradient without its padding.
    pub fn crop_padding(
        &self,
        fb: &mut FuncBuilder,
        padded: ValueId,
        input: &[i64],
    ) -> EmitResult<ValueId> {
        let p = self.pad;
        fb.slice(
            padded,
            &[0, 0, p, p],
            &[input[0], input[1], p + input[2], p + input[3]],
            &[1; 4],
        )
    }

    fn padding(&self) -> Vec<(i64, i64)> {
        vec![(0, 0), (0, 0), (self.pad, self.pad), (self.pad, self.pad)]
    }

    fn out_extent(&self, len: i64) -> Option<i64> {
        let padded = len + 2 * self.pad;
        (padded >= self.window).then(|| (padded - self.window) / self.stride + 1)
    }
}

impl CertLayer for MaxPool {
    fn name(&self) -> String {
        let form = match self.backward {
            PoolBackward::SelectAndScatter => "",
            PoolBackward::ShiftedSums => ", shifted-sums backward",
        };
        format!(
            "maxpool {k}×{k}/s{s} pad {p}{form}",
            k = self.window,
            s = self.stride,
            p = self.pad
        )
    }

    fn output_type(&self, input: &TensorType) -> Result<TensorType, LayerError> {
        if self.window < 1 || self.stride < 1 || self.pad < 0 {
            return Err(LayerError(format!("{}: bad geometry", self.name())));
        }
        // A window made only of padding would select nothing: every window
        // must start on a real row, i.e. pad < window.
        if self.pad >= self.window {
            return Err(LayerError(format!(
                "{}: padding {} leaves windows without real elements",
                self.name(),
                self.pad
            )));
        }
        let s = &input.shape;
        if s.len() != 4 {
            return Err(LayerError(format!(
                "{}: expects NCHW input, got {input}",
                self.name()
            )));
        }
        let (Some(h), Some(w)) = (self.out_extent(s[2]), self.out_extent(s[3])) else {
            return Err(LayerError(format!(
                "{}: input {input} is smaller than the window",
                self.name()
            )));
        };
        Ok(TensorType::new(vec![s[0], s[1], h, w], input.elem))
    }

    fn forward(
        &self,
        fb: &mut FuncBuilder,
        x: ValueId,
        _: &[ValueId],
        sites: &mut Sites,
    ) -> EmitResult<Saved> {
        let y = fb.reduce_window(ir::BinaryOp::Maximum, x, self.window_attrs())?;
        sites.record("pool", MaxPool::KINK, y);
        Ok(Saved::leaf(y))
    }

    fn backward(
        &self,
        fb: &mut FuncBuilder,
        x: ValueId,
        _: &[ValueId],
        saved: &Saved,
        dy: ValueId,
    ) -> EmitResult<Grads> {
        let dx = match self.backward {
            // The add scatter is the accumulation the overlapping 3×3/s2
            // windows need; at non-overlapping windows it adds into a zero once.
            PoolBackward::SelectAndScatter => {
                fb.select_and_scatter(x, dy, CompareDirection::Ge, self.scatter_attrs())?
            }
            PoolBackward::ShiftedSums => {
                let claimed = self.claimed_cotangents(fb, x, saved.output(), dy)?;
                let input = fb.shape(x);
                let scattered = self
                    .offsets()
                    .into_iter()
                    .zip(claimed)
                    .map(|(offset, c)| self.scatter_offset(fb, c, offset, &input))
                    .collect::<EmitResult<Vec<_>>>()?;
                let sum = self.sum_in_window_order(fb, &scattered)?;
                self.crop_padding(fb, sum, &input)?
            }
        };
        Ok(Grads::input_only(dx))
    }
}

/// The max-pool configurations `certify --all-ops` ties: both geometries,
/// batch 1, 2 and 3, odd and non-square inputs for the overlapping pool, and
/// both backward forms.
pub fn catalog() -> Vec<OpCase> {
    let p2 = || MaxPool::new(2, 2, 0);
    let p3 = || MaxPool::new(3, 2, 1);
    vec![
        OpCase::exact(
            "maxpool",
            "2×2/s2 pad 0, N=1, 2 ch, 4×6",
            p2(),
            &[1, 2, 4, 6],
        )
        .with_controls(controls()),
        OpCase::exact(
            "maxpool",
            "2×2/s2 pad 0, N=3, 1 ch, 6×4",
            p2(),
            &[3, 1, 6, 4],
        ),
        OpCase::exact(
            "maxpool",
            "3×3/s2 pad 1, N=2, 2 ch, 6×8",
            p3(),
            &[2, 2, 6, 8],
        ),
        OpCase::exact(
            "maxpool",
            "3×3/s2 pad 1, N=1, 2 ch, 7×5 (odd)",
            p3(),
            &[1, 2, 7, 5],
        ),
        OpCase::exact(
            "maxpool",
            "3×3/s2 pad 1, N=3, 1 ch, 5×9 (odd)",
            p3(),
            &[3, 1, 5, 9],
        ),
        OpCase::exact(
            "maxpool",
            "3×3/s2 pad 1 shifted sums, N=2, 2 ch, 6×8",
            p3().with_backward(PoolBackward::ShiftedSums),
            &[2, 2, 6, 8],
        ),
        OpCase::exact(
            "maxpool",
            "3×3/s2 pad 1 shifted sums, N=1, 2 ch, 7×5 (odd)",
            p3().with_backward(PoolBackward::ShiftedSums),
            &[1, 2, 7, 5],
        ),
        OpCase::exact(
            "maxpool",
            "2×2/s2 pad 0 shifted sums, N=3, 1 ch, 6×4",
            p2().with_backward(PoolBackward::ShiftedSums),
            &[3, 1, 6, 4],
        ),
    ]
}

// ---------------------------------------------------------------------------
// Negative controls.

const POOL3: MaxPool = MaxPool::new(3, 2, 1);
const POOL2: MaxPool = MaxPool::new(2, 2, 0);

fn shifted(window: i64, stride: i64, pad: i64) -> MaxPool {
    MaxPool::new(window, stride, pad).with_backward(PoolBackward::ShiftedSums)
}

fn controls() -> Vec<NegativeControl> {
    let mut controls = vec![
        NegativeControl::new(
            "2×2/s2 backward",
            "3×3/s2 pad 1, N=1, 2 ch, 6×8",
            &[1, 2, 6, 8],
            POOL3,
            Pool3WithPool2Backward,
            &["dx"],
        ),
        NegativeControl::new(
            "assigning scatter",
            "3×3/s2 pad 1, N=2, 2 ch, 7×9",
            &[2, 2, 7, 9],
            POOL3,
            pool3_assigning_scatter(),
            &["dx"],
        ),
    ];
    // The shifted-sums backward with one step gone wrong. Even input: the
    // last window ends on the last padded row, so the offset-(0, ·) rows have
    // room to shift; odd input for the others.
    let faults = [
        (shifted(3, 2, 1), [2, 2, 8, 8], Fault::PadShifted((0, 1))),
        (shifted(3, 2, 1), [1, 2, 7, 9], Fault::Missing((1, 1))),
        (shifted(3, 2, 1), [2, 2, 7, 9], Fault::Assign),
        (shifted(3, 1, 1), [1, 2, 6, 5], Fault::Assign),
        (shifted(2, 2, 0), [2, 2, 5, 6], Fault::PadShifted((0, 0))),
        (shifted(2, 2, 0), [2, 2, 4, 6], Fault::Missing((0, 1))),
    ];
    for (pool, shape, fault) in faults {
        let config = format!(
            "{k}×{k}/s{s} pad {p} shifted sums, N={}, {} ch, {}×{}",
            shape[0],
            shape[1],
            shape[2],
            shape[3],
            k = pool.window,
            s = pool.stride,
            p = pool.pad
        );
        controls.push(NegativeControl::new(
            format!("shifted sums, {fault:?}"),
            config,
            &shape,
            pool.clone(),
            faulty(pool, fault),
            &["dx"],
        ));
    }
    controls
}

/// The reference's drift: a 3×3/s2 pad-1 forward paired with the 2×2/s2
/// backward (same output shape at even inputs).
struct Pool3WithPool2Backward;
impl CertLayer for Pool3WithPool2Backward {
    fn name(&self) -> String {
        "maxpool 3×3/s2 with the 2×2/s2 backward".into()
    }
    fn output_type(&self, input: &TensorType) -> Result<TensorType, LayerError> {
        let a = POOL3.output_type(input)?;
        assert_eq!(Ok(a.clone()), POOL2.output_type(input), "shape-preserving");
        Ok(a)
    }
    fn forward(
        &self,
        fb: &mut FuncBuilder,
        x: ValueId,
        p: &[ValueId],
        s: &mut Sites,
    ) -> EmitResult<Saved> {
        POOL3.forward(fb, x, p, s)
    }
    fn backward(
        &self,
        fb: &mut FuncBuilder,
        x: ValueId,
        p: &[ValueId],
        s: &Saved,
        dy: ValueId,
    ) -> EmitResult<Grads> {
        POOL2.backward(fb, x, p, s, dy)
    }
}

/// 3×3/s2 pool whose scatter region REPLACES (returns the source) instead of
/// adding: an input that is the argmax of several windows keeps only the last
/// window's cotangent.
fn pool3_assigning_scatter() -> ReplacedBackward<MaxPool> {
    ReplacedBackward::new(
        POOL3,
        "maxpool 3×3/s2 with an assigning scatter",
        |_, fb, x, _, _, dy| {
            let s = TensorType::f32(vec![]);
            let select = fb.region(&[s.clone(), s.clone()], |b, a| {
                Ok(vec![b.push1(
                    OpKind::Compare {
                        direction: CompareDirection::Ge,
                        compare_type: Some(CompareType::Float),
                    },
                    &[a[0], a[1]],
                    None,
                )?])
            })?;
            // (current, source) -> source: the bug.
            let replace = fb.region(&[s.clone(), s.clone()], |_, a| Ok(vec![a[1]]))?;
            let init = fb.splat(0.0, s);
            let dx = fb.push(
                OpKind::SelectAndScatter(POOL3.scatter_attrs()),
                &[x, dy, init],
                vec![select, replace],
                None,
            )?[0];
            Ok(Grads::input_only(dx))
        },
    )
}

#[derive(Clone, Copy, Debug)]
enum Fault {
    /// Offset `(a, b)` scattered one row further down (pad low +1, high −1).
    PadShifted((i64, i64)),
    /// Offset `(a, b)`'s claimed cotangent dropped.
    Missing((i64, i64)),
    /// Each offset's scatter overwrites instead of adding: an input that is
    /// the argmax of several windows keeps only one window's cotangent.
    Assign,
}

fn faulty(pool: MaxPool, fault: Fault) -> ReplacedBackward<MaxPool> {
    ReplacedBackward::new(
        pool,
        format!("shifted sums, {fault:?}"),
        move |p, fb, x, _, saved, dy| {
            let input = fb.shape(x);
            let claimed = p.claimed_cotangents(fb, x, saved.output(), dy)?;
            let mut scattered = Vec::new();
            for ((a, b), c) in p.offsets().into_iter().zip(claimed) {
                match fault {
                    Fault::Missing(o) if o == (a, b) => continue,
                    Fault::PadShifted(o) if o == (a, b) => {
                        scattered.push(shifted_pad(p, fb, c, (a, b), &input)?)
                    }
                    _ => scattered.push(p.scatter_offset(fb, c, (a, b), &input)?),
                }
            }
            let sum = match fault {
                Fault::Assign => {
                    let mut acc = scattered[0];
                    for &t in &scattered[1..] {
                        let zero = fb.splat_like(0.0, t);
                        let placed = fb.cmp(CompareDirection::Ne, t, zero)?;
                        acc = fb.select(placed, t, acc)?;
                    }
                    acc
                }
                _ => p.sum_in_window_order(fb, &scattered)?,
            };
            let dx = p.crop_padding(fb, sum, &input)?;
            Ok(Grads::input_only(dx))
        },
    )
}

/// `scatter_offset` with the row edge padding moved by one (same shape).
fn shifted_pad(
    p: &MaxPool,
    fb: &mut FuncBuilder,
    c: ValueId,
    (a, b): (i64, i64),
    input: &[i64],
) -> EmitResult<ValueId> {
    let placed = p.scatter_offset(fb, c, (a, b), input)?;
    let out = fb.shape(c);
    let high = input[2] + 2 * p.pad - a - (out[2] - 1) * p.stride - 1;
    assert!(high >= 1, "room to shift offset ({a}, {b}) down");
    let moved = fb.pad(
        c,
        &[0, 0, a + 1, b],
        &[
            0,
            0,
            high - 1,
            input[3] + 2 * p.pad - b - (out[3] - 1) * p.stride - 1,
        ],
        &[0, 0, p.stride - 1, p.stride - 1],
    )?;
    assert_eq!(fb.shape(moved), fb.shape(placed));
    Ok(moved)
}
