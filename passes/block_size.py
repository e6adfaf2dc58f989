"""``block-size``: the threads per block become knobs (``BLOCK_X``, and ``BLOCK_Y`` for 2-D blocks).

What changes, in step:

* the launcher in the file: the expression that sets each block dimension. When it is a local
  (``dim3 block(32, num_warps)``), the local's initialiser is rewritten, so every other use
  of it (the shared-memory size computed from ``num_warps``) follows;
* the launch mapping, the same way (the var ``warps`` of a spec becomes the knob);
* ``__launch_bounds__``: the kernel gets (or updates) its maximum threads per block.

Every knob defaults to 0, which means "as the original does it", whether the original size is a
constant (``NUM_THREADS = 128``) or depends on the shape (``min(d / 8, 256)``): the template
writes ``KTX_PICK(KTX_BLOCK_X, (original))`` and ``__launch_bounds__(KTX_BLOCK_X)`` (nvcc reads
a bound of 0 as no bound), so the default config is the original kernel, without a bound it
did not have. A value N launches N threads and tells ptxas so.

Domains: 1-D blocks take powers of two from 32 to 1024 (warp multiples within the hardware
limit). In a 2-D block whose x is 32 and whose kernel shuffles across lanes (the norms'
``dim3(32, num_warps)``), x stays 32 and y takes 1 to 32 warps. With both dimensions as knobs,
constraints keep their product a multiple of 32 and at most 1024.

A block size written as a name that every launch of the kernel passes as its block and the
kernel reads (``#define BLOCK_SIZE 128``, ``constexpr int kThreads = 256``: the index analysis
of :mod:`ktx.ir.affine` reads such a name as ``blockDim.x``) is the knob itself: its value
becomes ``KTX_PICK(KTX_BLOCK_X, (128))``, so the grid, the block, the kernel's strides and the
shared arrays it sizes all follow.

A block written in braces (``<<<g, {x, y, 1}>>>``) is a 2-D block like ``dim3(x, y, 1)``. In a 2-D
block, x stays as written when the kernel assumes it: it is 32 and the kernel (or a function
it calls) shuffles or writes the warp size 32, or the kernel never reads ``blockDim.x`` (16
lanes of ``float4`` covering a row of 64), or it reads a name that equals x only as written
(``col += WARP_SIZE`` under ``dim3(WARP_SIZE, nwarps)``: :attr:`LaunchFacts.block_x_equal`);
then y alone is the knob, with x * y within the limit. A literal block whose grid rounds up a
division by the same literal (``(n + 255) / 256``, ``(n - 1) / 256 + 1``) rewrites the grid's
copies too (255 as the knob minus one), in the source and in the launch mapping.

A template parameter every launch passes as its block too (``k<BS><<<g, BS>>>``, or through a
``dim3`` local in scope at the launch) is ``blockDim.x`` for the analysis, so its loops
(``col += block_size``) are block-stride loops to vectorize and split. When the launcher picks
among instantiations by shape (llama.cpp's ``ncols < 1024 ? 32 : 1024``), every launch takes
the one knob and the dispatch table replaces the heuristic per shape. The domain is the
instantiated values and the powers of two within the device limit, less what the kernel's
``static_assert``s reject, and no larger than the largest instantiation when the kernel has a
fixed-size ``__shared__`` array (the author's own instantiations are what is known to fit). The
default is the size the target binds; a spec that computes it per shape
(``template_args = ["{32 if ncols < 1024 else 1024}"]``) gets 0, that pick, so the default
config is the original at every shape.

An items count the spec computes per shape for its block (DeepSpeed pre_rms_norm's ``UNROLL``,
``{2 * ((elems_per_row + 4095) // 4096)}`` at 256 threads) covers the row at that block or a
larger one, so x stays at least the spec's; when ``expose`` made the count a knob first, its
constraint relates the count to the block this pass sets (``launch_block_x``), and smaller
blocks are offered too (128 threads with ``UNROLL=4`` cover 4096 halves; the pick at 128 is
excluded).

The pass refuses kernels that read neither ``blockDim`` nor such a name (their work mapping is
tied to the launch's block size in ways a knob would break), kernels with fixed-size shared
arrays not sized by that name (but for a template block size the launcher picks among, above),
kernels that read their block size as a parameter or as a template parameter some launch does
not write (deduced, defaulted, or in a shared macro), kernels that (or whose device functions) reduce
by hand for the current block (``threadIdx.x < 64`` / ``v[threadIdx.x + 64]`` for 128 threads), and
launches whose grid repeats the block's literal other than to round up (``<<<n / 256, 256>>>``:
run expose first, or name the constant).
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import tree_sitter as ts
from ktx.ir import LaunchSite, Module, SharedArray, syntax
from ktx.ir.affine import BlockAlias
from ktx.ir.consteval import int_literal
from ktx.ir.facts.constants import (
    allowed_by_asserts,
    assumes_warp_x,
    ceil_divide_literals,
    unrolled_for_block,
)
from ktx.ir.facts.launcher import header_value
from ktx.ir.facts.tuning import tuning_params
from ktx.ir.index import eval_int_text
from ktx.ir.launch import LaunchMapping, is_constant, launch_dims, local_value, substitute
from ktx.passes._common import KernelSite, follow_block_axis, kernel_node, powers_of_two

from ktx.passbase import KnobSpec, Option, Pass, Phase, Refuse, Rewriter, Skip, Target

AXES = "XYZ"


class BlockSize(Pass[KernelSite]):
    name = "block-size"
    phase = Phase.BLOCK
    summary = "block dimensions become knobs; __launch_bounds__ and the launch mapping follow"
    description = __doc__ or ""
    knobs = (
        KnobSpec(
            "BLOCK_X",
            "0, 32, 64, … max",
            "0: the block size the original launch computes",
            "threads per block along x",
        ),
        KnobSpec(
            "BLOCK_Y",
            "0, 1, 2, … 32 when x is a warp (else 0, 1, 2, … max)",
            "0, as BLOCK_X",
            "threads per block along y (2-D blocks)",
        ),
    )
    options = (
        Option("min", "int", 32, "smallest block size offered along x"),
        Option("max", "int", 1024, "largest block size offered (threads per block)"),
    )
    after = ("expose",)

    def sites(self, target: Target) -> Iterator[KernelSite | Skip]:
        fn = target.kernel
        body = kernel_node(target)
        alias = _block_alias(target)
        if alias is not None and alias.kind == "template":
            why = _template_refusal(target, alias)
            if why is not None:
                yield Skip(why, fn.name, fn.span)
                return
        if alias is not None and alias.kind == "param":
            yield Skip(
                f"the kernel reads its block size as the parameter {alias.name}, which every launch "
                "also passes as the block: the launcher's value would have to follow the knob",
                fn.name,
                fn.span,
            )
            return
        same = _value_alias(target) if alias is None else None
        if same is not None:
            yield Skip(
                f"the kernel reads {same.name} (= {same.value}, the block size every launch passes as a "
                f"literal): it may assume blockDim == {same.value}; pass {same.name} at the launch so "
                "that one knob moves both",
                fn.name,
                fn.span,
            )
            return
        reads = syntax.uses_builtin(target.module, body, "blockDim") or _stride_macro(target) is not None
        if alias is None and not reads:
            yield Skip(
                "the kernel never reads blockDim: its work mapping assumes the launch's block size",
                fn.name,
                fn.span,
            )
            return
        fixed = _fixed_arrays(target, alias)
        picked = alias is not None and alias.kind == "template" and bool(_instantiated_blocks(target, alias))
        if fixed and not picked:
            yield Skip(
                f"fixed-size __shared__ array {fixed[0].name}[{']['.join(fixed[0].dims)}]: a larger "
                "block could index past it",
                fn.name,
                fn.span,
            )
            return
        opaque = [o for o in target.module.opaque_launches if o.kernel == fn.name]
        if opaque:
            o = opaque[0]
            yield Skip(
                f"{fn.name} is also launched through {o.helper}() (line {o.span.line}), which sets the "
                "block inside the helper: that launch would not follow the knob",
                fn.name,
                fn.span,
            )
            return
        if target.mapping is None and not target.launches:
            yield Skip(
                f"no launch of {fn.name} in this file and no launch mapping given (pass the spec's)",
                fn.name,
                fn.span,
            )
            return
        yield KernelSite(fn.name, fn.span)

    def rewrite(self, site: KernelSite, rw: Rewriter) -> None:
        target = rw.target
        module = target.module
        body = kernel_node(target)
        alias = _block_alias(target)
        if alias is not None and alias.kind == "template":
            self._rewrite_template(rw, alias, body)
            return
        if alias is not None:
            self._rewrite_named(rw, alias, body)
            return
        mapping = rw.mapping
        sites = target.launches
        ndims = (
            len(mapping.block)
            if mapping is not None
            else len(launch_dims(module, sites[0], "block").components)
        )
        two_d_warp = ndims >= 2 and self._x_is_32(target, mapping)
        warp_why = assumes_warp_x(module, target.kernel) if two_d_warp else None
        x_is_warp = warp_why is not None
        lo, hi = max(1, self.int_option("min")), self.int_option("max")
        thread_terms: list[str] = []
        knob_names: list[str] = []
        pinned = 1  # the product of the dimensions kept because the kernel assumes them
        for axis in range(ndims):
            if axis == 0 and x_is_warp:
                thread_terms.append("32")
                rw.note(f"x stays 32: {warp_why}")
                continue
            name = f"BLOCK_{AXES[axis]}"
            current = self._constant(target, mapping, axis)
            if axis > 0 and current == 1 and not _reads_axis(module, body, AXES[axis].lower()):
                # ``dim3 block(BLOCKSIZE_X, 1)`` for a kernel that never reads threadIdx.y: y is
                # not a dimension of its work, so it stays 1 (no knob, nothing to keep in step).
                thread_terms.append("1")
                continue
            if current == 1 and ndims >= 2 and (unguarded := _unguarded_index(target, axis)) is not None:
                # ggml diag_mask_inf_f32: ``row = blockDim.x*blockIdx.x + threadIdx.x`` under a block
                # of (1, 32) and a grid x of nrows, no bound on row. A block x above 1 would start
                # BLOCK_X threads a row, nrows * BLOCK_X in all, and write past the last row: the
                # grid counts the rows one block each and nothing divides it by the new size.
                thread_terms.append("1")
                rw.note(
                    f"{AXES[axis].lower()} stays 1: the kernel's {unguarded} (a global index, no bound "
                    f"check) counts one block per index along {AXES[axis].lower()}; a larger block "
                    "would index past the end"
                )
                continue
            # (a kernel that never reads blockDim.x keeps x by the branch after this one)
            reads_x = syntax.uses_builtin(module, body, "blockDim.x")
            equal = _x_equal_read(target) if ndims >= 2 and axis == 0 and reads_x else None
            if equal is not None:
                # ``col += WARP_SIZE`` under ``dim3(WARP_SIZE, nwarps)``: the kernel walks its rows
                # by a name that is blockDim.x only while x is as written, so x stays.
                if current is None:
                    raise Refuse(
                        f"the kernel steps by {equal}, which is blockDim.x only at the block's x as "
                        f"written ({self._written(target, 0)}, not a constant here): x must stay, and "
                        "y cannot be bounded against the hardware limit"
                    )
                pinned *= current
                thread_terms.append(str(current))
                rw.note(
                    f"x stays {current}: the kernel reads {equal}, which equals blockDim.x only at that size"
                )
                continue
            if ndims >= 2 and axis == 0 and not syntax.uses_builtin(module, body, "blockDim.x"):
                # ``<<<g, {16, 16, 1}>>>`` for a kernel that reads threadIdx.x but never blockDim.x
                # (16 lanes of float4 cover a row of 64): it assumes this size, which stays.
                ax = AXES[axis].lower()
                if current is None:
                    written = self._written(target, axis)
                    raise Refuse(
                        f"the kernel never reads blockDim.{ax}, so it may assume the block's {ax} "
                        f"({written}, launch at line {sites[0].span.line}), which is not a constant: "
                        "x cannot stay as written while y varies within the hardware limit"
                    )
                pinned *= current
                thread_terms.append(str(current))
                rw.note(
                    f"{ax} stays {current}: the kernel never reads blockDim.{ax}, so it may assume that size"
                )
                continue
            if x_is_warp:
                values = set(powers_of_two(1, hi // 32))
            elif ndims == 1:
                values = set(powers_of_two(lo, hi))
            else:
                values = set(powers_of_two(lo if axis == 0 else 1, hi))
            values = {v for v in values if v * pinned <= hi}
            if axis == 0 and current is not None:
                counted = _items_counted_for_block(target)
                if counted is not None and _count_is_a_knob(target, counted):
                    rw.note(
                        f"x may go below {current}: {counted} is a knob whose constraint keeps the row "
                        "covered at the block this pass sets (expose's relation over launch_block_x)"
                    )
                elif counted is not None:
                    values = {v for v in values if v >= current}
                    rw.note(
                        f"x stays at least {current}: the spec computes {counted} per shape for a block "
                        f"of {current} (a smaller block would cover less of the row)"
                    )
            was = f"now {current}" if current is not None else "now shape-dependent"
            macro = rw.knob(
                name,
                sorted(values | {0}),
                0,
                f"threads per block along {AXES[axis].lower()} (0: as the original, {was})",
            )
            knob_names.append(name)
            thread_terms.append(macro)
            self._edit_launchers(rw, axis, macro, current)
            if mapping is not None:
                mapping = self._edit_mapping(rw, mapping, axis, name, current)
            if axis == 0 and current is not None:
                self._follow_template_args(rw, name, current)
        if not knob_names:
            raise Refuse("no block dimension can become a knob")
        if mapping is not None:
            rw.set_mapping(mapping)
        if len(knob_names) > 1:
            product = " * ".join(knob_names)
            zero = " == 0) == (".join(knob_names)
            rw.constraint(f"({zero} == 0)")
            rw.constraint(f"{product} <= {hi} and ({product}) % 32 == 0")
        if pinned > 1:
            product = " * ".join(knob_names)
            rw.constraint(f"{product} * {pinned} <= {hi}")
        self._launch_bounds(rw, " * ".join(thread_terms), body)

    # -- pieces ------------------------------------------------------------------------------

    def _rewrite_named(self, rw: Rewriter, alias: BlockAlias, body: ts.Node) -> None:
        """The block size is a ``#define``/``constexpr`` the launch and the kernel share: its value
        becomes the knob, and every use (grid, block, loop strides, shared sizes) follows."""
        module = rw.target.module
        value_span = None
        if alias.kind == "define":
            macro = next((m for m in module.macros if m.name == alias.name and m.params is None), None)
            value_span = macro.value_span if macro is not None else None
        else:
            const = next((c for c in module.constants if c.name == alias.name), None)
            value_span = const.value_span if const is not None else None
        if value_span is None or alias.value is None:
            raise Refuse(f"cannot find the value of {alias.name}, the block size")
        old = module.text(value_span)
        if rw.target.placeholders_in(old):
            raise Refuse(f"the block size {alias.name} is already a knob ({old.strip()})")
        for other in module.kernels:
            if other.name == rw.target.kernel.name:
                continue
            names = syntax.names_in(module, module.node(other.body))
            if alias.name in names and alias.name not in module.facts(other).index.block_aliases:
                raise Refuse(
                    f"{alias.name} is also read by kernel {other.name}, where it is not the block "
                    "size: a knob on it would change that kernel too"
                )
        lo, hi = max(1, self.int_option("min")), self.int_option("max")
        name = "BLOCK_X"
        knob = rw.knob(
            name,
            sorted(set(powers_of_two(lo, hi)) | {0}),
            0,
            f"threads per block along x (0: as the original, now {alias.value}); {alias.name} follows",
        )
        _check_literal_in_kernel(rw, alias.value)
        rw.replace(value_span, f"KTX_PICK({knob}, ({old}))")
        rw.note(
            f"{alias.name} ({alias.kind}, line {value_span.line}) is the launch's block size and the "
            "kernel's: its value is the knob, so the grid, the block and the kernel follow it"
        )
        mapping = rw.mapping
        if mapping is not None:
            rw.set_mapping(self._edit_mapping(rw, mapping, 0, name, alias.value))
        self._launch_bounds(rw, knob, body)

    def _rewrite_template(self, rw: Rewriter, alias: BlockAlias, body: ts.Node) -> None:
        """``template <int BS> __global__ k`` launched ``k<256><<<g, 256>>>``: ``BS`` is blockDim.x.

        The knob goes in both places at every launch (the template argument and the block), so
        the kernel's strides and the shared arrays ``BS`` sizes follow, and the rewritten launches
        still pass one text as both (the passes after this one still read ``BS`` as blockDim.x).

        A launcher that picks among instantiations by shape (``ncols < 1024 ? 32 : 1024``) is
        what the dispatch table replaces: every launch takes the knob. Its default is the size
        the target binds: an integer (the spec's, or the first launch's), then the knob has no 0;
        or the spec's own pick per shape (``template_args = ["{32 if ncols < 1024 else 1024}"]``),
        then 0 means that pick (``KTX_PICK``), so the default config is the original at every shape.
        """
        target = rw.target
        index = _template_index(target, alias)
        picks = _instantiated_blocks(target, alias)
        current = _bound_value(target, index) if picks else _template_value(target, index)
        per_shape = _per_shape(target, index) if current is None else None
        if current is None and per_shape is None:
            raise Refuse(f"the template argument {alias.name} is not an integer constant at its launch")
        lo, hi = max(1, self.int_option("min")), self.int_option("max")
        fixed = _fixed_arrays(target, alias)
        if picks and fixed:
            # ``__shared__ float s_sum[32]``: the author's largest instantiation is known to fit.
            hi = min(hi, max(picks))
        name = "BLOCK_X"
        own = set() if current is None else {current}
        candidates = sorted(set(powers_of_two(lo, hi)) | set(picks) | own)
        values, why = allowed_by_asserts(target.module, alias.name, candidates, {}, target.kernel.span)
        if why is not None:
            raise Refuse(why)
        if current is not None and current not in values:
            raise Refuse(f"the kernel's static_assert rejects {alias.name} = {current}, its own value")
        if len(values) <= 1:
            raise Refuse(f"the kernel's static_assert allows {alias.name} only {values}")
        was = f"was {current}" if current is not None else f"0: the spec's {per_shape} per shape"
        macro = rw.knob(
            name,
            values if current is not None else (0, *values),
            current if current is not None else 0,
            f"threads per block along x, and the kernel's {alias.name} ({was})",
        )
        if not picks and current is not None:
            _check_literal_in_kernel(rw, current)
        for site in target.launches:
            span = site.template_arg_spans[index]
            text = rw.target.module.text(span)
            rw.replace(span, macro if current is not None else f"KTX_PICK({macro}, ({text}))")
        self._edit_launchers(rw, 0, macro, None if picks else current, plain=current is not None)
        if per_shape is not None:
            rw.set_template_arg(index, "{" + f"{name} if {name} else ({per_shape})" + "}")
        else:
            rw.set_template_arg(index, "{" + name + "}")
        if len(values) < len(candidates):
            rw.note(f"the kernel's static_assert limits {name} to {{{', '.join(map(str, values))}}}")
        if picks and fixed and hi < self.int_option("max"):
            a = fixed[0]
            rw.note(
                f"{name} stays within {hi}, the largest {alias.name} the launcher instantiates: the "
                f"fixed-size __shared__ array {a.name}[{']['.join(a.dims)}] is known to fit it"
            )
        if picks:
            lines = ", ".join(f"line {site.span.line}" for site in target.launches)
            rw.note(
                f"the launcher picks {alias.name} among {', '.join(map(str, picks))} by shape ({lines}): "
                "every launch takes the knob, and the dispatch table picks it per shape"
            )
        mapping = rw.mapping
        if mapping is not None and (picks or per_shape is not None):
            first = mapping.block[0].strip()
            block0 = name if per_shape is None else f"{name} if {name} else ({first})"
            rw.set_mapping(mapping.with_block((block0, *mapping.block[1:])))
            rw.note(f"launch mapping: block[0] = {block0}")
        elif mapping is not None and current is not None:
            new, places = follow_block_axis(mapping, 0, current, name)
            rw.set_mapping(new)
            rw.note(f"launch mapping: {current} -> {name} in {', '.join(places) or 'nothing'}")
        rw.note(
            f"{alias.name} (template parameter) is the launch's block size: the template argument and "
            "the block both take the knob"
        )
        self._launch_bounds(rw, macro, body)

    def _x_is_32(self, target: Target, mapping: LaunchMapping | None) -> bool:
        if mapping is not None:
            return is_constant(mapping.resolved().block[0]) == 32
        comps = launch_dims(target.module, target.launches[0], "block").components
        return int_literal(syntax.text(target.module, comps[0])) == 32

    def _written(self, target: Target, axis: int) -> str:
        """The block's ``axis`` as the first launch writes it (through a ``dim3`` local)."""
        module = target.module
        comps = launch_dims(module, target.launches[0], "block").components if target.launches else ()
        return f"`{syntax.text(module, comps[axis]).strip()}`" if axis < len(comps) else "not written here"

    def _constant(self, target: Target, mapping: LaunchMapping | None, axis: int) -> int | None:
        if mapping is not None:
            return is_constant(mapping.resolved().block[axis])
        site = target.launches[0]
        comps = launch_dims(target.module, site, "block").components
        node = comps[axis]
        local = local_value(target.module, site, node)
        text = syntax.text(target.module, local.value if local and local.value else node)
        return int_literal(text)

    def _edit_launchers(
        self, rw: Rewriter, axis: int, macro: str, current: int | None, plain: bool = False
    ) -> None:
        """Each launch's block ``axis`` becomes ``KTX_PICK(macro, (as written))``, or ``macro``
        itself when ``plain`` (a template block size: the knob has no 0, and the block must read
        as the template argument does, so that the rewritten kernel keeps the blockDim fact)."""
        module = rw.target.module
        done: set[int] = set()
        for site in rw.target.launches:
            dims = launch_dims(module, site, "block")
            if axis >= len(dims.components):
                raise Refuse(
                    f"the launch at line {site.span.line} has no block dimension {AXES[axis].lower()}"
                )
            comp = dims.components[axis]
            local = local_value(module, site, comp)
            node: ts.Node = local.value if local is not None and local.value is not None else comp
            if node.start_byte in done:
                continue
            done.add(node.start_byte)
            text = syntax.text(module, node)
            if (knob_here := rw.target.knob_of(text)) is not None:  # the template's, not a user's KTX_
                raise Refuse(f"the block size is already the knob {knob_here.name}")
            grid_edits: list[tuple[int, int, str]] = []
            literal = text.strip() if local is None and int_literal(text) is not None else None
            if literal is None and current is not None and axis == 0:
                literal = str(current)  # ``<<<(n + 255) / 256, BS>>>``: the grid does not follow BS
            if literal is not None:
                grid = launch_dims(module, site, "grid")
                comps = grid.components
                if len(dims.components) > 1:
                    # A 2-D block: grid y does not derive from block x (``dim3 grid(n, 1)`` beside
                    # ``dim3 block(32, 1)``); each axis is compared with its own grid dimension.
                    comps = comps[axis : axis + 1]
                grid_text = " ".join(syntax.text(module, g) for g in comps)
                if literal in re.split(r"[^\w]+", grid_text):
                    # Only a block written as the literal itself: a named block (``BS``) beside a
                    # grid of literals is the user's to name consistently.
                    as_literal = current is not None and int_literal(text) is not None
                    rounded = ceil_divide_literals(module, comps, int(literal)) if as_literal else None
                    if rounded is None:
                        raise Refuse(
                            f"the grid repeats the block's literal {literal} (line {site.span.line}); name "
                            "it (a constexpr) or run expose first, so both follow the knob"
                        )
                    # ``(n + 255) / 256`` beside a block of 256: the grid's copies follow the knob.
                    whole, minus_one = rounded
                    for lit in whole:
                        grid_edits.append((lit.start_byte, lit.end_byte, f"KTX_PICK({macro}, ({literal}))"))
                    for lit in minus_one:
                        grid_edits.append(
                            (lit.start_byte, lit.end_byte, f"(KTX_PICK({macro}, ({literal})) - 1)")
                        )
            if current is not None:
                _check_literal_in_kernel(rw, current)
            picked = macro if plain else f"KTX_PICK({macro}, ({text}))"
            rw.replace_bytes(node.start_byte, node.end_byte, picked)
            for start, end, new_text in grid_edits:
                if start not in done:
                    done.add(start)
                    rw.replace_bytes(start, end, new_text)
            if grid_edits:
                rw.note(f"the grid's rounding up by {current} follows the knob (line {site.span.line})")
            if local is None and node.type == "identifier" and axis == 0:
                # ``<<<(n + BS - 1) / BS, BS>>>``: the grid follows the block, as the mapping does.
                for use in _uses_in_grid(module, site, text):
                    if use.start_byte not in done:
                        done.add(use.start_byte)
                        rw.replace_bytes(use.start_byte, use.end_byte, picked)

    def _follow_template_args(self, rw: Rewriter, name: str, current: int) -> None:
        """A template argument the target binds to the block's own value, which the kernel reads
        as its block size (:mod:`ktx.ir.facts.tuning`, role ``block``: ggml softmax's
        ``block_size_template``, read as ``block_size_template == 0 ? blockDim.x :
        block_size_template``), follows the knob; else another block would run a kernel that
        still strides by the old size."""
        target = rw.target
        for tp in tuning_params(target.module, target.kernel, target.template_args):
            if tp.kind != "template-int" or tp.index is None or tp.role != "block" or tp.spec_selected:
                continue
            if tp.value != current or "{" in rw.template_args[tp.index]:
                continue
            rw.set_template_arg(tp.index, f"{{{name} if {name} else {current}}}")
            rw.note(f"the template argument {tp.name} (= {current}, the block) follows {name}")

    def _edit_mapping(
        self, rw: Rewriter, mapping: LaunchMapping, axis: int, name: str, current: int | None
    ) -> LaunchMapping:
        comp = mapping.block[axis].strip()
        if current is not None and mapping.var(comp) is None and is_constant(comp) is not None:
            picked = f"({name} if {name} else {current})"
            # the block's axis and the grid's rounding by it on that axis (``(n + 255) // 256``)
            new, places = follow_block_axis(mapping, axis, current, picked)
            rw.note(f"launch mapping: {current} -> {name} in {', '.join(places)}")
            return new
        var = mapping.var(comp)
        if var is not None:
            return mapping.with_var(comp, f"{name} if {name} else ({var})")
        if comp.isidentifier():
            # A name the mapping does not define (a spec's derived ``warps``): every use of it
            # follows the knob, so shared memory sized from it grows with the block.
            picked = f"({name} if {name} else {comp})"
            return LaunchMapping(
                tuple(substitute(g, {comp: picked}) for g in mapping.grid),
                tuple(substitute(b, {comp: picked}) for b in mapping.block),
                substitute(mapping.shared, {comp: picked}),
                tuple((n, substitute(e, {comp: picked})) for n, e in mapping.vars),
                mapping.origin,
                mapping.notes,
            )
        block = list(mapping.block)
        block[axis] = f"{name} if {name} else ({comp})"
        return mapping.with_block(tuple(block))

    def _launch_bounds(self, rw: Rewriter, threads: str, body: ts.Node) -> None:
        fn = rw.target.kernel
        bounds = fn.launch_bounds
        if bounds is not None and bounds.args:
            old = rw.target.module.text(bounds.args[0])
            if rw.target.placeholders_in(old):
                raise Refuse(f"__launch_bounds__ already names a knob ({old})")
            rw.replace(bounds.args[0], f"KTX_PICK({threads}, ({old}))")
            return
        declarator = body.child_by_field_name("declarator")
        if declarator is None:
            raise Refuse("cannot find the kernel's declarator to attach __launch_bounds__")
        rw.insert(declarator.start_byte, f"__launch_bounds__({threads}) ")


#: Loop macros that projects take from Caffe2/PyTorch: a grid-stride loop over ``n`` items
#: (``for (i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += blockDim.x * gridDim.x)``),
#: usually defined in a header the file includes.
_GRID_STRIDE_MACROS = (
    "CUDA_1D_KERNEL_LOOP",
    "CUDA_KERNEL_LOOP",
    "CUDA_KERNEL_LOOP_TYPE",
    "CUDA_1D_KERNEL_LOOP_T",
)


def _stride_macro(target: Target) -> str | None:
    """A loop macro the kernel runs its work in whose expansion reads blockDim, or None.

    Either one of the well-known grid-stride loop macros, or a function-like macro the file
    defines with ``blockDim`` in its body. Work in a grid-stride loop does not depend on the
    block size, so the knob may change it.
    """
    module = target.module
    text = module.text(target.kernel.body)
    defined = {m.name: m.value for m in module.macros if m.params is not None}
    for match in re.finditer(r"\b([A-Z_][A-Z0-9_]*)\s*\(", text):
        name = match.group(1)
        if name in defined:
            if "blockDim" in defined[name] and "gridDim" in defined[name]:
                return name
        elif name in _GRID_STRIDE_MACROS:
            return name
    return None


def _reads_axis(module: Module, body: ts.Node, axis: str) -> bool:
    """Whether the kernel reads ``threadIdx.<axis>`` or ``blockDim.<axis>``."""
    wanted = (f"threadIdx.{axis}", f"blockDim.{axis}")
    return any(
        n.type == "field_expression" and "".join(syntax.text(module, n).split()) in wanted
        for n in syntax.walk(body)
    )


def _items_counted_for_block(target: Target) -> str | None:
    """An items-per-thread template argument the spec computes per shape (DeepSpeed's
    ``pre_rms_norm<T, {2 * ((elems_per_row + 4095) // 4096)}, 256, 256>``): the count covers the
    row for the spec's block, so a larger block covers it too and a smaller one does not."""
    params = tuning_params(target.module, target.kernel, target.template_args)
    return next((t.name for t in params if t.role == "items" and t.spec_selected), None)


def _count_is_a_knob(target: Target, name: str) -> bool:
    """Whether the per-shape items count ``name`` is already a knob (``expose`` ran first and
    bound it as ``{UNROLL if UNROLL else (pick)}``): expose's constraint then relates its count to
    the launch's block as the pipeline ends (:data:`ktx.passbase.LAUNCH_BLOCK`), so a block below
    the spec's is sound wherever that constraint holds (a larger count covers the row)."""
    index = next((i for i, p in enumerate(target.kernel.template_params) if p.name == name), None)
    if index is None or index >= len(target.template_args):
        return False
    named = set(re.findall(r"[A-Za-z_]\w*", target.template_args[index]))
    return any(k.pass_name == "expose" for n, k in target.knobs.items() if n in named)


def _template_index(target: Target, alias: BlockAlias) -> int:
    return next(i for i, p in enumerate(target.kernel.template_params) if p.name == alias.name)


def _template_value(target: Target, index: int) -> int | None:
    """The integer every launch passes for template parameter ``index`` (through macros/constexprs)."""
    env = _launch_env(target, index)
    values = {
        eval_int_text(site.template_args[index], dict(env)) if index < len(site.template_args) else None
        for site in target.launches
    }
    return next(iter(values)) if len(values) == 1 else None


def _launch_env(target: Target, index: int) -> dict[str, int]:
    """The integers the launches' template arguments may name: the file's macros and constexprs,
    then, for a name the file does not define (ggml's ``norm_f32<WARP_SIZE>`` with ``WARP_SIZE``
    in ``common.cuh``), the launch mapping's integer var of that name (the spec's ``[vars]``) or
    the value a local header the file includes gives it. Without them a launcher that picks
    among ``k<WARP_SIZE>`` and ``k<1024>`` by shape read as "not integer constants"."""
    env = dict(target.module.facts(target.kernel, target.template_args).index.env)
    mapping = target.mapping
    path = Path(target.module.path) if target.module.path else None
    for site in target.launches:
        if index >= len(site.template_args):
            continue
        for name in re.findall(r"[A-Za-z_]\w*", site.template_args[index]):
            if name in env:
                continue
            var = mapping.var(name) if mapping is not None else None
            number = int_literal(var) if var is not None else None
            if number is None and path is not None:
                number = header_value(path, name)
            if number is not None:
                env[name] = number
    return env


def _launch_values(target: Target, index: int) -> list[int | None]:
    """The integer each launch passes for template parameter ``index`` (None: not a constant)."""
    env = _launch_env(target, index)
    return [
        eval_int_text(site.template_args[index], dict(env)) if index < len(site.template_args) else None
        for site in target.launches
    ]


def _instantiated_blocks(target: Target, alias: BlockAlias) -> tuple[int, ...]:
    """The block sizes a launcher picks among (``if (ncols < 1024) k<32>... else k<1024>...``),
    sorted; empty unless the launches pass two or more integer constants."""
    values = _launch_values(target, _template_index(target, alias))
    if None in values or len(set(values)) < 2:
        return ()
    return tuple(sorted({v for v in values if v is not None}))


def _bound_value(target: Target, index: int) -> int | None:
    """The integer the target binds to template parameter ``index`` (the spec's, or the first
    launch's), through macros and constexprs."""
    if index >= len(target.template_args):
        return None
    env = target.module.facts(target.kernel, target.template_args).index.env
    return eval_int_text(target.template_args[index], dict(env))


def _per_shape(target: Target, index: int) -> str | None:
    """The spec's expression for template parameter ``index`` when it is computed per shape
    (``{32 if ncols < 1024 else 1024}`` gives ``32 if ncols < 1024 else 1024``), else None."""
    if index >= len(target.template_args):
        return None
    text = target.template_args[index].strip()
    inner = text[1:-1].strip()
    if not (text.startswith("{") and text.endswith("}")) or not inner or "{" in inner or "}" in inner:
        return None
    return inner


def _fixed_arrays(target: Target, alias: BlockAlias | None) -> list[SharedArray]:
    """The kernel's ``__shared__`` arrays of a fixed size, not sized by the block-size name."""
    return [
        a
        for a in target.module.shared_arrays
        if a.function == target.kernel.name
        and not a.extern
        and not (alias is not None and _sized_by(a.dims, alias.name))
    ]


def _template_refusal(target: Target, alias: BlockAlias) -> str | None:
    """Why a block size read as a template parameter cannot become the knob, or None."""
    index = _template_index(target, alias)
    if not target.launches:
        return f"the block size is the template parameter {alias.name}, and no launch in the file sets it"
    for site in target.launches:
        if index >= len(site.template_arg_spans):
            return (
                f"the launch at line {site.span.line} does not write the template argument {alias.name} "
                "(deduced or defaulted): the knob has nowhere to go"
            )
        if site.macro is not None:
            return f"the launch at line {site.span.line} sits in the macro {site.macro}, shared by other uses"
    if _template_value(target, index) is None and not _instantiated_blocks(target, alias):
        return f"the launches pass {alias.name} values that are not integer constants"
    bound = _template_value(target, index) or _bound_value(target, index) or _per_shape(target, index)
    if bound is None:
        return (
            f"the target binds {alias.name} to {target.template_args[index]!r}, neither an integer "
            "constant nor the spec's expression per shape ({...})"
        )
    return None


def _uses_in_grid(module: Module, site: LaunchSite, name: str) -> list[ts.Node]:
    """The identifiers ``name`` in the grid of ``site`` (a named block size the grid divides by)."""
    grid = launch_dims(module, site, "grid")
    if grid.whole_dim3:
        return []
    return [
        n
        for comp in grid.components
        for n in syntax.walk(comp)
        if n.type == "identifier" and syntax.text(module, n) == name
    ]


def _block_alias(target: Target) -> BlockAlias | None:
    """The name every launch passes as the block size, when the kernel reads it."""
    index = target.module.facts(target.kernel, target.template_args).index
    body = target.module.node(target.kernel.body)
    names = syntax.names_in(target.module, body)
    read = [a for a in index.block_aliases.values() if a.name in names and a.kind != "value"]
    return read[0] if len(read) == 1 else None


def _x_equal_read(target: Target) -> str | None:
    """A name the kernel reads that equals blockDim.x only at the launches' 2-D block x as written
    (:attr:`ktx.ir.facts.LaunchFacts.block_x_equal`): making x a knob would break it."""
    facts = target.module.facts(target.kernel, target.template_args)
    names = syntax.names_in(target.module, target.module.node(target.kernel.body))
    read = sorted(a.name for a in facts.launch.block_x_equal if a.name in names)
    return read[0] if read else None


def _value_alias(target: Target) -> BlockAlias | None:
    """A constant the kernel reads that equals every launch's block size, when the launch does
    not name it (``<<<g, 256>>>`` with ``#define TPB 256`` in the kernel)."""
    index = target.module.facts(target.kernel, target.template_args).index
    return next((a for a in index.block_aliases.values() if a.kind == "value"), None)


def _sized_by(dims: tuple[str, ...], name: str) -> bool:
    """Whether every dimension of a shared array is an expression of ``name`` alone."""
    return all(re.fullmatch(rf"[\s()]*{re.escape(name)}[\s()+*/0-9-]*", d) is not None for d in dims)


def _check_literal_in_kernel(rw: Rewriter, value: int) -> None:
    """Refuse when the kernel body writes the current block size as a literal (it may assume it)."""
    module: Module = rw.target.module
    body = module.node(rw.target.kernel.body)
    for n in syntax.walk(body):
        if n.type == "number_literal" and int_literal(syntax.text(module, n)) == value:
            raise Refuse(
                f"the kernel body uses the literal {value}, the current block size (line "
                f"{n.start_point[0] + 1}); it may assume blockDim == {value}"
            )
    unrolled = unrolled_for_block(module, rw.target.kernel, value)
    if unrolled is not None:
        raise Refuse(
            f"{unrolled} is written for a block of {value} threads (a reduction unrolled by hand sums "
            f"exactly {value} partials): another block size would drop some or read past them"
        )


def _unguarded_index(target: Target, axis: int) -> str | None:
    """The kernel's global thread index along ``axis`` when nothing bounds it (``row`` for
    ``const int row = blockDim.x*blockIdx.x + threadIdx.x;`` with no ``if (row < n)``), or None."""
    index = target.module.facts(target.kernel, target.template_args).index
    found = index.thread_index(AXES[axis].lower())
    if found is None or found.guard is not None:
        return None
    return f"`{found.var}` (line {found.line})"
