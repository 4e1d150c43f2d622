//! The f32 GEMM on AVX-512: B packed once per call into panels of 32
//! columns (a register transpose when it is given transposed), A per task
//! into tiles of 12 rows (or read in place, row-major, when few panels would
//! reuse a packed copy), a 12 × 32 register tile (24 accumulators, two B
//! vectors and a broadcast of A per multiply-add pair), blocked so a B
//! panel's `KC` rows stay in L1 and a task's A block in L2, the tasks
//! balanced over rayon's threads. matrixmultiply 0.3.11 has an AVX-512 tile
//! too (16 × 16, one broadcast per multiply-add); on one thread the two are
//! even on ViT-Tiny's products, and on two this one's task split, in-place
//! A and register-transposed B make them 0.77–0.95 of its time
//! (`cargo run --release -p den --example gemm_bench vit`).
//!
//! Each element of C is one fused multiply-add chain over the reduction in
//! index order, from zero (from C's value when accumulating), carried
//! between k blocks through C itself (an f32 holds the running f32 sum
//! exactly), then `+ bias` when biased: the same bits whatever the thread
//! count, the task split or the tile an element falls in.

use std::arch::x86_64::*;

use super::super::implicit::with_scratch;
use super::{MatRef, SendPtr};
use rayon::prelude::*;

/// Register tile: rows of A broadcast, columns of B as two 16-lane vectors.
const MR: usize = 12;
const NR: usize = 32;
/// Reduction block: a packed B panel of `KC × 32` floats is 32 KiB (L1 is 48).
const KC: usize = 256;
/// Most rows per task: the packed A block (`MC × KC`, 144 KiB) stays in L2.
const MC: usize = 144;
/// Most column panels for which A is read in place rather than packed.
const DIRECT_PANELS: usize = 4;
/// Least `m · k · n` split over threads (below it, one task on the caller's thread).
const PAR_MACS: usize = 1 << 18;

/// Whether the CPU runs [`sgemm`].
pub(super) fn available() -> bool {
    std::arch::is_x86_feature_detected!("avx512f")
}

/// Width of column panel `j` of `n` columns: 32, or 16 for a last panel of
/// at most 16 columns (a 12 × 16 tile, so attention's 197 columns pad to 208,
/// not 224).
fn panel_width(j: usize, n: usize) -> usize {
    if n - j * NR <= NR / 2 {
        NR / 2
    } else {
        NR
    }
}

/// `c = a · b` (or `c = a · b + bias`, or with `accumulate` the chain
/// started from `c`), `c` row-major with row stride `ldc`. `m`, `k`, `n` are
/// positive and the views in bounds (checked by the caller).
pub(super) fn sgemm(
    a: MatRef<'_, f32>,
    b: MatRef<'_, f32>,
    c: &mut [f32],
    ldc: usize,
    accumulate: bool,
    bias: Option<&[f32]>,
) {
    let (m, k, n) = (a.rows, a.cols, b.cols);
    assert!(available() && m > 0 && k > 0 && n > 0);
    assert!(ldc >= n && (m - 1) * ldc + n <= c.len());
    let panels = n.div_ceil(NR);
    let npad: usize = (0..panels).map(|j| panel_width(j, n)).sum();
    let threads = rayon::current_num_threads();
    let parallel = threads > 1 && m * k * n >= PAR_MACS;
    // Row blocks of at most MC rows, as many as a multiple of the threads
    // when parallel (ViT's 1576 rows: 12 blocks of 132, not 10 of 144 and
    // one of 136 — six and five for two threads).
    let mut row_blocks = m.div_ceil(MC);
    if parallel && row_blocks > 1 {
        row_blocks = row_blocks.div_ceil(threads) * threads;
    }
    let mc = m.div_ceil(row_blocks).div_ceil(MR) * MR;
    let row_blocks = m.div_ceil(mc);
    // Column groups of panels when there are too few row blocks to go round.
    let groups = if parallel && row_blocks < 2 * threads {
        (2 * threads).div_ceil(row_blocks).min(panels)
    } else {
        1
    };
    let per_group = panels.div_ceil(groups);
    let groups = panels.div_ceil(per_group);
    // The bias over the padded columns (zero past `n`, never stored).
    let bias_pad: Option<Vec<f32>> = bias.map(|b| {
        assert_eq!(b.len(), n, "gemm bias length");
        let mut v = b.to_vec();
        v.resize(npad, 0.0);
        v
    });

    with_scratch(k * npad, |packed_b: &mut [f32]| {
        pack_b(b, npad, packed_b, parallel);
        let packed_b = &*packed_b;
        let cp = SendPtr(c.as_mut_ptr());
        let task = |t: usize| {
            let (rb, g) = (t / groups, t % groups);
            let rows = rb * mc..((rb + 1) * mc).min(m);
            let cols = g * per_group..((g + 1) * per_group).min(panels);
            let block = Block {
                rows,
                panels: cols,
                n,
                ldc,
                accumulate,
                bias: bias_pad.as_deref(),
            };
            block.run(a, packed_b, npad, cp);
        };
        if parallel && row_blocks * groups > 1 {
            (0..row_blocks * groups).into_par_iter().for_each(task);
        } else {
            (0..row_blocks * groups).for_each(task);
        }
    });
}

/// B as, per k block, its column panels `[kc][width]` one after another
/// (zero beyond column `n`); block `pc` starts at `pc · KC · npad`.
fn pack_b(b: MatRef<'_, f32>, npad: usize, out: &mut [f32], parallel: bool) {
    let (k, n) = (b.rows, b.cols);
    let pack_block = |pc: usize, dst: &mut [f32]| {
        let k0 = pc * KC;
        let kc = dst.len() / npad;
        let mut at = 0;
        let mut j0 = 0;
        while j0 < n {
            let w = panel_width(j0 / NR, n);
            let cols = (n - j0).min(w);
            if b.row_stride == 1 && b.col_stride != 1 {
                // Bᵀ row-major (attention's keys): each column of B is
                // contiguous over k, so 16 × 16 blocks transpose in registers.
                let first = k0 + j0 * b.col_stride;
                let last = first + (cols - 1) * b.col_stride + kc;
                assert!(last <= b.data.len() && at + kc * w <= dst.len());
                // SAFETY: AVX-512F (the caller's `available()`); the assert
                // bounds the `cols` columns of `kc` read and the panel written.
                unsafe {
                    pack_transposed(
                        b.data.as_ptr().add(first),
                        b.col_stride,
                        cols,
                        kc,
                        w,
                        dst.as_mut_ptr().add(at),
                    )
                };
                at += kc * w;
                j0 += w;
                continue;
            }
            for p in 0..kc {
                let row = &mut dst[at + p * w..at + (p + 1) * w];
                let src = (k0 + p) * b.row_stride + j0 * b.col_stride;
                if b.col_stride == 1 {
                    row[..cols].copy_from_slice(&b.data[src..src + cols]);
                } else {
                    for (jj, x) in row[..cols].iter_mut().enumerate() {
                        *x = b.data[src + jj * b.col_stride];
                    }
                }
                row[cols..].fill(0.0);
            }
            at += kc * w;
            j0 += w;
        }
    };
    let out = &mut out[..k * npad];
    if parallel {
        out.par_chunks_mut(KC * npad)
            .enumerate()
            .for_each(|(pc, d)| pack_block(pc, d));
    } else {
        out.chunks_mut(KC * npad)
            .enumerate()
            .for_each(|(pc, d)| pack_block(pc, d));
    }
}

/// The `[kc][w]` panel at `out` from `cols` ≤ `w` columns of `kc`
/// contiguous floats each (column stride `ldb`), columns past `cols` zero.
///
/// # Safety
/// AVX-512F; the columns are readable and the panel writable.
#[target_feature(enable = "avx512f")]
unsafe fn pack_transposed(
    b: *const f32,
    ldb: usize,
    cols: usize,
    kc: usize,
    w: usize,
    out: *mut f32,
) {
    use super::super::implicit::avx512::transpose16_regs;
    // SAFETY: loads are masked to the `kc` floats of the `cols` columns,
    // stores are the panel's `kc` rows of `w`.
    unsafe {
        for h in (0..w).step_by(16) {
            let mut p0 = 0;
            while p0 < kc {
                let n = (kc - p0).min(16);
                let load: __mmask16 = ((1u32 << n) - 1) as __mmask16;
                let r: [__m512; 16] = std::array::from_fn(|i| {
                    if h + i < cols {
                        _mm512_maskz_loadu_ps(load, b.add((h + i) * ldb + p0))
                    } else {
                        _mm512_setzero_ps()
                    }
                });
                let rows = transpose16_regs(r);
                for (p, &v) in rows.iter().enumerate().take(n) {
                    _mm512_storeu_ps(out.add((p0 + p) * w + h), v);
                }
                p0 += 16;
            }
        }
    }
}

/// One task: rows `rows` × column panels `panels` of C.
struct Block<'a> {
    rows: std::ops::Range<usize>,
    panels: std::ops::Range<usize>,
    n: usize,
    ldc: usize,
    accumulate: bool,
    /// The bias over the padded columns.
    bias: Option<&'a [f32]>,
}

impl Block<'_> {
    /// Per k block: the A block packed into 12-row tiles (or read in place),
    /// then every tile times every panel, the chain carried through C itself
    /// (an f32 holds the running f32 sum exactly). Tiles that reach past `m`
    /// or `n` run on a local 12 × 32 copy.
    fn run(&self, a: MatRef<'_, f32>, packed_b: &[f32], npad: usize, c: SendPtr<f32>) {
        let (rows, n, ldc, k) = (self.rows.clone(), self.n, self.ldc, a.cols);
        let tiles = rows.len().div_ceil(MR);
        // Column (of C and of the packed panels) and width of each panel.
        let panel_at: Vec<(usize, usize)> = {
            let mut at = 0;
            (0..self.panels.end)
                .map(|j| {
                    let w = panel_width(j, n);
                    at += w;
                    (at - w, w)
                })
                .skip(self.panels.start)
                .collect()
        };
        // A row-major A is read in place (12 row pointers, a zero row
        // standing in for rows past `m`) when few panels would reuse a packed
        // copy; otherwise each k block of it is packed into tiles.
        let direct = a.col_stride == 1 && panel_at.len() <= DIRECT_PANELS;
        let zeros = [0.0f32; KC];
        let kblocks = k.div_ceil(KC);
        with_scratch(
            if direct { 0 } else { tiles * MR * KC.min(k) },
            |packed_a: &mut [f32]| {
                for pc in 0..kblocks {
                    let k0 = pc * KC;
                    let kc = KC.min(k - k0);
                    if !direct {
                        pack_a(a, rows.clone(), k0, kc, &mut packed_a[..tiles * MR * kc]);
                    }
                    // Row pointers of each tile's 12 rows of A, and whether
                    // they are a packed tile's.
                    let tile_rows = |t: usize| -> ([*const f32; MR], bool) {
                        if direct {
                            let r0 = rows.start + t * MR;
                            let rp = std::array::from_fn(|i| {
                                if r0 + i < rows.end {
                                    let at = (r0 + i) * a.row_stride + k0;
                                    assert!(at + kc <= a.data.len());
                                    a.data[at..].as_ptr()
                                } else {
                                    zeros.as_ptr()
                                }
                            });
                            (rp, false)
                        } else {
                            let ap = packed_a[t * MR * kc..(t + 1) * MR * kc].as_ptr();
                            // SAFETY: lane i of the tile's first packed row.
                            (std::array::from_fn(|i| unsafe { ap.add(i) }), true)
                        }
                    };
                    let ends = Ends {
                        from_c: pc > 0 || self.accumulate,
                        bias: None,
                    };
                    let block = &packed_b[k0 * npad..];
                    for &(at, w) in &panel_at {
                        let bp = block[at * kc..(at + w) * kc].as_ptr();
                        let ends = Ends {
                            bias: self
                                .bias
                                .filter(|_| pc + 1 == kblocks)
                                .map(|b| b[at..at + w].as_ptr()),
                            ..ends
                        };
                        let cols = (n - at).min(w);
                        for t in 0..tiles {
                            let (rp, packed) = tile_rows(t);
                            let r0 = rows.start + t * MR;
                            let live = (rows.end - r0).min(MR);
                            // SAFETY: `available()` was asserted by `sgemm`; each
                            // row pointer reads kc floats (a row of A,
                            // the zero row, or a packed tile: bounded above), the
                            // panel holds kc × w, the bias w; C's rows r0.. r0 +
                            // live, columns at.. at + cols are inside C (`sgemm`'s
                            // assert) and this task's alone.
                            unsafe {
                                let dst = c.get().add(r0 * ldc + at);
                                if live == MR && cols == w {
                                    tile_any(w, kc, &rp, packed, bp, dst, ldc, ends);
                                } else {
                                    let mut local = [0.0f32; MR * NR];
                                    if ends.from_c {
                                        for i in 0..live {
                                            std::ptr::copy_nonoverlapping(
                                                dst.add(i * ldc),
                                                local[i * NR..].as_mut_ptr(),
                                                cols,
                                            );
                                        }
                                    }
                                    tile_any(w, kc, &rp, packed, bp, local.as_mut_ptr(), NR, ends);
                                    for i in 0..live {
                                        std::ptr::copy_nonoverlapping(
                                            local[i * NR..].as_ptr(),
                                            dst.add(i * ldc),
                                            cols,
                                        );
                                    }
                                }
                            }
                        }
                    }
                }
            },
        );
    }
}

/// Where a tile's chain starts and what its last store adds.
#[derive(Clone, Copy)]
struct Ends {
    /// Start from the destination's values (a later k block, or
    /// accumulating), else from zero.
    from_c: bool,
    /// Add these 16·V values (one per column) before the store.
    bias: Option<*const f32>,
}

/// [`tile`] for a panel of width `w` (32 or 16), `packed` or not.
///
/// # Safety
/// As [`tile`].
#[allow(clippy::too_many_arguments)]
#[inline]
unsafe fn tile_any(
    w: usize,
    kc: usize,
    rows: &[*const f32; MR],
    packed: bool,
    b: *const f32,
    out: *mut f32,
    ldo: usize,
    ends: Ends,
) {
    // SAFETY: forwarded contract.
    unsafe {
        match (w == NR, packed) {
            (true, true) => tile::<2, true>(kc, rows, b, out, ldo, ends),
            (true, false) => tile::<2, false>(kc, rows, b, out, ldo, ends),
            (false, true) => tile::<1, true>(kc, rows, b, out, ldo, ends),
            (false, false) => tile::<1, false>(kc, rows, b, out, ldo, ends),
        }
    }
}

/// Rows `rows`, columns `k0..k0 + kc` of A as 12-row tiles `[kc][12]`:
/// a row-major A (contiguous rows) is transposed 16 columns at a time in
/// registers, a column-major one (contiguous columns) copied 12 at a time.
fn pack_a(a: MatRef<'_, f32>, rows: std::ops::Range<usize>, k0: usize, kc: usize, out: &mut [f32]) {
    for (t, tile) in out.chunks_exact_mut(MR * kc).enumerate() {
        let r0 = rows.start + t * MR;
        let live = rows.end.saturating_sub(r0).min(MR);
        let base = r0 * a.row_stride + k0 * a.col_stride;
        if a.col_stride == 1 {
            let last = base + (live - 1) * a.row_stride + kc;
            assert!(last <= a.data.len() && tile.len() == MR * kc);
            // SAFETY: AVX-512F is present (the caller's `available()`); the
            // assert bounds the `live` rows of `kc` read and the tile written.
            unsafe {
                pack_rows(
                    a.data.as_ptr().add(base),
                    a.row_stride,
                    live,
                    kc,
                    tile.as_mut_ptr(),
                )
            };
        } else if a.row_stride == 1 {
            let last = base + (kc - 1) * a.col_stride + live;
            assert!(last <= a.data.len() && tile.len() == MR * kc);
            // SAFETY: as above; column `p`'s `live` rows are contiguous.
            unsafe {
                pack_cols(
                    a.data.as_ptr().add(base),
                    a.col_stride,
                    live,
                    kc,
                    tile.as_mut_ptr(),
                )
            };
        } else {
            if live < MR {
                tile.fill(0.0);
            }
            for i in 0..live {
                for p in 0..kc {
                    tile[p * MR + i] = a.data[base + i * a.row_stride + p * a.col_stride];
                }
            }
        }
    }
}

/// `live` ≤ 12 rows of `kc` contiguous floats (row stride `lda`) as the
/// `[kc][12]` tile at `out`, rows past `live` zero.
///
/// # Safety
/// AVX-512F; the rows are readable and the `kc × 12` tile writable.
#[target_feature(enable = "avx512f")]
unsafe fn pack_rows(a: *const f32, lda: usize, live: usize, kc: usize, out: *mut f32) {
    use super::super::implicit::avx512::transpose16_regs;
    // SAFETY: loads are masked to the `kc` columns of the `live` rows; stores
    // to the 12 lanes of each of the `kc` tile rows.
    unsafe {
        let mut p0 = 0;
        while p0 < kc {
            let n = (kc - p0).min(16);
            let load: __mmask16 = ((1u32 << n) - 1) as __mmask16;
            let r: [__m512; 16] = std::array::from_fn(|i| {
                if i < live {
                    _mm512_maskz_loadu_ps(load, a.add(i * lda + p0))
                } else {
                    _mm512_setzero_ps()
                }
            });
            let cols = transpose16_regs(r);
            for (p, &v) in cols.iter().enumerate().take(n) {
                _mm512_mask_storeu_ps(out.add((p0 + p) * MR), 0x0fff, v);
            }
            p0 += 16;
        }
    }
}

/// The `[kc][12]` tile at `out` from `kc` columns of `live` ≤ 12 contiguous
/// floats (column stride `lda`), rows past `live` zero.
///
/// # Safety
/// AVX-512F; the columns are readable and the tile writable.
#[target_feature(enable = "avx512f")]
unsafe fn pack_cols(a: *const f32, lda: usize, live: usize, kc: usize, out: *mut f32) {
    let load: __mmask16 = ((1u32 << live) - 1) as __mmask16;
    // SAFETY: `live` floats read per column, 12 written per tile row.
    unsafe {
        for p in 0..kc {
            let v = _mm512_maskz_loadu_ps(load, a.add(p * lda));
            _mm512_mask_storeu_ps(out.add(p * MR), 0x0fff, v);
        }
    }
}

/// One 12 × (16·V) tile: `out[r][..]` (row stride `ldo`) = (its previous
/// value when `ends.from_c`, else zero) + Σ_p A[r][p] · b[p][..], one fused
/// multiply-add per step in order, then `+ bias` when `ends.bias`. A is a
/// packed tile when `PACKED` (`[kc][12]` at `rows[0]`; the other pointers
/// are unused), else row `r` is the `kc` contiguous floats at `rows[r]`.
///
/// # Safety
/// The CPU has AVX-512F; the rows of A are readable as above, `b` holds
/// `kc × 16V`, the bias (when given) 16V floats, and the 12 rows of `16V`
/// floats at `out + r · ldo` are readable and writable.
#[target_feature(enable = "avx512f")]
unsafe fn tile<const V: usize, const PACKED: bool>(
    kc: usize,
    rows: &[*const f32; MR],
    b: *const f32,
    out: *mut f32,
    ldo: usize,
    ends: Ends,
) {
    // SAFETY: every pointer stays inside the ranges the contract gives.
    unsafe {
        let mut acc = [[_mm512_setzero_ps(); V]; MR];
        if ends.from_c {
            for (r, row) in acc.iter_mut().enumerate() {
                for (v, x) in row.iter_mut().enumerate() {
                    *x = _mm512_loadu_ps(out.add(r * ldo + 16 * v));
                }
            }
        }
        let mut bp = b;
        for p in 0..kc {
            let w: [__m512; V] = std::array::from_fn(|v| _mm512_loadu_ps(bp.add(16 * v)));
            for (r, row) in acc.iter_mut().enumerate() {
                let x = _mm512_set1_ps(if PACKED {
                    *rows[0].add(p * MR + r)
                } else {
                    *rows[r].add(p)
                });
                for (v, y) in row.iter_mut().enumerate() {
                    *y = _mm512_fmadd_ps(x, w[v], *y);
                }
            }
            bp = bp.add(16 * V);
        }
        if let Some(bias) = ends.bias {
            let bv: [__m512; V] = std::array::from_fn(|v| _mm512_loadu_ps(bias.add(16 * v)));
            for row in acc.iter_mut() {
                for (v, x) in row.iter_mut().enumerate() {
                    *x = _mm512_add_ps(*x, bv[v]);
                }
            }
        }
        for (r, row) in acc.iter().enumerate() {
            for (v, x) in row.iter().enumerate() {
                _mm512_storeu_ps(out.add(r * ldo + 16 * v), *x);
            }
        }
    }
}
