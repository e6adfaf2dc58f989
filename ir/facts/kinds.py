"""The one load/store classifier: what a subscript, ``*p`` or intrinsic address does to memory.

Every reader of memory in ktx (the kernel-wide, loop and per-thread readers that build
:class:`ktx.ir.memref.MemRef` records, ``ktx draft``) asks :func:`access_kind`, so that they
cannot disagree. Earlier, three copies did: ``__stcs(&p[i], v)`` was a store to
one and an escaping address to the others.

* ``p[i] = v``: ``store``; ``p[i] += v``, ``++p[i]``: ``update`` (read and written);
* ``__ldg(&p[i])`` and the other load intrinsics: ``load``; ``__stcs(&p[i], v)`` and the other
  store intrinsics: ``store`` (the address is what the intrinsic accesses, it does not escape);
* ``LDG(&p[i])`` where the file defines ``LDG(x)`` as a load intrinsic of ``x`` (or, in another
  ``#if`` branch, as ``*(x)``): ``load``, as the intrinsic it stands for;
* ``ldg(&p[i])`` where ``ldg`` is a ``__device__`` helper whose body is ``return __ldg(p);``, in the
  file or a header it includes (:mod:`ktx.ir.load_helpers`): ``load``, as ``__ldg``;
* any other ``&p[i]``: ``address`` (it may be used in any order: read and written);
* everything else: ``load``.

A store through an intrinsic is still a store a rewrite of the subscript alone cannot move
(``ktx_out[j]`` inside ``__stcs(&...)`` would drop the streaming hint): models that rewrite
subscripts ask :func:`intrinsic_of` and keep such a store in place.

>>> from ktx.ir import parse
>>> m = parse("__global__ void k(float* o, const float* x) { __stcs(&o[0], __ldg(&x[0])); o[1] += x[1]; }")
>>> from ktx.ir.syntax import walk
>>> [(n.text.decode(), access_kind(n), intrinsic_of(n))
...  for n in walk(m.tree.root_node) if n.type == "subscript_expression"]
[('o[0]', 'store', '__stcs'), ('x[0]', 'load', '__ldg'), ('o[1]', 'update', ''), ('x[1]', 'load', '')]
"""

from __future__ import annotations

import re
from typing import Literal

import tree_sitter as ts
from ktx.ir.load_helpers import is_load_helper

AccessKind = Literal["load", "store", "update", "address"]

#: Load intrinsics: ``__ldg(&p[i])`` reads ``p[i]``; the address is not an escape.
LOAD_INTRINSICS = frozenset({"__ldg", "__ldcs", "__ldcg", "__ldca", "__ldlu", "__ldcv"})
#: Store intrinsics: ``__stcs(&p[i], v)`` writes ``p[i]``.
STORE_INTRINSICS = frozenset({"__stcs", "__stcg", "__stwb", "__stwt"})


def access_kind(node: ts.Node) -> AccessKind:
    """What the access ``node`` (a subscript or ``*p``) does, from the expression around it."""
    parent, child = node.parent, node
    while parent is not None and parent.type == "parenthesized_expression":
        child, parent = parent, parent.parent
    if parent is None:
        return "load"
    # ``y[ib].qs[iqs] = q``, ``y[ib].ds = v``: a store into a field of the element is a store
    # to the element (ggml's block_q8_1 rows). Only a chain through a field (``.qs``) is
    # followed, on the side of its base: ``a[b[i]] = v`` still reads ``b``, and ``p[i][j] = v``
    # keeps reading the row pointer ``p[i]`` as before.
    if parent.type == "field_expression" and parent.child_by_field_name("argument") == child:
        while (parent.type == "field_expression" and parent.child_by_field_name("argument") == child) or (
            parent.type == "subscript_expression" and parent.child_by_field_name("argument") == child
        ):
            child, parent = parent, parent.parent
            while parent is not None and parent.type == "parenthesized_expression":
                child, parent = parent, parent.parent
            if parent is None:
                return "load"
    if parent.type == "assignment_expression" and parent.child_by_field_name("left") == child:
        op = parent.child_by_field_name("operator")
        return "store" if op is not None and op.type == "=" else "update"
    if parent.type == "update_expression":
        return "update"
    if parent.type == "pointer_expression":
        op = parent.child_by_field_name("operator")
        if op is not None and op.type == "&":
            return intrinsic_kind(parent) or "address"
    return "load"


def intrinsic_kind(address: ts.Node) -> Literal["load", "store"] | None:
    """``load``/``store`` when ``address`` (``&p[i]``, ``p + i``) is what an intrinsic accesses.

    ``__ldg(&p[i])`` reads ``p[i]`` and ``__stcs(&p[i], v)`` writes it: the address does not
    escape. None when ``address`` is anything else (then ``&p[i]`` may be used in any order).
    """
    name = _intrinsic_name(address)
    if name in LOAD_INTRINSICS:
        return "load"
    if name in STORE_INTRINSICS:
        return "store"
    return None


def intrinsic_of(node: ts.Node) -> str:
    """The intrinsic (``__ldg``, ``__stcs``...) whose address argument is ``&node``, else ''."""
    parent = node.parent
    while parent is not None and parent.type == "parenthesized_expression":
        parent = parent.parent
    if parent is None or parent.type != "pointer_expression":
        return ""
    op = parent.child_by_field_name("operator")
    if op is None or op.type != "&":
        return ""
    name = _intrinsic_name(parent)
    return name if name in LOAD_INTRINSICS or name in STORE_INTRINSICS else ""


def intrinsic_call(node: ts.Node) -> ts.Node | None:
    """The intrinsic call around ``&node`` (``__ldg(&p[i])``), or None."""
    if not intrinsic_of(node):
        return None
    call = node.parent
    while call is not None and call.type != "call_expression":
        call = call.parent
    return call


def _intrinsic_name(address: ts.Node) -> str:
    node = address
    while node.parent is not None and node.parent.type in ("parenthesized_expression", "cast_expression"):
        node = node.parent
    args = node.parent
    if args is None or args.type != "argument_list":
        return ""
    named = [c for c in args.named_children if c.type != "comment"]
    if not named or named[0].id != node.id:
        return ""
    call = args.parent
    fn = call.child_by_field_name("function") if call is not None else None
    name = (fn.text or b"").decode() if fn is not None else ""
    if name and name not in LOAD_INTRINSICS and name not in STORE_INTRINSICS and name.isidentifier():
        return _load_macro(name, node) or ("__ldg" if is_load_helper(name, node) else name)
    return name


def _load_macro(name: str, node: ts.Node) -> str:
    """The load intrinsic a function-like macro ``name`` of ``node``'s file stands for, else ''.

    ``#define LDG(x) __ldg(x)`` (with ``#define LDG(x) (*(x))`` for old architectures in the
    other ``#if`` branch) makes ``LDG(&p[i])`` a load of ``p[i]``, not an address that escapes:
    every definition must be one load intrinsic of the macro's one parameter, or a plain
    dereference of it, and at least one the intrinsic. Read from the file's top level and its
    preprocessor branches, where projects define such helpers.
    """
    root = node
    while root.parent is not None:
        root = root.parent
    found: set[str] = set()
    pending = list(root.children)
    while pending:
        n = pending.pop()
        if n.type in ("preproc_if", "preproc_ifdef", "preproc_else", "preproc_elif"):
            pending.extend(n.children)
            continue
        if n.type != "preproc_function_def":
            continue
        ident, params, value = (n.child_by_field_name(f) for f in ("name", "parameters", "value"))
        if ident is None or (ident.text or b"").decode() != name:
            continue
        names = [(c.text or b"").decode() for c in params.named_children] if params is not None else []
        body = "".join((value.text or b"").decode().split()) if value is not None else ""
        if len(names) != 1:
            return ""
        p = re.escape(names[0])
        call = re.fullmatch(rf"\(?(__ld\w+)\(\(?{p}\)?\)\)?", body)
        if call is not None and call.group(1) in LOAD_INTRINSICS:
            found.add(call.group(1))
        elif re.fullmatch(rf"\(?\*\(?{p}\)?\)?", body) is None:
            return ""
    return min(found) if len(found) == 1 else ""
