#!/usr/bin/env bash
# The whole GPU measurement of issue 32 in one bounded run, from the repository root:
#   bash benchmarks/device_gpu.sh
# on the GPU machine (carry .whl and .devdata; see below), where $OUT is the folder whose files come back.
#
# Parts, each with its own share of the time (TOTAL seconds in all, default 480; a part that is slow stops at
# its share and still writes its tables, the cells it did not reach marked "skipped"):
#   1. benchmarks/private_step.py --model cnn       (sgd, dpfair, dpfair-fairdp, opacus, opacus-ghost × B)
#   2. benchmarks/private_step.py --model resnet18  (sgd, dpfair, opacus, opacus-ghost × B)
#   3. torch.profiler tables of dpfair and sgd at one batch, both models
#   4. benchmarks/dpfermi_mnist_epoch.py            (DP-FERMI's MLP and CNN per epoch against non-private)
# Files under $OUT (8 at most come back): private_step_cuda.{md,csv}, private_step_cuda_resnet18.{md,csv},
# private_step_cuda_profile.txt, dpfermi_mnist_epoch_cuda.{md,csv}, device_log.txt.
# PARTS (default "1 2 3 4") picks the parts, PROFILE_MODELS (default "cnn resnet18") part 3's models; the time a
# part leaves for the parts after it counts only the parts that run. Opacus at 4096 is not run on the ResNet
# (its per-sample gradients alone would take 4096 x 11.2M float32 = 183 GB). The second, shorter run:
#   TOTAL=230 PARTS="2 3" PROFILE_MODELS=cnn bash benchmarks/device_gpu.sh
#
# What the GPU machine lacks travels as wheels in .whl/ (dp-accounting, dm-tree, attrs 23, fairlearn, liac-arff,
# cryptography, cffi, pycparser, opacus; skops, prettytable, wcwidth for model files), the MNIST files in
# .devdata/mnist/; dpfair runs from src/ (no install).
#
# A quick check on a CPU: DEVICE=cpu QUICK=1 OUT=/tmp/gout PYTHON=.venv/bin/python bash benchmarks/device_gpu.sh
# (PIP_PY: the Python that installs the wheels, e.g. a python3.12 where PYTHON is another version: the wheels
# are then installed into $SITE to check the line, and not put on PYTHONPATH).
set -u -o pipefail
cd "$(dirname "$0")/.."
START=$(date +%s)
DEVICE=${DEVICE:-cuda}
QUICK=${QUICK:-0}
PYTHON=${PYTHON:-python3}
PIP_PY=${PIP_PY:-$PYTHON}
SITE=${SITE:-/tmp/site}
OUT=${OUT:-/tmp/gout}
TOTAL=${TOTAL:-480}
PARTS=${PARTS:-"1 2 3 4"}
PROFILE_MODELS=${PROFILE_MODELS:-"cnn resnet18"}
mkdir -p "$OUT"
LOG="$OUT/device_log.txt"
SCRATCH=$(mktemp -d)
exec > >(tee -a "$LOG") 2>&1
export PYTHONUNBUFFERED=1 PYTHONWARNINGS=ignore DPFAIR_DATA="$PWD/.devdata"

left() { echo $((START + TOTAL - $(date +%s))); }
# share CAP RESERVE: the seconds a part may take: at most CAP, leaving RESERVE for the parts after it
share() { local s=$(( $(left) - $2 )); [ "$s" -gt "$1" ] && s=$1; [ "$s" -lt 10 ] && s=10; echo "$s"; }
part() { echo; echo "=== $1 ($(left) s left of $TOTAL) $(date +%T)"; }
runs() { [[ " $PARTS " == *" $1 "* ]]; }
# reserve N: the seconds kept for the parts after part N that run (2: 140, 3: 45 a model, 4: 60)
reserve() {
    local r=0
    [ "$1" -lt 2 ] && runs 2 && r=$((r + 140))
    [ "$1" -lt 3 ] && runs 3 && r=$((r + 45 * $(echo $PROFILE_MODELS | wc -w)))
    [ "$1" -lt 4 ] && runs 4 && r=$((r + 60))
    echo "$r"
}

part "install"
"$PIP_PY" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target "$SITE" .whl/*.whl \
    || { echo "the wheels did not install"; exit 1; }
if [ "$PIP_PY" = "$PYTHON" ]; then export PYTHONPATH="$SITE:$PWD/src"; else export PYTHONPATH="$PWD/src"; fi
command -v nvidia-smi >/dev/null && nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv
"$PYTHON" - <<'EOF' || { echo "dpfair does not import here"; exit 1; }
import platform, torch
from importlib import metadata
import dpfair, dpfair.algorithms, opacus  # noqa: F401
print("python", platform.python_version(), "| torch", torch.__version__, "| cuda", torch.cuda.is_available(),
      "|", torch.cuda.get_device_name() if torch.cuda.is_available() else "no GPU")
print(", ".join(f"{d} {metadata.version(d)}" for d in ("numpy", "scipy", "pandas", "scikit-learn", "dp-accounting",
                                                       "fairlearn", "opacus", "attrs", "cryptography", "safetensors",
                                                       "skops")))
try:
    import torchvision
    print("torchvision", torchvision.__version__)
except ImportError:
    print("torchvision not importable: resnet18 uses the benchmark's own definition")
EOF

if [ "$QUICK" = 1 ]; then
    BATCHES="8 16"; STEPS=4; PROFILE_B=8; FERMI="--models mlp --batch-sizes 64 --epochs 2 --rows 512"; THREADS=1
else
    BATCHES="256 1024 4096"; STEPS=12; PROFILE_B=1024; FERMI="--models mlp cnn --batch-sizes 256 1024 --epochs 4"
    THREADS=4
fi
COMMON=(--device "$DEVICE" --batches $BATCHES --steps "$STEPS" --rounds 1 --threads "$THREADS" --out "$OUT")

if runs 1; then
    part "1. private step, FairDP's CNN"
    B=$(share 170 "$(reserve 1)")
    timeout $((B + 30)) "$PYTHON" benchmarks/private_step.py --model cnn "${COMMON[@]}" --budget "$B" \
        --cell-timeout 90 --methods sgd dpfair dpfair-fairdp opacus opacus-ghost || echo "part 1 ended with status $?"
fi

if runs 2; then
    part "2. private step, ResNet-18 (GroupNorm)"
    B=$(share 210 "$(reserve 2)")
    timeout $((B + 30)) "$PYTHON" benchmarks/private_step.py --model resnet18 "${COMMON[@]}" --budget "$B" \
        --cell-timeout 120 --methods sgd dpfair opacus opacus-ghost --skip opacus:4096 \
        || echo "part 2 ended with status $?"
fi

if runs 3; then
    part "3. profiles of dpfair and sgd at batch $PROFILE_B ($PROFILE_MODELS)"
    n=$(echo $PROFILE_MODELS | wc -w)
    for model in $PROFILE_MODELS; do
        n=$((n - 1))  # the models still to profile after this one
        B=$(share 60 $(( $(reserve 3) + 45 * n )))
        timeout $((B + 20)) "$PYTHON" benchmarks/private_step.py --model $model --device "$DEVICE" \
            --steps "$STEPS" --threads "$THREADS" --profile "$PROFILE_B" --budget "$B" --cell-timeout 50 \
            --out "$SCRATCH" >/dev/null || echo "profile of $model ended with status $?"
    done
    cat "$SCRATCH"/*_profile.txt > "$OUT/private_step_${DEVICE}_profile.txt" 2>/dev/null
    grep -h "^#\|steps profiled" "$OUT/private_step_${DEVICE}_profile.txt"
fi

if runs 4; then
    part "4. DP-FERMI on MNIST, time per epoch"
    B=$(share 100 "$(reserve 4)")
    timeout "$B" "$PYTHON" benchmarks/dpfermi_mnist_epoch.py --device "$DEVICE" $FERMI --threads "$THREADS" \
        --data .devdata --out "$OUT" || echo "part 4 ended with status $?"
fi

part "done"
rm -rf "$SCRATCH"
ls -la "$OUT"
echo "$(( $(date +%s) - START )) s in all"
sleep 1  # let tee write the last lines
