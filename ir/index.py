"""Build the IR index from a tree-sitter tree.

Each ``collect_*`` function turns the captures of one bundled query into IR records. They
tolerate ERROR subtrees: whatever tree-sitter recovered is indexed, and the ERROR nodes
themselves become diagnostics in :mod:`ktx.ir.module`.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

import tree_sitter as ts
from ktx.ir.consteval import const_eval
from ktx.ir.language import captures, macro_body_tree, parse_tree
from ktx.ir.launch import Host, OpaqueLaunch, opaque_launches, wrapper_sites
from ktx.ir.nodes import (
    Constant,
    Function,
    LaunchBounds,
    LaunchSite,
    Loop,
    LoopKind,
    Macro,
    Param,
    Pragma,
    SharedArray,
    TemplateParam,
)
from ktx.ir.source import LineIndex, Span
from ktx.ir.syntax import node_text as text
from ktx.ir.syntax import source_text

_QUALIFIER_TOKENS = {
    "__global__",
    "__device__",
    "__host__",
    "__forceinline__",
    "__noinline__",
    "inline",
    "static",
    "extern",
    "constexpr",
}
_LOOP_KINDS: dict[str, LoopKind] = {
    "for_statement": "for",
    "while_statement": "while",
    "do_statement": "do",
    "for_range_loop": "range-for",
}
_IDENTIFIER = re.compile(r"[A-Za-z_]\w*")
_FIELDLESS_WRAPPERS = {"parenthesized_declarator", "reference_declarator", "variadic_declarator"}
_NOT_DECLARATORS = {"comment", "type_qualifier", "attribute_declaration", "attribute_specifier"}
_DECLARATOR_WRAPPERS = {
    "pointer_declarator",
    "reference_declarator",
    "array_declarator",
    "init_declarator",
    "parenthesized_declarator",
    "function_declarator",
    "attributed_declarator",
    "variadic_declarator",
}


def ancestors(node: ts.Node) -> Iterator[ts.Node]:
    parent = node.parent
    while parent is not None:
        yield parent
        parent = parent.parent


def enclosing_function(node: ts.Node) -> ts.Node | None:
    return next((a for a in ancestors(node) if a.type == "function_definition"), None)


def inner_declarator(node: ts.Node) -> ts.Node | None:
    """The declarator one level in; ``(*f)``, ``&x`` and ``...xs`` hold it as a plain child."""
    inner = node.child_by_field_name("declarator")
    if inner is None and node.type in _FIELDLESS_WRAPPERS:
        inner = next((c for c in node.named_children if c.type not in _NOT_DECLARATORS), None)
    return inner


def declarator_name(node: ts.Node | None) -> str:
    """The identifier a (possibly nested) declarator declares (``(*fn)(int)`` declares ``fn``)."""
    while node is not None and node.type in _DECLARATOR_WRAPPERS:
        node = inner_declarator(node)
    if node is None:
        return ""
    if node.type in ("qualified_identifier", "template_function"):
        name = node.child_by_field_name("name")
        return declarator_name(name) if name is not None else text(node)
    return text(node)


def function_name(fn: ts.Node) -> str:
    return declarator_name(fn.child_by_field_name("declarator"))


def function_declarator(fn: ts.Node) -> ts.Node | None:
    node = fn.child_by_field_name("declarator")
    while node is not None and node.type != "function_declarator":
        node = node.child_by_field_name("declarator")
    return node


class Indexer:
    """Collects IR records from one parsed file."""

    def __init__(
        self,
        source: bytes,
        tree: ts.Tree,
        lines: LineIndex,
        attribute_macros: dict[str, tuple[str, ...]] | None = None,
        restrict_macros: frozenset[str] = frozenset(),
    ) -> None:
        self.source = source
        self.attribute_macros = attribute_macros or {}
        #: Macros that stand for ``__restrict__`` (masked before parsing, so the tree lacks them).
        self.restrict_macros = restrict_macros
        self.tree = tree
        self.lines = lines
        self.root = tree.root_node
        self.opaque_launches: tuple[OpaqueLaunch, ...] = ()
        self._functions: tuple[Function, ...] | None = None

    def span(self, node: ts.Node) -> Span:
        return self.lines.span(node.start_byte, node.end_byte)

    def text(self, node: ts.Node | None) -> str:
        """Original text of a node (the parser saw masked attribute macros as blanks)."""
        return "" if node is None else source_text(self.source, node)

    # -- functions ---------------------------------------------------------------------

    def functions(self) -> list[Function]:
        """The file's functions, in source order; built once (the launch sites ask too)."""
        if self._functions is None:
            nodes = captures("functions", self.root).get("function", [])
            result = [self._function(n) for n in sorted(nodes, key=lambda n: n.start_byte)]
            self._functions = tuple(f for f in result if f.name)
        return list(self._functions)

    def _function(self, fn: ts.Node) -> Function:
        qualifiers: list[str] = []
        launch_bounds: LaunchBounds | None = None
        return_type = ""
        for child in fn.children:
            if child.type in _QUALIFIER_TOKENS:
                qualifiers.append(child.type)
            elif child.type in ("storage_class_specifier", "type_qualifier"):
                qualifiers.append(self.text(child))
            elif child.type == "launch_bounds":
                launch_bounds = self._launch_bounds(child)
        type_node = fn.child_by_field_name("type")
        return_type = self.text(type_node)
        template = fn.parent if fn.parent is not None and fn.parent.type == "template_declaration" else None
        template_params = self._template_params(template) if template is not None else ()
        start_node = template if template is not None else fn
        if self.attribute_macros:
            # Qualifiers hidden behind attribute macros in the signature count as written.
            prev = start_node.prev_sibling
            head_start = prev.end_byte if prev is not None else 0
            head = self.source[head_start : (type_node or fn).start_byte].decode("utf-8", "replace")
            for word in head.split():
                qualifiers.extend(q for q in self.attribute_macros.get(word, ()) if q not in qualifiers)
        body = fn.child_by_field_name("body")
        declarator = function_declarator(fn)
        params = self._params(declarator) if declarator is not None else ()
        body_span = self.span(body) if body is not None else self.span(fn)
        return Function(
            name=function_name(fn),
            qualifiers=tuple(qualifiers),
            template_params=template_params,
            params=params,
            return_type=return_type,
            launch_bounds=launch_bounds,
            span=self.lines.span(start_node.start_byte, fn.end_byte),
            signature=self.lines.span(start_node.start_byte, body_span.start),
            body=body_span,
            has_error=fn.has_error,
        )

    def _launch_bounds(self, node: ts.Node) -> LaunchBounds:
        args = [c for c in node.named_children if c.type not in ("comment",)]
        return LaunchBounds(
            max_threads=self.text(args[0]) if args else "",
            min_blocks=self.text(args[1]) if len(args) > 1 else None,
            span=self.span(node),
            args=tuple(self.span(a) for a in args),
        )

    def _template_params(self, template: ts.Node) -> tuple[TemplateParam, ...]:
        plist = template.child_by_field_name("parameters")
        if plist is None:
            return ()
        result: list[TemplateParam] = []
        for p in plist.named_children:
            if p.type in (
                "type_parameter_declaration",
                "variadic_type_parameter_declaration",
                "optional_type_parameter_declaration",
            ):
                name, default_type = self._type_param_name(p)
                variadic = p.type.startswith("variadic")
                result.append(TemplateParam(name, "type", None, default_type, self.span(p), variadic))
            elif p.type in (
                "parameter_declaration",
                "optional_parameter_declaration",
                "variadic_parameter_declaration",
            ):
                decl = p.child_by_field_name("declarator")
                type_node = p.child_by_field_name("type")
                default = p.child_by_field_name("default_value")
                type_text = self.text(type_node)
                if decl is not None and decl.type not in ("identifier", "variadic_declarator"):
                    # ``float (*Act)(const float&)``: the type is the declaration minus its name.
                    name_start = self._name_start(decl)
                    name_end = name_start + len(declarator_name(decl).encode())
                    before = self.source[p.start_byte : name_start]
                    after = self.source[name_end : decl.end_byte]
                    type_text = (before + after).decode("utf-8", "replace").strip()
                variadic = p.type.startswith("variadic")
                result.append(
                    TemplateParam(
                        declarator_name(decl),
                        "value",
                        type_text,
                        self.text(default) or None,
                        self.span(p),
                        variadic,
                    )
                )
            elif p.type == "template_template_parameter_declaration":
                # ``template <typename, int> class Vec``: the name sits in a nested type parameter.
                inner = next(
                    (
                        c
                        for c in p.named_children
                        if c.type.endswith("type_parameter_declaration") and c.id != plist.id
                    ),
                    None,
                )
                name, default_type = self._type_param_name(inner) if inner is not None else ("", None)
                result.append(TemplateParam(name, "template", None, default_type, self.span(p)))
        return tuple(result)

    def _type_param_name(self, p: ts.Node) -> tuple[str, str | None]:
        """Name and default of ``typename T``, ``class T = float`` or ``typename... Ts``."""
        name_node = p.child_by_field_name("name") or next(
            (c for c in p.named_children if c.type == "type_identifier"), None
        )
        default = p.child_by_field_name("default_type")
        return self.text(name_node), self.text(default) or None

    def _params(self, declarator: ts.Node) -> tuple[Param, ...]:
        plist = declarator.child_by_field_name("parameters")
        if plist is None:
            return ()
        result: list[Param] = []
        for p in plist.named_children:
            if p.type not in (
                "parameter_declaration",
                "optional_parameter_declaration",
                "variadic_parameter_declaration",
            ):
                continue
            decl = p.child_by_field_name("declarator")
            name = declarator_name(decl)
            type_node = p.child_by_field_name("type")
            const = False
            restrict = False
            for child in p.children:
                if child.type == "type_qualifier":
                    const |= self.text(child) == "const"
                    restrict |= self.text(child) in ("__restrict__", "__restrict", "restrict")
            depth = 0
            node = decl
            while node is not None and node.type in _DECLARATOR_WRAPPERS:
                if node.type in ("pointer_declarator", "array_declarator"):
                    depth += 1
                for child in node.children:
                    if child.type == "type_qualifier" and self.text(child) in (
                        "__restrict__",
                        "__restrict",
                        "restrict",
                    ):
                        restrict = True
                    # `float* __restrict out`: tree-sitter reads MSVC's pointer modifier, which nvcc
                    # takes as __restrict__ (FasterTransformer writes it so)
                    if child.type == "ms_pointer_modifier" and self.text(child).strip() == "__restrict":
                        restrict = True
                node = inner_declarator(node)
            if decl is not None and name:
                name_start = self._name_start(decl)
                type_bytes = self.source[p.start_byte : name_start]
                if "(" in self.source[name_start : decl.end_byte].decode("utf-8", "replace"):
                    # ``float (*act)(float)``: the type continues after the name.
                    type_bytes += self.source[name_start + len(name.encode()) : decl.end_byte]
                type_text = type_bytes.decode("utf-8", "replace").strip()
            else:
                type_text = self.text(p)
            if self.restrict_macros and not restrict:
                restrict = any(w in self.restrict_macros for w in _IDENTIFIER.findall(self.text(p)))
            result.append(
                Param(
                    name=name,
                    type=type_text,
                    base_type=self.text(type_node),
                    pointer_depth=depth,
                    const=const,
                    restrict=restrict,
                    span=self.span(p),
                )
            )
        return tuple(result)

    def _name_start(self, decl: ts.Node) -> int:
        node: ts.Node | None = decl
        while node is not None and node.type in _DECLARATOR_WRAPPERS:
            node = inner_declarator(node)
        return node.start_byte if node is not None else decl.end_byte

    # -- loops -------------------------------------------------------------------------

    def loops(self) -> list[Loop]:
        nodes = sorted(captures("loops", self.root).get("loop", []), key=lambda n: n.start_byte)
        ids = {n.id: i for i, n in enumerate(nodes)}
        result: list[Loop] = []
        for i, node in enumerate(nodes):
            parent_id: int | None = None
            depth = 0
            for a in ancestors(node):
                if a.id in ids:
                    if parent_id is None:
                        parent_id = ids[a.id]
                    depth += 1
                if a.type in ("function_definition", "lambda_expression"):
                    break
            result.append(self._loop(i, node, parent_id, depth))
        return result

    def _loop(self, ident: int, node: ts.Node, parent: int | None, depth: int) -> Loop:
        kind = _LOOP_KINDS[node.type]
        fn = enclosing_function(node)
        init = node.child_by_field_name("initializer")
        cond = node.child_by_field_name("condition")
        step = node.child_by_field_name("update")
        body = node.child_by_field_name("body")
        var: str | None = None
        if kind == "for" and init is not None:
            if init.type == "declaration":
                decl = init.child_by_field_name("declarator")
                var = declarator_name(decl) or None
            elif init.type == "assignment_expression":
                var = self.text(init.child_by_field_name("left")) or None
        elif kind == "range-for":
            var = declarator_name(node.child_by_field_name("declarator")) or None
            init = node.child_by_field_name("right")
        elif kind == "for" and step is not None:
            var = self._var_from_step(step, cond)
        if (
            kind in ("while", "do")
            and cond is not None
            and cond.type
            in (
                "condition_clause",
                "parenthesized_expression",
            )
        ):
            inner = cond.named_children
            cond = inner[0] if len(inner) == 1 else cond
        return Loop(
            id=ident,
            kind=kind,
            function=function_name(fn) if fn is not None else None,
            span=self.span(node),
            body=self.span(body) if body is not None else self.span(node),
            var=var,
            init=self._init_span(init) if init is not None else None,
            cond=self.span(cond) if cond is not None else None,
            step=self.span(step) if step is not None else None,
            pragma=self._pragma_before(node),
            parent=parent,
            depth=depth,
        )

    def _init_span(self, init: ts.Node) -> Span:
        """The initializer without the ``;`` a declaration node includes (``int i = 0``)."""
        end = init.end_byte
        if init.type == "declaration" and self.source[end - 1 : end] == b";":
            end -= 1
            while end > init.start_byte and self.source[end - 1 : end] in (b" ", b"\t"):
                end -= 1
        return self.lines.span(init.start_byte, end)

    def _var_from_step(self, step: ts.Node, cond: ts.Node | None) -> str | None:
        """The induction variable of ``for (; j < k; ++j, --k)``: stepped, and tested first."""
        stepped: list[str] = []
        stack = [step]
        while stack:
            n = stack.pop(0)
            if n.type == "update_expression":
                target = n.child_by_field_name("argument")
            elif n.type == "assignment_expression":
                target = n.child_by_field_name("left")
            elif n.type in ("comma_expression", "parenthesized_expression"):
                stack.extend(n.named_children)
                continue
            else:
                continue
            if target is not None and target.type == "identifier":
                stepped.append(self.text(target))
        if cond is not None and cond.type == "binary_expression":
            left = cond.child_by_field_name("left")
            if left is not None and left.type == "identifier" and self.text(left) in stepped:
                return self.text(left)
        return stepped[0] if len(stepped) == 1 else None

    def _pragma_before(self, node: ts.Node) -> Pragma | None:
        prev = node.prev_sibling
        while prev is not None and prev.type == "comment":
            prev = prev.prev_sibling
        if prev is None or prev.type != "preproc_call":
            return None
        directive = prev.child_by_field_name("directive")
        if self.text(directive) != "#pragma":
            return None
        arg = prev.child_by_field_name("argument")
        # The directive node ends with its newline; the pragma proper ends with its argument.
        end = arg.end_byte if arg is not None else (directive.end_byte if directive else prev.end_byte)
        return Pragma(self.text(arg).strip(), self.lines.span(prev.start_byte, end))

    # -- launch sites ------------------------------------------------------------------

    def launch_sites(self) -> list[LaunchSite]:
        """``<<<...>>>`` launches, the same inside ``#define`` bodies, and runtime-API launches."""
        caps = captures("launches", self.root)
        result: list[LaunchSite] = []
        for node in caps.get("launch", []):
            fn = enclosing_function(node)
            site = self._chevron_site(node, fn, function_name(fn) if fn is not None else None, None)
            if site is not None:
                result.append(site)
        for node in caps.get("api_launch", []):
            site = self._api_site(node)
            if site is not None:
                result.append(site)
        result.extend(self._macro_sites())
        host = Host(self.source, self.span, self._kernel_ref, function_name)
        functions = self.functions()
        result.extend(wrapper_sites(self.root, functions, result, host))
        #: Kernels handed to launching helpers whose launch the call does not write.
        self.opaque_launches = opaque_launches(self.root, functions, result, host)
        return sorted(result, key=lambda s: s.span.start)

    def _kernel_ref(self, callee: ts.Node, fn: ts.Node | None) -> tuple[str, list[ts.Node]] | None:
        """The kernel a callee names and its template arguments, through aliases and scopes.

        ``k``, ``k<T, 4>``, ``ns::k<T>``, ``&k<T>``, ``(void*)k<T>``, or a local
        ``auto kernel = k<T>;`` used as ``kernel<<<...>>>``. ``None`` when the callee is not a
        plain name (text in an ERROR region, a function pointer expression).
        """
        for _ in range(8):
            if callee.type in ("cast_expression", "parenthesized_expression", "pointer_expression"):
                inner = callee.child_by_field_name("value") or callee.child_by_field_name("argument")
                if inner is None and callee.named_children:
                    inner = callee.named_children[-1]
                if inner is None:
                    return None
                callee = inner
            elif callee.type == "qualified_identifier":
                last = callee.child_by_field_name("name")
                if last is None:
                    return None
                callee = last
            elif callee.type == "identifier" and fn is not None:
                # ``auto kernel = k<T>; kernel<<<...>>>(...)``: launch through a local alias.
                alias = self._alias_target(fn, self.text(callee))
                if alias is None or alias.id == callee.id:
                    break
                callee, fn = alias, None
            else:
                break
        targs: list[ts.Node] = []
        name_node = callee
        if callee.type == "template_function":
            name_node = callee.child_by_field_name("name") or callee
            arg_list = callee.child_by_field_name("arguments")
            targs = [c for c in arg_list.named_children if c.type != "comment"] if arg_list else []
        name = declarator_name(name_node)
        if not _IDENTIFIER.fullmatch(name):
            return None
        return name, targs

    def _chevron_site(
        self, node: ts.Node, fn: ts.Node | None, host: str | None, macro: str | None
    ) -> LaunchSite | None:
        callee = node.child_by_field_name("function")
        config = next((c for c in node.named_children if c.type == "kernel_call_syntax"), None)
        args_node = node.child_by_field_name("arguments")
        if callee is None or config is None:
            return None
        ref = self._kernel_ref(callee, fn)
        parts = [c for c in config.named_children if c.type != "comment"]
        if ref is None or len(parts) < 2:
            return None
        kernel, targs = ref
        args = [c for c in args_node.named_children if c.type != "comment"] if args_node else []
        return LaunchSite(
            kernel=kernel,
            template_args=tuple(self.text(t) for t in targs),
            template_arg_spans=tuple(self.span(t) for t in targs),
            grid=self.span(parts[0]),
            block=self.span(parts[1]),
            shared=self.span(parts[2]) if len(parts) > 2 else None,
            stream=self.span(parts[3]) if len(parts) > 3 else None,
            args=tuple(self.text(a) for a in args),
            function=host,
            span=self.span(node),
            config=self.span(config),
            macro=macro,
        )

    def _api_site(self, node: ts.Node) -> LaunchSite | None:
        """``cudaLaunchKernel(k, grid, block, args, smem, stream)`` and ``cudaLaunchKernelEx``.

        For the ``Ex`` form the geometry lives in a ``cudaLaunchConfig_t``: its ``gridDim``,
        ``blockDim``, ``dynamicSmemBytes`` and ``stream`` are taken from the nearest earlier
        assignments (``config.gridDim = nblks;``) or designated initializers in the function.
        """
        api = self.text(node.child_by_field_name("function"))
        args_node = node.child_by_field_name("arguments")
        args = [c for c in args_node.named_children if c.type != "comment"] if args_node else []
        fn = enclosing_function(node)
        host = function_name(fn) if fn is not None else None
        if api == "cudaLaunchKernelEx":
            if len(args) < 2 or fn is None:
                return None
            ref = self._kernel_ref(args[1], fn)
            cfg = args[0]
            while cfg.type == "pointer_expression" and cfg.child_by_field_name("argument") is not None:
                cfg = cfg.child_by_field_name("argument") or cfg
            fields = self._config_fields(fn, self.text(cfg), node.start_byte)
            grid, block = fields.get("gridDim"), fields.get("blockDim")
            if ref is None or grid is None or block is None:
                return None
            shared, stream = fields.get("dynamicSmemBytes"), fields.get("stream")
            rest, config = args[2:], args[0]
        else:
            if len(args) < 3:
                return None
            ref = self._kernel_ref(args[0], fn)
            if ref is None:
                return None
            grid, block = args[1], args[2]
            shared = args[4] if len(args) > 4 else None
            stream = args[5] if len(args) > 5 else None
            rest, config = args[3:4], args_node or node
        kernel, targs = ref
        return LaunchSite(
            kernel=kernel,
            template_args=tuple(self.text(t) for t in targs),
            template_arg_spans=tuple(self.span(t) for t in targs),
            grid=self.span(grid),
            block=self.span(block),
            shared=self.span(shared) if shared is not None else None,
            stream=self.span(stream) if stream is not None else None,
            args=tuple(self.text(a) for a in rest),
            function=host,
            span=self.span(node),
            config=self.span(config),
            api=api,
        )

    def _config_fields(self, fn: ts.Node, name: str, before: int) -> dict[str, ts.Node]:
        """``{field: value node}`` for ``name.field = value`` / ``{.field = value}`` before ``before``."""
        found: dict[str, tuple[int, ts.Node]] = {}
        stack = [fn]
        while stack:
            n = stack.pop()
            stack.extend(n.children)
            if n.start_byte >= before:
                continue
            if n.type == "assignment_expression":
                left, right = n.child_by_field_name("left"), n.child_by_field_name("right")
                if left is None or right is None or left.type != "field_expression":
                    continue
                obj, field = left.child_by_field_name("argument"), left.child_by_field_name("field")
                if self.text(obj) == name and field is not None:
                    key = self.text(field)
                    if key not in found or found[key][0] < n.start_byte:
                        found[key] = (n.start_byte, right)
            elif n.type == "init_declarator" and declarator_name(n.child_by_field_name("declarator")) == name:
                value = n.child_by_field_name("value")
                for pair in value.named_children if value is not None else []:
                    if pair.type != "initializer_pair":
                        continue
                    designator = pair.child_by_field_name("designator")
                    pair_value = pair.child_by_field_name("value")
                    if designator is not None and pair_value is not None:
                        key = self.text(designator).lstrip(".")
                        found.setdefault(key, (n.start_byte, pair_value))
        return {k: v for k, (_, v) in found.items()}

    def _macro_sites(self) -> list[LaunchSite]:
        """Launches written inside ``#define`` bodies (``LAUNCH_KERNEL(T)`` dispatch macros).

        The body is opaque text to the main tree, so it is parsed again on its own, at the
        same byte offsets: a copy of the source that is blank except for the body, with the
        ``#define NAME(...)`` head overwritten by a function header. Every span therefore
        points into the original file, and ``LaunchSite.macro`` names the macro.
        """
        result: list[LaunchSite] = []
        for define in captures("macros", self.root).get("define", []):
            value = define.child_by_field_name("value")
            name = self.text(define.child_by_field_name("name"))
            if value is None or b"<<<" not in self.source[value.start_byte : value.end_byte]:
                continue
            tree = macro_body_tree(self.source, define.start_byte, value.start_byte, value.end_byte)
            if tree is None:
                continue
            fn = enclosing_function(define)
            host = function_name(fn) if fn is not None else None
            for node in captures("launches", tree.root_node).get("launch", []):
                if not value.start_byte <= node.start_byte < value.end_byte:
                    continue
                site = self._chevron_site(node, None, host, name)
                if site is not None:
                    result.append(site)
        return result

    def _alias_target(self, fn: ts.Node, name: str) -> ts.Node | None:
        stack = [fn]
        while stack:
            n = stack.pop()
            if n.type == "init_declarator":
                decl = n.child_by_field_name("declarator")
                value = n.child_by_field_name("value")
                if decl is not None and self.text(decl) == name and value is not None:
                    if value.type in ("template_function", "identifier", "qualified_identifier"):
                        return value
                    if value.type == "pointer_expression":  # auto k = &kernel<T>;
                        arg = value.child_by_field_name("argument")
                        return arg
                    if value.type == "conditional_expression":
                        # ``auto k = c ? &kernel<A, false> : &kernel<A, true>;`` (causal-conv1d):
                        # the first branch, as the draft takes a launcher's first launch
                        return value.child_by_field_name("consequence")
                    if value.type == "call_expression":
                        # ``fp_k kernel = pick_kernel(bpw);`` (exllamav2): what the picker returns
                        return self._returned_kernel(value)
            stack.extend(n.children)
        return None

    def _returned_kernel(self, call: ts.Node) -> ts.Node | None:
        """The first kernel reference a picker function in this file returns (``return
        rms_norm_kernel<bpw>;``), written in its body or in a function-like macro it invokes
        there (``#define kernel_instance(bpw) if (...) return rms_norm_kernel<bpw>``)."""
        callee = call.child_by_field_name("function")
        if callee is None or callee.type != "identifier":
            return None
        name = self.text(callee)
        body = next(
            (
                f.child_by_field_name("body")
                for f in self.root.children
                if f.type == "function_definition" and function_name(f) == name
            ),
            None,
        )
        if body is None:
            return None
        invoked: set[str] = set()
        stack = [body]
        while stack:
            n = stack.pop()
            if n.type == "return_statement" and n.named_children:
                got = _kernel_like(n.named_children[0])
                if got is not None:
                    return got
            if n.type == "call_expression":
                fn = n.child_by_field_name("function")
                if fn is not None and fn.type == "identifier":
                    invoked.add(self.text(fn))
            stack.extend(reversed(n.children))
        for define in captures("macros", self.root).get("define", []):
            value = define.child_by_field_name("value")
            params = define.child_by_field_name("parameters")
            named = define.child_by_field_name("name")
            if value is None or params is None or named is None or self.text(named) not in invoked:
                continue
            if b"return" not in self.source[value.start_byte : value.end_byte]:
                continue
            tree = macro_body_tree(self.source, define.start_byte, value.start_byte, value.end_byte)
            if tree is None:
                continue
            stack = [tree.root_node]
            while stack:
                n = stack.pop()
                if n.type == "return_statement" and n.named_children and value.start_byte <= n.start_byte:
                    got = _kernel_like(n.named_children[0])
                    if got is not None:
                        return got
                stack.extend(reversed(n.children))
        return None

    # -- constants -------------------------------------------------------------------

    def macros(self) -> list[Macro]:
        caps = captures("macros", self.root)
        result: list[Macro] = []
        # Integer macros seen so far: ``#define WARPS (BLOCK / 32)`` builds on ``BLOCK``.
        env: dict[str, int] = {}
        for node in sorted(caps.get("define", []), key=lambda n: n.start_byte):
            name = self.text(node.child_by_field_name("name"))
            value_node = node.child_by_field_name("value")
            params_node = node.child_by_field_name("parameters")
            params = (
                tuple(self.text(c) for c in params_node.named_children) if params_node is not None else None
            )
            raw = self.source[value_node.start_byte : value_node.end_byte] if value_node else b""
            code = blank_comments(raw)
            # The body as code: comments blanked, outer blanks and a dangling backslash trimmed.
            value = code.decode("utf-8", "replace").strip().rstrip("\\").strip()
            int_value = eval_int_text(value, env) if params is None else None
            if int_value is not None:
                env[name] = int_value
            result.append(
                Macro(
                    name=name,
                    value=value,
                    int_value=int_value,
                    params=params,
                    span=self.span(node),
                    value_span=self._value_span(value_node, code) if value_node is not None else None,
                )
            )
        return result

    def _value_span(self, node: ts.Node, code: bytes) -> Span | None:
        """The macro body without surrounding blanks, continuations and trailing comments.

        ``#define BLOCK 256  // threads`` has the value span ``256``: the bytes a pass
        replaces when it turns the constant into a knob, leaving the comment in place.
        """
        lead = len(code) - len(code.lstrip())
        trail = len(code) - len(code.rstrip(b" \t\r\n\\"))
        if lead >= len(code) - trail:
            return None
        return self.lines.span(node.start_byte + lead, node.end_byte - trail)

    def constants_and_shared(self, known: dict[str, int]) -> tuple[list[Constant], list[SharedArray]]:
        env = dict(known)
        constants: list[Constant] = []
        shared: list[SharedArray] = []
        nodes = sorted(captures("declarations", self.root).get("decl", []), key=lambda n: n.start_byte)
        for node in nodes:
            words = {
                self.text(c) for c in node.children if c.type in ("type_qualifier", "storage_class_specifier")
            }
            fn = enclosing_function(node)
            fn_name = function_name(fn) if fn is not None else None
            type_text = self.text(node.child_by_field_name("type"))
            if "__shared__" in words:
                for decl in node.children_by_field_name("declarator"):
                    dims: list[str] = []
                    d: ts.Node | None = decl
                    while d is not None and d.type in _DECLARATOR_WRAPPERS:
                        if d.type == "array_declarator":
                            size = d.child_by_field_name("size")
                            dims.insert(0, self.text(size))
                        d = inner_declarator(d)
                    shared.append(
                        SharedArray(
                            name=declarator_name(decl),
                            type=type_text,
                            dims=tuple(dims),
                            extern="extern" in words,
                            function=fn_name,
                            span=self.span(node),
                        )
                    )
                continue
            if "constexpr" not in words and "const" not in words:
                continue
            for decl in node.children_by_field_name("declarator"):
                if decl.type != "init_declarator":
                    continue
                value_node = decl.child_by_field_name("value")
                if value_node is None:
                    continue
                if value_node.type in ("initializer_list", "argument_list"):
                    inner = value_node.named_children
                    if len(inner) != 1:
                        continue
                    value_node = inner[0]
                value = const_eval(value_node, env)
                if value is None:
                    continue
                name = declarator_name(decl)
                env[name] = value
                constants.append(
                    Constant(
                        name=name,
                        type=type_text,
                        value=self.text(value_node),
                        int_value=value,
                        function=fn_name,
                        span=self.span(node),
                        value_span=self.span(value_node),
                    )
                )
        return constants, shared


def blank_comments(text: bytes) -> bytes:
    """``text`` with ``//`` and ``/* */`` comments replaced by spaces (strings are kept)."""
    out = bytearray(text)
    i, n = 0, len(text)
    while i < n:
        c = text[i : i + 1]
        if c in (b'"', b"'"):
            j = i + 1
            while j < n and text[j : j + 1] not in (c, b"\n"):
                j += 2 if text[j : j + 1] == b"\\" else 1
            i = j + 1
        elif text.startswith(b"//", i):
            j = text.find(b"\n", i)
            j = n if j < 0 else j
            out[i:j] = b" " * (j - i)
            i = j
        elif text.startswith(b"/*", i):
            j = text.find(b"*/", i + 2)
            j = n if j < 0 else j + 2
            out[i:j] = bytes(b if b in (0x0A, 0x0D) else 0x20 for b in text[i:j])
            i = j
        else:
            i += 1
    return bytes(out)


def eval_int_text(value: str, env: dict[str, int] | None = None) -> int | None:
    """Evaluate a macro body as a C integer constant expression (``(256)``, ``4 * 32``)."""
    if not value or len(value) > 200:
        return None
    tree = parse_tree(b"int __ktx_value = " + value.encode() + b";")
    if tree.root_node.has_error:
        return None
    decl = tree.root_node.named_children[0] if tree.root_node.named_children else None
    init = decl.child_by_field_name("declarator") if decl is not None else None
    node = init.child_by_field_name("value") if init is not None else None
    return const_eval(node, env or {}) if node is not None else None


def _kernel_like(node: ts.Node) -> ts.Node | None:
    """``k<A>``, ``&k<A>`` or ``ns::k<A>`` as a returned value: the template reference; None for
    anything else (``NULL``, a call)."""
    while node.type in ("pointer_expression", "parenthesized_expression") and node.named_children:
        node = node.child_by_field_name("argument") or node.named_children[-1]
    if node.type == "template_function":
        return node
    if node.type == "qualified_identifier" and "<" in (node.text or b"").decode("utf-8", "replace"):
        return node
    return None
