#!/usr/bin/env python3
"""bench_peers.py: the peers of `certgrad bench step` for cifar8-bbn (PyTorch
eager and JAX) and for mobilenetv2 and resnet34 at 224² (PyTorch eager), and
ViT-Tiny at 224² (PyTorch eager), and the table that compares them (driven
by scripts/bench_peers.sh).

One train step of cifar8-bbn (docs/nets.md §2 with true batch-statistics BN):
four stages of conv3x3(bias) -> BN -> ReLU -> conv3x3(bias) -> BN -> maxpool
2x2/s2 -> ReLU, channels 16,16 | 16,16 | 32,32 | 32,32, spatial 32->16->8->4->2,
flatten 128, dense 128->64->ReLU->64->ReLU->10, softmax cross-entropy (mean
over the batch), plain SGD (theta' = theta - lr*g). The pool sits before the
stage's second ReLU exactly as certgrad's NetSpec emits it (the same function:
ReLU is monotone). BN normalises with the batch's biased variance, eps 1e-5,
with a per-channel scale and shift.

Subcommands (each peer run is its own process, so its peak RSS is its own):
  torch  --batch B --threads T [--net NET] [--warmup W] [--iters N]
                                                          PyTorch eager
  jax    --batch B [--warmup W] [--iters N]               jax.jit of grad + SGD
  params [--net NET]                                      parameter counts
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


def torch_conv_bn(nn, cin, cout, k, stride, groups=1, act=None):
    """Bias-free conv (symmetric (k-1)/2 padding) -> batch-stat BN -> act."""
    layers = [
        nn.Conv2d(cin, cout, k, stride, (k - 1) // 2, groups=groups, bias=False),
        nn.BatchNorm2d(cout, eps=EPS),
    ]
    return layers + ([act()] if act else [])


def torch_mobilenetv2(torch):
    """MobileNetV2 as docs/nets.md §4 and certgrad's `mobilenetv2` (K=10): the
    (t, c, n, s) table, ReLU6, no conv biases, head 1x1 320->1280, GAP, dense.
    Strided depthwise convs pad symmetrically (torchvision's choice) where
    certgrad pads XLA-SAME (0, 1): same shapes and FLOPs, shifted windows."""
    nn = torch.nn

    class InvertedResidual(nn.Module):
        def __init__(self, cin, cout, stride, t):
            super().__init__()
            hidden = cin * t
            layers = torch_conv_bn(nn, cin, hidden, 1, 1, act=nn.ReLU6) if t != 1 else []
            layers += torch_conv_bn(nn, hidden, hidden, 3, stride, groups=hidden, act=nn.ReLU6)
            layers += torch_conv_bn(nn, hidden, cout, 1, 1)
            self.body = nn.Sequential(*layers)
            self.skip = stride == 1 and cin == cout

        def forward(self, x):
            return x + self.body(x) if self.skip else self.body(x)

    table = [(1, 16, 1, 1), (6, 24, 2, 2), (6, 32, 3, 2), (6, 64, 4, 2), (6, 96, 3, 1), (6, 160, 3, 2), (6, 320, 1, 1)]
    layers = torch_conv_bn(nn, 3, 32, 3, 2, act=nn.ReLU6)
    cin = 32
    for t, c, n, s in table:
        for i in range(n):
            layers.append(InvertedResidual(cin, c, s if i == 0 else 1, t))
            cin = c
    layers += torch_conv_bn(nn, cin, 1280, 1, 1, act=nn.ReLU6)
    layers += [nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(1280, CLASSES)]
    return nn.Sequential(*layers)


def torch_resnet34(torch):
    """ResNet-34 as docs/nets.md §3 and certgrad's `resnet34` (K=10): 7x7/s2 stem,
    3x3/s2 max pool, basic blocks [3, 4, 6, 3] with 1x1/s2 projection skips,
    no conv biases, batch-stat BN, GAP, dense."""
    nn = torch.nn

    class Basic(nn.Module):
        def __init__(self, cin, cout, stride):
            super().__init__()
            self.body = nn.Sequential(
                *torch_conv_bn(nn, cin, cout, 3, stride, act=nn.ReLU), *torch_conv_bn(nn, cout, cout, 3, 1)
            )
            self.proj = (
                nn.Sequential(*torch_conv_bn(nn, cin, cout, 1, stride)) if stride != 1 or cin != cout else None
            )
            self.relu = nn.ReLU()

        def forward(self, x):
            return self.relu(self.body(x) + (self.proj(x) if self.proj is not None else x))

    layers = torch_conv_bn(nn, 3, 64, 7, 2, act=nn.ReLU) + [nn.MaxPool2d(3, 2, 1)]
    cin = 64
    for i, (c, n) in enumerate([(64, 3), (128, 4), (256, 6), (512, 3)]):
        for j in range(n):
            layers.append(Basic(cin, c, 2 if (j == 0 and i > 0) else 1))
            cin = c
    layers += [nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(512, CLASSES)]
    return nn.Sequential(*layers)


def torch_vit_tiny(torch):
    """ViT-Tiny/16 as docs/nets.md §8 and certgrad's `vit-tiny` (K=10): 16x16/s16
    patch conv with bias, learned CLS token prepended, learned positional
    embedding [197, 192] added; 12 pre-norm blocks x + MHSA(LN x) (3 heads,
    separate Q/K/V/O projections with biases, scale 1/sqrt(64)), then
    x + fc2(GELU_tanh(fc1(LN x))) (MLP 768); head LN -> CLS token -> dense.
    LN eps 1e-5. torch's softmax shifts by the row max; certgrad's does not
    (the same function)."""
    nn = torch.nn
    dim, depth, heads, mlp, patch, tokens = 192, 12, 3, 768, 16, (224 // 16) ** 2 + 1

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.ln1 = nn.LayerNorm(dim, eps=EPS)
            self.q, self.k, self.v, self.o = (nn.Linear(dim, dim) for _ in range(4))
            self.ln2 = nn.LayerNorm(dim, eps=EPS)
            self.fc1 = nn.Linear(dim, mlp)
            self.fc2 = nn.Linear(mlp, dim)
            self.act = nn.GELU(approximate="tanh")

        def forward(self, x):
            n, t, _ = x.shape
            h = self.ln1(x)
            split = lambda z: z.reshape(n, t, heads, dim // heads).transpose(1, 2)
            q, k, v = split(self.q(h)), split(self.k(h)), split(self.v(h))
            s = torch.softmax(q @ k.transpose(-2, -1) * (dim // heads) ** -0.5, dim=-1)
            x = x + self.o((s @ v).transpose(1, 2).reshape(n, t, dim))
            return x + self.fc2(self.act(self.fc1(self.ln2(x))))

    class ViT(nn.Module):
        def __init__(self):
            super().__init__()
            self.embed = nn.Conv2d(3, dim, patch, patch, bias=True)
            self.cls = nn.Parameter(torch.zeros(1, 1, dim))
            self.pos = nn.Parameter(torch.randn(1, tokens, dim) * 0.02)
            self.blocks = nn.Sequential(*(Block() for _ in range(depth)))
            self.ln = nn.LayerNorm(dim, eps=EPS)
            self.head = nn.Linear(dim, CLASSES)

        def forward(self, x):
            x = self.embed(x).flatten(2).transpose(1, 2)
            x = torch.cat([self.cls.expand(x.shape[0], -1, -1), x], dim=1) + self.pos
            return self.head(self.ln(self.blocks(x))[:, 0])

    return ViT()


# Per net: the torch model and its input (channels, H, W).
TORCH_NETS = {
    "cifar8-bbn": (torch_model, (IN_C, IN_HW, IN_HW)),
    "mobilenetv2": (torch_mobilenetv2, (3, 224, 224)),
    "resnet34": (torch_resnet34, (3, 224, 224)),
    "vit-tiny": (torch_vit_tiny, (3, 224, 224)),
}


def torch_params(net="cifar8-bbn"):
    import torch

    return sum(p.numel() for p in TORCH_NETS[net][0](torch).parameters())


def run_torch(a):
    import torch

    torch.set_num_threads(a.threads)
    try:
        torch.set_num_interop_threads(1)
    except RuntimeError:
        pass
    torch.manual_seed(0)
    build, (c, h, w) = TORCH_NETS[a.net]
    model = build(torch).train()
    opt = torch.optim.SGD(model.parameters(), lr=LR)
    loss_fn = torch.nn.CrossEntropyLoss()
    x = torch.randn(a.batch, c, h, w)
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
            "net": a.net,
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
        key = (r.get("net", "cifar8-bbn"), r["batch"])
        by.setdefault(key, {}).setdefault(r["peer"], {})[r["round"]] = r
    order = ["certgrad", "torch-1t", "torch-2t", "jax"]
    for net, batch in sorted(by):
        runs = by[(net, batch)]
        print(f"\n{net} SGD train step, batch {batch}: ms/step (median of each run's median; min over runs), peak RSS")
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
            # The targets: half of PyTorch's time on cifar8-bbn (first bar
            # 0.7), at most PyTorch's on the big nets.
            target = "median <= 0.5, first bar 0.7" if net == "cifar8-bbn" else "median <= 1.0"
            print(f"  certgrad / PyTorch eager (best of 1 and 2 threads, per round): {ratio_stats(best)}  (target: {target})")
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
    t.add_argument("--net", default="cifar8-bbn", choices=sorted(TORCH_NETS))
    pc = sub.add_parser("params")
    pc.add_argument("--peers", default="torch,jax")
    pc.add_argument("--net", default="cifar8-bbn", choices=sorted(TORCH_NETS))
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
                out["torch"] = torch_params(a.net)
            elif peer == "jax" and a.net == "cifar8-bbn":
                out["jax"] = jax_params()
        print(json.dumps(out))
    else:
        table(a)


if __name__ == "__main__":
    sys.exit(main())
