"""block-size: block dims become knobs; launcher, __launch_bounds__ and mapping follow."""

from __future__ import annotations

from ktx.ir.launch import LaunchMapping
from passtest import apply, changed, code, remarks, suite_source

ONE_D = """\
__global__ void k(float* x, int n) {
  for (int i = threadIdx.x; i < n; i += blockDim.x) x[i] = 0.f;
}
void launch(float* x, int n, int rows) {
  dim3 block(std::min(n, 256));
  k<<<rows, block>>>(x, n);
}
"""


def test_one_dimensional_block() -> None:
    t = apply(ONE_D, "block-size")
    (knob,) = t.knobs
    assert (knob.name, knob.values, knob.default) == ("BLOCK_X", (0, 32, 64, 128, 256, 512, 1024), 0)
    assert changed(ONE_D, code(t)) == [
        "-__global__ void k(float* x, int n) {",
        "+__global__ void __launch_bounds__(KTX_BLOCK_X) k(float* x, int n) {",
        "-  dim3 block(std::min(n, 256));",
        "+  dim3 block(KTX_PICK(KTX_BLOCK_X, (std::min(n, 256))));",
    ]
    launch = t.launch()
    assert launch is not None and launch.block == ("BLOCK_X if BLOCK_X else min(n, 256)",)
    out = t.instantiate({"BLOCK_X": 512})
    assert "__launch_bounds__(512) k(" in out and "dim3 block(512);" in out


def test_warp_lanes_along_x_stay_and_shared_memory_follows_the_warps() -> None:
    t = apply(suite_source("rmsnorm"), "block-size")
    (knob,) = t.knobs
    assert (knob.name, knob.values) == ("BLOCK_Y", (0, 1, 2, 4, 8, 16, 32))
    assert "x stays 32" in remarks(t)[0]
    assert "const int num_warps = KTX_PICK(KTX_BLOCK_Y, (std::max(1, (block_size + 31) / 32)));" in t.source
    launch = t.launch()
    assert launch is not None
    assert launch.block[0] == "32"
    assert launch.evaluate({"num_tokens": 1, "d": 4096, "BLOCK_Y": 8}) == ((1,), (32, 8), 32)
    assert launch.evaluate({"num_tokens": 1, "d": 4096, "BLOCK_Y": 0}) == ((1,), (32, 16), 64)
    assert "__launch_bounds__(32 * KTX_BLOCK_Y)" in t.source


def test_a_spec_mapping_var_becomes_the_knob() -> None:
    spec = LaunchMapping(
        ("tokens",),
        ("32", "warps"),
        "cdiv(warps, 4) * 4 * 4",
        (("warps", "max(1, cdiv(min(1024, d // 8), 32))"),),
    )
    t = apply(suite_source("rmsnorm"), "block-size", mapping=spec)
    launch = t.launch()
    assert launch is not None
    assert launch.shared == "cdiv(BLOCK_Y if BLOCK_Y else max(1, cdiv(min(1024, d // 8), 32)), 4) * 4 * 4"


def test_a_constant_block_is_edited_where_it_is_defined() -> None:
    t = apply(suite_source("merge_attn_states"), "block-size")
    assert "constexpr unsigned int NUM_THREADS = KTX_PICK(KTX_BLOCK_X, (128));" in t.source
    launch = t.launch()
    assert launch is not None and launch.grid[0].count("BLOCK_X if BLOCK_X else 128") == 2


def test_existing_launch_bounds_keep_their_value_by_default() -> None:
    src = ONE_D.replace("__global__ void k", "__global__ void __launch_bounds__(256) k")
    t = apply(src, "block-size")
    assert "__launch_bounds__(KTX_PICK(KTX_BLOCK_X, (256)))" in t.source
    assert "__launch_bounds__(256) k" in t.instantiate()
    assert "__launch_bounds__(64) k" in t.instantiate({"BLOCK_X": 64})


def test_refusals() -> None:
    fixed = ONE_D.replace("blockDim.x", "128")
    assert remarks(apply(fixed, "block-size")) == [
        "k: the kernel never reads blockDim: its work mapping assumes the launch's block size"
    ]
    shared = ONE_D.replace("{\n  for", "{\n  __shared__ float s[256];\n  for")
    assert "fixed-size __shared__ array s[256]" in remarks(apply(shared, "block-size"))[0]
    repeated = ONE_D.replace("k<<<rows, block>>>", "k<<<n / 256, 256>>>")  # does not round up
    assert "the grid repeats the block's literal 256" in remarks(apply(repeated, "block-size"))[0]
    literal = ONE_D.replace("dim3 block(std::min(n, 256));", "dim3 block(128);").replace(
        "x[i] = 0.f", "x[i] = i % 128"
    )
    assert "the kernel body uses the literal 128" in remarks(apply(literal, "block-size"))[0]
    quant = apply(suite_source("per_token_group_quant_fp8"), "block-size")
    assert quant.source == quant.original


ROPE = """\
template <int bdx>
__global__ void rope(float* x, int rows) {
  const int row = blockIdx.x * blockDim.y + threadIdx.y;
  if (row < rows) x[row * 4 * bdx + threadIdx.x * 4] *= 2.f;
}
template <int HEAD_DIM>
void launch(float* x, int rows, int threads) {
  constexpr int bdx = HEAD_DIM / 4;
  int bdy = threads / bdx;
  dim3 nthrs(bdx, bdy);
  rope<bdx><<<(rows + bdy - 1) / bdy, nthrs>>>(x, rows);
}
"""


def test_an_x_the_kernel_assumes_stays_or_refuses() -> None:
    """A 2-D block whose x the kernel never reads as blockDim.x (here through the template
    parameter ``bdx``): x may not vary. A shape-dependent x refuses, naming it; a constant one
    stays and bounds y."""
    (why,) = remarks(apply(ROPE, "block-size"))
    assert why.startswith("rope: the kernel never reads blockDim.x, so it may assume the block's x (`bdx`")
    fixed = ROPE.replace("constexpr int bdx = HEAD_DIM / 4;", "constexpr int bdx = 16;")
    t = apply(fixed, "block-size")
    (knob,) = t.knobs
    assert (knob.name, knob.values) == ("BLOCK_Y", (0, 1, 2, 4, 8, 16, 32, 64))
    assert "x stays 16: the kernel never reads blockDim.x" in remarks(t)[0]


def test_a_grid_rounding_up_by_the_literal_block_follows_the_knob() -> None:
    """``<<<(n + 255) / 256, 256>>>``: the grid's 256 and 255 follow the knob, in the source
    and in the launch mapping, so blocks of 512 still cover n (and blocks of 64 all of it)."""
    src = ONE_D.replace("k<<<rows, block>>>", "k<<<(n + 255) / 256, 256>>>")
    src = src.replace("i < n; i += blockDim.x", "i < n; i += blockDim.x * gridDim.x").replace(
        "int i = threadIdx.x", "int i = blockIdx.x * blockDim.x + threadIdx.x"
    )
    t = apply(src, "block-size")
    assert [k.name for k in t.knobs] == ["BLOCK_X"]
    launch = t.launch()
    assert launch is not None
    assert launch.grid == ("(n + ((BLOCK_X if BLOCK_X else 256) - 1)) // (BLOCK_X if BLOCK_X else 256)",)
    out = t.instantiate({"BLOCK_X": 512})
    assert "k<<<(n + (512 - 1)) / 512, 512>>>(x, n);" in out


PICKED = """\
template <int block_size>
__global__ void k(float* out, const float* x, int n) {
  __shared__ float part[8];
  float s = 0.f;
  for (int i = threadIdx.x; i < n; i += block_size) s += x[blockIdx.x * n + i];
  for (int o = 16; o > 0; o >>= 1) s += __shfl_xor_sync(0xffffffff, s, o);
  if (block_size > 32) {
    if (threadIdx.x % 32 == 0) part[threadIdx.x / 32] = s;
    __syncthreads();
    s = threadIdx.x < block_size / 32 ? part[threadIdx.x] : 0.f;
    for (int o = 16; o > 0; o >>= 1) s += __shfl_xor_sync(0xffffffff, s, o);
  }
  if (threadIdx.x == 0) out[blockIdx.x] = s;
}
void launch(float* out, const float* x, int n, int rows) {
  if (n < 512) k<32><<<rows, 32>>>(out, x, n);
  else k<256><<<rows, 256>>>(out, x, n);
}
"""


def test_a_template_block_size_picked_by_shape_is_one_knob_within_the_largest_instantiation() -> None:
    # part[8] holds the warps of 256 threads, the author's largest instantiation: the domain
    # stops there (32 .. 256), both launches take the knob, and the default is the first one's.
    t = apply(PICKED, "block-size")
    (knob,) = t.knobs
    assert (knob.name, knob.values, knob.default) == ("BLOCK_X", (32, 64, 128, 256), 32)
    assert changed(PICKED, code(t)) == [
        "-__global__ void k(float* out, const float* x, int n) {",
        "+__global__ void __launch_bounds__(KTX_BLOCK_X) k(float* out, const float* x, int n) {",
        "-  if (n < 512) k<32><<<rows, 32>>>(out, x, n);",
        "-  else k<256><<<rows, 256>>>(out, x, n);",
        "+  if (n < 512) k<KTX_BLOCK_X><<<rows, KTX_BLOCK_X>>>(out, x, n);",
        "+  else k<KTX_BLOCK_X><<<rows, KTX_BLOCK_X>>>(out, x, n);",
    ]
    assert "stays within 256" in remarks(t)[0] and "among 32, 256 by shape" in remarks(t)[0]
    assert t.template_args == ("{BLOCK_X}",) and t.name_expression({"BLOCK_X": 128}) == "k<128>"
    out = t.instantiate({"BLOCK_X": 128})
    assert out.count("k<128><<<rows, 128>>>") == 2


def test_a_template_block_size_launched_with_another_block_is_refused() -> None:
    # k<256> launched with 128 threads: block_size is not the block there, so not a block size.
    src = PICKED.replace("k<256><<<rows, 256>>>", "k<256><<<rows, 128>>>")
    t = apply(src, "block-size")
    assert t.knobs == ()
    assert "never reads blockDim" in remarks(t)[0]


def test_a_spec_that_picks_the_template_block_size_per_shape_keeps_its_pick_as_the_default() -> None:
    # The spec writes the launcher's heuristic as its template argument and block: the knob's 0
    # is that pick, per shape (KTX_PICK in the source, ``X if X else (...)`` in the name
    # expression and the mapping), so the default config is the original at every shape.
    heuristic = "32 if n < 512 else 256"
    mapping = LaunchMapping(("rows",), (heuristic,), "0", (), "spec")
    t = apply(PICKED, "block-size", mapping=mapping, template_args=["{" + heuristic + "}"])
    (knob,) = t.knobs
    assert (knob.values, knob.default) == ((0, 32, 64, 128, 256), 0)
    assert t.template_args == ("{BLOCK_X if BLOCK_X else (32 if n < 512 else 256)}",)
    launch = t.launch()
    assert launch is not None
    assert launch.evaluate({"rows": 4, "n": 100, "BLOCK_X": 0})[1] == (32,)
    assert launch.evaluate({"rows": 4, "n": 4096, "BLOCK_X": 0})[1] == (256,)
    assert launch.evaluate({"rows": 4, "n": 4096, "BLOCK_X": 64})[1] == (64,)
    as_original = changed(PICKED, t.instantiate({"BLOCK_X": 0}))
    assert as_original == ["+// ktx: `block-size` instantiated with BLOCK_X=0"]
    assert t.instantiate({"BLOCK_X": 128}).count("k<128><<<rows, 128>>>") == 2
    # The rewritten launches pass one text as template argument and block: vectorize, after
    # block-size, still reads ``i += block_size`` as a block stride.
    chained = apply(PICKED, "block-size,vectorize", mapping=mapping, template_args=["{" + heuristic + "}"])
    assert [k.name for k in chained.knobs] == ["BLOCK_X", "VEC_L0"]


def test_the_template_norm_benchmark_spec_searches_its_template_block_size() -> None:
    # benchmarks/template_norm (scripts/gpu_tknobs.sh tunes it): the spec writes the launcher's
    # heuristic; BLOCK_X 0 is that pick at every shape, and vectorize still packs the row loop.
    from passtest import ROOT

    from ktx.pipeline import template_for_spec
    from ktx.specload import load_spec

    spec = load_spec(ROOT / "benchmarks" / "template_norm" / "ktx.toml")
    t = template_for_spec(spec, "block-size,vectorize")
    assert [(k.name, k.default) for k in t.knobs] == [("BLOCK_X", 0), ("VEC_L2", 1)]
    assert t.knobs[0].values == (0, 32, 64, 128, 256, 512, 1024)
    launch = t.launch()
    assert launch is not None
    assert launch.evaluate({"nrows": 1, "ncols": 4096, "BLOCK_X": 0})[1] == (1024,)
    assert launch.evaluate({"nrows": 1, "ncols": 768, "BLOCK_X": 0})[1] == (32,)
    assert launch.evaluate({"nrows": 1, "ncols": 4096, "BLOCK_X": 512})[1] == (512,)


WARP_STEP_2D = """\
#define WARP_SIZE 32
__global__ void scale_rows(const float* __restrict__ x, float* __restrict__ y, int n, int rows) {
  const int row = blockIdx.x * blockDim.y + threadIdx.y;
  if (row >= rows) return;
  for (int col = threadIdx.x; col < n; col += WARP_SIZE) y[row * n + col] = x[row * n + col] + blockDim.x;
}
void launch(const float* x, float* y, int n, int rows) {
  const dim3 block_dims(WARP_SIZE, 4, 1);
  scale_rows<<<(rows + 3) / 4, block_dims>>>(x, y, n, rows);
}
"""


def test_x_stays_where_the_kernel_steps_by_a_name_equal_to_it() -> None:
    """``col += WARP_SIZE`` under ``dim3(WARP_SIZE, 4)``: WARP_SIZE is blockDim.x only at x = 32.

    The kernel reads blockDim.x too, so nothing else would keep x; a BLOCK_X of 64 would have two
    threads take every element. y alone is the knob, within 1024 / 32.
    """
    t = apply(WARP_STEP_2D, "block-size")
    assert [(k.name, max(k.values)) for k in t.knobs] == [("BLOCK_Y", 32)]
    assert any("x stays 32: the kernel reads WARP_SIZE" in o.message for o in t.outcomes)
    moved = WARP_STEP_2D.replace("col += WARP_SIZE", "col += blockDim.x")
    assert {k.name for k in apply(moved, "block-size").knobs} == {"BLOCK_X", "BLOCK_Y"}


#: exllamav2's quantize_kernel: a 2-D block of 32 x 32, each axis indexed by its own blockDim
TWO_D_SAME = """\
__global__ void quantize(const float* __restrict__ in, float* __restrict__ out, int rows, int columns) {
  int column = blockIdx.x * blockDim.x + threadIdx.x;
  int row = blockIdx.y * blockDim.y + threadIdx.y;
  if (column >= columns) return;
  if (row >= rows) return;
  out[row * columns + column] = in[row * columns + column] * 2.f;
}
"""


def _covers(grid: tuple[int, ...], block: tuple[int, ...], extents: tuple[int, ...]) -> bool:
    return all(g * b >= e for g, b, e in zip(grid, block, extents, strict=False))


def test_a_block_with_the_same_literal_on_two_axes_gives_each_axis_its_knob() -> None:
    """Session 8 (H200): block (32, 32) and a grid rounding by 32 on both axes; the x knob took
    block y and grid y too, so BLOCK_X=64, BLOCK_Y=8 launched (64, 64) threads over rows/64 blocks
    and 12 of 16 candidates failed verification. Each axis now follows its own knob."""
    spec = LaunchMapping(("(columns + 32 - 1) // 32", "(rows + 32 - 1) // 32"), ("32", "32"), "0", (), "spec")
    t = apply(TWO_D_SAME, "block-size", mapping=spec)
    launch = t.launch()
    assert launch is not None
    for bx, by in ((64, 8), (512, 2), (256, 4), (512, 1), (0, 0)):
        grid, block, _ = launch.evaluate({"rows": 4096, "columns": 64, "BLOCK_X": bx, "BLOCK_Y": by})
        assert block == (bx or 32, by or 32), (bx, by, launch)
        assert _covers(grid, block, (64, 4096)), (bx, by, grid, block)


def test_a_var_that_is_only_the_same_number_keeps_it() -> None:
    """ggml soft_max_f32: ``ncols = "1024"`` (the row's length) beside a block of 1024: the row
    is not the block, and shared memory sized by it must not shrink with BLOCK_X."""
    src = TWO_D_SAME.replace("blockDim.y", "1").replace("blockIdx.y", "0")
    spec = LaunchMapping(("rows",), ("1024",), "(ncols + 32) * 4", (("ncols", "1024"),), "spec")
    t = apply(src, "block-size", mapping=spec)
    assert t.mapping is not None and dict(t.mapping.vars)["ncols"] == "1024"
    launch = t.launch()
    assert launch is not None
    assert launch.evaluate({"rows": 8, "columns": 1024, "BLOCK_X": 256}) == ((8,), (256,), (1024 + 32) * 4)


def test_the_grid_divides_by_the_knob_not_the_numbers_dividend() -> None:
    """exllamav2 pack_rows_4: ``(columns * 4 // 32 + 32 - 1) // 32``: the first 32 is bits a
    word, not the block; only the rounding follows BLOCK_X."""
    spec = LaunchMapping(
        ("(columns * 4 // 32 + 32 - 1) // 32", "(rows + 16 - 1) // 16"), ("32", "16"), "0", (), "spec"
    )
    t = apply(TWO_D_SAME, "block-size", mapping=spec)
    launch = t.launch()
    assert launch is not None
    words = 4096 * 4 // 32
    for bx, by in ((64, 8), (256, 4), (32, 16)):
        grid, _block, _ = launch.evaluate({"rows": 4096, "columns": 4096, "BLOCK_X": bx, "BLOCK_Y": by})
        assert grid == (-(-words // bx), -(-4096 // by)), (bx, by, grid)


#: ggml diag_mask_inf_f32: x is one row a block (block x = 1, grid x = the rows), unguarded
ROW_PER_BLOCK_X = """\
__global__ void diag(const float* x, float* dst, const int ncols, const int n_past) {
  const int col = blockDim.y*blockIdx.y + threadIdx.y;
  const int row = blockDim.x*blockIdx.x + threadIdx.x;
  if (col >= ncols) {
    return;
  }
  const int i = row*ncols + col;
  dst[i] = x[i] - (col > n_past + row) * 1e30f;
}
"""


def test_an_unguarded_index_over_a_block_of_one_keeps_that_axis() -> None:
    """Block (1, 32), grid (nrows, cdiv(ncols, 32)): BLOCK_X = 32 would start 32 threads a row
    over nrows blocks, rows up to 32 * nrows, written with no bound. x stays 1; y is the knob."""
    spec = LaunchMapping(("nrows", "(ncols + 32 - 1) // 32"), ("1", "32"), "0", (), "spec")
    t = apply(ROW_PER_BLOCK_X, "block-size", mapping=spec)
    assert [k.name for k in t.knobs] == ["BLOCK_Y"]
    assert any("x stays 1" in r and "`row`" in r for r in remarks(t))
    launch = t.launch()
    assert launch is not None
    grid, block, _ = launch.evaluate({"nrows": 64, "ncols": 4096, "BLOCK_Y": 128})
    assert block == (1, 128) and grid == (64, 32)
    # the control: a row bounded by the kernel may take more threads a block
    guarded = ROW_PER_BLOCK_X.replace("const int n_past) {", "const int n_past, const int nrows) {").replace(
        "  const int i = row*ncols + col;", "  if (row >= nrows) return;\n  const int i = row*ncols + col;"
    )
    assert {k.name for k in apply(guarded, "block-size", mapping=spec).knobs} == {"BLOCK_X", "BLOCK_Y"}


HEADER_WARP = """\
#include "common.cuh"
template <int block_size>
__global__ void k(float* out, const float* x, int n) {
  extern __shared__ float part[];
  float s = 0.f;
  for (int i = threadIdx.x; i < n; i += block_size) s += x[blockIdx.x * n + i];
  if (threadIdx.x == 0) out[blockIdx.x] = s;
}
template <int block_size>
__global__ void other(float* y) {
  static_assert(block_size == 1024, "unexpected block_size");
  y[threadIdx.x] = 0.f;
}
void launch(float* out, const float* x, int n, int rows) {
  if (n < 1024) {
    const dim3 block_dims(WARP_SIZE, 1, 1);
    k<WARP_SIZE><<<rows, block_dims, 0>>>(out, x, n);
  } else {
    const dim3 block_dims(1024, 1, 1);
    k<1024><<<rows, block_dims, 128>>>(out, x, n);
  }
}
"""


def test_a_launcher_pick_that_names_a_header_constant_reads_it_from_the_spec_or_the_header(tmp_path) -> None:  # type: ignore[no-untyped-def]
    # ggml's norm_f32: k<WARP_SIZE> and k<1024> by shape, WARP_SIZE defined in common.cuh (not in
    # the file). Before, "the launches pass block_size values that are not integer constants";
    # the spec's [vars] (or the header beside the file) gives WARP_SIZE, and another kernel's
    # static_assert on its own block_size does not narrow this one's domain.
    refused = apply(HEADER_WARP, "block-size", kernel="k")
    assert refused.knobs == () and "not integer constants" in remarks(refused)[0]
    mapping = LaunchMapping(("rows",), ("1024",), "128", (("WARP_SIZE", "32"),), "spec")
    t = apply(HEADER_WARP, "block-size", kernel="k", mapping=mapping, template_args=["1024"])
    (knob,) = t.knobs
    assert (knob.name, knob.values, knob.default) == ("BLOCK_X", (32, 64, 128, 256, 512, 1024), 1024)
    assert t.instantiate({"BLOCK_X": 64}).count("k<64><<<rows, block_dims") == 2
    (tmp_path / "common.cuh").write_text("#pragma once\n#define WARP_SIZE 32\n")
    cu = tmp_path / "norm.cu"
    cu.write_text(HEADER_WARP)
    from_header = apply(HEADER_WARP, "block-size", kernel="k", path=str(cu), template_args=["1024"])
    assert [k.values for k in from_header.knobs] == [(32, 64, 128, 256, 512, 1024)]


SOFTMAX_LIKE = """\
template <bool use_shared, int ncols_template, int block_size_template>
__global__ void soft_max(const float* x, float* dst, const int ncols_par) {
  const int ncols = ncols_template == 0 ? ncols_par : ncols_template;
  const int block_size = block_size_template == 0 ? blockDim.x : block_size_template;
  float m = -1e30f;
  for (int col = threadIdx.x; col < ncols; col += block_size) m = fmaxf(m, x[blockIdx.x * ncols + col]);
  dst[blockIdx.x * blockDim.x + threadIdx.x] = m;
}
"""


def test_a_template_argument_bound_to_the_block_follows_it_and_a_var_of_that_value_keeps_it() -> None:
    # ggml's soft_max_f32<true, 1024, 1024>: block_size_template is the block size whenever it is
    # not 0, so a block of 256 must instantiate it as 256 (else the kernel strides by 1024 with
    # 256 threads and skips columns). ncols (a var of its own, the data's width) is also 1024 and
    # keeps its value: before, it became BLOCK_X in the mapping, and the data's shape with it.
    mapping = LaunchMapping(("rows",), ("1024",), "(ncols + 32) * 4", (("ncols", "1024"),), "spec")
    t = apply(SOFTMAX_LIKE, "block-size", mapping=mapping, template_args=["true", "1024", "1024"])
    (knob,) = t.knobs
    assert knob.name == "BLOCK_X"
    assert t.template_args == ("true", "1024", "{BLOCK_X if BLOCK_X else 1024}")
    launch = t.launch()
    assert launch is not None
    assert launch.evaluate({"rows": 2, "BLOCK_X": 256}) == ((2,), (256,), (1024 + 32) * 4)
    assert launch.evaluate({"rows": 2, "BLOCK_X": 0})[1] == (1024,)
    assert t.mapping is not None and dict(t.mapping.vars)["ncols"] == "1024"


ROWS_UNROLLED = """\
template <typename T, int UNROLL, int threadsPerGroup, int maxThreads>
__global__ void pre_norm(T* out, const T* x, int elems_per_row) {
  const int row = blockIdx.x * (maxThreads / threadsPerGroup) + threadIdx.x / threadsPerGroup;
  float s = 0.f;
  for (int i = 0; i < UNROLL; i++) {
    const int col = i * blockDim.x + threadIdx.x;
    if (col < elems_per_row) s += (float)x[row * elems_per_row + col];
  }
  out[row * elems_per_row + threadIdx.x] = (T)s;
}
"""


def test_a_per_shape_items_count_keeps_the_block_at_least_as_large_and_bound_block_arguments_follow() -> None:
    # DeepSpeed's pre_rms_norm<T, {2 * ceil(e / 4096)}, 256, 256>: UNROLL covers the row for 256
    # threads, so only larger blocks cover it too; threadsPerGroup and maxThreads (= the block)
    # follow the knob. Before, BLOCK_X took 32 .. 128 and left both template arguments at 256.
    mapping = LaunchMapping(("rows",), ("block",), "0", (("block", "256"),), "spec")
    args = ["float", "{2 * ((elems_per_row + 4095) // 4096)}", "256", "256"]
    t = apply(ROWS_UNROLLED, "block-size", mapping=mapping, template_args=args)
    (knob,) = t.knobs
    assert (knob.name, knob.values) == ("BLOCK_X", (0, 256, 512, 1024))
    follow = "{BLOCK_X if BLOCK_X else 256}"
    assert t.template_args == ("float", args[1], follow, follow)
    assert any("x stays at least 256" in r for r in remarks(t))


#: cuda-samples fp16ScalarProduct: a grid-stride dot product whose shared partials are reduced
#: by a helper unrolled for 128 threads; the grid (128 blocks) equals the block by chance.
UNROLLED_REDUCTION = """\
#define NUM_OF_BLOCKS 128
#define NUM_OF_THREADS 128
__device__ void reduce(float* v) {
  if (threadIdx.x < 64) v[threadIdx.x] += v[threadIdx.x + 64];
  __syncthreads();
  if (threadIdx.x < 32) v[threadIdx.x] += v[threadIdx.x + 32];
  __syncthreads();
  if (threadIdx.x < 1) v[threadIdx.x] += v[threadIdx.x + 1];
  __syncthreads();
}
__global__ void dot(const float* a, const float* b, float* results, int size) {
  const int stride = gridDim.x * blockDim.x;
  __shared__ float sh[NUM_OF_THREADS];
  float value = 0.f;
  for (int i = threadIdx.x + blockIdx.x * blockDim.x; i < size; i += stride) value += a[i] * b[i];
  sh[threadIdx.x] = value;
  __syncthreads();
  reduce(sh);
  if (threadIdx.x == 0) results[blockIdx.x] = sh[0];
}
void launch(const float* a, const float* b, float* r, int n) {
  dot<<<NUM_OF_BLOCKS, NUM_OF_THREADS>>>(a, b, r, n);
}
"""


def test_a_reduction_a_callee_unrolls_for_the_block_size_is_refused() -> None:
    """Session 9: BLOCK_X = 256 summed half the partials (wrong result), 32 and 64 read past the
    shared array (crash): 7 failed candidates."""
    spec = LaunchMapping(("128",), ("128",), "0", (), "spec")
    t = apply(UNROLLED_REDUCTION, "block-size", mapping=spec)
    assert not t.knobs
    assert any(
        "`threadIdx.x < 64` in reduce() at line 4 is written for a block of 128 threads" in r
        for r in remarks(t, "skipped")
    )


def test_a_block_size_reduction_that_follows_blockdim_is_still_a_knob() -> None:
    """The control: the same kernel reducing over blockDim.x / 2 .. 1 takes the knob, and the
    spec's grid of 128 blocks stays 128 (a count of blocks, not the block's size)."""
    generic = UNROLLED_REDUCTION.replace(
        """  if (threadIdx.x < 64) v[threadIdx.x] += v[threadIdx.x + 64];
  __syncthreads();
  if (threadIdx.x < 32) v[threadIdx.x] += v[threadIdx.x + 32];
  __syncthreads();
  if (threadIdx.x < 1) v[threadIdx.x] += v[threadIdx.x + 1];
  __syncthreads();
""",
        """  for (unsigned s = blockDim.x / 2; s > 0; s >>= 1) {
    if (threadIdx.x < s) v[threadIdx.x] += v[threadIdx.x + s];
    __syncthreads();
  }
""",
    )
    spec = LaunchMapping(("128",), ("128",), "0", (), "spec")
    t = apply(generic, "block-size", mapping=spec)
    assert [k.name for k in t.knobs] == ["BLOCK_X"]
    launch = t.launch()
    assert launch is not None
    grid, block = launch.evaluate({"BLOCK_X": 256})[:2]
    assert grid == (128,) and block == (256,)
