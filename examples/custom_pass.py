"""A user-written pass: ``warps``, the block size of a 1-D launch counted in warps.

It shows the whole extension surface in ~60 lines: metadata declared as data (checked when the
pass is registered), ``sites`` yielding a site or a ``Skip`` remark, ``rewrite`` declaring a knob
and editing the launcher, the launch mapping and ``__launch_bounds__`` through the ``Rewriter``,
and the ordering graph (it ``conflicts`` with the built-in block-size, which owns the same
choice).

Run it:

    python examples/custom_pass.py                       # from Python, then through the CLI
    ktx apply --plugin examples/custom_pass.py --passes warps kernels/silu_and_mul/kernel.cu

Installed packages register passes with an entry point instead of ``--plugin``::

    [project.entry-points."ktx.passes"]
    warps = "my_package.passes:Warps"
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

from ktx.ir import syntax
from ktx.ir.launch import launch_dims, local_value

from ktx.cli import main
from ktx.passbase import KnobSpec, Option, Pass, Rewriter, Site, Skip, Target
from ktx.pipeline import run
from ktx.registry import register


@register
class Warps(Pass[Site]):
    name = "warps"
    summary = "the block size of a 1-D launch, counted in warps (knob WARPS)"
    knobs = (KnobSpec("WARPS", "0, 1, 2, 4, … max", "0 (as the original)", "warps per block"),)
    options = (Option("max", "int", 16, "most warps per block offered"),)
    conflicts = ("block-size",)

    def sites(self, target: Target) -> Iterator[Site | Skip]:
        fn = target.kernel
        if target.mapping is None or len(target.mapping.block) != 1 or not target.launches:
            yield Skip("needs a 1-D block launched in this file", fn.name, fn.span)
            return
        yield Site(fn.name, fn.span)

    def rewrite(self, site: Site, rw: Rewriter) -> None:
        values = [0] + [w for w in (1, 2, 4, 8, 16, 32) if w <= self.int_option("max")]
        macro = rw.knob("WARPS", values, 0, "warps per block (0: as the original)")
        module = rw.target.module
        for launch in rw.target.launches[:1]:
            comp = launch_dims(module, launch, "block").components[0]
            local = local_value(module, launch, comp)
            node = local.value if local is not None and local.value is not None else comp
            original = syntax.text(module, node)
            rw.replace_bytes(node.start_byte, node.end_byte, f"KTX_PICK(32 * {macro}, ({original}))")
        fn = syntax.function_node(module, rw.target.kernel)
        declarator = fn.child_by_field_name("declarator")
        if declarator is not None and rw.target.kernel.launch_bounds is None:
            rw.insert(declarator.start_byte, f"__launch_bounds__(32 * {macro}) ")
        assert rw.mapping is not None
        block = rw.mapping.block[0]
        rw.set_mapping(rw.mapping.with_block((f"32 * WARPS if WARPS else ({block})",)))


if __name__ == "__main__":
    kernel = Path(__file__).resolve().parents[1] / "kernels" / "silu_and_mul" / "kernel.cu"
    # From Python: the template, its knobs, one config.
    template = run(kernel.read_text(), "warps", path=str(kernel))
    print([(k.name, k.values) for k in template.knobs], template.launch())
    print(next(line for line in template.instantiate({"WARPS": 4}).splitlines() if "dim3 block" in line))
    # From the CLI, in this process (the pass is registered above).
    sys.exit(main(["apply", "--passes", "warps", str(kernel), "--config", "WARPS=8", "--diff", "-q"]))
