#!/usr/bin/env bash
# bench_xla.sh: certgrad's native executor vs XLA-CPU through the PJRT plugin
# on the same rendered text — each net's train step (SGD) and eval forward,
# `certgrad run --engine native` vs `--engine pjrt`, the same seeded inputs,
# alternating fresh processes; one table row per (net, kind) with the ratio
# native/pjrt measured in this run (scripts/bench_xla.py says how).
#
# Usage: scripts/bench_xla.sh [bench_xla.py options: --nets a,b --kinds eval,step
#        --step-batch B --eval-batch B --repeat N --rounds R]
# Defaults: cifar8-bbn, resnet34, mobilenetv2, convnext-t, vit-tiny; batch 8
# (224² nets at their built-in resolution); 3 runs per process, 2 rounds.
# A benchmark, not a gate (CI does not run it): setup failures skip loudly.
# Setup as scripts/engines_check.sh: the venv at
# ${CERTGRAD_VENV:-$HOME/.cache/certgrad/venv} with numpy; the plugin at
# ${CERTGRAD_PJRT_PLUGIN:-$HOME/.cache/certgrad/pjrt/libpjrt_cpu.so} (run
# engines_check.sh once to fetch it); the release binary (built if missing).
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
VENV=${CERTGRAD_VENV:-$HOME/.cache/certgrad/venv}
PLUGIN=${CERTGRAD_PJRT_PLUGIN:-$HOME/.cache/certgrad/pjrt/libpjrt_cpu.so}
BIN=${CERTGRAD_BIN:-$ROOT/target/release/certgrad}
if ! "$VENV/bin/python" -c "import numpy" 2>/dev/null; then
    echo "SKIP: bench_xla: no venv with numpy at $VENV"
    exit 0
fi
if [[ ! -f "$PLUGIN" ]]; then
    echo "SKIP: bench_xla: no PJRT plugin at $PLUGIN (scripts/engines_check.sh fetches it)"
    exit 0
fi
[[ -x "$BIN" ]] || (cd "$ROOT" && cargo build --release -q -p certgrad)
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
exec "$VENV/bin/python" "$ROOT/scripts/bench_xla.py" "$BIN" "$PLUGIN" "$WORK" "$@"
