#!/usr/bin/env python3
"""reference_client.py: certgrad's native f32 executor against XLA-CPU f32 on
a third party's StableHLO files (e.g. brettkoonce/lean4-mlir's rendered
forwards and train steps), both judged against a float64 truth (the same text
with every f32 turned into f64, compiled by XLA-CPU with x64 on).

Usage:
  reference_client.py MLIR_DIR [--files A,B,...] [--order dp,fwd,in,rest]
      [--tsv /tmp/refclient/results.tsv] [--work /tmp/refclient/work]
      [--seed 0] [--deadline HH:MM] [--timeout 1500] [--mem-gb 17] [--split | --no-split]
      [--certgrad target/release/certgrad]
  reference_client.py --one FILE.mlir --work DIR [--seed S] ...  (the worker)

Nothing is written into the repository: inputs, outputs and results go under
--work and --tsv (one line per file, appended as each file finishes; per-output
detail as JSON in WORK/../detail/).

Inputs are drawn by the argument's name and shape (seeded):
  x (first argument)            N(0, 1), a different shard per replica
  onehot                        one random class per row, per replica
  do, dp<k> (dropout / drop-path masks)  Bernoulli(0.9) / 0.9, per replica
  ...mu / ...var (running stats, with or without the trailing i)  0 / 1
  NAME + m / v / a (Adam or RMS moments, accumulator)  0
  NAME + e (EMA shadow)         a copy of NAME
  other tensors of rank >= 2    He-normal, std sqrt(2 / fan_in) (fan_in =
                                in*kh*kw of an OIHW kernel, rows of a 2-D W)
  other 1-D tensors             1 + N(0, 0.01) when the name has a g (BN / LN
                                scale, layer scale), else N(0, 0.01) (biases, beta)
  scalars                       lr 0.01; bc1 = 1 - 0.9 = 0.1 and bc2 = 1 - 0.999
                                = 0.001 (t = 1: the steps divide m', v' by them);
                                emad 0.9, oemad 0.1; aup 1, akeep 1; else 1
Parameters are the same on every replica. With m = v = 0, m' = (1 - b1) g
carries the gradient itself.

Per output: e = ||a - t|| / ||t|| (norm over all replicas) for native and XLA.
Skipped: outputs that return an argument unchanged (passthrough) and outputs
whose truth is ~0 (rms(t) < 1e-6 x the file's largest output rms and both
engines' errors > 0.1: a conv bias in front of a batch norm has gradient 0, and
every f32 engine returns rounding noise there). Ratio = max(e_nat, u) /
max(e_xla, u) with u = 2^-24 (below f32's unit roundoff errors are exact).
"""

import argparse
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time

import numpy as np

U = 2.0**-24
HERE = os.path.dirname(os.path.abspath(__file__))
DEFAULT_BIN = os.path.join(os.path.dirname(HERE), "target", "release", "certgrad")


# ---------------------------------------------------------------- parsing
def parse(text):
    m = re.search(r"func\.func (?:public |private )?@(\w+)\((.*?)\)\s*->", text, re.S)
    args = []
    for n, s in re.findall(r"%(\w+):\s*tensor<([^>]*)>", m.group(2)):
        parts = s.split("x")
        args.append((n, tuple(int(p) for p in parts[:-1]), parts[-1]))
    rets = re.findall(r"^\s*(?:func\.)?return (.*?) :", text, re.M)
    ret_names = [r.strip().lstrip("%") for r in rets[-1].split(",")] if rets else []
    g = re.search(r"replica_groups = dense<\[\[([0-9, ]+)\]\]>", text)
    R = len(g.group(1).split(",")) if g else 1
    return m.group(1), args, ret_names, R


SCALARS = {"lr": 0.01, "bc1": 1 - 0.9, "bc2": 1 - 0.999, "emad": 0.9, "oemad": 0.1, "aup": 1.0, "akeep": 1.0}


def roles(args):
    names = {n: s for n, s, _ in args}
    out = []
    for i, (n, s, dt) in enumerate(args):
        if i == 0 or n == "x":
            r = "data"
        elif n in ("onehot", "labels", "y"):
            r = "onehot"
        elif n == "do" or re.fullmatch(r"dp\d+", n):
            r = "mask"
        elif s == ():
            r = "scalar"
        elif re.search(r"(mu|var)\d*i?$", n):
            r = "run_mean" if re.search(r"mu\d*i?$", n) else "run_var"
        elif n[:-1] in names and names[n[:-1]] == s and n[-1] in "mvae":
            r = {"m": "moment", "v": "moment", "a": "accum", "e": "ema"}[n[-1]]
        elif len(s) >= 2:
            r = "weight"
        elif "g" in re.sub(r"\d", "", n):
            r = "scale"
        else:
            r = "bias"
        out.append(r)
    return out


def fan_in(s):
    if len(s) == 4:
        return s[1] * s[2] * s[3]
    if len(s) == 2:
        return s[0]
    return int(np.prod(s[:-1]))


def draw(args, rl, R, seed):
    """Returns per replica a list of arrays (float32); parameters shared."""
    rng = np.random.default_rng(seed)
    shared = {}
    for (n, s, dt), r in zip(args, rl):
        if r == "weight":
            shared[n] = rng.standard_normal(s) * np.sqrt(2.0 / fan_in(s))
        elif r == "scale":
            shared[n] = 1.0 + 0.01 * rng.standard_normal(s)
        elif r == "bias":
            shared[n] = 0.01 * rng.standard_normal(s)
        elif r in ("moment", "accum", "run_mean"):
            shared[n] = np.zeros(s)
        elif r == "run_var":
            shared[n] = np.ones(s)
        elif r == "scalar":
            shared[n] = np.array(SCALARS.get(n, 1.0))
    for (n, s, dt), r in zip(args, rl):
        if r == "ema":
            shared[n] = shared[n[:-1]].copy()
    reps = []
    for k in range(R):
        vals = []
        for (n, s, dt), r in zip(args, rl):
            if r == "data":
                a = rng.standard_normal(s)
            elif r == "onehot":
                a = np.eye(s[1])[rng.integers(0, s[1], s[0])]
            elif r == "mask":
                a = (rng.random(s) < 0.9) / 0.9
            else:
                a = shared[n]
            vals.append(np.asarray(a, dtype=np.float32))
        reps.append(vals)
    return reps


# ---------------------------------------------------------------- XLA
def xla_compile(text, R, f64, mem_limit):
    from jax._src import xla_bridge
    from jax._src.lib import xla_client as xc

    t = re.sub(r"func\.func (?:public |private )?@\w+", "func.func public @main", text, count=1)
    if f64:
        t = t.replace("f32", "f64").replace("0xFF800000", "0xFFF0000000000000").replace("0x7F800000", "0x7FF0000000000000")
    be = xla_bridge.get_backend("cpu")
    devs = be.devices()[:R]
    co = xc.CompileOptions()
    if R > 1:
        co.num_replicas = R
        co.executable_build_options.num_replicas = R
        co.device_assignment = xc.DeviceAssignment.create(np.arange(R).reshape(R, 1))
    t0 = time.time()
    exe = be.compile_and_load(t, executable_devices=xc.DeviceList(tuple(devs)), compile_options=co)
    tc = time.time() - t0
    st = exe.get_compiled_memory_stats()
    need = R * (st.temp_size_in_bytes + st.argument_size_in_bytes + st.output_size_in_bytes)
    if need > mem_limit:
        raise MemoryError(f"{'f64' if f64 else 'f32'} XLA needs {need / 2**30:.1f} GiB by its compiled memory stats (> {mem_limit / 2**30:.0f})")
    return exe, devs, tc, need


def xla_run(text, reps, R, f64, mem_limit, compiled=None):
    import jax
    from jax.sharding import Mesh, NamedSharding, PartitionSpec as P

    exe, devs, tc, need = compiled or xla_compile(text, R, f64, mem_limit)
    dt = np.float64 if f64 else np.float32
    t0 = time.time()
    if R == 1:
        ins = [jax.device_put(a.astype(dt), devs[0]) for a in reps[0]]
        outs = [[np.asarray(o)] for o in exe.execute(ins)]
    else:
        mesh = Mesh(np.array(devs), ("r",))
        ins = []
        for i in range(len(reps[0])):
            per = [jax.device_put(reps[k][i].astype(dt), devs[k]) for k in range(R)]
            ins.append(jax.make_array_from_single_device_arrays(per[0].shape, NamedSharding(mesh, P()), per))
        res = exe.execute_sharded(ins)
        outs = [[np.asarray(x) for x in y] for y in res.disassemble_into_single_device_arrays()]
    te = time.time() - t0
    del exe, ins
    return outs, tc, te, need


def summarize(res, outs):
    """Flags theta' of a parameter that has a v' output (Adam, RMS, LAMB at
    m = v = 0: the first update is lr * sign(g) up to eps, so theta' measures
    sign flips of near-zero gradient elements, not rounding) as sign_update;
    their gradient is judged through m' and v'. Marks the outputs of
    parameters whose gradient is ~0 (their m' or v' has a ~0 truth: Adam's
    g / (|g| + eps) is then rounding noise over eps on every engine) as
    zero_grad, then fills res with the per-file summary."""
    names = {o["name"] for o in outs}
    zero = {o["name"][:-2] for o in outs if o["kind"] == "zero_truth" and o["name"].endswith(("m'", "v'"))}
    for o in outs:
        if o["kind"] == "judged" and o["name"].endswith("'") and (o["name"][:-1] in zero or o["name"][:-2] in zero):
            o["kind"] = "zero_grad"
    for o in outs:
        if o["kind"] == "judged" and o["name"].endswith("'") and o["name"][:-1] + "v'" in names:
            o["sign_update"] = True
    judged = [o for o in outs if o["kind"] == "judged"]
    cont = [o for o in judged if not o.get("sign_update")]
    res["n_sign"] = len(judged) - len(cont)
    if cont:
        wc = max(cont, key=lambda o: o["ratio"])
        res["worst_ratio_cont"] = wc["ratio"]
        res["worst_ratio_cont_out"] = wc["name"]
    res["n_out"] = len(outs)
    res["n_judged"] = len(judged)
    res["n_zero"] = sum(o["kind"] in ("zero_truth", "zero_grad") for o in outs)
    res["n_pass"] = sum(o["kind"] == "passthrough" for o in outs)
    if judged:
        wn = max(judged, key=lambda o: o["e_nat"])
        wx = max(judged, key=lambda o: o["e_xla"])
        wr = max(judged, key=lambda o: o["ratio"])
        res.update(worst_nat=wn["e_nat"], worst_nat_out=wn["name"], worst_xla=wx["e_xla"], worst_xla_out=wx["name"],
                   worst_ratio=wr["ratio"], worst_ratio_out=wr["name"])
        res["n_gt2"] = sum(o["ratio"] > 2 for o in judged)
        res["n_gt5"] = sum(o["ratio"] > 5 for o in judged)
        res["n_gt10"] = sum(o["ratio"] > 10 for o in judged)
        res["gt10"] = [f"{o['name']}(k{o['k']}):{o['ratio']:.1f}x,nat {o['e_nat']:.2e},xla {o['e_xla']:.2e}"
                       for o in judged if o["ratio"] > 10]


AR_RE = re.compile(r'(%\w+) = "stablehlo\.all_reduce"\((%\w+)\) \(\{.*?\}\) \{ replica_groups = [^}]*\} : '
                   r'\((tensor<[^>]*>)\) -> (tensor<[^>]*>)', re.S)


def split_phases(text):
    """A data-parallel function split at its all_reduces (one operand, add)
    into single-replica phases: phase L returns the operands of the
    all_reduces of level L (level = how many all_reduces it depends on) and
    takes the sums of the lower levels as extra trailing arguments; the last
    phase takes every sum and returns the function's results. Returns
    (phases, levels): phases[L] = text, levels[L] = the all_reduce indices
    whose operands phase L returns (the last phase: None)."""
    ars = list(AR_RE.finditer(text))
    names = [m.group(1) for m in ars]
    # dependency closure: which all_reduce results each SSA value depends on
    deps = {}
    body = text
    for n in names:
        body = body  # noqa
    tmp = AR_RE.sub(lambda m: f"{m.group(1)} = AR({m.group(2)})", text)
    for line in tmp.splitlines():
        mm = re.match(r"\s*(%[\w]+)(?::\d+)? = (.*)$", line)
        if not mm:
            continue
        d = set()
        rhs = mm.group(2)
        if rhs.startswith("AR("):
            d = {mm.group(1)}
        for u in re.findall(r"%\w+", rhs):
            d |= deps.get(u, set())
        deps[mm.group(1)] = deps.get(mm.group(1), set()) | d
    level = {}
    for i, m in enumerate(ars):
        below = deps.get(m.group(2), set())
        level[m.group(1)] = 0
    changed = True
    while changed:
        changed = False
        for m in ars:
            lv = max((level[b] + 1 for b in deps.get(m.group(2), set())), default=0)
            if lv != level[m.group(1)]:
                level[m.group(1)] = lv
                changed = True
    nlev = max(level.values()) + 1 if level else 0
    sig = re.search(r"func\.func (?:public |private )?@\w+\((.*?)\)\s*->", text, re.S)
    ret = list(re.finditer(r"^(\s*)(?:func\.)?return (.*?) : (.*)$", text, re.M))[-1]
    phases, levels = [], []
    for L in range(nlev + 1):
        new_args = [f"%arsum{i}: {m.group(3)}" for i, m in enumerate(ars) if level[m.group(1)] < L]
        def rep(m, L=L):
            i = names.index(m.group(1))
            if level[m.group(1)] < L:
                return f"{m.group(1)} = stablehlo.convert %arsum{i} : ({m.group(3)}) -> {m.group(4)}"
            return f"{m.group(1)} = stablehlo.convert {m.group(2)} : ({m.group(3)}) -> {m.group(4)}"
        if L < nlev:
            idx = [i for i, m in enumerate(ars) if level[m.group(1)] == L]
            newret = f"{ret.group(1)}return " + ", ".join(ars[i].group(2) for i in idx) + " : " + ", ".join(ars[i].group(3) for i in idx)
        else:
            idx = None
            newret = ret.group(0)
        t = text[:ret.start()] + newret + text[ret.end():]
        if L < nlev:
            # the results' types in the header
            hdr = re.search(r"(func\.func (?:public |private )?@\w+\(.*?\)\s*->\s*)(\(.*?\)|tensor<[^>]*>)(\s*\{)", t, re.S)
            t = t[:hdr.start(2)] + "(" + ", ".join(ars[i].group(3) for i in idx) + ")" + t[hdr.end(2):]
        t = AR_RE.sub(rep, t)
        if new_args:
            e = sig.end(1)
            t = t[:e] + ", " + ", ".join(new_args) + t[e:]
        phases.append(t)
        levels.append(idx)
    return phases, levels


def xla_split_run(text, reps, R, f64, mem_limit):
    """The data-parallel function on XLA-CPU one replica at a time: each phase
    of split_phases per replica, the all_reduce sums formed here (in the run's
    precision, replicas in order 0, 1, ...)."""
    phases, levels = split_phases(text)
    dt = np.float64 if f64 else np.float32
    sums = []
    tc = te = 0.0
    need = 0
    for L, (t, idx) in enumerate(zip(phases, levels)):
        exe = xla_compile(t, 1, f64, mem_limit)
        need = max(need, exe[3])
        per = []
        for k in range(R):
            ins = reps[k] + sums
            o, c, e, _ = xla_run(t, [ins], 1, f64, 0, compiled=exe)
            te += e
            per.append([x[0] for x in o])
        tc += exe[2]
        del exe
        if idx is None:
            return [[per[k][j] for k in range(R)] for j in range(len(per[0]))], tc, te, need
        for j in range(len(idx)):
            acc = per[0][j].astype(dt)
            for k in range(1, R):
                acc = (acc + per[k][j].astype(dt)).astype(dt)
            sums.append(acc)


# ---------------------------------------------------------------- worker
def worker(a):
    t_start = time.time()
    text = open(a.one).read()
    fn, args, ret_names, R = parse(text)
    rl = roles(args)
    res = {"file": os.path.basename(a.one), "R": R, "n_args": len(args), "status": "ok", "note": ""}
    res["roles"] = {r: rl.count(r) for r in sorted(set(rl))}
    res["unknown_scalars"] = [n for (n, s, d), r in zip(args, rl) if r == "scalar" and n not in SCALARS]
    split = bool(a.split) and R > 1
    c64 = None
    if not split:
        try:
            c64 = xla_compile(text, R, True, (a.mem_gb - 3) * 2**30)
        except MemoryError as e:
            if R == 1 or a.no_split:
                res["status"] = "skipped_memory"
                res["note"] = str(e)
                print("RESULT " + json.dumps(res), flush=True)
                return
            res["note"] = f"XLA split per replica ({e}); "
            split = True
    if split:
        try:
            ph = split_phases(text)[0][0]
            e0 = xla_compile(ph, 1, True, (a.mem_gb - 5) * 2**30)
            res["note"] = res.get("note", "") + f"split phase 0 f64 needs {e0[3] / 2**30:.1f} GiB per replica; "
            del e0
        except MemoryError as e:
            res["status"] = "skipped_memory"
            res["note"] = res.get("note", "") + "split per replica: " + str(e)
            print("RESULT " + json.dumps(res), flush=True)
            return
    res["note"] = res.get("note", "") + ("xla split per replica; " if split else "")
    reps = draw(args, rl, R, a.seed)
    work = a.work
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(work)
    # native inputs: parameters once, per-replica args per replica
    paths = []
    for k in range(R):
        for i, ((n, s, dt), r) in enumerate(zip(args, rl)):
            per = r in ("data", "onehot", "mask")
            p = os.path.join(work, "in", f"r{k}" if per else "shared", f"in_{i:04d}.npy")
            if not os.path.exists(p):
                os.makedirs(os.path.dirname(p), exist_ok=True)
                np.save(p, reps[k][i])
            paths.append(p)
    out_dir = os.path.join(work, "native")
    cmd = [a.certgrad, "run", a.one, "--inputs", *paths, "--out", out_dir]
    if R > 1:
        cmd += ["--replicas", str(R)]
    t0 = time.time()
    pr = subprocess.run(cmd, capture_output=True, text=True)
    res["t_native"] = time.time() - t0
    if pr.returncode != 0:
        res["status"] = "native_failed"
        res["note"] = (pr.stderr or pr.stdout).strip().splitlines()[-1][:300] if (pr.stderr or pr.stdout).strip() else f"rc {pr.returncode}"
        print("RESULT " + json.dumps(res), flush=True)
        return
    print(f"[{res['file']}] native {res['t_native']:.1f}s", file=sys.stderr, flush=True)
    try:
        if split:
            x32, tc32, te32, need32 = xla_split_run(text, reps, R, False, (a.mem_gb - 3) * 2**30)
        else:
            x32, tc32, te32, need32 = xla_run(text, reps, R, False, (a.mem_gb - 3) * 2**30)
    except MemoryError as e:
        res["status"] = "skipped_memory"
        res["note"] += str(e)
        print("RESULT " + json.dumps(res), flush=True)
        return
    res["t_xla32"] = tc32 + te32
    print(f"[{res['file']}] xla f32 compile {tc32:.1f}s run {te32:.1f}s", file=sys.stderr, flush=True)
    try:
        if split:
            t64, tc64, te64, need64 = xla_split_run(text, reps, R, True, (a.mem_gb - 3) * 2**30)
        else:
            t64, tc64, te64, need64 = xla_run(text, reps, R, True, 0, compiled=c64)
            del c64
    except MemoryError as e:
        res["status"] = "skipped_memory"
        res["note"] = str(e)
        print("RESULT " + json.dumps(res), flush=True)
        return
    res["t_xla64"] = tc64 + te64
    res["mem64_gib"] = need64 / 2**30
    print(f"[{res['file']}] xla f64 compile {tc64:.1f}s run {te64:.1f}s ({need64 / 2**30:.1f} GiB)", file=sys.stderr, flush=True)
    del reps
    argnames = [n for n, _, _ in args]
    n_out = len(t64)
    rms = [float(np.sqrt(np.mean(np.square(np.concatenate([np.ravel(y) for y in t64[k]]))))) if t64[k][0].size else 0.0 for k in range(n_out)]
    max_rms = max(rms) if rms else 0.0
    outs = []
    for k in range(n_out):
        rn = ret_names[k] if k < len(ret_names) else f"out_{k}"
        name = rn
        if re.fullmatch(r"v\d+", rn) and k + 1 < len(args) and args[k + 1][1] == t64[k][0].shape:
            name = argnames[k + 1] + "'"
        t = np.concatenate([np.ravel(y).astype(np.float64) for y in t64[k]])
        xa = np.concatenate([np.ravel(y).astype(np.float64) for y in x32[k]])
        nat = []
        for r in range(R):
            f = os.path.join(out_dir, f"replica_{r}" if R > 1 else "", f"out_{k}.npy")
            nat.append(np.ravel(np.load(f)).astype(np.float64))
        na = np.concatenate(nat)
        nt = np.linalg.norm(t)
        en = float(np.linalg.norm(na - t) / nt) if nt > 0 else float(np.linalg.norm(na - t))
        ex = float(np.linalg.norm(xa - t) / nt) if nt > 0 else float(np.linalg.norm(xa - t))
        cons = 0.0
        if R > 1 and name.endswith("'"):
            cons = max(float(np.max(np.abs(nat[r] - nat[0]))) for r in range(R))
        kind = "judged"
        if rn in argnames:
            kind = "passthrough"
        elif nt == 0 or (rms[k] < 1e-6 * max_rms and min(en, ex) > 0.1):
            kind = "zero_truth"
        ratio = max(en, U) / max(ex, U)
        outs.append({"k": k, "name": name, "shape": list(t64[k][0].shape), "e_nat": en, "e_xla": ex,
                     "ratio": ratio, "kind": kind, "rms": rms[k], "replica_spread": cons})
    summarize(res, outs)
    res["max_replica_spread"] = max((o["replica_spread"] for o in outs), default=0.0)
    res["t_total"] = time.time() - t_start
    os.makedirs(a.detail, exist_ok=True)
    with open(os.path.join(a.detail, res["file"] + f".seed{a.seed}.json"), "w") as f:
        json.dump({"result": res, "outputs": outs, "arg_roles": list(zip(argnames, rl))}, f, indent=1)
    shutil.rmtree(work, ignore_errors=True)
    print("RESULT " + json.dumps(res), flush=True)


# ---------------------------------------------------------------- driver
COLS = ["file", "R", "status", "n_out", "n_judged", "n_zero", "n_pass", "worst_nat", "worst_nat_out", "worst_xla",
        "worst_xla_out", "worst_ratio", "worst_ratio_out", "n_sign", "worst_ratio_cont", "worst_ratio_cont_out", "n_gt2", "n_gt5", "n_gt10", "gt10", "max_replica_spread",
        "t_native", "t_xla32", "t_xla64", "mem64_gib", "t_total", "seed", "note"]


def group(name):
    if "dp" in name:
        return "dp"
    if "_fwd" in name:
        return "fwd"
    if re.search(r"in(160)?$", name.split("_")[0]):
        return "in"
    return "rest"


def rss_group(pgid):
    tot = 0
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            if os.getpgid(int(pid)) != pgid:
                continue
            with open(f"/proc/{pid}/status") as f:
                for line in f:
                    if line.startswith("VmRSS:"):
                        tot += int(line.split()[1]) * 1024
        except (OSError, ProcessLookupError):
            pass
    return tot


def driver(a):
    files = sorted(f for f in os.listdir(a.dir) if f.endswith(".mlir"))
    if a.files:
        want = [w if w.endswith(".mlir") else w + ".mlir" for w in a.files.split(",")]
        files = [w for w in want if w in files]
    else:
        def cost(f):
            _, args, _, R = parse(open(os.path.join(a.dir, f)).read())
            return R * sum(int(np.prod(s)) for _, s, _ in args)
        order = a.order.split(",")
        files = sorted((f for f in files if group(f) in order), key=lambda f: (order.index(group(f)), cost(f)))
    deadline = None
    if a.deadline:
        hh, mm = map(int, a.deadline.split(":"))
        lt = time.localtime()
        deadline = time.mktime((lt.tm_year, lt.tm_mon, lt.tm_mday, hh, mm, 0, 0, 0, -1))
    os.makedirs(os.path.dirname(os.path.abspath(a.tsv)), exist_ok=True)
    if not os.path.exists(a.tsv):
        with open(a.tsv, "w") as f:
            f.write("\t".join(COLS) + "\n")
    done = set()
    lines = open(a.tsv).read().splitlines()
    head = lines[0].split("\t")
    for line in lines[1:]:
        c = dict(zip(head, line.split("\t")))
        if c.get("status") != "skipped_memory":
            done.add((c["file"], c.get("seed", "")))
    for f in files:
        if (f, str(a.seed)) in done:
            continue
        left = (deadline - time.time()) if deadline else a.timeout
        if left < 60:
            print(f"deadline: stopping before {f}", flush=True)
            break
        tmo = min(a.timeout, left)
        cmd = ["nice", "-n", "10", sys.executable, os.path.abspath(__file__), "--one", os.path.join(a.dir, f),
               "--work", os.path.join(a.work, "cur"), "--seed", str(a.seed), "--mem-gb", str(a.mem_gb),
               "--certgrad", a.certgrad, "--detail", a.detail] + (["--split"] if a.split else []) + (["--no-split"] if a.no_split else [])
        print(f"=== {f} ({time.strftime('%H:%M:%S')}, limit {tmo:.0f}s)", flush=True)
        t0 = time.time()
        p = subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True, start_new_session=True)
        res = None
        peak = 0
        killed = ""
        while p.poll() is None:
            time.sleep(1.0)
            r = rss_group(p.pid)
            peak = max(peak, r)
            if r > a.mem_gb * 2**30:
                killed = f"killed: RSS {r / 2**30:.1f} GiB > {a.mem_gb} GiB"
            elif time.time() - t0 > tmo:
                killed = f"killed: over {tmo:.0f}s"
            if killed:
                os.killpg(p.pid, signal.SIGKILL)
                break
        out = p.stdout.read()
        p.wait()
        for line in out.splitlines():
            if line.startswith("RESULT "):
                res = json.loads(line[7:])
        if res is None:
            res = {"file": f, "status": "killed" if killed else f"worker_rc_{p.returncode}", "note": killed or out[-300:]}
            try:
                res["R"] = parse(open(os.path.join(a.dir, f)).read())[3]
            except Exception:
                pass
        res["seed"] = a.seed
        res.setdefault("t_total", time.time() - t0)
        res["note"] = (res.get("note", "") + f" peakRSS {peak / 2**30:.1f}GiB").strip()
        row = []
        for c in COLS:
            v = res.get(c, "")
            if isinstance(v, float):
                v = f"{v:.3g}"
            elif isinstance(v, list):
                v = "; ".join(v)
            row.append(str(v).replace("\t", " ").replace("\n", " "))
        with open(a.tsv, "a") as fh:
            fh.write("\t".join(row) + "\n")
        print("  " + " | ".join(f"{c}={res.get(c)}" for c in ("status", "n_judged", "worst_nat", "worst_xla", "worst_ratio", "worst_ratio_out", "t_total", "note")), flush=True)
        shutil.rmtree(os.path.join(a.work, "cur"), ignore_errors=True)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("dir", nargs="?")
    ap.add_argument("--one")
    ap.add_argument("--files", default="")
    ap.add_argument("--order", default="dp,fwd,in,rest")
    ap.add_argument("--tsv", default="/tmp/refclient/results.tsv")
    ap.add_argument("--work", default="/tmp/refclient/work")
    ap.add_argument("--detail", default="/tmp/refclient/detail")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--deadline", default="")
    ap.add_argument("--timeout", type=float, default=1500)
    ap.add_argument("--mem-gb", type=float, default=17)
    ap.add_argument("--certgrad", default=DEFAULT_BIN)
    ap.add_argument("--split", action="store_true", help="run data-parallel files on XLA one replica at a time")
    ap.add_argument("--no-split", action="store_true", help="skip data-parallel files whose replicated f64 does not fit")
    a = ap.parse_args()
    if a.one:
        os.environ.setdefault("XLA_FLAGS", "--xla_force_host_platform_device_count=4")
        import jax

        jax.config.update("jax_enable_x64", True)
        worker(a)
    elif a.dir:
        driver(a)
    else:
        ap.error("MLIR_DIR or --one FILE")


if __name__ == "__main__":
    main()
