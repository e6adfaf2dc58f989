#!/usr/bin/env bash
# s9-realgain's GPU evidence, one GPU, under 4 minutes:
#   OUT=/path bash scripts/gpu_s9_realgain.sh [PER_KERNEL_S=60]
# Three real-code kernels that session 8 (H200, 30 s a kernel) left short, each for one of this
# branch's fixes, optimized at PER_KERNEL_S with the real-code benchmark's own runner:
#   ggml diag_mask_inf_f32         a 4.6x shape lost to a final check killed at its time share
#   exllamav2 quantize_kernel      12 of 16 block-size candidates failed (block y took BLOCK_X)
#   deepspeed fused_bias_residual  expose's BLOCK_DIMS left the grid at n/1024 (7 failed)
# then benchmarks/realcode/why.py on the run folders (why.md), and which compiler built each
# candidate (expected: nvcc, as in session 8: these files' host headers are beyond NVRTC).
# Carry .whl (optuna, tree-sitter, tree-sitter-cuda, libclang) and benchmarks/realcode/src.
set -uo pipefail
cd "$(dirname "$0")/.."
PER=${1:-60}
OUT="${OUT:-$PWD/gpu_s9_realgain_out}"; mkdir -p "$OUT"
export PYTHONUNBUFFERED=1
# shellcheck disable=SC1091
source scripts/gpu_env.sh >"$OUT/env.txt" 2>&1
{ nvidia-smi --query-gpu=index,name,driver_version --format=csv,noheader | head -1
  date -u +%FT%TZ; git log -1 --format='%H %s' 2>/dev/null | cut -c1-100; } | tee "$OUT/device.txt"
WORK=/tmp/s9-realgain-work
rm -rf "$WORK"
timeout 228 python3 benchmarks/realcode/run.py --gpus 1 --budget "$PER" --deadline 140 \
  --ids ggml__diag_mask_inf_f32 exllamav2__quantize_kernel deepspeed__fused_bias_residual \
  --out "$OUT/realcode" --work "$WORK" >"$OUT/lane.txt" 2>&1
echo "run.py rc=$?" >>"$OUT/lane.txt"
tail -5 "$OUT/lane.txt"
sed -n '/^| kernel/,$p' "$OUT/realcode/results.md" 2>/dev/null | head -12
python3 benchmarks/realcode/why.py "$WORK" --out "$OUT/why.md" --source "s9-realgain GPU run, $PER s a kernel"
sed -n '/^| cause/,/^$/p' "$OUT/why.md"
grep -h '^| [a-z]' "$OUT/why.md" | grep -v cause | cut -c1-400
echo "== compilers of the candidates (cache.jsonl)"
cat "$WORK"/*/optimize/cache.jsonl 2>/dev/null | grep -o '"compiler": *"[^"]*"' | sort | uniq -c
tar czf "$OUT/runs.tar.gz" -C /tmp s9-realgain-work 2>/dev/null
mv "$OUT/realcode/results.md" "$OUT/realcode/results.json" "$OUT/" 2>/dev/null; rm -rf "$OUT/realcode"
