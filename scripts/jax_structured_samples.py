"""Writes crates/ir/tests/ir_suite/data/structured/*.mlir: the text jax.jit(f).lower(...)
.as_text() prints for small programs using the structured ops
(gather, scatter, dynamic_slice, dynamic_update_slice, while, case, sort,
argmax's two-operand reduce, optimization_barrier). ir's tests only parse,
verify and round-trip them; no value produced by JAX is used as an expected
value. Run: ~/.cache/certgrad/venv/bin/python scripts/jax_structured_samples.py
"""
import os

import jax
import jax.numpy as jnp
from jax import lax

OUT = os.path.join(os.path.dirname(__file__), "..", "crates", "ir", "tests", "ir_suite", "data", "structured")

x = jnp.ones((4, 3), jnp.float32)
idx = jnp.array([0, 2, 2, 3], jnp.int32)
SAMPLES = {
    "take": (lambda x, i: jnp.take(x, i, axis=0), (x, idx)),
    "take_along_axis": (lambda x, i: jnp.take_along_axis(x, i, axis=1), (x, jnp.zeros((4, 1), jnp.int32))),
    "at_add": (lambda x, i: x.at[i].add(1.0), (x, idx)),
    "dynamic_slice": (lambda x, i: lax.dynamic_slice(x, (i, 0), (2, 3)), (x, 1)),
    "dynamic_update_slice": (lambda x, i: lax.dynamic_update_slice(x, jnp.zeros((2, 3)), (i, 0)), (x, 1)),
    "fori_loop": (lambda x: lax.fori_loop(0, 3, lambda k, c: c * 2.0 + k, x), (x,)),
    "scan": (lambda x: lax.scan(lambda c, r: (c + r, c * r), jnp.zeros(3), x), (x,)),
    "sort": (lambda x: jnp.sort(x, axis=1), (x,)),
    "argsort": (lambda x: jnp.argsort(x, axis=0), (x,)),
    "argmax": (lambda x: jnp.argmax(x, axis=1), (x,)),
    "switch": (lambda i, x: lax.switch(i, [lambda x: x, lambda x: x * 2, lambda x: x + 1], x), (1, x)),
    "cond": (lambda p, x: lax.cond(p, lambda x: x, lambda x: -x, x), (True, x)),
    "optimization_barrier": (lambda x: lax.optimization_barrier((x, x * 2)), (x,)),
    "take_grad": (jax.grad(lambda x, i: jnp.take(x, i, axis=0).sum()), (x, idx)),
}

os.makedirs(OUT, exist_ok=True)
for name, (f, args) in SAMPLES.items():
    with open(os.path.join(OUT, f"{name}.mlir"), "w") as fh:
        fh.write(jax.jit(f).lower(*args).as_text())
print(f"wrote {len(SAMPLES)} samples to {os.path.normpath(OUT)}")
