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
//! positions; with few positions and a long reduction, ranges of the packed
//! kernel's panels when there are many output features (the row groups'
//! bits), else fixed-size slices of the reduction, summed in order (the
//! weight-VJP, whose output is the kernel).
//!
//! This module owns the convolution's plan and its parallel split; the
//! operand layouts (padded input, packed kernel, scatter) are `layout.rs`,
//! the tile loops `tiles.rs`, and the f32 tiles with output positions in
//! the vector lanes (rows that fill them, on AVX-512) `lanes.rs`.

use std::any::TypeId;

use rayon::prelude::*;

use super::float::FastFloat;
use crate::tensor::row_major_strides;

mod avx2;
pub(crate) mod avx512;
mod lanes;
mod layout;
mod tiles;

pub use lanes::set_lane_tiles;
pub use layout::set_row_major_kernel_layout;
use layout::{k_offsets, pack_kernel, row_bases, scatter, Packed, Panels, PlaneCopier};
use tiles::tiles;
pub(crate) use tiles::TileFloat;
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
        let rows_for =
            |examples: usize, chans: usize| row_bases(0..examples, chans, plane, origin, U::MR);
        let cols_for = |chans: usize| k_offsets(chans, plane, tap_offsets);

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
        let lane_row = lanes::lane_row(
            TypeId::of::<U>() == TypeId::of::<f32>(),
            &self.strides,
            self.out_spatial,
            o,
        );
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
                    if let Some(row) = lane_row {
                        let vectors =
                            lanes::lane_vectors(examples, (channels, plane), origin, row, o);
                        fn f32s<U: 'static>(s: &[U]) -> &[f32] {
                            same_type::<U, f32>(s).expect("lane tiles are f32")
                        }
                        let kernel = Packed {
                            data: f32s(v),
                            opad,
                            panels,
                        };
                        let block = same_type_mut::<U, f32>(block).expect("lane tiles are f32");
                        lanes::lane_tiles(
                            f32s(x),
                            &vectors,
                            &cols,
                            kernel,
                            (o, p),
                            block,
                            bias.map(f32s),
                        );
                    } else {
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
                    }
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
        let cols = k_offsets(channels, plane, tap_offsets);
        let dst = Disjoint(out.as_mut_ptr());
        let dst = &dst;
        with_scratch(self.batch * channels * plane, |x: &mut [U]| {
            copier.fill(lhs, 0..self.batch, 0..channels, channels, x);
            let x = &*x;
            let jobs: Vec<(usize, usize)> = (0..self.batch.div_ceil(tasks.group))
                .flat_map(|r| (0..kernel_panels.div_ceil(per_task)).map(move |c| (r, c)))
                .collect();
            jobs.into_par_iter().for_each(|(rt, ct)| {
                let (b0, b1) = (rt * tasks.group, ((rt + 1) * tasks.group).min(self.batch));
                let (j0, j1) = (ct * per_task, ((ct + 1) * per_task).min(kernel_panels));
                let (o0, o1) = (j0 * U::NV, (j1 * U::NV).min(o));
                let sub_opad = (j1 - j0) * U::NV;
                let rows = row_bases(b0..b1, channels, plane, origin, U::MR);
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
