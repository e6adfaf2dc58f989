"""The run's phase timings as a record: typed, versioned, one line for the summary."""

from __future__ import annotations

import pytest
from ktx.ir.errors import KtxError

from ktx.records.phases import PHASES_SCHEMA, CompileCount, PhaseTimings, RoundPhases, compile_counts


def _run() -> PhaseTimings:
    return PhaseTimings(
        load_s=1.0, backend_s=3.0, originals_s=0.5, ncu_s=0.0,
        rounds=(RoundPhases(1, 0.2, 0.1, 6.0, 1.0, 0.0, 30), RoundPhases(2, 0.2, 0.1, 4.0, 0.5, 0.4, 10)),
        report_s=0.3, wall_s=18.0, compiles=(CompileCount("nvcc after NVRTC rejected an option", 12, 30.0),),
    )  # fmt: skip


def test_round_trip_and_schema() -> None:
    p = _run()
    data = p.to_json()
    assert data["schema"] == PHASES_SCHEMA
    assert PhaseTimings.from_json(data) == p
    with pytest.raises(KtxError, match=r"ktx\.phases/9"):
        PhaseTimings.from_json({**data, "schema": "ktx.phases/9"})
    with pytest.raises(KtxError, match="malformed phases"):
        PhaseTimings.from_json({**data, "rounds": [{"plan_s": 1}]})


def test_what_no_phase_claims_is_other() -> None:
    p = _run()
    assert p.claimed_s == pytest.approx(1.0 + 3.0 + 0.5 + 0.3 + 7.3 + 5.2)
    assert p.other_s == pytest.approx(18.0 - p.claimed_s)
    assert p.to_json()["other_s"] == pytest.approx(p.other_s, abs=1e-3)


def test_the_line_names_every_phase_and_the_compiles() -> None:
    line = _run().line()
    assert line.startswith("time 18.0 s: load 1.0 s, backend 3.0 s, originals 0.5 s, 2 round(s): ")
    assert "ncu" not in line.split(";")[0]  # no profile ran
    assert "search 10.0 s (40 evaluations, 0.25 s an evaluation)" in line
    assert "final check 1.9 s" in line and "report 0.3 s" in line
    assert "12 nvcc after NVRTC rejected an option 30.0 s" in line
    assert "\n" not in line


def test_compiles_are_counted_by_kind() -> None:
    results = [
        {"ok": True, "compiler": "nvcc (NVRTC rejected an option)", "fallback": "NVRTC rejected an option",
         "seconds": 2.0, "cached": False},
        {"ok": True, "compiler": "nvcc (NVRTC rejected an option)", "fallback": "NVRTC rejected an option",
         "seconds": 3.0, "cached": False},
        {"ok": True, "compiler": "nvrtc (dropped -O3)", "fallback": "", "seconds": 0.5, "cached": False},
        {"ok": True, "compiler": "nvcc", "fallback": "", "seconds": 0.0, "cached": True},
        {"ok": False, "compiler": "", "fallback": "", "seconds": 1.0, "cached": False},
    ]  # fmt: skip
    got = {c.kind: (c.count, c.seconds) for c in compile_counts(results)}
    assert got == {
        "nvcc after NVRTC rejected an option": (2, 5.0),
        "nvrtc": (1, 0.5),
        "cached": (1, 0.0),
        "failed": (1, 1.0),
    }
