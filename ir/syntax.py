"""Tree-sitter helpers: node text, walking, and the questions passes and facts ask of the tree.

The one copy the IR, the facts layer (:mod:`ktx.ir.facts`) and the passes share. The IR
indexes what most passes need; the questions asked before a rewrite ("does the loop body
synchronise the block?", "what initialises this local?") need the tree itself, and live here
once so that every caller answers them the same way. Who assigns a variable is a fact
(:func:`ktx.ir.facts.assign.assigned`), built on these helpers.

The tree is parsed from a masked copy of the source (:mod:`ktx.ir.mask` blanks attribute-like
macros without moving a byte), so a node's offsets point into the original text while
``node.text`` is the masked copy's. :func:`text` reads the original bytes (what a pass prints
or edits); :func:`node_text` reads what the parser saw (enough for names and literals, and all
that code holding no module has).

This module sits at the bottom of ``ktx.ir``: it imports no other IR module at run time (the
:class:`~ktx.ir.Module` it takes is a type only), so anything above may use it.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

import tree_sitter as ts

if TYPE_CHECKING:
    from ktx.ir.module import Module
    from ktx.ir.nodes import Function
    from ktx.ir.source import Span


class HasSource(Protocol):
    """A :class:`ktx.ir.Module` or anything else holding the original bytes."""

    @property
    def source(self) -> bytes: ...


def source_text(source: bytes, node: ts.Node) -> str:
    """The text of ``node`` in ``source`` (the original bytes the tree's offsets point into)."""
    return source[node.start_byte : node.end_byte].decode("utf-8", "replace")


def text(module: HasSource, node: ts.Node) -> str:
    """The original source text of ``node``."""
    return source_text(module.source, node)


def node_text(node: ts.Node | None) -> str:
    """The text the parser saw for ``node`` (masked macros blank); ``""`` for None."""
    return "" if node is None or node.text is None else node.text.decode("utf-8", "replace")


def walk(node: ts.Node) -> Iterator[ts.Node]:
    """Every node under ``node`` (itself included), in source order.

    With a tree cursor: asking each node for its ``children`` builds a list of new node objects
    for every node visited, which made this about three times slower (0.38 s against 0.12 s for
    the 330,000 nodes of 120 corpus files). The most called function of the IR's tests."""
    cursor = node.walk()
    yield node
    depth = 0
    while True:
        if cursor.goto_first_child():
            depth += 1
        else:
            while depth > 0 and not cursor.goto_next_sibling():
                cursor.goto_parent()
                depth -= 1
            if depth == 0:
                return
        current = cursor.node
        assert current is not None  # a cursor on a node always has one
        yield current


_BRANCHES = frozenset({"preproc_if", "preproc_ifdef", "preproc_elif", "preproc_else"})


def _branches(node: ts.Node) -> dict[int, int]:
    """For each ``#if`` chain ``node`` sits in: the chain's first node's id -> the id of the
    branch (``#if``, ``#elif`` or ``#else`` node) whose own lines hold ``node``."""
    out: dict[int, int] = {}
    child, parent = node, node.parent
    while parent is not None:
        if parent.type in _BRANCHES:
            alternative = parent.child_by_field_name("alternative")
            inside_alt = (
                alternative is not None and alternative.start_byte <= child.start_byte < alternative.end_byte
            )
            if not inside_alt:
                root = parent
                while root.parent is not None and root.parent.type in _BRANCHES:
                    alt = root.parent.child_by_field_name("alternative")
                    if alt is None or alt.id != root.id:
                        break
                    root = root.parent
                out.setdefault(root.id, parent.id)
        child, parent = parent, parent.parent
    return out


def exclusive(a: ts.Node, b: ts.Node) -> bool:
    """Whether ``a`` and ``b`` sit in different branches of one ``#if``/``#elif``/``#else``
    chain, so that no build compiles both (a pass's rewrite puts each knob value's code in its
    own branch; an access in one branch never meets the other's)."""
    ours, theirs = _branches(a), _branches(b)
    return any(theirs.get(root, branch) != branch for root, branch in ours.items())


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
