#!/usr/bin/env bash
# ktx init's drafts on a GPU (issue 18 item 3): the suite's, llm.c's and tests/init/foreign's
# drafts that need no edit run the original kernel through `ktx run` (deduced template
# arguments, dynamic shared memory, launcher locals as [vars], grid-stride extents).
#   OUT=/path bash scripts/gpu_init.sh
set -uo pipefail
cd "$(dirname "$0")/.."
OUT="${OUT:-$PWD/gpu_init_out}"
mkdir -p "$OUT"
# shellcheck disable=SC1091
source scripts/gpu_env.sh >"$OUT/env.log" 2>&1
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader | tee "$OUT/device.txt"
python3 -m pytest -q -p no:cacheprovider tests/init/test_init_gpu.py --junitxml="$OUT/init_gpu.xml" \
  2>&1 | tee "$OUT/init_gpu.log" | tail -25
echo "exit ${PIPESTATUS[0]}" | tee -a "$OUT/init_gpu.log"
