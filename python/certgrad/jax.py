"""`certgrad.jax`: certify a JAX function's backward against its forward,
and a whole train step's update against the gradient of its own loss.

`certify_step(train_step, *args)` exports a fused step and runs `certgrad
certify-step` on it (see `certify_step`).

`check_vjp(f, *args, **kwargs)` checks a `jax.custom_vjp` (or `custom_jvp`)
function's hand-written rule; `check_grad(f, *args, **kwargs)` checks JAX's
own derivative of any function. Both export two StableHLO functions with the
conventions `certgrad check-vjp` expects and run it:

  forward   F(x0, …, xn) -> (y0, …, ym)      f itself (a custom_vjp runs its primal)
  backward  B(x0, …, xn, dy0, …, dym) -> (dx0, …, dxn)
            = jax.vjp(f, …)[1](dy): for a custom_vjp the rule's `fwd` then
              `bwd`, residuals passed between them inside one function

exported with `jax.jit(…, keep_unused=True).lower(…).as_text()`. The x_i are
the float array leaves of `(args, kwargs)` in `jax.tree_util` order (dicts,
tuples, lists, registered dataclasses); the y_j the float leaves of the
result. Integer and boolean arrays are held at their values (baked into both
functions as constants: they take no cotangent); Python scalars, strings and
other non-array leaves are static. Integer outputs take a zero (float0)
cotangent and are not part of the check.
"""

from __future__ import annotations

import inspect
import json
import os
import re
from typing import Any, Callable, Sequence

import numpy as np

import jax
import jax.numpy as jnp
from jax import tree_util

from . import _cli, _core
from .report import InputResult, StepReport, VjpReport


def _is_rule(f: Any) -> Any:
    """The custom_vjp/custom_jvp object behind `f` (through jit/wraps), or None."""
    seen = 0
    while f is not None and seen < 8:
        if isinstance(f, (jax.custom_vjp, jax.custom_jvp)):
            return f
        f = getattr(f, "__wrapped__", None)
        seen += 1
    return None


def _kind(leaf: Any) -> str:
    """"float" (differentiated), "int" (held at its value) or "static"."""
    if isinstance(leaf, (jax.Array, np.ndarray, np.generic, jax.ShapeDtypeStruct)):
        dt = np.dtype(leaf.dtype)
        if jnp.issubdtype(dt, jnp.floating):
            return "float"
        if jnp.issubdtype(dt, jnp.integer) or jnp.issubdtype(dt, jnp.bool_):
            return "int"
        raise TypeError(f"certgrad checks real functions: a {dt} argument is not supported")
    return "static"


def _positional_names(f: Callable, n: int) -> list[str]:
    try:
        params = list(inspect.signature(f).parameters.values())
    except (TypeError, ValueError):
        params = []
    names = []
    for i in range(n):
        if i < len(params) and params[i].kind in (params[i].POSITIONAL_ONLY, params[i].POSITIONAL_OR_KEYWORD):
            names.append(params[i].name)
            continue
        var = next((k for k, p in enumerate(params) if p.kind == p.VAR_POSITIONAL), None)
        names.append(f"{params[var].name}[{i - var}]" if var is not None and i >= var else f"args[{i}]")
    return names


def _leaf_names(f: Callable, args: tuple, kwargs: dict) -> list[str]:
    """Display name of every leaf of (args, kwargs): the parameter name and
    the leaf's path inside it (`params['w']`, `x`, `batch[1]`)."""
    pos = _positional_names(f, len(args))
    names = []
    for path, _ in tree_util.tree_flatten_with_path((args, kwargs))[0]:
        top, key, rest = path[0], path[1], path[2:]
        base = pos[key.idx] if top.idx == 0 else str(key.key)
        names.append(base + tree_util.keystr(tuple(rest)))
    return names


def _spec_dtype(dt) -> np.dtype:
    return np.dtype(jax.dtypes.canonicalize_dtype(dt))


def _point_value(leaf: Any, dtype: np.dtype) -> np.ndarray:
    """An argument value as the binary reads it: bf16/f16 as float32 .npy."""
    a = np.asarray(leaf)
    if dtype == np.float64:
        return a.astype(np.float64)
    return a.astype(np.float32)


class _Problem:
    """f with its example arguments split into differentiated leaves, held
    (integer) leaves and static ones; exports the (forward, backward) pair."""

    def __init__(self, f: Callable, args: tuple, kwargs: dict):
        self.f = f
        self.leaves, self.treedef = tree_util.tree_flatten((args, kwargs))
        self.names = _leaf_names(f, args, kwargs)
        self.kinds = [_kind(x) for x in self.leaves]
        self.float_idx = [i for i, k in enumerate(self.kinds) if k == "float"]
        if not self.float_idx:
            raise TypeError("f has no float array argument to differentiate (integers are held, Python scalars static)")
        for i, k in enumerate(self.kinds):
            if k == "int" and isinstance(self.leaves[i], jax.ShapeDtypeStruct):
                raise TypeError(f"integer argument `{self.names[i]}` needs a value, not a ShapeDtypeStruct")
        self.specs = [
            jax.ShapeDtypeStruct(np.shape(self.leaves[i]), _spec_dtype(self.leaves[i].dtype)) for i in self.float_idx
        ]

    def rows(self) -> list[InputResult]:
        rows = []
        for i, (leaf, kind) in enumerate(zip(self.leaves, self.kinds)):
            if kind == "static":
                rows.append(InputResult(self.names[i], (), type(leaf).__name__, "static (Python value, not an array)"))
                continue
            dt = _spec_dtype(leaf.dtype) if kind == "float" else np.dtype(leaf.dtype)
            role = "checked" if kind == "float" else "integer/bool: held at its value, no cotangent"
            rows.append(InputResult(self.names[i], tuple(np.shape(leaf)), str(dt), role))
        return rows

    def _g(self, held: list[Any]) -> Callable:
        """f of the float leaves alone; `held` gives every other leaf."""

        def g(*fl):
            full = list(held)
            for i, v in zip(self.float_idx, fl):
                full[i] = v
            a, kw = tree_util.tree_unflatten(self.treedef, full)
            return self.f(*a, **kw)

        return g

    def export(self, held_from: list[Any] | None = None) -> tuple[str, str]:
        """(forward text, backward text); integer leaves from `held_from`
        (a point's leaves) or the example arguments."""
        src = held_from if held_from is not None else self.leaves
        held = [np.asarray(src[i]) if k == "int" else src[i] for i, k in enumerate(self.kinds)]
        g = self._g(held)
        out_leaves, out_tree = tree_util.tree_flatten(jax.eval_shape(g, *self.specs))
        float_out = [k for k, o in enumerate(out_leaves) if jnp.issubdtype(o.dtype, jnp.floating)]
        if not float_out:
            raise TypeError("f has no float output: nothing to differentiate")
        n = len(self.specs)

        def forward(*fl):
            ys = tree_util.tree_leaves(g(*fl))
            return tuple(ys[k] for k in float_out)

        def backward(*a):
            fl, dys = a[:n], list(a[n:])
            _, vjp = jax.vjp(g, *fl)
            cts = []
            for k, o in enumerate(out_leaves):
                cts.append(dys.pop(0) if k in float_out else np.zeros(o.shape, jax.dtypes.float0))
            return tuple(vjp(tree_util.tree_unflatten(out_tree, cts)))

        dy_specs = [jax.ShapeDtypeStruct(out_leaves[k].shape, out_leaves[k].dtype) for k in float_out]
        fwd_text = jax.jit(forward, keep_unused=True).lower(*self.specs).as_text()
        bwd_text = jax.jit(backward, keep_unused=True).lower(*self.specs, *dy_specs).as_text()
        return fwd_text, bwd_text

    def concrete(self) -> bool:
        return not any(isinstance(x, jax.ShapeDtypeStruct) for x in self.leaves)

    def point(self, leaves: list[Any]) -> list[np.ndarray]:
        return [_point_value(leaves[i], s.dtype) for i, s in zip(self.float_idx, self.specs)]

    def point_leaves(self, point_args: Sequence[Any], kwargs: dict) -> list[Any]:
        leaves, treedef = tree_util.tree_flatten((tuple(point_args), kwargs))
        if treedef != self.treedef:
            raise ValueError(f"a point must have the structure of the example arguments: {treedef} vs {self.treedef}")
        for i in self.float_idx:
            if np.shape(leaves[i]) != np.shape(self.leaves[i]):
                raise ValueError(
                    f"point: `{self.names[i]}` has shape {np.shape(leaves[i])}, the example {np.shape(self.leaves[i])}"
                )
        return leaves

    def primal_mismatch(self) -> str | None:
        """For a custom_vjp: does the rule's `fwd` return f's own output at the
        example point? (The backward is checked against f; a `fwd` that
        computes something else is a bug of its own.)"""
        if not self.concrete():
            return None
        g = self._g(list(self.leaves))
        fl = [jnp.asarray(self.leaves[i]) for i in self.float_idx]
        y_primal = tree_util.tree_leaves(g(*fl))
        y_rule = tree_util.tree_leaves(jax.vjp(g, *fl)[0])
        for k, (a, b) in enumerate(zip(y_primal, y_rule)):
            a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
            if a.shape != b.shape:
                return f"output {k}: the rule's fwd returns shape {b.shape}, f returns {a.shape}"
            if a.size == 0:
                continue
            gap = float(np.max(np.abs(a - b)))
            # f32 rounding of two evaluation orders, relative to the output's size.
            if not gap <= 1e-5 * (1.0 + float(np.max(np.abs(a)))):
                return f"output {k}: the rule's fwd returns a primal output {gap:.3e} away from f's"
        return None


def _check(
    f: Callable,
    args: tuple,
    kwargs: dict,
    label: str,
    *,
    at: Any,
    points: Sequence[Sequence[Any]] | None,
    seed: int,
    probes: int,
    boundary_points: int,
    confirm: bool,
    keep: str | os.PathLike | None,
    timeout: float | None,
    rule: bool,
) -> VjpReport:
    prob = _Problem(f, args, kwargs)
    fnames = [prob.names[i] for i in prob.float_idx]
    if at is not None and points is not None:
        raise TypeError("give `at` (one point) or `points` (several), not both")
    if isinstance(at, str):
        if at != "example":
            raise ValueError(f'at={at!r}: expected "example", a tuple of arguments, or None')
        if not prob.concrete():
            raise ValueError('at="example" needs concrete example arguments, not ShapeDtypeStructs')
        points = [args]
    elif at is not None:
        points = [at]
    common = dict(seed=seed, probes=probes, boundary_points=boundary_points, names=fnames, timeout=timeout)

    def one(point_leaves: list[Any] | None, keep_dir) -> VjpReport:
        fwd, bwd = prob.export(point_leaves)
        pt = prob.point(point_leaves) if point_leaves is not None else None
        return _core.check_vjp_text(fwd, bwd, at=pt, leaves=prob.rows(), function=label, keep=keep_dir, **common)

    if points is None:
        report = one(None, keep)
        if report.refuted and confirm and prob.concrete():
            again = one(list(prob.leaves), None)
            if again.refuted:
                again.refutation.point = "your example arguments"
                report.notes.append(f"refuted at your example arguments too: {again.refutation}")
            else:
                report.notes.append(
                    f"at your example arguments the check is {again.verdict}: the discrepancy shows at other points"
                )
    else:
        reports = []
        for k, p in enumerate(points):
            leaves = prob.point_leaves(p, kwargs)
            r = one(leaves, None if keep is None else os.path.join(os.fspath(keep), f"point{k}"))
            reports.append(r)
            if not r.certified:
                break
        report = reports[-1]
        if report.certified and len(reports) > 1:
            report.points = len(reports)
            for row_k, row in enumerate(report.inputs):
                if row.checked:
                    row.probes = sum(r.inputs[row_k].probes or 0 for r in reports)
                    row.max_rel_discrepancy = max(r.inputs[row_k].max_rel_discrepancy or 0.0 for r in reports)
    if rule:
        mismatch = prob.primal_mismatch()
        if mismatch:
            report.notes.append(f"{mismatch} (the backward was checked against f itself)")
    return report


def _label(f: Callable, what: str) -> str:
    """`the custom_vjp rule of softmax`, `jax.vjp of loss`: what was checked."""
    rule = _is_rule(f)
    name = getattr(f, "__name__", None) or getattr(getattr(rule, "fun", None), "__name__", None) or repr(f)
    if what == "rule":
        what = "the custom_vjp rule" if isinstance(rule, jax.custom_vjp) else "the custom_jvp rule (transposed)"
    return f"{what} of {name}"


def check_vjp(
    f: Callable,
    *args: Any,
    at: Any = None,
    points: Sequence[Sequence[Any]] | None = None,
    seed: int = 0,
    probes: int = 2,
    boundary_points: int = 16,
    confirm: bool = True,
    keep: str | os.PathLike | None = None,
    timeout: float | None = 600,
    f_kwargs: dict | None = None,
    **kwargs: Any,
) -> VjpReport:
    """Certify the hand-written rule of a `jax.custom_vjp` (or `custom_jvp`)
    function `f` at example arguments `args`/`kwargs` (arrays or pytrees of
    them; their shapes and dtypes fix the exported functions).

    Points: seeded random ones at scales 1, 8 and 1/4 (default; `seed`), the
    example arguments (`at="example"`), one given point (`at=(x, …)`, the
    structure of `args`) or several (`points=[(x, …), …]`); integer leaves of
    a given point are used, float ones are the point. `probes`: adjoint
    probes per input and point; `boundary_points`: points just either side of
    every threshold the functions compare against. After a refutation at a
    random point, `confirm` re-checks at the example arguments and says so in
    `report.notes`. Keyword arguments of f that clash with these names go in
    `f_kwargs`. `keep`: a directory to leave the exported .mlir and the JSON in.
    """
    if _is_rule(f) is None:
        raise TypeError(
            f"check_vjp checks a jax.custom_vjp/custom_jvp rule, and {type(f).__name__} {f!r} is none; "
            "for JAX's own derivative of f use certgrad.jax.check_grad"
        )
    kw = {**(f_kwargs or {}), **kwargs}
    return _check(f, args, kw, _label(f, "rule"), at=at, points=points, seed=seed, probes=probes,
                  boundary_points=boundary_points, confirm=confirm, keep=keep, timeout=timeout, rule=True)


def check_grad(
    f: Callable,
    *args: Any,
    at: Any = None,
    points: Sequence[Sequence[Any]] | None = None,
    seed: int = 0,
    probes: int = 2,
    boundary_points: int = 16,
    confirm: bool = True,
    keep: str | os.PathLike | None = None,
    timeout: float | None = 600,
    f_kwargs: dict | None = None,
    **kwargs: Any,
) -> VjpReport:
    """Certify JAX's own derivative (`jax.vjp`) of any function `f` against
    f, at example arguments `args`/`kwargs`; options as for `check_vjp`.
    Useful around `stop_gradient`, `jnp.where` tricks and custom ops (a
    custom rule inside f is part of JAX's derivative and is checked too)."""
    kw = {**(f_kwargs or {}), **kwargs}
    return _check(f, args, kw, _label(f, "jax.vjp"), at=at, points=points, seed=seed, probes=probes,
                  boundary_points=boundary_points, confirm=confirm, keep=keep, timeout=timeout,
                  rule=_is_rule(f) is not None)


# ------------------------------------------------------------ train steps
def _with_arg_names(text: str, names: list[str]) -> str:
    """The exported text with `jax.arg_info = "<pytree path>"` on each
    argument of @main, so the report names parameters as the user does."""
    head = text.find("func.func public @main(")
    if head < 0:
        return text
    end = text.find("{\n", head)
    sig = text[head:end]
    for i, name in enumerate(names):
        info = 'jax.arg_info = "' + name.replace('"', "'") + '"'
        m = re.search(rf"%arg{i}: (tensor<[^>]*>)( \{{([^{{}}]*)\}})?", sig)
        if not m:
            continue
        attrs = f"{m.group(3)}, {info}" if m.group(3) else info
        sig = sig[:m.start()] + f"%arg{i}: {m.group(1)} {{{attrs}}}" + sig[m.end():]
    return text[:head] + sig + text[end:]


def certify_step(
    step: Callable,
    *args: Any,
    at: str = "random",
    seed: int = 0,
    probes: int = 2,
    loss: int | str | None = None,
    params: Sequence[int | str] | None = None,
    keep: str | os.PathLike | None = None,
    timeout: float | None = 600,
    **kwargs: Any,
) -> StepReport:
    """Certify a fused train step: export `jax.jit(step, keep_unused=True)
    .lower(*args, **kwargs).as_text()` and run `certgrad certify-step` on it.
    Arguments are named by their pytree paths (`params['Dense_0']['kernel']`),
    results by JAX's `jax.result_info`. The point is certgrad's draw
    (`at="random"`, with `seed`) or the example arguments (`at="example"`;
    an optimizer state of zeros leaves its moments' decay unmeasurable).
    `loss` (a result index or name) and `params` (argument indices or names)
    override the roles certgrad finds. Returns a `StepReport`."""
    leaves = tree_util.tree_leaves((args, kwargs))
    for leaf in leaves:
        _kind(leaf)  # rejects complex and key dtypes with a clear message
    text = jax.jit(step, keep_unused=True).lower(*args, **kwargs).as_text()
    text = _with_arg_names(text, _leaf_names(step, args, kwargs))
    with _cli.scratch(keep) as d:
        path = os.path.join(d, "step.mlir")
        with open(path, "w") as fh:
            fh.write(text)
        out = os.path.join(d, "report.json")
        cmd = ["certify-step", path, "--seed", seed, "--probes", probes, "--json", out]
        if loss is not None:
            cmd += ["--loss", loss]
        if params is not None:
            cmd += ["--params", ",".join(map(str, params))]
        if at == "example":
            files = []
            for i, leaf in enumerate(leaves):
                p = os.path.join(d, f"in_{i}.npy")
                np.save(p, np.asarray(leaf))
                files.append(p)
            cmd += ["--inputs", *files]
        elif at != "random":
            raise ValueError(f'at must be "random" or "example", not {at!r}')
        done = _cli.call(cmd, ok=(0, 1, 3), timeout=timeout)
        with open(out) as fh:
            doc = json.load(fh)
    return StepReport(doc, done.stdout, text)
