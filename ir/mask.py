"""Hide attribute-like macros, and preprocessor branches that split statements, without moving a byte.

tree-sitter-cuda knows CUDA's keywords but not the attribute macros real code builds from
them (``#define FLASHINFER_INLINE inline __attribute__((always_inline)) __device__``) nor
``__align__(16)``; each use becomes an ERROR node. Before parsing, such uses are replaced
by spaces of the same length, so every byte offset still points at the original text (which
the module keeps, prints and edits); the qualifiers the macro stood for are remembered and
given back to the functions that used it.

Preprocessor conditionals inside a function body are fine for tree-sitter when each branch
holds whole statements. When a branch holds half of one (two ``for`` headers sharing one body,
an ``if (...) {`` per branch), the function becomes an ERROR and recovery would drop it, taking
nothing else down but losing the kernel. :func:`hide_split_conditionals` keeps, for each such
group, the branch nvcc compiles for the device (``__CUDA_ARCH__`` = 900, ``defined(X)`` read from
the file's ``#define``s, unknown conditions taken as true) and blanks the directive lines and the
other branches. The group is reported as :class:`HiddenBranch`: the module indexes the kernel
and turns the group into a diagnostic that keeps passes from editing across it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import tree_sitter as ts
from ktx.ir.language import parse_tree

# Words that make a macro body "only attributes": qualifiers and attribute syntax.
_ATTRIBUTE_WORDS = {
    "inline",
    "static",
    "__inline__",
    "__forceinline__",
    "__noinline__",
    "__device__",
    "__host__",
    "__global__",
    "constexpr",
    "__attribute__",
    "always_inline",
    "noinline",
    "unused",
    "__align__",
    "__restrict__",
}
# The words among them that are qualifiers a function keeps (attribute arguments are not).
_QUALIFIERS = {
    "inline",
    "static",
    "constexpr",
    "__inline__",
    "__forceinline__",
    "__noinline__",
    "__device__",
    "__host__",
    "__global__",
}
_DEFINE = re.compile(rb"^[ \t]*#[ \t]*define[ \t]+([A-Za-z_]\w*)[ \t]+((?:\\\r?\n|\\.|[^\\\n])*)", re.M)
# ``__align__(16)``, ``__align__(alignof(T))``: parentheses nest up to three deep.
_ALIGN = re.compile(rb"__align__\s*\((?:[^()]|\((?:[^()]|\([^()]*\))*\))*\)")
_WORD = re.compile(r"[A-Za-z_]\w*")
# Any #define (object- or function-like) with its continuation lines.
_ANY_DEFINE = re.compile(rb"^[ \t]*#[ \t]*define\b(?:\\\r?\n|\\.|[^\\\n])*", re.M)
_BLOCK_COMMENT = re.compile(rb"/\*.*?\*/", re.S)


@dataclass(frozen=True)
class HiddenBranch:
    """A ``#if`` group inside a function whose other branches were blanked for parsing."""

    start: int
    """Offset of the ``#if`` line."""
    end: int
    """Offset just past the ``#endif`` line."""
    directive: str
    """The ``#if``/``#ifdef``/``#ifndef`` line as written."""
    kept_line: int
    """1-based line of the first line of the branch kept (0 when none is)."""


@dataclass(frozen=True)
class Masked:
    """The text tree-sitter parses, and the qualifiers each masked macro stood for."""

    text: bytes
    attribute_macros: dict[str, tuple[str, ...]]
    hidden: tuple[HiddenBranch, ...] = ()


def attribute_macros(source: bytes) -> dict[str, tuple[str, ...]]:
    """Object-like macros whose body holds only qualifiers and attributes, with those qualifiers."""
    found: dict[str, tuple[str, ...]] = {}
    for m in _DEFINE.finditer(source):
        name = m.group(1).decode()
        body = m.group(2).decode("utf-8", "replace").replace("\\\n", " ")
        words = _WORD.findall(body)
        if not words:
            continue
        stripped = re.sub(r"\(\([^)]*\)\)|\([^()]*\)", " ", body)
        if all(w in _ATTRIBUTE_WORDS or w in found for w in words) and not re.search(r"[^\w\s]", stripped):
            quals: list[str] = []
            for w in words:
                if w in found:
                    quals.extend(found[w])  # a macro built from another attribute macro
                elif w in _QUALIFIERS:
                    quals.append(w)
            found[name] = tuple(quals)
    return found


def mask(source: bytes) -> Masked:
    """Blank ``__align__(N)``, uses of attribute macros and comments in #define bodies.

    Every offset is kept: only bytes other than newlines are replaced, by spaces.
    """
    macros = attribute_macros(source)
    data = bytearray(source)

    def blank(start: int, end: int) -> None:
        for i in range(start, end):
            if data[i] not in (0x0A, 0x0D):
                data[i] = 0x20

    for m in _ALIGN.finditer(source):
        blank(m.start(), m.end())
    # tree-sitter ends a #define body at ``/*``: the rest of a multi-line dispatch macro
    # would be parsed as code. Comments inside bodies are blanked (the module keeps them).
    for d in _ANY_DEFINE.finditer(source):
        for c in _BLOCK_COMMENT.finditer(source, d.start(), d.end()):
            blank(c.start(), c.end())
    if macros:
        define_spans = [(m.start(), m.end()) for m in _DEFINE.finditer(source)]
        pattern = re.compile(rb"\b(" + b"|".join(re.escape(n.encode()) for n in macros) + rb")\b")
        for m in pattern.finditer(source):
            if any(s <= m.start() < e for s, e in define_spans):
                continue
            blank(m.start(), m.end())
    text, hidden = hide_split_conditionals(bytes(data), source)
    return Masked(text, macros, hidden)


# -- preprocessor conditionals inside functions --------------------------------------------------

_DIRECTIVE = re.compile(rb"^[ \t]*#[ \t]*(if|ifdef|ifndef|elif|else|endif)\b", re.M)
#: The architecture a kernel body is read for (ktx targets sm_90 machines).
CUDA_ARCH = 900
_SAFE_EXPR = re.compile(r"^[0-9\s()<>=!+\-*/%]*(?:(?:and|or|not)[0-9\s()<>=!+\-*/%]*)*$")


def _lines(text: bytes) -> list[tuple[int, int]]:
    """``(start, end)`` of each line, continuation lines of a directive joined to it."""
    out: list[tuple[int, int]] = []
    pos, n = 0, len(text)
    while pos < n:
        end = text.find(b"\n", pos)
        end = n if end < 0 else end + 1
        while end < n and text[pos:end].rstrip(b"\r\n").endswith(b"\\"):
            nxt = text.find(b"\n", end)
            end = n if nxt < 0 else nxt + 1
        out.append((pos, end))
        pos = end
    return out


def condition_value(
    kind: str, expr: str, defined: dict[str, int | None], header_macros: bool = False
) -> bool | None:
    """The truth of ``#if expr`` / ``#ifdef X`` / ``#ifndef X`` as nvcc's device pass sees it.

    ``defined`` maps the file's macros to their integer values (None when not an integer);
    ``__CUDA_ARCH__`` is :data:`CUDA_ARCH`. None when the expression cannot be read; with
    ``header_macros``, also when it names a macro the file does not define (outside
    ``defined(...)``), which a header ktx did not read may set.

    >>> condition_value("if", "__CUDA_ARCH__ >= 800", {}), condition_value("ifdef", "USE_X", {})
    (True, False)
    >>> condition_value("if", "defined(A) && !defined(B) || WIDTH > 4", {"A": None, "WIDTH": 8})
    True
    >>> condition_value("if", "ARCH_SM90", {}), condition_value("if", "ARCH_SM90", {}, header_macros=True)
    (False, None)
    """
    env = {**defined, "__CUDA_ARCH__": CUDA_ARCH, "__CUDACC__": 1}
    words = expr.split()
    if kind in ("ifdef", "ifndef"):
        if not words:
            return None
        hit = words[0] in env
        return hit if kind == "ifdef" else not hit
    text = re.sub(r"/\*.*?\*/|//.*", " ", expr)
    text = re.sub(
        r"\bdefined\s*\(\s*(\w+)\s*\)|\bdefined\s+(\w+)",
        lambda m: "1" if (m.group(1) or m.group(2)) in env else "0",
        text,
    )

    unknown: list[str] = []

    def word(m: re.Match[str]) -> str:
        value = env.get(m.group(0))
        if m.group(0) not in env:
            unknown.append(m.group(0))
        return str(value) if value is not None else "0"  # an unknown name is 0, as in cpp

    text = re.sub(r"\b[A-Za-z_]\w*\b", word, text)
    if unknown and header_macros:
        return None
    text = re.sub(r"\b(\d+)[uUlL]+\b", r"\1", text)
    text = text.replace("&&", " and ").replace("||", " or ")
    text = re.sub(r"!(?!=)", " not ", text)
    text = text.replace("/", "//")
    if not _SAFE_EXPR.match(text) or re.search(r"\d\s*\(", text):  # ``f(x)`` of an unknown macro
        return None
    try:
        return bool(eval(text, {"__builtins__": {}}, {}))  # digits and operators only (checked)
    except (SyntaxError, ZeroDivisionError, TypeError, ValueError):
        return None


_DEFINE_LINE = re.compile(rb"^[ \t]*#[ \t]*define[ \t]+([A-Za-z_]\w*)(\([^)]*\))?[ \t]*([^\n]*)", re.M)


def _defined_macros(source: bytes) -> dict[str, int | None]:
    found: dict[str, int | None] = {}
    for m in _DEFINE_LINE.finditer(source):
        value = m.group(3).decode("utf-8", "replace").split("//")[0].strip()
        try:
            found[m.group(1).decode()] = int(value.strip("()").rstrip("uUlL"), 0) if value else None
        except ValueError:
            found[m.group(1).decode()] = None
    return found


def conditional_groups(text: bytes) -> list[tuple[int, int]]:
    """``(start, end)`` of each outermost ``#if ... #endif`` group (unterminated groups left out)."""
    groups: list[tuple[int, int]] = []
    depth, start = 0, 0
    for a, b in _lines(text):
        m = _DIRECTIVE.match(text, a, b)
        if m is None:
            continue
        kind = m.group(1).decode()
        if kind in ("if", "ifdef", "ifndef"):
            if depth == 0:
                start = a
            depth += 1
        elif kind == "endif" and depth > 0:
            depth -= 1
            if depth == 0:
                groups.append((start, b))
    return groups


def blank_group(
    data: bytearray,
    source: bytes,
    start: int,
    end: int,
    defined: dict[str, int | None],
    header_macros: bool = False,
) -> int:
    """Blank the directive lines of one group and every branch nvcc would not compile.

    Returns the 1-based line of the first kept line of code (0 when none is kept).
    """
    stack: list[tuple[bool, bool]] = []  # (active, some branch already taken)
    kept_line = 0
    for a, b in _lines(source[start:end]):
        a, b = a + start, b + start
        m = _DIRECTIVE.match(source, a, b)
        if m is not None:
            kind = m.group(1).decode()
            expr = source[m.end() : b].decode("utf-8", "replace").replace("\\\n", " ")
            if kind in ("if", "ifdef", "ifndef"):
                outer = stack[-1][0] if stack else True
                value = condition_value(kind, expr, defined, header_macros)
                take = outer and (value is None or value)
                stack.append((take, take))
            elif kind == "elif" and stack:
                _, taken = stack[-1]
                outer = stack[-2][0] if len(stack) > 1 else True
                value = condition_value("if", expr, defined, header_macros)
                take = outer and not taken and (value is None or value)
                stack[-1] = (take, taken or take)
            elif kind == "else" and stack:
                _, taken = stack[-1]
                outer = stack[-2][0] if len(stack) > 1 else True
                stack[-1] = (outer and not taken, True)
            elif kind == "endif" and stack:
                stack.pop()
            _blank(data, a, b)
            continue
        if stack and not stack[-1][0]:
            _blank(data, a, b)
        elif not kept_line and source[a:b].strip():
            kept_line = source.count(b"\n", 0, a) + 1
    return kept_line


def _blank(data: bytearray, start: int, end: int) -> None:
    for i in range(start, end):
        if data[i] not in (0x0A, 0x0D):
            data[i] = 0x20


def _error_ranges(root: ts.Node) -> list[tuple[int, int]]:
    found: list[tuple[int, int]] = []
    stack = [root]
    while stack:
        node = stack.pop()
        if node.is_error or node.is_missing:
            found.append((node.start_byte, max(node.end_byte, node.start_byte + 1)))
        elif node.has_error:
            stack.extend(node.children)
    return found


def _inside_function(root: ts.Node, start: int, end: int) -> bool:
    """Whether ``[start, end)`` lies in a function (its body or its parameter list)."""
    node = root.descendant_for_byte_range(start, max(start, end - 1))
    while node is not None:
        if node.type in ("function_definition", "lambda_expression"):
            return True
        node = node.parent
    return False


#: The bytes :func:`_brace_depths` must look at: literal and comment starts, line ends, brackets.
_BRACE_SCAN_STOPS = frozenset(bytes([b]) for b in b"\"'/\n{}()")
_BRACE_SCAN_STOP = re.compile(rb"[\"'/\n{}()]")
#: A string or char literal's body after its opening quote: up to its closing quote or the line's
#: end (a backslash escapes the next byte, a newline too), matched where the loop stepped bytes.
_LITERAL_BODY = {q: re.compile(rb"(?:\\[\s\S]|[^\\\n" + q + rb"])*") for q in (b'"', b"'")}


def _brace_depths(source: bytes, offsets: list[int]) -> list[int]:
    """Braces and parentheses open at each of ``offsets`` (ascending line starts): code only
    (comments, strings and directive lines skipped), and in ``#if`` groups the first branch
    only, as tree-sitter would pair them. One scan for all offsets; it jumps (by regex) over
    the bytes that cannot matter, which most are: a byte at a time, this was a hot spot of every
    parse of a file with ``#if`` in it."""
    found: list[int] = []
    depth = 0
    skipping: list[bool] = []  # per open #if: whether this branch is skipped (not the first)
    i, n = 0, len(source)
    at_line_start = True
    k = 0
    while i < n and k < len(offsets):
        while k < len(offsets) and offsets[k] <= i:
            found.append(depth)
            k += 1
        c = source[i : i + 1]
        if at_line_start:
            j = i
            while j < n and source[j : j + 1] in (b" ", b"\t"):
                j += 1
            if source[j : j + 1] == b"#":
                m = _DIRECTIVE.match(source, i)
                if m is not None:
                    kind = m.group(1)
                    if kind in (b"if", b"ifdef", b"ifndef"):
                        skipping.append(False)
                    elif kind in (b"elif", b"else") and skipping:
                        skipping[-1] = True
                    elif kind == b"endif" and skipping:
                        skipping.pop()
                end = source.find(b"\n", i)
                while end >= 0 and source[i:end].rstrip(b"\r").endswith(b"\\"):
                    i = end + 1
                    end = source.find(b"\n", i)
                i = n if end < 0 else end + 1
                continue
        at_line_start = False
        if c not in _BRACE_SCAN_STOPS:  # nothing here can change the depth: jump to what can
            found_stop = _BRACE_SCAN_STOP.search(source, i)
            i = n if found_stop is None else found_stop.start()
            continue
        if c in (b'"', b"'"):
            body = _LITERAL_BODY[c].match(source, i + 1)  # always matches, maybe empty
            i = (i + 1 if body is None else body.end()) + 1
            continue
        if source.startswith(b"//", i):
            j = source.find(b"\n", i)
            i = n if j < 0 else j
            continue
        if source.startswith(b"/*", i):
            j = source.find(b"*/", i + 2)
            i = n if j < 0 else j + 2
            continue
        if c == b"\n":
            at_line_start = True
        elif not any(skipping):
            if c in (b"{", b"("):
                depth += 1
            elif c in (b"}", b")"):
                depth -= 1
        i += 1
    found.extend(depth for _ in range(len(offsets) - len(found)))
    return found


def hide_split_conditionals(text: bytes, source: bytes) -> tuple[bytes, tuple[HiddenBranch, ...]]:
    """Blank the ``#if`` groups that break a function body's parse (see the module docstring).

    A group is hidden only where the parse has an error over it and hiding it leaves less
    error text, none of it over the group, with the group inside a function; else it is kept.
    """
    if b"#" not in source:
        return text, ()
    every = conditional_groups(source)
    groups = [g for g, d in zip(every, _brace_depths(source, [a for a, _ in every]), strict=True) if d > 0]
    if not groups:  # include guards, file-scope configuration: nothing to hide
        return text, ()
    tree = parse_tree(text)
    if not tree.root_node.has_error:
        return text, ()
    defined = _defined_macros(source)
    hidden: list[HiddenBranch] = []
    for start, end in groups:
        errors = _error_ranges(tree.root_node)
        if not any(a < end and start < b for a, b in errors):
            continue
        trial = bytearray(text)
        kept = blank_group(trial, source, start, end, defined)
        if not kept:
            # Every line of the group blanked: ``#if TURBOMIND_ARCH_SM90`` around a whole kernel
            # body, the macro set to 1 for sm_90 by a header the file includes. Read as cpp's
            # undefined 0 it left lmdeploy's kernels empty ({}); a name the file does not define
            # is the header's to decide, so its branch is kept. (A group with an ``#else`` keeps
            # that branch as before: ``#if USE_ROCM ... #else``.)
            trial = bytearray(text)
            kept = blank_group(trial, source, start, end, defined, header_macros=True)
        candidate = parse_tree(bytes(trial))
        before = sum(b - a for a, b in errors)
        after = sum(b - a for a, b in _error_ranges(candidate.root_node))
        clean = not any(a < end and start < b for a, b in _error_ranges(candidate.root_node))
        if after < before and clean and _inside_function(candidate.root_node, start, end):
            text, tree = bytes(trial), candidate
            first = source[start:end].split(b"\n", 1)[0].decode("utf-8", "replace").strip()
            hidden.append(HiddenBranch(start, end, first, kept))
    return text, tuple(hidden)


def describe_hidden(hidden: HiddenBranch, owner: str | None) -> str:
    """The diagnostic for a hidden group (``owner``: ``kernel 'k'``): what was kept, and that
    passes leave it alone."""
    where = owner or "the function"
    kept = f"the branch at line {hidden.kept_line}" if hidden.kept_line else "none of its branches"
    return (
        f"`{hidden.directive}` splits a statement across its branches; {where} is indexed with "
        f"{kept} (what nvcc compiles for sm_90) and passes leave this code as is"
    )
