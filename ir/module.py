"""``parse()`` and :class:`Module`: a CUDA file, its tree and its IR index.

A module never loses a byte: it keeps the source it was given and every IR record points
into it, so printing an unedited module gives the input back exactly and edits are
byte-range replacements (see :mod:`ktx.ir.edits`).
"""

from __future__ import annotations

import os
import re
import threading
from collections import OrderedDict
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING

import tree_sitter as ts
from ktx.ir.errors import KtxError, Location
from ktx.ir.foreign import IsolatedBody, isolate_broken_bodies, mask_foreign_syntax
from ktx.ir.index import Indexer
from ktx.ir.language import captures, parse_tree
from ktx.ir.launch import OpaqueLaunch
from ktx.ir.load_helpers import find as find_load_helpers
from ktx.ir.load_helpers import register as register_load_helpers
from ktx.ir.mask import describe_hidden, mask
from ktx.ir.nodes import (
    Constant,
    Diagnostic,
    Function,
    LaunchSite,
    Loop,
    Macro,
    SharedArray,
)
from ktx.ir.source import LineIndex, Span

if TYPE_CHECKING:
    from collections.abc import Sequence

    from ktx.ir.clang import ClangFacts
    from ktx.ir.facts.kernel import Facts

#: How many diagnostics of one file are kept in full; the rest are counted.
MAX_DIAGNOSTICS = 200
#: ``<<<<<<< HEAD``, ``=======``, ``>>>>>>> branch`` at the start of a line: a file mid-merge.
_CONFLICT_MARKER = re.compile(rb"^(<{7}|={7}|>{7})(?=[ \t\r\n]|$)", re.M)


class ParseError(KtxError):
    """The input cannot be parsed into anything useful (binary, empty, not UTF-8...)."""


class Module:
    """A parsed CUDA source file with its IR index.

    >>> m = parse("__global__ void k(float* x) { x[threadIdx.x] = 0.f; }")
    >>> [k.name for k in m.kernels]
    ['k']
    >>> m.print() == "__global__ void k(float* x) { x[threadIdx.x] = 0.f; }"
    True
    """

    def __init__(self, source: bytes, path: str | None = None, tree: ts.Tree | None = None) -> None:
        self.source = source
        self.path = path
        masked = mask(source)
        text, guessed = mask_foreign_syntax(masked.text)
        #: Attribute macros (``#define FLASHINFER_INLINE inline __device__``) hidden from the parser,
        #: with the undefined ones guessed from their place (``float* MY_RESTRICT p``).
        self.attribute_macros = {**guessed, **masked.attribute_macros}
        #: Byte ranges of unparseable text blanked so that the kernels after it could be read.
        self.skipped: tuple[Span, ...] = ()
        #: ``#if`` groups inside functions parsed with one branch only (see :mod:`ktx.ir.mask`).
        self.hidden_branches = masked.hidden
        self.lines = LineIndex(source)
        #: Function bodies blanked because they do not parse (see :mod:`ktx.ir.foreign`).
        self.isolated: tuple[IsolatedBody, ...] = ()
        if tree is None:
            tree, skipped = recover_declarations(text)
            self.skipped = tuple(self.lines.span(a, b) for a, b in skipped)
            if tree.root_node.has_error:
                _, tree, self.isolated = isolate_broken_bodies(text, tree)
        self.tree = tree
        register_load_helpers(tree.root_node, find_load_helpers(source, path))
        restrict = frozenset(n for n, q in guessed.items() if "__restrict__" in q) | _restrict_defines(source)
        indexer = Indexer(source, self.tree, self.lines, self.attribute_macros, restrict)
        self.functions: tuple[Function, ...] = tuple(indexer.functions())
        self.loops: tuple[Loop, ...] = tuple(indexer.loops())
        self.launch_sites: tuple[LaunchSite, ...] = tuple(indexer.launch_sites())
        #: Kernels passed to a helper that launches them with a block the call does not write.
        self.opaque_launches: tuple[OpaqueLaunch, ...] = indexer.opaque_launches
        self.macros: tuple[Macro, ...] = tuple(indexer.macros())
        known = {m.name: m.int_value for m in self.macros if m.int_value is not None}
        constants, shared = indexer.constants_and_shared(known)
        self.constants: tuple[Constant, ...] = tuple(constants)
        self.shared_arrays: tuple[SharedArray, ...] = tuple(shared)
        self.diagnostics: tuple[Diagnostic, ...] = tuple(self._syntax_diagnostics())

    # -- views -------------------------------------------------------------------------

    @property
    def kernels(self) -> tuple[Function, ...]:
        return tuple(f for f in self.functions if f.is_kernel)

    @property
    def device_functions(self) -> tuple[Function, ...]:
        return tuple(f for f in self.functions if f.is_device)

    @cached_property
    def clang(self) -> ClangFacts | None:
        """libclang's view of the file (element types and sizes, macro values), on first use.

        Optional by design: ``clang.available`` is False, with a reason, where libclang is
        missing or cannot parse the file, and the rest of the IR works the same. See
        :mod:`ktx.ir.clang`.
        """
        from ktx.ir.clang import facts

        return facts(self)

    def facts(
        self, kernel: Function | str | None = None, template_args: Sequence[str] | None = None
    ) -> Facts:
        """The facts of ``kernel`` (name or function; the only kernel by default), kept per module.

        The one entry point passes ask (:mod:`ktx.ir.facts`): loops and who owns them, memory
        references, reductions, the launch mapping. A method, not a property, because facts
        belong to a kernel and may bind its template parameters; the same as
        :func:`ktx.ir.facts.facts_of`.
        """
        from ktx.ir.facts.kernel import facts_of

        return facts_of(self, kernel, template_args)

    @property
    def text_str(self) -> str:
        return self.source.decode("utf-8", "replace")

    def print(self) -> str:
        """The module as source text: the input itself when nothing was edited."""
        return self.source.decode("utf-8", "surrogateescape")

    def text(self, span: Span) -> str:
        return self.source[span.start : span.end].decode("utf-8", "replace")

    def node(self, span: Span) -> ts.Node:
        """The smallest tree node covering ``span``: the way from the index back to the tree."""
        node = self.tree.root_node.descendant_for_byte_range(span.start, span.end)
        assert node is not None
        return node

    def span(self, start: int, end: int) -> Span:
        return self.lines.span(start, end)

    def location(self, offset: int) -> Location:
        line, col = self.lines.line_col(offset)
        return Location(self.path, line, col)

    def kernel(self, name: str | None = None) -> Function:
        """The kernel called ``name``, or the only kernel when ``name`` is None."""
        kernels = self.kernels
        if name is None:
            if len(kernels) == 1:
                return kernels[0]
            if not kernels:
                raise KtxError("no __global__ kernel found", Location(self.path), "is this a CUDA file?")
            names = ", ".join(k.name for k in kernels)
            raise KtxError(
                f"{len(kernels)} kernels in this file: {names}",
                Location(self.path),
                "name one with --kernel NAME",
            )
        for k in kernels:
            if k.name == name:
                return k
        names = ", ".join(k.name for k in kernels) or "none"
        raise KtxError(f"no kernel named {name!r}", Location(self.path), f"kernels here: {names}")

    def loops_in(self, fn: Function) -> tuple[Loop, ...]:
        return tuple(lp for lp in self.loops if fn.body.contains(lp.span))

    def launches_of(self, kernel: str) -> tuple[LaunchSite, ...]:
        return tuple(s for s in self.launch_sites if s.kernel == kernel)

    def errors_in(self, span: Span) -> tuple[Diagnostic, ...]:
        return tuple(d for d in self.diagnostics if span.overlaps(d.span) or d.span.start == span.start)

    def kernel_errors(self, fn: Function) -> tuple[Diagnostic, ...]:
        """The syntax errors inside kernel ``fn``: a kernel with any is skipped alone."""
        return tuple(d for d in self.errors_in(fn.span) if d.severity == "error")

    def broken_kernels(self) -> tuple[tuple[Function, Diagnostic], ...]:
        """Each kernel that does not parse, with its first error (file:line); the others work."""
        found = ((k, self.kernel_errors(k)) for k in self.kernels)
        return tuple((k, errors[0]) for k, errors in found if errors)

    def require_parsed(self, fn: Function) -> None:
        """Raise a :class:`KtxError` at the first syntax error inside ``fn``, if it has one.

        A command about one kernel (``ktx apply``, ``ktx init``) calls this: rewriting or
        drafting a kernel that tree-sitter could not read would silently leave it unchanged,
        so the user gets the line to fix instead (exit 2). Other kernels of the file do not
        matter here; a file is never refused for a kernel it was not asked about.
        """
        errors = self.kernel_errors(fn)
        if errors:
            d = errors[0]
            raise KtxError(
                d.message,
                Location(self.path, d.span.line, d.span.col),
                "fix the syntax there (ktx rewrites only kernels it can parse)",
            )

    def with_source(self, source: bytes) -> Module:
        """A module over ``source`` (the result of edits), with the same path; one already
        parsed from the same bytes is reused (see :func:`_module_of`)."""
        return _module_of(source, self.path)

    # -- diagnostics -------------------------------------------------------------------

    def _syntax_diagnostics(self) -> list[Diagnostic]:
        """ERROR/MISSING nodes and conflict markers: errors inside a kernel, warnings elsewhere.

        Past :data:`MAX_DIAGNOSTICS` the rest are counted in one last warning, so that a
        file tree-sitter cannot read at all does not drown the report.
        """
        kernels = [f for f in self.functions if f.is_kernel]
        found: list[tuple[Span, str]] = []
        for node in error_nodes(self.tree.root_node):
            span = self.lines.span(node.start_byte, node.end_byte)
            snippet = self.text(span).strip().splitlines()[0][:40] if self.text(span).strip() else ""
            if node.is_missing:
                what = f"expected {node.type!r}"
            else:
                what = f"tree-sitter could not parse {snippet!r}" if snippet else "syntax error"
                last = self.lines.line_col(max(node.end_byte - 1, node.start_byte))[0]
                if last > span.line:
                    what += f" (lines {span.line}-{last})"
            found.append((span, what))
        for span in self.skipped:
            snippet = self.text(span).strip().splitlines()[0][:40]
            last = self.lines.line_col(max(span.end - 1, span.start))[0]
            lines = f" (lines {span.line}-{last})" if last > span.line else ""
            what = f"tree-sitter could not parse {snippet!r}{lines}, which hid the declaration after it"
            found.append((span, what))
        for body in self.isolated:
            span = self.lines.span(body.error, body.error)
            what = f"tree-sitter could not parse {body.snippet!r}; this function's body is skipped alone"
            found.append((span, what))
        for match in _CONFLICT_MARKER.finditer(self.source):
            span = self.lines.span(match.start(), match.end())
            marker = match.group(1).decode()
            found.append((span, f"version control conflict marker {marker!r}; resolve the merge"))
        result: list[Diagnostic] = []
        for span, what in sorted(found, key=lambda f: f[0].start):
            owner = next((k for k in kernels if k.span.overlaps(span) or k.span.contains(span)), None)
            if owner is not None:
                result.append(Diagnostic("error", f"{what} inside kernel {owner.name!r}", span, self.path))
            else:
                result.append(Diagnostic("warning", f"{what}; skipped, indexing continues", span, self.path))
        for hidden in self.hidden_branches:
            span = self.lines.span(hidden.start, hidden.end)
            fn = next((f for f in self.functions if f.span.contains(span)), None)
            where = None if fn is None else f"{'kernel' if fn.is_kernel else 'function'} {fn.name!r}"
            result.append(Diagnostic("warning", describe_hidden(hidden, where), span, self.path))
        result.sort(key=lambda d: d.span.start)
        if len(result) > MAX_DIAGNOSTICS:
            rest = result[MAX_DIAGNOSTICS:]
            errors = sum(d.severity == "error" for d in rest)
            summary = Diagnostic(
                "error" if errors else "warning",
                f"{len(rest)} more syntax problems not shown ({errors} inside kernels)",
                rest[0].span,
                self.path,
            )
            result = [*result[:MAX_DIAGNOSTICS], summary]
        return result


_RESTRICT_DEFINE = re.compile(
    rb"^[ \t]*#[ \t]*define[ \t]+([A-Za-z_]\w*)[ \t]+__restrict(?:__)?[ \t]*$", re.M
)


def _restrict_defines(source: bytes) -> frozenset[str]:
    """Macros the file defines as ``__restrict__`` (``#define MY_RESTRICT __restrict__``)."""
    return frozenset(m.group(1).decode() for m in _RESTRICT_DEFINE.finditer(source))


#: Line starts that begin a new declaration: where indexing can pick up after garbage.
_RESTART = re.compile(
    rb"^[ \t]*(template|__global__|extern|static|__device__|__host__|namespace)\b", re.M
)
_MAX_RECOVERIES = 20


def recover_declarations(text: bytes) -> tuple[ts.Tree, list[tuple[int, int]]]:
    """Blank unparseable lines that swallow the declarations after them; offsets do not move.

    ``REGISTER(k, float)`` without a semicolon, followed by ``__global__ void k(...)``, makes
    tree-sitter fold the kernel into an ERROR node (or glue the garbage onto the kernel's
    signature), and the kernel is lost or marked broken. For an ERROR outside any function
    body, the lines from the error's line to the next line that begins a declaration
    (``template``, ``__global__``, ``extern``, ...) inside the same top-level construct are
    blanked and the file reparsed. The change is kept only when it leaves less ERROR text and
    no fewer function definitions. Returns the tree of the (possibly blanked) text and the
    blanked ranges, so that they are still reported.
    """
    skipped: list[tuple[int, int]] = []
    tree = parse_tree(text)
    for _ in range(_MAX_RECOVERIES):
        if not tree.root_node.has_error:
            break
        functions, garbage = _count_functions(tree.root_node), _error_bytes(tree.root_node)
        for node in error_nodes(tree.root_node):
            if node.is_missing or any(a.type == "compound_statement" for a in _ancestors(node)):
                continue
            container = _top_level(node)
            line_start = text.rfind(b"\n", 0, node.start_byte) + 1
            line_end = text.find(b"\n", node.start_byte)
            restart = _RESTART.search(text, line_end + 1) if line_end >= 0 else None
            if restart is None or restart.start() >= max(container.end_byte, node.end_byte):
                continue
            candidate = bytearray(text)
            for i in range(line_start, restart.start()):
                if candidate[i] not in (0x0A, 0x0D):
                    candidate[i] = 0x20
            trial = parse_tree(bytes(candidate))
            if _count_functions(trial.root_node) >= functions and _error_bytes(trial.root_node) < garbage:
                text, tree = bytes(candidate), trial
                skipped.append((line_start, restart.start()))
                break
        else:
            break
    return tree, _merge(skipped)


def _ancestors(node: ts.Node) -> list[ts.Node]:
    found: list[ts.Node] = []
    parent = node.parent
    while parent is not None:
        found.append(parent)
        parent = parent.parent
    return found


def _top_level(node: ts.Node) -> ts.Node:
    """The outermost construct holding ``node`` in a file, namespace or ``extern "C"`` scope."""
    while node.parent is not None and node.parent.type not in ("translation_unit", "declaration_list"):
        node = node.parent
    return node


def _merge(ranges: list[tuple[int, int]]) -> list[tuple[int, int]]:
    merged: list[tuple[int, int]] = []
    for a, b in sorted(ranges):
        if merged and a <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(b, merged[-1][1]))
        else:
            merged.append((a, b))
    return merged


def _count_functions(root: ts.Node) -> int:
    return len(captures("functions", root).get("function", []))


def _error_bytes(root: ts.Node) -> int:
    return sum(n.end_byte - n.start_byte for n in error_nodes(root))


def _braced_launch_dim(node: ts.Node) -> bool:
    """``k<<<g, {x, y, 1}>>>``: C++ builds a ``dim3`` from the braces; tree-sitter-cuda reads
    them as a compound literal whose type is MISSING. That is valid code, not an error."""
    parent = node.parent
    return (
        node.type == "type_identifier"
        and parent is not None
        and parent.type == "compound_literal_expression"
        and parent.parent is not None
        and parent.parent.type == "kernel_call_syntax"
    )


def error_nodes(root: ts.Node) -> list[ts.Node]:
    """Outermost ERROR and MISSING nodes, in source order (not a launch's braced dim3)."""
    found: list[ts.Node] = []
    stack = [root]
    while stack:
        node = stack.pop()
        if node.is_missing and _braced_launch_dim(node):
            continue
        if node.is_error or node.is_missing:
            found.append(node)
            continue
        if node.has_error:
            stack.extend(reversed(node.children))
    return sorted(found, key=lambda n: n.start_byte)


def parse(source: str | bytes, path: str | None = None) -> Module:
    """Parse CUDA source text into a :class:`Module`.

    Raises :class:`ParseError` for input that is not text (binary, not UTF-8), with the
    line and column of the first offending byte; syntax errors become diagnostics.
    """
    data = source.encode("utf-8", "surrogateescape") if isinstance(source, str) else source
    nul = data.find(b"\x00", 0, 8192)
    if nul >= 0:
        raise ParseError(
            "binary file (NUL byte), not CUDA source", _location(data, nul, path), "give a .cu/.cuh text file"
        )
    try:
        data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ParseError(
            "source is not valid UTF-8", _location(data, exc.start, path), "save the file as UTF-8"
        ) from exc
    return _module_of(data, path)


#: Modules parsed lately, by (source, path, the files beside it). A module never changes after it
#: is built, so equal bytes may share one, its facts included. The same text is parsed again and
#: again: an edit set is reparsed once to look for new syntax errors and once for its result,
#: every pass of a probe starts from the spec's source, and a search instantiates its template
#: per shape and config (in tests/agent/test_loop.py's modelled ``ktx optimize``, 270 modules
#: were built, 212 of them by edits). Facts also read files beside the source (local headers
#: for typedefs and structs, a launcher's sibling files), so the key holds their sizes and
#: modification times: a header rewritten between two parses gives a new module
#: (tests/test_speccheck.py rewrites one). A rewrite of the same size within the file system's
#: time stamp granularity (a few ms on some) would go unseen.
_PARSED: OrderedDict[tuple[bytes, str | None, tuple[tuple[str, int, int], ...]], Module] = OrderedDict()
_PARSED_MAX = 128
_PARSED_LOCK = threading.Lock()
_LOCAL_INCLUDE = re.compile(rb'^[ \t]*#[ \t]*include[ \t]*"([^"\n]+)"', re.M)


def _neighbours(source: bytes, path: str | None) -> tuple[tuple[str, int, int], ...]:
    """(name, size, mtime) of the files in ``path``'s folder and of its local includes."""
    if path is None:
        return ()
    folder = Path(path).parent
    found: dict[str, tuple[str, int, int]] = {}
    try:
        with os.scandir(folder) as entries:
            for entry in entries:
                if entry.is_file():
                    st = entry.stat()
                    found[entry.path] = (entry.path, st.st_size, st.st_mtime_ns)
    except OSError:
        pass
    for match in _LOCAL_INCLUDE.finditer(source):
        header = os.path.join(folder, match.group(1).decode("utf-8", "replace"))
        if header not in found:
            try:
                st = os.stat(header)
                found[header] = (header, st.st_size, st.st_mtime_ns)
            except OSError:
                found[header] = (header, -1, -1)
    return tuple(sorted(found.values()))


def _module_of(source: bytes, path: str | None) -> Module:
    """The module of ``source`` at ``path``: a recent one over the same bytes and unchanged
    neighbouring files, else a new one."""
    data = bytes(source)
    key = (data, path, _neighbours(data, path))
    with _PARSED_LOCK:
        found = _PARSED.get(key)
        if found is not None:
            _PARSED.move_to_end(key)
            return found
    module = Module(data, path)  # outside the lock: two threads may both build it, and one wins
    with _PARSED_LOCK:
        _PARSED[key] = module
        while len(_PARSED) > _PARSED_MAX:
            _PARSED.popitem(last=False)
    return module


def _location(data: bytes, offset: int, path: str | None) -> Location:
    line = data.count(b"\n", 0, offset) + 1
    col = offset - (data.rfind(b"\n", 0, offset) + 1) + 1
    return Location(path, line, col)


def parse_file(path: str | Path) -> Module:
    """Read and parse a file; every way that can fail is a :class:`ParseError` (a KtxError)."""
    p = Path(path)
    if not p.exists():
        raise ParseError("no such file", Location(str(path)), "check the path")
    if p.is_dir():
        raise ParseError("is a directory, not a file", Location(str(path)), "give a .cu file")
    try:
        data = p.read_bytes()
    except OSError as exc:
        reason = exc.strerror or str(exc)
        raise ParseError(f"cannot read: {reason}", Location(str(path)), "check permissions") from exc
    if not data.strip():
        raise ParseError("empty file", Location(str(path), 1, 1), "give a file with a __global__ kernel")
    return parse(data, str(path))
