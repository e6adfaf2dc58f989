"""``coarsen``: each thread handles ``COARSEN`` items of the original index space.

Two kernel shapes are covered.

*One item per thread* (``i = blockIdx.x * blockDim.x + threadIdx.x``, then a bounds check and
the work): the statements from that index to the end of the kernel are wrapped in a loop over
``COARSEN`` items, and the block index becomes the item's block::

    #pragma unroll
    for (int ktx_k = 0; ktx_k < KTX_COARSEN; ++ktx_k) {
      const unsigned i = (blockIdx.x * KTX_COARSEN + ktx_k) * blockDim.x + threadIdx.x;
      if (i >= n) continue;   // was: return
      ...

With ``spacing=grid`` the items of a thread are a whole grid apart instead
(``(blockIdx.x + ktx_k * gridDim.x) * blockDim.x + threadIdx.x``), as a grid-stride loop takes
them. Each ``return`` of that region becomes ``continue``, so the bounds check is kept, item by item.
Consecutive threads still touch consecutive items (coalescing is unchanged) and the unrolled
loop gives each thread ``COARSEN`` independent items in flight.

*Grid-stride loops* (``for (i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += blockDim.x *
gridDim.x)``) already cover any grid: only the launch changes.

In both cases the grid's x becomes ``KTX_CDIV(x, KTX_COARSEN)`` (``ceil_div(x, COARSEN)`` in
the mapping); ``COARSEN = 1`` is the original kernel.

The index may name the block size as a macro or constant that every launch passes
(``blockIdx.x * BLOCK_SIZE + threadIdx.x``): :mod:`ktx.ir.affine` reads it as ``blockDim.x``.

Refused: kernels that synchronise or shuffle in that region (a ``continue`` must not skip a
barrier), that use ``blockIdx.x`` or ``gridDim.x`` beyond the index (also through a local
computed from them before it), that do more than declare locals before the index (that work
would run once per remaining thread), or whose ``return`` sits inside a nested loop or switch
(``continue`` would mean something else there); kernels that give each block a row
(``row = blockIdx.x``: see ``split``); kernels whose name has another definition in the file (an
explicit specialization or overload: its launches would be divided too, its body not).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import tree_sitter as ts
from ktx.ir import Function, Module, syntax
from ktx.passes._common import indent_lines, kernel_node, line_of, powers_of_two, shrink_grid, twin_refusal
from ktx.passes._per_thread import derived_locals, runs_before

from ktx.passbase import KnobSpec, Option, Pass, Phase, Refuse, Rewriter, Site, Skip, Target

SYNC = syntax.BARRIERS | syntax.SHUFFLES


@dataclass(frozen=True)
class CoarsenSite(Site):
    kind: str
    """``item`` (one item per thread) or ``grid-stride``."""
    index: ts.Node | None
    """The ``blockIdx.x`` of the global index (``item`` kernels)."""
    region: tuple[int, int]
    """Bytes from the index's statement to the kernel body's closing brace (``item`` kernels)."""
    returns: tuple[ts.Node, ...]


class Coarsen(Pass[CoarsenSite]):
    name = "coarsen"
    phase = Phase.VECTORIZE
    summary = "each thread handles COARSEN items; the grid is divided by COARSEN, bounds checks kept"
    description = __doc__ or ""
    knobs = (
        KnobSpec("COARSEN", "1, 2, 4, … max", "1 (one item per thread)", "items handled by each thread"),
    )
    options = (
        Option("max", "int", 8, "largest coarsening factor offered"),
        Option(
            "spacing",
            "str",
            "block",
            "block: a thread's items sit blockDim.x apart in COARSEN consecutive blocks; grid: a "
            "whole (smaller) grid apart, as a grid-stride loop would take them",
        ),
    )
    after = ("expose", "block-size")
    prefer_after = ("vectorize",)  # as for split: vectorize needs the loop's plain index mapping
    conflicts = ("split",)

    def sites(self, target: Target) -> Iterator[CoarsenSite | Skip]:
        module = target.module
        fn = target.kernel
        node = kernel_node(target)
        body = node.child_by_field_name("body")
        if body is None:
            return
        if target.mapping is None and not target.launches:
            yield Skip(f"no launch of {fn.name} in this file and no launch mapping given", fn.name, fn.span)
            return
        twin = twin_refusal(module, fn, "dividing the grid by COARSEN")
        if twin is not None:
            yield Skip(twin, fn.name, fn.span)
            return
        for loop in target.loops:
            if loop.kind == "for" and loop.init is not None and loop.step is not None:
                init = module.node(loop.init)
                step = module.text(loop.step).replace(" ", "")
                if _global_index(module, init) is not None and "gridDim.x" in step:
                    yield CoarsenSite(fn.name, fn.span, "grid-stride", None, (0, 0), ())
                    return
        for stmt in body.named_children:
            if stmt.type != "declaration":
                continue
            index = _global_index(module, stmt) or _affine_index(module, fn, stmt)
            if index is None:
                continue
            region = (stmt.start_byte, body.end_byte - 1)
            reason = _refusal(module, body, stmt, index)
            if reason is not None:
                yield Skip(reason, fn.name, fn.span)
                return
            returns = tuple(
                n
                for n in syntax.walk(body)
                if n.type == "return_statement" and n.start_byte >= stmt.start_byte
            )
            nested = [r for r in returns if syntax.in_loop_or_switch(r, body)]
            if nested:
                yield Skip(
                    f"a return inside a loop or switch (line {line_of(nested[0])}) cannot become continue",
                    fn.name,
                    fn.span,
                )
                return
            yield CoarsenSite(fn.name, fn.span, "item", index, region, returns)
            return
        yield Skip(
            "no global thread index (i = blockIdx.x * blockDim.x + threadIdx.x) and no grid-stride "
            "loop; kernels with one row per block can use split",
            fn.name,
            fn.span,
        )

    def rewrite(self, site: CoarsenSite, rw: Rewriter) -> None:
        values = powers_of_two(1, max(1, self.int_option("max")))
        macro = rw.knob("COARSEN", values, 1, "items per thread (the grid's x is divided by it)")
        module = rw.target.module
        if site.kind == "item":
            assert site.index is not None
            start, end = site.region
            indent = syntax.indentation(module.source, start)
            line = syntax.line_start(module.source, start)
            rw.insert(
                line,
                f"#pragma unroll\n{indent}for (int ktx_k = 0; ktx_k < {macro}; ++ktx_k) {{\n",
            )
            index = site.index
            spacing = str(self.option("spacing"))
            if spacing not in ("block", "grid"):
                raise Refuse(f"spacing={spacing}: expected block or grid")
            block = f"(blockIdx.x * {macro} + ktx_k)"
            grid = "(blockIdx.x + ktx_k * gridDim.x)"
            rw.replace_bytes(index.start_byte, index.end_byte, grid if spacing == "grid" else block)
            for ret in site.returns:
                if ret.named_children:
                    raise Refuse(f"return with a value at line {line_of(ret)}")
                rw.replace_bytes(ret.start_byte, ret.end_byte, "continue;")
            close = syntax.line_start(module.source, end)
            if module.source[close:end].strip():
                indent_lines(rw, line - 1 if line else 0, end, "  ")
                rw.insert(end, f"\n{indent}}}\n")
            else:
                indent_lines(rw, line - 1 if line else 0, close, "  ")
                rw.insert(close, f"{indent}}}\n")
        else:
            rw.note("grid-stride loop: the kernel already covers any grid; only the launch changes")
        shrink_grid(rw, macro, "COARSEN")


def _global_index(module: Module, node: ts.Node) -> ts.Node | None:
    """The ``blockIdx.x`` of ``blockIdx.x * blockDim.x + threadIdx.x`` under ``node``, or None."""
    for n in syntax.walk(node):
        if n.type != "binary_expression":
            continue
        op = n.child_by_field_name("operator")
        if op is None or syntax.text(module, op) != "+":
            continue
        left = _strip(n.child_by_field_name("left"))
        right = _strip(n.child_by_field_name("right"))
        if left is None or right is None:
            continue
        for product, thread in ((left, right), (right, left)):
            if not _field(module, thread, "threadIdx", "x") or product.type != "binary_expression":
                continue
            pop = product.child_by_field_name("operator")
            a = _strip(product.child_by_field_name("left"))
            b = _strip(product.child_by_field_name("right"))
            if pop is None or a is None or b is None or syntax.text(module, pop) != "*":
                continue
            for blk, dim in ((a, b), (b, a)):
                if _field(module, blk, "blockIdx", "x") and _field(module, dim, "blockDim", "x"):
                    return blk
    return None


def _affine_index(module: Module, fn: Function, stmt: ts.Node) -> ts.Node | None:
    """The ``blockIdx.x`` of ``stmt`` when :mod:`ktx.ir.affine` says it declares the global index.

    That covers a block size written as a macro or constant the launch passes
    (``blockIdx.x * BLOCK_SIZE + threadIdx.x``); ``blockIdx.x`` must appear once.
    """
    index = module.facts(fn).index.thread_index("x")
    if index is None or index.decl.id != stmt.id:
        return None
    found = [
        n
        for n in syntax.walk(stmt)
        if n.type == "field_expression" and "".join(syntax.text(module, n).split()) == "blockIdx.x"
    ]
    return found[0] if len(found) == 1 else None


def _strip(node: ts.Node | None) -> ts.Node | None:
    """Look through parentheses and casts."""
    while node is not None and node.type in ("parenthesized_expression", "cast_expression"):
        inner = node.child_by_field_name("value") if node.type == "cast_expression" else None
        if inner is None:
            named = [c for c in node.named_children if c.type != "comment"]
            inner = named[-1] if named else None
        node = inner
    return node


def _field(module: Module, node: ts.Node, base: str, field: str) -> bool:
    return node.type == "field_expression" and syntax.text(module, node).replace(" ", "") == f"{base}.{field}"


def _refusal(module: Module, body: ts.Node, stmt: ts.Node, index: ts.Node) -> str | None:
    early = runs_before(module, body, stmt)
    if early is not None:
        first = syntax.text(module, early).split("\n")[0].strip()
        return (
            f"`{first}` (line {line_of(early)}) runs before the index: a smaller grid would run it "
            "fewer times"
        )
    derived = derived_locals(module, body, stmt.start_byte, frozenset({"blockIdx.x", "gridDim.x"}))
    region = [n for n in body.named_children if n.start_byte >= stmt.start_byte]
    for n in region:
        for ident in syntax.identifiers(n):
            name = syntax.text(module, ident)
            if name in derived:
                return (
                    f"{name} (line {line_of(ident)}) is computed from {derived[name]}, which no longer "
                    "names the item's block"
                )
    for n in region:
        sync = next(syntax.calls(module, n, SYNC), None)
        if sync is not None:
            name = syntax.text(module, sync.child_by_field_name("function") or sync)
            return f"the kernel synchronises after its index ({name} at line {line_of(sync)})"
        for w in syntax.walk(n):
            if w.type == "field_expression" and w.start_byte != index.start_byte:
                text = syntax.text(module, w).replace(" ", "")
                if text in ("blockIdx.x", "gridDim.x"):
                    return f"{text} is used beyond the global index (line {line_of(w)})"
        if "__shared__" in syntax.text(module, n):
            return f"shared memory is declared after the index (line {line_of(n)})"
    return None
