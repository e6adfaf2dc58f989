"""``expose``: the compile-time performance constants a kernel already has become knobs.

Candidates come from :func:`ktx.ir.analysis.perf_constants`: integer template parameters
(SGLang's ``NUM_THREADS``, FlashInfer's ``VEC_SIZE``) set by literals at launch sites,
``#define`` and ``constexpr`` integers used in launch configurations or loop bounds, and
literal block sizes in launchers (the 256 of ``min(d / 8, 256)``). Each becomes a knob named
after it (``NUM_THREADS``; a launch literal is named after the variable it sets:
``BLOCK_MAX`` for the cap of ``dim3 block(min(..., 256))``), its value is replaced by the
placeholder, and the default is the current value.

Domains are powers of two within a factor of 4 of the current value, plus the value itself;
constants that size blocks stay within 32 .. 1024 threads. A template parameter's launch
arguments and the template's name expression follow (``kernel<T, {NUM_THREADS}>``); so does the
launch mapping (the constant's var, or its literal, becomes the knob, and the outcome says
where).

Refused, with the reason as a remark: warp-size constants (hardware), values computed from
``sizeof`` (pack widths tied to an element type), constants that map threads to work
(``threadIdx.x / THREADS_PER_GROUP``: the shuffle masks assume them), host copies of a refused
device constant, a 32 that is the warp the kernel shuffles over, and template parameters that
take different values at different launch sites (they select behaviour, like ``TOPK``).
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass

import tree_sitter as ts
from ktx.ir import Function, Module, Span
from ktx.ir.analysis import PerfConstant, perf_constants
from ktx.ir.consteval import int_literal
from ktx.passes._common import around, replace_literal, uses_shuffles

from ktx import syntax
from ktx.launch import LaunchMapping, substitute
from ktx.passbase import KnobSpec, Option, Pass, Phase, Rewriter, Site, Skip, Target

#: Names of constants that size a block (not ``MAX_BLOCKS``, a number of blocks).
_BLOCKISH = re.compile(r"THREAD|BLOCK(?!S)|WARPS", re.I)


@dataclass(frozen=True)
class ConstSite(Site):
    const: PerfConstant
    knob: str


class Expose(Pass[ConstSite]):
    name = "expose"
    phase = Phase.HINTS
    summary = "lift the compile-time performance constants a kernel already has into knobs"
    description = __doc__ or ""
    knobs = (
        KnobSpec(
            "<NAME>",
            "powers of two within 4x of the current value (block sizes: 32 .. 1024)",
            "the current value",
            "the constant's value (template parameter, #define, constexpr or launch literal)",
        ),
    )
    options = (
        Option("names", "strs", (), "constants to expose (NUM_THREADS|BLOCK_MAX); default: all found"),
        Option("spread", "int", 4, "domain: powers of two within this factor of the current value"),
    )

    def sites(self, target: Target) -> Iterator[ConstSite | Skip]:
        module = target.module
        fn = target.kernel
        launchers = _launchers(module, fn)
        wanted = {n.upper() for n in self.list_option("names")}
        refused: set[str] = set()
        consts = [c for c in perf_constants(module) if _relevant(c, fn, launchers)]
        # Device-side constants first, so that host copies of a refused one are refused too.
        consts.sort(key=lambda c: (not fn.span.contains(c.span) and c.kind != "template-int", c.span.start))
        tied = {
            lit.start_byte
            for c in consts
            if c.kind == "template-int" and c.value is not None
            for site in target.launches
            for lit in _tied_literals(module, site.config, c.value)
        }
        for c in consts:
            knob = _knob_name(module, c)
            if c.kind == "launch-literal" and c.span.start in tied:
                yield Skip(f"{c.value} follows the kernel's template parameter of that value", knob, c.span)
                continue
            if wanted and knob not in wanted and c.name.upper() not in wanted:
                continue
            reason = self._refusal(target, c, refused)
            if reason is not None:
                refused.add(c.name)
                yield Skip(reason, c.name if c.kind != "launch-literal" else knob, c.span)
                continue
            yield ConstSite(knob, c.span, c, knob)

    def _refusal(self, target: Target, c: PerfConstant, refused: set[str]) -> str | None:
        module = target.module
        body = syntax.function_node(module, target.kernel)
        if c.value is None:
            return f"{c.name} has no integer value ktx can compute"
        if "WARP" in c.name.upper() and "WARPS" not in c.name.upper():
            return f"{c.name} is the warp size, fixed by the hardware"
        value_text = module.text(c.span)
        if "KTX_" in value_text:
            return f"{c.name} is already a knob"
        if "sizeof" in _declaration_text(module, c):
            return f"{c.name} is computed from sizeof: a pack width tied to the element type"
        if c.name in refused:
            return f"{c.name} must stay equal to the device-side {c.name}, which is not exposed"
        mapping = _thread_mapping_use(module, body, c.name)
        if mapping is not None:
            return (
                f"{c.name} maps threads to work ({mapping}); changing it needs matching shuffle "
                "masks and index math"
            )
        if c.kind == "launch-literal" and c.value == 32 and uses_shuffles(module, body):
            return "32 is the warp width the kernel's shuffles assume"
        if c.kind == "template-int":
            return self._template_refusal(target, c)
        return None

    def _template_refusal(self, target: Target, c: PerfConstant) -> str | None:
        index = next(i for i, p in enumerate(target.kernel.template_params) if p.name == c.name)
        sites = target.launches
        values = {site.template_args[index] for site in sites if index < len(site.template_args)}
        if len(values) > 1:
            shown = ", ".join(sorted(values, key=lambda v: (len(v), v)))
            return (
                f"{c.name} takes different values at its {len(sites)} launch sites ({shown}): it "
                "selects behaviour, not a performance setting"
            )
        if values and int_literal(next(iter(values))) is None:
            return f"{c.name} is set to {next(iter(values))!r} at its launch, not an integer literal"
        if not sites:
            arg = target.template_args[index] if index < len(target.template_args) else ""
            if int_literal(arg) is None:
                return f"{c.name} is {arg or 'not set'} in the name expression, not an integer literal"
        return None

    def rewrite(self, site: ConstSite, rw: Rewriter) -> None:
        c = site.const
        assert c.value is not None
        block_like = (
            bool(_BLOCKISH.search(c.name) or _BLOCKISH.search(site.knob)) or c.kind == "launch-literal"
        )
        spread = max(2, self.int_option("spread"))
        values = (
            around(c.value, 32, 1024, spread)
            if block_like and c.value >= 32
            else around(c.value, 1, max(c.value * spread, 1), spread)
        )
        macro = rw.knob(site.knob, values, c.value, f"{_kind_text(c)} {c.name} (was {c.value})")
        if c.kind == "template-int":
            index = next(i for i, p in enumerate(rw.target.kernel.template_params) if p.name == c.name)
            tied: list[str] = []
            for launch in rw.target.launches:
                rw.replace(launch.template_arg_spans[index], macro)
                for lit in _tied_literals(rw.target.module, launch.config, c.value):
                    rw.replace_bytes(lit.start_byte, lit.end_byte, macro)
                    tied.append(f"line {lit.start_point[0] + 1}")
            rw.set_template_arg(index, "{" + site.knob + "}")
            if tied:
                rw.note(f"the launch's literal {c.value} ({', '.join(tied)}) follows {site.knob}")
                if rw.mapping is not None:
                    rw.set_mapping(replace_literal(rw.mapping, c.value, site.knob)[0])
        else:
            rw.replace(c.span, macro)
        mapping = rw.mapping
        if mapping is None:
            return
        if c.kind in ("constexpr", "define") and mapping.var(c.name) is not None:
            renamed = mapping.with_var(c.name, c.name)
            rw.set_mapping(_rename(renamed, c.name, site.knob) if c.name != site.knob else renamed)
            return
        if c.kind == "template-int" or not _launch_use(c):
            return
        new, places = replace_literal(mapping, c.value, site.knob)
        if places:
            rw.set_mapping(new)
            rw.note(f"launch mapping: {c.value} -> {site.knob} in {', '.join(places)}")
        else:
            rw.note(
                f"the launch mapping has no literal {c.value}: {site.knob} changes the file's launcher "
                "only (give the mapping its vars, ktx.launch.mapping_from_spec)"
            )


def _rename(mapping: LaunchMapping, old: str, new: str) -> LaunchMapping:
    """The mapping with the name ``old`` (a var just turned into a knob) spelled ``new``."""
    env = {old: new}
    return LaunchMapping(
        tuple(substitute(g, env) for g in mapping.grid),
        tuple(substitute(b, env) for b in mapping.block),
        substitute(mapping.shared, env),
        tuple((n, substitute(e, env)) for n, e in mapping.vars),
        mapping.origin,
        mapping.notes,
    )


def _tied_literals(module: Module, config: Span, value: int) -> list[ts.Node]:
    """Integer literals equal to ``value`` in a launch's ``<<<...>>>``: the same quantity as a
    template parameter of that value (``k<T, 256><<<n / 256, 256>>>``), so they change with it."""
    node = module.node(config)
    return [
        n
        for n in syntax.walk(node)
        if n.type == "number_literal"
        and config.start <= n.start_byte < config.end
        and int_literal(syntax.text(module, n)) == value
    ]


def _launch_use(c: PerfConstant) -> bool:
    return any(u.kind == "launch" for u in c.uses)


def _kind_text(c: PerfConstant) -> str:
    return {
        "template-int": "template parameter",
        "define": "#define",
        "constexpr": "constexpr",
        "launch-literal": "launch literal for",
    }[c.kind]


def _launchers(module: Module, fn: Function) -> list[Function]:
    names = {s.function for s in module.launches_of(fn.name)}
    return [f for f in module.functions if f.name in names]


def _relevant(c: PerfConstant, fn: Function, launchers: list[Function]) -> bool:
    if c.kind in ("template-int", "launch-literal"):
        return c.kernel == fn.name
    scopes = [fn.span, *(f.span for f in launchers)]
    return any(s.contains(u.span) for u in c.uses for s in scopes)


def _declaration_text(module: Module, c: PerfConstant) -> str:
    """The text that defines ``c``'s value (the whole declaration for constexpr and #define)."""
    if c.kind == "constexpr":
        for k in module.constants:
            if k.value_span == c.span or k.value_span.start == c.span.start:
                return module.text(k.span)
    if c.kind == "define":
        for m in module.macros:
            if m.value_span is not None and m.value_span.start == c.span.start:
                return m.value
    return module.text(c.span)


def _thread_mapping_use(module: Module, body: ts.Node, name: str) -> str | None:
    """``threadIdx.x / NAME``-like uses of ``name`` in the kernel, as text, or None."""
    for n in syntax.walk(body):
        if n.type != "binary_expression":
            continue
        op = n.child_by_field_name("operator")
        left = n.child_by_field_name("left")
        right = n.child_by_field_name("right")
        if op is None or left is None or right is None:
            continue
        if syntax.text(module, op) not in ("/", "%"):
            continue
        if syntax.text(module, right).strip() == name and syntax.uses_builtin(module, left, "threadIdx"):
            return f"{syntax.text(module, n)} at line {n.start_point[0] + 1}"
    return None


def _knob_name(module: Module, c: PerfConstant) -> str:
    if c.kind != "launch-literal":
        return _upper_snake(c.name)
    node = module.node(c.span)
    var = _enclosing_variable(module, node)
    base = _upper_snake(var) if var else "BLOCK"
    call = node.parent.parent if node.parent is not None and node.parent.type == "argument_list" else None
    if call is not None and call.type == "call_expression":
        callee = call.child_by_field_name("function")
        name = syntax.text(module, callee) if callee is not None else ""
        if name.endswith("min"):
            return f"{base}_MAX"
        if name.endswith("max"):
            return f"{base}_MIN"
    return base


def _upper_snake(name: str) -> str:
    """``kMaxBlocks`` -> ``MAX_BLOCKS``, ``num_threads`` -> ``NUM_THREADS``, ``VEC`` -> ``VEC``."""
    if re.match(r"k[A-Z]", name):
        name = name[1:]
    name = re.sub(r"(?<=[a-z0-9])(?=[A-Z])", "_", name)
    return re.sub(r"[^A-Z0-9_]", "_", name.upper())


def _enclosing_variable(module: Module, node: ts.Node) -> str | None:
    current: ts.Node | None = node
    while current is not None and current.type not in ("init_declarator", "function_declarator"):
        if current.type in ("expression_statement", "compound_statement"):
            return None
        current = current.parent
    if current is None:
        return None
    name = current.child_by_field_name("declarator")
    return syntax.text(module, name) if name is not None and name.type == "identifier" else None
