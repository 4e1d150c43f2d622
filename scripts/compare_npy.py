#!/usr/bin/env python3
"""compare_npy.py: the certgrad side of the JAX oracle.

Owns running certgrad on every case of a manifest written by jax_export.py
(`certgrad check`, then `certgrad run ... --out DIR`) and comparing each output
DIR/out_K.npy with JAX's CASE.expected_K.npy. One line per case, then
"jax oracle: N passed, M failed"; exit status 1 if any case failed.

Error measures, per output (a = certgrad, b = JAX float32), max over outputs:
  norm-wise     ||a - b||_2 / ||b||_2                  (absolute when b == 0)
  element-wise  max_i |a_i - b_i| / max(|b_i|, floor), floor = 1e-2 * max_i |b_i|
A case passes when BOTH are <= its threshold (manifest: 1e-4 by default and for
the train step, 1e-5 for pure data movement). Non-finite values must match
exactly (same inf, both NaN); integer and boolean outputs must be equal.

The float64 reference (CASE.expected64_K.npy) is informational: the line also
shows the norm-wise error of certgrad and of JAX-f32 against it, so a
disagreement can be attributed to the side that is further from f64.

--self-check compares JAX-f32 against JAX-f64 instead of running certgrad: it
shows what an f32 engine achieves under these measures (no certgrad needed).
--xla-text runs each CASE.mlir from its text on XLA's CPU backend in place of
certgrad (private jaxlib API): it shows the exported text alone reproduces the
expected outputs, i.e. the oracle files are self-consistent.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time

import numpy as np

# Element-wise floor, relative to max |b| of the output. Entries far below the
# output's scale come from cancellation (θ − lr·g, 1 + tanh ≈ 0): a correct f32
# result differs there by a few ulps of max|b|, so with threshold 1e-4 the floor
# 1e-2 allows |a − b| ≤ 1e-6·max|b| (≈16 ulps of the largest entry). JAX-f32
# itself misses a 1e-6 floor against float64 on 4 of the cases (--self-check).
ELEMENT_FLOOR = 1e-2


def nonfinite_mismatch(a: np.ndarray, b: np.ndarray) -> bool:
    """True when the non-finite entries of a and b differ in place or value."""
    bad_a, bad_b = ~np.isfinite(a), ~np.isfinite(b)
    if not np.array_equal(bad_a, bad_b):
        return True
    if not bad_a.any():
        return False
    same = (a[bad_a] == b[bad_b]) | (np.isnan(a[bad_a]) & np.isnan(b[bad_b]))
    return not bool(same.all())


def errors(a: np.ndarray, b: np.ndarray, floor_rel: float = ELEMENT_FLOOR) -> tuple[float, float]:
    """(norm-wise, element-wise) relative error of a against reference b."""
    if a.dtype.kind in "biu" or b.dtype.kind in "biu":
        equal = np.array_equal(a.astype(np.int64), b.astype(np.int64))
        return (0.0, 0.0) if equal else (float("inf"), float("inf"))
    a64, b64 = a.astype(np.float64), b.astype(np.float64)
    if nonfinite_mismatch(a64, b64):
        return float("inf"), float("inf")
    finite = np.isfinite(b64)
    a64, b64 = a64[finite], b64[finite]
    if b64.size == 0:
        return 0.0, 0.0
    diff = np.abs(a64 - b64)
    b_norm = float(np.linalg.norm(b64))
    d_norm = float(np.linalg.norm(diff))
    norm_err = d_norm / b_norm if b_norm > 0 else d_norm
    b_max = float(np.max(np.abs(b64)))
    floor = floor_rel * b_max if b_max > 0 else np.finfo(np.float32).tiny
    elem_err = float(np.max(diff / np.maximum(np.abs(b64), floor)))
    return norm_err, elem_err


def short_ops(ops: dict[str, int]) -> str:
    """The case's interesting op names (no constant/return/broadcast noise)."""
    noise = {"stablehlo.constant", "stablehlo.return", "stablehlo.broadcast_in_dim"}
    return ",".join(k.removeprefix("stablehlo.") for k in ops if k not in noise) or "-"


def run_tool(cmd: list[str], timeout: float) -> tuple[int, str]:
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return 124, f"timed out after {timeout:.0f}s"
    except OSError as e:
        return 127, str(e)
    lines = (proc.stderr.strip() or proc.stdout.strip()).splitlines()
    return proc.returncode, lines[-1] if lines else ""


def compare_outputs(case: dict, case_dir: str, produced: list[str], floor: float) -> tuple[float, float, str, str]:
    """Max errors over a case's outputs, the f64 note, and a failure reason."""
    norm_max = elem_max = 0.0
    cg64 = [0.0, 0.0]
    jx64 = [0.0, 0.0]
    have64 = True
    if len(produced) != len(case["expected"]):
        return 0.0, 0.0, "", f"{len(produced)} outputs, expected {len(case['expected'])}"
    for k, (got_file, exp_file) in enumerate(zip(produced, case["expected"])):
        got = np.load(got_file)
        exp = np.load(os.path.join(case_dir, exp_file))
        if got.shape != exp.shape:
            return 0.0, 0.0, "", f"out_{k} shape {got.shape}, expected {exp.shape}"
        if got.dtype.kind != exp.dtype.kind:
            return 0.0, 0.0, "", f"out_{k} dtype {got.dtype}, expected {exp.dtype}"
        n, e = errors(got, exp, floor)
        norm_max, elem_max = max(norm_max, n), max(elem_max, e)
        ref_file = os.path.join(case_dir, case["expected64"][k])
        if os.path.exists(ref_file) and exp.dtype.kind == "f":
            ref = np.load(ref_file)
            cg64 = [max(x, y) for x, y in zip(cg64, errors(got, ref, floor))]
            jx64 = [max(x, y) for x, y in zip(jx64, errors(exp, ref, floor))]
        else:
            have64 = have64 and exp.dtype.kind != "f"
    note = (
        f"vs f64 (norm/elem): certgrad {cg64[0]:.1e}/{cg64[1]:.1e} jax {jx64[0]:.1e}/{jx64[1]:.1e}"
        if have64
        else "no f64 reference"
    )
    return norm_max, elem_max, note, ""


def check_case(case: dict, case_dir: str, certgrad: str, work: str, timeout: float, floor: float) -> tuple[bool, str]:
    mlir = os.path.join(case_dir, case["file"])
    rc, last = run_tool([certgrad, "check", mlir], timeout)
    if rc != 0:
        return False, f"certgrad check exit {rc}: {last}"
    out_dir = os.path.join(work, case["name"])
    if os.path.isdir(out_dir):
        for f in os.listdir(out_dir):
            if f.startswith("out_") and f.endswith(".npy"):
                os.remove(os.path.join(out_dir, f))
    inputs = [os.path.join(case_dir, f) for f in case["inputs"]]
    cmd = [certgrad, "run", mlir, "--func", case["func"], "--out", out_dir]
    if inputs:
        cmd += ["--inputs", *inputs]
    rc, last = run_tool(cmd, timeout)
    if rc != 0:
        return False, f"certgrad run exit {rc}: {last}"
    produced = []
    while os.path.exists(os.path.join(out_dir, f"out_{len(produced)}.npy")):
        produced.append(os.path.join(out_dir, f"out_{len(produced)}.npy"))
    norm, elem, note, reason = compare_outputs(case, case_dir, produced, floor)
    if reason:
        return False, reason
    thr = case["threshold"]
    ok = norm <= thr and elem <= thr
    return ok, f"norm {norm:.2e} elem {elem:.2e} thr {thr:.0e} | {note}"


def xla_run_text(text: str, arrays: list) -> list:
    """Compile StableHLO `text` with XLA CPU and run it on `arrays`; the outputs
    as numpy arrays. Uses jaxlib internals (stable enough to pin)."""
    import jax
    from jax._src import xla_bridge
    from jax._src.lib import xla_client

    backend = xla_bridge.get_backend("cpu")
    devices = xla_client.DeviceList(tuple(backend.devices()[:1]))
    executable = backend.compile_and_load(text, devices, xla_client.CompileOptions())
    args = [jax.device_put(a) for a in arrays]
    results = executable.execute_sharded(args).disassemble_into_single_device_arrays()
    return [np.asarray(per_device[0]) for per_device in results]


def run_text_on_xla(case: dict, case_dir: str, out_dir: str) -> None:
    """Run CASE.mlir from its text on XLA CPU and write out_K.npy, like
    `certgrad run` would."""
    with open(os.path.join(case_dir, case["file"])) as fh:
        text = fh.read()
    outs = xla_run_text(text, [np.load(os.path.join(case_dir, f)) for f in case["inputs"]])
    os.makedirs(out_dir, exist_ok=True)
    for k, out in enumerate(outs):
        np.save(os.path.join(out_dir, f"out_{k}.npy"), out)


def xla_text_case(case: dict, case_dir: str, work: str, floor: float) -> tuple[bool, str]:
    out_dir = os.path.join(work, case["name"])
    try:
        run_text_on_xla(case, case_dir, out_dir)
    except Exception as e:  # any compile/run failure is this case's failure
        return False, f"xla from text failed: {str(e).splitlines()[0] if str(e) else type(e).__name__}"
    produced = [os.path.join(out_dir, f"out_{k}.npy") for k in range(len(case["expected"]))]
    norm, elem, note, reason = compare_outputs(case, case_dir, produced, floor)
    if reason:
        return False, reason
    thr = case["threshold"]
    return norm <= thr and elem <= thr, f"norm {norm:.2e} elem {elem:.2e} thr {thr:.0e} (xla from text) | {note}"


def self_check_case(case: dict, case_dir: str, floor: float) -> tuple[bool, str]:
    """JAX-f32 against JAX-f64 under the same measures and threshold."""
    norm_max = elem_max = 0.0
    for exp_file, ref_file in zip(case["expected"], case["expected64"]):
        exp = np.load(os.path.join(case_dir, exp_file))
        ref = np.load(os.path.join(case_dir, ref_file))
        n, e = errors(exp, ref, floor)
        norm_max, elem_max = max(norm_max, n), max(elem_max, e)
    thr = case["threshold"]
    ok = norm_max <= thr and elem_max <= thr
    return ok, f"norm {norm_max:.2e} elem {elem_max:.2e} thr {thr:.0e} (jax f32 vs f64)"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--manifest", required=True, help="manifest.json from jax_export.py")
    parser.add_argument("--certgrad", help="certgrad binary (required unless --self-check)")
    parser.add_argument("--work", help="directory for certgrad outputs (default: MANIFEST_DIR/certgrad_out)")
    parser.add_argument("--timeout", type=float, default=float(os.environ.get("CERTGRAD_CASE_TIMEOUT", "600")))
    parser.add_argument(
        "--elem-floor",
        type=float,
        default=float(os.environ.get("JAX_CHECK_ELEM_FLOOR", ELEMENT_FLOOR)),
        help="element-wise floor relative to max|b| (default 1e-2; env JAX_CHECK_ELEM_FLOOR)",
    )
    parser.add_argument("--self-check", action="store_true", help="compare JAX-f32 with JAX-f64 only")
    parser.add_argument("--xla-text", action="store_true", help="run each CASE.mlir text on XLA instead of certgrad")
    parser.add_argument("filters", nargs="*", help="only cases whose name contains one of these")
    args = parser.parse_args()
    if not (args.self_check or args.xla_text or args.certgrad):
        parser.error("--certgrad is required unless --self-check or --xla-text")

    with open(args.manifest) as fh:
        manifest = json.load(fh)
    case_dir = os.path.dirname(os.path.abspath(args.manifest))
    work = args.work or os.path.join(case_dir, "certgrad_out")
    cases = [c for c in manifest["cases"] if not args.filters or any(f in c["name"] for f in args.filters)]
    if not cases:
        print(f"no case matches {args.filters}", file=sys.stderr)
        return 1

    print(
        "measures: norm = |a-b|/|b|; elem = max|a-b|/max(|b|, floor), "
        f"floor = {args.elem_floor:g}*max|b|; pass when both <= threshold"
    )
    width = max(len(c["name"]) for c in cases)
    passed = failed = 0
    for case in cases:
        t0 = time.time()
        if args.self_check:
            ok, detail = self_check_case(case, case_dir, args.elem_floor)
        elif args.xla_text:
            ok, detail = xla_text_case(case, case_dir, work, args.elem_floor)
        else:
            ok, detail = check_case(case, case_dir, args.certgrad, work, args.timeout, args.elem_floor)
        passed, failed = passed + ok, failed + (not ok)
        ops = short_ops(case["ops"])
        print(f"{'PASS' if ok else 'FAIL'} {case['name']:<{width}} {time.time() - t0:6.2f}s  {detail}  [ops: {ops}]")
        sys.stdout.flush()
    print(f"jax oracle: {passed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
