"""Tree-sitter helpers that passes share: walking, text, declarations, assignments, barriers.

The IR (:mod:`ktx.ir`) indexes what most passes need; the questions a pass asks before it
rewrites ("is this variable reassigned after its declaration?", "does the loop body
synchronise the block?") need the tree itself. They live here, once, so that every pass
answers them the same way. Text always comes from the module's original bytes: the tree was
parsed from a masked copy (see :mod:`ktx.ir.mask`) whose node texts may differ.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass

import tree_sitter as ts
from ktx.ir import Function, Module, Span
from ktx.ir.facts.assign import assigned as assigned  # the one "who assigns x" walker
from ktx.ir.syntax import exclusive as exclusive
from ktx.ir.syntax import text as text  # re-exported: the canonical copy lives below ktx
from ktx.ir.syntax import walk as walk

#: Calls that synchronise or exchange data across threads of a block or warp.
BARRIERS = frozenset(
    {
        "__syncthreads",
        "__syncthreads_count",
        "__syncthreads_and",
        "__syncthreads_or",
        "__syncwarp",
        "__threadfence_block",
    }
)
SHUFFLES = frozenset(
    {
        "__shfl_sync",
        "__shfl_up_sync",
        "__shfl_down_sync",
        "__shfl_xor_sync",
        "__reduce_add_sync",
        "__reduce_max_sync",
        "__reduce_min_sync",
        "__ballot_sync",
        "__any_sync",
        "__all_sync",
    }
)
_ASSIGN_OPS = ("=", "+=", "-=", "*=", "/=", "%=", "&=", "|=", "^=", "<<=", ">>=")


def span(module: Module, node: ts.Node) -> Span:
    return module.span(node.start_byte, node.end_byte)


def node_at(module: Module, where: Span, kind: str | Iterable[str]) -> ts.Node | None:
    """The node of type ``kind`` that spans exactly ``where`` (or the innermost one covering it)."""
    kinds = {kind} if isinstance(kind, str) else set(kind)
    node: ts.Node | None = module.node(where)
    while node is not None:
        if node.type in kinds and node.start_byte <= where.start and where.end <= node.end_byte:
            return node
        node = node.parent
    return None


def function_node(module: Module, fn: Function) -> ts.Node:
    """The ``function_definition`` node of ``fn`` (inside its ``template_declaration``, if any)."""
    body = module.node(fn.body)
    node: ts.Node | None = body
    while node is not None and node.type != "function_definition":
        node = node.parent
    if node is None:  # pragma: no cover - the index only records function definitions
        raise ValueError(f"no function_definition around {fn.name}")
    return node


def identifiers(node: ts.Node) -> Iterator[ts.Node]:
    """Identifier nodes (variables and names, not fields of ``a.b``) under ``node``."""
    for n in walk(node):
        if n.type == "identifier":
            yield n


def names_in(module: Module, node: ts.Node) -> set[str]:
    return {text(module, n) for n in identifiers(node)}


def calls(module: Module, node: ts.Node, names: Iterable[str] | None = None) -> Iterator[ts.Node]:
    """``call_expression`` nodes under ``node`` whose callee is one of ``names`` (any when None)."""
    wanted = None if names is None else set(names)
    for n in walk(node):
        if n.type != "call_expression":
            continue
        fn = n.child_by_field_name("function")
        if fn is None:
            continue
        if wanted is None or text(module, fn) in wanted:
            yield n


def uses_builtin(module: Module, node: ts.Node, name: str) -> bool:
    """Whether ``node`` reads a CUDA builtin such as ``blockIdx`` (any component) or ``blockIdx.y``."""
    base, _, field = name.partition(".")
    for n in walk(node):
        if n.type == "field_expression":
            arg = n.child_by_field_name("argument")
            fld = n.child_by_field_name("field")
            if (
                arg is not None
                and fld is not None
                and text(module, arg) == base
                and (not field or text(module, fld) == field)
            ):
                return True
        elif n.type == "identifier" and not field and text(module, n) == base:
            return True
    return False


def memory_writes(module: Module, node: ts.Node) -> list[ts.Node]:
    """Assignments through a subscript, a dereference or a field: stores to memory."""
    writes: list[ts.Node] = []
    for n in walk(node):
        target: ts.Node | None = None
        if n.type == "assignment_expression":
            target = n.child_by_field_name("left")
        elif n.type == "update_expression":
            target = n.child_by_field_name("argument")
        if target is not None and target.type in (
            "subscript_expression",
            "pointer_expression",
            "field_expression",
        ):
            writes.append(n)
    return writes


def declared_names(module: Module, node: ts.Node) -> set[str]:
    """Names declared by declarations under ``node`` (locals of a block, loop variables)."""
    names: set[str] = set()
    for n in walk(node):
        if n.type != "declaration":
            continue
        for decl in n.children_by_field_name("declarator"):
            name = declarator_identifier(decl)
            if name is not None:
                names.add(text(module, name))
    return names


def declarator_identifier(decl: ts.Node) -> ts.Node | None:
    """The identifier a declarator declares (through pointers, arrays, initialisers)."""
    node: ts.Node | None = decl
    while node is not None and node.type != "identifier":
        inner = node.child_by_field_name("declarator")
        if inner is None:
            return None
        node = inner
    return node


@dataclass(frozen=True)
class LocalDecl:
    """A local variable: its declaration and what initialises it.

    ``args`` holds the constructor arguments of ``dim3 b(x, y)`` (also the C++ "vexing parse"
    ``dim3 b(N)``, which tree-sitter reads as a function declaration) and of ``dim3 b = dim3(x)``;
    ``value`` holds the initialiser of ``T x = e``.
    """

    name: str
    type: str
    declaration: ts.Node
    value: ts.Node | None
    args: tuple[ts.Node, ...]

    @property
    def components(self) -> tuple[ts.Node, ...]:
        """What the variable is made of: constructor arguments, or the single initialiser."""
        if self.args:
            return self.args
        return (self.value,) if self.value is not None else ()


def local_declarations(module: Module, scope: ts.Node, before: int | None = None) -> dict[str, LocalDecl]:
    """Local variables declared in ``scope`` (before offset ``before``), the last one per name."""
    found: dict[str, LocalDecl] = {}
    for n in walk(scope):
        if n.type != "declaration" or (before is not None and n.start_byte >= before):
            continue
        type_node = n.child_by_field_name("type")
        type_text = text(module, type_node) if type_node is not None else ""
        for decl in n.children_by_field_name("declarator"):
            local = _local(module, n, decl, type_text)
            if local is not None:
                found[local.name] = local
    return found


def _local(module: Module, declaration: ts.Node, decl: ts.Node, type_text: str) -> LocalDecl | None:
    if decl.type == "identifier":
        return LocalDecl(text(module, decl), type_text, declaration, None, ())
    if decl.type == "function_declarator":
        name = decl.child_by_field_name("declarator")
        params = decl.child_by_field_name("parameters")
        if name is None or name.type != "identifier" or params is None:
            return None
        args = tuple(c for c in params.named_children if c.type != "comment")
        return LocalDecl(text(module, name), type_text, declaration, None, args)
    if decl.type != "init_declarator":
        return None
    name = decl.child_by_field_name("declarator")
    value = decl.child_by_field_name("value")
    if name is None or name.type != "identifier" or value is None:
        return None
    if value.type in ("argument_list", "initializer_list"):
        args = tuple(c for c in value.named_children if c.type != "comment")
        if type_text == "dim3" or len(args) != 1:
            return LocalDecl(text(module, name), type_text, declaration, None, args)
        return LocalDecl(text(module, name), type_text, declaration, args[0], ())
    if value.type == "call_expression":
        callee = value.child_by_field_name("function")
        arguments = value.child_by_field_name("arguments")
        if callee is not None and text(module, callee) == "dim3" and arguments is not None:
            args = tuple(c for c in arguments.named_children if c.type != "comment")
            return LocalDecl(text(module, name), type_text, declaration, None, args)
    return LocalDecl(text(module, name), type_text, declaration, value, ())


def reassigned_after(module: Module, scope: ts.Node, name: str, after: int) -> bool:
    """Whether ``name`` is written anywhere in ``scope`` after offset ``after``."""
    return any(n.start_byte >= after for n in assigned(module, scope).get(name, []))


def statement_of(node: ts.Node) -> ts.Node:
    """The statement (a direct child of a compound statement) that contains ``node``."""
    current = node
    while current.parent is not None and current.parent.type != "compound_statement":
        current = current.parent
    return current


def in_loop_or_switch(node: ts.Node, stop: ts.Node) -> bool:
    """Whether ``node`` sits inside a loop or switch nested under ``stop``."""
    current = node.parent
    while current is not None and current.id != stop.id:
        if current.type in (
            "for_statement",
            "while_statement",
            "do_statement",
            "for_range_loop",
            "switch_statement",
        ):
            return True
        current = current.parent
    return False


def line_start(source: bytes, offset: int) -> int:
    return source.rfind(b"\n", 0, offset) + 1


def indentation(source: bytes, offset: int) -> str:
    """The whitespace that starts the line holding ``offset``."""
    start = line_start(source, offset)
    end = start
    while end < len(source) and source[end : end + 1] in (b" ", b"\t"):
        end += 1
    return source[start:end].decode()
