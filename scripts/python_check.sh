#!/usr/bin/env bash
# python_check.sh: the Python package (python/) end to end.
#
# Owns: installing the build tool and test tools (maturin, pytest, jax) into
# the venv shared with scripts/jax_check.sh, building and installing the
# wheel with `pip install ./python` (maturin compiles the certgrad binary
# into it, reusing this checkout's target/), running python/tests with pytest
# against the INSTALLED package and its binary, and running the example.
# With --fresh it instead proves the install line of docs/python.md: a new venv with
# nothing but pip, `pip install ./python` (pip fetches maturin into an
# isolated build environment), and one certification through the installed
# wheel.
#
# Usage: scripts/python_check.sh [--fresh]
# Environment:
#   CERTGRAD_VENV    venv path (default $HOME/.cache/certgrad/venv)
#   CERTGRAD_PYVENV  the --fresh venv (default $HOME/.cache/certgrad/pyvenv; recreated)
#   CARGO_TARGET_DIR cargo's target (default: this checkout's target/)
# Exit: 0 tests passed (or SKIP: no pip/cargo/registry), 1 otherwise.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
VENV=${CERTGRAD_VENV:-$HOME/.cache/certgrad/venv}
JAX_VERSION=0.10.2
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-$ROOT/target}
export CARGO_INCREMENTAL=0

skip() {
    echo "SKIP: python package check: $*"
    exit 0
}

command -v cargo >/dev/null 2>&1 || skip "no cargo on PATH (the wheel builds the certgrad binary)"

if [[ "${1:-}" == "--fresh" ]]; then
    FRESH=${CERTGRAD_PYVENV:-$HOME/.cache/certgrad/pyvenv}
    rm -rf "$FRESH"
    python3 -m venv "$FRESH" 2>/dev/null || skip "python3 -m venv failed (no venv module)"
    t0=$(date +%s)
    "$FRESH/bin/pip" install -q "$ROOT/python" 2>&1 | tail -5 || true
    "$FRESH/bin/python" -c "import certgrad" 2>/dev/null || skip "pip install ./python failed in a fresh venv (registry unreachable?)"
    echo "fresh venv: pip install ./python took $(( $(date +%s) - t0 )) s"
    cd "$FRESH"
    exec "$FRESH/bin/python" - <<'PYEOF'
import certgrad
f = "func.func @main(%x: tensor<3xf32>) -> tensor<3xf32> {\n  %y = stablehlo.multiply %x, %x : tensor<3xf32>\n  return %y : tensor<3xf32>\n}\n"
b = ("func.func @main(%x: tensor<3xf32>, %dy: tensor<3xf32>) -> tensor<3xf32> {\n"
     "  %c = stablehlo.constant dense<2.0> : tensor<3xf32>\n  %t = stablehlo.multiply %c, %x : tensor<3xf32>\n"
     "  %d = stablehlo.multiply %t, %dy : tensor<3xf32>\n  return %d : tensor<3xf32>\n}\n")
r = certgrad.check_vjp(f, b)
print("binary:", certgrad.binary())
print(repr(r))
assert r.certified
print("fresh venv: OK")
PYEOF
fi

if ! [[ -x "$VENV/bin/python" ]] ||
    ! "$VENV/bin/python" -c "import jax, numpy; assert jax.__version__ == '$JAX_VERSION'" >/dev/null 2>&1; then
    # scripts/jax_check.sh creates the venv (and skips loudly when it cannot).
    skip "no jax $JAX_VERSION venv at $VENV (run scripts/jax_check.sh to create it)"
fi
PY="$VENV/bin/python"
# maturin's PEP 517 hook runs the `maturin` executable: the venv's, on PATH.
export PATH="$VENV/bin:$PATH"
"$PY" -m pip --version >/dev/null 2>&1 || skip "no pip in $VENV"
if ! "$PY" -c "import maturin, pytest" >/dev/null 2>&1; then
    "$PY" -m pip install -q "maturin>=1.5,<2" pytest || skip "pip could not install maturin and pytest"
fi

# --no-build-isolation: the venv's maturin builds (no second download);
# maturin runs `cargo build --release -p certgrad` into $CARGO_TARGET_DIR.
t0=$(date +%s)
"$PY" -m pip install -q --no-build-isolation --force-reinstall --no-deps "$ROOT/python"
echo "python package: wheel built and installed in $(( $(date +%s) - t0 )) s; binary $("$PY" -c 'import certgrad; print(certgrad.binary())')"

cd "$ROOT"
# Not from python/: the tests must import the installed package, not the source tree.
unset CERTGRAD_BIN
status=0
"$PY" -m pytest -q -p no:cacheprovider "$ROOT/python/tests" || status=1
echo "== example: examples/custom_vjp_refuted_then_fixed.py"
"$PY" "$ROOT/examples/custom_vjp_refuted_then_fixed.py" || status=1
exit $status
