"""scripts/overhead.py's accounting: each part's seconds exclude the parts it calls, so that the
table's rows add up to the run and "worker" is not counted again inside "compile" or "other"; and
the stand-in worker sleeps the launches' count ktx's cost model gives."""

from __future__ import annotations

import importlib.util
import sys
import time
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _load() -> ModuleType:
    spec = importlib.util.spec_from_file_location("overhead", ROOT / "scripts" / "overhead.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["overhead"] = module
    spec.loader.exec_module(module)
    return module


def test_parts_are_exclusive_and_add_up() -> None:
    overhead = _load()
    ledger = overhead.Ledger()
    inner = ledger.wrap("storage", lambda: time.sleep(0.05))

    def sampler() -> None:
        time.sleep(0.05)
        inner()

    began = time.perf_counter()
    with ledger.part("other"):
        time.sleep(0.02)
        ledger.wrap("sampler", sampler)()
        inner()
    wall = time.perf_counter() - began
    s = ledger.seconds
    assert s["storage"] == pytest.approx(0.10, abs=0.03)
    assert s["sampler"] == pytest.approx(0.05, abs=0.03)
    assert s["other"] == pytest.approx(0.02, abs=0.03)
    assert sum(s.values()) == pytest.approx(wall, abs=0.005)
    assert ledger.calls == {"other": 1, "sampler": 1, "storage": 2}


def test_the_stand_in_sleeps_the_modelled_launches(monkeypatch: pytest.MonkeyPatch) -> None:
    from ktx.measure.cost import timing_seconds
    from ktx.measure.gpu import Options

    overhead = _load()
    monkeypatch.setenv("KTX_OVERHEAD_US", "2.0")
    opts = Options(max_runs=20, graph_launches=10, graph_replays=3, settle_s=0.0)
    payload = {
        "spec": str(ROOT / "kernels/act_and_mul_scalar/ktx.toml"),
        "shape": "tokens=16,d=4096",
        "candidate": {"config": {"BLOCK_X": 64}},
        "modules": {"k": {}},
        "options": opts.__dict__,
    }
    began = time.perf_counter()
    reply = overhead.handle("measure", payload)
    took = time.perf_counter() - began
    expected = timing_seconds(2.0, opts)
    assert reply["costs"]["time_s"] == pytest.approx(expected)
    assert expected <= took < expected + 0.5
    assert reply["graph"]["median_us"] == pytest.approx(2.0) and reply["status"] == "ok"
