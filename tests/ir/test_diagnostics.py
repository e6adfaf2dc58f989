"""Syntax problems become diagnostics: warnings outside kernels, errors inside, never a crash."""

from __future__ import annotations

from ktx.ir import parse
from ktx.ir.module import MAX_DIAGNOSTICS

SRC = """\
__global__ void good(float* x) { x[0] = 1.f; }
int @@ stray;
__global__ void bad(float* x) {
  x[0] = = 2.f;
}
__global__ void also_good(float* x) {
  for (int i = 0; i < 4; ++i) x[i] = 0.f;
}
"""


def test_error_outside_a_kernel_is_a_warning_with_line_and_col() -> None:
    m = parse(SRC, "d.cu")
    warnings = [d for d in m.diagnostics if d.severity == "warning"]
    assert len(warnings) == 1
    (w,) = warnings
    assert (w.span.line, w.span.col) == (2, 5)
    assert str(w).startswith("d.cu:2:5: warning: tree-sitter could not parse '@@'")
    assert "indexing continues" in w.message


def test_error_inside_a_kernel_names_the_kernel() -> None:
    m = parse(SRC, "d.cu")
    errors = [d for d in m.diagnostics if d.severity == "error"]
    assert len(errors) == 1
    (e,) = errors
    assert "inside kernel 'bad'" in e.message and e.span.line == 4
    assert m.errors_in(m.kernel("bad").span) == (e,)
    assert m.errors_in(m.kernel("good").span) == ()
    assert m.kernel("bad").has_error and not m.kernel("good").has_error


def test_indexing_continues_after_errors() -> None:
    m = parse(SRC)
    assert [k.name for k in m.kernels] == ["good", "bad", "also_good"]
    assert len(m.loops) == 1 and m.loops[0].function == "also_good"


def test_missing_token_diagnostic() -> None:
    m = parse("__global__ void k(float* x) {\n  foo(x[0];\n}\n")
    (d,) = m.diagnostics
    assert d.severity == "error" and d.span.length == 0 and (d.span.line, d.span.col) == (2, 11)
    assert d.message == "expected ')' inside kernel 'k'"


def test_multi_line_error_region_says_its_lines() -> None:
    m = parse("void f() {}\nREGISTER(a) {\n  x y z\n  @@ } int q;\n")
    (d,) = m.diagnostics
    assert d.message.startswith("tree-sitter could not parse 'x y z' (lines 3-4)")


def test_garbage_that_swallows_a_kernel_is_blanked_and_reported() -> None:
    # (an all-caps REGISTER_KERNEL(k, float) line is masked as a macro before parsing: ktx.ir.foreign)
    src = "register_kernel(k, float)\n\n__global__ void k(float* x) { x[0] = 1.f; }\n"
    m = parse(src)
    assert [k.name for k in m.kernels] == ["k"] and not m.kernel("k").has_error
    (d,) = m.diagnostics
    assert d.severity == "warning" and "register_kernel(k, float)" in d.message
    assert "hid the declaration after it" in d.message
    assert m.skipped and m.print() == src  # the source itself is untouched


def test_conflict_markers_are_reported() -> None:
    src = "int a;\n<<<<<<< HEAD\nint b;\n=======\nint c;\n>>>>>>> other\n"
    markers = [d for d in parse(src).diagnostics if "conflict marker" in d.message]
    assert [(d.span.line, d.severity) for d in markers] == [(2, "warning"), (4, "warning"), (6, "warning")]


def test_diagnostics_are_capped_and_counted() -> None:
    src = "".join(f"@@ {i};\n" for i in range(MAX_DIAGNOSTICS + 50))
    m = parse(src)
    assert len(m.diagnostics) == MAX_DIAGNOSTICS + 1
    assert "more syntax problems not shown" in m.diagnostics[-1].message


def test_clean_code_has_no_diagnostics() -> None:
    assert parse("__global__ void k(float* x) { x[threadIdx.x] = 0.f; }").diagnostics == ()
