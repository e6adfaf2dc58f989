"""Launch sites: <<<...>>> in host code and in #define bodies, and runtime-API launches."""

from __future__ import annotations

import pytest
from ktx.ir import LaunchSite, Module, parse

SRC = """\
#define THREADS 256
namespace ns {
template <typename T, int VEC>
__global__ void k(T* x, int n) {}
}  // namespace ns
__global__ void plain(float* x) {}

#define LAUNCH_K(T, V)                                           \\
  do {                                                           \\
    ns::k<T, V><<<grid, THREADS, V * sizeof(T), stream>>>(x, n); \\
  } while (0)

template <typename T>
void launch(T* x, int n, cudaStream_t stream) {
  dim3 grid((n + THREADS - 1) / THREADS);
  ns::k<T, 4><<<grid, dim3(THREADS), 0, stream>>>(x, n);
  plain<<<1, 32>>>(nullptr);
  auto kernel = ns::k<T, 8>;
  kernel<<<grid,
           THREADS,
           8 * sizeof(T)>>>(x, n);
  auto run = [&](int v) {
    plain<<<v, 64, 0, stream>>>(nullptr);
  };
  LAUNCH_K(T, 2);
}

void api(float* x, cudaStream_t stream) {
  cudaLaunchConfig_t config;
  config.gridDim = dim3(132);
  config.blockDim = dim3(512);
  config.dynamicSmemBytes = 1024;
  config.stream = stream;
  cudaLaunchKernelEx(&config, plain, x);
  void* args[] = {&x};
  cudaLaunchKernel((const void*)plain, dim3(4), dim3(128), args, 0, stream);
  cudaLaunchConfig_t cfg2 = {.gridDim = dim3(8), .blockDim = dim3(64)};
  cudaLaunchKernelEx(&cfg2, ns::k<float, 2>, x, 1);
}
"""


@pytest.fixture(scope="module")
def mod() -> Module:
    return parse(SRC, "launches.cu")


def text(m: Module, site: LaunchSite) -> tuple[str, ...]:
    parts = (site.grid, site.block, site.shared, site.stream)
    return tuple(m.text(p) if p is not None else "-" for p in parts)


def test_all_sites_in_order(mod: Module) -> None:
    got = [(s.kernel, s.template_args, s.function, s.macro, s.api) for s in mod.launch_sites]
    assert got == [
        ("k", ("T", "V"), None, "LAUNCH_K", None),
        ("k", ("T", "4"), "launch", None, None),
        ("plain", (), "launch", None, None),
        ("k", ("T", "8"), "launch", None, None),
        ("plain", (), "launch", None, None),
        ("plain", (), "api", None, "cudaLaunchKernelEx"),
        ("plain", (), "api", None, "cudaLaunchKernel"),
        ("k", ("float", "2"), "api", None, "cudaLaunchKernelEx"),
    ]


def test_chevron_parts(mod: Module) -> None:
    sites = mod.launch_sites
    assert text(mod, sites[1]) == ("grid", "dim3(THREADS)", "0", "stream")
    assert text(mod, sites[2]) == ("1", "32", "-", "-")
    assert mod.text(sites[2].config) == "<<<1, 32>>>"
    assert sites[2].args == ("nullptr",)
    assert mod.text(sites[1].span) == "ns::k<T, 4><<<grid, dim3(THREADS), 0, stream>>>(x, n)"
    assert [mod.text(s) for s in sites[1].template_arg_spans] == ["T", "4"]


def test_multiline_config_through_alias(mod: Module) -> None:
    site = mod.launch_sites[3]
    assert text(mod, site) == ("grid", "THREADS", "8 * sizeof(T)", "-")
    assert site.span.line == 19
    # The template arguments live where the alias is declared: that is where an edit goes.
    assert [(mod.text(s), s.line) for s in site.template_arg_spans] == [("T", 18), ("8", 18)]


def test_launch_in_lambda_belongs_to_enclosing_function(mod: Module) -> None:
    site = mod.launch_sites[4]
    assert site.function == "launch" and text(mod, site) == ("v", "64", "0", "stream")


def test_launch_in_macro_body_points_into_the_body(mod: Module) -> None:
    site = mod.launch_sites[0]
    assert site.macro == "LAUNCH_K" and site.span.line == 10
    assert text(mod, site) == ("grid", "THREADS", "V * sizeof(T)", "stream")
    assert mod.text(site.config) == "<<<grid, THREADS, V * sizeof(T), stream>>>"


def test_macro_launch_host_is_the_enclosing_function() -> None:
    src = "__global__ void k(int* x) {}\nvoid host(int* x) {\n#define GO(B) k<<<1, B>>>(x)\n  GO(32);\n}\n"
    (site,) = parse(src).launch_sites
    assert (site.kernel, site.function, site.macro) == ("k", "host", "GO")


def test_runtime_api_launches(mod: Module) -> None:
    ex, classic, designated = mod.launch_sites[5:]
    assert text(mod, ex) == ("dim3(132)", "dim3(512)", "1024", "stream")
    assert ex.args == ("x",) and mod.text(ex.config) == "&config"
    assert text(mod, classic) == ("dim3(4)", "dim3(128)", "0", "stream")
    assert classic.args == ("args",)
    assert text(mod, designated) == ("dim3(8)", "dim3(64)", "-", "-")


def test_ex_launch_without_block_dim_is_skipped() -> None:
    src = "void f(cudaLaunchConfig_t c) { c.gridDim = 4; cudaLaunchKernelEx(&c, k, 1); }"
    assert parse(src).launch_sites == ()


def test_launches_of(mod: Module) -> None:
    assert len(mod.launches_of("plain")) == 4
    assert len(mod.launches_of("k")) == 4
    assert mod.launches_of("absent") == ()


def test_garbage_callee_in_error_region_is_not_a_site() -> None:
    src = "void f() {\n<<<<<<< HEAD\n  a::b<int>\n>>>>>>> main\n  <<<1, 2>>>(x);\n}\n"
    for site in parse(src).launch_sites:
        assert site.kernel.isidentifier()


def test_launch_through_a_conditional_alias_or_a_picker_function() -> None:
    """causal-conv1d's ``auto kernel = c ? &k<A, false> : &k<A, true>; kernel<<<...>>>`` (the
    first branch, as a launcher's first launch) and exllamav2's ``fp kernel = pick(bpw);``,
    whose picker returns the kernel from a macro it invokes."""
    m = parse(
        "template <int B, bool C> __global__ void k(float* x) {}\n"
        "template <int B> __global__ void r(float* x) {}\n"
        "typedef void (*fp_r)(float*);\n"
        "#define instance(b) if (bpw == b) return r<b>\n"
        "fp_r pick(int bpw) {\n  instance(1);\n  instance(2);\n  return NULL;\n}\n"
        "fp_r plain(int bpw) { return &r<4>; }\n"
        "void go(float* x, int* c, int bpw) {\n"
        "  auto kernel = c == nullptr ? &k<64, false> : &k<64, true>;\n"
        "  kernel<<<1, 64>>>(x);\n"
        "  fp_r rk = pick(bpw);\n"
        "  rk<<<2, 128>>>(x);\n"
        "  fp_r pk = plain(bpw);\n"
        "  pk<<<3, 32>>>(x);\n"
        "  fp_r none = unknown(bpw);\n"
        "  none<<<4, 32>>>(x);\n"
        "}\n"
    )
    got = [(s.kernel, s.template_args, m.text(s.block)) for s in m.launch_sites]
    assert got == [
        ("k", ("64", "false"), "64"),
        ("r", ("b",), "128"),  # the macro's parameter: the draft asks for its value
        ("r", ("4",), "32"),
        ("none", (), "32"),  # a picker the file does not define: not read as a kernel
    ]
