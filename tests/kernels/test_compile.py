"""Every kernels/*/kernel.cu compiles with nvcc (and NVRTC where found), without spills."""

from __future__ import annotations

import re
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from ktx.measure.compile import CompileRequest, compile_kernel, find_nvcc
from ktx.measure.types import original_candidate
from ktx.specload import load_spec

from ._suite import (
    KERNEL_NAMES,
    KERNELS_DIR,
    NAME_EXPRESSIONS,
    SPEC_KERNELS,
    SuiteBuild,
    cuda_include_dir,
    load_nvrtc,
    nvrtc_compile,
    parse_ptxas,
    spec_name_expressions,
)

#: Headers device code may include (NVRTC finds these; nothing from the host standard library).
DEVICE_HEADERS = {"cuda_bf16.h", "cuda_fp16.h", "cuda_fp8.h"}

#: Text that only host code may contain.
HOST_ONLY = [
    re.compile(r"<<<"),
    re.compile(r"\bcudaStream_t\b"),
    re.compile(r"\bstd::"),
    re.compile(r"\bcudaFuncSetAttribute\b"),
]


def _source(name: str) -> str:
    return (KERNELS_DIR / name / "kernel.cu").read_text()


def _global_names(source: str) -> list[str]:
    return re.findall(r"__global__\s+void\s+(\w+)\s*\(", source)


def _split_rtc_guard(source: str) -> tuple[list[str], list[str]]:
    """(lines NVRTC sees, lines inside ``#ifndef __CUDACC_RTC__``), by a small preprocessor walk."""
    seen: list[str] = []
    hidden: list[str] = []
    stack: list[bool] = []  # True where the branch is hidden from NVRTC
    for line in source.splitlines():
        directive = line.strip()
        if directive.startswith("#if"):
            stack.append(bool(re.match(r"#\s*ifndef\s+__CUDACC_RTC__\b", directive)))
            continue
        if directive.startswith("#else") and stack:
            stack[-1] = not stack[-1] if stack[-1] else stack[-1]
            continue
        if directive.startswith("#endif") and stack:
            stack.pop()
            continue
        (hidden if any(stack) else seen).append(line)
    return seen, hidden


def _strip_comments(line: str) -> str:
    return line.split("//", 1)[0]


@pytest.mark.parametrize("name", KERNEL_NAMES)
def test_folder_layout(name: str) -> None:
    folder = KERNELS_DIR / name
    assert (folder / "README.md").is_file(), f"{name}: README.md missing"
    assert (folder / "reference.py").is_file(), f"{name}: reference.py missing"
    source = _source(name)
    assert source.lstrip().startswith("//"), f"{name}: kernel.cu must open with its top comment"
    assert _global_names(source), f"{name}: no __global__ kernel"


@pytest.mark.parametrize("name", KERNEL_NAMES)
@pytest.mark.slow
def test_nvcc_object(suite_build: SuiteBuild, name: str) -> None:
    result = suite_build.objects[name]
    assert result.returncode == 0, f"nvcc -c failed for {name}:\n{result.stderr}"
    assert "warning" not in result.stderr.lower(), result.stderr


@pytest.mark.parametrize("name", KERNEL_NAMES)
@pytest.mark.slow
def test_nvcc_device_c(suite_build: SuiteBuild, name: str) -> None:
    result = suite_build.device_c[name]
    assert result.returncode == 0, f"nvcc --device-c failed for {name}:\n{result.stderr}"


@pytest.mark.parametrize("name", KERNEL_NAMES)
def test_launcher_behind_rtc_guard(name: str) -> None:
    source = _source(name)
    assert re.search(r"^#ifndef __CUDACC_RTC__\s*$", source, re.M), f"{name}: no RTC guard"
    seen, hidden = _split_rtc_guard(source)
    hidden_text = "\n".join(hidden)
    assert re.search(rf"\bvoid\s+launch_{name}\s*\(|\bbool\s+launch_{name}\s*\(", hidden_text), (
        f"{name}: launch_{name}(...) must sit inside #ifndef __CUDACC_RTC__"
    )
    assert "<<<" in hidden_text, f"{name}: the launcher must launch the kernel"
    for line in seen:
        code = _strip_comments(line)
        for pat in HOST_ONLY:
            assert not pat.search(code), f"{name}: host-only code visible to NVRTC: {line!r}"
        m = re.match(r"\s*#\s*include\s*[<\"]([^>\"]+)[>\"]", code)
        if m:
            assert m.group(1) in DEVICE_HEADERS, f"{name}: NVRTC-visible #include {m.group(1)}"


@pytest.mark.parametrize("flags", ["default", "fast_math"])
@pytest.mark.parametrize("name", KERNEL_NAMES)
@pytest.mark.slow
def test_ptxas_no_spills(suite_build: SuiteBuild, name: str, flags: str) -> None:
    result = (suite_build.objects if flags == "default" else suite_build.fast_math)[name]
    assert result.returncode == 0, result.stderr
    entries = parse_ptxas(result.stderr + result.stdout)
    assert entries, f"{name}: ptxas reported no entry function (kernel not instantiated?)"
    for kernel in _global_names(_source(name)):
        mangled = f"{len(kernel)}{kernel}"
        assert any(mangled in e for e in entries), f"{name}: {kernel} not instantiated"
    for info in entries.values():
        assert info.registers > 0, f"{info.mangled}: no register count"
        assert info.spill_stores == 0, f"{info.mangled}: {info.spill_stores} bytes spill stores"
        assert info.spill_loads == 0, f"{info.mangled}: {info.spill_loads} bytes spill loads"


def test_name_expressions_cover_suite() -> None:
    assert set(NAME_EXPRESSIONS) == set(KERNEL_NAMES)


@pytest.mark.parametrize("name", SPEC_KERNELS)
def test_name_expressions_cover_the_specs(name: str) -> None:
    """The table the NVRTC test compiles holds every instantiation the spec asks ktx for."""
    wanted = spec_name_expressions(name)
    assert wanted and set(wanted) <= set(NAME_EXPRESSIONS[name]), (wanted, NAME_EXPRESSIONS[name])


@pytest.mark.parametrize("name", SPEC_KERNELS)
@pytest.mark.slow
def test_ktx_compile_path(name: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Each suite kernel through ``ktx.measure.compile.compile_kernel`` (nvcc), as the harness
    compiles it: the spec's source, flags, include folder and name expressions."""
    if find_nvcc() is None:
        pytest.skip("nvcc is not installed: this test compiles through ktx's nvcc backend")
    monkeypatch.setenv("KTX_CACHE_DIR", str(tmp_path))
    spec = load_spec(KERNELS_DIR / name)
    cand = original_candidate(spec)
    requests = [
        CompileRequest(cand.source, expr, tuple(cand.flags), "90", (str(spec.folder),), "nvcc")
        for expr in spec_name_expressions(name)
    ]
    with ThreadPoolExecutor(max_workers=len(requests)) as pool:
        results = list(pool.map(compile_kernel, requests))
    for req, result in zip(requests, results, strict=True):
        assert result.ok, f"{req.name_expression}: {result.log}"
        assert result.compiler == "nvcc" and not result.dropped_flags
        assert result.lowered_name.startswith("_Z"), f"{req.name_expression}: no lowered name"
        assert Path(result.cubin_path).stat().st_size > 0


@pytest.mark.parametrize("name", KERNEL_NAMES)
def test_nvrtc_compiles(name: str) -> None:
    lib = load_nvrtc()
    if lib is None:
        pytest.skip("libnvrtc not found (set KTX_NVRTC_LIB or KTX_NVRTC_PATH to test NVRTC)")
    options = ["-std=c++17", "-arch=compute_90"]
    include = cuda_include_dir()
    if include:
        options.append(f"-I{include}")
    exprs = NAME_EXPRESSIONS[name]
    result = nvrtc_compile(lib, _source(name), f"{name}.cu", options, exprs)
    assert result.ok, f"NVRTC failed for {name}:\n{result.log}"
    for expr in exprs:
        assert result.lowered.get(expr, "").startswith("_Z"), f"{expr}: no lowered name"
