"""Where a ``ktx tune`` run's time went, per process, from its ``log.jsonl`` (issue 23).

With ``--workers 4`` on 4 GPUs a 200 s run made 400 measurements against 138 with one worker
(2.9x, not 4x), and the main process made 47 of them itself, serially, before and after the
workers. This prints, for each process of a run (``main:PID``, ``worker-N:PID``): its measurements,
the first and the last one (seconds from the run's start), and the gaps: how long the workers took
from being started to their first measurement, and what the main process measured before the
workers started and after they ended (originals, final checks, held-out shapes). It also lists the
final checks' expected against spent seconds (``paired_cost``: the estimate's honesty).

Usage: python scripts/issue23_timeline.py RUN_DIR [--json FILE]
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from ktx.search.runlog import read_log  # noqa: E402


def timeline(run_dir: Path) -> dict[str, Any]:
    """The per-process account of one run folder's log (see the module docstring)."""
    events = list(read_log(run_dir / "log.jsonl"))
    if not events:
        raise SystemExit(f"{run_dir / 'log.jsonl'}:1:1: no events (give a ktx tune run folder)")
    t0 = events[0]["t"]
    started = next((e["t"] - t0 for e in events if e["event"] == "workers_started"), None)
    procs: dict[str, dict[str, Any]] = {}
    for e in events:
        if e["event"] != "measure":
            continue
        p = procs.setdefault(str(e["worker"]), {"measured": 0, "first_s": None, "last_s": 0.0})
        t = round(e["t"] - t0, 2)
        p["measured"] += 1
        p["first_s"] = t if p["first_s"] is None else p["first_s"]
        p["last_s"] = t
    # the search's evaluations alone: configs (not originals) measured at the tuned shapes, so
    # that a run whose workers measure the held-out points ahead is not credited for those
    tuned = set(next((e.get("shapes", []) for e in events if e["event"] == "start"), []))
    searched = sum(
        1 for e in events if e["event"] == "measure" and e.get("config") and e.get("shape") in tuned
    )
    workers = {k: v for k, v in procs.items() if not k.startswith("main")}
    ended = max((v["last_s"] for v in workers.values()), default=None)
    main_before = main_after = 0
    for e in events:
        if e["event"] == "measure" and str(e["worker"]).startswith("main"):
            t = e["t"] - t0
            if started is None or t <= started:
                main_before += 1
            else:
                main_after += 1
    costs = [
        {k: e[k] for k in ("shape", "expected_s", "spent_s", "pairs") if k in e}
        for e in events
        if e["event"] == "paired_cost"
    ]
    checks = [{"shape": e["shape"], "status": e["status"]} for e in events if e["event"] == "paired"]
    return {
        "run": str(run_dir),
        "wall_s": round(events[-1]["t"] - t0, 2),
        "measured": sum(p["measured"] for p in procs.values()),
        "search_evaluations": searched,
        "workers_started_s": None if started is None else round(started, 2),
        "workers_first_measure_s": {k: v["first_s"] for k, v in sorted(workers.items())},
        "workers_last_measure_s": ended,
        "main_measured_before_workers": main_before,
        "main_measured_after_workers": main_after,
        "per_process": dict(sorted(procs.items())),
        "final_checks": checks,
        "check_costs": costs,
    }


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("run_dir", type=Path)
    p.add_argument("--json", type=Path, default=None)
    args = p.parse_args()
    out = timeline(args.run_dir)
    text = json.dumps(out, indent=1)
    if args.json is not None:
        args.json.write_text(text + "\n")
    print(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
