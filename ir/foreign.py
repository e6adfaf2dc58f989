"""What real CUDA writes that tree-sitter-cuda cannot read, hidden so one kernel never sinks a file.

Two tools, both keeping every byte offset (only characters other than newlines are replaced):

* :func:`mask_foreign_syntax` blanks constructs nvcc accepts and the grammar does not, before
  parsing: an extended lambda's ``__device__``, pointer qualifier macros from headers
  (``const float * MY_RESTRICT x``), statement-like loop macros (``CUDA_1D_KERNEL_LOOP(i, n) {``,
  read as ``while (i, n) {``), pragma macros alone on a line (``CUTLASS_PRAGMA_UNROLL``), a
  ``typename`` before a functional cast (``typename K::BlockLoad(smem).Load(...)``) and
  function-like attribute macros in a signature (``__global__ LAUNCH_BOUNDS(256) void k(``) and
  file-scope macro invocations without a semicolon (``INSTANTIATE_LAUNCH(float)``).
* :func:`isolate_broken_bodies` runs after parsing, when an ERROR still covers more than one
  function (one ``} else #pragma unroll for`` can make the whole file an ERROR): the body of each
  top-level function that does not parse on its own is blanked, so every other function is read,
  and the first error of each blanked body is returned so that its kernel is reported and skipped.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import tree_sitter as ts
from ktx.ir.language import parse_tree

#: ``[=] __device__ (`` / ``[&] __host__ __device__ (``: an extended lambda's execution space,
#: which tree-sitter-cuda does not read after a capture list.
_LAMBDA_SPACE = re.compile(rb"\]\s*((?:(?:__device__|__host__)\s*)+)(?=\(|mutable\b|->|\{)")
#: ``* NAME ident`` followed by ``=``, ``;``, ``,``, ``)`` or ``[``: an all-caps word between a
#: pointer's ``*`` and the declared name can only be a qualifier macro defined in a header
#: (``const float * MY_RESTRICT x = x_ptr;``), since C++ has no other reading of it.
_POINTER_QUALIFIER_MACRO = re.compile(
    rb"\*[ \t]*(?:(?:const|volatile)[ \t]+)*([A-Z_][A-Z0-9_]*)(?=[ \t]+(?:(?:const|volatile)[ \t]+)*"
    rb"[A-Za-z_]\w*[ \t]*[=;,)\[])"
)
_NOT_A_MACRO = {b"const", b"volatile"}
#: An indented ``NAME(`` whose call is followed by ``{``: a loop macro (``CUDA_1D_KERNEL_LOOP``).
_STATEMENT_MACRO = re.compile(rb"^[ \t]+([A-Z_][A-Z0-9_]{4,})[ \t]*\(", re.M)
_OPEN_BLOCK = re.compile(rb"[ \t]*(?://[^\n]*)?\s*\{")
#: A macro alone on its line before a loop or branch (``CUTLASS_PRAGMA_UNROLL``, ``UNROLL``).
_LONE_MACRO = re.compile(
    rb"^[ \t]*([A-Z_][A-Z0-9_]*)[ \t]*\r?\n(?=[ \t]*(?:for|while|do|if|switch|#)\b)", re.M
)
#: ``INSTANTIATE_LAUNCH(float)`` alone on a line at file scope, with no ``;``: a macro that
#: expands to declarations (explicit instantiations); the grammar glues it onto what follows.
_FILE_SCOPE_MACRO = re.compile(
    rb"^([A-Z_][A-Z0-9_]*[ \t]*\([^;{}\n]*\))[ \t]*(?://[^\n]*)?$(?![\s]*[{;])", re.M
)
#: ``typename K::BlockScanT(smem).InclusiveScan(...)`` starting a statement or an operand.
_TYPENAME_CAST = re.compile(
    rb"(?:^[ \t]*|[=(,][ \t]*|\breturn[ \t]+)(typename)[ \t]+[\w:]+(?:<[^;{}()\n]*>)?[ \t]*\(", re.M
)
#: ``__global__ LAUNCH_BOUNDS(256) void k(`` / ``void DEVICE_ATTR(x) f(``.
_SIGNATURE_MACRO = re.compile(
    rb"\b(?:__global__|__device__|__host__|__forceinline__|void)[ \t]+"
    rb"([A-Z_][A-Z0-9_]*[ \t]*\([^()\n]*\))(?=[ \t\r\n]+[A-Za-z_]\w*(?:[ \t\r\n]+[A-Za-z_]\w*)?[ \t]*\()"
)


def mask_foreign_syntax(text: bytes) -> tuple[bytes, dict[str, tuple[str, ...]]]:
    """``text`` with foreign constructs blanked, and the header macros guessed from their place.

    The macros found are returned as attribute macros: a name holding ``RESTRICT`` stands for
    ``__restrict__`` (the only qualifier such macros are written for), others for nothing.

    >>> mask_foreign_syntax(b"auto f = [=] __device__ (int v) { return v; };")[0]
    b'auto f = [=]            (int v) { return v; };'
    >>> mask_foreign_syntax(b"const float * MY_RESTRICT x = p;")
    (b'const float *             x = p;', {'MY_RESTRICT': ('__restrict__',)})
    >>> mask_foreign_syntax(b"  CUDA_1D_KERNEL_LOOP(i, n) {")[0]
    b'  while              (i, n) {'
    """
    data = bytearray(text)
    found: dict[str, tuple[str, ...]] = {}

    def blank(start: int, end: int) -> None:
        for i in range(start, end):
            if data[i] not in (0x0A, 0x0D):
                data[i] = 0x20

    for m in _LAMBDA_SPACE.finditer(text):
        blank(m.start(1), m.end(1))
    for m in _POINTER_QUALIFIER_MACRO.finditer(text):
        name = m.group(1)
        if name in _NOT_A_MACRO:
            continue
        blank(m.start(1), m.end(1))
        word = name.decode()
        found[word] = ("__restrict__",) if "RESTRICT" in word else ()
    for m in _STATEMENT_MACRO.finditer(text):
        close = _matching_paren(text, m.end() - 1)
        if close < 0 or not _OPEN_BLOCK.match(text, close + 1):
            continue
        data[m.start(1) : m.start(1) + 5] = b"while"
        blank(m.start(1) + 5, m.end(1))
    for m in _LONE_MACRO.finditer(text):
        blank(m.start(1), m.end(1))
    for m in _TYPENAME_CAST.finditer(text):
        blank(m.start(1), m.end(1))
    for m in _SIGNATURE_MACRO.finditer(text):
        blank(m.start(1), m.end(1))
    for m in _FILE_SCOPE_MACRO.finditer(text):
        blank(m.start(1), m.end(1))
    return bytes(data), found


def _matching_paren(text: bytes, open_at: int) -> int:
    """Offset of the ``)`` closing the ``(`` at ``open_at`` on the same few lines, or -1."""
    depth = 0
    for i in range(open_at, min(len(text), open_at + 2000)):
        c = text[i]
        if c == 0x28:
            depth += 1
        elif c == 0x29:
            depth -= 1
            if depth == 0:
                return i
        elif c in (0x3B, 0x7B, 0x7D):  # ; { }: not a macro call's argument list
            return -1
    return -1


@dataclass(frozen=True)
class IsolatedBody:
    """A function body blanked because it does not parse; ``error`` is its first error's offset."""

    start: int
    end: int
    error: int
    snippet: str


#: A ``}`` in column 0 ends a top-level function, struct or namespace.
_TOP_LEVEL_CLOSE = re.compile(rb"^\}[^\n]*$", re.M)


def isolate_broken_bodies(text: bytes, tree: ts.Tree) -> tuple[bytes, ts.Tree, tuple[IsolatedBody, ...]]:
    """Blank the bodies of top-level functions that do not parse when an ERROR spans several functions.

    The file is cut after each ``}`` in column 0; a piece that overlaps a large ERROR is parsed
    alone, and if it holds a function whose body has an error, that body's inside is blanked
    (its braces kept). The result is kept only when it leaves less ERROR text.
    """
    big = [n for n in _errors(tree.root_node) if text.count(b"\n", n.start_byte, n.end_byte) > 0]
    if not big:
        return text, tree, ()
    data = bytearray(text)
    isolated: list[IsolatedBody] = []
    start = 0
    for close in _TOP_LEVEL_CLOSE.finditer(text):
        a, b = start, close.end()
        start = b
        if not any(n.start_byte < b and a < n.end_byte for n in big):
            continue
        piece = parse_tree(text[a:b])
        if not piece.root_node.has_error:
            continue
        for fn in _functions(piece.root_node):
            body = fn.child_by_field_name("body")
            if body is None or not body.has_error:
                continue
            first = _errors(body)
            error = a + (first[0].start_byte if first else body.start_byte)
            line = text[error : text.find(b"\n", error) if text.find(b"\n", error) >= 0 else len(text)]
            body_start, body_end = a + body.start_byte + 1, a + body.end_byte - 1
            for i in range(body_start, body_end):
                if data[i] not in (0x0A, 0x0D):
                    data[i] = 0x20
            isolated.append(
                IsolatedBody(body_start, body_end, error, line.decode("utf-8", "replace").strip()[:40])
            )
    if not isolated:
        return text, tree, ()
    trial = parse_tree(bytes(data))
    if _error_bytes(trial.root_node) >= _error_bytes(tree.root_node):
        return text, tree, ()
    return bytes(data), trial, tuple(isolated)


def _functions(root: ts.Node) -> list[ts.Node]:
    """Outermost function definitions under ``root`` (not the lambdas or local classes inside)."""
    found: list[ts.Node] = []
    stack = [root]
    while stack:
        node = stack.pop()
        if node.type == "function_definition":
            found.append(node)
            continue
        stack.extend(node.children)
    return found


def _errors(root: ts.Node) -> list[ts.Node]:
    found: list[ts.Node] = []
    stack = [root]
    while stack:
        node = stack.pop()
        if node.is_error or node.is_missing:
            found.append(node)
        elif node.has_error:
            stack.extend(node.children)
    return sorted(found, key=lambda n: n.start_byte)


def _error_bytes(root: ts.Node) -> int:
    return sum(max(1, n.end_byte - n.start_byte) for n in _errors(root))
