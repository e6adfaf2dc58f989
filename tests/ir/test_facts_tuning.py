"""``ktx.ir.facts.tuning``: which of a kernel's template parameters and constants set its block
size, vector width, rows or items per thread (issue 22 item 3's checker asks it per kernel)."""

from __future__ import annotations

from ktx.ir import parse
from ktx.ir.facts.tuning import tuning_params

FLASHINFER_LIKE = """
template <typename T, unsigned N> struct vec_t { T v[N]; };
template <uint32_t VEC_SIZE, typename T>
__global__ void norm(T* out, const T* in, uint32_t d) {
  vec_t<T, VEC_SIZE> x;
  for (uint32_t j = 0; j < VEC_SIZE; j++) x.v[j] = in[threadIdx.x * VEC_SIZE + j];
  for (uint32_t j = 0; j < VEC_SIZE; j++) out[threadIdx.x * VEC_SIZE + j] = x.v[j];
}
"""


def roles(source: str, args: tuple[str, ...] = ()) -> list[tuple[str, str, int | None, bool]]:
    m = parse(source)
    return [(t.name, t.role, t.value, t.spec_selected) for t in tuning_params(m, m.kernels[0], args)]


def test_the_size_of_a_vector_type_is_a_vector_width_bound_by_the_spec() -> None:
    # uint32_t VEC_SIZE: an integral type perf_constants does not list, read by its use.
    assert roles(FLASHINFER_LIKE, ("8", "half")) == [("VEC_SIZE", "vector", 8, False)]


def test_a_shape_computed_argument_is_the_launchers_pick_and_switches_are_no_setting() -> None:
    src = """
template <int UNROLL, int threadsPerGroup, int DATA_TYPE, bool flag>
__global__ void k(float* y, const float* x, int n) {
  for (int i = 0; i < UNROLL; i++) y[i * threadsPerGroup + threadIdx.x] = x[i] * DATA_TYPE;
}
"""
    assert roles(src, ("{2 * n}", "256", "0", "true")) == [
        ("UNROLL", "items", None, True),
        ("threadsPerGroup", "block", 256, False),
    ]


def test_a_loop_bound_is_items_per_thread_only_when_small() -> None:
    # ``i < n`` over a problem-size constant is no per-thread count; ``j < K`` with K = 4 is.
    src = """
constexpr int n = 1048576;
constexpr int K = 4;
__global__ void k(float* y) {
  for (int i = threadIdx.x; i < n; i += blockDim.x)
    for (int j = 0; j < K; j++) y[i * K + j] = 0.f;
}
int main() { k<<<1, 256>>>(nullptr); }
"""
    assert roles(src) == [("K", "items", 4, False)]


def test_the_file_launch_gives_the_value_when_the_spec_binds_none() -> None:
    src = """
template <int BLOCK_THREADS>
__global__ void k(float* y) { y[blockIdx.x * BLOCK_THREADS + threadIdx.x] = 0.f; }
void launch(float* y) { k<128><<<64, 128>>>(y); }
"""
    assert roles(src) == [("BLOCK_THREADS", "block", 128, False)]


def test_a_width_adapts_when_the_kernel_divides_a_run_time_extent_by_it() -> None:
    m = parse(FLASHINFER_LIKE.replace("vec_t<T, VEC_SIZE> x;", "vec_t<T, VEC_SIZE> x; int r = d / VEC_SIZE;"))
    (vec,) = tuning_params(m, m.kernels[0], ("8", "half"))
    assert vec.adapts
    (fixed,) = tuning_params(parse(FLASHINFER_LIKE), parse(FLASHINFER_LIKE).kernels[0], ("8", "half"))
    assert not fixed.adapts  # only a per-thread loop bound: the launch fixes what it covers


def test_a_block_size_by_name_above_the_thread_limit_is_no_block_and_uint_widths_adapt() -> None:
    # bitsandbytes' kQuantizeBlockwise<T, BLOCK_SIZE = 4096, NUM_PER_TH = 4>: 4096 elements
    # share one absmax, a quantization block, not a thread count.
    src = """
template <typename T, int BLOCK_SIZE, int NUM_PER_TH>
__global__ void q(T* out, const T* in) {
  for (int j = 0; j < NUM_PER_TH; j++) out[blockIdx.x * BLOCK_SIZE + threadIdx.x * NUM_PER_TH + j] = in[j];
}
"""
    assert roles(src, ("float", "4096", "4")) == [("NUM_PER_TH", "items", 4, False)]
    m = parse(FLASHINFER_LIKE.replace("vec_t<T, VEC_SIZE> x;", "vec_t<T, VEC_SIZE> x; int r = d / VEC_SIZE;"))
    (vec,) = tuning_params(m, m.kernels[0], ("8", "half"))
    assert vec.kind == "template-int" and vec.index == 0 and vec.adapts
