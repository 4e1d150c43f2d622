#!/usr/bin/env bash
# ln_check.sh: the LayerNorm family on the other engines.
#
# For ConvNeXt-T and ViT-Tiny at a reduced size (convnext-t-k10-32x32 and
# vit-tiny-k10-32x32-p4: every channel count of the paper's nets, 32² images,
# K=10, batch ${LN_CHECK_BATCH:-2}), the AdamW train step rendered plain and
# with --drop-path 0.1 (docs/conventions.md §13: per-example keep inputs dp{i} [B]):
#  1. render each and `certgrad check` it, printing render times;
#  2. one step of each on seeded inputs (scripts/step_inputs.py `draw`; the
#     keep inputs overwritten with one mask draw, 0 or 1/keep per example) through
#     `certgrad run --engine native` and `--engine pjrt` (XLA's CPU compiler
#     through the PJRT plugin), compared with native norm-wise (threshold
#     1e-4, scripts/step_inputs.py `compare`, every output gated: these nets
#     have no ReLU or max pool, so every point is smooth);
#  3. `--engine iree` (iree-compile on the text UNCHANGED, then
#     iree-run-module) on the drop-path renders, compared the same way; with
#     LN_CHECK_FULL=1 on the plain renders too. The drop-path render holds
#     every op of the plain one (plus the keep broadcasts and products), and
#     one IREE compile costs ~60 s CPU, so CI compiles two.
# Each engine's compile ("prepared in") time is printed, and the script's
# own wall time last.
# Setup: scripts/lib_engines.sh (venv, IREE tools, PJRT plugin, binary; what
# is missing is skipped LOUDLY).
# Last lines: "ln check: N passed, M failed, K skipped" and the wall time.
# Exit 1 on any failure.
set -euo pipefail

T0=$(date +%s)
BATCH=${LN_CHECK_BATCH:-2}
NETS=${LN_CHECK_NETS:-"convnext-t-k10-32x32 vit-tiny-k10-32x32-p4"}
VARIANTS=${LN_CHECK_VARIANTS:-"adamw adamw-dp"}
FULL=${LN_CHECK_FULL:-0}
LABEL="ln check"
source "$(dirname "${BASH_SOURCE[0]}")/lib_engines.sh"

# engine_step NAME ENGINES...: one step of $WORK/NAME.mlir on each engine from
# the same inputs, every other engine compared with native.
engine_step() {
    local name=$1 d="$WORK/$1"
    shift
    mkdir -p "$d"
    cp "$WORK/$name.mlir" "$d/step.mlir"
    # Seeded inputs (scripts/step_inputs.py `draw`; no margin search: these
    # nets take no decision, every point is smooth), the keep inputs (between
    # the host scalars lr, bc1, bc2 and the one-hot targets; none without
    # --drop-path) overwritten with one mask draw at keep 0.9.
    if ! "$PY" - "$d" "$ROOT/scripts" <<'PY'; then
import glob, os, sys
import numpy as np
d, scripts = sys.argv[1:]
sys.path.insert(0, scripts)
from step_inputs import draw, layout
text = open(os.path.join(d, "step.mlir")).read()
paths = draw(text, d, 0)
_, _, p, first_scalar = layout(text)
rng = np.random.default_rng(5)
# Weights at a He-like scale, N(0, 1/fan_in) (conv OIHW: I·H·W; dense [in,
# out]: in), as the trainer initialises them: draw's 0.2·N(0,1) grows the
# residual stream of 18 ConvNeXt blocks until the logits overflow exp in f32
# (measured: the loss is NaN on every engine at that point).
for q in paths[1 : p + 1]:
    a = np.load(q)
    if a.ndim >= 2:
        fan_in = int(np.prod(a.shape[1:])) if a.ndim == 4 else a.shape[0]
        np.save(q, (rng.standard_normal(a.shape) / np.sqrt(fan_in)).astype(np.float32))
keep = 0.9
for q in paths[first_scalar + 3 : len(paths) - 1]:
    a = np.load(q)
    np.save(q, np.where(rng.random(a.shape) < keep, 1 / keep, 0.0).astype(np.float32))
print(f"inputs: seed 0, {len(paths) - 1 - first_scalar - 3} keep input(s) drawn at keep {keep}")
PY
        fail "$name: no inputs for the comparison"
        return
    fi
    run_engines "$d" "$name" "$name " native "$@"
    local engine
    for engine in "$@"; do
        compare_with_native "$d" "$engine" "$name $engine vs native" True 1
    done
}

for net in $NETS; do
    for variant in $VARIANTS; do
        name="$net-$variant"
        flags=(--optimizer adamw --batch "$BATCH")
        [[ $variant == adamw-dp ]] && flags+=(--drop-path 0.1)
        start=$(date +%s%N)
        if ! "$BIN" render "$net" "${flags[@]}" -o "$WORK/$name.mlir" >/dev/null; then
            fail "render $name"
            continue
        fi
        echo "render $net ${flags[*]}: $(ms_since "$start") ms, $(stat -c %s "$WORK/$name.mlir") bytes"
        if "$BIN" check "$WORK/$name.mlir" >/dev/null; then pass; else fail "certgrad check $name"; fi
        engines=()
        [[ $HAVE_PJRT -eq 1 ]] && engines+=(pjrt)
        [[ $HAVE_IREE -eq 1 && ($variant == adamw-dp || $FULL -eq 1) ]] && engines+=(iree)
        engine_step "$name" "${engines[@]}"
    done
done
finish
