#!/usr/bin/env bash
# The search's GPU evidence (issue 7), on a lent H100/H200 host. Each phase fits one 10-minute
# command; run them in separate calls or together (`all`). Every phase writes one JSON file under
# $OUT (at most 8 files come back):
#
#   tune-silu, tune-rmsnorm, tune-merge   ktx tune over the kernel's default shape set
#       -> $OUT/tune_<kernel>.json   summary (per shape: original, best, speedup, SOL, trials,
#          failures; geometric mean; held-out check), dispatch table, best configs, wall time
#   exhaustive   every config of one silu_and_mul space at two shapes (grid over 140 configs)
#       -> $OUT/exhaustive_silu_and_mul.json   a ktx recording (commit it under
#          kernels/silu_and_mul/recorded/); then on any CPU:
#          python3 scripts/compare_samplers.py kernels/silu_and_mul kernels/silu_and_mul/recorded/<file> \
#              --shape tokens=1,d=4096 --seeds 20
#   throughput   candidates evaluated per second, --jobs 1 vs --jobs $JOBS, cold compile cache
#       -> $OUT/throughput.json
#
# Usage (on the host, repo root, wheels carried in .whl as scripts/gpu_env.sh expects):
#   OUT=/path bash scripts/gpu_tune.sh [tune-silu] [tune-rmsnorm] [tune-merge] [exhaustive] [throughput] [all]
# Knobs: DEADLINE (epoch s; every phase ends 20 s before it), THROUGHPUT_N (60), TRIALS (30), SECONDS_SILU (200), SECONDS_RMSNORM (150), SECONDS_MERGE (90), JOBS (nproc-2, <= 12),
#        SHAPES (default set name).
set -u
cd "$(dirname "$0")/.."
OUT="${OUT:-$PWD/gpu_out}"
mkdir -p "$OUT"
RUNS="${RUNS:-/tmp/ktx-gpu-runs}"
mkdir -p "$RUNS"
# Dry runs on a CPU: KTX_SKIP_ENV=1 PY=.venv/bin/python BACKEND=harness:tests/measure/fake_gpu.py:handle
# shellcheck disable=SC1091
[ -n "${KTX_SKIP_ENV:-}" ] || source scripts/gpu_env.sh >/dev/null 2>&1
PY="${PY:-python3}"
BACKEND="${BACKEND:-cupy}"
export PYTHONUNBUFFERED=1 KTX_CACHE_DIR="$RUNS/cubins"
TRIALS="${TRIALS:-30}"
SHAPES="${SHAPES:-default}"
cores=$(nproc 2>/dev/null || echo 4)
JOBS="${JOBS:-$(( cores > 3 ? (cores - 2 > 12 ? 12 : cores - 2) : 1 ))}"
LOG="$OUT/gpu_tune.log"
# cap SECONDS: SECONDS, or less so that it ends 20 s before $DEADLINE (epoch seconds) when one is set
cap() { local want=$1; if [ -n "${DEADLINE:-}" ]; then local left=$(( DEADLINE - $(date +%s) - 20 ));
        [ "$left" -lt "$want" ] && want=$left; fi; [ "$want" -lt 1 ] && want=1; echo "$want"; }
say() { echo "[$(date +%H:%M:%S)] $*" | tee -a "$LOG" >&2; }

# bundle RUN_DIR OUT_JSON COMMAND... : the run's outputs in one JSON file
bundle() {
  "$PY" - "$@" <<'PY'
import json, sys, platform
from pathlib import Path
run, out, command = Path(sys.argv[1]), Path(sys.argv[2]), sys.argv[3:]
data = {"command": " ".join(command), "host": platform.node()}
for name in ("summary.json", "dispatch.json", "best.json", "holdout.json"):
    p = run / name
    data[name.removesuffix(".json")] = json.loads(p.read_text()) if p.exists() else None
p = run / "dispatch.h"
data["dispatch_h"] = p.read_text() if p.exists() else None
events = [json.loads(l) for l in (run / "log.jsonl").read_text().splitlines() if l.strip()] if (run / "log.jsonl").exists() else []
data["measurements"] = sum(1 for e in events if e.get("event") == "measure")
out.write_text(json.dumps(data, indent=1) + "\n")
s = data["summary"] or {}
print(f"{out.name}: geomean speedup {s.get('geomean_speedup')}, wall {s.get('wall_s')} s, {data['measurements']} measurements")
PY
}

tune() {  # kernel pipeline seconds
  local k=$1 passes=$2 seconds=$3 run="$RUNS/tune_$1"
  rm -rf "$run"
  if [ -n "${RESUME_FROM:-}" ]; then  # continue a run folder (its SQLite study and measurement cache)
    mkdir -p "$(dirname "$run")"; cp -r "$RESUME_FROM" "$run"; rm -f "$run/.lock"; say "resuming $RESUME_FROM"
  fi
  local cmd=("$PY" -m ktx tune "kernels/$k" --passes "$passes" --shapes "$SHAPES" --trials "$TRIALS" --backend "$BACKEND"
             --time-limit "$seconds" --seed 1 --jobs "$JOBS" --out "$run" --quiet)
  say "tune $k ($passes), ${seconds}s search, jobs $JOBS"
  timeout "$(cap $(( seconds + 300 )))" "${cmd[@]}" > "$run.txt" 2>&1
  say "tune $k rc=$?"; tail -40 "$run.txt" | tee -a "$LOG" >&2
  bundle "$run" "$OUT/tune_$k.json" "${cmd[@]}" 2>&1 | tee -a "$LOG" >&2
}

exhaustive() {
  local run="$RUNS/exhaustive_silu" passes='block-size,unroll{max=4,loops=L0},split{max=16}'
  rm -rf "$run"
  local cmd=("$PY" -m ktx tune kernels/silu_and_mul --passes "$passes"
             --shapes 'tokens=1,d=4096;tokens=64,d=14336' --sampler grid --trials 100000 --seed 1 --backend "$BACKEND"
             --jobs "$JOBS" --holdout none --out "$run" --quiet)
  say "exhaustive silu_and_mul ($passes)"
  timeout "$(cap 580)" "${cmd[@]}" > "$run.txt" 2>&1
  say "exhaustive rc=$?"; tail -12 "$run.txt" | tee -a "$LOG" >&2
  "$PY" - "$run" "$OUT/exhaustive_silu_and_mul.json" "${cmd[*]}" <<'PY' 2>&1 | tee -a "$LOG" >&2
import json, sys
from pathlib import Path
run, out, command = Path(sys.argv[1]), Path(sys.argv[2]), sys.argv[3]
data = json.loads((run / "recording.json").read_text())
data["command"] = command
data["summary"] = json.loads((run / "summary.json").read_text())
out.write_text(json.dumps(data, separators=(",", ":")) + "\n")
ok = sum(1 for m in data["measurements"] if m["status"] == "ok")
print(f"{out.name}: {len(data['measurements'])} measurements ({ok} ok) on {data['device']}")
PY
}

throughput() {  # one shape, random sampler (all distinct), cold compile cache, jobs 1 vs JOBS
  local shape='tokens=64,d=14336' passes='expose,block-size,unroll,split' n=${THROUGHPUT_N:-60} results=()
  for jobs in 1 "$JOBS"; do
    local run="$RUNS/throughput_j$jobs"
    rm -rf "$run" "$RUNS/cubins_j$jobs"
    say "throughput: $n candidates, jobs $jobs"
    KTX_CACHE_DIR="$RUNS/cubins_j$jobs" timeout "$(cap 500)" "$PY" -m ktx tune kernels/silu_and_mul --passes "$passes" \
      --shapes "$shape" --sampler random --trials "$n" --seed 2 --backend "$BACKEND" --jobs "$jobs" --holdout none \
      --out "$run" --quiet > "$run.txt" 2>&1
    say "throughput jobs $jobs rc=$?"
    results+=("$run")
  done
  "$PY" - "$OUT/throughput.json" "$shape" "$passes" "$cores" "${results[@]}" <<'PY' 2>&1 | tee -a "$LOG" >&2
import json, sys
from pathlib import Path
out, shape, passes, cores, runs = Path(sys.argv[1]), sys.argv[2], sys.argv[3], int(sys.argv[4]), sys.argv[5:]
rows = []
for run in map(Path, runs):
    events = [json.loads(l) for l in (run / "log.jsonl").read_text().splitlines() if l.strip()]
    tuned = [e for e in events if e.get("event") == "measure" and e.get("config")]
    start = next(e["t"] for e in events if e.get("event") == "measure")  # after the original
    end = tuned[-1]["t"] if tuned else start
    ok = [e for e in tuned if e["status"] == "ok"]
    req = next(e["request"] for e in events if e.get("event") == "start")
    summary = json.loads((run / "summary.json").read_text())
    span = max(end - start, 1e-9)
    rows.append({
        "jobs": req["jobs"], "candidates": len(tuned), "verified_ok": len(ok),
        "statuses": {s: sum(1 for e in tuned if e["status"] == s) for s in sorted({e["status"] for e in tuned})},
        "seconds": round(span, 2), "candidates_per_s": round(len(tuned) / span, 2),
        "verified_per_s": round(len(ok) / span, 2), "original_us": summary["shapes"][0]["original_us"],
        "device": summary.get("device"),
    })
data = {
    "what": "candidates judged by the harness per second (compile + resource check + verification "
            "against the original, 3 rounds incl. odd sizes + single and graph timing), cold compile cache, "
            "first candidate after the original's measurement to the last",
    "shape": shape, "passes": passes, "host_cores": cores, "rows": rows,
}
out.write_text(json.dumps(data, indent=1) + "\n")
for r in rows:
    print(f"jobs {r['jobs']}: {r['candidates']} candidates in {r['seconds']} s = {r['candidates_per_s']}/s "
          f"({r['verified_per_s']}/s verified ok), kernel {r['original_us']} µs")
PY
}

phases=("$@")
[ ${#phases[@]} -gt 0 ] || phases=(all)
for phase in "${phases[@]}"; do
  case "$phase" in
    tune-silu) tune silu_and_mul 'expose,block-size,unroll,split' "${SECONDS_SILU:-200}" ;;
    tune-rmsnorm) tune fused_add_rmsnorm 'expose,block-size,unroll' "${SECONDS_RMSNORM:-150}" ;;
    tune-merge) tune merge_attn_states 'expose,block-size,unroll,coarsen' "${SECONDS_MERGE:-90}" ;;
    exhaustive) exhaustive ;;
    throughput) throughput ;;
    all)
      tune silu_and_mul 'expose,block-size,unroll,split' "${SECONDS_SILU:-200}"
      tune fused_add_rmsnorm 'expose,block-size,unroll' "${SECONDS_RMSNORM:-150}"
      tune merge_attn_states 'expose,block-size,unroll,coarsen' "${SECONDS_MERGE:-90}"
      exhaustive
      throughput ;;
    *) echo "unknown phase $phase (tune-silu tune-rmsnorm tune-merge exhaustive throughput all)" >&2; exit 2 ;;
  esac
done
