"""perf_constants: what ktx inspect lists and the expose pass lifts into knobs."""

from __future__ import annotations

from ktx.ir import parse
from ktx.ir.analysis import perf_constants

SRC = """
#define BLOCK 256
#define UNUSED 7
#define ROWS (2 * 4)
template <typename T, int VEC_SIZE, bool FLAG>
__global__ void k(T* out, const T* in, int n) {
  __shared__ float tile[ROWS][BLOCK];
  for (int i = threadIdx.x; i < n / VEC_SIZE; i += BLOCK) out[i] = in[i];
}
void launch(float* o, const float* i, int n, int tokens) {
  constexpr int kThreads = 128;
  const int threads = std::min(n / 8, 512);
  dim3 block(threads);
  k<float, 4, true><<<tokens, block, 0>>>(o, i, n);
  k<float, 2, false><<<tokens, kThreads>>>(o, i, n);
}
"""


def by_name() -> dict[str, object]:
    return {c.name: c for c in perf_constants(parse(SRC))}


def test_template_int_takes_value_from_first_launch_and_skips_bool() -> None:
    found = perf_constants(parse(SRC))
    vec = next(c for c in found if c.name == "VEC_SIZE")
    assert vec.kind == "template-int" and vec.value == 4 and vec.kernel == "k"
    assert any(u.kind == "loop-bound" for u in vec.uses)
    assert not any(c.name == "FLAG" for c in found)


def test_defines_only_when_used_in_launch_loop_or_shared_sizes() -> None:
    found = {c.name: c for c in perf_constants(parse(SRC))}
    assert found["BLOCK"].value == 256 and found["BLOCK"].kind == "define"
    assert {u.kind for u in found["BLOCK"].uses} == {"loop-bound", "shared-size"}
    assert found["ROWS"].value == 8
    assert "UNUSED" not in found


def test_constexpr_used_at_launch_and_literals_through_locals() -> None:
    found = perf_constants(parse(SRC))
    names = {c.name: c for c in found}
    assert names["kThreads"].value == 128 and names["kThreads"].kind == "constexpr"
    literals = sorted(c.value for c in found if c.kind == "launch-literal")
    # 512 reaches the launch through `threads` and `block`; the divisor 8 is a pack width.
    assert literals == [512]


def test_divisor_literals_are_not_block_sizes() -> None:
    src = "__global__ void k(){}\nvoid f(int n){ dim3 b((n + 31) / 32); k<<<1, b>>>(); }"
    assert [c for c in perf_constants(parse(src)) if c.kind == "launch-literal"] == []
