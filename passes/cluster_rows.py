"""``cluster-rows``: a row reduced by one block is split over a thread-block cluster (sm_90).

Row reductions (RMSNorm, LayerNorm, per-row quantisation) launch one block per row: at a few
rows most SMs are idle while each block waits on DRAM (fused_add_rmsnorm at 1 token and
d = 4096 takes 2.7 µs against an empty kernel's 0.6 µs on an H200). ``split`` cannot help: the
blocks of a row would each reduce only part of it. A cluster can: its blocks read each other's
shared memory. With ``CLUSTER`` = C (1, the original, by default) each row gets C blocks that
form one cluster along y (``__attribute__((cluster_dims(1, C, 1)))``, the attribute that
``__cluster_dims__`` expands to, so an ordinary launch works unchanged)::

    grid (rows,)  ->  (rows, C)            blockIdx.x is still the row; blockIdx.y is the rank
    for (i = t; i < n; i += s)  ->  for (i = blockIdx.y * s + t; i < n; i += s * C)

Each block reduces its interleaved slice of the row as before (interleaving keeps every index a
whole pack of a packed loop and every warp's accesses contiguous, whatever ``n``), then, after
the block reduction's last ``__syncthreads()``, the blocks exchange their totals::

    cluster barrier (arrive + wait)            every block's total is in its shared memory
    total = sum over ranks r of *__cluster_map_shared_rank(&smem[0], r)
    cluster barrier arrive                     done reading the others' shared memory

and the statement that read the block total (``rsqrtf(smem[0] / d + eps)``) reads ``total``.
Where the reduction ends in a ``__syncthreads();`` of its own, the cluster barrier takes its place
(arrive has release and wait acquire semantics, and every thread of every block takes part, so it
orders the block too): one block barrier fewer on a latency-bound row's path;
the matching wait sits at the end of the kernel, so that no block leaves while another may
still read its shared memory. These are the intrinsics that ``cooperative_groups``'
``cluster.sync()`` and ``cluster.map_shared_rank()`` call; writing them directly needs no
header, under nvcc or NVRTC. The combine is the accumulator's own: ``+=`` adds,
``acc = fmaxf(acc, x)`` takes the max.

Every change sits in an ``#if KTX_CLUSTER > 1`` group whose ``#else`` branch holds the
original lines, and ``cluster_dims(1, 1, 1)`` is dropped when instantiated, so ``CLUSTER = 1``
is the original byte for byte.

Preconditions (each refusal names the construct and its line): one block per row
(``blockIdx.x`` read, no ``blockIdx.y/z``, no ``gridDim``: rows are not walked grid-stride);
block-strided row loops (``for (i = thread; i < n; i += stride)``) of which at least one
accumulates a value; after them a block-wide reduction whose last statement synchronises the
block (a ``__syncthreads()``, or a tree reduction's halving loop) and a statement that reads the
block total from one element of a ``__shared__`` array; no
``return`` (every block of a cluster must reach the cluster barriers) and no atomics; a
one-dimensional launch; a target of sm_90 or later (option ``arch``).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import tree_sitter as ts
from ktx.ir import Module, syntax
from ktx.ir.facts import assign
from ktx.ir.facts.assign import assigned
from ktx.ir.facts.reductions import update_of
from ktx.ir.launch import launch_dims
from ktx.passes._common import kernel_node, line_of, powers_of_two
from ktx.passes._variants import Variants, insert_after_line, insert_before_line, line_bounds, wrap_lines
from ktx.passes.split import RowLoop, _affine_row_loop, _row_loop

from ktx.passbase import KnobSpec, Option, Pass, Phase, Refuse, Rewriter, Site, Skip, Target

COND = "KTX_CLUSTER > 1"
RANK = "blockIdx.y"
TOTAL = "ktx_cluster_total"
#: Combines written ``acc = f(acc, x)`` that the exchange may apply in any order.
COMBINES = ("fmaxf", "fminf", "max", "min", "fmax", "fmin")


@dataclass(frozen=True)
class Reduction:
    """What a block reduction leaves behind: the barrier after which the block total is in
    shared memory, the element that holds it, and the statements that read it."""

    barrier: ts.Node
    element: str
    element_type: str
    readers: tuple[ts.Node, ...]
    combine: str
    """``+`` or a function name such as ``fmaxf``."""


@dataclass(frozen=True)
class ClusterSite(Site):
    rows: tuple[RowLoop, ...]
    reduction: Reduction


class ClusterRows(Pass[ClusterSite]):
    name = "cluster-rows"
    phase = Phase.OWNERSHIP
    summary = "split a one-block-per-row reduction over a thread-block cluster (knob CLUSTER, sm_90)"
    description = __doc__ or ""
    knobs = (
        KnobSpec(
            "CLUSTER",
            "1, 2, 4, … max",
            "1 (one block per row, the original)",
            "blocks per row, one cluster; partial results exchanged through distributed shared memory",
        ),
    )
    options = (
        Option(
            "max",
            "int",
            8,
            "largest cluster offered (8 is the portable limit; 16 needs the "
            "launcher to allow non-portable cluster sizes)",
        ),
        Option("arch", "int", 90, "target compute capability (digits); below 90 there are no clusters"),
    )
    after = (
        "expose",
        "block-size",
        "unroll",
        "tile",
        "vectorize",
        "launch-bounds",
        "cache-hints",
        "fast-math",
    )
    conflicts = ("split", "coarsen", "rows-per-block")

    def sites(self, target: Target) -> Iterator[ClusterSite | Skip]:
        fn = target.kernel
        why = self._kernel_refusal(target)
        if why is not None:
            yield Skip(why, fn.name, fn.span)
            return
        module = target.module
        kernel = kernel_node(target)
        body = kernel.child_by_field_name("body")
        assert body is not None
        rows: list[RowLoop] = []
        index = module.facts(fn, target.template_args).index
        for loop in target.loops:
            if loop.parent is not None and any(lp.id == loop.parent for lp in target.loops):
                continue
            # However the stride is spelled (``col += block_size``, a template parameter every
            # launch passes as the block): the facts read it as blockDim.x, as split does.
            label = target.label(loop)
            row = _row_loop(module, kernel, loop, label) or _affine_row_loop(index, loop, label)
            if row is not None:
                rows.append(row)
        if not rows:
            yield Skip(
                "no row loop: none strides over the row by the block's size "
                "(for (i = threadIdx.x; i < n; i += blockDim.x))",
                fn.name,
                fn.span,
            )
            return
        for row in rows:
            stmt = _top_statement(module.node(row.loop.span), body)
            if stmt is None:
                yield Skip(
                    f"row loop {row.label} is not a statement of the kernel's body", row.label, row.loop.span
                )
                return
        try:
            reduction = _block_reduction(module, body, rows)
        except Refuse as refusal:
            yield Skip(refusal.reason, fn.name, fn.span)
            return
        ret = next((n for n in syntax.walk(kernel) if n.type == "return_statement"), None)
        if ret is not None:
            yield Skip(
                f"the kernel returns early (line {line_of(ret)}): every block of a cluster must reach "
                "the cluster barrier",
                fn.name,
                fn.span,
            )
            return
        atomic = next(
            (c for c in syntax.calls(module, kernel) if "atomic" in syntax.text(module, c)[:12]), None
        )
        if atomic is not None:
            yield Skip(
                f"the kernel uses atomics (line {line_of(atomic)}): the blocks of a row would repeat them",
                fn.name,
                fn.span,
            )
            return
        yield ClusterSite(fn.name, fn.span, tuple(rows), reduction)

    def _kernel_refusal(self, target: Target) -> str | None:
        module = target.module
        kernel = kernel_node(target)
        if self.int_option("arch") < 90:
            return f"thread-block clusters need sm_90 or later; the target is sm_{self.int_option('arch')}"
        if not syntax.uses_builtin(module, kernel, "blockIdx.x"):
            return "the kernel never reads blockIdx.x: it is not a one-block-per-row kernel"
        for name in ("blockIdx.y", "blockIdx.z", "gridDim"):
            if syntax.uses_builtin(module, kernel, name):
                node = next(n for n in syntax.walk(kernel) if _is_builtin(module, n, name))
                what = (
                    "rows are walked grid-stride"
                    if name == "gridDim"
                    else "the grid is already more than rows"
                )
                return f"the kernel reads {syntax.text(module, node)} (line {line_of(node)}): {what}"
        mapping = target.mapping
        if mapping is None:
            return "no launch mapping: the grid cannot gain the cluster's dimension"
        resolved = mapping.resolved()
        if len(resolved.grid) > 1 and any(g.strip() != "1" for g in resolved.grid[1:]):
            return f"the launch already has a grid y ({resolved.grid[1]})"
        return None

    def rewrite(self, site: ClusterSite, rw: Rewriter) -> None:
        target = rw.target
        module = target.module
        kernel = kernel_node(target)
        body = kernel.child_by_field_name("body")
        assert body is not None
        values = powers_of_two(1, max(1, self.int_option("max")))
        macro = rw.knob(
            "CLUSTER", values, 1, "blocks per row, one thread-block cluster (1: one block, as written)"
        )
        variants = Variants(rw, COND)
        self._interleave(rw, variants, kernel, site.rows, macro)
        red = site.reduction
        for reader in red.readers:
            for node in syntax.walk(reader):
                if node.type == "subscript_expression" and _compact(module, node) == red.element:
                    variants.change(reader, node.start_byte, node.end_byte, TOTAL)
        self._launchers(rw, variants, macro)
        variants.commit()
        self._exchange(rw, red, macro)
        close = body.end_byte - 1
        first, _ = line_bounds(module.source, close, close)
        if module.source[first:close].strip():
            raise Refuse("the kernel's closing brace does not start its line")
        indent = syntax.indentation(module.source, red.barrier.start_byte)
        insert_before_line(
            rw,
            close,
            [
                f"{indent}__cluster_barrier_wait();  // no block leaves while another may read its shared "
                "memory"
            ],
            COND,
        )
        name = _name_node(kernel)
        rw.insert(name.start_byte, f"__attribute__((cluster_dims(1, {macro}, 1))) ")
        mapping = rw.mapping
        assert mapping is not None
        rw.set_mapping(mapping.with_grid((mapping.grid[0], "CLUSTER")))
        labels = ", ".join(r.label for r in site.rows)
        rw.note(f"row loops {labels} interleave over the cluster; block totals meet through {red.element}")

    # -- pieces --------------------------------------------------------------------------

    def _interleave(
        self, rw: Rewriter, variants: Variants, kernel: ts.Node, rows: tuple[RowLoop, ...], macro: str
    ) -> None:
        """``i = t`` -> ``i = blockIdx.y * s + t`` and ``i += s`` -> ``i += s * C`` in every row loop.

        When the thread index or the stride is a local used only in row-loop headers, its
        declaration changes (one variant instead of one per loop); otherwise the loop does.
        """
        module = rw.target.module
        body = kernel.child_by_field_name("body")
        assert body is not None
        locals_ = syntax.local_declarations(module, body)
        threads = {r.thread.start_byte for r in rows}
        strides = {r.stride.start_byte for r in rows}

        def alias(node: ts.Node, roles: set[int]) -> syntax.LocalDecl | None:
            if node.type != "identifier":
                return None
            local = locals_.get(syntax.text(module, node))
            if local is None or local.value is None or _top_statement(local.declaration, body) is None:
                return None
            name = local.name
            for ident in syntax.identifiers(body):
                if (
                    syntax.text(module, ident) != name
                    or local.declaration.start_byte <= ident.start_byte < local.declaration.end_byte
                ):
                    continue
                if ident.start_byte not in roles:
                    return None
            if assign.reassigned_after(module, body, name, local.declaration.end_byte):
                return None
            return local

        for row in rows:
            loop_stmt = _top_statement(module.node(row.loop.span), body)
            assert loop_stmt is not None
            stride_local = alias(row.stride, strides)
            stride_value = (
                stride_local.value
                if stride_local is not None and stride_local.value is not None
                else row.stride
            )
            if stride_local is None and row.stride.type == "identifier":
                local = locals_.get(syntax.text(module, row.stride))
                if local is not None and local.value is not None:
                    stride_value = local.value
            stride_text = syntax.text(module, stride_value)
            if stride_value.type not in ("identifier", "field_expression", "number_literal"):
                stride_text = f"({stride_text})"
            thread_local = alias(row.thread, threads)
            if thread_local is not None and _builtins_only(module, stride_value):
                decl = _top_statement(thread_local.declaration, body)
                assert decl is not None and thread_local.value is not None
                v = thread_local.value
                variants.change(decl, v.start_byte, v.start_byte, f"{RANK} * {stride_text} + ")
            else:
                t = row.thread
                variants.change(loop_stmt, t.start_byte, t.start_byte, f"{RANK} * {stride_text} + ")
            if stride_local is not None:
                decl = _top_statement(stride_local.declaration, body)
                assert decl is not None and stride_local.value is not None
                v = stride_local.value
                variants.change(decl, v.start_byte, v.end_byte, f"({syntax.text(module, v)}) * {macro}")
            else:
                s = row.stride
                variants.change(loop_stmt, s.end_byte, s.end_byte, f" * {macro}")

    def _launchers(self, rw: Rewriter, variants: Variants, macro: str) -> None:
        module = rw.target.module
        done: set[int] = set()
        for launch in rw.target.launches:
            dims = launch_dims(module, launch, "grid")
            key = dims.components[0].start_byte
            if key in done:
                continue
            done.add(key)
            if len(dims.components) >= 2:
                y = dims.components[1]
                if syntax.text(module, y).strip() != "1":
                    raise Refuse(f"the launch at line {launch.span.line} already has a grid y")
                variants.change(syntax.statement_of(y), y.start_byte, y.end_byte, macro)
            elif dims.container is not None:
                last = dims.components[-1]
                variants.change(syntax.statement_of(last), last.end_byte, last.end_byte, f", {macro}")
            else:
                arg = dims.launch_arg
                new = f"dim3({syntax.text(module, arg)}, {macro})"
                variants.change(syntax.statement_of(arg), arg.start_byte, arg.end_byte, new)

    def _exchange(self, rw: Rewriter, red: Reduction, macro: str) -> None:
        indent = syntax.indentation(rw.target.module.source, red.barrier.start_byte)
        del macro
        remote = f"*static_cast<const {red.element_type}*>(__cluster_map_shared_rank(&{red.element}, {{r}}))"
        combine = (
            f"{TOTAL} += {remote.format(r='ktx_rank')};"
            if red.combine == "+"
            else f"{TOTAL} = {red.combine}({TOTAL}, {remote.format(r='ktx_rank')});"
        )
        lines = [
            f"{indent}// cluster-rows: the blocks of this row's cluster combine their totals through "
            "distributed shared memory",
            f"{indent}__cluster_barrier_arrive();  // cluster.sync(): every block's total is in place",
            f"{indent}__cluster_barrier_wait();",
            f"{indent}{red.element_type} {TOTAL} = {remote.format(r='0')};",
            "#pragma unroll",
            f"{indent}for (unsigned ktx_rank = 1; ktx_rank < KTX_CLUSTER; ++ktx_rank) {{",
            f"{indent}  {combine}",
            f"{indent}}}",
            f"{indent}__cluster_barrier_arrive();  // done reading the others' shared memory (waited "
            "for at the end)",
        ]
        source = rw.target.module.source
        first, last = line_bounds(source, red.barrier.start_byte, red.barrier.end_byte)
        alone = source[first:last].strip() == syntax.text(rw.target.module, red.barrier).encode()
        if alone and _compact(rw.target.module, red.barrier) == "__syncthreads();":
            # The block's own last barrier goes: the cluster barrier right after it (arrive has
            # release, wait acquire semantics, and every thread of every block of the cluster takes
            # part) orders this block's threads as well. One bar.sync fewer on the reduction's
            # path of a latency-bound row (the hand cluster kernel, benchmarks/norms_hand/
            # cluster.cu, has none); where the reduction ends in a halving loop it stays.
            lines.insert(1, f"{indent}// (the cluster barrier orders this block too: no __syncthreads)")
            wrap_lines(rw, first, last, "\n".join(lines), COND)
            return
        insert_after_line(rw, red.barrier.end_byte, lines, COND)


# -- analysis --------------------------------------------------------------------------------
# Which row loops accumulate and how their updates combine come from the one reduction
# recogniser (ktx.ir.facts.reductions); this pass adds where the block total lands and who
# reads it (_block_reduction).


def _block_reduction(module: Module, body: ts.Node, rows: list[RowLoop]) -> Reduction:
    """The block reduction that follows the accumulating row loops, or Refuse saying what is missing."""
    accumulating: list[tuple[RowLoop, ts.Node, list[str]]] = []
    for row in rows:
        stmt = _top_statement(module.node(row.loop.span), body)
        assert stmt is not None
        local = syntax.declared_names(module, stmt) | {row.loop.var or ""}
        carried = sorted(set(assigned(module, stmt)) - local)
        if carried:
            accumulating.append((row, stmt, carried))
    if not accumulating:
        raise Refuse("no row loop accumulates a value across the row: there is no row reduction to split")
    names = sorted({n for _, _, c in accumulating for n in c})
    combine = _combine(module, [(s, c) for _, s, c in accumulating])
    last_acc = max(s.end_byte for _, s, _ in accumulating)
    later_rows = [
        s.start_byte
        for r in rows
        if (s := _top_statement(module.node(r.loop.span), body)) is not None and s.start_byte > last_acc
    ]
    stop = min(later_rows) if later_rows else body.end_byte
    between = [c for c in body.named_children if last_acc <= c.start_byte and c.end_byte <= stop]
    barriers = [s for s in between if _synchronises(module, s)]
    if not barriers:
        raise Refuse(
            f"no __syncthreads() between the row loop that accumulates {', '.join(names)} (line "
            f"{line_of(accumulating[-1][1])}) and the rest of the row: the reduction is not block-wide"
        )
    barrier = barriers[-1]
    shared = {a.name: a.type for a in module.shared_arrays}
    after = [s for s in between if s.start_byte > barrier.end_byte]
    if later_rows:
        after += [c for c in body.named_children if c.start_byte >= stop]
    reads: dict[str, list[ts.Node]] = {}
    for stmt in after:
        for node in syntax.walk(stmt):
            if node.type != "subscript_expression":
                continue
            arr = node.child_by_field_name("argument")
            if arr is None or syntax.text(module, arr) not in shared:
                continue
            index = node.child_by_field_name("indices") or node.child_by_field_name("index")
            if index is None or any(True for _ in syntax.identifiers(index)) or _written(node):
                continue
            reads.setdefault(_compact(module, node), []).append(stmt)
    if len(reads) != 1:
        found = ", ".join(sorted(reads)) or "none"
        raise Refuse(
            f"after the reduction's last __syncthreads() (line {line_of(barrier)}) the kernel should "
            f"read the block total from one shared element; it reads {found}"
        )
    element, readers = next(iter(reads.items()))
    arr_name = element.split("[", 1)[0]
    for stmt in body.named_children:
        if stmt.start_byte > barrier.end_byte:
            for w in syntax.memory_writes(module, stmt):
                left = w.child_by_field_name("left") or w.child_by_field_name("argument")
                if left is not None and _compact(module, left).split("[", 1)[0] == arr_name:
                    raise Refuse(
                        f"the kernel writes {arr_name} again after the reduction (line {line_of(w)}): "
                        "other blocks of the cluster may still read it"
                    )
    element_type = shared[arr_name].replace("extern", "").replace("__shared__", "").strip()
    element_type = " ".join(w for w in element_type.split() if not w.startswith("__align__"))
    unique = tuple({s.id: s for s in readers}.values())
    return Reduction(barrier, element, element_type or "float", unique, combine)


def _combine(module: Module, loops: list[tuple[ts.Node, list[str]]]) -> str:
    """How the accumulators combine: ``+`` for a sum (``acc += x``), the function for
    ``acc = f(acc, x)``; each write must be an update that :mod:`ktx.ir.facts.reductions` knows."""
    kinds: set[str] = set()
    for stmt, names in loops:
        for name, writes in assigned(module, stmt).items():
            if name not in names:
                continue
            for w in writes:
                update = update_of(module, w, name)
                if update is not None and update.op == "sum" and not update.negated:
                    kinds.add("+")
                    continue
                if update is not None and update.op in ("max", "min") and update.call in COMBINES:
                    kinds.add(update.call)
                    continue
                raise Refuse(
                    f"line {line_of(w)}: {syntax.text(module, w)} is neither acc += x nor "
                    f"acc = {'/'.join(COMBINES[:2])}(acc, x): the partial results cannot be combined"
                )
    if len(kinds) != 1:
        raise Refuse(f"the accumulators combine in several ways ({', '.join(sorted(kinds))})")
    return kinds.pop()


def _synchronises(module: Module, stmt: ts.Node) -> bool:
    """Whether ``stmt`` (a statement of the kernel's body) calls ``__syncthreads``: a barrier, or a
    tree reduction's halving loop, after which the block total sits in shared memory."""
    return any(True for _ in syntax.calls(module, stmt, ("__syncthreads",)))


def _written(node: ts.Node) -> bool:
    parent = node.parent
    return (
        parent is not None
        and parent.type in ("assignment_expression", "update_expression")
        and (parent.child_by_field_name("left") or parent.child_by_field_name("argument")) == node
    )


def _top_statement(node: ts.Node, body: ts.Node) -> ts.Node | None:
    """The direct child of ``body`` that holds ``node`` (None when it is not inside ``body``)."""
    current: ts.Node | None = node
    while current is not None and (current.parent is None or current.parent.id != body.id):
        current = current.parent
    return current


def _compact(module: Module, node: ts.Node) -> str:
    return "".join(syntax.text(module, node).split())


def _builtins_only(module: Module, node: ts.Node) -> bool:
    """Whether ``node`` is made of CUDA builtins and literals (it may move to another statement)."""
    return all(syntax.text(module, i) in ("blockDim", "threadIdx") for i in syntax.identifiers(node))


def _is_builtin(module: Module, node: ts.Node, name: str) -> bool:
    base, _, fld = name.partition(".")
    if node.type != "field_expression":
        return False
    arg = node.child_by_field_name("argument")
    f = node.child_by_field_name("field")
    return (
        arg is not None
        and f is not None
        and syntax.text(module, arg) == base
        and (not fld or syntax.text(module, f) == fld)
    )


def _name_node(kernel: ts.Node) -> ts.Node:
    """The identifier that names the kernel in its declarator."""
    decl = kernel.child_by_field_name("declarator")
    while decl is not None and decl.type != "function_declarator":
        decl = decl.child_by_field_name("declarator")
    name = decl.child_by_field_name("declarator") if decl is not None else None
    if name is None:
        raise Refuse("the kernel's declarator has no name to attach the cluster attribute to")
    return name
