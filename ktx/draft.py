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

import contextlib
import os
import re
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import tree_sitter as ts
from ktx.ir import LaunchSite, Module, parse_file
from ktx.ir.access import _index_node, terms
from ktx.ir.facts.kinds import access_kind as _kind
from ktx.ir.nodes import Function, Param

from ktx import syntax
from ktx.errors import KtxError, Location
from ktx.launch import (
    Untranslatable,
    _Translator,
    launcher_node,
    mapping_from_file,
    substitute,
)

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
    site = sites[0]
    if fn.template_params and not site.template_args:
        raise KtxError(
            f"template kernel {fn.name} has no instantiation at its launch",
            Location(path, site.span.line, 1),
            f"launch it as {fn.name}<TYPE><<<...>>>, naming the template arguments",
        )
    return fn, site


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
                if base is not None and decl.child_by_field_name("declarator") is not None and (
                    decl.child_by_field_name("declarator").type == "pointer_declarator"  # type: ignore[union-attr]
                ):
                    k.pointers[name] = base
                else:
                    k.locals_[name] = value
        elif n.type == "for_statement":
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
    """``r = blockIdx.x`` ranges over the grid's x extent (the launch's, in spec variables)."""
    for name, value in k.locals_.items():
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
            c = rest.strip() in defined if kind == "ifdef" else (
                rest.strip() not in defined if kind == "ifndef" else cond(rest)
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


def _translator(module: Module, site: LaunchSite, launcher: Function | None) -> _Translator:
    scope = launcher_node(module, site)
    params = frozenset(p.name for p in launcher.params) if launcher else frozenset()
    locals_ = syntax.local_declarations(module, scope, before=site.span.start) if scope is not None else {}
    return _Translator(module, scope or module.tree.root_node, site.span.start, locals_, params)


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


# -- the draft ---------------------------------------------------------------------------------


def _toml_str(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


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
    bindings: dict[str, str] = {}
    for p, node in zip(fn.params, call_args, strict=False):
        if p.is_pointer:
            continue
        with contextlib.suppress(Untranslatable):
            bindings[p.name] = _resolve(tr.expr(node), tr)
    mapping = mapping_from_file(module, fn.name)
    launcher_vars: dict[str, str] = {}
    callers = _callers(module, launcher) if launcher is not None else None
    if callers:
        launcher_vars = {n: e for n, e in callers.items() if not re.fullmatch(re.escape(n), e)}
    env = {**dict(tr.used_vars), **bindings}
    if mapping is not None:
        resolved = mapping.resolved()
        _grid_bounds(k, resolved.grid)
        env.update({f"__grid{i}": g for i, g in enumerate(resolved.grid)})
    template_args = [module.text(s) for s in site.template_arg_spans]
    targ = dict(zip((t.name for t in fn.template_params), template_args, strict=False))

    args: list[Arg] = []
    for p in fn.params:
        base = targ.get(p.base_type, p.base_type)
        dtype = _dtype(module, path, base)
        lines = ["[[args]]", f"name = {_toml_str(p.name)}"]
        arg_todos: list[str] = []
        if dtype is None:
            why = f"element type {base!r} of {p.name}: not a scalar type ktx knows (looked at typedefs)"
            arg_todos.append(why)
            lines += [f"# {TODO}: {why}", f'dtype = "{TODO}"']
        else:
            lines.append(f"dtype = {_toml_str(dtype)}")
        if p.is_pointer:
            role, subs = _role(k, p)
            extent = _extent(k, p, subs, env)
            if extent is None:
                seen = ", ".join(sorted({k.text(s) for s in subs})[:3]) or "no subscript"
                why = f"extent of {p.name}: indexed as {seen} (looked at the kernel's subscripts and bounds)"
                arg_todos.append(why)
                lines += [f"# {TODO}: {why}", f'shape = "[{TODO}]"']
            else:
                lines.append(f"shape = {_toml_str(extent)}")
            if role is None:
                why = f"role of {p.name}: the kernel neither subscripts nor reads it (in, out or inout?)"
                arg_todos.append(why)
                lines += [f"# {TODO}: {why}", f'role = "{TODO}"']
            else:
                lines.append(f"role = {_toml_str(role)}")
        else:
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
        args.append(Arg(p.name, tuple(lines), tuple(arg_todos)))
        todos += arg_todos

    # Shape variables: free names of the launch and of the scalar values and extents.
    used: list[str] = []
    texts = list(bindings.values())
    if mapping is not None:
        r = mapping.resolved()
        texts += [*r.grid, *r.block, r.shared]
    for arg in args:
        texts += [line.split("=", 1)[1] for line in arg.lines if line.startswith("shape =")]
    names: set[str] = set()
    for text in texts:
        for name in re.findall(r"\b[A-Za-z_]\w*\b", text):
            if name not in names and name not in used and name not in _EXPR_WORDS and name != TODO:
                used.append(name)
    vars_: dict[str, str] = {}
    for name in list(used):
        if name in launcher_vars:
            vars_[name] = launcher_vars[name]
            used.remove(name)
            for extra in re.findall(r"\b[A-Za-z_]\w*\b", launcher_vars[name]):
                if extra not in used and extra not in _EXPR_WORDS:
                    used.append(extra)
    found = _main_values(module)
    points: dict[str, list[int]] = {}
    origins: dict[str, str] = {}
    for name in used:
        points[name], origins[name] = _shape_values(name, found, len(used))

    lines = [
        f"# Drafted by `ktx init {path.name}` from {path}; check every line, then `ktx init --check`.",
        f"kernel = {_toml_str(fn.name)}",
        f"source = {_toml_str(_relative(path, out_dir))}",
    ]
    if template_args:
        lines.append("template_args = [" + ", ".join(_toml_str(t) for t in template_args) + "]")
    if vars_:
        lines += ["", "[vars]"] + [f"{n} = {_toml_str(e)}" for n, e in vars_.items()]
    for arg in args:
        lines += ["", *arg.lines]
    lines += ["", "[shapes]"]
    if used:
        defaults = [n for n in used if origins[n] == "default"]
        if defaults:
            lines.append(f"# {', '.join(defaults)}: no value in the file's main(); default sizes")
        product = ", ".join(f"{n} = {points[n]}" for n in used)
        lines.append(f"default = {{ product = {{ {product} }} }}")
        quick = ", ".join(f"{n} = {points[n][0]}" for n in used)
        lines.append(f"quick = [{{ {quick} }}]")
    else:
        lines.append("default = [{}]")
    lines += ["", "[launch]"]
    if mapping is None:
        why = f"launch of {fn.name} at {where}: ktx cannot translate its grid/block expressions"
        todos.append(why)
        lines += [f"# {TODO}: {why}", f'grid = ["{TODO}"]', f'block = ["{TODO}"]']
    else:
        lines.append("grid = [" + ", ".join(_toml_str(g) for g in mapping.resolved().grid) + "]")
        lines.append("block = [" + ", ".join(_toml_str(b) for b in mapping.resolved().block) + "]")
        if mapping.shared not in ("0", ""):
            lines.append(f"shared = {_toml_str(mapping.resolved().shared)}")
        lines += [f"# note: {n}" for n in mapping.notes]
    lines += [
        "",
        "[compile]",
        f'flags = [{", ".join(_toml_str(f) for f in DRAFT_FLAGS)}]',
        "",
        "[reference]",
        "# Candidates are checked against the original kernel. To check the original too, write",
        "# reference.py beside this file and use it instead:",
        "#   def " + fn.name + "(inputs, shape):  # arrays by name (float64), scalars, shape vars",
        "#       return {" + ", ".join(f'"{a.name}": ...' for a in args if _is_output(a)) + "}",
        '# python = "reference:' + fn.name + '"',
        'use = "original"',
    ]
    return Draft(fn.name, "\n".join(lines) + "\n", tuple(todos))


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
    """The TODOs left in ``folder/ktx.toml`` and, when none, whatever the spec loader refuses."""
    from ktx.spec import load_spec

    path = Path(folder) / "ktx.toml"
    if not path.is_file():
        raise KtxError("no ktx.toml here", Location(str(folder)), "run ktx init FILE.cu --out DIR first")
    lines = path.read_text().splitlines()
    # A TODO blocks while the line after its comment still holds the placeholder: replacing
    # that one line is the whole edit (the comment may stay).
    blockers = [
        Blocker(i + 2, line.split(f"{TODO}:", 1)[1].strip())
        for i, line in enumerate(lines)
        if line.lstrip().startswith(f"# {TODO}:") and i + 1 < len(lines) and TODO in lines[i + 1]
    ]
    if blockers:
        return blockers
    try:
        load_spec(folder)
    except KtxError as exc:
        line = exc.location.line if exc.location is not None else 0
        return [Blocker(line, exc.message + (f" ({exc.hint})" if exc.hint else ""))]
    return []


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
