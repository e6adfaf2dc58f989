"""unroll: one knob per loop, written as #pragma unroll through a constexpr mirror."""

from __future__ import annotations

from passtest import apply, changed, code, remarks

SRC = """\
template <int N>
__global__ void k(float* x, int n) {
  for (int i = threadIdx.x; i < n; i += blockDim.x) {
#pragma unroll 2
    for (int j = 0; j < 8; ++j) x[i] += j;
#pragma unroll
    for (int j = 0; j < 4; ++j) x[i] *= j;
#pragma unroll N
    for (int j = 0; j < N; ++j) x[i] -= j;
  }
}
"""


def test_each_loop_gets_a_knob_with_its_current_factor() -> None:
    t = apply(SRC, "unroll")
    knobs = {k.name: (k.values, k.default) for k in t.knobs}
    assert knobs == {"UNROLL_L0": ((0, 1, 2, 4, 8), 0), "UNROLL_L1": ((0, 1, 2, 4, 8), 2)}
    assert changed(SRC, code(t)) == [
        "+  #pragma unroll ktx_UNROLL_L0",
        "-#pragma unroll 2",
        "+#pragma unroll ktx_UNROLL_L1",
    ]
    assert "static constexpr int ktx_UNROLL_L0 = KTX_UNROLL_L0;" in t.source


def test_loops_it_cannot_or_need_not_expose_are_remarks() -> None:
    t = apply(SRC, "unroll")
    assert remarks(t, "skipped") == [
        "L2: already fully unrolled by a bare #pragma unroll",
        "L3: unroll factor 'N' is not an integer literal",
    ]


def test_instantiation_writes_the_factor_or_no_pragma() -> None:
    t = apply(SRC, "unroll")
    out = t.instantiate({"UNROLL_L0": 4, "UNROLL_L1": 0})
    assert changed(SRC, out)[1:] == ["+  #pragma unroll 4", "-#pragma unroll 2"]
    assert t.instantiate().split("\n", 1)[1] == SRC


def test_options_select_loops_and_cap_the_factor() -> None:
    t = apply(SRC, "unroll{loops=L1|L7,max=16}")
    assert [k.name for k in t.knobs] == ["UNROLL_L1"]
    assert t.knobs[0].values == (0, 1, 2, 4, 8, 16)
    assert remarks(t, "skipped") == ["L7: no loop L7 in k; loops: L0, L1, L2, L3"]


def test_a_loop_sharing_its_line_is_refused() -> None:
    src = "__global__ void k(float* x) { if (x) for (int i = 0; i < 4; ++i) x[i] = 0; }\n"
    t = apply(src, "unroll")
    assert t.source == src
    assert remarks(t) == ["L0: the loop shares its line with other code; a #pragma needs a line of its own"]
