"""certgrad from Python: certify that a backward IS the VJP of its forward.

    import certgrad.jax, certgrad.testing
    report = certgrad.jax.check_vjp(my_custom_vjp_fn, x, params)   # your rule
    report = certgrad.jax.check_grad(f, x)                         # JAX's derivative
    certgrad.testing.assert_vjp(my_custom_vjp_fn, x, params)        # in a pytest test

and the CLI's commands as calls: `certgrad.run(text_or_path, *arrays)`,
`certgrad.certify(net)`, `certgrad.render(net, optimizer=…)`,
`certgrad.check_vjp(forward_text, backward_text)`; a train step with
`certgrad.jax.certify_step(train_step, *args)`.

This package is a thin layer over the `certgrad` binary that its wheel
carries (built from the repository's Rust workspace by maturin); see
`certgrad._cli.binary` for which binary is used.
"""

from ._cli import CertgradError, binary
from ._core import certify, check_vjp_text as check_vjp, render, run
from .report import NetCertificate, Refutation, StepReport, VjpReport

__all__ = [
    "CertgradError",
    "NetCertificate",
    "Refutation",
    "StepReport",
    "VjpReport",
    "binary",
    "certify",
    "check_vjp",
    "render",
    "run",
]
