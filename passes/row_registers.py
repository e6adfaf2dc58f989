"""``row-registers``: a row's packs stay in registers between a block's two passes (knob PACKS).

A normalisation with a block per row reads its row twice: a loop reduces it, a barrier
publishes the sum, and a second loop with the same header loads the row again, with the weight,
and writes. With ``PACKS = P`` (0, the original, by default) each thread's first ``P``
iterations of both loops are peeled into fully unrolled heads. A first head issues every load
the heads need before any math: the row's packs into ``ktx_keep_<v>[P]`` (when the first loop
stores nothing; else they stay in the first loop's head, copied as loaded) and the second loop's
loads of other ``const __restrict__`` memory (the weight), so that one memory latency precedes
the reduction, as in issue 23's hand variant. The first loop's head then reads the row from
registers, and the second loop's head takes both from there instead of loading again::

    #pragma unroll
    for (int ktx_k = 0; ktx_k < P; ++ktx_k) {       // loads first
      const int i = thread_id + ktx_k * num_threads;
      if (i < num_packs) { ktx_keep_in[ktx_k].load(...); ktx_keep_w[ktx_k].load(...); }
    }
    head of the first loop: Pack<T> in; in = ktx_keep_in[ktx_k]; ... the sum
    for (int i = thread_id + P * num_threads; ...) { ... }   // the rest, as written
    ... the reduction ...
    head of the second loop: in = ktx_keep_in[ktx_k]; w = ktx_keep_w[ktx_k]; the rest as written

A row the first loop stashes and the second reads back (fused_add_rmsnorm's ``x = input +
residual`` through shared memory, as a local array cast to ``float4``; FlashInfer's
``x_vec.store(smem_x + ...)`` / ``x_vec.load(...)``) is kept too: the first loop's head copies the
value into the keep slot right after the stash, and the second loop's head takes it from there, so
the sum is written once (the residual) and never read back. The stash store stays for the rest
loop and the scalar tail; in the heads it goes where nothing else reads those elements back
(the facts' ``dead_stash``: the address is the iteration's own elements and the stash is used
only by the store, the second loop's fill and the tails past the packs).

Rows longer than ``threads x P`` packs are still correct (the remainder loops run as written);
a row that fits is read once. Registers grow by ``P`` packs per kept load. Facts:
:mod:`ktx.ir.facts.rowkeep`. Every change sits under ``#if KTX_PACKS``.

Scalar rows (llm.c's layernorm_forward v1 and fused_residual_forward v2 after row-owner: each
element a subscript ``x[i]``, three loops over the row) are kept the same way, element by
element: the first loop's head stores ``x[i]`` into ``ktx_keep<j>[ktx_k]`` at the end of its
iteration, every later loop with the same header reads the slot in its head instead of memory,
and the const rows no statement writes (weight, bias) are loaded right after the first loop.
Then PACKS counts elements a thread keeps (up to 32), and a row of ``threads x PACKS`` elements
is read from memory once.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass

import tree_sitter as ts
from ktx.ir import syntax
from ktx.ir.facts.rowkeep import KeptLoad, RowKeep, ScalarKeep, row_keeps
from ktx.passes._variants import line_bounds, wrap_lines

from ktx.passbase import KnobSpec, Pass, Phase, Refuse, Rewriter, Site, Skip, Target

KNOB = "PACKS"
MACRO = "KTX_PACKS"


SCALAR_VALUES = (0, 1, 2, 4, 8, 16, 32)


@dataclass(frozen=True)
class RowRegistersSite(Site):
    keeps: tuple[RowKeep | ScalarKeep, ...]


class RowRegisters(Pass[RowRegistersSite]):
    name = "row-registers"
    phase = Phase.UNROLL
    summary = (
        "a row's packs stay in registers between a block's two passes; the weight loads early (knob PACKS)"
    )
    description = __doc__ or ""
    knobs = (
        KnobSpec(
            KNOB,
            "0, 1, 2, 4 (packs); 0, 1, 2, 4, 8, 16, 32 (scalar rows)",
            "0 (every loop loads, the original)",
            "packs (elements, on scalar rows) a thread keeps in registers from the first loop to later ones",
        ),
    )
    #: ``cluster-rows`` first: its interleaved row loops (rank x threads + thread, stride
    #: cluster x threads) are the loops whose heads this pass peels. Run the other way round, the
    #: heads' ``k x threads`` strides were not interleaved and the blocks of a cluster summed
    #: the same packs (``row-registers,cluster-rows`` on kernels/rmsnorm, session 9).
    after = (
        "expose",
        "block-size",
        "vectorize",
        "unroll",
        "tile",
        "cache-hints",
        "fast-math",
        "hoist",
        "cluster-rows",
    )

    def sites(self, target: Target) -> Iterator[RowRegistersSite | Skip]:
        fn = target.kernel
        keeps = row_keeps(target.module, fn)
        if isinstance(keeps, str):
            yield Skip(keeps, fn.name, fn.span)
            return
        yield RowRegistersSite(fn.name, fn.span, keeps)

    def rewrite(self, site: RowRegistersSite, rw: Rewriter) -> None:
        module = rw.target.module
        source = module.source
        scalar = any(isinstance(k, ScalarKeep) for k in site.keeps)
        if scalar:
            rw.knob(KNOB, SCALAR_VALUES, 0, "elements per thread kept in registers across the row's loops")
        else:
            rw.knob(KNOB, (0, 1, 2, 4), 0, "packs per thread kept in registers between the row's two loops")
        if rw.mapping is not None:
            threads = " * ".join(f"({b})" for b in rw.mapping.resolved().block)
            if scalar:
                # three kept rows of 32 floats a thread is 96 registers: at most 8192 elements a block
                rw.constraint(f"{KNOB} * {threads} <= 8192")
            else:
                # 4 packs of two kept loads took 80 registers (rmsnorm, sm_90): more than a block of
                # 1024 threads may hold (64 each); 2 packs took 46
                rw.constraint(f"{KNOB} <= 2 or {threads} <= 512")
        notes: list[str] = []
        for k in site.keeps:
            loops = (k.first, *k.seconds) if isinstance(k, ScalarKeep) else (k.first, k.second)
            for loop in loops:
                start = syntax.line_start(source, loop.start_byte)
                if source[start : loop.start_byte].strip():
                    raise Refuse(f"line {loop.start_point[0] + 1}: the loop does not start its line")
            if isinstance(k, ScalarKeep):
                f0, f1 = line_bounds(source, k.first.start_byte, k.first.end_byte)
                wrap_lines(rw, f0, f1, _first_scalar(source, k), MACRO)
                for j, b in enumerate(k.seconds):
                    s0, s1 = line_bounds(source, b.start_byte, b.end_byte)
                    wrap_lines(rw, s0, s1, _second_scalar(source, k, j), MACRO)
                kept = [f"{ld.element} ({ld.kind})" for ld in k.loads]
                later = ", ".join(f"line {b.start_point[0] + 1}" for b in k.seconds)
                notes.append(
                    f"loop at line {k.first.start_point[0] + 1}, then {later}; elements in registers: "
                    f"{', '.join(kept)}"
                )
                continue
            f0, f1 = line_bounds(source, k.first.start_byte, k.first.end_byte)
            s0, s1 = line_bounds(source, k.second.start_byte, k.second.end_byte)
            wrap_lines(rw, f0, f1, _first(source, k), MACRO)
            wrap_lines(rw, s0, s1, _second(source, k), MACRO)
            kept = [f"{ld.variable} ({ld.kind})" for ld in k.loads]
            first = f"; the first loop's loads issued first: {', '.join(ld.variable for ld in k.prefetch)}"
            notes.append(
                f"loops at line {k.first.start_point[0] + 1} and line {k.line}; "
                f"loads in registers: {', '.join(kept)}{first if k.prefetch else ''}"
            )
        rw.note("; ".join(notes))


def _keep_name(ld: KeptLoad) -> str:
    return f"ktx_keep_{ld.variable}"


def _pre_name(ld: KeptLoad) -> str:
    """A first-loop load issued ahead of the math (``RowKeep.prefetch``): its own slot name, apart
    from the keep slots a later loop reads."""
    return f"ktx_pre_{ld.variable}"


def _extent(ld: KeptLoad) -> str:
    """``[N]`` for a kept local array (its slot per head iteration is an array too), else empty."""
    return f"[{ld.extent}]" if ld.kind == "array" else ""


def _copy(source: bytes, ld: KeptLoad, at: ts.Node, *, into_keep: bool) -> str:
    """A fully unrolled element copy between a local array and its keep slot, on new lines at
    the indentation of ``at``: after the first loop's stash (``into_keep``), or in place of the
    second loop's fill from shared memory."""
    ind = syntax.indentation(source, at.start_byte)
    dst, src = (
        (f"{_keep_name(ld)}[ktx_k]", ld.variable) if into_keep else (ld.variable, f"{_keep_name(ld)}[ktx_k]")
    )
    return (
        f"\n#pragma unroll\n{ind}for (int ktx_j = 0; ktx_j < ({ld.extent}); ++ktx_j) "
        f"{dst}[ktx_j] = {src}[ktx_j];"
    )


def _loop_text(source: bytes, loop: ts.Node, init: str) -> str:
    """The loop's lines with its initial value replaced by ``init``."""
    start = syntax.line_start(source, loop.start_byte)
    decl = loop.child_by_field_name("initializer")
    assert decl is not None
    value = next(d.child_by_field_name("value") for d in decl.named_children if d.type == "init_declarator")
    assert value is not None
    return (
        source[start : value.start_byte] + init.encode() + source[value.end_byte : loop.end_byte]
    ).decode()


def _body_with(source: bytes, loop: ts.Node, edits: list[tuple[int, int, str]]) -> str:
    body = loop.child_by_field_name("body")
    assert body is not None
    out = bytearray(source[body.start_byte : body.end_byte])
    for a, b, t in sorted(edits, reverse=True):
        out[a - body.start_byte : b - body.start_byte] = t.encode()
    return out.decode()


def _head(indent: str, k: RowKeep | ScalarKeep, body: str) -> list[str]:
    return [
        "#pragma unroll",
        f"{indent}for (int ktx_k = 0; ktx_k < {MACRO}; ++ktx_k) {{",
        f"{indent}  const {k.var_type} {k.var} = ({k.init}) + ktx_k * ({k.step});",
        f"{indent}  if ({k.var} < {k.bound}) {body}",
        f"{indent}}}",
    ]


def _rest(source: bytes, loop: ts.Node, k: RowKeep | ScalarKeep) -> str:
    return _loop_text(source, loop, f"({k.init}) + {MACRO} * ({k.step})")


#: A store in a loop body: a ``.store(`` call, or an assignment through a subscript or a pointer.
_STORE = re.compile(r"\.\s*store\s*\(|\]\s*=[^=]|^\s*\*[^;]*=[^=]", re.MULTILINE)
_LOAD_ARG = re.compile(r"^\s*\w+\s*\.\s*load\s*\((.*)\)\s*;\s*$", re.DOTALL)


def _guarded(ld: KeptLoad, load: str) -> str:
    """``load`` under the ``if`` the loop's load sits in (FlashInfer's bounds guard), if any."""
    return f"if {ld.guard} {{ {load} }}" if ld.guard else load


def _first(source: bytes, k: RowKeep) -> str:
    """Keep arrays, a loads-first head, the first loop's head and its rest.

    The loads-first head issues every pack the head will need before any math: the weight (no
    statement writes it: always) and, when the first loop stores nothing, the row's own packs,
    which the first loop's head then copies from registers. Emitted after the first loop (as
    before session 9), the weight loads waited for the row's sum, and each row pack's math
    waited for its load before the next guarded load issued: three memory latencies before the
    reduction where issue 23's hand variant pays one (PTX of kernels/rmsnorm at PACKS=2)."""
    indent = syntax.indentation(source, k.first.start_byte)
    lines = [f"{indent}{ld.type} {_keep_name(ld)}[{MACRO}]{_extent(ld)};" for ld in k.loads]
    body = source[k.first.start_byte : k.first.end_byte].decode()
    # a first loop that stores may still have its loads issued first when the facts show its
    # stores are pack stores in place or go to a shared stash (fused_add_rmsnorm: k.prefetch)
    hoist = not _STORE.search(body) or bool(k.prefetch)
    first_loads: list[str] = []
    edits: list[tuple[int, int, str]] = []
    for ld in k.prefetch:
        arg = _LOAD_ARG.match(source[ld.statement.start_byte : ld.statement.end_byte].decode())
        if arg is None:
            continue
        lines.append(f"{indent}{ld.type} {_pre_name(ld)}[{MACRO}];")
        first_loads.append(_guarded(ld, f"{_pre_name(ld)}[ktx_k].load({arg.group(1).strip()});"))
        edits.append(
            (ld.statement.start_byte, ld.statement.end_byte, f"{ld.variable} = {_pre_name(ld)}[ktx_k];")
        )
    for ld in k.loads:
        if ld.source is None:
            continue
        if ld.kind == "array" and ld.dead_stash:
            # the stash store itself goes: nothing reads these elements back (the facts'
            # dead_stash); the values go into the keep slot instead (under the loop's #pragma)
            copy = _copy(source, ld, ld.source, into_keep=True).split("\n", 2)[2].lstrip()
            edits.append((ld.source.start_byte, ld.source.end_byte, copy))
            continue
        if ld.kind == "array":
            # after the loop that stashes the array: the same values, copied into the keep slot
            edits.append(
                (ld.source.end_byte, ld.source.end_byte, _copy(source, ld, ld.source, into_keep=True))
            )
            continue
        arg = _LOAD_ARG.match(source[ld.source.start_byte : ld.source.end_byte].decode())
        if hoist and arg is not None:
            first_loads.append(_guarded(ld, f"{_keep_name(ld)}[ktx_k].load({arg.group(1).strip()});"))
            edits.append(
                (ld.source.start_byte, ld.source.end_byte, f"{ld.source_variable} = {_keep_name(ld)}[ktx_k];")
            )
        else:
            edits.append(
                (ld.source.end_byte, ld.source.end_byte, f" {_keep_name(ld)}[ktx_k] = {ld.source_variable};")
            )
    early = [
        _guarded(ld, f"{_keep_name(ld)}[ktx_k].load({ld.address});") for ld in k.loads if ld.kind == "early"
    ]
    if first_loads or early:
        lines += _head(indent, k, f"{{ {' '.join(first_loads + early)} }}")
    lines += _head(indent, k, _body_with(source, k.first, edits))
    lines.append(_rest(source, k.first, k))
    return "\n".join(lines)


def _second(source: bytes, k: RowKeep) -> str:
    indent = syntax.indentation(source, k.second.start_byte)
    edits = [
        (
            ld.statement.start_byte,
            ld.statement.end_byte,
            _copy(source, ld, ld.statement, into_keep=False).lstrip()
            if ld.kind == "array"
            else f"{ld.variable} = {_keep_name(ld)}[ktx_k];",
        )
        for ld in k.loads
    ]
    lines = _head(indent, k, _body_with(source, k.second, edits))
    lines.append(_rest(source, k.second, k))
    return "\n".join(lines)


def _slot(k: ScalarKeep, j: int) -> str:
    return f"ktx_keep{j}_{k.loads[j].pointer}"


def _first_scalar(source: bytes, k: ScalarKeep) -> str:
    """Keep arrays, the first loop's head (each kept element stored at the end of its iteration),
    the rest of the first loop, and the head that loads the early elements."""
    indent = syntax.indentation(source, k.first.start_byte)
    lines = [f"{indent}{ld.type} {_slot(k, j)}[{MACRO}];" for j, ld in enumerate(k.loads)]
    kept = " ".join(
        f"{_slot(k, j)}[ktx_k] = {ld.element};" for j, ld in enumerate(k.loads) if ld.kind == "kept"
    )
    s0 = k.first_statement
    inner = syntax.indentation(source, s0.start_byte) if s0 is not None else indent + "    "
    brace = k.body_end - 1
    close = syntax.line_start(source, brace)  # the line of the body's closing brace
    if source[close:brace].strip():
        close = brace
    lines += _head(indent, k, _body_with(source, k.first, [(close, close, f"{inner}{kept}\n")]))
    lines.append(_rest(source, k.first, k))
    early = [f"{_slot(k, j)}[ktx_k] = {ld.element};" for j, ld in enumerate(k.loads) if ld.kind == "early"]
    if early:
        lines += _head(indent, k, f"{{ {' '.join(early)} }}")
    return "\n".join(lines)


def _second_scalar(source: bytes, k: ScalarKeep, which: int) -> str:
    """A later loop's head reading the keep slots, then its rest as written."""
    loop = k.seconds[which]
    indent = syntax.indentation(source, loop.start_byte)
    edits = [
        (n.start_byte, n.end_byte, f"{_slot(k, j)}[ktx_k]")
        for j, ld in enumerate(k.loads)
        for n in ld.reads
        if loop.start_byte <= n.start_byte < loop.end_byte
    ]
    lines = _head(indent, k, _body_with(source, loop, edits))
    lines.append(_rest(source, loop, k))
    return "\n".join(lines)
