"""``ktx.toml``: what a kernel takes, on which shapes to run it, and how to judge it.

A spec is data a person writes next to ``kernel.cu``. It is loaded with ``tomllib`` and
validated into frozen dataclasses; every mistake (unknown key, wrong type, bad expression,
missing argument) raises :class:`~ktx.ir.errors.KtxError` naming the key and its line, found by
:mod:`ktx.tomlpos`. The schema is documented in ``docs/spec.md``. :func:`ktx.specload.load_spec`
reads a kernel folder's spec and adds the refusals that read the source (it stands above the
modules that import this one, so that this one imports none of them).

>>> spec = load_spec("kernels/silu_and_mul")          # doctest: +SKIP
>>> point = spec.shape_set().points[0]                 # doctest: +SKIP
>>> spec.launch.block[0].evaluate_int(spec.env(point)) # doctest: +SKIP
"""

from __future__ import annotations

import itertools
import math
import os
import re
import sys
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from ktx.ir.errors import KtxError, Location
from ktx.ir.expr import PLACEHOLDER, Expr, Value, expand

from ktx.dtypes import DTYPES, DType, lookup
from ktx.tomlpos import KeyPath, TomlPositions

if TYPE_CHECKING:
    from ktx.ir.facts.extents import PointValues

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib  # type: ignore[import-not-found,unused-ignore]

SPEC_FILE = "ktx.toml"

Role = Literal["in", "out", "inout", "scalar"]

#: Distributions for input values, with their parameters and defaults.
DISTRIBUTIONS: Mapping[str, Mapping[str, float]] = {
    "normal": {"mean": 0.0, "std": 1.0},
    "uniform": {"low": -1.0, "high": 1.0},
    "randint": {"low": 0.0, "high": 100.0},
    "arange": {"start": 0.0, "step": 1.0},
}

#: Extra parameters any distribution accepts: fractions of special values mixed in.
SPECIAL_PARAMS: Mapping[str, float] = {"inf_fraction": 0.0, "neginf_fraction": 0.0}


@dataclass(frozen=True)
class Tolerance:
    """Pass when ``|got - want| <= atol + rtol * |want|`` everywhere and ``max|got - want| <=
    max_abs``; for fp8 and integer outputs, also at most ``ulp`` units of the last place."""

    rtol: float
    atol: float
    max_abs: float
    ulp: int = 0


#: Defaults, about two units in the last place of each float type (one rounding of the
#: candidate and one of the reference can disagree by one each).
DEFAULT_TOLERANCE: Mapping[str, Tolerance] = {
    "fp64": Tolerance(1e-10, 1e-12, 1e-6),
    "fp32": Tolerance(1e-4, 1e-5, 1e-2),
    "fp16": Tolerance(2e-3, 1e-3, 0.25),
    "bf16": Tolerance(1.6e-2, 1e-2, 1.0),
    "fp8_e4m3": Tolerance(0.0, 0.0, float("inf"), ulp=1),
    "fp8_e5m2": Tolerance(0.0, 0.0, float("inf"), ulp=1),
}
_EXACT = Tolerance(0.0, 0.0, 0.0)


#: Distributions written ``kind:LOW..HIGH``: integers in ``[LOW, HIGH)``, LOW and HIGH
#: expressions over the shape variables (``int:0..max_pos``); ``distinct`` draws no value twice
#: (a slot mapping that two tokens must not share).
RANGE_DISTRIBUTIONS = ("int", "distinct")
_RANGE = re.compile(r"^\s*(int|distinct)\s*:(.+?)\.\.(.+)$")


@dataclass(frozen=True)
class Dist:
    """How input values are drawn: ``kind`` with its parameters (defaults filled in), or for
    ``int``/``distinct`` an integer range whose ends are expressions (data-dependent indices:
    positions, slot mappings, expert ids must be valid indices for the shape)."""

    kind: str = "normal"
    params: tuple[tuple[str, float], ...] = ()
    bounds: tuple[Expr, Expr] | None = None

    def range(self, env: Mapping[str, Value], count: int = 0) -> tuple[int, int]:
        """``[low, high)`` at ``env``; refused when empty or, for ``distinct``, smaller than
        the ``count`` values to draw."""
        assert self.bounds is not None
        low, high = (e.evaluate_int(env) for e in self.bounds)
        where = self.bounds[0].where
        if high <= low:
            raise KtxError(f"dist {self.kind}:{low}..{high} is an empty range", where, "HIGH is exclusive")
        if self.kind == "distinct" and high - low < count:
            raise KtxError(
                f"dist distinct:{low}..{high} has {high - low} values, fewer than the {count} to draw",
                where,
                "widen the range or use int:LOW..HIGH",
            )
        return low, high

    def param(self, name: str) -> float:
        for key, value in self.params:
            if key == name:
                return value
        defaults = {**DISTRIBUTIONS.get(self.kind, {}), **SPECIAL_PARAMS}
        return defaults[name]


@dataclass(frozen=True)
class Arg:
    """One kernel parameter, in declaration order."""

    name: str
    dtype: DType
    role: Role
    shape: tuple[Expr, ...] = ()
    value: Expr | None = None  # scalars only
    dist: Dist = Dist()
    where: Location | None = field(default=None, compare=False)
    #: A pointer the project passes as null (``dist = "null"``): no buffer, role ``scalar``.
    null: bool = False

    @property
    def is_array(self) -> bool:
        return self.role != "scalar"

    @property
    def is_output(self) -> bool:
        return self.role in ("out", "inout")

    def dims(self, env: Mapping[str, Value]) -> tuple[int, ...]:
        dims = tuple(e.evaluate_int(env) for e in self.shape)
        for expr, dim in zip(self.shape, dims, strict=True):
            if dim < 0:
                raise KtxError(f"arg {self.name!r}: dimension {expr.text!r} is {dim}", expr.where)
        return dims

    # By-value structs and vectors (keyword-only in use: construct with fields=..., ctype=...).
    fields: tuple[tuple[str, Expr], ...] = ()
    """A by-value struct or vector (``uint3``, ``Params``): each scalar field's value, by its
    path (``ncols``, ``div.x``, ``coef[2]``); the bytes are laid out as the compiler lays out
    the kernel's parameter type (:mod:`ktx.measure.argpack`). Empty for every other argument."""
    ctype: str | None = None
    """The struct's type as the spec names it (``type = "Params"``), checked against the kernel."""

    pointers: tuple[tuple[str, str], ...] = ()
    """A by-value struct's pointer fields that point at a spec buffer: (field path, buffer name).
    ``fields.x_ptr = "x"`` with ``x`` a ``[[buffers]]`` entry (or an array argument): the harness
    writes ``x``'s device address into the field, so the kernel reads and writes the buffer
    through the struct (causal-conv1d's ``ConvParamsBase``)."""

    @property
    def is_struct(self) -> bool:
        # by its dtype too: ``fields = {}`` (an empty functor or tag) has no fields to tell it by
        return self.dtype is STRUCT or bool(self.fields or self.pointers)

    order: str = ""
    """How an output is compared (``order = ...`` in the spec): ``""`` element by element;
    ``"multiset"`` the whole output as a multiset (its element order means nothing);
    ``"multiset per row"`` each row (last dimension) as a multiset; ``"multiset per NAME"``
    the elements that share a value of output ``NAME`` (same shape) as a multiset. For outputs
    whose order comes from ``atomicAdd`` or a race the kernel accepts (slots handed out by a
    counter): two runs of the original disagree element by element, yet agree as multisets."""

    @property
    def order_group(self) -> str | None:
        """None (in order), ``"*"`` (one multiset), ``"row"`` or the grouping output's name."""
        if not self.order:
            return None
        _, _, per = self.order.partition(" per ")
        return per.strip() or "*"


#: The dtype of a by-value struct argument: never a buffer's, never in ``DTYPES`` (a spec cannot
#: name it); its bytes come from the layout, not from this.
STRUCT = DType("struct", "struct", "uint8", 1, "int", False)


@dataclass(frozen=True)
class ShapePoint:
    """One assignment of the shape variables; its name (``tokens=1,d=4096``) keys results."""

    values: tuple[tuple[str, int], ...]

    @property
    def name(self) -> str:
        return ",".join(f"{k}={v}" for k, v in self.values)

    def as_dict(self) -> dict[str, int]:
        return dict(self.values)

    @classmethod
    def from_name(cls, name: str) -> ShapePoint:
        """``tokens=1,d=4096`` as a point; anything else is a KtxError saying what to write
        (the name comes from the command line as often as from ktx's own files)."""
        hint = "a shape is NAME=VALUE,... with integer values, e.g. tokens=1,d=4096"
        values: list[tuple[str, int]] = []
        if not name.strip():
            return cls(())  # a spec whose sizes are all fixed has one point with no variables
        for part in name.split(","):
            key, eq, value = (s.strip() for s in part.partition("="))
            if not eq or not key:
                raise KtxError(f"shape {name!r}: {part.strip()!r} is not NAME=VALUE", None, hint)
            try:
                number = int(value)
            except ValueError:
                raise KtxError(f"shape {name!r}: {key}={value!r} is not an integer", None, hint) from None
            if number < 0:
                raise KtxError(f"shape {name!r}: {key}={number} is negative", None, hint)
            if any(k == key for k, _ in values):
                raise KtxError(f"shape {name!r}: {key} is given twice", None, hint)
            values.append((key, number))
        return cls(tuple(values))

    def __str__(self) -> str:
        return self.name


@dataclass(frozen=True)
class ShapeSet:
    name: str
    points: tuple[ShapePoint, ...]


@dataclass(frozen=True)
class Launch:
    """Grid, block (1 to 3 expressions each) and dynamic shared memory bytes."""

    grid: tuple[Expr, ...]
    block: tuple[Expr, ...]
    shared: Expr


@dataclass(frozen=True)
class Reference:
    """What candidates are verified against.

    ``use = "original"`` (default): the spec's own kernel, run in the same worker.
    ``use = "python"``: ``python = "module:function"`` from the kernel folder, computing in
    float64 with numpy. When ``python`` is given, the original kernel is also checked against it.
    """

    use: Literal["original", "python"] = "original"
    python: str | None = None


@dataclass(frozen=True)
class Verify:
    """Verification rounds and the extra, not-vector-aligned shapes tried for each shape."""

    rounds: int = 3
    seed: int = 0
    odd: tuple[tuple[str, tuple[int, ...]], ...] = ()


@dataclass(frozen=True)
class Spec:
    """A validated ``ktx.toml``."""

    path: Path
    kernel: str
    source: str
    template_args: tuple[str, ...]
    args: tuple[Arg, ...]
    variables: tuple[str, ...]
    derived: tuple[tuple[str, Expr], ...]
    shapes: tuple[ShapeSet, ...]
    default_shapes: str
    launch: Launch
    flags: tuple[str, ...]
    reference: Reference
    tolerance: tuple[tuple[str, Tolerance], ...]
    bytes: Expr | None
    flops: Expr | None
    require: tuple[Expr, ...]
    verify: Verify
    description: str = ""
    #: The namespaces around the kernel (``kernel = "vllm::rms_norm"`` gives ``kernel`` =
    #: ``rms_norm``, the name the source's parse knows, and ``scope`` = ``vllm``).
    scope: str = ""
    #: Source compiled in front of the kernel's file (``[compile] prelude`` or
    #: ``prelude_source``): what the project's own build generates and the fetched sources lack,
    #: such as the ``__device__`` activation a Python JIT writes into its launcher. Compiled
    #: only: ktx's passes and facts read the kernel's file alone.
    prelude: str = ""
    #: ``[[buffers]]``: arrays that are no kernel parameter, reached through a struct's pointer
    #: fields (:attr:`Arg.pointers`); drawn, poisoned, guarded and compared as arguments are.
    buffers: tuple[Arg, ...] = ()

    # -- derived information ---------------------------------------------------------------

    @property
    def folder(self) -> Path:
        return self.path.parent

    @property
    def name(self) -> str:
        return self.folder.name

    @property
    def include_dirs(self) -> tuple[str, ...]:
        """Where ``#include "x.h"`` is looked up: the source file's own folder first (as a
        C compiler would), then the spec's folder when the source lives elsewhere (a spec
        drafted beside, not inside, the user's tree)."""
        src = (self.folder / self.source).resolve().parent
        spec = self.folder.resolve()
        return (str(src),) if src == spec else (str(src), str(spec))

    @property
    def all_args(self) -> tuple[Arg, ...]:
        """The kernel's arguments, then the ``[[buffers]]``: every array verification handles
        (``args`` alone is what the kernel's parameter list holds)."""
        return self.args + self.buffers

    def compile_source(self, source: str) -> str:
        """``source`` as ktx compiles it: the prelude first, then a ``#line`` that makes the
        compiler's messages name the kernel's own file and lines again."""
        if not self.prelude:
            return source
        path = (self.folder / self.source).resolve()
        return f'{self.prelude.rstrip()}\n#line 1 "{path}"\n{source}'

    def source_text(self) -> str:
        path = self.folder / self.source
        try:
            return path.read_text()
        except OSError as exc:
            raise KtxError(
                f"cannot read kernel source {path}: {exc.strerror}", Location(str(self.path))
            ) from None

    @property
    def qualified_kernel(self) -> str:
        """``vllm::rms_norm``: the kernel's name as C++ at file scope spells it."""
        return f"{self.scope}::{self.kernel}" if self.scope else self.kernel

    @property
    def name_expression(self) -> str:
        """The kernel's name expression; ``{expr}`` placeholders are expanded per shape."""
        if not self.template_args:
            return self.qualified_kernel
        return f"{self.qualified_kernel}<{', '.join(self.template_args)}>"

    def shape_set(self, name: str | None = None) -> ShapeSet:
        wanted = name or self.default_shapes
        for shape_set in self.shapes:
            if shape_set.name == wanted:
                return shape_set
        known = ", ".join(s.name for s in self.shapes)
        raise KtxError(f"{self.name}: no shape set {wanted!r}", Location(str(self.path)), f"sets: {known}")

    def find_point(self, name: str) -> ShapePoint:
        """A shape by set name (its first point) or by point name (``tokens=1,d=4096``)."""
        for shape_set in self.shapes:
            if shape_set.name == name:
                return shape_set.points[0]
            for point in shape_set.points:
                if point.name == name.replace(" ", ""):
                    return point
        if "=" in name:
            point = ShapePoint.from_name(name)
            self.check_point(point)
            return point
        raise KtxError(
            f"{self.name}: unknown shape {name!r}",
            Location(str(self.path)),
            "give a set name or NAME=VALUE,...",
        )

    def check_point(self, point: ShapePoint) -> None:
        names = tuple(k for k, _ in point.values)
        if set(names) != set(self.variables):
            raise KtxError(
                f"{self.name}: shape {point.name!r} must set exactly {', '.join(self.variables)}",
                Location(str(self.path)),
            )

    def template_args_at(self, env: Mapping[str, Value]) -> tuple[str, ...]:
        """The template arguments with their ``{expr}`` placeholders expanded at ``env``."""
        return tuple(expand(t, env) for t in self.template_args)

    def env(self, point: ShapePoint, config: Mapping[str, Value] | None = None) -> dict[str, Value]:
        """Shape variables, then derived variables, then knob values (which may use both)."""
        env: dict[str, Value] = dict(point.values)
        for name, expr in self.derived:
            env[name] = expr.evaluate(env)
        if config:
            env.update(config)
        return env

    def point_values(self, point: ShapePoint) -> PointValues:
        """The launch at ``point`` in plain numbers, as the bounds check reads it
        (:mod:`ktx.ir.facts.extents`): grid, block, shared bytes, scalars, template arguments,
        buffer sizes in elements. A launch or extent that does not evaluate is a KtxError."""
        from ktx.ir.facts.extents import PointValues

        env = self.env(point)
        grid = tuple(e.evaluate_int(env) for e in self.launch.grid)
        block = tuple(e.evaluate_int(env) for e in self.launch.block)
        scalars: list[tuple[str, int]] = []
        extents: list[tuple[str, int]] = []
        for arg in self.args:
            if arg.is_array:
                extents.append((arg.name, math.prod(arg.dims(env))))
            elif arg.value is not None:
                v = arg.value.evaluate(env)
                if isinstance(v, int) and not isinstance(v, bool):
                    scalars.append((arg.name, v))
        return PointValues(
            point.name,
            grid,
            block,
            self.launch.shared.evaluate_int(env),
            tuple(scalars),
            tuple(expand(t, env) for t in self.template_args),
            tuple(extents),
        )

    def satisfies(self, point: ShapePoint) -> bool:
        env = self.env(point)
        return all(r.evaluate_bool(env) for r in self.require)

    def odd_points(
        self,
        point: ShapePoint,
        config: Mapping[str, Value] | None = None,
        constraints: Sequence[str] = (),
    ) -> list[ShapePoint]:
        """Variants of ``point`` off the vector width, one variable shifted at a time; with a
        config and its template's constraints, only those where the constraints hold."""
        return self.odd_split(point, config, constraints)[0]

    def odd_split(
        self,
        point: ShapePoint,
        config: Mapping[str, Value] | None = None,
        constraints: Sequence[str] = (),
    ) -> tuple[list[ShapePoint], list[ShapePoint]]:
        """(odd variants to verify, odd variants a constraint of ``config`` excludes).

        A template's constraints (``tokens % ROWS == 0``, a vector width that must divide ``d``
        when a pass drops the scalar tail) say where a config may run at all; an odd variant
        that breaks one is a shape the dispatch table never sends the config to, so verifying
        it there would fail every such config. A constraint naming something neither a shape
        variable, a derived variable nor a knob of ``config`` is not checked (as in
        :meth:`ktx.template.KnobSpace.violations`); one that cannot be evaluated excludes.
        """
        exprs = [Expr.parse(c) for c in constraints] if config is not None else []
        kept: list[ShapePoint] = []
        skipped: list[ShapePoint] = []
        for var, offsets in self.verify.odd:
            for offset in offsets:
                values = tuple((k, v + offset if k == var else v) for k, v in point.values)
                candidate = ShapePoint(values)
                if any(v <= 0 for _, v in values) or candidate in kept or candidate in skipped:
                    continue
                if candidate == point or not self.satisfies(candidate):
                    continue
                if exprs and not self._holds(exprs, candidate, config):
                    skipped.append(candidate)
                else:
                    kept.append(candidate)
        return kept, skipped

    def _holds(self, exprs: Sequence[Expr], point: ShapePoint, config: Mapping[str, Value] | None) -> bool:
        try:
            env = self.env(point, config)
            return all(e.evaluate_bool(env) for e in exprs if e.names <= env.keys())
        except KtxError:
            return False

    def tolerance_for(self, dtype: DType) -> Tolerance:
        for name, tol in self.tolerance:
            if name == dtype.name:
                return tol
        if dtype.name in DEFAULT_TOLERANCE:
            return DEFAULT_TOLERANCE[dtype.name]
        return _EXACT

    def bytes_moved(self, env: Mapping[str, Value]) -> int:
        """Bytes one call must move at least: the spec's ``bytes`` or inputs read + outputs written."""
        if self.bytes is not None:
            return self.bytes.evaluate_int(env)
        total = 0
        for arg in self.all_args:
            if not arg.is_array or arg.is_struct:
                continue
            size = arg.dtype.itemsize
            for dim in arg.dims(env):
                size *= dim
            total += size * (2 if arg.role == "inout" else 1)
        return total

    def flops_done(self, env: Mapping[str, Value]) -> int | None:
        return None if self.flops is None else self.flops.evaluate_int(env)


# -- loading ------------------------------------------------------------------------------


class _Table:
    """A TOML table being read: typed getters that record which keys were used."""

    def __init__(self, data: Mapping[str, Any], key: KeyPath, pos: TomlPositions) -> None:
        self.data = data
        self.key = key
        self.pos = pos
        self.used: set[str] = set()

    def loc(self, *sub: str | int) -> Location:
        return self.pos.locate((*self.key, *sub))

    def dotted(self, *sub: str | int) -> str:
        parts = [*self.key, *sub]
        text = ""
        for part in parts:
            text += f"[{part}]" if isinstance(part, int) else (f".{part}" if text else part)
        return text or "<top level>"

    def error(self, sub: str | int | None, message: str, hint: str = "") -> KtxError:
        where = self.loc() if sub is None else self.loc(sub)
        name = self.dotted() if sub is None else self.dotted(sub)
        return KtxError(f"{name}: {message}", where, hint)

    def has(self, name: str) -> bool:
        return name in self.data

    def raw(self, name: str) -> Any:
        self.used.add(name)
        return self.data.get(name)

    def _typed(self, name: str, types: tuple[type, ...], what: str, default: Any, required: bool) -> Any:
        if name not in self.data:
            if required:
                raise self.error(None, f"missing key {name!r}", f"add {name} = ...")
            return default
        value = self.raw(name)
        if isinstance(value, bool) and bool not in types:
            raise self.error(name, f"expected {what}, got {value!r}")
        if not isinstance(value, types):
            raise self.error(name, f"expected {what}, got {type(value).__name__} {value!r}")
        return value

    def string(self, name: str, default: str | None = None, required: bool = False) -> Any:
        return self._typed(name, (str,), "a string", default, required)

    def integer(self, name: str, default: int, minimum: int | None = None) -> int:
        value: int = self._typed(name, (int,), "an integer", default, False)
        if minimum is not None and value < minimum:
            raise self.error(name, f"must be at least {minimum}, got {value}")
        return value

    def number(self, name: str, default: float) -> float:
        return float(self._typed(name, (int, float), "a number", default, False))

    def table(self, name: str, required: bool = False) -> _Table:
        value = self._typed(name, (dict,), "a table", {}, required)
        return _Table(value, (*self.key, name), self.pos)

    def strings(self, name: str, default: Sequence[str] = ()) -> tuple[str, ...]:
        value = self._typed(name, (list,), "an array of strings", list(default), False)
        for i, item in enumerate(value):
            if not isinstance(item, str):
                raise self.error(name, f"item {i} must be a string, got {item!r}")
        return tuple(value)

    def expr(self, name: str, default: str | None = None, required: bool = False) -> Expr | None:
        if name not in self.data:
            if required:
                raise self.error(None, f"missing key {name!r}")
            return None if default is None else Expr.parse(default)
        value = self.raw(name)
        if isinstance(value, bool) or not isinstance(value, str | int | float):
            raise self.error(name, f"expected an expression (string or number), got {value!r}")
        return Expr.parse(value, self.pos.value_col((*self.key, name)))

    def exprs(
        self, name: str, default: Sequence[str] | None = None, required: bool = False
    ) -> tuple[Expr, ...]:
        """One expression or an array of 1 to 3 (grid/block/shape)."""
        if name not in self.data:
            if required:
                raise self.error(None, f"missing key {name!r}")
            return tuple(Expr.parse(d) for d in (default or ()))
        value = self.raw(name)
        key = (*self.key, name)
        if isinstance(value, str) and value.strip().startswith("["):
            return _parse_list_expr(value, self.pos.value_col(key), self.error(name, "").location)
        if isinstance(value, str | int) and not isinstance(value, bool):
            return (Expr.parse(value, self.pos.value_col(key)),)
        if isinstance(value, list):
            out = []
            for i, item in enumerate(value):
                if isinstance(item, bool) or not isinstance(item, str | int):
                    raise self.error(name, f"item {i} must be an expression string or integer, got {item!r}")
                out.append(Expr.parse(item, self.pos.value_col((*key, i))))
            return tuple(out)
        raise self.error(name, f"expected an expression or an array of them, got {value!r}")

    def done(self, allowed: Sequence[str]) -> None:
        for key in self.data:
            if key not in self.used:
                close = [a for a in allowed if a[:3] == key[:3]]
                hint = f"did you mean {close[0]!r}?" if close else "allowed: " + ", ".join(allowed)
                raise self.error(key, f"unknown key {key!r}", hint)


def _parse_list_expr(text: str, where: Location, fallback: Location | None) -> tuple[Expr, ...]:
    """``"[tokens, 2 * d]"`` -> expressions, each located at its own column."""
    lead = len(text) - len(text.lstrip())
    body = text.strip()
    if not body.endswith("]"):
        raise KtxError(f"unbalanced brackets in {body!r}", where, "write [dim, dim, ...]")
    inner_start = lead + 1
    inner = body[1:-1]
    parts: list[tuple[int, str]] = []
    depth = 0
    start = 0
    for i, ch in enumerate(inner):
        if ch in "([":
            depth += 1
        elif ch in ")]":
            depth -= 1
        elif ch == "," and depth == 0:
            parts.append((start, inner[start:i]))
            start = i + 1
    if inner[start:].strip() or parts:
        parts.append((start, inner[start:]))
    out = []
    for offset, piece in parts:
        col = where.col + inner_start + offset if where.line > 0 else 0
        piece_where = Location(where.path, where.line, col) if where.line > 0 else fallback
        out.append(Expr.parse(piece, piece_where))
    return tuple(out)


_TOP_KEYS = (
    "kernel", "source", "template_args", "description", "args", "vars", "shapes", "default_shapes",
    "launch", "compile", "reference", "tolerance", "bytes", "flops", "constraints", "verify", "buffers",
)  # fmt: skip
_ARG_KEYS = ("name", "dtype", "shape", "role", "dist", "value", *DISTRIBUTIONS["normal"],
             *DISTRIBUTIONS["uniform"], *DISTRIBUTIONS["arange"], *SPECIAL_PARAMS)  # fmt: skip
_IDENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
#: ``kernel``, ``ns::kernel``, ``::a::b::kernel``: a kernel inside namespaces.
_QUALIFIED = re.compile(r"^\s*(::\s*)?[A-Za-z_][A-Za-z0-9_]*(\s*::\s*[A-Za-z_][A-Za-z0-9_]*)*\s*$")


def shape_note(spec: Spec, name: str) -> str:
    """`` (shape [n, d])`` for an argument, `` (its shared memory)`` for anything else."""
    arg = next((a for a in spec.args if a.name == name), None)
    if arg is None:
        return " (its shared memory)"
    return " (shape [" + ", ".join(e.text.strip() for e in arg.shape) + "])"


def read_spec_text(p: Path) -> str:
    """The spec's text; missing, a folder or not UTF-8 is a KtxError at the offending byte."""
    try:
        data = p.read_bytes()
    except OSError as exc:
        raise KtxError(
            f"cannot read spec: {exc.strerror}", Location(str(p)), "every kernel folder needs a ktx.toml"
        ) from None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        col = exc.start - (data.rfind(b"\n", 0, exc.start) + 1) + 1
        raise KtxError(
            f"the spec is not UTF-8 text (byte 0x{data[exc.start]:02x})",
            Location(str(p), line, col),
            "TOML files are UTF-8; save it as UTF-8",
        ) from None


def parse_spec(text: str, path: Path) -> Spec:
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        line = int(m.group(1)) if (m := re.search(r"line (\d+)", str(exc))) else 0
        col = int(m.group(1)) if (m := re.search(r"column (\d+)", str(exc))) else 0
        raise KtxError(f"invalid TOML: {exc}", Location(str(path), line, col)) from None
    pos = TomlPositions.scan(text, str(path))
    top = _Table(data, (), pos)
    # A misspelt section is reported as such, not as the section that is then missing.
    _Table({k: v for k, v in data.items() if k not in _TOP_KEYS}, (), pos).done(_TOP_KEYS)

    written = top.string("kernel", required=True)
    if not _QUALIFIED.match(written):
        raise top.error(
            "kernel",
            f"{written!r} is not a C++ identifier",
            "give the kernel's name, with its namespaces where it has any: ns::kernel",
        )
    scope, _, kernel = re.sub(r"\s+", "", written).lstrip(":").rpartition("::")
    source = top.string("source", "kernel.cu")
    if not (path.parent / source).is_file():
        raise top.error("source", f"file {source!r} not found next to the spec")
    template_args = top.strings("template_args")
    description = top.string("description", "")

    shapes, default_shapes, variables = _shapes(top, pos)
    derived = _derived(top)
    args = _args(top, pos)
    buffers = _args(top, pos, "buffers", {a.name for a in args}) if top.has("buffers") else ()
    args = _pointer_fields(args, buffers)
    launch_t = top.table("launch", required=True)
    launch = Launch(
        grid=launch_t.exprs("grid", required=True),
        block=launch_t.exprs("block", required=True),
        shared=launch_t.expr("shared") or Expr.parse("0"),
    )
    for name in ("grid", "block"):
        count = len(getattr(launch, name))
        if not 1 <= count <= 3:
            raise launch_t.error(name, f"needs 1 to 3 expressions, got {count}")
    launch_t.done(("grid", "block", "shared"))

    compile_t = top.table("compile")
    flags = flag_paths(compile_t.strings("flags"), path.parent)
    prelude = _prelude(compile_t, path.parent)
    compile_t.done(("flags", "prelude", "prelude_source"))

    reference = _reference(top, path)
    tolerance = _tolerance(top)
    byte_expr = top.expr("bytes")
    flop_expr = top.expr("flops")

    cons = top.table("constraints")
    require = cons.exprs("require")
    odd_t = cons.table("odd")
    odd: list[tuple[str, tuple[int, ...]]] = []
    for var, offsets in odd_t.data.items():
        odd_t.used.add(var)
        if var not in variables:
            raise odd_t.error(
                var, f"{var!r} is not a shape variable", "shape variables: " + ", ".join(variables)
            )
        if not isinstance(offsets, list) or not all(
            isinstance(o, int) and not isinstance(o, bool) for o in offsets
        ):
            raise odd_t.error(var, "expected an array of integer offsets, e.g. [1, -3]")
        odd.append((var, tuple(offsets)))
    cons.done(("require", "odd"))

    ver = top.table("verify")
    verify = Verify(
        rounds=ver.integer("rounds", 3, minimum=3),
        seed=ver.integer("seed", 0),
        odd=tuple(odd),
    )
    ver.done(("rounds", "seed"))
    top.done(_TOP_KEYS)

    spec = Spec(
        path=path, kernel=kernel, source=source, template_args=template_args, args=args,
        variables=variables, derived=derived, shapes=shapes, default_shapes=default_shapes,
        launch=launch, flags=flags, reference=reference, tolerance=tolerance, bytes=byte_expr,
        flops=flop_expr, require=require, verify=verify, description=description, scope=scope,
        prelude=prelude, buffers=buffers,
    )  # fmt: skip
    _check_names(spec, top)
    _check_points(spec, top)
    _check_kernel_defined(spec, top)
    return spec


def _prelude(compile_t: _Table, folder: Path) -> str:
    """``prelude = "file.cuh"`` (a file beside the spec) and/or ``prelude_source = "..."``
    (text; after the file's), as :attr:`Spec.prelude`. A file's text starts with a ``#line``
    naming it, so the compiler's messages about it name the file."""
    parts: list[str] = []
    name = compile_t.string("prelude")
    if name is not None:
        file = folder / name
        if not name.strip() or not file.is_file():
            raise compile_t.error("prelude", f"file {name!r} not found next to the spec",
                                  "a prelude is a file beside ktx.toml, or write prelude_source")  # fmt: skip
        try:
            text = file.read_text()
        except (OSError, UnicodeDecodeError) as exc:
            raise compile_t.error("prelude", f"cannot read {name!r}: {exc}") from None
        parts.append(f'#line 1 "{file.resolve()}"\n{text}')
    source = compile_t.string("prelude_source")
    if source is not None:
        parts.append(source)
    return "\n".join(parts)


#: Flags that take a folder, joined (``-Iinc``, ``--include-path=inc``) or as the next flag.
_DIR_FLAGS = ("-I", "--include-path", "-isystem", "--system-include")
#: Flags that take a file to include first (``-include pre.h``, ``--pre-include=pre.h``).
_FILE_FLAGS = ("-include", "--pre-include")


def flag_paths(flags: Sequence[str], folder: Path) -> tuple[str, ...]:
    """``flags`` with their relative paths made absolute from the spec's ``folder``, not from
    wherever ktx runs: an include folder (``-I``, ``--include-path``, ``-isystem``) always; a
    pre-included file (``-include``, ``--pre-include``) when it exists there (else it is a
    header the compiler finds on its include path, such as ``cuda_fp16.h``). Absolute paths
    stay as written."""
    base = folder.resolve()

    def fix(value: str, is_dir: bool) -> str:
        if not value or Path(value).is_absolute() or value.startswith("~"):
            return value
        candidate = base / value
        return str(Path(os.path.normpath(candidate))) if is_dir or candidate.exists() else value

    out: list[str] = []
    pending: bool | None = None  # the previous flag wants a path: is it a folder?
    for flag in flags:
        if pending is not None:
            out.append(fix(flag, pending))
            pending = None
            continue
        for names, is_dir in ((_DIR_FLAGS, True), (_FILE_FLAGS, False)):
            name = next((n for n in names if flag == n or flag.startswith(n)), None)
            if name is None:
                continue
            if flag == name:
                pending = is_dir
                out.append(flag)
            else:
                rest = flag[len(name) :]
                sep = "=" if rest.startswith("=") else ""
                out.append(name + sep + fix(rest[len(sep) :], is_dir))
            break
        else:
            out.append(flag)
    return tuple(out)


def _shapes(top: _Table, pos: TomlPositions) -> tuple[tuple[ShapeSet, ...], str, tuple[str, ...]]:
    table = top.table("shapes", required=True)
    sets: list[ShapeSet] = []
    variables: tuple[str, ...] | None = None
    for set_name, value in table.data.items():
        table.used.add(set_name)
        points: list[tuple[ShapePoint, KeyPath]] = []
        if isinstance(value, list):
            for i, item in enumerate(value):
                if not isinstance(item, dict):
                    raise table.error(
                        set_name, f"item {i} must be an inline table like {{tokens = 1, d = 4096}}"
                    )
                points.append((_point(item, ("shapes", set_name, i), pos), ("shapes", set_name, i)))
        elif isinstance(value, dict):
            sub = _Table(value, ("shapes", set_name), pos)
            if sub.has("product"):
                product = sub.table("product")
                points.extend((p, product.key) for p in _product(product))
            if sub.has("points"):
                items = sub.raw("points")
                if not isinstance(items, list):
                    raise sub.error("points", "expected an array of inline tables")
                for i, item in enumerate(items):
                    if not isinstance(item, dict):
                        raise sub.error("points", f"item {i} must be an inline table")
                    points.append((_point(item, ("shapes", set_name, "points", i), pos), sub.key))
            if not (sub.has("product") or sub.has("points")):
                raise sub.error(None, "a shape set table needs 'product' or 'points'")
            sub.done(("product", "points"))
        else:
            raise table.error(set_name, "expected an array of shapes or a table with 'product'")
        if not points:
            raise table.error(set_name, "empty shape set")
        for point, key in points:
            names = tuple(k for k, _ in point.values)
            if variables is None:
                variables = names
            elif set(names) != set(variables):
                raise KtxError(
                    f"shapes.{set_name}: shape {point.name!r} sets {', '.join(names)} but the "
                    f"first shape sets {', '.join(variables)}",
                    pos.locate(key),
                    "every shape must set the same variables",
                )
        ordered = tuple(
            ShapePoint(tuple((v, point.as_dict()[v]) for v in variables or ())) for point, _ in points
        )
        unique = tuple(dict.fromkeys(ordered))
        sets.append(ShapeSet(set_name, unique))
    if not sets:
        raise table.error(None, "no shape sets", "add e.g. default = [{tokens = 1, d = 4096}]")
    default = top.string(
        "default_shapes", "default" if any(s.name == "default" for s in sets) else sets[0].name
    )
    if default not in {s.name for s in sets}:
        raise top.error("default_shapes", f"no shape set named {default!r}")
    return tuple(sets), default, variables or ()


def _point(item: Mapping[str, Any], key: KeyPath, pos: TomlPositions) -> ShapePoint:
    values = []
    for name, value in item.items():
        if not _IDENT.match(name):
            raise KtxError(f"shape variable {name!r} is not an identifier", pos.locate((*key, name)))
        if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
            raise KtxError(
                f"shape variable {name!r} must be a positive integer, got {value!r}", pos.locate((*key, name))
            )
        values.append((name, value))
    return ShapePoint(tuple(values))


def _product(table: _Table) -> Iterator[ShapePoint]:
    """``{tokens = [1, 4], "heads,head_dim" = [[32, 128], [64, 128]]}`` -> the product."""
    axes: list[tuple[list[str], list[tuple[int, ...]]]] = []
    for key, values in table.data.items():
        table.used.add(key)
        names = [n.strip() for n in key.split(",")]
        for name in names:
            if not _IDENT.match(name):
                raise table.error(key, f"shape variable {name!r} is not an identifier")
        if not isinstance(values, list) or not values:
            raise table.error(key, "expected a non-empty array of values")
        rows: list[tuple[int, ...]] = []
        for value in values:
            row = tuple(value) if isinstance(value, list) else (value,)
            if len(row) != len(names) or not all(
                isinstance(v, int) and not isinstance(v, bool) and v > 0 for v in row
            ):
                want = (
                    "positive integers"
                    if len(names) == 1
                    else f"[{', '.join(names)}] rows of positive integers"
                )
                raise table.error(key, f"expected {want}, got {value!r}")
            rows.append(row)
        axes.append((names, rows))
    for combo in itertools.product(*(rows for _, rows in axes)):
        point: list[tuple[str, int]] = []
        for (names, _), row in zip(axes, combo, strict=True):
            point.extend(zip(names, row, strict=True))
        yield ShapePoint(tuple(point))


def _derived(top: _Table) -> tuple[tuple[str, Expr], ...]:
    table = top.table("vars")
    out = []
    for name in table.data:
        if not _IDENT.match(name):
            raise table.error(name, f"{name!r} is not an identifier")
        expr = table.expr(name)
        assert expr is not None
        out.append((name, expr))
    return tuple(out)


def _args(
    top: _Table, pos: TomlPositions, section: str = "args", taken: set[str] | None = None
) -> tuple[Arg, ...]:
    """``[[args]]`` (the kernel's parameters, in order), or ``[[buffers]]`` (arrays a struct's
    pointer fields name: the same keys as an array argument, never a value or fields)."""
    if not top.has(section):
        raise top.error(None, "missing [[args]]", "list the kernel parameters in order")
    items = top.raw(section)
    if not isinstance(items, list) or not items:
        what = "one per kernel parameter" if section == "args" else "one per buffer"
        raise top.error(section, f"expected [[{section}]] tables, {what}")
    args: list[Arg] = []
    seen: set[str] = set(taken or ())
    for i, item in enumerate(items):
        if not isinstance(item, dict):
            raise top.error(section, f"item {i} must be a table")
        t = _Table(item, (section, i), pos)
        name = t.string("name", required=True)
        if not _IDENT.match(name):
            raise t.error("name", f"{name!r} is not an identifier")
        if name in seen:
            raise t.error("name", f"duplicate argument {name!r}")
        seen.add(name)
        if section == "buffers":
            hint = "a buffer is an array: dtype, shape, role (dist, order)"
            if not t.has("shape"):
                raise t.error(None, f"buffer {name!r} needs a 'shape'", hint)
            for bad in ("fields", "value"):
                if t.has(bad):
                    raise t.error(bad, f"buffer {name!r} takes no {bad!r}", hint)
            if t.has("dist") and t.string("dist") == "null":
                raise t.error("dist", f"buffer {name!r} cannot be null", "write 0 for a null pointer field")
        if t.has("fields"):
            args.append(_struct_arg(t, name))
            continue
        dtype_name = t.string("dtype", required=True)
        dtype = lookup(dtype_name)
        if dtype is None:
            raise t.error("dtype", f"unknown dtype {dtype_name!r}", "dtypes: " + ", ".join(DTYPES))
        if t.has("value"):
            for bad in ("shape", "role", "dist"):
                if t.has(bad):
                    raise t.error(bad, f"scalar argument {name!r} (it has a value) takes no {bad!r}")
            if not dtype.scalar_ok:
                raise t.error(
                    "dtype", f"{dtype.name} cannot be a by-value scalar here", "use fp32, int32, int64, ..."
                )
            value = t.expr("value")
            t.done(("name", "dtype", "value"))
            args.append(Arg(name, dtype, "scalar", (), value, Dist(), t.loc()))
            continue
        if t.has("dist") and t.string("dist") == "null":
            t.done(("name", "dtype", "dist"))
            args.append(Arg(name, dtype, "scalar", (), None, Dist("null"), t.loc(), null=True))
            continue
        if not t.has("shape"):
            raise t.error(None, f"argument {name!r} needs a 'shape' (array) or a 'value' (scalar)")
        _shape_is_a_list(t, name)
        shape = t.exprs("shape", required=True)
        role = t.string("role", "in")
        if role not in ("in", "out", "inout"):
            raise t.error("role", f"role must be 'in', 'out' or 'inout', got {role!r}")
        kind = t.string("dist", "randint" if dtype.kind in ("int", "bool") else "normal")
        order = _order(t, role)
        ranged = _RANGE.match(kind)
        if ranged is not None:
            if role == "out":
                raise t.error("dist", "an output argument takes no input distribution")
            t.done(("name", "dtype", "shape", "role", "dist", "order"))
            bounds = (_range_end(t, ranged.group(2)), _range_end(t, ranged.group(3)))
            args.append(Arg(name, dtype, role, shape, None, Dist(ranged.group(1), (), bounds), t.loc(),
                            order=order))  # fmt: skip
            continue
        if kind not in DISTRIBUTIONS:
            raise t.error(
                "dist",
                f"unknown distribution {kind!r}",
                "distributions: " + ", ".join(DISTRIBUTIONS) + ", int:LOW..HIGH, distinct:LOW..HIGH, null",
            )
        allowed = (*DISTRIBUTIONS[kind], *SPECIAL_PARAMS)
        params = []
        for key in item:
            if key in ("name", "dtype", "shape", "role", "dist", "order"):
                continue
            if key not in allowed:
                continue  # reported by done() below
            number = t.number(key, 0.0)
            if key in SPECIAL_PARAMS and not 0.0 <= number <= 1.0:
                raise t.error(key, f"must be a fraction between 0 and 1, got {number}")
            params.append((key, number))
        if role == "out" and params:
            raise t.error(params[0][0], "an output argument takes no input distribution")
        t.done(("name", "dtype", "shape", "role", "dist", "order", *allowed))
        args.append(Arg(name, dtype, role, shape, None, Dist(kind, tuple(params)), t.loc(), order=order))
    _check_orders(args)
    return tuple(args)


def _pointer_fields(args: tuple[Arg, ...], buffers: tuple[Arg, ...]) -> tuple[Arg, ...]:
    """A by-value struct's field written as a buffer's bare name (``fields.x_ptr = "x"``) is a
    pointer to that buffer (:attr:`Arg.pointers`); any other field stays an expression."""
    arrays = {a.name for a in (*args, *buffers) if a.is_array and not a.is_struct}
    out: list[Arg] = []
    for arg in args:
        named = [(f, e) for f, e in arg.fields if e.text.strip() in arrays]
        if not named:
            out.append(arg)
            continue
        if arg.is_array:
            raise KtxError(
                f"args.{arg.name}.fields.{named[0][0]}: names buffer {named[0][1].text.strip()!r}, "
                "but pointer fields are filled only in a struct passed by value",
                named[0][1].where,
            )
        pointers = tuple((f, e.text.strip()) for f, e in named)
        fields = tuple((f, e) for f, e in arg.fields if (f, e) not in named)
        out.append(replace(arg, fields=fields, pointers=pointers))
    return tuple(out)


_ORDER = re.compile(r"^multiset(?:\s+per\s+([A-Za-z_][A-Za-z0-9_]*))?$")
_ORDER_HINT = 'write order = "multiset", "multiset per row" or "multiset per NAME" (NAME: another output)'


def _order(t: _Table, role: str) -> str:
    """``order`` of an array argument, normalised (``"multiset per row"``); only outputs have one."""
    if not t.has("order"):
        return ""
    text = t.string("order", "") or ""
    match = _ORDER.match(text.strip())
    if match is None:
        raise t.error("order", f"unknown order {text!r}", _ORDER_HINT)
    if role == "in":
        raise t.error("order", "an input takes no order (it is drawn, not compared)", "give it to an output")
    return f"multiset per {match.group(1)}" if match.group(1) else "multiset"


def _check_orders(args: Sequence[Arg]) -> None:
    """``multiset per NAME``: NAME is another output, compared in order, of the same shape (each
    element's group is NAME's element at the same index)."""
    by_name = {a.name: a for a in args}
    for arg in args:
        group = arg.order_group
        if group in (None, "*", "row"):
            continue
        key = by_name.get(group or "")
        where = arg.where
        if key is None or not key.is_output or key.is_struct:
            outs = ", ".join(a.name for a in args if a.is_output and a.name != arg.name) or "none"
            raise KtxError(f"args.{arg.name}.order: {group!r} is not an output", where, f"outputs: {outs}")
        if key.order:
            raise KtxError(f"args.{arg.name}.order: {group!r} is itself compared as a multiset", where,
                            "the grouping output must be compared in order")  # fmt: skip
        if [e.text.strip() for e in key.shape] != [e.text.strip() for e in arg.shape]:
            raise KtxError(f"args.{arg.name}.order: {group!r} has another shape", where,
                            "the grouping output gives each element its group: same shape")  # fmt: skip


def _struct_arg(t: _Table, name: str) -> Arg:
    """``fields = { ncols = "d", div = { x = "m", y = "s" }, coef = ["1", "0.5"] }``: a struct
    passed by value. Nested tables are nested structs, arrays are fixed arrays; each leaf is an
    expression (a string or a number; ``true``/``false`` for a bool). TOML's dotted keys write
    one field a line: ``fields.div.x = "m"``.

    With a ``shape``, an array of such structs behind a pointer parameter (DeepSpeed's
    ``const RaggedBatchDescriptor* batch``): the fields are each element's, and may name ``i``,
    the element's flat index (``fields.start_idx = "i * seq_len"``). Such an array is an input
    (role ``in``): ktx writes its bytes, as the kernel's own build lays the struct out."""
    shaped = t.has("shape")
    for bad in ("dtype", "dist", "value") if shaped else ("dtype", "shape", "role", "dist", "value"):
        if t.has(bad):
            raise t.error(bad, f"struct argument {name!r} (it has fields) takes no {bad!r}",
                          "its layout comes from the kernel's parameter type")  # fmt: skip
    ctype = t.string("type")
    if ctype is not None and not ctype.strip():
        raise t.error("type", "empty type name")
    raw = t.raw("fields")
    # ``fields = {}``: a struct with no fields, passed by value: a functor (``Silu<T>{}``) or a
    # tag (``std::true_type{}``, ``constant<B>{}``) whose type alone picks the code. Its layout
    # (one byte) says whether it really has none; an array of them would carry no data.
    if not isinstance(raw, dict) or (not raw and shaped):
        raise t.error("fields", f"expected a table of field values, got {raw!r}", 'e.g. fields = { n = "d" }')
    out: list[tuple[str, Expr]] = []

    def leaf(path: tuple[str | int, ...], value: Any) -> None:
        key = (*t.key, "fields", *path)
        label = _field_label(path)
        if isinstance(value, dict):
            if not value:
                raise t.error("fields", f"field {label}: empty table")
            for sub, v in value.items():
                leaf((*path, sub), v)
        elif isinstance(value, list):
            if not value:
                raise t.error("fields", f"field {label}: empty array")
            for i, v in enumerate(value):
                leaf((*path, i), v)
        elif isinstance(value, bool):
            out.append((label, Expr.parse("1" if value else "0", t.pos.value_col(key))))
        elif isinstance(value, str | int | float):
            out.append((label, Expr.parse(value, t.pos.value_col(key))))
        else:
            raise t.error("fields", f"field {label}: expected an expression, got {value!r}")

    for key, value in raw.items():
        leaf((key,), value)
    if shaped:
        _shape_is_a_list(t, name)
        shape = t.exprs("shape", required=True)
        role = t.string("role", "in")
        if role != "in":
            raise t.error("role", f"an array of structs is an input (role = \"in\"), got {role!r}",
                          "ktx fills its elements from the fields; it does not compare them")  # fmt: skip
        t.done(("name", "fields", "type", "shape", "role"))
        return Arg(name, STRUCT, "in", shape, where=t.loc(), fields=tuple(out), ctype=ctype)
    t.done(("name", "fields", "type"))
    return Arg(name, STRUCT, "scalar", where=t.loc(), fields=tuple(out), ctype=ctype)


def _field_label(path: Sequence[str | int]) -> str:
    """``("div", "x")`` -> ``div.x``, ``("coef", 2)`` -> ``coef[2]`` (as ktx.ir.facts.structs
    names a leaf)."""
    text = ""
    for part in path:
        text += f"[{part}]" if isinstance(part, int) else (f".{part}" if text else part)
    return text


def _shape_is_a_list(t: _Table, name: str) -> None:
    """``shape`` is one dimension per axis: an array or ``"[...]"``. A bare ``shape = 5`` or
    ``shape = "n"`` would load as a 1-D buffer, which is rarely what was meant (a scalar takes
    ``value``), so it is refused rather than guessed."""
    value = t.data.get("shape")
    if isinstance(value, list) or (isinstance(value, str) and value.strip().startswith("[")):
        return
    shown = f"{type(value).__name__} {value!r}"
    raise t.error(
        "shape",
        f"expected an array of dimensions, got {shown}",
        f'write shape = "[{value}]" for a 1-D buffer, or value = "..." for scalar {name!r}',
    )


def _check_kernel_defined(spec: Spec, top: _Table) -> None:
    """The kernel the spec names is a ``__global__`` function of its source file: a typo here
    would otherwise load, and fail only when the first candidate is compiled."""
    from ktx.ir import parse

    try:
        module = parse(spec.source_text(), str(spec.folder / spec.source))
    except KtxError:
        return  # an unreadable source is reported where it is read, with its own location
    names = [k.name for k in module.kernels]
    if spec.kernel in names:
        _check_kernel_scope(spec, top, module)
        return
    # A kernel defined in a local header, or one tree-sitter did not see as a kernel (built by
    # a macro, say), still has its name in a text: only a name none of them has is wrong.
    word = re.compile(rf"\b{re.escape(spec.kernel)}\b")
    if not names and word.search(module.text_str):
        return
    for include in re.findall(r'^\s*#\s*include\s*"([^"]+)"', module.text_str, re.M):
        for folder in spec.include_dirs:
            header = Path(folder) / include
            if header.is_file() and word.search(header.read_text(errors="replace")):
                return
    known = ", ".join(names) or "none found"
    raise top.error(
        "kernel", f"{spec.source} defines no kernel {spec.kernel!r}", f"kernels in {spec.source}: {known}"
    )


def _check_kernel_scope(spec: Spec, top: _Table, module: Any) -> None:
    """The namespaces ``kernel`` names are those around the kernel in the source: a kernel in
    ``namespace vllm`` written ``kernel = "k"`` (with no ``using namespace`` that reaches it,
    and no pre-included file that could hold one) is not found by the compiler at file scope,
    and ``kernel = "other::k"`` names no kernel."""
    from ktx.ir.clang import _namespace_path

    scopes = [
        "::".join(n for n in _namespace_path(module, fn) if n)
        for fn in module.kernels
        if fn.name == spec.kernel
    ]
    if spec.scope in scopes:
        return
    if not spec.scope:
        pre_included = any(f.startswith(("-include", "--pre-include")) for f in spec.flags)
        if pre_included or re.search(r"\busing\s+namespace\b", module.text_str):
            return
    where = ", ".join(f"{s}::{spec.kernel}" if s else spec.kernel for s in scopes)
    raise top.error(
        "kernel",
        f"{spec.source} has no kernel {spec.qualified_kernel!r} (it has {where})",
        f'write kernel = "{where.split(", ")[0]}"',
    )


def _reference(top: _Table, path: Path) -> Reference:
    t = top.table("reference")
    python = t.string("python")
    use = t.string("use", "original")
    if use not in ("original", "python"):
        raise t.error("use", f"expected 'original' or 'python', got {use!r}")
    if use == "python" and python is None:
        raise t.error("use", "use = 'python' needs python = 'module:function'")
    if python is not None:
        module, _, func = python.partition(":")
        if not (module and func and _IDENT.match(func)):
            raise t.error("python", f"expected 'module:function', got {python!r}")
        if not (path.parent / f"{module.replace('.', '/')}.py").is_file():
            raise t.error("python", f"no {module}.py next to the spec")
    t.done(("python", "use"))
    return Reference("python" if use == "python" else "original", python)


def _tolerance(top: _Table) -> tuple[tuple[str, Tolerance], ...]:
    t = top.table("tolerance")
    out = []
    for name in t.data:
        dtype = lookup(name)
        if dtype is None:
            raise t.error(name, f"unknown dtype {name!r}", "dtypes: " + ", ".join(DTYPES))
        sub = t.table(name)
        base = DEFAULT_TOLERANCE.get(dtype.name, _EXACT)
        tol = Tolerance(
            rtol=sub.number("rtol", base.rtol),
            atol=sub.number("atol", base.atol),
            max_abs=sub.number("max_abs", base.max_abs),
            ulp=sub.integer("ulp", base.ulp, minimum=0),
        )
        for key in ("rtol", "atol", "max_abs"):
            if getattr(tol, key) < 0:
                raise sub.error(key, "must not be negative")
        sub.done(("rtol", "atol", "max_abs", "ulp"))
        out.append((dtype.name, tol))
    return tuple(out)


def _check_names(spec: Spec, top: _Table) -> None:
    """Every expression may only name shape variables, derived variables (defined earlier)."""
    known = set(spec.variables)
    for name, expr in spec.derived:
        _names_ok(expr, known, f"vars.{name}")
        if name in known:
            raise top.error("vars", f"vars.{name} redefines a shape variable")
        known.add(name)
    for arg in spec.all_args:
        for field_name, expr in arg.fields:
            # an array of structs' fields may name the element's index ``i``
            names = known | ({"i"} if arg.is_array else set())
            _names_ok(expr, names, f"args.{arg.name}.fields.{field_name}")
        for expr in arg.shape:
            _names_ok(expr, known, f"args.{arg.name}.shape")
        if arg.value is not None:
            _names_ok(arg.value, known, f"args.{arg.name}.value")
        for expr in arg.dist.bounds or ():
            _names_ok(expr, known, f"args.{arg.name}.dist")
    for label, exprs in (
        ("bytes", (spec.bytes,)),
        ("flops", (spec.flops,)),
        ("constraints.require", spec.require),
    ):
        for maybe in exprs:
            if maybe is not None:
                _names_ok(maybe, known, label)
    # A candidate may bring knobs into its own launch expressions; the spec's name none.
    for expr in (*spec.launch.grid, *spec.launch.block, spec.launch.shared):
        _names_ok(expr, known, "launch")
    for text in spec.template_args:
        for match in PLACEHOLDER.finditer(text):
            _names_ok(Expr.parse(match.group(1), top.loc("template_args")), known, "template_args")


def _names_ok(expr: Expr, known: set[str], label: str) -> None:
    unknown = sorted(expr.names - known)
    if unknown:
        col = expr.text.find(unknown[0])
        where = expr.where
        if where is not None and where.line > 0 and col >= 0:
            where = Location(where.path, where.line, where.col + col)
        raise KtxError(
            f"{label}: unknown name {unknown[0]!r} in {expr.text.strip()!r}",
            where,
            "known names: " + ", ".join(sorted(known)),
        )


def _range_end(t: _Table, text: str) -> Expr:
    """One end of ``int:LOW..HIGH``, an expression located at the ``dist`` key."""
    if not text.strip():
        raise t.error("dist", "expected int:LOW..HIGH or distinct:LOW..HIGH (e.g. int:0..max_pos)")
    return Expr.parse(text.strip(), t.loc("dist"))


def _check_points(spec: Spec, top: _Table) -> None:
    """Every listed shape must satisfy the constraints and give non-negative sizes."""
    for shape_set in spec.shapes:
        for index, point in enumerate(shape_set.points):
            env = spec.env(point)
            for expr in spec.require:
                if not expr.evaluate_bool(env):
                    raise KtxError(
                        f"shapes.{shape_set.name}: {point.name} violates constraint {expr.text!r}",
                        top.pos.locate(("shapes", shape_set.name, index)),
                    )
            for arg in spec.all_args:
                if arg.is_array:
                    dims = arg.dims(env)
                    if arg.dist.bounds is not None:
                        arg.dist.range(env, _count(dims))
                elif arg.value is not None:
                    arg.value.evaluate(env)
                for _, expr in arg.fields:
                    expr.evaluate({**env, "i": 0} if arg.is_array else env)
            for expr in (*spec.launch.grid, *spec.launch.block, spec.launch.shared):
                expr.evaluate_int(env)


def _count(dims: Sequence[int]) -> int:
    count = 1
    for d in dims:
        count *= d
    return count


def find_specs(root: str | Path) -> list[Path]:
    """Kernel folders under ``root`` (itself included) that hold a ``ktx.toml``, sorted."""
    base = Path(root)
    if (base / SPEC_FILE).is_file():
        return [base]
    return sorted(p.parent for p in base.glob(f"*/{SPEC_FILE}"))


def spec_kernel(kernels: Sequence[Any], spec: Spec) -> Any:
    """The kernel ``spec`` means among a file's ``kernels``: the one of its name, and of several
    overloads of that name (lmdeploy's two ``ActivationKernel``) the one whose parameters are
    the spec's ``[[args]]`` by name and count (an unnamed parameter matches any); else the first
    of its name (the checks then say where the arguments differ), or None."""
    named = [k for k in kernels if k.name == spec.kernel]
    if len(named) > 1:
        wanted = [a.name for a in spec.args]
        for k in named:
            names = [p.name for p in k.params]
            if len(names) == len(wanted) and all(not n or n == w for n, w in zip(names, wanted, strict=True)):
                return k
    return named[0] if named else None
