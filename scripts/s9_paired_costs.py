"""Extract every paired final check of a folder of ``ktx optimize`` runs, in the order each
``final_check`` call ran them, for the estimate's test over recorded runs
(tests/search/test_final_recorded.py; issue 23 item 6: the estimate within 2x of the check).

Each call's checks are the ``paired`` events between two ``outputs`` events of a round's log; a
check is ``fresh`` where the worker was retired since the last check that measured (a check the
time limit cut, killed at its timeout, or a search measurement that timed out or crashed), so that
this check paid a worker's start.

    python3 scripts/s9_paired_costs.py /path/to/realcode-work > tests/search/fixtures/s8_paired_checks.json
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any


def calls_of(log: Path) -> list[list[dict[str, Any]]]:
    """The checks of each ``final_check`` call in one round's log, in the order they ran."""
    calls: dict[int, list[dict[str, Any]]] = {}
    order: list[tuple[str, bool, str]] = []  # (shape, fresh, status) of this call's checks
    call = 0
    retired = False
    for line in log.read_text().splitlines():
        e = json.loads(line)
        event = e.get("event")
        if event == "measure" and e.get("status") in ("timeout", "crash"):
            retired = True
        elif event == "paired" and e.get("status") in ("measured", "failed"):
            order.append((e["shape"], retired, e["status"]))
            retired = e["status"] == "failed" and "worker killed" in (e.get("reason") or "")
        elif event == "paired_cost":
            index = next(i for i, o in enumerate(order) if o[0] == e["shape"])
            shape, fresh, status = order[index]
            calls.setdefault(call, []).append(
                {"shape": shape, "fresh": fresh, "status": status, "expected_s": e["expected_s"],
                 "spent_s": e["spent_s"], "pairs": int(e["pairs"]), "index": index}
            )  # fmt: skip
        elif event == "outputs":
            order = []
            call += 1
    out = []
    for checks in calls.values():
        checks.sort(key=lambda c: c["index"])
        out.append([{k: v for k, v in c.items() if k != "index"} for c in checks])
    return out


def main(root: Path) -> None:
    out: list[dict[str, Any]] = []
    for log in sorted(root.glob("*/optimize/round-*/log.jsonl")):
        for calls in calls_of(log):
            out.append({"run": f"{log.parts[-4]}/{log.parts[-2]}", "checks": calls})
    print(json.dumps(out, indent=1))


if __name__ == "__main__":
    main(Path(sys.argv[1]))
