"""The compile-time settings a kernel's author already made tunable: which template parameters,
``constexpr`` and ``#define`` integers set its block size, items per thread, rows per block or
vector width (issue 22: "every kernel whose block size, items per thread or vector width is a
template parameter or constexpr gets it as a knob").

Why a fact of its own: the passes that turn these into knobs (``expose``, ``block-size``) each
see the constants they take; a checker (``benchmarks/realcode/knobcheck.py``) has to ask the
other way round, per kernel, which settings *exist*, so that one no pass takes is visible as a
gap rather than as silence. The role is read from how the kernel uses the name, most telling
first:

* ``block``: the launch's block size (a :attr:`LaunchFacts.block_aliases` name), a
  ``__launch_bounds__`` argument, or a name that says threads/block size/warps;
* ``vector``: the size argument of a vector type (``vec_t<T, VEC_SIZE>``, ``AlignedVector<T, N>``)
  or a name that says vector/pack/granularity;
* ``rows``: a name that says rows;
* ``items``: the bound of a loop in the kernel (``for (i = 0; i < NUM_PER_TH; ++i)``) or a name
  that says unroll/items/per-thread;
* otherwise it is no tuning setting (``DATA_TYPE``, ``STOCHASTIC``, a ``bool`` switch): it
  selects what is computed.

A value comes from the bound template arguments (the spec's ``template_args``: the
instantiation ktx measures), else from the launches in the file. ``spec_selected`` marks an
argument the spec computes from a shape
(``{cdiv(dim, 2048)}``): the launcher's pick by shape, which a knob would only replace when the
kernel computes the same result at every value.

Two facts go with a setting the spec computes per shape (the launcher's pick):
:func:`items_coverage` (the loops it bounds step the block over the data, each access past it
guarded, so any count covering what the pick covers is correct) and :func:`instantiated_values`
(the integers the file compiles it with, through its dispatch macros): a knob's domain and its
relation to the shape come from them, never from a hand-written list.

>>> from ktx.ir import parse
>>> m = parse('''template <int THREADS, int NUM_PER_TH, int DATA_TYPE>
... __global__ void k(float* y, const float* x) {
...   for (int j = 0; j < NUM_PER_TH; j++) y[threadIdx.x * NUM_PER_TH + j] = x[j] * DATA_TYPE; }''')
>>> [(t.name, t.role, t.value) for t in tuning_params(m, m.kernels[0], ("256", "4", "0"))]
[('THREADS', 'block', 256), ('NUM_PER_TH', 'items', 4)]
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Literal

import tree_sitter as ts
from ktx.ir import Function, Loop, Module, Span, syntax
from ktx.ir.analysis import PerfConstant, perf_constants
from ktx.ir.consteval import int_literal
from ktx.ir.facts.constants import evaluate, sizes_the_data, spec_selected
from ktx.ir.language import parse_tree

Role = Literal["block", "vector", "rows", "items"]

_BLOCK = re.compile(r"THREAD|NTHR|BLOCK_?(SIZE|DIM|X)|^BS$|^BLOCK$|WARPS", re.I)
_VECTOR = re.compile(r"VEC|PACK|GRANULARITY|WIDTH|ALIGN", re.I)
_ROWS = re.compile(r"ROWS", re.I)
_PER_THREAD = re.compile(r"_PER_?TH(READ)?$", re.I)
_ITEMS = re.compile(r"UNROLL|ITEMS|PER_?TH|NUM_PER|ELEMS|_PT$|PER_THREAD", re.I)
#: Threads a block may hold: a "block size" above it counts something else.
_MAX_THREADS = 1024
#: A loop bound larger than this is a problem size (``i < n``), not items per thread.
_MAX_ITEMS = 64
_INTEGRAL = re.compile(r"^(unsigned\s+|signed\s+)?(int|long|short|size_t|u?int(8|16|32|64)_t|uint)$")


@dataclass(frozen=True)
class TuningParam:
    """One author-made setting of the kernel and the role its uses give it."""

    name: str
    kind: Literal["template-int", "constexpr", "define"]
    role: Role
    value: int | None
    """Its value at this launch (the file's launch, else the bound template argument)."""
    span: Span
    why: str
    """What made it this role (the use or the name)."""
    spec_selected: bool = False
    """The spec computes it from a shape (``{...}``): the launcher's pick by shape."""
    index: int | None = None
    """Its position among the kernel's template parameters (template-int only)."""
    adapts: bool = False
    """The kernel derives its coverage from it at run time: a loop steps by it, or a run-time
    extent is divided by it (FlashInfer's ``rounds = ceil_div(d, VEC_SIZE * num_threads)``).
    Then another value still covers the data; a width that only sizes per-thread arrays
    (DeepSpeed's ``T q[granularity / sizeof(T)]``, each thread of a fixed group owning a fixed
    slice) moves the data a launch covers, and the launch with it."""


def tuning_params(module: Module, fn: Function, template_args: Sequence[str] = ()) -> tuple[TuningParam, ...]:
    """The kernel's block-size, vector-width, rows and items-per-thread settings (see the module)."""
    found: list[TuningParam] = []
    block_names = {a.name for a in module.facts(fn, tuple(template_args) or None).launch.block_aliases}
    bounds = _launch_bounds_names(module, fn)
    vector_args = _vector_size_names(module, fn)
    blocks = [site.block for site in module.launches_of(fn.name)]
    own_locals = syntax.local_declarations(module, syntax.function_node(module, fn))
    for c in perf_constants(module):
        if c.kind == "launch-literal":
            continue
        if c.kind == "template-int":
            if c.kernel != fn.name:
                continue
        elif c.name in {tp.name for tp in fn.template_params}:
            continue  # shadowed in the kernel by its own template parameter of that name
        elif not any(fn.span.contains(u.span) or any(b.contains(u.span) for b in blocks) for u in c.uses) or (
            _not_this_kernels(module, fn, c, own_locals)
        ):
            continue
        if any(t.name == c.name for t in found):
            continue  # one setting per name (FasterTransformer declares ``const int ite = 4`` per kernel)
        got = _param(module, fn, c, template_args, block_names, bounds, vector_args)
        if got is not None:
            found.append(got)
    # A kernel's own integral template parameters that perf_constants types otherwise
    # (``uint32_t VEC_SIZE``) are listed too.
    seen = {t.name for t in found}
    for tp in fn.template_params:
        if tp.kind != "value" or tp.name in seen or not _INTEGRAL.match((tp.type or "").strip()):
            continue
        c = PerfConstant(tp.name, "template-int", None, tp.span, fn.name, ())
        got = _param(module, fn, c, template_args, block_names, bounds, vector_args)
        if got is not None:
            found.append(got)
    return tuple(found)


def _not_this_kernels(
    module: Module, fn: Function, c: PerfConstant, own: Mapping[str, syntax.LocalDecl]
) -> bool:
    """Whether the constant ``c`` is not the kernel's setting though the kernel names it: a
    local of another function that does not launch the kernel (FasterTransformer declares ``const
    int ite = 4`` in each of its layernorm kernels), or the kernel's own local computed at run
    time (lightseq's ``const int block_dim = blockDim.x * blockDim.y``: a value, no setting; the
    launcher's ``const int block_dim = 1024`` stays the launch's)."""
    if c.kind not in ("constexpr", "define"):
        return False
    if fn.span.contains(c.span):
        mine = own.get(c.name)
        init = syntax.text(module, mine.value) if mine is not None and mine.value is not None else ""
        return re.search(r"\b(blockDim|threadIdx|blockIdx|gridDim)\b", init) is not None
    host = next((f for f in module.functions if f.body.contains(c.span)), None)
    if host is None:
        return False
    return host.name not in {site.function for site in module.launches_of(fn.name)}


def _param(
    module: Module,
    fn: Function,
    c: PerfConstant,
    template_args: Sequence[str],
    block_names: set[str],
    bounds: set[str],
    vector_args: set[str],
) -> TuningParam | None:
    """``c`` as a tuning setting of ``fn``, or None when its uses give it no role."""
    if c.kind == "launch-literal":
        return None
    value, selected, index = c.value, False, None
    if c.kind == "template-int":
        index = next(i for i, p in enumerate(fn.template_params) if p.name == c.name)
        arg = template_args[index] if index < len(template_args) else ""
        selected = spec_selected(arg)
        bound = int_literal(arg) if arg else None
        value = bound if bound is not None else value
    role_why = _role(module, fn, c, value, block_names, bounds, vector_args)
    if role_why is None:
        return None
    role, why = role_why
    return TuningParam(c.name, c.kind, role, value, c.span, why, selected, index, _adapts(module, fn, c.name))


def _role(
    module: Module,
    fn: Function,
    c: PerfConstant,
    value: int | None,
    block_names: set[str],
    bounds: set[str],
    vector_args: set[str],
) -> tuple[Role, str] | None:
    if c.name in block_names:
        return "block", "the launch's block size"
    if c.name in bounds:
        return "block", "__launch_bounds__"
    if _PER_THREAD.search(c.name):
        return "items", "named as items per thread"  # ``T_per_thread``, ``ITEMS_PER_THREAD``: not a block
    if _BLOCK.search(c.name) and (value is None or value <= _MAX_THREADS):
        # (bitsandbytes' BLOCK_SIZE = 4096 is the quantization block, no thread count)
        return "block", "named as a block size"
    if c.name in vector_args:
        return "vector", "the size of a vector type"
    if _VECTOR.search(c.name):
        return "vector", "named as a vector width"
    if _ROWS.search(c.name):
        return "rows", "named as rows"
    body = syntax.function_node(module, fn)
    if sizes_the_data(module, body, fn, c.name) is not None:
        return None  # a dimension of a buffer's layout (``TOPK``): what is computed, not how fast
    if _layout_pitch(module, body, fn, c.name) is not None:
        return None  # ``input[(token * TOPK + k) * d + i]``: a dimension of the data, not a setting
    if _ITEMS.search(c.name):
        return "items", "named as items per thread"
    for lp in module.loops_in(fn):
        if lp.cond is None or not fn.span.contains(lp.span):
            continue
        bound = re.search(rf"<=?\s*\(?\s*{re.escape(c.name)}\b", module.text(lp.cond))
        if bound is not None and (value is None or value <= _MAX_ITEMS):
            return "items", "a loop bound"
    return None


def _layout_pitch(module: Module, body: ts.Node, fn: Function, name: str) -> str | None:
    """``name`` as a factor of a term of a sum that a scalar parameter then multiplies, inside
    the subscript of a pointer parameter (``input[(token_idx * TOPK + k) * d + idx]``): it then
    counts rows of the data's layout (``[tokens, TOPK, d]``), what is computed. Returns the
    subscript with its line, or None. (:func:`ktx.ir.facts.constants.sizes_the_data` finds the
    flat form ``token * TOPK * d``.)"""
    scalars = {p.name for p in fn.params if not p.is_pointer} - {name}
    pointers = {p.name for p in fn.params if p.is_pointer}
    word = re.compile(rf"\b{re.escape(name)}\b")
    for node in syntax.walk(body):
        if node.type != "subscript_expression":
            continue
        base = node.child_by_field_name("argument")
        if base is None or syntax.text(module, base).strip() not in pointers:
            continue
        for inner in syntax.walk(node):
            if (
                inner.type != "binary_expression"
                or (inner.child_by_field_name("operator") or inner).text != b"*"
            ):
                continue
            factors = list(_product_factors(inner))
            texts = [syntax.text(module, f).strip() for f in factors]
            if not any(t in scalars for t in texts):
                continue
            for f in factors:
                terms = _terms(f)
                if len(terms) > 1 and any(
                    word.search(syntax.text(module, t)) and _is_factor(module, t, name) for t in terms
                ):
                    return f"{' '.join(syntax.text(module, node).split())} at line {node.start_point[0] + 1}"
    return None


def _is_factor(module: Module, term: ts.Node, name: str) -> bool:
    return any(syntax.text(module, f).strip() == name for f in _product_factors(term))


def _launch_bounds_names(module: Module, fn: Function) -> set[str]:
    if fn.launch_bounds is None:
        return set()
    return set(re.findall(r"[A-Za-z_]\w*", fn.launch_bounds.max_threads))


def _vector_size_names(module: Module, fn: Function) -> set[str]:
    """Names written as the last argument of a template type that also takes a type
    (``vec_t<float, VEC_SIZE>``): a vector width."""
    names: set[str] = set()
    for node in syntax.walk(syntax.function_node(module, fn)):
        if node.type != "template_argument_list":
            continue
        args = node.named_children
        if len(args) >= 2 and args[0].type == "type_descriptor":
            last = syntax.text(module, args[-1]).strip()
            if re.fullmatch(r"[A-Za-z_]\w*", last):
                names.add(last)
    return names


def _adapts(module: Module, fn: Function, name: str) -> bool:
    """Whether a loop of the kernel steps by ``name`` or a run-time value is divided by it
    (``n / (VEC * threads)``, ``ceil_div(d, VEC * threads)``), see :attr:`TuningParam.adapts`."""
    word = re.compile(rf"\b{re.escape(name)}\b")
    for lp in module.loops_in(fn):
        if lp.step is not None and word.search(module.text(lp.step)):
            return True
    scalars = {p.name for p in fn.params if not p.is_pointer}
    for node in syntax.walk(syntax.function_node(module, fn)):
        divisor: str | None = None
        dividend = ""
        if node.type == "binary_expression":
            op = node.child_by_field_name("operator")
            if op is not None and syntax.text(module, op) == "/":
                left, right = node.child_by_field_name("left"), node.child_by_field_name("right")
                dividend = syntax.text(module, left) if left is not None else ""
                divisor = syntax.text(module, right) if right is not None else None
        elif node.type == "call_expression":
            callee = node.child_by_field_name("function")
            args = node.child_by_field_name("arguments")
            if callee is not None and args is not None and "div" in syntax.text(module, callee).lower():
                named = args.named_children
                if len(named) == 2:
                    dividend, divisor = syntax.text(module, named[0]), syntax.text(module, named[1])
        if divisor is None or not word.search(divisor):
            continue
        if any(re.search(rf"\b{re.escape(s)}\b", dividend) for s in scalars):
            return True
    return False


# -- an items loop's coverage and the values the file instantiates --------------------------------

#: Names a thread's offset within one step is computed from (the block-strided pattern).
_THREAD_WORDS = re.compile(r"threadIdx|thread_index|thread_rank|lane")
#: Calls that move memory (``mem_access::load_global``, ``__ldg``, ``store``).
_MEMORY_CALL = re.compile(r"(load|store|ldg|stg|__ld|__st)", re.I)
_COMPARISONS = ("<", "<=", ">", ">=")


@dataclass(frozen=True)
class Coverage:
    """What the items loop ``for (i = 0; i < NAME; i++)`` reaches: iteration ``i`` of the block's
    threads together covers ``[i * step, (i + 1) * step)`` of a run-time ``extent``, every access
    past it skipped by a guard (``if (i * stride + off < n)``, a predicate passed to the load,
    or ``if (col >= n) break``).

    Why a fact: a launcher that picks NAME per shape (DeepSpeed's ``copy_unroll = ceil(n /
    (threads * vec))``) picks the least count that covers the data. Any count covers what the
    pick covers when ``count * step`` is at least the pick's ``pick * step``, and the guard makes
    a larger count safe (the extra iterations are skipped); so a knob over the counts is sound
    with that relation, and the pick stays a point of the space (DeepSpeed pre_rms_norm: 2 x
    256 threads x 8 halves = 4096; a block of 512 covers it with 1)."""

    name: str
    step_threads: int
    """The step's factor of ``blockDim.x`` (``stride = blockDim.x * T_per_load``: 8 for halves);
    0 when the step does not follow the block."""
    step_fixed: int
    """The step's part that does not follow the block (``vector_size * gather::threads``: 2048)."""
    extent: str
    """The guard's bound as written (``elems_per_row``, ``dim / 2``)."""
    lines: tuple[int, ...]
    """The guards' lines, one per loop bounded by NAME."""

    def step(self, block_x: str) -> str:
        """The step as an expression of the block's x size (text in the spec's language)."""
        if self.step_threads and self.step_fixed:
            return f"({self.step_threads} * ({block_x}) + {self.step_fixed})"
        if self.step_threads:
            return f"{self.step_threads} * ({block_x})"
        return str(self.step_fixed)


def items_coverage(
    module: Module, fn: Function, name: str, template_args: Sequence[str] = ()
) -> Coverage | None:
    """The :class:`Coverage` of the loops ``fn`` bounds by ``name``, or None when one of them
    is not the block-strided, guarded pattern (an unguarded access, a step ktx cannot evaluate,
    a thread offset that is not the thread's own): then only the launcher's value is known safe."""
    types = _type_bindings(fn, template_args)
    env = _int_env(module)
    locals_ = syntax.local_declarations(module, syntax.function_node(module, fn))
    arrays = _local_arrays(module, fn)
    found: list[tuple[int, int, str, int]] = []
    for lp in module.loops_in(fn):
        if not _counts_to(module, lp, name):
            continue
        assert lp.var is not None
        got = _loop_coverage(module, lp, lp.var, locals_, arrays, env, types)
        if got is None:
            return None
        found.append(got)
    if not found or len({(a, b) for a, b, _, _ in found}) != 1:
        return None
    a, b, extent, _ = found[0]
    if a < 0 or b < 0 or a + b <= 0:
        return None
    return Coverage(name, a, b, extent, tuple(line for *_, line in found))


def _counts_to(module: Module, lp: Loop, name: str) -> bool:
    """``for (int i = 0; i < name; i++)`` (or ``++i``, ``i += 1``)."""
    if lp.var is None or lp.init is None or lp.cond is None or lp.step is None:
        return False
    var = re.escape(lp.var)
    init = module.text(lp.init)
    cond = " ".join(module.text(lp.cond).split())
    step = "".join(module.text(lp.step).split())
    return (
        re.search(rf"\b{var}\s*=\s*0\b", init) is not None
        and re.fullmatch(rf"\(?\s*{var}\s*<\s*\(?\s*{re.escape(name)}\s*\)?\s*\)?\s*;?", cond) is not None
        and step in (f"{lp.var}++", f"++{lp.var}", f"{lp.var}+=1")
    )


def _loop_coverage(
    module: Module,
    lp: Loop,
    var: str,
    locals_: Mapping[str, syntax.LocalDecl],
    arrays: set[str],
    env: Mapping[str, int],
    types: Mapping[str, str],
) -> tuple[int, int, str, int] | None:
    """(step's blockDim.x factor, fixed step, extent, guard line) of one loop, or None."""
    locals_ = {k: v for k, v in locals_.items() if k != var}  # the loop's own variable stays
    body = module.node(lp.body)
    word = re.compile(rf"\b{re.escape(var)}\b")
    statements = (
        [c for c in body.named_children if c.type != "comment"]
        if body.type == "compound_statement"
        else [body]
    )
    guard: tuple[ts.Node, str] | None = None  # the comparison and the local that holds it (or "")
    guarded_after = False
    for stmt in statements:
        if guarded_after:
            continue
        cmp, holder = _guard_in(module, stmt, word, locals_)
        if cmp is not None:
            guard = (cmp, holder)
            if stmt.type == "if_statement" and _exits(stmt):
                if not _past_end(module, cmp, word, locals_):
                    return None
                guarded_after = True
                continue
            if stmt.type == "if_statement":
                if _past_end(module, cmp, word, locals_) or _else(stmt):
                    return None
                continue  # the body runs only within the extent
            if holder:
                if _past_end(module, cmp, word, locals_):
                    return None
                continue  # ``const bool do_loads = (off < n);``
        if guard is not None and guard[1] and stmt.type == "if_statement":
            cond = stmt.child_by_field_name("condition")
            if cond is not None and syntax.text(module, cond).strip("() \n") == guard[1] and not _else(stmt):
                continue
        holder_name = guard[1] if guard is not None else ""
        if _unguarded_access(module, stmt, arrays, holder_name):
            return None
    if guard is None:
        return None
    cmp, _ = guard
    indexed, extent = _sides(module, cmp, word, locals_)
    if indexed is None or extent is None:
        return None
    step = _step_of(module, indexed, var, locals_, env, types)
    if step is None:
        return None
    return (*step, " ".join(syntax.text(module, extent).split()), cmp.start_point[0] + 1)


def _exits(stmt: ts.Node) -> bool:
    """``if (...) break;`` / ``return;`` / ``continue;`` (alone or in braces), no else."""
    cons = stmt.child_by_field_name("consequence")
    if cons is None or _else(stmt):
        return False
    inner = (
        [c for c in cons.named_children if c.type != "comment"]
        if cons.type == "compound_statement"
        else [cons]
    )
    return len(inner) == 1 and inner[0].type in ("break_statement", "return_statement", "continue_statement")


def _else(stmt: ts.Node) -> bool:
    return stmt.child_by_field_name("alternative") is not None


def _expand(module: Module, text: str, locals_: Mapping[str, syntax.LocalDecl], depth: int = 0) -> str:
    """``text`` with the kernel's locals replaced by their initialisers, recursively."""
    if depth > 8:
        return text

    def one(m: re.Match[str]) -> str:
        local = locals_.get(m.group(0))
        if local is None or local.value is None:
            return m.group(0)
        return "(" + _expand(module, syntax.text(module, local.value), locals_, depth + 1) + ")"

    return re.sub(r"(?<![\w.:])[A-Za-z_]\w*(?!\s*\()", one, text)


def _guard_in(
    module: Module, stmt: ts.Node, word: re.Pattern[str], locals_: Mapping[str, syntax.LocalDecl]
) -> tuple[ts.Node | None, str]:
    """A comparison of an index that grows with the loop variable against a bound that does
    not: the condition of an ``if`` statement, or the initialiser of a local (its name)."""
    if stmt.type == "if_statement":
        cond = stmt.child_by_field_name("condition")
        node = _unparen(cond.named_children[0]) if cond is not None and cond.named_children else None
        if node is not None and _is_bound_check(module, node, word, locals_):
            return node, ""
        return None, ""
    if stmt.type == "declaration":
        for decl in stmt.children_by_field_name("declarator"):
            value = decl.child_by_field_name("value") if decl.type == "init_declarator" else None
            target = decl.child_by_field_name("declarator") if decl.type == "init_declarator" else None
            node = _unparen(value) if value is not None else None
            if node is not None and target is not None and _is_bound_check(module, node, word, locals_):
                return node, syntax.text(module, target)
    return None, ""


def _unparen(node: ts.Node) -> ts.Node:
    while node.type in ("parenthesized_expression", "condition_clause") and len(node.named_children) == 1:
        node = node.named_children[0]
    return node


def _is_bound_check(
    module: Module, node: ts.Node, word: re.Pattern[str], locals_: Mapping[str, syntax.LocalDecl]
) -> bool:
    indexed, extent = _sides(module, node, word, locals_)
    return indexed is not None and extent is not None


def _sides(
    module: Module, node: ts.Node, word: re.Pattern[str], locals_: Mapping[str, syntax.LocalDecl]
) -> tuple[ts.Node | None, ts.Node | None]:
    """(the side that grows with the loop variable, the other) of a comparison, or Nones."""
    if node.type != "binary_expression":
        return None, None
    op = node.child_by_field_name("operator")
    left, right = node.child_by_field_name("left"), node.child_by_field_name("right")
    if op is None or left is None or right is None or syntax.text(module, op) not in _COMPARISONS:
        return None, None
    lhs = word.search(_expand(module, syntax.text(module, left), locals_)) is not None
    rhs = word.search(_expand(module, syntax.text(module, right), locals_)) is not None
    if lhs == rhs:
        return None, None
    return (left, right) if lhs else (right, left)


def _past_end(
    module: Module, cmp: ts.Node, word: re.Pattern[str], locals_: Mapping[str, syntax.LocalDecl]
) -> bool:
    """Whether the comparison holds past the extent (``col >= n``) rather than within (``off < n``)."""
    op = cmp.child_by_field_name("operator")
    left = cmp.child_by_field_name("left")
    indexed, _ = _sides(module, cmp, word, locals_)
    text = syntax.text(module, op) if op is not None else ""
    grows_left = indexed is not None and left is not None and indexed.start_byte == left.start_byte
    return (text in (">", ">=")) == grows_left


def _local_arrays(module: Module, fn: Function) -> set[str]:
    """The kernel's per-thread arrays (``T buf[UNROLL * 8]``) and pointers into them
    (``T* it = buf + i * 8``): registers, which a loop past the data cannot overrun."""
    body = syntax.function_node(module, fn)
    names: set[str] = set()
    for node in syntax.walk(body):
        if node.type == "array_declarator":
            decl = node.child_by_field_name("declarator")
            parent = node.parent
            shared = parent is not None and "__shared__" in syntax.text(module, parent.parent or parent)[:40]
            if decl is not None and decl.type == "identifier" and not shared:
                names.add(syntax.text(module, decl))
    for node in syntax.walk(body):
        if node.type != "init_declarator":
            continue
        decl, value = node.child_by_field_name("declarator"), node.child_by_field_name("value")
        if decl is None or value is None or decl.type != "pointer_declarator":
            continue
        inner = decl.child_by_field_name("declarator")
        first = re.match(r"\s*\(?\s*([A-Za-z_]\w*)", syntax.text(module, value))
        if inner is not None and inner.type == "identifier" and first is not None and first.group(1) in names:
            names.add(syntax.text(module, inner))
    return names


def _unguarded_access(module: Module, stmt: ts.Node, arrays: set[str], holder: str) -> bool:
    """Whether ``stmt`` reads or writes memory outside the thread's own arrays without the
    guard: a subscript or dereference of anything else, or a memory call not passed the guard."""
    for node in syntax.walk(stmt):
        if node.type == "subscript_expression":
            base = node.child_by_field_name("argument")
            root = re.match(r"[A-Za-z_]\w*", syntax.text(module, base)) if base is not None else None
            if root is None or root.group(0) not in arrays:
                return True
        elif node.type == "pointer_expression" and syntax.text(module, node).startswith("*"):
            return True
        elif node.type == "call_expression":
            callee = node.child_by_field_name("function")
            args = node.child_by_field_name("arguments")
            if callee is None or not _MEMORY_CALL.search(syntax.text(module, callee)):
                continue
            passed = [
                syntax.text(module, a).strip() for a in (args.named_children if args is not None else [])
            ]
            if not holder or holder not in passed:
                return True
    return False


def _step_of(
    module: Module,
    indexed: ts.Node,
    var: str,
    locals_: Mapping[str, syntax.LocalDecl],
    env: Mapping[str, int],
    types: Mapping[str, str],
) -> tuple[int, int] | None:
    """``indexed`` (expanded) as ``var * step + offset`` with the offset the thread's own:
    the step as (blockDim.x factor, fixed part), or None."""
    text = _expand(module, syntax.text(module, indexed), locals_)
    node = _parse_expr(text)
    if node is None:
        return None
    word = re.compile(rf"\b{re.escape(var)}\b")
    terms = _terms(node)
    with_var = [t for t in terms if word.search(t.text.decode() if t.text else "")]
    rest = [t for t in terms if t not in with_var]
    if len(with_var) != 1 or not rest:
        return None
    if not any(_THREAD_WORDS.search(t.text.decode() if t.text else "") for t in rest):
        return None
    factors = list(_product_factors(with_var[0]))
    own = [f for f in factors if (f.text or b"").decode().strip() == var]
    if len(own) != 1 or any(word.search((f.text or b"").decode()) for f in factors if f is not own[0]):
        return None
    step_text = " * ".join(f"({(f.text or b'').decode()})" for f in factors if f is not own[0]) or "1"
    step_text = re.sub(
        r"\b(blockDim\s*\.\s*x|tb\s*\.\s*size\(\)|tb\s*\.\s*group_dim\(\)\s*\.\s*x)", "__ktx_bx", step_text
    )
    step_text = re.sub(r"\b(?:[A-Za-z_]\w*::)+([A-Za-z_]\w*)", r"\1", step_text)
    step_node = _parse_expr(step_text)
    if step_node is None:
        return None
    at1 = evaluate(step_node, {**env, "__ktx_bx": 1}, types)
    at2 = evaluate(step_node, {**env, "__ktx_bx": 2}, types)
    if at1 is None or at2 is None:
        return None
    threads = at2 - at1
    fixed = at1 - threads
    return threads, fixed


def _parse_expr(text: str) -> ts.Node | None:
    if len(text) > 2000:
        return None
    tree = parse_tree(b"int __ktx_value = " + text.encode() + b";")
    if tree.root_node.has_error or not tree.root_node.named_children:
        return None
    decl = tree.root_node.named_children[0]
    init = decl.child_by_field_name("declarator")
    value = init.child_by_field_name("value") if init is not None else None
    return _unparen(value) if value is not None else None


def _terms(node: ts.Node) -> list[ts.Node]:
    """The terms of a sum (``a + b * i + c``), through parentheses."""
    node = _unparen(node)
    if node.type == "binary_expression":
        op = node.child_by_field_name("operator")
        if op is not None and (op.text or b"") == b"+":
            left, right = node.child_by_field_name("left"), node.child_by_field_name("right")
            if left is not None and right is not None:
                return _terms(left) + _terms(right)
    return [node]


def _product_factors(node: ts.Node) -> Iterator[ts.Node]:
    node = _unparen(node)
    if node.type == "binary_expression":
        op = node.child_by_field_name("operator")
        if op is not None and (op.text or b"") == b"*":
            for side in ("left", "right"):
                child = node.child_by_field_name(side)
                if child is not None:
                    yield from _product_factors(child)
            return
    yield node


def _int_env(module: Module) -> dict[str, int]:
    env = {k.name: k.int_value for k in module.constants if k.int_value is not None}
    env.update({m.name: m.int_value for m in module.macros if m.int_value is not None})
    return env


def _type_bindings(fn: Function, template_args: Sequence[str]) -> dict[str, str]:
    return {
        p.name: arg.strip()
        for p, arg in zip(fn.template_params, template_args, strict=False)
        if p.kind == "type" and "{" not in arg
    }


def instantiated_values(
    module: Module, fn: Function, name: str, template_args: Sequence[str] = ()
) -> tuple[int, ...]:
    """The integers the file instantiates ``fn``'s template parameter ``name`` with: every
    ``fn<...>`` written in the file, in code or in a dispatch macro's body, the macro's parameter
    followed through the macro's uses (nested macros too: DeepSpeed's ``LAUNCH_ALL_RMS_NORM(2 *
    internalUnroll, ...)``), evaluated with the file's constants and the expanding function's
    constant locals (``internalUnroll = sizeof(T) == 4 ? 4 : 2``, ``T`` as bound). Sorted; values
    ktx cannot evaluate are left out. Why: the values the author compiled are known to build and
    to be worth a branch; a knob's domain starts from them."""
    index = next((i for i, p in enumerate(fn.template_params) if p.name == name), None)
    if index is None:
        return ()
    types = _type_bindings(fn, template_args)
    text = module.text_str
    found: set[int] = set()
    for m in re.finditer(rf"(?<![\w:]){re.escape(fn.name)}\s*<", text):
        args = _angle_args(text, m.end())
        if args is None or index >= len(args) or _in_kernel_definition(fn, m.start()):
            continue
        for value_text, at in _bind_through_macros(module, args[index].strip(), m.start(), 0):
            value = _eval_at(module, value_text, at, types)
            if value is not None and value > 0:
                found.add(value)
    return tuple(sorted(found))


def _in_kernel_definition(fn: Function, offset: int) -> bool:
    return fn.span.start <= offset < fn.body.start


def _angle_args(text: str, start: int) -> list[str] | None:
    """The comma-separated arguments of ``<...>`` starting after ``<`` at ``start`` (None where a
    statement or block boundary comes first: a less-than, not a template list)."""
    return _split_args(text, start, "<([", ">)]", ";{}", 400)


def _split_args(text: str, start: int, opens: str, closes: str, stops: str, limit: int) -> list[str] | None:
    """The top-level comma-separated arguments of a bracketed list whose opening bracket ends at
    ``start``, read for at most ``limit`` characters; None where it does not close in that span
    or a character of ``stops`` comes first."""
    depth = 1
    args: list[str] = []
    cur: list[str] = []
    for i in range(start, min(len(text), start + limit)):
        ch = text[i]
        if ch in opens:
            depth += 1
        elif ch in closes:
            depth -= 1
            if depth == 0:
                args.append("".join(cur))
                return args
        elif ch == "," and depth == 1:
            args.append("".join(cur))
            cur = []
            continue
        elif ch in stops:
            return None
        cur.append(ch)
    return None


def _bind_through_macros(module: Module, value: str, at: int, depth: int) -> list[tuple[str, int]]:
    """``value`` (written at offset ``at``) as the texts it takes: itself outside a macro body,
    else the arguments of every use of the macro for the parameter it names."""
    macro = next(
        (
            m
            for m in module.macros
            if m.params and m.value_span is not None and m.span.start <= at < m.span.end
        ),
        None,
    )
    if macro is None or depth > 4:
        return [(value, at)]
    params = list(macro.params or ())
    out: list[tuple[str, int]] = []
    text = module.text_str
    for use in re.finditer(rf"(?<![\w#]){re.escape(macro.name)}\s*\(", text):
        if macro.span.start <= use.start() < macro.span.end:
            continue
        args = _paren_args(text, use.end())
        if args is None or len(args) != len(params):
            continue
        bound = _substitute_params(value, dict(zip(params, (a.strip() for a in args), strict=True)))
        out += _bind_through_macros(module, bound, use.start(), depth + 1)
    return out


def _substitute_params(value: str, given: Mapping[str, str]) -> str:
    """``value`` with each macro parameter replaced by its argument, parenthesised."""

    def one(w: re.Match[str]) -> str:
        name = w.group(0)
        return f"({given[name]})" if name in given else name

    return re.sub(r"\b[A-Za-z_]\w*\b", one, value)


def _paren_args(text: str, start: int) -> list[str] | None:
    """The arguments of a macro use's ``(...)`` starting after ``(`` at ``start``."""
    return _split_args(text, start, "([{", ")]}", "", 2000)


def _eval_at(module: Module, value: str, at: int, types: Mapping[str, str]) -> int | None:
    """``value``'s integer where it is written: the file's constants, then the constant locals of
    the function around ``at`` declared before it."""
    env = _int_env(module)
    value = re.sub(r"\b(?:[A-Za-z_]\w*::)+([A-Za-z_]\w*)", r"\1", value)
    host = next((f for f in module.functions if f.body.start <= at < f.body.end), None)
    if host is not None:
        bound = dict(types)
        for tp in host.template_params:
            if tp.kind == "type" and tp.name not in bound and len(types) == 1:
                bound[tp.name] = next(iter(types.values()))  # the launcher's T is the kernel's
        types = bound
        scope = module.node(host.body)
        for local in syntax.local_declarations(module, scope, before=at).values():
            if local.value is None:
                continue
            got = evaluate(local.value, env, types)
            if got is not None:
                env[local.name] = got
    node = _parse_expr(value)
    return evaluate(node, env, types) if node is not None else None


# -- a constant that sizes a shared array the threads index by their own id ----------------------

_AXES = "xyz"


@dataclass(frozen=True)
class ThreadIndexed:
    """A ``__shared__`` array one of whose extents a constant sizes, written at an index that
    is the thread's id along an axis, or the id divided by a constant (the warp's id:
    ``sums[threadIdx.x / WARP_SIZE]``), or its remainder (the lane).

    Why a fact: the extent must hold every index the launch's threads write, which the launch
    sets, not the constant: ``ceil(block / per)`` entries for ``threadIdx / per``, ``min(block,
    per)`` for ``threadIdx % per``. exllamav2 head_norm's ``__shared__ float sums[MAX_WARPS]``
    takes one entry per warp: a block of 64 threads (head_dim 128) writes 2, so MAX_WARPS = 1
    writes past it. A knob over the constant then keeps the extent at least that, per shape
    and per block (a constraint over the launch's block, :data:`ktx.passbase.LAUNCH_BLOCK`)."""

    array: str
    extent: str
    """The extent as written (``MAX_WARPS``, ``NUM_WARPS + 1``)."""
    axis: int
    """The block axis the index reads (0: ``threadIdx.x``)."""
    per: int
    """Threads per entry (1: the thread's id; 32: the warp's), or the modulus for ``%``."""
    modulo: bool
    line: int

    def needed(self, block: str) -> str:
        """The entries the launch's threads write, as an expression of the block's size along
        :attr:`axis` (text in the spec's language)."""
        if self.modulo:
            return f"min({block}, {self.per})"
        return f"ceil_div({block}, {self.per})" if self.per > 1 else block


def thread_indexed_shared(module: Module, fn: Function, name: str) -> tuple[ThreadIndexed, ...]:
    """The subscripts of ``fn``'s ``__shared__`` arrays whose extent names ``name``, at an
    index that is the thread's id along an axis (through the kernel's locals: ``warp_id =
    threadIdx.x / WARP_SIZE``), divided by or taken modulo a constant the file gives, in the
    extent's dimension (see :class:`ThreadIndexed`). Other subscripts of the array (a loop over
    the partials, ``sums[i]`` for ``i < num_warps``) are the author's own bounds and not read."""
    word = re.compile(rf"\b{re.escape(name)}\b")
    body = syntax.function_node(module, fn)
    locals_ = syntax.local_declarations(module, body)
    env = _int_env(module)
    found: list[ThreadIndexed] = []
    for arr in module.shared_arrays:
        if arr.extern or arr.function != fn.name:
            continue
        dims = [k for k, d in enumerate(arr.dims) if word.search(d)]
        if not dims:
            continue
        for node in syntax.walk(body):
            if node.type != "subscript_expression" or (
                node.parent is not None and node.parent.type == "subscript_expression"
            ):
                continue  # the outermost of ``a[i][j]``
            chain = _subscript_chain(node)
            if chain is None or syntax.text(module, chain[0]).strip() != arr.name:
                continue
            for k in dims:
                if k + 1 >= len(chain):
                    continue
                got = _thread_index(module, chain[k + 1], locals_, env)
                if got is not None:
                    axis, per, modulo = got
                    line = node.start_point[0] + 1
                    found.append(ThreadIndexed(arr.name, arr.dims[k], axis, per, modulo, line))
    return tuple(dict.fromkeys(found))


def _subscript_chain(node: ts.Node) -> list[ts.Node] | None:
    """``a[i][j]`` as ``[a, i, j]``, or None for an index tree-sitter does not give alone."""
    indices: list[ts.Node] = []
    cur = node
    while cur.type == "subscript_expression":
        idx = cur.child_by_field_name("indices") or cur.child_by_field_name("index")
        if idx is not None and idx.type == "subscript_argument_list":
            named = [c for c in idx.named_children if c.type != "comment"]
            idx = named[0] if len(named) == 1 else None
        base = cur.child_by_field_name("argument")
        if idx is None or base is None:
            return None
        indices.append(idx)
        cur = base
    return [cur, *reversed(indices)]


def _thread_index(
    module: Module, index: ts.Node, locals_: Mapping[str, syntax.LocalDecl], env: Mapping[str, int]
) -> tuple[int, int, bool] | None:
    """(axis, per, modulo) when ``index`` (its locals expanded) is ``threadIdx.A``,
    ``threadIdx.A / C``, ``threadIdx.A >> s`` or ``threadIdx.A % C``, else None."""
    node = _parse_expr(_expand(module, syntax.text(module, index), locals_))
    if node is None:
        return None
    node = _unparen(node)
    own = _thread_id(node)
    if own is not None:
        return own, 1, False
    if node.type != "binary_expression":
        return None
    op = node.child_by_field_name("operator")
    left, right = node.child_by_field_name("left"), node.child_by_field_name("right")
    if op is None or left is None or right is None:
        return None
    axis = _thread_id(_unparen(left))
    value = evaluate(right, dict(env), {})
    if axis is None or value is None or value <= 0:
        return None
    text = (op.text or b"").decode()
    if text == "/":
        return axis, value, False
    if text == ">>":
        return axis, 1 << value, False
    if text == "%":
        return axis, value, True
    return None


def _thread_id(node: ts.Node) -> int | None:
    text = "".join((node.text or b"").decode().split())
    m = re.fullmatch(r"threadIdx\.([xyz])", text)
    return _AXES.index(m.group(1)) if m is not None else None
