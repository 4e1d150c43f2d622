#!/usr/bin/env bash
# bench_peers.sh: certgrad's SGD train steps against their peers on this
# machine, in one run: cifar8-bbn (PyTorch eager, JAX), and with --net the
# 224² nets mobilenetv2 (the depthwise family; PyTorch eager's weak spot on
# CPU), resnet34 and vit-tiny against PyTorch eager on the same model (same
# parameter count, checked).
#
# Owns the sequence: a Python venv with torch (CPU) and jax, the release build
# of certgrad, the parameter-count check (the PyTorch and JAX models must have
# exactly the parameter count `certgrad nets` reports for cifar8-bbn), the
# machine's sgemm peak (`certgrad bench gemm`, 1 and 2 threads), then rounds of
# ALTERNATING runs (certgrad, torch 1 thread, torch 2 threads, jax; repeated)
# of the same step at each batch, each run a fresh process, and the table of
# median ms/step, peak RSS and certgrad/peer paired ratios (min/median/max)
# printed by scripts/bench_peers.py. The machine is shared and noisy: only
# the paired ratios mean much.
#
# Usage: scripts/bench_peers.sh [--quick] [--net NET,…] [--batch 32,128]
#                               [--repeats K] [--warmup W] [--iters N]
#   --net        nets to run (cifar8-bbn, mobilenetv2, resnet34, vit-tiny; default
#                cifar8-bbn); every net runs at every --batch
#   --mobile     shorthand for --net mobilenetv2,resnet34 --batch 8
#                --warmup 1 --iters 3 (a 224² step takes seconds)
#   --quick      1 round, 2 warm-up + 5 timed steps per run
#   default      3 rounds, 3 warm-up + 10 timed steps per run
# Environment:
#   CERTGRAD_VENV   venv path (default $HOME/.cache/certgrad/venv)
#   CERTGRAD_BIN    certgrad binary (default: cargo build --release)
#   BENCH_OUT       where the raw results go (default target/bench_peers)
#   CERTGRAD_BENCH_ARGS  extra arguments for `certgrad bench step` (e.g. --generic)
# Exit: 0 table printed, 1 a check failed (parameter counts differ, a run
# failed), 2 usage. A peer that cannot be installed is skipped with a SKIP line.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
VENV=${CERTGRAD_VENV:-$HOME/.cache/certgrad/venv}
OUT=${BENCH_OUT:-$ROOT/target/bench_peers}
NETS=cifar8-bbn
JAX_VERSION=0.10.2
NUMPY_SPEC='numpy>=1.26,<3'

BATCHES=32,128
REPEATS=3
WARMUP=3
ITERS=10
while [[ $# -gt 0 ]]; do
    case $1 in
    --quick)
        REPEATS=1
        WARMUP=2
        ITERS=5
        ;;
    --batch)
        BATCHES=${2:?--batch needs a value, e.g. 32,128}
        shift
        ;;
    --net)
        NETS=${2:?--net needs a value, e.g. mobilenetv2,resnet34}
        shift
        ;;
    --mobile)
        NETS=mobilenetv2,resnet34
        BATCHES=8
        WARMUP=1
        ITERS=3
        ;;
    --repeats)
        REPEATS=${2:?--repeats needs a value}
        shift
        ;;
    --warmup)
        WARMUP=${2:?--warmup needs a value}
        shift
        ;;
    --iters)
        ITERS=${2:?--iters needs a value}
        shift
        ;;
    -h | --help)
        sed -n '2,32p' "$0"
        exit 0
        ;;
    *)
        echo "bench_peers: unknown argument '$1' (see --help)" >&2
        exit 2
        ;;
    esac
    shift
done
for n in $REPEATS $WARMUP $ITERS ${BATCHES//,/ }; do
    [[ $n =~ ^[0-9]+$ ]] || {
        echo "bench_peers: '$n' is not a non-negative integer" >&2
        exit 2
    }
done

say() { echo "bench_peers: $*" >&2; }
IFS=, read -r -a NET_LIST <<<"$NETS"
for net in "${NET_LIST[@]}"; do
    case $net in
    cifar8-bbn | mobilenetv2 | resnet34 | vit-tiny) ;;
    *)
        echo "bench_peers: --net '$net' is not one of cifar8-bbn, mobilenetv2, resnet34, vit-tiny" >&2
        exit 2
        ;;
    esac
done

# ---------------------------------------------------------------- venv
HAVE_JAX=0
HAVE_TORCH=0
if [[ ! -x "$VENV/bin/python" ]]; then
    if [[ -e "$VENV" && ! -f "$VENV/pyvenv.cfg" ]]; then
        say "SKIP python peers: $VENV exists and is not a venv; set CERTGRAD_VENV"
    elif command -v python3 >/dev/null; then
        say "creating venv $VENV"
        mkdir -p "$(dirname "$VENV")"
        python3 -m venv "$VENV" || say "SKIP python peers: python3 -m venv $VENV failed"
    else
        say "SKIP python peers: python3 not found"
    fi
fi
PY=$VENV/bin/python
# The JSON plumbing needs a Python even when the venv could not be made.
JPY=$PY
[[ -x "$PY" ]] || JPY=python3
if [[ -x "$PY" ]]; then
    if ! "$PY" -c "import jax, numpy" >/dev/null 2>&1; then
        say "installing jax $JAX_VERSION into $VENV"
        "$PY" -m pip install -q --disable-pip-version-check \
            "jax[cpu]==$JAX_VERSION" "jaxlib==$JAX_VERSION" "$NUMPY_SPEC" ||
            say "pip install jax failed"
    fi
    if "$PY" -c "import jax, numpy" >/dev/null 2>&1; then
        HAVE_JAX=1
    else
        say "SKIP jax: jax does not import from $VENV"
    fi
    if ! "$PY" -c "import torch" >/dev/null 2>&1; then
        say "installing torch (CPU wheel index first, then PyPI; PyPI's wheel pulls ~3 GB of CUDA libraries)"
        timeout 300 "$PY" -m pip install -q --disable-pip-version-check torch \
            --index-url https://download.pytorch.org/whl/cpu ||
            {
                say "the CPU wheel index is unreachable or failed; trying plain PyPI"
                "$PY" -m pip install -q --disable-pip-version-check torch ||
                    say "pip install torch from PyPI failed"
            }
    fi
    if "$PY" -c "import torch" >/dev/null 2>&1; then
        HAVE_TORCH=1
    else
        say "SKIP torch: torch could not be installed or does not import (the table will have no PyTorch rows)"
    fi
fi

# ---------------------------------------------------------------- certgrad
if [[ -n "${CERTGRAD_BIN:-}" ]]; then
    BIN=$CERTGRAD_BIN
else
    say "building certgrad (release)"
    (cd "$ROOT" && cargo build --release -q -p certgrad)
    BIN=$ROOT/target/release/certgrad
fi
[[ -x "$BIN" ]] || {
    say "certgrad binary $BIN not found or not executable"
    exit 1
}

# ---------------------------------------------------------------- parameter counts
for NET in "${NET_LIST[@]}"; do
    CG_PARAMS=$("$BIN" nets | awk -v n="$NET" '$1 == n { gsub(",", "", $NF); print $NF }')
    [[ -n "$CG_PARAMS" ]] || {
        say "certgrad nets lists no $NET"
        exit 1
    }
    echo "parameters of $NET: certgrad nets $CG_PARAMS"
    PEERS=""
    if [[ $HAVE_TORCH == 1 ]]; then PEERS+="torch,"; fi
    if [[ $HAVE_JAX == 1 && $NET == cifar8-bbn ]]; then PEERS+="jax,"; fi
    if [[ -n "$PEERS" ]]; then
        COUNTS=$("$PY" "$ROOT/scripts/bench_peers.py" params --net "$NET" --peers "${PEERS%,}")
        echo "parameters of $NET: peers $COUNTS"
        if ! "$PY" -c "import json,sys; c=json.loads(sys.argv[1]); bad={k:v for k,v in c.items() if v!=int(sys.argv[2])}; sys.exit(1 if bad else 0)" \
            "$COUNTS" "$CG_PARAMS"; then
            say "FAIL: a peer model's parameter count differs from certgrad's $CG_PARAMS for $NET: $COUNTS"
            exit 1
        fi
    fi
done

# ---------------------------------------------------------------- GEMM peak
echo
for t in 1 2; do
    echo -n "GEMM peak, $t thread(s): "
    RAYON_NUM_THREADS=$t "$BIN" bench gemm --n 1024 --reps 5
done

# ---------------------------------------------------------------- alternating runs
mkdir -p "$OUT"
RESULTS=$OUT/results.jsonl
: >"$RESULTS"
record() { # peer batch round json net
    "$JPY" -c "import json,sys; r=json.loads(sys.argv[4]); r.update(peer=sys.argv[1], batch=int(sys.argv[2]), round=int(sys.argv[3]), net=sys.argv[5]); print(json.dumps(r))" \
        "$1" "$2" "$3" "$4" "$5" >>"$RESULTS"
}
# shellcheck disable=SC2317  # called through the "${cmd[@]}" array below
run_certgrad() { # batch
    # shellcheck disable=SC2086
    "$BIN" bench step "$NET" --batch "$1" --optimizer sgd --warmup "$WARMUP" --iters "$ITERS" --json \
        ${CERTGRAD_BENCH_ARGS:-} |
        "$JPY" -c "import json,sys; j=json.load(sys.stdin); print(json.dumps({'median_ms': j['ms']['median'], 'min_ms': j['ms']['min'], 'max_ms': j['ms']['max'], 'peak_rss_kib': j['peak_rss_kib'], 'executor': j['executor'], 'gflops_per_s': j['gflops_per_s']}))"
}
FAILED=0
IFS=, read -r -a BATCH_LIST <<<"$BATCHES"
echo
echo "alternating runs: $REPEATS round(s) x nets ${NET_LIST[*]} x batches ${BATCH_LIST[*]}, $WARMUP warm-up + $ITERS timed steps per run"
for ((round = 1; round <= REPEATS; round++)); do
    for NET in "${NET_LIST[@]}"; do
        for b in "${BATCH_LIST[@]}"; do
            for peer in certgrad torch-1t torch-2t jax; do
                case $peer in
                certgrad) cmd=(run_certgrad "$b") ;;
                torch-1t | torch-2t)
                    [[ $HAVE_TORCH == 1 ]] || continue
                    th=${peer#torch-}
                    th=${th%t}
                    cmd=(env OMP_NUM_THREADS="$th" MKL_NUM_THREADS="$th" "$PY" "$ROOT/scripts/bench_peers.py" torch
                        --net "$NET" --batch "$b" --threads "$th" --warmup "$WARMUP" --iters "$ITERS")
                    ;;
                jax)
                    [[ $HAVE_JAX == 1 && $NET == cifar8-bbn ]] || continue
                    cmd=("$PY" "$ROOT/scripts/bench_peers.py" jax --batch "$b" --warmup "$WARMUP" --iters "$ITERS")
                    ;;
                esac
                if line=$("${cmd[@]}" 2>"$OUT/last_stderr.txt") && [[ -n "$line" ]]; then
                    record "$peer" "$b" "$round" "$line" "$NET"
                    echo "  round $round $NET batch $(printf '%-4s %-9s' "$b" "$peer") $("$JPY" -c "import json,sys; j=json.loads(sys.argv[1]); print(f\"median {j['median_ms']:8.1f} ms  min {j['min_ms']:8.1f} ms  peak RSS {j['peak_rss_kib']/1024:7.1f} MiB\")" "$line")"
                else
                    say "FAIL: $peer at batch $b (round $round):"
                    tail -5 "$OUT/last_stderr.txt" >&2
                    FAILED=1
                fi
            done
        done
    done
done

"$JPY" "$ROOT/scripts/bench_peers.py" table "$RESULTS"
echo
echo "raw results: $RESULTS"
[[ $HAVE_TORCH == 1 ]] || echo "SKIP: no PyTorch rows (torch could not be installed)"
exit $FAILED
