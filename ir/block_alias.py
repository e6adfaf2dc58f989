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
from ktx.ir import syntax
from ktx.ir.affine_tree import declared as _declared
from ktx.ir.index import eval_int_text
from ktx.ir.index_facts import BlockAlias
from ktx.ir.launch import dim3_field_assignments, launch_dims
from ktx.ir.nodes import Function, LaunchSite
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
    return _aliases(module, fn, env, several=False)


def block_x_equalities(module: Module, fn: Function, env: Mapping[str, int]) -> dict[str, BlockAlias]:
    """Names that equal ``blockDim.x`` at every launch of ``fn`` where some launch's block has
    more than one dimension (``dim3 b(WARP_SIZE, nwarps)``): the x size is a fact there too.

    Why apart from :func:`block_aliases`: a pass that makes the block size a knob rewrites an
    alias as *the* block size, which a 2-D block's x is not (its y is a dimension too, and an x
    of 32 is usually the warp the kernel shuffles across). The index analysis still reads
    ``col += WARP_SIZE`` from ``threadIdx.x`` as a block-stride loop, which is what vectorize,
    split and the row passes ask. Empty when every launch is 1-D (:func:`block_aliases` has them).

    >>> from ktx.ir import parse
    >>> m = parse('''#define WARP_SIZE 32
    ... __global__ void k(float* y, int n) {
    ...   for (int c = threadIdx.x; c < n; c += WARP_SIZE) y[c] = 0.f; }
    ... void go(float* y, int n, int r) { k<<<r, dim3(WARP_SIZE, 4)>>>(y, n); }''')
    >>> [(a.name, a.kind) for a in block_x_equalities(m, m.kernel(), {"WARP_SIZE": 32}).values()]
    [('WARP_SIZE', 'define')]
    """
    launches = module.launches_of(fn.name)
    flat = [_block_word(module, s.function, _flat(module.text(s.block)), s.span.start) for s in launches]
    found = _aliases(module, fn, env, several=True) if not all(w is not None for w in flat) else {}
    for name, alias in [*cub_block_sizes(module, fn, env).items(), *_header_names(module, fn).items()]:
        found.setdefault(name, alias)
    known = block_aliases(module, fn, env)
    return {k: v for k, v in found.items() if k not in known}


def _hosts(f: Function, site: LaunchSite) -> bool:
    return f.name == site.function and f.body.contains(site.span)


def _header_names(module: Module, fn: Function) -> dict[str, BlockAlias]:
    """A name from a header the file includes (``WARP_SIZE`` of ggml's ``common.cuh``) that every
    launch passes as its block's x and the kernel reads: ``blockDim.x``, though its value is not
    known here.

    The launcher does not declare it (no local, no parameter) and neither does the kernel, so
    both read the one file-scope name: a macro or a constant of a header. Kept out of
    :func:`block_aliases`: block-size would rewrite its definition, which is not in this file.
    """
    launches = module.launches_of(fn.name)
    words: set[str] = set()
    for site in launches:
        word = _block_word(module, site.function, _flat(module.text(site.block)), site.span.start)
        word = word if word is not None else _x_word(module, site)
        if word is None or not word.isidentifier():
            return {}
        host = next(
            (f for f in module.functions if f.name == site.function and f.body.contains(site.span)), None
        )
        if host is None or word in {p.name for p in host.params}:
            return {}
        if word in syntax.local_declarations(module, module.node(host.body), before=site.span.start):
            return {}
        words.add(word)
    if len(words) != 1:
        return {}
    (word,) = words
    defined = {m.name for m in module.macros} | {c.name for c in module.constants}
    kernel_body = module.node(fn.body)
    if (
        word in defined
        or word in {p.name for p in fn.params}
        or word in syntax.local_declarations(module, kernel_body)
    ):
        return {}
    if word not in syntax.names_in(module, kernel_body):
        return {}
    return {word: BlockAlias(word, "x", None, "header")}


#: CUB's block-wide collectives: their second template argument is ``BLOCK_DIM_X``, the block's
#: x size the collective is written for (CUB computes each thread's rank from it).
CUB_BLOCK_TYPES = frozenset(
    {
        "BlockReduce", "BlockScan", "BlockLoad", "BlockStore", "BlockRadixSort", "BlockExchange",
        "BlockHistogram", "BlockDiscontinuity", "BlockAdjacentDifference", "BlockMergeSort",
        "BlockShuffle", "BlockRunLengthDecode",
    }
)  # fmt: skip


def cub_block_sizes(module: Module, fn: Function, env: Mapping[str, int]) -> dict[str, BlockAlias]:
    """Names the kernel hands to a CUB block collective as its ``BLOCK_DIM_X``: ``blockDim.x``.

    ``using BlockReduceT = cub::BlockReduce<T, THREADS>;`` in a kernel is the author's contract
    that the kernel runs with ``THREADS`` threads along x (CUB ranks the threads by it; with any
    other block the reduction is wrong), so ``for (i = threadIdx.x; i < n; i += THREADS)`` is a
    block-stride loop even where the file never launches the kernel (bitsandbytes defines its
    kernels in one file and launches them from another). Only a scope that names CUB
    (``cub::``, ``hipcub::``, a project's ``bnb_cub::`` alias) counts: a project's own
    ``BlockReduce`` template promises nothing. The name must be a value template parameter, a
    ``#define`` or a ``constexpr`` (a literal says nothing about a name the loop reads).

    >>> from ktx.ir import parse
    >>> m = parse('''template <typename T, int THREADS> __global__ void k(T* a, int n) {
    ...   using BR = cub::BlockReduce<T, THREADS>;
    ...   for (int i = threadIdx.x; i < n; i += THREADS) a[i] = T(0); }''')
    >>> [(a.name, a.kind) for a in cub_block_sizes(m, m.kernel(), {}).values()]
    [('THREADS', 'cub')]
    """
    tparams = {tp.name for tp in fn.template_params if tp.kind == "value" and not tp.variadic}
    macros = {m.name for m in module.macros if m.params is None}
    constexprs = {c.name for c in module.constants if c.function in (None, fn.name)}
    found: dict[str, BlockAlias] = {}
    for n in _walk(module.node(fn.body)):
        if n.type != "template_type" or n.parent is None or n.parent.type != "qualified_identifier":
            continue
        scope = n.parent.child_by_field_name("scope")
        name = n.child_by_field_name("name")
        args = n.child_by_field_name("arguments")
        if scope is None or name is None or args is None or _text(module, name) not in CUB_BLOCK_TYPES:
            continue
        if "cub" not in _text(module, scope).lower():
            continue
        named = [c for c in args.named_children if c.type != "comment"]
        if len(named) < 2:
            continue
        word = _flat(_text(module, named[1]))
        if word in tparams or word in macros or word in constexprs:
            found.setdefault(word, BlockAlias(word, "x", env.get(word), "cub"))
    return found


def _flat(text: str) -> str:
    return " ".join(text.split())


def _x_word(module: Module, site: LaunchSite) -> str | None:
    """The x component of a launch's block of several dimensions (``dim3(X, Y)``, ``dim3 b(X, Y)``,
    ``{X, Y, 1}``), or None where the launch does not write it (a ``dim3`` parameter)."""
    dims = launch_dims(module, site, "block")
    if dims.whole_dim3 or len(dims.components) < 2:
        return None
    return _flat(_text(module, dims.components[0]))


def _aliases(module: Module, fn: Function, env: Mapping[str, int], several: bool) -> dict[str, BlockAlias]:
    """The names equal to every launch's block x: of 1-D blocks only, or (``several``) of the x
    component of blocks with more dimensions too."""
    launches = module.launches_of(fn.name)
    if not launches:
        return {}
    constexprs = {c.name for c in module.constants}
    names: set[str] | None = None
    tparams: set[str] | None = None
    values: set[int | None] = set()
    for site in launches:
        block = _flat(module.text(site.block))
        word = _block_word(module, site.function, block, site.span.start)
        if word is None and several:
            word = _x_word(module, site)
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
            found: list[ts.Node] = []
            for n in _walk(body):
                if n.start_byte >= at:
                    break
                if n.type == "init_declarator":
                    ident, _, _ = _declared(n.child_by_field_name("declarator"))
                    declared_as = _text(module, ident) if ident is not None else None
                    valued = n.child_by_field_name("value") is not None
                    if declared_as == block and valued and _scope_holds(n, at):
                        found.append(n)
                vexing = n.parent is not None and n.parent.type == "declaration"
                if n.type == "function_declarator" and vexing:
                    declared = n.child_by_field_name("declarator")
                    if declared is not None and _text(module, declared) == block and _scope_holds(n, at):
                        found.append(n)
            # The declaration in scope at the launch: the last one before it whose block holds it
            # (``if (..) { dim3 b(32); k<32><<<g, b>>>; } else { dim3 b(1024); ... }``).
            if found:
                n = found[-1]
                value = n.child_by_field_name("value" if n.type == "init_declarator" else "parameters")
                assert value is not None
                inner = value
                if value.type in ("argument_list", "initializer_list", "parameter_list"):
                    named = _unit_trimmed(module, value)
                    if len(named) != 1:
                        return None
                    inner = named[0]
                return " ".join(_text(module, inner).split())
            # REACH (launch layer): ``dim3 b; b.x = EXPR;`` assigns the block field by field.
            fields = dim3_field_assignments(module.source, body, block, at)
            if "x" in fields and all(_text(module, fields[k]).strip() == "1" for k in fields if k != "x"):
                return " ".join(_text(module, fields["x"]).split())
        return block
    if block.startswith("dim3(") and block.endswith(")"):
        arg = block[5:-1].strip()
        return None if "," in arg else arg
    if block.startswith("{") and "," in block:
        return None  # ``<<<g, {x, y, 1}>>>``: a block of several dimensions, like ``dim3(x, y, 1)``
    return block


def _scope_holds(decl: ts.Node, at: int) -> bool:
    """Whether the block that declares ``decl`` still encloses the byte ``at`` (a use there sees it)."""
    scope = decl.parent
    while scope is not None and scope.type not in ("compound_statement", "for_statement"):
        scope = scope.parent
    return scope is None or scope.start_byte <= at < scope.end_byte


def _unit_trimmed(module: Module, args: ts.Node) -> list[ts.Node]:
    """REACH (launch layer): ``dim3 block(X, 1, 1)`` is the 1-D block ``X``: trailing 1s dropped."""
    named = [c for c in args.named_children if c.type != "comment"]
    while len(named) > 1 and _text(module, named[-1]).strip() == "1":
        named.pop()
    return named
