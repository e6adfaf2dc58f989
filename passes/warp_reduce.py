"""``warp-reduce``: a shared-memory tree reduction becomes warp shuffles plus one shared step.

The textbook block reduction halves a stride and synchronises the block every step::

    for (unsigned s = blockDim.x / 2; s > 0; s >>= 1) {
      if (tid < s) sdata[tid] += sdata[tid + s];
      __syncthreads();
    }

log2(blockDim.x) barriers, and half the threads idle from the first step. The knob
``WARP_REDUCE_<loop>`` (0 keeps the loop, the default) swaps in: each warp reduces its 32
values with ``__shfl_down_sync``, lane 0 of each warp leaves the partial in shared memory, and
warp 0 reduces the partials the same way. Two barriers, whatever the block size. Like the
loop it replaces, the result is left in ``sdata[0]`` with the block synchronised after it.

Recognised: the loop ``for (s = N / 2; s > 0; s >>= 1)`` (or ``s /= 2``), ``N`` either
``blockDim.x`` or a constant; its body ``if (tid < s) sdata[tid] OP= sdata[tid + s];`` and a
``__syncthreads()``, in either order; ``OP`` a sum (``+=``, ``a = a + b``) or ``fmaxf``/``fminf``/
``max``/``min``; ``tid`` is ``threadIdx.x`` (or a local equal to it) and ``sdata`` a
``__shared__`` array. Anything else is a reduction the pass cannot prove and is left alone
(interleaved addressing ``tid % (2 * s)``, a strided ``sdata[2 * s * tid]``, other operators,
extra statements).

Shuffles need whole warps: the pass adds the constraint ``block % 32 == 0`` over the launch
mapping's block size (so it refuses kernels with no launch mapping), and 1-D blocks. For a sum
the shuffle order differs from the tree's, so results agree to rounding, as any reordering of a
float sum does.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass

import tree_sitter as ts
from ktx.ir import Module, syntax
from ktx.ir.facts import assign
from ktx.ir.facts.reductions import (
    halving_variable,
    loop_variable,
    synchronises,
    tree_reduction,
    update_in,
)
from ktx.ir.launch import is_constant
from ktx.passes._common import LoopSite

from ktx.passbase import KnobSpec, Option, Pass, Phase, Refuse, Rewriter, Skip, Target

_CALLS = {"fmaxf": "max", "fminf": "min", "max": "max", "min": "min", "fmax": "max", "fmin": "min"}


@dataclass(frozen=True)
class Tree:
    """A recognised tree reduction."""

    array: str
    element: str
    op: str
    """``sum``, ``max`` or ``min``."""
    call: str
    """The function the original uses for max/min (``fmaxf``), or ``''`` for a sum."""
    count: str
    """How many elements it reduces: ``blockDim.x`` or a constant."""


@dataclass(frozen=True)
class TreeSite(LoopSite):
    tree: Tree | None = None


class WarpReduce(Pass[TreeSite]):
    name = "warp-reduce"
    phase = Phase.OWNERSHIP
    summary = "a shared-memory tree reduction becomes warp shuffles plus one cross-warp step"
    description = __doc__ or ""
    knobs = (
        KnobSpec(
            "WARP_REDUCE_<loop>",
            "0, 1",
            "0 (the tree loop, as written)",
            "1: __shfl_down_sync inside warps and one step through shared memory",
        ),
    )
    options = (
        Option("loops", "strs", (), "loops to consider, as ktx inspect names them; default: every loop"),
    )
    after = ("expose", "block-size", "hoist")

    def sites(self, target: Target) -> Iterator[TreeSite | Skip]:
        wanted = set(self.list_option("loops"))
        module = target.module
        known = module.facts(target.kernel, target.template_args).roots
        shared = frozenset(a.name for a in module.shared_arrays)
        found = False
        for loop in target.loops:
            label = target.label(loop)
            if wanted and label not in wanted:
                continue
            node = _for_node(module, loop.span.start)
            if node is None:
                continue
            body = node.child_by_field_name("body")
            halving = halving_variable(module, node) is not None
            if not (halving and body is not None and synchronises(module, body)):
                if tree_reduction(module, node, shared) is not None:
                    found = True
                    yield Skip(
                        "a loop that synchronises and combines shared elements, but its stride does not "
                        "halve from N / 2 (interleaved addressing?): not a tree the pass can prove",
                        label,
                        loop.span,
                    )
                continue
            found = True
            tree = _recognise(module, target, node, known)
            if isinstance(tree, str):
                yield Skip(tree, label, loop.span)
            else:
                yield TreeSite(label, loop.span, loop, tree)
        if not found:
            yield Skip(
                "no loop halving a stride with __syncthreads() (a shared-memory tree reduction)",
                target.kernel.name,
                target.kernel.span,
            )

    def rewrite(self, site: TreeSite, rw: Rewriter) -> None:
        tree = site.tree
        assert tree is not None
        target = rw.target
        mapping = rw.mapping
        if mapping is None:
            raise Refuse("no launch mapping: cannot state that blocks are whole warps")
        block = mapping.resolved().block
        if len(block) > 1 and any(is_constant(b) != 1 for b in block[1:]):
            raise Refuse("the block is not 1-D: warps would not line up with threadIdx.x")
        module = target.module
        source = module.source
        loop = site.loop
        first = loop.pragma.span.start if loop.pragma is not None else loop.span.start
        line_start = syntax.line_start(source, first)
        if source[line_start:first].strip():
            raise Refuse("the loop shares its line with other code; the rewrite needs lines of its own")
        name = f"WARP_REDUCE_{site.label}"
        macro = rw.knob(name, (0, 1), 0, f"loop {site.label}: 0 shared-memory tree, 1 warp shuffles")
        rw.constraint(f"{name} == 0 or ({block[0]}) % 32 == 0")
        indent = syntax.indentation(source, loop.span.start)
        newline = "\r\n" if b"\r\n" in source else "\n"
        rw.insert(line_start, newline.join(_replacement(tree, name, indent)) + newline)
        node = _for_node(module, loop.span.start)
        assert node is not None
        rw.insert(node.end_byte, newline + "#endif")
        rw.note(
            f"{tree.op} of {tree.count} {tree.element} values in {tree.array}; needs blocks of whole warps"
        )
        del macro


def _for_node(module: Module, start: int) -> ts.Node | None:
    node: ts.Node | None = module.tree.root_node.descendant_for_byte_range(start, start)
    while node is not None and node.type != "for_statement":
        node = node.parent
    return node


def _compact(module: Module, node: ts.Node | None) -> str:
    return re.sub(r"\s+", "", syntax.text(module, node)) if node is not None else ""


def _recognise(module: Module, target: Target, node: ts.Node, known: Mapping[str, object]) -> Tree | str:
    var = loop_variable(module, node)
    assert var is not None
    init = node.child_by_field_name("initializer")
    assert init is not None
    value = init.children_by_field_name("declarator")[0].child_by_field_name("value")
    start = _compact(module, value)
    m = re.fullmatch(r"\(?(.+?)\)?(?:/2|>>1)", start)
    if m is None:
        return f"the stride starts at {start!r}, not at half the element count (N / 2)"
    count = m.group(1).strip("()")
    if count != "blockDim.x" and is_constant_text(count) is None:
        return f"the tree covers {count!r} elements, neither blockDim.x nor a constant"
    cond = _compact(module, node.child_by_field_name("condition"))
    if cond not in (f"{var}>0", f"{var}>=1", f"0<{var}", f"{var}!=0"):
        return f"the loop condition {cond!r} is not `{var} > 0`"
    body = node.child_by_field_name("body")
    assert body is not None
    stmts = (
        [c for c in body.named_children if c.type != "comment"]
        if body.type == "compound_statement"
        else [body]
    )
    syncs = [s for s in stmts if _compact(module, s) == "__syncthreads();"]
    others = [s for s in stmts if s not in syncs]
    if len(syncs) != 1 or len(others) != 1 or others[0].type != "if_statement":
        return "the loop body is not one `if (tid < s) ...` and one __syncthreads()"
    branch = others[0]
    if branch.child_by_field_name("alternative") is not None:
        return "the `if` in the loop has an else branch"
    cond_node = branch.child_by_field_name("condition")
    guard = _compact(module, cond_node).strip("()")
    mg = re.fullmatch(rf"(\w+(?:\.x)?)<{re.escape(var)}", guard)
    if mg is None:
        return f"the guard {guard!r} is not `tid < {var}` (interleaved or strided trees are not recognised)"
    tid = mg.group(1)
    if not _is_thread_x(module, target, tid, node.start_byte):
        return f"{tid} is not threadIdx.x"
    update = branch.child_by_field_name("consequence")
    assert update is not None
    parsed = _update(module, update, tid, var)
    if parsed is None:
        return f"`{syntax.text(module, update).strip()}` is not sdata[tid] = sdata[tid] OP sdata[tid + {var}]"
    array, op, call = parsed
    root = known.get(array)
    shared = next((a for a in module.shared_arrays if a.name == array), None)
    if shared is None or root is None:
        return f"{array} is not a __shared__ array"
    element = " ".join(w for w in shared.type.split() if w not in ("volatile", "const"))
    return Tree(array, element, op, call, count)


def is_constant_text(text: str) -> int | None:
    try:
        return is_constant(text)
    except Exception:
        return None


def _is_thread_x(module: Module, target: Target, name: str, at: int) -> bool:
    if name == "threadIdx.x":
        return True
    locals_ = syntax.local_declarations(module, module.node(target.kernel.body), before=at)
    local = locals_.get(name)
    if local is None or local.value is None:
        return False
    body = module.node(target.kernel.body)
    if assign.reassigned_after(module, body, name, local.declaration.end_byte):
        return False
    value = re.sub(
        r"\s+|\((?:int|unsigned|unsignedint)\)|static_cast<\w+>", "", syntax.text(module, local.value)
    )
    return value.strip("()") == "threadIdx.x"


def _update(module: Module, update: ts.Node, tid: str, var: str) -> tuple[str, str, str] | None:
    """(array, op, call) of ``a[t] += a[t + s]``, ``a[t] = a[t] + a[t + s]``, ``fmaxf(a[t], a[t + s])``.

    The update is one statement (braces allowed) that the reduction recogniser reads as a sum,
    max or min of ``a[t]`` with ``a[t + s]``; a difference (``a[t] -= a[t + s]``) is no tree sum.
    """
    found = update_in(module, update)
    head = re.fullmatch(rf"(\w+)\[{re.escape(tid)}\]", found.name) if found is not None else None
    if found is None or head is None or found.operand is None or found.negated:
        return None
    if found.op not in ("sum", "max", "min"):
        return None
    a = head.group(1)
    if _compact(module, found.operand) not in (f"{a}[{tid}+{var}]", f"{a}[{var}+{tid}]"):
        return None
    if found.op == "sum":
        return a, "sum", ""
    if _CALLS.get(found.call) != found.op:
        return None
    return a, found.op, found.call


def _replacement(tree: Tree, name: str, indent: str) -> list[str]:
    """The shuffle version of the loop, under ``#if KTX_<name>``, ending with ``#else``."""
    a, t = tree.array, tree.element
    i2 = indent + "  "
    i3 = i2 + "  "

    def combine(x: str, y: str) -> str:
        if tree.op == "sum":
            return f"{x} + {y}"
        return f"{tree.call}({x}, {y})"

    pad = f"{t}(0)" if tree.op == "sum" else f"{a}[0]"
    first = f"{a}[threadIdx.x]"
    if tree.count != "blockDim.x":
        first = f"threadIdx.x < {tree.count} ? {a}[threadIdx.x] : {pad}"
    shuffle = f"ktx_v = {combine('ktx_v', '__shfl_down_sync(0xffffffffu, ktx_v, ktx_o)')};"
    return [
        f"#if KTX_{name}",
        f"{indent}{{  // {name}: shuffles inside each warp, one step through {a} across warps",
        f"{i2}const unsigned ktx_lane = threadIdx.x % 32, ktx_warp = threadIdx.x / 32;",
        f"{i2}{t} ktx_v = {first};",
        "#pragma unroll",
        f"{i2}for (int ktx_o = 16; ktx_o > 0; ktx_o /= 2) {shuffle}",
        f"{i2}if (ktx_lane == 0) {a}[ktx_warp * 32] = ktx_v;  // only this thread read that element",
        f"{i2}__syncthreads();",
        f"{i2}if (ktx_warp == 0) {{",
        f"{i3}ktx_v = ktx_lane * 32 < blockDim.x ? {a}[ktx_lane * 32] : {pad};",
        "#pragma unroll",
        f"{i3}for (int ktx_o = 16; ktx_o > 0; ktx_o /= 2) {shuffle}",
        f"{i3}if (ktx_lane == 0) {a}[0] = ktx_v;",
        f"{i2}}}",
        f"{i2}__syncthreads();",
        f"{indent}}}",
        "#else",
    ]
