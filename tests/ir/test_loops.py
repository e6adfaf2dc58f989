"""Loops: kind, induction variable, header pieces, attached pragmas, nesting."""

from __future__ import annotations

from ktx.ir import Module, Span, parse

SRC = """\
#define UNROLL 4
__global__ void k(float* x, int n) {
  for (int i = threadIdx.x; i < n; i += blockDim.x) {
#pragma unroll
    for (int j = 0; j < 4; ++j) {
#pragma unroll UNROLL
      for (unsigned v = 0u; v < UNROLL; v++) x[i] += j * v;
    }
  }
  int w = n;
  while (w > 0) { --w; }
  do { ++w; } while (w < 3);
  // not a pragma for the next loop:
  #pragma unroll 2
  int gap = 0;
  for (w = 0; w < gap; w += 2) {}
  float vals[2] = {1.f, 2.f};
  for (float v : vals) x[0] += v;
  auto body = [&]() { for (int q = 0; q < 2; ++q) x[q] = 0; };
  body();
}
__device__ void d() { for (;;) break; }
"""


def mod() -> Module:
    return parse(SRC)


def txt(m: Module, span: Span | None) -> str:
    assert span is not None
    return m.text(span)


def test_kinds_vars_and_functions() -> None:
    m = mod()
    got = [(lp.id, lp.kind, lp.var, lp.function) for lp in m.loops]
    assert got == [
        (0, "for", "i", "k"),
        (1, "for", "j", "k"),
        (2, "for", "v", "k"),
        (3, "while", None, "k"),
        (4, "do", None, "k"),
        (5, "for", "w", "k"),
        (6, "range-for", "v", "k"),
        (7, "for", "q", "k"),
        (8, "for", None, "d"),
    ]


def test_header_pieces_are_separate_spans() -> None:
    m = mod()
    outer = m.loops[0]
    assert outer.init is not None and outer.cond is not None and outer.step is not None
    assert (m.text(outer.init), m.text(outer.cond), m.text(outer.step)) == (
        "int i = threadIdx.x",
        "i < n",
        "i += blockDim.x",
    )
    assign = m.loops[5]
    assert assign.init is not None and m.text(assign.init) == "w = 0"
    assert txt(m, m.loops[3].cond) == "w > 0" and m.loops[3].init is None
    assert txt(m, m.loops[4].cond) == "w < 3"
    rng = m.loops[6]
    assert rng.init is not None and m.text(rng.init) == "vals" and rng.step is None
    forever = m.loops[8]
    assert (forever.init, forever.cond, forever.step) == (None, None, None)
    assert m.text(outer.body).startswith("{") and m.text(m.loops[2].body) == "x[i] += j * v;"


def test_pragmas_attach_to_the_next_loop_only() -> None:
    m = mod()
    p1, p2 = m.loops[1].pragma, m.loops[2].pragma
    assert p1 is not None and p1.is_unroll and p1.unroll_factor is None and p1.text == "unroll"
    assert p2 is not None and p2.unroll_factor == "UNROLL" and m.text(p2.span) == "#pragma unroll UNROLL"
    assert m.loops[0].pragma is None
    assert m.loops[5].pragma is None  # a statement sits between `#pragma unroll 2` and the loop


def test_nesting_parent_and_depth() -> None:
    m = mod()
    assert [(lp.parent, lp.depth) for lp in m.loops[:3]] == [(None, 0), (0, 1), (1, 2)]
    assert m.loops[7].parent is None and m.loops[7].depth == 0  # inside a lambda: a new nest
    assert m.loops_in(m.kernel("k")) == m.loops[:8]


def test_grid_stride_loop() -> None:
    m = parse(
        "__global__ void g(float* y, size_t n) {\n"
        "  for (size_t i = blockIdx.x * blockDim.x + threadIdx.x; i < n;\n"
        "       i += (size_t)blockDim.x * gridDim.x) y[i] = 0;\n"
        "}\n"
    )
    (lp,) = m.loops
    assert lp.var == "i" and txt(m, lp.step) == "i += (size_t)blockDim.x * gridDim.x"
    assert lp.span.line == 2 and lp.step is not None and lp.step.line == 3
