"""What a planner may choose from: the registered passes, their options and knobs, as data.

Both planners read the same catalog. The rules planner checks that a pass it wants exists; the
LLM planner shows the catalog in its prompt and validates answers against it. Generating it from
the registry (never writing it by hand) keeps the prompt, the schema and the validation in step
with the passes that are really installed, plugins included.

>>> from ktx.registry import Registry
>>> Catalog.from_registry(Registry()).names
()
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from ktx.passbase import OptionKind, OptionValue, Phase
from ktx.registry import Registry


@dataclass(frozen=True)
class OptionInfo:
    """A pass option as a planner sees it: name, kind (int, bool, str, ints, strs), default."""

    name: str
    kind: OptionKind
    default: OptionValue
    help: str

    def to_json(self) -> dict[str, Any]:
        default: Any = list(self.default) if isinstance(self.default, tuple) else self.default
        return {"name": self.name, "kind": self.kind, "default": default, "help": self.help}


@dataclass(frozen=True)
class KnobInfo:
    """A knob a pass may create. ``name`` may be a pattern (``UNROLL_<loop>``); ``domain`` is prose."""

    name: str
    domain: str
    default: str
    help: str

    @property
    def pattern(self) -> re.Pattern[str]:
        """A regex matching the concrete knob names this declaration stands for."""
        parts = re.split(r"(<[^<>]*>)", self.name)
        body = "".join("[A-Z0-9_]+" if p.startswith("<") else re.escape(p) for p in parts)
        return re.compile(f"^{body}$")

    def matches(self, name: str) -> bool:
        """Whether ``name`` (a concrete knob, the pattern itself, or ``STEM_*``) belongs here."""
        if name == self.name or self.pattern.match(name):
            return True
        if name.endswith("*"):
            stem = name[:-1]
            return self.name.startswith(stem) or bool(self.pattern.match(stem + "X"))
        return False

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "domain": self.domain, "default": self.default, "help": self.help}


@dataclass(frozen=True)
class PassInfo:
    """One registered pass: what it does, what it accepts, how it orders against others."""

    name: str
    summary: str
    options: tuple[OptionInfo, ...] = ()
    knobs: tuple[KnobInfo, ...] = ()
    requires: tuple[str, ...] = ()
    after: tuple[str, ...] = ()
    conflicts: tuple[str, ...] = ()
    phase: Phase | None = None
    """What kind of change the pass makes: the rules planner tries passes in phase order."""

    def option(self, name: str) -> OptionInfo | None:
        return next((o for o in self.options if o.name == name), None)

    def knob_for(self, name: str) -> KnobInfo | None:
        return next((k for k in self.knobs if k.matches(name)), None)

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "summary": self.summary,
            "options": [o.to_json() for o in self.options],
            "knobs": [k.to_json() for k in self.knobs],
            "requires": list(self.requires),
            "after": list(self.after),
            "conflicts": list(self.conflicts),
        }


@dataclass(frozen=True)
class Catalog:
    """The passes a planner may use, sorted by name."""

    passes: tuple[PassInfo, ...]

    @staticmethod
    def from_registry(registry: Registry) -> Catalog:
        infos = []
        for cls in registry:
            infos.append(
                PassInfo(
                    cls.name,
                    cls.summary,
                    tuple(OptionInfo(o.name, o.kind, o.default, o.help) for o in cls.options),
                    tuple(KnobInfo(k.name, k.domain, k.default, k.help) for k in cls.knobs),
                    tuple(cls.requires),
                    tuple(cls.after),
                    tuple(cls.conflicts),
                    cls.phase,
                )
            )
        return Catalog(tuple(sorted(infos, key=lambda p: p.name)))

    @staticmethod
    def of(passes: Iterable[PassInfo]) -> Catalog:
        return Catalog(tuple(sorted(passes, key=lambda p: p.name)))

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(p.name for p in self.passes)

    def get(self, name: str) -> PassInfo | None:
        return next((p for p in self.passes if p.name == name), None)

    def __contains__(self, name: object) -> bool:
        return any(p.name == name for p in self.passes)

    def to_json(self) -> list[dict[str, Any]]:
        return [p.to_json() for p in self.passes]

    def text(self) -> str:
        """A compact, line-oriented description for prompts and ``--help``-style listings."""
        lines: list[str] = []
        for p in self.passes:
            lines.append(f"- {p.name}: {p.summary}")
            for o in p.options:
                default = _default_text(o.default)
                lines.append(f"    option {o.name} ({o.kind}, default {default}): {o.help}")
            for k in p.knobs:
                lines.append(f"    knob {k.name}: values {k.domain}; default {k.default}; {k.help}")
            for what, names in (("requires", p.requires), ("after", p.after), ("conflicts", p.conflicts)):
                if names:
                    lines.append(f"    {what}: {', '.join(names)}")
        return "\n".join(lines)


def _default_text(value: OptionValue) -> str:
    """An option default as the JSON answer would write it (``true``, ``[2, 4]``, ``none``)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, tuple):
        return "[" + ", ".join(str(v) for v in value) + "]" if value else "none (empty list)"
    return str(value)


def option_to_json(value: OptionValue) -> Any:
    """JSON form of an option value (tuples become lists)."""
    return list(value) if isinstance(value, tuple) else value


def options_to_json(options: Mapping[str, OptionValue]) -> dict[str, Any]:
    return {k: option_to_json(v) for k, v in options.items()}
