"""``rows-per-block``: a one-row-per-block kernel processes ``ROWS`` rows per block.

Row kernels launch one block per row (``grid = tokens``, ``row = blockIdx.x``). With short rows
the blocks are small, and a small block leaves most of an SM idle or pays block scheduling per
handful of elements. The knob ``ROWS`` (1, the original, by default) stacks rows along
``threadIdx.y``: the block becomes ``(block, ROWS)``, the grid ``grid / ROWS``, and every
``blockIdx.x`` of the kernel becomes ``(blockIdx.x * KTX_ROWS + threadIdx.y)``. The launcher in
the file, the launch mapping and ``__launch_bounds__`` follow. A block or grid written with
trailing 1s (llama.cpp's ``dim3 block_dims(WARP_SIZE, 1, 1)``) is 1-D: its y of 1 becomes ROWS.

The kernel gets no new parameter, so it cannot skip rows past the end: the pass adds the
constraint ``grid % ROWS == 0`` (over the mapping's grid expression, e.g. ``tokens % ROWS == 0``)
and ``block * ROWS <= 1024``. It refuses kernels that already use a second block or grid
dimension, ``gridDim.x`` other than as the step of a loop over rows (``while (row < rows) {
...; row += gridDim.x; }``, read by :mod:`ktx.ir.affine`, whose step becomes
``gridDim.x * KTX_ROWS``), or shared memory (the rows of a block
would share it), or that hand the whole block to a collective (``reduce::block(tb, ...)`` with
``tb = cg::this_thread_block()``, ``tb.sync()``, a called device function with ``__shared__``
memory or a barrier: :mod:`ktx.ir.facts.collectives`), and kernels that synchronise the block
after an early ``return`` (rows that leave early would leave the others waiting). Kernels that
shuffle across lanes get the constraint ``block % 32 == 0`` for ``ROWS > 1``, so that no warp spans two rows.
"""

from __future__ import annotations

from collections.abc import Iterator

import tree_sitter as ts
from ktx.ir import syntax
from ktx.ir.facts.collectives import block_collective
from ktx.ir.launch import launch_dims, local_value, rebuilt_dim3
from ktx.passes._common import KernelSite, kernel_node, powers_of_two, twin_refusal, uses_shuffles

from ktx.passbase import KnobSpec, Option, Pass, Phase, Refuse, Rewriter, Skip, Target

ROW = "(blockIdx.x * KTX_ROWS + threadIdx.y)"


class RowsPerBlock(Pass[KernelSite]):
    name = "rows-per-block"
    phase = Phase.OWNERSHIP
    summary = "a one-row-per-block kernel processes ROWS rows per block; the grid is divided by ROWS"
    description = __doc__ or ""
    knobs = (
        KnobSpec(
            "ROWS",
            "1, 2, 4, … max",
            "1 (one row per block, the original)",
            "rows per block, stacked along threadIdx.y; grid / ROWS blocks",
        ),
    )
    options = (Option("max", "int", 16, "most rows per block offered"),)
    after = ("expose", "block-size", "coarsen", "split", "tile", "launch-bounds")

    def sites(self, target: Target) -> Iterator[KernelSite | Skip]:
        fn = target.kernel
        module = target.module
        body = kernel_node(target)
        why = twin_refusal(module, fn, "giving each block ROWS rows") or ""
        if not why and not syntax.uses_builtin(module, body, "blockIdx.x"):
            why = "the kernel never reads blockIdx.x: it is not a one-row-per-block kernel"
        other = _row_strides(target)[1]
        if not why and other is not None:
            why = (
                f"the kernel reads {syntax.text(module, other)} at line {other.start_point[0] + 1}, not as "
                "the step of a loop over rows (row += gridDim.x): its blocks are already more than one row"
            )
        for builtin in (
            "blockIdx.y",
            "blockIdx.z",
            "threadIdx.y",
            "threadIdx.z",
            "blockDim.y",
            "blockDim.z",
        ):
            if not why and syntax.uses_builtin(module, body, builtin):
                why = f"the kernel reads {builtin}: its blocks are already more than one row"
        shared = [a for a in module.shared_arrays if a.function == fn.name]
        if not why and shared:
            why = f"the kernel uses shared memory ({shared[0].name}), which the rows of a block would share"
        collective = block_collective(module, fn) if not why else None
        if collective is not None:
            why = (
                f"{collective}: a collective over the block would combine (or wait for) the rows "
                "stacked in it"
            )
        returns = any(n.type == "return_statement" for n in syntax.walk(body))
        if not why and returns and any(True for _ in syntax.calls(module, body, syntax.BARRIERS)):
            why = "the kernel may return early and also synchronises the block"
        if not why and target.mapping is None:
            why = "no launch mapping: the grid and block cannot be changed in step"
        if not why and target.mapping is not None:
            m = target.mapping.resolved()
            if len(_trimmed(m.grid)) > 1 or len(_trimmed(m.block)) > 1:
                why = "the launch already has a second grid or block dimension"
        if why:
            yield Skip(why, fn.name, fn.span)
            return
        yield KernelSite(fn.name, fn.span)

    def rewrite(self, site: KernelSite, rw: Rewriter) -> None:
        target = rw.target
        module = target.module
        body = kernel_node(target)
        mapping = rw.mapping
        assert mapping is not None
        values = powers_of_two(1, max(1, self.int_option("max")))
        macro = rw.knob(
            "ROWS", values, 1, "rows per block, stacked along threadIdx.y (1: one row, as written)"
        )
        resolved = mapping.resolved()
        grid0, block0 = resolved.grid[0], resolved.block[0]
        rw.constraint(f"({grid0}) % ROWS == 0")
        rw.constraint(f"({block0}) * ROWS <= 1024")
        if uses_shuffles(module, body):
            rw.constraint(f"ROWS == 1 or ({block0}) % 32 == 0")
            rw.note("shuffles: blocks of whole warps when ROWS > 1")
        for n in syntax.walk(module.node(target.kernel.body)):
            if n.type == "field_expression" and syntax.text(module, n).replace(" ", "") == "blockIdx.x":
                rw.replace_bytes(n.start_byte, n.end_byte, ROW)
        for n in _row_strides(target)[0]:
            # ``row += gridDim.x``: the blocks now hold ROWS rows each, so rows step by gridDim.x * ROWS.
            rw.replace_bytes(n.start_byte, n.end_byte, f"(gridDim.x * {macro})")
            rw.note(f"the row loop's step gridDim.x (line {n.start_point[0] + 1}) becomes gridDim.x * ROWS")
        self._launchers(rw, macro)
        self._launch_bounds(rw, macro)
        grid_rest = _trimmed(mapping.grid)[1:]  # empty: trailing 1s dropped, checked in sites()
        new = mapping.with_grid((f"({mapping.grid[0]}) // ROWS", *grid_rest))
        new = new.with_block((mapping.block[0], "ROWS"))
        rw.set_mapping(new)
        del site

    def _launchers(self, rw: Rewriter, macro: str) -> None:
        module = rw.target.module
        done: set[int] = set()
        for site in rw.target.launches:
            grid = launch_dims(module, site, "grid")
            block = launch_dims(module, site, "block")
            # ``dim3 block(WARP_SIZE, 1, 1)`` (llama.cpp writes every block so) is a 1-D block:
            # its y of 1 becomes ROWS, and the grid's trailing 1s stay
            grid_y = [syntax.text(module, c) for c in grid.components[1:]]
            block_y = [syntax.text(module, c) for c in block.components[1:]]
            if any(t.strip() != "1" for t in grid_y + block_y):
                raise Refuse(f"the launch at line {site.span.line} has a second grid or block dimension")
            comp = grid.components[0]
            local = local_value(module, site, comp)
            node: ts.Node = local.value if local is not None and local.value is not None else comp
            if node.start_byte not in done:
                done.add(node.start_byte)
                text = syntax.text(module, node)
                # A ``dim3`` passed whole is divided in its x: ``(grid) / ROWS`` does not compile.
                divided = (
                    rebuilt_dim3(text, x=f"({text}.x) / {macro}")
                    if grid.whole_dim3
                    else f"({text}) / {macro}"
                )
                rw.replace_bytes(node.start_byte, node.end_byte, divided)
            if block.whole_dim3:
                arg = block.launch_arg
                if arg.start_byte not in done:
                    done.add(arg.start_byte)
                    rw.replace_bytes(
                        arg.start_byte, arg.end_byte, rebuilt_dim3(syntax.text(module, arg), y=macro)
                    )
            elif block_y:
                y = block.components[1]
                if y.start_byte not in done:
                    done.add(y.start_byte)
                    rw.replace_bytes(y.start_byte, y.end_byte, macro)
            elif block.container is not None:
                close = block.container.end_byte - 1
                if close in done:
                    continue
                done.add(close)
                rw.insert(close, f", {macro}")
            else:
                arg = block.launch_arg
                if arg.start_byte in done:
                    continue
                done.add(arg.start_byte)
                rw.replace_bytes(arg.start_byte, arg.end_byte, f"dim3({syntax.text(module, arg)}, {macro})")

    def _launch_bounds(self, rw: Rewriter, macro: str) -> None:
        bounds = rw.target.kernel.launch_bounds
        if bounds is None or not bounds.args:
            return
        old = rw.target.module.text(bounds.args[0])
        rw.replace(bounds.args[0], f"({old}) * {macro}")


def _trimmed(dims: tuple[str, ...]) -> tuple[str, ...]:
    """``dims`` without trailing components of 1: ``(WARP_SIZE, 1, 1)`` is the 1-D ``(WARP_SIZE,)``."""
    out = list(dims)
    while len(out) > 1 and out[-1].strip() == "1":
        out.pop()
    return tuple(out)


def _row_strides(target: Target) -> tuple[list[ts.Node], ts.Node | None]:
    """The ``gridDim`` nodes that step loops over rows, and the first one that does not (or None).

    ``for (row = blockIdx.x; row < rows; row += gridDim.x)`` and its ``while`` form (read by
    :mod:`ktx.ir.affine`) give each block a row at a time; with ROWS rows a block, the row
    starts at ``blockIdx.x * ROWS + threadIdx.y`` and steps by ``gridDim.x * ROWS``.
    """
    module = target.module
    body = module.node(target.kernel.body)
    uses = [
        n
        for n in syntax.walk(body)
        if n.type == "field_expression"
        and (n.child_by_field_name("argument") is not None)
        and syntax.text(module, n.child_by_field_name("argument") or n) == "gridDim"
    ]
    if not uses:
        return [], None
    index = module.facts(target.kernel, target.template_args).index
    steps: list[ts.Node] = []
    for loop in target.loops:
        shape = index.loop_shape(loop)
        if shape is None or shape.stride != "grid-blocks" or not shape.partitions or shape.step_node is None:
            continue
        right = shape.step_node.child_by_field_name("right")
        if right is not None and right.type == "field_expression":
            steps.append(right)
    ids = {n.id for n in steps}
    other = next((n for n in uses if n.id not in ids), None)
    return [n for n in uses if n.id in ids], other
