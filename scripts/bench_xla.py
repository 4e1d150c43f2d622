"""Native executor vs XLA-CPU (PJRT) on the same rendered text: each net's
train step and eval forward, `certgrad run --engine native` vs
`--engine pjrt`, the same seeded inputs for both, ratios from one run.

Usage: bench_xla.py CERTGRAD_BIN PJRT_PLUGIN WORK_DIR [--nets a,b,...]
       [--step-batch B] [--eval-batch B] [--repeat N] [--rounds R]

For every (net, kind) the text is rendered once (`certgrad render NET
[--eval] --batch B`); the inputs are drawn once (seeded; see `draw`) and both
engines run that text on them `--repeat` times per process, in `--rounds`
alternating fresh processes (native, pjrt, native, pjrt, …), so a machine
that gets busier or quieter hits both. The figure per engine is the median
over rounds of each process's median run time; the ratio is native / pjrt.
The outputs are compared norm-wise as a sanity check (not a gate: the step's
ReLU/pool decisions at a random point may flip between two f32 engines).
"""

import argparse
import os
import re
import subprocess
import sys
import time

import numpy as np


def arg_types(text):
    """(shape, dtype) of each argument of the text's public function."""
    params = re.search(r"func\.func public @\w+\((.*?)\)\s*->", text, re.S).group(1)
    out = []
    for t in re.findall(r"tensor<([^>]*)>", params):
        parts = t.split("x")
        elem = parts[-1]
        shape = tuple(int(x) for x in parts[:-1])
        dtype = {"f32": np.float32, "i32": np.int32, "i64": np.int64, "bf16": np.float32}.get(elem)
        if dtype is None:
            raise SystemExit(f"bench_xla: argument element type {elem} not handled")
        out.append((shape, dtype))
    return out


def draw(types, seed):
    """Seeded inputs: tensors uniform in [0.02, 0.1) (positive, so variances
    and second moments are valid and nothing is NaN), those of rank ≥ 2
    (weights, images) divided by 0.06 × their fan-in (the product of all but
    the first dimension) so a positive layer's gain stays near 1 (unscaled,
    ResNet-34's activations overflowed and its outputs were not finite),
    scalars 1e-3 (the learning rate and bias corrections), integers 0.
    Timing does not depend on the values beyond their being finite and
    normal."""
    rng = np.random.default_rng(seed)
    out = []
    for shape, dtype in types:
        if dtype is not np.float32:
            out.append(np.zeros(shape, dtype))
        elif shape == ():
            out.append(np.array(1e-3, np.float32))
        else:
            x = rng.uniform(0.02, 0.1, size=shape)
            if len(shape) >= 2:
                x /= 0.06 * int(np.prod(shape[1:]))
            out.append(x.astype(np.float32))
    return out


TIME = re.compile(r"median of \d+ runs ([0-9.]+) ms")


def run(bin_, mlir, ins, out, engine, plugin, repeat):
    cmd = [bin_, "run", mlir, "--engine", engine, "--repeat", str(repeat), "--inputs", *ins, "--out", out]
    if engine == "pjrt":
        cmd[5:5] = ["--pjrt-plugin", plugin]
    p = subprocess.run(cmd, capture_output=True, text=True)
    if p.returncode != 0:
        raise SystemExit(f"bench_xla: {' '.join(cmd[:6])} failed:\n{p.stdout}{p.stderr}")
    m = TIME.search(p.stdout)
    if not m:
        raise SystemExit(f"bench_xla: no run time in: {p.stdout}")
    return float(m.group(1))


def worst_diff(a_dir, b_dir):
    worst = 0.0
    k = 0
    while os.path.exists(os.path.join(a_dir, f"out_{k}.npy")):
        a = np.load(os.path.join(a_dir, f"out_{k}.npy")).astype(np.float64)
        b = np.load(os.path.join(b_dir, f"out_{k}.npy")).astype(np.float64)
        if not (np.isfinite(a).all() and np.isfinite(b).all()):
            return float("nan")  # printed as nan: nothing was compared
        nb = np.linalg.norm(b)
        worst = max(worst, np.linalg.norm(a - b) / (nb if nb > 0 else 1.0))
        k += 1
    return worst


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("bin")
    ap.add_argument("plugin")
    ap.add_argument("work")
    ap.add_argument("--nets", default="cifar8-bbn,resnet34,mobilenetv2,convnext-t,vit-tiny")
    ap.add_argument("--kinds", default="eval,step")
    ap.add_argument("--step-batch", type=int, default=8)
    ap.add_argument("--eval-batch", type=int, default=8)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--rounds", type=int, default=2)
    a = ap.parse_args()
    t_start = time.time()
    rows = []
    for net in a.nets.split(","):
        for kind in a.kinds.split(","):
            batch = a.eval_batch if kind == "eval" else a.step_batch
            d = os.path.join(a.work, f"{net}-{kind}-b{batch}")
            os.makedirs(d, exist_ok=True)
            mlir = os.path.join(d, "f.mlir")
            cmd = [a.bin, "render", net, "--batch", str(batch), "-o", mlir]
            if kind == "eval":
                cmd.insert(3, "--eval")
            subprocess.run(cmd, check=True, capture_output=True)
            ins = []
            for i, x in enumerate(draw(arg_types(open(mlir).read()), seed=20)):
                ins.append(os.path.join(d, f"in_{i:03d}.npy"))
                np.save(ins[-1], x)
            times = {"native": [], "pjrt": []}
            for _ in range(a.rounds):
                for engine in ("native", "pjrt"):
                    times[engine].append(run(a.bin, mlir, ins, os.path.join(d, f"out_{engine}"), engine, a.plugin, a.repeat))
            med = {e: float(np.median(t)) for e, t in times.items()}
            diff = worst_diff(os.path.join(d, "out_native"), os.path.join(d, "out_pjrt"))
            rows.append((net, kind, batch, med["native"], med["pjrt"], med["native"] / med["pjrt"], diff))
            print(f"{net:12s} {kind:5s} b{batch:<3d} native {med['native']:9.1f} ms  pjrt {med['pjrt']:9.1f} ms  "
                  f"native/pjrt {med['native'] / med['pjrt']:.2f}  max out diff {diff:.1e}", flush=True)
    print(f"bench_xla: {len(rows)} rows, {sum(r[5] <= 1.0 for r in rows)} with native ahead; "
          f"wall {time.time() - t_start:.0f} s")


if __name__ == "__main__":
    main()
