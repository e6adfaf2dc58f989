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


# -- items coverage and the values the file instantiates (issue 22 item 3: per-shape picks) ------

from ktx.ir.facts.tuning import instantiated_values, items_coverage  # noqa: E402

GATHER = """
namespace gather { constexpr int threads = 256; constexpr int granularity = 16; }
template <typename T, int copyUnroll>
__global__ void gather_k(T* out, const T* in, const int n_channels) {
  constexpr int vector_size = gather::granularity / sizeof(T);
  constexpr int stride = vector_size * gather::threads;
  const int channel_offset = threadIdx.x * vector_size;
  for (int i = 0; i < copyUnroll; i++) {
    if (i * stride + channel_offset < n_channels) {
      T buf[vector_size];
      const int at = blockIdx.x * n_channels + channel_offset + i * stride;
      for (int j = 0; j < vector_size; j++) buf[j] = in[at + j];
      for (int j = 0; j < vector_size; j++) out[at + j] = buf[j];
    }
  }
}
#define LAUNCH_FOR_UNROLL(COUNT) case COUNT: gather_k<T, COUNT><<<grid, 256>>>(out, in, n); break;
template <typename T>
void launch(T* out, const T* in, int n, int grid, int copy_unroll) {
  switch (copy_unroll) { LAUNCH_FOR_UNROLL(1) LAUNCH_FOR_UNROLL(2) LAUNCH_FOR_UNROLL(3) }
}
"""

PREDICATED = """
template <typename T, int UNROLL>
__global__ void norm(T* out, const T* x, int elems_per_row) {
  constexpr int T_per_load = 16 / sizeof(T);
  const int thread_offset = threadIdx.x * T_per_load;
  const int stride = blockDim.x * T_per_load;
  T local[UNROLL * T_per_load];
  for (int i = 0; i < UNROLL; i++) {
    T* it = local + i * T_per_load;
    const int off = i * stride + thread_offset;
    const bool do_loads = off < elems_per_row;
    load_global(it, x + blockIdx.x * elems_per_row + off, do_loads);
    for (int j = 0; j < T_per_load; j++) it[j] = it[j] * (T)2;
    if (do_loads) { store_global(out + blockIdx.x * elems_per_row + off, it); }
  }
}
#define LAUNCH_ONE(UNROLL) norm<T, UNROLL><<<rows, 256>>>(out, x, e);
#define LAUNCH_ALL(UNROLL) if (pre) { LAUNCH_ONE(UNROLL) } else { LAUNCH_ONE(UNROLL) }
template <typename T>
void launch(T* out, const T* x, int rows, int e, bool pre) {
  constexpr int internalUnroll = sizeof(T) == 4 ? 4 : 2;
  if (e <= 4096) { LAUNCH_ALL(1 * internalUnroll); } else { LAUNCH_ALL(2 * internalUnroll); }
}
"""


def _coverage(source: str, name: str, args: tuple[str, ...]):  # type: ignore[no-untyped-def]
    m = parse(source)
    return items_coverage(m, m.kernels[0], name, args)


def test_a_guarded_block_strided_items_loop_covers_count_times_its_step() -> None:
    # DeepSpeed moe_gather: the step is vector_size * gather::threads = 8 * 256 halves, a fixed
    # step (the kernel does not read blockDim); the whole body is under the guard.
    cov = _coverage(GATHER, "copyUnroll", ("__half", "{x}"))
    assert cov is not None
    assert (cov.step_threads, cov.step_fixed, cov.extent) == (0, 2048, "n_channels")
    assert cov.step("B") == "2048"
    # floats: 4 per 16 bytes
    cov_f = _coverage(GATHER, "copyUnroll", ("float", "{x}"))
    assert cov_f is not None and cov_f.step_fixed == 1024


def test_a_predicate_the_loads_take_guards_and_a_step_of_the_block_follows_blockdim() -> None:
    # DeepSpeed pre_rms_norm: stride = blockDim.x * T_per_load, the loads take do_loads, the
    # store is under if (do_loads); the per-thread array and pointers into it need no guard.
    cov = _coverage(PREDICATED, "UNROLL", ("__half", "{x}"))
    assert cov is not None
    assert (cov.step_threads, cov.step_fixed, cov.extent) == (8, 0, "elems_per_row")
    assert cov.step("BLOCK_X") == "8 * (BLOCK_X)"


def test_an_unguarded_access_or_a_guard_that_runs_past_the_data_gives_no_coverage() -> None:
    unguarded = GATHER.replace("if (i * stride + channel_offset < n_channels) {", "{")
    assert _coverage(unguarded, "copyUnroll", ("__half", "{x}")) is None
    # the loads take the predicate but the store does not: a count above the pick writes past the row
    store_open = PREDICATED.replace("if (do_loads) { store_global", "{ store_global")
    assert _coverage(store_open, "UNROLL", ("__half", "{x}")) is None
    # a break guard: if (col >= n) break; then the accesses are guarded
    breaking = """
template <int BPW>
__global__ void k(float* y, const float* x, int dim) {
  for (int i = 0; i < BPW; i++) {
    int column = threadIdx.x + 1024 * i;
    if (column >= dim) break;
    y[blockIdx.x * dim + column] = x[blockIdx.x * dim + column];
  }
}
"""
    cov = _coverage(breaking, "BPW", ())
    assert cov is not None and (cov.step_threads, cov.step_fixed) == (0, 1024)
    # the same comparison the wrong way round (the body runs past the data) is no guard
    wrong = breaking.replace("if (column >= dim) break;", "if (column < dim) break;")
    assert _coverage(wrong, "BPW", ()) is None
    # a step that does not start at the thread's own offset is not the block-strided pattern
    shifted = breaking.replace("int column = threadIdx.x + 1024 * i;", "int column = 5 + 1024 * i;")
    assert _coverage(shifted, "BPW", ()) is None


def test_the_values_the_file_instantiates_follow_dispatch_macros_and_launcher_constants() -> None:
    m = parse(GATHER)
    assert instantiated_values(m, m.kernels[0], "copyUnroll", ("__half", "{x}")) == (1, 2, 3)
    p = parse(PREDICATED)
    # nested macros (LAUNCH_ALL -> LAUNCH_ONE), internalUnroll = sizeof(T) == 4 ? 4 : 2 with T bound
    assert instantiated_values(p, p.kernels[0], "UNROLL", ("__half", "{x}")) == (2, 4)
    assert instantiated_values(p, p.kernels[0], "UNROLL", ("float", "{x}")) == (4, 8)
    # a name the launches never write an integer for gives nothing
    assert instantiated_values(m, m.kernels[0], "T", ()) == ()


def test_no_false_settings_from_other_kernels_run_time_locals_or_layout_rows() -> None:
    # FasterTransformer declares ``const int ite = 4`` in each kernel: one setting, this kernel's
    two = """
__global__ void a(float* y, int n) {
  const int ite = 4; for (int i = 0; i < ite; i++) y[threadIdx.x * ite + i] = 0; }
__global__ void b(float* y, int n) {
  const int ite = 4; for (int i = 0; i < ite; i++) y[threadIdx.x * ite + i] = 1; }
"""
    m = parse(two)
    assert [(t.name, t.role) for t in tuning_params(m, m.kernels[1])] == [("ite", "items")]
    # lightseq: the kernel's block_dim is blockDim.x * blockDim.y (a value); the launcher's is the block
    adam = """
__global__ void adam(float* p, int n) {
  const int block_dim = blockDim.x * blockDim.y;
  const int i = blockIdx.x * block_dim + threadIdx.x;
  if (i < n) p[i] = 0;
}
void launch(float* p, int n) {
  const int block_dim = 1024; adam<<<(n + block_dim - 1) / block_dim, block_dim>>>(p, n); }
"""
    a = parse(adam)
    assert [(t.name, t.role, t.value) for t in tuning_params(a, a.kernels[0])] == [
        ("block_dim", "block", 1024)
    ]
    # moe_sum: input is [tokens, TOPK, d]; TOPK counts rows of the layout, it is what is computed
    moe = """
template <typename T, int TOPK>
__global__ void moe_sum(T* out, const T* input, int d) {
  for (int idx = threadIdx.x; idx < d; idx += blockDim.x) {
    float x = 0.f;
    for (int k = 0; k < TOPK; ++k) x += (float)input[(blockIdx.x * TOPK + k) * d + idx];
    out[blockIdx.x * d + idx] = (T)x;
  }
}
"""
    assert roles(moe, ("float", "2")) == []
    # items per thread named ``T_per_thread`` / ``ITEMS_PER_THREAD`` is no block size
    per_thread = """
template <typename T, int T_per_thread>
__global__ void ln(T* y, int n) {
  T v[T_per_thread];
  for (int i = 0; i < T_per_thread; i++) y[threadIdx.x * T_per_thread + i] = v[i];
}
"""
    assert roles(per_thread, ("float", "4")) == [("T_per_thread", "items", 4, False)]


SHARED_BY_THREAD = """
#define WARP_SIZE 32
#define NW 4
#define NT 128
__global__ void k(float* y, int n) {
  int warp = threadIdx.x / WARP_SIZE;
  int lane = threadIdx.x % WARP_SIZE;
  __shared__ float per_warp[NW];
  __shared__ float per_thread[NT];
  __shared__ float per_lane[2][NW * 8];
  __shared__ float fixed[64];
  per_warp[warp] = 1.f;
  per_thread[threadIdx.x] = 2.f;
  per_lane[0][lane] = 3.f;
  per_warp[threadIdx.y >> 1] = 4.f;
  for (int i = 0; i < n; ++i) y[i] = per_warp[i] + fixed[threadIdx.x];
}
"""


def test_shared_arrays_a_constant_sizes_at_the_threads_or_warps_id() -> None:
    from ktx.ir.facts.tuning import thread_indexed_shared

    m = parse(SHARED_BY_THREAD)
    fn = m.kernels[0]
    got = {(t.array, t.extent, t.axis, t.per, t.modulo) for t in thread_indexed_shared(m, fn, "NW")}
    # warp id through a local, threadIdx.y >> 1, the lane in the second dimension; not per_warp[i]
    assert got == {
        ("per_warp", "NW", 0, 32, False),
        ("per_warp", "NW", 1, 2, False),
        ("per_lane", "NW * 8", 0, 32, True),
    }
    (own,) = thread_indexed_shared(m, fn, "NT")
    assert (own.array, own.per, own.needed("bx")) == ("per_thread", 1, "bx")
    assert thread_indexed_shared(m, fn, "WARP_SIZE") == ()  # sizes no array
    warp = next(t for t in thread_indexed_shared(m, fn, "NW") if t.axis == 0 and not t.modulo)
    assert warp.needed("bx") == "ceil_div(bx, 32)"
