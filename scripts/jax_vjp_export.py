"""jax_vjp_export.py: the JAX side of certgrad's check-vjp evidence.

Owns the (forward, backward) pairs `certgrad check-vjp` is judged on. For each
forward function f(a0..an) -> y it writes, as StableHLO text
(`jax.jit(g, keep_unused=True).lower(...).as_text()`):

  CASE.fwd.mlir      f
  CASE.jax.mlir      b(a.., dy) = jax.vjp(f, a..)[1](dy)        expected: certified
  CASE.ok.mlir       a hand-written backward in jnp             expected: certified
  CASE.bug.mlir      its twin with one realistic, shape-preserving bug
                                                                expected: refuted

and OUT/manifest.json listing them. Integer arguments (labels) take no
cotangent: their backward returns cotangents of the float arguments only.

Run: python jax_vjp_export.py --out DIR   (see scripts/jax_vjp_check.sh)
"""

import argparse
import json
import math
import os

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

F32 = np.float32


def f32(*shape):
    return jax.ShapeDtypeStruct(shape, jnp.float32)


def i32(*shape):
    return jax.ShapeDtypeStruct(shape, jnp.int32)


# ---------------------------------------------------------------- helpers


def window_slices(x, k, s, out_hw):
    """Yield (i, j, x[:, :, i::s, j::s] cropped to out_hw) for each window offset."""
    ho, wo = out_hw
    for i in range(k):
        for j in range(k):
            yield i, j, x[:, :, i : i + s * (ho - 1) + 1 : s, j : j + s * (wo - 1) + 1 : s]


def place(t, i, j, s, hw):
    """Put t [N,C,Ho,Wo] at rows i, i+s, … and cols j, j+s, … of an hw canvas
    (lax.pad with interior padding: a dilation, no scatter)."""
    ho, wo = t.shape[2], t.shape[3]
    h, w = hw
    cfg = [(0, 0, 0), (0, 0, 0), (i, h - i - (s * (ho - 1) + 1), s - 1), (j, w - j - (s * (wo - 1) + 1), s - 1)]
    return lax.pad(t, jnp.zeros((), t.dtype), cfg)


def conv(x, w, s, pad):
    return lax.conv_general_dilated(x, w, (s, s), pad, dimension_numbers=("NCHW", "OIHW", "NCHW"))


def conv_bwd(x, w, dy, s, pad, crop_shift=0):
    """Hand-written conv VJP: per kernel offset, dW by einsum over strided
    slices of the padded input, dx by placing dy·W back and cropping the pad."""
    k = w.shape[2]
    (pt, pb), (pl, pr) = pad
    xp = jnp.pad(x, ((0, 0), (0, 0), (pt, pb), (pl, pr)))
    hp, wp = xp.shape[2], xp.shape[3]
    out_hw = dy.shape[2:]
    dxp = jnp.zeros(xp.shape, x.dtype)
    dws = []
    for i, j, xs in window_slices(xp, k, s, out_hw):
        dws.append(jnp.einsum("nohw,nihw->oi", dy, xs))
        dxp = dxp + place(jnp.einsum("nohw,oi->nihw", dy, w[:, :, i, j]), i, j, s, (hp, wp))
    dw = jnp.stack(dws, axis=-1).reshape(w.shape)
    r0, c0 = pt + crop_shift, pl + crop_shift
    dx = dxp[:, :, r0 : r0 + x.shape[2], c0 : c0 + x.shape[3]]
    return dx, dw


def maxpool(x, k, s):
    return lax.reduce_window(x, -jnp.inf, lax.max, (1, 1, k, k), (1, 1, s, s), "VALID")


def maxpool_bwd(x, dy, k, s, assign=False):
    y = maxpool(x, k, s)
    hw = x.shape[2:]
    dx = jnp.zeros_like(x)
    for i, j, xs in window_slices(x, k, s, y.shape[2:]):
        contrib = place(jnp.where(xs == y, dy, 0.0), i, j, s, hw)
        if assign:
            covered = place(jnp.ones_like(dy), i, j, s, hw) > 0
            dx = jnp.where(covered, contrib, dx)  # BUG: overwrites overlapping windows
        else:
            dx = dx + contrib
    return dx


def bn(x, g, b, eps=1e-5):
    mu = jnp.mean(x, axis=(0, 2, 3), keepdims=True)
    var = jnp.mean((x - mu) ** 2, axis=(0, 2, 3), keepdims=True)
    xhat = (x - mu) * lax.rsqrt(var + eps)
    return g[None, :, None, None] * xhat + b[None, :, None, None]


def bn_bwd(x, g, b, dy, eps=1e-5, bug=False):
    mu = jnp.mean(x, axis=(0, 2, 3), keepdims=True)
    var = jnp.mean((x - mu) ** 2, axis=(0, 2, 3), keepdims=True)
    rstd = lax.rsqrt(var + eps)
    xhat = (x - mu) * rstd
    mdy = 0.0 if bug else jnp.mean(dy, axis=(0, 2, 3), keepdims=True)  # BUG: no mean term
    dx = g[None, :, None, None] * rstd * (dy - mdy - xhat * jnp.mean(dy * xhat, axis=(0, 2, 3), keepdims=True))
    return dx, jnp.sum(dy * xhat, axis=(0, 2, 3)), jnp.sum(dy, axis=(0, 2, 3))


# ---------------------------------------------------------------- cases
# name: (f, arg specs, hand backward(args..., dy, bug) -> tuple, description of the bug)

CASES = {}


def case(name, f, specs, bwd, bug):
    CASES[name] = (f, specs, bwd, bug)


# 1. Overlapping 3x3/s2 max pool.
case(
    "maxpool_overlap",
    lambda x: maxpool(x, 3, 2),
    [f32(2, 3, 9, 9)],
    lambda x, dy, bug: (maxpool_bwd(x, dy, 3, 2, assign=bug),),
    "max-pool backward assigns instead of accumulating on overlapping windows",
)

# 2. Conv 3x3/s2 VALID at odd input size 9: the last row is used by the last window.
case(
    "conv_odd_last_row",
    lambda x, w: conv(x, w, 2, [(0, 0), (0, 0)]),
    [f32(2, 3, 9, 9), f32(4, 3, 3, 3)],
    lambda x, w, dy, bug: (
        lambda dx_dw: (dx_dw[0] * (jnp.arange(9) < 8).astype(F32)[:, None] if bug else dx_dw[0], dx_dw[1])
    )(conv_bwd(x, w, dy, 2, ((0, 0), (0, 0)))),
    "conv backward at odd input size drops the last input row",
)

# 3. XLA-SAME strided conv (pad lo 0, hi 1 at H=8, k=3, s=2): crop shifted.
case(
    "conv_same_strided",
    lambda x, w: conv(x, w, 2, "SAME"),
    [f32(2, 3, 8, 8), f32(4, 3, 3, 3)],
    lambda x, w, dy, bug: conv_bwd(x, w, dy, 2, ((0, 1), (0, 1)), crop_shift=1 if bug else 0),
    "SAME strided conv input-VJP with the padding shifted the wrong way",
)

# 4. Batch norm (training statistics).
case(
    "batchnorm",
    bn,
    [f32(4, 3, 5, 5), f32(3), f32(3)],
    lambda x, g, b, dy, bug: bn_bwd(x, g, b, dy, bug=bug),
    "BN backward missing the mean term",
)

# 5. ReLU6.
case(
    "relu6",
    lambda x: jnp.minimum(jnp.maximum(x, 0.0), 6.0),
    [f32(4, 64)],
    lambda x, dy, bug: (jnp.where((x > 0) if bug else ((x > 0) & (x < 6)), dy, 0.0),),
    "ReLU6 mask without the upper bound",
)

# 6. Dense with a square weight.
case(
    "dense_square",
    lambda x, w, b: x @ w + b,
    [f32(4, 8), f32(8, 8), f32(8)],
    lambda x, w, b, dy, bug: (dy @ (w if bug else w.T), x.T @ dy, jnp.sum(dy, axis=0)),
    "dense backward with W instead of W^T on a square W",
)


# 7. Single-head attention softmax(QK^T/sqrt(d)) V.
def attention(q, k, v):
    d = q.shape[-1]
    return jax.nn.softmax(q @ k.T / math.sqrt(d), axis=-1) @ v


def attention_bwd(q, k, v, do, bug):
    d = q.shape[-1]
    p = jax.nn.softmax(q @ k.T / math.sqrt(d), axis=-1)
    dv = p.T @ do
    dp = do @ v.T
    ds = p * (dp - jnp.sum(dp * p, axis=-1, keepdims=True))
    dq = ds @ k if bug else ds @ k / math.sqrt(d)  # BUG: no 1/sqrt(d)
    dk = ds.T @ q / math.sqrt(d)
    return dq, dk, dv


case("attention", attention, [f32(5, 4), f32(6, 4), f32(6, 3)], attention_bwd, "attention missing the 1/sqrt(d) in dQ")

# 8. Global average pool, H != W.
case(
    "gap",
    lambda x: jnp.mean(x, axis=(2, 3)),
    [f32(2, 3, 4, 6)],
    lambda x, dy, bug: (jnp.broadcast_to(dy[:, :, None, None] / (4.0 if bug else 24.0), x.shape),),
    "GAP backward dividing by H only",
)


# 9. tanh-GELU forward; the erf-GELU derivative is close (~1e-3) but wrong.
def gelu_tanh_bwd(x, dy, bug):
    if bug:
        cdf = 0.5 * (1.0 + lax.erf(x / math.sqrt(2.0)))
        pdf = jnp.exp(-0.5 * x * x) / math.sqrt(2.0 * math.pi)
        return (dy * (cdf + x * pdf),)
    c = math.sqrt(2.0 / math.pi)
    u = c * (x + 0.044715 * x**3)
    t = jnp.tanh(u)
    du = c * (1.0 + 3 * 0.044715 * x * x)
    return (dy * (0.5 * (1.0 + t) + 0.5 * x * (1.0 - t * t) * du),)


case(
    "gelu_tanh",
    lambda x: jax.nn.gelu(x, approximate=True),
    [f32(4, 32)],
    gelu_tanh_bwd,
    "erf-GELU derivative under a tanh-GELU forward",
)


# 10. Mean softmax cross-entropy over the batch; labels are int32 (no cotangent).
def softmax_ce(logits, labels):
    # Written without logsumexp/take_along_axis (is_finite and gather are outside
    # certgrad's op set); the max shift is the usual stabiliser.
    m = jnp.max(logits, axis=-1, keepdims=True)
    lse = jnp.log(jnp.sum(jnp.exp(logits - m), axis=-1)) + m[:, 0]
    onehot = (jnp.arange(logits.shape[-1])[None, :] == labels[:, None]).astype(F32)
    return jnp.mean(lse - jnp.sum(logits * onehot, axis=-1))


def softmax_ce_bwd(logits, labels, dy, bug):
    p = jax.nn.softmax(logits, axis=-1)
    onehot = (jnp.arange(logits.shape[-1])[None, :] == labels[:, None]).astype(F32)
    g = (p - onehot) * dy
    return (g if bug else g / logits.shape[0],)  # BUG: no 1/B


case("softmax_ce", softmax_ce, [f32(4, 10), i32(4)], softmax_ce_bwd, "softmax-CE missing 1/B")


# 11. Layer norm over the last axis.
def layernorm(x, g, b, eps=1e-5):
    mu = jnp.mean(x, axis=-1, keepdims=True)
    var = jnp.mean((x - mu) ** 2, axis=-1, keepdims=True)
    return g * (x - mu) * lax.rsqrt(var + eps) + b


def layernorm_bwd(x, g, b, dy, bug, eps=1e-5):
    mu = jnp.mean(x, axis=-1, keepdims=True)
    var = jnp.mean((x - mu) ** 2, axis=-1, keepdims=True)
    rstd = lax.rsqrt(var + eps)
    xhat = (x - mu) * rstd
    gh = dy * g
    vterm = 0.0 if bug else xhat * jnp.mean(gh * xhat, axis=-1, keepdims=True)  # BUG: no variance term
    dx = rstd * (gh - jnp.mean(gh, axis=-1, keepdims=True) - vterm)
    return dx, jnp.sum(dy * xhat, axis=0), jnp.sum(dy, axis=0)


case("layernorm", layernorm, [f32(3, 16), f32(16), f32(16)], layernorm_bwd, "layer-norm backward missing the variance term")


# 12. Softmax: the diagonal-only Jacobian.
def softmax_bwd(x, dy, bug):
    y = jax.nn.softmax(x, axis=-1)
    if bug:
        return (y * (1.0 - y) * dy,)  # BUG: drops the off-diagonal terms
    return (y * (dy - jnp.sum(dy * y, axis=-1, keepdims=True)),)


case("softmax", lambda x: jax.nn.softmax(x, axis=-1), [f32(3, 7)], softmax_bwd, "softmax backward with the diagonal Jacobian only")


# 13. Residual ReLU block y = x + relu(x W): skip path dropped.
case(
    "residual_dense",
    lambda x, w: x + jnp.maximum(x @ w, 0.0),
    [f32(4, 6), f32(6, 6)],
    lambda x, w, dy, bug: (
        lambda gz: ((gz @ w.T) if bug else (dy + gz @ w.T), x.T @ gz)
    )(jnp.where(x @ w > 0, dy, 0.0)),
    "residual backward dropping the skip-path gradient",
)


# The speed case: a ResNet stem (conv 7x7/s2 + BN + ReLU + 3x3/s2 max pool),
# batch 2, 64x48 input; jax.vjp only.
def stem(x, w, g, b):
    y = conv(x, w, 2, [(3, 3), (3, 3)])
    y = jnp.maximum(bn(y, g, b), 0.0)
    return lax.reduce_window(y, -jnp.inf, lax.max, (1, 1, 3, 3), (1, 1, 2, 2), [(0, 0), (0, 0), (1, 1), (1, 1)])


STEM = (stem, [f32(2, 3, 64, 48), f32(16, 3, 7, 7), f32(16), f32(16)])


# ---------------------------------------------------------------- export


def lower(fn, specs):
    return jax.jit(fn, keep_unused=True).lower(*specs).as_text()


def out_specs(f, specs):
    out = jax.eval_shape(f, *specs)
    return out


def float_mask(specs):
    return [jnp.issubdtype(s.dtype, jnp.floating) for s in specs]


def jax_bwd(f, specs):
    n = len(specs)
    fl = float_mask(specs)

    def b(*args):
        a, dy = list(args[:n]), args[n]
        idx = [i for i in range(n) if fl[i]]

        def g(*fa):
            full = list(a)
            for i, v in zip(idx, fa):
                full[i] = v
            return f(*full)

        _, vjp = jax.vjp(g, *[a[i] for i in idx])
        return tuple(vjp(dy))

    return b


def write(out, name, text):
    with open(os.path.join(out, name), "w") as fh:
        fh.write(text)
    return name


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)
    manifest = []
    for name, (f, specs, hand, bug) in CASES.items():
        dy = out_specs(f, specs)
        full = specs + [jax.ShapeDtypeStruct(dy.shape, dy.dtype)]
        entry = {"name": name, "bug": bug, "fwd": write(args.out, f"{name}.fwd.mlir", lower(f, specs))}
        entry["jax"] = write(args.out, f"{name}.jax.mlir", lower(jax_bwd(f, specs), full))
        entry["ok"] = write(args.out, f"{name}.ok.mlir", lower(lambda *a: hand(*a, False), full))
        entry["bug_file"] = write(args.out, f"{name}.bug.mlir", lower(lambda *a: hand(*a, True), full))
        manifest.append(entry)
    f, specs = STEM
    dy = out_specs(f, specs)
    full = specs + [jax.ShapeDtypeStruct(dy.shape, dy.dtype)]
    manifest.append(
        {
            "name": "resnet_stem_b2_64x48",
            "bug": None,
            "fwd": write(args.out, "stem.fwd.mlir", lower(f, specs)),
            "jax": write(args.out, "stem.jax.mlir", lower(jax_bwd(f, specs), full)),
        }
    )
    with open(os.path.join(args.out, "manifest.json"), "w") as fh:
        json.dump(manifest, fh, indent=1)
    with open(os.path.join(args.out, ".certgrad_vjp_cases"), "w") as fh:
        fh.write("cases exported by scripts/jax_vjp_export.py\n")
    print(f"jax vjp export: {len(manifest)} forward functions written to {args.out}")


if __name__ == "__main__":
    main()
