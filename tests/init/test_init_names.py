"""Issue 22 in ``ktx init``: a kernel inside namespaces is drafted as ``ns::kernel``, PyTorch's
element types map to dtypes, and integer arrays whose values are indices get a TODO asking
for their range."""

from __future__ import annotations

from pathlib import Path

from ktx.draft import draft

ROPE = """\
#include <cstdint>
#include <c10/util/BFloat16.h>
namespace vllm { namespace {
template <typename scalar_t>
__global__ void rope_kernel(scalar_t* __restrict__ out, const scalar_t* __restrict__ in,
                            const int64_t* __restrict__ positions, const float* cache, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = in[i] * (scalar_t)cache[positions[i]];
}
} }
void launch(c10::BFloat16* out, const c10::BFloat16* in, const int64_t* pos, const float* cache, int n) {
  vllm::rope_kernel<c10::BFloat16><<<(n + 255) / 256, 256>>>(out, in, pos, cache, n);
}
"""

CACHE = """\
#include <cstdint>
namespace vllm {
__global__ void reshape_and_cache(const float* __restrict__ key, float* __restrict__ key_cache,
                                  const int64_t* __restrict__ slot_mapping, const int* lens,
                                  const int block_size, const int n) {
  const int64_t token = blockIdx.x;
  const int64_t slot = slot_mapping[token];
  if (slot < 0 || lens[token] == 0) return;
  const int64_t block = slot / block_size;
  for (int i = threadIdx.x; i < n; i += blockDim.x)
    key_cache[block * n * block_size + i] = key[token * n + i];
}
}
void go(const float* k, float* kc, const int64_t* sm, const int* lens, int bs, int n, int t) {
  vllm::reshape_and_cache<<<t, 256>>>(k, kc, sm, lens, bs, n);
}
"""


def _arg(text: str, name: str) -> str:
    return next(block for block in text.split("[[args]]") if f'name = "{name}"' in block)


def test_a_namespaced_kernel_with_c10_types(tmp_path: Path) -> None:
    src = tmp_path / "rope.cu"
    src.write_text(ROPE)
    text = draft(src, None, tmp_path).text
    assert 'kernel = "vllm::rope_kernel"' in text.splitlines()  # the anonymous namespace adds nothing
    assert 'dtype = "bf16"' in _arg(text, "out") and 'dtype = "bf16"' in _arg(text, "in")
    positions = _arg(text, "positions")
    assert "# TODO: values of positions: indices (cache[positions[i]])" in positions
    assert 'dist = "TODO"' in positions
    assert "dist" not in _arg(text, "cache") and "dist" not in _arg(text, "in")


def test_an_index_read_into_a_local_gets_the_todo_and_a_flag_does_not(tmp_path: Path) -> None:
    src = tmp_path / "cache.cu"
    src.write_text(CACHE)
    text = draft(src, None, tmp_path).text
    assert 'kernel = "vllm::reshape_and_cache"' in text.splitlines()
    slots = _arg(text, "slot_mapping")
    assert "values of slot_mapping: indices (slot = slot_mapping[...]; slot / block_size)" in slots
    assert "dist" not in _arg(text, "lens")  # compared only: any value does
