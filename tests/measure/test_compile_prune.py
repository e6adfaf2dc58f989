"""Compiling only the requested kernel (ktx.measure.compile_prune): the other kernels of the file
keep their signatures but not their bodies, the requested one is untouched, and with nvcc its
machine code is byte-identical to the whole file's."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from ktx.measure.compile import CompileRequest, _sections, compile_kernel, elf_symbol_table, kernel_symbols
from ktx.measure.compile_prune import ENV, kernel_name, prune

#: A file like a real project's: the measured kernel, a template kernel the host code instantiates
#: for many types (ggml's k_get_rows_kq: 119 kernels for one candidate), a kernel the measured one
#: launches from the device, and host code that launches them all.
SOURCE = """\
#include <cstdint>
template <typename T, int N>
__global__ void heavy(const T* x, T* y, int n) {
    T acc = 0;
    #pragma unroll
    for (int i = 0; i < N; ++i) acc += x[(threadIdx.x + i * 7) % n] * (T)(i + 1);
    y[threadIdx.x] = acc;
}

__global__ void child(float* y) { y[0] = 1.0f; }

template <typename T>
__global__ void scale(const T* x, T* y, T a, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = a * x[i];
}

__global__ void spawner(float* y) {
    child<<<1, 1>>>(y);
}

void launch_all(const float* x, float* y, int n) {
    heavy<float, 64><<<1, 64>>>(x, y, n);
    heavy<double, 64><<<1, 64>>>((const double*)x, (double*)y, n);
    heavy<int, 64><<<1, 64>>>((const int*)x, (int*)y, n);
    heavy<float, 128><<<1, 64>>>(x, y, n);
    scale<float><<<1, 64>>>(x, y, 2.0f, n);
    scale<double><<<1, 64>>>((const double*)x, (double*)y, 2.0, n);
}
"""


def test_the_other_kernels_lose_their_bodies_and_keep_their_lines() -> None:
    p = prune(SOURCE, "scale<float>")
    assert set(p.emptied) == {"heavy", "child", "spawner"}
    assert p.source.count("\n") == SOURCE.count("\n"), "compiler messages keep their line numbers"
    assert "y[i] = a * x[i];" in p.source  # the requested kernel, as it was
    assert "acc +=" not in p.source and "child<<<" not in p.source
    # signatures and the host code stay: every launch still names a declared kernel
    assert "__global__ void heavy(const T* x, T* y, int n) {" in p.source
    assert p.source[p.source.index("void launch_all") :] == SOURCE[SOURCE.index("void launch_all") :]


def test_a_kernel_the_requested_one_names_is_kept() -> None:
    p = prune(SOURCE, "spawner")
    assert "child" not in p.emptied and "child<<<1, 1>>>(y);" in p.source
    assert set(p.emptied) == {"heavy", "scale"}


def test_nothing_is_removed_when_the_kernel_is_not_defined_here_or_pruning_is_off(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    assert prune(SOURCE, "from_a_header<int>").source == SOURCE
    monkeypatch.setenv(ENV, "0")
    assert prune(SOURCE, "scale<float>").emptied == ()


def test_the_cache_key_tells_pruned_from_whole_cubins(monkeypatch: pytest.MonkeyPatch) -> None:
    req = CompileRequest(SOURCE, "scale<float>", ("-O3",), "90", (), "nvcc")
    pruned = req.key
    monkeypatch.setenv(ENV, "0")
    assert req.key != pruned


def test_kernel_name() -> None:
    assert kernel_name("ns::inner::k<float, 4>") == "k"
    assert kernel_name("  k  ") == "k"


def _code(cubin: bytes, symbol: str) -> bytes:
    sections = _sections(cubin)
    sym = next(s for s in elf_symbol_table(cubin) if s.name == symbol)
    sec = sections[sym.shndx]
    return cubin[sec.offset : sec.offset + sec.size]


def _all_code(cubin: bytes) -> int:
    sections = _sections(cubin)
    names = set(kernel_symbols(cubin))
    return sum(sections[s.shndx].size for s in elf_symbol_table(cubin) if s.name in names)


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("nvcc") is None, reason="needs nvcc")
@pytest.mark.parametrize("expression", ["scale<float>", "spawner"])
def test_nvcc_builds_the_same_machine_code_for_the_kernel_and_less_for_the_rest(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, expression: str
) -> None:
    # the device-side launch in ``spawner`` needs separate compilation for the whole file
    req = CompileRequest(SOURCE, expression, ("-std=c++17", "-rdc=true"), "90", (), "nvcc")
    cubins = {}
    for mode in ("0", "1"):
        monkeypatch.setenv(ENV, mode)
        monkeypatch.setenv("KTX_CACHE_DIR", str(tmp_path / mode))
        result = compile_kernel(req)
        assert result.ok, result.log
        cubins[mode] = (Path(result.cubin_path).read_bytes(), result.lowered_name)
    (whole, name), (pruned, pruned_name) = cubins["0"], cubins["1"]
    assert name == pruned_name
    assert _code(whole, name) == _code(pruned, name)
    assert _all_code(pruned) < _all_code(whole) / 2
