"""Parsing the same bytes again reuses the module (ktx.ir.module's cache by content)."""

from __future__ import annotations

from pathlib import Path

from ktx.ir import parse
from ktx.ir.edits import EditSet, apply

SRC = "__global__ void k(float* x, int n) { int i = threadIdx.x; if (i < n) x[i] = 0.f; }\n"


def test_the_same_bytes_at_the_same_path_give_the_same_module() -> None:
    a, b = parse(SRC, "a.cu"), parse(SRC.encode(), "a.cu")
    assert a is b
    assert a.facts() is b.facts(), "the facts are computed once for both"


def test_other_bytes_or_another_path_give_another_module() -> None:
    a = parse(SRC, "a.cu")
    assert parse(SRC, "b.cu") is not a and parse(SRC, "b.cu").path == "b.cu"
    other = parse(SRC.replace("0.f", "1.f"), "a.cu")
    assert other is not a and "1.f" in other.print() and "0.f" in a.print()


def test_an_edit_result_is_parsed_once_and_matches_a_fresh_parse() -> None:
    m = parse(SRC, "e.cu")
    start = SRC.index("0.f")
    edits = EditSet(m)
    edits.replace(m.span(start, start + 3), "2.f", pass_name="t", site="s")
    out = apply(edits).module
    assert out.print() == SRC.replace("0.f", "2.f")
    assert parse(out.source, "e.cu") is out, "the reparse for new errors and the result share one"
    assert [k.name for k in out.kernels] == ["k"] and out.loops == () and out.diagnostics == ()


def test_a_header_rewritten_beside_the_file_gives_a_new_module(tmp_path: Path) -> None:
    """Facts read local headers (typedefs, structs): a cached module would keep their old text."""
    cu = tmp_path / "k.cu"
    source = '#include "types.h"\n__global__ void k(real_t* x) { x[threadIdx.x] = 0; }\n'
    cu.write_text(source)
    (tmp_path / "types.h").write_text("typedef float real_t;\n")
    first = parse(source, str(cu))
    assert parse(source, str(cu)) is first
    (tmp_path / "types.h").write_text("typedef double real_t; // now eight bytes\n")
    assert parse(source, str(cu)) is not first
