"""``row-owner``: a kernel whose threads each walk a whole row gives each row to a group of threads.

First-draft row kernels (a layernorm, a softmax) give one row to one thread:
``int idx = blockIdx.x * blockDim.x + threadIdx.x; if (idx < N) { const float* x = inp + idx * C;
for (int i = 0; i < C; i++) m += x[i]; ... }``. A warp's 32 threads then read 32 rows that lie
``C`` floats apart, one sector per element, and a few hundred threads carry the whole tensor. The
knob ``THREADS_PER_ROW`` (1, the original, by default; 32 ... 1024) hands each row to a group of
T threads instead:

* the row index becomes the group index: ``blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32``
  for a warp (T = 32: the original block holds ``blockDim.x / 32`` rows, and the constraint
  ``block % 32 == 0`` keeps warps whole), and ``blockIdx.x`` for T > 32 (the block is the group,
  ``blockDim.x == T``, W = T / 32 warps);
* each sequential loop over the row (unit step, a row-invariant bound) is strided by lanes:
  ``for (int i = ktx_lane; i < C; i += 32)`` with ``ktx_lane = threadIdx.x % 32``, and
  ``for (int i = threadIdx.x; i < C; i += blockDim.x)`` when the block is the group: the lane
  and block-stride forms that vectorize, unroll and cache-hints read;
* accumulators carried across iterations are recognised reductions (``s += e``, ``s -= e``,
  ``s = s + e``, ``m = fmaxf(m, e)`` and the other max/min calls, ``if (e > m) m = e;``),
  reduced right after their loop over the group (``__shfl_xor_sync``, then shared memory across
  warps, every thread combining the warps' values in the same order) with every lane getting
  the result, so the statements after the loop (``m = m / C``, ``s = 1 / sqrtf(v + eps)``) run
  on all lanes alike and later loops see them; a sum that enters its loop with a value other
  than a literal zero is zeroed on the lanes other than lane 0 first, so it is counted once;
* a store outside the row loops (``mean[idx] = m``) is written once, by lane 0;
* the guard ``if (idx < N)`` (or ``if (idx >= N) return;``) is the same for the whole group
  (a warp, or the block), so the shuffles and barriers inside it stay uniform;
* every row loop strides the row the same way, so element ``i`` belongs to the same lane in
  all of them: a loop may write ``out_row[i]`` and a later one read it back (softmax's
  ``out_row[j] /= sum``) with no barrier;
* the launch follows: block ``T`` (T > 32) or the original block, grid ``grid * 32`` (T = 32)
  or ``grid * block`` (T > 32, one block per row the original covered), in the mapping and at
  the file's launches.

The kernel body and each launch are preprocessor groups (``#if T > 32`` / ``#elif T == 32`` /
``#else`` original), so T = 1 instantiates to the original bytes. It refuses, naming the
construct and its line: other uses of the thread builtins, shared memory, barriers or shuffles
already in the kernel, ``__launch_bounds__``, a row loop whose step is not 1 or whose bound it
changes, a variable carried across iterations that is not a recognised reduction (a running
sum read between updates; the online softmax's coupled ``maxval``/``sum`` pair), memory a row
loop writes and another access touches at a different element or outside the row loops,
``break``/``return`` inside a row loop, and loops of other shapes beside the row loops.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field

import tree_sitter as ts
from ktx.ir import Module, syntax
from ktx.ir.affine import Affine, KernelIndex, MemRef
from ktx.ir.facts.assign import assigned
from ktx.ir.facts.reductions import coupled, reads_outside, update_of
from ktx.passes._common import KernelSite, kernel_node, line_of
from ktx.passes._variants import line_bounds

from ktx.passbase import KnobSpec, Option, Pass, Phase, Refuse, Rewriter, Skip, Target

KNOB = "THREADS_PER_ROW"
MACRO = "KTX_" + KNOB
VALUES = (1, 32, 64, 128, 256, 512, 1024)
#: Threads per block when a warp owns a row (0: the original launch's block).
BLOCK_KNOB = "ROW_BLOCK"
BLOCK_MACRO = "KTX_" + BLOCK_KNOB
BLOCK_VALUES = (0, 128, 1024)
_LOOPS = ("for_statement", "while_statement", "do_statement", "for_range_loop")
#: The reductions ktx_row_reduce combines (see HELPERS), and the max/min calls it may stand for
#: (``''``: the branch form ``if (e > m) m = e``).
_COMBINED = frozenset({"sum", "max", "min"})
_CALLS = frozenset({"", "fmaxf", "fmax", "max", "fminf", "fmin", "min"})
_HOLDERS = frozenset({"compound_statement", "else_clause", "if_statement", *_LOOPS})
_ZERO = frozenset({"0", "0.0", "0.0f", "0.f", "0.0F", "0.F", "0.0d"})

#: Reduces a per-lane value over the T threads that own a row; every lane gets the same result.
#: T <= 32: xor shuffles among the group's lanes (its mask, so a warp holding several rows is
#: fine when some of its rows fail the guard). T > 32: the group is the block; warp results meet
#: in shared memory and every thread combines them in the same order (the same bits on all).
HELPERS = """\
#if {macro} > 1
// row-owner: reduce a per-lane value over the T threads that own a row (all lanes get it)
struct ktx_row_sum {{
  template <typename V> __device__ V operator()(V a, V b) const {{ return a + b; }}
}};
struct ktx_row_max {{
  template <typename V> __device__ V operator()(V a, V b) const {{ return max(a, b); }}
}};
struct ktx_row_min {{
  template <typename V> __device__ V operator()(V a, V b) const {{ return min(a, b); }}
}};
template <int T, typename V, typename Op>
__device__ __forceinline__ V ktx_row_reduce(V v, Op op) {{
  constexpr int W = T < 32 ? T : 32;
  const unsigned group = threadIdx.x & 31u & ~(unsigned)(W - 1);  // the group's first lane
  const unsigned mask = W == 32 ? 0xffffffffu : ((1u << W) - 1u) << group;
#pragma unroll
  for (int o = W / 2; o > 0; o /= 2) v = op(v, __shfl_xor_sync(mask, v, o));
  __syncwarp(mask);  // the row's lanes see each other's writes before the loops after the reduction
  if (T > 32) {{
    __shared__ V part[32];
    __syncthreads();
    if ((threadIdx.x & 31u) == 0) part[threadIdx.x / 32] = v;
    __syncthreads();
    v = part[0];
    for (int w = 1; w < T / 32; ++w) v = op(v, part[w]);
  }}
  return v;
}}
#endif
"""


class RowOwner(Pass[KernelSite]):
    name = "row-owner"
    phase = Phase.OWNERSHIP
    summary = "a thread-per-row kernel gives each row to THREADS_PER_ROW threads (a warp or a block)"
    description = __doc__ or ""
    knobs = (
        KnobSpec(
            KNOB,
            "1, 32, 64, 128, 256, 512, 1024 (up to max)",
            "1 (one thread per row, the original)",
            "threads that own a row: lanes stride its loops, reductions over shuffles and shared memory",
        ),
        KnobSpec(
            BLOCK_KNOB,
            "0, 128, 1024 (up to max)",
            "0 (the original block)",
            "threads per block when a warp owns a row (THREADS_PER_ROW = 32): ROW_BLOCK / 32 rows a block",
        ),
    )
    options = (Option("max", "int", 1024, "most threads per row offered"),)
    after = ("expose",)
    conflicts = ("rows-per-block", "split", "coarsen", "cluster-rows")

    def sites(self, target: Target) -> Iterator[KernelSite | Skip]:
        fn = target.kernel
        plan = analyse(target)
        if isinstance(plan, str):
            yield Skip(plan, fn.name, fn.span)
            return
        yield KernelSite(fn.name, fn.span)

    def rewrite(self, site: KernelSite, rw: Rewriter) -> None:
        target = rw.target
        plan = analyse(target)
        if isinstance(plan, str):
            raise Refuse(plan)
        mapping = rw.mapping
        assert mapping is not None
        values = [v for v in VALUES if v <= max(1, self.int_option("max"))]
        rw.knob(KNOB, values, 1, "threads that own a row (1: one thread walks it, as written)")
        module = target.module
        source = module.source
        resolved = mapping.resolved()
        grid0, block0 = resolved.grid[0], resolved.block[0]
        rw.constraint(f"{KNOB} > 32 or ({block0}) % {KNOB} == 0")
        # A warp per row keeps the original block unless ROW_BLOCK says otherwise: llm.c's
        # online8 reads 768-float rows fastest with 32 rows (1024 threads) a block, 1.27x ahead
        # of its own 8 rows (256) on an H200, and the original block is whatever the naive
        # one-thread-per-row launch had; 128 (4 rows a block) spreads a few rows over more SMs.
        # Three values only: a round samples a handful of configs a shape, and every value here
        # adds two (ONLINE) to the space. Only T = 32 reads it (one block per row above a warp,
        # the original below), so other T take 0 and the search meets no duplicate kernels.
        blocks = [v for v in BLOCK_VALUES if v <= max(32, self.int_option("max"))]
        rw.knob(BLOCK_KNOB, blocks, 0, "threads per block when a warp owns a row (0: the original block)")
        rw.constraint(f"{KNOB} == 32 or {BLOCK_KNOB} == 0")
        body = module.facts(target.kernel, target.template_args).body
        open_end = source.find(b"\n", body.start_byte)
        close_start = syntax.line_start(source, body.end_byte - 1)
        if open_end < 0 or open_end >= close_start or source[close_start : body.end_byte - 1].strip():
            raise Refuse(f"line {line_of(body)}: the kernel's braces do not sit on their own lines")
        first = open_end + 1
        wide = _generate(target, plan, first, close_start, block=True)
        narrow = _generate(target, plan, first, close_start, block=False)
        rw.insert(first, f"#if {MACRO} > 32\n{wide}#elif {MACRO} == 32\n{narrow}#else\n")
        rw.insert(close_start, "#endif\n")
        fn_node = kernel_node(target)
        start = syntax.line_start(source, fn_node.start_byte)
        rw.insert(start, HELPERS.format(macro=MACRO))
        self._launchers(rw)
        g0, b0 = mapping.grid[0], mapping.block[0]
        # T = 32 with ROW_BLOCK: the rows the original launch covered (grid x block, one per
        # thread), ROW_BLOCK / 32 of them a block
        warp_grid = f"cdiv(({g0}) * ({b0}) * 32, {BLOCK_KNOB})"
        grid = (
            f"{warp_grid} if {KNOB} == 32 and {BLOCK_KNOB} > 0 "
            f"else ({g0}) * (({b0}) if {KNOB} > 32 else {KNOB})"
        )
        block = f"{KNOB} if {KNOB} > 32 else ({BLOCK_KNOB} if {KNOB} == 32 and {BLOCK_KNOB} > 0 else ({b0}))"
        rw.set_mapping(mapping.with_grid((grid,)).with_block((block,)))
        loops = ", ".join(f"line {line_of(r.node)}" for r in plan.loops)
        rw.note(f"row index {plan.row} (line {plan.row_line}); row loops at {loops}")
        for r in plan.loops:
            for acc, op in r.reductions:
                rw.note(f"{acc} is a {op} over the row's lanes after the loop at line {line_of(r.node)}")
        del site, grid0

    def _launchers(self, rw: Rewriter) -> None:
        """Each ``kernel<<<grid, block>>>`` in the file gets a variant with the new geometry."""
        from ktx.ir.launch import launch_dims

        module = rw.target.module
        for launch in rw.target.launches:
            grid = launch_dims(module, launch, "grid")
            block = launch_dims(module, launch, "block")
            if len(grid.components) != 1 or len(block.components) != 1:
                raise Refuse(f"the launch at line {launch.span.line} has a second grid or block dimension")
            g, b = grid.components[0], block.components[0]
            gt, bt = syntax.text(module, g), syntax.text(module, b)
            stmt = syntax.statement_of(module.node(launch.span))
            first, last = line_bounds(module.source, stmt.start_byte, stmt.end_byte)
            if module.source[first : stmt.start_byte].strip() or module.source[stmt.end_byte : last].strip():
                raise Refuse(f"line {launch.span.line}: the launch does not sit on lines of its own")

            wide = _with(module.source, first, last, ((g, f"({gt}) * ({bt})"), (b, MACRO)))
            m = BLOCK_MACRO
            rows = f"(({gt}) * ({bt}) * 32 + {m} - 1) / {m}"  # the original's rows, {m} / 32 a block
            blocked = _with(module.source, first, last, ((g, rows), (b, m)))
            narrow = _with(module.source, first, last, ((g, f"({gt}) * 32"), (b, bt)))
            narrow = f"{blocked}\n#elif {MACRO} == 32\n{narrow}"
            warp = f"{MACRO} == 32 && {BLOCK_MACRO} > 0"
            rw.insert(first, f"#if {MACRO} > 32\n{wide}\n#elif {warp}\n{narrow}\n#else\n")
            rw.insert(last, "\n#endif")


def _with(source: bytes, first: int, last: int, subs: tuple[tuple[ts.Node, str], ...]) -> str:
    """Bytes ``[first, last)`` of ``source`` with each node's text replaced."""
    new = bytearray(source[first:last])
    for node, text in sorted(subs, key=lambda s: s[0].start_byte, reverse=True):
        new[node.start_byte - first : node.end_byte - first] = text.encode()
    return new.decode()


# -- analysis --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class RowLoop:
    """A sequential loop over the row and what changes in it."""

    node: ts.Node
    var: str
    start: ts.Node | None
    """The initial value's node (``0`` in ``int i = 0``)."""
    update: ts.Node
    reductions: tuple[tuple[str, str], ...]
    """(accumulator, ``sum``/``max``/``min``), in order of first update."""
    resets: tuple[str, ...]
    """Sum accumulators whose value entering the loop is not a literal zero: lanes other than
    lane 0 start them at zero, so the value is counted once."""


@dataclass(frozen=True)
class Plan:
    row: str
    row_line: int
    row_value: ts.Node
    decl: ts.Node
    loops: tuple[RowLoop, ...]
    lane0: tuple[ts.Node, ...]
    """Statements outside the row loops that store to memory: lane 0 writes them."""


@dataclass
class _State:
    loops: list[RowLoop] = field(default_factory=list)
    lane0: list[ts.Node] = field(default_factory=list)


def analyse(target: Target) -> Plan | str:
    """The rewrite plan for ``target``'s kernel, or the reason it cannot be rewritten."""
    module = target.module
    fn = target.kernel
    index = module.facts(fn, target.template_args).index
    body = index.body
    builtins = _builtin_reads(module, body)
    ti = index.thread_index("x")
    if ti is None:
        # say where the kernel's own mapping is (ggml's soft_max_f32: `tid = threadIdx.x` and
        # the row from blockIdx, a block per row already), so the refusal names a construct
        reads = [
            next((f"{syntax.text(module, n)} (line {line_of(n)})" for n in builtins if syntax.text(module, n)
                  .startswith(b)), "")
            for b in ("threadIdx", "blockIdx")
        ]  # fmt: skip
        seen = " and ".join(r for r in reads if r)
        return (
            f"the kernel reads {seen or 'no thread or block index'}, but no thread index "
            "(blockIdx.x * blockDim.x + threadIdx.x) names the row: not a thread-per-row kernel"
        )
    decl = ti.decl  # the declaration statement (ktx.ir.index_facts.ThreadIndex.decl)
    if decl.parent is None or decl.parent.id != body.id:
        return f"line {ti.line}: the thread index {ti.var} is not declared at the kernel's top level"
    value = _init_value(decl, ti.var)
    if value is None:
        return f"line {ti.line}: {ti.var} has no initialiser"
    if len(decl.children_by_field_name("declarator")) != 1:
        return f"line {ti.line}: the declaration of {ti.var} declares more than one name"
    for n in builtins:
        if value.start_byte <= n.start_byte < value.end_byte:
            continue
        return (
            f"line {line_of(n)}: the kernel reads {syntax.text(module, n)} beside the thread index "
            f"{ti.var}: a group of threads per row would change what it means"
        )
    shared = [a for a in module.shared_arrays if a.function == fn.name]
    if shared:
        return f"the kernel uses shared memory ({shared[0].name}): its threads already cooperate"
    for names, what in ((syntax.BARRIERS, "a barrier"), (syntax.SHUFFLES, "a shuffle")):
        call = next(iter(syntax.calls(module, body, names)), None)
        if call is not None:
            callee = syntax.text(module, call).split("(")[0]
            return f"line {line_of(call)}: {what} ({callee}): its threads already cooperate"
    if target.mapping is None:
        return "no launch mapping: the grid and block cannot be changed in step"
    m = target.mapping.resolved()
    if len(m.grid) > 1 or len(m.block) > 1:
        return "the launch has a second grid or block dimension"
    if target.kernel.launch_bounds is not None:
        return "the kernel declares __launch_bounds__, which a block of THREADS_PER_ROW threads may exceed"
    state = _State()
    try:
        _region(index, body, decl, state)
    except _Refusal as r:
        return r.reason
    if not state.loops:
        return (
            f"no loop walks a row: each thread computes its element(s) without a sequential loop "
            f"over the row indexed by {ti.var}"
        )
    why = _memory_conflict(index, state)
    if why:
        return why
    return Plan(ti.var, ti.line, value, decl, tuple(state.loops), tuple(state.lane0))


def _builtin_reads(module: Module, body: ts.Node) -> list[ts.Node]:
    """The kernel's reads of ``threadIdx``, ``blockIdx``, ``blockDim`` and ``gridDim`` (their
    field expressions), in source order."""
    out = []
    for n in syntax.walk(body):
        if n.type != "field_expression":
            continue
        arg = n.child_by_field_name("argument")
        if arg is not None and syntax.text(module, arg) in ("threadIdx", "blockIdx", "blockDim", "gridDim"):
            out.append(n)
    return out


class _Refusal(Exception):
    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


def _init_value(decl: ts.Node, var: str) -> ts.Node | None:
    for d in decl.children_by_field_name("declarator"):
        if d.type == "init_declarator":
            return d.child_by_field_name("value")
    del var
    return None


def _region(index: KernelIndex, node: ts.Node, decl: ts.Node, state: _State) -> None:
    """Walk statements the whole group runs alike: row loops, stores, nested ifs."""
    for stmt in node.named_children:
        if stmt.type != "comment" and stmt.id != decl.id:
            _statement(index, stmt, decl, state)


def _statement(index: KernelIndex, stmt: ts.Node, decl: ts.Node, state: _State) -> None:
    """One statement outside the row loops: a row loop, a block, an if, or a plain statement
    whose stores lane 0 writes."""
    module = index.module
    if stmt.type == "compound_statement":
        _region(index, stmt, decl, state)
    elif stmt.type == "else_clause":
        for c in stmt.named_children:
            _statement(index, c, decl, state)
    elif stmt.type == "if_statement":
        _no_stores(index, stmt.child_by_field_name("condition"))
        for part in ("consequence", "alternative"):
            branch = stmt.child_by_field_name(part)
            if branch is not None:
                _statement(index, branch, decl, state)
    elif stmt.type == "for_statement":
        if stmt.parent is None or stmt.parent.type != "compound_statement":
            raise _Refusal(
                f"line {line_of(stmt)}: the for loop is the body of a statement without braces: its "
                "reduction would land outside that statement"
            )
        state.loops.append(_row_loop(index, stmt))
    elif stmt.type in ("preproc_if", "preproc_ifdef"):
        raise _Refusal(
            f"line {line_of(stmt)}: a preprocessor group (#if) in the kernel body, such as an earlier "
            "pass writes: run row-owner before vectorize, tile and the other loop passes"
        )
    elif stmt.type in _LOOPS:
        raise _Refusal(
            f"line {line_of(stmt)}: a {stmt.type.replace('_statement', '')} loop beside the row loops: "
            "only `for (i = start; i < bound; i++)` loops over the row are rewritten"
        )
    elif stmt.type != "comment":
        if any(n.type in _LOOPS for n in syntax.walk(stmt)):
            raise _Refusal(f"line {line_of(stmt)}: a loop nested in a statement beside the row loops")
        writes = [a for a in index.accesses(stmt) if a.writes]
        if writes:
            if stmt.type != "expression_statement":
                raise _Refusal(f"line {line_of(stmt)}: a store inside a {stmt.type.replace('_', ' ')}")
            sets = sorted(assigned(module, stmt))
            if sets:
                raise _Refusal(
                    f"line {line_of(stmt)}: `{_statement_text(module, stmt)}` stores to memory and sets "
                    f"{sets[0]}: written by lane 0 alone, the other lanes would not have {sets[0]}"
                )
            state.lane0.append(stmt)


def _no_stores(index: KernelIndex, node: ts.Node | None) -> None:
    if node is None:
        return
    for a in index.accesses(node):
        if a.writes:
            raise _Refusal(f"line {a.line}: a condition writes {a.pointer}[...]")


def _row_loop(index: KernelIndex, loop: ts.Node) -> RowLoop:
    """``for (i = s; i < bound; i++)`` with a row-invariant bound, and its carried variables."""
    module = index.module
    line = line_of(loop)
    init = loop.child_by_field_name("initializer")
    cond = loop.child_by_field_name("condition")
    update = loop.child_by_field_name("update")
    body = loop.child_by_field_name("body")
    if init is None or cond is None or update is None or body is None:
        raise _Refusal(f"line {line}: the for loop lacks an initialiser, condition or update")
    var, start = _loop_var(module, init)
    if var is None:
        raise _Refusal(f"line {line}: the for loop's initialiser does not set one loop variable")
    if init.type != "declaration":
        raise _Refusal(
            f"line {line}: the loop variable {var} is declared outside the loop: its final value, "
            "used after it, would differ from lane to lane"
        )
    step = index._step(update, var)
    if step is None or not step.is_const or step.const != 1:
        raise _Refusal(
            f"line {line}: the loop over {var} steps by `{syntax.text(module, update)}`, not by 1: "
            "only loops in which one thread walks the row element by element are rewritten"
        )
    c = cond
    while c.type in ("parenthesized_expression", "condition_clause") and c.named_children:
        c = c.named_children[0]
    op = c.child_by_field_name("operator")
    left = c.child_by_field_name("left")
    bound = c.child_by_field_name("right")
    if (
        c.type != "binary_expression"
        or op is None
        or op.type not in ("<", "<=")
        or left is None
        or bound is None
        or syntax.text(module, left).strip() != var
    ):
        raise _Refusal(
            f"line {line}: the loop's condition `{syntax.text(module, cond)}` is not `{var} < bound`"
        )
    written = assigned(module, body)
    if var in written:
        raise _Refusal(f"line {line_of(written[var][0])}: the loop body writes the loop variable {var}")
    changed = sorted(syntax.names_in(module, bound) & set(written))
    if changed:
        raise _Refusal(
            f"line {line}: the loop's bound `{syntax.text(module, bound)}` is not row-invariant: "
            f"the loop writes {changed[0]}"
        )
    for n in syntax.walk(body):
        if n.type in ("break_statement", "return_statement", "goto_statement"):
            raise _Refusal(
                f"line {line_of(n)}: `{n.type.split('_')[0]}` inside the row loop at line {line}: "
                "the lanes would leave it at different iterations"
            )
    local = syntax.declared_names(module, body)
    for w in syntax.memory_writes(module, body):
        target = w.child_by_field_name("left") or w.child_by_field_name("argument")
        base = _base_name(module, target)
        info = index.locals.get(base) if base else None
        if base and base not in local and info is not None and not info.pointer:
            raise _Refusal(
                f"line {line_of(w)}: the row loop at line {line} writes `{_statement_text(module, w)}` into "
                f"the local {base}, declared outside it: each lane would hold only its own part of it"
            )
    reductions, resets = _carried(index, loop, body, var, written, local)
    return RowLoop(loop, var, start, update, reductions, resets)


def _loop_var(module: Module, init: ts.Node) -> tuple[str | None, ts.Node | None]:
    """The loop variable an initialiser sets (``int i = 0`` or ``i = 0``) and its value's node."""
    if init.type == "declaration":
        decls = init.children_by_field_name("declarator")
        if len(decls) == 1 and decls[0].type == "init_declarator":
            ident = syntax.declarator_identifier(decls[0])
            if ident is not None:
                return syntax.text(module, ident), decls[0].child_by_field_name("value")
        return None, None
    n = init
    if n.type == "assignment_expression":
        left = n.child_by_field_name("left")
        op = n.child_by_field_name("operator")
        if left is not None and left.type == "identifier" and op is not None and op.type == "=":
            return syntax.text(module, left), n.child_by_field_name("right")
    return None, None


def _carried(
    index: KernelIndex,
    loop: ts.Node,
    body: ts.Node,
    var: str,
    written: dict[str, list[ts.Node]],
    local: set[str],
) -> tuple[tuple[tuple[str, str], ...], tuple[str, ...]]:
    """The loop's carried variables, each a recognised reduction, else a refusal."""
    module = index.module
    line = line_of(loop)
    out: list[tuple[str, str]] = []
    resets: list[str] = []
    pair = coupled(module, body, written, local)
    if pair is not None:
        a, b, at = pair
        raise _Refusal(
            f"line {line_of(at)}: the update of {a} reads {b}, which the row loop at line {line} also "
            "carries: a coupled pair such as the online softmax's running max and rescaled sum is not "
            "a reduction this pass splits across lanes"
        )
    for name, nodes in written.items():
        if name in local:
            continue
        ops: set[str] = set()
        owned: list[ts.Node] = []
        for node in nodes:
            update = update_of(module, node, name)
            if update is None or update.op not in _COMBINED or update.call not in _CALLS:
                raise _Refusal(
                    f"line {line_of(node)}: `{_statement_text(module, node)}` carries "
                    f"{name} from one iteration of the row loop at line {line} to the next, and is not a "
                    "reduction this pass knows (s += e, s = s + e, m = fmaxf(m, e), max/min, "
                    "if (e > m) m = e)"
                )
            ops.add(update.op)
            owned.append(update.statement)
        if len(ops) != 1:
            raise _Refusal(
                f"line {line}: {name} is updated with different operators ({', '.join(sorted(ops))})"
            )
        read = reads_outside(module, body, name, owned)
        if read is not None:
            raise _Refusal(
                f"line {line_of(read)}: the row loop at line {line} reads {name} between its updates: "
                "a lane would see only its own partial value"
            )
        op = ops.pop()
        out.append((name, op))
        if op == "sum" and not _zero_on_entry(index, loop, name):
            resets.append(name)
    out.sort(key=lambda p: min(n.start_byte for n in written[p[0]]))
    return tuple(out), tuple(resets)


def _base_name(module: Module, node: ts.Node | None) -> str:
    """The variable at the root of ``a[i].x[j]`` (``a``), or ``""``."""
    while node is not None and node.type in (
        "subscript_expression",
        "field_expression",
        "parenthesized_expression",
    ):
        node = node.child_by_field_name("argument") or (
            node.named_children[0] if node.named_children else None
        )
    return syntax.text(module, node) if node is not None and node.type == "identifier" else ""


def _statement_text(module: Module, node: ts.Node) -> str:
    """The statement holding ``node`` (not the loop around a braceless body), on one line."""
    cur = node
    while cur.parent is not None and cur.parent.type not in _HOLDERS:
        cur = cur.parent
    return " ".join(syntax.text(module, cur).split())


def _zero_on_entry(index: KernelIndex, loop: ts.Node, name: str) -> bool:
    """Whether ``name`` enters ``loop`` as its declaration's literal zero (nothing writes it before)."""
    module = index.module
    decls = syntax.local_declarations(module, index.body, loop.start_byte)
    d = decls.get(name)
    if d is None:
        return False
    value = getattr(d, "value", None)
    if value is None or syntax.text(module, value).strip() not in _ZERO:
        return False
    for n in syntax.walk(index.body):
        if n.start_byte >= loop.start_byte:
            break
        if n.type in ("assignment_expression", "update_expression"):
            target = n.child_by_field_name("left") or n.child_by_field_name("argument")
            if target is not None and syntax.text(module, target).strip() == name:
                return False
    return True


def _memory_conflict(index: KernelIndex, state: _State) -> str:
    """An array a row loop writes must be touched at the loop's own element only.

    Every row loop strides the same way, so element ``base + i`` belongs to the same lane in
    all of them: a write there and a read there in any row loop stay in one thread. A read of
    another element, an unknown index, or an access outside the row loops could see another
    lane's write.
    """
    in_loops: list[tuple[RowLoop, MemRef]] = []
    for r in state.loops:
        for a in index.accesses(r.node):
            in_loops.append((r, a))
    written = {a.root for _, a in in_loops if a.writes}
    module = index.module
    bases: dict[str, tuple[Affine, MemRef]] = {}
    for r, a in in_loops:
        if a.root not in written:
            continue
        what = " ".join(syntax.text(module, a.node).split())
        if not a.root:
            return (
                f"line {a.line}: the row loop at line {line_of(r.node)} writes through {a.pointer}, "
                "whose origin is unknown"
            )
        idx = a.index
        coeff = idx.coeff(r.var) if idx is not None else None
        if idx is None or coeff is None or not coeff.equals(Affine.of(1)) or a.width not in (1, None):
            return (
                f"line {a.line}: {what} touches {a.root}, which a row loop writes, at an index that is not "
                f"the row's offset + {r.var}: another lane may own that element"
            )
        base = idx.without(r.var)
        seen = bases.get(a.root)
        if seen is not None and not seen[0].equals(base):
            other = " ".join(syntax.text(module, seen[1].node).split())
            return (
                f"line {a.line}: {what} and {other} (line {seen[1].line}) touch different elements of "
                f"{a.root}, which a row loop writes: with lanes striding the row another lane may own one"
            )
        bases.setdefault(a.root, (base, a))
    lane0 = {n.id for stmt in state.lane0 for n in syntax.walk(stmt)}
    alone: dict[str, MemRef] = {}
    for stmt in state.lane0:
        for a in index.accesses(stmt):
            if a.writes and a.root:
                alone.setdefault(a.root, a)
    for a in index.accesses():
        first = alone.get(a.root)
        if first is not None and a.node.id not in lane0:
            what = " ".join(syntax.text(index.module, a.node).split())
            return (
                f"line {a.line}: {what} touches {a.root}, which lane 0 alone writes at line {first.line}: "
                "the other lanes would not see that write"
            )
    inside = {a.node.id for _, a in in_loops}
    for a in index.accesses():
        if a.root in written and a.node.id not in inside:
            what = " ".join(syntax.text(index.module, a.node).split())
            return (
                f"line {a.line}: {what} touches {a.root} outside the row loops, and a row loop writes it: "
                "another lane may own that element"
            )
    return ""


# -- text ------------------------------------------------------------------------------------------


def _generate(target: Target, plan: Plan, first: int, last: int, block: bool) -> str:
    """The kernel body's lines ``[first, last)`` rewritten for a group of threads per row."""
    module = target.module
    source = module.source
    lane = "threadIdx.x" if block else "ktx_lane"
    stride = "blockDim.x" if block else "32"
    group = MACRO if block else "32"
    edits: list[tuple[int, int, str]] = []
    row = "blockIdx.x" if block else "blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32"
    edits.append((plan.row_value.start_byte, plan.row_value.end_byte, row))
    if not block:
        start = syntax.line_start(source, plan.decl.start_byte)
        indent = syntax.indentation(source, plan.decl.start_byte)
        edits.append((start, start, f"{indent}const int ktx_lane = threadIdx.x % 32;\n"))
    for r in plan.loops:
        indent = syntax.indentation(source, r.node.start_byte)
        if r.start is None:
            raise Refuse(f"line {line_of(r.node)}: the loop's start has no value")
        s = syntax.text(module, r.start).strip()
        new_start = lane if s in ("0", "0u", "0U", "0l", "0L") else f"{s} + {lane}"
        edits.append((r.start.start_byte, r.start.end_byte, new_start))
        edits.append((r.update.start_byte, r.update.end_byte, f"{r.var} += {stride}"))
        if r.resets:
            ls = syntax.line_start(source, r.node.start_byte)
            text = "".join(f"{indent}if ({lane} != 0) {acc} = 0;\n" for acc in r.resets)
            edits.append((ls, ls, text))
        if r.reductions:
            tail = "".join(
                f"\n{indent}{acc} = ktx_row_reduce<{group}>({acc}, ktx_row_{op}());"
                for acc, op in r.reductions
            )
            edits.append((r.node.end_byte, r.node.end_byte, tail))
    for stmt in plan.lane0:
        braces = stmt.parent is not None and stmt.parent.type != "compound_statement"
        edits.append((stmt.start_byte, stmt.start_byte, ("{ " if braces else "") + f"if ({lane} == 0) "))
        if braces:  # `if (c) out[r] = v; else ...`: the else must not bind to the lane test
            edits.append((stmt.end_byte, stmt.end_byte, " }"))
    out = bytearray(source[first:last])
    for a, b, text in sorted(edits, key=lambda e: (e[0], e[1]), reverse=True):
        if not (first <= a <= b <= last):
            raise Refuse(f"an edit at byte {a} falls outside the kernel body (a pass bug)")
        out[a - first : b - first] = text.encode()
    return out.decode()
