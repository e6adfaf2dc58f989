"""Byte-range edits: insert, replace, overlap checks, order at one point, rollback on breakage."""

from __future__ import annotations

import pytest
from ktx.ir import Edit, EditError, EditSet, apply, parse, splice

SRC = """\
// keep this comment
template <typename T>
__global__ void scale(T* x, int n) {
  for (int i = threadIdx.x; i < n; i += 256) {  // stride
    x[i] = x[i] * 2;
  }
}
void launch(float* x, int n) { scale<float><<<1, 256>>>(x, n); }
"""


def test_replace_and_insert_keep_everything_else() -> None:
    m = parse(SRC, "e.cu")
    loop = m.loops[0]
    step = loop.step
    assert step is not None
    edits = EditSet(m)
    edits.replace(step, "i += blockDim.x", "stride", "L0")
    edits.insert(loop.span.start, "#pragma unroll 4\n  ", "unroll", "L0")
    result = apply(edits)
    assert result.rolled_back == () and len(result.applied) == 2
    text = result.module.print()
    assert "for (int i = threadIdx.x; i < n; i += blockDim.x) {  // stride" in text
    assert "#pragma unroll 4\n  for" in text
    assert text.startswith("// keep this comment\n")
    new_loop = result.module.loops[0]
    assert new_loop.pragma is not None and new_loop.pragma.unroll_factor == "4"
    assert result.module.path == "e.cu"


def test_edits_use_original_offsets_in_any_order() -> None:
    m = parse(SRC)
    site = m.launch_sites[0]
    edits = EditSet(m)
    edits.replace(site.block, "BLOCK", "p", "launch")  # later in the file, added first
    edits.replace(m.kernel().params[1].span, "int n, int m", "p", "kernel")
    out = apply(edits).module.print()
    assert "scale(T* x, int n, int m)" in out and "<<<1, BLOCK>>>" in out


def test_overlapping_edits_raise_with_both_names() -> None:
    m = parse(SRC, "e.cu")
    body = m.kernel().body
    edits = EditSet(m)
    edits.replace(body, "{}", "first-pass", "k.body")
    with pytest.raises(EditError) as info:
        edits.replace(m.loops[0].span, "", "second-pass", "L0")
    message = str(info.value)
    assert "second-pass at L0 overlaps an edit by first-pass at k.body" in message
    assert message.startswith(f"e.cu:{m.loops[0].span.line}:")


def test_insertion_inside_a_replacement_raises_but_at_its_edges_does_not() -> None:
    m = parse(SRC)
    step = m.loops[0].step
    assert step is not None
    edits = EditSet(m)
    edits.replace(step, "i += 1", "a", "s")
    with pytest.raises(EditError):
        edits.insert(step.start + 2, "x", "b", "s")
    edits.insert(step.start, "/*before*/", "b", "s")
    edits.insert(step.end, "/*after*/", "b", "s")
    assert "/*before*/i += 1/*after*/" in apply(edits).module.print()


def test_insertions_at_one_point_keep_their_order() -> None:
    m = parse(SRC)
    at = m.kernel().body.start + 1
    edits = EditSet(m)
    for name in ("a", "b", "c"):
        edits.insert(at, f" /*{name}*/", name, "body")
    assert "{ /*a*/ /*b*/ /*c*/\n" in apply(edits).module.print()
    assert splice(b"xy", [Edit(1, 1, "2"), Edit(1, 1, "3"), Edit(0, 1, "1")]) == b"123y"


def test_breaking_edit_is_rolled_back_naming_pass_site_and_line() -> None:
    m = parse(SRC, "e.cu")
    loop = m.loops[0]
    cond = loop.cond
    assert cond is not None
    edits = EditSet(m)
    edits.replace(cond, "i < n &&", "bad-pass", "L0.cond")  # leaves a dangling operator
    edits.insert(m.kernel().body.start + 1, "\n  // ok", "good-pass", "k")
    result = apply(edits)
    assert len(result.rolled_back) == 1
    site, message = result.rolled_back[0]
    assert site == "L0.cond"
    assert "bad-pass" in message and "L0.cond" in message and f"line {cond.line}" in message
    assert "rolled back" in message
    assert [e.pass_name for e in result.applied] == ["good-pass"]
    assert "// ok" in result.module.print() and "i < n &&;" not in result.module.print()


def test_rollback_false_raises() -> None:
    m = parse(SRC, "e.cu")
    cond = m.loops[0].cond
    assert cond is not None
    edits = EditSet(m)
    edits.replace(cond, "(((", "bad-pass", "L0.cond")
    expected = r"pass bad-pass at L0.cond \(line 4\) produced code that does not parse"
    with pytest.raises(EditError, match=expected):
        apply(edits, rollback=False)


def test_existing_errors_do_not_block_edits() -> None:
    src = "int @@ junk;\n__global__ void k(float* x) { x[0] = 1.f; }\n"
    m = parse(src)
    assert m.diagnostics
    edits = EditSet(m)
    edits.replace(m.kernel().body, "{ x[0] = 2.f; }", "p", "k")
    result = apply(edits)
    assert result.rolled_back == () and "x[0] = 2.f" in result.module.print()


def test_edit_validation() -> None:
    m = parse(SRC)
    with pytest.raises(ValueError):
        Edit(5, 4, "x")
    with pytest.raises(EditError, match="past the end"):
        EditSet(m).add(Edit(0, len(m.source) + 1, "x"))
    e = Edit(1, 3, "é", "p", "s")
    assert Edit.from_json(e.to_json()) == e
    assert splice("aé b".encode(), [Edit(0, 1, "Z")]) == "Zé b".encode()
    edits = EditSet(m)
    edits.extend([Edit(0, 0, "// a\n", "p", "s"), Edit(0, 0, "// b\n", "p", "s")])
    assert len(edits) == 2 and [e.text for e in edits] == ["// a\n", "// b\n"]


def test_applied_module_is_reindexed() -> None:
    m = parse(SRC)
    k = m.kernel()
    edits = EditSet(m)
    name_at = m.source.index(b"scale(")
    edits.replace(m.span(name_at, name_at + len("scale")), "scale_v2", "rename", "k")
    result = apply(edits).module
    assert [f.name for f in result.kernels] == ["scale_v2"] and k.name == "scale"


def test_edit_inside_a_macro_body_is_checked_too() -> None:
    src = "__global__ void k(int* x) {}\n#define GO(B) k<<<1, B>>>(x)\nvoid host(int* x) { GO(32); }\n"
    m = parse(src)
    (site,) = m.launch_sites
    assert site.macro == "GO"
    good = EditSet(m)
    good.replace(site.block, "B * 2", "p", "GO.block")
    assert "k<<<1, B * 2>>>(x)" in apply(good).module.print()
    bad = EditSet(m)
    bad.replace(site.block, "B *", "p", "GO.block")
    result = apply(bad)
    assert [site for site, _ in result.rolled_back] == ["GO.block"]
    assert result.module.print() == src
