#!/usr/bin/env python3
"""reference_pairs.py: each of a third party's StableHLO files (e.g.
brettkoonce/lean4-mlir's rendered forwards and train steps) against
certgrad's own render of the same net and recipe, through `certgrad diff`
(float64, per result, and where the two part).

Usage:
  reference_pairs.py MLIR_DIR [--files A,B,...] [--tsv /tmp/refpairs/pairs.tsv]
      [--work /tmp/refpairs/work] [--seed 0] [--timeout 1800] [--max-memory 14G]
      [--deadline HH:MM] [--certgrad target/release/certgrad] [--list] [--f32]


Nothing is written into the repository. For each file the script
  1. reads the net and recipe from the file's name (NET_RECIPE_train_step,
     NET_fwd_eval, ...; the table NETS and the recipe tokens below) and
     renders certgrad's counterpart, or says which part certgrad lacks;
  2. compares the two signatures (argument and result types in order);
  3. draws one input per argument by the reference's argument names
     (reference_client.roles: data N(0,1), one-hot labels, He-normal
     weights, BN scales near 1, running mean 0 / variance 1), with the
     optimizer state of a later step rather than step 1, so that Adam's
     theta' does not turn a near-zero gradient into lr·sign(g): m ~ N(0, 1e-3),
     v = m_v² + 1e-8, bc1 = 1 − 0.9^10, bc2 = 1 − 0.999^10, EMA shadows near θ;
  4. runs `certgrad diff REFERENCE RENDER --inputs ...` (both evaluated in
     float64 by certgrad's reference evaluator; data-parallel files on their
     replicas with --replicas) and records its verdict, the largest relative
     difference over the results and the op where the two part.
With --f32 (when float64 is too slow: a 224² train step takes more than
25 minutes a side on two cores), step 4 runs both on certgrad's native f32
executor (`certgrad run`) and compares every output in numpy: the largest
relative difference ‖a − b‖/‖a‖ over outputs whose size is above 1e-7 of the
largest output's (a gradient that is zero in exact arithmetic, e.g. a
convolution bias in front of a batch norm, is f32 noise in both), and how
many outputs differ by more than 1e-4. It says how far the two agree in f32,
not that they are the same function.
A reference step that bakes label smoothing into its loss and gradient
(dlogits = softmax − (0.9·onehot + 0.1/K); 94 of the reference project's
steps do, every cross-entropy step of its 224² nets) is compared with
certgrad's render of the same net written as a net file with
label_smoothing = 0.1 (`certgrad nets NET --write-file`, then that one line
changed; the built-in nets do not smooth); the TSV's certgrad column then
says "ls 0.1". A step's weight decay (its constant `%wd`, e.g. 0.05 in the
ImageNet ConvNeXt recipes) is passed as --weight-decay.
One TSV line per file, appended as each finishes (a file the TSV already
has is not run again); the diff's whole output in
WORK/NAME.diff.txt.
"""

import argparse
import datetime
import os
import re
import subprocess
import sys
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import reference_client as rc  # noqa: E402  (the argument parser and roles)

DEFAULT_BIN = os.path.join(os.path.dirname(HERE), "target", "release", "certgrad")

# Reference net prefix -> certgrad net (None: certgrad has no such net).
NETS = {
    "cifar8": "cifar8",
    "cifar8w": "cifar8w",
    "cifar8_bn": "cifar8-bn",
    "cifar8w_bn": None,
    "resnet34": "resnet34",
    "resnet34in": "resnet34-k1000",
    "resnet50": "resnet50",
    "resnet50in": "resnet50-k1000",
    "mobilenetv2": "mobilenetv2",
    "mobilenetv2in": "mobilenetv2-k1000",
    "efficientnet": "efficientnet-b0",
    "efficientnetin": "efficientnet-b0-k1000",
    "mnv4": "mobilenetv4-conv-m",
    "mnv4in": "mobilenetv4-conv-m-k1000",
    "convnext": "convnext-t",
    "convnextin": "convnext-t-k1000",
    "convnextsin": "convnext-s-k1000",
    "vit": "vit-tiny",
    "vitin": "vit-tiny-k1000",
    "vitsin": "vit-s-k1000",
    "vitbin": "vit-b-k1000",
    # certgrad has none of these: named so the table says which.
    "cifar": None,
    "cifar_bn": None,
    "cnn": None,
    "mlp": None,
    "linear": None,
    "convnextbin": None,
    "resnet50in160": None,
}
NET_LACKS = {
    "cifar8w_bn": "the wide CIFAR net with per-example batch norm (certgrad has cifar8w-bbn, batch statistics)",
    "cifar": "the reference's 4-conv CIFAR net (no certgrad net)",
    "cifar_bn": "the reference's 4-conv CIFAR net with BN (no certgrad net)",
    "cnn": "the MNIST CNN (no certgrad net)",
    "mlp": "the MNIST MLP (no certgrad net)",
    "linear": "the MNIST linear model (no certgrad net)",
    "convnextbin": "ConvNeXt-B (certgrad has ConvNeXt-T and -S)",
    "resnet50in160": "ResNet-50 at 160² input (certgrad's ResNet-50 is 224²)",
}
# The reference's optimizer tokens -> certgrad's render flags.
OPTIMIZERS = {
    "adam": ["--optimizer", "adamw"],
    "sgd": ["--optimizer", "sgd"],
    "mom": ["--optimizer", "nesterov"],
    "rms": ["--optimizer", "rmsprop"],
    "lamb": ["--optimizer", "lamb"],
    "ema": ["--optimizer", "adamw", "--ema"],
    "emarms": ["--optimizer", "rmsprop", "--ema"],
}
# OPT [acc] [dp] [N [xM]] [wx] [clip] [drop] [do] [bce]: with acc, N is the
# number of micro-batches K and M the batch; without, N is the batch and M
# the replicas (both also read from the file's signature).
RECIPE_RE = re.compile(
    r"^(?P<opt>emarms|ema|adam|sgd|mom|rms|lamb)?(?P<acc>acc)?(?P<dp>dp)?"
    r"(?P<n1>\d+)?(?:x(?P<n2>\d+))?"
    r"(?P<wx>wx)?(?P<clip>clip)?(?P<drop>drop)?(?P<do>do)?(?P<bce>bce)?$"
)

def split_name(stem):
    """(net prefix, recipe, kind) with kind train_step / fwd / fwd_eval."""
    for kind in ("_train_step", "_fwd_eval", "_fwd"):
        if stem.endswith(kind):
            head = stem[: -len(kind)]
            break
    else:
        return None
    for prefix in sorted(NETS, key=len, reverse=True):
        if head == prefix:
            return prefix, "", kind[1:]
        if head.startswith(prefix + "_"):
            return prefix, head[len(prefix) + 1 :], kind[1:]
    return None


def plan(stem, args, R):
    """The render flags for certgrad's counterpart, or (None, why)."""
    parts = split_name(stem)
    if parts is None:
        return None, "name not understood"
    prefix, recipe, kind = parts
    net = NETS[prefix]
    if net is None:
        return None, "certgrad lacks " + NET_LACKS[prefix]
    batch = str(args[0][1][0])
    names = [n for n, _, _ in args]
    if kind in ("fwd", "fwd_eval"):
        if recipe:
            return None, f"certgrad renders no forward with '{recipe}' masks as inputs (dropout/drop path)"
        return ["render", net, "--forward" if kind == "fwd" else "--eval", "--batch", batch], None
    m = RECIPE_RE.match(recipe)
    if recipe == "":
        if any(n.endswith("m") and n[:-1] in names for n in names):
            return None, "recipe not understood"
        return None, "certgrad has no stateless SGD step with the learning rate baked in (its sgd step carries lr and the m/v slots)"
    if not m or (m.group("opt") is None and not m.group("acc")):
        return None, f"recipe '{recipe}' not understood"
    if m.group("do"):
        return None, "certgrad lacks dropout before the head ('do')"
    flags = ["render", net, "--batch", batch]
    flags += OPTIMIZERS[m.group("opt") or "adam"]
    if m.group("acc"):
        flags += ["--accumulate", m.group("n1") or "?"]
    if R > 1:
        flags += ["--replicas", str(R)]
    if m.group("wx"):
        flags += ["--wd-exclude", "norm,bias"]
    if m.group("clip"):
        flags += ["--clip", "1.0"]
    if m.group("drop"):
        flags += ["--drop-path", "0.1"]
    if m.group("bce"):
        flags += ["--loss", "bce"]
    return flags, None


def draw(args, R, seed):
    """Per replica, one float32 array per argument (parameters and state
    shared; data, labels and masks per replica)."""
    rl = rc.roles(args)
    reps = rc.draw(args, rl, R, seed)
    rng = np.random.default_rng(seed + 7)
    later = {"bc1": 1 - 0.9**10, "bc2": 1 - 0.999**10}
    for i, ((n, s, _), r) in enumerate(zip(args, rl)):
        if r == "moment" and n.endswith("v"):
            a = (1e-3 * rng.standard_normal(s)) ** 2 + 1e-8
        elif r in ("moment", "accum"):
            a = 1e-3 * rng.standard_normal(s)
        elif r == "ema":
            a = reps[0][i] + 1e-3 * rng.standard_normal(s)
        elif r == "scalar" and n in later:
            a = np.array(later[n])
        else:
            continue
        for rep in reps:
            rep[i] = np.asarray(a, dtype=np.float32)
    return reps


RESULT_RE = re.compile(r"^\s+result (\d+)\s+(\S+)\s+(.*)$")


def summarise_diff(text):
    """(verdict, largest relative difference, differing results, where)."""
    verdict = ""
    worst = 0.0
    differing = []
    where = []
    grab = False
    for line in text.splitlines():
        if line.startswith("verdict:"):
            verdict = line.split(":", 1)[1].strip()
        if line.startswith("signature:") and "same" not in line:
            where.append(line)
        mm = RESULT_RE.match(line)
        if mm:
            rel = re.search(r"relative difference ([0-9.e+-]+)", mm.group(3))
            if rel:
                worst = max(worst, float(rel.group(1)))
            if "DIFFERENT" in mm.group(3):
                differing.append(int(mm.group(1)))
                if not rel:
                    worst = float("inf")
        if line.startswith("where they part"):
            grab = True
            continue
        if grab and line.startswith("  "):
            where.append(line.strip())
        elif grab:
            grab = False
    return verdict, worst, differing, " | ".join(where)


def label_smoothing(text):
    """The label smoothing ε a cross-entropy step bakes in (its dlogits add
    ε·onehot and −ε/K to softmax − onehot), or None."""
    m = re.search(r"%onehot: tensor<\d+x(\d+)xf32>", text)
    if not m:
        return None
    K = int(m.group(1))
    eps = re.search(r"stablehlo\.multiply %onehot, %(\w+)", text)
    if not eps:
        return None
    c = re.search(r"%%%s = stablehlo\.constant dense<([0-9.e+-]+)> : tensor<\d+x%dxf32>" % (eps.group(1), K), text)
    return float(c.group(1)) if c else None


def weight_decay(text):
    """The weight decay `%wd` a step reads (a constant declared and used),
    or None."""
    m = re.search(r"%wd = stablehlo\.constant dense<([0-9.e+-]+)> : tensor<f32>", text)
    if not m or len(re.findall(r"%wd\b", text)) < 2:
        return None
    return float(m.group(1))


def smoothed_net(a, net, eps):
    """A net file of `net` with label_smoothing = eps, written once."""
    path = os.path.join(a.work, f"{net}-ls{eps}.toml")
    if not os.path.exists(path):
        subprocess.run([a.certgrad, "nets", net, "--write-file", path], check=True, capture_output=True)
        text = open(path).read()
        assert 'label_smoothing = "none"' in text, path
        open(path, "w").write(text.replace('label_smoothing = "none"', f"label_smoothing = {eps}", 1))
    return path


def f32_compare(a, ref, mine, paths, R, work):
    """Both files on the native f32 executor at the same inputs; a text in
    diff's form (result lines and a verdict) for summarise_diff."""
    outs = []
    for tag, f in (("a", ref), ("b", mine)):
        d = os.path.join(work, tag)
        cmd = [a.certgrad, "run", f, "--max-memory", a.max_memory, "--out", d, "--inputs", *paths]
        if R > 1:
            cmd += ["--replicas", str(R)]
        try:
            r = subprocess.run(cmd, capture_output=True, text=True, timeout=a.timeout)
        except subprocess.TimeoutExpired:
            return f"verdict: timed out after {a.timeout} s"
        if r.returncode != 0:
            return "verdict: error: " + (r.stdout + r.stderr).strip().splitlines()[-1][:200]
        outs.append(d)
    dirs = [""] if R == 1 else [f"replica_{k}" for k in range(R)]
    n = len([f for f in os.listdir(os.path.join(outs[0], dirs[0])) if f.startswith("out_")])
    pairs = []
    for i in range(n):
        x = np.concatenate([np.load(os.path.join(outs[0], d, f"out_{i}.npy")).astype(np.float64).ravel() for d in dirs])
        y = np.concatenate([np.load(os.path.join(outs[1], d, f"out_{i}.npy")).astype(np.float64).ravel() for d in dirs])
        pairs.append((x, y))
    biggest = max(np.linalg.norm(x) for x, _ in pairs)
    lines, worst, apart = [], 0.0, 0
    for i, (x, y) in enumerate(pairs):
        nx = np.linalg.norm(x)
        if nx <= 1e-7 * biggest and np.linalg.norm(y) <= 1e-7 * biggest:
            lines.append(f"  result {i} f32 below 1e-7 of the largest output (not compared)")
            continue
        d = float(np.linalg.norm(x - y) / max(nx, 1e-300))
        worst = max(worst, d)
        apart += d > 1e-4
        word = "DIFFERENT" if d > 1e-4 else "same"
        lines.append(f"  result {i} f32 {word} (relative difference {d:.2e})")
    subprocess.run(["rm", "-rf", work])
    verdict = (f"f32: {n - apart} of {n} outputs within 1e-4 (worst {worst:.1e})" if apart
               else f"f32: every output within 1e-4 (worst {worst:.1e})")
    return "\n".join(lines + [f"verdict: {verdict}"])


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("mlir_dir")
    ap.add_argument("--files", default="")
    ap.add_argument("--tsv", default="/tmp/refpairs/pairs.tsv")
    ap.add_argument("--work", default="/tmp/refpairs/work")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--timeout", type=int, default=1800)
    ap.add_argument("--max-memory", default="14G")
    ap.add_argument("--deadline", default="")
    ap.add_argument("--certgrad", default=DEFAULT_BIN)
    ap.add_argument("--list", action="store_true", help="print each file's plan and stop")
    ap.add_argument("--f32", action="store_true", help="compare native f32 runs instead of diff in float64")
    a = ap.parse_args()
    files = [f[:-5] for f in sorted(os.listdir(a.mlir_dir)) if f.endswith(".mlir")]
    if a.files:
        want = [f.strip().removesuffix(".mlir") for f in a.files.split(",") if f.strip()]
        files = [f for f in want if f in files]
    # Cheapest first: the batch times the replicas, a train step thrice a forward.
    def cost(stem):
        _, args, _, R = rc.parse(open(os.path.join(a.mlir_dir, stem + ".mlir")).read())
        size = int(np.prod(args[0][1]))
        return size * R * (3 if stem.endswith("train_step") else 1)

    files.sort(key=cost)
    # Files the TSV already has a line for are not run again.
    if os.path.exists(a.tsv) and not a.list:
        done = {line.split("\t")[0] for line in open(a.tsv)}
        files = [f for f in files if f not in done]
    os.makedirs(a.work, exist_ok=True)
    os.makedirs(os.path.dirname(os.path.abspath(a.tsv)), exist_ok=True)
    if not os.path.exists(a.tsv) and not a.list:
        with open(a.tsv, "w") as t:
            t.write("file\tR\tcertgrad\tverdict\tworst_rel\tn_differing\tdiffering\twhere\tseconds\n")
    # The deadline is the next HH:MM to come (past midnight: tomorrow's).
    stop = None
    if a.deadline:
        h, mnt = map(int, a.deadline.split(":"))
        now = datetime.datetime.now()
        stop = now.replace(hour=h, minute=mnt, second=0, microsecond=0)
        if stop <= now:
            stop += datetime.timedelta(days=1)
    for stem in files:
        if stop and datetime.datetime.now() >= stop:
            print(f"deadline {a.deadline} reached; stopping before {stem}", flush=True)
            break
        path = os.path.join(a.mlir_dir, stem + ".mlir")
        _, args, _, R = rc.parse(open(path).read())
        flags, why = plan(stem, args, R)
        if a.list:
            print(f"{stem}\tR={R}\t{' '.join(flags) if flags else 'LACKS: ' + why}")
            continue
        t0 = time.time()
        row = [stem, str(R), " ".join(flags) if flags else "-"]
        text = open(path).read()
        eps = label_smoothing(text) if flags is not None else None
        wd = weight_decay(text)
        if flags is not None and wd is not None and any(o in flags for o in ("adamw", "rmsprop", "lamb")):
            flags += ["--weight-decay", repr(wd)]
            row[2] = " ".join(flags)
        if eps is not None:
            flags = [flags[0], smoothed_net(a, flags[1], eps), *flags[2:]]
            row[2] = " ".join(["render", NETS[split_name(stem)[0]], f"(ls {eps})", *flags[2:]])
        if flags is None:
            row += ["lacks: " + why, "", "", "", "", ""]
        else:
            out = os.path.join(a.work, stem + ".certgrad.mlir")
            r = subprocess.run([a.certgrad, *flags, "-o", out], capture_output=True, text=True)
            if r.returncode != 0:
                row += ["render failed: " + r.stderr.strip().splitlines()[-1][:200], "", "", "", "", ""]
            else:
                ind = os.path.join(a.work, stem + ".inputs")
                os.makedirs(ind, exist_ok=True)
                paths = []
                for k, rep in enumerate(draw(args, R, a.seed)):
                    for i, arr in enumerate(rep):
                        p = os.path.join(ind, f"r{k}_{i:04d}.npy")
                        np.save(p, arr)
                        paths.append(p)
                if a.f32:
                    text = f32_compare(a, path, out, paths, R, os.path.join(a.work, stem + ".runs"))
                else:
                    cmd = [a.certgrad, "diff", path, out, "--max-memory", a.max_memory, "--inputs", *paths]
                    if R > 1:
                        cmd += ["--replicas", str(R)]
                    try:
                        d = subprocess.run(cmd, capture_output=True, text=True, timeout=a.timeout)
                        text = d.stdout + d.stderr
                    except subprocess.TimeoutExpired:
                        text = f"verdict: timed out after {a.timeout} s"
                with open(os.path.join(a.work, stem + ".diff.txt"), "w") as f:
                    f.write(text)
                verdict, worst, differing, where = summarise_diff(text)
                if not verdict:
                    verdict = "error: " + (text.strip().splitlines() or ["(no output)"])[-1][:200]
                shown = ",".join(map(str, differing[:12])) + ("…" if len(differing) > 12 else "")
                row += [verdict, f"{worst:.2e}", str(len(differing)), shown, where[:400]]
                subprocess.run(["rm", "-rf", ind])
        row.append(f"{time.time() - t0:.0f}")
        print("\t".join(row), flush=True)
        with open(a.tsv, "a") as t:
            t.write("\t".join(x.replace("\t", " ") for x in row) + "\n")


if __name__ == "__main__":
    main()
