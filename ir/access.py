"""Memory accesses of a loop: which subscripts walk memory contiguously, through which pointers.

Passes that change how each thread touches memory (``vectorize``, ``cache-hints``) ask the same
questions before they rewrite, and this module answers them once, from the tree:

* **which memory** each pointer reaches (:class:`~ktx.ir.memref.Root`): a kernel parameter, a ``__shared__``
  array, or a local pointer computed from one of them (``x_row = input + t * 2 * d``), with the
  element type as written and whether the parameter is ``__restrict__`` and ``const``;
* **how the index moves** with the loop's induction variable: each subscript is a
  :class:`~ktx.ir.memref.MemRef`, the record every reader of memory returns, with ``stride``
  and ``offset`` filled in: ``p[i + off]``
  with ``off`` loop-invariant is contiguous (``stride == 1``); ``p[2 * i]`` is strided;
  anything else is unknown. ``off`` may depend on the variables of loops nested inside, as long
  as it is affine in them (``(t * TOPK + k) * d``): then a packed access is aligned for every
  ``k`` when it is for ``k = 0`` and the step between ``k`` and ``k + 1`` is a multiple of the
  pack;
* **whether two roots may alias** (:meth:`~ktx.ir.memref.Root.may_alias`): different address spaces never do,
  two global parameters do unless both are ``__restrict__``.

The analysis is syntactic and conservative: whatever it cannot read is reported as unknown,
and callers refuse rather than guess.

>>> from ktx.ir import parse
>>> m = parse('''__global__ void k(float* __restrict__ y, const float* __restrict__ x, int n) {
...   for (int i = threadIdx.x; i < n; i += blockDim.x) y[i] = 2.f * x[i + 1]; }''')
>>> info = analyze_loop(m, m.kernel(), m.loops[0])
>>> [(a.kind, a.pointer, a.stride, a.offset) for a in info.accesses]
[('store', 'y', 1, ''), ('load', 'x', 1, '1')]
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import tree_sitter as ts
from ktx.ir.affine_form import Affine
from ktx.ir.affine_tree import index_node
from ktx.ir.consteval import SIZEOF
from ktx.ir.facts.kinds import access_kind, intrinsic_call, intrinsic_of
from ktx.ir.kernel_index import kernel_index
from ktx.ir.memref import UNKNOWN, MemRef, Root, Term
from ktx.ir.nodes import Function, Loop
from ktx.ir.syntax import text as _text
from ktx.ir.syntax import walk as _walk

if TYPE_CHECKING:
    from ktx.ir.module import Module  # a type only: Module.facts() imports the facts

_ASSIGN = ("=", "+=", "-=", "*=", "/=", "%=", "&=", "|=", "^=", "<<=", ">>=")
_CONDITIONAL = frozenset(
    {
        "if_statement",
        "conditional_expression",
        "switch_statement",
        "while_statement",
        "do_statement",
        "case_statement",
        "lambda_expression",
    }
)
#: The one reader of a subscript's index is :func:`ktx.ir.affine_tree.index_node`; ``ktx.draft``
#: imports it from here under this name.
_index_node = index_node
_LOOPS = frozenset({"for_statement", "while_statement", "do_statement", "for_range_loop"})
_QUALIFIERS = frozenset({"const", "volatile", "__restrict__", "__restrict", "restrict"})


def _strip_parens(node: ts.Node) -> ts.Node:
    while node.type == "parenthesized_expression" and node.named_child_count == 1:
        inner = node.named_children[0]
        node = inner
    return node


# -- roots ---------------------------------------------------------------------------------------


def element_type(declared: str) -> str:
    """The pointee of a declared pointer or array type, qualifiers removed.

    >>> element_type("const T* __restrict__"), element_type("volatile float *")
    ('T', 'float')
    """
    words = declared.replace("*", " ").replace("&", " ").split()
    return " ".join(w for w in words if w not in _QUALIFIERS)


def _declarator_name(decl: ts.Node) -> tuple[ts.Node | None, int, bool]:
    """The identifier a declarator declares, its pointer depth, and whether it is an array."""
    depth = 0
    array = False
    node: ts.Node | None = decl
    while node is not None and node.type != "identifier":
        if node.type == "pointer_declarator":
            depth += 1
        elif node.type == "array_declarator":
            array = True
        inner = node.child_by_field_name("declarator")
        node = inner
    return node, depth, array


def roots(module: Module, fn: Function) -> dict[str, Root]:
    """Every pointer-like name of ``fn`` with the memory it reaches.

    Parameters and ``__shared__`` arrays are roots themselves. A local pointer takes the root
    of the one root-valued name in its initialiser (``x_row = input + t * d`` reaches
    ``input``); a local that is reassigned, or whose initialiser mixes roots, is unknown.
    """
    found: dict[str, Root] = {}
    for p in fn.params:
        if p.pointer_depth == 1:
            found[p.name] = Root(p.name, "global", p.restrict, p.const, element_type(p.base_type))
        elif p.pointer_depth > 1:
            found[p.name] = UNKNOWN
    for arr in module.shared_arrays:
        if arr.function in (fn.name, None):
            found[arr.name] = Root(arr.name, "shared", True, False, element_type(arr.type))
    body = module.node(fn.body)
    assigned = assigned_names(module, body)
    for node in _walk(body):
        if node.type != "declaration":
            continue
        type_node = node.child_by_field_name("type")
        base = _text(module, type_node) if type_node is not None else ""
        qualifiers = " ".join(_text(module, c) for c in node.children if c.type == "type_qualifier")
        for decl in node.children_by_field_name("declarator"):
            target = decl.child_by_field_name("declarator") if decl.type == "init_declarator" else decl
            if target is None:
                continue
            ident, depth, array = _declarator_name(target)
            if ident is None:
                continue
            name = _text(module, ident)
            if "__shared__" in qualifiers or (name in found and found[name].space == "shared"):
                continue
            if array and depth == 0:
                found[name] = Root(name, "local", True, False, element_type(base))
                continue
            value = decl.child_by_field_name("value") if decl.type == "init_declarator" else None
            if depth == 0 and base == "auto" and value is not None:
                # ``auto dst_ptr = (Vec*)dst + dims * bi``: a pointer whose type the cast in its
                # initialiser gives (lmdeploy's MoeGatherKernel writes dst only through one)
                cast = _pointer_cast_type(module, value)
                if cast is not None:
                    depth, base = 1, cast
            if depth != 1:
                continue
            if value is None or name in assigned:
                found[name] = UNKNOWN
                continue
            origins = {found[n].name for n in _names(module, value) if n in found}
            origin = [found[n] for n in _names(module, value) if n in found]
            if len(origins) != 1 or not origin[0].name:
                found[name] = UNKNOWN
                continue
            parent = origin[0]
            const = parent.const or "const" in qualifiers.split() + base.split()
            found[name] = Root(parent.name, parent.space, parent.restrict, const, element_type(base))
    return found


def _pointer_cast_type(module: Module, node: ts.Node) -> str | None:
    """``T`` where ``node`` is a cast to ``T*`` (``(T*)p``, ``reinterpret_cast<T*>(p)``), or
    such a cast plus or minus an offset; else None."""
    while node.type == "parenthesized_expression" and node.named_child_count == 1:
        node = node.named_children[0]
    if node.type == "binary_expression":
        op = node.child_by_field_name("operator")
        left = node.child_by_field_name("left")
        if op is None or op.type not in ("+", "-") or left is None:
            return None
        return _pointer_cast_type(module, left)
    if node.type == "cast_expression":
        t = node.child_by_field_name("type")
        text = _text(module, t) if t is not None else ""
    elif node.type == "call_expression":
        fn = node.child_by_field_name("function")
        head = _text(module, fn) if fn is not None else ""
        m = re.fullmatch(r"\s*(?:reinterpret|static)_cast\s*<(.*)>\s*", head, re.S)
        text = m.group(1) if m else ""
    else:
        return None
    text = re.sub(r"/\*.*?\*/", " ", text, flags=re.S).strip()
    if text.count("*") != 1 or not text.endswith("*"):
        return None
    return " ".join(text[:-1].split())


def _names(module: Module, node: ts.Node) -> list[str]:
    return [_text(module, n) for n in _walk(node) if n.type == "identifier"]


def assigned_names(module: Module, node: ts.Node) -> dict[str, list[ts.Node]]:
    """Plain variables written under ``node`` (``x = ...``, ``x += ...``, ``++x``), by name.

    The one walker is :func:`ktx.ir.facts.assign.assigned` (imported here when called: the
    facts package imports this module)."""
    from ktx.ir.facts.assign import assigned

    return assigned(module, node)


def declared_names(module: Module, node: ts.Node) -> set[str]:
    """Names declared under ``node`` (locals of the body, variables of nested loops)."""
    names: set[str] = set()
    for n in _walk(node):
        if n.type not in ("declaration", "for_range_loop"):
            continue
        for decl in n.children_by_field_name("declarator"):
            target = decl.child_by_field_name("declarator") if decl.type == "init_declarator" else decl
            if target is None:
                continue
            ident, _, _ = _declarator_name(target)
            if ident is not None:
                names.add(_text(module, ident))
    return names


def resolve_type(type_text: str, fn: Function, template_args: Sequence[str]) -> str:
    """``type_text`` with the kernel's type template parameters replaced by their arguments.

    >>> from ktx.ir import parse
    >>> k = parse("template <typename T, int N> __global__ void k(T* x) {}").kernel()
    >>> resolve_type("T", k, ["__half", "4"])
    '__half'
    """
    for tp, arg in zip(fn.template_params, template_args, strict=False):
        if tp.kind == "type" and type_text == tp.name:
            return " ".join(arg.split())
    return type_text


def element_size(module: Module, type_text: str, fn: Function, template_args: Sequence[str]) -> int | None:
    """``sizeof`` an element type, through the kernel's template arguments and libclang."""
    resolved = resolve_type(type_text, fn, template_args)
    size = SIZEOF.get(resolved)
    if size is not None:
        return size
    clang = module.clang
    if clang is not None and clang.available:
        return clang.sizeof(resolved)
    return None


# -- index expressions ---------------------------------------------------------------------------


def terms(node: ts.Node) -> list[Term]:
    """The additive terms of an expression, through parentheses and unary minus."""
    out: list[Term] = []

    def visit(n: ts.Node, sign: int) -> None:
        n = _strip_parens(n)
        if n.type == "binary_expression":
            op = n.child_by_field_name("operator")
            left = n.child_by_field_name("left")
            right = n.child_by_field_name("right")
            if op is not None and left is not None and right is not None and op.type in ("+", "-"):
                visit(left, sign)
                visit(right, sign if op.type == "+" else -sign)
                return
        if n.type == "unary_expression":
            op = n.child_by_field_name("operator")
            arg = n.child_by_field_name("argument")
            if op is not None and arg is not None and op.type in ("-", "+"):
                visit(arg, -sign if op.type == "-" else sign)
                return
        out.append(Term(sign, n))

    visit(node, 1)
    return out


def mentions(module: Module, node: ts.Node, names: set[str] | frozenset[str]) -> bool:
    return any(n.type == "identifier" and _text(module, n) in names for n in _walk(node))


def coefficient(module: Module, node: ts.Node, var: str) -> int | None:
    """The integer coefficient of ``var`` in a term (``var`` -> 1, ``2 * var`` -> 2); None if not linear."""
    n = _strip_parens(node)
    if n.type == "identifier":
        return 1 if _text(module, n) == var else 0
    if not mentions(module, n, {var}):
        return 0
    if n.type == "cast_expression":
        inner = n.child_by_field_name("value")
        return coefficient(module, inner, var) if inner is not None else None
    if n.type == "binary_expression":
        op = n.child_by_field_name("operator")
        left = n.child_by_field_name("left")
        right = n.child_by_field_name("right")
        if op is None or left is None or right is None:
            return None
        if op.type == "*":
            for a, b in ((left, right), (right, left)):
                lit = _strip_parens(b)
                if lit.type == "number_literal" and not mentions(module, b, {var}):
                    scale = coefficient(module, a, var)
                    factor = _int(_text(module, lit))
                    if scale is not None and factor is not None:
                        return scale * factor
            return None
        if op.type in ("+", "-"):
            total = 0
            for t in terms(n):
                c = coefficient(module, t.node, var)
                if c is None:
                    return None
                total += t.sign * c
            return total
    return None


def _int(text: str) -> int | None:
    t = text.rstrip("uUlL")
    try:
        return int(t, 0)
    except ValueError:
        return None


def affine(module: Module, node: ts.Node, names: set[str] | frozenset[str]) -> bool:
    """Whether ``node`` is affine in ``names``: sums of terms, each a name times invariants."""
    n = _strip_parens(node)
    if not mentions(module, n, names):
        return True
    if n.type == "identifier":
        return True
    if n.type == "cast_expression":
        value = n.child_by_field_name("value")
        return value is not None and affine(module, value, names)
    if n.type == "unary_expression":
        op = n.child_by_field_name("operator")
        arg = n.child_by_field_name("argument")
        return op is not None and op.type in ("-", "+") and arg is not None and affine(module, arg, names)
    if n.type == "binary_expression":
        op = n.child_by_field_name("operator")
        left = n.child_by_field_name("left")
        right = n.child_by_field_name("right")
        if op is None or left is None or right is None:
            return False
        if op.type in ("+", "-"):
            return affine(module, left, names) and affine(module, right, names)
        if op.type == "*":
            lm, rm = mentions(module, left, names), mentions(module, right, names)
            if lm and rm:
                return False
            return affine(module, left if lm else right, names)
    return False


def substitute(module: Module, node: ts.Node, values: Mapping[str, str]) -> str:
    """The text of ``node`` with identifiers in ``values`` replaced (parenthesised)."""
    pieces: list[str] = []
    pos = node.start_byte
    for n in _walk(node):
        if n.type == "identifier" and _text(module, n) in values and n.start_byte >= pos:
            pieces.append(module.source[pos : n.start_byte].decode("utf-8", "replace"))
            value = values[_text(module, n)]
            pieces.append(value if value.replace("_", "").replace(".", "").isalnum() else f"({value})")
            pos = n.end_byte
    pieces.append(module.source[pos : node.end_byte].decode("utf-8", "replace"))
    return "".join(pieces)


# -- accesses of a loop --------------------------------------------------------------------------


@dataclass(frozen=True)
class LoopAccesses:
    """The accesses under one loop, with the names its body declares and writes."""

    loop: Loop
    node: ts.Node
    body: ts.Node
    var: str | None
    accesses: tuple[MemRef, ...]
    declared: frozenset[str]
    assigned: frozenset[str]
    pointer_writes: tuple[ts.Node, ...]
    """Writes through ``*p`` or ``p->f``: memory the analysis cannot attribute to an index."""

    def conflict_pairs(self) -> list[tuple[MemRef, MemRef]]:
        """Pairs of accesses where a write may touch what another access reads or writes.

        Accesses through the same pointer with the same index text are the same element (an
        in-place update), which is fine; anything else through roots that may alias is a
        conflict. A pass may still rewrite around one with a run-time check that the pointers
        are apart (``vectorize`` does, for two pointers indexed alike).
        """
        found: list[tuple[MemRef, MemRef]] = []
        for i, a in enumerate(self.accesses):
            for b in self.accesses[i + 1 :]:
                if not (a.writes or b.writes) or not a.memory.may_alias(b.memory):
                    continue
                if a.pointer == b.pointer and _same(a, b):
                    continue
                found.append((a, b))
        return found

    def conflicts(self) -> list[str]:
        """:meth:`conflict_pairs`, said in words."""
        return [conflict_text(a, b) for a, b in self.conflict_pairs()]


def conflict_text(a: MemRef, b: MemRef) -> str:
    """``out[i] and in[i] may touch aliasing memory (line 6 and 6)``."""
    what = "the same memory" if a.memory.name == b.memory.name and a.memory.name else "aliasing memory"
    return (
        f"{a.pointer}[{_index_text(a)}] and {b.pointer}[{_index_text(b)}] may touch {what} "
        f"(line {a.line} and {b.line})"
    )


def same_index(a: MemRef, b: MemRef) -> bool:
    """Whether the two subscripts are written alike (token for token)."""
    return _same(a, b)


def _index_text(a: MemRef) -> str:
    return index_source(a).decode("utf-8", "replace")


def _same(a: MemRef, b: MemRef) -> bool:
    return index_source(a).split() == index_source(b).split()


def index_source(a: MemRef) -> bytes:
    """The bytes of a subscript's index as written (``b''`` when it has none)."""
    return (a.index_node.text if a.index_node is not None else None) or b""


def _context(sub: ts.Node, stop: ts.Node) -> tuple[bool, tuple[ts.Node, ...]]:
    conditional = False
    loops: list[ts.Node] = []
    node = sub.parent
    child = sub
    while node is not None and node.id != stop.id:
        if node.type in ("conditional_expression", "if_statement"):
            cond = node.child_by_field_name("condition")
            if cond is None or cond.id != child.id:
                conditional = True  # a branch; the condition itself is always evaluated
        elif node.type in _CONDITIONAL:
            conditional = True
        elif node.type == "binary_expression":
            op = node.child_by_field_name("operator")
            right = node.child_by_field_name("right")
            if op is not None and op.type in ("&&", "||") and right is not None and right.id == child.id:
                conditional = True
        elif node.type == "for_statement":
            body = node.child_by_field_name("body")
            if body is not None and body.id == child.id:
                loops.append(node)
            else:
                conditional = True  # in a loop header: evaluated a data-dependent number of times
        elif node.type == "for_range_loop":
            conditional = True
        child = node
        node = node.parent
    return conditional, tuple(reversed(loops))


def _through_local(
    module: Module,
    body: ts.Node,
    index: ts.Node,
    sub: ts.Node,
    var: str,
    written: Mapping[str, list[ts.Node]],
    declared: frozenset[str],
) -> tuple[int, list[Term]] | None:
    """``(1, offset terms)`` of ``p[index]`` where ``index`` is a local of the loop body declared
    once, before ``sub``, never assigned again, whose initialiser is the loop variable plus an
    offset (``const int index = i * N + j; ... Y[index]``, CTranslate2's layer norm): the access
    is element ``var`` of a row exactly as ``Y[i * N + j]`` is. None otherwise (the index as
    written decides). The offset terms are nodes of the initialiser, read where it stands."""
    from ktx.ir import syntax

    node = _strip_parens(index)
    if node.type != "identifier":
        return None
    name = _text(module, node)
    if name == var or written.get(name):
        return None
    decls = [
        d
        for d in _walk(body)
        if d.type in ("init_declarator", "identifier")
        and d.parent is not None
        and (d.type == "init_declarator" or d.parent.type in ("declaration", "init_declarator"))
        and d.parent.type != "init_declarator"
        and _text(module, d.child_by_field_name("declarator") or d) == name
    ]
    local = syntax.local_declarations(module, body, before=sub.start_byte).get(name)
    if len(decls) != 1 or local is None or local.value is None:
        return None
    stride, rest = relative_terms(module, _strip_parens(local.value), var)
    if stride != 1 or rest is None:
        return None
    # the offset is read where the packed loop's address is: it may not name what the body changes
    if any(mentions(module, t.node, set(declared) | {k for k, v in written.items() if v}) for t in rest):
        return None
    return stride, rest


def relative_terms(module: Module, index: ts.Node, var: str) -> tuple[int | None, list[Term] | None]:
    """``(stride, offset terms)`` of ``index`` relative to ``var``: the coefficient of ``var``
    and, when it is 1 and the rest of the index does not mention ``var``, the terms of that
    rest (None otherwise)."""
    stride = coefficient(module, index, var)
    if stride != 1:
        return stride, None
    parts = terms(index)
    lone = [t for t in parts if t.sign == 1 and t.node.type == "identifier" and _text(module, t.node) == var]
    rest = [t for t in parts if t not in lone[:1]]
    if lone and not any(mentions(module, t.node, {var}) for t in rest):
        return stride, rest
    return stride, None


def subscript_ref(
    module: Module,
    fn: Function,
    sub: ts.Node,
    at: ts.Node,
    index: ts.Node,
    pointer: str,
    root: Root,
    stride: int | None,
    offset: str | None,
    offset_terms: Sequence[Term],
    conditional: bool,
    loops: tuple[ts.Node, ...] = (),
    packable: bool = False,
) -> MemRef:
    """The :class:`MemRef` of subscript ``sub`` read relative to a variable (``at``: the node
    that is the access, the whole call of a load intrinsic). Its affine index, unit and width
    are :class:`ktx.ir.kernel_index.KernelIndex`'s when that reader reaches the same root."""
    ix = kernel_index(module, fn)
    got = ix.subscript(sub)
    form: Affine | None = None
    unit, width = "", None
    if got is not None and root.name and got[0] == root.name:
        form, unit, width = got[1], got[2], ix.width(got[0], got[2])
    return MemRef(
        access_kind(sub),
        intrinsic_of(sub) or "subscript",
        pointer,
        root.name,
        form,
        unit,
        width,
        at,
        at.start_point[0] + 1,
        module.span(at.start_byte, at.end_byte),
        memory=root,
        element_type=root.element_type,
        conditional=conditional,
        index_node=index,
        stride=stride,
        offset=offset,
        offset_terms=tuple(offset_terms),
        loops=loops,
        packable=packable,
    )


def analyze_loop(
    module: Module, fn: Function, loop: Loop, known: Mapping[str, Root] | None = None
) -> LoopAccesses:
    """The accesses under ``loop`` (its body; the header is not memory traffic)."""
    node = module.node(loop.span)
    while node.type not in _LOOPS and node.parent is not None:
        node = node.parent
    body = node.child_by_field_name("body") or node
    root_of = dict(known) if known is not None else roots(module, fn)
    var = loop.var
    declared = frozenset(declared_names(module, body))
    written = assigned_names(module, body)
    assigned = frozenset(written)
    accesses: list[MemRef] = []
    pointer_writes: list[ts.Node] = []
    for n in _walk(body):
        if n.type == "subscript_expression":
            base = n.child_by_field_name("argument")
            index = _index_node(n)
            if base is None or index is None:
                continue
            base = _strip_parens(base)
            name = _text(module, base) if base.type == "identifier" else ""
            root = root_of.get(name, UNKNOWN) if name else UNKNOWN
            if base.type != "identifier" or (name not in root_of and name):
                # a[b][c], a.b[i], a local scalar array not found: memory we cannot name
                root = UNKNOWN if base.type != "identifier" else Root(name, "local", True, False, "")
            stride: int | None = None
            offset: str | None = None
            offset_terms: list[Term] = []
            if var is not None:
                stride, rest = relative_terms(module, index, var)
                through = _through_local(module, body, index, n, var, written, declared)
                if through is not None:
                    stride, rest = through
                if rest is not None:
                    offset_terms = rest
                    offset = _join(module, rest)
            conditional, loops = _context(n, body)
            whole = intrinsic_call(n) if access_kind(n) == "load" else None
            at = whole if whole is not None else n
            pointer = name or _text(module, base)
            accesses.append(
                subscript_ref(
                    module, fn, n, at, index, pointer, root, stride, offset, offset_terms, conditional, loops
                )
            )
        elif n.type in ("assignment_expression", "update_expression"):
            target = n.child_by_field_name("left" if n.type == "assignment_expression" else "argument")
            if target is not None and _strip_parens(target).type in (
                "pointer_expression",
                "field_expression",
            ):
                pointer_writes.append(n)
    return LoopAccesses(loop, node, body, var, tuple(accesses), declared, assigned, tuple(pointer_writes))


def _join(module: Module, parts: Sequence[Term]) -> str:
    text = ""
    for t in parts:
        piece = _text(module, t.node)
        if not text:
            text = piece if t.sign > 0 else f"-({piece})"
        else:
            text += f" + {piece}" if t.sign > 0 else f" - ({piece})"
    return text
