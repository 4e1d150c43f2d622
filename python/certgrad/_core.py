"""The CLI's commands as Python calls: `run`, `certify`, `render` and
`check_vjp` on StableHLO text, returning numpy arrays, strings and report
objects instead of files.

Owns the translation of Python values to the binary's files (StableHLO text,
.npy arguments, net files) and back; every call goes through `_cli.call`.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from . import _cli
from .report import InputResult, NetCertificate, VjpReport


def _is_text(text_or_path: Any) -> bool:
    if isinstance(text_or_path, os.PathLike):
        return False
    if not isinstance(text_or_path, str):
        raise TypeError(f"expected StableHLO text or a path to a .mlir file, got {type(text_or_path).__name__}")
    return "\n" in text_or_path or "func.func" in text_or_path or text_or_path.lstrip().startswith("module")


def _mlir_file(text_or_path: str | os.PathLike, dir: str, stem: str) -> str:
    """A path holding the program: the given file, or the text written to `dir`."""
    if _is_text(text_or_path):
        path = os.path.join(dir, f"{stem}.mlir")
        Path(path).write_text(text_or_path)
        return path
    path = os.fspath(text_or_path)
    if not os.path.isfile(path):
        raise FileNotFoundError(f"no StableHLO file {path}")
    return path


def run(
    text_or_path: str | os.PathLike,
    *arrays: Any,
    func: str | None = None,
    engine: str | None = None,
    generic: bool = False,
    keep: str | os.PathLike | None = None,
    timeout: float | None = None,
):
    """Evaluate a StableHLO function (`certgrad run`) on numpy-convertible
    arguments. Returns the one result as an array, several as a tuple.

    `func`: the function (default `@main`, else the only public one);
    `engine`: "native" (default), "pjrt" or "iree"; `generic`: the typed
    reference evaluator instead of the fast f32 kernels."""
    with _cli.scratch(keep) as d:
        path = _mlir_file(text_or_path, d, "program")
        inputs = []
        for i, a in enumerate(arrays):
            p = os.path.join(d, f"in_{i}.npy")
            np.save(p, np.asarray(a))
            inputs.append(p)
        out = os.path.join(d, "out")
        args = ["run", path, "--out", out]
        if inputs:
            args += ["--inputs", *inputs]
        if func:
            args += ["--func", func]
        if engine:
            args += ["--engine", engine]
        if generic:
            args.append("--generic")
        _cli.call(args, timeout=timeout)
        results = []
        k = 0
        while os.path.exists(os.path.join(out, f"out_{k}.npy")):
            results.append(np.load(os.path.join(out, f"out_{k}.npy")))
            k += 1
    return results[0] if len(results) == 1 else tuple(results)


def _net_arg(net: Any, d: str) -> str:
    """A net as the binary takes it: a built-in name or a net file; a dict is
    written as a .json net file."""
    if isinstance(net, dict):
        path = os.path.join(d, "net.json")
        Path(path).write_text(json.dumps(net))
        return path
    if isinstance(net, os.PathLike):
        return os.fspath(net)
    if isinstance(net, str):
        return net
    raise TypeError(f"net: expected a built-in name, a net file path or a dict, got {type(net).__name__}")


def certify(
    net: str | os.PathLike | dict,
    *,
    batch: int = 1,
    seed: int = 0,
    probes: int | None = None,
    points: int | None = None,
    timeout: float | None = None,
) -> NetCertificate:
    """Certify a whole net (`certgrad certify NET`): a built-in name (see
    `certgrad nets`), a .toml/.json net file, or a dict in the JSON net-file
    form. Returns the certificate; it is truthy when certified."""
    with _cli.scratch() as d:
        out = os.path.join(d, "certificate.json")
        args = ["certify", _net_arg(net, d), "--batch", batch, "--seed", seed, "--json", out]
        if probes is not None:
            args += ["--probes", probes]
        if points is not None:
            args += ["--points", points]
        _cli.call(args, ok=(0, 1), timeout=timeout)
        return NetCertificate.from_json(json.loads(Path(out).read_text()))


def render(
    net: str | os.PathLike | dict,
    optimizer: str | None = None,
    *,
    batch: int = 128,
    bf16: bool = False,
    replicas: int = 1,
    eval: bool = False,
    pool_backward: str | None = None,
    loss: str | None = None,
    weight_decay: float | None = None,
    clip: float | None = None,
    timeout: float | None = None,
) -> str:
    """The net's fused train step (or with `eval=True` its eval forward) as
    StableHLO text (`certgrad render`). `optimizer` defaults to the CLI's
    (adamw); the eval forward takes none."""
    with _cli.scratch() as d:
        out = os.path.join(d, "step.mlir")
        args = ["render", _net_arg(net, d), "--batch", batch, "-o", out]
        if optimizer is not None:
            args += ["--optimizer", optimizer]
        if bf16:
            args.append("--bf16")
        if replicas != 1:
            args += ["--replicas", replicas]
        if eval:
            args.append("--eval")
        if pool_backward:
            args += ["--pool-backward", pool_backward]
        if loss:
            args += ["--loss", loss]
        if weight_decay is not None:
            args += ["--weight-decay", weight_decay]
        if clip is not None:
            args += ["--clip", clip]
        _cli.call(args, timeout=timeout)
        return Path(out).read_text()


def check_vjp_text(
    forward: str | os.PathLike,
    backward: str | os.PathLike,
    *,
    at: Sequence[Any] | None = None,
    seed: int = 0,
    probes: int = 2,
    boundary_points: int = 16,
    fwd_func: str | None = None,
    bwd_func: str | None = None,
    names: list[str] | None = None,
    leaves: list[InputResult] | None = None,
    function: str | None = None,
    keep: str | os.PathLike | None = None,
    timeout: float | None = None,
) -> VjpReport:
    """`certgrad check-vjp` on StableHLO text or files: is `backward`
    b(a…, dy…) -> (da…) the VJP of `forward` f(a…) -> (y…)?

    `at`: one array per forward argument (the point), else seeded random
    points at scales 1, 8, 1/4. `names[i]` names forward argument i in the
    report (default a0, a1, …)."""
    with _cli.scratch(keep) as d:
        fwd = _mlir_file(forward, d, "forward")
        bwd = _mlir_file(backward, d, "backward")
        out = os.path.join(d, "report.json")
        args = ["check-vjp", fwd, bwd, "--seed", seed, "--probes", probes,
                "--boundary-points", boundary_points, "--json", out]
        if fwd_func:
            args += ["--fwd-func", fwd_func]
        if bwd_func:
            args += ["--bwd-func", bwd_func]
        if at is not None:
            files = []
            for i, a in enumerate(at):
                p = os.path.join(d, f"at_{i}.npy")
                np.save(p, np.asarray(a))
                files.append(p)
            args += ["--at", *files]
        _cli.call(args, ok=(0, 1, 3), timeout=timeout)
        doc = json.loads(Path(out).read_text())
        fwd_text, bwd_text = Path(fwd).read_text(), Path(bwd).read_text()
    names = names or [f"a{i}" for i in range(len(doc["inputs"]))]
    report = VjpReport.from_json(doc, function or f"backward @{doc['backward']['func']} of forward @{doc['forward']['func']}", names, leaves)
    report.forward_text, report.backward_text = fwd_text, bwd_text
    return report
