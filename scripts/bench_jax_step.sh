#!/usr/bin/env bash
# bench_jax_step.sh: `certgrad run` of realistic flax/optax train steps against
# `jax.jit` of the same steps on this CPU (scripts/bench_jax_step.py), one table.
#
# Owns the sequence: the venv check, the release build, the timing run. Not in
# CI (a timing, not a check).
#
# Usage: scripts/bench_jax_step.sh [--only NAME ...] [--repeat N]
# Environment:
#   CERTGRAD_VENV   venv path (default $HOME/.cache/certgrad/venv; flax and
#                   optax as scripts/jax_corpus_check.sh installs them)
#   CERTGRAD_BIN    certgrad binary (default: cargo build --release)
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
VENV=${CERTGRAD_VENV:-$HOME/.cache/certgrad/venv}
if ! "$VENV/bin/python" -c "import jax, flax, optax" >/dev/null 2>&1; then
    echo "SKIP: bench_jax_step: no jax/flax/optax venv at $VENV (run scripts/jax_corpus_check.sh)"
    exit 0
fi
if [[ -n "${CERTGRAD_BIN:-}" ]]; then
    BIN=$CERTGRAD_BIN
else
    (cd "$ROOT" && cargo build --release -q -p certgrad)
    BIN=$ROOT/target/release/certgrad
fi
exec "$VENV/bin/python" "$ROOT/scripts/bench_jax_step.py" --certgrad "$BIN" "$@"
