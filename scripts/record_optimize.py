"""Make (or complete) the recording of a ``ktx optimize`` run from its run folder.

    python scripts/record_optimize.py RUN_DIR -o kernels/K/recorded/optimize/NAME.json --device D --toolkit T
    python scripts/record_optimize.py RUN_DIR --into kernels/K/recorded/optimize/NAME.json

Runs of this ktx write ``recording.json`` themselves; this is for run folders of older versions.
``--into`` adds the run section (budget, rounds, per-round searches, stop reason) to an existing
recording, after checking that the run folder's cache holds exactly its measurements: the
section is derived from the same run, never from another one.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from ktx.search.recording import recording_of_run


def main(argv: list[str]) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("run_dir", type=Path)
    p.add_argument("-o", "--out", type=Path)
    p.add_argument("--into", type=Path, help="an existing recording of the same run: add its run section")
    p.add_argument("--device", default="")
    p.add_argument("--toolkit", default="")
    args = p.parse_args(argv)
    made = recording_of_run(args.run_dir, device=args.device, toolkit=args.toolkit, synthetic=False)
    if args.into is not None:
        old = json.loads(args.into.read_text(encoding="utf-8"))

        def keys(rows: list[dict[str, object]]) -> list[str]:
            return sorted(json.dumps(r, sort_keys=True) for r in rows)

        if keys(old["measurements"]) != keys(made["measurements"]):
            print(f"{args.into}: its measurements are not those of {args.run_dir}", file=sys.stderr)
            return 2
        old["run"] = made["run"]
        old["request"] = {**old.get("request", {}), **made["request"]}
        args.into.write_text(json.dumps(old, indent=1) + "\n")
        return 0
    if args.out is None:
        p.error("give -o FILE or --into FILE")
    args.out.write_text(json.dumps(made, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
