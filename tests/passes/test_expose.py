"""expose: existing performance constants become knobs; the others are remarks with reasons."""

from __future__ import annotations

from ktx.ir.launch import LaunchMapping
from passtest import apply, remarks, suite_source

TEMPLATED = """\
#define ITEMS 4
template <typename T, int NUM_THREADS>
__global__ void __launch_bounds__(NUM_THREADS) k(T* x, int n) {
  for (int i = threadIdx.x; i < n; i += NUM_THREADS) {
    for (int j = 0; j < ITEMS; ++j) x[i * ITEMS + j] = 0;
  }
}
void launch(float* x, int n) {
  k<float, 256><<<n / 256, 256>>>(x, n);
}
"""


def test_template_int_and_define() -> None:
    t = apply(TEMPLATED, "expose")
    knobs = {k.name: (k.values, k.default) for k in t.knobs}
    assert knobs["NUM_THREADS"] == ((64, 128, 256, 512, 1024), 256)
    assert knobs["ITEMS"] == ((1, 2, 4, 8, 16), 4)
    assert "k<float, KTX_NUM_THREADS><<<n / KTX_NUM_THREADS, KTX_NUM_THREADS>>>" in t.source
    launch = t.launch()
    assert launch is not None and launch.grid == ("n // NUM_THREADS",)
    assert "#define ITEMS KTX_ITEMS" in t.source
    assert t.template_args == ("float", "{NUM_THREADS}")
    assert t.name_expression({"NUM_THREADS": 128}) == "k<float, 128>"
    out = t.instantiate({"NUM_THREADS": 512, "ITEMS": 2})
    assert "k<float, 512><<<" in out and "#define ITEMS 2" in out


def test_launcher_constants_and_the_mapping() -> None:
    t = apply(suite_source("merge_attn_states"), "expose")
    assert [k.name for k in t.knobs] == ["NUM_THREADS"]
    assert "constexpr unsigned int NUM_THREADS = KTX_NUM_THREADS;" in t.source
    launch = t.launch()
    assert launch is not None and launch.block == ("NUM_THREADS",)
    assert "pack_size: pack_size is computed from sizeof" in " ".join(remarks(t, "skipped")) or any(
        "computed from sizeof" in r for r in remarks(t, "skipped")
    )


def test_launch_literal_caps_are_named_after_their_variable() -> None:
    t = apply(suite_source("silu_and_mul"), "expose")
    (knob,) = t.knobs
    assert (knob.name, knob.values, knob.default) == ("BLOCK_MAX", (64, 128, 256, 512, 1024), 256)
    assert "dim3 block(std::max(1, std::min(d / vec_size, KTX_BLOCK_MAX)));" in t.source
    launch = t.launch()
    assert launch is not None and launch.block == ("max(1, min(d // (16 // 2), BLOCK_MAX))",)


def test_refusals_say_why() -> None:
    rms = remarks(apply(suite_source("rmsnorm"), "expose"), "skipped")
    assert "WARP_SIZE: WARP_SIZE is the warp size, fixed by the hardware" in rms
    assert any("32 is the warp width the kernel's shuffles assume" in r for r in rms)
    quant = remarks(apply(suite_source("per_token_group_quant_fp8"), "expose"), "skipped")
    assert quant[0].startswith("THREADS_PER_GROUP: THREADS_PER_GROUP maps threads to work (threadIdx.x / ")
    assert quant[1] == (
        "THREADS_PER_GROUP: THREADS_PER_GROUP must stay equal to the device-side THREADS_PER_GROUP, "
        "which is not exposed"
    )
    moe = remarks(apply(suite_source("moe_sum"), "expose"), "skipped")
    assert moe[0].startswith(
        "TOPK: TOPK takes different values at its 8 launch sites (1, 2, 3, 4, 5, 6, 7, 8)"
    )


def test_names_option_selects() -> None:
    t = apply(TEMPLATED, "expose{names=ITEMS}")
    assert [k.name for k in t.knobs] == ["ITEMS"]


GROUPED = """\
template <typename T, int GROUP>
__global__ void scale_groups(T* out, const T* in, float* scales, int n) {
  int g = blockIdx.x * blockDim.x + threadIdx.x;
  float s = 0.f;
  for (int j = 0; j < GROUP; ++j) s = fmaxf(s, fabsf(float(in[g * GROUP + j])));
  scales[g] = s;
}
void launch(float* out, const float* in, float* scales, int groups) {
  scale_groups<float, 128><<<(groups + 255) / 256, 256>>>(out, in, scales, groups);
}
"""


def test_a_template_argument_the_spec_sets_from_a_shape_is_refused() -> None:
    """The spec's ``template_args = [..., "{group}"]`` makes GROUP part of the problem: the
    reference and the buffers' extents follow it, so no value but the spec's is right."""
    from ktx.ir import parse
    from ktx.ir.launch import LaunchMapping

    from ktx.pipeline import run

    spec_mapping = LaunchMapping(("cdiv(groups, 256)",), ("256",), "0", (), "spec")
    t = run(parse(GROUPED), "expose", template_args=("float", "{group}"), mapping=spec_mapping)
    assert "GROUP" not in {k.name for k in t.knobs}
    (why,) = [o.message for o in t.outcomes if o.site == "GROUP"]
    assert why.startswith("GROUP is set by the spec from {group}: it selects what is computed")
    # From the file alone GROUP is a literal at its one launch, and nothing in the kernel says
    # it is a dimension of a buffer (g * GROUP has no scalar parameter): it stays a knob.
    assert "GROUP" in {k.name for k in apply(GROUPED, "expose").knobs}


def test_a_constant_named_as_a_spec_shape_variable_is_refused() -> None:
    from ktx.ir import parse
    from ktx.ir.launch import LaunchMapping

    from ktx.pipeline import run

    source = "#define TOPK 2\n" + GROUPED.replace("j < GROUP", "j < GROUP * TOPK")
    spec_mapping = LaunchMapping(("cdiv(groups, 256)", "topk"), ("256",), "0", (), "spec")
    t = run(parse(source), "expose", template_args=("float", "128"), mapping=spec_mapping)
    (why,) = [o.message for o in t.outcomes if o.site == "TOPK"]
    assert why.startswith("TOPK is the shape variable topk of the launch mapping")


def test_a_template_block_size_in_a_dim3_local_or_picked_by_shape_is_left_to_block_size() -> None:
    # ``dim3 b(256); k<float, 256><<<g, b>>>``: a knob on the template argument alone would launch
    # 256 threads for another NUM_THREADS, and one on the local's 256 alone the reverse; likewise a
    # launcher that picks among instantiations. block-size moves both (it is tested there).
    local = TEMPLATED.replace(
        "  k<float, 256><<<n / 256, 256>>>(x, n);", "  dim3 b(256);\n  k<float, 256><<<n / 256, b>>>(x, n);"
    )
    picked = TEMPLATED.replace(
        "  k<float, 256><<<n / 256, 256>>>(x, n);",
        "  if (n < 4096) k<float, 128><<<n / 128, 128>>>(x, n);\n"
        "  else k<float, 256><<<n / 256, 256>>>(x, n);",
    )
    for src in (local, picked):
        t = apply(src, "expose")
        assert [k.name for k in t.knobs] == ["ITEMS"], remarks(t)
        said = "\n".join(remarks(t))
        assert "NUM_THREADS: NUM_THREADS is the launch's block size" in said
    t = apply(local, "expose")
    assert any("256 sets the block of a launch" in r for r in remarks(t))


#: DeepSpeed fused_bias_residual's launcher: the grid rounds up by the block's literal
GRID_REPEATS = """\
__global__ void k(float* out, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = 1.f;
}
void launch(float* out, int n, cudaStream_t stream) {
  dim3 block_dims(1024);
  dim3 grid_dims((n - 1) / 1024 + 1);
  k<<<grid_dims, block_dims, 0, stream>>>(out, n);
}
"""


def test_a_block_literal_the_grid_repeats_is_refused() -> None:
    """Session 8: BLOCK_DIMS=256 kept the grid of n / 1024 blocks and left three quarters of
    the elements unwritten (every such candidate failed verification). block-size moves both."""
    t = apply(GRID_REPEATS, "expose")
    assert not t.knobs
    assert any("the grid repeats the block's 1024" in r and "block-size" in r for r in remarks(t, "skipped"))
    moved = apply(GRID_REPEATS, "block-size")
    launch = moved.launch()
    assert launch is not None
    grid, block, _ = launch.evaluate({"n": 4096, "BLOCK_X": 256})
    assert grid[0] * block[0] >= 4096


#: exllamav2 rms_norm: NUM_WARPS sizes the block through NUM_THREADS
THROUGH = """\
#define NUM_WARPS 32
#define NUM_THREADS (NUM_WARPS * 32)
__global__ void k(float* out, const float* x, int dim) {
  __shared__ float sums[NUM_WARPS];
  int warp = threadIdx.x / 32;
  if (threadIdx.x % 32 == 0) sums[warp] = x[blockIdx.x * dim + warp];
  __syncthreads();
  if (threadIdx.x < NUM_WARPS) out[blockIdx.x * NUM_WARPS + threadIdx.x] = sums[threadIdx.x];
}
void launch(float* out, const float* x, int rows, int dim) {
  dim3 blockDim, gridDim;
  blockDim.x = NUM_THREADS;
  gridDim.x = rows;
  k<<<gridDim, blockDim>>>(out, x, dim);
}
"""


def test_a_constant_that_sets_the_launch_the_spec_cannot_follow_is_refused() -> None:
    """A spec whose block is the literal 1024 cannot follow NUM_WARPS: session 8 measured
    NUM_WARPS=64 and 128 with a block of 1024, and both failed verification."""
    spec = LaunchMapping(("rows",), ("1024",), "0", (), "spec")
    t = apply(THROUGH, "expose", mapping=spec)
    assert "NUM_WARPS" not in {k.name for k in t.knobs}
    assert any("NUM_WARPS sets the launch (through NUM_THREADS)" in r for r in remarks(t, "skipped"))


def test_a_spec_var_for_the_constant_lets_it_follow() -> None:
    """The control: a spec naming NUM_WARPS in [vars] lets the block follow the knob."""
    spec = LaunchMapping(("rows",), ("NUM_WARPS * 32",), "0", (("NUM_WARPS", "32"),), "spec")
    t = apply(THROUGH, "expose", mapping=spec)
    assert "NUM_WARPS" in {k.name for k in t.knobs}
    launch = t.launch()
    assert launch is not None
    assert launch.evaluate({"rows": 4, "NUM_WARPS": 16})[1] == (512,)


#: exllamav2 quantize_kernel / pack_rows_4: the block's axes are two #defines
DEFINES_2D = """\
#define BLOCKSIZE_X 32
#define BLOCKSIZE_Y 16
__global__ void k(const float* __restrict__ in, float* __restrict__ out, int rows, int columns) {
  int column = blockIdx.x * blockDim.x + threadIdx.x;
  int row = blockIdx.y * blockDim.y + threadIdx.y;
  if (column >= columns) return;
  if (row >= rows) return;
  out[row * columns + column] = in[row * columns + column];
}
void launch(const float* in, float* out, int rows, int columns) {
  dim3 threads(BLOCKSIZE_X, BLOCKSIZE_Y);
  dim3 blocks((columns + BLOCKSIZE_X - 1) / BLOCKSIZE_X, (rows + BLOCKSIZE_Y - 1) / BLOCKSIZE_Y);
  k<<<blocks, threads>>>(in, out, rows, columns);
}
"""


def test_each_define_follows_its_own_block_axis() -> None:
    """pack_rows_4's spec: grid x ``(columns * 4 // 32 + 32 - 1) // 32``: BLOCKSIZE_X replaces the
    block x and grid x's rounding, not the 32 bits a word nor anything on y."""
    spec = LaunchMapping(
        ("(columns * 4 // 32 + 32 - 1) // 32", "(rows + 16 - 1) // 16"), ("32", "16"), "0", (), "spec"
    )
    t = apply(DEFINES_2D, "expose", mapping=spec)
    launch = t.launch()
    assert launch is not None
    assert launch.grid == (
        "(columns * 4 // 32 + BLOCKSIZE_X - 1) // BLOCKSIZE_X",
        "(rows + BLOCKSIZE_Y - 1) // BLOCKSIZE_Y",
    )
    assert launch.block == ("BLOCKSIZE_X", "BLOCKSIZE_Y")


def test_a_value_on_two_block_axes_is_refused() -> None:
    """quantize_kernel's spec writes 32 on both axes: BLOCKSIZE_X took both (block y and grid y
    with it); neither define can be told apart, so both are refused."""
    src = DEFINES_2D.replace("#define BLOCKSIZE_Y 16", "#define BLOCKSIZE_Y 32")
    spec = LaunchMapping(("(columns + 32 - 1) // 32", "(rows + 32 - 1) // 32"), ("32", "32"), "0", (), "spec")
    t = apply(src, "expose", mapping=spec)
    assert not t.knobs
    assert sum("writes its value 32 on 2 axes" in r for r in remarks(t, "skipped")) == 2


SIZE_IN_MAIN = """\
__global__ void saxpy(const float a, const float* x, float* z, const size_t n) {
  for (size_t i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) z[i] = a * x[i];
}
void launch(const float a, const float* x, float* z, const size_t n) {
  saxpy<<<264, 1024>>>(a, x, z, n);
}
int main() {
  const size_t n = 10485760;
  launch(2.f, nullptr, nullptr, n);
}
"""


def test_a_problem_size_the_spec_names_but_the_launch_does_not_read_is_refused() -> None:
    """cuda-samples saxpy: ``n`` in main() is the spec's ``[vars] n`` (the buffers' length); the
    spec's grid and block do not read it. It selects what is computed: no knob."""
    spec = LaunchMapping(("264",), ("1024",), "0", (("n", "10485760"),), "spec")
    t = apply(SIZE_IN_MAIN, "expose", mapping=spec)
    assert "N" not in {k.name for k in t.knobs} and "n" not in {k.name for k in t.knobs}
    assert any("a spec [vars] entry the launch does not read" in r for r in remarks(t, "skipped"))


VEC_PICKED = """\
template <typename T, unsigned N> struct vec_t { T v[N]; };
template <uint32_t VEC_SIZE, typename T>
__global__ void norm(T* out, const T* in, uint32_t d) {
  vec_t<T, VEC_SIZE> x;
  for (uint32_t i = threadIdx.x * VEC_SIZE; i < d; i += blockDim.x * VEC_SIZE) {
    for (uint32_t j = 0; j < VEC_SIZE; j++) x.v[j] = in[blockIdx.x * d + i + j];
    for (uint32_t j = 0; j < VEC_SIZE; j++) out[blockIdx.x * d + i + j] = x.v[j];
  }
}
#define DISPATCH_VEC(vec_size, VEC_SIZE, ...) \\
  if (vec_size == 8) { constexpr uint32_t VEC_SIZE = 8; __VA_ARGS__ } \\
  else { constexpr uint32_t VEC_SIZE = 1; __VA_ARGS__ }
template <typename T>
void launch(T* out, const T* in, uint32_t d, uint32_t rows) {
  const uint32_t vec_size = d % 8 == 0 ? 8 : 1;
  DISPATCH_VEC(vec_size, VEC_SIZE, { norm<VEC_SIZE, T><<<rows, 128>>>(out, in, d); })
}
"""


def test_a_vector_width_the_launcher_picks_by_name_is_a_knob_no_wider_than_the_spec_binds() -> None:
    # FlashInfer's RMSNormKernel<VEC_SIZE, T>: the launcher picks VEC_SIZE through a dispatch
    # macro (no integer at the launch). The spec binds 8, the widest the launcher picks; the knob
    # replaces the pick, narrower widths only (a wider one needs an alignment nothing established).
    unbound = apply(VEC_PICKED, "expose{names=VEC_SIZE}")
    assert unbound.knobs == ()
    assert any("VEC_SIZE" in r and "integer" in r for r in remarks(unbound))
    t = apply(VEC_PICKED, "expose{names=VEC_SIZE}", template_args=["8", "half"])
    (knob,) = t.knobs
    assert (knob.name, knob.values, knob.default) == ("VEC_SIZE", (2, 4, 8), 8)
    assert t.template_args == ("{VEC_SIZE}", "half")
    assert t.name_expression({"VEC_SIZE": 4}) == "norm<4, half>"
    assert "norm<KTX_VEC_SIZE, T><<<rows, 128>>>" in t.source
    # A width computed per shape by the spec is the launcher's pick ktx does not replace.
    picked = "{8 if d % 8 == 0 else 1}"
    per_shape = apply(VEC_PICKED, "expose{names=VEC_SIZE}", template_args=[picked, "half"])
    assert per_shape.knobs == ()


FIXED_SLICE = """\
template <typename T, int threadsPerHead, int granularity>
__global__ void rope(T* q, int head_size) {
  constexpr int T_per_thread = granularity / sizeof(T);
  const int head = blockIdx.x * (256 / threadsPerHead) + threadIdx.x / threadsPerHead;
  const int base = (threadIdx.x % threadsPerHead) * T_per_thread;
  T v[T_per_thread];
#pragma unroll
  for (int i = 0; i < T_per_thread; i++) v[i] = q[head * head_size + base + i];
#pragma unroll
  for (int i = 0; i < T_per_thread; i++) q[head * head_size + base + i] = v[i] * 2;
}
#define LAUNCH(ALIGNMENT) rope<T, 16, ALIGNMENT><<<grid, 256>>>(q, head_size)
template <typename T>
void launch(T* q, int head_size, int grid, int alignment) {
  if (alignment == 16) { LAUNCH(16); } else { LAUNCH(8); }
}
"""


def test_a_vector_width_whose_slice_the_launch_fixes_is_refused_with_the_spec_value_named() -> None:
    # DeepSpeed's apply_rotary_pos_half: each thread of a fixed group owns granularity bytes of a
    # head; another width moves what a launch covers (the grid would have to follow): no knob.
    t = apply(FIXED_SLICE, "expose{names=granularity}", template_args=["__half", "16", "16"])
    assert t.knobs == ()
    (why,) = [o.message for o in t.outcomes if o.site == "granularity"]
    assert why.startswith("granularity (= 16, the spec's) sets a vector width whose coverage the launch")


TILED = """\
template <typename T, int TILE_SIZE, int THREADS, int NUM_PER_TH>
__global__ void dequant(T* out, const unsigned char* in, int n) {
  const int base = blockIdx.x * TILE_SIZE;
  T vals[NUM_PER_TH];
  for (int j = 0; j < NUM_PER_TH; j++) {
    const int i = base + threadIdx.x * NUM_PER_TH + j;
    vals[j] = i < n ? (T)in[i] : (T)0;
  }
  for (int j = 0; j < NUM_PER_TH; j++) {
    const int i = base + threadIdx.x * NUM_PER_TH + j;
    if (i < n) out[i] = vals[j];
  }
}
"""


def test_a_template_block_size_and_items_per_thread_the_spec_binds_keep_their_product() -> None:
    # bitsandbytes' kDequantizeBlockwise<T, 512, 64, 8>: launched from another file, so the
    # spec's 64-thread block is THREADS, and NUM_PER_TH the items per thread. A block's work
    # (THREADS * NUM_PER_TH = TILE_SIZE = 512) stays as bound: the grid stays right.
    from ktx.ir.launch import LaunchMapping

    mapping = LaunchMapping(("(n + 511) // 512",), ("64",), "0", (), "spec")
    t = apply(TILED, "expose", template_args=["float", "512", "64", "8"], mapping=mapping)
    knobs = {k.name: (k.values, k.default) for k in t.knobs}
    assert knobs == {"THREADS": ((32, 64, 128, 256), 64), "NUM_PER_TH": ((2, 4, 8, 16, 32), 8)}
    assert t.space.constraints == ("THREADS * NUM_PER_TH == 512",)
    assert t.template_args == ("float", "512", "{THREADS}", "{NUM_PER_TH}")
    launch = t.launch()
    assert launch is not None and launch.block == ("THREADS",) and launch.grid == ("(n + 511) // 512",)
    assert not t.space.feasible({"THREADS": 128, "NUM_PER_TH": 8})
    assert t.name_expression({"THREADS": 128, "NUM_PER_TH": 4}) == "dequant<float, 512, 128, 4>"
    # The spec's block is no template argument's value (or two share it): nothing is known of
    # which one the block is, so neither is a knob.
    other = LaunchMapping(("(n + 511) // 512",), ("128",), "0", (), "spec")
    refused = apply(TILED, "expose", template_args=["float", "512", "64", "8"], mapping=other)
    assert refused.knobs == ()
    assert any("NUM_PER_TH (= 8, the spec's) sets the items per thread" in r for r in remarks(refused))


QUANT = """\
template <typename T, int BLOCK_SIZE, int NUM_PER_TH>
__global__ void quant(unsigned char* out, const T* in, int n) {
  const int base = blockIdx.x * BLOCK_SIZE;
  for (int j = 0; j < NUM_PER_TH; j++) {
    const int i = base + threadIdx.x * NUM_PER_TH + j;
    if (i < n) out[i] = (unsigned char)in[i];
  }
}
"""


def test_an_items_count_whose_block_is_the_specs_literal_moves_the_block_with_it() -> None:
    # bitsandbytes' kQuantizeBlockwise<T, 4096, 4> on 1024 threads: no template argument is the
    # block, but 4096 (the quantization block, a tile) is block x items: the block follows as
    # 4096 // NUM_PER_TH, within the 1024-thread limit.
    from ktx.ir.launch import LaunchMapping

    mapping = LaunchMapping(("cdiv(n, 4096)",), ("1024",), "0", (), "spec")
    t = apply(QUANT, "expose", template_args=["float", "4096", "4"], mapping=mapping)
    (knob,) = t.knobs
    assert (knob.name, knob.values, knob.default) == ("NUM_PER_TH", (1, 2, 4, 8, 16), 4)
    assert t.space.constraints == ("4096 % NUM_PER_TH == 0", "4096 // NUM_PER_TH <= 1024")
    assert not t.space.feasible({"NUM_PER_TH": 2}) and t.space.feasible({"NUM_PER_TH": 16})
    launch = t.launch()
    assert launch is not None and launch.evaluate({"n": 8192, "NUM_PER_TH": 8})[:2] == ((2,), (512,))


#: A grid-stride histogram: one partial histogram per block, the grid and the partials'
#: allocation both sized by PARTIALS (cuda-samples histogram256's PARTIAL_HISTOGRAM256_COUNT).
PARTIALS_ALLOC = """\
static const unsigned PARTIALS = 240;
static unsigned* d_partial;
__global__ void hist(unsigned* partial, const unsigned* data, unsigned n) {
  __shared__ unsigned s[256];
  s[threadIdx.x] = 0;
  __syncthreads();
  for (unsigned i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += blockDim.x * gridDim.x)
    atomicAdd(&s[data[i] & 255], 1u);
  __syncthreads();
  partial[blockIdx.x * 256 + threadIdx.x] = s[threadIdx.x];
}
void init() { cudaMalloc((void**)&d_partial, PARTIALS * 256 * sizeof(unsigned)); }
void run(const unsigned* data, unsigned n) { hist<<<PARTIALS, 256>>>(d_partial, data, n); }
"""


def test_a_constant_that_sizes_an_allocation_the_kernel_writes_is_refused() -> None:
    """Session 9: PARTIAL_HISTOGRAM256_COUNT = 64..512 moved the spec's grid (``240``) but not
    its ``[240, 256]`` output: 6 candidates failed verification."""
    spec = LaunchMapping(("240",), ("256",), "0", (), "spec")
    t = apply(PARTIALS_ALLOC, "expose", mapping=spec)
    assert "PARTIALS" not in {k.name for k in t.knobs}
    assert any(
        "PARTIALS sizes the problem" in r and "cudaMalloc at line 12" in r for r in remarks(t, "skipped")
    )


#: cuda-samples shfl_scan: the element count is a local constant, passed to the kernel as its
#: ``len`` and sizing the buffers through ``sz``.
COUNT_AS_ARGUMENT = """\
__global__ void uniform_add(int* data, int* partial_sums, int len) {
  __shared__ int buf;
  int id = blockIdx.x * blockDim.x + threadIdx.x;
  if (id > len) return;
  if (threadIdx.x == 0) buf = partial_sums[blockIdx.x];
  __syncthreads();
  data[id] += buf;
}
int main() {
  int* d_data; int* d_sums;
  const int n_elements = 65536;
  int sz = sizeof(int) * n_elements;
  cudaMalloc((void**)&d_data, sz);
  cudaMalloc((void**)&d_sums, n_elements / 256 * sizeof(int));
  uniform_add<<<n_elements / 256 - 1, 256>>>(d_data + 256, d_sums, n_elements);
}
"""


def test_a_constant_passed_to_the_kernel_as_its_size_is_refused() -> None:
    """Session 9: N_ELEMENTS = 16384..262144 moved the spec's grid (``65536 // 256 - 1``) but not
    its buffers or ``len = 65536``: 4 candidates failed verification."""
    spec = LaunchMapping(("65536 // 256 - 1",), ("256",), "0", (), "spec")
    t = apply(COUNT_AS_ARGUMENT, "expose", mapping=spec)
    assert "N_ELEMENTS" not in {k.name for k in t.knobs}
    assert any("the kernel's argument 3 at line 15" in r for r in remarks(t, "skipped"))


def test_sizes_the_problem_sees_an_allocation_through_a_local() -> None:
    from ktx.ir import parse
    from ktx.ir.facts.constants import sizes_the_problem

    source = COUNT_AS_ARGUMENT.replace("d_sums, n_elements);", "d_sums, 65536);")
    m = parse(source)
    assert (
        sizes_the_problem(m, "uniform_add", "n_elements") == "it sizes the cudaMalloc at line 13 (through sz)"
    )
    assert sizes_the_problem(m, "uniform_add", "buf") is None


#: cuda-samples vectorAdd: the block is a local the grid rounds by; the spec writes both out.
BLOCK_THE_GRID_ROUNDS_BY = """\
__global__ void vectorAdd(const float* A, const float* B, float* C, int n) {
  int i = blockDim.x * blockIdx.x + threadIdx.x;
  if (i < n) C[i] = A[i] + B[i];
}
void launch(const float* A, const float* B, float* C, int n) {
  int threadsPerBlock = 256;
  int blocksPerGrid = (n + threadsPerBlock - 1) / threadsPerBlock;
  vectorAdd<<<blocksPerGrid, threadsPerBlock>>>(A, B, C, n);
}
"""


def test_a_spec_grid_that_rounds_by_the_exposed_block_follows_it() -> None:
    """Session 9: THREADS_PER_BLOCK = 64/128 kept the spec's grid of ``(50000 + 256 - 1) // 256``
    blocks, too few to cover the 50000 elements: 2 candidates failed verification."""
    spec = LaunchMapping(("(50000 + 256 - 1) // 256",), ("256",), "0", (), "spec")
    t = apply(BLOCK_THE_GRID_ROUNDS_BY, "expose", mapping=spec)
    assert "THREADS_PER_BLOCK" in {k.name for k in t.knobs}
    launch = t.launch()
    assert launch is not None
    for block in (64, 128, 512):
        grid, blk = launch.evaluate({"THREADS_PER_BLOCK": block})[:2]
        assert blk == (block,) and grid[0] * block >= 50000 > (grid[0] - 1) * block


#: A block-size constant whose shared partials a helper reduces, unrolled for 128 threads
#: (cuda-samples fp16ScalarProduct's reduceInShared_native).
UNROLLED_FOR_THE_BLOCK = """\
#define NUM_OF_THREADS 128
__device__ void reduce(float* v) {
  if (threadIdx.x < 64) v[threadIdx.x] += v[threadIdx.x + 64];
  __syncthreads();
  if (threadIdx.x < 1) v[threadIdx.x] += v[threadIdx.x + 1];
}
__global__ void dot(const float* a, float* results, int size) {
  __shared__ float sh[NUM_OF_THREADS];
  float value = 0.f;
  for (int i = threadIdx.x + blockIdx.x * blockDim.x; i < size; i += gridDim.x * blockDim.x) value += a[i];
  sh[threadIdx.x] = value;
  __syncthreads();
  reduce(sh);
  if (threadIdx.x == 0) results[blockIdx.x] = sh[0];
}
void launch(const float* a, float* r, int n) { dot<<<120, NUM_OF_THREADS>>>(a, r, n); }
"""


def test_a_block_size_constant_a_callee_reduces_unrolled_is_refused() -> None:
    spec = LaunchMapping(("120",), ("128",), "0", (), "spec")
    t = apply(UNROLLED_FOR_THE_BLOCK, "expose", mapping=spec)
    assert "NUM_OF_THREADS" not in {k.name for k in t.knobs}
    assert any("`threadIdx.x < 64` in reduce() at line 3" in r for r in remarks(t, "skipped"))


#: FlashInfer's norms: the kernel writes its warp size, its shuffles sit in a header's helper
#: ktx cannot read; the launcher's 32s are a warp's lanes.
WARP_LANES = """\
template <typename T>
__global__ void norm(T* x, unsigned d) {
  constexpr unsigned warp_size = 32;
  const unsigned thread_id = threadIdx.x + threadIdx.y * warp_size;
  float s = 0.f;
  for (unsigned i = thread_id; i < d; i += blockDim.y * warp_size) s += float(x[blockIdx.x * d + i]);
  s += math::shfl_xor_sync(s, 16);
  if (thread_id == 0) x[blockIdx.x * d] = T(s);
}
template <typename T>
void launch(T* x, unsigned rows, unsigned d) {
  const unsigned block_size = min(1024u, d);
  const unsigned num_warps = (block_size + 31) / 32;
  dim3 nthrs(32, num_warps);
  norm<T><<<rows, nthrs>>>(x, d);
}
"""


def test_a_launch_32_the_kernel_assumes_as_a_warp_is_refused() -> None:
    """Session 9: FusedAddRMSNormKernel's NUM_WARPS (the 32 of ``ceil_div(block_size, 32)``)
    = 128 made the block's x 128 lanes: 3 wrong results."""
    spec = LaunchMapping(
        ("rows",), ("32", "num_warps", "1"), "0", (("num_warps", "(min(1024, d) + 31) // 32"),), "spec"
    )
    t = apply(WARP_LANES, "expose", mapping=spec)
    knobs = {k.name for k in t.knobs}
    assert "NUM_WARPS" not in knobs and "NTHRS" not in knobs
    assert "BLOCK_SIZE_MAX" in knobs  # the cap of threads per block is still a knob
    # the header's helper is recognised as a shuffle by its name (ir/facts/constants.py: _shuffles);
    # the kernel's own warp_size = 32 is the fallback test_facts_constants covers
    assert any(
        "32 is the warp width the kernel's shuffles assume (math::shfl_xor_sync in the kernel at line 7" in r
        for r in remarks(t, "skipped")
    )


#: DeepSpeed moe_gather: copyUnroll counts guarded steps of 8 halves x 256 threads over the row;
#: the launcher picks ceil(n / 2048) through a switch of LAUNCH_FOR_UNROLL(1..4).
PICKED_UNROLL = """\
namespace gather { constexpr int threads = 256; }
template <typename T, int copyUnroll>
__global__ void gather_k(T* out, const T* in, const int n) {
  constexpr int vector_size = 16 / sizeof(T);
  constexpr int stride = vector_size * gather::threads;
  const int off = threadIdx.x * vector_size;
  for (int i = 0; i < copyUnroll; i++) {
    if (i * stride + off < n) {
      const int at = i * stride + off;
      for (int j = 0; j < vector_size; j++) out[blockIdx.x * n + at + j] = in[at + j];
    }
  }
}
#define LAUNCH_FOR_UNROLL(COUNT) case COUNT: gather_k<T, COUNT><<<rows, 256>>>(out, in, n); break;
template <typename T>
void launch(T* out, const T* in, int rows, int n) {
  const int copy_unroll = (n + 2047) / 2048;
  switch (copy_unroll) { LAUNCH_FOR_UNROLL(1) LAUNCH_FOR_UNROLL(2) LAUNCH_FOR_UNROLL(3) LAUNCH_FOR_UNROLL(4) }
}
"""


def test_an_items_count_the_spec_picks_per_shape_is_a_knob_whose_zero_is_the_pick() -> None:
    # Issue 22: "a launcher heuristic that picks among instantiations by shape is what the dispatch
    # table replaces". 0 keeps the spec's pick (the original is a point of the space); the other
    # values are the file's instantiations, each where it covers what the pick covers.
    pick = "(n + 2047) // 2048"
    mapping = LaunchMapping(("rows",), ("256",), "0", (), "spec")
    t = apply(PICKED_UNROLL, "expose", template_args=["__half", "{" + pick + "}"], mapping=mapping)
    (knob,) = t.knobs
    assert (knob.name, knob.values, knob.default) == ("COPY_UNROLL", (0, 1, 2, 3, 4), 0)
    assert t.template_args == ("__half", "{COPY_UNROLL if COPY_UNROLL else (" + pick + ")}")
    assert t.space.constraints == (f"COPY_UNROLL == 0 or COPY_UNROLL >= ({pick})",)
    # n = 4096 needs 2 steps of 2048: 1 is refused there, 2..4 and the pick are kept
    assert not t.space.feasible({"COPY_UNROLL": 1}, {"n": 4096})
    assert all(t.space.feasible({"COPY_UNROLL": v}, {"n": 4096}) for v in (0, 2, 3, 4))
    # the file's launcher takes the knob too, keeping its own pick at 0
    assert "gather_k<T, KTX_PICK(KTX_COPY_UNROLL, (COUNT))><<<rows, 256>>>" in t.source
    assert any("covers the data where it covers what the spec's pick does" in r for r in remarks(t))


#: DeepSpeed pre_rms_norm's pattern: each of UNROLL guarded steps covers blockDim.x x 8 halves.
PER_SHAPE_STRIDED = """\
template <typename T, int UNROLL>
__global__ void norm(T* out, const T* x, int e) {
  const int stride = blockDim.x * (16 / sizeof(T));
  const int off = threadIdx.x * (16 / sizeof(T));
  for (int i = 0; i < UNROLL; i++) {
    const int at = i * stride + off;
    if (at < e) out[blockIdx.x * e + at] = x[blockIdx.x * e + at];
  }
}
#define LAUNCH(U) norm<T, U><<<rows, 256>>>(out, x, e);
template <typename T>
void launch(T* out, const T* x, int rows, int e) { if (e <= 2048) { LAUNCH(1) } else { LAUNCH(2) } }
"""


def test_a_per_shape_count_stepping_by_the_block_relates_to_the_block_the_mapping_launches() -> None:
    # stride = blockDim.x * 8 halves; the relation is written with the mapping's block (256
    # here), so a larger block lowers the count a shape needs.
    mapping = LaunchMapping(("rows",), ("256",), "0", (), "spec")
    t = apply(PER_SHAPE_STRIDED, "expose", template_args=["__half", "{(e + 2047) // 2048}"], mapping=mapping)
    (knob,) = t.knobs
    assert knob.values == (0, 1, 2)
    pick = "(e + 2047) // 2048"
    assert t.space.constraints == (f"(UNROLL if UNROLL else {pick}) * 8 * 256 >= {pick} * 8 * 256",)


def test_a_per_shape_count_follows_the_block_size_knob_when_block_size_owns_the_block() -> None:
    # Issue 22 item 3 follow-up: expose runs before block-size, so the relation names the
    # launch's block as the pipeline ends (BLOCK_X), not the 256 it saw: 512 threads with
    # UNROLL=1 cover 4096 halves, the likely win the fixed relation excluded.
    mapping = LaunchMapping(("rows",), ("256",), "0", (), "spec")
    args = ["__half", "{2 * ((e + 4095) // 4096)}"]
    four = "else if (e <= 4096) { LAUNCH(2) } else { LAUNCH(4) }"  # the launcher instantiates 1, 2, 4
    src = PER_SHAPE_STRIDED.replace("else { LAUNCH(2) }", four)
    t = apply(src, "expose,block-size", template_args=args, mapping=mapping)
    assert [k.name for k in t.knobs] == ["UNROLL", "BLOCK_X"]
    assert t.knobs[0].values == (0, 1, 2, 4)
    (relation,) = t.space.constraints
    assert "BLOCK_X" in relation and "launch_block_x" not in relation
    feasible = t.space.feasible
    assert feasible({"UNROLL": 1, "BLOCK_X": 512}, {"e": 4096})
    assert feasible({"UNROLL": 1, "BLOCK_X": 1024}, {"e": 4096})
    assert not feasible({"UNROLL": 1, "BLOCK_X": 256}, {"e": 4096})
    assert not feasible({"UNROLL": 1, "BLOCK_X": 0}, {"e": 4096})  # 0: the spec's 256
    assert not feasible({"UNROLL": 1, "BLOCK_X": 512}, {"e": 8192})
    assert feasible({"UNROLL": 2, "BLOCK_X": 512}, {"e": 8192})
    assert feasible({"UNROLL": 0, "BLOCK_X": 1024}, {"e": 8192})
    # below the spec's block: the pick (0) no longer covers the row, a larger count does
    assert 128 in t.knobs[1].values
    assert not feasible({"UNROLL": 0, "BLOCK_X": 128}, {"e": 4096})
    assert not feasible({"UNROLL": 2, "BLOCK_X": 128}, {"e": 4096})
    assert feasible({"UNROLL": 4, "BLOCK_X": 128}, {"e": 4096})
    # expose alone keeps the spec's block: UNROLL=1 no longer covers 4096 at 256 threads
    alone = apply(src, "expose", template_args=args, mapping=mapping)
    assert "BLOCK_X" not in alone.space.constraints[0]
    assert not alone.space.feasible({"UNROLL": 1}, {"e": 4096})
    assert alone.space.feasible({"UNROLL": 2}, {"e": 4096})


def test_a_per_shape_setting_without_the_guarded_pattern_or_named_as_a_shape_is_refused() -> None:
    mapping = LaunchMapping(("rows",), ("256",), "0", (), "spec")
    # the store is not guarded: a count above the pick writes past the row
    open_store = PICKED_UNROLL.replace("if (i * stride + off < n) {", "{")
    t = apply(open_store, "expose", template_args=["__half", "{(n + 2047) // 2048}"], mapping=mapping)
    assert t.knobs == ()
    assert any("not the block-strided, guarded pattern" in r for r in remarks(t))
    # DeepSpeed top_k_gating<T, {TOP_K}>: the k of top-k is a shape variable, what is computed
    t = apply(PICKED_UNROLL, "expose", template_args=["__half", "{TOP_K}"], mapping=mapping)
    assert t.knobs == ()
    assert any("is the spec's shape variable TOP_K" in r for r in remarks(t))


def test_a_bound_count_the_spec_also_names_in_its_vars_for_the_arguments_is_what_is_computed() -> None:
    # DeepSpeed moe_gather's N_TOP_K: [vars] N_TOP_K = "2", read by the arguments' extents
    # (scores [grid, N_TOP_K]) and not by the launch: a dimension of the data.
    src = """\
template <typename T, int N_TOP_K>
__global__ void g(T* out, const float* scores, int d) {
  float s = 0.f;
  for (int i = 0; i < N_TOP_K; i++) s += scores[blockIdx.x * N_TOP_K + i];
  out[blockIdx.x * d + threadIdx.x] = (T)s;
}
"""
    mapping = LaunchMapping(("rows",), ("256",), "0", (("N_TOP_K", "2"),), "spec")
    t = apply(src, "expose", template_args=["float", "2"], mapping=mapping)
    assert t.knobs == ()
    assert any("N_TOP_K (= 2) is a spec [vars] entry the launch does not read" in r for r in remarks(t))


#: exllamav2 head_norm: one partial per warp in ``sums[MAX_WARPS]``, the block head_dim / 2.
PER_WARP_PARTIALS = """\
#define MAX_HEAD_DIM 128
#define WARP_SIZE 32
#define MAX_WARPS (MAX_HEAD_DIM / WARP_SIZE)
__global__ void head_norm(const float* x, float* y, int head_dim) {
  int warp_id = threadIdx.x / WARP_SIZE;
  int lane_id = threadIdx.x % WARP_SIZE;
  int num_warps = (head_dim + 63) / 64;
  __shared__ float sums[MAX_WARPS];
  float v = x[blockIdx.x * head_dim + threadIdx.x];
  float s = v;
  for (int o = 16; o > 0; o /= 2) s += __shfl_xor_sync(0xffffffff, s, o);
  if (lane_id == 0) sums[warp_id] = s;
  __syncthreads();
  s = 0.f;
  for (int i = 0; i < num_warps; ++i) s += sums[i];
  y[blockIdx.x * head_dim + threadIdx.x] = v / s;
}
"""


def test_a_constant_sizing_a_shared_array_indexed_by_the_warp_id_covers_the_launchs_warps() -> None:
    # MAX_WARPS = 1 at head_dim 128 (64 threads, 2 warps) wrote sums[1] past the array.
    mapping = LaunchMapping(("rows",), ("head_dim // 2",), "0", (), "spec")
    t = apply(PER_WARP_PARTIALS, "expose", mapping=mapping)
    (knob,) = t.knobs
    assert (knob.name, knob.values) == ("MAX_WARPS", (1, 2, 4, 8, 16))
    assert t.space.constraints == ("MAX_WARPS >= ceil_div(head_dim // 2, 32)",)
    assert not t.space.feasible({"MAX_WARPS": 1}, {"head_dim": 128})
    assert t.space.feasible({"MAX_WARPS": 1}, {"head_dim": 64})
    assert t.space.feasible({"MAX_WARPS": 2}, {"head_dim": 128})
    assert any("an entry per thread or warp of the launch" in r for r in remarks(t))


def test_a_shared_extent_constraint_at_a_fixed_block_and_an_extent_ktx_cannot_evaluate() -> None:
    mapping = LaunchMapping(("rows",), ("128",), "0", (), "spec")
    t = apply(PER_WARP_PARTIALS, "expose", mapping=mapping)
    assert t.space.constraints == ("MAX_WARPS >= ceil_div(128, 32)",)
    assert t.space.violations({"MAX_WARPS": 2}) and not t.space.violations({"MAX_WARPS": 4})
    # an extent with a name ktx cannot evaluate: no constraint could keep it large enough
    unknown = PER_WARP_PARTIALS.replace("sums[MAX_WARPS]", "sums[MAX_WARPS + EXTRA]")
    refused = apply(unknown, "expose", mapping=mapping)
    assert refused.knobs == ()
    assert any("EXTRA in that extent has no integer value" in r for r in remarks(refused))
