"""Finding and calling the `certgrad` binary.

Owns the one place the package shells out: which binary (the one the wheel
installed next to the interpreter's scripts, else $CERTGRAD_BIN, else PATH),
how a call's exit status becomes a result or a `CertgradError`, and the
scratch directory each call's files live in.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import sysconfig
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence


class CertgradError(RuntimeError):
    """`certgrad` could not do what was asked: a usage, parse or verification
    error (exit 2), or no binary. The message is the binary's own."""


def binary() -> str:
    """The `certgrad` executable this package calls.

    $CERTGRAD_BIN wins (a development build); else the binary the wheel
    installed into this interpreter's scripts directory; else `certgrad` on
    PATH."""
    env = os.environ.get("CERTGRAD_BIN")
    if env:
        if not (os.path.isfile(env) and os.access(env, os.X_OK)):
            raise CertgradError(f"CERTGRAD_BIN={env} is not an executable file")
        return env
    exe = "certgrad.exe" if sys.platform == "win32" else "certgrad"
    candidates = [Path(sysconfig.get_path("scripts")) / exe, Path(sys.executable).parent / exe]
    for c in candidates:
        if c.is_file() and os.access(c, os.X_OK):
            return str(c)
    found = shutil.which("certgrad")
    if found:
        return found
    raise CertgradError(
        "no certgrad binary: install the package with `pip install ./python` from a certgrad "
        "checkout (it builds the binary into the wheel), or set CERTGRAD_BIN to a built "
        "target/release/certgrad"
    )


@dataclass
class Completed:
    """One finished call: exit status and both streams."""

    args: list[str]
    returncode: int
    stdout: str
    stderr: str


def call(args: Sequence[str], ok: Sequence[int] = (0,), timeout: float | None = None) -> Completed:
    """Run `certgrad ARGS…`. An exit status outside `ok` raises
    `CertgradError` with the binary's message (stderr, else stdout)."""
    cmd = [binary(), *map(str, args)]
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired as e:
        raise CertgradError(f"`certgrad {' '.join(map(str, args))}` ran past {timeout} s") from e
    if p.returncode not in ok:
        msg = (p.stderr.strip() or p.stdout.strip() or "(no output)").splitlines()
        tail = "\n".join(msg[-20:])
        raise CertgradError(f"`certgrad {args[0]}` failed (exit {p.returncode}):\n{tail}")
    return Completed(cmd, p.returncode, p.stdout, p.stderr)


def scratch(keep: str | os.PathLike | None = None):
    """A directory for one call's files: `keep` (created, left in place, for
    inspection) or a temporary one removed afterwards."""
    if keep is None:
        return tempfile.TemporaryDirectory(prefix="certgrad-")
    path = Path(keep)
    path.mkdir(parents=True, exist_ok=True)
    return _Kept(path)


class _Kept:
    def __init__(self, path: Path):
        self.path = path

    def __enter__(self) -> str:
        return str(self.path)

    def __exit__(self, *exc) -> None:
        return None
