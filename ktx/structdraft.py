"""``ktx init`` for by-value struct and vector parameters: one ``fields`` line per field.

The draft (:mod:`ktx.draft`) writes ``value = ...`` for a scalar; a ``Params p`` or ``uint3 div``
needs a value per field instead. The fields come from the struct's definition as libclang lays
it out (:mod:`ktx.ir.facts.structs`), so the draft names exactly the fields the spec loader will
ask for. A value is derived where the launcher says it plainly (``p.ncols = d;``, ``Params p{d,
s}``, ``make_uint3(a, b, c)``, each translated by the draft's own launch translator into shape
variables); every other field is a ``# TODO:`` with a placeholder the loader refuses.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

import tree_sitter as ts
from ktx.ir.facts.structs import FieldPath, StructLayout, kernel_layouts, path_name

TODO = "TODO"
#: CUDA's vector types: ``float4``, ``uchar2``, ``__half2``, ``__nv_bfloat162`` ...
_VECTOR_TYPE = re.compile(
    r"(?:u?(?:char|short|int|long|longlong)|float|double)[1-4]|(?:__)?half2|(?:__)?nv_bfloat162"
)
#: ``p.div.mul`` / ``p.coef[2]`` on the left of an assignment, ``p`` the launcher's local.
_FIELD_REF = r"^{var}((?:\.[A-Za-z_]\w*|\[\d+\])+)$"


def struct_layouts(
    path: Path, source: str, kernel: str, template_args: Sequence[str | None]
) -> dict[str, StructLayout]:
    """The by-value struct parameters of ``kernel`` by name. Where a template argument was not
    deduced, the uninstantiated declaration still lays out every struct whose type does not
    depend on a template parameter (ggml's ``rope_norm<forward, has_ff, T, D>`` takes a plain
    ``rope_corr_dims``); the dependent ones are left as they were."""
    given = [t for t in template_args if t is not None]
    complete = len(given) == len(template_args)
    found = kernel_layouts(source, kernel, path=str(path), template_args=given if complete else ())
    return {p.name: p.layout for p in found if p.layout is not None and not p.pointee}


def pointee_layouts(
    path: Path, source: str, kernel: str, template_args: Sequence[str | None]
) -> dict[str, StructLayout]:
    """The pointer-to-struct parameters of ``kernel`` by name, each with its pointee's layout
    (DeepSpeed's ``const RaggedBatchDescriptor* batch``): the spec gives them as arrays of
    structs, ``type`` and ``fields`` per element (:func:`struct_layouts` for the rest)."""
    from ktx.draft.includes import include_dirs  # the folders the draft's -I flags name

    given = [t for t in template_args if t is not None]
    complete = len(given) == len(template_args)
    dirs = [str(d) for d in include_dirs(path).dirs]
    found = kernel_layouts(
        source, kernel, path=str(path), template_args=given if complete else (), include_dirs=dirs
    )
    # a pointer to CUDA's vector types (float4*, half2*) is a buffer of their elements, not
    # an array of structs to fill field by field
    return {
        p.name: p.layout
        for p in found
        if p.layout is not None and p.pointee and not _VECTOR_TYPE.fullmatch(p.layout.type)
    }


def is_vector_type(type_name: str) -> bool:
    """``uint3``, ``float4``, ``__half2``: CUDA's vector types, whose fields are lanes."""
    return _VECTOR_TYPE.fullmatch(type_name.split("::")[-1]) is not None


def components(node: ts.Node | None, local_parts: Sequence[ts.Node]) -> list[ts.Node]:
    """What a struct argument is built from, in order: ``make_uint3(a, b, c)`` or ``{a, b}`` at
    the launch, else the launcher local's constructor or brace initialiser (``local_parts``)."""
    for candidate in ([node] if node is not None else [], list(local_parts)):
        if len(candidate) == 1 and candidate[0].type in (
            "call_expression",
            "initializer_list",
            "compound_literal_expression",
        ):
            inner = candidate[0]
            if inner.type == "call_expression":
                args = inner.child_by_field_name("arguments")
                return [c for c in args.named_children if c.type != "comment"] if args is not None else []
            if inner.type == "compound_literal_expression":
                inner = inner.child_by_field_name("value") or inner
            return [c for c in inner.named_children if c.type != "comment"]
        if candidate and candidate is not None and len(candidate) > 1:
            return list(candidate)
    return []


def launcher_values(
    var: ts.Node | None,
    scope: ts.Node | None,
    components: Sequence[ts.Node],
    layout: StructLayout,
    translate: Callable[[ts.Node], str | None],
) -> dict[str, str]:
    """Field values the launcher states: ``var.field = e;`` assignments in ``scope`` (``var`` the
    identifier passed at the launch), else positional ``components`` (``Params p{a, b}``,
    ``make_uint3(a, b, c)``) when there is one per field. Each is ``translate``d to an
    expression over shape variables; a field whose value does not translate is left out."""
    translate = _with_literals(translate)
    out: dict[str, str] = {}
    if len(components) == len(layout.leaves):
        for leaf, node in zip(layout.leaves, components, strict=True):
            value = translate(node)
            if value is not None:
                out[leaf.name] = value
    if var is None or scope is None or var.type != "identifier" or var.text is None:
        return out
    pattern = re.compile(_FIELD_REF.format(var=re.escape(var.text.decode())))
    known = {leaf.name for leaf in layout.leaves}
    stack = [scope]
    while stack:
        node = stack.pop()
        stack.extend(reversed(node.children))
        if node.type != "assignment_expression" or node.end_byte > var.start_byte:
            continue
        left, right, op = (node.child_by_field_name(k) for k in ("left", "right", "operator"))
        if left is None or right is None or left.text is None or (op is not None and op.type != "="):
            continue
        m = pattern.match(re.sub(r"\s+", "", left.text.decode()))
        if m is None:
            continue
        name = m.group(1).lstrip(".")
        if name in known:
            value = translate(right)
            if value is not None:
                out[name] = value  # the last assignment before the launch wins
            else:
                out.pop(name, None)
    return out


def _with_literals(translate: Callable[[ts.Node], str | None]) -> Callable[[ts.Node], str | None]:
    """``translate``, plus the number literals it refuses (``2.0f``, ``1e-6``, ``3u``): a field is
    as often a float constant as a size."""

    def inner(node: ts.Node) -> str | None:
        value = translate(node)
        if value is not None or node.type != "number_literal" or node.text is None:
            return value
        text = node.text.decode().rstrip("fFuUlL")
        try:
            float(text)
        except ValueError:
            return None
        return text

    return inner


def struct_lines(
    name: str, layout: StructLayout, values: Mapping[str, str], guesses: Mapping[str, str] | None = None
) -> tuple[list[str], list[str]]:
    """The ``[[args]]`` lines after ``name =``: ``type``, then one ``fields.`` line per field (a
    whole fixed array on one line), each value ``values`` lacks a TODO. A pointer field names a
    buffer drafted after the fields as a ``[[buffers]]`` table (dtype, shape, role TODOs): the
    struct holds the kernel's buffers (causal-conv1d's ``ConvParamsBase``). A value that is a
    guess (``guesses``: field -> why) gets its TODO line too. Returns (lines, todos)."""
    lines = [f"type = {_quote(layout.type)}"]
    todos: list[str] = []
    done: set[str] = set()
    buffers: list[str] = []
    for leaf in layout.leaves:
        cut = next((i for i, part in enumerate(leaf.path) if isinstance(part, int)), None)
        if cut is None and leaf.kind == "pointer" and leaf.name not in values:
            key = ".".join(str(p) for p in leaf.path)
            buffer = _buffer_name(leaf.path, set(buffers))
            buffers.append(buffer)
            why = (
                f"{name}.{leaf.name} ({leaf.ctype} field of {layout.type}) points at a buffer, drafted "
                f'as [[buffers]] {buffer} below: give its dtype, shape and role, or write "0" here '
                "for a null pointer (and drop the buffer)"
            )
            todos.append(why)
            lines += [f"# {TODO}: {why}", f"fields.{key} = {_quote(buffer)}"]
            continue
        if cut is None:
            key = ".".join(str(p) for p in leaf.path)
            value = values.get(leaf.name)
            if value is None:
                why = f"value of {name}.{leaf.name} ({leaf.ctype} field of {layout.type})"
                todos.append(why)
                lines.append(f"# {TODO}: {why}")
            elif guesses and leaf.name in guesses:
                lines.append(f"# {TODO}: {guesses[leaf.name]}")  # a guess to check, blocking nothing
            lines.append(f"fields.{key} = {_quote(value or TODO)}")
            continue
        head = leaf.path[:cut]
        key = path_name(head)
        if key in done:
            continue
        done.add(key)
        tree = _subtree(layout, head, values)
        if TODO in _flat(tree):
            why = f"values of {name}.{key} (an array in {layout.type})"
            todos.append(why)
            lines.append(f"# {TODO}: {why}")
        lines.append(f"fields.{'.'.join(str(p) for p in head)} = {_inline(tree)}")
    for buffer in buffers:  # TOML appends each [[buffers]] table wherever it stands
        why = f"the buffer {name}'s pointer field points at; a null pointer has none: drop the table"
        lines += ["", f"# {TODO}: {why}", "[[buffers]]", f"name = {_quote(buffer)}  # {TODO}: see above",
                  f'dtype = "{TODO}"', f'shape = "[{TODO}]"', f'role = "{TODO}"']  # fmt: skip
    return lines, todos


def _buffer_name(path: FieldPath, taken: set[str]) -> str:
    """``x_ptr`` -> ``x``, ``cache_seqlens`` -> itself: the buffer a pointer field points at."""
    base = "_".join(str(p) for p in path)
    short = re.sub(r"_?ptr$", "", base) or base
    name, n = short, 2
    while name in taken:
        name, n = f"{short}_{n}", n + 1
    return name


Tree = str | list["Tree"] | dict[str, "Tree"]


def _subtree(layout: StructLayout, head: FieldPath, values: Mapping[str, str]) -> Tree:
    """The nested value (lists for arrays, dicts for structs) of the leaves under ``head``."""
    root: dict[str | int, object] = {}
    for leaf in layout.leaves:
        if leaf.path[: len(head)] != head:
            continue
        node = root
        rest = leaf.path[len(head) :]
        for part in rest[:-1]:
            node = node.setdefault(part, {})  # type: ignore[assignment]
        node[rest[-1]] = values.get(leaf.name, TODO)
    return _shape(root)


def _shape(node: object) -> Tree:
    if isinstance(node, str):
        return node
    assert isinstance(node, dict)
    if all(isinstance(k, int) for k in node):
        return [_shape(node[k]) for k in sorted(node)]
    return {str(k): _shape(v) for k, v in node.items()}


def _flat(tree: Tree) -> list[str]:
    if isinstance(tree, str):
        return [tree]
    items = tree.values() if isinstance(tree, dict) else tree
    return [leaf for item in items for leaf in _flat(item)]


def _inline(tree: Tree) -> str:
    if isinstance(tree, str):
        return _quote(tree)
    if isinstance(tree, list):
        return "[" + ", ".join(_inline(t) for t in tree) + "]"
    return "{ " + ", ".join(f"{k} = {_inline(v)}" for k, v in tree.items()) + " }"


def _quote(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'
