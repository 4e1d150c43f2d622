"""A custom_vjp rule, refuted, then fixed and certified.

Run: python examples/custom_vjp_refuted_then_fixed.py   (after `pip install ./python`)

A numerically stable softmax with a hand-written backward. The first rule
forgets the diagonal of the Jacobian diag(y) − y yᵀ; certgrad refutes it,
naming the input and the element, then certifies the fixed rule.
"""

import jax
import jax.numpy as jnp
import numpy as np

import certgrad.jax


@jax.custom_vjp
def softmax(x):
    e = jnp.exp(x - jnp.max(x, axis=-1, keepdims=True))
    return e / jnp.sum(e, axis=-1, keepdims=True)


def softmax_fwd(x):
    y = softmax(x)
    return y, y  # the residual is the output itself


def softmax_bwd_wrong(y, dy):
    return (-y * jnp.sum(dy * y, axis=-1, keepdims=True),)  # only the -y yᵀ part


def softmax_bwd(y, dy):
    return (y * (dy - jnp.sum(dy * y, axis=-1, keepdims=True)),)  # diag(y) dy − y (yᵀ dy)


x = np.random.default_rng(0).normal(size=(4, 10)).astype(np.float32)

softmax.defvjp(softmax_fwd, softmax_bwd_wrong)
report = certgrad.jax.check_vjp(softmax, x)
print(report)  # REFUTED: input `x[i, j]`, the true VJP entry, the claimed one, the point
assert report.refuted and report.refutation.name == "x"

softmax.defvjp(softmax_fwd, softmax_bwd)
report = certgrad.jax.check_vjp(softmax, x)
print(report)  # CERTIFIED, with the evidence: probes, points, margins
assert report.certified
