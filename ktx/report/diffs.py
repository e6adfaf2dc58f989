"""Diffs: what each pass changed, and the patch a person applies to their tree.

The per-pass diffs replay the final template's trace on the original source one step at a
time, so each diff shows exactly the edits of one pass on the code *as that pass saw it*.

The patch (``git apply`` / ``patch -p1``) changes the kernel file and adds the dispatch header.
The dispatch table answers variant -1 ("launch the original") for every shape it was not tuned
for, so the patched file keeps the original code exactly as it was and adds each tuned variant
beside it, as ktx instantiated it (plain CUDA, no macros), in its own ``namespace
ktx_variant_N``. For each host launcher of the original (``launch_silu_and_mul``) the file gains
``ktx_launch_<kernel>(<shape variables>, <the launcher's arguments>)``, which asks the dispatch
function and calls the chosen variant's launcher or the original's. One build holds them all.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import PurePosixPath
from typing import Any

from ktx.ir import parse
from ktx.ir.edits import splice

from ktx.search.dispatch import DispatchTable, c_identifier
from ktx.template import Trace


@dataclass(frozen=True)
class PassDiff:
    pass_name: str
    invocation: str
    reason: str
    diff: str
    outcomes: tuple[str, ...]


def unified(before: str, after: str, a: str, b: str, context: int = 3) -> str:
    """``diff -u`` text; a last line without a newline gets the marker ``patch`` expects."""
    lines = difflib.unified_diff(
        before.splitlines(keepends=True), after.splitlines(keepends=True), a, b, n=context
    )
    out = []
    for line in lines:
        out.append(line if line.endswith("\n") else line + "\n\\ No newline at end of file\n")
    return "".join(out)


def pass_diffs(original: str, trace: Trace) -> list[PassDiff]:
    """One diff per traced step (the knob header included), in pipeline order."""
    current = original.encode("utf-8", "surrogateescape")
    out: list[PassDiff] = []
    for step in trace.steps:
        after = splice(current, step.edits)
        before_text = current.decode("utf-8", "surrogateescape")
        after_text = after.decode("utf-8", "surrogateescape")
        name = step.pass_name if step.pass_name != "ktx" else "knob header"
        diff = unified(before_text, after_text, "before", f"after {name}")
        outcomes = tuple(f"{o.site} (line {o.line}): {o.status}: {o.message}" for o in step.outcomes)
        out.append(PassDiff(name, step.invocation, step.reason, diff, outcomes))
        current = after
    return out


_INCLUDE = re.compile(r"^[ \t]*#[ \t]*include\b.*$", re.M)
_DEFINE = re.compile(r"^[ \t]*#[ \t]*define[ \t]+(\w+)", re.M)


_SCOPES = frozenset({"namespace_definition", "struct_specifier", "class_specifier", "union_specifier"})


def global_functions(source: str) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """(functions defined in the global namespace, those of them that launch a kernel)."""
    try:
        module = parse(source)
    except Exception:  # a file the IR cannot read: nothing renamed, no launcher
        return (), ()
    names: list[str] = []
    for fn in module.functions:
        node = module.node(fn.span).parent
        while node is not None and node.type not in _SCOPES:
            node = node.parent
        if node is None and re.fullmatch(r"[A-Za-z_]\w*", fn.name) and fn.name not in names:
            names.append(fn.name)
    launchers: list[str] = []
    for site in module.launch_sites:
        if site.function in names and site.macro is None and site.function not in launchers:
            launchers.append(site.function)
    return tuple(names), tuple(launchers)


def _renamed(name: str, index: int) -> str:
    return f"{name}_ktx{index}"


def _variant_block(
    index: int, text: str, original_includes: set[str], functions: tuple[str, ...]
) -> list[str]:
    """One variant in its own namespace.

    Its ``#include`` lines are dropped (the original, above, included them; any new one goes
    before the namespace); every macro it defines is undefined first, so an include guard or a
    changed constant of the original does not leak into it; and the functions the original
    defines in the global namespace get a ``_ktxN`` suffix: argument-dependent lookup would
    otherwise find the original's overload beside the variant's for arguments of global types
    (``__nv_bfloat16*``), and an ``extern "C"`` name is one symbol whatever its namespace.
    """
    includes = [m.group(0).strip() for m in _INCLUDE.finditer(text)]
    body = _INCLUDE.sub(lambda m: f"// ktx: {m.group(0).strip()} is included above", text).rstrip("\n")
    for name in functions:
        body = re.sub(rf"(?<![\w.:])(?<!->){re.escape(name)}\b", _renamed(name, index), body)
    out = [line for line in dict.fromkeys(includes) if line not in original_includes]
    out += [f"#undef {name}" for name in dict.fromkeys(_DEFINE.findall(body))]
    out += [f"namespace ktx_variant_{index} {{", body, f"}}  // namespace ktx_variant_{index}", ""]
    return out


def tuned_source(
    original: str,
    variants: tuple[str, ...],
    dispatch: DispatchTable | Mapping[str, Any] | None,
    header_name: str,
) -> tuple[str | None, str]:
    """The kernel file's new text and what it is: the original, unchanged, with the tuned
    variants beside it and a launcher that chooses through the dispatch table."""
    if not variants:
        return None, "no tuned variant: the original is kept"
    original_includes = {m.group(0).strip() for m in _INCLUDE.finditer(original)}
    out = [original.rstrip("\n"), ""]
    out += [
        "// ---- ktx: tuned variants --------------------------------------------------------------",
        "// The code above is the original kernel, unchanged: the dispatch table's variant -1.",
        "// Variant N is `namespace ktx_variant_N` below (its knobs in its first comment line), where",
        "// the functions of the original's global namespace are renamed NAME_ktxN.",
        "",
    ]
    functions, names = global_functions(original)
    for i, text in enumerate(variants):
        out += _variant_block(i, text, original_includes, functions)
    table = DispatchTable.from_dict(dispatch) if isinstance(dispatch, Mapping) else dispatch
    variables = [] if table is None else list(table.variables)
    table_kernel = "" if table is None else table.kernel
    if not names or not variables or not table_kernel:
        out += [
            "// ktx: no host launcher found; launch ktx_variant_N::<kernel>_ktxN where the dispatch table",
            f"// ({header_name}) answers variant N, and the original kernel where it answers -1.",
        ]
        return "\n".join(out) + "\n", "the original and the tuned variants, by namespace"
    fn = f"ktx_dispatch_{c_identifier(table_kernel)}"
    params = ", ".join(f"int64_t {c_identifier(v)}" for v in variables)
    args = ", ".join(c_identifier(v) for v in variables)
    out += ["#ifndef __CUDACC_RTC__", f'#include "{header_name}"', ""]
    for name in names:
        out += [
            f"// ktx_{name}({', '.join(variables)}, <the arguments of {name}>): the launcher",
            f"// the dispatch table chooses for this shape ({fn}; -1: the original {name}).",
            "template <typename... Args>",
            f"inline decltype(auto) ktx_{name}({params}, Args&&... args) {{",
            f"  switch ({fn}({args}).variant) {{",
        ]
        out += [
            f"    case {i}: return ktx_variant_{i}::{_renamed(name, i)}(static_cast<Args&&>(args)...);"
            for i in range(len(variants))
        ]
        out += [
            f"    default: return ::{name}(static_cast<Args&&>(args)...);  // -1: the original",
            "  }",
            "}",
            "",
        ]
    out += ["#endif  // __CUDACC_RTC__"]
    what = f"the original and the tuned variants; ktx_{names[0]} chooses through the dispatch table"
    return "\n".join(out) + "\n", what


def patch(original: str, source_rel: str, tuned: str | None, header: str | None, header_name: str) -> str:
    """A unified diff (``a/``/``b/`` paths, ``patch -p1``) of the kernel file and the new header."""
    parts: list[str] = []
    path = PurePosixPath(source_rel)
    if tuned is not None and tuned != original:
        parts.append(unified(original, tuned, f"a/{path}", f"b/{path}"))
    if header is not None:
        target = path.parent / header_name
        body = unified("", header, "/dev/null", f"b/{target}")
        parts.append(body)
    return "".join(parts)
