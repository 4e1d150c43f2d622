"""Writes the JAX-exported check-vjp fixtures of crates/cert/tests/cert_suite/data:

se_block.{fwd,jax,bug}.mlir  a depthwise conv + ReLU6 + SiLU + squeeze-excite
    block exported with jax.jit(...).lower(...), its jax.vjp backward, and that
    backward with one planted bug (the SE gate's sigmoid derivative s*(1-s)
    turned into s*(1+s)). At scale-8 points the gate's `1/(1+exp(-z))`
    overflows in the dual-number J·v, which check-vjp must treat as no
    evidence (resample), never as a refutation.
conv_relu6.{fwd,jax,bug}.mlir  conv 3x3 + clip(0, 6), its jax.vjp backward,
    and that backward with the clip's upper threshold moved to 6.06 (its mask
    passes gradients in (6, 6.06)): random points rarely land in that band,
    boundary points do.

Run with the venv of scripts/jax_check.sh: python scripts/make_pair_fixtures.py
"""
import os, re
import jax, jax.numpy as jnp
from jax import lax

C = 4
OUT = os.path.join(os.path.dirname(__file__), "..", "crates", "cert", "tests", "cert_suite", "data")


def block(x, w_dw, w1, w2):
    y = lax.conv_general_dilated(x, w_dw, (1, 1), [(1, 1), (1, 1)], feature_group_count=C,
                                 dimension_numbers=("NCHW", "OIHW", "NCHW"))
    y = jax.nn.silu(jnp.clip(y, 0.0, 6.0))
    s = jnp.mean(y, axis=(2, 3))
    s = jax.nn.sigmoid(jax.nn.relu(s @ w1) @ w2)
    return y * s[:, :, None, None]


def conv_relu6(x, w):
    y = lax.conv_general_dilated(x, w, (1, 1), [(1, 1), (1, 1)], dimension_numbers=("NCHW", "OIHW", "NCHW"))
    return jnp.clip(y, 0.0, 6.0)


def write(name, fwd_text, bwd_text, bug_text):
    for kind, text in [("fwd", fwd_text), ("jax", bwd_text), ("bug", bug_text)]:
        with open(os.path.join(OUT, f"{name}.{kind}.mlir"), "w") as f:
            f.write(text)


def main():
    f32 = lambda *s: jax.ShapeDtypeStruct(s, jnp.float32)
    specs = [f32(2, C, 5, 5), f32(C, 1, 3, 3), f32(C, 2), f32(2, C)]

    def bwd(x, w, w1, w2, dy):
        return jax.vjp(block, x, w, w1, w2)[1](dy)

    fwd_text = jax.jit(block).lower(*specs).as_text()
    bwd_text = jax.jit(bwd).lower(*specs, f32(2, C, 5, 5)).as_text()
    # The gate derivative: 1 - s, right before s * (1 - s).
    pat = re.compile(r"(%\d+) = stablehlo\.subtract (%\w+), (%\d+) : tensor<2x4xf32>\n(\s+%\d+ = stablehlo\.multiply \3, \1 )")
    bug_text, n = pat.subn(r"\1 = stablehlo.add \2, \3 : tensor<2x4xf32>\n\4", bwd_text)
    assert n == 1, f"expected one gate derivative, found {n}"
    write("se_block", fwd_text, bwd_text, bug_text)

    specs = [f32(2, 3, 6, 6), f32(4, 3, 3, 3)]
    fwd_text = jax.jit(conv_relu6).lower(*specs).as_text()
    bwd_text = jax.jit(lambda x, w, dy: jax.vjp(conv_relu6, x, w)[1](dy)).lower(*specs, f32(2, 4, 6, 6)).as_text()
    bug_text, n = re.subn(r"dense<6\.000000e\+00>", "dense<6.060000e+00>", bwd_text)
    assert n == 1, f"expected one clip threshold in the backward, found {n}"
    write("conv_relu6", fwd_text, bwd_text, bug_text)


if __name__ == "__main__":
    main()
