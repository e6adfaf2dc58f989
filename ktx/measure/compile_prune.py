"""Compile only the kernel asked for: the other kernels of the file keep their signatures, not bodies.

A real project's file holds many kernels, and its host code instantiates each template kernel for
every type it dispatches on: ggml's ``getrows.cu`` compiles to 119 kernels (``k_get_rows_kq`` once per
quantisation type and output type) where ktx measures one, ``k_get_rows_float<float, float>``. nvcc
optimises and assembles every one of them for each candidate (session 9, H200 host: 921 s of the
real-code benchmark's 1,755 s of optimize wall went to nvcc, 5-9 s a compile on ggml files). Emptying
the bodies of the other ``__global__`` functions leaves the file's host code compiling as before
(every launch still names a declared kernel with the same parameters) while cicc and ptxas only
generate the requested kernel and what it calls. The kernel measured is byte-for-byte the same code.

Kept as they are: the kernels named like the requested one (its overloads and the template's other
instantiations), any kernel whose name the requested kernel's body mentions (a launch from the
device, a kernel pointer), kernels inside a parse error, and everything when the requested kernel is
not defined in this text (it comes from a header). Newlines of a removed body stay, so compiler
messages keep their line numbers.

``KTX_COMPILE_PRUNE=0`` turns it off.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass

#: Part of the compile cache key: a cubin compiled from pruned text is keyed apart from one
#: compiled from the whole file (bump when the pruning rule changes).
PRUNE_VERSION = "prune/1"

ENV = "KTX_COMPILE_PRUNE"


@dataclass(frozen=True)
class Pruned:
    """The text to compile and the kernels whose bodies were emptied (empty: the text as given)."""

    source: str
    emptied: tuple[str, ...] = ()


def enabled() -> bool:
    return os.environ.get(ENV, "1").strip().lower() not in ("0", "false", "no", "off")


def kernel_name(name_expression: str) -> str:
    """The bare kernel name of a name expression.

    >>> kernel_name("ns::k_get_rows_float<float, float>"), kernel_name("saxpy")
    ('k_get_rows_float', 'saxpy')
    """
    head = name_expression.split("<", 1)[0].strip()
    return head.rsplit("::", 1)[-1].strip()


def prune(source: str, name_expression: str) -> Pruned:
    """``source`` with the bodies of the kernels other than ``name_expression``'s emptied (see the
    module's docstring for what is kept); the text unchanged when nothing can be removed safely.

    >>> src = "__global__ void a(int* x) { x[0] = 1; }\\n__global__ void b(int* x) {\\n x[0] = 2;\\n}\\n"
    >>> p = prune(src, "a")
    >>> p.emptied, p.source.splitlines()[1:3]
    (('b',), ['__global__ void b(int* x) {', ''])
    >>> prune(src, "c").emptied  # not defined here: nothing is removed
    ()
    """
    if not enabled() or "__global__" not in source:
        return Pruned(source)
    from ktx.ir import parse

    try:
        module = parse(source, "kernel.cu")
        kernels = list(module.kernels)
    except Exception:  # a text tree-sitter cannot take is compiled whole
        return Pruned(source)
    keep = kernel_name(name_expression)
    kept = [k for k in kernels if k.name == keep]
    if not kept or any(k.has_error for k in kept):
        return Pruned(source)
    data = source.encode()
    kept_text = b"".join(data[k.body.start : k.body.end] for k in kept).decode(errors="replace")
    out = data
    emptied: list[str] = []
    for k in sorted(kernels, key=lambda k: -k.body.start):
        if k.name == keep or k.has_error or re.search(rf"\b{re.escape(k.name)}\b", kept_text):
            continue
        body = data[k.body.start : k.body.end]
        if not (body.startswith(b"{") and body.endswith(b"}")):
            continue
        out = out[: k.body.start] + b"{" + b"\n" * body.count(b"\n") + b"}" + out[k.body.end :]
        emptied.append(k.name)
    if not emptied:
        return Pruned(source)
    return Pruned(out.decode(), tuple(reversed(emptied)))
