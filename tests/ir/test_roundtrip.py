"""Round trip: an unedited module prints its input byte for byte, and every span is honest.

Runs over every kernel of the suite (``kernels/*/*.cu``, skipped when there is none) and
every corpus file; set ``KTX_EXTRA_SOURCES`` to a folder to add more (the real-world files
used to check robustness are not committed, but can be checked the same way).
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from ktx.ir import EditSet, Module, Span, apply, parse, parse_file
from ktx.ir.mask import mask

ROOT = Path(__file__).resolve().parents[2]
KERNELS = sorted((ROOT / "kernels").glob("*/*.cu")) + sorted((ROOT / "kernels").glob("*/*.cuh"))
CORPUS = sorted((ROOT / "tests" / "corpus").glob("*.cu*"))
EXTRA_DIR = os.environ.get("KTX_EXTRA_SOURCES")
EXTRA = sorted(Path(EXTRA_DIR).glob("*.cu*")) if EXTRA_DIR else []
SOURCES = KERNELS + CORPUS + EXTRA


def ident(p: Path) -> str:
    return str(p.relative_to(ROOT)) if p.is_relative_to(ROOT) else p.name


def check_span(m: Module, span: Span, what: str) -> None:
    assert 0 <= span.start <= span.end <= len(m.source), what
    assert (span.line, span.col) == m.lines.line_col(span.start), f"{what}: line/col of {span}"


def test_suite_has_kernels_or_skips() -> None:
    if not KERNELS:
        pytest.skip("no kernels/ folder with .cu files yet")
    assert all(p.stat().st_size > 0 for p in KERNELS)


@pytest.mark.parametrize("path", SOURCES, ids=[ident(p) for p in SOURCES])
def test_print_returns_the_input_byte_for_byte(path: Path) -> None:
    data = path.read_bytes()
    m = parse_file(path)
    assert m.source == data
    assert m.print().encode("utf-8", "surrogateescape") == data
    assert len(mask(data).text) == len(data)  # the parser's view keeps every offset
    same = apply(EditSet(m))
    assert same.module is m and same.applied == () and same.rolled_back == ()


@pytest.mark.parametrize("path", SOURCES, ids=[ident(p) for p in SOURCES])
def test_every_span_is_consistent(path: Path) -> None:
    m = parse_file(path)
    for f in m.functions:
        for span in (f.span, f.signature, f.body):
            check_span(m, span, f.name)
        assert f.span.contains(f.signature) and f.span.contains(f.body)
        assert f.signature.end == f.body.start, f.name
        body = m.text(f.body)
        assert body.startswith("{") and body.endswith("}"), f.name
        assert f.name in m.text(f.signature), f.name
        for p in f.params:
            check_span(m, p.span, p.name)
            assert f.signature.contains(p.span) and (p.name in m.text(p.span)), (f.name, p.name)
        for tp in f.template_params:
            check_span(m, tp.span, tp.name)
            assert tp.name in m.text(tp.span) and f.span.contains(tp.span), (f.name, tp.name)
        if f.launch_bounds is not None:
            assert m.text(f.launch_bounds.span).startswith("__launch_bounds__")
            assert [m.text(a) for a in f.launch_bounds.args][:1] == [f.launch_bounds.max_threads]
    for lp in m.loops:
        check_span(m, lp.span, f"L{lp.id}")
        text = m.text(lp.span)
        assert text.startswith({"for": "for", "range-for": "for", "while": "while", "do": "do"}[lp.kind])
        assert lp.span.contains(lp.body)
        for part in (lp.init, lp.cond, lp.step):
            if part is not None:
                check_span(m, part, f"L{lp.id}")
                assert lp.span.contains(part) and m.text(part).strip() == m.text(part) != ""
        if lp.init is not None and lp.var is not None and lp.kind == "for":
            assert lp.var in m.text(lp.init)
        if lp.pragma is not None:
            assert m.text(lp.pragma.span).startswith("#") and lp.pragma.span.end <= lp.span.start
            assert m.text(lp.pragma.span).split(None, 1)[-1].endswith(lp.pragma.text.split()[-1])
        if lp.parent is not None:
            assert m.loops[lp.parent].span.contains(lp.span) and lp.depth == m.loops[lp.parent].depth + 1
    for site in m.launch_sites:
        for span in (site.span, site.config, site.grid, site.block):
            check_span(m, span, site.kernel)
        assert [m.text(s) for s in site.template_arg_spans] == list(site.template_args)
        if site.api is None and site.wrapper is None:
            assert m.text(site.config).startswith("<<<") and m.text(site.config).endswith(">>>")
            for part in (site.grid, site.block, site.shared, site.stream):
                assert part is None or site.config.contains(part)
            assert site.span.contains(site.config)
    for macro in m.macros:
        check_span(m, macro.span, macro.name)
        assert m.text(macro.span).lstrip().startswith("#") and macro.name in m.text(macro.span)
        if macro.value_span is not None:
            assert macro.span.contains(macro.value_span)
            assert m.text(macro.value_span).startswith(macro.value[:1])
    for const in m.constants:
        check_span(m, const.span, const.name)
        assert m.text(const.value_span) == const.value and const.span.contains(const.value_span)
        assert const.name in m.text(const.span)
    for arr in m.shared_arrays:
        check_span(m, arr.span, arr.name)
        assert "__shared__" in m.text(arr.span) and arr.name in m.text(arr.span)
    for d in m.diagnostics:
        check_span(m, d.span, d.message)
        assert str(d).startswith(f"{m.path}:{d.span.line}:{d.span.col}: {d.severity}: ")


def test_crlf_and_multibyte_offsets_are_bytes() -> None:
    src = "// é ü 你\r\n__global__ void k(float* x) {\r\n  x[0] = 1.f;  // ✓\r\n}\r\n".encode()
    m = parse(src)
    k = m.kernel()
    assert m.print().encode() == src
    assert m.source[k.span.start : k.span.end].startswith(b"__global__")
    assert (k.span.line, k.span.col) == (2, 1)
    assert m.text(k.body) == "{\r\n  x[0] = 1.f;  // ✓\r\n}"
