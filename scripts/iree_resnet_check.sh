#!/usr/bin/env bash
# iree_resnet_check.sh: does IREE accept the ResNet-34 train step?
#
# Renders ${IREE_RESNET_NET:-resnet34} (batch ${IREE_RESNET_BATCH:-8}) with the
# shifted-sums max-pool backward (PoolBackward::ShiftedSums: strided slices,
# compare/select, interior pads, no select_and_scatter) for AdamW and for
# heavy-ball momentum, and compiles each UNCHANGED with
# `iree-compile --iree-input-type=stablehlo --iree-hal-target-backends=llvm-cpu`
# (compile only), printing render and compile times. Then the XFAIL control:
# the same net rendered with the select_and_scatter backward must be rejected
# ("failed to legalize operation 'stablehlo.select_and_scatter'", the
# overlapping 3×3/s2 pad-1 stem pool; TOOLING.md). Renders come from
# `certgrad render NET --pool-backward shifted-sums|select-and-scatter` (the
# release binary, built when absent) and each step is run through
# `certgrad check` before it is compiled.
# Needs iree-base-compiler 3.13.0 in ${CERTGRAD_VENV:-$HOME/.cache/certgrad/venv}
# (installed when absent; skips loudly when pip cannot).
# Last line: "iree resnet: N compiled, M failed; select_and_scatter XFAIL|XPASS".
# Exit: 0 when every shifted-sums render compiled (or SKIP), 1 otherwise.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
VENV=${CERTGRAD_VENV:-$HOME/.cache/certgrad/venv}
IREE_VERSION=3.13.0
NET=${IREE_RESNET_NET:-resnet34}
BATCH=${IREE_RESNET_BATCH:-8}

skip() {
    echo "SKIP: iree resnet check: $*"
    exit 0
}

[[ -x "$VENV/bin/python" ]] || python3 -m venv "$VENV" 2>/dev/null || skip "cannot create a venv at $VENV"
if [[ ! -x "$VENV/bin/iree-compile" ]]; then
    "$VENV/bin/pip" install -q --disable-pip-version-check "iree-base-compiler==$IREE_VERSION" ||
        skip "pip install iree-base-compiler==$IREE_VERSION failed"
fi
CERTGRAD=${CERTGRAD_BIN:-$ROOT/target/release/certgrad}
if [[ -z "${CERTGRAD_BIN:-}" ]]; then
    (cd "$ROOT" && cargo build --release -q -p certgrad)
fi

render() { # OPTIMIZER POOL_BACKWARD OUT.mlir
    local start ms
    start=$(date +%s%N)
    "$CERTGRAD" render "$NET" --optimizer "$1" --batch "$BATCH" --pool-backward "$2" -o "$3" >/dev/null
    ms=$((($(date +%s%N) - start) / 1000000))
    echo "render $NET $1 batch $BATCH ($2): $ms ms, $(stat -c %s "$3") bytes"
}

WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT

compile() { # FILE.mlir LOG -> status of iree-compile
    "$VENV/bin/iree-compile" --iree-input-type=stablehlo --iree-hal-target-backends=llvm-cpu \
        --iree-llvmcpu-target-cpu=host "$1" -o "${1%.mlir}.vmfb" 2>"$2"
}

compiled=0
failed=0
for opt in adamw momentum; do
    step=$WORK/$NET-$opt.mlir
    render "$opt" shifted-sums "$step"
    "$CERTGRAD" check "$step" >/dev/null && echo "certgrad check: ok"
    start=$(date +%s%N)
    if compile "$step" "$WORK/$opt.log"; then
        ms=$((($(date +%s%N) - start) / 1000000))
        echo "iree-compile $NET $opt (shifted-sums pool backward): ok in $ms ms," \
            "$(stat -c %s "${step%.mlir}.vmfb") bytes of vmfb"
        compiled=$((compiled + 1))
    else
        grep -m3 error "$WORK/$opt.log" || tail -5 "$WORK/$opt.log"
        echo "iree-compile $NET $opt (shifted-sums pool backward): FAILED"
        failed=$((failed + 1))
    fi
done

# The control: the select_and_scatter form of the same step.
sas=$WORK/$NET-adamw-sas.mlir
render adamw select-and-scatter "$sas"
if compile "$sas" "$WORK/sas.log"; then
    control=XPASS
    echo "XPASS: iree-compile accepted the select_and_scatter render (IREE learned the op?)"
elif grep -q "failed to legalize operation 'stablehlo.select_and_scatter'" "$WORK/sas.log"; then
    control=XFAIL
    echo "XFAIL (expected): iree-compile rejects the select_and_scatter render:"
    grep -m1 -o "error: failed to legalize operation 'stablehlo.select_and_scatter'[^%]*" "$WORK/sas.log"
else
    control=XFAIL-other
    grep -m3 error "$WORK/sas.log" || tail -5 "$WORK/sas.log"
    echo "the select_and_scatter render failed for another reason than the known one"
fi
echo "iree resnet: $compiled compiled, $failed failed; select_and_scatter $control"
[[ $failed -eq 0 ]]
