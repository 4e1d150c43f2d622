#!/usr/bin/env python3
"""f64_accuracy.py: how far each engine's f32 train step is from float64.

Usage: f64_accuracy.py STEP.mlir DIR ENGINE... [--all]

DIR holds the step's inputs (in_000.npy, ... as scripts/step_inputs.py writes
them) and each engine's outputs in DIR/out_ENGINE/out_K.npy (`certgrad run
STEP.mlir --engine ENGINE --inputs DIR/in_*.npy --out DIR/out_ENGINE`). The
reference is the same text with every f32 turned into f64, compiled by XLA's
CPU backend through JAX with x64 on (jax private API, as engines_check.sh).
Prints, per output, the norm-wise error ||a - b|| / ||b|| of each engine (only
outputs where some engine exceeds 1e-5 unless --all), then the worst.

To measure gradients rather than θ − lr·g (where f32 rounding of θ hides
them), zero the AdamW m inputs: then m' = (1 − β1)·g. Outputs whose true value
is ~0 (a conv bias in front of a batch norm has gradient 0) show a huge
relative error on every engine; they carry no information.
"""

import glob
import os
import re
import sys

import numpy as np


def main() -> None:
    args = [a for a in sys.argv[1:] if a != "--all"]
    show_all = "--all" in sys.argv
    if len(args) < 3:
        sys.exit(__doc__)
    mlir, d, engines = args[0], args[1], args[2:]
    import jax

    jax.config.update("jax_enable_x64", True)
    from jax._src import xla_bridge
    from jax._src.lib import xla_client as xc

    text = open(mlir).read()
    t64 = text.replace("f32", "f64")
    t64 = re.sub(r"func\.func public @\w+", "func.func public @main", t64, count=1)
    be = xla_bridge.get_backend("cpu")
    exe = be.compile_and_load(
        t64,
        executable_devices=xc.DeviceList(tuple(be.devices()[:1])),
        compile_options=xc.CompileOptions(),
    )
    ins = [np.load(f).astype(np.float64) for f in sorted(glob.glob(os.path.join(d, "in_*.npy")))]
    truth = [np.asarray(o) for o in exe.execute([jax.device_put(a, be.devices()[0]) for a in ins])]
    err = {}
    for e in engines:
        outs = [
            np.load(os.path.join(d, f"out_{e}", f"out_{k}.npy")).astype(np.float64)
            for k in range(len(truth))
        ]
        err[e] = [
            np.linalg.norm(a - b) / max(np.linalg.norm(b), 1e-300) for a, b in zip(outs, truth)
        ]
    print("out " + "".join(f"{e:>12}" for e in engines))
    for k in range(len(truth)):
        row = [err[e][k] for e in engines]
        if show_all or max(row) > 1e-5:
            print(f"{k:>3} " + "".join(f"{x:12.2e}" for x in row))
    print("worst: " + ", ".join(f"{e} {max(err[e]):.2e}" for e in engines))


if __name__ == "__main__":
    main()
