//! Implicit-GEMM convolution for the ungrouped forms without lhs dilation (every
//! convolution of the cifar8 train steps: forward, input-VJP with its reversed
//! kernel, and the weight-VJP whose "kernel" is the output gradient).
//!
//! The convolution is the GEMM `out[(b, p), o] = Σ_(c, t) X[(b, p), (c, t)] ·
//! V[(c, t), o]` whose left operand is never written down: row `(b, p)` (an
//! output position) starts at `row_base[(b, p)]` in a zero-padded copy of the
//! task's input planes (a per-thread buffer, reused, so it stays in cache and
//! costs no fresh pages), column `(c, t)` (an input feature and kernel offset) adds
//! `k_offset[(c, t)]`, so `X[r, k] = padded[row_base[r] + k_offset[k]]` for any
//! strides, window dilation or (negative) padding. `V` is the kernel packed as
//! `[(c, t)][o]` with the output features padded to whole register tiles.
//!
//! A register tile of `MR` rows × `NV` output features is accumulated over the
//! reduction by broadcasting one input element per row and multiplying it into
//! one `NV`-vector of `V`; there is no im2col buffer and no packing of the big
//! operand. On x86-64 with AVX-512 the tiles are twice as wide (`avx512.rs`,
//! f32 and f64); with AVX2+FMA only, the tile loop is compiled for those
//! features (fused multiply-adds, chosen at run time); elsewhere it is the same
//! code with separate multiply and add. Fused or not, each output element is
//! summed in an order fixed by the shape, independent of the thread count and
//! of the tile width (the AVX-512 and AVX2 results are the same bits).
//!
//! Parallel work: groups of whole examples when there are many output
//! positions; fixed-size slices of the reduction (summed in order) when there
//! are few positions and a long reduction (the weight-VJP, whose output is the
//! kernel).

use std::any::TypeId;

use rayon::prelude::*;

use super::float::FastFloat;
use crate::tensor::row_major_strides;

mod avx2;
pub(crate) mod avx512;

/// A register transposition of a 16 × 16 f32 block (the scatter's and the
/// kernel packing's; the contract of `avx512::transpose16_f32`).
type Transpose16 = unsafe fn(*const f32, usize, *mut f32, usize, usize, Option<&[f32]>);

/// The transposition the CPU runs, if any: the same bits as the scalar loops.
fn transpose16() -> Option<Transpose16> {
    #[cfg(target_arch = "x86_64")]
    {
        if avx512::available() {
            return Some(avx512::transpose16_f32);
        }
        if avx2::available() {
            return Some(avx2::transpose16_f32);
        }
    }
    None
}

/// One ungrouped convolution: input `[batch][in_features][in_spatial…]`, kernel
/// `[out_features][in_features][kernel_spatial…]` (window reversal already
/// applied), result `[batch][out_features][out_spatial…]`. The two leading
/// dimensions of each operand are read through strides, so an operand whose
/// physical layout swaps them (the weight-VJP's `xᵀ` and `dyᵀ` given as the
/// untransposed NCHW tensors) needs no copy; the spatial dimensions are the
/// trailing ones, row-major, in both operands.
pub(crate) struct ImplicitConv<'a> {
    pub batch: usize,
    pub in_features: usize,
    pub out_features: usize,
    pub in_spatial: &'a [usize],
    pub kernel_spatial: &'a [usize],
    pub out_spatial: &'a [usize],
    pub strides: Vec<usize>,
    pub rhs_dilation: Vec<usize>,
    pub padding: Vec<(i64, i64)>,
    /// Element strides of the input's batch and feature dimensions (logical
    /// layout: `[in_features · in_plane, in_plane]`).
    pub lhs_strides: [usize; 2],
    /// Element strides of the kernel's output- and input-feature dimensions
    /// (logical layout: `[in_features · taps, taps]`).
    pub rhs_strides: [usize; 2],
}

/// Output positions per row-parallel task (rounded up to whole examples).
const ROWS_PER_TASK: usize = 192;
/// Shortest reduction slice of the reduction-parallel mode, and the most slices.
const K_SLICE_MIN: usize = 1024;
const K_SLICES_MAX: usize = 8;
/// Bytes of `V` one pass over the row tiles reads: within L1 for the long
/// reductions of the weight-VJP, within L2 for the short ones of the forward
/// (one pass over the rows).
const V_BLOCK_SLICED: usize = 16 * 1024;
const V_BLOCK_ROWS: usize = 256 * 1024;

/// Floats the tile loop runs on: `f32` and `f64`, with the fused multiply-add
/// used when the CPU has one.
pub(crate) trait TileFloat: FastFloat {
    /// Register tile: rows (broadcast input elements) and output features (vector lanes).
    const MR: usize;
    const NV: usize;
    fn fma(a: Self, b: Self, c: Self) -> Self;
}

impl TileFloat for f32 {
    const MR: usize = 6;
    const NV: usize = 16;
    #[inline(always)]
    fn fma(a: Self, b: Self, c: Self) -> Self {
        a.mul_add(b, c)
    }
}

impl TileFloat for f64 {
    const MR: usize = 6;
    const NV: usize = 8;
    #[inline(always)]
    fn fma(a: Self, b: Self, c: Self) -> Self {
        a.mul_add(b, c)
    }
}

/// `s` as a slice of `U` when `T` is `U` (the kernels are written for the two
/// concrete [`FastFloat`]s; this is the bridge from the generic callers).
pub(crate) fn same_type<T: 'static, U: 'static>(s: &[T]) -> Option<&[U]> {
    (TypeId::of::<T>() == TypeId::of::<U>())
        // SAFETY: T and U are the same type, so the slice is reinterpreted as itself.
        .then(|| unsafe { std::slice::from_raw_parts(s.as_ptr().cast::<U>(), s.len()) })
}

pub(crate) fn same_type_mut<T: 'static, U: 'static>(s: &mut [T]) -> Option<&mut [U]> {
    (TypeId::of::<T>() == TypeId::of::<U>())
        // SAFETY: as in `same_type`; the borrow is moved into the result.
        .then(|| unsafe { std::slice::from_raw_parts_mut(s.as_mut_ptr().cast::<U>(), s.len()) })
}

/// Runs `f` on `len` elements of a buffer from this thread's cache (contents
/// unspecified). The kernel's operand copies, packed kernel and accumulators
/// live here rather than in fresh allocations: a new multi-megabyte buffer per
/// call costs its pages again every step (page faults and zeroing measured at
/// ~1,400 faults per batch-32 cifar8 step before this).
pub(crate) fn with_scratch<U: FastFloat, R>(len: usize, f: impl FnOnce(&mut [U]) -> R) -> R {
    thread_local! {
        static SCRATCH: std::cell::RefCell<Vec<Vec<u64>>> = const { std::cell::RefCell::new(Vec::new()) };
    }
    let words = (len * std::mem::size_of::<U>()).div_ceil(8);
    // The smallest cached buffer that fits, else the largest, replaced by a
    // fresh one: nested calls of different sizes (the GEMM's packed B, then
    // its packed A) would otherwise trade buffers and grow them in turn,
    // copying and paging each time (~5 % of a ViT forward).
    let mut buf = SCRATCH.with(|s| {
        let mut s = s.borrow_mut();
        let fits = (0..s.len())
            .filter(|&i| s[i].len() >= words)
            .min_by_key(|&i| s[i].len());
        let pick = fits.or_else(|| (0..s.len()).max_by_key(|&i| s[i].len()));
        pick.map(|i| s.swap_remove(i)).unwrap_or_default()
    });
    if buf.len() < words {
        buf = vec![0; words];
    }
    // SAFETY: `buf` holds at least `len` U's (u64 alignment covers f32 and f64);
    // every bit pattern is a valid float.
    let slice = unsafe { std::slice::from_raw_parts_mut(buf.as_mut_ptr().cast::<U>(), len) };
    let r = f(slice);
    SCRATCH.with(|s| s.borrow_mut().push(buf));
    r
}

impl ImplicitConv<'_> {
    fn nsp(&self) -> usize {
        self.in_spatial.len()
    }
    fn out_plane(&self) -> usize {
        self.out_spatial.iter().product()
    }
    fn taps(&self) -> usize {
        self.kernel_spatial.iter().product()
    }
    /// Spatial extents of the zero-padded input copy (negative padding crops by
    /// offsetting the rows instead).
    fn padded_spatial(&self) -> Vec<usize> {
        (0..self.nsp())
            .map(|s| {
                let (lo, hi) = self.padding[s];
                self.in_spatial[s] + lo.max(0) as usize + hi.max(0) as usize
            })
            .collect()
    }

    /// The result `[batch][out_features][out_spatial…]`, written into `out`.
    /// `bias`: one value per output feature added to the result as it is written.
    /// `moments` (f32 results only): each result plane's moments
    /// ([`super::moments`]), taken by the task that wrote the plane.
    pub(crate) fn run<T: FastFloat>(
        &self,
        lhs: &[T],
        rhs: &[T],
        out: &mut [T],
        bias: Option<&[T]>,
        moments: Option<&mut [f32]>,
    ) {
        let p = self.out_plane();
        assert_eq!(out.len(), self.batch * self.out_features * p);
        assert_eq!(
            lhs.len(),
            self.batch * self.in_features * self.in_spatial.iter().product::<usize>()
        );
        assert_eq!(
            rhs.len(),
            self.out_features * self.in_features * self.taps()
        );
        if out.is_empty() {
            return;
        }
        if let (Some(l), Some(r), Some(o)) = (
            same_type::<T, f32>(lhs),
            same_type::<T, f32>(rhs),
            same_type_mut::<T, f32>(out),
        ) {
            let bias = bias.map(|b| same_type::<T, f32>(b).unwrap());
            self.run_typed::<f32>(l, r, o, bias, moments);
        } else if let (Some(l), Some(r), Some(o)) = (
            same_type::<T, f64>(lhs),
            same_type::<T, f64>(rhs),
            same_type_mut::<T, f64>(out),
        ) {
            assert!(moments.is_none(), "plane moments of an f32 result only");
            self.run_typed::<f64>(l, r, o, bias.map(|b| same_type::<T, f64>(b).unwrap()), None);
        } else {
            unreachable!("FastFloat is implemented for f32 and f64 only");
        }
    }

    fn run_typed<U: TileFloat>(
        &self,
        lhs: &[U],
        rhs: &[U],
        out: &mut [U],
        bias: Option<&[U]>,
        moments: Option<&mut [f32]>,
    ) {
        let nsp = self.nsp();
        let padded = self.padded_spatial();
        let pstrides = row_major_strides(&padded);
        let channels = self.in_features;
        let taps = self.taps();

        // Offsets of the kernel taps in a padded plane; the reduction runs over
        // (c, t), the kernel's own memory order.
        let kstrides = row_major_strides(self.kernel_spatial);
        let tap_offsets: Vec<usize> = (0..taps)
            .map(|t| {
                (0..nsp)
                    .map(|s| {
                        ((t / kstrides[s]) % self.kernel_spatial[s])
                            * self.rhs_dilation[s]
                            * pstrides[s]
                    })
                    .sum()
            })
            .collect();

        // Row bases within one padded example: the window origin of each output position.
        let p = self.out_plane();
        let ostrides = row_major_strides(self.out_spatial);
        let origin: Vec<usize> = (0..p)
            .map(|pf| {
                (0..nsp)
                    .map(|s| {
                        let o = (pf / ostrides[s]) % self.out_spatial[s];
                        let (lo, _) = self.padding[s];
                        // padded index of input coordinate o·stride − lo
                        (o * self.strides[s] + (lo.max(0) - lo) as usize) * pstrides[s]
                    })
                    .sum()
            })
            .collect();
        for (s, &extent) in padded.iter().enumerate() {
            let (lo, _) = self.padding[s];
            let last = (self.out_spatial[s].max(1) - 1) * self.strides[s]
                + (lo.max(0) - lo) as usize
                + (self.kernel_spatial[s].max(1) - 1) * self.rhs_dilation[s];
            assert!(
                self.out_spatial[s] == 0 || last < extent,
                "convolution window reads past the padded input in spatial dimension {s}: \
                 result shape inconsistent with operands"
            );
        }

        let opad = self.out_features.div_ceil(U::NV) * U::NV;
        let panels = Panels::for_tiles::<U>(opad);
        with_scratch(channels * taps * opad, |v: &mut [U]| {
            pack_kernel(
                rhs,
                self.out_features,
                self.rhs_strides,
                taps,
                opad,
                panels,
                v,
            );
            self.run_packed(
                lhs,
                v,
                out,
                bias,
                moments,
                &padded,
                &tap_offsets,
                &origin,
                (opad, panels),
            );
        });
    }

    #[allow(clippy::too_many_arguments)]
    fn run_packed<U: TileFloat>(
        &self,
        lhs: &[U],
        v: &[U],
        out: &mut [U],
        bias: Option<&[U]>,
        moments: Option<&mut [f32]>,
        padded: &[usize],
        tap_offsets: &[usize],
        origin: &[usize],
        (opad, panels): (usize, Panels),
    ) {
        let plane: usize = padded.iter().product();
        let channels = self.in_features;
        let taps = self.taps();
        let p = self.out_plane();
        let o = self.out_features;
        let copier = PlaneCopier::new(self, padded);

        // Rows and columns of a task's padded buffer [examples][channels][plane].
        let rows_for = |examples: usize, chans: usize| {
            padded_rows(
                (0..examples).flat_map(|b| origin.iter().map(move |&q| b * chans * plane + q)),
                U::MR,
            )
        };
        let cols_for = |chans: usize| -> Vec<usize> {
            (0..chans)
                .flat_map(|c| tap_offsets.iter().map(move |&t| c * plane + t))
                .collect()
        };

        let group = ROWS_PER_TASK.div_ceil(p).max(1);
        let k_len = channels * taps;
        let row_tasks = self.batch.div_ceil(group);
        let kernel_panels = opad / U::NV;
        if row_tasks < 4 && k_len >= 2 * K_SLICE_MIN && panels.width == U::NV && kernel_panels >= 4
        {
            // Few outputs, long reduction, many output features (ResNet's
            // 7 × 7 / 512 forms at small batches): tasks of whole reductions
            // over a range of the kernel's panels. Unlike the slices below
            // there are no partial sums to add (five 0.8 MB partials, summed
            // on one thread, for each 7 × 7 / 512 convolution at batch 8),
            // every output is summed in the order of the row tasks, and the
            // tasks are equal.
            let tasks = ColumnTasks {
                row_tasks,
                group,
                col_tasks: (2 * rayon::current_num_threads())
                    .max(4)
                    .div_ceil(row_tasks)
                    .min(kernel_panels / 2),
            };
            self.run_column_tasks(
                lhs,
                v,
                out,
                bias,
                moments,
                (&copier, plane, origin, tap_offsets),
                (opad, panels),
                tasks,
            );
            return;
        }
        if row_tasks < 4 && k_len >= 2 * K_SLICE_MIN {
            // Few outputs, long reduction: slices of whole input features, fixed by
            // the shape (not the thread count), summed in order.
            let slice_k = k_len.div_ceil(K_SLICES_MAX).max(K_SLICE_MIN);
            let chans = slice_k.div_ceil(taps).min(channels);
            let rows = rows_for(self.batch, chans);
            let cols = cols_for(chans);
            let partials: Vec<Vec<U>> = (0..channels.div_ceil(chans))
                .into_par_iter()
                .map(|s| {
                    let (c0, c1) = (s * chans, ((s + 1) * chans).min(channels));
                    let mut acc = vec![U::ZERO; rows.len() * opad];
                    with_scratch(self.batch * chans * plane, |x: &mut [U]| {
                        copier.fill(lhs, 0..self.batch, c0..c1, chans, x);
                        let ks = (c1 - c0) * taps;
                        let kernel = Packed {
                            data: v,
                            opad,
                            panels,
                        };
                        tiles(
                            x,
                            &rows,
                            &cols[..ks],
                            kernel,
                            c0 * taps,
                            V_BLOCK_SLICED,
                            &mut acc,
                        );
                    });
                    acc
                })
                .collect();
            let mut sum = partials[0].clone();
            for part in &partials[1..] {
                for (a, &b) in sum.iter_mut().zip(part) {
                    *a += b;
                }
            }
            scatter(&sum, (opad, panels), o, p, out, bias);
            if let Some(m) = moments {
                let planes = same_type::<U, f32>(out).expect("plane moments of an f32 result");
                super::moments::plane_moments_par(planes, p, m);
            }
            return;
        }

        let rows = rows_for(group.min(self.batch), channels);
        let cols = cols_for(channels);
        let moments = moments.map(|m| {
            assert_eq!(m.len(), 2 * self.batch * o, "two moments per result plane");
            MomentsOut(m.as_mut_ptr())
        });
        out.par_chunks_mut(group * o * p)
            .enumerate()
            .for_each(|(task, block)| {
                let b0 = task * group;
                let examples = block.len() / (o * p);
                // A short last task pads its own rows (the shared list's extra rows
                // would read the absent next example).
                let short;
                let rows = if examples == group.min(self.batch) {
                    &rows
                } else {
                    short = rows_for(examples, channels);
                    &short
                };
                with_scratch(examples * channels * plane, |x: &mut [U]| {
                    copier.fill(lhs, b0..b0 + examples, 0..channels, channels, x);
                    // Every tile is overwritten: the accumulators need no clearing.
                    with_scratch(rows.len() * opad, |acc: &mut [U]| {
                        let kernel = Packed {
                            data: v,
                            opad,
                            panels,
                        };
                        tiles(x, rows, &cols, kernel, 0, V_BLOCK_ROWS, acc);
                        scatter(acc, (opad, panels), o, p, block, bias);
                    });
                    if let Some(m) = &moments {
                        let planes =
                            same_type::<U, f32>(block).expect("plane moments of an f32 result");
                        // SAFETY: the task's planes are examples b0.. of the
                        // result, and tasks hold disjoint examples.
                        let dst = unsafe {
                            std::slice::from_raw_parts_mut(m.0.add(2 * b0 * o), 2 * examples * o)
                        };
                        super::moments::plane_moments(planes, p, dst);
                    }
                });
            });
    }

    /// The convolution as `row_tasks × col_tasks` tasks, each the whole
    /// reduction for `group` examples and a range of the kernel's panels
    /// (an even number of them but the last, so the 2-register tiles run):
    /// the examples' padded input is filled once and shared, and each task
    /// writes its output features of its examples.
    #[allow(clippy::too_many_arguments)]
    fn run_column_tasks<U: TileFloat>(
        &self,
        lhs: &[U],
        v: &[U],
        out: &mut [U],
        bias: Option<&[U]>,
        moments: Option<&mut [f32]>,
        (copier, plane, origin, tap_offsets): (&PlaneCopier, usize, &[usize], &[usize]),
        (opad, panels): (usize, Panels),
        tasks: ColumnTasks,
    ) {
        let channels = self.in_features;
        let (o, p, k_len) = (self.out_features, self.out_plane(), channels * self.taps());
        let kernel_panels = opad / U::NV;
        let per_task = kernel_panels.div_ceil(tasks.col_tasks).next_multiple_of(2);
        let cols: Vec<usize> = (0..channels)
            .flat_map(|c| tap_offsets.iter().map(move |&t| c * plane + t))
            .collect();
        let dst = Disjoint(out.as_mut_ptr());
        let dst = &dst;
        with_scratch(self.batch * channels * plane, |x: &mut [U]| {
            copier.fill(lhs, 0..self.batch, 0..channels, channels, x);
            let x = &*x;
            let jobs: Vec<(usize, usize)> = (0..tasks.row_tasks)
                .flat_map(|r| (0..kernel_panels.div_ceil(per_task)).map(move |c| (r, c)))
                .collect();
            jobs.into_par_iter().for_each(|(rt, ct)| {
                let (b0, b1) = (rt * tasks.group, ((rt + 1) * tasks.group).min(self.batch));
                let (j0, j1) = (ct * per_task, ((ct + 1) * per_task).min(kernel_panels));
                let (o0, o1) = (j0 * U::NV, (j1 * U::NV).min(o));
                let sub_opad = (j1 - j0) * U::NV;
                let rows = padded_rows(
                    (b0..b1).flat_map(|b| origin.iter().map(move |&q| b * channels * plane + q)),
                    U::MR,
                );
                let kernel = Packed {
                    data: &v[j0 * k_len * U::NV..j1 * k_len * U::NV],
                    opad: sub_opad,
                    panels,
                };
                let (examples, feats) = (b1 - b0, o1 - o0);
                with_scratch(rows.len() * sub_opad, |acc: &mut [U]| {
                    tiles(x, &rows, &cols, kernel, 0, V_BLOCK_ROWS, acc);
                    with_scratch(examples * feats * p, |part: &mut [U]| {
                        scatter(
                            acc,
                            (sub_opad, panels),
                            feats,
                            p,
                            part,
                            bias.map(|b| &b[o0..o1]),
                        );
                        for (e, src) in part.chunks_exact(feats * p).enumerate() {
                            // SAFETY: `out` is [batch][o][p]; this task alone
                            // writes features o0..o1 of examples b0..b1.
                            unsafe {
                                std::ptr::copy_nonoverlapping(
                                    src.as_ptr(),
                                    dst.0.add(((b0 + e) * o + o0) * p),
                                    feats * p,
                                )
                            };
                        }
                    });
                });
            });
        });
        if let Some(m) = moments {
            let planes = same_type::<U, f32>(out).expect("plane moments of an f32 result");
            super::moments::plane_moments_par(planes, p, m);
        }
    }
}

/// How [`ImplicitConv::run_column_tasks`] splits the work.
struct ColumnTasks {
    row_tasks: usize,
    /// Examples per row task.
    group: usize,
    /// Panel ranges per row task (at most).
    col_tasks: usize,
}

/// An output the column tasks write through, each its own disjoint part.
struct Disjoint<U>(*mut U);
// SAFETY: the tasks write disjoint ranges through the pointer.
unsafe impl<U> Sync for Disjoint<U> {}

/// Where the row tasks write their planes' moments (each its own examples').
struct MomentsOut(*mut f32);
// SAFETY: tasks write disjoint ranges through the pointer (one per example).
unsafe impl Sync for MomentsOut {}

/// Copies input feature planes into zero-padded planes: each plane placed at
/// offset `max(pad_low, 0)` of a zero plane of the padded extents (negative
/// padding is applied by the row origins, which skip the cropped elements).
struct PlaneCopier {
    /// Element strides of the input's batch and feature dimensions.
    strides: [usize; 2],
    in_plane: usize,
    plane: usize,
    row_len: usize,
    /// Destination offset (within a padded plane) of each input row.
    row_at: Vec<usize>,
}

impl PlaneCopier {
    fn new(conv: &ImplicitConv<'_>, padded: &[usize]) -> Self {
        let nsp = conv.nsp();
        let pstrides = row_major_strides(padded);
        let low: Vec<usize> = conv
            .padding
            .iter()
            .map(|&(lo, _)| lo.max(0) as usize)
            .collect();
        let in_plane: usize = conv.in_spatial.iter().product();
        let row_len = conv.in_spatial[nsp - 1];
        let row_shape = &conv.in_spatial[..nsp - 1];
        let row_strides = row_major_strides(row_shape);
        let row_at = (0..in_plane / row_len.max(1))
            .map(|r| {
                low[nsp - 1]
                    + (0..nsp - 1)
                        .map(|s| ((r / row_strides[s]) % row_shape[s] + low[s]) * pstrides[s])
                        .sum::<usize>()
            })
            .collect();
        PlaneCopier {
            strides: conv.lhs_strides,
            in_plane,
            plane: padded.iter().product(),
            row_len,
            row_at,
        }
    }

    /// Fills `x` as `[examples][stride_chans][plane]` with the padded planes of
    /// `examples × chans` (`chans.len() ≤ stride_chans`); everything between
    /// the copied rows is zeroed (the buffer is scratch), so the padding
    /// reads zeros.
    fn fill<U: FastFloat>(
        &self,
        lhs: &[U],
        examples: std::ops::Range<usize>,
        chans: std::ops::Range<usize>,
        stride_chans: usize,
        x: &mut [U],
    ) {
        for (bi, b) in examples.enumerate() {
            for (ci, c) in chans.clone().enumerate() {
                let src = &lhs[b * self.strides[0] + c * self.strides[1]..][..self.in_plane];
                let dst = &mut x[(bi * stride_chans + ci) * self.plane..][..self.plane];
                // Rows land at increasing offsets; only the gaps between
                // them (the padding) are zeroed, not the whole plane first.
                let mut done = 0;
                for (&at, row) in self
                    .row_at
                    .iter()
                    .zip(src.chunks_exact(self.row_len.max(1)))
                {
                    dst[done..at].fill(U::ZERO);
                    dst[at..at + self.row_len].copy_from_slice(row);
                    done = at + self.row_len;
                }
                dst[done..].fill(U::ZERO);
            }
        }
    }
}

/// Where the `opad` output-feature columns of the packed kernel `V[k][o]` and
/// of the accumulators `acc[r][o]` lie: in panels of `width` columns, each
/// panel holding all its rows contiguously, so element `(row, o)` of a
/// `rows`-row matrix is at `(o / width) · rows · width + row · width + o %
/// width`. `width = opad` is plain row-major (the tests' reference layout);
/// the tiles read `width = NV` (one vector register), which makes every
/// register tile's slice of `V` and of the accumulators one contiguous run. Row-major slices stride by `opad`: for
/// 512 features (2 KiB) a 128-row slice of `V` fell into two L1 sets and
/// across 64 pages, and ResNet-34's 7 × 7, 512-feature convolutions ran at
/// ~55 % of the rate of its other 3 × 3 convolutions on an AVX2 CPU.
#[derive(Clone, Copy, Debug, PartialEq)]
struct Panels {
    width: usize,
}

/// See [`set_row_major_kernel_layout`].
static ROW_MAJOR_KERNEL: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// Lays the implicit-GEMM convolution's packed kernel and accumulators out
/// row-major (`true`) instead of in one-register panels (`false`, the
/// default): the layout before panels, kept so a benchmark can compare the
/// two in one process (`conv_forms --ab-layout`). Both give the same bits.
pub fn set_row_major_kernel_layout(row_major: bool) {
    ROW_MAJOR_KERNEL.store(row_major, std::sync::atomic::Ordering::Relaxed);
}

impl Panels {
    /// The layout the tile loops read (AVX-512, AVX2 and portable alike).
    fn for_tiles<U: TileFloat>(opad: usize) -> Panels {
        if ROW_MAJOR_KERNEL.load(std::sync::atomic::Ordering::Relaxed) {
            return Panels { width: opad };
        }
        Panels { width: U::NV }
    }

    /// Index of element `(row, o)` of a matrix of `rows` rows.
    #[inline(always)]
    fn at(self, rows: usize, row: usize, o: usize) -> usize {
        (o / self.width) * rows * self.width + row * self.width + o % self.width
    }
}

/// The packed kernel: `opad` columns per reduction row, laid out in `panels`.
#[derive(Clone, Copy)]
struct Packed<'a, U> {
    data: &'a [U],
    opad: usize,
    panels: Panels,
}

/// The kernel as `V[k][opad]` with `k = (c, t)` (output features padded with
/// zeros) in the layout `panels`, into `v`: element `(o, c, t)` is read at
/// `o · strides[0] + c · strides[1] + t`, `t` ranging over the `taps`
/// contiguous kernel offsets.
fn pack_kernel<U: FastFloat>(
    rhs: &[U],
    o: usize,
    strides: [usize; 2],
    taps: usize,
    opad: usize,
    panels: Panels,
    v: &mut [U],
) {
    pack_kernel_with(rhs, o, strides, taps, (opad, panels), v, true)
}

/// [`pack_kernel`], with 16 × 16 blocks transposed in registers only when
/// `vectorise` (the weight-VJP packs the whole output gradient here: the
/// scalar transposition was ~5 % of a cifar8 step).
fn pack_kernel_with<U: FastFloat>(
    rhs: &[U],
    o: usize,
    strides: [usize; 2],
    taps: usize,
    (opad, panels): (usize, Panels),
    v: &mut [U],
    vectorise: bool,
) {
    // Blocks of the reduction keep the written lines of V in cache while every
    // output feature's row is read.
    const BLOCK: usize = 256;
    let width = panels.width;
    assert!(width > 0 && opad.is_multiple_of(width) && v.len().is_multiple_of(opad));
    let k_len = v.len() / opad;
    let transpose = transpose16()
        .filter(|_| vectorise && TypeId::of::<U>() == TypeId::of::<f32>() && width % 16 == 0);
    v.par_chunks_mut(k_len.max(1) * width)
        .enumerate()
        .flat_map(|(panel, cols)| {
            cols.par_chunks_mut(BLOCK * width)
                .enumerate()
                .map(move |(blk, dst)| (panel, blk, dst))
        })
        .for_each(|(panel, blk, dst)| {
            let k0 = blk * BLOCK;
            let n = dst.len() / width;
            // The panel's real output features o_lo..o_hi.
            let o_lo = panel * width;
            let o_hi = (o_lo + width).min(o);
            if o_lo + width > o {
                dst.fill(U::ZERO);
            }
            // Output features taken 16 at a time by the register transposition.
            let o_vec = if transpose.is_some() {
                o_lo + o_hi.saturating_sub(o_lo) / 16 * 16
            } else {
                o_lo
            };
            // The block's k range, in runs of one input feature's taps.
            let mut j = 0;
            while j < n {
                let (c, t) = ((k0 + j) / taps, (k0 + j) % taps);
                let len = (taps - t).min(n - j);
                let base = c * strides[1] + t;
                if o_vec > o_lo {
                    let (src, out) = (
                        same_type::<U, f32>(rhs).expect("U is f32"),
                        same_type_mut::<U, f32>(dst).expect("U is f32"),
                    );
                    let len_vec = len / 16 * 16;
                    for o0 in (o_lo..o_vec).step_by(16) {
                        for jj in (0..len_vec).step_by(16) {
                            let at = o0 * strides[0] + base + jj;
                            assert!(at + 15 * strides[0] + 16 <= src.len());
                            assert!((j + jj + 15) * width + o0 - o_lo + 16 <= out.len());
                            // SAFETY: the CPU runs `transpose` (o_vec > o_lo);
                            // the asserts bound the 16 feature rows read and
                            // the 16 k rows written.
                            unsafe {
                                transpose.expect("o_vec > o_lo")(
                                    src.as_ptr().add(at),
                                    strides[0],
                                    out.as_mut_ptr().add((j + jj) * width + o0 - o_lo),
                                    width,
                                    16,
                                    None,
                                )
                            };
                        }
                        for oi in o0..o0 + 16 {
                            let at = oi * strides[0] + base;
                            for jj in len_vec..len {
                                out[(j + jj) * width + oi - o_lo] = src[at + jj];
                            }
                        }
                    }
                }
                for oi in o_vec..o_hi {
                    let at = oi * strides[0] + base;
                    for (jj, &w) in rhs[at..at + len].iter().enumerate() {
                        dst[(j + jj) * width + oi - o_lo] = w;
                    }
                }
                j += len;
            }
        });
}

/// Row bases padded to whole tiles (extra rows read the first input element and
/// are discarded).
fn padded_rows(bases: impl Iterator<Item = usize>, mr: usize) -> Vec<usize> {
    let mut rows: Vec<usize> = bases.collect();
    rows.resize(rows.len().div_ceil(mr) * mr, 0);
    rows
}

/// `acc[r][o]` (`opad` columns in `panels`) → `out[b][o][p]` for the real
/// rows, in blocks of positions so the transposed reads stay within a few
/// cache lines. With `bias`, `bias[o]` is added to every element of output
/// feature `o`.
fn scatter<U: FastFloat>(
    acc: &[U],
    layout: (usize, Panels),
    o: usize,
    p: usize,
    out: &mut [U],
    bias: Option<&[U]>,
) {
    scatter_with(acc, layout, o, p, out, bias, true)
}

/// [`scatter`], with the register transposition only when `vectorise`.
fn scatter_with<U: FastFloat>(
    acc: &[U],
    (opad, panels): (usize, Panels),
    o: usize,
    p: usize,
    out: &mut [U],
    bias: Option<&[U]>,
    vectorise: bool,
) {
    const BLOCK: usize = 16;
    let rows = acc.len() / opad;
    let width = panels.width;
    // Whole 16 × 16 blocks transposed in registers where the CPU has
    // AVX-512 or AVX2 (the scalar transposition below was ~7 % of a cifar8
    // step).
    let mut vector_p = 0;
    if let (Some(acc32), Some(out32), Some(transpose)) = (
        same_type::<U, f32>(acc),
        same_type_mut::<U, f32>(out),
        transpose16().filter(|_| vectorise && width % BLOCK == 0),
    ) {
        vector_p = p / BLOCK * BLOCK;
        let bias32 = bias.map(|b| same_type::<U, f32>(b).expect("bias has the output's type"));
        for b in 0..out32.len() / (o * p) {
            for p0 in (0..vector_p).step_by(BLOCK) {
                for o0 in (0..o).step_by(BLOCK) {
                    let src = &acc32[panels.at(rows, b * p + p0, o0)..];
                    assert!(src.len() >= (BLOCK - 1) * width + BLOCK && o0 + BLOCK <= opad);
                    let cols = (o - o0).min(BLOCK);
                    let at = b * o * p + o0 * p + p0;
                    assert!(at + (cols - 1) * p + BLOCK <= out32.len());
                    // SAFETY: the CPU runs `transpose`; the asserts bound
                    // the 16 source rows of 16 (within one panel: o0 and
                    // the width are multiples of 16) and the `cols`
                    // destination rows of 16 (positions p0..p0 + 16 ≤ p).
                    unsafe {
                        transpose(
                            src.as_ptr(),
                            width,
                            out32.as_mut_ptr().add(at),
                            p,
                            cols,
                            bias32.map(|b| &b[o0..o0 + cols]),
                        )
                    };
                }
            }
        }
    }
    for (b, example) in out.chunks_exact_mut(o * p).enumerate() {
        for p0 in (vector_p..p).step_by(BLOCK) {
            let p1 = (p0 + BLOCK).min(p);
            for oi in 0..o {
                let dst = &mut example[oi * p + p0..oi * p + p1];
                let add = bias.map_or(U::ZERO, |bias| bias[oi]);
                for (j, d) in dst.iter_mut().enumerate() {
                    let a = acc[panels.at(rows, b * p + p0 + j, oi)];
                    *d = if bias.is_some() { a + add } else { a };
                }
            }
        }
    }
}

/// `acc[r][o] = Σ_k x[rows[r] + k_offset[k]] · V[k0 + k][o]` over all tiles
/// (`acc` in the kernel's layout, `rows.len()` rows); `acc`'s previous
/// contents are overwritten.
fn tiles<U: TileFloat>(
    x: &[U],
    rows: &[usize],
    k_offset: &[usize],
    kernel: Packed<'_, U>,
    k0: usize,
    v_block_bytes: usize,
    acc: &mut [U],
) {
    let Packed {
        data: v,
        opad,
        panels,
    } = kernel;
    let block = (v_block_bytes / (opad * std::mem::size_of::<U>())).max(16);
    assert_eq!(rows.len() % U::MR, 0);
    assert_eq!(opad % U::NV, 0);
    assert_eq!(panels.width % U::NV, 0);
    assert_eq!(opad % panels.width, 0);
    assert_eq!(v.len() % opad, 0);
    assert!(k0 + k_offset.len() <= v.len() / opad);
    assert_eq!(acc.len(), rows.len() * opad);
    let max_row = rows.iter().copied().max().unwrap_or(0);
    let max_k = k_offset.iter().copied().max().unwrap_or(0);
    assert!(k_offset.is_empty() || max_row + max_k < x.len());
    if k_offset.is_empty() {
        // An empty sum (no input features): the tile loops would write nothing.
        acc.fill(U::ZERO);
        return;
    }
    #[cfg(target_arch = "x86_64")]
    {
        if avx512::available() {
            if let (Some(x), Some(v), Some(acc)) = (
                same_type::<U, f64>(x),
                same_type::<U, f64>(v),
                same_type_mut::<U, f64>(acc),
            ) {
                // SAFETY: the CPU has the features; the asserts above (f64's
                // tile is 6 rows, 8 lanes) are `tiles_f64`'s contract.
                unsafe {
                    {
                        let kernel = Packed {
                            data: v,
                            opad,
                            panels,
                        };
                        avx512::tiles_f64(x, rows, k_offset, kernel, k0, block, acc)
                    }
                };
                return;
            }
            if let (Some(x), Some(v), Some(acc)) = (
                same_type::<U, f32>(x),
                same_type::<U, f32>(v),
                same_type_mut::<U, f32>(acc),
            ) {
                // SAFETY: as above (f32's tile is 6 rows, 16 lanes, so `opad`
                // and the panel width are multiples of 16).
                unsafe {
                    {
                        let kernel = Packed {
                            data: v,
                            opad,
                            panels,
                        };
                        avx512::tiles_f32(x, rows, k_offset, kernel, k0, block, acc)
                    }
                };
                return;
            }
        }
        if std::arch::is_x86_feature_detected!("avx2") && std::arch::is_x86_feature_detected!("fma")
        {
            // SAFETY: the CPU has AVX2 and FMA; the asserts above are `tiles_with`'s contract.
            unsafe { tiles_avx2(x, rows, k_offset, kernel, k0, block, acc) };
            return;
        }
    }
    // SAFETY: the asserts above are `tiles_with`'s contract.
    unsafe { tiles_with::<U, false>(x, rows, k_offset, kernel, k0, block, acc) }
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
unsafe fn tiles_avx2<U: TileFloat>(
    x: &[U],
    rows: &[usize],
    k_offset: &[usize],
    kernel: Packed<'_, U>,
    k0: usize,
    block: usize,
    acc: &mut [U],
) {
    // SAFETY: forwarded contract.
    unsafe { tiles_with::<U, true>(x, rows, k_offset, kernel, k0, block, acc) }
}

/// # Safety
/// `rows.len()` is a multiple of `MR`, `opad` and the panel width of `NV`,
/// `V` holds rows `k0..k0 + k_offset.len()`, `acc` is `rows.len()` rows of
/// `opad` in the same layout, and every `rows[r] + k_offset[k]` indexes `x`.
#[inline(always)]
unsafe fn tiles_with<U: TileFloat, const FUSED: bool>(
    x: &[U],
    rows: &[usize],
    k_offset: &[usize],
    kernel: Packed<'_, U>,
    k0: usize,
    block: usize,
    acc: &mut [U],
) {
    let Packed {
        data: v,
        opad,
        panels,
    } = kernel;
    let (v_rows, acc_rows) = (v.len() / opad, rows.len());
    for (kb, ks) in k_offset.chunks(block).enumerate() {
        for ot in (0..opad).step_by(U::NV) {
            let vb = &v[panels.at(v_rows, k0 + kb * block, ot)..];
            for (rt, bases) in rows.chunks_exact(U::MR).enumerate() {
                let out = &mut acc[panels.at(acc_rows, rt * U::MR, ot)..];
                // SAFETY: forwarded contract (the tile's bases and this k block).
                unsafe {
                    if U::MR == 6 && U::NV == 16 {
                        tile::<U, 6, 16, FUSED>(x, bases, ks, vb, panels.width, kb > 0, out);
                    } else if U::MR == 6 && U::NV == 8 {
                        tile::<U, 6, 8, FUSED>(x, bases, ks, vb, panels.width, kb > 0, out);
                    } else {
                        unreachable!("tile shape without a kernel");
                    }
                }
            }
        }
    }
}

/// One `MR × NV` register tile: rows `bases`, summed over `ks` with the
/// kernel's rows at `v`, `v[step]`, … and stored to `out`'s rows `0, step,
/// …` (`NV` features each), added to what `out` holds when `accumulate`.
///
/// # Safety
/// As [`tiles_with`]; `v` holds `ks.len()` rows of `step ≥ NV`.
#[inline(always)]
unsafe fn tile<U: TileFloat, const MR: usize, const NV: usize, const FUSED: bool>(
    x: &[U],
    bases: &[usize],
    ks: &[usize],
    v: &[U],
    step: usize,
    accumulate: bool,
    out: &mut [U],
) {
    let mut a = [[U::ZERO; NV]; MR];
    if accumulate {
        for (r, row) in a.iter_mut().enumerate() {
            row.copy_from_slice(&out[r * step..r * step + NV]);
        }
    }
    debug_assert!(ks.is_empty() || (ks.len() - 1) * step + NV <= v.len());
    let xp: [*const U; MR] = std::array::from_fn(|r| unsafe { x.as_ptr().add(bases[r]) });
    let mut vp = v.as_ptr();
    for &k in ks {
        // SAFETY: v has a row of step ≥ NV elements per k; bases[r] + k indexes x.
        let w: [U; NV] = unsafe { *vp.cast::<[U; NV]>() };
        for r in 0..MR {
            let xv = unsafe { *xp[r].add(k) };
            for l in 0..NV {
                a[r][l] = if FUSED {
                    U::fma(xv, w[l], a[r][l])
                } else {
                    a[r][l] + xv * w[l]
                };
            }
        }
        vp = unsafe { vp.add(step) };
    }
    for (r, row) in a.iter().enumerate() {
        out[r * step..r * step + NV].copy_from_slice(row);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ir::rng::Rng;

    /// The packed kernel with 16 × 16 register transpositions is the scalar
    /// packing bit for bit: feature counts with and without a partial block,
    /// tap runs longer and shorter than 16 and cut by the 256-row blocks,
    /// strided (transposed) kernels as the weight-VJP passes them.
    #[test]
    fn vector_kernel_packing_is_the_scalar_packing_bit_for_bit() {
        let mut rng = Rng::new(12);
        for (o, c, taps, transposed) in [
            (16usize, 3usize, 9usize, false),
            (16, 4, 1024, true),
            (33, 5, 49, false),
            (32, 7, 17, true),
            (8, 2, 300, true),
            (48, 3, 16, false),
        ] {
            let opad = o.div_ceil(16) * 16;
            let rhs: Vec<f32> = (0..o * c * taps)
                .map(|_| rng.signed_unit() as f32)
                .collect();
            // [o][c][taps] as stored, or [c][o][taps] read through strides.
            let strides = if transposed {
                [taps, o * taps]
            } else {
                [c * taps, taps]
            };
            // Row-major (the AVX-512 tiles') and panels of 16 (the others').
            for panels in [Panels { width: opad }, Panels { width: 16 }] {
                let mut want = vec![f32::NAN; c * taps * opad];
                let mut got = vec![f32::NAN; c * taps * opad];
                pack_kernel_with(&rhs, o, strides, taps, (opad, panels), &mut want, false);
                pack_kernel_with(&rhs, o, strides, taps, (opad, panels), &mut got, true);
                let same = want
                    .iter()
                    .zip(&got)
                    .all(|(a, b)| a.to_bits() == b.to_bits());
                assert!(
                    same,
                    "o {o}, c {c}, taps {taps}, transposed {transposed}, {panels:?}"
                );
                for k in 0..c * taps {
                    for oi in 0..opad {
                        let v = if oi < o {
                            rhs[oi * strides[0] + k / taps * strides[1] + k % taps]
                        } else {
                            0.0
                        };
                        let w = want[panels.at(c * taps, k, oi)];
                        assert_eq!(w.to_bits(), v.to_bits(), "k {k}, o {oi}, {panels:?}");
                    }
                }
            }
        }
    }

    /// The tile loop over panels of 16 features sums every element in the
    /// row-major loop's order (the same bits), wherever the reduction range
    /// starts (`k0`, the reduction-parallel slices) and however the blocks
    /// cut it; and both are the definition, up to rounding.
    #[test]
    fn panel_tiles_are_the_row_major_tiles_bit_for_bit() {
        let mut rng = Rng::new(13);
        for (opad, n_rows, k_total, k0, n_k, block) in [
            (16usize, 6usize, 40usize, 0usize, 40usize, 16usize),
            (48, 12, 300, 100, 150, 64),
            (512, 18, 200, 7, 193, 16),
            (32, 30, 33, 33, 0, 16), // an empty reduction: zeros
        ] {
            let x: Vec<f32> = (0..600).map(|_| rng.signed_unit() as f32).collect();
            let rows: Vec<usize> = (0..n_rows)
                .map(|_| (rng.next_u64() % 250) as usize)
                .collect();
            let k_offset: Vec<usize> = (0..n_k).map(|_| (rng.next_u64() % 300) as usize).collect();
            // V[k][o] as values; packed once per layout.
            let value = |k: usize, o: usize| (((k * 31 + o * 17) % 97) as f32 - 48.0) / 64.0;
            let layouts = [Panels { width: opad }, Panels { width: 16 }];
            let results: Vec<Vec<f32>> = layouts
                .iter()
                .map(|&panels| {
                    let mut v = vec![f32::NAN; k_total * opad];
                    for k in 0..k_total {
                        for o in 0..opad {
                            v[panels.at(k_total, k, o)] = value(k, o);
                        }
                    }
                    let kernel = Packed {
                        data: &v,
                        opad,
                        panels,
                    };
                    let mut acc = vec![f32::NAN; n_rows * opad];
                    // SAFETY: max row 249 + max offset 299 < 600; shapes as the contract.
                    if n_k == 0 {
                        tiles(&x, &rows, &k_offset, kernel, k0, block * opad * 4, &mut acc);
                    } else {
                        unsafe {
                            tiles_with::<f32, true>(
                                &x, &rows, &k_offset, kernel, k0, block, &mut acc,
                            )
                        };
                    }
                    // Back to row-major for the comparison.
                    let mut plain = vec![0.0; n_rows * opad];
                    for r in 0..n_rows {
                        for o in 0..opad {
                            plain[r * opad + o] = acc[panels.at(n_rows, r, o)];
                        }
                    }
                    plain
                })
                .collect();
            let same = results[0]
                .iter()
                .zip(&results[1])
                .all(|(a, b)| a.to_bits() == b.to_bits());
            assert!(
                same,
                "opad {opad}, rows {n_rows}, k0 {k0}, k {n_k}, block {block}"
            );
            for r in 0..n_rows {
                for o in 0..opad {
                    let exact: f64 = (0..n_k)
                        .map(|k| f64::from(x[rows[r] + k_offset[k]]) * f64::from(value(k0 + k, o)))
                        .sum();
                    let got = f64::from(results[0][r * opad + o]);
                    assert!(
                        (got - exact).abs() <= 1e-5 * (1.0 + exact.abs()),
                        "r {r}, o {o}"
                    );
                }
            }
        }
    }

    /// The register transposition writes what the scalar loop writes, bit
    /// for bit: feature counts below, at and past a block of 16 (a partial
    /// last block of features), position counts with and without a
    /// remainder, several examples, with and without a bias.
    #[test]
    fn vector_scatter_is_the_scalar_scatter_bit_for_bit() {
        let mut rng = Rng::new(11);
        for (o, p, batch) in [
            (16usize, 16usize, 1usize),
            (1, 16, 2),
            (5, 33, 2),
            (16, 1024, 2),
            (17, 17, 3),
            (32, 64, 1),
            (40, 15, 2),
            (64, 49, 2),
        ] {
            let opad = o.div_ceil(16) * 16;
            let acc: Vec<f32> = (0..batch * p * opad)
                .map(|_| rng.signed_unit() as f32)
                .collect();
            let bias: Vec<f32> = (0..o).map(|_| rng.signed_unit() as f32).collect();
            let panel_kinds = [Panels { width: opad }, Panels { width: 16 }];
            for (bias, panels) in [None, Some(&bias[..])]
                .into_iter()
                .flat_map(|b| panel_kinds.map(|k| (b, k)))
            {
                let mut want = vec![f32::NAN; batch * o * p];
                let mut got = vec![f32::NAN; batch * o * p];
                scatter_with(&acc, (opad, panels), o, p, &mut want, bias, false);
                scatter_with(&acc, (opad, panels), o, p, &mut got, bias, true);
                let same = want
                    .iter()
                    .zip(&got)
                    .all(|(a, b)| a.to_bits() == b.to_bits());
                assert!(
                    same,
                    "o {o}, p {p}, batch {batch}, bias {}, {panels:?}",
                    bias.is_some()
                );
                // And the scalar loop is the definition: out[b][o][p] = acc[b·p + p][o] (+ bias[o]).
                for (i, &w) in want.iter().enumerate() {
                    let (b, oi, pi) = (i / (o * p), i / p % o, i % p);
                    let a = acc[panels.at(batch * p, b * p + pi, oi)];
                    let v = bias.map_or(a, |bs| a + bs[oi]);
                    assert_eq!(w.to_bits(), v.to_bits());
                }
            }
        }
    }
}
