"""The IR: frozen records of what a CUDA file contains, each with its byte span.

The IR is an *index* over the tree-sitter tree, not a replacement for it: it names what
passes and reports care about (kernels, loops, launch sites, constants) and points back to
the exact bytes, so that rewrites are byte-range edits of the original text. Anything the
index does not model is still reachable through :meth:`ktx.ir.Module.node`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from ktx.ir.source import Span

TemplateParamKind = Literal["type", "value", "template"]
LoopKind = Literal["for", "while", "do", "range-for"]
Severity = Literal["warning", "error"]


@dataclass(frozen=True)
class TemplateParam:
    """One template parameter: ``typename T`` (type), ``int VEC`` (value) or a template template."""

    name: str
    kind: TemplateParamKind
    type: str | None
    """The type of a value parameter (``int``, ``float (*)(const float&)``); None otherwise."""
    default: str | None
    span: Span
    variadic: bool = False
    """``typename... Ts`` or ``int... Ns``."""


@dataclass(frozen=True)
class Param:
    """A function parameter, with the facts a pass needs to reason about memory access."""

    name: str
    type: str
    """The declared type as written, without the name (``const T* __restrict__``)."""
    base_type: str
    """The element type with qualifiers and pointers removed (``T``, ``__nv_bfloat16``)."""
    pointer_depth: int
    const: bool
    restrict: bool
    span: Span

    @property
    def is_pointer(self) -> bool:
        return self.pointer_depth > 0


@dataclass(frozen=True)
class LaunchBounds:
    """``__launch_bounds__(max_threads[, min_blocks])`` as written."""

    max_threads: str
    min_blocks: str | None
    span: Span
    args: tuple[Span, ...]


@dataclass(frozen=True)
class Function:
    """A function definition: a kernel (``__global__``), a device function or host code."""

    name: str
    qualifiers: tuple[str, ...]
    """CUDA and storage qualifiers as written: ``__global__``, ``__device__``, ``inline``, ..."""
    template_params: tuple[TemplateParam, ...]
    params: tuple[Param, ...]
    return_type: str
    launch_bounds: LaunchBounds | None
    span: Span
    """The whole definition, including a ``template <...>`` prefix."""
    signature: Span
    """From the start of the definition to the opening brace of the body."""
    body: Span
    has_error: bool

    @property
    def is_kernel(self) -> bool:
        return "__global__" in self.qualifiers

    @property
    def is_device(self) -> bool:
        return "__device__" in self.qualifiers and not self.is_kernel

    @property
    def is_template(self) -> bool:
        return bool(self.template_params)

    def param(self, name: str) -> Param | None:
        return next((p for p in self.params if p.name == name), None)


# A kernel is a Function with __global__; the alias keeps call sites readable.
Kernel = Function


@dataclass(frozen=True)
class Pragma:
    """A ``#pragma`` directly before a statement, e.g. ``#pragma unroll 4``."""

    text: str
    span: Span

    @property
    def is_unroll(self) -> bool:
        return self.text.split()[:1] == ["unroll"]

    @property
    def unroll_factor(self) -> str | None:
        """The factor of ``#pragma unroll N`` (``None`` for a bare ``#pragma unroll``)."""
        words = self.text.split(None, 1)
        return words[1].strip() if self.is_unroll and len(words) > 1 else None


@dataclass(frozen=True)
class Loop:
    """A loop, with its header pieces split out so passes can rewrite each one."""

    id: int
    """Index in :attr:`Module.loops`, stable for one parse; ``L<id>`` names it in reports."""
    kind: LoopKind
    function: str | None
    span: Span
    body: Span
    var: str | None
    """The induction variable, when the header has an obvious one."""
    init: Span | None
    cond: Span | None
    step: Span | None
    pragma: Pragma | None
    parent: int | None
    """The id of the innermost enclosing loop."""
    depth: int


@dataclass(frozen=True)
class LaunchSite:
    """``kernel<targs><<<grid, block, shared, stream>>>(args)`` in host code.

    Also found: the same inside a ``#define`` body (``macro`` names it; its spans point into
    the body) and ``cudaLaunchKernel``/``cudaLaunchKernelEx`` calls (``api`` names the call;
    for the ``Ex`` form ``grid``/``block``/``shared``/``stream`` point at the values assigned
    to the config's fields).
    """

    kernel: str
    template_args: tuple[str, ...]
    template_arg_spans: tuple[Span, ...]
    grid: Span
    block: Span
    shared: Span | None
    stream: Span | None
    args: tuple[str, ...]
    function: str | None
    span: Span
    config: Span
    """The whole ``<<<...>>>`` (for a runtime-API launch: its config argument, or its arguments)."""
    macro: str | None = None
    """The ``#define`` whose body holds this launch (``LAUNCH_KERNEL(T)`` dispatch macros)."""
    api: str | None = None
    """``None`` for ``<<<...>>>``; else the runtime call (``cudaLaunchKernelEx``, ``cudaLaunchKernel``)."""
    wrapper: str | None = None
    """The project's launch helper this call goes through (``launch(k, grid, block, args...)``):
    the site is the call, its grid and block the arguments the helper forwards (see
    :mod:`ktx.ir.launch`)."""


@dataclass(frozen=True)
class Macro:
    """A ``#define``; ``int_value`` is set when the body is an integer constant expression."""

    name: str
    value: str
    int_value: int | None
    params: tuple[str, ...] | None
    """Parameter names of a function-like macro, ``None`` for an object-like one."""
    span: Span
    value_span: Span | None


@dataclass(frozen=True)
class Constant:
    """A ``constexpr`` (or ``const``) integer with a value the index could compute."""

    name: str
    type: str
    value: str
    int_value: int | None
    function: str | None
    span: Span
    value_span: Span


@dataclass(frozen=True)
class SharedArray:
    """A ``__shared__`` declaration; ``extern`` ones are sized at launch."""

    name: str
    type: str
    dims: tuple[str, ...]
    extern: bool
    function: str | None
    span: Span


@dataclass(frozen=True)
class Diagnostic:
    """A problem found while parsing or indexing, with where it is and what it affects."""

    severity: Severity
    message: str
    span: Span
    path: str | None = None

    def __str__(self) -> str:
        return f"{self.path or '<input>'}:{self.span.line}:{self.span.col}: {self.severity}: {self.message}"
