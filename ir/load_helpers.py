"""Read-only load helpers: ``__device__`` functions whose whole body is ``return __ldg(p);``.

Projects wrap ``__ldg`` in their own helper (FasterTransformer's ``ldg(const T* val)`` in
``utils/cuda_type_utils.cuh``, with bf16 specialisations that return ``val[0]`` on old
architectures). Without its definition, ``ldg(&bias[i])`` passes an address to an unknown
function, which must be taken as an escape (the callee may write it, in any order). With the
definition in view the call is a load of ``bias[i]``, exactly as ``__ldg(&bias[i])`` is.

So the helper's body is read where the compiler would read it: the file itself, and the headers
its quoted ``#include``s reach, one level deep, looked up beside the file and in the folders above
it (a project's include root is usually an ancestor of the file: FasterTransformer includes
``"src/fastertransformer/utils/cuda_type_utils.cuh"`` from its repository root). A name qualifies
only when EVERY definition found is one pointer parameter and a body of nothing but returns of
``__ldg(p)``/``*p``/``p[0]`` (preprocessor lines aside), and at least one uses a load intrinsic;
one other definition (an overload that writes, say) disqualifies it.

:func:`register` records the names per parsed tree; :mod:`ktx.ir.facts.kinds` asks
:func:`is_load_helper` when an address is passed to a call it does not know.
"""

from __future__ import annotations

import functools
import re
from pathlib import Path

import tree_sitter as ts

#: ``__device__ ... name(const T* p) {``: the head of a one-pointer-parameter device function.
_HEAD = re.compile(
    r"__device__[^;{}()]*?\b(?P<name>[A-Za-z_]\w*)\s*\(\s*(?:const\s+)?[\w:<>\s]+?(?:\s+const)?\s*\*"
    r"\s*(?:const\s+)?(?:__restrict__\s+)?(?P<param>[A-Za-z_]\w*)\s*\)\s*\{"
)
_ANY_HEAD = re.compile(r"__device__[^;{}()]*?\b(?P<name>[A-Za-z_]\w*)\s*\(")
_INCLUDE = re.compile(r'^[ \t]*#[ \t]*include[ \t]*"([^"]+)"', re.M)
_LOADS = ("__ldg", "__ldcs", "__ldcg", "__ldca", "__ldlu", "__ldcv")
#: How many folders above the file a quoted include is looked up in.
_ANCESTORS = 6

#: Load-helper names per tree root, keyed by the root node's id and checked against its length.
_REGISTRY: dict[int, tuple[int, frozenset[str]]] = {}


def _body(text: str, open_brace: int) -> str | None:
    depth = 0
    for k in range(open_brace, len(text)):
        if text[k] == "{":
            depth += 1
        elif text[k] == "}":
            depth -= 1
            if depth == 0:
                return text[open_brace + 1 : k]
    return None


def _verdict(body: str, param: str) -> str:
    """'ldg' (returns an intrinsic load of ``param``), 'deref' (``*p``/``p[0]``), or '' (anything else)."""
    lines = [ln for ln in body.splitlines() if not ln.strip().startswith("#")]
    code = re.sub(r"//[^\n]*|/\*.*?\*/", "", "\n".join(lines), flags=re.S)
    stmts = [s.strip() for s in code.split(";") if s.strip()]
    if not stmts:
        return ""
    p = re.escape(param)
    seen = set()
    for s in stmts:
        flat = "".join(s.split())
        m = re.fullmatch(rf"return\(?(\w+)\(\(?{p}\)?\)\)?", flat)
        if m is not None and m.group(1) in _LOADS:
            seen.add("ldg")
        elif re.fullmatch(rf"return\(?(\*\(?{p}\)?|{p}\[0\])\)?", flat):
            seen.add("deref")
        else:
            return ""
    return "ldg" if "ldg" in seen else "deref"


def helpers_in(text: str) -> tuple[set[str], set[str]]:
    """(names with a qualifying definition, names with any other ``__device__`` definition) in ``text``."""
    good: set[str] = set()
    bad: set[str] = set()
    qualified: set[int] = set()
    for m in _HEAD.finditer(text):
        body = _body(text, m.end() - 1)
        verdict = _verdict(body, m.group("param")) if body is not None else ""
        qualified.add(m.start("name"))
        if verdict == "ldg":
            good.add(m.group("name"))
        elif verdict != "deref":
            bad.add(m.group("name"))
    for m in _ANY_HEAD.finditer(text):
        if m.start("name") not in qualified:
            bad.add(m.group("name"))
    return good, bad


def _headers(path: Path, source: str) -> list[Path]:
    out: list[Path] = []
    folders = [path.parent, *list(path.parent.parents)[:_ANCESTORS]]
    for inc in _INCLUDE.findall(source):
        for folder in folders:
            cand = folder / inc
            if cand.is_file():
                out.append(cand)
                break
    return out


@functools.lru_cache(maxsize=256)
def _header_helpers(path: str, mtime_ns: int) -> tuple[frozenset[str], frozenset[str]]:
    """:func:`helpers_in` of a header, read once per version: every parse of a file that
    includes it (a pipeline reparses after each pass) would read it again otherwise."""
    del mtime_ns  # part of the cache key only
    good, bad = helpers_in(Path(path).read_text("utf-8", "replace"))
    return frozenset(good), frozenset(bad)


def find(source: bytes, path: str | None) -> frozenset[str]:
    """The read-only load helpers defined in ``source`` and the headers it includes (see module doc)."""
    text = source.decode("utf-8", "replace")
    good, bad = helpers_in(text)
    if path is not None and "#" in text:
        for header in _headers(Path(path), text):
            try:
                g, b = _header_helpers(str(header), header.stat().st_mtime_ns)
            except OSError:
                continue
            good |= g
            bad |= b
    return frozenset(good - bad)


def register(root: ts.Node, names: frozenset[str]) -> None:
    """Record ``names`` as the load helpers of the tree whose root is ``root``."""
    _REGISTRY[root.id] = (root.end_byte, names)


def is_load_helper(name: str, node: ts.Node) -> bool:
    """Whether ``name`` is a registered load helper of ``node``'s tree."""
    root = node
    while root.parent is not None:
        root = root.parent
    entry = _REGISTRY.get(root.id)
    return entry is not None and entry[0] == root.end_byte and name in entry[1]
