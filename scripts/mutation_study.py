#!/usr/bin/env python3
"""mutation_study.py: how many wrong backwards `certgrad check-vjp` kills,
measured on shape-preserving mutants of correct JAX backwards, beside a
finite-difference gradcheck on the same mutants.

Owns the study: mutant generation, the independent equivalence judge, the
two detectors, the table. Not in CI (minutes to tens of minutes); run it as
  ~/.cache/certgrad/venv/bin/python scripts/mutation_study.py --certgrad target/release/certgrad
Pairs (forward, jax.vjp backward): crates/cert/tests/cert_suite/data/{dense,leaky,
conv_relu6,se_block,special}.{fwd,jax}.mlir (scripts/make_pair_fixtures.py)
and, with --corpus NAME…, scripts/jax_corpus.py programs' loss/vjp exports
(default: mlp_adamw, embed_take_adamw).

Mutants (one edit of the backward text each, shapes unchanged):
  binop     add↔subtract, multiply→add/divide, divide→multiply, max↔min
  swap      the operands of subtract / divide / compare swapped
  compare   LT↔LE, GT↔GE, LT↔GT, EQ↔NE
  const     a scalar float constant c → 1.01·c (c ≠ 0) or c + 0.01 (c = 0);
            this moves thresholds 6 → 6.06
  select    the two value operands of a select swapped
  pad       a convolution's padding shifted by one ([l, h] → [l+1, h-1])
  negate    a negate removed (its operand used instead)
Up to --per-pair mutants per pair (a fixed-seed sample of all candidates).

Judge (independent of certgrad): the mutant and the original backward run
on XLA's CPU backend in float64 (scripts/jax_corpus.py `f64_text`) at
--judge-points random points at scales 0.3, 1, 3, 10 (cotangent included);
EQUIVALENT when every output agrees to 1e-9 relative at every point, WRONG
otherwise; a mutant XLA rejects is INVALID (not counted).

Detectors:
  certgrad   `certgrad check-vjp FWD MUTANT` with --timeout seconds: exit 1
             (REFUTED) kills, exit 0 (CERTIFIED) survives, anything else (a
             timeout, UNDECIDED, an error) is counted apart
  gradcheck  torch.autograd.gradcheck's fast mode, in float64 on XLA: for
             3 points × 2 random directions v, (⟨ct, f(x+hv) − f(x−hv)⟩/2h)
             against ⟨bwd(x, ct), v⟩, h = 1e-6, rtol 1e-5, atol 1e-8
On EQUIVALENT mutants a kill is a false alarm.
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import jax  # noqa: E402

jax.config.update("jax_platforms", "cpu")
from compare_npy import xla_run_text  # noqa: E402
from jax_corpus import f64_text  # noqa: E402

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
FIXTURES = ["dense", "leaky", "conv_relu6", "se_block", "special"]
SCALES = [0.3, 1.0, 3.0, 10.0]

BINOPS = {"add": ["subtract"], "subtract": ["add"], "multiply": ["add", "divide"],
          "divide": ["multiply"], "maximum": ["minimum"], "minimum": ["maximum"]}
COMPARES = {"LT": ["LE", "GT"], "LE": ["LT"], "GT": ["GE", "LT"], "GE": ["GT"], "EQ": ["NE"], "NE": ["EQ"]}


def mutants(text):
    """Every candidate: (kind, line number, description, mutant text)."""
    lines = text.split("\n")
    out = []

    def put(i, kind, what, new):
        out.append((kind, i + 1, what, "\n".join(lines[:i] + [new] + lines[i + 1:])))

    for i, line in enumerate(lines):
        m = re.match(r"^(\s*%\S+ = )stablehlo\.(\w+) (%[^,]+), (%[^ ]+)( : tensor<[^>]*>)$", line)
        if m and m.group(2) in BINOPS:
            for new in BINOPS[m.group(2)]:
                put(i, "binop", f"{m.group(2)}→{new}",
                    f"{m.group(1)}stablehlo.{new} {m.group(3)}, {m.group(4)}{m.group(5)}")
            if m.group(2) in ("subtract", "divide") and m.group(3) != m.group(4):
                put(i, "swap", f"{m.group(2)} operands swapped",
                    f"{m.group(1)}stablehlo.{m.group(2)} {m.group(4)}, {m.group(3)}{m.group(5)}")
        m = re.match(r"^(\s*%\S+ = stablehlo\.compare\s+)(\w+)(,\s*)(%[^,]+), (%[^,]+)(,.*)$", line)
        if m and m.group(2) in COMPARES:
            for new in COMPARES[m.group(2)]:
                put(i, "compare", f"{m.group(2)}→{new}",
                    f"{m.group(1)}{new}{m.group(3)}{m.group(4)}, {m.group(5)}{m.group(6)}")
        m = re.match(r"^(\s*%\S+ = stablehlo\.constant dense<)([-0-9.e+]+)(> : tensor<f32>)$", line)
        if m:
            c = float(m.group(2))
            new = c * 1.01 if c != 0 else c + 0.01
            put(i, "const", f"constant {c:g}→{new:g}", f"{m.group(1)}{new:.6e}{m.group(3)}")
        m = re.match(r"^(\s*%\S+ = stablehlo\.select )(%[^,]+), (%[^,]+), (%[^ ]+)( : .*)$", line)
        if m and m.group(3) != m.group(4):
            put(i, "select", "select operands swapped",
                f"{m.group(1)}{m.group(2)}, {m.group(4)}, {m.group(3)}{m.group(5)}")
        m = re.search(r"pad = \[\[(\d+), (\d+)\]", line)
        if m and "convolution" in line and int(m.group(2)) > 0:
            lo, hi = int(m.group(1)), int(m.group(2))
            put(i, "pad", f"pad [{lo}, {hi}]→[{lo + 1}, {hi - 1}]",
                line[:m.start()] + f"pad = [[{lo + 1}, {hi - 1}]" + line[m.end():])
        m = re.match(r"^(\s*(%\S+) = )stablehlo\.negate (%\S+) : (tensor<[^>]*>)$", line)
        if m:
            # The negation dropped: its result becomes a copy of its operand.
            put(i, "negate", "negate removed",
                f"{m.group(1)}stablehlo.reshape {m.group(3)} : ({m.group(4)}) -> {m.group(4)}")
    return out


def signature(text):
    """(shape, dtype) of @main's parameters."""
    head = re.search(r"func\.func public @main\((.*?)\) ->", text).group(1)
    out = []
    for t in re.findall(r"tensor<([^>]*)>", head):
        parts = t.split("x")
        dims, elem = [int(p) for p in parts[:-1]], parts[-1]
        out.append((tuple(dims), {"f32": np.float32, "i32": np.int32, "i64": np.int64}[elem]))
    return out


def run64(text, args):
    with jax.enable_x64(True):
        return [np.asarray(o, np.float64) for o in xla_run_text(text, args)]


class Pair:
    def __init__(self, name, fwd, bwd, fixed=None):
        self.name, self.fwd, self.bwd = name, fwd, bwd
        self.fwd64, self.bwd64 = f64_text(fwd), f64_text(bwd)
        self.sig = signature(bwd)
        self.fixed = fixed or {}  # integer inputs (labels, tokens): fixed values

    def point(self, r, scale):
        args = []
        for k, (shape, dt) in enumerate(self.sig):
            if k in self.fixed:
                args.append(self.fixed[k])
            else:
                args.append(scale * r.normal(size=shape))
        return args

    def float_inputs(self):
        return [k for k in range(len(self.sig) - 1) if k not in self.fixed]


def judge(pair, mutant64, r, n):
    """EQUIVALENT / WRONG / INVALID, by f64 evaluation at n points."""
    try:
        for j in range(n):
            p = pair.point(r, SCALES[j % len(SCALES)])
            a, b = run64(pair.bwd64, p), run64(mutant64, p)
            for x, y in zip(a, b):
                if not np.all(np.isfinite(y)) and np.all(np.isfinite(x)):
                    return "WRONG"
                if np.max(np.abs(x - y)) > 1e-9 * max(1.0, np.max(np.abs(x))):
                    return "WRONG"
    except Exception:  # noqa: BLE001 - XLA rejects the text
        return "INVALID"
    return "EQUIVALENT"


def gradcheck(pair, mutant64, r):
    """True when the finite-difference check flags the mutant."""
    h, rtol, atol = 1e-6, 1e-5, 1e-8
    fl = pair.float_inputs()
    try:
        for _ in range(3):
            p = pair.point(r, 1.0)
            ct = p[-1]
            grads = run64(mutant64, p)
            for _ in range(2):
                v = {k: r.normal(size=pair.sig[k][0]) for k in fl}
                plus = [x + h * v[k] if k in v else x for k, x in enumerate(p[:-1])]
                minus = [x - h * v[k] if k in v else x for k, x in enumerate(p[:-1])]
                fp, fm = run64(pair.fwd64, plus)[0], run64(pair.fwd64, minus)[0]
                fd = float(np.sum(ct * (fp - fm)) / (2 * h))
                an = float(sum(np.sum(g * v[k]) for g, k in zip(grads, fl)))
                if not abs(fd - an) <= atol + rtol * abs(fd):
                    return True
    except Exception:  # noqa: BLE001
        return True
    return False


def certgrad(binary, fwd_path, mutant_path, timeout):
    t0 = time.time()
    try:
        p = subprocess.run([binary, "check-vjp", fwd_path, mutant_path], capture_output=True,
                           text=True, timeout=timeout)
        rc = p.returncode
        verdict = {0: "CERTIFIED", 1: "REFUTED"}.get(rc, f"OTHER(exit {rc})")
        last = (p.stdout + p.stderr).strip().splitlines()
        return verdict, time.time() - t0, last[-1][:100] if last else ""
    except subprocess.TimeoutExpired:
        return "TIMEOUT", time.time() - t0, f"> {timeout} s"


def corpus_pairs(names, out):
    import jax_corpus
    pairs = []
    for prog in jax_corpus.programs():
        if prog["name"] not in names:
            continue
        d, _, _, lleaves, bwd_text = jax_corpus.export(prog, out)
        fwd = open(os.path.join(d, "fwd.mlir")).read()
        fixed = {k: l for k, l in enumerate(lleaves) if not np.issubdtype(l.dtype, np.floating)}
        pairs.append(Pair(prog["name"], fwd, bwd_text, fixed))
    return pairs


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--certgrad", required=True)
    ap.add_argument("--out", default=os.path.join(ROOT, "target", "mutation_study"))
    ap.add_argument("--per-pair", type=int, default=45)
    ap.add_argument("--judge-points", type=int, default=64)
    ap.add_argument("--timeout", type=float, default=60.0)
    ap.add_argument("--corpus", nargs="*", default=["mlp_adamw", "embed_take_adamw"])
    ap.add_argument("--only", nargs="*", default=[])
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)
    data = os.path.join(ROOT, "crates", "cert", "tests", "cert_suite", "data")
    pairs = [Pair(n, open(os.path.join(data, f"{n}.fwd.mlir")).read(),
                  open(os.path.join(data, f"{n}.jax.mlir")).read()) for n in FIXTURES]
    pairs += corpus_pairs(args.corpus, os.path.join(args.out, "corpus"))
    if args.only:
        pairs = [p for p in pairs if p.name in args.only]
    rows = []
    for pair in pairs:
        cands = mutants(pair.bwd)
        pick = np.random.default_rng(11).permutation(len(cands))[: args.per_pair]
        d = os.path.join(args.out, pair.name)
        os.makedirs(d, exist_ok=True)
        fwd_path = os.path.join(d, "fwd.mlir")
        with open(fwd_path, "w") as fh:
            fh.write(pair.fwd)
        for n, c in enumerate(sorted(pick)):
            kind, line, what, text = cands[c]
            r = np.random.default_rng(1000 + n)
            mutant64 = f64_text(text)
            truth = judge(pair, mutant64, r, args.judge_points)
            if truth == "INVALID":
                rows.append((pair.name, kind, line, what, truth, "-", 0.0, "-", ""))
                continue
            path = os.path.join(d, f"m{n:03d}.mlir")
            with open(path, "w") as fh:
                fh.write(text)
            verdict, secs, last = certgrad(args.certgrad, fwd_path, path, args.timeout)
            fd = "killed" if gradcheck(pair, mutant64, np.random.default_rng(2000 + n)) else "survived"
            rows.append((pair.name, kind, line, what, truth, verdict, secs, fd, last))
            flag = ""
            if truth == "WRONG" and verdict != "REFUTED":
                flag = "  <- missed"
            if truth == "EQUIVALENT" and verdict == "REFUTED":
                flag = "  <- FALSE ALARM"
            print(f"{pair.name:<18} {kind:<8} line {line:<4} {what:<28} {truth:<10} certgrad {verdict:<10} "
                  f"{secs:5.1f}s  gradcheck {fd}{flag}", flush=True)
    report(rows)


def report(rows):
    valid = [r for r in rows if r[4] != "INVALID"]
    wrong = [r for r in valid if r[4] == "WRONG"]
    equiv = [r for r in valid if r[4] == "EQUIVALENT"]
    print(f"\n{len(rows)} mutants: {len(rows) - len(valid)} invalid (XLA rejects them), "
          f"{len(wrong)} wrong, {len(equiv)} equivalent (f64 judge)")
    print(f"{'pair':<18} {'wrong':>5} {'cg kill':>7} {'cg surv':>7} {'cg other':>8} {'fd kill':>7} "
          f"{'equiv':>5} {'cg FA':>5} {'fd FA':>5} {'median s':>8} {'max s':>6}")
    names = sorted({r[0] for r in valid}) + ["ALL"]
    for name in names:
        sel = [r for r in valid if name in ("ALL", r[0])]
        w = [r for r in sel if r[4] == "WRONG"]
        e = [r for r in sel if r[4] == "EQUIVALENT"]
        secs = sorted(r[6] for r in sel)
        print(f"{name:<18} {len(w):>5} {sum(r[5] == 'REFUTED' for r in w):>7} "
              f"{sum(r[5] == 'CERTIFIED' for r in w):>7} "
              f"{sum(r[5] not in ('REFUTED', 'CERTIFIED') for r in w):>8} "
              f"{sum(r[7] == 'killed' for r in w):>7} {len(e):>5} "
              f"{sum(r[5] == 'REFUTED' for r in e):>5} {sum(r[7] == 'killed' for r in e):>5} "
              f"{secs[len(secs) // 2] if secs else 0:>8.2f} {max(secs) if secs else 0:>6.1f}")
    missed = [r for r in wrong if r[5] != "REFUTED"]
    if missed:
        print("\nwrong mutants certgrad did not refute:")
        for r in missed:
            print(f"  {r[0]} line {r[2]} {r[3]}: {r[5]} ({r[8]}); gradcheck {r[7]}")
    fa = [r for r in equiv if r[5] == "REFUTED"]
    if fa:
        print("\nequivalent mutants certgrad refuted (false alarms):")
        for r in fa:
            print(f"  {r[0]} line {r[2]} {r[3]}: {r[8]}")


if __name__ == "__main__":
    main()
