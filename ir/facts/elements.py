"""One element per thread: the kernel shape most elementwise CUDA code takes.

::

    int i = blockIdx.x * blockDim.x + threadIdx.x;      // or (size_t)..., unsigned, idx
    if (i < N) { out[i] = f(inp[i], ...); }             // or: if (i >= N) return; out[i] = ...;

:func:`element_body` is the one question ``vectorize`` (and any pass that regroups elements
between threads) asks of such a kernel: *is this a guarded one-element-per-thread body, and what
are its index, its bound and its statements?* It answers with an :class:`ElementBody`, with a
refusal that names the construct and its line, or with ``None`` when the kernel does not take
this shape at all (no global index at the top of its body), so that loop kernels get no remark.

:func:`element_accesses` then reads the body's subscripts: which are ``p[i + off]`` with ``off``
invariant (contiguous, packable), which sit under a condition or in a nested loop (they stay
scalar), and whether hoisting the packed loads above the body and sinking the packed stores
below it can change what a thread reads (:func:`reorder_conflict`).

The global index is recognised by :mod:`ktx.ir.affine` (``thread_index``: casts, ``unsigned``,
64-bit, a ``#define`` block size the launch passes), with a canonical-text fallback; the guard
may carry conditions on other coordinates (``row < M && col < N``). The body's subscripts are
:class:`ktx.ir.memref.MemRef` records, read relative to the element's index as
:func:`ktx.ir.access.analyze_loop` reads a loop's (:func:`ktx.ir.access.subscript_ref`).
:func:`type_size` follows ``typedef``s into the file's local headers under ``#if defined(...)``
(llm.c's ``floatX``), which libclang, given no headers, cannot.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
from typing import Literal

import tree_sitter as ts
from ktx.ir import Function, Module, syntax
from ktx.ir.access import index_source, mentions, relative_terms, roots, subscript_ref
from ktx.ir.affine import Affine, kernel_index
from ktx.ir.affine_tree import index_node as _index_node
from ktx.ir.facts import assign
from ktx.ir.facts.canon import GLOBAL_INDEX, canon, expand
from ktx.ir.facts.kinds import STORE_INTRINSICS, access_kind, intrinsic_call, intrinsic_kind, intrinsic_of
from ktx.ir.memref import UNKNOWN, MemRef, Root, Term
from ktx.ir.syntax import text as _text

#: The builtins whose value for an element changes when threads take several elements and the
#: grid's x shrinks (``blockDim`` and the y/z components keep theirs).
MOVED = frozenset({"threadIdx.x", "blockIdx.x", "gridDim.x"})
#: The thread index with a row's columns on the grid's y (the rows on its x).
Y_INDEX = GLOBAL_INDEX.replace("blockIdx.x", "blockIdx.y")


def moved_builtins(axis: str) -> frozenset[str]:
    """The builtins whose meaning changes when the grid's ``axis`` shrinks (:data:`MOVED` for x)."""
    return frozenset({"threadIdx.x", f"blockIdx.{axis}", f"gridDim.{axis}"})


_EXITS = frozenset({"break_statement", "continue_statement", "return_statement", "goto_statement"})
_LOOPS = frozenset({"for_statement", "while_statement", "do_statement", "for_range_loop"})
_PREPROC = frozenset({"preproc_if", "preproc_ifdef", "preproc_else", "preproc_elif"})


# -- the idiom -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class ElementBody:
    """A kernel in which thread ``blockIdx.x * blockDim.x + threadIdx.x`` handles element ``var``.

    ``form`` is ``block`` for ``if (var < bound) { stmts }`` (the last statement of the kernel)
    and ``return`` for ``if (var >= bound) return;`` followed by ``stmts`` to the kernel's end.
    ``between`` holds the declarations between the index and its guard (``int N = B * T * C;``);
    the region to rewrite runs from ``decl`` to ``end``.
    """

    decl: ts.Node
    var: str
    var_type: str
    index: ts.Node
    bound: ts.Node
    guard: ts.Node
    form: Literal["block", "return"]
    stmts: tuple[ts.Node, ...]
    between: tuple[ts.Node, ...]
    end: int
    conditions: tuple[str, ...] = ()
    """What else the guard asks for the element to run (``row < M`` of ``row < M && col < N``)."""
    inclusive: bool = False
    """The guard lets element ``bound`` run too (``if (var > n) return;``): ``bound + 1`` elements."""
    axis: str = "x"
    """The grid axis whose blocks number the elements (``y``: ``blockIdx.y * blockDim.x + threadIdx.x``)."""


def _line(node: ts.Node) -> int:
    return node.start_point[0] + 1


def _code(nodes: list[ts.Node]) -> list[ts.Node]:
    return [n for n in nodes if n.type != "comment"]


def _index_decl(module: Module, fn: Function, stmt: ts.Node) -> tuple[str, str, ts.Node, str] | None:
    """(var, type, initialiser, grid axis) when ``stmt`` declares the global thread index, else None.

    The grid axis is ``x`` for ``blockIdx.x * blockDim.x + threadIdx.x`` and ``y`` for
    ``blockIdx.y * blockDim.x + threadIdx.x`` (FasterTransformer's residual kernels: rows on the
    grid's x, a row's columns on its y), the axis whose grid shrinks when threads take packs.

    :func:`ktx.ir.affine.thread_index` decides (casts, ``unsigned``/``size_t``, a ``#define``
    block size that every launch passes *is* ``blockDim.x``); the canonical text of the
    initialiser is the fallback where it has no answer.
    """
    if stmt.type != "declaration":
        return None
    decls = stmt.children_by_field_name("declarator")
    if len(decls) != 1 or decls[0].type != "init_declarator":
        return None
    ident = decls[0].child_by_field_name("declarator")
    value = decls[0].child_by_field_name("value")
    if ident is None or ident.type != "identifier" or value is None:
        return None
    var = _text(module, ident)
    index = kernel_index(module, fn).thread_index("x")
    fn_body = module.node(fn.body)
    axis = "x"
    if index is not None and index.var == var and index.decl.id == stmt.id:
        pass
    else:
        form = canon(expand(module, fn_body, value, stmt.start_byte))
        if form == Y_INDEX:
            axis = "y"
        elif form != GLOBAL_INDEX and not _flat_index(module, fn, value):
            return None
    words = [
        _text(module, c)
        for c in stmt.children
        if c.type not in ("init_declarator", ";", "comment") and _text(module, c) != "const"
    ]
    return var, " ".join(words), value, axis


def _flat_index(module: Module, fn: Function, value: ts.Node) -> bool:
    """Whether ``value`` numbers the threads of a 2-D grid flattened row by row:
    ``(blockIdx.y * gridDim.x + blockIdx.x) * blockDim.x + threadIdx.x`` (FasterTransformer's
    ``sigmoid_kernel``, for sizes above one grid row's limit).

    Such a kernel is packed on the grid's x like the 1-D index: with ``gx`` shrunk to
    ``ceil(gx / V)`` and each thread taking ``V`` elements, the ``gy * ceil(gx / V) * blockDim.x``
    threads cover ``V`` times as many elements, at least the ``gy * gx * blockDim.x`` the launch
    covered before. The index reads ``gridDim.x`` as launched, so thread and pack stay in step.
    """
    form = kernel_index(module, fn).affine(value)
    if form is None:
        return False
    bd = Affine.sym("blockDim.x")
    flat = Affine.sym("threadIdx.x") + Affine.sym("blockIdx.x") * bd
    flat = flat + Affine.sym("blockIdx.y") * Affine.sym("gridDim.x") * bd
    return bool(form.equals(flat))


def _guard(
    module: Module, stmt: ts.Node, var: str
) -> tuple[Literal["block", "return"], ts.Node, tuple[str, ...], bool] | None:
    """(form, bound, other conditions) for ``if (var < n) ...`` / ``if (var >= n) return;``.

    2-D kernels add conditions on other coordinates: ``if (row < M && col < N) {...}`` or
    ``if (row >= M || col >= N) return;``. The other conditions must not mention ``var``; they
    come back as what must hold for the element to run (``row < M``, ``!(row >= M)``).
    """
    if stmt.type != "if_statement" or stmt.child_by_field_name("alternative") is not None:
        return None
    cond = stmt.child_by_field_name("condition")
    if cond is None:
        return None
    then = stmt.child_by_field_name("consequence")
    body = _code(then.named_children) if then is not None and then.type == "compound_statement" else [then]
    only = body[0] if len(body) == 1 else None
    returns = only is not None and only.type == "return_statement" and not only.named_children
    parts = _chain(_unparen(cond), "||" if returns else "&&")
    found: tuple[bool, ts.Node, bool] | None = None
    others: list[str] = []
    for part in parts:
        comparison = _compare(module, part, var)
        if comparison is not None and found is None:
            found = comparison
        elif mentions(module, part, {var}):
            return None
        else:
            text = " ".join(_text(module, part).split())
            others.append(f"!({text})" if returns else text)
    if found is None:
        return None
    less, bound, inclusive = found
    if less and not returns:
        return "block", bound, tuple(others), inclusive
    if not less and returns:
        return "return", bound, tuple(others), inclusive
    return None


def _unparen(node: ts.Node) -> ts.Node:
    while node.type in ("condition_clause", "parenthesized_expression") and node.named_child_count == 1:
        node = node.named_children[0]
    return node


def _chain(node: ts.Node, op: str) -> list[ts.Node]:
    """The operands of a chain ``a op b op c`` (through parentheses)."""
    node = _unparen(node)
    if node.type == "binary_expression":
        o = node.child_by_field_name("operator")
        left = node.child_by_field_name("left")
        right = node.child_by_field_name("right")
        if o is not None and o.type == op and left is not None and right is not None:
            return _chain(left, op) + _chain(right, op)
    return [node]


def _compare(module: Module, node: ts.Node, var: str) -> tuple[bool, ts.Node, bool] | None:
    """(``var < bound``?, bound, inclusive?) for ``var < n``, ``n > var``, ``var >= n``, ``n <= var``,
    and the inclusive ``var <= n``, ``n >= var``, ``var > n``, ``n < var`` (elements up to ``n``
    run: the bound is ``n + 1``, as ``if (idx > m * n) return;`` in FasterTransformer's
    ``slice_copy`` says)."""
    if node.type != "binary_expression":
        return None
    op = node.child_by_field_name("operator")
    left = node.child_by_field_name("left")
    right = node.child_by_field_name("right")
    if op is None or left is None or right is None:
        return None
    left, right = _unparen(left), _unparen(right)
    is_var = [n.type == "identifier" and _text(module, n) == var for n in (left, right)]
    # the comparison as `var OP bound`
    mirror = {"<": ">", ">": "<", "<=": ">=", ">=": "<="}
    if is_var[0] and op.type in mirror:
        rel, bound = op.type, right
    elif is_var[1] and op.type in mirror:
        rel, bound = mirror[op.type], left
    else:
        return None
    less, inclusive = rel in ("<", "<="), rel in ("<=", ">")
    return None if mentions(module, bound, {var}) else (less, bound, inclusive)


def element_body(module: Module, fn: Function) -> ElementBody | str | None:
    """The kernel's one-element-per-thread body, why it cannot be regrouped, or None (not this idiom)."""
    fn_body = module.node(fn.body)
    stmts = _code(fn_body.named_children)
    for k, stmt in enumerate(stmts):
        found = _index_decl(module, fn, stmt)
        if found is None:
            continue
        var, var_type, value, axis = found
        early = runs_before(module, fn_body, stmt)
        if early is not None:
            return (
                f"`{_first_line(module, early)}` (line {_line(early)}) runs before the index `{var}`: "
                "a smaller grid would run it fewer times"
            )
        rest = stmts[k + 1 :]
        between: list[ts.Node] = []
        while rest and rest[0].type == "declaration":
            if mentions(module, rest[0], {var}):
                return (
                    f"`{_first_line(module, rest[0])}` (line {_line(rest[0])}) derives a value from "
                    f"{var} before its bound check"
                )
            between.append(rest[0])
            rest = rest[1:]
        if not rest:
            return f"no bound check `if ({var} < n)` after the index `{var}` (line {_line(stmt)})"
        guard = _guard(module, rest[0], var)
        if guard is None:
            what = "is not" if rest[0].type == "if_statement" else "comes before"
            return (
                f"`{_first_line(module, rest[0])}` (line {_line(rest[0])}) {what} a bound check "
                f"`if ({var} < n) {{...}}` or `if ({var} >= n) return;`: packs need the bound"
            )
        form, bound, others, inclusive = guard
        if form == "block":
            if len(rest) > 1:
                return f"code after the guarded body (line {_line(rest[1])}) runs once per thread"
            then = rest[0].child_by_field_name("consequence")
            assert then is not None
            body = tuple(_code(then.named_children)) if then.type == "compound_statement" else (then,)
            end = rest[0].end_byte
        else:
            body = tuple(rest[1:])
            end = rest[-1].end_byte
        if not body:
            return f"the guarded body of {var} is empty"
        for name in sorted(syntax.names_in(module, bound)):
            for s in body:
                if name in assign.assigned(module, s):
                    return f"the body changes {name}, which the bound `{_text(module, bound)}` reads"
        return ElementBody(
            stmt,
            var,
            var_type,
            value,
            bound,
            rest[0],
            form,
            body,
            tuple(between),
            end,
            others,
            inclusive,
            axis,
        )
    return None


def _outer_loop(node: ts.Node, stmt: ts.Node) -> ts.Node | None:
    """The outermost loop between ``node`` and ``stmt`` (``stmt`` included), if any."""
    loop = None
    p: ts.Node | None = node
    while p is not None:
        if p.type in _LOOPS:
            loop = p
        if p.id == stmt.id:
            break
        p = p.parent
    return loop


def _first_line(module: Module, node: ts.Node) -> str:
    return _text(module, node).split("\n")[0].strip()


# -- the body ------------------------------------------------------------------------------------


def body_refusal(module: Module, eb: ElementBody) -> str | None:
    """Why the statements of element ``var`` cannot run ``VEC`` times in one thread, or None."""
    var = eb.var
    moved = _moved_locals(module, eb)
    for cond in (*eb.conditions, _text(module, eb.bound)):
        flat = "".join(cond.split())
        names = [b for b in sorted(moved_builtins(eb.axis)) if b in flat]
        names += [n for n in moved if re.search(rf"\b{re.escape(n)}\b", cond)]
        if names:
            return (
                f"the guard's condition `{cond}` (line {_line(eb.guard)}) reads {names[0]}: it would "
                f"be tested once for all the elements of a thread"
            )
    for stmt in eb.stmts:
        for n in syntax.walk(stmt):
            if n.type in _PREPROC:
                return f"the body has preprocessor conditionals (line {_line(n)})"
            if n.type in _EXITS:
                word = _text(module, n).split()[0].rstrip(";")
                if n.type == "return_statement" or not syntax.in_loop_or_switch(n, stmt.parent or stmt):
                    return f"the body has a `{word}` (line {_line(n)}): packs cannot stop mid-way"
            if n.type == "field_expression" and "".join(_text(module, n).split()) in moved_builtins(eb.axis):
                return (
                    f"the body reads {_text(module, n).replace(' ', '')} (line {_line(n)}); "
                    f"with several elements per thread it no longer belongs to element {var}"
                )
            if n.type == "identifier" and _text(module, n) in moved:
                name = _text(module, n)
                return (
                    f"the body reads {name} (line {_line(n)}), computed from {moved[name]}; with several "
                    f"elements per thread it no longer belongs to element {var}"
                )
            if n.type == "storage_class_specifier" and "__shared__" in _text(module, n):
                return f"the body declares shared memory (line {_line(n)})"
        call = next(syntax.calls(module, stmt, syntax.BARRIERS | syntax.SHUFFLES), None)
        if call is not None:
            callee = call.child_by_field_name("function")
            name = _text(module, callee) if callee is not None else "a barrier"
            return (
                f"the body calls {name} (line {_line(call)}): threads would reach it a different "
                "number of times"
            )
        writes = assign.assigned(module, stmt).get(var)
        if writes:
            return f"the body changes the index {var} (line {_line(writes[0])})"
    for stmt in eb.stmts:
        for w in syntax.memory_writes(module, stmt):
            target = w.child_by_field_name("left" if w.type == "assignment_expression" else "argument")
            if target is not None and target.type != "subscript_expression":
                split = _decomposition(module, eb)
                why = f"; element {var} is split as {split}" if split else ""
                return (
                    f"the body stores through `{_text(module, target)}` (line {_line(w)}), not "
                    f"p[{var} + offset]{why}"
                )
    return None


def _moved_locals(module: Module, eb: ElementBody) -> dict[str, str]:
    """Locals declared before the body (other than the index) computed from a moved builtin."""
    fn_body = eb.decl.parent
    if fn_body is None:
        return {}
    return derived_locals(module, fn_body, eb.guard.start_byte, moved_builtins(eb.axis), skip=eb.decl)


def derived_locals(
    module: Module, fn_body: ts.Node, before: int, builtins: frozenset[str], skip: ts.Node | None = None
) -> dict[str, str]:
    """Top-level locals declared before ``before`` whose value depends on one of ``builtins``.

    Maps each name to the builtin it comes from (``lane`` -> ``threadIdx.x``), through other
    such locals. A pass that changes which thread or block handles an element refuses bodies
    that read them.
    """
    found: dict[str, str] = {}
    for stmt in fn_body.named_children:
        if stmt.start_byte >= before:
            break
        if stmt.type != "declaration" or (skip is not None and stmt.id == skip.id):
            continue
        for decl in stmt.children_by_field_name("declarator"):
            ident = syntax.declarator_identifier(decl)
            value = decl.child_by_field_name("value") if decl.type == "init_declarator" else None
            if ident is None or value is None:
                continue
            text = "".join(expand(module, fn_body, value, stmt.start_byte).split())
            hit = sorted(b for b in builtins if b in text) + sorted(
                found[n] for n in found if re.search(rf"\b{re.escape(n)}\b", text)
            )
            if hit:
                found[_text(module, ident)] = hit[0]
    return found


def runs_before(module: Module, fn_body: ts.Node, index: ts.Node) -> ts.Node | None:
    """The first statement before the index that does more than declare locals, if any.

    Such a statement runs once per thread; with fewer threads it would run fewer times.
    """
    for stmt in fn_body.named_children:
        if stmt.start_byte >= index.start_byte:
            return None
        if stmt.type in _QUIET:
            continue
        if stmt.type != "declaration" or syntax.memory_writes(module, stmt):
            return stmt
    return None


#: Statements that declare names and do nothing at run time.
_QUIET = frozenset(
    {
        "comment",
        "using_declaration",
        "alias_declaration",
        "type_definition",
        "static_assert_declaration",
        "namespace_alias_definition",
    }
)


def _decomposition(module: Module, eb: ElementBody) -> str:
    """``idx / C, idx % C (line 76)`` when the body splits the index into coordinates, else ''."""
    found: list[str] = []
    line = 0
    for stmt in eb.stmts:
        for n in syntax.walk(stmt):
            if n.type != "binary_expression":
                continue
            op = n.child_by_field_name("operator")
            left = n.child_by_field_name("left")
            if op is None or left is None or op.type not in ("/", "%"):
                continue
            if left.type == "identifier" and _text(module, left) == eb.var:
                found.append(" ".join(_text(module, n).split()))
                line = line or _line(n)
    return f"{', '.join(found)} (line {line})" if found else ""


def when(ref: MemRef) -> int:
    """The byte position at which an access of the body happens (program order): a load where
    it is written, a store when its assignment completes."""
    if not ref.writes:
        return ref.node.start_byte
    p = ref.node.parent
    while p is not None and p.type == "parenthesized_expression":
        p = p.parent
    return p.end_byte if p is not None else ref.node.end_byte


def earliest(ref: MemRef) -> int:
    """The earliest position at which it may happen: in a loop of the body, the loop's start."""
    return ref.loops[0].start_byte if ref.loops else when(ref)


def latest(ref: MemRef) -> int:
    return ref.loops[0].end_byte if ref.loops else when(ref)


def _conditional(sub: ts.Node, stop: ts.Node) -> bool:
    node, child = sub.parent, sub
    while node is not None and node.id != stop.id:
        if node.type in ("conditional_expression", "if_statement"):
            cond = node.child_by_field_name("condition")
            if cond is None or cond.id != child.id:
                return True
        elif node.type in ("switch_statement", "case_statement", "lambda_expression"):
            return True
        elif node.type == "binary_expression":
            op = node.child_by_field_name("operator")
            right = node.child_by_field_name("right")
            if op is not None and op.type in ("&&", "||") and right is not None and right.id == child.id:
                return True
        child, node = node, node.parent
    return False


def element_accesses(module: Module, fn: Function, eb: ElementBody) -> list[MemRef] | str:
    """The subscripts of the body (``loops``: the outermost loop of the body around one), or why
    one of them cannot be regrouped; ``packable`` says which ``vectorize`` may pack."""
    known: dict[str, Root] = roots(module, fn)
    declared: set[str] = set()
    assigned: set[str] = set()
    for stmt in eb.stmts:
        declared |= syntax.declared_names(module, stmt)
        assigned |= set(assign.assigned(module, stmt))
    found: list[MemRef] = []
    maybe: set[int] = set()
    for stmt in eb.stmts:
        for n in syntax.walk(stmt):
            if n.type != "subscript_expression":
                continue
            base = n.child_by_field_name("argument")
            index = _index_node(n)
            if base is None or index is None:
                continue
            name = _text(module, base) if base.type == "identifier" else ""
            root = known.get(name, Root(name, "local", True, False, "")) if name else UNKNOWN
            kind = access_kind(n)
            pinned = kind == "address" or intrinsic_of(n) in STORE_INTRINSICS
            if pinned and mentions(module, index, {eb.var}):
                via = intrinsic_of(n)
                if via:
                    return (
                        f"the body stores {_text(module, n)} through {via} (line {_line(n)}): packs would "
                        f"drop the {via} hint (run cache-hints after vectorize instead)"
                    )
                return (
                    f"the body takes the address of {_text(module, n)} (line {_line(n)}), which may "
                    "be used in any order"
                )
            offset: str | None = None
            stride, rest = relative_terms(module, index, eb.var)
            if rest is not None:
                offset = _join(module, rest)
            loop = _outer_loop(n, stmt)
            at = (intrinsic_call(n) if kind == "load" else None) or n
            pointer = name or _text(module, base)
            offset_terms = rest or []
            conditional = _conditional(n, stmt.parent or stmt) or loop is not None
            invariant = not any(syntax.names_in(module, t.node) & (declared | assigned) for t in offset_terms)
            legal = (
                offset is not None
                and invariant
                and loop is None
                and root.space in ("global", "shared")
                and bool(root.name)
                and pointer not in declared
                and pointer not in assigned
                and not pinned
            )
            loops = (loop,) if loop is not None else ()
            found.append(
                subscript_ref(
                    module,
                    fn,
                    n,
                    at,
                    index,
                    pointer,
                    root,
                    stride,
                    offset,
                    offset_terms,
                    conditional,
                    loops,
                    legal and not conditional,
                )
            )
            if legal and conditional and kind == "load":
                maybe.add(len(found) - 1)
    # A load under a condition reads the pack when the body loads the same element anyway
    # (`in[i] > 0.f ? in[i] : 0.f`); another element stays scalar (it may be out of bounds).
    loaded = {_key(e) for e in found if e.packable and e.kind == "load"}
    found = [
        replace(e, packable=True) if k in maybe and _key(e) in loaded else e for k, e in enumerate(found)
    ]
    # A pointer is packed only if each of its accesses can be: a scalar access beside a pack of
    # the same memory would read or write around the pack.
    scalar = {e.pointer for e in found if not e.packable}
    result = [replace(e, packable=e.packable and e.pointer not in scalar) for e in found]
    escaped = _escapes(module, eb, known, [e for e in result if e.packable])
    return escaped if escaped is not None else result


def _join(module: Module, rest: list[Term]) -> str:
    """The offset's text as the element path spells it (``a + b - c``; vectorize emits it)."""
    return " ".join(
        (("+ " if i else "") if t.sign > 0 else "- ") + _text(module, t.node) for i, t in enumerate(rest)
    )


def _escapes(module: Module, eb: ElementBody, known: dict[str, Root], packed: list[MemRef]) -> str | None:
    """Why a call in the body may touch memory a pack holds, or None.

    ``foo(out, i)`` may write ``out[i]`` where no subscript shows it; a pack of memory that may
    alias ``out`` would then be read before, or written after, that write. Load intrinsics
    (``__ldg(&p[i])``) are loads the analysis already sees.
    """
    for stmt in eb.stmts:
        for call in syntax.calls(module, stmt):
            args = call.child_by_field_name("arguments")
            if args is None or any(intrinsic_kind(a) == "load" for a in args.named_children):
                continue
            for ident in syntax.identifiers(args):
                parent = ident.parent
                if parent is not None and parent.type == "subscript_expression":
                    arg = parent.child_by_field_name("argument")
                    if arg is not None and arg.id == ident.id:
                        continue  # p[i] passes a value
                root = known.get(_text(module, ident))
                if root is None or root.space not in ("global", "shared", "unknown"):
                    continue
                hit = next((a for a in packed if a.memory.may_alias(root)), None)
                if hit is not None:
                    callee = call.child_by_field_name("function")
                    name = _text(module, callee) if callee is not None else "a function"
                    return (
                        f"the body passes {_text(module, ident)} to {name} (line {_line(call)}), which may "
                        f"touch {hit.pointer}[{_text_of(hit)}] around its pack"
                    )
    return None


def _key(a: MemRef) -> tuple[str, str]:
    return a.pointer, " ".join((a.offset or "").split())


def _same_element(a: MemRef, b: MemRef) -> bool:
    return a.pointer == b.pointer and " ".join((a.offset or "").split()) == " ".join((b.offset or "").split())


def reorder_conflict(
    accesses: list[MemRef], var: str, apart: list[tuple[MemRef, MemRef]] | None = None
) -> str | None:
    """Why loading packs before the body and storing them after it may change a result, or None.

    Within one element, a packed load moves above every statement of the body and a packed store
    below; across the ``VEC`` elements of a thread, the original had different threads with no
    order between them, so only the order inside one element counts. A packed load must not
    follow a write that may touch the same memory, a packed store must not precede an access to
    memory it may touch (accesses of one pack excepted). Reads at another offset than a write
    to memory that may alias (``out[i] = in[i + 1]`` without ``__restrict__``) are a dependence
    between elements: refused too, unless ``apart`` is given: then such a pair of different
    pointers goes into it instead (their packs are taken only where a run-time check finds a
    thread's elements of one disjoint from those of the other: then no access of one pack
    touches the other's memory, and no order between them matters).
    """
    for a in accesses:
        for b in accesses:
            if a is b or not (a.writes or b.writes):
                continue
            x, y = a, b
            if not x.memory.may_alias(y.memory) or _same_element(x, y):
                continue
            if x.offset is not None and y.offset is not None and x.writes and x.offset != y.offset:
                if apart is not None and x.pointer != y.pointer and not (x.pinned or y.pinned):
                    if (y, x) not in apart and (x, y) not in apart:
                        apart.append((x, y))
                    continue
                where = (
                    "the same memory" if x.pointer == y.pointer else "memory that may alias (no __restrict__)"
                )
                return (
                    f"cross-element dependence: {y.pointer}[{_text_of(y)}] (line {y.line}) and "
                    f"{x.pointer}[{_text_of(x)}] (line {x.line}) reach {where} at different "
                    f"offsets from {var}"
                )
            if a.packable and not x.writes and y.writes and earliest(b) < when(a):
                return (
                    f"{x.pointer}[{_text_of(x)}] (line {x.line}) is read after "
                    f"{y.pointer}[{_text_of(y)}] (line {y.line}) is written, and they "
                    "may alias: a packed load would read first"
                )
            if a.packable and x.writes and latest(b) > when(a):
                return (
                    f"{y.pointer}[{_text_of(y)}] (line {y.line}) is accessed after "
                    f"{x.pointer}[{_text_of(x)}] (line {x.line}) is written, and they "
                    "may alias: a packed store would write last"
                )
    return None


def _text_of(a: MemRef) -> str:
    return " ".join(index_source(a).decode("utf-8", "replace").split())


# -- why a kernel has nothing to pack ----------------------------------------------------------

_THREAD_BUILTINS = ("threadIdx", "blockIdx")


def nothing_to_pack(module: Module, fn: Function) -> tuple[str, ts.Node]:
    """Why a kernel with no loop of its own and no one-element-per-thread body gives vectorize no
    site, naming the construct and its line (the node to point the remark at).

    Without it such a kernel printed no remark at all, and a reader could not tell a kernel
    ktx never looked at from one it looked at and passed over. In order: the loops are in a
    ``__device__`` helper the kernel calls (vectorize rewrites the kernel's own body); a thread
    index that is not ``blockIdx.x * blockDim.x + threadIdx.x`` (scaled: each thread already
    takes several elements; another axis; an offset); no thread index at all.

    >>> from ktx.ir import parse
    >>> m = parse('''__global__ void k(float4* y, const float4* x) {
    ...   int i = (blockIdx.x * blockDim.x + threadIdx.x) * 4;
    ...   y[i] = x[i]; }''')
    >>> why, node = nothing_to_pack(m, m.kernel())
    >>> why.split(": ")[-1], node.start_point[0] + 1
    ('it scales the thread index by 4, so each thread already takes several elements', 2)
    """
    body = module.node(fn.body)
    helpers = {f.name: f for f in module.functions if not f.is_kernel and f.name != fn.name}
    for call in syntax.calls(module, body):
        callee = call.child_by_field_name("function")
        name = _text(module, callee).rsplit("::", 1)[-1].split("<", 1)[0] if callee is not None else ""
        helper = helpers.get(name)
        if helper is None:
            continue
        inner = [n for n in syntax.walk(module.node(helper.body)) if n.type in _LOOPS]
        if inner:
            return (
                f"no loop in the kernel: its loops are in the __device__ function {name} (line "
                f"{helper.span.line}, loop at line {_line(inner[0])}), called at line {_line(call)}; "
                "vectorize packs the kernel's own loops (inline the helper, or vectorize it as a kernel)",
                call,
            )
    decls = [s for s in _code(body.named_children) if s.type == "declaration"]
    reads = [
        s
        for b in _THREAD_BUILTINS  # a declaration that reads threadIdx first, else blockIdx
        for s in decls
        if any(syntax.uses_builtin(module, s, f"{b}.{a}") for a in "xyz")
    ]
    for stmt in reads[:1]:
        decls = stmt.children_by_field_name("declarator")
        init = decls[0] if decls and decls[0].type == "init_declarator" else None
        value = init.child_by_field_name("value") if init is not None else None
        why = _index_shape(module, fn, value)
        return (
            f"`{_first_line(module, stmt)}` (line {_line(stmt)}) is not one element per thread "
            f"(i = blockIdx.x * blockDim.x + threadIdx.x){why}",
            stmt,
        )
    return (
        f"no loop in {fn.name} and no thread index declared at the top of its body (line "
        f"{_line(body)}): there is no range of elements for packs to take",
        body,
    )


def _index_shape(module: Module, fn: Function, value: ts.Node | None) -> str:
    """What keeps the index ``value`` from being one element per thread, as a clause ('' if unknown)."""
    form = kernel_index(module, fn).affine(value) if value is not None else None
    if form is None:
        return ""
    tx = form.coeff("threadIdx.x")
    if tx is None or not tx.is_const:
        return ""
    if tx.const == 0:
        other = next((f"threadIdx.{a}" for a in "yz" if form.depends_on([f"threadIdx.{a}"])), None)
        return f": it follows {other}, not threadIdx.x" if other else ": it does not follow threadIdx.x"
    if abs(tx.const) > 1:
        return f": it scales the thread index by {tx.const}, so each thread already takes several elements"
    block = form.coeff("blockIdx.x")
    if block is None or not block.equals(Affine.sym("blockDim.x")):
        return ": it leaves out blockIdx.x * blockDim.x, so it numbers a block's threads, not the grid's"
    rest = form.without("threadIdx.x", "blockIdx.x")
    if not rest.is_const or rest.const != 0:
        return f": it adds {rest} to the thread's position (an offset the guard would have to carry)"
    return ""
