#!/usr/bin/env bash
# Issue 18's GPU evidence for guard zones, the moe_sum regression, --sanitize and the first
# measurement, on one H100/H200 in one device command of under 6 minutes:
#
#   1. mangled   tests/measure/test_mangled_name.py with the host's own demanglers (the GPU host
#                has CUDA's cu++filt, which prints `moe_sum_kernel<__nv_bfloat16, (int)2>`);
#   2. moe       `ktx run` end to end on tests/measure/fixtures/moe_sum_host (a template kernel
#                whose host launcher NVRTC refuses: nvcc compiles it, its cubin holds TOPK 2 and
#                4), at topk=2 and topk=4;
#   3. guards    the gpu-marked guard-zone tests: a candidate writing one pack past the end of
#                `out` (wrong_result naming the buffer, side and first element), an original whose
#                spec gives `out` too few elements (spec error, nothing measured against it), and
#                compute-sanitizer's memcheck report of the same planted pack;
#   4. first     10 fresh worker processes measuring fused_add_rmsnorm tokens=16,d=4096 first:
#                their first graph times within 1% of their median (SM clock, power and
#                temperature sampled by nvidia-smi every 200 ms meanwhile, read-only);
#   5. sanitize  `ktx run kernels/rmsnorm --sanitize` (memcheck and racecheck on a kernel with a
#                shared-memory block reduction);
#   6. planted   if time is left: tests/measure/test_gpu_harness.py's planted-fault table, which
#                now holds the one-pack-past-the-end case beside the crash and the hang.
#
# Output in $OUT: issue18.md and issue18.json (a row per step: exit status, seconds, what it
# showed), junit-*.xml per pytest step, and issue18.tar.gz with every log.
#
# Usage on the GPU host, repo root, with the wheelhouse carried as .whl (scripts/gpu_env.sh):
#   OUT=/path bash scripts/gpu_issue18.sh            (BUDGET=330 seconds by default)
# scripts/gpu_session6.sh runs it as its lane 3 (CUDA_VISIBLE_DEVICES=3) beside the test groups.
# CPU dry run (GPU steps skip or fail fast, the summary is still written):
#   KTX_SKIP_ENV=1 PY=.venv/bin/python OUT=/tmp/o18 bash scripts/gpu_issue18.sh
set -u
cd "$(dirname "$0")/.."
OUT="${OUT:-$PWD/gpu_issue18_out}"
WORK="${WORK:-/tmp/ktx-issue18}"
rm -rf "$WORK"
mkdir -p "$OUT" "$WORK"
# shellcheck disable=SC1091
[ -n "${KTX_SKIP_ENV:-}" ] || source scripts/gpu_env.sh >"$WORK/env.log" 2>&1
PY="${PY:-python3}"
export PYTHONUNBUFFERED=1 KTX_CACHE_DIR="$WORK/cache"
START=$(date +%s)
DEADLINE=$(( START + ${BUDGET:-330} ))
LOG="$WORK/issue18.log"
say() { echo "[$(( $(date +%s) - START ))s] $*" | tee -a "$LOG" >&2; }
left() { echo $(( DEADLINE - $(date +%s) )); }
# cap WANT: at most what is left before the deadline (at least 1)
cap() { local want=$1 l; l=$(left); [ "$l" -lt "$want" ] && want=$l; [ "$want" -lt 1 ] && want=1; echo "$want"; }
STEPS="$WORK/steps.tsv"   # name, rc, seconds, detail file
: >"$STEPS"
record() { echo -e "$1\t$2\t$3\t$4" >>"$STEPS"; say "$1: rc=$2 ($3 s)"; }
# nvidia-smi ignores CUDA_VISIBLE_DEVICES: ask about the GPU this script runs on (an index or a
# UUID; gpu_session6.sh runs it as lane 3 of a four-GPU host)
GPU_ID="${CUDA_VISIBLE_DEVICES:-0}"
GPU_ID="${GPU_ID%%,*}"

{
  nvidia-smi -i "$GPU_ID" --query-gpu=index,name,driver_version,memory.total,clocks.max.sm --format=csv,noheader 2>&1
  "$PY" -c "import cupy; print('cupy', cupy.__version__)" 2>&1
  echo "nvcc: $(command -v nvcc || echo none)"
  echo "cu++filt: $(command -v cu++filt || ls /usr/local/cuda*/bin/cu++filt 2>/dev/null | head -1)"
  echo "c++filt: $(command -v c++filt || echo none)"
  "$PY" -c "from ktx.measure.sanitize import find_sanitizer; print('compute-sanitizer:', find_sanitizer())" 2>&1
  date -u +%Y-%m-%dT%H:%M:%SZ
} >"$WORK/device.txt"
cat "$WORK/device.txt" | tee -a "$LOG" >&2

# pytest STEP SECONDS [MARK] TEST...: one pytest call, junit to $OUT/junit-STEP.xml
pytest_step() {
  local name=$1 want=$2 mark=$3; shift 3
  if [ "$(left)" -lt 20 ]; then record "$name" skipped 0 "-"; return; fi
  local t0; t0=$(date +%s)
  local args=(-q -p no:cacheprovider -rs --durations=10 --junitxml "$OUT/junit-$name.xml")
  [ -n "$mark" ] && args+=(-m "$mark")
  timeout "$(cap "$want")" "$PY" -m pytest "${args[@]}" "$@" >"$WORK/$name.txt" 2>&1
  local rc=$?
  record "$name" "$rc" $(( $(date +%s) - t0 )) "$name.txt"
  tail -4 "$WORK/$name.txt" | tee -a "$LOG" >&2
}

# -- 1. mangled names, with the host's demanglers ----------------------------------------------
pytest_step mangled 90 "" tests/measure/test_mangled_name.py

# -- 2. the moe_sum-like template kernel, end to end --------------------------------------------
for topk in 2 4; do
  name="moe_topk$topk"
  if [ "$(left)" -lt 30 ]; then record "$name" skipped 0 "-"; continue; fi
  t0=$(date +%s)
  timeout "$(cap 90)" "$PY" -m ktx run tests/measure/fixtures/moe_sum_host --shape "tokens=64,d=4096,topk=$topk" \
    --json "$WORK/$name.json" >"$WORK/$name.txt" 2>&1
  record "$name" $? $(( $(date +%s) - t0 )) "$name.txt"
  tail -8 "$WORK/$name.txt" | tee -a "$LOG" >&2
done

# -- 3. guard zones on the device (and memcheck on the planted pack) ----------------------------
pytest_step guards 150 gpu tests/measure/test_gpu_guards.py -k "not run_sanitize_is_clean"

# -- 4. ten fresh processes' first graph measurement --------------------------------------------
nvidia-smi -i "$GPU_ID" --query-gpu=timestamp,clocks.sm,clocks.mem,power.draw,temperature.gpu,utilization.gpu \
  --format=csv -lms 200 >"$WORK/clocks.csv" 2>&1 &
SMI=$!
export KTX_FIRST_TIMES="$WORK/first_times.json"
pytest_step first 150 gpu tests/measure/test_gpu_verify.py -k "first_graph_measurement_of_ten_fresh_processes"
unset KTX_FIRST_TIMES
kill "$SMI" 2>/dev/null; wait "$SMI" 2>/dev/null

# -- 5. ktx run --sanitize on a suite kernel ----------------------------------------------------
if [ "$(left)" -ge 40 ]; then
  t0=$(date +%s)
  timeout "$(cap 150)" "$PY" -m ktx run kernels/rmsnorm --sanitize --shape quick >"$WORK/sanitize.txt" 2>&1
  record sanitize $? $(( $(date +%s) - t0 )) sanitize.txt
  cat "$WORK/sanitize.txt" | tee -a "$LOG" >&2
else
  record sanitize skipped 0 "-"
fi

# -- 6. the planted-fault table, if time is left ------------------------------------------------
if [ "$(left)" -ge 100 ]; then
  pytest_step planted "$(( $(left) - 10 ))" gpu tests/measure/test_gpu_harness.py -k planted
else
  record planted skipped 0 "-"
fi

# -- the summary -----------------------------------------------------------------------------------
"$PY" - "$WORK" "$OUT" <<'PY' 2>&1 | tee -a "$LOG" >&2
import json, sys
import xml.etree.ElementTree as ET
from pathlib import Path

work, out = Path(sys.argv[1]), Path(sys.argv[2])
device = (work / "device.txt").read_text().strip().splitlines() if (work / "device.txt").exists() else []
steps = []
for line in (work / "steps.tsv").read_text().splitlines():
    name, rc, seconds, detail = line.split("\t")
    step = {"step": name, "rc": rc, "seconds": int(seconds)}
    text = (work / detail).read_text(errors="replace").strip().splitlines() if detail != "-" and (work / detail).exists() else []
    step["last_line"] = text[-1][:300] if text else ""
    junit = out / f"junit-{name}.xml"
    if junit.exists():
        try:
            root = ET.parse(junit).getroot()
            suite = root if root.tag == "testsuite" else root.find("testsuite")
            step["tests"] = {k: int(suite.get(k, 0)) for k in ("tests", "failures", "errors", "skipped")}
            step["failed"] = [f"{c.get('name')}: {(c.find('failure') if c.find('failure') is not None else c.find('error')).get('message', '')[:300]}"
                              for c in suite.iter("testcase") if c.find("failure") is not None or c.find("error") is not None]
            step["skipped_why"] = sorted({(c.find("skipped").get("message") or "")[:160] for c in suite.iter("testcase") if c.find("skipped") is not None})
        except Exception as exc:  # a junit file cut short by a timeout
            step["junit_error"] = str(exc)
    if name.startswith("moe_") and (work / f"{name}.json").exists():
        data = json.loads((work / f"{name}.json").read_text())
        rows = data["measurements"] if isinstance(data, dict) else data
        step["measurements"] = [{"label": m.get("label"), "status": m.get("status"), "message": (m.get("message") or "")[:200],
                                 "graph_us": (m.get("graph") or {}).get("median_us"),
                                 "compiler": (m.get("resources") or {}).get("compiler")} for m in rows]
    if name == "first" and (work / "first_times.json").exists():
        step["first_times"] = json.loads((work / "first_times.json").read_text())
    if name == "sanitize" and (work / "sanitize.txt").exists():
        step["block"] = (work / "sanitize.txt").read_text().strip().splitlines()[-30:]
    steps.append(step)
clocks = work / "clocks.csv"
if clocks.exists():
    rows = [r.split(",") for r in clocks.read_text().splitlines()[1:] if r.count(",") >= 4]
    sm = [int(r[1].split()[0]) for r in rows if r[1].strip().split()[0].isdigit()]
    if sm:
        steps.append({"step": "clocks during 'first'", "samples": len(sm), "sm_mhz_min": min(sm), "sm_mhz_max": max(sm)})
summary = {"device": device, "steps": steps}
(out / "issue18.json").write_text(json.dumps(summary, indent=1) + "\n")
md = ["# Issue 18 GPU evidence: guard zones, moe_sum, --sanitize, first measurement", ""]
md += [f"    {d}" for d in device] + [""]
md += ["| step | rc | s | what it showed |", "| --- | --- | ---: | --- |"]
for s in steps:
    if "rc" not in s:
        md.append(f"| {s['step']} | - | - | SM clock {s['sm_mhz_min']}..{s['sm_mhz_max']} MHz over {s['samples']} samples |")
        continue
    what = ""
    if "tests" in s:
        t = s["tests"]
        what = f"{t['tests']} tests, {t['failures']} failed, {t['errors']} errors, {t['skipped']} skipped"
        if s.get("failed"):
            what += "; FAILED: " + " / ".join(s["failed"])
        if s.get("skipped_why"):
            what += "; skipped: " + " / ".join(s["skipped_why"])
    if "measurements" in s:
        what = "; ".join(f"{m['label']}: {m['status']} {m['graph_us'] and round(m['graph_us'], 3)} µs ({m['compiler']}) {m['message'] if m['status'] != 'ok' else ''}" for m in s["measurements"])
    if "first_times" in s:
        f = s["first_times"]
        what += f"; first graph µs {[round(x, 3) for x in f['first_graph_us']]}, median {f['median_us']:.3f}, worst deviation {max(abs(d) for d in f['deviation']):.2%}"
        if f.get("second_graph_us"):
            what += f"; the same code measured next in each process: {[round(x, 3) for x in f['second_graph_us']]}"
    if "block" in s:
        what = " <br> ".join(line.replace("|", "/") for line in s["block"])
    if not what or (s["rc"] not in ("0", "skipped") and "block" not in s):
        what += f" (last line: {s['last_line']})"
    md.append(f"| {s['step']} | {s['rc']} | {s['seconds']} | {what.replace(chr(10), ' ').replace('|', '/')} |")
(out / "issue18.md").write_text("\n".join(md) + "\n")
print("\n".join(md))
PY

say "packing $OUT/issue18.tar.gz ($(( $(date +%s) - START )) s in all)"
tar czf "$OUT/issue18.tar.gz" -C "$WORK" --exclude=cache .
ls -la "$OUT"
