"""``ktx init``: draft a kernel folder's ``ktx.toml`` from the CUDA source.

Writing a spec by hand (every argument's dtype, shape and role, the launch translated from the
launcher, shapes, a reference) is the first hour a new user spends; most of it is in the file.
This module reads it from there, syntactically:

* ``[[args]]`` from the kernel's signature: element types to dtypes (through template arguments
  of the launch and ``typedef``/``#define`` in the file and its local headers), pointers to
  arrays, the role from what the kernel reads and writes (``const`` is ``in``; a subscript that
  is stored to and loaded is ``inout``), scalars bound to the launcher's argument expressions;
* an array's extent from how it is indexed: ``p[i]`` under ``if (i < n)`` is ``[n]``,
  ``row = p + r * c; row[j]`` with ``j < c`` and ``r < rows`` is ``[rows, c]``;
* ``[launch]`` from the host launch site (:func:`ktx.launch.mapping_from_file`, which follows
  locals and macros as ``ktx inspect`` does); when the launcher is itself called in the file
  with expressions of its caller's parameters (llm.c's ``gelu_forward1(out, inp, B * T * C,
  ...)``), those parameters become the shape variables and the launcher's ones ``[vars]``;
* ``[shapes]`` from integer locals of ``main`` with the shape variables' names, else a small
  default set.

What it cannot tell becomes a ``# TODO:`` line naming what is missing and where it looked, with a
placeholder that the spec loader refuses, so a draft with TODOs never runs by accident;
:func:`check` lists the TODOs that block a run.
"""

from __future__ import annotations

import ast
import contextlib
import itertools
import math
import os
import re
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import tree_sitter as ts
from ktx.ir import LaunchSite, Module, parse_file
from ktx.ir.access import _index_node, terms
from ktx.ir.affine import Affine, kernel_index
from ktx.ir.facts.kinds import access_kind as _kind
from ktx.ir.facts.structs import StructLayout
from ktx.ir.nodes import Function, Param

from ktx import structdraft, syntax
from ktx.errors import KtxError, Location
from ktx.expr import Expr, Value
from ktx.launch import (
    _EXPRESSIONS,
    Untranslatable,
    _Translator,
    launch_dims,
    launcher_node,
    substitute,
)
from ktx.spec import ShapePoint

#: C/CUDA element types to spec dtypes.
DTYPES: Mapping[str, str] = {
    "float": "fp32", "double": "fp64", "half": "fp16", "__half": "fp16", "__nv_bfloat16": "bf16",
    "nv_bfloat16": "bf16", "__nv_fp8_e4m3": "fp8_e4m3", "__nv_fp8_e5m2": "fp8_e5m2",
    "int8_t": "int8", "signed char": "int8", "char": "int8", "uint8_t": "uint8", "unsigned char": "uint8",
    "int16_t": "int16", "short": "int16", "uint16_t": "uint16", "unsigned short": "uint16",
    "int": "int32", "int32_t": "int32", "unsigned": "uint32", "unsigned int": "uint32",
    "uint32_t": "uint32", "long": "int64", "long long": "int64", "int64_t": "int64",
    "unsigned long long": "uint64", "uint64_t": "uint64", "size_t": "uint64", "bool": "bool",
}  # fmt: skip
#: Bytes per element of each spec dtype (for sizing default shapes).
DTYPE_BYTES: Mapping[str, int] = {
    "fp32": 4, "fp64": 8, "fp16": 2, "bf16": 2, "fp8_e4m3": 1, "fp8_e5m2": 1, "int8": 1, "uint8": 1,
    "int16": 2, "uint16": 2, "int32": 4, "uint32": 4, "int64": 8, "uint64": 8, "bool": 1,
}  # fmt: skip
#: The most bytes of buffers a default shape point may need (the largest point of the product).
SHAPE_BUDGET = 2 << 30
#: Values a shape variable takes when the file gives none (a size; a block size).
DEFAULT_SIZES = (4096, 1048576)
DEFAULT_SIZES_2D = (64, 4096)
DEFAULT_BLOCK = 256
TODO = "TODO"
#: Compiler flags of a draft: the dialect CUDA kernels are written in today, and constexpr host
#: functions usable in device code (both harmless where unneeded).
DRAFT_FLAGS = ("-std=c++17", "--expt-relaxed-constexpr")


@dataclass(frozen=True)
class Arg:
    """One ``[[args]]`` entry: ``lines`` are its TOML lines, TODO comments included."""

    name: str
    lines: tuple[str, ...]
    todos: tuple[str, ...] = ()
    shape: str | None = None
    """The drafted extent (``[n, d]``) of an array, None when it is a TODO or a scalar."""
    elem_bytes: int = 0


@dataclass(frozen=True)
class Draft:
    """A drafted spec: its TOML text and the TODOs left in it (empty: it should run as is)."""

    kernel: str
    text: str
    todos: tuple[str, ...]


@dataclass
class _Kernel:
    module: Module
    fn: Function
    body: ts.Node
    bounds: dict[str, str] = field(default_factory=dict)
    candidates: dict[str, list[str]] = field(default_factory=dict)
    locals_: dict[str, ts.Node] = field(default_factory=dict)
    pointers: dict[str, tuple[str, ts.Node | None]] = field(default_factory=dict)

    def text(self, node: ts.Node) -> str:
        return " ".join(syntax.text(self.module, node).split())


# -- choosing the kernel and its launch ------------------------------------------------------


def _choose(module: Module, path: str, name: str | None) -> tuple[Function, LaunchSite]:
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


def deduce_template_args(module: Module, fn: Function, site: LaunchSite) -> TemplateArgs:
    """``kernel<<<g, b>>>(out, in, n)`` with ``template <typename T> kernel(T* out, ...)``: T
    is the element type of the launcher's ``out`` (as C++ deduces it from the call).

    Written arguments come first; a type parameter not written is the element type of the
    first argument passed where the kernel's parameter is ``T*``/``T`` (the launcher's
    parameter or local, or a cast's target type); a value parameter falls back to its default.
    """
    written = [module.text(s) for s in site.template_arg_spans]
    call_args = _call_args(module, site)
    launcher = _launcher(module, site)
    scope = launcher_node(module, site)
    locals_ = syntax.local_declarations(module, scope, before=site.span.start) if scope is not None else {}
    values: list[str | None] = []
    notes: list[str] = []
    for i, tp in enumerate(fn.template_params):
        if i < len(written):
            why = _uncertain(module, launcher, written[i])
            if why is not None:
                notes.append(f"{tp.name}: the launch passes {written[i]!r}, {why}")
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
    return TemplateArgs(tuple(values), tuple(notes))


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


def _branch_picked(module: Module, site: LaunchSite, kernel: str, shape_vars: set[str]) -> str | None:
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
    launcher = _launcher(module, site)
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


def _redeclared(module: Module, site: LaunchSite, which: str) -> int | None:
    """The line of another declaration, in the launcher, of the local the launch passes as its
    ``grid`` or ``block`` (``dim3 block_dim(...)`` declared again in a later ``else``), or None."""
    scope = launcher_node(module, site)
    span = site.grid if which == "grid" else site.block
    node = syntax.node_at(module, span, _EXPRESSIONS) or module.node(span)
    if scope is None or node.type != "identifier":
        return None
    name = syntax.text(module, node)
    seen = syntax.local_declarations(module, scope, before=site.span.start).get(name)
    for n in _walk(scope):
        if n.type != "declaration" or (seen is not None and n.id == seen.declaration.id):
            continue
        for decl in n.children_by_field_name("declarator"):
            ident = syntax.declarator_identifier(decl)
            if ident is not None and syntax.text(module, ident) == name:
                return n.start_point[0] + 1
    return None


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


# -- the kernel's body: bounds, locals, derived pointers ---------------------------------------


def _walk(node: ts.Node) -> Iterator[ts.Node]:
    yield node
    for child in node.children:
        yield from _walk(child)


def _read_kernel(module: Module, fn: Function) -> _Kernel:
    node = syntax.function_node(module, fn)
    body = node.child_by_field_name("body") or node
    k = _Kernel(module, fn, body)
    params = {p.name for p in fn.params if p.is_pointer}
    for n in _walk(body):
        if n.type == "declaration":
            for decl in n.children_by_field_name("declarator"):
                if decl.type != "init_declarator":
                    continue
                ident = syntax.declarator_identifier(decl)
                value = decl.child_by_field_name("value")
                if ident is None or value is None:
                    continue
                name = syntax.text(module, ident)
                base = _pointer_base(module, value, params, k.pointers)
                if (
                    base is not None
                    and decl.child_by_field_name("declarator") is not None
                    and (
                        decl.child_by_field_name("declarator").type == "pointer_declarator"  # type: ignore[union-attr]
                    )
                ):
                    k.pointers[name] = base
                else:
                    k.locals_[name] = value
        elif n.type in ("for_statement", "while_statement"):
            cond = n.child_by_field_name("condition")
            if cond is not None:
                _bounds_from(k, cond, k.bounds)
        elif n.type == "if_statement":
            cond = n.child_by_field_name("condition")
            then = n.child_by_field_name("consequence")
            returns = then is not None and "return" in syntax.text(module, then).split(";")[0]
            if cond is not None:
                _bounds_from(k, cond, k.bounds, negated=returns)
    scalars = {p.name for p in fn.params if not p.is_pointer}
    for var, found in k.candidates.items():
        # A bound over the kernel's scalar parameters (``d``), not over locals (``num_packs``).
        plain = [b for b in found if set(re.findall(r"\b[A-Za-z_]\w*\b", b)) <= scalars]
        k.bounds[var] = (plain or found)[0]
    return k


def _grid_bounds(k: _Kernel, grid: Sequence[str]) -> None:
    """``r = blockIdx.x`` ranges over the grid's x extent (the launch's, in spec variables);
    not when the kernel steps it (``r += gridDim.x``: a grid-stride walk that the grid does
    not bound; its loop condition does)."""
    stepped = syntax.assigned(k.module, k.body)
    for name, value in k.locals_.items():
        if name in stepped:
            continue
        m = re.fullmatch(r"(?:\(\w[\w\s]*\))?\s*blockIdx\.([xyz])", k.text(value))
        axis = "xyz".index(m.group(1)) if m else -1
        if m and axis < len(grid) and name not in k.bounds:
            k.bounds[name] = f"__grid{axis}"


def _pointer_base(
    module: Module, value: ts.Node, params: set[str], known: Mapping[str, tuple[str, ts.Node | None]]
) -> tuple[str, ts.Node | None] | None:
    """``P + off`` or ``P`` (P a pointer parameter or a pointer derived from one): (P, off)."""
    while value.type in ("parenthesized_expression", "cast_expression"):
        inner = value.child_by_field_name("value") if value.type == "cast_expression" else None
        value = inner or value.named_children[0]
    text = syntax.text(module, value)
    if value.type == "identifier" and (text in params or text in known):
        return known.get(text, (text, None))
    if value.type == "binary_expression":
        op = value.child_by_field_name("operator")
        left, right = value.child_by_field_name("left"), value.child_by_field_name("right")
        if op is not None and op.type == "+" and left is not None and right is not None:
            base = _pointer_base(module, left, params, known)
            if base is not None and base[1] is None:
                return (base[0], right)
    return None


def _bounds_from(k: _Kernel, cond: ts.Node, out: dict[str, str], negated: bool = False) -> None:
    """``v < E`` (or ``v >= E`` guarding a return) records E as v's exclusive bound."""
    for n in _walk(cond):
        if n.type != "binary_expression":
            continue
        op = n.child_by_field_name("operator")
        left, right = n.child_by_field_name("left"), n.child_by_field_name("right")
        if op is None or left is None or right is None or left.type != "identifier":
            continue
        if (op.type == "<" and not negated) or (op.type == ">=" and negated):
            k.candidates.setdefault(syntax.text(k.module, left), []).append(k.text(right))


# -- arguments -----------------------------------------------------------------------------


def _dtype(module: Module, path: Path, type_name: str) -> str | None:
    name = " ".join(type_name.replace("const", " ").replace("__restrict__", " ").split())
    seen: set[str] = set()
    while name not in DTYPES and name not in seen:
        seen.add(name)
        alias = _alias(module, path, name)
        if alias is None:
            return None
        name = alias
    return DTYPES.get(name)


def _alias(module: Module, path: Path, name: str) -> str | None:
    """The type ``name`` stands for, by ``typedef``/``using``/``#define`` in the file or a local
    header it includes, in the branches of ``#if defined(M)``/``#ifdef``/``#else`` that the
    file's own ``#define M`` lines select (llm.c's ``#define ENABLE_BF16`` picks bf16)."""
    main = module.text_str
    defined = set(re.findall(r"^\s*#\s*define\s+(\w+)", main, re.M))
    texts = []
    for inc in re.findall(r'#\s*include\s+"([^"]+)"', main):
        header = path.parent / inc
        if header.is_file():
            texts.append(header.read_text(errors="replace"))
    texts.append(main)
    pattern = re.compile(
        rf"typedef\s+([\w:\s]+?)\s+{re.escape(name)}\s*;|using\s+{re.escape(name)}\s*=\s*([\w:\s]+?)\s*;"
        rf"|#\s*define\s+{re.escape(name)}\s+([\w:]+)\s*$"
    )
    found = None
    for text in texts:
        for line in _active_lines(text, defined):
            m = pattern.search(line)
            if m:
                found = " ".join((m.group(1) or m.group(2) or m.group(3)).split())
    return found


def _active_lines(text: str, defined: set[str]) -> Iterator[str]:
    """The lines a preprocessor keeps, for conditions on ``defined(M)`` (others count as true)."""
    stack: list[tuple[bool, bool]] = []  # (this branch active, some branch taken)

    def cond(expr: str) -> bool:
        m = re.fullmatch(r"\s*(!?)\s*defined\s*\(?\s*(\w+)\s*\)?\s*", expr)
        if m is None:
            return True
        return (m.group(2) in defined) != bool(m.group(1))

    for line in text.splitlines():
        d = re.match(r"\s*#\s*(ifdef|ifndef|if|elif|else|endif)\b(.*)", line)
        outer = all(a for a, _ in stack)
        if d is None:
            if outer:
                yield line
            continue
        kind, rest = d.groups()
        if kind in ("ifdef", "ifndef", "if"):
            c = (
                rest.strip() in defined
                if kind == "ifdef"
                else (rest.strip() not in defined if kind == "ifndef" else cond(rest))
            )
            stack.append((c, c))
        elif kind == "elif" and stack:
            _, taken = stack.pop()
            c = not taken and cond(rest)
            stack.append((c, taken or c))
        elif kind == "else" and stack:
            _, taken = stack.pop()
            stack.append((not taken, True))
        elif kind == "endif" and stack:
            stack.pop()


def _role(k: _Kernel, p: Param) -> tuple[str | None, list[ts.Node]]:
    """``in``/``out``/``inout`` from the subscripts that reach ``p``; and those subscripts."""
    reads = writes = False
    subs: list[ts.Node] = []
    for n in _walk(k.body):
        if n.type != "subscript_expression":
            continue
        base = n.child_by_field_name("argument")
        if base is None:
            continue
        name = syntax.text(k.module, base)
        root = name if name == p.name else k.pointers.get(name, ("", None))[0]
        if root != p.name:
            continue
        subs.append(n)
        kind = _kind(n)
        reads |= kind in ("load", "update")
        writes |= kind in ("store", "update")
    if p.const:
        return "in", subs
    if reads and writes:
        return "inout", subs
    if writes:
        return "out", subs
    if reads:
        return "in", subs
    return None, subs


def _extent(k: _Kernel, p: Param, subs: Sequence[ts.Node], params: Mapping[str, str]) -> str | None:
    """``[n]`` or ``[rows, c]`` from the first subscript whose index ktx can read."""
    # A bound may name a kernel local (``int N = B * T;``): its initialiser, then the parameters.
    env = {n: _in_shape_vars(k.text(v), params) for n, v in k.locals_.items() if n not in params}
    env.update(params)
    for sub in subs:
        index = _index_node(sub)
        base = sub.child_by_field_name("argument")
        if index is None or base is None:
            continue
        flat = _flattened(k, k.text(index))
        if flat is not None and offset_of(k, base) is None:
            return "[" + _in_shape_vars(k.bounds[flat], env) + "]"
        parts = list(terms(index))
        offset = k.pointers.get(syntax.text(k.module, base), ("", None))[1]
        if offset is not None:
            parts += terms(offset)
        dims = _dims(k, [k.text(t.node) for t in parts if t.sign > 0], len(parts))
        if dims is not None:
            return "[" + ", ".join(_in_shape_vars(d, env) for d in dims) + "]"
    return None


def _valid_extent(text: str) -> bool:
    """Every dimension an expression the spec loader reads (a guess built from pieces can be
    ``[()]`` when a piece did not translate)."""
    try:
        return all(Expr.parse(d) is not None for d in extent_dims(text))
    except (KtxError, SyntaxError):
        return False


def _moved_line(k: _Kernel, p: Param) -> int | None:
    """The first line where the kernel reassigns pointer parameter ``p`` (``p += row * d``):
    its subscripts are then relative to a moving base."""
    writes = syntax.assigned(k.module, k.body).get(p.name, [])
    return min(w.start_point[0] + 1 for w in writes) if writes else None


def _affine_extent(
    k: _Kernel, p: Param, env: Mapping[str, str], targ: Mapping[str, str], launch: _LaunchDraft
) -> str | None:
    """The extent from the index analysis (:mod:`ktx.ir.affine`) when the subscripts' text did
    not give one: ``(t * TOPK + k) * d + i`` is ``2*d*t + d*k + i``; each term's varying
    symbol (a loop or guard variable, a thread or block index) with its bound is a dimension,
    the term's stride its pitch: ``[num_tokens, 2, d]``. Only dense chains (each stride the
    product of the dimensions inside it) and a padded 2-D row are taken; the draft's bounds
    check then tries the guess at every shape point."""
    ix = kernel_index(k.module, k.fn)
    names = {**env, **targ}
    for axis, i in (("x", 0), ("y", 1), ("z", 2)):
        if launch.grid is not None and i < len(launch.grid):
            names[f"gridDim.{axis}"] = launch.grid[i]
            names[f"blockIdx.{axis}"] = launch.grid[i]
        if launch.block is not None and i < len(launch.block):
            names[f"blockDim.{axis}"] = launch.block[i]
            names[f"threadIdx.{axis}"] = launch.block[i]
    varying = {n: b for n, b in k.bounds.items() if not b.startswith("__grid")}
    for ref in ix.accesses():
        if ref.root != p.name or ref.index is None or ref.index.atoms:
            continue
        dims = _chain(ref.index, varying, names)
        if dims is not None:
            return "[" + ", ".join(dims) + "]"
    return None


def _chain(index: Affine, bounds: Mapping[str, str], names: Mapping[str, str]) -> list[str] | None:
    """Dimensions outermost first, or None."""
    by_var: dict[str, tuple[str, str]] = {}  # var -> (stride text, bound text)
    for monomial, coef in index.terms:
        moving = [s for s in monomial if s in bounds or s.startswith(("threadIdx.", "blockIdx."))]
        if not moving:
            continue  # an offset inside the row (``+ d``): the bounds check sees whether it fits
        if len(moving) != 1 or moving[0] in by_var:
            return None
        var = moving[0]
        rest = [s for s in monomial if s != var]
        if any(s not in names and not s.startswith(("blockDim.", "gridDim.")) for s in rest):
            return None
        stride = " * ".join([str(coef)] * (coef != 1) + [_paren(names.get(s, s)) for s in rest]) or "1"
        bound = names.get(var) if var.startswith(("threadIdx.", "blockIdx.")) else bounds.get(var)
        if bound is None:
            return None  # a launch ktx could not translate
        bound = _in_shape_vars(bound, names)
        by_var[var] = (stride, bound)
    if not by_var:
        return None
    try:
        free = sorted({n for s, b in by_var.values() for n in Expr.parse(f"{s} + {b}").names})
        samples = [dict(zip(free, itertools.cycle(primes), strict=False)) for primes in _SAMPLES]
        strides = {v: [Expr.parse(s).evaluate_int(e) for e in samples] for v, (s, _) in by_var.items()}
        sizes = {v: [Expr.parse(b).evaluate_int(e) for e in samples] for v, (_, b) in by_var.items()}
        order = sorted(by_var, key=lambda v: (strides[v][0], sizes[v][0]))
        dims: list[str] = []
        inner = [1] * len(samples)
        for v in order:
            stride, bound = by_var[v]
            if strides[v] != inner:
                # ``r * pitch + j`` with ``pitch >= bound(j)``: a padded row, [bound(r), pitch].
                wide = all(a >= b for a, b in zip(strides[v], inner, strict=True))
                padded = len(order) == 2 and len(dims) == 1 and wide
                return [bound, stride] if padded else None
            dims.append(bound)
            inner = [a * b for a, b in zip(inner, sizes[v], strict=True)]
    except KtxError:
        return None
    return list(reversed(dims))


#: Values tried for the shape variables when comparing a stride with a product of dimensions.
_SAMPLES = ((3, 5, 7, 11, 13), (17, 19, 23, 29, 31))


def _paren(text: str) -> str:
    return text if re.fullmatch(r"\w+", text) else f"({text})"


def offset_of(k: _Kernel, base: ts.Node) -> ts.Node | None:
    return k.pointers.get(syntax.text(k.module, base), ("", None))[1]


def _flattened(k: _Kernel, text: str) -> str | None:
    """``b * T + t`` with ``b = i / T`` and ``t = i % T``: the flat index ``i`` (when bounded)."""
    m = re.fullmatch(r"(\w+)\s*\*\s*(\w+)\s*\+\s*(\w+)", text)
    if m is None:
        return None
    outer, pitch, inner = m.groups()
    div, mod = k.locals_.get(outer), k.locals_.get(inner)
    if div is None or mod is None:
        return None
    d = re.fullmatch(rf"(\w+)\s*/\s*{re.escape(pitch)}", k.text(div))
    r = re.fullmatch(rf"(\w+)\s*%\s*{re.escape(pitch)}", k.text(mod))
    if d is None or r is None or d.group(1) != r.group(1) or d.group(1) not in k.bounds:
        return None
    return d.group(1)


def _dims(k: _Kernel, texts: list[str], count: int) -> list[str] | None:
    if len(texts) != count or not texts:
        return None
    by_stride: dict[str, str] = {}
    for text in texts:
        m = re.fullmatch(r"(\w+)(?:\s*\*\s*(.+))?", text) or None
        var, stride = (m.group(1), m.group(2) or "1") if m else ("", "")
        if not m or var not in k.bounds:
            m2 = re.fullmatch(r"(.+?)\s*\*\s*(\w+)", text)
            if m2 is None or m2.group(2) not in k.bounds:
                return None
            var, stride = m2.group(2), m2.group(1)
        by_stride[stride.strip("() ")] = var
    # Innermost first: the unit-stride variable, then each next stride is the row pitch of the
    # dimensions inside it (``r * pitch + j``: [bound(r), pitch], rows may be padded).
    inner = by_stride.pop("1", None)
    if inner is None:
        return None
    if not by_stride:
        return [k.bounds[inner]]
    if len(by_stride) != 1:
        return None
    pitch, outer = next(iter(by_stride.items()))
    return [k.bounds[outer], pitch]


def _in_shape_vars(text: str, env: Mapping[str, str]) -> str:
    """A kernel-side expression over kernel parameters, in terms of the spec's variables."""

    def sub(m: re.Match[str]) -> str:
        value = env.get(m.group(0))
        if value is None:
            return m.group(0)
        return value if re.fullmatch(r"\w+", value) else f"({value})"

    text = re.sub(r"\b[A-Za-z_]\w*\b", sub, text)
    return text.replace("/", "//").replace("////", "//")


# -- the launcher: arguments, callers, main ---------------------------------------------------


def _call_args(module: Module, site: LaunchSite) -> list[ts.Node]:
    node = module.node(site.span)
    for n in _walk(node):
        if n.type == "argument_list" and n.parent is not None and n.parent.type == "call_expression":
            args = [c for c in n.named_children if c.type != "comment"]
            if len(args) == len(site.args):
                return args
    return []


def _launcher(module: Module, site: LaunchSite) -> Function | None:
    return next((f for f in module.functions if f.name == site.function and f.body.contains(site.span)), None)


@dataclass
class _DraftTranslator(_Translator):
    """The launch translator, plus what a draft needs beyond it: ``block.y`` of a ``dim3``
    local is its y component, and a local the launcher sets in several places (``int gpb = 1;
    if (n % 16 == 0) gpb = 16; ...``) is a derived value (``derived``: its expression, or None
    when ktx cannot follow it), never a shape variable."""

    derived: dict[str, str | None] = field(default_factory=dict)
    derived_lines: dict[str, int] = field(default_factory=dict)

    def expr(self, node: ts.Node) -> str:
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
        local = self.locals.get(name)
        if (
            local is not None
            and name not in self.params
            and name not in self.used_vars
            and syntax.reassigned_after(self.module, self.scope, name, local.declaration.end_byte)
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
        writes = [w for w in syntax.assigned(self.module, self.scope).get(name, [])]
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
    for n in _walk(block):
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


def _translator(module: Module, site: LaunchSite, launcher: Function | None) -> _DraftTranslator:
    scope = launcher_node(module, site)
    params = frozenset(p.name for p in launcher.params) if launcher else frozenset()
    locals_ = syntax.local_declarations(module, scope, before=site.span.start) if scope is not None else {}
    return _DraftTranslator(module, scope or module.tree.root_node, site.span.start, locals_, params)


@dataclass(frozen=True)
class _LaunchDraft:
    """The launch as the draft writes it: each part an expression, or None (a TODO)."""

    grid: tuple[str, ...] | None
    block: tuple[str, ...] | None
    shared: str | None
    shared_text: str
    notes: tuple[str, ...]


def _launch(module: Module, site: LaunchSite, tr: _DraftTranslator) -> _LaunchDraft:
    """Grid, block and dynamic shared memory, each translated on its own, so that one part
    ktx cannot follow is a TODO for that part only (the shared bytes are never dropped)."""

    def part(which: str) -> tuple[str, ...] | None:
        try:
            comps = launch_dims(module, site, which).components
            fields = _dim3_fields(tr, comps)
            nodes = fields if fields is not None else comps
            return tuple(_canonical(_resolve(tr.expr(n), tr)) for n in nodes)
        except (Untranslatable, KtxError):
            return None

    grid, block = part("grid"), part("block")
    shared: str | None = "0"
    shared_text = ""
    if site.shared is not None:
        node = syntax.node_at(module, site.shared, _EXPRESSIONS) or module.node(site.shared)
        shared_text = " ".join(syntax.text(module, node).split())
        try:
            shared = _canonical(_resolve(tr.expr(node), tr))
        except (Untranslatable, KtxError):
            shared = None
    unknown = sorted(tr.free - tr.params - set(tr.locals))
    notes = (
        (f"launch names {', '.join(unknown)}, which the launcher computes in ways ktx does not follow",)
        if unknown
        else ()
    )
    return _LaunchDraft(grid, block, shared, shared_text, notes)


def _resolve(text: str, tr: _Translator) -> str:
    """An expression with the launcher's locals inlined (they are not shape variables)."""
    for _ in range(16):
        new = substitute(text, {n: tr.used_vars[n] for n in tr.order})
        if new == text:
            break
        text = new
    return text


def _callers(module: Module, launcher: Function) -> dict[str, str] | None:
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
                if p.is_pointer or _dtype(module, Path(module.path or "."), p.type) not in (
                    "int32", "int64", "uint32", "uint64",
                ):  # fmt: skip
                    continue
                try:
                    out[p.name] = tr.expr(a)
                except Untranslatable:
                    return None
            return out
    return None


def _header_value(path: Path, name: str, depth: int = 2) -> int | None:
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
            found = _header_value(path.parent / inc, name, depth - 1)
            if found is not None:
                return found
    return None


def _main_values(module: Module) -> dict[str, list[int]]:
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


def _shape_values(var: str, found: Mapping[str, list[int]], count: int) -> tuple[list[int], str]:
    if var in found:
        return found[var][:1], "main"
    if "block" in var.lower():
        arrays = [v for k, v in found.items() if "block" in k.lower() and len(v) > 1]
        if arrays:
            return ([DEFAULT_BLOCK] if DEFAULT_BLOCK in arrays[0] else arrays[0][:1]), "main"
        return [DEFAULT_BLOCK], "default"
    return list(DEFAULT_SIZES if count == 1 else DEFAULT_SIZES_2D), "default"


# -- default shapes ----------------------------------------------------------------------------


def _canonical(text: str) -> str:
    return str(Expr.parse(text))


@dataclass(frozen=True)
class Sizing:
    """Default shape values: ``values`` per variable (a product), or, when the launch is invalid
    at some points of that product, ``points``: the valid ones listed (empty: none is)."""

    values: Mapping[str, list[int]]
    points: list[dict[str, int]] | None
    notes: tuple[str, ...]


def size_shapes(
    values: Mapping[str, list[int]],
    free: Sequence[str],
    arrays: Sequence[tuple[str, int]],
    derived: Sequence[tuple[str, str | None]],
    launch: _LaunchDraft,
    budget: int = SHAPE_BUDGET,
    unknown: int = 0,
    sizes: Sequence[tuple[str, str]] = (),
) -> Sizing:
    """Shrink the default values of ``free`` variables until the largest point's buffers fit
    ``budget`` bytes (a four-variable kernel at 4096 each needs terabytes), then keep only the
    points where the launch is valid (grid > 0, 1 to 1024 threads a block).

    ``arrays`` are (extent text, bytes per element); ``derived`` the ``[vars]`` in order;
    ``unknown`` the arrays whose extent is a TODO, each counted as 4-byte elements over the
    three largest free variables (rope's ``[tokens, heads, head_size]``), so that filling the
    TODOs in does not turn the defaults into hundreds of gigabytes. ``sizes`` are the integer
    scalars (name, value) the kernel uses as sizes: a point where one is 0 or less (a group size
    ``total_count // group_num`` with more groups than elements) runs no work, so it is dropped.
    """
    current = {n: list(v) for n, v in values.items()}
    notes: list[str] = []

    def total(point: Mapping[str, int]) -> int | None:
        env = _env(point, derived)
        size = 0
        if unknown and free:
            largest = sorted((point[n] for n in free), reverse=True)[:3]
            size += unknown * 4 * math.prod(largest)
        for shape, width in arrays:
            try:
                dims = [Expr.parse(d).evaluate_int(env) for d in extent_dims(shape)]
            except (KtxError, SyntaxError):
                continue
            count = 1
            for d in dims:
                count *= max(d, 0)
            size += count * width
        return size

    shrunk: list[str] = []
    for _ in range(256):
        largest = max((total(p) or 0) for p in _product_points(current))
        if largest <= budget:
            break
        movable = [n for n in free if max(current[n]) > 1]
        if not movable:
            break
        name = max(movable, key=lambda n: max(current[n]))
        top = max(current[name]) // 2
        current[name] = sorted({min(v, top) for v in current[name]})
        if name not in shrunk:
            shrunk.append(name)
    if shrunk:
        notes.append(
            f"{', '.join(shrunk)}: default sizes reduced so that the largest point's buffers stay "
            f"under {budget >> 30} GiB"
        )
    # A variable the block size grows with (``block = n``): smaller until every point launches.
    in_block = {n for b in launch.block or () for n in Expr.parse(b).names} & set(free)
    capped: list[str] = []
    for _ in range(64):
        if all(launch_problem(p, derived, launch) is None for p in _product_points(current)):
            break
        movable = [n for n in in_block if max(current[n]) > 1]
        if not movable:
            break
        name = max(movable, key=lambda n: max(current[n]))
        top = max(current[name]) // 2
        current[name] = sorted({min(v, top) for v in current[name]})
        if name not in capped:
            capped.append(name)
    if capped:
        notes.append(f"{', '.join(capped)}: default sizes reduced so that the block has at most 1024 threads")
    points = list(_product_points(current))
    valid: list[dict[str, int]] = []
    bad: list[str] = []
    for point in points:
        why = launch_problem(point, derived, launch) or _empty_size(point, derived, sizes)
        if why is None:
            valid.append(point)
        elif len(bad) < 3:
            bad.append(f"{_point_name(point)}: {why}")
    if len(valid) == len(points):
        return Sizing(current, None, tuple(notes))
    notes.append(f"{len(points) - len(valid)} of {len(points)} default points dropped: " + "; ".join(bad))
    return Sizing(current, valid, tuple(notes))


def extent_dims(shape: str) -> list[str]:
    """``"[n, 2 * d]"`` -> ``["n", "2 * d"]`` (top-level commas only)."""
    tree = ast.parse(shape.strip(), mode="eval").body
    if not isinstance(tree, ast.List):
        raise SyntaxError(shape)
    return [ast.unparse(e) for e in tree.elts]


def _product_points(values: Mapping[str, list[int]]) -> Iterator[dict[str, int]]:
    names = list(values)
    for combo in itertools.product(*(values[n] for n in names)):
        yield dict(zip(names, combo, strict=True))


def _point_name(point: Mapping[str, int]) -> str:
    return ",".join(f"{n}={v}" for n, v in point.items())


def _env(point: Mapping[str, int], derived: Sequence[tuple[str, str | None]]) -> dict[str, Value]:
    env: dict[str, Value] = dict(point)
    for name, text in derived:
        if text is None:
            continue
        with contextlib.suppress(KtxError):
            env[name] = Expr.parse(text).evaluate(env)
    return env


def _empty_size(
    point: Mapping[str, int], derived: Sequence[tuple[str, str | None]], sizes: Sequence[tuple[str, str]]
) -> str | None:
    """Which size scalar is 0 or less at ``point`` (the kernel would do no work), or None."""
    env = _env(point, derived)
    for name, text in sizes:
        try:
            value = Expr.parse(text).evaluate_int(env)
        except KtxError:
            continue
        if value <= 0:
            return f"{name} = {text} is {value}"
    return None


def launch_problem(
    point: Mapping[str, int], derived: Sequence[tuple[str, str | None]], launch: _LaunchDraft
) -> str | None:
    """Why the launch is invalid at ``point`` (a grid of 0 blocks, over 1024 threads), or None
    (also when a part cannot be evaluated: the TODO on it says so)."""
    env = _env(point, derived)
    try:
        grid = [Expr.parse(g).evaluate_int(env) for g in launch.grid or ()]
        block = [Expr.parse(b).evaluate_int(env) for b in launch.block or ()]
    except KtxError:
        return None
    if any(g <= 0 for g in grid):
        return f"grid {tuple(grid)} has no blocks"
    if any(b <= 0 for b in block):
        return f"block {tuple(block)} has no threads"
    threads = 1
    for b in block:
        threads *= b
    if threads > 1024:
        return f"block {tuple(block)} is {threads} threads (at most 1024)"
    return None


# -- the draft ---------------------------------------------------------------------------------


def _toml_str(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def _struct_arg(
    module: Module,
    site: LaunchSite,
    tr: _DraftTranslator,
    name: str,
    layout: StructLayout,
    node: ts.Node | None,
) -> Arg:
    """``[[args]]`` for a struct passed by value: one ``fields.`` line per field (ktx.structdraft)."""

    def translate(n: ts.Node) -> str | None:
        with contextlib.suppress(Untranslatable, KtxError):
            return _resolve(tr.expr(n), tr)
        return None

    scope = launcher_node(module, site)
    local = None
    if node is not None and node.type == "identifier" and scope is not None:
        locals_ = syntax.local_declarations(module, scope, before=site.span.start)
        local = locals_.get(syntax.text(module, node))
    parts = structdraft.components(node, local.components if local is not None else ())
    values = structdraft.launcher_values(node, scope, parts, layout, translate)
    lines, todos = structdraft.struct_lines(name, layout, values)
    return Arg(name, ("[[args]]", f"name = {_toml_str(name)}", *lines), tuple(todos))


def draft(path: str | Path, kernel: str | None = None, out_dir: str | Path | None = None) -> Draft:
    """Draft the spec of ``kernel`` in ``path``; ``source`` is relative to ``out_dir``."""
    path = Path(path)
    module = parse_file(path)
    fn, site = _choose(module, str(path), kernel)
    k = _read_kernel(module, fn)
    launcher = _launcher(module, site)
    tr = _translator(module, site, launcher)
    todos: list[str] = []
    # The file name alone: the draft's `source =` line already says where it is, and a draft
    # must read the same wherever it was made.
    where = f"{path.name}:{site.span.line}"

    # Scalars: the launcher's expressions; the kernel parameter -> its expression over shape vars.
    call_args = _call_args(module, site)
    deduced = deduce_template_args(module, fn, site)
    targ = {t.name: v for t, v in zip(fn.template_params, deduced.values, strict=False) if v is not None}
    # Structs and vectors passed by value (ktx.structdraft): fields, never a shape variable.
    targs = deduced.values if fn.template_params else ()
    by_value = [p for p in fn.params if not p.is_pointer]
    maybe = any(_dtype(module, path, targ.get(p.base_type, p.base_type)) is None for p in by_value)
    structs = structdraft.struct_layouts(path, module.text_str, fn.name, targs) if maybe else {}
    bindings: dict[str, str] = {}
    for p, node in zip(fn.params, call_args, strict=False):
        if p.is_pointer or p.name in structs:
            continue
        with contextlib.suppress(Untranslatable, KtxError):
            bindings[p.name] = _resolve(tr.expr(node), tr)
    launch = _launch(module, site, tr)
    launcher_vars: dict[str, str] = {}
    callers = _callers(module, launcher) if launcher is not None else None
    if callers:
        launcher_vars = {n: e for n, e in callers.items() if not re.fullmatch(re.escape(n), e)}
    # used_vars keeps "" for a local whose value did not translate: not a value.
    env = {**{n: v for n, v in tr.used_vars.items() if v}, **bindings}
    if launch.grid is not None:
        _grid_bounds(k, launch.grid)
        env.update({f"__grid{i}": g for i, g in enumerate(launch.grid)})

    args: list[Arg] = []
    for i, p in enumerate(fn.params):
        if p.name in structs and not p.is_pointer:  # a struct or vector by value: its fields
            passed = call_args[i] if i < len(call_args) else None
            arg = _struct_arg(module, site, tr, p.name, structs[p.name], passed)
            args.append(arg)
            todos += arg.todos
            continue
        base = targ.get(p.base_type, p.base_type)
        dtype = _dtype(module, path, base)
        lines = ["[[args]]", f"name = {_toml_str(p.name)}"]
        arg_todos: list[str] = []
        shape: str | None = None
        if dtype is None:
            why = f"element type {base!r} of {p.name}: not a scalar type ktx knows (looked at typedefs)"
            arg_todos.append(why)
            lines += [f"# {TODO}: {why}", f'dtype = "{TODO}"']
        else:
            lines.append(f"dtype = {_toml_str(dtype)}")
        if p.is_pointer:
            role, subs = _role(k, p)
            moved = _moved_line(k, p)
            extent = None if moved else _extent(k, p, subs, env) or _affine_extent(k, p, env, targ, launch)
            if extent is not None and not _valid_extent(extent):
                extent = None
            if moved:
                why = f"extent of {p.name}: the kernel moves the pointer ({p.name} set again at line {moved})"
                arg_todos.append(why)
                lines += [f"# {TODO}: {why}", f'shape = "[{TODO}]"']
            elif extent is None:
                seen = ", ".join(sorted({k.text(s) for s in subs})[:3]) or "no subscript"
                why = f"extent of {p.name}: indexed as {seen} (looked at the kernel's subscripts and bounds)"
                arg_todos.append(why)
                lines += [f"# {TODO}: {why}", f'shape = "[{TODO}]"']
            else:
                lines.append(f"shape = {_toml_str(extent)}")
                shape = extent
            if role is None:
                why = f"role of {p.name}: the kernel neither subscripts nor reads it (in, out or inout?)"
                arg_todos.append(why)
                lines += [f"# {TODO}: {why}", f'role = "{TODO}"']
            else:
                lines.append(f"role = {_toml_str(role)}")
        else:
            if dtype is None:
                bindings.pop(p.name, None)  # a struct passed by value: no shape variable of it
            value = bindings.get(p.name)
            if dtype in ("fp32", "fp64") and value is not None and re.fullmatch(r"[A-Za-z_]\w*", value):
                # A float the launcher passes through is a constant, not a shape variable: an
                # ``eps`` gets a typical one; any other (a clamp bound, a scale) only the user knows.
                bindings.pop(p.name)
                if "eps" in p.name.lower():
                    lines.append(f"# note: {p.name} is the launcher's parameter {value}; a typical value")
                    value = "1e-6"
                else:
                    why = f"value of {p.name}: the launcher passes its float parameter {value} through"
                    arg_todos.append(why)
                    lines += [f"# {TODO}: {why}", f'value = "{TODO}"']
                    args.append(Arg(p.name, tuple(lines), tuple(arg_todos)))
                    todos += arg_todos
                    continue
            if value is None:
                why = f"value of {p.name}: the launch at {where} passes something ktx does not follow"
                arg_todos.append(why)
                lines += [f"# {TODO}: {why}", f'value = "{TODO}"']
            else:
                lines.append(f"value = {_toml_str(value)}")
        args.append(Arg(p.name, tuple(lines), tuple(arg_todos), shape, DTYPE_BYTES.get(dtype or "", 0)))
        todos += arg_todos

    _not_sizes(k, args, bindings, todos, launch, tr.derived)

    # Launcher locals the launch or the scalars use, set in several places: derived values.
    derived: dict[str, str | None] = {}
    for name in sorted(tr.derived, key=lambda n: tr.derived_lines[n]):
        value = tr.derived[name]
        try:
            derived[name] = _canonical(_resolve(value, tr)) if value is not None else None
        except KtxError:
            derived[name] = None

    # Shape variables: free names of the launch and of the scalar values and extents.
    used: list[str] = []
    texts = list(bindings.values())
    texts += [*(launch.grid or ()), *(launch.block or ()), launch.shared or ""]
    texts += [v for v in derived.values() if v is not None]
    for arg in args:
        texts += [line.split("=", 1)[1] for line in arg.lines if line.startswith(("shape =", "fields."))]
    names: set[str] = set()
    for text in texts:
        for name in re.findall(r"\b[A-Za-z_]\w*\b", text):
            if name not in names and name not in used and name not in _EXPR_WORDS and name != TODO:
                used.append(name)
    vars_: dict[str, str | None] = {}
    for name in list(used):
        if name in launcher_vars:
            vars_[name] = launcher_vars[name]
            used.remove(name)
            for extra in re.findall(r"\b[A-Za-z_]\w*\b", launcher_vars[name]):
                if extra not in used and extra not in _EXPR_WORDS:
                    used.append(extra)
    for name, value in derived.items():
        vars_[name] = value
        if name in used:
            used.remove(name)
    # A name no function takes as a parameter (a header's macro, a global) is no shape variable:
    # its value from the file's local headers, else a TODO.
    parameters = {q.name for f in module.functions for q in f.params if "dim3" not in q.type}
    external: dict[str, str | None] = {}
    for name in list(used):
        if name not in parameters:
            number = _header_value(path, name)
            external[name] = str(number) if number is not None else None
            used.remove(name)
            if name in derived:
                del vars_[name]
    vars_ = {**external, **vars_}
    found = _main_values(module)
    points: dict[str, list[int]] = {}
    origins: dict[str, str] = {}
    # A bool the kernel takes straight from a launcher parameter is a flag, not a size.
    scalar_types = {q.name: _dtype(module, path, targ.get(q.base_type, q.base_type)) for q in fn.params}
    flags = {bindings[n] for n, t in scalar_types.items() if t == "bool" and n in bindings}
    for name in used:
        points[name], origins[name] = (
            ([1], "flag") if name in flags else _shape_values(name, found, len(used))
        )
    sizing = size_shapes(
        points,
        [n for n in used if origins[n] == "default"],
        [(a.shape, a.elem_bytes) for a in args if a.shape is not None],
        [(n, v) for n, v in vars_.items()],
        launch,
        unknown=sum(1 for a in args if any(line == f'shape = "[{TODO}]"' for line in a.lines)),
        sizes=[
            (n, v)
            for n, v in bindings.items()
            if scalar_types.get(n) in _INT_DTYPES and size_use(k, n) is not None
        ],
    )

    lines = [
        f"# Drafted by `ktx init {path.name}` from {path}; check every line, then `ktx init --check`.",
        f"kernel = {_toml_str(fn.name)}",
        f"source = {_toml_str(_relative(path, out_dir))}",
    ]
    picked: str | None = None
    if fn.template_params:
        lines += [f"# note: {n}" for n in deduced.notes if "deduced" in n or "default" in n]
        missing = [t.name for t, v in zip(fn.template_params, deduced.values, strict=False) if v is None]
        if missing:
            written = len(site.template_arg_spans)
            unwritten = [n for n in missing if [t.name for t in fn.template_params].index(n) >= written]
            parts = [f"template argument {', '.join(missing)} of {fn.name} at the launch at {where}"]
            if unwritten:
                parts.append(f"{', '.join(unwritten)}: not written, not deducible from the arguments' types")
            parts += [n for n in deduced.notes if n.split(":", 1)[0] in missing]
            why = "; ".join(parts)
            todos.append(why)
            lines.append(f"# {TODO}: {why}")
        values = [v if v is not None else TODO for v in deduced.values]
        picked = _branch_picked(module, site, fn.name, set(used))
        if picked is not None and not missing:
            why = f"template arguments of {fn.name} at {where}: {picked}"
            todos.append(why)
            lines.append(f"# {TODO}: {why}")
            values = [TODO]
        lines.append("template_args = [" + ", ".join(_toml_str(t) for t in values) + "]")
    if vars_:
        lines += ["", "[vars]"]
        for n, e in vars_.items():
            if e is None and n in external:
                dim3 = launcher is not None and launcher.param(n) is not None
                why = (
                    f"{n}: the launcher's dim3 parameter: write it as an expression of the shape variables"
                    if dim3
                    else f"{n}: the launch or an extent names {n}, which is no parameter and has no value in "
                    f"{path.name} or its local headers: write its value"
                )
                todos.append(why)
                lines += [f"# {TODO}: {why}", f"{n} = {_toml_str(TODO)}"]
            elif e is None:
                line = tr.derived_lines.get(n, site.span.line)
                why = (
                    f"{n}: the launcher's local (line {line}) is set in ways ktx does not follow; "
                    "write it as an expression of the shape variables"
                )
                todos.append(why)
                lines += [f"# {TODO}: {why}", f"{n} = {_toml_str(TODO)}"]
            else:
                if n in external:
                    lines.append(f"# note: {n} is not a parameter: its value in the file's headers")
                if n in derived:
                    line = tr.derived_lines[n]
                    lines.append(f"# note: {n} is the launcher's local (line {line}), not a shape variable")
                lines.append(f"{n} = {_toml_str(e)}")
    for arg in args:
        lines += ["", *arg.lines]
    lines += ["", "[shapes]"]
    if used:
        defaults = [n for n in used if origins[n] == "default"]
        if defaults:
            lines.append(f"# {', '.join(defaults)}: no value in the file's main(); default sizes")
        flagged = [n for n in used if origins[n] == "flag"]
        if flagged:
            why = 'shape values are positive: for false, set value = "0"'
            lines.append(f"# {', '.join(flagged)}: flags (bool), 1 = true ({why})")
        lines += [f"# note: {n}" for n in sizing.notes]
        if sizing.points is None:
            product = ", ".join(f"{n} = {sizing.values[n]}" for n in used)
            lines.append(f"default = {{ product = {{ {product} }} }}")
        elif sizing.points:
            listed = ", ".join(
                "{ " + ", ".join(f"{n} = {v}" for n, v in pt.items()) + " }" for pt in sizing.points
            )
            lines.append(f"default = [{listed}]")
        else:
            why = "shapes: at none of the default sizes is the launch valid (see the notes above)"
            todos.append(why)
            lines += [f"# {TODO}: {why}", f"default = [{{ {TODO} = 1 }}]"]
        first = sizing.points[0] if sizing.points else {n: sizing.values[n][0] for n in used}
        quick = ", ".join(f"{n} = {v}" for n, v in first.items())
        lines.append(f"quick = [{{ {quick} }}]")
    else:
        lines.append("default = [{}]")
    lines += ["", "[launch]"]
    for which, dims in (("grid", launch.grid), ("block", launch.block)):
        again = _redeclared(module, site, which) if picked is not None and dims is not None else None
        if dims is None:
            why = f"{which} of the launch of {fn.name} at {where}: ktx cannot translate its expressions"
            todos.append(why)
            lines += [f"# {TODO}: {why}", f'{which} = ["{TODO}"]']
        elif again is not None:
            # The launcher picks the launch by a shape condition and declares this launch's
            # dim3 again for other branches (DeepSpeed softmax: threads 128, then 256).
            drafted = ", ".join(dims)
            why = (
                f"{which} of the launch at {where}: [{drafted}] for the branches that see this "
                f"declaration; the launcher declares it again at line {again} for others: write "
                "the one of the branch the [shapes] take"
            )
            todos.append(why)
            lines += [f"# {TODO}: {why}", f'{which} = ["{TODO}"]']
        else:
            lines.append(f"{which} = [" + ", ".join(_toml_str(g) for g in dims) + "]")
    if launch.shared is None:
        why = (
            f"dynamic shared memory of the launch at {where}: ktx cannot translate "
            f"{launch.shared_text!r} (bytes, as an expression of the shape variables)"
        )
        todos.append(why)
        lines += [f"# {TODO}: {why}", f"shared = {_toml_str(TODO)}"]
    elif launch.shared not in ("0", ""):
        lines.append(f"shared = {_toml_str(launch.shared)}")
    lines += [f"# note: {n}" for n in launch.notes]
    lines += [
        "",
        "[compile]",
        f"flags = [{', '.join(_toml_str(f) for f in DRAFT_FLAGS)}]",
        "",
        "[reference]",
        "# Candidates are checked against the original kernel. To check the original too, write",
        "# reference.py beside this file and use it instead:",
        "#   def " + fn.name + "(inputs, shape):  # arrays by name (float64), scalars, shape vars",
        "#       return {" + ", ".join(f'"{a.name}": ...' for a in args if _is_output(a)) + "}",
        '# python = "reference:' + fn.name + '"',
        'use = "original"',
    ]
    lines, more = _second_look(lines, path, fn)
    return Draft(fn.name, "\n".join(lines) + "\n", (*todos, *more))


_RELATIONAL = frozenset({"<", "<=", ">", ">=", "==", "!="})
_INT_DTYPES = frozenset({"int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64"})


def size_use(k: _Kernel, name: str) -> ts.Node | None:
    """Where the kernel uses the scalar ``name`` as a size, else None.

    A size is compared (a bound, a loop limit), reaches a subscript or offsets a pointer
    (``query + token * head_size``), directly or through a local computed from it by
    arithmetic. A shift's amount (``1 << num_bits``) passes nothing on: a bit count is no size
    even when its result is later compared.
    """
    sized = {name}
    # Every declaration, not ``k.locals_`` (one per name): two loops may each declare a
    # ``token_head``, one from this scalar, one from another.
    decls: list[tuple[str, ts.Node]] = []
    for n in _walk(k.body):
        if n.type == "init_declarator":
            ident, value = syntax.declarator_identifier(n), n.child_by_field_name("value")
            if ident is not None and value is not None:
                decls.append((syntax.text(k.module, ident), value))
    changed = True
    while changed:  # locals computed from a size, to a fixed point
        changed = False
        for local, value in decls:
            if local not in sized and _carries(k, value, sized):
                sized.add(local)
                changed = True
    pointers = {p.name for p in k.fn.params if p.is_pointer} | set(k.pointers)
    for n in _walk(k.body):
        if n.type == "binary_expression":
            op = n.child_by_field_name("operator")
            if op is not None and op.type in _RELATIONAL and _carries(k, n, sized):
                return n
            if op is not None and op.type in ("+", "-") and _carries(k, n, sized):
                base = _pointer_base(k.module, n, pointers, {})
                if base is not None and base[1] is not None and _carries(k, base[1], sized):
                    return n
        elif n.type == "subscript_expression":
            index = _index_node(n)
            if index is not None and _carries(k, index, sized):
                return n
    return None


def _passed_to(k: _Kernel, name: str) -> str | None:
    """The first function the kernel hands ``name`` to (as an argument), other than casts and
    math: what it does with the value is out of sight, so the TODO must not say "no size"."""
    for n in _walk(k.body):
        if n.type != "call_expression":
            continue
        fn, arguments = n.child_by_field_name("function"), n.child_by_field_name("arguments")
        if fn is None or arguments is None:
            continue
        callee = syntax.text(
            k.module, fn.child_by_field_name("name") or fn if fn.type == "template_function" else fn
        )
        if callee.split("::")[-1] in _PLAIN_CALLS:
            continue
        if any(_carries(k, a, {name}) for a in arguments.named_children):
            return " ".join(callee.split())
    return None


#: Calls whose arguments are values, not sizes ktx would have to follow.
_PLAIN_CALLS = frozenset(
    {"static_cast", "reinterpret_cast", "const_cast", "min", "max", "fminf", "fmaxf", "abs", "fabsf", "float",
     "int", "powf", "exp2f", "__shfl_sync", "__shfl_xor_sync", "__shfl_down_sync", "printf", "assert"}
)  # fmt: skip


def _mentions(k: _Kernel, name: str) -> bool:
    return any(n.type == "identifier" and syntax.text(k.module, n) == name for n in _walk(k.body))


def _carries(k: _Kernel, node: ts.Node, names: set[str]) -> bool:
    """Whether ``node`` mentions one of ``names`` outside a shift's amount."""
    if node.type == "identifier":
        return syntax.text(k.module, node) in names
    if node.type == "binary_expression":
        op = node.child_by_field_name("operator")
        if op is not None and op.type in ("<<", ">>"):
            left = node.child_by_field_name("left")
            return left is not None and _carries(k, left, names)
    return any(_carries(k, c, names) for c in node.children)


def _not_sizes(
    k: _Kernel,
    args: list[Arg],
    bindings: dict[str, str],
    todos: list[str],
    launch: _LaunchDraft,
    derived: Mapping[str, str | None],
) -> None:
    """An integer the launcher passes through but the kernel never uses as a size (a bit
    count, a mode, a seed) gets a TODO: a shape variable's default sizes {64, 4096} would be
    silently wrong for it (``1 << 4096``). Only names nothing else of the draft uses: an extent
    or the launch that names it makes it a size whatever the kernel does with it."""
    elsewhere: list[str] = [*(launch.grid or ()), *(launch.block or ()), launch.shared or ""]
    elsewhere += [v for v in derived.values() if v is not None]
    elsewhere += [a.shape for a in args if a.shape is not None]
    for i, arg in enumerate(args):
        value = bindings.get(arg.name)
        line = f"value = {_toml_str(value)}" if value is not None else ""
        if value is None or not re.fullmatch(r"[A-Za-z_]\w*", value) or line not in arg.lines:
            continue
        dtypes = [ln.split("=", 1)[1].strip().strip('"') for ln in arg.lines if ln.startswith("dtype =")]
        if not dtypes or dtypes[0] not in _INT_DTYPES:
            continue
        others = [*elsewhere, *(v for n, v in bindings.items() if n != arg.name)]
        if any(re.search(rf"\b{re.escape(value)}\b", t) for t in others):
            continue
        if size_use(k, arg.name) is not None or not _mentions(k, arg.name):
            continue  # a size; or unused (DeepSpeed softmax's heads): any value, and a TODO'd
            # grid or extent may still need the name
        callee = _passed_to(k, arg.name)
        why = (
            f"value of {arg.name}: the kernel passes it to {callee}, which ktx does not read "
            "(a size, a stride, a count?): write the value it takes"
            if callee is not None
            else f"value of {arg.name}: the launcher passes its parameter {value} through, and the kernel "
            "never compares it or indexes with it (no size): write the value it takes"
        )
        del bindings[arg.name]
        todos.append(why)
        at = arg.lines.index(line)
        lines = (*arg.lines[:at], f"# {TODO}: {why}", f'value = "{TODO}"', *arg.lines[at + 1 :])
        args[i] = Arg(arg.name, lines, (*arg.todos, why), arg.shape, arg.elem_bytes)


def _near(points: Sequence[ShapePoint]) -> list[ShapePoint]:
    """The points and, for each variable, the point with it one less: default sizes are
    powers of two, which hide an extent that is right only for multiples of the block."""
    seen: dict[str, ShapePoint] = {}
    for p in points:
        seen.setdefault(p.name, p)
        for name, value in p.values:
            if value > 1:
                q = ShapePoint(tuple((n, v - 1 if n == name else v) for n, v in p.values))
                seen.setdefault(q.name, q)
    return list(seen.values())


#: Stand-ins for the placeholders that do not change where the kernel's accesses reach: an
#: unknown extent as large as can be (never the one found too small), a dtype, a role.
_STAND_INS = {
    'shape = "[TODO]"': 'shape = "[1099511627776]"',
    'dtype = "TODO"': 'dtype = "fp32"',
    'role = "TODO"': 'role = "inout"',
}


def _probe(lines: list[str], path: Path, fn: Function) -> list[str] | None:
    """The draft as a spec the bounds check can load: the TODOs that do not bear on where
    accesses reach replaced by stand-ins, or None when one does (a scalar's value, a launch
    dimension, a derived value, a template value argument)."""
    out: list[str] = []
    for line in lines:
        if line.startswith("source = "):
            out.append(f"source = {_toml_str(str(path.resolve()))}")
        elif line.startswith("template_args = ") and TODO in line:
            values = ast.literal_eval(line.split("=", 1)[1].strip())
            kinds = [t.kind for t in fn.template_params]
            if any(v == TODO and (i >= len(kinds) or kinds[i] != "type") for i, v in enumerate(values)):
                return None
            out.append(
                "template_args = [" + ", ".join(_toml_str("float" if v == TODO else v) for v in values) + "]"
            )
        elif line in _STAND_INS:
            out.append(_STAND_INS[line])
        elif TODO in line and not line.lstrip().startswith("#"):
            return None
        else:
            out.append(line)
    return out


def _second_look(lines: list[str], path: Path, fn: Function) -> tuple[list[str], list[str]]:
    """The draft is checked as ``--check`` would (:mod:`ktx.bounds`), its TODOs stood in for
    where they do not bear on it: an extent the kernel provably reaches past becomes a TODO
    that says so, never a silently wrong line."""
    from ktx.bounds import check_spec
    from ktx.spec import parse_spec

    probe = _probe(lines, path, fn)
    if probe is None:
        return lines, []
    try:
        spec = parse_spec("\n".join(probe) + "\n", path.parent / "ktx.toml")
        report = check_spec(spec, _near(spec.shape_set().points))
    except KtxError:
        return lines, []
    todos: list[str] = []
    out = list(lines)
    done: set[str] = set()
    for f in report.errors:
        if f.kind != "out_of_bounds" or f.buffer in done:
            continue
        start = next((i for i, x in enumerate(out) if x == f"name = {_toml_str(f.buffer)}"), None)
        at = next((i for i in range(start or 0, len(out)) if out[i].startswith("shape = ")), None)
        if start is None or at is None or TODO in out[at]:
            continue
        done.add(f.buffer)
        guess = out[at].split("=", 1)[1].strip()
        line = f.location.line if f.location is not None else 0
        why = (
            f"extent of {f.buffer}: the guess {guess} is too small: {path.name}:{line}: "
            + f.message.split(" ", 1)[1]
        )
        todos.append(why)
        out[at : at + 1] = [f"# {TODO}: {why}", f'shape = "[{TODO}]"']
    return out, todos


_EXPR_WORDS = frozenset({"min", "max", "ceil_div", "cdiv", "if", "else", "and", "or", "not"})


def _is_output(arg: Arg) -> bool:
    return any(line in ('role = "out"', 'role = "inout"') for line in arg.lines)


def _relative(path: Path, out_dir: str | Path | None) -> str:
    base = Path(out_dir) if out_dir is not None else path.parent
    return os.path.relpath(path.resolve(), base.resolve())


# -- checking a draft --------------------------------------------------------------------------


@dataclass(frozen=True)
class Blocker:
    """One thing that keeps a drafted spec from running: a TODO line, or the loader's error."""

    line: int
    message: str


def check(folder: str | Path) -> list[Blocker]:
    """What blocks a run of ``folder/ktx.toml``: TODOs left, else the loader's error, else an
    unknown kernel, else what the static bounds check finds (see :mod:`ktx.check`)."""
    from ktx.check import review

    return list(review(folder).blockers)


def todo_blocker(exc: KtxError) -> str | None:
    """The one line to print when a spec fails on a placeholder ``ktx init`` left: the TODO
    comment above it (what is missing, where ktx looked) instead of "unknown name 'TODO'"."""
    loc = exc.location
    if loc is None or not loc.path or not loc.path.endswith(".toml") or TODO not in exc.message:
        return None
    try:
        lines = Path(loc.path).read_text().splitlines()
    except OSError:
        return None
    for i in range(min(loc.line, len(lines)) - 1, max(loc.line - 4, 0) - 1, -1):
        line = lines[i].lstrip()
        if line.startswith(f"# {TODO}:"):
            what = line.split(f"{TODO}:", 1)[1].strip()
            folder = Path(loc.path).parent
            return (
                f"{loc.path}:{loc.line}: a TODO left by ktx init blocks the run: {what} "
                f"(replace the placeholder; ktx init --check {folder} lists them all)"
            )
    return None
