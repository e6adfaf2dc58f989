"""``launch-bounds``: a knob for the minimum number of resident blocks per SM.

``__launch_bounds__(max_threads, min_blocks)`` tells ptxas to fit ``min_blocks`` blocks of
``max_threads`` threads on one SM, which caps registers per thread (and may spill). The knob
``MIN_BLOCKS`` is that second argument; 0 means none (nvcc reads a zero argument as absent),
the default when the kernel has none, so the default config is the original kernel.

The maximum threads per block must be known, so the pass requires ``block-size`` (added to the
pipeline when missing), which writes ``__launch_bounds__(KTX_BLOCK_X)``; a kernel that already
has ``__launch_bounds__`` keeps its first argument. Constraints: a minimum needs a known block
size (``MIN_BLOCKS == 0 or BLOCK_X > 0``), and ``MIN_BLOCKS * threads`` must fit the SM's
thread limit (2048 on sm_80 and sm_90).
"""

from __future__ import annotations

from collections.abc import Iterator

from ktx.ir import syntax
from ktx.ir.consteval import int_literal
from ktx.ir.launch import expression_of
from ktx.passes._common import KernelSite

from ktx.passbase import KnobSpec, Option, Pass, Phase, Refuse, Rewriter, Skip, Target


class LaunchBounds(Pass[KernelSite]):
    name = "launch-bounds"
    phase = Phase.HINTS
    summary = "a knob for the minimum resident blocks per SM (__launch_bounds__'s second argument)"
    description = __doc__ or ""
    knobs = (
        KnobSpec(
            "MIN_BLOCKS",
            "0, 1, 2, 3, 4, 6, 8 (up to max)",
            "the kernel's current minimum, else 0 (none)",
            "minimum resident blocks per SM that ptxas must allow (caps registers per thread)",
        ),
    )
    options = (
        Option("max", "int", 8, "largest minimum offered"),
        Option("threads-per-sm", "int", 2048, "resident threads one SM holds (2048 on sm_80/sm_90)"),
    )
    requires = ("block-size",)
    after = ("block-size", "expose")

    def sites(self, target: Target) -> Iterator[KernelSite | Skip]:
        fn = target.kernel
        if fn.launch_bounds is None:
            yield Skip(
                "the kernel has no __launch_bounds__ and block-size did not give it one "
                "(see block-size's remark)",
                fn.name,
                fn.span,
            )
            return
        yield KernelSite(fn.name, fn.span)

    def rewrite(self, site: KernelSite, rw: Rewriter) -> None:
        fn = rw.target.kernel
        bounds = fn.launch_bounds
        assert bounds is not None
        module = rw.target.module
        current = 0
        if bounds.min_blocks is not None:
            value = int_literal(bounds.min_blocks)
            if value is None:
                raise Refuse(f"the minimum blocks argument {bounds.min_blocks!r} is not an integer literal")
            current = value
        top = max(1, self.int_option("max"))
        values = {v for v in (0, 1, 2, 3, 4, 6, 8, 12, 16, 32) if v <= top} | {current}
        macro = rw.knob(
            "MIN_BLOCKS", sorted(values), current, "minimum resident blocks per SM (0: no minimum)"
        )
        if len(bounds.args) >= 2:
            rw.replace(bounds.args[1], macro)
        else:
            rw.insert(bounds.args[0].end, f", {macro}")
        first = syntax.node_at(
            module,
            bounds.args[0],
            (
                "identifier",
                "number_literal",
                "binary_expression",
                "call_expression",
                "parenthesized_expression",
            ),
        )
        threads = expression_of(module, first) if first is not None else None
        if threads is None:
            rw.note("max threads per block unknown here: no constraint on MIN_BLOCKS * threads")
            return
        per_sm = self.int_option("threads-per-sm")
        term = threads if threads.isidentifier() else f"({threads})"
        rw.constraint(f"MIN_BLOCKS == 0 or {term} > 0")
        rw.constraint(f"MIN_BLOCKS * {term} <= {per_sm}")
