"""The compile-time settings a kernel's author already made tunable: which template parameters,
``constexpr`` and ``#define`` integers set its block size, items per thread, rows per block or
vector width (issue 22: "every kernel whose block size, items per thread or vector width is a
template parameter or constexpr gets it as a knob").

Why a fact of its own: the passes that turn these into knobs (``expose``, ``block-size``) each
see the constants they take; a checker (``benchmarks/realcode/knobcheck.py``) has to ask the
other way round, per kernel, which settings *exist*, so that one no pass takes is visible as a
gap rather than as silence. The role is read from how the kernel uses the name, most telling
first:

* ``block``: the launch's block size (a :attr:`LaunchFacts.block_aliases` name), a
  ``__launch_bounds__`` argument, or a name that says threads/block size/warps;
* ``vector``: the size argument of a vector type (``vec_t<T, VEC_SIZE>``, ``AlignedVector<T, N>``)
  or a name that says vector/pack/granularity;
* ``rows``: a name that says rows;
* ``items``: the bound of a loop in the kernel (``for (i = 0; i < NUM_PER_TH; ++i)``) or a name
  that says unroll/items/per-thread;
* otherwise it is no tuning setting (``DATA_TYPE``, ``STOCHASTIC``, a ``bool`` switch): it
  selects what is computed.

A value comes from the bound template arguments (the spec's ``template_args``: the
instantiation ktx measures), else from the launches in the file. ``spec_selected`` marks an
argument the spec computes from a shape
(``{cdiv(dim, 2048)}``): the launcher's pick by shape, which a knob would only replace when the
kernel computes the same result at every value.

>>> from ktx.ir import parse
>>> m = parse('''template <int THREADS, int NUM_PER_TH, int DATA_TYPE>
... __global__ void k(float* y, const float* x) {
...   for (int j = 0; j < NUM_PER_TH; j++) y[threadIdx.x * NUM_PER_TH + j] = x[j] * DATA_TYPE; }''')
>>> [(t.name, t.role, t.value) for t in tuning_params(m, m.kernels[0], ("256", "4", "0"))]
[('THREADS', 'block', 256), ('NUM_PER_TH', 'items', 4)]
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from ktx.ir import Function, Module, Span, syntax
from ktx.ir.analysis import PerfConstant, perf_constants
from ktx.ir.consteval import int_literal
from ktx.ir.facts.constants import sizes_the_data, spec_selected

Role = Literal["block", "vector", "rows", "items"]

_BLOCK = re.compile(r"THREAD|NTHR|BLOCK_?(SIZE|DIM|X)|^BS$|^BLOCK$|WARPS", re.I)
_VECTOR = re.compile(r"VEC|PACK|GRANULARITY|WIDTH|ALIGN", re.I)
_ROWS = re.compile(r"ROWS", re.I)
_ITEMS = re.compile(r"UNROLL|ITEMS|PER_?TH|NUM_PER|ELEMS|_PT$|PER_THREAD", re.I)
#: Threads a block may hold: a "block size" above it counts something else.
_MAX_THREADS = 1024
#: A loop bound larger than this is a problem size (``i < n``), not items per thread.
_MAX_ITEMS = 64
_INTEGRAL = re.compile(r"^(unsigned\s+|signed\s+)?(int|long|short|size_t|u?int(8|16|32|64)_t|uint)$")


@dataclass(frozen=True)
class TuningParam:
    """One author-made setting of the kernel and the role its uses give it."""

    name: str
    kind: Literal["template-int", "constexpr", "define"]
    role: Role
    value: int | None
    """Its value at this launch (the file's launch, else the bound template argument)."""
    span: Span
    why: str
    """What made it this role (the use or the name)."""
    spec_selected: bool = False
    """The spec computes it from a shape (``{...}``): the launcher's pick by shape."""
    index: int | None = None
    """Its position among the kernel's template parameters (template-int only)."""
    adapts: bool = False
    """The kernel derives its coverage from it at run time: a loop steps by it, or a run-time
    extent is divided by it (FlashInfer's ``rounds = ceil_div(d, VEC_SIZE * num_threads)``).
    Then another value still covers the data; a width that only sizes per-thread arrays
    (DeepSpeed's ``T q[granularity / sizeof(T)]``, each thread of a fixed group owning a fixed
    slice) moves the data a launch covers, and the launch with it."""


def tuning_params(module: Module, fn: Function, template_args: Sequence[str] = ()) -> tuple[TuningParam, ...]:
    """The kernel's block-size, vector-width, rows and items-per-thread settings (see the module)."""
    found: list[TuningParam] = []
    block_names = {a.name for a in module.facts(fn, tuple(template_args) or None).launch.block_aliases}
    bounds = _launch_bounds_names(module, fn)
    vector_args = _vector_size_names(module, fn)
    blocks = [site.block for site in module.launches_of(fn.name)]
    for c in perf_constants(module):
        if c.kind == "launch-literal":
            continue
        if c.kind == "template-int":
            if c.kernel != fn.name:
                continue
        elif c.name in {tp.name for tp in fn.template_params}:
            continue  # shadowed in the kernel by its own template parameter of that name
        elif not any(fn.span.contains(u.span) or any(b.contains(u.span) for b in blocks) for u in c.uses):
            continue
        got = _param(module, fn, c, template_args, block_names, bounds, vector_args)
        if got is not None:
            found.append(got)
    # A kernel's own integral template parameters that perf_constants types otherwise
    # (``uint32_t VEC_SIZE``) are listed too.
    seen = {t.name for t in found}
    for tp in fn.template_params:
        if tp.kind != "value" or tp.name in seen or not _INTEGRAL.match((tp.type or "").strip()):
            continue
        c = PerfConstant(tp.name, "template-int", None, tp.span, fn.name, ())
        got = _param(module, fn, c, template_args, block_names, bounds, vector_args)
        if got is not None:
            found.append(got)
    return tuple(found)


def _param(
    module: Module,
    fn: Function,
    c: PerfConstant,
    template_args: Sequence[str],
    block_names: set[str],
    bounds: set[str],
    vector_args: set[str],
) -> TuningParam | None:
    """``c`` as a tuning setting of ``fn``, or None when its uses give it no role."""
    if c.kind == "launch-literal":
        return None
    value, selected, index = c.value, False, None
    if c.kind == "template-int":
        index = next(i for i, p in enumerate(fn.template_params) if p.name == c.name)
        arg = template_args[index] if index < len(template_args) else ""
        selected = spec_selected(arg)
        bound = int_literal(arg) if arg else None
        value = bound if bound is not None else value
    role_why = _role(module, fn, c, value, block_names, bounds, vector_args)
    if role_why is None:
        return None
    role, why = role_why
    return TuningParam(c.name, c.kind, role, value, c.span, why, selected, index, _adapts(module, fn, c.name))


def _role(
    module: Module,
    fn: Function,
    c: PerfConstant,
    value: int | None,
    block_names: set[str],
    bounds: set[str],
    vector_args: set[str],
) -> tuple[Role, str] | None:
    if c.name in block_names:
        return "block", "the launch's block size"
    if c.name in bounds:
        return "block", "__launch_bounds__"
    if _BLOCK.search(c.name) and (value is None or value <= _MAX_THREADS):
        # (bitsandbytes' BLOCK_SIZE = 4096 is the quantization block, no thread count)
        return "block", "named as a block size"
    if c.name in vector_args:
        return "vector", "the size of a vector type"
    if _VECTOR.search(c.name):
        return "vector", "named as a vector width"
    if _ROWS.search(c.name):
        return "rows", "named as rows"
    body = syntax.function_node(module, fn)
    if sizes_the_data(module, body, fn, c.name) is not None:
        return None  # a dimension of a buffer's layout (``TOPK``): what is computed, not how fast
    if _ITEMS.search(c.name):
        return "items", "named as items per thread"
    for lp in module.loops_in(fn):
        if lp.cond is None or not fn.span.contains(lp.span):
            continue
        bound = re.search(rf"<=?\s*\(?\s*{re.escape(c.name)}\b", module.text(lp.cond))
        if bound is not None and (value is None or value <= _MAX_ITEMS):
            return "items", "a loop bound"
    return None


def _launch_bounds_names(module: Module, fn: Function) -> set[str]:
    if fn.launch_bounds is None:
        return set()
    return set(re.findall(r"[A-Za-z_]\w*", fn.launch_bounds.max_threads))


def _vector_size_names(module: Module, fn: Function) -> set[str]:
    """Names written as the last argument of a template type that also takes a type
    (``vec_t<float, VEC_SIZE>``): a vector width."""
    names: set[str] = set()
    for node in syntax.walk(syntax.function_node(module, fn)):
        if node.type != "template_argument_list":
            continue
        args = node.named_children
        if len(args) >= 2 and args[0].type == "type_descriptor":
            last = syntax.text(module, args[-1]).strip()
            if re.fullmatch(r"[A-Za-z_]\w*", last):
                names.add(last)
    return names


def _adapts(module: Module, fn: Function, name: str) -> bool:
    """Whether a loop of the kernel steps by ``name`` or a run-time value is divided by it
    (``n / (VEC * threads)``, ``ceil_div(d, VEC * threads)``), see :attr:`TuningParam.adapts`."""
    word = re.compile(rf"\b{re.escape(name)}\b")
    for lp in module.loops_in(fn):
        if lp.step is not None and word.search(module.text(lp.step)):
            return True
    scalars = {p.name for p in fn.params if not p.is_pointer}
    for node in syntax.walk(syntax.function_node(module, fn)):
        divisor: str | None = None
        dividend = ""
        if node.type == "binary_expression":
            op = node.child_by_field_name("operator")
            if op is not None and syntax.text(module, op) == "/":
                left, right = node.child_by_field_name("left"), node.child_by_field_name("right")
                dividend = syntax.text(module, left) if left is not None else ""
                divisor = syntax.text(module, right) if right is not None else None
        elif node.type == "call_expression":
            callee = node.child_by_field_name("function")
            args = node.child_by_field_name("arguments")
            if callee is not None and args is not None and "div" in syntax.text(module, callee).lower():
                named = args.named_children
                if len(named) == 2:
                    dividend, divisor = syntax.text(module, named[0]), syntax.text(module, named[1])
        if divisor is None or not word.search(divisor):
            continue
        if any(re.search(rf"\b{re.escape(s)}\b", dividend) for s in scalars):
            return True
    return False
