"""benchmarks/realcode/why.py reads a run folder the way ``ktx optimize`` writes it: a found win
whose final check timed out is a lost win, a candidate that failed verification is counted with
its config, a crash is the reason, and the causes are counted per kernel."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
BENCH = ROOT / "benchmarks" / "realcode"


def _why() -> ModuleType:
    sys.path.insert(0, str(BENCH))
    spec = importlib.util.spec_from_file_location("realcode_why", BENCH / "why.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up
    spec.loader.exec_module(module)
    return module


def _lines(path: Path, events: list[dict[str, Any]]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(e) + "\n" for e in events))


KILLED = "the original: timeout: no answer within 3 s: worker killed"
NVCC = [{"kind": "nvcc after NVRTC rejected an option", "seconds": 6.0}]


def _run(folder: Path) -> None:
    """One kernel, one round: shape A 4x faster but its check timed out; shape B no gain; one
    candidate failed verification."""
    opt = folder / "optimize"
    shapes = [
        {"shape": "n=1", "original_us": 100.0, "best_us": 25.0, "speedup": 1.0, "wins": False,
         "paired": {"status": "failed", "reason": KILLED}},
        {"shape": "n=2", "original_us": 10.0, "best_us": 10.0, "speedup": 1.0, "wins": False,
         "paired": {"status": "no-gain", "reason": ""}},
    ]  # fmt: skip
    (folder / "optimize.log").parent.mkdir(parents=True, exist_ok=True)
    (folder / "optimize.log").write_text("ktx optimize\n")
    opt.mkdir(parents=True, exist_ok=True)
    (opt / "optimize.json").write_text(json.dumps({
        "stop_reason": "budget", "shapes": shapes,
        "phases": {"wall_s": 30, "originals_s": 2, "rounds": [{"plan_s": 0.1, "search_s": 9, "check_s": 3}],
                   "report_s": 1, "compiles": NVCC},
    }))  # fmt: skip
    round_one = {"round": 1, "status": "no-gain", "pipeline": "block-size",
                 "probes": [{"name": "block-size", "rewritten": 1}, {"name": "split", "rewritten": 0}],
                 "result": {"search_geomean_speedup": 2.0, "shapes": shapes}}  # fmt: skip
    _lines(opt / "rounds.jsonl", [round_one])
    _lines(opt / "round-01" / "log.jsonl", [
        {"event": "measure", "status": "ok", "config": {"BLOCK_X": 64}},
        {"event": "measure", "status": "wrong_result", "config": {"BLOCK_X": 64, "BLOCK_Y": 8}},
    ])  # fmt: skip


def test_a_run_folder_gives_its_reasons(tmp_path: Path) -> None:
    why = _why()
    _run(tmp_path / "p__k")
    crashed = tmp_path / "p__crash"
    crashed.mkdir()
    (crashed / "optimize.log").write_text(
        "Traceback (most recent call last):\nIndexError: tuple index out of range\n"
    )
    rows = [why.read_run(tmp_path / "p__k"), why.read_run(crashed)]
    k = rows[0]
    assert [x.shape for x in k.lost] == ["n=1"] and k.lost[0].search_speedup == 4.0
    assert k.failed == {"wrong_result": 1} and "BLOCK_X=64,BLOCK_Y=8" in k.failed_examples[0]
    assert k.no_site == ("split",) and k.nvcc_fallback_s == 6.0
    assert any("lost in the final check" in r for r in k.reasons)
    assert rows[1].reasons == ("optimize crashed: IndexError: tuple index out of range",)
    text = why.render(rows, "test")
    assert "| found win(s) lost in the final check | 1 |" in text
    assert "| optimize crashed | 1 |" in text
