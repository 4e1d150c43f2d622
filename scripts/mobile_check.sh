#!/usr/bin/env bash
# mobile_check.sh: the depthwise family (issue 14 §4) outside certgrad.
#
# For each of mobilenetv2, efficientnet-b0 and mobilenetv4-conv-m at a reduced
# resolution (${MOBILE_CHECK_HW:-64x64}, K=10, batch ${MOBILE_CHECK_BATCH:-2}):
#  1. render the AdamW and heavy-ball train steps (`certgrad render`), run
#     `certgrad check` on each, and compile each UNCHANGED with
#     `iree-compile --iree-input-type=stablehlo --iree-hal-target-backends=llvm-cpu`,
#     printing render and compile times;
#  2. run the AdamW step once on seeded inputs at a smooth point
#     (scripts/step_inputs.py) through `certgrad run --engine native` and
#     `--engine pjrt` (XLA's CPU compiler through the PJRT plugin) and compare
#     every output norm-wise (threshold 1e-4, scripts/step_inputs.py `compare`).
# Setup as scripts/engines_check.sh (venv ${CERTGRAD_VENV:-$HOME/.cache/certgrad/venv}
# with numpy, iree-base-compiler 3.13.0; the PJRT plugin at
# ${CERTGRAD_PJRT_PLUGIN:-$HOME/.cache/certgrad/pjrt/libpjrt_cpu.so}, fetched by
# engines_check.sh). What is missing is skipped LOUDLY.
# Last line: "mobile check: N passed, M failed, K skipped". Exit 1 on any failure.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
VENV=${CERTGRAD_VENV:-$HOME/.cache/certgrad/venv}
HW=${MOBILE_CHECK_HW:-64x64}
BATCH=${MOBILE_CHECK_BATCH:-2}
NETS=${MOBILE_CHECK_NETS:-"mobilenetv2 efficientnet-b0 mobilenetv4-conv-m"}
PLUGIN=${CERTGRAD_PJRT_PLUGIN:-$HOME/.cache/certgrad/pjrt/libpjrt_cpu.so}
PASSED=0
FAILED=0
SKIPPED=0
skip() {
    echo "SKIP: mobile check: $*"
    SKIPPED=$((SKIPPED + 1))
}
pass() { PASSED=$((PASSED + 1)); }
fail() {
    echo "FAIL: $*"
    FAILED=$((FAILED + 1))
}

PY="$VENV/bin/python"
HAVE_IREE=0
HAVE_NUMPY=0
if [[ -x "$PY" ]]; then
    [[ -x "$VENV/bin/iree-compile" ]] && HAVE_IREE=1
    "$PY" -c "import numpy" 2>/dev/null && HAVE_NUMPY=1
fi
[[ $HAVE_IREE -eq 1 ]] || skip "no iree-compile in $VENV/bin"
HAVE_PJRT=0
if [[ -f "$PLUGIN" && $HAVE_NUMPY -eq 1 ]]; then HAVE_PJRT=1; else skip "pjrt: no plugin at $PLUGIN or no numpy (run scripts/engines_check.sh once to fetch it)"; fi

BIN=${CERTGRAD_BIN:-$ROOT/target/release/certgrad}
[[ -x "$BIN" ]] || (cd "$ROOT" && cargo build --release -q -p certgrad)
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT

ms_since() { echo $((($(date +%s%N) - $1) / 1000000)); }

for base in $NETS; do
    net="$base-k10-$HW"
    for opt in adamw momentum; do
        step="$WORK/$net-$opt.mlir"
        start=$(date +%s%N)
        if ! "$BIN" render "$net" --optimizer "$opt" --batch "$BATCH" -o "$step" >/dev/null; then
            fail "render $net $opt"
            continue
        fi
        echo "render $net $opt batch $BATCH: $(ms_since "$start") ms, $(stat -c %s "$step") bytes"
        if "$BIN" check "$step" >/dev/null; then pass; else fail "certgrad check $net $opt"; fi
        [[ $HAVE_IREE -eq 1 ]] || continue
        start=$(date +%s%N)
        if "$VENV/bin/iree-compile" --iree-input-type=stablehlo --iree-hal-target-backends=llvm-cpu \
            --iree-llvmcpu-target-cpu=host "$step" -o "${step%.mlir}.vmfb" 2>"$WORK/iree.log"; then
            echo "iree-compile $net $opt: ok in $(ms_since "$start") ms"
            pass
        else
            grep -m3 error "$WORK/iree.log" || tail -5 "$WORK/iree.log"
            fail "iree-compile $net $opt"
        fi
    done
    [[ $HAVE_PJRT -eq 1 ]] || continue
    D="$WORK/$net-run"
    mkdir -p "$D"
    cp "$WORK/$net-adamw.mlir" "$D/step.mlir"
    "$PY" "$ROOT/scripts/step_inputs.py" "$D/step.mlir" "$D" "$BIN" --min-margin 1e-5
    ok=1
    for ENGINE in native pjrt; do
        EXTRA=()
        [[ $ENGINE == pjrt ]] && EXTRA=(--pjrt-plugin "$PLUGIN")
        if "$BIN" run "$D/step.mlir" --engine "$ENGINE" "${EXTRA[@]}" \
            --inputs "$D"/in_*.npy --out "$D/out_$ENGINE" >"$D/$ENGINE.log" 2>&1; then
            echo "$net adamw $ENGINE: $(tail -1 "$D/$ENGINE.log")"
        else
            tail -10 "$D/$ENGINE.log"
            fail "$net adamw step on $ENGINE"
            ok=0
        fi
    done
    [[ $ok -eq 1 ]] || continue
    if "$PY" - "$D" "$net adamw pjrt vs native" "$ROOT/scripts" <<'PY'; then
import glob, os, re, sys
import numpy as np
d, label, scripts = sys.argv[1:]
sys.path.insert(0, scripts)
from step_inputs import compare
n = len(glob.glob(os.path.join(d, "out_native", "out_*.npy")))
load = lambda e: [np.load(os.path.join(d, f"out_{e}", f"out_{k}.npy")) for k in range(n)]
text = open(os.path.join(d, "step.mlir")).read()
params = re.search(r"func\.func public @\w+\((.*?)\)\s*->", text, re.S).group(1)
shapes = re.findall(r"tensor<([^>]*)>", params)
first_scalar = next(i for i, s in enumerate(shapes) if "x" not in s)
p = (first_scalar - 1) // 3
passed, failed = compare(load("native"), load("pjrt"), 3 * p, True, label)
sys.exit(1 if failed else 0)
PY
        pass
    else
        fail "$net adamw pjrt vs native"
    fi
done
echo "mobile check: $PASSED passed, $FAILED failed, $SKIPPED skipped"
[[ $FAILED -eq 0 ]]
