"""Every tested pipeline still runs in the order it ran in when ``pipeline_orders.tsv`` was written.

The table lists the pipelines written in the tests, goldens, specs, docs and the planner's code,
and those the rules planner scheduled during its tests, each with its resolved order
(``scripts/pipeline_orders.py``). A change to the passes' ``after``/``requires``/``prefer_after``
edges or phases that moves one of them shows here, with the rows that moved; issue 17 item 6
(placing passes by phase) was held to this table.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parent.parent
TABLE = Path(__file__).with_name("pipeline_orders.tsv")


def _script() -> ModuleType:
    spec = importlib.util.spec_from_file_location("pipeline_orders", ROOT / "scripts" / "pipeline_orders.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _rows() -> list[tuple[str, str]]:
    rows = [line.split("\t") for line in TABLE.read_text().splitlines() if line.strip()]
    return [(row[0], row[1]) for row in rows]


def test_the_table_covers_the_llmc_and_ordering_pipelines() -> None:
    written = dict(_rows())
    # the llm.c layernorm pipeline: unroll before rows-per-block and vectorize (8 knobs, not 14)
    assert (
        written["vectorize,block-size,unroll,rows-per-block"] == "block-size,unroll,rows-per-block,vectorize"
    )
    assert written["split,vectorize"] == "vectorize,split"
    assert written["unroll,tile,launch-bounds"] == "tile,unroll,+block-size,launch-bounds"
    assert len(written) >= 100


def test_every_tested_pipeline_resolves_as_recorded() -> None:
    resolve = _script().resolve
    moved = [f"{w}: was {r}, now {resolve(w)}" for w, r in _rows() if resolve(w) != r]
    assert not moved, (
        f"{len(moved)} tested pipeline(s) run in another order:\n  " + "\n  ".join(moved) + "\n"
        "if the move is intended, regenerate: python3 scripts/pipeline_orders.py "
        "--table tests/pipeline_orders.tsv > /tmp/t && mv /tmp/t tests/pipeline_orders.tsv"
    )


def test_no_finer_order_of_phases_keeps_the_tested_orders() -> None:
    """What :class:`ktx.passbase.Phase` says: run edges derived from an order of phases would put
    each pair of passes in different phases in one order in every pipeline, so the tested orders
    (a pair written both ways) and the hand-written edges bound how fine such phases can be. The
    finest is their condensation: expose, then 15 passes that must share a phase (online among
    them: a tested pipeline runs vectorize after it), then three singletons in some order:
    row-registers (after the loop passes), cluster-rows, early-loads. When this changes, update
    the Phase docstring."""
    import itertools

    import networkx as nx

    from ktx.registry import default_registry

    reg = default_registry()
    graph: nx.DiGraph[str] = nx.DiGraph()
    # inline has no edges: the pipeline runs it before every other pass (pipeline._inline_first)
    graph.add_nodes_from(n for n in reg.names() if n != "inline")
    graph.add_edges_from((dep, cls.name) for cls in reg for dep in (*cls.requires, *cls.after))
    for _, resolved in _rows():
        if not resolved.startswith("error"):
            names = [n.lstrip("+") for n in resolved.split(",")]
            graph.add_edges_from(itertools.combinations(names, 2))
    dag = nx.condensation(graph)
    groups = [sorted(dag.nodes[n]["members"]) for n in nx.topological_sort(dag)]
    assert [len(g) for g in groups] == [1, 15, 1, 1, 1]
    assert groups[0] == ["expose"] and "online" in groups[1]
    singles = sorted(map(tuple, groups[2:]))
    assert singles == [("cluster-rows",), ("early-loads",), ("row-registers",)]
    # the pairs the Phase docstring names, each written in both orders by a tested pipeline
    both = [
        ("split", "vectorize"),
        ("block-size", "vectorize"),
        ("unroll", "vectorize"),
        ("row-owner", "vectorize"),
    ]
    order = {w: r.split(",") for w, r in _rows() if not r.startswith("error")}
    for a, b in both:
        runs = [r for r in order.values() if a in r and b in r]
        assert any(r.index(a) < r.index(b) for r in runs) and any(r.index(b) < r.index(a) for r in runs), (
            a,
            b,
        )


def test_the_planners_phases_as_run_phases_would_move_tested_pipelines(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Why the pipeline keeps its edges: run edges derived from the planner's phases (the
    ``phase`` attribute, in :class:`~ktx.passbase.Phase` order) move tested pipelines, among
    them the llm.c layernorm one; the condensation of the test above moves none."""
    from ktx.passbase import Phase
    from ktx.registry import default_registry

    what_if = _script().what_if
    reg = default_registry()
    planner = "|".join(" ".join(cls.name for cls in reg if cls.phase == phase) for phase in Phase)
    assert what_if(planner, TABLE) == 1
    assert "\tvectorize,block-size,unroll,rows-per-block\t" in capsys.readouterr().out
    finest = "expose|" + " ".join(
        n for n in reg.names() if n not in ("expose", "cluster-rows", "early-loads")
    )
    assert what_if(finest + "|cluster-rows|early-loads", TABLE) == 0
