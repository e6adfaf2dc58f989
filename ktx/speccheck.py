"""The spec against its source: where ``ktx.toml`` contradicts what the kernel declares and does.

A spec that contradicts the source can make verification vacuous (issue 21): with ``out`` and
``in`` swapped the declared output is a buffer nobody writes, so it keeps its poison in the
original and in every candidate, and every candidate "matches". Other contradictions run
something other than what the source launches: ``fp32`` for a ``const __half*`` draws and
compares the wrong bytes; a template argument no launch uses tunes an instantiation production
never runs; one ``[[args]]`` too many or a renamed one binds values to the wrong parameters.

:func:`contradictions` compares, each against the facts of the source
(:mod:`ktx.ir.facts.signature`), and only where the source is clear (an unknown type, a deduced
template argument, a pointer the analysis loses are no finding):

* the number and names of ``[[args]]`` against the kernel's parameters, in order, and arrays
  against pointers;
* roles against reads and writes: an ``in`` the kernel provably stores to; an ``out``/``inout``
  it never writes (nor hands to code that may);
* dtypes against the parameters' element types (template arguments bound, aliases followed;
  integers of one size agree whatever their sign);
* ``template_args`` against the kernel's template parameters (how many) and the arguments the
  file's launches give each (every shape point's value of a ``{var}`` argument).

Each finding names the ``ktx.toml`` line to edit and the source line it contradicts.
``ktx init --check`` lists them (:mod:`ktx.check`); loading a spec refuses the one that makes
verification vacuous, an output the kernel never writes (:func:`refuse_unwritten_outputs`).
"""

from __future__ import annotations

import functools
import os
import re
from dataclasses import dataclass
from typing import TYPE_CHECKING

from ktx.ir import Function, Module, parse
from ktx.ir.errors import KtxError, Location
from ktx.ir.expr import expand
from ktx.ir.facts.signature import ParamFact, launched_template_args, param_facts

from ktx.dtypes import DType, of_ctype
from ktx.tomlpos import TomlPositions

if TYPE_CHECKING:  # types only: ktx.spec calls this module at load
    from ktx.spec import Arg, Spec


@dataclass(frozen=True)
class Contradiction:
    """One place where the spec says what the source does not."""

    kind: str
    """``args``, ``role``, ``unwritten``, ``dtype`` or ``template``."""
    line: int
    """The ``ktx.toml`` line to edit."""
    col: int
    source: Location
    """The source line the spec contradicts."""
    message: str
    hint: str

    def __str__(self) -> str:
        return f"{self.source}: {self.message} ({self.hint})"


def contradictions(spec: Spec, text: str | None = None) -> list[Contradiction]:
    """Every contradiction between ``spec`` (whose TOML is ``text``) and its kernel's source; none
    when the source cannot be read or does not define the kernel (other checks say so)."""
    found = _read(spec)
    if found is None:
        return []
    module, fn = found
    if text is None:
        text = spec.path.read_text(errors="replace") if spec.path.is_file() else ""
    return _Compare(spec, module, fn, TomlPositions.scan(text, str(spec.path))).run()


def refuse_unwritten_outputs(spec: Spec) -> None:
    """At spec load: an ``out``/``inout`` argument the kernel never writes is an error, since
    verification against the original would then pass any candidate."""
    try:
        source = (spec.folder / spec.source).read_text(errors="replace")
    except OSError:
        return
    found = _first_unwritten(spec, source)
    if found is not None:
        raise KtxError(
            f"{found.message} ({found.source})", Location(str(spec.path), found.line, found.col), found.hint
        )


@functools.lru_cache(maxsize=64)
def _first_unwritten(spec: Spec, source_text: str) -> Contradiction | None:
    found = _read(spec, source_text)
    if found is None:
        return None
    module, fn = found
    text = spec.path.read_text(errors="replace") if spec.path.is_file() else ""
    compare = _Compare(spec, module, fn, TomlPositions.scan(text, str(spec.path)))
    compare.roles(only_unwritten=True)
    return compare.found[0] if compare.found else None


def _read(spec: Spec, source_text: str | None = None) -> tuple[Module, Function] | None:
    path = spec.folder / spec.source
    try:
        text = source_text if source_text is not None else path.read_text(errors="replace")
        module = parse(text, str(path))
    except (OSError, KtxError):
        return None
    from ktx.spec import spec_kernel  # ktx.spec imports this module

    fn = spec_kernel(module.kernels, spec)  # of several overloads, the one its args name
    if fn is None or module.kernel_errors(fn):
        return None  # a kernel the parse does not follow is not compared
    return module, fn


class _Compare:
    def __init__(self, spec: Spec, module: Module, fn: Function, pos: TomlPositions) -> None:
        self.spec, self.module, self.fn, self.pos = spec, module, fn, pos
        self.found: list[Contradiction] = []
        self.cu = os.path.normpath(spec.folder / spec.source)
        self.cu_name = os.path.basename(spec.source)
        targs = tuple(spec.template_args)
        self.params: tuple[ParamFact, ...] = param_facts(module, fn, targs if fn.template_params else None)

    def run(self) -> list[Contradiction]:
        self.args()
        self.roles()
        self.dtypes()
        self.templates()
        return self.found

    def add(
        self, kind: str, key: tuple[str | int, ...], at: tuple[int, int], message: str, hint: str
    ) -> None:
        where = self.pos.locate(key)
        self.found.append(
            Contradiction(kind, where.line, where.col, Location(self.cu, at[0], at[1]), message, hint)
        )

    def _pairs(self) -> list[tuple[int, Arg, ParamFact]]:
        return [(i, a, p) for i, (a, p) in enumerate(zip(self.spec.args, self.params, strict=False))]

    # -- [[args]] against the parameters ---------------------------------------------------------

    def args(self) -> None:
        spec, fn = self.spec, self.fn
        if any("..." in p.type for p in fn.params):
            return  # a parameter pack: any count may be right
        names = ", ".join(p.name or "?" for p in fn.params)
        last = fn.params[-1].span if fn.params else fn.signature
        takes = f"{fn.name} takes {len(fn.params)} parameter{'s' if len(fn.params) != 1 else ''} ({names})"
        for i, arg in enumerate(spec.args[len(fn.params) :], start=len(fn.params)):
            self.add(
                "args",
                ("args", i, "name"),
                (last.line, last.col),
                f"[[args]] #{i + 1} {arg.name!r} is one more than the kernel's parameters: {takes}",
                "remove this [[args]] entry, or check the kernel name",
            )
        if len(spec.args) < len(fn.params):
            missing = ", ".join(p.name or f"#{i + 1}" for i, p in enumerate(fn.params) if i >= len(spec.args))
            self.add(
                "args",
                ("args", len(spec.args) - 1),
                (last.line, last.col),
                f"[[args]] lists {len(spec.args)} of {fn.name}'s {len(fn.params)} parameters: "
                f"{missing} missing",
                "add an [[args]] entry for each, in the kernel's order",
            )
        for i, arg, param in self._pairs():
            p = fn.params[i]
            if p.name and arg.name != p.name:
                self.add(
                    "args",
                    ("args", i, "name"),
                    param.at,
                    f"[[args]] #{i + 1} is named {arg.name!r}, but {fn.name}'s parameter {i + 1} "
                    f"is {p.name!r}",
                    f'write name = "{p.name}": the spec binds arguments by position',
                )
            if arg.is_array and not param.pointer_depth and "[" not in p.type:
                self.add(
                    "args",
                    ("args", i, "shape"),
                    param.at,
                    f"[[args]] {arg.name} is an array (it has a shape), but the kernel takes "
                    f"{p.type} {p.name} by value",
                    'give it value = "..." instead of shape and role',
                )
            elif not arg.is_array and not arg.null and param.pointer_depth:
                self.add(
                    "args",
                    ("args", i, "value"),
                    param.at,
                    f"[[args]] {arg.name} is a scalar (it has a value), but the kernel takes a "
                    f"pointer ({p.type})",
                    "give it shape and role instead of value",
                )

    # -- roles against reads and writes ---------------------------------------------------------

    def roles(self, only_unwritten: bool = False) -> None:
        fn = self.fn
        for i, arg, param in self._pairs():
            p = fn.params[i]
            if not arg.is_array or not param.pointer_depth or (p.name and arg.name != p.name):
                continue
            key = ("args", i, "role") if ("args", i, "role") in self.pos.where else ("args", i, "name")
            if arg.is_output and not param.may_write:
                why = (
                    "it is a pointer to const"
                    if param.const
                    else "no store reaches it, nor a call that may write"
                )
                self.add(
                    "unwritten",
                    key,
                    param.at,
                    f'[[args]] {arg.name} is role = "{arg.role}", but {fn.name} never writes '
                    f"{p.name} ({why}): "
                    "the original would leave it at its poison and every candidate would match",
                    'is its role "in"?',
                )
            elif not only_unwritten and arg.role == "in" and param.stored:
                said = 'role = "in"' if ("args", i, "role") in self.pos.where else 'role "in" (the default)'
                self.add(
                    "role",
                    key,
                    param.store_at or param.at,
                    f"[[args]] {arg.name} is {said}, but {fn.name} stores to {p.name}: "
                    "verification would not compare what it writes",
                    'is its role "out" or "inout"?',
                )

    # -- dtypes against element types -----------------------------------------------------------

    def dtypes(self) -> None:
        fn = self.fn
        for i, arg, param in self._pairs():
            p = fn.params[i]
            if (p.name and arg.name != p.name) or param.pointer_depth > 1 or not param.element_types:
                continue
            known = [(t, of_ctype(t)) for t in param.element_types]
            if any(d is None for _, d in known):
                continue  # one candidate type ktx has no dtype for: no verdict
            if any(_agree(arg.dtype, d) for _, d in known if d is not None):
                continue
            declared = f"{p.type} {p.name}" + ("" if p.is_pointer else " (by value)")
            resolved = " or ".join(f"{t} ({d.name})" for t, d in known if d is not None)
            via = "" if resolved.startswith(p.base_type + " ") else f", {p.base_type} is {resolved}"
            self.add(
                "dtype",
                ("args", i, "dtype"),
                param.at,
                f'[[args]] {arg.name} is dtype = "{arg.dtype.name}", but {fn.name} declares {declared}{via}',
                f'write dtype = "{next(d.name for _, d in known if d is not None)}"',
            )

    # -- template arguments ----------------------------------------------------------------------

    def templates(self) -> None:
        spec, fn = self.spec, self.fn
        tparams = fn.template_params
        key = ("template_args",)
        line = (fn.span.line, fn.span.col)
        if any(tp.variadic for tp in tparams):
            return
        if len(spec.template_args) > len(tparams):
            self.add(
                "template",
                key,
                line,
                f"template_args gives {len(spec.template_args)} arguments, but {fn.name} takes "
                f"{len(tparams)} template parameter{'s' if len(tparams) != 1 else ''}",
                "remove the extra ones",
            )
            return
        required = [tp for tp in tparams[len(spec.template_args) :] if tp.default is None]
        if required:
            self.add(
                "template",
                key if spec.template_args else ("kernel",),
                line,
                f"template_args gives {len(spec.template_args)} of {fn.name}'s {len(tparams)} template "
                f"parameters; {', '.join(tp.name for tp in required)} has no default",
                "give template_args for each, as the launch does",
            )
        launched = launched_template_args(self.module, fn)
        sites = self.module.launches_of(fn.name)
        at = (sites[0].span.line, sites[0].span.col) if sites else line
        for i, (given, tp, got) in enumerate(zip(spec.template_args, tparams, launched, strict=False)):
            if got is None:
                continue
            for value in self._values(given):
                if value is None or any(_same_arg(value, g, tp.kind) for g in got):
                    continue
                shown = ", ".join(sorted(got, key=_sort_key))
                self.add(
                    "template",
                    key,
                    at,
                    f"template_args[{i}] = {given!r}{'' if value == given else f' ({value})'}: no launch in "
                    f"{self.cu_name} instantiates {fn.name}'s {tp.name} with it (the launches give {shown})",
                    f"write one of {shown}, or add the launch production uses",
                )
                break

    def _values(self, given: str) -> list[str | None]:
        """``given`` at each shape point where it names shape variables (``{topk}``)."""
        if "{" not in given:
            return [" ".join(given.split())]
        out: dict[str, None] = {}
        for shape_set in self.spec.shapes:
            for point in shape_set.points:
                try:
                    out[" ".join(expand(given, self.spec.env(point)).split())] = None
                except (KtxError, ValueError, ZeroDivisionError, KeyError):
                    return [None]
        return list(out)


def _agree(declared: DType, source: DType) -> bool:
    """Integers of one width agree whatever their sign (the bytes are the same); every other
    dtype only with itself."""
    if declared.name == source.name:
        return True
    ints = ("int", "bool")
    return declared.kind in ints and source.kind in ints and declared.itemsize == source.itemsize


_INT_SUFFIX = re.compile(r"^([+-]?\d+)[uUlL]*$")


def _same_arg(a: str, b: str, kind: str) -> bool:
    if a == b:
        return True
    if kind == "value":
        ma, mb = _INT_SUFFIX.match(a), _INT_SUFFIX.match(b)
        if ma and mb:
            return int(ma.group(1)) == int(mb.group(1))
        bools = {"true": "1", "false": "0"}
        return bools.get(a, a) == bools.get(b, b)
    da, db = of_ctype(a), of_ctype(b)
    return da is not None and da == db


def _sort_key(text: str) -> tuple[int, str]:
    m = _INT_SUFFIX.match(text)
    return (int(m.group(1)), "") if m else (1 << 62, text)
