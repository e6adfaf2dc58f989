#!/usr/bin/env bash
# Session 10, s10-online2: GPU evidence for online's Σx, Σx² pair (ONLINE=2) on ONE GPU, one call
# under 3 minutes. From the repo root, with shared/llmc carried (cp -a /work/shared/llmc shared/llmc):
#   source scripts/gpu_env.sh && bash scripts/gpu_s10_online2.sh
# scripts/gpu_s10_online2.py (its docstring says how): llm.c fused_residual and layernorm at the
# ladder's shapes (B=1/8/32, T=1024, C=768) under row-owner,online,vectorize{tie,peel}: ONLINE=2
# (the fused first loop packed) verified against the Python reference, then timed in 7 alternating
# pairs with 95% intervals against ONLINE=1 (Welford, that loop scalar) and against the hand
# kernels (fused_residual v4; layernorm v5/v3/v4, session 9's best at each shape).
# Cells are skipped once 150 s are spent (paired.md says which).   -> paired/paired.{md,json}
# Then the PTX of the warp-per-row ONLINE=2 and ONLINE=1 configs: global loads by width, and
# ptxas -v's registers and spills                                  -> ptx.txt
# Results under $OUT (s10_online2.tgz). Exit status 0 when every cell was measured.
set -uo pipefail
cd "$(dirname "$0")/.."
OUT="${OUT:-$PWD/gpu_s10_online2_out}"
mkdir -p "$OUT"
PY="${PYTHON:-python3}"
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
export PYTHONUNBUFFERED=1
export KTX_CACHE_DIR="${KTX_CACHE_DIR:-$OUT/cache}"
LLMC="${LLMC:-shared/llmc}"
[ -f "$LLMC/dev/cuda/common.h" ] || LLMC=../shared/llmc
nvidia-smi --query-gpu=index,name,driver_version --format=csv,noheader || true
git log --oneline -1 2>/dev/null || true

timeout 170 "$PY" scripts/gpu_s10_online2.py --llmc "$LLMC" --out "$OUT/paired" --deadline-s 150 \
  > "$OUT/paired.log" 2>&1
rc=$?
echo "paired rc=$rc" >> "$OUT/paired.log"
cat "$OUT/paired/paired.md" 2>/dev/null || tail -n 30 "$OUT/paired.log"

# PTX: what the fused loop loads (CPU work only; nvcc is on the GPU machine)
timeout 60 "$PY" - "$LLMC" "$OUT" > "$OUT/ptx.txt" 2>&1 <<'PYEOF' || true
import re, subprocess, sys
from pathlib import Path
sys.path.insert(0, "scripts")
import gpu_s10_online2 as G
from ktx.pipeline import candidate_from_template, template_for_spec
from ktx.specload import load_spec
stage = G.L.Stage(Path(sys.argv[1]), Path(sys.argv[2]) / "ptx_stage")
for kernel, vec in ((G.L.FR, 8), (G.L.LN, 4)):
    folder = stage.folder(kernel)
    spec = load_spec(folder)
    t = template_for_spec(spec, G.PIPELINE)
    for online in (2, 1):
        src = candidate_from_template(spec, t, {"THREADS_PER_ROW": 32, "ONLINE": online, "VEC_LOOPS": vec}).source
        cu = folder / f"ptx_online{online}.cu"
        cu.write_text(src)
        flags = [f for f in spec.flags if f != "-lineinfo"]
        ptx = subprocess.run(["nvcc", "-ptx", "-arch=sm_90", *flags, "-I", str(folder), "-o", "-", str(cu)],
                             capture_output=True, text=True)
        sass = subprocess.run(["nvcc", "-cubin", "-arch=sm_90", *flags, "-Xptxas", "-v", "-I", str(folder),
                               "-o", "/dev/null", str(cu)], capture_output=True, text=True)
        entry = re.search(rf"(?s)\.entry\s+\w*{spec.kernel}\w*\(.*?\n}}\n", ptx.stdout)
        body = entry.group(0) if entry else ""
        loads = {}
        for m in re.findall(r"\bld\.global(?:\.\w+)*", body):
            loads[m] = loads.get(m, 0) + 1
        info = sass.stderr.split("Compiling entry function")
        mine = next((b for b in info if spec.kernel in b.split("\n", 1)[0]), "")
        regs = [l.split(":", 1)[-1].strip() for l in mine.splitlines()[1:] if "spill" in l or "registers" in l]
        print(f"{kernel} THREADS_PER_ROW=32 VEC_LOOPS={vec} ONLINE={online}: ptx rc={ptx.returncode}")
        print("  ld.global by kind:", dict(sorted(loads.items())))
        print("  ptxas:", " | ".join(regs[-3:]))
PYEOF
cat "$OUT/ptx.txt"

# the last lines (what a caller's tail shows): per kernel and side A/B, the geomean of A / B, single
"$PY" - "$OUT/paired/paired.json" <<'PYEOF' || true
import json, math, sys
rows = json.load(open(sys.argv[1]))["rows"]
cells = {}
for r in rows:
    iv = (r.get("single") or {}).get("a_over_b")
    key = (r["kernel"].split("/")[-1], r.get("a", "")[:40], r.get("b", "")[:40])
    cells.setdefault(key, []).append(iv["estimate"] if iv else None)
for (k, a, b), v in cells.items():
    got = [x for x in v if x]
    g = math.exp(sum(map(math.log, got)) / len(got)) if got else float("nan")
    print(f"{k} | {a} vs {b} | single A/B geomean {g:.3f} over {len(got)}/{len(v)} shapes")
PYEOF
echo "wall ${SECONDS}s"
tar -czf "$OUT/s10_online2.tgz" -C "$OUT" --exclude cache --exclude stage --exclude ptx_stage --exclude '*.tgz' . 2>/dev/null
exit "$rc"
