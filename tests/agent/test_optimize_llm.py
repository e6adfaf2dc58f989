"""``ktx optimize --planner llm`` against the scripted server: feedback, fallback, exact replay."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

pytest.importorskip("openai", reason="the llm planner needs the openai package (ktx[llm])")

from ktx.agent.loop import OptimizeRequest, load_records, optimize

from .fake_openai import FakeOpenAI, Reply
from .model_backend import ModelBackend

ROOT = Path(__file__).resolve().parents[2]
KERNEL = ROOT / "kernels" / "silu_and_mul"
SHAPES = ("tokens=1,d=4096", "tokens=4096,d=4096")

COARSEN = json.dumps(
    {"rationale": "many short blocks", "passes": [{"name": "coarsen", "why": "more work per thread"}]}
)
SPLIT = json.dumps(
    {
        "rationale": "coarsen had no site; one token launches one block for 132 SMs: split the row",
        "passes": [{"name": "split", "knobs": {"SPLIT": [2, 4, 8]}, "why": "more blocks per row"}],
    }
)
SCRIPT = [
    Reply("{not json"),
    Reply(COARSEN),
    Reply(SPLIT, prompt_tokens=3000, completion_tokens=90),
    *[Reply(status=500)] * 3,
]


def request(out: Path, url: str, *, fallback: bool = True, rounds: int = 3) -> OptimizeRequest:
    return OptimizeRequest(
        kernel_dir=KERNEL, planner="llm", model="fake-model", base_url=url, rounds=rounds,
        trials_per_round=6, out=out, shapes=SHAPES, ncu="off", patience=3, llm_attempts=3,
        llm_timeout_s=5.0, llm_fallback=fallback,
    )  # fmt: skip


def test_llm_rounds_feedback_fallback_and_replay(tmp_path: Path) -> None:
    out = tmp_path / "run"
    with FakeOpenAI(SCRIPT) as server:
        first = optimize(request(out, server.base_url), backend=ModelBackend())
        asked = list(server.requests)
    rounds = load_records(out)
    assert [r["planner"] for r in rounds] == ["llm", "llm", "rules (fallback)"]
    assert rounds[0]["pipeline"] == "coarsen" and rounds[0]["status"] == "template-failed"
    assert rounds[0]["failures"][0]["name"] == "coarsen"
    assert [a["ok"] for a in rounds[0]["plan"]["attempts"]] == [False, True]
    # The failed pass is reported back to the model in the next round's prompt.
    round2 = asked[2]["messages"][-1]["content"]
    assert "coarsen did not apply" in round2 and "no global thread index" in round2
    assert rounds[1]["pipeline"] == "split" and rounds[1]["knobs"]["SPLIT"] == [1, 2, 4, 8]
    assert rounds[1]["status"] == "improved"
    assert "HTTP 500" in rounds[2]["plan"]["fallback"]
    state = json.loads((out / "optimize.json").read_text())
    assert state["usage"]["requests"] == 6
    assert state["usage"]["total_tokens"] == 2 * 120 + 3090
    # Again in the same folder: the answers come from the cache; only the failed round asks.
    with FakeOpenAI([Reply(status=500)]) as server:
        again = optimize(request(out, server.base_url), backend=ModelBackend())
        assert len(server.requests) == 3
    assert [r.plan.pipeline for r in again.rounds] == [r.plan.pipeline for r in first.rounds]
    assert [r.status for r in again.rounds] == [r.status for r in first.rounds]
    assert again.geomean_speedup == pytest.approx(first.geomean_speedup)
    assert again.usage.cache_hits == 3 and again.usage.prompt_tokens == 0


def test_a_silent_model_stops_the_run_without_llm_fallback(tmp_path: Path) -> None:
    """Round 1 answered, round 2 only HTTP 500s: without --llm-fallback the run stops there,
    keeps round 1's result and says why in the round, the stop reason and the state."""
    out = tmp_path / "run"
    with FakeOpenAI([Reply(SPLIT), *[Reply(status=500)] * 3]) as server:
        result = optimize(request(out, server.base_url, fallback=False), backend=ModelBackend())
    assert [r.plan.planner for r in result.rounds] == ["llm", "llm (no answer)"]
    assert result.rounds[1].status == "stopped" and "HTTP 500" in result.rounds[1].note
    assert result.stop_reason == "no answer from the LLM" and result.best_round == 1
    rounds = load_records(out)
    assert rounds[1]["plan"]["unanswered"].startswith("no answer from model 'fake-model'")
    assert json.loads((out / "optimize.json").read_text())["stop_reason"] == "no answer from the LLM"
