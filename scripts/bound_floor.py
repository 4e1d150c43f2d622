"""bound_floor.py: the floor under any worst-case running error bound on
cifar8-bbn's parameter gradients (docs/bound.md).

A bound that holds for ANY IEEE f32 evaluation in ANY summation order must
cover the sequential order of every permutation. In the standard model
fl(a+b) = (a+b)(1+δ), |δ| ≤ u, a sequential sum s₁…sₙ of terms tᵢ errs,
to first order, by Σₖ δₖ·sₖ: with each δₖ = u·sign(sₖ) that is
u·Σₖ|sₖ|. Every parameter gradient of the step ends in such a sum: a conv
weight's over N·H·W positions (Σ x·dy), a BN scale's and shift's over N·H·W
(Σ dy·x̂, Σ dy), a dense layer's over the batch. So even with EXACT inputs
to that last sum, an any-order bound on ‖ĝ − g‖₂ in the standard model is
at least ‖u·max_order Σₖ|sₖ|‖₂ (the max taken here over two orders, the
terms descending and ascending; any order gives a valid floor). This script
computes it in float64 per parameter tensor, relative to ‖g‖₂, with the JAX
model of cifar8-bbn that bench_peers.py checks against certgrad's parameter
count (He-normal weights, zero biases, unit BN scales, random normal
inputs, random labels). A floor above 0.1 means no bound of this kind can
meet "< 10 % of ‖g‖" on that tensor at that point, however the error is
propagated up to that sum.

Usage: python scripts/bound_floor.py [--batch 32,128] [--seeds 3]
Prints one table per batch (medians over seeds, relative to ‖g‖₂): the
charge γ_{n−1}·Σ|t| that `certgrad bound` makes, the floor
u·max_order Σ|sₖ| (see order_floor), the measured error of the same
gradients computed in f32 by XLA-CPU, floor / measured, and how many
tensors' floor exceeds 0.1.
"""

import argparse
import os
import statistics
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bench_peers as bp  # noqa: E402

U = 2.0**-24


def gamma(n):
    return n * U / (1 - n * U)


def order_floor(terms):
    """u·max over two orders of Σₖ|sₖ| per column of `terms` (n, m): the
    first-order worst case of the standard model fl(a+b) = (a+b)(1+δ),
    |δ| ≤ u, for a sequential sum taken in descending or ascending order of
    the terms (each δₖ chosen with the sign of its partial sum sₖ). Any
    bound valid for every order must be at least this, per element."""
    import numpy as np

    t = np.sort(terms, axis=0)
    up = np.abs(np.cumsum(t, axis=0)).sum(axis=0)
    down = np.abs(np.cumsum(t[::-1], axis=0)).sum(axis=0)
    return U * np.maximum(up, down)


def conv_terms_floor(x, dy):
    """order_floor of every conv weight element's N·H·W terms x·dy
    (3×3, stride 1, pad 1), element by element, output channel at a time."""
    import jax
    import numpy as np

    patches = jax.lax.conv_general_dilated_patches(x, (3, 3), (1, 1), ((1, 1), (1, 1)))
    k = patches.shape[1]
    xu = np.asarray(patches).transpose(0, 2, 3, 1).reshape(-1, k)
    du = np.asarray(dy).transpose(0, 2, 3, 1).reshape(-1, dy.shape[1])
    return np.concatenate([order_floor(xu * du[:, [o]]) for o in range(du.shape[1])])


def floors(batch, seed):
    import jax
    import jax.numpy as jnp
    import numpy as np

    jax.config.update("jax_enable_x64", True)
    lax = jax.lax
    params = jax.tree_util.tree_map(lambda a: jnp.asarray(a, jnp.float64), bp.jax_init(jax, jnp))
    key = jax.random.PRNGKey(1000 + seed)
    kx, ky = jax.random.split(key)
    x = jax.random.normal(kx, (batch, bp.IN_C, bp.IN_HW, bp.IN_HW), jnp.float64)
    labels = jax.random.randint(ky, (batch,), 0, bp.CLASSES)
    onehot = jax.nn.one_hot(labels, bp.CLASSES, dtype=jnp.float64)
    n_conv = len(bp.STAGES) * 2
    dn = ("NCHW", "OIHW", "NCHW")

    def conv(h, w):
        return lax.conv_general_dilated(h, w, (1, 1), ((1, 1), (1, 1)), dimension_numbers=dn)

    # The forward with a zero added to every conv output, BN output (before
    # its scale) and dense output, so the gradient w.r.t. each zero is the
    # cotangent dy arriving at that point.
    def forward(params, taps):
        h = x
        saved = []
        for i in range(n_conv):
            p = params[i]
            cin = h
            h = conv(h, p["w"]) + p["b"][None, :, None, None] + taps[i]
            mean = jnp.mean(h, axis=(0, 2, 3), keepdims=True)
            var = jnp.mean(jnp.square(h - mean), axis=(0, 2, 3), keepdims=True)
            xhat = (h - mean) * lax.rsqrt(var + bp.EPS)
            saved.append((cin, xhat))
            xhat = xhat + taps[n_conv + i]
            h = xhat * p["gamma"][None, :, None, None] + p["beta"][None, :, None, None]
            if i % 2 == 1:
                h = lax.reduce_window(h, -jnp.inf, lax.max, (1, 1, 2, 2), (1, 1, 2, 2), "VALID")
            h = jnp.maximum(h, 0.0)
        h = h.reshape(h.shape[0], -1)
        dense = params[n_conv:]
        for j, p in enumerate(dense):
            saved.append((h, None))
            h = h @ p["w"] + p["b"] + taps[2 * n_conv + j]
            if j < len(dense) - 1:
                h = jnp.maximum(h, 0.0)
        logp = jax.nn.log_softmax(h)
        return -jnp.mean(jnp.sum(onehot * logp, axis=1)), saved

    def f32_loss(p, t, xx):
        nonlocal x
        keep, x = x, xx
        try:
            return forward(p, t)[0]
        finally:
            x = keep

    _, saved0 = forward(params, [0.0] * (2 * n_conv + 3))
    taps = []
    for i in range(n_conv):
        cin, _ = saved0[i]
        taps.append(jnp.zeros((batch, params[i]["w"].shape[0], cin.shape[2], cin.shape[3])))
    taps += [jnp.zeros_like(t) for t in taps[:n_conv]]
    for j, p in enumerate(params[n_conv:]):
        taps.append(jnp.zeros((batch, p["w"].shape[1])))

    (_, saved), grads = jax.value_and_grad(lambda p, t: forward(p, t), argnums=(0, 1), has_aux=True)(
        params, taps
    )
    gparams, gtaps = grads
    rows = []
    for i in range(n_conv):
        cin, xhat = saved[i]
        dy = gtaps[i]  # cotangent at the conv output
        dxhat = gtaps[n_conv + i]  # cotangent at x̂ (before the BN scale)
        dbn = dxhat / params[i]["gamma"][None, :, None, None]  # cotangent at the BN output
        w = params[i]["w"]
        n = batch * cin.shape[2] * cin.shape[3]
        # Σ|x·dy| per weight element: the weight VJP of |x| and |dy|.
        _, vjp = jax.vjp(lambda ww: conv(jnp.abs(cin), ww), w)
        abs_w = vjp(jnp.abs(dy))[0]
        rows.append((f"conv{i}.w", n, gparams[i]["w"], abs_w, conv_terms_floor(cin, dy)))
        per_channel = lambda t: np.asarray(t).transpose(0, 2, 3, 1).reshape(n, -1)  # noqa: E731
        rows.append(
            (
                f"bn{i}.gamma",
                n,
                gparams[i]["gamma"],
                jnp.sum(jnp.abs(dbn * xhat), axis=(0, 2, 3)),
                order_floor(per_channel(dbn * xhat)),
            )
        )
        rows.append(
            (
                f"bn{i}.beta",
                n,
                gparams[i]["beta"],
                jnp.sum(jnp.abs(dbn), axis=(0, 2, 3)),
                order_floor(per_channel(dbn)),
            )
        )
    for j, p in enumerate(params[n_conv:]):
        h, _ = saved[n_conv + j]
        dy = gtaps[2 * n_conv + j]
        hn, dn_ = np.asarray(h), np.asarray(dy)
        wterms = (hn[:, :, None] * dn_[:, None, :]).reshape(batch, -1)
        rows.append((f"dense{j}.w", batch, gparams[n_conv + j]["w"], jnp.abs(h).T @ jnp.abs(dy), order_floor(wterms)))
        rows.append((f"dense{j}.b", batch, gparams[n_conv + j]["b"], jnp.sum(jnp.abs(dy), axis=0), order_floor(dn_)))
    # The same gradients computed in f32 by XLA-CPU (its own summation
    # order), for the measured error the floor is compared with.
    p32 = jax.tree_util.tree_map(lambda a: a.astype(jnp.float32), params)
    t32 = [t.astype(jnp.float32) for t in taps]
    x32 = x.astype(jnp.float32)
    with jax.default_matmul_precision("highest"):
        g32, _ = jax.jit(jax.grad(lambda p, t, xx: f32_loss(p, t, xx), argnums=(0, 1)))(p32, t32, x32)
    flat32 = []
    for i in range(n_conv):
        flat32 += [g32[i]["w"], g32[i]["gamma"], g32[i]["beta"]]
    for j in range(3):
        flat32 += [g32[n_conv + j]["w"], g32[n_conv + j]["b"]]
    out = []
    for (name, n, g, abs_sum, floor_elems), gf in zip(rows, flat32):
        gnorm = float(jnp.linalg.norm(g.ravel()))
        charged = gamma(n - 1) * float(jnp.linalg.norm(abs_sum.ravel()))
        floor = float(np.linalg.norm(floor_elems))
        measured = float(jnp.linalg.norm((gf.astype(jnp.float64) - g).ravel()))
        out.append((name, n, gnorm, floor / gnorm, measured / gnorm, charged / gnorm))
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--batch", default="32,128")
    ap.add_argument("--seeds", type=int, default=3)
    a = ap.parse_args()
    for batch in [int(b) for b in a.batch.split(",")]:
        runs = [floors(batch, s) for s in range(a.seeds)]
        print(f"cifar8-bbn, batch {batch}, medians over {a.seeds} seeds, each relative to ‖g‖₂:")
        print("  charged = ‖γ_(n−1)·Σ|t|‖₂ (what `certgrad bound` charges the last sum)")
        print("  floor   = ‖u·max_order Σ|s_k|‖₂ (what any any-order standard-model bound must charge it)")
        print("  err     = ‖g_f32 − g‖₂ measured, XLA-CPU f32 end to end")
        print(f"{'tensor':<12}{'n':>8}{'‖g‖₂':>11}{'charged':>11}{'floor':>11}{'min':>10}{'max':>10}{'err':>11}{'floor/err':>11}")
        over = 0
        ratios_all = []
        for k, (name, n, gnorm, *_rest) in enumerate(runs[0]):
            floors_k = [r[k][3] for r in runs]
            med = statistics.median(floors_k)
            over += med > 0.1
            err = statistics.median([r[k][4] for r in runs])
            charged = statistics.median([r[k][5] for r in runs])
            ratios_all.append(med / err)
            print(
                f"{name:<12}{n:>8}{gnorm:>11.3e}{charged:>11.3e}{med:>11.3e}{min(floors_k):>10.2e}"
                f"{max(floors_k):>10.2e}{err:>11.2e}{med / err:>11.1e}"
            )
        print(f"tensors whose floor exceeds 10 % of ‖g‖₂: {over} of {len(runs[0])}")
        print(f"floor / measured error: median {statistics.median(ratios_all):.2e}\n")


if __name__ == "__main__":
    main()
