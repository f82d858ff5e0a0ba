#!/bin/bash
# On the lent GPU machine, after the calls lease.py stage printed: check the carried files, install
# the carried wheels if its python lacks pydantic, rebuild the backbone from its int8 chunks, and run
# train_on_device.py with the caller's environment (V1, V2, STAGE2, ALL2, SOUP, SCORE_DEFAULT; extra
# arguments in DEVICE_ARGS, e.g. --quick).  Run from the repository root: OUT=$OUT bash /root/x/device.sh
set -o pipefail
X=${X:-/root/x}
REPO=${REPO:-$(pwd)}
[ -n "$OUT" ] || { echo "device.sh: OUT is not set"; exit 2; }
[ -f "$REPO/benchmarks/gpu_backbone/train_on_device.py" ] || { echo "device.sh: run it from the repository root"; exit 2; }
# shellcheck source=benchmarks/gpu_backbone/carried.sh
. "$REPO/benchmarks/gpu_backbone/carried.sh" && carried_check device.sh
export PYTHONUNBUFFERED=1
cd "$REPO" || exit 2
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader
python3 -c "import torch, transformers; print('torch', torch.__version__, 'transformers', transformers.__version__)"
rm -rf /tmp/w/backbone  # a rerun on the same machine rebuilds it
python3 benchmarks/gpu_backbone/transport.py unpack "$X"/model-int8.xz.* --configs "$X/configs" \
  --out /tmp/w/backbone || exit 4
# shellcheck disable=SC2086  # DEVICE_ARGS holds several words
python3 benchmarks/gpu_backbone/train_on_device.py "$X/data" /tmp/w/backbone /tmp/w/run "$OUT" $DEVICE_ARGS 2>&1 \
  | grep --line-buffered -v -E "Loading weights|Writing model|LOAD REPORT|^Key |^-----|UNEXPECTED|MISSING|^Notes|^- |^$" \
  | tee "$OUT/log.txt"
