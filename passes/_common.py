"""Pieces several built-in passes share: site types, domains, kernel facts."""

from __future__ import annotations

import ast
from dataclasses import dataclass

import tree_sitter as ts
from ktx.ir import Function, Loop, Module, syntax
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


def twin_refusal(module: Module, fn: Function, change: str) -> str | None:
    """Why ``change`` (to ``fn``'s launches) is refused when the file defines another kernel of
    ``fn``'s name: an explicit specialization or an overload (FasterTransformer's
    ``template <> __global__ void sigmoid_kernel(half2*, ...)``). A launch names the kernel
    either way, so the change would reach the launches that run the other definition, whose body
    the pass did not rewrite; vectorize refuses the same (``ir/facts/packing.py``)."""
    twins = [f for f in module.functions if f.is_kernel and f.name == fn.name and f.span != fn.span]
    if not twins:
        return None
    return (
        f"{fn.name} has another definition (line {twins[0].span.line}: an overload or a "
        f"specialization) whose launches cannot be told apart from this one's: {change} would "
        "reach theirs too"
    )


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


def _is_int(node: ast.AST, value: int) -> bool:
    return isinstance(node, ast.Constant) and type(node.value) is int and node.value == value


def _holds_int(text: str, value: int) -> bool:
    return any(_is_int(n, value) for n in ast.walk(ast.parse(text.strip(), mode="eval")))


def _sub_ints(node: ast.expr, value: int, name: str) -> tuple[ast.expr, bool]:
    """``node`` with every integer literal ``value`` in it replaced by the expression ``name``."""
    hit = False

    class _Sub(ast.NodeTransformer):
        def visit_Constant(self, c: ast.Constant) -> ast.AST:
            nonlocal hit
            if _is_int(c, value):
                hit = True
                return ast.parse(name, mode="eval").body
            return c

    new = _Sub().visit(node)
    assert isinstance(new, ast.expr)
    return new, hit


def grid_rounding(text: str, value: int, name: str) -> str | None:
    """``text`` (one grid dimension) with the block size ``value`` replaced by ``name`` where the
    dimension divides by it: ``(n + 255) // 256``, ``(n + 256 - 1) // 256``, ``(n - 1) // 256 + 1``,
    ``n // 256``, ``cdiv(n, 256 * 4)``. Only the divisor and the rounding addend change: the
    dividend is another quantity (``columns * 4 // 32``, 32 bits a word, inside
    ``(columns * 4 // 32 + 32 - 1) // 32``). None where the dimension has none of these forms.

    >>> grid_rounding("(columns * 4 // 32 + 32 - 1) // 32", 32, "B")
    '(columns * 4 // 32 + B - 1) // B'
    >>> grid_rounding("(n + 255) // 256", 256, "B"), grid_rounding("(m - 1) // 1024 + 1", 1024, "B")
    ('(n + (B - 1)) // B', '(m - 1) // B + 1')
    >>> grid_rounding("cdiv(d, 512 * 4)", 512, "B"), grid_rounding("rows", 32, "B") is None
    ('cdiv(d, B * 4)', True)
    >>> grid_rounding("(n + 1024 * 8 - 1) // (1024 * 8)", 1024, "B")
    '(n + B * 8 - 1) // (B * 8)'
    """
    tree = ast.parse(text.strip(), mode="eval")
    body = tree.body
    swap = ast.parse(name, mode="eval").body
    if isinstance(body, ast.Call) and len(body.args) == 2 and getattr(body.func, "id", "") == "cdiv":
        body.args[1], hit = _sub_ints(body.args[1], value, name)
        return ast.unparse(tree) if hit else None
    if isinstance(body, ast.BinOp) and isinstance(body.op, ast.Add) and _is_int(body.right, 1):
        inner = body.left  # (n - 1) // 256 + 1
        divides = isinstance(inner, ast.BinOp) and isinstance(inner.op, ast.FloorDiv)
        if divides and isinstance(inner, ast.BinOp) and _is_int(inner.right, value):
            inner.right = swap
            return ast.unparse(tree)
        return None
    if not (isinstance(body, ast.BinOp) and isinstance(body.op, ast.FloorDiv)):
        return None
    body.right, hit = _sub_ints(body.right, value, name)
    if not hit:
        return None
    left = body.left
    if isinstance(left, ast.BinOp) and isinstance(left.op, ast.Add) and _is_int(left.right, value - 1):
        left.right = ast.parse(f"({name}) - 1", mode="eval").body  # (n + 255) // 256
    elif (
        isinstance(left, ast.BinOp)
        and isinstance(left.op, ast.Sub)
        and _is_int(left.right, 1)
        and isinstance(left.left, ast.BinOp)
        and isinstance(left.left.op, ast.Add)
    ):
        left.left.right = _sub_ints(left.left.right, value, name)[0]  # (n + 256 * 8 - 1) // (256 * 8)
    return ast.unparse(tree)


def follow_block_axis(
    mapping: LaunchMapping, axis: int, value: int, name: str
) -> tuple[LaunchMapping, list[str]]:
    """The block's ``axis``, written as the literal ``value``, becomes ``name`` (an expression),
    and so does the same axis of the grid where it rounds by the block; the other axes, and vars
    that are the bare literal, keep it.

    Why not :func:`replace_literal`: a literal is a number, not a block size. Session 8's
    real-code run measured candidates that replaced every copy: exllamav2 quantize_kernel's block
    (32, 32) gave block y and grid y the x knob (rows skipped at BLOCK_X=64, BLOCK_Y=8), ggml
    soft_max_f32's ``ncols = "1024"`` became the block size (too little shared memory for the
    row), exllamav2 pack_rows_4's ``columns * 4 // 32`` (32 bits a word) was divided by the knob:
    12, 1 and 3 candidates failed verification. Shared memory and derived vars written with the
    literal inside an expression (``warps = 1024 // 32``) still follow it.

    >>> m = LaunchMapping(("(c + 32 - 1) // 32", "(r + 32 - 1) // 32"), ("32", "32"), "0", (), "spec")
    >>> new, places = follow_block_axis(m, 1, 32, "Y")
    >>> new.grid, new.block, places
    (('(c + 32 - 1) // 32', '(r + Y - 1) // Y'), ('32', 'Y'), ['grid[1]', 'block[1]'])
    >>> follow_block_axis(LaunchMapping(("128",), ("128",), "0", (), "spec"), 0, 128, "X")[0].grid
    ('128',)
    >>> m = LaunchMapping(("n",), ("1024",), "(ncols + 32) * 4", (("ncols", "1024"),), "spec")
    >>> new, places = follow_block_axis(m, 0, 1024, "X")
    >>> new.vars, places
    ((('ncols', '1024'),), ['block[0]'])
    """
    places: list[str] = []
    grid = list(mapping.grid)
    block = list(mapping.block)
    for g in range(len(grid)):
        if g == axis:
            rounded = grid_rounding(grid[g], value, name)
            body = ast.parse(grid[g].strip(), mode="eval").body
            # Another form (``min(cdiv(n, 256), 65535)``): every copy here. Not a grid that is
            # the bare literal: a fixed count of blocks that equals the block by chance
            # (fp16ScalarProduct's ``<<<NUM_OF_BLOCKS, NUM_OF_THREADS>>>``, both 128) is no more
            # derived from the block than a grid of 120 would be.
            if rounded is None and not _is_int(body, value):
                tree, hit = _sub_ints(body, value, name)
                rounded = ast.unparse(tree) if hit else None
        elif g < len(block) and _holds_int(block[g], value):
            continue  # the grid's rounding by its own block's axis, which has the same size
        else:
            # ``dim3(32, 4)`` over ``(rows + 3) / 4`` blocks: rows are y within a block and x
            # across blocks (``r = blockIdx.x * blockDim.y + threadIdx.y``): grid x rounds by y
            rounded = grid_rounding(grid[g], value, name)
        if rounded is not None and rounded != grid[g]:
            grid[g] = rounded
            places.append(f"grid[{g}]")
    tree, hit = _sub_ints(ast.parse(block[axis].strip(), mode="eval").body, value, name)
    if hit:
        block[axis] = ast.unparse(tree)
        places.append(f"block[{axis}]")

    def follow(text: str, where: str) -> str:
        tree, hit = _sub_ints(ast.parse(text.strip(), mode="eval").body, value, name)
        if not hit:
            return text
        places.append(where)
        return ast.unparse(tree)

    shared = follow(mapping.shared, "shared")
    new_vars = tuple(
        (n, e if _is_int(ast.parse(e.strip(), mode="eval").body, value) else follow(e, f"vars.{n}"))
        for n, e in mapping.vars
    )
    return LaunchMapping(tuple(grid), tuple(block), shared, new_vars, mapping.origin, mapping.notes), places
