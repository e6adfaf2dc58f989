"""Kernels that use syntax tree-sitter-cuda does not read parse anyway, or are skipped alone."""

from __future__ import annotations

import pytest
from ktx.ir import parse
from ktx.ir.errors import KtxError
from ktx.ir.foreign import mask_foreign_syntax

LAMBDA = """\
__global__ void k(float* y, const float* x, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  auto f = [=] __device__ (float v) { return v * 2.f; };
  if (i < n) y[i] = f(x[i]);
}
"""


def test_extended_lambda_parses_without_error() -> None:
    m = parse(LAMBDA, "l.cu")
    assert m.diagnostics == ()
    assert m.print() == LAMBDA, "masking never changes the source the module keeps"


def test_restrict_macro_from_a_header_marks_locals_and_params() -> None:
    src = (
        "__global__ void k(float* MY_RESTRICT y, const float* MY_RESTRICT x, int n) {\n"
        "  const float * MY_RESTRICT a = x;\n"
        "  y[threadIdx.x] = a[threadIdx.x];\n"
        "}\n"
    )
    m = parse(src)
    assert m.diagnostics == ()
    assert [p.restrict for p in m.kernel().params] == [True, True, False]
    assert m.attribute_macros["MY_RESTRICT"] == ("__restrict__",)


def test_restrict_macro_defined_in_the_file_marks_params() -> None:
    m = parse("#define RS __restrict__\n__global__ void k(float* RS y) { y[0] = 1.f; }\n")
    assert m.diagnostics == () and m.kernel().params[0].restrict


@pytest.mark.parametrize(
    "code",
    [b"y = a * B;", b"y = a * B + c;", b"float * const p = q;", b"x = a * f(b);", b"T * p = q;"],
)
def test_valid_code_is_left_alone(code: bytes) -> None:
    assert mask_foreign_syntax(code) == (code, {})


def test_an_unknown_non_restrict_macro_is_masked_as_no_qualifier() -> None:
    text, found = mask_foreign_syntax(b"int * ALIGNED p = q;")
    assert text == b"int *         p = q;" and found == {"ALIGNED": ()}


BROKEN = """\
__global__ void good(float* y) { y[threadIdx.x] = 1.f; }
__global__ void bad(float* y) {
  y[0] = = 2.f;
}
"""


def test_a_broken_kernel_is_listed_alone_with_its_line() -> None:
    m = parse(BROKEN, "b.cu")
    ((fn, d),) = m.broken_kernels()
    assert fn.name == "bad" and d.span.line == 3
    m.require_parsed(m.kernel("good"))
    with pytest.raises(KtxError) as exc:
        m.require_parsed(m.kernel("bad"))
    assert exc.value.location is not None and exc.value.location.line == 3
    assert "b.cu:3:" in str(exc.value)


@pytest.mark.parametrize(
    ("code", "masked"),
    [
        (b"  CUDA_1D_KERNEL_LOOP(i, n) {\n", b"  while              (i, n) {\n"),
        (b"  CUTLASS_PRAGMA_UNROLL\n  for (;;) {}\n", b"                       \n  for (;;) {}\n"),
        (b"  typename K::Reduce(smem).Sum(v);\n", b"           K::Reduce(smem).Sum(v);\n"),
        (b"  v = typename K::Reduce(smem).Sum(v);\n", b"  v =          K::Reduce(smem).Sum(v);\n"),
        (b"__global__ BOUNDS(256) void k(", b"__global__             void k("),
        (b"INSTANTIATE(__half)\n\ntemplate <typename T>\n", b" " * 19 + b"\n\ntemplate <typename T>\n"),
        (b"MAKE_kQuant(half, 64)\nMAKE_kQuant(float, 64)\n", b" " * 21 + b"\n" + b" " * 22 + b"\n"),
    ],
    ids=[
        "loop-macro",
        "pragma-macro",
        "typename-cast",
        "typename-operand",
        "signature-macro",
        "file-macro",
        "file-macro-mixed-case",
    ],
)
def test_foreign_statements_are_masked(code: bytes, masked: bytes) -> None:
    assert mask_foreign_syntax(code)[0] == masked


@pytest.mark.parametrize(
    "code",
    [
        b"  FOO(x);\n  {\n",  # a call statement, then a block
        b"TEST(a, b) {\n",  # a file-scope definition macro (not indented)
        b"DEFINE_KERNEL(k)\n{\n",  # a definition whose body follows on the next line
        b"REGISTER(k);\n",
        b"Kernel(int a)\n{\n",  # a definition split over lines
        b"Foo_bar(int a);\n",
        b"template <typename T> void f(typename T::X a) {}\n",
        b"  x = A\n    + b;\n",  # a lone word continuing an expression, not before a loop
    ],
)
def test_valid_statements_are_not_masked(code: bytes) -> None:
    assert mask_foreign_syntax(code)[0] == code


ISOLATED = """\
__global__ void good(float* y) { y[threadIdx.x] = 1.f; }
__global__ void bad(float* y, int n) {
  y[0] = (1 +
   2 + ;
}
__global__ void after(float* y) { y[threadIdx.x] = 2.f; }
"""


def test_a_body_whose_error_spans_lines_is_isolated() -> None:
    m = parse(ISOLATED, "i.cu")
    assert [k.name for k in m.kernels] == ["good", "bad", "after"]
    assert len(m.isolated) == 1 and m.isolated[0].snippet == "= (1 +"
    ((fn, d),) = m.broken_kernels()
    assert (fn.name, d.span.line) == ("bad", 3) and "skipped alone" in d.message
    assert m.print() == ISOLATED
