#!/usr/bin/env bash
# Issue 23 item 7 on the GPU: does `ktx tune --workers N` on N GPUs make >= 0.9 N times the
# evaluations of one worker in the same time? The issue's run: act_and_mul_scalar over its 21
# default shapes, --time-limit 200 on H200s: --workers 1 made 138 measurements, --workers 4 made 400.
#
#   w1  GPU 0:      ktx tune kernels/act_and_mul_scalar --workers 1 --time-limit $LIMIT
#   wN  GPUs 1..N:  the same with --workers $N (N=4 by default)
# With at least N+1 GPUs visible both run side by side (an 8-GPU host: about LIMIT + 60 s in all);
# with fewer, one after the other on GPUs 0..N-1 (about 2 x LIMIT + 90 s: lower LIMIT to fit a call).
#
# Output in $OUT: workers.md (the table), timeline-w1.json and timeline-wN.json
# (scripts/issue23_timeline.py: measurements per process, the main process before and after the
# workers, the workers' first measurement, every final check), summary-*.md, and workers.tar.gz
# with the run logs. The table counts both every measurement (originals and held-out points
# included) and the search's evaluations alone (configs at the tuned shapes), and names the device.
#
# Usage on the GPU host, repo root, .whl carried (scripts/gpu_env.sh):
#   OUT=/path bash scripts/gpu_issue23_workers.sh            # LIMIT=200 N=4 by default
# CPU dry run of the plumbing (replay, no GPU; proves nothing about the ratio on a loaded host):
#   KTX_SKIP_ENV=1 PY=.venv/bin/python BACKEND=replay:/tmp/space.json \
#     SHAPES="tokens=16,d=4096;tokens=4096,d=4096" LIMIT=20 OUT=/tmp/ow bash scripts/gpu_issue23_workers.sh
set -u
cd "$(dirname "$0")/.."
OUT="${OUT:-$PWD/gpu_issue23_workers_out}"
WORK="${WORK:-/tmp/ktx-issue23-workers}"
rm -rf "$WORK"
mkdir -p "$OUT" "$WORK"
# shellcheck disable=SC1091
[ -n "${KTX_SKIP_ENV:-}" ] || source scripts/gpu_env.sh >"$WORK/env.log" 2>&1
PY="${PY:-python3}"
export PYTHONUNBUFFERED=1 KTX_CACHE_DIR="$WORK/cache"
LIMIT="${LIMIT:-200}"
N="${N:-4}"
BACKEND="${BACKEND:-cupy}"
SHAPES="${SHAPES:-default}"
START=$(date +%s)
say() { echo "[$(( $(date +%s) - START ))s] $*" | tee -a "$WORK/workers.log" >&2; }

GPUS=$(nvidia-smi --query-gpu=index --format=csv,noheader 2>/dev/null | wc -l)
{
  nvidia-smi --query-gpu=index,name,driver_version,memory.total --format=csv,noheader 2>&1
  "$PY" -c "import cupy; print('cupy', cupy.__version__)" 2>&1
  git log --oneline -1
} >"$WORK/device.txt"
say "device: $(head -1 "$WORK/device.txt"), $GPUS GPU(s) visible"
# Session 9's suspect: SQLite built without usleep sleeps a whole second per busy retry, so two
# processes colliding on one study file cost a second. How long does a writer wait here for a
# lock held 5 / 30 ms (about the hold time, with usleep; >= 1 s without)?
"$PY" - >"$OUT/sqlite_probe.txt" 2>&1 <<'PROBE'
import os, sqlite3, tempfile, threading, time
path = os.path.join(tempfile.mkdtemp(), "probe.db")
a = sqlite3.connect(path, timeout=60, isolation_level=None, check_same_thread=False)
a.execute("pragma journal_mode=wal"); a.execute("create table t(x)")
b = sqlite3.connect(path, timeout=60, isolation_level=None, check_same_thread=False)
print("sqlite", sqlite3.sqlite_version)
for hold in (0.005, 0.03):
    a.execute("begin immediate"); a.execute("insert into t values(1)")
    release = threading.Timer(hold, lambda: a.execute("commit")); t = time.perf_counter(); release.start()
    b.execute("begin immediate"); b.execute("insert into t values(2)"); b.execute("commit")
    print(f"lock held {hold * 1000:.0f} ms: the other writer waited {(time.perf_counter() - t) * 1000:.0f} ms")
    release.join()
PROBE
say "sqlite probe: $(tr '\n' ' ' <"$OUT/sqlite_probe.txt")"

# The issue's pipeline (gpu_issue23_measure.sh's), so the numbers compare with its 138 / 400.
PASSES='vectorize,block-size{min=64},split,unroll{max=4,loops=L0},cache-hints{stores=false}'
tune() {  # tune NAME WORKERS DEVICES
  local name=$1 workers=$2 devices=$3 t0 rc
  t0=$(date +%s)
  CUDA_VISIBLE_DEVICES=$devices timeout $(( LIMIT + 120 )) "$PY" -m ktx tune kernels/act_and_mul_scalar \
    --passes "$PASSES" --shapes "$SHAPES" --backend "$BACKEND" --workers "$workers" \
    --time-limit "$LIMIT" --trials 100000 --seed 23 --quiet --out "$WORK/$name" >"$WORK/$name.out" 2>&1
  rc=$?
  echo "$rc $(( $(date +%s) - t0 ))" >"$WORK/$name.rc"
  "$PY" scripts/issue23_timeline.py "$WORK/$name" --json "$OUT/timeline-$name.json" >/dev/null 2>>"$WORK/$name.out"
  cp "$WORK/$name/summary.md" "$OUT/summary-$name.md" 2>/dev/null
  say "$name: rc=$rc, $(( $(date +%s) - t0 )) s"
}

WN="w$N"
if [ "$GPUS" -ge $(( N + 1 )) ]; then
  say "side by side: w1 on GPU 0, $WN on GPUs 1-$N"
  tune w1 1 0 &
  A=$!
  tune "$WN" "$N" "$(seq -s, 1 "$N")" &
  B=$!
  wait "$A" "$B"
else
  say "one after the other: w1 on GPU 0, then $WN on GPUs 0-$(( N - 1 ))"
  tune w1 1 0
  tune "$WN" "$N" "$(seq -s, 0 $(( N - 1 )))"
fi

"$PY" - "$OUT" "$WORK" "$WN" "$N" "$LIMIT" <<'EOF' | tee "$OUT/workers.md"
import json, sys
from pathlib import Path
out, work, wn, n, limit = Path(sys.argv[1]), Path(sys.argv[2]), sys.argv[3], int(sys.argv[4]), sys.argv[5]
rows = {}
for name in ("w1", wn):
    f = out / f"timeline-{name}.json"
    rows[name] = json.loads(f.read_text()) if f.is_file() else None
print(f"# ktx tune --workers: 1 against {n}, act_and_mul_scalar, --time-limit {limit}\n")
print("Device:", (work / "device.txt").read_text().strip().replace("\n", "; "), "\n")
print("| run | rc, s | measured | search evaluations | main before workers | main after | "
      "workers' first measurement (s) | workers' last (s) | final checks |")
print("| --- | --- | ---: | ---: | ---: | ---: | --- | ---: | --- |")
for name, t in rows.items():
    rc = (work / f"{name}.rc").read_text().strip() if (work / f"{name}.rc").is_file() else "-"
    if t is None:
        print(f"| {name} | {rc} | - | - | - | - | - | - | - |")
        continue
    statuses = {}
    for c in t["final_checks"]:
        statuses[c["status"]] = statuses.get(c["status"], 0) + 1
    print(f"| {name} | {rc} | {t['measured']} | {t.get('search_evaluations', '-')} | "
          f"{t['main_measured_before_workers']} | {t['main_measured_after_workers']} | "
          f"{t['workers_first_measure_s'] or '-'} | {t['workers_last_measure_s'] or '-'} | {statuses} |")
one, many = rows.get("w1"), rows.get(wn)
if one and many:
    for key in ("measured", "search_evaluations"):
        if one.get(key):
            ratio = many[key] / one[key]
            print(f"\n{wn} / w1, {key}: {ratio:.2f} = {ratio / n:.2f} x {n} (goal >= 0.90 x {n})")
# the search's rate per process: evaluations at the tuned shapes over its search window (from
# its time_budget event to the deadline it set there): a host-side bottleneck shows here
rates = {}
for name in ("w1", wn):
    log = work / name / "log.jsonl"
    if not log.is_file():
        continue
    events = [json.loads(line) for line in log.read_text().splitlines() if line.strip()]
    tuned = set(next((e.get("shapes", []) for e in events if e["event"] == "start"), []))
    per = {}
    for b in (e for e in events if e["event"] == "time_budget"):
        n_ev = sum(1 for e in events if e["event"] == "measure" and e["worker"] == b["worker"]
                   and e.get("config") and e.get("shape") in tuned)
        per[b["worker"]] = (n_ev, b["search_s"], round(n_ev / b["search_s"], 3) if b["search_s"] > 0 else None)
    rates[name] = per
    total = sum(r for _, _, r in per.values() if r)
    print(f"\n{name}: evaluations per second of search, summed over processes: {total:.3f} "
          f"({'; '.join(f'{w}: {c} in {s:.0f} s' for w, (c, s, _) in per.items())})")
if rates.get("w1") and rates.get(wn):
    one_rate = sum(r for _, _, r in rates["w1"].values() if r)
    many_rate = sum(r for _, _, r in rates[wn].values() if r)
    if one_rate:
        print(f"\n{wn} / w1, search rate: {many_rate / one_rate:.2f} = {many_rate / one_rate / n:.2f} x {n}")
json.dump({"timelines": rows, "search_rates": rates}, (out / "workers.json").open("w"), indent=1)
EOF
for name in w1 "$WN"; do cp "$WORK/$name/log.jsonl" "$WORK/log-$name.jsonl" 2>/dev/null; done
tar -czf "$OUT/workers.tar.gz" -C "$WORK" --exclude=cache --exclude='*.db' . 2>/dev/null
say "done in $(( $(date +%s) - START )) s"
