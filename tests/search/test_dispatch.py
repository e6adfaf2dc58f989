"""Dispatch tables: buckets, the original as fallback, JSON round trip, a C++ header that agrees."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from ktx.search.dispatch import Choice, DispatchTable, build_table
from ktx.spec import ShapePoint


def point(tokens: int, d: int) -> ShapePoint:
    return ShapePoint((("tokens", tokens), ("d", d)))


CHOICES = [
    Choice(point(1, 4096), {"B": 64, "S": 8}, 4.0, 2.0),
    Choice(point(16, 4096), {"B": 64, "S": 8}, 4.0, 2.5),
    Choice(point(256, 4096), {"B": 256, "S": 1}, 10.0, 8.0),
    Choice(point(4096, 4096), {"B": 512, "S": 1}, 50.0, 50.5),  # slower than the original
    Choice(point(1, 8192), {"B": 128, "S": 4}, 5.0, 4.0),
    Choice(point(64, 8192), None, 7.0, None),  # nothing succeeded
]


def table() -> DispatchTable:
    return build_table("my-kernel", ("tokens", "d"), "tokens", CHOICES, 0.0, ("B", "S"), {"B": 256, "S": 1})


def test_buckets_split_at_geometric_midpoints_and_merge() -> None:
    t = table()
    assert t.select({"tokens": 1, "d": 4096}) == {"B": 64, "S": 8}
    assert t.select({"tokens": 63, "d": 4096}) == {"B": 64, "S": 8}  # merged bucket [.., 64)
    assert t.select({"tokens": 64, "d": 4096}) == {"B": 256, "S": 1}  # sqrt(16 * 256) = 64
    assert t.select({"tokens": 1023, "d": 4096}) == {"B": 256, "S": 1}
    assert t.select({"tokens": 1024, "d": 4096}) is None  # 4096 lost to the original
    assert t.select({"tokens": 1, "d": 8192}) == {"B": 128, "S": 4}
    assert t.select({"tokens": 500, "d": 8192}) is None  # nothing succeeded at 64
    assert t.select({"tokens": 1, "d": 2048}) is None  # never tuned: the original
    assert len(t.variants) == 3


def test_never_slower_than_the_original_on_measured_shapes() -> None:
    for min_gain in (0.0, 0.3):
        t = build_table("k", ("tokens", "d"), "tokens", CHOICES, min_gain)
        for c in CHOICES:
            chosen = t.select(c.point.as_dict())
            if chosen is not None:
                assert c.best_us is not None and c.original_us is not None
                assert chosen == c.config and c.best_us * (1 + min_gain) < c.original_us
    # with a 30% threshold the 1.25x win at 256 no longer counts
    assert (
        build_table("k", ("tokens", "d"), "tokens", CHOICES, 0.3).select(point(256, 4096).as_dict()) is None
    )


def test_exact_repairs_win_over_ranges_and_json_round_trips() -> None:
    t = table().with_exact_original(point(8, 4096), "held-out check: 0.9x")
    assert t.select({"tokens": 8, "d": 4096}) is None
    assert t.select({"tokens": 9, "d": 4096}) == {"B": 64, "S": 8}
    again = DispatchTable.from_dict(t.to_dict())
    assert again == t
    for tokens in (1, 8, 9, 64, 5000):
        assert again.select({"tokens": tokens, "d": 4096}) == t.select({"tokens": tokens, "d": 4096})


@pytest.mark.skipif(shutil.which("g++") is None, reason="g++ is not installed")
def test_cpp_header_agrees_with_python(tmp_path: Path) -> None:
    t = table().with_exact_original(point(8, 4096), "held-out")
    (tmp_path / "dispatch.h").write_text(t.to_header())
    probes = [(n, d) for d in (2048, 4096, 8192) for n in (1, 2, 7, 8, 9, 63, 64, 65, 1023, 1024, 9999)]
    calls = "\n".join(
        f'  c = ktx_dispatch_my_kernel({n}, {d}); std::printf("%d %d %d\\n", c.variant, c.B, c.S);'
        for n, d in probes
    )
    (tmp_path / "main.cc").write_text(
        f'#include "dispatch.h"\n#include <cstdio>\nint main() {{\n  ktx_my_kernel_config c;\n{calls}\n}}\n'
    )
    exe = tmp_path / "main"
    subprocess.run(
        ["g++", "-std=c++17", "-Wall", "-Wextra", "-Werror", "main.cc", "-o", str(exe)],
        cwd=tmp_path,
        check=True,
    )
    lines = subprocess.run([str(exe)], capture_output=True, text=True, check=True).stdout.splitlines()
    for (n, d), line in zip(probes, lines, strict=True):
        variant, b, s = map(int, line.split())
        chosen = t.select({"tokens": n, "d": d})
        if chosen is None:
            assert variant == -1 and (b, s) == (256, 1), (n, d)
        else:
            assert t.variants[variant] == chosen == {"B": b, "S": s}, (n, d)


#: A rows-per-block-like template: ROWS rows per block, valid only where ROWS divides tokens.
ROWS_CHOICES = [
    Choice(point(1, 4096), {"ROWS": 1, "VEC": 8}, 4.0, 3.0),
    Choice(point(64, 4096), {"ROWS": 4, "VEC": 8}, 8.0, 5.0),
    Choice(point(4096, 4096), {"ROWS": 16, "VEC": 8}, 50.0, 30.0),
    Choice(point(64, 8200), {"ROWS": 4, "VEC": 8}, 8.0, 5.0),
]
ROWS_CONSTRAINTS = ("tokens % ROWS == 0", "d % (VEC * 8) == 0 or 0 < half < 0")


def rows_table() -> DispatchTable:
    return build_table(
        "rows-kernel", ("tokens", "d"), "tokens", ROWS_CHOICES, 0.0, ("ROWS", "VEC"), {"ROWS": 1, "VEC": 1},
        constraints=[*ROWS_CONSTRAINTS, "UNKNOWN_THING > 0"], derived=[("half", "d // 2")],
    )  # fmt: skip


def test_range_buckets_fall_back_to_the_original_where_a_constraint_fails() -> None:
    t = rows_table()
    assert t.constraints == ROWS_CONSTRAINTS, "constraints over unknown names are left to the harness"
    assert t.select({"tokens": 64, "d": 4096}) == {"ROWS": 4, "VEC": 8}
    assert t.select({"tokens": 60, "d": 4096}) == {"ROWS": 4, "VEC": 8}  # same bucket, 4 | 60
    assert t.select({"tokens": 66, "d": 4096}) is None, "66 rows in blocks of 4: the original"
    assert t.select({"tokens": 4004, "d": 4096}) is None, "16 does not divide 4004"
    assert t.select({"tokens": 4096, "d": 4096}) == {"ROWS": 16, "VEC": 8}
    assert t.select({"tokens": 64, "d": 8200}) is None, "8200 is no multiple of VEC * 8"
    assert t.broken(1, {"tokens": 66, "d": 4096}) == ("tokens % ROWS == 0",)
    again = DispatchTable.from_dict(t.to_dict())
    assert again == t and again.select({"tokens": 66, "d": 4096}) is None


@pytest.mark.skipif(shutil.which("g++") is None, reason="g++ is not installed")
def test_cpp_header_checks_the_constraints(tmp_path: Path) -> None:
    t = rows_table().with_exact_original(point(2, 4096), "held-out")
    (tmp_path / "dispatch.h").write_text(t.to_header())
    tokens = (1, 2, 3, 7, 8, 9, 60, 63, 64, 66, 100, 4000, 4004, 4096, 8192)
    probes = [(n, d) for d in (4096, 8200) for n in tokens]
    calls = "\n".join(
        f'  c = ktx_dispatch_rows_kernel({n}, {d}); std::printf("%d %d %d\\n", c.variant, c.ROWS, c.VEC);'
        for n, d in probes
    )
    (tmp_path / "main.cc").write_text(
        f'#include "dispatch.h"\n#include "dispatch.h"\n#include <cstdio>\n'
        f"int main() {{\n  ktx_rows_kernel_config c;\n{calls}\n}}\n"
    )
    exe = tmp_path / "main"
    flags = ["-std=c++17", "-Wall", "-Wextra", "-Werror"]
    subprocess.run(["g++", *flags, "main.cc", "-o", str(exe)], cwd=tmp_path, check=True)
    lines = subprocess.run([str(exe)], capture_output=True, text=True, check=True).stdout.splitlines()
    fallbacks = 0
    for (n, d), line in zip(probes, lines, strict=True):
        variant, rows, vec = map(int, line.split())
        chosen = t.select({"tokens": n, "d": d})
        if chosen is None:
            fallbacks += 1
            assert variant == -1 and (rows, vec) == (1, 1), (n, d)
        else:
            assert t.variants[variant] == chosen == {"ROWS": rows, "VEC": vec}, (n, d)
            assert n % rows == 0 and d % (vec * 8) == 0
    assert fallbacks > 2


def test_default_min_gain_is_the_measured_noise() -> None:
    """A 3% win inside a 5% spread is noise; with no spread, wins under 1% still do not count."""
    noisy = Choice(point(1, 4096), {"B": 64}, 1.03, 1.0, noise=0.05)
    clean = Choice(point(16, 4096), {"B": 128}, 1.03, 1.0, noise=0.0)
    tiny = Choice(point(256, 4096), {"B": 256}, 1.005, 1.0, noise=0.0)
    choices = [noisy, clean, tiny]
    t = build_table("k", ("tokens", "d"), "tokens", choices)
    assert [t.select(c.point.as_dict()) for c in choices] == [None, {"B": 128}, None]
    forced = build_table("k", ("tokens", "d"), "tokens", choices, 0.0)  # --min-gain 0 overrides
    assert [forced.select(c.point.as_dict()) for c in choices] == [{"B": 64}, {"B": 128}, {"B": 256}]


def test_search_and_dispatched_geomeans_are_told_apart() -> None:
    from ktx.agent.search import ShapeOutcome
    from ktx.measure.types import Measurement, Status, Timing
    from ktx.search.engine import StudyStats, speedup_geomeans
    from ktx.search.report import ShapeResult, Summary

    def m(us: float) -> Measurement:
        return Measurement("k", "s", {}, Status.OK, graph=Timing.of([us]))

    stats = StudyStats(1, 1, {}, 0, None, None, 0)
    winner = ShapeResult(point(1, 4096), "graph", "tpe", m(2.0), {"B": 1}, m(1.0), stats, "s1")
    loser = ShapeResult(point(16, 4096), "graph", "tpe", m(1.0), {"B": 2}, m(2.0), stats, "s2")
    summary = Summary("k", (winner, loser), dispatched=frozenset({winner.point.name}))
    assert summary.geomean_speedup == pytest.approx(1.0), "search: 2x and 0.5x"
    assert summary.dispatched_geomean_speedup == pytest.approx(2**0.5), "the table keeps the original"
    data = summary.to_dict()
    assert data["search_geomean_speedup"] == pytest.approx(1.0)
    assert data["dispatched_geomean_speedup"] == pytest.approx(2**0.5)
    text = summary.markdown()
    assert "Search geomean (best found / original): 1.000" in text
    assert "Dispatched geomean (what the table delivers, >= 1.0 per shape): 1.414" in text
    # the agent's round result reports with the same helper
    outcomes = [
        ShapeOutcome("a", "graph", m(2.0), {"B": 1}, m(1.0)),
        ShapeOutcome("b", "graph", m(1.0), {"B": 2}, m(2.0)),
    ]
    assert [o.speedup for o in outcomes] == [2.0, 1.0]
    assert speedup_geomeans([(2.0, 1.0, True), (1.0, 2.0, False)]) == pytest.approx((1.0, 2**0.5))


def test_a_spec_without_shape_variables_gets_a_one_rule_table() -> None:
    """cuda-samples' vectorAdd fixes every size: its one point has no variable to bucket on
    (``optimize`` crashed on an H200 with ``variables[0]``); the table still dispatches the
    found config there, and its C++ header builds a function of no shape."""
    from ktx.search.dispatch import Choice, build_table, choose_bucket_var
    from ktx.spec import ShapePoint

    bucket = choose_bucket_var(())
    assert bucket == ""
    choice = Choice(ShapePoint(()), {"VEC": 4}, 10.0, 5.0)
    table = build_table("vectorAdd", (), bucket, [choice], min_gain=0.02)
    assert table.select({}) == {"VEC": 4}
    assert "ktx_dispatch_vectorAdd()" in table.to_header()
