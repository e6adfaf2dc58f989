"""``split``: a row walked by one block is split over ``gridDim.y`` blocks, ``SPLIT`` of them.

For kernels that give each block one row (``row = blockIdx.x``) and walk it with block-strided
loops (``for (i = threadIdx.x; i < n; i += blockDim.x)``). At a handful of rows such a kernel
leaves most SMs idle while one block walks a long row (FlashInfer's silu_and_mul at 1-16 tokens
and d = 14336 takes 3.5-7 µs on an H200; split over 16-32 blocks, ~4 µs end to end).

Every row loop becomes interleaved over the y blocks of its row::

    for (i = threadIdx.x; ...; i += blockDim.x)
 -> for (i = blockIdx.y * blockDim.x + threadIdx.x; ...; i += blockDim.x * gridDim.y)

which keeps accesses coalesced and reads ``gridDim.y`` at run time, so the device code is the
same for every ``SPLIT`` (one compile serves all values) and ``SPLIT = 1`` is the original.
The launch gains a y dimension: ``dim3 grid(rows)`` becomes ``dim3 grid(rows, KTX_SPLIT)``
and the mapping's grid ``(rows,)`` becomes ``(rows, SPLIT)``.

Row loops are found by the index analysis (:mod:`ktx.ir.affine`) as well as by their spelling:
a stride written as a macro every launch passes as the block (``i += BLOCK_SIZE``) is
``blockDim.x``, and a row loop nested in a loop that walks rows over blocks
(``while (row < rows) { ...; row += gridDim.x; }``) is split like a top-level one.

Splitting is only legal when the blocks of one row need not cooperate. The pass refuses, and
says why, when a row loop accumulates a value across iterations (a partial sum would be split
over blocks; the norms feed theirs to a block-wide reduction), synchronises or shuffles inside
the loop, when the kernel synchronises or writes memory outside its row loops (that code would
run once per y block), or when it already uses ``blockIdx.y``/``gridDim.y``. All row loops of a
kernel are split together: one refused loop refuses the kernel.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import tree_sitter as ts
from ktx.ir import Loop, Module, syntax
from ktx.ir.affine import KernelIndex
from ktx.ir.facts import assign
from ktx.ir.launch import launch_dims, rebuilt_dim3
from ktx.passes._common import first_call_after, kernel_node, line_of, powers_of_two, twin_refusal

from ktx.passbase import KnobSpec, Option, Pass, Phase, Refuse, Rewriter, Site, Skip, Target

SYNC = syntax.BARRIERS | syntax.SHUFFLES


@dataclass(frozen=True)
class RowLoop:
    loop: Loop
    label: str
    thread: ts.Node
    """The ``threadIdx.x`` (or a local holding the thread's index) of the initialiser."""
    stride: ts.Node
    """The ``blockDim.x`` (or a local holding the block's size) of the step."""


@dataclass(frozen=True)
class SplitSite(Site):
    rows: tuple[RowLoop, ...]


class Split(Pass[SplitSite]):
    name = "split"
    phase = Phase.OWNERSHIP
    summary = "split a one-row-per-block kernel's row loops over gridDim.y blocks (knob SPLIT)"
    description = __doc__ or ""
    knobs = (
        KnobSpec(
            "SPLIT",
            "1, 2, 4, … max",
            "1 (one block per row, the original)",
            "blocks that share one row (the launch's grid y)",
        ),
    )
    options = (Option("max", "int", 32, "largest number of blocks per row offered"),)
    after = ("expose", "block-size")
    # vectorize reads the loop's index mapping before split rewrites it into a grid stride
    prefer_after = ("vectorize",)
    conflicts = ("coarsen",)

    def sites(self, target: Target) -> Iterator[SplitSite | Skip]:
        module = target.module
        fn = target.kernel
        body = kernel_node(target)
        twin = twin_refusal(module, fn, "splitting the rows over a grid y")
        if twin is not None:
            yield Skip(twin, fn.name, fn.span)
            return
        for name in ("blockIdx.y", "gridDim.y", "blockIdx.z", "gridDim.z"):
            if syntax.uses_builtin(module, body, name):
                yield Skip(f"the kernel already uses {name}", fn.name, fn.span)
                return
        if not syntax.uses_builtin(module, body, "blockIdx.x"):
            yield Skip("the kernel does not index rows by blockIdx.x", fn.name, fn.span)
            return
        mapping = target.mapping
        if mapping is not None and len(mapping.grid) > 1 and mapping.grid[1].strip() != "1":
            yield Skip(f"the launch already has a grid y ({mapping.grid[1]})", fn.name, fn.span)
            return
        rows: list[RowLoop] = []
        refusals: list[str] = []
        index = module.facts(fn, target.template_args).index
        for loop in target.loops:
            if not _outermost_row_level(index, target.loops, loop):
                continue
            label = target.label(loop)
            row = _row_loop(module, body, loop, label) or _affine_row_loop(index, loop, label)
            if row is None:
                continue
            reason = _refusal(module, body, loop, label)
            if reason is not None:
                refusals.append(label)
                yield Skip(reason, label, loop.span)
                continue
            rows.append(row)
        if refusals:
            yield Skip(
                f"not split: loop(s) {', '.join(refusals)} cannot be split, and the row loops of a "
                "kernel are split together",
                fn.name,
                fn.span,
            )
            return
        if not rows:
            t = index.thread_index()
            if t is not None and t.guard is not None:
                yield Skip(
                    f"one element per thread ({t.var} = blockIdx.x * blockDim.x + threadIdx.x at line "
                    f"{t.line}, guarded by {t.var} < {t.guard.bound_text} at line {t.guard.line}): no row "
                    "loop to split; the grid already covers the elements",
                    fn.name,
                    fn.span,
                )
                return
            yield Skip(
                "no row loop: none strides over the row by blockDim.x "
                "(for (i = threadIdx.x; i < n; i += blockDim.x))",
                fn.name,
                fn.span,
            )
            return
        outside = _outside_effects(module, body, [r.loop for r in rows])
        if outside is not None:
            yield Skip(outside, fn.name, fn.span)
            return
        if target.mapping is None and not target.launches:
            yield Skip(f"no launch of {fn.name} in this file and no launch mapping given", fn.name, fn.span)
            return
        yield SplitSite(fn.name, fn.span, tuple(rows))

    def rewrite(self, site: SplitSite, rw: Rewriter) -> None:
        values = powers_of_two(1, max(1, self.int_option("max")))
        macro = rw.knob("SPLIT", values, 1, "blocks per row (grid y); 1: one block walks the row")
        module = rw.target.module
        for row in site.rows:
            stride = syntax.text(module, row.stride)
            rw.insert(row.thread.start_byte, f"blockIdx.y * {stride} + ")
            rw.insert(row.stride.end_byte, " * gridDim.y")
        done: set[int] = set()
        for launch in rw.target.launches:
            dims = launch_dims(module, launch, "grid")
            key = dims.components[0].start_byte
            if key in done:
                continue
            done.add(key)
            if dims.whole_dim3:
                # ``dim3 grid`` passed whole: its y is set, not the dim3 wrapped (``dim3(grid, S)``).
                arg = dims.launch_arg
                name = syntax.text(module, arg)
                rw.replace_bytes(arg.start_byte, arg.end_byte, rebuilt_dim3(name, y=macro))
            elif len(dims.components) >= 2:
                y = dims.components[1]
                if syntax.text(module, y).strip() != "1":
                    raise Refuse(f"the launch at line {launch.span.line} already has a grid y")
                rw.replace_bytes(y.start_byte, y.end_byte, macro)
            elif dims.container is not None:
                last = dims.components[-1]
                rw.insert(last.end_byte, f", {macro}")
            else:
                arg = dims.launch_arg
                rw.replace_bytes(arg.start_byte, arg.end_byte, f"dim3({syntax.text(module, arg)}, {macro})")
        mapping = rw.mapping
        if mapping is not None:
            rw.set_mapping(mapping.with_grid((mapping.grid[0], "SPLIT", *mapping.grid[2:])))
        labels = ", ".join(r.label for r in site.rows)
        rw.note(f"row loops {labels} interleave over gridDim.y")


def _row_loop(module: Module, kernel: ts.Node, loop: Loop, label: str) -> RowLoop | None:
    """``loop`` as a block-strided row loop, or None if its header is not of that form.

    The thread index and the stride may be written directly (``threadIdx.x``, ``blockDim.x``)
    or through locals (``thread_id = threadIdx.y * blockDim.x + threadIdx.x``,
    ``num_threads = blockDim.x * blockDim.y``).
    """
    if loop.kind != "for" or loop.var is None or loop.init is None or loop.step is None:
        return None
    body = kernel.child_by_field_name("body")
    locals_ = {
        name: decl
        for name, decl in syntax.local_declarations(module, kernel, before=loop.span.start).items()
        if body is not None and decl.declaration.parent is not None and decl.declaration.parent.id == body.id
    }
    init = module.node(loop.init)
    if init.type == "declaration":
        declarators = init.children_by_field_name("declarator")
        value = declarators[0].child_by_field_name("value") if len(declarators) == 1 else None
        if value is None:
            return None
        init = value
    thread = next((n for n in syntax.walk(init) if _thread_like(module, n, locals_)), None)
    if thread is None or syntax.uses_builtin(module, init, "blockIdx"):
        return None
    parent = thread.parent
    if parent is not None and parent.type == "binary_expression":
        op = parent.child_by_field_name("operator")
        if op is None or syntax.text(module, op) != "+":
            return None
    step = syntax.node_at(module, loop.step, "assignment_expression")
    if step is None:
        return None
    op = step.child_by_field_name("operator")
    right = step.child_by_field_name("right")
    if op is None or right is None or syntax.text(module, op) != "+=":
        return None
    if not (_is(module, right, "blockDim", "x") or _alias_of(module, right, locals_, "blockDim", "gridDim")):
        return None
    return RowLoop(loop, label, thread, right)


def _outermost_row_level(index: KernelIndex, loops: tuple[Loop, ...], loop: Loop) -> bool:
    """Whether ``loop`` is not nested, or nested only in loops that walk rows over blocks.

    ``while (row < rows) { for (i = threadIdx.x; ...) ...; row += gridDim.x; }`` gives each block
    a row at a time: the ``for`` inside is a row loop like a top-level one.
    """
    by_id = {lp.id: lp for lp in loops}
    parent = by_id.get(loop.parent) if loop.parent is not None else None
    while parent is not None:
        shape = index.loop_shape(parent)
        if shape is None or shape.stride != "grid-blocks" or not shape.partitions:
            return False
        parent = by_id.get(parent.parent) if parent.parent is not None else None
    return True


def _affine_row_loop(index: KernelIndex, loop: Loop, label: str) -> RowLoop | None:
    """A block-strided row loop however its start and stride are spelled (``i += BLOCK_SIZE``
    where every launch passes ``BLOCK_SIZE`` as the block), read by :mod:`ktx.ir.affine`."""
    if loop.kind != "for":
        return None
    shape = index.loop_shape(loop)
    if shape is None or shape.stride != "block" or not shape.partitions or shape.step_node is None:
        return None
    step = shape.step_node
    op = step.child_by_field_name("operator")
    right = step.child_by_field_name("right")
    if step.type != "assignment_expression" or op is None or op.type != "+=" or right is None:
        return None
    init = shape.node.child_by_field_name("initializer")
    value: ts.Node | None = init
    if init is not None and init.type == "declaration":
        declarators = init.children_by_field_name("declarator")
        value = declarators[0].child_by_field_name("value") if len(declarators) == 1 else None
    elif init is not None and init.type == "assignment_expression":
        value = init.child_by_field_name("right")
    if value is None or value.type not in ("identifier", "field_expression", "binary_expression"):
        return None
    if value.type == "binary_expression":
        vop = value.child_by_field_name("operator")
        if vop is None or vop.type not in ("+", "-"):
            return None
    return RowLoop(loop, label, value, right)


def _thread_like(module: Module, node: ts.Node, locals_: dict[str, syntax.LocalDecl]) -> bool:
    return _is(module, node, "threadIdx", "x") or _alias_of(module, node, locals_, "threadIdx", "blockIdx")


def _alias_of(
    module: Module, node: ts.Node, locals_: dict[str, syntax.LocalDecl], uses: str, avoids: str
) -> bool:
    """Whether ``node`` names a local initialised from ``uses`` (and not from ``avoids``)."""
    if node.type != "identifier":
        return False
    local = locals_.get(syntax.text(module, node))
    if local is None or local.value is None:
        return False
    return syntax.uses_builtin(module, local.value, uses) and not syntax.uses_builtin(
        module, local.value, avoids
    )


def _is(module: Module, node: ts.Node, base: str, field: str) -> bool:
    if node.type != "field_expression":
        return False
    arg = node.child_by_field_name("argument")
    fld = node.child_by_field_name("field")
    return (
        arg is not None
        and fld is not None
        and syntax.text(module, arg) == base
        and syntax.text(module, fld) == field
    )


def _refusal(module: Module, kernel: ts.Node, loop: Loop, label: str) -> str | None:
    node = module.node(loop.span)
    while node.type != "for_statement" and node.parent is not None:
        node = node.parent
    sync = next(syntax.calls(module, node, SYNC), None)
    if sync is not None:
        name = syntax.text(module, sync.child_by_field_name("function") or sync)
        return f"loop {label} synchronises the block ({name} at line {line_of(sync)})"
    local = syntax.declared_names(module, node) | {loop.var or ""}
    carried = sorted(set(assign.assigned(module, node)) - local)
    if carried:
        after = first_call_after(module, kernel, SYNC, node.end_byte)
        names = ", ".join(carried)
        if after is not None:
            what = syntax.text(module, after.child_by_field_name("function") or after)
            return (
                f"loop {label} accumulates {names} across the row, and the kernel combines it "
                f"across the block after the loop ({what} at line {line_of(after)}): split over "
                "blocks, each block would reduce only part of the row"
            )
        return (
            f"loop {label} accumulates {names} across the row, read after the loop: split over "
            "blocks, each block would hold only part of it"
        )
    return None


def _outside_effects(module: Module, kernel: ts.Node, loops: list[Loop]) -> str | None:
    """Why code outside the row loops stops a split (it would run once per y block), or None."""
    spans = [lp.span for lp in loops]

    def outside(n: ts.Node) -> bool:
        return not any(s.start <= n.start_byte and n.end_byte <= s.end for s in spans)

    body = kernel.child_by_field_name("body")
    if body is None:
        return None
    sync = [c for c in syntax.calls(module, body, SYNC) if outside(c)]
    if sync:
        name = syntax.text(module, sync[0].child_by_field_name("function") or sync[0])
        return (
            f"the kernel synchronises the block outside its row loops ({name} at line "
            f"{line_of(sync[0])}): the row's blocks would need to cooperate"
        )
    writes = [w for w in syntax.memory_writes(module, body) if outside(w)]
    atomics = [
        c for c in syntax.calls(module, body) if outside(c) and "atomic" in syntax.text(module, c)[:12]
    ]
    if writes or atomics:
        first = (writes + atomics)[0]
        return (
            f"the kernel writes memory outside its row loops (line {line_of(first)}): that code "
            "would run once per block of the row"
        )
    return None
