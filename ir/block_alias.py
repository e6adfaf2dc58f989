"""Names that *are* ``blockDim``: a macro, ``constexpr`` or template parameter every launch
passes as its block size, and template parameters every launch fixes to one integer.

Read from the file's launches (:meth:`ktx.ir.module.Module.launches_of`) so that the affine
reader (:mod:`ktx.ir.kernel_index`) sees ``BLOCK`` in ``blockIdx.x * BLOCK + threadIdx.x`` as
``blockDim.x``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

import tree_sitter as ts
from ktx.ir.affine_tree import declared as _declared
from ktx.ir.index import eval_int_text
from ktx.ir.index_facts import BlockAlias
from ktx.ir.launch import dim3_field_assignments
from ktx.ir.nodes import Function
from ktx.ir.syntax import text as _text
from ktx.ir.syntax import walk as _walk

if TYPE_CHECKING:
    from ktx.ir.module import Module  # a type only: Module.facts() imports the facts


def block_aliases(module: Module, fn: Function, env: Mapping[str, int]) -> dict[str, BlockAlias]:
    """Names that every launch of ``fn`` passes as its block size (they *are* ``blockDim``).

    A launch ``k<<<grid, BLOCK>>>`` (or ``dim3 block(BLOCK)``; ``k<BS><<<grid, BS>>>`` for a
    template parameter) makes ``BLOCK`` the block's x size; when every launch in the file
    agrees, the kernel's ``BLOCK`` means ``blockDim.x``.
    """
    launches = module.launches_of(fn.name)
    if not launches:
        return {}
    constexprs = {c.name for c in module.constants}
    names: set[str] | None = None
    tparams: set[str] | None = None
    values: set[int | None] = set()
    for site in launches:
        block = " ".join(module.text(site.block).split())
        word = _block_word(module, site.function, block, site.span.start)
        if word is None:
            return {}
        # REACH (launch layer): ``dim3 block(ns::threads)`` names the file's constexpr ``threads``.
        last = "".join(word.split()).rsplit("::", 1)[-1]
        if "::" in word and last in constexprs:
            word = last
        values.add(eval_int_text(word, dict(env)))
        mine_names = {word} if word.isidentifier() else set()
        names = mine_names if names is None else names & mine_names
        mine = {
            tp.name
            for tp, arg in zip(fn.template_params, site.template_args, strict=False)
            if tp.kind == "value" and " ".join(arg.split()) == word
        }
        tparams = mine if tparams is None else tparams & mine
    found: dict[str, BlockAlias] = {}
    for name in names or set():
        macro = next((m for m in module.macros if m.name == name and m.params is None), None)
        if macro is not None:
            found[name] = BlockAlias(name, "x", macro.int_value, "define")
        elif name in constexprs:
            found[name] = BlockAlias(name, "x", env.get(name), "constexpr")
    for name in tparams or set():
        found[name] = BlockAlias(name, "x", None, "template")
    for i, param in enumerate(fn.params):
        if param.pointer_depth or param.name in found:
            continue
        passed = {" ".join(s.args[i].split()) if i < len(s.args) else None for s in launches}
        if len(passed) == 1 and passed <= (names or set()):
            # ``k<<<grid, block_size>>>(..., block_size)``: the parameter carries the block size.
            found[param.name] = BlockAlias(param.name, "x", None, "param")
    (value,) = values if len(values) == 1 else (None,)
    if value is not None:
        # ``#define TPB 256`` read by the kernel while every launch passes 256: numerically
        # blockDim.x for this file's launches (a knob on the launch alone would break it).
        read = {_text(module, n) for n in _walk(module.node(fn.body)) if n.type == "identifier"}
        for m in module.macros:
            if m.params is None and m.int_value == value and m.name in read and m.name not in found:
                found[m.name] = BlockAlias(m.name, "x", value, "value")
        for c in module.constants:
            local = c.function in (None, fn.name)
            if c.int_value == value and local and c.name in read and c.name not in found:
                found[c.name] = BlockAlias(c.name, "x", value, "value")
    return found


def template_values(module: Module, fn: Function, env: Mapping[str, int]) -> dict[str, int]:
    """``{name: value}`` for value template parameters that are one integer wherever launched.

    ``k<4><<<...>>>`` at every launch (or a default ``int VEC = 4`` and no launch that says
    otherwise) makes ``VEC`` the constant 4 for the analysis. Launches that disagree (a dispatch
    over ``VEC``) leave it a symbol.
    """
    found: dict[str, int] = {}
    launches = module.launches_of(fn.name)
    for i, tp in enumerate(fn.template_params):
        if tp.kind != "value" or tp.variadic:
            continue
        values: set[int | None] = set()
        for site in launches:
            text = site.template_args[i] if i < len(site.template_args) else tp.default
            values.add(eval_int_text(text, dict(env)) if text else None)
        if not launches and tp.default:
            values.add(eval_int_text(tp.default, dict(env)))
        if len(values) == 1:
            (value,) = values
            if value is not None:
                found[tp.name] = value
    return found


def _block_word(module: Module, host: str | None, block: str, at: int) -> str | None:
    """The expression a launch's block argument stands for (through ``dim3 b(EXPR)`` locals);
    None for a block of several dimensions."""
    if block.isidentifier():
        fn = next((f for f in module.functions if f.name == host and f.body.start <= at < f.body.end), None)
        if fn is not None:
            body = module.node(fn.body)
            for n in _walk(body):
                if n.start_byte >= at:
                    break
                if n.type == "init_declarator":
                    ident, _, _ = _declared(n.child_by_field_name("declarator"))
                    value = n.child_by_field_name("value")
                    if ident is not None and value is not None and _text(module, ident) == block:
                        inner = value
                        if value.type in ("argument_list", "initializer_list"):
                            named = _unit_trimmed(module, value)
                            if len(named) != 1:
                                return None
                            inner = named[0]
                        return " ".join(_text(module, inner).split())
                vexing = n.parent is not None and n.parent.type == "declaration"
                if n.type == "function_declarator" and vexing:
                    declared = n.child_by_field_name("declarator")
                    params = n.child_by_field_name("parameters")
                    if declared is not None and params is not None and _text(module, declared) == block:
                        named = _unit_trimmed(module, params)
                        if len(named) != 1:
                            return None
                        return " ".join(_text(module, named[0]).split())
            # REACH (launch layer): ``dim3 b; b.x = EXPR;`` assigns the block field by field.
            fields = dim3_field_assignments(module.source, body, block, at)
            if "x" in fields and all(_text(module, fields[k]).strip() == "1" for k in fields if k != "x"):
                return " ".join(_text(module, fields["x"]).split())
        return block
    if block.startswith("dim3(") and block.endswith(")"):
        arg = block[5:-1].strip()
        return None if "," in arg else arg
    return block


def _unit_trimmed(module: Module, args: ts.Node) -> list[ts.Node]:
    """REACH (launch layer): ``dim3 block(X, 1, 1)`` is the 1-D block ``X``: trailing 1s dropped."""
    named = [c for c in args.named_children if c.type != "comment"]
    while len(named) > 1 and _text(module, named[-1]).strip() == "1":
        named.pop()
    return named
