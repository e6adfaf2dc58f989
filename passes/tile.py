"""``tile``: strip-mine a loop by a tile-size knob ``TILE_<loop>``.

``for (int i = a; i < n; i += s) body`` becomes an outer loop over tiles and an inner loop
over the ``TILE`` iterations of one tile::

    for (int ktx_tile_L0 = a; ktx_tile_L0 < n; ktx_tile_L0 += (s) * KTX_TILE_L0) {
    #pragma unroll
      for (int ktx_j_L0 = 0; ktx_j_L0 < KTX_TILE_L0; ++ktx_j_L0) {
        const int i = ktx_tile_L0 + ktx_j_L0 * (s);
        if (!(i < n)) break;
        body
      }
    }

Iterations run in the original order, so any loop of that form keeps its meaning; the inner
loop has a compile-time trip count and is fully unrolled (option ``unroll``), which puts
``TILE`` independent iterations in flight per thread (memory-level parallelism for the
block-strided loops of memory-bound kernels). ``TILE = 1`` is the original loop. The outer loop
keeps the original's label (``L0``) and any pragma it had; the inner one is ``L0_1``.

Refused: loops whose header is not ``init; i < n; i += s`` with a declared index, whose body
assigns the index or anything the bound or the step reads, or breaks out of the loop (a
``break`` would leave the tile, not the loop), and loops already fully unrolled.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import tree_sitter as ts
from ktx.ir import Loop, Module, syntax
from ktx.ir.facts import assign
from ktx.passes._common import indent_lines, line_of

from ktx.passbase import KnobSpec, Option, Pass, Phase, Rewriter, Site, Skip, Target


@dataclass(frozen=True)
class TileSite(Site):
    loop: Loop
    var: ts.Node
    """The index's identifier in the declaration."""
    type: str
    bound: ts.Node
    cond_var: ts.Node
    step: str
    """The stride ``s`` as text (``1`` for ``++i``)."""
    body: ts.Node


class Tile(Pass[TileSite]):
    name = "tile"
    phase = Phase.UNROLL
    summary = "strip-mine a loop by a tile-size knob; the inner loop over one tile is unrolled"
    description = __doc__ or ""
    knobs = (
        KnobSpec(
            "TILE_<loop>",
            "1 and the sizes option (default 2, 4, 8)",
            "1 (no tiling)",
            "iterations of the loop per tile",
        ),
    )
    options = (
        Option("sizes", "ints", (2, 4, 8), "tile sizes offered (1, the original, is always added)"),
        Option("loops", "strs", (), "loops to tile (L0|L2); default: the kernel's outermost loops"),
        Option("unroll", "bool", True, "fully unroll the loop within a tile (#pragma unroll)"),
    )
    after = ("expose", "split", "coarsen")

    def sites(self, target: Target) -> Iterator[TileSite | Skip]:
        module = target.module
        wanted = set(self.list_option("loops"))
        kernel_loops = {lp.id for lp in target.loops}
        labels = {target.label(lp) for lp in target.loops}
        for missing in sorted(wanted - labels):
            yield Skip(f"no loop {missing} in {target.kernel.name}", missing)
        for loop in target.loops:
            label = target.label(loop)
            if wanted and label not in wanted:
                continue
            if not wanted and loop.parent in kernel_loops:
                continue
            reason, site = _analyse(module, loop, label)
            if reason is not None:
                yield Skip(reason, label, loop.span)
            elif site is not None:
                yield site

    def rewrite(self, site: TileSite, rw: Rewriter) -> None:
        sizes = self.option("sizes")
        assert isinstance(sizes, tuple)
        values = sorted({1, *(int(v) for v in sizes if int(v) >= 1)})
        label = site.label
        name = f"TILE_{label}"
        macro = rw.knob(name, values, 1, f"iterations of loop {label} per tile (1: no tiling)")
        module = rw.target.module
        source = module.source
        tile_var, j = f"ktx_tile_{label}", f"ktx_j_{label}"
        var = syntax.text(module, site.var)
        step = site.step if site.step.replace("_", "").replace(".", "").isalnum() else f"({site.step})"
        loop = site.loop
        assert loop.step is not None
        rw.replace_bytes(site.var.start_byte, site.var.end_byte, tile_var)
        rw.replace_bytes(site.cond_var.start_byte, site.cond_var.end_byte, tile_var)
        rw.replace(loop.step, f"{tile_var} += {step} * {macro}")
        indent = syntax.indentation(source, loop.span.start)
        inner = indent + "  "
        bound = syntax.text(module, site.bound)
        pragma = "#pragma unroll\n" if self.option("unroll") else ""
        head = (
            f"{{\n{pragma}{inner}for (int {j} = 0; {j} < {macro}; ++{j}) {{\n"
            f"{inner}  const {site.type} {var} = {tile_var} + {j} * {step};\n"
            f"{inner}  if (!({var} < {bound})) break;\n{inner}  "
        )
        body = site.body
        rw.insert(body.start_byte, head)
        indent_lines(rw, body.start_byte, body.end_byte, "    ")
        rw.insert(body.end_byte, f"\n{inner}}}\n{indent}}}")


def _analyse(module: Module, loop: Loop, label: str) -> tuple[str | None, TileSite | None]:
    if loop.kind != "for" or loop.init is None or loop.cond is None or loop.step is None:
        return "not a for loop with init; cond; step", None
    if loop.pragma is not None and loop.pragma.is_unroll and loop.pragma.unroll_factor is None:
        return "already fully unrolled by a bare #pragma unroll: nothing to tile", None
    if loop.var is None or loop.var.startswith("ktx_"):
        return "no index variable, or one ktx made", None
    node = syntax.node_at(module, loop.span, "for_statement")
    if node is None:
        return "not a for statement", None
    init = node.child_by_field_name("initializer")
    if init is None or init.type != "declaration":
        return "the index is not declared in the loop header (for (int i = ...))", None
    decls = init.children_by_field_name("declarator")
    type_node = init.child_by_field_name("type")
    if len(decls) != 1 or decls[0].type != "init_declarator" or type_node is None:
        return "the header declares more than one variable", None
    var = decls[0].child_by_field_name("declarator")
    if var is None or var.type != "identifier":
        return "the index is not a plain variable", None
    cond = node.child_by_field_name("condition")
    left = cond.child_by_field_name("left") if cond is not None else None
    right = cond.child_by_field_name("right") if cond is not None else None
    op = cond.child_by_field_name("operator") if cond is not None else None
    if (
        cond is None
        or cond.type != "binary_expression"
        or left is None
        or right is None
        or op is None
        or syntax.text(module, op) != "<"
        or syntax.text(module, left) != loop.var
    ):
        return f"the condition is not {loop.var} < bound", None
    step = _stride(module, node.child_by_field_name("update"), loop.var)
    if step is None:
        return f"the step is not {loop.var} += s, ++{loop.var} or {loop.var}++", None
    body = node.child_by_field_name("body")
    if body is None:
        return "the loop has no body", None
    written = assign.assigned(module, body)
    if loop.var in written:
        return f"the body assigns the index {loop.var}", None
    header_names = syntax.names_in(module, right) | set(_names(step))
    touched = sorted(header_names & set(written))
    if touched:
        return f"the body assigns {', '.join(touched)}, which the bound or the step reads", None
    for n in syntax.walk(body):
        if n.type == "break_statement" and not syntax.in_loop_or_switch(n, body):
            return f"the body breaks out of the loop (line {line_of(n)})", None
    qualifiers = [
        syntax.text(module, c)
        for c in init.children
        if c.type in ("type_qualifier",) and c.start_byte < var.start_byte
    ]
    type_text = " ".join(q for q in qualifiers if q != "const")
    type_text = f"{type_text} {syntax.text(module, type_node)}".strip()
    return None, TileSite(label, loop.span, loop, var, type_text, right, left, step, body)


def _stride(module: Module, update: ts.Node | None, var: str) -> str | None:
    if update is None:
        return None
    if update.type == "update_expression":
        arg = update.child_by_field_name("argument")
        if arg is not None and syntax.text(module, arg) == var and "++" in syntax.text(module, update):
            return "1"
        return None
    if update.type == "assignment_expression":
        left = update.child_by_field_name("left")
        op = update.child_by_field_name("operator")
        right = update.child_by_field_name("right")
        if left is None or op is None or right is None or syntax.text(module, left) != var:
            return None
        if syntax.text(module, op) == "+=":
            return syntax.text(module, right).strip()
    return None


def _names(text: str) -> list[str]:
    import re

    return re.findall(r"[A-Za-z_]\w*", text)
