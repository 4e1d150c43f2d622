#!/usr/bin/env python3
"""bench_jax_step.py: `certgrad run` of a realistic flax/optax train step
against `jax.jit` of the same step on this CPU, in one run.

Owns the timing only; the programs are scripts/jax_corpus.py's (exported the
same way: jax.jit(step).lower(...).as_text()). Per program:
  jax       jax.jit(step) compiled and warmed up, then N calls, each timed to
            block_until_ready; the median
  certgrad  `certgrad run step.mlir --inputs … --repeat N` (native engine);
            the median it reports (its first, cold run is one of the N)
and the ratio certgrad / jax. Both see the same inputs; the outputs are also
compared (max norm-wise error), so a fast wrong answer is visible.

Usage: bench_jax_step.py --certgrad BIN [--only NAME ...] [--repeat N] [--out DIR]
Default programs: cnn_batchnorm_sgd (flax CNN + BatchNorm, optax SGD with
momentum), gru_scan_adam (flax GRUCell under nn.scan, i.e. lax.scan, + adam),
mlp_adamw, transformer_block_adamw.
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import tempfile
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import jax  # noqa: E402
import jax_corpus  # noqa: E402
from compare_npy import errors  # noqa: E402

DEFAULT = ["cnn_batchnorm_sgd", "gru_scan_adam", "mlp_adamw", "transformer_block_adamw"]


def jax_median(prog, n):
    f, leaves = jax_corpus.flat_fn(prog["step"], prog["step_args"])
    jf = jax.jit(f, keep_unused=True)
    args = [jax.device_put(x) for x in leaves]
    jax.block_until_ready(jf(*args))  # compile
    for _ in range(3):
        jax.block_until_ready(jf(*args))
    times = []
    for _ in range(n):
        t0 = time.perf_counter()
        jax.block_until_ready(jf(*args))
        times.append(time.perf_counter() - t0)
    return float(np.median(times))


def certgrad_median(binary, d, n_in, n):
    cmd = [binary, "run", os.path.join(d, "step.mlir"), "--inputs",
           *[os.path.join(d, f"in_{k}.npy") for k in range(n_in)],
           "--out", os.path.join(d, "certgrad_out"), "--repeat", str(n)]
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    if p.returncode != 0:
        raise RuntimeError((p.stdout + p.stderr).strip().splitlines()[-1])
    m = re.search(r"median of \d+ runs ([0-9.]+) ms", p.stdout)
    how = re.search(r"; ([^,]*), prepared", p.stdout)
    if not m:
        raise RuntimeError(f"no median in: {p.stdout.strip()}")
    return float(m.group(1)) / 1e3, (how.group(1) if how else "?")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--certgrad", required=True)
    ap.add_argument("--only", nargs="*", default=DEFAULT)
    ap.add_argument("--repeat", type=int, default=20)
    ap.add_argument("--out", default=None)
    args = ap.parse_args()
    out = args.out or tempfile.mkdtemp(prefix="bench_jax_step_")
    print(f"jax {jax.__version__} on {jax.devices()[0].platform}, {os.cpu_count()} CPUs; "
          f"median of {args.repeat} warm calls (certgrad: of {args.repeat} runs, the first cold)")
    print(f"{'program':<26} {'jax.jit':>10} {'certgrad':>10} {'ratio':>7}  {'max err':>8}  how")
    for prog in jax_corpus.programs():
        if prog["name"] not in args.only:
            continue
        d, n_in, expected, _, _ = jax_corpus.export(prog, out)
        tj = jax_median(prog, args.repeat)
        try:
            tc, how = certgrad_median(args.certgrad, d, n_in, args.repeat)
        except Exception as e:  # noqa: BLE001 - reported, next program
            print(f"{prog['name']:<26} {tj * 1e3:8.3f}ms {'FAILED':>10}  {e}")
            continue
        worst = 0.0
        for k, e in enumerate(expected):
            got = np.load(os.path.join(d, "certgrad_out", f"out_{k}.npy"))
            worst = max(worst, errors(got.astype(e.dtype), e)[0] if got.shape == e.shape else float("inf"))
        print(f"{prog['name']:<26} {tj * 1e3:8.3f}ms {tc * 1e3:8.3f}ms {tc / tj:6.1f}x  {worst:8.1e}  {how}",
              flush=True)


if __name__ == "__main__":
    main()
