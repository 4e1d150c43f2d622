"""`certgrad.testing`: certification as a test assertion.

`assert_vjp(f, *args, **kwargs)` passes when the certifier certifies f's
backward (its custom_vjp/custom_jvp rule if it has one, else JAX's own
derivative) and fails the test otherwise with the certifier's explanation:
which input, which element, how far off, at which point.
"""

from __future__ import annotations

from typing import Any, Callable

from .report import VjpReport


class VjpAssertionError(AssertionError):
    """A backward that is not its forward's VJP; `.report` is the evidence."""

    def __init__(self, message: str, report: VjpReport):
        super().__init__(message)
        self.report = report


def assert_vjp(f: Callable, *args: Any, allow_undecided: bool = False, **kwargs: Any) -> VjpReport:
    """Fail unless f's backward is certified to be its VJP at `args`.

    Options are `certgrad.jax.check_vjp`'s (`at`, `points`, `seed`, `probes`,
    `boundary_points`, `f_kwargs`, …); other keyword arguments go to f. An
    undecided check (every point on a kink, no finite point) fails unless
    `allow_undecided`. Returns the report when it passes."""
    __tracebackhide__ = True  # pytest: show the assertion, not this frame
    from . import jax as cjax

    check = cjax.check_vjp if cjax._is_rule(f) is not None else cjax.check_grad
    report = check(f, *args, **kwargs)
    if report.certified or (allow_undecided and report.verdict == "undecided"):
        return report
    lines = [report.explain()]
    lines.extend(f"  {n}" for n in report.notes)
    lines.append(repr(report))
    raise VjpAssertionError("\n".join(lines), report)
