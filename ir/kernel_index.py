"""The affine reader: a kernel's tree read into index facts, once per module and kernel.

:class:`KernelIndex` reads integer expressions into :class:`~ktx.ir.affine_form.Affine` forms,
finds the thread index and its guard, reads loops as start/step/bound and every memory
reference as a :class:`~ktx.ir.memref.MemRef`; :mod:`ktx.ir.affine` documents the whole.
"""

from __future__ import annotations

import weakref
from dataclasses import dataclass
from typing import TYPE_CHECKING

import tree_sitter as ts
from ktx.ir.affine_form import BDIM_X, GDIM_X, THREAD_VARYING, ZERO, Affine
from ktx.ir.affine_tree import assignments as _assignments
from ktx.ir.affine_tree import builtin as _builtin
from ktx.ir.affine_tree import cast_parts as _cast_parts
from ktx.ir.affine_tree import comparison as _comparison
from ktx.ir.affine_tree import condition as _condition
from ktx.ir.affine_tree import declared as _declared
from ktx.ir.affine_tree import element as _element
from ktx.ir.affine_tree import fold as _fold
from ktx.ir.affine_tree import function_body as _function_body
from ktx.ir.affine_tree import index_node as _index_node
from ktx.ir.affine_tree import only_return as _only_return
from ktx.ir.affine_tree import size as _size
from ktx.ir.affine_tree import strip as _strip
from ktx.ir.affine_tree import top_level_in as _top_level_in
from ktx.ir.block_alias import block_aliases as _block_aliases
from ktx.ir.block_alias import block_x_equalities as _block_x_equalities
from ktx.ir.block_alias import template_values as _template_values
from ktx.ir.consteval import const_eval, int_literal
from ktx.ir.facts.kinds import LOAD_INTRINSICS, STORE_INTRINSICS, AccessKind
from ktx.ir.facts.kinds import access_kind as _kind
from ktx.ir.index_facts import BlockAlias, Guard, LoopShape, PointerDef, StrideKind, ThreadIndex
from ktx.ir.memref import MemRef
from ktx.ir.nodes import Function, Loop
from ktx.ir.syntax import text as _text
from ktx.ir.syntax import walk as _walk

if TYPE_CHECKING:
    from ktx.ir.module import Module  # a type only: Module.facts() imports the facts

_OPAQUE = frozenset(
    {"conditional_expression", "subscript_expression", "template_function", "qualified_identifier"}
)
_LOOP_NODES = ("for_statement", "while_statement", "do_statement")


@dataclass
class _Local:
    node: ts.Node
    value: ts.Node | None
    type: str
    pointer: bool
    array: bool


class KernelIndex:
    """Index facts of one kernel, computed on demand and kept (see :func:`kernel_index`)."""

    def __init__(self, module: Module, fn: Function) -> None:
        self.module = module
        self.fn = fn
        self.body = _function_body(module, fn)
        self.env: dict[str, int] = {m.name: m.int_value for m in module.macros if m.int_value is not None}
        for c in module.constants:
            if c.int_value is not None and c.function in (None, fn.name):
                self.env[c.name] = c.int_value
        self.block_aliases: dict[str, BlockAlias] = _block_aliases(module, fn, self.env)
        self.block_x_equal: dict[str, BlockAlias] = _block_x_equalities(module, fn, self.env)
        """Names equal to ``blockDim.x`` where the launches' blocks have several dimensions
        (``dim3(WARP_SIZE, 4)``): read as ``blockDim.x`` like an alias, but no block-size knob."""
        self.template_values: dict[str, int] = _template_values(module, fn, self.env)
        """Value template parameters every launch (or the default) gives one integer: folded."""
        self.params = {p.name: p for p in fn.params}
        self.shared = {a.name: a for a in module.shared_arrays if a.function in (fn.name, None)}
        self.locals: dict[str, _Local] = {}
        self.variables: set[str] = set()
        """Locals written after their declaration, or declared twice: symbols, never substituted."""
        self._collect_locals()
        self._memo: dict[int, Affine | None] = {}
        self._busy: set[str] = set()
        self._pointers: dict[str, PointerDef | None] = {}

    # -- locals --------------------------------------------------------------------------------

    def _collect_locals(self) -> None:
        counts: dict[str, int] = {}
        for n in _walk(self.body):
            if n.type != "declaration":
                continue
            type_node = n.child_by_field_name("type")
            base = _text(self.module, type_node) if type_node is not None else ""
            quals = " ".join(_text(self.module, c) for c in n.children if c.type == "type_qualifier")
            for decl in n.children_by_field_name("declarator"):
                value = decl.child_by_field_name("value") if decl.type == "init_declarator" else None
                target = decl.child_by_field_name("declarator") if decl.type == "init_declarator" else decl
                ident, depth, array = _declared(target)
                if ident is None:
                    continue
                name = _text(self.module, ident)
                counts[name] = counts.get(name, 0) + 1
                if value is not None and value.type in ("initializer_list", "argument_list"):
                    inner = [c for c in value.named_children if c.type != "comment"]
                    value = inner[0] if len(inner) == 1 else None
                self.locals[name] = _Local(n, value, f"{quals} {base}".strip(), depth > 0, array)
        for n in _walk(self.body):
            written: ts.Node | None = None
            if n.type == "assignment_expression":
                written = n.child_by_field_name("left")
            elif n.type == "update_expression":
                written = n.child_by_field_name("argument")
            if written is not None and _strip(written).type == "identifier":
                self.variables.add(_text(self.module, _strip(written)))
        self.variables |= {n for n, k in counts.items() if k > 1}
        for name, local in self.locals.items():
            if local.value is None and not local.array:
                self.variables.add(name)

    def local_type(self, name: str) -> str | None:
        """The declared type of a local or parameter (qualifiers kept), or None."""
        if name in self.locals:
            return self.locals[name].type
        p = self.params.get(name)
        return p.type if p is not None else None

    # -- expressions ---------------------------------------------------------------------------

    def affine(self, node: ts.Node | None) -> Affine | None:
        """The value of an integer expression as an :class:`Affine`, or None if not readable."""
        if node is None:
            return None
        key = node.id
        if key not in self._memo:
            self._memo[key] = self._eval(node)
        return self._memo[key]

    def _name(self, name: str) -> Affine:
        alias = self.block_aliases.get(name) or self.block_x_equal.get(name)
        if alias is not None and name not in self.locals and name not in self.variables:
            return Affine.sym(f"blockDim.{alias.axis}")
        if name in self.locals and name not in self.variables:
            local = self.locals[name]
            if local.pointer or local.array or name in self._busy:
                return Affine.sym(name)
            self._busy.add(name)
            try:
                value = self.affine(local.value)
            finally:
                self._busy.discard(name)
            return value if value is not None else Affine.atom(name, self._free_names(local.value))
        if name not in self.locals:
            aliased = name in self.block_aliases or name in self.block_x_equal
            if name in self.template_values and not aliased:
                return Affine.of(self.template_values[name])
            if name in self.env:
                return Affine.of(self.env[name])
            if name == "warpSize":
                return Affine.of(32)
        return Affine.sym(name)

    def _free_names(self, node: ts.Node | None) -> set[str]:
        """The symbols an unreadable expression depends on (locals opened, constants dropped)."""
        out: set[str] = set()
        if node is None:
            return out
        for n in _walk(node):
            if n.type == "field_expression":
                b = _builtin(self.module, n)
                if b is not None:
                    out.add(b)
            elif n.type == "identifier":
                parent = n.parent
                if (
                    parent is not None
                    and parent.type == "field_expression"
                    and parent.child_by_field_name("field") == n
                ):
                    continue
                if (
                    parent is not None
                    and parent.type == "call_expression"
                    and parent.child_by_field_name("function") == n
                ):
                    continue
                out |= self._name(_text(self.module, n)).free
        return out

    def _opaque(self, node: ts.Node) -> Affine:
        return Affine.atom("(" + " ".join(_text(self.module, node).split()) + ")", self._free_names(node))

    def _eval(self, node: ts.Node) -> Affine | None:
        n = _strip(node)
        kind = n.type
        if kind == "number_literal":
            v = int_literal(_text(self.module, n))
            return Affine.of(v) if v is not None else None
        if kind == "identifier":
            return self._name(_text(self.module, n))
        if kind == "field_expression":
            builtin = _builtin(self.module, n)
            return Affine.sym(builtin) if builtin is not None else self._opaque(n)
        if kind == "cast_expression":
            return self.affine(n.child_by_field_name("value"))
        if kind == "call_expression":
            fn = n.child_by_field_name("function")
            args = n.child_by_field_name("arguments")
            named = [c for c in args.named_children if c.type != "comment"] if args is not None else []
            if fn is not None and fn.type == "template_function" and len(named) == 1:
                name = _text(self.module, fn.child_by_field_name("name") or fn)
                if name in ("static_cast", "int", "unsigned", "size_t"):
                    return self.affine(named[0])
            return self._opaque(n)
        if kind == "unary_expression":
            op = n.child_by_field_name("operator")
            arg = n.child_by_field_name("argument")
            inner = self.affine(arg) if arg is not None else None
            if op is None or inner is None:
                return None
            if op.type == "-":
                return -inner
            if op.type == "+":
                return inner
            return self._opaque(n)
        if kind == "binary_expression":
            op = n.child_by_field_name("operator")
            left, right = n.child_by_field_name("left"), n.child_by_field_name("right")
            if op is None or left is None or right is None:
                return None
            a, b = self.affine(left), self.affine(right)
            if a is None or b is None:
                return self._opaque(n)
            if op.type == "+":
                return a + b
            if op.type == "-":
                return a - b
            if op.type == "*":
                return a * b
            if op.type == "<<" and b.is_const and 0 <= b.const < 63:
                return a * Affine.of(1 << b.const)
            if a.is_const and b.is_const:
                folded = _fold(op.type, a.const, b.const)
                return Affine.of(folded) if folded is not None else None
            return self._opaque(n)
        if kind == "sizeof_expression":
            v = const_eval(n, self.env)
            return Affine.of(v) if v is not None else self._opaque(n)
        if kind in _OPAQUE:
            return self._opaque(n)
        return None

    # -- thread index and guards ---------------------------------------------------------------

    def global_form(self, axis: str = "x") -> Affine:
        """``blockIdx.a * blockDim.a + threadIdx.a``."""
        block = Affine.sym(f"blockIdx.{axis}") * Affine.sym(f"blockDim.{axis}")
        return block + Affine.sym(f"threadIdx.{axis}")

    def thread_index(self, axis: str = "x") -> ThreadIndex | None:
        """The first local defined as the global thread index along ``axis`` (casts allowed)."""
        want = self.global_form(axis)
        for name, local in self.locals.items():
            if name in self.variables or local.pointer or local.array or local.value is None:
                continue
            value = self.affine(local.value)
            if value is not None and value.equals(want):
                return ThreadIndex(
                    name,
                    axis,
                    value,
                    local.type,
                    local.node,
                    self.guard_of(name),
                    local.node.start_point[0] + 1,
                )
        return None

    def guard_of(self, var: str) -> Guard | None:
        """The guard on ``var`` among the kernel's top-level statements, or None.

        ``if (var < N) {...}`` (no ``else``) or ``if (var >= N) return;`` (and the mirrored
        comparisons); ``N`` must not depend on the thread's builtins.
        """
        for stmt in self.body.named_children:
            if stmt.type != "if_statement" or stmt.child_by_field_name("alternative") is not None:
                continue
            cond = stmt.child_by_field_name("condition")
            cons = stmt.child_by_field_name("consequence")
            if cond is None or cons is None:
                continue
            cmp = _comparison(self.module, cond, var)
            if cmp is None:
                continue
            op, bound_node = cmp
            bound = self.affine(bound_node)
            if bound is not None and bound.depends_on(THREAD_VARYING):
                continue
            line = stmt.start_point[0] + 1
            text = " ".join(_text(self.module, bound_node).split())
            if op in ("<", "<=") and not _only_return(cons):
                return Guard("if", var, bound, text, op == "<=", stmt, cons, line)
            if op in (">=", ">") and _only_return(cons):
                return Guard("return", var, bound, text, op == ">", stmt, None, line)
        return None

    # -- loops ---------------------------------------------------------------------------------

    def loop_shape(self, loop: Loop) -> LoopShape | None:
        """``loop`` as start/step/bound, or None when it has no single induction variable."""
        node = self.module.node(loop.span)
        while node.type not in _LOOP_NODES and node.parent is not None:
            node = node.parent
        if node.type not in _LOOP_NODES:
            return None
        line = node.start_point[0] + 1
        cond = node.child_by_field_name("condition")
        body = node.child_by_field_name("body")
        var = loop.var
        cmp_op, bound_node = "", None
        if cond is not None:
            c = _strip(_condition(cond))
            if var is None and c.type == "binary_expression":
                left = _strip(c.child_by_field_name("left") or c)
                if left.type == "identifier":
                    var = _text(self.module, left)
            if var is not None:
                found = _comparison(self.module, c, var)
                if found is not None:
                    cmp_op, bound_node = found
        if var is None:
            return None
        step_node: ts.Node | None = None
        step: Affine | None = None
        start: Affine | None = None
        if node.type == "for_statement":
            update = node.child_by_field_name("update")
            if update is not None:
                step_node = update
                step = self._step(update, var)
            init = node.child_by_field_name("initializer")
            start = self._init_value(init, var) if init is not None else self._value_before(var, node)
        else:
            if body is not None:
                writes = [w for w in _assignments(self.module, body, var)]
                if len(writes) == 1 and _top_level_in(writes[0], body):
                    step_node = writes[0]
                    step = self._step(writes[0], var)
            start = self._value_before(var, node)
        bound = self.affine(bound_node) if bound_node is not None else None
        return LoopShape(loop, node, var, start, step, bound, cmp_op, _classify(step), step_node, line)

    def _step(self, node: ts.Node, var: str) -> Affine | None:
        n = _strip(node)
        if n.type == "update_expression":
            arg = n.child_by_field_name("argument")
            op = n.child_by_field_name("operator")
            if arg is not None and _text(self.module, _strip(arg)) == var and op is not None:
                return Affine.of(1 if op.type == "++" else -1)
            return None
        if n.type == "assignment_expression":
            left, right = n.child_by_field_name("left"), n.child_by_field_name("right")
            op = n.child_by_field_name("operator")
            if left is None or right is None or op is None or _text(self.module, _strip(left)) != var:
                return None
            value = self.affine(right)
            if value is None:
                return None
            if op.type == "+=":
                return value
            if op.type == "-=":
                return -value
            if op.type == "=":
                coeff = value.coeff(var)
                if coeff is not None and coeff.equals(Affine.of(1)):
                    return value.without(var)
            return None
        if n.type == "expression_statement" and n.named_children:
            return self._step(n.named_children[0], var)
        if n.type == "comma_expression":
            return None
        return None

    def _init_value(self, init: ts.Node, var: str) -> Affine | None:
        if init.type == "declaration":
            for decl in init.children_by_field_name("declarator"):
                if decl.type == "init_declarator":
                    ident, _, _ = _declared(decl.child_by_field_name("declarator"))
                    if ident is not None and _text(self.module, ident) == var:
                        return self.affine(decl.child_by_field_name("value"))
            return None
        n = _strip(init)
        if n.type == "assignment_expression":
            left = n.child_by_field_name("left")
            if left is not None and _text(self.module, _strip(left)) == var:
                return self.affine(n.child_by_field_name("right"))
        return None

    def _value_before(self, var: str, loop: ts.Node) -> Affine | None:
        """``var``'s value entering ``loop``: its initialiser, when nothing else writes it first."""
        local = self.locals.get(var)
        if local is None or local.value is None or local.node.start_byte > loop.start_byte:
            return None
        for w in _assignments(self.module, self.body, var):
            if w.start_byte < loop.start_byte or w.start_byte >= loop.end_byte:
                return None
        saved = var in self.variables
        self.variables.discard(var)
        try:
            return self._eval(local.value)
        finally:
            if saved:
                self.variables.add(var)

    # -- memory --------------------------------------------------------------------------------

    def pointer(self, name: str) -> PointerDef | None:
        """What a local pointer reaches (``row = x + r * C`` reaches ``x`` at ``r*C``), or None."""
        if name in self._pointers:
            return self._pointers[name]
        self._pointers[name] = None
        local = self.locals.get(name)
        result: PointerDef | None = None
        if local is not None and local.pointer and local.value is not None and name not in self.variables:
            base = self._pointer_expr(local.value)
            if base is not None:
                root, offset, unit = base
                etype = _element(local.type) or unit
                line = local.node.start_point[0] + 1
                result = PointerDef(name, root, offset, etype, line)
        self._pointers[name] = result
        return result

    def root_type(self, root: str) -> str:
        p = self.params.get(root)
        if p is not None:
            return _element(p.base_type)
        if root in self.shared:
            return _element(self.shared[root].type)
        local = self.locals.get(root)
        return _element(local.type) if local is not None else ""

    def _width(self, root: str, unit: str) -> int | None:
        """Root elements per ``unit`` (``float4`` over ``float``: 4), or None when not known."""
        rtype = self.root_type(root)
        if unit == rtype:
            return 1
        u, r = _size(unit), _size(rtype)
        return u // r if u is not None and r and u % r == 0 else None

    def _scaled(self, root: str, unit: str, count: Affine | None) -> Affine | None:
        """``count`` units of ``unit`` in root elements."""
        width = self._width(root, unit)
        if count is None or width is None:
            return None
        return count if width == 1 else count * Affine.of(width)

    def _pointer_expr(self, node: ts.Node) -> tuple[str, Affine | None, str] | None:
        """``(root, offset in root elements, unit type)`` of a pointer-valued expression, or None."""
        n = _strip(node)
        if n.type == "identifier":
            name = _text(self.module, n)
            if name in self.params and self.params[name].pointer_depth == 1:
                return name, ZERO, self.root_type(name)
            if name in self.shared or (name in self.locals and self.locals[name].array):
                return name, ZERO, self.root_type(name)
            d = self.pointer(name)
            if d is not None:
                return d.root, d.offset, d.element_type
            return None
        if n.type == "binary_expression":
            op = n.child_by_field_name("operator")
            left, right = n.child_by_field_name("left"), n.child_by_field_name("right")
            if op is None or left is None or right is None or op.type not in ("+", "-"):
                return None
            base = self._pointer_expr(left)
            other = right
            if base is None and op.type == "+":
                base, other = self._pointer_expr(right), left
            if base is None:
                return None
            root, off, unit = base
            delta = self._scaled(root, unit, self.affine(other))
            if off is None or delta is None:
                return root, None, unit
            return root, off + (delta if op.type == "+" else -delta), unit
        if n.type == "pointer_expression":
            op = n.child_by_field_name("operator")
            arg = n.child_by_field_name("argument")
            if op is not None and op.type == "&" and arg is not None:
                sub = _strip(arg)
                if sub.type == "subscript_expression":
                    ref = self._subscript(sub)
                    if ref is not None:
                        return ref[0], ref[1], ref[2]
            return None
        cast = _cast_parts(self.module, n)
        if cast is not None:
            target, value = cast
            base = self._pointer_expr(value)
            if base is None:
                return None
            root, off, _ = base
            return root, off, target
        return None

    def subscript(self, sub: ts.Node) -> tuple[str, Affine | None, str, str] | None:
        """``(root, index in root elements, unit type, pointer text)`` of ``p[i]``, or None."""
        return self._subscript(sub)

    def width(self, root: str, unit: str) -> int | None:
        """Root elements per ``unit`` (``float4`` over ``float``: 4), or None when not known."""
        return self._width(root, unit)

    def _subscript(self, sub: ts.Node) -> tuple[str, Affine | None, str, str] | None:
        """``(root, index in root elements, unit type, pointer text)`` of ``p[i]``."""
        base = sub.child_by_field_name("argument")
        idx = _index_node(sub)
        if base is None or idx is None:
            return None
        ptr = self._pointer_expr(base)
        if ptr is None:
            return None
        root, off, unit = ptr
        value = self._scaled(root, unit, self.affine(idx))
        index = off + value if off is not None and value is not None else None
        return root, index, unit, " ".join(_text(self.module, _strip(base)).split())

    def accesses(self, node: ts.Node | None = None) -> tuple[MemRef, ...]:
        """Every memory access under ``node`` (the kernel body by default), in source order."""
        scope = node if node is not None else self.body
        found: list[MemRef] = []
        consumed: set[int] = set()
        for n in _walk(scope):
            if n.id in consumed:
                continue
            if n.type == "call_expression":
                fn = n.child_by_field_name("function")
                name = _text(self.module, fn) if fn is not None else ""
                if name in LOAD_INTRINSICS or name in STORE_INTRINSICS:
                    args = n.child_by_field_name("arguments")
                    named = [c for c in args.named_children if c.type != "comment"] if args else []
                    if not named:
                        continue
                    addr = _strip(named[0])
                    kind: AccessKind = "load" if name in LOAD_INTRINSICS else "store"
                    ref = self._address(addr)
                    if addr.type == "pointer_expression":
                        inner = addr.child_by_field_name("argument")
                        if inner is not None:
                            consumed.add(_strip(inner).id)
                    if ref is None:
                        ref = ("", None, "", _text(self.module, addr))
                    root, index, unit, text = ref
                    found.append(self._ref(kind, name, text, root, index, unit, n))
                continue
            if n.type == "subscript_expression":
                ref4 = self._subscript(n)
                if ref4 is None:
                    base = n.child_by_field_name("argument")
                    if base is not None and _strip(base).type == "identifier":
                        name = _text(self.module, _strip(base))
                        local = self.locals.get(name)
                        if local is not None and (local.array or not local.pointer):
                            continue  # a local array or a packed value (x128): registers, not memory
                    text = _text(self.module, base) if base is not None else ""
                    found.append(self._ref(_kind(n), "subscript", text, "", None, "", n))
                    continue
                root, index, unit, text = ref4
                if root in self.locals and self.locals[root].array:
                    continue
                found.append(self._ref(_kind(n), "subscript", text, root, index, unit, n))
                continue
            if n.type == "pointer_expression":
                op = n.child_by_field_name("operator")
                arg = n.child_by_field_name("argument")
                if op is None or arg is None or op.type != "*":
                    continue
                ptr = self._pointer_expr(arg)
                if ptr is None:
                    continue
                root, off, unit = ptr
                text = " ".join(_text(self.module, arg).split())
                found.append(self._ref(_kind(n), "deref", text, root, off, unit, n))
        return tuple(found)

    def loop_accesses(self, loop: Loop) -> tuple[MemRef, ...]:
        """The accesses in ``loop``'s body (its header is not memory traffic)."""
        node = self.module.node(loop.span)
        while node.type not in _LOOP_NODES and node.parent is not None:
            node = node.parent
        body = node.child_by_field_name("body")
        return self.accesses(body) if body is not None else ()

    def _address(self, addr: ts.Node) -> tuple[str, Affine | None, str, str] | None:
        if addr.type == "pointer_expression":
            op = addr.child_by_field_name("operator")
            arg = addr.child_by_field_name("argument")
            if op is not None and op.type == "&" and arg is not None:
                sub = _strip(arg)
                if sub.type == "subscript_expression":
                    return self._subscript(sub)
        ptr = self._pointer_expr(addr)
        if ptr is None:
            return None
        return ptr[0], ptr[1], ptr[2], " ".join(_text(self.module, addr).split())

    def _ref(
        self, kind: AccessKind, via: str, text: str, root: str, index: Affine | None, unit: str, node: ts.Node
    ) -> MemRef:
        width = self._width(root, unit) if root else None
        span = self.module.span(node.start_byte, node.end_byte)
        sub = node if node.type == "subscript_expression" else None
        index_node = _index_node(sub) if sub is not None else None
        line = node.start_point[0] + 1
        return MemRef(kind, via, text, root, index, unit, width, node, line, span, index_node=index_node)


def _classify(step: Affine | None) -> StrideKind:
    if step is None:
        return "other"
    if step.is_sym(BDIM_X):
        return "block"
    if step.equals(Affine.sym(BDIM_X) * Affine.sym(GDIM_X)):
        return "grid"
    if step.is_sym(GDIM_X):
        return "grid-blocks"
    if step.is_const:
        if step.const == 1:
            return "unit"
        if step.const == 32:
            return "warp"
        return "constant"
    return "other"


# -- entry points --------------------------------------------------------------------------------

_CACHE: weakref.WeakKeyDictionary[Module, dict[str, KernelIndex]] = weakref.WeakKeyDictionary()


def kernel_index(module: Module, fn: Function) -> KernelIndex:
    """The index facts of ``fn`` in ``module``, computed once per module and kernel."""
    per = _CACHE.setdefault(module, {})
    # A template parameter bound to a pointer type changes which names are buffers
    # (:func:`ktx.ir.facts.kernel.with_bound_pointers`): part of the key.
    key = f"{fn.name}@{fn.span.start}:{','.join(str(p.pointer_depth) for p in fn.params)}"
    if key not in per:
        per[key] = KernelIndex(module, fn)
    return per[key]


def thread_index(module: Module, fn: Function, axis: str = "x") -> ThreadIndex | None:
    return kernel_index(module, fn).thread_index(axis)


def guard_of(module: Module, fn: Function, var: str) -> Guard | None:
    return kernel_index(module, fn).guard_of(var)


def loop_shape(module: Module, fn: Function, loop: Loop) -> LoopShape | None:
    return kernel_index(module, fn).loop_shape(loop)


def accesses(module: Module, fn: Function, node: ts.Node | None = None) -> tuple[MemRef, ...]:
    return kernel_index(module, fn).accesses(node)


def affine_of(module: Module, fn: Function, node: ts.Node) -> Affine | None:
    return kernel_index(module, fn).affine(node)
