#!/usr/bin/env bash
# Every gpu-marked test file, in groups that each fit one 10-minute device call.
#   OUT=/path bash scripts/gpu_tests.sh passes|measure|other|all [BUDGET_SECONDS]
#   KTX_TEST_FILES='tests/a.py tests/b.py' OUT=/path bash scripts/gpu_tests.sh files [BUDGET_SECONDS]
# A file starts only while at least 60 s of the budget (default 540 s) are left; the ones left
# out are named in the summary, so a short call never passes for a complete one. Per-file pytest
# output, a junit XML and the 15 slowest tests land in $OUT/tests-<group>.tar.gz; the last lines
# printed are the table: file, exit status, seconds, pytest's own summary line.
set -uo pipefail
cd "$(dirname "$0")/.."
GROUP="${1:?passes|measure|other|all|files}"
BUDGET="${2:-540}"
START=$(date +%s)
OUT="${OUT:-$PWD/gpu_tests_out}"
DIR="$OUT/tests-$GROUP"
mkdir -p "$DIR"
# shellcheck disable=SC1091
source scripts/gpu_env.sh >"$DIR/env.log" 2>&1
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader | tee "$DIR/device.txt"
date -u +%Y-%m-%dT%H:%M:%SZ >>"$DIR/device.txt"

PASSES=(
  tests/ir/test_idiom_configs.py
  tests/passes/test_vectorize_thread_gpu.py
  tests/passes/test_row_owner_gpu.py
  tests/passes/test_cluster_rows.py
  tests/passes/test_early_loads.py
  tests/passes/test_loads_first.py
  tests/passes/test_semantic_gpu.py
)
MEASURE=(
  tests/measure/test_gpu_verify.py
  tests/measure/test_gpu_harness.py
  tests/search/test_tune_gpu.py
  tests/commands/test_export_gpu.py
  tests/init/test_init_gpu.py
  tests/kernels/test_gpu.py
)
#: the rest: ktx optimize measuring end to end, and every staged llm.c version benched
OTHER=(
  tests/agent/test_optimize_gpu.py
  tests/benchmarks/test_llmc.py
)
#: gpu-marked test files that no list above names (new ones): run with the group "other", so a
#: file added without updating this script is still run
mapfile -t LISTED < <(printf '%s\n' "${PASSES[@]}" "${MEASURE[@]}" "${OTHER[@]}")
mapfile -t NEW < <(grep -rlE "mark\.gpu|pytestmark = pytest\.mark\.gpu" tests --include='*.py' | sort \
  | grep -vxF -f <(printf '%s\n' "${LISTED[@]}") || true)
case "$GROUP" in
  passes) FILES=("${PASSES[@]}") ;;
  measure) FILES=("${MEASURE[@]}") ;;
  other) FILES=("${NEW[@]}" "${OTHER[@]}") ;;
  all) FILES=("${PASSES[@]}" "${MEASURE[@]}" "${NEW[@]}" "${OTHER[@]}") ;;
  files) read -r -a FILES <<<"${KTX_TEST_FILES:?set KTX_TEST_FILES to the test files}" ;;
  *) echo "unknown group $GROUP (passes, measure, other, all or files)" >&2; exit 2 ;;
esac

table=()
status=0
for f in "${FILES[@]}"; do
  name=$(basename "$f" .py)
  left=$(( START + BUDGET - $(date +%s) ))
  if [ "$left" -lt 60 ]; then
    table+=("$f | not run | - | ${left}s of the budget left")
    status=1
    continue
  fi
  t0=$(date +%s)
  timeout "$left" python3 -m pytest -q -m gpu -p no:cacheprovider "$f" -rs --durations=15 \
    --junitxml "$DIR/$name.xml" >"$DIR/$name.txt" 2>&1
  rc=$?
  [ "$rc" -ne 0 ] && status=1
  summary=$(grep -E "passed|failed|error|skipped" "$DIR/$name.txt" | tail -1)
  table+=("$f | rc=$rc | $(( $(date +%s) - t0 ))s | $summary")
  if [ "$rc" -ne 0 ]; then
    grep -E "^(FAILED|ERROR)" "$DIR/$name.txt" | head -20
  fi
done
echo
echo "file | exit | seconds | pytest"
printf '%s\n' "${table[@]}" | tee "$DIR/summary.txt"
# The device tool brings back a few files: one tarball holds them all.
tar czf "$OUT/tests-$GROUP.tar.gz" -C "$OUT" "tests-$GROUP" && rm -rf "$DIR"
exit $status
