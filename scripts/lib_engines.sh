# lib_engines.sh: the setup and step plumbing the engine checks share
# (ln_check.sh, mobile_check.sh, tails_check.sh source it; engines_check.sh
# installs what it needs first). Owns: the venv / IREE / PJRT plugin lookup,
# the certgrad binary, the work dir and IREE cache, the pass/fail/skip
# counters, one step of a rendered module on several engines, and the
# norm-wise comparison of an engine's outputs with native's.
#
# Source it after setting LABEL (the counters' name: "ln check", …):
#   VENV   ${CERTGRAD_VENV:-$HOME/.cache/certgrad/venv} (numpy; iree-base-compiler
#          and -runtime 3.13.0 when IREE runs)
#   PLUGIN ${CERTGRAD_PJRT_PLUGIN:-$HOME/.cache/certgrad/pjrt/libpjrt_cpu.so}
#          (fetched by engines_check.sh)
#   BIN    ${CERTGRAD_BIN:-target/release/certgrad}, built when absent
#   IREE compiles go to a fresh cache in the work dir (the "prepared in" times
#   printed are compiles), or to $CERTGRAD_CHECK_IREE_CACHE when set (.ci/run:
#   a persistent cache; its key is the SHA-256 of compiler version, flags and
#   text, so a hit is the same compile of the same text).
# What is missing is skipped LOUDLY; without numpy the caller finishes at once.

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
VENV=${CERTGRAD_VENV:-$HOME/.cache/certgrad/venv}
PLUGIN=${CERTGRAD_PJRT_PLUGIN:-$HOME/.cache/certgrad/pjrt/libpjrt_cpu.so}
PY="$VENV/bin/python"
PASSED=0
FAILED=0
SKIPPED=0
skip() {
    echo "SKIP: $LABEL: $*"
    SKIPPED=$((SKIPPED + 1))
}
pass() { PASSED=$((PASSED + 1)); }
fail() {
    echo "FAIL: $*"
    FAILED=$((FAILED + 1))
}
finish() {
    echo "$LABEL: $PASSED passed, $FAILED failed, $SKIPPED skipped"
    if [[ -n "${T0:-}" ]]; then echo "$LABEL: wall time $(($(date +%s) - T0)) s"; fi
    if [[ $FAILED -eq 0 ]]; then exit 0; else exit 1; fi
}
ms_since() { echo $((($(date +%s%N) - $1) / 1000000)); }

HAVE_NUMPY=0
HAVE_IREE=0
if [[ -x "$PY" ]]; then
    "$PY" -c "import numpy" 2>/dev/null && HAVE_NUMPY=1
    [[ -x "$VENV/bin/iree-compile" && -x "$VENV/bin/iree-run-module" ]] && HAVE_IREE=1
fi
HAVE_PJRT=0
[[ -f "$PLUGIN" ]] && HAVE_PJRT=1
if [[ $HAVE_NUMPY -eq 0 ]]; then
    skip "no venv with numpy at $VENV (run scripts/engines_check.sh once to set it up)"
    finish
fi
[[ $HAVE_IREE -eq 1 ]] || skip "iree: no iree-compile/iree-run-module in $VENV/bin"
[[ $HAVE_PJRT -eq 1 ]] || skip "pjrt: no plugin at $PLUGIN (run scripts/engines_check.sh once to fetch it)"

BIN=${CERTGRAD_BIN:-$ROOT/target/release/certgrad}
[[ -x "$BIN" ]] || (cd "$ROOT" && cargo build --release -q -p certgrad)
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
export CERTGRAD_IREE_CACHE=${CERTGRAD_CHECK_IREE_CACHE:-$WORK/iree-cache}

# engines_available: native, then pjrt and iree where they were found.
engines_available() {
    local e=(native)
    [[ $HAVE_PJRT -eq 1 ]] && e+=(pjrt)
    [[ $HAVE_IREE -eq 1 ]] && e+=(iree)
    echo "${e[@]}"
}

# run_engines DIR NAME PREFIX ENGINE...: one step of DIR/step.mlir (NAME in
# failures) on each engine from DIR/in_*.npy into DIR/out_ENGINE, its result
# line printed after PREFIX.
run_engines() {
    local d=$1 name=$2 prefix=$3 engine
    shift 3
    for engine in "$@"; do
        local extra=()
        case $engine in
        pjrt) extra=(--pjrt-plugin "$PLUGIN") ;;
        iree) extra=(--iree-dir "$VENV/bin") ;;
        esac
        if "$BIN" run "$d/step.mlir" --engine "$engine" "${extra[@]}" \
            --inputs "$d"/in_*.npy --out "$d/out_$engine" >"$d/$engine.log" 2>&1; then
            echo "$prefix$engine: $(sed -e 's/^@[^:]*: [0-9]* outputs written to [^ ]* //' "$d/$engine.log" | tail -1)"
        else
            tail -10 "$d/$engine.log"
            fail "$name step on $engine"
        fi
    done
}

# compare_with_native DIR ENGINE LABEL GATE [FINITE]: DIR/out_ENGINE against
# DIR/out_native norm-wise (scripts/step_inputs.py `compare`, threshold 1e-4;
# GATE True: every output, False: the loss and BN statistics only); with
# FINITE=1, native's outputs must also be finite. Counts a pass or a fail;
# nothing when either run left no outputs (its failure is counted already).
compare_with_native() {
    local d=$1 engine=$2 label=$3 gate=$4 finite=${5:-0}
    [[ -d "$d/out_$engine" && -d "$d/out_native" ]] || return 0
    if "$PY" - "$d" "$engine" "$label" "$ROOT/scripts" "$gate" "$finite" <<'PY'; then
import glob, os, sys
import numpy as np
d, engine, label, scripts, gate, finite = sys.argv[1:]
sys.path.insert(0, scripts)
from step_inputs import compare, gradient_outputs, layout
n = len(glob.glob(os.path.join(d, "out_native", "out_*.npy")))
load = lambda e: [np.load(os.path.join(d, f"out_{e}", f"out_{k}.npy")) for k in range(n)]
text = open(os.path.join(d, "step.mlir")).read()
regions = [r + "'" for r in layout(text)[1]]
if finite == "1" and not all(np.isfinite(a).all() for a in load("native")):
    print(f"FAIL {label}: native's outputs are not finite at this point")
    sys.exit(1)
passed, failed = compare(load("native"), load(engine), gradient_outputs(text), gate == "True", label, regions=regions)
sys.exit(1 if failed else 0)
PY
        pass
    else
        fail "${label#"${label%%[! ]*}"}"
    fi
}
