"""Print the resolved run order of every pipeline the repository writes down, to compare orderings.

    python3 scripts/pipeline_orders.py --table tests/pipeline_orders.tsv > after.tsv
    diff tests/pipeline_orders.tsv after.tsv      # empty: no tested pipeline runs in another order

A pipeline is any comma-separated run of registered pass names (options in braces allowed, no
spaces) written in the tests, goldens, specs, benchmarks, docs, examples and the planner's code.
``--log FILE`` adds pipelines recorded at run time, one a line: run tests with
``KTX_SCHEDULE_LOG=FILE PYTHONPATH=scripts pytest -p pipeline_orders ...`` and every pipeline
scheduled with the default registry is logged (the rules planner's tries and probes).
``--table FILE`` keeps the pipelines of an earlier output (``tests/pipeline_orders.tsv`` holds
the planner's logged ones). ``--all`` also searches ``results/`` and ``scripts/`` (recorded GPU
sessions, GPU scripts: written, not tested). ``--pairs`` adds every ordered pair and triple of
registered passes, to count how many unwritten orders a change moves. ``--phases "expose|a b|c"``
asks what-if: run edges derived from that order of phases (an earlier group runs first; inside a
group only the existing edges), and prints the rows of ``--table`` that would move and how many
edges would be left inside groups.

Each line is ``written<TAB>resolved``: the scheduled order, a required pass that was added marked
``+name``, or ``error: ...`` where the pipeline is refused (a conflict, a bad option).
Why: issue 17 item 6 asks to place passes by a declared phase without moving any tested
pipeline; ``tests/test_pipeline_orders.py`` holds the table, and this is how it is regenerated.
"""

from __future__ import annotations

import argparse
import itertools
import os
import re
import sys
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
#: Where tested pipelines are written: the tests, goldens, specs, docs (doctested), the planner.
WHERE = ("tests", "benchmarks", "kernels", "docs", "examples", "ktx", "passes", "README.md")
#: Also searched with ``--all``: recorded GPU sessions and the lead's GPU scripts (not tested).
MORE = ("results", "scripts")
SUFFIXES = {".py", ".cu", ".cuh", ".toml", ".md", ".json", ".txt", ".sh", ".yaml", ".yml", ".jsonl"}


def _names() -> list[str]:
    from ktx.registry import default_registry

    return sorted((cls.name for cls in default_registry()), key=len, reverse=True)


def _pattern(names: Iterable[str]) -> re.Pattern[str]:
    one = r"(?<![\w-])(?:" + "|".join(re.escape(n) for n in names) + r")(?![\w-])(?:\{[^{}\n]*\})?"
    return re.compile(one + r"(?:," + one + r")*")


def _files(tops: Iterable[str]) -> Iterator[Path]:
    for top in tops:
        path = ROOT / top
        if path.is_file():
            yield path
            continue
        for f in sorted(path.rglob("*")):
            small = f.is_file() and f.stat().st_size < 4_000_000
            if small and f.suffix in SUFFIXES and ".venv" not in f.parts:
                yield f


def written(tops: Iterable[str] = WHERE) -> set[str]:
    """Every pipeline text found under ``tops`` (two passes or more, or one that requires)."""
    from ktx.registry import default_registry

    reg = default_registry()
    pat = _pattern(_names())
    found: set[str] = set()
    for f in _files(tops):
        text = f.read_text(errors="replace")
        for m in pat.finditer(text):
            pipeline = re.sub(r"\s+", "", m.group(0))
            names = [p.split("{")[0] for p in re.split(r",(?![^{]*\})", pipeline)]
            if len(set(names)) != len(names):
                continue
            if len(names) > 1 or any(reg.get(n).requires for n in names):
                found.add(pipeline)
    return found


def resolve(pipeline: str) -> str:
    """The scheduled order of ``pipeline``: names joined by commas, an added pass marked ``+``."""
    from ktx.ir.errors import KtxError

    from ktx.pipeline import instantiate_specs, parse_pipeline, schedule
    from ktx.registry import default_registry

    reg = default_registry()
    try:
        order = schedule(instantiate_specs(parse_pipeline(pipeline), reg), reg)
    except KtxError as e:
        return "error: " + str(e).splitlines()[0].split(" (")[0]
    return ",".join(("+" if s.reason != "pipeline" else "") + s.pass_.name for s in order)


def what_if(phases: str, table: Path) -> int:
    """Print the rows of ``table`` that edges derived from ``phases`` would move; 1 if any do."""
    import networkx as nx
    from ktx.ir.errors import KtxError

    from ktx.pipeline import instantiate_specs, parse_pipeline
    from ktx.registry import default_registry

    reg = default_registry()
    rank = {name: i for i, group in enumerate(phases.split("|")) for name in group.split()}
    missing = sorted(set(reg.names()) - set(rank))
    if missing:
        raise SystemExit(f"--phases places no phase for {', '.join(missing)}")

    def edges(name: str) -> tuple[str, ...]:
        return (*reg.get(name).requires, *reg.get(name).after)

    def order(text: str) -> str:
        try:
            specs = instantiate_specs(parse_pipeline(text), reg)
        except KtxError:
            return "error"
        key: dict[str, tuple[float, int]] = {p.name: (float(i), 0) for i, p in enumerate(specs)}
        added: dict[str, bool] = dict.fromkeys(key, False)
        queue = list(key)
        while queue:
            name = queue.pop(0)
            for req in reg.get(name).requires:
                if req not in key:
                    key[req], added[req] = (key[name][0] - 0.5, len(key)), True
                    queue.append(req)
        if any(other in key for name in key for other in reg.get(name).conflicts):
            return "error"
        graph: nx.DiGraph[str] = nx.DiGraph()
        graph.add_nodes_from(key)
        for a, b in itertools.permutations(key, 2):
            if rank[a] < rank[b] or (rank[a] == rank[b] and a in edges(b)):
                graph.add_edge(a, b)
        if not nx.is_directed_acyclic_graph(graph):
            return "error: cycle"
        for name in key:
            for dep in reg.get(name).prefer_after:
                if dep in key and not graph.has_edge(dep, name) and not nx.has_path(graph, name, dep):
                    graph.add_edge(dep, name)
        return ",".join(
            ("+" if added[n] else "") + n for n in nx.lexicographical_topological_sort(graph, key.get)
        )

    all_edges = [(d, c.name) for c in reg for d in c.after]
    reversed_ = [f"{d}->{c}" for d, c in all_edges if rank[d] > rank[c]]
    inside = sum(1 for d, c in all_edges if rank[d] == rank[c])
    moved = 0
    for line in table.read_text().splitlines():
        written_, resolved = line.split("\t")
        now = order(written_)
        if now != resolved and not (now.startswith("error") and resolved.startswith("error")):
            moved += 1
            print(f"moved\t{written_}\t{resolved}\t{now}")
    print(
        f"{moved} moved; {inside} of {len(all_edges)} after-edges left inside phases; reversed: {reversed_}"
    )
    return 1 if moved else 0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    ap.add_argument("--log", action="append", default=[], help="file of run-time pipelines, one a line")
    ap.add_argument("--pairs", action="store_true", help="also every ordered pair and triple of passes")
    ap.add_argument("--all", action="store_true", help="also results/ and scripts/ (untested pipelines)")
    ap.add_argument("--table", action="append", default=[], help="a previous output: keep its pipelines")
    ap.add_argument("--phases", help="what-if: an order of phases, groups split by |, names by spaces")
    args = ap.parse_args(argv)
    sys.path.insert(0, str(ROOT))
    if args.phases:
        return what_if(
            args.phases, Path(args.table[0] if args.table else ROOT / "tests" / "pipeline_orders.tsv")
        )
    pipelines = written(WHERE + MORE if args.all else WHERE)
    for log in args.log:
        pipelines |= {line.strip() for line in Path(log).read_text().splitlines() if line.strip()}
    for table in args.table:
        pipelines |= {line.split("\t")[0] for line in Path(table).read_text().splitlines() if line.strip()}
    for p in sorted(pipelines):
        print(f"{p}\t{resolve(p)}")
    if args.pairs:
        names = sorted(_names())
        for k in (2, 3):
            for combo in itertools.permutations(names, k):
                p = ",".join(combo)
                print(f"#{k} {p}\t{resolve(p)}")
    return 0


def pytest_configure(config: Any) -> None:
    """As a pytest plugin (``-p scripts.pipeline_orders``): log every scheduled pipeline."""
    log = os.environ.get("KTX_SCHEDULE_LOG")
    if not log:
        return
    import ktx.pipeline as pipeline

    inner = pipeline.schedule

    def logged(passes: Any, registry: Any = None) -> Any:
        from ktx.registry import default_registry

        if registry is None or {c.name for c in registry} == {c.name for c in default_registry()}:
            with open(log, "a") as out:
                out.write(",".join(p.describe() for p in passes) + "\n")
        return inner(passes, registry)

    pipeline.schedule = logged


if __name__ == "__main__":
    raise SystemExit(main())
