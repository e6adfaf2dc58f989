"""Pieces several built-in passes share: site types, domains, kernel facts."""

from __future__ import annotations

import ast
from dataclasses import dataclass

import tree_sitter as ts
from ktx.ir import Loop, Module, syntax
from ktx.ir.launch import LaunchMapping, divide_grid

from ktx.passbase import Rewriter, Site, Target


@dataclass(frozen=True)
class KernelSite(Site):
    """The kernel as a whole (passes that change its launch or signature)."""


@dataclass(frozen=True)
class LoopSite(Site):
    """One loop of the kernel."""

    loop: Loop


def powers_of_two(lo: int, hi: int) -> list[int]:
    """Powers of two in ``[lo, hi]``.

    >>> powers_of_two(24, 300)
    [32, 64, 128, 256]
    """
    out: list[int] = []
    v = 1
    while v <= hi:
        if v >= lo:
            out.append(v)
        v *= 2
    return out


def around(value: int, lo: int, hi: int, spread: int = 4) -> tuple[int, ...]:
    """Powers of two within a factor ``spread`` of ``value`` (clipped to [lo, hi]), plus ``value``.

    >>> around(128, 32, 1024)
    (32, 64, 128, 256, 512)
    """
    low = max(lo, value // spread) if value > 0 else lo
    high = min(hi, value * spread) if value > 0 else hi
    return tuple(sorted({*powers_of_two(low, high), value}))


def kernel_node(target: Target) -> ts.Node:
    return syntax.function_node(target.module, target.kernel)


def uses_shuffles(module: Module, node: ts.Node) -> bool:
    return any(True for _ in syntax.calls(module, node, syntax.SHUFFLES))


def round_up_follows(mapping: LaunchMapping, value: int, name: str) -> LaunchMapping:
    """``(n + 255) // 256`` in a mapping's grid, for a block of ``value`` = 256 becoming ``name``:
    the 255 becomes ``(name) - 1`` so that, once :func:`replace_literal` replaces the 256, the
    grid still rounds up. Other expressions are kept."""

    class _Sub(ast.NodeTransformer):
        def visit_BinOp(self, node: ast.BinOp) -> ast.AST:
            self.generic_visit(node)
            left = node.left
            if (
                isinstance(node.op, ast.FloorDiv)
                and isinstance(node.right, ast.Constant)
                and node.right.value == value
                and isinstance(left, ast.BinOp)
                and isinstance(left.op, ast.Add)
                and isinstance(left.right, ast.Constant)
                and left.right.value == value - 1
            ):
                left.right = ast.parse(f"({name}) - 1", mode="eval").body
            return node

    def sub(text: str) -> str:
        return ast.unparse(_Sub().visit(ast.parse(text.strip(), mode="eval")))

    return LaunchMapping(
        tuple(sub(g) for g in mapping.grid),
        mapping.block,
        mapping.shared,
        mapping.vars,
        mapping.origin,
        mapping.notes,
    )


def replace_literal(mapping: LaunchMapping, value: int, name: str) -> tuple[LaunchMapping, list[str]]:
    """Replace every integer literal ``value`` in the mapping's expressions by ``name`` (an expression).

    Returns the new mapping and where it changed (``grid[0]``, ``vars.warps``...), so the pass
    can tell the user exactly what it did.
    """
    places: list[str] = []

    def sub(text: str, where: str) -> str:
        tree = ast.parse(text.strip(), mode="eval")
        hit = False

        class _Sub(ast.NodeTransformer):
            def visit_Constant(self, node: ast.Constant) -> ast.AST:
                nonlocal hit
                if type(node.value) is int and node.value == value:
                    hit = True
                    return ast.parse(name, mode="eval").body
                return node

        new = _Sub().visit(tree)
        if not hit:
            return text
        places.append(where)
        return ast.unparse(new)

    result = LaunchMapping(
        tuple(sub(g, f"grid[{i}]") for i, g in enumerate(mapping.grid)),
        tuple(sub(b, f"block[{i}]") for i, b in enumerate(mapping.block)),
        sub(mapping.shared, "shared"),
        tuple((n, sub(e, f"vars.{n}")) for n, e in mapping.vars),
        mapping.origin,
        mapping.notes,
    )
    return result, places


def shrink_grid(rw: Rewriter, macro: str, knob: str, axis: str = "x") -> None:
    """Divide the grid's x (or ``axis``) by a knob: at every launch of the kernel in the file, and
    in the mapping.

    For passes after which each thread covers ``knob`` times the work (``coarsen``, per-thread
    ``vectorize``): the launch becomes ``KTX_CDIV(x, KTX_<knob>)`` and the mapping's grid
    ``ceil_div(x, <knob>)``. ``ceil_div(ceil_div(n, b), k) == ceil_div(n, b * k)``, so a grid
    written ``ceil_div(N, block)`` ends up covering ``N`` elements ``k`` per thread exactly.
    """
    module = rw.target.module
    done: set[int] = set()
    for launch in rw.target.launches:
        edit = divide_grid(module, launch, macro, axis)
        if edit is None:
            continue
        start, end, text = edit
        if start in done:
            continue
        done.add(start)
        rw.replace_bytes(start, end, text)
    mapping = rw.mapping
    k = "xyz".index(axis)
    if mapping is not None and len(mapping.grid) > k:
        grid = tuple(f"ceil_div({g}, {knob})" if i == k else g for i, g in enumerate(mapping.grid))
        rw.set_mapping(mapping.with_grid(grid))


def indent_lines(rw: Rewriter, start: int, end: int, by: str) -> None:
    """Indent each line that starts inside ``(start, end)`` by ``by`` (not blank or ``#`` lines).

    Insertions at line starts keep every original byte where it was, so loops inside keep
    their identity (and labels) for later passes.
    """
    source = rw.target.module.source
    pos = source.find(b"\n", start)
    while 0 <= pos < end - 1:
        line = pos + 1
        nxt = source.find(b"\n", line)
        stop = len(source) if nxt < 0 else nxt
        text = source[line:stop].strip()
        if line < end and text and not text.startswith(b"#"):
            rw.insert(line, by)
        pos = nxt


def first_call_after(module: Module, scope: ts.Node, names: frozenset[str], offset: int) -> ts.Node | None:
    """The first call to one of ``names`` in ``scope`` that starts after ``offset``."""
    found = [c for c in syntax.calls(module, scope, names) if c.start_byte >= offset]
    return min(found, key=lambda c: c.start_byte) if found else None


def line_of(node: ts.Node) -> int:
    return node.start_point[0] + 1
