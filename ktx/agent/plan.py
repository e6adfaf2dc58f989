"""Plans: which passes a round applies, with which options and knob ranges, and why.

A plan is data, never code. Whatever proposes it (the rules planner or a language model), it
passes through :func:`validate_plan` before anything uses it: pass names must be registered,
options must be declared and of the declared kind, knob ranges must name knobs the pass
declares and hold integers, and conflicting passes may not meet. A model's answer that fails is
sent back with the list of problems (:class:`PlanError` carries them all at once, so the model
can fix every one in a single retry).

A plan's ``passes`` are the *whole* pipeline of the round, in order (keep a pass of the best
pipeline by listing it again). Knob ranges restrict a knob's domain to a subset; the knob's
default (the original behaviour) always stays in, so the original is always a candidate.

>>> from ktx.agent.catalog import Catalog, PassInfo, OptionInfo
>>> cat = Catalog.of([PassInfo("unroll", "unroll loops", (OptionInfo("max", "int", 8, "largest"),))])
>>> plan = validate_plan({"rationale": "r", "passes": [{"name": "unroll", "options": {"max": 4}}]}, cat)
>>> plan.pipeline
'unroll{max=4}'
"""

from __future__ import annotations

import difflib
import json
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from ktx.ir.errors import KtxError

from ktx.agent.catalog import Catalog, PassInfo, option_to_json
from ktx.passbase import Knob, OptionValue

#: Most passes a plan may list (a longer pipeline is a sign of a confused answer).
MAX_PASSES = 8
#: Longest rationale kept (characters); longer text is cut, not rejected.
MAX_TEXT = 2000
#: Characters an option string may not hold: they would change the pipeline text's structure.
_UNSAFE = re.compile(r"[,{}=|\n\r\0]")


class PlanError(KtxError):
    """A plan that does not fit the catalog; ``problems`` lists every reason."""

    def __init__(self, problems: Sequence[str]) -> None:
        self.problems = tuple(problems)
        super().__init__("invalid plan: " + "; ".join(self.problems))


@dataclass(frozen=True)
class PassChoice:
    """One pass of a plan: options (typed), knob ranges (name -> allowed values), and why."""

    name: str
    options: tuple[tuple[str, OptionValue], ...] = ()
    knobs: tuple[tuple[str, tuple[int, ...]], ...] = ()
    why: str = ""

    @property
    def text(self) -> str:
        """Pipeline text: ``name`` or ``name{key=value,...}``."""
        if not self.options:
            return self.name
        return f"{self.name}{{{','.join(f'{k}={format_option(v)}' for k, v in self.options)}}}"

    def to_json(self) -> dict[str, Any]:
        data: dict[str, Any] = {"name": self.name}
        if self.options:
            data["options"] = {k: option_to_json(v) for k, v in self.options}
        if self.knobs:
            data["knobs"] = {k: list(v) for k, v in self.knobs}
        if self.why:
            data["why"] = self.why
        return data


@dataclass(frozen=True)
class Plan:
    """A round's pipeline with the reasons; ``stop`` says the planner has nothing left to try.

    ``planner`` records who made it (``rules``, ``llm``, or ``rules (fallback: ...)``).
    """

    passes: tuple[PassChoice, ...]
    rationale: str
    stop: bool = False
    planner: str = "rules"

    @property
    def pipeline(self) -> str:
        return ",".join(p.text for p in self.passes)

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(p.name for p in self.passes)

    def knob_ranges(self) -> dict[str, tuple[int, ...]]:
        out: dict[str, tuple[int, ...]] = {}
        for p in self.passes:
            out.update(dict(p.knobs))
        return out

    def with_planner(self, planner: str) -> Plan:
        return replace(self, planner=planner)

    def to_json(self) -> dict[str, Any]:
        return {
            "passes": [p.to_json() for p in self.passes],
            "rationale": self.rationale,
            "stop": self.stop,
            "planner": self.planner,
            "pipeline": self.pipeline,
        }

    @staticmethod
    def from_json(data: Mapping[str, Any], catalog: Catalog | None = None) -> Plan:
        """Reload a logged plan; with a catalog it is validated again, else taken as it is."""
        planner = str(data.get("planner", "rules"))
        body = {k: v for k, v in data.items() if k in ("passes", "rationale", "stop")}
        if catalog is not None:
            return validate_plan(body, catalog).with_planner(planner)
        passes = tuple(
            PassChoice(
                str(p["name"]),
                tuple((str(k), _from_json_value(v)) for k, v in dict(p.get("options", {})).items()),
                tuple((str(k), tuple(int(x) for x in v)) for k, v in dict(p.get("knobs", {})).items()),
                str(p.get("why", "")),
            )
            for p in body.get("passes", [])
        )
        return Plan(passes, str(body.get("rationale", "")), bool(body.get("stop", False)), planner)


def _from_json_value(value: Any) -> OptionValue:
    if isinstance(value, list):
        if all(isinstance(v, int) and not isinstance(v, bool) for v in value):
            return tuple(int(v) for v in value)
        return tuple(str(v) for v in value)
    if isinstance(value, bool | int | str):
        return value
    return str(value)


def format_option(value: OptionValue) -> str:
    """Pipeline text of an option value (as :meth:`ktx.passbase.Option.format` writes it)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, tuple):
        return "|".join(str(v) for v in value)
    return str(value)


# -- validation --------------------------------------------------------------------------------


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _option_value(info_kind: str, value: Any) -> OptionValue | str:
    """The typed value, or a string saying what is wrong (a str result that is an error starts
    with ``!``, so that a valid ``str`` option is never mistaken for one)."""
    if info_kind == "int":
        return value if _is_int(value) else "!expects an integer"
    if info_kind == "bool":
        return value if isinstance(value, bool) else "!expects true or false"
    if info_kind == "str":
        if not isinstance(value, str) or not value.strip():
            return "!expects a non-empty string"
        if _UNSAFE.search(value) or len(value) > 200:
            return "!string must be short and hold none of , { } = | or newlines"
        return value.strip()
    if info_kind in ("ints", "strs"):
        items = value if isinstance(value, list) else None
        if isinstance(value, str):  # the pipeline's own a|b|c form
            items = [v.strip() for v in value.split("|") if v.strip()]
            if info_kind == "ints":
                try:
                    items = [int(v, 0) for v in items]
                except ValueError:
                    return "!expects a list of integers"
        if not items:
            return f"!expects a non-empty list of {'integers' if info_kind == 'ints' else 'strings'}"
        if info_kind == "ints":
            if not all(_is_int(v) for v in items):
                return "!expects a list of integers"
            return tuple(int(v) for v in items)
        if not all(isinstance(v, str) and v.strip() and not _UNSAFE.search(v) for v in items):
            return "!expects a list of plain strings (no , { } = |)"
        return tuple(str(v).strip() for v in items)
    return f"!has an unknown kind {info_kind}"


def _unknown(what: str, name: str, valid: Sequence[str]) -> str:
    close = difflib.get_close_matches(name, list(valid), n=1)
    hint = f" (did you mean {close[0]!r}?)" if close else ""
    return f"{what} {name!r} does not exist{hint}; valid: {', '.join(valid) or 'none'}"


def _text(value: Any, where: str, problems: list[str]) -> str:
    if value is None:
        return ""
    if not isinstance(value, str):
        problems.append(f"{where} must be a string")
        return ""
    return value.strip()[:MAX_TEXT]


def _check_pass(i: int, raw: Any, catalog: Catalog, problems: list[str]) -> PassChoice | None:
    where = f"passes[{i}]"
    if isinstance(raw, str):  # a bare name is accepted: {"name": raw}
        raw = {"name": raw}
    if not isinstance(raw, Mapping):
        problems.append(f"{where} must be an object with a name")
        return None
    extra = sorted(set(raw) - {"name", "options", "knobs", "why"})
    if extra:
        problems.append(f"{where} has unknown keys {extra}; allowed: name, options, knobs, why")
    name = raw.get("name")
    if not isinstance(name, str):
        problems.append(f"{where}.name must be a pass name")
        return None
    info = catalog.get(name)
    if info is None:
        problems.append(f"{where}: " + _unknown("pass", name, catalog.names))
        return None
    options = _check_options(where, raw.get("options"), info, problems)
    knobs = _check_knobs(where, raw.get("knobs"), info, problems)
    why = _text(raw.get("why"), f"{where}.why", problems)
    return PassChoice(name, options, knobs, why)


def _check_options(
    where: str, raw: Any, info: PassInfo, problems: list[str]
) -> tuple[tuple[str, OptionValue], ...]:
    if raw is None:
        return ()
    if not isinstance(raw, Mapping):
        problems.append(f"{where}.options must be an object of option -> value")
        return ()
    out: list[tuple[str, OptionValue]] = []
    for key, value in raw.items():
        opt = info.option(str(key))
        if opt is None:
            problems.append(
                f"{where}: pass {info.name}: " + _unknown("option", str(key), [o.name for o in info.options])
            )
            continue
        if value in ([], "") and opt.default == ():
            continue  # an empty list is the option's own default; pipeline text cannot spell it
        typed = _option_value(opt.kind, value)
        if isinstance(typed, str) and typed.startswith("!"):
            problems.append(f"{where}: option {info.name}.{opt.name} {typed[1:]}, got {json.dumps(value)}")
            continue
        out.append((opt.name, typed))
    return tuple(out)


def _check_knobs(
    where: str, raw: Any, info: PassInfo, problems: list[str]
) -> tuple[tuple[str, tuple[int, ...]], ...]:
    if raw is None:
        return ()
    if not isinstance(raw, Mapping):
        problems.append(f"{where}.knobs must be an object of knob -> list of integers")
        return ()
    out: list[tuple[str, tuple[int, ...]]] = []
    for key, values in raw.items():
        name = str(key)
        if info.knob_for(name) is None:
            problems.append(
                f"{where}: pass {info.name}: " + _unknown("knob", name, [k.name for k in info.knobs])
            )
            continue
        if not isinstance(values, list) or not values or not all(_is_int(v) for v in values):
            problems.append(
                f"{where}: knob {name} needs a non-empty list of integers, got {json.dumps(values)}"
            )
            continue
        if len(values) > 64:
            problems.append(f"{where}: knob {name} lists {len(values)} values (at most 64)")
            continue
        out.append((name, tuple(sorted({int(v) for v in values}))))
    return tuple(out)


def validate_plan(data: Any, catalog: Catalog) -> Plan:
    """A checked :class:`Plan` from parsed JSON, or :class:`PlanError` listing every problem."""
    problems: list[str] = []
    if not isinstance(data, Mapping):
        raise PlanError(["the answer must be a JSON object with keys rationale, passes, stop"])
    extra = sorted(set(data) - {"rationale", "passes", "stop"})
    if extra:
        problems.append(f"unknown top-level keys {extra}; allowed: rationale, passes, stop")
    rationale = _text(data.get("rationale"), "rationale", problems)
    if not rationale:
        problems.append("rationale must say why (a non-empty string)")
    stop = data.get("stop", False)
    if not isinstance(stop, bool):
        problems.append("stop must be true or false")
        stop = False
    raw_passes = data.get("passes", [])
    if not isinstance(raw_passes, list):
        problems.append("passes must be a list")
        raw_passes = []
    if not raw_passes and not stop:
        problems.append("passes is empty: list the pipeline, or set stop to true")
    if len(raw_passes) > MAX_PASSES:
        problems.append(f"passes lists {len(raw_passes)} passes (at most {MAX_PASSES})")
        raw_passes = raw_passes[:MAX_PASSES]
    choices: list[PassChoice] = []
    for i, raw in enumerate(raw_passes):
        choice = _check_pass(i, raw, catalog, problems)
        if choice is None:
            continue
        if any(c.name == choice.name for c in choices):
            problems.append(f"pass {choice.name!r} is listed twice")
            continue
        choices.append(choice)
    names = {c.name for c in choices}
    for c in choices:
        info = catalog.get(c.name)
        assert info is not None
        for other in info.conflicts:
            if other in names and c.name < other:
                problems.append(f"passes {c.name!r} and {other!r} conflict; keep one")
    if problems:
        raise PlanError(problems)
    return Plan(tuple(choices), rationale, stop)


# -- the JSON schema (shown to the model; the validation above is what is enforced) ------------


def plan_schema(catalog: Catalog) -> dict[str, Any]:
    """JSON Schema of an answer, generated from the catalog (pass names and their options)."""
    kinds: dict[str, dict[str, Any]] = {
        "int": {"type": "integer"},
        "bool": {"type": "boolean"},
        "str": {"type": "string"},
        "ints": {"type": "array", "items": {"type": "integer"}, "minItems": 1},
        "strs": {"type": "array", "items": {"type": "string"}, "minItems": 1},
    }
    variants = []
    for p in catalog.passes:
        variants.append(
            {
                "type": "object",
                "properties": {
                    "name": {"const": p.name},
                    "options": {
                        "type": "object",
                        "properties": {o.name: {**kinds[o.kind], "description": o.help} for o in p.options},
                        "additionalProperties": False,
                    },
                    "knobs": {
                        "type": "object",
                        "description": "knob name (or pattern) -> allowed values, a subset of its domain: "
                        + "; ".join(f"{k.name} in {k.domain}" for k in p.knobs),
                        "additionalProperties": {
                            "type": "array",
                            "items": {"type": "integer"},
                            "minItems": 1,
                        },
                    },
                    "why": {"type": "string"},
                },
                "required": ["name"],
                "additionalProperties": False,
            }
        )
    return {
        "type": "object",
        "properties": {
            "rationale": {"type": "string", "description": "why this pipeline, from the measurements"},
            "passes": {"type": "array", "maxItems": MAX_PASSES, "items": {"oneOf": variants}},
            "stop": {"type": "boolean", "description": "true when nothing promising is left to try"},
        },
        "required": ["rationale", "passes"],
        "additionalProperties": False,
    }


def extract_json(text: str) -> Any:
    """Parse a model's answer: bare JSON, or JSON inside a Markdown fence or surrounding prose.

    Raises ValueError with a message fit to send back to the model.
    """
    body = text.strip()
    fence = re.search(r"```(?:json)?\s*(.*?)```", body, re.S)
    if fence:
        body = fence.group(1).strip()
    elif not body.startswith("{"):
        start, end = body.find("{"), body.rfind("}")
        if start < 0 or end <= start:
            raise ValueError("the answer holds no JSON object")
        body = body[start : end + 1]
    try:
        return json.loads(body)
    except json.JSONDecodeError as exc:
        raise ValueError(
            f"the answer is not valid JSON ({exc.msg} at line {exc.lineno} column {exc.colno})"
        ) from None


# -- knob ranges against a template's real knobs -----------------------------------------------


@dataclass(frozen=True)
class Restriction:
    """The knobs after a plan's ranges were applied, and what did not fit."""

    knobs: tuple[Knob, ...]
    problems: tuple[str, ...] = ()
    applied: Mapping[str, tuple[int, ...]] = field(default_factory=dict)


def _range_matches(key: str, knob: Knob, owner: str, catalog: Catalog | None) -> bool:
    if key == knob.name:
        return True
    if catalog is None:
        return key.endswith("*") and knob.name.startswith(key[:-1])
    info = catalog.get(owner)
    spec = None if info is None else next((k for k in info.knobs if k.name == key or k.matches(key)), None)
    if key.endswith("*"):
        return knob.name.startswith(key[:-1])
    return spec is not None and spec.name == key and spec.pattern.match(knob.name) is not None


def restrict_knobs(knobs: Sequence[Knob], plan: Plan, catalog: Catalog | None = None) -> Restriction:
    """Apply a plan's knob ranges to a template's knobs.

    A range value outside the knob's domain is a problem (reported, so a model can be asked
    again); a range naming no knob of the template is one too. The default always stays in.
    """
    problems: list[str] = []
    applied: dict[str, tuple[int, ...]] = {}
    out: list[Knob] = []
    used: set[tuple[str, str]] = set()
    for knob in knobs:
        allowed: set[int] | None = None
        for choice in plan.passes:
            for key, values in choice.knobs:
                if choice.name != knob.pass_name or not _range_matches(key, knob, choice.name, catalog):
                    continue
                used.add((choice.name, key))
                outside = sorted(set(values) - set(knob.values))
                if outside:
                    problems.append(
                        f"knob {knob.name} of {choice.name}: values {outside} are outside its domain "
                        f"{list(knob.values)}"
                    )
                inside = set(values) & set(knob.values)
                allowed = inside if allowed is None else allowed & inside
        if allowed is None:
            out.append(knob)
            continue
        values = tuple(sorted(allowed | {knob.default}))
        applied[knob.name] = values
        out.append(replace(knob, values=values))
    for choice in plan.passes:
        for key, _ in choice.knobs:
            if (choice.name, key) not in used:
                names = [k.name for k in knobs if k.pass_name == choice.name]
                problems.append(
                    f"knob range {key} of {choice.name}: the template has no such knob "
                    f"(its knobs: {', '.join(names) or 'none'})"
                )
    return Restriction(tuple(out), tuple(problems), applied)


PlanCheck = Callable[[Plan], Sequence[str]]
"""A deeper check a caller can supply (template the plan, check knob ranges); returns problems."""
