"""``cache-hints``: the cache policy of loads and stores becomes knobs, plain by default.

A kernel that streams a tensor once gains nothing from keeping it in L1 or L2, and a tensor
that no thread writes may go through the read-only path. The pass gives each such choice a
knob, per memory (a kernel parameter) or per helper that does the access:

* ``CACHE_LD_<PARAM>`` for loads from a parameter no write of the kernel can reach (``const``
  and ``__restrict__``): 0 plain, 1 ``__ldg`` (``ld.global.nc``), 2 ``__ldcs`` (streaming,
  evict first), 3 ``ld.global.nc.L1::no_allocate``;
* ``CACHE_ST_<PARAM>`` for stores to a parameter: 0 plain, 1 ``__stcs`` (streaming);
* ``CACHE_LD_<HELPER>`` / ``CACHE_ST_<HELPER>`` for a device function that does the access
  for the kernel (``Pack<T>::load``, which dereferences ``reinterpret_cast<const uint4*>(ptr)``),
  when every call in the file passes it read-only memory (for a load).

What is rewritten: scalar subscripts in the kernel (``x[i]`` -> ``ktx::ld<K>(&x[i])``,
``out[i] = v`` -> ``ktx::st<K>(&out[i], v)``), the packed accesses ``vectorize`` wrote
(``ktx::load<V>`` gains the hint), and dereferences inside helpers. The helpers live in the
``ktx`` prelude (see :mod:`ktx.passes._device`). Value 0 is the plain access, so the default
config does what the original does.

Loads and stores the original writes through ``__ldg``/``__ldcs``/``__stcs`` are accesses like
the others (the index analysis of :mod:`ktx.ir.affine` reads them as such): the call becomes
``ktx::ld<K>``/``ktx::st<K>`` and the knob's default is the original's policy (1 for
``__ldg``), so the default config is still the original. A memory whose accesses mix policies,
or use an intrinsic no knob value stands for (``__ldcg``, ``__stwt``), is refused with the line.

Loads from memory the kernel may write (an in-place tensor, a parameter without
``__restrict__`` while any global memory is written) are never given the read-only path:
``ld.global.nc`` on memory written during the kernel is undefined.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass

import tree_sitter as ts
from ktx.ir import Function, Module, syntax
from ktx.ir.access import element_size
from ktx.ir.facts.kinds import LOAD_INTRINSICS, STORE_INTRINSICS, access_kind, intrinsic_of
from ktx.ir.facts.writes import callee_name, param_types, pointer_root, read_only_problem
from ktx.ir.memref import Root
from ktx.passes._common import line_of
from ktx.passes._device import LOAD_HINTS, STORE_HINTS, PreludeSite, insert_prelude, prelude_site

from ktx.passbase import KnobSpec, Option, OptionValue, Pass, Phase, Refuse, Rewriter, Site, Skip, Target

_WIDTHS = (1, 2, 4, 8, 16)


@dataclass(frozen=True)
class HintSite(Site):
    """One knob: the loads (``load``) or stores (``store``) of one memory or one helper."""

    direction: str
    subject: str
    """The parameter (direct accesses) or the helper function (accesses inside it)."""
    helper: bool
    nodes: tuple[ts.Node, ...]
    original: int = 0
    """The policy the original accesses use (``__ldg`` is 1): the knob's default reproduces it."""


class CacheHints(Pass[HintSite | PreludeSite]):
    name = "cache-hints"
    phase = Phase.HINTS
    summary = (
        "knobs for the cache policy of read-only loads (__ldg, ld.global.nc) and streaming stores (__stcs)"
    )
    description = __doc__ or ""
    knobs = (
        KnobSpec(
            "CACHE_LD_<param>",
            "0, 1, 2, 3",
            "0 (plain load)",
            "loads of read-only memory: 0 plain, 1 __ldg, 2 __ldcs, 3 ld.global.nc.L1::no_allocate",
        ),
        KnobSpec("CACHE_ST_<param>", "0, 1", "0 (plain store)", "stores: 0 plain, 1 __stcs (streaming)"),
    )
    options = (
        Option("loads", "bool", True, "expose load policies"),
        Option("stores", "bool", True, "expose store policies"),
        Option("helpers", "bool", True, "also hint accesses inside device functions the kernel calls"),
    )
    after = (
        "expose",
        "block-size",
        "unroll",
        "coarsen",
        "split",
        "tile",
        "hoist",
        "vectorize",
        "warp-reduce",
        "rows-per-block",
    )

    def __init__(self, **options: OptionValue) -> None:
        super().__init__(**options)
        self._rewritten: list[str] = []

    def sites(self, target: Target) -> Iterator[HintSite | PreludeSite | Skip]:
        self._rewritten = []
        module, fn = target.module, target.kernel
        facts = module.facts(fn, target.template_args)
        known = facts.roots
        body = module.node(fn.body)
        written = facts.written_roots
        loads: dict[str, list[ts.Node]] = {}
        stores: dict[str, list[ts.Node]] = {}
        odd: dict[str, str] = {}
        for n in syntax.walk(body):
            if n.type == "subscript_expression":
                _direct(module, fn, target, n, known, loads, stores)
            elif n.type == "call_expression":
                _packed(module, n, known, loads, stores)
                _intrinsic(module, fn, target, n, known, loads, stores, odd)
        for name, line in _volatile_roots(module, fn, known).items():
            for direction in ("load", "store"):
                odd.setdefault(
                    f"{name}:{direction}",
                    f"{direction}s of {name} go through a volatile pointer (line {line}): a cache "
                    "policy would drop volatile (every access must reach memory as written)",
                )
        refused: set[str] = set()
        for key, why in sorted(odd.items()):
            refused.add(key)
            yield Skip(why, key, fn.span)
        originals: dict[str, int] = {}
        for direction, found in (("load", loads), ("store", stores)):
            for name, nodes in sorted(found.items()):
                hints = {_original_hint(module, n) for n in nodes}
                key = f"{name}:{direction}"
                if len(hints) > 1 and key not in refused:
                    refused.add(key)
                    seen = [f"{_intrinsic_name(module, n) or 'plain'} at line {line_of(n)}" for n in nodes]
                    yield Skip(
                        f"{direction}s of {name} mix cache policies ({', '.join(seen)}): no one knob "
                        "value reproduces the original",
                        key,
                        fn.span,
                    )
                originals[key] = min(hints) if hints else 0
        for name in sorted(loads):
            root = known.get(name)
            if root is None:
                continue
            why = read_only_problem(root, written, known)
            if why and f"{name}:load" not in refused:
                refused.add(f"{name}:load")
                yield Skip(f"loads of {name}: {why}", f"{name}:load", fn.span)
        if self.option("loads"):
            for name, nodes in loads.items():
                key = f"{name}:load"
                if key not in refused:
                    yield HintSite(key, fn.span, "load", name, False, tuple(nodes), originals.get(key, 0))
        if self.option("stores"):
            for name, nodes in stores.items():
                key = f"{name}:store"
                if key not in refused:
                    yield HintSite(key, fn.span, "store", name, False, tuple(nodes), originals.get(key, 0))
        if self.option("helpers"):
            yield from _helpers(
                module, fn, known, written, bool(self.option("loads")), bool(self.option("stores"))
            )
        if not loads and not stores:
            yield Skip("no global load or store the pass can hint in the kernel body", fn.name, fn.span)
        if self._rewritten:
            site = prelude_site(target)
            if site is not None:
                yield site

    def rewrite(self, site: HintSite | PreludeSite, rw: Rewriter) -> None:
        if isinstance(site, PreludeSite):
            insert_prelude(site, rw)
            return
        module = rw.target.module
        stem = _knob_stem(site.subject)
        if site.direction == "load":
            name = f"CACHE_LD_{stem}"
            macro = rw.knob(
                name,
                sorted(LOAD_HINTS),
                site.original,
                f"cache policy of loads {_of(site)}: 0 plain, 1 __ldg, 2 __ldcs, 3 nc no-L1",
            )
        else:
            name = f"CACHE_ST_{stem}"
            macro = rw.knob(
                name,
                sorted(STORE_HINTS),
                site.original,
                f"cache policy of stores {_of(site)}: 0 plain, 1 __stcs",
            )
        if site.original:
            rw.note(f"default {site.original}: the original's {_HINT_NAMES[site.direction][site.original]}")
        for node in site.nodes:
            if site.helper:
                _rewrite_deref(module, rw, node, site.direction, macro)
            elif node.type == "call_expression" and _intrinsic_name(module, node):
                callee = node.child_by_field_name("function")
                assert callee is not None
                helper = "ktx::ld" if site.direction == "load" else "ktx::st"
                rw.replace_bytes(callee.start_byte, callee.end_byte, f"{helper}<{macro}>")
            elif node.type == "call_expression":
                _rewrite_packed(module, rw, node, macro)
            elif site.direction == "load":
                rw.insert(node.start_byte, f"ktx::ld<{macro}>(&")
                rw.insert(node.end_byte, ")")
            else:
                _rewrite_store(module, rw, node, macro)
        rw.note(f"{len(site.nodes)} access(es)")
        self._rewritten.append(site.label)


def _of(site: HintSite) -> str:
    return (
        f"in {site.subject}()"
        if site.helper
        else f"{'from' if site.direction == 'load' else 'to'} {site.subject}"
    )


def _knob_stem(subject: str) -> str:
    """``Pack::load`` -> ``PACK_LOAD``, ``prefix_lse`` -> ``PREFIX_LSE``."""
    return re.sub(r"_+", "_", "".join(ch if ch.isalnum() else "_" for ch in subject)).upper().strip("_")


# -- legality ------------------------------------------------------------------------------------


# -- finding accesses ----------------------------------------------------------------------------


def _direct(
    module: Module,
    fn: Function,
    target: Target,
    sub: ts.Node,
    known: dict[str, Root],
    loads: dict[str, list[ts.Node]],
    stores: dict[str, list[ts.Node]],
) -> None:
    base = sub.child_by_field_name("argument")
    if base is None or base.type != "identifier":
        return
    root = known.get(syntax.text(module, base))
    if root is None or root.space != "global" or not root.name:
        return
    size = element_size(module, root.element_type, fn, target.template_args)
    if size not in _WIDTHS:
        return
    # ``(p[i]) = v``, ``&(p[i])``: the parentheses do not change what the subscript is used for.
    use, parent = sub, sub.parent
    while parent is not None and parent.type == "parenthesized_expression":
        use, parent = parent, parent.parent
    if parent is None:
        return
    if parent.type == "assignment_expression" and parent.child_by_field_name("left") == use:
        op = parent.child_by_field_name("operator")
        outer = parent.parent
        if op is not None and op.type == "=" and outer is not None and outer.type == "expression_statement":
            stores.setdefault(root.name, []).append(parent)
        return
    # the one classifier: ``&(p[i])`` is an address (wrapping it in a load would not build), an
    # intrinsic's argument is handled with the intrinsic, ``(p[i]) = v`` is no plain load
    if access_kind(sub) != "load" or intrinsic_of(sub) or _inside_call_of(module, sub, "ld"):
        return
    if _binds_reference(module, use, parent):
        return
    loads.setdefault(root.name, []).append(sub)


def _binds_reference(module: Module, use: ts.Node, parent: ts.Node) -> bool:
    """Whether ``use`` (an element) is bound to a non-const reference, so it must stay an lvalue.

    ``float& r = p[i];`` and ``helper(p[i])`` where the file's ``helper`` takes ``float&``:
    ``ktx::ld(&p[i])`` is a value, and binding it would not compile (nor write through).
    """
    if parent.type == "init_declarator" and parent.child_by_field_name("value") == use:
        declarator = parent.child_by_field_name("declarator")
        return declarator is not None and declarator.type == "reference_declarator"
    call = parent.parent
    if parent.type == "argument_list" and call is not None and call.type == "call_expression":
        callee = call.child_by_field_name("function")
        if callee is None:
            return False
        index = [c.id for c in parent.named_children if c.type != "comment"].index(use.id)
        for types in param_types(module).get(callee_name(module, callee), []):
            if index < len(types) and _mutable_reference(types[index]):
                return True
    return False


def _mutable_reference(type_text: str) -> bool:
    """``float&`` (not ``const float&``, nor ``float&&``, nor a pointer)."""
    head, amp, _ = type_text.partition("&")
    return bool(amp) and "&&" not in type_text and "*" not in head and "const" not in head.split()


def _volatile_roots(module: Module, fn: Function, known: dict[str, Root]) -> dict[str, int]:
    """Roots reached through a ``volatile`` pointer (parameter or local), with the line that says so."""
    found: dict[str, int] = {}
    for p in fn.params:
        if re.search(r"\bvolatile\b", p.type) and p.name in known and known[p.name].name:
            found.setdefault(known[p.name].name, p.span.line)
    for node in syntax.walk(module.node(fn.body)):
        if node.type != "declaration" or not re.search(r"\bvolatile\b", syntax.text(module, node)):
            continue
        for decl in node.children_by_field_name("declarator"):
            named = decl.child_by_field_name("declarator") if decl.type == "init_declarator" else decl
            for ident in syntax.identifiers(named) if named is not None else []:
                root = known.get(syntax.text(module, ident))
                if root is not None and root.name:
                    found.setdefault(root.name, line_of(node))
    return found


#: Intrinsics the knobs can reproduce, with the knob value that does.
_LOAD_INTRINSIC = {"__ldg": 1, "__ldcs": 2}
_STORE_INTRINSIC = {"__stcs": 1}
_HINT_NAMES = {"load": {1: "__ldg", 2: "__ldcs", 3: "nc no-L1"}, "store": {1: "__stcs"}}


def _intrinsic_name(module: Module, call: ts.Node) -> str:
    """``__ldg``, ``__stcs``... when ``call`` is a load or store intrinsic, else ''."""
    callee = call.child_by_field_name("function")
    name = syntax.text(module, callee).strip() if callee is not None else ""
    return name if name in LOAD_INTRINSICS or name in STORE_INTRINSICS else ""


def _original_hint(module: Module, node: ts.Node) -> int:
    name = _intrinsic_name(module, node) if node.type == "call_expression" else ""
    return _LOAD_INTRINSIC.get(name, _STORE_INTRINSIC.get(name, 0))


def _intrinsic(
    module: Module,
    fn: Function,
    target: Target,
    call: ts.Node,
    known: dict[str, Root],
    loads: dict[str, list[ts.Node]],
    stores: dict[str, list[ts.Node]],
    odd: dict[str, str],
) -> None:
    """``__ldg(&p[i])``, ``__ldcs(p + i)``, ``__stcs(&p[i], v)``: accesses of ``p`` as written."""
    name = _intrinsic_name(module, call)
    if not name:
        return
    args = call.child_by_field_name("arguments")
    named = [a for a in args.named_children if a.type != "comment"] if args is not None else []
    if not named:
        return
    root = pointer_root(module, named[0], known)
    if root is None or root.space != "global":
        return
    direction = "load" if name in LOAD_INTRINSICS else "store"
    known_hints = _LOAD_INTRINSIC if direction == "load" else _STORE_INTRINSIC
    if name not in known_hints:
        odd[f"{root.name}:{direction}"] = (
            f"{direction}s of {root.name} use {name} (line {call.start_point[0] + 1}), which no "
            "knob value reproduces"
        )
        return
    size = element_size(module, root.element_type, fn, target.template_args)
    if size not in _WIDTHS:
        return
    (loads if direction == "load" else stores).setdefault(root.name, []).append(call)


def _inside_call_of(module: Module, node: ts.Node, name: str) -> bool:
    p = node.parent
    while p is not None and p.type in ("pointer_expression", "argument_list"):
        if p.type == "argument_list" and p.parent is not None and p.parent.type == "call_expression":
            callee = p.parent.child_by_field_name("function")
            return callee is not None and name in syntax.text(module, callee)
        p = p.parent
    return False


def _packed(
    module: Module,
    call: ts.Node,
    known: dict[str, Root],
    loads: dict[str, list[ts.Node]],
    stores: dict[str, list[ts.Node]],
) -> None:
    callee = call.child_by_field_name("function")
    args = call.child_by_field_name("arguments")
    if callee is None or args is None:
        return
    text = syntax.text(module, callee)
    if not (text.startswith("ktx::load<") or text == "ktx::store"):
        return
    named = [a for a in args.named_children if a.type != "comment"]
    if not named:
        return
    idents = [
        known[syntax.text(module, i)] for i in syntax.identifiers(named[0]) if syntax.text(module, i) in known
    ]
    if len(idents) != 1 or idents[0].space != "global" or not idents[0].name:
        return
    if text == "ktx::store":
        stores.setdefault(idents[0].name, []).append(call)
    elif text.count(",") == 0:
        loads.setdefault(idents[0].name, []).append(call)


def _helpers(
    module: Module,
    fn: Function,
    known: dict[str, Root],
    written: frozenset[str],
    do_loads: bool,
    do_stores: bool,
) -> Iterator[HintSite | Skip]:
    """Device functions called from the kernel that dereference one of their pointer parameters."""
    body = module.node(fn.body)
    called: dict[str, list[ts.Node]] = {}
    for call in syntax.calls(module, body):
        callee = call.child_by_field_name("function")
        if callee is not None:
            called.setdefault(callee_name(module, callee), []).append(call)
    for helper in module.functions:
        if not helper.is_device or helper.name not in called:
            continue
        pointer_params = {i: p for i, p in enumerate(helper.params) if p.pointer_depth == 1}
        if not pointer_params:
            continue
        loads: list[ts.Node] = []
        stores: list[ts.Node] = []
        for n in syntax.walk(module.node(helper.body)):
            if n.type != "pointer_expression":
                continue
            op = n.child_by_field_name("operator")
            arg = n.child_by_field_name("argument")
            if op is None or op.type != "*" or arg is None:
                continue
            names = syntax.names_in(module, arg)
            if not any(p.name in names for p in pointer_params.values()):
                continue
            parent = n.parent
            if (
                parent is not None
                and parent.type == "assignment_expression"
                and parent.child_by_field_name("left") == n
            ):
                aop = parent.child_by_field_name("operator")
                outer = parent.parent
                if (
                    aop is not None
                    and aop.type == "="
                    and outer is not None
                    and outer.type == "expression_statement"
                ):
                    stores.append(parent)
                continue
            loads.append(n)
        label = _helper_label(module, helper)
        if loads and do_loads:
            problem = ""
            for call in called[helper.name]:
                args = call.child_by_field_name("arguments")
                named = [a for a in args.named_children if a.type != "comment"] if args is not None else []
                for i in pointer_params:
                    if i >= len(named):
                        continue
                    rts = [
                        known[x] for x in syntax.names_in(module, named[i]) if x in known and known[x].name
                    ]
                    for r in rts:
                        why = read_only_problem(r, written, known)
                        if why:
                            problem = f"{label}() reads {r.name} ({why})"
                    if not rts:
                        what = syntax.text(module, named[i])
                        problem = f"{label}() is called with memory ktx cannot name (`{what}`)"
            if problem:
                yield Skip(f"loads in {problem}", f"{label}:load", helper.span)
            else:
                yield HintSite(f"{label}:load", helper.span, "load", label, True, tuple(loads))
        if stores and do_stores:
            yield HintSite(f"{label}:store", helper.span, "store", label, True, tuple(stores))


def _helper_label(module: Module, helper: Function) -> str:
    node: ts.Node | None = module.node(helper.body)
    while node is not None:
        if node.type in ("struct_specifier", "class_specifier"):
            name = node.child_by_field_name("name")
            if name is not None:
                return f"{syntax.text(module, name)}::{helper.name}"
        node = node.parent
    return helper.name


# -- rewriting -----------------------------------------------------------------------------------


def _rewrite_store(module: Module, rw: Rewriter, assign: ts.Node, macro: str) -> None:
    left = assign.child_by_field_name("left")
    right = assign.child_by_field_name("right")
    if left is None or right is None:
        raise Refuse("a store without both sides")
    rw.insert(left.start_byte, f"ktx::st<{macro}>(&")
    rw.replace_bytes(left.end_byte, right.start_byte, ", ")
    rw.insert(right.end_byte, ")")
    del module


def _rewrite_packed(module: Module, rw: Rewriter, call: ts.Node, macro: str) -> None:
    callee = call.child_by_field_name("function")
    assert callee is not None
    text = syntax.text(module, callee)
    if text == "ktx::store":
        rw.insert(callee.end_byte, f"<{macro}>")
        return
    close = module.source.rfind(b">", callee.start_byte, callee.end_byte)
    if close < 0:
        raise Refuse(f"cannot find the template arguments of {text}")
    rw.insert(close, f", {macro}")


def _rewrite_deref(module: Module, rw: Rewriter, node: ts.Node, direction: str, macro: str) -> None:
    if direction == "load":
        op = node.child_by_field_name("operator")
        assert op is not None
        rw.replace_bytes(op.start_byte, op.end_byte, f"ktx::load_word<{macro}>(")
        rw.insert(node.end_byte, ")")
        return
    left = node.child_by_field_name("left")
    right = node.child_by_field_name("right")
    if left is None or right is None:
        raise Refuse("a store without both sides")
    op = left.child_by_field_name("operator")
    if op is None:
        raise Refuse("a store that is not through *pointer")
    rw.replace_bytes(op.start_byte, op.end_byte, f"ktx::store_word<{macro}>(")
    rw.replace_bytes(left.end_byte, right.start_byte, ", ")
    rw.insert(right.end_byte, ")")
    del module
