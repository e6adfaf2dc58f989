"""Issue 22's launch patterns as launch facts: params-struct helpers, unseen helpers, dispatch macros."""

from __future__ import annotations

import shutil
from pathlib import Path

from ktx.ir import parse, parse_file
from ktx.ir.launch import (
    expansion_local,
    expansion_template_choice,
    kernel_across_includes,
    launch_dims,
    macro_expansions,
    mapping_from_file,
    rebuilt_dim3,
)

REACH = Path(__file__).resolve().parents[1] / "corpus" / "launch_reach"


def test_a_params_struct_helper_launches_with_the_fields_the_caller_set() -> None:
    m = parse_file(REACH / "params_helper.cu")
    (site,) = [s for s in m.launch_sites if s.kernel == "row_sum"]
    assert site.wrapper == "launch" and site.function == "run_row_sum"
    assert m.text(site.grid) == "dim3((rows + 3) / 4)" and m.text(site.block) == "dim3(32, 4)"
    assert site.shared is not None and m.text(site.shared) == "0"
    assert site.stream is not None and m.text(site.stream) == "s"
    assert site.args == ("out", "in", "rows", "cols")
    mapping = mapping_from_file(m, "row_sum")
    assert mapping is not None and mapping.resolved().block == ("32", "4")


def test_a_params_field_set_in_a_branch_makes_no_site() -> None:
    src = (
        (REACH / "params_helper.cu")
        .read_text()
        .replace("  params.block_dim = dim3(32, 4);", "  if (cols > 64) params.block_dim = dim3(32, 4);")
    )
    m = parse(src)
    assert [s.kernel for s in m.launch_sites if s.kernel == "row_sum"] == []


def test_an_unseen_helper_with_a_params_struct_is_no_launch() -> None:
    # launch_kernel(scale, params, y, x, a, n): reading ``y`` as the block would let a pass
    # rewrite a kernel argument; before issue 22 the site had grid ``params``, block ``y``.
    m = parse_file(REACH / "unseen_helper.cu")
    assert m.launch_sites == ()


def test_an_unseen_helper_with_grid_and_block_arguments_is_a_launch() -> None:
    src = (
        "__global__ void k(float* y, int n) { y[threadIdx.x] = n; }\n"
        "void go(float* y, int n) { dim3 g(n); int b = 128; launch_kernel(k, g, b, y, n); }\n"
    )
    m = parse(src)
    (site,) = m.launch_sites
    assert (m.text(site.grid), m.text(site.block), site.args) == ("g", "b", ("y", "n"))


def test_a_pointer_argument_is_never_a_block() -> None:
    src = (
        "__global__ void k(float* y, float* x) { y[threadIdx.x] = x[0]; }\n"
        "void go(float* y, float* x, int n) { launch_kernel(k, n, y, x); }\n"
    )
    assert parse(src).launch_sites == ()


def test_cuda_launch_kernel_ex_reads_the_config_fields() -> None:
    m = parse_file(REACH / "launch_ex.cu")
    (site,) = m.launch_sites
    assert site.api == "cudaLaunchKernelEx" and site.args == ("y", "x", "a", "n")
    assert (m.text(site.grid), m.text(site.block)) == ("dim3((n + 255) / 256)", "dim3(256)")
    mapping = mapping_from_file(m, "scale")
    assert mapping is not None and mapping.resolved().block == ("256",)


def test_a_dispatch_macros_dim3_names_are_whole_dim3s() -> None:
    m = parse_file(REACH / "dispatch_macro.cu")
    (site,) = m.launch_sites
    assert site.macro == "LAUNCH_ROW_SCALE"
    for which in ("grid", "block"):
        dims = launch_dims(m, site, which)
        assert dims.whole_dim3 and [m.source[c.start_byte : c.end_byte] for c in dims.components] == [
            which.encode()
        ]


def test_rebuilt_dim3_changes_one_component() -> None:
    assert rebuilt_dim3("grid", y="KTX_SPLIT") == "dim3(grid.x, KTX_SPLIT, grid.z)"
    assert rebuilt_dim3("g", x="(g.x) / 2") == "dim3((g.x) / 2, g.y, g.z)"


def test_macro_expansions_bind_the_arguments_and_name_the_branch() -> None:
    m = parse_file(REACH / "dispatch_macro.cu")
    (site,) = m.launch_sites
    first, second = macro_expansions(m, site)
    assert (first.bindings, first.guard, first.function) == (
        (("U", "4"),),
        "if cols % 4 == 0",
        "run_row_scale",
    )
    assert (second.bindings, second.guard) == ((("U", "1"),), "else of cols % 4 == 0")
    assert first.bind(", ".join(site.template_args)) == "float, 4"
    assert expansion_local(m, first, "grid") == "rows" and expansion_local(m, second, "block") == "128"


def test_a_local_set_in_a_branch_before_the_expansion_has_no_guess() -> None:
    src = (
        (REACH / "dispatch_macro.cu")
        .read_text()
        .replace("  if (cols % 4 == 0) {\n", "  if (cols % 4 == 0) {\n    grid.x = rows / 2;\n")
    )
    m = parse(src)
    (site,) = m.launch_sites
    assert [expansion_local(m, e, "grid") for e in macro_expansions(m, site)] == [None, None]


def test_one_instantiation_in_every_branch_is_no_choice() -> None:
    src = (REACH / "dispatch_macro.cu").read_text().replace("LAUNCH_ROW_SCALE(1)", "LAUNCH_ROW_SCALE(4)")
    m = parse(src)
    assert expansion_template_choice(m, m.launch_sites[0]) is None


def test_the_kernel_of_an_included_header_pairs_with_its_launch(tmp_path: Path) -> None:
    pair = REACH / "header_pair"
    found = kernel_across_includes(pair / "scale.cu", parse_file(pair / "scale.cu"), None)
    assert found is not None and (found.header.name, found.launcher.name) == ("scale.cuh", "scale.cu")
    (site,) = found.module.launches_of("scale")
    assert site.span.line == 4 and [k.name for k in found.module.kernels] == ["scale"]
    back = kernel_across_includes(pair / "scale.cuh", parse_file(pair / "scale.cuh"), None)
    assert back is not None and back.launcher.name == "scale.cu"
    # A header found through an include folder rather than beside the file.
    (tmp_path / "inc").mkdir()
    shutil.copy(pair / "scale.cuh", tmp_path / "inc" / "scale.cuh")
    shutil.copy(pair / "scale.cu", tmp_path / "scale.cu")
    module = parse_file(tmp_path / "scale.cu")
    assert kernel_across_includes(tmp_path / "scale.cu", module, None) is None
    assert kernel_across_includes(tmp_path / "scale.cu", module, None, (tmp_path / "inc",)) is not None


def test_a_file_with_its_kernel_and_launch_needs_no_pair() -> None:
    assert kernel_across_includes(REACH / "launch_ex.cu", parse_file(REACH / "launch_ex.cu"), None) is None


def test_cuda_launch_kernel_directly_and_through_a_params_helper() -> None:
    src = """
struct launch_params { dim3 grid_dim; dim3 block_dim; size_t smem; cudaStream_t stream; };
__global__ void k(float* y, int n) { int i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) y[i] = 0.f; }
template <typename Kernel>
void launch_raw(Kernel kernel, const launch_params& p, void** args) {
  cudaLaunchKernel((const void*)kernel, p.grid_dim, p.block_dim, args, p.smem, p.stream);
}
void go(float* y, int n, cudaStream_t s) {
  void* args[] = {&y, &n};
  cudaLaunchKernel((const void*)k, dim3((n + 127) / 128), dim3(128), args, 0, s);
  launch_params p;
  p.grid_dim = dim3((n + 63) / 64);
  p.block_dim = dim3(64);
  p.smem = 0;
  p.stream = s;
  launch_raw(k, p, args);
}
"""
    m = parse(src)
    direct, helper = [s for s in m.launch_sites if s.kernel == "k"]
    assert (direct.api, m.text(direct.grid), m.text(direct.block)) == (
        "cudaLaunchKernel",
        "dim3((n + 127) / 128)",
        "dim3(128)",
    )
    assert (helper.wrapper, m.text(helper.grid), m.text(helper.block)) == (
        "launch_raw",
        "dim3((n + 63) / 64)",
        "dim3(64)",
    )
    assert helper.shared is not None and m.text(helper.shared) == "0"


BUILT_PARAMS = """\
struct launch_params_t {
  launch_params_t(const dim3& g, const dim3& b, int shmem, int stream);
};
template <typename T>
__global__ void copy_rows(T* dst, const T* src, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) dst[i] = src[i];
}
void run(float* dst, const float* src, int n, int stream) {
  const dim3 grid((n + 255) / 256);
  const dim3 block(256);
  const launch_params_t params = launch_params_t{grid, block, 0, stream};
  kernel_launch(copy_rows<float>, params, dst, src, n);
}
void run_ctor(float* dst, const float* src, int n, int stream) {
  const launch_params_t params = launch_params_t((n + 127) / 128, 128, 0, stream);
  kernel_launch(copy_rows<float>, params, dst, src, n);
}
void run_fields(float* dst, const float* src, int n, int stream) {
  launch_params_t params;
  kernel_launch(copy_rows<float>, params, dst, src, n);
}
"""


def test_a_helper_given_a_params_struct_built_in_one_piece_launches_with_its_values() -> None:
    # ggml's ggml_cuda_kernel_launch(k, launch_params, args...), the helper in a header ktx
    # does not read: the struct's first values are the grid and the block
    m = parse(BUILT_PARAMS, "b.cu")
    sites = {s.function: s for s in m.launch_sites if s.kernel == "copy_rows"}
    braced = sites["run"]
    assert (m.text(braced.grid), m.text(braced.block)) == ("grid", "block")
    assert braced.shared is not None and m.text(braced.shared) == "0"
    assert braced.args == ("dst", "src", "n") and braced.template_args == ("float",)
    called = sites["run_ctor"]
    assert (m.text(called.grid), m.text(called.block)) == ("(n + 127) / 128", "128")
    assert "run_fields" not in sites  # set nowhere in one piece: not read as a launch


def test_a_grid_cast_to_dim3_is_the_one_dimension_of_its_value() -> None:
    # ggml_cuda_kernel_launch_params((dim3)num_blocks, ...): rows-per-block divides the
    # dimension; dividing the cast whole (a dim3) did not compile
    m = parse(BUILT_PARAMS.replace("launch_params_t((n + 127) / 128,", "launch_params_t((dim3)nb,"), "c.cu")
    (site,) = [s for s in m.launch_sites if s.function == "run_ctor"]
    grid = launch_dims(m, site, "grid")
    assert [m.text(m.span(c.start_byte, c.end_byte)) for c in grid.components] == ["nb"]
    assert not grid.whole_dim3
