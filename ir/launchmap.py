"""Launches through wrapper functions: the call that carries the kernel, grid and block is the launch.

Projects rarely write ``k<<<grid, block>>>(args)`` at every call site. They write a helper once::

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

A call to a function the file does not define, whose name says it launches (``launch_kernel``,
``LaunchKernel``) and whose arguments are a kernel of the file, then grid, then block, is read
the same way (the convention of ``cudaLaunchKernel``), with no shared memory or stream.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass

import tree_sitter as ts
from ktx.ir.nodes import Function, LaunchSite
from ktx.ir.source import Span

#: Rounds of "a helper calls a helper" followed.
MAX_DEPTH = 3
_LAUNCHER_NAME = re.compile(r"launch", re.I)
_RUNTIME = {"cudaLaunchKernel", "cudaLaunchKernelEx", "cudaLaunchCooperativeKernel"}


@dataclass(frozen=True)
class Wrapper:
    """A function that launches one of its parameters, and where each launch value comes from.

    Each of ``grid``, ``block``, ``shared``, ``stream`` is the index of the parameter forwarded
    (``int``), ``None`` when the launch does not set it, or the span of text inside the helper
    that names no parameter (a literal ``0`` of shared memory, kept as it is).
    """

    name: str
    kernel: int
    grid: int
    block: int
    shared: int | Span | None
    stream: int | Span | None
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


def _calls(root: ts.Node) -> Iterator[tuple[ts.Node, str]]:
    """Every call in the file with its callee's last name (``ns::launch<T>`` -> ``launch``)."""
    stack = [root]
    while stack:
        node = stack.pop()
        stack.extend(node.children)
        if node.type != "call_expression":
            continue
        callee = node.child_by_field_name("function")
        name = _last_name(callee)
        if name:
            yield node, name


def _last_name(node: ts.Node | None) -> str:
    while node is not None and node.type in ("qualified_identifier", "template_function"):
        node = node.child_by_field_name("name")
    if node is None or node.type != "identifier":
        return ""
    return node.text.decode("utf-8", "replace") if node.text is not None else ""


def _wrapper(
    site: LaunchSite, by_name: dict[str, Function], kernels: set[str], host: Host
) -> Wrapper | None:
    """The wrapper a launch of a parameter makes of its function, when it forwards grid and block."""
    if site.kernel in kernels or site.function is None or site.macro is not None:
        return None
    fn = by_name.get(site.function)
    if fn is None or fn.is_kernel:
        return None
    names = [p.name for p in fn.params]
    if site.kernel not in names:
        return None

    def ref(span: Span | None) -> int | Span | _Computed | None:
        if span is None:
            return None
        text = host.span_text(span).strip()
        if text in names:
            return names.index(text)
        if any(re.search(rf"\b{re.escape(n)}\b", text) for n in names if n):
            return _COMPUTED
        return span

    grid, block = ref(site.grid), ref(site.block)
    shared, stream = ref(site.shared), ref(site.stream)
    if not isinstance(grid, int) or not isinstance(block, int):
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
    needed = max(i for i in (w.kernel, w.grid, w.block) if isinstance(i, int))
    if len(args) <= needed:
        return None
    fn = _enclosing_function(call)
    ref = host.kernel_ref(args[w.kernel], fn)
    if ref is None:
        return None
    kernel, targs = ref

    def value(which: int | Span | None) -> Span | None:
        if which is None:
            return None
        if isinstance(which, Span):
            return which
        return host.span(args[which]) if which < len(args) else None

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
        grid=host.span(args[w.grid]),
        block=host.span(args[w.block]),
        shared=value(w.shared),
        stream=value(w.stream),
        args=tuple(kernel_args),
        function=_function_name(fn, host),
        span=host.span(call),
        config=host.span(call_args),
        wrapper=w.name,
    )


def _conventional_site(call: ts.Node, callee: str, kernels: set[str], host: Host) -> LaunchSite | None:
    """``launch_kernel(k, grid, block, args...)`` of a helper the file does not define."""
    args = _arguments(call)
    fn = _enclosing_function(call)
    for i, arg in enumerate(args[:2]):
        ref = host.kernel_ref(arg, fn)
        if ref is None or ref[0] not in kernels or len(args) < i + 3:
            continue
        kernel, targs = ref
        call_args = call.child_by_field_name("arguments") or call
        return LaunchSite(
            kernel=kernel,
            template_args=tuple(host.text(t) for t in targs),
            template_arg_spans=tuple(host.span(t) for t in targs),
            grid=host.span(args[i + 1]),
            block=host.span(args[i + 2]),
            shared=None,
            stream=None,
            args=tuple(host.text(a) for a in args[i + 3 :]),
            function=_function_name(fn, host),
            span=host.span(call),
            config=host.span(call_args),
            wrapper=callee,
        )
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
