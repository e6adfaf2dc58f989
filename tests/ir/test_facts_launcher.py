"""What the draft translator reads from a launcher (ir/facts/launcher.py) that the plain launch
translator does not: function-like macros of the file's local headers, sizes read from the
caller's objects, the device's fixed limits, and ``sizeof`` of a type the launch binds."""

from __future__ import annotations

from pathlib import Path

from ktx.ir import parse, parse_file
from ktx.ir.facts.launcher import choose_kernel, function_macro, launcher_of, read_launch, translator_for

KERNEL = "__global__ void k(float* y, int n) {\n  int i = threadIdx.x; if (i < n) y[i] = 0;\n}\n"


def _launch(module_src: str, path: Path | None = None):  # type: ignore[no-untyped-def]
    module = parse_file(path) if path is not None else parse(module_src, "f.cu")
    _fn, site = choose_kernel(module, str(path or "f.cu"), None)
    tr = translator_for(module, site, launcher_of(module, site))
    return read_launch(module, site, tr), tr


def test_a_function_like_macro_of_a_local_header_is_expanded(tmp_path: Path) -> None:
    (tmp_path / "util.cuh").write_text("#define DIVIDE(x, size) (((x) + (size) - 1) / (size))\n")
    src = tmp_path / "f.cu"
    src.write_text(
        '#include "util.cuh"\n' + KERNEL + "void go(float* y, int n) { k<<<DIVIDE(n, 256), 256>>>(y, n); }\n"
    )
    launch, _ = _launch("", src)
    assert launch.grid == ("(n + 256 - 1) // 256",)
    assert function_macro(parse_file(src), src, "DIVIDE") == (
        ("x", "size"),
        "(((x) + (size) - 1) / (size))",
    )


def test_a_macro_whose_body_names_more_than_its_parameters_is_not_expanded() -> None:
    launch, _ = _launch(
        "#define SPREAD(x) ((x) * FACTOR)\n"
        + KERNEL
        + "void go(float* y, int n) { k<<<SPREAD(n), 256>>>(y, n); }\n"
    )
    assert launch.grid is None  # FACTOR has no value here: a TODO, not a guess


TENSOR = "struct Tensor { long size(int) const; long numel() const; };\n"


def test_a_size_read_from_the_callers_object_is_a_shape_variable_of_its_name() -> None:
    launch, tr = _launch(
        TENSOR + KERNEL + "void go(float* y, const Tensor& t) {\n"
        "  int rows = t.numel() / t.size(-1);\n  dim3 grid(rows);\n  k<<<grid, 256>>>(y, rows);\n}\n"
    )
    assert launch.grid == ("rows",)
    assert tr.host_sizes == {"rows": 6}  # the line that sets it


def test_members_of_the_launchers_locals_or_calls_are_no_sizes() -> None:
    # ``threads.y`` is the launcher's own dim3; ``props()->sharedMemPerBlock`` the device's
    launch, tr = _launch(
        "struct P { int sharedMemPerBlock; };\nconst P* props();\n" + KERNEL
        + "void go(float* y, int n) {\n  dim3 threads(32, 4);\n  int per = threads.y * 2;\n"
        "  int smem = props()->sharedMemPerBlock;\n  k<<<per, threads, smem>>>(y, n);\n}\n"
    )  # fmt: skip
    assert tr.host_sizes == {}
    assert launch.grid == ("4 * 2",) or launch.grid == ("8",)
    assert launch.shared is None  # the device's shared memory is no fixed limit: a TODO


def test_the_devices_fixed_limits_are_their_values() -> None:
    launch, tr = _launch(
        "struct P { int maxGridSize[3]; int maxThreadsPerBlock; };\nconst P* props();\n" + KERNEL
        + "void go(float* y, int n) {\n  const long gy = props()->maxGridSize[1];\n"
        "  const int most = props()->maxThreadsPerBlock;\n"
        "  const dim3 blocks(1, n < gy ? n : gy);\n  k<<<blocks, most>>>(y, n);\n}\n"
    )  # fmt: skip
    assert launch.grid == ("1", "n if n < 65535 else 65535")
    assert launch.block == ("1024",)
    assert tr.host_sizes == {}


def test_sizeof_a_type_the_launch_binds_and_which_parts_read_it() -> None:
    module = parse(
        "template <typename T> __global__ void k(T* y, int n) { int i = threadIdx.x; if (i < n) y[i] = 0; }\n"
        "template <typename T> void go(T* y, int n) {\n  constexpr int per = 16 / sizeof(T);\n"
        "  k<T><<<n / per, 256, 256 * sizeof(T)>>>(y, n);\n}\n",
        "f.cu",
    )
    _fn, site = choose_kernel(module, "f.cu", None)
    tr = translator_for(module, site, launcher_of(module, site))
    tr.types["T"] = "half"
    launch = read_launch(module, site, tr)
    assert launch.grid == ("n // (16 // 2)",)
    assert dict(launch.sized) == {"grid": ("T",), "block": (), "shared": ("T",)}


def test_a_header_value_through_the_include_folders_and_expressions(tmp_path: Path) -> None:
    from ktx.ir.facts.launcher import header_expr

    inc = tmp_path / "includes"
    inc.mkdir()
    (inc / "utils.h").write_text(
        "#ifdef __HIP_PLATFORM_AMD__\nconstexpr int hw_warp_size = ROCM_WAVEFRONT_SIZE;\n#else\n"
        "constexpr int hw_warp_size = 32;\n#endif\n#define LOG2_W 5U\n#define W (1U << LOG2_W)\n"
        "#define COUNT 6\n#define THREADS (COUNT * W)\n#define OTHER (COUNT * UNKNOWN_NAME)\n"
    )
    src = tmp_path / "src" / "k.cu"
    src.parent.mkdir()
    src.write_text('#include "utils.h"\n')
    assert header_expr(src, "hw_warp_size") is None  # utils.h is not beside k.cu
    # the other platform's definition names what no header defines: the next one is taken
    assert header_expr(src, "hw_warp_size", [inc]) == "32"
    assert header_expr(src, "THREADS", [inc]) == "6 * 32"  # each name replaced by its value
    assert header_expr(src, "OTHER", [inc]) is None


MACRO_LAUNCH = """\
template <typename T, int U>
__global__ void k(T* out, int n) { int i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) out[i] = U; }
#define LAUNCH_K(UU) k<T, UU><<<grid, block>>>(out, n);
#define LAUNCH_ANY(W) if (W) { LAUNCH_K(8) } else { LAUNCH_K(4) }
template <typename T>
void launch_k(T* out, int n, bool w) {
  const dim3 block(128);
  const dim3 grid((n + 127) / 128);
  LAUNCH_ANY(w);
}
template <typename T>
void other(T* out, int n) {
  const dim3 grid(n);
}
"""


def test_a_macro_held_launch_reads_its_locals_where_the_macro_expands() -> None:
    from ktx.ir.facts.launcher import expansion_value
    from ktx.ir.launch import expansion_guess, expansion_scope

    module = parse(MACRO_LAUNCH, "m.cu")
    _, site = choose_kernel(module, "m.cu", "k")
    scope = expansion_scope(module, site)
    assert scope is not None and scope[0].name == "launch_k"  # a template, through LAUNCH_ANY
    assert expansion_value(module, site, "grid") == "(n + 127) // 128"
    assert expansion_value(module, site, "block") == "128"
    assert expansion_value(module, site, "stream") is None  # no such local
    direct = MACRO_LAUNCH.replace("LAUNCH_ANY(w);", "LAUNCH_K(8);")
    module = parse(direct, "m.cu")
    _, site = choose_kernel(module, "m.cu", "k")
    guess = expansion_guess(module, site, "grid")
    assert guess is not None and "of launch_k," in guess  # named, not "?"


def test_a_macro_expanded_in_two_functions_has_no_one_scope() -> None:
    from ktx.ir.launch import expansion_scope

    two = MACRO_LAUNCH.replace("  const dim3 grid(n);\n}", "  const dim3 grid(n);\n  LAUNCH_K(2);\n}")
    module = parse(two, "m.cu")
    _, site = choose_kernel(module, "m.cu", "k")
    assert expansion_scope(module, site) is None
