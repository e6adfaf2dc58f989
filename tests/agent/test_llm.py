"""The LLM planner against a scripted OpenAI-compatible server on loopback.

Scripts: good plans, malformed JSON, unknown pass names, knob ranges outside the domains, slow
answers, HTTP 500s; then retries, the fallback to the rules, the answer cache (a replay asks
nothing) and token accounting.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

pytest.importorskip("openai", reason="the llm planner's tests need the openai package (ktx[llm])")

from ktx.ir.errors import KtxError

from ktx.agent.catalog import Catalog
from ktx.agent.llm import AnswerCache, LLMPlanner, OpenAIChat, api_key_from_env, build_messages
from ktx.agent.plan import restrict_knobs
from ktx.agent.planner import PlanContext
from ktx.agent.rules import RulesPlanner
from ktx.passbase import Knob

from .fake_openai import FakeOpenAI, Reply
from .helpers import context, make_analysis, memory_bound, scalar_facts

GOOD = json.dumps(
    {
        "rationale": "memory-bound with element-wise accesses: vectorize, then tune the block size",
        "passes": [
            {"name": "vectorize", "knobs": {"VEC": [4, 8]}, "why": "fewer, wider accesses"},
            {"name": "block-size", "options": {"min": 64}},
        ],
    }
)
KNOBS = (
    Knob("VEC", (1, 2, 4, 8), 1, pass_name="vectorize"),
    Knob("BLOCK_X", (64, 128, 256), 128, pass_name="block-size"),
)


def ctx(catalog: Catalog, *, check: bool = True) -> PlanContext:
    c = context(make_analysis(scalar_facts(), [memory_bound()]), catalog)
    if not check:
        return c
    return PlanContext(
        c.kernel, c.round, c.rounds_left, c.analysis, c.catalog, c.current, c.history, c.probes,
        check=lambda plan: restrict_knobs(KNOBS, plan, catalog).problems,
    )  # fmt: skip


def planner(
    server: FakeOpenAI,
    cache: AnswerCache | None = None,
    timeout: float = 5.0,
    attempts: int = 3,
    fallback_unanswered: bool = False,
) -> LLMPlanner:
    client = OpenAIChat(server.base_url, "test-key", timeout_s=timeout)
    return LLMPlanner(
        client, "fake-model", RulesPlanner(), cache, max_attempts=attempts,
        fallback_unanswered=fallback_unanswered,
    )  # fmt: skip


def user_text(request: dict[str, object]) -> str:
    messages = request["messages"]
    assert isinstance(messages, list)
    return "\n".join(str(m["content"]) for m in messages)


def test_good_plan_first_time(catalog: Catalog) -> None:
    with FakeOpenAI([Reply(GOOD, prompt_tokens=1200, completion_tokens=80)]) as server:
        out = planner(server).plan(ctx(catalog))
    assert out.plan.planner == "llm"
    assert out.plan.pipeline == "vectorize,block-size{min=64}"
    assert out.plan.knob_ranges() == {"VEC": (4, 8)}
    assert not out.fallback
    assert out.usage.prompt_tokens == 1200 and out.usage.completion_tokens == 80 and out.usage.requests == 1
    assert [a.source for a in out.attempts] == ["http"]
    (request,) = server.requests
    assert request["path"] == "/v1/chat/completions" and request["model"] == "fake-model"
    assert request["temperature"] == 0.0
    text = user_text(request)
    for expected in (
        "vectorize",
        "block-size",
        "option min (int, default 32)",
        "memory-bound",
        "JSON Schema",
    ):
        assert expected in text


def test_malformed_json_is_asked_again_with_the_error(catalog: Catalog) -> None:
    with FakeOpenAI([Reply('{"rationale": "r", "passes": [vectorize]}'), Reply(GOOD)]) as server:
        out = planner(server).plan(ctx(catalog))
    assert out.plan.pipeline == "vectorize,block-size{min=64}"
    assert [a.ok for a in out.attempts] == [False, True]
    assert "not valid JSON" in out.attempts[0].error
    assert out.usage.requests == 2 and out.usage.prompt_tokens == 200
    second = server.requests[1]["messages"]
    assert isinstance(second, list)
    assert second[-2]["role"] == "assistant" and "[vectorize]" in second[-2]["content"]
    assert second[-1]["role"] == "user" and "not valid JSON" in second[-1]["content"]


def test_unknown_pass_name_is_asked_again(catalog: Catalog) -> None:
    bad = json.dumps({"rationale": "r", "passes": [{"name": "vectorise"}, {"name": "tile"}]})
    with FakeOpenAI([Reply(bad), Reply(GOOD)]) as server:
        out = planner(server).plan(ctx(catalog))
    assert out.plan.planner == "llm"
    assert (
        "did you mean 'vectorize'" in out.attempts[0].error
        and "'tile' does not exist" in out.attempts[0].error
    )
    assert "did you mean 'vectorize'" in user_text(server.requests[1])


def test_out_of_domain_ranges_then_fallback_to_rules(catalog: Catalog) -> None:
    bad = json.dumps({"rationale": "r", "passes": [{"name": "vectorize", "knobs": {"VEC": [16, 32]}}]})
    with FakeOpenAI([Reply(bad)]) as server:
        out = planner(server, attempts=3).plan(ctx(catalog))
    assert len(server.requests) == 3
    assert all("values [16, 32] are outside its domain [1, 2, 4, 8]" in a.error for a in out.attempts)
    assert out.plan.planner == "rules (fallback)"
    assert out.fallback.startswith("no valid plan in 3 attempt(s)")
    assert out.plan.names == ("vectorize",)  # what the rules choose for a scalar memory-bound kernel
    assert out.usage.requests == 3


def test_http_500_is_retried(catalog: Catalog) -> None:
    with FakeOpenAI([Reply(status=500), Reply(GOOD)]) as server:
        out = planner(server).plan(ctx(catalog))
    assert out.plan.planner == "llm"
    assert out.attempts[0].source == "error" and "HTTP 500" in out.attempts[0].error
    # An answerless attempt asks the same question again.
    assert server.requests[0]["messages"] == server.requests[1]["messages"]


def test_slow_answer_times_out_and_is_retried(catalog: Catalog) -> None:
    with FakeOpenAI([Reply(GOOD, delay=2.0), Reply(GOOD)]) as server:
        out = planner(server, timeout=0.5).plan(ctx(catalog))
    assert out.plan.planner == "llm"
    assert "no answer within 0.5 s" in out.attempts[0].error
    assert out.attempts[0].seconds < 1.9


def test_everything_fails_falls_back_when_allowed(catalog: Catalog) -> None:
    with FakeOpenAI([Reply(status=500)]) as server:
        out = planner(server, attempts=2, fallback_unanswered=True).plan(ctx(catalog))
    assert out.plan.planner == "rules (fallback)" and "HTTP 500" in out.fallback
    assert "no answer from model 'fake-model'" in out.unanswered and not out.plan.stop
    assert len(server.requests) == 2


def test_everything_fails_stops_by_default(catalog: Catalog) -> None:
    """No answer at all is a wrong endpoint, key or model: the round stops and says so,
    rather than passing a rules plan off as the model's (issue 21)."""
    with FakeOpenAI([Reply(status=500)]) as server:
        out = planner(server, attempts=2).plan(ctx(catalog))
    assert out.plan.stop and out.plan.planner == "llm (no answer)"
    assert out.unanswered.startswith("no answer from model 'fake-model' at http://127.0.0.1:")
    assert "in 2 attempt(s); last: HTTP 500" in out.unanswered
    assert out.plan.rationale == out.unanswered and not out.fallback


def test_an_invalid_answer_is_an_answer(catalog: Catalog) -> None:
    """A model that answers, however badly, is working: its rounds fall back to the rules as
    before, without --llm-fallback, and are not reported as unanswered."""
    with FakeOpenAI([Reply("{not json"), Reply(status=500)]) as server:
        out = planner(server, attempts=2).plan(ctx(catalog))
    assert out.plan.planner == "rules (fallback)" and not out.unanswered and not out.plan.stop


def test_connection_refused_stops_or_falls_back(catalog: Catalog) -> None:
    with FakeOpenAI([Reply(GOOD)]) as server:
        url = server.base_url
    client = OpenAIChat(url, "k", timeout_s=2.0)
    out = LLMPlanner(client, "m", RulesPlanner(), max_attempts=2).plan(ctx(catalog))
    assert out.plan.stop and f"at {url}" in out.unanswered
    assert all(a.source == "error" for a in out.attempts)
    allowed = LLMPlanner(client, "m", RulesPlanner(), max_attempts=2, fallback_unanswered=True)
    assert allowed.plan(ctx(catalog)).plan.planner == "rules (fallback)"


def test_cached_answers_replay_without_requests(catalog: Catalog, tmp_path: Path) -> None:
    path = tmp_path / "llm_cache.jsonl"
    with FakeOpenAI([Reply("not json"), Reply(GOOD, prompt_tokens=700, completion_tokens=50)]) as server:
        first = planner(server, AnswerCache(path)).plan(ctx(catalog))
    assert len(server.requests) == 2 and first.usage.total_tokens == 100 + 20 + 700 + 50
    with FakeOpenAI([Reply(status=500)]) as server:
        again = planner(server, AnswerCache(path)).plan(ctx(catalog))
    assert server.requests == []  # answered from the cache: the run replays exactly
    assert again.plan == first.plan
    assert [a.source for a in again.attempts] == ["cache", "cache"]
    assert [a.prompt_hash for a in again.attempts] == [a.prompt_hash for a in first.attempts]
    assert again.usage.requests == 0 and again.usage.cache_hits == 2 and again.usage.total_tokens == 0
    rows = [json.loads(line) for line in path.read_text().splitlines()]
    assert (
        len(rows) == 2 and rows[1]["completion_tokens"] == 50 and rows[0]["messages"][0]["role"] == "system"
    )


def test_prompt_is_deterministic(catalog: Catalog) -> None:
    assert build_messages(ctx(catalog)) == build_messages(ctx(catalog))


def test_api_key_from_env() -> None:
    assert api_key_from_env(None, {"OPENAI_API_KEY": "a"}) == "a"
    assert api_key_from_env(None, {"OPENAI_API_KEY": "a", "KTX_LLM_API_KEY": "b"}) == "b"
    assert api_key_from_env("http://127.0.0.1:8000/v1", {}) == "unused"
    with pytest.raises(KtxError, match="needs an API key"):
        api_key_from_env(None, {})
