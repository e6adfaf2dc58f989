"""``hoist``: loop-invariant, side-effect-free expressions move out of loops, expensive ones first.

``for (...) y[i] = x[i] / sqrtf(var / n + eps);`` computes the same ``sqrtf`` every iteration.
The pass computes it once, before the outermost loop in which it is invariant::

    const float ktx_h0 = sqrtf(var / n + eps);  // hoist: invariant in L0
    for (...) y[i] = x[i] / ktx_h0;

An expression moves when:

* it is **invariant**: no name it reads is declared in the loop or written in it (the loop
  variable included);
* it is **pure**: no assignment, no memory access (subscripts, ``*p``, ``p->f``), and only calls
  to the math functions of CUDA's device library (``expf``, ``sqrtf``, ``fmaxf``, ...; user
  functions may have effects the pass does not see);
* it is **worth it**: it holds a transcendental or square root, or a division or remainder
  (``cheap=true`` also takes invariant arithmetic of two or more operations); expressions of
  compile-time constants only are left to the compiler.

Candidates are taken most expensive first (transcendentals, then square roots, then division),
at most ``max`` per loop; identical expressions share one variable. Evaluating an expression
before a loop that might not run is harmless for these (no traps on the GPU, no effects).

The pass has no knob: the hoisted code computes the same values, so it is simply the new
baseline (``nvcc`` hoists much of this itself; the rewrite makes it explicit and certain,
for instance across a loop whose body it cannot prove free of aliasing stores).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import tree_sitter as ts
from ktx.ir import Module, syntax
from ktx.ir.access import assigned_names, declared_names
from ktx.passes._common import KernelSite
from ktx.passes.fast_math import kind as math_kind

from ktx.passbase import Option, Pass, Phase, Refuse, Rewriter, Skip, Target

TRANSCENDENTAL = frozenset(
    {
        "expf",
        "exp",
        "exp2f",
        "exp10f",
        "logf",
        "log",
        "log2f",
        "log10f",
        "powf",
        "pow",
        "sinf",
        "cosf",
        "tanf",
        "tanhf",
        "erff",
        "__expf",
        "__logf",
        "__powf",
        "__sinf",
        "__cosf",
        "__tanf",
        "__exp10f",
        "__log2f",
        "__log10f",
    }
)
ROOTS = frozenset({"sqrtf", "sqrt", "rsqrtf", "rsqrt", "cbrtf", "__fsqrt_rn", "__frsqrt_rn"})
DIVISIONS = frozenset({"__fdividef", "__frcp_rn", "fdividef"})
PURE = frozenset(
    {
        *TRANSCENDENTAL,
        *ROOTS,
        *DIVISIONS,
        "fmaxf",
        "fminf",
        "fmax",
        "fmin",
        "max",
        "min",
        "fabsf",
        "fabs",
        "abs",
        "floorf",
        "ceilf",
        "roundf",
        "truncf",
        "fmaf",
        "__fmaf_rn",
        "__int_as_float",
        "__float_as_int",
        "__uint_as_float",
        "__float_as_uint",
        "__float2half",
        "__half2float",
        "__float2bfloat16",
        "__bfloat162float",
        "static_cast",
        "float",
        "int",
    }
)
_BUILTINS = frozenset({"threadIdx", "blockIdx", "blockDim", "gridDim"})
_EXPR = frozenset(
    {
        "binary_expression",
        "call_expression",
        "parenthesized_expression",
        "unary_expression",
        "cast_expression",
    }
)


@dataclass(frozen=True)
class Candidate:
    node: ts.Node
    cost: int
    text: str


class Hoist(Pass[KernelSite]):
    name = "hoist"
    phase = Phase.HINTS
    summary = "loop-invariant, side-effect-free expressions move out of loops, expensive math first"
    description = __doc__ or ""
    knobs = ()
    options = (
        Option("max", "int", 8, "at most this many hoisted expressions per loop"),
        Option("cheap", "bool", False, "also hoist invariant arithmetic without division or math calls"),
        Option("loops", "strs", (), "loops to consider, as ktx inspect names them; default: every loop"),
    )
    after = ("expose",)

    def sites(self, target: Target) -> Iterator[KernelSite | Skip]:
        if self._plan(target):
            yield KernelSite(target.kernel.name, target.kernel.span)
            return
        yield Skip(
            "no loop-invariant division, square root or transcendental in any loop",
            target.kernel.name,
            target.kernel.span,
        )

    def _plan(self, target: Target) -> dict[tuple[int, str], list[tuple[str, Candidate]]]:
        """(placement offset, expression text) -> the loops and occurrences it replaces."""
        wanted = set(self.list_option("loops"))
        module = target.module
        plan: dict[tuple[int, str], list[tuple[str, Candidate]]] = {}
        for loop in target.loops:
            label = target.label(loop)
            if wanted and label not in wanted:
                continue
            node = _loop_node(module, loop.span.start)
            if node is None:
                continue
            found = _candidates(module, target, node, bool(self.option("cheap")))
            found.sort(key=lambda c: (-c.cost, c.node.start_byte))
            texts: list[str] = []
            for c in found:
                if c.text not in texts:
                    if len(texts) >= self.int_option("max"):
                        continue
                    texts.append(c.text)
                place = _placement(module, target, node, c.node)
                if place is not None:
                    plan.setdefault((place, c.text), []).append((label, c))
        return plan

    def rewrite(self, site: KernelSite, rw: Rewriter) -> None:
        module = rw.target.module
        source = module.source
        plan = self._plan(rw.target)
        if not plan:
            raise Refuse("no place before the loops to declare the hoisted values (put the loop in a block)")
        newline = "\r\n" if b"\r\n" in source else "\n"
        for n, ((place, text), uses) in enumerate(sorted(plan.items())):
            name = f"ktx_h{n}"
            loops = ", ".join(dict.fromkeys(label for label, _ in uses))
            start = syntax.line_start(source, place)
            indent = syntax.indentation(source, place)
            kind = math_kind(module, rw.target.kernel, uses[0][1].node)
            ctype = kind if kind in ("float", "double") else "auto"
            decl = f"{indent}const {ctype} {name} = {text};  // hoist: invariant in {loops}{newline}"
            rw.insert(start, decl)
            for _, c in uses:
                rw.replace_bytes(c.node.start_byte, c.node.end_byte, name)
        texts = list(dict.fromkeys(text for _, text in plan))
        rw.note(f"{len(plan)} value(s): " + "; ".join(texts[:3]) + ("; ..." if len(texts) > 3 else ""))
        del site


def _loop_node(module: Module, start: int) -> ts.Node | None:
    node: ts.Node | None = module.tree.root_node.descendant_for_byte_range(start, start)
    while node is not None and node.type not in ("for_statement", "while_statement", "do_statement"):
        node = node.parent
    return node


def _varying(module: Module, loop: ts.Node) -> set[str]:
    """Names a loop declares or writes (its header included)."""
    return set(assigned_names(module, loop)) | declared_names(module, loop)


def _compile_time(module: Module, target: Target) -> set[str]:
    names = {tp.name for tp in target.kernel.template_params}
    names |= {m.name for m in module.macros}
    names |= {c.name for c in module.constants}
    return names


def _candidates(module: Module, target: Target, loop: ts.Node, cheap: bool) -> list[Candidate]:
    """Maximal invariant, pure, worthwhile expressions whose innermost loop is ``loop``."""
    body = loop.child_by_field_name("body")
    if body is None:
        return []
    varying = _varying(module, loop)
    constants = _compile_time(module, target)
    out: list[Candidate] = []

    def visit(n: ts.Node) -> None:
        if n.type in ("for_statement", "while_statement", "do_statement", "lambda_expression"):
            return  # an inner loop is its own site
        if n.type in _EXPR and _position_ok(n):
            names = syntax.names_in(module, n)
            if not names & varying and _pure(module, n):
                cost = _cost(module, n)
                runtime = {x for x in names if x not in constants}
                worth = cost >= 8 or (cheap and cost >= 2)
                if worth and runtime:
                    out.append(Candidate(n, cost, " ".join(syntax.text(module, n).split())))
                    return
        for c in n.children:
            visit(c)

    visit(body)
    return out


def _position_ok(n: ts.Node) -> bool:
    parent = n.parent
    if parent is None:
        return False
    if parent.type == "call_expression" and parent.child_by_field_name("function") == n:
        return False
    if (
        parent.type in ("assignment_expression", "update_expression")
        and parent.child_by_field_name("left") == n
    ):
        return False
    declarator = parent.type == "init_declarator" and parent.child_by_field_name("declarator") == n
    return not (parent.type == "pointer_expression" or declarator)


def _pure(module: Module, node: ts.Node) -> bool:
    for n in syntax.walk(node):
        if n.type in (
            "assignment_expression",
            "update_expression",
            "subscript_expression",
            "pointer_expression",
        ):
            return False
        if n.type == "field_expression":
            arg = n.child_by_field_name("argument")
            op = n.child_by_field_name("operator")
            if op is not None and op.type == "->":
                return False
            if arg is None or syntax.text(module, arg) not in _BUILTINS:
                return False
        if n.type == "call_expression":
            callee = n.child_by_field_name("function")
            if callee is None:
                return False
            name = syntax.text(module, callee)
            if callee.type == "template_function":
                inner = callee.child_by_field_name("name")
                name = syntax.text(module, inner) if inner is not None else name
            if name.split("::")[-1] not in PURE:
                return False
        if n.type in ("comma_expression", "lambda_expression", "new_expression", "delete_expression"):
            return False
    return True


def _cost(module: Module, node: ts.Node) -> int:
    cost = 0
    for n in syntax.walk(node):
        if n.type == "call_expression":
            callee = n.child_by_field_name("function")
            name = syntax.text(module, callee).split("::")[-1] if callee is not None else ""
            cost += 20 if name in TRANSCENDENTAL else 10 if name in ROOTS else 8 if name in DIVISIONS else 0
        elif n.type == "binary_expression":
            op = n.child_by_field_name("operator")
            cost += 8 if op is not None and op.type in ("/", "%") else 1
    return cost


def _placement(module: Module, target: Target, loop: ts.Node, expr: ts.Node) -> int | None:
    """The start of the outermost loop (from ``loop`` out) in which ``expr`` stays invariant."""
    names = syntax.names_in(module, expr)
    best: ts.Node | None = None
    current: ts.Node | None = loop
    kernel_body = module.node(target.kernel.body)
    while current is not None and current.id != kernel_body.id:
        if current.type in ("for_statement", "while_statement", "do_statement"):
            if names & _varying(module, current):
                break
            parent = current.parent
            if parent is not None and parent.type == "compound_statement":
                first = _with_pragma(current)
                start = syntax.line_start(module.source, first)
                if not module.source[start:first].strip():
                    best = current
        current = current.parent
    return _with_pragma(best) if best is not None else None


def _with_pragma(loop: ts.Node) -> int:
    prev = loop.prev_named_sibling
    if (
        prev is not None
        and prev.type == "preproc_call"
        and (prev.text or b"").lstrip().startswith(b"#pragma")
    ):
        return prev.start_byte
    return loop.start_byte
