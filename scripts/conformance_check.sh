#!/usr/bin/env bash
# conformance_check.sh: the StableHLO conformance suite (scripts/conformance.py)
# run against `certgrad run`, native executor and generic evaluator.
#
# Owns the sequence: the venv (shared with scripts/jax_check.sh, which creates
# and validates it), the generation of the cases with JAX's expected outputs
# (into OUT, outside the tree's sources), the certgrad build, and both runs.
# Prints per case what is WRONG or UNSUPPORTED, a per-op table and the totals.
#
# Usage: scripts/conformance_check.sh [--only SUBSTR ...]
# Environment:
#   CERTGRAD_VENV   venv path (default $HOME/.cache/certgrad/venv)
#   OUT             case directory (default target/conformance in the repo)
#   CERTGRAD_BIN    certgrad binary (default: cargo build --release)
# Exit: 0 when no case is WRONG beyond scripts/conformance_known_wrong.txt
# (unsupported ops are listed, not failed) or SKIP: no jax; 1 otherwise.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
VENV=${CERTGRAD_VENV:-$HOME/.cache/certgrad/venv}
OUT=${OUT:-$ROOT/target/conformance}
JAX_VERSION=0.10.2

if ! [[ -x "$VENV/bin/python" ]] ||
    ! "$VENV/bin/python" -c "import jax, numpy, ml_dtypes; assert jax.__version__ == '$JAX_VERSION'" >/dev/null 2>&1; then
    echo "SKIP: conformance suite: no jax $JAX_VERSION venv at $VENV (run scripts/jax_check.sh to create it)"
    exit 0
fi
PY="$VENV/bin/python"

if [[ -n "${CERTGRAD_BIN:-}" ]]; then
    BIN=$CERTGRAD_BIN
else
    (cd "$ROOT" && cargo build --release -q -p certgrad)
    BIN=$ROOT/target/release/certgrad
fi

rm -rf "$OUT"
"$PY" "$ROOT/scripts/conformance.py" --out "$OUT" --generate-only "$@"
status=0
echo "== conformance: certgrad run (native)"
"$PY" "$ROOT/scripts/conformance.py" --out "$OUT" --reuse --certgrad "$BIN" || status=1
echo "== conformance: certgrad run --generic"
"$PY" "$ROOT/scripts/conformance.py" --out "$OUT" --reuse --certgrad "$BIN" --generic || status=1
exit $status
