"""Per-shape dispatch tables: shape bucket -> config, as JSON and as a C++ header.

Serving code calls one kernel at many shapes, and the best config differs between them (a
decode step with one token wants more blocks per row than a prefill with thousands). The table
maps a shape to the config tuned at the nearest measured shape: the *bucket variable* (the token
count, by default) is split into ranges at the geometric midpoints between tuned values, and
every other variable must match exactly. A shape whose other dimensions were never tuned gets
the original kernel.

The table never selects a config slower than the original at a measured shape: a tuned shape
whose best config did not beat the original by ``min_gain`` maps to the original, and a held-out
shape where the table's choice proved slower gets an exact entry for the original (the check that
found it is reported separately, before that repair).

>>> t = build_table("k", ("tokens", "d"), "tokens", [
...     Choice(ShapePoint((("tokens", 1), ("d", 64))), {"B": 32}, 1.0, 2.0),
...     Choice(ShapePoint((("tokens", 64), ("d", 64))), {"B": 256}, 1.0, 0.9)])
>>> [t.select({"tokens": n, "d": 64}) for n in (1, 7, 8, 4096)]
[{'B': 32}, {'B': 32}, None, None]
"""

from __future__ import annotations

import itertools
import json
import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ktx.search.space import config_key
from ktx.spec import ShapePoint


@dataclass(frozen=True)
class Choice:
    """The tuning result at one shape: best config and both times (objective metric)."""

    point: ShapePoint
    config: Mapping[str, int] | None  # None: nothing succeeded
    original_us: float | None
    best_us: float | None

    def wins(self, min_gain: float) -> bool:
        if self.config is None or self.best_us is None:
            return False
        if self.original_us is None:
            return True
        return self.best_us * (1.0 + min_gain) < self.original_us


@dataclass(frozen=True)
class Rule:
    """``fixed`` dims equal, ``lo <= bucket < hi`` (None: open); ``variant`` None is the original."""

    fixed: tuple[tuple[str, int], ...]
    lo: int | None
    hi: int | None
    variant: int | None
    measured_at: tuple[str, ...]
    exact: bool = False

    def matches(self, shape: Mapping[str, int], bucket_var: str) -> bool:
        if any(shape.get(k) != v for k, v in self.fixed):
            return False
        value = shape.get(bucket_var)
        if value is None:
            return False
        return (self.lo is None or value >= self.lo) and (self.hi is None or value < self.hi)


@dataclass(frozen=True)
class DispatchTable:
    kernel: str
    variables: tuple[str, ...]
    bucket_var: str
    variants: tuple[Mapping[str, int], ...]
    rules: tuple[Rule, ...]
    knobs: tuple[str, ...]
    defaults: Mapping[str, int]

    def rule_for(self, shape: Mapping[str, int]) -> Rule | None:
        """Exact entries first (held-out repairs), then ranges."""
        for exact in (True, False):
            for rule in self.rules:
                if rule.exact == exact and rule.matches(shape, self.bucket_var):
                    return rule
        return None

    def select(self, shape: Mapping[str, int]) -> dict[str, int] | None:
        """The config to run at ``shape``; None means the original kernel."""
        rule = self.rule_for(shape)
        if rule is None or rule.variant is None:
            return None
        return dict(self.variants[rule.variant])

    def with_exact_original(self, point: ShapePoint, why: str) -> DispatchTable:
        fixed = tuple((k, v) for k, v in point.values)
        rule = Rule(fixed, None, None, None, (f"{point.name} ({why})",), exact=True)
        return DispatchTable(
            self.kernel,
            self.variables,
            self.bucket_var,
            self.variants,
            (rule, *self.rules),
            self.knobs,
            self.defaults,
        )

    # -- serialisation -------------------------------------------------------------------------

    def to_dict(self) -> dict[str, Any]:
        return {
            "format": "ktx.dispatch/1",
            "kernel": self.kernel,
            "variables": list(self.variables),
            "bucket": self.bucket_var,
            "knobs": list(self.knobs),
            "defaults": dict(self.defaults),
            "variants": [dict(v) for v in self.variants],
            "rules": [
                {
                    "when": dict(r.fixed),
                    "range": [r.lo, r.hi],
                    "exact": r.exact,
                    "variant": r.variant,
                    "measured_at": list(r.measured_at),
                }
                for r in self.rules
            ],
            "fallback": "original",
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> DispatchTable:
        rules = tuple(
            Rule(
                tuple((str(k), int(v)) for k, v in r["when"].items()),
                r["range"][0],
                r["range"][1],
                r["variant"],
                tuple(r.get("measured_at", ())),
                bool(r.get("exact", False)),
            )
            for r in data["rules"]
        )
        return cls(
            str(data["kernel"]),
            tuple(data["variables"]),
            str(data["bucket"]),
            tuple({str(k): int(v) for k, v in variant.items()} for variant in data["variants"]),
            rules,
            tuple(data["knobs"]),
            {str(k): int(v) for k, v in data["defaults"].items()},
        )

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), indent=1) + "\n"

    def to_header(self) -> str:
        return header(self)


def choose_bucket_var(variables: Sequence[str], requested: str | None = None) -> str:
    if requested:
        return requested
    for name in ("tokens", "num_tokens", "batch", "m", "rows", "n"):
        if name in variables:
            return name
    return variables[0]


def _midpoint(a: int, b: int) -> int:
    """The geometric midpoint of two bucket values, rounded up, strictly above ``a``."""
    return max(a + 1, math.ceil(math.sqrt(a * b)))


def build_table(
    kernel: str,
    variables: Sequence[str],
    bucket_var: str,
    choices: Sequence[Choice],
    min_gain: float = 0.0,
    knobs: Sequence[str] = (),
    defaults: Mapping[str, int] | None = None,
) -> DispatchTable:
    """Ranges per group of equal other dimensions; neighbouring ranges with one choice merged."""
    variants: list[dict[str, int]] = []
    index: dict[str, int] = {}

    def variant_of(choice: Choice) -> int | None:
        if not choice.wins(min_gain) or choice.config is None:
            return None
        key = config_key(choice.config)
        if key not in index:
            index[key] = len(variants)
            variants.append(dict(choice.config))
        return index[key]

    groups: dict[tuple[tuple[str, int], ...], list[Choice]] = {}
    for choice in choices:
        fixed = tuple((k, v) for k, v in choice.point.values if k != bucket_var)
        groups.setdefault(fixed, []).append(choice)
    rules: list[Rule] = []
    for fixed in sorted(groups):
        members = sorted(groups[fixed], key=lambda c: c.point.as_dict()[bucket_var])
        values = [c.point.as_dict()[bucket_var] for c in members]
        bounds = [_midpoint(a, b) for a, b in itertools.pairwise(values)]
        for i, choice in enumerate(members):
            lo = None if i == 0 else bounds[i - 1]
            hi = None if i == len(members) - 1 else bounds[i]
            variant = variant_of(choice)
            if rules and rules[-1].fixed == fixed and rules[-1].variant == variant:
                last = rules[-1]
                rules[-1] = Rule(fixed, last.lo, hi, variant, (*last.measured_at, choice.point.name))
            else:
                rules.append(Rule(fixed, lo, hi, variant, (choice.point.name,)))
    names = tuple(knobs) or tuple(sorted({k for v in variants for k in v}))
    return DispatchTable(
        kernel, tuple(variables), bucket_var, tuple(variants), tuple(rules), names, dict(defaults or {})
    )


# -- C++ ---------------------------------------------------------------------------------------


def c_identifier(name: str) -> str:
    ident = re.sub(r"\W", "_", name)
    return ident if ident and not ident[0].isdigit() else f"k_{ident}"


def header(table: DispatchTable) -> str:
    """A self-contained header: ``ktx_dispatch_<kernel>(shape...)`` returns a config struct whose
    ``variant`` is -1 for the original kernel, else the index of the tuned variant."""
    k = c_identifier(table.kernel)
    struct = f"ktx_{k}_config"
    knobs = [c_identifier(n) for n in table.knobs]

    def value(variant: int | None) -> str:
        config = table.defaults if variant is None else table.variants[variant]
        fields = [str(-1 if variant is None else variant)] + [str(int(config.get(n, 0))) for n in table.knobs]
        return "{" + ", ".join(fields) + "}"

    lines = [
        f"// Dispatch table for {table.kernel}, generated by `ktx tune`. Do not edit; re-run the tune.",
        f"// Buckets split {table.bucket_var} at geometric midpoints between tuned shapes; other",
        "// dimensions must match a tuned shape exactly. variant -1 means: launch the original kernel",
        "// (the knob fields then hold the defaults and mean nothing).",
        "#pragma once",
        "#include <cstdint>",
        "",
        f"struct {struct} {{",
        "  int variant;",
        *[f"  int {n};" for n in knobs],
        "};",
        "",
    ]
    for i, variant in enumerate(table.variants):
        lines.append(f"// variant {i}: " + ", ".join(f"{n}={v}" for n, v in variant.items()))
    params = ", ".join(f"int64_t {c_identifier(v)}" for v in table.variables)
    lines += [f"inline {struct} ktx_dispatch_{k}({params}) {{"]
    lines += [f"  (void){c_identifier(v)};" for v in table.variables]
    bucket = c_identifier(table.bucket_var)
    for rule in table.rules:
        conds = [f"{c_identifier(n)} == {v}" for n, v in rule.fixed]
        if rule.lo is not None:
            conds.append(f"{bucket} >= {rule.lo}")
        if rule.hi is not None:
            conds.append(f"{bucket} < {rule.hi}")
        test = " && ".join(conds) or "true"
        note = ", ".join(rule.measured_at)
        lines.append(f"  if ({test}) return {value(rule.variant)};  // {note}")
    lines += [f"  return {value(None)};  // untuned shape: the original kernel", "}", ""]
    return "\n".join(lines)


def write_table(table: DispatchTable, folder: Path) -> tuple[Path, Path]:
    folder.mkdir(parents=True, exist_ok=True)
    js = folder / "dispatch.json"
    hh = folder / "dispatch.h"
    js.write_text(table.to_json())
    hh.write_text(table.to_header())
    return js, hh
