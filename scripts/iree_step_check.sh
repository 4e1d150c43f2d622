#!/usr/bin/env bash
# iree_step_check.sh: does a real engine run certgrad's rendered train step the
# way certgrad does?
#
# Renders the cifar8-bbn AdamW train step (batch ${IREE_STEP_BATCH:-32}),
# compiles the printed text UNCHANGED with
# `iree-compile --iree-input-type=stablehlo --iree-hal-target-backends=llvm-cpu`,
# runs one step with the IREE Python runtime on seeded random inputs (written
# as .npy), runs `certgrad run` (fast f32 path) on the same .npy files, and
# compares every output norm-wise: ||a - b|| / ||b|| (absolute when b == 0),
# threshold 1e-4. TOOLING.md records IREE's known ~6e-5 norm-wise drift on
# batch-BN gradients, so the max is printed as measured, not rounded away.
# Installs iree-base-compiler / iree-base-runtime 3.13.0 into the venv at
# ${CERTGRAD_VENV:-$HOME/.cache/certgrad/venv}; skips loudly when pip cannot.
# Last line: "iree step: N passed, M failed". Exit: 0 all passed (or SKIP).
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
VENV=${CERTGRAD_VENV:-$HOME/.cache/certgrad/venv}
IREE_VERSION=3.13.0
BATCH=${IREE_STEP_BATCH:-32}
NET=cifar8-bbn

skip() {
    echo "SKIP: iree step check: $*"
    exit 0
}

[[ -x "$VENV/bin/python" ]] || python3 -m venv "$VENV" 2>/dev/null || skip "cannot create a venv at $VENV"
"$VENV/bin/python" -c "import numpy" 2>/dev/null ||
    "$VENV/bin/pip" install -q --disable-pip-version-check numpy || skip "pip install numpy failed"
if ! "$VENV/bin/python" -c "import iree.runtime, iree.compiler" 2>/dev/null || [[ ! -x "$VENV/bin/iree-compile" ]]; then
    "$VENV/bin/pip" install -q --disable-pip-version-check \
        "iree-base-compiler==$IREE_VERSION" "iree-base-runtime==$IREE_VERSION" ||
        skip "pip install iree-base-compiler/iree-base-runtime==$IREE_VERSION failed"
fi
BIN=${CERTGRAD_BIN:-$ROOT/target/release/certgrad}
[[ -x "$BIN" ]] || (cd "$ROOT" && cargo build --release -q -p certgrad)

WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
"$BIN" render "$NET" --optimizer adamw --batch "$BATCH" -o "$WORK/step.mlir"
"$BIN" check "$WORK/step.mlir" >/dev/null
start=$(date +%s%N)
# (Its generic-CPU-target advisory goes to the log; printed only on failure.)
if ! "$VENV/bin/iree-compile" --iree-input-type=stablehlo --iree-hal-target-backends=llvm-cpu \
    "$WORK/step.mlir" -o "$WORK/step.vmfb" 2>"$WORK/compile.log"; then
    grep -m5 error "$WORK/compile.log" || tail -5 "$WORK/compile.log"
    echo "iree step: 0 passed, 1 failed (iree-compile rejected the rendered step)"
    exit 1
fi
echo "iree-compile: $((($(date +%s%N) - start) / 1000000)) ms"

"$VENV/bin/python" - "$WORK" "$BIN" <<'PY'
import os, re, subprocess, sys, time
import numpy as np
import iree.runtime as ireert

work, binary = sys.argv[1], sys.argv[2]
text = open(os.path.join(work, "step.mlir")).read()
head = re.search(r"func\.func public @(\w+)\((.*?)\)\s*->", text, re.S)
fname, params = head.group(1), head.group(2)
shapes = []
for t in re.findall(r"tensor<([^>]*)>", params):
    dims = t.split("x")[:-1]
    shapes.append(tuple(int(d) for d in dims))
# Packed protocol: x, θ…, m…, v…, lr, bc1, bc2, running stats…, onehot.
first_scalar = next(i for i, s in enumerate(shapes) if s == ())
p = (first_scalar - 1) // 3
rng = np.random.default_rng(20240601)
inputs = []
for i, s in enumerate(shapes):
    if i == 0:
        a = rng.standard_normal(s)
    elif i <= p:
        a = 0.2 * rng.standard_normal(s) + (1.0 if len(s) == 1 and i % 4 == 3 else 0.0)
    elif i <= 2 * p:
        a = 0.01 * rng.standard_normal(s)
    elif i <= 3 * p:
        a = 1e-4 * np.abs(rng.standard_normal(s))
    elif i == first_scalar:
        a = np.array(0.01)
    elif i == first_scalar + 1:
        a = np.array(1 - 0.9**3)
    elif i == first_scalar + 2:
        a = np.array(1 - 0.999**3)
    elif i == len(shapes) - 1:
        a = np.eye(s[1])[rng.integers(0, s[1], s[0])]
    else:
        a = 1.0 + 0.1 * np.abs(rng.standard_normal(s))
    inputs.append(np.asarray(a, dtype=np.float32))
paths = []
for i, a in enumerate(inputs):
    paths.append(os.path.join(work, f"in_{i}.npy"))
    np.save(paths[-1], a)

config = ireert.Config("local-task")
ctx = ireert.SystemContext(config=config)
with open(os.path.join(work, "step.vmfb"), "rb") as f:
    ctx.add_vm_module(ireert.VmModule.copy_buffer(ctx.instance, f.read()))
fn = ctx.modules.module[fname]
t0 = time.time()
res = fn(*inputs)
iree_ms = (time.time() - t0) * 1e3
res = [np.asarray(r.to_host()) for r in (res if isinstance(res, (list, tuple)) else [res])]

out = os.path.join(work, "certgrad_out")
t0 = time.time()
subprocess.run([binary, "run", os.path.join(work, "step.mlir"), "--inputs", *paths, "--out", out],
               check=True, stdout=subprocess.DEVNULL)
cg_ms = (time.time() - t0) * 1e3
names = ["θ'"] * p + ["m'"] * p + ["v'"] * p + ["loss", "bc1", "bc2"]
names += ["batch mean", "batch var"] * ((len(res) - len(names)) // 2)
passed = failed = 0
worst = (0.0, "")
for k, b in enumerate(res):
    a = np.load(os.path.join(out, f"out_{k}.npy"))
    b = b.astype(np.float64).reshape(a.shape)
    nb = np.linalg.norm(b)
    err = np.linalg.norm(a - b) / (nb if nb > 0 else 1.0)
    if err > worst[0]:
        worst = (err, f"out_{k} ({names[k] if k < len(names) else '?'}, shape {a.shape})")
    if np.isfinite(err) and err <= 1e-4:
        passed += 1
    else:
        failed += 1
        print(f"FAIL out_{k} {names[k] if k < len(names) else '?'}: ||a-b||/||b|| = {err:.3e}")
print(f"IREE llvm-cpu step {iree_ms:.1f} ms (first call), certgrad run {cg_ms:.1f} ms (process)")
print(f"max norm-wise error {worst[0]:.3e} at {worst[1]} (threshold 1e-4)")
print(f"iree step: {passed} passed, {failed} failed")
sys.exit(1 if failed else 0)
PY
