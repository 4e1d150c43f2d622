#!/usr/bin/env python3
"""conformance.py: the StableHLO conformance suite for certgrad's evaluator.

Owns the suite: zero-argument test functions, one per (op, element type,
edge case), written with jax.lax so each lowers to the op under test applied
to constants; JAX/XLA's CPU result of each is the expected output. Then runs
`certgrad run CASE.mlir` (and, with --generic, the reference evaluator) and
classifies every case:

  PASS         every output has JAX's dtype, shape and values (see TOLERANCES)
  WRONG        certgrad ran and an output differs
  UNSUPPORTED  certgrad refused the program (parse/verify/eval error); the
               first line of its message is recorded

One line per non-passing case, a per-op table, then
"conformance: P passed, W wrong, U unsupported of N"; exit status 1 when a
case is WRONG and not listed in scripts/conformance_known_wrong.txt (each line
`CASE_NAME  # why`), 0 otherwise. Unsupported ops are reported, not failed:
the table is the to-do list of the opset issue.

Usage: conformance.py --out DIR --certgrad BIN [--generic] [--only SUBSTR ...]
       conformance.py --out DIR --generate-only
Needs jax (the venv scripts/jax_check.sh creates); jax_enable_x64 is on so
that f64/i64/u64 cases are real 64-bit computations.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from collections import defaultdict

import numpy as np

import jax

jax.config.update("jax_enable_x64", True)
jax.config.update("jax_platforms", "cpu")
import jax.numpy as jnp  # noqa: E402
from jax import lax  # noqa: E402

# How an output is compared (per case):
#   exact   bit-for-bit equal values (NaN matches any NaN; -0 must be -0)
#   ulp     within ULP_BOUND units in the last place of the output type
#           (transcendental functions: neither side is correctly rounded)
#   approx  relative error <= APPROX[dtype] against max(|expected|, 1) — special
#           functions whose XLA implementations are polynomial approximations
ULP_BOUND = 4
APPROX = {"float16": 2e-3, "bfloat16": 1.6e-2, "float32": 2e-5, "float64": 1e-11}
TOLERANCES = ("exact", "ulp", "approx")

FLOATS = ["float32", "float64", "bfloat16", "float16"]
SINTS = ["int8", "int16", "int32", "int64"]
UINTS = ["uint8", "uint16", "uint32", "uint64"]
INTS = SINTS + UINTS


def dt(name):
    return jnp.dtype(name)


def fvals(dtype, kind="edge"):
    """Float test values of `dtype`: edge values, or a smooth range."""
    d = dt(dtype)
    fi = jnp.finfo(d)
    if kind == "edge":
        # No subnormals: XLA's CPU backend flushes them to zero (DAZ/FTZ), an
        # implementation choice the spec does not make, so JAX is no oracle there.
        v = [0.0, -0.0, 1.0, -1.0, 0.5, -2.5, 3.0, 1e-3, 100.0, float("inf"), float("-inf"),
             float("nan"), float(fi.max), float(fi.tiny), float(fi.tiny) * 4, 2.5]
    elif kind == "unit":  # inside (-1, 1): asin, atanh, erf_inv
        v = [0.0, -0.0, 0.5, -0.5, 0.9, -0.9, 0.25, 1e-3, 0.999, 1.0, -1.0, float("nan")]
    elif kind == "pos":  # (0, ∞): log, lgamma, digamma
        v = [0.5, 1.0, 2.0, 3.5, 10.0, 1e-3, 100.0, 7.25, float("inf"), 0.0, float("nan"), 1.5]
    else:  # smooth moderate values
        v = [0.0, 0.5, -0.75, 1.25, -2.0, 3.0, 0.1, -0.3, 2.2, -1.6, 0.9, 4.0]
    return np.array(v, dtype=np.float64).astype(d)


def ivals(dtype):
    info = np.iinfo(dt(dtype))
    lo, hi = int(info.min), int(info.max)
    base = [0, 1, 2, 3, 7, 100, hi, hi - 1, lo, lo + 1]
    if lo < 0:
        base += [-1, -2, -7, -100]
    else:
        base += [5, 64, hi // 2, 9]
    return np.array(base, dtype=object).astype(dt(dtype))


def ivals_b(dtype):
    """A second integer operand, no zeros (division), same length as ivals."""
    info = np.iinfo(dt(dtype))
    v = [1, 3, -1, 2, int(info.max), -2, 5, 7, -1, 3, 1, 2, -3, 4]
    if info.min >= 0:
        v = [abs(x) if x != -1 else int(info.max) for x in v]
    return np.array(v[: len(ivals(dtype))], dtype=object).astype(dt(dtype))


class Suite:
    def __init__(self):
        self.cases = []  # (name, op, fn, tol)

    def add(self, op, name, fn, tol="exact"):
        assert tol in TOLERANCES
        self.cases.append((f"{op}.{name}", op, fn, tol))


def build():
    s = Suite()
    c = jnp.asarray

    # ---------------------------------------------------------- unary floats
    exact_unary = {
        "abs": lax.abs, "negate": lax.neg, "sign": lax.sign, "floor": lax.floor, "ceil": lax.ceil,
        "round_nearest_even": lambda x: lax.round(x, lax.RoundingMethod.TO_NEAREST_EVEN),
        "round_nearest_afz": lambda x: lax.round(x, lax.RoundingMethod.AWAY_FROM_ZERO),
        "sqrt": lax.sqrt, "is_finite": lax.is_finite,
    }
    ulp_unary = {
        "exponential": (lax.exp, "edge"), "exponential_minus_one": (lax.expm1, "edge"),
        "log": (lax.log, "pos"), "log_plus_one": (lax.log1p, "pos"), "rsqrt": (lax.rsqrt, "pos"),
        "cbrt": (lax.cbrt, "edge"), "tanh": (lax.tanh, "edge"), "logistic": (lax.logistic, "edge"),
        "sine": (lax.sin, "smooth"), "cosine": (lax.cos, "smooth"), "tan": (lax.tan, "smooth"),
    }
    chlo_unary = {
        "erf": (lax.erf, "smooth"), "erf_inv": (lax.erf_inv, "unit"), "lgamma": (lax.lgamma, "pos"),
        "digamma": (lax.digamma, "pos"), "sinh": (lax.sinh, "smooth"), "cosh": (lax.cosh, "smooth"),
        "asin": (lax.asin, "unit"), "acos": (lax.acos, "unit"), "atan": (lax.atan, "edge"),
        "asinh": (lax.asinh, "smooth"), "acosh": (lax.acosh, "pos"), "atanh": (lax.atanh, "unit"),
        "bessel_i1e": (lax.bessel_i1e, "smooth"),
    }
    for d in FLOATS:
        x = fvals(d)
        for op, f in exact_unary.items():
            s.add(op, d, lambda f=f, x=x: f(c(x)))
        for op, (f, kind) in ulp_unary.items():
            s.add(op, d, lambda f=f, x=fvals(d, kind): f(c(x)), "ulp")
        for op, (f, kind) in chlo_unary.items():
            s.add(op, d, lambda f=f, x=fvals(d, kind): f(c(x)), "approx")

    # --------------------------------------------------------- binary floats
    binary = {
        "add": lax.add, "subtract": lax.sub, "multiply": lax.mul, "divide": lax.div,
        "remainder": lax.rem, "maximum": lax.max, "minimum": lax.min,
    }
    for d in FLOATS:
        x = fvals(d)
        y = np.roll(x, 5)
        for op, f in binary.items():
            s.add(op, d, lambda f=f, x=x, y=y: f(c(x), c(y)))
        s.add("power", d, lambda x=fvals(d, "smooth"), y=np.roll(fvals(d, "smooth"), 3):
              lax.pow(c(x), c(y)), "ulp")
        s.add("atan2", d, lambda x=x, y=y: lax.atan2(c(x), c(y)), "ulp")
        s.add("next_after", d, lambda x=x, y=y: lax.nextafter(c(x), c(y)))
        for cmp in ["eq", "ne", "lt", "le", "gt", "ge"]:
            s.add("compare", f"{cmp}.{d}", lambda cmp=cmp, x=x, y=y: getattr(lax, cmp)(c(x), c(y)))
        s.add("select", d, lambda x=x, y=y: lax.select(c(x) > c(y), c(x), c(y)))
        s.add("clamp", d, lambda x=x: lax.clamp(c(np.array(-1.5, x.dtype)), c(x), c(np.array(2.0, x.dtype))))
    # f64 precision the f32 path loses
    s.add("constant", "float64.1e300", lambda: c(np.array([1e300, -1e-300, 5.0001], np.float64)) * 1.0)
    s.add("power", "float64.overflow_f32", lambda: lax.pow(c(np.array([1e4], np.float64)), c(np.array([10.0]))),
          "ulp")
    s.add("multiply", "float64.precision", lambda: c(np.array([1.0 + 2**-40], np.float64)) * c(np.array([3.0])))

    # -------------------------------------------------------------- integers
    for d in INTS:
        x, y = ivals(d), ivals_b(d)
        for op, f in {"add": lax.add, "subtract": lax.sub, "multiply": lax.mul, "maximum": lax.max,
                      "minimum": lax.min, "and": lax.bitwise_and, "or": lax.bitwise_or,
                      "xor": lax.bitwise_xor}.items():
            s.add(op, d, lambda f=f, x=x, y=y: f(c(x), c(y)))
        s.add("divide", d, lambda x=x, y=y: lax.div(c(x), c(y)))
        s.add("remainder", d, lambda x=x, y=y: lax.rem(c(x), c(y)))
        s.add("not", d, lambda x=x: lax.bitwise_not(c(x)))
        s.add("popcnt", d, lambda x=x: lax.population_count(c(x)))
        # Non-negative values only: XLA's CPU clz of a negative narrow integer
        # counts in the sign-extended 64-bit word minus the padding (int8 −128
        # gives −56); the spec's count of a set top bit is 0 (den's tests).
        s.add("count_leading_zeros", d, lambda x=x: lax.clz(c(x[x >= 0])))
        bits = np.iinfo(dt(d)).bits
        sh = np.array([0, 1, 3, bits - 1, bits, bits + 1, 2, 5, 1, 0, 7, 4, 2, 1][: len(x)], dtype=dt(d))
        s.add("shift_left", d, lambda x=x, sh=sh: lax.shift_left(c(x), c(sh)))
        s.add("shift_right_logical", d, lambda x=x, sh=sh: lax.shift_right_logical(c(x), c(sh)))
        s.add("shift_right_arithmetic", d, lambda x=x, sh=sh: lax.shift_right_arithmetic(c(x), c(sh)))
        for cmp in ["eq", "lt", "ge"]:
            s.add("compare", f"{cmp}.{d}", lambda cmp=cmp, x=x, y=y: getattr(lax, cmp)(c(x), c(y)))
        if d in SINTS:
            s.add("negate", d, lambda x=x: lax.neg(c(x)))
            s.add("abs", d, lambda x=x: lax.abs(c(x)))
            s.add("sign", d, lambda x=x: lax.sign(c(x)))
        s.add("reduce", f"sum.{d}", lambda x=x: jnp.sum(c(x), dtype=x.dtype))
        s.add("reduce", f"max.{d}", lambda x=x: jnp.max(c(x)))
        s.add("dot_general", d, lambda x=x: lax.dot(c(x[:12].reshape(3, 4)), c(x[:12].reshape(4, 3))))
    bools = np.array([True, False, True, False])
    bools2 = np.array([True, True, False, False])
    # (i1 add = or, multiply = and: JAX's lax refuses bool add/mul, so those
    # are tested in den's own tests from hand-written StableHLO.)
    for op, f in {"and": lax.bitwise_and, "or": lax.bitwise_or, "xor": lax.bitwise_xor}.items():
        s.add(op, "bool", lambda f=f: f(c(bools), c(bools2)))
    s.add("not", "bool", lambda: lax.bitwise_not(c(bools)))
    s.add("constant", "uint64.max", lambda: c(np.array([2**64 - 1, 2**63, 1], np.uint64)) + c(np.array([0, 1, 2], np.uint64)))

    # ------------------------------------------------- conversions and bits
    conv_pairs = [("float32", "float64"), ("float64", "float32"), ("float32", "bfloat16"),
                  ("float32", "float16"), ("bfloat16", "float32"), ("int32", "float32"),
                  ("int64", "float64"), ("uint8", "float32"), ("float32", "int32"),
                  ("int32", "int8"), ("int8", "int32"), ("uint32", "int32"), ("int32", "uint16"),
                  ("float64", "int64"), ("int32", "bool"), ("bool", "float32")]
    for a, b in conv_pairs:
        if a == "bool":
            x = bools
        elif a in FLOATS:
            x = fvals(a, "smooth") * np.array(3, dtype=dt(a))
        else:
            x = ivals(a)
        s.add("convert", f"{a}_to_{b}", lambda x=x, b=b: lax.convert_element_type(c(x), dt(b)))
    for a, b in [("float32", "int32"), ("float32", "uint32"), ("int32", "float32"),
                 ("float64", "int64"), ("bfloat16", "int16"), ("float16", "uint16"),
                 ("float64", "uint64")]:
        x = fvals(a) if a in FLOATS else ivals(a)
        s.add("bitcast_convert", f"{a}_to_{b}", lambda x=x, b=b: lax.bitcast_convert_type(c(x), dt(b)))
    s.add("bitcast_convert", "float32_to_uint8x4", lambda: lax.bitcast_convert_type(c(fvals("float32")), jnp.uint8))
    s.add("bitcast_convert", "uint8x4_to_float32",
          lambda: lax.bitcast_convert_type(c(np.arange(16, dtype=np.uint8).reshape(4, 4)), jnp.float32))
    for e, m in [(8, 7), (5, 10), (4, 3), (11, 52), (8, 23)]:
        for d in ["float32", "float64"]:
            s.add("reduce_precision", f"e{e}m{m}.{d}",
                  lambda d=d, e=e, m=m: lax.reduce_precision(c(fvals(d) * np.array(1.3, dt(d))), e, m))

    # ------------------------------------------------------------ data movement
    a = np.arange(24, dtype=np.float32).reshape(2, 3, 4) - 7.5
    s.add("reshape", "f32", lambda: lax.reshape(c(a), (4, 6)))
    s.add("transpose", "f32", lambda: lax.transpose(c(a), (2, 0, 1)))
    s.add("broadcast_in_dim", "f32", lambda: lax.broadcast_in_dim(c(a[0, 0]), (3, 4, 2), (1,)))
    s.add("reverse", "f32", lambda: lax.rev(c(a), (0, 2)))
    s.add("slice", "strided", lambda: lax.slice(c(a), (0, 1, 0), (2, 3, 4), (1, 1, 3)))
    s.add("pad", "negative_interior", lambda: lax.pad(c(a), np.float32(-1), [(1, 0, 0), (-1, 2, 1), (0, -2, 1)]))
    s.add("concatenate", "f32", lambda: lax.concatenate([c(a), c(a * 2)], 1))
    s.add("iota", "i32", lambda: lax.broadcasted_iota(jnp.int32, (3, 4), 1))
    s.add("iota", "f64", lambda: lax.broadcasted_iota(jnp.float64, (5,), 0) * 0.5)
    for starts in [(0, 1, 1), (1, 2, 3), (-1, 5, 9)]:
        tag = "_".join(str(v) for v in starts).replace("-", "m")
        s.add("dynamic_slice", tag,
              lambda starts=starts: lax.dynamic_slice(c(a), [c(np.int32(v)) for v in starts], (1, 2, 2)))
        s.add("dynamic_update_slice", tag,
              lambda starts=starts: lax.dynamic_update_slice(c(a), c(np.full((1, 2, 2), 99, np.float32)),
                                                             [c(np.int32(v)) for v in starts]))
    m = np.arange(20, dtype=np.float32).reshape(5, 4)
    idx = np.array([3, 0, 4, 4, 1, 9, -1], dtype=np.int32)  # 9 and -1: out of bounds
    s.add("gather", "take_rows_clamped", lambda: jnp.take(c(m), c(idx), axis=0, mode="clip"))
    s.add("gather", "take_fill", lambda: jnp.take(c(m), c(idx), axis=0, mode="fill", fill_value=-5.0))
    s.add("gather", "take_along_axis",
          lambda: jnp.take_along_axis(c(m), c(np.array([[0], [3], [1], [2], [0]], np.int32)), axis=1))
    s.add("gather", "index_2d", lambda: c(m)[c(np.array([1, 4, 0], np.int32)), c(np.array([3, 0, 2], np.int32))])
    s.add("gather", "batched", lambda: jax.vmap(lambda r, i: r[i])(c(m), c(np.array([0, 1, 2, 3, 0], np.int32))))
    s.add("gather", "int_operand", lambda: jnp.take(c(np.arange(10, dtype=np.int64)), c(np.array([9, 0, 3], np.int32))))
    dup = np.array([1, 3, 1, 1, 0], dtype=np.int32)
    upd = np.arange(5 * 4, dtype=np.float32).reshape(5, 4) * 0.5
    s.add("scatter", "add_duplicates", lambda: c(m).at[c(dup)].add(c(upd)))
    s.add("scatter", "set", lambda: c(m).at[c(np.array([4, 0], np.int32))].set(c(upd[:2])))
    s.add("scatter", "mul", lambda: c(m).at[c(dup)].multiply(c(upd)))
    s.add("scatter", "max", lambda: c(m).at[c(dup)].max(c(upd)))
    s.add("scatter", "min_int", lambda: c(np.arange(6, dtype=np.int32)).at[c(np.array([5, 2, 2], np.int32))].min(c(np.array([-1, 7, -3], np.int32))))
    s.add("scatter", "out_of_bounds_dropped", lambda: c(m).at[c(np.array([7, -9, 2], np.int32))].add(c(upd[:3]), mode="drop"))
    s.add("scatter", "2d_points", lambda: c(m).at[c(np.array([0, 4, 0], np.int32)), c(np.array([1, 3, 1], np.int32))].add(c(np.array([1.0, 2.0, 3.0], np.float32))))
    v = np.array([3.0, -1.0, np.nan, 2.0, -0.0, 0.0, 2.0, -np.inf, 5.0], dtype=np.float32)
    s.add("sort", "f32_nan", lambda: jnp.sort(c(v)))
    s.add("sort", "i32_2d_axis0", lambda: jnp.sort(c(np.array([[3, 1], [-2, 7], [3, 0]], np.int32)), axis=0))
    s.add("sort", "argsort_stable", lambda: jnp.argsort(c(np.array([2, 1, 2, 1, 0, 2], np.int32)), stable=True))
    s.add("sort", "descending", lambda: jnp.sort(c(v[~np.isnan(v)]), descending=True))
    s.add("sort", "two_operands", lambda: lax.sort((c(np.array([2, 1, 2, 0], np.int32)), c(np.array([1.0, 2.0, 3.0, 4.0], np.float32))), num_keys=1))
    s.add("top_k", "f32", lambda: lax.top_k(c(np.array([1.0, 5.0, 3.0, 5.0, -2.0], np.float32)), 3))
    s.add("top_k", "rows_i32", lambda: lax.top_k(c(np.array([[4, 1, 9], [0, 0, -1]], np.int32)), 2))
    s.add("reduce", "argmax_f32", lambda: jnp.argmax(c(m * np.float32(-1) + c(np.float32(3))), axis=1))
    s.add("reduce", "argmin_ties", lambda: jnp.argmin(c(np.array([2.0, 1.0, 1.0, 3.0], np.float32))))
    # The spec leaves a reduction's order to the implementation: ulp, not exact.
    s.add("reduce", "sum_f64", lambda: jnp.sum(c(np.linspace(0, 1, 1001)), dtype=jnp.float64), "ulp")
    s.add("reduce", "max_nan", lambda: jnp.max(c(v)))
    s.add("reduce", "prod_axis", lambda: jnp.prod(c(m[:, :3] * np.float32(0.5)), axis=0))
    s.add("reduce", "any_bool", lambda: jnp.any(c(np.array([[False, True], [False, False]])), axis=1))
    s.add("reduce_window", "cumsum", lambda: jnp.cumsum(c(m), axis=0))
    s.add("reduce_window", "maxpool", lambda: lax.reduce_window(c(m), -jnp.inf, lax.max, (2, 2), (1, 2), "VALID"))
    s.add("reduce_window", "sum_padded", lambda: lax.reduce_window(c(m), 0.0, lax.add, (3, 3), (2, 2), [(1, 1), (1, 1)]))
    s.add("select_and_scatter", "maxpool_grad",
          lambda: jax.grad(lambda x: jnp.sum(lax.reduce_window(x, -jnp.inf, lax.max, (2, 2), (2, 2), "VALID") * c(np.array([[1.0, 2.0], [3.0, 4.0]], np.float32))))(c(m[:4] * np.float32(1.5))))

    # -------------------------------------------------------- linear algebra
    A = (np.arange(12, dtype=np.float64).reshape(3, 4) - 5) / 3
    B = (np.arange(8, dtype=np.float64).reshape(4, 2) + 1) / 7
    s.add("dot_general", "f32", lambda: lax.dot(c(A.astype(np.float32)), c(B.astype(np.float32))), "ulp")
    s.add("dot_general", "f64", lambda: lax.dot(c(A), c(B)), "ulp")
    s.add("dot_general", "batched", lambda: jnp.einsum("bij,bjk->bik", c(a), c(np.swapaxes(a, 1, 2)[:, :, :2])), "ulp")
    img = (np.arange(2 * 3 * 5 * 5, dtype=np.float32).reshape(2, 3, 5, 5) % 7 - 3) / 2
    ker = (np.arange(4 * 3 * 3 * 3, dtype=np.float32).reshape(4, 3, 3, 3) % 5 - 2) / 4
    s.add("convolution", "f32", lambda: lax.conv(c(img), c(ker), (1, 1), "SAME"), "ulp")
    s.add("convolution", "f64_strided", lambda: lax.conv(c(img.astype(np.float64)), c(ker.astype(np.float64)), (2, 2), "VALID"), "ulp")
    s.add("convolution", "i32", lambda: lax.conv_general_dilated(c(img.astype(np.int32)), c(ker.astype(np.int32) + 1), (1, 1), "VALID", preferred_element_type=jnp.int32))
    s.add("convolution", "grouped", lambda: lax.conv_general_dilated(c(img[:, :2]), c(ker[:, :1]), (1, 1), "SAME", feature_group_count=2), "ulp")
    L = np.array([[2.0, 0, 0], [1.0, 3.0, 0], [-1.0, 0.5, 4.0]], np.float32)
    s.add("triangular_solve", "lower", lambda: lax.linalg.triangular_solve(c(L), c(np.ones((3, 2), np.float32)), left_side=True, lower=True), "ulp")

    # ------------------------------------------------------------ control flow
    s.add("while", "fori_sum", lambda: lax.fori_loop(0, 10, lambda i, acc: acc + i * 2.0, c(np.float32(0.5))))
    s.add("while", "two_carried", lambda: lax.while_loop(lambda st: st[0] < 100, lambda st: (st[0] * 3, st[1] + 1.5), (c(np.int32(1)), c(np.float32(0.0)))))
    s.add("while", "scan_cumprod", lambda: lax.scan(lambda carry, x: (carry * x, carry), c(np.float32(1.0)), c(np.array([2.0, 0.5, 3.0, -1.0], np.float32))))
    for k in [0, 2, 7, -1]:
        s.add("case", f"switch_{k}".replace("-", "m"), lambda k=k: lax.switch(c(np.int32(k)), [lambda x: x + 1.0, lambda x: x * 2.0, lambda x: -x], c(np.float32(3.0))))
    s.add("if", "cond_true", lambda: lax.cond(c(np.float32(2.0)) > 1.0, lambda x: x * 10.0, lambda x: x - 1.0, c(np.float32(0.5))))
    s.add("if", "cond_false", lambda: lax.cond(c(np.float32(0.0)) > 1.0, lambda x: x * 10.0, lambda x: x - 1.0, c(np.float32(0.5))))
    s.add("optimization_barrier", "two", lambda: lax.optimization_barrier((c(np.float32(1.5)), c(np.int32(3)))))

    # ---------------------------------------------------------------- random
    key = np.array([1, 2, 3, 4], dtype=np.uint32)
    # Spec: THREE_FRY and PHILOX states are ui64[2] (PHILOX also ui64[3]).
    for alg in ["THREE_FRY", "PHILOX"]:
        s.add("rng_bit_generator", alg.lower(), lambda alg=alg: lax.rng_bit_generator(c(key[:2].astype(np.uint64)) if alg == "THREE_FRY" else c(np.array([1, 2], np.uint64)), (2, 3), jnp.uint32, algorithm=getattr(lax.RandomAlgorithm, "RNG_" + alg)))
    s.add("random", "threefry_normal", lambda: jax.random.normal(jax.random.key(0), (5,), jnp.float32), "ulp")
    return s.cases


def generate(out, only):
    os.makedirs(out, exist_ok=True)
    manifest = []
    failed = []
    for name, op, fn, tol in build():
        if only and not any(o in name for o in only):
            continue
        try:
            text = jax.jit(fn).lower().as_text()
            res = jax.jit(fn)()
        except Exception as e:  # a case JAX itself rejects is a suite bug: report it
            failed.append(f"{name}: {type(e).__name__}: {str(e).splitlines()[0][:160]}")
            continue
        outs = res if isinstance(res, (tuple, list)) else [res]
        outs = jax.tree_util.tree_leaves(outs)
        with open(os.path.join(out, f"{name}.mlir"), "w") as f:
            f.write(text)
        for k, o in enumerate(outs):
            np.save(os.path.join(out, f"{name}.expected_{k}.npy"), np.asarray(o))
        manifest.append({"name": name, "op": op, "tol": tol, "outputs": len(outs)})
    with open(os.path.join(out, "manifest.json"), "w") as f:
        json.dump(manifest, f, indent=1)
    for line in failed:
        print(f"suite: JAX could not build {line}")
    print(f"conformance suite: {len(manifest)} cases written to {out} ({len(failed)} not buildable by JAX)")
    return manifest


def as_bits(a):
    """Values as comparable integers: floats by their bit pattern (ordered)."""
    a = np.asarray(a)
    if a.dtype.kind != "f" and a.dtype.name != "bfloat16":
        return None
    itype = {2: np.int16, 4: np.int32, 8: np.int64}[a.dtype.itemsize]
    bits = a.view(itype).astype(np.int64)
    # Map to a monotone integer line so that |bits_a - bits_b| counts ulps.
    sign_min = np.int64(np.iinfo(itype).min)
    return np.where(bits < 0, sign_min - bits, bits)


def load_npy(path):
    """An .npy file; bfloat16 arrays (saved by JAX as raw 2-byte records) as
    ml_dtypes.bfloat16."""
    a = np.load(path)
    if a.dtype.kind == "V" and a.dtype.itemsize == 2:
        import ml_dtypes

        a = a.view(ml_dtypes.bfloat16)
    return a


def compare(got, want, tol):
    """None when equal under `tol`, else a short description."""
    if want.dtype.name in ("bfloat16", "float16") and got.dtype == np.float32:
        # A 16-bit float written as float32 (certgrad's .npy writer has no
        # bfloat16 dtype) must hold values of the 16-bit type exactly.
        back = got.astype(want.dtype).astype(np.float32)
        if not np.array_equal(back, got, equal_nan=True):
            return f"float32 output holds values that are not {want.dtype.name}"
        got = got.astype(want.dtype)
    if got.shape != want.shape:
        return f"shape {got.shape} != {want.shape}"
    if got.dtype != want.dtype:
        return f"dtype {got.dtype} != {want.dtype}"
    if want.dtype.kind in "biu":
        bad = np.flatnonzero(got.ravel() != want.ravel())
        return None if bad.size == 0 else f"element {bad[0]}: {got.ravel()[bad[0]]} != {want.ravel()[bad[0]]}"
    g = got.astype(np.float64).ravel()
    w = want.astype(np.float64).ravel()
    nan_g, nan_w = np.isnan(g), np.isnan(w)
    if (nan_g != nan_w).any():
        i = np.flatnonzero(nan_g != nan_w)[0]
        return f"element {i}: {g[i]} vs {w[i]} (NaN mismatch)"
    keep = ~nan_w
    g, w = g[keep], w[keep]
    inf = np.isinf(w) | np.isinf(g)
    if (g[inf] != w[inf]).any():
        i = np.flatnonzero(inf)[np.flatnonzero(g[inf] != w[inf])[0]]
        return f"element {i}: {g[i]} vs {w[i]} (inf mismatch)"
    # XLA's CPU backend flushes subnormal results to zero (FTZ); the spec
    # does not, so a subnormal where JAX has a zero of the same sign is XLA's.
    tiny = float(jnp.finfo(want.dtype).tiny)
    ftz = (w == 0) & (np.abs(g) < tiny) & (np.signbit(g) == np.signbit(w))
    g = np.where(ftz, w, g)
    # Matching infinities were checked above; the measures below are for
    # finite values.
    fin = ~inf
    if tol == "exact":
        gb = as_bits(np.where(ftz, want.ravel()[keep], got.ravel()[keep]))
        wb = as_bits(want.ravel()[keep])
        bad = np.flatnonzero(gb != wb)
        return None if bad.size == 0 else f"element {bad[0]}: {g[bad[0]]!r} != {w[bad[0]]!r}"
    if tol == "ulp":
        gb = as_bits(np.where(ftz, want.ravel()[keep], got.ravel()[keep]))
        d = np.where(fin, np.abs(gb - as_bits(want.ravel()[keep])), 0)
        i = int(np.argmax(d)) if d.size else 0
        return None if d.size == 0 or d[i] <= ULP_BOUND else f"element {i}: {g[i]!r} vs {w[i]!r} ({d[i]} ulp)"
    with np.errstate(invalid="ignore"):
        rel = np.where(fin, np.abs(g - w) / np.maximum(np.abs(w), 1.0), 0.0)
    i = int(np.argmax(rel)) if rel.size else 0
    bound = APPROX[want.dtype.name]
    return None if rel.size == 0 or rel[i] <= bound else f"element {i}: {g[i]!r} vs {w[i]!r} (rel {rel[i]:.2e} > {bound})"


def run_all(out, manifest, certgrad, generic, known):
    results = []
    for case in manifest:
        name = case["name"]
        work = os.path.join(out, "certgrad_out", name)
        cmd = [certgrad, "run", os.path.join(out, f"{name}.mlir"), "--out", work]
        if generic:
            cmd.append("--generic")
        try:
            p = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
        except subprocess.TimeoutExpired:
            results.append((case, "WRONG", "timed out after 120 s"))
            continue
        if p.returncode != 0:
            msg = (p.stderr.strip() or p.stdout.strip() or f"exit {p.returncode}").splitlines()
            results.append((case, "UNSUPPORTED", msg[-1][:200] if msg else ""))
            continue
        why = None
        for k in range(case["outputs"]):
            want = load_npy(os.path.join(out, f"{name}.expected_{k}.npy"))
            path = os.path.join(work, f"out_{k}.npy")
            if not os.path.exists(path):
                why = f"no out_{k}.npy"
                break
            why = compare(load_npy(path), want, case["tol"])
            if why:
                why = f"output {k}: {why}"
                break
        results.append((case, "WRONG" if why else "PASS", why or ""))
    per_op = defaultdict(lambda: [0, 0, 0])
    unexpected = 0
    for case, status, why in results:
        per_op[case["op"]][("PASS", "WRONG", "UNSUPPORTED").index(status)] += 1
        if status != "PASS":
            note = ""
            if status == "WRONG":
                if case["name"] in known:
                    note = f"  [known: {known[case['name']]}]"
                else:
                    unexpected += 1
            print(f"{status:<11} {case['name']}: {why}{note}")
    print(f"\n{'op':<26} pass wrong unsupported")
    for op in sorted(per_op):
        p_, w_, u_ = per_op[op]
        print(f"{op:<26} {p_:>4} {w_:>5} {u_:>11}")
    tot = [sum(v[i] for v in per_op.values()) for i in range(3)]
    print(f"\nconformance{' (--generic)' if generic else ''}: {tot[0]} passed, {tot[1]} wrong "
          f"({unexpected} not known), {tot[2]} unsupported of {len(results)}")
    return unexpected


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", required=True)
    ap.add_argument("--certgrad")
    ap.add_argument("--generic", action="store_true")
    ap.add_argument("--generate-only", action="store_true")
    ap.add_argument("--reuse", action="store_true", help="reuse OUT/manifest.json")
    ap.add_argument("--only", nargs="*", default=[])
    args = ap.parse_args()
    if args.reuse and os.path.exists(os.path.join(args.out, "manifest.json")):
        manifest = json.load(open(os.path.join(args.out, "manifest.json")))
    else:
        manifest = generate(args.out, args.only)
    if args.generate_only:
        return 0
    known = {}
    kw = os.path.join(os.path.dirname(os.path.abspath(__file__)), "conformance_known_wrong.txt")
    if os.path.exists(kw):
        for line in open(kw):
            line = line.strip()
            if line and not line.startswith("#"):
                name, _, why = line.partition("#")
                known[name.strip()] = why.strip()
    return 1 if run_all(args.out, manifest, args.certgrad, args.generic, known) else 0


if __name__ == "__main__":
    sys.exit(main())
