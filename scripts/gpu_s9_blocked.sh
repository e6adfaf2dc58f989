#!/usr/bin/env bash
# Session 9, branch s9-blocked: the three real-code kernels that were blocked, run end to end on one GPU.
#   1. evidence: `ktx bench --shapes quick` on DeepSpeed top_k_gating WITHOUT
#      `order = "multiset per assignments"` (a copy of the spec): the original checked against a
#      second run of itself must fail (wrong_result on offsets: atomicAdd hands out the slots in
#      block order); step 3 benches the finished spec, with the order.
#   2. GPU tests: the order-free comparison on CuPy arrays (test_order_free_gpu.py); a struct of
#      pointers to [[buffers]] through the harness, and atomicAdd slots that fail the original's
#      second run in order and pass as multisets (test_struct_pointers_gpu.py).
#   3. benchmarks/realcode/run.py on the three: `ktx bench`, then
#      `ktx optimize --planner rules --shapes default --budget 40` each.
#   OUT=/path bash scripts/gpu_s9_blocked.sh [PER_KERNEL_S]
# About 3.5 minutes with 40 s a kernel (3 x 40 s of optimize, 3 benches, the evidence, the tests);
# PER_KERNEL_S=30 keeps it under 3.
# Carry .whl (scripts/gpu_env.sh installs them; libclang lays out causal-conv1d's struct) and
# benchmarks/realcode/src (fetch.py writes it).
set -uo pipefail
cd "$(dirname "$0")/.."
PER="${1:-40}"
OUT="${OUT:-$PWD/gpu_s9_blocked_out}"; mkdir -p "$OUT/realcode" "$OUT/evidence"
export PYTHONUNBUFFERED=1
# shellcheck disable=SC1091
source scripts/gpu_env.sh >"$OUT/env.txt" 2>&1
{ nvidia-smi --query-gpu=index,name,driver_version,memory.total --format=csv,noheader; date -u +%FT%TZ; } | tee "$OUT/device.txt"
export CUDA_VISIBLE_DEVICES="${CUDA_VISIBLE_DEVICES:-0}"   # a lane of a bigger call keeps its GPU

# 1. the original disagrees with itself element by element, agrees as multisets per expert
RC=benchmarks/realcode
EV=$RC/deepspeed__top_k_gating_in_order   # beside the others: its relative paths stay right
rm -rf "$EV"; mkdir -p "$EV"
grep -v '^order = "multiset per assignments"' $RC/deepspeed__top_k_gating_kernel/ktx.toml >"$EV/ktx.toml"
( cd "$EV" && timeout 90 python3 -m ktx bench . --shapes quick --json "$OUT/evidence/in_order.json" ) \
  >"$OUT/evidence/in_order.txt" 2>&1
echo "in order (expect wrong_result of the original against itself): rc=$?" | tee -a "$OUT/evidence/summary.txt"
# with the order line: step 3's `ktx bench` of the finished spec (expect ok)
rm -rf "$EV"
grep -h -i -E "wrong|offsets|status" "$OUT/evidence/in_order.txt" | head -8

# 2. the device path of the comparison
timeout 120 python3 -m pytest -q -m gpu -p no:cacheprovider tests/measure/test_order_free_gpu.py \
  tests/measure/test_struct_pointers_gpu.py >"$OUT/gpu_tests.txt" 2>&1
tail -3 "$OUT/gpu_tests.txt"

# 3. the three kernels end to end (STEPS=12 stops before it: the real-code benchmark runs them too)
[ "${STEPS:-123}" = 12 ] && exit 0
IDS=(deepspeed__top_k_gating_kernel causal-conv1d__causal_conv1d_update_kernel flashinfer__act_and_mul_kernel)
timeout 420 python3 $RC/run.py --ids "${IDS[@]}" --gpus 1 --budget "$PER" --deadline 300 \
  --out "$OUT/realcode" --work /tmp/s9-blocked-work >"$OUT/lanes.txt" 2>&1
cat "$OUT/realcode/results.md" 2>/dev/null | head -40
tar czf "$OUT/work.tar.gz" -C /tmp s9-blocked-work 2>/dev/null
