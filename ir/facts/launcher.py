"""The launch of a kernel as ``ktx init`` reads it: which kernel, which launch, with what.

Facts the drafter learns from the host code, each answering one question a spec asks:

* :func:`choose_kernel`: the kernel (the one named, else the file's only one) and its first
  launch site;
* :func:`deduce_template_args`: the template arguments the launch binds, and whether they
  hold wherever the launch is (a ``switch`` over types picks one branch: ``branch_picked``);
* :func:`read_launch`: grid, block and shared memory as expressions, through the launcher's
  locals, ``dim3`` fields and macros (a :class:`LaunchDraft`), and its shape variables;
* :func:`caller_values`, :func:`main_values`, :func:`header_value`: what the launcher's callers,
  ``main`` and local headers say the sizes are.

Source reading only: what a spec makes of the answers (TODO lines, default shapes) is
:mod:`ktx.draft`'s.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import tree_sitter as ts
from ktx.ir import syntax
from ktx.ir.consteval import SIZEOF
from ktx.ir.errors import KtxError, Location
from ktx.ir.expr import Expr
from ktx.ir.facts import assign
from ktx.ir.facts.dispatch import bind_types, dispatch_at
from ktx.ir.facts.dtypes import DTYPES, dtype_of, guess_rank
from ktx.ir.facts.instances import Instance, instances
from ktx.ir.language import parse_tree
from ktx.ir.launch import (
    _EXPRESSIONS,
    Untranslatable,
    _Translator,
    expansion_scope,
    launch_dims,
    launch_value_node,
    launcher_node,
    substitute,
)
from ktx.ir.nodes import Function, LaunchSite

if TYPE_CHECKING:
    from ktx.ir.module import Module

# -- choosing the kernel and its launch ------------------------------------------------------


def choose_kernel(module: Module, path: str, name: str | None) -> tuple[Function, LaunchSite]:
    """The kernel ``name`` (the file's only kernel when None) and its first launch site; a
    :class:`~ktx.ir.errors.KtxError` at ``path`` says what is missing (ktx init's error line)."""
    kernels = module.kernels
    if not kernels:
        raise KtxError("no __global__ kernel in the file", Location(path, 1, 1), "ktx init needs a kernel")
    if name is None:
        if len(kernels) > 1:
            names = ", ".join(k.name for k in kernels)
            raise KtxError(f"{len(kernels)} kernels ({names})", Location(path, 1, 1), "add --kernel NAME")
        fn = kernels[0]
    else:
        found = [k for k in kernels if k.name == name]
        if not found:
            names = ", ".join(k.name for k in kernels)
            raise KtxError(f"no kernel {name!r} (kernels: {names})", Location(path, 1, 1))
        fn = found[0]
    where = Location(path, fn.span.line, 1)
    sites = module.launches_of(fn.name)
    if not sites:
        raise KtxError(
            f"kernel {fn.name} is never launched in the file",
            where,
            "add a host launcher (kernel<<<grid, block>>>(args)) so ktx can read the launch",
        )
    return fn, sites[0]


@dataclass(frozen=True)
class TemplateArgs:
    """The kernel's template arguments at its launch: written there, or deduced.

    ``values`` has one entry per template parameter (None: neither written nor deducible);
    ``notes`` say where each deduced one came from."""

    values: tuple[str | None, ...]
    notes: tuple[str, ...]
    #: template parameters whose value is a guess: one of the launcher's instantiations in the
    #: file (the first), where the launch passes the launcher's own template parameter
    guessed: tuple[str, ...] = ()


def deduce_template_args(module: Module, fn: Function, site: LaunchSite) -> TemplateArgs:
    """``kernel<<<g, b>>>(out, in, n)`` with ``template <typename T> kernel(T* out, ...)``: T
    is the element type of the launcher's ``out`` (as C++ deduces it from the call).

    Written arguments come first; a type parameter not written is the element type of the
    first argument passed where the kernel's parameter is ``T*``/``T`` (the launcher's
    parameter or local, or a cast's target type); a value parameter falls back to its default.
    """
    written = [module.text(s) for s in site.template_arg_spans]
    call_args = launch_arguments(module, site)
    launcher = launcher_of(module, site)
    scope = launcher_node(module, site)
    locals_ = syntax.local_declarations(module, scope, before=site.span.start) if scope is not None else {}
    values: list[str | None] = []
    notes: list[str] = []
    passed: dict[int, str] = {}  # the launcher's template parameter a kernel's parameter gets
    for i, tp in enumerate(fn.template_params):
        if i < len(written):
            why = _uncertain(module, launcher, written[i])
            if why is not None:
                notes.append(f"{tp.name}: the launch passes {written[i]!r}, {why}")
                passed[i] = written[i].strip()
            values.append(
                None
                if why is not None
                else _launcher_constants(module, launcher, written[i], site.span.start)
            )
            continue
        found: str | None = None
        if tp.kind == "type":
            for p, node in zip(fn.params, call_args, strict=False):
                if p.base_type != tp.name:
                    continue
                found = _element_type(module, node, launcher, locals_, p.pointer_depth)
                if found is not None and _uncertain(module, launcher, found) is not None:
                    passed[i] = found.strip()
                    found = None
                if found is not None:
                    arg = " ".join(syntax.text(module, node).split())
                    notes.append(f"{tp.name} = {found}: deduced from the argument {arg} (parameter {p.name})")
                    break
        if found is None and tp.default is not None:
            # A default may name the parameters before it (``typename V = T``).
            earlier = {t.name: v for t, v in zip(fn.template_params, values, strict=False)}
            names = set(re.findall(r"\b[A-Za-z_]\w*\b", tp.default))
            if all(earlier.get(n) is not None for n in names & earlier.keys()):
                found = _substitute_names(tp.default, earlier)
                if _uncertain(module, None, found) is None:
                    notes.append(f"{tp.name} = {found}: the template parameter's default")
                else:
                    found = None
        values.append(found)
    guessed: list[str] = []
    if passed:
        guessed = _from_dispatch(module, fn, site.span.start, launcher, passed, values, notes)
    if launcher is not None and passed:
        guessed += _from_launcher_instances(module, fn, launcher, passed, values, notes)
    return TemplateArgs(tuple(values), tuple(notes), tuple(guessed))


def _from_dispatch(
    module: Module,
    fn: Function,
    offset: int,
    launcher: Function | None,
    passed: Mapping[int, str],
    values: list[str | None],
    notes: list[str],
) -> list[str]:
    """Fill ``values`` where the launch passes a type a dispatch macro around it binds (apex's
    ``welford_kernel<scalar_t_0, accscalar_t, ...>`` inside ``DISPATCH_FLOAT_AND_HALF``; vLLM's
    ``scalar_t``): one case for all of them, ranked as :func:`ktx.ir.facts.dtypes.guess_rank`
    ranks (fp32 before the 16-bit types, fp64 last), the others named in the note."""
    wanted = {i: t for i, t in passed.items() if values[i] is None}
    found = dispatch_at(module, offset) if wanted else None
    if found is None:
        return []
    options: list[dict[int, str]] = []
    for branch in found.branches:
        resolved = {i: " ".join(bind_types(t, branch).split()) for i, t in wanted.items()}
        certain = {
            i: v for i, v in resolved.items() if v != wanted[i] and _uncertain(module, launcher, v) is None
        }
        if certain and certain not in options:
            options.append(certain)
    if not options:
        return []
    best = min(options, key=lambda o: (-len(o), guess_rank(list(o.values()))))
    where = (
        f"one of the {len(found.branches)} cases of the dispatch macro {found.macro} "
        f"(line {found.line}) around the launch"
    )
    return _guess_note(fn, best, options, values, notes, where)


def _guess_note(
    fn: Function,
    best: Mapping[int, str],
    options: Sequence[Mapping[int, str]],
    values: list[str | None],
    notes: list[str],
    where: str,
) -> list[str]:
    """Set ``values`` from ``best`` and add one note for them all: ``T = float, U = float:
    guessed, <where>; others give T at::Half``. Returns the names so filled."""
    out = []
    others: list[str] = []
    for i, v in best.items():
        name = fn.template_params[i].name
        values[i] = v
        rest = sorted({o[i] for o in options if i in o} - {v})
        if rest:
            others.append(f"{name} {', '.join(rest)}")
        out.append(name)
    settled = ", ".join(f"{fn.template_params[i].name} = {v}" for i, v in best.items())
    notes.append(f"{settled}: guessed, {where}" + (f"; others give {'; '.join(others)}" if others else ""))
    return out


def _from_launcher_instances(
    module: Module,
    fn: Function,
    launcher: Function,
    passed: Mapping[int, str],
    values: list[str | None],
    notes: list[str],
) -> list[str]:
    """Fill ``values`` where the launch passes the launcher's own template parameter, from one
    of the launcher's instantiations in the file (:func:`launcher_instances`: explicit ones,
    ``template void quantizeBlockwise<half, 1, General8bit>(...)``, and calls, written or
    deduced, through the dispatch macros and template callers around them); one instantiation
    for all of them, so the guess is one the project builds: the one that settles the most of
    them, ranked by :func:`ktx.ir.facts.dtypes.guess_rank`, then the first. Returns the
    kernel's template parameters so filled, each with a note naming the alternatives."""
    own = [t.name for t in launcher.template_params]
    wanted = {i: own.index(text) for i, text in passed.items() if values[i] is None and text in own}
    if not wanted:
        return []
    # An explicit instantiation is at namespace scope: its arguments are the file's constants,
    # types and enumerators (bitsandbytes' General8bit, from a header), whatever ktx knows of
    # them. A call's may be its caller's template parameters (ggml's ``forward``), which
    # launcher_instances resolves where it can: the rest are not taken.
    options: list[tuple[Instance, dict[int, str]]] = []
    for inst in launcher_instances(module, launcher):
        if len(inst.args) != len(own):
            continue
        settled = {
            i: inst.args[j]
            for i, j in wanted.items()
            if not inst.how.startswith("call") or _uncertain(module, None, inst.args[j]) is None
        }
        if settled:
            options.append((inst, settled))
    if not options:
        return []
    most = max(len(o) for _, o in options)
    options = [(inst, o) for inst, o in options if len(o) == most]
    first, best = min(options, key=lambda io: guess_rank(list(io[1].values())))
    where = (
        f"one of the launcher {launcher.name}'s {len(options)} instantiations in the file "
        f"(line {first.line}, {first.how}: <{', '.join(first.args)}>)"
    )
    return _guess_note(fn, best, [o for _, o in options], values, notes, where)


def launcher_instances(module: Module, launcher: Function, depth: int = 2) -> list[Instance]:
    """The instantiations of the template function ``launcher`` the file makes, in file order:
    :func:`ktx.ir.facts.instances.instances` (written arguments), and calls without written
    arguments, deduced as the compiler does from the arguments' types (ggml's
    ``clamp_cuda((const half *) src0_d, ...)``). Arguments that a dispatch macro around the call
    binds (apex's ``HostApplyRMSNorm<scalar_t_in, accscalar_t, scalar_t_out>`` inside
    ``DISPATCH_..._INOUT_TYPES``) give one instance per case; arguments that are the calling
    function's own template parameters (ggml's ``forward``) one per instantiation of that caller,
    ``depth`` callers up."""
    text = module.text_str
    found = list(instances(text, launcher.name))
    found += _deduced_calls(module, launcher)
    found.sort(key=lambda i: i.offset)
    out: list[Instance] = []
    for inst in found:
        out += _resolved(module, inst, depth)
    return out


def _byte_offset(module: Module, offset: int) -> int:
    return len(module.text_str[:offset].encode())


def _enclosing_function(module: Module, at: int) -> Function | None:
    """The innermost function whose body holds byte offset ``at``."""
    inside = [f for f in module.functions if f.body.start <= at < f.body.end]
    return min(inside, key=lambda f: f.body.end - f.body.start) if inside else None


def _resolved(module: Module, inst: Instance, depth: int) -> list[Instance]:
    """``inst`` with its arguments' dispatch-bound names and caller template parameters replaced."""
    if inst.offset < 0 or not inst.how.startswith("call"):
        return [inst]
    at = _byte_offset(module, inst.offset)
    variants = [inst]
    found = dispatch_at(module, at)
    if found is not None and any(
        re.search(rf"\b{re.escape(n)}\b", a) for b in found.branches for n in b for a in inst.args
    ):
        variants = [
            Instance(
                tuple(" ".join(bind_types(a, b).split()) for a in inst.args), inst.line, inst.how, inst.offset
            )
            for b in found.branches
        ]
    caller = _enclosing_function(module, at)
    own = [t.name for t in caller.template_params] if caller is not None else []
    if (
        depth <= 0
        or caller is None
        or not any(re.search(rf"\b{re.escape(n)}\b", a) for v in variants for n in own for a in v.args)
    ):
        return variants
    above = [c for c in launcher_instances(module, caller, depth - 1) if len(c.args) == len(own)]
    if not above:
        return variants
    out = []
    for v in variants:
        for c in above:
            bound = dict(zip(own, c.args, strict=True))
            args = tuple(_substitute_names(a, bound) for a in v.args)
            out.append(Instance(args, v.line, v.how, v.offset))
    return out


def _deduced_calls(module: Module, launcher: Function) -> list[Instance]:
    """Calls of ``launcher`` that write no template arguments, each with the type parameters
    deduced from the call's arguments (a cast's type, the caller's parameter or local); a
    parameter not deduced keeps its name (the instance is then partial)."""
    types = [t for t in launcher.template_params if not t.variadic]
    if not types or not any(t.kind == "type" for t in types):
        return []
    out = []
    for node in syntax.walk(module.tree.root_node):
        if node.type != "call_expression":
            continue
        callee = node.child_by_field_name("function")
        if callee is None or callee.type not in ("identifier", "qualified_identifier"):
            continue
        if syntax.text(module, callee).split("::")[-1] != launcher.name:
            continue
        arguments = node.child_by_field_name("arguments")
        if arguments is None or len(arguments.named_children) != len(launcher.params):
            continue
        caller = _enclosing_function(module, node.start_byte)
        scope = module.node(caller.body) if caller is not None else None
        locals_ = (
            syntax.local_declarations(module, scope, before=node.start_byte) if scope is not None else {}
        )
        args: list[str] = []
        for t in types:
            value = t.name
            for p, a in zip(launcher.params, arguments.named_children, strict=False):
                if t.kind == "type" and p.base_type == t.name:
                    got = _element_type(module, a, caller, locals_, p.pointer_depth)
                    if got is not None:
                        value = got
                        break
            args.append(value)
        if args == [t.name for t in types]:
            continue
        offset = len(module.source[: node.start_byte].decode("utf-8", "replace"))
        out.append(Instance(tuple(args), node.start_point[0] + 1, "call, types from its arguments", offset))
    return out


#: Names a template argument may use with one meaning wherever the launch is: C++ and CUDA types.
_TYPE_WORDS = frozenset(
    {w for t in DTYPES for w in t.split()}
    | {"true", "false", "void", "sizeof", "std", "uint2", "uint4", "int2", "int4", "float2", "float4",
       "double2", "half2", "__half2", "__nv_bfloat162", "nv_bfloat162", "char2", "char4", "uchar4",
       "short2", "ushort2", "longlong2", "ulonglong2", "int64_t", "uint64_t", "size_t", "at", "c10",
       "Half", "BFloat16", "cutlass", "half_t", "bfloat16_t", "float_e4m3_t", "float_e5m2_t"}
)  # fmt: skip


def _uncertain(module: Module, launcher: Function | None, text: str) -> str | None:
    """Why a template argument at the launch does not name one instantiation, or None.

    ``kernel<T>`` inside ``template <typename T> void launch(...)``, or ``<HEAD_DIM>`` bound by
    a dispatch macro, or ``<vec_size>`` a launcher local: the spec needs the value, and the
    text alone would compile only where the launcher's scope gives it one."""
    for name in re.findall(r"\b[A-Za-z_]\w*\b", text):
        if name in _TYPE_WORDS:
            continue
        if launcher is not None and any(t.name == name for t in launcher.template_params):
            return f"a template parameter of the launcher {launcher.name}: which instantiation?"
        if launcher is not None and launcher.param(name) is not None:
            return f"the launcher's parameter {name}: a template argument needs a constant"
        if any(m.name == name and m.int_value is not None for m in module.macros):
            continue
        scopes = (None, launcher.name if launcher is not None else None)
        if any(c.name == name and c.int_value is not None and c.function in scopes for c in module.constants):
            continue
        if _file_level_type(module, name):
            continue
        return f"and {name} has no one value in the file (a launcher local, a dispatch macro's name?)"
    return None


def branch_picked(module: Module, site: LaunchSite, kernel: str, shape_vars: set[str]) -> str | None:
    """Why the launch's written template arguments are not the draft's to pick, or None: the
    launcher launches the kernel under several conditions on a shape variable, with different
    arguments (DeepSpeed's softmax: ``<2, 64, 2>`` when ``sequence_length <= 8`` ...
    ``<32, 1, 128>`` above 512), so the first launch's arguments hold only where the shapes
    meet its condition. A switch on a value the draft does not vary (moe_sum's ``topk``) picks
    one consistent instantiation: no TODO."""
    guard = _guard(module, site)
    if (
        not site.template_arg_spans
        or guard is None
        or not set(re.findall(r"\b[A-Za-z_]\w*\b", guard)) & shape_vars
    ):
        return None
    scope = launcher_node(module, site)
    if scope is None:
        return None
    launcher = launcher_of(module, site)
    sites = [
        s
        for s in module.launches_of(kernel)
        if s.template_arg_spans and scope.start_byte <= s.span.start < scope.end_byte
    ]

    def written(s: LaunchSite) -> str:
        texts = (" ".join(module.text(a).split()) for a in s.template_arg_spans)
        return ", ".join(_launcher_constants(module, launcher, t, s.span.start) for t in texts)

    if len({written(s) for s in sites}) < 2:
        return None
    shown: list[str] = []
    for s in sites[:3]:
        args = written(s)
        cond = _guard(module, s)
        shown.append(f"<{args}>" + (f" if {cond}" if cond else ""))
    more = f", ... ({len(sites)} launches)" if len(sites) > 3 else ""
    return (
        f"the launcher picks them by condition ({'; '.join(shown)}{more}); write the ones "
        "the [shapes] take (and keep the shapes within that condition)"
    )


def arguments_by_branch(module: Module, site: LaunchSite, kernel: str) -> dict[int, tuple[str, int]]:
    """The kernel arguments that another launch of ``kernel`` in the same launcher passes
    differently, by position: (that launch's text, its line). bitsandbytes' dequantize launches
    the kernel with ``blocksize / 2`` when ``DATA_TYPE > 0`` and ``blocksize`` otherwise: the
    first launch's argument holds only on its branch, which the draft cannot pick while the
    condition's value is unknown."""
    scope = launcher_node(module, site)
    if scope is None:
        return {}
    mine = [" ".join(syntax.text(module, a).split()) for a in launch_arguments(module, site)]
    out: dict[int, tuple[str, int]] = {}
    for other in module.launches_of(kernel):
        if other.span.start == site.span.start or not scope.start_byte <= other.span.start < scope.end_byte:
            continue
        theirs = [" ".join(syntax.text(module, a).split()) for a in launch_arguments(module, other)]
        if len(theirs) != len(mine):
            continue
        for i, (a, b) in enumerate(zip(mine, theirs, strict=True)):
            if a != b and i not in out:
                out[i] = (b, other.span.line)
    return out


def redeclared(module: Module, site: LaunchSite, which: str) -> int | None:
    """The line of another declaration, in the launcher, of the local the launch passes as its
    ``grid`` or ``block`` (``dim3 block_dim(...)`` declared again in a later ``else``), or None."""
    scope = launcher_node(module, site)
    span = site.grid if which == "grid" else site.block
    node = syntax.node_at(module, span, _EXPRESSIONS) or module.node(span)
    if scope is None or node.type != "identifier":
        return None
    name = syntax.text(module, node)
    seen = syntax.local_declarations(module, scope, before=site.span.start).get(name)
    for n in syntax.walk(scope):
        if n.type != "declaration" or (seen is not None and n.id == seen.declaration.id):
            continue
        for decl in n.children_by_field_name("declarator"):
            ident = syntax.declarator_identifier(decl)
            if ident is not None and syntax.text(module, ident) == name:
                return n.start_point[0] + 1
    return None


def reassigned(module: Module, site: LaunchSite, which: str) -> tuple[int, ...]:
    """Lines, before the launch, where the launcher changes a field of the ``dim3`` it passes as
    its ``grid`` or ``block`` after constructing it with a value (``dim3 block(min(n, 1024));``
    then ``block.x = 1024`` under ``if (n % 32 != 0)`` and ``block.x /= 2`` for half): the
    declaration alone is then not the launch's value. A ``dim3`` declared empty and set field
    by field is read whole by the launch reader, and is not this."""
    scope = launcher_node(module, site)
    span = site.grid if which == "grid" else site.block
    node = syntax.node_at(module, span, _EXPRESSIONS) or module.node(span)
    if scope is None or node.type != "identifier":
        return ()
    name = re.escape(syntax.text(module, node))
    text = module.text_str[scope.start_byte : site.span.start]
    built = re.search(rf"\bdim3\s+{name}\s*[({{=]", text)
    if built is None:
        return ()
    first = scope.start_point[0] + 1
    found = re.finditer(rf"(?<![\w.])\b{name}\s*\.\s*[xyz]\s*[-+*/]?=(?!=)", text[built.end() :])
    return tuple(first + text.count("\n", 0, built.end() + m.start()) for m in found)


def _guard(module: Module, site: LaunchSite) -> str | None:
    """The condition of the innermost ``if`` whose then-branch holds ``site``."""
    node: ts.Node | None = module.node(site.span)
    while node is not None and node.parent is not None:
        parent = node.parent
        if parent.type == "if_statement" and parent.child_by_field_name("consequence") == node:
            cond = parent.child_by_field_name("condition")
            return " ".join(syntax.text(module, cond).split()).strip("()") if cond is not None else None
        node = parent
    return None


def _substitute_names(text: str, values: Mapping[str, str | None]) -> str:
    return re.sub(r"\b[A-Za-z_]\w*\b", lambda m: values.get(m.group(0)) or m.group(0), text)


def _launcher_constants(module: Module, launcher: Function | None, text: str, at: int | None = None) -> str:
    """``V`` -> ``4`` for a ``constexpr int V = 4;`` of the launcher (not in scope elsewhere).

    With ``at`` (the launch's offset), only the declarations in scope there: a launcher that
    declares ``threads = 128`` and, in a later ``else`` block, ``threads = 256`` launches its
    first branches with 128 (DeepSpeed's softmax)."""
    if launcher is None:
        return text
    values: dict[str, str] = {}
    for c in sorted(module.constants, key=lambda c: c.span.start):
        if c.function != launcher.name or c.int_value is None:
            continue
        if at is not None and not _in_scope(module, c.span.start, at):
            continue
        values[c.name] = str(c.int_value)
    return re.sub(r"\b[A-Za-z_]\w*\b", lambda m: values.get(m.group(0), m.group(0)), text)


def _in_scope(module: Module, declared: int, at: int) -> bool:
    """A declaration at offset ``declared`` is visible at offset ``at``: it comes first, and
    the block that holds it holds ``at`` too."""
    if declared >= at:
        return False
    node: ts.Node | None = module.tree.root_node.descendant_for_byte_range(declared, declared)
    while node is not None and node.type != "compound_statement":
        node = node.parent
    return node is None or node.start_byte <= at < node.end_byte


def _file_level_type(module: Module, name: str) -> bool:
    """``name`` is a struct, class, enum, typedef or alias declared outside every function."""
    text = module.text_str
    word = re.escape(name)
    pattern = (
        rf"\b(?:struct|class|enum|union)\s+{word}\b|\busing\s+{word}\s*=|\btypedef\b[^;{{}}]*\b{word}\s*;"
    )
    for m in re.finditer(pattern, text):
        if m.group(0)[0] in "sceu" and text[: m.start()].rstrip()[-1:] in ("<", ","):
            # ``template <class T, ...>``: a template parameter, one meaning per instantiation,
            # not a type of the file (lmdeploy launches ``RMSNorm<Z, T, ...>`` with the ``T``
            # of ``using T = decltype(t)`` in a dispatch lambda)
            continue
        at = len(text[: m.start()].encode())
        if not any(f.body.start <= at < f.body.end for f in module.functions):
            return True
    return False


def _element_type(
    module: Module,
    node: ts.Node,
    launcher: Function | None,
    locals_: Mapping[str, syntax.LocalDecl],
    depth: int,
) -> str | None:
    """The type an argument passes where the kernel takes ``T`` behind ``depth`` pointers."""
    while node.type == "parenthesized_expression" and node.named_child_count == 1:
        node = node.named_children[0]
    written: str | None = None
    if node.type == "identifier":
        name = syntax.text(module, node)
        param = launcher.param(name) if launcher is not None else None
        if param is not None:
            return param.base_type if param.pointer_depth == depth else None
        local = locals_.get(name)
        if local is not None:
            written = local.type
            decl = local.declaration.child_by_field_name("declarator")
            stars = syntax.text(module, decl).split("=")[0].count("*") if decl is not None else 0
            written += "*" * stars
    elif node.type == "cast_expression":
        target = node.child_by_field_name("type")
        written = syntax.text(module, target) if target is not None else None
    elif node.type == "call_expression":
        fn = node.child_by_field_name("function")
        args = node.child_by_field_name("arguments")
        if fn is not None and fn.type == "template_function" and args is not None:
            callee = fn.child_by_field_name("name")
            targs = fn.child_by_field_name("arguments")
            if callee is not None and targs is not None and syntax.text(module, callee).endswith("_cast"):
                written = syntax.text(module, targs).strip()[1:-1]
    if written is None:
        return None
    if written.count("*") != depth:
        return None
    base = " ".join(re.sub(r"\bconst\b|\bvolatile\b|__restrict__|\*", " ", written).split())
    return base or None


# -- the launcher: arguments, callers, main ---------------------------------------------------


def launch_arguments(module: Module, site: LaunchSite) -> list[ts.Node]:
    """The launch's kernel arguments as nodes: the call's own, or, for a launch helper that
    takes the kernel's arguments last (``cudaLaunchKernelEx(&config, kernel, a, b)``), the
    trailing ones whose text is the site's arguments."""
    node = module.node(site.span)
    want = [" ".join(a.split()) for a in site.args]
    for n in syntax.walk(node):
        if n.type == "argument_list" and n.parent is not None and n.parent.type == "call_expression":
            args = [c for c in n.named_children if c.type != "comment"]
            if len(args) == len(site.args):
                return args
            tail = args[len(args) - len(site.args) :] if site.args and len(args) > len(site.args) else []
            if tail and [" ".join(syntax.text(module, a).split()) for a in tail] == want:
                return tail
    return []


def launcher_of(module: Module, site: LaunchSite) -> Function | None:
    return next((f for f in module.functions if f.name == site.function and f.body.contains(site.span)), None)


class _Snippet:
    """A macro's body parsed alone: what the launch translator reads of a module (its source,
    tree, macros and constants: none), without a module (which would import this one)."""

    def __init__(self, source: bytes) -> None:
        self.source = source
        self.tree = parse_tree(source)
        self.macros: tuple[object, ...] = ()
        self.constants: tuple[object, ...] = ()


@dataclass
class _DraftTranslator(_Translator):
    """The launch translator, plus what a draft needs beyond it: ``block.y`` of a ``dim3``
    local is its y component, and a local the launcher sets in several places (``int gpb = 1;
    if (n % 16 == 0) gpb = 16; ...``) is a derived value (``derived``: its expression, or None
    when ktx cannot follow it), never a shape variable."""

    derived: dict[str, str | None] = field(default_factory=dict)
    derived_lines: dict[str, int] = field(default_factory=dict)
    #: the source file, for function-like macros of its local headers (``DIVIDE(x, 32)``)
    path: Path | None = None
    #: type names the launch binds (the launcher's template parameter ``T`` -> ``float``), for
    #: ``sizeof(T)``; ``sized`` collects those read, so the draft can doubt a guessed one
    types: dict[str, str] = field(default_factory=dict)
    sized: set[str] = field(default_factory=set)
    #: the type names whose sizeof each local's value reads (a local is translated once, then
    #: reused: its reads are kept to count for every expression that names it)
    sized_in: dict[str, frozenset[str]] = field(default_factory=dict)
    reading: set[str] = field(default_factory=set)
    #: integer locals set once from host objects ktx does not read (``int n = x.size(0)``),
    #: drafted as shape variables of their own name: name -> the line that sets it
    host_sizes: dict[str, int] = field(default_factory=dict)

    def call(self, node: ts.Node, text: str) -> str:
        try:
            return super().call(node, text)
        except Untranslatable:
            expanded = self._macro_call(node)
            if expanded is None:
                raise
            return expanded

    def _macro_call(self, node: ts.Node) -> str | None:
        """A function-like macro of the file or its local headers whose body is an expression
        of its parameters alone (``#define DIVIDE(x, size) (((x) + (size) - 1) / (size))``):
        the body translated with the parameters as names, then the arguments' translations put
        in their place. None for any other call (a body naming anything else, a statement)."""
        fn, arguments = node.child_by_field_name("function"), node.child_by_field_name("arguments")
        if fn is None or arguments is None or fn.type != "identifier":
            return None
        name = syntax.text(self.module, fn)
        found = function_macro(self.module, self.path, name)
        if found is None:
            return None
        params, body = found
        args = [c for c in arguments.named_children if c.type != "comment"]
        if len(args) != len(params) or not params:
            return None
        tiny = _Snippet(f"long __ktx_macro = ({body});".encode())
        value = next((n for n in syntax.walk(tiny.tree.root_node) if n.type == "init_declarator"), None)
        value = value.child_by_field_name("value") if value is not None else None
        if value is None or tiny.tree.root_node.has_error:
            return None
        inner = _Translator(tiny, tiny.tree.root_node, len(tiny.source), {}, frozenset(params))  # type: ignore[arg-type]
        try:
            shape = inner.expr(value)
        except (Untranslatable, KtxError):
            return None
        if inner.free - set(params):
            return None  # names of the file's context inside the body: not followed
        return substitute(shape, {p: self.expr(a) for p, a in zip(params, args, strict=True)})

    def expr(self, node: ts.Node) -> str:
        limit = (
            device_limit(self.module, node)
            if node.type in ("subscript_expression", "field_expression")
            else None
        )
        if limit is not None:
            return str(limit)
        if node.type == "sizeof_expression":
            target = node.child_by_field_name("type") or node.child_by_field_name("value")
            name = " ".join(syntax.text(self.module, target).strip("() ").split()) if target else ""
            if name in self.types and self.types[name] in SIZEOF:
                self.sized.add(name)
                self.reading.add(name)
                return str(SIZEOF[self.types[name]])
        if node.type == "field_expression":
            arg, fld = node.child_by_field_name("argument"), node.child_by_field_name("field")
            if arg is not None and fld is not None and arg.type == "identifier":
                local = self.locals.get(syntax.text(self.module, arg))
                axis = "xyz".find(syntax.text(self.module, fld))
                if local is not None and local.type == "dim3" and axis >= 0:
                    comps = local.args or ((local.value,) if local.value is not None else ())
                    if axis < len(comps):
                        return f"({self.expr(comps[axis])})"
                    if comps:
                        return "1"
        return super().expr(node)

    def name(self, name: str) -> str:
        if name in self.host_sizes:
            self.free.add(name)
            return name
        outer, self.reading = self.reading, set()
        try:
            return self._name(name)
        except Untranslatable:
            local = self.locals.get(name)
            if local is None or not _host_size(self.module, self.scope, local, self.params):
                raise
            # ``int num_tokens = input.numel() / input.size(-1)``: a size of the caller's
            # tensors, the run's own: a shape variable of that name (the draft says so).
            self.used_vars.pop(name, None)
            self.host_sizes[name] = local.declaration.start_point[0] + 1
            self.free.add(name)
            return name
        finally:
            if name in self.used_vars and name not in self.sized_in:
                self.sized_in[name] = frozenset(self.reading)
            self.reading = outer | self.reading | self.sized_in.get(name, frozenset())

    def _name(self, name: str) -> str:
        local = self.locals.get(name)
        if (
            local is not None
            and name not in self.params
            and name not in self.used_vars
            and assign.reassigned_after(self.module, self.scope, name, local.declaration.end_byte)
        ):
            if name not in self.derived:
                self.derived[name] = None  # cycle guard
                self.derived_lines[name] = local.declaration.start_point[0] + 1
                self.derived[name] = self._chosen(name, local)
            return name
        return super().name(name)

    def _chosen(self, name: str, local: syntax.LocalDecl) -> str | None:
        """``T x = a; if (c1) x = b; else if (c2) x = c;`` (the only writes, before the
        launch, in one if-chain right in the launcher's body) as ``b if c1 else (c if c2 else a)``."""
        writes = [w for w in assign.assigned(self.module, self.scope).get(name, [])]
        if local.value is None or not writes or any(w.start_byte > self.before for w in writes):
            return None
        chain = writes[0]
        while chain.parent is not None and chain.parent.id != self.scope.id:
            chain = chain.parent
        if chain.type != "if_statement" or chain.parent is None:
            return None
        if syntax.in_loop_or_switch(chain, self.scope):
            return None
        used: list[int] = []
        try:
            text = self._branch(chain, name, local.value, used)
        except Untranslatable:
            return None
        if text is None or sorted(used) != sorted(w.id for w in writes):
            return None
        return text

    def _branch(self, node: ts.Node, name: str, fallback: ts.Node, used: list[int]) -> str | None:
        if node.type == "else_clause":
            inner = [c for c in node.named_children if c.type != "comment"]
            return self._branch(inner[0], name, fallback, used) if len(inner) == 1 else None
        if node.type == "if_statement":
            cond = node.child_by_field_name("condition")
            then = node.child_by_field_name("consequence")
            other = node.child_by_field_name("alternative")
            clause = [c for c in cond.named_children if c.type != "comment"] if cond is not None else []
            if then is None or len(clause) != 1:
                return None
            value = self._branch(then, name, fallback, used)
            rest = self._branch(other, name, fallback, used) if other is not None else self.expr(fallback)
            if value is None or rest is None:
                return None
            return f"({value} if {self.expr(clause[0])} else {rest})"
        if node.type == "compound_statement":
            inner = [c for c in node.named_children if c.type != "comment"]
            return self._branch(inner[0], name, fallback, used) if len(inner) == 1 else None
        if node.type == "expression_statement" and node.named_child_count == 1:
            assign = node.named_children[0]
            left, right = assign.child_by_field_name("left"), assign.child_by_field_name("right")
            op = assign.child_by_field_name("operator")
            if (
                assign.type == "assignment_expression" and left is not None and right is not None
                and op is not None and syntax.text(self.module, left) == name
            ):  # fmt: skip
                value = self.expr(right)
                before = self.expr(fallback)
                # ``x <<= 1`` in a branch: from the value before the chain (each branch is one of
                # several exclusive ones).
                forms = {
                    "=": value, "+=": f"({before}) + ({value})", "-=": f"({before}) - ({value})",
                    "*=": f"({before}) * ({value})", "<<=": f"({before}) * 2 ** ({value})",
                    ">>=": f"({before}) // 2 ** ({value})",
                }  # fmt: skip
                if op.type in forms:
                    used.append(assign.id)
                    return forms[op.type]
        if node.type == "throw_statement":
            return self.expr(fallback)  # no launch on this branch: any value
        return None


_INT_TYPE = re.compile(
    r"(?:const\s+)?(?:unsigned\s+|signed\s+)?"
    r"(?:int|long|long long|short|size_t|u?int(?:8|16|32|64)_t|index_t)"
)


def _host_size(module: Module, scope: ts.Node, local: syntax.LocalDecl, params: frozenset[str]) -> bool:
    """An integer local set once, from a member of an object the launcher is given
    (``x.size(0)``, ``t->ne[1]``, ``x.numel() / x.size(-1)``, ``x`` a parameter): a value of
    the caller's data, which ktx does not read, and so a size of the run. Not a member of the
    launcher's own locals (``threads.y``) nor of anything else (the device's properties)."""
    if local.value is None or not _INT_TYPE.fullmatch(" ".join(local.type.split())):
        return False
    if assign.reassigned_after(module, scope, local.name, local.declaration.end_byte):
        return False
    roots = [_object_root(module, n) for n in syntax.walk(local.value) if n.type == "field_expression"]
    return bool(roots) and all(r is not None and r in params for r in roots)


def _object_root(module: Module, node: ts.Node) -> str | None:
    """The name a member access starts from (``a`` of ``a.size(0)``, ``a->b[1].c``), or None
    when it starts from a call (``props()->x``) or anything else."""
    while node.type in ("field_expression", "call_expression", "subscript_expression"):
        inner = node.child_by_field_name("argument") or node.child_by_field_name("function")
        if inner is None:
            return None
        if node.type == "call_expression" and inner.type != "field_expression":
            return None  # ``props()->x``: a function's result, not the caller's object
        node = inner
    return syntax.text(module, node) if node.type == "identifier" else None


#: Limits every CUDA device has had since compute capability 3.0 (the CUDA programming guide's
#: table of technical specifications): a launcher that reads them from the device properties
#: gets the same numbers on every GPU ktx targets.
DEVICE_LIMITS: dict[str, tuple[int, ...]] = {
    "maxGridSize": (2147483647, 65535, 65535),
    "maxThreadsPerBlock": (1024,),
    "warpSize": (32,),
}


def device_limit(module: Module, node: ts.Node) -> int | None:
    """``props->maxGridSize[1]``, ``prop.maxThreadsPerBlock``, ``p.warpSize``: the limit's value."""
    index: int | None = None
    if node.type == "subscript_expression":
        sub = node.child_by_field_name("indices") or node.child_by_field_name("index")
        text = syntax.text(module, sub).strip("[] ") if sub is not None else ""
        index = int(text) if text.isdigit() else None
        node = node.child_by_field_name("argument") or node
        if index is None:
            return None
    if node.type != "field_expression":
        return None
    fld = node.child_by_field_name("field")
    value = DEVICE_LIMITS.get(syntax.text(module, fld)) if fld is not None else None
    if value is None or (index is None) != (len(value) == 1):
        return None  # ``maxGridSize`` unsubscripted, a scalar limit subscripted
    return value[index or 0] if (index or 0) < len(value) else None


def function_macro(
    module: Module, path: Path | None, name: str, depth: int = 2
) -> tuple[tuple[str, ...], str] | None:
    """``#define NAME(a, b) body`` of the file, else of the local headers it includes (two
    levels deep, the first found): its parameters and body (one line)."""
    for m in module.macros:
        if m.name == name and m.params is not None:
            return m.params, m.value
    return _header_macro(path, name, depth) if path is not None else None


def _header_macro(path: Path, name: str, depth: int) -> tuple[tuple[str, ...], str] | None:
    try:
        text = path.read_text(errors="replace")
    except OSError:
        return None
    m = re.search(rf"^\s*#\s*define\s+{re.escape(name)}\(([\w\s,]*)\)[ \t]+(.+?)\s*(?://.*)?$", text, re.M)
    if m is not None and not m.group(2).endswith("\\"):
        return tuple(p.strip() for p in m.group(1).split(",") if p.strip()), m.group(2)
    if depth > 0:
        for inc in re.findall(r'#\s*include\s+"([^"]+)"', text):
            found = _header_macro(path.parent / inc, name, depth - 1)
            if found is not None:
                return found
    return None


def _dim3_fields(tr: _DraftTranslator, comps: Sequence[ts.Node]) -> list[ts.Node] | None:
    """``dim3 g; g.x = E;`` (each field set once, in the block that declares ``g``, before the
    launch): the values of x, y, z as far as set (a grid of ``E`` blocks); None when ``comps``
    is not such a local. A ``dim3`` local declared without a value whose fields are set in any
    other way raises :class:`Untranslatable`: read as a name it would be a 1-D launch of a
    shape variable ``gridDim`` (exllamav2's ``h_add``, which declares ``dim3 blockDim,
    gridDim;`` in each branch and sets ``.x`` and ``.y``)."""
    if len(comps) != 1 or comps[0].type != "identifier":
        return None
    name = syntax.text(tr.module, comps[0])
    local = tr.locals.get(name)
    if local is None or local.type != "dim3" or local.value is not None or local.args:
        return None
    block = local.declaration.parent or tr.scope
    found: dict[str, ts.Node] = {}
    for n in syntax.walk(block):
        if n.type != "assignment_expression" or n.start_byte >= tr.before:
            continue
        if n.start_byte < local.declaration.end_byte:
            continue
        left, right = n.child_by_field_name("left"), n.child_by_field_name("right")
        op = n.child_by_field_name("operator")
        if left is None or right is None or left.type != "field_expression":
            continue
        arg, fld = left.child_by_field_name("argument"), left.child_by_field_name("field")
        if arg is None or fld is None or syntax.text(tr.module, arg) != name:
            continue
        axis = syntax.text(tr.module, fld)
        top = n.parent is not None and n.parent.parent is not None and n.parent.parent.id == block.id
        if op is None or op.type != "=" or axis in found or axis not in ("x", "y", "z") or not top:
            raise Untranslatable(f"{name}.{axis} set in a way ktx does not follow")
        found[axis] = right
    axes = "".join(a for a in "xyz" if a in found)
    if axes not in ("x", "xy", "xyz"):
        raise Untranslatable(f"the fields of dim3 {name} set as {axes or 'nothing'}")
    return [found[a] for a in axes]


def translator_for(module: Module, site: LaunchSite, launcher: Function | None) -> _DraftTranslator:
    scope = launcher_node(module, site)
    params = frozenset(p.name for p in launcher.params) if launcher else frozenset()
    locals_ = syntax.local_declarations(module, scope, before=site.span.start) if scope is not None else {}
    path = Path(module.path) if module.path else None
    root = scope or module.tree.root_node
    return _DraftTranslator(module, root, site.span.start, locals_, params, path=path)


def expansion_value(module: Module, site: LaunchSite, name: str) -> str | None:
    """``name`` (a name of a launch macro's body: ``grid``) as the local of the one function the
    macro expands in (:func:`expansion_scope`), translated to the spec's variables: a scalar, or
    a ``dim3`` of one component (``dim3 grid((n + 511) / 512)``). None where the macro expands
    in several functions, the local is not one value, or its expression does not translate."""
    scope = expansion_scope(module, site)
    if scope is None:
        return None
    fn, at = scope
    body = module.node(fn.body)
    locals_ = syntax.local_declarations(module, body, before=at)
    local = locals_.get(name)
    if local is None or assign.reassigned_after(module, body, name, local.declaration.end_byte):
        return None
    if local.args:
        if len(local.args) != 1:
            return None
        node = local.args[0]
    elif local.value is not None:
        node = local.value
    else:
        return None
    params = frozenset(p.name for p in fn.params)
    tr = _DraftTranslator(module, body, at, locals_, params, path=Path(module.path) if module.path else None)
    try:
        return canonical(inline_vars(tr.expr(node), tr))
    except (Untranslatable, KtxError):
        return None


@dataclass(frozen=True)
class LaunchDraft:
    """The launch as the draft writes it: each part an expression, or None (a TODO)."""

    grid: tuple[str, ...] | None
    block: tuple[str, ...] | None
    shared: str | None
    shared_text: str
    notes: tuple[str, ...]
    #: per part (``grid``, ``block``, ``shared``), the type names whose sizeof it reads
    sized: tuple[tuple[str, tuple[str, ...]], ...] = ()


def read_launch(module: Module, site: LaunchSite, tr: _DraftTranslator) -> LaunchDraft:
    """Grid, block and dynamic shared memory, each translated on its own, so that one part
    ktx cannot follow is a TODO for that part only (the shared bytes are never dropped)."""

    sized: list[tuple[str, tuple[str, ...]]] = []

    def part(which: str) -> tuple[str, ...] | None:
        tr.reading = set()
        try:
            comps = launch_dims(module, site, which).components
            fields = _dim3_fields(tr, comps)
            nodes = fields if fields is not None else comps
            return tuple(canonical(inline_vars(tr.expr(n), tr)) for n in nodes)
        except (Untranslatable, KtxError):
            return None
        finally:
            sized.append((which, tuple(sorted(tr.reading))))

    grid, block = part("grid"), part("block")
    shared: str | None = "0"
    shared_text = ""
    if site.shared is not None:
        node = launch_value_node(module, site, site.shared)  # inside a macro body too
        shared_text = " ".join(syntax.text(module, node).split())
        tr.reading = set()
        try:
            shared = canonical(inline_vars(tr.expr(node), tr))
        except (Untranslatable, KtxError):
            shared = None
        sized.append(("shared", tuple(sorted(tr.reading))))
    unknown = sorted(tr.free - tr.params - set(tr.locals))
    notes = (
        (f"launch names {', '.join(unknown)}, which the launcher computes in ways ktx does not follow",)
        if unknown
        else ()
    )
    return LaunchDraft(grid, block, shared, shared_text, notes, tuple(sized))


def inline_vars(text: str, tr: _Translator) -> str:
    """An expression with the launcher's locals inlined (they are not shape variables)."""
    for _ in range(16):
        new = substitute(text, {n: tr.used_vars[n] for n in tr.order})
        if new == text:
            break
        text = new
    return text


def caller_values(module: Module, launcher: Function) -> dict[str, str] | None:
    """The launcher's integer parameters as expressions of its caller's parameters (first call)."""
    for fn in module.functions:
        if fn.name == launcher.name or fn.is_kernel:
            continue
        body = syntax.function_node(module, fn)
        for call in syntax.calls(module, body, [launcher.name]):
            arguments = call.child_by_field_name("arguments")
            if arguments is None:
                continue
            args = [c for c in arguments.named_children if c.type != "comment"]
            if len(args) != len(launcher.params):
                continue
            params = frozenset(p.name for p in fn.params)
            tr = _Translator(module, body, call.start_byte, {}, params)
            out: dict[str, str] = {}
            for p, a in zip(launcher.params, args, strict=True):
                if p.is_pointer or dtype_of(module, Path(module.path or "."), p.type) not in (
                    "int32", "int64", "uint32", "uint64",
                ):  # fmt: skip
                    continue
                try:
                    out[p.name] = tr.expr(a)
                except Untranslatable:
                    return None
            return out
    return None


#: Calls that state a relation the sizes must meet (the program stops where it fails).
_ASSERTS = frozenset(
    {"assert", "GGML_ASSERT", "TORCH_CHECK", "AT_ASSERT", "AT_ASSERTM", "CHECK", "TORCH_INTERNAL_ASSERT"}
)


def relations(module: Module, launcher: Function) -> list[tuple[str, int]]:
    """The launcher's own assertions on its sizes, and those of the functions that call it
    (``GGML_ASSERT(ncols % WARP_SIZE == 0)``, ``TORCH_CHECK(d % 8 == 0, ...)``), as expressions
    over the names they use (each function's parameters and locals, as the draft names them),
    with their lines. Default shape points that break one would stop the program: the sizing
    drops them. An assertion ktx cannot translate is left out (the draft cannot check it)."""
    out: list[tuple[str, int]] = []
    for fn in module.functions:
        if fn.is_kernel:
            continue
        body = syntax.function_node(module, fn)
        if fn.name != launcher.name and not syntax.calls(module, body, [launcher.name]):
            continue
        params = frozenset(p.name for p in fn.params)
        target = launcher.name if fn.name != launcher.name else "<<<"
        for call in syntax.calls(module, body, sorted(_ASSERTS)):
            if _off_the_launch_path(module, call, body, target):
                continue
            arguments = call.child_by_field_name("arguments")
            named = [c for c in arguments.named_children if c.type != "comment"] if arguments else []
            first = named[0] if named else None
            if first is None:
                continue
            tr = _Translator(module, body, call.start_byte, {}, params)
            try:
                text = canonical(tr.expr(first))
            except (Untranslatable, KtxError):
                continue
            out.append((text, call.start_point[0] + 1))
    return out


#: Statements whose body runs on some paths only.
_CONDITIONAL = frozenset({"if_statement", "switch_statement", "case_statement", "conditional_expression"})


def _off_the_launch_path(module: Module, call: ts.Node, body: ts.Node, target: str) -> bool:
    """Whether assertion ``call`` sits in a branch (``if (is_vision) { GGML_ASSERT(n_dims ==
    ne00/2); }``) that does not also hold the launch (``target``: the launcher's name in a
    caller, ``<<<`` in the launcher): it states a relation of another path's sizes, and the
    sizing would drop every point of the path that launches the kernel."""
    node = call.parent
    while node is not None and node.id != body.id:
        if node.type in _CONDITIONAL and target not in syntax.node_text(node):
            return True
        node = node.parent
    return False


def header_value(path: Path, name: str, depth: int = 2) -> int | None:
    """``#define NAME 32`` or ``constexpr int NAME = 32;`` in ``path`` or the local headers it
    includes (``#include "..."``, two levels deep), the first found."""
    try:
        text = path.read_text(errors="replace")
    except OSError:
        return None
    word = re.escape(name)
    m = re.search(
        rf"^\s*#\s*define\s+{word}\s+\(?\s*(\d+)\s*\)?\s*(?://.*)?$"
        rf"|\bconstexpr\s+(?:static\s+)?(?:const\s+)?\w+\s+{word}\s*=\s*(\d+)\s*;",
        text,
        re.M,
    )
    if m is not None:
        return int(m.group(1) or m.group(2))
    if depth > 0:
        for inc in re.findall(r'#\s*include\s+"([^"]+)"', text):
            found = header_value(path.parent / inc, name, depth - 1)
            if found is not None:
                return found
    return None


def header_expr(path: Path, name: str, dirs: Sequence[Path] = (), depth: int = 3) -> str | None:
    """The value of ``name`` from the file's headers, as the spec writes it: ``#define NAME 32``
    or ``constexpr int NAME = 32;`` (:func:`header_value`), or a definition that is an integer
    expression of other such names (``#define BLOCK (WARP_COUNT * WARP_SIZE)`` -> ``6 * 32``,
    each name replaced by its value). Quoted includes are found beside the including file or
    in ``dirs`` (the ``-I`` folders the draft found). A definition naming anything without a
    value here (another platform's ``ROCM_WAVEFRONT_SIZE``) is passed over for the next one."""
    return _header_expr(path, name, tuple(dirs), depth, set())


_DEFINITION = r"^\s*#\s*define\s+{w}[ \t]+([^\n]+?)\s*(?://[^\n]*)?$|\bconstexpr\s+(?:static\s+)?(?:const\s+)?\w+\s+{w}\s*=\s*([^;]+);"


def _header_expr(path: Path, name: str, dirs: tuple[Path, ...], depth: int, seen: set[str]) -> str | None:
    try:
        text = path.read_text(errors="replace")
    except OSError:
        return None
    if name in seen:
        return None
    for m in re.finditer(_DEFINITION.format(w=re.escape(name)), text, re.M):
        body = re.sub(r"\b(\d+)(?:[uU][lL]{0,2}|[lL]{1,2}[uU]?)\b", r"\1", (m.group(1) or m.group(2)).strip())
        names = set(re.findall(r"\b[A-Za-z_]\w*\b", body))
        if not re.fullmatch(r"[\w\s()+\-*/%<>]*", body) or not body:
            continue
        values = {n: _header_expr(path, n, dirs, depth, seen | {name}) for n in names}
        if any(v is None for v in values.values()):
            continue
        ints = {n: _int_value(v) for n, v in values.items() if v is not None}
        if any(v is None for v in ints.values()):
            continue
        out = body
        for n, v in ints.items():
            out = re.sub(rf"\b{re.escape(n)}\b", str(v), out)
        if _int_value(out) is None:
            continue
        try:
            return canonical(out.replace("/", "//")) if names else str(_int_value(out))
        except KtxError:
            return str(_int_value(out))
    if depth > 0:
        for inc in re.findall(r'#\s*include\s+"([^"]+)"', text):
            for folder in (path.parent, *dirs):
                if (folder / inc).is_file():
                    found = _header_expr(folder / inc, name, dirs, depth - 1, seen)
                    if found is not None:
                        return found
                    break
    return None


def _int_value(text: str) -> int | None:
    """An integer expression of literals (C's ``/`` on integers), or None."""
    try:
        tree = ast.parse(text.replace("/", "//").replace("////", "//"), mode="eval")
    except SyntaxError:
        return None
    ops: dict[type[ast.operator], Callable[[int, int], int | None]] = {
        ast.Add: lambda a, b: a + b, ast.Sub: lambda a, b: a - b, ast.Mult: lambda a, b: a * b,
        ast.FloorDiv: lambda a, b: a // b if b else None, ast.Mod: lambda a, b: a % b if b else None,
        ast.LShift: lambda a, b: a << b if 0 <= b < 64 else None,
        ast.RShift: lambda a, b: a >> b if b >= 0 else None,
    }  # fmt: skip

    def ev(node: ast.AST) -> int | None:
        if isinstance(node, ast.Constant) and isinstance(node.value, int):
            return node.value
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
            inner = ev(node.operand)
            return -inner if inner is not None else None
        if isinstance(node, ast.BinOp) and type(node.op) in ops:
            a, b = ev(node.left), ev(node.right)
            return ops[type(node.op)](a, b) if a is not None and b is not None else None
        return None

    return ev(tree.body)


def main_values(module: Module) -> dict[str, list[int]]:
    """Integer locals of ``main`` (``int C = 768;``) and arrays (``int block_sizes[] = {...}``)."""
    main = next((f for f in module.functions if f.name == "main"), None)
    if main is None:
        return {}
    text = module.text(main.body)
    out: dict[str, list[int]] = {}
    for m in re.finditer(r"\bint\s+(\w+)\s*=\s*(\d+)\s*;", text):
        out.setdefault(m.group(1), [int(m.group(2))])
    for m in re.finditer(r"\bint\s+(\w+)\s*\[\s*\]\s*=\s*\{([\d,\s]+)\}", text):
        out.setdefault(m.group(1), [int(v) for v in m.group(2).replace(" ", "").split(",") if v])
    return out


def canonical(text: str) -> str:
    return str(Expr.parse(text))
