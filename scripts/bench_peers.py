#!/usr/bin/env python3
"""bench_peers.py: the peers of `certgrad bench step` for cifar8-bbn, and the
table that compares them (driven by scripts/bench_peers.sh).

One train step of cifar8-bbn (REFERENCE §4.1 with true batch-statistics BN):
four stages of conv3x3(bias) -> BN -> ReLU -> conv3x3(bias) -> BN -> maxpool
2x2/s2 -> ReLU, channels 16,16 | 16,16 | 32,32 | 32,32, spatial 32->16->8->4->2,
flatten 128, dense 128->64->ReLU->64->ReLU->10, softmax cross-entropy (mean
over the batch), plain SGD (theta' = theta - lr*g). The pool sits before the
stage's second ReLU exactly as certgrad's NetSpec emits it (the same function:
ReLU is monotone). BN normalises with the batch's biased variance, eps 1e-5,
with a per-channel scale and shift.

Subcommands (each peer run is its own process, so its peak RSS is its own):
  torch  --batch B --threads T [--warmup W] [--iters N]   PyTorch eager
  jax    --batch B [--warmup W] [--iters N]               jax.jit of grad + SGD
  params                                                  parameter counts
  table  RESULTS.jsonl                                    the comparison table
A peer run prints one JSON line: median/min/max ms per step after warm-up,
peak RSS (ru_maxrss of the whole process, like certgrad's VmHWM) and the
parameter count of the model it ran.
"""

import argparse
import json
import os
import resource
import statistics
import sys
import time

STAGES = [(16, 16), (16, 16), (32, 32), (32, 32)]
HEAD = 64
CLASSES = 10
IN_C, IN_HW = 3, 32
LR = 0.1
EPS = 1e-5


def peak_rss_kib():
    # Linux reports ru_maxrss in KiB.
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss


def summary(times_ms, params, extra):
    s = sorted(times_ms)
    out = {
        "median_ms": statistics.median(s),
        "min_ms": s[0],
        "max_ms": s[-1],
        "all_ms": times_ms,
        "peak_rss_kib": peak_rss_kib(),
        "params": params,
    }
    out.update(extra)
    return out


def time_steps(step, warmup, iters):
    for _ in range(warmup):
        step()
    times = []
    for _ in range(iters):
        t0 = time.perf_counter()
        step()
        times.append((time.perf_counter() - t0) * 1e3)
    return times


# ------------------------------------------------------------------ PyTorch


def torch_model(torch):
    nn = torch.nn

    layers = []
    cin = IN_C
    for c1, c2 in STAGES:
        layers += [nn.Conv2d(cin, c1, 3, padding=1, bias=True), nn.BatchNorm2d(c1, eps=EPS), nn.ReLU()]
        layers += [
            nn.Conv2d(c1, c2, 3, padding=1, bias=True),
            nn.BatchNorm2d(c2, eps=EPS),
            nn.MaxPool2d(2, 2),
            nn.ReLU(),
        ]
        cin = c2
    layers += [nn.Flatten()]
    layers += [nn.Linear(cin * 2 * 2, HEAD), nn.ReLU(), nn.Linear(HEAD, HEAD), nn.ReLU(), nn.Linear(HEAD, CLASSES)]
    return nn.Sequential(*layers)


def torch_params():
    import torch

    return sum(p.numel() for p in torch_model(torch).parameters())


def run_torch(a):
    import torch

    torch.set_num_threads(a.threads)
    try:
        torch.set_num_interop_threads(1)
    except RuntimeError:
        pass
    torch.manual_seed(0)
    model = torch_model(torch).train()
    opt = torch.optim.SGD(model.parameters(), lr=LR)
    loss_fn = torch.nn.CrossEntropyLoss()
    x = torch.randn(a.batch, IN_C, IN_HW, IN_HW)
    y = torch.randint(0, CLASSES, (a.batch,))
    last = {}

    def step():
        opt.zero_grad(set_to_none=True)
        loss = loss_fn(model(x), y)
        loss.backward()
        opt.step()
        last["loss"] = loss.item()

    times = time_steps(step, a.warmup, a.iters)
    params = sum(p.numel() for p in model.parameters())
    return summary(
        times,
        params,
        {
            "peer": f"torch-{a.threads}t",
            "version": torch.__version__,
            "threads": torch.get_num_threads(),
            "loss": last.get("loss"),
        },
    )


# ------------------------------------------------------------------ JAX


def jax_init(jax, jnp):
    key = jax.random.PRNGKey(0)
    params = []

    def normal(shape, fan_in):
        nonlocal key
        key, sub = jax.random.split(key)
        return jax.random.normal(sub, shape, jnp.float32) * (2.0 / fan_in) ** 0.5

    cin = IN_C
    for c1, c2 in STAGES:
        for ci, co in [(cin, c1), (c1, c2)]:
            params.append(
                {
                    "w": normal((co, ci, 3, 3), ci * 9),
                    "b": jnp.zeros((co,), jnp.float32),
                    "gamma": jnp.ones((co,), jnp.float32),
                    "beta": jnp.zeros((co,), jnp.float32),
                }
            )
        cin = c2
    dims = [cin * 2 * 2, HEAD, HEAD, CLASSES]
    for fi, fo in zip(dims[:-1], dims[1:]):
        params.append({"w": normal((fi, fo), fi), "b": jnp.zeros((fo,), jnp.float32)})
    return params


def jax_forward(jax, jnp, params, x):
    lax = jax.lax
    h = x
    for i in range(len(STAGES) * 2):
        p = params[i]
        h = lax.conv_general_dilated(
            h, p["w"], (1, 1), ((1, 1), (1, 1)), dimension_numbers=("NCHW", "OIHW", "NCHW")
        )
        h = h + p["b"][None, :, None, None]
        mean = jnp.mean(h, axis=(0, 2, 3), keepdims=True)
        var = jnp.mean(jnp.square(h - mean), axis=(0, 2, 3), keepdims=True)
        h = (h - mean) * lax.rsqrt(var + EPS)
        h = h * p["gamma"][None, :, None, None] + p["beta"][None, :, None, None]
        if i % 2 == 1:
            h = lax.reduce_window(h, -jnp.inf, lax.max, (1, 1, 2, 2), (1, 1, 2, 2), "VALID")
        h = jnp.maximum(h, 0.0)
    h = h.reshape(h.shape[0], -1)
    dense = params[len(STAGES) * 2 :]
    for j, p in enumerate(dense):
        h = h @ p["w"] + p["b"]
        if j < len(dense) - 1:
            h = jnp.maximum(h, 0.0)
    return h


def jax_params():
    import jax
    import jax.numpy as jnp

    return sum(int(l.size) for l in jax.tree_util.tree_leaves(jax_init(jax, jnp)))


def run_jax(a):
    import jax
    import jax.numpy as jnp

    params = jax_init(jax, jnp)

    def loss_fn(params, x, onehot):
        logits = jax_forward(jax, jnp, params, x)
        return -jnp.mean(jnp.sum(onehot * jax.nn.log_softmax(logits), axis=-1))

    def train_step(params, x, onehot):
        loss, g = jax.value_and_grad(loss_fn)(params, x, onehot)
        new = jax.tree_util.tree_map(lambda p, d: p - LR * d, params, g)
        return new, loss

    step_jit = jax.jit(train_step, donate_argnums=(0,))
    key = jax.random.PRNGKey(1)
    kx, ky = jax.random.split(key)
    x = jax.random.normal(kx, (a.batch, IN_C, IN_HW, IN_HW), jnp.float32)
    onehot = jax.nn.one_hot(jax.random.randint(ky, (a.batch,), 0, CLASSES), CLASSES)
    t0 = time.perf_counter()
    step_jit = step_jit.lower(params, x, onehot).compile()
    compile_ms = (time.perf_counter() - t0) * 1e3
    state = {"params": params, "loss": None}

    def step():
        new, loss = step_jit(state["params"], x, onehot)
        jax.block_until_ready(new)
        state["params"], state["loss"] = new, loss

    times = time_steps(step, a.warmup, a.iters)
    count = sum(int(l.size) for l in jax.tree_util.tree_leaves(state["params"]))
    return summary(
        times,
        count,
        {
            "peer": "jax",
            "version": jax.__version__,
            "compile_ms": compile_ms,
            "loss": float(state["loss"]),
        },
    )


# ------------------------------------------------------------------ table


def ratio_stats(xs):
    if not xs:
        return "-"
    s = sorted(xs)
    return f"{s[0]:.2f} / {statistics.median(s):.2f} / {s[-1]:.2f}"


def table(a):
    rows = [json.loads(l) for l in open(a.results) if l.strip()]
    by = {}
    for r in rows:
        by.setdefault(r["batch"], {}).setdefault(r["peer"], {})[r["round"]] = r
    order = ["certgrad", "torch-1t", "torch-2t", "jax"]
    for batch in sorted(by):
        runs = by[batch]
        print(f"\ncifar8-bbn SGD train step, batch {batch}: ms/step (median of each run's median; min over runs), peak RSS")
        print(f"  {'peer':<10} {'runs':>4} {'median ms':>10} {'min ms':>9} {'peak RSS MiB':>13}   certgrad/peer paired ratios min / median / max")
        cg = runs.get("certgrad", {})
        peers = [p for p in order if p in runs] + sorted(p for p in runs if p not in order)
        for peer in peers:
            rr = runs[peer]
            meds = [r["median_ms"] for r in rr.values()]
            mins = [r["min_ms"] for r in rr.values()]
            rss = max(r["peak_rss_kib"] or 0 for r in rr.values()) / 1024
            ratios = [cg[k]["median_ms"] / rr[k]["median_ms"] for k in rr if k in cg]
            rtxt = "" if peer == "certgrad" else ratio_stats(ratios)
            print(f"  {peer:<10} {len(rr):>4} {statistics.median(meds):>10.1f} {min(mins):>9.1f} {rss:>13.1f}   {rtxt}")
        t1, t2 = runs.get("torch-1t", {}), runs.get("torch-2t", {})
        best = []
        for k in cg:
            cands = [t[k]["median_ms"] for t in (t1, t2) if k in t]
            if cands:
                best.append(cg[k]["median_ms"] / min(cands))
        if best:
            print(f"  certgrad / PyTorch eager (best of 1 and 2 threads, per round): {ratio_stats(best)}  (target: median <= 1.0)")
        if cg and (t1 or t2):
            cg_rss = max(r["peak_rss_kib"] or 0 for r in cg.values())
            t_rss = min(max(r["peak_rss_kib"] for r in t.values()) for t in (t1, t2) if t)
            print(f"  peak RSS certgrad / PyTorch: {cg_rss / 1024:.1f} / {t_rss / 1024:.1f} MiB = {cg_rss / t_rss:.2f}  (target <= 1.0)")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    t = sub.add_parser("torch")
    t.add_argument("--threads", type=int, required=True)
    j = sub.add_parser("jax")
    for p in (t, j):
        p.add_argument("--batch", type=int, required=True)
        p.add_argument("--warmup", type=int, default=3)
        p.add_argument("--iters", type=int, default=10)
    pc = sub.add_parser("params")
    pc.add_argument("--peers", default="torch,jax")
    tb = sub.add_parser("table")
    tb.add_argument("results")
    a = ap.parse_args()
    if a.cmd == "torch":
        print(json.dumps(run_torch(a)))
    elif a.cmd == "jax":
        print(json.dumps(run_jax(a)))
    elif a.cmd == "params":
        out = {}
        for peer in a.peers.split(","):
            if peer == "torch":
                out["torch"] = torch_params()
            elif peer == "jax":
                out["jax"] = jax_params()
        print(json.dumps(out))
    else:
        table(a)


if __name__ == "__main__":
    sys.exit(main())
