#!/usr/bin/env python3
"""jax_export.py: the JAX side of certgrad's JAX oracle.

Owns the catalogue of oracle cases (convolutions, reduce_window, the
select_and_scatter of max-pool gradients, dot_general, an elementwise zoo,
data movement, and a whole cifar8-style train step) and, for each case,
writes into the output directory:

  CASE.mlir              jax.jit(f, keep_unused=True).lower(*inputs).as_text()
  CASE.in_K.npy          the K-th argument (float32, seeded numpy RNG)
  CASE.expected_K.npy    the K-th result of running the lowered module in JAX (f32)
  CASE.expected64_K.npy  the same function run by JAX with x64 enabled on the
                         float64-cast inputs: a reference to judge which side is
                         closer when certgrad and JAX-f32 disagree
  manifest.json          every case: files, thresholds, op counts

The float64 reference runs in a child process (`--reference64`), because JAX's
x64 switch must be set before any array is created to take effect reliably.

Run: python jax_export.py --out DIR   (see scripts/jax_check.sh)
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import time
import zlib
from dataclasses import dataclass
from typing import Callable

import numpy as np

if "--reference64" in sys.argv:
    # Must happen before jax is imported anywhere: x64 changes default dtypes.
    os.environ["JAX_ENABLE_X64"] = "1"

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
from jax import lax  # noqa: E402

# Thresholds (max relative error, norm-wise and element-wise; see compare_npy.py).
THRESHOLD_DEFAULT = 1e-4
THRESHOLD_TRAIN_STEP = 1e-4
THRESHOLD_DATA_MOVEMENT = 1e-5

NCHW = ("NCHW", "OIHW", "NCHW")
NHWC = ("NHWC", "HWIO", "NHWC")


# --------------------------------------------------------------------------
# Case catalogue
# --------------------------------------------------------------------------

InputMaker = Callable[[np.random.Generator], np.ndarray]


@dataclass
class Case:
    """One exported function with its inputs and its comparison threshold."""

    name: str
    group: str
    fn: Callable
    inputs: list[InputMaker]
    threshold: float = THRESHOLD_DEFAULT
    # Ops the export must contain for the case to test what its name says.
    must_contain: tuple[str, ...] = ()


def normal(*shape: int, scale: float = 1.0) -> InputMaker:
    return lambda rng: (scale * rng.standard_normal(shape)).astype(np.float32)


def positive(*shape: int) -> InputMaker:
    """Uniform in [0.1, 2): safe for log, sqrt, rsqrt and power bases."""
    return lambda rng: rng.uniform(0.1, 2.0, shape).astype(np.float32)


def scalar(value: float) -> InputMaker:
    return lambda rng: np.array(value, dtype=np.float32)


def one_hot(batch: int, classes: int) -> InputMaker:
    def make(rng: np.random.Generator) -> np.ndarray:
        labels = rng.integers(0, classes, batch)
        return np.eye(classes, dtype=np.float32)[labels]

    return make


CASES: list[Case] = []


def add(case: Case) -> None:
    assert all(c.name != case.name for c in CASES), f"duplicate case {case.name}"
    CASES.append(case)


# ---- convolutions ---------------------------------------------------------


def conv_fn(strides, padding, lhs_dilation=None, rhs_dilation=None, dn=NCHW, fgc=1, bgc=1):
    def f(x, w):
        return lax.conv_general_dilated(
            x,
            w,
            window_strides=strides,
            padding=padding,
            lhs_dilation=lhs_dilation,
            rhs_dilation=rhs_dilation,
            dimension_numbers=dn,
            feature_group_count=fgc,
            batch_group_count=bgc,
        )

    return f


def add_conv(name, x_shape, w_shape, **kw) -> None:
    add(
        Case(
            name,
            "conv",
            conv_fn(**kw),
            [normal(*x_shape), normal(*w_shape)],
            must_contain=("stablehlo.convolution",),
        )
    )


P1 = ((1, 1), (1, 1))
add_conv("conv_nchw_k3_s1_pad1_9x7", (2, 3, 9, 7), (4, 3, 3, 3), strides=(1, 1), padding=P1)
add_conv("conv_nchw_k3_s2_pad1_9x7", (2, 3, 9, 7), (4, 3, 3, 3), strides=(2, 2), padding=P1)
add_conv("conv_nchw_k3_s4_valid_12x11", (2, 2, 12, 11), (3, 2, 3, 3), strides=(4, 4), padding="VALID")
add_conv(
    "conv_nchw_k3_s1_pad_asym_01_21_8x6",
    (2, 3, 8, 6),
    (5, 3, 3, 3),
    strides=(1, 1),
    padding=((0, 1), (2, 1)),
)
add_conv(
    "conv_nchw_k3_s1_pad_negative_8x9",
    (2, 2, 8, 9),
    (3, 2, 3, 3),
    strides=(1, 1),
    padding=((-1, 0), (0, -1)),
)
add_conv("conv_nchw_k3_s1_same_9x7", (2, 3, 9, 7), (4, 3, 3, 3), strides=(1, 1), padding="SAME")
# An even kernel with stride 2 makes XLA-SAME padding asymmetric (low < high).
add_conv("conv_nchw_k4_s2_same_9x7", (2, 3, 9, 7), (4, 3, 4, 4), strides=(2, 2), padding="SAME")
add_conv("conv_nchw_k2x3_s1_valid_5x8", (2, 3, 5, 8), (2, 3, 2, 3), strides=(1, 1), padding="VALID")
add_conv("conv_nchw_k1_s2_valid_7x6", (2, 4, 7, 6), (3, 4, 1, 1), strides=(2, 2), padding="VALID")
# lhs_dilation is how a transposed (fractionally strided) convolution is written.
add_conv(
    "conv_nchw_k3_lhs_dil2_pad1_5x6",
    (2, 4, 5, 6),
    (3, 4, 3, 3),
    strides=(1, 1),
    padding=P1,
    lhs_dilation=(2, 2),
)
add_conv(
    "conv_nchw_k4_lhs_dil2_pad_asym_5x5",
    (2, 2, 5, 5),
    (3, 2, 4, 4),
    strides=(1, 1),
    padding=((2, 1), (1, 2)),
    lhs_dilation=(2, 2),
)
add_conv(
    "conv_nchw_k3_rhs_dil2_pad2_10x9",
    (2, 3, 10, 9),
    (4, 3, 3, 3),
    strides=(1, 1),
    padding=((2, 2), (2, 2)),
    rhs_dilation=(2, 2),
)
add_conv(
    "conv_nchw_k3_rhs_dil21_s21_valid_11x7",
    (2, 3, 11, 7),
    (2, 3, 3, 3),
    strides=(2, 1),
    padding="VALID",
    rhs_dilation=(2, 1),
)
add_conv(
    "conv_nchw_k3_groups2_pad1_8x7",
    (2, 4, 8, 7),
    (6, 2, 3, 3),
    strides=(1, 1),
    padding=P1,
    fgc=2,
)
add_conv(
    "conv_nchw_k3_depthwise4_s2_pad1_7x8",
    (2, 4, 7, 8),
    (4, 1, 3, 3),
    strides=(2, 2),
    padding=P1,
    fgc=4,
)
add_conv(
    "conv_nchw_k3_depthwise3_mult2_valid_6x6",
    (2, 3, 6, 6),
    (6, 1, 3, 3),
    strides=(1, 1),
    padding="VALID",
    fgc=3,
)
add_conv(
    "conv_nchw_k3_batch_groups2_valid_6x7",
    (4, 3, 6, 7),
    (4, 3, 3, 3),
    strides=(1, 1),
    padding="VALID",
    bgc=2,
)
add_conv("conv_nhwc_hwio_k3_s2_same_9x7", (2, 9, 7, 3), (3, 3, 3, 4), strides=(2, 2), padding="SAME", dn=NHWC)
add_conv(
    "conv_nhwc_hwio_k3_groups2_pad_asym_8x6",
    (2, 8, 6, 4),
    (3, 3, 2, 6),
    strides=(1, 1),
    padding=((1, 0), (0, 1)),
    dn=NHWC,
    fgc=2,
)
add_conv(
    "conv_nchw_in_nhwc_out_k3_pad1_6x5",
    (2, 3, 6, 5),
    (4, 3, 3, 3),
    strides=(1, 1),
    padding=P1,
    dn=("NCHW", "OIHW", "NHWC"),
)
add_conv("conv1d_nch_k3_s2_pad1_11", (2, 3, 11), (4, 3, 3), strides=(2,), padding=((1, 1),), dn=("NCH", "OIH", "NCH"))


def conv_transpose_api(x, w):
    return lax.conv_transpose(x, w, strides=(2, 2), padding="SAME", dimension_numbers=NCHW)


add(
    Case(
        "conv_transpose_api_k3_s2_same_5x6",
        "conv",
        conv_transpose_api,
        [normal(2, 3, 5, 6), normal(4, 3, 3, 3)],
        must_contain=("stablehlo.convolution",),
    )
)


def conv_vjp_case(name, x_shape, w_shape, wrt, must_contain, **kw) -> None:
    """The VJP of a conv w.r.t. its kernel (wrt=1) or input (wrt=0), with the
    output cotangent as an argument: JAX writes these as convolutions too
    (kernel gradients of grouped convs carry batch_group_count)."""
    forward = conv_fn(**kw)

    def f(x, w, ct):
        _, pullback = jax.vjp(forward, x, w)
        return pullback(ct)[wrt]

    out_shape = jax.eval_shape(forward, jnp.zeros(x_shape, jnp.float32), jnp.zeros(w_shape, jnp.float32)).shape
    add(
        Case(
            name,
            "conv",
            f,
            [normal(*x_shape), normal(*w_shape), normal(*out_shape)],
            must_contain=must_contain,
        )
    )


conv_vjp_case(
    "conv_grad_kernel_k3_pad1_8x7",
    (2, 3, 8, 7),
    (4, 3, 3, 3),
    wrt=1,
    must_contain=("stablehlo.convolution",),
    strides=(1, 1),
    padding=P1,
)
conv_vjp_case(
    "conv_grad_kernel_groups2_batch_groups2_8x7",
    (2, 4, 8, 7),
    (6, 2, 3, 3),
    wrt=1,
    must_contain=("stablehlo.convolution", "batch_group_count = 2"),
    strides=(1, 1),
    padding=P1,
    fgc=2,
)
conv_vjp_case(
    "conv_grad_kernel_depthwise4_s2_batch_groups4_7x8",
    (2, 4, 7, 8),
    (4, 1, 3, 3),
    wrt=1,
    must_contain=("stablehlo.convolution", "batch_group_count = 4"),
    strides=(2, 2),
    padding=P1,
    fgc=4,
)
conv_vjp_case(
    "conv_grad_input_k3_s2_pad1_9x7",
    (2, 3, 9, 7),
    (4, 3, 3, 3),
    wrt=0,
    must_contain=("stablehlo.convolution", "lhs_dilate = [2, 2]"),
    strides=(2, 2),
    padding=P1,
)

# ---- reduce_window and select_and_scatter --------------------------------

NEG_INF = -np.inf  # a Python float: lax recognises (max, -inf) as the max monoid


def max_pool_2x2_s2(x):
    return lax.reduce_window(x, NEG_INF, lax.max, (1, 1, 2, 2), (1, 1, 2, 2), "VALID")


def max_pool_3x3_s2_pad1(x):
    return lax.reduce_window(x, NEG_INF, lax.max, (1, 1, 3, 3), (1, 1, 2, 2), ((0, 0), (0, 0), (1, 1), (1, 1)))


def avg_pool_3x3_s2_pad1(x):
    # count_include_pad average: a zero-padded window sum over the full size.
    summed = lax.reduce_window(x, 0.0, lax.add, (1, 1, 3, 3), (1, 1, 2, 2), ((0, 0), (0, 0), (1, 1), (1, 1)))
    return summed / 9.0


def max_window_dilated(x):
    return lax.reduce_window(
        x,
        NEG_INF,
        lax.max,
        (1, 1, 2, 2),
        (1, 1, 1, 2),
        ((0, 0), (0, 0), (0, 1), (1, 0)),
        base_dilation=(1, 1, 2, 1),
        window_dilation=(1, 1, 1, 2),
    )


def sum_window_nhwc(x):
    return lax.reduce_window(x, 0.0, lax.add, (1, 3, 2, 1), (1, 1, 2, 1), "SAME")


for name, fn, shape in (
    ("reduce_window_max_pool_2x2_s2_8x6", max_pool_2x2_s2, (2, 3, 8, 6)),
    ("reduce_window_max_pool_3x3_s2_pad1_9x7", max_pool_3x3_s2_pad1, (2, 3, 9, 7)),
    ("reduce_window_avg_pool_3x3_s2_pad1_9x7", avg_pool_3x3_s2_pad1, (2, 3, 9, 7)),
    ("reduce_window_max_base_dil_window_dil_6x7", max_window_dilated, (2, 2, 6, 7)),
    ("reduce_window_sum_nhwc_3x2_same_7x6", sum_window_nhwc, (2, 7, 6, 3)),
):
    add(Case(name, "reduce_window", fn, [normal(*shape)], must_contain=("stablehlo.reduce_window",)))


def pool_vjp(pool):
    def f(x, ct):
        _, pullback = jax.vjp(pool, x)
        return pullback(ct)[0]

    return f


add(
    Case(
        "select_and_scatter_max_pool_2x2_s2_grad_8x6",
        "select_and_scatter",
        pool_vjp(max_pool_2x2_s2),
        [normal(2, 3, 8, 6), normal(2, 3, 4, 3)],
        must_contain=("stablehlo.select_and_scatter",),
    )
)
add(
    Case(
        "select_and_scatter_max_pool_3x3_s2_pad1_grad_9x7",
        "select_and_scatter",
        pool_vjp(max_pool_3x3_s2_pad1),
        [normal(2, 3, 9, 7), normal(2, 3, 5, 4)],
        must_contain=("stablehlo.select_and_scatter",),
    )
)

# ---- dot_general ----------------------------------------------------------

DOT = ("stablehlo.dot_general",)
add(Case("dot_matmul_5x7_7x3", "dot", jnp.matmul, [normal(5, 7), normal(7, 3)], must_contain=DOT))
add(
    Case(
        "dot_matmul_precision_highest_6x4_4x5",
        "dot",
        lambda a, b: lax.dot(a, b, precision=lax.Precision.HIGHEST),
        [normal(6, 4), normal(4, 5)],
        must_contain=DOT,
    )
)
add(Case("dot_matvec_6x5_5", "dot", jnp.dot, [normal(6, 5), normal(5)], must_contain=DOT))
add(
    Case(
        "dot_einsum_bij_bjk_bik",
        "dot",
        lambda a, b: jnp.einsum("bij,bjk->bik", a, b),
        [normal(3, 4, 5), normal(3, 5, 6)],
        must_contain=DOT,
    )
)
add(
    Case(
        "dot_einsum_bij_bkj_bik",
        "dot",
        lambda a, b: jnp.einsum("bij,bkj->bik", a, b),
        [normal(3, 4, 5), normal(3, 6, 5)],
        must_contain=DOT,
    )
)
add(
    Case(
        "dot_contract_two_dims_456_563",
        "dot",
        lambda a, b: lax.dot_general(a, b, (((1, 2), (0, 1)), ((), ()))),
        [normal(4, 5, 6), normal(5, 6, 3)],
        must_contain=DOT,
    )
)
add(
    Case(
        "dot_batch_dim_in_middle_534_436",
        "dot",
        lambda a, b: lax.dot_general(a, b, (((2,), (0,)), ((1,), (1,)))),
        [normal(5, 3, 4), normal(4, 3, 6)],
        must_contain=DOT,
    )
)

# ---- elementwise zoo -------------------------------------------------------

S = (3, 4, 5)  # shape of the elementwise cases


def ew(name, fn, inputs, must_contain=(), threshold=THRESHOLD_DEFAULT) -> None:
    add(Case("ew_" + name, "elementwise", fn, inputs, threshold, must_contain))


ew("exp", jnp.exp, [normal(*S)], ("stablehlo.exponential",))
ew("log", jnp.log, [positive(*S)], ("stablehlo.log",))
ew("tanh", jnp.tanh, [normal(*S, scale=2.0)], ("stablehlo.tanh",))
# jax 0.10 lowers lax.logistic to negate/exponential/add/divide, not stablehlo.logistic.
ew("logistic", lax.logistic, [normal(*S, scale=3.0)], ("stablehlo.exponential",))
ew("rsqrt", lax.rsqrt, [positive(*S)], ("stablehlo.rsqrt",))
ew("sqrt", jnp.sqrt, [positive(*S)], ("stablehlo.sqrt",))
ew("power", lax.pow, [positive(*S), normal(*S)], ("stablehlo.power",))
ew("abs", jnp.abs, [normal(*S)], ("stablehlo.abs",))
ew("sign", jnp.sign, [normal(*S)], ("stablehlo.sign",))
ew(
    "maximum_minimum_two_outputs",
    lambda a, b: (jnp.maximum(a, b), jnp.minimum(a, b)),
    [normal(*S), normal(*S)],
    ("stablehlo.maximum", "stablehlo.minimum"),
)
ew(
    "arithmetic_add_sub_mul_div_neg",
    lambda a, b: -(a + b) * (a - b) / (jnp.abs(b) + 0.5),
    [normal(*S), normal(*S)],
    ("stablehlo.add", "stablehlo.subtract", "stablehlo.multiply", "stablehlo.divide", "stablehlo.negate"),
)
ew("square", jnp.square, [normal(*S)])
ew(
    "compare_select",
    lambda a, b: lax.select(a > b, a, 2.0 * b),
    [normal(*S), normal(*S)],
    ("stablehlo.compare", "stablehlo.select"),
)
# jnp.where lowers through a private helper reached by func.call.
ew(
    "where_via_func_call",
    lambda a, b: jnp.where(a <= b, a * b, a - b),
    [normal(*S), normal(*S)],
    ("stablehlo.select", "call @"),
)
ew("clamp", lambda x: lax.clamp(-0.5, x, 0.75), [normal(*S)], ("stablehlo.clamp",))
ew("erf", lax.erf, [normal(*S)], ("chlo.erf",))
# jax 0.10's exact GELU is written with erfc (chlo.erfc), not erf.
ew("gelu_exact_erfc", lambda x: jax.nn.gelu(x, approximate=False), [normal(*S, scale=2.0)], ("chlo.erfc",))
ew("gelu_tanh", lambda x: jax.nn.gelu(x, approximate=True), [normal(*S, scale=2.0)], ("stablehlo.tanh",))
ew("softmax_last_axis", lambda x: jax.nn.softmax(x, axis=-1), [normal(*S, scale=3.0)], ("stablehlo.reduce",))
ew("log_softmax_axis1", lambda x: jax.nn.log_softmax(x, axis=1), [normal(*S, scale=3.0)], ("stablehlo.reduce",))
ew(
    "reduce_sum_axes02_max_axis1",
    lambda x: (jnp.sum(x, axis=(0, 2)), jnp.max(x, axis=1)),
    [normal(*S)],
    ("stablehlo.reduce",),
)
ew(
    "iota_add",
    lambda x: x + lax.broadcasted_iota(x.dtype, x.shape, 1) * 0.25,
    [normal(*S)],
    ("stablehlo.iota",),
)
ew(
    "iota_int_compare_one_hot",
    lambda x: jnp.where(lax.broadcasted_iota(jnp.int32, (4, 6), 1) == jnp.int32(2), x, 0.0),
    [normal(4, 6)],
    ("stablehlo.iota",),
)

# ---- data movement (exact ops: tighter threshold) --------------------------


def dm(name, fn, inputs, must_contain=()) -> None:
    add(Case("dm_" + name, "data_movement", fn, inputs, THRESHOLD_DATA_MOVEMENT, must_contain))


dm(
    "concatenate_axis1",
    lambda a, b: jnp.concatenate([a, b, a], axis=1),
    [normal(2, 3, 4), normal(2, 5, 4)],
    ("stablehlo.concatenate",),
)
dm(
    "pad_interior_negative_low",
    lambda x: lax.pad(x, jnp.array(0.5, x.dtype), ((1, 2, 1), (-1, 1, 2))),
    [normal(4, 5)],
    ("stablehlo.pad",),
)
dm("reverse_axes02", lambda x: lax.rev(x, (0, 2)), [normal(*S)], ("stablehlo.reverse",))
dm("slice_strided", lambda x: lax.slice(x, (0, 1), (5, 7), (2, 3)), [normal(6, 8)], ("stablehlo.slice",))
dm("transpose_201", lambda x: jnp.transpose(x, (2, 0, 1)), [normal(*S)], ("stablehlo.transpose",))
dm(
    "broadcast_in_dim",
    lambda x: lax.broadcast_in_dim(x, (2, 3, 4, 5), (1, 3)),
    [normal(3, 5)],
    ("stablehlo.broadcast_in_dim",),
)
dm("reshape_345_to_15x4", lambda x: x.reshape(15, 4), [normal(*S)], ("stablehlo.reshape",))
dm(
    "convert_f32_bf16_f32",
    lambda x: x.astype(jnp.bfloat16).astype(x.dtype),
    [normal(*S, scale=100.0)],
    ("stablehlo.convert",),
)
dm(
    "jnp_flip_pad_via_func_call",
    lambda x: jnp.pad(jnp.flip(x, 1), ((1, 0), (2, 1))),
    [normal(4, 5)],
    ("call @",),
)

# ---- the cifar8-style train step ------------------------------------------

CIFAR8_BATCH = 32
CIFAR8_STAGES = ((16, 16), (16, 16), (32, 32), (32, 32))
CIFAR8_DENSE = (128, 64, 64, 10)
BN_EPS = 1e-5


def cifar8_param_makers() -> list[tuple[str, InputMaker]]:
    """Parameters in argument order: per conv layer (w OIHW, b, gamma, beta),
    then per dense layer (W [in,out], b). Weights are He-normal. Biases and BN
    parameters get small random values rather than 0/1: with batch-statistic
    BN the conv bias gradient is exactly 0 in real arithmetic, so a zero bias
    would make θ' pure rounding noise that no two engines agree on; nonzero
    values keep every θ' dominated by θ, which is what the comparison can judge."""
    makers: list[tuple[str, InputMaker]] = []
    cin = 3
    layer = 0
    for stage in CIFAR8_STAGES:
        for cout in stage:
            std = float(np.sqrt(2.0 / (cin * 9)))
            makers += [
                (f"conv{layer}_w", normal(cout, cin, 3, 3, scale=std)),
                (f"conv{layer}_b", normal(cout, scale=0.1)),
                (f"bn{layer}_gamma", lambda rng, c=cout: (1.0 + 0.1 * rng.standard_normal(c)).astype(np.float32)),
                (f"bn{layer}_beta", normal(cout, scale=0.1)),
            ]
            cin = cout
            layer += 1
    for i, (fan_in, fan_out) in enumerate(zip(CIFAR8_DENSE[:-1], CIFAR8_DENSE[1:])):
        makers += [
            (f"dense{i}_w", normal(fan_in, fan_out, scale=float(np.sqrt(2.0 / fan_in)))),
            (f"dense{i}_b", normal(fan_out, scale=0.1)),
        ]
    return makers


CIFAR8_PARAMS = cifar8_param_makers()


def conv_bn_relu(x, w, b, gamma, beta):
    y = lax.conv_general_dilated(x, w, (1, 1), P1, dimension_numbers=NCHW)
    y = y + b[None, :, None, None]
    mean = jnp.mean(y, axis=(0, 2, 3), keepdims=True)
    var = jnp.mean(jnp.square(y - mean), axis=(0, 2, 3), keepdims=True)  # biased
    y = (y - mean) * lax.rsqrt(var + BN_EPS)
    return jax.nn.relu(y * gamma[None, :, None, None] + beta[None, :, None, None])


def cifar8_loss(params, x_flat, one_hot_labels):
    x = x_flat.reshape(CIFAR8_BATCH, 3, 32, 32)
    k = 0
    for stage in CIFAR8_STAGES:
        for _ in stage:
            x = conv_bn_relu(x, *params[k : k + 4])
            k += 4
        x = max_pool_2x2_s2(x)
    h = x.reshape(CIFAR8_BATCH, -1)
    n_dense = len(CIFAR8_DENSE) - 1
    for i in range(n_dense):
        h = h @ params[k] + params[k + 1]
        k += 2
        if i + 1 < n_dense:
            h = jax.nn.relu(h)
    log_probs = jax.nn.log_softmax(h, axis=-1)
    return -jnp.mean(jnp.sum(one_hot_labels * log_probs, axis=-1))


def cifar8_train_step(x_flat, *rest):
    """(x, params..., lr, onehot) -> (new params..., loss): one SGD step."""
    n = len(CIFAR8_PARAMS)
    params, lr, one_hot_labels = list(rest[:n]), rest[n], rest[n + 1]
    loss, grads = jax.value_and_grad(cifar8_loss)(params, x_flat, one_hot_labels)
    return (*[p - lr * g for p, g in zip(params, grads)], loss)


add(
    Case(
        "train_step_cifar8_batch_bn_sgd",
        "train_step",
        cifar8_train_step,
        [normal(CIFAR8_BATCH, 3 * 32 * 32)]
        + [maker for _, maker in CIFAR8_PARAMS]
        + [scalar(0.05), one_hot(CIFAR8_BATCH, 10)],
        THRESHOLD_TRAIN_STEP,
        must_contain=(
            "stablehlo.convolution",
            "stablehlo.reduce_window",
            "stablehlo.select_and_scatter",
            "stablehlo.dot_general",
            "stablehlo.reduce",
            "stablehlo.broadcast_in_dim",
            "stablehlo.rsqrt",
        ),
    )
)


# --------------------------------------------------------------------------
# Export
# --------------------------------------------------------------------------

OP_NAME = re.compile(r"\b((?:stablehlo|chlo)\.[a-z_0-9]+)")


def op_counts(text: str) -> dict[str, int]:
    """Count stablehlo.* / chlo.* op names (and func.call) in MLIR text.
    Region shorthands (`applies stablehlo.add`) count as uses of that op."""
    counts: dict[str, int] = {}
    for m in OP_NAME.finditer(text):
        counts[m.group(1)] = counts.get(m.group(1), 0) + 1
    calls = len(re.findall(r"\bcall @", text))
    if calls:
        counts["func.call"] = calls
    return dict(sorted(counts.items()))


def case_seed(name: str) -> int:
    # Derived from the name so a case's inputs do not depend on catalogue order.
    return zlib.crc32(name.encode())


def select_cases(filters: list[str]) -> list[Case]:
    return [c for c in CASES if not filters or any(f in c.name for f in filters)]


def export_case(case: Case, out: str) -> dict:
    rng = np.random.default_rng(case_seed(case.name))
    inputs = [make(rng) for make in case.inputs]
    lowered = jax.jit(case.fn, keep_unused=True).lower(*inputs)
    text = lowered.as_text()
    outputs = jax.tree_util.tree_leaves(lowered.compile()(*inputs))

    mlir_file = f"{case.name}.mlir"
    with open(os.path.join(out, mlir_file), "w") as fh:
        fh.write(text)
    input_files = []
    for k, arr in enumerate(inputs):
        input_files.append(f"{case.name}.in_{k}.npy")
        np.save(os.path.join(out, input_files[-1]), arr)
    expected_files = []
    for k, arr in enumerate(outputs):
        expected_files.append(f"{case.name}.expected_{k}.npy")
        np.save(os.path.join(out, expected_files[-1]), np.asarray(arr))

    missing = [op for op in case.must_contain if op not in text]
    for op in missing:
        print(f"WARNING: {case.name}: export does not contain {op!r}", file=sys.stderr)
    return {
        "name": case.name,
        "group": case.group,
        "file": mlir_file,
        "func": "main",
        "inputs": input_files,
        "expected": expected_files,
        "expected64": [f"{case.name}.expected64_{k}.npy" for k in range(len(outputs))],
        "threshold": case.threshold,
        "ops": op_counts(text),
        "missing_ops": missing,
    }


def export_all(out: str, filters: list[str]) -> int:
    os.makedirs(out, exist_ok=True)
    # Marks the directory as ours, so jax_check.sh may clear it before a re-export.
    open(os.path.join(out, ".certgrad_jax_cases"), "w").close()
    entries = []
    t0 = time.time()
    for case in select_cases(filters):
        entry = export_case(case, out)
        entries.append(entry)
        ops = " ".join(f"{k.removeprefix('stablehlo.')}:{v}" for k, v in entry["ops"].items())
        print(f"exported {case.name}: {len(entry['inputs'])} in, {len(entry['expected'])} out | {ops}")
    print(f"exported {len(entries)} cases in {time.time() - t0:.1f}s (jax {jax.__version__})")

    # The float64 reference: a child process with x64 enabled from the start.
    t1 = time.time()
    cmd = [sys.executable, os.path.abspath(__file__), "--reference64", "--out", out, *filters]
    if subprocess.run(cmd).returncode != 0:
        print("ERROR: float64 reference run failed", file=sys.stderr)
        return 1
    print(f"float64 references in {time.time() - t1:.1f}s")

    manifest = {
        "jax_version": jax.__version__,
        "jaxlib_version": getattr(__import__("jaxlib"), "__version__", "?"),
        "metric": "max over outputs of norm-wise |a-b|/|b| and element-wise "
        "max|a-b|/max(|b|, 1e-6*max|b|); a case passes when both are <= threshold",
        "cases": entries,
    }
    with open(os.path.join(out, "manifest.json"), "w") as fh:
        json.dump(manifest, fh, indent=1)
    missing = sum(bool(e["missing_ops"]) for e in entries)
    if missing:
        print(f"WARNING: {missing} case(s) lack an op their name promises (see above)", file=sys.stderr)
    return 0


def reference64(out: str, filters: list[str]) -> int:
    """Run every case in float64 on its saved float32 inputs (cast up)."""
    assert jax.config.jax_enable_x64, "x64 must be enabled for the reference run"
    for case in select_cases(filters):
        inputs = []
        for k in range(len(case.inputs)):
            arr = np.load(os.path.join(out, f"{case.name}.in_{k}.npy"))
            inputs.append(arr.astype(np.float64) if arr.dtype == np.float32 else arr)
        outputs = jax.tree_util.tree_leaves(jax.jit(case.fn)(*inputs))
        for k, arr in enumerate(outputs):
            arr = np.asarray(arr)
            if arr.dtype.kind == "f":
                arr = arr.astype(np.float64)
            np.save(os.path.join(out, f"{case.name}.expected64_{k}.npy"), arr)
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", required=True, help="output directory")
    parser.add_argument("--reference64", action="store_true", help="(internal) write the float64 references")
    parser.add_argument("--list", action="store_true", help="list case names and exit")
    parser.add_argument("filters", nargs="*", help="only cases whose name contains one of these")
    args = parser.parse_args()
    if args.list:
        for case in select_cases(args.filters):
            print(case.name)
        return 0
    if args.reference64:
        return reference64(args.out, args.filters)
    return export_all(args.out, args.filters)


if __name__ == "__main__":
    sys.exit(main())
