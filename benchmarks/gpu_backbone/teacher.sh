#!/bin/bash
# On the lent GPU machine, after the copy calls that lease.py stage printed (the teacher's int8
# chunks, the examples, the student's packed backbone as data/minilm.tar): check the carried files,
# install the carried wheels if its python lacks pydantic, rebuild both backbones and run
# teacher_on_device.py with the caller's environment (K, STUDENTS, JOINT, KEEP_BEST; LIMIT seconds,
# default 500; extra arguments in DEVICE_ARGS, e.g. --quick).
#   Run from the repository root: OUT=$OUT bash benchmarks/gpu_backbone/teacher.sh
set -o pipefail
X=${X:-/root/x}
W=${W:-/tmp/w}
[ -n "$OUT" ] || { echo "teacher.sh: OUT is not set"; exit 2; }
[ -f benchmarks/gpu_backbone/teacher_on_device.py ] || { echo "teacher.sh: run it from the repository root"; exit 2; }
# shellcheck source=benchmarks/gpu_backbone/carried.sh
. benchmarks/gpu_backbone/carried.sh && carried_check teacher.sh
export PYTHONUNBUFFERED=1
command -v nvidia-smi >/dev/null && nvidia-smi --query-gpu=name,memory.total --format=csv,noheader
rm -rf "$W" && mkdir -p "$W" && tar -xf "$X/data/minilm.tar" -C "$W" || exit 4
python3 benchmarks/gpu_backbone/transport.py unpack "$X"/model-int8.xz.* --configs "$X/configs" --out "$W/teacher" || exit 4
python3 benchmarks/gpu_backbone/transport.py unpack "$W"/pack/model-int8.xz.* --configs "$W/cfg" --out "$W/student" || exit 4
# shellcheck disable=SC2086  # DEVICE_ARGS holds several words
timeout "${LIMIT:-500}" python3 benchmarks/gpu_backbone/teacher_on_device.py "$X/data" "$W/teacher" "$W/run" "$OUT" \
  --student "$W/student" $DEVICE_ARGS 2>&1 \
  | grep --line-buffered -v -E "Loading weights|Writing model|LOAD REPORT|^Key |^-----|UNEXPECTED|MISSING|^Notes|^- |^$|^classifier|^pooler|^embeddings.position_ids" \
  | tee "$OUT/log.txt"
