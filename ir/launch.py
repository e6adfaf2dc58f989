"""Launches: where the file launches each kernel, and the launch mapping read from there.

One module for what the source says about launches (issue 21 merged ``ir/launchmap.py`` and
``ktx/launch.py`` here), in two parts.

**Launch sites through wrappers.** Projects rarely write ``k<<<grid, block>>>(args)`` at every
call site. They write a helper once::

    template <typename Kernel, typename... Args>
    void launch(Kernel kernel, dim3 grid, dim3 block, cudaStream_t s, Args... args) {
      kernel<<<grid, block, 0, s>>>(args...);
    }
    ...
    launch(scale<float>, dim3(blocks), dim3(256), stream, y, x, n);

For ktx the launch of ``scale`` is the *call*: that is where its grid and block are computed,
and where a pass that changes them must edit. :func:`wrapper_sites` finds such helpers (a
function one of whose parameters is launched, by ``<<<...>>>`` or ``cudaLaunchKernel(Ex)``) and
turns each call to one that passes a kernel of the file into a :class:`LaunchSite` whose
``grid``/``block``/``shared``/``stream`` are the caller's arguments the helper forwards, and
whose ``wrapper`` names the helper. Helpers that call helpers are followed a few levels.

A helper that computes the geometry from its parameters (``dim3 grid(cdiv(n, 256))``) gives no
site: the launch's numbers are not written at the call, so no pass could edit them there.

A helper that launches ``<<<params.grid_dim, params.block_dim>>>`` from a params struct it is
given (llama.cpp's ``launch(kernel, params, args...)``) forwards the *fields*: the site's grid
and block are the values the caller assigned (``params.block_dim = dim3(32, 4);``) before the call.

A call to a function the file does not define, whose name says it launches (``launch_kernel``,
``LaunchKernel``) and whose arguments are a kernel of the file, then grid, then block, is read
the same way (the convention of ``cudaLaunchKernel``), with no shared memory or stream, unless
the grid or block argument is a local or parameter whose type cannot be a dimension (a params
struct, a pointer): then it makes no site, so no pass rewrites a kernel argument as a block.

**Dispatch macros and header pairs.** :func:`macro_expansions` binds each use of a launching
``#define`` (its arguments, its branch, the expanding function's locals) so that ``ktx init``
lists the branches it cannot choose; :func:`rebuilt_dim3` lets passes change one component of a
``dim3`` passed whole; :func:`kernel_across_includes` pairs a kernel defined in a header with
the ``.cu`` that includes and launches it.

**The launch mapping**: grid, block and shared memory as expressions of shape variables and knobs.

A template must say how to launch what it produces. :class:`LaunchMapping` holds that as
:mod:`ktx.ir.expr` text (``grid = ("tokens", "SPLIT")``, ``block = ("max(1, min(d // 8, 256))",)``),
plus named intermediate ``vars`` (the launcher's ``num_warps``) so that a pass that changes one
of them (block-size making ``num_warps`` a knob) changes every expression that uses it (the
shared-memory size follows the warp count). :meth:`LaunchMapping.resolved` inlines the vars for
consumers that want standalone expressions (the measurement harness's ``Candidate``).

The mapping starts from the caller (the spec's ``[launch]``) or, failing that, from the kernel's
launch site in the file: :func:`mapping_from_file` translates the launcher's C++ (``std::min``,
``/`` on integers, ``sizeof``, casts, locals) into the expression language. The same module
finds, for passes, the C++ nodes of each launch dimension (:func:`launch_dims`), so that a
pass rewrites the launcher and the mapping in step.
"""

from __future__ import annotations

import ast
import functools
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING

import tree_sitter as ts
from ktx.ir import syntax
from ktx.ir.consteval import SIZEOF, int_literal
from ktx.ir.errors import KtxError
from ktx.ir.expr import Expr, Value
from ktx.ir.facts import assign
from ktx.ir.language import captures, macro_body_tree
from ktx.ir.nodes import Function, LaunchSite
from ktx.ir.source import Span

if TYPE_CHECKING:
    from ktx.ir.module import Module


#: Rounds of "a helper calls a helper" followed.
MAX_DEPTH = 3
_LAUNCHER_NAME = re.compile(r"launch", re.I)
_RUNTIME = {"cudaLaunchKernel", "cudaLaunchKernelEx", "cudaLaunchCooperativeKernel"}
#: ``params.block_dim`` / ``p->grid``: a field of a helper's parameter.
_PARAM_FIELD = re.compile(r"(\w+)\s*(?:\.|->)\s*(\w+)")


Forward = int | tuple[int, str]
"""A launch value a helper forwards: its parameter ``i``, or the field ``(i, name)`` of it."""


@dataclass(frozen=True)
class Wrapper:
    """A function that launches one of its parameters, and where each launch value comes from.

    Each of ``grid``, ``block``, ``shared``, ``stream`` is the index of the parameter forwarded
    (``int``), a field of a parameter (``(index, "block_dim")`` for a helper that launches
    ``<<<params.grid_dim, params.block_dim>>>``: the caller sets ``params.block_dim = ...`` before
    the call, and that value is the launch's), ``None`` when the launch does not set it, or the
    span of text inside the helper that names no parameter (a literal ``0`` of shared memory).
    """

    name: str
    kernel: int
    grid: Forward
    block: Forward
    shared: Forward | Span | None
    stream: Forward | Span | None
    args: tuple[int | str, ...]
    """Per kernel argument: the parameter forwarded, or ``"*"`` for the variadic pack."""
    pack: int | None
    """Index of the variadic parameter (``Args... args``), if any."""


@dataclass(frozen=True)
class Host:
    """What :func:`wrapper_sites` needs from the indexer: the source, spans, names of kernels."""

    source: bytes
    span: Callable[[ts.Node], Span]
    kernel_ref: Callable[[ts.Node, ts.Node | None], tuple[str, list[ts.Node]] | None]
    """The kernel an expression names (``k<T>``, ``&k``, ``(void*)k``) and its template arguments."""
    function_name: Callable[[ts.Node], str]

    def text(self, node: ts.Node | None) -> str:
        return "" if node is None else self.source[node.start_byte : node.end_byte].decode("utf-8", "replace")

    def span_text(self, span: Span) -> str:
        return self.source[span.start : span.end].decode("utf-8", "replace")


class _Computed:
    """A launch value the wrapper computes from its parameters: not written at the call."""


_COMPUTED = _Computed()


def wrapper_sites(
    root: ts.Node, functions: list[Function], sites: list[LaunchSite], host: Host
) -> list[LaunchSite]:
    """The launch sites that calls to launch wrappers make (see the module docstring)."""
    kernels = {f.name for f in functions if f.is_kernel}
    by_name = {f.name: f for f in functions}
    calls = list(_calls(root))
    found: list[LaunchSite] = []
    seen: set[tuple[int, str]] = set()
    frontier = list(sites)
    for _ in range(MAX_DEPTH):
        wrappers = {}
        for site in frontier:
            w = _wrapper(site, by_name, kernels, host)
            if w is not None:
                wrappers[w.name] = w
        new: list[LaunchSite] = []
        for call, callee in calls:
            w = wrappers.get(callee)
            if w is None:
                continue
            made = _site_of_call(call, w, host)
            if made is not None and (call.start_byte, made.kernel) not in seen:
                seen.add((call.start_byte, made.kernel))
                new.append(made)
        found.extend(s for s in new if s.kernel in kernels)
        frontier = [s for s in new if s.kernel not in kernels]
        if not frontier:
            break
    defined = set(by_name)
    for call, callee in calls:
        if callee in defined or callee in _RUNTIME or not _LAUNCHER_NAME.search(callee):
            continue
        conventional = _conventional_site(call, callee, kernels, host)
        if conventional is not None and (call.start_byte, conventional.kernel) not in seen:
            seen.add((call.start_byte, conventional.kernel))
            found.append(conventional)
    return found


@functools.lru_cache(maxsize=32)
def _calls(root: ts.Node) -> tuple[tuple[ts.Node, str], ...]:
    """Every call in the file with its callee's last name (``ns::launch<T>`` -> ``launch``).

    Cached per tree (a node equals another only in the same tree, and a cached node keeps its
    tree alive): indexing a file asks for every launch site about twenty times per parse. The
    calls are found by a tree-sitter query (``queries/calls.scm``), in C: the walk over every
    node in Python it replaced was the hottest function of the test suite (a fifth of the CPU of
    tests/ir and tests/passes). They come in the order that walk gave them (a call before the
    calls inside it, later calls first), which decides the order of launch sites found at the
    same offset."""
    nodes = sorted(captures("calls", root).get("call", []), key=lambda n: (-n.end_byte, n.start_byte))
    found: list[tuple[ts.Node, str]] = []
    for node in nodes:
        name = _last_name(node.child_by_field_name("function"))
        if name:
            found.append((node, name))
    return tuple(found)


def _last_name(node: ts.Node | None) -> str:
    while node is not None and node.type in ("qualified_identifier", "template_function"):
        node = node.child_by_field_name("name")
    if node is None or node.type != "identifier":
        return ""
    return node.text.decode("utf-8", "replace") if node.text is not None else ""


def _wrapper(site: LaunchSite, by_name: dict[str, Function], kernels: set[str], host: Host) -> Wrapper | None:
    """The wrapper a launch of a parameter makes of its function, when it forwards grid and block."""
    if site.kernel in kernels or site.function is None or site.macro is not None:
        return None
    fn = by_name.get(site.function)
    if fn is None or fn.is_kernel:
        return None
    names = [p.name for p in fn.params]
    if site.kernel not in names:
        return None

    def ref(span: Span | None) -> Forward | Span | _Computed | None:
        if span is None:
            return None
        text = host.span_text(span).strip()
        if text in names:
            return names.index(text)
        field_of = _PARAM_FIELD.fullmatch(text)
        if field_of is not None and field_of.group(1) in names:
            return names.index(field_of.group(1)), field_of.group(2)
        if any(re.search(rf"\b{re.escape(n)}\b", text) for n in names if n):
            return _COMPUTED
        return span

    grid, block = ref(site.grid), ref(site.block)
    shared, stream = ref(site.shared), ref(site.stream)
    if not isinstance(grid, int | tuple) or not isinstance(block, int | tuple):
        return None
    if isinstance(shared, _Computed) or isinstance(stream, _Computed):
        return None
    pack = next((i for i, p in enumerate(fn.params) if p.type.rstrip().endswith("...")), None)
    args: list[int | str] = []
    # ``cudaLaunchKernel(kernel, grid, block, void** args, ...)``: the kernel's arguments sit in
    # an array built inside the helper; the call site does not show them.
    for a in site.args if site.api is None else ():
        a = a.strip()
        if pack is not None and a == f"{names[pack]}...":
            args.append("*")
        elif a in names:
            args.append(names.index(a))
        else:
            return None
    return Wrapper(
        fn.name,
        names.index(site.kernel),
        grid,
        block,
        shared,
        stream,
        tuple(args),
        pack,
    )


def _arguments(call: ts.Node) -> list[ts.Node]:
    args = call.child_by_field_name("arguments")
    return [a for a in args.named_children if a.type != "comment"] if args is not None else []


def _site_of_call(call: ts.Node, w: Wrapper, host: Host) -> LaunchSite | None:
    args = _arguments(call)
    needed = max(i if isinstance(i, int) else i[0] for i in (w.kernel, w.grid, w.block))
    if len(args) <= needed:
        return None
    fn = _enclosing_function(call)
    ref = host.kernel_ref(args[w.kernel], fn)
    if ref is None:
        return None
    kernel, targs = ref

    def node(which: Forward) -> ts.Node | None:
        if isinstance(which, int):
            return args[which] if which < len(args) else None
        index, name = which
        if index >= len(args) or fn is None:
            return None
        return _field_value(host.source, fn, args[index], name, call.start_byte)

    def value(which: Forward | Span | None) -> Span | None:
        if which is None:
            return None
        if isinstance(which, Span):
            return which
        found = node(which)
        return host.span(found) if found is not None else None

    grid_node, block_node = node(w.grid), node(w.block)
    if grid_node is None or block_node is None:
        return None

    kernel_args: list[str] = []
    for a in w.args:
        if a == "*":
            start = w.pack if w.pack is not None else len(args)
            kernel_args.extend(host.text(x) for x in args[start:])
        elif isinstance(a, int) and a < len(args):
            kernel_args.append(host.text(args[a]))
    call_args = call.child_by_field_name("arguments") or call
    return LaunchSite(
        kernel=kernel,
        template_args=tuple(host.text(t) for t in targs),
        template_arg_spans=tuple(host.span(t) for t in targs),
        grid=host.span(grid_node),
        block=host.span(block_node),
        shared=value(w.shared),
        stream=value(w.stream),
        args=tuple(kernel_args),
        function=_function_name(fn, host),
        span=host.span(call),
        config=host.span(call_args),
        wrapper=w.name,
    )


def _field_value(source: bytes, fn: ts.Node, arg: ts.Node, name: str, before: int) -> ts.Node | None:
    """The value the caller gave ``arg.name`` before the call (``params.block_dim = dim3(256);``).

    Only a plain local passed by name (or by address, ``&params``) is followed; a field set in
    a branch has no one value (see :func:`dim3_field_assignments`), so the call makes no site.
    """
    while arg.type == "pointer_expression" and arg.child_by_field_name("argument") is not None:
        arg = arg.child_by_field_name("argument") or arg
    body = fn.child_by_field_name("body")
    if arg.type != "identifier" or body is None:
        return None
    return dim3_field_assignments(source, body, _node_text(source, arg), before).get(name)


def _conventional_site(call: ts.Node, callee: str, kernels: set[str], host: Host) -> LaunchSite | None:
    """``launch_kernel(k, grid, block, args...)`` of a helper the file does not define."""
    args = _arguments(call)
    fn = _enclosing_function(call)
    for i, arg in enumerate(args[:2]):
        ref = host.kernel_ref(arg, fn)
        if ref is None or ref[0] not in kernels or len(args) < i + 3:
            continue
        grid, block, shared, first = args[i + 1], args[i + 2], None, i + 3
        if fn is not None and not all(_may_be_dimension(host, fn, a) for a in args[i + 1 : i + 3]):
            # ``launch(k, params, out, in)``: the helper takes a params struct, not grid and
            # block; reading ``out`` as the block would let passes rewrite a kernel argument.
            # A params struct the function builds from its values in one piece (ggml's
            # ``launch_params = ggml_cuda_kernel_launch_params{block_nums, block_dims, 0, s}``)
            # gives them: its first values, when they may be dimensions.
            built = _built_params(host, fn, args[i + 1], call.start_byte)
            if built is None or not all(_may_be_dimension(host, fn, a) for a in built[:2]):
                return None
            grid, block, first = built[0], built[1], i + 2
            shared = built[2] if len(built) > 2 else None
        kernel, targs = ref
        call_args = call.child_by_field_name("arguments") or call
        return LaunchSite(
            kernel=kernel,
            template_args=tuple(host.text(t) for t in targs),
            template_arg_spans=tuple(host.span(t) for t in targs),
            grid=host.span(grid),
            block=host.span(block),
            shared=host.span(shared) if shared is not None else None,
            stream=None,
            args=tuple(host.text(a) for a in args[first:]),
            function=_function_name(fn, host),
            span=host.span(call),
            config=host.span(call_args),
            wrapper=callee,
        )
    return None


def _built_params(host: Host, fn: ts.Node, arg: ts.Node, before: int) -> list[ts.Node] | None:
    """The values a local params struct ``arg`` is built from in its declaration, in order:
    ``P p = P{a, b, c}``, ``P p = P(a, b, c)``, ``P p = {a, b, c}``, ``P p(a, b, c)`` (the
    last declaration before ``before``). None for anything else (fields set one by one, a
    parameter, a copy), or fewer than two values."""
    if arg.type != "identifier":
        return None
    name = host.text(arg)
    found: ts.Node | None = None
    stack = [fn]
    while stack:
        node = stack.pop()
        stack.extend(node.children)
        if node.type != "init_declarator" or node.start_byte >= before:
            continue
        ident = node.child_by_field_name("declarator")
        mine = ident is not None and ident.type == "identifier" and host.text(ident) == name
        if mine and (found is None or node.start_byte > found.start_byte):
            found = node
    value = found.child_by_field_name("value") if found is not None else None
    if value is None:
        return None
    if value.type == "compound_literal_expression":
        value = value.child_by_field_name("value")
    elif value.type == "call_expression":
        value = value.child_by_field_name("arguments")
    if value is None or value.type not in ("initializer_list", "argument_list"):
        return None
    items = [c for c in value.named_children if c.type != "comment"]
    return items if len(items) >= 2 else None


#: Types a grid or block argument may have (after ``const``/``unsigned`` and ``&`` are dropped).
_DIMENSION_TYPES = {
    "dim3",
    "uint3",
    "int",
    "long",
    "short",
    "size_t",
    "int32_t",
    "int64_t",
    "uint32_t",
    "uint64_t",
    "auto",
    "long long",
    "unsigned",
    "",
}


def _may_be_dimension(host: Host, fn: ts.Node, arg: ts.Node) -> bool:
    """False when ``arg`` is a name the function declares as a pointer or a non-integer type.

    A conventional ``launch_kernel(k, grid, block, ...)`` is only trusted when its grid and
    block could be dimensions: a local ``launch_params params`` or a pointer parameter cannot.
    Names the function does not declare (a global, a macro) and expressions are given the
    benefit of the doubt, since their text is what the caller wrote as a launch value.
    """
    if arg.type != "identifier":
        return True
    declared = _declared_in(host, fn, host.text(arg))
    if declared is None:
        return True
    type_text, pointer = declared
    qualifiers = ("const", "constexpr", "static", "unsigned")
    words = [w for w in type_text.replace("&", " ").split() if w not in qualifiers]
    return not pointer and " ".join(words).removeprefix("std::") in _DIMENSION_TYPES


def _declared_in(host: Host, fn: ts.Node, name: str) -> tuple[str, bool] | None:
    """(type text, is a pointer) of the parameter or local ``name`` of ``fn``, if declared there."""
    stack = [fn]
    while stack:
        node = stack.pop()
        stack.extend(node.children)
        if node.type not in ("parameter_declaration", "declaration", "optional_parameter_declaration"):
            continue
        type_node = node.child_by_field_name("type")
        for first in node.children_by_field_name("declarator"):
            pointer = False
            decl: ts.Node | None = first
            while decl is not None and decl.type != "identifier":
                pointer = pointer or decl.type in ("pointer_declarator", "array_declarator")
                inner = decl.child_by_field_name("declarator")
                if inner is None:
                    named = decl.named_children
                    inner = next((c for c in named if "declarator" in c.type or c.type == "identifier"), None)
                decl = inner
            if decl is not None and host.text(decl) == name:
                return host.text(type_node), pointer
    return None


def _enclosing_function(node: ts.Node) -> ts.Node | None:
    parent = node.parent
    while parent is not None and parent.type != "function_definition":
        parent = parent.parent
    return parent


def _function_name(fn: ts.Node | None, host: Host) -> str | None:
    return host.function_name(fn) if fn is not None else None


def dim3_field_assignments(source: bytes, scope: ts.Node, name: str, before: int) -> dict[str, ts.Node]:
    """``{"x": EXPR, ...}`` from ``name.x = EXPR;`` statements in ``scope`` before offset ``before``.

    Code that declares ``dim3 blockDim, gridDim;`` and then sets ``blockDim.x = NUM_THREADS;``
    gives its launch geometry this way; the last assignment of each field before the launch
    counts. An assignment inside a branch or loop makes the field unknown (absent), since which
    one reaches the launch depends on the run.
    """
    found: dict[str, ts.Node] = {}
    unknown: set[str] = set()
    stack = [scope]
    while stack:
        node = stack.pop()
        if node.start_byte >= before:
            continue
        stack.extend(node.children)
        if node.type != "assignment_expression":
            continue
        left, right = node.child_by_field_name("left"), node.child_by_field_name("right")
        op = node.child_by_field_name("operator")
        if left is None or right is None or left.type != "field_expression":
            continue
        obj, field = left.child_by_field_name("argument"), left.child_by_field_name("field")
        if obj is None or field is None or _node_text(source, obj) != name:
            continue
        key = _node_text(source, field)
        statement = node.parent
        direct = statement is not None and statement.parent is not None and statement.parent.id == scope.id
        if op is None or _node_text(source, op) != "=" or not direct:
            unknown.add(key)
        elif key not in found or found[key].start_byte < node.start_byte:
            found[key] = right
    return {k: v for k, v in found.items() if k not in unknown}


def _node_text(source: bytes, node: ts.Node) -> str:
    return source[node.start_byte : node.end_byte].decode("utf-8", "replace").strip()


@dataclass(frozen=True)
class OpaqueLaunch:
    """A kernel handed to a helper that launches it in a way ktx cannot edit at the call.

    ``launch(k, n)`` whose helper computes ``<<<cdiv(n, 256), 256>>>`` inside: the kernel runs
    with a block the call does not write. A pass that changes what block the kernel accepts
    (block-size's ``__launch_bounds__``) must refuse, since that launch would not follow.
    """

    kernel: str
    helper: str
    span: Span


def opaque_launches(
    root: ts.Node, functions: list[Function], sites: list[LaunchSite], host: Host
) -> tuple[OpaqueLaunch, ...]:
    """Calls that pass a kernel of the file to a launching helper and made no launch site.

    A launching helper launches one of its parameters (``<<<...>>>`` or the runtime API), or
    passes one to another launching helper. ``sites`` are all the sites found, wrappers included.
    """
    kernels = {f.name for f in functions if f.is_kernel}
    by_name = {f.name: f for f in functions}
    helpers: set[str] = set()
    for site in sites:
        fn = by_name.get(site.function or "")
        if fn is not None and not fn.is_kernel and site.kernel in {p.name for p in fn.params}:
            helpers.add(fn.name)
    calls = list(_calls(root))
    for _ in range(MAX_DEPTH):
        grown = False
        for call, callee in calls:
            if callee not in helpers:
                continue
            fn_node = _enclosing_function(call)
            name = host.function_name(fn_node) if fn_node is not None else ""
            fn = by_name.get(name)
            if fn is None or fn.is_kernel or fn.name in helpers:
                continue
            passed = {host.text(a).strip() for a in _arguments(call)}
            if passed & {p.name for p in fn.params}:
                helpers.add(fn.name)
                grown = True
        if not grown:
            break
    made = {(s.span.start, s.kernel) for s in sites if s.wrapper is not None}
    found: list[OpaqueLaunch] = []
    for call, callee in calls:
        if callee not in helpers:
            continue
        fn_node = _enclosing_function(call)
        for arg in _arguments(call):
            ref = host.kernel_ref(arg, fn_node)
            if ref is None or ref[0] not in kernels:
                continue
            if (call.start_byte, ref[0]) not in made:
                found.append(OpaqueLaunch(ref[0], callee, host.span(call)))
    return tuple(found)


KNOB_PREFIX = "KTX_"
_MIN_MAX = {"min": "min", "std::min": "min", "::min": "min", "max": "max", "std::max": "max", "::max": "max"}
_CDIV = {"ceil_div", "cdiv", "div_up", "DIVUP", "CEIL_DIV", "KTX_CDIV"}
_CASTS = {"static_cast", "reinterpret_cast", "const_cast", "int", "unsigned", "size_t", "int64_t"}
_BINARY = {
    "+": "+",
    "-": "-",
    "*": "*",
    "/": "//",
    "%": "%",
    "<": "<",
    "<=": "<=",
    ">": ">",
    ">=": ">=",
    "==": "==",
    "!=": "!=",
    "&&": "and",
    "||": "or",
}


@dataclass(frozen=True)
class LaunchMapping:
    """Grid and block (1 to 3 expressions each), dynamic shared bytes, and named intermediates.

    >>> m = LaunchMapping(("tokens",), ("32", "warps"), "warps * 4", (("warps", "max(1, d // 256)"),))
    >>> m.resolved().block, m.resolved().shared
    (('32', 'max(1, d // 256)'), 'max(1, d // 256) * 4')
    >>> m.evaluate({"tokens": 2, "d": 4096})
    ((2,), (32, 16), 64)
    """

    grid: tuple[str, ...]
    block: tuple[str, ...]
    shared: str = "0"
    vars: tuple[tuple[str, str], ...] = ()
    origin: str = ""
    """Where the mapping came from (``file.cu:42`` or ``spec``), for messages."""
    notes: tuple[str, ...] = field(default=(), compare=False)

    def __post_init__(self) -> None:
        for what, dims in (("grid", self.grid), ("block", self.block)):
            if not 1 <= len(dims) <= 3:
                raise KtxError(f"launch {what} needs 1 to 3 expressions, got {len(dims)}")
        # Canonical text (what ast.unparse prints), so that equal mappings compare equal.
        object.__setattr__(self, "grid", tuple(_canonical(g) for g in self.grid))
        object.__setattr__(self, "block", tuple(_canonical(b) for b in self.block))
        object.__setattr__(self, "shared", _canonical(self.shared))
        object.__setattr__(self, "vars", tuple((n, _canonical(e)) for n, e in self.vars))

    # -- edits (passes) ------------------------------------------------------------------

    def var(self, name: str) -> str | None:
        return next((e for n, e in self.vars if n == name), None)

    def with_var(self, name: str, expr: str) -> LaunchMapping:
        """Redefine var ``name``; ``expr == name`` drops it (the name now means a knob)."""
        if expr == name:
            return replace(self, vars=tuple((n, e) for n, e in self.vars if n != name))
        return replace(self, vars=tuple((n, expr if n == name else e) for n, e in self.vars))

    def with_grid(self, grid: tuple[str, ...]) -> LaunchMapping:
        return replace(self, grid=grid)

    def with_block(self, block: tuple[str, ...]) -> LaunchMapping:
        return replace(self, block=block)

    def with_shared(self, shared: str) -> LaunchMapping:
        return replace(self, shared=shared)

    # -- reading -------------------------------------------------------------------------

    def resolved(self) -> LaunchMapping:
        """The same mapping with every var inlined: expressions over shapes and knobs only."""
        env: dict[str, str] = {}
        for name, expr in self.vars:
            env[name] = substitute(expr, env)
        return LaunchMapping(
            tuple(substitute(g, env) for g in self.grid),
            tuple(substitute(b, env) for b in self.block),
            substitute(self.shared, env),
            (),
            self.origin,
            self.notes,
        )

    def evaluate(self, env: Mapping[str, Value]) -> tuple[tuple[int, ...], tuple[int, ...], int]:
        """Concrete (grid, block, shared bytes) for shape and knob values ``env``."""
        full: dict[str, Value] = dict(env)
        for name, expr in self.vars:
            full[name] = Expr.parse(expr).evaluate(full)
        grid = tuple(Expr.parse(g).evaluate_int(full) for g in self.grid)
        block = tuple(Expr.parse(b).evaluate_int(full) for b in self.block)
        return grid, block, Expr.parse(self.shared).evaluate_int(full)

    @property
    def names(self) -> frozenset[str]:
        """Free names of the resolved mapping: shape variables and knobs."""
        r = self.resolved()
        found: set[str] = set()
        for text in (*r.grid, *r.block, r.shared):
            found |= Expr.parse(text).names
        return frozenset(found)

    def to_json(self) -> dict[str, object]:
        return {
            "grid": list(self.grid),
            "block": list(self.block),
            "shared": self.shared,
            "vars": [[n, e] for n, e in self.vars],
            "origin": self.origin,
        }

    @staticmethod
    def from_json(data: Mapping[str, object]) -> LaunchMapping:
        def strings(key: str) -> tuple[str, ...]:
            value = data.get(key, [])
            return tuple(str(v) for v in value) if isinstance(value, list) else ()

        raw_vars = data.get("vars", [])
        pairs = tuple((str(p[0]), str(p[1])) for p in raw_vars) if isinstance(raw_vars, list) else ()
        return LaunchMapping(
            strings("grid"),
            strings("block"),
            str(data.get("shared", "0")),
            pairs,
            str(data.get("origin", "")),
        )


def _canonical(text: str) -> str:
    return str(Expr.parse(text))


def substitute(text: str, env: Mapping[str, str]) -> str:
    """``text`` with each free name in ``env`` replaced by its (parenthesised) expression.

    >>> substitute("cdiv(n, B) * B", {"B": "X if X else 128"})
    'cdiv(n, X if X else 128) * (X if X else 128)'
    """
    expr = Expr.parse(text)
    if not expr.names & env.keys():
        return text

    class _Sub(ast.NodeTransformer):
        def visit_Name(self, node: ast.Name) -> ast.AST:
            if node.id in env:
                return ast.parse(env[node.id], mode="eval").body
            return node

        def visit_Call(self, node: ast.Call) -> ast.AST:
            node.args = [self.visit(a) for a in node.args]
            return node

    tree = _Sub().visit(ast.parse(text.strip(), mode="eval"))
    return ast.unparse(tree)


def is_constant(text: str) -> int | None:
    """The value of an expression with no free names, else None."""
    expr = Expr.parse(text)
    if expr.names:
        return None
    value = expr.evaluate({})
    return value if isinstance(value, int) and not isinstance(value, bool) else None


# -- C++ launch code -> expressions ------------------------------------------------------------


class Untranslatable(Exception):
    """A piece of launcher C++ that has no counterpart in the expression language."""


@dataclass
class _Translator:
    module: Module
    scope: ts.Node
    before: int
    locals: dict[str, syntax.LocalDecl]
    params: frozenset[str]
    used_vars: dict[str, str] = field(default_factory=dict)
    order: list[str] = field(default_factory=list)
    free: set[str] = field(default_factory=set)
    depth: int = 0

    def expr(self, node: ts.Node) -> str:
        text = syntax.text(self.module, node)
        kind = node.type
        if kind == "number_literal":
            value = int_literal(text)
            if value is None:
                raise Untranslatable(text)
            return str(value)
        if kind == "identifier":
            return self.name(text)
        if kind in ("parenthesized_expression", "parameter_declaration", "type_descriptor"):
            inner = [c for c in node.named_children if c.type != "comment"]
            if kind == "parameter_declaration" or kind == "type_descriptor":
                # ``dim3 b(N)`` parses as a declaration: its "parameter" is the name N.
                if len(inner) == 1 and inner[0].type in ("type_identifier", "identifier"):
                    return self.name(syntax.text(self.module, inner[0]))
                raise Untranslatable(text)
            if len(inner) != 1:
                raise Untranslatable(text)
            return f"({self.expr(inner[0])})"
        if kind == "binary_expression":
            op_node = node.child_by_field_name("operator")
            left = node.child_by_field_name("left")
            right = node.child_by_field_name("right")
            op = syntax.text(self.module, op_node) if op_node is not None else ""
            if left is None or right is None or op not in _BINARY:
                raise Untranslatable(text)
            return f"{self.expr(left)} {_BINARY[op]} {self.expr(right)}"
        if kind == "unary_expression":
            op_node = node.child_by_field_name("operator")
            arg = node.child_by_field_name("argument")
            op = syntax.text(self.module, op_node) if op_node is not None else ""
            if arg is None or op not in ("-", "+", "!"):
                raise Untranslatable(text)
            return f"not {self.expr(arg)}" if op == "!" else f"{op}{self.expr(arg)}"
        if kind == "conditional_expression":
            cond = node.child_by_field_name("condition")
            then = node.child_by_field_name("consequence")
            other = node.child_by_field_name("alternative")
            if cond is None or then is None or other is None:
                raise Untranslatable(text)
            return f"({self.expr(then)} if {self.expr(cond)} else {self.expr(other)})"
        if kind == "cast_expression":
            operand = node.child_by_field_name("value")
            if operand is None:
                raise Untranslatable(text)
            return self.expr(operand)
        if kind == "sizeof_expression":
            target = node.child_by_field_name("type") or node.child_by_field_name("value")
            name = " ".join(syntax.text(self.module, target).strip("() ").split()) if target else ""
            if name not in SIZEOF:
                raise Untranslatable(text)
            return str(SIZEOF[name])
        if kind == "call_expression":
            return self.call(node, text)
        raise Untranslatable(text)

    def call(self, node: ts.Node, text: str) -> str:
        fn = node.child_by_field_name("function")
        arguments = node.child_by_field_name("arguments")
        if fn is None or arguments is None:
            raise Untranslatable(text)
        args = [c for c in arguments.named_children if c.type != "comment"]
        callee = syntax.text(self.module, fn)
        if fn.type == "template_function":
            name = fn.child_by_field_name("name")
            callee = syntax.text(self.module, name) if name is not None else callee
            if callee in _CASTS and len(args) == 1:
                return f"({self.expr(args[0])})"
        if callee in _MIN_MAX and args:
            return f"{_MIN_MAX[callee]}({', '.join(self.expr(a) for a in args)})"
        if callee in _CDIV and len(args) == 2:
            return f"ceil_div({self.expr(args[0])}, {self.expr(args[1])})"
        if callee == "KTX_PICK" and len(args) == 2:
            knob, original = self.expr(args[0]), self.expr(args[1])
            return f"({knob} if {knob} else {original})"
        if callee in _CASTS and len(args) == 1:
            return f"({self.expr(args[0])})"
        raise Untranslatable(text)

    def name(self, name: str) -> str:
        # A knob's placeholder; a user's own ``#define KTX_HOLDOUT_WARP 32`` is a macro like any.
        user = any(m.name == name for m in self.module.macros) or any(
            c.name == name for c in self.module.constants
        )
        if name.startswith(KNOB_PREFIX) and not user:
            return name[len(KNOB_PREFIX) :]
        if name in self.params:
            self.free.add(name)
            return name
        local = self.locals.get(name)
        if local is not None:
            if name not in self.used_vars:
                if (
                    assign.reassigned_after(self.module, self.scope, name, local.declaration.end_byte)
                    or local.value is None
                    or self.depth > 16
                ):
                    self.free.add(name)
                    return name
                self.used_vars[name] = ""  # cycle guard
                self.depth += 1
                try:
                    self.used_vars[name] = self.expr(local.value)
                finally:
                    self.depth -= 1
                self.order.append(name)
            return name
        macro = next((m for m in self.module.macros if m.name == name and m.int_value is not None), None)
        if macro is not None and macro.int_value is not None:
            return str(macro.int_value)
        const = next((c for c in self.module.constants if c.name == name and c.int_value is not None), None)
        if const is not None and const.int_value is not None:
            return str(const.int_value)
        self.free.add(name)
        return name


@dataclass(frozen=True)
class LaunchDims:
    """The C++ behind one launch argument (grid or block): its components and their container.

    ``components`` are the x, y, z expressions; ``container`` is the argument list they sit in
    (``dim3 grid(a, b)``), where a pass may append a dimension, or None when the launch passes
    a scalar expression directly (``<<<n, 256>>>``).
    """

    components: tuple[ts.Node, ...]
    container: ts.Node | None
    launch_arg: ts.Node
    decl: syntax.LocalDecl | None
    whole_dim3: bool = False
    """The argument names a ``dim3`` whose components are not written here (a launcher
    parameter ``dim3 grid``, a local ``dim3 g = make_grid(n)``): ``components`` is the name
    itself, which must be read through ``.x``/``.y``/``.z``, never as a number."""


def launcher_node(module: Module, site: LaunchSite) -> ts.Node | None:
    fn = next((f for f in module.functions if f.name == site.function and f.body.contains(site.span)), None)
    return module.node(fn.body) if fn is not None else None


def expansion_scope(module: Module, site: LaunchSite) -> tuple[Function, int] | None:
    """The function a launch held in a ``#define`` body runs in, and the offset of its first
    expansion there: DeepSpeed's ``LAUNCH_DEQUANT_KERNEL(8, ...)`` launches with ``grid`` and
    ``block`` that are locals of ``launch_dequantize_kernel``, where the macro expands (also
    through other macros: ``LAUNCH_FOR_ALIGNMENT`` expanding ``LAUNCH_ROT_POS_EMB_HALF``).
    The launch's names are that function's locals before that point. None for a site
    in a function, or a macro expanded in more than one function (no one scope)."""
    if site.macro is None or site.function is not None:
        return None
    calls = _expansion_calls(module, site.macro, 3)
    at = [(_function_at(module, _enclosing_function(c)), c.start_byte) for c in calls]
    found = [(f, start) for f, start in at if f is not None]
    if not found or len({f.span for f, _ in found}) != 1:
        return None
    return found[0][0], min(at for _, at in found)


def _expansion_calls(module: Module, macro: str, depth: int) -> list[ts.Node]:
    """The calls of ``macro`` in code, and of the macros whose bodies call it (``depth`` deep)."""
    out = [call for call, callee in _calls(module.tree.root_node) if callee == macro]
    if depth <= 0:
        return out
    call = re.compile(rf"\b{re.escape(macro)}\s*\(")
    for m in module.macros:
        if m.name != macro and call.search(m.value):
            out += _expansion_calls(module, m.name, depth - 1)
    return out


def _function_at(module: Module, fn: ts.Node | None) -> Function | None:
    """The module's function whose definition is ``fn`` (a template's span starts at its
    ``template <...>``, before the definition node)."""
    if fn is None:
        return None
    around = [f for f in module.functions if f.span.start <= fn.start_byte and fn.end_byte <= f.span.end]
    return min(around, key=lambda f: f.span.end - f.span.start, default=None)


def launch_dims(module: Module, site: LaunchSite, which: str) -> LaunchDims:
    """The components of the ``grid`` or ``block`` argument of ``site``, through a ``dim3`` local."""
    where = site.grid if which == "grid" else site.block
    arg = launch_value_node(module, site, where)
    scope = launcher_node(module, site)
    if arg.type == "identifier":
        name = syntax.text(module, arg)
        local = None
        if scope is not None:
            local = syntax.local_declarations(module, scope, before=site.span.start).get(name)
        # ``auto g = dim3(a, b)`` keeps its constructor arguments as ``args`` like ``dim3 g(a, b)``.
        if local is not None and local.type in ("dim3", "auto") and local.args:
            container = local.args[0].parent
            return LaunchDims(local.args, container, arg, local)
        if local is not None and local.type == "dim3" and local.value is not None:
            value = local.value
            if value.type == "identifier" or value.type == "call_expression":
                return LaunchDims((arg,), None, arg, local, whole_dim3=True)
            return LaunchDims((value,), None, arg, local)
        if local is not None and local.type == "dim3" and local.value is None and scope is not None:
            # ``dim3 block; block.x = NUM_THREADS;``: the fields assigned before the launch.
            fields = dim3_field_assignments(module.source, scope, name, site.span.start)
            comps = tuple(fields[k] for k in ("x", "y", "z") if k in fields)
            if comps and set(fields) == set("xyz"[: len(comps)]):
                return LaunchDims(comps, None, arg, local)
        if local is None and (_is_dim3_parameter(module, site, name) or _declared_dim3(module, name)):
            return LaunchDims((arg,), None, arg, None, whole_dim3=True)
        if local is not None and local.type == "dim3":
            # ``dim3 block, grid; if (...) grid.x = m; else grid.x = ...;``: fields set in branches
            # are not one expression, but the local is a dim3 (dividing it whole would not compile)
            return LaunchDims((arg,), None, arg, local, whole_dim3=True)
    if arg.type == "cast_expression":
        # ``(dim3)num_blocks`` (ggml's launch params): the one-dimensional dim3 of its value, as
        # ``dim3(num_blocks)`` is; a pass dividing the cast whole would divide a dim3.
        kind, cast = arg.child_by_field_name("type"), arg.child_by_field_name("value")
        if kind is not None and cast is not None and syntax.text(module, kind).strip() == "dim3":
            return LaunchDims((cast,), None, arg, None)
    braced = _braced_dim3(arg)
    if braced is not None:
        # ``<<<g, {x, y, 1}>>>``: the braces build the dim3 in place, as ``dim3(x, y, 1)`` would.
        return LaunchDims(tuple(c for c in braced.named_children if c.type != "comment"), braced, arg, None)
    if arg.type == "call_expression":
        fn = arg.child_by_field_name("function")
        arguments = arg.child_by_field_name("arguments")
        if fn is not None and syntax.text(module, fn) == "dim3" and arguments is not None:
            comps = tuple(c for c in arguments.named_children if c.type != "comment")
            return LaunchDims(comps, arguments, arg, None)
    return LaunchDims((arg,), None, arg, None)


def _braced_dim3(arg: ts.Node) -> ts.Node | None:
    """The ``{x, y, z}`` list of a launch's braced dim3 (tree-sitter reads a compound literal
    whose type is missing), or None."""
    node = arg
    if node.type == "compound_literal_expression":
        typ = node.child_by_field_name("type")
        if typ is not None and typ.end_byte > typ.start_byte:
            return None
        node = node.child_by_field_name("value") or node
    return node if node.type == "initializer_list" else None


def launch_value_node(module: Module, site: LaunchSite, where: Span) -> ts.Node:
    """The expression node spanning ``where``; for a launch in a ``#define`` body, from the body's tree.

    The file's tree holds a macro body as one opaque text node: taking that as the launch's
    grid would make a pass rewrite the whole body (``KTX_CDIV(k<<<...>>>(...), C)``).
    """
    if site.macro is not None:
        root = _macro_root(module, site)
        if root is not None:
            node: ts.Node | None = root.descendant_for_byte_range(where.start, where.end)
            while node is not None:
                covers = node.start_byte <= where.start and where.end <= node.end_byte
                if node.type in _EXPRESSIONS and covers:
                    return node
                node = node.parent
    return syntax.node_at(module, where, _EXPRESSIONS) or module.node(where)


def _macro_root(module: Module, site: LaunchSite) -> ts.Node | None:
    node: ts.Node | None = module.node(site.span)
    while node is not None and node.type not in ("preproc_function_def", "preproc_def"):
        node = node.parent
    value = node.child_by_field_name("value") if node is not None else None
    if node is None or value is None:
        return None
    tree = macro_body_tree(module.source, node.start_byte, value.start_byte, value.end_byte)
    return tree.root_node if tree is not None else None


def _declared_dim3(module: Module, name: str) -> bool:
    """Whether the file declares ``dim3 name`` somewhere (a launch macro's grid argument)."""
    return re.search(rb"\bdim3\s+" + re.escape(name.encode()) + rb"\b", module.source) is not None


def _is_dim3_parameter(module: Module, site: LaunchSite, name: str) -> bool:
    functions = module.functions
    launcher = next((f for f in functions if f.name == site.function and f.body.contains(site.span)), None)
    param = next((p for p in launcher.params if p.name == name), None) if launcher is not None else None
    return param is not None and param.pointer_depth == 0 and param.base_type.split("::")[-1] == "dim3"


def rebuilt_dim3(name: str, x: str | None = None, y: str | None = None, z: str | None = None) -> str:
    """``dim3(x, y, z)`` from the ``dim3`` named ``name``, with the components given replaced.

    A pass that changes one component of a launch whose grid or block is a ``dim3`` variable
    (``<<<grid, block>>>`` with ``dim3 grid`` a parameter, or named inside a dispatch macro) must
    rewrite that component: ``dim3(block, 4)`` or ``(grid) / 4`` on a ``dim3`` do not compile.
    """
    parts = (x, y, z)
    return (
        "dim3("
        + ", ".join(p if p is not None else f"{name}.{c}" for p, c in zip(parts, "xyz", strict=True))
        + ")"
    )


def divide_grid_x(module: Module, site: LaunchSite, divisor: str) -> tuple[int, int, str]:
    """The edit ``(start, end, text)`` that divides, rounding up, the grid's x of ``site`` by ``divisor``.

    A number or a written component becomes ``KTX_CDIV(x, divisor)``; a ``dim3`` whose
    components are not written at the launch (a parameter ``dim3 grid``) is rebuilt as
    ``dim3(KTX_CDIV(grid.x, divisor), grid.y, grid.z)``, since ``(grid + d - 1) / d`` on a dim3
    does not compile.
    """
    edit = divide_grid(module, site, divisor, "x")
    assert edit is not None  # a grid always has its x
    return edit


def divide_grid(module: Module, site: LaunchSite, divisor: str, axis: str) -> tuple[int, int, str] | None:
    """:func:`divide_grid_x` for the grid's ``axis`` (``x`` or ``y``). None where the launch does
    not write that component (``dim3 grid(m)``: its y is 1, and ``KTX_CDIV(1, d)`` is 1 anyway)."""
    dims = launch_dims(module, site, "grid")
    k = "xyz".index(axis)
    if dims.whole_dim3:
        whole = dims.components[0]
        text = syntax.text(module, whole)
        part = {axis: f"KTX_CDIV({text}.{axis}, {divisor})"}
        return whole.start_byte, whole.end_byte, rebuilt_dim3(text, **part)
    if len(dims.components) <= k:
        return None
    c = dims.components[k]
    text = syntax.text(module, c)
    return c.start_byte, c.end_byte, f"KTX_CDIV({text}, {divisor})"


_EXPRESSIONS = (
    "identifier",
    "number_literal",
    "binary_expression",
    "call_expression",
    "parenthesized_expression",
    "conditional_expression",
    "cast_expression",
    "compound_literal_expression",
)


def local_value(module: Module, site: LaunchSite, node: ts.Node) -> syntax.LocalDecl | None:
    """When ``node`` names a launcher local with a plain initialiser never reassigned, that local."""
    scope = launcher_node(module, site)
    name_node = node
    if node.type == "parameter_declaration":
        inner = [c for c in node.named_children if c.type in ("type_identifier", "identifier")]
        if len(inner) != 1:
            return None
        name_node = inner[0]
    elif node.type != "identifier":
        return None
    if scope is None:
        return None
    name = syntax.text(module, name_node)
    local = syntax.local_declarations(module, scope, before=site.span.start).get(name)
    if local is None or local.value is None or local.args:
        return None
    if assign.reassigned_after(module, scope, name, local.declaration.end_byte):
        return None
    return local


def translate(module: Module, site: LaunchSite, nodes: dict[str, list[ts.Node]]) -> LaunchMapping:
    """Translate the launch expressions ``nodes`` (``grid``/``block``/``shared``) of ``site``."""
    scope = launcher_node(module, site)
    launcher = next((f for f in module.functions if f.name == site.function), None)
    params = frozenset(p.name for p in launcher.params) if launcher is not None else frozenset()
    locals_ = syntax.local_declarations(module, scope, before=site.span.start) if scope is not None else {}
    tr = _Translator(
        module, scope if scope is not None else module.tree.root_node, site.span.start, locals_, params
    )
    grid = tuple(tr.expr(n) for n in nodes["grid"])
    block = tuple(tr.expr(n) for n in nodes["block"])
    shared = tr.expr(nodes["shared"][0]) if nodes.get("shared") else "0"
    vars_ = tuple((name, tr.used_vars[name]) for name in tr.order)
    unknown = sorted(tr.free - params)
    notes = (
        (f"launch names {', '.join(unknown)}, which the launcher computes in ways ktx does not follow",)
        if unknown
        else ()
    )
    origin = f"{module.path or '<input>'}:{site.span.line}"
    return LaunchMapping(grid, block, shared, vars_, origin, notes)


def mapping_from_file(module: Module, kernel: str) -> LaunchMapping | None:
    """The launch mapping of the first launch of ``kernel`` in the file, or None.

    Returns None when there is no launch, or when its expressions do not translate (then the
    spec must supply the mapping).
    """
    sites = module.launches_of(kernel)
    if not sites:
        return None
    site = sites[0]
    nodes: dict[str, list[ts.Node]] = {
        "grid": list(launch_dims(module, site, "grid").components),
        "block": list(launch_dims(module, site, "block").components),
    }
    if site.shared is not None:
        nodes["shared"] = [launch_value_node(module, site, site.shared)]
    try:
        return translate(module, site, nodes)
    except (Untranslatable, KtxError):
        return None


def expression_of(module: Module, node: ts.Node) -> str | None:
    """``node`` (C++) as an expression over knobs and integer constants, or None.

    ``KTX_X`` becomes the knob ``X``; macros and constants with known values become numbers;
    any other name makes the answer None (the expression depends on something ktx cannot see).
    """
    tr = _Translator(module, node, node.start_byte, {}, frozenset())
    try:
        text = tr.expr(node)
    except Untranslatable:
        return None
    return None if tr.free else text


# -- template argument deduction at a launch ------------------------------------------------------

_QUALIFIER_WORDS = {"const", "volatile", "__restrict__", "__restrict", "restrict", "struct", "typename"}
_CAST = re.compile(r"^\s*(?:static_cast|reinterpret_cast|const_cast)\s*<\s*(.+?)\s*>\s*\(")
_C_CAST = re.compile(r"^\s*\(\s*((?:const\s+)?[A-Za-z_][\w:<>, ]*?\s*\*+)\s*\)")
_DATA_PTR = re.compile(
    r"\.\s*(?:data_ptr|data|mutable_data_ptr|const_data_ptr)\s*<\s*(.+?)\s*>\s*\(\s*\)\s*$"
)


def _split_type(text: str) -> tuple[str, int] | None:
    """``const float* __restrict__`` -> ``("float", 1)``: the element type and pointer depth."""
    depth = text.count("*")
    words = [w for w in re.split(r"[\s*&]+", text) if w and w not in _QUALIFIER_WORDS]
    if not words or "auto" in words:
        return None
    return " ".join(words), depth


def expression_type(module: Module, site: LaunchSite, text: str) -> tuple[str, int] | None:
    """The element type and pointer depth of a launch argument, where the launcher declares it.

    Reads casts (``reinterpret_cast<half*>(p)``, ``(float*)p``), ``t.data_ptr<float>()``, and
    names declared as the launcher's parameters or locals, also behind ``&p[i]`` or ``p + k``.
    None when ktx cannot tell (``auto`` locals, calls, members).
    """
    cast = _CAST.match(text) or _C_CAST.match(text)
    if cast is not None:
        return _split_type(cast.group(1))
    data = _DATA_PTR.search(text)
    if data is not None:
        found = _split_type(data.group(1))
        return (found[0], found[1] + 1) if found is not None else None
    expr = text.strip()
    address = re.fullmatch(r"&\s*([A-Za-z_]\w*)\s*\[.*\]", expr, re.S)
    if address is not None:
        return _declared_type(module, site, address.group(1))
    offset = re.fullmatch(r"([A-Za-z_]\w*)\s*[+-].*", expr, re.S)
    name = offset.group(1) if offset is not None else expr
    if not name.isidentifier():
        return None
    return _declared_type(module, site, name)


def _declared_type(module: Module, site: LaunchSite, name: str) -> tuple[str, int] | None:
    scope = launcher_node(module, site)
    found = _local_declaration(module, scope, name, site.span.start) if scope is not None else None
    if found is not None:
        declaration, declarator = found
        type_node = declaration.child_by_field_name("type")
        head = re.match(rf"(.*?)\b{re.escape(name)}\b", syntax.text(module, declarator), re.S)
        stars = head.group(1).count("*") if head is not None else 0
        return _split_type(syntax.text(module, type_node) + "*" * stars) if type_node is not None else None
    launcher = next(
        (f for f in module.functions if f.name == site.function and f.body.contains(site.span)), None
    )
    param = next((p for p in launcher.params if p.name == name), None) if launcher is not None else None
    return _split_type(param.type) if param is not None else None


def _local_declaration(
    module: Module, scope: ts.Node, name: str, before: int
) -> tuple[ts.Node, ts.Node] | None:
    """The last declaration of ``name`` in ``scope`` before ``before``, and its declarator."""
    found: tuple[ts.Node, ts.Node] | None = None
    for node in syntax.walk(scope):
        if node.type != "declaration" or node.start_byte >= before:
            continue
        for decl in node.children_by_field_name("declarator"):
            inner: ts.Node | None = decl
            while inner is not None and inner.type != "identifier":
                inner = inner.child_by_field_name("declarator")
            if inner is not None and syntax.text(module, inner) == name:
                found = (node, decl)
    return found


def deduce_template_args(module: Module, site: LaunchSite) -> tuple[str, ...] | None:
    """The kernel's template arguments at ``site``, as C++ would take them, or None if unknown.

    Written arguments come first (``k<float, 4><<<...>>>``); the rest are deduced as the
    compiler does from the call's arguments: a kernel parameter ``const T* x`` given ``out``
    declared ``float* out`` binds ``T = float``. Then defaults. A parameter neither written,
    deduced nor defaulted (or two arguments that disagree) gives None: the caller (``ktx
    init``) says so instead of guessing.
    """
    fn = next((f for f in module.kernels if f.name == site.kernel), None)
    if fn is None:
        return None
    params = [tp for tp in fn.template_params if not tp.variadic]
    found: dict[str, str] = {tp.name: arg for tp, arg in zip(params, site.template_args, strict=False)}
    names = {tp.name for tp in params}
    deduced: dict[str, str] = {}
    for p, arg in zip(fn.params, site.args, strict=False):
        declared = _split_type(p.type)
        if declared is None or declared[0] not in names or declared[0] in found:
            continue
        actual = expression_type(module, site, arg)
        if actual is None or actual[1] != declared[1]:
            continue
        if deduced.setdefault(declared[0], actual[0]) != actual[0]:
            return None  # ``T`` deduced as two types: the call would not compile as read
    found.update(deduced)
    for tp in params:
        if tp.name not in found and tp.default:
            found[tp.name] = tp.default
    if any(tp.name not in found for tp in params):
        return None
    return tuple(found[tp.name] for tp in params)


@dataclass(frozen=True)
class MacroExpansion:
    """One use of a dispatch macro that holds a launch: ``LAUNCH_SCALE(4);`` in a branch.

    A launch written in a ``#define`` body is one site, but each expansion is a launch of its
    own, with the macro's parameters bound to that expansion's arguments (``VEC`` -> ``4``) and
    the names of the body (``grid``, ``block``) resolved in the function that expands it. A
    draft cannot choose among the branches, so it shows the first as its guess and lists all.
    """

    macro: str
    span: Span
    function: str | None
    bindings: tuple[tuple[str, str], ...]
    """(macro parameter, argument as written) in order."""
    guard: str | None
    """When this expansion runs: ``if n % 4 == 0``, ``else of n % 4 == 0``, ``case 4``; None: always."""

    def bind(self, text: str) -> str:
        """``text`` of the macro body with the macro's parameters replaced by this expansion's arguments."""
        values = dict(self.bindings)
        return re.sub(r"\b[A-Za-z_]\w*\b", lambda m: values.get(m.group(0), m.group(0)), text)


def macro_expansions(module: Module, site: LaunchSite) -> tuple[MacroExpansion, ...]:
    """The expansions of the dispatch macro that holds ``site`` (none when it is no macro site)."""
    if site.macro is None:
        return ()
    macro = next((m for m in module.macros if m.name == site.macro), None)
    params = macro.params or () if macro is not None else ()
    found: list[MacroExpansion] = []
    for call, callee in _calls(module.tree.root_node):
        if callee != site.macro:
            continue
        args = [_node_text(module.source, a) for a in _arguments(call)]
        fn = _enclosing_function(call)
        found.append(
            MacroExpansion(
                site.macro,
                module.span(call.start_byte, call.end_byte),
                _function_name_of(module, fn),
                tuple(zip(params, args, strict=False)),
                _branch_guard(module.source, call),
            )
        )
    return tuple(sorted(found, key=lambda e: e.span.start))


def expansion_local(module: Module, expansion: MacroExpansion, name: str) -> str | None:
    """The value of the local ``name`` where ``expansion`` expands (``dim3 grid(rows)`` -> ``rows``).

    The constructor's arguments as written (``dim3 block(32, 4)`` -> ``32, 4``), or the
    initializer; None when the expanding function declares no such local before the expansion.
    """
    fn = next(
        (f for f in module.functions if f.name == expansion.function and f.body.contains(expansion.span)),
        None,
    )
    if fn is None:
        return None
    scope = module.node(fn.body)
    local = syntax.local_declarations(module, scope, before=expansion.span.start).get(name)
    if local is None:
        return None
    between = module.source[local.declaration.end_byte : expansion.span.start].decode("utf-8", "replace")
    if re.search(rf"\b{re.escape(name)}\s*(?:\.\s*[xyz]\s*)?(?:[-+*/]?=(?!=)|\+\+|--)", between):
        return None  # ``grid.x = ...`` in a branch before the expansion: no one value
    if local.args:
        return ", ".join(_node_text(module.source, a) for a in local.args)
    return _node_text(module.source, local.value) if local.value is not None else None


def _function_name_of(module: Module, fn: ts.Node | None) -> str | None:
    found = _function_at(module, fn)
    return found.name if found is not None else None


def _branch_guard(source: bytes, node: ts.Node) -> str | None:
    """The innermost branch condition ``node`` runs under (then, else or ``case`` of a switch)."""
    child = node
    parent = node.parent
    while parent is not None:
        if parent.type == "if_statement":
            cond = parent.child_by_field_name("condition")
            text = " ".join(_node_text(source, cond).split()).strip("()") if cond is not None else "?"
            if parent.child_by_field_name("consequence") == child:
                return f"if {text}"
            if parent.child_by_field_name("alternative") == child:
                return f"else of {text}"
        if parent.type == "case_statement":
            value = parent.child_by_field_name("value")
            return f"case {_node_text(source, value)}" if value is not None else "default"
        child, parent = parent, parent.parent
    return None


def _branch_text(expansion: MacroExpansion, module: Module) -> str:
    line = module.location(expansion.span.start).line
    return f"{expansion.guard} (line {line})" if expansion.guard else f"line {line}"


def expansion_template_choice(module: Module, site: LaunchSite) -> tuple[str, tuple[int, ...]] | None:
    """Why the draft cannot choose a dispatch macro's template arguments, and which positions.

    ``(why, positions)`` when the macro's expansions bind the launch's template arguments to
    different values (``LAUNCH(4)`` / ``LAUNCH(1)``): ``why`` lists each branch and names the
    first as the guess; ``positions`` are the template arguments that differ between branches.
    None when the site is no macro site or every expansion launches the same instantiation.
    """
    expansions = macro_expansions(module, site)
    if not expansions or not site.template_args:
        return None
    bound = [tuple(" ".join(e.bind(t).split()) for t in site.template_args) for e in expansions]
    positions = tuple(i for i in range(len(site.template_args)) if len({b[i] for b in bound}) > 1)
    if not positions:
        return None
    shown = [f"<{', '.join(b)}> {_branch_text(e, module)}" for b, e in zip(bound, expansions, strict=True)]
    where = f"{site.macro} (line {site.span.line})"
    why = (
        f"template arguments: the dispatch macro {where} expands {len(expansions)} times: "
        f"{'; '.join(shown[:4])}{', ...' if len(shown) > 4 else ''}; ktx cannot choose a branch. "
        f"Guess (the first): <{', '.join(bound[0])}>; write the one the [shapes] take"
    )
    return why, positions


def expansion_guess(module: Module, site: LaunchSite, name: str) -> str | None:
    """What a name of a dispatch macro's body (``grid``, ``block``) is where the macro expands.

    ``"rows (dim3 grid(rows) in run_row_scale, where LAUNCH_ROW_SCALE expands at lines 18, 20)"``
    when every expansion sees the same local value; the branches listed when they differ; None
    when the site is no macro site or no expansion declares ``name``.
    """
    expansions = macro_expansions(module, site)
    values = [(e, expansion_local(module, e, name)) for e in expansions]
    known = [(e, v) for e, v in values if v is not None]
    if not known:
        return None
    distinct = {v for _, v in known}
    lines = ", ".join(str(module.location(e.span.start).line) for e, _ in known)
    if len(distinct) == 1 and len(known) == len(values):
        fns = ", ".join(sorted({e.function or "?" for e, _ in known}))
        return f"guess {known[0][1]} (the local {name} of {fns}, where {site.macro} expands at lines {lines})"
    shown = "; ".join(f"{v if v is not None else '?'} {_branch_text(e, module)}" for e, v in values)
    return f"guess {known[0][1]} (the first branch); {site.macro} expands with {name} = {shown}"


@dataclass(frozen=True)
class IncludedKernel:
    """A kernel defined in a header and launched from a ``.cu`` that includes it.

    ``module`` is the ``.cu``'s text followed by the header's, parsed as one file: the launch
    keeps its lines (it comes first) and the kernel is visible beside it, so the launch facts
    read as they do in one file. ``header`` is where the kernel is (the spec's ``source``: a
    template rewrites the kernel, and a header compiles as ``kernel.cu`` like any source);
    ``launcher`` the ``.cu`` whose launch the mapping comes from.
    """

    module: Module
    header: Path
    launcher: Path


def kernel_across_includes(
    path: Path, module: Module, kernel: str | None, include_dirs: tuple[Path, ...] = ()
) -> IncludedKernel | None:
    """The header-and-``.cu`` pair behind ``path`` when its kernel and launch are split.

    * ``path`` launches a kernel it does not define: the quoted ``#include``s (relative to the
      file, then ``include_dirs``) are searched for the kernel's definition;
    * ``path`` defines the kernel but never launches it: the ``.cu`` files beside it that
      include it (by name, quoted), or include a header that declares the kernel
      (bitsandbytes: ``kernels.cu`` defines ``kQuantizeBlockwise``, ``kernels.cuh`` declares
      it, ``ops.cu`` includes that and launches it), are searched for a launch.

    One level of includes, by design: a kernel two headers deep is named by the spec. None
    when neither applies (the file has the kernel and its launch, or no pair is found).
    """
    names = {f.name for f in module.kernels}
    launched = {s.kernel for s in module.launch_sites}
    if kernel is not None and kernel in names and kernel in launched:
        return None
    if not names or (kernel is not None and kernel not in names):
        for header in _quoted_includes(path, module.source, include_dirs):
            pair = _paired(module, path, module.source, header, kernel)
            if pair is not None:
                return IncludedKernel(pair, header, path)
        return None
    if not (names - launched) or (kernel is not None and kernel in launched):
        return None
    unlaunched = (names - launched) if kernel is None else {kernel}
    for cu in sorted(path.parent.glob("*.cu")):
        if cu == path:
            continue
        text = cu.read_bytes()
        # ``<kernels.cuh>`` too: a project built with ``-I csrc`` may include its own headers so
        # (only a file found beside the .cu or in include_dirs counts)
        includes = {h.resolve() for h in _quoted_includes(cu, text, include_dirs, angled=True)}
        if path.resolve() not in includes and not any(_declares(h, unlaunched) for h in includes):
            continue
        pair = _paired(module, cu, text, path, kernel)
        if pair is not None:
            return IncludedKernel(pair, path, cu)
    return None


def _declares(header: Path, kernels: set[str]) -> bool:
    """``header`` declares one of ``kernels`` as a ``__global__`` function (by its text: a
    declaration is all a launcher's header needs)."""
    try:
        text = header.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return False
    if "__global__" not in text:
        return False
    return any(re.search(rf"__global__[^;{{}}]*?\b{re.escape(k)}\s*\(", text) for k in kernels)


_QUOTED_INCLUDE = rb'(?m)^\s*#\s*include\s+"([^"]+)"()'
_ANY_INCLUDE = rb'(?m)^\s*#\s*include\s+(?:"([^"]+)"|<([^>]+)>)'


def _quoted_includes(
    path: Path, source: bytes, include_dirs: tuple[Path, ...], angled: bool = False
) -> list[Path]:
    found: list[Path] = []
    pattern = _ANY_INCLUDE if angled else _QUOTED_INCLUDE
    for quoted, bracketed in re.findall(pattern, source):
        inc = quoted or bracketed
        name = inc.decode("utf-8", "replace")
        for folder in (path.parent, *include_dirs):
            candidate = folder / name
            if candidate.is_file():
                found.append(candidate)
                break
    return found


def _paired(module: Module, cu: Path, cu_text: bytes, header: Path, kernel: str | None) -> Module | None:
    """The ``.cu`` then the header as one module, when it defines and launches ``kernel``."""
    try:
        header_text = header.read_bytes()
        header_text.decode("utf-8")
    except (OSError, UnicodeDecodeError):
        return None
    if b"__global__" not in header_text or b"\x00" in header_text:
        return None
    # Built as the given module's own class: the parser's module imports this one.
    combined = type(module)(cu_text + b"\n" + header_text, str(cu))
    boundary = len(cu_text) + 1
    defined = {f.name for f in combined.kernels if f.span.start >= boundary}
    launched = {s.kernel for s in combined.launch_sites if s.span.start < boundary}
    wanted = defined & launched if kernel is None else {kernel} & defined & launched
    return combined if wanted else None


#: The stand-in launcher's grid and block: names no file gives a value, so the draft asks.
STANDIN_GRID, STANDIN_BLOCK = "grid_TODO", "block_TODO"


def standin_launch(module: Module, kernel: str | None) -> Module | None:
    """``module`` with a stand-in launcher appended, when ``kernel`` (the file's only kernel
    when None) is launched nowhere ktx can see: neither in the file nor from a ``.cu`` beside
    it (:func:`kernel_across_includes`). FlashInfer's ``act_and_mul_kernel`` is launched only
    from code its Python JIT writes; the draft should still be a draft with TODOs, not a
    refusal. The stand-in is a template over the kernel's own template parameters that passes
    its own parameters straight through, ``<<<grid_TODO, block_TODO>>>``: every template
    argument, scalar value and the launch then read as the TODOs they are, while the kernel's
    own index use still drafts the arrays' extents, dtypes and roles. None when the kernel is
    launched (a helper ktx cannot read included), or is not one kernel of the file."""
    kernels = module.kernels
    named = [k for k in kernels if k.name == kernel] if kernel is not None else kernels
    if len(named) != 1:
        return None
    fn = named[0]
    if module.launches_of(fn.name) or any(p.name == "" for p in fn.params):
        return None
    handed = rb"[(,]\s*&?\s*(?:\w+::)*" + re.escape(fn.name.encode()) + rb"\b(?:\s*<[^;(){}]*>)?\s*[,)]"
    if any(o.kernel == fn.name for o in module.opaque_launches) or re.search(handed, module.source):
        # handed to a helper ktx cannot read (``launch_kernel(scale, params, ...)``): the
        # launch exists, and the refusal, which says so, is worth more than a stand-in
        return None
    from ktx.ir.clang import _namespace_path  # ir.clang imports this module

    qualified = "::".join([*(n for n in _namespace_path(module, fn) if n), fn.name])
    source = module.source
    header = ""
    targs = ""
    if fn.template_params:
        # the kernel's own ``template <...>`` head, as written
        start = fn.span.start
        head = re.match(rb"\s*template\s*<", source[start:])
        if head is None:
            return None
        depth, i = 1, start + head.end()
        while i < len(source) and depth:
            depth += {ord("<"): 1, ord(">"): -1}.get(source[i], 0)
            i += 1
        header = source[start:i].decode("utf-8", "replace") + "\n"
        targs = "<" + ", ".join(t.name for t in fn.template_params) + ">"
    params = ", ".join(" ".join(module.text(p.span).split()) for p in fn.params)
    names = ", ".join(p.name for p in fn.params)
    text = (
        f"\n// ktx: {fn.name} is launched nowhere in this file or beside it: a stand-in launcher\n"
        f"{header}void __ktx_standin_launch_{fn.name}({params}) {{\n"
        f"  {qualified}{targs}<<<{STANDIN_GRID}, {STANDIN_BLOCK}>>>({names});\n}}\n"
    )
    return type(module)(source + text.encode(), module.path)
