"""``fast-math``: the kernel's precision becomes one knob, ``FAST_MATH``, off by default.

Serving kernels spend much of their arithmetic in a few single-precision functions, and the
fast hardware versions of those are a precision choice, not a free win. The pass makes that
choice explicit and tunable, per kernel, and never on by default:

* ``FAST_MATH = 0``: the original math (the default);
* ``1``: the SFU intrinsics for transcendentals (``expf`` -> ``__expf``, ``logf`` -> ``__logf``,
  ``sinf``/``cosf``/``tanf``/``powf``/``log2f``/``log10f``/``exp10f`` likewise) and
  ``1.0f / sqrtf(x)`` -> ``rsqrtf(x)``;
* ``2``: level 1 plus ``a / b`` -> ``__fdividef(a, b)`` for float division;
* ``3``: level 1 plus reciprocal-multiply, ``a / b`` -> ``a * __frcp_rn(b)`` (one correctly
  rounded reciprocal, then a multiply).

Every statement that changes is written once per distinct variant under
``#if KTX_FAST_MATH == 0`` ... ``#endif``, so the template compiles as is and an instantiated
config reads as plain code. The rewrite reaches the kernel and every device function it calls
in the file (``silu`` in ``silu_and_mul``). Division is rewritten only when both operands are
known to be ``float`` (declared types, ``f`` literals, float-returning calls): a ``double`` or
an integer division is never touched.

The error is bounded where results are judged, by the spec's tolerance (the error budget)
against the reference in use: by default (``[reference] use = "original"``) that is the original
kernel, so the budget bounds the difference from the original math, not from the exact result;
with ``use = "python"`` it is the spec's float64 Python reference. ``Harness(precision_python=True)``
checks configs with ``FAST_MATH > 0`` against the Python reference when the spec has one,
whatever ``use`` says. A config with ``FAST_MATH > 0`` carries the knob in its name, so a
report never shows fast math without saying so. Note that a spec compiled with
``-use_fast_math`` already gets most of level 1 from the compiler.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass

import tree_sitter as ts
from ktx.ir import Function, Module, syntax
from ktx.ir.facts.rounding import feeds_rounding, float_division, is_int_type, rounded_divisions
from ktx.passes._common import KernelSite

from ktx.passbase import KnobSpec, Option, Pass, Phase, Refuse, Rewriter, Skip, Target

#: Single-precision functions and their SFU intrinsics (level 1 and up).
INTRINSICS = {
    "expf": "__expf",
    "logf": "__logf",
    "log2f": "__log2f",
    "log10f": "__log10f",
    "exp10f": "__exp10f",
    "sinf": "__sinf",
    "cosf": "__cosf",
    "tanf": "__tanf",
    "powf": "__powf",
}
#: Calls known to return float (for deciding that a division is a float division).
FLOAT_CALLS = frozenset(
    {
        *INTRINSICS,
        *INTRINSICS.values(),
        "sqrtf",
        "rsqrtf",
        "fmaxf",
        "fminf",
        "fabsf",
        "tanhf",
        "erff",
        "exp2f",
        "__fdividef",
        "__frcp_rn",
        "__fsqrt_rn",
        "__half2float",
        "__bfloat162float",
        "__int_as_float",
        "__uint_as_float",
        "fmaf",
        "__fmaf_rn",
        "floorf",
        "ceilf",
        "roundf",
    }
)
LEVELS = {
    0: "original",
    1: "__expf & co., rsqrtf",
    2: "1 + __fdividef",
    3: "1 + reciprocal-multiply",
}
_LEAVES = ("expression_statement", "declaration", "return_statement")
_INT_TYPES = frozenset(
    {
        "int",
        "unsigned",
        "unsigned int",
        "long",
        "long long",
        "size_t",
        "int64_t",
        "uint32_t",
        "int32_t",
        "short",
    }
)


class FastMath(Pass[KernelSite]):
    name = "fast-math"
    phase = Phase.HINTS
    summary = "a precision knob per kernel: __expf and friends, __fdividef or reciprocal-multiply, rsqrtf"
    description = __doc__ or ""
    knobs = (
        KnobSpec(
            "FAST_MATH",
            "0, 1, 2, 3",
            "0 (the original math)",
            "0 original; 1 intrinsics and rsqrtf; 2 and __fdividef; 3 and reciprocal-multiply; "
            "the error is bounded by the spec's tolerance against the reference in use",
        ),
    )
    options = (
        Option(
            "levels", "ints", (1, 2, 3), "levels offered besides 0 (1 intrinsics, 2 __fdividef, 3 reciprocal)"
        ),
    )
    after = (
        "expose",
        "block-size",
        "unroll",
        "coarsen",
        "split",
        "tile",
        "hoist",
        "vectorize",
        "warp-reduce",
        "rows-per-block",
        "cache-hints",
    )

    def sites(self, target: Target) -> Iterator[KernelSite | Skip]:
        functions = reachable(target.module, target.kernel)
        found = [s for fn in functions for s in _statements(target.module, fn)]
        if not found:
            rounded = _rounded_lines(target.module, functions)
            yield Skip(
                "no expf/logf/sinf/..., 1/sqrtf or float division in the kernel or the device "
                "functions it calls"
                + (
                    f" (the float division(s) at line(s) {rounded} are rounded to an integer, where a "
                    "fast division's ulp becomes a whole step: left exact)"
                    if rounded
                    else ""
                ),
                target.kernel.name,
                target.kernel.span,
            )
            return
        yield KernelSite(target.kernel.name, target.kernel.span)

    def rewrite(self, site: KernelSite, rw: Rewriter) -> None:
        module = rw.target.module
        offered = self.values["levels"]
        assert isinstance(offered, tuple)
        levels = sorted({int(v) for v in offered if 1 <= int(v) <= 3})
        if not levels:
            raise Refuse("option levels offers no level between 1 and 3")
        macro = rw.knob(
            "FAST_MATH",
            [0, *levels],
            0,
            "precision: "
            + ", ".join(f"{v} {LEVELS[v]}" for v in [0, *levels])
            + " (error within the spec's tolerance of the reference in use)",
        )
        todo: list[tuple[ts.Node, str, dict[int, str]]] = []
        where: list[str] = []
        for fn in reachable(module, rw.target.kernel):
            for stmt in _statements(module, fn):
                variants = {lv: _render(module, fn, stmt, lv) for lv in levels}
                original = syntax.text(module, stmt)
                if all(v == original for v in variants.values()):
                    continue
                todo.append((stmt, original, variants))
                if fn.name not in where:
                    where.append(fn.name)
        starts = {stmt.start_byte for stmt, _, _ in todo}
        for stmt, original, variants in todo:
            _replace(rw, module, stmt, macro, original, variants, starts)
        changed = len(todo)
        if not changed:
            raise Refuse("nothing the levels offered would change")
        rw.note(f"{changed} statement(s) in {', '.join(where)}; verified against the float64 reference")
        rounded = _rounded_lines(module, reachable(module, rw.target.kernel))
        if rounded and any(lv >= 2 for lv in levels):
            rw.note(
                f"division(s) at line(s) {rounded} left exact at every level: their quotient is rounded "
                "to an integer, where a fast division's ulp becomes a whole step"
            )


# -- what changes ------------------------------------------------------------------------------


def _rounded_lines(module: Module, functions: list[Function]) -> str:
    lines = sorted({n.start_point[0] + 1 for fn in functions for n in rounded_divisions(module, fn, kind)})
    return ", ".join(str(line) for line in lines)


def reachable(module: Module, kernel: Function) -> list[Function]:
    """The kernel and the device functions of the file it calls, directly or not."""
    by_name: dict[str, list[Function]] = {}
    for fn in module.functions:
        if fn.is_device or fn.is_kernel:
            by_name.setdefault(fn.name, []).append(fn)
    seen: list[Function] = [kernel]
    todo = [kernel]
    while todo:
        fn = todo.pop()
        for call in syntax.calls(module, module.node(fn.body)):
            callee = call.child_by_field_name("function")
            if callee is None:
                continue
            name = _callee_name(module, callee)
            for other in by_name.get(name, []):
                if other not in seen:
                    seen.append(other)
                    todo.append(other)
    return seen


def _callee_name(module: Module, callee: ts.Node) -> str:
    if callee.type == "template_function":
        name = callee.child_by_field_name("name")
        callee = name if name is not None else callee
    if callee.type == "field_expression":
        field = callee.child_by_field_name("field")
        return syntax.text(module, field) if field is not None else ""
    return syntax.text(module, callee).split("::")[-1].strip()


def _statements(module: Module, fn: Function) -> list[ts.Node]:
    """Leaf statements of ``fn`` (directly in a block) holding something a level rewrites."""
    body = module.node(fn.body)
    out: list[ts.Node] = []
    for n in syntax.walk(body):
        if n.type not in _LEAVES or n.parent is None or n.parent.type != "compound_statement":
            continue
        if any(
            _rule(module, fn, c, 3) is not None or _rule(module, fn, c, 2) is not None for c in syntax.walk(n)
        ):
            out.append(n)
    return out


def _render(module: Module, fn: Function, node: ts.Node, level: int) -> str:
    """``node``'s text at ``level``: matching subexpressions replaced, innermost included."""
    rule = _rule(module, fn, node, level)
    if rule is not None:
        return rule
    pieces: list[str] = []
    pos = node.start_byte
    for child in node.children:
        text = _render(module, fn, child, level)
        if text != syntax.text(module, child):
            pieces.append(module.source[pos : child.start_byte].decode("utf-8", "replace"))
            pieces.append(text)
            pos = child.end_byte
    pieces.append(module.source[pos : node.end_byte].decode("utf-8", "replace"))
    return "".join(pieces)


def _args(node: ts.Node) -> list[ts.Node]:
    args = node.child_by_field_name("arguments")
    return [a for a in args.named_children if a.type != "comment"] if args is not None else []


def _unparen(node: ts.Node) -> ts.Node:
    while node.type == "parenthesized_expression" and node.named_child_count == 1:
        node = node.named_children[0]
    return node


def _rule(module: Module, fn: Function, node: ts.Node, level: int) -> str | None:
    if level < 1:
        return None
    if node.type == "call_expression":
        callee = node.child_by_field_name("function")
        name = syntax.text(module, callee).strip() if callee is not None else ""
        if name in INTRINSICS:
            args = ", ".join(_render(module, fn, a, level) for a in _args(node))
            return f"{INTRINSICS[name]}({args})"
        return None
    if node.type != "binary_expression":
        return None
    op = node.child_by_field_name("operator")
    left = node.child_by_field_name("left")
    right = node.child_by_field_name("right")
    if op is None or left is None or right is None or op.type != "/":
        return None
    r = _unparen(right)
    if _is_one(module, left) and r.type == "call_expression":
        callee = r.child_by_field_name("function")
        operands = _args(r)
        if callee is not None and syntax.text(module, callee).strip() == "sqrtf" and len(operands) == 1:
            return f"rsqrtf({_render(module, fn, operands[0], level)})"
    if level < 2:
        return None
    if not float_division(module, fn, node, kind) or feeds_rounding(module, fn, node, kind) is not None:
        return None
    a = _render(module, fn, _unparen(left), level)
    b = _render(module, fn, r, level)
    if level == 2:
        return f"__fdividef({a}, {b})"
    if _is_one(module, left):
        return f"__frcp_rn({b})"
    return f"{_render(module, fn, left, level)} * __frcp_rn({b})"


def _is_one(module: Module, node: ts.Node) -> bool:
    n = _unparen(node)
    return (
        n.type == "number_literal" and re.fullmatch(r"1(\.0*)?[fF]|1\.0*", syntax.text(module, n)) is not None
    )


def kind(module: Module, fn: Function, node: ts.Node) -> str | None:
    """``float``, ``double``, ``int`` or None (unknown) for an expression, from declarations.

    Enough to tell a float division from any other; anything uncertain is None.
    """
    n = _unparen(node)
    t = n.type
    if t == "number_literal":
        text = syntax.text(module, n).lower()
        if text.startswith("0x"):
            return "int"
        if text.endswith("f"):
            return "float"
        return "double" if ("." in text or "e" in text) else "int"
    if t == "identifier":
        return _declared(module, fn, syntax.text(module, n), n.start_byte)
    if t == "subscript_expression":
        base = n.child_by_field_name("argument")
        if base is not None and base.type == "identifier":
            return _declared(module, fn, syntax.text(module, base), n.start_byte, element=True)
        if base is not None and base.type == "field_expression":
            return _pack_element(module, fn, base, n.start_byte)
        return None
    if t == "call_expression":
        callee = n.child_by_field_name("function")
        if callee is None:
            return None
        if callee.type == "template_function":
            name_node = callee.child_by_field_name("name")
            targs = callee.child_by_field_name("arguments")
            if (
                name_node is not None
                and syntax.text(module, name_node) == "static_cast"
                and targs is not None
            ):
                return _type_kind(syntax.text(module, targs).strip("<> "))
        if syntax.text(module, callee).startswith("ktx::ld<"):
            args = _args(n)
            inner = _unparen(args[0]) if len(args) == 1 else None
            if inner is not None and inner.type == "pointer_expression":
                target = inner.child_by_field_name("argument")
                return kind(module, fn, target) if target is not None else None
            return None
        name = syntax.text(module, callee).split("::")[-1].strip()
        if name in FLOAT_CALLS:
            return "float"
        returns = {f.return_type.strip() for f in module.functions if f.name == name}
        if returns and all(_type_kind(r) == "float" for r in returns):
            return "float"
        return None
    if t == "cast_expression":
        type_node = n.child_by_field_name("type")
        return _type_kind(syntax.text(module, type_node)) if type_node is not None else None
    if t == "unary_expression":
        arg = n.child_by_field_name("argument")
        op = n.child_by_field_name("operator")
        if op is not None and op.type in ("-", "+") and arg is not None:
            return kind(module, fn, arg)
        return None
    if t == "binary_expression":
        op = n.child_by_field_name("operator")
        left = n.child_by_field_name("left")
        right = n.child_by_field_name("right")
        if op is None or left is None or right is None or op.type not in ("+", "-", "*", "/"):
            return None
        kinds = {kind(module, fn, left), kind(module, fn, right)}
        if None in kinds:
            return None
        for k in ("double", "float", "int"):
            if k in kinds:
                return k
    if t == "conditional_expression":
        a = n.child_by_field_name("consequence")
        b = n.child_by_field_name("alternative")
        if a is not None and b is not None:
            ka, kb = kind(module, fn, a), kind(module, fn, b)
            return ka if ka == kb else None
    return None


def _pack_element(module: Module, fn: Function, field: ts.Node, at: int) -> str | None:
    """The element kind of ``p.v`` for a ``ktx::pack`` local ``p`` that vectorize declared."""
    obj = field.child_by_field_name("argument")
    name_node = field.child_by_field_name("field")
    if obj is None or name_node is None or syntax.text(module, name_node) != "v" or obj.type != "identifier":
        return None
    name = syntax.text(module, obj)
    for n in syntax.walk(module.node(fn.body)):
        if n.type != "declaration" or n.start_byte >= at:
            continue
        type_node = n.child_by_field_name("type")
        type_text = syntax.text(module, type_node) if type_node is not None else ""
        for decl in n.children_by_field_name("declarator"):
            target = decl.child_by_field_name("declarator") if decl.type == "init_declarator" else decl
            if target is None or syntax.text(module, target) != name:
                continue
            m = re.match(r"ktx::pack<\s*([^,>]+)", type_text)
            if m:
                return _type_kind(m.group(1))
            value = decl.child_by_field_name("value") if decl.type == "init_declarator" else None
            if value is not None and syntax.text(module, value).startswith("ktx::load<"):
                args = _args(value)
                pointers = [i for i in syntax.identifiers(args[0])] if args else []
                for ident in pointers:
                    found = _declared(module, fn, syntax.text(module, ident), at, element=True)
                    if found is not None:
                        return found
    return None


def _type_kind(type_text: str) -> str | None:
    words = [
        w for w in type_text.replace("*", " * ").split() if w not in ("const", "volatile", "__restrict__")
    ]
    if "*" in words:
        return None
    base = " ".join(words)
    if base == "float":
        return "float"
    if base == "double":
        return "double"
    if base in _INT_TYPES or base.startswith("unsigned") or is_int_type(base):
        return "int"
    return None


def _declared(module: Module, fn: Function, name: str, at: int, element: bool = False) -> str | None:
    """The kind of ``name``'s declaration in ``fn`` before ``at`` (a parameter or a local)."""
    for p in fn.params:
        if p.name == name:
            if element:
                return _type_kind(p.base_type) if p.pointer_depth == 1 else None
            return _type_kind(p.type) if p.pointer_depth == 0 else None
    found: str | None = None
    for local in _locals(module, fn, at):
        if local.name == name:
            found = local.kind_element if element else local.kind
    if found is None and element:
        for arr in module.shared_arrays:
            if arr.name == name and arr.function in (fn.name, None):
                return _type_kind(arr.type)
    return found


@dataclass(frozen=True)
class _Local:
    name: str
    kind: str | None
    kind_element: str | None


def _locals(module: Module, fn: Function, before: int) -> list[_Local]:
    out: list[_Local] = []
    for n in syntax.walk(module.node(fn.body)):
        if n.type != "declaration" or n.start_byte >= before:
            continue
        type_node = n.child_by_field_name("type")
        base = syntax.text(module, type_node) if type_node is not None else ""
        for decl in n.children_by_field_name("declarator"):
            target = decl.child_by_field_name("declarator") if decl.type == "init_declarator" else decl
            if target is None:
                continue
            ident = syntax.declarator_identifier(target)
            if ident is None:
                continue
            scalar = target.type == "identifier"
            array_or_ptr = target.type in ("array_declarator", "pointer_declarator")
            out.append(
                _Local(
                    syntax.text(module, ident),
                    _type_kind(base) if scalar else None,
                    _type_kind(base) if array_or_ptr else None,
                )
            )
    return out


def _replace(
    rw: Rewriter,
    module: Module,
    stmt: ts.Node,
    macro: str,
    original: str,
    variants: dict[int, str],
    rewritten: set[int],
) -> None:
    """Write the statement once per distinct variant, under ``#if`` on the knob."""
    source = module.source
    newline = "\r\n" if b"\r\n" in source else "\n"
    line_start = syntax.line_start(source, stmt.start_byte)
    before = source[line_start : stmt.start_byte]
    own_line = not before.strip()
    base = syntax.indentation(source, stmt.start_byte)
    indent = before.decode() if own_line else base + "  "
    groups: list[tuple[list[int], str]] = [([0], original)]
    for level, text in sorted(variants.items()):
        for levels, t in groups:
            if t == text:
                levels.append(level)
                break
        else:
            groups.append(([level], text))
    lines: list[str] = []
    for i, (levels, text) in enumerate(groups):
        cond = " || ".join(f"{macro} == {v}" for v in levels)
        if i == 0:
            lines.append(f"#if {cond}")
        elif i == len(groups) - 1:
            lines.append("#else")
        else:
            lines.append(f"#elif {cond}")
        lines.append(indent + _reindent(text, stmt.start_point[1], indent))
    lines.append("#endif")
    eol = source.find(b"\n", stmt.end_byte)
    after = source[stmt.end_byte : eol if eol >= 0 else len(source)]
    text = newline.join(lines)
    end = stmt.end_byte
    if after.strip() and not after.strip().startswith((b"//", b"/*")):
        gap = len(after) - len(after.lstrip())
        if stmt.end_byte + gap not in rewritten:  # (a rewritten neighbour starts its own line)
            text += newline + base
            end += gap
    if own_line:
        rw.replace_bytes(line_start, end, text)
    else:
        ws = len(before) - len(before.rstrip())
        rw.replace_bytes(stmt.start_byte - ws, end, newline + text)


def _reindent(text: str, col: int, indent: str) -> str:
    first, *rest = text.split("\n")
    out = [first]
    for line in rest:
        stripped = line[col:] if line[:col].strip() == "" else line.lstrip()
        out.append(indent + stripped)
    return "\n".join(out)
