//! Spatial max pooling over NCHW activations (REFERENCE §2.8, §2.9): the
//! forward `reduce_window` max with −∞ padding, its kink site (unique argmax per
//! window) and the accumulating `select_and_scatter` backward.

use crate::emit::{Emit, R};
use crate::layer::{CertLayer, Grads, KinkKind, LayerError, Saved, Sites};
use ir::{CompareDirection, FuncBuilder, ScatterWindowAttrs, TensorType, ValueId, WindowAttrs};

/// Max pool over H and W of an `[N,C,H,W]` input: square `window`, `stride`,
/// and `pad` rows/columns of −∞ on every side (symmetric).
///
/// * `MaxPool { window: 2, stride: 2, pad: 0 }`: non-overlapping (CIFAR nets).
/// * `MaxPool { window: 3, stride: 2, pad: 1 }`: the He et al. ResNet stem;
///   window `i` covers input rows `[2i−1, 2i+1]`, so windows overlap and the
///   backward accumulates (an input may receive gradient from up to 4 windows).
///
/// Output extent per spatial dim: `⌊(H + 2·pad − window)/stride⌋ + 1`.
/// Backward: `select_and_scatter` with a `GE` select (the first maximal element
/// in window scan order wins, as the reference's verified render) and an `add`
/// scatter, same window, stride and padding as the forward.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MaxPool {
    pub window: i64,
    pub stride: i64,
    pub pad: i64,
}

impl MaxPool {
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
        format!(
            "maxpool {k}×{k}/s{s} pad {p}",
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
    ) -> R<Saved> {
        let y = fb.reduce_window(ir::BinaryOp::Maximum, x, self.window_attrs())?;
        sites.record("pool", KinkKind::PoolUniqueArgmax, y);
        Ok(Saved::leaf(y))
    }

    fn backward(
        &self,
        fb: &mut FuncBuilder,
        x: ValueId,
        _: &[ValueId],
        _: &Saved,
        dy: ValueId,
    ) -> R<Grads> {
        // The add scatter is the accumulation the overlapping 3×3/s2 windows
        // need; at non-overlapping windows it adds into a zero once.
        let dx = fb.select_and_scatter(x, dy, CompareDirection::Ge, self.scatter_attrs())?;
        Ok(Grads {
            dx,
            dparams: Vec::new(),
        })
    }
}

/// The max-pool configurations `certify --all-ops` ties: both geometries,
/// batch 1, 2 and 3, odd and non-square inputs for the overlapping pool.
pub fn catalog() -> Vec<super::OpCase> {
    let p2 = || MaxPool {
        window: 2,
        stride: 2,
        pad: 0,
    };
    let p3 = || MaxPool {
        window: 3,
        stride: 2,
        pad: 1,
    };
    vec![
        super::OpCase::new(
            "maxpool",
            "2×2/s2 pad 0, N=1, 2 ch, 4×6",
            p2(),
            &[1, 2, 4, 6],
        ),
        super::OpCase::new(
            "maxpool",
            "2×2/s2 pad 0, N=3, 1 ch, 6×4",
            p2(),
            &[3, 1, 6, 4],
        ),
        super::OpCase::new(
            "maxpool",
            "3×3/s2 pad 1, N=2, 2 ch, 6×8",
            p3(),
            &[2, 2, 6, 8],
        ),
        super::OpCase::new(
            "maxpool",
            "3×3/s2 pad 1, N=1, 2 ch, 7×5 (odd)",
            p3(),
            &[1, 2, 7, 5],
        ),
        super::OpCase::new(
            "maxpool",
            "3×3/s2 pad 1, N=3, 1 ch, 5×9 (odd)",
            p3(),
            &[3, 1, 5, 9],
        ),
    ]
}
