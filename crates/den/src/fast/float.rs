//! The element types the fast kernels run on: [`FastFloat`], implemented for
//! `f32` (real f32 numerics) and `f64` (the real-number proxy and the parts of
//! a `Dual<f64>`), with the one operation that differs beyond arithmetic — the
//! GEMM (`matrixmultiply::sgemm` / `dgemm`; f32 on AVX-512 bypasses it,
//! see `gemm.rs`).

use std::fmt::Debug;
use std::ops::{Add, AddAssign, Mul};

mod sealed {
    /// Keeps [`super::FastFloat`] closed: its GEMM is an unsafe raw-pointer call
    /// whose contract only the kernels in this crate uphold.
    pub trait Sealed {
        /// `c = alpha·a·b + beta·c` on strided matrices (`matrixmultiply`'s contract).
        ///
        /// # Safety
        /// Every index the strides describe for `a` (`m × k`), `b` (`k × n`) and
        /// `c` (`m × n`) lies inside its allocation, and `c` aliases neither.
        #[allow(clippy::too_many_arguments)]
        unsafe fn gemm_raw(
            m: usize,
            k: usize,
            n: usize,
            a: *const Self,
            rsa: isize,
            csa: isize,
            b: *const Self,
            rsb: isize,
            csb: isize,
            beta: Self,
            c: *mut Self,
            rsc: isize,
        );
    }
}

pub(crate) use sealed::Sealed;

/// A float the fast kernels compute in: IEEE `f32` or `f64`.
pub trait FastFloat:
    Sealed
    + Copy
    + Debug
    + Default
    + PartialOrd
    + Send
    + Sync
    + Add<Output = Self>
    + Mul<Output = Self>
    + AddAssign
    + 'static
{
    const ZERO: Self;
    const ONE: Self;
    const NAN: Self;
    fn is_nan(self) -> bool;
    fn is_sign_positive(self) -> bool;
    fn is_sign_negative(self) -> bool;
}

macro_rules! fast_float {
    ($t:ty, $gemm:path) => {
        impl Sealed for $t {
            unsafe fn gemm_raw(
                m: usize,
                k: usize,
                n: usize,
                a: *const Self,
                rsa: isize,
                csa: isize,
                b: *const Self,
                rsb: isize,
                csb: isize,
                beta: Self,
                c: *mut Self,
                rsc: isize,
            ) {
                // SAFETY: forwarded from the caller's contract.
                unsafe { $gemm(m, k, n, 1.0, a, rsa, csa, b, rsb, csb, beta, c, rsc, 1) }
            }
        }

        impl FastFloat for $t {
            const ZERO: Self = 0.0;
            const ONE: Self = 1.0;
            const NAN: Self = <$t>::NAN;
            #[inline]
            fn is_nan(self) -> bool {
                <$t>::is_nan(self)
            }
            #[inline]
            fn is_sign_positive(self) -> bool {
                <$t>::is_sign_positive(self)
            }
            #[inline]
            fn is_sign_negative(self) -> bool {
                <$t>::is_sign_negative(self)
            }
        }
    };
}

fast_float!(f32, matrixmultiply::sgemm);
fast_float!(f64, matrixmultiply::dgemm);
