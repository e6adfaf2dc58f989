"""What a kernel does with the fields of a struct it takes by value: which it compares as bounds.

A parameter struct (ggml's ``soft_max_params p``, causal-conv1d's ``ConvParamsBase params``) is
filled by host code ktx often cannot read (a torch tensor's ``size()``, another file). Its
integer fields that the kernel compares as a bound (``col < p.ncols``, ``if (channel_id >=
params.dim) return;``) are sizes, as a scalar parameter compared so is
(:func:`ktx.ir.facts.params.size_use`): a draft can make each a shape variable of the field's
own name, a guess the person finishing it checks, instead of a placeholder with no guess. A
field only offset or multiplied with (``i * params.x_batch_stride``) may be a stride, a
function of the sizes: not taken here.
"""

from __future__ import annotations

import tree_sitter as ts
from ktx.ir import syntax
from ktx.ir.facts.params import KernelBody

_RELATIONAL = frozenset({"<", "<=", ">", ">="})


def _field_of(k: KernelBody, node: ts.Node, param: str) -> str | None:
    """``f`` where ``node`` is ``param.f`` (``param->f`` does not apply: a struct by value)."""
    if node.type != "field_expression":
        return None
    arg, fld = node.child_by_field_name("argument"), node.child_by_field_name("field")
    if arg is None or fld is None or arg.type != "identifier" or syntax.text(k.module, arg) != param:
        return None
    return syntax.text(k.module, fld)


def _alias_of(k: KernelBody, value: ts.Node, param: str) -> str | None:
    """The field a local's initialiser is, as it is: ``p.n``, ``(int) p.n``, or one side of a
    choice (``ncols_template == 0 ? p.ncols : ncols_template``, ggml's softmax)."""
    while value.type in ("parenthesized_expression", "cast_expression"):
        inner = value.child_by_field_name("value") or (
            value.named_children[-1] if value.named_child_count else None
        )
        if inner is None:
            return None
        value = inner
    if value.type == "conditional_expression":
        sides = [value.child_by_field_name(s) for s in ("consequence", "alternative")]
        found = [f for f in (_alias_of(k, s, param) for s in sides if s is not None) if f is not None]
        return found[0] if len(found) == 1 else None
    return _field_of(k, value, param)


def _mentions(k: KernelBody, node: ts.Node, param: str, aliases: dict[str, str]) -> list[str]:
    """The fields of ``param`` that ``node`` reads, directly or through a local set from one."""
    out: list[str] = []
    for n in syntax.walk(node):
        f = _field_of(k, n, param)
        if f is not None:
            out.append(f)
        elif n.type == "identifier" and syntax.text(k.module, n) in aliases:
            out.append(aliases[syntax.text(k.module, n)])
    return out


def bounded_fields(k: KernelBody, param: str) -> dict[str, str]:
    """The fields of the by-value struct parameter ``param`` that the kernel compares as a
    bound (an order comparison, not ``==``), each with the comparison's text; also through a
    local initialised with the field alone (``const int n = p.ncols; ... i < n``)."""
    aliases: dict[str, str] = {}
    for n in syntax.walk(k.body):
        if n.type != "init_declarator":
            continue
        ident, value = syntax.declarator_identifier(n), n.child_by_field_name("value")
        f = _alias_of(k, value, param) if value is not None else None
        if ident is not None and f is not None:
            aliases[syntax.text(k.module, ident)] = f
    out: dict[str, str] = {}
    for n in syntax.walk(k.body):
        if n.type != "binary_expression":
            continue
        op = n.child_by_field_name("operator")
        if op is None or op.type not in _RELATIONAL:
            continue
        for f in _mentions(k, n, param, aliases):
            out.setdefault(f, k.text(n))
    return out
