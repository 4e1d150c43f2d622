#!/usr/bin/env bash
# jax_vjp_check.sh: `certgrad check-vjp` judged on JAX exports, end to end.
#
# Owns the sequence: the venv (shared with scripts/jax_check.sh, which creates
# and validates it), the export of (forward, backward) pairs by
# scripts/jax_vjp_export.py, the certgrad build, one check-vjp call per pair,
# the confusion table (certified/refuted × correct/buggy) and the times.
# Expected: every jax.vjp backward and every correct hand-written backward
# certified (exit 0); every buggy hand-written backward refuted (exit 1).
#
# Usage: scripts/jax_vjp_check.sh
# Environment:
#   CERTGRAD_VENV   venv path (default $HOME/.cache/certgrad/venv)
#   OUT             case directory (default target/jax_vjp_cases in the repo)
#   CERTGRAD_BIN    certgrad binary (default: cargo build --release)
# Exit: 0 all pairs judged as expected (or SKIP: no jax), 1 otherwise.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
VENV=${CERTGRAD_VENV:-$HOME/.cache/certgrad/venv}
OUT=${OUT:-$ROOT/target/jax_vjp_cases}
JAX_VERSION=0.10.2

if ! [[ -x "$VENV/bin/python" ]] ||
    ! "$VENV/bin/python" -c "import jax, numpy; assert jax.__version__ == '$JAX_VERSION'" >/dev/null 2>&1; then
    # scripts/jax_check.sh creates the venv (and skips loudly when it cannot).
    echo "SKIP: jax vjp check: no jax $JAX_VERSION venv at $VENV (run scripts/jax_check.sh to create it)"
    exit 0
fi
PY="$VENV/bin/python"

if [[ -d "$OUT" && -n "$(ls -A "$OUT")" && ! -e "$OUT/.certgrad_vjp_cases" ]]; then
    echo "jax vjp check: $OUT is not empty and holds no exported pairs; refusing to clear it" >&2
    exit 1
fi
rm -rf "$OUT"
"$PY" "$ROOT/scripts/jax_vjp_export.py" --out "$OUT"

if [[ -n "${CERTGRAD_BIN:-}" ]]; then
    BIN=$CERTGRAD_BIN
else
    (cd "$ROOT" && cargo build --release -q -p certgrad)
    BIN=$ROOT/target/release/certgrad
fi
[[ -x "$BIN" ]] || {
    echo "jax vjp check: certgrad binary $BIN not found or not executable" >&2
    exit 1
}

exec "$PY" - "$OUT" "$BIN" <<'PYEOF'
import json, os, subprocess, sys, time
out, binary = sys.argv[1], sys.argv[2]
manifest = json.load(open(os.path.join(out, "manifest.json")))
# kind -> expected exit status: 0 certified, 1 refuted.
runs = []
for case in manifest:
    runs.append((case["name"], "jax.vjp", case["jax"], 0))
    if case.get("ok"):
        runs.append((case["name"], "hand ok", case["ok"], 0))
        runs.append((case["name"], "hand bug", case["bug_file"], 1))
table = {(c, b): 0 for c in ("correct", "buggy") for b in ("certified", "refuted", "other")}
passed = failed = 0
word = {0: "certified", 1: "refuted"}
print(f"{'case':<22} {'backward':<9} {'verdict':<10} {'time':>8}  detail")
for name, kind, bwd, want in runs:
    fwd = next(c["fwd"] for c in manifest if c["name"] == name)
    t0 = time.time()
    p = subprocess.run([binary, "check-vjp", os.path.join(out, fwd), os.path.join(out, bwd)],
                       capture_output=True, text=True, timeout=600)
    dt = time.time() - t0
    got = word.get(p.returncode, f"exit {p.returncode}")
    table[("buggy" if want else "correct", got if p.returncode in word else "other")] += 1
    ok = p.returncode == want
    passed += ok
    failed += not ok
    detail = ""
    for line in (p.stdout + p.stderr).splitlines():
        if "refuted:" in line or "could not decide" in line or "error" in line or "min margin" in line:
            detail = line.strip()
    print(f"{name:<22} {kind:<9} {got:<10} {dt:7.2f}s  {'' if ok else 'UNEXPECTED '}{detail[:150]}")
    if not ok:
        print(p.stdout + p.stderr)
print()
print(f"{'':<10} {'certified':>10} {'refuted':>8} {'other':>6}")
for c in ("correct", "buggy"):
    print(f"{c:<10} {table[(c, 'certified')]:>10} {table[(c, 'refuted')]:>8} {table[(c, 'other')]:>6}")
print(f"jax vjp: {passed} passed, {failed} failed")
sys.exit(1 if failed else 0)
PYEOF
