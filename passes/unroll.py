"""``unroll``: one unroll-factor knob per loop, written as ``#pragma unroll N``.

Each selected loop gets a knob ``UNROLL_<loop>`` (``UNROLL_L0``; ``UNROLL_L0_1`` for a loop
another pass created inside L0). Value 0 means "no pragma" (the compiler's own heuristic),
1 means "do not unroll", N unrolls by N. The default is what the loop has now: its
``#pragma unroll N``, or 0 when it has none, so the default config is the original code.

``#pragma unroll`` does not expand macros, so the template writes
``#pragma unroll ktx_UNROLL_L0`` and the knob header defines
``static constexpr int ktx_UNROLL_L0 = KTX_UNROLL_L0;`` (an integral constant expression is
what the pragma wants). Instantiation writes the number, or drops the line for 0.

Loops already fully unrolled by a bare ``#pragma unroll`` are skipped (a factor could only
unroll them less), as are loops whose factor is not an integer literal (a template
parameter: the value is not known here).
"""

from __future__ import annotations

from collections.abc import Iterator

from ktx.ir import syntax
from ktx.ir.consteval import int_literal
from ktx.passes._common import LoopSite, powers_of_two

from ktx.passbase import CONSTEXPR_PREFIX, KnobSpec, Option, Pass, Phase, Refuse, Rewriter, Skip, Target


class Unroll(Pass[LoopSite]):
    name = "unroll"
    phase = Phase.UNROLL
    summary = "one unroll-factor knob per loop, written as #pragma unroll N"
    description = __doc__ or ""
    knobs = (
        KnobSpec(
            "UNROLL_<loop>",
            "0, 1, 2, 4, … max (and the current factor)",
            "the loop's current factor; 0 when it has no pragma",
            "unroll factor of the loop (0: no pragma, the compiler decides; 1: no unrolling)",
        ),
    )
    options = (
        Option("max", "int", 8, "largest unroll factor offered (powers of two up to it)"),
        Option(
            "loops",
            "strs",
            (),
            "loops to expose, as ktx inspect names them (L0|L2); default: every loop of the kernel",
        ),
    )
    after = ("expose", "coarsen", "split", "tile")

    def sites(self, target: Target) -> Iterator[LoopSite | Skip]:
        wanted = set(self.list_option("loops"))
        labels = {target.label(lp) for lp in target.loops}
        for missing in sorted(wanted - labels):
            yield Skip(
                f"no loop {missing} in {target.kernel.name}; loops: {', '.join(sorted(labels))}", missing
            )
        for loop in target.loops:
            label = target.label(loop)
            if wanted and label not in wanted:
                continue
            pragma = loop.pragma
            if pragma is not None and pragma.is_unroll:
                factor = pragma.unroll_factor
                if factor is None:
                    yield Skip("already fully unrolled by a bare #pragma unroll", label, loop.span)
                    continue
                if factor.startswith(CONSTEXPR_PREFIX):
                    yield Skip(f"its unroll factor is already a knob ({factor})", label, loop.span)
                    continue
                if int_literal(factor) is None:
                    yield Skip(f"unroll factor {factor!r} is not an integer literal", label, loop.span)
                    continue
            yield LoopSite(label, loop.span, loop)

    def rewrite(self, site: LoopSite, rw: Rewriter) -> None:
        loop = site.loop
        pragma = loop.pragma
        current = 0
        if pragma is not None and pragma.is_unroll and pragma.unroll_factor is not None:
            current = int_literal(pragma.unroll_factor) or 0
        top = max(1, self.int_option("max"))
        values = {0, 1, *powers_of_two(2, top), current}
        name = f"UNROLL_{site.label}"
        rw.knob(name, sorted(values), current, f"unroll factor of loop {site.label} (0: no pragma)")
        text = f"#pragma unroll {CONSTEXPR_PREFIX}{name}"
        if pragma is not None and pragma.is_unroll:
            rw.replace(pragma.span, text)
            return
        source = rw.target.module.source
        start = syntax.line_start(source, loop.span.start)
        if source[start : loop.span.start].strip():
            raise Refuse("the loop shares its line with other code; a #pragma needs a line of its own")
        indent = syntax.indentation(source, loop.span.start)
        rw.insert(start, f"{indent}{text}\n")
