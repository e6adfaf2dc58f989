"""``ktx init``'s drafter: the ``ktx.toml`` text from what the source says.

:func:`draft` asks the facts layer (:mod:`ktx.ir.facts.launcher`, :mod:`ktx.ir.facts.params`,
:mod:`ktx.ir.facts.dtypes`) about the kernel, its launch and its parameters, and writes the
spec: ``[[args]]``, ``[launch]``, ``[vars]``, ``[shapes]``, with a ``# TODO:`` line wherever
the source does not say.
"""

from __future__ import annotations

import contextlib
import os
import re
from collections.abc import Callable, Mapping, Sequence
from itertools import pairwise
from pathlib import Path

import tree_sitter as ts
from ktx.ir import parse_file, syntax
from ktx.ir.affine import kernel_index
from ktx.ir.clang import _namespace_path
from ktx.ir.errors import KtxError
from ktx.ir.facts import assign
from ktx.ir.facts.dtypes import BYTE_TYPES, cast_element, dtype_of, vector_of
from ktx.ir.facts.field_uses import bounded_fields
from ktx.ir.facts.launcher import (
    LaunchDraft,
    _DraftTranslator,
    arguments_by_branch,
    branch_picked,
    caller_values,
    canonical,
    choose_kernel,
    deduce_template_args,
    expansion_value,
    header_expr,
    header_value,
    inline_vars,
    launch_arguments,
    launcher_of,
    main_values,
    read_launch,
    reassigned,
    redeclared,
    relations,
    translator_for,
)
from ktx.ir.facts.params import (
    KernelBody,
    address_extent,
    affine_extent,
    extent_dims,
    grid_bounds,
    handed_extent,
    mentions,
    moved_extent,
    moved_line,
    passed_to,
    pointer_uses,
    read_kernel,
    read_only_when,
    role_of,
    size_use,
    subscript_extent,
    valid_extent,
    view_extent,
    view_type,
)
from ktx.ir.facts.strides import dense_strides, in_spec_vars
from ktx.ir.facts.structs import StructLayout
from ktx.ir.launch import (
    Untranslatable,
    expansion_guess,
    expansion_scope,
    expansion_template_choice,
    kernel_across_includes,
    launcher_node,
    standin_launch,
)
from ktx.ir.module import Module
from ktx.ir.nodes import Function, LaunchSite, Param

from ktx import structdraft
from ktx.blockers import TODO
from ktx.draft.doubt import nullable, spread
from ktx.draft.entries import DRAFT_FLAGS, DTYPE_BYTES, Arg, Draft, toml_str
from ktx.draft.includes import define_flags, include_dirs, include_flags
from ktx.draft.review import second_look
from ktx.draft.sizing import shape_values, size_shapes


def _struct_arg(
    module: Module,
    site: LaunchSite,
    tr: _DraftTranslator,
    name: str,
    layout: StructLayout,
    node: ts.Node | None,
    k: KernelBody | None = None,
    sizes: set[str] | None = None,
) -> Arg:
    """``[[args]]`` for a struct passed by value: one ``fields.`` line per field (ktx.structdraft)."""

    def translate(n: ts.Node) -> str | None:
        with contextlib.suppress(Untranslatable, KtxError):
            return inline_vars(tr.expr(n), tr)
        return None

    scope = launcher_node(module, site)
    local = None
    if node is not None and node.type == "identifier" and scope is not None:
        locals_ = syntax.local_declarations(module, scope, before=site.span.start)
        local = locals_.get(syntax.text(module, node))
    parts = structdraft.components(node, local.components if local is not None else ())
    values = structdraft.launcher_values(node, scope, parts, layout, translate)
    # integer fields the kernel compares as bounds are sizes: a shape variable of the field's
    # name, a guess under a TODO, where the launcher does not say (ktx.ir.facts.field_uses)
    guesses: dict[str, str] = {}
    vector = structdraft.is_vector_type(layout.type)  # uint3 x, y, z: no names of sizes
    for field_name, use in (bounded_fields(k, name) if k is not None and not vector else {}).items():
        leaf = layout.leaf(field_name)
        if leaf is not None and leaf.kind in ("int", "uint") and field_name not in values:
            values = {**values, field_name: field_name}
            guesses[field_name] = (
                f"value of {name}.{field_name}: the launcher's value is not followed; drafted as a shape "
                f"variable of its own (the kernel bounds by it: {use[:60]}): write the caller's expression "
                "if it is a function of the other sizes"
            )
    lines, todos = structdraft.struct_lines(name, layout, values, guesses)
    if sizes is not None:
        sizes.update(guesses)
    return Arg(name, ("[[args]]", f"name = {toml_str(name)}", *lines), tuple(todos))


def _drafted_buffers(lines: Sequence[str]) -> set[str]:
    """The quoted names of the ``[[buffers]]`` tables drafted among a struct argument's lines."""
    return {
        line.split("=", 1)[1].split("#", 1)[0].strip()
        for prev, line in pairwise(lines)
        if prev == "[[buffers]]" and line.startswith("name =")
    }


def draft(path: str | Path, kernel: str | None = None, out_dir: str | Path | None = None) -> Draft:
    """Draft the spec of ``kernel`` in ``path``; ``source`` is relative to ``out_dir``."""
    path = Path(path)
    given = path
    module = parse_file(path)
    source_path = path
    pair = kernel_across_includes(path, module, kernel)
    if pair is not None:
        # The kernel in a header, its launch in a .cu that includes it: read both as one file;
        # the spec's source is the header (what the passes rewrite), the launch is the .cu's.
        module, path, source_path = pair.module, pair.launcher, pair.header
    standin = standin_launch(module, kernel) if pair is None else None
    if standin is not None:
        # Launched nowhere ktx can see (FlashInfer's JIT writes the launcher): a stand-in
        # launch whose every value is a TODO, rather than a refusal (ktx.ir.launch).
        module = standin
    fn, site = choose_kernel(module, str(path), kernel)
    k = read_kernel(module, fn)
    launcher = launcher_of(module, site)
    tr = translator_for(module, site, launcher)
    todos: list[str] = []
    # The file name alone: the draft's `source =` line already says where it is, and a draft
    # must read the same wherever it was made.
    where = f"{path.name}:{site.span.line}"

    # Scalars: the launcher's expressions; the kernel parameter -> its expression over shape vars.
    call_args = launch_arguments(module, site)
    deduced = deduce_template_args(module, fn, site)
    targ = {t.name: v for t, v in zip(fn.template_params, deduced.values, strict=False) if v is not None}
    # ``sizeof(T)`` in the launcher, T the launch's template argument (written, or deduced from
    # an argument the launcher declares ``T*``): the type drafted for it; name -> kernel's name
    bound_types = _launch_type_names(fn, site, call_args, launcher, module)
    for name, kernel_name in bound_types.items():
        if kernel_name in targ:
            tr.types[name] = targ[kernel_name]
    # Structs and vectors passed by value (ktx.structdraft): fields, never a shape variable.
    targs = deduced.values if fn.template_params else ()
    by_value = [p for p in fn.params if not p.is_pointer]
    maybe = any(dtype_of(module, path, targ.get(p.base_type, p.base_type)) is None for p in by_value)
    structs = structdraft.struct_layouts(path, module.text_str, fn.name, targs) if maybe else {}
    # Pointers to structs (``const RaggedBatchDescriptor* batch``): arrays of them, by fields.
    opaque = [
        p
        for p in fn.params
        if p.is_pointer and dtype_of(module, path, targ.get(p.base_type, p.base_type)) is None
    ]
    pointees = structdraft.pointee_layouts(path, module.text_str, fn.name, targs) if opaque else {}
    bindings: dict[str, str] = {}
    for p, node in zip(fn.params, call_args, strict=False):
        if p.is_pointer or p.name in structs:
            continue
        with contextlib.suppress(Untranslatable, KtxError):
            bindings[p.name] = inline_vars(tr.expr(node), tr)
        if p.name not in bindings:
            literal = _float_literal(module, site, node)
            if literal is not None:  # ``float weight_bias = 0.f; ... k(..., weight_bias)``
                bindings[p.name] = literal
    launch = read_launch(module, site, tr)
    launcher_vars: dict[str, str] = {}
    callers = caller_values(module, launcher) if launcher is not None else None
    if callers:
        launcher_vars = {n: e for n, e in callers.items() if not re.fullmatch(re.escape(n), e)}
    # used_vars keeps "" for a local whose value did not translate: not a value.
    # An integer the launch passes in a way ktx does not follow (an out-parameter of a helper,
    # a tensor's size() call) that the kernel uses as a size is drafted as a shape variable of
    # its own name: what the person finishing the draft writes most often (apex's n1, n2;
    # FlashInfer's d), and extents that name it can then be drafted too. Only a guess: a TODO
    # over its value line says so, and the shape points carry one (see ``own_sizes``).
    launch_names = set(
        re.findall(r"\b[A-Za-z_]\w*\b", " ".join([*(launch.grid or ()), *(launch.block or ())]))
    )
    own_sizes = _own_sizes(
        k,
        fn.params,
        bindings,
        structs,
        lambda q: dtype_of(module, path, targ.get(q.base_type, q.base_type)),
        launch_names,
    )
    for name, line in tr.host_sizes.items():
        # ``int num_tokens = input.numel() / input.size(-1)``: read from the caller's tensors
        own_sizes.setdefault(name, f"the launcher's local (line {line}) reads it from its caller's objects")
    # A launcher local passed as it is names the variable the way the caller does (apex's
    # ``welford_kernel(..., batch_size, feature_size, space_size)`` into ``bs, fs, ss``): what
    # the person finishing the draft writes, and two parameters given one local share it.
    own_names = _launcher_names(module, fn.params, call_args, bindings, structs, own_sizes, launch_names)
    for q in fn.params:
        if q.name in own_names and q.name not in own_sizes:
            own_sizes[q.name] = (
                f"the launcher passes its local {own_names[q.name]}, which the drafted launch names"
            )
    # in the parameters' order, as the shape variables are listed
    bindings = {
        q.name: bindings.get(q.name, own_names.get(q.name, q.name))
        for q in fn.params
        if q.name in bindings or q.name in own_sizes
    } | bindings
    env = {**{n: v for n, v in tr.used_vars.items() if v}, **bindings}
    if launch.grid is not None:
        grid_bounds(k, launch.grid)
        env.update({f"__grid{i}": g for i, g in enumerate(launch.grid)})

    # Strides the kernel indexes with that the launch passes in a way ktx does not follow (or
    # as a name of their own): their values for a dense layout, read from the index order
    # (ktx.ir.facts.strides), each a guess under a TODO that shows the index.
    strides = _dense_values(k, fn.params, module, path, targ, env, launch)
    for name, (dense_value, _) in strides.items():
        # the extents below read the stride as its dense value too (``y[r * ld + c]`` is
        # ``[n, cols]``): a stride swept apart from the sizes could index past them
        handed = bindings.get(name)
        if (handed is None or re.fullmatch(r"[A-Za-z_]\w*", handed)) and handed != dense_value:
            env[name] = dense_value

    args: list[Arg] = []
    # scalars another launch of the kernel in this launcher passes differently (``blocksize / 2``
    # when ``DATA_TYPE > 0``, else ``blocksize``): the first launch's value is one branch's
    branch_args = arguments_by_branch(module, site, fn.name)
    template_names = {t.name for t in fn.template_params if t.kind == "type"}
    checks: list[str] = []  # TODO comments over a drafted line: to check, blocking nothing
    field_sizes: set[str] = set()  # struct fields drafted as shape variables of their own names
    for i, p in enumerate(fn.params):
        if p.name in structs and not p.is_pointer:  # a struct or vector by value: its fields
            passed = call_args[i] if i < len(call_args) else None
            arg = _struct_arg(
                module, site, tr, p.name or f"arg{i}", structs[p.name], passed, k, field_sizes
            )
            args.append(arg)
            todos += arg.todos
            continue
        base = targ.get(p.base_type, p.base_type)
        # A template parameter the launch does not settle is no type of its own, whatever a
        # typedef of the same name elsewhere in the file says (apex's scalar_t is bf16 in one
        # dispatch branch): its dtype is the template argument's, a TODO.
        unsettled = p.base_type in template_names and p.base_type not in targ
        dtype = None if unsettled else dtype_of(module, path, base)
        # a ``void*``/``char*`` buffer the kernel reads as one other type: that type's elements
        cast = cast_element(k.text(k.body), p.name) if p.is_pointer and base in BYTE_TYPES else None
        cast_dtype = dtype_of(module, path, cast) if cast is not None else None
        cast_vector = vector_of(module, path, cast) if cast is not None and cast_dtype is None else None
        cast_why: str | None = None
        if cast is not None and (cast_dtype is not None or cast_vector is not None):
            dtype = cast_dtype if cast_dtype is not None else cast_vector[0] if cast_vector else None
            cast_why = (
                f"element type of {p.name}: declared {p.type.strip()}, the kernel casts it to {cast}*: "
                f"drafted {dtype} (its elements; check the caller passes that type)"
            )
            checks.append(cast_why)
        vector = vector_of(module, path, base) if dtype is None and p.is_pointer and not unsettled else None
        if vector is not None:
            dtype = vector[0]  # float4* -> fp32 elements; the lanes are the extent's last dim
        # an unnamed parameter (a tag: ``constant<B>``) gets its position: ``name = ""`` is no
        # identifier, and the spec loader refused the draft's own line
        lines = ["[[args]]", f"name = {toml_str(p.name or f'arg{i}')}"]
        arg_todos: list[str] = []
        shape: str | None = None
        pointee = pointees.get(p.name) if p.is_pointer else None
        if unsettled:
            why = f"element type of {p.name}: template parameter {p.base_type}, its argument a TODO above"
            arg_todos.append(why)
            lines += [f"# {TODO}: {why}", f'dtype = "{TODO}"']
        elif pointee is not None:
            # an array of structs: its type here, one fields. line per field after the role
            lines.append(f"type = {toml_str(pointee.type)}")
        elif dtype is None:
            why = f"element type {base!r} of {p.name}: not a scalar type ktx knows (looked at typedefs)"
            arg_todos.append(why)
            lines += [f"# {TODO}: {why}", f'dtype = "{TODO}"']
        else:
            if cast_why is not None:
                lines.append(f"# {TODO}: {cast_why}")
            if p.base_type in deduced.guessed:
                why = (
                    f"element type of {p.name}: template parameter {p.base_type}, guessed (the TODO "
                    "over template_args names the other instantiations)"
                )
                checks.append(why)
                lines.append(f"# {TODO}: {why}")
            lines.append(f"dtype = {toml_str(dtype)}")
        if p.is_pointer:
            role, subs = role_of(k, p)
            moved = moved_line(k, p)
            extent = (
                moved_extent(k, p, env, targ, launch)
                if moved
                else subscript_extent(k, p, subs, env)
                or (_rows_of(view_extent(k, p, env) or "") if not subs else None)
                or affine_extent(k, p, env, targ, launch)
            )
            if moved and extent is not None:
                moved = None  # moved once, at the top: its accesses read from the offset
            if extent is None and not moved and not subs:
                # handed on, as it is, to a __device__ function of the file: its extent there
                extent = handed_extent(k, p, env, targ, launch)
            address = None
            if extent is None and not moved and not subs:
                # reached only through addresses handed to calls (``load_global<16>(buf, p + off)``)
                reached = address_extent(k, p, env, targ, launch)
                if reached is not None and valid_extent(reached[0]):
                    extent, address = _rows_of(reached[0]), reached[1]
                    if not address.helper:
                        why = (
                            f"extent of {p.name}: read from the address {address.text} into "
                            f"{p.name} handed to {address.callee}, whose reach past it ktx does not see"
                        )
                        checks.append(why)
                        lines.append(f"# {TODO}: {why}")
            if extent is not None and not valid_extent(extent):
                extent = None
            if extent is None and not moved and not subs and pointer_uses(k, p).deref_only:
                extent = "[1]"  # only ``*p``: one element (a scale, a counter)
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
                if vector is not None:
                    extent = f"{extent[:-1]}, {vector[1]}]"
                view = view_type(k, p, subs) if vector is None and dtype is not None else None
                if view is not None and cast_why is not None and dtype_of(module, path, view) == dtype:
                    view = None  # the cast the dtype came from: its elements are the extent's
                lanes = vector_of(module, path, view) if view is not None else None
                if view is not None and (lanes is None or lanes[0] != dtype):
                    # indexed through a view of another type (``(const uint4*) w``): its
                    # elements are not p's, and ktx does not know how many of p's each holds
                    why = (
                        f"extent of {p.name}: [{extent[1:-1]}] counts elements of {view}, the view the "
                        f"kernel indexes it through, not of {p.name}'s own type: write it in "
                        f"{p.name}'s elements"
                    )
                    checks.append(why)
                    lines.append(f"# {TODO}: {why}")
                elif view is not None and lanes is not None:
                    # ``w2 = (const half2*) w`` over ``column < dim / 2``: two halves a view element
                    extent = _scaled_last(extent, lanes[1])
                dense = [n for n in strides if env.get(n) == strides[n][0] != bindings.get(n)]
                through = _strided_by(k, p.name, dense)
                if through and not lines[-1].startswith(f"# {TODO}"):
                    # read with strides drafted as a dense layout's: as much a guess as they are
                    why = (
                        f"extent of {p.name}: read with {', '.join(through)} at their dense values "
                        "(drafted below, a guess): if the caller's strides differ, so does this extent"
                    )
                    checks.append(why)
                    lines.append(f"# {TODO}: {why}")
                if p.name in k.spanned and not lines[-1].startswith(f"# {TODO}"):
                    # ``row = blockIdx.x * blockDim.x + threadIdx.x`` unguarded: the launch's
                    # threads are the rows read, the array may hold more
                    why = (
                        f"extent of {p.name}: {k.spanned[p.name]} counts the launch's threads, which "
                        "the kernel does not bound: check it against the caller's array"
                    )
                    checks.append(why)
                    lines.append(f"# {TODO}: {why}")
                if p.base_type in deduced.guessed and not lines[-1].startswith(f"# {TODO}"):
                    # counted in elements of a guessed type: as much a guess as the type
                    why = (
                        f"extent of {p.name}: {extent} counts elements of {p.base_type}, whose type is "
                        "guessed above: check it against the launcher's sizes"
                    )
                    checks.append(why)
                    lines.append(f"# {TODO}: {why}")
                lines.append(f"shape = {toml_str(extent)}")
                shape = extent
            if role is None:
                why = f"role of {p.name}: the kernel neither subscripts nor reads it (in, out or inout?)"
                arg_todos.append(why)
                lines += [f"# {TODO}: {why}", f'role = "{TODO}"']
            else:
                test = nullable(k.text(k.body), p.name) if role == "in" else None
                if test is not None:
                    why = (
                        f"{p.name} may be null: the kernel tests it ({test}); if the caller passes "
                        'none, write dist = "null" instead of its role and extent'
                    )
                    checks.append(why)
                    lines.append(f"# {TODO}: {why}")
                guard = read_only_when(k, subs) if test is None and role in ("in", "inout") else None
                if guard is not None:
                    why = (
                        f"{p.name} is read only when {guard}: if the caller passes none there, write "
                        'dist = "null" instead of its role and extent'
                        if role == "in"
                        else f"{p.name} is read only when {guard}: where that is false it is only "
                        'written (role = "out")'
                    )
                    checks.append(why)
                    lines.append(f"# {TODO}: {why}")
                lines.append(f"role = {toml_str(role)}")
            if pointee is not None:
                # each element's fields; an expression may name i, the element's index
                field_lines, field_todos = structdraft.struct_lines(p.name, pointee, {})
                lines += field_lines[1:]
                arg_todos += field_todos
            use = _index_use(k.text(k.body), p.name) if dtype in _INT_DTYPES else None
            if use is not None and role != "out":
                why = (
                    f"values of {p.name}: indices ({use}); random ones may be negative or too large: "
                    'draw them in range, dist = "int:0..N" (or "distinct:0..N" where no two may share one)'
                )
                arg_todos.append(why)
                lines += [f"# {TODO}: {why}", f'dist = "{TODO}"']
        else:
            if dtype is None:
                bindings.pop(p.name, None)  # a struct passed by value: no shape variable of it
            value = bindings.get(p.name)
            if dtype in ("fp32", "fp64") and value is not None and re.fullmatch(r"[A-Za-z_]\w*", value):
                # A float the launcher passes through is a constant, not a shape variable: an
                # ``eps`` gets a typical one; any other (a clamp bound, a scale) only the user knows.
                bindings.pop(p.name)
                default = _param_default(module, launcher, value)
                if default is not None:
                    # ``float eps = 1e-5`` in the launcher's signature: what its callers get
                    lines.append(f"# note: {p.name} is the launcher's parameter {value}; its default there")
                    value = default
                else:
                    shown = _float_guess(p.name)
                    why = (
                        f"value of {p.name}: the launcher passes its float parameter {value} through; "
                        f"drafted {shown}, a guess: write the value the project passes"
                    )
                    checks.append(why)
                    lines += [f"# {TODO}: {why}", f"value = {toml_str(shown)}"]
                    args.append(Arg(p.name, tuple(lines), tuple(arg_todos)))
                    todos += arg_todos
                    continue
            if value is None and dtype in ("fp32", "fp64"):
                # a float the launch computes in a way ktx does not follow: a guess, shown
                shown = _float_guess(p.name)
                why = (
                    f"value of {p.name}: the launch at {where} passes something ktx does not follow; "
                    f"drafted {shown}, a guess: write the value the project passes"
                )
                checks.append(why)
                lines += [f"# {TODO}: {why}", f"value = {toml_str(shown)}"]
            elif p.name in strides and (value is None or re.fullmatch(r"[A-Za-z_]\w*", value)) and (
                value != strides[p.name][0]  # ``row * d + i`` with ``i < d``: d is the size itself
            ):
                stride_value, index = strides[p.name]
                bindings[p.name] = stride_value
                sent = "something ktx does not follow" if value is None else f"{value}"
                why = (
                    f"value of {p.name}: a stride of the index {index}; the launch at {where} passes "
                    f"{sent}: drafted {stride_value}, the stride of a dense (contiguous) layout, a guess: "
                    "write the caller's stride if its tensor may be padded or transposed"
                )
                checks.append(why)
                lines += [f"# {TODO}: {why}", f"value = {toml_str(stride_value)}"]
            elif value is None:
                why = f"value of {p.name}: the launch at {where} passes something ktx does not follow"
                arg_todos.append(why)
                lines += [f"# {TODO}: {why}", f'value = "{TODO}"']
            else:
                own = own_sizes.get(p.name) or own_sizes.get(value)
                if own is not None:
                    why = (
                        f"value of {p.name}: the launch at {where} passes something ktx does not follow; "
                        f"drafted as a shape variable {value!r} ({own}): write the "
                        "caller's expression if it is a function of the other sizes (a product, a stride, "
                        "a padded size)"
                    )
                    checks.append(why)
                    lines.append(f"# {TODO}: {why}")
                if i in branch_args:
                    other, line_no = branch_args[i]
                    why = (
                        f"value of {p.name}: the launch at {where} passes it (drafted here); the launch "
                        f"at {path.name}:{line_no} passes {other}: write the one of the branch the spec takes"
                    )
                    checks.append(why)
                    lines.append(f"# {TODO}: {why}")
                lines.append(f"value = {toml_str(value)}")
        args.append(Arg(p.name, tuple(lines), tuple(arg_todos), shape, DTYPE_BYTES.get(dtype or "", 0)))
        todos += arg_todos

    _not_sizes(k, args, bindings, todos, launch, tr.derived)

    # Launcher locals the launch or the scalars use, set in several places: derived values.
    derived: dict[str, str | None] = {}
    for name in sorted(tr.derived, key=lambda n: tr.derived_lines[n]):
        value = tr.derived[name]
        try:
            derived[name] = canonical(inline_vars(value, tr)) if value is not None else None
        except KtxError:
            derived[name] = None

    # Shape variables: free names of the launch and of the scalar values and extents.
    used: list[str] = []
    texts = list(bindings.values())
    texts += [*(launch.grid or ()), *(launch.block or ()), launch.shared or ""]
    texts += [v for v in derived.values() if v is not None]
    for arg in args:
        buffers = _drafted_buffers(arg.lines)  # a pointer field's value names one: no variable
        for entry in arg.lines:
            if entry.startswith(("shape =", "fields.")) and entry.split("=", 1)[1].strip() not in buffers:
                texts.append(entry.split("=", 1)[1])
    names: set[str] = set()
    for text in texts:
        for name in re.findall(r"\b[A-Za-z_]\w*\b", text):
            if name not in names and name not in used and name not in _EXPR_WORDS and name != TODO:
                used.append(name)
    vars_: dict[str, str | None] = {}
    from_caller: set[str] = set()  # names of the caller's expressions for the launcher's sizes
    for name in list(used):
        if name in launcher_vars:
            vars_[name] = launcher_vars[name]
            used.remove(name)
            for extra in re.findall(r"\b[A-Za-z_]\w*\b", launcher_vars[name]):
                from_caller.add(extra)
                if extra not in used and extra not in _EXPR_WORDS:
                    used.append(extra)
    for name, value in derived.items():
        vars_[name] = value
        if name in used:
            used.remove(name)
    # A name no function takes as a parameter (a header's macro, a global) is no shape variable:
    # its value from the file's local headers, else a TODO.
    parameters = {q.name for f in module.functions for q in f.params if "dim3" not in q.type}
    parameters |= field_sizes | set(own_names.values())
    external: dict[str, str | None] = {}
    callers_sizes: list[str] = []
    header_dirs: tuple[Path, ...] | None = None  # the -I folders, read once, when a name needs them
    for name in list(used):
        if name not in parameters and name not in tr.host_sizes:
            plain = header_value(path, name)
            number = str(plain) if plain is not None else None
            if number is None:
                # in a header of the project's include folders, or an expression of header values
                header_dirs = header_dirs if header_dirs is not None else include_dirs(path).dirs
                number = header_expr(path, name, header_dirs)
            if number is None and name in from_caller and name not in derived:
                # ggml's ``norm_f32_cuda(x, dst, ne00, ne01, ...)``: the caller passes its own
                # locals (``src0->ne[0]``, a macro's declarations) to the launcher's integer
                # sizes; no header gives them a value, so they are the run's sizes: shape
                # variables, as the person finishing the draft makes them.
                callers_sizes.append(name)
                continue
            external[name] = number
            used.remove(name)
            if name in derived:
                del vars_[name]
    vars_ = {**external, **vars_}
    found = main_values(module)
    points: dict[str, list[int]] = {}
    origins: dict[str, str] = {}
    # A bool the kernel takes straight from a launcher parameter is a flag, not a size.
    scalar_types = {q.name: dtype_of(module, path, targ.get(q.base_type, q.base_type)) for q in fn.params}
    flags = {bindings[n] for n, t in scalar_types.items() if t == "bool" and n in bindings}
    for i, arg in enumerate(args):
        flag = bindings.get(arg.name)
        flag_line = f"value = {toml_str(flag)}" if flag in flags else ""
        if flag_line and flag_line in arg.lines:
            # 1 (true) is a guess, not the file's: the caller decides, and the finished specs
            # set as many flags false as true. A guess without a TODO is silently wrong.
            why = (
                f"value of {arg.name}: a flag the launcher passes through from its caller; drafted true "
                f'(1 in [shapes]): write value = "0" if the project calls it false'
            )
            checks.append(why)
            at = arg.lines.index(flag_line)
            lines_ = (*arg.lines[:at], f"# {TODO}: {why}", *arg.lines[at:])
            args[i] = Arg(arg.name, lines_, arg.todos, arg.shape, arg.elem_bytes)
    for name in used:
        points[name], origins[name] = ([1], "flag") if name in flags else shape_values(name, found, len(used))
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
        relations=relations(module, launcher) if launcher is not None else (),
    )

    lines = [
        f"# Drafted by `ktx init {given.name}` from {given}; check every line, then `ktx init --check`.",
        f"kernel = {toml_str(_qualified(module, fn))}",
        f"source = {toml_str(_relative(source_path, out_dir))}",
    ]
    if source_path != path:
        lines.append(f"# note: {fn.name} is defined in {source_path.name} and launched from {where}")
    if standin is not None:
        lines.append(
            f"# TODO: {fn.name} is launched nowhere in {path.name} or the .cu files beside it: "
            "template_args, scalar values, grid and block below are the project's launcher's to give"
        )
        todos.append(f"{fn.name} is launched nowhere ktx can see: give the launch")
    picked: str | None = None
    if fn.template_params:
        lines += [f"# note: {n}" for n in deduced.notes if "deduced" in n or "default" in n]
        missing = [t.name for t, v in zip(fn.template_params, deduced.values, strict=False) if v is None]
        choice = expansion_template_choice(module, site)
        if missing and choice is None:
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
        if choice is not None:
            # A dispatch macro's branches launch different instantiations: show them, guess none.
            why, positions = choice
            todos.append(why)
            lines.append(f"# {TODO}: {why}")
            values = [TODO if i in positions else v for i, v in enumerate(values)]
        # a condition on a launcher parameter (``if (ncols < 1024)``) picks as surely as one on
        # a shape variable: the parameter is one once the caller's values are written
        conditioned = set(used) | set(vars_) | ({q.name for q in launcher.params} if launcher else set())
        picked = branch_picked(module, site, fn.name, conditioned)
        if picked is not None and not missing and choice is None:
            # the first launch's arguments as the guess, under the TODO that lists the others
            why = f"template arguments of {fn.name} at {where}: {picked}; drafted: this launch's"
            todos.append(why)
            lines.append(f"# {TODO}: {why}")
        if deduced.guessed and values != [TODO]:
            why = (
                f"template arguments of {fn.name}: "
                + "; ".join(n for n in deduced.notes if n.split(" = ", 1)[0] in deduced.guessed)
                + ": write the instantiation to tune"
            )
            checks.append(why)
            lines.append(f"# {TODO}: {why}")
        lines.append("template_args = [" + ", ".join(toml_str(t) for t in values) + "]")
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
                guess = expansion_guess(module, site, n)
                why += f"; {guess}" if guess is not None else ""
                # the local of the one function the launch macro expands in, translated: drafted
                # under the TODO (another expansion, or a caller, may see another value)
                macro_local = expansion_value(module, site, n)
                expanded = expansion_scope(module, site) if macro_local is not None else None
                if macro_local is None or expanded is None:
                    todos.append(why)
                else:
                    why += f"; drafted {macro_local}: the local {n} of {expanded[0].name}"
                    why += f", where {site.macro} expands"
                    checks.append(why)
                lines += [f"# {TODO}: {why}", f"{n} = {toml_str(macro_local or TODO)}"]
            elif e is None:
                line = tr.derived_lines.get(n, site.span.line)
                why = (
                    f"{n}: the launcher's local (line {line}) is set in ways ktx does not follow; "
                    "write it as an expression of the shape variables"
                )
                todos.append(why)
                lines += [f"# {TODO}: {why}", f"{n} = {toml_str(TODO)}"]
            else:
                if n in external:
                    lines.append(f"# note: {n} is not a parameter: its value in the file's headers")
                if n in derived:
                    line = tr.derived_lines[n]
                    lines.append(f"# note: {n} is the launcher's local (line {line}), not a shape variable")
                lines.append(f"{n} = {toml_str(e)}")
    for arg in args:
        lines += ["", *arg.lines]
    lines += ["", "[shapes]"]
    if used:
        defaults = [n for n in used if origins[n] == "default"]
        if defaults:
            lines.append(f"# {', '.join(defaults)}: no value in the file's main(); default sizes")
        if callers_sizes:
            lines.append(
                f"# note: {', '.join(callers_sizes)}: the caller's values for the launcher's sizes "
                "(its locals, no value in the file's headers), taken as shape variables"
            )
        flagged = [n for n in used if origins[n] == "flag"]
        if flagged:
            why = 'shape values are positive: for false, set value = "0"'
            lines.append(f"# {', '.join(flagged)}: flags (bool), 1 = true ({why})")
        lines += [f"# note: {n}" for n in sizing.notes]
        # the points carry the flags' guess (1): as much a guess as the flags' value lines
        guessed = (
            f"shape points: the flags {', '.join(flagged)} are drafted true (1), a guess: give each "
            "the value the project calls the kernel with (or both, 0 and 1, in its points)"
            if flagged
            else None
        )
        guessed_sizes = [own_names.get(n, n) for n in own_sizes if own_names.get(n, n) in used]
        if guessed is None and guessed_sizes:
            guessed = (
                f"shape points: {', '.join(guessed_sizes)} drafted as sizes of their own (their launch "
                "values are not followed), each swept apart: pick points that meet the relations the "
                "caller keeps between them"
            )
        if guessed is None and len(callers_sizes) > 1:
            # the caller computes these from one tensor (``ne01``, ``nrows = ne01 * ne02``):
            # swept apart, a point may be one no caller makes
            guessed = (
                f"shape points: {', '.join(callers_sizes)} are the caller's values for the launcher's "
                "sizes, each swept apart: pick points that meet the relations the caller keeps between "
                "them (a row count that is a product of others, equal sizes)"
            )
        if guessed is not None and sizing.points != []:
            checks.append(guessed)
            lines.append(f"# {TODO}: {guessed}")
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
        if guessed is not None:
            lines.append(f"# {TODO}: the quick point: {guessed.split(': ', 1)[1]}")
        lines.append(f"quick = [{{ {quick} }}]")
    else:
        lines.append("default = [{}]")
    lines += ["", "[launch]"]
    # the launcher's sizeof(T) read for a type guessed from its instantiations: as much a guess
    guessed_written = {name for name, kernel_name in bound_types.items() if kernel_name in deduced.guessed}
    sized_parts = {which: sorted(set(names) & guessed_written) for which, names in launch.sized}

    def sized_why(which: str) -> str | None:
        names = sized_parts.get(which)
        if not names:
            return None
        return (
            f"{which}: the launcher's sizeof({', '.join(names)}) is read for the type guessed above "
            "(template_args): check it against the instantiation you write"
        )

    for which, dims in (("grid", launch.grid), ("block", launch.block)):
        again = redeclared(module, site, which) if picked is not None and dims is not None else None
        changed = reassigned(module, site, which) if dims is not None else ()
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
        elif changed:
            # ``dim3 block(min(n, 1024)); if (n % 32) block.x = 1024; block.x /= 2;``: the
            # declaration is only the start of the launch's value.
            drafted = ", ".join(dims)
            why = (
                f"{which} of the launch at {where}: [{drafted}] as declared, but the launcher changes "
                f"it before the launch (line {', '.join(map(str, changed))}): write the value it has there"
            )
            checks.append(why)
            lines += [f"# {TODO}: {why}", f"{which} = [" + ", ".join(toml_str(g) for g in dims) + "]"]
        else:
            why_sized = sized_why(which)
            if why_sized is not None:
                checks.append(why_sized)
                lines.append(f"# {TODO}: {why_sized}")
            lines.append(f"{which} = [" + ", ".join(toml_str(g) for g in dims) + "]")
    if launch.shared is None:
        why = (
            f"dynamic shared memory of the launch at {where}: ktx cannot translate "
            f"{launch.shared_text!r} (bytes, as an expression of the shape variables)"
        )
        todos.append(why)
        lines += [f"# {TODO}: {why}", f"shared = {toml_str(TODO)}"]
    elif launch.shared not in ("0", ""):
        why_sized = sized_why("shared")
        if why_sized is not None:
            checks.append(why_sized)
            lines.append(f"# {TODO}: {why_sized}")
        lines.append(f"shared = {toml_str(launch.shared)}")
    lines += [f"# note: {n}" for n in launch.notes]
    inc_flags, inc_todo = include_flags(path, Path(out_dir) if out_dir is not None else path.parent)
    def_flags, def_check = define_flags(path)
    inc_flags += def_flags
    lines += ["", "[compile]"]
    if inc_todo is not None:
        todos.append(inc_todo)
        lines.append(f"# {TODO}: {inc_todo}")
    if def_check is not None:
        checks.append(def_check)
        lines.append(f"# {TODO}: {def_check}")
    lines += [
        f"flags = [{', '.join(toml_str(f) for f in (*DRAFT_FLAGS, *inc_flags))}]",
        "",
        "[reference]",
        "# Candidates are checked against the original kernel. To check the original too, write",
        "# reference.py beside this file and use it instead:",
        "#   def " + fn.name + "(inputs, shape):  # arrays by name (float64), scalars, shape vars",
        "#       return {" + ", ".join(f'"{a.name}": ...' for a in args if _is_output(a)) + "}",
        '# python = "reference:' + fn.name + '"',
        'use = "original"',
    ]
    lines, more = second_look(lines, path, fn)
    lines, spread_todos = spread(lines)
    defaults_ = [n for n in used if origins[n] == "default"]
    lines, default_checks = _flag_default_sizes(lines, defaults_)
    spread_todos += default_checks
    return Draft(fn.name, "\n".join(lines) + "\n", (*todos, *more), (*checks, *spread_todos))


def _strided_by(k: KernelBody, name: str, strides: Sequence[str]) -> list[str]:
    """The ``strides`` that pointer ``name``'s accesses or moves name (``x += row * sr``)."""
    if not strides:
        return []
    texts = [str(r.index) for r in kernel_index(k.module, k.fn).accesses() if r.root == name]
    texts += [k.text(w) for w in assign.assigned(k.module, k.body).get(name, [])]
    said = set(re.findall(r"[A-Za-z_]\w*", " ".join(texts)))
    return [s for s in strides if s in said]


def _dense_values(
    k: KernelBody,
    params: Sequence[Param],
    module: Module,
    path: Path,
    targ: Mapping[str, str],
    env: Mapping[str, str],
    launch: LaunchDraft,
) -> dict[str, tuple[str, str]]:
    """Integer parameter -> (its dense-layout stride in the spec's variables, the index it was
    read from); a stride over a launch dimension the draft has no value for is left out."""
    ints = {
        q.name: q.base_type
        for q in params
        if not q.is_pointer and dtype_of(module, path, targ.get(q.base_type, q.base_type)) in _INT_DTYPES
    }
    dims = {f"gridDim.{a}": g for a, g in zip("xyz", launch.grid or (), strict=False)}
    dims |= {f"blockDim.{a}": b for a, b in zip("xyz", launch.block or (), strict=False)}
    out: dict[str, tuple[str, str]] = {}
    for name, found in dense_strides(k, ints).items():
        names = re.findall(r"[A-Za-z_]\w*(?:\.[xyz])?", found.value)
        # each parameter it names a drafted value (not a TODO), each launch dimension drafted
        drafted = all(n in env if n in ints else TODO not in dims.get(n, TODO) for n in names)
        if not drafted:
            continue
        value = in_spec_vars(found.value, env, dims)
        if value is not None:
            with contextlib.suppress(KtxError):
                out[name] = (canonical(value), found.index)
    return out


def _float_guess(name: str) -> str:
    """The value a draft shows for a float scalar it cannot derive: an epsilon's typical 1e-6,
    else 1.0, the neutral scale (ktx's guess, under a TODO: the project's value may differ)."""
    return "1e-6" if "eps" in name.lower() else "1.0"


def _launcher_names(
    module: Module,
    params: Sequence[Param],
    call_args: Sequence[ts.Node],
    bindings: Mapping[str, str],
    structs: Mapping[str, object],
    own_sizes: Mapping[str, str],
    launch_names: set[str],
) -> dict[str, str]:
    """Integer parameters the launch passes a launcher local to, as it is, whose value ktx does
    not follow: parameter -> the local's name, for those drafted as sizes of their own
    (``own_sizes``) and those whose local the drafted launch names (``dim3 grid(feature_size)``
    launching ``welford_kernel(..., feature_size, ...)`` into ``fs``). None where the name is
    another parameter's (it would merge two sizes)."""
    names = {q.name for q in params}
    out: dict[str, str] = {}
    for q, node in zip(params, call_args, strict=False):
        if q.is_pointer or q.name in bindings or q.name in structs or node.type != "identifier":
            continue
        text = syntax.text(module, node)
        if (
            text == q.name
            or text in names
            or text in _EXPR_WORDS
            or q.type.split()[-1] in ("float", "double")
        ):
            continue
        if q.name in own_sizes or text in launch_names:
            out[q.name] = text
    return out


def _flag_default_sizes(lines: list[str], defaults: Sequence[str]) -> tuple[list[str], list[str]]:
    """A TODO over the ``[shapes]`` points that no other TODO flags, where some of their sizes
    are ktx's defaults (no value in the file): the project runs its own sizes, and a point a
    person must change is a guess, like any other value the draft cannot derive."""
    if not defaults:
        return lines, []
    out: list[str] = []
    added: list[str] = []
    section = ""
    for line in lines:
        if line.startswith("["):
            section = line.strip()
        key = line.split("=", 1)[0].strip()
        flagged = bool(out) and out[-1].lstrip().startswith(f"# {TODO}")
        if section == "[shapes]" and key in ("default", "quick") and not flagged:
            what = "shape points" if key == "default" else "the quick point"
            why = (
                f"{what}: default sizes for {_listed(defaults)} (no value in the file): give the sizes "
                "the project runs, meeting the relations the caller keeps between them"
            )
            out.append(f"# {TODO}: {why}")
            added.append(why)
        out.append(line)
    return out, added


def _listed(names: Sequence[str], most: int = 4) -> str:
    more = len(names) - most
    return ", ".join(names[:most]) + (f" and {more} more" if more > 0 else "")


def _launch_type_names(
    fn: Function, site: LaunchSite, call_args: Sequence[ts.Node], launcher: Function | None, module: Module
) -> dict[str, str]:
    """The launcher's names for the kernel's type template parameters: a name written as the
    launch's template argument (``k<T><<<...>>>``), or the element type the launcher declares
    for a pointer the launch passes to a parameter of that type (``void go(T* x)`` ...
    ``k<<<...>>>(x)``): launcher name -> the kernel's parameter name."""
    out: dict[str, str] = {}
    kinds = {t.name for t in fn.template_params if t.kind == "type"}
    for given, t in zip(site.template_args, fn.template_params, strict=False):
        if t.name in kinds and re.fullmatch(r"[A-Za-z_]\w*", given.strip()):
            out.setdefault(given.strip(), t.name)
    for p, node in zip(fn.params, call_args, strict=False):
        if not p.is_pointer or p.base_type not in kinds or launcher is None or node.type != "identifier":
            continue
        given_param = launcher.param(syntax.text(module, node))
        if given_param is not None and given_param.is_pointer:
            out.setdefault(given_param.base_type, p.base_type)
    return out


def _own_sizes(
    k: KernelBody,
    params: Sequence[Param],
    bindings: Mapping[str, str],
    structs: Mapping[str, object],
    dtype: Callable[[Param], str | None],
    launch_names: set[str],
) -> dict[str, str]:
    """Integer scalars the launch passes in a way ktx does not follow but the kernel compares as
    a bound (``c < cols``: a subscript or an offset alone may be a stride's, ``i * nb01``, which
    the user writes from the sizes), or whose name the drafted grid or block
    already names as a shape variable (``dim3 grid(num_tokens)``): name -> why, for the drafter
    to make each a shape variable of its own name. One that is neither (a seed, a bit count)
    stays a TODO: default sizes would be silently wrong for it."""
    out: dict[str, str] = {}
    for p in params:
        if p.is_pointer or p.name in bindings or p.name in structs or dtype(p) not in _INT_DTYPES:
            continue
        use = size_use(k, p.name, bound=True)
        if use is not None:
            out[p.name] = "the kernel bounds an index by it: " + " ".join(k.text(use).split())[:60]
        elif p.name in launch_names:
            out[p.name] = "the drafted launch names a shape variable of that name"
    return out


_FLOAT = re.compile(r"[-+]?(?:\d+\.\d*|\.\d+|\d+)(?:[eE][-+]?\d+)?[fF]?")


def _float_text(text: str) -> str | None:
    """``0.f`` -> ``0.0``, ``1e-5f`` -> ``1e-5``: a C float literal as the spec writes it."""
    text = text.strip()
    if not _FLOAT.fullmatch(text) or not any(c in text for c in ".eE"):
        return None
    text = text.rstrip("fF")
    return text + "0" if text.endswith(".") else text


def _float_literal(module: Module, site: LaunchSite, node: ts.Node) -> str | None:
    """The value of a launch argument that is a float literal, or a launcher local initialised
    with one and never written again (FlashInfer's ``float weight_bias = 0.f``)."""
    text = syntax.text(module, node)
    if node.type == "number_literal":
        return _float_text(text)
    scope = launcher_node(module, site)
    if node.type != "identifier" or scope is None:
        return None
    local = syntax.local_declarations(module, scope, before=site.span.start).get(text)
    if local is None or local.value is None or local.value.type != "number_literal":
        return None
    if len(assign.assigned(module, scope).get(text, [])) > 1:
        return None  # set again after its declaration
    return _float_text(syntax.text(module, local.value))


def _param_default(module: Module, launcher: Function | None, name: str) -> str | None:
    """The float default of the launcher's parameter ``name`` (``float eps = 1e-5``), or None."""
    param = launcher.param(name) if launcher is not None else None
    if param is None:
        return None
    m = re.search(r"=\s*([^=,()]+)$", module.text(param.span).strip())
    return _float_text(m.group(1)) if m is not None else None


def _rows_of(extent: str) -> str:
    """``[(rows * cols)]``, one dimension that is a product of the launcher's sizes, as the 2-D
    array the launcher describes (``total = batch * hidden``): ``[rows, cols]``. The same count of
    elements; the spec's shape points then size each factor."""
    if not extent:
        return extent
    dims = extent_dims(extent)
    if len(dims) != 1:
        return extent
    factors = [f.strip() for f in dims[0].strip().removeprefix("(").removesuffix(")").split("*")]
    if len(factors) < 2 or not all(re.fullmatch(r"[A-Za-z_]\w*", f) for f in factors):
        return extent
    return "[" + ", ".join(factors) + "]"


def _scaled_last(extent: str, lanes: int) -> str:
    """``[rows, d // 2]`` with 2 lanes -> ``[rows, d]``; any other last dimension times lanes."""
    dims = extent_dims(extent)
    last = dims[-1]
    m = re.fullmatch(rf"\(?\s*(\w+)\s*//\s*{lanes}\s*\)?", last)
    dims[-1] = m.group(1) if m is not None else f"({last}) * {lanes}"
    return "[" + ", ".join(dims) + "]"


_INT_DTYPES = frozenset({"int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64"})


def _not_sizes(
    k: KernelBody,
    args: list[Arg],
    bindings: dict[str, str],
    todos: list[str],
    launch: LaunchDraft,
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
        line = f"value = {toml_str(value)}" if value is not None else ""
        if value is None or not re.fullmatch(r"[A-Za-z_]\w*", value) or line not in arg.lines:
            continue
        dtypes = [ln.split("=", 1)[1].strip().strip('"') for ln in arg.lines if ln.startswith("dtype =")]
        if not dtypes or dtypes[0] not in _INT_DTYPES:
            continue
        others = [*elsewhere, *(v for n, v in bindings.items() if n != arg.name)]
        if any(re.search(rf"\b{re.escape(value)}\b", t) for t in others):
            continue
        if size_use(k, arg.name) is not None or not mentions(k, arg.name):
            continue  # a size; or unused (DeepSpeed softmax's heads): any value, and a TODO'd
            # grid or extent may still need the name
        callee = passed_to(k, arg.name)
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


_EXPR_WORDS = frozenset({"min", "max", "ceil_div", "cdiv", "if", "else", "and", "or", "not"})


def _is_output(arg: Arg) -> bool:
    return any(line in ('role = "out"', 'role = "inout"') for line in arg.lines)


def _relative(path: Path, out_dir: str | Path | None) -> str:
    base = Path(out_dir) if out_dir is not None else path.parent
    return os.path.relpath(path.resolve(), base.resolve())


def _qualified(module: Module, fn: Function) -> str:
    """``vllm::rms_norm``: the kernel's name with its namespaces (an anonymous one adds
    nothing), as the spec's ``kernel`` and the compiler's name expression need it."""
    return "::".join([*(n for n in _namespace_path(module, fn) if n), fn.name])


def _index_use(body: str, name: str) -> str | None:
    """Where a kernel uses the values of integer array ``name`` as indices or offsets: inside
    another subscript (``table[idx[i]]``), or through a local read from it that is then a
    subscript, an offset or a factor (``pos = positions[t]; cache + pos * dim``). Data decide
    such indices, so random inputs would read out of bounds: the spec must give their range."""
    nested = re.search(rf"\w+\s*\[[^\[\]]*\b{re.escape(name)}\s*\[[^\]]*\]\s*\]", body)
    if nested is not None:
        return " ".join(nested.group(0).split())
    read = rf"\b(\w+)\s*=\s*(?:\([\w\s:]+\)\s*)?(?:__ldg\s*\(\s*&?\s*)?{re.escape(name)}\s*\["
    for m in re.finditer(read, body):
        local = re.escape(m.group(1))
        use = re.search(
            rf"\w+\s*\[[^\]]*\b{local}\b[^\]]*\]|\w+\s*\+\s*{local}\b|\b{local}\s*[*/%]\s*\w+",
            body[m.end() :],
        )
        if use is not None:
            return f"{m.group(1)} = {name}[...]; {' '.join(use.group(0).split())}"
    return None
