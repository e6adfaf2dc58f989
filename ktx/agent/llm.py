"""The LLM planner: a language model proposes the round's pipeline as JSON; ktx checks it.

The model sees the kernel's IR summary, the measurements and their analysis, every registered
pass with its options and knobs (generated from the registry), what each pass would do to the
kernel right now (the probes) and the earlier rounds. It answers with one JSON object that
:func:`ktx.agent.plan.validate_plan` checks against the registry (and the loop's deeper check
against the real template: knob ranges inside the knobs' domains). An invalid answer is sent
back with the list of problems, at most ``max_attempts`` questions in all, HTTP errors and
timeouts included; then the planner falls back to the rules planner and says why. A round in
which the model never answered at all (every attempt an HTTP error, a timeout or a refused
connection) is different: the endpoint, the key or the model name is wrong, and quietly planning
with the rules would pass off a rules run as an LLM run. Such a round is a stop saying so,
unless ``fallback_unanswered`` (``--llm-fallback``) lets the rules plan it.

**Nothing the model returns is executed or compiled as code**: it can only name registered
passes, set their declared options to values of the declared kinds, and narrow knob domains.

Answers are cached by a hash of (model, messages, temperature), in a JSON Lines file: a run
replayed with the same cache and the same measurements (``--backend replay:FILE``) asks the
model nothing and makes the same decisions. Tokens are counted per attempt and per round.
"""

from __future__ import annotations

import hashlib
import json
import os
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from ktx.ir.errors import KtxError, Location

from ktx.agent.plan import Plan, PlanError, extract_json, plan_schema, validate_plan
from ktx.agent.planner import Attempt, PlanContext, Planner, PlanOutcome, Usage, checked
from ktx.records import check_schema, schema_of

Message = dict[str, str]

SYSTEM = (
    "You plan optimisation rounds for one CUDA kernel in ktx, a source-to-source optimiser. ktx "
    "changes kernels only through registered passes; each pass exposes knobs (block size, vector "
    "width, unroll factor, ...) whose values a search then tunes on a real GPU, verifying every "
    "candidate against the original kernel. You choose the pipeline of passes for the next round "
    "from the measurements. Prefer passes that address what bounds the kernel. Answer with exactly "
    "one JSON object that follows the schema; no prose outside it and no code: nothing you write "
    "is ever compiled or run."
)


class ChatError(Exception):
    """A request that produced no answer (HTTP error, timeout, connection refused)."""


@dataclass(frozen=True)
class ChatReply:
    text: str
    prompt_tokens: int = 0
    completion_tokens: int = 0


class ChatClient(Protocol):
    """One chat completion; raises :class:`ChatError` when there is no answer."""

    def complete(self, model: str, messages: Sequence[Message], temperature: float) -> ChatReply: ...


class OpenAIChat:
    """:class:`ChatClient` over the ``openai`` package, against any OpenAI-compatible base URL.

    The client's own retries are off: every question counts as one attempt of the planner, so
    that the bound on questions is the planner's, and each is logged.
    """

    def __init__(self, base_url: str | None, api_key: str, timeout_s: float = 60.0) -> None:
        try:
            import openai
        except ImportError:
            raise KtxError(
                "the llm planner needs the openai package", None, "pip install 'ktx[llm]'"
            ) from None
        self._openai = openai
        self._client = openai.OpenAI(base_url=base_url, api_key=api_key, timeout=timeout_s, max_retries=0)
        self.timeout_s = timeout_s
        #: Where the questions go, for the message when none is answered.
        self.endpoint = str(self._client.base_url)

    def complete(self, model: str, messages: Sequence[Message], temperature: float) -> ChatReply:
        openai = self._openai
        payload: Any = [dict(m) for m in messages]
        try:
            resp = self._client.chat.completions.create(
                model=model, messages=payload, temperature=temperature
            )
        except openai.APITimeoutError:
            raise ChatError(f"no answer within {self.timeout_s:g} s") from None
        except openai.APIStatusError as exc:
            raise ChatError(f"HTTP {exc.status_code}: {str(exc.message)[:200]}") from None
        except openai.APIError as exc:
            raise ChatError(f"{type(exc).__name__}: {str(exc)[:200]}") from None
        text = ""
        if resp.choices and resp.choices[0].message.content is not None:
            text = resp.choices[0].message.content
        usage = resp.usage
        return ChatReply(
            text,
            0 if usage is None else int(usage.prompt_tokens or 0),
            0 if usage is None else int(usage.completion_tokens or 0),
        )


def api_key_from_env(base_url: str | None, environ: Mapping[str, str] | None = None) -> str:
    """``KTX_LLM_API_KEY``, else ``OPENAI_API_KEY``; a local server (``--base-url``) may need none."""
    env = os.environ if environ is None else environ
    for name in ("KTX_LLM_API_KEY", "OPENAI_API_KEY"):
        if env.get(name):
            return env[name]
    if base_url:
        return "unused"  # OpenAI-compatible local servers accept any key; the client insists on one
    raise KtxError(
        "the llm planner needs an API key",
        None,
        "set OPENAI_API_KEY (or KTX_LLM_API_KEY), or give --base-url of a local server",
    )


# -- the answer cache --------------------------------------------------------------------------


def prompt_hash(model: str, messages: Sequence[Message], temperature: float) -> str:
    blob = json.dumps(
        {"model": model, "messages": list(messages), "temperature": temperature}, sort_keys=True
    )
    return hashlib.sha256(blob.encode()).hexdigest()


@dataclass(frozen=True)
class CachedAnswer:
    text: str
    prompt_tokens: int
    completion_tokens: int


class AnswerCache:
    """Prompt hash -> answer, in memory and (with a path) appended to a JSON Lines file."""

    def __init__(self, path: Path | None) -> None:
        self.path = path
        self._lock = threading.Lock()
        self._entries: dict[str, CachedAnswer] = {}
        if path is not None and path.exists():
            for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
                try:
                    row = json.loads(line)
                    if isinstance(row, dict):
                        check_schema(row, "llm-cache", Location(str(path), number, 1))
                    self._entries[str(row["key"])] = CachedAnswer(
                        str(row["text"]),
                        int(row.get("prompt_tokens", 0)),
                        int(row.get("completion_tokens", 0)),
                    )
                except (ValueError, KeyError, TypeError):
                    continue  # a torn last line

    def __len__(self) -> int:
        return len(self._entries)

    def get(self, key: str) -> CachedAnswer | None:
        with self._lock:
            return self._entries.get(key)

    def put(self, key: str, answer: CachedAnswer, model: str, messages: Sequence[Message]) -> None:
        with self._lock:
            self._entries[key] = answer
            if self.path is None:
                return
            row = {
                "schema": schema_of("llm-cache"),
                "key": key,
                "model": model,
                "text": answer.text,
                "prompt_tokens": answer.prompt_tokens,
                "completion_tokens": answer.completion_tokens,
                "messages": list(messages),
            }
            self.path.parent.mkdir(parents=True, exist_ok=True)
            with self.path.open("a", encoding="utf-8") as handle:
                handle.write(json.dumps(row, separators=(",", ":")) + "\n")


# -- the prompt --------------------------------------------------------------------------------


def build_messages(context: PlanContext) -> list[Message]:
    """The first question of a round (deterministic: same context, same bytes)."""
    a = context.analysis
    probes = "\n".join(f"- {p.text()}" for p in context.probes) or "(not probed)"
    history = "\n".join(f"- {h.text()}" for h in context.history) or "(none: this is the first round)"
    current = context.current.pipeline or "(none: the original kernel)"
    schema = json.dumps(plan_schema(context.catalog), separators=(",", ":"))
    example = json.dumps(
        {
            "rationale": "memory-bound with scalar loads at every shape; vectorize first",
            "passes": [{"name": "<pass>", "options": {}, "knobs": {}, "why": "<reason>"}],
            "stop": False,
        }
    )
    user = "\n\n".join(
        [
            f"# Kernel `{context.kernel}` (IR summary)\n{a.facts.text()}",
            f"# Measurements of the best pipeline so far: `{current}`\n{a.text()}",
            f"# Passes available\n{context.catalog.text()}",
            f"# What each pass would do if added to the best pipeline now\n{probes}",
            f"# Earlier rounds\n{history}",
            "# Task\n"
            f"This is round {context.round}; {context.rounds_left} round(s) remain after it. Give the "
            "complete pipeline for this round, in order: repeat the passes of the best pipeline that "
            "you want to keep, then add or change passes. Options must be declared by the pass and of "
            "its kind. `knobs` may narrow a knob to a subset of its domain (the lines above give the "
            "domains); the knob's default always stays in. Passes that did not apply or gave no gain in "
            'earlier rounds are unlikely to help again. Set "stop": true when nothing is worth trying.',
            f"# Answer: one JSON object following this JSON Schema\n{schema}\nFor example: {example}",
        ]
    )
    return [{"role": "system", "content": SYSTEM}, {"role": "user", "content": user}]


def retry_message(problems: str) -> Message:
    return {
        "role": "user",
        "content": f"That answer cannot be used: {problems}. "
        "Answer again with one corrected JSON object only.",
    }


# -- the planner -------------------------------------------------------------------------------


class LLMPlanner:
    """Plans with a model; validates; re-asks a bounded number of times; falls back to ``fallback``."""

    def __init__(
        self,
        client: ChatClient,
        model: str,
        fallback: Planner,
        cache: AnswerCache | None = None,
        max_attempts: int = 3,
        temperature: float = 0.0,
        fallback_unanswered: bool = False,
    ) -> None:
        if max_attempts < 1:
            raise KtxError("the llm planner needs at least one attempt")
        self.fallback_unanswered = fallback_unanswered
        self.client = client
        self.model = model
        self.fallback = fallback
        self.cache = cache if cache is not None else AnswerCache(None)
        self.max_attempts = max_attempts
        self.temperature = temperature

    @property
    def name(self) -> str:
        return "llm"

    def _ask(self, messages: list[Message], number: int) -> tuple[str | None, Attempt]:
        key = prompt_hash(self.model, messages, self.temperature)
        start = time.monotonic()
        cached = self.cache.get(key)
        if cached is not None:
            return cached.text, Attempt(number, key, "cache", True, usage=Usage(cache_hits=1))
        try:
            reply = self.client.complete(self.model, messages, self.temperature)
        except ChatError as exc:
            return None, Attempt(
                number, key, "error", False, str(exc), time.monotonic() - start, Usage(requests=1)
            )
        usage = Usage(reply.prompt_tokens, reply.completion_tokens, requests=1)
        self.cache.put(
            key, CachedAnswer(reply.text, reply.prompt_tokens, reply.completion_tokens), self.model, messages
        )
        return reply.text, Attempt(number, key, "http", True, seconds=time.monotonic() - start, usage=usage)

    def plan(self, context: PlanContext) -> PlanOutcome:
        messages = build_messages(context)
        attempts: list[Attempt] = []
        usage = Usage()
        last_error = ""
        for number in range(1, self.max_attempts + 1):
            text, attempt = self._ask(messages, number)
            usage = usage + attempt.usage
            if text is None:
                attempts.append(attempt)
                last_error = attempt.error
                continue
            try:
                plan = validate_plan(extract_json(text), context.catalog)
                problems = checked(plan, context)
                if problems:
                    raise PlanError(problems)
            except (ValueError, PlanError) as exc:
                problems_text = "; ".join(exc.problems) if isinstance(exc, PlanError) else str(exc)
                attempts.append(Attempt(number, attempt.prompt_hash, attempt.source, False, problems_text,
                                        attempt.seconds, attempt.usage))  # fmt: skip
                last_error = problems_text
                messages = [*messages, {"role": "assistant", "content": text}, retry_message(problems_text)]
                continue
            attempts.append(attempt)
            return PlanOutcome(plan.with_planner("llm"), tuple(attempts), usage)
        reason = f"no valid plan in {self.max_attempts} attempt(s); last: {last_error[:300]}"
        unanswered = ""
        if all(a.source == "error" for a in attempts):
            endpoint = getattr(self.client, "endpoint", "its endpoint")
            unanswered = (
                f"no answer from model {self.model!r} at {endpoint} in {self.max_attempts} attempt(s); "
                f"last: {last_error[:300]}"
            )
            if not self.fallback_unanswered:
                stop = Plan(context.current.passes, unanswered, stop=True, planner="llm (no answer)")
                return PlanOutcome(stop, tuple(attempts), usage, unanswered=unanswered)
            reason = unanswered
        fallback = self.fallback.plan(context)
        plan = fallback.plan.with_planner(f"{self.fallback.name} (fallback)")
        return PlanOutcome(plan, tuple(attempts), usage + fallback.usage, reason, unanswered)
