"""Pipelines: parse ``block-size,unroll{max=8},tile{sizes=16|32|64}``, order them, run them.

Ordering is a networkx DAG over the passes of the pipeline:

* ``requires``: a required pass that the user did not list is **added** (with its default
  options) and runs before the pass that needs it; the trace records "required by X";
* ``after``: an ordering edge only, when both passes are present;
* ``prefer_after``: the same, but left out where it would close a cycle with the hard edges
  (``split`` prefers to run after ``vectorize``, which cannot prove a split loop's accesses
  contiguous; found on an H200 run, where the planner's ``split`` first left ``vectorize``
  nothing to rewrite);
* ``conflicts``: a pipeline holding both passes fails, naming them.

The order is a topological sort that is stable with respect to the user's order
(``lexicographical_topological_sort`` keyed by position), so a pipeline that already respects
the constraints runs exactly as written. A cycle fails and names the passes on it.

A pass's :class:`~ktx.passbase.Phase` (ownership, vector width, block size, unrolling, hints)
orders the planner's tries, not this graph. No order of phases reproduces the run order that
tests and benchmarks rely on: the edges leave pairs such as vectorize/block-size, vectorize/split
and vectorize/unroll to the written order, and tested pipelines use both orders of each
(:class:`~ktx.passbase.Phase` lists them). ``tests/pipeline_orders.tsv`` records the resolved
order of every tested pipeline (``scripts/pipeline_orders.py``); a change to these edges that
moves one fails ``tests/test_pipeline_orders.py``.

Passes run one after another, each on the module the previous one produced (a later pass sees
an earlier pass's loops and knobs). Each site is a transaction: its edits, knobs and launch
changes are kept together, or dropped together with a remark.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import networkx as nx
from ktx.ir import Edit, EditSet, Function, Loop, Module, apply, parse
from ktx.ir.edits import map_back
from ktx.ir.errors import KtxError, Location
from ktx.ir.launch import LaunchMapping, mapping_from_file

from ktx.passbase import (
    Knob,
    Outcome,
    Pass,
    Refuse,
    Rewriter,
    Rewritten,
    RolledBack,
    Site,
    Skip,
    Skipped,
    Target,
    resolve_launch_names,
)
from ktx.registry import Registry, default_registry
from ktx.template import KnobSpace, Step, Template, Trace, header, sha256
from ktx.usercode import HEADER_BEGIN_LINE

if TYPE_CHECKING:
    from ktx.measure.types import Candidate
    from ktx.spec import Spec

AnyPass = Pass[Any]


# -- parsing -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class PassSpec:
    """One pipeline element as written: a pass name and raw option text."""

    name: str
    options: tuple[tuple[str, str], ...] = ()

    def __str__(self) -> str:
        if not self.options:
            return self.name
        return f"{self.name}{{{','.join(f'{k}={v}' for k, v in self.options)}}}"


def _split_top(text: str, sep: str = ",") -> list[str]:
    parts: list[str] = []
    depth = 0
    start = 0
    for i, ch in enumerate(text):
        if ch == "{":
            depth += 1
        elif ch == "}":
            depth -= 1
            if depth < 0:
                raise KtxError(f"pipeline {text!r}: '}}' without '{{' at column {i + 1}")
        elif ch == sep and depth == 0:
            parts.append(text[start:i])
            start = i + 1
    if depth:
        raise KtxError(f"pipeline {text!r}: unclosed '{{'", None, "write options as pass{key=value,...}")
    parts.append(text[start:])
    return parts


def parse_pipeline(text: str) -> tuple[PassSpec, ...]:
    """Pipeline text -> pass specs. Whitespace is ignored; an empty text is an empty pipeline.

    >>> [str(s) for s in parse_pipeline("block-size, unroll{max=8}, tile{sizes=16|32}")]
    ['block-size', 'unroll{max=8}', 'tile{sizes=16|32}']
    """
    specs: list[PassSpec] = []
    if not text.strip():
        return ()
    for raw in _split_top(text):
        item = raw.strip()
        if not item:
            raise KtxError(f"pipeline {text!r} has an empty element", None, "remove the extra comma")
        name, brace, rest = item.partition("{")
        name = name.strip()
        options: list[tuple[str, str]] = []
        if brace:
            if not rest.endswith("}"):
                raise KtxError(f"pipeline element {item!r} must end with '}}'")
            body = rest[:-1]
            for opt in _split_top(body) if body.strip() else []:
                key, eq, value = opt.partition("=")
                if not eq or not key.strip():
                    raise KtxError(f"option {opt.strip()!r} of {name!r} must be key=value")
                options.append((key.strip(), value.strip()))
        specs.append(PassSpec(name, tuple(options)))
    return tuple(specs)


def instantiate_specs(specs: Sequence[PassSpec], registry: Registry) -> list[AnyPass]:
    """Pass objects with typed options; unknown passes and options fail, listing valid ones."""
    passes: list[AnyPass] = []
    seen: set[str] = set()
    for spec in specs:
        cls = registry.get(spec.name)
        if spec.name in seen:
            raise KtxError(f"pass {spec.name!r} appears twice in the pipeline", None, "give each pass once")
        seen.add(spec.name)
        declared = {o.name: o for o in cls.options}
        values: dict[str, Any] = {}
        for key, raw in spec.options:
            opt = declared.get(key)
            if opt is None:
                valid = "; ".join(
                    f"{o.name} ({o.kind}, default {o.format(o.default)}): {o.help}" for o in cls.options
                )
                raise KtxError(
                    f"pass {spec.name!r} has no option {key!r}", None, f"options: {valid or 'none'}"
                )
            values[key] = opt.parse(raw, spec.name)
        passes.append(cls(**values))
    return passes


# -- ordering ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Scheduled:
    """A pass in execution order, with why it is there (``pipeline`` or ``required by X``)."""

    pass_: AnyPass
    reason: str


def _inline_first(order: list[Scheduled], reg: Registry, target: Target) -> list[Scheduled]:
    """``inline`` before every other pass, and added where the kernel is a thin wrapper.

    A kernel whose body only calls a ``__device__`` function of its file (apex's
    ``cuApplyLayerNorm``) gives the other passes nothing to read; ``inline`` takes the body in
    and changes nothing else, so a pipeline on such a kernel runs it first, named in the trace
    (the reason says it was added). A pipeline of ``inline`` alone, or a kernel that is not a
    wrapper, is left as it is."""
    named = [s for s in order if s.pass_.name == "inline"]
    rest = [s for s in order if s.pass_.name != "inline"]
    if named or not rest or "inline" not in reg:
        return named + rest
    inline = reg.get("inline")()
    if all(isinstance(s, Skip) for s in inline.sites(target)):
        return rest
    return [Scheduled(inline, "added: the kernel only calls a device function of the file"), *rest]


def schedule(passes: Sequence[AnyPass], registry: Registry | None = None) -> list[Scheduled]:
    """Order passes by requires/after, stable with respect to the given order; add required ones."""
    reg = registry or default_registry()
    present: dict[str, AnyPass] = {}
    reasons: dict[str, str] = {}
    key: dict[str, tuple[float, int]] = {}
    for i, p in enumerate(passes):
        present[p.name] = p
        reasons[p.name] = "pipeline"
        key[p.name] = (float(i), 0)
    queue = list(passes)
    added = 0
    while queue:
        p = queue.pop(0)
        for req in type(p).requires:
            if req in present:
                continue
            if req not in reg:
                raise KtxError(f"pass {p.name!r} requires {req!r}, which is not registered")
            inst = reg.get(req)()
            added += 1
            present[req] = inst
            reasons[req] = f"required by {p.name}"
            key[req] = (key[p.name][0] - 0.5, added)
            queue.append(inst)
    for name, p in present.items():
        for other in type(p).conflicts:
            if other in present:
                raise KtxError(
                    f"passes {name!r} and {other!r} conflict",
                    None,
                    f"{name} declares conflicts={list(type(p).conflicts)}; drop one of them",
                )
    graph: nx.DiGraph[str] = nx.DiGraph()
    graph.add_nodes_from(present)
    for name, p in present.items():
        for dep in (*type(p).requires, *type(p).after):
            if dep in present:
                graph.add_edge(dep, name)
    if not nx.is_directed_acyclic_graph(graph):
        cycle = nx.find_cycle(graph)
        names = [u for u, _ in cycle] + [cycle[0][0]]
        raise KtxError(
            "pass ordering has a cycle: " + " -> ".join(names),
            None,
            "requires/after of these passes contradict each other",
        )
    for name, p in present.items():  # soft edges, each kept only if the graph stays acyclic
        for dep in type(p).prefer_after:
            if dep in present and not graph.has_edge(dep, name) and not nx.has_path(graph, name, dep):
                graph.add_edge(dep, name)
    order = list(nx.lexicographical_topological_sort(graph, key=lambda n: key[n]))
    return [Scheduled(present[n], reasons[n]) for n in order]


# -- running -----------------------------------------------------------------------------------


class Lineage:
    """Maps offsets of the current source back to the original, through each step's edits."""

    def __init__(self) -> None:
        self._steps: list[list[Edit]] = []

    def push(self, edits: Iterable[Edit]) -> None:
        self._steps.append(sorted(edits, key=lambda e: (e.start, e.end)))

    def to_original(self, offset: int) -> int | None:
        current: int | None = offset
        for edits in reversed(self._steps):
            if current is None:
                return None
            current = map_back(current, edits)
        return current


def loop_labels(module: Module, original: Mapping[int, int], lineage: Lineage) -> dict[int, str]:
    """Stable loop labels: ``L<id>`` of the original file, ``<parent>_<n>`` for new loops."""
    labels: dict[int, str] = {}
    fresh: list[Loop] = []
    for loop in module.loops:
        origin = lineage.to_original(loop.span.start)
        if origin is not None and origin in original:
            labels[loop.id] = f"L{original[origin]}"
        else:
            fresh.append(loop)
    counts: dict[str, int] = {}
    for loop in fresh:  # in source order, so parents are labelled first
        parent = labels.get(loop.parent, "N") if loop.parent is not None else "N"
        counts[parent] = counts.get(parent, 0) + 1
        labels[loop.id] = f"{parent}_{counts[parent]}" if parent != "N" else f"N{counts[parent]}"
    return labels


def _kernel(module: Module, name: str) -> Function:
    return module.kernel(name)


@dataclass
class _Accepted:
    label: str
    edits: list[Edit]
    knobs: list[Knob]
    constraints: list[str]
    line: int
    notes: list[str]
    changed_launch: bool


def run(
    source: str | bytes | Module,
    pipeline: str | Sequence[AnyPass],
    *,
    kernel: str | None = None,
    mapping: LaunchMapping | None = None,
    template_args: Sequence[str] | None = None,
    registry: Registry | None = None,
    path: str | None = None,
) -> Template:
    """Apply a pipeline to one kernel and return its :class:`Template`.

    ``mapping`` and ``template_args`` default to what the kernel's launch site in the file
    says (a spec supplies both when the file has no launcher).
    """
    reg = registry or default_registry()
    module = source if isinstance(source, Module) else parse(source, path)
    passes = instantiate_specs(parse_pipeline(pipeline), reg) if isinstance(pipeline, str) else list(pipeline)
    if HEADER_BEGIN_LINE.search(module.print()):
        raise KtxError(
            "this file is already a ktx template",
            Location(module.path),
            "apply the passes to the original source, with one combined pipeline",
        )
    fn = module.kernel(kernel)
    original = module
    launch = mapping if mapping is not None else mapping_from_file(module, fn.name)
    if template_args is not None:
        args = tuple(template_args)
    else:
        sites = module.launches_of(fn.name)
        args = sites[0].template_args if sites else ()
    order = _inline_first(schedule(passes, reg), reg, Target(module, fn, launch, args, {}, {}))
    orig_loops = {lp.span.start: lp.id for lp in module.loops}
    lineage = Lineage()
    knobs: dict[str, Knob] = {}
    constraints: list[str] = []
    steps: list[Step] = []
    outcomes: list[Outcome] = []
    resolved_pipeline = ",".join(s.pass_.describe() for s in order)

    def original_line(offset: int) -> int:
        """The line in the input file of an offset in the current module (new code: its own line)."""
        mapped = lineage.to_original(offset)
        return original.span(mapped, mapped).line if mapped is not None else module.span(offset, offset).line

    for item in order:
        p = item.pass_
        fn = _kernel(module, fn.name)
        labels = loop_labels(module, orig_loops, lineage)
        target = Target(module, fn, launch, args, dict(knobs), labels)
        accepted: list[_Accepted] = []
        step_outcomes: list[Outcome] = []
        cur_launch, cur_args = launch, args
        cur_knobs = dict(knobs)
        for found in p.sites(target):
            if isinstance(found, Skip):
                line = original_line(found.span.start if found.span is not None else fn.span.start)
                step_outcomes.append(Skipped(p.name, found.label or fn.name, line, found.reason))
                continue
            outcome, acc = _rewrite_site(
                p,
                found,
                dataclasses.replace(target, mapping=cur_launch, template_args=cur_args, knobs=cur_knobs),
                accepted,
                original_line(found.span.start),
            )
            if acc is None:
                step_outcomes.append(outcome)
                continue
            rw_launch, rw_args = acc[1], acc[2]
            acc[0].changed_launch = rw_launch != cur_launch or rw_args != cur_args
            cur_launch, cur_args = rw_launch, rw_args
            for k in acc[0].knobs:
                cur_knobs[k.name] = k
            accepted.append(acc[0])
            step_outcomes.append(outcome)
        edit_set = EditSet(module)
        for acc_site in accepted:
            edit_set.extend(acc_site.edits)
        applied = apply(edit_set)
        dropped = {site for site, _ in applied.rolled_back}
        if dropped and any(a.changed_launch for a in accepted):
            # Launch changes compose in order; undo the whole pass rather than guess.
            applied = apply(EditSet(module))
            dropped = {a.label for a in accepted}
            cur_launch, cur_args = launch, args
        if dropped:
            step_outcomes = [
                RolledBack(o.pass_name, o.site, o.line, f"{o.message}: rolled back, the edits did not parse")
                if isinstance(o, Rewritten) and o.site in dropped
                else o
                for o in step_outcomes
            ]
        for acc_site in accepted:
            if acc_site.label in dropped:
                continue
            for k in acc_site.knobs:
                knobs[k.name] = k
            constraints.extend(c for c in acc_site.constraints if c not in constraints)
        launch, args = cur_launch, cur_args
        module = applied.module
        lineage.push(applied.applied)
        steps.append(Step(p.name, p.describe(), item.reason, applied.applied, tuple(step_outcomes)))
        outcomes.extend(step_outcomes)

    if knobs:
        fn = _kernel(module, fn.name)
        newline = "\r\n" if b"\r\n" in module.source else "\n"
        text = header(list(knobs.values()), module.print(), fn.name, resolved_pipeline, newline)
        at = _header_offset(module, fn)
        edit = Edit(at, at, text, "ktx", "knob-header")
        edit_set = EditSet(module)
        edit_set.add(edit)
        applied = apply(edit_set, rollback=False)
        module = applied.module
        steps.append(Step("ktx", "ktx", "knob header", (edit,), ()))

    result = module.source
    # A constraint written over the launch's block follows the block the pipeline ends with
    # (block-size's BLOCK_X after expose's items count): ktx.passbase.LAUNCH_BLOCK.
    final = tuple(dict.fromkeys(resolve_launch_names(c, launch) for c in constraints))
    space = KnobSpace(tuple(knobs.values()), final)
    trace = Trace(
        fn.name,
        resolved_pipeline,
        sha256(original.source),
        sha256(result),
        tuple(steps),
        space.knobs,
        space.constraints,
        launch,
        args,
    )
    return Template(
        fn.name,
        original.path,
        original.print(),
        module.print(),
        space,
        launch,
        args,
        trace,
        tuple(outcomes),
    )


def _rewrite_site(
    p: AnyPass, site: Site, target: Target, accepted: list[_Accepted], line: int
) -> tuple[Outcome, tuple[_Accepted, LaunchMapping | None, tuple[str, ...]] | None]:
    module = target.module
    errors = module.errors_in(site.span)
    if errors:
        first = errors[0]
        split = [h for h in module.hidden_branches if module.span(h.start, h.end) == first.span]
        what = "inside code tree-sitter could not parse"
        if split:
            what = f"`{split[0].directive}` splits a statement across its branches"
        reason = f"{what} (line {first.span.line}); left as is"
        return Skipped(p.name, site.label, line, reason), None
    rw = Rewriter(target, p.name, site.label)
    try:
        p.rewrite(site, rw)
    except Refuse as refusal:
        return Skipped(p.name, site.label, line, refusal.reason), None
    for edit in rw.edits:
        where = module.span(edit.start, edit.end)
        if module.errors_in(where):
            reason = f"an edit at line {where.line} falls in code tree-sitter could not parse; left as is"
            return Skipped(p.name, site.label, line, reason), None
        for other in accepted:
            if any(edit.overlaps(o) for o in other.edits):
                reason = f"its edits overlap those of site {other.label}; left as is"
                return Skipped(p.name, site.label, line, reason), None
    if not rw.edits and not rw.knobs and rw.mapping == target.mapping:
        reason = "; ".join(rw.notes) or "nothing to change"
        return Skipped(p.name, site.label, line, reason), None
    names = ", ".join(f"{k.name} {{{', '.join(str(v) for v in k.values)}}}" for k in rw.knobs)
    message = f"exposed {names}" if names else "rewritten"
    if rw.notes:
        message += "; " + "; ".join(rw.notes)
    acc = _Accepted(site.label, rw.edits, rw.knobs, rw.constraints, line, rw.notes, False)
    outcome = Rewritten(p.name, site.label, line, message, tuple(k.name for k in rw.knobs))
    return outcome, (acc, rw.mapping, rw.template_args)


def _header_offset(module: Module, fn: Function) -> int:
    """Start of the line of the top-level declaration holding the first knob use (or the kernel)."""
    src = module.source
    first = fn.span.start
    for marker in (b"KTX_", b"ktx_"):
        at = src.find(marker)
        while at >= 0 and at < first:
            # Only whole identifiers count.
            before = src[at - 1 : at] if at else b" "
            if not (before.isalnum() or before == b"_"):
                first = at
                break
            at = src.find(marker, at + 1)
    root = module.tree.root_node
    node = root.descendant_for_byte_range(first, first)
    top = node
    while top is not None and top.parent is not None and top.parent.id != root.id:
        top = top.parent
    start = top.start_byte if top is not None else first
    return src.rfind(b"\n", 0, start) + 1


def mapping_from_spec(spec: Spec) -> LaunchMapping:
    """The spec's ``[launch]``, with its derived ``[vars]`` as vars (so passes can redefine them).

    Here, not in :mod:`ktx.ir.launch`: the spec is ktx's, and the IR reads only the source.
    """
    return LaunchMapping(
        tuple(e.text for e in spec.launch.grid),
        tuple(e.text for e in spec.launch.block),
        spec.launch.shared.text,
        tuple((name, expr.text) for name, expr in spec.derived),
        "spec",
    )


def template_for_spec(spec: Spec, pipeline: str, registry: Registry | None = None) -> Template:
    """Run ``pipeline`` on a spec's kernel, launched as the spec says (vars included); its
    name expression is qualified with the spec's namespace (``kernel = "vllm::rms_norm"``)."""
    template = run(
        spec.source_text(),
        pipeline,
        kernel=spec.kernel,
        mapping=mapping_from_spec(spec),
        template_args=spec.template_args,
        registry=registry,
        path=str(spec.folder / spec.source),
    )
    return dataclasses.replace(template, scope=spec.scope) if spec.scope else template


def candidate(spec: Spec, passes: str, config: Mapping[str, int]) -> Candidate:
    """The measurement harness's seam: the instantiated kernel of ``passes`` at ``config``."""

    t = template_for_spec(spec, passes)
    return candidate_from_template(spec, t, config)


def candidate_from_template(spec: Spec, template: Template, config: Mapping[str, int]) -> Candidate:
    """The instantiated kernel of an already built ``template`` at ``config`` (no re-templating)."""
    from ktx.measure.types import Candidate

    fields = template.candidate_fields(dict(config))
    label = f"{template.pipeline} " + ",".join(f"{k}={v}" for k, v in fields["config"].items())
    return Candidate(**fields, flags=spec.flags, label=label.strip())
