"""Finding a template kernel's instantiation in an nvcc cubin (issue 18, item 5: moe_sum).

The lookup is by the compiler's own symbol (tests/measure/test_lowered_names.py); the demangled
forms below (CUDA's ``cu++filt`` prints ``void moe_sum_kernel<__nv_bfloat16, (int)2>(T1 *, ...)``,
GNU ``c++filt`` ``void moe_sum_kernel<__nv_bfloat16, 2>(__nv_bfloat16*, ...)``) only name the
closest kernels when a name is not found.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from ktx.measure import compile as compiler
from ktx.measure.compile import (
    CompileRequest,
    compile_kernel,
    demangled_head,
    elf_symbols,
    find_nvcc,
    mangled_head,
    mangled_name,
)
from ktx.measure.types import original_candidate
from ktx.specload import load_spec

FIXTURE = Path(__file__).with_name("fixtures") / "moe_sum_host"
M2 = "_Z14moe_sum_kernelI13__nv_bfloat16Li2EEvPT_PKS1_i"
M4 = "_Z14moe_sum_kernelI13__nv_bfloat16Li4EEvPT_PKS1_i"
CUFILT = {  # what CUDA 13.0's cu++filt prints (quoted in issue 18)
    M2: "void moe_sum_kernel<__nv_bfloat16, (int)2>(T1 *, const T1 *, int)",
    M4: "void moe_sum_kernel<__nv_bfloat16, (int)4>(T1 *, const T1 *, int)",
}
GNUFILT = {  # what binutils' c++filt prints
    M2: "void moe_sum_kernel<__nv_bfloat16, 2>(__nv_bfloat16*, __nv_bfloat16 const*, int)",
    M4: "void moe_sum_kernel<__nv_bfloat16, 4>(__nv_bfloat16*, __nv_bfloat16 const*, int)",
}


@pytest.mark.parametrize(
    ("plain", "head"),
    [
        (CUFILT[M2], "moe_sum_kernel<__nv_bfloat16, (int)2>"),
        (GNUFILT[M2], "moe_sum_kernel<__nv_bfloat16, 2>"),
        ("k(float*, int)", "k"),
        (
            "void ns::k<unsigned int, (bool)1, (unsigned int)3>(T1 *)",
            "ns::k<unsigned int, (bool)1, (unsigned int)3>",
        ),
        ("void a::b<c<(int)2>, (long)-1>(int)", "a::b<c<(int)2>, (long)-1>"),
    ],
)
def test_demangled_head_stops_at_the_parameter_list(plain: str, head: str) -> None:
    assert demangled_head(plain) == head


def _fixture_request() -> CompileRequest:
    spec = load_spec(FIXTURE)
    cand = original_candidate(spec)
    return CompileRequest(cand.source, "moe_sum_host_kernel<__nv_bfloat16, 2>", cand.flags, "90",
                          (str(spec.folder),), "auto")  # fmt: skip


@pytest.mark.slow
@pytest.mark.skipif(not find_nvcc(), reason="no nvcc")
def test_host_launcher_file_compiles_with_nvcc_and_finds_the_instantiation(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """The fixture keeps its launcher outside ``#ifndef __CUDACC_RTC__``: NVRTC (where present)
    refuses it, nvcc compiles it, and its cubin holds TOPK 2 and 4; the lookup must find 2 by
    the compiler's own symbol for the expression, with no demangler at all (one that would
    answer is made to fail the test)."""
    monkeypatch.setenv("KTX_CACHE_DIR", str(tmp_path))

    def no_demangler(names: list[str]) -> list[str]:
        raise AssertionError("the lookup ran a demangler")

    monkeypatch.setattr(compiler, "_demangle", no_demangler)
    result = compile_kernel(_fixture_request())
    assert result.ok, result.log
    assert result.compiler.startswith("nvcc")
    cubin = Path(result.cubin_path).read_bytes()
    kernels = [n for n, info, _ in elf_symbols(cubin) if info & 0xF == 2 and "moe_sum_host_kernel" in n]
    assert sorted(kernels) == sorted([M2.replace("14moe_sum_kernel", "19moe_sum_host_kernel"),
                                      M4.replace("14moe_sum_kernel", "19moe_sum_host_kernel")])  # fmt: skip
    assert result.lowered_name == M2.replace("14moe_sum_kernel", "19moe_sum_host_kernel")
    # the cubin was built for TOPK 2: it does not answer for 4 (the launcher's instantiation);
    # the error's hint (only) demangles
    monkeypatch.undo()
    with pytest.raises(RuntimeError, match="not found"):
        mangled_name(cubin, "moe_sum_host_kernel<__nv_bfloat16, 4>")


@pytest.mark.parametrize(
    ("mangled", "head"),
    [
        (M2, "moe_sum_kernel<__nv_bfloat16, 2>"),
        ("_ZN2ns1kILi2EEEvi", "ns::k<2>"),
        ("_Z1kILb1ELj3EEvv", "k<1, 3>"),
        ("_Z1kILin3EEvv", "k<-3>"),
        ("_ZN3a_b6kernelIfLi8EEEvPKT_PS2_i", "a_b::kernel<float, 8>"),
        ("_Z3fooPfi", "foo"),
        ("_Z1kIPfEvv", None),  # a pointer argument: left to the demanglers
        ("foo", None),
    ],
)
def test_mangled_head_reads_the_common_kernel_names(mangled: str, head: str | None) -> None:
    assert mangled_head(mangled) == head
