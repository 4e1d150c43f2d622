#!/usr/bin/env bash
# jax_check.sh: the JAX oracle check for certgrad, end to end.
#
# Owns the oracle's environment and sequence: a Python venv with pinned
# jax/jaxlib/numpy kept OUTSIDE the clone, the export of every case by
# scripts/jax_export.py, the certgrad build, and the comparison by
# scripts/compare_npy.py (which runs `certgrad check` and `certgrad run` per case).
#
# Usage: scripts/jax_check.sh [CASE_SUBSTRING ...]
# Environment:
#   CERTGRAD_VENV         venv path (default $HOME/.cache/certgrad/venv)
#   OUT                   case directory (default target/jax_cases in the repo)
#   CERTGRAD_BIN          certgrad binary to use (default: cargo build --release)
#   JAX_CHECK_REUSE=1     reuse OUT/manifest.json instead of re-exporting
#   JAX_CHECK_ELEM_FLOOR  element-wise floor relative to max|b| (default 1e-2)
#   CERTGRAD_CASE_TIMEOUT seconds per certgrad call (default 600)
# Exit: 0 all cases passed (or SKIP: jax could not be installed), 1 otherwise.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
VENV=${CERTGRAD_VENV:-$HOME/.cache/certgrad/venv}
OUT=${OUT:-$ROOT/target/jax_cases}
# jax and jaxlib must match each other; these are the versions validated here.
JAX_VERSION=0.10.2
NUMPY_SPEC='numpy>=1.26,<3'

skip() {
    echo "SKIP: jax oracle check: $*"
    exit 0
}

venv_ok() {
    [[ -x "$VENV/bin/python" ]] &&
        "$VENV/bin/python" -c "import jax, jaxlib, numpy; assert jax.__version__ == '$JAX_VERSION'" >/dev/null 2>&1
}

if ! venv_ok; then
    command -v python3 >/dev/null || skip "python3 not found"
    if [[ -e "$VENV" ]]; then
        # Only ever delete something that is recognisably a venv.
        [[ -f "$VENV/pyvenv.cfg" ]] || skip "$VENV exists and is not a venv; set CERTGRAD_VENV"
        echo "jax oracle: venv at $VENV is broken or outdated; recreating"
        rm -rf "$VENV"
    fi
    mkdir -p "$(dirname "$VENV")"
    start=$(date +%s)
    python3 -m venv "$VENV" || skip "python3 -m venv $VENV failed"
    if ! "$VENV/bin/pip" install -q --disable-pip-version-check \
        "jax[cpu]==$JAX_VERSION" "jaxlib==$JAX_VERSION" "$NUMPY_SPEC"; then
        rm -rf "$VENV"
        skip "pip install jax[cpu]==$JAX_VERSION failed (no registry access?)"
    fi
    venv_ok || skip "jax $JAX_VERSION does not import after install"
    echo "jax oracle: venv ready in $(($(date +%s) - start))s at $VENV"
fi
PY="$VENV/bin/python"

if [[ "${JAX_CHECK_REUSE:-0}" == 1 && -f "$OUT/manifest.json" ]]; then
    echo "jax oracle: reusing cases in $OUT"
else
    if [[ -d "$OUT" && -n "$(ls -A "$OUT")" && ! -e "$OUT/.certgrad_jax_cases" ]]; then
        echo "jax oracle: $OUT is not empty and holds no exported cases; refusing to clear it" >&2
        exit 1
    fi
    rm -rf "$OUT"
    "$PY" "$ROOT/scripts/jax_export.py" --out "$OUT" "$@"
fi

if [[ -n "${CERTGRAD_BIN:-}" ]]; then
    BIN=$CERTGRAD_BIN
else
    (cd "$ROOT" && cargo build --release -q -p certgrad)
    BIN=$ROOT/target/release/certgrad
fi
[[ -x "$BIN" ]] || {
    echo "jax oracle: certgrad binary $BIN not found or not executable" >&2
    exit 1
}

exec "$PY" "$ROOT/scripts/compare_npy.py" --manifest "$OUT/manifest.json" --certgrad "$BIN" \
    --work "$OUT/certgrad_out" "$@"
