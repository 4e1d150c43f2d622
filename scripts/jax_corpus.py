#!/usr/bin/env python3
"""jax_corpus.py: realistic JAX programs, written the way JAX users write them
(flax.linen models, optax optimizers, integer-label cross-entropy, lax.scan,
jax.random, jnp.take / .at[] / sort / top_k, argmax accuracy), judged against
certgrad end to end.

Owns the corpus and its five checks per program:
  run       the jitted train step exported with jax.jit(step).lower(...).as_text();
            `certgrad run` on its inputs; every output within 1e-4 norm-wise of
            JAX (integers equal)
  vjp       the loss as a function of the float inputs and jax.vjp of it, both
            exported; `certgrad check-vjp` must CERTIFY (exit 0)
  bug       one planted bug per program: the first shape-preserving mutation of
            the vjp text (multiply→add, add→subtract, …, scanning from the
            results backwards) that XLA itself shows changes the gradient at a
            random point; `certgrad check-vjp` must REFUTE it (exit 1)
  step      `certgrad certify-step` on the exported train step alone (it finds
            the loss, the parameters and the gradient each update reads): must
            CERTIFY (exit 0); a program whose custom_vjp rule is wrong must be
            REFUTED (exit 1)
  step-bug  one planted bug in the step's backward: the first mutation, from
            the top of the step, after which XLA shows every one-element output
            (loss, accuracy) unchanged and some update changed;
            `certgrad certify-step` must REFUTE it (exit 1); whether its
            localisation names the planted line is counted and reported
One line per program and check with its time, then the totals; exit 1 when a
check fails (a certgrad error counts as a failure: these are the programs a JAX
user brings).

The f64 arbiter (run check). Some outputs' true value is ~0 and f32 noise is
amplified (a conv bias before BatchNorm has gradient exactly 0; Adam divides
it by its own sqrt), so no f32 implementation agrees with another to 1e-4
there. An output that misses 1e-4 against JAX-f32 is referred to float64: the
same exported text with every f32 turned into f64 (`f64_text`; random bits
are still drawn as ui32 and converted after the bitcast) runs on XLA's CPU
backend. The output then passes iff BOTH
  (a) it is ill-conditioned in f32: JAX-f32 itself misses 1e-4 against f64
      (||jax32 - f64|| / ||f64|| > 1e-4), and
  (b) certgrad is no further from f64 than ARBITER_FACTOR times JAX-f32 is:
      ||cg - f64|| <= ARBITER_FACTOR * ||jax32 - f64||.
A well-conditioned output (JAX-f32 within 1e-4 of f64) never goes to the
arbiter: for it the 1e-4-against-JAX criterion is final. Each referred output
is printed with the three errors.

Usage: jax_corpus.py --out DIR --certgrad BIN [--only NAME ...]
Needs jax, flax, optax (scripts/jax_corpus_check.sh installs them).
"""

from __future__ import annotations

import argparse
import os
import re
import struct
import subprocess
import sys
import time

import numpy as np

import jax

jax.config.update("jax_platforms", "cpu")
import flax.linen as nn  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import optax  # noqa: E402
from jax import lax  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from compare_npy import errors, xla_run_text  # noqa: E402

RUN_THRESHOLD = 1e-4
# The arbiter's factor: certgrad's distance from f64 may be at most this many
# times JAX-f32's own (two f32 implementations that sum in different orders
# land at comparable, not equal, distances from the f64 value).
ARBITER_FACTOR = 4.0


def ce_int(logits, labels):
    return optax.softmax_cross_entropy_with_integer_labels(logits, labels).mean()


def accuracy(logits, labels):
    return jnp.mean(jnp.argmax(logits, -1) == labels)


# ----------------------------------------------------------------- models
class MLP(nn.Module):
    @nn.compact
    def __call__(self, x):
        x = nn.relu(nn.Dense(32)(x))
        return nn.Dense(10)(x)


class CNN(nn.Module):
    @nn.compact
    def __call__(self, x, train=True):
        x = nn.Conv(8, (3, 3))(x)
        x = nn.BatchNorm(use_running_average=not train, momentum=0.9)(x)
        x = nn.relu(x)
        x = nn.max_pool(x, (2, 2), (2, 2))
        x = nn.Conv(8, (3, 3), feature_group_count=8)(x)  # depthwise
        x = nn.swish(x)
        x = x.mean(axis=(1, 2))
        return nn.Dense(10)(x)


class Block(nn.Module):
    @nn.compact
    def __call__(self, x):
        h = nn.LayerNorm()(x)
        h = nn.MultiHeadDotProductAttention(num_heads=2, qkv_features=16)(h, h)
        x = x + h
        h = nn.LayerNorm()(x)
        h = nn.Dense(16)(nn.gelu(nn.Dense(32)(h)))
        x = x + h
        return nn.Dense(5)(x.mean(axis=1))


class GRUClassifier(nn.Module):
    @nn.compact
    def __call__(self, xs):
        cell = nn.GRUCell(features=12)
        carry = cell.initialize_carry(jax.random.key(0), xs[:, 0].shape)
        scan = nn.scan(lambda c, carry, x: c(carry, x), variable_broadcast="params",
                       split_rngs={"params": False}, in_axes=1, out_axes=1)
        carry, _ = scan(cell, carry, xs)
        return nn.Dense(4)(carry)


class VAE(nn.Module):
    @nn.compact
    def __call__(self, x, key):
        h = nn.relu(nn.Dense(16)(x))
        mu, logvar = nn.Dense(4)(h), nn.Dense(4)(h)
        z = mu + jnp.exp(0.5 * logvar) * jax.random.normal(key, mu.shape)
        rec = nn.sigmoid(nn.Dense(x.shape[-1])(nn.relu(nn.Dense(16)(z))))
        return rec, mu, logvar


class EmbedBag(nn.Module):
    @nn.compact
    def __call__(self, tokens):
        e = nn.Embed(50, 8)(tokens)
        return nn.Dense(3)(e.mean(axis=1))


@jax.custom_vjp
def relu_rule(x):
    return jnp.maximum(x, 0.0)


def _relu_fwd(x):
    return relu_rule(x), x


def _relu_bwd(x, g):
    return (jnp.where(x > 0.0, g, 0.0),)


relu_rule.defvjp(_relu_fwd, _relu_bwd)


@jax.custom_vjp
def relu_wrong_rule(x):
    return jnp.maximum(x, 0.0)


def _relu_wrong_bwd(x, g):
    # The mask of a shifted ReLU (x > 0.5): a copy-paste bug that keeps every shape.
    return (jnp.where(x > 0.5, g, 0.0),)


relu_wrong_rule.defvjp(_relu_fwd, _relu_wrong_bwd)


class RuleMLP(nn.Module):
    """An MLP whose activation is a hand-written custom_vjp rule."""
    act: object

    @nn.compact
    def __call__(self, x):
        return nn.Dense(10)(self.act(nn.Dense(32)(x)))


# --------------------------------------------------------------- programs
def rng(seed):
    return np.random.default_rng(seed)


def classifier(name, model, x, y, tx, extra_loss=None):
    """A program: model params + optimizer state + batch → (params', state', loss, acc)."""
    variables = model.init(jax.random.key(1), x)
    params = variables["params"]
    opt_state = tx.init(params)

    def loss_fn(params, x, y):
        logits = model.apply({"params": params}, x)
        loss = ce_int(logits, y)
        if extra_loss is not None:
            loss = loss + extra_loss(params)
        return loss, logits

    def step(params, opt_state, x, y):
        (loss, logits), g = jax.value_and_grad(loss_fn, has_aux=True)(params, x, y)
        updates, opt_state = tx.update(g, opt_state, params)
        return optax.apply_updates(params, updates), opt_state, loss, accuracy(logits, y)

    return dict(name=name, step=step, step_args=(params, opt_state, x, y),
                loss=lambda p, x, y: loss_fn(p, x, y)[0], loss_args=(params, x, y))


def programs():
    out = []
    r = rng(0)
    x = r.normal(size=(8, 12)).astype(np.float32)
    y = r.integers(0, 10, size=8).astype(np.int32)
    out.append(classifier("mlp_adamw", MLP(), x, y, optax.adamw(1e-3, weight_decay=1e-2)))
    out.append(classifier("mlp_clip_sgd", MLP(), x, y,
                          optax.chain(optax.clip_by_global_norm(0.5), optax.sgd(0.1, momentum=0.9))))
    out.append(classifier("mlp_cosine_schedule", MLP(), x, y,
                          optax.adam(optax.warmup_cosine_decay_schedule(0.0, 1e-2, 5, 50))))
    out.append(classifier("mlp_rmsprop", MLP(), x, y, optax.rmsprop(1e-3)))
    out.append(classifier("mlp_custom_vjp_rule", RuleMLP(relu_rule), x, y, optax.sgd(0.1)))
    wrong = classifier("mlp_custom_vjp_wrong", RuleMLP(relu_wrong_rule), x, y, optax.sgd(0.1))
    wrong["wrong_rule"] = True
    out.append(wrong)

    # CNN with BatchNorm: mutable batch statistics thread through the step.
    img = r.normal(size=(4, 8, 8, 3)).astype(np.float32)
    lab = r.integers(0, 10, size=4).astype(np.int32)
    cnn = CNN()
    v = cnn.init(jax.random.key(2), img)
    tx = optax.sgd(0.05, momentum=0.9)

    def cnn_loss(params, stats, img, lab):
        logits, upd = cnn.apply({"params": params, "batch_stats": stats}, img, mutable=["batch_stats"])
        return ce_int(logits, lab), (logits, upd["batch_stats"])

    def cnn_step(params, stats, opt_state, img, lab):
        (loss, (logits, stats)), g = jax.value_and_grad(cnn_loss, has_aux=True)(params, stats, img, lab)
        updates, opt_state = tx.update(g, opt_state, params)
        return optax.apply_updates(params, updates), stats, opt_state, loss, accuracy(logits, lab)

    out.append(dict(name="cnn_batchnorm_sgd", step=cnn_step,
                    step_args=(v["params"], v["batch_stats"], tx.init(v["params"]), img, lab),
                    loss=lambda p, s, i, l: cnn_loss(p, s, i, l)[0],
                    loss_args=(v["params"], v["batch_stats"], img, lab)))

    seq = r.normal(size=(2, 6, 16)).astype(np.float32)
    out.append(classifier("transformer_block_adamw", Block(), seq, r.integers(0, 5, 2).astype(np.int32),
                          optax.adamw(1e-3)))
    xs = r.normal(size=(3, 5, 4)).astype(np.float32)
    out.append(classifier("gru_scan_adam", GRUClassifier(), xs, r.integers(0, 4, 3).astype(np.int32),
                          optax.adam(1e-2)))
    tokens = r.integers(0, 50, size=(4, 7)).astype(np.int32)
    out.append(classifier("embed_take_adamw", EmbedBag(), tokens, r.integers(0, 3, 4).astype(np.int32),
                          optax.adamw(1e-3)))

    # VAE: jax.random inside the step, the key an input.
    vae = VAE()
    xv = r.uniform(size=(4, 10)).astype(np.float32)
    key = jax.random.key_data(jax.random.key(3))
    pv = vae.init(jax.random.key(4), xv, jax.random.key(5))["params"]
    txv = optax.adam(1e-3)

    def vae_loss(params, xv, key):
        rec, mu, logvar = vae.apply({"params": params}, xv, jax.random.wrap_key_data(key))
        bce = -jnp.mean(xv * jnp.log(rec + 1e-6) + (1 - xv) * jnp.log(1 - rec + 1e-6))
        kl = -0.5 * jnp.mean(1 + logvar - mu ** 2 - jnp.exp(logvar))
        return bce + kl

    def vae_step(params, opt_state, xv, key):
        loss, g = jax.value_and_grad(vae_loss)(params, xv, key)
        updates, opt_state = txv.update(g, opt_state, params)
        return optax.apply_updates(params, updates), opt_state, loss

    out.append(dict(name="vae_random_adam", step=vae_step, step_args=(pv, txv.init(pv), xv, key),
                    loss=vae_loss, loss_args=(pv, xv, key)))

    # Indexing: sort, top_k, scatter-add, take — a ranking loss by hand.
    w0 = r.normal(size=(12, 6)).astype(np.float32)
    feats = r.normal(size=(5, 12)).astype(np.float32)
    idx = np.array([4, 1, 1, 0, 3], np.int32)

    def rank_loss(w, feats, idx):
        scores = feats @ w
        top, which = lax.top_k(scores, 3)
        srt = jnp.sort(scores, axis=-1)
        pooled = jnp.zeros((5, 6)).at[idx].add(scores)
        picked = jnp.take_along_axis(scores, which, axis=-1)
        return jnp.mean(top) - 0.1 * jnp.mean(srt[:, :2]) + 0.01 * jnp.sum(pooled ** 2) + jnp.mean(picked)

    def rank_step(w, feats, idx):
        loss, g = jax.value_and_grad(rank_loss)(w, feats, idx)
        return w - 0.1 * g, loss

    out.append(dict(name="indexing_sort_topk_scatter", step=rank_step, step_args=(w0, feats, idx),
                    loss=rank_loss, loss_args=(w0, feats, idx)))
    return out


# ------------------------------------------------------------------ export
def _hex_f32_to_f64(m):
    x = struct.unpack(">f", bytes.fromhex(m.group(1)))[0]
    return "dense<0x%016X>" % struct.unpack(">Q", struct.pack(">d", x))[0]


def f64_text(text):
    """The exported f32 program with every f32 tensor made f64 (constants
    keep their f32-rounded values; hex literals re-encoded). A bitcast to f32
    (random bits → uniform floats) stays f32 and is converted after."""
    out = []
    for line in text.split("\n"):
        m = re.match(r"^(\s*)%(\S+) = stablehlo\.bitcast_convert (%\S+) : \((tensor<[^>]*>)\) -> "
                     r"(tensor<([^>]*)xf32>)$", line)
        if m:
            ind, res, src, sty, rty, shape = m.groups()
            out.append(f"{ind}%bits_{res} = stablehlo.bitcast_convert {src} : ({sty}) -> {rty}")
            out.append(f"{ind}%{res} = stablehlo.convert %bits_{res} : ({rty}) -> tensor<{shape}xf64>")
            continue
        if "f32" in line:
            line = re.sub(r"dense<0x([0-9A-Fa-f]{8})>", _hex_f32_to_f64, line)
        out.append(re.sub(r"\bf32\b", "f64", line).replace("xf32>", "xf64>"))
    return "\n".join(out)


def f64_reference(d, n_in):
    """The step's outputs computed in f64 by XLA (see `f64_text`), or the
    reason there are none."""
    with open(os.path.join(d, "step.mlir")) as fh:
        text = f64_text(fh.read())
    ins = [np.load(os.path.join(d, f"in_{k}.npy")) for k in range(n_in)]
    ins = [a.astype(np.float64) if a.dtype == np.float32 else a for a in ins]
    try:
        with jax.enable_x64(True):
            return xla_run_text(text, ins)
    except Exception as e:  # noqa: BLE001 - reported as "no arbiter"
        return str(e).splitlines()[0][:120]


def arbiter(d, n_in, expected, got):
    """Refers the outputs that miss RUN_THRESHOLD to f64 (module docs):
    (ok, lines) with one line per referred output."""
    missed = [k for k, (g, e) in enumerate(zip(got, expected))
              if g.shape != e.shape or errors(g.astype(e.dtype), e)[0] > RUN_THRESHOLD]
    if not missed:
        return True, []
    ref = f64_reference(d, n_in)
    if isinstance(ref, str):
        return False, [f"      no f64 arbiter: {ref}"]
    ok, lines = True, []
    for k in missed:
        g, e, r = got[k], expected[k], ref[k]
        if g.shape != e.shape or e.dtype.kind != "f":
            ok = False
            lines.append(f"      out {k}: shape/dtype mismatch or integer output, not arbitrated")
            continue
        cg_jax = errors(g.astype(e.dtype), e)[0]
        cg64 = errors(g.astype(np.float64), r)[0]
        jax64 = errors(e.astype(np.float64), r)[0]
        ill = jax64 > RUN_THRESHOLD
        passed = ill and cg64 <= ARBITER_FACTOR * jax64
        ok &= passed
        why = ("ill-conditioned, certgrad within the factor" if passed else
               "well-conditioned: 1e-4 against JAX is final" if not ill else
               f"certgrad more than {ARBITER_FACTOR:g}x further from f64 than JAX")
        lines.append(f"      out {k} {e.shape}: certgrad-vs-JAX {cg_jax:.1e}, certgrad-vs-f64 {cg64:.1e}, "
                     f"JAX-f32-vs-f64 {jax64:.1e} → {'PASS' if passed else 'FAIL'} ({why})")
    return ok, lines


def flat_fn(fn, args):
    leaves, tree = jax.tree_util.tree_flatten(args)

    def f(*flat):
        return jax.tree_util.tree_leaves(fn(*jax.tree_util.tree_unflatten(tree, flat)))

    return f, [np.asarray(l) for l in leaves]


def float_mask(leaves):
    return [np.issubdtype(l.dtype, np.floating) for l in leaves]


def export(prog, out):
    d = os.path.join(out, prog["name"])
    os.makedirs(d, exist_ok=True)
    f, leaves = flat_fn(prog["step"], prog["step_args"])
    with open(os.path.join(d, "step.mlir"), "w") as fh:
        fh.write(jax.jit(f, keep_unused=True).lower(*leaves).as_text())
    for k, l in enumerate(leaves):
        np.save(os.path.join(d, f"in_{k}.npy"), l)
    expected = [np.asarray(o) for o in jax.jit(f, keep_unused=True)(*leaves)]
    loss, lleaves = flat_fn(prog["loss"], prog["loss_args"])
    mask = float_mask(lleaves)

    def loss_flat(*a):
        return loss(*a)[0]

    def bwd(*a):
        n = len(lleaves)
        primals, ct = a[:n], a[n]
        fl = [i for i in range(n) if mask[i]]

        def g(*fa):
            full = list(primals)
            for i, v in zip(fl, fa):
                full[i] = v
            return loss_flat(*full)

        return jax.vjp(g, *[primals[i] for i in fl])[1](ct)

    ct = np.float32(1.0)
    with open(os.path.join(d, "fwd.mlir"), "w") as fh:
        fh.write(jax.jit(loss_flat, keep_unused=True).lower(*lleaves).as_text())
    bwd_text = jax.jit(bwd, keep_unused=True).lower(*lleaves, ct).as_text()
    with open(os.path.join(d, "bwd.mlir"), "w") as fh:
        fh.write(bwd_text)
    return d, len(leaves), expected, lleaves, bwd_text


MUTATIONS = [("multiply", "add"), ("add", "subtract"), ("subtract", "add"), ("divide", "multiply"),
             ("maximum", "minimum")]


def plant_bug(bwd_text, lleaves):
    """The first mutation (from the last op backwards) that XLA shows changes
    the gradient at a random point: (text, description) or None."""
    r = rng(7)
    point = [(r.normal(size=l.shape).astype(l.dtype) if np.issubdtype(l.dtype, np.floating) else l)
             for l in lleaves] + [np.float32(1.0)]
    truth = xla_run_text(bwd_text, point)
    lines = bwd_text.split("\n")
    for i, old, new, mutant in mutants(lines, range(len(lines) - 1, -1, -1)):
        try:
            got = xla_run_text(mutant, point)
        except Exception:
            continue
        if any(errors(g, t)[0] > 1e-3 for g, t in zip(got, truth)):
            return mutant, f"line {i + 1}: {old} → {new}"
    return None


def mutants(lines, order, constants=True):
    """(line index, old op, new op, mutated text) for every binary op of
    MUTATIONS on the lines in `order`; `constants=False` skips ops whose two
    operands are constants."""
    for i in order:
        for old, new in MUTATIONS:
            m = re.match(rf"^(\s*%\S+ = )stablehlo\.{old} (%[^,]+, %[^ ]+ : tensor<[^>]*>)$", lines[i])
            if not m or (not constants and re.match(r"%cst\S*, %cst", m.group(2))):
                continue
            yield i, old, new, "\n".join(lines[:i] + [f"{m.group(1)}stablehlo.{new} {m.group(2)}"] + lines[i + 1:])


def plant_step_bug(step_text, leaves):
    """The first mutation of the step, from the top, that XLA shows leaves
    every one-element output (the loss, an accuracy) unchanged and changes an
    update: a bug in the backward (or in a value only the backward reads).
    (text, description) or None."""
    r = rng(11)
    point = [(r.normal(size=l.shape).astype(l.dtype) * 0.5 if np.issubdtype(l.dtype, np.floating) else l)
             for l in leaves]
    truth = xla_run_text(step_text, point)
    scalar = [t.size == 1 for t in truth]
    lines = step_text.split("\n")
    # The backward follows the loss: start after the first line that defines
    # a one-element output of @main (mutating the forward changes the loss).
    start = 0
    main = next(i for i, l in enumerate(lines) if "func.func public @main" in l)
    ret = next(l for l in lines[main:] if l.strip().startswith("return "))
    names = [n.strip() for n in ret.strip()[len("return "):].split(":")[0].split(",")]
    defs = [i for i in range(main, len(lines)) for k, n in enumerate(names)
            if k < len(scalar) and scalar[k] and re.match(rf"^\s*{re.escape(n)} = ", lines[i])]
    if defs:
        start = min(defs) + 1
    # Constant-folded scalars (1/N) scale every gradient alike: a real bug,
    # reported as the scale κ, not as a wrong parameter; not planted here.
    for i, old, new, mutant in mutants(lines, range(start, len(lines)), constants=False):
        try:
            got = xla_run_text(mutant, point)
        except Exception:
            continue
        errs = [errors(g, t)[0] if t.dtype.kind == "f" else float(not np.array_equal(g, t))
                for g, t in zip(got, truth)]
        if all(e <= 1e-6 for e, s in zip(errs, scalar) if s) and \
                any(e > 1e-3 for e, s in zip(errs, scalar) if not s):
            return mutant, f"line {i + 1}: {old} → {new}"
    return None


def verdict_line(msg):
    """certify-step's verdict (or error) line; its progress goes to stderr."""
    lines = [l for l in msg.splitlines() if re.match(r"(CERTIFIED|REFUTED|UNDECIDED|error)", l)]
    return (lines[-1] if lines else msg.splitlines()[-1] if msg else "")[:160]


def check(cmd, timeout=300):
    t0 = time.time()
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
        return p.returncode, (p.stdout + p.stderr).strip(), time.time() - t0
    except subprocess.TimeoutExpired:
        return -1, f"timed out after {timeout} s", time.time() - t0


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", required=True)
    ap.add_argument("--certgrad", required=True)
    ap.add_argument("--only", nargs="*", default=[])
    args = ap.parse_args()
    counts = {"run": [0, 0], "vjp": [0, 0], "bug": [0, 0], "step": [0, 0], "step-bug": [0, 0]}
    # Planted step bugs whose localisation names the planted line (reported, not gating).
    located = [0, 0]
    for prog in programs():
        if args.only and prog["name"] not in args.only:
            continue
        d, n_in, expected, lleaves, bwd_text = export(prog, args.out)
        name = prog["name"]
        # run
        rc, msg, secs = check([args.certgrad, "run", os.path.join(d, "step.mlir"), "--inputs",
                               *[os.path.join(d, f"in_{k}.npy") for k in range(n_in)], "--out",
                               os.path.join(d, "certgrad_out")])
        arbitrated = []
        if rc == 0:
            worst = 0.0
            got = [np.load(os.path.join(d, "certgrad_out", f"out_{k}.npy")) for k in range(len(expected))]
            for g, e in zip(got, expected):
                worst = max(worst, errors(g.astype(e.dtype), e)[0] if g.shape == e.shape else float("inf"))
            ok = worst <= RUN_THRESHOLD
            detail = f"{len(expected)} outputs, max norm-wise error {worst:.1e}"
            if not ok:
                ok, arbitrated = arbiter(d, n_in, expected, got)
                detail += f"; f64 arbiter on {len(arbitrated)} output(s): {'PASS' if ok else 'FAIL'}"
        else:
            ok, detail = False, msg.splitlines()[-1][:160] if msg else f"exit {rc}"
        counts["run"][0 if ok else 1] += 1
        print(f"{'PASS' if ok else 'FAIL'} run  {name:<28} {secs:6.1f}s  {detail}", flush=True)
        for line in arbitrated:
            print(line, flush=True)
        # vjp (a wrong custom_vjp rule makes jax.vjp of the loss wrong: refuted)
        wrong_rule = prog.get("wrong_rule", False)
        rc, msg, secs = check([args.certgrad, "check-vjp", os.path.join(d, "fwd.mlir"), os.path.join(d, "bwd.mlir")])
        ok = rc == (1 if wrong_rule else 0)
        counts["vjp"][0 if ok else 1] += 1
        print(f"{'PASS' if ok else 'FAIL'} vjp  {name:<28} {secs:6.1f}s  {msg.splitlines()[-1][:160] if msg else rc}", flush=True)
        # step: certify-step on the fused step alone
        rc, msg, secs = check([args.certgrad, "certify-step", os.path.join(d, "step.mlir")])
        ok = rc == (1 if wrong_rule else 0)
        counts["step"][0 if ok else 1] += 1
        print(f"{'PASS' if ok else 'FAIL'} step {name:<28} {secs:6.1f}s  {verdict_line(msg) or rc}", flush=True)
        if not ok and msg:
            print("\n".join("      " + l for l in msg.splitlines()[-12:]), flush=True)
        if wrong_rule:
            continue
        # step-bug: a planted backward bug in the fused step
        with open(os.path.join(d, "step.mlir")) as fh:
            step_text = fh.read()
        planted = plant_step_bug(step_text, [np.load(os.path.join(d, f"in_{k}.npy")) for k in range(n_in)])
        if planted is None:
            counts["step-bug"][1] += 1
            print(f"FAIL step-bug {name:<24}    -    no mutation changed only the updates (suite bug)")
        else:
            mutant, what = planted
            with open(os.path.join(d, "step_bug.mlir"), "w") as fh:
                fh.write(mutant)
            rc, msg, secs = check([args.certgrad, "certify-step", os.path.join(d, "step_bug.mlir")])
            ok = rc == 1
            counts["step-bug"][0 if ok else 1] += 1
            last = verdict_line(msg) or str(rc)
            where = [l.strip() for l in msg.splitlines() if l.startswith("  backward:")]
            planted_line = int(what.split(":")[0].split()[-1])
            hit = any(f"step_bug.mlir:{planted_line}:" in l for l in where)
            located[0 if hit else 1] += 1
            if where:
                last += "\n      " + where[0] + f"\n      localised {'at' if hit else 'away from'} the planted line {planted_line}"

            print(f"{'PASS' if ok else 'FAIL'} step-bug {name:<24} {secs:6.1f}s  ({what}) {last}", flush=True)
        # bug
        planted = plant_bug(bwd_text, lleaves)
        if planted is None:
            counts["bug"][1] += 1
            print(f"FAIL bug  {name:<28}    -    no mutation changed the gradient (suite bug)")
            continue
        mutant, what = planted
        with open(os.path.join(d, "bug.mlir"), "w") as fh:
            fh.write(mutant)
        rc, msg, secs = check([args.certgrad, "check-vjp", os.path.join(d, "fwd.mlir"), os.path.join(d, "bug.mlir")])
        ok = rc == 1
        counts["bug"][0 if ok else 1] += 1
        last = msg.splitlines()[-1][:120] if msg else str(rc)
        print(f"{'PASS' if ok else 'FAIL'} bug  {name:<28} {secs:6.1f}s  ({what}) {last}", flush=True)
    print("\njax corpus: " + ", ".join(f"{k} {v[0]} passed / {v[1]} failed" for k, v in counts.items()))
    print(f"jax corpus: certify-step localised {located[0]} of {sum(located)} planted step bugs at the planted line")
    return 1 if any(v[1] for v in counts.values()) else 0


if __name__ == "__main__":
    sys.exit(main())
