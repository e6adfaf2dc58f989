"""What ``expose`` must know before it turns a constant into a knob (issue 18, item 4).

A knob is a promise that any of its values computes the same result, only faster or slower; the
search relies on it and the shipped source must be what was measured. Four ways a constant
breaks that promise, each found here from the source alone:

* **static_assert**: the kernel states which values it supports (``VEC * sizeof(T) <= 16``);
  values it rejects are dropped from the domain, and a constant fed to an assert ktx cannot
  evaluate is not offered at all.
* **derived**: ``NUM_WARPS = THREADS / 32`` follows ``THREADS``; two independent knobs would
  let the search break the relation the author wrote.
* **what is computed**: a constant that sizes the data (``token * TOPK * d``), or that the
  spec sets from a shape variable (``template_args = [..., "{topk}"]``), selects the problem,
  not how it is solved.
* **warp-sized x**: a block x of 32 where the kernel, or a device function it calls, shuffles
  across the warp: the helpers assume ``blockDim.x == warpSize``.

And one way the shipped source could differ from the measured one: a launch literal written
twice in the expression it sets (``d < 1024 ? d : 1024``) must change everywhere in that
expression, so :func:`region_literals` finds every copy.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence

import tree_sitter as ts
from ktx.ir import Function, Module, Span, syntax
from ktx.ir.consteval import SIZEOF, int_literal

_CMP: dict[str, Callable[[int, int], int]] = {
    "<": lambda a, b: int(a < b),
    "<=": lambda a, b: int(a <= b),
    ">": lambda a, b: int(a > b),
    ">=": lambda a, b: int(a >= b),
    "==": lambda a, b: int(a == b),
    "!=": lambda a, b: int(a != b),
    "&&": lambda a, b: int(bool(a) and bool(b)),
    "||": lambda a, b: int(bool(a) or bool(b)),
    "+": lambda a, b: a + b,
    "-": lambda a, b: a - b,
    "*": lambda a, b: a * b,
    "<<": lambda a, b: a << b if 0 <= b < 64 else 0,
    ">>": lambda a, b: a >> b if 0 <= b < 64 else 0,
    "&": lambda a, b: a & b,
    "|": lambda a, b: a | b,
    "^": lambda a, b: a ^ b,
}


def evaluate(node: ts.Node, env: Mapping[str, int], types: Mapping[str, str]) -> int | None:
    """A C constant expression's value (comparisons and logic give 0 or 1), or None when it
    reads anything unknown. ``types`` maps template type parameters to their arguments, so
    that ``sizeof(T)`` has a size."""
    kind = node.type
    text = (node.text or b"").decode()
    if kind == "number_literal":
        return int_literal(text)
    if kind in ("true", "false"):
        return int(kind == "true")
    if kind == "identifier":
        return env.get(text)
    if kind in ("parenthesized_expression", "condition_clause"):
        inner = node.named_children
        return evaluate(inner[0], env, types) if len(inner) == 1 else None
    if kind == "unary_expression":
        op, arg = node.child_by_field_name("operator"), node.child_by_field_name("argument")
        value = evaluate(arg, env, types) if arg is not None else None
        if op is None or value is None:
            return None
        return {"-": -value, "+": value, "~": ~value, "!": int(not value)}.get((op.text or b"").decode())
    if kind == "binary_expression":
        left, right = node.child_by_field_name("left"), node.child_by_field_name("right")
        op = node.child_by_field_name("operator")
        if left is None or right is None or op is None:
            return None
        a, b = evaluate(left, env, types), evaluate(right, env, types)
        name = (op.text or b"").decode()
        if a is None or b is None:
            return None
        if name in ("/", "%"):
            if b == 0:
                return None
            quotient = int(a / b)
            return quotient if name == "/" else a - b * quotient
        fn = _CMP.get(name)
        return None if fn is None else fn(a, b)
    if kind == "conditional_expression":
        cond = node.child_by_field_name("condition")
        yes, no = node.child_by_field_name("consequence"), node.child_by_field_name("alternative")
        c = evaluate(cond, env, types) if cond is not None else None
        if c is None or yes is None or no is None:
            return None
        return evaluate(yes if c else no, env, types)
    if kind == "sizeof_expression":
        target = node.child_by_field_name("type") or node.child_by_field_name("value")
        if target is None:
            return None
        name = " ".join((target.text or b"").decode().strip("() ").split())
        name = types.get(name, name)
        return SIZEOF.get(" ".join(name.replace("const", "").split()))
    if kind == "cast_expression":
        operand = node.child_by_field_name("value")
        return evaluate(operand, env, types) if operand is not None else None
    return None


def _word(name: str) -> re.Pattern[str]:
    return re.compile(rf"\b{re.escape(name)}\b")


def _constants(module: Module) -> list[tuple[str, ts.Node]]:
    """Every named integer constant's value node (``constexpr``, ``#define``), in file order."""
    found: list[tuple[int, str, ts.Node]] = []
    for k in module.constants:
        found.append((k.value_span.start, k.name, module.node(k.value_span)))
    for m in module.macros:
        if m.value_span is not None and m.int_value is not None:
            found.append((m.value_span.start, m.name, module.node(m.value_span)))
    return [(name, node) for _, name, node in sorted(found, key=lambda f: f[0])]


def _env_with(module: Module, name: str, value: int, types: Mapping[str, str]) -> dict[str, int]:
    """The module's integer constants with ``name`` set to ``value`` and the ones computed from it
    recomputed (``NUM_WARPS = THREADS / 32``), in file order."""
    env = {k.name: k.int_value for k in module.constants if k.int_value is not None}
    env.update({m.name: m.int_value for m in module.macros if m.int_value is not None})
    env[name] = value
    for other, node in _constants(module):
        if other == name:
            continue
        recomputed = evaluate(node, env, types)
        if recomputed is not None:
            env[other] = recomputed
    return env


def static_asserts(module: Module, name: str, scope: Span | None = None) -> list[ts.Node]:
    """The ``static_assert`` declarations whose condition reads ``name``, directly or through a
    constant computed from it.

    ``scope``: ``name`` is a template parameter of the function at that span, so only its own
    asserts and those outside every function speak of it. ggml's ``norm.cu`` names the template
    parameter ``block_size`` in several kernels, and ``rms_norm_f32``'s
    ``static_assert(block_size == 1024)`` says nothing of ``norm_f32``'s."""
    reads = {name}
    for other, node in _constants(module):
        if any(_word(r).search((node.text or b"").decode()) for r in reads):
            reads.add(other)
    found = []
    for n in syntax.walk(module.tree.root_node):
        if n.type != "static_assert_declaration":
            continue
        cond = n.child_by_field_name("condition")
        text = (cond.text or b"").decode() if cond is not None else ""
        if scope is not None and not _in_scope(n, scope):
            continue
        if any(_word(r).search(text) for r in reads):
            found.append(n)
    return found


def _in_scope(node: ts.Node, scope: Span) -> bool:
    """Whether ``node`` lies in ``scope`` or in no function definition at all."""
    if scope.start <= node.start_byte and node.end_byte <= scope.end:
        return True
    up = node.parent
    while up is not None:
        if up.type == "function_definition":
            return False
        up = up.parent
    return True


def allowed_by_asserts(
    module: Module, name: str, values: Sequence[int], types: Mapping[str, str], scope: Span | None = None
) -> tuple[tuple[int, ...], str | None]:
    """(the values every ``static_assert`` reading ``name`` accepts, a refusal or None).

    The refusal is for an assert ktx cannot evaluate (it reads a ``sizeof`` of a struct, say):
    which values it accepts is then unknown, so the constant is no knob. ``scope`` as for
    :func:`static_asserts` (a template parameter: the kernel's span)."""
    asserts = static_asserts(module, name, scope)
    if not asserts:
        return tuple(values), None
    kept: list[int] = []
    for value in values:
        env = _env_with(module, name, value, types)
        verdicts = []
        for node in asserts:
            cond = node.child_by_field_name("condition")
            verdict = evaluate(cond, env, types) if cond is not None else None
            if verdict is None:
                line = node.start_point[0] + 1
                return (), (
                    f"{name} feeds static_assert({_short(cond)}) at line {line}, which ktx cannot "
                    "evaluate for other values"
                )
            verdicts.append(verdict)
        if all(verdicts):
            kept.append(value)
    return tuple(kept), None


def _short(node: ts.Node | None) -> str:
    text = " ".join((node.text or b"").decode().split()) if node is not None else ""
    return text if len(text) <= 60 else text[:57] + "..."


def derived_from(module: Module, name: str, value_span: Span) -> list[str]:
    """The other named constants the value of ``name`` is computed from (``THREADS`` for
    ``NUM_WARPS = THREADS / 32``), or [] for a literal."""
    node = module.node(value_span)
    known = {k.name for k in module.constants} | {m.name for m in module.macros}
    names = [n for n in dict.fromkeys(syntax.names_in(module, node)) if n in known and n != name]
    return sorted(names)


def sizes_the_data(module: Module, body: ts.Node, fn: Function, name: str) -> str | None:
    """A product that multiplies ``name`` with a scalar parameter of the kernel and offsets a
    pointer parameter (``in + token * TOPK * d``, ``x[row * TOPK * d + i]``): ``name`` is then a
    dimension of a buffer's layout, part of what is computed. A tile size that offsets shared
    memory or a local (``tile = Bc * d``) is not. Returns the product with its line, or None."""
    scalars = {p.name for p in fn.params if not p.is_pointer} - {name}
    pointers = {p.name for p in fn.params if p.is_pointer}
    for n in syntax.walk(body):
        if n.type != "binary_expression" or not _is_op(n, "*"):
            continue
        if n.parent is not None and n.parent.type == "binary_expression" and _is_op(n.parent, "*"):
            continue  # the outermost product of a chain
        factors = [(f.text or b"").decode().strip() for f in _factors(n)]
        if name in factors and any(f in scalars for f in factors) and _offsets(n, pointers):
            return f"{' '.join((n.text or b'').decode().split())} at line {n.start_point[0] + 1}"
    return None


def _offsets(node: ts.Node, pointers: set[str]) -> bool:
    """Whether ``node`` is (a term of) the index or offset of a pointer parameter."""
    cur = node
    while cur.parent is not None:
        parent = cur.parent
        if parent.type == "subscript_expression":
            array = parent.child_by_field_name("argument")
            return array is not None and (array.text or b"").decode() in pointers and array != cur
        if parent.type == "binary_expression" and (_is_op(parent, "+") or _is_op(parent, "-")):
            other = [c for c in parent.named_children if c != cur]
            if any((o.text or b"").decode() in pointers for o in other):
                return True
        elif parent.type not in ("parenthesized_expression", "binary_expression", "subscript_argument_list"):
            return False
        cur = parent
    return False


def _is_op(node: ts.Node, op: str) -> bool:
    child = node.child_by_field_name("operator")
    return child is not None and (child.text or b"").decode() == op


def _factors(node: ts.Node) -> Iterable[ts.Node]:
    if node.type == "binary_expression" and _is_op(node, "*"):
        for side in ("left", "right"):
            child = node.child_by_field_name(side)
            if child is not None:
                yield from _factors(child)
    elif node.type == "parenthesized_expression" and len(node.named_children) == 1:
        yield from _factors(node.named_children[0])
    else:
        yield node


def spec_selected(template_arg: str) -> bool:
    """Whether the spec sets a template argument from a shape variable (``{topk}``)."""
    return "{" in template_arg


def named_like_a_variable(name: str, variables: Iterable[str]) -> str | None:
    """The launch mapping's variable that ``name`` spells (``TOPK`` and ``topk``), or None."""
    folded = name.lower().lstrip("k_")
    for var in variables:
        if var.lower() == name.lower() or var.lower().replace("_", "") == folded.replace("_", ""):
            return var
    return None


def reachable(module: Module, fn: Function) -> Iterator[tuple[Function, ts.Node]]:
    """``fn`` and the functions of the file it calls, transitively, each with its node."""
    by_name = {f.name: f for f in module.functions}
    seen: set[str] = set()
    todo = [fn]
    while todo:
        current = todo.pop()
        if current.name in seen:
            continue
        seen.add(current.name)
        node = syntax.function_node(module, current)
        yield current, node
        for call in syntax.calls(module, node):
            callee = call.child_by_field_name("function")
            name = (callee.text or b"").decode() if callee is not None else ""
            if name in by_name and name not in seen:
                todo.append(by_name[name])


def _shuffles(call: ts.Node) -> bool:
    """A warp shuffle: CUDA's, or a project's macro around one (apex's ``WARP_SHFL``, defined in
    a header ktx does not read; older code's ``__shfl_xor``)."""
    callee = call.child_by_field_name("function")
    name = (callee.text or b"").decode() if callee is not None else ""
    return name in syntax.SHUFFLES or "shfl" in name.lower()


def warp_sized_callees(module: Module, fn: Function) -> str | None:
    """The first warp shuffle in ``fn`` or in a function it calls (transitively), as
    ``name() at line N``: there the code assumes whole warps along x."""
    for current, node in reachable(module, fn):
        for call in syntax.calls(module, node):
            if not _shuffles(call):
                continue
            callee = call.child_by_field_name("function")
            where = f"{current.name}()" if current is not fn else "the kernel"
            shown = (callee.text or b"").decode() if callee is not None else "a shuffle"
            return f"{shown} in {where} at line {call.start_point[0] + 1}"
    return None


def lane_of_x(module: Module, fn: Function) -> str | None:
    """Where ``fn`` or a function it calls takes a lane from ``threadIdx.x`` with ``& 31`` or
    ``% 32`` (apex's ``cuWelfordMuSigma2``: ``srcLane = (threadIdx.x + (1 << l)) & 31``, then
    ``threadIdx.y`` as the warp): x is one warp there. Returns ``what in where at line N``."""
    for current, node in reachable(module, fn):
        for n in syntax.walk(node):
            if n.type != "binary_expression" or not (_is_op(n, "&") or _is_op(n, "%")):
                continue
            left, right = n.child_by_field_name("left"), n.child_by_field_name("right")
            if left is None or right is None:
                continue
            if int_literal(syntax.node_text(right)) != (31 if _is_op(n, "&") else 32):
                continue
            if "threadIdx.x" not in "".join(syntax.node_text(left).split()):
                continue
            where = f"{current.name}()" if current is not fn else "the kernel"
            return f"`{' '.join(syntax.node_text(n).split())}` in {where} at line {n.start_point[0] + 1}"
    return None


def unrolled_for_block(module: Module, fn: Function, block: int) -> str | None:
    """Where ``fn``, or a function it calls, is written for a block of ``block`` threads: the
    first step of a tree reduction unrolled by hand (``if (threadIdx.x < 64) v[threadIdx.x] +=
    v[threadIdx.x + 64]`` for 128 threads), or, in a callee, the literal ``block`` beside
    ``threadIdx.x``. Returns ``what in where at line N``, or None.

    Why: such a reduction sums exactly ``block`` partials. cuda-samples fp16ScalarProduct's
    ``reduceInShared_native`` under a block knob: 256 threads left half the partials out
    (wrong result), 32 and 64 read past the shared array (crash); session 9 measured 7 such
    candidates. The kernel's own literal ``block`` is :mod:`ktx.passes.block_size`'s older check."""
    half = block // 2 if block % 2 == 0 else None
    for current, node in reachable(module, fn):
        where = f"{current.name}()" if current is not fn else "the kernel"
        for n in syntax.walk(node):
            if n.type != "binary_expression" or not (_is_op(n, "<") or _is_op(n, "+")):
                continue
            sides = [n.child_by_field_name("left"), n.child_by_field_name("right")]
            texts = ["".join(syntax.node_text(s).split()) for s in sides]
            if "threadIdx.x" not in texts:
                continue
            other = texts[1] if texts[0] == "threadIdx.x" else texts[0]
            value = int_literal(other)
            if value is None or value < 2:
                continue
            if value == half or (value == block and current is not fn):
                shown = " ".join(syntax.node_text(n).split())
                return f"`{shown}` in {where} at line {n.start_point[0] + 1}"
    return None


def assumes_warp_x(module: Module, fn: Function) -> str | None:
    """Why a kernel launched with a block x of 32 assumes that x is one warp, or None.

    It does when it (or a function it calls) shuffles across lanes, or when its body writes the
    literal 32 (``constexpr uint32_t warp_size = 32; thread_id = tx + ty * warp_size``, with the
    shuffles in a header's helper ktx cannot read). Keeping x at the original 32 is then the
    only sound choice; a block-size knob may still vary y.
    """
    if warp_sized_callees(module, fn) is not None:
        return "the kernel shuffles across the lanes of a warp along x"
    lane = lane_of_x(module, fn)
    if lane is not None:
        return f"the lane is {lane}: it assumes x is one warp"
    for n in syntax.walk(module.node(fn.body)):
        if n.type == "number_literal" and int_literal(syntax.text(module, n)) == 32:
            line = n.start_point[0] + 1
            return f"the kernel writes the warp size 32 (line {line}): it assumes x is one warp"
    return None


def region_literals(module: Module, literal: Span, block_arg: Span, value: int) -> list[ts.Node]:
    """Every integer literal equal to ``value`` in the expression a launch literal sets: the
    initializer of the local it sits in (``int t = d < 1024 ? d : 1024``), one argument of a
    ``dim3`` (``dim3 block(d < 1024 ? d : 1024, 4)``: not the other dimensions), or the launch's
    block argument. The literal itself is the first."""
    node = module.node(literal)
    cur = node
    while True:
        parent = cur.parent
        if parent is None or cur.type in ("expression_statement", "compound_statement"):
            return [node]
        if (cur.start_byte, cur.end_byte) == (block_arg.start, block_arg.end):
            break
        if parent.type == "init_declarator":
            break
        if parent.type == "argument_list" and parent.parent is not None:
            owner = parent.parent
            callee = owner.child_by_field_name("function") if owner.type == "call_expression" else None
            if owner.type == "init_declarator" or (callee is not None and callee.text == b"dim3"):
                break
        cur = parent
    same = [
        n
        for n in syntax.walk(cur)
        if n.type == "number_literal" and int_literal((n.text or b"").decode()) == value
    ]
    return [node, *(n for n in same if n.start_byte != node.start_byte)]


def ceil_divide_literals(
    module: Module, grid: Sequence[ts.Node], value: int
) -> tuple[list[ts.Node], list[ts.Node]] | None:
    """The literals of a grid that round up a division by the block's literal ``value``.

    ``<<<(n + 255) / 256, 256>>>``, ``(n + 256 - 1) / 256`` and ``(n - 1) / 256 + 1`` count
    the blocks of 256 threads that cover ``n``: for a knob on the block, each literal 256
    (first list) must become the knob, and a 255 written as one literal (second list) the knob
    minus one, so the grid still covers ``n``. Returns None when a literal ``value`` in the grid
    is anything else (``padded / 16`` does not round up; a grid of ``256`` blocks is not a
    division), since then the grid would not follow the block.
    """
    whole: list[ts.Node] = []
    minus_one: list[ts.Node] = []
    used: set[int] = set()
    for comp in grid:
        for n in syntax.walk(comp):
            if n.type != "binary_expression" or _op(n) != "/":
                continue
            right = n.child_by_field_name("right")
            if right is None or _int(module, right) != value:
                continue
            left = _unparen(n.child_by_field_name("left"))
            if left is None or left.type != "binary_expression":
                continue
            if _op(left) == "+" and _int(module, left.child_by_field_name("right")) == value - 1:
                # ``(n + 255) / 256``
                lit = left.child_by_field_name("right")
                assert lit is not None
                whole.append(right)
                minus_one.append(lit)
                used |= {right.start_byte, lit.start_byte}
            elif _op(left) == "-" and _int(module, left.child_by_field_name("right")) == 1:
                inner = _unparen(left.child_by_field_name("left"))
                parent = n.parent
                grows = (
                    parent is not None
                    and parent.type == "binary_expression"
                    and _op(parent) == "+"
                    and _int(module, parent.child_by_field_name("right")) == 1
                )
                if inner is not None and inner.type == "binary_expression" and _op(inner) == "+":
                    # ``(n + 256 - 1) / 256``
                    lit = inner.child_by_field_name("right")
                    if lit is not None and _int(module, lit) == value:
                        whole += [right, lit]
                        used |= {right.start_byte, lit.start_byte}
                elif grows:
                    # ``(n - 1) / 256 + 1``
                    whole.append(right)
                    used.add(right.start_byte)
    for comp in grid:
        for n in syntax.walk(comp):
            if n.type == "number_literal" and _int(module, n) == value and n.start_byte not in used:
                return None
    return (whole, minus_one) if whole else None


def _op(node: ts.Node) -> str:
    op = node.child_by_field_name("operator")
    return (op.text or b"").decode() if op is not None else ""


def _int(module: Module, node: ts.Node | None) -> int | None:
    if node is None or node.type != "number_literal":
        return None
    return int_literal(syntax.text(module, node))


def _unparen(node: ts.Node | None) -> ts.Node | None:
    while node is not None and node.type == "parenthesized_expression":
        inner = [c for c in node.named_children if c.type != "comment"]
        node = inner[0] if len(inner) == 1 else None
    return node


#: Calls whose arguments size the data a kernel is given (device and host allocations).
_ALLOCATORS = frozenset(
    {
        "cudaMalloc",
        "cudaMallocManaged",
        "cudaMallocHost",
        "cudaMallocAsync",
        "cudaHostAlloc",
        "malloc",
        "calloc",
    }
)


def sizes_the_problem(module: Module, kernel: str, name: str) -> str | None:
    """Where the host code uses the constant ``name`` as the problem the kernel is given, not as
    how it is solved: passed whole as an argument of the kernel's launch (shfl_scan's
    ``uniform_add<<<...>>>(..., n_elements)``: the kernel's ``len``), or sizing an allocation,
    directly (histogram's ``cudaMalloc(&d_Partial, PARTIAL_HISTOGRAM256_COUNT * BINS *
    sizeof(uint))``) or through a local it initialises (``sz = sizeof(int) * n_elements``).

    Why: the spec fixes its buffers' extents and its scalar arguments' values; a knob for such a
    constant changes the grid (which follows it) but not the buffers, so every other value leaves
    part of an output unwritten or reads past an input (session 9's real-code run: 6 histogram
    and 4 uniform_add candidates failed verification). Returns ``what at line N``, or None."""
    for site in module.launches_of(kernel):
        for i, arg in enumerate(site.args):
            if arg.strip() == name:
                return f"it is the kernel's argument {i + 1} at line {site.span.line}"
    root = module.tree.root_node
    carriers = {name}
    for n in syntax.walk(root):
        if n.type == "init_declarator":
            value = n.child_by_field_name("value")
            ident = syntax.declarator_identifier(n)
            if value is not None and ident is not None and name in syntax.names_in(module, value):
                carriers.add(syntax.text(module, ident))
    for call in syntax.calls(module, root, _ALLOCATORS):
        args = call.child_by_field_name("arguments")
        used = syntax.names_in(module, args) & carriers if args is not None else set()
        if used:
            fn = syntax.text(module, call.child_by_field_name("function") or call)
            via = "" if name in used else f" (through {', '.join(sorted(used))})"
            return f"it sizes the {fn} at line {call.start_point[0] + 1}{via}"
    return None
