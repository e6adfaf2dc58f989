"""Per-shape dispatch tables: shape bucket -> config, as JSON and as a C++ header.

Serving code calls one kernel at many shapes, and the best config differs between them (a
decode step with one token wants more blocks per row than a prefill with thousands). The table
maps a shape to the config tuned at the nearest measured shape: the *bucket variable* (the token
count, by default) is split into ranges at the geometric midpoints between tuned values, and
every other variable must match exactly. A shape whose other dimensions were never tuned gets
the original kernel.

The table never selects a config slower than the original at a measured shape: a tuned shape
whose best config did not beat the original by ``min_gain`` (by default: by more than the
measured spread of the two timings, at least 1%) maps to the original, and a held-out
shape where the table's choice proved slower gets an exact entry for the original (the check that
found it is reported separately, before that repair).

A config is only valid where the template's *constraints* hold (``tokens % ROWS == 0``, a
vector width that divides ``d``), and a range bucket covers shapes nobody measured: the table
carries the constraints (and the spec's derived variables they may name), :meth:`select` falls
back to the original wherever the chosen config breaks one, and the C++ header checks the same
guards before returning a variant.

>>> t = build_table("k", ("tokens", "d"), "tokens", [
...     Choice(ShapePoint((("tokens", 1), ("d", 64))), {"ROWS": 1}, 2.0, 1.0),
...     Choice(ShapePoint((("tokens", 64), ("d", 64))), {"ROWS": 4}, 2.0, 1.0),
...     Choice(ShapePoint((("tokens", 4096), ("d", 64))), {"ROWS": 8}, 1.0, 1.1)],
...     constraints=["tokens % ROWS == 0"])
>>> [t.select({"tokens": n, "d": 64}) for n in (1, 7, 8, 64, 66, 4096)]
[{'ROWS': 1}, {'ROWS': 1}, {'ROWS': 4}, {'ROWS': 4}, None, None]
"""

from __future__ import annotations

import ast
import itertools
import json
import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ktx.ir.errors import KtxError
from ktx.ir.expr import Expr, Value

from ktx.measure.types import config_key
from ktx.spec import ShapePoint

#: The least gain the table trusts when ``min_gain`` is left to the noise: 1%.
MIN_NOISE = 0.01


@dataclass(frozen=True)
class Choice:
    """The tuning result at one shape: best config and both times (objective metric)."""

    point: ShapePoint
    config: Mapping[str, int] | None  # None: nothing succeeded
    original_us: float | None
    best_us: float | None
    noise: float = 0.0  # relative spread (p90 - p10) / median of the two timings, the larger
    #: The paired final check's decision (:mod:`ktx.search.paired`): True or False overrides
    #: the rule on the search's numbers; None (not re-measured, e.g. a replay) keeps that rule.
    verdict: bool | None = None

    def threshold(self, min_gain: float | None) -> float:
        """The gain a config needs: ``min_gain`` when given, else the measured noise (at least
        :data:`MIN_NOISE`): a win smaller than the spread of the timings is not a win."""
        return min_gain if min_gain is not None else max(MIN_NOISE, self.noise)

    def wins(self, min_gain: float | None = None) -> bool:
        if self.config is None:
            return False
        if self.verdict is not None:
            return self.verdict
        if self.best_us is None:
            return False
        if self.original_us is None:
            return True
        return self.best_us * (1.0 + self.threshold(min_gain)) < self.original_us


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
        value = shape.get(bucket_var) if bucket_var else 0  # "": a spec without variables
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
    constraints: tuple[str, ...] = ()  # over shape variables, derived variables and knobs
    derived: tuple[tuple[str, str], ...] = ()  # the spec's derived variables, in order

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
        if self.broken(rule.variant, shape):
            return None
        return dict(self.variants[rule.variant])

    def broken(self, variant: int, shape: Mapping[str, int]) -> tuple[str, ...]:
        """The constraints variant ``variant`` breaks at ``shape`` (one that cannot be evaluated
        there, e.g. a division by zero, counts as broken: the original is the safe answer)."""
        env: dict[str, Value] = dict(shape)
        try:
            for name, text in self.derived:
                env[name] = Expr.parse(text).evaluate(env)
        except KtxError:
            return ("derived variables",) if self.constraints else ()
        env.update(self.defaults)
        env.update(self.variants[variant])
        out: list[str] = []
        for text in self.constraints:
            expr = Expr.parse(text)
            try:
                ok = expr.names <= env.keys() and expr.evaluate_bool(env)
            except KtxError:
                ok = False
            if not ok:
                out.append(text)
        return tuple(out)

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
            self.constraints,
            self.derived,
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
            "constraints": list(self.constraints),
            "derived": [[n, t] for n, t in self.derived],
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
            tuple(str(c) for c in data.get("constraints", ())),
            tuple((str(n), str(t)) for n, t in data.get("derived", ())),
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
    # a spec whose sizes are all fixed (cuda-samples' vectorAdd) has one point and no variable
    # to bucket on: "" stands for it, and every lookup of it reads 0
    return variables[0] if variables else ""


def _midpoint(a: int, b: int) -> int:
    """The geometric midpoint of two bucket values, rounded up, strictly above ``a``."""
    return max(a + 1, math.ceil(math.sqrt(a * b)))


def build_table(
    kernel: str,
    variables: Sequence[str],
    bucket_var: str,
    choices: Sequence[Choice],
    min_gain: float | None = None,
    knobs: Sequence[str] = (),
    defaults: Mapping[str, int] | None = None,
    constraints: Sequence[Expr | str] = (),
    derived: Sequence[tuple[str, Expr | str]] = (),
) -> DispatchTable:
    """Ranges per group of equal other dimensions; neighbouring ranges with one choice merged.

    A shape's best config is used where it beats the original by ``min_gain``; None (the
    default) takes each shape's measured noise instead (:meth:`Choice.threshold`).

    ``constraints`` (the knob space's, over knobs and shape variables) and ``derived`` (the
    spec's derived variables) guard every lookup: a bucket's config is used only at the shapes
    where it satisfies them. A constraint naming anything else is left out, as
    :meth:`ktx.search.space.Space.violations` leaves it to the harness."""
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
        members = sorted(groups[fixed], key=lambda c: c.point.as_dict().get(bucket_var, 0))
        values = [c.point.as_dict().get(bucket_var, 0) for c in members]
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
    derived_texts = tuple((str(n), e.text.strip() if isinstance(e, Expr) else str(e)) for n, e in derived)
    known = {*variables, *(n for n, _ in derived_texts), *names, *(defaults or {})}
    guards: list[str] = []
    for c in constraints:
        expr = c if isinstance(c, Expr) else Expr.parse(c)
        if expr.names <= known and expr.text.strip() not in guards:
            guards.append(expr.text.strip())
    return DispatchTable(
        kernel, tuple(variables), bucket_var, tuple(variants), tuple(rules), names, dict(defaults or {}),
        tuple(guards), derived_texts,
    )  # fmt: skip


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
    args = ", ".join(c_identifier(v) for v in table.variables)
    if table.constraints:
        lines += ["", *_HELPERS, ""]
        lines.append("// Guards: the template's constraints, which a variant must satisfy at the shape")
        lines.append("// (a range covers shapes nobody measured); when one fails, the original runs.")
        for i, variant in enumerate(table.variants):
            env = {**table.defaults, **variant}
            lines.append(f"inline bool ktx_{k}_guard_{i}({params}) {{")
            lines += [f"  (void){c_identifier(v)};" for v in table.variables]
            for name, text in table.derived:
                lines.append(f"  const auto {c_identifier(name)} = {to_cpp(Expr.parse(text), {})};")
                lines.append(f"  (void){c_identifier(name)};")
            conds = [f"({to_cpp(Expr.parse(c), env)})" for c in table.constraints]
            lines += [f"  return {' && '.join(conds)};  // " + "; ".join(table.constraints), "}"]
        lines.append("")
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
        if rule.variant is not None and table.constraints:
            guard = f"ktx_{k}_guard_{rule.variant}({args})"
            lines.append(f"  if ({test}) {{  // {note}")
            lines.append(f"    if ({guard}) return {value(rule.variant)};")
            lines.append(f"    return {value(None)};  // a constraint fails here: the original")
            lines.append("  }")
        else:
            lines.append(f"  if ({test}) return {value(rule.variant)};  // {note}")
    lines += [f"  return {value(None)};  // untuned shape: the original kernel", "}", ""]
    return "\n".join(lines)


#: Python's semantics for the operators C++ spells differently (floor division, modulo, powers).
_HELPERS = (
    "#ifndef KTX_DISPATCH_HELPERS",
    "#define KTX_DISPATCH_HELPERS",
    "#include <cmath>",
    "#include <type_traits>",
    "template <class A, class B> inline auto ktx_floordiv(A a, B b) {",
    "  if constexpr (std::is_integral_v<A> && std::is_integral_v<B>) {",
    "    if (b == 0) return static_cast<decltype(a / b)>(0);",
    "    auto q = a / b;",
    "    if ((a % b != 0) && ((a < 0) != (b < 0))) --q;",
    "    return q;",
    "  } else {",
    "    return std::floor(static_cast<double>(a) / static_cast<double>(b));",
    "  }",
    "}",
    "template <class A, class B> inline auto ktx_mod(A a, B b) {",
    "  if constexpr (std::is_integral_v<A> && std::is_integral_v<B>) {",
    "    if (b == 0) return static_cast<decltype(a % b)>(1);  // never divisible: the guard fails",
    "    auto r = a % b;",
    "    if (r != 0 && ((r < 0) != (b < 0))) r += b;",
    "    return r;",
    "  } else {",
    "    double x = static_cast<double>(a), y = static_cast<double>(b);",
    "    return x - y * std::floor(x / y);",
    "  }",
    "}",
    "template <class A, class B> inline auto ktx_ceil_div(A a, B b) { return -ktx_floordiv(-a, b); }",
    "template <class A, class B> inline auto ktx_pow(A a, B b) {",
    "  if constexpr (std::is_integral_v<A> && std::is_integral_v<B>) {",
    "    int64_t r = 1;",
    "    for (B i = 0; i < b; ++i) r *= a;",
    "    return r;",
    "  } else {",
    "    return std::pow(static_cast<double>(a), static_cast<double>(b));",
    "  }",
    "}",
    "template <class A> inline auto ktx_log2(A a) {",
    "  if constexpr (std::is_integral_v<A>) {",
    "    if (a > 0 && (a & (a - 1)) == 0) {",
    "      int64_t n = 0;",
    "      while (a > 1) { a >>= 1; ++n; }",
    "      return static_cast<double>(n);",
    "    }",
    "  }",
    "  return std::log2(static_cast<double>(a));",
    "}",
    "template <class A> inline auto ktx_abs(A a) { return a < 0 ? -a : a; }",
    "template <class A> inline auto ktx_min(A a) { return a; }",
    "template <class A, class... R> inline auto ktx_min(A a, R... r) {",
    "  auto b = ktx_min(r...);",
    "  return b < a ? static_cast<std::common_type_t<A, decltype(b)>>(b) : a;",
    "}",
    "template <class A> inline auto ktx_max(A a) { return a; }",
    "template <class A, class... R> inline auto ktx_max(A a, R... r) {",
    "  auto b = ktx_max(r...);",
    "  return b > a ? static_cast<std::common_type_t<A, decltype(b)>>(b) : a;",
    "}",
    "#endif",
)

_CPP_BINOPS = {ast.Add: "+", ast.Sub: "-", ast.Mult: "*"}
_CPP_CMPOPS = {ast.Eq: "==", ast.NotEq: "!=", ast.Lt: "<", ast.LtE: "<=", ast.Gt: ">", ast.GtE: ">="}


def to_cpp(expr: Expr, constants: Mapping[str, int]) -> str:
    """``expr`` as a C++ expression: names in ``constants`` (a variant's knob values) become
    literals, the others stay variables (``int64_t`` shape variables, derived locals). Floor
    division, modulo and powers keep Python's meaning through the header's helpers.

    >>> to_cpp(Expr.parse("tokens % ROWS == 0 and d // 8 >= 1"), {"ROWS": 4})
    '(ktx_mod(tokens, int64_t(4)) == int64_t(0)) && (ktx_floordiv(d, int64_t(8)) >= int64_t(1))'
    >>> to_cpp(Expr.parse("0 < d <= 8"), {})
    '(int64_t(0) < d) && (d <= int64_t(8))'
    """

    def lit(v: Value) -> str:
        if isinstance(v, bool):
            return "true" if v else "false"
        if isinstance(v, int):
            return f"int64_t({v})"
        return repr(float(v))

    def go(node: ast.expr) -> str:
        if isinstance(node, ast.Constant):
            assert isinstance(node.value, int | float)  # Expr.parse allows nothing else
            return lit(node.value)
        if isinstance(node, ast.Name):
            if node.id in constants:
                return lit(int(constants[node.id]))
            if node.id in ("True", "true"):
                return "true"
            if node.id in ("False", "false"):
                return "false"
            return c_identifier(node.id)
        if isinstance(node, ast.BinOp):
            a, b = go(node.left), go(node.right)
            if type(node.op) in _CPP_BINOPS:
                return f"({a} {_CPP_BINOPS[type(node.op)]} {b})"
            if isinstance(node.op, ast.Div):
                return f"(static_cast<double>({a}) / static_cast<double>({b}))"
            name = {ast.FloorDiv: "ktx_floordiv", ast.Mod: "ktx_mod", ast.Pow: "ktx_pow"}[type(node.op)]
            return f"{name}({a}, {b})"
        if isinstance(node, ast.UnaryOp):
            sign = "!" if isinstance(node.op, ast.Not) else "-" if isinstance(node.op, ast.USub) else "+"
            return f"({sign}{go(node.operand)})"
        if isinstance(node, ast.BoolOp):
            joiner = " && " if isinstance(node.op, ast.And) else " || "
            return "(" + joiner.join(go(v) for v in node.values) + ")"
        if isinstance(node, ast.Compare):
            parts: list[str] = []
            left = go(node.left)
            for op, right_node in zip(node.ops, node.comparators, strict=True):
                right = go(right_node)
                parts.append(f"({left} {_CPP_CMPOPS[type(op)]} {right})")
                left = right
            return parts[0] if len(parts) == 1 else "(" + " && ".join(parts) + ")"
        if isinstance(node, ast.IfExp):
            return f"(static_cast<bool>({go(node.test)}) ? {go(node.body)} : {go(node.orelse)})"
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
            args = [go(a) for a in node.args]
            fn = node.func.id
            if fn in ("ceil", "floor"):
                return f"static_cast<int64_t>(std::{fn}(static_cast<double>({args[0]})))"
            if fn == "pow2":
                return f"(int64_t(1) << ({args[0]}))"
            name = {"cdiv": "ceil_div"}.get(fn, fn)
            return f"ktx_{name}({', '.join(args)})"
        raise KtxError(f"cannot write {ast.unparse(node)!r} as C++")

    text = go(expr._tree)
    if text.startswith("(") and text.endswith(")") and _balanced(text[1:-1]):
        text = text[1:-1]
    return text


def _balanced(text: str) -> bool:
    depth = 0
    for ch in text:
        depth += {"(": 1, ")": -1}.get(ch, 0)
        if depth < 0:
            return False
    return depth == 0


def write_table(table: DispatchTable, folder: Path) -> tuple[Path, Path]:
    folder.mkdir(parents=True, exist_ok=True)
    js = folder / "dispatch.json"
    hh = folder / "dispatch.h"
    js.write_text(table.to_json())
    hh.write_text(table.to_header())
    return js, hh
