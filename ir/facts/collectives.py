"""Block-wide collectives: where a kernel's threads combine or wait across its whole block.

A pass that stacks several rows in one block (``rows-per-block``) is right only if nothing in
the kernel treats the block as one group. The kernel's own ``__shared__`` arrays and
``__syncthreads()`` are plain to see; this module finds the ones a line of code hides:

* the cooperative-groups block (``cg::thread_block tb = cg::this_thread_block();``) handed to a
  function (DeepSpeed's ``reduce::block<ROp::Add>(tb, warp, val)``, whose body, in a header
  ktx may not read, reduces over every warp of the block through shared memory), or synchronised
  (``tb.sync()``, ``cg::sync(tb)``);
* a device function of the file the kernel calls (transitively) that declares ``__shared__``
  memory or calls a block barrier.

Why: session 9's real-code run stacked two and four of DeepSpeed's ``top_k_gating_kernel`` rows
(tokens) per block; its top-k and softmax reductions then ran over both tokens' experts at once,
and all 4 candidates failed verification.
"""

from __future__ import annotations

import re

import tree_sitter as ts
from ktx.ir import Function, Module, syntax
from ktx.ir.facts.constants import reachable

_THIS_THREAD_BLOCK = re.compile(r"^(?:(?:cooperative_groups|cg)\s*::\s*)?this_thread_block\s*\(\s*\)$")
#: Calls that take the block group and split it into warps or ask its shape, not combine it.
_PARTITIONS = re.compile(r"(?:^|::)(?:tiled_partition|coalesced_threads|thread_rank|size|num_threads)$")


def _block_groups(module: Module, node: ts.Node) -> set[str]:
    """The names ``node`` declares as ``this_thread_block()``."""
    names = set()
    for n in syntax.walk(node):
        if n.type != "init_declarator":
            continue
        value = n.child_by_field_name("value")
        ident = syntax.declarator_identifier(n)
        if (
            value is not None
            and ident is not None
            and _THIS_THREAD_BLOCK.match(" ".join(syntax.text(module, value).split()))
        ):
            names.add(syntax.text(module, ident))
    return names


def block_collective(module: Module, fn: Function) -> str | None:
    """Where the kernel ``fn`` combines or synchronises its whole block beyond its own body's
    ``__shared__`` arrays and barriers, as ``what at line N``; None where it does not."""
    shared_in = {a.function for a in module.shared_arrays}
    for current, node in reachable(module, fn):
        groups = _block_groups(module, node)
        for call in syntax.calls(module, node):
            callee = call.child_by_field_name("function")
            name = " ".join(syntax.text(module, callee).split()) if callee is not None else ""
            args = call.child_by_field_name("arguments")
            line = call.start_point[0] + 1
            if callee is not None and callee.type == "field_expression":
                receiver = callee.child_by_field_name("argument")
                method = callee.child_by_field_name("field")
                if (
                    receiver is not None
                    and method is not None
                    and syntax.text(module, receiver).strip() in groups
                    and syntax.text(module, method).strip() == "sync"
                ):
                    return f"{name}() synchronises the block at line {line}"
            if args is None or _PARTITIONS.search(re.sub(r"<.*>", "", name)):
                continue
            handed = sorted(syntax.names_in(module, args) & groups)
            if handed:
                return f"{name}() takes the whole block ({handed[0]} = this_thread_block()) at line {line}"
        if current is fn:
            continue
        if current.name in shared_in:
            return f"{current.name}(), which the kernel calls, uses __shared__ memory"
        for call in syntax.calls(module, node, syntax.BARRIERS):
            line = call.start_point[0] + 1
            return f"{current.name}(), which the kernel calls, synchronises the block at line {line}"
    return None
